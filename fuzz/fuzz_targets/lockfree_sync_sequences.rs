//! Drives a `lockfree_sync::Semaphore` and a `Mutex` (in the mode the input
//! picks) through operation sequences from the input, on one thread with
//! futures polled by hand, and checks what must hold whatever the order:
//!
//! * never two mutex guards, and never more permits held than exist;
//! * no lost wakeup: after everything is released, re-polling only the
//!   futures whose waker was woken completes every one of them;
//! * no permit lost or made: at the end exactly the permits that exist are
//!   free.
#![no_main]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use libfuzzer_sys::fuzz_target;
use lockfree_sync::{
    AcquireAsync, Fairness, LockAsync, Mutex, MutexGuard, Semaphore, SemaphorePermit,
};

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A future with its own counting waker and the wake count it last saw.
struct Polled<F> {
    fut: F,
    wakes: Arc<Count>,
    waker: Waker,
    seen: usize,
}

impl<F: Future + Unpin> Polled<F> {
    fn new(fut: F) -> Self {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&wakes));
        Self {
            fut,
            wakes,
            waker,
            seen: 0,
        }
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(SeqCst) > self.seen
    }

    fn poll(&mut self) -> Poll<F::Output> {
        self.seen = self.wakes.0.load(SeqCst);
        Pin::new(&mut self.fut).poll(&mut Context::from_waker(&self.waker))
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&setup, ops)) = data.split_first() else {
        return;
    };
    let fairness = if setup & 1 == 0 {
        Fairness::Barging
    } else {
        Fairness::Fifo
    };
    let mut total = (setup >> 1) as usize % 4;
    let m = Mutex::with_fairness(0u32, fairness);
    let sem = Semaphore::new(total);
    let mut guard: Option<MutexGuard<'_, u32>> = None;
    let mut locks: Vec<Polled<LockAsync<'_, u32>>> = Vec::new();
    let mut permits: Vec<SemaphorePermit<'_>> = Vec::new();
    let mut acquires: Vec<Polled<AcquireAsync<'_>>> = Vec::new();
    let held =
        |permits: &Vec<SemaphorePermit<'_>>| permits.iter().map(|p| p.permits()).sum::<usize>();

    for &op in ops.iter().take(200) {
        let arg = (op >> 4) as usize;
        match op & 0xf {
            0 => {
                let mut l = Polled::new(m.lock_async());
                match l.poll() {
                    Poll::Ready(g) => {
                        assert!(guard.is_none(), "two guards");
                        guard = Some(g);
                    }
                    Poll::Pending => locks.push(l),
                }
            }
            1 if !locks.is_empty() => {
                let i = arg % locks.len();
                if let Poll::Ready(g) = locks[i].poll() {
                    assert!(guard.is_none(), "two guards");
                    guard = Some(g);
                    locks.remove(i);
                }
            }
            2 if !locks.is_empty() => drop(locks.remove(arg % locks.len())),
            3 => drop(guard.take()),
            4 => {
                if let Some(g) = guard.take() {
                    MutexGuard::unlock_fair(g);
                }
            }
            5 => {
                if guard.is_none() {
                    guard = m.try_lock();
                }
            }
            6 => {
                let mut a = Polled::new(sem.acquire_many_async(arg % 4));
                match a.poll() {
                    Poll::Ready(Ok(p)) => permits.push(p),
                    Poll::Ready(Err(_)) => assert!(sem.is_closed(), "refused while open"),
                    Poll::Pending => acquires.push(a),
                }
            }
            7 if !acquires.is_empty() => {
                let i = arg % acquires.len();
                if let Poll::Ready(p) = acquires[i].poll() {
                    match p {
                        Ok(p) => permits.push(p),
                        Err(_) => assert!(sem.is_closed(), "refused while open"),
                    }
                    acquires.remove(i);
                }
            }
            8 if !acquires.is_empty() => drop(acquires.remove(arg % acquires.len())),
            9 if !permits.is_empty() => drop(permits.remove(arg % permits.len())),
            10 if !permits.is_empty() => {
                let p = permits.remove(arg % permits.len());
                total -= p.permits();
                p.forget();
            }
            11 => {
                sem.release(arg % 3);
                total += arg % 3;
            }
            12 => {
                if let Ok(p) = sem.try_acquire_many(arg % 3) {
                    permits.push(p);
                }
            }
            13 if permits.len() >= 2 => {
                // Merge two permits, then split part of it off again.
                let other = permits.pop().unwrap();
                let last = permits.last_mut().unwrap();
                last.merge(other);
                if let Some(part) = last.split(arg % 3) {
                    permits.push(part);
                }
            }
            14 => total -= sem.forget_permits(arg % 3),
            15 if arg == 15 => {
                // Rare: close. Every queued acquire is refused from now on.
                sem.close();
            }
            _ => {}
        }
        assert!(held(&permits) <= total, "more permits held than exist");
    }

    // Drain: release everything; only woken futures are polled again.
    drop(guard.take());
    while !locks.is_empty() {
        let i = locks
            .iter()
            .position(Polled::woken)
            .expect("mutex free, futures queued, none woken: a lost wakeup");
        if let Poll::Ready(g) = locks[i].poll() {
            locks.remove(i);
            drop(g);
        }
    }
    permits.clear();
    loop {
        let Some(i) = acquires.iter().position(Polled::woken) else {
            break;
        };
        if let Poll::Ready(p) = acquires[i].poll() {
            acquires.remove(i);
            drop(p);
        }
    }
    // Whatever still waits asks for more than exists (or waits behind such
    // a request); withdrawn, its demand is folded back.
    acquires.clear();
    assert_eq!(sem.available_permits(), total, "permits lost or made");
    assert!(m.try_lock().is_some());
});
