//! The asynchronous submissions' futures: [`SubmitAsync`] (a task queued, or
//! run, once there is room and program order allows it, then its result),
//! [`Enqueue`] (the same, up to the queuing: its [`Completion`]) and
//! [`CallAsync`].

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use ast_mutex::AbstractState;
use sync_core::sync::Arc as LoomArc;
use sync_core::waiter::Waiter;
// `std::sync::Arc`, not loom's: tasks are shared as trait objects (see
// `task`).
use std::sync::Arc;

use crate::completion::Completion;
use crate::monitor::Monitor;
use crate::order::{self, OrderWait, Pending};
use crate::task::{AsyncTask, BY_AWAITER, BY_HOLDER, Body, Job, Pre, Task};
use crate::unwind;

/// The submission of a task to a [`Monitor`] that waits without blocking
/// the thread, and its result: made by [`Monitor::submit_async`],
/// [`Monitor::when_async`] and [`Monitor::when_in_async`]. Awaited once,
/// it outputs the task's result.
///
/// Polling it first awaits what program order asks (in a task body or a
/// [`worker`](crate::worker) scope: the submitter's previous task if it was
/// on another monitor under [`Order::Strict`](crate::Order::Strict), and
/// the oldest of its waiting tasks beyond
/// [`WAITING_LIMIT`](crate::WAITING_LIMIT)), then queues the task, awaiting
/// space if the queue is full (the task is registered in the monitor's
/// queue of producers waiting for space, woken once the queue has drained
/// to half), then awaits the task's result. If the monitor is idle, the
/// poll runs the task and those queued meanwhile itself, like the
/// synchronous methods.
///
/// To keep the task's [`Completion`] instead of awaiting its result (to
/// submit now and collect later, as [`Monitor::submit`] does, with
/// back-pressure that awaits), use [`completion`](Self::completion).
///
/// # Cancel safety
///
/// Dropping the future withdraws the task if it has not started, as
/// [`Completion::cancel`] does: before it was queued, it never is (a
/// producer woken for space that is dropped before it used the room passes
/// the wake-up on, so no other producer is left waiting); once queued, it
/// is withdrawn unless the monitor has started it. A task with a
/// precondition ([`Monitor::when_async`], [`Monitor::when_in_async`]) runs
/// only in this future's poll (a holder that finds its precondition true
/// wakes the future instead of running it), so a timeout around it loses
/// nothing: its body either ran and its result was output, or never runs.
/// A task without a precondition ([`Monitor::submit_async`],
/// [`Monitor::call_async`]) is run by the monitor's holder: one that
/// started between the timeout and the drop runs to its end (the data sees
/// the whole task) and its result is dropped; to keep it, await
/// [`completion`](Self::completion) and [`cancel`](Completion::cancel) it.
///
/// # Panics
///
/// Resumes the task's panic. Polling it after it returned `Ready` panics.
/// Polling it from inside a task of the same monitor while its queue is
/// full panics (only that task's thread could make room).
///
/// # Examples
///
/// ```
/// use active_monitor::Monitor;
///
/// let m = Monitor::builder().capacity(1).build(0u64);
/// futures::executor::block_on(async {
///     for i in 1..=10 {
///         // Awaits space when the queue is full, instead of parking, then
///         // the task's result.
///         let n = m.submit_async(move |n| {
///             *n += i;
///             *n
///         });
///         assert_eq!(n.await, i * (i + 1) / 2);
///     }
/// });
/// ```
#[must_use = "the task is submitted only when the future is awaited"]
pub struct SubmitAsync<'a, T, S: AbstractState, R> {
    monitor: &'a Monitor<T, S>,
    /// The task, until it is submitted.
    task: Option<Task<T, S>>,
    /// Its completion: awaited once the task is submitted.
    completion: Option<Completion<R>>,
    /// The task as program order records it, if it does.
    pending: Option<Arc<dyn Pending>>,
    /// Whether the task has a precondition.
    conditional: bool,
    /// Awaiting an earlier task of the submitter (program order).
    order: Option<OrderWait>,
    /// Registered in the monitor's queue of producers waiting for space.
    space: Option<LoomArc<Waiter>>,
    /// A conditional task whose body this future runs itself (see
    /// `Runner`): the task, to submit again when a holder signals it.
    own: Option<Arc<dyn Job<T, S>>>,
    /// Published once already, as `own`, before [`completion`](Self::completion)
    /// made it the holders' and `task` a second reference to publish.
    republished: bool,
}

impl<'a, T, S: AbstractState, R> SubmitAsync<'a, T, S, R> {
    pub(crate) fn new<P, B>(
        monitor: &'a Monitor<T, S>,
        task: Arc<AsyncTask<T, S, P, B, R>>,
        conditional: bool,
    ) -> Self
    where
        P: Pre<T, S> + 'static,
        B: Body<T, S, R> + 'static,
        R: Send + 'static,
        T: 'static,
    {
        let (task, completion, pending) = task.handles(monitor.id(), monitor.order(), conditional);
        // A task with a precondition runs in this future's poll (until
        // `completion` hands its completion out): a holder on another
        // thread only signals it. Set before the task is published.
        let own = match (&task, completion.runner()) {
            (Task::Shared(job), Some(runner)) if conditional => {
                runner.set(BY_AWAITER);
                Some(Arc::clone(job))
            }
            _ => None,
        };
        Self {
            monitor,
            task: Some(task),
            completion: Some(completion),
            pending,
            conditional,
            order: None,
            space: None,
            own,
            republished: false,
        }
    }

    /// Awaits only until the task is queued (or has run), and outputs its
    /// [`Completion`] instead of its result: [`Monitor::submit`] for async
    /// code, whose waits (a full queue, program order) await instead of
    /// parking the thread.
    ///
    /// In a task body or a [`worker`](crate::worker) scope, the task counts
    /// for program order until it has finished (the submitter's next
    /// submission to another monitor awaits it under
    /// [`Order::Strict`](crate::Order::Strict)); outside one, an async task
    /// has no record, and its handles order nothing.
    ///
    /// Called on a [`when_async`](Monitor::when_async) or
    /// [`when_in_async`](Monitor::when_in_async) future that was already
    /// polled, it hands the task, which was that future's to run, to the
    /// holders, as if it had been called first.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it is ready withdraws the submission (the
    /// task is never queued, or is withdrawn if an earlier poll queued it).
    /// The [`Completion`] it outputs behaves as `submit`'s: dropping it lets
    /// the task run.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let m = Monitor::builder().order(Order::Relaxed).build(0);
    /// futures::executor::block_on(async {
    ///     let c = m.when_async(|n| *n > 0, |n| *n * 10).completion().await;
    ///     m.submit_async(|n| *n = 4).await;
    ///     assert_eq!(c.await, Ok(40));
    /// });
    /// ```
    pub fn completion(mut self) -> Enqueue<'a, T, S, R> {
        // The completion goes to the caller, who may drop it: the holder
        // runs the task.
        if let Some(job) = self.own.take() {
            if let Some(runner) = self.completion.as_ref().and_then(Completion::runner) {
                runner.set(BY_HOLDER);
            }
            if self.task.is_none() {
                // Polled before: the task is published as this future's to
                // run, and a holder may have signalled it already (it then
                // left the monitor, and nobody would ever run it) or may
                // still read the old `who`. Publish it again, now the
                // holders': whichever reference a holder claims first runs
                // it, and the other leaves as finished (`check`).
                self.task = Some(Task::Shared(job));
                self.republished = true;
            }
        }
        Enqueue { submit: self }
    }

    /// The steps up to the task's queuing: program order, then room.
    fn poll_submit(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let m = self.monitor;
        loop {
            // Program order first, in every round: a task that shares our
            // submitter may have submitted while we waited for space.
            if let Some(wait) = &mut self.order {
                if wait.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // It may hold the awaited task's last reference, with a
                // result nobody took: a panic in that drop is deferred (see
                // `order::next_wait`).
                if let Some(wait) = self.order.take() {
                    unwind::drop_caught(wait);
                }
            }
            if let Some(wait) = order::to_await(m.id(), m.order(), self.conditional) {
                self.order = Some(wait);
                continue;
            }
            if let Some(waiter) = &self.space {
                if waiter.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // Woken: there is room (unless others took it first).
                self.space = None;
            }
            let task = self.task.take().expect("checked by the caller");
            let runner = self
                .own
                .as_ref()
                .and(self.completion.as_ref())
                .and_then(Completion::runner);
            let submitted = match runner {
                Some(runner) => m.submit_awaited(task, runner),
                None => m.try_submit(task),
            };
            match submitted {
                Ok(()) => return Poll::Ready(()),
                Err(task) => {
                    self.task = Some(task);
                    // `None`: room appeared (or we made it): try again.
                    self.space = m.wait_for_space_async(cx);
                }
            }
        }
    }

    /// Once queued: the task's result. The future borrows the monitor,
    /// which therefore outlives the task: nothing can discard it.
    #[inline(never)]
    fn poll_result(&mut self, cx: &mut Context<'_>) -> Poll<R> {
        let c = self.completion.as_mut().expect("checked on entry");
        let poll = c.poll_value(cx);
        if poll.is_ready() {
            self.completion = None;
        }
        poll
    }

    /// `poll_submit`, with a panic caught in another waiter's waker while
    /// we registered (see `unwind`) resumed in a poll that changes nothing:
    /// before this poll's steps, or once it is Pending. Never after the
    /// task was queued, whose completion would be lost in the unwind: then
    /// the panic stays kept, and only what the poll's serving deferred is
    /// delivered (the wake-ups, and the drops of results nobody took, which
    /// would otherwise wait for this thread's next operation).
    fn poll_queued(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.task.is_none() {
            return Poll::Ready(());
        }
        unwind::resume_deferred();
        let poll = self.poll_submit(cx);
        if poll.is_pending() {
            unwind::resume_deferred();
        } else {
            unwind::deliver_keeping();
        }
        poll
    }
}

impl<T, S: AbstractState, R> Future for SubmitAsync<'_, T, S, R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        assert!(
            this.completion.is_some(),
            "SubmitAsync polled after it returned Ready"
        );
        loop {
            if this.poll_queued(cx).is_pending() {
                return Poll::Pending;
            }
            if this.own.is_none() || !this.signalled(cx) {
                break;
            }
            // A holder found the precondition true: submit it again, to
            // run it here if the monitor is idle.
            this.task = this.own.as_ref().map(|job| Task::Shared(Arc::clone(job)));
        }
        // Apart, and the tail: a large result is read straight into our
        // caller's place, and no frame above the task's run holds room
        // for it.
        this.poll_result(cx)
    }
}

impl<T, S: AbstractState, R> SubmitAsync<'_, T, S, R> {
    /// For a task this future runs itself, once queued: whether a holder
    /// signalled it (it left the monitor), looked at after registering
    /// `cx` for the signal (which wakes it), unless it has finished.
    fn signalled(&mut self, cx: &mut Context<'_>) -> bool {
        let c = self.completion.as_ref().expect("checked on entry");
        if c.is_done() {
            return false;
        }
        let runner = c.runner().expect("a task this future runs");
        c.register(cx.waker());
        runner.take_signal()
    }
}

impl<T, S: AbstractState, R> Drop for SubmitAsync<'_, T, S, R> {
    fn drop(&mut self) {
        // Withdrawing drops the task's waker (user code), and the serve or
        // sweep it may make resumes or keeps a panic of this thread's (a
        // foreign one, kept by an earlier poll): each goes on only once
        // this drop has finished (dropped if unwinding), after what we own
        // is dropped below. Left to the drop glue, our task (never queued:
        // the body and its captures) and the completion were dropped while
        // that panic unwound, and a `Drop` there that panicked aborted the
        // process.
        let mut panics = sync_core::unwind::Panics::new();
        let m = self.monitor;
        let mut withdrew = false;
        if let Some(waiter) = self.space.take() {
            if waiter.cancel_catching(&mut panics).is_err() {
                // Woken for room we will not use: pass it on.
                panics.catch(|| m.pass_space_on());
            } else {
                // Our node stays in the monitor's queue of producers until
                // its holder sweeps it. A sweep that served kept a panic
                // (see `look_after_space`): nothing of ours is queued, so
                // it goes on here (below), and the drops it deferred are
                // made.
                m.space_withdrawn();
                withdrew = true;
            }
        }
        if self.task.is_none() || self.own.is_some() || self.republished {
            if let Some(c) = self.completion.take() {
                // Queued: withdrawn if not started; otherwise it finishes
                // unobserved (its result is dropped with `c`, or by the
                // executor if it is still running). A task this future runs
                // itself never started elsewhere: it is withdrawn, whether
                // queued, waiting, or signalled and out of the monitor.
                // Inside the catch: the cancel drops the body (user code)
                // and resumes a panic of this thread's too.
                panics.catch(|| drop(c.cancel()));
            }
        }
        // One at a time: a panic in one drop must not leave the others to
        // its unwind.
        panics.drop(self.task.take());
        panics.drop(self.completion.take());
        panics.drop(self.own.take());
        panics.drop(self.order.take());
        panics.drop(self.pending.take());
        if withdrew {
            panics.catch(unwind::resume_deferred);
        }
        panics.resume();
    }
}

impl<T, S: AbstractState, R> fmt::Debug for SubmitAsync<'_, T, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubmitAsync")
            .field("submitted", &self.task.is_none())
            .field("awaiting_order", &self.order.is_some())
            .field("awaiting_space", &self.space.is_some())
            .finish_non_exhaustive()
    }
}

/// [`Monitor::when_async`]'s future: a [`SubmitAsync`] of a task with a
/// precondition (it outputs the task's result once the precondition held
/// and the body ran).
pub type WhenAsync<'a, T, S, R> = SubmitAsync<'a, T, S, R>;

/// [`Monitor::when_in_async`]'s future: a [`SubmitAsync`] of a task with an
/// entry set of abstract states.
pub type WhenInAsync<'a, T, S, R> = SubmitAsync<'a, T, S, R>;

/// [`SubmitAsync::completion`]'s future: the submission up to the task's
/// queuing; outputs its [`Completion`].
///
/// # Cancel safety
///
/// Dropping it before it is ready withdraws the submission: the task is
/// never queued and its closures are dropped. Once it is ready, the
/// [`Completion`] carries the task on.
///
/// # Panics
///
/// As [`SubmitAsync`].
///
/// # Examples
///
/// ```
/// let m = active_monitor::Monitor::new(0u64);
/// futures::executor::block_on(async {
///     let done = m.submit_async(|n| *n += 1).completion().await;
///     drop(done); // the task runs anyway
///     assert_eq!(m.call_async(|n| *n).await, 1);
/// });
/// ```
#[must_use = "the task is submitted only when the future is awaited"]
pub struct Enqueue<'a, T, S: AbstractState, R> {
    submit: SubmitAsync<'a, T, S, R>,
}

impl<T, S: AbstractState, R> Future for Enqueue<'_, T, S, R> {
    type Output = Completion<R>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion<R>> {
        let s = &mut self.get_mut().submit;
        assert!(
            s.completion.is_some(),
            "Enqueue polled after it returned Ready"
        );
        core::task::ready!(s.poll_queued(cx));
        let completion = s.completion.take().expect("checked on entry");
        if let Some(pending) = s.pending.take() {
            if !completion.is_done() {
                let m = s.monitor;
                order::submitted_async(m.id(), s.conditional, &pending, m.order());
            }
        }
        Poll::Ready(completion)
    }
}

impl<T, S: AbstractState, R> fmt::Debug for Enqueue<'_, T, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enqueue")
            .field("submitted", &self.submit.task.is_none())
            .finish_non_exhaustive()
    }
}

/// [`Monitor::call_async`]'s future: the same as [`SubmitAsync`] (a task
/// without a precondition, its result awaited).
///
/// # Cancel safety
///
/// As [`SubmitAsync`]: dropped before its task started, the call never happens;
/// after, it runs to its end and its result is dropped. Either way the
/// monitor's data sees the whole call or none of it.
///
/// # Panics
///
/// As [`SubmitAsync`].
///
/// # Examples
///
/// ```
/// let m = active_monitor::Monitor::new(vec![1, 2, 3]);
/// let len = futures::executor::block_on(m.call_async(|v| v.len()));
/// assert_eq!(len, 3);
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct CallAsync<'a, T, S: AbstractState, R> {
    submit: SubmitAsync<'a, T, S, R>,
}

impl<'a, T, S: AbstractState, R> CallAsync<'a, T, S, R> {
    pub(crate) fn new(submit: SubmitAsync<'a, T, S, R>) -> Self {
        Self { submit }
    }
}

impl<T, S: AbstractState, R> Future for CallAsync<'_, T, S, R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        Pin::new(&mut self.get_mut().submit).poll(cx)
    }
}

impl<T, S: AbstractState, R> fmt::Debug for CallAsync<'_, T, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallAsync")
            .field("submitted", &self.submit.task.is_none())
            .finish_non_exhaustive()
    }
}
