//! `base/`: the machine's own limits, against which every other figure is
//! read. On a virtual machine where waking a parked thread costs tens of
//! microseconds and a cache-line round trip a few hundred nanoseconds,
//! the ratio of the two decides how long a waiter should spin before it
//! parks.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use sync_core::parking_lot::{self, DEFAULT_PARK_TOKEN, DEFAULT_UNPARK_TOKEN};

use crate::harness::{Mode, Unit, Workload, ns_per_op, time_pair};
use crate::peers::{BenchChannel, BenchMutex, Crossbeam, Flume, StdSync};
use sync_core::spin::SpinLock;

/// The `base/` workloads.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    vec![
        uncontended_pair(mode),
        cacheline_pingpong(mode),
        park_unpark(mode),
        rendezvous(mode),
    ]
}

/// One thread locking and unlocking `M` `ops` times: ns per pair.
pub fn uncontended<M: BenchMutex<u64>>(ops: u64) -> impl FnMut() -> f64 {
    let m = M::new(0);
    move || {
        let start = Instant::now();
        for _ in 0..ops {
            m.with(|v| *v = black_box(*v + 1));
        }
        ns_per_op(start.elapsed(), ops)
    }
}

fn uncontended_pair(mode: Mode) -> Workload {
    let ops = mode.pick(2_000_000, 20_000_000);
    Workload::new("base/uncontended-pair", Unit::NsPerOp)
        .title("One lock plus unlock by a single thread: the cost of the fast path.")
        .param("ops", ops)
        .baseline("parking_lot")
        .implementation("std", uncontended::<std::sync::Mutex<u64>>(ops))
        .implementation("parking_lot", uncontended::<::parking_lot::Mutex<u64>>(ops))
        .implementation("spin", uncontended::<SpinLock<u64>>(ops))
}

fn cacheline_pingpong(mode: Mode) -> Workload {
    let rounds = mode.pick(200_000, 2_000_000);
    Workload::new("base/cacheline-pingpong", Unit::NsPerOp)
        .title(
            "Two threads spinning on one atomic take turns: ns per round trip of the cache line.",
        )
        .param("rounds", rounds)
        .implementation("atomic", move || {
            let turn = Arc::new(CachePadded::new(AtomicU64::new(0)));
            let partner_turn = Arc::clone(&turn);
            let elapsed = time_pair(
                move || {
                    for r in 0..rounds {
                        // Acquire: pairs with the leader's Release store.
                        while partner_turn.load(Ordering::Acquire) != 2 * r + 1 {
                            std::hint::spin_loop();
                        }
                        partner_turn.store(2 * r + 2, Ordering::Release);
                    }
                },
                || {
                    for r in 0..rounds {
                        turn.store(2 * r + 1, Ordering::Release);
                        // Acquire: pairs with the partner's Release store.
                        while turn.load(Ordering::Acquire) != 2 * r + 2 {
                            std::hint::spin_loop();
                        }
                    }
                },
            );
            ns_per_op(elapsed, rounds)
        })
}

fn park_unpark(mode: Mode) -> Workload {
    // Long enough that the partner really falls asleep: in short runs the
    // other vCPU stays hot and most wake-ups find it still awake.
    let rounds = mode.pick(10_000, 20_000);
    Workload::new("base/park-unpark", Unit::NsPerOp)
        .title(
            "Two threads hand a turn back and forth, each parking until it is woken: \
             ns per round trip (two wake-ups).",
        )
        .param("rounds", rounds)
        .baseline("std-park")
        .implementation("std-park", move || std_park_round_trips(rounds))
        .implementation("parking_lot_core", move || {
            parking_lot_core_round_trips(rounds)
        })
}

/// Whose turn it is: 0 the leader's, 1 the partner's.
type Turn = Arc<CachePadded<AtomicU64>>;

fn std_park_round_trips(rounds: u64) -> f64 {
    let turn: Turn = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let leader = thread::current();
    let (tx, rx) = std::sync::mpsc::channel();
    let partner_turn = Arc::clone(&turn);
    let elapsed = time_pair(
        move || {
            tx.send(thread::current()).expect("leader alive");
            for _ in 0..rounds {
                // Acquire: pairs with the leader's Release store.
                while partner_turn.load(Ordering::Acquire) != 1 {
                    thread::park();
                }
                partner_turn.store(0, Ordering::Release);
                leader.unpark();
            }
        },
        || {
            let partner = rx.recv().expect("partner started");
            for _ in 0..rounds {
                turn.store(1, Ordering::Release);
                partner.unpark();
                // Acquire: pairs with the partner's Release store.
                while turn.load(Ordering::Acquire) != 0 {
                    thread::park();
                }
            }
        },
    );
    ns_per_op(elapsed, rounds)
}

fn turn_key(t: &Turn, who: u64) -> usize {
    Arc::as_ptr(t) as usize + who as usize
}

/// Parks until it is `who`'s turn.
fn wait(t: &Turn, who: u64) {
    // Acquire: pairs with the other side's Release store in `pass`.
    while t.load(Ordering::Acquire) != who {
        // SAFETY: validate only loads an atomic; no callback panics or
        // calls into the parking lot.
        unsafe {
            parking_lot::park(
                turn_key(t, who),
                || t.load(Ordering::Acquire) != who,
                || {},
                |_, _| {},
                DEFAULT_PARK_TOKEN,
                None,
            )
        };
    }
}

/// Gives the turn to `to` and wakes it.
fn pass(t: &Turn, to: u64) {
    // Release: pairs with the Acquire loads in `wait`.
    t.store(to, Ordering::Release);
    // SAFETY: no callbacks.
    unsafe { parking_lot::unpark_all(turn_key(t, to), DEFAULT_UNPARK_TOKEN) };
}

fn parking_lot_core_round_trips(rounds: u64) -> f64 {
    let turn: Turn = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let partner_turn = Arc::clone(&turn);
    let elapsed = time_pair(
        move || {
            for _ in 0..rounds {
                wait(&partner_turn, 1);
                pass(&partner_turn, 0);
            }
        },
        || {
            for _ in 0..rounds {
                pass(&turn, 1);
                wait(&turn, 0);
            }
        },
    );
    ns_per_op(elapsed, rounds)
}

fn rendezvous(mode: Mode) -> Workload {
    let rounds = mode.pick(2_000, 20_000);
    fn sample<C: BenchChannel>(rounds: u64) -> impl FnMut() -> f64 {
        move || {
            let (ping_tx, ping_rx) = C::bounded(0);
            let (pong_tx, pong_rx) = C::bounded(0);
            let elapsed = time_pair(
                move || {
                    for _ in 0..rounds {
                        let v = C::recv(&ping_rx);
                        C::send(&pong_tx, v + 1);
                    }
                },
                || {
                    for i in 0..rounds {
                        C::send(&ping_tx, i);
                        assert_eq!(C::recv(&pong_rx), i + 1);
                    }
                },
            );
            ns_per_op(elapsed, rounds)
        }
    }
    Workload::new("base/rendezvous", Unit::NsPerOp)
        .title(
            "Ping over one zero-capacity channel, pong over another: \
             ns per round trip (two rendezvous).",
        )
        .param("rounds", rounds)
        .baseline("crossbeam")
        .implementation("crossbeam", sample::<Crossbeam>(rounds))
        .implementation("std", sample::<StdSync>(rounds))
        .implementation("flume", sample::<Flume>(rounds))
}
