//! The park hook (`sync_core::wake_chain::before_park`) runs another
//! crate's delivery, user code that may panic, inside a blocking wait; a
//! panic that escapes it is dropped and the wait goes on. Found by round
//! 46's review while that panic still unwound out of the wait: the lock's
//! `waiting` sensor kept counting the unwound waiter for ever, and a guard
//! that lets go of the lock and takes it back (`unlocked`,
//! `unlocked_fair`, `bump`) came out without the lock, so that the guard's
//! drop released another thread's hold (or, with `f` panicking too,
//! aborted the process).
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use adaptive_lock::{AdaptiveMutex, AdaptiveMutexGuard, ArcAdaptiveMutexGuard, RawAdaptiveLock};
use sync_core::testing::parked_on;
use sync_core::wake_chain;

fn panicking_delivery() {
    panic!("the park hook's delivery panicked");
}

#[test]
fn a_wait_with_a_panicking_park_hook_takes_the_lock_and_is_no_longer_counted() {
    let m = Arc::new(AdaptiveMutex::new(0u32));
    for timed in [false, true] {
        let held = m.lock();
        let m2 = Arc::clone(&m);
        let waiter = thread::spawn(move || {
            wake_chain::deliver_before_park(panicking_delivery);
            catch_unwind(AssertUnwindSafe(|| {
                if timed {
                    // Long enough to reach the park while the lock is held.
                    *m2.try_lock_for(Duration::from_secs(30)).expect("in time") += 1;
                } else {
                    *m2.lock() += 1;
                }
            }))
            .is_ok()
        });
        // Until it parks (or has come out of its wait without parking).
        while parked_on(key(&m)) < 1 && !waiter.is_finished() {
            thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        assert!(
            waiter.join().expect("the waiter"),
            "the hook's panic came out of the wait (timed: {timed})"
        );
        assert_eq!(m.stats().waiting, 0, "timed: {timed}");
    }
    assert_eq!(*m.lock(), 2);
}

/// How a guard lets go of the lock and takes it back.
#[derive(Clone, Copy, Debug)]
enum Relock {
    Unlocked,
    UnlockedFair,
    Bump,
    ArcUnlocked,
    ArcUnlockedFair,
    ArcBump,
}

fn key(m: &AdaptiveMutex<u32>) -> usize {
    // SAFETY: only the address is used.
    unsafe { m.raw() as *const RawAdaptiveLock as usize }
}

/// Another thread takes the lock while `how` has let go of it, and holds it
/// for a while; the guard's wait to take it back parks, and its park hook
/// panics. When the guard's method returns, the other thread must be done
/// and the guard must hold the lock again.
fn relock_with_a_panicking_park_hook(how: Relock) {
    let m = Arc::new(AdaptiveMutex::new(0u32));
    let other_done = Arc::new(AtomicBool::new(false));
    let other_in = Arc::new(AtomicBool::new(false));
    let other = {
        let (m, done, inside) = (
            Arc::clone(&m),
            Arc::clone(&other_done),
            Arc::clone(&other_in),
        );
        move || {
            let mut g = m.lock();
            inside.store(true, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(100));
            *g += 1;
            done.store(true, Ordering::SeqCst);
            drop(g);
        }
    };
    let wait_for_other = || {
        while !other_in.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(1));
        }
        wake_chain::deliver_before_park(panicking_delivery);
    };
    let mut t = None;
    let unwound = match how {
        Relock::Unlocked | Relock::UnlockedFair | Relock::Bump => {
            let mut g = m.lock();
            let r = catch_unwind(AssertUnwindSafe(|| match how {
                Relock::Unlocked => AdaptiveMutexGuard::unlocked(&mut g, || {
                    t = Some(thread::spawn(other));
                    wait_for_other();
                }),
                Relock::UnlockedFair => AdaptiveMutexGuard::unlocked_fair(&mut g, || {
                    t = Some(thread::spawn(other));
                    wait_for_other();
                }),
                _ => {
                    // `bump` hands the lock to a parked thread.
                    t = Some(thread::spawn(other));
                    while parked_on(key(&m)) < 1 {
                        thread::sleep(Duration::from_millis(1));
                    }
                    wake_chain::deliver_before_park(panicking_delivery);
                    AdaptiveMutexGuard::bump(&mut g);
                }
            }));
            // Held by this thread again: the other one is done, and nobody
            // else takes the lock.
            assert!(
                other_done.load(Ordering::SeqCst) && m.is_locked(),
                "{how:?}: back without the lock"
            );
            *g += 1;
            drop(g);
            r.is_err()
        }
        _ => {
            let mut g = m.lock_arc();
            let r = catch_unwind(AssertUnwindSafe(|| match how {
                Relock::ArcUnlocked => ArcAdaptiveMutexGuard::unlocked(&mut g, || {
                    t = Some(thread::spawn(other));
                    wait_for_other();
                }),
                Relock::ArcUnlockedFair => ArcAdaptiveMutexGuard::unlocked_fair(&mut g, || {
                    t = Some(thread::spawn(other));
                    wait_for_other();
                }),
                _ => {
                    t = Some(thread::spawn(other));
                    while parked_on(key(&m)) < 1 {
                        thread::sleep(Duration::from_millis(1));
                    }
                    wake_chain::deliver_before_park(panicking_delivery);
                    ArcAdaptiveMutexGuard::bump(&mut g);
                }
            }));
            // Held by this thread again: the other one is done, and nobody
            // else takes the lock.
            assert!(
                other_done.load(Ordering::SeqCst) && m.is_locked(),
                "{how:?}: back without the lock"
            );
            *g += 1;
            drop(g);
            r.is_err()
        }
    };
    t.expect("spawned").join().expect("the other thread");
    assert!(
        !unwound,
        "{how:?}: the hook's panic is dropped, the relock goes on"
    );
    assert!(!m.is_locked(), "{how:?}");
    assert_eq!(
        *m.lock(),
        2,
        "{how:?}: both critical sections ran, one at a time"
    );
    assert_eq!(m.stats().waiting, 0, "{how:?}");
}

#[test]
fn a_guard_taking_the_lock_back_holds_it_when_the_park_hook_panics() {
    for how in [
        Relock::Unlocked,
        Relock::UnlockedFair,
        Relock::Bump,
        Relock::ArcUnlocked,
        Relock::ArcUnlockedFair,
        Relock::ArcBump,
    ] {
        relock_with_a_panicking_park_hook(how);
    }
}

/// `unlocked`'s `f` panics, and the wait to take the lock back (made while
/// that panic unwinds) runs a park hook that panics: the first panic
/// comes out, the guard holds the lock again, and the process does not
/// abort (found by review: lock_api's relock, run from a drop during the
/// unwind, let the second panic out of it, which aborts).
#[test]
fn a_relock_with_a_panicking_park_hook_while_f_unwinds_does_not_abort() {
    sync_core::testing::in_child(
        "ADAPTIVE_LOCK_PANICKING_PARK_HOOK_CHILD",
        "a_relock_with_a_panicking_park_hook_while_f_unwinds_does_not_abort",
        || {
            for arc in [false, true] {
                let m = Arc::new(AdaptiveMutex::new(0u32));
                let other_in = Arc::new(AtomicBool::new(false));
                let other_done = Arc::new(AtomicBool::new(false));
                let spawn_other = || {
                    let (m, inside, done) = (
                        Arc::clone(&m),
                        Arc::clone(&other_in),
                        Arc::clone(&other_done),
                    );
                    thread::spawn(move || {
                        let g = m.lock();
                        inside.store(true, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(100));
                        done.store(true, Ordering::SeqCst);
                        drop(g);
                    })
                };
                let f = || {
                    while !other_in.load(Ordering::SeqCst) {
                        thread::sleep(Duration::from_millis(1));
                    }
                    wake_chain::deliver_before_park(panicking_delivery);
                    panic!("f panicked");
                };
                let mut t = None;
                let r = if arc {
                    let mut g = m.lock_arc();
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        ArcAdaptiveMutexGuard::unlocked(&mut g, || {
                            t = Some(spawn_other());
                            f()
                        })
                    }));
                    assert!(other_done.load(Ordering::SeqCst) && m.is_locked());
                    r
                } else {
                    let mut g = m.lock();
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        AdaptiveMutexGuard::unlocked(&mut g, || {
                            t = Some(spawn_other());
                            f()
                        })
                    }));
                    assert!(other_done.load(Ordering::SeqCst) && m.is_locked());
                    r
                };
                let payload = r.expect_err("f's panic comes out");
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"f panicked"));
                t.expect("spawned").join().expect("the other thread");
                assert!(!m.is_locked());
            }
        },
    );
}
