//! A mutex and a counting semaphore whose waiters wait in a **lock-free**
//! FIFO queue, each usable from OS threads *and* async tasks.
//!
//! Lin & Vella ("Fast User-Level Inter-thread Communication,
//! Synchronisation") build a mutex and a semaphore for user-level threads
//! whose waiter queues are lock-free, so that blocking a user-level thread
//! never blocks a kernel thread and no internal spin lock guards the
//! primitive. In Rust the user-level thread is the async task, so each
//! primitive here has one implementation and two faces:
//!
//! | | blocking (threads) | async (tasks, any executor) |
//! |---|---|---|
//! | [`Mutex`] | [`lock`](Mutex::lock), [`try_lock`](Mutex::try_lock), [`try_lock_for`](Mutex::try_lock_for), [`lock_arc`](Mutex::lock_arc) | [`lock_async`](Mutex::lock_async), [`lock_arc_async`](Mutex::lock_arc_async) |
//! | [`Semaphore`] | [`acquire`](Semaphore::acquire), [`acquire_many`](Semaphore::acquire_many), [`try_acquire`](Semaphore::try_acquire), [`try_acquire_for`](Semaphore::try_acquire_for), [`acquire_arc`](Semaphore::acquire_arc) | [`acquire_async`](Semaphore::acquire_async), [`acquire_many_async`](Semaphore::acquire_many_async), [`acquire_arc_async`](Semaphore::acquire_arc_async) |
//!
//! Threads and tasks wait in the same queue, so they can share one lock.
//!
//! [`mpsc`] is the paper's algorithm 3: an unbounded message queue whose
//! send is one wait-free swap and whose receiver sleeps (a thread) or waits
//! (a task) on the paper's `waiting_mark` handshake, without a lost wakeup.
//! [`csp`] is Vella's wait-free CSP channel: a synchronous point-to-point
//! rendezvous where each side makes one swap and the value moves straight
//! from the sender's slot to the receiver's; [`csp::Alt`] is occam's `ALT`.
//!
//! * [`Mutex`] is the paper's algorithm 1: a count of waiters and the lock
//!   bit in one word (a single-word CAS where the paper needed a double-word
//!   one), and a release that dequeues a waiter. By default it lets woken
//!   waiters compete with newcomers, and hands the lock over in FIFO order
//!   only while some waiter has waited more than [`STARVATION`] (Go's
//!   starvation mode); [`Fairness::Fifo`] is the paper's strict handoff.
//!   [`RawMutex`] implements [`lock_api::RawMutex`] and
//!   [`lock_api::RawMutexTimed`] ([`LockApiMutex`] is lock_api's `Mutex`
//!   over it).
//! * [`Semaphore`] is the paper's algorithm 2: a counter that goes negative
//!   by the demand of queued waiters, and releasers that deliver permits in
//!   FIFO order without a lock.
//!
//! The waiter (a parked thread or a task's `Waker`) and the lock-free queue
//! are shared with the family's other crates: see `sync_core::waiter`, whose
//! documentation explains how queue nodes are reclaimed.
//!
//! # Cancel safety
//!
//! Dropping a `lock_async` or `acquire_async` future at any point, queued or
//! already handed the lock or permits, never loses the lock, a permit or a
//! wakeup, and never leaves a dangling node.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use lockfree_sync::{Mutex, Semaphore};
//!
//! let pool = Arc::new(Semaphore::new(2));
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let threads: Vec<_> = (0..4)
//!     .map(|i| {
//!         let (pool, log) = (Arc::clone(&pool), Arc::clone(&log));
//!         std::thread::spawn(move || {
//!             let _permit = pool.acquire().unwrap(); // at most two at a time
//!             log.lock().push(i);
//!         })
//!     })
//!     .collect();
//! for t in threads {
//!     t.join().unwrap();
//! }
//! assert_eq!(log.lock().len(), 4);
//! assert_eq!(pool.available_permits(), 2);
//! ```
#![warn(missing_docs, missing_debug_implementations)]

mod backlog;
mod clock;
pub mod csp;
mod error;
mod handover;
pub mod mpsc;
mod mutex;
mod patience;
mod raw_mutex;
mod semaphore;

pub use error::{AcquireError, TryAcquireError};
pub use mutex::{ArcMutexGuard, LockArcAsync, LockAsync, Mutex, MutexGuard};
pub use patience::STARVATION;
pub use raw_mutex::{Fairness, RawLockAsync, RawMutex};
#[cfg(not(loom))]
pub use raw_mutex::{LockApiMutex, LockApiMutexGuard};
pub use semaphore::{AcquireArcAsync, ArcSemaphorePermit};
pub use semaphore::{AcquireAsync, Semaphore, SemaphorePermit};
