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
use std::collections::VecDeque;

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
    /// One bound remains: a thread may have at most
    /// [`RELAXED_WAITING_LIMIT`] (64) tasks waiting on preconditions; its
    /// next submission then parks the thread until the oldest has run.
    /// Without it a producer could pile up waiting tasks without limit (the
    /// task queue's back-pressure ends where waiting begins), and every
    /// task that runs re-checks the waiting predicates (all of them when
    /// none holds; tasks with entry sets, [`Monitor::when_in`](crate::Monitor::when_in),
    /// are looked at only in their states). The paper's bounded queue with
    /// asynchronous puts (`sync-examples --bin bounded_queue`, 2 producers,
    /// 2 consumers) moves 2.6 M items/s with a bound of 16, 2.0 M with 64,
    /// 0.8 M with 256, and under 0.01 M without one.
    ///
    /// The trade-off is with single-threaded executors: the bound is per
    /// thread, so async tasks sharing one thread (a current-thread tokio
    /// runtime, a `LocalPool`) share it, and a submission beyond it parks
    /// the executor's only thread, which deadlocks if only tasks on that
    /// thread can enable the waiting ones. Keep at most 64 tasks awaiting
    /// preconditions per executor thread (a per-monitor bound with an
    /// asynchronous wait is not written yet).
    Relaxed,
}

/// A worker's last asynchronous task, as strict order needs it.
pub(crate) trait Pending: Send + Sync {
    fn is_done(&self) -> bool;
    fn wait_done(&self);
}

/// How many of its tasks waiting on preconditions a worker may have
/// outstanding under [`Order::Relaxed`] before its next submission waits
/// for the oldest.
pub const RELAXED_WAITING_LIMIT: usize = 64;

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
    /// Relaxed: the outstanding tasks with preconditions, oldest first.
    waiting: VecDeque<Arc<dyn Pending>>,
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
/// precondition) says so; under relaxed order, waits for the oldest of its
/// tasks waiting on preconditions if it has [`RELAXED_WAITING_LIMIT`].
#[inline]
pub(crate) fn before_submit(monitor: usize, order: Order) {
    let wait_for = WORKER.with(|w| {
        let mut w = w.borrow_mut();
        match order {
            Order::Strict => w.last.take().and_then(|last| {
                ((last.monitor != monitor || last.conditional) && !last.task.is_done())
                    .then_some(last.task)
            }),
            Order::Relaxed => {
                while w.waiting.front().is_some_and(|t| t.is_done()) {
                    w.waiting.pop_front();
                }
                if w.waiting.len() >= RELAXED_WAITING_LIMIT {
                    w.waiting.pop_front()
                } else {
                    None
                }
            }
        }
    });
    // Outside the borrow: a task this thread runs meanwhile (as a combiner)
    // may submit too.
    if let Some(task) = wait_for {
        task.wait_done();
    }
}

/// After an asynchronous submission that did not complete at once.
#[inline]
pub(crate) fn submitted(monitor: usize, conditional: bool, task: Arc<dyn Pending>, order: Order) {
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
