//! Parked waiters, grouped by entry set.
//!
//! Every distinct entry set that has ever waited on a mutex gets a *group*:
//! a parking key of its own and a count of the threads parked on it. An exit
//! that names state `s` picks a group whose set contains `s` and wakes the
//! first thread of that group's queue. Its work depends on the number of
//! distinct entry sets, never on the number of waiting threads: a thousand
//! threads waiting with the same set are one group.
//!
//! Groups are boxed and never freed while the mutex lives, so a group's key
//! (the address of its box) is an address the mutex owns: no other object's
//! waiters can share it, and a stale key can never wake a stranger.
//!
//! Beside the table, [`Waiters::parked_states`] publishes the union of the
//! entry sets of groups with parked threads, so that an exit to a state no
//! parked thread accepts can release the lock without the table lock.
//!
//! The table is guarded by a [`SpinLock`]. It is always the innermost lock:
//! it is taken inside the parking lot's callbacks (under the parking lot's
//! bucket lock) and alone, never the other way round.

use sync_core::spin::{SpinGuard, SpinLock};
use sync_core::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct Waiters {
    table: SpinLock<Table>,
    /// `Table::summary`, readable without the table lock; stored under it.
    parked_states: AtomicU64,
}

pub(crate) struct Table {
    // Boxed on purpose: a group's address is its parking key and must not
    // move when the Vec grows.
    #[allow(clippy::vec_box)]
    groups: Vec<Box<Group>>,
    /// Where the next search for a group to wake starts (round robin).
    cursor: usize,
    /// Union of the entry sets of groups with parked threads.
    summary: u64,
}

struct Group {
    /// The entry set, as a mask of state bits.
    mask: u64,
    /// Threads parked on this group's key.
    queued: usize,
}

/// A group of a table: its index and its parking key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupId {
    pub index: usize,
    pub key: usize,
}

impl Waiters {
    pub fn new() -> Self {
        Self {
            table: SpinLock::new(Table {
                groups: Vec::new(),
                cursor: 0,
                summary: 0,
            }),
            parked_states: AtomicU64::new(0),
        }
    }

    /// The states some parked thread accepts: a superset while a thread is
    /// leaving, and complete for every waiter whose `validate` RMW on the
    /// lock word precedes the caller's own RMW on it (see `AstMutex::unlock`).
    pub fn parked_states(&self, order: Ordering) -> u64 {
        self.parked_states.load(order)
    }

    /// Publishes the table's summary; call under the table lock after
    /// `add` or `remove`.
    pub fn publish(&self, t: &Table) {
        // What orders this store before an exit's re-check is not this
        // pair but the lock word: `validate` does its word RMW after this
        // store, and the exit reads the summary after its own word RMW,
        // which reads from `validate`'s (see `AstMutex::unlock`). Release and
        // Acquire here only keep the summary's own history readable.
        self.parked_states.store(t.summary, Ordering::Release);
    }

    pub fn lock(&self) -> SpinGuard<'_, Table> {
        self.table.lock()
    }

    /// The group for entry set `mask`, created on first use.
    ///
    /// Nothing is allocated or freed under the table lock: threads take it
    /// inside the parking lot's callbacks, and an allocator may itself park.
    /// A new group and, when the table is full, a larger table are allocated
    /// with the lock released, then the lookup is tried again.
    pub fn group(&self, mask: u64) -> GroupId {
        let mut new_group: Option<Box<Group>> = None;
        let mut new_table: Option<Vec<Box<Group>>> = None;
        loop {
            let mut t = self.lock();
            if let Some(index) = t.groups.iter().position(|g| g.mask == mask) {
                let id = t.id(index);
                drop(t);
                return id; // unused allocations are freed after the unlock
            }
            let full = t.groups.len() == t.groups.capacity();
            let table_fits = new_table
                .as_ref()
                .is_some_and(|v| v.capacity() > t.groups.len());
            if let Some(group) = new_group.take_if(|_| !full || table_fits) {
                let old_table = full.then(|| {
                    let mut bigger = new_table.take().expect("checked above");
                    bigger.append(&mut t.groups); // fits: no allocation
                    std::mem::replace(&mut t.groups, bigger)
                });
                t.groups.push(group); // fits: no allocation
                let id = t.id(t.groups.len() - 1);
                drop(t);
                drop(old_table);
                return id;
            }
            let len = t.groups.len();
            drop(t);
            new_group.get_or_insert_with(|| Box::new(Group { mask, queued: 0 }));
            if full && !table_fits {
                new_table = Some(Vec::with_capacity((2 * len).max(4)));
            }
        }
    }
}

impl Table {
    fn id(&self, index: usize) -> GroupId {
        GroupId {
            index,
            key: &*self.groups[index] as *const Group as usize,
        }
    }

    /// Counts a thread that is about to park in `g`.
    pub fn add(&mut self, g: GroupId) {
        let group = &mut self.groups[g.index];
        group.queued += 1;
        self.summary |= group.mask;
    }

    /// Uncounts a thread that left `g`'s queue (woken or timed out).
    pub fn remove(&mut self, g: GroupId) {
        self.groups[g.index].queued -= 1;
        if self.groups[g.index].queued == 0 {
            self.summary = self
                .groups
                .iter()
                .filter(|g| g.queued > 0)
                .fold(0, |m, g| m | g.mask);
        }
    }

    /// A group with parked threads whose entry set contains `state_bit`,
    /// searched round robin so that no such group waits forever behind
    /// another.
    pub fn choose(&mut self, state_bit: u64) -> Option<GroupId> {
        let n = self.groups.len();
        (0..n)
            .map(|k| (self.cursor + k) % n)
            .find(|&i| self.groups[i].queued > 0 && self.groups[i].mask & state_bit != 0)
            .map(|index| {
                self.cursor = (index + 1) % n;
                self.id(index)
            })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn groups_are_per_entry_set_and_keys_are_stable() {
        let w = Waiters::new();
        let a = w.group(0b011);
        let b = w.group(0b110);
        assert_ne!(a.key, b.key);
        for m in 0..100 {
            w.group(1 << 20 | m); // force the Vec to reallocate
        }
        assert_eq!(w.group(0b011), a, "a group's key never moves");
    }

    #[test]
    fn choose_skips_empty_and_non_matching_groups_round_robin() {
        let w = Waiters::new();
        let a = w.group(0b011);
        let b = w.group(0b110);
        let c = w.group(0b100);
        let mut t = w.lock();
        assert_eq!(t.choose(0b010), None, "no one is parked");
        t.add(a);
        t.add(b);
        t.add(c);
        assert_eq!(t.choose(0b001), Some(a));
        // State 1 matches a and b: round robin alternates between them.
        let picks: Vec<_> = (0..4).map(|_| t.choose(0b010).unwrap()).collect();
        assert_eq!(picks, [b, a, b, a]);
        assert_eq!(t.summary, 0b111);
        t.remove(b);
        assert_eq!(t.choose(0b010), Some(a));
        t.remove(a);
        assert_eq!(t.summary, 0b100, "b's and a's states have no parked thread");
    }
}
