//! Monitors as active objects: critical sections delegated to a combiner
//! that return futures (ActiveMonitor, paper 004).
//!
//! A [`Monitor<T>`] owns its data. Workers do not lock it; they hand it
//! *tasks*, closures over `&mut T`:
//!
//! * [`Monitor::call`] runs a task and returns its result;
//! * [`Monitor::submit`] returns a [`Completion`] at once, a future (any
//!   executor) that can also be [waited](Completion::wait) on;
//! * [`Monitor::when`] runs its body only once its precondition holds (the
//!   paper's `waituntil`), evaluated by whoever holds the monitor: no
//!   condition variable, no signal, no broadcast;
//! * [`Monitor::with_states`] and [`Monitor::when_in`] tag tasks with sets
//!   of abstract states (ast-mutex's [`states!`](ast_mutex::states)), so the
//!   monitor checks only the tasks that can run in the current state;
//! * [`or`] runs exactly one of several tasks on different monitors, the
//!   first whose precondition holds ("take from whichever queue has an
//!   item"); [`and`] runs them all;
//! * in async code, [`Monitor::submit_async`], [`Monitor::when_async`],
//!   [`Monitor::when_in_async`] and [`Monitor::call_async`] await where
//!   the synchronous methods park the thread (a full task queue, program
//!   order), output the task's result (one `.await`), and [`worker`]
//!   makes an async task that keeps completions a submitter of its own;
//! * [`Completion::cancel`] withdraws a task that has not started, or hands
//!   its completion back if it has: a timeout loses nothing.
//!
//! A worker that finds the monitor idle becomes the *combiner* and runs the
//! queued tasks too, a batch at a time, in FIFO order, then hands the
//! monitor over, so a contended monitor's data stays in one core's cache
//! and the other workers go on with their own work. A monitor may instead
//! have a dedicated server thread ([`Builder::build_served`]), within a
//! process-wide cap ([`set_server_limit`]) and only while the CPUs are not
//! saturated ([`cpus_saturated`]); see [`Monitor`]'s "Execution". [`Order`]
//! says what a submitter (a thread, a task body, a [`worker`] scope) may
//! assume about the order of its asynchronous tasks.
//!
//! ```
//! use std::collections::VecDeque;
//! use std::sync::Arc;
//! use active_monitor::{Monitor, Order};
//!
//! // The paper's figure 2: a bounded queue whose put is asynchronous.
//! const CAP: usize = 4;
//! let q = Arc::new(Monitor::builder().order(Order::Relaxed).build(VecDeque::new()));
//!
//! let producer = {
//!     let q = Arc::clone(&q);
//!     std::thread::spawn(move || {
//!         for i in 0..100 {
//!             // waituntil(count < size); put
//!             q.when(|d: &VecDeque<i32>| d.len() < CAP, move |d| d.push_back(i));
//!         }
//!     })
//! };
//! let mut sum = 0;
//! for _ in 0..100 {
//!     // waituntil(count > 0); take
//!     sum += q.when(|d: &VecDeque<i32>| !d.is_empty(), |d| d.pop_front().unwrap()).wait();
//! }
//! producer.join().unwrap();
//! assert_eq!(sum, (0..100).sum());
//! ```
//!
//! # The paper
//!
//! Wei-Lun Hung, Himanshu Chauhan and Vijay K. Garg, *ActiveMonitor:
//! Asynchronous Monitor Framework for Scalability and Multi-Object
//! Synchronization*, OPODIS 2016 (full technical report version).

#![warn(missing_docs, missing_debug_implementations)]

mod completion;
mod compose;
mod error;
mod monitor;
mod order;
mod saturation;
mod server;
mod submit;
mod sweep;
mod task;
mod unwind;

#[doc(hidden)]
pub use completion::__TestOrderWait;
pub use completion::Completion;
pub use compose::{Op, Operands, and, or};
pub use error::{Discarded, SameMonitor};
pub use monitor::{Builder, DEFAULT_BATCH, DEFAULT_CAPACITY, DataMut, Monitor};
#[allow(deprecated)]
pub use order::RELAXED_WAITING_LIMIT;
pub use order::{Order, WAITING_LIMIT, Worker, worker};
pub use saturation::{__test_set_saturation_override, cpus_saturated};
pub use server::{Served, server_limit, servers, set_server_limit};
pub use submit::{CallAsync, Enqueue, SubmitAsync, WhenAsync, WhenInAsync};

/// The abstract states of [`Monitor::with_states`] and
/// [`Monitor::when_in`], from ast-mutex: the `states!` macro that declares
/// them, the trait it implements and the sets of states a task names.
pub use ast_mutex::{AbstractState, StateSet, states};

ast_mutex::states! {
    /// The one abstract state of a monitor built without states
    /// ([`Monitor::new`]).
    pub enum NoState {
        /// The only state.
        Any
    }
}
