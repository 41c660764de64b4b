//! The protocol of an [`AstMutex`]: the lock word (here), the slow paths of
//! an entry (`enter.rs`: watch, queue, park; a task's poll and its
//! cancellation), and the exits that serve the waiters (`exit.rs`). The
//! public API is in `mutex.rs`, the waiter table in `waiters.rs`, the
//! watcher slots in `watchers.rs`.

use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};
use std::time::Instant;

use sync_core::spin::SpinGuard;
use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering;
use sync_core::unwind::Panics;
use sync_core::waiter::{Token, Wakeup};
use sync_core::wake_list::WakeList;

use crate::mutex::{AstMutex, state_index};
use crate::state::AbstractState;
use crate::waiters::{Handle, Slot, Table};

mod enter;
mod exit;

/// Bits 0-5 of the lock word: the abstract state's index. While the lock is
/// held they keep the state the holder entered in.
pub(crate) const STATE_BITS: u32 = 0x3f;
/// Bit 6: the lock is held; the abstract state is "null" (paper, 2.1 step 3).
pub(crate) const LOCKED: u32 = 1 << 6;
/// Bit 7: free in the state the constructor was given, not yet written as
/// its index (a `const fn` cannot call [`AbstractState::index`]). The first
/// operation that reads it writes the index instead ([`AstMutex::resolve`]);
/// it is never set again.
pub(crate) const UNRESOLVED: u32 = 1 << 7;

/// The waiter token of a waiter woken to compete for the lock.
const TOKEN_WAKE: Token = 1;
/// The waiter token of a waiter handed the lock: `TOKEN_HANDOFF | state`.
const TOKEN_HANDOFF: Token = 1 << 8;

#[inline]
fn enterable(word: u32, mask: u64) -> bool {
    word & (LOCKED | UNRESOLVED) == 0 && (mask >> (word & STATE_BITS)) & 1 != 0
}

/// Whether `deadline` has passed. Always `false` under loom, whose models
/// must not depend on the clock: there a timeout is the nondeterministic
/// early return of a timed park.
#[inline]
fn past(deadline: Option<Instant>) -> bool {
    !cfg!(loom) && deadline.is_some_and(|d| Instant::now() >= d)
}

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// Replaces `UNRESOLVED` by the index of `initial`; returns the word.
    #[cold]
    pub(crate) fn resolve(&self) -> u32 {
        let i = state_index(self.initial);
        // Relaxed: the two words mean the same state, and nothing is
        // published; the winner of a race writes what the loser would have.
        match self
            .word
            .compare_exchange(UNRESOLVED, i, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => i,
            Err(now) => now,
        }
    }

    /// Takes the lock if the word is enterable for `mask`; returns the
    /// state entered in.
    #[inline]
    pub(crate) fn try_lock_in(&self, mask: u64) -> Option<u32> {
        let mut w = self.word.load(Ordering::Relaxed);
        loop {
            if !enterable(w, mask) {
                if w & UNRESOLVED == 0 {
                    return None;
                }
                w = self.resolve();
                continue;
            }
            // Acquire: pairs with the Release of the exit that freed the word
            // (the swap in `unlock` or the store in `release`).
            match self.word.compare_exchange_weak(
                w,
                w | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(w & STATE_BITS),
                Err(now) => w = now,
            }
        }
    }
}

/// The waiter table, locked (`AstMutex::table`). Once it has released the
/// table lock, it makes the serve that a waiter which gave up without the
/// table lock left owed (`Waiters::leave_owing`): every release of the
/// table lock looks, so a serve owed while the lock was held is made by
/// its holder, or by the waiter itself if it found the lock free. An
/// entry's enqueue leaves the look to its caller, which makes the serve
/// once its node has left the table (the serve runs task wakers, user
/// code: see `AstMutex::enqueue`).
pub(crate) struct TableGuard<'a, S: AbstractState, T: ?Sized> {
    mutex: &'a AstMutex<S, T>,
    table: ManuallyDrop<SpinGuard<'a, Table>>,
    /// Whether its release makes an owed serve; `false` for a waiter's
    /// enqueue, which makes it itself once it has left the table (see
    /// `AstMutex::serve_owed_unqueued`).
    serves_owed: bool,
}

impl<S: AbstractState, T: ?Sized> Deref for TableGuard<'_, S, T> {
    type Target = Table;
    #[inline]
    fn deref(&self) -> &Table {
        &self.table
    }
}

impl<S: AbstractState, T: ?Sized> DerefMut for TableGuard<'_, S, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Table {
        &mut self.table
    }
}

impl<S: AbstractState, T: ?Sized> Drop for TableGuard<'_, S, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.table) };
        if self.serves_owed && self.mutex.waiters.owed_after_release() {
            // The waker panics of a serve made for another waiter are not
            // this thread's operation's to resume (rule 4 of the panic
            // policy): dropping `Panics` discards them.
            let mut panics = Panics::new();
            self.mutex.serve_owed(&mut panics);
            drop(panics);
        }
    }
}

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// Takes the waiter table's lock.
    #[inline]
    pub(crate) fn table(&self) -> TableGuard<'_, S, T> {
        TableGuard {
            mutex: self,
            table: ManuallyDrop::new(self.waiters.lock()),
            serves_owed: true,
        }
    }

    /// Takes the waiter table's lock, but not past `deadline`.
    pub(crate) fn table_until(&self, deadline: Instant) -> Option<TableGuard<'_, S, T>> {
        Some(TableGuard {
            mutex: self,
            table: ManuallyDrop::new(self.waiters.lock_until(deadline)?),
            serves_owed: true,
        })
    }

    /// Makes the serve a waiter left owed (see `Waiters::leave_owing`), if
    /// the table lock is free: otherwise its holder makes it once it has
    /// released it. Wakers' panics go to `panics`. Loops, rather than
    /// recursing through a `TableGuard`, while new serves are owed each
    /// time it has released the table lock.
    #[cold]
    pub(crate) fn serve_owed(&self, panics: &mut Panics) {
        loop {
            let mut wakeups = WakeList::new();
            {
                // The raw guard: its release is followed by the look below.
                let Some(mut t) = self.waiters.try_lock() else {
                    return;
                };
                if self.waiters.take_owed() {
                    // The nodes left with it are gone (the lock's sweep). As
                    // in `abandon`: an exit whose swap follows this RMW reads
                    // the new table; one whose swap came before left the
                    // lock free, and we serve its state.
                    let w = self.publish_and_read_word(&mut t);
                    if w & (LOCKED | UNRESOLVED) == 0 {
                        self.serve(&mut t, w & STATE_BITS, false, 0, &mut wakeups);
                    }
                    self.publish(&mut t);
                }
            }
            wakeups.wake_all(panics);
            if !self.waiters.owed_after_release() {
                return;
            }
        }
    }
}

/// A waiter's node in the table, kept across its wake-ups, and the slot
/// where an exit may hand it the lock while it is woken.
#[derive(Default)]
pub(crate) struct Place {
    pub node: Option<Handle>,
    pub slot: Option<Arc<Slot>>,
}

impl Place {
    /// The state of a lock handed over through the slot, if one was: the
    /// exit removed the node, and the slot is spent.
    #[inline]
    fn take_handed(&mut self) -> Option<u32> {
        let token = self.slot.as_ref()?.token()?;
        self.node = None;
        self.slot = None;
        Some(token as u32 & STATE_BITS)
    }
}

/// What [`AstMutex::enqueue`] did.
pub(crate) enum Enqueued {
    /// The waiter is queued; a notify will come. With the wake-up of a
    /// thread woken ahead of a pending first in line, to deliver before
    /// waiting.
    Queued(Option<Wakeup>),
    /// The word admits the waiter: try to enter.
    Enterable,
    /// The lock was handed to the (woken) waiter, in this state.
    Handed(u32),
    /// The deadline passed before the table lock could be taken; the
    /// waiter, never queued, has nothing to undo.
    TimedOut,
}
