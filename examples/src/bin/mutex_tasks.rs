//! Sixty tasks on a 2-worker tokio runtime share three `lockfree_sync`
//! mutexes, each task holding its lock across an `.await` (a sleep) between
//! reading and writing the counter. A task that must wait is queued, not
//! its worker thread: a heartbeat task keeps ticking while the locks are
//! contended, and an OS thread locks the same mutexes with the blocking
//! `lock()` meanwhile, waiting in the same queue. With a blocking mutex held
//! across the `.await` the two workers would soon both block on a lock
//! whose holder needs a worker to wake up: a deadlock.
//!
//! `cargo run -p sync-examples --bin mutex_tasks`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lockfree_sync::Mutex;

const MUTEXES: usize = 3;
const TASKS: usize = 60;
const ROUNDS: u64 = 4;
const THREAD_ROUNDS: u64 = 50;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let counters: Arc<[Mutex<u64>]> = (0..MUTEXES).map(|_| Mutex::new(0)).collect();
    let start = Instant::now();

    // The heartbeat: ticks as long as a worker is free to run it.
    let done = Arc::new(AtomicBool::new(false));
    let beats = Arc::new(AtomicU64::new(0));
    let heartbeat = {
        let (done, beats) = (Arc::clone(&done), Arc::clone(&beats));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            while !done.load(Ordering::Relaxed) {
                tick.tick().await;
                beats.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    // A plain thread takes the same locks with the blocking `lock()`.
    let thread = {
        let counters = Arc::clone(&counters);
        std::thread::spawn(move || {
            for i in 0..THREAD_ROUNDS {
                *counters[i as usize % MUTEXES].lock() += 1;
                std::thread::sleep(Duration::from_micros(500));
            }
        })
    };

    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let counters = Arc::clone(&counters);
            tokio::spawn(async move {
                let m = &counters[t % MUTEXES];
                for _ in 0..ROUNDS {
                    let mut g = m.lock_async().await;
                    let seen = *g;
                    // Held across an .await: nobody else may run in between.
                    tokio::time::sleep(Duration::from_micros(100)).await;
                    *g = seen + 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("a task panicked");
    }
    thread.join().expect("the thread panicked");
    done.store(true, Ordering::Relaxed);
    heartbeat.await.expect("the heartbeat panicked");
    let elapsed = start.elapsed();

    let beats = beats.load(Ordering::Relaxed);
    let counts: Vec<u64> = counters.iter().map(|m| *m.lock()).collect();
    println!(
        "{TASKS} tasks x {ROUNDS} rounds over {MUTEXES} mutexes (+ a thread's {THREAD_ROUNDS}) \
         in {elapsed:.1?}: counts {counts:?}, heartbeat ticked {beats} times meanwhile"
    );
    let per_mutex = (TASKS / MUTEXES) as u64 * ROUNDS;
    let thread_share = |i: usize| {
        (0..THREAD_ROUNDS)
            .filter(|r| *r as usize % MUTEXES == i)
            .count()
    };
    for (i, c) in counts.iter().enumerate() {
        assert_eq!(
            *c,
            per_mutex + thread_share(i) as u64,
            "mutex {i} lost an update"
        );
    }
    assert!(
        beats >= 5,
        "the executor was blocked: only {beats} heartbeats"
    );
}
