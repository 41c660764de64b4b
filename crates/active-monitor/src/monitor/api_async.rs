//! The monitor's async forms (`submit_async`, `when_async`,
//! `when_in_async`, `call_async`): futures that submit without blocking the
//! thread.

use ast_mutex::{AbstractState, StateSet};

#[cfg(doc)]
use crate::completion::Completion;
use crate::submit::{CallAsync, SubmitAsync, WhenAsync, WhenInAsync};
use crate::task::{Always, AsyncTask, InSet, Plain, Pred, Stated};

use super::api::entry_set;
use super::*;

impl<T, S: AbstractState> Monitor<T, S> {
    /// [`submit`](Self::submit) for async code: a future that submits the
    /// task without blocking the thread, then outputs its result (awaited
    /// once). [`SubmitAsync::completion`] outputs the task's [`Completion`]
    /// instead, once it is queued.
    ///
    /// Where `submit` parks the thread (the queue is full, or program order
    /// makes it wait for an earlier task of this worker), the future awaits
    /// instead: it registers its task's waker and returns `Pending`, and the
    /// executor runs its other tasks meanwhile. See [`SubmitAsync`] for the
    /// steps.
    ///
    /// An async task that awaits each submission's result is in program
    /// order by construction (each task has finished before the next is
    /// submitted). To keep completions outstanding across submissions with
    /// [`Order::Strict`](crate::Order::Strict)'s rule 3, run the task in a
    /// [`worker`](crate::worker) scope (see [`Order`](crate::Order)).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the task if it has not started (see
    /// [`SubmitAsync`]): a timeout around it loses nothing.
    ///
    /// # Panics
    ///
    /// As [`SubmitAsync`]. `f`'s panic resumes in the completion's waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(0u32);
    /// let r = futures::executor::block_on(async {
    ///     m.submit_async(|n| {
    ///         *n += 1;
    ///         *n
    ///     })
    ///     .await // submitted, run, and its result
    /// });
    /// assert_eq!(r, 1);
    /// ```
    pub fn submit_async<F, R>(&self, f: F) -> SubmitAsync<'_, T, S, R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        SubmitAsync::new(self, AsyncTask::new_arc(Always, Plain(f)), false)
    }

    /// [`when`](Self::when) for async code: a future that submits the task
    /// without blocking the thread (see [`submit_async`](Self::submit_async)),
    /// and outputs its result once `pre` held and `body` ran.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the task: a timeout around it loses
    /// nothing (a `take` that timed out took no item). The body runs only
    /// in the future's own poll, whose output is its result: a holder on
    /// another thread that finds the precondition true wakes the future,
    /// which then runs the body itself if it is still there (it takes the
    /// monitor if idle, or submits the task again); dropped, it never ran.
    /// So the body runs as a condition variable's waiter would (the
    /// precondition re-checked by the future's poll), not in the holder's
    /// batch. [`completion`](SubmitAsync::completion) hands the task to the
    /// holders instead, with [`Completion::cancel`]'s semantics.
    ///
    /// # Panics
    ///
    /// As [`SubmitAsync`]. `pre`'s or `body`'s panic resumes in the completion's
    /// waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let m = Monitor::new(0);
    /// futures::executor::block_on(async {
    ///     // Both at once: the take waits until the put has run.
    ///     let (taken, ()) = futures::future::join(
    ///         m.when_async(|n| *n > 0, |n| *n * 10),
    ///         m.submit_async(|n| *n = 4),
    ///     )
    ///     .await;
    ///     assert_eq!(taken, 40);
    /// });
    /// ```
    pub fn when_async<P, F, R>(&self, pre: P, body: F) -> WhenAsync<'_, T, S, R>
    where
        P: Fn(&T) -> bool + Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        SubmitAsync::new(self, AsyncTask::new_arc(Pred(pre), Plain(body)), true)
    }

    /// [`when_in`](Self::when_in) for async code: a future that submits the
    /// task without blocking the thread (see
    /// [`submit_async`](Self::submit_async)).
    ///
    /// # Cancel safety
    ///
    /// As [`when_async`](Self::when_async).
    ///
    /// # Panics
    ///
    /// If `set` is empty (at once, not when polled); otherwise as
    /// [`SubmitAsync`]. `body`'s panic resumes in the completion's waiter.
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
    /// futures::executor::block_on(async {
    ///     let enter = m.when_in_async(Door::Open, |n| (*n + 1, Door::Open)).completion().await;
    ///     m.when_in_async(Door::Closed, |_| ((), Door::Open)).await;
    ///     assert_eq!(enter.await, Ok(1));
    /// });
    /// ```
    pub fn when_in_async<F, R>(
        &self,
        set: impl Into<StateSet<S>>,
        body: F,
    ) -> WhenInAsync<'_, T, S, R>
    where
        F: FnOnce(&mut T) -> (R, S) + Send + 'static,
        R: Send + 'static,
        T: 'static,
        S: Send,
    {
        let set = entry_set(set.into(), "when_in_async");
        SubmitAsync::new(self, AsyncTask::new_arc(InSet(set), Stated(body)), true)
    }

    /// [`call`](Self::call) for async code: submits `f` as
    /// [`submit_async`](Self::submit_async) does, then awaits its result.
    /// Unlike `call`, the task may outlive the caller's frame (the future
    /// can be dropped while the task is queued), hence `'static`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the task if it has not started; if it
    /// has, it runs to its end and its result is dropped (see
    /// [`CallAsync`]).
    ///
    /// # Panics
    ///
    /// Resumes `f`'s panic; otherwise as [`SubmitAsync`].
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(vec![3, 1, 2]);
    /// let max = futures::executor::block_on(m.call_async(|v| {
    ///     v.sort();
    ///     *v.last().unwrap()
    /// }));
    /// assert_eq!(max, 3);
    /// ```
    pub fn call_async<F, R>(&self, f: F) -> CallAsync<'_, T, S, R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        CallAsync::new(self.submit_async(f))
    }
}
