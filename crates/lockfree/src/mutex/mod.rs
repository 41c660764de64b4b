//! [`Mutex`]: data behind a [`RawMutex`], locked from threads or tasks.

use core::fmt;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sync_core::sync::cell::UnsafeCell;

use crate::raw_mutex::{Fairness, RawMutex};

mod future;
mod guard;

pub use self::future::{LockArcAsync, LockAsync};
pub use self::guard::{ArcMutexGuard, MutexGuard};

/// A mutual-exclusion lock whose waiters wait in a lock-free FIFO queue, and
/// which both threads and async tasks can lock.
///
/// * [`lock`](Self::lock) parks the calling thread while the lock is held;
/// * [`lock_async`](Self::lock_async) returns a future that never blocks the
///   executor's thread: a task that must wait is queued, and woken when its
///   turn comes. It works on any executor.
///
/// Both kinds of waiter share one queue, so a thread and a task can contend
/// for the same data.
///
/// # Fairness
///
/// By default ([`Fairness::Barging`]) an unlock releases the lock and wakes
/// the oldest waiter, which races newcomers for it; once a waiter has waited
/// longer than [`STARVATION`](crate::STARVATION), unlocks hand the lock over
/// in FIFO order until the long waits are gone (Go's starvation mode).
/// [`Fairness::Fifo`] (see [`with_fairness`](Self::with_fairness)) is the
/// paper's strict order: every unlock with waiters hands the lock to the
/// oldest. [`MutexGuard::unlock_fair`] hands off once, in either mode.
///
/// Timed-out waits and dropped futures free their queue nodes themselves:
/// those at the front at once, and, to free those queued behind a live
/// waiter, a withdrawal now and then sweeps the whole queue, unlinking the
/// withdrawn nodes in place (once as many withdrawn nodes are left queued
/// as the live waiters the previous sweep kept). Live waiters keep their
/// places, so "oldest" stays exact. One thread at a time frees nodes, so a
/// dropped future that finds it more than about a thousand nodes behind
/// waits for it (see [`lock_async`](Self::lock_async)'s cancel safety):
/// the nodes left behind stay bounded, however fast tasks on other threads
/// withdraw.
///
/// # Concurrency restriction
///
/// In the default mode, while waiters are queued only one of them
/// circulates: the oldest, woken by an unlock, which competes with the
/// running threads; newcomers queue and sleep at once instead of spinning,
/// and, if the woken waiter is a thread, no other waiter is woken until it
/// has taken the lock or gone back to sleep. A woken task holds back no
/// other waiter (its executor may poll it late, or never): the next unlock
/// that finds waiters wakes the next one. So when threads outnumber cores
/// the running threads keep the lock (and their cores) without a wakeup per
/// unlock, and the sleeping waiters are rotated in one at a time, oldest
/// first. The bound: a waiter
/// that has waited more than [`STARVATION`](crate::STARVATION) switches the
/// lock to handoffs, and is then handed the lock after the waiters queued
/// ahead of it (see *Fairness*).
///
/// # Progress
///
/// No thread ever holds an internal lock, and no unlock waits for another
/// thread. An unlock that finds a waiter counted in the lock word but not
/// yet linked into the queue (its enqueue is a swap, then a store) does not
/// wait for that store, as the paper's algorithm does: it leaves the
/// wake-up to that waiter, which makes it once it has linked. A waiter
/// preempted (or stopped) between the two steps delays only what is owed
/// to it: under [`Fairness::Fifo`](crate::Fairness::Fifo), where the lock
/// goes to the oldest waiter, the lock waits for it (and every later
/// locker with it); under barging, other lockers take the lock meanwhile.
/// The [`Semaphore`](crate::Semaphore)'s releases do the same. Nor does an
/// unlock run for as long as other waiters keep withdrawing (futures
/// polled once and dropped, as in a `select!` loop): after a few dozen
/// withdrawn waiters in a row, the next waiter that withdraws takes the
/// rest of the wake-up over. An uncontended `lock`/`unlock` pair is one
/// CAS each way.
///
/// # Poisoning
///
/// There is none, as in parking_lot and tokio: a panic while the lock is held
/// unlocks it (the guard's `Drop`) and leaves the data as the panic left it.
///
/// # Panics
///
/// An unlock (a guard's drop, [`MutexGuard::unlock_fair`], and the unlock
/// inside [`MutexGuard::unlocked`], `unlocked_fair` and `bump`) or a
/// dropped [`LockAsync`] may wake a waiting task, whose waker is user code.
/// If the waker panics, the lock (or the wakeup) is passed on first, so the
/// other task holds its token, and then the panic goes on out of the drop
/// (out of `unlocked` once its guard holds the lock again), unless
/// the thread is already unwinding: then it is dropped, since a second
/// panic would abort the process. ([`RawMutex::unlock`], which `lock_api`
/// calls, never unwinds: it drops such a panic.) An [`ArcMutexGuard`] or a
/// [`LockArcAsync`] drops its `Arc` before such a panic goes on: if it was
/// the last one, the data is dropped then, and a panic of the data's own
/// drop is dropped in turn (the waker's, the first, goes on).
///
/// A timed lock that gives up ([`try_lock_for`](Self::try_lock_for),
/// [`try_lock_until`](Self::try_lock_until) and their `_arc` forms) may be
/// holding a wakeup, or the dequeuer's role it took to free its node, and
/// passes it on, which may wake a waiting task: that waker's panic goes on
/// out of the timed lock the same way, once the wakeup is passed on. The
/// lock is not held then (no guard is returned).
///
/// A lock that queues may make a wake-up that an unlock left to it (the
/// unlock found it half-way through queueing, see `# Progress`); that
/// wake-up is usually its own, but may be another waiting task's. If that
/// task's waker panics, an async lock's poll lets the panic go on with its
/// request kept (a later poll gets the lock, and dropping the future
/// withdraws it), as a queueing [`Semaphore`](crate::Semaphore) acquire
/// does. A blocking lock drops the panic and goes on waiting: the guards
/// take the lock back with it in [`MutexGuard::unlocked`] and `bump` (as
/// `lock_api`'s do with [`RawMutex::lock`]), where a lock that unwound
/// would leave the guard to unlock a lock it does not hold.
///
/// A waker may itself release the lock (an executor that polls its task on
/// the spot): the wakeups that release owes then run after that waker
/// returns, once this thread's wakeups nest a few dozen deep, so that one
/// unlock reaching every queued task does not grow the stack with the
/// queue. Their panics go on out of the outermost unlock.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use lockfree_sync::Mutex;
///
/// let counter = Arc::new(Mutex::new(0));
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let counter = Arc::clone(&counter);
///         std::thread::spawn(move || *counter.lock() += 1)
///     })
///     .collect();
/// for t in threads {
///     t.join().unwrap();
/// }
/// assert_eq!(*counter.lock(), 4);
/// ```
///
/// From tasks:
///
/// ```
/// use lockfree_sync::Mutex;
///
/// let m = Mutex::new(Vec::new());
/// futures::executor::block_on(async {
///     m.lock_async().await.push(1);
///     m.lock_async().await.push(2);
/// });
/// assert_eq!(m.into_inner(), [1, 2]);
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex owns a `T`; sending it sends the `T`.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: the lock gives one thread at a time access to the `T`, which is
// then moved into that thread's hands in effect: `T: Send` suffices (as for
// std's Mutex).
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    sync_core::const_unless_loom! {
        /// An unlocked mutex holding `value`, with [`Fairness::Barging`].
        ///
        /// # Examples
        ///
        /// ```
        /// let m = lockfree_sync::Mutex::new(5);
        /// assert_eq!(*m.lock(), 5);
        /// ```
        pub fn new(value: T) -> Self {
            Self::with_fairness(value, Fairness::Barging)
        }
    }

    sync_core::const_unless_loom! {
        /// An unlocked mutex holding `value`, with the given fairness.
        ///
        /// # Examples
        ///
        /// ```
        /// use lockfree_sync::{Fairness, Mutex};
        /// let m = Mutex::with_fairness(0, Fairness::Fifo);
        /// assert_eq!(m.fairness(), Fairness::Fifo);
        /// ```
        pub fn with_fairness(value: T, fairness: Fairness) -> Self {
            Self {
                raw: RawMutex::with_fairness(fairness),
                data: UnsafeCell::new(value),
            }
        }
    }

    /// Consumes the mutex and returns the data.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = lockfree_sync::Mutex::new(String::from("x"));
    /// assert_eq!(m.into_inner(), "x");
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, parking the calling thread while another holds it.
    ///
    /// Locking a mutex the calling thread already holds deadlocks.
    ///
    /// # Deadlocks
    ///
    /// It blocks the calling thread. Called from a task on a
    /// single-threaded executor while another task of that executor holds
    /// the lock (across an `.await`), it blocks that executor for ever: in
    /// async code use [`lock_async`](Self::lock_async).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = lockfree_sync::Mutex::new(1);
    /// *m.lock() += 1;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.raw.lock();
        // SAFETY: we just took the lock.
        unsafe { self.guard() }
    }

    /// Locks the mutex if it is free.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = lockfree_sync::Mutex::new(());
    /// let g = m.try_lock().unwrap();
    /// assert!(m.try_lock().is_none());
    /// drop(g);
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        if self.raw.try_lock() {
            // SAFETY: we just took the lock.
            Some(unsafe { self.guard() })
        } else {
            None
        }
    }

    /// A future that locks the mutex without blocking the thread.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any `.await` point loses nothing: if it was
    /// queued it is withdrawn; if the lock had already been handed to it, the
    /// lock is released to the next waiter; if it had been woken to compete,
    /// the wakeup passes to another waiter.
    ///
    /// A drop does not park, but it may wait: when the thread that frees
    /// withdrawn waiters' queue nodes is more than about a thousand of them
    /// behind (tasks that poll and drop futures on more threads than there
    /// are cores), the drop waits for it to catch up, or takes its role
    /// over, so that those nodes stay bounded however long such a churn
    /// lasts.
    ///
    /// Leaking the future instead (`mem::forget`, or a task that its
    /// executor neither polls nor drops) is not a cancellation: a queued
    /// future stays queued. If the lock is then handed to it (every unlock
    /// with waiters hands it over in [`Fairness::Fifo`] mode, as does
    /// [`MutexGuard::unlock_fair`], or a barging lock in starvation mode),
    /// it keeps the lock for ever, as a leaked guard would, and every later
    /// lock waits for ever. A leaked future woken to compete holds nothing:
    /// the lock stays free for the others.
    ///
    /// # Examples
    ///
    /// ```
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// # rt.block_on(async {
    /// use std::sync::Arc;
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Arc::new(Mutex::new(0));
    /// let tasks: Vec<_> = (0..10)
    ///     .map(|_| {
    ///         let m = Arc::clone(&m);
    ///         tokio::spawn(async move {
    ///             let mut g = m.lock_async().await;
    ///             tokio::task::yield_now().await; // held across an .await
    ///             *g += 1;
    ///         })
    ///     })
    ///     .collect();
    /// for t in tasks {
    ///     t.await.unwrap();
    /// }
    /// assert_eq!(*m.lock(), 10);
    /// # });
    /// ```
    pub fn lock_async(&self) -> LockAsync<'_, T> {
        LockAsync {
            mutex: self,
            raw: self.raw.lock_async(),
        }
    }

    /// Takes the lock, parking the thread while it is held, but gives up at
    /// `deadline`: `None` if it passed first.
    ///
    /// # Deadlocks
    ///
    /// As [`lock`](Self::lock), until the deadline.
    ///
    /// The deadline is checked while the thread spins as well as while it
    /// is parked, so the call returns within the deadline plus one
    /// scheduling quantum. It never yields: after a brief spin it parks
    /// with the time left (a yield on a machine with more runnable threads
    /// than CPUs can give the core away for a whole scheduling round). A
    /// timed-out waiter leaves the queue at once (its
    /// node, a few words, is freed by that timeout or a later one, or by
    /// the unlock that reaches it), so timed attempts in a loop do not pile
    /// up memory or wakeups, even behind a waiter that stays queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Mutex::new(0);
    /// let held = m.lock();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         let deadline = Instant::now() + Duration::from_millis(5);
    ///         assert!(m.try_lock_until(deadline).is_none());
    ///     });
    /// });
    /// drop(held);
    /// assert!(m.try_lock_until(Instant::now()).is_some());
    /// ```
    pub fn try_lock_until(&self, deadline: Instant) -> Option<MutexGuard<'_, T>> {
        self.raw.try_lock_until(deadline).then(|| {
            // SAFETY: `try_lock_until` returned true: we hold the lock.
            unsafe { self.guard() }
        })
    }

    /// [`try_lock_until`](Self::try_lock_until) `timeout` from now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Mutex::new(0);
    /// *m.try_lock_for(Duration::from_millis(1)).unwrap() += 1;
    /// assert_eq!(*m.lock(), 1);
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> Option<MutexGuard<'_, T>> {
        self.raw.try_lock_for(timeout).then(|| {
            // SAFETY: `try_lock_for` returned true: we hold the lock.
            unsafe { self.guard() }
        })
    }

    /// The fairness the mutex was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Fairness, Mutex};
    /// assert_eq!(Mutex::new(0).fairness(), Fairness::Barging);
    /// ```
    pub fn fairness(&self) -> Fairness {
        self.raw.fairness()
    }

    /// Whether the mutex is locked (a hint: it may change at once).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = lockfree_sync::Mutex::new(0);
    /// let g = m.lock();
    /// assert!(m.is_locked());
    /// drop(g);
    /// assert!(!m.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// Mutable access without locking: `&mut self` proves no one else can
    /// hold the lock.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut m = lockfree_sync::Mutex::new(1);
    /// *m.get_mut() += 1;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every other access.
        self.data.with_mut(|p| unsafe { &mut *p })
    }

    /// The raw lock (for `lock_api` interop or to build other guards).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = lockfree_sync::Mutex::new(0);
    /// let g = m.lock();
    /// assert!(m.raw().is_locked());
    /// drop(g);
    /// ```
    pub fn raw(&self) -> &RawMutex {
        &self.raw
    }

    /// # Safety
    ///
    /// The caller holds the lock and hands it to the guard.
    unsafe fn guard(&self) -> MutexGuard<'_, T> {
        // SAFETY: forwarded.
        unsafe { MutexGuard::new(self) }
    }
}

/// Guards that own an `Arc` of the mutex instead of borrowing it, for tasks
/// spawned with `'static` futures and for guards stored in structs.
impl<T: ?Sized> Mutex<T> {
    /// [`lock`](Self::lock) through an `Arc`: the guard keeps the mutex
    /// alive and borrows nothing (parking_lot's `lock_arc`).
    ///
    /// # Deadlocks
    ///
    /// It blocks the calling thread. Called from a task on a
    /// single-threaded executor while another task of that executor holds
    /// the lock (across an `.await`), it blocks that executor for ever: in
    /// async code use [`lock_arc_async`](Self::lock_arc_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::{Mutex, ArcMutexGuard};
    ///
    /// let m = Arc::new(Mutex::new(1));
    /// let mut g: ArcMutexGuard<i32> = m.lock_arc();
    /// let t = std::thread::spawn(move || *g += 1); // the guard moves
    /// t.join().unwrap();
    /// assert_eq!(*m.lock(), 2);
    /// ```
    pub fn lock_arc(self: &Arc<Self>) -> ArcMutexGuard<T> {
        self.raw.lock();
        // SAFETY: we just took the lock.
        unsafe { ArcMutexGuard::new(Arc::clone(self)) }
    }

    /// [`try_lock`](Self::try_lock) through an `Arc`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Arc::new(Mutex::new(()));
    /// let g = m.try_lock_arc().unwrap();
    /// assert!(m.try_lock_arc().is_none());
    /// drop(g);
    /// ```
    pub fn try_lock_arc(self: &Arc<Self>) -> Option<ArcMutexGuard<T>> {
        self.raw.try_lock().then(|| {
            // SAFETY: `try_lock` returned true: we hold the lock.
            unsafe { ArcMutexGuard::new(Arc::clone(self)) }
        })
    }

    /// [`try_lock_until`](Self::try_lock_until) through an `Arc`: `None` if
    /// `deadline` passed first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Arc::new(Mutex::new(0));
    /// let deadline = Instant::now() + Duration::from_millis(1);
    /// let mut g = m.try_lock_arc_until(deadline).unwrap();
    /// *g += 1;
    /// assert!(m.try_lock_arc_until(Instant::now()).is_none()); // held
    /// ```
    pub fn try_lock_arc_until(self: &Arc<Self>, deadline: Instant) -> Option<ArcMutexGuard<T>> {
        self.raw.try_lock_until(deadline).then(|| {
            // SAFETY: `try_lock_until` returned true: we hold the lock.
            unsafe { ArcMutexGuard::new(Arc::clone(self)) }
        })
    }

    /// [`try_lock_for`](Self::try_lock_for) through an `Arc`: `None` if
    /// `timeout` passed first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Arc::new(Mutex::new(0));
    /// let held = m.lock_arc();
    /// assert!(m.try_lock_arc_for(Duration::from_millis(1)).is_none());
    /// drop(held);
    /// assert!(m.try_lock_arc_for(Duration::from_millis(1)).is_some());
    /// ```
    pub fn try_lock_arc_for(self: &Arc<Self>, timeout: Duration) -> Option<ArcMutexGuard<T>> {
        self.raw.try_lock_for(timeout).then(|| {
            // SAFETY: `try_lock_for` returned true: we hold the lock.
            unsafe { ArcMutexGuard::new(Arc::clone(self)) }
        })
    }

    /// [`lock_async`](Self::lock_async) for an `Arc` it takes over: the
    /// future and its guard are `'static` (tokio's `lock_owned`).
    ///
    /// # Cancel safety
    ///
    /// As [`lock_async`](Self::lock_async): dropping the future at any point
    /// loses no lock and no wakeup.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use lockfree_sync::Mutex;
    ///
    /// let m = Arc::new(Mutex::new(0));
    /// let g = Arc::clone(&m).lock_arc_async().await;
    /// tokio::spawn(async move {
    ///     let mut g = g; // 'static: moves into the task
    ///     *g += 1;
    /// })
    /// .await
    /// .unwrap();
    /// assert_eq!(*m.lock_async().await, 1);
    /// # });
    /// ```
    #[doc(alias = "lock_owned")]
    pub fn lock_arc_async(self: Arc<Self>) -> LockArcAsync<T> {
        // The future owns `self` and drops its `raw` future (the only holder
        // of this borrow, which never leaves the future) before it.
        // SAFETY: the lock lives in the `Arc`'s allocation, which never
        // moves and which the future keeps alive (see above).
        let raw: &'static RawMutex = unsafe { &*core::ptr::from_ref(&self.raw) };
        LockArcAsync {
            raw: core::mem::ManuallyDrop::new(raw.lock_async()),
            mutex: core::mem::ManuallyDrop::new(self),
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Self::with_fairness(T::default(), Fairness::Barging)
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Self::with_fairness(value, Fairness::Barging)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        let guard = self.try_lock();
        match &guard {
            Some(guard) => d.field("data", &&**guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        let r = d.field("fairness", &self.fairness()).finish();
        // The unlock may wake a waiting task whose waker panics: a wake-up
        // owed to that task, not to this formatting (rule 4 of
        // `sync_core::unwind`), so its panic is dropped, as `AstMutex`'s
        // `Debug` does.
        if let Some(guard) = guard {
            let _ = sync_core::unwind::catch_and_discard(move || drop(guard));
        }
        r
    }
}
