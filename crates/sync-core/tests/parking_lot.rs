//! The normal build forwards to `parking_lot_core`: the same contract the
//! loom model promises holds for the real parking lot.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use sync_core::parking_lot::{
    self, DEFAULT_PARK_TOKEN, FilterOp, ParkResult, ParkToken, SpinWait, UnparkToken,
};
use sync_core::testing::wait_until_parked;

/// A key per test: tests run in parallel on one global parking lot.
fn key_of<T>(x: &T) -> usize {
    x as *const T as usize
}

#[test]
fn failed_validate_returns_invalid_without_sleeping() {
    let slept = AtomicBool::new(false);
    let here = 0u8;
    // SAFETY: trivial callbacks.
    let r = unsafe {
        parking_lot::park(
            key_of(&here),
            || false,
            || slept.store(true, Ordering::Relaxed),
            |_, _| {},
            DEFAULT_PARK_TOKEN,
            None,
        )
    };
    assert_eq!(r, ParkResult::Invalid);
    assert!(!slept.load(Ordering::Relaxed));
}

#[test]
fn timeout_returns_timed_out_and_reports_last_thread() {
    let here = 0u8;
    let mut reported = None;
    // SAFETY: the callbacks only write a local.
    let r = unsafe {
        parking_lot::park(
            key_of(&here),
            || true,
            || {},
            |key, was_last| reported = Some((key, was_last)),
            DEFAULT_PARK_TOKEN,
            Some(Instant::now() + Duration::from_millis(5)),
        )
    };
    assert_eq!(r, ParkResult::TimedOut);
    assert_eq!(reported, Some((key_of(&here), true)));
}

#[test]
fn filter_sees_tokens_in_queue_order_and_tokens_reach_threads() {
    let anchor = Arc::new(0u8);
    let key = key_of(&*anchor);
    let mut threads = Vec::new();
    for i in 1..=3 {
        threads.push(thread::spawn(move || {
            // SAFETY: trivial callbacks.
            unsafe { parking_lot::park(key, || true, || {}, |_, _| {}, ParkToken(i), None) }
        }));
        // Park them one at a time so that the queue order is known.
        wait_until_parked(key, i);
    }

    let seen = Mutex::new(Vec::new());
    // SAFETY: the filter records and never panics (the lock is uncontended);
    // the callback is trivial.
    let r = unsafe {
        parking_lot::unpark_filter(
            key,
            |ParkToken(t)| {
                seen.lock().unwrap().push(t);
                if t == 2 {
                    FilterOp::Skip
                } else {
                    FilterOp::Unpark
                }
            },
            |r| UnparkToken(100 + r.unparked_threads),
        )
    };
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
    assert_eq!(r.unparked_threads, 2);
    assert!(r.have_more_threads, "thread 2 was skipped and stays parked");

    // SAFETY: trivial callback.
    let r = unsafe { parking_lot::unpark_one(key, |_| UnparkToken(7)) };
    assert_eq!(r.unparked_threads, 1);
    assert!(!r.have_more_threads);

    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        results,
        [
            ParkResult::Unparked(UnparkToken(102)),
            ParkResult::Unparked(UnparkToken(7)),
            ParkResult::Unparked(UnparkToken(102)),
        ]
    );
}

#[test]
fn unpark_all_wakes_everyone_with_the_token() {
    let anchor = Arc::new(0u8);
    let key = key_of(&*anchor);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            thread::spawn(move || {
                // SAFETY: trivial callbacks.
                unsafe {
                    parking_lot::park(key, || true, || {}, |_, _| {}, DEFAULT_PARK_TOKEN, None)
                }
            })
        })
        .collect();
    wait_until_parked(key, 3);
    // SAFETY: no callbacks.
    assert_eq!(unsafe { parking_lot::unpark_all(key, UnparkToken(5)) }, 3);
    for t in threads {
        assert_eq!(t.join().unwrap(), ParkResult::Unparked(UnparkToken(5)));
    }
}

#[test]
fn spin_wait_gives_up() {
    let mut spin = SpinWait::new();
    let spins = (0..1000).take_while(|_| spin.spin()).count();
    assert!(spins > 0 && spins < 1000, "spun {spins} times");
    spin.reset();
    assert!(spin.spin());
}

#[test]
fn unsafe_cell_gives_shared_and_exclusive_access() {
    let cell = sync_core::sync::cell::UnsafeCell::new(1);
    // SAFETY: no other reference to the value exists.
    cell.with_mut(|p| unsafe { *p += 1 });
    // SAFETY: no exclusive access is live.
    assert_eq!(cell.with(|p| unsafe { *p }), 2);
    assert_eq!(cell.into_inner(), 2);
}
