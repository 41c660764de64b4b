//! Loom models of the parking-lot contract that the family's crates rely on.
//!
//! Run with `cargo xtask loom -p sync-core`.
#![cfg(loom)]

use std::time::Instant;

use sync_core::loom::sync::Mutex;
use sync_core::model;
use sync_core::parking_lot::{
    self, DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN, FilterOp, ParkResult, ParkToken, UnparkToken,
};
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use sync_core::sync::{Arc, thread};

const KEY: usize = 0x1000;
const OTHER_KEY: usize = 0x2000;

/// Parks on `KEY` until `flag` is set, the way every primitive of the family
/// waits: re-check under the queue lock in `validate`. Returns how many
/// `park` calls returned `Invalid` without running `before_sleep`.
fn wait_for(flag: &AtomicBool) -> usize {
    let mut invalid = 0;
    // Acquire: pairs with the Release store in `set_and_wake`.
    while !flag.load(Ordering::Acquire) {
        let slept = AtomicBool::new(false);
        // SAFETY: validate and timed_out neither panic nor call into the lot.
        let r = unsafe {
            parking_lot::park(
                KEY,
                || !flag.load(Ordering::Acquire),
                || slept.store(true, Ordering::Relaxed),
                |_, _| {},
                DEFAULT_PARK_TOKEN,
                None,
            )
        };
        match r {
            ParkResult::Invalid => {
                assert!(
                    !slept.load(Ordering::Relaxed),
                    "a thread whose validate failed ran before_sleep"
                );
                invalid += 1;
            }
            ParkResult::Unparked(_) => assert!(slept.load(Ordering::Relaxed)),
            ParkResult::TimedOut => panic!("no timeout was asked for"),
        }
    }
    invalid
}

fn set_and_wake(flag: &AtomicBool) -> usize {
    // Release: pairs with the Acquire loads in `wait_for`.
    flag.store(true, Ordering::Release);
    // SAFETY: unpark_all has no callbacks.
    unsafe { parking_lot::unpark_all(KEY, DEFAULT_UNPARK_TOKEN) }
}

/// Two waiters and a waker: a waiter whose validate fails never sleeps, and
/// an unpark that follows a successful validate is never lost (loom reports a
/// waiter parked forever as a deadlock).
#[test]
fn unpark_after_validate_is_never_lost() {
    model::check_with_bound(3, || {
        let flag = Arc::new(AtomicBool::new(false));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let flag = Arc::clone(&flag);
                thread::spawn(move || wait_for(&flag))
            })
            .collect();
        let woken = set_and_wake(&flag);
        assert!(woken <= 2);
        for w in waiters {
            assert!(w.join().unwrap() <= 1, "validate failed twice for one wait");
        }
    });
}

/// The model is not vacuous: a waiter that checks its condition outside the
/// queue lock (validate always true) loses the wakeup in some interleaving,
/// and loom must report it.
#[test]
fn a_check_outside_validate_loses_the_wakeup() {
    model::check_fails(
        "a_check_outside_validate_loses_the_wakeup",
        "deadlock",
        || {
            model::check_with_bound(2, || {
                let flag = Arc::new(AtomicBool::new(false));
                let waiter = {
                    let flag = Arc::clone(&flag);
                    thread::spawn(move || {
                        if !flag.load(Ordering::Acquire) {
                            // SAFETY: trivial callbacks.
                            unsafe {
                                parking_lot::park(
                                    KEY,
                                    || true,
                                    || {},
                                    |_, _| {},
                                    DEFAULT_PARK_TOKEN,
                                    None,
                                )
                            };
                        }
                    })
                };
                set_and_wake(&flag);
                waiter.join().unwrap();
            })
        },
    );
}

/// `unpark_filter` offers parked threads in the order they were queued, and
/// the token its callback returns reaches every woken thread.
#[test]
fn filter_sees_tokens_in_queue_order() {
    model::check_with_bound(2, || {
        // The order in which `validate` ran, i.e. queue order: validate runs
        // under the queue lock, right before the thread is queued.
        let queued = Arc::new(Mutex::new(Vec::new()));
        let parkers: Vec<_> = (1..=2)
            .map(|i| {
                let queued = Arc::clone(&queued);
                thread::spawn(move || {
                    // SAFETY: validate only pushes to a lock that no other
                    // callback holds across a parking-lot call; no panics.
                    unsafe {
                        parking_lot::park(
                            KEY,
                            || {
                                queued.lock().unwrap().push(i);
                                true
                            },
                            || {},
                            |_, _| {},
                            ParkToken(i),
                            None,
                        )
                    }
                })
            })
            .collect();

        let mut unparked = 0;
        while unparked < 2 {
            let mut seen = Vec::new();
            let mut queued_now = Vec::new();
            // SAFETY: the filter and the callback record under the queue
            // lock without panicking.
            let r = unsafe {
                parking_lot::unpark_filter(
                    KEY,
                    |ParkToken(t)| {
                        seen.push(t);
                        FilterOp::Unpark
                    },
                    |_| {
                        // Under the queue lock: no thread can validate now.
                        queued_now = queued.lock().unwrap()[unparked..].to_vec();
                        UnparkToken(7)
                    },
                )
            };
            assert_eq!(seen, queued_now, "filter order differs from queue order");
            assert_eq!(r.unparked_threads, seen.len());
            assert!(!r.have_more_threads);
            unparked += r.unparked_threads;
            thread::yield_now();
        }
        for p in parkers {
            assert_eq!(p.join().unwrap(), ParkResult::Unparked(UnparkToken(7)));
        }
    });
}

/// Two waiters with timeouts race one `unpark_one`: exactly as many return
/// `Unparked` as the unparker counted, and `timed_out` reports
/// `was_last_thread` truthfully, under the queue lock.
#[test]
fn timeout_races_unpark() {
    model::check_with_bound(2, || {
        // Threads parked on KEY, kept by the callbacks that run under the
        // queue lock: validate (+1), timed_out and the unpark callback (-n).
        let queued = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let queued = Arc::clone(&queued);
                thread::spawn(move || {
                    let mut last = None;
                    // SAFETY: the callbacks only touch atomics and assert
                    // facts that hold by the contract (no panic if it holds).
                    let r = unsafe {
                        parking_lot::park(
                            KEY,
                            || {
                                queued.fetch_add(1, Ordering::Relaxed);
                                true
                            },
                            || {},
                            |key, was_last| {
                                assert_eq!(key, KEY);
                                let left = queued.fetch_sub(1, Ordering::Relaxed) - 1;
                                assert_eq!(was_last, left == 0, "was_last_thread is wrong");
                                last = Some(was_last);
                            },
                            DEFAULT_PARK_TOKEN,
                            Some(Instant::now()),
                        )
                    };
                    assert_eq!(r == ParkResult::TimedOut, last.is_some());
                    r
                })
            })
            .collect();
        // SAFETY: the callback only touches an atomic.
        let r = unsafe {
            parking_lot::unpark_one(KEY, |r| {
                queued.fetch_sub(r.unparked_threads, Ordering::Relaxed);
                UnparkToken(9)
            })
        };
        let unparked = waiters
            .into_iter()
            .map(|w| w.join().unwrap())
            .filter(|r| *r == ParkResult::Unparked(UnparkToken(9)))
            .count();
        assert_eq!(unparked, r.unparked_threads);
        assert_eq!(queued.load(Ordering::Relaxed), 0);
    });
}

/// `before_sleep` runs outside the queue lock (it may unpark another key, as
/// a condition variable unlocking its mutex does), and after the thread is
/// queued (an unpark issued from it reaches the thread it releases).
#[test]
fn before_sleep_may_call_into_the_lot() {
    model::check_with_bound(3, || {
        let gate = Arc::new(AtomicBool::new(false));
        let waiter = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                // SAFETY: validate and timed_out are trivial; before_sleep
                // is allowed to call into the parking lot.
                unsafe {
                    parking_lot::park(
                        KEY,
                        || true,
                        || {
                            // Open the gate the other thread waits on: it
                            // then wakes us, and we are already queued.
                            gate.store(true, Ordering::Release);
                            parking_lot::unpark_all(OTHER_KEY, DEFAULT_UNPARK_TOKEN);
                        },
                        |_, _| {},
                        DEFAULT_PARK_TOKEN,
                        None,
                    )
                }
            })
        };
        let opener = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                while !gate.load(Ordering::Acquire) {
                    // SAFETY: validate only loads an atomic.
                    unsafe {
                        parking_lot::park(
                            OTHER_KEY,
                            || !gate.load(Ordering::Acquire),
                            || {},
                            |_, _| {},
                            DEFAULT_PARK_TOKEN,
                            None,
                        )
                    };
                }
                // SAFETY: no callbacks.
                let n = unsafe { parking_lot::unpark_all(KEY, DEFAULT_UNPARK_TOKEN) };
                assert_eq!(n, 1, "the waiter was not queued before before_sleep");
            })
        };
        opener.join().unwrap();
        assert!(waiter.join().unwrap().is_unparked());
    });
}
