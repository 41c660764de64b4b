//! A `WaiterQueue::sweep_front` that began on an empty queue, while
//! producers keep pushing withdrawn waiters: the consumer is frozen (a
//! signal whose handler waits) at a random point of its loop of sweeps, the
//! producers push meanwhile, and once thawed the sweep in progress must
//! return. One frozen between its read of the queue's last waiter (none)
//! and its first look at the front kept freeing what the producers pushed
//! for as long as they outpaced it. SIGUSR1 is this binary's.
#![cfg(all(not(loom), target_os = "linux"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use sync_core::testing::freeze::{self, Freezable};
use sync_core::waiter::{Waiter, WaiterQueue};

/// Trials: each freezes the consumer at a random point of its loop; a few
/// in a hundred land between the two reads (on the old code, 12 runs failed
/// at trials 1 to 90).
const TRIALS: usize = 200;
/// Waiters the producers push while the consumer is frozen (about 1 ms of
/// pushes): a backlog the consumer then works behind.
const BACKLOG: u64 = 10_000;
/// CPU time the thawed sweep may take: freeing the backlog takes far less
/// (a few ms), however loaded the machine.
const BOUND: Duration = Duration::from_millis(500);

#[test]
fn a_sweep_front_begun_on_an_empty_queue_ends_while_producers_keep_pushing() {
    freeze::install();
    let q = Arc::new(WaiterQueue::new());
    let stop = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let pushed = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..3)
        .map(|_| {
            let (q, stop, gate) = (Arc::clone(&q), Arc::clone(&stop), Arc::clone(&gate));
            let pushed = Arc::clone(&pushed);
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    if gate.load(Relaxed) {
                        let w = Waiter::for_thread(0);
                        w.cancel().unwrap();
                        q.push(w);
                        n += 1;
                        if n % 256 == 0 {
                            pushed.fetch_add(256, Relaxed);
                        }
                    } else {
                        // Leave the CPUs to the consumer and the test.
                        thread::sleep(Duration::from_micros(100));
                    }
                }
            })
        })
        .collect();
    let consumer = {
        let (q, stop, calls) = (Arc::clone(&q), Arc::clone(&stop), Arc::clone(&calls));
        Freezable::spawn(move || {
            // A plain store, not an RMW: the loop is mostly the sweep's
            // two reads, so that a freeze often lands between them.
            let mut n = 0;
            while !stop.load(Relaxed) {
                // SAFETY: this thread is the only consumer.
                unsafe { q.sweep_front() };
                n += 1;
                calls.store(n, Relaxed);
            }
        })
    };
    let mut stuck = None;
    for trial in 0..TRIALS {
        gate.store(false, Relaxed);
        // Drained (the producers stopped pushing): the queue is empty.
        let began = Instant::now();
        while !q.is_empty() && began.elapsed() < Duration::from_secs(10) {
            thread::yield_now();
        }
        // The consumer back in its loop of sweeps on the empty queue.
        let at = calls.load(Relaxed);
        while calls.load(Relaxed) < at + 100 && began.elapsed() < Duration::from_secs(10) {
            thread::yield_now();
        }
        consumer.freeze();
        let from = pushed.load(Relaxed);
        gate.store(true, Relaxed);
        let began = Instant::now();
        while pushed.load(Relaxed) - from < BACKLOG && began.elapsed() < Duration::from_secs(10) {
            std::hint::spin_loop();
        }
        let before = calls.load(Relaxed);
        let cpu_before = consumer.cpu_time();
        freeze::let_go();
        let thawed = Instant::now();
        while calls.load(Relaxed) == before && thawed.elapsed() < Duration::from_secs(10) {
            if consumer.cpu_time() - cpu_before > BOUND {
                stuck = Some(trial);
                break;
            }
            thread::yield_now();
        }
        if stuck.is_some() {
            break;
        }
    }
    stop.store(true, Relaxed);
    freeze::let_go();
    for p in producers {
        p.join().unwrap();
    }
    consumer.join();
    assert!(
        stuck.is_none(),
        "a sweep_front thawed after its read of an empty queue kept sweeping \
         for {BOUND:?} of CPU time while the producers pushed (trial {stuck:?})"
    );
}
