//! Adaptation policies: the user-provided part of the feedback loop.

use core::time::Duration;

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
/// `adapt` runs while the lock is held: keep it short (a few comparisons),
/// and do not lock the same lock in it. A panic in `adapt` unwinds out of
/// the unlock with the lock still held.
///
/// # Examples
///
/// A policy that parks as soon as more than two threads wait:
///
/// ```
/// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex, Config, Policy, Stats};
/// use sync_core::wait::WaitPolicy;
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
    /// sample.
    fn initial(&self) -> Config {
        Config::new()
    }

    /// Every how many acquisitions the monitor samples and the policy runs
    /// (rounded up to a power of two). The default is
    /// [`DEFAULT_SAMPLING_RATE`](crate::DEFAULT_SAMPLING_RATE).
    fn sampling_rate(&self) -> u32 {
        DEFAULT_SAMPLING_RATE
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
/// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex, Static};
/// use sync_core::wait::WaitPolicy;
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
/// combined lock).
///
/// # Examples
///
/// ```
/// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex, SimpleAdapt};
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
    /// The spins after one sample with `waiting` threads, from `spins`;
    /// `None` is pure spin.
    fn next(&self, spins: Option<u32>, waiting: u32) -> Option<u32> {
        if waiting == 0 {
            return None;
        }
        let spins = spins.unwrap_or(0);
        Some(if waiting <= self.threshold {
            spins.saturating_add(self.step)
        } else {
            spins.saturating_sub(self.step.saturating_mul(2))
        })
    }
}

impl Policy for SimpleAdapt {
    const INIT: Self = SimpleAdapt {
        threshold: 1,
        step: 10,
    };

    fn initial(&self) -> Config {
        Config::new().wait(WaitPolicy::spin())
    }

    /// The paper samples once every other unlock.
    fn sampling_rate(&self) -> u32 {
        2
    }

    fn adapt(&mut self, stats: &Stats) -> Option<Config> {
        let now = stats.config.wait_policy();
        let spins = if now.parks() {
            Some(now.spin_count())
        } else {
            None
        };
        let wait = match self.next(spins, stats.waiting) {
            None => WaitPolicy::spin(),
            Some(0) => WaitPolicy::block(),
            Some(n) => WaitPolicy::spin_then_block(n),
        };
        Some(stats.config.wait(wait))
    }
}

/// What a wake-up costs on a typical virtual machine (`base/park-unpark`
/// measures about 30-40 µs for two): the learned policy's cap on spinning
/// when threads outnumber cores.
pub const WAKE_COST: Duration = Duration::from_micros(30);

/// The default policy: a spin budget learned from the lock's own history,
/// as glibc's adaptive mutex and HotSpot's monitors do, bounded by what a
/// wake-up costs and by the cores there are.
///
/// On every sample (every 64th unlock):
///
/// * **Who may spin.** Spinning is only useful while the holder runs: with
///   the holder and the watching waiters no more than the cores, every
///   registered waiter watches; beyond that, only `cpus - 1` watch and the
///   rest park at once (so 16 threads on 2 cores do not spin the holder off
///   its core).
/// * **How long.** The budget is a time, `conditional(budget)`: twice the
///   estimated hold time (a waiter arriving at a random point of a hold
///   waits half of it on average, plus the waiters ahead), between 1 µs and
///   a cap. The cap is [`WAKE_COST`] when threads outnumber cores (spinning
///   longer than a wake-up costs more than parking, the 2-competitive
///   choice); with spare cores, spinning keeps the handover at a cache miss
///   instead of a wake-up, so the cap is 16 wake-ups.
/// * **Whether it works.** If fewer than half of the window's contended
///   acquisitions were won while watching, the budget halves (down to
///   parking at once); when most are, it returns to the estimate. A lock
///   whose critical sections are shorter than a cache-line transfer
///   (`hold_time` under 200 ns) and that is contended by more threads than
///   cores parks almost at once: the holder then keeps the lock's line
///   and re-acquires without misses, which is parking_lot's winning regime.
///
/// # Examples
///
/// ```
/// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex};
///
/// let m = AdaptiveMutex::<i32>::new(0); // the learned policy is the default
/// *m.lock() += 1;
/// assert_eq!(m.stats().total.acquisitions, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Learned {
    /// The spin budget, in nanoseconds (0: park at once).
    budget_ns: u64,
}

impl Learned {
    /// A learned policy starting from parking_lot's behaviour.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = adaptive_lock::Learned::new();
    /// # let _ = p;
    /// ```
    pub const fn new() -> Self {
        Self { budget_ns: 0 }
    }
}

impl Default for Learned {
    fn default() -> Self {
        Self::new()
    }
}

impl Policy for Learned {
    const INIT: Self = Learned::new();

    fn adapt(&mut self, s: &Stats) -> Option<Config> {
        let w = s.window;
        if w.contended == 0 {
            // Nothing to learn from: keep what works.
            return None;
        }
        let cpus = s.cpus.max(1);
        let crowded = s.waiting + 1 > cpus;
        let hold = s.hold_time.as_nanos() as u64;
        let cap = if crowded {
            WAKE_COST.as_nanos() as u64
        } else {
            16 * WAKE_COST.as_nanos() as u64
        };
        let estimate = (2 * hold).clamp(1_000, cap);
        let won = w.spin_successes * 2 >= w.contended;
        self.budget_ns = if !won { self.budget_ns / 2 } else { estimate };
        if self.budget_ns < 500 {
            self.budget_ns = 0;
        }
        let wait = if self.budget_ns == 0 {
            // Keep a short watch so a waiter can still win the lock it
            // sees freed at once (and learn that it can).
            WaitPolicy::spin_then_block(8)
        } else {
            WaitPolicy::conditional(Duration::from_nanos(self.budget_ns))
        };
        let watchers = if crowded {
            Some(cpus.saturating_sub(1).clamp(1, 254) as u8)
        } else {
            None
        };
        Some(s.config.wait(wait).watchers(watchers))
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
}
