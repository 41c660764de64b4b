//! A watch that can end (timed, or parking after its spins) spins only
//! briefly on saturated CPUs, whatever its policy's spin count: a spinning
//! thread can be preempted for a whole scheduling round, past its deadline,
//! and keeps a core from the thread it waits for (`SATURATED_SPINS` polls
//! when timed, `SATURATED_SPIN_TIME` when not). The saturation verdict is forced
//! (`load::set_saturation_override`), process-wide, so this file is a test
//! binary of its own with one test.
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use sync_core::load::set_saturation_override;
use sync_core::wait::{Next, SATURATED_SPIN_TIME, SATURATED_SPINS, WaitPolicy, Watch};

/// Pauses `watch` until it says something other than `Poll`, or `most`
/// times: what it said last, and the polls it made.
fn run(watch: &mut Watch, deadline: Option<Instant>, most: u32) -> (Next, u32) {
    let mut next = Next::Poll;
    for _ in 0..most {
        next = watch.pause(deadline);
        if next != Next::Poll {
            break;
        }
    }
    (next, watch.polls())
}

#[test]
fn a_watch_that_can_end_spins_only_briefly_on_saturated_cpus() {
    let far = || Some(Instant::now() + Duration::from_secs(60));
    let huge_spins = [
        ("spins(u32::MAX)", WaitPolicy::new().spins(u32::MAX)),
        (
            "conditional(60 s)",
            WaitPolicy::conditional(Duration::from_secs(60)),
        ),
        (
            "spin_then_block(u32::MAX)",
            WaitPolicy::spin_then_block(u32::MAX),
        ),
    ];

    set_saturation_override(Some(true));
    for (name, policy) in huge_spins {
        // Timed: parks (with its deadline) after SATURATED_SPINS polls.
        let (next, polls) = run(&mut Watch::new(policy), far(), 1_000_000);
        assert_eq!(
            (next, polls),
            (Next::Park, SATURATED_SPINS),
            "{name}, timed, saturated"
        );
        // Untimed, under a policy that parks: parks once it has spun
        // SATURATED_SPIN_TIME (not the policy's billions of spins, nor
        // WATCH_AT_MOST, which only primitives that ask apply).
        let began = Instant::now();
        let (next, polls) = run(&mut Watch::new(policy), None, u32::MAX);
        let took = began.elapsed();
        assert_eq!(next, Next::Park, "{name}, untimed, saturated");
        assert!(
            took >= SATURATED_SPIN_TIME && polls > SATURATED_SPINS,
            "{name}, untimed, saturated: parked after {polls} polls in {took:?}"
        );
        assert!(
            took < Duration::from_secs(1),
            "{name}, untimed, saturated: spun for {took:?}"
        );
    }
    // Untimed under a policy that never parks (a spin lock chosen as such):
    // spins as the policy says.
    let spin_lock = WaitPolicy::spin().spins(u32::MAX);
    let (next, polls) = run(&mut Watch::new(spin_lock), None, 1_000);
    assert_eq!((next, polls), (Next::Poll, 1_000), "spin(), untimed");
    // A policy that never parks sleeps (at most SNOOZE) between polls past
    // SATURATED_SPINS, instead of spinning to the deadline: a few dozen
    // polls in 5 ms, not millions. A try whose thread is preempted past the
    // deadline before its spins are done times out with fewer polls: up to
    // three tries, and one of them spins them all.
    let never_parks = WaitPolicy::spin().spins(u32::MAX);
    let mut tries = Vec::new();
    for _ in 0..3 {
        let deadline = Instant::now() + Duration::from_millis(5);
        let (next, polls) = run(&mut Watch::new(never_parks), Some(deadline), u32::MAX);
        assert_eq!(next, Next::TimedOut);
        assert!(
            polls < 1_000,
            "a never-parking timed watch made {polls} polls in 5 ms"
        );
        tries.push(polls);
        if polls >= SATURATED_SPINS {
            break;
        }
    }
    assert!(
        tries.iter().any(|&polls| polls >= SATURATED_SPINS),
        "a never-parking timed watch stopped spinning before {SATURATED_SPINS} polls: {tries:?}"
    );
    // A policy that spins less than SATURATED_SPINS is left as it is.
    let (next, polls) = run(&mut Watch::new(WaitPolicy::spin_then_block(10)), far(), 100);
    assert_eq!((next, polls), (Next::Park, 10));
    // A watch given a new policy keeps its cut spins (`set_policy` keeps
    // its progress); a reset (after a wake-up) starts over.
    let mut watch = Watch::new(WaitPolicy::new().spins(u32::MAX));
    assert_eq!(run(&mut watch, far(), 1_000).0, Next::Park);
    watch.set_policy(WaitPolicy::conditional(Duration::from_secs(60)));
    assert_eq!(watch.pause(far()), Next::Park);
    watch.reset(WaitPolicy::new().spins(u32::MAX));
    assert_eq!(run(&mut watch, far(), 1_000), (Next::Park, SATURATED_SPINS));

    // With a free CPU a spinning thread is not preempted: a watch spins as
    // the policy says, timed or not.
    set_saturation_override(Some(false));
    for (name, policy) in huge_spins {
        for deadline in [far(), None] {
            let (next, polls) = run(&mut Watch::new(policy), deadline, 1_000);
            assert_eq!(
                (next, polls),
                (Next::Poll, 1_000),
                "{name}, timed: {}, free CPU",
                deadline.is_some()
            );
        }
    }
    set_saturation_override(None);
}
