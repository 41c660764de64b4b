//! A timed enter with more runnable threads than cores: 50 threads spin on
//! the CPUs while `try_enter_for` waits 1 ms for a state that never comes (or
//! for a lock that is held). The family's wait loop parks or sleeps
//! briefly rather than yield, so it returns within a generous 50 ms; the
//! precise figures are in the report (`busy/`).
#![cfg(not(loom))]

use std::time::Duration;

use sync_core::testing::{BusyThreads, timely};

ast_mutex::states! {
    enum Light { Red, Green }
}

const TIMEOUT: Duration = Duration::from_millis(1);
const BOUND: Duration = Duration::from_millis(50);
/// Tries per form: the median must keep the bound (`testing::timely`).
const TRIES: usize = 5;

#[test]
fn timed_enters_return_on_time_with_50_busy_threads() {
    let _busy = BusyThreads::start(50);
    let m = ast_mutex::AstMutex::new(Light::Red, 0u32);
    let r = timely(
        "try_enter_for(a state that never comes)",
        TIMEOUT,
        BOUND,
        TRIES,
        || m.try_enter_for(Light::Green, TIMEOUT).is_none(),
    );
    assert!(r.iter().all(|&r| r));
    let held = m.enter(Light::Red);
    let r = timely("try_enter_for(a held lock)", TIMEOUT, BOUND, TRIES, || {
        m.try_enter_for(Light::Red, TIMEOUT).is_none()
    });
    assert!(r.iter().all(|&r| r));
    held.exit(Light::Red);
}
