//! The monitor's blocking methods (`call`, `submit`, `when`, `when_in`)
//! and the paths that run a task at once; the async forms are in
//! `api_async.rs`.

use core::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use ast_mutex::{AbstractState, StateSet};
// `std::sync::Arc`, not loom's: tasks are shared as trait objects, and
// loom's `Arc` cannot be coerced to one (the reference count is std's own,
// the protocol's atomics are all loom's).
use std::sync::Arc;
use sync_core::sync::atomic::Ordering::*;
use sync_core::sync::hint;

use crate::completion::{Completion, Outcome, RESULT_COPY_MAX, fits_inline};
use crate::order;
use crate::task::{
    AWAITER_HOLDS, Always, AsyncTask, BY_AWAITER, Body, CallJob, DONE, HANDOFF, InSet, Plain, Pre,
    Pred, Runner, Stated, Task,
};
use crate::unwind;

use super::*;

impl<T, S: AbstractState> Monitor<T, S> {
    /// Runs a task on the data and returns its result: synchronous
    /// delegation.
    ///
    /// If the monitor is idle, the calling thread runs `f` itself at once,
    /// then any tasks queued meanwhile (it is the combiner). Otherwise `f`
    /// is queued and the thread sleeps until a combiner has run it, or until
    /// the monitor is handed to it.
    ///
    /// Under [`Order::Strict`](crate::Order::Strict), first waits for this submitter's previous
    /// asynchronous task if it was on another monitor (rule 3, see
    /// [`Order`](crate::Order)). In async code use [`call_async`](Self::call_async),
    /// which awaits instead of parking.
    ///
    /// The result is written once, where the body returns it: a call costs
    /// no more stack for a large result than the body itself.
    ///
    /// # Deadlocks
    ///
    /// Parks the thread until the task has run. Called from a task on a single-threaded executor (tokio's
    /// current-thread runtime, `futures`' `LocalPool`) while another task of
    /// that executor must run first (it holds the monitor's work back, or
    /// submits what this waits for), it blocks that executor for ever: in
    /// async code use [`call_async`](Self::call_async), which awaits instead.
    ///
    /// A combiner runs the tasks queued behind its own before its `call`
    /// returns, so a body must not wait for what another call's result
    /// holds until that caller's code gets it: if one call returns the only
    /// permit of a pool and a task queued behind it waits for a permit of
    /// that pool, the combiner waits in that task with the permit still in
    /// its hands, for ever. (A lock would let the first caller return
    /// first.) Take such a permit outside the monitor, after `call`
    /// returns, or give it back inside the body.
    ///
    /// # Panics
    ///
    /// Resumes `f`'s panic (the monitor keeps serving). Panics if called
    /// from inside a task of this same monitor, or from a task of another
    /// monitor called from one, on the same thread (it would wait for ever;
    /// the panic then resumes in that task's waiter).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(vec![3, 1, 2]);
    /// let max = m.call(|v| {
    ///     v.sort();
    ///     *v.last().unwrap()
    /// });
    /// assert_eq!(max, 3);
    /// ```
    pub fn call<F, R>(&self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R + Send,
        R: Send,
    {
        order::before_plain_submit(self.id(), self.order);
        if self.try_lock_for_call() {
            if self.queue.is_empty() {
                // Idle: run it here, like a lock.
                return self.call_inline(f);
            }
            return self.call_queued(f, true);
        }
        // Below the innermost task too: a task of another monitor called
        // from one of ours runs on this thread, which holds ours.
        assert!(
            !unwind::runs_here(self.id()),
            "Monitor::call from a task of the same monitor: it would wait for ever"
        );
        match self.spin_for_call() {
            Some(true) => self.call_inline(f),
            Some(false) => self.call_queued(f, true),
            None => self.call_queued(f, false),
        }
    }

    /// A `call` that found the monitor held with nothing queued: its holder
    /// is running a task of its own, as a lock's holder runs its critical
    /// section. Like a lock's waiter, spin a short while for it to let go
    /// (backing off between looks) and take it then, rather than queue the
    /// task and wait to be run (or woken): the running caller keeps taking
    /// an idle monitor, and nobody is woken. `Some(empty)` once taken
    /// (`empty`: nothing queued, run inline); `None` if tasks are queued (a
    /// combiner or a server serves them: queue behind them, in FIFO order)
    /// or the holder did not let go within the spin.
    #[inline]
    pub(super) fn spin_for_call(&self) -> Option<bool> {
        for round in 0..CALL_LOCK_SPINS {
            if !self.queue.is_empty() {
                return None;
            }
            // Exponential backoff between looks: a spinner that reads the
            // lock word after every pause pulls its line away from the
            // holder, whose next take and release then miss the cache
            // (the report's am/call rows: 3-6x parking_lot with a look per
            // pause, under 2x with the backoff). A holder that calls again
            // and again keeps the line to itself between two looks.
            for _ in 0..1usize << round.min(CALL_BACKOFF_MAX) {
                hint::spin_loop();
            }
            let s = self.lock.load(Relaxed);
            if (s == 0 || s & STATE == HANDOVER) && self.try_lock_for_call() {
                return Some(self.queue.is_empty());
            }
        }
        None
    }

    /// Runs `f` under the held monitor and returns its result as the body
    /// returns it: no `Outcome`, no `catch_unwind`. Then the waiting tasks
    /// are re-checked and the monitor is served, as after any task; if `f`
    /// panics, the same happens while the panic unwinds to the caller
    /// (whose task it is), so the monitor is never left held.
    ///
    /// A panic deferred meanwhile (a result nobody took whose `Drop`
    /// panicked) goes on only once the result is in a place this function
    /// can drop it from ([`unwind::finish`]): resumed from the `Drop` of a
    /// local after the body's result was written into the caller's place,
    /// it leaked that result (Rust does not drop a function's return value
    /// when a later local's drop unwinds), and a permit or lease in it was
    /// never given back. A result larger than [`RESULT_COPY_MAX`] is
    /// not copied at all: it is written once, in the caller's place, and
    /// costs no more stack than the body itself; a panic deferred then is
    /// kept for this thread's next operation's end (only what the serve
    /// deferred is delivered), as an async poll keeps one.
    pub(super) fn call_inline<F, R>(&self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        let in_place = const { size_of::<R>() > RESULT_COPY_MAX };
        let after = InlineCallEnd { m: self, in_place };
        // Apart, so that the in-place frame has no room for a copy.
        if in_place {
            let body = || {
                self.exec.with_mut(|e| {
                    // SAFETY: we hold the monitor; the relay in `after`'s
                    // drop comes after this borrow ends.
                    order::as_task(|| f(unsafe { &mut (*e).data }))
                })
            };
            Self::call_inline_in_place(after, body)
        } else {
            let body = || {
                self.exec.with_mut(|e| {
                    // SAFETY: as above.
                    order::as_task_moving(|| f(unsafe { &mut (*e).data }))
                })
            };
            Self::call_inline_copied(after, body)
        }
    }

    /// `call_inline` for a large result: `after` is dropped after the
    /// tail expression, once the result is in our caller's place.
    fn call_inline_in_place<R>(after: InlineCallEnd<'_, T, S>, body: impl FnOnce() -> R) -> R {
        let _after = after;
        unwind::running(_after.m.id(), body)
    }

    /// `call_inline` for a small result: held here until the monitor is
    /// served, then handed to `unwind::finish`.
    fn call_inline_copied<R>(after: InlineCallEnd<'_, T, S>, body: impl FnOnce() -> R) -> R {
        let r = unwind::running(after.m.id(), body);
        // `after`'s end once the body returned, in this frame: its drop glue
        // is a call of its own (the unwind above uses it too). Not dropped
        // again if this unwinds, as after a `drop` that unwinds.
        core::mem::ManuallyDrop::new(after).end_returned();
        unwind::finish(r)
    }

    /// `submit` on an idle monitor, for a result that fits a completion
    /// (apart, so that `submit`'s own frame has no room for an outcome):
    /// runs the task, writing its outcome straight into the completion at
    /// `out` (in `submit`'s caller's place once inlined), then serves. A
    /// completion made on this frame and returned was copied out with wide
    /// loads of the outcome's narrow stores (a store-forwarding stall per
    /// copy: most of an uncontended `submit`'s time).
    #[inline(never)]
    fn submit_inline<F, R>(&self, f: F, out: &mut MaybeUninit<Completion<R>>)
    where
        F: FnOnce(&mut T) -> R,
    {
        // SAFETY: `out` is valid for writes; the outcome is written below
        // (`run_inline` writes it whether the body returns or panics)
        // before `out` is read.
        let outcome = unsafe { Completion::init_ready(out.as_mut_ptr()) };
        // SAFETY: `outcome` points into `out`, valid for a write of an
        // `Outcome<R>`.
        unsafe { self.run_inline(f, outcome) };
        self.serve_loop();
        // The operation's end (`unwind::finish`), in place: the completion
        // is not moved (a copy of it costs `submit` a third of its time).
        if unwind::pending() {
            // SAFETY: `out` was written above; if the panic goes on it is
            // dropped there, and `submit` unwinds without reading it.
            unsafe { unwind::finish_in_place(out) };
        }
    }

    #[inline(never)]
    pub(super) fn when_inline<P, F, R>(&self, pre: P, body: F) -> Result<Completion<R>, (P, F)>
    where
        P: Fn(&T) -> bool,
        F: FnOnce(&mut T) -> R,
    {
        self.run_op_if_idle(pre, body).map(Completion::from_outcome)
    }

    /// Runs `f` under the held monitor; the waiting tasks are re-checked.
    /// # Safety
    ///
    /// `out` is valid for a write of an `Outcome<R>`, written here once.
    pub(super) unsafe fn run_inline<F, R>(&self, f: F, out: *mut Outcome<R>)
    where
        F: FnOnce(&mut T) -> R,
    {
        let guard = Unlock(self);
        unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: we hold the monitor.
                let exec = unsafe { &mut *e };
                // The value is written where it stays; the unwind's result
                // is only looked at (no copy of a wide outcome).
                let ran = catch_unwind(AssertUnwindSafe(|| {
                    let r = order::as_task(|| f(&mut exec.data));
                    // SAFETY: our caller's contract.
                    unsafe { out.write(Outcome::Value(r)) };
                }));
                if let Err(p) = ran {
                    // SAFETY: our caller's contract; the body panicked
                    // before the write above.
                    unsafe { out.write(Outcome::Panicked(p)) };
                }
                if exec.has_waiting() {
                    exec.relay();
                }
            })
        });
        core::mem::forget(guard);
    }

    #[cold]
    pub(super) fn call_queued<F, R>(&self, f: F, locked: bool) -> R
    where
        F: FnOnce(&mut T) -> R + Send,
        R: Send,
    {
        let job = CallJob::new(f);
        // SAFETY: `job` stays on this frame until its waiter is notified:
        // we return only after `wait` gave DONE, or after running it
        // ourselves following HANDOFF.
        let task = unsafe { job.task::<T, S>() };
        // Whether we served: only our own serve can answer the job before
        // we wait.
        let served = if locked {
            // We hold the monitor, with tasks queued before us: queue ours
            // behind them (FIFO keeps other workers' and our own earlier
            // tasks first) and serve.
            self.push_held(task);
            // Keeping a deferred panic (another task's): resumed here, it
            // would unwind this frame while `job` may still be queued.
            self.serve_keeping_for(job.mark());
            true
        } else {
            // We may park for the result: the task wakers this thread keeps
            // go first (see `unwind::before_park`), before the task is
            // queued, while no holder can hand the monitor to us.
            unwind::before_park();
            self.push(task);
            let serve = self.take_after_push();
            if serve {
                self.serve_keeping_for(job.mark());
            }
            serve
        };
        // Either serve above may have kept task wakers (a task it ran
        // enabled another's `when_async`, and a task body runs below us):
        // they go before we may park too, or a holder that waits for one
        // of those tasks never serves ours. Before `wait`, which tells
        // holders that we wait: none hands us the monitor meanwhile. Not
        // if our own serve ended by handing the monitor to ourselves: we
        // do not park, and the hook's drops of the results nobody took are
        // user code that may call the monitor, held for us, and wait for
        // ever for this very thread. They go once the call has let go of
        // it, at the operation's end. The job's token is read only after
        // our own serve: read on every contended call (a line the holder
        // that runs our task is about to write), it slowed the report's
        // `am/call` rows.
        if !(served && job.handed_to_itself()) {
            unwind::before_park();
        }
        match job.wait() {
            // Our task is done: now a deferred panic may go on (the
            // outcome, ours, is dropped first).
            DONE => unwrap_call(unwind::finish(job.take_result())),
            HANDOFF => {
                // The monitor is ours, held, and our task is the one the
                // previous holder popped for us: run it here.
                self.call_inline(job.take_body())
            }
            t => unreachable!("unexpected token {t}"),
        }
    }

    /// Submits a task and returns its [`Completion`] at once: asynchronous
    /// delegation.
    ///
    /// If the monitor is idle, the calling thread runs `f` at once (the
    /// completion is then ready) and any tasks queued meanwhile. Otherwise
    /// `f` is queued for the holder; if the queue is full, the thread waits
    /// for space (helping to run the queue if the monitor becomes idle).
    /// That wait parks the thread: in async code use
    /// [`submit_async`](Self::submit_async), which awaits instead.
    ///
    /// Under [`Order::Strict`](crate::Order::Strict), first waits (parked, too) for this
    /// submitter's previous asynchronous task if it was on another monitor
    /// (rule 3, see [`Order`](crate::Order)).
    ///
    /// The returned [`Completion`] may be dropped: the task still runs
    /// (fire and forget, the paper's asynchronous call). To give a task up,
    /// [`cancel`](Completion::cancel) its completion.
    ///
    /// # Cancel safety
    ///
    /// Nothing to cancel in the call itself (it returns once the task is
    /// queued); see [`Completion`]'s.
    ///
    /// # Deadlocks
    ///
    /// Parks the thread while the queue is full or program order makes it
    /// wait. Called from a task on a single-threaded executor (tokio's
    /// current-thread runtime, `futures`' `LocalPool`) while another task of
    /// that executor must run first (it holds the monitor's work back, or
    /// submits what this waits for), it blocks that executor for ever: in
    /// async code use [`submit_async`](Self::submit_async), which awaits.
    ///
    /// # Panics
    ///
    /// Never for `f`'s panic: it resumes in the completion's waiter. Panics
    /// if called from inside a task of this same monitor (or of another
    /// monitor called from one, on the same thread) while its queue is
    /// full: only the task's own thread could make room, and it is busy
    /// running the task (the panic then resumes in that task's waiter).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(0u32);
    /// let c = m.submit(|n| {
    ///     *n += 1;
    ///     *n
    /// });
    /// assert_eq!(c.wait(), 1);
    /// ```
    pub fn submit<F, R>(&self, f: F) -> Completion<R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        order::before_plain_submit(self.id(), self.order);
        if self.try_lock() {
            // A result too large for the completion itself is written in
            // place, in the task's slot (see `fits_inline`).
            if self.queue.is_empty() && fits_inline::<R>() {
                let mut out = MaybeUninit::uninit();
                self.submit_inline(f, &mut out);
                // SAFETY: `submit_inline` wrote the completion (and returned:
                // had a deferred panic gone on, it would have dropped it).
                return unsafe { out.assume_init() };
            }
            return self.submit_task(AsyncTask::new_arc(Always, Plain(f)), false, true);
        }
        self.submit_task(AsyncTask::new_arc(Always, Plain(f)), false, false)
    }

    /// Submits a task that runs once `pre` holds: the paper's `waituntil`.
    ///
    /// Whoever holds the monitor evaluates `pre` (the paper's closure of
    /// predicates): when the task comes out of the queue, and again after
    /// every task that runs while it waits, until it holds. Then `body` runs
    /// at once, in the same critical section. Nobody is woken to evaluate a
    /// predicate; the task's waiter is woken once, with the result.
    ///
    /// `pre` should be cheap and must not have side effects: it is evaluated
    /// any number of times.
    ///
    /// While the task waits, its submitter's later tasks on this monitor go
    /// ahead (the one that enables it included); under
    /// [`Order::Strict`](crate::Order::Strict) the submitter's next
    /// submission to *another* monitor waits for it to complete or be
    /// [cancelled](Completion::cancel) (rule 3, see [`Order`](crate::Order)).
    /// At most [`WAITING_LIMIT`](crate::WAITING_LIMIT) of a submitter's
    /// tasks wait at once. In async code use [`when_async`](Self::when_async),
    /// which awaits instead of parking.
    ///
    /// # Deadlocks
    ///
    /// Parks the thread while the queue is full or program order makes it
    /// wait. Called from a task on a single-threaded executor (tokio's
    /// current-thread runtime, `futures`' `LocalPool`) while another task of
    /// that executor must run first (it holds the monitor's work back, or
    /// submits what this waits for), it blocks that executor for ever.
    ///
    /// # Panics
    ///
    /// Never for `pre`'s or `body`'s panic: it resumes in the completion's
    /// waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let m = Monitor::new(0);
    /// let c = m.when(|n| *n >= 2, |n| *n * 10);
    /// m.submit(|n| *n += 1);
    /// assert!(!c.is_done());
    /// m.submit(|n| *n += 1);
    /// assert_eq!(c.wait(), 20);
    /// ```
    pub fn when<P, F, R>(&self, pre: P, body: F) -> Completion<R>
    where
        P: Fn(&T) -> bool + Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        order::before_submit(self.id(), self.order);
        // Idle with nothing queued and `pre` true: run at once, as `submit`
        // does (no allocation, no wake-up); a large result goes through the
        // task's slot (see `fits_inline`).
        let (pre, body) = if fits_inline::<R>() {
            match self.when_inline(pre, body) {
                Ok(c) => return unwind::finish(c),
                Err(back) => back,
            }
        } else {
            (pre, body)
        };
        let task = AsyncTask::new_arc(Pred(pre), Plain(body));
        let locked = self.try_lock();
        self.submit_task(task, true, locked)
    }

    /// Submits a task that runs once the monitor's abstract state is in
    /// `set`; its body returns its result and the next abstract state.
    ///
    /// Only tasks whose entry set contains the current state are looked at:
    /// their order of submission decides, and no predicate is evaluated.
    ///
    /// # Deadlocks
    ///
    /// Parks the thread while the queue is full or program order makes it
    /// wait. Called from a task on a single-threaded executor (tokio's
    /// current-thread runtime, `futures`' `LocalPool`) while another task of
    /// that executor must run first (it holds the monitor's work back, or
    /// submits what this waits for), it blocks that executor for ever: in
    /// async code use [`when_in_async`](Self::when_in_async), which awaits.
    ///
    /// # Panics
    ///
    /// If `set` is empty (the task could never run). A panic in `body`
    /// resumes in the completion's waiter; the abstract state is then left
    /// as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// ast_mutex::states! { enum Door { Closed, Open } }
    ///
    /// let m = Monitor::builder()
    ///     .order(Order::Relaxed)
    ///     .build_with_states(Door::Closed, 0u32);
    /// let enter = m.when_in(Door::Open, |visits| {
    ///     *visits += 1;
    ///     (*visits, Door::Open)
    /// });
    /// m.when_in(Door::Closed, |_| ((), Door::Open));
    /// assert_eq!(enter.wait(), 1);
    /// ```
    pub fn when_in<F, R>(&self, set: impl Into<StateSet<S>>, body: F) -> Completion<R>
    where
        F: FnOnce(&mut T) -> (R, S) + Send + 'static,
        R: Send + 'static,
        T: 'static,
        S: Send,
    {
        let set = entry_set(set.into(), "when_in");
        order::before_submit(self.id(), self.order);
        let task = AsyncTask::new_arc(InSet(set), Stated(body));
        let locked = self.try_lock();
        self.submit_task(task, true, locked)
    }

    /// For an OR operand (`compose::or`) and `when`: if the monitor is idle with
    /// nothing queued, takes it, evaluates `pre` and, if it holds, runs
    /// `body` in the same critical section (then the waiting tasks are
    /// re-checked, as after any task); then serves and lets go as `submit`
    /// does. `Err((pre, body))` if the monitor was busy, or queued tasks
    /// had to run first (they are served), or `pre` was false: nothing of
    /// this operand ran. A panic in `pre` or `body` is the outcome (`pre`
    /// and `body` are then dropped here).
    pub(crate) fn run_op_if_idle<P, F, R>(&self, pre: P, body: F) -> Result<Outcome<R>, (P, F)>
    where
        P: Fn(&T) -> bool,
        F: FnOnce(&mut T) -> R,
    {
        if !self.try_lock() {
            return Err((pre, body));
        }
        if !self.queue.is_empty() {
            // Tasks queued before us come first: serve them, and let the
            // caller queue the operand behind whatever remains (a deferred
            // panic waits for the caller's end: `unwind::finish`).
            self.serve_keeping();
            return Err((pre, body));
        }
        let guard = Unlock(self);
        // What ran (or panicked) is dropped once we have let go of the
        // monitor: drops are user code, which may use it (see `unwind`).
        let mut spent = (None, None);
        let outcome = unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: we hold the monitor.
                let exec = unsafe { &mut *e };
                match catch_unwind(AssertUnwindSafe(|| pre(&exec.data))) {
                    // Nothing changed: no waiting task to re-check.
                    Ok(false) => Err((pre, body)),
                    Ok(true) => {
                        let outcome = match catch_unwind(AssertUnwindSafe(|| {
                            order::as_task(|| body(&mut exec.data))
                        })) {
                            Ok(r) => Outcome::Value(r),
                            Err(p) => Outcome::Panicked(p),
                        };
                        spent.0 = Some(pre);
                        exec.relay();
                        Ok(outcome)
                    }
                    Err(p) => {
                        spent = (Some(pre), Some(body));
                        Ok(Outcome::Panicked(p))
                    }
                }
            })
        });
        core::mem::forget(guard);
        // The caller ends with `unwind::finish` once the outcome is out.
        self.serve_keeping();
        if core::mem::needs_drop::<(P, F)>() {
            unwind::drop_caught(spent);
        }
        outcome
    }

    /// Queues `task` (or runs it, if `locked` and the queue is empty) and
    /// returns its completion.
    pub(super) fn submit_task<P, B, R>(
        &self,
        task: Arc<AsyncTask<T, S, P, B, R>>,
        conditional: bool,
        locked: bool,
    ) -> Completion<R>
    where
        P: Pre<T, S> + 'static,
        B: Body<T, S, R> + 'static,
        R: Send + 'static,
        T: 'static,
    {
        let (task, completion, pending) = task.handles(self.id(), self.order, conditional);
        self.submit_job(task, locked);
        if let Some(pending) = pending {
            if !completion.is_done() {
                order::submitted(self.id(), conditional, &pending, self.order);
            }
        }
        // Queued (or run) and recorded: a deferred panic may go on.
        unwind::finish(completion)
    }

    /// Queues `task`, or runs it if `locked` (the caller took the monitor)
    /// and nothing is queued; serves if it holds the monitor.
    /// Submits a task whose awaiting future runs its body itself (see
    /// `Runner`), from that future's poll: with the monitor idle and
    /// nothing queued, the poll takes it (even from a server that serves,
    /// as `call` does: a server would only signal the task back) and
    /// executes the task here, so a precondition that holds runs the body
    /// on this thread, into the completion this poll reads; otherwise the
    /// task is queued and a holder signals it once it can run.
    /// `Err(task)` if the queue is full.
    ///
    /// A deferred panic (another task's, caught while serving) is kept, as
    /// by `try_submit`: resumed here, it would unwind a poll whose task is
    /// queued, or has run with its result in the completion (a take done,
    /// whose item the unwound future would drop).
    pub(crate) fn submit_awaited(
        &self,
        task: Task<T, S>,
        runner: &Runner,
    ) -> Result<(), Task<T, S>> {
        if !self.try_lock_for_call() {
            self.queue.push(task)?;
            self.after_push_keeping();
            return Ok(());
        }
        if self.queue.is_empty() {
            runner.set(AWAITER_HOLDS);
            self.execute_own(task);
            // Filed as waiting (if it did not run): later holders signal it.
            runner.set(BY_AWAITER);
        } else {
            // Tasks queued before it come first.
            self.push_held(task);
        }
        self.serve_keeping();
        Ok(())
    }

    /// A deferred panic (another task's, caught while serving) is kept for
    /// the caller's end ([`unwind::finish`]), or for the next poll that
    /// changes nothing (an async submission's).
    pub(crate) fn submit_job(&self, task: Task<T, S>, locked: bool) {
        if locked {
            if self.queue.is_empty() {
                self.execute_own(task);
            } else {
                self.push_held(task);
            }
            self.serve_keeping();
        } else {
            self.push(task);
            self.after_push_keeping();
        }
    }
}

/// A `when_in` task's entry set, as a mask.
///
/// # Panics
///
/// If `set` is empty (the task could never run); `method` names the caller.
pub(super) fn entry_set<S: AbstractState>(set: StateSet<S>, method: &str) -> u64 {
    assert!(
        !set.is_empty(),
        "Monitor::{method} with an empty set of states: the task could never run"
    );
    set.bits()
}

fn unwrap_call<R>(outcome: Outcome<R>) -> R {
    match outcome {
        Outcome::Value(r) => r,
        Outcome::Panicked(p) => resume_unwind(p),
        Outcome::Discarded => unreachable!("a call is never discarded"),
    }
}

/// Relays and serves once the body is done ([`end_returned`]), or as it
/// unwinds, or once a result written in place is there (its drop).
///
/// [`end_returned`]: InlineCallEnd::end_returned
struct InlineCallEnd<'a, T, S: AbstractState> {
    m: &'a Monitor<T, S>,
    /// The result is written straight into our caller's place.
    in_place: bool,
}
impl<T, S: AbstractState> Drop for InlineCallEnd<'_, T, S> {
    /// The end for a body that unwinds, or whose result is in our
    /// caller's place (a body that returned a result to copy ends with
    /// `end_returned` instead).
    #[inline(never)]
    fn drop(&mut self) {
        let m = self.m;
        relay_if_waiting(m);
        if self.in_place && !std::thread::panicking() {
            // The result is already in our caller's place, out of
            // reach: a deferred panic waits for the next operation.
            m.serve_loop();
            unwind::deliver_keeping();
        } else {
            // The body's own panic unwinds: a deferred one is
            // dropped (see `unwind::resume_deferred`).
            m.serve();
        }
    }
}

impl<T, S: AbstractState> InlineCallEnd<'_, T, S> {
    /// The end once the body returned a result to copy, for a caller that
    /// does not drop `self` then.
    #[inline(always)]
    fn end_returned(&self) {
        let m = self.m;
        relay_if_waiting(m);
        // Our caller's `finish` resumes a deferred panic, the result
        // dropped first.
        m.serve_loop();
    }
}

/// The relay after an inline call's body, while `m` is held. Most
/// monitors have no waiting task most of the time: then nothing to relay,
/// and no user code runs here.
#[inline(always)]
fn relay_if_waiting<T, S: AbstractState>(m: &Monitor<T, S>) {
    // SAFETY: we hold the monitor; a shared look.
    if m.exec.with(|e| unsafe { (*e).has_waiting() }) {
        relay_held(m);
    }
}

/// [`relay_if_waiting`]'s relay (some task waits): out of line, since most
/// calls have none.
#[cold]
#[inline(never)]
fn relay_held<T, S: AbstractState>(m: &Monitor<T, S>) {
    let guard = Unlock(m);
    unwind::running(m.id(), || {
        m.exec.with_mut(|e| {
            // SAFETY: we hold the monitor.
            unsafe { (*e).relay() }
        })
    });
    core::mem::forget(guard);
}
