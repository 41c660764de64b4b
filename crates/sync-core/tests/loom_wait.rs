//! Loom models of the family's wait loop ([`Watch`] feeding a park, with
//! either rule for its yields: the default, and
//! [`Watch::yields_unless_crowded`]): a waiter that watches a flag, parks
//! when the watch says so (with its deadline as the park's timeout) and
//! returns when the flag is set or the deadline passes. The parking-lot
//! model returns a timed park early or late, as loom chooses, so both
//! outcomes of every deadline are explored.
//!
//! One test runs every model in sequence: the "yields are slow" override
//! is process-wide, and models that run beside each other in one binary
//! would see each other's setting.
#![cfg(loom)]

use std::time::{Duration, Instant};

use sync_core::load;
use sync_core::model;
use sync_core::parking_lot::{self, DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN, ParkResult};
use sync_core::sync::atomic::{AtomicBool, Ordering::*};
use sync_core::sync::{Arc, thread};
use sync_core::wait::{Next, WaitPolicy, Watch};

/// The family's watch of `policy`, or (`unless_crowded`) the one that
/// yields unless the CPUs are crowded ([`Watch::yields_unless_crowded`]).
fn watch_of(policy: WaitPolicy, unless_crowded: bool) -> Watch {
    let watch = Watch::new(policy);
    if unless_crowded {
        watch.yields_unless_crowded()
    } else {
        watch
    }
}

/// The waiting side: `true` once the flag is seen, `false` on timeout.
fn wait_for(
    flag: &AtomicBool,
    policy: WaitPolicy,
    unless_crowded: bool,
    deadline: Option<Instant>,
) -> bool {
    let key = flag as *const AtomicBool as usize;
    let mut watch = watch_of(policy, unless_crowded);
    loop {
        // Acquire: pairs with the Release store in `set`.
        if flag.load(Acquire) {
            return true;
        }
        match watch.pause(deadline) {
            Next::Poll => {}
            Next::TimedOut => return flag.load(Acquire),
            Next::Park => {
                // SAFETY: `validate` and the callbacks neither panic nor
                // call into the parking lot; `key` is the flag's address,
                // alive for the whole wait.
                let r = unsafe {
                    parking_lot::park(
                        key,
                        || !flag.load(Acquire),
                        || {},
                        |_, _| {},
                        DEFAULT_PARK_TOKEN,
                        deadline,
                    )
                };
                if r == ParkResult::TimedOut {
                    return flag.load(Acquire);
                }
                watch.reset(policy);
            }
        }
    }
}

/// The waking side.
fn set(flag: &AtomicBool) {
    let key = flag as *const AtomicBool as usize;
    // Release: pairs with the waiter's Acquire loads.
    flag.store(true, Release);
    // SAFETY: the callback neither panics nor calls into the parking lot.
    unsafe { parking_lot::unpark_all(key, DEFAULT_UNPARK_TOKEN) };
}

/// A waiter with `policy` (judging yields as `unless_crowded` says) and an
/// optional deadline against one setter: an untimed waiter always sees the
/// flag (no lost wake-up between the watch and the park); a timed one
/// returns either way, never hangs.
fn model_one(policy: WaitPolicy, unless_crowded: bool, timed: bool) {
    model::check_with_bound(2, move || {
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = Arc::clone(&flag);
            thread::spawn(move || set(&flag))
        };
        let deadline = timed.then(|| Instant::now() + Duration::from_millis(1));
        let seen = wait_for(&flag, policy, unless_crowded, deadline);
        assert!(seen || timed, "an untimed wait returned without the flag");
        setter.join().unwrap();
        assert!(flag.load(Acquire));
    });
}

#[test]
fn the_wait_loop_parks_and_times_out_without_losing_a_wakeup() {
    for slow in [false, true] {
        // `true`: yields are slow, so a parking policy parks right after
        // its spins and a never-parking one sleeps instead of yielding.
        load::set_saturation_override(Some(slow));
        for policy in [
            WaitPolicy::spin_then_block(1),
            WaitPolicy::new().spins(1).yields(1),
            WaitPolicy::block(),
        ] {
            for unless_crowded in [false, true] {
                model_one(policy, unless_crowded, false);
                model_one(policy, unless_crowded, true);
            }
        }
        // A policy that never parks returns only by seeing the flag or by
        // its deadline: only the untimed form terminates under loom, where
        // deadlines are not modelled in the watch.
        model_one(WaitPolicy::spin().spins(1), false, false);
        // With slow yields (the override also makes the CPUs crowded), a
        // parking policy's watch ends right after its spins, under either
        // rule: the yields it would have made are skipped.
        for unless_crowded in [false, true] {
            model::check_with_bound(1, move || {
                let other = thread::spawn(|| ());
                let mut watch = watch_of(WaitPolicy::new().spins(1).yields(5), unless_crowded);
                assert_eq!(watch.pause(None), Next::Poll);
                let expected = if slow { Next::Park } else { Next::Poll };
                assert_eq!(watch.pause(None), expected);
                other.join().unwrap();
            });
        }
    }
    load::set_saturation_override(None);
}
