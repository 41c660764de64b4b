//! Backpressure on waiters that withdraw faster than the dequeuer frees
//! their nodes.
//!
//! Only a queue's dequeuer (the mutex's `WAKING` holder, the semaphore's
//! deliverer) frees the node of a waiter that withdrew. Threads that keep queueing and withdrawing (tasks
//! that poll `acquire_async` once in a `select!` loop and drop it) run on
//! every core, while the dequeuer is one thread: with more such threads
//! than cores, the scheduler gives the dequeuer its share of a core, and
//! they can queue nodes faster than it frees them. Memory then grows for as
//! long as they go on, and a live waiter queued behind their nodes waits
//! for the dequeuer to work through all of them.
//!
//! So a withdrawing waiter that leaves its node to a running dequeuer
//! counts itself, and while more than [`LIMIT`] nodes withdrawn up to its
//! own are not freed yet (beyond those the dequeuer leaves on purpose: as
//! many as the live waiters its last sweep kept, see
//! [`sweep_due`](Backlog::sweep_due)), it waits for the dequeuer to catch
//! up, as tokio's dropped `Acquire` waits for its semaphore's lock. Nobody would wake it, so it
//! does not park: it backs off, then gives its core away
//! ([`Backoff`]), and it takes the dequeuer's role itself as soon as the
//! role comes free (or its holder hands it over, see [`crate::handover`]).
//! Withdrawn nodes not yet freed then stay under `LIMIT` plus those kept,
//! plus one per withdrawing thread.
//!
//! Only dropped futures wait ([`Withdrawer`]): a thread whose timed wait
//! ended withdraws once per timed park, far slower than a dequeuer frees
//! nodes, and must return near its deadline.
//!
//! The counts are exact (each withdrawal is counted once, and so is each
//! withdrawn node the dequeuer frees), so the backlog reads zero whenever
//! every withdrawn node is freed. Only the count of withdrawals orders
//! anything (it is the queue's own word for them); the count of nodes
//! freed is exact for the dequeuer's role, which alone writes it, and a
//! hint for the waiters, so it is a plain atomic even under loom: a stale
//! read only makes a waiter wait one more back-off, or one less.

use core::sync::atomic::AtomicUsize as HintUsize;

use sync_core::sync::atomic::{AtomicUsize, Ordering::*};
#[cfg(not(loom))]
use sync_core::wait::Backoff;

/// How many withdrawn nodes may wait for the dequeuer, beyond those it
/// leaves on purpose, before a withdrawing waiter waits for it: a few
/// hundred kilobytes, which a running dequeuer frees within a fraction of a
/// millisecond.
pub(crate) const LIMIT: usize = 1024;

/// Under loom, how many times a withdrawal waits at most (see
/// `let_the_dequeuer_catch_up`).
#[cfg(loom)]
const LOOM_WAITS: u32 = 2;

/// Who withdraws, which decides whether it waits for a dequeuer that is
/// behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Withdrawer {
    /// A dropped future: it may wait, since a task can queue and withdraw
    /// again at once, and so outrun the dequeuer.
    Future,
    /// A thread whose timed wait ended (or whose enqueue caught another
    /// waiter's panic): never waits. Its deadline has passed, and each of
    /// its withdrawals follows a timed park: it cannot outrun the dequeuer.
    Thread,
}

/// The withdrawals of one queue's waiters, and the withdrawn nodes its
/// dequeuer has freed.
#[derive(Debug)]
pub(crate) struct Backlog {
    /// Withdrawals so far (wrapping).
    withdrawn: AtomicUsize,
    /// Withdrawn nodes the dequeuer has freed (wrapping). Written only by
    /// the dequeuer's role.
    freed: HintUsize,
    /// The live waiters the dequeuer's last sweep kept, less the nodes it
    /// has taken from the queue's front since (the oldest, so those kept
    /// first): the kept waiters still queued, or fewer. Written only by the
    /// dequeuer's role.
    kept: HintUsize,
    /// [`LIMIT`], which a loom model may lower to reach the wait.
    #[cfg(loom)]
    limit: HintUsize,
}

impl Backlog {
    sync_core::const_unless_loom! {
        pub(crate) fn new() -> Self {
            Self {
                withdrawn: AtomicUsize::new(0),
                freed: HintUsize::new(0),
                kept: HintUsize::new(0),
                #[cfg(loom)]
                limit: HintUsize::new(LIMIT),
            }
        }
    }

    /// Counts a withdrawal; returns the ticket that
    /// [`let_the_dequeuer_catch_up`](Self::let_the_dequeuer_catch_up)
    /// waits with.
    pub(crate) fn withdraw(&self) -> usize {
        // Release: a dequeuer that reads the new count (Acquire, in
        // `withdrawals`) sees the withdrawn node as cancelled.
        self.withdrawn.fetch_add(1, Release).wrapping_add(1)
    }

    /// Withdrawals so far, for the dequeuer's own accounting (see
    /// [`sweep_due`](Self::sweep_due)).
    pub(crate) fn withdrawals(&self) -> usize {
        // Acquire: pairs with the Release of `withdraw`, so every
        // withdrawal counted shows its node as cancelled.
        self.withdrawn.load(Acquire)
    }

    /// Called by the dequeuer's role: it freed `n` withdrawn nodes.
    pub(crate) fn freed(&self, n: usize) {
        if n != 0 {
            // Relaxed: a hint (see the module's notes); only the role
            // writes it, so a load and a store count exactly.
            let freed = self.freed.load(Relaxed).wrapping_add(n);
            self.freed.store(freed, Relaxed);
        }
    }

    /// Called by the dequeuer's role, with `seen` read from
    /// [`withdrawals`](Self::withdrawals): the withdrawn nodes it has not
    /// freed yet (still queued, or half-way through their withdrawal).
    fn unfreed(&self, seen: usize) -> usize {
        // A node freed before its waiter counted the withdrawal makes the
        // difference negative for a moment: none.
        (seen.wrapping_sub(self.freed.load(Relaxed)) as isize).max(0) as usize
    }

    /// Called by the dequeuer's role, with `seen` read from
    /// [`withdrawals`](Self::withdrawals): whether to sweep the whole queue
    /// (`WaiterQueue::sweep`). It is due once the withdrawn nodes not freed
    /// are as many as the live waiters the last sweep kept and that are
    /// still queued: a sweep costs the queue's length, which as many
    /// withdrawals then pay for (O(1) each, amortized), and the queue holds
    /// about twice its live waiters at most, whatever the number of waits
    /// withdrawn.
    pub(crate) fn sweep_due(&self, seen: usize) -> bool {
        let unfreed = self.unfreed(seen);
        // Relaxed: only the role writes `kept` (see `freed`).
        unfreed != 0 && unfreed >= self.kept.load(Relaxed)
    }

    /// Called by the dequeuer's role after a sweep, with the live waiters it
    /// kept.
    pub(crate) fn swept(&self, kept: usize) {
        // Relaxed: as in `sweep_due`.
        self.kept.store(kept, Relaxed);
    }

    /// Called by the dequeuer's role: it took `n` nodes from the queue's
    /// front (live or withdrawn). The queue is FIFO, so the waiters the last
    /// sweep kept leave it first: once they have, a sweep is due at the
    /// next withdrawal, and a sweep that kept many waiters, served since,
    /// does not let as many withdrawn nodes pile up behind the next head.
    #[inline]
    pub(crate) fn popped(&self, n: usize) {
        // Relaxed: as in `sweep_due`. Only the role writes, so a load and
        // a store count exactly; the store is skipped when nothing is kept
        // (a contended lock's every dequeue comes here).
        let kept = self.kept.load(Relaxed);
        if kept != 0 {
            self.kept.store(kept.saturating_sub(n), Relaxed);
        }
    }

    /// Whether more than [`LIMIT`] withdrawn nodes, up to the one of
    /// `ticket`, beyond those kept (see [`sweep_due`](Self::sweep_due)),
    /// are not freed yet.
    fn is_behind(&self, ticket: usize) -> bool {
        // Relaxed: a hint. A dequeuer that freed a node before its waiter
        // counted the withdrawal makes the difference negative: not behind.
        let behind = ticket.wrapping_sub(self.freed.load(Relaxed)) as isize;
        let allowed = self.limit().saturating_add(self.kept.load(Relaxed));
        behind > allowed.min(isize::MAX as usize) as isize
    }

    /// Called by a withdrawing waiter that left its node (counted as
    /// `ticket`) to a running dequeuer: if it is a [`Withdrawer::Future`],
    /// while the dequeuer is behind by more than [`LIMIT`] plus the nodes
    /// it leaves on purpose (as many as the live waiters its last sweep
    /// kept, see [`sweep_due`](Self::sweep_due)), backs off and calls
    /// `take_role`, which looks
    /// for the dequeuer's role: `true` once the caller has it (handed over,
    /// or taken while free), or should go and take it. Returns `true` as
    /// soon as `take_role` does; `false` once the dequeuer has caught up.
    pub(crate) fn let_the_dequeuer_catch_up(
        &self,
        who: Withdrawer,
        ticket: usize,
        mut take_role: impl FnMut() -> bool,
    ) -> bool {
        if who == Withdrawer::Thread {
            return false;
        }
        #[cfg(not(loom))]
        let mut backoff = Backoff::new();
        #[cfg(loom)]
        let mut waits = 0;
        while self.is_behind(ticket) {
            #[cfg(loom)]
            {
                // A few waits, one yield to the model each: a load may
                // read a stale value there as many times as the model
                // likes (where hardware shows a store within nanoseconds),
                // and an unbounded wait would run out of branches.
                if waits == LOOM_WAITS {
                    return false;
                }
                waits += 1;
                sync_core::wait::give_way(None);
            }
            #[cfg(not(loom))]
            backoff.snooze();
            if take_role() {
                return true;
            }
        }
        false
    }

    /// Withdrawn nodes not freed yet, for loom models: 0 once every thread
    /// is done and no demand is left.
    #[cfg(loom)]
    pub(crate) fn loom_backlog(&self) -> usize {
        self.withdrawn
            .load(Relaxed)
            .wrapping_sub(self.freed.load(Relaxed))
    }

    /// Lowers [`LIMIT`] for a loom model, so that its withdrawals wait.
    #[cfg(loom)]
    pub(crate) fn set_loom_limit(&self, limit: usize) {
        self.limit.store(limit, Relaxed);
    }

    #[cfg(not(loom))]
    fn limit(&self) -> usize {
        LIMIT
    }

    #[cfg(loom)]
    fn limit(&self) -> usize {
        self.limit.load(Relaxed)
    }
}
