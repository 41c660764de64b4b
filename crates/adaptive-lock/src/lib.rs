//! Locks that monitor themselves and adapt their waiting policy at run time.
//!
//! The best way to wait for a lock depends on how long it is held, how many
//! threads want it and whether they outnumber the cores. Mukherjee and
//! Schwan's *adaptive objects* make the lock carry the answer: an adaptive
//! lock has an **internal state** (the lock word, the waiters), **mutable
//! attributes** (a [`WaitPolicy`]: spin, back-off, yield, park, timeout), a
//! **scheduler** ([`Scheduler`]: FCFS, priority, handoff), a **monitor**
//! ([`Stats`]: waiting threads, acquisitions, contended acquisitions, spin
//! successes, parks, hold and wait times, sampled every k-th unlock) and a
//! user-provided **policy** ([`Policy`]) that runs in the unlock path and
//! returns the next [`Config`]. An external agent may also
//! [`configure`](AdaptiveMutex::configure) it and read its
//! [`stats`](AdaptiveMutex::stats).
//!
//! [`AdaptiveMutex`] wraps a `lock_api::Mutex<RawAdaptiveLock<P>, T>`, so
//! its guard ([`AdaptiveMutexGuard`]) wraps parking_lot's and has its
//! associated functions (shared across threads only when `T: Send +
//! Sync`); it adds owned
//! guards through an `Arc` ([`ArcAdaptiveMutexGuard`]). Its uncontended
//! path is parking_lot's (one CAS to lock, one to unlock, plus one add to a
//! counter on the same cache line); the policies are [`Learned`] (the
//! default), [`SimpleAdapt`] (the paper's) and [`Static`].
//!
//! | form | method |
//! |---|---|
//! | blocking | [`lock`](AdaptiveMutex::lock), [`lock_with_priority`](AdaptiveMutex::lock_with_priority) |
//! | attempt | [`try_lock`](AdaptiveMutex::try_lock) |
//! | bounded wait | [`try_lock_for`](AdaptiveMutex::try_lock_for), [`try_lock_until`](AdaptiveMutex::try_lock_until), [`try_lock_with_priority_for`](AdaptiveMutex::try_lock_with_priority_for), [`try_lock_with_priority_until`](AdaptiveMutex::try_lock_with_priority_until) |
//! | owned through an `Arc` | [`lock_arc`](AdaptiveMutex::lock_arc), [`try_lock_arc`](AdaptiveMutex::try_lock_arc), [`try_lock_arc_for`](AdaptiveMutex::try_lock_arc_for), [`try_lock_arc_until`](AdaptiveMutex::try_lock_arc_until) |
//! | async | none: a blocking lock (use `tokio::sync::Mutex` or `lockfree_sync::Mutex` for a lock held across `.await`) |
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::thread;
//! use adaptive_lock::AdaptiveMutex;
//!
//! let queue = Arc::new(AdaptiveMutex::new(Vec::new()));
//! let producers: Vec<_> = (0..2)
//!     .map(|p| {
//!         let queue = Arc::clone(&queue);
//!         thread::spawn(move || (0..100).for_each(|i| queue.lock().push(p * 100 + i)))
//!     })
//!     .collect();
//! producers.into_iter().for_each(|t| t.join().unwrap());
//! assert_eq!(queue.lock().len(), 200);
//! let stats = queue.stats();
//! assert_eq!(stats.total.acquisitions, 201);
//! println!("{} of them contended, now {:?}", stats.total.contended, stats.config.wait_policy());
//! ```
//!
//! # Loom
//!
//! Under `--cfg loom` the raw lock is built on loom's atomics and the
//! parking lot's model; `lock_api`'s traits (which need `const`
//! constructors) are left out, and models use the raw lock's methods.
#![warn(missing_docs, missing_debug_implementations)]

mod config;
#[cfg(not(loom))]
mod guard;
#[cfg(not(loom))]
mod mutex;
mod policy;
mod raw;
mod stats;

pub use config::{Config, Scheduler};
#[cfg(not(loom))]
pub use mutex::{
    AdaptiveMutex, AdaptiveMutexGuard, ArcAdaptiveMutexGuard, MappedAdaptiveMutexGuard,
};
pub use policy::{Learned, Policy, SimpleAdapt, Static, WAKE_COST};
pub use raw::{DEFAULT_SAMPLING_RATE, RawAdaptiveLock};
pub use stats::{Counters, Stats};
pub use sync_core::wait::WaitPolicy;

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
