//! The [`Table`]: the groups of waiters by entry set, their nodes in one
//! slab, and what exits read of them.

use sync_core::sync::Arc;
use sync_core::waiter::{Token, Waiter};

use std::time::{Duration, Instant};

use super::Slot;

/// The end of a list.
const NIL: u32 = u32::MAX;

/// The most woken nodes [`Table::next_to_wake`] looks past.
pub(crate) const WALK_PAST: usize = 16;

pub(crate) struct Table {
    /// The groups with at least one node, in no particular order.
    groups: Vec<Group>,
    /// Every node, live or free; its last node is live (free nodes at the
    /// end are dropped), so it is empty whenever no node is live.
    nodes: Vec<Node>,
    /// The first free node (a list linked through `next` and `prev`, so
    /// that a free node at the end of `nodes` leaves it in constant time),
    /// or `NIL`.
    free: u32,
    /// How many nodes are live.
    live: usize,
    /// Union of the entry sets of `groups`.
    pub(super) summary: u64,
    /// The summary last stored in `parked_states`.
    pub(super) published: u64,
    /// The states an exit should keep the lock for, to serve their first in
    /// line (set by the mutex before each publication).
    pub due: u64,
    /// The `due` last stored in `due_states`.
    pub(super) published_due: u64,
    /// The states whose first in line an exit would only count a pass
    /// against (set by the mutex before each publication).
    pub skip: u64,
    /// The `skip` last stored in `skip_states`.
    pub(super) published_skip: u64,
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
    /// When an exit that counted a pass against it first read the clock
    /// since it was last woken (see [`Table::pending_for`]; never under
    /// loom, where time is not modelled).
    seen_pending_at: Option<Instant>,
    /// Found woken for long (see `AstMutex::count_pass`) since it was last
    /// woken.
    overdue: bool,
    /// Where an exit hands the lock to the node while it is woken.
    slot: Option<Arc<Slot>>,
}

/// A node's name, held by its waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    pub(super) index: u32,
    ticket: u64,
}

impl Table {
    /// The slab's capacity, in nodes (the unit tests check it is freed).
    #[cfg(all(test, not(loom)))]
    pub(super) fn slab_capacity(&self) -> usize {
        self.nodes.capacity()
    }

    /// The groups' capacity (the unit tests check it follows them).
    #[cfg(all(test, not(loom)))]
    pub(super) fn groups_capacity(&self) -> usize {
        self.groups.capacity()
    }

    /// An empty table.
    pub(super) const fn new() -> Self {
        Self {
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
        }
    }

    #[inline]
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
            seen_pending_at: None,
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
            self.unlink_free(i);
            self.nodes[i as usize] = node;
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
    #[inline]
    fn node(&mut self, h: Handle) -> Option<&mut Node> {
        self.nodes
            .get_mut(h.index as usize)
            .filter(|n| n.ticket == h.ticket && n.slot.is_some())
    }

    /// Whether `h` still names a live node.
    #[inline]
    pub fn contains(&mut self, h: Handle) -> bool {
        self.node(h).is_some()
    }

    /// Whether the node `h` names is woken (live and not queued).
    #[inline]
    pub fn is_woken(&mut self, h: Handle) -> bool {
        self.node(h).is_some_and(|n| n.waiter.is_none())
    }

    /// Queues the woken node `h` again, with a new `waiter`, in its place.
    #[inline]
    pub fn requeue(&mut self, h: Handle, waiter: Arc<Waiter>) {
        let n = self.node(h).expect("requeue of a node that left");
        debug_assert!(n.waiter.is_none(), "requeue of a queued node");
        n.waiter = Some(waiter);
    }

    /// Marks the queued node `h` woken again (its waiter found the lock
    /// enterable instead of waiting); returns the waiter it held.
    #[inline]
    pub fn unqueue(&mut self, h: Handle) -> Option<Arc<Waiter>> {
        self.node(h).and_then(|n| n.waiter.take())
    }

    /// Unlinks and frees the node `h`, if it is still live; returns whether
    /// it was. Constant time, plus the number of groups when its group is
    /// emptied.
    #[inline]
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
                // The groups' room follows the distinct entry sets that
                // wait now, not the most that ever waited at once.
                let floor = self.groups.len().max(8);
                if self.groups.capacity() >= 4 * floor {
                    self.groups.shrink_to(2 * floor);
                }
            }
        }
        let n = &mut self.nodes[i as usize];
        // Neither holds user code: a queued task's waker is dropped by its
        // own cancel, and a notified one's is held by its `Wakeup`.
        n.waiter = None;
        n.slot = None;
        n.prev = NIL;
        n.next = self.free;
        if self.free != NIL {
            self.nodes[self.free as usize].prev = i;
        }
        self.free = i;
        self.live -= 1;
        if self.live == 0 {
            // Memory follows the waiters present: free the slab (the
            // groups went with their last nodes, their room above).
            self.nodes = Vec::new();
            self.free = NIL;
            return;
        }
        // The free nodes at the end go (each once: amortized constant), and
        // the slab's capacity follows its length, so that a crowd that came
        // and went after the waiters still present leaves nothing behind.
        while self.nodes.last().is_some_and(|n| n.slot.is_none()) {
            let last = (self.nodes.len() - 1) as u32;
            self.unlink_free(last);
            self.nodes.pop();
        }
        let floor = self.nodes.len().max(8);
        if self.nodes.capacity() >= 4 * floor {
            self.nodes.shrink_to(2 * floor);
        }
    }

    /// Takes free node `i` out of the free list.
    fn unlink_free(&mut self, i: u32) {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        if prev == NIL {
            self.free = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
    }

    /// Each group's entry set and its oldest node.
    #[inline]
    pub fn heads(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.groups.iter().map(|g| (g.mask, g.head))
    }

    /// The node that has waited longest among those whose entry set
    /// contains `state_bit`.
    #[inline]
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
    #[inline]
    pub fn passes(&self, i: u32) -> u32 {
        self.nodes[i as usize].passes
    }

    /// Counts `exits` more exits that served live node `i` without the
    /// lock; returns the count.
    #[inline]
    pub fn pass(&mut self, i: u32, exits: u32) -> u32 {
        let n = &mut self.nodes[i as usize];
        n.passes = n.passes.saturating_add(exits);
        n.passes
    }

    /// Notes that live node `i` has been woken for long; until it is woken
    /// again.
    #[inline]
    pub fn set_overdue(&mut self, i: u32) {
        self.nodes[i as usize].overdue = true;
    }

    /// Whether live node `i` was found woken for long since it was last
    /// woken.
    #[inline]
    pub fn is_overdue(&self, i: u32) -> bool {
        self.nodes[i as usize].overdue
    }

    /// The skips of live node `i`.
    #[inline]
    pub fn skips(&self, i: u32) -> u32 {
        self.nodes[i as usize].skips
    }

    /// Counts one more exit that left live node `i` parked for a watcher.
    #[inline]
    pub fn skip(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.skips = n.skips.saturating_add(1);
    }

    /// Whether live node `i` is queued (its waiter parked or its task
    /// waiting for a wake), not woken.
    #[inline]
    pub fn is_queued_at(&self, i: u32) -> bool {
        self.nodes[i as usize].waiter.is_some()
    }

    /// Takes live node `i`'s waiter: `Some` if it was queued (it is then
    /// woken, and pending until its waiter is back), `None` if it was woken
    /// already.
    #[inline]
    pub fn take_waiter(&mut self, i: u32) -> Option<Arc<Waiter>> {
        let n = &mut self.nodes[i as usize];
        let waiter = n.waiter.take()?;
        n.slot
            .as_ref()
            .expect("a live node has a slot")
            .mark_pending();
        // No clock read here: a wake-up is on every contended exit's path
        // (under the table lock), while the patience it starts matters only
        // to a waiter that many exits pass (see `pending_for`).
        n.seen_pending_at = None;
        n.overdue = false;
        Some(waiter)
    }

    /// For woken live node `i`: how long since this was first called after
    /// its wake-up. That first call notes the time and returns `None`, as
    /// does any call for a queued node, and every call under loom.
    #[inline]
    pub fn pending_for(&mut self, i: u32) -> Option<Duration> {
        let n = &mut self.nodes[i as usize];
        if n.waiter.is_some() || cfg!(loom) {
            return None;
        }
        match n.seen_pending_at {
            Some(at) => Some(at.elapsed()),
            None => {
                n.seen_pending_at = Some(Instant::now());
                None
            }
        }
    }

    /// Whether live node `i` is queued by a thread (not a task).
    #[inline]
    pub fn is_thread_at(&self, i: u32) -> bool {
        self.nodes[i as usize]
            .waiter
            .as_ref()
            .is_some_and(|w| w.is_thread())
    }

    /// Whether live node `i` is woken and its waiter not back yet.
    #[inline]
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
    #[inline]
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
    #[inline]
    pub fn hand_to_woken(&mut self, i: u32, token: Token) -> bool {
        let n = &self.nodes[i as usize];
        debug_assert!(n.waiter.is_none(), "hand_to_woken on a queued node");
        let handed = n.slot.as_ref().expect("a live node has a slot").hand(token);
        self.unlink(i);
        handed
    }

    /// Removes live node `i` (served, or found cancelled).
    #[inline]
    pub fn remove_at(&mut self, i: u32) {
        self.unlink(i);
    }

    /// Removes every queued node whose waiter was cancelled, and every
    /// woken node whose waiter abandoned its slot (see
    /// `Waiters::leave_later` and `Waiters::leave_owing`). Walks the slab:
    /// rare, and linear in the waiters present.
    pub(super) fn remove_cancelled(&mut self) {
        let mut i = 0;
        // `unlink` shortens the slab (empties it when the last node leaves).
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
    #[inline]
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// How many waiters have a node (queued or woken).
    #[inline]
    pub fn waiters(&self) -> usize {
        self.live
    }
}
