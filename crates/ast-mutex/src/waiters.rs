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
//! except that it keeps the size of the largest crowd since the table was
//! last empty.

use sync_core::spin::{SpinGuard, SpinLock};
use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use sync_core::waiter::{Token, Waiter};

use std::time::{Duration, Instant};

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
fn store_changed(atomic: &AtomicU64, published: &mut u64, now: u64, order: Ordering) {
    if *published != now {
        *published = now;
        atomic.store(now, order);
    }
}

/// The end of a list.
const NIL: u32 = u32::MAX;

/// The most woken nodes [`Table::next_to_wake`] looks past.
pub(crate) const WALK_PAST: usize = 16;

pub(crate) struct Table {
    /// The groups with at least one node, in no particular order.
    groups: Vec<Group>,
    /// Every node, live or free; empty whenever no node is live.
    nodes: Vec<Node>,
    /// The first free node (linked through `next`), or `NIL`.
    free: u32,
    /// How many nodes are live.
    live: usize,
    /// Union of the entry sets of `groups`.
    summary: u64,
    /// The summary last stored in `parked_states`.
    published: u64,
    /// The states an exit should keep the lock for, to serve their first in
    /// line (set by the mutex before each publication).
    pub due: u64,
    /// The `due` last stored in `due_states`.
    published_due: u64,
    /// The states whose first in line an exit would only count a pass
    /// against (set by the mutex before each publication).
    pub skip: u64,
    /// The `skip` last stored in `skip_states`.
    published_skip: u64,
    /// The ticket of the next waiter to arrive.
    next_ticket: u64,
}

struct Group {
    /// The entry set, as a mask of state bits.
    mask: u64,
    /// The oldest and the newest node; never `NIL` (a group is not empty).
    head: u32,
    tail: u32,
}

struct Node {
    /// The waiter's arrival number: unique over the table's life, so that
    /// a handle to a removed node never names the node's next life.
    ticket: u64,
    mask: u64,
    prev: u32,
    next: u32,
    /// How many exits served this node without giving it the lock (woken to
    /// compete, or passed while it was woken).
    passes: u32,
    /// How many exits left this node parked for a running thread: a
    /// watcher that accepts their state (concurrency restriction, Handoff
    /// mode), or a thread that took the lock before the exit served it.
    skips: u32,
    /// `Some` while queued; `None` while woken (and while free).
    waiter: Option<Arc<Waiter>>,
    /// When an exit last woke it (not read under loom, where time is not
    /// modelled).
    woken_at: Option<Instant>,
    /// Found woken for long (see `AstMutex::count_pass`) since it was last
    /// woken.
    overdue: bool,
    /// Where an exit hands the lock to the node while it is woken.
    slot: Option<Arc<Slot>>,
}

/// A node's name, held by its waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    index: u32,
    ticket: u64,
}

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
    fn hand(&self, token: Token) -> bool {
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
    pub fn abandon(&self) -> Result<(), Token> {
        // Acquire on failure: pairs with the Release in `hand`, as `token`.
        // Relaxed on success: the table's next holder learns of it through
        // `Waiters::leave_owing`'s Release.
        self.token
            .compare_exchange(0, ABANDONED, Ordering::Relaxed, Ordering::Acquire)
            .map(drop)
    }

    fn is_abandoned(&self) -> bool {
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

    fn is_back(&self) -> bool {
        // Relaxed: as in `mark_back`.
        self.back.load(Ordering::Relaxed)
    }
}

/// [`Slot`]'s token once its waiter gave up without the table lock
/// ([`Slot::abandon`]): never a handoff token, which is a state index with
/// a flag bit.
const ABANDONED: Token = Token::MAX;

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
                table: SpinLock::new(Table {
                    groups: Vec::new(),
                    nodes: Vec::new(),
                    free: NIL,
                    live: 0,
                    summary: 0,
                    published: 0,
                    due: 0,
                    published_due: 0,
                    skip: 0,
                    published_skip: 0,
                    next_ticket: 0,
                }),
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

impl Table {
    fn group_index(&self, mask: u64) -> Option<usize> {
        self.groups.iter().position(|g| g.mask == mask)
    }

    /// Appends a new queued node for `waiter` to the group of `mask`, with
    /// a fresh ticket.
    pub fn insert(&mut self, mask: u64, slot: Arc<Slot>, waiter: Arc<Waiter>) -> Handle {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let node = Node {
            ticket,
            mask,
            prev: NIL,
            next: NIL,
            passes: 0,
            skips: 0,
            waiter: Some(waiter),
            woken_at: None,
            overdue: false,
            slot: Some(slot),
        };
        let index = if self.free == NIL {
            let i = u32::try_from(self.nodes.len()).expect("more than 2^32 waiters");
            assert!(i != NIL, "more than 2^32 - 1 waiters");
            self.nodes.push(node);
            i
        } else {
            let i = self.free;
            let n = &mut self.nodes[i as usize];
            self.free = n.next;
            *n = node;
            i
        };
        self.live += 1;
        match self.group_index(mask) {
            Some(gi) => {
                let tail = self.groups[gi].tail;
                self.nodes[tail as usize].next = index;
                self.nodes[index as usize].prev = tail;
                self.groups[gi].tail = index;
            }
            None => {
                self.summary |= mask;
                self.groups.push(Group {
                    mask,
                    head: index,
                    tail: index,
                });
            }
        }
        Handle { index, ticket }
    }

    /// The live node `h` names, or `None` if it was removed meanwhile.
    fn node(&mut self, h: Handle) -> Option<&mut Node> {
        self.nodes
            .get_mut(h.index as usize)
            .filter(|n| n.ticket == h.ticket && n.slot.is_some())
    }

    /// Whether `h` still names a live node.
    pub fn contains(&mut self, h: Handle) -> bool {
        self.node(h).is_some()
    }

    /// Whether the node `h` names is woken (live and not queued).
    pub fn is_woken(&mut self, h: Handle) -> bool {
        self.node(h).is_some_and(|n| n.waiter.is_none())
    }

    /// Queues the woken node `h` again, with a new `waiter`, in its place.
    pub fn requeue(&mut self, h: Handle, waiter: Arc<Waiter>) {
        let n = self.node(h).expect("requeue of a node that left");
        debug_assert!(n.waiter.is_none(), "requeue of a queued node");
        n.waiter = Some(waiter);
    }

    /// Marks the queued node `h` woken again (its waiter found the lock
    /// enterable instead of waiting); returns the waiter it held.
    pub fn unqueue(&mut self, h: Handle) -> Option<Arc<Waiter>> {
        self.node(h).and_then(|n| n.waiter.take())
    }

    /// Unlinks and frees the node `h`, if it is still live; returns whether
    /// it was. Constant time, plus the number of groups when its group is
    /// emptied.
    pub fn remove(&mut self, h: Handle) -> bool {
        if !self.contains(h) {
            return false;
        }
        self.unlink(h.index);
        true
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next, mask) = {
            let n = &mut self.nodes[i as usize];
            (n.prev, n.next, n.mask)
        };
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        if prev == NIL || next == NIL {
            let gi = self.group_index(mask).expect("a live node's group");
            let g = &mut self.groups[gi];
            if prev == NIL {
                g.head = next;
            }
            if next == NIL {
                g.tail = prev;
            }
            if g.head == NIL {
                self.groups.swap_remove(gi);
                self.summary = self.groups.iter().fold(0, |m, g| m | g.mask);
            }
        }
        let n = &mut self.nodes[i as usize];
        // Neither holds user code: a queued task's waker is dropped by its
        // own cancel, and a notified one's is held by its `Wakeup`.
        n.waiter = None;
        n.slot = None;
        n.next = self.free;
        self.free = i;
        self.live -= 1;
        if self.live == 0 {
            // Memory follows the waiters present: free the slab.
            self.nodes = Vec::new();
            self.free = NIL;
        }
    }

    /// Each group's entry set and its oldest node.
    pub fn heads(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.groups.iter().map(|g| (g.mask, g.head))
    }

    /// The node that has waited longest among those whose entry set
    /// contains `state_bit`.
    pub fn oldest(&self, state_bit: u64) -> Option<u32> {
        self.groups
            .iter()
            .filter(|g| g.mask & state_bit != 0)
            .map(|g| g.head)
            .min_by_key(|&i| self.nodes[i as usize].ticket)
    }

    /// Every node whose entry set contains `state_bit` (for a broadcast:
    /// linear in them, as its wake-ups are).
    pub fn all(&self, state_bit: u64) -> Vec<u32> {
        let mut v = Vec::new();
        for g in self.groups.iter().filter(|g| g.mask & state_bit != 0) {
            let mut i = g.head;
            while i != NIL {
                v.push(i);
                i = self.nodes[i as usize].next;
            }
        }
        v
    }

    /// The passes of live node `i`.
    pub fn passes(&self, i: u32) -> u32 {
        self.nodes[i as usize].passes
    }

    /// Counts `exits` more exits that served live node `i` without the
    /// lock; returns the count.
    pub fn pass(&mut self, i: u32, exits: u32) -> u32 {
        let n = &mut self.nodes[i as usize];
        n.passes = n.passes.saturating_add(exits);
        n.passes
    }

    /// Notes that live node `i` has been woken for long; until it is woken
    /// again.
    pub fn set_overdue(&mut self, i: u32) {
        self.nodes[i as usize].overdue = true;
    }

    /// Whether live node `i` was found woken for long since it was last
    /// woken.
    pub fn is_overdue(&self, i: u32) -> bool {
        self.nodes[i as usize].overdue
    }

    /// The skips of live node `i`.
    pub fn skips(&self, i: u32) -> u32 {
        self.nodes[i as usize].skips
    }

    /// Counts one more exit that left live node `i` parked for a watcher.
    pub fn skip(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.skips = n.skips.saturating_add(1);
    }

    /// Whether live node `i` is queued (its waiter parked or its task
    /// waiting for a wake), not woken.
    pub fn is_queued_at(&self, i: u32) -> bool {
        self.nodes[i as usize].waiter.is_some()
    }

    /// Takes live node `i`'s waiter: `Some` if it was queued (it is then
    /// woken, and pending until its waiter is back), `None` if it was woken
    /// already.
    pub fn take_waiter(&mut self, i: u32) -> Option<Arc<Waiter>> {
        let n = &mut self.nodes[i as usize];
        let waiter = n.waiter.take()?;
        n.slot
            .as_ref()
            .expect("a live node has a slot")
            .back
            .store(false, Ordering::Relaxed);
        n.woken_at = (!cfg!(loom)).then(Instant::now);
        n.overdue = false;
        Some(waiter)
    }

    /// How long live node `i` has been woken, if it is and that is known
    /// (`None` under loom).
    pub fn woken_for(&self, i: u32) -> Option<Duration> {
        let n = &self.nodes[i as usize];
        n.waiter.is_none().then_some(n.woken_at?.elapsed())
    }

    /// Whether live node `i` is queued by a thread (not a task).
    pub fn is_thread_at(&self, i: u32) -> bool {
        self.nodes[i as usize]
            .waiter
            .as_ref()
            .is_some_and(|w| w.is_thread())
    }

    /// Whether live node `i` is woken and its waiter not back yet.
    pub fn is_pending_at(&self, i: u32) -> bool {
        let n = &self.nodes[i as usize];
        n.waiter.is_none() && !n.slot.as_ref().expect("a live node has a slot").is_back()
    }

    /// The longest-waiting queued node whose entry set contains
    /// `state_bit`, unless `pending` pending nodes (woken to compete and not
    /// back yet) of those sets come before the first queued node of their
    /// group, or more than [`WALK_PAST`] woken nodes do: `None` then. Walks
    /// only the woken nodes at the heads of the matching groups, and at
    /// most `WALK_PAST` of them.
    pub fn next_to_wake(&self, state_bit: u64, pending: usize) -> Option<u32> {
        let mut first: Option<u32> = None;
        let (mut ahead, mut walked) = (0, 0);
        for g in self.groups.iter().filter(|g| g.mask & state_bit != 0) {
            let mut i = g.head;
            while i != NIL {
                let n = &self.nodes[i as usize];
                if n.waiter.is_some() {
                    if first.is_none_or(|f| self.nodes[f as usize].ticket > n.ticket) {
                        first = Some(i);
                    }
                    break;
                }
                ahead += usize::from(self.is_pending_at(i));
                walked += 1;
                if ahead >= pending || walked > WALK_PAST {
                    return None;
                }
                i = n.next;
            }
        }
        first
    }

    /// Hands the lock to live woken node `i` through its slot, and removes
    /// it: its waiter finds the token and owns the lock. `false` if the
    /// waiter had abandoned the slot (it gave up): the lock is still the
    /// caller's.
    pub fn hand_to_woken(&mut self, i: u32, token: Token) -> bool {
        let n = &self.nodes[i as usize];
        debug_assert!(n.waiter.is_none(), "hand_to_woken on a queued node");
        let handed = n.slot.as_ref().expect("a live node has a slot").hand(token);
        self.unlink(i);
        handed
    }

    /// Removes live node `i` (served, or found cancelled).
    pub fn remove_at(&mut self, i: u32) {
        self.unlink(i);
    }

    /// Removes every queued node whose waiter was cancelled, and every
    /// woken node whose waiter abandoned its slot (see
    /// `Waiters::leave_later` and `Waiters::leave_owing`). Walks the slab:
    /// rare, and linear in the waiters present.
    fn remove_cancelled(&mut self) {
        let mut i = 0;
        // `unlink` empties the slab when the last node leaves.
        while i < self.nodes.len() {
            let n = &self.nodes[i];
            let left = match (&n.waiter, &n.slot) {
                (Some(w), Some(_)) => w.is_cancelled(),
                (None, Some(slot)) => slot.is_abandoned(),
                (_, None) => false,
            };
            if left {
                self.unlink(i as u32);
            }
            i += 1;
        }
    }

    /// How many groups (distinct entry sets with waiters) there are.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// How many waiters have a node (queued or woken).
    pub fn waiters(&self) -> usize {
        self.live
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn w() -> Arc<Waiter> {
        Waiter::for_thread(0)
    }

    #[test]
    fn oldest_serves_arrival_order_and_woken_nodes_keep_their_place() {
        let ws = Waiters::new();
        let mut t = ws.lock();
        let a = t.insert(0b01, Slot::new(), w());
        let ab = t.insert(0b11, Slot::new(), w());
        let b = t.insert(0b10, Slot::new(), w());
        assert_eq!(t.summary, 0b11);
        assert_eq!(t.oldest(0b10), Some(ab.index), "oldest B acceptor");
        // Woken: still the oldest, still counted.
        assert!(t.take_waiter(ab.index).is_some());
        assert!(t.is_woken(ab));
        t.pass(ab.index, 1);
        assert_eq!((t.oldest(0b10), t.passes(ab.index)), (Some(ab.index), 1));
        t.requeue(ab, w());
        assert!(!t.is_woken(ab));
        assert!(t.remove(ab));
        assert!(!t.remove(ab), "a stale handle removes nothing");
        assert_eq!(t.oldest(0b10), Some(b.index), "then the {{B}} group");
        // A new node may reuse the freed one: the old handle stays stale.
        let c = t.insert(0b10, Slot::new(), w());
        assert!(!t.contains(ab) && t.contains(c));
        assert_eq!(t.all(0b10), [b.index, c.index]);
        assert!(t.remove(b));
        assert!(t.remove(c));
        assert_eq!(t.groups(), 1, "emptied groups are freed");
        assert_eq!(t.summary, 0b01);
        assert_eq!(t.oldest(0b10), None);
        assert!(t.remove(a));
        assert_eq!((t.groups(), t.waiters(), t.summary), (0, 0, 0));
        assert_eq!(
            t.nodes.capacity(),
            0,
            "the slab is freed with the last node"
        );
    }

    #[test]
    fn nodes_left_by_cancelled_waiters_go_at_the_next_lock() {
        let ws = Waiters::new();
        let waiters: Vec<_> = (0..5).map(|_| w()).collect();
        let hs: Vec<_> = {
            let mut t = ws.lock();
            // Four nodes for state bit 1, the last one for bit 2.
            (0..5)
                .map(|i| {
                    t.insert(
                        if i < 4 { 1 } else { 2 },
                        Slot::new(),
                        Arc::clone(&waiters[i]),
                    )
                })
                .collect()
        };
        // Two waiters of the first group cancel and leave their nodes; a
        // third is cancelled and not yet gone: the sweep takes it too.
        for i in [0, 2, 3] {
            waiters[i].cancel().expect("not notified");
        }
        ws.leave_later();
        ws.leave_later();
        let mut t = ws.lock();
        assert_eq!(t.all(1), [hs[1].index]);
        assert_eq!(t.all(2), [hs[4].index]);
        assert!(![0, 2, 3].iter().any(|&i| t.contains(hs[i])));
        assert_eq!(t.waiters(), 2);
        drop(t);
        // The last nodes leave the same way: the slab empties.
        for i in [1, 4] {
            waiters[i].cancel().expect("not notified");
            ws.leave_later();
        }
        assert_eq!(ws.lock().waiters(), 0);
    }

    /// A woken waiter that gave up without the table lock: an exit's
    /// handoff to its slot fails (the lock stays the exit's), a handoff
    /// made before the give-up is the waiter's, and the node goes at the
    /// next lock with what it owed taken once.
    #[test]
    fn a_woken_node_whose_slot_was_abandoned_is_never_handed_the_lock() {
        let ws = Waiters::new();
        let (slot_a, slot_b) = (Slot::new(), Slot::new());
        let (a, b) = {
            let mut t = ws.lock();
            let a = t.insert(1, Arc::clone(&slot_a), w());
            let b = t.insert(1, Arc::clone(&slot_b), w());
            assert!(t.take_waiter(a.index).is_some() && t.take_waiter(b.index).is_some());
            (a, b)
        };
        // `a` gives up first; an exit then tries to hand it the lock.
        assert_eq!(slot_a.abandon(), Ok(()));
        assert_eq!(slot_a.token(), None);
        assert!(
            !ws.lock().hand_to_woken(a.index, 0x101),
            "handed to a waiter gone"
        );
        // An exit hands `b` the lock before `b` gives up: it is `b`'s.
        assert!(ws.lock().hand_to_woken(b.index, 0x102));
        assert_eq!(slot_b.abandon(), Err(0x102));
        assert_eq!(slot_b.token(), Some(0x102));
        assert_eq!(
            ws.lock().waiters(),
            0,
            "both nodes were removed by the exits"
        );
        // A node abandoned while no exit reaches it goes at the next lock.
        let slot_c = Slot::new();
        let c = {
            let mut t = ws.lock();
            let c = t.insert(1, Arc::clone(&slot_c), w());
            assert!(t.take_waiter(c.index).is_some());
            c
        };
        assert_eq!(slot_c.abandon(), Ok(()));
        ws.leave_owing(true);
        assert!(ws.owed_after_release());
        let mut t = ws.lock();
        assert!(!t.contains(c));
        assert!(ws.take_owed(), "the serve it owed, taken once");
        assert!(!ws.take_owed());
        drop(t);
        assert!(!ws.owed_after_release());
    }

    /// A waiter whose node an exit (or a sweep) removed still holds its
    /// handle; once the slab was freed and a new waiter took the same
    /// index, that handle must not name the new node. (Found by an
    /// independent review: the late `remove` unlinked the new waiter's node,
    /// which then slept for ever with the lock free.)
    #[test]
    fn a_stale_handle_does_not_name_a_node_after_the_slab_was_freed() {
        let ws = Waiters::new();
        let mut t = ws.lock();
        let old = t.insert(1, Slot::new(), w());
        let i = t.oldest(1).expect("queued");
        t.remove_at(i);
        assert_eq!(t.waiters(), 0, "the slab is freed");
        let new = t.insert(1, Slot::new(), w());
        assert_eq!(t.oldest(1), Some(i), "the same index again");
        assert!(!t.contains(old));
        assert!(!t.remove(old), "a stale handle removed a live node");
        assert!(t.contains(new));
        assert_eq!(t.waiters(), 1);
    }

    #[test]
    fn removal_from_the_middle_keeps_the_list() {
        let ws = Waiters::new();
        let mut t = ws.lock();
        let hs: Vec<_> = (0..5).map(|_| t.insert(1, Slot::new(), w())).collect();
        for i in [2, 4, 0] {
            assert!(t.remove(hs[i]));
        }
        assert_eq!(t.all(1), [hs[1].index, hs[3].index]);
        assert_eq!(t.oldest(1), Some(hs[1].index));
        let h = t.insert(1, Slot::new(), w());
        assert_eq!(t.all(1), [hs[1].index, hs[3].index, h.index]);
        assert_eq!(t.waiters(), 3);
    }
}
