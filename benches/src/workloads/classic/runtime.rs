//! The models' shared runtime pieces: OS threads started together (`cp-*`),
//! one cooperative executor on this thread (`cm`), two cooperative regions
//! on two threads (`pcm`), the semaphore interface the CP programs are
//! written against, the simulated `await`, and the fault record that every
//! correctness check writes to.
//!
//! The cooperative executor is `futures`' [`LocalPool`]: one thread, a FIFO
//! ready queue, tasks that need not be `Send`. A task that yields wakes
//! itself and goes to the back of that queue, which is the paper's `nap(0)`.
//! No executor is written here.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use futures::executor::LocalPool;
use futures::task::{LocalFutureObj, LocalSpawn};
use sync_core::parking_lot::SpinWait;

use crate::twins::CondvarSemaphore;
use crate::workloads::ast::StartLine;

use super::Violation;

const STACK: usize = 256 * 1024;

/// The busy work of the paper's "work" parameter: `units` increments of a
/// counter no one shares (`lf/`'s figure-1 work).
#[inline]
pub(super) fn busy(units: u64) {
    std::hint::black_box(crate::workloads::lf::local_work(units));
}

/// A semaphore as the paper's CP programs use it: `P` waits for a permit
/// and keeps it, `V` gives one back. Every CP program is written once
/// against this and runs on both CP models.
pub(super) trait Pv: Send + Sync + 'static {
    /// A semaphore holding `permits`.
    fn new(permits: usize) -> Self;
    /// Takes a permit, blocking the thread until one is free.
    fn p(&self);
    /// Gives a permit back, waking a waiter if one sleeps.
    fn v(&self);
}

/// `cp-lockfree`: lockfree-sync's semaphore; `acquire` parks the thread.
impl Pv for lockfree_sync::Semaphore {
    fn new(permits: usize) -> Self {
        lockfree_sync::Semaphore::new(permits)
    }
    #[inline]
    fn p(&self) {
        self.acquire().expect("never closed").forget();
    }
    #[inline]
    fn v(&self) {
        self.release(1);
    }
}

/// `cp-std`: a std `Mutex` around the count and a `Condvar`.
impl Pv for CondvarSemaphore {
    fn new(permits: usize) -> Self {
        CondvarSemaphore::new(permits)
    }
    #[inline]
    fn p(&self) {
        self.acquire();
    }
    #[inline]
    fn v(&self) {
        self.release();
    }
}

/// `P` of the `pcm` model across regions: lockfree-sync's async acquire,
/// which queues the task and leaves the region's thread to its other tasks.
///
/// It first looks for a free permit the way `cp-lockfree`'s blocking
/// `acquire` does before it parks (the same [`SpinWait`]: three short
/// spins, then seven yields of the thread), letting the region's other
/// tasks run between looks. Queueing at once made every hand-off between
/// the regions a thread wake-up: when all of a region's tasks wait on the
/// other region, its thread parks, and the other region's `V` pays the
/// wake-up (PC at work 100 ran 3-6x slower than `cp-lockfree` that way).
/// Looking without yielding the thread was worse on a loaded machine: the
/// looking thread kept the core its partner needed (a 20-50 us budget of
/// task-only yields made PC 10-50x slower).
pub(super) async fn p_async(sem: &lockfree_sync::Semaphore) {
    let mut spin = SpinWait::new();
    loop {
        if let Ok(permit) = sem.try_acquire() {
            permit.forget();
            return;
        }
        if !spin.spin() {
            break;
        }
        yield_now().await;
    }
    sem.acquire_async().await.expect("never closed").forget();
}

/// The first correctness violation seen by any thread of a run. Written only
/// when a check fails, so a correct run never touches it.
#[derive(Default)]
pub(super) struct Fault(OnceLock<String>);

impl Fault {
    /// Records `what` unless an earlier violation was recorded.
    #[cold]
    pub(super) fn fail(&self, what: impl FnOnce() -> String) {
        let _ = self.0.get_or_init(what);
    }

    /// `Ok(elapsed)`, or the recorded violation.
    pub(super) fn verdict(&self, elapsed: Duration) -> Result<Duration, Violation> {
        match self.0.get() {
            None => Ok(elapsed),
            Some(what) => Err(Violation(what.clone())),
        }
    }
}

/// [`Fault`] for the single-threaded `cm` model: a `RefCell`, no lock.
#[derive(Default)]
pub(super) struct LocalFault(RefCell<Option<String>>);

impl LocalFault {
    /// Records `what` unless an earlier violation was recorded.
    #[cold]
    pub(super) fn fail(&self, what: impl FnOnce() -> String) {
        let mut first = self.0.borrow_mut();
        if first.is_none() {
            *first = Some(what());
        }
    }

    /// `Ok(elapsed)`, or the recorded violation.
    pub(super) fn verdict(&self, elapsed: Duration) -> Result<Duration, Violation> {
        match &*self.0.borrow() {
            None => Ok(elapsed),
            Some(what) => Err(Violation(what.clone())),
        }
    }
}

/// A future that returns `Pending` once, having woken its task: the task
/// goes to the back of the ready queue (the paper's `nap(0)`).
pub(super) struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Yields to the other ready tasks once.
pub(super) fn yield_now() -> YieldNow {
    YieldNow(false)
}

/// The paper's simulated `await cond`: yield until `cond` holds. No context
/// switch can happen between the last test and the caller's next statement,
/// so the caller may act on `cond` without a lock.
pub(super) async fn wait_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        yield_now().await;
    }
}

/// A region's generation counter whose waiters sleep instead of yielding
/// (`pcm` only; one thread, so `Cell`s and no lock).
///
/// The simulated `await` polls, which is right when the condition is made
/// true by a task of the same thread: the poller's yield runs that task. In
/// a `pcm` region, a waiter whose condition waits on the *other* region
/// would keep its thread busy polling and, on a loaded machine, take the
/// core from the very region it waits for (a 300-iteration JI run took
/// 1.5 s instead of 10 ms that way). So a region's barrier waiters register
/// their wakers here, and the region's thread parks while the region's
/// last arrival waits on the other region.
#[derive(Default)]
pub(super) struct RegionEvent {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl RegionEvent {
    /// The current generation.
    pub(super) fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Starts the next generation and wakes every waiter.
    pub(super) fn advance(&self) {
        self.generation.set(self.generation.get() + 1);
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Waits until the generation differs from `seen`.
    pub(super) fn after(&self, seen: u64) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.generation.get() != seen {
                Poll::Ready(())
            } else {
                self.wakers.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

/// A task of a cooperative model (not `Send`: its state is in `Rc`/`Cell`).
pub(super) type LocalTask = Pin<Box<dyn Future<Output = ()>>>;

fn pool_with(tasks: Vec<LocalTask>) -> LocalPool {
    let pool = LocalPool::new();
    let spawner = pool.spawner();
    for task in tasks {
        spawner
            .spawn_local_obj(LocalFutureObj::new(task))
            .expect("the pool is running");
    }
    pool
}

/// `cm`: runs `tasks` to completion on this thread; returns how long they
/// took (spawning is not timed).
pub(super) fn run_cm(tasks: Vec<LocalTask>) -> Duration {
    let mut pool = pool_with(tasks);
    let start = Instant::now();
    pool.run();
    start.elapsed()
}

/// A region's task builder: runs on the region's thread, so the tasks it
/// builds may share `Rc` state.
pub(super) type Region = Box<dyn FnOnce() -> Vec<LocalTask> + Send>;

/// `pcm`: one thread per region, each running its region's tasks on its own
/// cooperative executor; the regions start together. Returns the time from
/// the start until the last region finishes. Building the tasks and
/// spawning the threads are not timed.
pub(super) fn run_regions(regions: Vec<Region>) -> Duration {
    let start = Arc::new(StartLine::new(regions.len()));
    let handles: Vec<_> = regions
        .into_iter()
        .map(|build| {
            let start = Arc::clone(&start);
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    let mut pool = pool_with(build());
                    start.wait();
                    pool.run();
                    Instant::now()
                })
                .expect("spawn a region thread")
        })
        .collect();
    finish(handles, &start)
}

/// `cp-*`: runs `body(i)` on `n` OS threads started together; returns the
/// time from the start until the last one finishes (spawn and join not
/// timed).
pub(super) fn run_threads(n: usize, body: impl Fn(usize) + Send + Sync + 'static) -> Duration {
    let body = Arc::new(body);
    let start = Arc::new(StartLine::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (body, start) = (Arc::clone(&body), Arc::clone(&start));
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    start.wait();
                    body(i);
                    Instant::now()
                })
                .expect("spawn a benchmark thread")
        })
        .collect();
    finish(handles, &start)
}

fn finish(handles: Vec<thread::JoinHandle<Instant>>, start: &StartLine) -> Duration {
    let end = handles
        .into_iter()
        .map(|h| h.join().expect("a benchmark thread panicked"))
        .max()
        .expect("at least one thread");
    end - start.started()
}

/// A count shared by threads whose every access is ordered by a semaphore
/// of the program (the baton): `Relaxed` suffices, since the semaphore's
/// release/acquire pair carries the happens-before.
#[derive(Default)]
pub(super) struct Counter(AtomicUsize);

impl Counter {
    #[inline]
    pub(super) fn get(&self) -> usize {
        // Relaxed: ordered by the semaphore that guards this count.
        self.0.load(Ordering::Relaxed)
    }
    #[inline]
    pub(super) fn set(&self, v: usize) {
        // Relaxed: ordered by the semaphore that guards this count.
        self.0.store(v, Ordering::Relaxed);
    }
}
