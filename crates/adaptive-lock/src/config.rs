//! The lock's mutable attributes: the waiting policy and the scheduler, and
//! their packing into the one word that waiters read.

use core::time::Duration;

use sync_core::wait::WaitPolicy;

/// How the lock picks the next owner among its parked waiters, and whether
/// it hands the lock over: the paper's scheduler (registration, acquisition,
/// release).
///
/// * Registration: every waiter counts itself in the `waiting` sensor and
///   registers its priority (0 for [`lock`](crate::RawAdaptiveLock::lock)) as
///   its park token.
/// * Acquisition: the [`WaitPolicy`] of the current [`Config`], applied to
///   the first [`Config::watchers`] waiters; later ones park at once.
/// * Release: FCFS (the parked waiters in arrival order) or priority (the
///   parked waiter of highest priority, FCFS among equals, with aging: the
///   longest-parked waiter is handed the lock after 16 releases in a row
///   that passed it over); with handoff the lock passes straight to the
///   woken waiter, without it the woken waiter competes with running
///   threads (barging), and a waiter parked for long (parking_lot's
///   fairness timer, about 0.5 ms) is handed the lock anyway. A waiter
///   still watching when the lock is handed over parks at its next poll,
///   so that handoff serves it in turn (see
///   [`RawAdaptiveLock`'s fairness](crate::RawAdaptiveLock#fairness)).
///
/// # Examples
///
/// ```
/// use adaptive_lock::Scheduler;
///
/// let s = Scheduler::PRIORITY.handoff(true);
/// assert!(s.is_priority() && s.is_handoff());
/// assert_eq!(Scheduler::default(), Scheduler::FCFS);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Scheduler {
    priority: bool,
    handoff: bool,
}

impl Scheduler {
    /// First come, first served among parked waiters; barging release.
    pub const FCFS: Self = Self {
        priority: false,
        handoff: false,
    };
    /// Highest priority first among parked waiters, with aging (see
    /// [`RawAdaptiveLock`'s fairness](crate::RawAdaptiveLock#fairness));
    /// barging release.
    pub const PRIORITY: Self = Self {
        priority: true,
        handoff: false,
    };
    /// FCFS with handoff release: the lock goes straight to the woken
    /// waiter (the paper's handoff scheduling).
    pub const HANDOFF: Self = Self {
        priority: false,
        handoff: true,
    };

    /// Sets handoff release.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(adaptive_lock::Scheduler::FCFS.handoff(true).is_handoff());
    /// ```
    pub const fn handoff(mut self, handoff: bool) -> Self {
        self.handoff = handoff;
        self
    }

    /// Whether the release hands the lock to the woken waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(adaptive_lock::Scheduler::HANDOFF.is_handoff());
    /// ```
    pub const fn is_handoff(&self) -> bool {
        self.handoff
    }

    /// Whether the release wakes the waiter of highest priority.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!adaptive_lock::Scheduler::FCFS.is_priority());
    /// ```
    pub const fn is_priority(&self) -> bool {
        self.priority
    }
}

/// A configuration of the lock: its waiting policy, its scheduler, and how
/// many waiters may watch (spin or yield) at once.
///
/// It is packed into one word that waiters read with one load, so its
/// fields are bounded: a finite spin count is kept up to 2^24 - 2, a
/// finite yield count up to 254 (larger finite counts are clamped to
/// those; only `u32::MAX` means "without bound"), the watch timeout is kept in microseconds
/// up to about one second (longer is one second), and `watchers` above 254
/// is unlimited.
///
/// # Examples
///
/// ```
/// use adaptive_lock::{Config, Scheduler};
/// use adaptive_lock::WaitPolicy;
///
/// let c = Config::new()
///     .wait(WaitPolicy::spin_then_block(10))
///     .scheduler(Scheduler::HANDOFF)
///     .watchers(Some(1));
/// assert_eq!(c.wait_policy().spin_count(), 10);
/// assert_eq!(c.watcher_limit(), Some(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    wait: WaitPolicy,
    scheduler: Scheduler,
    watchers: Option<u8>,
}

const SPIN_BITS: u32 = 24;
const SPIN_MAX: u64 = (1 << SPIN_BITS) - 1;
const YIELD_SHIFT: u32 = 24;
const YIELD_MAX: u64 = 0xff;
const BACKOFF: u64 = 1 << 32;
const PARK: u64 = 1 << 33;
const HANDOFF: u64 = 1 << 34;
const PRIORITY: u64 = 1 << 35;
const WATCH_SHIFT: u32 = 36;
const TIMEOUT_SHIFT: u32 = 44;
/// The timeout field's all-ones value, which no configuration stores: it
/// marks [`UNSET`].
const TIMEOUT_UNSET: u64 = (1 << 20) - 1;
const TIMEOUT_MAX_US: u64 = TIMEOUT_UNSET - 1;

/// The word of a lock made by a `const` constructor before its policy's
/// initial configuration is applied: it reads as [`Config::new`], and no
/// [`Config::to_bits`] equals it, so that applying the initial
/// configuration with a CAS from `UNSET` never overwrites one set by
/// `configure`.
pub(crate) const UNSET: u64 = Config::new().to_bits() | (TIMEOUT_UNSET << TIMEOUT_SHIFT);

impl Config {
    /// parking_lot's behaviour: [`WaitPolicy::new`], [`Scheduler::FCFS`],
    /// every waiter watches.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(adaptive_lock::Config::new(), adaptive_lock::Config::default());
    /// ```
    pub const fn new() -> Self {
        Self {
            wait: WaitPolicy::new(),
            scheduler: Scheduler::FCFS,
            watchers: None,
        }
    }

    /// Sets the waiting policy.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = adaptive_lock::Config::new().wait(adaptive_lock::WaitPolicy::block());
    /// assert_eq!(c.wait_policy(), adaptive_lock::WaitPolicy::block());
    /// ```
    pub const fn wait(mut self, wait: WaitPolicy) -> Self {
        self.wait = wait;
        self
    }

    /// Sets the scheduler.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{Config, Scheduler};
    /// assert_eq!(Config::new().scheduler(Scheduler::PRIORITY).scheduler_kind(), Scheduler::PRIORITY);
    /// ```
    pub const fn scheduler(mut self, scheduler: Scheduler) -> Self {
        self.scheduler = scheduler;
        self
    }

    /// At most `n` waiters watch the lock (spin, yield) at once; a waiter
    /// that registers behind `n` others parks at once. `None`: every waiter
    /// watches. Spinning waiters beyond the number of cores only take cores
    /// from the holder.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = adaptive_lock::Config::new().watchers(Some(1));
    /// assert_eq!(c.watcher_limit(), Some(1));
    /// ```
    pub const fn watchers(mut self, n: Option<u8>) -> Self {
        self.watchers = match n {
            Some(n) if n < 255 => Some(n),
            _ => None,
        };
        self
    }

    /// The waiting policy.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(adaptive_lock::Config::new().wait_policy().parks());
    /// ```
    pub const fn wait_policy(&self) -> WaitPolicy {
        self.wait
    }

    /// The scheduler.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(adaptive_lock::Config::new().scheduler_kind(), adaptive_lock::Scheduler::FCFS);
    /// ```
    pub const fn scheduler_kind(&self) -> Scheduler {
        self.scheduler
    }

    /// The limit on watching waiters, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(adaptive_lock::Config::new().watcher_limit(), None);
    /// ```
    pub const fn watcher_limit(&self) -> Option<u8> {
        self.watchers
    }

    /// The configuration as stored in the lock (its fields clamped).
    pub(crate) const fn to_bits(self) -> u64 {
        let w = self.wait;
        // `u32::MAX` (unbounded) is kept as the field's all-ones value; a
        // finite count is clamped to the largest finite one, so that a
        // finite request never becomes unbounded (SimpleAdapt adding spins
        // would otherwise latch at "spin for ever").
        let spins = count_bits(w.spin_count(), SPIN_MAX);
        let yields = count_bits(w.yield_count(), YIELD_MAX);
        let mut bits = spins | (yields << YIELD_SHIFT);
        if w.backs_off() {
            bits |= BACKOFF;
        }
        if w.parks() {
            bits |= PARK;
        }
        if self.scheduler.handoff {
            bits |= HANDOFF;
        }
        if self.scheduler.priority {
            bits |= PRIORITY;
        }
        let watchers = match self.watchers {
            Some(n) => n as u64,
            None => 0xff,
        };
        bits |= watchers << WATCH_SHIFT;
        let timeout = match w.watch_timeout() {
            // 0 is "no timeout": a zero timeout is kept as 1 µs.
            Some(t) => {
                let us = t.as_micros();
                if us == 0 {
                    1
                } else if us >= TIMEOUT_MAX_US as u128 {
                    TIMEOUT_MAX_US
                } else {
                    us as u64
                }
            }
            None => 0,
        };
        bits | (timeout << TIMEOUT_SHIFT)
    }

    /// The configuration stored as `bits` by [`to_bits`](Self::to_bits).
    pub(crate) fn from_bits(bits: u64) -> Self {
        let spins = match bits & SPIN_MAX {
            SPIN_MAX => u32::MAX,
            s => s as u32,
        };
        let yields = match (bits >> YIELD_SHIFT) & YIELD_MAX {
            YIELD_MAX => u32::MAX,
            y => y as u32,
        };
        let timeout = match bits >> TIMEOUT_SHIFT {
            0 | TIMEOUT_UNSET => None,
            us => Some(Duration::from_micros(us)),
        };
        let wait = WaitPolicy::new()
            .spins(spins)
            .yields(yields)
            .backoff(bits & BACKOFF != 0)
            .park(bits & PARK != 0)
            .timeout(timeout);
        let watchers = match (bits >> WATCH_SHIFT) & 0xff {
            0xff => None,
            n => Some(n as u8),
        };
        Self {
            wait,
            scheduler: Scheduler {
                priority: bits & PRIORITY != 0,
                handoff: bits & HANDOFF != 0,
            },
            watchers,
        }
    }

    /// The configuration as the lock keeps it: `self` with its fields
    /// clamped to what the lock's word holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::Config;
    /// use adaptive_lock::WaitPolicy;
    /// let c = Config::new().wait(WaitPolicy::new().yields(1000));
    /// assert_eq!(c.clamped().wait_policy().yield_count(), 254);
    /// ```
    pub fn clamped(self) -> Self {
        Self::from_bits(self.to_bits())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

/// A spin or yield count as its field of `max` (all ones): `u32::MAX`
/// (unbounded) is `max`, a finite count is clamped to `max - 1`.
const fn count_bits(n: u32, max: u64) -> u64 {
    if n == u32::MAX {
        max
    } else if n as u64 >= max {
        max - 1
    } else {
        n as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        for c in [
            Config::new(),
            Config::new().wait(WaitPolicy::spin()),
            Config::new().wait(WaitPolicy::spin_backoff()),
            Config::new().wait(WaitPolicy::block()),
            Config::new().wait(WaitPolicy::spin_then_block(50)),
            Config::new().wait(WaitPolicy::conditional(Duration::from_micros(30))),
            Config::new()
                .scheduler(Scheduler::PRIORITY.handoff(true))
                .watchers(Some(3)),
        ] {
            assert_eq!(Config::from_bits(c.to_bits()), c);
            assert_ne!(c.to_bits(), UNSET);
        }
    }

    /// The placeholder word reads as the default configuration, and the
    /// longest timeout is clamped below the value that marks it.
    #[test]
    fn unset_reads_as_the_default_and_no_configuration_stores_it() {
        assert_eq!(Config::from_bits(UNSET), Config::new());
        let longest = Config::new().wait(
            WaitPolicy::new()
                .spins(u32::MAX)
                .yields(u32::MAX)
                .timeout(Some(Duration::from_secs(10))),
        );
        let longest = longest.scheduler(Scheduler::PRIORITY.handoff(true));
        assert_ne!(longest.to_bits(), UNSET);
        assert_eq!(
            longest.clamped().wait_policy().watch_timeout(),
            Some(Duration::from_micros(TIMEOUT_MAX_US))
        );
    }
}
