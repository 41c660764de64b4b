//! Waiting threads and tasks, grouped by entry set.
//!
//! Every distinct entry set with at least one waiter has a *group*: a FIFO
//! queue of [`Waiter`]s (a parked thread or a task's waker, from
//! `sync_core::waiter`), so threads and tasks wait in the same queues. An
//! exit that names state `s` wakes, among the groups whose set contains `s`,
//! the waiter that has waited longest: every waiter carries a *ticket* (its
//! arrival number), each group's queue is sorted by ticket, and the exit
//! compares the heads of the matching groups. So the waiters that accept a
//! state are served in arrival order whatever their sets, and no group is
//! passed over for ever (issue 12, bug 1: a global round-robin cursor let
//! one group take every turn of a state it shared with another).
//!
//! A group is created when a waiter of a new set arrives and freed when its
//! last waiter leaves (woken, timed out or cancelled), and a waiter that
//! gives up removes its own node: memory and the work of an exit grow with
//! the waiters present (their distinct sets), never with the history of the
//! mutex.
//!
//! Beside the table, [`Waiters::parked_states`] publishes the union of the
//! entry sets of groups with waiters, so that an exit to a state no waiter
//! accepts can release the lock without the table lock.
//!
//! The table is guarded by a [`SpinLock`] that only this crate takes, and
//! never while calling out: a task's waker is called after it is released
//! ([`Waiter::notify_later`]). A woken thread is unparked under it (a system
//! call when the thread sleeps), and a group's queue may allocate under it;
//! either can delay, not deadlock, the table.

use std::collections::VecDeque;

use sync_core::spin::{SpinGuard, SpinLock};
use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicU64, Ordering};
use sync_core::waiter::Waiter;

pub(crate) struct Waiters {
    table: SpinLock<Table>,
    /// `Table::summary`, readable without the table lock; stored under it.
    parked_states: AtomicU64,
}

pub(crate) struct Table {
    /// The groups with at least one waiter, in no particular order.
    groups: Vec<Group>,
    /// Union of the entry sets of `groups`.
    summary: u64,
    /// The summary last stored in `parked_states`.
    published: u64,
    /// The ticket of the next waiter to arrive.
    next_ticket: u64,
}

struct Group {
    /// The entry set, as a mask of state bits.
    mask: u64,
    /// Its waiters, sorted by ticket (oldest first); never empty.
    queue: VecDeque<Entry>,
}

struct Entry {
    ticket: u64,
    waiter: Arc<Waiter>,
}

impl Waiters {
    sync_core::const_unless_loom! {
        pub fn new() -> Self {
            Self {
                table: SpinLock::new(Table {
                    groups: Vec::new(),
                    summary: 0,
                    published: 0,
                    next_ticket: 0,
                }),
                parked_states: AtomicU64::new(0),
            }
        }
    }

    /// The states some waiter accepts: a superset while a waiter is
    /// leaving, and complete for every waiter whose `enqueue` RMW on the
    /// lock word precedes the caller's own RMW on it (see `AstMutex::unlock`).
    #[inline]
    pub fn parked_states(&self, order: Ordering) -> u64 {
        self.parked_states.load(order)
    }

    /// Publishes the table's summary if it changed since the last
    /// publication; call under the table lock after changing the table.
    pub fn publish(&self, t: &mut Table) {
        if t.published == t.summary {
            return;
        }
        t.published = t.summary;
        // What orders this store before an exit's re-check is not this
        // pair but the lock word: `enqueue` does its word RMW after this
        // store, and the exit reads the summary after its own word RMW,
        // which reads from `enqueue`'s (see `AstMutex::unlock`). Release and
        // Acquire here only keep the summary's own history readable.
        self.parked_states.store(t.summary, Ordering::Release);
    }

    pub fn lock(&self) -> SpinGuard<'_, Table> {
        self.table.lock()
    }
}

impl Table {
    /// A fresh ticket, for a waiter arriving now.
    pub fn ticket(&mut self) -> u64 {
        let t = self.next_ticket;
        self.next_ticket += 1;
        t
    }

    /// Queues `waiter` in the group of `mask`, in ticket order (a waiter
    /// that lost a race queues again with its first ticket, ahead of the
    /// later arrivals).
    pub fn push(&mut self, mask: u64, ticket: u64, waiter: Arc<Waiter>) {
        let entry = Entry { ticket, waiter };
        self.summary |= mask;
        match self.groups.iter_mut().find(|g| g.mask == mask) {
            Some(g) => {
                let at = g.queue.partition_point(|e| e.ticket < ticket);
                g.queue.insert(at, entry);
            }
            None => self.groups.push(Group {
                mask,
                queue: VecDeque::from([entry]),
            }),
        }
    }

    /// Removes `waiter` from the group of `mask`, if it is still queued
    /// (an exit may have taken it already). Returns whether it was.
    pub fn remove(&mut self, mask: u64, waiter: &Arc<Waiter>) -> bool {
        let Some(gi) = self.groups.iter().position(|g| g.mask == mask) else {
            return false;
        };
        let queue = &mut self.groups[gi].queue;
        let Some(at) = queue.iter().position(|e| Arc::ptr_eq(&e.waiter, waiter)) else {
            return false;
        };
        queue.remove(at);
        self.drop_if_empty(gi);
        true
    }

    /// Takes the waiter that has waited longest among those whose entry set
    /// contains `state_bit`.
    pub fn pop(&mut self, state_bit: u64) -> Option<Arc<Waiter>> {
        let gi = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.mask & state_bit != 0)
            .min_by_key(|(_, g)| g.queue.front().map_or(u64::MAX, |e| e.ticket))
            .map(|(i, _)| i)?;
        let entry = self.groups[gi].queue.pop_front();
        self.drop_if_empty(gi);
        entry.map(|e| e.waiter)
    }

    fn drop_if_empty(&mut self, gi: usize) {
        if self.groups[gi].queue.is_empty() {
            self.groups.swap_remove(gi);
            self.summary = self.groups.iter().fold(0, |m, g| m | g.mask);
        }
    }

    /// How many groups (distinct entry sets with waiters) there are.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// How many waiters are queued (cancelled ones not yet removed included).
    pub fn waiters(&self) -> usize {
        self.groups.iter().map(|g| g.queue.len()).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn w() -> Arc<Waiter> {
        Waiter::for_thread(0)
    }

    #[test]
    fn pop_serves_the_oldest_waiter_that_accepts_the_state() {
        let ws = Waiters::new();
        let mut t = ws.lock();
        let (a, ab, b) = (w(), w(), w());
        let ta = t.ticket();
        t.push(0b01, ta, a.clone());
        let tab = t.ticket();
        t.push(0b11, tab, ab.clone());
        let tb = t.ticket();
        t.push(0b10, tb, b.clone());
        assert_eq!(t.summary, 0b11);
        assert!(Arc::ptr_eq(&t.pop(0b10).unwrap(), &ab), "oldest B acceptor");
        // `ab` lost a race and queues again with its first ticket.
        t.push(0b11, tab, ab.clone());
        assert!(Arc::ptr_eq(&t.pop(0b10).unwrap(), &ab));
        assert!(
            Arc::ptr_eq(&t.pop(0b10).unwrap(), &b),
            "then the {{B}} group"
        );
        assert_eq!(t.groups(), 1, "emptied groups are freed");
        assert_eq!(t.summary, 0b01);
        assert!(t.pop(0b10).is_none());
        assert!(t.remove(0b01, &a));
        assert!(!t.remove(0b01, &a), "already gone");
        assert_eq!((t.groups(), t.waiters(), t.summary), (0, 0, 0));
    }
}
