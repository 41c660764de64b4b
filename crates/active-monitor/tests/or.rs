#![cfg(not(loom))]
//! `or`'s paths: an operand that runs at once in the calling thread (its
//! monitor idle, its precondition true) and the queued operands that wait;
//! exactly once under threads, operands left unsubmitted, losers' memory.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use active_monitor::{Monitor, Order, or};

/// Runs `f` on a thread; panics if it has not finished within `secs` (a
/// lost item or wake-up fails the test instead of hanging it; the thread
/// is leaked).
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hung: an item or a wake-up was lost"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the test thread panicked (above)"),
    }
}

fn relaxed<T>(data: T) -> Monitor<T> {
    Monitor::builder().order(Order::Relaxed).build(data)
}

/// Holds `m` on another thread (a `call` that lasts until `release` is
/// dropped); returns once it is held.
fn hold<T: Send + 'static>(m: &Arc<Monitor<T>>) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let m = Arc::clone(m);
    let h = thread::spawn(move || {
        m.call(move |_| {
            held_tx.send(()).unwrap();
            let _ = release_rx.recv();
        })
    });
    held_rx.recv().unwrap();
    (release_tx, h)
}

/// Producers put numbered items on two bounded queues, consumers take
/// them with ORs: every item is taken exactly once, whichever path each OR
/// took (at once, after a spin, or queued and woken).
#[test]
fn or_takes_every_item_exactly_once_under_threads() {
    within(60, take_every_item_exactly_once);
}

fn take_every_item_exactly_once() {
    const PRODUCERS: u64 = 2;
    const CONSUMERS: u64 = 3;
    const ITEMS: u64 = 3_000; // per producer
    const CAP: usize = 4;
    for order in [Order::Strict, Order::Relaxed] {
        let qs: Arc<[Monitor<VecDeque<u64>>; 2]> =
            Arc::new([(); 2].map(|_| Monitor::builder().order(order).build(VecDeque::new())));
        let taken: Arc<Vec<AtomicUsize>> = Arc::new(
            (0..PRODUCERS * ITEMS)
                .map(|_| AtomicUsize::new(0))
                .collect(),
        );
        let total = PRODUCERS * ITEMS;
        let per_consumer = total / CONSUMERS;
        let mut hs = Vec::new();
        for p in 0..PRODUCERS {
            let qs = Arc::clone(&qs);
            hs.push(thread::spawn(move || {
                for k in 0..ITEMS {
                    let x = p * ITEMS + k;
                    drop(qs[(k % 2) as usize].when(|q| q.len() < CAP, move |q| q.push_back(x)));
                }
                // Strict order: this waits for the last put.
                qs[0].call(|_| ());
            }));
        }
        for c in 0..CONSUMERS {
            let (qs, taken) = (Arc::clone(&qs), Arc::clone(&taken));
            let n = if c == 0 {
                total - per_consumer * (CONSUMERS - 1)
            } else {
                per_consumer
            };
            hs.push(thread::spawn(move || {
                let [a, b] = &*qs;
                for _ in 0..n {
                    let (i, x) = or((
                        a.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
                        b.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
                    ))
                    .unwrap()
                    .wait();
                    // Producers alternate: item k of a producer went to k % 2.
                    assert_eq!(i as u64, (x % ITEMS) % 2, "item {x} from the wrong queue");
                    taken[x as usize].fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for h in hs {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        for (x, t) in taken.iter().enumerate() {
            assert_eq!(
                t.load(Ordering::Relaxed),
                1,
                "{order:?}: item {x} taken {t:?} times"
            );
        }
        assert_eq!(qs[0].call(|q| q.len()) + qs[1].call(|q| q.len()), 0);
    }
}

/// The first operand runs at once: the second is never evaluated, never
/// run, and never submitted (its closures are dropped by `or`, not left
/// queued on its busy monitor).
#[test]
fn an_or_whose_first_operand_runs_at_once_never_submits_the_second() {
    let a = relaxed(vec![1]);
    let b = Arc::new(relaxed(vec![2]));
    let (release, holder) = hold(&b);
    let looked = Arc::new(AtomicBool::new(false));
    let sentinel = Arc::new(());
    let (l, s) = (Arc::clone(&looked), Arc::clone(&sentinel));
    let c = or((
        a.op(|v| !v.is_empty(), |v| v.pop().unwrap()),
        b.op(
            move |v| {
                l.store(true, Ordering::Relaxed);
                !v.is_empty()
            },
            move |v| {
                let _keep = &s;
                v.pop().unwrap()
            },
        ),
    ))
    .unwrap();
    assert!(c.is_done(), "the first operand could run at once");
    assert_eq!(
        Arc::strong_count(&sentinel),
        1,
        "the second operand was queued on its busy monitor"
    );
    drop(release);
    holder.join().unwrap();
    assert_eq!(c.wait(), (0, 1));
    assert!(
        !looked.load(Ordering::Relaxed),
        "the second precondition was evaluated"
    );
    assert_eq!(b.call(|v| v.clone()), [2], "the second operand ran");
}

/// Both operands hold: only the first runs, and the second monitor keeps
/// its item whatever runs there later.
#[test]
fn an_or_with_every_operand_ready_runs_only_the_first() {
    let a = relaxed(vec![1]);
    let b = relaxed(vec![2]);
    let c = or((
        a.op(|v| !v.is_empty(), |v| v.pop().unwrap()),
        b.op(|v| !v.is_empty(), |v| v.pop().unwrap()),
    ))
    .unwrap();
    assert_eq!(c.wait(), (0, 1));
    b.submit(|v| v.push(3));
    assert_eq!(b.call(|v| v.clone()), [2, 3]);
    assert_eq!(a.call(|v| v.len()), 0);
}

/// The first operand's monitor is busy: the OR does not wait for it, the
/// second operand runs at once; the first is never run.
#[test]
fn an_or_passes_over_a_busy_monitor() {
    let a = Arc::new(relaxed(vec![1]));
    let b = relaxed(vec![2]);
    let (release, holder) = hold(&a);
    let c = or((
        a.op(|v| !v.is_empty(), |v| v.pop().unwrap()),
        b.op(|v| !v.is_empty(), |v| v.pop().unwrap()),
    ))
    .unwrap();
    assert!(c.is_done(), "the OR waited for the busy monitor");
    drop(release);
    holder.join().unwrap();
    assert_eq!(c.wait(), (1, 2));
    assert_eq!(a.call(|v| v.clone()), [1]);
}

/// A value whose drop panics (unless the thread already unwinds).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("drop of an unrun operand");
        }
    }
}

/// `or` drops the operands left unsubmitted; a panic in that drop resumes
/// in the completion's waiter (not out of `or`, which would lose the result
/// of the operand that ran), and both monitors keep serving.
#[test]
fn a_panicking_drop_of_an_unsubmitted_operand_resumes_in_the_waiter() {
    let a = relaxed(0u32);
    let b = relaxed(0u32);
    let body = PanicOnDrop;
    let made = catch_unwind(AssertUnwindSafe(|| {
        or((
            b.op(
                |n| *n > 0,
                move |n| {
                    let _keep = &body;
                    *n
                },
            ),
            a.op(|_| true, |n| *n + 1),
        ))
    }));
    let c = made.expect("or panicked").unwrap();
    let waited = catch_unwind(AssertUnwindSafe(|| c.wait())).unwrap_err();
    assert_eq!(
        waited.downcast_ref::<&str>().copied(),
        Some("drop of an unrun operand")
    );
    assert_eq!(a.call(|n| *n), 0);
    assert_eq!(b.call(|n| *n), 0);
}

/// `n` ORs that each wait (neither operand holds when made), then are
/// taken on `a` by a later task; their operands on `b`, where nothing ever
/// runs, are swept: how many are still alive after.
fn queued_losers_left(n: usize) -> usize {
    let a = relaxed(0u64);
    let b = relaxed(0u64);
    let sentinel = Arc::new(());
    for _ in 0..n {
        let s = Arc::clone(&sentinel);
        let never = b.op(
            move |_| {
                let _ = &s;
                false
            },
            |n| *n,
        );
        let c = or((
            never,
            a.op(
                |n| *n > 0,
                |n| {
                    *n -= 1;
                    *n
                },
            ),
        ))
        .unwrap();
        assert!(!c.is_done());
        a.submit(|n| *n += 1);
        assert_eq!(c.wait().0, 1);
    }
    Arc::strong_count(&sentinel) - 1
}

/// Losers' memory grows with the live ORs, not with their history, on the
/// queued path too.
#[test]
fn queued_losers_do_not_pile_up() {
    let small = queued_losers_left(1_000);
    let large = queued_losers_left(10_000);
    assert!(
        small <= 64 && large <= 64,
        "{small} / {large} dead operands still filed"
    );
}

/// A waiting OR is woken when an item arrives on either monitor, from
/// another thread, whichever monitor it is.
#[test]
fn a_waiting_or_is_woken_by_either_monitor() {
    for which in 0..2 {
        let qs = Arc::new([(); 2].map(|_| relaxed(VecDeque::<u32>::new())));
        let qs1 = Arc::clone(&qs);
        let put = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            qs1[which].submit(|q| q.push_back(7));
        });
        let [a, b] = &*qs;
        let c = or((
            a.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
            b.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
        ))
        .unwrap();
        let (tx, rx) = mpsc::channel();
        let waiter = thread::spawn(move || tx.send(c.wait()).unwrap());
        let got = rx.recv_timeout(Duration::from_secs(5));
        assert_eq!(got, Ok((which, 7)), "a waiting OR was not woken");
        put.join().unwrap();
        waiter.join().unwrap();
    }
}

/// A sum check over many ORs with a producer that also ORs its puts'
/// results: nothing lost, nothing doubled (a smoke test of both paths with
/// async consumers).
#[test]
fn async_ors_on_a_multi_thread_runtime_take_every_item_once() {
    within(60, async_ors_take_every_item_once);
}

fn async_ors_take_every_item_once() {
    const ITEMS: u64 = 2_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let qs = Arc::new([(); 2].map(|_| relaxed(VecDeque::<u64>::new())));
    let sum = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..2u64 {
            let (qs, sum) = (Arc::clone(&qs), Arc::clone(&sum));
            tasks.push(tokio::spawn(async move {
                for _ in 0..ITEMS / 2 {
                    let [a, b] = &*qs;
                    let (_, x) = or((
                        a.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
                        b.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
                    ))
                    .unwrap()
                    .await
                    .unwrap();
                    sum.fetch_add(x, Ordering::Relaxed);
                }
                t
            }));
        }
        let qs1 = Arc::clone(&qs);
        let producer = thread::spawn(move || {
            for k in 1..=ITEMS {
                qs1[(k % 2) as usize].submit(move |q| q.push_back(k));
            }
        });
        for t in tasks {
            t.await.unwrap();
        }
        producer.join().unwrap();
    });
    assert_eq!(sum.load(Ordering::Relaxed), ITEMS * (ITEMS + 1) / 2);
}

/// An item that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An AND whose other operand is discarded with its monitor: the operand
/// that ran has run (its monitor changed), and its result is dropped once,
/// with the AND's completion (as `and`'s docs say; found by review, when
/// they said nothing and `Discarded` read "a task that never ran").
#[test]
fn an_and_discarded_keeps_what_ran_and_drops_its_results_once() {
    use active_monitor::{Discarded, and};
    let drops = Arc::new(AtomicUsize::new(0));
    // Relaxed: under strict order this thread's next submission elsewhere
    // would wait for the AND first (rule 3).
    let a: Monitor<Vec<Counted>> = Monitor::builder().order(Order::Relaxed).build(Vec::new());
    let b: Monitor<Vec<Counted>> = Monitor::builder().order(Order::Relaxed).build(Vec::new());
    let both = and((
        a.op(|v| !v.is_empty(), |v| v.pop().expect("not empty")),
        b.op(|v| !v.is_empty(), |v| v.pop().expect("not empty")),
    ))
    .unwrap_or_else(|_| unreachable!("two monitors"));
    b.call(|v| v.push(Counted(Arc::clone(&drops))));
    assert!(b.call(|v| v.is_empty()), "b's operand ran");
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(a);
    assert_eq!(both.wait_result().err(), Some(Discarded));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "b's result, dropped once");
}
