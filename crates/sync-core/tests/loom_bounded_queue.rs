//! Loom models of the bounded queue: producers race each other for a
//! position and race the consumer freeing a slot; no value is lost or taken
//! twice, and a full queue hands the value back. Run with
//! `cargo xtask loom -p sync-core`.
#![cfg(loom)]

use sync_core::bounded_queue::BoundedQueue;
use sync_core::model;
use sync_core::sync::{Arc, thread};

/// Two producers push into a one-slot queue while the consumer takes: each
/// value is either taken once or handed back to its producer, never both,
/// never neither.
#[test]
fn producers_race_for_one_slot_and_the_consumer() {
    model::check_with_bound(3, || {
        let q = Arc::new(BoundedQueue::new(1));
        let producers: Vec<_> = (1..=2)
            .map(|v| {
                let q = Arc::clone(&q);
                thread::spawn(move || q.push(v).is_ok())
            })
            .collect();
        let mut taken = Vec::new();
        // SAFETY: this thread is the only consumer.
        if let Some(v) = unsafe { q.pop() } {
            taken.push(v);
        }
        let pushed: Vec<bool> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        // SAFETY: as above; every push has returned.
        while let Some(v) = unsafe { q.pop() } {
            taken.push(v);
        }
        taken.sort_unstable();
        let expected: Vec<i32> = (1..=2).filter(|&v| pushed[v as usize - 1]).collect();
        assert_eq!(taken, expected);
        assert!(
            pushed.iter().any(|&p| p),
            "one slot: at least one push fits"
        );
    });
}

/// A producer pushes two values while the consumer pops: they come out in
/// the producer's order, and a value popped frees its slot for the next lap.
#[test]
fn values_come_out_in_order_across_laps() {
    model::check_with_bound(3, || {
        let q = Arc::new(BoundedQueue::new(1));
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for v in 0..2 {
                    let mut v = v;
                    while let Err(back) = q.push(v) {
                        v = back;
                        thread::yield_now();
                    }
                }
            })
        };
        let mut taken = Vec::new();
        while taken.len() < 2 {
            // SAFETY: this thread is the only consumer.
            match unsafe { q.pop() } {
                Some(v) => taken.push(v),
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
        assert_eq!(taken, [0, 1]);
        assert!(q.is_empty());
    });
}
