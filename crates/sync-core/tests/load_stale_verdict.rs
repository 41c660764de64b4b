//! A verdict of crowded CPUs outlives the load that caused it until a
//! sample refutes it. A watch that judges yields by measuring them
//! (`Watch::measured_yields_only`) and parks on that verdict must sample
//! before it parks: otherwise, in a process whose only waiters are such
//! watches, nothing samples again and every one of them parks for ever.
//! The verdict is process-wide, so this file is a test binary of its own
//! with one test.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use sync_core::wait::{Next, WaitPolicy, Watch};
use sync_core::{load, testing};

#[test]
fn measured_watches_refute_a_stale_crowded_verdict() {
    // A burst of 200 runnable threads, sampled; it is gone now (this test
    // binary runs alone, with one test).
    load::record_sample_for_test(200);
    assert!(
        load::crowded(),
        "the injected sample makes the CPUs crowded"
    );
    // Measured watches only, as a process whose one waiter is an mpsc
    // receiver. The smoothed count needs a few dozen samples (one per
    // `load::INTERVAL` at most) to fall back: well within the bound. The
    // bound counts only the time the machine itself is not crowded (as a
    // test run beside other jobs may be): then the verdict is right, and
    // stays.
    let bound = Duration::from_secs(20);
    let give_up = Duration::from_secs(60);
    let began = Instant::now();
    let mut quiet = Duration::ZERO;
    while load::crowded() {
        assert!(
            quiet < bound,
            "the crowded verdict outlived its load by {bound:?} of a quiet machine: measured \
             watches never sampled"
        );
        if began.elapsed() > give_up {
            eprintln!("the machine stayed crowded for {give_up:?}: nothing to check");
            return;
        }
        let turn = Instant::now();
        let mut watch = Watch::new(WaitPolicy::spin_then_block(0).yields(2)).measured_yields_only();
        while watch.pause(None) == Next::Poll {}
        std::thread::sleep(load::INTERVAL + Duration::from_millis(1));
        if !testing::machine_crowded() {
            quiet += turn.elapsed();
        }
    }
}
