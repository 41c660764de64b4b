//! The unlock side's slow paths: after an unlock that finds waiters,
//! dequeuing the oldest one and waking it (with `HANDOFF` or `COMPETE`),
//! passing the `WAKING` role on, and freeing the nodes of waiters that
//! withdrew. See the protocol in [`raw_mutex`](super).

use sync_core::sync::atomic::{Ordering::*, fence};
use sync_core::unwind::Panics;
use sync_core::waiter::Waiter;

use super::{COMPETE, Fairness, HANDOFF, LINKED, LOCKED, ONE, OWED, RawMutex, STARVE, WAKING};
use crate::backlog::Withdrawer;
#[cfg(doc)]
use crate::handover::TIRED_AFTER;
use crate::handover::Tiredness;
#[cfg(doc)]
use crate::patience::IN_FLIGHT_SPINS;
use crate::patience::spin_in_flight;

impl RawMutex {
    /// After a barging unlock that found waiters or `STARVE` (`old`, the
    /// word before it).
    ///
    /// This and the other steps from an unlock to a waiter's wake-up are
    /// `#[inline]` into the unlock's cold entry (`woke_after_unlock` for a
    /// barging unlock, `handed_after_unlock` for a FIFO one): a thread that
    /// unlocks after a long hold runs the path with cold caches, and one
    /// stretch of code reaches the wake-up's system call sooner than a
    /// chain of calls spread over the binary.
    #[inline]
    pub(super) fn unlocked_with_waiters(&self, old: usize, panics: &mut Panics) {
        if old & WAKING != 0 {
            // A woken thread is on its way and will find the lock free (and
            // end a starvation mode nobody else waits in as it takes it).
            return;
        }
        let mut w = self.word.load(Relaxed);
        // Starvation mode with nobody left to hand the lock to (the last
        // waiter was handed the lock and left, or was withdrawn): end it.
        // Relaxed: the bit orders nothing.
        while w < ONE && w & STARVE != 0 {
            match self
                .word
                .compare_exchange_weak(w, w & !STARVE, Relaxed, Relaxed)
            {
                Ok(_) => return,
                Err(actual) => w = actual,
            }
        }
        if old & STARVE != 0 {
            // Starvation mode: take the lock back to hand it to the oldest
            // waiter. Newcomers do not take it meanwhile; if a woken waiter
            // did, its own unlock hands it over.
            while w & (LOCKED | WAKING) == 0 && w & STARVE != 0 && w >= ONE {
                // Acquire: we hold the lock again.
                match self
                    .word
                    .compare_exchange_weak(w, w | LOCKED, Acquire, Relaxed)
                {
                    Ok(_) => return self.unlock_slow(panics),
                    Err(actual) => w = actual,
                }
            }
        }
        // Wake one, unless somebody took the lock meanwhile (its unlock will)
        // or is already waking.
        while w >= ONE && w & (WAKING | LOCKED) == 0 {
            // Acquire: pairs with the Release that ended the previous
            // dequeuer's role, so we see the queue as it left it.
            match self
                .word
                .compare_exchange_weak(w, w | WAKING, Acquire, Relaxed)
            {
                Ok(_) => return self.wake_next(false, panics),
                Err(actual) => w = actual,
            }
        }
    }

    /// The unlock of a lock somebody is counted on (or that a woken thread
    /// is on its way to). Inline: see `unlocked_with_waiters`.
    #[inline]
    pub(super) fn unlock_slow(&self, panics: &mut Panics) {
        let mut w = self.word.load(Relaxed);
        loop {
            debug_assert!(w & LOCKED != 0, "unlock of an unlocked RawMutex");
            if w < ONE || w & WAKING != 0 {
                // Nobody to wake (and so no starvation mode left), or a
                // woken waiter will find the lock free.
                let new = w & !if w < ONE { LOCKED | STARVE } else { LOCKED };
                // Release: pairs with the Acquire of the next lock.
                match self.word.compare_exchange_weak(w, new, Release, Relaxed) {
                    Ok(_) => return,
                    Err(actual) => w = actual,
                }
                continue;
            }
            // Take the dequeuer's role, keeping the lock for now.
            // Acquire: pairs with the Release that ended the previous
            // dequeuer's role, so we see the queue as it left it.
            match self
                .word
                .compare_exchange_weak(w, w | WAKING, Acquire, Relaxed)
            {
                Ok(_) => return self.wake_next(true, panics),
                Err(actual) => w = actual,
            }
        }
    }

    /// Dequeues and notifies a waiter. The caller holds `WAKING`, and holds
    /// the lock if `holding`. Inline: see `unlocked_with_waiters`.
    ///
    /// A waiter counted but half-way through its push (the queue's front
    /// not linked yet) is given [`IN_FLIGHT_SPINS`] more looks, then the
    /// wake-up is left to it (`OWED`, see [`pushed`](Self::pushed)), with
    /// the role, and the lock if we were handing it over.
    #[inline]
    pub(super) fn wake_next(&self, holding: bool, panics: &mut Panics) {
        self.dequeue(holding, panics);
    }

    /// [`wake_next`](Self::wake_next): `true` if it handed the role (and
    /// the lock, if `holding`) to a withdrawing waiter after popping
    /// [`TIRED_AFTER`] withdrawn nodes in a row (see [`crate::handover`]);
    /// the helper then deals with what is left, withdrawals that came
    /// meanwhile included.
    #[inline]
    fn dequeue(&self, mut holding: bool, panics: &mut Panics) -> bool {
        // Whether we announced `OWED` (then looked at the queue again), and
        // the looks given to the waiter half-way through its push.
        let mut announced = false;
        let mut spins = 0;
        let mut tired = Tiredness::new();
        loop {
            let w = self.word.load(Relaxed);
            if w < ONE || (!holding && w & LOCKED != 0) {
                self.handover.rest(&mut tired);
                // Nobody counted (so no starvation mode either: the last
                // node may have been a withdrawn one); or another thread
                // holds the lock, and its unlock will find the count and
                // wake (so nothing is owed any more).
                let drop_bits = WAKING
                    | OWED
                    | LINKED
                    | if holding { LOCKED } else { 0 }
                    | if w < ONE { STARVE } else { 0 };
                // Release: ends our dequeuer role (and our lock).
                if self
                    .word
                    .compare_exchange_weak(w, w & !drop_bits, Release, Relaxed)
                    .is_ok()
                {
                    return false;
                }
                continue;
            }
            // SAFETY: we hold `WAKING`, the dequeuer's role; the previous
            // holder released it (Release) before we acquired it (Acquire).
            let Some(waiter) = (unsafe { self.queue.pop() }) else {
                self.handover.rest(&mut tired);
                // A counted waiter is half-way through its push: running, it
                // links within nanoseconds.
                if spin_in_flight(&mut spins) {
                    continue;
                }
                if !announced {
                    // Relaxed: the fence orders it before our second look
                    // at the queue (the next turn's pop); pairs with the
                    // fence in `pushed`, between the waiter's link and its
                    // look at the word.
                    self.word.fetch_or(OWED, Relaxed);
                    fence(SeqCst);
                    announced = true;
                } else if self.leave_to_pusher(holding) {
                    return false;
                }
                continue;
            };
            if w & (OWED | LINKED) != 0 || announced {
                // We dequeue: nothing is owed. Only the role's holder sets
                // or clears `OWED` (a waiter clears it only as it takes the
                // role, which we hold), and `LINKED` is set only while
                // `OWED` is. Relaxed: our next RMW on the word publishes
                // what we did (and a waiter that reads `OWED` clear parks,
                // to be woken by the next unlock, like any other).
                self.word.fetch_and(!(OWED | LINKED), Relaxed);
                // A later pop that finds a push half-way (after this node,
                // if it was withdrawn) announces afresh: leaving the role
                // without `OWED` set would lose that waiter's wake-up.
                announced = false;
            }
            spins = 0;
            self.backlog.popped(1);
            if waiter.is_cancelled() {
                // A dropped future's node: uncount it and look again,
                // unless a withdrawing waiter takes the role over.
                self.word.fetch_sub(ONE, Relaxed);
                self.backlog.freed(1);
                if self.handover.fruitless(&mut tired) && self.handover.accept(&mut tired, holding)
                {
                    return true;
                }
                continue;
            }
            self.handover.rest(&mut tired);
            if !holding && (waiter.data() != 0 || self.fairness == Fairness::Fifo) {
                // A starving waiter (or any waiter, in FIFO mode) reached the
                // head while the lock is free: take the lock for it rather
                // than let it race newcomers (it would queue at the tail
                // once more).
                holding = self.take_for_handoff();
            }
            // A thread woken to compete keeps `WAKING` until it takes the
            // lock or queues again, so that unlocks meanwhile wake nobody
            // else (no herd). A task runs only when its executor polls it,
            // which may be late or never (a busy executor, a leaked
            // future): it is not handed the role, which we give up now, and
            // the next unlock wakes the next waiter.
            let keep_role = !holding && waiter.is_thread();
            let token = if holding {
                // The lock stays set: it is the waiter's now. Release: the
                // critical section happens before the waiter's (also carried
                // by the notify below).
                self.word.fetch_sub(ONE | WAKING, Release);
                HANDOFF
            } else if keep_role {
                // Keep `WAKING`: the woken thread clears it.
                self.word.fetch_sub(ONE, Release);
                COMPETE
            } else {
                // Release: ends our dequeuer role (pairs with the Acquire of
                // the next unlocker's CAS that sets `WAKING`).
                self.word.fetch_sub(ONE | WAKING, Release);
                COMPETE
            };
            // The token now; the wakeup, a task's waker (user code), last,
            // once the word is consistent: its panic is caught, and goes
            // on (or not) as the caller's `panics` decides.
            if let Some(wakeup) = Waiter::notify_later(&waiter, token) {
                // A task's wakeup nests only a few deep in this thread's
                // other wakeups (a waker that takes the lock and releases
                // it): see `Wakeup::wake`.
                panics.catch(|| wakeup.wake());
                return false;
            }
            // Cancelled between our check and the notify: what the token
            // carried is still ours, and the node goes now.
            self.backlog.freed(1);
            if holding {
                // We hold the lock (but no longer `WAKING`): unlock it again
                // from the start.
                self.unlock_slow(panics);
                return false;
            }
            // A thread's wakeup: we still hold `WAKING` (nobody was woken to
            // clear it). A task's: we gave the role up, so take it again,
            // unless somebody else took it or the lock meanwhile (and will
            // wake).
            if !keep_role && !self.retake_waking() {
                return false;
            }
        }
    }

    /// After a second look at the queue that still found its front half-way
    /// through a push: gives up the role (and the lock, if `holding`),
    /// leaving `OWED` set for that waiter, which takes the role once it has
    /// linked (see [`pushed`](Self::pushed)). `false` if a waiter linked
    /// meanwhile (`LINKED`): look at the queue again instead.
    fn leave_to_pusher(&self, holding: bool) -> bool {
        let mut w = self.word.load(Relaxed);
        loop {
            if w & LINKED != 0 {
                // Acquire: pairs with the Release CAS that set `LINKED`
                // after the waiter's link, so our next pop sees the link.
                self.word.fetch_and(!LINKED, Acquire);
                return false;
            }
            let new = w & !(WAKING | if holding { LOCKED } else { 0 });
            // Release: ends our dequeuer role (pairs with the Acquire CAS
            // of the waiter that takes it in `pushed`) and our lock (the
            // critical section happens before the next holder's).
            match self.word.compare_exchange_weak(w, new, Release, Relaxed) {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
    }

    /// Called by every waiter right after its push: if a dequeuer left the
    /// wake-up to a waiter half-way through its push (`OWED`), takes the
    /// role if nobody holds it and dequeues (wakes or hands the lock to the
    /// oldest waiter, perhaps the caller), or, if a dequeuer holds it, tells
    /// it to look at the queue again (`LINKED`).
    ///
    /// That wake-up may run another waiting task's waker, and this lock
    /// call is the operation that ran it: the waker's panic is returned. A
    /// task's poll resumes it, its request recorded (rule 2 of
    /// `sync_core::unwind`, as the semaphore's queueing acquire does). A
    /// thread's blocking lock drops it (rule 4): `lock_api` takes the lock
    /// back with [`lock`](Self::lock) where the guard lives on (its
    /// `unlocked`, `bump`, as do this crate's guards), so a lock that
    /// unwound there would leave that guard to unlock a lock it does not
    /// hold.
    #[must_use = "the caller resumes or drops a waker's panic (see `pushed`)"]
    pub(super) fn pushed(&self) -> Panics {
        let mut panics = Panics::new();
        // SeqCst: between our link (the push) and our look at the word;
        // pairs with the fence in `wake_next` between a dequeuer's
        // announcement of `OWED` and its second look at the queue. Of the
        // two looks, at least one sees the other side's write.
        fence(SeqCst);
        let mut w = self.word.load(Relaxed);
        while w & OWED != 0 {
            let (new, take) = if w & WAKING == 0 {
                ((w & !(OWED | LINKED)) | WAKING, true)
            } else {
                // A CAS even if `LINKED` is set already: the dequeuer that
                // clears it then reads from our write, so its next pop
                // sees our link.
                (w | LINKED, false)
            };
            // AcqRel: Release publishes our link to the dequeuer that reads
            // `LINKED`; Acquire, if we take the role, pairs with the
            // Release of `leave_to_pusher`, so we see the queue as it left
            // it.
            match self.word.compare_exchange_weak(w, new, AcqRel, Relaxed) {
                Ok(_) => {
                    if take {
                        self.wake_next(false, &mut panics);
                    }
                    return panics;
                }
                Err(actual) => w = actual,
            }
        }
        panics
    }

    /// Takes the dequeuer's role (`WAKING`) if the lock is free, nobody has
    /// the role, and there is something to do with it (a counted waiter to
    /// wake, or a starvation mode to end): `true` if taken. A holder of the
    /// lock or of the role will wake the waiters itself.
    fn retake_waking(&self) -> bool {
        let mut w = self.word.load(Relaxed);
        while w & (WAKING | LOCKED) == 0 && (w >= ONE || w & STARVE != 0) {
            // Acquire: pairs with the Release that ended the previous
            // dequeuer's role, so we see the queue as it left it.
            match self
                .word
                .compare_exchange_weak(w, w | WAKING, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
        false
    }

    /// Called when a task woken to compete gives the wakeup up without
    /// taking the lock or queueing again (its future dropped): does what
    /// the unlock that woke it would have done had it found another waiter,
    /// wakes one if the lock is free and nobody is waking. (A task does not
    /// carry `WAKING`, see [`wake_next`](Self::wake_next).)
    pub(super) fn rewake(&self, panics: &mut Panics) {
        if self.retake_waking() {
            self.wake_next(false, panics);
        }
    }

    /// Takes the lock, if it is free, to hand it to a starving waiter.
    pub(super) fn take_for_handoff(&self) -> bool {
        let mut w = self.word.load(Relaxed);
        while w & LOCKED == 0 {
            // Acquire: the unlock that freed it happens before the handoff.
            match self
                .word
                .compare_exchange_weak(w, w | LOCKED, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
        false
    }

    /// Passes on a `WAKING` this thread holds without the lock (a woken
    /// thread that gave up, a withdrawing waiter that took the role): wakes
    /// another waiter if the lock is free.
    pub(super) fn pass_wake(&self, panics: &mut Panics) {
        self.wake_next(false, panics);
    }

    /// Called after a waiter withdrew (a dropped future, a timed-out
    /// thread). Its node stays in the queue, counted, until a dequeuer
    /// reaches it, and a lock held for long while waits time out would pile
    /// such nodes up. So the withdrawing thread takes the dequeuer's role
    /// (`WAKING`) if nobody has it, frees withdrawn nodes, and passes the
    /// role on as a woken waiter that gives up would (an unlock that came
    /// meanwhile left the waking to us). It frees those at the front of the
    /// queue, up to the first live waiter; and once the withdrawn nodes left
    /// queued are as many as the live waiters the last full sweep kept that
    /// are still queued (`Backlog::sweep_due`), it sweeps the whole queue
    /// (`WaiterQueue::sweep`), freeing those behind live waiters too, so
    /// that each withdrawal pays O(1) amortized. If the role is taken, its
    /// holder either is a reclaimer, which sees the withdrawal and sweeps
    /// again, or will dequeue (wake or hand off) soon; the node is left to
    /// it. What stays queued is then the live waiters, fewer withdrawn ones
    /// than the live waiters the last full sweep kept and still queued
    /// (plus those behind a push in flight), and those withdrawn while a
    /// waker held the role (until the next withdrawal or unlock).
    #[cold]
    pub(super) fn reclaim(&self, who: Withdrawer, panics: &mut Panics) {
        // Announce the withdrawal before looking at the role: either we find
        // `WAKING` free, or its holder finds our announcement when it re-reads
        // `withdrawals` after giving the role up (Dekker: each side writes,
        // fences, then reads what the other wrote).
        // The reclaimer that reads the new count (Acquire, below) sees our
        // node as cancelled (see `Backlog::withdraw`).
        let ticket = self.backlog.withdraw();
        fence(SeqCst);
        loop {
            let mut w = self.word.load(Relaxed);
            // Whether the role came with the lock to hand over (from a
            // dequeuer that was handing it over, see `handover`).
            let holding = loop {
                if w < ONE {
                    // Nothing queued.
                    return;
                }
                if w & WAKING != 0 {
                    // The role's holder will reclaim (or pass) our node;
                    // unless it is tired of popping withdrawn nodes and
                    // hands the role to us.
                    if let Some(holding) = self.handover.offer() {
                        break holding;
                    }
                    // If it is far behind the withdrawals, a dropped
                    // future waits for it to catch up, or for its role,
                    // free or handed over.
                    let mut handed = None;
                    let look_again = self.backlog.let_the_dequeuer_catch_up(who, ticket, || {
                        let w = self.word.load(Relaxed);
                        if w < ONE || w & WAKING == 0 {
                            return true;
                        }
                        handed = self.handover.offer();
                        handed.is_some()
                    });
                    match handed {
                        Some(holding) => break holding,
                        None if look_again => {
                            w = self.word.load(Relaxed);
                            continue;
                        }
                        None => return,
                    }
                }
                // Acquire: pairs with the Release that ended the previous
                // dequeuer's role, so we see the queue as it left it.
                match self
                    .word
                    .compare_exchange_weak(w, w | WAKING, Acquire, Relaxed)
                {
                    Ok(_) => break false,
                    Err(actual) => w = actual,
                }
            };
            // Acquire: pairs with the Release increments, so every
            // withdrawal counted in `seen` shows its node as cancelled.
            let seen = self.backlog.withdrawals();
            // Only the `WAKING` holder writes the backlog's counts of nodes
            // freed and kept, and the role's Release/Acquire handoff (the
            // same edge that orders the queue's pops) orders one holder's
            // writes before the next's.
            let freed = if self.backlog.sweep_due(seen) {
                // As many withdrawn nodes left queued as live waiters the
                // last full sweep kept (and still queued): sweep the whole
                // queue, so that those behind a live waiter are freed too. It costs the queue's
                // length, which those withdrawals pay for (O(1) each,
                // amortized). Live waiters keep their places.
                // SAFETY: we hold `WAKING`, the dequeuer's role; the previous
                // dequeuer released it (Release) before we acquired it
                // (Acquire).
                let swept = unsafe { self.queue.sweep() };
                self.backlog.swept(swept.kept);
                swept.freed
            } else {
                // Frees the withdrawn nodes at the front (stopping at a live
                // one, or behind a push in flight, which the next dequeuer
                // passes).
                // SAFETY: as above.
                let freed = unsafe { self.queue.sweep_front() };
                self.backlog.popped(freed);
                freed
            };
            self.backlog.freed(freed);
            if freed != 0 {
                // Relaxed: the count of queued-not-dequeued waiters drops by
                // the nodes we dequeued; the role's Release (in `dequeue`)
                // publishes the queue as we leave it.
                self.word.fetch_sub(ONE * freed, Relaxed);
            }
            // Pass the role on (as `pass_wake`), or hand the lock over.
            if self.dequeue(holding, panics) {
                // A helper took the role over from us: the withdrawals that
                // came meanwhile left their nodes to it.
                return;
            }
            // A waiter that withdrew while we held the role left its node to
            // us: pairs with the fence in its `reclaim`.
            fence(SeqCst);
            if self.backlog.withdrawals() == seen {
                return;
            }
        }
    }
}
