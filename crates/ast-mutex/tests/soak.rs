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

/// Tokio tasks put (half of them through a short timeout they often hit,
/// retrying: many cancelled waits), OS threads get, in every wake mode:
/// every item arrives once, the watermark holds, nothing stays queued.
#[test]
#[ignore = "soak test: run with cargo xtask soak"]
fn tasks_and_threads_with_cancelled_waits() {
    use std::time::Duration;
    sync_core::testing::soak(1, |_| {
        for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
            const TASKS: usize = 8;
            const GETTERS: usize = 4;
            const PER_TASK: usize = ITEMS / 10 / TASKS;
            let b = Arc::new(AstMutex::with_config(
                Level::Empty,
                VecDeque::with_capacity(CAP),
                Config::new().wake_mode(mode),
            ));
            let getters: Vec<_> = (0..GETTERS)
                .map(|_| {
                    let b = Arc::clone(&b);
                    thread::spawn(move || {
                        (0..PER_TASK * TASKS / GETTERS)
                            .map(|_| get(&b))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_time()
                .build()
                .unwrap();
            rt.block_on(async {
                let tasks: Vec<_> = (0..TASKS)
                    .map(|t| {
                        let b = Arc::clone(&b);
                        tokio::spawn(async move {
                            let mut i = 0;
                            while i < PER_TASK {
                                let marginal = i % 3 == 0;
                                let set = if marginal {
                                    Level::Empty | Level::Low
                                } else {
                                    Level::Empty | Level::Low | Level::High
                                };
                                let wait = b.enter_arc_async(set);
                                let mut g = if t % 2 == 1 {
                                    let timeout = Duration::from_micros(20);
                                    match tokio::time::timeout(timeout, wait).await {
                                        Ok(g) => g,
                                        Err(_) => continue,
                                    }
                                } else {
                                    wait.await
                                };
                                if marginal {
                                    assert!(g.len() < CAP / 2, "the watermark broke");
                                }
                                assert!(g.len() < CAP, "a putter entered a full buffer");
                                g.push_back((t * PER_TASK + i) as u64);
                                let next = level(g.len());
                                g.exit(next);
                                i += 1;
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
            });
            let mut got: Vec<u64> = getters
                .into_iter()
                .flat_map(|g| g.join().unwrap())
                .collect();
            got.sort_unstable();
            let expected: Vec<u64> = (0..(PER_TASK * TASKS) as u64).collect();
            assert!(got == expected, "{mode:?}: an item was lost or duplicated");
            assert_eq!(b.state(), Some(Level::Empty));
            assert_eq!(b.__test_waiter_table_size(), (0, 0), "{mode:?}");
        }
    });
}
