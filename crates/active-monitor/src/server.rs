//! Dedicated server threads (the paper's "monitor threads", section 6):
//! the process-wide cap on their number, the handle of a monitor built
//! with one ([`Served`]), and the server's loop.
//!
//! # The server's protocol
//!
//! The server is a holder of the monitor like a combiner: it takes the
//! lock word, runs the queue, and releases with the same fence protocol
//! (`Monitor::release`). Between stints it watches the queue for a short
//! while ([`SPIN`], less than a wake-up costs), then sleeps on a
//! [`Waiter`] it pushes on the monitor's `sleeper` queue:
//!
//! 1. push the waiter; SeqCst fence; if a task is ready and the lock is
//!    free, withdraw (`cancel`) and go on serving;
//! 2. otherwise park until notified.
//!
//! A submitter that publishes a task (`Monitor::after_push`) fences, then
//! looks at `sleeper`: if a waiter is there, it takes the lock, pops the
//! waiter and notifies it with [`HELD`]: the server wakes holding the
//! monitor. The two SeqCst fences pair: either the submitter sees the
//! waiter (and wakes it), or the server sees the task (and does not
//! sleep). A waiter the server withdrew makes the notify fail; the
//! submitter then lets go of the lock and looks again. So a published task
//! never waits in the queue of a sleeping server.
//!
//! # Lifetime and soundness
//!
//! The monitor lives in an [`Arc`] shared by the server thread and the
//! users' handles ([`Served`], which count the users apart). When the last
//! handle is dropped, its drop sets the server's `stop` flag, wakes the
//! server if it sleeps (with [`STOP`], by the same fence protocol as a
//! submitter: `stop`, SeqCst fence, look at `sleeper`), and joins the
//! thread; the monitor's own `Drop` then runs there, after the server is
//! gone, and runs the tasks still queued. If the last handle is dropped
//! by a task running on the server thread (a task that owned one), the
//! thread cannot join itself: it ends its stint, finds `stop`, and drops
//! the monitor itself on its way out.
//!
//! What crosses threads is the monitor's `T` (owned, `T: Send`) and its
//! tasks (`Send`): the same as with combining, where any submitter may run
//! any task. The thread owns a strong reference, so it never outlives the
//! data, whatever the users do with their handles (forgetting one leaks
//! the monitor and its sleeping thread, nothing worse). The thread needs
//! `T: 'static` (it may run after the builder's scope); monitors without a
//! server keep accepting borrowed data.

use core::fmt;
use core::ops::Deref;
// Process-wide statics: std's atomics in every build (loom's are not
// `const`); a counter of threads, not a protocol loom needs to see.
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
// `std::sync::Arc`, as for tasks: the counts decide which thread drops the
// monitor, after a join or on the server thread itself (both ordered for
// loom by the join, or by program order).
use std::sync::Arc;

use ast_mutex::AbstractState;
use sync_core::sync::atomic::{AtomicBool, Ordering::SeqCst, fence};
use sync_core::sync::thread::{self, JoinHandle};
use sync_core::waiter::{Token, Waiter, WaiterQueue};

use crate::NoState;
use crate::monitor::Monitor;
use crate::saturation;
use crate::unwind;

/// The token that wakes a sleeping server holding the monitor.
pub(crate) const HELD: Token = 1;
/// The token that wakes a sleeping server whose monitor is gone.
pub(crate) const STOP: Token = 2;

/// How long an idle server watches its queue before it sleeps: less than
/// a wake-up (the report's `base/park-unpark`), so that
/// a steady stream of submissions with short gaps never pays one.
#[cfg(not(loom))]
pub(crate) const SPIN: std::time::Duration = std::time::Duration::from_micros(20);

/// The process-wide cap ([`set_server_limit`]); `usize::MAX`: the default.
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Server threads alive (one per monitor built with one, until its drop).
static SERVERS: AtomicUsize = AtomicUsize::new(0);

/// Sets the most server threads the process may have at once (the paper's
/// "upper bound on server threads"). A monitor built with
/// [`Builder::build_served`](crate::Builder::build_served) once the cap is
/// reached gets no server: it runs by combining, as a monitor built with
/// [`build`](crate::Builder::build) does ([`Monitor::has_server`] tells).
/// Lowering the cap stops no running server; servers are counted down as
/// their monitors are dropped.
///
/// The default is [`std::thread::available_parallelism`]: one server per
/// CPU at most. `usize::MAX` is not "no limit": it stands for that
/// default (set it to restore the default; [`server_limit`] then tells
/// the CPU count).
///
/// # Examples
///
/// ```
/// active_monitor::set_server_limit(usize::MAX); // the default
/// assert!(active_monitor::server_limit() < usize::MAX);
/// active_monitor::set_server_limit(0); // no more server threads
/// let m = active_monitor::Monitor::builder().build_served(0);
/// assert!(!m.has_server());
/// assert_eq!(m.call(|n| *n + 1), 1); // combining instead
/// ```
pub fn set_server_limit(limit: usize) {
    LIMIT.store(limit, Relaxed);
}

/// The cap on server threads ([`set_server_limit`]).
///
/// # Examples
///
/// ```
/// assert!(active_monitor::server_limit() >= 1);
/// ```
pub fn server_limit() -> usize {
    match LIMIT.load(Relaxed) {
        usize::MAX => saturation::cpus(),
        n => n,
    }
}

/// How many server threads run now (monitors with a server, not dropped).
///
/// # Examples
///
/// ```
/// let before = active_monitor::servers();
/// let m = active_monitor::Monitor::builder().build_served(0);
/// if m.has_server() {
///     assert!(active_monitor::servers() >= 1);
/// }
/// drop(m);
/// # let _ = before;
/// ```
pub fn servers() -> usize {
    SERVERS.load(Relaxed)
}

/// Counts a server in, if under the cap.
fn acquire_slot() -> bool {
    let limit = server_limit();
    SERVERS
        .fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1))
        .is_ok()
}

/// The server side of a monitor built with one. Its drop (with the
/// monitor's) gives the thread's slot back.
pub(crate) struct ServerSlot {
    /// The sleeping server's waiter (at most one live); popped, like the
    /// task queue, by the monitor's holder only.
    pub(crate) sleeper: WaiterQueue,
    /// Set when the last user handle is gone: the server ends.
    pub(crate) stop: AtomicBool,
}

impl ServerSlot {
    fn new() -> Self {
        Self {
            sleeper: WaiterQueue::new(),
            stop: AtomicBool::new(false),
        }
    }
}

impl Drop for ServerSlot {
    fn drop(&mut self) {
        SERVERS.fetch_sub(1, Relaxed);
    }
}

/// A monitor with a dedicated server thread, shared: clone the handle to
/// share the monitor (as an [`Arc`]); it derefs to the [`Monitor`].
///
/// Built by [`Builder::build_served`](crate::Builder::build_served). The
/// server runs the tasks; submitters only publish them (see
/// [`Monitor`]'s "Execution"). When the last handle is dropped, the queued
/// tasks run, the tasks waiting on preconditions resolve to
/// [`Discarded`](crate::Discarded), and the server thread is stopped and
/// joined. A task that drops the last handle runs on the server thread,
/// which cannot join itself: the drop returns at once, and the server
/// finishes its stint, then drops the monitor (as above) on its way out.
///
/// # Examples
///
/// ```
/// use active_monitor::Monitor;
///
/// let m = Monitor::builder().build_served(Vec::new());
/// let workers: Vec<_> = (0..2)
///     .map(|i| {
///         let m = m.clone();
///         std::thread::spawn(move || m.submit(move |v| v.push(i)).wait())
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// assert_eq!(m.call(|v| v.len()), 2);
/// ```
pub struct Served<T, S: AbstractState = NoState>(Arc<Users<T, S>>);

/// What the users' handles share: the monitor and the server thread,
/// stopped and joined when the last handle goes.
struct Users<T, S: AbstractState> {
    monitor: Arc<Monitor<T, S>>,
    thread: Option<JoinHandle<()>>,
}

impl<T, S: AbstractState> Clone for Served<T, S> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T, S: AbstractState> Deref for Served<T, S> {
    type Target = Monitor<T, S>;

    fn deref(&self) -> &Monitor<T, S> {
        &self.0.monitor
    }
}

impl<T, S: AbstractState> fmt::Debug for Served<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0.monitor, f)
    }
}

impl<T: Send + 'static, S: AbstractState + Send + 'static> Served<T, S> {
    /// `monitor`, shared, with a server thread if the cap allows one.
    pub(crate) fn start(monitor: impl FnOnce(Option<ServerSlot>) -> Monitor<T, S>) -> Self {
        let slot = acquire_slot().then(ServerSlot::new);
        let served = slot.is_some();
        let monitor = Arc::new(monitor(slot));
        let thread = served.then(|| {
            let m = Arc::clone(&monitor);
            thread::spawn(move || run(m))
        });
        Self(Arc::new(Users { monitor, thread }))
    }
}

impl<T, S: AbstractState> Drop for Users<T, S> {
    /// The last handle: stops the server (waking it if it sleeps) and joins
    /// it, unless this runs on the server thread (a task dropped the last
    /// handle), which then ends after its stint. The monitor is dropped
    /// with the last reference, the thread's or ours.
    fn drop(&mut self) {
        let Some(srv) = self.monitor.server_slot() else {
            return;
        };
        srv.stop.store(true, Relaxed);
        // SeqCst fence: pairs with the one in `prepare_sleep`: either the
        // server sees `stop` and does not sleep, or we see its waiter.
        fence(SeqCst);
        self.monitor.wake_server_to_stop();
        if let Some(h) = self.thread.take() {
            if h.thread().id() != thread::current().id() {
                // The join waits for the server's stint: what this thread
                // keeps goes first (see `unwind::before_park`), as before
                // any wait of the family. A task the server runs may wait
                // for the next step of a task whose waker we keep (the
                // last handle dropped in a task body of another monitor).
                crate::unwind::before_park();
                // The server catches every panic of user code, so it does
                // not end by one; if it did, there is nothing to resume.
                let _ = h.join();
            }
        }
    }
}

/// The server thread: serves until stopped, then lets go of its
/// reference to the monitor.
fn run<T, S: AbstractState>(m: Arc<Monitor<T, S>>) {
    serve_until_stopped(&m);
    // Ours may be the last reference (a task of this thread dropped the
    // last handle): the monitor's drop then runs here, and resumes at its
    // end a panic of a drop it made (a task still waiting, discarded).
    // Nobody waits for this thread, so it is dropped here, as the loop's
    // are. Unwinding out of the thread, it was reported as the server's
    // own panic, and std drops a detached thread's payload outside any
    // catch: a payload whose drop panicked aborted the process.
    sync_core::unwind::catch_and_discard(move || drop(m));
}

/// The server's loop, until the last handle's drop sets `stop`.
fn serve_until_stopped<T, S: AbstractState>(m: &Monitor<T, S>) {
    let srv = m.server_slot().expect("a served monitor");
    // Whether the monitor was handed to us, held (`HELD`).
    let mut held = false;
    loop {
        // Relaxed: the flag alone decides (no data comes with it); the
        // fences in `prepare_sleep` and `Users::drop` order it with sleep.
        if srv.stop.load(Relaxed) {
            if held {
                // Tasks still queued run in the monitor's drop; the last
                // handle's drop may still look at the lock meanwhile.
                m.unlock_plain();
            }
            return;
        }
        // Only for work: an empty queue needs no lock (and a submitter that
        // finds the monitor free while saturated runs its task at once).
        if held || (m.work_for_server() && m.take()) {
            m.serve_server();
        }
        held = false;
        // The tasks this stint kept to drop (`unwind::drop_later`), the
        // task wakers it kept (completions, awaiters, producers woken for
        // space) and what those keep in turn run as tasks of the monitor:
        // user code that used it from here would wait for its server, this
        // thread, for ever; it panics instead, as a call from a task of the
        // same monitor. A panic caught in a drop or a waker (see `unwind`)
        // is dropped there: nobody waits for the server.
        unwind::end_server_stint(m.id());
        saturation::tick();
        if m.idle_watch() {
            continue;
        }
        let w = Waiter::for_thread(0);
        if let Some(handed) = m.prepare_sleep(&w) {
            // Not asleep: a task is ready, or the monitor was handed to us
            // meanwhile.
            held = handed;
            continue;
        }
        held = w.wait(false) == HELD;
    }
}
