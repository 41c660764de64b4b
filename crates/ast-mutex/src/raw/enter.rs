//! The slow paths of an entry: a thread's watch, queue and park
//! (`lock_slow`), a task's poll (`poll_enter`) and a dropped task's
//! withdrawal (`cancel_wait`), and what they do under the waiter table's
//! lock (`enqueue`, `dequeue`, `leave`, `abandon`).

use core::task::{Context, Poll};
use std::time::{Duration, Instant};

use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering;
use sync_core::unwind::Panics;
use sync_core::wait::{Next, WaitPolicy, Watch};
use sync_core::waiter::{Waiter, Wakeup};
use sync_core::wake_list::WakeList;

use crate::config::WakeMode;
use crate::future::Wait;
use crate::mutex::AstMutex;
use crate::state::AbstractState;
use crate::waiters::{Slot, Table};
use crate::watchers::MAX_WATCHERS;

use super::{Enqueued, LOCKED, Place, STATE_BITS, TOKEN_HANDOFF, UNRESOLVED, enterable, past};

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

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// Watches the word, then waits in the group of `mask` until entered,
    /// handed the lock, or past `deadline`.
    #[cold]
    pub(crate) fn lock_slow(&self, mask: u64, deadline: Option<Instant>) -> Option<u32> {
        // We may park: what this thread keeps for the family's blocking
        // waits goes first (an active monitor's task wakers, see
        // `wake_chain::deliver_before_park`), before we are queued: here
        // the wait owes nothing yet (it holds no watcher slot, and no node
        // an exit may hand the lock to), so a task the hook polls in place
        // may wait for this very mutex. Past the watch it could owe the
        // others a serve only this thread can make.
        sync_core::wake_chain::before_park();
        let mut place = Place::default();
        // Woken to compete and not queued since: our node is woken, and a
        // give-up passes the wake on.
        let mut woken = false;
        let limit = self.config.watchers as usize;
        // One watch for the whole wait, reset at each round: the bound on
        // how long it watches (`Watch::overdue`) is on the whole wait.
        let mut watch = Watch::new(WaitPolicy::block());
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
            watch.reset(Self::loom_policy(policy));
            let entered = self.watch(mask, deadline, &mut place, &mut watch);
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
                return self.give_up(&mut place, slot.is_some());
            }
            woken = false;
            let waiter = Waiter::for_thread(0);
            let enqueued = self.enqueue(mask, &mut place, &waiter, deadline, false);
            // The release of the table lock may find a serve owed by a
            // waiter that gave up while we held it (`TableGuard`). That
            // serve runs task wakers, user code, and we made the hook's
            // promise above that none runs between it and our park; and a
            // task polled in place there that entered this mutex, blocking,
            // would wait behind our own node, which an exit may serve
            // (wake, or hand the lock to) while this thread is not there to
            // take it. So we make the serve ourselves, once our node has
            // left the table (see `serve_owed_unqueued`).
            let owed = !matches!(enqueued, Enqueued::TimedOut) && self.waiters.owed_after_release();
            match enqueued {
                Enqueued::Queued(ahead) => {
                    let (left, panics) = self.queued(ahead, owed, mask, &mut place, &waiter, true);
                    // A thread's waiter has no waker to drop.
                    drop(panics);
                    match left {
                        Some(Some(s)) => return Some(s),
                        Some(None) => continue,
                        None => {}
                    }
                }
                Enqueued::Enterable => {
                    if owed
                        && let Some(s) = self.serve_owed_unqueued(
                            mask,
                            &mut place,
                            None,
                            &mut Panics::new(),
                            true,
                        )
                    {
                        return Some(s);
                    }
                    continue;
                }
                Enqueued::Handed(s) => {
                    if owed {
                        // We hold the lock: the serve only takes the debt
                        // (our exit serves), and runs no user code.
                        self.serve_owed_discarding();
                    }
                    return Some(s);
                }
                // Not queued again: a woken node is still ours, and a
                // watcher owes a pass-on.
                Enqueued::TimedOut => return self.give_up(&mut place, slot.is_some()),
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

    /// After an enqueue that queued `waiter` (`Enqueued::Queued(ahead)`), by
    /// a thread (`park`) or a task: wakes the thread woken ahead of it (an
    /// unpark: no user code runs) and, if the enqueue's release of the
    /// table lock found a serve `owed`, leaves the table and makes it
    /// (`serve_owed_unqueued`). Returns `None` if the waiter stays queued
    /// (to wait for its notify), or `Some(handed)` once it has left: the
    /// state of a lock handed to it meanwhile (its own now), or `None` to
    /// start over; with the panic of the withdrawn waiter's waker, for the
    /// caller to resume or drop.
    fn queued(
        &self,
        ahead: Option<Wakeup>,
        owed: bool,
        mask: u64,
        place: &mut Place,
        waiter: &Waiter,
        park: bool,
    ) -> (Option<Option<u32>>, Panics) {
        if let Some(w) = ahead {
            w.wake();
        }
        let mut panics = Panics::new();
        let left =
            owed.then(|| self.serve_owed_unqueued(mask, place, Some(waiter), &mut panics, park));
        (left, panics)
    }

    /// After an enqueue whose release of the table lock found a serve owed
    /// (see `lock_slow` and `poll_enter`): leaves the table, then makes the
    /// serve, and runs the park hook for what its wakers kept. A queued
    /// waiter (`waiter`) is withdrawn as a timed wait that gave up there is
    /// (a notify that won keeps its meaning: a handoff is the lock); a
    /// woken one (an entry found enterable keeps its woken node) gives up
    /// as a woken waiter does, serving the free lock's state. Either way it
    /// loses its place in line, and `place` is new. Returns the state of a
    /// lock handed to it meanwhile, which it then owns: the serve then only
    /// takes the debt, and nothing else runs. A task waiter's waker, dropped
    /// by its withdrawal, panics into `panics`; the serve's wakers panic
    /// into nothing (the serve is owed to others: rule 4 of the panic
    /// policy, as in `TableGuard`). With `park` (a thread about to park),
    /// it then runs the park hook for what those wakers kept on the thread.
    #[cold]
    fn serve_owed_unqueued(
        &self,
        mask: u64,
        place: &mut Place,
        waiter: Option<&Waiter>,
        panics: &mut Panics,
        park: bool,
    ) -> Option<u32> {
        let handed = self.leave_unserved(mask, place, waiter, panics);
        self.serve_owed_discarding();
        if handed.is_some() {
            return handed;
        }
        *place = Place::default();
        if park {
            // A task polled in place there may be an active monitor's body,
            // which keeps its task wakers on this thread.
            sync_core::wake_chain::before_park();
        }
        None
    }

    /// `serve_owed_unqueued`'s leave: withdraws `waiter` and removes its
    /// node, or gives up a woken node. The waiter owes nothing afterwards.
    fn leave_unserved(
        &self,
        mask: u64,
        place: &mut Place,
        waiter: Option<&Waiter>,
        panics: &mut Panics,
    ) -> Option<u32> {
        if let Some(waiter) = waiter {
            match waiter.cancel_catching(panics) {
                Ok(()) => {
                    self.dequeue(place);
                    return None;
                }
                Err(token) if token & TOKEN_HANDOFF != 0 => {
                    // The exit removed our node.
                    place.node = None;
                    place.slot = None;
                    return Some(token as u32 & STATE_BITS);
                }
                Err(_) => {
                    // Woken to compete: our node stays, woken.
                    if let Some(slot) = &place.slot {
                        slot.mark_back();
                        self.waiters.unskip(mask);
                    }
                }
            }
        }
        self.give_up(place, false)
    }

    /// Makes an owed serve, if one is owed and the table lock is free,
    /// dropping its wakers' panics: the serve is owed to other waiters
    /// (rule 4 of the panic policy, as in `TableGuard`).
    fn serve_owed_discarding(&self) {
        let mut panics = Panics::new();
        self.serve_owed(&mut panics);
        drop(panics);
    }

    /// Under loom every spin and yield is a scheduling point: one read
    /// after one spin explores a waiter that finds its state while
    /// watching, without multiplying the paths.
    #[inline]
    fn loom_policy(policy: WaitPolicy) -> WaitPolicy {
        if cfg!(loom) {
            WaitPolicy::spin_then_block(policy.spin_count().min(1))
        } else {
            policy
        }
    }

    /// Watches the lock word for a state of `mask`, taking the lock if one
    /// comes, as `watch`'s [`WaitPolicy`] says (by default `spins` reads
    /// with a spin hint between them, then `yields` reads each after a
    /// yield), checking `deadline` throughout (the [`Watch`] reads the
    /// clock every 16 spins and before every yield). A woken waiter also
    /// watches its slot, where an exit may hand it the lock. Returns the
    /// state entered in, with the waiter's node gone; `None` once the
    /// watch is over, or has watched for `wait::WATCH_AT_MOST` past its
    /// spins in this wait ([`Watch::overdue`]), whatever the policy: a
    /// thread that watches on is not in line, and threads that exit and
    /// re-enter on their fast path could keep it out for ever, where
    /// queued, exits serve it in turn (see `AstMutex`'s `# Fairness`).
    #[inline]
    fn watch(
        &self,
        mask: u64,
        deadline: Option<Instant>,
        place: &mut Place,
        watch: &mut Watch,
    ) -> Option<u32> {
        loop {
            if let Some(s) = place.take_handed() {
                return Some(s);
            }
            if let Some(s) = self.try_lock_in(mask) {
                self.leave(place);
                return Some(s);
            }
            if watch.overdue() {
                return None;
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
    /// A waiter that has a `deadline` does not wait for the table lock past
    /// it (`TimedOut`, and a woken waiter's node is left as it was): the
    /// lock's holder may be preempted for a scheduling round.
    ///
    /// Unless `serves_owed`, the release of the table lock does not make a
    /// serve owed by a waiter that gave up meanwhile (see `TableGuard`):
    /// the caller looks (`Waiters::owed_after_release`) and makes it once
    /// its node has left the table (`serve_owed_unqueued`).
    pub(crate) fn enqueue(
        &self,
        mask: u64,
        place: &mut Place,
        waiter: &Arc<Waiter>,
        deadline: Option<Instant>,
        serves_owed: bool,
    ) -> Enqueued {
        let mut t = match deadline {
            Some(d) => match self.table_until(d) {
                Some(t) => t,
                None => return Enqueued::TimedOut,
            },
            None => self.table(),
        };
        t.serves_owed = serves_owed;
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
        // Queue ourselves, then publish and read the word: an exit whose
        // release follows sees our states and serves us (or takes the table
        // lock, and finds us queued); one whose release came before left
        // the word enterable, and we see that here.
        let w = self.publish_and_read_word(&mut t);
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

    /// Under the table lock, after changing the table: publishes it, then
    /// reads the lock word with an RMW that changes nothing, and returns
    /// it. An exit whose swap comes after this RMW in the word's
    /// modification order reads from it, and so reads what we published
    /// (the waiting, due and skip states) in its re-check after the swap;
    /// an exit whose swap came before it freed the word, and the caller
    /// sees that in the word returned (see `unlock`).
    pub(super) fn publish_and_read_word(&self, t: &mut Table) -> u32 {
        self.publish(t);
        // AcqRel: Release carries the publication to that exit's re-check;
        // Acquire pairs with the Release of the exit that freed the word.
        self.word.fetch_or(0, Ordering::AcqRel)
    }

    /// Under the table lock, when the lock is free in the state of `bit`:
    /// if its first in line is pending and no watcher that accepts the state
    /// is running, wakes the next queued thread that accepts it to compete
    /// (see `enqueue`), and returns the wake-up.
    fn wake_ahead(&self, t: &mut Table, bit: u64) -> Option<Wakeup> {
        // Handoff mode keeps the turn for its first in line (woken, it is
        // handed the lock once it runs), and Broadcast mode has woken every
        // acceptor already.
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
        match self.table_until(Instant::now() + LEAVE_PATIENCE) {
            Some(mut t) => {
                if t.remove(h) {
                    self.publish(&mut t);
                }
            }
            None => self.waiters.leave_later(),
        }
    }

    /// Removes the node of a woken waiter that has just taken the lock.
    ///
    /// Here, inside the hold, rather than in the waiter's exit after the
    /// lock is free: there the section overlaps every other thread's use
    /// of the table lock, so more threads can be preempted holding it, and
    /// exits that take the table lock without patience (`wake_pass`,
    /// `unlock_slow`) then wait for them. Moving it out made timed entries
    /// on a churned lock return a scheduling round late (the report's
    /// `busy/overshoot-p99/lock-churned` rows).
    fn leave(&self, place: &mut Place) {
        let Some(h) = place.node.take() else {
            return;
        };
        let mut t = self.table();
        // Nobody hands the lock to a waiter that took it by itself: the word
        // has been held by us since.
        let removed = t.remove(h);
        debug_assert!(
            removed,
            "a woken node is removed only by its waiter or a handoff"
        );
        self.publish(&mut t);
    }

    /// A thread's timed wait gives up (see `abandon`). The serve it makes
    /// is owed to the next waiter, not to the caller, whose entry failed:
    /// a panic of that waiter's waker is dropped (rule 4 of the panic
    /// policy), as when the serve is left to the table lock's holder, so
    /// that a timed entry returns `None` whichever way it gave up.
    fn give_up(&self, place: &mut Place, watched: bool) -> Option<u32> {
        let mut panics = Panics::new();
        let handed = self.abandon(place, watched, &mut panics);
        drop(panics);
        handed
    }

    /// A woken (or never queued) waiter gives up: removes its node and, if
    /// it was woken or `watched` (held a watcher slot), serves the free
    /// lock's state, since exits served it rather than wake anyone else.
    /// Returns the state of a lock handed to it meanwhile, which it then
    /// owns. Wakers' panics go to `panics`.
    ///
    /// If the table lock stays held for `LEAVE_PATIENCE` (its holder
    /// preempted), it leaves without it: it abandons its node's slot, so
    /// that no exit hands it the lock any more, and leaves the node and the
    /// serve to the table lock's holder (`abandon_later`).
    fn abandon(&self, place: &mut Place, watched: bool, panics: &mut Panics) -> Option<u32> {
        let node = place.node.take();
        if node.is_none() && !watched {
            return None;
        }
        let mut wakeups = WakeList::new();
        {
            let Some(mut t) = self.table_until(Instant::now() + LEAVE_PATIENCE) else {
                return self.abandon_later(place, node.is_some(), panics);
            };
            // Under the table lock, under which handoffs are made.
            if let Some(s) = place.take_handed() {
                return Some(s);
            }
            let woken = node.is_some_and(|h| {
                let woken = t.is_woken(h);
                t.remove(h);
                woken
            });
            if woken || watched {
                // We may have been a state's first in line that exits
                // skipped (`skip_states`), or the watcher that exits left
                // their waiters parked for: they freed the lock and served
                // no one. Publish and read the word: an exit whose swap
                // follows reads the new table (see `unlock`); one whose
                // swap came before left the lock free, and we serve its
                // state here.
                let w = self.publish_and_read_word(&mut t);
                if w & (LOCKED | UNRESOLVED) == 0 {
                    self.serve(&mut t, w & STATE_BITS, false, 0, &mut wakeups);
                }
            }
            self.publish(&mut t);
        }
        wakeups.wake_all(panics);
        None
    }

    /// `abandon` without the table lock: abandons the woken node's slot
    /// (unless an exit handed it the lock first: then the lock is ours),
    /// and leaves the node and the serve owed to the table lock's holder
    /// (`Waiters::leave_owing`), then makes the serve itself if the table
    /// lock is free by now.
    #[cold]
    fn abandon_later(&self, place: &mut Place, node: bool, panics: &mut Panics) -> Option<u32> {
        if node {
            let slot = place.slot.take().expect("a node has a slot");
            if let Err(token) = slot.abandon() {
                // The exit that handed it removed our node.
                return Some(token as u32 & STATE_BITS);
            }
        }
        self.waiters.leave_owing(node);
        self.serve_owed(panics);
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
            let enqueued = self.enqueue(wait.mask, &mut wait.place, &waiter, None, false);
            // As in `lock_slow`: a serve owed to the table lock's holder
            // runs task wakers, which may poll in place a task that enters
            // this mutex, blocking, on this thread, behind our node, while
            // this task cannot be polled (it is being polled here). We make
            // it once our node has left the table.
            let owed = self.waiters.owed_after_release();
            match enqueued {
                Enqueued::Queued(ahead) => {
                    let (left, panics) =
                        self.queued(ahead, owed, wait.mask, &mut wait.place, &waiter, false);
                    // Our own waker's drop, once the mutex is consistent.
                    panics.resume();
                    match left {
                        Some(Some(s)) => return Poll::Ready(s),
                        Some(None) => continue,
                        None => {}
                    }
                    // A notify from now on wakes the waker registered above.
                    wait.waiter = Some(waiter);
                    return Poll::Pending;
                }
                Enqueued::Enterable => {
                    if owed
                        && let Some(s) = self.serve_owed_unqueued(
                            wait.mask,
                            &mut wait.place,
                            None,
                            &mut Panics::new(),
                            false,
                        )
                    {
                        return Poll::Ready(s);
                    }
                }
                Enqueued::Handed(s) => {
                    if owed {
                        // We hold the lock: no user code runs.
                        self.serve_owed_discarding();
                    }
                    return Poll::Ready(s);
                }
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
        self.cancel_wait_with(wait, &mut panics);
        panics.resume();
    }

    /// [`cancel_wait`](Self::cancel_wait), keeping the wakers' panics in
    /// `panics` (for a drop that has a value of its own to drop first).
    pub(crate) fn cancel_wait_with(&self, wait: &mut Wait, panics: &mut Panics) {
        if let Some(waiter) = wait.waiter.take() {
            // A withdrawn waiter drops its waker: user code. If that panics,
            // the withdrawal itself was done (`Ok`), and the panic waits in
            // `panics` until the dequeue below is done too.
            match waiter.cancel_catching(panics) {
                Ok(()) => {
                    self.dequeue(&mut wait.place);
                    return;
                }
                Err(token) if token & TOKEN_HANDOFF != 0 => {
                    // Handed the lock (the exit removed our node): release
                    // it in the state it was handed in.
                    wait.place.node = None;
                    let s = token as u32 & STATE_BITS;
                    self.unlock_with(s, s, panics);
                    return;
                }
                // Woken to compete: our node is woken.
                Err(_) => {}
            }
        }
        if let Some(s) = self.abandon(&mut wait.place, false, panics) {
            // Handed the lock while woken: release it as it was handed.
            self.unlock_with(s, s, panics);
        }
    }
}
