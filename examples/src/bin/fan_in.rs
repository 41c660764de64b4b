//! Fan-in: many producers into one `lockfree_sync::mpsc` receiver, from
//! async tasks.
//!
//! A hundred "sensor" tasks on a 2-worker tokio runtime each send a stream
//! of readings into one unbounded channel (a send never blocks or waits:
//! one swap). One aggregator task receives with `recv_async` and keeps a
//! running total and per-sensor counts; it ends when every sensor's sender
//! is dropped and the queue is drained. A few plain threads send into the
//! same channel too: threads and tasks mix freely.
//!
//! `cargo run --release -p sync-examples --bin fan_in`

use std::time::{Duration, Instant};

use lockfree_sync::mpsc;

const SENSORS: usize = 100;
const READINGS: u64 = 1_000;
const THREADS: usize = 4;

#[derive(Debug)]
struct Reading {
    sensor: usize,
    seq: u64,
    value: u64,
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let start = Instant::now();
    let (counts, total) = rt.block_on(async {
        let (tx, mut rx) = mpsc::channel::<Reading>();
        for sensor in 0..SENSORS {
            // Each task owns its sender (a clone: it takes half of the
            // parent's block of nodes, so the task's first send allocates
            // nothing).
            let tx = tx.clone();
            tokio::spawn(async move {
                for seq in 0..READINGS {
                    tx.send(Reading {
                        sensor,
                        seq,
                        value: seq % 7,
                    })
                    .unwrap();
                    if seq % 100 == 99 {
                        // A sensor pauses now and then.
                        tokio::time::sleep(Duration::from_micros(100)).await;
                    }
                }
            });
        }
        for t in 0..THREADS {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for seq in 0..READINGS {
                    let sensor = SENSORS + t;
                    tx.send(Reading {
                        sensor,
                        seq,
                        value: seq % 7,
                    })
                    .unwrap();
                }
            });
        }
        drop(tx); // the aggregator ends once every sender is gone

        let aggregator = tokio::spawn(async move {
            let mut counts = vec![0u64; SENSORS + THREADS];
            let mut total = 0u64;
            while let Ok(r) = rx.recv_async().await {
                // Each producer's readings arrive in the order it sent them.
                assert_eq!(counts[r.sensor], r.seq, "sensor {} out of order", r.sensor);
                counts[r.sensor] += 1;
                total += r.value;
            }
            (counts, total)
        });
        aggregator.await.unwrap()
    });
    let received: u64 = counts.iter().sum();
    println!(
        "{received} readings from {SENSORS} tasks and {THREADS} threads, total {total}, in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    assert!(counts.iter().all(|&c| c == READINGS));
    let per_producer: u64 = (0..READINGS).map(|s| s % 7).sum();
    assert_eq!(total, per_producer * (SENSORS + THREADS) as u64);
}
