//! Pieces the mutex and the semaphore share: how long a waiter may wait
//! before it asks for a handoff, and how long a thread looks for another's
//! next step (a waiter half-way through its push, a dequeuer's answer to
//! an offer of help).

use core::time::Duration;

/// How long a waiter of a [`Fairness::Barging`](crate::Fairness::Barging)
/// mutex competes with newcomers before it switches the mutex to handoffs
/// (starvation mode).
///
/// One millisecond, as Go's `sync.Mutex`: long enough that handoffs (each
/// keeps the lock idle for a wakeup) stay rare, short enough that no waiter
/// waits long behind a stream of newcomers.
pub const STARVATION: Duration = Duration::from_millis(1);

/// A waiter's clock: has it waited longer than [`STARVATION`]?
///
/// Under loom, where time is not modelled, a waiter starves after it has lost
/// one race, so the models reach the handoff path.
#[derive(Debug, Default)]
pub(crate) struct Patience {
    #[cfg(not(loom))]
    since: Option<std::time::Instant>,
    #[cfg(loom)]
    registrations: u32,
}

impl Patience {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Called each time the waiter (re)queues: whether it now wants a
    /// handoff.
    #[cfg(not(loom))]
    pub(crate) fn starving(&mut self) -> bool {
        match self.since {
            None => {
                self.since = Some(std::time::Instant::now());
                false
            }
            Some(since) => since.elapsed() > STARVATION,
        }
    }

    /// Whether the waiter has waited too long, without counting a new
    /// registration.
    #[cfg(not(loom))]
    pub(crate) fn waited_too_long(&self) -> bool {
        self.since.is_some_and(|since| since.elapsed() > STARVATION)
    }

    /// Whether the waiter has waited too long, without counting a new
    /// registration.
    #[cfg(loom)]
    pub(crate) fn waited_too_long(&self) -> bool {
        self.registrations > 1
    }

    /// Called each time the waiter (re)queues: whether it now wants a
    /// handoff.
    #[cfg(loom)]
    pub(crate) fn starving(&mut self) -> bool {
        self.registrations += 1;
        self.registrations > 1
    }
}

/// How many more looks, a spin hint apart, a dequeuer (an unlock's, a
/// release's) gives the queue when its front is a counted waiter half-way
/// through its push, before it leaves the wake-up (or the delivery) to that
/// waiter: a waiter that is running links within nanoseconds, and a
/// wake-up left to it costs it a delivery of its own; one that was
/// preempted there is not waited for beyond these spins. A withdrawing
/// waiter gives a tired dequeuer as many looks to accept its help (see
/// `handover`).
#[cfg(not(loom))]
pub(crate) const IN_FLIGHT_SPINS: u32 = 32;
/// Under loom a spin is a yield: none, so that the models stay small (the
/// looks they would make are the same as the one after the announcement).
#[cfg(loom)]
pub(crate) const IN_FLIGHT_SPINS: u32 = 0;

/// One of a dequeuer's looks for a waiter half-way through its push: with
/// looks left, spends one (a spin hint) and returns `true`, to look again;
/// `false` once the [`IN_FLIGHT_SPINS`] looks are spent.
#[inline]
pub(crate) fn spin_in_flight(spins: &mut u32) -> bool {
    spin_look(spins, IN_FLIGHT_SPINS)
}

/// One of `looks` looks for another thread's next step (a waiter linking
/// its node, a dequeuer answering an offer): with looks left, spends one
/// (a spin hint) and returns `true`, to look again; `false` once they are
/// spent.
#[inline]
pub(crate) fn spin_look(spins: &mut u32, looks: u32) -> bool {
    if *spins < looks {
        *spins += 1;
        sync_core::sync::hint::spin_loop();
        return true;
    }
    false
}
