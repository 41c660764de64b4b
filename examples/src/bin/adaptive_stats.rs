//! The adaptive lock's monitor while the load changes: one thread, then two
//! threads with short critical sections, then eight with long ones, then
//! one again. Every 100 ms the program prints what the monitor saw and the
//! waiting policy the learned policy chose.
//!
//! ```text
//! cargo run --release -p sync-examples --bin adaptive_stats
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use adaptive_lock::{AdaptiveMutex, Stats};

/// Busy work for `ns` nanoseconds.
fn busy(ns: u64) {
    let end = Instant::now() + Duration::from_nanos(ns);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// A phase: how many threads, and the work inside and outside the lock.
struct Phase {
    name: &'static str,
    threads: usize,
    inside: Duration,
    outside: Duration,
}

fn line(at: Duration, phase: &str, s: &Stats, last: &Stats) {
    let acq = s.total.acquisitions - last.total.acquisitions;
    let contended = s.total.contended - last.total.contended;
    let spun = s.total.spin_successes - last.total.spin_successes;
    let parks = s.total.parks - last.total.parks;
    let wait = s.config.wait_policy();
    let how = if !wait.parks() {
        "never park".to_owned()
    } else if let Some(t) = wait.watch_timeout() {
        format!("spin {t:.1?}, park")
    } else {
        format!(
            "{} spins {} yields, park",
            wait.spin_count(),
            wait.yield_count()
        )
    };
    println!(
        "{:>6.1?} {phase:<22} {acq:>8} acq {contended:>7} contended {spun:>7} won spinning \
         {parks:>6} parks  waiting {:>2}  hold ~{:>8.1?}  -> {how}",
        at, s.waiting, s.hold_time
    );
}

fn main() {
    let phases = [
        Phase {
            name: "1 thread",
            threads: 1,
            inside: Duration::from_micros(1),
            outside: Duration::from_micros(1),
        },
        Phase {
            name: "2 threads, 1 µs inside",
            threads: 2,
            inside: Duration::from_micros(1),
            outside: Duration::from_micros(2),
        },
        Phase {
            name: "8 threads, 50 µs inside",
            threads: 8,
            inside: Duration::from_micros(50),
            outside: Duration::from_micros(5),
        },
        Phase {
            name: "2 threads, 0 µs inside",
            threads: 2,
            inside: Duration::ZERO,
            outside: Duration::ZERO,
        },
    ];
    let m = Arc::new(AdaptiveMutex::<u64>::new(0));
    let start = Instant::now();
    let mut last = m.stats();
    for phase in &phases {
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..phase.threads)
            .map(|_| {
                let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
                let (inside, outside) = (
                    phase.inside.as_nanos() as u64,
                    phase.outside.as_nanos() as u64,
                );
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        {
                            let mut g = m.lock();
                            busy(inside);
                            *g += 1;
                        }
                        busy(outside);
                    }
                })
            })
            .collect();
        for _ in 0..5 {
            thread::sleep(Duration::from_millis(100));
            let s = m.stats();
            line(start.elapsed(), phase.name, &s, &last);
            last = s;
        }
        stop.store(true, Ordering::Relaxed);
        workers.into_iter().for_each(|t| t.join().unwrap());
    }
    let s = m.stats();
    assert_eq!(s.total.acquisitions, *m.lock());
    println!(
        "\nin all: {} acquisitions (exact once the threads are joined), {} contended, {} won \
         spinning, {} parks, {} handoffs",
        s.total.acquisitions,
        s.total.contended,
        s.total.spin_successes,
        s.total.parks,
        s.total.handoffs
    );
}
