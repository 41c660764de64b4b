//! [`SweepCount`]: when to sweep a [`WaiterQueue`] whose waiters may
//! withdraw (the monitor's producers waiting for space, a task's waiters
//! under program order).

use sync_core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use sync_core::waiter::{Swept, WaiterQueue};

/// The fewest withdrawn waiters that make a sweep due. Under loom, one:
/// every withdrawal makes it due, so that the models see sweeps race the
/// pushes, withdrawals and wake-ups.
const SWEEP_MIN: u32 = if cfg!(loom) { 1 } else { 32 };

/// How many withdrawn waiters a [`WaiterQueue`] holds, and how many live
/// ones its last sweep kept. A sweep is due once the first are at least as
/// many as the second (and at least 32): the queue then holds about twice
/// its live waiters, whatever the number of waits withdrawn, and a sweep's
/// cost (the queue's length) is paid by as many withdrawals.
///
/// The count of withdrawn waiters is exact, never reset: each withdrawal
/// adds one ([`withdrew`](Self::withdrew)), and each withdrawn waiter that
/// leaves the queue takes one off ([`left`](Self::left): freed by a sweep,
/// or popped by a consumer whose notify found it withdrawn). Their order
/// does not matter (a waiter may leave before its withdrawal is counted:
/// the count wraps below zero for that moment and reads as 0), so Relaxed
/// suffices. A count zeroed by each sweep instead lost the withdrawals the
/// sweep counted out but did not free: one it had no order with (it read
/// the waiter as live, or not linked yet) and those behind a push half-way
/// through, where a sweep stops. Such a waiter stayed in the queue with no
/// count standing for it until as many others withdrew.
///
/// 32 bits each: a task's waiters keep one in every task's allocation. The
/// count reads as 0 beyond 2^31 withdrawn waiters (as many nodes in one
/// queue would fill the memory first).
pub(crate) struct SweepCount {
    withdrawn: AtomicU32,
    /// Saturating at `u32::MAX`.
    kept: AtomicU32,
}

impl SweepCount {
    pub(crate) fn new() -> Self {
        Self {
            withdrawn: AtomicU32::new(0),
            kept: AtomicU32::new(0),
        }
    }

    /// A waiter withdrew; its node is still in the queue.
    pub(crate) fn withdrew(&self) {
        self.withdrawn.fetch_add(1, Relaxed);
    }

    /// `n` withdrawn waiters' nodes left the queue.
    pub(crate) fn left(&self, n: usize) {
        if n > 0 {
            // Modulo 2^32, as the count: truncating `n` is exact there.
            self.withdrawn.fetch_sub(n as u32, Relaxed);
        }
    }

    /// How many withdrawn waiters the queue holds (0 while a node's leaving
    /// is counted before its withdrawal).
    pub(crate) fn withdrawn(&self) -> u32 {
        let n = self.withdrawn.load(Relaxed);
        // Below zero (wrapped): none.
        if n > u32::MAX / 2 { 0 } else { n }
    }

    /// Whether a sweep is due: the withdrawn waiters are as many as the
    /// live ones the last sweep kept, and at least the minimum.
    pub(crate) fn due(&self) -> bool {
        self.withdrawn() >= SWEEP_MIN.max(self.kept.load(Relaxed))
    }

    /// Sweeps `queue` (see [`WaiterQueue::sweep`]): what it freed leaves
    /// the count, and what it kept is the next sweep's measure. What it did
    /// not see withdrawn (a withdrawal it has no order with, or after its
    /// look) and what it left (behind a push half-way through) still count.
    ///
    /// # Safety
    ///
    /// As for [`WaiterQueue::sweep`]: the caller holds `queue`'s consumer
    /// role.
    pub(crate) unsafe fn sweep(&self, queue: &WaiterQueue) -> Swept {
        // SAFETY: our caller's contract.
        let swept = unsafe { queue.sweep() };
        self.left(swept.freed);
        self.kept
            .store(u32::try_from(swept.kept).unwrap_or(u32::MAX), Relaxed);
        swept
    }

    /// For a test hook on a quiescent queue: sweeps it, and returns how
    /// many withdrawn waiters it freed and how many the count stood for
    /// before. More freed than counted: a withdrawn waiter that no count
    /// stood for, which would have stayed until enough others withdrew.
    ///
    /// # Safety
    ///
    /// As for [`sweep`](Self::sweep).
    pub(crate) unsafe fn audit(&self, queue: &WaiterQueue) -> (usize, usize) {
        let counted = self.withdrawn() as usize;
        // SAFETY: our caller's contract.
        let swept = unsafe { self.sweep(queue) };
        (swept.freed, counted)
    }
}
