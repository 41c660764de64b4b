//! OR over two queues (the paper's section 5): "take from whichever of two
//! blocking queues has an item", which a lock-based monitor cannot express
//! without a global lock. Each consumer submits one OR; the first queue
//! whose `not empty` precondition holds runs its operand (a CAS on the OR's
//! shared *taken* flag), and the other queue drops its operand.
//!
//! `cargo run --release -p sync-examples --bin either_queue`

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use active_monitor::{Monitor, or};

fn main() {
    let fast = Arc::new(Monitor::new(VecDeque::new()));
    let slow = Arc::new(Monitor::new(VecDeque::new()));

    // Two producers at different rates.
    let producer = |q: Arc<Monitor<VecDeque<String>>>, name: &'static str, every: u64, n: usize| {
        thread::spawn(move || {
            for i in 0..n {
                thread::sleep(Duration::from_millis(every));
                drop(q.submit(move |d| d.push_back(format!("{name} #{i}"))));
            }
        })
    };
    let p1 = producer(Arc::clone(&fast), "fast", 2, 30);
    let p2 = producer(Arc::clone(&slow), "slow", 7, 10);

    let mut from = [0usize; 2];
    for _ in 0..40 {
        let (which, item) = or((
            fast.op(|d| !d.is_empty(), |d| d.pop_front().expect("not empty")),
            slow.op(|d| !d.is_empty(), |d| d.pop_front().expect("not empty")),
        ))
        .expect("two different monitors")
        .wait();
        from[which] += 1;
        if from[0] + from[1] <= 5 || which == 1 {
            println!("took {item:>8} from queue {which}");
        }
    }
    p1.join().unwrap();
    p2.join().unwrap();
    println!(
        "took {} from the fast queue and {} from the slow one",
        from[0], from[1]
    );
    assert_eq!(from, [30, 10], "every item taken exactly once");
    assert_eq!(fast.call(|d| d.len()) + slow.call(|d| d.len()), 0);
}
