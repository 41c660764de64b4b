//! The raw lock behind [`Mutex`](crate::Mutex): Lin & Vella's algorithm 1 in
//! one atomic word, with a lock-free FIFO queue of waiters.
//!
//! # The word
//!
//! ```text
//!  bits 5..  count    waiters counted (registered) and not yet dequeued
//!  bit 4     LINKED   a waiter finished its push while `OWED` was set and a
//!                     dequeuer held `WAKING`: that dequeuer looks again
//!  bit 3     OWED     a dequeuer found the queue's front half-way through a
//!                     push and left the wake-up to that waiter (see below)
//!  bit 2     STARVE   a waiter has waited too long: hand the lock over
//!  bit 1     WAKING   the one thread allowed to dequeue right now (see below)
//!  bit 0     LOCKED   the lock is held
//! ```
//!
//! The paper keeps `lock` and `counter` in two words and releases with a
//! double-word CAS. Here both live in one word, so a single-word CAS does the
//! same job: a FIFO `unlock` clears `LOCKED` only if the count is zero at
//! that instant, and otherwise dequeues a waiter.
//!
//! # The protocol
//!
//! * **lock**: in barging mode, one `fetch_or` of `LOCKED`, which takes a
//!   free lock whatever else the word holds (waiters counted, a wakeup in
//!   flight); in FIFO mode, a CAS from 0 to `LOCKED`. Failing that, a
//!   waiter *counts* itself (CAS `count + 1`, only while it may not take
//!   the lock), then enqueues a [`Waiter`] and sleeps. The count closes the
//!   paper's lost-wakeup window: an unlocker that sees the count knows a
//!   waiter is coming and waits for its node to appear in the queue, however
//!   late it is.
//! * **unlock**, [`Fairness::Fifo`] (the paper's): a CAS from `LOCKED` to 0.
//!   Failing that (somebody is counted), the unlocker sets `WAKING`, dequeues
//!   the oldest waiter, uncounts it and notifies it with `HANDOFF`: the lock
//!   stays set and now belongs to the waiter.
//! * **unlock**, [`Fairness::Barging`]: one `fetch_sub` releases the lock.
//!   If somebody is counted and nobody is `WAKING`, the unlocker then sets
//!   `WAKING`, dequeues the oldest waiter and notifies it with `COMPETE`: it
//!   races newcomers for the lock. If the woken waiter is a thread, `WAKING`
//!   stays set until it clears it (when it takes the lock or counts itself
//!   again), so a stream of unlocks wakes one thread at a time instead of a
//!   herd, and costs one atomic operation each while a wakeup is in flight.
//!   If it is a task, the unlocker clears `WAKING` as it dequeues it: a
//!   task runs only when its executor polls it, which may be late or never
//!   (a busy executor, a leaked future), and the next unlock must not wait
//!   for that. So while tasks are woken, each unlock that finds waiters
//!   wakes the next one (a woken task that loses the race queues again).
//!
//! `WAKING` also makes the queue's single consumer explicit: only the thread
//! that set it may dequeue, and it passes the role on with a Release/Acquire
//! RMW on the word.
//!
//! **A waiter half-way through its push.** A waiter counts itself, then
//! pushes its node (a swap, then a store that links it). A dequeuer that
//! sees the count but finds the front of the queue not linked yet does not
//! wait for that store (the waiter may be preempted there for a scheduling
//! round): after a few more looks a spin hint apart (a running waiter links
//! within nanoseconds), it sets `OWED`, looks once more, and if the link is
//! still missing it gives the role up (and, if it was handing the lock
//! over, the lock too), leaving `OWED` set. Every waiter, once linked,
//! looks at the word: if `OWED` is set and nobody holds `WAKING`, it takes
//! the role and dequeues in the unlocker's place, which wakes (or hands
//! the lock to) the oldest waiter, usually itself; if a dequeuer still
//! holds the role, it sets `LINKED`, and that dequeuer looks again before
//! it gives the role up. The two looks are ordered by `SeqCst` fences (the
//! dequeuer's announcement, then its second look at the queue; the
//! waiter's link, then its look at the word), so at least one side sees the
//! other: the wake-up is never lost, and no thread waits for another.
//!
//! # Fairness
//!
//! [`Fairness::Fifo`] is the paper's algorithm: a lock that has waiters is
//! always handed to the oldest one, so nobody waits for more than the waiters
//! ahead of it, but every handoff to a sleeping thread keeps the lock idle
//! for a whole wakeup.
//!
//! [`Fairness::Barging`] (the default) lets the woken waiter race newcomers,
//! as parking_lot and Go do, and a newcomer spins briefly before it queues.
//! Waiting too long is handled as in Go's starvation mode: a waiter that has
//! waited more than [`STARVATION`](crate::STARVATION) since it first queued
//! sets `STARVE` when it queues again, and then unlocks hand the lock to the
//! oldest waiter and newcomers queue instead of barging (a newcomer's first
//! attempt, one `fetch_or`, does not read `STARVE`: one that finds the lock
//! free in the instant between an unlock and the handoff that unlock starts
//! keeps it for one critical section, and its own unlock hands it over); a
//! waiter handed the lock ends the mode if it waited less than `STARVATION`
//! itself, or if nobody else waits. A starving waiter that reaches the head
//! while the lock is free is handed it directly. A starving waiter queues
//! again at the tail (the queue has no front door), so its wait is bounded
//! by the handoffs to the waiters ahead of it, which the mode keeps going
//! while any of them has waited too long.
//!
//! A withdrawn waiter (a timed-out thread, a dropped future) is freed by
//! the withdrawals themselves: those at the front of the queue at once, and
//! those queued behind a live waiter by a sweep of the whole queue, which a
//! withdrawal makes now and then (once as many withdrawn nodes are left
//! queued as the live waiters the previous sweep kept that are still
//! queued, see `Backlog::sweep_due`) and which unlinks
//! withdrawn nodes in place: live waiters keep their places, so "the
//! oldest" stays exact in both modes.
//!
//! A dequeuer that pops only withdrawn nodes (waiters that keep queueing
//! and withdrawing, such as tasks that poll `lock_async` in a `select!`
//! loop and drop it, can push them as fast as it pops) asks for help once
//! it has popped a few dozen in a row: the next waiter that withdraws
//! while it holds `WAKING` takes the role over, with the lock if it was
//! being handed over, and the dequeuer returns (see `crate::handover`). So
//! an unlock pops at most a few dozen withdrawn nodes, and then as many as
//! come before the next withdrawal, however long others keep withdrawing.
//!
//! # Progress
//!
//! `try_lock` and the uncontended paths are one atomic operation. No thread
//! ever waits for another inside the primitive: besides the lock itself,
//! nothing waits. The paper's algorithm has one such wait (an unlocker that
//! finds a waiter counted but not yet linked waits for its link); here the
//! wake-up passes to that waiter instead (`OWED`, above). The lock itself
//! can still wait for such a waiter: in FIFO mode (and in starvation mode)
//! a lock owed to the oldest waiter stays owed to it until it has linked.
//!
//! A woken thread carries `WAKING` until it runs: while it does, unlocks wake
//! nobody else (a thread that never got scheduled would hold back later
//! wakeups). A woken task carries nothing: a future that its executor never
//! polls again, or that is leaked, does not hold the lock, and the next
//! unlock wakes the next waiter. Until then the lock is free for newcomers,
//! but the waiters queued behind that task stay asleep: if nobody locks and
//! unlocks again, they wait for ever (in a handoff lock such as
//! `Fairness::Fifo` or tokio's, the task would hold the lock instead). A
//! woken future that is dropped without taking the lock wakes the next
//! waiter in its place if the lock is free.

use std::time::{Duration, Instant};

use sync_core::sync::atomic::{AtomicUsize, Ordering::*};
use sync_core::unwind::Panics;
use sync_core::waiter::{Token, WaiterQueue};

use crate::backlog::Backlog;
use crate::handover::Handover;
use crate::patience::Patience;

mod future;
#[cfg(not(loom))]
mod lock_api_impls;
mod wait;
mod wake;

pub use self::future::RawLockAsync;
#[cfg(not(loom))]
pub use self::lock_api_impls::{LockApiMutex, LockApiMutexGuard};

const LOCKED: usize = 0b001;
const WAKING: usize = 0b010;
const STARVE: usize = 0b100;
/// A dequeuer left the wake-up to the waiter half-way through its push.
const OWED: usize = 0b1000;
/// A waiter linked itself while `OWED` was set and the role held.
const LINKED: usize = 0b1_0000;
/// One counted waiter.
const ONE: usize = 0b10_0000;

/// The lock is now yours.
const HANDOFF: Token = 1;
/// The lock was released: try again.
const COMPETE: Token = 2;

/// Whether a thread may take the lock in word `w`: it is free, and either
/// nobody starves, nobody is counted, or the thread was woken to take it.
#[inline]
fn may_take(w: usize, woken: bool) -> bool {
    w & LOCKED == 0 && (w & STARVE == 0 || w < ONE || woken)
}

/// The word after taking the lock in `w`: `WAKING` handed on if we carried
/// it; starvation mode over if nobody is counted.
#[inline]
fn taken(w: usize, woken: bool) -> usize {
    let mut new = w | LOCKED;
    if woken {
        new &= !WAKING;
    }
    if w < ONE {
        new &= !STARVE;
    }
    new
}

/// How a [`Mutex`](crate::Mutex) passes the lock to its waiters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fairness {
    /// Release the lock and wake the oldest waiter to compete for it with
    /// newcomers; a waiter that has waited more than
    /// [`STARVATION`](crate::STARVATION) is handed
    /// the lock. The fastest under contention.
    #[default]
    Barging,
    /// The paper's algorithm: while anyone waits, unlock hands the lock to
    /// the oldest waiter, so the lock is taken in strict FIFO order while
    /// no waiter withdraws (see [`Mutex`](crate::Mutex)'s *Fairness* for
    /// what a withdrawal may change).
    Fifo,
}

/// A raw lock-free-queue lock with a blocking and an async `lock`.
///
/// This is the lock of [`Mutex`](crate::Mutex) without data; it implements
/// [`lock_api::RawMutex`], so `lock_api::Mutex<RawMutex, T>` works too (with
/// blocking locks only).
///
/// # Examples
///
/// ```
/// use lockfree_sync::RawMutex;
///
/// let raw = RawMutex::new();
/// raw.lock();
/// assert!(!raw.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { raw.unlock() };
/// ```
#[derive(Debug)]
pub struct RawMutex {
    word: AtomicUsize,
    queue: WaiterQueue,
    /// How many waiters have withdrawn, and how many withdrawn nodes the
    /// dequeuers have freed. A withdrawing waiter that finds the dequeuer's
    /// role taken leaves its node to the role's holder, which re-reads the
    /// withdrawals after giving the role up and reclaims again if they
    /// moved (see [`reclaim`](Self::reclaim)); if the holder is far behind,
    /// a dropped future waits for it (see [`crate::backlog`]).
    backlog: Backlog,
    /// A dequeuer that pops only withdrawn nodes hands its role to a
    /// withdrawing waiter (see [`crate::handover`]).
    handover: Handover,
    fairness: Fairness,
}

impl RawMutex {
    sync_core::const_unless_loom! {
        /// An unlocked lock with [`Fairness::Barging`].
        ///
        /// # Examples
        ///
        /// ```
        /// assert!(!lockfree_sync::RawMutex::new().is_locked());
        /// ```
        pub fn new() -> Self {
            Self::with_fairness(Fairness::Barging)
        }
    }

    sync_core::const_unless_loom! {
        /// An unlocked lock with the given fairness.
        ///
        /// # Examples
        ///
        /// ```
        /// use lockfree_sync::{Fairness, RawMutex};
        /// let raw = RawMutex::with_fairness(Fairness::Fifo);
        /// assert_eq!(raw.fairness(), Fairness::Fifo);
        /// ```
        pub fn with_fairness(fairness: Fairness) -> Self {
            Self {
                word: AtomicUsize::new(0),
                queue: WaiterQueue::new(),
                backlog: Backlog::new(),
                handover: Handover::new(),
                fairness,
            }
        }
    }

    /// Whether a thread may take the lock in word `w`: [`may_take`], and in
    /// FIFO mode only if nobody is counted (or it was woken to take it), so
    /// that a lock released while a withdrawing waiter holds the dequeuer's
    /// role still reaches the oldest waiter first.
    #[inline]
    fn may(&self, w: usize, woken: bool) -> bool {
        may_take(w, woken) && (self.fairness == Fairness::Barging || w < ONE || woken)
    }

    /// The fairness this lock was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::{Fairness, RawMutex};
    /// assert_eq!(RawMutex::with_fairness(Fairness::Fifo).fairness(), Fairness::Fifo);
    /// ```
    pub fn fairness(&self) -> Fairness {
        self.fairness
    }

    /// The raw word, for loom models to check that nothing (a count, a
    /// `WAKING`, a `STARVE`) is left behind when every thread is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_word(&self) -> usize {
        self.word.load(Relaxed)
    }

    /// The waiters counted in the word, for loom models.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_counted(&self) -> usize {
        self.word.load(Relaxed) / ONE
    }

    /// The word's bits below the count, for loom models.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_flags(&self) -> usize {
        self.word.load(Relaxed) % ONE
    }

    /// The state of the dequeuer's handover to a withdrawing waiter, for
    /// loom models: 0 once every thread is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_handover(&self) -> usize {
        self.handover.loom_state()
    }

    /// Withdrawn waiters whose nodes no dequeuer has freed yet, for loom
    /// models: 0 once every thread is done.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_backlog(&self) -> usize {
        self.backlog.loom_backlog()
    }

    /// Makes every withdrawal that finds the dequeuer's role taken wait
    /// until `limit` or fewer withdrawn nodes are left to free, for loom
    /// models of that wait (see `crate::backlog`).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_backlog_limit(&self, limit: usize) {
        self.backlog.set_loom_limit(limit);
    }

    /// Whether the lock is held (a hint: it may change at once).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = lockfree_sync::RawMutex::new();
    /// assert!(!raw.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.word.load(Relaxed) & LOCKED != 0
    }

    /// Whether a waiter is queued (counted) right now: a guard's `bump`
    /// hands the lock over only then. A hint: it may change at once.
    pub(crate) fn has_waiters(&self) -> bool {
        self.word.load(Relaxed) >= ONE
    }

    /// Takes the lock if it is free (and no starving waiter is owed it).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = lockfree_sync::RawMutex::new();
    /// assert!(raw.try_lock());
    /// assert!(!raw.try_lock());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn try_lock(&self) -> bool {
        let mut w = self.word.load(Relaxed);
        while self.may(w, false) {
            // Acquire: pairs with the Release of the unlock that freed it.
            match self
                .word
                .compare_exchange_weak(w, taken(w, false), Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
        false
    }

    /// Takes the lock, parking the thread while it is held.
    ///
    /// # Deadlocks
    ///
    /// It blocks the calling thread. Called from a task on a
    /// single-threaded executor while another task of that executor holds
    /// the lock, it blocks that executor for ever: in async code use
    /// [`lock_async`](Self::lock_async).
    ///
    /// # Panics
    ///
    /// Never. A lock that queues may make the wake-up an unlock left to it
    /// (the unlock found it half-way through queueing), which may wake
    /// another waiting task; if that task's waker panics, the panic is
    /// dropped and the lock goes on waiting. `lock_api` takes the lock back
    /// with this call where a guard lives on (its guards' `unlocked` and
    /// `bump`): a lock that unwound there would leave the guard to unlock a
    /// lock it does not hold. ([`lock_async`](Self::lock_async)'s poll lets
    /// such a panic go on instead, see [`RawLockAsync`].)
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = lockfree_sync::RawMutex::new();
    /// raw.lock();
    /// assert!(raw.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    #[inline]
    pub fn lock(&self) {
        if self.fairness == Fairness::Barging {
            // One RMW (`lock bts`) whatever the word holds: a CAS from 0
            // would fail whenever waiters are counted, and a thread that
            // keeps the lock busy while others sleep would pay a second
            // RMW on every lock. On a held lock it changes nothing. No load
            // of the word follows (it would cost the uncontended lock more
            // than the RMW saves): a starvation mode this finds is honoured
            // by our unlock, which hands the lock to the oldest waiter.
            // Acquire: pairs with the Release of the unlock that freed it.
            if self.word.fetch_or(LOCKED, Acquire) & LOCKED != 0 {
                self.lock_slow(None);
            }
            return;
        }
        // The CAS from 0 is the uncontended path. A failed CAS leaves the
        // line in our cache, so a second CAS from the word it saw is cheap:
        // that keeps a wakeup in flight (WAKING set) from sending every lock
        // of the running thread to the slow path.
        // Acquire: pairs with the Release of the unlock that freed it.
        if let Err(w) = self.word.compare_exchange_weak(0, LOCKED, Acquire, Relaxed) {
            if !self.may(w, false)
                || self
                    .word
                    .compare_exchange_weak(w, taken(w, false), Acquire, Relaxed)
                    .is_err()
            {
                self.lock_slow(None);
            }
        }
    }

    /// A future that takes the lock without blocking the thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = lockfree_sync::RawMutex::new();
    /// futures::executor::block_on(raw.lock_async());
    /// assert!(raw.is_locked());
    /// // SAFETY: the future took the lock for this thread.
    /// unsafe { raw.unlock() };
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point loses nothing: a queued waiter is
    /// withdrawn, and a lock (or a wakeup) already handed to it is passed on.
    /// Leaking it is not a cancellation: a leaked future that is handed the
    /// lock keeps it for ever (see [`Mutex::lock_async`](crate::Mutex::lock_async)).
    ///
    /// # Panics
    ///
    /// See [`RawLockAsync`]: a poll or a drop may run another waiting task's
    /// waker.
    pub fn lock_async(&self) -> RawLockAsync<'_> {
        RawLockAsync {
            mutex: self,
            node: None,
            woken: false,
            done: false,
            patience: Patience::new(),
        }
    }

    /// Releases the lock.
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = lockfree_sync::RawMutex::new();
    /// raw.lock();
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// assert!(!raw.is_locked());
    /// ```
    ///
    /// # Panics
    ///
    /// Never. The unlock may wake a waiting task, whose waker is user code
    /// and may panic: that panic is caught and dropped, because an unlock
    /// that unwinds would, for `lock_api`, mean a lock still held (its
    /// guards would unlock again). The waiter is woken all the same as far
    /// as the lock is concerned: it holds its token. [`Mutex`](crate::Mutex)'s
    /// guards pass such a panic on instead (see its docs).
    ///
    /// # Safety
    ///
    /// The lock must be held, by this caller's logical owner (the guard it
    /// took it with).
    #[inline]
    pub unsafe fn unlock(&self) {
        // SAFETY: forwarded. A waker's panic, if any, is dropped here.
        drop(unsafe { self.release() });
    }

    /// [`unlock`](Self::unlock), returning what a woken waiter's waker
    /// panicked with: `None` on the fast path, which woke nobody.
    ///
    /// The panics come back by value, not through a `&mut Panics`, and the
    /// fast path returns `None` rather than an empty [`Panics`]: the caller
    /// then has nothing to drop unless the slow path ran, and a guard's
    /// `drop` stays small enough to be inlined into the caller's loop. (An
    /// empty `Panics` from either path met the caller's drop glue, an
    /// out-of-line call on every unlock.)
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock).
    #[inline]
    pub(crate) unsafe fn release(&self) -> Option<Panics> {
        if self.fairness == Fairness::Barging {
            // One RMW and no load first: a load of a word another core is
            // writing would cost a second cache-line transfer.
            // Release: pairs with the Acquire of the next lock.
            let old = self.word.fetch_sub(LOCKED, Release);
            // Waiters counted, or a starvation mode to end (`STARVE`,
            // `OWED` and `LINKED` sort below `ONE`, so this is the same
            // single comparison; `OWED` comes with a count).
            // A woken thread on its way (`WAKING`) will find the lock free:
            // nothing more to do, and no call.
            if old >= STARVE && old & WAKING == 0 {
                return Some(self.woke_after_unlock(old));
            }
            None
        } else {
            // SAFETY: forwarded.
            unsafe { self.release_fair() }
        }
    }

    /// The barging unlock's slow path, out of line: see
    /// [`unlocked_with_waiters`](Self::unlocked_with_waiters).
    #[cold]
    fn woke_after_unlock(&self, old: usize) -> Panics {
        let mut panics = Panics::new();
        self.unlocked_with_waiters(old, &mut panics);
        panics
    }

    /// Releases the lock, handing it to the oldest waiter if there is one,
    /// whatever the lock's [`Fairness`] (unless a woken thread is already on
    /// its way to the lock: then it is released for that waiter).
    ///
    /// # Examples
    ///
    /// ```
    /// let raw = lockfree_sync::RawMutex::new();
    /// raw.lock();
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock_fair() };
    /// assert!(!raw.is_locked());
    /// ```
    ///
    /// # Panics
    ///
    /// Never: as [`unlock`](Self::unlock).
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock).
    pub unsafe fn unlock_fair(&self) {
        // SAFETY: forwarded. A waker's panic, if any, is dropped here.
        drop(unsafe { self.release_fair() });
    }

    /// [`unlock_fair`](Self::unlock_fair), returning what a woken waiter's
    /// waker panicked with (see [`release`](Self::release)).
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock).
    #[inline]
    pub(crate) unsafe fn release_fair(&self) -> Option<Panics> {
        if self
            .word
            .compare_exchange(LOCKED, 0, Release, Relaxed)
            .is_err()
        {
            return Some(self.handed_after_unlock());
        }
        None
    }

    /// The FIFO unlock's slow path, out of line: see
    /// [`unlock_slow`](Self::unlock_slow).
    #[cold]
    fn handed_after_unlock(&self) -> Panics {
        let mut panics = Panics::new();
        self.unlock_slow(&mut panics);
        panics
    }

    /// Takes the lock, parking the thread while it is held, but gives up at
    /// `deadline`: `true` if the lock is now held. A waiter handed the lock
    /// just as its deadline passed keeps it.
    ///
    /// The deadline is checked while spinning as well as while parked, so
    /// the call returns within the deadline plus one scheduling quantum. It
    /// never yields: after a brief spin it parks with the time left, as a
    /// yield on a machine with more runnable threads than CPUs can give the
    /// core away for a whole scheduling round.
    ///
    /// # Deadlocks
    ///
    /// As [`lock`](Self::lock), until the deadline.
    ///
    /// # Panics
    ///
    /// A wait that gives up passes on the wakeup (or the dequeuer's role)
    /// it holds, which may wake a waiting task: if that task's waker
    /// panics, the panic goes on out of this call once the wakeup is passed
    /// on, with the lock not held, unless the thread is already unwinding
    /// (then it is dropped). Unlike [`unlock`](Self::unlock), which must
    /// not unwind for `lock_api`, a lock attempt that unwinds leaves nothing
    /// held.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// let raw = lockfree_sync::RawMutex::new();
    /// assert!(raw.try_lock_until(Instant::now()));
    /// assert!(!raw.try_lock_until(Instant::now())); // held
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    pub fn try_lock_until(&self, deadline: Instant) -> bool {
        self.try_lock() || self.lock_slow(Some(deadline))
    }

    /// [`try_lock_until`](Self::try_lock_until) `timeout` from now. A
    /// timeout too large for an `Instant` waits without a deadline.
    ///
    /// # Panics
    ///
    /// As [`try_lock_until`](Self::try_lock_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let raw = lockfree_sync::RawMutex::new();
    /// assert!(raw.try_lock_for(Duration::from_millis(1)));
    /// assert!(!raw.try_lock_for(Duration::from_millis(1)));
    /// // SAFETY: this thread holds the lock.
    /// unsafe { raw.unlock() };
    /// ```
    pub fn try_lock_for(&self, timeout: Duration) -> bool {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.try_lock_until(deadline),
            None => {
                self.lock();
                true
            }
        }
    }
}

#[cfg(not(loom))]
impl Default for RawMutex {
    fn default() -> Self {
        Self::new()
    }
}
