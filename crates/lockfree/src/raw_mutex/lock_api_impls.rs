//! [`RawMutex`] as a [`lock_api::RawMutex`] (with the timed and fair
//! extensions), and lock_api's `Mutex` over it.

use std::time::{Duration, Instant};

use super::RawMutex;

// SAFETY: `lock` and `try_lock` give exclusive ownership until `unlock`
// (LOCKED is set by one CAS and cleared only by the owner or handed to one
// waiter); `unlock` may run on any thread, so the guard may be sent.
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        RawMutex::lock(self);
    }

    fn try_lock(&self) -> bool {
        RawMutex::try_lock(self)
    }

    unsafe fn unlock(&self) {
        // SAFETY: lock_api's caller holds the lock.
        unsafe { RawMutex::unlock(self) }
    }

    fn is_locked(&self) -> bool {
        RawMutex::is_locked(self)
    }
}

// SAFETY: as above; a timed lock that returns `true` holds the lock exactly
// as `lock` does.
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        RawMutex::try_lock_for(self, timeout)
    }

    fn try_lock_until(&self, deadline: Instant) -> bool {
        RawMutex::try_lock_until(self, deadline)
    }
}

// SAFETY: as above; `unlock_fair` is `unlock` with a handoff.
unsafe impl lock_api::RawMutexFair for RawMutex {
    unsafe fn unlock_fair(&self) {
        // SAFETY: lock_api's caller holds the lock.
        unsafe { RawMutex::unlock_fair(self) }
    }

    unsafe fn bump(&self) {
        // Only with a waiter queued, as parking_lot's: lock_api's default
        // hands over and queues again even when nobody waits.
        if self.has_waiters() {
            // SAFETY: lock_api's caller holds the lock, and holds it again
            // on return.
            unsafe { RawMutex::unlock_fair(self) };
            RawMutex::lock(self);
        }
    }
}

/// [`lock_api::Mutex`] over this crate's [`RawMutex`]: the familiar
/// parking_lot-style API (blocking locks, `try_lock_for`, `unlock_fair`,
/// `map`, `lock_arc` with lock_api's `arc_lock` feature) on the lock-free
/// queue. [`Mutex`](crate::Mutex) adds `lock_async`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockfree_sync::LockApiMutex;
///
/// let m = LockApiMutex::new(vec![1]);
/// m.lock().push(2);
/// assert_eq!(m.try_lock_for(Duration::from_millis(1)).unwrap().len(), 2);
/// ```
pub type LockApiMutex<T> = lock_api::Mutex<RawMutex, T>;

/// The guard of a [`LockApiMutex`].
///
/// lock_api makes it `Sync` when `T: Sync`, though `MutexGuard::mutex`
/// hands out the `&'a Mutex` to whoever shares the guard, so that another
/// thread can keep it and lock once the guard is gone, taking a `T` that is
/// `Sync` but not `Send` there. Do not share a guard of such a `T` across
/// threads. [`MutexGuard`](crate::MutexGuard) requires `T: Send + Sync`.
pub type LockApiMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;
