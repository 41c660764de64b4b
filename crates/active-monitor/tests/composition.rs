//! Composition with the rest of a program: thread-local destructors that
//! use a monitor, results whose `Drop` submits, large results on a small
//! stack, timeouts around async submissions. Each failed before its fix.
#![cfg(not(loom))]
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use active_monitor::{Monitor, Order, or};
use sync_core::testing::ended_within;

fn total() -> &'static Monitor<u64> {
    static TOTAL: OnceLock<Monitor<u64>> = OnceLock::new();
    TOTAL.get_or_init(|| Monitor::new(0))
}

/// A per-thread counter that flushes into a monitor when the thread ends.
struct Flush(u64);
impl Drop for Flush {
    fn drop(&mut self) {
        let n = self.0;
        total().call(|t| *t += n);
        // Asynchronous submissions too, to another monitor and back.
        let other = Monitor::new(0u64);
        other.submit(move |x| *x += n).wait();
        total().when(|_| true, |_| ()).wait();
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Flush>> = const { RefCell::new(None) };
}

/// A thread-local whose destructor calls into a monitor, created before the
/// thread used any monitor (so its destructor runs after the crate's own
/// thread-locals are gone) or after.
#[test]
fn thread_local_destructors_can_use_a_monitor() {
    let before = total().call(|t| *t);
    // Created first, then monitors used: destroyed after their TLS.
    std::thread::spawn(|| {
        LOCAL.with(|l| *l.borrow_mut() = Some(Flush(1)));
        let m = Monitor::new(0);
        m.submit(|n| *n = 1).wait();
        assert_eq!(m.when(|n| *n > 0, |n| *n).wait(), 1);
        total().call(|t| *t += 0);
    })
    .join()
    .expect("the thread-local's destructor aborted or panicked");
    // Monitors used first, then created.
    std::thread::spawn(|| {
        total().call(|t| *t += 0);
        LOCAL.with(|l| *l.borrow_mut() = Some(Flush(10)));
    })
    .join()
    .unwrap();
    assert_eq!(total().call(|t| *t) - before, 11);
}

/// A thread-local destructor whose call finds the monitor busy: it queues
/// and parks (its waiter needs the thread's handle) until the holder lets
/// go.
#[test]
fn a_thread_local_destructor_can_wait_for_a_busy_monitor() {
    static BUSY: OnceLock<Monitor<u64>> = OnceLock::new();
    struct Wait;
    impl Drop for Wait {
        fn drop(&mut self) {
            BUSY.get().unwrap().call(|n| *n += 1);
            let c = BUSY.get().unwrap().submit(|n| *n += 1);
            c.wait();
        }
    }
    thread_local! {
        static W: RefCell<Option<Wait>> = const { RefCell::new(None) };
    }
    let m = BUSY.get_or_init(|| Monitor::new(0));
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        m.call(move |_| {
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        })
    });
    held_rx.recv().unwrap();
    let t = std::thread::spawn(|| {
        BUSY.get().unwrap().submit(|n| *n += 0); // the crate's TLS first
        W.with(|w| *w.borrow_mut() = Some(Wait));
    });
    // Its submission, then the destructor's call, queue behind the holder
    // (and the call parks).
    assert!(
        sync_core::testing::holds_within(Duration::from_secs(10), || m.__test_queued() >= 2),
        "the destructor's call never queued: {m:?}"
    );
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    t.join()
        .expect("the thread-local's destructor aborted or panicked");
    assert_eq!(m.call(|n| *n), 2);
}

/// A thread that has parked for a completion before (its waker is cached
/// in a thread-local) parks for one again in a thread-local's destructor,
/// whichever of the two thread-locals the thread destroys first: it waits
/// until another thread opens the gate, and then finishes.
#[test]
fn a_thread_local_destructor_can_park_for_a_completion_after_an_earlier_park() {
    static FIRST: OnceLock<Monitor<bool>> = OnceLock::new();
    static LAST: OnceLock<Monitor<bool>> = OnceLock::new();
    fn wait_for(gate: &'static OnceLock<Monitor<bool>>) {
        let gate = gate.get_or_init(|| Monitor::new(false));
        gate.when(|open| *open, |_| ()).wait();
    }
    fn open(gate: &'static OnceLock<Monitor<bool>>) {
        gate.get_or_init(|| Monitor::new(false))
            .submit(|open| *open = true)
            .wait();
    }
    static WAITED: AtomicUsize = AtomicUsize::new(0);
    struct WaitLast;
    impl Drop for WaitLast {
        fn drop(&mut self) {
            wait_for(&LAST);
            WAITED.fetch_add(1, SeqCst);
        }
    }
    thread_local! {
        static W: RefCell<Option<WaitLast>> = const { RefCell::new(None) };
    }
    let t = std::thread::spawn(|| {
        W.with(|w| *w.borrow_mut() = Some(WaitLast));
        wait_for(&FIRST);
    });
    std::thread::sleep(Duration::from_millis(50)); // it parks for FIRST
    open(&FIRST);
    std::thread::sleep(Duration::from_millis(50)); // it parks for LAST, exiting
    assert_eq!(WAITED.load(SeqCst), 0, "the destructor waits for the gate");
    open(&LAST);
    t.join()
        .expect("the thread-local's destructor aborted or panicked");
    assert_eq!(WAITED.load(SeqCst), 1, "the destructor ran, once");
}

/// The crate's `Lease` pattern: a result whose `Drop` gives a lease back to
/// a pool monitor. Under relaxed order the thread's record keeps its
/// waiting tasks by `Weak`; a server runs them and drops its reference
/// right after. A temporary upgrade by the submitter's next `when` may be
/// the last reference: the lease's drop must not run inside the record's
/// borrow ("already borrowed"), and every lease comes back.
#[test]
fn a_result_whose_drop_submits_is_never_dropped_inside_a_borrow() {
    struct Lease(&'static Monitor<u64>);
    impl Drop for Lease {
        fn drop(&mut self) {
            drop(self.0.submit(|n| *n += 1));
        }
    }
    active_monitor::set_server_limit(1000);
    active_monitor::__test_set_saturation_override(Some(false));
    let pool: &'static Monitor<u64> =
        Box::leak(Box::new(Monitor::builder().order(Order::Relaxed).build(0)));
    let m: &'static Monitor<u64> = Box::leak(Box::new(
        Monitor::builder().order(Order::Relaxed).build_served(0),
    ));
    const THREADS: u64 = 3;
    const ROUNDS: u64 = 100_000;
    let hs: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    // Queued for the server, recorded, completion dropped:
                    // the result (a lease) goes with the last reference.
                    drop(m.when(|_| true, move |_| Lease(pool)));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("a lease's drop panicked");
    }
    m.call(|_| ()); // the server has run them all (FIFO)
    // It drops the results nobody took at the end of its stint (which may
    // come after that call returned): every lease comes back soon.
    let began = std::time::Instant::now();
    while pool.call(|n| *n) != THREADS * ROUNDS {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "leases lost: {} of {}",
            THREADS * ROUNDS - pool.call(|n| *n),
            THREADS * ROUNDS
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A pooled lease that goes back to its own monitor when dropped.
struct Lease {
    pool: &'static Monitor<Vec<u32>>,
    item: Option<u32>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.pool.call(move |v| v.push(item));
        }
    }
}

/// A result nobody took (its completion dropped before the task ran) is
/// dropped once its holder has let go of the monitor: a `Drop` that uses
/// that very monitor (a lease returned to its pool) works, the holder's own
/// `call` does not panic, and no lease is lost. On a served monitor the
/// server drops it as a task of the monitor: the lease's `call` panics (it
/// would wait for its own server) and the lease is lost, but nothing hangs
/// and the holder's call does not panic.
#[test]
fn a_result_nobody_took_can_return_itself_to_its_own_monitor() {
    for served in [false, true] {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let b = Monitor::builder().order(Order::Relaxed);
            let pool: &'static Monitor<Vec<u32>> = if served {
                Box::leak(Box::new(b.build_served((0..8).collect())))
            } else {
                Box::leak(Box::new(b.build((0..8).collect())))
            };
            for _ in 0..200 {
                let (held_tx, held_rx) = std::sync::mpsc::channel();
                let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                // A holder busy in a long call: the lease task queues
                // behind it, and its completion is dropped before it runs.
                let holder = std::thread::spawn(move || {
                    pool.call(move |_| {
                        held_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    });
                    pool.call(|v| v.len())
                });
                held_rx.recv().unwrap();
                drop(pool.submit(move |v| Lease {
                    pool,
                    item: v.pop(),
                }));
                go_tx.send(()).unwrap();
                let len = holder.join().expect("the holder's own call panicked");
                assert!(len <= 8);
                // A combiner drops the lease at the end of its operation
                // (the holder's first call): all eight are back.
                if served {
                    // Put back what the served monitor lost, for the next
                    // round.
                    pool.call(|v| {
                        v.clear();
                        v.extend(0..8);
                    });
                } else {
                    assert_eq!(pool.call(|v| v.len()), 8, "a lease was lost");
                }
            }
            done_tx.send(()).unwrap();
        });
        match done_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("hung (served: {served})"),
            Err(_) => panic!("failed (served: {served}): see the panic above"),
        }
    }
}

/// A `when` that runs at once drops its precondition (and its captures)
/// once it has let go of the monitor: a captured lease goes back to it.
#[test]
fn a_precondition_can_return_its_captures_to_its_own_monitor() {
    let pool: &'static Monitor<Vec<u32>> = Box::leak(Box::new(Monitor::new((0..8).collect())));
    for _ in 0..100 {
        let lease = Lease {
            pool,
            item: pool.call(|v| v.pop()),
        };
        // The whole lease is captured (not a copy of its item).
        let pre = move |_: &Vec<u32>| {
            let lease = &lease;
            lease.item.is_some()
        };
        let ran = pool.when(pre, |v| v.len()).wait();
        assert_eq!(ran, 7);
        assert_eq!(pool.call(|v| v.len()), 8, "the captured lease was lost");
    }
}

/// An OR operand that lost (another operand took the OR) is dropped, body
/// and all, once its monitor's holder has let go of it: a body capture
/// whose `Drop` returns a lease to that very monitor works, and the
/// holder's own `call` does not panic.
#[test]
fn a_losing_operands_captures_can_return_to_its_own_monitor() {
    let pool: &'static Monitor<Vec<u32>> = Box::leak(Box::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .build((0..8).collect()),
    ));
    let q = Monitor::builder()
        .order(Order::Relaxed)
        .build(VecDeque::<u32>::new());
    for round in 0..50 {
        let lease = Lease {
            pool,
            item: pool.call(|v| v.pop()),
        };
        // The pool's operand never runs (its precondition is false); it
        // waits on the pool, holding the lease in its body.
        let c = or((
            q.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
            pool.op(
                |_| false,
                move |_| {
                    let lease = &lease;
                    lease.item.unwrap()
                },
            ),
        ))
        .unwrap();
        q.submit(move |q| q.push_back(round));
        assert_eq!(c.wait(), (0, round));
        // The pool's holder runs a task, re-checks its waiting tasks and
        // drops the forsaken operand.
        let len = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.call(|v| v.len())))
            .expect("the holder's call panicked with the lease's drop");
        assert!(len <= 8);
        assert_eq!(pool.call(|v| v.len()), 8, "the lease was lost");
    }
}

/// Results nobody took wait for the end of their server's stint to be
/// dropped, but a long stint does not keep them all: at most a few dozen
/// are alive while a server works through a full queue of such tasks.
#[test]
fn a_server_keeps_few_results_nobody_took_however_long_its_stint() {
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static MOST: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Counted {
        fn new() -> Self {
            LIVE.fetch_add(1, SeqCst);
            Counted
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, SeqCst);
        }
    }
    const TASKS: usize = 4096;
    // The server serves (as the CPUs are not saturated).
    active_monitor::set_server_limit(1000);
    active_monitor::__test_set_saturation_override(Some(false));
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(TASKS + 1)
        .build_served(0u64);
    // The monitor is held up while the queue fills, then the queue runs
    // (on the server, in one stint unless it lets go).
    let m: &'static Monitor<u64> = Box::leak(Box::new(m));
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        m.call(move |_| {
            held_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        })
    });
    held_rx.recv().unwrap();
    for _ in 0..TASKS {
        drop(m.submit(|n| {
            *n += 1;
            MOST.fetch_max(LIVE.load(SeqCst), SeqCst);
            Counted::new()
        }));
    }
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(m.call(|n| *n), TASKS as u64);
    let most = MOST.load(SeqCst);
    assert!(most <= 256, "{most} results nobody took were alive at once");
}

/// A `tokio::time::timeout` around `when_async` loses nothing: a take that
/// timed out before it started is withdrawn (it took no item), and the
/// abandoned takes do not fill the bound on waiting tasks.
/// With combining, or with a server thread (`served`).
async fn timeouts_lose_nothing() {
    timeouts_lose_nothing_on(Arc::new(Monitor::new(VecDeque::new()))).await;
    active_monitor::set_server_limit(1000);
    timeouts_lose_nothing_on(Monitor::builder().build_served(VecDeque::new())).await;
}

/// A monitor handle the tests share across tasks and threads.
trait Shared:
    std::ops::Deref<Target = Monitor<VecDeque<usize>>> + Clone + Send + Sync + 'static
{
}
impl<M: std::ops::Deref<Target = Monitor<VecDeque<usize>>> + Clone + Send + Sync + 'static> Shared
    for M
{
}

async fn timeouts_lose_nothing_on(q: impl Shared) {
    const ITEMS: usize = 100;
    let produced = Arc::new(AtomicUsize::new(0));
    let p = {
        let (q, produced) = (q.clone(), Arc::clone(&produced));
        tokio::spawn(async move {
            for i in 0..ITEMS {
                tokio::time::sleep(Duration::from_millis(2)).await;
                q.submit_async(move |d| d.push_back(i)).await;
                produced.fetch_add(1, SeqCst);
            }
        })
    };
    let mut got = Vec::new();
    let mut timeouts = 0;
    while got.len() < ITEMS {
        let take = q.when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap());
        match tokio::time::timeout(Duration::from_millis(1), take).await {
            Ok(x) => got.push(x),
            Err(_) => timeouts += 1,
        }
        if timeouts >= 100_000 {
            panic!(
                "items were lost: {} taken, {} produced, {} still queued",
                got.len(),
                produced.load(SeqCst),
                q.call(|d| d.len())
            );
        }
    }
    p.await.unwrap();
    got.sort_unstable();
    assert_eq!(got, (0..ITEMS).collect::<Vec<_>>());
    assert!(timeouts > 0, "the timeouts were not exercised");
    assert_eq!(q.call(|d| d.len()), 0);
}

/// On `futures`' `LocalPool` (one thread) with the producer on another
/// thread: a take given up (a timeout made of polls, as `LocalPool` has no
/// timer) right after the producer's push, without being polled again,
/// took nothing; every item is taken once. Each give-up is arranged: the
/// take's first poll finds the queue empty, then the give-up future's
/// second poll asks for an item, waits until it is pushed, and fires, so
/// the take is dropped with an item it could have taken on another thread.
#[test]
fn given_up_when_async_takes_lose_nothing_on_a_local_pool() {
    use futures::future::{Either, select};
    /// Pending once; on its second poll it asks the producer for an item,
    /// waits until it is pushed, and is ready.
    struct GiveUp<'a> {
        polled: bool,
        asked: &'a AtomicUsize,
        pushed: &'a AtomicUsize,
    }
    impl std::future::Future for GiveUp<'_> {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if !self.polled {
                self.polled = true;
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            let n = self.asked.fetch_add(1, SeqCst) + 1;
            while self.pushed.load(SeqCst) < n {
                std::thread::yield_now();
            }
            std::task::Poll::Ready(())
        }
    }
    const ITEMS: usize = 100;
    let q = Arc::new(Monitor::new(VecDeque::<usize>::new()));
    let (asked, pushed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let producer = {
        let (q, asked, pushed) = (Arc::clone(&q), Arc::clone(&asked), Arc::clone(&pushed));
        std::thread::spawn(move || {
            for i in 0..ITEMS {
                while asked.load(SeqCst) <= i {
                    std::thread::yield_now();
                }
                q.call(|d| d.push_back(i));
                pushed.store(i + 1, SeqCst);
            }
        })
    };
    let mut pool = futures::executor::LocalPool::new();
    let got = pool.run_until(async {
        let mut got = Vec::new();
        while got.len() < ITEMS {
            let take = q.when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap());
            let give_up = GiveUp {
                polled: false,
                asked: &asked,
                pushed: &pushed,
            };
            // The give-up first: once it fires, the take is not polled again.
            if let Either::Right((x, _)) = select(give_up, std::pin::pin!(take)).await {
                got.push(x);
            }
            if pushed.load(SeqCst) == ITEMS && got.len() < ITEMS {
                // Every item was pushed: the rest must still be queued.
                let left = q.call(|d| d.len());
                assert_eq!(got.len() + left, ITEMS, "items were lost");
                got.extend(q.call(|d| d.drain(..).collect::<Vec<_>>()));
            }
        }
        got
    });
    producer.join().unwrap();
    let mut got = got;
    got.sort_unstable();
    assert_eq!(got, (0..ITEMS).collect::<Vec<_>>());
}

/// The interleaving behind a lost item: a `when_async` polled once (its
/// precondition false: the task waits), then another thread's call makes
/// the precondition hold, then the future is dropped (a timeout that fired
/// meanwhile). The take must not have run on the other thread with its
/// result dropped: the item is still queued. Polled instead of dropped,
/// the future was woken and takes it. With combining and with a server.
#[test]
fn a_when_async_dropped_after_another_thread_enabled_it_took_nothing() {
    for dropped in [true, false] {
        dropped_take_case(Arc::new(Monitor::new(VecDeque::new())), dropped);
        dropped_take_case(Monitor::builder().build_served(VecDeque::new()), dropped);
    }
}

fn dropped_take_case<M>(q: M, dropped: bool)
where
    M: std::ops::Deref<Target = Monitor<VecDeque<usize>>> + Clone + Send + 'static,
{
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, SeqCst);
        }
    }
    let served = q.has_server();
    let flag = Arc::new(Flag(false.into()));
    let waker = Waker::from(Arc::clone(&flag));
    let mut take = Box::pin(q.when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap()));
    let mut cx = Context::from_waker(&waker);
    assert!(take.as_mut().poll(&mut cx).is_pending());
    let q2 = q.clone();
    std::thread::spawn(move || q2.call(|d| d.push_back(7)))
        .join()
        .unwrap();
    if dropped {
        drop(take);
        assert_eq!(
            q.call(|d| d.len()),
            1,
            "the dropped take took the item (served: {served})"
        );
    } else {
        // A served monitor's server may still be about to look.
        let start = std::time::Instant::now();
        while !flag.0.load(SeqCst) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the take was not woken (served: {served})"
            );
            std::thread::yield_now();
        }
        assert_eq!(take.as_mut().poll(&mut cx), Poll::Ready(7));
        assert_eq!(q.call(|d| d.len()), 0);
    }
}

#[test]
fn timeouts_around_when_async_lose_nothing_current_thread() {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(timeouts_lose_nothing());
}

#[test]
fn timeouts_around_when_async_lose_nothing_multi_thread() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
        .block_on(timeouts_lose_nothing());
}
const BIG: usize = 768 * 1024;

/// Runs `f` on a thread with a 2 MiB stack (a `parking_lot` critical
/// section returning a 1.5 MiB value fits there).
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .expect("overflowed its stack");
}

/// A result larger than a third of the thread's stack costs no more stack
/// than the body itself.
#[test]
fn a_large_result_fits_a_small_stack_call() {
    on_small_stack(|| {
        let m = Monitor::new(7u8);
        let r = m.call(|n| [*n; BIG]);
        assert_eq!((r[0], r[BIG - 1]), (7, 7));
    });
}

#[test]
fn a_large_result_fits_a_small_stack_submit_wait() {
    on_small_stack(|| {
        let m = Monitor::new(7u8);
        let r = m.submit(|n| [*n; BIG]).wait();
        assert_eq!((r[0], r[BIG - 1]), (7, 7));
    });
}

/// `call_async`: an executor's poll returns the output by value, so its
/// own frames hold copies of a result whatever the monitor does (futures'
/// `block_on` three in a debug build); what the monitor adds is measured
/// instead: the stack between the poll and the body is the body's own
/// result, not a copy more.
#[test]
fn a_large_result_costs_call_async_no_more_stack_than_the_body() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    const SIZE: usize = 256 * 1024;
    #[inline(never)]
    fn sp() -> usize {
        let x = 0u8;
        std::hint::black_box(&x) as *const u8 as usize
    }
    let measure = || {
        let m = Monitor::new(7u8);
        let top = sp();
        let depth = Arc::new(AtomicUsize::new(0));
        let d = Arc::clone(&depth);
        let mut f = std::pin::pin!(m.call_async(move |n| {
            d.store(top - sp(), SeqCst);
            [*n; SIZE]
        }));
        let Poll::Ready(r) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("an idle monitor runs the call at once")
        };
        assert_eq!(r[SIZE - 1], 7);
        let depth = depth.load(SeqCst);
        assert!(
            depth < SIZE + SIZE / 2,
            "{depth} bytes for a {SIZE}-byte result"
        );
    };
    // The test's own frame holds the output (and the executor's copies):
    // a roomy stack; the assertion is on the depth.
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(measure)
        .unwrap()
        .join()
        .unwrap();
}

/// A task body of one monitor enables, on another, the precondition of a
/// task that an async task awaits (the body's thread runs that task as the
/// other monitor's holder), then waits for the async task's next step.
/// The awaiting task's waker was kept on the body's thread until the body
/// ended (a waker polled there may use the body's monitor, which is held),
/// and the body waited for that task for ever: for a `when_async`, and for
/// a `when`'s awaited completion. A thread about to park wakes the task
/// wakers it keeps.
#[test]
fn a_task_body_that_waits_for_a_task_its_own_call_woke_returns() {
    #[derive(Default)]
    struct S {
        enabled: bool,
        stepped: bool,
    }
    for form in 0..2 {
        let outer = Arc::new(Monitor::new(()));
        let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(S::default()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("a runtime");
        let (filed, is_filed) = std::sync::mpsc::channel();
        let task = {
            let m = Arc::clone(&m);
            rt.spawn(async move {
                if form == 0 {
                    let enabled = m.when(|s: &S| s.enabled, |_| ());
                    sync_core::testing::pending_then(enabled, filed)
                        .await
                        .expect("ran");
                } else {
                    let enabled = Box::pin(m.when_async(|s: &S| s.enabled, |_| ()));
                    sync_core::testing::pending_then(enabled, filed).await;
                }
                m.call_async(|s| s.stepped = true).await;
            })
        };
        is_filed.recv().expect("the task filed its wait");
        let body = {
            let (outer, m) = (Arc::clone(&outer), Arc::clone(&m));
            std::thread::spawn(move || {
                outer.call(move |_| {
                    // Idle: runs here, and so does the enabled task.
                    m.call(|s| s.enabled = true);
                    m.when(|s: &S| s.stepped, |_| ()).wait();
                });
            })
        };
        assert_eq!(
            ended_within(Duration::from_secs(10), body),
            Some(true),
            "form {form}: the body waited for ever"
        );
        rt.block_on(task).expect("the task finished");
    }
}

/// A result nobody took is dropped once the thread has let go of the
/// monitor. Run by a `call` inside another monitor's task body, it was
/// kept until that body ended (its `Drop` may use the body's monitor,
/// which is held): a body that then waited for what that drop releases
/// (a lease returned to its pool) waited for ever. A thread about to park
/// drops what it keeps first, as it wakes the task wakers it keeps.
#[test]
fn a_task_body_that_waits_for_what_a_result_nobody_took_releases_returns() {
    /// A lease: returned to its pool when dropped.
    struct Lease(Arc<Monitor<u32>>);
    impl Drop for Lease {
        fn drop(&mut self) {
            drop(self.0.submit(|free| *free += 1));
        }
    }
    let outer = Arc::new(Monitor::new(()));
    let pool = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    // Fire and forget: its lease is nobody's.
    drop({
        let pool = Arc::clone(&pool);
        m.when(|on| *on, move |_| Lease(pool))
    });
    let body = {
        let (outer, m, pool) = (Arc::clone(&outer), Arc::clone(&m), Arc::clone(&pool));
        std::thread::spawn(move || {
            outer.call(move |_| {
                // Idle: runs here, and so does the enabled task.
                m.call(|on| *on = true);
                pool.when(|free| *free > 0, |free| *free -= 1).wait();
            });
        })
    };
    assert_eq!(
        ended_within(Duration::from_secs(10), body),
        Some(true),
        "the body waited for ever"
    );
    assert_eq!(pool.call(|free| *free), 0);
}
