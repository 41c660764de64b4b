//! Adaptation policies: the user-provided part of the feedback loop. The
//! trait, [`Static`] and the paper's [`SimpleAdapt`] are here; the default,
//! [`Learned`], is in `learned/`.

mod learned;

pub use learned::{Learned, WAKE_COST};

use sync_core::wait::WaitPolicy;

use crate::config::Config;
use crate::raw::DEFAULT_SAMPLING_RATE;
use crate::stats::Stats;

/// An adaptation policy: reads the monitor on every k-th unlock (k the
/// [sampling rate](Policy::sampling_rate)) and returns the lock's next
/// configuration. This is the paper's "closely coupled" loop: it runs in the
/// unlock path, by the thread that holds the lock, so the policy's state
/// needs no synchronization of its own, and a new configuration reaches the
/// waiters with one store.
///
/// `adapt` runs while the lock is held: keep it short (a few comparisons).
/// It may call its own lock's `try_lock`, `is_locked`, `stats` and
/// `configure`, and take other locks, but a blocking `lock()` of its own
/// lock (directly, or from the policy of another adaptive lock it takes)
/// could never return: it panics instead, and the lock catches that panic
/// as the policy's (see below). A timed lock of its own lock
/// (`try_lock_for`, `try_lock_until`, and their priority and `Arc` forms)
/// could only time out, with the lock held all along: it fails at once,
/// as `try_lock` does, and counts in
/// [`Counters::timeouts`](crate::Counters::timeouts).
///
/// # Deadlocks
///
/// A policy that takes another lock `B` nests `B` inside its own lock at
/// every sampled unlock, wherever that unlock is: a thread that releases
/// this lock while it holds `B`, or a policy of `B` that takes this lock
/// while another thread runs this one's, deadlocks as any two locks taken
/// in both orders do. Only a `lock()` of its own lock is caught (above).
///
/// # Panics
///
/// A lock calls its policy's methods in its unlock path (`adapt` at every
/// sample; `initial`, `sampling_rate` and `uses_time` at the first unlock of
/// a lock made by a `const` constructor). An unlock must not unwind once it
/// has released the lock (lock_api's guards take an unlock that unwinds for
/// one that left the lock held, and would unlock twice), so the lock
/// catches every panic of these methods and:
///
/// * completes the unlock, which returns normally;
/// * counts the panic in [`Counters::policy_panics`](crate::Counters::policy_panics)
///   (read it with `stats()`); the message was already reported by the
///   panic hook, and the payload is dropped once the lock is released;
/// * keeps the configuration in force (a panicking `initial` leaves
///   [`Config::new`], a panicking `sampling_rate` the
///   [default rate](crate::DEFAULT_SAMPLING_RATE), a panicking `uses_time`
///   `true`);
/// * calls the policy again at the next sample, in whatever state the panic
///   left it (no poisoning).
///
/// The methods called by [`with_policy`](crate::RawAdaptiveLock::with_policy)
/// run before any lock exists: their panics go on to its caller. The
/// policy's `Drop` runs when the lock is dropped (never while it is held),
/// and a panic there goes on to whoever drops the lock, as any field's.
///
/// # Examples
///
/// A policy that parks as soon as more than two threads wait:
///
/// ```
/// use adaptive_lock::{AdaptiveMutex, Config, Policy, Stats};
/// use adaptive_lock::WaitPolicy;
///
/// struct ParkWhenCrowded;
///
/// impl Policy for ParkWhenCrowded {
///     const INIT: Self = ParkWhenCrowded;
///     fn adapt(&mut self, stats: &Stats) -> Option<Config> {
///         let wait = if stats.waiting > 2 { WaitPolicy::block() } else { WaitPolicy::new() };
///         Some(stats.config.wait(wait))
///     }
/// }
///
/// let m: AdaptiveMutex<u32, ParkWhenCrowded> = AdaptiveMutex::with_policy(0, ParkWhenCrowded);
/// *m.lock() += 1;
/// ```
pub trait Policy: Send {
    /// The policy in a lock made by a `const` constructor
    /// (`AdaptiveMutex::new`, [`RawAdaptiveLock::new`](crate::RawAdaptiveLock::new)).
    const INIT: Self;

    /// The configuration of a lock made with this policy, before the first
    /// sample. A lock made by a `const` constructor (with [`INIT`](Self::INIT))
    /// starts with [`Config::new`] and takes this, and
    /// [`sampling_rate`](Self::sampling_rate), at its first acquisition.
    fn initial(&self) -> Config {
        Config::new()
    }

    /// Every how many acquisitions the monitor samples and the policy runs
    /// (rounded up to a power of two). The default is
    /// [`DEFAULT_SAMPLING_RATE`](crate::DEFAULT_SAMPLING_RATE).
    fn sampling_rate(&self) -> u32 {
        DEFAULT_SAMPLING_RATE
    }

    /// Whether the policy reads the monitor's times (`hold_time`,
    /// `window_time`). If not, the sampled acquisitions do not read the
    /// clock and those fields stay zero: the monitor then costs counters
    /// only. The default is `true`.
    fn uses_time(&self) -> bool {
        true
    }

    /// Decides the next configuration from the monitor's view; `None`
    /// keeps the current one (including one set by
    /// [`configure`](crate::RawAdaptiveLock::configure)).
    fn adapt(&mut self, stats: &Stats) -> Option<Config>;
}

/// A fixed configuration: the lock never adapts by itself (an external
/// agent may still [`configure`](crate::RawAdaptiveLock::configure) it).
///
/// # Examples
///
/// ```
/// use adaptive_lock::{AdaptiveMutex, Static};
/// use adaptive_lock::WaitPolicy;
///
/// let m = AdaptiveMutex::with_policy(0, Static(WaitPolicy::spin_then_block(10)));
/// assert_eq!(m.config().wait_policy(), WaitPolicy::spin_then_block(10));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Static(pub WaitPolicy);

impl Policy for Static {
    const INIT: Self = Static(WaitPolicy::new());

    fn initial(&self) -> Config {
        Config::new().wait(self.0)
    }

    fn adapt(&mut self, _: &Stats) -> Option<Config> {
        None
    }
}

/// The paper's `simple-adapt`, on the number of waiting threads sampled
/// every other unlock:
///
/// ```text
/// IF no-of-waiting-threads = 0                    configure pure spin
/// ELSE IF no-of-waiting-threads <= threshold      no-of-spins += step
/// ELSE                                            no-of-spins -= 2 * step
/// IF no-of-spins <= 0                             configure pure blocking
/// ```
///
/// Between those, the lock spins `no-of-spins` times and then blocks (a
/// combined lock). `no-of-spins` stops growing at
/// [`MAX_SPINS`](Self::MAX_SPINS), which the paper's rule does not have:
/// while few threads wait, every sample adds `step`, so the count grows
/// with the rate of acquisitions, and a count grown that far would take
/// minutes to sample its way back down once waiters crowd in. (On
/// saturated CPUs a waiter spins a fraction of a millisecond at most
/// whatever the count, so that it does not keep a core from the thread
/// the lock was handed to for long.)
///
/// "No waiting threads" is sampled at an unlock, but threads may arrive
/// while the lock is held (for long, perhaps): so pure spin comes with a
/// cap of watchers: `threshold` or the CPUs, whichever is more (see
/// [`Config::watchers`]). A thread that arrives to find that many others
/// waiting parks at once instead of spinning, as the paper's rule would
/// have had it do had it sampled then (more waiters than the threshold:
/// fewer spins). The policy owns the watcher cap: its other states set
/// none.
///
/// # Examples
///
/// ```
/// use adaptive_lock::{AdaptiveMutex, SimpleAdapt};
/// let m = AdaptiveMutex::with_policy(0, SimpleAdapt { threshold: 1, step: 10 });
/// *m.lock() += 1;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimpleAdapt {
    /// The waiting-threads threshold.
    pub threshold: u32,
    /// `n`: how many spins a sample adds (and twice that it removes).
    pub step: u32,
}

impl SimpleAdapt {
    /// The most spins before blocking that the policy configures (see
    /// [`SimpleAdapt`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{Policy, SimpleAdapt};
    /// assert!(SimpleAdapt::MAX_SPINS >= SimpleAdapt::INIT.step);
    /// ```
    pub const MAX_SPINS: u32 = 4096;

    /// The spins after one sample with `waiting` threads, from `spins`;
    /// `None` is pure spin.
    fn next(&self, spins: Option<u32>, waiting: u32) -> Option<u32> {
        if waiting == 0 {
            return None;
        }
        // A count set from outside (`configure`) above the cap is taken
        // as the cap.
        let spins = spins.unwrap_or(0).min(Self::MAX_SPINS);
        Some(if waiting <= self.threshold {
            spins.saturating_add(self.step).min(Self::MAX_SPINS)
        } else {
            spins.saturating_sub(self.step.saturating_mul(2))
        })
    }
}

impl SimpleAdapt {
    /// The watcher cap of pure spin: the threshold or the CPUs.
    fn watchers(&self) -> u8 {
        let cpus = u32::try_from(sync_core::load::cpus()).unwrap_or(u32::MAX);
        self.threshold.max(cpus).clamp(1, 254) as u8
    }
}

impl Policy for SimpleAdapt {
    const INIT: Self = SimpleAdapt {
        threshold: 1,
        step: 10,
    };

    fn initial(&self) -> Config {
        Config::new()
            .wait(WaitPolicy::spin())
            .watchers(Some(self.watchers()))
    }

    /// The paper samples once every other unlock.
    fn sampling_rate(&self) -> u32 {
        2
    }

    /// The paper's monitor senses the number of waiting threads only.
    fn uses_time(&self) -> bool {
        false
    }

    fn adapt(&mut self, stats: &Stats) -> Option<Config> {
        let now = stats.config.wait_policy();
        let spins = if now.parks() {
            Some(now.spin_count())
        } else {
            None
        };
        let config = match self.next(spins, stats.waiting) {
            None => {
                let cap = self.watchers();
                return Some(stats.config.wait(WaitPolicy::spin()).watchers(Some(cap)));
            }
            Some(0) => stats.config.wait(WaitPolicy::block()),
            Some(n) => stats.config.wait(WaitPolicy::spin_then_block(n)),
        };
        Some(config.watchers(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's rules, step by step.
    #[test]
    fn simple_adapt_follows_the_paper() {
        let p = SimpleAdapt {
            threshold: 2,
            step: 10,
        };
        // Nobody waits: pure spin.
        assert_eq!(p.next(Some(30), 0), None);
        // Few wait: ten more spins (from pure spin, from zero).
        assert_eq!(p.next(None, 1), Some(10));
        assert_eq!(p.next(Some(10), 2), Some(20));
        // Many wait: twenty fewer, down to pure blocking.
        assert_eq!(p.next(Some(30), 3), Some(10));
        assert_eq!(p.next(Some(10), 3), Some(0));
    }

    /// However many samples find few waiters, the count stops at
    /// `MAX_SPINS`; a count configured from outside above it comes down
    /// from the cap, not from where it was.
    #[test]
    fn simple_adapt_stops_growing_at_max_spins() {
        let p = SimpleAdapt {
            threshold: 1,
            step: 10,
        };
        let mut spins = Some(0);
        for _ in 0..100_000 {
            spins = p.next(spins, 1);
        }
        assert_eq!(spins, Some(SimpleAdapt::MAX_SPINS));
        assert_eq!(p.next(Some(500_000), 1), Some(SimpleAdapt::MAX_SPINS));
        assert_eq!(p.next(Some(500_000), 2), Some(SimpleAdapt::MAX_SPINS - 20));
    }
}
