//! A woken waiter's [`Slot`]: where an exit hands it the lock, and whether
//! it is back from its wake-up.

use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use sync_core::waiter::Token;
#[cfg(doc)]
use sync_core::waiter::Waiter;

/// A waiter's mailbox for a lock handed to it while it is woken (not
/// queued, so not reachable through a [`Waiter`]): 0, or the handoff token.
/// One per wait; the waiter reads it while it watches the word.
///
/// Beside it, whether the waiter is *back* from its last wake-up: cleared
/// by the exit that wakes it, set by the waiter once it runs again (a
/// thread returned from its park, a task polled). A woken node that is not
/// back is *pending*: its thread may be waiting for a CPU behind other
/// runnable threads, for as long as a scheduling round. Exits read it to
/// choose what to do (see `AstMutex::serve`); any value they read is
/// correct, only slower.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// 0, a handoff token, or [`ABANDONED`].
    token: AtomicUsize,
    back: AtomicBool,
}

impl Slot {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The token handed over, if any.
    #[inline]
    pub fn token(&self) -> Option<Token> {
        // Acquire: pairs with the Release in `hand`, so the holder's critical
        // section happens before the waiter's.
        match self.token.load(Ordering::Acquire) {
            0 | ABANDONED => None,
            t => Some(t),
        }
    }

    /// Hands the lock over, unless the waiter has abandoned the slot:
    /// `false` then, and the lock is still the caller's.
    #[inline]
    pub(super) fn hand(&self, token: Token) -> bool {
        debug_assert!(token != 0 && token != ABANDONED);
        // Release: publishes the lock word store and the critical section of
        // the exit that hands the lock over (pairs with `token`, and with
        // the Acquire of a failed `abandon`).
        self.token
            .compare_exchange(0, token, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// The woken waiter gives up without the table lock: from now on no exit
    /// hands it the lock. `Err(token)` if one did first: the lock is the
    /// waiter's.
    #[inline]
    pub fn abandon(&self) -> Result<(), Token> {
        // Acquire on failure: pairs with the Release in `hand`, as `token`.
        // Relaxed on success: the table's next holder learns of it through
        // `Waiters::leave_owing`'s Release.
        self.token
            .compare_exchange(0, ABANDONED, Ordering::Relaxed, Ordering::Acquire)
            .map(drop)
    }

    #[inline]
    pub(super) fn is_abandoned(&self) -> bool {
        // Relaxed: read under the table lock after the Acquire in
        // `Waiters::sweep_slow`, which pairs with `leave_owing`.
        self.token.load(Ordering::Relaxed) == ABANDONED
    }

    /// The waiter runs again after a wake-up.
    #[inline]
    pub fn mark_back(&self) {
        // Relaxed: a hint to exits, which publishes nothing (see the type).
        self.back.store(true, Ordering::Relaxed);
    }

    /// An exit wakes the waiter: it is pending until it runs again.
    #[inline]
    pub(super) fn mark_pending(&self) {
        // Relaxed: as in `mark_back`.
        self.back.store(false, Ordering::Relaxed);
    }

    #[inline]
    pub(super) fn is_back(&self) -> bool {
        // Relaxed: as in `mark_back`.
        self.back.load(Ordering::Relaxed)
    }
}

/// [`Slot`]'s token once its waiter gave up without the table lock
/// ([`Slot::abandon`]): never a handoff token, which is a state index with
/// a flag bit.
const ABANDONED: Token = Token::MAX;
