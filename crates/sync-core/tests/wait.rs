//! The wait loop with more runnable threads than cores: 50 threads spin on
//! the CPUs while a waiter watches with a 1 ms deadline. A yield then gives
//! the core away for a whole scheduling round (tens of milliseconds), so a
//! loop that yields overshoots; the family's watch parks or sleeps briefly
//! instead, and returns within a generous 50 ms of what a plain sleep to
//! the same deadline takes beside it (`testing::timely`).
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::time::{Duration, Instant};

use sync_core::testing::{BusyThreads, timely, within};
use sync_core::wait::{Backoff, Next, WaitPolicy, Watch, give_way};
use sync_core::waiter::Waiter;

const DEADLINE: Duration = Duration::from_millis(1);
const BOUND: Duration = Duration::from_millis(50);
const BUSY: usize = 50;
const TRIES: usize = 7;

/// Watches a flag nobody sets until `deadline`, parking (with the
/// deadline as the timeout) when the watch says so.
fn watch_until(policy: WaitPolicy, deadline: Instant) -> Next {
    let never = AtomicBool::new(false);
    let mut watch = Watch::new(policy);
    while !never.load(Acquire) {
        match watch.pause(Some(deadline)) {
            Next::Poll => {}
            Next::TimedOut => return Next::TimedOut,
            Next::Park => {
                let now = Instant::now();
                if now >= deadline {
                    return Next::TimedOut;
                }
                std::thread::park_timeout(deadline - now);
                watch.reset(policy);
            }
        }
    }
    unreachable!("nobody sets the flag")
}

#[test]
fn timed_watches_return_near_their_deadline_with_50_busy_threads() {
    let _busy = BusyThreads::start(BUSY);
    for (name, policy) in [
        ("spin (never parks)", WaitPolicy::spin()),
        (
            "spin with back-off (never parks)",
            WaitPolicy::spin_backoff(),
        ),
        ("parking_lot's (spin, yield, park)", WaitPolicy::new()),
        ("many yields, then park", WaitPolicy::new().yields(1000)),
    ] {
        let nexts = timely(name, DEADLINE, BOUND, TRIES, || {
            watch_until(policy, Instant::now() + DEADLINE)
        });
        assert!(nexts.iter().all(|&next| next == Next::TimedOut));
    }
}

#[test]
fn a_waiters_timed_wait_returns_near_its_deadline_with_50_busy_threads() {
    let _busy = BusyThreads::start(BUSY);
    for spin in [true, false] {
        let tokens = timely("Waiter::wait_until", DEADLINE, BOUND, TRIES, || {
            let waiter = Waiter::for_thread(0);
            waiter.wait_until(spin, Instant::now() + DEADLINE)
        });
        assert!(tokens.iter().all(Option::is_none));
    }
}

#[test]
fn giving_way_is_brief_with_50_busy_threads() {
    let _busy = BusyThreads::start(BUSY);
    // Twenty turns of a back-off (spins, then giving way) and twenty
    // gives-way with a deadline: each a short sleep once yields are slow,
    // never a scheduling round.
    within("20 back-off snoozes", BOUND * 4, || {
        let mut backoff = Backoff::new();
        for _ in 0..20 {
            backoff.snooze();
        }
    });
    within("20 gives-way", BOUND * 4, || {
        for _ in 0..20 {
            give_way(Some(Instant::now() + DEADLINE));
        }
    });
}

/// A watch that judges yields by measured yields only (it never samples
/// the load) stops yielding once one yield was measured slow: with 50 busy
/// threads, a watch allowed 1000 yields parks after a few scheduling
/// rounds, not a thousand. Timed, it never yields.
#[test]
fn a_watch_of_measured_yields_only_stops_yielding_once_a_yield_was_slow() {
    let _busy = BusyThreads::start(BUSY);
    let policy = WaitPolicy::spin_then_block(2).yields(1000);
    let (polls, _) = within("1000 measured yields", BOUND * 10, || {
        let mut watch = Watch::new(policy).measured_yields_only();
        while watch.pause(None) == Next::Poll {}
        watch.polls()
    });
    assert!(polls >= 2, "the spins come first");
    let mut watch = Watch::new(policy).measured_yields_only();
    let far = Instant::now() + Duration::from_secs(60);
    assert_eq!(watch.pause(Some(far)), Next::Poll);
    assert_eq!(watch.pause(Some(far)), Next::Poll);
    assert_eq!(
        watch.pause(Some(far)),
        Next::Park,
        "a timed wait never yields"
    );
}

/// A watch that yields unless the CPUs are crowded stops yielding beside
/// 50 busy threads: the first yield that takes a scheduling round samples
/// the load, which finds the CPUs crowded, and the watch parks, after at
/// most two of its thousand yields (none if a sample had found them
/// crowded already).
#[test]
fn a_watch_that_yields_unless_crowded_parks_beside_50_busy_threads() {
    let _busy = BusyThreads::start(BUSY);
    let polls = polls_unless_crowded();
    assert!(polls >= 2, "the spins come first");
    assert!(
        polls <= 4,
        "it yielded {} times beside {BUSY} busy threads",
        polls - 2
    );
}

/// The polls a watch that yields unless the CPUs are crowded, allowed 2
/// spins and 1000 yields, makes before it parks (within 500 ms).
fn polls_unless_crowded() -> u32 {
    let policy = WaitPolicy::spin_then_block(2).yields(1000);
    let (polls, _) = within("1000 yields unless crowded", BOUND * 10, || {
        let mut watch = Watch::new(policy).yields_unless_crowded();
        while watch.pause(None) == Next::Poll {}
        watch.polls()
    });
    polls
}

/// A watch that yields unless the CPUs are crowded, beside 4 busy threads
/// (2 per CPU here: not crowded), yields until one of its yields is slow
/// (one that waited for the busy threads' time slices) and parks after
/// it: a watch allowed 1000 yields makes a few, not a thousand of a time
/// slice each. A yield can be quick when a CPU happens to have nothing
/// else to run, so the bound allows several. The load's verdict is held
/// at "not crowded" (a test beside this one may have left a crowded
/// verdict, which would park the watch before any yield).
#[test]
fn a_watch_that_yields_unless_crowded_parks_after_a_slow_yield_beside_4_busy_threads() {
    /// Gives the verdict back to the sampler, even if the test panics.
    struct Sampled;
    impl Drop for Sampled {
        fn drop(&mut self) {
            sync_core::load::set_saturation_override(None);
        }
    }
    let _busy = BusyThreads::start(4);
    sync_core::load::set_saturation_override(Some(false));
    let _sampled = Sampled;
    let polls = polls_unless_crowded();
    assert!(polls >= 3, "the spins come first, then a yield");
    assert!(
        polls <= 2 + 20,
        "it yielded {} times beside 4 busy threads",
        polls - 2
    );
}
