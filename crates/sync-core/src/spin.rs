//! A test-and-test-and-set spin lock with the family's
//! [back-off](crate::wait::Backoff), for short internal critical sections
//! (a waiter table) and as the spin-lock twin of the benchmarks.
//!
//! It never parks: a holder preempted by the scheduler makes the others spin
//! and then give way ([`give_way`]: a yield while
//! yields are cheap, a short sleep once they are slow, so that a waiter does
//! not give its core away for a whole scheduling round). Keep what it guards
//! to a few instructions. A caller with a deadline uses
//! [`SpinLock::lock_until`], which gives up rather than wait for a
//! preempted holder past it.
//!
//! Under loom the lock is a loom `Mutex`: loom cannot explore a spin loop
//! (it may keep rescheduling a yielding spinner instead of the preempted
//! holder, and gives up on the branch count), so the loom build models the
//! spin lock by its contract, mutual exclusion, and checks the code built on
//! it; `lock_until` is a `try_lock` there (a deadline may pass whenever the
//! lock is held). The std build's spinning is exercised by `tests/spin.rs`.

use core::fmt;
use core::ops::{Deref, DerefMut};
use std::time::Instant;

#[cfg(not(loom))]
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::cell::{MutPtr, UnsafeCell};
#[cfg(not(loom))]
use crate::wait::{Backoff, give_way};

/// A spin lock around a value.
///
/// # Examples
///
/// ```
/// use sync_core::spin::SpinLock;
///
/// let counter = SpinLock::new(0);
/// *counter.lock() += 1;
/// assert_eq!(*counter.lock(), 1);
/// ```
pub struct SpinLock<T: ?Sized> {
    /// `true` while a guard exists.
    #[cfg(not(loom))]
    locked: AtomicBool,
    #[cfg(loom)]
    locked: loom::sync::Mutex<()>,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands the value to one thread at a time, so `T: Send` is
// enough, as for `std::sync::Mutex`.
unsafe impl<T: ?Sized + Send> Send for SpinLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    crate::const_unless_loom! {
        /// An unlocked lock around `value`.
        pub fn new(value: T) -> Self {
            Self {
                #[cfg(not(loom))]
                locked: AtomicBool::new(false),
                #[cfg(loom)]
                locked: loom::sync::Mutex::new(()),
                value: UnsafeCell::new(value),
            }
        }
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> SpinLock<T> {
    /// Spins until the lock is free, then takes it.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        // Acquire: pairs with the Release store in `SpinGuard::drop`.
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        self.guard()
    }

    /// The guard of the lock the caller has just taken.
    #[inline]
    fn guard(&self) -> SpinGuard<'_, T> {
        SpinGuard {
            lock: self,
            value: self.value.get_mut(),
        }
    }

    #[cold]
    fn lock_contended(&self) {
        let taken = self.wait_and_take(None);
        debug_assert!(taken, "no deadline to miss");
    }

    /// Test-and-test-and-set until the lock is taken (`true`) or, with a
    /// `deadline`, until it has passed (`false`). Spins 2, 4, … 64 hints,
    /// then gives way on every further look: without a deadline a yield
    /// while yields are cheap, with one a short sleep never past it (see
    /// [`give_way`]).
    fn wait_and_take(&self, deadline: Option<Instant>) -> bool {
        let mut backoff = Backoff::new();
        loop {
            // Test before test-and-set: spin on a shared cache line.
            while self.locked.load(Ordering::Relaxed) {
                match deadline {
                    Some(d) if backoff.is_spent() => {
                        if Instant::now() >= d {
                            return false;
                        }
                        give_way(Some(d));
                    }
                    _ => backoff.snooze(),
                }
            }
            // Acquire: pairs with the Release store in `SpinGuard::drop`.
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// [`lock`](Self::lock), but not past `deadline`: `None` if the lock is
    /// still held then. Once the back-off's spins are spent it sleeps
    /// briefly between looks and never yields ([`give_way`] with the
    /// deadline), so it returns about on time even when the holder was
    /// preempted and waits a whole scheduling round for a CPU.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use sync_core::spin::SpinLock;
    ///
    /// let lock = SpinLock::new(0);
    /// let held = lock.lock();
    /// let soon = Instant::now() + Duration::from_millis(1);
    /// assert!(lock.lock_until(soon).is_none());
    /// drop(held);
    /// assert!(lock.lock_until(soon).is_some());
    /// ```
    pub fn lock_until(&self, deadline: Instant) -> Option<SpinGuard<'_, T>> {
        self.try_lock()
            .or_else(|| self.wait_and_take(Some(deadline)).then(|| self.guard()))
    }

    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Acquire: pairs with the Release store in `SpinGuard::drop`.
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| self.guard())
    }
}

#[cfg(loom)]
impl<T: ?Sized> SpinLock<T> {
    /// Takes the lock (loom: a blocking loom mutex).
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let held = self.locked.lock().unwrap();
        SpinGuard {
            value: self.value.get_mut(),
            _held: held,
        }
    }

    /// Takes the lock if it is free, and otherwise gives up: loom does not
    /// model time, so a deadline may pass whenever the lock is held.
    pub fn lock_until(&self, deadline: Instant) -> Option<SpinGuard<'_, T>> {
        let _ = deadline;
        self.try_lock()
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        let held = self.locked.try_lock().ok()?;
        Some(SpinGuard {
            value: self.value.get_mut(),
            _held: held,
        })
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("SpinLock").field("value", &&*g).finish(),
            None => f
                .debug_struct("SpinLock")
                .field("value", &"<locked>")
                .finish(),
        }
    }
}

/// Exclusive access to the value of a [`SpinLock`]; unlocks when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct SpinGuard<'a, T: ?Sized> {
    #[cfg(not(loom))]
    lock: &'a SpinLock<T>,
    // Declared before `_held`: the access ends before loom's mutex unlocks.
    value: MutPtr<T>,
    #[cfg(loom)]
    _held: loom::sync::MutexGuard<'a, ()>,
}

impl<T: ?Sized> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // Shared access straight from the pointer: no `&mut T` is created,
        // so earlier `&T`s stay valid.
        // SAFETY: the guard holds the lock, so no one else accesses the
        // value, and `&self` excludes `deref_mut` while this borrow lives.
        self.value.with(|p| unsafe { &*p })
    }
}

impl<T: ?Sized> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so no other access exists.
        unsafe { self.value.deref() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for SpinGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: pairs with the Acquire CAS in `lock`/`try_lock`.
        self.lock.locked.store(false, Ordering::Release);
    }
}
