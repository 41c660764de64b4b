//! The watermarked buffer: besides ordinary putters and getters, *marginal*
//! putters may only put while the buffer is less than half full. Their
//! condition overlaps the putters' ("not full"), which one condition
//! variable per condition cannot express; with abstract states it is just
//! another entry set.
//!
//! `cargo run --release -p sync-examples --bin watermark_buffer`

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;

use ast_mutex::AstMutex;

ast_mutex::states! {
    /// How full the buffer is: `Low` is below half, `High` half or more.
    enum Level { Empty, Low, High, Full }
}

const CAP: usize = 10;
const EACH: u64 = 100_000;

fn level(len: usize) -> Level {
    match len {
        0 => Level::Empty,
        n if n < CAP / 2 => Level::Low,
        n if n < CAP => Level::High,
        _ => Level::Full,
    }
}

fn main() {
    let buf = Arc::new(AstMutex::new(Level::Empty, VecDeque::with_capacity(CAP)));
    let spawn_putter = |marginal: bool, id: u64| {
        let buf = Arc::clone(&buf);
        thread::spawn(move || {
            let set = if marginal {
                Level::Empty | Level::Low
            } else {
                Level::Empty | Level::Low | Level::High
            };
            let mut highest = 0;
            for i in 0..EACH {
                let mut g = buf.enter(set);
                highest = highest.max(g.len());
                g.push_back(id * EACH + i);
                let next = level(g.len());
                g.exit(next);
            }
            highest
        })
    };
    let putters: Vec<_> = (0..3).map(|id| spawn_putter(false, id)).collect();
    let marginal: Vec<_> = (3..6).map(|id| spawn_putter(true, id)).collect();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let buf = Arc::clone(&buf);
            thread::spawn(move || {
                (0..2 * EACH)
                    .map(|_| {
                        let mut g = buf.enter(Level::Low | Level::High | Level::Full);
                        let item = g.pop_front().expect("entered in a non-empty state");
                        let next = level(g.len());
                        g.exit(next);
                        item
                    })
                    .sum::<u64>()
            })
        })
        .collect();

    let put_highest = putters
        .into_iter()
        .map(|t| t.join().unwrap())
        .max()
        .unwrap();
    let marginal_highest = marginal
        .into_iter()
        .map(|t| t.join().unwrap())
        .max()
        .unwrap();
    let sum: u64 = getters.into_iter().map(|t| t.join().unwrap()).sum();
    let n = 6 * EACH;
    assert_eq!(sum, n * (n - 1) / 2, "every item arrives exactly once");
    assert!(marginal_highest < CAP / 2, "the watermark held");
    println!(
        "{n} items moved. Ordinary putters entered with up to {put_highest} of {CAP} items \
         in the buffer; marginal putters never with more than {marginal_highest} \
         (the watermark is {}).",
        CAP / 2
    );
}
