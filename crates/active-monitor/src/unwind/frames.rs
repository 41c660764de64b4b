//! The task bodies running on this thread ([`running`]), innermost first,
//! and the blocking call whose own serve it runs ([`serving_for`]).

use sync_core::wake_chain;

use super::{STATE, before_park};

/// A [`running`] frame, on its stack: what it restores, the monitor whose
/// task ran before it (below it, 0 if none) and the frame linked before
/// it. Only a frame with a monitor below is linked (the common outermost
/// one costs no link): while no task runs, no frame is linked.
pub(super) struct Frame {
    below: usize,
    frame: *const Frame,
}

impl Drop for Frame {
    /// Unlinks the frame, and arms the park hook again if a park kept
    /// tasks to drop back since a body last ended: a park inside this body
    /// (or a serve of its monitor) may have kept some back as this
    /// monitor's, using up the thread's registration, and they are due at
    /// the next park now that its body no longer runs here. Not armed, a
    /// body below that then waited for what one of them releases waited
    /// for ever. Only then: armed at every body's end while tasks are kept
    /// (a combiner's stint of fire-and-forget tasks), every park of the
    /// thread would sort them again.
    #[inline]
    fn drop(&mut self) {
        STATE.with(|s| {
            s.running.set(self.below);
            if self.below != 0 {
                s.frame.set(self.frame);
            }
            // A read, no write, at the end of a body that kept nothing back.
            if s.held_back.get() {
                s.held_back.set(false);
                if s.drops.get() || s.task_wakes.get() {
                    wake_chain::deliver_before_park(before_park);
                }
            }
        });
    }
}

/// Runs `f`, a task body on `monitor`, recorded as the innermost running.
#[inline]
pub(crate) fn running<R>(monitor: usize, f: impl FnOnce() -> R) -> R {
    let restore = STATE.with(|s| Frame {
        below: s.running.replace(monitor),
        frame: s.frame.get(),
    });
    if restore.below != 0 {
        // Linked while `restore` lives: its drop (here, or as `f` unwinds)
        // unlinks it before the frame goes.
        STATE.with(|s| s.frame.set(&raw const restore));
    }
    f()
}

/// [`running`] for the task bodies a serve runs from `monitor`'s queue
/// (and those its relay then runs): a park inside them hands what this
/// thread kept before they began (results nobody took, task wakeups) to a
/// thread of their own, which drops and wakes them there (see
/// `elsewhere::deliver`). This thread's own tasks run on the spot on a
/// monitor it took idle do not come here (`Monitor::execute_own`): their
/// bodies are its own code, as an inline `call`'s is.
///
/// Such a body may be another thread's call, made while that thread holds
/// another monitor, and this thread's kept results are its own code's:
/// dropped in that body, a result whose `Drop` calls the monitor that
/// other thread holds (a lease returned on drop) would wait for that
/// thread, which waits for this body; kept until the body ends, a body
/// that waits for what one of them releases (a permit its `Drop` gives
/// back) would wait for ever.
#[inline]
pub(crate) fn running_queued<R>(monitor: usize, f: impl FnOnce() -> R) -> R {
    foreign_body(|| running(monitor, f))
}

/// Runs `f`, a task body that may be another thread's (see
/// [`running_queued`]) inside this thread's [`running`] frame of its
/// monitor: a waiting task that a relay runs once its precondition holds
/// (`Exec::relay_waiting`), after an inline call's body as after a queued
/// one. Its parks hand what this thread kept before it began to a thread
/// of their own. Relayed as
/// the inline call's own code, a `when` that another thread filed on `x`
/// from its body of `y` parked in the relay at the end of this thread's
/// inline call of `x` and dropped this thread's lease of `y` there: its
/// call of `y` waited for that thread, which waited for its `when`.
#[inline]
pub(crate) fn foreign_body<R>(f: impl FnOnce() -> R) -> R {
    struct Since(u64);
    impl Drop for Since {
        #[inline]
        fn drop(&mut self) {
            STATE.with(|s| s.since.set(self.0));
        }
    }
    let _since = STATE.with(|s| Since(s.since.replace(s.kept_seq.get() + 1)));
    f()
}

/// Whether a task of `monitor` runs on this thread, innermost or below
/// (held by this thread: a call of it here would wait for ever). Walks
/// the thread's task frames: for slow paths.
pub(crate) fn runs_here(monitor: usize) -> bool {
    let (innermost, mut frame) = STATE.with(|s| (s.running.get(), s.frame.get()));
    if innermost == monitor {
        return true;
    }
    while !frame.is_null() {
        // SAFETY: a linked frame is alive: it unlinks itself (its drop)
        // before its stack frame goes, and frames nest.
        let f = unsafe { &*frame };
        if f.below == monitor {
            return true;
        }
        frame = f.frame;
    }
    false
}

/// Runs `serve` (the serve a blocking call makes after queuing its task,
/// whose job is at `job`) recorded as that call's own: a holder that gives
/// way to that job inside it is the caller itself, at the end of its own
/// serve, and may hand the monitor to it (see `Job::caller_takes_handoff`).
/// Not the same thread anywhere else: a task polled on the spot by a
/// waker the call delivers (before its `wait`) that serves the monitor in
/// turn runs below the call, which is not waiting to be handed anything.
#[inline]
pub(crate) fn serving_for(job: usize, serve: impl FnOnce()) {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            STATE.with(|s| s.serving_for.set(self.0));
        }
    }
    let _restore = Restore(STATE.with(|s| s.serving_for.replace(job)));
    serve();
}

/// Whether this thread runs the own serve of the blocking call whose job
/// is at `job` (see [`serving_for`]), innermost.
#[inline]
pub(crate) fn serves_for(job: usize) -> bool {
    STATE.with(|s| s.serving_for.get() == job)
}
