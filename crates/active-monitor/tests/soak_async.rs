//! Soak test of the asynchronous paths
//! (`cargo test -p active-monitor --release --test soak_async -- --ignored`):
//! async producers and consumers on a multi-thread runtime, a small task
//! queue (space waits), 1 ms timeouts that cancel `when` completions and
//! drop `SubmitAsync` futures, and blocking threads on the same monitor. Every
//! item is put once and taken once.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use active_monitor::{Monitor, Order, worker};
use sync_core::testing::soak;

const ITEMS: u64 = 20_000;
const PRODUCERS: u64 = 4;
const CONSUMERS: u64 = 4;

fn round(order: Order) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_time()
        .build()
        .unwrap();
    let q = Arc::new(
        Monitor::builder()
            .order(order)
            .capacity(4)
            .batch(3)
            .build(VecDeque::<u64>::new()),
    );
    let taken = Arc::new(AtomicU64::new(0));
    let total = PRODUCERS * ITEMS;
    let sum = rt.block_on(async {
        let mut hs = Vec::new();
        for p in 0..PRODUCERS {
            let q = Arc::clone(&q);
            hs.push(tokio::spawn(worker(async move {
                for i in 0..ITEMS {
                    let item = p * ITEMS + i;
                    if p % 2 == 0 {
                        // A dropped SubmitAsync submits nothing: retry.
                        loop {
                            let put = q
                                .when_async(|d| d.len() < 16, move |d| d.push_back(item))
                                .completion();
                            let sent = tokio::select! {
                                c = put => Some(c),
                                _ = tokio::time::sleep(Duration::from_millis(1)) => None,
                            };
                            if sent.is_some() {
                                break;
                            }
                        }
                    } else {
                        // A blocking put from a blocking thread.
                        let q = Arc::clone(&q);
                        tokio::task::spawn_blocking(move || {
                            q.when(|d| d.len() < 16, move |d| d.push_back(item));
                        })
                        .await
                        .unwrap();
                    }
                }
                0
            })));
        }
        for _ in 0..CONSUMERS {
            let (q, taken) = (Arc::clone(&q), Arc::clone(&taken));
            hs.push(tokio::spawn(worker(async move {
                let mut sum = 0;
                while taken.load(SeqCst) < total {
                    let mut c = q
                        .when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap())
                        .completion()
                        .await;
                    let item = tokio::select! {
                        item = &mut c => Some(item.unwrap()),
                        _ = tokio::time::sleep(Duration::from_millis(1)) => match c.cancel() {
                            Ok(()) => None,
                            Err(c) => Some(c.await.unwrap()),
                        },
                    };
                    if let Some(item) = item {
                        sum += item;
                        taken.fetch_add(1, SeqCst);
                    }
                }
                sum
            })));
        }
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, (0..total).sum::<u64>(), "{order:?}");
    assert_eq!(q.call(|d| d.len()), 0, "{order:?}");
}

#[test]
#[ignore = "soak: run with --ignored"]
fn soak_async_puts_and_takes_with_timeouts_lose_nothing() {
    soak(2, |n| {
        round(if n % 2 == 0 {
            Order::Strict
        } else {
            Order::Relaxed
        })
    });
}
