//! The paper's figure 2: a bounded queue as an active monitor. `put` is
//! asynchronous (the producer goes on at once), `take` waits; both are
//! `waituntil` tasks, evaluated by whoever holds the monitor, so there is no
//! condition variable and nobody is woken to re-test a condition.
//!
//! `cargo run --release -p sync-examples --bin bounded_queue`

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use active_monitor::{Monitor, Order};

/// The monitor class of figure 2.
struct BoundedQueue<T> {
    m: Monitor<VecDeque<T>>,
    size: usize,
}

impl<T: Send + 'static> BoundedQueue<T> {
    fn new(size: usize, order: Order) -> Self {
        Self {
            m: Monitor::builder()
                .order(order)
                .build(VecDeque::with_capacity(size)),
            size,
        }
    }

    /// `asynchronous void put(T item) { waituntil(count < size); ... }`
    fn put(&self, item: T) {
        let size = self.size;
        // The Completion is dropped: the task still runs in its turn.
        drop(
            self.m
                .when(move |q| q.len() < size, move |q| q.push_back(item)),
        );
    }

    /// `T take() { waituntil(count > 0); ... }`
    fn take(&self) -> T {
        self.m
            .when(|q| !q.is_empty(), |q| q.pop_front().expect("not empty"))
            .wait()
    }
}

fn main() {
    const PRODUCERS: u64 = 2;
    const CONSUMERS: u64 = 2;
    const ITEMS: u64 = 200_000;
    for order in [Order::Strict, Order::Relaxed] {
        let q = Arc::new(BoundedQueue::new(16, order));
        let start = Instant::now();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let q = Arc::clone(&q);
                thread::spawn(move || (0..ITEMS).for_each(|i| q.put(p * ITEMS + i)))
            })
            .collect();
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let q = Arc::clone(&q);
                thread::spawn(move || {
                    (0..ITEMS * PRODUCERS / CONSUMERS)
                        .map(|_| q.take())
                        .sum::<u64>()
                })
            })
            .collect();
        producers.into_iter().for_each(|p| p.join().unwrap());
        let sum: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        let elapsed = start.elapsed();
        assert_eq!(sum, (0..PRODUCERS * ITEMS).sum::<u64>(), "every item once");
        println!(
            "{order:?}: moved {} items through a 16-slot queue in {elapsed:.2?} ({:.2} M items/s)",
            PRODUCERS * ITEMS,
            (PRODUCERS * ITEMS) as f64 / elapsed.as_secs_f64() / 1e6
        );
    }
}
