//! The default policy: it learns the way of waiting from the lock's own
//! monitor.

use core::time::Duration;

use sync_core::wait::WaitPolicy;

use super::Policy;
use crate::config::Config;
use crate::stats::Stats;

/// The cost of a wake-up (an unpark and the woken thread's return to a
/// CPU) that the learned policy assumes: its cap on watching when threads
/// outnumber cores, and the unit of its "long hold" (16 of them).
///
/// # Examples
///
/// ```
/// assert!(adaptive_lock::WAKE_COST > std::time::Duration::ZERO);
/// ```
pub const WAKE_COST: Duration = Duration::from_micros(30);

/// Holds longer than this many [`WAKE_COST`]s are not worth never parking
/// for.
const LONG_HOLD: u32 = 16;
/// The learned policy's candidate waiting policies ("arms").
const ARMS: usize = 5;
/// Samples an arm is tried for when the policy explores.
const PROBE: u32 = 3;
/// Samples the best arm is kept for after a first exploration; doubled
/// each time an exploration confirms it, up to `MAX_EXPLOIT`.
const MIN_EXPLOIT: u32 = 12;
const MAX_EXPLOIT: u32 = 384;
/// An arm whose rate is below this fraction of the best one's sits out
/// the next explorations.
const DOMINATED: f64 = 0.7;
/// The kept arm stays unless another did this much better: a challenger
/// has only its three windows, the kept arm its whole run, and the best
/// of a few short noisy measures looks better than it is.
const SWITCH: f64 = 1.25;

/// The default policy: it learns which way of waiting gives this lock the
/// most acquisitions for what waiting costs, online, from the lock's own
/// monitor.
///
/// The objective is acquisitions per unit of cost, where a window's cost is
/// its wall time plus the CPU time its waiters burnt watching past their
/// spins ([`Counters::watch_cpu`](crate::Counters::watch_cpu)) divided by
/// the CPUs: waiters that keep every CPU busy for the whole window double
/// its cost. So where all ways of waiting give the same throughput (a
/// holder that sleeps inside the lock), the ones that burn CPU lose, and
/// where spinning is faster it must be faster than the CPU it burns.
///
/// Rules of thumb (spin if the wait is shorter than a wake-up, park if
/// threads outnumber cores) each lose somewhere: a tiny critical section
/// contended by two threads with no work between acquisitions can be
/// fastest when the waiter parks (the holder keeps the cache line and
/// re-acquires alone), while the same lock with some work outside is
/// fastest when the waiter spins. So the policy measures.
/// It chooses between five waiting policies (arms):
///
/// 0. parking_lot's: 3 backed-off spins, 7 yields, park (no yields while
///    more threads wait than there are cores and the lock is held longer
///    than two wake-ups: parking_lot does not watch while others are
///    parked);
/// 1. a long watch: 100 spins, then yields (so that a preempted holder
///    can run), for about twice the estimated hold time per waiter ahead
///    plus 2 µs, capped at 16 wake-ups, or at two [`WAKE_COST`]s when more
///    threads wait than there are cores; then park;
/// 2. park soon: 10 spins, then park;
/// 3. never park: 10 backed-off spins, then yield between polls (wins when
///    the lock is always contended and a yield hands the core to the
///    holder, short and long critical sections alike; once yields are
///    slow, the watchers sleep briefly between polls instead, see
///    [`Watch::pause`](sync_core::wait::Watch::pause));
/// 4. never park with concurrency restriction, tried only while more
///    threads wait than there are CPUs: at most one watcher per CPU
///    ([`Config::watchers`]); a thread that arrives to find that many
///    waiting parks at once, and each release that finds threads parked
///    wakes one of them (first come, first served) to watch in its turn, so
///    only a few threads circulate and the rest sleep (see
///    [`RawAdaptiveLock`'s fairness](crate::RawAdaptiveLock#fairness) for
///    the bound on how long a parked one waits). It saves the CPU that
///    arm 3's watchers spend polling, and costs a wake-up in the release
///    that finds threads parked: which of the two pays depends on the
///    critical section, so both are measured.
///
/// Neither a long watch nor never parking (arms 1, 3 and 4) is explored
/// while more threads wait than there are cores and the lock is held
/// longer than two wake-ups: the watchers would take CPU time that the
/// runnable threads (the holder among them) need, to save at most one
/// wake-up per acquisition. Never parking is not explored either while
/// the lock is held longer than 16 wake-ups (it could save a few percent
/// at most, and would burn the whole hold in every watcher).
///
/// The monitor samples every 256th acquisition and every 8th contended one; at
/// each sample the policy measures the window's acquisitions and cost under the
/// arm in force. It explores (each arm for 3 samples), then keeps the arm with
/// the best rate for 12 samples, explores again, and doubles the time it keeps
/// an arm each time exploration confirms it (an arm stays unless another did
/// 25% better; up to 384 samples); an arm that did less than 70% of the best's
/// rate sits out the next 1, 2, 4 and up to 8 explorations. An arm's rate in an
/// exploration is its windows pooled, the kept arm's whole run since it was
/// chosen included, and so is what the earlier explorations since the load last
/// changed saw of the arm, halved at each exploration (three windows are a
/// short, noisy measure: where every arm's windows are fast or slow by turns, a
/// challenger's three fast ones, against the kept arm's run with its slow ones,
/// kept a slower arm in force for long stretches); a window 64 times
/// slower per acquisition than the arm's median one spans a pause in the lock's
/// use (nobody held or wanted it for a while, or the process was descheduled)
/// and is left out, so that it cannot sink the arm that happened to be in
/// force. When the window rate under the kept arm (smoothed) moves more than 2x
/// from its mean since the arm was chosen, two windows in a row, the load has
/// changed: the policy forgets and explores at once, so the cost of exploring
/// fades while the load stays the same and returns when it changes. Both are
/// means of window rates, so that windows whose lengths merely vary (a thread
/// switch in one, none in the next) do not look like a change. Windows without
/// contention teach nothing and are skipped.
///
/// The policy owns the configuration's wait policy, and the watcher cap
/// while it restricts concurrency (it removes the cap it set when it
/// stops).
///
/// # Examples
///
/// ```
/// use adaptive_lock::AdaptiveMutex;
///
/// let m = AdaptiveMutex::new(0); // the learned policy is the default
/// *m.lock() += 1;
/// assert_eq!(m.stats().total.acquisitions, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Learned {
    arm: usize,
    /// The windows of each arm in the current exploration: acquisitions
    /// and cost (nanoseconds of wall time plus the watchers' CPU time over
    /// the CPUs); zero for a window not measured.
    windows: [[Window; PROBE as usize]; ARMS],
    /// Whether the configuration in force carries this policy's watcher
    /// cap (concurrency restriction).
    restricting: bool,
    /// Samples taken under the current arm.
    samples: u32,
    /// Exploring: the arms still to try after the current one.
    exploring: bool,
    /// The arm kept after the last exploration, and for how long.
    kept: usize,
    keep_for: u32,
    /// Explorations each arm sits out: an arm that did less than
    /// `DOMINATED` of the best's rate sits out 1, then 2, 4 up to 8
    /// explorations, so that a clearly worse arm costs less and less.
    rest: [u8; ARMS],
    /// Explorations in a row in which each arm was dominated.
    strikes: [u8; ARMS],
    /// The arms this exploration skips.
    skip: [bool; ARMS],
    /// The kept arm's windows since it was chosen, its probes included
    /// (pauses left out), pooled: evidence that counts for it in the next
    /// exploration.
    kept_total: Window,
    /// Each arm's evidence from earlier explorations since the load last
    /// changed (its probes, and for an arm kept before, its run), halved
    /// at the end of every exploration so that older windows weigh less.
    history: [Window; ARMS],
    /// The mean of the kept arm's window rates since it was chosen (sum
    /// and count), the same windows' rates smoothed (weight 1/4), and how
    /// many windows in a row the smoothed rate has strayed from the mean
    /// by more than 2x. Both are means of rates, so that they agree on a
    /// steady load however much its windows vary, and neither moves much
    /// for one slow window.
    rate_sum: u64,
    rate_count: u64,
    smoothed: u64,
    strays: u8,
    /// The last windows' rates, not yet in the mean.
    recent: [u64; RECENT],
    recent_count: u64,
}

/// Windows a rate waits before it joins the kept arm's mean: about as many
/// as the smoothed rate takes to move.
const RECENT: usize = 4;

impl Learned {
    /// A learned policy that starts by exploring, from parking_lot's way of
    /// waiting.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = adaptive_lock::Learned::new();
    /// # let _ = p;
    /// ```
    pub const fn new() -> Self {
        Self {
            arm: 0,
            windows: [[Window::ZERO; PROBE as usize]; ARMS],
            restricting: false,
            samples: 0,
            exploring: true,
            kept: 0,
            keep_for: MIN_EXPLOIT,
            rest: [0; ARMS],
            strikes: [0; ARMS],
            skip: [false; ARMS],
            kept_total: Window::ZERO,
            history: [Window::ZERO; ARMS],
            strays: 0,
            rate_sum: 0,
            rate_count: 0,
            smoothed: 0,
            recent: [0; RECENT],
            recent_count: 0,
        }
    }

    /// Whether this exploration tries `arm`.
    fn tries(&self, arm: usize, s: &Stats) -> bool {
        !self.skip[arm] && Self::worth_trying(arm, s)
    }

    /// The waiting policy of `arm` for the lock `s` describes.
    fn policy(arm: usize, s: &Stats) -> WaitPolicy {
        match arm {
            // parking_lot does not spin or yield while others are parked;
            // the crowded waiters of a long hold are, so neither do we
            // (its yields would only burn CPU the holder may need, see
            // `worth_trying`).
            0 if !Self::watching_pays(s) => WaitPolicy::new().yields(0),
            0 => WaitPolicy::new(),
            1 => {
                let wake = WAKE_COST.as_nanos() as u64;
                let cap = if Self::crowded(s) {
                    2 * wake
                } else {
                    16 * wake
                };
                let hold = s.hold_time.as_nanos() as u64;
                // Rounded up to a power of two (of ns), so that the
                // configuration, which waiters re-read and which restarts
                // their watch when it changes, changes rarely.
                let budget = (2 * hold * u64::from(s.waiting.max(1)) + 2_000)
                    .next_power_of_two()
                    .min(cap);
                WaitPolicy::new()
                    .spins(100)
                    .backoff(false)
                    .yields(u32::MAX)
                    .timeout(Some(Duration::from_nanos(budget)))
            }
            2 => WaitPolicy::spin_then_block(10),
            // 3 and 4 (4 with a watcher cap, see `config`).
            _ => WaitPolicy::spin_backoff(),
        }
    }

    /// Whether exploring `arm` can pay. Watching past a few spins (a long
    /// watch, never parking) cannot when threads outnumber cores and the
    /// lock is held longer than two wake-ups: the watchers take a CPU the
    /// runnable threads need (the holder among them) to save at most one
    /// wake-up per acquisition. Never parking cannot either when the lock
    /// is held longer than [`LONG_HOLD`] wake-ups (it saves at most a
    /// wake-up per acquisition, and burns the whole hold per watcher).
    fn worth_trying(arm: usize, s: &Stats) -> bool {
        let watching_pays = Self::watching_pays(s);
        match arm {
            1 => watching_pays,
            3 => watching_pays && s.hold_time <= LONG_HOLD * WAKE_COST,
            4 => Self::crowded(s) && watching_pays,
            _ => true,
        }
    }

    /// Whether watching past a few spins can pay: not while threads
    /// outnumber cores and the lock is held longer than two wake-ups.
    fn watching_pays(s: &Stats) -> bool {
        !Self::crowded(s) || s.hold_time < 2 * WAKE_COST
    }

    /// Whether more threads wait (the one that samples among them) than
    /// there are CPUs.
    fn crowded(s: &Stats) -> bool {
        s.waiting + 1 > s.cpus.max(1)
    }

    /// `arm`'s rate in the current exploration (acquisitions per ms of
    /// cost), 0 if it was not tried: its windows pooled, but for any
    /// window [`PAUSE`] times slower per acquisition than the median one
    /// (it spans a pause in the lock's use, not the arm's doing).
    fn rate(&self, arm: usize) -> u64 {
        self.probed(arm).rate()
    }

    /// `arm`'s evidence, pooled: its windows in the current exploration
    /// (pauses left out), the kept arm's windows since it was chosen, and
    /// what earlier explorations since the load last changed saw of it
    /// (`history`). Nothing if it was not tried in this exploration.
    fn probed(&self, arm: usize) -> Window {
        let fresh = self.fresh(arm);
        if fresh.acquisitions > 0 {
            fresh.plus(&self.history[arm])
        } else {
            fresh
        }
    }

    /// `arm`'s windows in the current exploration, pooled (pauses left
    /// out), with the kept arm's windows since it was chosen.
    fn fresh(&self, arm: usize) -> Window {
        let w = &self.windows[arm];
        let mut per: [u64; PROBE as usize] = core::array::from_fn(|i| w[i].per_acquisition());
        per.sort_unstable();
        let median = per[per.len() / 2];
        let pooled = w
            .iter()
            .filter(|x| x.acquisitions > 0 && x.per_acquisition() <= median.saturating_mul(PAUSE))
            .fold(Window::ZERO, |a, x| a.plus(x));
        if arm == self.kept && pooled.acquisitions > 0 {
            pooled.plus(&self.kept_total)
        } else {
            pooled
        }
    }

    /// The arm with the best rate among those tried in the last
    /// exploration;
    /// parking_lot's (arm 0) if none was measured.
    fn best(&self) -> usize {
        (0..ARMS)
            .filter(|&a| self.rate(a) > 0)
            .max_by_key(|&a| self.rate(a))
            .unwrap_or(0)
    }

    /// The configuration for `arm`: its waiting policy, and the watcher
    /// cap of concurrency restriction for arm 4 while more threads wait
    /// than there are CPUs.
    fn config(&mut self, arm: usize, s: &Stats) -> Config {
        let config = s.config.wait(Self::policy(arm, s));
        if arm == 4 && Self::crowded(s) {
            self.restricting = true;
            config.watchers(Some(s.cpus.clamp(1, 254) as u8))
        } else if self.restricting {
            self.restricting = false;
            config.watchers(None)
        } else {
            config
        }
    }

    /// A window's cost in nanoseconds: its wall time plus its watchers'
    /// CPU time over the CPUs.
    fn cost(s: &Stats) -> u64 {
        let wall = s.window_time.as_nanos().min(u128::from(u64::MAX)) as u64;
        let cpu = s.window.watch_cpu.as_nanos().min(u128::from(u64::MAX)) as u64;
        wall.saturating_add(cpu / u64::from(s.cpus.max(1)))
    }

    /// The arm whose number this policy is on now (0 parking_lot's, 1 long
    /// watch, 2 park soon, 3 never park, 4 never park with concurrency
    /// restriction).
    #[cfg(test)]
    fn arm(&self) -> usize {
        self.arm
    }
}

/// A window taken this many times longer per acquisition than its
/// neighbours spans a pause in the lock's use (nobody held or wanted it
/// for a while, or the process was descheduled), not a way of waiting's
/// doing: a wake-up per acquisition costs a few dozen times a handover
/// between spinning threads, a pause thousands.
const PAUSE: u64 = 64;

/// Acquisitions and their cost in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    acquisitions: u64,
    nanos: u64,
}

impl Window {
    const ZERO: Self = Self {
        acquisitions: 0,
        nanos: 0,
    };

    /// Acquisitions per ms of cost (0 for no acquisitions).
    fn rate(&self) -> u64 {
        self.acquisitions.saturating_mul(1_000_000) / self.nanos.max(1)
    }

    /// Nanoseconds of cost per acquisition (0 for no acquisitions).
    fn per_acquisition(&self) -> u64 {
        self.nanos / self.acquisitions.max(1)
    }

    /// Half the evidence, at the same rate.
    fn halved(&self) -> Self {
        Self {
            acquisitions: self.acquisitions / 2,
            nanos: self.nanos / 2,
        }
    }

    fn plus(&self, other: &Self) -> Self {
        Self {
            acquisitions: self.acquisitions.saturating_add(other.acquisitions),
            nanos: self.nanos.saturating_add(other.nanos),
        }
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
        if w.contended == 0 || s.window_time.is_zero() {
            // Nothing to learn from (or no clock): keep the arm, refresh
            // its parameters.
            return Some(self.config(self.arm, s));
        }
        let window = Window {
            acquisitions: w.acquisitions.max(1),
            nanos: Self::cost(s).max(1),
        };
        if self.exploring {
            self.windows[self.arm][self.samples.min(PROBE - 1) as usize] = window;
        }
        self.samples += 1;
        if self.exploring {
            // An arm that the monitor now says cannot pay ends its probe
            // at once, and does not count.
            let pays = Self::worth_trying(self.arm, s);
            if !pays {
                self.windows[self.arm] = [Window::ZERO; PROBE as usize];
            }
            if self.samples >= PROBE || !pays {
                self.samples = 0;
                let next = (self.arm + 1..ARMS).find(|&a| self.tries(a, s));
                if let Some(next) = next {
                    self.arm = next;
                } else {
                    let best = self.best();
                    let rates: [f64; ARMS] = core::array::from_fn(|a| self.rate(a) as f64);
                    let rate = |a: usize| rates[a];
                    for (a, &r) in rates.iter().enumerate() {
                        if r == 0.0 {
                            continue;
                        }
                        if a != best && r < DOMINATED * rate(best) {
                            self.strikes[a] = (self.strikes[a] + 1).min(4);
                            self.rest[a] = 1 << (self.strikes[a] - 1);
                        } else {
                            self.strikes[a] = 0;
                            self.rest[a] = 0;
                        }
                    }
                    // Hysteresis: the kept arm stays unless another did
                    // clearly (SWITCH) better, so that arms that do about as
                    // well do not take turns, each time with the shortest
                    // keep (exploring half the time).
                    let kept = self.kept;
                    let best = if rates[kept] > 0.0 && rate(kept) * SWITCH >= rate(best) {
                        kept
                    } else {
                        best
                    };
                    self.keep_for = if best == kept {
                        (self.keep_for * 2).min(MAX_EXPLOIT)
                    } else {
                        MIN_EXPLOIT
                    };
                    // What this exploration saw joins each arm's history,
                    // halved with it; the newly kept arm's goes on in its
                    // run instead (counted once).
                    for a in 0..ARMS {
                        let seen = if a == best {
                            Window::ZERO
                        } else {
                            self.fresh(a)
                        };
                        self.history[a] = self.history[a].plus(&seen).halved();
                    }
                    self.kept_total = self.fresh(best);
                    self.kept = best;
                    self.strays = 0;
                    let probes = self.windows[best].iter().filter(|w| w.acquisitions > 0);
                    self.rate_sum = probes.clone().map(Window::rate).sum();
                    self.rate_count = probes.count() as u64;
                    self.smoothed = self.rate_sum / self.rate_count.max(1);
                    self.recent_count = 0;
                    self.arm = best;
                    self.exploring = false;
                }
            }
        } else {
            // A change of load (the smoothed rate moved more than 2x either
            // way from the mean, two windows in a row) starts a fresh
            // exploration at once.
            let rate = window.rate();
            self.smoothed = self.smoothed - self.smoothed / 4 + rate / 4;
            let mean = self.rate_sum / self.rate_count.max(1);
            if self.smoothed * 2 < mean || self.smoothed > mean * 2 {
                self.strays += 1;
            } else {
                self.strays = 0;
            }
            // The window joins the mean after RECENT more, so that the
            // windows that move the smoothed rate are not yet in the mean
            // it is compared with.
            let slot = (self.recent_count % RECENT as u64) as usize;
            if self.recent_count >= RECENT as u64 {
                self.rate_sum = self.rate_sum.saturating_add(self.recent[slot]);
                self.rate_count += 1;
            }
            self.recent[slot] = rate;
            self.recent_count += 1;
            // A window PAUSE times slower than the kept ones spans a pause:
            // it does not count in the kept arm's evidence.
            let pause =
                window.per_acquisition() > self.kept_total.per_acquisition().saturating_mul(PAUSE);
            if !pause {
                self.kept_total = self.kept_total.plus(&window);
            }
            // So does a kept arm that the monitor now says cannot pay (the
            // hold grew past what never parking or a long watch is worth
            // trying for): it is not kept for the rest of its keep.
            if self.strays >= 2 || !Self::worth_trying(self.kept, s) {
                // The kept arm's figures are from another load.
                self.kept_total = Window::ZERO;
                self.history = [Window::ZERO; ARMS];
                self.keep_for = MIN_EXPLOIT;
                self.rest = [0; ARMS];
                self.strikes = [0; ARMS];
                self.samples = self.keep_for;
            }
        }
        if !self.exploring && self.samples >= self.keep_for {
            self.samples = 0;
            self.exploring = true;
            // An arm skipped in this exploration must not win on old figures.
            self.windows = [[Window::ZERO; PROBE as usize]; ARMS];
            for a in 0..ARMS {
                self.skip[a] = a != self.kept && self.rest[a] > 0;
                if self.skip[a] {
                    self.rest[a] -= 1;
                }
            }
            self.arm = (0..ARMS).find(|&a| self.tries(a, s)).unwrap_or(self.kept);
        }
        Some(self.config(self.arm, s))
    }
}

#[cfg(test)]
mod tests;
