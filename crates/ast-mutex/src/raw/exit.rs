//! The exits: an exit frees the lock, or keeps it to hand it over, and
//! serves the waiters of the state it names (`unlock`, `serve`); what it
//! publishes for the next exits to read without the table lock (`publish`).

use std::time::Duration;

use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering;
use sync_core::unwind::Panics;
use sync_core::waiter::{Waiter, Wakeup};
use sync_core::wake_list::WakeList;

use crate::config::WakeMode;
use crate::mutex::AstMutex;
use crate::state::AbstractState;
use crate::waiters::Table;

use super::{LOCKED, STATE_BITS, TOKEN_HANDOFF, TOKEN_WAKE};

/// A waiter that this many exits served without the lock (woken to compete,
/// or passed while it was woken and had not taken the lock yet) is handed
/// the lock by the next exit that serves it, in Compete and Broadcast
/// modes (Handoff mode: once one exit has, its wake-up), unless it
/// is pending (woken, and its thread not back yet: not yet scheduled, or
/// its task not yet polled) for less than `PENDING_PATIENCE`, and passed
/// fewer than `HANDOFF_PENDING_AFTER_PASSES` times. A lock handed to a
/// pending waiter idles until that thread gets a CPU, which can take a
/// scheduling round when threads outnumber cores; the report's `ast/bb-*`
/// rows and their `busy/4/` twins measure it. Loom models the same protocol
/// with 2.
const HANDOFF_AFTER_PASSES: u32 = if cfg!(loom) { 2 } else { 32 };

/// A pending waiter that `HANDOFF_AFTER_PASSES` exits have passed is handed
/// the lock anyway once it has been pending this long since the first
/// clock read of `count_pass` after its wake-up (at its
/// `CLOCK_EVERY_PASSES`-th pass): the scheduler is
/// keeping its thread from running while others run, and holding the lock
/// for it is then what makes them wait their turn. It is meant to be
/// longer than a scheduling round on a loaded machine: a patience shorter
/// than the round ends nearly every wake-up there in a lock held for a
/// thread that is not running, the threads that find it held park, and
/// the lock's throughput collapses (the report's `busy/` rows measure it).
const PENDING_PATIENCE: Duration = Duration::from_millis(100);

/// How often `AstMutex::count_pass` reads the clock, in passes.
const CLOCK_EVERY_PASSES: u32 = 32;

/// Of the exits whose state's first in line is woken and has not run yet
/// (so that serving it would only count a pass against it), one in this
/// many takes the table lock and counts them all; the others only free the
/// lock. Loom models the same protocol with 2.
const SERVE_EVERY: u32 = if cfg!(loom) { 2 } else { 32 };
// The per-state skip counts wrap at 256 (`Waiters::skip_exit`).
const _: () = assert!(256 % SERVE_EVERY == 0);

/// A waiter that this many exits served without the lock is handed the
/// lock even while it is pending (and not for `PENDING_PATIENCE` yet), so
/// that a bound holds in exits too, whatever the clock. Loom, which does
/// not model time, models the same protocol with 3.
const HANDOFF_PENDING_AFTER_PASSES: u32 = if cfg!(loom) { 3 } else { 1 << 20 };

/// How many exits may leave a parked first in line parked for a running
/// thread: a watcher that accepts their state (concurrency restriction,
/// and Handoff mode), or a thread that took the lock between the exit's
/// release and its pass-on (`serve_retaken`); the next exit that serves
/// it wakes it, and from then on it counts passes as any woken waiter
/// (Handoff mode: the exit hands it the lock if it was woken before). Loom
/// models the same protocol with 1.
const ROTATE_AFTER_SKIPS: u32 = if cfg!(loom) { 1 } else { 256 };

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// Under the table lock: wakes live node `i`, whose `waiter` was just
    /// taken, to compete, and counts it as passed; returns the wake-up to
    /// deliver once the table lock is released. A cancelled waiter (a timed
    /// one past its deadline, a dropped task) is removed instead: `None`.
    pub(super) fn wake_to_compete(t: &mut Table, i: u32, waiter: &Arc<Waiter>) -> Option<Wakeup> {
        let woken = Waiter::notify_deferred(waiter, TOKEN_WAKE);
        if woken.is_some() {
            t.pass(i, 1);
        } else {
            t.remove_at(i);
        }
        woken
    }

    /// Frees the lock in state `next`; `entered` is the holder's entry state.
    ///
    /// Unless `next` is a due state (its first in line is to be handed the
    /// lock: see `due_and_skip`), one RMW releases the lock. A re-check of the
    /// waiting states then catches a waiter that queued meanwhile (see
    /// `enqueue`), and a waiter that accepts `next` is served without the
    /// lock (`exit_pass`), unless its first in line is woken and has not run
    /// yet (`skip_states`), when serving would only count a pass against
    /// it: then only one exit in `SERVE_EVERY` takes the table lock, and
    /// counts them all. A due state's exit keeps the lock and serves under
    /// the table lock (`unlock_slow`).
    ///
    /// Why the skip cannot strand a waiter: a skip state's first in line
    /// will run, and then watch the word itself or queue again (`enqueue`
    /// publishes, then makes its RMW on the word); or it gives up, and
    /// `abandon` publishes, then makes an RMW on the word and serves the
    /// free lock's state. Either RMW precedes our swap in the word's
    /// modification order, and we read the new skip states after it, or it
    /// follows our swap and reads the lock we freed.
    ///
    /// Why an exit frees the lock before it wakes anyone: a holder that
    /// serves with the lock held keeps it through the table lock and the
    /// serve, and a holder preempted there (more runnable threads than
    /// cores) keeps every running thread out for a scheduling round, and
    /// once one waiter has parked every exit would risk that.
    ///
    /// Why the re-check cannot miss a waiter: while we hold the lock, every
    /// other write to the word is an RMW (`enqueue`'s), so if a waiter's RMW
    /// precedes our swap in the word's modification order, our swap reads
    /// from a release sequence headed by it. Its summary store is sequenced
    /// before its RMW, and our re-check after our swap, so we read that
    /// summary or a later one. If its RMW follows our swap, it reads our
    /// release and, when `next` admits it, does not wait.
    ///
    /// A task's waker that panics panics out of here, after the exit is
    /// complete (dropped if the thread is already unwinding).
    #[inline]
    pub(crate) fn unlock(&self, entered: u32, next: u32) {
        let bit = 1u64 << next;
        // A first look, to keep the lock for a handoff when one is due.
        if self.waiters.due_states(Ordering::Relaxed) & bit != 0 {
            return self.unlock_slow_resume(next);
        }
        // An RMW, not a store, so that it reads from `enqueue`'s RMWs.
        // AcqRel: Release publishes the critical section (pairs with the
        // Acquire CAS in `try_lock_in` and RMW in `enqueue`); Acquire pairs
        // with `enqueue`'s RMW, ordering its summary store before our
        // re-check.
        let held = self.word.swap(next, Ordering::AcqRel);
        debug_assert_eq!(held, LOCKED | entered, "exit from a lock not held");
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            self.exit_pass_resume(next);
        }
    }

    /// The pass-on of an exit that freed the lock in the state of `bit`
    /// (`wake_pass`, or a skip: see `unlock`), then the wakers' panics. Out
    /// of line, and building its `Panics` itself, so that `unlock` stays
    /// small enough to inline into a guard's drop (the report's
    /// `ast/uncontended` row measures an out-of-line drop's cost).
    #[cold]
    fn exit_pass_resume(&self, next: u32) {
        let mut panics = Panics::new();
        self.exit_pass(next, &mut panics);
        panics.resume();
    }

    /// The pass-on of an exit that freed the lock in state `next`: serves
    /// it, as one exit, or (see `unlock`) skips it, or serves it as the
    /// `SERVE_EVERY` exits that skipped.
    fn exit_pass(&self, next: u32, panics: &mut Panics) {
        // Acquire: as `parked_states` in `unlock`.
        let exits = if self.waiters.skip_states(Ordering::Acquire) & (1 << next) != 0 {
            if self.waiters.skip_exit(next) % SERVE_EVERY != SERVE_EVERY - 1 {
                return;
            }
            SERVE_EVERY
        } else {
            1
        };
        self.wake_pass(next, exits, panics);
    }

    #[cold]
    fn unlock_slow_resume(&self, next: u32) {
        let mut panics = Panics::new();
        self.unlock_slow(next, &mut panics);
        panics.resume();
    }

    /// [`unlock`](Self::unlock), keeping wakers' panics in `panics`.
    pub(crate) fn unlock_with(&self, entered: u32, next: u32, panics: &mut Panics) {
        let bit = 1u64 << next;
        if self.waiters.due_states(Ordering::Relaxed) & bit != 0 {
            return self.unlock_slow(next, panics);
        }
        // As in `unlock`.
        let held = self.word.swap(next, Ordering::AcqRel);
        debug_assert_eq!(held, LOCKED | entered, "exit from a lock not held");
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            self.exit_pass(next, panics);
        }
    }

    /// An exit with waiters for `next`: serve them (see `serve`), then wake
    /// the tasks, with the table lock released.
    #[cold]
    fn unlock_slow(&self, next: u32, panics: &mut Panics) {
        let mut wakeups = WakeList::new();
        {
            let mut t = self.table();
            self.serve(&mut t, next, true, 1, &mut wakeups);
            self.publish(&mut t);
        }
        wakeups.wake_all(panics);
    }

    /// Serves the waiters of `state`, under the table lock, when the caller
    /// holds the lock (`held`: an exit, which then gives the lock away or
    /// frees it in `state`) or when it does not (a pass-on, after the lock
    /// was freed in `state`: a handoff takes it with a CAS if it is still
    /// free in `state`, and otherwise leaves it to the exit of whoever took
    /// it, which finds the state due).
    /// `exits`: how many exits the caller stands for (holding the lock, or
    /// having just freed it; more than one when exits skipped the table:
    /// see `unlock`), which count against a woken first in line; 0 for a
    /// pass-on that is not an exit.
    ///
    /// The node that has waited longest among those accepting `state` is
    /// served: handed the lock once `HANDOFF_AFTER_PASSES` exits (Handoff
    /// mode: one) have served it without the lock (and, if it is pending,
    /// once it has been for `PENDING_PATIENCE`, or `HANDOFF_PENDING_AFTER_PASSES`
    /// exits have); otherwise woken to compete (every queued acceptor in
    /// Broadcast mode) and counted as passed. A node that is woken already
    /// (its waiter may be waiting for a CPU) is counted as passed by an
    /// exit, not woken again, and the exit wakes nobody else for it: it is
    /// still first in line, and the exit that finds it passed often enough
    /// hands it the lock through its slot. (A waiter that parks meanwhile
    /// may wake the next one: see `enqueue`.)
    pub(super) fn serve(
        &self,
        t: &mut Table,
        state: u32,
        mut held: bool,
        exits: u32,
        wakeups: &mut WakeList,
    ) {
        let bit = 1u64 << state;
        let mode = self.config.wake_mode;
        while let Some(i) = t.oldest(bit) {
            // Handoff to a running waiter rather than a parked one: while a
            // watcher that accepts the state runs, a parked first in line
            // stays parked (up to `ROTATE_AFTER_SKIPS` times) and the lock
            // is released for the watcher, which takes it without waiting
            // for a wake-up; handing it to the parked one would leave it
            // idle until that thread is scheduled.
            if mode == WakeMode::Handoff
                && t.is_queued_at(i)
                && t.skips(i) < ROTATE_AFTER_SKIPS
                && self.watchers.accept(bit)
            {
                t.skip(i);
                break;
            }
            // A pending first in line (woken, its thread not back yet) is
            // handed the lock only once it has been pending for long (the
            // scheduler keeps it from running): before that the lock would
            // idle until it gets a CPU.
            if Self::handoff_due(mode, t, i) {
                if held {
                    // The notify's (or the slot's) Release publishes this
                    // store and our critical section to the new owner.
                    self.word.store(LOCKED | state, Ordering::Relaxed);
                } else {
                    // Take the free lock for the waiter if the state is
                    // still the one we serve; if someone entered first, its
                    // exit serves instead. Acquire: pairs with the Release
                    // of the exit that freed the word; the notify's Release
                    // hands it on.
                    if self
                        .word
                        .compare_exchange(
                            state,
                            LOCKED | state,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        )
                        .is_err()
                    {
                        return;
                    }
                    held = true;
                }
                let token = TOKEN_HANDOFF | state as usize;
                match t.take_waiter(i) {
                    None => {
                        if t.hand_to_woken(i, token) {
                            return;
                        }
                        // It gave up (see `abandon`): we still hold the
                        // lock; serve the next.
                    }
                    Some(waiter) => {
                        let notified = Waiter::notify_deferred(&waiter, token);
                        t.remove_at(i);
                        if let Some(w) = notified {
                            wakeups.push(w);
                            return;
                        }
                        // Cancelled: we still hold the lock; serve the next.
                    }
                }
            } else if mode == WakeMode::Broadcast {
                for j in t.all(bit) {
                    match t.take_waiter(j) {
                        Some(waiter) => {
                            if let Some(w) = Self::wake_to_compete(t, j, &waiter) {
                                wakeups.push(w);
                            }
                        }
                        None if exits > 0 => Self::count_pass(t, j, exits),
                        None => {}
                    }
                }
                break;
            } else {
                // Concurrency restriction: a parked first in line stays
                // parked while a watcher that accepts the state runs (it
                // takes the lock), up to `ROTATE_AFTER_SKIPS` times.
                let limit = self.config.watchers as usize;
                if limit != 0
                    && t.is_queued_at(i)
                    && t.skips(i) < ROTATE_AFTER_SKIPS
                    && self.watchers.accept(bit)
                {
                    t.skip(i);
                    break;
                }
                match t.take_waiter(i) {
                    Some(waiter) => {
                        // It cannot act on the wake before we release: if it
                        // finds the lock held, it queues again under the
                        // table lock we hold, and then sees the released
                        // word. Cancelled (`None`): serve the next one.
                        if let Some(w) = Self::wake_to_compete(t, i, &waiter) {
                            wakeups.push(w);
                            break;
                        }
                    }
                    None => {
                        if exits > 0 {
                            Self::count_pass(t, i, exits);
                        }
                        break;
                    }
                }
            }
        }
        if held {
            self.release(t, state);
        }
    }

    /// Whether live node `i` is due a handoff: `HANDOFF_AFTER_PASSES` exits
    /// served it without the lock (Handoff mode: one, which woke it), and
    /// it is running or parked again (or pending for too long). Handoff
    /// mode does not hand the lock to a node never woken: the lock would
    /// idle through its wake-up, while running threads could use it.
    #[inline]
    fn handoff_due(mode: WakeMode, t: &Table, i: u32) -> bool {
        Self::handoff_due_if(mode, t, i, t.is_pending_at(i))
    }

    /// [`handoff_due`](Self::handoff_due), with live node `i`'s
    /// `pending` already read.
    #[inline]
    fn handoff_due_if(mode: WakeMode, t: &Table, i: u32, pending: bool) -> bool {
        let after = if mode == WakeMode::Handoff {
            1
        } else {
            HANDOFF_AFTER_PASSES
        };
        t.passes(i) >= after && (!pending || Self::pending_too_long(t, i))
    }

    /// Publishes the waiting states, the due states and the skip states;
    /// under the table lock, after changing the table.
    pub(super) fn publish(&self, t: &mut Table) {
        (t.due, t.skip) = self.due_and_skip(t);
        self.waiters.publish(t);
    }

    /// The states an exit keeps the lock for (`Table::due`) and those
    /// whose exits may skip the table (`Table::skip`), in one walk of the
    /// groups' heads.
    ///
    /// Due: the entry sets of the groups whose first in line is due a
    /// handoff. A superset only makes an exit slower (`serve` decides under
    /// the table lock); a state missing from it makes the exit free the
    /// lock first, and the pass-on that follows then takes the free lock to
    /// hand it over, unless someone entered first, whose exit finds the
    /// state due.
    ///
    /// Skip (see `unlock`): in Compete and Handoff modes, the states whose
    /// first in line only takes passes (`only_passes`). None in Broadcast
    /// mode, whose exits wake every waiter of the state.
    fn due_and_skip(&self, t: &Table) -> (u64, u64) {
        let mode = self.config.wake_mode;
        // The states of the groups whose head only takes passes are
        // candidates: a state is kept if its oldest waiter, among all
        // groups, is such a head.
        let (mut due, mut candidates) = (0, 0);
        for (mask, i) in t.heads() {
            // One read of the hint per head, as `only_passes` below.
            let pending = t.is_pending_at(i);
            if Self::handoff_due_if(mode, t, i, pending) {
                due |= mask;
            } else if mode != WakeMode::Broadcast && pending {
                candidates |= mask;
            }
        }
        let mut skip = 0;
        while candidates != 0 {
            let bit = candidates & candidates.wrapping_neg();
            candidates &= !bit;
            if t.oldest(bit).is_some_and(|i| Self::only_passes(mode, t, i)) {
                skip |= bit;
            }
        }
        (due, skip)
    }

    /// Whether pending node `i` has waited long enough to be handed the
    /// lock: `PENDING_PATIENCE` since its patience began (as `count_pass` found),
    /// or `HANDOFF_PENDING_AFTER_PASSES` passes (loom, which does not model
    /// time, only counts passes).
    #[inline]
    fn pending_too_long(t: &Table, i: u32) -> bool {
        t.passes(i) >= HANDOFF_PENDING_AFTER_PASSES || t.is_overdue(i)
    }

    /// Counts `exits` exits that served woken node `i` without the lock.
    /// Every `CLOCK_EVERY_PASSES`-th pass reads the clock: the first such
    /// read since the node was woken starts its patience, a later one notes
    /// whether it has been pending for `PENDING_PATIENCE` since. A clock
    /// read on every exit (or every wake-up) would lengthen every hold of
    /// the table lock, which the exits of a busy lock queue behind.
    fn count_pass(t: &mut Table, i: u32, exits: u32) {
        let after = t.pass(i, exits);
        let before = after.saturating_sub(exits);
        if before / CLOCK_EVERY_PASSES != after / CLOCK_EVERY_PASSES
            && t.pending_for(i).is_some_and(|d| d >= PENDING_PATIENCE)
        {
            t.set_overdue(i);
        }
    }

    /// Whether an exit that serves live node `i` as first in line would
    /// only count a pass against it (Compete and Handoff modes): it is
    /// woken, has not run since (pending), and is not due a handoff.
    #[inline]
    fn only_passes(mode: WakeMode, t: &Table, i: u32) -> bool {
        t.is_pending_at(i) && !Self::handoff_due_if(mode, t, i, true)
    }

    /// Frees the word in state `next`, under the table lock (`_held` is the
    /// proof): `enqueue` reads the word under the same lock, so it sees
    /// either the held word, and is then queued before we look, or this.
    fn release(&self, _held: &Table, next: u32) {
        // Release: pairs with the Acquire CAS in `try_lock_in` and the
        // Acquire RMW in `enqueue`, publishing the holder's writes.
        self.word.store(next, Ordering::Release);
    }

    /// Under the table lock, after an exit freed the lock in state `next`
    /// (`exits`: as that many exits) and a running thread has taken it
    /// since (a watcher, or a newcomer), and holds it or has left it in
    /// another state: its exit serves the waiters of the state it leaves,
    /// but this exit still counts against `next`'s first in line. A parked
    /// one is left parked for the running thread, as for a running watcher
    /// (`ROTATE_AFTER_SKIPS` times in all: a wake-up now would most likely
    /// find the lock held); after that, and for a woken one, serve it as if
    /// the lock were free, except that a handoff's CAS fails, and the next
    /// exit to `next` makes it, finding the state due. Counting nothing here
    /// let threads that spin on the word, and so retake the lock between an
    /// exit's swap and its table lock, keep a parked first in line from
    /// ever being served.
    fn serve_retaken(&self, t: &mut Table, next: u32, exits: u32, wakeups: &mut WakeList) {
        let Some(i) = t.oldest(1 << next) else {
            return;
        };
        if t.is_queued_at(i) && t.skips(i) < ROTATE_AFTER_SKIPS {
            t.skip(i);
        } else {
            self.serve(t, next, false, exits, wakeups);
        }
    }

    /// After an exit released the lock in state `freed` and then found a
    /// waiter for it (`exits`: as that many exits): while the lock is free
    /// in that state, serve its waiters; if a thread has taken it since
    /// (and perhaps freed it again, in another state, whose exit serves
    /// that one), `serve_retaken`.
    #[cold]
    fn wake_pass(&self, freed: u32, exits: u32, panics: &mut Panics) {
        let mut wakeups = WakeList::new();
        {
            let mut t = self.table();
            let w = self.word.load(Ordering::Relaxed);
            if w & LOCKED != 0 || w & STATE_BITS != freed {
                self.serve_retaken(&mut t, freed, exits, &mut wakeups);
            } else {
                self.serve(&mut t, freed, false, exits, &mut wakeups);
            }
            self.publish(&mut t);
        }
        wakeups.wake_all(panics);
    }
}
