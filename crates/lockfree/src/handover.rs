//! Handing a dequeuer's role to a withdrawing waiter.
//!
//! A dequeuer (the one thread allowed to pop a waiter queue: the mutex's
//! `WAKING` holder, the semaphore's deliverer) skips the nodes of waiters
//! that withdrew (timed-out threads, dropped futures). Waiters that keep
//! queueing and withdrawing, such as tasks that poll a `lock_async` once in
//! a `select!` loop and drop it, can push withdrawn nodes as fast as one
//! dequeuer pops them, or make it look again as often as it is about to
//! stop, and the dequeuer (an unlock, a release) would then never return.
//!
//! So a dequeuer that has made [`TIRED_AFTER`] fruitless steps in a row (a
//! withdrawn node popped, a delivery pass that could not retire) says so
//! (`TIRED`), and the next waiter that withdraws while it holds the role
//! offers to take it over (`OFFERED`), then looks a few times, a spin hint
//! apart, for the answer. At its next fruitless step the dequeuer accepts
//! (`ACCEPTED`, or `ACCEPTED_HOLDING` if it was handing the lock over,
//! which then goes with the role) and returns; the helper goes on, and
//! tires in its turn. A dequeuer that does anything else (serves a waiter,
//! finds a push half-way or nothing, leaves) stops asking; a helper whose
//! offer is not answered within its looks (the dequeuer preempted, or
//! done) withdraws it. One value holds the state, and every step is one
//! CAS on it, so the role has exactly one holder at every instant.
//!
//! So a dequeuer makes at most [`TIRED_AFTER`] fruitless steps, and then as
//! many as come before the next withdrawal: the withdrawals that keep it
//! busy are the ones that relieve it. If none comes, what is left to pop is
//! the finite number of nodes already queued.

use sync_core::sync::atomic::{AtomicUsize, Ordering::*};

use crate::patience::spin_look;

/// How many looks, a spin hint apart, a helper gives the dequeuer to
/// answer its offer: as many as a dequeuer gives a push half-way
/// ([`IN_FLIGHT_SPINS`](crate::patience::IN_FLIGHT_SPINS)). A dequeuer that
/// is running answers after its next pop, within a few cache misses.
#[cfg(not(loom))]
const HELP_LOOKS: u32 = crate::patience::IN_FLIGHT_SPINS;
/// Under loom a spin is a yield, which lets the dequeuer run without a
/// preemption: one, so that the models reach the acceptance.
#[cfg(loom)]
const HELP_LOOKS: u32 = 1;

/// Nobody asks for help.
const NONE: usize = 0;
/// The dequeuer asks for help.
const TIRED: usize = 1;
/// A withdrawing waiter offers to take the role.
const OFFERED: usize = 2;
/// The dequeuer handed the role to the helper.
const ACCEPTED: usize = 3;
/// The dequeuer handed the role and the lock it was handing over.
const ACCEPTED_HOLDING: usize = 4;

/// How many fruitless steps in a row a dequeuer makes before it asks for
/// help: a step costs a few cache misses, so an unlock that finds a few
/// dozen withdrawn waiters still returns within microseconds.
#[cfg(not(loom))]
pub(crate) const TIRED_AFTER: u32 = 32;
/// Under loom, after one, so that the models reach the handover.
#[cfg(loom)]
pub(crate) const TIRED_AFTER: u32 = 1;

/// The handover's state, beside the queue it serves.
#[derive(Debug)]
pub(crate) struct Handover {
    state: AtomicUsize,
}

/// A dequeuer's own count of its fruitless steps in a row.
#[derive(Debug)]
pub(crate) struct Tiredness {
    in_a_row: u32,
    /// How many make it ask for help.
    after: u32,
    advertised: bool,
}

impl Tiredness {
    /// Asks for help after [`TIRED_AFTER`] fruitless steps in a row.
    pub(crate) fn new() -> Self {
        Self::after(TIRED_AFTER)
    }

    /// Asks for help after `after` fruitless steps in a row.
    pub(crate) fn after(after: u32) -> Self {
        Self {
            in_a_row: 0,
            after,
            advertised: false,
        }
    }
}

impl Handover {
    sync_core::const_unless_loom! {
        pub(crate) fn new() -> Self {
            Self {
                state: AtomicUsize::new(NONE),
            }
        }
    }

    /// The state, for loom models (0 once every thread is done).
    #[cfg(loom)]
    pub(crate) fn loom_state(&self) -> usize {
        self.state.load(Relaxed)
    }

    /// Called by the dequeuer after a fruitless step (it popped and
    /// uncounted a withdrawn node; a delivery pass could not retire), with
    /// nothing else half-done: `true` if a helper offers to take the role
    /// over, which the dequeuer then [accepts](Self::accept). Asks for help
    /// after [`TIRED_AFTER`] such steps in a row (or as many as `tired` was
    /// made with).
    #[inline]
    pub(crate) fn fruitless(&self, tired: &mut Tiredness) -> bool {
        // Saturating: a dequeuer may go on for billions of steps while
        // nobody withdraws to take the role over.
        tired.in_a_row = tired.in_a_row.saturating_add(1);
        if tired.in_a_row < tired.after {
            return false;
        }
        // Relaxed: only the dequeuer and the one helper whose offer stands
        // write the state; the CASes decide between them.
        match self.state.load(Relaxed) {
            NONE => {
                // Only the role's holder moves the state from NONE (a
                // helper's offer needs TIRED): this cannot fail. Relaxed:
                // a helper that reads it only offers, and learns nothing
                // else from it.
                self.state.store(TIRED, Relaxed);
                tired.advertised = true;
                false
            }
            OFFERED => true,
            // TIRED: still advertised. (`ACCEPTED*` belongs to a handover
            // that made us the holder: its helper resets it before it
            // dequeues.)
            _ => false,
        }
    }

    /// After [`fruitless`](Self::fruitless) found an offer: hands the role
    /// (and the lock, if `holding`) to the helper. `true` if it is the
    /// helper's now, and the caller must return without touching the queue
    /// or its words again; `false` if the helper gave up meanwhile.
    #[inline]
    pub(crate) fn accept(&self, tired: &mut Tiredness, holding: bool) -> bool {
        let to = if holding { ACCEPTED_HOLDING } else { ACCEPTED };
        // Release: our pops, and the critical section of the lock we hand
        // over, happen before the helper's work; pairs with the Acquire in
        // `offer`.
        let handed = self
            .state
            .compare_exchange(OFFERED, to, Release, Relaxed)
            .is_ok();
        tired.advertised = !handed;
        handed
    }

    /// Called by the dequeuer before it does anything but another
    /// fruitless step (it serves a waiter, finds a push half-way or
    /// nothing, or leaves): stops asking for help. An offer made meanwhile
    /// is left to its helper, which withdraws it after its looks.
    #[inline]
    pub(crate) fn rest(&self, tired: &mut Tiredness) {
        tired.in_a_row = 0;
        if tired.advertised {
            tired.advertised = false;
            // Relaxed: as in `fruitless`; fails only if a helper
            // offered, and that helper resets the state.
            let _ = self.state.compare_exchange(TIRED, NONE, Relaxed, Relaxed);
        }
    }

    /// Called by a withdrawing waiter that found the dequeuer's role taken:
    /// if its holder asks for help, offers to take the role over and looks
    /// for the answer up to [`HELP_LOOKS`] times. `Some(holding)` if the
    /// role is now ours, with the lock if `holding`; `None` if nobody
    /// asked, or the offer went unanswered and was withdrawn (the holder
    /// then deals with our node, as it would have without the offer).
    pub(crate) fn offer(&self) -> Option<bool> {
        // Relaxed: a look; the CAS decides.
        if self.state.load(Relaxed) != TIRED
            || self
                .state
                .compare_exchange(TIRED, OFFERED, Relaxed, Relaxed)
                .is_err()
        {
            return None;
        }
        let mut looks = 0;
        let answer = loop {
            // Acquire: pairs with the dequeuer's Release CAS that accepts,
            // so we see the queue (and the lock's data) as it left them.
            let s = self.state.load(Acquire);
            if s == ACCEPTED || s == ACCEPTED_HOLDING {
                break s;
            }
            if !spin_look(&mut looks, HELP_LOOKS) {
                // Acquire on failure: as above, the dequeuer accepted.
                match self.state.compare_exchange(OFFERED, NONE, Relaxed, Acquire) {
                    Ok(_) => return None,
                    Err(s) => break s,
                }
            }
        };
        // The role is ours: no other thread writes the state until we
        // advertise in our turn. Relaxed: our later writes come after.
        self.state.store(NONE, Relaxed);
        Some(answer == ACCEPTED_HOLDING)
    }
}
