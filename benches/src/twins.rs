//! The lock-based twins of paper 001's lock-free primitives, and the
//! "system" semaphore, for the `lf/` workloads.
//!
//! Lin & Vella compare each lock-free primitive with a lock-based twin whose
//! state is guarded by a spin lock, and with the kernel's primitive. The
//! mutex twin is [`SpinLock`] itself; the semaphore twins are here.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, Thread};

use sync_core::spin::SpinLock;

use crate::peers::BenchSemaphore;

/// `BenchSemaphore` for a twin with `new`, `acquire`, `try_acquire` and
/// `release` of one permit.
macro_rules! twin_semaphore {
    ($twin:ty) => {
        impl BenchSemaphore for $twin {
            fn new(permits: usize) -> Self {
                <$twin>::new(permits)
            }
            #[inline]
            fn with_permit<R>(&self, f: impl FnOnce() -> R) -> R {
                self.acquire();
                let r = f();
                self.release();
                r
            }
            #[inline]
            fn try_with_permit<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
                if !self.try_acquire() {
                    return None;
                }
                let r = f();
                self.release();
                Some(r)
            }
        }
    };
}

/// A thread waiting for a permit.
struct Waiter {
    thread: Thread,
    /// Set (Release) by the releaser that hands this waiter its permit.
    granted: AtomicBool,
}

/// The free permits and the FIFO queue of parked waiters.
struct State {
    permits: usize,
    waiters: VecDeque<Arc<Waiter>>,
}

/// The lock-based twin: a spin lock guards a permit count and a FIFO queue
/// of parked threads. An acquire that finds no permit queues itself and
/// parks; a release hands its permit straight to the oldest waiter.
pub struct SpinSemaphore {
    state: SpinLock<State>,
}

impl SpinSemaphore {
    /// A semaphore with `permits` permits.
    pub fn new(permits: usize) -> Self {
        Self {
            state: SpinLock::new(State {
                permits,
                waiters: VecDeque::new(),
            }),
        }
    }

    /// Takes a permit if one is free (then nobody waits: a release hands
    /// its permit to a waiter before it frees one).
    pub fn try_acquire(&self) -> bool {
        let mut s = self.state.lock();
        if s.permits > 0 {
            s.permits -= 1;
            true
        } else {
            false
        }
    }

    /// Takes a permit, parking the thread until one is handed to it.
    pub fn acquire(&self) {
        let me = {
            let mut s = self.state.lock();
            if s.permits > 0 {
                s.permits -= 1;
                return;
            }
            let me = Arc::new(Waiter {
                thread: thread::current(),
                granted: AtomicBool::new(false),
            });
            s.waiters.push_back(Arc::clone(&me));
            me
        };
        // Acquire: pairs with the Release store in `release`.
        while !me.granted.load(Ordering::Acquire) {
            thread::park();
        }
    }

    /// Returns a permit: to the oldest waiter if there is one.
    pub fn release(&self) {
        let next = {
            let mut s = self.state.lock();
            match s.waiters.pop_front() {
                Some(w) => w,
                None => {
                    s.permits += 1;
                    return;
                }
            }
        };
        // Release: the waiter's Acquire load sees the handoff.
        next.granted.store(true, Ordering::Release);
        next.thread.unpark();
    }
}

twin_semaphore!(SpinSemaphore);

/// The "system" semaphore: a `std::sync::Mutex` around the count and a
/// `Condvar` (futexes underneath, as a POSIX semaphore).
pub struct CondvarSemaphore {
    permits: Mutex<usize>,
    freed: Condvar,
}

impl CondvarSemaphore {
    /// A semaphore with `permits` permits.
    pub fn new(permits: usize) -> Self {
        Self {
            permits: Mutex::new(permits),
            freed: Condvar::new(),
        }
    }

    /// Takes a permit if one is free.
    pub fn try_acquire(&self) -> bool {
        let mut p = self.permits.lock().unwrap_or_else(PoisonError::into_inner);
        if *p > 0 {
            *p -= 1;
            true
        } else {
            false
        }
    }

    /// Takes a permit, waiting on the condition variable until one is free.
    pub fn acquire(&self) {
        let p = self.permits.lock().unwrap_or_else(PoisonError::into_inner);
        let mut p = self
            .freed
            .wait_while(p, |p| *p == 0)
            .unwrap_or_else(PoisonError::into_inner);
        *p -= 1;
    }

    /// Returns a permit and wakes one waiter.
    pub fn release(&self) {
        *self.permits.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.freed.notify_one();
    }

    /// Takes a permit, waiting at most `timeout`: whether it got one.
    pub fn try_acquire_for(&self, timeout: std::time::Duration) -> bool {
        let p = self.permits.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut p, _) = self
            .freed
            .wait_timeout_while(p, timeout, |p| *p == 0)
            .unwrap_or_else(PoisonError::into_inner);
        if *p > 0 {
            *p -= 1;
            true
        } else {
            false
        }
    }
}

twin_semaphore!(CondvarSemaphore);

/// Not a semaphore: the floor under every atomic-counter semaphore's
/// uncontended path, one `fetch_sub` to take a permit and one `fetch_add` to
/// give it back, with nothing else. It cannot wait, so only
/// `lf/sem-uncontended` uses it, to show how close each real semaphore
/// comes to the hardware's cost on this machine.
pub struct RmwFloor(std::sync::atomic::AtomicIsize);

impl BenchSemaphore for RmwFloor {
    fn new(permits: usize) -> Self {
        Self(std::sync::atomic::AtomicIsize::new(permits as isize))
    }

    fn with_permit<R>(&self, f: impl FnOnce() -> R) -> R {
        self.try_with_permit(f)
            .expect("RmwFloor cannot wait: uncontended use only")
    }

    #[inline]
    fn try_with_permit<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        // Acquire/Release: the permit orders the work as a real one would.
        if self.0.fetch_sub(1, Ordering::Acquire) < 1 {
            self.0.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let r = f();
        self.0.fetch_add(1, Ordering::Release);
        Some(r)
    }
}
