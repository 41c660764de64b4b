//! Soak test: a baton passed around a ring of threads through the parking
//! lot; every handoff is a park/unpark pair, and none may be lost.
//!
//! Run with `cargo xtask soak -p sync-core`.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use sync_core::CachePadded;
use sync_core::parking_lot::{self, DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN};

const THREADS: usize = 16;
const HANDOFFS: usize = 200_000;

#[test]
#[ignore = "soak test: run with cargo xtask soak"]
fn baton_ring_loses_no_wakeup() {
    let rounds = sync_core::testing::soak(1, |_| {
        // `turn` counts handoffs; thread `i` may run when turn % THREADS == i.
        let turn = Arc::new(CachePadded::new(AtomicUsize::new(0)));
        let key = |i: usize, turn: &AtomicUsize| turn as *const _ as usize + i;
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let turn = Arc::clone(&turn);
                thread::spawn(move || {
                    let mut mine = 0;
                    loop {
                        // Acquire: pairs with the Release fetch_add below.
                        let t = turn.load(Ordering::Acquire);
                        if t >= HANDOFFS {
                            return mine;
                        }
                        if t % THREADS != i {
                            // SAFETY: validate only loads; no panics.
                            unsafe {
                                parking_lot::park(
                                    key(i, &turn),
                                    || {
                                        let t = turn.load(Ordering::Acquire);
                                        t < HANDOFFS && t % THREADS != i
                                    },
                                    || {},
                                    |_, _| {},
                                    DEFAULT_PARK_TOKEN,
                                    None,
                                )
                            };
                            continue;
                        }
                        mine += 1;
                        // Release: publishes our turn; pairs with the Acquire
                        // loads of the next thread.
                        let next = turn.fetch_add(1, Ordering::Release) + 1;
                        let wake = if next >= HANDOFFS {
                            0..THREADS
                        } else {
                            next % THREADS..next % THREADS + 1
                        };
                        for j in wake {
                            // SAFETY: no callbacks.
                            unsafe { parking_lot::unpark_all(key(j, &turn), DEFAULT_UNPARK_TOKEN) };
                        }
                    }
                })
            })
            .collect();
        let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, HANDOFFS, "a handoff was lost or duplicated");
        assert_eq!(turn.load(Ordering::Relaxed), HANDOFFS);
    });
    assert!(rounds >= 1);
}
