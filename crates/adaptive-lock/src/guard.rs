//! [`AdaptiveMutexGuard`]: lock_api's guard, with the `Sync` bound its
//! [`mutex`](AdaptiveMutexGuard::mutex) needs.

use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};

use crate::mutex::{AdaptiveMutex, MappedAdaptiveMutexGuard};
use crate::policy::{Learned, Policy};
use crate::raw::RawAdaptiveLock;

/// The guard of an [`AdaptiveMutex`]: the lock is held until it is
/// dropped. It wraps a `lock_api::MutexGuard` and has its associated
/// functions (`AdaptiveMutexGuard::unlock_fair(guard)`, `map`, `try_map`,
/// `try_map_or_err`, `unlocked`, `unlocked_fair`, `bump`, `leak`, `mutex`).
///
/// It is `Sync` only when `T: Send + Sync` (lock_api's guard is `Sync`
/// when `T: Sync`): a thread that shares the guard can keep its
/// [`mutex`](Self::mutex) and lock it once the guard is gone, so it could
/// otherwise take a `T` that is not `Send` on another thread.
#[must_use = "if unused the lock is released at once"]
pub struct AdaptiveMutexGuard<'a, T: ?Sized, P: Policy = Learned> {
    mutex: &'a AdaptiveMutex<T, P>,
    inner: lock_api::MutexGuard<'a, RawAdaptiveLock<P>, T>,
    /// The priority the lock was taken with (0 but through
    /// `lock_with_priority` and its timed forms), with which `unlocked`,
    /// `unlocked_fair` and `bump` retake it.
    priority: usize,
    /// Neither `Send` nor `Sync` by default: the impls below state them.
    _not_auto: PhantomData<*const ()>,
}

// SAFETY: as lock_api's guard (`GuardSend`): the raw lock may be unlocked
// from any thread, so the guard may move with the data, as `&mut T` may.
unsafe impl<T: ?Sized + Send, P: Policy> Send for AdaptiveMutexGuard<'_, T, P> {}
// SAFETY: a shared guard gives out `&T` (so `T: Sync`) and `&AdaptiveMutex`
// through `mutex`, with which another thread can lock once the guard is
// gone and take `&mut T` there (so `T: Send`, as the mutex's own `Sync`).
unsafe impl<T: ?Sized + Send + Sync, P: Policy> Sync for AdaptiveMutexGuard<'_, T, P> {}

impl<'a, T: ?Sized, P: Policy> AdaptiveMutexGuard<'a, T, P> {
    pub(crate) fn new(
        mutex: &'a AdaptiveMutex<T, P>,
        inner: lock_api::MutexGuard<'a, RawAdaptiveLock<P>, T>,
        priority: usize,
    ) -> Self {
        Self {
            mutex,
            inner,
            priority,
            _not_auto: PhantomData,
        }
    }

    /// Releases the lock with `release` (the raw lock's `unlock` or
    /// `unlock_fair`), runs `f`, and retakes the lock with the guard's
    /// priority, also if `f` unwinds, as lock_api's `unlocked` does.
    fn unlocked_with<F, U>(s: &mut Self, release: unsafe fn(&RawAdaptiveLock<P>), f: F) -> U
    where
        F: FnOnce() -> U,
    {
        /// Retakes the lock when dropped: after `f`, or as it unwinds.
        struct Relock<'a, P: Policy> {
            raw: &'a RawAdaptiveLock<P>,
            priority: usize,
        }
        impl<P: Policy> Drop for Relock<'_, P> {
            fn drop(&mut self) {
                self.raw.lock_with_priority(self.priority);
            }
        }
        let raw = s.mutex.raw_lock();
        // SAFETY: the guard holds the lock; `Relock` retakes it before the
        // guard can be used again (the guard is borrowed until then).
        unsafe { release(raw) };
        let _relock = Relock {
            raw,
            priority: s.priority,
        };
        f()
    }

    /// The lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(0);
    /// let guard = m.lock();
    /// assert!(std::ptr::eq(AdaptiveMutexGuard::mutex(&guard), &m));
    /// ```
    pub fn mutex(s: &Self) -> &'a AdaptiveMutex<T, P> {
        s.mutex
    }

    /// A guard of a part of the data (the lock stays held).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new((1, 2));
    /// let mut second = AdaptiveMutexGuard::map(m.lock(), |pair| &mut pair.1);
    /// *second += 1;
    /// drop(second);
    /// assert_eq!(*m.lock(), (1, 3));
    /// ```
    pub fn map<U: ?Sized, F>(s: Self, f: F) -> MappedAdaptiveMutexGuard<'a, U, P>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        lock_api::MutexGuard::map(s.inner, f)
    }

    /// [`map`](Self::map) if `f` returns `Some`; the guard back otherwise.
    ///
    /// # Errors
    ///
    /// The original guard, if `f` returns `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(vec![1]);
    /// let guard = AdaptiveMutexGuard::try_map(m.lock(), |v| v.get_mut(5));
    /// assert!(guard.is_err());
    /// ```
    pub fn try_map<U: ?Sized, F>(s: Self, f: F) -> Result<MappedAdaptiveMutexGuard<'a, U, P>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        let (mutex, priority) = (s.mutex, s.priority);
        lock_api::MutexGuard::try_map(s.inner, f).map_err(|inner| Self::new(mutex, inner, priority))
    }

    /// [`map`](Self::map) if `f` returns `Ok`; the guard back with `f`'s
    /// error otherwise.
    ///
    /// # Errors
    ///
    /// The original guard and `f`'s error, if `f` returns `Err`.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(vec![1]);
    /// let r = AdaptiveMutexGuard::try_map_or_err(m.lock(), |v| v.get_mut(5).ok_or(5));
    /// let (guard, missing) = r.err().unwrap();
    /// assert_eq!((guard.len(), missing), (1, 5));
    /// ```
    pub fn try_map_or_err<U: ?Sized, F, E>(
        s: Self,
        f: F,
    ) -> Result<MappedAdaptiveMutexGuard<'a, U, P>, (Self, E)>
    where
        F: FnOnce(&mut T) -> Result<&mut U, E>,
    {
        let mut error = None;
        Self::try_map(s, |t| f(t).map_err(|e| error = Some(e)).ok()).map_err(|s| {
            (
                s,
                error.expect("try_map gives the guard back only when `f` failed"),
            )
        })
    }

    /// Releases the lock, runs `f`, and takes the lock again (also if `f`
    /// panics), with the priority the guard was taken with (see
    /// [`AdaptiveMutex::lock_with_priority`]; 0 for a guard of
    /// [`lock`](AdaptiveMutex::lock)).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(0);
    /// let mut guard = m.lock();
    /// AdaptiveMutexGuard::unlocked(&mut guard, || assert!(!m.is_locked()));
    /// *guard += 1;
    /// ```
    pub fn unlocked<F, U>(s: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        Self::unlocked_with(s, RawAdaptiveLock::unlock, f)
    }

    /// Releases the lock and hands it to a parked thread if there is one
    /// (see [`RawAdaptiveLock::unlock_fair`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(0);
    /// AdaptiveMutexGuard::unlock_fair(m.lock());
    /// assert!(!m.is_locked());
    /// ```
    pub fn unlock_fair(s: Self) {
        lock_api::MutexGuard::unlock_fair(s.inner);
    }

    /// [`unlocked`](Self::unlocked), releasing with
    /// [`unlock_fair`](Self::unlock_fair); the lock is taken again with the
    /// guard's priority.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(0);
    /// let mut guard = m.lock();
    /// AdaptiveMutexGuard::unlocked_fair(&mut guard, || assert!(!m.is_locked()));
    /// ```
    pub fn unlocked_fair<F, U>(s: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        Self::unlocked_with(s, RawAdaptiveLock::unlock_fair, f)
    }

    /// Hands the lock to a parked thread if there is one, and takes it
    /// again after it, with the priority the guard was taken with (see
    /// [`unlocked`](Self::unlocked)).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(0);
    /// let mut guard = m.lock();
    /// AdaptiveMutexGuard::bump(&mut guard);
    /// *guard += 1;
    /// ```
    pub fn bump(s: &mut Self) {
        // SAFETY: the guard holds the lock.
        unsafe { s.mutex.raw_lock().bump_with_priority(s.priority) };
    }

    /// Keeps the lock held for ever and returns the data.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard};
    /// let m = AdaptiveMutex::new(1);
    /// *AdaptiveMutexGuard::leak(m.lock()) += 1;
    /// assert!(m.is_locked());
    /// ```
    pub fn leak(s: Self) -> &'a mut T {
        lock_api::MutexGuard::leak(s.inner)
    }
}

impl<T: ?Sized, P: Policy> Deref for AdaptiveMutexGuard<'_, T, P> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized, P: Policy> DerefMut for AdaptiveMutexGuard<'_, T, P> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: ?Sized + fmt::Debug, P: Policy> fmt::Debug for AdaptiveMutexGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display, P: Policy> fmt::Display for AdaptiveMutexGuard<'_, T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
