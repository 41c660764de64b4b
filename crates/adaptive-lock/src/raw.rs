//! The raw adaptive lock: parking_lot's lock word and parking protocol, with
//! a monitor, a mutable configuration and a policy in the unlock path.

use core::time::Duration;
use std::time::Instant;

use sync_core::parking_lot::{self, FilterOp, ParkResult, ParkToken, UnparkResult, UnparkToken};
use sync_core::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};
use sync_core::sync::cell::UnsafeCell;
use sync_core::unwind::{self, Panics, Payload};
use sync_core::wait::{Next, WaitPolicy, Watch};

use crate::config::{Config, UNSET};
use crate::policy::Policy;
use crate::stats::{Counters, Stats};

/// The lock is held.
const LOCKED_BIT: u8 = 0b01;
/// Threads may be parked on the lock's address.
const PARKED_BIT: u8 = 0b10;

/// The unpark token of a release that leaves the woken thread to compete.
const TOKEN_NORMAL: UnparkToken = UnparkToken(0);
/// The unpark token of a release that hands the lock to the woken thread.
const TOKEN_HANDOFF: UnparkToken = UnparkToken(1);

/// The sampling rate a policy gets if it does not name one.
pub const DEFAULT_SAMPLING_RATE: u32 = 256;

/// Every how many contended acquisitions the monitor samples (a power of
/// two), whatever the sampling rate of uncontended ones.
const CONTENDED_RATE: u64 = 8;

/// Weight of the newest sample in the estimates: 1/2^EWMA_SHIFT.
const EWMA_SHIFT: u32 = 2;

/// Aging of the priority scheduler: after this many releases in a row that
/// woke a waiter other than the longest-parked one, the next release hands
/// the lock to the longest-parked waiter, whatever its priority. Under loom
/// 1, so that a model with three threads reaches the aged handoff.
const PRIORITY_AGING: u32 = if cfg!(loom) { 1 } else { 16 };

/// What only the lock's holder reads and writes: the monitor's counters and
/// estimates, the sampling state and the policy. Protected by the lock
/// itself, so updating it costs plain stores on the lock's own cache line.
struct Holder<P> {
    /// Whether the policy's `initial` configuration and sampling rate are
    /// in force (`false` in a lock made by a `const` constructor, until its
    /// first sample).
    configured: bool,
    acquisitions: u64,
    /// The sampling rate minus one (a power of two minus one): acquisition
    /// `n` is sampled when `n & mask == 0`.
    mask: u64,
    /// When the sampled acquisition in progress began, if one is.
    sampling: bool,
    sample_start: Option<Instant>,
    /// Whether the policy reads times (else the clock is never read).
    timed: bool,
    contended: u64,
    spin_successes: u64,
    parks: u64,
    handoffs: u64,
    hold_ns: u64,
    spin_polls: u32,
    park_wait_ns: u64,
    /// CPU nanoseconds waiters spent watching past their spins (see
    /// [`Counters::watch_cpu`]).
    watch_cpu_ns: u64,
    /// Panics of the policy caught (see [`Counters::policy_panics`]).
    policy_panics: u64,
    /// Releases under a priority scheduler in a row that woke a waiter
    /// other than the longest-parked one (see [`PRIORITY_AGING`]).
    passed_over: u32,
    /// The counters and the time at the previous sample.
    last: Counters,
    last_at: Option<Instant>,
    policy: P,
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
    const fn new(policy: P, rate: u32, configured: bool) -> Self {
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
struct Published {
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
        fn new() -> Self {
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

/// A lock that monitors itself and adapts its waiting policy: the raw lock
/// under [`AdaptiveMutex`](crate::AdaptiveMutex).
///
/// # Internal state
///
/// `state` is parking_lot's lock word:
///
/// | `state` | meaning |
/// |---|---|
/// | `0` | free, nobody parked |
/// | `LOCKED` | held, nobody parked |
/// | `LOCKED \| PARKED` | held, threads may be parked on the lock's address |
/// | `PARKED` | free, threads parked (a woken one is on its way, or a timed one leaving) |
///
/// `lock` sets `LOCKED` with one CAS from `0`; `unlock` clears it with one
/// CAS from `LOCKED`. Any other word sends them to the slow paths: a waiter
/// watches the word as the [`WaitPolicy`] says, then sets `PARKED` and parks
/// with a validation that the word is still `LOCKED | PARKED` (under the
/// parking lot's queue lock, so an unlock that follows finds it parked); an
/// unlock that sees `PARKED` wakes one parked thread and, in the parking
/// lot's callback, stores `PARKED` or `0` (barging) or leaves `LOCKED` set
/// and hands the lock to the woken thread (`TOKEN_HANDOFF`).
///
/// # Monitor
///
/// The counters and estimates live in a cell that only the lock's holder
/// touches: a contended acquisition records how it waited once it holds the
/// lock, and the uncontended path adds one to a counter on the lock's own
/// cache line. Every k-th acquisition (k the policy's sampling rate), and
/// every 8th contended one, reads the clock at lock and unlock; that unlock runs the policy, stores the
/// configuration it returns (one relaxed store that every waiter sees at its
/// next poll) and publishes the counters for [`stats`](Self::stats). The
/// only shared sensor is `waiting`, which waiters increment and decrement
/// on the slow path.
///
/// # Fairness
///
/// By default a released lock may be taken by a running thread before the
/// parked thread woken for it (barging), as parking_lot's; a thread parked
/// for long is eventually handed the lock (parking_lot's fairness timer).
/// [`Scheduler::HANDOFF`](crate::Scheduler::HANDOFF) and
/// [`unlock_fair`](Self::unlock_fair) hand it over at every release.
/// Waiters still watching (spinning, yielding) are not ordered among
/// themselves, but a handoff never passes one by for ever: a waiter that
/// watches while the lock is handed over to a parked thread parks at its
/// next poll, whatever its waiting policy, and so joins the queue. Under
/// [`Scheduler::HANDOFF`](crate::Scheduler::HANDOFF) every waiter is
/// therefore handed the lock after at most one handoff that passes it by
/// plus one per waiter queued ahead of it.
///
/// A priority scheduler wakes the parked waiter of highest priority (FCFS
/// among equals), with aging: after 16 releases in a row that woke another
/// waiter than the longest-parked one, the next release hands the lock to
/// the longest-parked waiter, whatever its priority (also under a barging
/// priority scheduler). So at least every 17th release that finds threads
/// parked serves the longest-parked one, however many threads of higher
/// priority keep arriving; between those, priority is strict. Under
/// `Scheduler::PRIORITY.handoff(true)` a waiter with `k` threads parked
/// ahead of it is handed the lock within `17 * (k + 1)` such releases.
/// Under the barging `Scheduler::PRIORITY`, a waiter woken for its priority
/// competes with running threads and may park again at the back of the
/// queue (parking_lot's fairness timer then hands it the lock).
///
/// A watcher cap ([`Config::watchers`], set by [`Learned`](crate::Learned)
/// for its never-parking arm when more threads wait than there are CPUs,
/// and by [`SimpleAdapt`](crate::SimpleAdapt) with pure spin) restricts
/// concurrency: a thread that arrives to find that many threads waiting
/// parks at once instead of watching, so only a few threads circulate and
/// the rest sleep. Passive threads are rotated in, not left behind: the
/// FCFS schedulers wake the longest-parked thread at every release that
/// finds threads parked, so a thread parked behind `k` others is woken to
/// watch (whatever the cap) after at most `k + 1` such releases, and
/// parking_lot's fairness timer still hands the lock to the longest-parked
/// thread about every millisecond of releases. A woken thread then watches
/// and competes as any watcher.
///
/// # Examples
///
/// ```
/// use adaptive_lock::{RawAdaptiveLock, Static};
/// use sync_core::wait::WaitPolicy;
///
/// let raw = RawAdaptiveLock::with_policy(Static(WaitPolicy::block()));
/// raw.lock();
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// assert_eq!(raw.stats().total.acquisitions, 1);
/// ```
#[repr(C)]
pub struct RawAdaptiveLock<P = crate::Learned> {
    state: AtomicU8,
    /// Handoffs so far, wrapping: a watching waiter that sees it move has
    /// been passed over by a handoff, and joins the queue.
    handoff_epoch: AtomicU16,
    /// Threads in the slow path of a lock call (the registration sensor).
    waiting: AtomicU32,
    /// The current [`Config`], packed.
    config: AtomicU64,
    holder: UnsafeCell<Holder<P>>,
    /// Timed waits that gave up (written by the waiters, which do not hold
    /// the lock).
    timeouts: AtomicU64,
    published: Published,
}

// SAFETY: the lock word is atomic; `holder` (and the policy in it) is
// touched only by the thread that holds the lock, one thread at a time, so
// the policy needs `Send`, as a `Mutex<P>` would.
unsafe impl<P: Send> Send for RawAdaptiveLock<P> {}
// SAFETY: as above.
unsafe impl<P: Send> Sync for RawAdaptiveLock<P> {}

/// The clock, except under loom, whose executions must not depend on it.
#[inline]
fn now() -> Option<Instant> {
    if cfg!(loom) {
        None
    } else {
        Some(Instant::now())
    }
}

fn ewma(old: u64, new: u64) -> u64 {
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
fn thread_cpu_ns() -> Option<u64> {
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

fn cpus() -> u32 {
    #[cfg(not(loom))]
    {
        static CPUS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        *CPUS.get_or_init(|| {
            std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1)
        })
    }
    #[cfg(loom)]
    {
        2
    }
}

impl<P: Policy> RawAdaptiveLock<P> {
    sync_core::const_unless_loom! {
        /// An unlocked lock with the policy's constant ([`Policy::INIT`]).
        /// It starts with the default configuration ([`Config::new`]); its
        /// first acquisition applies the policy's
        /// [`initial`](Policy::initial) configuration and
        /// [`sampling_rate`](Policy::sampling_rate) (a `const fn` cannot
        /// call them), unless [`configure`](Self::configure) was called
        /// before: a configuration set by `configure` is never replaced by
        /// the initial one. [`with_policy`](Self::with_policy) applies them
        /// at once.
        pub fn new() -> Self {
            Self {
                state: AtomicU8::new(0),
                handoff_epoch: AtomicU16::new(0),
                waiting: AtomicU32::new(0),
                // Reads as `Config::new()` until the first sample applies
                // the policy's initial configuration, unless `configure`
                // replaced it first.
                config: AtomicU64::new(UNSET),
                holder: UnsafeCell::new(Holder::new(P::INIT, DEFAULT_SAMPLING_RATE, false)),
                timeouts: AtomicU64::new(0),
                published: Published::new(),
            }
        }
    }

    /// An unlocked lock run by `policy`: its initial configuration and its
    /// sampling rate (rounded up to a power of two, at most 2^31).
    ///
    /// # Panics
    ///
    /// If the policy's [`initial`](Policy::initial),
    /// [`sampling_rate`](Policy::sampling_rate) or
    /// [`uses_time`](Policy::uses_time) panics, the panic goes on to the
    /// caller (no lock exists yet). Once the lock exists, its policy's
    /// panics are caught instead (see [`Policy`#panics]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{RawAdaptiveLock, SimpleAdapt};
    /// let raw = RawAdaptiveLock::with_policy(SimpleAdapt { threshold: 2, step: 10 });
    /// assert!(!raw.is_locked());
    /// ```
    pub fn with_policy(policy: P) -> Self {
        let config = policy.initial().to_bits();
        let rate = policy.sampling_rate();
        let timed = policy.uses_time();
        let mut holder = Holder::new(policy, rate, true);
        holder.timed = timed;
        Self {
            state: AtomicU8::new(0),
            handoff_epoch: AtomicU16::new(0),
            waiting: AtomicU32::new(0),
            config: AtomicU64::new(config),
            holder: UnsafeCell::new(holder),
            timeouts: AtomicU64::new(0),
            published: Published::new(),
        }
    }

    /// Takes the lock, waiting as the current configuration says.
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// raw.lock();
    /// assert!(raw.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn lock(&self) {
        // Acquire: pairs with the Release of the unlock that freed the lock.
        if self
            .state
            .compare_exchange_weak(0, LOCKED_BIT, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow(None, 0);
        }
        self.on_acquire();
    }

    /// Takes the lock with `priority` (higher first): a release under a
    /// priority scheduler wakes the parked waiter of highest priority. Under
    /// other schedulers, the same as [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// raw.lock_with_priority(7);
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn lock_with_priority(&self, priority: usize) {
        // Acquire: pairs with the Release of the unlock that freed the lock.
        if self
            .state
            .compare_exchange_weak(0, LOCKED_BIT, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow(None, priority);
        }
        self.on_acquire();
    }

    /// Takes the lock if it is free now.
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// assert!(raw.try_lock());
    /// assert!(!raw.try_lock());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn try_lock(&self) -> bool {
        if self.try_lock_uncounted() {
            self.on_acquire();
            true
        } else {
            false
        }
    }

    #[inline]
    fn try_lock_uncounted(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        while state & LOCKED_BIT == 0 {
            // Acquire: pairs with the Release of the unlock that freed it.
            match self.state.compare_exchange_weak(
                state,
                state | LOCKED_BIT,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(s) => state = s,
            }
        }
        false
    }

    /// Takes the lock, or gives up at `deadline`. The deadline is checked
    /// while the waiter watches as well as while it is parked, so the call
    /// returns within the deadline plus about one scheduling quantum
    /// whatever the configuration.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// raw.lock();
    /// assert!(!raw.try_lock_until(Instant::now() + Duration::from_millis(1)));
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn try_lock_until(&self, deadline: Instant) -> bool {
        self.try_lock_with_priority_until(0, deadline)
    }

    /// Takes the lock with `priority` (see
    /// [`lock_with_priority`](Self::lock_with_priority)), or gives up at
    /// `deadline` (see [`try_lock_until`](Self::try_lock_until)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// assert!(raw.try_lock_with_priority_until(5, Instant::now() + Duration::from_millis(1)));
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn try_lock_with_priority_until(&self, priority: usize, deadline: Instant) -> bool {
        // Acquire: pairs with the Release of the unlock that freed the lock.
        let won = self
            .state
            .compare_exchange_weak(0, LOCKED_BIT, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            || self.lock_slow(Some(deadline), priority);
        if won {
            self.on_acquire();
        }
        won
    }

    /// Takes the lock, or gives up after `timeout` (see
    /// [`try_lock_until`](Self::try_lock_until)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// assert!(raw.try_lock_for(Duration::from_millis(1)));
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.try_lock_until(deadline),
            None => {
                self.lock();
                true
            }
        }
    }

    /// Releases the lock; the scheduler picks who gets it next.
    ///
    /// # Safety
    ///
    /// The calling context must hold the lock (taken by this lock's `lock`,
    /// `try_lock` or timed variants and not yet released).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// raw.lock();
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// assert!(!raw.is_locked());
    /// ```
    #[inline]
    pub unsafe fn unlock(&self) {
        if self.sampling() {
            return self.unlock_sampled(false);
        }
        self.release(false);
    }

    /// Releases the lock and, if a thread is parked, hands the lock to it
    /// (whatever the scheduler).
    ///
    /// # Safety
    ///
    /// As [`unlock`](Self::unlock).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// raw.lock();
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock_fair() };
    /// ```
    #[inline]
    pub unsafe fn unlock_fair(&self) {
        if self.sampling() {
            return self.unlock_sampled(true);
        }
        self.release(true);
    }

    /// Whether the lock is held (a hint: it may change at once).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// assert!(!raw.is_locked());
    /// ```
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED_BIT != 0
    }

    /// Whether threads are parked on the lock (a hint).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// assert!(!raw.has_parked());
    /// ```
    pub fn has_parked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & PARKED_BIT != 0
    }

    /// The configuration in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{Config, RawAdaptiveLock, Static};
    /// let raw = RawAdaptiveLock::with_policy(Static(Default::default()));
    /// assert_eq!(raw.config(), Config::new());
    /// ```
    pub fn config(&self) -> Config {
        Config::from_bits(self.config.load(Ordering::Relaxed))
    }

    /// External control: sets the configuration now (one store). Waiters
    /// take it at their next poll; a parked waiter takes it when it is
    /// woken. The policy's next adaptation may replace it ([`Static`]
    /// never does). The fields are clamped as [`Config::clamped`] says.
    ///
    /// [`Static`]: crate::Static
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{Config, RawAdaptiveLock, Static};
    /// use sync_core::wait::WaitPolicy;
    /// let raw = RawAdaptiveLock::with_policy(Static(Default::default()));
    /// raw.configure(Config::new().wait(WaitPolicy::block()));
    /// assert_eq!(raw.config().wait_policy(), WaitPolicy::block());
    /// ```
    pub fn configure(&self, config: Config) {
        // Relaxed: the configuration is advice to waiters; it guards no data.
        self.config.store(config.to_bits(), Ordering::Relaxed);
    }

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
    fn on_acquire(&self) {
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
    fn begin_sample(&self) {
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
    fn sampling(&self) -> bool {
        // SAFETY: the caller holds the lock.
        self.holder.with(|h| unsafe { (*h).sampling })
    }

    /// Frees the lock word, waking a parked thread if there is one (the
    /// caller holds the lock and has done the monitor's part).
    #[inline]
    fn release(&self, fair: bool) {
        // Release: pairs with the Acquire of the next lock.
        if self
            .state
            .compare_exchange(LOCKED_BIT, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            self.unlock_slow(fair);
        }
    }

    /// The release of a sampled acquisition, off the fast path: the monitor
    /// and the policy run, then the lock is released. A panic of the policy
    /// was caught and counted; its payload (whose `Drop` is user code) is
    /// dropped once the lock is released, and the unlock never unwinds
    /// (rule 4 of [`sync_core::unwind`]).
    #[cold]
    fn unlock_sampled(&self, fair: bool) {
        let panic = self.end_sample();
        self.release(fair);
        if let Some(payload) = panic {
            unwind::discard(payload);
        }
    }

    /// Closes a sampled acquisition: measures its hold time, runs the
    /// policy (the closely coupled loop) and publishes the counters. Every
    /// call into the policy is caught: a panic is counted in
    /// `policy_panics`, the call's result is replaced by the default (the
    /// configuration stays as it was), and the first panic's payload is
    /// returned for the caller to drop once the lock is released.
    #[cold]
    fn end_sample(&self) -> Option<Payload> {
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
        panics.take()
    }

    /// The policy a waiter registered behind `ahead` others runs; `timed`
    /// for a wait with a deadline.
    ///
    /// A timed wait may park even under a policy that never parks: past its
    /// spins it watches as the policy says while yields are cheap, and parks
    /// (with its deadline as the park's timeout) once they are slow, so that
    /// it returns near its deadline instead of after a series of sleeps,
    /// each of which waits for a CPU again on a saturated machine.
    fn watch_policy(bits: u64, ahead: u32, timed: bool) -> WaitPolicy {
        let config = Config::from_bits(bits);
        match config.watcher_limit() {
            Some(n) if ahead >= u32::from(n) => WaitPolicy::block(),
            _ if timed => config.wait_policy().park(true),
            _ => config.wait_policy(),
        }
    }

    /// Waits for the lock; `false` if `deadline` passed first. Registers
    /// the thread in the `waiting` sensor for the whole wait, and, once it
    /// holds the lock, records how it waited.
    #[cold]
    fn lock_slow(&self, deadline: Option<Instant>, priority: usize) -> bool {
        // Relaxed: a sensor; the lock word orders the data.
        let ahead = self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut bits = self.config.load(Ordering::Relaxed);
        let timed = deadline.is_some();
        let mut watch = Watch::new(Self::watch_policy(bits, ahead, timed));
        // Relaxed: a hint; the queue lock orders parking and waking.
        let mut epoch = self.handoff_epoch.load(Ordering::Relaxed);
        let mut parks = 0u64;
        // The thread's CPU clock when its watch went past the spins (read
        // once per watch, and only by waiters that get that far), and the
        // CPU time such watches took: the monitor's cost of waiting.
        let mut past_spins: Option<u64> = None;
        let mut watch_cpu = 0u64;
        let mut parked_at = None;
        let mut handoff = false;
        let mut state = self.state.load(Ordering::Relaxed);
        let won = loop {
            if state & LOCKED_BIT == 0 {
                // Acquire: pairs with the Release of the unlock that freed
                // the lock.
                match self.state.compare_exchange_weak(
                    state,
                    state | LOCKED_BIT,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break true,
                    Err(s) => state = s,
                }
                continue;
            }

            // Reconfiguration takes effect at the next poll.
            let latest = self.config.load(Ordering::Relaxed);
            if latest != bits {
                bits = latest;
                // The watch keeps its progress (polls made, time watched):
                // restarting it at every change would let a policy that
                // changes faster than the budget keep a waiter from ever
                // parking.
                watch.set_policy(Self::watch_policy(bits, ahead, timed));
            }
            // A handoff passed this watching waiter by (the lock went from
            // one holder to a parked thread without ever looking free): it
            // joins the queue now, whatever its waiting policy, so that the
            // handoff scheduler serves it in turn; watching on, it could be
            // passed by at every release. Relaxed: a hint, as above.
            let passed = self.handoff_epoch.load(Ordering::Relaxed) != epoch;
            if !passed {
                let p = watch.policy();
                if past_spins.is_none()
                    && watch.polls() >= p.spin_count()
                    && (p.yield_count() > 0 || !p.parks())
                {
                    past_spins = Some(thread_cpu_ns().unwrap_or(0));
                }
                match watch.pause(deadline) {
                    Next::Poll => {
                        state = self.state.load(Ordering::Relaxed);
                        continue;
                    }
                    Next::TimedOut => break false,
                    Next::Park => {}
                }
            }

            // Mark the lock as having parked threads, so that its unlock
            // takes the slow path and wakes one.
            if state & PARKED_BIT == 0 {
                if let Err(s) = self.state.compare_exchange_weak(
                    state,
                    state | PARKED_BIT,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    state = s;
                    continue;
                }
            }

            let addr = self as *const Self as usize;
            // Under the queue lock: if the holder released meanwhile (the
            // word is no longer LOCKED | PARKED), do not sleep. Pairs with
            // the unlock's `unpark_one`, which takes the same queue lock.
            let validate = || self.state.load(Ordering::Relaxed) == LOCKED_BIT | PARKED_BIT;
            let timed_out = |_, was_last_thread| {
                // Clear PARKED if we were the last parked thread: nobody is
                // left to wake.
                if was_last_thread {
                    self.state.fetch_and(!PARKED_BIT, Ordering::Relaxed);
                }
            };
            if let Some(from) = past_spins.take() {
                watch_cpu += thread_cpu_ns().unwrap_or(from).saturating_sub(from);
            }
            parks += 1;
            if parked_at.is_none() {
                parked_at = now();
            }
            // SAFETY: `validate` and `timed_out` only touch the lock word:
            // they neither panic nor call into the parking lot; `addr` is
            // this lock's address, valid while we wait on it.
            let result = unsafe {
                parking_lot::park(
                    addr,
                    validate,
                    || {},
                    timed_out,
                    ParkToken(priority),
                    deadline,
                )
            };
            match result {
                // The releaser left LOCKED set for us.
                ParkResult::Unparked(TOKEN_HANDOFF) => {
                    handoff = true;
                    break true;
                }
                ParkResult::Unparked(_) | ParkResult::Invalid => {}
                ParkResult::TimedOut => break false,
            }
            // Woken to compete: watch again with the configuration in force.
            bits = self.config.load(Ordering::Relaxed);
            watch.reset(Self::watch_policy(bits, 0, timed));
            epoch = self.handoff_epoch.load(Ordering::Relaxed);
            state = self.state.load(Ordering::Relaxed);
        };
        if let Some(from) = past_spins {
            watch_cpu += thread_cpu_ns().unwrap_or(from).saturating_sub(from);
        }
        // Relaxed: a sensor.
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        if !won {
            // Relaxed: a counter.
            self.timeouts.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let woke = if parks > 0 { now() } else { None };
        // SAFETY: we hold the lock.
        let sample = self.holder.with_mut(|h| unsafe {
            let h = &mut *h;
            h.contended += 1;
            h.parks += parks;
            h.watch_cpu_ns = h.watch_cpu_ns.saturating_add(watch_cpu);
            if handoff {
                h.handoffs += 1;
            }
            if parks == 0 {
                h.spin_successes += 1;
                h.spin_polls = ewma(u64::from(h.spin_polls), u64::from(watch.polls()).max(1))
                    .min(u64::from(u32::MAX)) as u32;
            } else if let (Some(a), Some(b)) = (parked_at, woke) {
                let ns = b.duration_since(a).as_nanos().min(u64::MAX as u128) as u64;
                h.park_wait_ns = ewma(h.park_wait_ns, ns.max(1));
            }
            // Contention is what the policy must learn from: sample every
            // CONTENDED_RATE-th contended acquisition too (already on the
            // slow path), unless the sampling rate is faster still.
            h.contended & h.mask.min(CONTENDED_RATE - 1) == 0
        });
        if sample {
            self.begin_sample();
        }
        true
    }

    /// Wakes a parked thread (the scheduler picks which) and releases or
    /// hands over the lock.
    #[cold]
    fn unlock_slow(&self, force_fair: bool) {
        let config = self.config();
        let handoff = force_fair || config.scheduler_kind().is_handoff();
        let addr = self as *const Self as usize;
        // Runs under the queue lock, after the parking lot chose whom to
        // wake: either keep LOCKED for the woken thread (handoff) or release.
        let release = |result: UnparkResult, handoff: bool| {
            // The word is written with swaps, not plain stores (as
            // parking_lot does): a waiter may CAS PARKED in concurrently,
            // outside the queue lock. Under the memory model the store would
            // be ordered after that CAS, but loom (0.7) may let a later load
            // read the CAS past the store, an execution that cannot happen,
            // and then reports a lost wake-up; an RMW keeps the models exact
            // and costs nothing next to the wake-up on this path. This is
            // loom's known bug tokio-rs/loom#254 (RMW atomicity not applied
            // to a concurrent store; fix proposed in loom#391): a two-thread
            // model where a relaxed CAS 1 -> 3 succeeds and the other
            // thread's `store(0)` is then followed by its own load of 3
            // fails under loom 0.7.2, though coherence forbids it.
            if result.unparked_threads != 0 && (handoff || result.be_fair) {
                // Relaxed: a hint to watching waiters (see `lock_slow`).
                self.handoff_epoch.fetch_add(1, Ordering::Relaxed);
                if !result.have_more_threads {
                    // Relaxed: the woken thread's Acquire is the parking
                    // lot's queue lock, which this callback holds.
                    self.state.swap(LOCKED_BIT, Ordering::Relaxed);
                }
                return TOKEN_HANDOFF;
            }
            // Release: pairs with the Acquire of the next lock.
            if result.have_more_threads {
                self.state.swap(PARKED_BIT, Ordering::Release);
            } else {
                self.state.swap(0, Ordering::Release);
            }
            TOKEN_NORMAL
        };
        if !config.scheduler_kind().is_priority() {
            // SAFETY: `release` only writes the lock word and the epoch:
            // it neither panics nor calls into the parking lot.
            unsafe { parking_lot::unpark_one(addr, |result| release(result, handoff)) };
            return;
        }
        // Aging: after PRIORITY_AGING releases in a row that passed over the
        // longest-parked waiter, this one hands the lock to it.
        // SAFETY: the caller holds the lock.
        let aged = self
            .holder
            .with(|h| unsafe { (*h).passed_over >= PRIORITY_AGING });
        loop {
            // First pass: the highest priority parked now (wakes nobody).
            let mut best = None;
            if !aged {
                // SAFETY: the filter and callback only read tokens; neither
                // panics nor calls into the parking lot.
                unsafe {
                    parking_lot::unpark_filter(
                        addr,
                        |ParkToken(p)| {
                            best = best.max(Some(p));
                            FilterOp::Skip
                        },
                        |_| TOKEN_NORMAL,
                    )
                };
            }
            // Second pass: wake the first thread of that priority (the
            // first thread, if aged). If it left meanwhile (timed out) and
            // others remain, keep the lock and look again rather than
            // release with nobody woken.
            let target = best.unwrap_or(0);
            let mut woken = false;
            let mut first = true;
            // A Cell: the filter sets it and the callback (called after the
            // filter, by the same `unpark_filter`) reads it.
            let woke_first = core::cell::Cell::new(false);
            let mut retry = false;
            let filter = |ParkToken(p)| {
                let at_front = core::mem::replace(&mut first, false);
                if woken {
                    FilterOp::Stop
                } else if aged || p >= target {
                    woken = true;
                    woke_first.set(at_front);
                    FilterOp::Unpark
                } else {
                    FilterOp::Skip
                }
            };
            let callback = |result: UnparkResult| {
                if result.unparked_threads == 0 && result.have_more_threads {
                    retry = true;
                    return TOKEN_NORMAL;
                }
                if result.unparked_threads != 0 {
                    // SAFETY: the lock is still held: `release` below frees
                    // or hands it over only after this write, and the woken
                    // thread runs only after this callback returns.
                    self.holder.with_mut(|h| unsafe {
                        let h = &mut *h;
                        h.passed_over = if woke_first.get() {
                            0
                        } else {
                            h.passed_over + 1
                        };
                    });
                }
                release(result, handoff || aged)
            };
            // `filter` only reads the token; `callback` only writes the lock
            // word, the epoch and the holder's aging count (the lock is held).
            // SAFETY: so neither panics nor calls into the parking lot.
            unsafe { parking_lot::unpark_filter(addr, filter, callback) };
            if !retry {
                return;
            }
        }
    }
}

impl<P: Policy> Default for RawAdaptiveLock<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> core::fmt::Debug for RawAdaptiveLock<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawAdaptiveLock")
            .field("state", &self.state.load(Ordering::Relaxed))
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .field(
                "config",
                &Config::from_bits(self.config.load(Ordering::Relaxed)),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
// SAFETY: `lock`, `try_lock` and the timed variants give exclusive
// ownership until `unlock` (LOCKED is set by one CAS and cleared only by
// the holder, or kept and handed to exactly one woken thread); `unlock` may
// run on any thread, so guards may be sent.
unsafe impl<P: Policy> lock_api::RawMutex for RawAdaptiveLock<P> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        RawAdaptiveLock::lock(self);
    }

    #[inline]
    fn try_lock(&self) -> bool {
        RawAdaptiveLock::try_lock(self)
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: lock_api's caller holds the lock.
        unsafe { RawAdaptiveLock::unlock(self) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        RawAdaptiveLock::is_locked(self)
    }
}

#[cfg(not(loom))]
// SAFETY: as for `RawMutex`; `unlock_fair` releases like `unlock`.
unsafe impl<P: Policy> lock_api::RawMutexFair for RawAdaptiveLock<P> {
    #[inline]
    unsafe fn unlock_fair(&self) {
        // SAFETY: lock_api's caller holds the lock.
        unsafe { RawAdaptiveLock::unlock_fair(self) }
    }

    #[inline]
    unsafe fn bump(&self) {
        if self.has_parked() {
            // SAFETY: lock_api's caller holds the lock.
            unsafe { RawAdaptiveLock::unlock_fair(self) };
            RawAdaptiveLock::lock(self);
        }
    }
}

#[cfg(not(loom))]
// SAFETY: as for `RawMutex`.
unsafe impl<P: Policy> lock_api::RawMutexTimed for RawAdaptiveLock<P> {
    type Duration = Duration;
    type Instant = Instant;

    #[inline]
    fn try_lock_for(&self, timeout: Duration) -> bool {
        RawAdaptiveLock::try_lock_for(self, timeout)
    }

    #[inline]
    fn try_lock_until(&self, deadline: Instant) -> bool {
        RawAdaptiveLock::try_lock_until(self, deadline)
    }
}
