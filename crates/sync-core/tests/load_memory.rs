//! The memory of a slow yield lasts only while the CPUs stay saturated: a
//! sample that finds a CPU to spare forgets it. Otherwise waiters that park
//! because of it never measure a yield that would refute it, and a burst of
//! load (here, spinning threads) keeps the whole process parking after it
//! has gone. The load's verdicts are process-wide, so this file is a test
//! binary of its own with one test.
#![cfg(all(not(loom), target_os = "linux"))]

use std::time::{Duration, Instant};

use sync_core::load::{self, cpus, record_sample_for_test};
use sync_core::testing::BusyThreads;

#[test]
fn a_sample_with_a_cpu_to_spare_forgets_slow_yields() {
    // Three spinning threads a CPU: saturated, yet not so crowded that the
    // sampler alone calls yields slow (that takes more than CROWDED a CPU).
    let busy = BusyThreads::start(3 * cpus());
    let began = Instant::now();
    loop {
        // A sample of exactly that load before each look: saturated, not
        // crowded, so only a measured slow yield makes yields slow (another
        // process's load on the machine cannot).
        record_sample_for_test(3 * cpus() as u64);
        if load::yields_are_slow() {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "no yield beside {} spinning threads was measured slow",
            3 * cpus()
        );
        load::measured_yield();
    }
    drop(busy);

    // The memory lasts SLOW_YIELD_MEMORY (250 ms) at least from the yield
    // just measured; both checks below come well within it.
    // A sample that still finds the CPUs saturated keeps the memory.
    record_sample_for_test(3 * cpus() as u64);
    assert!(load::saturated());
    assert!(
        load::yields_are_slow(),
        "a saturated sample forgot the slow yield"
    );
    // One with a CPU to spare forgets it.
    record_sample_for_test(1);
    assert!(!load::saturated());
    assert!(
        !load::yields_are_slow(),
        "the slow yield outlived a sample with a CPU to spare"
    );
}
