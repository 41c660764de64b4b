//! criterion micro-benchmarks of `ast-mutex` beside its peers: the
//! uncontended enter + exit, the try form, the async form, and a
//! two-thread handoff of a state (the condition-variable case).
//!
//! `cargo bench -p sync-bench --bench ast_mutex`; the papers' multi-thread
//! experiments are in `cargo xtask report --only ast/`.

mod common;

use std::hint::black_box;
use std::sync::Arc;

use ast_mutex::{AstMutex, Config, WakeMode};
use criterion::{Criterion, criterion_group, criterion_main};

ast_mutex::states! { enum Turn { Ping, Pong } }

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("ast_mutex/uncontended");
    let ast = AstMutex::new(Turn::Ping, 0u64);
    g.bench_function("ast-mutex", |b| {
        b.iter(|| {
            let mut guard = ast.enter(Turn::Ping);
            *guard += 1;
            guard.exit(black_box(Turn::Ping));
        })
    });
    let pl = parking_lot::Mutex::new(0u64);
    g.bench_function("parking_lot", |b| b.iter(|| *pl.lock() += 1));
    let std = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *std.lock().unwrap() += 1));
    g.finish();
}

fn try_forms(c: &mut Criterion) {
    let mut g = c.benchmark_group("ast_mutex/try");
    let ast = AstMutex::new(Turn::Ping, 0u64);
    g.bench_function("ast-mutex", |b| {
        b.iter(|| {
            let mut guard = ast.try_enter(Turn::Ping).expect("free");
            *guard += 1;
            guard.exit(Turn::Ping);
        })
    });
    g.bench_function("ast-mutex-wrong-state", |b| {
        b.iter(|| assert!(ast.try_enter(black_box(Turn::Pong)).is_none()))
    });
    let pl = parking_lot::Mutex::new(0u64);
    g.bench_function("parking_lot", |b| {
        b.iter(|| *pl.try_lock().expect("free") += 1)
    });
    let std = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *std.try_lock().expect("free") += 1));
    g.finish();
}

fn async_forms(c: &mut Criterion) {
    let mut g = c.benchmark_group("ast_mutex/async");
    let ast = AstMutex::new(Turn::Ping, 0u64);
    g.bench_function("ast-mutex", |b| {
        b.iter(|| {
            let mut guard = common::poll_once(ast.enter_async(Turn::Ping));
            *guard += 1;
            guard.exit(Turn::Ping);
        })
    });
    let tokio = tokio::sync::Mutex::new(0u64);
    g.bench_function("tokio", |b| {
        b.iter(|| *common::poll_once(tokio.lock()) += 1)
    });
    let al = async_lock::Mutex::new(0u64);
    g.bench_function("async-lock", |b| {
        b.iter(|| *common::poll_once(al.lock()) += 1)
    });
    g.finish();
}

/// Two threads take turns: one enters in `Ping` and leaves `Pong`, the
/// other the reverse. One iteration is one round trip (two handoffs).
fn handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("ast_mutex/handoff");
    for (name, mode) in [
        ("ast-mutex", WakeMode::Compete),
        ("ast-mutex-handoff", WakeMode::Handoff),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let m = Arc::new(AstMutex::with_config(
                    Turn::Ping,
                    0u64,
                    Config::new().wake_mode(mode),
                ));
                let m2 = Arc::clone(&m);
                let turns = |m: &AstMutex<Turn, u64>, mine: Turn, next: Turn, n: u64| {
                    for _ in 0..n {
                        let mut guard = m.enter(mine);
                        *guard += 1;
                        guard.exit(next);
                    }
                };
                common::pair(
                    iters,
                    move |n| turns(&m2, Turn::Pong, Turn::Ping, n),
                    |n| turns(&m, Turn::Ping, Turn::Pong, n),
                )
            })
        });
    }
    g.bench_function("condvar-std", |b| {
        b.iter_custom(|iters| {
            let m = Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new()));
            let m2 = Arc::clone(&m);
            let turns = |m: &(std::sync::Mutex<bool>, std::sync::Condvar), ping: bool, n: u64| {
                for _ in 0..n {
                    let mut turn = m.0.lock().unwrap();
                    while *turn != ping {
                        turn = m.1.wait(turn).unwrap();
                    }
                    *turn = !ping;
                    m.1.notify_one();
                }
            };
            common::pair(iters, move |n| turns(&m2, false, n), |n| turns(&m, true, n))
        })
    });
    g.bench_function("condvar-parking_lot", |b| {
        b.iter_custom(|iters| {
            let m = Arc::new((parking_lot::Mutex::new(true), parking_lot::Condvar::new()));
            let m2 = Arc::clone(&m);
            let turns =
                |m: &(parking_lot::Mutex<bool>, parking_lot::Condvar), ping: bool, n: u64| {
                    for _ in 0..n {
                        let mut turn = m.0.lock();
                        while *turn != ping {
                            m.1.wait(&mut turn);
                        }
                        *turn = !ping;
                        m.1.notify_one();
                    }
                };
            common::pair(iters, move |n| turns(&m2, false, n), |n| turns(&m, true, n))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = uncontended, try_forms, async_forms, handoff
}
criterion_main!(benches);
