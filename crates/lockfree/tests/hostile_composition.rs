//! Composition a user who wants to break the primitives reaches for, where
//! the other test files stop: every blocking wait run from a thread-local
//! destructor that outlives the family's own thread-locals; lock_api's
//! guard methods (`bump`, `unlocked`, `unlocked_fair`, `unlock_fair`) while
//! other threads queue and time out; csp futures and `Alt`s cancelled at
//! every poll point against every form of the other side; and task wakers
//! that drop their future, or poll it again, inside `wake`.
#![cfg(not(loom))]

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, mpsc as std_mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use lockfree_sync::{Fairness, LockApiMutex, Mutex, RawMutex, Semaphore, csp, mpsc};

/// Runs `f` on a thread of its own and fails if it has not returned within
/// `secs` seconds (a hang), or if it panicked.
fn watchdog<R: Send + 'static>(what: &str, secs: u64, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, finished) = std_mpsc::channel();
    let t = thread::spawn(move || {
        let r = f();
        let _ = done.send(());
        r
    });
    match finished.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) | Err(std_mpsc::RecvTimeoutError::Disconnected) => t.join().expect(what),
        Err(std_mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung"),
    }
}

/// Polls `f` up to `polls` times with `waker`: its output if it completed.
fn poll_up_to<F: Future + ?Sized>(
    mut f: Pin<&mut F>,
    polls: usize,
    waker: &Waker,
) -> Option<F::Output> {
    for _ in 0..polls {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(waker)) {
            return Some(v);
        }
    }
    None
}

/// A destructor to run at the thread's exit.
struct AtExit(Option<Box<dyn FnOnce()>>);

impl Drop for AtExit {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

thread_local! {
    static AT_EXIT: RefCell<AtExit> = const { RefCell::new(AtExit(None)) };
}

/// Registers `f` to run when the thread exits. Called before the thread
/// uses any primitive, so that its thread-local is registered first and,
/// destroyed last, outlives the family's own (the thread's waiter node).
fn at_exit_first(f: impl FnOnce() + 'static) {
    AT_EXIT.with(|e| e.borrow_mut().0 = Some(Box::new(f)));
}

/// Makes the thread use every primitive's waits once, so that the family's
/// thread-locals exist and are destroyed before ours.
fn use_every_wait() {
    let m = Mutex::new(());
    let _held = m.lock();
    assert!(m.try_lock_for(Duration::from_millis(1)).is_none());
    let sem = Semaphore::new(0);
    assert!(sem.try_acquire_for(Duration::from_millis(1)).is_err());
    let (mut tx, mut rx) = csp::channel::<u8>();
    assert!(tx.try_send_for(1, Duration::from_millis(1)).is_err());
    assert!(rx.try_recv_for(Duration::from_millis(1)).is_err());
    let (_mtx, mrx) = mpsc::channel::<u8>();
    assert!(mrx.try_recv_for(Duration::from_millis(1)).is_err());
}

/// Every blocking wait, parked (the partner comes late), from a
/// thread-local destructor that runs after the family's thread-locals are
/// gone: each still waits and is woken.
#[test]
fn every_blocking_wait_works_in_a_thread_local_destructor_that_runs_last() {
    watchdog("waits in a destructor", 30, || {
        let m = Arc::new(Mutex::new(0u32));
        let sem = Arc::new(Semaphore::new(0));
        let (mut tx, mut rx) = csp::channel::<u32>();
        let (mut alt_tx, mut alt_rx) = csp::channel::<u32>();
        let (mtx, mrx) = mpsc::channel::<u32>();
        let (reached, step) = std_mpsc::channel::<&str>();
        let held = m.lock();
        let exiting = {
            let (m, sem) = (Arc::clone(&m), Arc::clone(&sem));
            thread::spawn(move || {
                at_exit_first(move || {
                    // Each timed wait runs before the step is reported:
                    // the partner comes only after the report.
                    reached.send("lock").unwrap();
                    *m.lock() += 1;
                    assert!(
                        sem.try_acquire_many_for(2, Duration::from_millis(2))
                            .is_err()
                    );
                    reached.send("acquire").unwrap();
                    sem.acquire_many(2).unwrap().forget();
                    reached.send("recv").unwrap();
                    assert_eq!(rx.recv(), Ok(1));
                    let mut alt = csp::Alt::new(vec![&mut alt_rx]);
                    assert_eq!(alt.try_select_for(Duration::from_millis(2)), None);
                    reached.send("select").unwrap();
                    assert_eq!(alt.select(), (0, Ok(2)));
                    assert_eq!(
                        mrx.try_recv_for(Duration::from_millis(2)),
                        Err(mpsc::TryRecvError::Empty)
                    );
                    reached.send("mpsc").unwrap();
                    assert_eq!(mrx.recv(), Ok(3));
                });
                use_every_wait();
            })
        };
        // Each wait is given time to park before its partner comes.
        let pause = || thread::sleep(Duration::from_millis(20));
        assert_eq!(step.recv().unwrap(), "lock");
        pause();
        drop(held);
        assert_eq!(step.recv().unwrap(), "acquire");
        pause();
        sem.release(2);
        assert_eq!(step.recv().unwrap(), "recv");
        pause();
        tx.send(1).unwrap();
        assert_eq!(step.recv().unwrap(), "select");
        pause();
        alt_tx.send(2).unwrap();
        assert_eq!(step.recv().unwrap(), "mpsc");
        pause();
        mtx.send(3).unwrap();
        exiting.join().expect("the destructor's waits panicked");
        assert_eq!(*m.lock(), 1);
        assert_eq!(sem.available_permits(), 0);
    });
}

/// lock_api's guard methods over [`RawMutex`] (each unlocks and locks
/// again inside one guard), by threads that also lock, time out and hand
/// off with `unlock_fair`: one holder at a time, every lock counted, and
/// the lock free at the end.
#[test]
fn lock_api_guard_methods_keep_exclusion_while_others_queue() {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        watchdog("lock_api guard methods", 60, move || {
            let m = Arc::new(LockApiMutex::const_new(
                RawMutex::with_fairness(fairness),
                0u64,
            ));
            let inside = Arc::new(AtomicUsize::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let (m, inside, stop) =
                        (Arc::clone(&m), Arc::clone(&inside), Arc::clone(&stop));
                    thread::spawn(move || {
                        let enter = || assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders");
                        let leave = || inside.fetch_sub(1, SeqCst);
                        let mut locks = 0u64;
                        let mut i = t;
                        while !stop.load(Relaxed) {
                            i += 1;
                            let mut g = if i % 4 == 0 {
                                match m.try_lock_for(Duration::from_micros(i % 1500)) {
                                    Some(g) => g,
                                    None => continue,
                                }
                            } else {
                                m.lock()
                            };
                            enter();
                            *g += 1;
                            locks += 1;
                            leave();
                            match i % 5 {
                                0 => lock_api::MutexGuard::bump(&mut g),
                                1 => lock_api::MutexGuard::unlocked(&mut g, thread::yield_now),
                                2 => lock_api::MutexGuard::unlocked_fair(&mut g, || ()),
                                3 => {
                                    lock_api::MutexGuard::unlock_fair(g);
                                    continue;
                                }
                                _ => {}
                            }
                            // Held again after the method: still ours alone.
                            enter();
                            leave();
                        }
                        locks
                    })
                })
                .collect();
            thread::sleep(Duration::from_secs(1));
            stop.store(true, Relaxed);
            let locks: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
            assert!(locks > 0);
            assert!(!m.is_locked(), "{fairness:?}: the lock was left held");
            assert_eq!(*m.lock(), locks, "{fairness:?}: a lock lost an update");
        });
    }
}

/// A waker that counts its wakes.
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// Values alive right now, to catch one leaked or dropped twice.
static LIVE: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug)]
struct Counted(u64);

impl Counted {
    fn new(id: u64) -> Self {
        LIVE.fetch_add(1, SeqCst);
        Self(id)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, SeqCst);
    }
}

/// Two senders, each mixing every send form (attempt, timed, a future
/// polled a few times then cancelled or dropped, blocking), against a
/// receiving thread mixing every receive form (a future or an `Alt`'s
/// future polled a few times then dropped, timed receives and selects,
/// attempts): no value is received twice, every value a sender saw
/// delivered is received, and every value is dropped exactly once.
#[test]
fn csp_futures_cancelled_at_every_poll_point_lose_and_duplicate_nothing() {
    watchdog("csp cancellations", 120, || {
        const N: u64 = 20_000;
        /// A sent value whose future was dropped: delivered or not.
        const UNKNOWN: u64 = u64::MAX;
        let (t1, mut r1) = csp::channel::<Counted>();
        let (t2, mut r2) = csp::channel::<Counted>();
        let sender = |mut tx: csp::Sender<Counted>, side: u64| {
            thread::spawn(move || {
                let waker = Waker::from(Arc::new(Counting(AtomicUsize::new(0))));
                let mut delivered = vec![];
                for i in 0..N {
                    let id = side << 32 | i;
                    let value = Counted::new(id);
                    let ok = match i % 5 {
                        0 => tx.try_send(value).is_ok(),
                        1 => tx.try_send_for(value, Duration::from_micros(3)).is_ok(),
                        2 | 3 => {
                            let mut f = Box::pin(tx.send_async(value));
                            match poll_up_to(f.as_mut(), (i % 4) as usize, &waker) {
                                Some(r) => r.is_ok(),
                                None if i % 2 == 0 => f.as_mut().cancel().is_none(),
                                None => {
                                    drop(f);
                                    delivered.push(UNKNOWN);
                                    false
                                }
                            }
                        }
                        _ => tx.send(value).is_ok(),
                    };
                    if ok {
                        delivered.push(id);
                    }
                }
                (tx, delivered)
            })
        };
        let (a, b) = (sender(t1, 0), sender(t2, 1));
        let waker = Waker::from(Arc::new(Counting(AtomicUsize::new(0))));
        let mut got = vec![];
        let mut i = 0usize;
        while !(a.is_finished() && b.is_finished()) {
            i += 1;
            let value = match i % 6 {
                0 => {
                    let mut alt = csp::Alt::new(vec![&mut r1, &mut r2]);
                    let mut f = alt.select_async();
                    poll_up_to(Pin::new(&mut f), i % 3, &waker).map(|(_, r)| r.ok())
                }
                1 => csp::Alt::new(vec![&mut r1, &mut r2])
                    .try_select_for(Duration::from_micros(5))
                    .map(|(_, r)| r.ok()),
                2 => {
                    let mut f = Box::pin(r1.recv_async());
                    poll_up_to(f.as_mut(), i % 4, &waker).map(Result::ok)
                }
                3 => r2.try_recv_for(Duration::from_micros(5)).ok().map(Some),
                4 => csp::Alt::new(vec![&mut r2, &mut r1])
                    .try_select()
                    .map(|(_, r)| r.ok()),
                _ => r1.try_recv().ok().map(Some),
            };
            if let Some(value) = value {
                got.push(value.expect("a sender is gone early").0);
            }
        }
        let (tx1, sent1) = a.join().unwrap();
        let (tx2, sent2) = b.join().unwrap();
        // Values kept for a next receive (a future dropped as it was served).
        got.extend(r1.try_recv().ok().map(|v| v.0));
        got.extend(r2.try_recv().ok().map(|v| v.0));
        got.sort_unstable();
        let received = got.len();
        got.dedup();
        assert_eq!(got.len(), received, "a value was received twice");
        for id in sent1.iter().chain(&sent2).filter(|&&id| id != UNKNOWN) {
            assert!(
                got.binary_search(id).is_ok(),
                "{id:#x} was delivered but never received"
            );
        }
        drop((tx1, tx2, r1, r2));
        assert_eq!(LIVE.load(SeqCst), 0, "a value was leaked");
    });
}

/// A task's future, kept in its waker (an executor that polls inside
/// `wake`, or one that aborts the task when it is woken).
type Task<F> = Arc<std::sync::Mutex<Option<Pin<Box<F>>>>>;

/// The waker of a [`Task`]: polls the future again inside `wake`
/// (`repoll`), or drops it there; what a poll returned goes to `out`.
struct InWake<F: Future> {
    task: Task<F>,
    repoll: bool,
    out: Arc<std::sync::Mutex<Vec<String>>>,
}

impl<F> Wake for InWake<F>
where
    F: Future + Send + 'static,
    F::Output: std::fmt::Debug,
{
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A wake during our own poll (the future wakes itself) is left to
        // that poll.
        let Ok(mut task) = self.task.try_lock() else {
            return;
        };
        if self.repoll {
            let waker = Waker::from(Arc::clone(self));
            if let Some(f) = task.as_mut() {
                if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
                    self.out.lock().unwrap().push(format!("{v:?}"));
                    *task = None;
                }
            }
        } else {
            let aborted = task.take();
            drop(task);
            drop(aborted);
        }
    }
}

/// Polls `f` once as a [`Task`] whose waker acts inside `wake`; returns
/// the task and where its output goes.
fn spawn_in_wake<F>(f: F, repoll: bool) -> (Task<F>, Arc<std::sync::Mutex<Vec<String>>>)
where
    F: Future + Send + 'static,
    F::Output: std::fmt::Debug,
{
    let task: Task<F> = Arc::new(std::sync::Mutex::new(Some(Box::pin(f))));
    let out = Arc::new(std::sync::Mutex::new(vec![]));
    let waker = Waker::from(Arc::new(InWake {
        task: Arc::clone(&task),
        repoll,
        out: Arc::clone(&out),
    }));
    let mut f = task.lock().unwrap();
    if let Poll::Ready(v) = f
        .as_mut()
        .unwrap()
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
    {
        out.lock().unwrap().push(format!("{v:?}"));
        *f = None;
    }
    drop(f);
    (task, out)
}

/// The value sent to a [`Task`]'s receive: its output (`returned`, when
/// the waker polled it to completion), or else kept for the receiver's
/// next receive (`received`), when the waker dropped the future.
fn returned_or_kept(
    out: &std::sync::Mutex<Vec<String>>,
    returned: &str,
    received: Option<u64>,
    sent: u64,
) {
    match out.lock().unwrap().as_slice() {
        [] => assert_eq!(received, Some(sent), "the value was lost"),
        got => assert_eq!(got, [returned]),
    }
}

/// Queued tasks whose wakers drop their future (abort the task) or poll it
/// again inside `wake`, woken by releases, unlocks and sends: no permit is
/// kept for a task that is gone, the lock ends free, and a value handed to
/// a future dropped in its wake is kept for the receiver's next receive.
#[test]
fn wakers_that_drop_or_repoll_their_future_inside_wake_lose_nothing() {
    watchdog("wakers acting in wake", 60, || {
        for repoll in [false, true] {
            let sem = Arc::new(Semaphore::new(0));
            let tasks: Vec<_> = (0..50)
                .map(|i| spawn_in_wake(Arc::clone(&sem).acquire_many_arc_async(1 + i % 3), repoll))
                .collect();
            for _ in 0..40 {
                sem.add_permits(3);
            }
            drop(tasks);
            assert_eq!(sem.available_permits(), 120, "repoll: {repoll}");

            for fairness in [Fairness::Barging, Fairness::Fifo] {
                let m = Arc::new(Mutex::with_fairness(0u32, fairness));
                let held = m.lock();
                let tasks: Vec<_> = (0..50)
                    .map(|_| spawn_in_wake(Arc::clone(&m).lock_arc_async(), repoll))
                    .collect();
                drop(held);
                for _ in 0..5 {
                    drop(m.lock());
                }
                drop(tasks);
                assert!(m.try_lock().is_some(), "{fairness:?}, repoll: {repoll}");
            }

            // The receivers live for the rest of the process: the futures
            // in the tasks borrow them for 'static. Each borrow is made
            // from the raw pointer, and the pointer is used again only once
            // the future holding the borrow is gone (dropped in its wake or
            // by `drop(task)`, or completed).
            let (mut tx, rx) = csp::channel::<u64>();
            let rx = Box::into_raw(Box::new(rx));
            // SAFETY: a leaked, live receiver; no other borrow of it is used
            // while the future's is.
            let (task, out) = spawn_in_wake(unsafe { &mut *rx }.recv_async(), repoll);
            tx.send(7).unwrap();
            drop(task);
            // SAFETY: the future that borrowed it is gone.
            let received = unsafe { &mut *rx }.try_recv();
            returned_or_kept(&out, "Ok(7)", received.ok(), 7);

            let (mut tx2, rx2) = csp::channel::<u64>();
            let rx2 = Box::into_raw(Box::new(rx2));
            // SAFETY: as above; the Alt (leaked too) is not used again
            // once its future is gone.
            let alt = Box::leak(Box::new(csp::Alt::new(unsafe {
                vec![&mut *rx, &mut *rx2]
            })));
            let (task, out) = spawn_in_wake(alt.select_async(), repoll);
            tx2.send(9).unwrap();
            drop(task);
            // SAFETY: as above.
            let received = unsafe { &mut *rx2 }.try_recv();
            returned_or_kept(&out, "(1, Ok(9))", received.ok(), 9);

            let (mtx, mrx) = mpsc::channel::<u64>();
            let mrx = Box::into_raw(Box::new(mrx));
            // SAFETY: as above.
            let (task, out) = spawn_in_wake(unsafe { &mut *mrx }.recv_async(), repoll);
            mtx.send(5).unwrap();
            drop(task);
            // SAFETY: as above.
            let received = unsafe { &*mrx }.try_recv();
            returned_or_kept(&out, "Ok(5)", received.ok(), 5);
        }
    });
}
