//! A blocking `call`'s task, on the caller's stack.

use super::*;

/// The token for a blocking caller whose task ran.
pub(crate) const DONE: Token = 1;
/// The token that hands the monitor, held, to a blocking caller.
pub(crate) const HANDOFF: Token = 2;

/// Spin rounds of a blocked caller before it yields (`CallJob::wait`):
/// a few microseconds, within which a combiner serving light tasks reaches
/// it or hands it the monitor.
#[cfg(not(loom))]
const CALL_SPINS: usize = 1 << 7;

/// A blocking call's task, on the caller's stack.
pub(crate) struct CallJob<F, R> {
    body: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<Outcome<R>>>,
    waiter: LoomArc<Waiter>,
    /// Set while the caller spins for its token (see `wait`), cleared
    /// before it yields or parks: the executor hands the monitor over only
    /// to a caller that spins (see `Job::caller_spins`).
    spinning: AtomicBool,
    /// Set once the caller waits for its token (see `wait`): before, it
    /// may be running user code, and is not handed the monitor (see
    /// `Job::caller_takes_handoff`).
    waiting: AtomicBool,
}

// SAFETY: `body` and `result` are touched by the monitor's holder (run) and
// by the caller after its notify (Acquire in the waiter): never at once;
// F and R cross threads, hence Send.
unsafe impl<F: Send, R: Send> Sync for CallJob<F, R> {}

impl<F, R> CallJob<F, R> {
    pub(crate) fn new(body: F) -> Self {
        Self {
            body: UnsafeCell::new(Some(body)),
            result: UnsafeCell::new(None),
            waiter: Waiter::for_thread(0),
            spinning: AtomicBool::new(true),
            waiting: AtomicBool::new(false),
        }
    }

    /// A task pointing at this job.
    ///
    /// # Safety
    ///
    /// The job must stay where it is, alive, until its waiter is notified,
    /// and the task must not be used after that.
    pub(crate) unsafe fn task<T, S>(&self) -> Task<T, S>
    where
        Self: Job<T, S>,
    {
        let job: &dyn Job<T, S> = self;
        // SAFETY: only the lifetime bound of the trait object changes; the
        // caller's contract keeps the job alive for as long as it is used.
        let job: NonNull<dyn Job<T, S>> = unsafe { core::mem::transmute(NonNull::from(job)) };
        Task::Call(job)
    }

    /// Waits for the notify: `DONE` (result ready) or `HANDOFF`. Spins
    /// first, for about as long as a few batches of light tasks take, with
    /// `spinning` set; then yields and parks (`Waiter::wait`).
    pub(crate) fn wait(&self) -> Token {
        // Past the user code the caller runs after queuing its task (task
        // wakers it delivers): it may be handed the monitor from now on.
        // Release: pairs with the Acquire load in `caller_takes_handoff`
        // (a holder that sees it is after that code).
        self.waiting.store(true, Release);
        #[cfg(not(loom))]
        for _ in 0..CALL_SPINS {
            if let Some(token) = self.waiter.token() {
                return token;
            }
            core::hint::spin_loop();
        }
        // Relaxed: a hint for the executor's choice; the token itself is
        // exchanged with Release/Acquire in the waiter. A hand-over that
        // read a stale `true` only costs this caller's wake-up.
        self.spinning.store(false, Relaxed);
        self.waiter.wait(true)
    }

    /// Whether the caller's own serve handed the monitor to this job
    /// (`HANDOFF` before the caller waits, see `caller_takes_handoff`):
    /// another holder hands it over only once `wait` has begun.
    pub(crate) fn handed_to_itself(&self) -> bool {
        self.waiter.token() == Some(HANDOFF)
    }

    /// The job's address, which tells its caller's own serve
    /// (`unwind::serving_for`) from any other.
    pub(crate) fn mark(&self) -> usize {
        core::ptr::from_ref(self).cast::<()>() as usize
    }

    /// The body, after `HANDOFF` (the job was popped, not run).
    pub(crate) fn take_body(&self) -> F {
        self.body
            .with_mut(|b| {
                // SAFETY: after HANDOFF nobody else touches the job.
                unsafe { (*b).take() }
            })
            .expect("a handed-off call still has its body")
    }

    /// The result, once `DONE` was returned by `wait`.
    pub(crate) fn take_result(&self) -> Outcome<R> {
        self.result
            .with_mut(|r| {
                // SAFETY: notified with DONE (Acquire): the executor wrote
                // the result before and touches the job no more.
                unsafe { (*r).take() }
            })
            .expect("a call's result is taken once")
    }
}

impl<T, S, F, R> Job<T, S> for CallJob<F, R>
where
    F: FnOnce(&mut T) -> R + Send,
    R: Send,
{
    fn entry(&self) -> Option<u64> {
        None
    }

    fn check(&self, _: &T, _: S) -> Check {
        Check::Run
    }

    unsafe fn run(&self, data: &mut T) -> Option<S> {
        let body = self
            .body
            .with_mut(|b| {
                // SAFETY: only the holder touches the body, once.
                unsafe { (*b).take() }
            })
            .expect("a call runs once");
        let (outcome, _) = run_body::<T, S, R, _>(Plain(body), data);
        self.result.with_mut(|r| {
            // SAFETY: the caller reads the result only after the executor's
            // notify (`Task::caller`), which comes after this returns.
            unsafe { *r = Some(outcome) };
        });
        None
    }

    unsafe fn discard(&self) {
        unreachable!("a blocking call is never discarded: its caller keeps the monitor alive")
    }

    fn is_blocking(&self) -> bool {
        true
    }

    fn caller_spins(&self) -> bool {
        // Relaxed: a hint (see `wait`).
        self.spinning.load(Relaxed)
    }

    fn caller_takes_handoff(&self) -> bool {
        // Acquire: pairs with the Release store in `wait`. Set only once,
        // so a holder that reads it set hands over to a caller that no
        // longer runs user code; read unset, the holder runs the task.
        // Unless the holder is the caller itself, in the serve it made
        // after queuing (`unwind::serving_for`, not a serve made below it
        // by user code it ran): the user code it would run before its
        // `wait` is the task wakers it keeps, and with none kept the
        // hand-over to itself (which ends its stint, as a contended call's
        // should) runs none.
        self.waiting.load(Acquire)
            || (crate::unwind::serves_for(self.mark()) && !crate::unwind::keeps_task_wakes())
    }

    fn caller(&self) -> Option<LoomArc<Waiter>> {
        Some(LoomArc::clone(&self.waiter))
    }
}
