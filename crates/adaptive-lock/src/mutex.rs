//! The safe lock: [`AdaptiveMutex`], a mutex over [`RawAdaptiveLock`], and
//! its guards.

use core::fmt;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::time::Duration;
use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
pub use crate::guard::AdaptiveMutexGuard;
use crate::policy::{Learned, Policy};
use crate::raw::RawAdaptiveLock;
use crate::stats::Stats;

/// A mutual-exclusion lock that monitors itself and adapts how its waiters
/// wait, run by the policy `P` ([`Learned`] by default).
///
/// Its guard API is parking_lot's ([`AdaptiveMutexGuard`] wraps a
/// `lock_api::MutexGuard`: `unlock_fair`, `map`, `unlocked`, …), with the
/// family's forms: [`lock`](Self::lock), [`try_lock`](Self::try_lock),
/// [`try_lock_for`](Self::try_lock_for) /
/// [`try_lock_until`](Self::try_lock_until), and owned guards through an
/// `Arc` ([`lock_arc`](Self::lock_arc) and its `try_` forms). On top of
/// those: priority locking, the monitor ([`stats`](Self::stats)) and
/// external control ([`configure`](Self::configure)).
///
/// # Panics and poisoning
///
/// As parking_lot's, the lock is not poisoned: a panic inside a critical
/// section releases the lock as the guard is dropped, and the next thread
/// gets the data as the panicking thread left it.
///
/// No unlock unwinds (dropping a guard, `unlock_fair`, `unlocked`,
/// `unlocked_fair`, `bump`, the mapped guards'): a panic of the policy,
/// which runs in the unlock path, is caught and counted in
/// [`Counters::policy_panics`](crate::Counters::policy_panics) (see
/// [`Policy`'s panics](crate::Policy#panics)).
///
/// # Fairness
///
/// See [`RawAdaptiveLock`]: barging by default, handoff with
/// [`Scheduler::HANDOFF`](crate::Scheduler::HANDOFF) or
/// [`AdaptiveMutexGuard::unlock_fair`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use adaptive_lock::AdaptiveMutex;
///
/// let counter = Arc::new(AdaptiveMutex::new(0u64));
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
pub struct AdaptiveMutex<T: ?Sized, P = Learned> {
    inner: lock_api::Mutex<RawAdaptiveLock<P>, T>,
}

/// The guard [`AdaptiveMutexGuard::map`] returns: holds the lock, gives
/// access to a part of the data.
pub type MappedAdaptiveMutexGuard<'a, T, P = Learned> =
    lock_api::MappedMutexGuard<'a, RawAdaptiveLock<P>, T>;

impl<T> AdaptiveMutex<T, Learned> {
    /// An unlocked lock around `value`, run by the default [`Learned`]
    /// policy. `const`, so that a lock may be a `static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::AdaptiveMutex;
    ///
    /// static HITS: AdaptiveMutex<u64> = AdaptiveMutex::new(0);
    /// *HITS.lock() += 1;
    /// let m = AdaptiveMutex::new(0u64);
    /// assert_eq!(*m.lock(), 0);
    /// ```
    pub const fn new(value: T) -> Self {
        Self::const_new(value)
    }
}

impl<T, P: Policy> AdaptiveMutex<T, P> {
    /// An unlocked lock around `value` run by `policy` (its initial
    /// configuration and sampling rate apply at once).
    ///
    /// # Panics
    ///
    /// If the policy's `initial`, `sampling_rate` or `uses_time` panics
    /// (see [`RawAdaptiveLock::with_policy`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, SimpleAdapt};
    ///
    /// let m = AdaptiveMutex::with_policy(1, SimpleAdapt { threshold: 2, step: 5 });
    /// assert_eq!(*m.lock(), 1);
    /// ```
    pub fn with_policy(value: T, policy: P) -> Self {
        Self {
            inner: lock_api::Mutex::from_raw(RawAdaptiveLock::with_policy(policy), value),
        }
    }

    /// An unlocked lock around `value` run by the policy's constant
    /// [`Policy::INIT`]: `const`, for a `static` lock of any policy. Its
    /// first acquisition applies the policy's initial configuration and
    /// sampling rate (see [`RawAdaptiveLock::new`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, SimpleAdapt};
    ///
    /// static QUEUE: AdaptiveMutex<Vec<u32>, SimpleAdapt> = AdaptiveMutex::const_new(Vec::new());
    /// QUEUE.lock().push(1);
    /// assert_eq!(QUEUE.lock().len(), 1);
    /// ```
    pub const fn const_new(value: T) -> Self {
        Self {
            inner: lock_api::Mutex::from_raw(RawAdaptiveLock::new(), value),
        }
    }

    /// Consumes the lock and returns its data.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(String::from("data"));
    /// assert_eq!(m.into_inner(), "data");
    /// ```
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized, P: Policy> AdaptiveMutex<T, P> {
    /// Takes the lock, waiting as the current configuration says, and
    /// returns a guard that releases it when dropped.
    ///
    /// # Deadlocks
    ///
    /// Locking a lock this thread holds deadlocks (the lock is not
    /// reentrant).
    ///
    /// # Panics
    ///
    /// If called, on this lock, by this lock's policy (which runs while its
    /// thread holds the lock; see [`Policy`]), instead of waiting for
    /// ever. The lock catches the panic as a panic of its policy.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(1);
    /// *m.lock() += 1;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    #[inline]
    pub fn lock(&self) -> AdaptiveMutexGuard<'_, T, P> {
        AdaptiveMutexGuard::new(self, self.inner.lock(), 0)
    }

    /// Takes the lock if it is free now.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// let held = m.lock();
    /// assert!(m.try_lock().is_none());
    /// drop(held);
    /// assert!(m.try_lock().is_some());
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Option<AdaptiveMutexGuard<'_, T, P>> {
        Some(AdaptiveMutexGuard::new(self, self.inner.try_lock()?, 0))
    }

    /// Takes the lock, or gives up after `timeout`. The deadline is checked
    /// while the waiter watches as well as while it is parked (see
    /// [`RawAdaptiveLock::try_lock_until`]). A timeout too large for an
    /// `Instant` waits without a deadline; from this lock's own policy,
    /// every timed lock fails at once (see [`Policy`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// let held = m.lock();
    /// assert!(m.try_lock_for(Duration::from_millis(1)).is_none());
    /// drop(held);
    /// assert!(m.try_lock_for(Duration::from_millis(1)).is_some());
    /// ```
    #[inline]
    pub fn try_lock_for(&self, timeout: Duration) -> Option<AdaptiveMutexGuard<'_, T, P>> {
        Some(AdaptiveMutexGuard::new(
            self,
            self.inner.try_lock_for(timeout)?,
            0,
        ))
    }

    /// Takes the lock, or gives up at `deadline` (see
    /// [`try_lock_for`](Self::try_lock_for)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// let held = m.lock();
    /// assert!(m.try_lock_until(Instant::now() + Duration::from_millis(1)).is_none());
    /// ```
    #[inline]
    pub fn try_lock_until(&self, deadline: Instant) -> Option<AdaptiveMutexGuard<'_, T, P>> {
        Some(AdaptiveMutexGuard::new(
            self,
            self.inner.try_lock_until(deadline)?,
            0,
        ))
    }

    /// Takes the lock with `priority` (higher first): under a priority
    /// scheduler, a release wakes the parked waiter of highest priority
    /// first. Under other schedulers, the same as [`lock`](Self::lock).
    ///
    /// The guard keeps the priority: its
    /// [`bump`](AdaptiveMutexGuard::bump),
    /// [`unlocked`](AdaptiveMutexGuard::unlocked) and
    /// [`unlocked_fair`](AdaptiveMutexGuard::unlocked_fair) retake the lock
    /// with it (a guard of [`lock`](Self::lock) and its other forms, with
    /// priority 0).
    ///
    /// # Panics
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, Scheduler};
    ///
    /// let m = AdaptiveMutex::new(0);
    /// m.configure(m.config().scheduler(Scheduler::PRIORITY));
    /// *m.lock_with_priority(3) += 1;
    /// ```
    #[inline]
    pub fn lock_with_priority(&self, priority: usize) -> AdaptiveMutexGuard<'_, T, P> {
        self.raw_lock().lock_with_priority(priority);
        // SAFETY: the lock is held by this thread, for the guard.
        AdaptiveMutexGuard::new(self, unsafe { self.inner.make_guard_unchecked() }, priority)
    }

    /// Takes the lock with `priority` (see
    /// [`lock_with_priority`](Self::lock_with_priority)), or gives up after
    /// `timeout`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// assert!(m.try_lock_with_priority_for(2, Duration::from_millis(1)).is_some());
    /// ```
    #[inline]
    pub fn try_lock_with_priority_for(
        &self,
        priority: usize,
        timeout: Duration,
    ) -> Option<AdaptiveMutexGuard<'_, T, P>> {
        let locked = self
            .raw_lock()
            .try_lock_with_priority_for(priority, timeout);
        self.guard_if(locked, priority)
    }

    /// Takes the lock with `priority` (see
    /// [`lock_with_priority`](Self::lock_with_priority)), or gives up at
    /// `deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// let deadline = Instant::now() + Duration::from_millis(1);
    /// assert!(m.try_lock_with_priority_until(2, deadline).is_some());
    /// ```
    #[inline]
    pub fn try_lock_with_priority_until(
        &self,
        priority: usize,
        deadline: Instant,
    ) -> Option<AdaptiveMutexGuard<'_, T, P>> {
        let locked = self
            .raw_lock()
            .try_lock_with_priority_until(priority, deadline);
        self.guard_if(locked, priority)
    }

    /// Takes the lock through an `Arc`: the guard owns a reference to the
    /// lock instead of borrowing it, so that it may outlive the scope (be
    /// moved into another thread, stored in a struct).
    ///
    /// # Deadlocks
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Panics
    ///
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::thread;
    /// use adaptive_lock::AdaptiveMutex;
    ///
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// let mut guard = m.lock_arc();
    /// thread::spawn(move || *guard += 1).join().unwrap();
    /// assert_eq!(*m.lock(), 1);
    /// ```
    #[doc(alias = "lock_owned")]
    #[inline]
    pub fn lock_arc(self: &Arc<Self>) -> ArcAdaptiveMutexGuard<T, P> {
        self.raw_lock().lock();
        // SAFETY: the lock is held by this thread, for the guard.
        unsafe { ArcAdaptiveMutexGuard::new(Arc::clone(self)) }
    }

    /// Takes the lock through an `Arc` (see [`lock_arc`](Self::lock_arc))
    /// if it is free now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let m = Arc::new(adaptive_lock::AdaptiveMutex::new(0));
    /// let held = m.try_lock_arc().unwrap();
    /// assert!(m.try_lock_arc().is_none());
    /// drop(held);
    /// ```
    #[doc(alias = "try_lock_owned")]
    #[inline]
    pub fn try_lock_arc(self: &Arc<Self>) -> Option<ArcAdaptiveMutexGuard<T, P>> {
        let locked = self.raw_lock().try_lock();
        self.arc_guard_if(locked)
    }

    /// Takes the lock through an `Arc` (see [`lock_arc`](Self::lock_arc)),
    /// or gives up after `timeout` (see [`try_lock_for`](Self::try_lock_for)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let m = Arc::new(adaptive_lock::AdaptiveMutex::new(0));
    /// let held = m.lock_arc();
    /// assert!(m.try_lock_arc_for(Duration::from_millis(1)).is_none());
    /// ```
    #[inline]
    pub fn try_lock_arc_for(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Option<ArcAdaptiveMutexGuard<T, P>> {
        let locked = self.raw_lock().try_lock_for(timeout);
        self.arc_guard_if(locked)
    }

    /// Takes the lock through an `Arc` (see [`lock_arc`](Self::lock_arc)),
    /// or gives up at `deadline` (see [`try_lock_for`](Self::try_lock_for)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// let m = Arc::new(adaptive_lock::AdaptiveMutex::new(0));
    /// let deadline = Instant::now() + Duration::from_millis(1);
    /// assert!(m.try_lock_arc_until(deadline).is_some());
    /// ```
    #[inline]
    pub fn try_lock_arc_until(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Option<ArcAdaptiveMutexGuard<T, P>> {
        let locked = self.raw_lock().try_lock_until(deadline);
        self.arc_guard_if(locked)
    }

    /// A guard if `locked` (the lock was just taken by this thread, with
    /// `priority`).
    #[inline]
    fn guard_if(&self, locked: bool, priority: usize) -> Option<AdaptiveMutexGuard<'_, T, P>> {
        locked.then(|| {
            // SAFETY: `locked`: the lock is held by this thread, for the
            // guard.
            let inner = unsafe { self.inner.make_guard_unchecked() };
            AdaptiveMutexGuard::new(self, inner, priority)
        })
    }

    /// An owned guard if `locked` (the lock was just taken by this thread).
    #[inline]
    fn arc_guard_if(self: &Arc<Self>, locked: bool) -> Option<ArcAdaptiveMutexGuard<T, P>> {
        // SAFETY: `locked`: the lock is held by this thread, for the guard.
        locked.then(|| unsafe { ArcAdaptiveMutexGuard::new(Arc::clone(self)) })
    }

    /// A mutable reference to the data, without locking: the borrow
    /// checker proves that no guard exists.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut m = adaptive_lock::AdaptiveMutex::new(1);
    /// *m.get_mut() += 1;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    /// Whether the lock is held (a hint: it may change at once).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// let held = m.lock();
    /// assert!(m.is_locked());
    /// ```
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }

    /// A snapshot of the monitor (see [`RawAdaptiveLock::stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// drop(m.lock());
    /// assert_eq!(m.stats().total.acquisitions, 1);
    /// ```
    pub fn stats(&self) -> Stats {
        self.raw_lock().stats()
    }

    /// External control: sets the configuration now (see
    /// [`RawAdaptiveLock::configure`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, Config, Scheduler};
    /// let m = AdaptiveMutex::new(0);
    /// m.configure(Config::new().scheduler(Scheduler::HANDOFF));
    /// assert!(m.config().scheduler_kind().is_handoff());
    /// ```
    pub fn configure(&self, config: Config) {
        self.raw_lock().configure(config)
    }

    /// The configuration in force.
    ///
    /// # Examples
    ///
    /// ```
    /// use adaptive_lock::{AdaptiveMutex, Config};
    /// let m = AdaptiveMutex::new(0u8);
    /// assert_eq!(m.config(), Config::new());
    /// ```
    pub fn config(&self) -> Config {
        self.raw_lock().config()
    }

    /// The raw lock under this one, for its hints and monitor.
    ///
    /// # Safety
    ///
    /// Locking or unlocking the raw lock while a guard of this lock exists,
    /// or unlocking it without holding it, breaks the guards' exclusion.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// // SAFETY: only reads a hint.
    /// assert!(!unsafe { m.raw() }.has_parked());
    /// ```
    pub unsafe fn raw(&self) -> &RawAdaptiveLock<P> {
        self.raw_lock()
    }

    /// Releases the lock held without a guard (one leaked with
    /// `mem::forget`, or taken through [`raw`](Self::raw)).
    ///
    /// # Safety
    ///
    /// The lock must be held by the calling context, and no guard of it
    /// may be used afterwards.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(0);
    /// std::mem::forget(m.lock());
    /// // SAFETY: the lock is held, and its guard was forgotten.
    /// unsafe { m.force_unlock() };
    /// assert!(!m.is_locked());
    /// ```
    pub unsafe fn force_unlock(&self) {
        // SAFETY: the caller holds the lock.
        unsafe { self.inner.force_unlock() }
    }

    /// A raw pointer to the data, for code that synchronizes by other
    /// means.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = adaptive_lock::AdaptiveMutex::new(7);
    /// let guard = m.lock();
    /// // SAFETY: this thread holds the lock.
    /// assert_eq!(unsafe { *m.data_ptr() }, 7);
    /// ```
    pub fn data_ptr(&self) -> *mut T {
        self.inner.data_ptr()
    }

    /// The raw lock (safe inside the crate: only its methods that keep the
    /// guards' invariant are called).
    #[inline]
    pub(crate) fn raw_lock(&self) -> &RawAdaptiveLock<P> {
        // SAFETY: the callers lock only to make a guard, and otherwise use
        // the raw lock's methods that neither lock nor unlock it (a guard
        // releases and retakes the lock it holds, as lock_api's do).
        unsafe { self.inner.raw() }
    }
}

impl<T: Default> Default for AdaptiveMutex<T, Learned> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for AdaptiveMutex<T, Learned> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T: ?Sized + fmt::Debug, P: Policy> fmt::Debug for AdaptiveMutex<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(guard) => f
                .debug_struct("AdaptiveMutex")
                .field("data", &&*guard)
                .finish(),
            None => f
                .debug_struct("AdaptiveMutex")
                .field("data", &format_args!("<locked>"))
                .finish(),
        }
    }
}

/// The guard of [`AdaptiveMutex::lock_arc`] and its `try_` forms: holds the
/// lock through an `Arc`, so that it is `'static` when the data is. It has
/// the associated functions of lock_api's `ArcMutexGuard` (`mutex`,
/// `into_arc`, `unlock_fair`, `unlocked`, `unlocked_fair`, `bump`).
#[must_use = "if unused the lock is released at once"]
pub struct ArcAdaptiveMutexGuard<T: ?Sized, P: Policy = Learned> {
    mutex: Arc<AdaptiveMutex<T, P>>,
    /// Neither `Send` nor `Sync` by default: the impls below state them.
    _not_auto: PhantomData<*const ()>,
}

// SAFETY: the raw lock may be unlocked from any thread (`GuardSend`), so the
// guard may move with the data it gives access to, as `&mut T` may.
unsafe impl<T: ?Sized + Send, P: Policy> Send for ArcAdaptiveMutexGuard<T, P> {}
// SAFETY: a shared guard gives out `&T` only, as `&T` would.
unsafe impl<T: ?Sized + Sync + Send, P: Policy> Sync for ArcAdaptiveMutexGuard<T, P> {}

impl<T: ?Sized, P: Policy> ArcAdaptiveMutexGuard<T, P> {
    /// # Safety
    ///
    /// The calling thread holds `mutex`'s lock, and gives it to the guard.
    unsafe fn new(mutex: Arc<AdaptiveMutex<T, P>>) -> Self {
        Self {
            mutex,
            _not_auto: PhantomData,
        }
    }

    /// The lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use adaptive_lock::{AdaptiveMutex, ArcAdaptiveMutexGuard};
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// let guard = m.lock_arc();
    /// assert!(Arc::ptr_eq(ArcAdaptiveMutexGuard::mutex(&guard), &m));
    /// ```
    pub fn mutex(guard: &Self) -> &Arc<AdaptiveMutex<T, P>> {
        &guard.mutex
    }

    /// Releases the lock and hands it to a parked thread if there is one
    /// (see [`RawAdaptiveLock::unlock_fair`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use adaptive_lock::{AdaptiveMutex, ArcAdaptiveMutexGuard};
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// ArcAdaptiveMutexGuard::unlock_fair(m.lock_arc());
    /// assert!(!m.is_locked());
    /// ```
    pub fn unlock_fair(guard: Self) {
        let guard = core::mem::ManuallyDrop::new(guard);
        // SAFETY: the guard holds the lock; it is not dropped (so not
        // unlocked twice), and its `Arc` is taken out exactly once.
        let mutex = unsafe { core::ptr::read(&guard.mutex) };
        // SAFETY: the guard held the lock.
        unsafe { mutex.raw_lock().unlock_fair() };
    }

    /// Releases the lock and returns the guard's `Arc`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use adaptive_lock::{AdaptiveMutex, ArcAdaptiveMutexGuard};
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// let back = ArcAdaptiveMutexGuard::into_arc(m.lock_arc());
    /// assert!(Arc::ptr_eq(&back, &m) && !m.is_locked());
    /// ```
    pub fn into_arc(guard: Self) -> Arc<AdaptiveMutex<T, P>> {
        let guard = core::mem::ManuallyDrop::new(guard);
        // SAFETY: as in `unlock_fair`.
        let mutex = unsafe { core::ptr::read(&guard.mutex) };
        // SAFETY: the guard held the lock.
        unsafe { mutex.raw_lock().unlock() };
        mutex
    }

    /// Releases the lock, runs `f`, and takes the lock again (at priority
    /// 0, as [`AdaptiveMutexGuard::unlocked`](crate::AdaptiveMutexGuard::unlocked)),
    /// also if `f` panics.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use adaptive_lock::{AdaptiveMutex, ArcAdaptiveMutexGuard};
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// let mut guard = m.lock_arc();
    /// ArcAdaptiveMutexGuard::unlocked(&mut guard, || assert!(!m.is_locked()));
    /// *guard += 1;
    /// ```
    pub fn unlocked<F, U>(guard: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        // SAFETY: the guard holds the lock; `Relock` takes it back before
        // the guard is used again.
        unsafe { guard.mutex.raw_lock().unlock() };
        let _relock = Relock(guard.mutex.raw_lock());
        f()
    }

    /// [`unlocked`](Self::unlocked), releasing with
    /// [`unlock_fair`](Self::unlock_fair).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use adaptive_lock::{AdaptiveMutex, ArcAdaptiveMutexGuard};
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// let mut guard = m.lock_arc();
    /// ArcAdaptiveMutexGuard::unlocked_fair(&mut guard, || assert!(!m.is_locked()));
    /// ```
    pub fn unlocked_fair<F, U>(guard: &mut Self, f: F) -> U
    where
        F: FnOnce() -> U,
    {
        // SAFETY: as in `unlocked`.
        unsafe { guard.mutex.raw_lock().unlock_fair() };
        let _relock = Relock(guard.mutex.raw_lock());
        f()
    }

    /// Hands the lock to a parked thread if there is one, and takes it
    /// again after it (at priority 0).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use adaptive_lock::{AdaptiveMutex, ArcAdaptiveMutexGuard};
    /// let m = Arc::new(AdaptiveMutex::new(0));
    /// let mut guard = m.lock_arc();
    /// ArcAdaptiveMutexGuard::bump(&mut guard);
    /// *guard += 1;
    /// ```
    pub fn bump(guard: &mut Self) {
        // SAFETY: the guard holds the lock, and holds it again on return.
        unsafe { lock_api::RawMutexFair::bump(guard.mutex.raw_lock()) };
    }
}

/// Takes the lock back when dropped: `unlocked` holds the lock again once
/// `f` returns or unwinds, as the guard that is used afterwards assumes.
struct Relock<'a, P: Policy>(&'a RawAdaptiveLock<P>);

impl<P: Policy> Drop for Relock<'_, P> {
    fn drop(&mut self) {
        self.0.lock();
    }
}

impl<T: ?Sized, P: Policy> Deref for ArcAdaptiveMutexGuard<T, P> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock: no other reference to the data
        // is live.
        unsafe { &*self.mutex.data_ptr() }
    }
}

impl<T: ?Sized, P: Policy> DerefMut for ArcAdaptiveMutexGuard<T, P> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock and is borrowed mutably: this is
        // the only reference to the data.
        unsafe { &mut *self.mutex.data_ptr() }
    }
}

impl<T: ?Sized, P: Policy> Drop for ArcAdaptiveMutexGuard<T, P> {
    fn drop(&mut self) {
        // SAFETY: the guard holds the lock and releases it once, here.
        unsafe { self.mutex.raw_lock().unlock() };
    }
}

impl<T: ?Sized + fmt::Debug, P: Policy> fmt::Debug for ArcAdaptiveMutexGuard<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display, P: Policy> fmt::Display for ArcAdaptiveMutexGuard<T, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
