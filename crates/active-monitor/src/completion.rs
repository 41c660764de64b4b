//! [`Completion`]: the future of a task's result, and the one-shot slot the
//! executor fills.

use core::any::Any;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::panic::resume_unwind;

use sync_core::parking_lot::SpinWait;
use sync_core::sync::atomic::{AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::thread;
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

/// The slot is empty.
const PENDING: usize = 0;
/// The outcome is written and published.
const READY: usize = 1;

/// A one-shot result slot: written once by the executor, read once by the
/// [`Completion`].
///
/// `state`: [`PENDING`] → [`READY`] (once, by [`complete`](Self::complete)).
/// Two wake slots: `waker` for the completion's owner (a task, or a thread
/// in [`Completion::wait`]), `order` for the worker that submitted the task
/// and must wait for it before its next submission under strict program
/// order (a different party, possibly at the same time).
pub(crate) struct ResultSlot<R> {
    state: AtomicUsize,
    value: UnsafeCell<Option<Outcome<R>>>,
    waker: AtomicWaker,
    order: AtomicWaker,
}

// SAFETY: `value` is written once by the executor before `state` becomes
// READY (Release) and read by the single owner of the completion after it
// sees READY (Acquire); R crosses threads, hence R: Send.
unsafe impl<R: Send> Send for ResultSlot<R> {}
// SAFETY: as for `Send`; no `&R` is ever shared.
unsafe impl<R: Send> Sync for ResultSlot<R> {}

impl<R> ResultSlot<R> {
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicUsize::new(PENDING),
            value: UnsafeCell::new(None),
            waker: AtomicWaker::new(),
            order: AtomicWaker::new(),
        }
    }

    /// Stores the outcome and wakes the waiters.
    ///
    /// # Safety
    ///
    /// Called at most once, by the executor that owns the task.
    pub(crate) unsafe fn complete(&self, outcome: Outcome<R>) {
        self.value.with_mut(|v| {
            // SAFETY: only the executor writes, once, before READY; the
            // reader waits for READY.
            unsafe { *v = Some(outcome) };
        });
        // Release: pairs with the Acquire load in `is_done`/`take`.
        self.state.store(READY, Release);
        // The AtomicWaker's RMW orders this wake after the store for a
        // register that looks at `state` after registering.
        // A waker is user code: a panic in it is resumed once the monitor
        // is let go of (see `unwind`).
        unwind::caught(|| self.order.wake());
        unwind::caught(|| self.waker.wake());
    }

    pub(crate) fn is_done(&self) -> bool {
        // Acquire: pairs with the Release store in `complete`.
        self.state.load(Acquire) == READY
    }

    /// Takes the outcome.
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, and the caller is the completion's single
    /// owner, taking it once.
    unsafe fn take(&self) -> Outcome<R> {
        self.value
            .with_mut(|v| {
                // SAFETY: READY was seen with Acquire: the executor's write
                // happened before and it writes no more; we are the only reader.
                unsafe { (*v).take() }
            })
            .expect("a completion's outcome is taken once")
    }

    fn poll_done(&self, waker: &AtomicWaker, cx: &Waker) -> bool {
        if self.is_done() {
            return true;
        }
        waker.register(cx);
        // A completion between the first look and the register may have
        // found no waker: look again.
        self.is_done()
    }

    /// Parks the calling thread until the outcome is ready, woken through
    /// `which` (the owner's slot or the order slot).
    fn block(&self, order: bool) {
        let which = if order { &self.order } else { &self.waker };
        // A short spin, then yields, first: a combiner usually finishes the
        // task within microseconds, and a park plus unpark costs tens.
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
        while !self.poll_done(which, &waker) {
            // A wake between the register and the park leaves the thread's
            // unpark token set: the park returns at once.
            thread::park();
        }
    }

    /// Blocks until done without taking the outcome (strict program order).
    pub(crate) fn wait_done(&self) {
        self.block(true);
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
}

impl<R: Send> HasSlot<R> for ResultSlot<R> {
    fn slot(&self) -> &ResultSlot<R> {
        self
    }
}

enum Inner<R> {
    /// Ran inline by the submitter (no allocation); `None` once taken.
    Ready(Option<Outcome<R>>),
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
/// task still runs in its turn, and its result is dropped.
///
/// # Panics
///
/// Taking the result ([`wait`](Self::wait), `.await`) panics if the task
/// panicked (the same payload, resumed), or if the task was
/// [discarded](Discarded) (then [`wait_result`](Self::wait_result) returns
/// the error instead). Polling again after the result was taken panics.
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
/// assert_eq!(futures::executor::block_on(c), 10);
/// ```
pub struct Completion<R> {
    inner: Inner<R>,
}

impl<R> Completion<R> {
    pub(crate) fn from_outcome(outcome: Outcome<R>) -> Self {
        Self {
            inner: Inner::Ready(Some(outcome)),
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
            Inner::Ready(_) => true,
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
        match self.wait_result() {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
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
        let outcome = match &mut self.inner {
            Inner::Ready(o) => o.take().expect("a completion's outcome is taken once"),
            Inner::Shared(s) => {
                let slot = s.slot();
                slot.block(false);
                // SAFETY: done, and `self` is the single owner (consumed).
                unsafe { slot.take() }
            }
        };
        unwrap_outcome(outcome)
    }
}

fn unwrap_outcome<R>(outcome: Outcome<R>) -> Result<R, Discarded> {
    match outcome {
        Outcome::Value(r) => Ok(r),
        Outcome::Panicked(p) => resume_unwind(p),
        Outcome::Discarded => Err(Discarded),
    }
}

impl<R> Future for Completion<R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        let outcome = match &mut this.inner {
            Inner::Ready(o) => o.take().expect("Completion polled after it returned Ready"),
            Inner::Shared(s) => {
                let slot = s.slot();
                if !slot.poll_done(&slot.waker, cx.waker()) {
                    return Poll::Pending;
                }
                // A Ready outcome is taken once: mark it so by becoming Ready(None).
                // SAFETY: done, and we are the single owner; `this.inner`
                // is replaced below so the slot is never taken again.
                let o = unsafe { slot.take() };
                this.inner = Inner::Ready(None);
                o
            }
        };
        match unwrap_outcome(outcome) {
            Ok(r) => Poll::Ready(r),
            Err(e) => panic!("{e}"),
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
