//! Concurrency restriction ([`Config::watchers`]): its starvation bound,
//! and that it loses no waiter with many more threads than cores.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use ast_mutex::{AstMutex, Config, WakeMode};
use sync_core::wait::WaitPolicy;

ast_mutex::states! { enum St { A, B, Done } }

/// What the doc of `Config::watchers` promises: a parked first in line is
/// left parked by at most 256 exits to its states, then woken, then handed
/// the lock within 33 more once it runs and 1,025 more in all; the 1,281st
/// exit at the latest hands it the lock. Without restriction, the 1,025th.
/// (The task below runs on a thread of its own, which the hammers can keep
/// from running for a scheduling round: only the bounds in all hold for
/// certain.)
const RESTRICTED_BOUND: usize = 256 + 1025;
const PLAIN_BOUND: usize = 1025;
/// What the doc of `WakeMode::Handoff` promises: a parked first in line is
/// left parked for running watchers by at most 256 exits to its states;
/// the next one hands it the lock.
const HANDOFF_BOUND: usize = 256 + 1;
/// Critical sections each hammer runs at most: far beyond either bound.
const HAMMER_SECTIONS: usize = 5000;

/// A task waiting for B is queued first in line (a task never watches the
/// word: it queues at once); then two threads keep entering in B and
/// leaving in B, each of whose exits serves the task, the oldest acceptor
/// of B. With `WaitPolicy::spin()`, the hammers watch the word until they enter and
/// never park, so under restriction one of them is nearly always a watcher
/// that accepts B when an exit comes. When the task enters, it reads how
/// many critical sections ran before its own; if it starved, the hammers
/// stop after `HAMMER_SECTIONS` each and it reads thousands.
fn exits_before_the_first_in_line_enters(config: Config) -> usize {
    // (critical sections run in B, sections seen by the first in line)
    let m = Arc::new(AstMutex::with_config(St::A, (0usize, None), config));
    let holder = m.enter(St::A);
    let first = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            futures::executor::block_on(async {
                let mut g = m.enter_async(St::B).await;
                g.1 = Some(g.0);
                g.exit(St::B);
            })
        })
    };
    while m.__test_waiter_table_size() != (1, 1) {
        thread::sleep(Duration::from_millis(1));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let hammers: Vec<_> = (0..2)
        .map(|_| {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            thread::spawn(move || {
                for _ in 0..HAMMER_SECTIONS {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let mut g = m.enter(St::B);
                    g.0 += 1;
                    if g.1.is_some() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    g.exit(St::B);
                }
            })
        })
        .collect();
    holder.exit(St::B);
    first.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    for h in hammers {
        h.join().unwrap();
    }
    let g = m.enter(St::B);
    let seen = g.1.expect("the first in line entered");
    g.exit(St::Done);
    seen
}

#[test]
fn a_parked_first_in_line_enters_within_the_bound_under_restriction() {
    for _ in 0..5 {
        let config = Config::new().watchers(2).wait(WaitPolicy::spin());
        let seen = exits_before_the_first_in_line_enters(config);
        assert!(
            seen <= RESTRICTED_BOUND,
            "{seen} critical sections passed the first in line"
        );
    }
}

#[test]
fn a_parked_first_in_line_enters_within_the_bound_without_restriction() {
    for policy in [WaitPolicy::spin(), Config::new().wait_policy()] {
        let seen = exits_before_the_first_in_line_enters(Config::new().wait(policy));
        assert!(
            seen <= PLAIN_BOUND,
            "{seen} critical sections passed the first in line"
        );
    }
}

/// Handoff mode hands the lock to a running waiter rather than a parked
/// one, within the bound: the hammers watch (with `WaitPolicy::spin()`, nearly
/// always one of them accepts B when an exit comes), and the parked first
/// in line is still handed the lock by the 257th exit.
#[test]
fn a_parked_first_in_line_is_handed_the_lock_within_the_bound_in_handoff_mode() {
    for policy in [WaitPolicy::spin(), Config::new().wait_policy()] {
        let config = Config::new().wake_mode(WakeMode::Handoff).wait(policy);
        let seen = exits_before_the_first_in_line_enters(config);
        assert!(
            seen <= HANDOFF_BOUND,
            "{seen} critical sections passed the first in line"
        );
    }
}

ast_mutex::states! { enum Buf { Empty, Mid, Full } }

/// A bounded buffer with 64 putters and 64 getters on the machine's few
/// cores, restricted to one or two watchers: every item arrives once.
#[test]
fn a_restricted_buffer_moves_every_item_with_many_threads() {
    const CAP: usize = 4;
    const PER: u64 = 50;
    for watchers in [1, 2, 4] {
        let m = Arc::new(AstMutex::with_config(
            Buf::Empty,
            Vec::with_capacity(CAP),
            Config::new().watchers(watchers),
        ));
        let level = |n: usize| match n {
            0 => Buf::Empty,
            CAP => Buf::Full,
            _ => Buf::Mid,
        };
        let mut threads = Vec::new();
        for p in 0..64u64 {
            let m = Arc::clone(&m);
            threads.push(thread::spawn(move || {
                for i in 0..PER {
                    let mut g = m.enter(Buf::Empty | Buf::Mid);
                    g.push(p * PER + i);
                    let next = level(g.len());
                    g.exit(next);
                }
                0
            }));
        }
        for _ in 0..64 {
            let m = Arc::clone(&m);
            threads.push(thread::spawn(move || {
                let mut sum = 0;
                for _ in 0..PER {
                    let mut g = m.enter(Buf::Mid | Buf::Full);
                    sum += g.pop().expect("not empty");
                    let next = level(g.len());
                    g.exit(next);
                }
                sum
            }));
        }
        let sum: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(sum, (0..64 * PER).sum::<u64>(), "watchers({watchers})");
        assert_eq!(m.state(), Some(Buf::Empty));
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
    }
}
