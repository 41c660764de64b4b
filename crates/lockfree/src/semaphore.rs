//! [`Semaphore`]: Lin & Vella's algorithm 2, a counter that may go negative
//! and a lock-free FIFO queue of waiters, usable from threads and tasks.
//!
//! # The words
//!
//! * `count`: free permits minus the demand nobody has covered yet. An
//!   acquire that finds too few permits subtracts its request anyway (it is
//!   *counted*), then enqueues a [`Waiter`] whose `data` is what it still
//!   needs. A negative `count` therefore says how many permits counted
//!   waiters still lack, whether or not they have finished enqueueing: the
//!   paper's lost-wakeup window is closed by the counter, as in the mutex.
//! * `pending`: permits that releases have taken out of the deficit but not
//!   yet handed to waiters, shifted left by two, with the `ACTIVE` bit: the
//!   one thread currently delivering. A release that finds `count` negative
//!   adds what it covers to `pending`; if nobody is delivering, it becomes
//!   the deliverer, and hands permits to the waiters in queue order until
//!   the oldest needs more than `pending` holds. A deliverer retires with a
//!   CAS on the exact `pending` it last saw, so permits added meanwhile are
//!   never stranded; other releasers never wait for it.
//!
//! The paper lets releasers race each other to dequeue; here the queue has
//! one consumer at a time (the `ACTIVE` holder), which is what lets the
//! queue be the simple wait-free-push MPSC queue and lets a request of many
//! permits wait at the head while releases accumulate for it.
//!
//! # Cancellation
//!
//! A future dropped while queued marks its node cancelled and returns the
//! permits it had already taken; its uncovered demand stays in `count` until
//! the deliverer reaches the node and *folds* it: the demand leaves `count`,
//! and whatever part of it `pending` had already covered goes back to the
//! free permits. The canceller then sets `RECHECK` (running a delivery itself
//! if nobody is): had it been the head, waiting for more permits, the ones
//! `pending` already held for it would otherwise sit there until the next
//! release, while newcomers queue behind a waiter that is gone. `pending` may dip below zero for a moment while a releaser
//! is between its two steps; the sums stay exact.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::panic::{self, AssertUnwindSafe};

use sync_core::parking_lot::SpinWait;
use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicIsize, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::waiter::{Token, Waiter, WaiterQueue, Wakeup};

use crate::patience::pop_counted;

/// `pending`'s deliverer bit.
const ACTIVE: usize = 0b01;
/// `pending`'s "look at the head again" bit, set by a cancelled waiter so
/// that the deliverer cannot retire past it.
const RECHECK: usize = 0b10;
/// Where `pending`'s amount starts.
const SHIFT: u32 = 2;
/// The token of a waiter whose permits have all been delivered.
const GRANTED: Token = 1;

/// A counting semaphore whose waiters wait in a lock-free FIFO queue, and
/// which both threads and async tasks can acquire.
///
/// * [`acquire`](Self::acquire) and [`acquire_many`](Self::acquire_many) park
///   the calling thread until the permits are available;
/// * [`acquire_async`](Self::acquire_async) and
///   [`acquire_many_async`](Self::acquire_many_async) return futures that
///   never block the executor's thread, on any executor.
///
/// Permits come back when the [`SemaphorePermit`] drops, or explicitly with
/// [`release`](Self::release) (after [`SemaphorePermit::forget`], or to add
/// permits).
///
/// # Fairness
///
/// FIFO: a request waits behind every request counted before it, and a
/// request for many permits is served at the head of the queue as releases
/// accumulate, so large requests are not starved by small ones. A new
/// request takes permits at once only if they are free, which they are not
/// while a queued request lacks any (the counter is then negative); a blocking
/// acquire spins briefly for a free permit before it is counted.
///
/// # Panics
///
/// A task's waker that panics when a release wakes it: the release finishes
/// delivering permits to every waiter it serves, and then the panic goes on
/// in the releasing thread.
///
/// # Progress
///
/// No internal lock. An uncontended acquire is one CAS, a release one
/// `fetch_add`. A release that finds waiters adds to the delivery and
/// returns; only one releaser at a time delivers, and it never waits for
/// another releaser, only for a counted waiter to finish its enqueue (a swap
/// and a store: waiters allocate before they are counted).
///
/// # Examples
///
/// ```
/// use lockfree_sync::Semaphore;
///
/// let sem = Semaphore::new(2);
/// let a = sem.acquire();
/// let b = sem.try_acquire().expect("a second permit");
/// assert!(sem.try_acquire().is_none());
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
///     let p = sem.acquire_many_async(3).await;
///     assert_eq!(sem.available_permits(), 0);
///     drop(p);
/// });
/// assert_eq!(sem.available_permits(), 3);
/// ```
pub struct Semaphore {
    count: AtomicIsize,
    pending: AtomicUsize,
    queue: WaiterQueue,
    /// The oldest waiter, dequeued but still short of permits. Only the
    /// `ACTIVE` holder touches it.
    head: UnsafeCell<Option<Arc<Waiter>>>,
}

// SAFETY: every field but `head` is an atomic or the (Send + Sync) queue;
// `head` is only accessed by the thread holding `pending`'s ACTIVE bit, which
// is passed from one holder to the next with Release/Acquire RMWs.
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
    pub const MAX_PERMITS: usize = usize::MAX >> (usize::BITS / 2 + 1);

    sync_core::const_unless_loom! {
        /// A semaphore with `permits` permits.
        ///
        /// # Panics
        ///
        /// If `permits` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
        pub fn new(permits: usize) -> Self {
            assert!(
                permits <= Self::MAX_PERMITS,
                "Semaphore::new: more permits than Semaphore::MAX_PERMITS"
            );
            Self {
                count: AtomicIsize::new(permits as isize),
                pending: AtomicUsize::new(0),
                queue: WaiterQueue::new(),
                head: UnsafeCell::new(None),
            }
        }
    }

    /// The raw words `(count, pending)`, for loom models to check that no
    /// demand, delivery or deliverer role is left behind when every thread
    /// is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_state(&self) -> (isize, usize) {
        (self.count.load(Relaxed), self.pending.load(Relaxed))
    }

    /// The permits free right now (a hint: it may change at once). Permits
    /// on their way to waiters are not free.
    pub fn available_permits(&self) -> usize {
        self.count.load(Relaxed).max(0) as usize
    }

    /// Takes one permit if one is free and nobody is waiting.
    #[inline]
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        self.try_acquire_many(1)
    }

    /// Takes `n` permits if they are free and nobody is waiting.
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
    #[inline]
    pub fn try_acquire_many(&self, n: usize) -> Option<SemaphorePermit<'_>> {
        check_request(n);
        self.try_take(n).then(|| SemaphorePermit::new(self, n))
    }

    /// Takes one permit, parking the thread until one is free.
    #[inline]
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        self.acquire_many(1)
    }

    /// Takes `n` permits at once, parking the thread until they are free.
    /// A request for zero permits returns at once.
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS): such a request
    /// could never be met.
    #[inline]
    pub fn acquire_many(&self, n: usize) -> SemaphorePermit<'_> {
        check_request(n);
        if !self.try_take(n) {
            self.acquire_slow(n);
        }
        SemaphorePermit::new(self, n)
    }

    /// A future that takes one permit without blocking the thread.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point loses no permit: a queued request is
    /// withdrawn (the permits it had taken go back), and permits already
    /// delivered to it are released.
    pub fn acquire_async(&self) -> Acquire<'_> {
        self.acquire_many_async(1)
    }

    /// A future that takes `n` permits at once without blocking the thread.
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_async`](Self::acquire_async).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS) (when called, not
    /// when polled).
    pub fn acquire_many_async(&self, n: usize) -> Acquire<'_> {
        check_request(n);
        Acquire {
            sem: self,
            n,
            held: 0,
            node: None,
            done: false,
        }
    }

    /// Adds `n` permits: returns forgotten permits, or raises the limit.
    /// Waiters are served first, oldest first.
    ///
    /// # Panics
    ///
    /// If the free permits would exceed [`MAX_PERMITS`](Self::MAX_PERMITS).
    /// The permits are taken back before the panic (another thread may see
    /// them for that instant).
    #[inline]
    pub fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        if n > Self::MAX_PERMITS {
            overflow(n);
        }
        // Release: pairs with the Acquire of whoever takes the permits (a
        // CAS in `try_take`, `commit`'s fetch_sub, or the deliverer's
        // `pending` load).
        let c = self.count.fetch_add(n as isize, Release);
        if c > (Self::MAX_PERMITS - n) as isize {
            // Undo before panicking (nobody waits when `c` is that high, so
            // no delivery was owed).
            self.count.fetch_sub(n as isize, Relaxed);
            overflow(n);
        }
        if c < 0 {
            // The first `-c` of our permits cover counted waiters' demand.
            self.deliver(n.min(c.unsigned_abs()));
        }
    }

    /// Takes `n` permits if free; never counts the caller as a waiter.
    #[inline]
    fn try_take(&self, n: usize) -> bool {
        if n == 0 {
            // Nothing to wait for, even behind a queue.
            return true;
        }
        let n = n as isize;
        let mut c = self.count.load(Relaxed);
        while c >= n {
            // Acquire: pairs with the Release of the release that freed them.
            match self.count.compare_exchange_weak(c, c - n, Acquire, Relaxed) {
                Ok(_) => return true,
                Err(actual) => c = actual,
            }
        }
        false
    }

    /// Counts the caller as a waiter for `n` permits. `Ok(())` if they were
    /// free after all; otherwise `Err((held, need))`: the permits it took and
    /// those it still needs.
    fn commit(&self, n: usize) -> Result<(), (usize, usize)> {
        // Acquire: the permits we may take came from a Release.
        let c = self.count.fetch_sub(n as isize, Acquire);
        if c >= n as isize {
            return Ok(());
        }
        let held = c.max(0) as usize;
        Err((held, n - held))
    }

    #[cold]
    fn acquire_slow(&self, n: usize) {
        // Spin while nobody is queued: a permit freed within the spin is
        // taken without queueing, so a busy semaphore keeps its permits
        // moving between running threads instead of handing each one to a
        // thread that must be woken.
        let mut spin = SpinWait::new();
        while self.count.load(Relaxed) >= 0 && spin.spin() {
            if self.try_take(n) {
                return;
            }
        }
        // Allocated before we are counted: a deliverer that sees our count
        // waits for our push, so keep that window short.
        let mut waiter = Waiter::for_thread(0);
        // The paper's wait: one fetch_sub counts us in.
        if let Err((_, need)) = self.commit(n) {
            Waiter::set_data(&mut waiter, need);
            self.wait_for(waiter);
        }
    }

    /// Queues the calling thread's `waiter` (counted already, its data the
    /// permits it still lacks) and waits for their delivery.
    #[cold]
    fn wait_for(&self, waiter: Arc<Waiter>) {
        self.queue.push(Arc::clone(&waiter));
        // Spin before parking: a delivery is a handoff, and a releaser
        // usually comes within microseconds.
        let token = waiter.wait(true);
        debug_assert_eq!(token, GRANTED);
    }

    /// Adds `d` permits to the delivery, and delivers if nobody is.
    fn deliver(&self, d: usize) {
        let add = d << SHIFT;
        let mut w = self.pending.load(Relaxed);
        loop {
            // Add our permits, and take the deliverer's role if it is free:
            // one RMW either way.
            let new = w.wrapping_add(add) | ACTIVE;
            // AcqRel: Release hands our permits (and `count`'s change) to
            // the deliverer, which loads `pending` with Acquire; Acquire, if
            // we become the deliverer, pairs with the Release of the previous
            // one's retirement, so we see the queue and `head` as it left
            // them.
            match self.pending.compare_exchange_weak(w, new, AcqRel, Relaxed) {
                // Somebody is delivering: it cannot retire without seeing
                // our addition.
                Ok(prev) if prev & ACTIVE != 0 => return,
                Ok(_) => return self.run_delivery(),
                Err(actual) => w = actual,
            }
        }
    }

    /// Called by a waiter that cancelled: if it was the head, permits
    /// `pending` holds for it must not wait for the next release. Runs a
    /// delivery, or makes the running deliverer look again.
    fn recheck(&self) {
        // AcqRel: Release orders our cancel before the deliverer's next
        // look; Acquire as in `deliver`, if we become the deliverer.
        if self.pending.fetch_or(ACTIVE | RECHECK, AcqRel) & ACTIVE == 0 {
            self.run_delivery();
        }
    }

    /// Hands `pending` permits to waiters in order. The caller holds ACTIVE.
    fn run_delivery(&self) {
        // Our callers (`deliver`, `recheck`) have just set ACTIVE.
        let role = Role(self);
        let mut panicked = None;
        let mut wakeups = Wakeups::default();
        // Whether to fold cancelled waiters at the head even with nothing to
        // deliver (after a cancel), so that their demand and nodes do not
        // linger until the next release.
        let mut sweep = false;
        loop {
            // Acquire: pairs with releasers' Release additions.
            let mut w = self.pending.load(Acquire);
            if w & RECHECK != 0 {
                // A waiter cancelled: this pass looks at the head afresh, and
                // a later cancel changes the word, failing our retirement.
                w = self.pending.fetch_and(!RECHECK, AcqRel) & !RECHECK;
                sweep = true;
            }
            let amount = (w as isize) >> SHIFT;
            if amount <= 0 && sweep {
                sweep = false;
                // A `None` from `pop` (a push half-done) just ends the
                // sweep.
                let head = role.take_head().or_else(|| role.pop());
                if let Some(head) = head {
                    if head.is_cancelled() {
                        self.fold(head.data());
                        sweep = true;
                        continue;
                    }
                    role.put_head(head);
                }
            }
            if amount > 0 {
                // `pending` covers demand, so a counted waiter is queued or
                // about to be.
                let head = role
                    .take_head()
                    .unwrap_or_else(|| pop_counted(|| role.pop()));
                if head.is_cancelled() {
                    self.fold(head.data());
                    continue;
                }
                let need = head.data();
                if amount as usize >= need {
                    // AcqRel: Acquire is already ours; Release for the next
                    // deliverer.
                    self.pending.fetch_sub(need << SHIFT, AcqRel);
                    // The token now, the wakeup after we retire: the role is
                    // held for less time (a wakeup may schedule a task), and
                    // a panicking waker cannot leave it held.
                    let wakeup = Waiter::notify_later(&head, GRANTED);
                    let notified = wakeup.is_some();
                    if let Some(wakeup) = wakeup {
                        wakeups.push(wakeup, &mut panicked);
                    }
                    if !notified {
                        // Cancelled meanwhile: take the permits back and fold
                        // its demand.
                        self.pending.fetch_add(need << SHIFT, AcqRel);
                        self.fold(need);
                    }
                    continue;
                }
                // The oldest waiter needs more than we hold: it waits at the
                // head for later releases.
                role.put_head(head);
            }
            // Retire, unless somebody added permits since we looked.
            // Release: pairs with the next deliverer's Acquire.
            if self
                .pending
                .compare_exchange(w, w & !ACTIVE, Release, Relaxed)
                .is_ok()
            {
                wakeups.wake_all(&mut panicked);
                if let Some(payload) = panicked {
                    panic::resume_unwind(payload);
                }
                return;
            }
        }
    }

    /// Removes a cancelled waiter's `need` from the deficit. The part of it
    /// that `pending` had already covered becomes free permits again.
    fn fold(&self, need: usize) {
        // AcqRel: our permits (if `count` turns positive) are published with
        // Release; Acquire for symmetry with `release`.
        let old = self.count.fetch_add(need as isize, AcqRel);
        let uncovered = old.min(0).unsigned_abs();
        let covered = need.saturating_sub(uncovered);
        if covered > 0 {
            // May dip below zero while a releaser has raised `count` but not
            // yet added to `pending`; its addition restores the balance.
            self.pending.fetch_sub(covered << SHIFT, AcqRel);
        }
    }
}

/// The deliverer's role: made only by `run_delivery`, whose callers have
/// just set `pending`'s ACTIVE bit, and gone before it retires. Holding it
/// means the `head` slot and the queue's consumer side are this thread's.
struct Role<'a>(&'a Semaphore);

impl Role<'_> {
    fn take_head(&self) -> Option<Arc<Waiter>> {
        // SAFETY: only the ACTIVE holder touches `head`, and ACTIVE passes
        // from one holder to the next with Release/Acquire RMWs.
        self.0.head.with_mut(|h| unsafe { (*h).take() })
    }

    fn put_head(&self, waiter: Arc<Waiter>) {
        // SAFETY: as in `take_head`.
        self.0.head.with_mut(|h| unsafe { *h = Some(waiter) });
    }

    fn pop(&self) -> Option<Arc<Waiter>> {
        // SAFETY: the ACTIVE holder is the queue's only consumer, and each
        // holder's pops happen after the previous holder's (see above).
        unsafe { self.0.queue.pop() }
    }
}

/// The wakeups a deliverer owes, delivered after it retires. A few fit
/// without allocating; past that they are delivered at once.
#[derive(Default)]
struct Wakeups {
    held: [Option<Wakeup>; 4],
}

/// A waker's panic, held until the deliverer has retired.
type Panic = Option<Box<dyn core::any::Any + Send>>;

impl Wakeups {
    fn push(&mut self, wakeup: Wakeup, panicked: &mut Panic) {
        match self.held.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(wakeup),
            None => wake(wakeup, panicked),
        }
    }

    fn wake_all(&mut self, panicked: &mut Panic) {
        for slot in &mut self.held {
            if let Some(wakeup) = slot.take() {
                wake(wakeup, panicked);
            }
        }
    }
}

/// Wakes, catching a waker's panic into `panicked` (the first one wins).
fn wake(wakeup: Wakeup, panicked: &mut Panic) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| wakeup.wake())) {
        panicked.get_or_insert(payload);
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn overflow(n: usize) -> ! {
    panic!(
        "Semaphore::release({n}): the free permits would exceed Semaphore::MAX_PERMITS ({})",
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
            .finish_non_exhaustive()
    }
}

/// Permits taken from a [`Semaphore`]; they go back when it drops.
#[must_use = "dropping the permit releases it at once"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    permits: usize,
}

impl<'a> SemaphorePermit<'a> {
    fn new(sem: &'a Semaphore, permits: usize) -> Self {
        Self { sem, permits }
    }

    /// How many permits this holds.
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// The semaphore the permits came from.
    pub fn semaphore(&self) -> &'a Semaphore {
        self.sem
    }

    /// Keeps the permits out of the semaphore for good (until a
    /// [`release`](Semaphore::release) puts them back).
    pub fn forget(mut self) {
        self.permits = 0;
    }
}

impl Drop for SemaphorePermit<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.permits > 0 {
            self.sem.release(self.permits);
        }
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish()
    }
}

/// The future of [`Semaphore::acquire_async`] and
/// [`Semaphore::acquire_many_async`].
///
/// # Cancel safety
///
/// Dropping it loses no permit: see [`Semaphore::acquire_async`].
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    sem: &'a Semaphore,
    n: usize,
    /// Permits taken when we were counted, before we queued.
    held: usize,
    node: Option<Arc<Waiter>>,
    done: bool,
}

impl<'a> Future for Acquire<'a> {
    type Output = SemaphorePermit<'a>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.done, "Acquire polled after it completed");
        if let Some(node) = &this.node {
            let token = core::task::ready!(node.poll(cx));
            debug_assert_eq!(token, GRANTED);
            this.node = None;
        } else if !this.sem.try_take(this.n) {
            // Allocated (and the waker cloned) before we are counted: a
            // deliverer that sees our count waits for our push, so the
            // window between them holds no allocation and no user code.
            // Registered before it is pushed, so no delivery can miss it.
            let mut node = Waiter::for_task(cx.waker(), 0);
            if let Err((held, need)) = this.sem.commit(this.n) {
                this.held = held;
                Waiter::set_data(&mut node, need);
                this.sem.queue.push(Arc::clone(&node));
                this.node = Some(node);
                return Poll::Pending;
            }
        }
        this.done = true;
        Poll::Ready(SemaphorePermit::new(this.sem, this.n))
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(node) = self.node.take() else {
            return;
        };
        match node.cancel() {
            // Withdrawn: the deliverer folds our demand when it reaches the
            // node; the permits we took go back now.
            Ok(()) => {
                self.sem.release(self.held);
                self.sem.recheck();
            }
            // Everything was delivered: give it all back.
            Err(_) => self.sem.release(self.n),
        }
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("permits", &self.n)
            .field("queued", &self.node.is_some())
            .finish()
    }
}
