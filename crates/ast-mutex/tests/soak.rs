//! Soak tests: many threads, a million items, invariants checked at the end.
//! Run with `cargo xtask soak -p ast-mutex` (release).
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;

use ast_mutex::{AstMutex, Config, WakeMode};

ast_mutex::states! { enum Level { Empty, Low, High, Full } }

const CAP: usize = 10;
const ITEMS: usize = 1_000_000;

fn level(len: usize) -> Level {
    match len {
        0 => Level::Empty,
        n if n < CAP / 2 => Level::Low,
        n if n < CAP => Level::High,
        _ => Level::Full,
    }
}

type Buffer = AstMutex<Level, VecDeque<u64>>;

fn put(b: &Buffer, item: u64, marginal: bool) {
    let set = if marginal {
        Level::Empty | Level::Low
    } else {
        Level::Empty | Level::Low | Level::High
    };
    let mut g = b.enter(set);
    if marginal {
        assert!(
            g.len() < CAP / 2,
            "a marginal putter entered at {}",
            g.len()
        );
    }
    assert!(g.len() < CAP, "a putter entered a full buffer");
    g.push_back(item);
    let next = level(g.len());
    g.exit(next);
}

fn get(b: &Buffer) -> u64 {
    let mut g = b.enter(Level::Low | Level::High | Level::Full);
    let item = g.pop_front().expect("a getter entered an empty buffer");
    let next = level(g.len());
    g.exit(next);
    item
}

/// Runs putters (`marginal` of them marginal) and getters over one buffer
/// and checks that every item arrived exactly once.
fn run(mode: WakeMode, putters: usize, marginal: usize, getters: usize) {
    let b = Arc::new(AstMutex::with_config(
        Level::Empty,
        VecDeque::with_capacity(CAP),
        Config::new().wake_mode(mode),
    ));
    let senders = putters + marginal;
    let per_sender = ITEMS / senders;
    let per_getter = per_sender * senders / getters;
    assert_eq!(per_getter * getters, per_sender * senders);
    let mut threads = Vec::new();
    for p in 0..senders {
        let b = Arc::clone(&b);
        threads.push(thread::spawn(move || {
            for i in 0..per_sender {
                put(&b, (p * per_sender + i) as u64, p >= putters);
            }
            Vec::new()
        }));
    }
    for _ in 0..getters {
        let b = Arc::clone(&b);
        threads.push(thread::spawn(move || {
            (0..per_getter).map(|_| get(&b)).collect()
        }));
    }
    let mut got: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    got.sort_unstable();
    let expected: Vec<u64> = (0..(per_sender * senders) as u64).collect();
    assert!(got == expected, "an item was lost or duplicated");
    assert_eq!(b.state(), Some(Level::Empty));
}

#[test]
#[ignore = "soak test: run with cargo xtask soak"]
fn bounded_buffer_delivers_every_item_once() {
    sync_core::testing::soak(1, |_| {
        for mode in [WakeMode::Compete, WakeMode::Handoff] {
            run(mode, 8, 0, 8);
        }
    });
}

#[test]
#[ignore = "soak test: run with cargo xtask soak"]
fn watermark_is_never_broken() {
    sync_core::testing::soak(1, |_| {
        for mode in [WakeMode::Compete, WakeMode::Handoff] {
            run(mode, 5, 5, 10);
        }
    });
}

#[test]
#[ignore = "soak test: run with cargo xtask soak"]
fn many_putters_one_getter() {
    sync_core::testing::soak(1, |_| run(WakeMode::Compete, 16, 4, 1));
}
