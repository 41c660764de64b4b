//! A drop of this crate that runs a task's waker and also owns a user's
//! value (an undelivered message, a value kept for the next receive, the
//! last handle of a `Mutex<T>`) drops that value before the waker's panic
//! goes on. Left to the drop glue, the value was dropped while the waker's
//! panic unwound, and a value whose `Drop` panics too aborted the process
//! ("panic in a destructor during cleanup").
//!
//! Each test runs in a child process (this test binary, re-run on that one
//! test), so that an abort fails the test instead of killing the harness.
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::task::{Poll, Wake, Waker};

use lockfree_sync::{Fairness, LockArcAsync, Mutex, csp};
use sync_core::testing::{DropBomb as Bomb, HostileWaker, first_panic_is, poll_once as poll};

/// Runs `f` in a child process: this test binary, re-run on `test` alone.
fn in_child(test: &str, f: impl FnOnce()) {
    sync_core::testing::in_child("LOCKFREE_PANICKING_VALUES_CHILD", test, f);
}

#[test]
fn a_send_future_dropped_with_its_value_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "a_send_future_dropped_with_its_value_drops_it_before_the_wakers_panic_goes_on",
        || {
            let drops = Arc::new(AtomicUsize::new(0));
            let (mut tx, rx) = csp::channel::<Bomb>();
            let hostile = HostileWaker::new();
            let mut send = Box::pin(tx.send_async(Bomb(Arc::clone(&drops))));
            // Nobody receives: the offer is published with the task's waker.
            assert!(poll(send.as_mut(), &hostile.waker()).is_pending());
            // Withdrawn by the drop, which drops the waker (it panics) and
            // the undelivered value (its drop panics too).
            hostile.panic_on_drops(1);
            first_panic_is("HostileWaker: drop panics", || drop(send));
            assert_eq!(drops.load(SeqCst), 1, "the value was dropped once");
            // Nothing of the withdrawn offer is left in the channel.
            drop(rx);
            assert!(tx.is_closed());
        },
    );
}

#[test]
fn a_csp_receiver_dropped_with_a_kept_value_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "a_csp_receiver_dropped_with_a_kept_value_drops_it_before_the_wakers_panic_goes_on",
        || {
            let drops = Arc::new(AtomicUsize::new(0));
            let (mut tx, mut rx) = csp::channel::<Bomb>();
            // A receive future dropped as the sender hands its value over:
            // the receiver keeps the value for its next receive.
            let mut recv = Box::pin(rx.recv_async());
            assert!(poll(recv.as_mut(), Waker::noop()).is_pending());
            let sent = poll(
                Box::pin(tx.send_async(Bomb(Arc::clone(&drops)))).as_mut(),
                Waker::noop(),
            );
            assert!(matches!(sent, Poll::Ready(Ok(()))));
            drop(recv);
            // A sending task waits, whose waker panics when the receiver's
            // drop wakes it.
            let hostile = HostileWaker::new();
            let mut send = Box::pin(tx.send_async(Bomb(Arc::clone(&drops))));
            assert!(poll(send.as_mut(), &hostile.waker()).is_pending());
            hostile.panic_on_drops(1);
            first_panic_is("HostileWaker: drop panics", || drop(rx));
            assert_eq!(drops.load(SeqCst), 1, "the kept value was dropped once");
            // The sender was released: its value comes back.
            match poll(send.as_mut(), Waker::noop()) {
                Poll::Ready(Err(csp::SendError(value))) => {
                    let r = catch_unwind(AssertUnwindSafe(move || drop(value)));
                    assert!(r.is_err(), "a Bomb's drop panics");
                }
                _ => panic!("the sender was not released with its value"),
            }
            assert_eq!(drops.load(SeqCst), 2);
        },
    );
}

#[test]
fn a_lock_arc_future_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "a_lock_arc_future_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on",
        || {
            for fairness in [Fairness::Barging, Fairness::Fifo] {
                let drops = Arc::new(AtomicUsize::new(0));
                let m = Arc::new(Mutex::with_fairness(Bomb(Arc::clone(&drops)), fairness));
                // Held with no guard, so that the future holds the last handle.
                m.raw().lock();
                let hostile = HostileWaker::new();
                let mut lock = Box::pin(Arc::clone(&m).lock_arc_async());
                assert!(poll(lock.as_mut(), &hostile.waker()).is_pending());
                drop(m);
                // Withdrawn by the drop, which drops the waker (it panics)
                // and then the last handle (whose `T`'s drop panics too).
                hostile.panic_on_drops(1);
                first_panic_is("HostileWaker: drop panics", || drop(lock));
                assert_eq!(drops.load(SeqCst), 1, "the mutex's value was dropped once");
            }
        },
    );
}

/// A task whose waker drops the task's lock future (with its handle on the
/// mutex) and then panics.
struct DropsItsFutureThenPanics(StdMutex<Option<Pin<Box<LockArcAsync<Bomb>>>>>);

impl Wake for DropsItsFutureThenPanics {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        drop(self.0.lock().unwrap().take());
        panic!("a task's waker panicked");
    }
}

#[test]
fn an_arc_guard_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "an_arc_guard_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on",
        || {
            for fairness in [Fairness::Barging, Fairness::Fifo] {
                let drops = Arc::new(AtomicUsize::new(0));
                let m = Arc::new(Mutex::with_fairness(Bomb(Arc::clone(&drops)), fairness));
                let guard = m.lock_arc();
                let task = Arc::new(DropsItsFutureThenPanics(StdMutex::new(None)));
                let waker = Waker::from(Arc::clone(&task));
                let mut lock = Box::pin(Arc::clone(&m).lock_arc_async());
                assert!(poll(lock.as_mut(), &waker).is_pending());
                *task.0.lock().unwrap() = Some(lock);
                drop((m, waker));
                // The unlock wakes the task, whose waker drops the future's
                // handle and panics: the guard's handle is the last, and
                // its drop drops the mutex's value (which panics too).
                first_panic_is("a task's waker panicked", || drop(guard));
                assert_eq!(drops.load(SeqCst), 1, "the mutex's value was dropped once");
            }
        },
    );
}
