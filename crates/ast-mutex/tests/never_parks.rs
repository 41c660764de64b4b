//! An entry whose wait policy never parks, beside threads that exit and
//! re-enter in a loop: it watches the lock word for at most
//! `sync_core::wait::WATCH_AT_MOST` past its spins, then waits in its queue
//! whatever its policy, where the exits' fairness serves it (see
//! `AstMutex`'s `# Fairness`). Before, it watched until it found the lock
//! free, and the loopers, which re-enter on their fast path at once after
//! each exit, kept it out for seconds (a review measured 8.6 s while 1.35 M
//! exits went by).
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use ast_mutex::{AstMutex, Config, WaitPolicy, WakeMode};
use sync_core::testing::BusyThreads;

ast_mutex::states! { enum F { Idle, Busy } }

/// The longest an entry may take: generous for a loaded machine (the
/// documented bound is a few milliseconds of watching, then a bounded
/// number of exits).
const BOUND: Duration = Duration::from_secs(2);
/// Entries per form and mode.
const TRIES: usize = 3;
/// How long the test waits for an entry to end once the loopers are
/// stopped, before it calls it hung.
const WATCHDOG: Duration = Duration::from_secs(20);
/// The loopers' critical section: the lock is free only for the instant
/// between a looper's exit and its re-entry, once per critical section.
const CRITICAL_SECTION: Duration = Duration::from_micros(100);

/// Threads that each enter, hold the lock for `CRITICAL_SECTION`, exit,
/// and re-enter at once (on the fast path); stopped on drop.
struct Loopers {
    stop: Arc<AtomicBool>,
    exits: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Loopers {
    fn start(m: &Arc<AstMutex<F, u64>>, n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let exits = Arc::new(AtomicU64::new(0));
        let threads = (0..n)
            .map(|_| {
                let (m, stop, exits) = (Arc::clone(m), Arc::clone(&stop), Arc::clone(&exits));
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let mut g = m.enter(F::Idle);
                        *g += 1;
                        let held = Instant::now();
                        while held.elapsed() < CRITICAL_SECTION {
                            std::hint::spin_loop();
                        }
                        g.exit(F::Idle);
                        exits.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        // Running before the entry under test arrives.
        let start = Instant::now();
        while exits.load(Ordering::Relaxed) < 1000 {
            assert!(start.elapsed() < WATCHDOG, "the loopers do not run");
            thread::yield_now();
        }
        Self {
            stop,
            exits,
            threads,
        }
    }
}

impl Drop for Loopers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Runs `entry` (an entry that returns whether it entered) on a thread of
/// its own, under a policy that never parks, beside a looper and two busy
/// threads, `TRIES` times; asserts that each entered within `BOUND`.
fn entries_within_bound(mode: WakeMode, what: &str, entry: fn(&AstMutex<F, u64>) -> bool) {
    let config = Config::new().wake_mode(mode).wait(WaitPolicy::spin());
    let m = Arc::new(AstMutex::with_config(F::Idle, 0u64, config));
    // Two busy threads keep both cores taken: the looper is preempted at
    // random points, rarely in the instant between its exit and its
    // re-entry, when the lock is free.
    let _busy = BusyThreads::start(2);
    let loopers = Loopers::start(&m, 1);
    for i in 0..TRIES {
        let (done, took) = mpsc::channel();
        let mc = Arc::clone(&m);
        let exits_before = loopers.exits.load(Ordering::Relaxed);
        let t = thread::spawn(move || {
            let began = Instant::now();
            let entered = entry(&mc);
            let _ = done.send((entered, began.elapsed()));
        });
        let outcome = took.recv_timeout(BOUND);
        let exits = loopers.exits.load(Ordering::Relaxed) - exits_before;
        if outcome.is_err() {
            // Stopping the loopers lets the entry end, and the thread be
            // joined.
            drop(loopers);
            let ended = took.recv_timeout(WATCHDOG);
            panic!(
                "{mode:?} {what} #{i}: not entered within {BOUND:?}, while {exits} exits went by \
                 (once the loopers stopped: {ended:?})"
            );
        }
        let (entered, waited) = outcome.unwrap();
        assert!(entered, "{mode:?} {what} #{i}: did not enter");
        assert!(
            waited <= BOUND,
            "{mode:?} {what} #{i}: entered after {waited:?}, while {exits} exits went by"
        );
        t.join().unwrap();
    }
    drop(loopers);
}

#[test]
fn an_entry_that_never_parks_enters_beside_looping_threads() {
    for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
        entries_within_bound(mode, "enter", |m| {
            let mut g = m.enter(F::Idle);
            *g += 1;
            true
        });
    }
}

#[test]
fn a_timed_entry_that_never_parks_enters_beside_looping_threads() {
    for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
        entries_within_bound(mode, "try_enter_for(60 s)", |m| {
            match m.try_enter_for(F::Idle, Duration::from_secs(60)) {
                Some(mut g) => {
                    *g += 1;
                    true
                }
                None => false,
            }
        });
    }
}
