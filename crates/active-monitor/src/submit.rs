//! The asynchronous submissions' futures: [`Submit`] (a task queued, or
//! run, once there is room and program order allows it) and [`CallAsync`]
//! (the same, then its result).

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

use crate::completion::{Completion, HasSlot};
use crate::monitor::Monitor;
use crate::order::{self, OrderWait, Pending};
use crate::task::{AsyncTask, Body, Job, Pre, Task};
use crate::unwind;

/// The submission of a task to a [`Monitor`] that waits without blocking
/// the thread: made by [`Monitor::submit_async`], [`Monitor::when_async`]
/// and [`Monitor::when_in_async`]. Its output is the task's
/// [`Completion`]; once it is ready, the task is queued (or has run).
///
/// Polling it first awaits what program order asks ([`Order`](crate::Order):
/// under strict order the worker's previous task on another monitor, or
/// with a precondition; under relaxed order the oldest of the worker's
/// waiting tasks beyond [`RELAXED_WAITING_LIMIT`](crate::RELAXED_WAITING_LIMIT)),
/// then queues the task, awaiting space if the queue is full (the task is
/// registered in the monitor's queue of producers waiting for space, woken
/// once the queue has drained to half). If the monitor is idle, the poll
/// runs the task and those queued meanwhile itself, like the synchronous
/// methods.
///
/// # Cancel safety
///
/// Dropping the future before it is ready withdraws the submission: the
/// task is never queued and its closures are dropped. A producer woken for
/// space that is dropped before it used the room passes the wake-up on, so
/// no other producer is left waiting. Once the future is ready, the task is
/// queued: the [`Completion`] it returns carries it on (drop it to let the
/// task run unobserved, [`cancel`](Completion::cancel) it to withdraw it).
///
/// # Panics
///
/// Polling it after it returned `Ready` panics. Polling it from inside a
/// task of the same monitor while its queue is full panics (only that
/// task's thread could make room).
///
/// # Examples
///
/// ```
/// use active_monitor::Monitor;
///
/// let m = Monitor::builder().capacity(1).build(0u64);
/// futures::executor::block_on(async {
///     for i in 1..=10 {
///         // Awaits space when the queue is full, instead of parking.
///         let done = m.submit_async(move |n| *n += i).await;
///         drop(done); // runs anyway
///     }
///     assert_eq!(m.call_async(|n| *n).await, 55);
/// });
/// ```
#[must_use = "the task is submitted only when the future is awaited"]
pub struct Submit<'a, T, S: AbstractState, R> {
    monitor: &'a Monitor<T, S>,
    /// The task, until it is submitted.
    task: Option<Task<T, S>>,
    /// Its completion, handed out when it is submitted.
    completion: Option<Completion<R>>,
    /// The task as program order records it, if it does.
    pending: Option<Arc<dyn Pending>>,
    /// Whether the task has a precondition.
    conditional: bool,
    /// Awaiting an earlier task of the worker (program order).
    order: Option<OrderWait>,
    /// Registered in the monitor's queue of producers waiting for space.
    space: Option<LoomArc<Waiter>>,
}

impl<'a, T, S: AbstractState, R> Submit<'a, T, S, R> {
    pub(crate) fn new<P, B>(
        monitor: &'a Monitor<T, S>,
        task: AsyncTask<T, S, P, B, R>,
        conditional: bool,
    ) -> Self
    where
        P: Pre<T, S> + 'static,
        B: Body<T, S, R> + 'static,
        R: Send + 'static,
        T: 'static,
    {
        let task = Arc::new(task);
        let completion = Completion::shared(Arc::clone(&task) as Arc<dyn HasSlot<R>>);
        let pending = (monitor.order() == crate::Order::Strict || conditional)
            .then(|| Arc::clone(&task) as Arc<dyn Pending>);
        Self {
            monitor,
            task: Some(Task::Shared(task as Arc<dyn Job<T, S>>)),
            completion: Some(completion),
            pending,
            conditional,
            order: None,
            space: None,
        }
    }
}

impl<T, S: AbstractState, R> Future for Submit<'_, T, S, R> {
    type Output = Completion<R>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion<R>> {
        // A panic caught in another waiter's waker while we registered (see
        // `unwind`) resumes here, in a poll that changes nothing: before
        // this poll's steps, or once it is Pending. Never after a Ready,
        // whose completion would be lost in the unwind.
        unwind::resume_deferred();
        let poll = self.get_mut().poll_submit(cx);
        if poll.is_pending() {
            unwind::resume_deferred();
        }
        poll
    }
}

impl<T, S: AbstractState, R> Submit<'_, T, S, R> {
    fn poll_submit(&mut self, cx: &mut Context<'_>) -> Poll<Completion<R>> {
        let this = self;
        let m = this.monitor;
        assert!(this.task.is_some(), "Submit polled after it returned Ready");
        loop {
            // Program order first, in every round: a task that shares our
            // worker may have submitted while we waited for space.
            if let Some(wait) = &mut this.order {
                if wait.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.order = None;
            }
            if let Some(wait) = order::to_await(m.id(), m.order(), this.conditional) {
                this.order = Some(wait);
                continue;
            }
            if let Some(waiter) = &this.space {
                if waiter.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // Woken: there is room (unless others took it first).
                this.space = None;
            }
            let task = this.task.take().expect("checked on entry");
            match m.try_submit(task) {
                Ok(()) => {
                    let completion = this.completion.take().expect("submitted once");
                    if let Some(pending) = this.pending.take() {
                        if !completion.is_done() {
                            order::submitted(m.id(), this.conditional, pending, m.order());
                        }
                    }
                    return Poll::Ready(completion);
                }
                Err(task) => {
                    this.task = Some(task);
                    // `None`: room appeared (or we made it): try again.
                    this.space = m.wait_for_space_async(cx);
                }
            }
        }
    }
}

impl<T, S: AbstractState, R> Drop for Submit<'_, T, S, R> {
    fn drop(&mut self) {
        if let Some(waiter) = self.space.take() {
            if waiter.cancel().is_err() {
                // Woken for room we will not use: pass it on.
                self.monitor.pass_space_on();
            } else {
                // Our node stays in the monitor's queue of producers until
                // its holder sweeps it.
                self.monitor.space_withdrawn();
            }
        }
    }
}

impl<T, S: AbstractState, R> fmt::Debug for Submit<'_, T, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submit")
            .field("submitted", &self.task.is_none())
            .field("awaiting_order", &self.order.is_some())
            .field("awaiting_space", &self.space.is_some())
            .finish_non_exhaustive()
    }
}

/// [`Monitor::call_async`]'s future: submits the task as [`Submit`] does,
/// then awaits its result.
///
/// # Cancel safety
///
/// Dropped before its task is queued, the call never happens (as for
/// [`Submit`]). Dropped after, the task is [withdrawn](Completion::cancel)
/// if it has not started; if it has, it runs to its end and its result is
/// dropped. Either way the monitor's data sees the whole call or none of it.
///
/// # Panics
///
/// As [`Submit`], and resumes the task's panic.
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
    submit: Option<Submit<'a, T, S, R>>,
    completion: Option<Completion<R>>,
}

impl<'a, T, S: AbstractState, R> CallAsync<'a, T, S, R> {
    pub(crate) fn new(submit: Submit<'a, T, S, R>) -> Self {
        Self {
            submit: Some(submit),
            completion: None,
        }
    }
}

impl<T, S: AbstractState, R> Future for CallAsync<'_, T, S, R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        if let Some(submit) = &mut this.submit {
            match Pin::new(submit).poll(cx) {
                Poll::Ready(c) => {
                    this.submit = None;
                    this.completion = Some(c);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        let c = this
            .completion
            .as_mut()
            .expect("CallAsync polled after it returned Ready");
        let r = core::task::ready!(Pin::new(c).poll(cx));
        this.completion = None;
        Poll::Ready(r)
    }
}

impl<T, S: AbstractState, R> Drop for CallAsync<'_, T, S, R> {
    fn drop(&mut self) {
        if let Some(c) = self.completion.take() {
            // Not started: withdrawn. Started: it finishes unobserved.
            let _ = c.cancel();
        }
    }
}

impl<T, S: AbstractState, R> fmt::Debug for CallAsync<'_, T, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallAsync")
            .field("submitted", &self.submit.is_none())
            .finish_non_exhaustive()
    }
}
