//! The raw adaptive lock: parking_lot's lock word and parking protocol, with
//! a monitor, a mutable configuration and a policy in the unlock path.
//!
//! This file holds the lock word, the type and its fast paths; the
//! monitor (counters, sampling, the policy's call) is in `monitor.rs`, the
//! slow paths (watching, parking, waking, scheduling) in `wait.rs`.

mod monitor;
mod wait;

use core::time::Duration;
use std::time::Instant;

use sync_core::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};
use sync_core::sync::cell::UnsafeCell;

use crate::config::{Config, UNSET};
use crate::policy::Policy;

use self::monitor::{Holder, Published};

/// The lock is held.
const LOCKED_BIT: u8 = 0b01;
/// Threads may be parked on the lock's address.
const PARKED_BIT: u8 = 0b10;

/// The sampling rate a policy gets if it does not name one.
pub const DEFAULT_SAMPLING_RATE: u32 = 256;

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
/// watches the word as the [`WaitPolicy`](crate::WaitPolicy) says, then sets `PARKED` and parks
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
/// lock, and the uncontended path adds one to a counter. The lock is aligned to
/// 64 bytes, and that cell starts on the cache line after the lock word's, so
/// the holder's bookkeeping does not take the word's line from the waiters that
/// poll it. Every k-th acquisition (k the policy's sampling rate), and every
/// 8th contended one, reads the clock at lock and unlock; that unlock runs the
/// policy, stores the configuration it returns (one relaxed store that every
/// waiter sees at its next poll) and publishes the counters for
/// [`stats`](Self::stats). The only shared sensor is `waiting`, which waiters
/// increment and decrement on the slow path.
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
/// next poll, whatever its waiting policy, and so joins the queue. Nor does
/// barging: a waiter that has watched for 2 ms past its spins without
/// taking the lock parks too, whatever its policy, so that under a policy
/// that never parks, threads that free and retake the lock on its fast
/// path cannot keep it out for longer than that plus the parking lot's
/// wait for a fair release. Under
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
/// use adaptive_lock::WaitPolicy;
///
/// let raw = RawAdaptiveLock::with_policy(Static(WaitPolicy::block()));
/// raw.lock();
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// assert_eq!(raw.stats().total.acquisitions, 1);
/// ```
#[repr(C, align(64))]
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
        ///
        /// # Examples
        ///
        /// ```
        /// use adaptive_lock::{Learned, RawAdaptiveLock};
        ///
        /// // A `const fn`: a raw lock can be a `static`.
        /// static RAW: RawAdaptiveLock<Learned> = RawAdaptiveLock::new();
        /// RAW.lock();
        /// assert!(RAW.is_locked());
        /// // SAFETY: this thread holds the lock.
        /// unsafe { RAW.unlock() };
        /// ```
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
    /// # Panics
    ///
    /// If called by this lock's own policy (see
    /// [`AdaptiveMutex::lock`](crate::AdaptiveMutex::lock)).
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
    /// # Panics
    ///
    /// As [`lock`](Self::lock).
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
    /// while the waiter watches as well as while it is parked, and a timed
    /// wait never yields its core (it parks with the deadline as the
    /// park's timeout, or sleeps briefly under a policy that never parks),
    /// so whatever the configuration the call overshoots its deadline by
    /// what a `thread::sleep` to the same deadline would: the timer's
    /// latency and the wait for a CPU once it has fired. On an idle
    /// machine that is microseconds; on one with many more runnable
    /// threads than CPUs it can be milliseconds or more, for the sleep as
    /// for the lock.
    ///
    /// Called by this lock's own policy (which runs while its thread holds
    /// the lock), it fails at once: waiting could only end at the deadline.
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
        self.try_lock_with_priority_for(0, timeout)
    }

    /// Takes the lock with `priority` (see
    /// [`lock_with_priority`](Self::lock_with_priority)), or gives up after
    /// `timeout`. A timeout too large for an `Instant` waits without a
    /// deadline (except from this lock's own policy, where it fails at
    /// once as every timed lock does: see
    /// [`try_lock_until`](Self::try_lock_until)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let raw = adaptive_lock::RawAdaptiveLock::<adaptive_lock::Learned>::new();
    /// assert!(raw.try_lock_with_priority_for(5, Duration::from_millis(1)));
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn try_lock_with_priority_for(&self, priority: usize, timeout: Duration) -> bool {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.try_lock_with_priority_until(priority, deadline),
            // No deadline: the untimed lock, unless this lock's policy
            // runs on this thread, where `lock` would panic but a timed
            // lock fails at once (see `lock_slow`). Off the fast path:
            // only timeouts past an `Instant`'s range come here.
            None if self.is_locked() && monitor::in_policy_of(self as *const Self as usize) => {
                // Relaxed: a counter.
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                false
            }
            None => {
                self.lock_with_priority(priority);
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

    /// If threads are parked, hands the lock to one (as
    /// [`unlock_fair`](Self::unlock_fair)) and takes it again with
    /// `priority`: lock_api's `bump`, with a priority (an
    /// `AdaptiveMutexGuard`'s).
    ///
    /// # Safety
    ///
    /// As [`unlock`](Self::unlock).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) unsafe fn bump_with_priority(&self, priority: usize) {
        if self.has_parked() {
            // SAFETY: the caller holds the lock.
            unsafe { self.unlock_fair() };
            self.lock_with_priority(priority);
        }
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
    /// use adaptive_lock::WaitPolicy;
    /// let raw = RawAdaptiveLock::with_policy(Static(Default::default()));
    /// raw.configure(Config::new().wait(WaitPolicy::block()));
    /// assert_eq!(raw.config().wait_policy(), WaitPolicy::block());
    /// ```
    pub fn configure(&self, config: Config) {
        // Relaxed: the configuration is advice to waiters; it guards no data.
        self.config.store(config.to_bits(), Ordering::Relaxed);
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
        // SAFETY: lock_api's caller holds the lock.
        unsafe { self.bump_with_priority(0) }
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
