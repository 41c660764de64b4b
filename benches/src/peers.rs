//! One trait per kind of primitive, implemented for every peer and (as the
//! crates land) for ours, so that each workload is written once.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};

use sync_core::spin::SpinLock;

/// A mutual-exclusion lock around a value.
pub trait BenchMutex<T>: Send + Sync + 'static {
    /// The lock around `value`.
    fn new(value: T) -> Self;
    /// Runs `f` with the lock held: one lock and one unlock.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

impl<T: Send + 'static> BenchMutex<T> for std::sync::Mutex<T> {
    fn new(value: T) -> Self {
        std::sync::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl<T: Send + 'static> BenchMutex<T> for parking_lot::Mutex<T> {
    fn new(value: T) -> Self {
        parking_lot::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

/// The spin-lock twin: test-and-test-and-set with crossbeam's `Backoff`.
impl<T: Send + 'static> BenchMutex<T> for SpinLock<T> {
    fn new(value: T) -> Self {
        SpinLock::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

/// `lockfree_sync::Mutex` with its default fairness, `Fairness::Barging`.
impl<T: Send + 'static> BenchMutex<T> for lockfree_sync::Mutex<T> {
    fn new(value: T) -> Self {
        lockfree_sync::Mutex::new(value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

/// `lockfree_sync::Mutex` with `Fairness::Fifo`: the paper's strict handoff.
pub struct FifoMutex<T>(pub lockfree_sync::Mutex<T>);

impl<T: Send + 'static> BenchMutex<T> for FifoMutex<T> {
    fn new(value: T) -> Self {
        FifoMutex(lockfree_sync::Mutex::with_fairness(
            value,
            lockfree_sync::Fairness::Fifo,
        ))
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock())
    }
}

ast_mutex::states! {
    /// The one state of an `AstMutex` used as a plain mutex.
    pub enum OneState { Only }
}

/// `AstMutex` as a plain mutex: enter and exit in its only state.
impl<T: Send + 'static> BenchMutex<T> for ast_mutex::AstMutex<OneState, T> {
    fn new(value: T) -> Self {
        ast_mutex::AstMutex::new(OneState::Only, value)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut g = self.enter(OneState::Only);
        let r = f(&mut g);
        g.exit(OneState::Only);
        r
    }
}

/// A counting semaphore used by threads.
pub trait BenchSemaphore: Send + Sync + 'static {
    /// A semaphore with `permits` permits.
    fn new(permits: usize) -> Self;
    /// Runs `f` holding one permit, waiting (blocking the thread) until one
    /// is free: one acquire and one release.
    fn with_permit<R>(&self, f: impl FnOnce() -> R) -> R;
    /// Runs `f` holding one permit if one is free now; `None` if not.
    fn try_with_permit<R>(&self, f: impl FnOnce() -> R) -> Option<R>;
}

/// `lockfree_sync::Semaphore`: `acquire` parks the thread.
impl BenchSemaphore for lockfree_sync::Semaphore {
    fn new(permits: usize) -> Self {
        lockfree_sync::Semaphore::new(permits)
    }
    #[inline]
    fn with_permit<R>(&self, f: impl FnOnce() -> R) -> R {
        let _permit = self.acquire().expect("never closed");
        f()
    }
    #[inline]
    fn try_with_permit<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _permit = self.try_acquire().ok()?;
        Some(f())
    }
}

/// `tokio::sync::Semaphore` has no blocking acquire: the blocking form is
/// `futures::executor::block_on(sem.acquire())`.
impl BenchSemaphore for tokio::sync::Semaphore {
    fn new(permits: usize) -> Self {
        tokio::sync::Semaphore::new(permits)
    }
    #[inline]
    fn with_permit<R>(&self, f: impl FnOnce() -> R) -> R {
        let _permit = futures::executor::block_on(self.acquire()).expect("never closed");
        f()
    }
    #[inline]
    fn try_with_permit<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _permit = self.try_acquire().ok()?;
        Some(f())
    }
}

/// `async_lock::Semaphore`, blocking with `acquire_blocking`.
impl BenchSemaphore for async_lock::Semaphore {
    fn new(permits: usize) -> Self {
        async_lock::Semaphore::new(permits)
    }
    #[inline]
    fn with_permit<R>(&self, f: impl FnOnce() -> R) -> R {
        let _permit = self.acquire_blocking();
        f()
    }
    #[inline]
    fn try_with_permit<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _permit = self.try_acquire()?;
        Some(f())
    }
}

/// The two ends of a channel, for the rendezvous workloads.
pub trait BenchChannel: 'static {
    /// The sending end.
    type Tx: Send + 'static;
    /// The receiving end.
    type Rx: Send + 'static;
    /// A channel of capacity `cap` (0: a rendezvous).
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx);
    /// Sends, blocking until the value is taken (or buffered).
    fn send(tx: &Self::Tx, value: u64);
    /// Receives, blocking until a value comes.
    fn recv(rx: &Self::Rx) -> u64;
}

/// `crossbeam-channel`.
pub struct Crossbeam;
/// `std::sync::mpsc::sync_channel`.
pub struct StdSync;
/// `flume`.
pub struct Flume;

impl BenchChannel for Crossbeam {
    type Tx = crossbeam_channel::Sender<u64>;
    type Rx = crossbeam_channel::Receiver<u64>;
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx) {
        crossbeam_channel::bounded(cap)
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
}

impl BenchChannel for StdSync {
    type Tx = std::sync::mpsc::SyncSender<u64>;
    type Rx = std::sync::mpsc::Receiver<u64>;
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::sync_channel(cap)
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
}

impl BenchChannel for Flume {
    type Tx = flume::Sender<u64>;
    type Rx = flume::Receiver<u64>;
    fn bounded(cap: usize) -> (Self::Tx, Self::Rx) {
        flume::bounded(cap)
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    fn recv(rx: &Self::Rx) -> u64 {
        rx.recv().expect("sender alive")
    }
}

/// The condvar monitor peer, written once for every workload that compares
/// against a lock and condition variables (`ast/`'s buffers, `am/bq`): a
/// mutex with condition variables, std's or parking_lot's. A waiter waits
/// while its predicate is false; [`run`](Monitor::run) notifies after
/// unlocking, as both std's and parking_lot's docs recommend.
pub trait Monitor: Send + Sync + 'static {
    /// A monitor around `queue` with `condvars` condition variables.
    fn new(queue: VecDeque<u64>, condvars: usize) -> Self;

    /// Locks, waits on condition variable `wait_on` while `!ready`, runs
    /// `f` and unlocks.
    fn locked<R>(
        &self,
        wait_on: usize,
        ready: impl Fn(&VecDeque<u64>) -> bool,
        f: impl FnOnce(&mut VecDeque<u64>) -> R,
    ) -> R;

    /// Wakes one waiter of condition variable `cv`, or all of them.
    fn notify(&self, cv: usize, all: bool);

    /// [`locked`](Self::locked), then [`notify`](Self::notify) after the
    /// unlock.
    #[inline]
    fn run<R>(
        &self,
        wait_on: usize,
        ready: impl Fn(&VecDeque<u64>) -> bool,
        f: impl FnOnce(&mut VecDeque<u64>) -> R,
        notify: usize,
        all: bool,
    ) -> R {
        let r = self.locked(wait_on, ready, f);
        self.notify(notify, all);
        r
    }
}

/// `std::sync::Mutex` with `std::sync::Condvar`s.
pub struct StdMonitor(Mutex<VecDeque<u64>>, Vec<Condvar>);
/// `parking_lot::Mutex` with `parking_lot::Condvar`s.
pub struct PlMonitor(parking_lot::Mutex<VecDeque<u64>>, Vec<parking_lot::Condvar>);

impl Monitor for StdMonitor {
    fn new(queue: VecDeque<u64>, condvars: usize) -> Self {
        Self(
            Mutex::new(queue),
            (0..condvars).map(|_| Condvar::new()).collect(),
        )
    }

    #[inline]
    fn locked<R>(
        &self,
        wait_on: usize,
        ready: impl Fn(&VecDeque<u64>) -> bool,
        f: impl FnOnce(&mut VecDeque<u64>) -> R,
    ) -> R {
        let g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut g = self.1[wait_on]
            .wait_while(g, |q| !ready(q))
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut g)
    }

    #[inline]
    fn notify(&self, cv: usize, all: bool) {
        if all {
            self.1[cv].notify_all();
        } else {
            self.1[cv].notify_one();
        }
    }
}

impl Monitor for PlMonitor {
    fn new(queue: VecDeque<u64>, condvars: usize) -> Self {
        Self(
            parking_lot::Mutex::new(queue),
            (0..condvars).map(|_| parking_lot::Condvar::new()).collect(),
        )
    }

    #[inline]
    fn locked<R>(
        &self,
        wait_on: usize,
        ready: impl Fn(&VecDeque<u64>) -> bool,
        f: impl FnOnce(&mut VecDeque<u64>) -> R,
    ) -> R {
        let mut g = self.0.lock();
        self.1[wait_on].wait_while(&mut g, |q| !ready(q));
        f(&mut g)
    }

    #[inline]
    fn notify(&self, cv: usize, all: bool) {
        if all {
            self.1[cv].notify_all();
        } else {
            self.1[cv].notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn counts_under_contention<M: BenchMutex<u64>>() {
        let m = Arc::new(M::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        m.with(|v| *v += 1);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(m.with(|v| *v), 40_000);
    }

    #[test]
    fn every_mutex_peer_excludes() {
        counts_under_contention::<std::sync::Mutex<u64>>();
        counts_under_contention::<parking_lot::Mutex<u64>>();
        counts_under_contention::<SpinLock<u64>>();
        counts_under_contention::<ast_mutex::AstMutex<OneState, u64>>();
        counts_under_contention::<lockfree_sync::Mutex<u64>>();
        counts_under_contention::<FifoMutex<u64>>();
    }

    /// At most `permits` threads inside at once, and every permit back.
    fn limits<S: BenchSemaphore>() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let s = Arc::new((S::new(2), AtomicUsize::new(0), AtomicUsize::new(0)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        s.0.with_permit(|| {
                            let inside = s.1.fetch_add(1, Ordering::SeqCst) + 1;
                            s.2.fetch_max(inside, Ordering::SeqCst);
                            s.1.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(s.2.load(Ordering::SeqCst) <= 2);
        let nested =
            s.0.try_with_permit(|| s.0.try_with_permit(|| s.0.try_with_permit(|| ())));
        assert_eq!(nested, Some(Some(None)), "two permits, both back");
    }

    #[test]
    fn every_semaphore_peer_limits() {
        limits::<lockfree_sync::Semaphore>();
        limits::<tokio::sync::Semaphore>();
        limits::<async_lock::Semaphore>();
        limits::<crate::twins::SpinSemaphore>();
        limits::<crate::twins::CondvarSemaphore>();
    }

    fn passes_values<C: BenchChannel>() {
        let (tx, rx) = C::bounded(0);
        let t = std::thread::spawn(move || (0..100).for_each(|i| C::send(&tx, i)));
        let got: Vec<u64> = (0..100).map(|_| C::recv(&rx)).collect();
        t.join().unwrap();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn every_channel_peer_delivers_in_order() {
        passes_values::<Crossbeam>();
        passes_values::<StdSync>();
        passes_values::<Flume>();
    }
}
