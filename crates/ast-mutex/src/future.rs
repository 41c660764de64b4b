//! The futures of [`AstMutex::enter_async`] and
//! [`AstMutex::enter_arc_async`]: a task's waiter in the same queues as
//! threads.

use core::fmt;
use core::future::Future;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::task::{Context, Poll};

// The waiter is reference counted with sync-core's `Arc` (loom's in loom
// builds); the owned future's mutex handle is the user's std `Arc`.
use std::sync::Arc as StdArc;
use sync_core::sync::Arc;
use sync_core::unwind::Panics;
use sync_core::waiter::Waiter;

use crate::guard::{ArcAstGuard, AstGuard};
use crate::mutex::AstMutex;
use crate::raw::Place;
use crate::state::AbstractState;

/// A task's wait: its entry set, its place in line, and its queued waiter.
pub(crate) struct Wait {
    pub mask: u64,
    /// Its node, from the first wait until it enters or gives up.
    pub place: Place,
    /// Queued, until it is notified or the future is dropped.
    pub waiter: Option<Arc<Waiter>>,
}

impl Wait {
    fn new(mask: u64) -> Self {
        Self {
            mask,
            place: Place::default(),
            waiter: None,
        }
    }
}

/// The future of [`AstMutex::enter_async`]: resolves to an [`AstGuard`].
///
/// # Cancel safety
///
/// Dropping it loses nothing: see [`AstMutex::enter_async`].
///
/// # Examples
///
/// ```
/// ast_mutex::states! { enum One { Only } }
/// let m = ast_mutex::AstMutex::new(One::Only, 1);
/// let g = futures::executor::block_on(m.enter_async(One::Only));
/// assert_eq!(*g, 1);
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct EnterAsync<'a, S: AbstractState, T: ?Sized> {
    mutex: &'a AstMutex<S, T>,
    wait: Wait,
}

impl<'a, S: AbstractState, T: ?Sized> EnterAsync<'a, S, T> {
    pub(crate) fn new(mutex: &'a AstMutex<S, T>, mask: u64) -> Self {
        Self {
            mutex,
            wait: Wait::new(mask),
        }
    }
}

impl<'a, S: AbstractState, T: ?Sized> Future for EnterAsync<'a, S, T> {
    type Output = AstGuard<'a, S, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mutex = this.mutex;
        mutex
            .poll_enter(&mut this.wait, cx)
            .map(|s| AstGuard::new(mutex, s))
    }
}

impl<S: AbstractState, T: ?Sized> Drop for EnterAsync<'_, S, T> {
    fn drop(&mut self) {
        self.mutex.cancel_wait(&mut self.wait);
    }
}

impl<S: AbstractState, T: ?Sized> fmt::Debug for EnterAsync<'_, S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterAsync")
            .field("queued", &self.wait.waiter.is_some())
            .finish_non_exhaustive()
    }
}

/// The future of [`AstMutex::enter_arc_async`]: resolves to an
/// [`ArcAstGuard`].
///
/// # Cancel safety
///
/// Dropping it loses nothing: see [`AstMutex::enter_async`].
///
/// # Panics
///
/// Its drop, as an [`EnterAsync`]'s, may go on with a waker's panic (see
/// [`AstMutex`]'s `# Panics`). The future's handle on the mutex is dropped
/// before that panic goes on, so a future that holds the last handle
/// drops the `T` outside that unwind.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// ast_mutex::states! { enum One { Only } }
/// let m = Arc::new(ast_mutex::AstMutex::new(One::Only, 1));
/// let g = futures::executor::block_on(m.enter_arc_async(One::Only));
/// assert_eq!(*g, 1);
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct EnterArcAsync<S: AbstractState, T: ?Sized> {
    /// Dropped by `Drop`, after the wait is cancelled and before a waker's
    /// panic goes on (it may be the mutex's last handle).
    mutex: ManuallyDrop<StdArc<AstMutex<S, T>>>,
    wait: Wait,
}

impl<S: AbstractState, T: ?Sized> EnterArcAsync<S, T> {
    pub(crate) fn new(mutex: StdArc<AstMutex<S, T>>, mask: u64) -> Self {
        Self {
            mutex: ManuallyDrop::new(mutex),
            wait: Wait::new(mask),
        }
    }
}

impl<S: AbstractState, T: ?Sized> Future for EnterArcAsync<S, T> {
    type Output = ArcAstGuard<S, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.mutex
            .poll_enter(&mut this.wait, cx)
            .map(|s| ArcAstGuard::new(StdArc::clone(&this.mutex), s))
    }
}

impl<S: AbstractState, T: ?Sized> Drop for EnterArcAsync<S, T> {
    fn drop(&mut self) {
        let mut panics = Panics::new();
        self.mutex.cancel_wait_with(&mut self.wait, &mut panics);
        // SAFETY: taken exactly once, here; the field is not used again.
        let mutex = unsafe { ManuallyDrop::take(&mut self.mutex) };
        panics.drop_then_resume(mutex);
    }
}

impl<S: AbstractState, T: ?Sized> fmt::Debug for EnterArcAsync<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterArcAsync")
            .field("queued", &self.wait.waiter.is_some())
            .finish_non_exhaustive()
    }
}
