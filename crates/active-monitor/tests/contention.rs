//! Contention: many callers, producers waiting for space, and what they
//! leave behind. Each test failed before its fix (see the commit that
//! added it).
#![cfg(not(loom))]

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread::{self, ThreadId};
use std::time::Duration;

use active_monitor::{Monitor, Order};

/// Callers asleep behind a combiner are served by it: it does not hand
/// the monitor to a sleeping caller after every batch (nobody would serve
/// during that caller's wake-up, every new caller would queue and fall
/// asleep behind it, and the convoy never dissolved: hundreds of times
/// slower than a lock with 32 threads calling). With 40 sleeping callers
/// (fewer than a queue's worth) and batch 5, the old code ran their tasks
/// on 1 + 40 / 5 threads, each a hand-over to a sleeping thread; now the
/// combiner runs them all.
#[test]
#[cfg(target_os = "linux")]
fn a_combiner_serves_sleeping_callers_instead_of_handing_over_to_them() {
    use sync_core::testing::{KernelThread, holds_within};
    const CALLERS: usize = 40;
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(Vec::new()));
    let (entered, is_in) = mpsc::channel();
    let gate = Arc::new(Barrier::new(2));
    let combiner = {
        let (m, gate) = (Arc::clone(&m), Arc::clone(&gate));
        thread::spawn(move || {
            m.call(|v: &mut Vec<ThreadId>| {
                entered.send(()).unwrap();
                gate.wait();
                v.push(thread::current().id());
            });
            thread::current().id()
        })
    };
    is_in.recv().unwrap();
    let (named, names) = mpsc::channel();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (m, named) = (Arc::clone(&m), named.clone());
            thread::spawn(move || {
                named.send(KernelThread::current()).unwrap();
                m.call(|v| v.push(thread::current().id()))
            })
        })
        .collect();
    let queued = || m.__test_queued() == CALLERS;
    assert!(holds_within(Duration::from_secs(10), queued), "{m:?}");
    // Past their spin: the callers sleep. Asleep once after it queued, a
    // caller has stopped spinning for good (a caller still spinning, or
    // preempted before it stopped, is handed the monitor, rightly).
    for caller in names.iter().take(CALLERS) {
        assert!(
            holds_within(Duration::from_secs(10), || caller.sleeps()),
            "a caller never fell asleep"
        );
    }
    gate.wait();
    let combiner = combiner.join().unwrap();
    for c in callers {
        c.join().unwrap();
    }
    let ran_on = m.call(core::mem::take);
    assert_eq!(ran_on.len(), CALLERS + 1);
    let handed = ran_on.iter().filter(|t| **t != combiner).count();
    assert_eq!(
        handed, 0,
        "{handed} of {CALLERS} sleeping callers' tasks ran on their own thread: the monitor was \
         handed to sleeping callers"
    );
}

/// Many more callers than CPUs, every seventh body panicking: each panic
/// resumes in its own caller (whoever ran the body: the caller itself, a
/// combiner, or a caller handed the monitor), the others' results are
/// theirs, and the monitor keeps serving.
#[test]
fn panicking_bodies_under_contention_resume_in_their_callers() {
    const THREADS: usize = 32;
    const CALLS: usize = 700;
    let m = Arc::new(Monitor::new(0usize));
    let callers: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut panicked = 0;
                for i in 0..CALLS {
                    let boom = (t + i) % 7 == 0;
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        m.call(move |n| {
                            assert!(!boom, "boom");
                            *n += 1;
                            i
                        })
                    }));
                    match r {
                        Ok(got) => assert_eq!(got, i, "another call's result"),
                        Err(_) => {
                            assert!(boom, "a panic resumed in the wrong caller");
                            panicked += 1;
                        }
                    }
                }
                panicked
            })
        })
        .collect();
    let panicked: usize = callers.into_iter().map(|c| c.join().unwrap()).sum();
    let expected = (0..THREADS)
        .flat_map(|t| (0..CALLS).map(move |i| (t + i) % 7 == 0))
        .filter(|b| *b)
        .count();
    assert_eq!(panicked, expected);
    assert_eq!(m.call(|n| *n), THREADS * CALLS - expected);
}
