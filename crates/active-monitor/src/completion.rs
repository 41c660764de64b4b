//! [`Completion`]: the future of a task's result, and the one-shot slot the
//! executor fills.

use core::any::Any;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::panic::resume_unwind;

use core::ptr::addr_of_mut;
use sync_core::parking_lot::SpinWait;
use sync_core::sync::Arc as LoomArc;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*, fence};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::{hint, thread};
use sync_core::waiter::{Token, Waiter, WaiterQueue};
use sync_core::waker::AtomicWaker;

use crate::error::Discarded;
use crate::unwind;

// `std::sync::Arc`, not loom's: tasks are shared as trait objects, and
// loom's `Arc` cannot be coerced to one (the reference count is std's own,
// the protocol's atomics are all loom's).
use std::sync::Arc;

/// What a task ended with.
pub(crate) enum Outcome<R> {
    /// The body ran and returned.
    Value(R),
    /// The precondition or the body panicked: resumed in the waiter.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The task never ran (its monitor was dropped while its precondition
    /// was false, or it was an OR operand that could never run).
    Discarded,
}

/// [`Finish::state`]: the task has not started; it can still be cancelled.
const PENDING: usize = 0;
/// The executor has claimed the task (it is running, or finishing with a
/// panic or `Discarded`): too late to cancel.
const STARTED: usize = 1;
/// The outcome is written and published.
const READY: usize = 2;
/// The task was withdrawn before it started ([`Completion::cancel`]): it
/// never runs and has no outcome.
const CANCELLED: usize = 3;

/// The token an order waiter is notified with: the task has finished.
const FINISHED: Token = 1;

/// How a task ends, for everyone who waits for it to end without taking its
/// result: the workers that must wait for it under strict program order
/// (several may: async tasks sharing a thread's worker record, or a thread
/// and such a task).
///
/// `state`: [`PENDING`] → [`STARTED`] → [`READY`] by the executor
/// ([`claim`](Self::claim), then [`ResultSlot::complete`]), or
/// [`PENDING`] → [`CANCELLED`] by the completion's owner
/// ([`cancel`](Self::cancel)); an OR, whose taken flag decides instead,
/// goes straight to `READY` or `CANCELLED`. `READY` and `CANCELLED` are
/// final: the task is *finished*.
///
/// The waiters are a [`WaiterQueue`] of thread or task [`Waiter`]s, all
/// notified once the task finishes (a broadcast, so their order does not
/// matter). The queue's consumer role is the `consumer` flag: the finisher
/// takes it to notify everybody, and a newcomer takes it to free the
/// waiters that withdrew (futures dropped while waiting), so the queue
/// holds the live waiters, not the history of cancelled waits. Whoever
/// holds the role re-checks after letting go, so a finish that found the
/// role taken is never left undelivered.
pub(crate) struct Finish {
    state: AtomicUsize,
    waiters: WaiterQueue,
    /// The waiter queue's consumer role: true while somebody pops.
    consumer: AtomicBool,
    /// Waiters withdrawn since the last sweep (a heuristic count: it only
    /// decides when a newcomer sweeps).
    withdrawn: AtomicUsize,
    /// Waiters the last sweep kept.
    kept: AtomicUsize,
}

/// The fewest withdrawn waiters that make a newcomer sweep.
const SWEEP_MIN: usize = 32;

impl Finish {
    fn new() -> Self {
        Self {
            state: AtomicUsize::new(PENDING),
            waiters: WaiterQueue::new(),
            consumer: AtomicBool::new(false),
            withdrawn: AtomicUsize::new(0),
            kept: AtomicUsize::new(0),
        }
    }

    /// Whether the task has finished (ran, was discarded, or cancelled).
    pub(crate) fn is_finished(&self) -> bool {
        // Acquire: pairs with the Release store (or CAS) that finished it.
        self.state.load(Acquire) >= READY
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Acquire) == CANCELLED
    }

    /// The executor claims the task before it runs (or finishes) it.
    /// `false` if it was cancelled first: then it must not run.
    pub(crate) fn claim(&self) -> bool {
        // AcqRel: the CAS races `cancel`'s on the same word; whoever wins
        // owns the task's body (Acquire on failure pairs with `cancel`'s
        // Release, so the body the canceller took is seen as taken).
        match self
            .state
            .compare_exchange(PENDING, STARTED, AcqRel, Acquire)
        {
            Ok(_) => true,
            Err(CANCELLED) => false,
            Err(s) => unreachable!("a task is claimed once (state {s})"),
        }
    }

    /// Withdraws a task that has not started. `false` if the executor
    /// claimed it first.
    pub(crate) fn cancel(&self) -> bool {
        // AcqRel: pairs with `claim`'s CAS (exactly one wins) and publishes
        // the cancellation to the order waiters' Acquire loads.
        let won = self
            .state
            .compare_exchange(PENDING, CANCELLED, AcqRel, Acquire)
            .is_ok();
        if won {
            self.finished();
        }
        won
    }

    /// An OR whose taken flag its owner won: it finishes cancelled.
    pub(crate) fn set_cancelled(&self) {
        // Release: pairs with the order waiters' Acquire loads.
        self.state.store(CANCELLED, Release);
        self.finished();
    }

    /// Publishes READY (the outcome is written) and notifies the waiters.
    fn set_ready(&self) {
        // Release: pairs with the Acquire loads in `is_finished` and
        // `ResultSlot::is_done` (the outcome was written before).
        self.state.store(READY, Release);
        self.finished();
    }

    /// After the state became final: notify every waiter.
    fn finished(&self) {
        // SeqCst fence: pairs with the fence in `push_waiter`. Either the
        // waiter sees the final state after pushing, or we see its node.
        fence(SeqCst);
        if !self.waiters.is_empty() {
            self.serve_waiters();
        }
    }

    /// Takes the consumer role, if free, and pops every waiter: notifies
    /// them all if the task has finished, otherwise frees the withdrawn
    /// ones and puts the others back. Re-checks after letting go of the
    /// role, for a finisher that found it taken.
    fn serve_waiters(&self) {
        // Acquire: pairs with the Release that ended the previous holder's
        // turn (its pops happen before ours).
        while self
            .consumer
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
        {
            let finished = self.is_finished();
            // Withdrawals from now on are the next sweep's.
            self.withdrawn.store(0, Relaxed);
            let mut keep = Vec::new();
            while !self.waiters.is_empty() {
                // SAFETY: we hold the consumer role (one consumer at a
                // time; Acquire/Release on `consumer` orders the turns).
                match unsafe { self.waiters.pop() } {
                    // A waker is user code: a panic in it is caught (see
                    // `unwind`), so the role is always given back.
                    Some(w) if finished => unwind::caught(|| {
                        w.notify(FINISHED);
                    }),
                    Some(w) => {
                        if !w.is_cancelled() {
                            keep.push(w);
                        }
                    }
                    // A producer is half-way through its push. A finisher
                    // waits for the few instructions it needs; a sweeper
                    // leaves the node to the next one.
                    None if finished => hint::spin_loop(),
                    None => break,
                }
            }
            self.kept.store(keep.len(), Relaxed);
            for w in keep {
                self.waiters.push(w);
            }
            // Release: pairs with the next holder's Acquire.
            self.consumer.store(false, Release);
            // SeqCst fence: pairs with the fence in `finished`. A finisher
            // whose CAS on `consumer` failed (we held it) fenced before
            // that; after our fence we see its final state, and serve
            // again if a waiter is left.
            fence(SeqCst);
            if !self.is_finished() || self.waiters.is_empty() {
                return;
            }
        }
    }

    /// Adds `waiter` (not notified yet) and returns whether the task is
    /// still unfinished: if it has finished, the waiter is withdrawn (a
    /// notify that won the race is as good) and need not wait.
    fn push_waiter(&self, waiter: &LoomArc<Waiter>) -> bool {
        self.waiters.push(LoomArc::clone(waiter));
        // Frees the waiters that withdrew once they are as many as the live
        // ones the last sweep kept (and at least SWEEP_MIN): the queue holds
        // at most about twice the live waiters, and a sweep's cost is paid
        // by as many withdrawals (a sweep at every newcomer made N live
        // waiters cost O(N^2) to register). Skipping it is always safe: the
        // finisher pops every node, and the fence below decides the race.
        let withdrawn = self.withdrawn.load(Relaxed);
        if withdrawn >= SWEEP_MIN.max(self.kept.load(Relaxed)) {
            self.serve_waiters();
        }
        // SeqCst fence: pairs with the fence in `finished` (see there).
        fence(SeqCst);
        if self.is_finished() {
            let _ = waiter.cancel();
            return false;
        }
        true
    }

    /// Parks the calling thread until the task has finished.
    pub(crate) fn wait(&self) {
        // A short spin first: a combiner usually finishes the task within
        // microseconds, and a park plus unpark costs tens.
        // parking_lot's SpinWait, not the family's Watch: the Watch parks
        // once yields look slow, and a parked waiter costs the combiner an
        // unpark on its critical path; yielding to it measured 4x faster
        // (am/bq/4/4: 2.85 against 0.69 Mops/s with the Watch).
        let mut spin = SpinWait::new();
        while spin.spin() {
            if self.is_finished() {
                return;
            }
        }
        if self.is_finished() {
            return;
        }
        let waiter = Waiter::for_thread(0);
        if self.push_waiter(&waiter) {
            waiter.wait(false);
        }
    }

    /// `Ready` once the task has finished; otherwise registers the task in
    /// `cx` (first poll: a new waiter in `waiter`) and returns `Pending`.
    /// Dropping `waiter` without [`withdraw`](Self::withdraw) keeps its
    /// node until the task finishes (a sweep keeps waiters that did not
    /// withdraw), never a lost wake-up.
    pub(crate) fn poll_finished(
        &self,
        waiter: &mut Option<LoomArc<Waiter>>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if self.is_finished() {
            self.withdraw(waiter);
            return Poll::Ready(());
        }
        match waiter {
            Some(w) => {
                if w.poll(cx).is_ready() {
                    *waiter = None;
                    return Poll::Ready(());
                }
                Poll::Pending
            }
            None => {
                let w = Waiter::for_task(cx.waker(), 0);
                if !self.push_waiter(&w) {
                    return Poll::Ready(());
                }
                *waiter = Some(w);
                Poll::Pending
            }
        }
    }

    /// A waiting future goes away: its node is withdrawn (and freed by the
    /// next sweep or the finisher). A notify that came first carried
    /// nothing to pass on: every waiter is notified.
    pub(crate) fn withdraw(&self, waiter: &mut Option<LoomArc<Waiter>>) {
        if let Some(w) = waiter.take() {
            if w.cancel().is_ok() {
                self.withdrawn.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A one-shot result slot: written once by the executor, read once by the
/// [`Completion`].
///
/// Its [`Finish`] says how far the task got and wakes the submitters waiting
/// for it under strict program order; `waker` is the completion owner's (a
/// task, or a thread in [`Completion::wait`]).
///
/// The result is kept apart from how the task ended, so that a body writes
/// it in place ([`value_ptr`](Self::value_ptr)) and a waiter reads it out
/// once ([`read_value`](Self::read_value)): a large result is never moved
/// through an `Outcome` on either thread's stack.
pub(crate) struct ResultSlot<R> {
    finish: Finish,
    /// The result, once the body wrote it (`ended` is [`Ended::Value`]),
    /// until the completion's owner reads it out.
    value: UnsafeCell<Value<R>>,
    ended: UnsafeCell<Ended>,
    waker: AtomicWaker,
}

/// A result written in place, and whether it is there: its drop drops it
/// if nobody took it. The slot itself has no `Drop`: its cells are dropped
/// as plain values (the last `Arc`'s drop orders that after every access;
/// loom, which does not see std's `Arc`, would take an access there for a
/// race with the owner's take).
struct Value<R> {
    r: MaybeUninit<R>,
    init: bool,
}

impl<R> Drop for Value<R> {
    fn drop(&mut self) {
        if self.init {
            // SAFETY: `init`: written by the body, not read out.
            unsafe { self.r.assume_init_drop() }
        }
    }
}

/// How a task ended, as its slot keeps it until the result is taken.
enum Ended {
    /// Not yet, or taken.
    Not,
    /// The body returned: the slot's `value` holds the result.
    Value,
    Panicked(Box<dyn Any + Send + 'static>),
    Discarded,
}

// SAFETY: `value` and `ended` are written once by the executor before the
// state becomes READY (Release) and read by the single owner of the
// completion after it sees READY (Acquire); R crosses threads, hence
// R: Send.
unsafe impl<R: Send> Send for ResultSlot<R> {}
// SAFETY: as for `Send`; no `&R` is ever shared.
unsafe impl<R: Send> Sync for ResultSlot<R> {}

impl<R> ResultSlot<R> {
    pub(crate) fn new() -> Self {
        Self {
            finish: Finish::new(),
            value: UnsafeCell::new(Value {
                r: MaybeUninit::uninit(),
                init: false,
            }),
            ended: UnsafeCell::new(Ended::Not),
            waker: AtomicWaker::new(),
        }
    }

    /// Initializes a slot in place, leaving its value (a `MaybeUninit`)
    /// as it is: a large result's room is never built on the stack.
    ///
    /// # Safety
    ///
    /// `p` is valid for writes of a `ResultSlot<R>`; the slot is
    /// initialized afterwards.
    #[cfg(not(loom))]
    pub(crate) unsafe fn init(p: *mut Self) {
        // SAFETY: our caller's contract; `value` needs no initialization.
        unsafe {
            addr_of_mut!((*p).finish).write(Finish::new());
            // `value`: its flag only (the cell is `repr(transparent)`
            // without loom); the value itself is written by the body.
            let value = addr_of_mut!((*p).value).cast::<Value<R>>();
            addr_of_mut!((*value).init).write(false);
            addr_of_mut!((*p).ended).write(UnsafeCell::new(Ended::Not));
            addr_of_mut!((*p).waker).write(AtomicWaker::new());
        }
    }

    pub(crate) fn finish(&self) -> &Finish {
        &self.finish
    }

    /// Where the body writes the result, before
    /// [`complete_written`](Self::complete_written).
    ///
    /// # Safety
    ///
    /// Only for the executor that owns the task (it claimed it), which
    /// writes it at most once.
    pub(crate) unsafe fn value_ptr(&self) -> *mut R {
        // SAFETY: a pointer into the slot, for the executor's one write.
        self.value
            .with_mut(|v| unsafe { addr_of_mut!((*v).r) }.cast::<R>())
    }

    /// The body wrote the result at [`value_ptr`](Self::value_ptr): marks
    /// the task finished and wakes the waiters.
    ///
    /// # Safety
    ///
    /// As [`complete`](Self::complete), after the write.
    pub(crate) unsafe fn complete_written(&self) {
        self.value.with_mut(|v| {
            // SAFETY: only the executor writes, once, before READY.
            unsafe { (*v).init = true };
        });
        self.ended.with_mut(|e| {
            // SAFETY: only the executor writes, once, before READY.
            unsafe { *e = Ended::Value };
        });
        self.publish();
    }

    /// Stores the outcome and wakes the waiters.
    ///
    /// # Safety
    ///
    /// Called at most once, by the executor that owns the task (it claimed
    /// it, or won an OR's taken flag).
    pub(crate) unsafe fn complete(&self, outcome: Outcome<R>) {
        let ended = match outcome {
            Outcome::Value(r) => {
                self.value.with_mut(|v| {
                    // SAFETY: our caller's contract: the one write.
                    unsafe {
                        (*v).r.write(r);
                        (*v).init = true;
                    }
                });
                Ended::Value
            }
            Outcome::Panicked(p) => Ended::Panicked(p),
            Outcome::Discarded => Ended::Discarded,
        };
        self.ended.with_mut(|e| {
            // SAFETY: only the executor writes, once, before READY.
            unsafe { *e = ended };
        });
        self.publish();
    }

    /// The task panicked: [`complete`](Self::complete) without an
    /// `Outcome<R>` (as large as a result) on the caller's frame.
    ///
    /// # Safety
    ///
    /// As [`complete`](Self::complete).
    pub(crate) unsafe fn complete_panicked(&self, p: Box<dyn Any + Send + 'static>) {
        self.complete_other(Ended::Panicked(p));
    }

    /// The task never ran: `complete(Outcome::Discarded)`, without an
    /// `Outcome<R>` on the caller's frame.
    ///
    /// # Safety
    ///
    /// As [`complete`](Self::complete).
    pub(crate) unsafe fn complete_discarded(&self) {
        self.complete_other(Ended::Discarded);
    }

    fn complete_other(&self, ended: Ended) {
        self.ended.with_mut(|e| {
            // SAFETY: only the executor writes, once, before READY (the
            // callers' contract).
            unsafe { *e = ended };
        });
        self.publish();
    }

    fn publish(&self) {
        self.finish.set_ready();
        // The AtomicWaker's RMW orders this wake after the READY store for
        // a register that looks at the state after registering.
        // A waker is user code: a panic in it is resumed once the monitor
        // is let go of (see `unwind`).
        unwind::caught(|| self.waker.wake());
    }

    /// Takes the result, in place: the value read straight out of the slot
    /// into the caller's place. A panic resumes here; a discarded task is
    /// `Err(Discarded)` ([`read_value`](Self::read_value) for the value
    /// alone).
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, and the caller is the completion's single
    /// owner, taking the result once.
    unsafe fn take_result(&self) -> Result<R, Discarded> {
        if self.ended_is_value() {
            // SAFETY: our caller's contract.
            Ok(unsafe { self.read_value() })
        } else {
            // SAFETY: our caller's contract.
            Err(unsafe { self.take_other() })
        }
    }

    /// Whether the task's body returned (its value is in the slot).
    fn ended_is_value(&self) -> bool {
        self.ended.with(|e| {
            // SAFETY: read by the completion's owner after READY (or by
            // nobody else before it).
            matches!(unsafe { &*e }, Ended::Value)
        })
    }

    /// Reads the value out (a body's result).
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, the caller is the completion's single
    /// owner, taking the result once, and `ended_is_value()`.
    pub(crate) unsafe fn read_value(&self) -> R {
        // Marked taken before the read, which is the tail, so that the
        // value goes straight to our caller's place.
        self.value.with_mut(|v| {
            // SAFETY: our caller's contract: the single owner, once.
            unsafe {
                (*v).init = false;
                (*v).r.assume_init_read()
            }
        })
    }

    /// A task that did not return: resumes its panic, or `Discarded`.
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, the caller is the completion's single
    /// owner, taking the result once, and not `ended_is_value()`.
    unsafe fn take_other(&self) -> Discarded {
        let ended = self.ended.with_mut(|e| {
            // SAFETY: our caller's contract: the single owner, once.
            unsafe { core::mem::replace(&mut *e, Ended::Not) }
        });
        match ended {
            Ended::Panicked(p) => resume_unwind(p),
            Ended::Discarded => Discarded,
            Ended::Value | Ended::Not => unreachable!("a completion's outcome is taken once"),
        }
    }

    /// The result of a finished task, or the task's panic resumed; panics
    /// if it was discarded (`Completion::wait`).
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, and the caller is the completion's single
    /// owner, taking the result once.
    unsafe fn take_or_panic(&self) -> R {
        if self.ended_is_value() {
            // SAFETY: our caller's contract.
            unsafe { self.read_value() }
        } else {
            // SAFETY: our caller's contract.
            let e = unsafe { self.take_other() };
            panic!("{e}")
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        // Acquire: pairs with the Release store in `Finish::set_ready`.
        self.finish.state.load(Acquire) == READY
    }

    fn poll_done(&self, cx: &Waker) -> bool {
        if self.is_done() {
            return true;
        }
        self.waker.register(cx);
        // A completion between the first look and the register may have
        // found no waker: look again.
        self.is_done()
    }

    /// Parks the calling thread until the outcome is ready.
    fn block(&self) {
        // A short spin, then yields, first: a combiner usually finishes the
        // task within microseconds, and a park plus unpark costs tens.
        // parking_lot's SpinWait, not the family's Watch: the Watch parks
        // once yields look slow, and a parked waiter costs the combiner an
        // unpark on its critical path; yielding to it measured 4x faster
        // (am/bq/4/4: 2.85 against 0.69 Mops/s with the Watch).
        let mut spin = SpinWait::new();
        loop {
            if self.is_done() {
                return;
            }
            if !spin.spin() {
                break;
            }
        }
        let waker = thread_waker();
        while !self.poll_done(&waker) {
            // A wake between the register and the park leaves the thread's
            // unpark token set: the park returns at once.
            thread::park();
        }
    }
}

/// A `Waker` that unparks the calling thread.
fn thread_waker() -> Waker {
    struct Unpark(thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    Waker::from(std::sync::Arc::new(Unpark(thread::current())))
}

/// Whatever holds a [`ResultSlot`]: the task itself, so that a submitted
/// task and its completion share one allocation.
pub(crate) trait HasSlot<R>: Send + Sync {
    fn slot(&self) -> &ResultSlot<R>;

    /// Withdraws the task if it has not started ([`Completion::cancel`]):
    /// `true` if it will never run (its body is dropped, by now or by the
    /// executors that still hold it). The default refuses.
    fn cancel(&self) -> bool {
        false
    }
}

impl<R: Send> HasSlot<R> for ResultSlot<R> {
    fn slot(&self) -> &ResultSlot<R> {
        self
    }
}

/// The words a completion keeps an outcome in when its task ran inline.
type Words = [usize; 4];

/// Whether an `Outcome<R>` fits a completion's own words. Larger results
/// go through the task's shared slot on the heap instead, so that a
/// [`Completion`] is a few words whatever `R` is, and a large result is
/// never moved through it.
pub(crate) const fn fits_inline<R>() -> bool {
    size_of::<Outcome<R>>() <= size_of::<Words>() && align_of::<Outcome<R>>() <= align_of::<Words>()
}

/// An `Outcome<R>` kept in a completion's words (`fits_inline::<R>()`).
struct InlineOutcome<R> {
    words: MaybeUninit<Words>,
    /// Owns an `Outcome<R>` (auto traits and drop check as if it did).
    _outcome: PhantomData<Outcome<R>>,
}

impl<R> InlineOutcome<R> {
    /// `None` (the outcome handed back) if it does not fit.
    fn new(outcome: Outcome<R>) -> Result<Self, Outcome<R>> {
        if !fits_inline::<R>() {
            return Err(outcome);
        }
        let mut words = MaybeUninit::<Words>::uninit();
        // SAFETY: `Outcome<R>` fits the words in size and alignment
        // (checked above); they are uninitialized and written once.
        unsafe { words.as_mut_ptr().cast::<Outcome<R>>().write(outcome) };
        Ok(Self {
            words,
            _outcome: PhantomData,
        })
    }

    fn into_inner(self) -> Outcome<R> {
        let this = ManuallyDrop::new(self);
        // SAFETY: written by `new`; `this` is never dropped, so the outcome
        // is read out once.
        unsafe { this.words.as_ptr().cast::<Outcome<R>>().read() }
    }
}

impl<R> Drop for InlineOutcome<R> {
    fn drop(&mut self) {
        // SAFETY: written by `new`, not read out (`into_inner` forgets).
        unsafe { core::ptr::drop_in_place(self.words.as_mut_ptr().cast::<Outcome<R>>()) }
    }
}

enum Inner<R> {
    /// Ran inline by the submitter (no allocation); `None` once taken.
    Ready(Option<InlineOutcome<R>>),
    /// Ran inline, with an outcome too large for `Ready` (the monitor
    /// sends large results through `Shared` instead; an OR that ran inline
    /// may come here); `None` once taken.
    Boxed(Option<Box<Outcome<R>>>),
    /// Queued: the slot the executor fills.
    Shared(Arc<dyn HasSlot<R>>),
}

/// The result of a task submitted to a [`Monitor`](crate::Monitor): a
/// future, and a handle to block on.
///
/// It is ready once the task has run. [`wait`](Self::wait) blocks the thread
/// for it; `.await` waits without blocking the executor (any executor);
/// [`is_done`](Self::is_done) looks.
///
/// If the task panicked, the panic resumes in whoever takes the result
/// (`wait` or `.await`); the monitor itself keeps serving.
///
/// # Cancel safety
///
/// Dropping a `Completion`, awaited or not, does not cancel its task: the
/// task still runs in its turn, and its result is dropped (fire and forget:
/// `m.submit(f);` is the paper's asynchronous call). Awaiting `&mut c` in a
/// `select!` loses nothing either: the completion stays, with its result.
/// To give up on a task, [`cancel`](Self::cancel) it: it is withdrawn if it
/// has not started, and handed back with its result to come if it has, so a
/// timeout never loses a task's effect (see the example there).
///
/// # Panics
///
/// Taking the result ([`wait`](Self::wait), `.await`) resumes the task's
/// panic if it panicked (the same payload). A task that was
/// [discarded](Discarded) is an error: `.await` outputs
/// `Err(Discarded)` (as a `JoinHandle`'s output is a `Result`), and so does
/// [`wait_result`](Self::wait_result); [`wait`](Self::wait) panics.
/// Polling again after the result was taken panics.
///
/// # Examples
///
/// ```
/// use active_monitor::Monitor;
///
/// let m = Monitor::new(0u64);
/// let c = m.submit(|n| {
///     *n += 1;
///     *n
/// });
/// assert_eq!(c.wait(), 1);
///
/// let c = m.submit(|n| *n * 10);
/// assert_eq!(futures::executor::block_on(c), Ok(10));
/// ```
pub struct Completion<R> {
    inner: Inner<R>,
}

impl<R> Completion<R> {
    /// A completion for a task that ran inline: the outcome in the
    /// completion's own words if it fits, otherwise in a slot of its own.
    pub(crate) fn from_outcome(outcome: Outcome<R>) -> Self {
        match InlineOutcome::new(outcome) {
            Ok(o) => Self {
                inner: Inner::Ready(Some(o)),
            },
            Err(outcome) => Self {
                inner: Inner::Boxed(Some(Box::new(outcome))),
            },
        }
    }

    pub(crate) fn shared(slot: Arc<dyn HasSlot<R>>) -> Self {
        Self {
            inner: Inner::Shared(slot),
        }
    }

    /// Whether the task has finished (ran, panicked or was discarded): then
    /// [`wait`](Self::wait) returns at once.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(());
    /// let c = m.submit(|_| 5); // the monitor is idle: runs at once
    /// assert!(c.is_done());
    /// ```
    pub fn is_done(&self) -> bool {
        match &self.inner {
            Inner::Ready(_) | Inner::Boxed(_) => true,
            Inner::Shared(s) => s.slot().is_done(),
        }
    }

    /// Blocks the calling thread until the task has run, and returns its
    /// result.
    ///
    /// # Panics
    ///
    /// Resumes the task's panic; panics if the task was discarded (see
    /// [`Discarded`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(vec![1, 2]);
    /// assert_eq!(m.submit(|v| v.len()).wait(), 2);
    /// ```
    pub fn wait(self) -> R {
        match &self.inner {
            Inner::Shared(s) => {
                let slot = s.slot();
                slot.block();
                // SAFETY: done, and `self` is the single owner (consumed).
                // Read straight into our caller's place.
                unsafe { slot.take_or_panic() }
            }
            Inner::Ready(_) | Inner::Boxed(_) => self.wait_ran_inline(),
        }
    }

    /// [`wait`](Self::wait) for a task that ran inline (apart, so that
    /// `wait`'s own frame has no room for a result).
    #[inline(never)]
    fn wait_ran_inline(self) -> R {
        match self.wait_result() {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Withdraws the task if it has not started: `Ok(())` if it never runs
    /// (its body is dropped, here or, for an [`or`](crate::or), by the
    /// operands' monitors when they next look at them), `Err(self)` if it
    /// has already started or finished, so that its result can still be
    /// taken. Exactly one of the task's run and its cancellation happens:
    /// nothing is lost.
    ///
    /// * A task from [`submit`](crate::Monitor::submit),
    ///   [`when`](crate::Monitor::when) or
    ///   [`when_in`](crate::Monitor::when_in) is withdrawn until its
    ///   executor claims it to run it (a `when` task can be withdrawn
    ///   while it waits on its precondition).
    /// * An [`or`](crate::or) is withdrawn by winning its *taken* flag (the
    ///   CAS its operands race for): then no operand runs.
    /// * An [`and`](crate::and) is never withdrawn (`Err(self)`): its
    ///   operands start independently on their monitors.
    ///
    /// A withdrawn task counts as finished for program order: a strict
    /// submitter's next submission does not wait for it.
    ///
    /// # Errors
    ///
    /// `Err(self)` if the task started or finished (or is an AND, or ran
    /// inline at submission).
    ///
    /// # Panics
    ///
    /// If dropping the withdrawn body panics (the panic is the body's own).
    ///
    /// # Cancel safety
    ///
    /// This is what makes a timeout lose nothing: cancel, and on `Err`
    /// take the result after all.
    ///
    /// ```
    /// use std::time::Duration;
    /// use active_monitor::{Monitor, Order};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let m = Monitor::builder().order(Order::Relaxed).build(Vec::<u32>::new());
    /// let mut take = m.when(|q| !q.is_empty(), |q| q.remove(0));
    /// let item = tokio::select! {
    ///     item = &mut take => Some(item),
    ///     _ = tokio::time::sleep(Duration::from_millis(1)) => match take.cancel() {
    ///         Ok(()) => None,               // withdrawn: it will never take an item
    ///         Err(take) => Some(take.await), // it took one meanwhile: keep it
    ///     },
    /// };
    /// assert_eq!(item, None);
    /// # });
    /// ```
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let m = Monitor::builder().order(Order::Relaxed).build(0);
    /// let c = m.when(|n| *n > 0, |n| *n * 10);
    /// assert!(c.cancel().is_ok()); // it had not run: it never will
    /// m.submit(|n| *n = 1);
    /// let c = m.submit(|n| *n + 1); // ran at once: too late to withdraw
    /// assert_eq!(c.cancel().unwrap_err().wait(), 2);
    /// ```
    pub fn cancel(self) -> Result<(), Self> {
        let withdrawn = match &self.inner {
            Inner::Ready(_) | Inner::Boxed(_) => false,
            Inner::Shared(s) => s.cancel(),
        };
        if withdrawn {
            // A waker's panic caught while notifying the order waiters.
            unwind::resume_deferred();
            Ok(())
        } else {
            Err(self)
        }
    }

    /// [`wait`](Self::wait), with a discarded task as an error instead of a
    /// panic.
    ///
    /// # Errors
    ///
    /// [`Discarded`] if the task never ran: its monitor was dropped while its
    /// precondition was false.
    ///
    /// # Panics
    ///
    /// Resumes the task's panic.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Discarded, Monitor};
    ///
    /// let m = Monitor::new(0);
    /// let never = m.when(|n| *n > 0, |n| *n);
    /// drop(m); // the precondition never held
    /// assert_eq!(never.wait_result(), Err(Discarded));
    /// ```
    pub fn wait_result(mut self) -> Result<R, Discarded> {
        match &mut self.inner {
            Inner::Ready(o) => unwrap_outcome(
                o.take()
                    .expect("a completion's outcome is taken once")
                    .into_inner(),
            ),
            Inner::Boxed(o) => {
                unwrap_outcome(*o.take().expect("a completion's outcome is taken once"))
            }
            Inner::Shared(s) => {
                let slot = s.slot();
                slot.block();
                // SAFETY: done, and `self` is the single owner (consumed).
                unsafe { slot.take_result() }
            }
        }
    }
}

fn unwrap_outcome<R>(outcome: Outcome<R>) -> Result<R, Discarded> {
    match outcome {
        Outcome::Value(r) => Ok(r),
        Outcome::Panicked(p) => resume_unwind(p),
        Outcome::Discarded => Err(Discarded),
    }
}

impl<R> Completion<R> {
    /// Polls for the result itself (a `Submit` awaiting its task): read
    /// straight out of the task's slot; a panic resumes, a discarded task
    /// panics (the caller knows it cannot be).
    #[inline(never)]
    pub(crate) fn poll_value(&mut self, cx: &mut Context<'_>) -> Poll<R> {
        if let Inner::Shared(s) = &self.inner {
            if !s.slot().poll_done(cx.waker()) {
                return Poll::Pending;
            }
            let Inner::Shared(s) = core::mem::replace(&mut self.inner, Inner::Ready(None)) else {
                unreachable!()
            };
            // SAFETY: done, and we are the single owner; `self.inner` no
            // longer holds the slot.
            return Poll::Ready(unsafe { s.slot().take_or_panic() });
        }
        match Pin::new(self).poll(cx) {
            Poll::Ready(r) => Poll::Ready(r.unwrap_or_else(|e| panic!("{e}"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<R> Future for Completion<R> {
    /// The task's result, or [`Discarded`] if it never ran (as a
    /// `JoinHandle`'s output is a `Result`).
    type Output = Result<R, Discarded>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<R, Discarded>> {
        let this = self.get_mut();
        match &mut this.inner {
            Inner::Ready(o) => Poll::Ready(unwrap_outcome(
                o.take()
                    .expect("Completion polled after it returned Ready")
                    .into_inner(),
            )),
            Inner::Boxed(o) => Poll::Ready(unwrap_outcome(
                *o.take().expect("Completion polled after it returned Ready"),
            )),
            Inner::Shared(s) => {
                let slot = s.slot();
                if !slot.poll_done(cx.waker()) {
                    return Poll::Pending;
                }
                // SAFETY: done, and we are the single owner; `this.inner`
                // is replaced below so the slot is never taken again.
                let r = unsafe { slot.take_result() };
                this.inner = Inner::Ready(None);
                Poll::Ready(r)
            }
        }
    }
}

// The outcome is never pinned: it is moved out whole.
impl<R> Unpin for Completion<R> {}

impl<R> fmt::Debug for Completion<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("done", &self.is_done())
            .finish()
    }
}
