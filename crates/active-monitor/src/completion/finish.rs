//! [`Finish`]: how a task ends, and who waits for it to end.

use core::task::{Context, Poll};

use sync_core::sync::Arc as LoomArc;
use sync_core::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*, fence};
use sync_core::wait::{Next, WaitPolicy, Watch};
use sync_core::waiter::{Token, Waiter, WaiterQueue};

use crate::sweep::SweepCount;
use crate::unwind;

/// [`Finish::state`]: the task has not started; it can still be cancelled.
const PENDING: usize = 0;
/// The executor has claimed the task (it is running, or finishing with a
/// panic or `Discarded`): too late to cancel.
const STARTED: usize = 1;
/// The outcome is written and published.
pub(super) const READY: usize = 2;
/// The task was withdrawn before it started ([`Completion::cancel`]): it
/// never runs and has no outcome.
const CANCELLED: usize = 3;

/// The token an order waiter is notified with: the task has finished.
const FINISHED: Token = 1;

/// [`Finish::role`]: somebody holds the waiter queue's consumer role.
const HELD: u8 = 1;
/// [`Finish::role`], with [`HELD`]: somebody asked the holder to serve the
/// waiters again (a finish, or a waiter that pushed itself and found the
/// task finished) while it held the role.
const AGAIN: u8 = 2;

/// How a task ends, for everyone who waits for it to end without taking its
/// result: the workers that must wait for it under strict program order
/// (several may: async tasks sharing a thread's worker record, or a thread
/// and such a task).
///
/// `state`: [`PENDING`] → [`STARTED`] → [`READY`] by the executor
/// ([`claim`](Self::claim), then [`ResultSlot::complete`]), or
/// [`PENDING`] → [`CANCELLED`] by the completion's owner
/// ([`cancel`](Self::cancel)); an OR, whose taken flag decides instead,
/// goes straight to `READY` or `CANCELLED`. `READY` and `CANCELLED` are
/// final: the task is *finished*.
///
/// The waiters are a [`WaiterQueue`] of thread or task [`Waiter`]s, all
/// notified once the task finishes (a broadcast, so their order does not
/// matter). The queue's consumer role is `role`: the finisher takes it to
/// notify everybody, and a newcomer takes it to free the waiters that
/// withdrew (futures dropped while waiting), so the queue holds the live
/// waiters, not the history of cancelled waits. A finish that finds the
/// role taken asks its holder to serve again ([`AGAIN`]), so it is never
/// left undelivered.
///
/// Nobody waits for a waiter half-way through its push (swapped the tail,
/// not linked yet: preempted there, it stays so for a scheduling round):
/// whoever notifies stops there, and that waiter, once it has linked, finds
/// the task finished (the fences in `finished_serve` and `push_waiter`) and
/// notifies the rest itself, or asks the holder of the role to.
pub(crate) struct Finish {
    pub(super) state: AtomicUsize,
    waiters: WaiterQueue,
    /// The waiter queue's consumer role: 0, [`HELD`] while somebody pops,
    /// [`HELD`]` | `[`AGAIN`] once somebody asked it to serve again.
    role: AtomicU8,
    /// The withdrawn waiters still in `waiters`, and the live ones the
    /// last sweep kept: when a newcomer sweeps. Two 32-bit words: the slot
    /// sits in every task's allocation, which small tasks keep within 120
    /// bytes (see `AsyncTask`).
    count: SweepCount,
}

/// A thread's watch of a task it waits for, before it parks: `true` once
/// `done` holds, `false` when the thread should park (or register).
///
/// A short spin, then up to seven yields (parking_lot's `SpinWait`
/// counts), as the family's wait loop with
/// [`Watch::yields_unless_crowded`]: a combiner usually finishes the task
/// within microseconds, a parked waiter costs the combiner an unpark on its
/// own critical path (every other submitter waits behind that system
/// call), and while a few more threads than cores are runnable a yield
/// mostly hands the core to the threads that submit and serve, which make
/// progress meanwhile. So yields that are slow for that reason do not make
/// the waiter park, as they would in the family's default watch (parking
/// then puts a wake-up on the submitters' path for every task; the
/// report's `am/bq` and `am/or` rows measure it). Once the CPUs are heavily oversubscribed, a yield gives the core
/// away for a scheduling round and the task's end would go unseen for that
/// long: then the waiter parks at once, and is woken when the task
/// finishes. Between the two (a few busy threads per CPU), a yield waits
/// for their time slices: the first such yield is the watch's last, and
/// the waiter parks, to be woken when the task finishes rather than see
/// it a time slice late.
pub(super) fn watch(done: impl Fn() -> bool) -> bool {
    let mut watch = Watch::new(watch_policy()).yields_unless_crowded();
    loop {
        if done() {
            return true;
        }
        if watch.pause(None) != Next::Poll {
            return done();
        }
    }
}

/// The policy of [`watch`]: parking_lot's `SpinWait` (3 spins backing off,
/// 7 yields). Under loom, one spin (one yield to the model), then park,
/// as loom's model of `SpinWait` does.
fn watch_policy() -> WaitPolicy {
    if cfg!(loom) {
        WaitPolicy::spin_then_block(1)
    } else {
        WaitPolicy::new()
    }
}

/// Notifies `w` that the task has finished. A thread is unparked at once.
/// A task's waker is user code, which may poll the task on the spot and
/// go on to use the monitor whose holder finished the task: it runs once
/// that holder has let go of it (woken under it, a `call` of that monitor
/// found it held by its own thread and panicked). A panic of the waker is
/// caught (see `unwind`), so the consumer role is always given back.
/// `false` if `w` had withdrawn.
fn notify_finished(w: &LoomArc<Waiter>) -> bool {
    if w.is_thread() {
        return w.notify(FINISHED);
    }
    match Waiter::notify_later(w, FINISHED) {
        Some(wakeup) => {
            unwind::wakeup_task_after_holder(wakeup);
            true
        }
        None => false,
    }
}

impl Finish {
    pub(super) fn new() -> Self {
        Self {
            state: AtomicUsize::new(PENDING),
            waiters: WaiterQueue::new(),
            role: AtomicU8::new(0),
            count: SweepCount::new(),
        }
    }

    /// Whether the task has finished (ran, was discarded, or cancelled).
    #[inline]
    pub(crate) fn is_finished(&self) -> bool {
        // Acquire: pairs with the Release store (or CAS) that finished it.
        self.state.load(Acquire) >= READY
    }

    /// The executor claims the task before it runs (or finishes) it.
    /// `false` if it was cancelled first, or has finished (a second
    /// reference to a task already run: see `SubmitAsync::completion`):
    /// then it must not run.
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        // AcqRel: the CAS races `cancel`'s on the same word; whoever wins
        // owns the task's body (Acquire on failure pairs with `cancel`'s
        // Release, so the body the canceller took is seen as taken).
        match self
            .state
            .compare_exchange(PENDING, STARTED, AcqRel, Acquire)
        {
            Ok(_) => true,
            Err(CANCELLED | READY) => false,
            Err(s) => unreachable!("a task is claimed while it runs (state {s})"),
        }
    }

    /// Withdraws a task that has not started. `false` if the executor
    /// claimed it first.
    #[inline]
    pub(crate) fn cancel(&self) -> bool {
        // AcqRel: pairs with `claim`'s CAS (exactly one wins) and publishes
        // the cancellation to the order waiters' Acquire loads.
        let won = self
            .state
            .compare_exchange(PENDING, CANCELLED, AcqRel, Acquire)
            .is_ok();
        if won {
            self.finished();
        }
        won
    }

    /// An OR whose taken flag its owner won: it finishes cancelled.
    #[inline]
    pub(crate) fn set_cancelled(&self) {
        // Release: pairs with the order waiters' Acquire loads.
        self.state.store(CANCELLED, Release);
        self.finished();
    }

    /// Publishes READY (the outcome is written) and notifies the waiters.
    #[inline]
    pub(super) fn set_ready(&self) {
        // Release: pairs with the Acquire loads in `is_finished` and
        // `ResultSlot::is_done` (the outcome was written before).
        self.state.store(READY, Release);
        self.finished();
    }

    /// After the state became final: notify every waiter.
    #[inline]
    fn finished(&self) {
        // SeqCst fence: pairs with the fence in `push_waiter`. Either the
        // waiter sees the final state after pushing, or we see its node.
        fence(SeqCst);
        if !self.waiters.is_empty() {
            self.serve_waiters(true);
        }
    }

    /// Takes the consumer role and pops every waiter: notifies them all if
    /// the task has finished, otherwise frees the withdrawn ones and puts
    /// the others back. If the role is taken: with `again` (a finish, or a
    /// waiter that found the task finished after its push), asks its holder
    /// to serve once more ([`AGAIN`]); otherwise (a sweep) leaves it.
    fn serve_waiters(&self, again: bool) {
        let mut s = self.role.load(Relaxed);
        loop {
            let next = if s & HELD == 0 {
                HELD
            } else if again {
                s | AGAIN
            } else {
                return;
            };
            // AcqRel: taking the role (Acquire) pairs with the Release that
            // ended the previous holder's turn (its pops happen before
            // ours); asking again (Release) pairs with the holder's Acquire
            // swap below (our link, or the final state, happen before its
            // next turn).
            match self.role.compare_exchange(s, next, AcqRel, Relaxed) {
                Ok(_) if next == HELD => break,
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
        loop {
            if self.is_finished() {
                self.finished_serve();
            } else {
                // A sweeper frees the withdrawn waiters and puts the live
                // ones back (a node half-way through its push is left to
                // the next sweep, and still counts).
                // SAFETY: we hold the consumer role.
                unsafe { self.count.sweep(&self.waiters) };
            }
            // Release: pairs with the next holder's Acquire. No look after
            // it: a finish that found the role taken asked again, and one
            // that found the queue empty while a sweep had its waiters out
            // left them to the sweeper, a newcomer in `push_waiter`, which
            // sees the task finished after its fence (the sweep's pushes
            // come before it) and serves them.
            if self
                .role
                .compare_exchange(HELD, 0, Release, Relaxed)
                .is_ok()
            {
                return;
            }
            // Asked again: Acquire (a swap reads the last request) pairs
            // with the requests' Release.
            self.role.swap(HELD, Acquire);
        }
    }

    /// Notifies every waiter of a finished task, up to a waiter half-way
    /// through its push (if any): that one serves the rest once it has
    /// linked (see `push_waiter`). The caller holds the consumer role.
    fn finished_serve(&self) {
        // SeqCst fence: pairs with the fence in `push_waiter`, as the one in
        // `finished` (which a holder that is not the finisher has not
        // made): a waiter whose link we do not see below sees the task
        // finished after its own fence.
        fence(SeqCst);
        let mut withdrawn = 0;
        // A waker is user code: a panic in it is caught (see `unwind`), so
        // the role is always given back.
        // SAFETY: we hold the consumer role (one consumer at a time;
        // Acquire/Release on `role` orders the turns).
        while let Some(w) = unsafe { self.waiters.pop() } {
            withdrawn += usize::from(!notify_finished(&w));
        }
        self.count.left(withdrawn);
    }

    /// Adds `waiter` (not notified yet) and returns whether the task is
    /// still unfinished: if it has finished, the waiter is withdrawn (a
    /// notify that won the race is as good) and need not wait.
    fn push_waiter(&self, waiter: &LoomArc<Waiter>) -> bool {
        self.waiters.push(LoomArc::clone(waiter));
        // Frees the waiters that withdrew once they are as many as the live
        // ones the last sweep kept (see `SweepCount`): the queue holds at
        // most about twice the live waiters, and a sweep's cost is paid by
        // as many withdrawals (a sweep at every newcomer made N live waiters
        // cost O(N^2) to register). Skipping it is always safe: the
        // finisher pops every node, and the fence below decides the race.
        if self.count.due() {
            self.serve_waiters(false);
        }
        // SeqCst fence: pairs with the fence in `finished` (see there), and
        // with the one in `finished_serve`: a notifier that stopped at our
        // node (not linked yet) left the waiters from ours on to us.
        fence(SeqCst);
        if self.is_finished() {
            let _ = waiter.cancel();
            // Ours and those behind it (and anyone's a notifier stopped
            // at): served, or the role's holder is asked to.
            self.serve_waiters(true);
            return false;
        }
        true
    }

    /// Parks the calling thread until the task has finished.
    pub(crate) fn wait(&self) {
        if watch(|| self.is_finished()) {
            return;
        }
        let waiter = Waiter::for_thread(0);
        if self.push_waiter(&waiter) {
            unwind::before_park();
            waiter.wait(false);
        }
    }

    /// `Ready` once the task has finished; otherwise registers the task in
    /// `cx` (first poll: a new waiter in `waiter`) and returns `Pending`.
    /// Dropping `waiter` without [`withdraw`](Self::withdraw) keeps its
    /// node until the task finishes (a sweep keeps waiters that did not
    /// withdraw), never a lost wake-up.
    pub(crate) fn poll_finished(
        &self,
        waiter: &mut Option<LoomArc<Waiter>>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        if self.is_finished() {
            self.withdraw(waiter);
            return Poll::Ready(());
        }
        match waiter {
            Some(w) => {
                if w.poll(cx).is_ready() {
                    *waiter = None;
                    return Poll::Ready(());
                }
                Poll::Pending
            }
            None => {
                let w = Waiter::for_task(cx.waker(), 0);
                if !self.push_waiter(&w) {
                    return Poll::Ready(());
                }
                *waiter = Some(w);
                Poll::Pending
            }
        }
    }

    /// Test hook (`Completion::__test_order_audit`): sweeps the waiters
    /// of a quiescent task, and returns how many withdrawn ones it freed
    /// and how many the count stood for (see `SweepCount::audit`).
    ///
    /// # Panics
    ///
    /// If somebody holds the consumer role (the task is not quiescent).
    pub(crate) fn audit(&self) -> (usize, usize) {
        // Acquire: as in `serve_waiters`.
        let free = self
            .role
            .compare_exchange(0, HELD, Acquire, Relaxed)
            .is_ok();
        assert!(free, "audit of a task's waiters while they are served");
        // SAFETY: we hold the consumer role.
        let audit = unsafe { self.count.audit(&self.waiters) };
        // Release: pairs with the next holder's Acquire.
        self.role.store(0, Release);
        audit
    }

    /// Test hook (`Completion::__test_order_in_flight`): whether a waiter
    /// is half-way through its push (swapped, not linked), seen as a
    /// finisher sees it: takes the consumer role if it is free (else
    /// `false`), pops every waiter it can and pushes them back, in order.
    /// For a task nobody else serves meanwhile.
    pub(crate) fn in_flight(&self) -> bool {
        // Acquire: as in `serve_waiters`.
        if self
            .role
            .compare_exchange(0, HELD, Acquire, Relaxed)
            .is_err()
        {
            return false;
        }
        let mut popped = Vec::new();
        // SAFETY: we hold the consumer role.
        while let Some(w) = unsafe { self.waiters.pop() } {
            popped.push(w);
        }
        let in_flight = !self.waiters.is_empty();
        for w in popped {
            self.waiters.push(w);
        }
        // Release: pairs with the next holder's Acquire.
        self.role.store(0, Release);
        in_flight
    }

    /// A waiting future goes away: its node is withdrawn (and freed by the
    /// next sweep or the finisher). A notify that came first carried
    /// nothing to pass on: every waiter is notified.
    pub(crate) fn withdraw(&self, waiter: &mut Option<LoomArc<Waiter>>) {
        if let Some(w) = waiter.take() {
            // Withdrawing drops the task's waker (user code): its panic
            // goes on once the withdrawal is counted.
            let mut panics = sync_core::unwind::Panics::new();
            if w.cancel_catching(&mut panics).is_ok() {
                self.count.withdrew();
            }
            panics.resume();
        }
    }
}
