//! `Watch::overdue`: the bound on how long a waiter watches before it parks
//! whatever its policy (`WATCH_AT_MOST`), which ast-mutex's and
//! adaptive-lock's entries ask before each pause.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use sync_core::wait::{Next, WATCH_AT_MOST, WATCH_CLOCK_AFTER, WaitPolicy, Watch};

/// Pauses `watch` until it is overdue; returns how long that took.
fn until_overdue(watch: &mut Watch) -> Duration {
    let began = Instant::now();
    while !watch.overdue() {
        assert_eq!(watch.pause(None), Next::Poll, "{:?}", watch.policy());
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{:?} never overdue",
            watch.policy()
        );
    }
    began.elapsed()
}

#[test]
fn a_watch_that_never_parks_is_overdue_after_watch_at_most_and_stays_so() {
    let mut watch = Watch::new(WaitPolicy::spin());
    let took = until_overdue(&mut watch);
    assert!(took >= WATCH_AT_MOST, "overdue after {took:?}");
    assert!(watch.polls() >= WaitPolicy::spin().spin_count());
    // The bound is on the whole wait: a wake-up does not restart it.
    watch.reset(WaitPolicy::spin());
    assert!(watch.overdue());
}

#[test]
fn long_spins_and_watch_timeouts_are_bounded_too() {
    // On saturated CPUs these watches end their spins after
    // `SATURATED_SPINS` polls (`wait_saturated.rs`): take the CPUs as free,
    // where they spin on and only this bound ends them. Process-wide; the
    // other tests of this file assert nothing that the verdict decides.
    sync_core::load::set_saturation_override(Some(false));
    for policy in [
        WaitPolicy::spin_then_block(u32::MAX),
        WaitPolicy::conditional(Duration::from_secs(3600)),
    ] {
        let mut watch = Watch::new(policy);
        let took = until_overdue(&mut watch);
        assert!(took >= WATCH_AT_MOST, "{policy:?} overdue after {took:?}");
    }
    sync_core::load::set_saturation_override(None);
}

#[test]
fn a_watch_that_parks_after_short_spins_never_starts_the_clock() {
    let policy = WaitPolicy::spin_then_block(WATCH_CLOCK_AFTER - 1);
    let mut watch = Watch::new(policy);
    loop {
        assert!(!watch.overdue());
        if watch.pause(None) == Next::Park {
            break;
        }
    }
    std::thread::sleep(WATCH_AT_MOST * 2);
    assert!(!watch.overdue(), "no clock was started");
}
