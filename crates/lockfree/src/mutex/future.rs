//! The futures of [`Mutex::lock_async`] and [`Mutex::lock_arc_async`].

use core::fmt;
use core::future::Future;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::task::{Context, Poll};

use std::sync::Arc;

use sync_core::unwind::Panics;

use super::{ArcMutexGuard, Mutex, MutexGuard};
use crate::raw_mutex::RawLockAsync;

/// The future of [`Mutex::lock_async`].
///
/// # Cancel safety
///
/// See [`Mutex::lock_async`].
///
/// # Panics
///
/// Dropping a future that was handed the lock, or woken to compete for it,
/// passes the lock or the wakeup on to the next waiter, and so may run that
/// waiter's waker (a task's: user code). If it panics, the drop finishes
/// passing on, then resumes the panic, unless the thread is already
/// unwinding: then the panic is dropped, never a second panic (which would
/// abort). A poll that queues may run another waiting task's waker too
/// (see the [`Mutex`]'s docs): its panic goes on out of the poll, with the
/// request kept.
#[must_use = "futures do nothing unless polled"]
pub struct LockAsync<'a, T: ?Sized> {
    pub(super) mutex: &'a Mutex<T>,
    pub(super) raw: RawLockAsync<'a>,
}

impl<'a, T: ?Sized> Future for LockAsync<'a, T> {
    type Output = MutexGuard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match Pin::new(&mut this.raw).poll(cx) {
            // SAFETY: the raw future resolved: we hold the lock.
            Poll::Ready(()) => Poll::Ready(unsafe { this.mutex.guard() }),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: ?Sized> fmt::Debug for LockAsync<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockAsync").field("raw", &self.raw).finish()
    }
}

/// The future of [`Mutex::lock_arc_async`]: resolves to an
/// [`ArcMutexGuard`]. It owns its `Arc` of the mutex, so it is `'static`.
///
/// # Cancel safety
///
/// As [`LockAsync`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use lockfree_sync::{LockArcAsync, Mutex};
///
/// let m = Arc::new(Mutex::new(1));
/// let fut: LockArcAsync<i32> = Arc::clone(&m).lock_arc_async();
/// let g = futures::executor::block_on(fut);
/// assert_eq!(*g, 1);
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct LockArcAsync<T: ?Sized> {
    // Both dropped by hand, `raw` first: it borrows the lock that `mutex`
    // keeps alive.
    pub(super) raw: ManuallyDrop<RawLockAsync<'static>>,
    pub(super) mutex: ManuallyDrop<Arc<Mutex<T>>>,
}

impl<T: ?Sized> Drop for LockArcAsync<T> {
    fn drop(&mut self) {
        let mut panics = Panics::new();
        // SAFETY: taken exactly once, here, while the `Arc` still keeps the
        // lock it borrows alive; the field is not used again.
        let mut raw = unsafe { ManuallyDrop::take(&mut self.raw) };
        // Withdrawn, or the lock (or the wakeup) passed on, with the
        // wakers' panics kept: the raw future holds nothing now.
        raw.withdraw(&mut panics);
        drop(raw);
        // Our handle may be the last one, whose drop drops the `T` (user
        // code): dropped before a waker's panic goes on, as the drop glue
        // would have dropped it while that panic unwound (and a `T` whose
        // drop panics too aborted the process).
        // SAFETY: taken exactly once, here; the field is not used again.
        panics.drop_then_resume(unsafe { ManuallyDrop::take(&mut self.mutex) });
    }
}

impl<T: ?Sized> Future for LockArcAsync<T> {
    type Output = ArcMutexGuard<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match Pin::new(&mut *this.raw).poll(cx) {
            // SAFETY: the raw future resolved: we hold the lock.
            Poll::Ready(()) => Poll::Ready(unsafe { ArcMutexGuard::new(Arc::clone(&*this.mutex)) }),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: ?Sized> fmt::Debug for LockArcAsync<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockArcAsync")
            .field("raw", &self.raw)
            .finish()
    }
}
