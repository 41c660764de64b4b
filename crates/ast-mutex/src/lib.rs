//! Conditional synchronization by abstract states (Ohki & Kuno's AST-sync).
//!
//! Code that waits for a shared object to reach some condition is usually
//! written as a mutex plus condition variables plus `while !ready { wait }`:
//! either one condition variable per condition (complex, and impossible
//! when conditions overlap) or one for all, woken with `notify_all`, so
//! that every waiter wakes to re-test ("repeated tests"). An [`AstMutex`]
//! replaces both. The object's *abstract states* (empty / mid / full, say)
//! are declared with [`states!`]; a thread enters with the *set* of states
//! in which it can proceed, and leaves naming the next state. Only a waiter
//! whose set contains that state is woken: never a broadcast.
//!
//! ```
//! use std::collections::VecDeque;
//! use ast_mutex::AstMutex;
//!
//! ast_mutex::states! { pub enum Buf { Empty, Mid, Full } }
//! const CAP: usize = 2;
//!
//! let m = AstMutex::new(Buf::Empty, VecDeque::with_capacity(CAP));
//! let mut g = m.enter(Buf::Empty | Buf::Mid); // blocks until not full
//! g.push_back(7);
//! let next = if g.len() == CAP { Buf::Full } else { Buf::Mid };
//! g.exit(next);
//!
//! let mut g = m.enter(Buf::Mid | Buf::Full); // blocks until not empty
//! assert_eq!(g.pop_front(), Some(7));
//! let next = if g.is_empty() { Buf::Empty } else { Buf::Mid };
//! g.exit(next);
//! ```
//!
//! # How it works
//!
//! The abstract state lives in the lock word beside the lock bit, so an
//! uncontended `enter` and `exit` are one atomic read-modify-write each, and
//! a waiter can watch for one of its states without taking the lock, which
//! a condition variable's predicate cannot do. A waiter watches briefly
//! (a few spins, then yielding its core to the threads that may change the
//! state), then waits in the *group* of its entry set: a FIFO list of
//! `sync_core::waiter` waiters, each a parked thread or a task's waker, so
//! threads ([`AstMutex::enter`]) and tasks ([`AstMutex::enter_async`]) share
//! the queues. An exit serves the waiter that has waited longest among those
//! whose set contains the new state, so its work depends on the number of
//! distinct entry sets among the waiters, not on the number of waiters (the
//! paper's kernel version scanned all of them); a waiter leaves its group
//! in constant time wherever it is, and a group is freed with its last
//! waiter. [`WakeMode`] chooses between waking a waiter to compete
//! (the default: a woken waiter keeps its place, and is handed the lock
//! once a bounded number of exits passed it), the paper's handoff of the
//! lock (to a running waiter of the state rather than a parked one, within
//! a bound), and
//! a broadcast that lets every waiter of the state through.
//!
//! The whole protocol, waiting and cancellation included, is model-checked
//! with loom.
//!
//! # More than the paper
//!
//! * Timed entry ([`AstMutex::try_enter_for`], [`AstMutex::try_enter_until`]),
//!   honoured within about a scheduling quantum whatever the [`Config`].
//! * Async entry on any executor ([`AstMutex::enter_async`],
//!   [`AstMutex::enter_arc_async`]), cancel safe.
//! * Owned guards ([`ArcAstGuard`]); guards are `Send`.
//! * [`AstGuard::exit_and_enter`], a condition variable's `wait`.
//! * [`AstGuard::on_unwind`]: the state a panic leaves.
//! * `const fn` [`AstMutex::new`], for statics.
//! * Concurrency restriction ([`Config::watchers`]): with more waiting
//!   threads than CPUs, only a few watch the lock word and the rest sleep,
//!   rotated in within a stated bound.
//!
//! # Forms
//!
//! | form | borrowed guard ([`AstGuard`]) | owned guard ([`ArcAstGuard`]) |
//! |---|---|---|
//! | blocking | [`enter`](AstMutex::enter) | [`enter_arc`](AstMutex::enter_arc) |
//! | attempt | [`try_enter`](AstMutex::try_enter) | [`try_enter_arc`](AstMutex::try_enter_arc) |
//! | bounded wait | [`try_enter_for`](AstMutex::try_enter_for), [`try_enter_until`](AstMutex::try_enter_until) | [`try_enter_arc_for`](AstMutex::try_enter_arc_for), [`try_enter_arc_until`](AstMutex::try_enter_arc_until) |
//! | async | [`enter_async`](AstMutex::enter_async) → [`EnterAsync`] | [`enter_arc_async`](AstMutex::enter_arc_async) → [`EnterArcAsync`] |
//! | exit, then wait | [`AstGuard::exit_and_enter`], [`AstGuard::exit_and_enter_async`] | [`ArcAstGuard::exit_and_enter`], [`ArcAstGuard::exit_and_enter_async`] |

#![warn(missing_docs, missing_debug_implementations)]

mod config;
mod future;
mod guard;
mod mutex;
mod raw;
mod state;
mod waiters;
mod watchers;

pub use config::{Config, DEFAULT_SPINS, DEFAULT_YIELDS, WakeMode};
pub use future::{EnterArcAsync, EnterAsync};
pub use guard::{ArcAstGuard, AstGuard};
pub use mutex::AstMutex;
pub use state::{AbstractState, Iter, StateSet};
/// The family's waiting vocabulary, taken by [`Config::wait`]: re-exported
/// so that a user needs no `sync_core` dependency.
pub use sync_core::wait::WaitPolicy;
