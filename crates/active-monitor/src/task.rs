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
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
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
pub(crate) trait Job<T, S>: Send + Sync {
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

/// [`Runner::who`]: the monitor's holder runs the body (a task whose
/// [`Completion`] is handed out: dropping it lets the task run).
pub(crate) const BY_HOLDER: usize = 0;
/// [`Runner::who`]: the future that awaits the task runs the body itself,
/// in its poll, holding the monitor; a holder that finds the task runnable
/// only removes it and signals the future (`when_async`, awaited).
pub(crate) const BY_AWAITER: usize = 1;
/// [`Runner::who`]: the awaiting future holds the monitor and executes the
/// task now (its own poll): a precondition that holds runs the body here.
pub(crate) const AWAITER_HOLDS: usize = 2;

/// Who runs an asynchronous task's body, and the signal a holder leaves
/// for an awaiting future that runs it itself.
///
/// Why an awaited `when_async` runs in its own future: a holder on another
/// thread that ran it could do so between the future's last `Pending` and
/// its drop (a timeout that fired meanwhile), and its result (a taken
/// item) would be dropped with the future. Run in the future's own poll,
/// a body's result is always output: a dropped future has taken nothing.
pub(crate) struct Runner {
    /// [`BY_HOLDER`], [`BY_AWAITER`] or [`AWAITER_HOLDS`]. Relaxed: written
    /// by the future before the task is published (the queue's Release
    /// push) or while it holds the monitor, read by holders (the lock's
    /// Acquire/Release orders both).
    who: AtomicUsize,
    /// A holder found the precondition true and removed the task (it is
    /// neither queued nor waiting): the future submits it again.
    signalled: AtomicBool,
}

impl Runner {
    fn new() -> Self {
        Self {
            who: AtomicUsize::new(BY_HOLDER),
            signalled: AtomicBool::new(false),
        }
    }

    /// Sets who runs the body (see [`Runner`]'s `who`).
    pub(crate) fn set(&self, who: usize) {
        self.who.store(who, Relaxed);
    }

    /// Whether a holder signalled since the last look (and clears it).
    pub(crate) fn take_signal(&self) -> bool {
        // Acquire: pairs with the Release store in `signal` (the task has
        // left the monitor's lists before).
        self.signalled.swap(false, Acquire)
    }

    fn signal<R>(&self, slot: &ResultSlot<R>) {
        // Release: pairs with `take_signal`'s Acquire.
        // An RMW, not a store: the signal stays set until the future's
        // swap reads it (loom's models of a plain store here let the
        // future's later swap read the initial value).
        self.signalled.swap(true, Release);
        slot.wake_awaiter();
    }
}

/// An asynchronous task: precondition, body and result slot in one
/// allocation shared with its `Completion`.
pub(crate) struct AsyncTask<T, S, P, B, R> {
    pre: P,
    /// Taken by whoever wins the slot's `Finish`: the monitor's holder
    /// (`claim`, then `run` or `discard`) or `cancel` (on the canceller's
    /// thread).
    body: UnsafeCell<Option<B>>,
    slot: ResultSlot<R>,
    runner: Runner,
    _data: PhantomData<fn(&mut T, S)>,
}

// SAFETY: `pre` is used by the monitor's holder only, one holder at a time
// with a happens-before edge between holders (the lock), as with a
// `Mutex<P>`. `body` is taken once, by whoever wins the `Finish` CAS
// (`claim` by the holder, or `cancel` on any thread): the CAS makes that
// one thread its owner, so moving it there needs only B: Send. P, B: Send
// suffice; the slot is Sync for R: Send.
unsafe impl<T, S, P: Send, B: Send, R: Send> Sync for AsyncTask<T, S, P, B, R> {}

impl<T, S, P, B, R> AsyncTask<T, S, P, B, R> {
    /// The task, allocated where it stays: its result slot (as large as a
    /// result) is never built on the stack and moved.
    #[cfg(not(loom))]
    pub(crate) fn new_arc(pre: P, body: B) -> Arc<Self> {
        use core::ptr::addr_of_mut;
        let mut task = Arc::<Self>::new_uninit();
        let p = Arc::get_mut(&mut task)
            .expect("just allocated")
            .as_mut_ptr();
        // Every field is written once, but the slot's value, a
        // `MaybeUninit` in a transparent cell that needs no initialization
        // (see `ResultSlot::init`); then the task is initialized.
        // SAFETY: `p` points to the new allocation, valid for writes, and
        // every field is initialized before `assume_init` (above).
        unsafe {
            addr_of_mut!((*p).pre).write(pre);
            addr_of_mut!((*p).body).write(UnsafeCell::new(Some(body)));
            ResultSlot::init(addr_of_mut!((*p).slot));
            addr_of_mut!((*p).runner).write(Runner::new());
            addr_of_mut!((*p)._data).write(PhantomData);
            task.assume_init()
        }
    }

    /// Under loom, whose cells cannot be left uninitialized: built and
    /// moved (models use small results).
    #[cfg(loom)]
    pub(crate) fn new_arc(pre: P, body: B) -> Arc<Self> {
        Arc::new(Self {
            pre,
            body: UnsafeCell::new(Some(body)),
            slot: ResultSlot::new(),
            runner: Runner::new(),
            _data: PhantomData,
        })
    }
}

/// What a submission hands out of a new asynchronous task: the queued
/// task, its completion, and, if program order records it (strict order,
/// or a task with a precondition), the task as the submitter's record
/// holds it.
pub(crate) type Handles<T, S, R> = (Task<T, S>, Completion<R>, Option<Arc<dyn Pending>>);

impl<T, S, P, B, R> AsyncTask<T, S, P, B, R>
where
    S: AbstractState,
    P: Pre<T, S> + 'static,
    B: Body<T, S, R> + 'static,
    R: Send + 'static,
    T: 'static,
{
    /// The task's [`Handles`] for a monitor of `order`.
    pub(crate) fn handles(self: Arc<Self>, order: Order, conditional: bool) -> Handles<T, S, R> {
        let completion = Completion::shared(Arc::clone(&self) as Arc<dyn HasSlot<R>>);
        let pending =
            (order == Order::Strict || conditional).then(|| Arc::clone(&self) as Arc<dyn Pending>);
        (
            Task::Shared(self as Arc<dyn Job<T, S>>),
            completion,
            pending,
        )
    }
}

impl<T, S, P, B, R> Job<T, S> for AsyncTask<T, S, P, B, R>
where
    S: Copy,
    P: Pre<T, S>,
    B: Body<T, S, R>,
    R: Send,
{
    fn entry(&self) -> Option<u64> {
        self.pre.entry()
    }

    fn check(&self, data: &T, state: S) -> Check {
        // A withdrawn task leaves without its precondition being looked at
        // (its canceller dropped the body).
        if self.slot.finish().is_cancelled() {
            return Check::Gone;
        }
        match check_pre(&self.pre, data, state) {
            Ok(true) => Check::Run,
            Ok(false) => Check::Wait,
            Err(Outcome::Panicked(p)) => {
                if self.slot.finish().claim() {
                    unwind::drop_caught(self.take_body());
                    // SAFETY: claimed: the task finishes here, once.
                    unsafe { self.slot.complete_panicked(p) };
                } else {
                    // Withdrawn meanwhile: nobody takes the panic.
                    unwind::drop_caught(p);
                }
                Check::Gone
            }
            Err(_) => unreachable!(),
        }
    }

    unsafe fn run(&self, data: &mut T) -> Option<S> {
        // Its future runs it (see `Runner`): the task leaves the monitor
        // here, unclaimed (a drop of the future can still withdraw it),
        // and the future is woken to submit it again.
        if self.runner.who.load(Relaxed) == BY_AWAITER {
            self.runner.signal(&self.slot);
            return None;
        }
        // Withdrawn since `check`: it must not run.
        if !self.slot.finish().claim() {
            return None;
        }
        let body = self.take_body().expect("a task runs once");
        // SAFETY: claimed: we are the executor that owns the task.
        let out = unsafe { self.slot.value_ptr() };
        // The result is written in place, in the slot (see `ResultSlot`).
        let run = catch_unwind(AssertUnwindSafe(|| {
            crate::order::as_task(|| {
                // SAFETY: the slot's value, written once (claimed).
                unsafe { body.call_into(data, out) }
            })
        }));
        match run {
            Ok(next) => {
                // SAFETY: claimed, once, by the holder; the value written.
                unsafe { self.slot.complete_written() };
                next
            }
            Err(p) => {
                // SAFETY: claimed, once; nothing was written.
                unsafe { self.slot.complete_panicked(p) };
                None
            }
        }
    }

    unsafe fn discard(&self) {
        if self.slot.finish().claim() {
            unwind::drop_caught(self.take_body());
            // SAFETY: claimed, once, instead of `run` (our caller's
            // contract).
            unsafe { self.slot.complete_discarded() };
        }
    }

    fn is_forsaken(&self) -> bool {
        self.slot.finish().is_cancelled()
    }
}

impl<T, S, P, B, R> AsyncTask<T, S, P, B, R> {
    fn take_body(&self) -> Option<B> {
        self.body.with_mut(|b| {
            // SAFETY: only whoever won the task's `Finish` (the holder's
            // `claim`, or `cancel`) touches the body, and only after.
            unsafe { (*b).take() }
        })
    }
}

impl<T, S, P: Send, B: Send, R: Send> HasSlot<R> for AsyncTask<T, S, P, B, R> {
    fn slot(&self) -> &ResultSlot<R> {
        &self.slot
    }

    fn runner(&self) -> Option<&Runner> {
        Some(&self.runner)
    }

    fn cancel(&self) -> bool {
        if !self.slot.finish().cancel() {
            return false;
        }
        // Won against `claim`: the body is ours to drop, here (the task
        // itself stays queued or waiting until its monitor drops it). A
        // cancel from a drop during unwinding (a `CallAsync` dropped by a
        // panic) must not panic again, which would abort: a panic in the
        // body's drop is then swallowed; otherwise it propagates to the
        // canceller.
        let body = self.take_body();
        if std::thread::panicking() {
            let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(body)));
        } else {
            drop(body);
        }
        true
    }
}

impl<T, S, P: Send, B: Send, R: Send> Pending for AsyncTask<T, S, P, B, R> {
    fn finish(&self) -> &Finish {
        self.slot.finish()
    }
}

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

    fn caller(&self) -> Option<LoomArc<Waiter>> {
        Some(LoomArc::clone(&self.waiter))
    }
}

impl<R> core::fmt::Debug for OrShared<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OrShared")
            .field("taken", &self.taken.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// The shared state of one OR: the paper's *taken* flag and the result.
pub struct OrShared<R> {
    taken: AtomicBool,
    /// Operands not yet finished; the last one to be discarded without the
    /// OR taken resolves it to `Discarded`.
    live: AtomicUsize,
    slot: ResultSlot<(usize, R)>,
}

impl<R> OrShared<R> {
    pub(crate) fn new(operands: usize) -> Self {
        Self {
            taken: AtomicBool::new(false),
            live: AtomicUsize::new(operands),
            slot: ResultSlot::new(),
        }
    }
}

impl<R: Send> HasSlot<(usize, R)> for OrShared<R> {
    fn slot(&self) -> &ResultSlot<(usize, R)> {
        &self.slot
    }

    fn cancel(&self) -> bool {
        // AcqRel: the paper's CAS on the taken flag, raced by the operands'
        // `run` (and a panicking precondition): winning it means no operand
        // runs; each drops its body when its monitor next looks at it.
        if self
            .taken
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            return false;
        }
        self.slot.finish().set_cancelled();
        true
    }
}

impl<R: Send> Pending for OrShared<R> {
    fn finish(&self) -> &Finish {
        self.slot.finish()
    }
}

/// One operand of an OR, queued on its own monitor.
pub(crate) struct OrTask<T, S, P, B, R> {
    pre: P,
    body: UnsafeCell<Option<B>>,
    index: usize,
    shared: Arc<OrShared<R>>,
    _data: PhantomData<fn(&mut T, S)>,
}

// SAFETY: as for `AsyncTask`: `pre` and `body` are used by the holder of
// the operand's monitor only.
unsafe impl<T, S, P: Send, B: Send, R: Send> Sync for OrTask<T, S, P, B, R> {}

impl<T, S, P, B, R> OrTask<T, S, P, B, R> {
    pub(crate) fn new(pre: P, body: B, index: usize, shared: Arc<OrShared<R>>) -> Self {
        Self {
            pre,
            body: UnsafeCell::new(Some(body)),
            index,
            shared,
            _data: PhantomData,
        }
    }

    fn take_body(&self) -> Option<B> {
        self.body.with_mut(|b| {
            // SAFETY: only the monitor's holder touches the body.
            unsafe { (*b).take() }
        })
    }

    /// This operand finishes without running.
    fn leave(&self) {
        unwind::drop_caught(self.take_body());
        // AcqRel: the last operand to leave sees every other's leaving.
        // Then it takes the taken flag itself (a CAS, not a load: the
        // owner's `Completion::cancel` races for it too, without touching
        // `live`, and a load could miss its win): whoever wins finishes
        // the OR, once.
        if self.shared.live.fetch_sub(1, AcqRel) == 1
            && self
                .shared
                .taken
                .compare_exchange(false, true, AcqRel, Acquire)
                .is_ok()
        {
            // SAFETY: no operand ran and nobody cancelled (we won the taken
            // flag) and we are the last: nobody else completes the slot.
            unsafe { self.shared.slot.complete_discarded() };
        }
    }
}

impl<T, S, P, B, R> Job<T, S> for OrTask<T, S, P, B, R>
where
    S: Copy,
    P: Pre<T, S>,
    B: Body<T, S, R>,
    R: Send,
{
    fn entry(&self) -> Option<u64> {
        self.pre.entry()
    }

    fn check(&self, data: &T, state: S) -> Check {
        // Acquire: pairs with the winner's AcqRel CAS (nothing to read, but
        // cheap and clear).
        if self.shared.taken.load(Acquire) {
            self.leave();
            return Check::Gone;
        }
        match check_pre(&self.pre, data, state) {
            Ok(true) => Check::Run,
            Ok(false) => Check::Wait,
            Err(Outcome::Panicked(p)) => {
                unwind::drop_caught(self.take_body());
                // A panicking precondition finishes the whole OR with the
                // panic, if no operand has taken it.
                if self
                    .shared
                    .taken
                    .compare_exchange(false, true, AcqRel, Acquire)
                    .is_ok()
                {
                    // SAFETY: we won the taken flag: nobody else completes.
                    unsafe { self.shared.slot.complete_panicked(p) };
                }
                self.shared.live.fetch_sub(1, AcqRel);
                Check::Gone
            }
            Err(_) => unreachable!(),
        }
    }

    unsafe fn run(&self, data: &mut T) -> Option<S> {
        // AcqRel: the paper's CAS on the taken flag; exactly one operand's
        // monitor wins it and runs its operand.
        if self
            .shared
            .taken
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            self.leave();
            return None;
        }
        let body = self.take_body().expect("an OR operand runs once");
        let (outcome, next) = run_body(body, data);
        let outcome = match outcome {
            Outcome::Value(r) => Outcome::Value((self.index, r)),
            Outcome::Panicked(p) => Outcome::Panicked(p),
            Outcome::Discarded => Outcome::Discarded,
        };
        // SAFETY: we won the taken flag: the only completion of the slot.
        unsafe { self.shared.slot.complete(outcome) };
        self.shared.live.fetch_sub(1, AcqRel);
        next
    }

    unsafe fn discard(&self) {
        self.leave();
    }

    fn is_forsaken(&self) -> bool {
        // Acquire: as in `check`.
        self.shared.taken.load(Acquire)
    }
}
