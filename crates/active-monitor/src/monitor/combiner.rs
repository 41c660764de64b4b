//! The combining executor: taking and letting go of the monitor, the
//! combiner's stint, its hand-overs and offers.

use ast_mutex::AbstractState;
use sync_core::sync::atomic::{Ordering::*, fence};
use sync_core::sync::hint;

use crate::saturation;
use crate::task::Task;
use crate::unwind;

use super::*;

/// How many times a combiner offering the monitor ([`HANDOVER`]) looks
/// for a taker before it takes the monitor back: about a microsecond, the
/// gap between two submissions of a thread that streams them.
#[cfg(not(loom))]
pub(super) const HANDOVER_SPINS: usize = 64;
/// Under loom, none: a taker may still come between the offer and the
/// CAS that takes it back (a preemption), and each spin would multiply the
/// schedules of every model that gives way.
#[cfg(loom)]
pub(super) const HANDOVER_SPINS: usize = 0;

/// How many times a contended `call` looks at the lock word for the holder
/// to let go before it queues its task (`spin_for_call`), backing off
/// between looks (1, 2, 4, up to `1 << CALL_BACKOFF_MAX` pauses): about
/// 1,300 pauses in all, about as long as a sleeping thread's wake-up. A
/// queued call costs its holder the task's and the result's cache misses,
/// and a sleeping caller a wake-up, so a caller that may soon take the
/// monitor itself waits for it that long first.
#[cfg(not(loom))]
pub(super) const CALL_LOCK_SPINS: usize = 12;
/// Under loom, one look: the models see both a caller that takes the
/// monitor after all and one that queues.
#[cfg(loom)]
pub(super) const CALL_LOCK_SPINS: usize = 1;

/// The longest backoff between two looks of `spin_for_call`, as a power of
/// two of pauses.
pub(super) const CALL_BACKOFF_MAX: usize = 8;

/// The most batches a combiner serves between two offers
/// (`offer_handover`) after offers were not taken.
pub(super) const OFFER_BACKOFF_MAX: usize = 8;

impl<T, S: AbstractState> Monitor<T, S> {
    /// A submitter takes the monitor if it is idle (or offered), to run
    /// its task and the queued ones. Never while the monitor's server
    /// serves (CPUs not saturated): the submitter then only publishes.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        if self.server.is_some() && !saturation::saturated_now() {
            return false;
        }
        self.take()
    }

    /// `call`'s [`try_lock`](Self::try_lock): with a server too, a caller
    /// that finds nothing queued and nobody holding the monitor takes it and
    /// runs its task at once. It waits for the result anyway, and a round
    /// trip to the server costs a wake-up or two (tens of microseconds)
    /// where a lock costs tens of nanoseconds; whatever is queued meanwhile
    /// goes to the server when the caller lets go (`serve_loop`).
    #[inline]
    pub(crate) fn try_lock_for_call(&self) -> bool {
        if self.server.is_some() && !saturation::saturated_now() && !self.queue.is_empty() {
            return false;
        }
        self.take()
    }

    /// Takes the monitor if it is idle, or offered by a combiner that has
    /// run its batch ([`HANDOVER`]).
    #[inline]
    pub(crate) fn take(&self) -> bool {
        let s = self.lock.load(Relaxed);
        // Acquire: pairs with the Release store of 0 in `release` or of
        // HANDOVER in `offer_handover`, so the previous holder's writes to
        // the data are visible.
        (s == 0 || s & STATE == HANDOVER)
            && self
                .lock
                .compare_exchange(s, LOCKED, Acquire, Relaxed)
                .is_ok()
    }

    /// After publishing a task without holding the monitor: serve it if the
    /// monitor is idle or offered; with a server, wake it if it sleeps.
    #[inline]
    pub(super) fn after_push(&self) {
        if self.take_after_push() {
            self.serve();
        }
    }

    /// [`after_push`](Self::after_push) inside an operation that ends with
    /// [`unwind::finish`]: a serve keeps a deferred panic for it.
    #[inline]
    pub(super) fn after_push_keeping(&self) {
        if self.take_after_push() {
            self.serve_keeping();
        }
    }

    /// `after_push`'s look: `true` if it took the monitor (to serve it).
    #[inline]
    pub(super) fn take_after_push(&self) -> bool {
        // SeqCst fence: pairs with the fence in `release` (either the
        // releasing holder sees our published task, or we see the monitor
        // idle: a task is never stranded in an idle monitor's queue), and
        // with the one in `prepare_sleep` (either the server about to sleep
        // sees our task, or we see its waiter and wake it).
        fence(SeqCst);
        if let Some(srv) = &self.server {
            if !saturation::saturated_now() {
                if !srv.sleeper.is_empty() {
                    self.wake_server();
                }
                return false;
            }
        }
        self.take()
    }

    /// Pushes `task` while holding the monitor (we are the consumer: if the
    /// queue is full, run the first task to make room, or wait for its
    /// producer if it is in flight).
    pub(super) fn push_held(&self, mut task: Task<T, S>) {
        let mut backoff = Backoff::new();
        loop {
            match self.queue.push(task) {
                Ok(()) => return,
                Err(t) => task = t,
            }
            match self.pop() {
                Some(first) => {
                    self.execute(first);
                    // A producer in flight later is another one: it gets
                    // the short spin again.
                    backoff.reset();
                }
                // The first position's producer is in flight (see
                // `wait_for_push`).
                None => wait_for_push(&mut backoff),
            }
        }
    }

    /// Test hook: whether the producer of the first queued position is
    /// in flight (it has claimed the position and not published its task
    /// yet), and then whether the monitor is held (`Some(true)`; not idle,
    /// nor offered). A hint, exact only while nobody pops the queue.
    #[doc(hidden)]
    pub fn __test_front_in_flight(&self) -> Option<bool> {
        let held = self.lock.load(Relaxed) & STATE == LOCKED;
        (!self.queue.is_empty() && !self.queue.front_ready()).then_some(held)
    }

    /// Test hook: how many tasks are queued, their producers' pushes in
    /// flight included (the count `Debug` shows). A hint, exact while
    /// nobody pops the queue: a test that holds the monitor in a body
    /// waits for another thread's task to queue behind it.
    #[doc(hidden)]
    pub fn __test_queued(&self) -> usize {
        self.queue.len()
    }

    /// Takes the first queued task.
    pub(super) fn pop(&self) -> Option<Task<T, S>> {
        // SAFETY: the caller holds the monitor: the only consumer, after
        // the previous holder (lock Acquire/Release).
        unsafe { self.queue.pop() }
    }

    /// Checks and runs (or files) one task. The caller holds the monitor.
    pub(super) fn execute(&self, task: Task<T, S>) {
        let guard = Unlock(self);
        self.execute_unguarded(task);
        core::mem::forget(guard);
    }

    /// `execute`, without letting go of the monitor if it unwinds (for the
    /// owner, who holds no lock).
    pub(super) fn execute_unguarded(&self, task: Task<T, S>) {
        unwind::running_queued(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: the caller holds the monitor.
                unsafe { (*e).execute(task) }
            })
        });
    }

    /// `execute` for this thread's own task, run on the spot on the
    /// monitor it took idle (a `when_in`, an async submission polled): a
    /// task body of this thread's own code, whose parks drop what the
    /// thread kept before it, as those of an inline `call` do (see
    /// `unwind::running_queued`). The caller holds the monitor.
    pub(super) fn execute_own(&self, task: Task<T, S>) {
        let guard = Unlock(self);
        unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: the caller holds the monitor.
                unsafe { (*e).execute(task) }
            })
        });
        core::mem::forget(guard);
    }

    /// Serves the queue while holding the monitor; returns once the monitor
    /// is released or handed off. Then resumes a panic caught in a drop or
    /// a waker meanwhile (see `unwind`), unless a task body of another
    /// monitor runs below us on this thread (its own serve resumes it).
    pub(super) fn serve(&self) {
        self.serve_loop();
        unwind::resume_deferred();
    }

    /// [`serve`](Self::serve) for an operation that is not done yet (its
    /// own task still to push, to wait for, or to record): the wakeups are
    /// delivered, and a deferred panic is kept for the operation's end
    /// ([`unwind::finish`]).
    pub(super) fn serve_keeping(&self) {
        self.serve_loop();
        unwind::wake_deferred();
    }

    /// [`serve_keeping`](Self::serve_keeping) for a blocking call whose
    /// task (its job at `job`) is queued: the serve is that call's own, so
    /// it may end by handing the monitor to the call's task, that is to
    /// itself (see `Job::caller_takes_handoff`), but not the wakeups
    /// delivered after it, which are user code that may serve the monitor
    /// too (a task polled on the spot).
    pub(super) fn serve_keeping_for(&self, job: usize) {
        unwind::serving_for(job, || self.serve_loop());
        unwind::wake_deferred();
    }

    /// A combiner's stint: at most `batch` tasks of its own choosing, then
    /// it gives way (`give_way`). Taking the monitor back after a release
    /// (work remained and nobody took it) does not restart the count, so
    /// the stint is bounded whatever other threads submit meanwhile.
    ///
    /// The common end of an uncontended operation (no server, nothing
    /// queued) is a release, in the caller's frame: what the stint's first
    /// round does then (its `pop` finds nothing: the consumer's look at the
    /// front, as `front_ready`'s), without the stint's call and set-up
    /// (about a tenth of an uncontended `call`'s instructions). If the
    /// release took the monitor back, the stint starts as it would have
    /// gone on: a full budget, nothing served.
    #[inline]
    pub(super) fn serve_loop(&self) {
        if self.server.is_none() && !self.queue.front_ready() && self.release() {
            return;
        }
        self.serve_stint();
    }

    /// [`serve_loop`](Self::serve_loop) past its first look.
    #[inline(never)]
    fn serve_stint(&self) {
        let mut budget = self.batch;
        // Tasks run in this stint (see `give_way`).
        let mut served = 0;
        loop {
            // The cached verdict: a sample (a file read) does not belong
            // where the monitor is held; the submitters keep it current.
            if self.server.is_some() && !saturation::saturated() {
                // The server's work: hand it over.
                self.release_served();
                return;
            }
            if budget == 0 {
                if self.give_way(served) {
                    return;
                }
                budget = self.batch;
                continue;
            }
            match self.pop() {
                Some(task) => {
                    self.execute(task);
                    budget -= 1;
                    served += 1;
                }
                None => {
                    if self.release() {
                        return;
                    }
                }
            }
        }
    }

    /// After a batch: hands the monitor to a blocked caller whose task is
    /// next if that caller is running (it spins for its token), keeps
    /// serving if the next task's caller sleeps, offers the monitor to
    /// whoever publishes next ([`HANDOVER`]) if the next task is
    /// asynchronous, or releases it if nothing is queued. Once the stint
    /// has run `served` tasks, as many as the queue holds, it must end: the
    /// monitor goes, held, to a producer asleep waiting for space, or to
    /// the next publisher, or to the next task's caller even if it sleeps.
    /// `false` if we still hold it: serve another batch.
    ///
    /// Waking a sleeping thread costs a wake-up (tens of microseconds, and
    /// up to a scheduling quantum when there are more threads than CPUs)
    /// during which nobody serves, and every caller that comes meanwhile
    /// queues behind it and falls asleep in turn: handing the monitor to a
    /// sleeping caller after every batch makes a convoy that never
    /// dissolves (the report's `am/call` rows measure it). Running a sleeping caller's task costs its unpark, and the
    /// monitor keeps being served. After a queue's worth of tasks a wake-up
    /// costs a few percent, and the stint stays bounded: about what was
    /// queued when it began, plus that many.
    pub(super) fn give_way(&self, served: usize) -> bool {
        self.sweep_space();
        // SAFETY: we are the consumer; the borrow ends before `pop`.
        let front = unsafe { self.queue.peek() }.map(|t| {
            let job = t.job();
            (
                job.is_blocking(),
                job.caller_spins(),
                job.is_blocking() && job.caller_takes_handoff(),
            )
        });
        let Some((blocking, spins, takes)) = front else {
            return self.release();
        };
        // A running caller: it takes over within a few instructions.
        if takes && spins && self.hand_off_front() {
            return true;
        }
        if served < self.queue.capacity() {
            if blocking {
                // Its caller waits for it anyway: run it.
                return false;
            }
            return self.offer_backing_off();
        }
        // The stint is over. A producer thread waiting for space is handed
        // the monitor, held. Async producers waiting for space are woken,
        // and the monitor is let go of for them: a woken producer always
        // looks at the monitor when its executor polls it (it pushes and
        // serves an idle monitor, or passes the wake-up on if dropped,
        // which does the same), so the queued tasks are not stranded, and
        // whoever comes first serves them. Otherwise the monitor is offered
        // (backing off: with a small queue the stint is over after a few
        // batches, and an offer nobody takes costs its spin and a yield
        // each time).
        match self.hand_to_producer() {
            Handover::Thread | Handover::Tasks => return true,
            Handover::Retaken => return false,
            Handover::Nobody => {}
        }
        if self.offer_backing_off() {
            return true;
        }
        if takes && self.hand_off_front() {
            return true;
        }
        // A blocking call's caller still busy with its own work (see
        // `Job::caller_takes_handoff`) gets its task run: serve on.
        false
    }

    /// Hands the monitor, held, to the caller of the front task, a blocked
    /// `call` that takes hand-overs (after `peek`): it runs the task
    /// itself, then serves. `false` if the caller no longer takes it: the
    /// producers woken for space here may be this thread's to deliver
    /// (async producers' wakers, kept), and a caller that is this thread,
    /// at the end of its own serve, would deliver them while the monitor is
    /// held for it (see `Job::caller_takes_handoff`). We then still hold
    /// the monitor, and the task is queued.
    pub(super) fn hand_off_front(&self) -> bool {
        self.wake_space();
        // SAFETY: we are the consumer; the borrow ends before `pop`.
        if !unsafe { self.queue.peek() }.is_some_and(|t| t.job().caller_takes_handoff()) {
            return false;
        }
        let task = self.pop().expect("peeked");
        // SAFETY: a blocking call's task, not run; we hold the monitor
        // and touch it no more after this.
        unsafe { task.handoff() };
        true
    }

    /// Offers the monitor to the next publisher, unless offers are backing
    /// off: offers nobody takes cost their spin each, so after a miss the
    /// combiner serves more batches before the next offer (1, 2, 4, up to
    /// [`OFFER_BACKOFF_MAX`]), back to every batch once one is taken. The
    /// stint stays bounded. `true` if the offer was taken.
    pub(super) fn offer_backing_off(&self) -> bool {
        let skip = self.offer_skip.load(Relaxed);
        if skip > 0 {
            self.offer_skip.store(skip - 1, Relaxed);
            return false;
        }
        if self.offer_handover() {
            self.offer_backoff.store(0, Relaxed);
            return true;
        }
        let backoff = (2 * self.offer_backoff.load(Relaxed)).clamp(1, OFFER_BACKOFF_MAX);
        self.offer_backoff.store(backoff, Relaxed);
        self.offer_skip.store(backoff, Relaxed);
        false
    }

    /// Offers the held monitor to the next submitter that publishes (its
    /// `after_push` takes it from [`HANDOVER`]), for a short while; then
    /// takes it back if nobody did. `true` if someone took it.
    ///
    /// No task is stranded: the queued tasks are served either by the
    /// taker, who holds the monitor from its CAS on, or by us, who hold it
    /// again from ours; exactly one of the two CASes from our offer
    /// succeeds.
    pub(super) fn offer_handover(&self) -> bool {
        self.wake_space();
        // Release: pairs with the Acquire CAS in the taker's `take`, which
        // then sees the data as we left it. Only the holder writes the lock
        // word while it is LOCKED, so a store suffices.
        let offer = HANDOVER | (self.offers.fetch_add(1, Relaxed) << 2);
        self.lock.store(offer, Release);
        // No spins under loom (`HANDOVER_SPINS` is 0 there).
        #[cfg_attr(loom, allow(clippy::reversed_empty_ranges))]
        for _ in 0..HANDOVER_SPINS {
            hint::spin_loop();
            if self.lock.load(Relaxed) != offer {
                return true;
            }
        }
        // One yield: with more threads than CPUs the publisher that would
        // take the offer may be waiting for ours (a yield with nobody to
        // run is a fraction of a microsecond). Not the family's give_way:
        // once yields are slow it sleeps, and nobody serves while an offer
        // sleeps (the report's am/call rows). Nor a yield once yields are
        // slow: that gives the CPU away for a scheduling round, and callers
        // that wait for their queued tasks publish nothing meanwhile, so
        // nobody takes the offer and nobody serves until we run again.
        #[cfg(not(loom))]
        if !sync_core::load::yields_are_slow() {
            std::thread::yield_now();
            if self.lock.load(Relaxed) != offer {
                return true;
            }
        }

        // Acquire: pairs with the Release store of HANDOVER by whoever
        // offers it now (a taker that served and offered it in turn); the
        // offer is ours to take back as much as anyone's.
        self.lock
            .compare_exchange(offer, LOCKED, Acquire, Relaxed)
            .is_err()
    }

    /// Lets go of the monitor without looking for work (the server, ending:
    /// the monitor's drop runs what is queued).
    pub(crate) fn unlock_plain(&self) {
        // Release: pairs with the Acquire CAS in `take`.
        self.lock.store(0, Release);
    }

    /// Releases the monitor. Returns `false` if it took it back because work
    /// remained (a published task, or producers waiting for space) and
    /// nobody else had taken it.
    pub(super) fn release(&self) -> bool {
        // Release: pairs with the Acquire CAS in `try_lock` (the next
        // holder sees the data as we left it).
        self.lock.store(0, Release);
        self.look_after_release()
    }

    /// [`release`](Self::release)'s look for work, once the monitor is let
    /// go of: `false` if it took the monitor back.
    pub(super) fn look_after_release(&self) -> bool {
        // SeqCst fence: pairs with the fences in `after_push` and
        // `wait_for_space` (see there).
        fence(SeqCst);
        // Producers waiting for space matter only once the queue is at most
        // half full (a fuller queue's tasks are served, by us or by their
        // producers after they publish, and it drains to half).
        if !self.queue.front_ready() && (self.space.is_empty() || !self.room_for_waiters()) {
            return true;
        }
        // `take`, not `try_lock`: with a server that serves, `try_lock`
        // always fails, so neither producers waiting for space nor a task
        // published while saturation ended would be looked after (the
        // server may sleep). Taken back, a server keeps serving; another
        // holder goes round `serve_loop` into `release_served`.
        if !self.take() {
            return true;
        }
        self.wake_space();
        false
    }

    /// Runs every queued task (no one else is around).
    pub(super) fn run_queued(&mut self) {
        while let Some(task) = self.pop() {
            self.execute_unguarded(task);
        }
    }
}

/// Lets go of the monitor if the holder unwinds (a panic that escaped
/// every catch: none is known, user code is caught where it runs), then
/// serves what remains if nobody else took it, so the monitor is never
/// left held by a thread that has gone.
pub(super) struct Unlock<'a, T, S: AbstractState>(pub(super) &'a Monitor<T, S>);

impl<T, S: AbstractState> Drop for Unlock<'_, T, S> {
    fn drop(&mut self) {
        if !self.0.release() {
            self.0.serve_loop();
        }
        // The callers whose tasks ran are not left asleep by the unwind,
        // nor the tasks kept to drop left for ever.
        unwind::deliver_keeping();
    }
}
