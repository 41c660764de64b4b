//! Producers waiting for room in the task queue: registering, waking,
//! handing the monitor over at the end of a stint, sweeping the withdrawn.

use core::task::Context;

use ast_mutex::AbstractState;
use sync_core::sync::Arc as LoomArc;
use sync_core::sync::atomic::{Ordering::*, fence};
use sync_core::sync::hint;
use sync_core::wait::Backoff;
use sync_core::waiter::Waiter;

use crate::saturation;
use crate::task::Task;
use crate::unwind;

use super::*;

/// What [`Monitor::hand_to_producer`] did with the monitor.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Handover {
    /// Handed it, held, to a producer thread ([`SPACE_HELD`]).
    Thread,
    /// Let it go, then woke async producers ([`SPACE`]): each looks at
    /// the monitor when it is polled (or passes the wake-up on if it is
    /// dropped), so the queued tasks are not stranded. Also: let it go,
    /// and nothing was left to serve, or someone else took it.
    Tasks,
    /// Let it go for producers that had all withdrawn, and took it back:
    /// work remained. Still held.
    Retaken,
    /// Nothing: no producer waits for space. Still held.
    Nobody,
}

/// The token a producer waiting for queue space is woken with.
pub(super) const SPACE: usize = 3;
/// The token that hands the monitor, held, to a producer thread waiting
/// for space (`hand_to_producer`): it serves, then pushes.
pub(super) const SPACE_HELD: usize = 4;

impl<T, S: AbstractState> Monitor<T, S> {
    /// Pushes `task` without holding the monitor; waits for space if the
    /// queue is full.
    pub(super) fn push(&self, mut task: Task<T, S>) {
        loop {
            match self.queue.push(task) {
                Ok(()) => return,
                Err(t) => task = t,
            }
            self.wait_for_space();
        }
    }

    #[cold]
    pub(super) fn wait_for_space(&self) {
        // We may park: the task wakers this thread keeps go first (see
        // `unwind::before_park`), while no holder can hand us the monitor
        // (`hand_to_producer`).
        unwind::before_park();
        if let Some(waiter) = self.enqueue_for_space(|| Waiter::for_thread(0)) {
            self.woken_for_space(waiter.wait(false));
        }
    }

    /// [`wait_for_space`](Self::wait_for_space) for a task: `Some(waiter)`
    /// registered in `space` (poll it), or `None` if there is room to try
    /// again at once.
    #[cold]
    pub(crate) fn wait_for_space_async(&self, cx: &mut Context<'_>) -> Option<LoomArc<Waiter>> {
        self.enqueue_for_space(|| Waiter::for_task(cx.waker(), 0))
    }

    /// Registers a waiter (made by `make`) in `space` to be woken when the
    /// queue has room; `None` if it need not wait: the monitor was idle
    /// (we served it, which made room) or room appeared meanwhile.
    pub(super) fn enqueue_for_space(
        &self,
        make: impl FnOnce() -> LoomArc<Waiter>,
    ) -> Option<LoomArc<Waiter>> {
        // Nobody else can make room while we hold the monitor, and we
        // cannot run tasks while one of ours has the data.
        assert!(
            !unwind::runs_here(self.id()),
            "a task submitted to its own monitor whose queue is full: it would wait for ever \
             (raise the monitor's capacity, or submit from outside the task)"
        );
        if self.try_lock() {
            // Idle with a full queue: make room ourselves. Our task is not
            // pushed yet: a deferred panic waits for the submission's end.
            self.serve_keeping();
            return None;
        }
        let waiter = make();
        self.space.push(LoomArc::clone(&waiter));
        // SeqCst fence: pairs with the fence in `release`. Either the
        // releasing holder sees us in `space` (and wakes us when it makes
        // room), or we see the room it made, or the monitor idle.
        fence(SeqCst);
        // An idle monitor matters only with a task ready at the front:
        // if its producer is in flight, that producer's `after_push` serves
        // it (or wakes the server), and the release after that wakes us.
        // Withdrawing then would only spin until it publishes. Nor is an
        // idle monitor ours to take while its server serves: the server
        // runs the task (we wake it if it sleeps), and its stint wakes us
        // once there is room (`serve_server`, `release`); withdrawing
        // would spin until the server thread runs.
        let idle_with_work = self.lock.load(Relaxed) == 0 && self.queue.front_ready();
        if idle_with_work && self.server.is_some() && !saturation::saturated_now() {
            self.wake_sleeping_server();
            return Some(waiter);
        }
        if self.queue.has_space() || idle_with_work {
            // Withdraw; a notify that won the race is as good (or hands us
            // the monitor: only a thread waiter is handed it, see
            // `hand_to_producer`).
            // Withdrawing drops a task's waker (user code): its panic goes
            // on once the withdrawal is finished.
            let mut panics = sync_core::unwind::Panics::new();
            match waiter.cancel_catching(&mut panics) {
                // Our node stays in `space` until the holder sweeps it.
                Ok(()) => self.space_withdrawn(),
                Err(token) => self.woken_for_space(token),
            }
            panics.resume();
            return None;
        }
        Some(waiter)
    }

    /// A producer withdrew from `space` (an async `SubmitAsync` dropped while
    /// waiting, or a thread that found room after all): counted, and the
    /// withdrawn nodes are freed (by the withdrawing producer itself, if
    /// nobody pops `space` at the moment) once they outnumber the live
    /// ones (`sweep_space`). Not only by the monitor's holder: a holder
    /// busy in one long task would leave every node of the producers that
    /// gave up meanwhile in `space`.
    pub(crate) fn space_withdrawn(&self) {
        self.space_count.withdrew();
        self.sweep_space();
    }

    /// Takes the consumer role of `space` if nobody has it.
    pub(super) fn try_pop_space(&self) -> bool {
        // Acquire: pairs with the Release in `end_pop_space`, so our pops
        // come after the previous popper's.
        self.space_popper
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
    }

    /// Takes the consumer role of `space`, waiting for a producer that
    /// sweeps it (a few pops and pushes) to finish.
    pub(super) fn pop_space(&self) {
        let mut spins = 0u32;
        while !self.try_pop_space() {
            // Wrapping: only its residue counts, and a long wait must not
            // overflow it (a debug build would panic).
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                // The sweeper may wait for a CPU.
                sync_core::wait::give_way(None);
            } else {
                hint::spin_loop();
            }
        }
    }

    /// Lets go of the consumer role of `space`.
    pub(super) fn end_pop_space(&self) {
        // Release: pairs with the Acquire CAS in `try_pop_space`.
        self.space_popper.store(false, Release);
    }

    /// Frees the nodes of producers that withdrew from `space`, once they
    /// are at least as many as the live ones the last sweep kept (see
    /// [`SweepCount`]): `space` then holds about twice the producers
    /// waiting, whatever the number of waits cancelled, and a sweep's cost
    /// is paid by as many withdrawals. Anyone may call it: it sweeps only
    /// if the consumer role of `space` is free (else the next withdrawal,
    /// or the holder's next wake-up, sweeps).
    pub(super) fn sweep_space(&self) {
        if !self.space_count.due() || !self.try_pop_space() {
            return;
        }
        let kept = self.sweep_space_popping();
        self.end_pop_space();
        if kept {
            self.look_after_space();
        }
    }

    /// After a sweep put live producers back into `space`: whoever let go
    /// of the monitor while the sweep had them out found `space` empty and
    /// woke nobody. Like a producer that registers, we look at the monitor
    /// after a SeqCst fence (pairs with the fences in `release` and
    /// `release_served`: either that holder sees the producers, or we see
    /// the monitor let go); if it is free (or offered), we take it, wake
    /// the producers there is room for, and let go as a holder does. If it
    /// is held (by us, too, when a task of this monitor dropped a
    /// submission), its holder's release looks at `space` after us.
    pub(super) fn look_after_space(&self) {
        fence(SeqCst);
        if !self.take() {
            return;
        }
        self.wake_space();
        // Held: the cached verdict (see `serve_loop`).
        if self.server.is_some() && !saturation::saturated() {
            self.release_served();
            // Let go of: the producers woken above (see `notify_space`).
            unwind::wake_deferred();
        } else {
            // Keeping a deferred panic: a producer that withdrew on its way
            // to push its task (`enqueue_for_space`) sweeps here, and
            // resumed here the panic would unwind it before its task is
            // pushed (the task lost; a `call`'s never run). Its operation's
            // end resumes it; a dropped async submission resumes it itself.
            self.serve_keeping();
        }
    }

    /// [`sweep_space`](Self::sweep_space) for a caller that has the
    /// consumer role; `true` if it swept and put live producers back.
    pub(super) fn sweep_space_popping(&self) -> bool {
        if !self.space_count.due() {
            return false;
        }
        // The live producers go back in the order they waited (behind any
        // that came meanwhile). One that stays is woken as before (nothing
        // is lost: the nodes stay the same waiters).
        // SAFETY: we have the consumer role of `space`.
        unsafe { self.space_count.sweep(&self.space) }.kept > 0
    }

    /// A producer woken for space (its waiter was notified) gives up
    /// without pushing: the wake-up is passed on. If the monitor is idle we
    /// take it and serve, and its release wakes the next producers while
    /// there is room; if it is held, the holder's release does (it looks at
    /// `space` after its SeqCst fence, which pairs with ours).
    #[cold]
    pub(crate) fn pass_space_on(&self) {
        self.after_push();
    }

    /// The asynchronous submissions' step ([`SubmitAsync`]): runs `task` if the
    /// monitor is idle (serving what is queued), or queues it;
    /// `Err(task)` if the queue is full.
    pub(crate) fn try_submit(&self, task: Task<T, S>) -> Result<(), Task<T, S>> {
        if self.try_lock() {
            self.submit_job(task, true);
            return Ok(());
        }
        self.queue.push(task)?;
        // Queued: a deferred panic must not unwind this poll, whose future
        // would lose the task's completion (see `SubmitAsync::poll_queued`).
        self.after_push_keeping();
        Ok(())
    }

    /// Hands the held monitor to a producer thread waiting for space
    /// ([`SPACE_HELD`]): it serves, then pushes its task. `true` if one
    /// took it; we then touch the monitor no more. A producer that waits
    /// in a task (not a thread) is only woken ([`SPACE`]): a task runs when
    /// its executor polls it, which a combiner must not wait for.
    ///
    /// Unlike an offer, this needs no taker to come by: the producer is
    /// there, asleep, and the notify (Release, paired with its Acquire of
    /// the token) passes the monitor and the data as we left them.
    pub(super) fn hand_to_producer(&self) -> Handover {
        // SeqCst fence: as in `wake_space` (pairs with the producer's fence
        // in `wait_for_space`: either we see it in `space`, or it sees the
        // room or the offer and does not sleep).
        fence(SeqCst);
        // A producer sweeping `space`: skip this hand-over (the stint ends
        // by another).
        if self.space.is_empty() || !self.try_pop_space() {
            return Handover::Nobody;
        }
        let mut tasks = Vec::new();
        let mut handed = false;
        let mut withdrawn = 0;
        let mut backoff = Backoff::new();
        while !handed && !self.space.is_empty() {
            // SAFETY: we have the consumer role of `space`.
            match unsafe { self.space.pop() } {
                Some(w) if w.is_thread() => {
                    handed = w.notify(SPACE_HELD);
                    withdrawn += usize::from(!handed);
                }
                Some(w) => tasks.push(w),
                // A producer is half-way through its push (see
                // `wait_for_push`).
                None => wait_for_push(&mut backoff),
            }
        }
        if handed {
            // The monitor is the thread's now: the woken tasks' looks at it
            // are its holder's to answer.
            for w in &tasks {
                withdrawn += usize::from(!Self::notify_space(w));
            }
            self.space_count.left(withdrawn);
            self.end_pop_space();
            return Handover::Thread;
        }
        if tasks.is_empty() {
            self.space_count.left(withdrawn);
            self.end_pop_space();
            return Handover::Nobody;
        }
        // Let go first, then wake: each woken producer's look at the
        // monitor comes after our release (the Release store below is
        // sequenced before the notify's Release CAS of its token, which the
        // producer acquires before it looks).
        self.unlock_plain();
        let mut woken = false;
        for w in &tasks {
            let notified = Self::notify_space(w);
            woken |= notified;
            withdrawn += usize::from(!notified);
        }
        self.space_count.left(withdrawn);
        self.end_pop_space();
        if woken {
            return Handover::Tasks;
        }
        // All of them withdrew meanwhile: nobody is bound to look. Look as
        // a releasing holder does.
        if self.look_after_release() {
            Handover::Tasks
        } else {
            Handover::Retaken
        }
    }

    /// A producer woken while waiting for space: with [`SPACE_HELD`] it
    /// holds the monitor, handed over by a combiner after its batch, and
    /// serves (making room) before it pushes.
    pub(super) fn woken_for_space(&self, token: usize) {
        if token == SPACE_HELD {
            // As in `enqueue_for_space`: our task is pushed after this.
            self.serve_keeping();
        }
    }

    /// Wakes as many producers waiting for space as there are free slots.
    /// The caller holds the monitor; it takes the consumer role of `space`
    /// (waiting for a producer that sweeps it).
    ///
    /// Producers are woken only once the queue is at most half full: each
    /// then finds room for several tasks, instead of one wake-up (tens of
    /// microseconds) per slot freed.
    pub(super) fn wake_space(&self) {
        // SeqCst fence: as in `release`, for a holder that gives way by a
        // handoff (without releasing).
        fence(SeqCst);
        if self.space.is_empty() {
            return;
        }
        self.pop_space();
        // We hold the monitor: the producers put back are woken below, or
        // by our release.
        self.sweep_space_popping();
        self.wake_space_popping();
        self.end_pop_space();
    }

    /// [`wake_space`](Self::wake_space)'s wake-ups, with the consumer role
    /// of `space`.
    pub(super) fn wake_space_popping(&self) {
        if !self.room_for_waiters() {
            return;
        }
        let mut free = self.queue.capacity() - self.queue.len();
        let mut backoff = Backoff::new();
        // Re-check the room every time: producers woken first refill the
        // queue and wait in `space` again while this loop still runs; waking
        // them once more would only park them again (at 8 threads on 2 CPUs
        // that was a park and a wake-up per two operations).
        while free > 0 && !self.space.is_empty() && self.room_for_waiters() {
            // SAFETY: we have the consumer role of `space`.
            match unsafe { self.space.pop() } {
                Some(w) => {
                    if Self::notify_space(&w) {
                        free -= 1;
                    } else {
                        self.space_count.left(1);
                    }
                }
                // A producer is half-way through its push.
                None => wait_for_push(&mut backoff),
            }
        }
    }

    /// Wakes a producer waiting for space with [`SPACE`]; `false` if it had
    /// withdrawn. A thread is unparked at once. An async producer's waker
    /// is user code, which may poll its task on the spot and go on to use
    /// the monitor (a `call` once its task is queued): it runs once this
    /// thread has let go of the monitor (`unwind::wakeup_task_later`), where
    /// such a call finds it free (woken under it, the call queued its task
    /// for this very thread and waited for ever). Its panic is resumed then
    /// too.
    pub(super) fn notify_space(w: &LoomArc<Waiter>) -> bool {
        match Waiter::notify_later(w, SPACE) {
            Some(wake) if w.is_thread() => {
                // Unparked already by `notify_later`.
                wake.wake();
                true
            }
            Some(wake) => {
                unwind::wakeup_task_later(wake);
                true
            }
            None => false,
        }
    }

    /// Test hook: frees the withdrawn producers left in `space` (a sweep)
    /// and returns how many there were and how many withdrawals were
    /// counted for a sweep then. For a quiescent monitor: a withdrawn node
    /// that no count stands for stays until enough other producers
    /// withdraw.
    #[doc(hidden)]
    pub fn __test_space_audit(&self) -> (usize, usize) {
        self.pop_space();
        // SAFETY: we have the consumer role of `space`.
        let audit = unsafe { self.space_count.audit(&self.space) };
        self.end_pop_space();
        audit
    }

    /// Whether the queue has drained enough to wake producers waiting for
    /// space (at most half full).
    pub(super) fn room_for_waiters(&self) -> bool {
        self.queue.len() <= self.queue.capacity() / 2
    }
}
