//! What every criterion bench file of `sync-bench` shares: the short
//! configuration that keeps `cargo bench` to a few minutes, the minimal
//! executor for the async forms, and the two-thread timing for
//! `iter_custom`. Include it with `mod common;`.

#![allow(dead_code)] // each bench file uses a part of it

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::Criterion;
use sync_bench::peers::BenchMutex;

/// Short warm-up and measurement: these are fast paths, measured to catch
/// regressions, not the papers' experiments (that is `cargo xtask report`).
/// Command-line options (`--save-baseline`, `--baseline`, `--measurement-time`,
/// a filter) still override it: `criterion_group!` applies them after.
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200))
        .sample_size(30)
}

/// The minimal executor of the uncontended async forms: polls `f` once with
/// a waker that does nothing.
///
/// # Panics
///
/// If `f` is not ready at its first poll (it would have had to wait: the
/// benchmark is not uncontended).
#[inline]
pub fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("an uncontended future had to wait"),
    }
}

/// Runs `partner` on a second thread and `leader` on this one, both given
/// `iters`, started together; the time `leader` took (the spawn and the
/// join are not timed). For `Bencher::iter_custom`.
pub fn pair(
    iters: u64,
    partner: impl FnOnce(u64) + Send + 'static,
    leader: impl FnOnce(u64),
) -> Duration {
    sync_bench::harness::time_pair(move || partner(iters), move || leader(iters))
}

/// Two threads each lock the mutex and increment its counter `iters` times:
/// the contended handoff of `iter_custom`.
pub fn contended<M: BenchMutex<u64>>(iters: u64) -> Duration {
    let m = Arc::new(M::new(0));
    let m2 = Arc::clone(&m);
    let work = |m: &M, n: u64| {
        for _ in 0..n {
            m.with(|v| *v = black_box(*v + 1));
        }
    };
    pair(iters, move |n| work(&m2, n), |n| work(&m, n))
}
