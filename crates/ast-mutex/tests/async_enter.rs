//! `enter_async` and `enter_arc_async`: tasks wait in the same queues as
//! threads, on tokio and on futures' executor, and dropping a future at any
//! point loses no lock handoff, wake-up or memory.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use ast_mutex::{AstMutex, Config, WakeMode};

ast_mutex::states! { enum Buf { Empty, Mid, Full } }

const MODES: [WakeMode; 3] = [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast];
const CAP: usize = 4;

type Buffer = AstMutex<Buf, VecDeque<u64>>;

fn buffer(mode: WakeMode) -> Arc<Buffer> {
    let config = Config::new().wake_mode(mode);
    Arc::new(AstMutex::with_config(
        Buf::Empty,
        VecDeque::with_capacity(CAP),
        config,
    ))
}

fn level(q: &VecDeque<u64>) -> Buf {
    match q.len() {
        0 => Buf::Empty,
        CAP => Buf::Full,
        _ => Buf::Mid,
    }
}

/// Tokio tasks put, OS threads get: every item arrives once.
#[test]
fn tokio_tasks_and_threads_share_a_bounded_buffer() {
    const PER: u64 = 2_000;
    for mode in MODES {
        let buf = buffer(mode);
        let getters: Vec<_> = (0..2)
            .map(|_| {
                let buf = Arc::clone(&buf);
                thread::spawn(move || {
                    let mut sum = 0;
                    for _ in 0..PER {
                        let mut g = buf.enter(Buf::Mid | Buf::Full);
                        sum += g.pop_front().unwrap();
                        let next = level(&g);
                        g.exit(next);
                    }
                    sum
                })
            })
            .collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        rt.block_on(async {
            let putters: Vec<_> = (0..4)
                .map(|p| {
                    let buf = Arc::clone(&buf);
                    tokio::spawn(async move {
                        for i in 0..PER / 2 {
                            // The owned guard is Send: held across no await
                            // here, but the future holding it is spawned.
                            let mut g = buf.enter_arc_async(Buf::Empty | Buf::Mid).await;
                            g.push_back(p * PER + i);
                            let next = level(&g);
                            g.exit(next);
                        }
                    })
                })
                .collect();
            for p in putters {
                p.await.unwrap();
            }
        });
        let got: u64 = getters.into_iter().map(|g| g.join().unwrap()).sum();
        let want: u64 = (0..4)
            .flat_map(|p| (0..PER / 2).map(move |i| p * PER + i))
            .sum();
        assert_eq!(got, want, "{mode:?}");
        assert_eq!(buf.state(), Some(Buf::Empty));
        assert_eq!(buf.__test_waiter_table_size(), (0, 0));
    }
}

/// futures' executor: tasks on their own threads, ping-pong through states
/// with `enter_async`, against a thread using `enter`.
#[test]
fn futures_executor_ping_pong_with_a_thread() {
    ast_mutex::states! { enum Turn { Ping, Pong } }
    for mode in MODES {
        let config = Config::new().wake_mode(mode).spins(0).yields(0);
        let m = Arc::new(AstMutex::with_config(Turn::Ping, 0u32, config));
        let task = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                futures::executor::block_on(async {
                    for _ in 0..500 {
                        let mut g = m.enter_async(Turn::Pong).await;
                        *g += 1;
                        g.exit(Turn::Ping);
                    }
                })
            })
        };
        for _ in 0..500 {
            let mut g = m.enter(Turn::Ping);
            *g += 1;
            g.exit(Turn::Pong);
        }
        task.join().unwrap();
        assert_eq!(*m.enter(Turn::Ping), 1000, "{mode:?}");
    }
}

/// A waker that counts its clones alive and its wakes.
struct Counting(AtomicUsize);
impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// A future queued for B, then notified by the exit to B (woken to
/// compete; in Handoff mode, then polled while the lock is held and handed
/// the lock by the next exit to B), then dropped without being polled
/// again: the lock or the wake-up passes to the thread waiting for B behind
/// it.
#[test]
fn a_future_dropped_after_it_was_notified_passes_the_lock_on() {
    for mode in MODES {
        let config = Config::new().wake_mode(mode).spins(0).yields(0);
        let m = Arc::new(AstMutex::with_config(Buf::Empty, 0u32, config));
        let holder = m.enter(Buf::Empty);
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counting));
        let mut f = m.enter_async(Buf::Full);
        assert!(poll_once(&mut f, &waker).is_pending());
        assert_eq!(m.__test_waiter_table_size(), (1, 1));
        let (done, finished) = std::sync::mpsc::channel();
        let thread_waiter = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut g = m.enter(Buf::Full);
                *g += 1;
                g.exit(Buf::Empty);
                done.send(()).unwrap();
            })
        };
        while m.__test_waiter_table_size().1 < 2 {
            thread::yield_now();
        }
        holder.exit(Buf::Full); // notifies the future first: it came first
        assert_eq!(
            counting.0.load(Ordering::Relaxed),
            1,
            "{mode:?}: task woken"
        );
        if mode == WakeMode::Handoff {
            // Woken to compete, not handed the lock: it is not running yet.
            // Polled while the lock is held, it queues again in its place,
            // and the next exit to Full hands it the lock.
            assert!(!m.is_locked(), "Handoff: woken to compete first");
            let g = m.enter(Buf::Full);
            assert!(poll_once(&mut f, &waker).is_pending());
            g.exit(Buf::Full);
            assert_eq!(counting.0.load(Ordering::Relaxed), 2, "task woken again");
            assert!(m.is_locked(), "handed to the future");
        }
        drop(f);
        finished
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| {
                panic!("{mode:?}: the thread behind the dropped future was stranded")
            });
        thread_waiter.join().unwrap();
        assert_eq!(*m.enter(Buf::Empty), 1, "{mode:?}");
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
        drop(waker);
        assert_eq!(Arc::strong_count(&counting), 1, "no waker clone kept");
    }
}

/// Waits for a state that never comes, each cancelled (200 by a tokio
/// timeout, 10,000 polled once and dropped): nothing stays queued, and no
/// waker clone is kept.
#[test]
fn cancelled_async_waits_leave_nothing_behind() {
    use futures::FutureExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let m = Arc::new(AstMutex::new(Buf::Empty, ()));
    rt.block_on(async {
        for _ in 0..200 {
            let r = tokio::time::timeout(Duration::from_micros(10), m.enter_async(Buf::Full)).await;
            assert!(r.is_err());
        }
    });
    assert_eq!(m.__test_waiter_table_size(), (0, 0));
    for _ in 0..10_000 {
        assert!(m.enter_async(Buf::Full).now_or_never().is_none());
    }
    assert_eq!(m.__test_waiter_table_size(), (0, 0));

    let counting = Arc::new(Counting(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counting));
    for _ in 0..1_000 {
        let mut f = m.enter_arc_async(Buf::Full);
        assert!(poll_once(&mut f, &waker).is_pending());
        drop(f);
    }
    assert_eq!(m.__test_waiter_table_size(), (0, 0));
    assert_eq!(Arc::strong_count(&counting), 2, "only ours and `waker`");
}

/// A future polled again with another waker wakes the new one.
#[test]
fn the_latest_waker_is_woken() {
    let m = AstMutex::new(Buf::Empty, ());
    let (a, b) = (
        Arc::new(Counting(AtomicUsize::new(0))),
        Arc::new(Counting(AtomicUsize::new(0))),
    );
    let (wa, wb) = (Waker::from(Arc::clone(&a)), Waker::from(Arc::clone(&b)));
    let mut f = m.enter_async(Buf::Full);
    assert!(poll_once(&mut f, &wa).is_pending());
    assert!(poll_once(&mut f, &wb).is_pending());
    m.enter(Buf::Empty).exit(Buf::Full);
    assert_eq!(
        (a.0.load(Ordering::Relaxed), b.0.load(Ordering::Relaxed)),
        (0, 1)
    );
    let Poll::Ready(g) = poll_once(&mut f, &wb) else {
        panic!("woken for Full, which is free");
    };
    assert_eq!(g.entered_in(), Buf::Full);
}

/// An `ArcAstGuard` held across an `.await` in a spawned task (it is Send).
#[test]
fn an_owned_guard_is_held_across_an_await() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let m = Arc::new(AstMutex::new(Buf::Empty, 0u32));
    rt.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let m = Arc::clone(&m);
                tokio::spawn(async move {
                    let mut g = m.enter_arc_async(Buf::Empty).await;
                    tokio::task::yield_now().await;
                    *g += 1;
                    g.exit(Buf::Empty);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(*m.enter(Buf::Empty), 8);
}

/// Broadcast: one exit wakes every waiter of the state (here four tasks,
/// whose wakers count); Compete and Handoff wake one.
#[test]
fn broadcast_wakes_every_waiter_of_the_state_at_once() {
    for (mode, woken) in [
        (WakeMode::Broadcast, 4),
        (WakeMode::Compete, 1),
        (WakeMode::Handoff, 1),
    ] {
        let config = Config::new().wake_mode(mode);
        let m = AstMutex::with_config(Buf::Empty, 0u32, config);
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counting));
        let mut futures: Vec<_> = (0..4)
            .map(|_| m.enter_async(Buf::Full | Buf::Mid))
            .collect();
        for f in &mut futures {
            assert!(poll_once(f, &waker).is_pending());
        }
        m.enter(Buf::Empty).exit(Buf::Full);
        assert_eq!(counting.0.load(Ordering::Relaxed), woken, "{mode:?}");
        // Each gets in, in turn, and leaves the gate open.
        for f in &mut futures {
            let g = loop {
                if let Poll::Ready(g) = poll_once(f, &waker) {
                    break g;
                }
            };
            g.exit(Buf::Full);
        }
        assert_eq!(m.__test_waiter_table_size(), (0, 0), "{mode:?}");
    }
}

/// Compete mode: a woken waiter that keeps losing the lock to a barging
/// thread is handed the lock once 32 exits have passed it, so it cannot
/// lose for ever: at once if it runs (here: is polled after each loss, and
/// queues again), and once it has waited 100 ms for a CPU if it does not
/// (a task not polled: before that the lock is not held for it), by one of
/// the 32 exits after that (exits read the clock every 32 passes).
fn passed_by_32_exits(polled: bool) {
    let m = AstMutex::new(Buf::Empty, 0u32);
    let counting = Arc::new(Counting(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counting));
    let mut f = m.enter_async(Buf::Full);
    assert!(poll_once(&mut f, &waker).is_pending());
    // Before the exit that wakes f: the mutex's own note of the wake-up is
    // later.
    let woke = std::time::Instant::now();
    // An exit that wakes or passes f, then a barging thread that takes the
    // lock first and moves on, if f was not handed it.
    let pass = || {
        m.enter(Buf::Empty).exit(Buf::Full);
        if let Some(g) = m.try_enter(Buf::Full) {
            g.exit(Buf::Empty);
            true
        } else {
            false
        }
    };
    for loss in 1..=32 {
        assert!(pass(), "released for f to compete");
        let woken = if polled { loss } else { 1 };
        assert_eq!(counting.0.load(Ordering::Relaxed), woken);
        if polled {
            assert!(poll_once(&mut f, &waker).is_pending(), "f lost");
        }
    }
    if polled {
        m.enter(Buf::Empty).exit(Buf::Full);
    } else {
        // Until f has waited 100 ms (and most likely for a while after:
        // the test thread can be kept from running), exits pass it: it
        // has not run yet.
        let mut handed = false;
        for _ in 0..100 {
            handed = !pass();
            if handed {
                assert!(
                    woke.elapsed() >= Duration::from_millis(100),
                    "held for a task woken < 100 ms ago"
                );
                break;
            }
        }
        if !handed {
            thread::sleep(Duration::from_millis(120));
        }
        // One of the next 32 exits reads the clock and holds the lock.
        let mut exits = 0;
        while !handed {
            exits += 1;
            m.enter(Buf::Empty).exit(Buf::Full);
            handed = m.is_locked();
            if handed {
                break;
            }
            assert!(exits < 32, "not held for f within 32 exits");
            m.try_enter(Buf::Full)
                .expect("free in Full")
                .exit(Buf::Empty);
        }
    }
    assert!(m.is_locked(), "handed to f this time");
    assert!(
        m.try_enter(Buf::Full).is_none(),
        "no barging past a handoff"
    );
    let Poll::Ready(g) = poll_once(&mut f, &waker) else {
        panic!("f was handed the lock");
    };
    assert_eq!(g.entered_in(), Buf::Full);
}

#[test]
fn a_waiter_passed_by_32_exits_is_handed_the_lock() {
    passed_by_32_exits(true);
}

#[test]
fn a_woken_task_not_polled_is_handed_the_lock_after_32_passes_and_100_ms() {
    passed_by_32_exits(false);
}

/// Two woken tasks not polled, one first in line for Full and one for Mid,
/// while exits alternate between the two states (each followed by a
/// barging thread that takes the free lock and leaves it Empty): exits
/// that skip the table count their passes per state, so once 32 exits to
/// its state have passed each and it has waited 100 ms more, each is
/// handed the lock within 32 more exits to its state (one of the 32 reads
/// the clock). With one count for all states, every 32nd skipping exit was
/// a Mid exit, and the Full task was never counted, so never handed the
/// lock.
#[test]
fn woken_tasks_of_alternating_states_are_each_handed_the_lock() {
    let m = AstMutex::new(Buf::Empty, 0u32);
    let waker = Waker::from(Arc::new(Counting(AtomicUsize::new(0))));
    let mut full = m.enter_async(Buf::Full);
    let mut mid = m.enter_async(Buf::Mid);
    assert!(poll_once(&mut full, &waker).is_pending());
    assert!(poll_once(&mut mid, &waker).is_pending());
    // Wake both (they are not polled again until handed the lock).
    for s in [Buf::Full, Buf::Mid] {
        m.enter(Buf::Empty).exit(s);
        m.try_enter(s)
            .expect("released to compete")
            .exit(Buf::Empty);
    }
    // Rounds of exits to pass each task 32 times (the exit that counts
    // the 32nd pass starts its patience), then its 100 ms, then 32 more.
    const PASSED: usize = 34;
    let (mut full_in, mut mid_in) = (None, None);
    for round in 0..PASSED + 34 {
        if round == PASSED {
            thread::sleep(Duration::from_millis(120));
        }
        for (state, f, entered) in [
            (Buf::Full, &mut full, &mut full_in),
            (Buf::Mid, &mut mid, &mut mid_in),
        ] {
            if entered.is_some() {
                continue;
            }
            m.enter(Buf::Empty).exit(state);
            match m.try_enter(state) {
                Some(g) => g.exit(Buf::Empty),
                None => {
                    assert!(m.is_locked(), "handed to the {state:?} task");
                    let Poll::Ready(g) = poll_once(f, &waker) else {
                        panic!("the {state:?} task was handed the lock");
                    };
                    g.exit(Buf::Empty);
                    *entered = Some(round);
                }
            }
        }
    }
    assert!(
        full_in.is_some() && mid_in.is_some(),
        "handed the lock within 34 exits to its state after its patience: \
         Full {full_in:?}, Mid {mid_in:?}"
    );
}

/// A thread that parks while the lock is free in a state whose woken first
/// in line has not run (a task not polled) wakes the next waiter of that
/// state: the lock does not idle until the first one's executor polls it.
#[test]
fn a_thread_that_parks_wakes_the_next_in_line_past_a_woken_task() {
    let m = Arc::new(AstMutex::new(Buf::Empty, Vec::new()));
    let waker = Waker::from(Arc::new(Counting(AtomicUsize::new(0))));
    let mut f = m.enter_async(Buf::Full);
    assert!(
        poll_once(&mut f, &waker).is_pending(),
        "f is first in line for Full"
    );
    // A thread that enters in `want`, notes `name` and exits in `next`.
    let enter_note_exit = |want: Buf, name: &'static str, next: Buf| {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            let mut g = m.enter(want);
            g.push(name);
            g.exit(next);
        })
    };
    let second = enter_note_exit(Buf::Full, "second", Buf::Mid);
    while m.__test_waiter_table_size() != (1, 2) {
        thread::sleep(Duration::from_millis(1));
    }
    m.enter(Buf::Empty).exit(Buf::Full); // wakes f, which is not polled
    // Parks (the lock is free in Full), and wakes `second` on its way.
    let third = enter_note_exit(Buf::Mid, "third", Buf::Full);
    for _ in 0..10_000 {
        if second.is_finished() && third.is_finished() {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let done = second.is_finished() && third.is_finished();
    // Let f in, so that a failure does not leave the threads hanging.
    let g = loop {
        if let Poll::Ready(g) = poll_once(&mut f, &waker) {
            break g;
        }
        thread::sleep(Duration::from_millis(1));
    };
    assert!(
        done,
        "the waiters behind the woken task idled until it was polled"
    );
    assert_eq!(*g, ["second", "third"]);
    g.exit(Buf::Empty);
    second.join().unwrap();
    third.join().unwrap();
}

/// A thread-local destructor waits on the mutex behind a woken task that is
/// never polled: the destructor's thread parks, is woken ahead of the task
/// by a waiter that queues while the lock is free, enters, and its thread
/// ends; the task, polled afterwards, enters too.
#[test]
fn a_thread_local_destructor_is_woken_ahead_of_a_woken_task() {
    type Log = AstMutex<Buf, Vec<&'static str>>;
    /// Enters when dropped, then says so (the thread's `JoinHandle` says
    /// finished before its thread-local destructors run).
    struct EnterOnExit(Arc<Log>, std::sync::mpsc::Sender<()>);
    impl Drop for EnterOnExit {
        fn drop(&mut self) {
            let mut g = self.0.enter(Buf::Full);
            g.push("destructor");
            g.exit(Buf::Mid);
            self.1.send(()).unwrap();
        }
    }
    thread_local! {
        static ON_EXIT: std::cell::RefCell<Option<EnterOnExit>> =
            const { std::cell::RefCell::new(None) };
    }
    let m = Arc::new(AstMutex::new(Buf::Empty, Vec::new()));
    let waker = Waker::from(Arc::new(Counting(AtomicUsize::new(0))));
    let mut f = m.enter_async(Buf::Full);
    assert!(poll_once(&mut f, &waker).is_pending(), "f is first in line");
    let (entered, destructor_entered) = std::sync::mpsc::channel();
    let t = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            ON_EXIT.with(|s| *s.borrow_mut() = Some(EnterOnExit(m, entered)));
        })
    };
    while m.__test_waiter_table_size() != (1, 2) {
        thread::sleep(Duration::from_millis(1));
    }
    m.enter(Buf::Empty).exit(Buf::Full); // wakes f, which is not polled
    // Queues while the lock is free in Full (and gives up after 1 ms): it
    // wakes the destructor's thread on its way.
    assert!(
        m.try_enter_for(Buf::Empty, Duration::from_millis(1))
            .is_none()
    );
    let done = destructor_entered.recv_timeout(Duration::from_secs(10));
    let poll_until_ready = |f: &mut _| loop {
        if let Poll::Ready(g) = poll_once(f, &waker) {
            break g;
        }
        thread::sleep(Duration::from_millis(1));
    };
    if done.is_err() {
        // Let f in and out first, so that the failure does not hang.
        poll_until_ready(&mut f).exit(Buf::Full);
        t.join().unwrap();
        panic!("the destructor's thread idled until the task was polled");
    }
    m.enter(Buf::Mid).exit(Buf::Full);
    let g = poll_until_ready(&mut f);
    assert_eq!(*g, ["destructor"]);
    drop(g);
    t.join().unwrap();
}

/// The waiters that accept a state are served in arrival order whatever
/// their entry sets (a FIFO per state across groups).
#[test]
fn waiters_of_a_state_are_served_in_arrival_order_across_sets() {
    for mode in [WakeMode::Compete, WakeMode::Handoff] {
        let m = AstMutex::with_config(Buf::Empty, 0u32, Config::new().wake_mode(mode));
        let sets = [
            Buf::Mid | Buf::Full,
            Buf::Full.into(),
            Buf::Full | Buf::Empty,
        ];
        let wakers: Vec<_> = (0..3)
            .map(|_| Arc::new(Counting(AtomicUsize::new(0))))
            .collect();
        let holder = m.enter(Buf::Empty);
        let mut futures: Vec<_> = sets.iter().map(|&s| m.enter_async(s)).collect();
        for (f, w) in futures.iter_mut().zip(&wakers) {
            assert!(poll_once(f, &Waker::from(Arc::clone(w))).is_pending());
        }
        holder.exit(Buf::Full);
        for i in 0..3 {
            let woken: Vec<_> = wakers.iter().map(|w| w.0.load(Ordering::Relaxed)).collect();
            let mut want = vec![0; 3];
            want[..=i].iter_mut().for_each(|x| *x = 1);
            assert_eq!(woken, want, "{mode:?}: wake {i}");
            let Poll::Ready(g) = poll_once(&mut futures[i], &Waker::from(Arc::clone(&wakers[i])))
            else {
                panic!("{mode:?}: waiter {i} woken for a free Full");
            };
            drop(g); // back to Full: the next in line
        }
    }
}

/// `exit_and_enter_async`: a task alternates with a thread through the
/// states, keeping its place as a Condvar waiter would; the owned form too.
#[test]
fn exit_and_enter_async_alternates_with_a_thread() {
    ast_mutex::states! { enum Turn { Ping, Pong } }
    for mode in MODES {
        let config = Config::new().wake_mode(mode).spins(0).yields(0);
        let m = Arc::new(AstMutex::with_config(Turn::Ping, 0u32, config));
        let thread = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut g = m.enter_arc(Turn::Pong);
                for _ in 0..199 {
                    *g += 1;
                    g = g.exit_and_enter(Turn::Ping, Turn::Pong);
                }
                *g += 1;
                g.exit(Turn::Ping);
            })
        };
        futures::executor::block_on(async {
            let mut g = m.enter_async(Turn::Ping).await;
            for i in 0..200 {
                assert_eq!(*g, 2 * i);
                *g += 1;
                g = g.exit_and_enter_async(Turn::Pong, Turn::Ping).await;
            }
            assert_eq!(*g, 400, "{mode:?}");
        });
        thread.join().unwrap();
    }
}
