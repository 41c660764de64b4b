//! User callbacks that the family runs one after another (the results
//! nobody took that an operation drops at its end, those a park hands to
//! the `active-monitor-deliver` thread, the task wakers it wakes), one of
//! which panics: the next callback must run as if the panic had not
//! happened. A panic caught in one and kept for later must not unwind out
//! of a monitor operation the next one makes, half way through its work.
#![cfg(not(loom))]
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use active_monitor::{Monitor, Order};
use sync_core::testing::{ended_within, holds_within};

/// A result whose `Drop` returns a lease in two steps: a call of the
/// monitor that books it (`y`), then a permit of the pool it came from.
struct Lease {
    y: Arc<Monitor<u64>>,
    pool: Arc<lockfree_sync::Semaphore>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.y.call(|n| *n += 1);
        self.pool.add_permits(1);
    }
}

/// A result whose `Drop` panics.
struct Bomb(Arc<AtomicUsize>);

impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("a result's drop panics");
    }
}

fn built<T: Send + 'static>(t: T) -> Arc<Monitor<T>> {
    Arc::new(Monitor::builder().order(Order::Relaxed).build(t))
}

/// Has `z`'s serve keep a `Lease` and then a `Bomb`, both results nobody
/// took (on the calling thread, which is inside a body of another monitor
/// or holds none), dropped newest first: the bomb, then the lease.
fn keep_a_lease_then_a_bomb(
    z: &Arc<Monitor<u64>>,
    y: &Arc<Monitor<u64>>,
    pool: &Arc<lockfree_sync::Semaphore>,
    bombs: &Arc<AtomicUsize>,
) {
    let (z2, y, pool, bombs) = (z.clone(), y.clone(), pool.clone(), bombs.clone());
    z.call(move |_| {
        // Queued behind this body: run by its serve, results kept.
        drop(z2.submit(move |_| Lease { y, pool }));
        drop(z2.submit(move |_| Bomb(bombs)));
    });
}

/// At the end of an operation, the results nobody took are dropped newest
/// first; the first one's `Drop` panics (kept, to resume at the end of the
/// operation), and the next one's `Drop` calls a monitor (idle: inline),
/// whose end resumed that panic inside it. The lease's second step never
/// ran: the pool lost its permit, and the next acquire waited for ever.
/// The operation itself must still end with the panic (the contract), but
/// the lease's `Drop` must complete.
#[test]
fn a_result_s_drop_panic_does_not_unwind_out_of_the_next_result_s_call() {
    let (y, z) = (built(0u64), built(0u64));
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let bombs = Arc::new(AtomicUsize::new(0));
    let outer = Monitor::new(());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        outer.call(|_| keep_a_lease_then_a_bomb(&z, &y, &pool, &bombs));
    }));
    assert!(r.is_err(), "the bomb's panic goes on at the call's end");
    assert_eq!(bombs.load(SeqCst), 1, "the bomb went off once");
    assert_eq!(y.call(|n| *n), 1, "the lease was booked back once");
    assert_eq!(
        pool.available_permits(),
        1,
        "the lease's permit came back (its Drop ran to its end)"
    );
}

/// The deliver thread's form: thread 1 keeps a lease and a bomb inside
/// its body of `x`, then its serve of `x` runs thread 2's queued call,
/// whose body parks waiting for the lease's permit. The park hands both
/// results to an `active-monitor-deliver` thread, which drops the bomb
/// (its panic is to be dropped with that thread: nobody waits for it),
/// then the lease, whose call of `y` resumed the bomb's panic inside the
/// lease's `Drop`: the permit never came, and thread 2's body, and thread
/// 1's serve with it, waited for ever.
#[test]
fn a_panic_on_the_deliver_thread_does_not_unwind_out_of_the_next_drop_s_call() {
    let (x, y, z) = (built(0u64), built(0u64), built(0u64));
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let bombs = Arc::new(AtomicUsize::new(0));
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, pool) = (x.clone(), pool.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and runs it.
            x.call(move |n| {
                pool.acquire().expect("open").forget();
                *n += 1;
            });
        })
    };
    let first = {
        let (x, y, pool, bombs) = (x.clone(), y.clone(), pool.clone(), bombs.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                keep_a_lease_then_a_bomb(&z, &y, &pool, &bombs);
                go.send(()).expect("the second thread waits");
                // Its serve runs the second thread's call.
                let queued = || held.__test_queued() > 0;
                assert!(holds_within(Duration::from_secs(10), queued), "queued");
            });
        })
    };
    let first = ended_within(Duration::from_secs(10), first);
    let second = ended_within(Duration::from_secs(10), second);
    if first.is_none() || second.is_none() {
        std::mem::forget(x);
        panic!("the lease's permit never came: its Drop was unwound by the bomb's panic");
    }
    assert_eq!(first, Some(true), "the first thread's call did not panic");
    assert_eq!(second, Some(true));
    assert_eq!(bombs.load(SeqCst), 1, "the bomb went off once");
    assert_eq!(x.call(|n| *n), 1, "the second body ran once");
    assert_eq!(y.call(|n| *n), 1, "the lease was booked back once");
    assert_eq!(pool.available_permits(), 0, "the second body took it");
}

/// A waker whose `wake` panics.
struct PanicWake;

impl std::task::Wake for PanicWake {
    fn wake(self: Arc<Self>) {
        panic!("a task's waker panics");
    }
}

/// The task-waker form: a serve runs two submitted tasks whose completions
/// are awaited, the first by a future whose waker panics, the second by a
/// task polled on the spot by its waker, whose next step calls `y` and
/// then returns a permit. The wakers are woken in turn at the end of the
/// call that served them: the first one's panic was kept, and resumed out
/// of the task's call of `y`, inside its poll. The task was lost half way
/// (its permit never came back).
#[test]
fn a_waker_s_panic_does_not_unwind_out_of_the_next_woken_task_s_call() {
    let (y, z) = (built(0u64), built(0u64));
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let mut first = None;
    let mut task = None;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let z2 = z.clone();
        z.call(|_| {
            // Queued behind this body: run by its serve.
            let mut c1 = Box::pin(z2.submit(|_| 1u32));
            let waker = std::task::Waker::from(Arc::new(PanicWake));
            let cx = &mut std::task::Context::from_waker(&waker);
            assert!(std::future::Future::poll(c1.as_mut(), cx).is_pending());
            first = Some(c1);
            let c2 = z2.submit(|_| 2u32);
            let (y, pool) = (y.clone(), pool.clone());
            task = Some(sync_core::testing::InlineTask::spawn(async move {
                assert_eq!(c2.await, Ok(2));
                y.call(|n| *n += 1);
                pool.add_permits(1);
            }));
        });
    }));
    assert!(r.is_err(), "the waker's panic goes on at the call's end");
    let task = task.expect("spawned");
    assert!(task.is_done(), "the woken task ran to its end");
    assert_eq!(y.call(|n| *n), 1);
    assert_eq!(pool.available_permits(), 1, "the task's permit came back");
}

/// The deliver thread's task-waker form: thread 1's serve of `z` (in its
/// body of `x`) finishes two submitted tasks, the first awaited by a task
/// polled on the spot (whose next step calls `y`, then returns the permit
/// a queued body waits for), the second by a future whose waker panics.
/// Its serve of `x` then runs thread 2's queued body, which parks for the
/// permit: both wakers go to a deliver thread, which wakes the newer (the
/// panicking one) first. The task's call of `y` resumed that panic inside
/// its poll: the task was lost, and the body waited for ever.
#[test]
fn a_waker_s_panic_on_the_deliver_thread_does_not_unwind_out_of_the_next_task() {
    let (x, y, z) = (built(0u64), built(0u64), built(0u64));
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, pool) = (x.clone(), pool.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and its serve runs it.
            x.submit(move |n| {
                pool.acquire().expect("open").forget();
                *n += 1;
            })
            .wait();
        })
    };
    let task = Arc::new(std::sync::Mutex::new(None));
    let first = {
        let (x, y, pool, task) = (x.clone(), y.clone(), pool.clone(), task.clone());
        std::thread::spawn(move || {
            let mut panicky = None;
            let held = Arc::clone(&x);
            x.call(|_| {
                let z2 = z.clone();
                z.call(|_| {
                    // Queued behind this body of `z`, run by its serve.
                    let c1 = z2.submit(|_| 1u32);
                    let (y, pool) = (y.clone(), pool.clone());
                    *task.lock().expect("not poisoned") =
                        Some(sync_core::testing::InlineTask::spawn(async move {
                            assert_eq!(c1.await, Ok(1));
                            y.call(|n| *n += 1);
                            pool.add_permits(1);
                        }));
                    let mut c2 = Box::pin(z2.submit(|_| 2u32));
                    let waker = std::task::Waker::from(Arc::new(PanicWake));
                    let cx = &mut std::task::Context::from_waker(&waker);
                    assert!(std::future::Future::poll(c2.as_mut(), cx).is_pending());
                    panicky = Some(c2);
                });
                go.send(()).expect("the second thread waits");
                // Its serve runs the second thread's task.
                let queued = || held.__test_queued() > 0;
                assert!(holds_within(Duration::from_secs(10), queued), "queued");
            });
            drop(panicky);
        })
    };
    let first = ended_within(Duration::from_secs(10), first);
    let second = ended_within(Duration::from_secs(10), second);
    if first.is_none() || second.is_none() {
        std::mem::forget(x);
        panic!("the task's permit never came: its poll was unwound by the waker's panic");
    }
    assert_eq!((first, second), (Some(true), Some(true)));
    let task = task.lock().expect("not poisoned").take().expect("spawned");
    // Its last step (after the permit) may still run on the deliver thread.
    assert!(
        task.done_within(Duration::from_secs(10)),
        "the woken task ran to its end"
    );
    assert_eq!(y.call(|n| *n), 1);
    assert_eq!(x.call(|n| *n), 1);
}

/// A soak of the hand-on: worker threads keep leases (results nobody
/// took, some whose `Drop` panics) inside their bodies of a shared `x`,
/// and submit to `x` bodies that park on the lease pool (timed): the
/// serves run each other's parking bodies, and hand the leases on to
/// threads of their own. Then every lease was dropped once and booked
/// back, and every permit came back. `SYNC_SOAK_MINUTES`, at least 3 s:
/// `cargo test -p active-monitor --test foreign_panics_deliver -- --ignored`.
fn deliver_soak(busy: usize) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    const POOL: usize = 4;
    struct Books {
        made: AtomicUsize,
        dropped: Mutex<HashSet<usize>>,
        double: AtomicUsize,
        elsewhere: AtomicUsize,
    }
    struct Leased {
        id: usize,
        books: Arc<Books>,
        y: Arc<Monitor<u64>>,
        _permit: lockfree_sync::ArcSemaphorePermit,
    }
    impl Drop for Leased {
        fn drop(&mut self) {
            if !self.books.dropped.lock().unwrap().insert(self.id) {
                self.books.double.fetch_add(1, SeqCst);
            }
            if std::thread::current().name() == Some("active-monitor-deliver") {
                self.books.elsewhere.fetch_add(1, SeqCst);
            }
            self.y.call(|n| *n += 1);
            if self.id % 13 == 5 {
                panic!("injected: a lease's drop");
            }
        }
    }
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let report = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let ours = info
                    .payload()
                    .downcast_ref::<&str>()
                    .is_some_and(|m| m.starts_with("injected"));
                if !ours {
                    report(info);
                }
            }));
        });
    }
    let _busy = (busy > 0).then(|| sync_core::testing::BusyThreads::start(busy));
    let run_for = sync_core::testing::soak_duration().max(Duration::from_secs(3));
    let books = Arc::new(Books {
        made: AtomicUsize::new(0),
        dropped: Mutex::new(HashSet::new()),
        double: AtomicUsize::new(0),
        elsewhere: AtomicUsize::new(0),
    });
    let (x, y) = (built(0u64), built(0u64));
    let pool = Arc::new(lockfree_sync::Semaphore::new(POOL));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let (x, y, pool, stop, books) = (
                x.clone(),
                y.clone(),
                pool.clone(),
                stop.clone(),
                books.clone(),
            );
            let z = built(0u64);
            std::thread::spawn(move || {
                let mut k = 0u64;
                while !stop.load(SeqCst) {
                    k += 1;
                    let (z, y, pool1, books) = (z.clone(), y.clone(), pool.clone(), books.clone());
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        x.call(move |_| {
                            let z2 = z.clone();
                            z.call(move |_| {
                                for _ in 0..2 {
                                    if let Ok(p) = pool1.try_acquire_arc() {
                                        let id = books.made.fetch_add(1, SeqCst);
                                        let (y, books) = (y.clone(), books.clone());
                                        drop(z2.submit(move |_| Leased {
                                            id,
                                            books,
                                            y,
                                            _permit: p,
                                        }));
                                    }
                                }
                            });
                            if (k + i as u64) % 3 == 0 {
                                std::thread::yield_now();
                            }
                        });
                    }));
                    drop(r);
                    let pool2 = Arc::clone(&pool);
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        x.submit(move |n| {
                            if let Ok(p) = pool2.try_acquire_for(Duration::from_millis(2)) {
                                drop(p);
                            }
                            *n += 1;
                        })
                        .wait();
                    }));
                    drop(r);
                }
            })
        })
        .collect();
    std::thread::sleep(run_for);
    stop.store(true, SeqCst);
    for w in workers {
        assert_eq!(
            ended_within(Duration::from_secs(60), w),
            Some(true),
            "a worker hung"
        );
    }
    // The deliver threads are detached: wait for them.
    let made = books.made.load(SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while books.dropped.lock().unwrap().len() < made {
        assert!(
            std::time::Instant::now() < deadline,
            "leases lost: {} of {made} dropped",
            books.dropped.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(books.double.load(SeqCst), 0, "a lease dropped twice");
    assert_eq!(y.call(|n| *n), made as u64, "bookings lost");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pool.available_permits() != POOL {
        assert!(std::time::Instant::now() < deadline, "permits lost");
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "{made} leases, {} dropped on deliver threads, {} bodies",
        books.elsewhere.load(SeqCst),
        x.call(|n| *n)
    );
}

#[test]
#[ignore = "soak: run with --ignored"]
fn deliver_soak_idle() {
    deliver_soak(0);
}

#[test]
#[ignore = "soak: run with --ignored"]
fn deliver_soak_beside_50_busy_threads() {
    deliver_soak(50);
}
