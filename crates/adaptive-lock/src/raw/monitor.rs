//! The lock's monitor: the counters and estimates only the holder touches,
//! the values published for `stats`, and the sampled unlock that runs the
//! policy.

use core::time::Duration;
use std::time::Instant;

use sync_core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use sync_core::unwind::Panics;

use super::{DEFAULT_SAMPLING_RATE, LOCKED_BIT, RawAdaptiveLock};
use crate::config::{Config, UNSET};
use crate::policy::Policy;
use crate::stats::{Counters, Stats};

/// Every how many contended acquisitions the monitor samples (a power of
/// two), whatever the sampling rate of uncontended ones.
pub(super) const CONTENDED_RATE: u64 = 8;

/// Weight of the newest sample in the estimates: 1/2^EWMA_SHIFT.
const EWMA_SHIFT: u32 = 2;

/// What only the lock's holder reads and writes: the monitor's counters and
/// estimates, the sampling state and the policy. Protected by the lock
/// itself, so updating it costs plain stores.
///
/// Laid out for the stores an acquisition makes. The lock is aligned to 64
/// bytes and this cell starts a cache line of its own after the lock word's:
/// the word's line is what waiters poll (with the configuration and the
/// waiting count), and the holder's bookkeeping does not take it from them.
/// Within the cell, `repr(C)`, what every acquisition touches comes first
/// (an uncontended one: `acquisitions`, `mask`; a contended one whose watch
/// succeeded: `contended`, `spin_successes`, `spin_polls`), all in its first
/// line, and the policy, however large, last. Left to the compiler, a large
/// policy (the learned one is a few hundred bytes) could come first, and
/// every acquisition then wrote a line that the next holder, on another CPU,
/// had to fetch while it held the lock.
#[repr(C, align(64))]
pub(super) struct Holder<P> {
    pub(super) acquisitions: u64,
    /// The sampling rate minus one (a power of two minus one): acquisition
    /// `n` is sampled when `n & mask == 0`.
    pub(super) mask: u64,
    pub(super) contended: u64,
    pub(super) spin_successes: u64,
    pub(super) spin_polls: u32,
    /// Whether the policy's `initial` configuration and sampling rate are
    /// in force (`false` in a lock made by a `const` constructor, until its
    /// first sample).
    pub(super) configured: bool,
    /// Whether a sampled acquisition is in progress.
    pub(super) sampling: bool,
    /// Whether the policy reads times (else the clock is never read).
    pub(super) timed: bool,
    // Written only by acquisitions that parked, waited past their spins,
    // or are sampled:
    pub(super) parks: u64,
    pub(super) handoffs: u64,
    pub(super) hold_ns: u64,
    pub(super) park_wait_ns: u64,
    /// CPU nanoseconds waiters spent watching past their spins (see
    /// [`Counters::watch_cpu`]).
    pub(super) watch_cpu_ns: u64,
    /// Panics of the policy caught (see [`Counters::policy_panics`]).
    pub(super) policy_panics: u64,
    /// Releases under a priority scheduler in a row that woke a waiter
    /// other than the longest-parked one (see [`PRIORITY_AGING`]).
    pub(super) passed_over: u32,
    /// When the sampled acquisition in progress began, if it reads times.
    pub(super) sample_start: Option<Instant>,
    /// The counters and the time at the previous sample.
    pub(super) last: Counters,
    pub(super) last_at: Option<Instant>,
    pub(super) policy: P,
}

/// A sampling rate as a power of two: at least 1, at most 2^31 (the largest
/// power of two of a `u32`, so that `next_power_of_two` cannot overflow).
const fn rate_of(rate: u32) -> u32 {
    if rate <= 1 {
        1
    } else if rate > 1 << 31 {
        1 << 31
    } else {
        rate.next_power_of_two()
    }
}

impl<P> Holder<P> {
    pub(super) const fn new(policy: P, rate: u32, configured: bool) -> Self {
        let rate = rate_of(rate);
        Self {
            configured,
            acquisitions: 0,
            // An unconfigured lock samples its first acquisition, which
            // configures it.
            mask: if configured { rate as u64 - 1 } else { 0 },
            sampling: false,
            sample_start: None,
            timed: true,
            contended: 0,
            spin_successes: 0,
            parks: 0,
            handoffs: 0,
            hold_ns: 0,
            spin_polls: 0,
            park_wait_ns: 0,
            watch_cpu_ns: 0,
            policy_panics: 0,
            passed_over: 0,
            last: Counters {
                acquisitions: 0,
                contended: 0,
                spin_successes: 0,
                parks: 0,
                handoffs: 0,
                timeouts: 0,
                policy_panics: 0,
                watch_cpu: Duration::ZERO,
            },
            last_at: None,
            policy,
        }
    }

    #[inline]
    fn counters(&self, timeouts: u64) -> Counters {
        Counters {
            acquisitions: self.acquisitions,
            contended: self.contended,
            spin_successes: self.spin_successes,
            parks: self.parks,
            handoffs: self.handoffs,
            timeouts,
            policy_panics: self.policy_panics,
            watch_cpu: Duration::from_nanos(self.watch_cpu_ns),
        }
    }
}

/// The monitor's values as last published by a sample, for
/// [`RawAdaptiveLock::stats`] while the lock is held.
pub(super) struct Published {
    acquisitions: AtomicU64,
    contended: AtomicU64,
    spin_successes: AtomicU64,
    parks: AtomicU64,
    handoffs: AtomicU64,
    hold_ns: AtomicU64,
    park_wait_ns: AtomicU64,
    policy_panics: AtomicU64,
    watch_cpu_ns: AtomicU64,
    spin_polls: AtomicU32,
}

impl Published {
    sync_core::const_unless_loom! {
        pub(super) fn new() -> Self {
            Self {
                acquisitions: AtomicU64::new(0),
                contended: AtomicU64::new(0),
                spin_successes: AtomicU64::new(0),
                parks: AtomicU64::new(0),
                handoffs: AtomicU64::new(0),
                hold_ns: AtomicU64::new(0),
                park_wait_ns: AtomicU64::new(0),
                policy_panics: AtomicU64::new(0),
                watch_cpu_ns: AtomicU64::new(0),
                spin_polls: AtomicU32::new(0),
            }
        }
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// The locks whose policy the calling thread runs now, innermost
    /// first: a list of [`PolicyScope`]s on the thread's stack (a policy
    /// may take another adaptive lock, whose release runs that lock's
    /// policy in turn).
    static IN_POLICY: core::cell::Cell<*const PolicyScope> = const { core::cell::Cell::new(core::ptr::null()) };
}

/// Marks the calling thread as running the policy of the lock at `lock`
/// (its address) until dropped, so that a `lock()` of that lock from the
/// policy, which would wait for ever for the lock its own thread holds,
/// panics instead (see [`in_policy_of`]).
pub(super) struct PolicyScope {
    #[cfg(not(loom))]
    lock: usize,
    #[cfg(not(loom))]
    outer: *const PolicyScope,
}

impl PolicyScope {
    /// Runs `f` inside a scope for the lock at `lock`.
    #[inline]
    pub(super) fn run<R>(lock: usize, f: impl FnOnce() -> R) -> R {
        #[cfg(not(loom))]
        {
            let scope = PolicyScope {
                lock,
                outer: IN_POLICY.try_with(|c| c.get()).unwrap_or(core::ptr::null()),
            };
            // Registered only while it is alive and pinned on this stack
            // frame: `Drop` unlinks it (also on unwinding), and scopes nest,
            // so the list always points to live scopes. A thread whose
            // thread-locals are gone registers nothing (the check is then
            // skipped, as under loom).
            let _ = IN_POLICY.try_with(|c| c.set(&scope));
            // `scope` is dropped in place after `f` returns (or unwinds).
            f()
        }
        #[cfg(loom)]
        {
            let _ = lock;
            f()
        }
    }
}

#[cfg(not(loom))]
impl Drop for PolicyScope {
    fn drop(&mut self) {
        let _ = IN_POLICY.try_with(|c| {
            if core::ptr::eq(c.get(), self) {
                c.set(self.outer);
            }
        });
    }
}

/// Whether the calling thread is running the policy of the lock at `lock`
/// (its own, or one further out).
#[inline]
pub(super) fn in_policy_of(lock: usize) -> bool {
    #[cfg(not(loom))]
    {
        let mut scope = IN_POLICY.try_with(|c| c.get()).unwrap_or(core::ptr::null());
        while !scope.is_null() {
            // SAFETY: the list holds only live scopes of this thread's
            // stack, innermost first (see `PolicyScope::run`).
            let s = unsafe { &*scope };
            if s.lock == lock {
                return true;
            }
            scope = s.outer;
        }
        false
    }
    #[cfg(loom)]
    {
        let _ = lock;
        false
    }
}

/// The clock, except under loom, whose executions must not depend on it.
#[inline]
pub(super) fn now() -> Option<Instant> {
    if cfg!(loom) {
        None
    } else {
        Some(Instant::now())
    }
}

pub(super) fn ewma(old: u64, new: u64) -> u64 {
    if old == 0 {
        new
    } else {
        old - (old >> EWMA_SHIFT) + (new >> EWMA_SHIFT)
    }
}

/// The calling thread's CPU time in nanoseconds, where the platform has a
/// per-thread CPU clock (not under loom, whose executions must not depend
/// on it).
#[inline]
pub(super) fn thread_cpu_ns() -> Option<u64> {
    #[cfg(all(unix, not(loom)))]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the call only writes
        // it.
        let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if r != 0 {
            return None;
        }
        Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
    #[cfg(not(all(unix, not(loom))))]
    {
        None
    }
}

/// The CPUs the process may use, as the monitor reports them
/// ([`Stats::cpus`]): the family's count.
fn cpus() -> u32 {
    u32::try_from(sync_core::load::cpus()).unwrap_or(u32::MAX)
}

impl<P: Policy> RawAdaptiveLock<P> {
    /// A snapshot of the monitor.
    ///
    /// Exact if the lock is free when called (it is taken for the read
    /// without counting as an acquisition): after the threads that used it
    /// have been joined, the counters equal what they did. While another
    /// thread holds it, the values published by the last sample (up to k
    /// acquisitions old, k the sampling rate; fields may come from different
    /// samples).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// for _ in 0..3 {
    ///     raw.lock();
    ///     // SAFETY: this thread holds the lock.
    ///     unsafe { raw.unlock() };
    /// }
    /// assert_eq!(raw.stats().total.acquisitions, 3);
    /// ```
    pub fn stats(&self) -> Stats {
        let timeouts = self.timeouts.load(Ordering::Relaxed);
        let waiting = self.waiting.load(Ordering::Relaxed);
        let config = self.config();
        if self.try_lock_uncounted() {
            // SAFETY: we hold the lock, so no other thread touches `holder`.
            let stats = self.holder.with(|h| unsafe {
                let h = &*h;
                let total = h.counters(timeouts);
                Stats {
                    waiting,
                    total,
                    window: total.since(&h.last),
                    window_time: Duration::ZERO,
                    hold_time: Duration::from_nanos(h.hold_ns),
                    spin_polls: h.spin_polls,
                    park_wait: Duration::from_nanos(h.park_wait_ns),
                    config,
                    cpus: cpus(),
                }
            });
            // Release: pairs with the Acquire of the next lock.
            if self
                .state
                .compare_exchange(LOCKED_BIT, 0, Ordering::Release, Ordering::Relaxed)
                .is_err()
            {
                self.unlock_slow(false);
            }
            return stats;
        }
        let p = &self.published;
        // Relaxed: a snapshot that orders nothing.
        let total = Counters {
            acquisitions: p.acquisitions.load(Ordering::Relaxed),
            contended: p.contended.load(Ordering::Relaxed),
            spin_successes: p.spin_successes.load(Ordering::Relaxed),
            parks: p.parks.load(Ordering::Relaxed),
            handoffs: p.handoffs.load(Ordering::Relaxed),
            timeouts,
            policy_panics: p.policy_panics.load(Ordering::Relaxed),
            watch_cpu: Duration::from_nanos(p.watch_cpu_ns.load(Ordering::Relaxed)),
        };
        Stats {
            waiting,
            total,
            window: Counters::default(),
            window_time: Duration::ZERO,
            hold_time: Duration::from_nanos(p.hold_ns.load(Ordering::Relaxed)),
            spin_polls: p.spin_polls.load(Ordering::Relaxed),
            park_wait: Duration::from_nanos(p.park_wait_ns.load(Ordering::Relaxed)),
            config,
            cpus: cpus(),
        }
    }

    /// The monitor's part of an acquisition (the caller now holds the lock).
    #[inline]
    pub(super) fn on_acquire(&self) {
        // SAFETY: the caller holds the lock, so no other thread touches
        // `holder`.
        let sample = self.holder.with_mut(|h| unsafe {
            let h = &mut *h;
            h.acquisitions += 1;
            h.acquisitions & h.mask == 0
        });
        if sample {
            self.begin_sample();
        }
    }

    #[cold]
    pub(super) fn begin_sample(&self) {
        // SAFETY: the caller holds the lock.
        self.holder.with_mut(|h| unsafe {
            let h = &mut *h;
            h.sampling = true;
            h.sample_start = if h.timed { now() } else { None };
        });
    }

    /// Whether the acquisition being released is sampled (the caller holds
    /// the lock).
    #[inline]
    pub(super) fn sampling(&self) -> bool {
        // SAFETY: the caller holds the lock.
        self.holder.with(|h| unsafe { (*h).sampling })
    }

    /// The release of a sampled acquisition, off the fast path: the monitor
    /// and the policy run, then the lock is released. A panic of the policy
    /// was caught and counted; its payload (whose `Drop` is user code) is
    /// dropped once the lock is released, and the unlock never unwinds
    /// (rule 4 of [`sync_core::unwind`]).
    #[cold]
    pub(super) fn unlock_sampled(&self, fair: bool) {
        // The policy runs inside the scope: its `lock()` of this lock
        // panics (and is caught as its panic) instead of waiting for ever.
        let panics = PolicyScope::run(self as *const Self as usize, || self.end_sample());
        self.release(fair);
        // Every payload, not only the first, is dropped here.
        drop(panics);
    }

    /// Closes a sampled acquisition: measures its hold time, runs the
    /// policy (the closely coupled loop) and publishes the counters. Every
    /// call into the policy is caught: a panic is counted in
    /// `policy_panics`, the call's result is replaced by the default (the
    /// configuration stays as it was), and the panics' payloads are
    /// returned for the caller to drop once the lock is released.
    #[cold]
    fn end_sample(&self) -> Panics {
        let mut panics = Panics::new();
        // A lock made by the `const` constructor takes its policy's own
        // configuration and sampling rate at its first sample (a `const fn`
        // cannot call the policy's methods).
        // SAFETY: the caller holds the lock.
        let initial = self.holder.with_mut(|h| unsafe {
            let h = &mut *h;
            if h.configured {
                return None;
            }
            h.configured = true;
            let mut caught = 0;
            let rate = panics
                .catch(|| h.policy.sampling_rate())
                .unwrap_or_else(|| {
                    caught += 1;
                    DEFAULT_SAMPLING_RATE
                });
            h.mask = u64::from(rate_of(rate)) - 1;
            h.timed = panics.catch(|| h.policy.uses_time()).unwrap_or_else(|| {
                caught += 1;
                true
            });
            let initial = panics.catch(|| h.policy.initial());
            if initial.is_none() {
                caught += 1;
            }
            h.policy_panics += caught;
            initial
        });
        if let Some(config) = initial {
            // Only over the constructor's placeholder: a configuration set
            // by `configure` before this first sample is kept (`to_bits`
            // never yields `UNSET`, so this CAS cannot mistake one for it).
            // Relaxed: the configuration is advice; waiters re-read it.
            let _ = self.config.compare_exchange(
                UNSET,
                config.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        // SAFETY: the caller holds the lock.
        let end = if self.holder.with(|h| unsafe { (*h).timed }) {
            now()
        } else {
            None
        };
        let timeouts = self.timeouts.load(Ordering::Relaxed);
        let waiting = self.waiting.load(Ordering::Relaxed);
        let current = self.config.load(Ordering::Relaxed);
        // SAFETY: the caller holds the lock.
        let next = self.holder.with_mut(|h| unsafe {
            let h = &mut *h;
            h.sampling = false;
            if let (Some(s), Some(e)) = (h.sample_start.take(), end) {
                let ns = e.duration_since(s).as_nanos().min(u64::MAX as u128) as u64;
                h.hold_ns = ewma(h.hold_ns, ns.max(1));
            }
            let total = h.counters(timeouts);
            let window_time = match (h.last_at, end) {
                (Some(a), Some(e)) => e.duration_since(a),
                _ => Duration::ZERO,
            };
            let stats = Stats {
                waiting,
                total,
                window: total.since(&h.last),
                window_time,
                hold_time: Duration::from_nanos(h.hold_ns),
                spin_polls: h.spin_polls,
                park_wait: Duration::from_nanos(h.park_wait_ns),
                config: Config::from_bits(current),
                cpus: cpus(),
            };
            h.last = total;
            h.last_at = end;
            // After a panic the policy is called again at the next sample,
            // in whatever state the panic left it (as a lock_api mutex's
            // data after a panic: no poisoning).
            let next = panics.catch(|| h.policy.adapt(&stats));
            if next.is_none() {
                h.policy_panics += 1;
            }
            let p = &self.published;
            // Relaxed: `stats` reads a snapshot that orders nothing.
            p.acquisitions.store(total.acquisitions, Ordering::Relaxed);
            p.contended.store(total.contended, Ordering::Relaxed);
            p.spin_successes
                .store(total.spin_successes, Ordering::Relaxed);
            p.parks.store(total.parks, Ordering::Relaxed);
            p.handoffs.store(total.handoffs, Ordering::Relaxed);
            p.hold_ns.store(h.hold_ns, Ordering::Relaxed);
            p.park_wait_ns.store(h.park_wait_ns, Ordering::Relaxed);
            p.spin_polls.store(h.spin_polls, Ordering::Relaxed);
            p.policy_panics.store(h.policy_panics, Ordering::Relaxed);
            p.watch_cpu_ns.store(h.watch_cpu_ns, Ordering::Relaxed);
            next.flatten()
        });
        if let Some(next) = next {
            let bits = next.to_bits();
            if bits != current {
                // Relaxed: the configuration is advice; waiters re-read it.
                self.config.store(bits, Ordering::Relaxed);
            }
        }
        panics
    }
}
