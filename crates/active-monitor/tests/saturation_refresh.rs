//! A served monitor's submitters keep the saturation verdict current: a
//! verdict left by a burst of load that has gone does not keep the server
//! asleep while they submit.
//!
//! Its own test binary: the verdict is process-wide and comes from the
//! machine's real load here (no override), so no other test of this
//! process may load the CPUs meanwhile.
#![cfg(not(loom))]

use std::thread;
use std::time::{Duration, Instant};

use active_monitor::{Monitor, set_server_limit};

#[test]
fn submitters_resample_a_stale_saturated_verdict_and_their_tasks_go_back_to_the_server() {
    set_server_limit(1000);
    let m = Monitor::builder().build_served(0u64);
    assert!(m.has_server(), "under the cap: a server");
    // The verdict a sample of 64 runnable threads per CPU leaves: saturated.
    // Only the submitters below can sample again: the server sleeps while
    // the verdict says saturated.
    sync_core::load::record_sample_for_test(64 * sync_core::load::cpus() as u64);
    assert!(sync_core::load::saturated(), "the planted verdict");
    let me = thread::current().id();
    let start = Instant::now();
    let mut combined = 0u64;
    loop {
        // The body reports the thread that ran it: this one while the
        // verdict says saturated (combining), the server's once it is
        // resampled. (A machine that really is saturated meanwhile keeps it
        // combining: hence the generous bound.)
        let ran_on = m.submit(|_| thread::current().id()).wait();
        if ran_on != me {
            break;
        }
        combined += 1;
        if start.elapsed() >= Duration::from_secs(20) {
            // Combining is right on a machine that really is saturated: the
            // test can only show the resampling on one that is not.
            let running = sync_core::testing::runnable_threads();
            if running.is_some_and(|r| r > sync_core::load::cpus() as u64) {
                eprintln!(
                    "inconclusive: {running:?} threads runnable on {} CPUs, so the \
                     verdict is rightly saturated",
                    sync_core::load::cpus()
                );
                return;
            }
            panic!(
                "after {combined} submissions over 20 s every task still ran on the submitter, \
                 with {running:?} threads runnable: the stale verdict was never resampled \
                 (saturated: {})",
                sync_core::load::saturated()
            );
        }
    }
    assert!(
        combined > 0,
        "the planted verdict made the first submissions combine"
    );
}
