//! The Send/Sync promises of the public types, positive and negative.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;

use lockfree_sync::{
    AcquireAsync, Fairness, LockAsync, Mutex, MutexGuard, RawLockAsync, RawMutex, Semaphore,
    SemaphorePermit,
};
use sync_core::{assert_impl, assert_not_impl};

/// `Sync` but not `Send`, like std's `MutexGuard`: it must stay on the
/// thread that made it.
struct SyncNotSend(std::marker::PhantomData<*const ()>);
// SAFETY: it holds no data; only `Send` is withheld.
unsafe impl Sync for SyncNotSend {}

// The mutex is shared across threads whenever its data may move across them
// (as std's: `T: Send` suffices, since one thread at a time has it).
assert_impl!(Mutex<Vec<u8>>: Send, Sync);
assert_impl!(Mutex<Cell<u8>>: Send, Sync);
assert_not_impl!(Mutex<Rc<u8>>: Send);
assert_not_impl!(Mutex<Rc<u8>>: Sync);
assert_impl!(RawMutex: Send, Sync);

// A guard may be held across an `.await` on a multi-threaded executor, so it
// is `Send` when the data is; it is shared like `&T`.
assert_impl!(MutexGuard<'static, Vec<u8>>: Send, Sync);
assert_impl!(MutexGuard<'static, Cell<u8>>: Send);
assert_not_impl!(MutexGuard<'static, Cell<u8>>: Sync);
assert_not_impl!(MutexGuard<'static, Rc<u8>>: Send);
assert_impl!(lockfree_sync::ArcMutexGuard<Vec<u8>>: Send, Sync);
assert_impl!(lockfree_sync::ArcMutexGuard<Cell<u8>>: Send);
assert_not_impl!(lockfree_sync::ArcMutexGuard<Cell<u8>>: Sync);
assert_not_impl!(lockfree_sync::ArcMutexGuard<Rc<u8>>: Send);
// A shared guard hands out its mutex (`MutexGuard::mutex`,
// `ArcMutexGuard::mutex`), which outlives the guard: another thread could
// lock it after the unlock and take the `T` there, so a guard is `Sync` only
// when the mutex is (`T: Send`), besides `T: Sync`.
assert_not_impl!(MutexGuard<'static, SyncNotSend>: Sync);
assert_not_impl!(lockfree_sync::ArcMutexGuard<SyncNotSend>: Sync);
assert_impl!(lockfree_sync::LockApiMutex<Vec<u8>>: Send, Sync);
assert_impl!(lockfree_sync::LockApiMutexGuard<'static, Vec<u8>>: Send, Sync);

// The futures can be spawned on multi-threaded executors.
assert_impl!(LockAsync<'static, Vec<u8>>: Send);
assert_not_impl!(LockAsync<'static, Rc<u8>>: Send);
assert_impl!(RawLockAsync<'static>: Send);
assert_impl!(lockfree_sync::LockArcAsync<Vec<u8>>: Send);
assert_not_impl!(lockfree_sync::LockArcAsync<Rc<u8>>: Send);
assert_impl!(AcquireAsync<'static>: Send);

// The semaphore and its permits.
assert_impl!(Semaphore: Send, Sync);
assert_impl!(SemaphorePermit<'static>: Send, Sync);
assert_impl!(lockfree_sync::ArcSemaphorePermit: Send, Sync);
assert_impl!(lockfree_sync::AcquireArcAsync: Send);
assert_impl!(lockfree_sync::AcquireError: Send, Sync, Copy, std::error::Error);
assert_impl!(lockfree_sync::TryAcquireError: Send, Sync, Copy, std::error::Error);
assert_impl!(Fairness: Send, Sync, Copy);

// The MPSC queue: both ends move to other threads and tasks with their
// messages; neither is shared (a sender hands out nodes from its own block,
// and there is one receiver), so neither is `Sync`.
assert_impl!(lockfree_sync::mpsc::Sender<Vec<u8>>: Send);
// Not `Sync`: a sender is shared by cloning (see its docs).
assert_not_impl!(lockfree_sync::mpsc::Sender<Vec<u8>>: Sync);
assert_impl!(lockfree_sync::mpsc::Sender<Cell<u8>>: Send);
assert_not_impl!(lockfree_sync::mpsc::Sender<Rc<u8>>: Sync);
assert_not_impl!(lockfree_sync::mpsc::Sender<Rc<u8>>: Send);
assert_impl!(lockfree_sync::mpsc::Receiver<Vec<u8>>: Send);
assert_not_impl!(lockfree_sync::mpsc::Receiver<Vec<u8>>: Sync);
assert_not_impl!(lockfree_sync::mpsc::Receiver<Rc<u8>>: Send);
assert_impl!(lockfree_sync::mpsc::RecvAsync<'static, Vec<u8>>: Send);
assert_not_impl!(lockfree_sync::mpsc::RecvAsync<'static, Rc<u8>>: Send);
assert_impl!(lockfree_sync::mpsc::SendError<Vec<u8>>: Send, Sync, std::error::Error);

// The CSP channel: each end moves to another thread or task with the values
// it sends or receives; the futures can be spawned on multi-threaded
// executors.
assert_impl!(lockfree_sync::csp::Sender<Vec<u8>>: Send, Sync);
assert_not_impl!(lockfree_sync::csp::Sender<Rc<u8>>: Send);
assert_impl!(lockfree_sync::csp::Receiver<Vec<u8>>: Send, Sync);
assert_not_impl!(lockfree_sync::csp::Receiver<Rc<u8>>: Send);
assert_impl!(lockfree_sync::csp::SendAsync<'static, Vec<u8>>: Send);
assert_not_impl!(lockfree_sync::csp::SendAsync<'static, Rc<u8>>: Send);
assert_impl!(lockfree_sync::csp::RecvAsync<'static, Vec<u8>>: Send);
assert_not_impl!(lockfree_sync::csp::RecvAsync<'static, Rc<u8>>: Send);
assert_not_impl!(lockfree_sync::csp::RecvAsync<'static, Vec<u8>>: Unpin);
assert_impl!(lockfree_sync::csp::Alt<'static, Vec<u8>>: Send);
assert_impl!(lockfree_sync::csp::SelectAsync<'static, 'static, Vec<u8>>: Send, Unpin);
assert_not_impl!(lockfree_sync::csp::SelectAsync<'static, 'static, Rc<u8>>: Send);
assert_impl!(lockfree_sync::csp::SendError<Vec<u8>>: Send, Sync, std::error::Error);

#[test]
fn a_guard_moves_to_another_thread_and_unlocks_there() {
    let m = Mutex::new(1);
    let g = m.lock();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut g = g;
            *g += 1;
        });
    });
    assert_eq!(*m.try_lock().expect("unlocked by the other thread"), 2);
}

#[test]
fn a_permit_moves_to_another_thread_and_is_released_there() {
    let sem = Semaphore::new(1);
    let p = sem.acquire().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || drop(p));
    });
    assert_eq!(sem.available_permits(), 1);
}

/// `lock_arc_async`'s future can be spawned on a multi-threaded executor.
#[test]
fn owned_lock_future_is_send() {
    fn send<F: Send>(_: &F) {}
    let m = std::sync::Arc::new(Mutex::new(Vec::<u8>::new()));
    let fut = m.lock_arc_async();
    send(&fut);
}
