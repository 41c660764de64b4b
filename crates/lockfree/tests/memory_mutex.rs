//! Issue 12, bug 2 (the mutex's side): what cancelled and timed-out lock
//! attempts leave behind must be bounded by the waiters still present, not
//! grow with the number of attempts. A counting global allocator measures
//! the bytes live in this test binary; wakers built here stand for tasks
//! with a 4 KiB allocation, and their strong counts show who still holds
//! them.
#![cfg(not(loom))]

use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use lockfree_sync::{Fairness, Mutex};
use sync_core::testing::{CountingAlloc, live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The tests measure one counter: they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A task's stand-in: 4 KiB that a waker keeps alive.
struct Task {
    _stack: [u8; 4096],
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {}
}

const ATTEMPTS: usize = 20_000;

/// 20,000 lock futures polled once (queued) behind a held lock and dropped,
/// as `tokio::time::timeout` drops them: no task is kept alive, and the
/// bytes left are those of a handful of nodes, not 20,000.
#[test]
fn cancelled_lock_futures_leave_nothing_behind_while_the_lock_is_held() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0u64, fairness);
        let held = m.lock();
        let task = Arc::new(Task { _stack: [0; 4096] });
        let waker = Waker::from(Arc::clone(&task));
        let before = live_bytes();
        for _ in 0..ATTEMPTS {
            let mut fut = pin!(m.lock_async());
            assert!(
                fut.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending()
            );
        }
        let kept = live_bytes() - before;
        assert_eq!(Arc::strong_count(&task), 2, "cancelled waits keep the task");
        assert!(
            kept < 4096,
            "{fairness:?}: {ATTEMPTS} cancelled waits keep {kept} bytes"
        );
        drop(held);
        assert_eq!(*m.lock(), 0);
    }
}

/// The same with threads whose timed locks time out.
#[test]
fn timed_out_thread_locks_leave_nothing_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let m = Mutex::new(0u64);
    let held = m.lock();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Warm up the thread's own allocations first.
            assert!(m.try_lock_for(Duration::ZERO).is_none());
            let before = live_bytes();
            for _ in 0..2_000 {
                assert!(m.try_lock_for(Duration::from_micros(1)).is_none());
            }
            let kept = live_bytes() - before;
            assert!(kept < 4096, "2000 timed-out locks keep {kept} bytes");
        });
    });
    drop(held);
    assert_eq!(*m.lock(), 0);
}

/// A waiter that stays queued (a live task) does not stop the withdrawn
/// ones in front of it from being freed, and the unlock still wakes it.
#[test]
fn a_live_waiter_behind_cancelled_ones_is_still_woken() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let m = Mutex::new(0u64);
    let held = m.lock();
    let task = Arc::new(Task { _stack: [0; 4096] });
    let waker = Waker::from(Arc::clone(&task));
    for _ in 0..100 {
        let mut fut = pin!(m.lock_async());
        assert!(
            fut.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
    }
    let mut live = Box::pin(m.lock_async());
    assert!(
        live.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    drop(held);
    match live.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(mut g) => *g += 1,
        Poll::Pending => panic!("the live waiter was not woken by the unlock"),
    }
    assert_eq!(*m.lock(), 1);
}
