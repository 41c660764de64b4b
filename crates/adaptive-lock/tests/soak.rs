//! Soak test: many threads, an agent reconfiguring the lock all the time,
//! mutual exclusion checked by a non-atomic counter, and the monitor's
//! counters exact at the end. Run with `cargo xtask soak -p adaptive-lock`
//! (release; `--minutes N` to go on longer).
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use adaptive_lock::{
    AdaptiveMutex, Config, Learned, Policy, Scheduler, SimpleAdapt, Static, WaitPolicy,
};
use sync_core::testing::soak;

const THREADS: u64 = 8;
const PER_THREAD: u64 = 200_000;

fn run<P: Policy + 'static>(policy: P, agent: bool) {
    let m = Arc::new(AdaptiveMutex::with_policy((0u64, false), policy));
    let stop = Arc::new(AtomicBool::new(false));
    let timeouts = Arc::new(AtomicU64::new(0));
    let configs = [
        Config::new(),
        Config::new().wait(WaitPolicy::spin()),
        Config::new()
            .wait(WaitPolicy::block())
            .scheduler(Scheduler::HANDOFF),
        Config::new()
            .wait(WaitPolicy::spin_then_block(20))
            .scheduler(Scheduler::PRIORITY),
        Config::new()
            .wait(WaitPolicy::spin_backoff())
            .watchers(Some(1)),
    ];
    let agent = agent.then(|| {
        let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
        thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                m.configure(configs[i % configs.len()]);
                i += 1;
                thread::sleep(Duration::from_micros(200));
            }
        })
    });
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (m, timeouts) = (Arc::clone(&m), Arc::clone(&timeouts));
            thread::spawn(move || {
                let mut made = 0;
                for i in 0..PER_THREAD {
                    let guard = match i % 5 {
                        0 => m.try_lock_for(Duration::from_micros(20)),
                        1 => Some(m.lock_with_priority((t + i) as usize % 4)),
                        2 => m.try_lock(),
                        _ => Some(m.lock()),
                    };
                    let Some(mut g) = guard else {
                        if i % 5 == 0 {
                            timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        continue;
                    };
                    assert!(!g.1, "two threads inside");
                    g.1 = true;
                    g.0 += 1;
                    std::hint::black_box(&mut *g);
                    g.1 = false;
                    made += 1;
                    if i % 97 == 0 {
                        adaptive_lock::AdaptiveMutexGuard::unlock_fair(g);
                    }
                }
                made
            })
        })
        .collect();
    let made: u64 = workers.into_iter().map(|t| t.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    if let Some(a) = agent {
        a.join().unwrap();
    }
    let s = m.stats();
    assert_eq!(m.lock().0, made);
    assert_eq!(s.total.acquisitions, made, "acquisitions counted != made");
    assert_eq!(s.total.timeouts, timeouts.load(Ordering::Relaxed));
    assert_eq!(s.waiting, 0);
    assert!(!m.is_locked());
}

#[test]
#[ignore = "soak: run with cargo xtask soak"]
fn soak_mutual_exclusion_and_exact_counters() {
    soak(1, |_| {
        run(Learned::new(), false);
        run(Learned::new(), true);
        run(
            SimpleAdapt {
                threshold: 2,
                step: 10,
            },
            false,
        );
        run(Static(WaitPolicy::new()), true);
    });
}
