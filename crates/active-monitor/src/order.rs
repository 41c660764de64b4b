//! Program order (the paper's rules 2 and 3, and appendix B), and worker
//! scopes.
//!
//! A task's order belongs to its *submitter*: the thread that submits it;
//! or, for a submission made inside a task body, that body (whoever runs
//! it: a combiner, a server thread, the caller itself); or the async task
//! polled in a [`worker`] scope. The thread's record is a thread-local (as
//! the paper's runtime keeps a map from worker thread ids to their last
//! submission); a body's record lives on the frame that runs it, and a
//! scope's in the scope's future. A thread-local pointer (`CURRENT`, no
//! destructor) says which is current, so that thread-local destructors
//! can submit too.
//!
//! The synchronous methods wait for what program order says by parking the
//! thread; the async ones ([`Monitor::submit_async`](crate::Monitor::submit_async)
//! and its kin) await it. Only a submission to another monitor (rule 3,
//! strict order) or beyond the bound on waiting tasks ever waits.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::collections::VecDeque;

use std::sync::{Arc, Weak};

use sync_core::sync::Arc as LoomArc;
use sync_core::waiter::Waiter;

use crate::completion::Finish;

/// How a monitor orders a submitter's asynchronous tasks.
///
/// A *submitter* is a thread; or, for what a task body submits, that body,
/// whichever thread runs it (a combiner or a server thread never inherits
/// the order of the bodies it runs, nor they its); or an async task run in
/// a [`worker`] scope. A task's wakeup made by this crate or by any other
/// of the family (a lockfree-sync send or unlock, an ast-mutex exit) runs
/// as a submitter of its own too: a task its executor polls inside `wake`
/// is not taken for the body or thread that woke it. The rules, with the paper's numbers (rule 1, mutual
/// exclusion, holds whatever the order):
///
/// * **Rule 2** (both orders): a submitter's tasks on one monitor *start*
///   in submission order: they go through one FIFO queue and are taken up
///   in turn. A task waiting on its precondition has started (as a
///   `waituntil` in a lock-based monitor has entered it and released the
///   lock); the submitter's later tasks on that monitor go ahead, the one
///   that enables it included, and the waiting tasks run oldest first once
///   their preconditions hold.
///
///   ```
///   let m = active_monitor::Monitor::new(Vec::new());
///   let take = m.when(|v: &Vec<u32>| !v.is_empty(), |v| v.remove(0)); // waits
///   m.submit(|v| v.push(1)); // not held back by the waiting take: enables it
///   m.submit(|v| v.push(2)); // starts after the push of 1
///   assert_eq!(take.wait(), 1);
///   assert_eq!(m.call(|v| v.clone()), [2]);
///   ```
///
/// * **Rule 3** ([`Order::Strict`] only): before a submitter submits to a
///   monitor, its previous asynchronous task on *another* monitor (or an
///   [`or`](crate::or)/[`and`](crate::and)) has completed or been
///   [cancelled](crate::Completion::cancel). The synchronous methods park
///   the thread until then, the async ones await it.
///
///   ```
///   use std::sync::Arc;
///   use active_monitor::Monitor;
///
///   let (a, b) = (Arc::new(Monitor::new(0)), Monitor::new(0));
///   let a2 = Arc::clone(&a);
///   let first = a.when(|n| *n > 0, |n| *n); // waits for another thread
///   let enabler = std::thread::spawn(move || a2.call(|n| *n = 1));
///   b.call(|n| *n += 1); // waits until `first` has run (rule 3)
///   assert!(first.is_done());
///   enabler.join().unwrap();
///   ```
///
///   So a thread that leaves a task waiting on `a` and then submits to `b`
///   waits for it, as a thread blocked in a lock-based monitor's
///   `waituntil` would: only another submitter can enable it. A wait that
///   could only be for itself (a body of `a` that queued a task on `a`, then
///   submits to `b`: nobody can run `a`'s task while the body holds it)
///   panics, naming rule 3, instead of hanging.
///
/// * **Rule 4** ([`Order::Relaxed`], the paper's appendix B): rule 3 is
///   dropped; tasks on different monitors run in any order, and a task's
///   result, once awaited, orders everything after it (the execution order
///   of the paper's definition 2).
///
///   ```
///   use active_monitor::{Monitor, Order};
///
///   let a = Monitor::builder().order(Order::Relaxed).build(0);
///   let b = Monitor::builder().order(Order::Relaxed).build(0);
///   let first = a.when(|n| *n > 0, |n| *n); // waits
///   b.call(|n| *n += 1); // does not wait for it
///   a.call(|n| *n = 5);
///   assert_eq!(first.wait(), 5); // awaited: orders what follows
///   ```
///
/// Under both orders, a submitter may leave at most [`WAITING_LIMIT`] (64)
/// tasks waiting on preconditions; its next submission *of a task with a
/// precondition* then waits for the oldest. Tasks without one (`call`,
/// `submit`) never wait on the data and are never held back, so a
/// submitter with many waiting tasks can still submit the tasks that
/// enable them. Without the bound a producer could pile up waiting tasks
/// without limit (the task queue's back-pressure ends where waiting
/// begins), and every task that runs re-checks the waiting predicates:
/// the larger the bound, the more predicates each task re-checks (see
/// `sync-examples --bin bounded_queue` for its effect on the paper's
/// bounded queue).
///
/// In async code, [`submit_async`](crate::Monitor::submit_async) and its
/// kin output the task's result: an async task that awaits each of them
/// is in program order by construction (each task has finished before the
/// next is submitted), and async tasks on one thread never wait for each
/// other. A task that keeps completions outstanding
/// ([`SubmitAsync::completion`](crate::SubmitAsync::completion)) gets rules 3 and
/// the bound for them in a [`worker`] scope; outside one, an async task has
/// no record, and such completions order nothing.
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
    /// Rules 2 and 3 (the default): a submitter's tasks on one monitor
    /// start in submission order, and its task on one monitor completes
    /// before its next submission to another. See [`Order`].
    #[default]
    Strict,
    /// Rules 2 and 4, the paper's appendix B ("NPO"): no waiting for
    /// earlier tasks on other monitors. See [`Order`].
    Relaxed,
}

/// A submitter's asynchronous task, as program order waits for it.
pub(crate) trait Pending: Send + Sync {
    /// How the task ends (and who waits for it to end).
    fn finish(&self) -> &Finish;

    /// For a task recorded under no one monitor (an OR or AND, recorded
    /// under 0): whether it can finish only through a monitor whose task
    /// this thread is running (innermost or below: held by this thread),
    /// so that a wait for it here would be for ever.
    fn only_through_running(&self) -> bool {
        false
    }
}

/// How many of its tasks waiting on preconditions a submitter may have
/// outstanding, under either [`Order`], before its next submission of a
/// task with a precondition waits for the oldest (plain tasks are not held
/// back).
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, WAITING_LIMIT};
///
/// let m = Monitor::new(0);
/// // One thread may leave this many `when`s waiting...
/// let waiting: Vec<_> = (0..WAITING_LIMIT).map(|_| m.when(|n| *n > 0, |n| *n)).collect();
/// // ...and still submit the task that enables them (plain tasks are never held back).
/// m.submit(|n| *n = 1);
/// assert!(waiting.into_iter().all(|c| c.wait() == 1));
/// ```
pub const WAITING_LIMIT: usize = 64;

/// The former name of [`WAITING_LIMIT`], from when the bound applied to
/// [`Order::Relaxed`] only.
#[deprecated(note = "the bound applies to both orders: use `WAITING_LIMIT`")]
pub const RELAXED_WAITING_LIMIT: usize = WAITING_LIMIT;

/// A submitter's last asynchronous task, for rule 3.
struct Last {
    /// The monitor's identity (`Monitor::id`; 0 for an OR/AND, which spans several).
    monitor: usize,
    task: Weak<dyn Pending>,
}

/// A submitter's record: what program order makes its next submission wait
/// for.
///
/// Tasks are held by `Weak` references. The record must not keep a task
/// alive: a result nobody took (its completion was dropped) is dropped as
/// soon as the task has run, not at the submitter's next submission. A
/// task nobody holds any more has finished: the queue, the waiting list
/// and the completion all hold it until then. A `Weak` still keeps the
/// task's memory (the place of its result, which may be large), so each
/// look at the record, and a blocking wait before it parks, lets go of
/// such tasks wherever they are in it (`forget_dropped`). A `Weak`
/// upgraded to look at a task may become the last reference meanwhile (the
/// executor drops its own): such a temporary is never dropped inside the
/// record's borrow but handed out (`Graveyard`) and dropped after it,
/// since its drop may run a result's user `Drop`, which may submit again.
#[derive(Default)]
pub(crate) struct Record {
    /// Strict (rule 3): the last asynchronous task, if it may still be
    /// unfinished.
    last: Option<Last>,
    /// Both orders: the outstanding tasks with preconditions, oldest first
    /// (the bound [`WAITING_LIMIT`]).
    waiting: VecDeque<(usize, Weak<dyn Pending>)>,
}

/// Temporaries upgraded from a record's `Weak`s, dropped once the record is
/// no longer borrowed (see [`Record`]).
type Graveyard = Vec<Arc<dyn Pending>>;

/// Whether `task` may still be unfinished; an upgraded temporary goes to
/// `graveyard` rather than being dropped here.
#[inline]
fn unfinished(task: &Weak<dyn Pending>, graveyard: &mut Graveyard) -> bool {
    if task.strong_count() == 0 {
        return false;
    }
    match task.upgrade() {
        Some(t) => {
            let pending = !t.finish().is_finished();
            graveyard.push(t);
            pending
        }
        None => false,
    }
}

impl Record {
    const fn new() -> Self {
        Self {
            last: None,
            waiting: VecDeque::new(),
        }
    }

    /// Whether the record owns nothing: no task, and no allocation (its
    /// drop would do nothing).
    #[inline]
    fn is_bare(&self) -> bool {
        self.last.is_none() && self.waiting.capacity() == 0
    }

    /// Whether the record holds no task (nothing to wait for).
    #[inline]
    fn is_empty(&self) -> bool {
        self.last.is_none() && self.waiting.is_empty()
    }

    /// Lets go of the tasks nobody else holds any more (they have finished,
    /// and their completions are gone): a `Weak` keeps its task's memory,
    /// the result's place included, so that one left behind an older task
    /// that still waits would keep it until the record reached
    /// [`WAITING_LIMIT`]. Reads counts only: no upgrade, and a `Weak`'s
    /// drop runs no user code.
    fn forget_dropped(&mut self) {
        if self
            .last
            .as_ref()
            .is_some_and(|l| l.task.strong_count() == 0)
        {
            self.last = None;
        }
        self.waiting.retain(|(_, t)| t.strong_count() != 0);
    }

    /// What a submission to `monitor` must wait for first, if anything:
    /// under strict order the submitter's last task if it was on another
    /// monitor and may be unfinished (rule 3); under either order, for a
    /// `conditional` submission (one that may wait), the oldest of its
    /// waiting tasks if it has [`WAITING_LIMIT`] of them. With `take`, the
    /// task returned leaves the record (a thread waits for it before going
    /// on); otherwise the record stays as it is, and the caller looks again
    /// once the task has finished.
    fn must_wait(
        &mut self,
        monitor: usize,
        order: Order,
        conditional: bool,
        take: bool,
        graveyard: &mut Graveyard,
    ) -> Option<(usize, Weak<dyn Pending>)> {
        self.forget_dropped();
        if order == Order::Strict {
            if let Some(last) = &self.last {
                // A finished task leaves the record. So does one on the same
                // monitor, finished or not, without being looked at: rule 3
                // is about other monitors, and its counts are on a cache line
                // that the monitor's server or combiner is writing. This
                // submission's task replaces it if it does not finish at
                // once, so a later submission elsewhere that must wait for it
                // waits for this one, run after it on the same monitor; a
                // conditional task that this one may overtake is kept in
                // `waiting`. Left in place, it would keep the record
                // non-empty, and every submission of a thread whose tasks
                // finish at once would look at the record.
                if (last.monitor == monitor && monitor != 0) || !unfinished(&last.task, graveyard) {
                    self.last = None;
                } else {
                    let task = (last.monitor, last.task.clone());
                    if take {
                        self.last = None;
                    }
                    return Some(task);
                }
            }
            // An earlier task still waiting on another monitor: the last
            // task there may have overtaken it (rule 2 lets it), but rule 3
            // is about every task of the submitter's there.
            let other = self
                .waiting
                .iter()
                .position(|(m, t)| (*m != monitor || monitor == 0) && unfinished(t, graveyard));
            if let Some(i) = other {
                let task = self.waiting[i].clone();
                if take {
                    self.waiting.remove(i);
                }
                return Some(task);
            }
        }
        if !conditional {
            return None;
        }
        while self
            .waiting
            .front()
            .is_some_and(|(_, t)| !unfinished(t, graveyard))
        {
            self.waiting.pop_front();
        }
        if self.waiting.len() >= WAITING_LIMIT {
            // Finished tasks behind an unfinished oldest do not count: the
            // bound is on tasks that wait.
            self.waiting.retain(|(_, t)| unfinished(t, graveyard));
        }
        if self.waiting.len() < WAITING_LIMIT {
            return None;
        }
        let oldest = self.waiting.front().cloned();
        if take {
            self.waiting.pop_front();
        }
        oldest
    }

    /// Records an asynchronous task that did not finish at its submission.
    fn submitted(
        &mut self,
        monitor: usize,
        conditional: bool,
        task: Weak<dyn Pending>,
        order: Order,
    ) {
        if conditional {
            self.waiting.push_back((monitor, task.clone()));
        }
        if order == Order::Strict {
            // The previous `Last` is replaced: a `Weak` drop runs no user
            // code (the task itself is gone, or held elsewhere).
            self.last = Some(Last { monitor, task });
        }
    }
}

// Who submits, for program order (see [`Order`]): a thread, a task body
// (whoever runs it) or a [`worker`] scope.
//
// `CURRENT` points to the record of the innermost task body or worker
// scope running on this thread, or is null: then the submitter is the
// thread itself, whose record is `THREAD`. The pointer is set by
// [`as_task`] and by [`Worker::poll`] for their duration (each puts the
// previous value back, also when unwinding) and points to a record that
// outlives that duration (on `as_task`'s frame, or in the pinned
// `Worker`). A record is borrowed only inside [`with_record`], which runs
// no user code.
//
// `CURRENT` has no destructor, so it is readable in thread-local
// destructors too. `THREAD` has one (its tasks' `Weak`s): once it has
// been destroyed, a submission from a later thread-local destructor has no
// record (it neither waits nor is waited for: nothing of the thread is left
// to order it against but what such destructors submit themselves).
//
// `THREAD_USED` (no destructor either) is false while `THREAD` is known
// to hold nothing, so that a submission with nothing to wait for does
// not touch `THREAD` (whose access checks its destructor's registration,
// and borrows): set when a task is recorded there, cleared when a look at
// the record finds it empty (`with_record`).
#[cfg(not(loom))]
std::thread_local! {
    static CURRENT: Cell<*mut Record> = const { Cell::new(core::ptr::null_mut()) };
    static THREAD: RefCell<Record> = const { RefCell::new(Record::new()) };
    static THREAD_USED: Cell<bool> = const { Cell::new(false) };
}

#[cfg(loom)]
sync_core::loom::thread_local! {
    static CURRENT: Cell<*mut Record> = Cell::new(core::ptr::null_mut());
    static THREAD: RefCell<Record> = RefCell::new(Record::new());
    static THREAD_USED: Cell<bool> = Cell::new(false);
}

/// Whether the current submitter's record may hold a task to wait for: a
/// look that touches no borrow and no destructor-bearing thread-local, so
/// that a submission with nothing recorded (the common case) costs two
/// thread-local reads.
#[inline]
fn may_wait() -> bool {
    let current = CURRENT.try_with(Cell::get).unwrap_or(core::ptr::null_mut());
    if !current.is_null() {
        // Only this thread sees the pointer, and nothing borrows the record
        // outside `with_record`, which is not running.
        // SAFETY: set by `as_task` or `Worker::poll`, whose record outlives
        // the pointer (see `CURRENT`); a shared look, no borrow is live.
        return unsafe { !(*current).is_empty() };
    }
    THREAD_USED.try_with(Cell::get).unwrap_or(false)
}

/// Runs `f` on the current submitter's record (see `CURRENT`); `None` if
/// the thread's record is gone (a thread-local destructor after it).
fn with_record<X>(f: impl FnOnce(&mut Record) -> X) -> Option<X> {
    let current = CURRENT.try_with(Cell::get).unwrap_or(core::ptr::null_mut());
    if !current.is_null() {
        // Only this thread sees the pointer, `f` runs no user code and
        // `with_record` is not re-entered from `f`: nothing else borrows it.
        // SAFETY: set by `as_task` or `Worker::poll`, whose record outlives
        // the pointer (see `CURRENT`); the borrow is exclusive (above).
        let record = unsafe { &mut *current };
        return Some(f(record));
    }
    THREAD
        .try_with(|w| {
            let mut record = w.borrow_mut();
            let x = f(&mut record);
            let _ = THREAD_USED.try_with(|u| u.set(!record.is_empty()));
            x
        })
        .ok()
}

/// Lets go of the tasks in the current submitter's record that nobody else
/// holds any more (see [`Record::forget_dropped`]): for a thread about to
/// park, whose next submission may be far off.
pub(crate) fn forget_dropped() {
    if may_wait() {
        with_record(Record::forget_dropped);
    }
}

/// Runs `f`, a task body (or user code the executor runs for a task: a
/// drop, a waker), as a submitter of its own: what it submits is ordered
/// among its own submissions only, never with those of the thread that
/// happens to run it (a combiner, a server) or of the other tasks that
/// thread runs. The record lives on this frame and ends with the body.
#[inline]
pub(crate) fn as_task<X>(f: impl FnOnce() -> X) -> X {
    let mut record = ManuallyDrop::new(Record::new());
    let _back = Back::enter(&mut record);
    // `f()` is the tail, so that its result goes straight to our caller's
    // place; `_back` then puts the pointer back before the record goes.
    f()
}

/// [`as_task`] for a small result, which may be moved once: the
/// submitter is put back in this frame when `f` returns, not by a call of
/// `Back`'s drop glue (which the unwind of `f` still uses).
#[inline]
pub(crate) fn as_task_moving<X>(f: impl FnOnce() -> X) -> X {
    let mut record = ManuallyDrop::new(Record::new());
    let back = Back::enter(&mut record);
    let x = f();
    // Not dropped again if this unwinds, as after a `drop` that unwinds.
    ManuallyDrop::new(back).restore();
    x
}

/// Puts the previous submitter back, even if the body unwinds, then
/// drops the body's record, unless it holds nothing (most bodies submit
/// nothing: no drop glue runs for them).
struct Back {
    previous: *mut Record,
    record: *mut ManuallyDrop<Record>,
}

impl Back {
    /// Makes `record` (on the caller's frame, which outlives the `Back`)
    /// the current submitter's.
    #[inline(always)]
    fn enter(record: &mut ManuallyDrop<Record>) -> Self {
        let record: *mut ManuallyDrop<Record> = record;
        let previous = CURRENT
            .try_with(|c| c.replace(record.cast()))
            .unwrap_or(core::ptr::null_mut());
        Self { previous, record }
    }

    #[inline(always)]
    fn restore(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.previous));
        // SAFETY: `record` is on the frame of `as_task` (or its kin), which
        // outlives us, and is dropped only here, once (`restore` runs once:
        // from `drop`, or instead of it); the pointer to it is gone.
        unsafe {
            if !(*self.record).is_bare() {
                ManuallyDrop::drop(&mut *self.record);
            }
        }
    }
}

impl Drop for Back {
    #[inline]
    fn drop(&mut self) {
        self.restore();
    }
}

/// Before a synchronous submission of a task with a precondition to
/// `monitor` (0 for an OR/AND): waits as [`Record::must_wait`] says.
/// Parks the thread.
///
/// # Panics
///
/// If the task to wait for is on a monitor whose task this thread is
/// running: nobody else could run it, the wait would be for ever.
#[inline]
pub(crate) fn before_submit(monitor: usize, order: Order) {
    before(monitor, order, true);
}

/// [`before_submit`] for a task without a precondition (`call`,
/// `submit`): the bound on waiting tasks does not hold it back.
#[inline]
pub(crate) fn before_plain_submit(monitor: usize, order: Order) {
    before(monitor, order, false);
}

#[inline]
fn before(monitor: usize, order: Order, conditional: bool) {
    if order == Order::Relaxed && !conditional || !may_wait() {
        return;
    }
    before_slow(monitor, order, conditional);
}

#[cold]
fn before_slow(monitor: usize, order: Order, conditional: bool) {
    while let Some(task) = next_wait(monitor, order, conditional, true) {
        task.finish().wait();
        // Its executor may have let go of it meanwhile: this may be its
        // last reference, with a result nobody took (see `next_wait`).
        crate::unwind::drop_caught(task);
    }
}

/// The task to wait for, upgraded, if it is still unfinished; the record's
/// temporaries are dropped here, after its borrow.
///
/// # Panics
///
/// As [`before_submit`].
fn next_wait(
    monitor: usize,
    order: Order,
    conditional: bool,
    take: bool,
) -> Option<Arc<dyn Pending>> {
    let mut graveyard = Graveyard::new();
    let wait = with_record(|r| r.must_wait(monitor, order, conditional, take, &mut graveyard))
        .flatten()
        .and_then(|(held, w)| Some((held, w.upgrade()?)));
    // User drops (results nobody took) run here, outside the borrow: this
    // look may hold a task's last reference, once its executor let go of
    // its own. A panic in such a drop is deferred as the monitor's own
    // drops' are (see `unwind`), and resumes at the end of this submission:
    // going on here, it unwound the submission before its task was made
    // (a `call` that never ran).
    for task in graveyard {
        crate::unwind::drop_caught(task);
    }
    let (held, task) = wait?;
    if task.finish().is_finished() {
        // Perhaps the last reference too.
        crate::unwind::drop_caught(task);
        return None;
    }
    let for_ever = if held == 0 {
        task.only_through_running()
    } else {
        crate::unwind::runs_here(held)
    };
    assert!(
        !for_ever,
        "program order: this submission must wait for an earlier task of the same submitter \
         (rule 3: a task on another monitor completes before the next submission; or the bound \
         of {WAITING_LIMIT} waiting tasks), but that task (or an operand of that AND) is on the \
         monitor whose task this thread is running, so it could never run: the wait would be \
         for ever (use Order::Relaxed, or submit from outside the task)"
    );
    Some(task)
}

/// What an asynchronous submission to `monitor` must await first (see
/// [`before_submit`]), if anything. The record is left in place. `None`
/// outside a task body and a [`worker`] scope: an async task is a submitter
/// of its own only in a scope (see [`worker`]).
#[inline]
pub(crate) fn to_await(monitor: usize, order: Order, conditional: bool) -> Option<OrderWait> {
    if !in_scope() || !may_wait() {
        return None;
    }
    next_wait(monitor, order, conditional, false).map(|task| OrderWait { task, waiter: None })
}

/// Whether a task body or a [`worker`] scope is the current submitter.
fn in_scope() -> bool {
    CURRENT.try_with(|c| !c.get().is_null()).unwrap_or(false)
}

/// After a synchronous submission that did not complete at once.
#[inline]
pub(crate) fn submitted(monitor: usize, conditional: bool, task: &Arc<dyn Pending>, order: Order) {
    // The caller still holds the task: only a `Weak` goes into the record.
    let task = Arc::downgrade(task);
    let _ = with_record(|r| r.submitted(monitor, conditional, task, order));
}

/// After an asynchronous submission whose completion is handed out
/// ([`SubmitAsync::completion`](crate::SubmitAsync::completion)): recorded in a task
/// body's or [`worker`] scope's record; outside one, nowhere (see
/// [`to_await`]).
#[inline]
pub(crate) fn submitted_async(
    monitor: usize,
    conditional: bool,
    task: &Arc<dyn Pending>,
    order: Order,
) {
    if in_scope() {
        submitted(monitor, conditional, task, order);
    }
}

/// Awaits a submitter's earlier task, as program order says (a task waiter
/// on the task's [`Finish`]; dropping it withdraws the waiter).
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

/// Runs `future` as a submitter of its own for program order: what it
/// submits while it is polled (synchronously or asynchronously) is ordered
/// among its own submissions, and never with those of the thread that
/// polls it or of the other tasks that thread runs.
///
/// An async task that awaits the result of each submission needs no scope:
/// each of its tasks has finished before the next is submitted. The scope
/// is for a task that keeps tasks outstanding across submissions
/// ([`SubmitAsync::completion`](crate::SubmitAsync::completion), or the synchronous
/// `submit`/`when` from async code): in it, [`Order::Strict`]'s rule 3 and
/// the bound [`WAITING_LIMIT`] hold for the task, on any executor, also
/// when a multi-thread runtime moves it between threads (the record is
/// carried in the future). Outside a scope, an async task has no record;
/// synchronous methods called from it use the thread's, shared with every
/// task the thread runs.
///
/// The scope costs two thread-local pointer swaps per poll.
///
/// # Examples
///
/// ```
/// use futures::executor::LocalPool;
/// use futures::task::LocalSpawnExt;
/// use std::rc::Rc;
/// use active_monitor::{Monitor, worker};
///
/// let (a, b) = (Rc::new(Monitor::new(0)), Rc::new(Monitor::new(0))); // strict
/// let mut pool = LocalPool::new();
/// let (a1, b1, a2, b2) = (Rc::clone(&a), Rc::clone(&b), Rc::clone(&a), Rc::clone(&b));
/// let seen = pool
///     .spawner()
///     .spawn_local_with_handle(worker(async move {
///         // Kept outstanding: rule 3 makes this task's next submission, to
///         // another monitor, await it.
///         let waiting = a1.when_async(|n| *n > 0, |n| *n).completion().await;
///         let seen = b1.call_async(|n| *n).await; // after `waiting` ran
///         (waiting.await.unwrap(), seen)
///     }))
///     .unwrap();
/// pool.spawner()
///     .spawn_local(worker(async move {
///         b2.call_async(|n| *n = 7).await;
///         a2.call_async(|n| *n = 1).await; // enables the other task's `when`
///     }))
///     .unwrap();
/// assert_eq!(pool.run_until(seen), (1, 7));
/// ```
pub fn worker<F: Future>(future: F) -> Worker<F> {
    Worker {
        future,
        record: Record::default(),
    }
}

/// A future that runs as a submitter of its own: made by [`worker`].
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
        /// Puts the previous submitter back, even if the poll unwinds.
        struct Back(*mut Record);
        impl Drop for Back {
            fn drop(&mut self) {
                let _ = CURRENT.try_with(|c| c.set(self.0));
            }
        }
        // The record stays in `this` for the whole poll (see `CURRENT`).
        let record: *mut Record = &mut this.record;
        let _back = Back(
            CURRENT
                .try_with(|c| c.replace(record))
                .unwrap_or(core::ptr::null_mut()),
        );
        future.poll(cx)
    }
}

impl<F> core::fmt::Debug for Worker<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}
