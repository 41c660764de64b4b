//! A completion's waiter with more runnable threads than cores: 50 threads
//! spin on the CPUs while a thread waits for a `when` task that another
//! thread's submission enables. A waiter that yields is back a scheduling
//! round later (tens of milliseconds here) to see that its task finished;
//! one that parks is woken when it finishes, as a thread parked in a std
//! channel's `recv` is. The bound is generous; the precise figures are in
//! the report (`busy/wake-*/when/*`).
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::thread;
use std::time::{Duration, Instant};

use active_monitor::Monitor;
use sync_core::testing::BusyThreads;

const BUSY: usize = 50;
/// Rounds of the test: the median must keep [`BOUND`].
const ROUNDS: u64 = 9;
/// The median wake-up's bound: far above a woken thread's (tens of
/// microseconds beside 50 busy threads here), far below a scheduling
/// round.
const BOUND: Duration = Duration::from_millis(5);
/// How long the waker lets the waiter settle into its wait.
const SETTLE: Duration = Duration::from_millis(5);

#[test]
fn a_completion_waiter_is_woken_promptly_with_50_busy_threads() {
    let _busy = BusyThreads::start(BUSY);
    let base = Instant::now();
    let nanos = move || u64::try_from(base.elapsed().as_nanos()).expect("a short test");
    // The waiter's round (go), the round it waits in (ready), and when its
    // wait returned (woke, ns since `base`).
    let go = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicU64::new(0));
    let woke = Arc::new(AtomicU64::new(0));
    let m = Arc::new(Monitor::new(false));
    // One waiter thread for every round, which sleeps between them: a
    // thread that has just been spawned beside busy threads, or that ran
    // for long, waits for a CPU whether it yields or parks.
    let waiter = {
        let (go, ready, woke, m) = (go.clone(), ready.clone(), woke.clone(), m.clone());
        thread::spawn(move || {
            for round in 1..=ROUNDS {
                // Acquire: pairs with the Release store of `go`.
                while go.load(Acquire) < round {
                    thread::sleep(Duration::from_micros(50));
                }
                let done = m.when(|open| *open, |open| *open = false);
                // Release: pairs with the test's Acquire load of `ready`.
                ready.store(round, Release);
                done.wait();
                woke.store(nanos(), Release);
            }
        })
    };
    let mut latencies = Vec::new();
    for round in 1..=ROUNDS {
        woke.store(0, Relaxed);
        go.store(round, Release);
        // Acquire: pairs with the waiter's Release store of `ready`.
        while ready.load(Acquire) < round {
            thread::sleep(Duration::from_micros(50));
        }
        thread::sleep(SETTLE);
        let at = nanos();
        // Runs at once on the idle monitor, and then the waiter's task.
        drop(m.submit(|open| *open = true));
        let back = loop {
            // Acquire: pairs with the waiter's Release store of `woke`.
            match woke.load(Acquire) {
                0 => thread::sleep(Duration::from_micros(50)),
                t => break t,
            }
        };
        latencies.push(Duration::from_nanos(back.saturating_sub(at)));
    }
    waiter.join().expect("the waiter panicked");
    assert!(!m.call(|open| *open), "every round's task ran");
    let mut sorted = latencies.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    assert!(
        median <= BOUND,
        "the median wake-up took {median:?}, more than {BOUND:?}; rounds {latencies:?}"
    );
}
