//! [`Finish`]: how a task ends, and who waits for it to end.

use core::task::{Context, Poll};

use sync_core::sync::Arc as LoomArc;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*, fence};
use sync_core::wait::{Backoff, Next, WaitPolicy, Watch};
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
/// matter). The queue's consumer role is the `consumer` flag: the finisher
/// takes it to notify everybody, and a newcomer takes it to free the
/// waiters that withdrew (futures dropped while waiting), so the queue
/// holds the live waiters, not the history of cancelled waits. Whoever
/// holds the role re-checks after letting go, so a finish that found the
/// role taken is never left undelivered.
pub(crate) struct Finish {
    pub(super) state: AtomicUsize,
    waiters: WaiterQueue,
    /// The waiter queue's consumer role: true while somebody pops.
    consumer: AtomicBool,
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
            consumer: AtomicBool::new(false),
            count: SweepCount::new(),
        }
    }

    /// Whether the task has finished (ran, was discarded, or cancelled).
    pub(crate) fn is_finished(&self) -> bool {
        // Acquire: pairs with the Release store (or CAS) that finished it.
        self.state.load(Acquire) >= READY
    }

    /// The executor claims the task before it runs (or finishes) it.
    /// `false` if it was cancelled first, or has finished (a second
    /// reference to a task already run: see `SubmitAsync::completion`):
    /// then it must not run.
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
    pub(crate) fn set_cancelled(&self) {
        // Release: pairs with the order waiters' Acquire loads.
        self.state.store(CANCELLED, Release);
        self.finished();
    }

    /// Publishes READY (the outcome is written) and notifies the waiters.
    pub(super) fn set_ready(&self) {
        // Release: pairs with the Acquire loads in `is_finished` and
        // `ResultSlot::is_done` (the outcome was written before).
        self.state.store(READY, Release);
        self.finished();
    }

    /// After the state became final: notify every waiter.
    fn finished(&self) {
        // SeqCst fence: pairs with the fence in `push_waiter`. Either the
        // waiter sees the final state after pushing, or we see its node.
        fence(SeqCst);
        if !self.waiters.is_empty() {
            self.serve_waiters();
        }
    }

    /// Takes the consumer role, if free, and pops every waiter: notifies
    /// them all if the task has finished, otherwise frees the withdrawn
    /// ones and puts the others back. Re-checks after letting go of the
    /// role, for a finisher that found it taken.
    fn serve_waiters(&self) {
        // Acquire: pairs with the Release that ended the previous holder's
        // turn (its pops happen before ours).
        while self
            .consumer
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
        {
            if self.is_finished() {
                let mut withdrawn = 0;
                let mut backoff = Backoff::new();
                while !self.waiters.is_empty() {
                    // SAFETY: we hold the consumer role (one consumer at a
                    // time; Acquire/Release on `consumer` orders the turns).
                    match unsafe { self.waiters.pop() } {
                        // A waker is user code: a panic in it is caught (see
                        // `unwind`), so the role is always given back.
                        Some(w) => withdrawn += usize::from(!notify_finished(&w)),
                        // A producer is half-way through its push: a few
                        // instructions, unless it was preempted there (then
                        // for as long as it waits for a CPU). The family's
                        // wait: a short spin, then our core is given away
                        // (a sleep once yields are slow), never spun on.
                        None => backoff.snooze(),
                    }
                }
                self.count.left(withdrawn);
            } else {
                // A sweeper frees the withdrawn waiters and puts the live
                // ones back (a node half-way through its push is left to
                // the next sweep, and still counts).
                // SAFETY: as above, we hold the consumer role.
                unsafe { self.count.sweep(&self.waiters) };
            }
            // Release: pairs with the next holder's Acquire.
            self.consumer.store(false, Release);
            // SeqCst fence: pairs with the fence in `finished`. A finisher
            // whose CAS on `consumer` failed (we held it) fenced before
            // that; after our fence we see its final state, and serve
            // again if a waiter is left.
            fence(SeqCst);
            if !self.is_finished() || self.waiters.is_empty() {
                return;
            }
        }
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
            self.serve_waiters();
        }
        // SeqCst fence: pairs with the fence in `finished` (see there).
        fence(SeqCst);
        if self.is_finished() {
            let _ = waiter.cancel();
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
            .consumer
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok();
        assert!(free, "audit of a task's waiters while they are served");
        // SAFETY: we hold the consumer role.
        let audit = unsafe { self.count.audit(&self.waiters) };
        // Release: pairs with the next holder's Acquire.
        self.consumer.store(false, Release);
        audit
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
