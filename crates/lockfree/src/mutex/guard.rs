//! The guards of a held [`Mutex`]: [`MutexGuard`] and [`ArcMutexGuard`].

use core::fmt;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};

use std::sync::Arc;

use sync_core::sync::cell::MutPtr;
use sync_core::unwind::Panics;

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

    /// Unlocks the mutex for as long as `f` runs, then locks it again
    /// (blocking), also when `f` unwinds: the guard holds the lock again
    /// when this returns. The unlock is the mutex's own
    /// ([`Fairness`](crate::Fairness)).
    ///
    /// # Panics
    ///
    /// If the unlock wakes a waiting task whose waker panics, the lock is
    /// taken back and the panic goes on before `f` runs (see the
    /// [`Mutex`]'s docs). A panic of `f` goes on once the lock is taken
    /// back.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Mutex, MutexGuard};
    /// let m = Mutex::new(0);
    /// let mut g = m.lock();
    /// *g += 1;
    /// MutexGuard::unlocked(&mut g, || assert!(!m.is_locked()));
    /// *g += 1;
    /// assert_eq!(*g, 2);
    /// ```
    pub fn unlocked<F, U>(guard: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        unlocked(guard.mutex, &mut guard.data, Release::Own, f)
    }

    /// [`unlocked`](Self::unlocked), unlocking with
    /// [`unlock_fair`](Self::unlock_fair): the oldest waiter, if there is
    /// one, holds the lock while `f` runs.
    ///
    /// # Panics
    ///
    /// As [`unlocked`](Self::unlocked).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Mutex, MutexGuard};
    /// let m = Mutex::new(0);
    /// let mut g = m.lock();
    /// MutexGuard::unlocked_fair(&mut g, || assert!(!m.is_locked()));
    /// assert!(m.is_locked());
    /// ```
    pub fn unlocked_fair<F, U>(guard: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        unlocked(guard.mutex, &mut guard.data, Release::Fair, f)
    }

    /// Hands the lock to the oldest waiter if there is one, as
    /// [`unlock_fair`](Self::unlock_fair) does, and waits for it again
    /// (behind the waiters queued then); with nobody waiting, it does
    /// nothing.
    ///
    /// # Panics
    ///
    /// As [`unlocked`](Self::unlocked).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Mutex, MutexGuard};
    /// let m = Mutex::new(0);
    /// let mut g = m.lock();
    /// MutexGuard::bump(&mut g);
    /// *g += 1;
    /// ```
    pub fn bump(guard: &mut Self) {
        if guard.mutex.raw.has_waiters() {
            unlocked(guard.mutex, &mut guard.data, Release::Fair, || ());
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
        // SAFETY: the guard's drop: it is not used again.
        unsafe { Self::release(self, Release::Own) };
    }
}

impl<T: ?Sized> ArcMutexGuard<T> {
    /// Unlocks with `how`, then lets go of the guard's `Arc`: the guard's
    /// drop and [`unlock_fair`](Self::unlock_fair). (An associated
    /// function, as the public ones are: a method would hide the `T`'s
    /// method of the same name.)
    ///
    /// # Safety
    ///
    /// The guard is not used or dropped afterwards.
    #[inline]
    unsafe fn release(guard: &mut Self, how: Release) {
        // SAFETY: dropped exactly once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut guard.data) };
        // SAFETY: the guard holds the lock.
        let woken = unsafe { how.release(&guard.mutex) };
        // SAFETY: taken exactly once, here; the field is not used again.
        let mutex = unsafe { ManuallyDrop::take(&mut guard.mutex) };
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

    /// Unlocks, handing the lock to the oldest waiter if there is one, as
    /// [`MutexGuard::unlock_fair`] does.
    ///
    /// # Panics
    ///
    /// As the guard's drop (see the [`Mutex`]'s docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::{ArcMutexGuard, Mutex};
    /// let m = Arc::new(Mutex::new(0));
    /// ArcMutexGuard::unlock_fair(m.lock_arc());
    /// assert!(!m.is_locked());
    /// ```
    pub fn unlock_fair(guard: Self) {
        // SAFETY: the guard is in a `ManuallyDrop` that is not used again.
        unsafe { Self::release(&mut ManuallyDrop::new(guard), Release::Fair) };
    }

    /// Unlocks the mutex for as long as `f` runs, then locks it again, as
    /// [`MutexGuard::unlocked`] does.
    ///
    /// # Panics
    ///
    /// As [`MutexGuard::unlocked`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::{ArcMutexGuard, Mutex};
    /// let m = Arc::new(Mutex::new(0));
    /// let mut g = m.lock_arc();
    /// ArcMutexGuard::unlocked(&mut g, || assert!(!m.is_locked()));
    /// assert!(m.is_locked());
    /// ```
    pub fn unlocked<F, U>(guard: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        unlocked(&guard.mutex, &mut guard.data, Release::Own, f)
    }

    /// [`unlocked`](Self::unlocked), unlocking with
    /// [`unlock_fair`](Self::unlock_fair).
    ///
    /// # Panics
    ///
    /// As [`MutexGuard::unlocked`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::{ArcMutexGuard, Mutex};
    /// let m = Arc::new(Mutex::new(0));
    /// let mut g = m.lock_arc();
    /// ArcMutexGuard::unlocked_fair(&mut g, || assert!(!m.is_locked()));
    /// ```
    pub fn unlocked_fair<F, U>(guard: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        unlocked(&guard.mutex, &mut guard.data, Release::Fair, f)
    }

    /// Hands the lock to the oldest waiter if there is one and waits for
    /// it again, as [`MutexGuard::bump`] does.
    ///
    /// # Panics
    ///
    /// As [`MutexGuard::unlocked`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::{ArcMutexGuard, Mutex};
    /// let m = Arc::new(Mutex::new(0));
    /// let mut g = m.lock_arc();
    /// ArcMutexGuard::bump(&mut g);
    /// *g += 1;
    /// ```
    pub fn bump(guard: &mut Self) {
        if guard.mutex.raw.has_waiters() {
            unlocked(&guard.mutex, &mut guard.data, Release::Fair, || ());
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

/// Which unlock a guard method makes.
#[derive(Clone, Copy)]
enum Release {
    /// The mutex's own ([`Fairness`](crate::Fairness)).
    Own,
    /// A handoff to the oldest waiter (`unlock_fair`).
    Fair,
}

impl Release {
    /// Unlocks `mutex`, returning what a woken task's waker panicked with.
    ///
    /// # Safety
    ///
    /// The caller holds the lock and gives it up.
    #[inline]
    unsafe fn release<T: ?Sized>(self, mutex: &Mutex<T>) -> Option<Panics> {
        // SAFETY: forwarded.
        unsafe {
            match self {
                Self::Own => mutex.raw.release(),
                Self::Fair => mutex.raw.release_fair(),
            }
        }
    }
}

/// The guards' `unlocked`: unlocks `mutex` (whose lock the caller's guard
/// holds, with `data` its access to the value), runs `f`, and takes the
/// lock back, also when `f` unwinds, so that the guard holds it again
/// whatever happens. A waker's panic from the unlock goes on once the
/// lock is taken back, before `f` runs.
fn unlocked<T: ?Sized, U>(
    mutex: &Mutex<T>,
    data: &mut ManuallyDrop<MutPtr<T>>,
    how: Release,
    f: impl FnOnce() -> U,
) -> U {
    // SAFETY: dropped once, here; `Relock` makes it anew before the guard
    // can use it (the guard is borrowed until then).
    unsafe { ManuallyDrop::drop(data) };
    // SAFETY: the caller's guard holds the lock; `Relock` takes it back
    // for the guard.
    let woken = unsafe { how.release(mutex) };
    let relock = Relock { mutex, data };
    // A waker's panic goes on unless this thread is already unwinding (a
    // second panic would abort): then it is dropped, with any later ones,
    // and `f` runs as asked.
    if let Some(mut panics) = woken.filter(|_| !std::thread::panicking()) {
        if let Some(payload) = panics.take() {
            drop(panics);
            drop(relock);
            std::panic::resume_unwind(payload);
        }
    }
    f()
}

/// Takes the lock back for a guard when dropped (after `unlocked`'s `f`
/// returns or unwinds) and renews the guard's access to the value.
struct Relock<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    data: &'a mut ManuallyDrop<MutPtr<T>>,
}

impl<T: ?Sized> Drop for Relock<'_, T> {
    fn drop(&mut self) {
        self.mutex.raw.lock();
        // The old access was dropped by `unlocked`: nothing is overwritten
        // that needs a drop.
        *self.data = ManuallyDrop::new(self.mutex.data.get_mut());
    }
}
