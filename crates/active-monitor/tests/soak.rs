//! Soak tests (`cargo test -p active-monitor --release --test soak -- --ignored`):
//! many threads, millions of operations, invariants checked at the end.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;

use active_monitor::{Monitor, Order, or};

#[test]
#[ignore = "soak: run with --ignored"]
fn soak_calls_submits_and_whens_lose_nothing() {
    const THREADS: usize = 16;
    const OPS: usize = 200_000;
    for order in [Order::Strict, Order::Relaxed] {
        let m = Arc::new(
            Monitor::builder()
                .order(order)
                .capacity(8)
                .batch(3)
                .build((0u64, 0u64)),
        );
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    for i in 0..OPS {
                        match (i + t) % 4 {
                            0 => m.call(|d| d.0 += 1),
                            1 => drop(m.submit(|d| d.0 += 1)),
                            // A non-atomic pair: mutual exclusion holds iff
                            // the two halves stay equal.
                            2 => drop(m.when(
                                |d| d.0 >= d.1,
                                |d| {
                                    d.1 += 1;
                                    d.0 += 1;
                                    d.1 -= 1;
                                },
                            )),
                            _ => assert!(m.call(|d| d.1) == 0),
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let expected = (0..THREADS)
            .map(|t| (0..OPS).filter(|i| (i + t) % 4 != 3).count())
            .sum::<usize>();
        assert_eq!(m.call(|d| *d), (expected as u64, 0), "{order:?}");
    }
}

#[test]
#[ignore = "soak: run with --ignored"]
fn soak_or_takes_every_item_exactly_once() {
    const ITEMS: u64 = 100_000;
    let qs: Arc<[Monitor<VecDeque<u64>>; 2]> = Arc::new([(); 2].map(|_| {
        Monitor::builder()
            .order(Order::Relaxed)
            .build(VecDeque::new())
    }));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let qs = Arc::clone(&qs);
            thread::spawn(move || {
                for i in 0..ITEMS {
                    let x = p * ITEMS + i;
                    drop(qs[(x % 2) as usize].when(|q| q.len() < 8, move |q| q.push_back(x)));
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let qs = Arc::clone(&qs);
            thread::spawn(move || {
                let [a, b] = &*qs;
                (0..ITEMS)
                    .map(|_| {
                        or((
                            a.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
                            b.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
                        ))
                        .unwrap()
                        .wait()
                        .1
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut all: Vec<u64> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..2 * ITEMS).collect::<Vec<_>>());
}
