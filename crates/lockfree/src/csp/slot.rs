//! The rendezvous itself: the channel word, each side's slot, and the wait
//! for a slot's completion (see the module's notes).

use core::ptr;
use core::task::{Context, Poll};
use std::time::Instant;

use sync_core::sync::atomic::{AtomicPtr, AtomicU32, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::{Arc, hint, thread};
use sync_core::unwind;
use sync_core::wait;
use sync_core::waiter::{Waiter, Wakeup};

use super::alt::AltShared;

/// The channel word when nobody waits.
pub(super) const EMPTY: *mut u8 = ptr::null_mut();
/// The channel word once an end has been dropped.
pub(super) const CLOSED: *mut u8 = ptr::without_provenance_mut(1);
/// Tag on the channel word: the waiting party is an [`Alt`] (the word
/// points at its shared part).
pub(super) const ALT_TAG: usize = 0b10;

/// A slot's state once completed by the partner.
const DONE: *mut Waiter = ptr::without_provenance_mut(1);
/// A slot's state once completed because the other end is gone.
const SHUT: *mut Waiter = ptr::without_provenance_mut(2);

/// The token that wakes a slot's owner.
const COMPLETE: usize = 1;

/// A channel's first spin budget: spin hints a waiting thread spends
/// before it yields, when its partner last ran on another processor. A
/// partner running there completes a rendezvous within a few cache-line
/// round trips. When the partner last ran on our processor, spinning cannot
/// help (it runs only once we stop), so the thread yields at once (see
/// `Chan::spins`). Under loom (here and below) a spin is a yield to the
/// model's scheduler: one is enough to explore "the partner came during
/// the spin".
pub(super) const SPINS: u32 = if cfg!(loom) { 1 } else { 64 };
/// The budget doubles after a wait that the spin caught (or just missed:
/// see [`SOON`]) and halves after one it missed, within these bounds: two
/// threads that meet on two processors spin for up to about a sleep and a
/// wakeup, so that a stray delay does not throw them into yields, where
/// each one's slower answer would make the other yield too; a pipeline
/// whose partners are often descheduled hardly spins.
pub(super) const MIN_SPINS: u32 = if cfg!(loom) { 1 } else { 2 };
/// See [`MIN_SPINS`].
const MAX_SPINS: u32 = if cfg!(loom) { 1 } else { 1024 };
/// A wait that ends at the first yield, within this time, came "soon": the
/// partner runs on another processor and a longer spin would have caught
/// it (a yield with nothing else to run is a short system call; one that
/// lets another thread run costs its time slice).
#[cfg(not(loom))]
const SOON: std::time::Duration = std::time::Duration::from_micros(2);
/// Yields after the spin, at most, before sleeping (a yield with nothing
/// else to run is much cheaper than a sleep and a wakeup): lets a partner
/// that shares our processor run. Under loom, one yield before parking.
const YIELDS: u32 = if cfg!(loom) { 1 } else { 1_000 };
/// How long a thread yields at most before it sleeps: several wakeups'
/// worth, so that two threads that meet often do not fall into a chain of
/// sleeps and wakeups.
#[cfg(not(loom))]
const YIELD_FOR: std::time::Duration = std::time::Duration::from_micros(200);

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The partner completed the rendezvous.
    Done,
    /// The other end was dropped.
    Shut,
}

/// One side's half of a rendezvous: published in the channel word while
/// its owner waits.
#[repr(align(8))]
pub(super) struct Slot<T> {
    /// Null while the owner waits awake; the owner's waiter (one reference,
    /// `Arc::into_raw`) once it sleeps; [`DONE`] or [`SHUT`] once complete.
    pub(super) state: AtomicPtr<Waiter>,
    /// The sender's value (in a sender's slot), or where the value goes (in
    /// a receiver's).
    pub(super) value: UnsafeCell<Option<T>>,
}

impl<T> Slot<T> {
    pub(super) fn new(value: Option<T>) -> Self {
        Self {
            state: AtomicPtr::new(ptr::null_mut()),
            value: UnsafeCell::new(value),
        }
    }

    /// The outcome, once complete.
    pub(super) fn outcome(&self) -> Option<Outcome> {
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
    pub(super) unsafe fn complete(slot: *const Self, outcome: Outcome) -> Option<Wakeup> {
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
    pub(super) fn wait(
        &self,
        spins: u32,
        budget: &AtomicU32,
        deadline: Option<Instant>,
    ) -> Option<Outcome> {
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
        // us sleep too, and the next rendezvous wake us in turn. Not in a
        // timed wait, as in the family's `Watch`: the yield that finds out
        // that yields became slow costs a scheduling round, which a timed
        // wait would overshoot its deadline by; it parks with the deadline.
        let yields = if deadline.is_some() { 0 } else { YIELDS };
        #[cfg(not(loom))]
        let start = std::time::Instant::now();
        if yields > 0 {
            // Samples the load if the last sample is old: a waiter that
            // reads `yields_are_slow` without it may act on a verdict from
            // before the machine filled up, and give its core away for a
            // scheduling round.
            sync_core::load::tick();
        }
        for i in 0..yields {
            // A yield is no wait once yields are slow (more runnable
            // threads than CPUs): sleep instead.
            if sync_core::load::yields_are_slow() {
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
        if crate::clock::passed(deadline) {
            // Nothing published: the caller retracts the slot.
            return None;
        }
        // We may park: what this thread keeps for the family's blocking
        // waits goes first (an active monitor's task wakers, see
        // `wake_chain::deliver_before_park`). A partner they run finds our
        // slot offered, as one on another thread would.
        sync_core::wake_chain::before_park();
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
    pub(super) fn poll_wait(
        &self,
        parked: &mut Option<Arc<Waiter>>,
        cx: &mut Context<'_>,
    ) -> Poll<Outcome> {
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
    pub(super) fn await_completion(&self) -> Outcome {
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
    pub(super) fn retract(&self, chan: &Chan) -> Option<Outcome> {
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
pub(super) struct Chan {
    /// [`EMPTY`], [`CLOSED`], a waiting party's `Slot` (untagged), or an
    /// [`Alt`]'s shared part (tagged [`ALT_TAG`]).
    pub(super) word: AtomicPtr<u8>,
    /// The processor each side ([`SENDER`], [`RECEIVER`]) last ran on when
    /// it used the channel (`u32::MAX`: unknown). A hint for the wait.
    pub(super) cpus: [AtomicU32; 2],
    /// The spin budget (see [`MIN_SPINS`]).
    pub(super) budget: AtomicU32,
}

/// A side of the channel, for [`Chan::cpus`].
pub(super) const SENDER: usize = 0;
/// See [`SENDER`].
pub(super) const RECEIVER: usize = 1;

/// What a swap on the word found.
pub(super) enum Found<T> {
    Empty,
    Closed,
    Slot(*const Slot<T>),
    Alt(Arc<AltShared<T>>),
}

impl Chan {
    pub(super) fn found<T>(word: *mut u8) -> Found<T> {
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
    pub(super) fn note_cpu(&self, side: usize) {
        if let Some(cpu) = thread::current_cpu() {
            // Relaxed: a hint.
            self.cpus[side].store(cpu, Relaxed);
        }
    }

    /// How long `side` spins before it yields: not at all if its partner
    /// last ran on this very processor (it cannot run while we spin),
    /// otherwise the channel's budget.
    #[inline]
    pub(super) fn spins(&self, side: usize) -> u32 {
        // Relaxed: hints.
        let partner = self.cpus[1 - side].load(Relaxed);
        match thread::current_cpu() {
            Some(cpu) if cpu == partner => 0,
            _ => self.budget.load(Relaxed).clamp(MIN_SPINS, MAX_SPINS),
        }
    }

    /// Notes the processor `side` runs on and swaps `slot` (the caller's)
    /// into the word: what the swap found. A closed word gets its mark back
    /// at once (nobody else uses the word then).
    pub(super) fn publish<T>(&self, side: usize, slot: &Slot<T>) -> Found<T> {
        self.note_cpu(side);
        let me = ptr::from_ref(slot).cast::<u8>().cast_mut();
        // AcqRel: Release publishes our slot (and a sender's value) to the
        // partner that swaps it out; Acquire makes a waiting partner's slot
        // ours.
        let found = Self::found::<T>(self.word.swap(me, AcqRel));
        if let Found::Closed = found {
            self.word.store(CLOSED, Release);
        }
        found
    }

    /// Whether an end has been dropped.
    pub(super) fn is_closed(&self) -> bool {
        // Acquire: pairs with the closing end's swap in `shut`.
        self.word.load(Acquire) == CLOSED
    }

    /// [`spins`](Self::spins), or none once `deadline` has passed (an
    /// attempt that does not wait).
    #[inline]
    pub(super) fn spins_until(&self, side: usize, deadline: Option<Instant>) -> u32 {
        if crate::clock::passed(deadline) {
            0
        } else {
            self.spins(side)
        }
    }

    /// The channel's identity, as an Alt's claim records it.
    pub(super) fn id(&self) -> usize {
        ptr::from_ref(self).addr()
    }
}

/// Moves the value from a sender's slot into a receiver's.
///
/// # Safety
///
/// The caller has exclusive access to both slots' values.
pub(super) unsafe fn move_value<T>(from: *const Slot<T>, to: *const Slot<T>) {
    // SAFETY: exclusive, by the caller's promise.
    let value = unsafe { (*from).value.with_mut(|v| (*v).take()) };
    debug_assert!(value.is_some(), "a sender's slot holds its value");
    // SAFETY: as above.
    unsafe { (*to).value.with_mut(|v| *v = value) };
}

/// An end is dropped: mark the word closed and complete a waiting
/// partner's slot; returns the partner's wakeup, if it sleeps as a task.
///
/// The partner's waker (a task's) is user code: the caller runs it last,
/// once the channel is closed and the partner's slot complete, under the
/// family's policy (`sync_core::unwind`): its panic goes on out of the
/// drop once everything else the end owns is dropped, unless the thread is
/// already unwinding (a panic out of a drop during unwinding aborts), in
/// which case it is dropped.
#[must_use = "the partner sleeps until it is woken"]
pub(super) fn shut<T>(chan: &Chan) -> Option<Wakeup> {
    // AcqRel: as the swaps in `offer`/`accept`.
    match Chan::found::<T>(chan.word.swap(CLOSED, AcqRel)) {
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
    }
}

/// Takes the value from a sender's slot that the caller took out of the
/// channel word, and completes the slot. The value waits in `stash` (the
/// receiver's, empty) while the sender is woken: if the sender's waker
/// panics, the receiver's next receive returns it, and the sender's future
/// reports it delivered.
pub(super) fn take_from<T>(sender: *const Slot<T>, stash: &mut Option<T>) -> T {
    debug_assert!(stash.is_none(), "a receive with a stashed value");
    // SAFETY: the caller took the slot out of the word: its owner waits for
    // our completion and nobody else touches it.
    *stash = unsafe { (*sender).value.with_mut(|v| (*v).take()) };
    // SAFETY: as above.
    let wakeup = unsafe { Slot::complete(sender, Outcome::Done) };
    // Wakes the sender's task, if it sleeps as one. Its waker's panic goes
    // on with the value still stashed, unless this thread is already
    // unwinding (a receive in a `Drop` during a panic): then the panic is
    // dropped (a second one would abort) and the value returned.
    unwind::drop_resuming_some(wakeup);
    stash.take().expect("a sender's slot holds its value")
}
