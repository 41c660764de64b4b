//! Waiting threads and tasks, grouped by entry set.
//!
//! Every distinct entry set with at least one waiter has a *group*: a FIFO
//! list of *nodes*, one per waiting thread or task. A node lives from the
//! waiter's first wait until it enters or gives up, and is either *queued*
//! (it holds a [`Waiter`] from `sync_core::waiter`: a parked thread or a
//! task's waker, so threads and tasks wait in the same lists) or *woken*
//! (woken to compete for the lock, and not queued again yet: running, or
//! waiting for a CPU or for its executor; *pending* until its waiter is
//! back, see [`Slot`]). A woken node keeps its place, so an exit that comes
//! while its waiter cannot run yet still finds it, counts the exit against
//! it, and can hand it the lock through its [`Slot`].
//!
//! An exit that names state `s` serves, among the groups whose set contains
//! `s`, the node that has waited longest: every node carries a *ticket* (its
//! arrival number), each group's list is in ticket order (nodes are only
//! ever appended), and the exit compares the heads of the matching groups.
//! So the waiters that accept a state are served in arrival order whatever
//! their sets, and no group is passed over for ever.
//!
//! Nodes live in one slab and are named by a [`Handle`] (index and
//! ticket, which no other node of the table ever has, even after the slab
//! was freed): a waiter that gives up unlinks its own node in constant
//! time, wherever it is in its group, and a handle whose node an exit has
//! already removed is recognised as stale. A group is created when a waiter
//! of a new set arrives and freed when its last node leaves; the slab is
//! freed when the last node leaves. Memory and the work of an exit grow with
//! the waiters present (their distinct sets), never with the history of the
//! mutex, and nothing done under the table lock walks a group, but for a
//! parking waiter's look past at most [`WALK_PAST`] woken nodes at the
//! heads of the groups of one state ([`Table::next_to_wake`]). A cancelled
//! waiter that finds the table lock held for long (its holder preempted)
//! leaves its node to the next holder, which removes every such node
//! ([`Waiters::leave_later`]): at most one per waiter that queued while
//! the lock was held.
//!
//! Beside the table, [`Waiters::parked_states`] publishes the union of the
//! entry sets of groups with nodes, so that an exit to a state no waiter
//! accepts can release the lock without the table lock, and
//! [`Waiters::due_states`] the states whose first in line an exit should
//! keep the lock for, and [`Waiters::skip_states`] those whose first in
//! line an exit would only count a pass against (see `AstMutex::unlock`).
//!
//! The table is guarded by a [`SpinLock`] that only this crate takes, and
//! never while calling out: a task's waker, and a thread's unpark (a system
//! call when the thread sleeps), run after it is released
//! ([`Waiter::notify_deferred`]). The slab may allocate under it, which can
//! delay, not deadlock, the table. Its memory follows the waiters present,
//! except that the slab keeps its nodes up to the highest one in use: a
//! crowd that left is kept only while a waiter that took a node above it
//! stays.

mod slot;
mod table;
#[cfg(all(test, not(loom)))]
mod tests;

use sync_core::spin::{SpinGuard, SpinLock};
use sync_core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};

use std::time::Instant;

pub(crate) use slot::Slot;
pub(crate) use table::{Handle, Table};
#[cfg(doc)]
use {sync_core::waiter::Waiter, table::WALK_PAST};

pub(crate) struct Waiters {
    table: SpinLock<Table>,
    /// `Table::summary`, readable without the table lock; stored under it.
    parked_states: AtomicU64,
    /// `Table::due`, readable without the table lock; stored under it.
    due_states: AtomicU64,
    /// `Table::skip`, readable without the table lock; stored under it,
    /// and cleared (for its states) by a woken waiter that runs again.
    skip_states: AtomicU64,
    /// Per state: exits that skipped the table because of `skip_states`,
    /// modulo 256 (a multiple of `SERVE_EVERY`). Per state, so that the
    /// exits that take the table lock to count them count each state's:
    /// with one count for all, exits alternating between two skip states
    /// always reached the count on the same state, and the other state's
    /// first in line was never counted as passed.
    skipped_exits: [AtomicU8; 64],
    /// Nodes left in the table by cancelled waiters that found the table
    /// lock held too long to remove them ([`leave_later`](Self::leave_later));
    /// the next holder removes them.
    stale: AtomicUsize,
    /// A waiter that gave up without the table lock left a serve of the
    /// free lock's state owed ([`leave_owing`](Self::leave_owing)): the
    /// table lock's holder makes it after releasing it.
    owed: AtomicBool,
}

/// Stores `now` in `atomic` with `order` unless it is what was last stored
/// (`published`, kept under the table lock), and notes it there.
#[inline]
fn store_changed(atomic: &AtomicU64, published: &mut u64, now: u64, order: Ordering) {
    if *published != now {
        *published = now;
        atomic.store(now, order);
    }
}

/// The per-state skip counts, all 0.
#[cfg(not(loom))]
const fn skip_counts() -> [AtomicU8; 64] {
    [const { AtomicU8::new(0) }; 64]
}

/// The per-state skip counts, all 0 (loom's atomics are not `const`).
#[cfg(loom)]
fn skip_counts() -> [AtomicU8; 64] {
    core::array::from_fn(|_| AtomicU8::new(0))
}

impl Waiters {
    sync_core::const_unless_loom! {
        pub fn new() -> Self {
            Self {
                table: SpinLock::new(Table::new()),
                parked_states: AtomicU64::new(0),
                due_states: AtomicU64::new(0),
                skip_states: AtomicU64::new(0),
                skipped_exits: skip_counts(),
                stale: AtomicUsize::new(0),
                owed: AtomicBool::new(false),
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

    /// The states whose first in line an exit should keep the lock for
    /// (hand it the lock, or decide not to under the table lock) rather
    /// than free the lock first: a hint, as stale as the last publication.
    #[inline]
    pub fn due_states(&self, order: Ordering) -> u64 {
        self.due_states.load(order)
    }

    /// The states whose first in line is woken, has not run since, and is
    /// not due a handoff, so that an exit to them would only count a pass
    /// against it: as of the last publication, less the states of waiters
    /// that ran since ([`unskip`](Self::unskip)). Read after the exit's RMW
    /// on the lock word, as `parked_states` is (see `AstMutex::unlock`).
    #[inline]
    pub fn skip_states(&self, order: Ordering) -> u64 {
        self.skip_states.load(order)
    }

    /// A woken waiter of `mask` runs again: exits to its states serve it.
    #[inline]
    pub fn unskip(&self, mask: u64) {
        if self.skip_states.load(Ordering::Relaxed) & mask != 0 {
            // Relaxed: a hint, as `Slot::mark_back`. A publication computed
            // before the waiter ran may set the states again; exits then
            // skip it until the next one, while it watches the word itself.
            self.skip_states.fetch_and(!mask, Ordering::Relaxed);
        }
    }

    /// Counts an exit to `state` that found it in `skip_states`; returns
    /// the count of such exits to `state` before it, modulo 256.
    #[inline]
    pub fn skip_exit(&self, state: u32) -> u32 {
        // Relaxed: a counter that orders nothing.
        u32::from(self.skipped_exits[state as usize].fetch_add(1, Ordering::Relaxed))
    }

    /// Publishes the table's summary and its due and skip states if they
    /// changed since the last publication; call under the table lock after
    /// changing the table.
    #[inline]
    pub fn publish(&self, t: &mut Table) {
        // Release, and before the caller's RMW on the lock word (if it
        // makes one): see `AstMutex::unlock`.
        store_changed(
            &self.skip_states,
            &mut t.published_skip,
            t.skip,
            Ordering::Release,
        );
        // Relaxed: a hint; an exit that reads a stale value frees the lock
        // first and serves after (see `AstMutex::unlock`).
        store_changed(
            &self.due_states,
            &mut t.published_due,
            t.due,
            Ordering::Relaxed,
        );
        // What orders this store before an exit's re-check is not this pair
        // but the lock word: `enqueue` does its word RMW after this store,
        // and the exit reads the summary after its own word RMW, which
        // reads from `enqueue`'s (see `AstMutex::unlock`). Release and
        // Acquire here only keep the summary's own history readable.
        store_changed(
            &self.parked_states,
            &mut t.published,
            t.summary,
            Ordering::Release,
        );
    }

    /// Takes the table lock, and first removes the nodes that cancelled
    /// waiters left to it ([`leave_later`](Self::leave_later)); the caller
    /// publishes after changing the table, as always.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, Table> {
        let mut t = self.table.lock();
        self.sweep(&mut t);
        t
    }

    /// [`lock`](Self::lock), but not past `deadline` (see
    /// [`SpinLock::lock_until`]): `None` if the table lock is still held
    /// then, by a holder the scheduler keeps from running.
    pub fn lock_until(&self, deadline: Instant) -> Option<SpinGuard<'_, Table>> {
        let mut t = self.table.lock_until(deadline)?;
        self.sweep(&mut t);
        Some(t)
    }

    /// [`lock`](Self::lock) if the table lock is free.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, Table>> {
        let mut t = self.table.try_lock()?;
        self.sweep(&mut t);
        Some(t)
    }

    /// A waiter that gives up while the table lock is held (its holder
    /// preempted) leaves without it, owing a serve of the free lock's state
    /// (see `AstMutex::abandon`); with `node`, it also leaves its woken
    /// node, whose slot it has abandoned, for the next holder to remove.
    /// The caller then tries the table lock once: either it takes it, or
    /// the holder that kept it from it finds `owed` once it has released
    /// the table lock ([`owed_after_release`](Self::owed_after_release)).
    pub fn leave_owing(&self, node: bool) {
        if node {
            // Release: see `leave_later` (the node's slot is abandoned).
            self.stale.fetch_add(1, Ordering::Release);
        }
        // Release: pairs with the Acquire of `take_owed`, so that the serve
        // sees what the waiter did before (its watcher slot given back).
        self.owed.store(true, Ordering::Release);
        // SeqCst: between this store and the caller's look at the table
        // lock; pairs with the fence in `owed_after_release`, between the
        // holder's release of the table lock and its look at `owed`. Of the
        // two looks, at least one sees the other side's write.
        fence(Ordering::SeqCst);
    }

    /// After releasing the table lock: whether a waiter left a serve owed
    /// (see [`leave_owing`](Self::leave_owing)).
    #[inline]
    pub fn owed_after_release(&self) -> bool {
        // SeqCst: pairs with the fence in `leave_owing`.
        fence(Ordering::SeqCst);
        // Relaxed: `take_owed`, under the table lock, is what synchronizes.
        self.owed.load(Ordering::Relaxed)
    }

    /// Under the table lock: takes the owed serve, if one is owed.
    #[inline]
    pub fn take_owed(&self) -> bool {
        // Acquire: pairs with the Release store in `leave_owing`.
        self.owed.load(Ordering::Relaxed) && self.owed.swap(false, Ordering::Acquire)
    }

    /// A waiter whose [`Waiter`] it has cancelled leaves its queued node for
    /// the next holder of the table lock to remove. The node is inert
    /// meanwhile: nobody can notify a cancelled waiter, and an exit that
    /// reaches it removes it and serves the next one, as it does for a
    /// waiter cancelled while it was being served.
    pub fn leave_later(&self) {
        // Release: pairs with the Acquire swap in `sweep_slow`, which then
        // sees the cancellation (sequenced before this) of every waiter
        // counted here.
        self.stale.fetch_add(1, Ordering::Release);
    }

    #[inline]
    fn sweep(&self, t: &mut Table) {
        // Relaxed: a look; a count missed here is seen by the next holder.
        if self.stale.load(Ordering::Relaxed) != 0 {
            self.sweep_slow(t);
        }
    }

    #[cold]
    fn sweep_slow(&self, t: &mut Table) {
        // Acquire: see `leave_later`.
        if self.stale.swap(0, Ordering::Acquire) != 0 {
            t.remove_cancelled();
        }
    }
}
