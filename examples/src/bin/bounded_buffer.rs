//! A bounded buffer on an `AstMutex`: putters enter while it is not full,
//! getters while it is not empty, and each exit names the new state, waking
//! only a thread that can use it.
//!
//! `cargo run --release -p sync-examples --bin bounded_buffer`

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use ast_mutex::AstMutex;

ast_mutex::states! {
    /// How full the buffer is.
    enum Buf { Empty, Mid, Full }
}

const CAP: usize = 10;
const PUTTERS: u64 = 4;
const GETTERS: u64 = 4;
const ITEMS_EACH: u64 = 250_000;

fn level(len: usize) -> Buf {
    match len {
        0 => Buf::Empty,
        CAP => Buf::Full,
        _ => Buf::Mid,
    }
}

fn main() {
    let buf = Arc::new(AstMutex::new(Buf::Empty, VecDeque::with_capacity(CAP)));
    let start = Instant::now();

    let putters: Vec<_> = (0..PUTTERS)
        .map(|p| {
            let buf = Arc::clone(&buf);
            thread::spawn(move || {
                for i in 0..ITEMS_EACH {
                    let mut g = buf.enter(Buf::Empty | Buf::Mid); // not full
                    g.push_back(p * ITEMS_EACH + i);
                    let next = level(g.len());
                    g.exit(next);
                }
            })
        })
        .collect();
    let getters: Vec<_> = (0..GETTERS)
        .map(|_| {
            let buf = Arc::clone(&buf);
            thread::spawn(move || {
                let mut sum = 0u64;
                for _ in 0..PUTTERS * ITEMS_EACH / GETTERS {
                    let mut g = buf.enter(Buf::Mid | Buf::Full); // not empty
                    sum += g.pop_front().expect("entered in a non-empty state");
                    let next = level(g.len());
                    g.exit(next);
                }
                sum
            })
        })
        .collect();

    putters.into_iter().for_each(|t| t.join().unwrap());
    let sum: u64 = getters.into_iter().map(|t| t.join().unwrap()).sum();
    let elapsed = start.elapsed();

    let n = PUTTERS * ITEMS_EACH;
    assert_eq!(sum, n * (n - 1) / 2, "every item arrives exactly once");
    println!(
        "{PUTTERS} putters and {GETTERS} getters moved {n} items through a buffer of {CAP} \
         in {:.1} ms ({:.0} ns/item); every item arrived once; final state {:?}.",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_nanos() as f64 / n as f64,
        buf.state().expect("free")
    );
}
