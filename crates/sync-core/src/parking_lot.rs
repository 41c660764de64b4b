//! The parking lot: `parking_lot_core`'s park/unpark calls, model-checkable.
//!
//! The normal build re-exports [`parking_lot_core`] itself: [`park`],
//! [`unpark_one`], [`unpark_all`], [`unpark_filter`], their tokens and results,
//! and [`SpinWait`]. There is no wrapper, so the shim costs nothing.
//!
//! Under `--cfg loom` the same names come from a small model of the parking lot
//! that keeps `parking_lot_core`'s contract, so the protocol of a crate built on
//! it is explored by loom as a whole:
//!
//! * One queue lock (a loom `Mutex`) guards one FIFO queue of parked threads
//!   for all keys. `validate` runs under it: a thread whose `validate` returns
//!   `false` returns [`ParkResult::Invalid`] without sleeping, and a thread whose
//!   `validate` returned `true` is in the queue before any other thread can take
//!   the lock, so an unpark that follows is never lost.
//! * `before_sleep` runs after the thread is queued and the lock is released,
//!   so it may call into the parking lot (a condition variable unlocks its
//!   mutex there).
//! * `unpark_filter` offers the parked threads of a key to the filter in queue
//!   order; the filter and the unpark callback run under the queue lock, and
//!   the unpark token the callback returns is what each woken thread's `park`
//!   returns. `unpark_one` and `unpark_all` are `unpark_filter` with a fixed
//!   filter.
//! * A timeout is a nondeterministic early return: a thread that parks with
//!   `Some(deadline)` lets the other threads run, then, under the queue lock,
//!   returns [`ParkResult::Unparked`] if it was unparked meanwhile and otherwise
//!   leaves the queue, calls `timed_out(key, was_last_thread)` under the lock
//!   and returns [`ParkResult::TimedOut`]. The deadline's value is ignored:
//!   loom's scheduler decides which of the two races wins, and explores both.
//! * `UnparkResult::be_fair` is `false` unless a model calls
//!   `set_be_fair(true)` (loom builds only), since `parking_lot_core` sets it
//!   from wall-clock time that a model does not have.
//! * [`SpinWait::spin`] yields to loom's scheduler and returns `false`, so
//!   a model always reaches the parking path after one spin.
//!
//! Threads parked in a model that are never unparked are reported by loom as
//! a deadlock: that is how a lost wakeup shows up.
//!
//! # Safety
//!
//! As in `parking_lot_core`, the functions are `unsafe` because the callbacks
//! run while the queue lock is held: they must not panic and must not call
//! into the parking lot. `before_sleep` is the exception and may call into it.

#[cfg(not(loom))]
pub use parking_lot_core::{
    DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN, FilterOp, ParkResult, ParkToken, SpinWait,
    UnparkResult, UnparkToken, park, unpark_all, unpark_filter, unpark_one,
};

#[cfg(loom)]
mod loom_model;

#[cfg(loom)]
pub use loom_model::{
    DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN, FilterOp, ParkResult, ParkToken, SpinWait,
    UnparkResult, UnparkToken, park, set_be_fair, unpark_all, unpark_filter, unpark_one,
};
