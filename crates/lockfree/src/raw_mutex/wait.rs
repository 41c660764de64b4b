//! The lock side's slow path: spinning, counting in, queueing and parking
//! until the lock is free, handed over, or the deadline passes. See the
//! protocol in [`raw_mutex`](super).

use std::time::Instant;

use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering::*;
use sync_core::unwind::Panics;
use sync_core::wait::{Next, Watch};
use sync_core::waiter::Waiter;

use super::{COMPETE, Fairness, HANDOFF, ONE, RawMutex, STARVE, WAKING, taken};
use crate::backlog::Withdrawer;
use crate::patience::Patience;

impl RawMutex {
    /// The slow path of every blocking lock: `true` once the lock is held,
    /// `false` if `deadline` passed first.
    #[cold]
    pub(super) fn lock_slow(&self, deadline: Option<Instant>) -> bool {
        // The family's watch: it yields only while yields are cheap.
        let mut spin = Watch::default();
        let mut patience = Patience::new();
        // Whether we were woken with COMPETE and still carry `WAKING`.
        let mut woken = false;
        // Under loom, where time is not modelled, a timed wait's timer fires
        // during every wait (see `Waiter::wait_until`): a waiter woken to
        // compete just as it timed out then gives up unless the lock is free.
        let mut expired = false;
        let mut node: Option<Arc<Waiter>> = None;
        let mut w = self.word.load(Relaxed);
        loop {
            if self.may(w, woken) {
                // AcqRel: Acquire takes the lock; Release passes `WAKING`
                // (our dequeuer's queue writes) on to the next dequeuer.
                match self
                    .word
                    .compare_exchange_weak(w, taken(w, woken), AcqRel, Relaxed)
                {
                    Ok(_) => return true,
                    Err(actual) => w = actual,
                }
                continue;
            }
            if let Some(deadline) = deadline {
                if expired || crate::clock::passed(Some(deadline)) {
                    if woken {
                        // We carry `WAKING`: pass the wakeup on. The next
                        // waiter's waker may panic: the lock is consistent
                        // by then, and the panic goes on to our caller.
                        let mut panics = Panics::new();
                        self.pass_wake(&mut panics);
                        panics.resume();
                    }
                    return false;
                }
            }
            if self.fairness == Fairness::Barging && (w < ONE || woken) && w & STARVE == 0 {
                // The watch gets the deadline: a timed wait does not yield
                // (a yield that finds other threads runnable gives the core
                // away for a scheduling round, far past a short deadline);
                // after its spins it parks with the time left.
                match spin.pause(deadline) {
                    // `TimedOut`: the check above returns on the next turn,
                    // after a last look at the word.
                    Next::Poll | Next::TimedOut => {
                        w = self.word.load(Relaxed);
                        continue;
                    }
                    Next::Park => {}
                }
            }
            // We will park: what this thread keeps for the family's
            // blocking waits goes first (an active monitor's task wakers,
            // see `wake_chain::deliver_before_park`), before we are counted,
            // and only now, past the spin that most contended locks end in.
            // Not while we carry `WAKING`: a task the hook polls in place
            // that waits for this lock would wait for an unlock that wakes
            // nobody (and none was kept since our first pass anyway).
            if !woken {
                sync_core::wake_chain::before_park();
            }
            // Allocate before counting: the unlocker that sees the count
            // waits for the push, so keep that window short.
            // Its data: whether it starves (`STARVE` is set as it counts).
            let waiter =
                node.get_or_insert_with(|| Waiter::for_thread(patience.starving() as usize));
            let new = self.counted(w, woken, waiter.data() != 0);
            // AcqRel: as above, for the `WAKING` we may clear.
            if let Err(actual) = self.word.compare_exchange_weak(w, new, AcqRel, Relaxed) {
                w = actual;
                continue;
            }
            self.queue.push(Arc::clone(waiter));
            // A waker's panic in the wake-up an unlock left to us (another
            // waiting task's) is dropped: this lock must not unwind (see
            // `pushed`).
            drop(self.pushed());
            // Spin before parking only when the lock will be handed over
            // (FIFO, or starvation mode): a handoff to a spinning thread
            // costs no wakeup. A barging waiter parks at once: it already
            // spun, and a woken waiter that never slept only competes with
            // the holder for the line.
            let handoff = self.fairness == Fairness::Fifo || new & STARVE != 0;
            let token = match deadline {
                None => waiter.wait(handoff),
                Some(deadline) => match waiter.wait_until(handoff, deadline) {
                    Some(token) => {
                        expired = cfg!(loom);
                        token
                    }
                    None => {
                        // Withdrawn: the node stays queued, counted, until
                        // a dequeuer skips and uncounts it.
                        let mut panics = Panics::new();
                        self.reclaim(Withdrawer::Thread, &mut panics);
                        panics.resume();
                        return false;
                    }
                },
            };
            node = None;
            if token == HANDOFF {
                self.handed_off(patience.waited_too_long());
                return true;
            }
            debug_assert_eq!(token, COMPETE);
            woken = true;
            spin = Watch::default();
            w = self.word.load(Relaxed);
        }
    }

    /// The word after a waiter counts itself: one more, `WAKING` handed on
    /// if it carried it, `STARVE` set if it starves (barging mode only).
    pub(super) fn counted(&self, w: usize, woken: bool, starving: bool) -> usize {
        let starve = if starving && self.fairness == Fairness::Barging {
            STARVE
        } else {
            0
        };
        ((w + ONE) & !if woken { WAKING } else { 0 }) | starve
    }

    /// Called by a waiter that was handed the lock: leaves starvation mode
    /// if the waiter did not wait too long itself (measured now, so the
    /// handoffs continue while the queue holds long waiters), or if nobody
    /// else waits.
    pub(super) fn handed_off(&self, starving: bool) {
        let w = self.word.load(Relaxed);
        if w & STARVE != 0 && (!starving || w < ONE) {
            // Relaxed: we hold the lock; the bit orders nothing.
            self.word.fetch_and(!STARVE, Relaxed);
        }
    }
}
