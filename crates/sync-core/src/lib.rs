//! The foundation every crate of the sync family builds on.
//!
//! **An internal crate.** It is published only because the family's crates
//! (`ast-mutex`, `lockfree-sync`, …) depend on it. Its API follows their
//! needs and may change in any release, semver notwithstanding; depend on
//! those crates, not on this one. The test helpers (`testing`, and the
//! `assert_impl!`/`assert_not_impl!` macros) are for the family's own tests
//! and are hidden from these docs.
//!
//! A synchronization primitive is only as trustworthy as the interleavings it
//! was checked under. This crate is the single import point through which the
//! family's crates reach atomics, cells, threads, spinning and the parking lot,
//! so that one switch, `RUSTFLAGS="--cfg loom"`, hands every one of them to the
//! [loom] model checker at once:
//!
//! * [`sync`]: atomics, [`UnsafeCell`](sync::cell::UnsafeCell) with
//!   `with`/`with_mut`, `Arc`, thread spawning, parking and yielding, and the
//!   spin hint. These are `std` types normally and loom's under `cfg(loom)`.
//! * [`parking_lot`]: the `parking_lot_core` calls the family uses (`park`,
//!   `unpark_one`, `unpark_all`, `unpark_filter`, the tokens and results, and
//!   `SpinWait`). The normal build re-exports `parking_lot_core` itself, so the
//!   shim costs nothing; the loom build substitutes a small model of the
//!   parking lot with the same contract, so that a crate's whole protocol,
//!   including the park/unpark handshake, is explored exhaustively.
//! * [`spin`]: a small spin lock for internal bookkeeping.
//! * [`load`]: whether more threads are runnable than there are CPUs, and
//!   whether a yield is slow right now: what the wait loop consults.
//! * [`wait`]: the family's one waiting vocabulary, [`WaitPolicy`](wait::WaitPolicy)
//!   (spin, back-off, yield, park, timeout), and the [`Watch`](wait::Watch) that runs it.
//! * [`unwind`]: the family's one panic policy for user code (wakers,
//!   policies, `Drop`s, task bodies) that a primitive runs.
//! * [`waiter`]: a waiter that is a parked thread or a task's `Waker`, and the
//!   lock-free FIFO queue of waiters that blocking primitives share;
//!   [`waker`]: the `AtomicWaker` it uses for tasks. The queue's
//!   [`sweep`](waiter::WaiterQueue::sweep) and
//!   [`sweep_front`](waiter::WaiterQueue::sweep_front) free withdrawn waiters.
//! * [`wake_list`]: the wake-ups a primitive owes, kept while it holds a
//!   lock or role and delivered after it lets go.
//! * [`wake_chain`]: how the family wakes a task (all but a task's wake of
//!   itself inside its own poll), so that wakers that poll on the spot and
//!   wake others nest only a few dozen deep.
//! * [`bounded_queue`]: a bounded lock-free FIFO queue of values, many
//!   producers and one consumer at a time.
//! * `model` (loom builds only): helpers that run a loom model with a
//!   preemption bound.
//!
//! # Examples
//!
//! A one-shot flag that a waiter parks on, written once and checked under both
//! std and loom:
//!
//! ```
//! use sync_core::parking_lot::{self, DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN};
//! use sync_core::sync::atomic::{AtomicBool, Ordering};
//! use sync_core::sync::{thread, Arc};
//!
//! let flag = Arc::new(AtomicBool::new(false));
//! let key = Arc::as_ptr(&flag) as usize;
//!
//! let setter = {
//!     let flag = Arc::clone(&flag);
//!     thread::spawn(move || {
//!         // Release: pairs with the Acquire load in `validate` below.
//!         flag.store(true, Ordering::Release);
//!         // SAFETY: the callback neither panics nor calls into the parking lot.
//!         unsafe { parking_lot::unpark_all(key, DEFAULT_UNPARK_TOKEN) };
//!     })
//! };
//!
//! while !flag.load(Ordering::Acquire) {
//!     // SAFETY: `validate` and `timed_out` neither panic nor call into the
//!     // parking lot; `key` is an address we own for the whole wait.
//!     unsafe {
//!         parking_lot::park(
//!             key,
//!             || !flag.load(Ordering::Acquire),
//!             || {},
//!             |_, _| {},
//!             DEFAULT_PARK_TOKEN,
//!             None,
//!         );
//!     }
//! }
//! setter.join().unwrap();
//! ```
//!
//! # Loom
//!
//! Under `--cfg loom`, tests reach loom through this crate (`sync_core::model`, and
//! `sync_core::loom` for anything else), so no other crate needs loom in its
//! manifest. The model's contract is documented in [`parking_lot`].
//!
//! [loom]: https://docs.rs/loom
#![warn(missing_docs, missing_debug_implementations)]

pub mod bounded_queue;
pub mod load;
pub mod parking_lot;
pub mod spin;
pub mod sync;
pub mod unwind;
pub mod wait;
pub mod waiter;
pub mod wake_chain;
pub mod wake_list;
pub mod waker;

#[cfg(loom)]
pub mod model;

#[doc(hidden)]
pub mod testing;

/// Loom itself, for loom-only tests (`sync_core::loom::model`, …).
#[cfg(loom)]
pub use loom;

/// Pads and aligns a value to the length of a cache line, to keep hot atomics
/// that different threads write from sharing one line.
pub use crossbeam_utils::CachePadded;
