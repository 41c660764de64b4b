//! `lf/`: paper 001 (Lin & Vella, lock-free user-level synchronisation),
//! tables 1 and 2 and figure 1, with the user-level thread played by the
//! async task.
//!
//! Each primitive is measured against the paper's two comparisons: its
//! *lock-based twin* (the same primitive with its state behind a spin lock,
//! `spin-twin`) and the *system* primitive (`std`, futex-based as pthread's;
//! `std-condvar` for the semaphore), plus the peers a Rust user would pick
//! instead (`parking_lot`, `tokio`, `async-lock`). The `*-tasks` workloads are
//! figure 1 moved to tasks on a 2-worker tokio runtime: a lock that blocks
//! the worker thread against locks that queue the task.

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use sync_core::spin::SpinLock;
use tokio::runtime::Runtime;

use crate::harness::{Mode, Unit, Workload, mops_per_sec, ms, ns_per_op};
use crate::peers::{BenchMutex, BenchSemaphore, FifoMutex};
use crate::twins::{CondvarSemaphore, RmwFloor, SpinSemaphore};
use crate::workloads::ast::StartLine;
use crate::workloads::base::uncontended;

/// Increments of the protected counter in one contended critical section
/// (a few dozen nanoseconds).
const CS_INCREMENTS: u64 = 20;
/// The permits of the contended and task semaphores.
const PERMITS: usize = 2;
/// Figure 1's independent critical sections, and its threads per section.
const GROUPS: usize = 6;
const TASKS_PER_GROUP: usize = 10;
/// The runtime's worker threads: the paper's two kernel threads.
const WORKERS: usize = 2;
const STACK: usize = 256 * 1024;

/// The `lf/` workloads.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let mut all = vec![mutex_uncontended(mode)];
    for threads in [2, 4, 16] {
        all.push(mutex_contended(mode, threads));
    }
    all.push(mutex_tasks(mode));
    all.push(sem_uncontended(mode));
    for threads in [4, 16] {
        all.push(sem_contended(mode, threads));
    }
    all.push(sem_tasks(mode));
    all
}

/// Figure 1's work: `granularity` increments of a counter no one shares
/// (also `classic/`'s busy work).
pub(crate) fn local_work(granularity: u64) -> u64 {
    let mut counter = 0u64;
    for _ in 0..granularity {
        counter = black_box(counter + 1);
    }
    counter
}

/// The contended critical section: a few increments of the shared counter.
#[inline]
fn critical(v: &mut u64) {
    for _ in 0..CS_INCREMENTS {
        *v = black_box(*v + 1);
    }
}

/// Runs `op(&shared)` over and over on each of `threads` threads, started
/// together, until `run` has passed; returns the time from the start line
/// until the last thread finishes its last operation, and how many
/// operations they did in all. Spawning and joining are not timed.
///
/// The samples are bounded in time, not in operations, because the
/// implementations' throughputs differ a hundredfold here (a strict FIFO
/// handoff pays a wake-up per operation): a fixed count would give the fast
/// ones a run shorter than a scheduler time slice, or the slow ones minutes.
fn on_threads_for<S: Send + Sync + 'static>(
    shared: &Arc<S>,
    threads: usize,
    run: Duration,
    op: impl Fn(&S) + Copy + Send + 'static,
) -> (Duration, u64) {
    // The threads and this one, which times the run.
    let start = Arc::new(StartLine::new(threads + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (shared, start, stop) = (Arc::clone(shared), Arc::clone(&start), Arc::clone(&stop));
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    start.wait();
                    let mut ops = 0u64;
                    // Relaxed: the flag orders nothing; the join does.
                    while !stop.load(Ordering::Relaxed) {
                        op(&shared);
                        ops += 1;
                    }
                    (Instant::now(), ops)
                })
                .expect("spawn a benchmark thread")
        })
        .collect();
    start.wait();
    thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    let (mut end, mut total) = (start.started(), 0);
    for h in handles {
        let (finished, ops) = h.join().expect("a benchmark thread panicked");
        end = end.max(finished);
        total += ops;
    }
    (end - start.started(), total)
}

fn mutex_uncontended(mode: Mode) -> Workload {
    let ops = mode.pick(2_000_000, 20_000_000);
    Workload::new("lf/mutex-uncontended", Unit::NsPerOp)
        .title("One lock plus unlock by a single thread: the fast path (the paper's table 1).")
        .param("ops", ops)
        .baseline("parking_lot")
        .paper(
            "table 1 (a lock plus unlock pair, 10^6 pairs, ns, Core 2 Duo 1.83 GHz, Linux \
             2.6.24): pthread mutex 74, lock-based 95, lock-free 127; lock-free = 1.72x \
             pthread, 1.34x lock-based. `std` plays the pthread (futex) mutex and `spin-twin` \
             the lock-based twin (a test-and-test-and-set spin lock). The paper's lock-free \
             mutex pays a fetch-and-add, a CAS and a double-word CAS on the fast path; ours \
             packs the lock bit and the waiter count in one word, one CAS each way.",
        )
        .implementation(
            "lockfree-sync",
            uncontended::<lockfree_sync::Mutex<u64>>(ops),
        )
        .implementation("lockfree-sync-fifo", uncontended::<FifoMutex<u64>>(ops))
        .implementation("std", uncontended::<std::sync::Mutex<u64>>(ops))
        .implementation("parking_lot", uncontended::<::parking_lot::Mutex<u64>>(ops))
        .implementation("spin-twin", uncontended::<SpinLock<u64>>(ops))
}

/// How long one sample of a contended workload runs.
fn run_time(mode: Mode) -> Duration {
    Duration::from_millis(mode.pick(150, 1_000))
}

/// `threads` threads doing critical sections for `run`: Mops/s.
fn contended<M: BenchMutex<u64>>(threads: usize, run: Duration) -> impl FnMut() -> f64 {
    move || {
        let m = Arc::new(M::new(0));
        let (elapsed, ops) = on_threads_for(&m, threads, run, |m: &M| m.with(critical));
        assert_eq!(m.with(|v| *v), ops * CS_INCREMENTS, "a lost update");
        mops_per_sec(elapsed, ops)
    }
}

fn mutex_contended(mode: Mode, threads: usize) -> Workload {
    let run = run_time(mode);
    Workload::new(format!("lf/mutex-contended/{threads}"), Unit::MopsPerSec)
        .title(format!(
            "{threads} threads on 2 cores each lock, add {CS_INCREMENTS} times to a shared \
             counter, unlock, over and over for {} ms: critical sections per second.",
            run.as_millis()
        ))
        .param("threads", threads)
        .param("run_ms", run.as_millis() as u64)
        .param("cs_increments", CS_INCREMENTS)
        .baseline("parking_lot")
        .paper(
            "no contended figure: with two cores SMASH ran two kernel threads, so at most two \
             threads ever met at a lock; the paper expects the lock-free designs to win \
             \"when a multiprocessor system is under high contention\". Here 16 threads \
             oversubscribe the 2 cores (and 4 already do), so a holder can be preempted: the spin twin then \
             spins and yields, and a strict FIFO handoff (`lockfree-sync-fifo`) wakes a parked \
             thread for every unlock. On this VM a wake-up costs about 30 µs \
             (`base/park-unpark`) against a few hundred ns for a cache-line round trip \
             (`base/cacheline-pingpong`), a far larger ratio than on the paper's laptop, so \
             a lock that lets the running thread barge in and keep going wins by more.",
        )
        .implementation(
            "lockfree-sync",
            contended::<lockfree_sync::Mutex<u64>>(threads, run),
        )
        .implementation(
            "lockfree-sync-fifo",
            contended::<FifoMutex<u64>>(threads, run),
        )
        .implementation("std", contended::<std::sync::Mutex<u64>>(threads, run))
        .implementation(
            "parking_lot",
            contended::<::parking_lot::Mutex<u64>>(threads, run),
        )
        .implementation("spin-twin", contended::<SpinLock<u64>>(threads, run))
}

/// The tokio runtime of the `*-tasks` workloads: the paper's two kernel
/// threads.
fn two_workers() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .expect("build a tokio runtime")
}

/// A mutex a task locks for figure 1's critical section.
trait TaskMutex: Send + Sync + 'static {
    fn new() -> Self;
    /// Locks, does `granularity` increments of a local counter, adds the
    /// result to the protected one, unlocks.
    fn section(&self, granularity: u64) -> impl Future<Output = ()> + Send + '_;
    /// The protected counter.
    fn total(&self) -> u64;
}

impl TaskMutex for lockfree_sync::Mutex<u64> {
    fn new() -> Self {
        lockfree_sync::Mutex::new(0)
    }
    async fn section(&self, granularity: u64) {
        let mut v = self.lock_async().await;
        *v += local_work(granularity);
    }
    fn total(&self) -> u64 {
        *self.lock()
    }
}

impl TaskMutex for tokio::sync::Mutex<u64> {
    fn new() -> Self {
        tokio::sync::Mutex::new(0)
    }
    async fn section(&self, granularity: u64) {
        let mut v = self.lock().await;
        *v += local_work(granularity);
    }
    fn total(&self) -> u64 {
        *self.blocking_lock()
    }
}

/// The pthread mutex of figure 1: waiting blocks the worker thread.
impl TaskMutex for std::sync::Mutex<u64> {
    fn new() -> Self {
        std::sync::Mutex::new(0)
    }
    async fn section(&self, granularity: u64) {
        let mut v = self
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *v += local_work(granularity);
    }
    fn total(&self) -> u64 {
        *self
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Figure 1 on tasks: `GROUPS` mutexes, `TASKS_PER_GROUP` tasks each
/// (spawned section by section), every task entering its section `reps`
/// times. The runtime is built once, before the first (warm-up) sample.
fn tasks_sample<M: TaskMutex>(granularity: u64, reps: u64) -> impl FnMut() -> f64 {
    let mut rt = None;
    move || {
        let rt = rt.get_or_insert_with(two_workers);
        let mutexes: Arc<[M]> = (0..GROUPS).map(|_| M::new()).collect();
        let start = Instant::now();
        rt.block_on(async {
            let tasks: Vec<_> = (0..GROUPS * TASKS_PER_GROUP)
                .map(|t| {
                    let mutexes = Arc::clone(&mutexes);
                    tokio::spawn(async move {
                        let m = &mutexes[t / TASKS_PER_GROUP];
                        for _ in 0..reps {
                            m.section(granularity).await;
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.expect("a benchmark task panicked");
            }
        });
        let elapsed = start.elapsed();
        for m in mutexes.iter() {
            assert_eq!(m.total(), TASKS_PER_GROUP as u64 * reps * granularity);
        }
        ms(elapsed)
    }
}

fn mutex_tasks(mode: Mode) -> Workload {
    let granularity: u64 = mode.pick(1_000_000, 4_000_000);
    let reps: u64 = 5;
    Workload::new("lf/mutex-tasks", Unit::Ms)
        .title(format!(
            "Figure 1 on tasks: {GROUPS} independent critical sections, {TASKS_PER_GROUP} \
             tasks each, on a {WORKERS}-worker tokio runtime; each task enters its section \
             {reps} times and counts to GRANULARITY = {granularity} inside it."
        ))
        .param("granularity", granularity)
        .param("reps", reps)
        .param("groups", GROUPS)
        .param("tasks_per_group", TASKS_PER_GROUP)
        .param("workers", WORKERS)
        .baseline("std-blocking")
        .baseline("tokio")
        .paper(
            "figure 1 (six independent critical sections, ten user-level threads each, SMASH \
             on 2 kernel threads, time against GRANULARITY): the whole system runs about \
             twice as fast with the user-level lock-free mutex as with pthread's, because a \
             pthread mutex blocks the kernel thread: at worst both kernel threads pick the \
             same section and run it one after the other. Tasks play the user-level threads \
             and tokio's 2 workers the kernel threads: `std-blocking` holds a \
             `std::sync::Mutex` (the pthread mutex) and blocks its worker while it waits; \
             `lockfree-sync` (`lock_async`) and `tokio` queue the task and free the worker \
             for another section.",
        )
        .implementation(
            "lockfree-sync",
            tasks_sample::<lockfree_sync::Mutex<u64>>(granularity, reps),
        )
        .implementation(
            "tokio",
            tasks_sample::<tokio::sync::Mutex<u64>>(granularity, reps),
        )
        .implementation(
            "std-blocking",
            tasks_sample::<std::sync::Mutex<u64>>(granularity, reps),
        )
}

/// One thread taking and returning one permit `ops` times with
/// `try_acquire`: ns per pair.
fn sem_pairs<S: BenchSemaphore>(ops: u64) -> impl FnMut() -> f64 {
    let s = S::new(1);
    move || {
        let start = Instant::now();
        let mut taken = 0u64;
        for _ in 0..ops {
            taken += s.try_with_permit(|| 1).unwrap_or(0);
        }
        let elapsed = start.elapsed();
        assert_eq!(taken, ops, "an uncontended try_acquire failed");
        ns_per_op(elapsed, ops)
    }
}

fn sem_uncontended(mode: Mode) -> Workload {
    let ops = mode.pick(2_000_000, 20_000_000);
    Workload::new("lf/sem-uncontended", Unit::NsPerOp)
        .title(
            "One `try_acquire` of a permit plus its release by a single thread, one permit: \
             the fast path (the paper's table 2).",
        )
        .param("ops", ops)
        .param("permits", 1)
        .baseline("tokio")
        .paper(
            "table 2 (an acquire plus release, count 1, ns): lock-free 90, lock-based 96, \
             system 383; lock-free = 0.94x lock-based, 0.23x system. Every implementation \
             here takes the permit with its `try_acquire` (the uncontended path, nothing \
             waits) and returns it by dropping the permit (the twins: by `release`). \
             `spin-twin` is the lock-based twin (a spin lock around the count and a queue of \
             parked threads), `std-condvar` the system semaphore's analogue (a \
             `std::sync::Mutex` count and a `Condvar`, whose `notify_one` on every release \
             is a futex system call even with nobody waiting). `rmw-floor` is no \
             semaphore: one bare `fetch_sub` and one `fetch_add` per pair, the least any \
             atomic-counter semaphore can pay on this machine.",
        )
        .implementation("lockfree-sync", sem_pairs::<lockfree_sync::Semaphore>(ops))
        .implementation("tokio", sem_pairs::<tokio::sync::Semaphore>(ops))
        .implementation("async-lock", sem_pairs::<async_lock::Semaphore>(ops))
        .implementation("spin-twin", sem_pairs::<SpinSemaphore>(ops))
        .implementation("std-condvar", sem_pairs::<CondvarSemaphore>(ops))
        .implementation("rmw-floor", sem_pairs::<RmwFloor>(ops))
}

/// `threads` threads holding one of `PERMITS` permits for a short section,
/// over and over for `run`: Mops/s.
fn sem_contended_sample<S: BenchSemaphore>(threads: usize, run: Duration) -> impl FnMut() -> f64 {
    move || {
        let s = Arc::new(S::new(PERMITS));
        let (elapsed, ops) = on_threads_for(&s, threads, run, |s: &S| {
            s.with_permit(|| black_box(local_work(CS_INCREMENTS)));
        });
        assert_eq!(
            s.try_with_permit(|| s.try_with_permit(|| s.try_with_permit(|| ()))),
            Some(Some(None)),
            "a permit was lost or made"
        );
        mops_per_sec(elapsed, ops)
    }
}

fn sem_contended(mode: Mode, threads: usize) -> Workload {
    let run = run_time(mode);
    Workload::new(format!("lf/sem-contended/{threads}"), Unit::MopsPerSec)
        .title(format!(
            "{threads} threads on 2 cores share a semaphore of {PERMITS} permits: each \
             blocks for a permit, counts to {CS_INCREMENTS}, releases, over and over for {} \
             ms: acquisitions per second.",
            run.as_millis()
        ))
        .param("threads", threads)
        .param("permits", PERMITS)
        .param("run_ms", run.as_millis() as u64)
        .param("cs_increments", CS_INCREMENTS)
        .baseline("async-lock")
        .paper(
            "not measured: with two kernel threads a count above 1 never meets contention, \
             and a count of 1 behaves as the mutex (section 3.2); the paper expects the \
             lock-free semaphore to pull ahead on more CPUs under contention. Blocking \
             forms: `lockfree-sync` `acquire()` (parks the thread), `async-lock` \
             `acquire_blocking()`; tokio has no blocking acquire, so its every acquire is \
             `futures::executor::block_on(sem.acquire())`. Waking a parked thread costs \
             about 30 µs on this VM against a few hundred ns for a cache-line round trip \
             (`base/`), so how long a waiter spins before it parks, and whether a release \
             hands its permit to a parked waiter or lets a running thread take it, weigh \
             more than how the queue is built.",
        )
        .implementation(
            "lockfree-sync",
            sem_contended_sample::<lockfree_sync::Semaphore>(threads, run),
        )
        .implementation(
            "tokio",
            sem_contended_sample::<tokio::sync::Semaphore>(threads, run),
        )
        .implementation(
            "async-lock",
            sem_contended_sample::<async_lock::Semaphore>(threads, run),
        )
}

/// A semaphore a task holds a permit of across an `.await`.
trait TaskSemaphore: Send + Sync + 'static {
    fn new(permits: usize) -> Self;
    /// Takes a permit, counts to `work`, yields to the executor, counts to
    /// `work` again, releases; returns the count.
    fn hold(&self, work: u64) -> impl Future<Output = u64> + Send + '_;
    fn available(&self) -> usize;
}

impl TaskSemaphore for lockfree_sync::Semaphore {
    fn new(permits: usize) -> Self {
        lockfree_sync::Semaphore::new(permits)
    }
    async fn hold(&self, work: u64) -> u64 {
        let _permit = self.acquire_async().await.expect("never closed");
        let n = local_work(work);
        tokio::task::yield_now().await;
        n + local_work(work)
    }
    fn available(&self) -> usize {
        self.available_permits()
    }
}

impl TaskSemaphore for tokio::sync::Semaphore {
    fn new(permits: usize) -> Self {
        tokio::sync::Semaphore::new(permits)
    }
    async fn hold(&self, work: u64) -> u64 {
        let _permit = self.acquire().await.expect("never closed");
        let n = local_work(work);
        tokio::task::yield_now().await;
        n + local_work(work)
    }
    fn available(&self) -> usize {
        self.available_permits()
    }
}

impl TaskSemaphore for async_lock::Semaphore {
    fn new(permits: usize) -> Self {
        async_lock::Semaphore::new(permits)
    }
    async fn hold(&self, work: u64) -> u64 {
        let _permit = self.acquire().await;
        let n = local_work(work);
        tokio::task::yield_now().await;
        n + local_work(work)
    }
    fn available(&self) -> usize {
        self.available_permits()
    }
}

/// `GROUPS * TASKS_PER_GROUP` tasks share one semaphore of `PERMITS`
/// permits, each holding a permit `reps` times across a yield.
fn sem_tasks_sample<S: TaskSemaphore>(work: u64, reps: u64) -> impl FnMut() -> f64 {
    let mut rt = None;
    move || {
        let rt = rt.get_or_insert_with(two_workers);
        let s = Arc::new(S::new(PERMITS));
        let tasks = GROUPS * TASKS_PER_GROUP;
        let start = Instant::now();
        let counted: u64 = rt.block_on(async {
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let s = Arc::clone(&s);
                    tokio::spawn(async move {
                        let mut n = 0;
                        for _ in 0..reps {
                            n += s.hold(work).await;
                        }
                        n
                    })
                })
                .collect();
            let mut counted = 0;
            for h in handles {
                counted += h.await.expect("a benchmark task panicked");
            }
            counted
        });
        let elapsed = start.elapsed();
        assert_eq!(counted, tasks as u64 * reps * 2 * work);
        assert_eq!(s.available(), PERMITS, "a permit was lost");
        ms(elapsed)
    }
}

fn sem_tasks(mode: Mode) -> Workload {
    let work: u64 = 1_000;
    let reps: u64 = mode.pick(500, 5_000);
    let tasks = GROUPS * TASKS_PER_GROUP;
    Workload::new("lf/sem-tasks", Unit::Ms)
        .title(format!(
            "{tasks} tasks on a {WORKERS}-worker tokio runtime share one semaphore of \
             {PERMITS} permits; {reps} times each, a task takes a permit, counts to {work}, \
             yields to the executor holding it, counts to {work} again and releases."
        ))
        .param("tasks", tasks)
        .param("permits", PERMITS)
        .param("reps", reps)
        .param("work", work)
        .param("workers", WORKERS)
        .baseline("tokio")
        .paper(
            "section 3.2 reruns figure 1 with semaphores guarding the sections and reports \
             the same pattern as for mutexes, without a figure. Here the permit is held \
             across a `yield_now().await`, so the other tasks run meanwhile and queue for \
             a permit: every acquisition goes through the waiter queue, a wake-up and a \
             handoff, on tasks rather than threads.",
        )
        .implementation(
            "lockfree-sync",
            sem_tasks_sample::<lockfree_sync::Semaphore>(work, reps),
        )
        .implementation(
            "tokio",
            sem_tasks_sample::<tokio::sync::Semaphore>(work, reps),
        )
        .implementation(
            "async-lock",
            sem_tasks_sample::<async_lock::Semaphore>(work, reps),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids and implementation names are fixed: issues and earlier
    /// results refer to them.
    #[test]
    fn ids_and_impls_are_the_fixed_ones() {
        let mutex = [
            "lockfree-sync",
            "lockfree-sync-fifo",
            "std",
            "parking_lot",
            "spin-twin",
        ];
        let expected: Vec<(&str, Vec<&str>)> = vec![
            ("lf/mutex-uncontended", mutex.to_vec()),
            ("lf/mutex-contended/2", mutex.to_vec()),
            ("lf/mutex-contended/4", mutex.to_vec()),
            ("lf/mutex-contended/16", mutex.to_vec()),
            (
                "lf/mutex-tasks",
                vec!["lockfree-sync", "tokio", "std-blocking"],
            ),
            (
                "lf/sem-uncontended",
                vec![
                    "lockfree-sync",
                    "tokio",
                    "async-lock",
                    "spin-twin",
                    "std-condvar",
                    "rmw-floor",
                ],
            ),
            (
                "lf/sem-contended/4",
                vec!["lockfree-sync", "tokio", "async-lock"],
            ),
            (
                "lf/sem-contended/16",
                vec!["lockfree-sync", "tokio", "async-lock"],
            ),
            ("lf/sem-tasks", vec!["lockfree-sync", "tokio", "async-lock"]),
        ];
        for mode in [Mode::Quick, Mode::Full] {
            let got: Vec<(String, Vec<String>)> = workloads(mode)
                .into_iter()
                .map(|w| (w.meta.id, w.impls.into_iter().map(|i| i.name).collect()))
                .collect();
            assert_eq!(got.len(), expected.len());
            for ((id, impls), (want_id, want_impls)) in got.iter().zip(&expected) {
                assert_eq!(id, want_id);
                assert_eq!(impls, want_impls, "{id}");
            }
        }
        for w in workloads(Mode::Quick) {
            let m = &w.meta;
            assert!(m.paper.is_some(), "{} quotes the paper", m.id);
            assert!(!m.baselines.is_empty(), "{} has a baseline", m.id);
            for b in &m.baselines {
                assert!(w.impls.iter().any(|i| &i.name == b), "{}: {b}", m.id);
            }
        }
    }

    #[test]
    fn the_family_is_registered() {
        let ids: Vec<String> = crate::workloads::all(Mode::Quick)
            .into_iter()
            .map(|w| w.meta.id)
            .collect();
        for w in workloads(Mode::Quick) {
            assert!(ids.contains(&w.meta.id), "{} is not registered", w.meta.id);
        }
    }
}
