//! The safe lock: `lock_api::Mutex` over [`RawAdaptiveLock`], and what it
//! adds (priority lock, monitor, external control, a chosen policy).

use crate::config::Config;
use crate::policy::Policy;
use crate::raw::RawAdaptiveLock;
use crate::stats::Stats;

/// A mutual-exclusion lock that monitors itself and adapts how its waiters
/// wait, run by the policy `P` ([`Learned`](crate::Learned) by default).
///
/// It is `lock_api::Mutex<RawAdaptiveLock<P>, T>`: the guard API of
/// parking_lot (`lock`, `try_lock`, `try_lock_for`, `try_lock_until`,
/// `MutexGuard::unlock_fair`, `MutexGuard::map`, …), plus the methods of
/// [`AdaptiveLockExt`].
///
/// Name the data type when you call `new` (`AdaptiveMutex::<u64>::new(0)`,
/// or `let m: AdaptiveMutex<u64> = AdaptiveMutex::new(0)`): Rust does not
/// fill in a type alias's default policy while it infers, and
/// [`with_policy`](AdaptiveLockExt::with_policy) names the policy itself.
///
/// # Panics and poisoning
///
/// As parking_lot's, the lock is not poisoned: a panic inside a critical
/// section releases the lock as the guard is dropped, and the next thread
/// gets the data as the panicking thread left it.
///
/// No unlock unwinds (dropping a guard, `MutexGuard::unlock_fair`,
/// `unlocked`, `unlocked_fair`, `bump`, the mapped guards'): a panic of the
/// policy, which runs in the unlock path, is caught and counted in
/// [`Counters::policy_panics`](crate::Counters::policy_panics) (see
/// [`Policy`'s panics](crate::Policy#panics)).
///
/// # Fairness
///
/// See [`RawAdaptiveLock`]: barging by default, handoff with
/// [`Scheduler::HANDOFF`](crate::Scheduler::HANDOFF) or
/// `MutexGuard::unlock_fair`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex};
///
/// let counter = Arc::new(AdaptiveMutex::<u64>::new(0));
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let counter = Arc::clone(&counter);
///         thread::spawn(move || {
///             for _ in 0..1000 {
///                 *counter.lock() += 1;
///             }
///         })
///     })
///     .collect();
/// for t in threads {
///     t.join().unwrap();
/// }
/// assert_eq!(*counter.lock(), 4000);
/// assert_eq!(counter.stats().total.acquisitions, 4001);
/// ```
pub type AdaptiveMutex<T, P = crate::Learned> = lock_api::Mutex<RawAdaptiveLock<P>, T>;

/// The guard of an [`AdaptiveMutex`].
pub type AdaptiveMutexGuard<'a, T, P = crate::Learned> =
    lock_api::MutexGuard<'a, RawAdaptiveLock<P>, T>;

/// What an [`AdaptiveMutex`] offers beyond `lock_api::Mutex`.
pub trait AdaptiveLockExt<T, P: Policy> {
    /// A lock around `value` run by `policy` (its initial configuration
    /// and sampling rate).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex, SimpleAdapt};
    /// let m = AdaptiveMutex::with_policy(1, SimpleAdapt { threshold: 2, step: 5 });
    /// assert_eq!(*m.lock(), 1);
    /// ```
    fn with_policy(value: T, policy: P) -> Self;

    /// Locks with `priority`: under a priority scheduler, a release wakes
    /// the parked waiter of highest priority first.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex};
    /// let m = AdaptiveMutex::<i32>::new(0);
    /// *m.lock_with_priority(3) += 1;
    /// ```
    fn lock_with_priority(&self, priority: usize) -> AdaptiveGuard<'_, T, P>;

    /// A snapshot of the monitor (see [`RawAdaptiveLock::stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex};
    /// let m = AdaptiveMutex::<i32>::new(0);
    /// assert_eq!(m.stats().total.acquisitions, 0);
    /// ```
    fn stats(&self) -> Stats;

    /// External control: sets the configuration now (see
    /// [`RawAdaptiveLock::configure`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex, Config, Scheduler};
    /// let m = AdaptiveMutex::<i32>::new(0);
    /// m.configure(Config::new().scheduler(Scheduler::HANDOFF));
    /// assert!(m.config().scheduler_kind().is_handoff());
    /// ```
    fn configure(&self, config: Config);

    /// The configuration in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveLockExt, AdaptiveMutex, Config};
    /// let m = AdaptiveMutex::<u8>::new(0);
    /// assert_eq!(m.config(), Config::new());
    /// ```
    fn config(&self) -> Config;
}

/// The guard [`AdaptiveLockExt::lock_with_priority`] returns.
pub type AdaptiveGuard<'a, T, P> = lock_api::MutexGuard<'a, RawAdaptiveLock<P>, T>;

impl<T, P: Policy> AdaptiveLockExt<T, P> for AdaptiveMutex<T, P> {
    fn with_policy(value: T, policy: P) -> Self {
        lock_api::Mutex::from_raw(RawAdaptiveLock::with_policy(policy), value)
    }

    fn lock_with_priority(&self, priority: usize) -> AdaptiveGuard<'_, T, P> {
        // SAFETY: we only lock through the raw lock; the guard made below
        // unlocks it.
        let raw = unsafe { self.raw() };
        raw.lock_with_priority(priority);
        // SAFETY: the lock is held by this thread, for the guard.
        unsafe { self.make_guard_unchecked() }
    }

    fn stats(&self) -> Stats {
        // SAFETY: `stats` neither unlocks nor leaves the lock held.
        unsafe { self.raw() }.stats()
    }

    fn configure(&self, config: Config) {
        // SAFETY: `configure` does not touch the lock word.
        unsafe { self.raw() }.configure(config)
    }

    fn config(&self) -> Config {
        // SAFETY: `config` only reads the configuration word.
        unsafe { self.raw() }.config()
    }
}
