//! The protocol of an [`AstMutex`]: the lock word, the slow paths of an
//! entry (watch, queue, park; a task's poll), and the exits that serve the
//! waiters. The public API is in `mutex.rs`, the waiter table in
//! `waiters.rs`, the watcher slots in `watchers.rs`.

use core::task::{Context, Poll};
use std::time::{Duration, Instant};

use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering;
use sync_core::unwind::Panics;
use sync_core::wait::{Next, WaitPolicy, Watch};
use sync_core::waiter::{Token, Waiter, Wakeup};
use sync_core::wake_list::WakeList;

use crate::config::WakeMode;
use crate::future::Wait;
use crate::mutex::{AstMutex, state_index};
use crate::state::AbstractState;
use crate::waiters::{Handle, Slot, Table};
use crate::watchers::MAX_WATCHERS;

/// Bits 0-5 of the lock word: the abstract state's index. While the lock is
/// held they keep the state the holder entered in.
pub(crate) const STATE_BITS: u32 = 0x3f;
/// Bit 6: the lock is held; the abstract state is "null" (paper, 2.1 step 3).
pub(crate) const LOCKED: u32 = 1 << 6;
/// Bit 7: free in the state the constructor was given, not yet written as
/// its index (a `const fn` cannot call [`AbstractState::index`]). The first
/// operation that reads it writes the index instead ([`AstMutex::resolve`]);
/// it is never set again.
pub(crate) const UNRESOLVED: u32 = 1 << 7;

/// The waiter token of a waiter woken to compete for the lock.
const TOKEN_WAKE: Token = 1;
/// The waiter token of a waiter handed the lock: `TOKEN_HANDOFF | state`.
const TOKEN_HANDOFF: Token = 1 << 8;

/// A waiter that this many exits served without the lock (woken to compete,
/// or passed while it was woken and had not taken the lock yet) is handed
/// the lock by the next exit that serves it, in every wake mode, unless it
/// is pending (woken, and its thread not back yet: not yet scheduled, or
/// its task not yet polled) for less than `PENDING_PATIENCE`, and passed
/// fewer than `HANDOFF_PENDING_AFTER_PASSES` times. A lock handed to a
/// pending waiter idles until that thread gets a CPU, which can take a
/// scheduling round when threads outnumber cores; the report's `ast/bb-*`
/// rows and their `busy/4/` twins measure it. Loom models the same protocol
/// with 2.
const HANDOFF_AFTER_PASSES: u32 = if cfg!(loom) { 2 } else { 32 };

/// A pending waiter that `HANDOFF_AFTER_PASSES` exits have passed is handed
/// the lock anyway once it has been pending this long: the scheduler is
/// keeping its thread from running while others run, and holding the lock
/// for it is then what makes them wait their turn. Longer than a scheduling
/// round on a loaded machine (up to 94 ms here beside 50 busy threads):
/// with 1 ms, and 1,024 passes below, nearly every wake-up there ended in a
/// lock held for a thread that was not running, the threads that found it
/// held parked, and the lock's throughput beside 50 busy threads fell to
/// 2-5% of `std::sync::Mutex`'s after the first 100 ms.
const PENDING_PATIENCE: Duration = Duration::from_millis(100);

/// How often `AstMutex::count_pass` reads the clock, in passes.
const CLOCK_EVERY_PASSES: u32 = 32;

/// Of the exits whose state's first in line is woken and has not run yet
/// (so that serving it would only count a pass against it), one in this
/// many takes the table lock and counts them all; the others only free the
/// lock. Loom models the same protocol with 2.
const SERVE_EVERY: u32 = if cfg!(loom) { 2 } else { 32 };

/// A waiter that this many exits served without the lock is handed the
/// lock even while it is pending (and not for `PENDING_PATIENCE` yet), so
/// that a bound holds in exits too, whatever the clock. Loom, which does
/// not model time, models the same protocol with 3.
const HANDOFF_PENDING_AFTER_PASSES: u32 = if cfg!(loom) { 3 } else { 1 << 20 };

/// How many exits may leave a parked first in line parked because a
/// watcher that accepts their state is running (concurrency restriction,
/// and Handoff mode); the next exit that serves it wakes it, and from then
/// on it counts passes as any woken waiter (Handoff mode: hands it the
/// lock). Loom models the same protocol with 1.
const ROTATE_AFTER_SKIPS: u32 = if cfg!(loom) { 1 } else { 256 };

/// How many woken acceptors of the free lock's state may be pending (woken
/// and not back yet) before a waiter that parks stops waking more of them
/// (see `AstMutex::enqueue`). One woken waiter suffices while the CPUs are
/// free; when threads outnumber cores a woken thread can wait a scheduling
/// round for a CPU, and a few more of them, each runnable, keep the lock
/// from idling meanwhile.
const PENDING_WAKES: usize = 4;

/// How long a cancelled waiter waits for the table lock to remove its node
/// before it leaves the node to the next holder (see `AstMutex::dequeue`):
/// far longer than any hold by a running thread, far shorter than a
/// scheduling round.
const LEAVE_PATIENCE: Duration = Duration::from_micros(100);

/// Whether a waiter with `policy` watches the word (spins, yields, or never
/// parks) rather than parking after one look.
#[inline]
fn watches(policy: WaitPolicy) -> bool {
    policy.spin_count() > 0 || policy.yield_count() > 0 || !policy.parks()
}

#[inline]
fn enterable(word: u32, mask: u64) -> bool {
    word & (LOCKED | UNRESOLVED) == 0 && (mask >> (word & STATE_BITS)) & 1 != 0
}

/// Whether `deadline` has passed. Always `false` under loom, whose models
/// must not depend on the clock: there a timeout is the nondeterministic
/// early return of a timed park.
#[inline]
fn past(deadline: Option<Instant>) -> bool {
    !cfg!(loom) && deadline.is_some_and(|d| Instant::now() >= d)
}

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// Replaces `UNRESOLVED` by the index of `initial`; returns the word.
    #[cold]
    pub(crate) fn resolve(&self) -> u32 {
        let i = state_index(self.initial);
        // Relaxed: the two words mean the same state, and nothing is
        // published; the winner of a race writes what the loser would have.
        match self
            .word
            .compare_exchange(UNRESOLVED, i, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => i,
            Err(now) => now,
        }
    }

    /// Takes the lock if the word is enterable for `mask`; returns the
    /// state entered in.
    #[inline]
    pub(crate) fn try_lock_in(&self, mask: u64) -> Option<u32> {
        let mut w = self.word.load(Ordering::Relaxed);
        loop {
            if !enterable(w, mask) {
                if w & UNRESOLVED == 0 {
                    return None;
                }
                w = self.resolve();
                continue;
            }
            // Acquire: pairs with the Release of the exit that freed the word
            // (the swap in `unlock` or the store in `release`).
            match self.word.compare_exchange_weak(
                w,
                w | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(w & STATE_BITS),
                Err(now) => w = now,
            }
        }
    }

    /// Watches the word, then waits in the group of `mask` until entered,
    /// handed the lock, or past `deadline`.
    #[cold]
    pub(crate) fn lock_slow(&self, mask: u64, deadline: Option<Instant>) -> Option<u32> {
        let mut place = Place::default();
        // Woken to compete and not queued since: our node is woken, and a
        // give-up passes the wake on.
        let mut woken = false;
        let limit = self.config.watchers as usize;
        loop {
            // Concurrency restriction: a thread watches (as the policy
            // says) with a watcher slot, or when woken (it is first in line,
            // and exits count against it); any other parks after one look
            // at the word. Without restriction, a Handoff waiter whose
            // policy watches still takes a slot if one is free, to show
            // exits that it is running (see `serve`); it watches either
            // way. One that parks after one look is not running for long.
            let slot = match (limit, self.config.wake_mode) {
                (0, WakeMode::Handoff) if watches(self.config.wait) => {
                    self.watchers.claim(mask, MAX_WATCHERS)
                }
                (0, _) => None,
                _ => self.watchers.claim(mask, limit),
            };
            let policy = if limit == 0 || slot.is_some() || place.node.is_some() {
                self.config.wait
            } else {
                WaitPolicy::block()
            };
            let entered = self.watch(mask, deadline, &mut place, policy);
            if let Some(i) = slot {
                self.watchers.give_back(i);
            }
            if entered.is_some() {
                return entered;
            }
            // Under loom, where time is not modelled, a timed waiter's timer
            // has fired by the time it was woken (as `Waiter::wait_until`
            // models it), or by the end of a watch with a watcher slot, so
            // the give-ups after a wake and after a watch are explored.
            if past(deadline) || (cfg!(loom) && deadline.is_some() && (woken || slot.is_some())) {
                let mut panics = Panics::new();
                // Handed the lock while we gave up: it is ours.
                let handed = self.abandon(&mut place, &mut panics);
                if handed.is_none() && slot.is_some() {
                    // An exit may have left its waiters parked for us.
                    self.wake_pass(0, &mut panics);
                }
                panics.resume();
                return handed;
            }
            woken = false;
            let waiter = Waiter::for_thread(0);
            // A watcher that gives up passes on what exits left to it (see
            // above), under the table lock: it waits for the table lock.
            let patience = if slot.is_none() { deadline } else { None };
            match self.enqueue(mask, &mut place, &waiter, patience) {
                Enqueued::Queued(ahead) => {
                    if let Some(w) = ahead {
                        // A thread's unpark: no user code runs.
                        w.wake();
                    }
                }
                Enqueued::Enterable => continue,
                Enqueued::Handed(s) => return Some(s),
                Enqueued::TimedOut => return None,
            }
            let token = match deadline {
                None => waiter.wait(false),
                // A notify that wins the race with the timeout is returned:
                // what it carried (the lock) is ours.
                Some(deadline) => match waiter.wait_until(false, deadline) {
                    Some(token) => token,
                    None => {
                        // Cancelled: leave the queue (an exit may have
                        // removed the node already).
                        self.dequeue(&mut place);
                        return None;
                    }
                },
            };
            if token & TOKEN_HANDOFF != 0 {
                // The exit removed our node.
                place.node = None;
                return Some(token as u32 & STATE_BITS);
            }
            // Woken to compete: our node stays, woken; watch again (once, if
            // past the deadline).
            if let Some(slot) = &place.slot {
                slot.mark_back();
                self.waiters.unskip(mask);
            }
            woken = true;
        }
    }

    /// Watches the lock word for a state of `mask`, taking the lock if one
    /// comes, as the configuration's [`WaitPolicy`] says (by default
    /// `spins` reads with a spin hint between them, then `yields` reads
    /// each after a yield), checking `deadline` throughout (the
    /// [`Watch`] reads the clock every 16 spins and before every yield).
    /// A woken waiter also watches its slot, where an exit may hand it the
    /// lock. Returns the state entered in, with the waiter's node gone.
    #[inline]
    fn watch(
        &self,
        mask: u64,
        deadline: Option<Instant>,
        place: &mut Place,
        policy: WaitPolicy,
    ) -> Option<u32> {
        // Under loom every spin and yield is a scheduling point: one read
        // after one spin explores a waiter that finds its state while
        // watching, without multiplying the paths.
        let policy = if cfg!(loom) {
            WaitPolicy::spin_then_block(policy.spin_count().min(1))
        } else {
            policy
        };
        let mut watch = Watch::new(policy);
        loop {
            if let Some(s) = place.take_handed() {
                return Some(s);
            }
            if let Some(s) = self.try_lock_in(mask) {
                self.leave(place);
                return Some(s);
            }
            match watch.pause(deadline) {
                Next::Poll => {}
                Next::Park | Next::TimedOut => return None,
            }
        }
    }

    /// Queues `waiter` for `mask` unless the word admits `mask`: a waiter
    /// without a node gets one at the end of its group (with a new ticket);
    /// a woken one is queued again in its place.
    ///
    /// In Compete mode, a waiter (thread or task) that queues while the lock
    /// is free in a state whose first in line is pending (woken to compete,
    /// its thread not running yet) may be the last running thread that
    /// could have taken the lock: after it parks, the lock idles until the
    /// scheduler runs the woken one, which can take a scheduling round when
    /// threads outnumber cores. So, unless a watcher that accepts the state
    /// is running, it wakes the next queued acceptor of that state as well,
    /// if that is a thread (an unpark runs no user code) and fewer than
    /// `PENDING_WAKES` acceptors ahead of it are pending; `Queued` carries
    /// the wake-up, to deliver once the table lock is released.
    ///
    /// A waiter not queued yet that has a `deadline` does not wait for the
    /// table lock past it (`TimedOut`): the lock's holder may be preempted
    /// for a scheduling round.
    pub(crate) fn enqueue(
        &self,
        mask: u64,
        place: &mut Place,
        waiter: &Arc<Waiter>,
        deadline: Option<Instant>,
    ) -> Enqueued {
        let mut t = match deadline {
            Some(d) if place.node.is_none() => match self.waiters.lock_until(d) {
                Some(t) => t,
                None => return Enqueued::TimedOut,
            },
            _ => self.waiters.lock(),
        };
        let fresh = match place.node {
            Some(h) => {
                // Handoffs to a woken node happen under the table lock.
                if let Some(s) = place.take_handed() {
                    return Enqueued::Handed(s);
                }
                t.requeue(h, Arc::clone(waiter));
                false
            }
            None => {
                let slot = Arc::clone(place.slot.get_or_insert_with(Slot::new));
                place.node = Some(t.insert(mask, slot, Arc::clone(waiter)));
                true
            }
        };
        // Queue ourselves and publish our states first, then read the word
        // with an RMW that changes nothing. An exit whose release comes
        // after this RMW in the word's modification order reads the summary
        // after its own RMW, which reads from ours: it sees our states and
        // serves us (or takes the table lock, and finds us queued). An exit
        // whose release came before it left the word enterable, and we see
        // that here.
        self.publish(&mut t);
        // AcqRel: Acquire pairs with the Release of the exit that freed the
        // word; Release carries the summary store to that exit's re-check.
        let w = self.word.fetch_or(0, Ordering::AcqRel);
        if enterable(w, mask) || w & UNRESOLVED != 0 {
            // Nobody served the node: exits serve under the table lock we
            // hold. A new node leaves; a woken one stays woken, in its place.
            let h = place.node.expect("queued above");
            if fresh {
                t.remove(h);
                place.node = None;
            } else {
                drop(t.unqueue(h));
            }
            self.publish(&mut t);
            return Enqueued::Enterable;
        }
        let ahead = if w & LOCKED == 0 {
            let ahead = self.wake_ahead(&mut t, 1 << (w & STATE_BITS));
            // A cancelled waiter it found may have left.
            self.publish(&mut t);
            ahead
        } else {
            None
        };
        Enqueued::Queued(ahead)
    }

    /// Under the table lock, when the lock is free in the state of `bit`:
    /// if its first in line is pending and no watcher that accepts the state
    /// is running, wakes the next queued thread that accepts it to compete
    /// (see `enqueue`), and returns the wake-up.
    fn wake_ahead(&self, t: &mut Table, bit: u64) -> Option<Wakeup> {
        // Handoff mode does not leave woken waiters in line, and Broadcast
        // mode has woken every acceptor already.
        if self.config.wake_mode != WakeMode::Compete {
            return None;
        }
        let first = t.oldest(bit)?;
        if !t.is_pending_at(first) || self.watchers.accept(bit) {
            // Queued: the exit that freed the lock serves it (it is waiting
            // for the table lock we hold), or a running watcher takes the
            // lock. Back: it is running. A watcher that accepts the state
            // is running too (concurrency restriction: it takes the lock).
            return None;
        }
        let j = t.next_to_wake(bit, PENDING_WAKES)?;
        if !t.is_thread_at(j) {
            return None;
        }
        let waiter = t
            .take_waiter(j)
            .expect("next_to_wake returns a queued node");
        Self::wake_to_compete(t, j, &waiter)
    }

    /// Under the table lock: wakes live node `i`, whose `waiter` was just
    /// taken, to compete, and counts it as passed; returns the wake-up to
    /// deliver once the table lock is released. A cancelled waiter (a timed
    /// one past its deadline, a dropped task) is removed instead: `None`.
    fn wake_to_compete(t: &mut Table, i: u32, waiter: &Arc<Waiter>) -> Option<Wakeup> {
        let woken = Waiter::notify_deferred(waiter, TOKEN_WAKE);
        if woken.is_some() {
            t.pass(i, 1);
        } else {
            t.remove_at(i);
        }
        woken
    }

    /// Removes the node of a waiter whose `Waiter` was cancelled (an exit
    /// may have removed it already, on finding it cancelled). If the table
    /// lock stays held for `LEAVE_PATIENCE` (its holder preempted, which
    /// can last a scheduling round when threads outnumber cores), leaves
    /// the node to the next holder instead (`Waiters::leave_later`), so that
    /// a timed wait returns on time and a dropped future's `drop` does not
    /// wait for another thread to be scheduled.
    pub(crate) fn dequeue(&self, place: &mut Place) {
        let Some(h) = place.node.take() else {
            return;
        };
        match self.waiters.lock_until(Instant::now() + LEAVE_PATIENCE) {
            Some(mut t) => {
                if t.remove(h) {
                    self.publish(&mut t);
                }
            }
            None => self.waiters.leave_later(),
        }
    }

    /// Removes the node of a woken waiter that has just taken the lock.
    fn leave(&self, place: &mut Place) {
        let Some(h) = place.node.take() else {
            return;
        };
        let mut t = self.waiters.lock();
        // Nobody hands the lock to a waiter that took it by itself: the word
        // has been held by us since.
        let removed = t.remove(h);
        debug_assert!(
            removed,
            "a woken node is removed only by its waiter or a handoff"
        );
        self.publish(&mut t);
    }

    /// A woken (or never queued) waiter gives up: removes its node and, if
    /// it was woken, passes the wake-up on, since exits served it rather
    /// than wake anyone else. Returns the state of a lock handed to it
    /// meanwhile, which it then owns. Wakers' panics go to `panics`.
    fn abandon(&self, place: &mut Place, panics: &mut Panics) -> Option<u32> {
        let h = place.node.take()?;
        let mut wakeups = WakeList::new();
        {
            let mut t = self.waiters.lock();
            // Under the table lock, under which handoffs are made.
            if let Some(s) = place.take_handed() {
                return Some(s);
            }
            let woken = t.is_woken(h);
            t.remove(h);
            if woken {
                // We may have been a state's first in line that exits
                // skipped (`skip_states`): they freed the lock and served
                // no one. Publish, then read the word with an RMW that
                // changes nothing: an exit whose swap follows it reads the
                // new skip states (see `unlock`); one whose swap precedes
                // it left the lock free, and we serve its state here.
                self.publish(&mut t);
                // AcqRel: Release carries the publication to that exit;
                // Acquire pairs with the exit's swap.
                let w = self.word.fetch_or(0, Ordering::AcqRel);
                if w & (LOCKED | UNRESOLVED) == 0 {
                    self.serve(&mut t, w & STATE_BITS, false, 0, &mut wakeups);
                }
            }
            self.publish(&mut t);
        }
        wakeups.wake_all(panics);
        None
    }

    /// A task's wait: `Ready(state)` once it holds the lock, entered in
    /// `state`.
    pub(crate) fn poll_enter(&self, wait: &mut Wait, cx: &mut Context<'_>) -> Poll<u32> {
        loop {
            if let Some(waiter) = &wait.waiter {
                match waiter.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(token) => {
                        wait.waiter = None;
                        if token & TOKEN_HANDOFF != 0 {
                            // The exit removed our node.
                            wait.place.node = None;
                            wait.place.slot = None;
                            return Poll::Ready(token as u32 & STATE_BITS);
                        }
                        // Woken to compete: our node stays, woken.
                        if let Some(slot) = &wait.place.slot {
                            slot.mark_back();
                            self.waiters.unskip(wait.mask);
                        }
                    }
                }
            }
            if let Some(s) = wait.place.take_handed() {
                return Poll::Ready(s);
            }
            if let Some(s) = self.try_lock_in(wait.mask) {
                self.leave(&mut wait.place);
                return Poll::Ready(s);
            }
            let waiter = Waiter::for_task(cx.waker(), 0);
            match self.enqueue(wait.mask, &mut wait.place, &waiter, None) {
                Enqueued::Queued(ahead) => {
                    if let Some(w) = ahead {
                        // A thread's unpark: no user code runs.
                        w.wake();
                    }
                    // A notify from now on wakes the waker registered above.
                    wait.waiter = Some(waiter);
                    return Poll::Pending;
                }
                Enqueued::Enterable => {}
                Enqueued::Handed(s) => return Poll::Ready(s),
                Enqueued::TimedOut => unreachable!("a task's enqueue has no deadline"),
            }
        }
    }

    /// A task's wait dropped before it returned a guard: leave the queue,
    /// or pass on the lock or the wake-up it was given. A waker that panics
    /// (dropped here, or woken by the pass-on) panics out of the drop once
    /// the mutex is consistent, unless the thread is already unwinding.
    pub(crate) fn cancel_wait(&self, wait: &mut Wait) {
        let mut panics = Panics::new();
        if let Some(waiter) = wait.waiter.take() {
            // A withdrawn waiter drops its waker: user code. If that panics,
            // the withdrawal itself was done (`Ok`), and the panic waits in
            // `panics` until the dequeue below is done too.
            match waiter.cancel_catching(&mut panics) {
                Ok(()) => {
                    self.dequeue(&mut wait.place);
                    return panics.resume();
                }
                Err(token) if token & TOKEN_HANDOFF != 0 => {
                    // Handed the lock (the exit removed our node): release
                    // it in the state it was handed in.
                    wait.place.node = None;
                    let s = token as u32 & STATE_BITS;
                    self.unlock_with(s, s, &mut panics);
                    return panics.resume();
                }
                // Woken to compete: our node is woken.
                Err(_) => {}
            }
        }
        if let Some(s) = self.abandon(&mut wait.place, &mut panics) {
            // Handed the lock while woken: release it as it was handed.
            self.unlock_with(s, s, &mut panics);
        }
        panics.resume();
    }

    /// Frees the lock in state `next`; `entered` is the holder's entry state.
    ///
    /// Unless `next` is a due state (its first in line is to be handed the
    /// lock: see `due`), one RMW releases the lock. A re-check of the
    /// waiting states then catches a waiter that queued meanwhile (see
    /// `enqueue`), and a waiter that accepts `next` is served with the lock
    /// free (`wake_pass`), unless its first in line is woken and has not run
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
    /// cores) keeps every running thread out for a scheduling round. With
    /// 50 busy threads that made every exit slow once one waiter had
    /// parked, and the lock's throughput fell 20-50 times below
    /// `std::sync::Mutex`'s after the first 100 ms.
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
            self.exit_pass_resume(bit);
        }
    }

    /// The pass-on of an exit that freed the lock in the state of `bit`
    /// (`wake_pass`, or a skip: see `unlock`), then the wakers' panics. Out
    /// of line, and building its `Panics` itself, so that `unlock` stays
    /// small enough to inline into a guard's drop: an out-of-line drop cost
    /// the uncontended row 40% (5.6 to 8 ns).
    #[cold]
    fn exit_pass_resume(&self, bit: u64) {
        let mut panics = Panics::new();
        self.exit_pass(bit, &mut panics);
        panics.resume();
    }

    /// The pass-on of an exit that freed the lock in the state of `bit`:
    /// serves it, as one exit, or (see `unlock`) skips it, or serves it as
    /// the `SERVE_EVERY` exits that skipped.
    fn exit_pass(&self, bit: u64, panics: &mut Panics) {
        // Acquire: as `parked_states` in `unlock`.
        let exits = if self.waiters.skip_states(Ordering::Acquire) & bit != 0 {
            if self.waiters.skip_exit() % SERVE_EVERY != SERVE_EVERY - 1 {
                return;
            }
            SERVE_EVERY
        } else {
            1
        };
        self.wake_pass(exits, panics);
    }

    #[cold]
    fn unlock_slow_resume(&self, next: u32) {
        let mut panics = Panics::new();
        self.unlock_slow(next, &mut panics);
        panics.resume();
    }

    /// [`unlock`](Self::unlock), keeping wakers' panics in `panics`.
    fn unlock_with(&self, entered: u32, next: u32, panics: &mut Panics) {
        let bit = 1u64 << next;
        if self.waiters.due_states(Ordering::Relaxed) & bit != 0 {
            return self.unlock_slow(next, panics);
        }
        // As in `unlock`.
        let held = self.word.swap(next, Ordering::AcqRel);
        debug_assert_eq!(held, LOCKED | entered, "exit from a lock not held");
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            self.exit_pass(bit, panics);
        }
    }

    /// An exit with waiters for `next`: serve them (see `serve`), then wake
    /// the tasks, with the table lock released.
    #[cold]
    fn unlock_slow(&self, next: u32, panics: &mut Panics) {
        let mut wakeups = WakeList::new();
        {
            let mut t = self.waiters.lock();
            self.serve(&mut t, next, true, 1, &mut wakeups);
            self.publish(&mut t);
        }
        wakeups.wake_all(panics);
    }

    /// Serves the waiters of `state`, under the table lock, when the caller
    /// holds the lock (`held`: an exit, which then gives the lock away or
    /// frees it in `state`) or when the lock is free in `state` (a pass-on,
    /// which takes it with a CAS to hand it over, and otherwise leaves it).
    /// `exits`: how many exits the caller stands for (holding the lock, or
    /// having just freed it; more than one when exits skipped the table:
    /// see `unlock`), which count against a woken first in line; 0 for a
    /// pass-on that is not an exit.
    ///
    /// The node that has waited longest among those accepting `state` is
    /// served: handed the lock in Handoff mode, or once `HANDOFF_AFTER_PASSES`
    /// exits have served it without the lock (and, if it is pending, once
    /// it has been for `PENDING_PATIENCE`, or `HANDOFF_PENDING_AFTER_PASSES`
    /// exits have); otherwise woken to compete (every queued acceptor in
    /// Broadcast mode) and counted as passed. A node that is woken already
    /// (its waiter may be waiting for a CPU) is counted as passed by an
    /// exit, not woken again, and the exit wakes nobody else for it: it is
    /// still first in line, and the exit that finds it passed often enough
    /// hands it the lock through its slot. (A waiter that parks meanwhile
    /// may wake the next one: see `enqueue`.)
    fn serve(&self, t: &mut Table, state: u32, mut held: bool, exits: u32, wakeups: &mut WakeList) {
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
            if mode == WakeMode::Handoff || Self::handoff_due(t, i) {
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
                        t.hand_to_woken(i, token);
                        return;
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

    /// Whether live node `i` is due a handoff in Compete and Broadcast
    /// modes: `HANDOFF_AFTER_PASSES` exits served it without the lock, and
    /// it is running (or pending for too long).
    fn handoff_due(t: &Table, i: u32) -> bool {
        t.passes(i) >= HANDOFF_AFTER_PASSES && (!t.is_pending_at(i) || Self::pending_too_long(t, i))
    }

    /// The states an exit keeps the lock for (`Table::due`, published
    /// beside the waiting states): every state a waiter accepts in Handoff
    /// mode; otherwise the entry sets of the groups whose first in line is
    /// due a handoff. A superset only makes an exit slower (`serve` decides
    /// under the table lock); a state missing from it makes the exit free
    /// the lock first, and the pass-on that follows then takes the free
    /// lock to hand it over, unless someone entered first, whose exit finds
    /// the state due.
    fn due(&self, t: &Table) -> u64 {
        if self.config.wake_mode == WakeMode::Handoff {
            return t.summary();
        }
        t.heads()
            .filter(|&(_, i)| Self::handoff_due(t, i))
            .fold(0, |due, (mask, _)| due | mask)
    }

    /// Publishes the waiting states, the due states and the skip states;
    /// under the table lock, after changing the table.
    fn publish(&self, t: &mut Table) {
        t.due = self.due(t);
        t.skip = self.skip(t);
        self.waiters.publish(t);
    }

    /// Whether pending node `i` has waited long enough to be handed the
    /// lock: `PENDING_PATIENCE` since it was woken (as `count_pass` found),
    /// or `HANDOFF_PENDING_AFTER_PASSES` passes (loom, which does not model
    /// time, only counts passes).
    fn pending_too_long(t: &Table, i: u32) -> bool {
        t.passes(i) >= HANDOFF_PENDING_AFTER_PASSES || t.is_overdue(i)
    }

    /// Counts `exits` exits that served woken node `i` without the lock.
    /// Every `CLOCK_EVERY_PASSES`-th pass reads the clock, to note whether
    /// the node has been woken for `PENDING_PATIENCE`: a clock read on
    /// every exit, under the table lock, lengthened the table lock's hold
    /// enough to halve the lock's throughput beside 50 busy threads.
    fn count_pass(t: &mut Table, i: u32, exits: u32) {
        let after = t.pass(i, exits);
        let before = after.saturating_sub(exits);
        if before / CLOCK_EVERY_PASSES != after / CLOCK_EVERY_PASSES
            && t.woken_for(i).is_some_and(|d| d >= PENDING_PATIENCE)
        {
            t.set_overdue(i);
        }
    }

    /// Whether an exit that serves live node `i` as first in line would
    /// only count a pass against it (Compete mode): it is woken, has not
    /// run since (pending), and is not due a handoff.
    fn only_passes(t: &Table, i: u32) -> bool {
        t.is_pending_at(i) && !Self::handoff_due(t, i)
    }

    /// The states whose exits may skip the table (`Table::skip`, published
    /// beside the waiting states; see `unlock`): in Compete mode, those
    /// whose first in line only takes passes (`only_passes`). None in the
    /// other modes, whose exits do more (hand the lock over, or wake every
    /// waiter of the state).
    fn skip(&self, t: &Table) -> u64 {
        if self.config.wake_mode != WakeMode::Compete {
            return 0;
        }
        // The states of the groups whose head only takes passes; a state is
        // kept if its oldest waiter, among all groups, is such a head.
        let mut candidates = t
            .heads()
            .filter(|&(_, i)| Self::only_passes(t, i))
            .fold(0, |m, (mask, _)| m | mask);
        let mut skip = 0;
        while candidates != 0 {
            let bit = candidates & candidates.wrapping_neg();
            candidates &= !bit;
            if t.oldest(bit).is_some_and(|i| Self::only_passes(t, i)) {
                skip |= bit;
            }
        }
        skip
    }

    /// Frees the word in state `next`, under the table lock (`_held` is the
    /// proof): `enqueue` reads the word under the same lock, so it sees
    /// either the held word, and is then queued before we look, or this.
    fn release(&self, _held: &Table, next: u32) {
        // Release: pairs with the Acquire CAS in `try_lock_in` and the
        // Acquire RMW in `enqueue`, publishing the holder's writes.
        self.word.store(next, Ordering::Release);
    }

    /// Under the table lock: if the lock is free, serve the waiters of its
    /// state (`exits`: as that many exits, see `serve`).
    fn serve_free(&self, t: &mut Table, exits: u32, wakeups: &mut WakeList) {
        let w = self.word.load(Ordering::Relaxed);
        if w & (LOCKED | UNRESOLVED) == 0 {
            self.serve(t, w & STATE_BITS, false, exits, wakeups);
        }
    }

    /// After an exit released the lock and then found a waiter for its
    /// state (`exits`: as that many exits), or a watcher gave up (0): while
    /// the lock is free, serve the waiters of its state.
    #[cold]
    fn wake_pass(&self, exits: u32, panics: &mut Panics) {
        let mut wakeups = WakeList::new();
        {
            let mut t = self.waiters.lock();
            self.serve_free(&mut t, exits, &mut wakeups);
            self.publish(&mut t);
        }
        wakeups.wake_all(panics);
    }
}

/// A waiter's node in the table, kept across its wake-ups, and the slot
/// where an exit may hand it the lock while it is woken.
#[derive(Default)]
pub(crate) struct Place {
    pub node: Option<Handle>,
    pub slot: Option<Arc<Slot>>,
}

impl Place {
    /// The state of a lock handed over through the slot, if one was: the
    /// exit removed the node, and the slot is spent.
    #[inline]
    fn take_handed(&mut self) -> Option<u32> {
        let token = self.slot.as_ref()?.token()?;
        self.node = None;
        self.slot = None;
        Some(token as u32 & STATE_BITS)
    }
}

/// What [`AstMutex::enqueue`] did.
pub(crate) enum Enqueued {
    /// The waiter is queued; a notify will come. With the wake-up of a
    /// thread woken ahead of a pending first in line, to deliver before
    /// waiting.
    Queued(Option<Wakeup>),
    /// The word admits the waiter: try to enter.
    Enterable,
    /// The lock was handed to the (woken) waiter, in this state.
    Handed(u32),
    /// The deadline passed before the table lock could be taken; the
    /// waiter, never queued, has nothing to undo.
    TimedOut,
}
