//! [`Completion`]: the future of a task's result; the one-shot slot the
//! executor fills (`slot`), and how a task ends, for those who wait for it
//! to end without taking its result (`finish`).

use core::any::Any;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::pin::Pin;
use core::task::{Context, Poll};
use std::panic::resume_unwind;

use crate::error::Discarded;
use crate::unwind;

/// The largest result (in bytes) that an operation holds in its own frame
/// before returning it, so that a panic it must resume can drop it first
/// (`Monitor::call_inline`, a completion's wait); a larger one is written
/// straight into the caller's place, and such a panic is kept for the
/// thread's next operation.
pub(crate) const RESULT_COPY_MAX: usize = 4096;

// `std::sync::Arc`, not loom's: tasks are shared as trait objects, and
// loom's `Arc` cannot be coerced to one (the reference count is std's own,
// the protocol's atomics are all loom's).
use std::sync::Arc;

mod finish;
mod kept;
mod slot;

pub(crate) use finish::Finish;
use finish::READY;
pub(crate) use slot::{HasSlot, ResultSlot};

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
    /// Queued: the slot the executor fills; `keep`: a blocking wait
    /// leaves the task to its thread to drop (see `kept`); `monitor`: the
    /// task's monitor (`Monitor::id`), or 0 for an OR or AND, which a
    /// blocking wait checks it can get (see `wait`'s `# Panics`).
    Shared {
        task: Arc<dyn HasSlot<R>>,
        keep: bool,
        monitor: usize,
    },
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
/// `m.submit(f);` is the paper's asynchronous call).
///
/// A result nobody takes may hold what other code waits for (a lease, a
/// permit), and its `Drop` may call a monitor, so it is never dropped
/// while the thread that ran the task holds the monitor. It is dropped by
/// that thread once it has let go of every monitor: at the end of the
/// operation that served it (the `call`, `submit` or serve in which the
/// task ran), or before that thread parks in a blocking wait of the family
/// if that comes first. A serve that runs many tasks in one stint keeps
/// their results until the stint ends, so a batch of fire-and-forget tasks
/// that each hold a permit from a pool smaller than the batch waits for
/// the pool. The results an operation kept are dropped one at a time,
/// newest first. Two cases hand some to a thread of their own, named
/// `active-monitor-deliver`, which drops them: a park inside another
/// thread's task body (one a serve runs from the queue) hands on the
/// results kept before that body began, and a `Drop` among them that parks
/// in a blocking wait of the family (for a permit another of them gives
/// back, say) hands on those still to be dropped after it. A panic of such
/// a `Drop` is dropped with that thread.
/// That thread has none of the first thread's context: not its
/// thread-locals, not the async runtime it entered (a `Drop` that calls
/// `tokio::spawn` panics there), and a default-sized stack. Nothing
/// returns when it is done, so a pool that such a result gives back to
/// may stay short for a while after every caller has returned. A result
/// whose `Drop` needs its thread's context should be taken (and dropped)
/// by its caller rather than left to the monitor. Awaiting `&mut c` in a
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
/// A waiter may hold the task's last reference once it has the result
/// (the monitor let go of the task first): it then drops the task's
/// precondition, user code, when it takes the result. If that drop panics,
/// the panic resumes from that `wait`, `wait_result` or poll, the result
/// dropped first (nothing of it is leaked); a waiter that unwinds already
/// (the task's own panic, or [`Discarded`] from `wait`) drops that panic.
/// A result larger than 4 KiB is read straight into the caller's place
/// (it costs no stack twice), so the panic cannot go on without leaking
/// it: then it is kept for the thread's next operation, as a `call`'s on
/// an idle monitor is.
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

    /// Writes at `out` a completion of a task that ran inline whose
    /// outcome is still to be written, and returns where to write it: in
    /// place, so that the outcome is never copied (see `submit_inline`).
    ///
    /// # Safety
    ///
    /// `out` is valid for writes and `fits_inline::<R>()`; an outcome is
    /// written at the returned pointer before the completion is read,
    /// used or dropped.
    pub(crate) unsafe fn init_ready(out: *mut Self) -> *mut Outcome<R> {
        debug_assert!(fits_inline::<R>());
        // SAFETY: our caller's contract; the words are written by our
        // caller before the completion is used.
        unsafe {
            out.write(Self {
                inner: Inner::Ready(Some(InlineOutcome {
                    words: MaybeUninit::uninit(),
                    _outcome: PhantomData,
                })),
            });
            match &mut (*out).inner {
                Inner::Ready(Some(o)) => o.words.as_mut_ptr().cast::<Outcome<R>>(),
                _ => unreachable!(),
            }
        }
    }

    /// The completion of a queued task of `monitor` (`Monitor::id`; 0 for
    /// an OR or AND).
    pub(crate) fn shared(slot: Arc<dyn HasSlot<R>>, monitor: usize) -> Self {
        Self {
            inner: Inner::Shared {
                task: slot,
                keep: false,
                monitor,
            },
        }
    }

    /// [`shared`](Self::shared), for a task that a blocking wait may leave
    /// to its thread to drop later (see `kept`).
    ///
    /// # Safety
    ///
    /// Once its result is taken, dropping `task` runs no user code and
    /// touches nothing that may be gone by then: `R` and the task are
    /// `'static`, and the task's other user values (a precondition) need no
    /// drop.
    pub(crate) unsafe fn shared_kept(task: Arc<dyn HasSlot<R>>, monitor: usize) -> Self {
        Self {
            inner: Inner::Shared {
                task,
                keep: true,
                monitor,
            },
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
            Inner::Shared { task, .. } => task.slot().is_done(),
        }
    }

    /// Blocks the calling thread until the task has run, and returns its
    /// result.
    ///
    /// The task's allocation may outlive the call, not its values: the
    /// thread keeps its last waited-for task (one, of a few hundred bytes
    /// at most) and frees it before its next blocking wait for a task parks, or when
    /// it exits, so that a woken thread returns to its caller without
    /// freeing it first. The result is the caller's, and a task whose
    /// precondition holds values with a `Drop` is never kept. A task with a
    /// precondition is also pointed to by its submitter's record of program
    /// order (see [`Order`](crate::Order)), which keeps its allocation, the
    /// result's place included, until the submitter's next submission with
    /// a precondition (or, under strict order, any submission), its next
    /// blocking wait for a task that parks, or its exit.
    ///
    /// # Deadlocks
    ///
    /// Parks the thread until the task has finished. Called from a task on a single-threaded executor (tokio's
    /// current-thread runtime, `futures`' `LocalPool`) while another task of
    /// that executor must run first (it holds the monitor's work back, or
    /// submits what this waits for), it blocks that executor for ever: in
    /// async code use `.await` (a `Completion` is a future), which awaits instead.
    ///
    /// # Panics
    ///
    /// Resumes the task's panic; panics if the task was discarded (see
    /// [`Discarded`]), or with the panic of a precondition whose drop this
    /// wait makes (see [`Completion`]'s `# Panics`). Panics, instead of
    /// waiting for ever, if the task is unfinished and its monitor is one
    /// whose task this thread is running, innermost or below (a task body
    /// waiting for a task it queued on its own monitor): only this thread
    /// could run it, after the body returns. The completion is dropped as
    /// the panic unwinds; the task runs when the monitor is free.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(vec![1, 2]);
    /// assert_eq!(m.submit(|v| v.len()).wait(), 2);
    /// ```
    pub fn wait(self) -> R {
        match &self.inner {
            Inner::Shared { .. } => self.wait_shared(),
            Inner::Ready(_) | Inner::Boxed(_) => self.wait_ran_inline(),
        }
    }

    /// [`wait`](Self::wait) for a queued task: blocks, then reads the
    /// result out of the task's slot, leaving the task to the thread if it
    /// may be kept (see `kept`).
    #[inline]
    fn wait_shared(self) -> R {
        let Inner::Shared {
            task,
            keep,
            monitor,
        } = self.inner
        else {
            unreachable!("wait_shared on a completion that ran inline")
        };
        let (slot, task) = Self::block_then_keep(task, keep, monitor);
        // SAFETY: done, and `self` was the single owner (consumed); the
        // task is alive until it is released below (`task` holds it, or
        // the thread keeps it).
        task.take(|| unsafe { (*slot).take_or_panic() })
    }

    /// Blocks until `task`, of `monitor` (0: of several), has finished,
    /// then leaves it to the thread if `keep` (see `kept`). Returns its
    /// slot, and the task unless the thread keeps it: whichever holds the
    /// task keeps the slot alive.
    ///
    /// Panics instead of parking if `monitor` is one whose task this thread
    /// is running (see `wait`'s `# Panics`); `task` is dropped as that
    /// unwinds, as the completion would be.
    #[inline(always)]
    fn block_then_keep(
        task: Arc<dyn HasSlot<R>>,
        keep: bool,
        monitor: usize,
    ) -> (*const ResultSlot<R>, HeldTask<R>) {
        // One call through the task's vtable: after the park its code may
        // have gone cold.
        let slot: *const ResultSlot<R> = task.slot();
        // SAFETY: `task` holds the slot.
        unsafe { (*slot).block(|| monitor != 0 && unwind::runs_here(monitor)) };
        let task = if keep {
            // SAFETY: `shared_kept`'s contract.
            unsafe { kept::keep(task) }
        } else {
            Some(task)
        };
        (slot, HeldTask(task))
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
    /// submitter's next submission does not wait for it. If it was queued,
    /// it keeps its place in the task queue, and counts against the
    /// queue's [`capacity`](crate::Builder::capacity), until the monitor's
    /// holder reaches it and drops it unrun (at once if the monitor is
    /// idle; while a long task holds it, submitters may wait for room that
    /// withdrawn tasks take).
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
            Inner::Shared { task, .. } => task.cancel(),
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
    /// panic. The task's allocation may outlive the call, as with `wait`.
    ///
    /// # Errors
    ///
    /// [`Discarded`] if the task never ran: its monitor was dropped while its
    /// precondition was false.
    ///
    /// # Deadlocks
    ///
    /// Parks the thread until the task has finished. Called from a task on a single-threaded executor (tokio's
    /// current-thread runtime, `futures`' `LocalPool`) while another task of
    /// that executor must run first (it holds the monitor's work back, or
    /// submits what this waits for), it blocks that executor for ever: in
    /// async code use `.await` (a `Completion` is a future), which awaits instead.
    ///
    /// # Panics
    ///
    /// Resumes the task's panic, or the panic of a precondition whose drop
    /// this wait makes (see [`Completion`]'s `# Panics`); panics for a
    /// task of a monitor whose task this thread is running, as
    /// [`wait`](Self::wait) does.
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
            Inner::Shared { .. } => {
                let Inner::Shared {
                    task,
                    keep,
                    monitor,
                } = core::mem::replace(&mut self.inner, Inner::Ready(None))
                else {
                    unreachable!()
                };
                let (slot, task) = Self::block_then_keep(task, keep, monitor);
                // SAFETY: done, and `self` is the single owner (consumed);
                // the task is alive until it is released below (`task`
                // holds it, or the thread keeps it).
                task.take(|| unsafe { (*slot).take_result() })
            }
        }
    }
}

/// The task a waiter holds while it reads the result out of its slot,
/// maybe its last reference: a task that is not kept (see `kept`) has a
/// precondition whose drop is user code. The waiter lets go of it once
/// the result is out ([`take`](Self::take)), and a panic of that drop
/// resumes from the wait (or poll) that made it, the result dropped
/// first: left to unwind from a local's drop once the result was in the
/// caller's place, it leaked the result (Rust does not drop a return value
/// when a later local's drop unwinds); deferred, it resumed in the
/// thread's next operation, on any monitor, or was lost. A waiter that
/// unwinds instead (the task's own panic resumes, or it was discarded)
/// drops the task as it goes, and a panic of that drop is discarded (it
/// aborted the process during the unwind).
struct HeldTask<R>(Option<Arc<dyn HasSlot<R>>>);

impl<R> HeldTask<R> {
    /// Reads the result out of the task's slot with `read`, then lets go
    /// of the task (see above). A result larger than [`RESULT_COPY_MAX`]
    /// is read straight into the caller's place instead, and the task let
    /// go of after it, a panic of that drop kept for the thread's next
    /// operation (as `call`'s on an idle monitor): held in this frame
    /// first, such a result would cost its size in stack once more.
    #[inline(always)]
    fn take<V>(self, read: impl FnOnce() -> V) -> V {
        if const { size_of::<V>() > RESULT_COPY_MAX } {
            self.take_in_place(read)
        } else {
            self.take_then_release(read)
        }
    }

    /// [`take`](Self::take) for a small result.
    #[inline(always)]
    fn take_then_release<V>(mut self, read: impl FnOnce() -> V) -> V {
        let value = read();
        match self.0.take() {
            Some(task) => unwind::drop_own_then(task, value),
            None => value,
        }
    }

    /// [`take`](Self::take) for a large result: `self` is dropped once the
    /// result is in the caller's place.
    #[inline(always)]
    fn take_in_place<V>(self, read: impl FnOnce() -> V) -> V {
        let _task = self;
        read()
    }
}

impl<R> Drop for HeldTask<R> {
    #[inline]
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            if std::thread::panicking() {
                // The waiter unwinds (the task's own panic, or Discarded).
                unwind::drop_own_unwinding(task);
            } else {
                // After a large result (`take_in_place`).
                unwind::drop_catching(task);
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
    /// Who runs the task's body (see `Runner`), for a queued asynchronous
    /// task.
    pub(crate) fn runner(&self) -> Option<&crate::task::Runner> {
        match &self.inner {
            Inner::Shared { task, .. } => task.runner(),
            Inner::Ready(_) | Inner::Boxed(_) => None,
        }
    }

    /// Registers `waker` for the task's end, and for a holder's signal
    /// (see `Runner`).
    pub(crate) fn register(&self, waker: &core::task::Waker) {
        if let Inner::Shared { task, .. } = &self.inner {
            task.slot().poll_done(waker);
        }
    }

    /// Polls for the result itself (a `SubmitAsync` awaiting its task): read
    /// straight out of the task's slot; a panic resumes, a discarded task
    /// panics (the caller knows it cannot be).
    #[inline(never)]
    pub(crate) fn poll_value(&mut self, cx: &mut Context<'_>) -> Poll<R> {
        if let Inner::Shared { task, .. } = &self.inner {
            if !task.slot().poll_done(cx.waker()) {
                return Poll::Pending;
            }
            let Inner::Shared { task: s, .. } =
                core::mem::replace(&mut self.inner, Inner::Ready(None))
            else {
                unreachable!()
            };
            let slot: *const ResultSlot<R> = s.slot();
            // Maybe the last reference, let go of as a waiter's (see
            // `HeldTask`).
            let task = HeldTask(Some(s));
            // SAFETY: done, and we are the single owner; `self.inner` no
            // longer holds the slot, `task` holds it until it is released.
            return Poll::Ready(task.take(|| unsafe { (*slot).take_or_panic() }));
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
            Inner::Shared { task, .. } => {
                if !task.slot().poll_done(cx.waker()) {
                    return Poll::Pending;
                }
                let Inner::Shared { task, .. } =
                    core::mem::replace(&mut this.inner, Inner::Ready(None))
                else {
                    unreachable!()
                };
                let slot: *const ResultSlot<R> = task.slot();
                // Maybe the last reference, let go of as a waiter's (see
                // `HeldTask`).
                let task = HeldTask(Some(task));
                // SAFETY: done, and we were the single owner (`this.inner`
                // was replaced, so the slot is never taken again); `task`
                // holds it until it is released.
                Poll::Ready(task.take(|| unsafe { (*slot).take_result() }))
            }
        }
    }
}

// The outcome is never pinned: it is moved out whole.
impl<R> Unpin for Completion<R> {}

/// Test hooks, for the loom models: the waiters on a queued task's end
/// that program order makes (`Finish`), which an integration test cannot
/// reach through one submitter's record alone.
impl<R> Completion<R> {
    /// Test hook: a future that awaits the task's end as a submission
    /// held back by program order does (a waiter on the task's `Finish`,
    /// withdrawn when the future is dropped).
    ///
    /// # Panics
    ///
    /// If the task ran inline (it has no waiters).
    #[doc(hidden)]
    pub fn __test_order_wait(&self) -> __TestOrderWait<R> {
        match &self.inner {
            Inner::Shared { task, .. } => __TestOrderWait {
                task: Arc::clone(task),
                waiter: None,
            },
            Inner::Ready(_) | Inner::Boxed(_) => panic!("a task that ran inline has no waiters"),
        }
    }

    /// Test hook: sweeps the waiters on the task's end and returns how
    /// many withdrawn ones it freed and how many withdrawals were counted
    /// for a sweep then. For a quiescent, queued task: a withdrawn waiter
    /// that no count stands for stays until enough others withdraw.
    ///
    /// # Panics
    ///
    /// If the task ran inline, or its waiters are being served.
    #[doc(hidden)]
    pub fn __test_order_audit(&self) -> (usize, usize) {
        match &self.inner {
            Inner::Shared { task, .. } => task.slot().finish().audit(),
            Inner::Ready(_) | Inner::Boxed(_) => panic!("a task that ran inline has no waiters"),
        }
    }

    /// Test hook: whether a waiter on the task's end is half-way through
    /// its registration (swapped the queue's tail, not linked yet), seen
    /// as a finisher sees it. `false` if somebody serves the waiters now,
    /// or the task ran inline. For a task nobody else serves meanwhile.
    #[doc(hidden)]
    pub fn __test_order_in_flight(&self) -> bool {
        match &self.inner {
            Inner::Shared { task, .. } => task.slot().finish().in_flight(),
            Inner::Ready(_) | Inner::Boxed(_) => false,
        }
    }
}

/// [`Completion::__test_order_wait`]'s future.
#[doc(hidden)]
pub struct __TestOrderWait<R> {
    task: Arc<dyn HasSlot<R>>,
    waiter: Option<sync_core::sync::Arc<sync_core::waiter::Waiter>>,
}

impl<R> Future for __TestOrderWait<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.task
            .slot()
            .finish()
            .poll_finished(&mut this.waiter, cx)
    }
}

/// Another waiter on the same task, not registered yet.
impl<R> Clone for __TestOrderWait<R> {
    fn clone(&self) -> Self {
        Self {
            task: Arc::clone(&self.task),
            waiter: None,
        }
    }
}

impl<R> fmt::Debug for __TestOrderWait<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("__TestOrderWait")
            .field("registered", &self.waiter.is_some())
            .finish()
    }
}

impl<R> Drop for __TestOrderWait<R> {
    fn drop(&mut self) {
        self.task.slot().finish().withdraw(&mut self.waiter);
    }
}

impl<R> fmt::Debug for Completion<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("done", &self.is_done())
            .finish()
    }
}
