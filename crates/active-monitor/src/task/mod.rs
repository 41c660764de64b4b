//! Monitor tasks (the paper's definition 1: a precondition and a body), as
//! the executor sees them.

use core::marker::PhantomData;
use core::ptr::NonNull;
use std::panic::{AssertUnwindSafe, catch_unwind};

use ast_mutex::AbstractState;
use sync_core::sync::Arc as LoomArc;
// `std::sync::Arc`, not loom's: tasks are shared as trait objects, and
// loom's `Arc` cannot be coerced to one (the reference count is std's own,
// the protocol's atomics are all loom's).
use std::sync::Arc;
use sync_core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::waiter::{Token, Waiter};

use crate::completion::Completion;
use crate::completion::{Finish, HasSlot, Outcome, ResultSlot};
use crate::order::{Order, Pending};
use crate::unwind;

/// What the executor learns from a task's precondition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// The precondition holds: run it now.
    Run,
    /// It does not: keep the task waiting.
    Wait,
    /// The task is finished without running (its precondition panicked and
    /// the panic is stored, or it is an OR operand whose OR was taken).
    Gone,
}

/// A task as the executor drives it. Every method is called by the holder
/// of the monitor only.
pub(crate) trait Job<T, S>: Send + Sync + unwind::DropLater {
    /// The entry set (a mask of abstract states) if the task waits by
    /// abstract state; `None` if it waits by predicate or has none.
    fn entry(&self) -> Option<u64>;

    /// Evaluates the precondition in `data` / `state`. Pure, apart from
    /// finishing a task whose precondition panicked (then `Gone`).
    fn check(&self, data: &T, state: S) -> Check;

    /// Runs the body, completes the task and returns the next abstract
    /// state if the body names one.
    ///
    /// # Safety
    ///
    /// Once per task, by the monitor's holder (exclusive access to `data`),
    /// after `check` said `Run` in the same state.
    unsafe fn run(&self, data: &mut T) -> Option<S>;

    /// Finishes the task without running it (its completion resolves to
    /// `Discarded`).
    ///
    /// # Safety
    ///
    /// Once per task, instead of `run`.
    unsafe fn discard(&self);

    /// Whether dropping the task may run user code: a result nobody took,
    /// a precondition, a body never run. Such a task is dropped once the
    /// holder has let go of the monitor ([`Task::drop_later`]).
    fn drops_user_values(&self) -> bool {
        true
    }

    /// Whether the task can never run whatever the data (an OR operand
    /// whose OR another operand took): a waiting list drops it, by
    /// [`discard`](Self::discard), without evaluating its precondition.
    fn is_forsaken(&self) -> bool {
        false
    }

    /// Whether the task's submitter is blocked in `Monitor::call` waiting
    /// for it (it can take the monitor over).
    fn is_blocking(&self) -> bool {
        false
    }

    /// Whether a blocking call's caller is still spinning for its token (it
    /// would see a hand-over at once), rather than yielding or asleep (a
    /// hand-over would wait for its wake-up). A hint: `false` for other
    /// tasks.
    fn caller_spins(&self) -> bool {
        false
    }

    /// Whether a blocking call's caller waits for its token, and so may be
    /// handed the monitor: from its task's push until then it may run user
    /// code (task wakers it delivers: a waker that polls its task on the
    /// spot and calls the monitor), which, handed the monitor meanwhile,
    /// found it held for its own thread and waited for ever. `false` for
    /// other tasks.
    fn caller_takes_handoff(&self) -> bool {
        false
    }

    /// A blocking call's waiter (a new reference to it), which the executor
    /// notifies once it is done with the job: `None` for other tasks.
    fn caller(&self) -> Option<LoomArc<Waiter>> {
        None
    }
}

/// A queued task: shared with its [`Completion`](crate::Completion), or a
/// blocking call's task on its caller's stack.
pub(crate) enum Task<T, S> {
    Shared(Arc<dyn Job<T, S>>),
    /// Valid until its caller has been notified (`DONE` or `HANDOFF`): the
    /// caller does not return before.
    Call(NonNull<dyn Job<T, S>>),
}

// SAFETY: a `Shared` job is Send + Sync; a `Call` job is Send + Sync too
// (see `CallJob`) and outlives the task by the caller's protocol.
unsafe impl<T, S> Send for Task<T, S> {}

impl<T, S> Task<T, S> {
    pub(crate) fn job(&self) -> &dyn Job<T, S> {
        match self {
            Task::Shared(j) => &**j,
            // SAFETY: the caller of `Monitor::call` keeps the job alive until
            // it is notified, which happens after the last use of the task.
            Task::Call(p) => unsafe { p.as_ref() },
        }
    }

    /// A blocking call's waiter, to notify once the task (and every
    /// reference into the caller's job) is gone: the caller may return and
    /// free the job as soon as it sees the token, so the notify must not
    /// come from a method of the job, whose `&self` would still be live
    /// (rust-lang/rust#55005). `None` for a shared task.
    #[inline]
    pub(crate) fn caller(&self) -> Option<LoomArc<Waiter>> {
        match self {
            Task::Shared(_) => None,
            Task::Call(_) => self.job().caller(),
        }
    }

    /// The executor is done with the task: a shared task's reference, maybe
    /// the last (its completion dropped), is dropped once this thread has
    /// let go of the monitor ([`unwind::drop_later`]) if that may run user
    /// code, at once otherwise; a blocking call's task is its caller's.
    ///
    /// "At once" still catches: a task whose body or precondition panicked
    /// keeps the panic's payload for its completion, and with the
    /// completion dropped, the payload (user code: its `Drop`) goes with
    /// the task. A panic there unwound the holder (a server thread ended by
    /// it, and its monitor was never served again).
    pub(crate) fn drop_later(self) {
        if let Task::Shared(job) = self {
            if job.drops_user_values() {
                unwind::drop_later(job);
            } else {
                unwind::drop_catching(job);
            }
        }
    }

    /// Hands the monitor, held, to the blocked caller whose task this is:
    /// it runs the task itself.
    ///
    /// # Safety
    ///
    /// A blocking call's task (`job().is_blocking()`), not run; the caller
    /// of `handoff` holds the monitor and stops touching it.
    pub(crate) unsafe fn handoff(self) {
        let waiter = self
            .caller()
            .expect("only a blocking call's task can be handed off");
        // The task (a pointer into the caller's frame) is dead before the
        // caller can see the token.
        drop(self);
        waiter.notify(HANDOFF);
    }
}

/// A precondition: none, a predicate on the data, or an entry set.
pub(crate) trait Pre<T, S>: Send {
    fn entry(&self) -> Option<u64>;
    fn holds(&self, data: &T, state: S) -> bool;
}

/// No precondition (the paper's tautology).
pub(crate) struct Always;

impl<T, S> Pre<T, S> for Always {
    fn entry(&self) -> Option<u64> {
        None
    }
    fn holds(&self, _: &T, _: S) -> bool {
        true
    }
}

/// A predicate on the data (`waituntil`).
pub(crate) struct Pred<P>(pub(crate) P);

impl<T, S, P: Fn(&T) -> bool + Send> Pre<T, S> for Pred<P> {
    fn entry(&self) -> Option<u64> {
        None
    }
    fn holds(&self, data: &T, _: S) -> bool {
        (self.0)(data)
    }
}

/// An entry set of abstract states, as a mask.
pub(crate) struct InSet(pub(crate) u64);

impl<T, S: AbstractState> Pre<T, S> for InSet {
    fn entry(&self) -> Option<u64> {
        Some(self.0)
    }
    fn holds(&self, _: &T, state: S) -> bool {
        self.0 & (1 << state.index()) != 0
    }
}

/// A body: returns the result, and the next abstract state if it names one.
pub(crate) trait Body<T, S, R>: Send {
    fn call(self, data: &mut T) -> (R, Option<S>);

    /// [`call`](Self::call), writing the result at `out`, where the body
    /// returns it (one copy of a large result on the stack, not several).
    ///
    /// # Safety
    ///
    /// `out` is valid for a write of an `R`.
    unsafe fn call_into(self, data: &mut T, out: *mut R) -> Option<S>;
}

/// A body that leaves the abstract state as it is.
pub(crate) struct Plain<F>(pub(crate) F);

impl<T, S, R, F: FnOnce(&mut T) -> R + Send> Body<T, S, R> for Plain<F> {
    fn call(self, data: &mut T) -> (R, Option<S>) {
        ((self.0)(data), None)
    }

    unsafe fn call_into(self, data: &mut T, out: *mut R) -> Option<S> {
        // SAFETY: our caller's contract.
        unsafe { core::ptr::write(out, (self.0)(data)) };
        None
    }
}

/// A body that names the next abstract state (`when_in`).
pub(crate) struct Stated<F>(pub(crate) F);

impl<T, S, R, F: FnOnce(&mut T) -> (R, S) + Send> Body<T, S, R> for Stated<F> {
    fn call(self, data: &mut T) -> (R, Option<S>) {
        let (r, s) = (self.0)(data);
        (r, Some(s))
    }

    unsafe fn call_into(self, data: &mut T, out: *mut R) -> Option<S> {
        let (r, s) = (self.0)(data);
        // SAFETY: our caller's contract.
        unsafe { core::ptr::write(out, r) };
        Some(s)
    }
}

/// Evaluates `pre`, catching a panic.
fn check_pre<T, S, P: Pre<T, S>>(pre: &P, data: &T, state: S) -> Result<bool, Outcome<()>> {
    catch_unwind(AssertUnwindSafe(|| pre.holds(data, state))).map_err(Outcome::Panicked)
}

/// Runs `body`, catching a panic.
fn run_body<T, S, R, B: Body<T, S, R>>(body: B, data: &mut T) -> (Outcome<R>, Option<S>) {
    match catch_unwind(AssertUnwindSafe(|| {
        crate::order::as_task(|| body.call(data))
    })) {
        Ok((r, s)) => (Outcome::Value(r), s),
        Err(p) => (Outcome::Panicked(p), None),
    }
}

mod async_task;
mod call;
mod or;

pub(crate) use async_task::*;
pub(crate) use call::*;
pub use or::OrShared;
pub(crate) use or::OrTask;
