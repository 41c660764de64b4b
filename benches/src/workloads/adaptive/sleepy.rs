//! `adaptive/sleepy-holder/64`: what waiting costs when the holder sleeps.
//!
//! 64 threads each lock, sleep 1 ms inside the lock, and unlock, again and
//! again: the lock is always held and always wanted, and every way of
//! waiting gives about the same throughput (one acquisition per sleep).
//! What differs is the CPU the waiters burn meanwhile, which is the unit:
//! the threads' CPU time (user plus system, `getrusage(RUSAGE_THREAD)` on
//! each thread, summed) per acquisition, in nanoseconds. A lock whose
//! waiters park costs a wake-up per acquisition; one whose waiters keep
//! polling costs CPUs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use super::{Adaptive, LearnedPolicy, SimplePolicy};
use crate::harness::{Mode, Unit, Workload};
use crate::peers::BenchMutex;
use crate::workloads::ast::run_threads;

/// Threads, all of them holders in turn and waiters otherwise.
const THREADS: usize = 64;
/// How long a holder sleeps inside the lock.
const HOLD: Duration = Duration::from_millis(1);

/// The calling thread's CPU time (user plus system) in nanoseconds.
fn thread_cpu_ns() -> u64 {
    sync_core::testing::thread_cpu_time().as_nanos() as u64
}

/// One sample: every thread makes `per_thread` acquisitions, each holding
/// the lock for [`HOLD`] asleep; returns the threads' CPU nanoseconds per
/// acquisition.
fn run<M: BenchMutex<u64>>(m: &Arc<M>, per_thread: u64) -> f64 {
    let before = m.with(|v| *v);
    let shared = Arc::new((Arc::clone(m), AtomicU64::new(0), per_thread));
    run_threads(&shared, THREADS, |(m, cpu, per_thread), _| {
        let began = thread_cpu_ns();
        for _ in 0..*per_thread {
            m.with(|v| {
                thread::sleep(HOLD);
                *v += 1;
            });
        }
        // Relaxed: read after every thread has been joined.
        cpu.fetch_add(thread_cpu_ns() - began, Ordering::Relaxed);
    });
    let total = THREADS as u64 * per_thread;
    assert_eq!(m.with(|v| *v) - before, total, "a lost update");
    shared.1.load(Ordering::Relaxed) as f64 / total as f64
}

/// The workload.
pub fn workload(mode: Mode) -> Workload {
    let per_thread = mode.pick(4, 20);
    fn imp<M: BenchMutex<u64>>(per_thread: u64) -> impl FnMut() -> f64 {
        let m = Arc::new(M::new(0));
        move || run(&m, per_thread)
    }
    Workload::new(format!("adaptive/sleepy-holder/{THREADS}"), Unit::NsPerOp)
        .title(format!(
            "{THREADS} threads each lock, sleep {} ms inside the lock, unlock, {per_thread} \
             times: the threads' CPU time (getrusage per thread, user plus system) per \
             acquisition, in ns. Every way of waiting gives about one acquisition per sleep; \
             this measures what the waiting costs.",
            HOLD.as_millis()
        ))
        .param("threads", THREADS)
        .param("hold_ms", HOLD.as_millis() as u64)
        .param("acquisitions", THREADS as u64 * per_thread)
        .baseline("parking_lot")
        .paper(
            "none: the paper's objective is throughput only. A learned policy that optimises \
             acquisitions per second alone cannot tell parking from polling here (both give one \
             acquisition per sleep); ours counts the CPU its waiters burn.",
        )
        .implementation("adaptive", imp::<Adaptive<LearnedPolicy, u64>>(per_thread))
        .implementation(
            "simple-adapt",
            imp::<Adaptive<SimplePolicy, u64>>(per_thread),
        )
        .implementation("parking_lot", imp::<::parking_lot::Mutex<u64>>(per_thread))
        .implementation("std", imp::<std::sync::Mutex<u64>>(per_thread))
}
