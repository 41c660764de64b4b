//! A bounded buffer on an `AstMutex` shared by async tasks and OS threads.
//!
//! Producer tasks on a 2-worker tokio runtime put with `enter_arc_async`
//! (waiting in the mutex's queues, not blocking their worker), consumer
//! threads get with the blocking `enter`, and a heartbeat task keeps
//! ticking while the buffer is full. Some producers give up after a short
//! timeout (`tokio::time::timeout`): a dropped wait loses nothing (no
//! item, no wake-up, no handed-over lock) and leaves nothing queued.
//!
//! `cargo run --release -p sync-examples --bin ast_async_buffer`

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ast_mutex::AstMutex;

ast_mutex::states! {
    /// How full the buffer is.
    enum Buf { Empty, Mid, Full }
}

const CAP: usize = 8;
const PRODUCERS: u64 = 16;
const PER_PRODUCER: u64 = 2_000;
const CONSUMERS: u64 = 2;

fn level(q: &VecDeque<u64>) -> Buf {
    match q.len() {
        0 => Buf::Empty,
        CAP => Buf::Full,
        _ => Buf::Mid,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let buf = Arc::new(AstMutex::new(Buf::Empty, VecDeque::with_capacity(CAP)));
    let start = Instant::now();
    let total = PRODUCERS * PER_PRODUCER;

    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let buf = Arc::clone(&buf);
            std::thread::spawn(move || {
                let mut sum = 0;
                for _ in 0..total / CONSUMERS {
                    let mut g = buf.enter(Buf::Mid | Buf::Full);
                    sum += g.pop_front().expect("Mid or Full is not empty");
                    let next = level(&g);
                    g.exit(next);
                }
                sum
            })
        })
        .collect();

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

    let gave_up = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (buf, gave_up) = (Arc::clone(&buf), Arc::clone(&gave_up));
            tokio::spawn(async move {
                let mut i = 0;
                while i < PER_PRODUCER {
                    let wait = buf.enter_arc_async(Buf::Empty | Buf::Mid);
                    // Odd producers are impatient: they give up and retry.
                    let mut g = if p % 2 == 1 {
                        match tokio::time::timeout(Duration::from_micros(50), wait).await {
                            Ok(g) => g,
                            Err(_) => {
                                gave_up.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                        }
                    } else {
                        wait.await
                    };
                    g.push_back(p * PER_PRODUCER + i);
                    let next = level(&g);
                    g.exit(next);
                    i += 1;
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("a producer panicked");
    }
    let sum: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    done.store(true, Ordering::Relaxed);
    heartbeat.await.unwrap();

    assert_eq!(sum, (0..total).sum::<u64>(), "every item arrived once");
    assert_eq!(buf.state(), Some(Buf::Empty));
    println!(
        "{total} items from {PRODUCERS} tasks to {CONSUMERS} threads through {CAP} slots \
         in {:.0?}; {} timed-out waits cost nothing; the heartbeat ticked {} times meanwhile",
        start.elapsed(),
        gave_up.load(Ordering::Relaxed),
        beats.load(Ordering::Relaxed),
    );
}
