//! Program order (the paper's rules 2 and 3, and appendix B), and worker
//! scopes.
//!
//! A *worker* is a thread by default: the record of its last asynchronous
//! task is a thread-local, as the paper's runtime keeps a map from worker
//! thread ids to their last submission. A handle passed to every submission
//! was the alternative; it would make every call site carry it, and a
//! thread-local costs a couple of nanoseconds. Async tasks that share a
//! thread share its record unless each runs in its own [`worker`] scope,
//! which installs the task's own record for the duration of each poll (and
//! carries it along when the task moves to another thread).
//!
//! The synchronous methods wait for what program order says by parking the
//! thread; the async ones ([`Monitor::submit_async`](crate::Monitor::submit_async)
//! and its kin) await it. The record is only read while a submission
//! waits: it stays in place, so that every task sharing it waits for the
//! same pending task (each with its own waiter on the task's
//! [`Finish`]).

use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::collections::VecDeque;

use std::sync::{Arc, Weak};

use sync_core::sync::Arc as LoomArc;
use sync_core::waiter::Waiter;

use crate::completion::Finish;

/// How a monitor orders a worker's asynchronous tasks.
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, Order};
///
/// let m = Monitor::builder().order(Order::Relaxed).build(0);
/// m.submit(|n| *n += 1);
/// assert_eq!(m.call(|n| *n), 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// The paper's rules 2 and 3. A worker's tasks on one monitor run in
    /// submission order. Before a worker submits to a monitor, its previous
    /// asynchronous task must have completed (or been
    /// [cancelled](crate::Completion::cancel)) if that task was on another
    /// monitor, or waited on a precondition (a waiting task would otherwise
    /// be overtaken by the worker's next one). The synchronous methods
    /// (`call`, `submit`, `when`, ...) block the thread until then; the
    /// async ones ([`submit_async`](crate::Monitor::submit_async), ...)
    /// await it without blocking the executor.
    ///
    /// So a worker that submits a task waiting on a precondition, then a
    /// task that would make it true, deadlocks: under strict order the
    /// second submission waits for the first task. Make the precondition
    /// true from another worker, or use [`Order::Relaxed`].
    ///
    /// A worker is a thread, unless a future runs in a [`worker`] scope.
    /// Async tasks that share a thread (a current-thread runtime, a
    /// `LocalPool`) otherwise share one worker: one task's `when` then holds
    /// back another task's submissions, and if that other task is the one
    /// that would make the precondition true, both wait for ever (with the
    /// async methods the executor keeps running its other tasks; with the
    /// synchronous ones its thread is parked). Wrap each such task in
    /// [`worker`] to make it a worker of its own.
    ///
    /// **On a multi-thread runtime, wrap every task that relies on strict
    /// order in [`worker`].** A task may be moved to another thread between
    /// two of its submissions; without a scope each submission is recorded
    /// in the thread that polled it, so the task's second submission is not
    /// held back by its first (rule 3 does not hold for it), and the first
    /// holds back whatever else that thread runs.
    #[default]
    Strict,
    /// The paper's appendix B ("NPO"): no waiting for earlier tasks. A
    /// worker's plain tasks on one monitor still run in submission order
    /// (the queue is FIFO), but a task that waits on its precondition may
    /// be overtaken, and tasks on different monitors run in any order. A
    /// task's result, once awaited, orders everything after it.
    ///
    /// One bound remains: a worker may have at most
    /// [`RELAXED_WAITING_LIMIT`] (64) tasks waiting on preconditions; its
    /// next submission of a task with a precondition (`when`, `when_in`,
    /// `or`, `and`) then waits until the oldest has finished (parks the
    /// thread in the synchronous methods, awaits in the async ones). Tasks
    /// without one (`call`, `submit`) never wait on the data and are not
    /// held back, so a worker with many waiting tasks can still submit the
    /// tasks that enable them.
    /// Without it a producer could pile up waiting tasks without limit (the
    /// task queue's back-pressure ends where waiting begins), and every
    /// task that runs re-checks the waiting predicates (all of them when
    /// none holds; tasks with entry sets, [`Monitor::when_in`](crate::Monitor::when_in),
    /// are looked at only in their states). The paper's bounded queue with
    /// asynchronous puts (`sync-examples --bin bounded_queue`, 2 producers,
    /// 2 consumers) moves 2.6 M items/s with a bound of 16, 2.0 M with 64,
    /// 0.8 M with 256, and under 0.01 M without one.
    ///
    /// The bound is per worker, not per monitor: a per-monitor bound would
    /// let one busy producer hold back every other worker's submissions to
    /// that monitor (and a worker with tasks on several monitors would need
    /// a count on each). Per worker, only the worker that piles up waits.
    /// Async tasks on one thread share the thread's bound unless each runs
    /// in a [`worker`] scope; with the async methods, a submission beyond
    /// the bound awaits the oldest waiting task instead of parking the
    /// executor's thread, so the executor's other tasks (those that would
    /// enable the waiting ones among them) keep running.
    Relaxed,
}

/// A worker's asynchronous task, as program order waits for it.
pub(crate) trait Pending: Send + Sync {
    /// How the task ends (and who waits for it to).
    fn finish(&self) -> &Finish;
}

/// How many of its tasks waiting on preconditions a worker may have
/// outstanding under [`Order::Relaxed`] before its next submission of a
/// task with a precondition waits for the oldest (plain tasks are not held
/// back).
pub const RELAXED_WAITING_LIMIT: usize = 64;

struct Last {
    /// The monitor's address.
    monitor: usize,
    /// Whether the task had a precondition (it may wait).
    conditional: bool,
    task: Weak<dyn Pending>,
}

/// A worker's record: what program order makes its next submission wait
/// for.
///
/// Tasks are held by `Weak` references. The record must not keep a task
/// alive: a result nobody took (its completion was dropped) is dropped as
/// soon as the task has run, not at the worker's next submission, and no
/// user drop ever runs inside the record's borrow (a drop that submits
/// would borrow it again). A task nobody holds any more has finished: the
/// queue, the waiting list and the completion all hold it until then.
#[derive(Default)]
pub(crate) struct Record {
    /// Strict: the last asynchronous task.
    last: Option<Last>,
    /// Relaxed: the outstanding tasks with preconditions, oldest first.
    waiting: VecDeque<Weak<dyn Pending>>,
}

/// The task if it may still be unfinished.
fn unfinished(task: &Weak<dyn Pending>) -> Option<Arc<dyn Pending>> {
    task.upgrade().filter(|t| !t.finish().is_finished())
}

impl Record {
    /// What a submission to `monitor` must wait for first, if anything;
    /// the record is left as it is (`take`: strict's last task is taken,
    /// for a thread that waits for it before going on). Under relaxed
    /// order only a `conditional` submission (one that may wait) is held
    /// back by the bound on waiting tasks.
    fn must_wait(
        &mut self,
        monitor: usize,
        order: Order,
        conditional: bool,
        take: bool,
    ) -> Option<Arc<dyn Pending>> {
        match order {
            Order::Strict => {
                let last = self.last.as_ref()?;
                let wait = if last.monitor != monitor || last.conditional {
                    unfinished(&last.task)
                } else {
                    None
                };
                if take {
                    self.last = None;
                }
                wait
            }
            Order::Relaxed => {
                if !conditional {
                    return None;
                }
                while self
                    .waiting
                    .front()
                    .is_some_and(|t| unfinished(t).is_none())
                {
                    self.waiting.pop_front();
                }
                if self.waiting.len() >= RELAXED_WAITING_LIMIT {
                    // Finished tasks behind an unfinished oldest do not
                    // count: the bound is on tasks that wait.
                    self.waiting.retain(|t| unfinished(t).is_some());
                }
                if self.waiting.len() < RELAXED_WAITING_LIMIT {
                    return None;
                }
                let oldest = self.waiting.front().and_then(unfinished);
                if take {
                    self.waiting.pop_front();
                }
                oldest
            }
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    static WORKER: RefCell<Record> = RefCell::new(Record::default());
}

#[cfg(loom)]
sync_core::loom::thread_local! {
    static WORKER: RefCell<Record> = RefCell::new(Record::default());
}

/// Before a synchronous submission of a task with a precondition to
/// `monitor` (0 for an OR/AND): under strict order, waits for the worker's
/// previous asynchronous task if rule 3 (or a precondition) says so; under
/// relaxed order, waits for the oldest of its tasks waiting on
/// preconditions if it has [`RELAXED_WAITING_LIMIT`]. Parks the thread.
#[inline]
pub(crate) fn before_submit(monitor: usize, order: Order) {
    before(monitor, order, true);
}

/// [`before_submit`] for a task without a precondition (`call`,
/// `submit`): it never waits, so the relaxed bound on waiting tasks does
/// not hold it back.
#[inline]
pub(crate) fn before_plain_submit(monitor: usize, order: Order) {
    before(monitor, order, false);
}

#[inline]
fn before(monitor: usize, order: Order, conditional: bool) {
    let wait_for = WORKER.with(|w| w.borrow_mut().must_wait(monitor, order, conditional, true));
    // Outside the borrow: a task this thread runs meanwhile (as a combiner)
    // may submit too.
    if let Some(task) = wait_for {
        task.finish().wait();
    }
}

/// What an asynchronous submission to `monitor` must await first (see
/// [`before_submit`]), if anything. The record is left in place: every
/// task that shares the worker waits for the same task.
#[inline]
pub(crate) fn to_await(monitor: usize, order: Order, conditional: bool) -> Option<OrderWait> {
    WORKER
        .with(|w| w.borrow_mut().must_wait(monitor, order, conditional, false))
        .map(|task| OrderWait { task, waiter: None })
}

/// After an asynchronous submission that did not complete at once.
#[inline]
pub(crate) fn submitted(monitor: usize, conditional: bool, task: Arc<dyn Pending>, order: Order) {
    // The caller's completion still holds the task: this is not the last
    // reference, and only a `Weak` goes into the record.
    let task = Arc::downgrade(&task);
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        match order {
            Order::Strict => {
                w.last = Some(Last {
                    monitor,
                    conditional,
                    task,
                })
            }
            Order::Relaxed => {
                if conditional {
                    w.waiting.push_back(task);
                }
            }
        }
    });
}

/// Awaits a worker's earlier task, as program order says (a task waiter on
/// the task's [`Finish`]; dropping it withdraws the waiter).
pub(crate) struct OrderWait {
    task: Arc<dyn Pending>,
    waiter: Option<LoomArc<Waiter>>,
}

impl OrderWait {
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.task.finish().poll_finished(&mut self.waiter, cx)
    }
}

impl Drop for OrderWait {
    fn drop(&mut self) {
        self.task.finish().withdraw(&mut self.waiter);
    }
}

/// Runs `future` as a worker of its own: its submissions follow program
/// order among themselves only, not with the other tasks of the thread it
/// runs on.
///
/// A worker is a thread by default (the paper's workers are threads). Async
/// tasks that share a thread, on a current-thread runtime or a `LocalPool`,
/// or that happen to run on the same worker thread of a multi-thread
/// runtime, then share one record of what they submitted: under
/// [`Order::Strict`] one task's pending `when` holds back every other
/// task's next submission, and under [`Order::Relaxed`] they share one
/// [`RELAXED_WAITING_LIMIT`]. `worker(future)` gives the future its own
/// record, installed in the thread for the duration of each poll (the
/// thread's own is put back after it) and carried along when the future
/// moves to another thread.
///
/// Use it for every spawned task that submits to monitors with
/// [`Order::Strict`] and may wait on preconditions, as one would give each
/// thread its own worker: typically `spawn(worker(async move { .. }))`.
/// Without it, two tasks where one awaits a `when` that only the other can
/// make true wait for each other for ever (logically: with the async
/// methods the executor's thread is not parked and runs its other tasks).
///
/// The scope costs two swaps of the worker record (a few words) and two
/// thread-local borrows per poll.
///
/// # Examples
///
/// ```
/// use futures::executor::LocalPool;
/// use futures::task::LocalSpawnExt;
/// use std::rc::Rc;
/// use active_monitor::{Monitor, worker};
///
/// let m = Rc::new(Monitor::new(0)); // strict order
/// let mut pool = LocalPool::new();
/// let (a, b) = (Rc::clone(&m), Rc::clone(&m));
/// // Two tasks on one thread: without `worker`, B's submission would wait
/// // for A's pending `when`, which only B can enable.
/// let taken = pool
///     .spawner()
///     .spawn_local_with_handle(worker(async move {
///         a.when_async(|n| *n > 0, |n| *n).await.await
///     }))
///     .unwrap();
/// pool.spawner()
///     .spawn_local(worker(async move {
///         b.submit_async(|n| *n = 7).await.await;
///     }))
///     .unwrap();
/// assert_eq!(pool.run_until(taken), 7);
/// ```
pub fn worker<F: Future>(future: F) -> Worker<F> {
    Worker {
        future,
        record: Record::default(),
    }
}

/// A future that runs as a worker of its own: made by [`worker`].
///
/// # Examples
///
/// ```
/// let m = active_monitor::Monitor::new(1);
/// let n = futures::executor::block_on(active_monitor::worker(async {
///     m.call_async(|n| *n + 1).await
/// }));
/// assert_eq!(n, 2);
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Worker<F> {
    future: F,
    record: Record,
}

impl<F: Future> Future for Worker<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // `future` is structurally pinned: it is never moved out of the
        // `Worker` (no method hands it out by value, and `Worker` has no
        // `Drop` that could move it); `record` is not pinned, and is only
        // swapped, never the future.
        // SAFETY: we move nothing out of `this` but `record` (swapped, not
        // pinned), as the comment above says.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `this.future` stays where it is from now on.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        /// Puts the thread's record back, even if the poll unwinds.
        struct Swap<'a>(&'a mut Record);
        impl Drop for Swap<'_> {
            fn drop(&mut self) {
                WORKER.with(|w| core::mem::swap(&mut *w.borrow_mut(), self.0));
            }
        }
        WORKER.with(|w| core::mem::swap(&mut *w.borrow_mut(), &mut this.record));
        let _back = Swap(&mut this.record);
        future.poll(cx)
    }
}

impl<F> core::fmt::Debug for Worker<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}
