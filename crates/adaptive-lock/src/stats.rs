//! What the lock's monitor senses: counters and estimates.

use core::time::Duration;

use crate::config::Config;

/// Event counts of the monitor's sensors.
///
/// # Examples
///
/// ```
/// let m = adaptive_lock::AdaptiveMutex::new(0);
/// *m.lock() += 1;
/// assert_eq!(m.stats().total.acquisitions, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Acquisitions (every lock, timed lock and successful try-lock).
    pub acquisitions: u64,
    /// Acquisitions that found the lock held and waited.
    pub contended: u64,
    /// Contended acquisitions that won while watching, without parking.
    pub spin_successes: u64,
    /// Times a waiter that went on to acquire the lock parked.
    pub parks: u64,
    /// Acquisitions handed over by the release (handoff).
    pub handoffs: u64,
    /// Timed waits that gave up.
    pub timeouts: u64,
    /// Panics of the policy's methods that the lock caught (the unlock
    /// that ran the policy completed and did not unwind; see
    /// [`Policy`](crate::Policy#panics)).
    pub policy_panics: u64,
    /// CPU time that waiters which went on to acquire the lock spent
    /// watching it past their spins (yielding or sleeping briefly between
    /// polls, rather than parked): what "never park" costs the machine.
    /// Read from the thread's CPU clock where there is one (Linux and other
    /// Unix systems); zero elsewhere and under loom.
    pub watch_cpu: Duration,
}

impl Counters {
    /// `self - earlier`, field by field.
    #[inline]
    pub(crate) fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            acquisitions: self.acquisitions - earlier.acquisitions,
            contended: self.contended - earlier.contended,
            spin_successes: self.spin_successes - earlier.spin_successes,
            parks: self.parks - earlier.parks,
            handoffs: self.handoffs - earlier.handoffs,
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
            policy_panics: self.policy_panics - earlier.policy_panics,
            watch_cpu: self.watch_cpu.saturating_sub(earlier.watch_cpu),
        }
    }
}

/// The monitor's view of the lock: what a [`Policy`](crate::Policy) reads
/// on every k-th unlock, and what [`stats`](crate::RawAdaptiveLock::stats)
/// returns.
///
/// Estimates are exponentially weighted moving averages (weight 1/4 for the
/// newest sample) of sampled acquisitions: the hold time is measured on
/// every k-th acquisition only (k the policy's sampling rate), so that the
/// clock is read on no other.
///
/// # Examples
///
/// ```
///
/// let m = adaptive_lock::AdaptiveMutex::new(());
/// drop(m.lock());
/// let s = m.stats();
/// assert_eq!(s.total.contended, 0);
/// assert_eq!(s.waiting, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Threads registered as waiting now (a sensor read with one relaxed
    /// load: it may be off by the threads arriving or leaving).
    pub waiting: u32,
    /// Counts since the lock was made.
    pub total: Counters,
    /// Counts since the previous sample (the policy's window).
    pub window: Counters,
    /// Wall time since the previous sample (zero if unknown).
    pub window_time: Duration,
    /// Estimated time the lock is held per acquisition.
    pub hold_time: Duration,
    /// Estimated polls a waiter that wins while watching makes.
    pub spin_polls: u32,
    /// Estimated time a parked waiter sleeps.
    pub park_wait: Duration,
    /// The configuration in force.
    pub config: Config,
    /// The processors available to the process.
    pub cpus: u32,
}
