//! The Send/Sync promises of the public types, positive and negative.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;

use adaptive_lock::{
    AdaptiveMutex, AdaptiveMutexGuard, ArcAdaptiveMutexGuard, Config, Learned, Policy,
    RawAdaptiveLock, SimpleAdapt, Static, Stats,
};
use sync_core::{assert_impl, assert_not_impl};

// As std's and parking_lot's mutexes: `T: Send` suffices to share the lock.
assert_impl!(AdaptiveMutex<Vec<u8>>: Send, Sync);
assert_impl!(AdaptiveMutex<Cell<u8>>: Send, Sync);
assert_not_impl!(AdaptiveMutex<Rc<u8>>: Send);
assert_not_impl!(AdaptiveMutex<Rc<u8>>: Sync);
assert_impl!(AdaptiveMutex<Vec<u8>, SimpleAdapt>: Send, Sync);
assert_impl!(RawAdaptiveLock<Learned>: Send, Sync);
assert_impl!(RawAdaptiveLock<Static>: Send, Sync);

// The guard may be sent (GuardSend) when the data may; shared like `&T`.
assert_impl!(AdaptiveMutexGuard<'static, Vec<u8>>: Send, Sync);
assert_impl!(AdaptiveMutexGuard<'static, Cell<u8>>: Send);
assert_not_impl!(AdaptiveMutexGuard<'static, Cell<u8>>: Sync);
assert_not_impl!(AdaptiveMutexGuard<'static, Rc<u8>>: Send);
// Shared only when the data may be sent too: a shared guard hands out its
// mutex (`AdaptiveMutexGuard::mutex`), which another thread can keep and
// lock once the guard is gone (lock_api's own guard is `Sync` for any
// `T: Sync`, and so was this one).
assert_not_impl!(AdaptiveMutexGuard<'static, SyncNotSend>: Sync);
assert_not_impl!(ArcAdaptiveMutexGuard<SyncNotSend>: Sync);

// The owned guard: sent like the data; shared like `&T` (and the lock).
assert_impl!(ArcAdaptiveMutexGuard<Vec<u8>>: Send, Sync);
assert_impl!(ArcAdaptiveMutexGuard<Cell<u8>>: Send);
assert_not_impl!(ArcAdaptiveMutexGuard<Cell<u8>>: Sync);
assert_not_impl!(ArcAdaptiveMutexGuard<Rc<u8>>: Send);
assert_not_impl!(ArcAdaptiveMutexGuard<Rc<u8>>: Sync);

/// `Sync` but not `Send` (as a `std::sync::MutexGuard`).
struct SyncNotSend(#[allow(dead_code)] std::marker::PhantomData<*const ()>);
// SAFETY: no data to share.
unsafe impl Sync for SyncNotSend {}

// A policy that is not `Send` cannot be moved between its holders.
struct LocalPolicy(#[allow(dead_code)] Rc<u8>);
assert_not_impl!(LocalPolicy: Send);

// Values.
assert_impl!(Config: Send, Sync);
assert_impl!(Stats: Send, Sync);

#[test]
fn policies_are_send() {
    fn is_send<P: Policy>() {}
    is_send::<Learned>();
    is_send::<SimpleAdapt>();
    is_send::<Static>();
}
