//! Panics in user code that runs while a monitor is held but outside any
//! task's `catch_unwind`: the drop of a body, a precondition or a result
//! nobody took, and a completion's waker. Such a panic must not unwind
//! through the executor (the monitor would stay held for ever), so it is
//! caught, kept in a thread-local, and resumed once the thread has let go of
//! every monitor and the operation that served is done: at the end of a
//! `call` or a submission ([`finish`], once its own task is queued or run
//! and recorded: the serves inside it keep the panic), of a serve that ends
//! an operation, or at the drop of `get_mut`'s guard or of the monitor. If
//! the thread is already unwinding then, it is dropped. Only the first such
//! panic of an episode is kept.
//!
//! The same thread-local records which monitor's task body the thread is
//! running (innermost), so that a task submitting to its own full monitor
//! is told so instead of sleeping for ever.
//!
//! It also keeps the unparks of blocked callers whose tasks a holder ran
//! ([`wake_later`]): an unpark is a system call when the caller sleeps, and
//! made while holding the monitor it would lengthen every other caller's
//! wait. They are delivered where deferred panics are resumed, once the
//! thread has let go of the monitor ([`resume_deferred`]).
//!
//! And it keeps the tasks a holder is done with ([`drop_later`]): the last
//! reference to a task whose completion was dropped holds a result nobody
//! took and a precondition, user values whose `Drop` may use the very
//! monitor (a pooled lease returned on drop). Dropped while holding it,
//! such a `Drop` would find its own monitor busy with a task: it is dropped
//! once the thread runs no task body and has let go of every monitor, or,
//! unless it is a task of a monitor whose body runs on the thread
//! (innermost or below), before the thread parks ([`before_park`]).

use core::cell::{Cell, RefCell};
use core::task::Waker;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use sync_core::unwind::{Panics, Payload, discard};
use sync_core::waiter::Wakeup;
use sync_core::wake_chain;
use sync_core::wake_list::WakeList;

mod drops;
mod elsewhere;
mod frames;

pub(crate) use self::drops::{DropLater, drop_deferred, drop_later, kept_drops};
use self::drops::{KeptDrop, drop_deferred_before_park};
use self::frames::Frame;
pub(crate) use self::frames::{
    foreign_body, running, running_queued, runs_here, serves_for, serving_for,
};

/// The per-task part: no destructor, so each access is a plain
/// thread-local read (it runs around every task).
struct State {
    /// The monitor (its `Monitor::id`) whose task runs on this thread, innermost;
    /// 0 if none.
    running: Cell<usize>,
    /// The innermost [`running`] frame (null if none): through it, the
    /// monitors whose tasks run below the innermost (see [`runs_here`]).
    frame: Cell<*const Frame>,
    /// Whether `DEFERRED` holds a panic.
    deferred: Cell<bool>,
    /// Whether `WAKES` may hold a wakeup.
    wakes: Cell<bool>,
    /// Whether `TASK_WAKES` may hold a waker.
    task_wakes: Cell<bool>,
    /// Whether `DROPS` may hold a task.
    drops: Cell<bool>,
    /// Whether a park hook held tasks to drop or task wakeups back (their
    /// monitor's body ran on this thread, or no thread could be started to
    /// deliver those kept before the queued or relayed body that parked,
    /// see [`elsewhere::deliver`]) since a task body last ended: the end of
    /// a body arms the hook again then (see [`Frame`]).
    held_back: Cell<bool>,
    /// How many tasks [`drop_later`] and task wakeups [`keep_task`] have
    /// kept on this thread, ever: each is numbered with the count after it
    /// (see [`KeptDrop`], `TASK_WAKES`).
    kept_seq: Cell<u64>,
    /// The number of the first task or task wakeup kept inside the
    /// innermost task body run from a monitor's queue or relayed (0 if
    /// none runs): a park there hands those numbered below it to a thread
    /// of their own (see [`running_queued`], [`elsewhere::deliver`]).
    since: Cell<u64>,
    /// The blocking call whose own serve this thread runs (its job's
    /// address; 0 if none): see [`serving_for`].
    serving_for: Cell<usize>,
}

impl State {
    /// A thread's state before it runs any task or keeps anything.
    const fn new() -> Self {
        Self {
            running: Cell::new(0),
            frame: Cell::new(core::ptr::null()),
            deferred: Cell::new(false),
            wakes: Cell::new(false),
            task_wakes: Cell::new(false),
            drops: Cell::new(false),
            held_back: Cell::new(false),
            kept_seq: Cell::new(0),
            since: Cell::new(0),
            serving_for: Cell::new(0),
        }
    }
}

/// A thread-local list without a destructor: it stays usable in every
/// thread-local destructor, however late, so that what a monitor defers
/// there is deferred as anywhere else (a list that was gone made a task's
/// waker run under the monitor, the very livelock [`wake_task_later`]
/// prevents). Every operation empties it at its end and frees its room
/// (`mem::take`), so nothing leaks at thread exit but what
/// an operation left when it unwound out of the thread past its
/// [`deliver_keeping`].
type Kept<X> = core::mem::ManuallyDrop<RefCell<Vec<X>>>;

const fn kept<X>() -> Kept<X> {
    core::mem::ManuallyDrop::new(RefCell::new(Vec::new()))
}

/// [`DEFERRED`]'s cell: its destructor drops a panic still kept when the
/// thread exits (an async poll keeps one for the thread's next operation,
/// a server for its next turn, and the thread made none) with
/// [`discard`], as a panic nobody takes: left to the cell's own drop
/// glue, a payload whose drop panicked there aborted the process
/// ("thread local panicked on drop").
struct Deferred(Cell<Option<Payload>>);

impl core::ops::Deref for Deferred {
    type Target = Cell<Option<Payload>>;

    fn deref(&self) -> &Cell<Option<Payload>> {
        &self.0
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            discard(p);
        }
    }
}

#[cfg(not(loom))]
type Key<X> = std::thread::LocalKey<X>;
#[cfg(loom)]
type Key<X> = sync_core::loom::thread::LocalKey<X>;

/// Pushes `x` on this thread's `list` and sets the state's `flag` (the
/// list may hold something); hands `x` back if the list cannot take it
/// (unreachable: it is never destroyed, and borrowed only to push or take
/// it out).
fn keep<X: 'static>(
    list: &'static Key<Kept<X>>,
    x: X,
    flag: fn(&State) -> &Cell<bool>,
) -> Option<X> {
    let mut x = Some(x);
    let _ = list.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            l.extend(x.take());
        }
    });
    if x.is_none() {
        STATE.with(|s| flag(s).set(true));
    }
    x
}

/// Puts `earlier` back on this thread's `list`, in front of what was kept
/// meanwhile (older first, as they were), and sets the state's `flag`.
fn keep_in_front<X: 'static>(
    list: &'static Key<Kept<X>>,
    earlier: Vec<X>,
    flag: fn(&State) -> &Cell<bool>,
) {
    if earlier.is_empty() {
        return;
    }
    let _ = list.try_with(|l| {
        let mut l = l.borrow_mut();
        let newer = core::mem::replace(&mut *l, earlier);
        l.extend(newer);
    });
    STATE.with(|s| flag(s).set(true));
}

/// Puts `items` back on this thread's `list`, sets the state's `flag` and
/// holds them back until the innermost task body ends (see [`Frame`]):
/// kept tasks of a monitor whose body runs here, and what
/// [`elsewhere::deliver`] could not hand to a thread.
fn hold_back<X: 'static>(
    list: &'static Key<Kept<X>>,
    items: Vec<X>,
    flag: fn(&State) -> &Cell<bool>,
) {
    if items.is_empty() {
        return;
    }
    let _ = list.try_with(|l| l.borrow_mut().extend(items));
    STATE.with(|s| {
        flag(s).set(true);
        s.held_back.set(true);
    });
}

#[cfg(not(loom))]
std::thread_local! {
    static STATE: State = const { State::new() };
    /// The first panic caught and not resumed yet.
    static DEFERRED: Deferred = const { Deferred(Cell::new(None)) };
    /// Wakeups of blocked callers, delivered once the monitor is let go of:
    /// the family's deferred wake-ups, kept across the holder's whole stint
    /// (every task it runs, however deep in its serve), hence per thread.
    static WAKES: RefCell<WakeList> = const { RefCell::new(WakeList::new()) };
    /// Task wakers, woken once the monitor is let go of (see
    /// [`wake_task_later`]).
    static TASK_WAKES: Kept<(u64, TaskWake)> = const { kept() };
    /// Tasks a holder was done with, dropped once the thread has let go
    /// of every monitor (see [`drop_later`]), or before it parks (see
    /// [`before_park`]).
    static DROPS: Kept<KeptDrop> = const { kept() };
}

#[cfg(loom)]
sync_core::loom::thread_local! {
    static STATE: State = State::new();
    static DEFERRED: Deferred = Deferred(Cell::new(None));
    static WAKES: RefCell<WakeList> = RefCell::new(WakeList::new());
    static TASK_WAKES: Kept<(u64, TaskWake)> = kept();
    static DROPS: Kept<KeptDrop> = kept();
}

/// Keeps `wakeup` (a blocked caller's, whose token is already set) to be
/// delivered by the next [`resume_deferred`] on this thread, which comes
/// once the thread has let go of the monitor (the end of `serve`, of a
/// server's stint, of the owner's `get_mut` or drop). A caller that spins
/// sees its token at once; only a sleeping one waits for the unpark. Where
/// the list is gone (a thread-local destructor after it), the wakeup is
/// delivered at once.
pub(crate) fn wake_later(wakeup: Option<Wakeup>) {
    let Some(wakeup) = wakeup else {
        return;
    };
    let mut wakeup = Some(wakeup);
    let _ = WAKES.try_with(|l| {
        if let Some(w) = wakeup.take() {
            l.borrow_mut().push(w);
        }
    });
    match wakeup {
        None => {
            STATE.with(|s| s.wakes.set(true));
            // A later task of the same serve (another thread's body) may
            // park waiting for this caller's next step: its park delivers
            // the unparks first (see `before_park`).
            wake_chain::deliver_before_park(before_park);
        }
        // Dropping it wakes.
        Some(w) => w.wake(),
    }
}

/// Keeps `waker` (a task's, user code) to be woken by the next
/// [`resume_deferred`] on this thread, once it has let go of the monitor,
/// as [`wake_later`] keeps unparks: a waker that polls its task on the spot
/// then finds the monitor free (woken under it, such a poll queued the task
/// again, and the holder signalled it again, for ever). They are woken
/// only once no task body runs below on this thread either (such a poll in
/// the body of a task of another monitor would find that one held). A
/// panic of the waker is deferred as any other.
pub(crate) fn wake_task_later(waker: Waker) {
    if let Some(w) = keep_task(TaskWake::Waker(waker)) {
        caught(|| w.wake());
    }
}

/// Keeps `w` on this thread's task wakeups (hands it back if it cannot),
/// and has the family's next blocking wait on this thread deliver them
/// before it parks ([`before_park`], through
/// `wake_chain::deliver_before_park`): a task body that parks on another
/// crate's primitive (a lockfree-sync channel, semaphore or mutex, an
/// ast-mutex entry) for the next step of a task it woke waited for ever
/// for a waker it kept itself, as it did in this crate's own waits.
fn keep_task(w: TaskWake) -> Option<TaskWake> {
    let seq = STATE.with(|s| {
        let seq = s.kept_seq.get() + 1;
        s.kept_seq.set(seq);
        seq
    });
    let w = keep(&TASK_WAKES, (seq, w), |s| &s.task_wakes);
    if w.is_none() {
        wake_chain::deliver_before_park(before_park);
    }
    w.map(|(_, w)| w)
}

/// A task's wakeup kept by [`wake_task_later`] and its kin.
enum TaskWake {
    Waker(Waker),
    /// A task waiter's, already handed its token.
    Wakeup(Wakeup),
}

impl TaskWake {
    fn wake(self) {
        match self {
            Self::Waker(w) => wake_chain::wake(w),
            Self::Wakeup(w) => w.wake(),
        }
    }
}

/// Wakes a task's `waker` (a completion's) once this thread has let go of
/// the monitor whose holder finished the task: kept as by
/// [`wake_task_later`] if this thread runs a task body (the holder's,
/// whose operation delivers it once the thread runs none), woken at once
/// otherwise (no monitor is held for it here: an owner's drop of its
/// monitor, a `cancel`, a waiter's own sweep), its panic deferred.
pub(crate) fn wake_task_after_holder(waker: Waker) {
    later_if_running(TaskWake::Waker(waker));
}

/// [`wake_task_later`] for a task waiter's `wakeup` (from
/// `Waiter::notify_later`): an async producer's, woken for queue space
/// by the monitor's holder.
pub(crate) fn wakeup_task_later(wakeup: Wakeup) {
    if let Some(w) = keep_task(TaskWake::Wakeup(wakeup)) {
        caught(|| w.wake());
    }
}

/// Whether this thread keeps task wakeups (see [`wake_task_later`]).
pub(crate) fn task_wakes_kept() -> bool {
    STATE.with(|s| s.task_wakes.get())
}

/// A server's end of a stint, once it has let go of `monitor`: drops the
/// tasks the stint kept (see [`drop_later`]), wakes the task wakers it
/// kept (see [`wake_task_later`]) and drops a panic caught meanwhile
/// (nobody waits for the server), each as a task of `monitor`. User code
/// there that blocks on the monitor would wait for its own server, this
/// thread, for ever: it panics instead, as a call from a task of the
/// monitor does. What that user code keeps in turn (a waker that polls its
/// task on the spot, which calls another monitor and so wakes a further
/// task; a result dropped there) is delivered the same way, until nothing
/// is kept: delivered once the thread runs no task body, it ran as a task
/// of no monitor, and a `call` of this one there waited for ever. Then the
/// unparks of blocked callers.
pub(crate) fn end_server_stint(monitor: usize) {
    running(monitor, || {
        while STATE.with(|s| s.drops.get() || s.task_wakes.get() || s.deferred.get()) {
            drop_deferred();
            if STATE.with(|s| s.task_wakes.replace(false)) {
                wake_tasks_deferred();
            }
            if STATE.with(|s| s.deferred.replace(false)) {
                if let Some(p) = DEFERRED.try_with(|d| d.take()).ok().flatten() {
                    // Its drop is user code too, and so is the drop of
                    // the payload of a panic there: `discard` drops a few
                    // such payloads in a row and leaks the next. Kept for
                    // the next round instead, a payload whose drop panics
                    // with another of its kind kept this loop, and the
                    // server, for ever.
                    caught(|| discard(p));
                }
            }
        }
    });
    wake_deferred();
}

/// [`wake_task_after_holder`] for a task waiter's `wakeup` (from
/// `Waiter::notify_later`): a program order waiter's.
pub(crate) fn wakeup_task_after_holder(wakeup: Wakeup) {
    later_if_running(TaskWake::Wakeup(wakeup));
}

fn later_if_running(w: TaskWake) {
    let w = if STATE.with(|s| s.running.get()) != 0 {
        keep_task(w)
    } else {
        Some(w)
    };
    if let Some(w) = w {
        caught(|| w.wake());
    }
}

/// Delivers the wakeups kept by [`wake_later`] (unparks: no user code runs,
/// and none runs while the list is borrowed), then, if no task body runs
/// below us on this thread, the task wakers kept by [`wake_task_later`]
/// (their panics deferred).
pub(crate) fn wake_deferred() {
    // A look first (the common case: nothing kept), a write only if needed.
    let (unparks, tasks) = STATE.with(|s| {
        let tasks = s.task_wakes.get() && s.running.get() == 0;
        if tasks {
            s.task_wakes.set(false);
        }
        (s.wakes.get() && s.wakes.replace(false), tasks)
    });
    if unparks {
        unpark_deferred();
    }
    if tasks {
        wake_tasks_deferred();
    }
}

fn unpark_deferred() {
    // One kept (a blocked caller whose task a serve ran: the common case):
    // taken out alone, without moving the list out and back.
    let Ok(single) = WAKES.try_with(|l| l.borrow_mut().take_single()) else {
        return;
    };
    if let Some(w) = single {
        let mut panics = Panics::new();
        panics.catch(|| w.wake());
        panics.resume();
        return;
    }
    // Taken out first: no borrow while the wake-ups run.
    let Ok(mut list) = WAKES.try_with(|l| core::mem::take(&mut *l.borrow_mut())) else {
        return;
    };
    let mut panics = Panics::new();
    list.wake_all(&mut panics);
    // Back, emptied, with its allocation (if none was kept meanwhile).
    let _ = WAKES.try_with(|l| {
        let mut l = l.borrow_mut();
        if l.is_empty() {
            *l = list;
        }
    });
    // Unparks do not panic; the policy's way all the same.
    panics.resume();
}

fn wake_tasks_deferred() {
    // Taken out first: no borrow while the wakers run (a waker that polls
    // on the spot may keep more, for the next delivery).
    let mut tasks = TASK_WAKES
        .try_with(|l| core::mem::take(&mut *l.borrow_mut()))
        .unwrap_or_default();
    // On a deliver thread, those handed to it stay for its loop, as its
    // results do (see `drops::drop_deferred_slow`).
    let since = STATE.with(|s| s.since.get());
    if since != 0 {
        let (ours, before): (Vec<_>, Vec<_>) =
            tasks.into_iter().partition(|(seq, _)| *seq >= since);
        tasks = ours;
        keep_in_front(&TASK_WAKES, before, |s| &s.task_wakes);
    }
    // Through the thread's wake chain: a waker that polls on the spot and
    // calls a monitor delivers that call's deferred wakes inside this one,
    // and so on down every waiting task; the chain keeps that flat.
    for (_, wake) in tasks {
        caught_aside(|| wake.wake());
    }
}

/// [`before_park`]'s part for the task wakeups kept by [`keep_task`]:
/// wakes them, but for those kept before the innermost task body run from
/// a monitor's queue or relayed began (see [`running_queued`]), which go
/// to `elsewhere`, for a thread of their own ([`elsewhere::deliver`]), as
/// the results nobody took kept then do (`drop_deferred_before_park`).
/// Such a body may be another thread's call, made while that thread holds
/// another monitor, and a waker that polls its task on the spot runs the
/// task there, whose next step may call that monitor: the first thread's
/// body of `x` enabled a task's `when_async`, whose next step calls `y`;
/// its serve of `x` then ran the second thread's queued call of `x`, made
/// from its body of `y`, which parked, and the task's call of `y` there
/// waited for the second thread, which waited for its call of `x`. Kept
/// back instead, a queued body that waits for that task's next step (a
/// message it sends) waited for ever. Whether it woke any here.
fn wake_tasks_before_park(elsewhere: &mut Vec<(u64, TaskWake)>) -> bool {
    if !STATE.with(|s| s.task_wakes.replace(false)) {
        return false;
    }
    // Taken out first: no borrow while the wakers run (they may keep more).
    let Ok(all) = TASK_WAKES.try_with(|l| core::mem::take(&mut *l.borrow_mut())) else {
        return false;
    };
    let since = STATE.with(|s| s.since.get());
    let (before, go): (Vec<_>, Vec<_>) = all.into_iter().partition(|(seq, _)| *seq < since);
    elsewhere.extend(before);
    let woke = !go.is_empty();
    // Through the thread's wake chain, as `wake_tasks_deferred`'s.
    for (_, wake) in go {
        caught_aside(|| wake.wake());
    }
    woke
}

/// Before this thread may park inside an operation (for its call's task,
/// for room, for a result, for an earlier task), holding no monitor and
/// not yet queued where a holder could hand it one, or inside a blocking
/// wait of another crate of the family (through
/// `wake_chain::before_park`, which [`keep_task`] arms): wakes the task
/// wakers it keeps even if a task body runs below us (see
/// [`wake_task_later`]), their panics deferred. Parked, it would keep them
/// for as long as it waits, maybe for one of those very tasks (a body
/// that enables a `when` another task awaits, then waits for that task's
/// next step, waited for ever). The monitor whose body runs below is held
/// for them: a waker that polls its task on the spot and calls it panics,
/// as from a task of it. So with the tasks kept to drop, but for those of
/// the monitors whose bodies run on this thread (see
/// [`drop_deferred_before_park`]); again while that kept more. First, the
/// unparks of blocked callers whose tasks this thread ran ([`wake_later`],
/// which arms the hook too): they run no user code, and kept while the
/// thread parks inside a task body its serve runs after theirs, a caller
/// whose next step that body waits for slept for ever, and the body and
/// its monitor with it.
#[inline]
pub(crate) fn before_park() {
    // One look first (the common case: nothing kept), a write only if
    // needed. Again while the delivery kept more (a waker that polls its
    // task on the spot, whose body kept wakes or drops of its own): the
    // thread must not sleep with any.
    if !STATE.with(|s| s.task_wakes.get() || s.drops.get() || s.wakes.get()) {
        return;
    }
    before_park_slow();
}

#[cold]
#[inline(never)]
fn before_park_slow() {
    loop {
        // The unparks first (no user code; see `before_park`).
        if STATE.with(|s| s.wakes.replace(false)) {
            unpark_deferred();
        }
        let (mut drops, mut wakes) = (Vec::new(), Vec::new());
        let dropped = drop_deferred_before_park(&mut drops);
        let woke = wake_tasks_before_park(&mut wakes);
        if !drops.is_empty() || !wakes.is_empty() {
            elsewhere::deliver(drops, wakes);
        }
        if !dropped && !woke {
            return;
        }
    }
}

/// Delivers what an operation deferred, keeping any panic (deferred in
/// these drops, or already): the deferred wake-ups and, if no task body
/// runs below us, the tasks kept to drop (results nobody took). For an
/// operation that unwinds as it lets go of the monitor (its `finish` will
/// not come), and for one that must not unwind at its end: an async
/// submission's poll whose task has been queued or has run (its future
/// would lose the task's completion, see `SubmitAsync::poll_queued`);
/// kept past it, the drops would wait for this thread's next operation,
/// for ever if it made none. A kept panic goes on at the next operation's
/// end, or is dropped there if the thread is still unwinding.
pub(crate) fn deliver_keeping() {
    wake_deferred();
    if STATE.with(|s| s.running.get()) == 0 {
        drop_deferred();
    }
}

/// Keeps `payload` to resume later (the first one only).
fn defer(payload: Payload) {
    // `DEFERRED` has a destructor: in a thread-local destructor that runs
    // after it, the panic cannot be kept, and is dropped as one that
    // happens while the thread unwinds would be.
    let mut payload = Some(payload);
    let _ = DEFERRED.try_with(|d| {
        if let Some(first) = d.take() {
            d.set(Some(first));
        } else {
            d.set(payload.take());
        }
    });
    let extra = payload;
    STATE.with(|s| s.deferred.set(true));
    if let Some(extra) = extra {
        discard(extra);
    }
}

/// Runs `f` (user code: a drop, a wake); a panic is deferred.
#[inline]
pub(crate) fn caught(f: impl FnOnce()) {
    // User code the executor runs for a task: a submitter of its own.
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| crate::order::as_task(f))) {
        defer(p);
    }
}

/// [`caught`] for user code that a delivery runs one after another (the
/// results nobody took and the task wakers an operation kept, at its end
/// or before a park, or on a deliver thread): the panic this thread keeps
/// from an earlier one, if any, is set aside while `f` runs, and stays the
/// first (a panic of `f` is then dropped, as [`defer`] drops a second).
/// Kept there, `f`'s own operations resumed it at their end, inside `f`: a
/// result's `Drop` that returned a lease with a call was cut short after
/// it, a task polled on the spot by its waker unwound out of its poll and
/// was lost. It goes on at the end of the operation it belongs to. One
/// look at a thread-local when nothing is kept.
#[inline]
pub(crate) fn caught_aside(f: impl FnOnce()) {
    if STATE.with(|s| s.deferred.get()) {
        caught_aside_slow(f);
    } else {
        caught(f);
    }
}

#[cold]
#[inline(never)]
fn caught_aside_slow(f: impl FnOnce()) {
    let aside = if STATE.with(|s| s.deferred.replace(false)) {
        DEFERRED.try_with(|d| d.take()).ok().flatten()
    } else {
        None
    };
    caught(f);
    let Some(first) = aside else {
        return;
    };
    let mut first = Some(first);
    let newer = DEFERRED
        .try_with(|d| {
            let newer = d.take();
            d.set(first.take());
            newer
        })
        .ok()
        .flatten();
    STATE.with(|s| s.deferred.set(true));
    // `first` is still here only if the cell is gone (as in `defer`).
    if let Some(extra) = first.or(newer) {
        discard(extra);
    }
}

/// Drops `x` (which may run user code); a panic is deferred.
#[inline]
pub(crate) fn drop_caught<X>(x: X) {
    caught(move || drop(x));
}

/// Drops `x` at once, a panic of its drop deferred as [`caught`]'s, but
/// without making the drop a submitter of its own: for what runs no user
/// code but, rarely, a panic's payload nobody took (a task whose
/// completion was dropped; see `Task::drop_later`), and for a waiter's last
/// reference to its task after a result read straight into the caller's
/// place (see `completion::HeldTask`). Costs nothing when the drop does not
/// unwind.
#[inline]
pub(crate) fn drop_catching<X>(x: X) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(x))) {
        defer(p);
    }
}

/// Ends an operation that returns `value` with the drop of `x`, a value
/// of the thread's own (a waiter's last reference to its task, whose
/// precondition is user code: see `completion::HeldTask`). If that drop
/// panics, the panic is the operation's: `value` is dropped first (its
/// drop's panic discarded), so that nothing of it is leaked or dropped
/// during the unwind, and the panic resumes here, in the operation that
/// made the drop, not in the thread's next one. Not a submitter of its
/// own (the thread drops its own value). Costs nothing when the drop does
/// not unwind.
#[inline]
pub(crate) fn drop_own_then<X, V>(x: X, value: V) -> V {
    match catch_unwind(AssertUnwindSafe(move || drop(x))) {
        Ok(()) => value,
        Err(p) => {
            run_discarding(move || drop(value));
            resume_unwind(p)
        }
    }
}

/// Drops `x`, a value of the thread's own, while the thread unwinds (a
/// waiter whose task panicked, or was discarded): a panic of its drop is
/// discarded, as any that happens while the thread already unwinds.
#[cold]
pub(crate) fn drop_own_unwinding<X>(x: X) {
    run_discarding(move || drop(x));
}

/// Delivers the deferred wakeups (see [`wake_later`]), then resumes the
/// deferred panic, if any, once this thread runs no task body
/// (it holds no monitor then, but for one whose own caller resumes later);
/// drops it if the thread is already unwinding.
#[inline]
pub(crate) fn resume_deferred() {
    // One look at the thread's state in the common case: nothing deferred.
    if pending() {
        resume_deferred_slow();
    }
}

#[cold]
fn resume_deferred_slow() {
    if let Some(p) = take_resumable() {
        resume_unwind(p);
    }
}

/// Ends an operation that returns `value`: delivers the deferred wakeups
/// and resumes the deferred panic as [`resume_deferred`] does, once the
/// operation's own work is done (its task queued or run, its bookkeeping
/// made). The serves inside such an operation keep the panic deferred
/// (`Monitor::serve_keeping`): resumed there, it would unwind out of an
/// operation half done, leaving a caller's stack-held task in the queue or
/// a task never pushed. When the panic goes on, `value` is dropped first,
/// its drop (user code) caught and discarded, so that nothing of it drops
/// during the unwind (a panic there would abort the process).
#[inline]
pub(crate) fn finish<V>(value: V) -> V {
    if !pending() {
        return value;
    }
    finish_slow(value)
}

/// Whether this thread keeps wakeups or a panic for [`finish`] (or
/// [`resume_deferred`]) to deliver: one look at a thread-local.
#[inline]
pub(crate) fn pending() -> bool {
    STATE.with(|s| s.wakes.get() || s.task_wakes.get() || s.deferred.get() || s.drops.get())
}

/// [`finish`] for a value the operation returns from a place it wrote,
/// without moving it: if the panic goes on, the value is dropped in place
/// first (its drop caught).
///
/// # Safety
///
/// `out` is initialized. If this unwinds, `out` has been dropped and must
/// not be read again.
#[cold]
#[inline(never)]
pub(crate) unsafe fn finish_in_place<V>(out: &mut core::mem::MaybeUninit<V>) {
    let Some(p) = take_resumable() else {
        return;
    };
    // SAFETY: initialized (our caller's contract), and dropped once: the
    // caller does not read it after we unwind.
    run_discarding(|| unsafe { out.assume_init_drop() });
    resume_unwind(p)
}

/// [`finish`] once [`pending`] said so.
#[cold]
#[inline(never)]
fn finish_slow<V>(value: V) -> V {
    let Some(p) = take_resumable() else {
        return value;
    };
    run_discarding(move || drop(value));
    resume_unwind(p)
}

/// Delivers the deferred wakeups, then, if no task body runs below us,
/// drops the kept tasks and takes the deferred panic, if the thread is not
/// unwinding already (then the panic is dropped here).
fn take_resumable() -> Option<Payload> {
    wake_deferred();
    if STATE.with(|s| s.running.get()) != 0 {
        return None;
    }
    drop_deferred();
    let ours = STATE.with(|s| {
        let ours = s.running.get() == 0 && s.deferred.get();
        if ours {
            s.deferred.set(false);
        }
        ours
    });
    if !ours {
        return None;
    }
    let p = DEFERRED.try_with(|d| d.take()).ok().flatten()?;
    if std::thread::panicking() {
        drop_caught(p);
        return None;
    }
    Some(p)
}

/// Runs `f` (the drop of an operation's own value, as a panic goes on
/// instead), discarding its panic.
fn run_discarding(f: impl FnOnce()) {
    if let Err(q) = catch_unwind(AssertUnwindSafe(f)) {
        discard(q);
    }
}

/// Whether this thread keeps task wakers, which its next
/// [`wake_deferred`] outside a task runs (user code).
pub(crate) fn keeps_task_wakes() -> bool {
    STATE.with(|s| s.task_wakes.get())
}
