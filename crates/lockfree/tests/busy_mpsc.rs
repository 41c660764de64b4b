//! A timed receive with 50 threads spinning on the CPUs, when the load
//! signal says yields are cheap (as it may, between samples, or when the
//! process cannot read the load): a timed receive must still return within
//! a generous 50 ms of its 1 ms deadline. A watch that yields before it
//! parks gives the core away for a scheduling round per yield (tens of
//! milliseconds here); a timed receive therefore never yields. Its own
//! binary: the override of the load signal is process-wide.
#![cfg(not(loom))]

use std::time::Duration;

use lockfree_sync::mpsc;
use sync_core::testing::{BusyThreads, timely};

const TIMEOUT: Duration = Duration::from_millis(1);
const BOUND: Duration = Duration::from_millis(50);
/// Tries per form: the median must keep the bound (`testing::timely`).
const TRIES: usize = 9;

#[test]
fn a_timed_recv_never_yields_a_scheduling_round_away() {
    sync_core::load::set_saturation_override(Some(false));
    let _busy = BusyThreads::start(50);
    let (_tx, rx) = mpsc::channel::<u64>();
    let r = timely(
        "mpsc::Receiver::try_recv_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || rx.try_recv_for(TIMEOUT),
    );
    assert!(r.iter().all(|r| *r == Err(mpsc::TryRecvError::Empty)));
    sync_core::load::set_saturation_override(None);
}
