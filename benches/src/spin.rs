//! The lock-based twin of the papers' comparisons: a test-and-test-and-set
//! spin lock with exponential backoff (crossbeam-utils' `Backoff`).
//!
//! Benchmark-only: it is never offered to users, and spins without bound,
//! which is what the papers compare against.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::Backoff;

/// A TTAS spin lock around a value.
#[derive(Default)]
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to the value, so the
// value only has to be `Send`, as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock around `value`.
    pub const fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Runs `f` with the lock held.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock();
        // SAFETY: we hold the lock, so no other reference to the value
        // exists until `unlock`.
        let r = f(unsafe { &mut *self.value.get() });
        self.unlock();
        r
    }

    #[inline]
    fn lock(&self) {
        // Acquire: pairs with the Release store in `unlock`.
        while self.locked.swap(true, Ordering::Acquire) {
            let backoff = Backoff::new();
            while self.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        // Release: pairs with the Acquire swap in `lock`.
        self.locked.store(false, Ordering::Release);
    }
}
