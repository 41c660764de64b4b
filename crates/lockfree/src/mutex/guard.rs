//! The guards of a held [`Mutex`]: [`MutexGuard`] and [`ArcMutexGuard`].

use core::fmt;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};

use std::sync::Arc;

use sync_core::sync::cell::MutPtr;

use super::Mutex;

/// The lock of a [`Mutex`], held: derefs to the data and unlocks on drop.
///
/// The guard is `Send` when `T` is, so a task may hold it across an
/// `.await` on a multi-threaded executor; it is unlocked from whichever
/// thread drops it.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    // Dropped before the unlock, so loom sees the access end first.
    data: ManuallyDrop<MutPtr<T>>,
}

// SAFETY: the guard gives `&mut T`, and unlocking from another thread is
// allowed, so sending it is sending the `T`'s access: `T: Send`.
unsafe impl<T: ?Sized + Send> Send for MutexGuard<'_, T> {}
// SAFETY: a shared guard gives `&T` (hence `T: Sync`) and, through
// `MutexGuard::mutex`, the `&'a Mutex<T>` itself, which outlives the guard:
// another thread could keep it and lock once this guard unlocks, taking
// `&mut T` there (hence `T: Send`, which is what makes `Mutex<T>: Sync`).
unsafe impl<T: ?Sized + Send + Sync> Sync for MutexGuard<'_, T> {}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// # Safety
    ///
    /// The caller holds `mutex`'s lock and gives it to the guard.
    pub(super) unsafe fn new(mutex: &'a Mutex<T>) -> Self {
        let data = ManuallyDrop::new(mutex.data.get_mut());
        Self { mutex, data }
    }

    /// Unlocks, handing the lock to the oldest waiter if there is one (a
    /// one-off [`Fairness::Fifo`](crate::Fairness::Fifo) unlock). If a
    /// woken thread is already on its way to the lock, the lock is released
    /// for it instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Mutex, MutexGuard};
    /// let m = Mutex::new(0);
    /// MutexGuard::unlock_fair(m.lock());
    /// assert!(!m.is_locked());
    /// ```
    pub fn unlock_fair(guard: Self) {
        let mut guard = ManuallyDrop::new(guard);
        // SAFETY: dropped once, here; the guard's own Drop does not run.
        unsafe { ManuallyDrop::drop(&mut guard.data) };
        // SAFETY: the guard holds the lock.
        // Unlocked: a waker's panic may go on now (see the Mutex's docs).
        if let Some(panics) = unsafe { guard.mutex.raw.release_fair() } {
            panics.resume();
        }
    }

    /// The mutex this guard locks.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Mutex, MutexGuard};
    /// let m = Mutex::new(0);
    /// let g = m.lock();
    /// assert!(std::ptr::eq(MutexGuard::mutex(&g), &m));
    /// ```
    pub fn mutex(guard: &Self) -> &'a Mutex<T> {
        guard.mutex
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        // SAFETY: the guard holds the lock.
        // Unlocked: a waker's panic may go on now, unless we are
        // unwinding (see the Mutex's docs).
        if let Some(panics) = unsafe { self.mutex.raw.release() } {
            panics.resume();
        }
    }
}

/// The parts every guard shares: `Deref`/`DerefMut` give the data,
/// `Debug`/`Display` show it. `$guard` has a `mutex` field that derefs
/// to the [`Mutex`] and a `data` field with the cell's pointer.
macro_rules! guard_impls {
    ($($guard:ident $(<$lt:lifetime>)?),*) => {$(
        impl<$($lt,)? T: ?Sized> Deref for $guard<$($lt,)? T> {
            type Target = T;
            #[inline]
            fn deref(&self) -> &T {
                // Shared access straight from the pointer: no `&mut T` is
                // created, so `&T`s handed out before stay valid.
                // SAFETY: the guard holds the lock, so no one else accesses
                // the data; `&self` excludes `deref_mut` while this lives.
                self.data.with(|p| unsafe { &*p })
            }
        }

        impl<$($lt,)? T: ?Sized> DerefMut for $guard<$($lt,)? T> {
            #[inline]
            fn deref_mut(&mut self) -> &mut T {
                // SAFETY: the guard holds the lock, so no other access exists.
                unsafe { MutPtr::deref(&self.data) }
            }
        }

        impl<$($lt,)? T: ?Sized + fmt::Debug> fmt::Debug for $guard<$($lt,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&**self, f)
            }
        }

        impl<$($lt,)? T: ?Sized + fmt::Display> fmt::Display for $guard<$($lt,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&**self, f)
            }
        }
    )*};
}

guard_impls!(MutexGuard<'a>, ArcMutexGuard);

/// A guard that owns an `Arc` of its [`Mutex`]: from
/// [`lock_arc`](Mutex::lock_arc), [`try_lock_arc`](Mutex::try_lock_arc) and
/// [`lock_arc_async`](Mutex::lock_arc_async). It borrows nothing, so it can move
/// into a spawned task or thread; dropping it unlocks.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use lockfree_sync::{Mutex, ArcMutexGuard};
///
/// let m = Arc::new(Mutex::new(String::new()));
/// let mut g = m.lock_arc();
/// g.push_str("held");
/// assert!(Arc::ptr_eq(ArcMutexGuard::mutex(&g), &m));
/// ```
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct ArcMutexGuard<T: ?Sized> {
    // Dropped by hand after the unlock, before a waker's panic goes on:
    // it may be the last handle, whose drop drops the `T`.
    mutex: ManuallyDrop<Arc<Mutex<T>>>,
    // Dropped before the unlock, so loom sees the access end first.
    data: ManuallyDrop<MutPtr<T>>,
}

impl<T: ?Sized> Drop for ArcMutexGuard<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        // SAFETY: the guard holds the lock.
        let woken = unsafe { self.mutex.raw.release() };
        // SAFETY: taken exactly once, here; the field is not used again.
        let mutex = unsafe { ManuallyDrop::take(&mut self.mutex) };
        match woken {
            None => drop(mutex),
            // Unlocked, and a waker panicked. Our handle goes first, as it
            // may be the last one, whose drop drops the `T` (user code):
            // left to the drop glue, it ran while the waker's panic unwound,
            // and a `T` whose drop panics aborted the process. Now each
            // runs, and the waker's panic goes on unless we are unwinding
            // (see the Mutex's docs).
            Some(panics) => panics.drop_then_resume(mutex),
        }
    }
}

// SAFETY: as for `MutexGuard`: the guard gives `&mut T` and may unlock from
// any thread; the `Arc<Mutex<T>>` it owns is Send when `T: Send`.
unsafe impl<T: ?Sized + Send> Send for ArcMutexGuard<T> {}
// SAFETY: as for `MutexGuard`: `&T` (hence `T: Sync`), and through
// `ArcMutexGuard::mutex` the `Arc<Mutex<T>>`, which another thread could
// clone and lock (or drop last) once this guard unlocks (hence `T: Send`).
unsafe impl<T: ?Sized + Send + Sync> Sync for ArcMutexGuard<T> {}

impl<T: ?Sized> ArcMutexGuard<T> {
    /// # Safety
    ///
    /// The caller holds `mutex`'s lock and gives it to the guard.
    pub(super) unsafe fn new(mutex: Arc<Mutex<T>>) -> Self {
        let data = ManuallyDrop::new(mutex.data.get_mut());
        Self {
            mutex: ManuallyDrop::new(mutex),
            data,
        }
    }

    /// The mutex this guard locks.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::{ArcMutexGuard, Mutex};
    /// let m = Arc::new(Mutex::new(0));
    /// let g = m.lock_arc();
    /// assert!(Arc::ptr_eq(ArcMutexGuard::mutex(&g), &m));
    /// ```
    pub fn mutex(guard: &Self) -> &Arc<Mutex<T>> {
        &guard.mutex
    }
}
