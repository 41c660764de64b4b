//! `adaptive/`: paper 003 (Mukherjee & Schwan, adaptive locks). Issue 9.
//!
//! * `adaptive/cs/{0,1,10,100}/{2,4,16}`: the paper's figure 1 (combined
//!   spin-N-then-block locks against pure spin and blocking locks as the
//!   critical section grows), with the thread counts of the family: every
//!   thread locks, does the critical section's calibrated busy work,
//!   unlocks, and does as much work outside; ms for a fixed number of
//!   acquisitions in all.
//! * `adaptive/phases`: low- and high-contention phases in turn.
//! * `adaptive/tsp/{central,distributed,distributed-lb}`: the paper's TSP
//!   branch and bound with its four locks (tables 1-3).
//! * `adaptive/uncontended`: the fast path, where the monitor must cost
//!   nothing.
//! * `adaptive/sleepy-holder/64`: a holder that sleeps inside the lock; the
//!   waiters' CPU time per acquisition (what waiting costs).
//!
//! Each implementation keeps one lock across its samples (a long-lived
//! lock, as in an application): the warm-up run is where a learning policy
//! learns.

pub mod sleepy;
pub mod tsp;

use std::hint::black_box;
use std::marker::PhantomData;
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use adaptive_lock::{AdaptiveMutex, Learned, Policy, SimpleAdapt, Static};
use sync_core::wait::WaitPolicy;

use crate::harness::{Mode, Unit, Workload, ms};
use crate::peers::BenchMutex;
use crate::workloads::ast::run_threads;
use crate::workloads::base::uncontended;

/// The `adaptive/` workloads.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let mut all = Vec::new();
    for cs in [0, 1, 10, 100] {
        for threads in [2, 4, 16] {
            all.push(cs_sweep(mode, cs, threads));
        }
    }
    all.push(phases(mode));
    for variant in tsp::Variant::ALL {
        all.push(tsp::workload(mode, variant));
    }
    all.push(uncontended_pair(mode));
    all.push(sleepy::workload(mode));
    all
}

/// Busy work of a known length: `ns` nanoseconds of a loop calibrated once
/// per process (so the critical section costs the same in every impl and
/// does not read the clock).
pub fn busy(ns: u64) {
    if ns == 0 {
        return;
    }
    let iters = ns * iters_per_us() / 1_000;
    let mut x = 0u64;
    for i in 0..iters {
        x = black_box(x.wrapping_add(i));
    }
    black_box(x);
}

/// Loop iterations of [`busy`] per microsecond on this machine.
pub fn iters_per_us() -> u64 {
    static CAL: OnceLock<u64> = OnceLock::new();
    *CAL.get_or_init(|| {
        let n = 2_000_000u64;
        // The fastest of a few runs: the loop's speed when not preempted.
        let best = (0..5)
            .map(|_| {
                let start = Instant::now();
                let mut x = 0u64;
                for i in 0..n {
                    x = black_box(x.wrapping_add(i));
                }
                black_box(x);
                start.elapsed()
            })
            .min()
            .expect("five runs");
        (n * 1_000 / best.as_nanos().max(1) as u64).max(1)
    })
}

/// Chooses a policy for [`Adaptive`] at the type level (`BenchMutex::new`
/// takes no argument).
pub trait Pick: Send + Sync + 'static {
    /// The policy.
    type P: Policy + Send + 'static;
    /// A fresh policy.
    fn policy() -> Self::P;
}

/// An [`AdaptiveMutex`] run by the policy `K` picks.
pub struct Adaptive<K: Pick, T>(pub AdaptiveMutex<T, K::P>, PhantomData<K>);

impl<K: Pick, T: Send + 'static> BenchMutex<T> for Adaptive<K, T> {
    fn new(value: T) -> Self {
        Adaptive(AdaptiveMutex::with_policy(value, K::policy()), PhantomData)
    }
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock())
    }
}

macro_rules! pick {
    ($(#[$doc:meta])* $name:ident, $p:ty, $e:expr) => {
        $(#[$doc])*
        pub struct $name;
        impl Pick for $name {
            type P = $p;
            fn policy() -> $p {
                $e
            }
        }
    };
}

pick!(
    /// The default, learning policy.
    LearnedPolicy,
    Learned,
    Learned::new()
);
pick!(
    /// The paper's simple-adapt: threshold one waiter per spare core (1 on
    /// 2 cores), 16 spins a step.
    SimplePolicy,
    SimpleAdapt,
    SimpleAdapt {
        threshold: cpus().saturating_sub(1).max(1),
        step: 16,
    }
);
pick!(
    /// Pure spin (yielding after 100 polls, never sleeping).
    SpinPolicy,
    Static,
    Static(WaitPolicy::spin())
);
pick!(
    /// Spin with exponential back-off, never sleeping.
    SpinBackoffPolicy,
    Static,
    Static(WaitPolicy::spin_backoff())
);
pick!(
    /// Pure blocking: park at once.
    BlockPolicy,
    Static,
    Static(WaitPolicy::block())
);
pick!(
    /// Figure 1's combined lock: one spin, then block.
    Spin1Policy,
    Static,
    Static(WaitPolicy::spin_then_block(1))
);
pick!(
    /// Figure 1's combined lock: ten spins, then block.
    Spin10Policy,
    Static,
    Static(WaitPolicy::spin_then_block(10))
);
pick!(
    /// Figure 1's combined lock: fifty spins, then block.
    Spin50Policy,
    Static,
    Static(WaitPolicy::spin_then_block(50))
);

fn cpus() -> u32 {
    thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// Every thread does `per_thread` rounds of: lock, `cs_ns` of busy work,
/// unlock, `out_ns` of busy work. Returns the time from the start line to
/// the last thread's end. The lock guards a counter checked at the end.
fn run_rounds<M: BenchMutex<u64>>(
    m: &Arc<M>,
    threads: usize,
    per_thread: u64,
    cs_ns: u64,
    out_ns: u64,
) -> Duration {
    let before = m.with(|v| *v);
    let elapsed = run_threads(m, threads, move |m, _| {
        for _ in 0..per_thread {
            m.with(|v| {
                busy(cs_ns);
                *v += 1;
            });
            busy(out_ns);
        }
    });
    assert_eq!(
        m.with(|v| *v) - before,
        threads as u64 * per_thread,
        "a lost update"
    );
    elapsed
}

/// Acquisitions in all for a critical section of `cs_us`: about the same
/// serialized time in every cell, within the quick budget. (An empty
/// critical section takes 320,000, about 10 ms a sample: at 32,000 a sample
/// lasted 1 ms, thread start-up and scheduler noise more than waiting.)
fn acquisitions(mode: Mode, cs_us: u64) -> u64 {
    let quick = match cs_us {
        0 => 320_000,
        1 => 8_000,
        10 => 1_600,
        _ => 320,
    };
    mode.pick(quick, quick * 10)
}

/// The `adaptive/cs` impls on a critical section of `cs_ns` and as much
/// work outside, `threads` threads, `total` acquisitions.
fn with_cs_impls(mut w: Workload, threads: usize, total: u64, cs_ns: u64, out_ns: u64) -> Workload {
    let per_thread = total / threads as u64;
    fn imp<M: BenchMutex<u64>>(
        threads: usize,
        per_thread: u64,
        cs_ns: u64,
        out_ns: u64,
    ) -> impl FnMut() -> f64 {
        let m = Arc::new(M::new(0));
        move || ms(run_rounds(&m, threads, per_thread, cs_ns, out_ns))
    }
    let a = (threads, per_thread, cs_ns, out_ns);
    w = w
        .implementation(
            "adaptive",
            imp::<Adaptive<LearnedPolicy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation(
            "simple-adapt",
            imp::<Adaptive<SimplePolicy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation("spin", imp::<Adaptive<SpinPolicy, u64>>(a.0, a.1, a.2, a.3))
        .implementation(
            "spin-backoff",
            imp::<Adaptive<SpinBackoffPolicy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation(
            "block",
            imp::<Adaptive<BlockPolicy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation(
            "spin1-block",
            imp::<Adaptive<Spin1Policy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation(
            "spin10-block",
            imp::<Adaptive<Spin10Policy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation(
            "spin50-block",
            imp::<Adaptive<Spin50Policy, u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation(
            "parking_lot",
            imp::<::parking_lot::Mutex<u64>>(a.0, a.1, a.2, a.3),
        )
        .implementation("std", imp::<std::sync::Mutex<u64>>(a.0, a.1, a.2, a.3))
        .implementation(
            "lockfree-sync",
            imp::<lockfree_sync::Mutex<u64>>(a.0, a.1, a.2, a.3),
        );
    w
}

fn cs_sweep(mode: Mode, cs_us: u64, threads: usize) -> Workload {
    let total = acquisitions(mode, cs_us);
    let w = Workload::new(format!("adaptive/cs/{cs_us}/{threads}"), Unit::Ms)
        .title(format!(
            "{threads} threads on {} cores: lock, {cs_us} µs of busy work, unlock, {cs_us} µs \
             outside; ms for {total} acquisitions in all.",
            cpus()
        ))
        .param("cs_us", cs_us)
        .param("threads", threads)
        .param("acquisitions", total)
        .baseline("parking_lot")
        .baseline("block")
        .paper(
            "figure 1 (application time against critical-section length, 32-node BBN \
             Butterfly, one thread per processor): spin-10-then-block beat spin-1 for some \
             lengths, spin-50 did worse than spin-10 for the same lengths, so the best number \
             of initial spins depends on the locking pattern, the paper's case for a \
             feedback-driven waiting policy. Here 4 and 16 threads oversubscribe 2 cores, a \
             regime the paper left to future work; a wake-up costs about 30 µs \
             (`base/park-unpark`).",
        );
    with_cs_impls(w, threads, total, cs_us * 1_000, cs_us * 1_000)
}

/// One phase of `adaptive/phases`: critical section, outside work and
/// rounds per thread.
#[derive(Clone, Copy)]
struct Phase {
    cs_ns: u64,
    out_ns: u64,
    rounds: u64,
}

const PHASE_THREADS: usize = 8;

fn phase_list(mode: Mode) -> Vec<Phase> {
    let scale = mode.pick(1, 10);
    // Low contention: a short critical section and long work outside
    // (waits are short and rare: spinning wins). High contention: a long
    // critical section and little outside (8 threads queue on 2 cores:
    // parking wins).
    let low = Phase {
        cs_ns: 1_000,
        out_ns: 40_000,
        rounds: 200 * scale,
    };
    let high = Phase {
        cs_ns: 20_000,
        out_ns: 1_000,
        rounds: 25 * scale,
    };
    vec![low, high, low, high]
}

/// All threads go through the phases together (a barrier between them).
fn run_phases<M: BenchMutex<u64>>(m: &Arc<M>, phases: &[Phase]) -> Duration {
    let run = Arc::new((Arc::clone(m), Barrier::new(PHASE_THREADS), phases.to_vec()));
    run_threads(&run, PHASE_THREADS, |(m, barrier, phases), _| {
        for p in phases {
            for _ in 0..p.rounds {
                m.with(|v| {
                    busy(p.cs_ns);
                    *v += 1;
                });
                busy(p.out_ns);
            }
            barrier.wait();
        }
    })
}

fn phases(mode: Mode) -> Workload {
    let list = phase_list(mode);
    fn imp<M: BenchMutex<u64>>(list: Vec<Phase>) -> impl FnMut() -> f64 {
        let m = Arc::new(M::new(0));
        move || ms(run_phases(&m, &list))
    }
    let l = || list.clone();
    Workload::new("adaptive/phases", Unit::Ms)
        .title(format!(
            "{PHASE_THREADS} threads go through four phases in turn: low contention (1 µs \
             critical section, 40 µs outside, {} rounds each) and high contention (20 µs \
             inside, 1 µs outside, {} rounds each).",
            list[0].rounds, list[1].rounds
        ))
        .param("threads", PHASE_THREADS)
        .baseline("parking_lot")
        .baseline("block")
        .paper(
            "the paper's argument that \"the optimal waiting policy for a lock might differ \
             during different phases of a computation\" (section 2), made a workload.",
        )
        .implementation("adaptive", imp::<Adaptive<LearnedPolicy, u64>>(l()))
        .implementation("simple-adapt", imp::<Adaptive<SimplePolicy, u64>>(l()))
        .implementation("spin", imp::<Adaptive<SpinPolicy, u64>>(l()))
        .implementation("spin-backoff", imp::<Adaptive<SpinBackoffPolicy, u64>>(l()))
        .implementation("block", imp::<Adaptive<BlockPolicy, u64>>(l()))
        .implementation("spin1-block", imp::<Adaptive<Spin1Policy, u64>>(l()))
        .implementation("spin10-block", imp::<Adaptive<Spin10Policy, u64>>(l()))
        .implementation("spin50-block", imp::<Adaptive<Spin50Policy, u64>>(l()))
        .implementation("parking_lot", imp::<::parking_lot::Mutex<u64>>(l()))
        .implementation("std", imp::<std::sync::Mutex<u64>>(l()))
        .implementation("lockfree-sync", imp::<lockfree_sync::Mutex<u64>>(l()))
}

fn uncontended_pair(mode: Mode) -> Workload {
    let ops = mode.pick(2_000_000, 20_000_000);
    Workload::new("adaptive/uncontended", Unit::NsPerOp)
        .title("One lock plus unlock by a single thread: the fast path, monitor included.")
        .param("ops", ops)
        .baseline("parking_lot")
        .paper(
            "tables 4 and 5 (µs, BBN Butterfly, local lock): lock 40.79 for both the spin \
             lock and the adaptive lock; unlock 4.99 (spin) against 50.07 (adaptive, which \
             checks for blocked threads). Ours keeps parking_lot's one CAS each way and adds \
             one counter increment on the lock's own cache line; every 256th acquisition \
             reads the clock twice and runs the policy.",
        )
        .implementation("adaptive", uncontended::<Adaptive<LearnedPolicy, u64>>(ops))
        .implementation("parking_lot", uncontended::<::parking_lot::Mutex<u64>>(ops))
        .implementation("std", uncontended::<std::sync::Mutex<u64>>(ops))
}

/// The learned lock's monitor after a run, for the examples.
pub fn learned_stats(m: &Adaptive<LearnedPolicy, u64>) -> adaptive_lock::Stats {
    m.0.stats()
}
