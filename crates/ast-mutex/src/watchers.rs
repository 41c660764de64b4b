//! Concurrency restriction: the few threads allowed to watch the lock word.
//!
//! With [`Config::watchers`](crate::Config::watchers) set to `n`, at most
//! `n` threads of each entry set (and 4 in all) *watch* the lock word at a
//! time (spin, then yield, as the configured policy says) before they park; each holds a *watcher slot* with its entry set. A
//! thread that arrives to find `n` threads of its set watching, or every
//! slot taken, parks in its queue at once.
//! An exit whose first in line for the new state is parked, while a watcher
//! that accepts that state is running, does not wake it: it counts the exit
//! against it, as a pass (see [`AstMutex`](crate::AstMutex)'s `# Fairness`),
//! and leaves the lock to the watcher. So only a few threads circulate, and
//! an exit makes no system call while they keep the lock busy.
//!
//! In [`WakeMode::Handoff`](crate::WakeMode::Handoff) every watching thread
//! (its policy spins, yields or never parks) takes a slot if one is free,
//! restriction or not (without restriction it watches either way): an exit then hands the lock to a running watcher,
//! by releasing it, rather than to a parked first in line, which would
//! leave it idle until that thread runs.
//!
//! The protocol, beside the table's:
//!
//! * A watcher claims a slot (a CAS from 0 to its mask) before it reads the
//!   word, and gives it back (a store of 0) after it entered, or
//!   before it queues (`enqueue`), or before it gives up.
//! * An exit reads the slots under the table lock, after choosing its first
//!   in line. A watcher that gave its slot back before queueing did so
//!   before taking the table lock, so an exit that finds its slot still
//!   taken served before the watcher queued, and the watcher's queueing
//!   RMW on the word then sees the state the exit left (and enters).
//! * A watcher that gives up (a timed wait past its deadline) without
//!   queueing may have been counted on by an exit: after giving its slot
//!   back, it serves the waiters of the free word's state, as an exit would
//!   (`AstMutex::abandon`, under the table lock, so after any exit that
//!   read its slot as taken; or, if the table lock stays held, the serve
//!   is left owed to the lock's holder, which makes it after releasing it).

use sync_core::sync::atomic::{AtomicU64, Ordering};

/// The most watcher slots a mutex has.
pub(crate) const MAX_WATCHERS: usize = 4;

/// The watcher slots: each 0 (free) or the entry mask of the thread that
/// holds it.
pub(crate) struct Watchers {
    slots: [AtomicU64; MAX_WATCHERS],
}

impl Watchers {
    sync_core::const_unless_loom! {
        pub fn new() -> Self {
            Self {
                slots: [
                    AtomicU64::new(0),
                    AtomicU64::new(0),
                    AtomicU64::new(0),
                    AtomicU64::new(0),
                ],
            }
        }
    }

    /// Claims a slot for a thread watching for `mask`, unless `per_set`
    /// threads with the same entry set hold one already or every slot is
    /// taken; `None` then. Two threads of one set that claim at once may
    /// both get one: the cap is approximate, never a correctness matter.
    #[inline]
    pub fn claim(&self, mask: u64, per_set: usize) -> Option<usize> {
        debug_assert_ne!(mask, 0);
        let mut same = 0;
        let mut free = None;
        for (i, slot) in self.slots.iter().enumerate() {
            // Relaxed: what orders a claim before an exit's read is the
            // lock word (the watcher reads it after claiming; see the module
            // doc): an exit that misses the claim wakes a waiter, which is
            // never wrong.
            match slot.load(Ordering::Relaxed) {
                0 => {
                    free.get_or_insert(i);
                }
                m if m == mask => same += 1,
                _ => {}
            }
        }
        if same >= per_set {
            return None;
        }
        let i = free?;
        self.slots[i]
            .compare_exchange(0, mask, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
            .then_some(i)
    }

    /// Gives slot `i` back.
    #[inline]
    pub fn give_back(&self, i: usize) {
        // Release: ordered before the table lock the watcher takes next
        // (to queue, or to serve as it gives up), which an exit that reads
        // the slot takes too.
        self.slots[i].store(0, Ordering::Release);
    }

    /// Whether a watcher accepting the state of `state_bit` holds a slot.
    #[inline]
    pub fn accept(&self, state_bit: u64) -> bool {
        // Acquire: pairs with `give_back` (through the table lock, see
        // there).
        self.slots
            .iter()
            .any(|s| s.load(Ordering::Acquire) & state_bit != 0)
    }
}
