//! Regressions found by an independent review of the async submission
//! code: each test failed before its fix.
#![cfg(not(loom))]
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use active_monitor::{Monitor, Order};

struct PanicWake;
impl Wake for PanicWake {
    fn wake(self: Arc<Self>) {
        panic!("user waker panics");
    }
    fn wake_by_ref(self: &Arc<Self>) {
        panic!("user waker panics");
    }
}

/// Holds `m` on another thread (a blocking call whose body waits for `go`),
/// then fills its queue with `cap` plain submits. Returns the go sender and
/// the holder's join handle (true if its call panicked).
fn hold_and_fill(m: &Arc<Monitor<u64>>) -> (mpsc::Sender<()>, std::thread::JoinHandle<bool>) {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (st_tx, st_rx) = mpsc::channel::<()>();
    let m2 = Arc::clone(m);
    let h = std::thread::spawn(move || {
        catch_unwind(AssertUnwindSafe(|| {
            m2.call(move |_| {
                st_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            })
        }))
        .is_err()
    });
    st_rx.recv().unwrap();
    for _ in 0..m.capacity() {
        drop(m.submit(|n| *n += 1));
    }
    (go_tx, h)
}

/// A task waker that panics (user code) registered in the monitor's
/// `space` queue: the holder's `wake_space` runs it with the monitor held.
#[test]
fn panicking_space_waker_does_not_wedge_monitor() {
    let m = Arc::new(Monitor::builder().capacity(2).build(0u64));
    let (go, h) = hold_and_fill(&m);
    let waker = Waker::from(Arc::new(PanicWake));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(m.submit_async(|n| *n += 100));
    assert!(
        fut.as_mut().poll(&mut cx).is_pending(),
        "queue full: must await space"
    );
    go.send(()).unwrap();
    let holder_panicked = h.join().unwrap();
    eprintln!("holder's call panicked: {holder_panicked}");
    // The monitor must still serve.
    let (tx, rx) = mpsc::channel();
    let m3 = Arc::clone(&m);
    std::thread::spawn(move || {
        let v = m3.call(|n| *n);
        tx.send(v).unwrap();
    });
    let v = rx.recv_timeout(Duration::from_secs(3));
    assert!(
        v.is_ok(),
        "monitor wedged: a call after the panicking waker hangs"
    );
}

/// Relaxed order: one `when` that never holds, then 63 that complete: only
/// one task waits, yet the next conditional submission awaits the oldest
/// (finished tasks behind an unfinished front still count). The docs say
/// "a worker may have at most 64 tasks waiting on preconditions".
#[test]
fn relaxed_bound_counts_finished_tasks_behind_a_stuck_oldest() {
    let m = Monitor::builder()
        .order(active_monitor::Order::Relaxed)
        .build(0u64);
    let never = m.when(|x| *x == u64::MAX, |x| *x);
    for i in 0..63u64 {
        let c = m.when(move |x| *x > i, |x| *x);
        m.submit(|x| *x += 1);
        assert!(c.is_done());
    }
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(m.when_async(|x| *x > 0, |x| *x));
    let r = f.as_mut().poll(&mut cx);
    let one_waiting = !never.is_done();
    assert!(one_waiting);
    assert!(
        r.is_ready(),
        "only 1 task waits, yet the 65th conditional submission awaits the never-ready oldest"
    );
}

struct YieldOnce(bool);
impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Strict order: an async task that moves to another thread between two
/// submissions (as on a multi-thread runtime) is held back by its own
/// pending `when` on another monitor (rule 3) when it runs in a `worker`
/// scope, which carries its record along. (Without one, each submission is
/// recorded in the thread that polled it: documented under
/// `Order::Strict`.)
#[test]
fn strict_order_holds_when_a_task_in_a_worker_scope_migrates() {
    let a: &'static Monitor<u64> = Box::leak(Box::new(Monitor::new(0u64)));
    let b: &'static Monitor<u64> = Box::leak(Box::new(Monitor::new(0u64)));
    let fut = Box::pin(active_monitor::worker(async move {
        let c = a.when_async(|x| *x > 0, |x| *x).completion().await; // pending: b must wait
        YieldOnce(false).await; // the executor may move us here
        let d = b.submit_async(|x| *x += 1).await;
        (c, d)
    }));
    let waker = futures::task::noop_waker();
    let mut fut = fut;
    // First poll on this thread.
    assert!(
        fut.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    // Second poll on another thread.
    let r = std::thread::spawn(move || {
        let waker = futures::task::noop_waker();
        let ready = fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready();
        std::mem::forget(fut);
        ready
    })
    .join()
    .unwrap();
    assert!(
        !r,
        "strict order: b's submission went ahead of the worker's pending when on a"
    );
}

/// Strict order: the worker's record keeps its last task (and so the result
/// nobody took) alive after the task ran and its completion was dropped,
/// until the worker's next non-inline submission.
#[test]
fn strict_record_keeps_an_untaken_result_alive() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    struct Droppy(Arc<AtomicUsize>);
    impl Drop for Droppy {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let m = Arc::new(Monitor::new(0u64));
    let (go, h) = {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (st_tx, st_rx) = mpsc::channel::<()>();
        let m2 = Arc::clone(&m);
        let h = std::thread::spawn(move || {
            m2.call(move |_| {
                st_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            })
        });
        st_rx.recv().unwrap();
        (go_tx, h)
    };
    let d = Arc::clone(&drops);
    let c = m.submit(move |_| Droppy(d)); // queued: the monitor is held
    assert!(!c.is_done());
    drop(c); // fire and forget
    go.send(()).unwrap();
    h.join().unwrap();
    let m4 = Arc::clone(&m);
    std::thread::spawn(move || m4.call(|n| *n)).join().unwrap(); // the task has run (FIFO)
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the untaken result is still alive (held by the thread's order record)"
    );
}

/// A result nobody took whose Drop submits (an RAII lease returned to a
/// pool monitor): the worker's record drops the last task *inside* the
/// thread-local's RefCell borrow, so that nested submission's `before`
/// borrows again.
#[test]
fn dropping_a_recorded_task_inside_the_record_borrow() {
    struct Lease(&'static Monitor<u64>);
    impl Drop for Lease {
        fn drop(&mut self) {
            drop(self.0.submit(|n| *n += 1)); // give the lease back
        }
    }
    let m: &'static Monitor<u64> = Box::leak(Box::new(Monitor::new(0u64)));
    let pool: &'static Monitor<u64> = Box::leak(Box::new(Monitor::new(0u64)));
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (st_tx, st_rx) = mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        m.call(move |_| {
            st_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        })
    });
    st_rx.recv().unwrap();
    drop(m.submit(move |_| Lease(pool))); // queued, recorded; completion dropped
    go_tx.send(()).unwrap();
    h.join().unwrap();
    std::thread::spawn(move || m.call(|_| ())).join().unwrap(); // it ran
    let r = catch_unwind(AssertUnwindSafe(|| {
        // Next submission of this worker: drops the recorded task.
        let waker = futures::task::noop_waker();
        let mut f = pin!(pool.when_async(|n| *n > 100, |n| *n));
        let _ = f.as_mut().poll(&mut Context::from_waker(&waker));
    }));
    if let Err(p) = &r {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or(p.downcast_ref::<&str>().map(|s| s.to_string()));
        eprintln!("panicked: {msg:?}");
    }
    assert!(r.is_ok(), "a lease's drop panicked inside the order record");
    // From another thread: this one's pending `when` on `pool` would hold
    // its `call` back (strict order).
    let leased = std::thread::spawn(move || pool.call(|n| *n))
        .join()
        .unwrap();
    assert_eq!(leased, 1, "the lease was given back once");
}

/// A task's waker that polls the task on the spot, as an executor whose
/// wake runs the task at once does.
struct PollsOnWake {
    task: std::sync::Mutex<Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>>,
    done: std::sync::atomic::AtomicBool,
}

impl Wake for PollsOnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let waker = Waker::from(Arc::clone(self));
        // Busy (a poll already on the way): that poll sees the new state.
        if let Ok(mut task) = self.task.try_lock() {
            if let Some(f) = task.as_mut() {
                if f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
                    *task = None;
                    self.done.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
    }
}

/// A `when_async` whose waker polls it on the spot, enabled by a `submit`
/// from another thread (found by review: the holder woke the future while
/// it held the monitor, the poll found it held and queued the task again,
/// and the holder signalled it again, for ever: the enabling `submit`
/// never returned). On a plain and on a served monitor.
#[test]
fn a_waker_that_polls_its_task_on_the_spot_does_not_livelock_the_monitor() {
    let b = || Monitor::builder().order(Order::Relaxed);
    polled_on_the_spot(Arc::new(b().build(0u32)), "a plain monitor");
    polled_on_the_spot(b().build_served(0u32), "a served monitor");
}

fn polled_on_the_spot<M>(m: M, what: &str)
where
    M: std::ops::Deref<Target = Monitor<u32>> + Clone + Send + Sync + 'static,
{
    use std::sync::atomic::Ordering::SeqCst;
    let m2 = m.clone();
    let future: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
        let r = m2
            .when_async(
                |n| *n > 0,
                |n| {
                    *n -= 1;
                    7
                },
            )
            .await;
        assert_eq!(r, 7);
    });
    let task = Arc::new(PollsOnWake {
        task: std::sync::Mutex::new(Some(future)),
        done: std::sync::atomic::AtomicBool::new(false),
    });
    // The first poll: the task waits for its precondition.
    Waker::from(Arc::clone(&task)).wake_by_ref();
    assert!(!task.done.load(SeqCst));
    let enabler = {
        let m = m.clone();
        std::thread::spawn(move || m.submit(|n| *n += 1).wait())
    };
    let began = std::time::Instant::now();
    while !(enabler.is_finished() && task.done.load(SeqCst)) {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{what}: the enabling submit returned: {}, the task ran: {}",
            enabler.is_finished(),
            task.done.load(SeqCst)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    enabler.join().unwrap();
    assert_eq!(m.call(|n| *n), 0);
}

/// Spawns `f` on a [`PollsOnWake`] executor and polls it once.
fn spawn_polled_on_wake(f: impl Future<Output = ()> + Send + 'static) -> Arc<PollsOnWake> {
    let task = Arc::new(PollsOnWake {
        task: std::sync::Mutex::new(Some(Box::pin(f))),
        done: std::sync::atomic::AtomicBool::new(false),
    });
    Waker::from(Arc::clone(&task)).wake_by_ref();
    task
}

/// A `when_async` enabled by a holder of `a` whose next task calls another
/// monitor `b`: the end of that `b.call`, inside `a`'s task body, must not
/// wake the future (found by review: its waker polled it there, `a` held
/// by the same thread, and with `a`'s queue full the poll panicked with
/// "submitted to its own monitor whose queue is full" out of the holder's
/// unrelated `submit`; the future was never woken again).
#[test]
fn a_deferred_task_waker_waits_for_the_end_of_the_outer_task_body() {
    use std::sync::atomic::Ordering::SeqCst;
    let a = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(2)
            .build(0u32),
    );
    let b = Arc::new(Monitor::builder().order(Order::Relaxed).build(()));
    let a2 = Arc::clone(&a);
    let task = spawn_polled_on_wake(async move {
        a2.when_async(|n| *n > 0, |n| *n -= 1).await;
    });
    assert!(!task.done.load(SeqCst));
    let ah = Arc::clone(&a);
    // Holds `a`, and runs what queues meanwhile.
    let holder = std::thread::spawn(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ah.submit(|_| std::thread::sleep(Duration::from_millis(300)));
        }))
        .is_ok()
    });
    std::thread::sleep(Duration::from_millis(50));
    // Enables the `when_async`: the holder defers its waker.
    a.submit(|n| *n += 1);
    // The holder's next task calls `b`, whose end delivers deferred wakes.
    a.submit(move |_| {
        std::thread::sleep(Duration::from_millis(150));
        b.call(|_| ());
    });
    // `a`'s queue is full meanwhile.
    let af = Arc::clone(&a);
    let filler = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(250));
        af.submit(|_| ());
        af.submit(|_| ());
    });
    assert!(holder.join().unwrap(), "the holder's submit panicked");
    filler.join().unwrap();
    let began = std::time::Instant::now();
    while !task.done.load(SeqCst) {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "the when_async never completed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.call(|n| *n), 0);
}

/// A `when_async` enabled from a thread-local destructor that runs after
/// the crate's own thread-locals are gone: its waker (which polls the task
/// on the spot) must still wait until the monitor is let go of (found by
/// review: with the list gone it was woken under the monitor, and the
/// destructor's `submit` livelocked, as the plain case once did).
#[test]
fn a_when_async_enabled_from_a_late_thread_local_destructor_does_not_livelock() {
    use std::sync::OnceLock;
    static M: OnceLock<Monitor<u32>> = OnceLock::new();
    fn m() -> &'static Monitor<u32> {
        M.get_or_init(|| Monitor::builder().order(Order::Relaxed).build(0))
    }
    static RETURNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    struct Enable;
    impl Drop for Enable {
        fn drop(&mut self) {
            m().submit(|n| *n += 1);
            RETURNED.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    std::thread_local!(static ENABLE: Enable = const { Enable });
    let t = std::thread::spawn(|| {
        // Registered before the crate's thread-locals: destroyed after them.
        ENABLE.with(|_| ());
        let first = spawn_polled_on_wake(async { m().when_async(|n| *n >= 1, |n| *n -= 1).await });
        // This thread wakes a `when_async` once: the crate's lists exist.
        m().submit(|n| *n += 1);
        assert!(first.done.load(std::sync::atomic::Ordering::SeqCst));
        // Waits; enabled by `ENABLE`'s drop at the thread's end.
        let _ = spawn_polled_on_wake(async { m().when_async(|n| *n >= 1, |n| *n -= 1).await });
    });
    // Not `is_finished`: it is true once the thread's closure returned,
    // before its thread-local destructors run.
    let began = std::time::Instant::now();
    while !RETURNED.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "the thread-local destructor's submit never returned"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    t.join().unwrap();
    assert_eq!(m().call(|n| *n), 0);
}

/// `completion()` on a `when_async` future already polled: its task was
/// published as the future's to run, and a holder that found the
/// precondition true signalled the future and dropped the task from its
/// lists. Before the fix, the completion then never resolved (nobody ran
/// the body, nobody discarded it: `wait` hung for ever). Now the holders
/// run it, once, whether or not a holder had signalled it; and an
/// `Enqueue` dropped before it is ready still withdraws the task.
#[test]
fn a_completion_taken_from_a_polled_when_async_resolves() {
    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }
    use std::pin::Pin;
    for signalled_first in [true, false] {
        let m = Monitor::builder().order(Order::Relaxed).build(0u32);
        let mut take = m.when_async(|n| *n > 0, |n| *n * 10);
        assert!(poll_once(&mut take).is_pending());
        if signalled_first {
            m.call(|n| *n = 1);
        }
        let mut enqueue = take.completion();
        let Poll::Ready(c) = poll_once(&mut enqueue) else {
            panic!("the task is queued at once")
        };
        if !signalled_first {
            m.call(|n| *n = 1);
        }
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(c.wait_result());
        });
        let r = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| {
                panic!("signalled first: {signalled_first}: the completion never resolves")
            });
        assert_eq!(r, Ok(10), "signalled first: {signalled_first}");
        // It ran once: the second reference leaves without running it.
        m.call(|n| *n = 2);
        assert_eq!(m.call(|n| *n), 2);
    }
    // Dropped before it is ready (its queue full), the Enqueue withdraws the
    // task published by the earlier poll: it never runs.
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(1)
            .build(0u64),
    );
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ran2 = Arc::clone(&ran);
    let mut take = m.when_async(
        |n| *n > 0,
        move |_| ran2.store(true, std::sync::atomic::Ordering::SeqCst),
    );
    assert!(poll_once(&mut take).is_pending());
    let (go_tx, h) = hold_and_fill(&m);
    let mut enqueue = take.completion();
    assert!(poll_once(&mut enqueue).is_pending(), "the queue is full");
    drop(enqueue);
    go_tx.send(()).unwrap();
    assert!(!h.join().unwrap());
    m.call(|n| *n = 1);
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "a withdrawn task ran"
    );
}
