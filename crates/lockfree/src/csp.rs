//! Vella's wait-free CSP channel: a synchronous, point-to-point rendezvous
//! (occam's `chan`), built on one swap per side; and [`Alt`], occam's `ALT`.
//!
//! # The protocol
//!
//! The channel is one word. It holds nothing (`EMPTY`), the slot of the
//! party that arrived first and waits, or `CLOSED`. Each side puts the
//! address of its own *slot* (on its stack, or inside its pinned future) in
//! the word with one swap:
//!
//! * If the swap returns `EMPTY`, this side came first: it waits for its
//!   partner to complete its slot.
//! * If it returns the partner's slot, this side came second: it empties the
//!   word (a plain store: the partner waits and nobody else uses the
//!   channel), moves the value (from the sender's slot into the receiver's,
//!   with no buffer in between), and completes the partner's slot, waking it
//!   if it sleeps.
//!
//! Both sides finish their part in a bounded number of steps, whatever the
//! other does: the channel is wait-free apart from the wait itself. (After
//! Vella and KRoC, where the word holds the waiting process's workspace.)
//!
//! A slot's `state` says whether it is complete (`DONE`, or `SHUT` when
//! the other end was dropped), and holds the owner's [`Waiter`] once the
//! owner stops spinning and sleeps: the completer's swap on `state` both
//! completes the slot and takes the waiter to wake, so the wake is never
//! lost. A thread spins briefly before it sleeps (a cache-line round trip is
//! a hundred nanoseconds or so, a wakeup tens of microseconds).
//!
//! # Cancellation
//!
//! A future whose slot is published and that is dropped takes the slot back
//! with a CAS on the word. If the CAS fails, the partner (or an [`Alt`]) has
//! taken the slot and is a few steps from completing it: the drop waits for
//! those steps. A receiving future completed that way hands its value to the
//! [`Receiver`], whose next receive returns it: a value is never lost.
//!
//! A partner's waker is user code and may panic: the side that completes
//! the rendezvous wakes its partner last, once the value is where the
//! panic cannot lose it (in the receiver's slot, or in the receiver's
//! stash, which its next receive returns). The panic then unwinds out of
//! that side's `send` or `recv`; the value is delivered exactly once.
//!
//! # Examples
//!
//! ```
//! use lockfree_sync::csp;
//!
//! let (mut tx, mut rx) = csp::channel();
//! let producer = std::thread::spawn(move || {
//!     for i in 0..3 {
//!         tx.send(i).unwrap(); // returns once the receiver has taken `i`
//!     }
//! });
//! assert_eq!(rx.recv(), Ok(0));
//! assert_eq!(rx.recv(), Ok(1));
//! assert_eq!(rx.recv(), Ok(2));
//! producer.join().unwrap();
//! assert!(rx.recv().is_err()); // the sender is gone
//! ```

use core::fmt;
use core::future::Future;
use core::marker::PhantomPinned;
use core::pin::Pin;
use core::ptr;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

use sync_core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::{Arc, hint, thread};
use sync_core::unwind::Panics;
use sync_core::wait;
use sync_core::waiter::{Waiter, Wakeup};

/// The channel word when nobody waits.
const EMPTY: *mut u8 = ptr::null_mut();
/// The channel word once an end has been dropped.
const CLOSED: *mut u8 = ptr::without_provenance_mut(1);
/// Tag on the channel word: the waiting party is an [`Alt`] (the word
/// points at its shared part).
const ALT_TAG: usize = 0b10;

/// A slot's state once completed by the partner.
const DONE: *mut Waiter = ptr::without_provenance_mut(1);
/// A slot's state once completed because the other end is gone.
const SHUT: *mut Waiter = ptr::without_provenance_mut(2);

/// The token that wakes a slot's owner.
const COMPLETE: usize = 1;

/// A channel's first spin budget: spin hints (~40 ns each on this machine)
/// a waiting thread spends before it yields, when its partner last ran on
/// another processor. A partner running there completes a rendezvous
/// within a few cache-line round trips (~130 ns each here). When the
/// partner last ran on our processor, spinning cannot help (it runs only
/// once we stop), so the thread yields at once (see `Chan::spins`).
#[cfg(not(loom))]
const SPINS: u32 = 64;
/// The budget doubles after a wait that the spin caught (or just missed:
/// see [`SOON`]) and halves after one it missed, within these bounds: two
/// threads that meet on two processors spin long enough (up to ~40 µs,
/// about a sleep and a wakeup) that a stray delay does not throw them into
/// yields, where each one's slower answer would make the other yield too;
/// a pipeline whose partners are often descheduled hardly spins.
#[cfg(not(loom))]
const MIN_SPINS: u32 = 2;
/// A wait that ends at the first yield, within this time, came "soon": the
/// partner runs on another processor and a longer spin would have caught
/// it (a yield with nothing else to run costs well under a microsecond; one
/// that lets another thread run, its time slice).
#[cfg(not(loom))]
const SOON: std::time::Duration = std::time::Duration::from_micros(2);
/// See [`MIN_SPINS`].
#[cfg(not(loom))]
const MAX_SPINS: u32 = 1024;
/// Yields after the spin, at most, before sleeping (a yield costs under a
/// microsecond, a sleep and wakeup ~30 µs): lets a partner that shares our
/// processor run.
#[cfg(not(loom))]
const YIELDS: u32 = 1_000;
/// How long a thread yields at most before it sleeps: several wakeups'
/// worth, so that two threads that meet often do not fall into a chain of
/// sleeps and wakeups.
#[cfg(not(loom))]
const YIELD_FOR: std::time::Duration = std::time::Duration::from_micros(200);
/// Under loom a spin is a yield to the model's scheduler: one is enough to
/// explore "the partner came during the spin".
#[cfg(loom)]
const SPINS: u32 = 1;
/// See [`SPINS`].
#[cfg(loom)]
const MIN_SPINS: u32 = 1;
/// See [`SPINS`].
#[cfg(loom)]
const MAX_SPINS: u32 = 1;
/// Under loom, one yield before parking.
#[cfg(loom)]
const YIELDS: u32 = 1;

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The partner completed the rendezvous.
    Done,
    /// The other end was dropped.
    Shut,
}

/// One side's half of a rendezvous: published in the channel word while
/// its owner waits.
#[repr(align(8))]
struct Slot<T> {
    /// Null while the owner waits awake; the owner's waiter (one reference,
    /// `Arc::into_raw`) once it sleeps; [`DONE`] or [`SHUT`] once complete.
    state: AtomicPtr<Waiter>,
    /// The sender's value (in a sender's slot), or where the value goes (in
    /// a receiver's).
    value: UnsafeCell<Option<T>>,
}

impl<T> Slot<T> {
    fn new(value: Option<T>) -> Self {
        Self {
            state: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(value),
        }
    }

    /// The outcome, once complete.
    fn outcome(&self) -> Option<Outcome> {
        // Acquire: pairs with the completer's swap in `complete`, so its
        // value move is visible.
        match self.state.load(Acquire) {
            DONE => Some(Outcome::Done),
            SHUT => Some(Outcome::Shut),
            _ => None,
        }
    }

    /// Completes the slot at `slot`, and returns the wakeup of its owner if
    /// it sleeps as a task (a sleeping thread is unparked at once). After
    /// the swap the owner may return and free the slot: it is not touched
    /// again.
    ///
    /// The caller delivers the wakeup once every value it holds is where a
    /// panic cannot lose it: a task's waker is user code, and may panic.
    ///
    /// # Safety
    ///
    /// `slot` is a live slot that the caller took out of the channel word
    /// (so its owner waits for this completion).
    #[must_use = "the owner sleeps until it is woken"]
    unsafe fn complete(slot: *const Self, outcome: Outcome) -> Option<Wakeup> {
        let to = match outcome {
            Outcome::Done => DONE,
            Outcome::Shut => SHUT,
        };
        // AcqRel: Release publishes our value move to the owner's Acquire
        // in `outcome`; Acquire makes the published waiter ours to wake.
        // SAFETY: the slot is alive until this swap (the caller's promise).
        let prev = unsafe { (*slot).state.swap(to, AcqRel) };
        if !prev.is_null() {
            debug_assert!(prev != DONE && prev != SHUT, "a slot completed twice");
            // SAFETY: the owner's reference, left in `state` for us.
            let waiter = unsafe { Arc::from_raw(prev) };
            // `None` if the owner's timed wait gave up (it cancels its
            // waiter): it then finds the slot taken when it retracts, and
            // waits for this completion without sleeping.
            return Waiter::notify_later(&waiter, COMPLETE);
        }
        None
    }

    /// Waits (spin, yield, park) until the slot is complete; the calling
    /// thread owns the slot. It spins `spins` times, and then adjusts
    /// `budget` (the channel's spin budget) by whether that paid.
    ///
    /// `None` once `deadline` has passed: the slot is still published (the
    /// caller [retracts](Self::retract) it), and a waiter it published in
    /// `state` is cancelled (the retract, or the completer, reclaims it).
    fn wait(&self, spins: u32, budget: &AtomicU32, deadline: Option<Instant>) -> Option<Outcome> {
        for _ in 0..spins {
            if let Some(outcome) = self.outcome() {
                if spins < MAX_SPINS {
                    // Relaxed: a hint.
                    budget.store((spins * 2).min(MAX_SPINS), Relaxed);
                }
                return Some(outcome);
            }
            hint::spin_loop();
        }
        // Yield for a while before sleeping: a sleeping partner takes tens
        // of microseconds to wake, and a wait shorter than that would make
        // us sleep too, and the next rendezvous wake us in turn.
        #[cfg(not(loom))]
        let start = std::time::Instant::now();
        // Samples the load if the last sample is old: a waiter that reads
        // `yields_are_slow` without it may act on a verdict from before the
        // machine filled up, and give its core away for a scheduling round.
        sync_core::load::tick();
        for i in 0..YIELDS {
            // A yield is no wait once yields are slow (more runnable
            // threads than CPUs): sleep instead. Nor near a deadline.
            if sync_core::load::yields_are_slow() || crate::clock::passed(deadline) {
                break;
            }
            sync_core::load::measured_yield();
            if let Some(outcome) = self.outcome() {
                // Came right after the spin, with nobody else running here
                // (the yield was quick): the partner runs beside us and a
                // longer spin would have caught it. Otherwise the spin was
                // wasted.
                #[cfg(not(loom))]
                let soon = i == 0 && start.elapsed() < SOON;
                #[cfg(loom)]
                let soon = i == 0;
                let next = if soon { spins * 2 } else { spins / 2 };
                // Relaxed: a hint.
                budget.store(next.clamp(MIN_SPINS, MAX_SPINS), Relaxed);
                return Some(outcome);
            }
            #[cfg(not(loom))]
            if start.elapsed() > YIELD_FOR {
                break;
            }
        }
        // Relaxed: a hint.
        budget.store(MIN_SPINS, Relaxed);
        let waiter = Waiter::for_thread(0);
        let raw = Arc::into_raw(Arc::clone(&waiter)).cast_mut();
        // AcqRel: Release publishes the waiter to the completer's swap;
        // Acquire (on failure) pairs with it, as `outcome`.
        match self
            .state
            .compare_exchange(ptr::null_mut(), raw, AcqRel, Acquire)
        {
            Ok(_) => {
                match deadline {
                    None => {
                        waiter.wait(false);
                    }
                    // Timed out: the waiter is cancelled, and stays in
                    // `state` for the retract (or the completer) to reclaim.
                    Some(deadline) => {
                        waiter.wait_until(false, deadline)?;
                    }
                }
                Some(self.outcome().expect("a notified slot is complete"))
            }
            Err(_) => {
                // SAFETY: the reference we made for `state`, not published.
                drop(unsafe { Arc::from_raw(raw) });
                Some(
                    self.outcome()
                        .expect("a slot leaves null only when complete"),
                )
            }
        }
    }

    /// A task's wait: `Ready` once complete; otherwise the task's waker is
    /// registered (in `parked`, published in `state`).
    fn poll_wait(&self, parked: &mut Option<Arc<Waiter>>, cx: &mut Context<'_>) -> Poll<Outcome> {
        if let Some(outcome) = self.outcome() {
            return Poll::Ready(outcome);
        }
        if let Some(waiter) = parked {
            // Keeps the waker current; Ready once the completer notified.
            return match waiter.poll(cx) {
                Poll::Ready(_) => Poll::Ready(self.outcome().expect("a notified slot is complete")),
                Poll::Pending => Poll::Pending,
            };
        }
        let waiter = Waiter::for_task(cx.waker(), 0);
        let raw = Arc::into_raw(Arc::clone(&waiter)).cast_mut();
        // As in `wait`.
        match self
            .state
            .compare_exchange(ptr::null_mut(), raw, AcqRel, Acquire)
        {
            Ok(_) => {
                *parked = Some(waiter);
                Poll::Pending
            }
            Err(_) => {
                // SAFETY: the reference we made for `state`, not published.
                drop(unsafe { Arc::from_raw(raw) });
                Poll::Ready(
                    self.outcome()
                        .expect("a slot leaves null only when complete"),
                )
            }
        }
    }

    /// Waits for the completion of a slot that somebody took out of the
    /// channel word (or claimed): they are a few steps from completing it.
    fn await_completion(&self) -> Outcome {
        let mut spins = 0u32;
        loop {
            if let Some(outcome) = self.outcome() {
                return outcome;
            }
            if spins < 64 {
                spins += 1;
                hint::spin_loop();
            } else {
                wait::give_way(None);
            }
        }
    }

    /// Takes back a published slot whose owner gives up (a dropped future).
    /// `None`: retracted, nobody will touch it. `Some(outcome)`: somebody
    /// had taken it, and has now completed it.
    fn retract(&self, chan: &Chan) -> Option<Outcome> {
        let me = ptr::from_ref(self).cast::<u8>().cast_mut();
        let mut spins = 0u32;
        loop {
            // AcqRel: as the swaps on the word. Fails if a partner, an Alt
            // or a closing end took the slot: it is completing it.
            if chan
                .word
                .compare_exchange(me, EMPTY, AcqRel, Acquire)
                .is_ok()
            {
                // Nobody holds the slot now; reclaim a published waiter.
                let parked = self.state.swap(ptr::null_mut(), Acquire);
                if !parked.is_null() {
                    // SAFETY: the reference we left in `state`, untaken.
                    drop(unsafe { Arc::from_raw(parked) });
                }
                return None;
            }
            if let Some(outcome) = self.outcome() {
                return Some(outcome);
            }
            // The taker is a few steps from completing: wait for them.
            if spins < 64 {
                spins += 1;
                hint::spin_loop();
            } else {
                wait::give_way(None);
            }
        }
    }
}

/// The channel's word and where each side last ran, on a cache line of
/// their own.
#[repr(align(128))]
struct Chan {
    /// [`EMPTY`], [`CLOSED`], a waiting party's `Slot` (untagged), or an
    /// [`Alt`]'s shared part (tagged [`ALT_TAG`]).
    word: AtomicPtr<u8>,
    /// The processor each side ([`SENDER`], [`RECEIVER`]) last ran on when
    /// it used the channel (`u32::MAX`: unknown). A hint for the wait.
    cpus: [AtomicU32; 2],
    /// The spin budget (see [`MIN_SPINS`]).
    budget: AtomicU32,
}

/// A side of the channel, for [`Chan::cpus`].
const SENDER: usize = 0;
/// See [`SENDER`].
const RECEIVER: usize = 1;

/// What a swap on the word found.
enum Found<T> {
    Empty,
    Closed,
    Slot(*const Slot<T>),
    Alt(Arc<AltShared<T>>),
}

impl Chan {
    fn found<T>(word: *mut u8) -> Found<T> {
        if word == EMPTY {
            Found::Empty
        } else if word == CLOSED {
            Found::Closed
        } else if word.addr() & ALT_TAG != 0 {
            let raw = word.map_addr(|a| a & !ALT_TAG).cast::<AltShared<T>>();
            // SAFETY: a tagged word holds one reference to the Alt's shared
            // part (made by `Alt::enable`), which the swap handed to us.
            Found::Alt(unsafe { Arc::from_raw(raw) })
        } else {
            Found::Slot(word.cast::<Slot<T>>())
        }
    }

    /// Notes the processor `side` runs on, before it uses the word (on the
    /// same cache line, which the use takes anyway).
    #[inline]
    fn note_cpu(&self, side: usize) {
        if let Some(cpu) = thread::current_cpu() {
            // Relaxed: a hint.
            self.cpus[side].store(cpu, Relaxed);
        }
    }

    /// How long `side` spins before it yields: not at all if its partner
    /// last ran on this very processor (it cannot run while we spin),
    /// otherwise the channel's budget.
    #[inline]
    fn spins(&self, side: usize) -> u32 {
        // Relaxed: hints.
        let partner = self.cpus[1 - side].load(Relaxed);
        match thread::current_cpu() {
            Some(cpu) if cpu == partner => 0,
            _ => self.budget.load(Relaxed).clamp(MIN_SPINS, MAX_SPINS),
        }
    }

    /// The channel's identity, as an Alt's claim records it.
    fn id(&self) -> usize {
        ptr::from_ref(self).addr()
    }
}

/// Creates a CSP channel: a synchronous rendezvous between one [`Sender`]
/// and one [`Receiver`].
///
/// # Examples
///
/// ```
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send("ping").unwrap());
/// assert_eq!(rx.recv(), Ok("ping"));
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        word: AtomicPtr::new(EMPTY),
        cpus: [AtomicU32::new(u32::MAX), AtomicU32::new(u32::MAX)],
        budget: AtomicU32::new(SPINS),
    });
    (
        Sender {
            chan: Arc::clone(&chan),
            published: Published::NONE,
            _t: core::marker::PhantomData,
        },
        Receiver {
            chan,
            stash: None,
            published: Published::NONE,
            alt: AltEntry(None),
        },
    )
}

/// The sending end of a [`csp::channel`](channel). Not `Clone`: the channel
/// is point to point.
///
/// Dropping it wakes a receiver that waits, with [`RecvError`]. If the
/// receiver waits as a task (or an [`Alt`]'s task) and its waker panics,
/// the panic goes on out of the drop once the channel is closed, unless
/// the thread is already unwinding: then it is dropped (a second panic
/// would abort the process).
///
/// # Examples
///
/// ```
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// let t = std::thread::spawn(move || rx.recv().unwrap());
/// tx.send(5).unwrap();
/// assert_eq!(t.join().unwrap(), 5);
/// ```
pub struct Sender<T> {
    chan: Arc<Chan>,
    /// The slot of this sender's [`SendFuture`] while it is published.
    published: Published<T>,
    /// Values of `T` go to the receiver's thread: `Send` only if `T` is.
    _t: core::marker::PhantomData<T>,
}

impl<T> Sender<T> {
    /// Sends `value` and returns once the receiver has taken it.
    ///
    /// # Errors
    ///
    /// `Err(SendError(value))` if the receiver is gone (or goes while we
    /// wait): the value comes back.
    ///
    /// # Progress
    ///
    /// Blocks until the receiver arrives. Apart from that wait, one swap and
    /// a bounded number of steps (wait-free). If the receiver is not there,
    /// the thread spins briefly, yields a few times, then parks.
    ///
    /// # Examples
    ///
    /// ```
    /// let (mut tx, rx) = lockfree_sync::csp::channel();
    /// drop(rx);
    /// assert_eq!(tx.send(1).unwrap_err().0, 1);
    /// ```
    pub fn send(&mut self, value: T) -> Result<(), SendError<T>> {
        self.send_timed(value, None).map_err(|e| match e {
            SendTimeoutError::Disconnected(v) => SendError(v),
            SendTimeoutError::Timeout(_) => unreachable!("a send without a deadline timed out"),
        })
    }

    /// Sends `value` if the receiver takes it within `timeout`.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] with the value if no receiver took it
    /// in time (the offer is withdrawn: no receiver gets it later),
    /// [`SendTimeoutError::Disconnected`] with the value if the receiver is
    /// gone.
    ///
    /// # Progress
    ///
    /// As [`send`](Self::send), for `timeout` at most: the thread parks
    /// with the deadline as its timeout, and returns within the deadline
    /// plus a timer's and a scheduler's latency, whatever the load. A
    /// receiver that took the value just as the time ran out makes it
    /// `Ok`: the value is delivered exactly once, or handed back.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::csp::{self, SendTimeoutError};
    ///
    /// let (mut tx, _rx) = csp::channel();
    /// let r = tx.try_send_for(5, Duration::from_millis(1)); // nobody receives
    /// assert_eq!(r, Err(SendTimeoutError::Timeout(5)));
    /// ```
    #[doc(alias = "send_timeout")]
    pub fn try_send_for(&mut self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        // A deadline past what `Instant` holds is no deadline.
        self.send_timed(value, Instant::now().checked_add(timeout))
    }

    /// Sends `value` if the receiver takes it before `deadline`.
    ///
    /// # Errors
    ///
    /// As [`try_send_for`](Self::try_send_for).
    ///
    /// # Progress
    ///
    /// As [`try_send_for`](Self::try_send_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// let t = std::thread::spawn(move || rx.recv());
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(tx.try_send_until('a', deadline), Ok(()));
    /// assert_eq!(t.join().unwrap(), Ok('a'));
    /// ```
    pub fn try_send_until(
        &mut self,
        value: T,
        deadline: Instant,
    ) -> Result<(), SendTimeoutError<T>> {
        self.send_timed(value, Some(deadline))
    }

    fn send_timed(
        &mut self,
        value: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        let slot = Slot::new(Some(value));
        let outcome = match self.offer(&slot) {
            Some(outcome) => outcome,
            None => match slot.wait(self.chan.spins(SENDER), &self.chan.budget, deadline) {
                Some(outcome) => outcome,
                None => match slot.retract(&self.chan) {
                    Some(outcome) => outcome,
                    // Withdrawn: nobody touches the slot any more.
                    // SAFETY: as just said.
                    None => {
                        return Err(SendTimeoutError::Timeout(
                            slot.value
                                .with_mut(|v| unsafe { (*v).take() })
                                .expect("an unsent value stays in its slot"),
                        ));
                    }
                },
            },
        };
        self.finish(&slot, outcome)
            .map_err(|SendError(v)| SendTimeoutError::Disconnected(v))
    }

    /// Publishes `slot` (ours, holding the value): `Some(outcome)` if the
    /// rendezvous is over, `None` if we must wait for the receiver.
    fn offer(&mut self, slot: &Slot<T>) -> Option<Outcome> {
        self.reclaim();
        let chan = &*self.chan;
        chan.note_cpu(SENDER);
        let me = ptr::from_ref(slot).cast::<u8>().cast_mut();
        // AcqRel: Release publishes our slot (and value) to the receiver
        // that swaps it out; Acquire makes a waiting receiver's slot ours.
        match Chan::found::<T>(chan.word.swap(me, AcqRel)) {
            Found::Empty => None,
            Found::Closed => {
                // Put the mark back: nobody else uses the word now.
                chan.word.store(CLOSED, Release);
                Some(Outcome::Shut)
            }
            Found::Slot(receiver) => {
                // Release: our next use of the word, or the receiver's,
                // sees it empty (the receiver's also through `complete`).
                chan.word.store(EMPTY, Release);
                // SAFETY: our slot, unpublished again; the receiver's slot
                // waits for our completion, so nobody else touches it.
                unsafe { move_value(slot, receiver) };
                // SAFETY: we took the receiver's slot out of the word.
                // Woken last: the value is the receiver's already, so a
                // panicking waker (ours to run) loses nothing.
                drop(unsafe { Slot::complete(receiver, Outcome::Done) });
                Some(Outcome::Done)
            }
            Found::Alt(alt) => {
                if alt.claim(chan.id()) {
                    chan.word.store(EMPTY, Release);
                    // SAFETY: our claim gives us the Alt's slot, whose owner
                    // waits for our completion.
                    unsafe { move_value(slot, &alt.slot) };
                    // SAFETY: as above. Woken last, as above.
                    drop(unsafe { Slot::complete(&alt.slot, Outcome::Done) });
                    Some(Outcome::Done)
                } else {
                    // The Alt took another channel: we came first after
                    // all, and our slot is in the word.
                    None
                }
            }
        }
    }

    /// Takes back the slot of a [`SendFuture`] that was leaked (with
    /// `mem::forget`) while its offer was published, as its drop would
    /// have: withdrawn (its value stays with the leaked future), or
    /// delivered already. Left in the channel word, it would make our next
    /// offer take it for a receiver's.
    fn reclaim(&mut self) {
        if let Some(leaked) = self.published.take() {
            // SAFETY: see `Published`: the leaked future's slot is alive and
            // nobody else uses it.
            let _ = unsafe { &*leaked }.retract(&self.chan);
        }
    }

    fn finish(&self, slot: &Slot<T>, outcome: Outcome) -> Result<(), SendError<T>> {
        match outcome {
            Outcome::Done => Ok(()),
            // SAFETY: complete with SHUT: nobody touches the slot any more.
            Outcome::Shut => Err(SendError(
                slot.value
                    .with_mut(|v| unsafe { (*v).take() })
                    .expect("an unsent value stays in its slot"),
            )),
        }
    }

    /// [`send`](Self::send) for async tasks.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes either withdraws the offer
    /// (the value is dropped with the future, never received) or, if the
    /// receiver had already taken it, leaves it delivered exactly once.
    /// [`SendFuture::cancel`] gives up the same way but hands an undelivered
    /// value back. A future leaked (with `mem::forget`) while it waits is
    /// withdrawn by this sender's next send: its value stays with the leaked
    /// future, unless the receiver took it before.
    ///
    /// # Progress
    ///
    /// As [`send`](Self::send); the task waits without spinning.
    ///
    /// # Examples
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// let t = std::thread::spawn(move || rx.recv().unwrap());
    /// tx.send_async(3).await.unwrap();
    /// assert_eq!(t.join().unwrap(), 3);
    /// # });
    /// ```
    pub fn send_async(&mut self, value: T) -> SendFuture<'_, T> {
        SendFuture {
            tx: self,
            slot: Slot::new(Some(value)),
            phase: Phase::Idle,
            parked: None,
            _pin: PhantomPinned,
        }
    }

    /// Whether the receiver has been dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::csp::channel::<u8>();
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.word.load(Acquire) == CLOSED
    }
}

/// Moves the value from a sender's slot into a receiver's.
///
/// # Safety
///
/// The caller has exclusive access to both slots' values.
unsafe fn move_value<T>(from: *const Slot<T>, to: *const Slot<T>) {
    // SAFETY: exclusive, by the caller's promise.
    let value = unsafe { (*from).value.with_mut(|v| (*v).take()) };
    debug_assert!(value.is_some(), "a sender's slot holds its value");
    // SAFETY: as above.
    unsafe { (*to).value.with_mut(|v| *v = value) };
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        shut::<T>(&self.chan);
    }
}

/// An end is dropped: mark the word closed and release a waiting partner.
///
/// The partner's waker (a task's) is user code: it runs last, when the
/// channel is closed and the partner's slot complete, and its panic follows
/// the family's policy (`sync_core::unwind`): it goes on out of the drop,
/// unless the thread is already unwinding (a panic out of a drop during
/// unwinding aborts), in which case it is dropped.
fn shut<T>(chan: &Chan) {
    // AcqRel: as the swaps in `offer`/`accept`.
    let wakeup = match Chan::found::<T>(chan.word.swap(CLOSED, AcqRel)) {
        Found::Empty | Found::Closed => None,
        // SAFETY: we took the partner's slot out of the word. The partner's
        // value (a sender's) stays in its slot: a panicking waker loses
        // nothing.
        Found::Slot(partner) => unsafe { Slot::complete(partner, Outcome::Shut) },
        Found::Alt(alt) => {
            if alt.claim(chan.id()) {
                // SAFETY: our claim gives us the Alt's slot.
                unsafe { Slot::complete(&alt.slot, Outcome::Shut) }
            } else {
                None
            }
        }
    };
    if let Some(wakeup) = wakeup {
        let mut panics = Panics::new();
        panics.catch(|| wakeup.wake());
        panics.resume();
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The receiving end of a [`csp::channel`](channel). Not `Clone`.
///
/// Dropping it wakes a sender that waits, whose value comes back in
/// [`SendError`]. A sending task's waker that panics then is handled as
/// for [`Sender`]'s drop.
///
/// # Examples
///
/// ```
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send([1, 2, 3]).unwrap());
/// assert_eq!(rx.recv(), Ok([1, 2, 3]));
/// ```
pub struct Receiver<T> {
    chan: Arc<Chan>,
    /// A value delivered to a receiving future that was dropped at that
    /// moment: the next receive returns it.
    stash: Option<T>,
    /// The slot of this receiver's [`RecvFuture`] while it is published.
    published: Published<T>,
    /// The [`Alt`] published on this receiver's channel, while it is.
    alt: AltEntry<T>,
}

impl<T> Receiver<T> {
    /// Waits for the sender and takes its value.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the sender is gone (or goes while we wait).
    ///
    /// # Progress
    ///
    /// Blocks until the sender arrives; otherwise one swap and a bounded
    /// number of steps. It spins briefly, yields, then parks.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = lockfree_sync::csp::channel::<u8>();
    /// drop(tx);
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn recv(&mut self) -> Result<T, RecvError> {
        self.recv_timed(None).map_err(|e| match e {
            RecvTimeoutError::Disconnected => RecvError,
            RecvTimeoutError::Timeout => unreachable!("a receive without a deadline timed out"),
        })
    }

    /// Waits for the sender for `timeout` at most, and takes its value.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if no sender came in time (nothing is
    /// left published: a sender that comes later waits for the next
    /// receive), [`RecvTimeoutError::Disconnected`] if the sender is gone.
    ///
    /// # Progress
    ///
    /// As [`recv`](Self::recv), for `timeout` at most: the thread parks
    /// with the deadline as its timeout, and returns within the deadline
    /// plus a timer's and a scheduler's latency, whatever the load. A
    /// sender that handed its value over just as the time ran out makes it
    /// `Ok`: no value is lost.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::csp::{self, RecvTimeoutError};
    ///
    /// let (_tx, mut rx) = csp::channel::<u8>();
    /// let r = rx.try_recv_for(Duration::from_millis(1)); // nobody sends
    /// assert_eq!(r, Err(RecvTimeoutError::Timeout));
    /// ```
    #[doc(alias = "recv_timeout")]
    pub fn try_recv_for(&mut self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        // A deadline past what `Instant` holds is no deadline.
        self.recv_timed(Instant::now().checked_add(timeout))
    }

    /// Waits for the sender until `deadline` at most, and takes its value.
    ///
    /// # Errors
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Progress
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// std::thread::spawn(move || tx.send(7u8));
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(rx.try_recv_until(deadline), Ok(7));
    /// ```
    #[doc(alias = "recv_deadline")]
    pub fn try_recv_until(&mut self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_timed(Some(deadline))
    }

    fn recv_timed(&mut self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        self.reclaim();
        if let Some(v) = self.stash.take() {
            return Ok(v);
        }
        let slot = Slot::new(None);
        let outcome = match self.accept(&slot) {
            Some(outcome) => outcome,
            None => match slot.wait(self.chan.spins(RECEIVER), &self.chan.budget, deadline) {
                Some(outcome) => outcome,
                // Withdrawn, or completed by a sender that took the slot
                // first.
                None => slot.retract(&self.chan).ok_or(RecvTimeoutError::Timeout)?,
            },
        };
        Self::finish(&slot, outcome).map_err(|RecvError| RecvTimeoutError::Disconnected)
    }

    /// Publishes our (empty) slot: `Some(outcome)` if the rendezvous is
    /// over, `None` if we must wait for the sender.
    /// Takes back the slot of a [`RecvFuture`] that was leaked (with
    /// `mem::forget`) while it waited, as its drop would have: withdrawn,
    /// or, if a sender handed its value over, that value is kept for this
    /// receiver's next receive. Left in the channel word, it would make our
    /// next receive take it for a sender's.
    fn reclaim(&mut self) {
        if let Some(shared) = self.alt.0.take() {
            self.reclaim_alt(&shared);
        }
        if let Some(leaked) = self.published.take() {
            // SAFETY: see `Published`: the leaked future's slot is alive and
            // nobody else uses it.
            let slot = unsafe { &*leaked };
            if let Some(Outcome::Done) = slot.retract(&self.chan) {
                debug_assert!(self.stash.is_none(), "a published receive had a stash");
                // SAFETY: complete: nobody else touches the slot.
                self.stash = slot.value.with_mut(|v| unsafe { (*v).take() });
            }
        }
    }

    /// Withdraws an Alt whose [`SelectFuture`] was leaked (with
    /// `mem::forget`) while it was published on this channel, as the
    /// future's drop would have: if a sender on this channel claimed it,
    /// the value it handed over is kept for this receiver's next receive.
    /// (Each receiver of the Alt does this for its own channel.)
    #[cold]
    fn reclaim_alt(&mut self, shared: &Arc<AltShared<T>>) {
        let chan = &*self.chan;
        // AcqRel: as in `Alt::disable`. Our reference keeps the Alt's
        // address from being reused meanwhile.
        if chan
            .word
            .compare_exchange(shared.entry(), EMPTY, AcqRel, Acquire)
            .is_ok()
        {
            // SAFETY: the word's reference, now ours.
            drop(unsafe { Arc::from_raw(Arc::as_ptr(shared)) });
        }
        if shared.claim(CLAIM_SELF) {
            // Nobody will complete the Alt's slot: take back the leaked
            // task's waiter if it is published there.
            let parked = shared.slot.state.swap(ptr::null_mut(), Acquire);
            if !parked.is_null() {
                // SAFETY: the reference the task left in `state`, untaken.
                drop(unsafe { Arc::from_raw(parked) });
            }
        } else if shared.claim.load(Acquire) == chan.id()
            && shared.slot.await_completion() == Outcome::Done
        {
            debug_assert!(self.stash.is_none(), "a published Alt had a stash");
            // SAFETY: complete: nobody else touches the slot.
            self.stash = shared.slot.value.with_mut(|v| unsafe { (*v).take() });
        }
    }

    fn accept(&mut self, slot: &Slot<T>) -> Option<Outcome> {
        let chan = &*self.chan;
        chan.note_cpu(RECEIVER);
        let me = ptr::from_ref(slot).cast::<u8>().cast_mut();
        // AcqRel: as in `offer`.
        match Chan::found::<T>(chan.word.swap(me, AcqRel)) {
            Found::Empty => None,
            Found::Closed => {
                chan.word.store(CLOSED, Release);
                Some(Outcome::Shut)
            }
            Found::Slot(sender) => {
                // Release: as in `offer`.
                chan.word.store(EMPTY, Release);
                let value = take_from(sender, &mut self.stash);
                // Ours again (unpublished): the value goes where `finish`
                // takes it.
                // SAFETY: our slot, which nobody else touches now.
                slot.value.with_mut(|v| unsafe { *v = Some(value) });
                Some(Outcome::Done)
            }
            Found::Alt(_) => unreachable!("only a receiver's Alt publishes itself"),
        }
    }

    fn finish(slot: &Slot<T>, outcome: Outcome) -> Result<T, RecvError> {
        match outcome {
            // SAFETY: complete: nobody else touches the slot.
            Outcome::Done => Ok(slot
                .value
                .with_mut(|v| unsafe { (*v).take() })
                .expect("a completed receive holds its value")),
            Outcome::Shut => Err(RecvError),
        }
    }

    /// [`recv`](Self::recv) for async tasks.
    ///
    /// # Errors
    ///
    /// As [`recv`](Self::recv).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future either withdraws it before any
    /// sender saw it (the value stays with the sender), or, if a sender had
    /// already handed its value over, keeps that value for this receiver's
    /// next receive. No value is lost or received twice. A future leaked
    /// (with `mem::forget`) while it waits is withdrawn the same way by this
    /// receiver's next receive (or an [`Alt`] built on it, or its drop).
    ///
    /// # Progress
    ///
    /// As [`recv`](Self::recv); the task waits without spinning.
    ///
    /// # Examples
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// std::thread::spawn(move || tx.send('x').unwrap());
    /// assert_eq!(rx.recv_async().await, Ok('x'));
    /// # });
    /// ```
    pub fn recv_async(&mut self) -> RecvFuture<'_, T> {
        RecvFuture {
            rx: self,
            slot: Slot::new(None),
            phase: Phase::Idle,
            parked: None,
            _pin: PhantomPinned,
        }
    }

    /// Whether the sender has been dropped (values it handed over before
    /// may still be received).
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::csp::channel::<u8>();
    /// drop(tx);
    /// assert!(rx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.word.load(Acquire) == CLOSED
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // A value handed to a leaked future is dropped with us.
        self.reclaim();
        shut::<T>(&self.chan);
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// The slot of an end's future while it is published in the channel word
/// (null: none), so that the end can take it back if the future is leaked.
///
/// A future dropped while published withdraws its slot. One leaked with
/// `mem::forget` (after being pinned, say in a `Box`) never does: its slot
/// would stay in the word, and the end's next send (or receive) would find
/// a slot of its own side there and take it for the partner's (a send
/// "delivered" into a leaked sender slot, both values lost). So each end
/// records its future's slot, and its next operation (or an [`Alt`] built
/// on it) does what the leaked future's drop would have done.
struct Published<T>(*const Slot<T>);

impl<T> Published<T> {
    const NONE: Self = Self(ptr::null());

    /// The slot of a leaked future, if one is recorded.
    fn take(&mut self) -> Option<*const Slot<T>> {
        let slot = core::mem::replace(self, Self::NONE).0;
        (!slot.is_null()).then_some(slot)
    }
}

// SAFETY: the pointer is followed only by the end's owner, through `&mut`
// of the end, and only when the future that recorded it has neither
// finished nor been dropped (each clears it): that future was leaked. Its
// memory is then never freed (Pin's drop guarantee: a pinned value whose
// drop has not run stays valid), and nobody can touch the future again,
// since it borrowed the end mutably and the end is in use again. Values in
// the slot move as they would through the future (`T: Send` is required by
// the ends' own `Send`).
unsafe impl<T> Send for Published<T> {}
// SAFETY: as for `Send`: never followed through a shared reference.
unsafe impl<T> Sync for Published<T> {}

/// The shared part of an [`Alt`] published on a receiver's channel (see
/// [`Receiver::reclaim_alt`]).
struct AltEntry<T>(Option<Arc<AltShared<T>>>);

// SAFETY: the Alt's shared part holds at most a value on its way to this
// receiver (`T: Send`, as the receiver's own `Send` requires).
unsafe impl<T: Send> Send for AltEntry<T> {}
// SAFETY: only used through `&mut` of the receiver.
unsafe impl<T> Sync for AltEntry<T> {}

/// Where a future is in its rendezvous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not yet offered.
    Idle,
    /// Our slot is in the channel word (or taken by the partner).
    Published,
    /// Over: the output was returned.
    Finished,
}

/// The future of [`Sender::send_async`].
///
/// # Cancel safety
///
/// See [`Sender::send_async`] and [`SendFuture::cancel`].
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// let t = std::thread::spawn(move || rx.recv());
/// let send: lockfree_sync::csp::SendFuture<'_, u8> = tx.send_async(9);
/// send.await.unwrap();
/// assert_eq!(t.join().unwrap(), Ok(9));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct SendFuture<'a, T> {
    tx: &'a mut Sender<T>,
    /// Our half of the rendezvous; its address is published, so the future
    /// is `!Unpin`.
    slot: Slot<T>,
    phase: Phase,
    parked: Option<Arc<Waiter>>,
    _pin: PhantomPinned,
}

impl<T> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: we never move out of the pinned future; the slot's address
        // stays valid until `drop` has retracted or awaited it.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = match this.phase {
            Phase::Idle => match this.tx.offer(&this.slot) {
                Some(outcome) => outcome,
                None => {
                    this.phase = Phase::Published;
                    this.tx.published = Published(&raw const this.slot);
                    core::task::ready!(this.slot.poll_wait(&mut this.parked, cx))
                }
            },
            Phase::Published => core::task::ready!(this.slot.poll_wait(&mut this.parked, cx)),
            Phase::Finished => panic!("SendFuture polled after it completed"),
        };
        this.phase = Phase::Finished;
        this.tx.published = Published::NONE;
        this.parked = None;
        Poll::Ready(this.tx.finish(&this.slot, outcome))
    }
}

impl<T> SendFuture<'_, T> {
    /// Gives up the send and says what became of the value: `Some(value)`
    /// if the receiver never took it (the offer is withdrawn, or the
    /// receiver is gone), `None` if it was delivered (perhaps just now, as
    /// we gave up). Dropping the future instead drops an undelivered value.
    ///
    /// # Cancel safety
    ///
    /// This is the cancellation that loses nothing: the value is either
    /// delivered exactly once or handed back.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::pin::pin;
    /// use std::task::{Context, Waker};
    ///
    /// let (mut tx, _rx) = lockfree_sync::csp::channel();
    /// let mut send = pin!(tx.send_async(String::from("offer")));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(send.as_mut().poll(&mut cx).is_pending()); // nobody receives
    /// assert_eq!(send.cancel(), Some(String::from("offer")));
    /// ```
    pub fn cancel(self: Pin<&mut Self>) -> Option<T> {
        // SAFETY: we do not move out of the pinned future; the slot stays
        // where it is until it is retracted or completed.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = match this.phase {
            Phase::Finished => return None,
            Phase::Idle => None,
            Phase::Published => {
                // Ours (an idle future leaves a leaked one's record alone).
                this.tx.published = Published::NONE;
                this.slot.retract(&this.tx.chan)
            }
        };
        this.phase = Phase::Finished;
        this.parked = None;
        match outcome {
            Some(Outcome::Done) => None,
            // Never offered, withdrawn, or refused by a closing receiver:
            // nobody else touches the slot.
            // SAFETY: as just said.
            None | Some(Outcome::Shut) => this.slot.value.with_mut(|v| unsafe { (*v).take() }),
        }
    }
}

impl<T> Drop for SendFuture<'_, T> {
    fn drop(&mut self) {
        if self.phase == Phase::Published {
            // Withdrawn (the value drops with us), or delivered already.
            let _ = self.slot.retract(&self.tx.chan);
            self.tx.published = Published::NONE;
        }
    }
}

impl<T> fmt::Debug for SendFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFuture")
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

/// The future of [`Receiver::recv_async`].
///
/// # Cancel safety
///
/// See [`Receiver::recv_async`].
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send(4u8).unwrap());
/// let recv: lockfree_sync::csp::RecvFuture<'_, u8> = rx.recv_async();
/// assert_eq!(recv.await, Ok(4));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RecvFuture<'a, T> {
    rx: &'a mut Receiver<T>,
    /// Our half of the rendezvous; its address is published, so the future
    /// is `!Unpin`.
    slot: Slot<T>,
    phase: Phase,
    parked: Option<Arc<Waiter>>,
    _pin: PhantomPinned,
}

impl<T> Future for RecvFuture<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: as in `SendFuture::poll`.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = match this.phase {
            Phase::Idle => {
                this.rx.reclaim();
                if let Some(v) = this.rx.stash.take() {
                    this.phase = Phase::Finished;
                    return Poll::Ready(Ok(v));
                }
                match this.rx.accept(&this.slot) {
                    Some(outcome) => outcome,
                    None => {
                        this.phase = Phase::Published;
                        this.rx.published = Published(&raw const this.slot);
                        core::task::ready!(this.slot.poll_wait(&mut this.parked, cx))
                    }
                }
            }
            Phase::Published => core::task::ready!(this.slot.poll_wait(&mut this.parked, cx)),
            Phase::Finished => panic!("RecvFuture polled after it completed"),
        };
        this.phase = Phase::Finished;
        this.rx.published = Published::NONE;
        this.parked = None;
        Poll::Ready(Receiver::finish(&this.slot, outcome))
    }
}

impl<T> Drop for RecvFuture<'_, T> {
    fn drop(&mut self) {
        if self.phase == Phase::Published {
            self.rx.published = Published::NONE;
            if let Some(Outcome::Done) = self.slot.retract(&self.rx.chan) {
                // Handed over as we gave up: keep it for the next receive.
                // SAFETY: complete: nobody else touches the slot.
                self.rx.stash = self.slot.value.with_mut(|v| unsafe { (*v).take() });
            }
        }
    }
}

impl<T> fmt::Debug for RecvFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvFuture")
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

/// The part of an [`Alt`] that senders reach through the channel words.
struct AltShared<T> {
    /// 0 while open; [`CLAIM_SELF`] when the Alt took a ready sender
    /// itself; otherwise the [`Chan::id`] of the channel whose sender (or
    /// whose closing) claimed it.
    claim: AtomicUsize,
    /// Where the claiming sender moves its value.
    slot: Slot<T>,
}

// SAFETY: the slot's value cell is written by the one sender whose claim
// succeeded, before it completes the slot, and read by the Alt's owner
// after it sees the completion (Release/Acquire on the slot's state); the
// rest is atomics. Values move between threads: `T: Send`.
unsafe impl<T: Send> Send for AltShared<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for AltShared<T> {}

/// The Alt claimed itself.
const CLAIM_SELF: usize = 1;

impl<T> AltShared<T> {
    /// The channel word that names this Alt (its address, tagged).
    fn entry(&self) -> *mut u8 {
        ptr::from_ref(self)
            .cast::<u8>()
            .cast_mut()
            .map_addr(|a| a | ALT_TAG)
    }

    /// Claims the Alt for channel `id`: only the first claim succeeds.
    fn claim(&self, id: usize) -> bool {
        // AcqRel: Acquire pairs with the Alt's Release publication of its
        // entries; Release orders the claim before our completion.
        self.claim.compare_exchange(0, id, AcqRel, Acquire).is_ok()
    }
}

/// occam's `ALT`: waits on several CSP receivers at once and takes a value
/// from the first whose sender is ready.
///
/// # Fairness
///
/// When several senders are ready at once, [`select`](Self::select) looks
/// at the receivers in turn starting one past the receiver it took last
/// time, so a receiver whose sender is always ready cannot starve the
/// others. Among senders that arrive while it waits, the first to claim it
/// wins.
///
/// # Examples
///
/// ```
/// use lockfree_sync::csp::{self, Alt};
///
/// let (mut tx1, mut rx1) = csp::channel();
/// let (mut tx2, mut rx2) = csp::channel();
/// // Each sender sends once and stays (a dropped sender's channel is ready
/// // with an error from then on).
/// let a = std::thread::spawn(move || tx1.send("one").map(|()| tx1));
/// let b = std::thread::spawn(move || tx2.send("two").map(|()| tx2));
/// let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
/// let mut got = vec![alt.select(), alt.select()];
/// got.sort();
/// assert_eq!(got, [(0, Ok("one")), (1, Ok("two"))]);
/// # a.join().unwrap().unwrap(); b.join().unwrap().unwrap();
/// ```
pub struct Alt<'a, T> {
    receivers: Vec<&'a mut Receiver<T>>,
    /// Where the next scan starts.
    next: usize,
}

impl<'a, T> Alt<'a, T> {
    /// An `ALT` over `receivers`; [`select`](Self::select) returns indexes
    /// into this list.
    ///
    /// # Panics
    ///
    /// If `receivers` is empty: such an ALT would wait forever.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_tx, mut rx) = lockfree_sync::csp::channel::<u8>();
    /// let alt = lockfree_sync::csp::Alt::new(vec![&mut rx]);
    /// assert_eq!(alt.len(), 1);
    /// ```
    pub fn new(mut receivers: Vec<&'a mut Receiver<T>>) -> Self {
        // A receiver's leaked future must not stay published where the
        // Alt looks for senders.
        for rx in &mut receivers {
            rx.reclaim();
        }
        assert!(
            !receivers.is_empty(),
            "Alt::new: an ALT over no channels would wait forever"
        );
        Self { receivers, next: 0 }
    }

    /// The number of receivers.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_t1, mut r1) = lockfree_sync::csp::channel::<u8>();
    /// let (_t2, mut r2) = lockfree_sync::csp::channel::<u8>();
    /// assert_eq!(lockfree_sync::csp::Alt::new(vec![&mut r1, &mut r2]).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.receivers.len()
    }

    /// Always `false`: an `Alt` has at least one receiver.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_tx, mut rx) = lockfree_sync::csp::channel::<u8>();
    /// assert!(!lockfree_sync::csp::Alt::new(vec![&mut rx]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.receivers.is_empty()
    }

    /// Waits until one receiver's sender is ready and takes its value:
    /// `(index, Ok(value))`, or `(index, Err(RecvError))` if that
    /// receiver's sender is gone. A closed channel stays ready, so drop it
    /// from the ALT (make a new one) once it has reported the error.
    ///
    /// # Progress
    ///
    /// Blocks until a sender is ready (or gone). It spins briefly, yields,
    /// then parks. A sender that finds the Alt waiting claims it with one
    /// CAS; the Alt publishes and withdraws itself with one CAS per channel.
    ///
    /// # Fairness
    ///
    /// See [`Alt`].
    ///
    /// # Examples
    ///
    /// ```
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// let (_tx2, mut rx2) = lockfree_sync::csp::channel();
    /// std::thread::spawn(move || tx.send(1).unwrap());
    /// let mut alt = lockfree_sync::csp::Alt::new(vec![&mut rx2, &mut rx]);
    /// assert_eq!(alt.select(), (1, Ok(1)));
    /// ```
    pub fn select(&mut self) -> (usize, Result<T, RecvError>) {
        self.select_timed(None)
            .expect("a select without a deadline timed out")
    }

    /// [`select`](Self::select) for `timeout` at most.
    ///
    /// # Errors
    ///
    /// [`SelectTimeoutError`] if no sender was ready (or gone) in time;
    /// the Alt is then withdrawn from every channel, and a sender that
    /// comes later waits for the next receive or select.
    ///
    /// # Progress
    ///
    /// As [`select`](Self::select), for `timeout` at most: the thread
    /// parks with the deadline as its timeout, and returns within the
    /// deadline plus a timer's and a scheduler's latency, whatever the
    /// load. A sender that claimed the Alt just as the time ran out makes
    /// it `Ok`: no value is lost.
    ///
    /// # Fairness
    ///
    /// As [`select`](Self::select).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::csp::{self, Alt, SelectTimeoutError};
    ///
    /// let (_tx1, mut rx1) = csp::channel::<u8>();
    /// let (_tx2, mut rx2) = csp::channel::<u8>();
    /// let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    /// assert_eq!(alt.try_select_for(Duration::from_millis(1)), Err(SelectTimeoutError));
    /// ```
    #[doc(alias = "select_timeout")]
    pub fn try_select_for(
        &mut self,
        timeout: Duration,
    ) -> Result<(usize, Result<T, RecvError>), SelectTimeoutError> {
        // A deadline past what `Instant` holds is no deadline.
        self.select_timed(Instant::now().checked_add(timeout))
            .ok_or(SelectTimeoutError)
    }

    /// [`select`](Self::select) until `deadline` at most.
    ///
    /// # Errors
    ///
    /// As [`try_select_for`](Self::try_select_for).
    ///
    /// # Progress
    ///
    /// As [`try_select_for`](Self::try_select_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use lockfree_sync::csp::{self, Alt};
    ///
    /// let (mut tx, mut rx) = csp::channel();
    /// std::thread::spawn(move || tx.send(1u8));
    /// let mut alt = Alt::new(vec![&mut rx]);
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(alt.try_select_until(deadline), Ok((0, Ok(1))));
    /// ```
    #[doc(alias = "select_deadline")]
    pub fn try_select_until(
        &mut self,
        deadline: Instant,
    ) -> Result<(usize, Result<T, RecvError>), SelectTimeoutError> {
        self.select_timed(Some(deadline)).ok_or(SelectTimeoutError)
    }

    /// `None` once `deadline` has passed.
    fn select_timed(&mut self, deadline: Option<Instant>) -> Option<(usize, Result<T, RecvError>)> {
        loop {
            if let Some(got) = self.poll_ready() {
                return Some(got);
            }
            match self.wait(deadline) {
                Waited::Got(got) => return Some(got),
                Waited::Retry => {}
                Waited::TimedOut => return None,
            }
        }
    }

    /// The scan order: every index once, starting at `next`.
    fn order(&self) -> impl Iterator<Item = usize> + use<T> {
        let (n, start) = (self.receivers.len(), self.next);
        (0..n).map(move |k| (start + k) % n)
    }

    fn took(&mut self, i: usize, got: Result<T, RecvError>) -> (usize, Result<T, RecvError>) {
        self.next = (i + 1) % self.receivers.len();
        (i, got)
    }

    /// Takes a ready sender (or a closed channel, or a stashed value)
    /// without publishing anything.
    fn poll_ready(&mut self) -> Option<(usize, Result<T, RecvError>)> {
        // A select of this Alt leaked while published (see
        // `Receiver::reclaim_alt`).
        for rx in &mut self.receivers {
            rx.reclaim();
        }
        for i in self.order() {
            if let Some(v) = self.receivers[i].stash.take() {
                return Some(self.took(i, Ok(v)));
            }
            let chan = &*self.receivers[i].chan;
            // Acquire: pairs with the sender's Release swap, so its slot is
            // readable once we own it.
            let word = chan.word.load(Acquire);
            if word == CLOSED {
                return Some(self.took(i, Err(RecvError)));
            }
            if word == EMPTY || word.addr() & ALT_TAG != 0 {
                continue;
            }
            // A sender waits: take its slot (a CAS, since it may withdraw).
            if chan
                .word
                .compare_exchange(word, EMPTY, AcqRel, Acquire)
                .is_ok()
            {
                let value = take_from(word.cast(), &mut self.receivers[i].stash);
                return Some(self.took(i, Ok(value)));
            }
        }
        None
    }

    /// Publishes the Alt on every channel and waits for a claim, until
    /// `deadline` at most.
    fn wait(&mut self, deadline: Option<Instant>) -> Waited<T> {
        let mut enabled = self.enable();
        let result = match enabled.found.take() {
            Some((i, ready)) => {
                // Withdrawn first, then the ready sender completed (and
                // woken, which may panic).
                self.disable(&enabled);
                return Waited::Got(self.take_ready(i, ready));
            }
            None if enabled.retry => None,
            None => {
                let waited =
                    enabled
                        .shared
                        .slot
                        .wait(MIN_SPINS, &AtomicU32::new(MIN_SPINS), deadline);
                match waited {
                    Some(outcome) => Some(self.claimed(&enabled.shared, outcome)),
                    None => match self.abandon(&enabled) {
                        Some(got) => Some(got),
                        None => {
                            self.disable(&enabled);
                            return Waited::TimedOut;
                        }
                    },
                }
            }
        };
        self.disable(&enabled);
        match result {
            Some((i, got)) => Waited::Got(self.took(i, got)),
            None => Waited::Retry,
        }
    }

    /// Gives up waiting on an enabled Alt (a dropped future, a timed
    /// select whose time ran out), before it is disabled: `None` if nobody
    /// had claimed it (nobody will now), or what the sender (or closing
    /// end) that claimed it first left in its slot, and for which
    /// receiver.
    fn abandon(&self, enabled: &Enabled<T>) -> Option<(usize, Result<T, RecvError>)> {
        let slot = &enabled.shared.slot;
        if enabled.shared.claim(CLAIM_SELF) {
            // Nobody will complete the slot: take back the waiter (a
            // task's, or a timed-out thread's, cancelled) if it is
            // published there.
            let parked = slot.state.swap(ptr::null_mut(), Acquire);
            if !parked.is_null() {
                // SAFETY: our reference, left in `state`, untaken.
                drop(unsafe { Arc::from_raw(parked) });
            }
            None
        } else {
            // A sender (or a closing end) claimed us and is a few steps
            // from completing the slot: wait for it.
            let outcome = slot.await_completion();
            Some(self.claimed(&enabled.shared, outcome))
        }
    }

    /// Publishes the Alt on every channel, in scan order, until a channel
    /// turns out ready (then the Alt claims itself for it and takes it) or
    /// a sender claims the Alt.
    fn enable(&mut self) -> Enabled<T> {
        let shared = Arc::new(AltShared {
            claim: AtomicUsize::new(0),
            slot: Slot::new(None),
        });
        let entry = shared.entry();
        let mut enabled = Enabled {
            shared,
            channels: Vec::with_capacity(self.receivers.len()),
            found: None,
            retry: false,
        };
        for i in self.order() {
            let chan = &*self.receivers[i].chan;
            let raw = Arc::into_raw(Arc::clone(&enabled.shared));
            // Release: publishes the Alt to the sender that swaps it out.
            match chan.word.compare_exchange(EMPTY, entry, AcqRel, Acquire) {
                Ok(_) => enabled.channels.push(i),
                Err(word) => {
                    // SAFETY: the reference we made for the word, unused.
                    drop(unsafe { Arc::from_raw(raw) });
                    // A sender is ready (or the channel closed) on a channel
                    // we had not enabled yet: claim ourselves for it, unless
                    // a sender on an enabled channel claimed us first.
                    if !enabled.shared.claim(CLAIM_SELF) {
                        break;
                    }
                    if word == CLOSED {
                        enabled.found = Some((i, None));
                    } else if chan
                        .word
                        .compare_exchange(word, EMPTY, AcqRel, Acquire)
                        .is_ok()
                    {
                        // The sender's slot is ours to complete: done once
                        // the Alt is withdrawn (`take_ready`).
                        enabled.found = Some((i, Some(Ready(word.cast()))));
                    } else {
                        // It withdrew. Senders that failed to claim us wait
                        // in their words: start over and find them.
                        enabled.retry = true;
                    }
                    break;
                }
            }
        }
        for &i in &enabled.channels {
            // Withdrawn by `disable`; if the select is leaked instead, by the
            // receiver's next use (`Receiver::reclaim`).
            self.receivers[i].alt.0 = Some(Arc::clone(&enabled.shared));
        }
        enabled
    }

    /// Completes the rendezvous with a sender found ready while publishing
    /// (its slot, taken out of the word of receiver `i`), or reports that
    /// channel closed. Called once the Alt is withdrawn from every channel,
    /// so that a sender's panicking waker leaves nothing of it published;
    /// the value waits in the receiver's stash meanwhile.
    fn take_ready(&mut self, i: usize, ready: Option<Ready<T>>) -> (usize, Result<T, RecvError>) {
        let got = match ready {
            Some(Ready(sender)) => Ok(take_from(sender, &mut self.receivers[i].stash)),
            None => Err(RecvError),
        };
        self.took(i, got)
    }

    /// What a sender (or a closing channel) that claimed the Alt left in
    /// its slot, and for which receiver.
    fn claimed(&self, shared: &AltShared<T>, outcome: Outcome) -> (usize, Result<T, RecvError>) {
        // Acquire: pairs with the claimer's CAS.
        let id = shared.claim.load(Acquire);
        let i = self
            .receivers
            .iter()
            .position(|rx| rx.chan.id() == id)
            .expect("the claimer is one of our channels");
        (i, Receiver::finish(&shared.slot, outcome))
    }

    /// Withdraws the Alt from every channel where it is still published.
    fn disable(&mut self, enabled: &Enabled<T>) {
        let entry = enabled.shared.entry();
        for &i in &enabled.channels {
            self.receivers[i].alt.0 = None;
            let chan = &*self.receivers[i].chan;
            if chan
                .word
                .compare_exchange(entry, EMPTY, AcqRel, Acquire)
                .is_ok()
            {
                // SAFETY: the word's reference, now ours.
                drop(unsafe { Arc::from_raw(Arc::as_ptr(&enabled.shared)) });
            }
            // Otherwise a sender swapped the entry out and owns that
            // reference.
        }
    }

    /// [`select`](Self::select) for async tasks.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future withdraws the Alt from every
    /// channel; a value that a sender handed over as it was dropped is kept
    /// by that receiver for its next receive (or the next select). No value
    /// is lost or received twice. A future leaked (with `mem::forget`)
    /// while it waits is withdrawn the same way by the next select, or by
    /// each receiver's next receive (or drop).
    ///
    /// # Progress
    ///
    /// Pending until a sender is ready (or gone); the sender that claims
    /// the Alt wakes the task.
    ///
    /// # Fairness
    ///
    /// As [`select`](Self::select).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::csp::{self, Alt};
    /// # futures::executor::block_on(async {
    /// let (_tx1, mut rx1) = csp::channel::<u8>();
    /// let (mut tx2, mut rx2) = csp::channel();
    /// std::thread::spawn(move || tx2.send(2u8).unwrap());
    /// let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    /// assert_eq!(alt.select_async().await, (1, Ok(2)));
    /// # });
    /// ```
    pub fn select_async(&mut self) -> SelectFuture<'_, 'a, T> {
        SelectFuture {
            alt: self,
            waiting: None,
            parked: None,
        }
    }
}

/// The slot of a ready sender that an Alt took out of a channel word, to
/// complete once the Alt is withdrawn.
struct Ready<T>(*const Slot<T>);

// SAFETY: the Alt that took the slot out of the word is the only one to
// touch it (its owner waits for the completion); the value moves to the
// Alt's receiver, as through the channel (`T: Send`).
unsafe impl<T: Send> Send for Ready<T> {}
// SAFETY: never used through a shared reference.
unsafe impl<T: Send> Sync for Ready<T> {}

/// How [`Alt::wait`] ended.
enum Waited<T> {
    /// A value (or a closed channel) was taken.
    Got((usize, Result<T, RecvError>)),
    /// A ready sender withdrew while we took it: start over.
    Retry,
    /// The deadline passed; the Alt is withdrawn.
    TimedOut,
}

/// An Alt published on its channels, waiting for a claim.
struct Enabled<T> {
    shared: Arc<AltShared<T>>,
    /// The receivers (indexes) on whose channels the Alt is published.
    channels: Vec<usize>,
    /// A ready channel found while publishing (the Alt claimed itself):
    /// the slot of its sender, which the Alt took out of the word and
    /// completes with [`Alt::take_ready`], or `None` if it closed.
    found: Option<(usize, Option<Ready<T>>)>,
    /// A ready sender withdrew while we took it: start over.
    retry: bool,
}

/// The future of [`Alt::select_async`].
///
/// # Cancel safety
///
/// See [`Alt::select_async`].
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send(1u8).unwrap());
/// let mut alt = lockfree_sync::csp::Alt::new(vec![&mut rx]);
/// let select: lockfree_sync::csp::SelectFuture<'_, '_, u8> = alt.select_async();
/// assert_eq!(select.await, (0, Ok(1)));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct SelectFuture<'s, 'a, T> {
    alt: &'s mut Alt<'a, T>,
    /// The Alt published on its channels, while the task waits.
    waiting: Option<Enabled<T>>,
    /// The task's waiter, published in the Alt's slot.
    parked: Option<Arc<Waiter>>,
}

// Nothing of the future is published by address (the Alt's shared part is
// on the heap), so it may move between polls.
impl<T> Unpin for SelectFuture<'_, '_, T> {}

impl<T> Future for SelectFuture<'_, '_, T> {
    type Output = (usize, Result<T, RecvError>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            if let Some(enabled) = &this.waiting {
                let outcome =
                    core::task::ready!(enabled.shared.slot.poll_wait(&mut this.parked, cx));
                let enabled = this.waiting.take().expect("just seen");
                this.parked = None;
                let (i, got) = this.alt.claimed(&enabled.shared, outcome);
                this.alt.disable(&enabled);
                return Poll::Ready(this.alt.took(i, got));
            }
            if let Some(got) = this.alt.poll_ready() {
                return Poll::Ready(got);
            }
            let mut enabled = this.alt.enable();
            if let Some((i, ready)) = enabled.found.take() {
                this.alt.disable(&enabled);
                return Poll::Ready(this.alt.take_ready(i, ready));
            }
            if enabled.retry {
                this.alt.disable(&enabled);
                continue;
            }
            this.waiting = Some(enabled);
        }
    }
}

impl<T> Drop for SelectFuture<'_, '_, T> {
    fn drop(&mut self) {
        let Some(enabled) = self.waiting.take() else {
            return;
        };
        // Keep what a sender that claimed us handed over.
        if let Some((i, Ok(v))) = self.alt.abandon(&enabled) {
            self.alt.receivers[i].stash = Some(v);
        }
        self.alt.disable(&enabled);
    }
}

impl<T> fmt::Debug for SelectFuture<'_, '_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectFuture")
            .field("waiting", &self.waiting.is_some())
            .finish_non_exhaustive()
    }
}

/// Takes the value from a sender's slot that the caller took out of the
/// channel word, and completes the slot. The value waits in `stash` (the
/// receiver's, empty) while the sender is woken: if the sender's waker
/// panics, the receiver's next receive returns it, and the sender's future
/// reports it delivered.
fn take_from<T>(sender: *const Slot<T>, stash: &mut Option<T>) -> T {
    debug_assert!(stash.is_none(), "a receive with a stashed value");
    // SAFETY: the caller took the slot out of the word: its owner waits for
    // our completion and nobody else touches it.
    *stash = unsafe { (*sender).value.with_mut(|v| (*v).take()) };
    // SAFETY: as above.
    let wakeup = unsafe { Slot::complete(sender, Outcome::Done) };
    drop(wakeup); // Wakes the sender's task, if it sleeps as one.
    stash.take().expect("a sender's slot holds its value")
}

impl<T> fmt::Debug for Alt<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Alt")
            .field("receivers", &self.receivers.len())
            .finish()
    }
}

/// A send whose receiver is gone: the value comes back.
///
/// # Examples
///
/// ```
/// let (mut tx, rx) = lockfree_sync::csp::channel();
/// drop(rx);
/// let lockfree_sync::csp::SendError(back) = tx.send(vec![1]).unwrap_err();
/// assert_eq!(back, [1]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a CSP channel whose receiver is gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// A receive whose sender is gone.
///
/// # Examples
///
/// ```
/// let (tx, mut rx) = lockfree_sync::csp::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(lockfree_sync::csp::RecvError));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on a CSP channel whose sender is gone")
    }
}

impl std::error::Error for RecvError {}

/// Why a timed send ([`Sender::try_send_for`], [`Sender::try_send_until`])
/// failed: the value comes back either way.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockfree_sync::csp::{self, SendTimeoutError};
///
/// let (mut tx, rx) = csp::channel();
/// drop(rx);
/// let e = tx.try_send_for(1, Duration::from_millis(1)).unwrap_err();
/// assert_eq!(e, SendTimeoutError::Disconnected(1));
/// assert_eq!(e.into_inner(), 1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SendTimeoutError<T> {
    /// No receiver took the value in time.
    Timeout(T),
    /// The receiver is gone.
    Disconnected(T),
}

impl<T> SendTimeoutError<T> {
    /// The value that was not sent.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = lockfree_sync::csp::SendTimeoutError::Timeout("v");
    /// assert_eq!(e.into_inner(), "v");
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            Self::Timeout(v) | Self::Disconnected(v) => v,
        }
    }
}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout(_) => f.write_str("Timeout(..)"),
            Self::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout(_) => f.write_str("timed out sending on a CSP channel"),
            Self::Disconnected(_) => f.write_str("sending on a CSP channel whose receiver is gone"),
        }
    }
}

impl<T> std::error::Error for SendTimeoutError<T> {}

/// Why a timed receive ([`Receiver::try_recv_for`],
/// [`Receiver::try_recv_until`]) returned no value.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockfree_sync::csp::{self, RecvTimeoutError};
///
/// let (tx, mut rx) = csp::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.try_recv_for(Duration::from_millis(1)), Err(RecvTimeoutError::Disconnected));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecvTimeoutError {
    /// No sender came in time.
    Timeout,
    /// The sender is gone.
    Disconnected,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out receiving on a CSP channel"),
            Self::Disconnected => f.write_str("receiving on a CSP channel whose sender is gone"),
        }
    }
}

impl std::error::Error for RecvTimeoutError {}

/// A timed select ([`Alt::try_select_for`], [`Alt::try_select_until`])
/// found no sender ready in time.
///
/// # Examples
///
/// ```
/// let e = lockfree_sync::csp::SelectTimeoutError;
/// assert_eq!(e.to_string(), "timed out waiting on a CSP ALT");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SelectTimeoutError;

impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out waiting on a CSP ALT")
    }
}

impl std::error::Error for SelectTimeoutError {}
