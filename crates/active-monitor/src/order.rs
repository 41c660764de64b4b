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
    #[default]
    Strict,
    /// The paper's appendix B ("NPO"): no waiting for earlier tasks. A
    /// worker's plain tasks on one monitor still run in submission order
    /// (the queue is FIFO), but a task that waits on its precondition may
    /// be overtaken, and tasks on different monitors run in any order. A
    /// task's result, once awaited, orders everything after it.
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

#[cfg(not(loom))]
std::thread_local! {
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

#[cfg(loom)]
sync_core::loom::thread_local! {
    static LAST: RefCell<Option<Last>> = RefCell::new(None);
}

/// Before a submission to `monitor` under strict order: waits for the
/// worker's previous asynchronous task if rule 3 (or a precondition) says
/// so, and forgets it.
#[inline]
pub(crate) fn before_submit(monitor: usize) {
    let last = LAST.with(|l| l.borrow_mut().take());
    if let Some(last) = last {
        if (last.monitor != monitor || last.conditional) && !last.task.is_done() {
            last.task.wait_done();
        }
    }
}

/// After an asynchronous submission that did not complete at once.
#[inline]
pub(crate) fn submitted(monitor: usize, conditional: bool, task: Arc<dyn Pending>) {
    LAST.with(|l| {
        *l.borrow_mut() = Some(Last {
            monitor,
            conditional,
            task,
        });
    });
}
