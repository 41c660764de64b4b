//! The family's one waiting vocabulary: how a waiter watches a state before
//! it sleeps.
//!
//! Every blocking primitive of the family waits the same way: it *watches*
//! the state for a while (spinning, perhaps backing off, then yielding its
//! core), and then *parks* (a thread) or registers a waker (a task) until it
//! is woken. [`WaitPolicy`] names that watch with the attributes of
//! Mukherjee & Schwan's adaptive locks (spin-time, delay-time, sleep-time,
//! timeout), and [`Watch`] runs it, checking the caller's deadline inside the
//! loop, so a timed wait returns within its deadline plus one scheduling
//! quantum whatever the policy.
//!
//! **A yield is not a wait.** With more runnable threads than CPUs, one
//! `yield_now` gives the core away for a whole scheduling round, which can
//! be tens of milliseconds. So the watch yields only while yields are cheap
//! ([`load::yields_are_slow`] says otherwise
//! once the CPUs are saturated or a yield was measured slow): then a waiter
//! that may park parks at once, and one that never parks sleeps for
//! [`SNOOZE`] instead of yielding, which brings it back within a fraction of
//! a millisecond. A waiter with a deadline never sleeps past it and never
//! yields, and on saturated CPUs spins at most [`SATURATED_SPINS`] polls
//! (a spinning thread can be preempted for a scheduling round too); an
//! untimed waiter that may park spins there at most
//! [`SATURATED_SPIN_TIME`] (it keeps a core from the thread it waits for).
//! [`give_way`] and [`Backoff`] apply the same rule to waits that cannot
//! park (a peer in the middle of a push). Two waiters whose park costs the
//! thread they wait for a wake-up judge yields by a narrower signal:
//! [`Watch::measured_yields_only`] by measured yields alone, and
//! [`Watch::yields_unless_crowded`] by heavy oversubscription and by its
//! own last yield; both still park beside heavy load.
//!
//! | paper's lock | constructor |
//! |---|---|
//! | pure spin | [`WaitPolicy::spin`] |
//! | spin with back-off | [`WaitPolicy::spin_backoff`] |
//! | pure sleep | [`WaitPolicy::block`] |
//! | conditional sleep/spin with timeout | [`WaitPolicy::conditional`] |
//! | mixed sleep/spin (combined locks) | [`WaitPolicy::spin_then_block`], [`WaitPolicy::new`] + setters |
//!
//! # Examples
//!
//! ```
//! use sync_core::sync::atomic::{AtomicBool, Ordering};
//! use sync_core::wait::{Next, WaitPolicy, Watch};
//!
//! let ready = AtomicBool::new(true);
//! let mut watch = Watch::new(WaitPolicy::new().spins(10).yields(2));
//! // Acquire: pairs with the Release store of whoever sets the flag.
//! while !ready.load(Ordering::Acquire) {
//!     match watch.pause(None) {
//!         Next::Poll => continue,
//!         Next::Park => { /* park until woken, then `watch.reset()` */ break }
//!         Next::TimedOut => unreachable!("no deadline"),
//!     }
//! }
//! ```

use core::time::Duration;
use std::time::Instant;

#[cfg(not(loom))]
use crate::load;
use crate::sync::hint;
#[cfg(loom)]
use crate::sync::thread;

mod policy;
mod watch;

pub use policy::WaitPolicy;
pub use watch::{Next, Watch};

/// How long a waiter that cannot park sleeps instead of yielding once
/// yields are slow: long enough to give the core to the thread it waits
/// for, short enough that the waiter is back soon (a sleeper is scheduled
/// promptly when its timer fires; a yielder waits behind every runnable
/// thread).
pub const SNOOZE: Duration = Duration::from_micros(50);

/// The most polls a *timed* watch spins while the CPUs are saturated
/// ([`load::saturated`]), whatever its policy's spin count: past them it
/// goes on as past its spins (it parks with its deadline, or, under a
/// policy that never parks, sleeps at most [`SNOOZE`] between polls).
/// Untimed watches are bounded by [`SATURATED_SPIN_TIME`] instead.
///
/// A spinning thread on saturated CPUs can be preempted at any moment, and
/// then waits for a whole scheduling round (tens of milliseconds with a
/// few dozen busy threads per CPU) before it runs again, past any deadline
/// it had; a parked or sleeping thread is woken by its timer and scheduled
/// with priority, so a timed wait that spins to its deadline is often a
/// scheduling round late there (the report's `busy/overshoot-*` rows). A
/// few dozen polls take microseconds, so such a wait is preempted about as
/// rarely as a sleep is delayed. The same order as the family's default
/// spin counts, which it leaves as they are. Watches on CPUs with one free
/// are not bounded: a spinning thread with a free CPU is not preempted.
pub const SATURATED_SPINS: u32 = 32;

/// The longest an *untimed* watch whose policy parks spins while the CPUs
/// are saturated ([`load::saturated`]), counted from the first of its
/// samples that found them so, whatever its policy's spin count: then it
/// goes on as past its spins (yields while yields are cheap, or parks).
///
/// A waiter that spins keeps a core from the thread it waits for (the
/// holder, or the waiter a lock was just handed to), and on saturated CPUs
/// that thread may be waiting for a core. A spin that lasts a good part of
/// a scheduler's time slice (milliseconds) then turns into a convoy: each
/// waiter spins its count out while the thread that would let it in waits
/// for a CPU, and the lock moves a few dozen times a second. A spin well
/// under a slice still catches a state that changes soon, which is what a
/// long spin count is for (the report's `ast/spins/*` rows). Untimed
/// watches of a policy that never parks (a spin lock, chosen as such) are
/// not bounded.
pub const SATURATED_SPIN_TIME: Duration = Duration::from_micros(200);

/// The longest a waiter watches a state past its spins before it parks
/// whatever its policy, where the primitive asks ([`Watch::overdue`]): for
/// a lock whose fairness (its queue, its handoffs) serves only waiters that
/// park. A waiter that watches on under a policy that never parks (or
/// spins, yields or watches for long) can be passed for ever by threads
/// that free the lock and take it again on their fast path, since it finds
/// the lock free only by chance; parked, it is served in turn.
pub const WATCH_AT_MOST: Duration = Duration::from_millis(2);

/// Past how many polls [`Watch::overdue`] starts the clock of
/// [`WATCH_AT_MOST`] whatever the policy (long spins): a watch that parks
/// once its spins are spent and has no yields or timeout starts it only
/// there.
pub const WATCH_CLOCK_AFTER: u32 = 64;

/// Gives the core to other threads once, the family's replacement for
/// `yield_now`: without a deadline, a yield while yields are cheap; once
/// they are slow ([`load::yields_are_slow`]), or whenever there is a
/// `deadline` (a yield's length is unbounded: it can cost a whole
/// scheduling round), a sleep of [`SNOOZE`], never past `deadline`. Under
/// loom, one yield to the model.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// let deadline = Instant::now() + Duration::from_millis(1);
/// sync_core::wait::give_way(Some(deadline));
/// ```
pub fn give_way(deadline: Option<Instant>) {
    #[cfg(loom)]
    {
        let _ = deadline;
        thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if deadline.is_none() {
            load::tick();
            if !load::yields_are_slow() {
                load::measured_yield();
                return;
            }
        }
        let nap = match deadline {
            None => SNOOZE,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) => left.min(SNOOZE),
                None => return,
            },
        };
        // A sleep, not `park_timeout`: it leaves the thread's unpark token
        // to the protocol that parks after this pause.
        std::thread::sleep(nap);
    }
}

/// A short wait for a peer that is known to be in the middle of a step (a
/// producer between its swap and its link, a role about to be released):
/// spin with back-off, then [`give_way`] on every further call. For waits
/// that cannot park because nobody would wake them.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use sync_core::wait::Backoff;
///
/// let linked = AtomicBool::new(true);
/// let mut backoff = Backoff::new();
/// // Acquire: pairs with the peer's Release store of the link.
/// while !linked.load(Ordering::Acquire) {
///     backoff.snooze();
/// }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// Spins after which [`snooze`](Self::snooze) gives the core away.
    const SPINS: u32 = MAX_BACKOFF_SHIFT;

    /// A back-off that has not waited yet.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = sync_core::wait::Backoff::new();
    /// assert!(!b.is_spent());
    /// ```
    pub const fn new() -> Self {
        Self { step: 0 }
    }

    /// Waits a little longer each call: 2, 4, … 64 spin hints, then
    /// [`give_way`] each call.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut b = sync_core::wait::Backoff::new();
    /// for _ in 0..10 {
    ///     b.snooze();
    /// }
    /// assert!(b.is_spent());
    /// ```
    pub fn snooze(&mut self) {
        if self.step < Self::SPINS {
            for _ in 0..1u32 << (self.step + 1) {
                hint::spin_loop();
            }
            self.step += 1;
        } else {
            give_way(None);
        }
    }

    /// Whether the spins are spent (further snoozes give the core away).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!sync_core::wait::Backoff::new().is_spent());
    /// ```
    pub fn is_spent(&self) -> bool {
        self.step >= Self::SPINS
    }

    /// Starts over.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut b = sync_core::wait::Backoff::new();
    /// (0..10).for_each(|_| b.snooze());
    /// b.reset();
    /// assert!(!b.is_spent());
    /// ```
    pub fn reset(&mut self) {
        self.step = 0;
    }
}

/// The largest back-off exponent: a backed-off poll waits at most 2^6 spin
/// hints (a few hundred nanoseconds).
pub(crate) const MAX_BACKOFF_SHIFT: u32 = 6;
