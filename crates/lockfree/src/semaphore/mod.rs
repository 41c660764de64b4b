//! [`Semaphore`]: Lin & Vella's algorithm 2, a counter that may go negative
//! and a lock-free FIFO queue of waiters, usable from threads and tasks.
//!
//! # The words
//!
//! * `count`: free permits minus the demand nobody has covered yet. An
//!   acquire that finds too few permits subtracts its whole request anyway
//!   (it is *counted*), then enqueues a [`Waiter`] whose `data` is its whole
//!   request. A negative `count` therefore says how many permits counted
//!   waiters still lack, whether or not they have finished enqueueing: the
//!   paper's lost-wakeup window is closed by the counter, as in the mutex.
//! * `pending`: permits that releases have taken out of the deficit but not
//!   yet handed to waiters, shifted left by four, with four flags:
//!   `ACTIVE` (one thread is delivering), `RECHECK` (a waiter cancelled: look
//!   at the head again), `CLOSED` (set once by [`Semaphore::close`], never
//!   cleared) and `OWED` (see below). A release that finds `count` negative
//!   adds what it covers to `pending`; if nobody is delivering, it becomes the deliverer, and hands
//!   permits to the waiters in queue order until the oldest needs more than
//!   `pending` holds. A deliverer retires with a CAS on the exact `pending`
//!   it last saw, so permits added meanwhile are never stranded; other
//!   releasers never wait for it.
//!
//! The paper lets releasers race each other to dequeue; here the queue has
//! one consumer at a time (the `ACTIVE` holder), which is what lets the
//! queue be the simple wait-free-push MPSC queue and lets a request of many
//! permits wait at the head while releases accumulate for it.
//!
//! # A waiter half-way through its push
//!
//! A counted waiter pushes its node (a swap, then a store that links it)
//! right after counting itself. A deliverer that finds the queue's front
//! not linked yet (with permits to deliver, or demand to drain after a
//! close) does not wait for that store (the waiter may be preempted there
//! for a scheduling round): after a few more looks a spin hint apart (a
//! running waiter links within nanoseconds), it sets `OWED`, looks once more,
//! and if the link is still missing it retires, leaving `OWED` set. Every
//! waiter looks at `pending` right after its link, and if `OWED` is set it
//! runs the delivery (or, if a deliverer is active, sets `RECHECK`, which
//! fails that deliverer's retirement, so it looks again). `SeqCst` fences
//! order the two looks (the deliverer's announcement, then its second look
//! at the queue; the waiter's link, then its look at `pending`), so at
//! least one side sees the other: no delivery is stranded, and no thread
//! waits for another.
//!
//! # No partial holds
//!
//! A request for `n` that finds `0 < c < n` permits free takes none of them
//! for itself: once it is queued it adds the `c` to `pending`, like a
//! release, so they go to the *oldest* waiter. Permits are only ever held by
//! a request that has all of them, or waiting in `pending` for the head of
//! the queue. (Were a waiting request to keep them, a request counted
//! later but queued first could wait at the head for permits that a
//! request behind it sits on: a deadlock.)
//!
//! # Cancellation
//!
//! A future dropped while queued marks its node cancelled; its demand stays
//! in `count` until the deliverer reaches the node and *folds* it: the
//! demand leaves `count`, and whatever part of it `pending` had already
//! covered goes back to the free permits. The canceller then sets `RECHECK`
//! (running a delivery itself if nobody is): had it been the head, waiting
//! for more permits, the ones `pending` already held for it would otherwise
//! sit there until the next release, while newcomers queue behind a waiter
//! that is gone. `pending` may dip below zero for a moment while a releaser
//! is between its two steps; the sums stay exact.
//!
//! Only the queue's consumer may unlink a node, so a withdrawn waiter
//! behind a live head would keep its node until the head is served. So,
//! after a cancel, once the withdrawn waiters not yet freed are as many as
//! the live ones its last sweep kept that are still queued, the deliverer
//! sweeps the queue (`WaiterQueue::sweep_with`, the family's one sweep): it
//! frees the withdrawn waiters in place and folds their demand, and the
//! live ones keep their places. Memory stays near twice the waiters present,
//! whatever the number of cancels. A cancelled task's waker is dropped at
//! the cancel itself (`sync_core::waiter`).
//!
//! Waiters that keep queueing and cancelling (tasks that poll
//! `acquire_async` once in a `select!` loop and drop it) set `RECHECK` as
//! often as the deliverer tries to retire, and it would never retire (nor
//! wake the waiters it granted, which it wakes once it retires). So a
//! deliverer that has made a few dozen passes without retiring asks for
//! help, and the next canceller that finds it delivering takes the role over from it
//! (`crate::handover`): a release never runs for as long as others keep
//! cancelling.
//!
//! The deliverer is one thread, and the cancellers may be many: with more
//! of them than cores they can queue nodes faster than it frees them. A
//! dropped future that finds it running and more than a thousand withdrawn
//! nodes not yet freed waits for it to catch up (`crate::backlog`; a
//! timed-out thread, which cannot outrun it, never waits there), so
//! that memory, and the wait of a live waiter queued behind those nodes,
//! stay bounded however long the churn lasts.
//!
//! # Close
//!
//! [`Semaphore::close`] sets `CLOSED` and `RECHECK` and runs (or makes the
//! running deliverer run) a *drain*: every queued waiter's demand is folded
//! and the waiter is handed the `CLOSED` token, until no demand is left in
//! `count` or `pending`. A waiter counted while the drain runs and not
//! linked yet is left the drain (`OWED`, above); one counted after the
//! drain's last look at `count` (an RMW) sees `CLOSED` when it checks after its push (its
//! counting RMW comes later in `count`'s order, so it sees everything the
//! drain saw), and runs a drain itself.

use core::fmt;
use core::time::Duration;
use std::time::Instant;

use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::waiter::{Waiter, WaiterQueue};

use crate::backlog::Backlog;
use crate::error::{AcquireError, TryAcquireError};
use crate::handover::Handover;

mod arc;
mod future;
mod permit;
mod raw;
mod timed;

use future::Request;
pub use future::{AcquireArcAsync, AcquireAsync};
pub use permit::{ArcSemaphorePermit, SemaphorePermit};
use raw::{ACTIVE, CLOSED, RECHECK};

/// A counting semaphore whose waiters wait in a lock-free FIFO queue, and
/// which both threads and async tasks can acquire.
///
/// * [`acquire`](Self::acquire) and [`acquire_many`](Self::acquire_many) park
///   the calling thread until the permits are available;
///   [`try_acquire_for`](Self::try_acquire_for) and
///   [`try_acquire_until`](Self::try_acquire_until) park it until a
///   deadline at most;
/// * [`acquire_async`](Self::acquire_async),
///   [`acquire_many_async`](Self::acquire_many_async) and, for a semaphore
///   in an [`Arc`](std::sync::Arc), [`acquire_arc_async`](Self::acquire_arc_async)
///   return futures that never block the executor's thread, on any
///   executor.
///
/// Permits come back when the [`SemaphorePermit`] (or
/// [`ArcSemaphorePermit`]) drops, or explicitly with
/// [`add_permits`](Self::add_permits) (after [`SemaphorePermit::forget`], or
/// to raise the limit). [`close`](Self::close) sends every waiter away with
/// an error.
///
/// # Fairness
///
/// FIFO: a request waits behind every request counted before it, and a
/// request for many permits is served at the head of the queue as releases
/// accumulate, so large requests are not starved by small ones. A new
/// request takes permits at once only if they are free, which they are not
/// while a queued request lacks any (the counter is then negative); a
/// blocking acquire spins briefly for a free permit before it is counted.
///
/// The price of FIFO is a handoff per permit: while requests wait, a
/// released permit belongs to the oldest of them, and nobody else may use it
/// until that waiter's thread (or task) runs. A parked thread must first be
/// woken, so when permits are held for short times and requests queue,
/// acquisitions go at the rate of wakeups, one after another (a *convoy*),
/// and the convoy keeps itself going once it has formed: every newcomer
/// finds a queue and joins it. More threads than cores make it likelier. For
/// mutual exclusion between threads, [`Mutex`](crate::Mutex) (whose default
/// lets a running thread take a released lock) does not convoy; this
/// semaphore suits limits on concurrency where holds are long beside a
/// wakeup, or where the order must be kept.
///
/// "Counted before" is exact for every request that had reached the queue
/// when the later one was counted. Two requests counted within the few
/// instructions between one's count and its push (no user code runs there)
/// may reach the queue in the other order, and are then served in queue
/// order; since a waiting request never holds permits (see the module's
/// notes), the order they take can delay but never deadlock them.
///
/// # Requests larger than the semaphore
///
/// A request for more permits than will ever exist (say `acquire_many(5)`
/// on `Semaphore::new(3)` with no [`add_permits`](Self::add_permits) to
/// come) waits at the head of the queue for ever, and every request behind
/// it waits too (FIFO: nobody overtakes it), as in `tokio`. Permits released
/// meanwhile are kept for it, not lost. [`close`](Self::close) sends it (and
/// everybody else) away with an error and frees what was kept; dropping its
/// future or letting a [`try_acquire_many_for`](Self::try_acquire_many_for)
/// time out withdraws it, and the requests behind it proceed. A request
/// above [`MAX_PERMITS`](Self::MAX_PERMITS) can never be met and panics.
///
/// # Panics
///
/// A task's waker that panics when a release (or a [`close`](Self::close))
/// wakes it: the release finishes delivering permits to every waiter it
/// serves (the close, sending every waiter away), and then the panic goes on
/// in the releasing thread, unless that thread is already unwinding (a
/// permit or an acquire future dropped during a panic): then the waker's
/// panic is dropped, since a second panic would abort the process.
///
/// A waker may itself release permits (an executor that polls its task on
/// the spot): the wakeups that release owes then run after that waker
/// returns, once this thread's wakeups nest a few dozen deep, so that one
/// release reaching every queued task does not grow the stack with the
/// queue. Their panics go on out of the outermost release.
///
/// An acquire that queues can find permits being released (or a delivery
/// left to it by a release that found it half-way through queueing, see
/// `# Progress`) and deliver them itself, to older waiters first; a panic
/// of their wakers then goes on out of that acquire, once its own request is settled. A blocking acquire
/// withdraws its request first (giving back permits already handed to it),
/// so it unwinds holding nothing. An async acquire keeps its request: a
/// later poll gets the permits, and dropping the future gives them back.
/// An acquire (any form) that takes permits just as the semaphore is
/// closed gives them back, which is a release: the panic of a waker it
/// runs then goes on out of that acquire too, with the permits back.
/// A timed acquire ([`try_acquire_for`](Self::try_acquire_for) and the
/// other timed forms) that gives up withdraws its request, and the
/// withdrawal may deliver: the permits kept for it (a head request served
/// in part) go to the waiters behind it, and a panic of their wakers goes
/// on out of that timed acquire once the semaphore is consistent, with
/// nothing held (the error is lost to the panic), unless the thread is
/// already unwinding (then it is dropped).
///
/// # Progress
///
/// No internal lock, and no thread waits for another. An uncontended
/// acquire is one CAS, a release one `fetch_add`. A release that finds
/// waiters adds to the delivery and returns; only one releaser at a time
/// delivers, and it never waits for another releaser, nor for a counted
/// waiter to finish its enqueue (a swap, then a store): it leaves the
/// delivery to that waiter, which makes it once linked. A waiter preempted
/// between the two steps delays only the permits owed to it (and, since
/// permits go in queue order, those of the waiters behind it). Nor does it
/// deliver for as long as other waiters keep cancelling: after a few dozen
/// passes without retiring, the next cancelling waiter takes the delivery
/// over.
///
/// # Examples
///
/// ```
/// use lockfree_sync::Semaphore;
///
/// let sem = Semaphore::new(2);
/// let a = sem.acquire().unwrap();
/// let b = sem.try_acquire().expect("a second permit");
/// assert!(sem.try_acquire().is_err());
/// drop(a);
/// assert_eq!(sem.available_permits(), 1);
/// # drop(b);
/// ```
///
/// Limiting tasks:
///
/// ```
/// use lockfree_sync::Semaphore;
///
/// let sem = Semaphore::new(3);
/// futures::executor::block_on(async {
///     let p = sem.acquire_many_async(3).await.unwrap();
///     assert_eq!(sem.available_permits(), 0);
///     drop(p);
/// });
/// assert_eq!(sem.available_permits(), 3);
/// ```
pub struct Semaphore {
    count: AtomicIsize,
    pending: AtomicUsize,
    /// The permits in existence: free, held, or kept for waiters (what
    /// `new`, `add_permits` and `release` made, less what was forgotten).
    /// At most [`MAX_PERMITS`](Self::MAX_PERMITS), checked before permits
    /// are added, so that a permit's return, and a merge of permits, can
    /// never go past it.
    ///
    /// A bound only: no operation orders anything through it (all its
    /// accesses are Relaxed) and the waiting protocol never reads it. So it
    /// is the core atomic even under loom, which then need not explore its
    /// accesses (they would multiply the interleavings of every model that
    /// adds or forgets permits, for no protocol to check).
    total: core::sync::atomic::AtomicUsize,
    queue: WaiterQueue,
    /// Requests withdrawn (cancelled futures, timed-out waits), and the
    /// withdrawn nodes the deliverer has freed: the deliverer sweeps the
    /// queue once the withdrawn nodes not freed are as many as the live
    /// waiters its last sweep kept that are still queued, and a
    /// dropped future that withdraws while the deliverer is far behind
    /// waits for it (see [`crate::backlog`]).
    backlog: Backlog,
    /// The oldest waiter, which the deliverer took from the queue and keeps
    /// while it waits for more permits. Only the `ACTIVE` holder touches it.
    head: UnsafeCell<Option<Arc<Waiter>>>,
    /// A deliverer that keeps finding nothing to deliver hands `ACTIVE` to
    /// a cancelling waiter (see [`crate::handover`]).
    handover: Handover,
}

// SAFETY: every field but `head` is an atomic or the (Send + Sync) queue;
// `head` is only accessed by the thread holding `pending`'s ACTIVE bit,
// which is passed from one holder to the next with Release/Acquire RMWs.
// The node it holds is an `Arc<Waiter>` (Send + Sync).
unsafe impl Send for Semaphore {}
// SAFETY: as for `Send`.
unsafe impl Sync for Semaphore {}

// A panic (bad input, or a waker's, which the deliverer holds back until it
// has retired) never leaves the counters half-updated.
impl core::panic::UnwindSafe for Semaphore {}
impl core::panic::RefUnwindSafe for Semaphore {}

impl Semaphore {
    /// The most permits a semaphore holds, and the most one request may ask
    /// for: `2^31 - 1` on 64-bit targets (`2^15 - 1` on 32-bit ones).
    ///
    /// Waiters count their demand into the semaphore's counter before they
    /// wait, so the sum of all outstanding requests must fit: half the
    /// pointer width per request leaves room for billions of waiters on
    /// 64-bit targets (thousands on 32-bit ones).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::Semaphore;
    /// assert!(Semaphore::MAX_PERMITS >= (1 << 15) - 1);
    /// ```
    pub const MAX_PERMITS: usize = usize::MAX >> (usize::BITS / 2 + 1);

    sync_core::const_unless_loom! {
        /// A semaphore with `permits` permits.
        ///
        /// # Panics
        ///
        /// If `permits` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
        ///
        /// # Examples
        ///
        /// ```
        /// use lockfree_sync::Semaphore;
        /// static POOL: Semaphore = Semaphore::new(4);
        /// assert_eq!(POOL.available_permits(), 4);
        /// ```
        pub fn new(permits: usize) -> Self {
            assert!(
                permits <= Self::MAX_PERMITS,
                "Semaphore::new: more permits than Semaphore::MAX_PERMITS"
            );
            Self {
                count: AtomicIsize::new(permits as isize),
                pending: AtomicUsize::new(0),
                total: core::sync::atomic::AtomicUsize::new(permits),
                queue: WaiterQueue::new(),
                backlog: Backlog::new(),
                head: UnsafeCell::new(None),
                handover: Handover::new(),
            }
        }
    }

    /// The raw words `(count, pending)`, for loom models to check that no
    /// demand, delivery or deliverer role is left behind when every thread
    /// is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn __test_loom_state(&self) -> (isize, usize) {
        (self.count.load(Relaxed), self.pending.load(Relaxed))
    }

    /// The state of the deliverer's handover to a cancelling waiter, for
    /// loom models: 0 once every thread is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn __test_loom_handover(&self) -> usize {
        self.handover.loom_state()
    }

    /// Withdrawn waiters whose nodes the deliverer has not freed yet, for
    /// loom models: 0 once every thread is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn __test_loom_backlog(&self) -> usize {
        self.backlog.loom_backlog()
    }

    /// Makes every withdrawal that finds the deliverer running wait until
    /// it has freed `limit` or fewer withdrawn nodes, for loom models of
    /// that wait (see `crate::backlog`).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn __test_loom_backlog_limit(&self, limit: usize) {
        self.backlog.set_loom_limit(limit);
    }

    /// The permits free right now (a hint: it may change at once). Permits
    /// on their way to waiters are not free.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(2);
    /// let _p = sem.acquire().unwrap();
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    pub fn available_permits(&self) -> usize {
        self.count.load(Relaxed).max(0) as usize
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// assert!(!sem.is_closed());
    /// sem.close();
    /// assert!(sem.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        // Acquire: pairs with `close`'s AcqRel fetch_or.
        self.pending.load(Acquire) & CLOSED != 0
    }

    /// Closes the semaphore: every waiting acquire, thread or task, returns
    /// [`AcquireError`] (or [`TryAcquireError::Closed`] for a timed one), and
    /// every later acquire fails at once. A permit that comes back after the
    /// close goes to no acquire, not even to one that began before it (an
    /// acquire that takes permits looks again, and gives them back if the
    /// semaphore is closed by then). Permits already held stay valid
    /// and come back as usual; permits that were kept for waiters become
    /// free again (so [`available_permits`](Self::available_permits) still
    /// counts every permit). Closing twice does nothing more.
    ///
    /// This is the way out for a request larger than the semaphore will
    /// ever be (see the type's docs).
    ///
    /// # Panics
    ///
    /// Sending the waiters away wakes the tasks among them, whose wakers are
    /// user code: if one panics, the close still sends every waiter away
    /// (each holds its error), and then the first such panic goes on out of
    /// `close`, unless the thread is already unwinding (then it is
    /// dropped). If another thread is delivering permits at that moment,
    /// that thread sends the waiters away instead, and its operation takes
    /// such panics; the close then returns at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::Semaphore;
    ///
    /// let sem = Arc::new(Semaphore::new(1));
    /// let waiter = {
    ///     let sem = Arc::clone(&sem);
    ///     std::thread::spawn(move || sem.acquire_many(2).map(|p| p.permits()))
    /// };
    /// sem.close();
    /// assert!(waiter.join().unwrap().is_err());
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    pub fn close(&self) {
        // AcqRel: Release publishes the flag to whoever sees it; Acquire, if
        // we become the deliverer, pairs with the previous one's retirement.
        let prev = self.pending.fetch_or(CLOSED | RECHECK | ACTIVE, AcqRel);
        if prev & ACTIVE == 0 {
            self.run_delivery();
        }
    }

    /// Takes one permit if one is free and nobody is waiting.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::NoPermits`] if none is free (or others wait for
    /// it), [`TryAcquireError::Closed`] after [`close`](Self::close).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Semaphore, TryAcquireError};
    /// let sem = Semaphore::new(1);
    /// let p = sem.try_acquire().unwrap();
    /// assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::NoPermits);
    /// # drop(p);
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits if they are free and nobody is waiting.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(3);
    /// assert_eq!(sem.try_acquire_many(2).unwrap().permits(), 2);
    /// assert!(sem.try_acquire_many(4).is_err());
    /// ```
    #[inline]
    pub fn try_acquire_many(&self, n: usize) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        check_request(n);
        self.try_take_open(n)?;
        Ok(SemaphorePermit::new(self, n))
    }

    /// Takes one permit, parking the thread until one is free.
    ///
    /// In async code use [`acquire_async`](Self::acquire_async)`().await`
    /// (tokio's `acquire().await`): this method blocks the executor's
    /// thread.
    ///
    /// # Errors
    ///
    /// [`AcquireError`] if the semaphore is closed, before or while waiting.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread. Called from a task on a
    /// single-threaded executor while another task of that executor holds
    /// the permits, it blocks that executor for ever: in async code use
    /// [`acquire_async`](Self::acquire_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// let p = sem.acquire().unwrap();
    /// assert_eq!(p.permits(), 1);
    /// ```
    #[inline]
    pub fn acquire(&self) -> Result<SemaphorePermit<'_>, AcquireError> {
        self.acquire_many(1)
    }

    /// Takes `n` permits at once, parking the thread until they are free.
    /// A request for zero permits returns at once.
    ///
    /// # Errors
    ///
    /// [`AcquireError`] if the semaphore is closed, before or while waiting.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread. Called from a task on a
    /// single-threaded executor while another task of that executor holds
    /// the permits, it blocks that executor for ever: in async code use
    /// [`acquire_many_async`](Self::acquire_many_async)`().await`.
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS): such a request
    /// could never be met. (A request above the permits that exist but
    /// within the maximum waits: see the type's docs.)
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(3);
    /// let p = sem.acquire_many(3).unwrap();
    /// assert_eq!(sem.available_permits(), 0);
    /// # drop(p);
    /// ```
    #[inline]
    pub fn acquire_many(&self, n: usize) -> Result<SemaphorePermit<'_>, AcquireError> {
        self.take_blocking(n)?;
        Ok(SemaphorePermit::new(self, n))
    }

    /// Takes `n` permits, parking the thread until they are free.
    #[inline]
    fn take_blocking(&self, n: usize) -> Result<(), AcquireError> {
        check_request(n);
        match self.try_take_open(n) {
            Ok(()) => Ok(()),
            Err(TryAcquireError::Closed) => Err(AcquireError::closed()),
            Err(TryAcquireError::NoPermits) => self
                .acquire_slow(n, None)
                .map_err(|_| AcquireError::closed()),
        }
    }

    /// A future that takes one permit without blocking the thread.
    ///
    /// # Errors
    ///
    /// The future returns [`AcquireError`] if the semaphore is closed
    /// before or while it waits.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point loses no permit and no place for
    /// others: a queued request is withdrawn (its demand is folded, and
    /// permits kept for it go to the next waiter or back to the free ones),
    /// and permits already delivered to it are released. The task's waker
    /// is dropped with it (the queue node that stays behind until a
    /// deliverer passes holds neither the waker nor the task). If that
    /// waker's `drop` panics, the withdrawal is completed first (the permits
    /// kept for the request are freed all the same), then the panic goes on,
    /// unless the thread is already unwinding.
    ///
    /// A drop does not park, but it may wait: when the running deliverer is
    /// more than about a thousand withdrawn requests behind (tasks that
    /// poll and drop futures on more threads than there are cores), the
    /// drop waits for it to catch up, or takes its role over, so that the
    /// nodes withdrawn requests leave behind stay bounded however long such
    /// a churn lasts.
    ///
    /// Leaking the future instead (`mem::forget`, or a task that its
    /// executor neither polls nor drops) is not a cancellation: a queued
    /// request stays queued, in its turn. The permits delivered to it are
    /// never released, and, as the queue is FIFO, the requests behind it
    /// wait until it has been served.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// let p = futures::executor::block_on(sem.acquire_async()).unwrap();
    /// assert_eq!(p.permits(), 1);
    /// ```
    #[doc(alias = "acquire")]
    pub fn acquire_async(&self) -> AcquireAsync<'_> {
        self.acquire_many_async(1)
    }

    /// A future that takes `n` permits at once without blocking the thread.
    ///
    /// # Errors
    ///
    /// As [`acquire_async`](Self::acquire_async).
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_async`](Self::acquire_async).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS) (when called, not
    /// when polled).
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(2);
    /// let p = futures::executor::block_on(sem.acquire_many_async(2)).unwrap();
    /// assert_eq!(p.permits(), 2);
    /// ```
    pub fn acquire_many_async(&self, n: usize) -> AcquireAsync<'_> {
        check_request(n);
        AcquireAsync {
            sem: self,
            state: Request::new(n),
        }
    }

    /// Adds `n` permits: returns forgotten permits, or raises the limit.
    /// Waiters are served first, oldest first. The same as
    /// [`release`](Self::release).
    ///
    /// # Panics
    ///
    /// If the semaphore's permits, free, held and kept for waiters, would
    /// exceed [`MAX_PERMITS`](Self::MAX_PERMITS). Nothing changes then.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(0);
    /// sem.add_permits(2);
    /// assert_eq!(sem.available_permits(), 2);
    /// ```
    #[inline]
    #[track_caller]
    pub fn add_permits(&self, n: usize) {
        self.release(n);
    }

    /// Removes up to `n` of the free permits for good, and returns how many
    /// it removed: lowers the limit without waiting (permits that are held,
    /// or kept for waiters, are not touched).
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(3);
    /// let held = sem.acquire().unwrap();
    /// assert_eq!(sem.forget_permits(5), 2);
    /// assert_eq!(sem.available_permits(), 0);
    /// drop(held);
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    pub fn forget_permits(&self, n: usize) -> usize {
        let mut c = self.count.load(Relaxed);
        loop {
            if c <= 0 || n == 0 {
                return 0;
            }
            let take = n.min(c as usize);
            // Relaxed: the permits are destroyed, nothing is handed over.
            match self
                .count
                .compare_exchange_weak(c, c - take as isize, Relaxed, Relaxed)
            {
                Ok(_) => {
                    // Relaxed: a bound (see `total`); lowered after the
                    // permits are gone, so it never counts fewer than exist.
                    self.total.fetch_sub(take, Relaxed);
                    return take;
                }
                Err(actual) => c = actual,
            }
        }
    }

    /// Adds `n` permits: returns forgotten permits, or raises the limit.
    /// Waiters are served first, oldest first.
    ///
    /// # Panics
    ///
    /// If the semaphore's permits, free, held and kept for waiters, would
    /// exceed [`MAX_PERMITS`](Self::MAX_PERMITS): checked before anything
    /// changes, so that nothing does then, and so that a permit's return
    /// (its drop) never can go past the maximum.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// sem.acquire().unwrap().forget();
    /// sem.release(1);
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    #[track_caller]
    pub fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut total = self.total.load(Relaxed);
        loop {
            if n > Self::MAX_PERMITS - total {
                overflow(n, total);
            }
            // Relaxed: a bound, not a hand-over; the permits go out with
            // `put_back`'s Release.
            match self
                .total
                .compare_exchange_weak(total, total + n, Relaxed, Relaxed)
            {
                Ok(_) => break,
                Err(actual) => total = actual,
            }
        }
        self.put_back(n);
    }
}

/// The deadline `timeout` from now; `None` (no deadline) past what
/// `Instant` holds.
fn after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

#[cold]
#[inline(never)]
#[track_caller]
fn overflow(n: usize, total: usize) -> ! {
    panic!(
        "Semaphore::add_permits({n}): the semaphore's permits (free, held or kept for \
         waiters: {total}) would exceed Semaphore::MAX_PERMITS ({})",
        Semaphore::MAX_PERMITS
    )
}

#[inline]
#[track_caller]
fn check_request(n: usize) {
    if n > Semaphore::MAX_PERMITS {
        request_too_large(n);
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn request_too_large(n: usize) -> ! {
    panic!(
        "Semaphore: a request for {n} permits can never be met: it exceeds Semaphore::MAX_PERMITS ({})",
        Semaphore::MAX_PERMITS
    )
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available_permits", &self.available_permits())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// A semaphore with no permits (add them with
/// [`add_permits`](Semaphore::add_permits)).
///
/// # Examples
///
/// ```
/// let sem = lockfree_sync::Semaphore::default();
/// assert_eq!(sem.available_permits(), 0);
/// ```
impl Default for Semaphore {
    fn default() -> Self {
        Self::new(0)
    }
}
