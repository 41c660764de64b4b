//! Program order (the paper's rules 2 and 3, and appendix B).
//!
//! A *worker* is a thread: the record of its last asynchronous task is a
//! thread-local, as the paper's runtime keeps a map from worker thread ids
//! to their last submission. A handle type (`Worker`) passed to every
//! submission was the alternative; it would follow an async task across
//! executor threads, but it would make every call site carry it, and a
//! thread-local costs a couple of nanoseconds. An async task that migrates
//! between threads gets the guarantees of the threads it runs on; code that
//! needs more awaits its completions, which orders everything.

use core::cell::RefCell;

use std::sync::Arc;

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
    /// asynchronous task must have completed if that task was on another
    /// monitor, or waited on a precondition (a waiting task would otherwise
    /// be overtaken by the worker's next one). The submission blocks the
    /// thread until then.
    ///
    /// So a thread that submits a task waiting on a precondition, then a
    /// task that would make it true, deadlocks: under strict order the
    /// second submission waits for the first task. Make the precondition
    /// true from another thread, or use [`Order::Relaxed`].
    #[default]
    Strict,
    /// The paper's appendix B ("NPO"): no waiting for earlier tasks. A
    /// worker's plain tasks on one monitor still run in submission order
    /// (the queue is FIFO), but a task that waits on its precondition may
    /// be overtaken, and tasks on different monitors run in any order. A
    /// task's result, once awaited, orders everything after it.
    ///
    /// A submission never waits for an earlier task, so any number of
    /// async tasks may wait on preconditions from one executor thread (a
    /// per-thread bound used to park the thread: with a single-threaded
    /// runtime that was a deadlock). The trade-off: the task queue's
    /// back-pressure ends where waiting begins, so the waiting tasks are
    /// bounded only by what the application keeps outstanding (memory
    /// grows with the tasks waiting, not with the history), and every task
    /// that runs re-checks the waiting predicates (all of them when none
    /// holds; tasks with entry sets, [`Monitor::when_in`](crate::Monitor::when_in),
    /// are looked at only in their states). Bound your outstanding waits,
    /// e.g. by awaiting results, if they can grow large.
    Relaxed,
}

/// A worker's last asynchronous task, as strict order needs it.
pub(crate) trait Pending: Send + Sync {
    fn is_done(&self) -> bool;
    fn wait_done(&self);
}

struct Last {
    /// The monitor's address.
    monitor: usize,
    /// Whether the task had a precondition (it may wait).
    conditional: bool,
    task: Arc<dyn Pending>,
}

#[derive(Default)]
struct Worker {
    /// Strict: the last asynchronous task.
    last: Option<Last>,
}

#[cfg(not(loom))]
std::thread_local! {
    static WORKER: RefCell<Worker> = RefCell::new(Worker::default());
}

#[cfg(loom)]
sync_core::loom::thread_local! {
    static WORKER: RefCell<Worker> = RefCell::new(Worker::default());
}

/// Before a submission to `monitor` (0 for an OR/AND): under strict order,
/// waits for the worker's previous asynchronous task if rule 3 (or a
/// precondition) says so; under relaxed order, does nothing.
#[inline]
pub(crate) fn before_submit(monitor: usize, order: Order) {
    if order == Order::Relaxed {
        return;
    }
    let wait_for = WORKER.with(|w| {
        w.borrow_mut().last.take().and_then(|last| {
            ((last.monitor != monitor || last.conditional) && !last.task.is_done())
                .then_some(last.task)
        })
    });
    // Outside the borrow: a task this thread runs meanwhile (as a combiner)
    // may submit too.
    if let Some(task) = wait_for {
        task.wait_done();
    }
}

/// After an asynchronous submission that did not complete at once (strict
/// order only records it).
#[inline]
pub(crate) fn submitted(monitor: usize, conditional: bool, task: Arc<dyn Pending>, order: Order) {
    if order == Order::Relaxed {
        return;
    }
    WORKER.with(|w| {
        w.borrow_mut().last = Some(Last {
            monitor,
            conditional,
            task,
        })
    });
}
