//! `busy/`: waiting when threads outnumber cores. `N` threads spin on the
//! CPUs (0, 4 and 50) while one thread waits on a primitive, ours or a
//! peer's, and two things are measured in milliseconds:
//!
//! * **overshoot**: how late a 1 ms timed wait that cannot succeed returns
//!   (`try_lock_for`, `try_enter_for`, `try_acquire_for`, `try_recv_for`, the CSP timed forms),
//!   and a timed lock on a lock that 8 other threads take and release in a
//!   loop (`lock-churned`: it may succeed, and then counts 0);
//! * **wake-up latency**: from the event (an unlock, a release, a send, a
//!   submission that enables an active monitor's `when` task) to the
//!   woken waiter's return.
//!
//! Each run makes a number of waits and gives their median (the `-p50`
//! workload) and their 99th percentile (the `-p99` companion, measured by
//! the same runs; with few waits a run's 99th percentile is its largest).
//! A `yield_now` gives the core away for a whole scheduling round when
//! other threads are runnable, so a wait loop that yields instead of
//! parking shows here as overshoots and latencies of tens of milliseconds.
//!
//! The background threads are started for each run and stopped after it;
//! starting them is not timed. Within a run, the implementations of a row
//! take turns, one wait each, each on a thread of its own, beside the same
//! busy threads, with a
//! reference that shows the kernel's own values: `sleep-floor`, a 1 ms
//! `thread::sleep`, beside the overshoot rows, and `park-floor`, a thread
//! woken from `thread::park`, beside the wake-up rows (see the `turns`
//! module for why). Ids: `busy/{overshoot,wake}-{p50,p99}/
//! {lock,lock-churned,semaphore,recv,when}/{0,4,50}` (the last part is the number of busy
//! threads, so each is a sweep), and for rendezvous channels (`csp`
//! module) `busy/overshoot-{p50,p99}/{csp-recv,csp-send,alt}/N` and
//! `busy/wake-{p50,p99}/{csp,alt}/N`.
//!
//! Beside them, the throughput rows that fall apart with a little
//! background load run again with 4 spinning threads, under their own ids
//! prefixed: `busy/4/ast/waiters/1000`, `busy/4/ast/bb-small`,
//! `busy/4/lf/mpsc/2`, `busy/4/lf/mutex-contended/16`, … (compare each
//! with its quiet row in the same report). And
//! `busy/50/mutex-sustained/8` asks whether a lock's throughput holds
//! beside 50 spinning threads once the first 200 ms are over: a lock can
//! run at its quiet rate until its waiters have parked, and then fall
//! apart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{Mode, Unit, Workload, mops_per_sec, summarize};
use crate::peers::{BenchMutex, OneState};
use crate::twins::CondvarSemaphore;
use crate::workloads::adaptive::{Adaptive, LearnedPolicy};

mod csp;
mod turns;
mod wake;

use turns::{MakeWait, Row, SLEEP_FLOOR, Wait, in_turns, sleep_floor};
use wake::{WakeOps, wake_lock, wake_recv, wake_row, wake_semaphore, wake_turn, wake_when};

/// The timed waits' timeout.
const TIMEOUT: Duration = Duration::from_millis(1);

/// How long the waker lets the waiter fall asleep before it wakes it.
const SETTLE: Duration = Duration::from_millis(2);

/// The busy threads of each regime.
const BUSY: [usize; 3] = [0, 4, 50];

/// The busy threads beside the throughput rows (`busy/4/...`).
const THROUGHPUT_BUSY: usize = 4;

/// The busy threads beside `busy/50/mutex-sustained/8`.
const SUSTAINED_BUSY: usize = 50;

/// The threads that take the lock in `busy/50/mutex-sustained/8`.
const SUSTAINED_THREADS: usize = 8;

/// What `busy/50/mutex-sustained/8` leaves out: its first 200 ms.
const SUSTAINED_SKIP: Duration = Duration::from_millis(200);

/// The `busy/` workloads.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    // Waits per run: at least this many, and as many as fit in `budget`.
    let waits = mode.pick(20, 100);
    let budget = mode.pick(Duration::from_millis(300), Duration::from_secs(2));
    let mut all = Vec::new();
    // The throughput rows that collapse with a little background load.
    let collapsed = ["ast/waiters/", "ast/bb-", "lf/mpsc/", "lf/mutex-contended/"];
    all.extend(
        crate::workloads::ast::workloads(mode)
            .into_iter()
            .chain(crate::workloads::lf::workloads(mode))
            .chain(crate::workloads::lf_chan::workloads(mode))
            .filter(|w| collapsed.iter().any(|p| w.meta.id.starts_with(p)))
            .map(|w| w.in_background(THROUGHPUT_BUSY)),
    );
    all.push(mutex_sustained(mode));
    for busy in BUSY {
        all.push(overshoot_lock(busy, waits, budget));
        all.push(overshoot_churned(busy, waits, budget));
        all.push(overshoot_semaphore(busy, waits, budget));
        all.push(overshoot_recv(busy, waits, budget));
        all.push(wake_lock(busy, waits, budget));
        all.push(wake_semaphore(busy, waits, budget));
        all.push(wake_recv(busy, waits, budget));
        all.push(wake_when(busy, waits, budget));
        all.extend(csp::workloads(busy, waits, budget));
    }
    all
}

/// `busy/50/mutex-sustained/8`: critical sections per second, after the
/// first 200 ms, of 8 threads taking one lock beside 50 spinning threads.
fn mutex_sustained(mode: Mode) -> Workload {
    let run = Duration::from_millis(mode.pick(300, 1_000));
    Workload::new(
        format!("busy/{SUSTAINED_BUSY}/mutex-sustained/{SUSTAINED_THREADS}"),
        Unit::MopsPerSec,
    )
    .title(format!(
        "{SUSTAINED_THREADS} threads each lock, add 1 to a shared counter and unlock, over \
         and over, beside {SUSTAINED_BUSY} threads spinning on the CPUs: critical sections \
         per second in the {} ms after the first {} ms (does the throughput hold once \
         waiters have parked?). `ast-mutex` is used as a plain mutex (one state).",
        run.as_millis(),
        SUSTAINED_SKIP.as_millis()
    ))
    .param("busy", SUSTAINED_BUSY as u64)
    .param("threads", SUSTAINED_THREADS)
    .param("skip_ms", SUSTAINED_SKIP.as_millis() as u64)
    .param("run_ms", run.as_millis() as u64)
    .regime(format!(
        "{SUSTAINED_THREADS} lock threads beside {SUSTAINED_BUSY} spinning threads: \
         oversubscribed"
    ))
    .baseline("std")
    .baseline("parking_lot")
    .implementation(
        "ast-mutex",
        sustained::<ast_mutex::AstMutex<OneState, u64>>(run),
    )
    .implementation("lockfree-sync", sustained::<lockfree_sync::Mutex<u64>>(run))
    .implementation(
        "adaptive-lock",
        sustained::<Adaptive<LearnedPolicy, u64>>(run),
    )
    .implementation("std", sustained::<std::sync::Mutex<u64>>(run))
    .implementation("parking_lot", sustained::<::parking_lot::Mutex<u64>>(run))
}

/// One thread's count of critical sections, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct PaddedCount(AtomicU64);

/// A run of `busy/50/mutex-sustained/8` on `M`: Mops/s in the `run` after
/// `SUSTAINED_SKIP`.
fn sustained<M: BenchMutex<u64>>(run: Duration) -> impl FnMut() -> f64 {
    move || {
        let _busy = sync_core::testing::BusyThreads::start(SUSTAINED_BUSY);
        let m = Arc::new(M::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<Vec<PaddedCount>> = Arc::new(
            (0..SUSTAINED_THREADS)
                .map(|_| PaddedCount::default())
                .collect(),
        );
        let handles: Vec<_> = (0..SUSTAINED_THREADS)
            .map(|i| {
                let (m, stop, counts) = (Arc::clone(&m), Arc::clone(&stop), Arc::clone(&counts));
                thread::spawn(move || {
                    let mut ops = 0u64;
                    // Relaxed: the flag and the counts order nothing; the
                    // join does.
                    while !stop.load(Ordering::Relaxed) {
                        m.with(|v| *v += 1);
                        ops += 1;
                        counts[i].0.store(ops, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let total = || -> u64 { counts.iter().map(|c| c.0.load(Ordering::Relaxed)).sum() };
        thread::sleep(SUSTAINED_SKIP);
        let (began, before) = (Instant::now(), total());
        thread::sleep(run);
        let (elapsed, during) = (began.elapsed(), total() - before);
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().expect("a lock thread panicked");
        }
        assert_eq!(m.with(|v| *v), total(), "a lost update");
        mops_per_sec(elapsed, during)
    }
}

/// The median and the 99th percentile of `v` (not empty).
fn percentile_pair(mut v: Vec<f64>) -> (f64, f64) {
    let (median, _, _) = summarize(&v);
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let p99 = v[((v.len() * 99).div_ceil(100)).saturating_sub(1)];
    (median, p99)
}

/// Milliseconds past `TIMEOUT` that `wait` (a timed wait that fails) took.
fn overshoot(wait: impl FnOnce()) -> f64 {
    let began = Instant::now();
    wait();
    (began.elapsed().saturating_sub(TIMEOUT)).as_secs_f64() * 1e3
}

/// An overshoot row, with `sleep-floor` as its reference. `what` is what
/// the wait waits on, and says whether it can succeed.
fn overshoot_row(kind: &str, what: &str, busy: usize, peer: &str) -> Row {
    let p50 = format!("busy/overshoot-p50/{kind}/{busy}");
    let p99 = format!("busy/overshoot-p99/{kind}/{busy}");
    let title = |pct: &str| {
        format!(
            "How late a 1 ms timed wait on {what} returns ({pct} of the waits, ms past the \
             deadline; 0 for one that returned in time), with {busy} threads spinning on the \
             CPUs."
        )
    };
    let workload = Workload::new(p50, Unit::Ms)
        .title(title("median"))
        .companion(p99, title("99th percentile"))
        .param("busy", busy as u64)
        .param("timeout_ms", 1)
        .regime(regime(busy))
        .baseline(peer);
    Row {
        workload,
        reference: (SLEEP_FLOOR, sleep_floor),
        waits_per_thread_set: None,
    }
}

fn regime(busy: usize) -> String {
    if busy == 0 {
        "one waiter, no background load".to_owned()
    } else {
        format!("one waiter beside {busy} spinning threads: oversubscribed")
    }
}

fn overshoot_lock(busy: usize, waits: usize, budget: Duration) -> Workload {
    // Each lock is held by the measuring thread itself, through an owned
    // guard kept with the wait.
    fn lockfree() -> Wait {
        let m = Arc::new(lockfree_sync::Mutex::new(()));
        let held = m.lock_arc();
        Box::new(move || {
            let _held = &held;
            overshoot(|| assert!(m.try_lock_for(TIMEOUT).is_none()))
        })
    }
    fn adaptive() -> Wait {
        let m = Arc::new(adaptive_lock::AdaptiveMutex::new(()));
        let held = m.lock_arc();
        Box::new(move || {
            let _held = &held;
            overshoot(|| assert!(m.try_lock_for(TIMEOUT).is_none()))
        })
    }
    fn ast() -> Wait {
        let m = Arc::new(ast_mutex::AstMutex::new(OneState::Only, ()));
        let held = m.enter_arc(OneState::Only);
        Box::new(move || {
            let _held = &held;
            overshoot(|| assert!(m.try_enter_for(OneState::Only, TIMEOUT).is_none()))
        })
    }
    fn parking_lot() -> Wait {
        let m = parking_lot::Mutex::new(());
        // Held until the mutex is dropped with the wait: parking_lot frees
        // a locked mutex.
        std::mem::forget(m.lock());
        Box::new(move || overshoot(|| assert!(m.try_lock_for(TIMEOUT).is_none())))
    }
    in_turns(
        overshoot_row(
            "lock",
            "a held lock (it cannot succeed)",
            busy,
            "parking_lot",
        ),
        &[
            ("lockfree-sync", lockfree),
            ("adaptive", adaptive),
            ("ast-mutex", ast),
            ("parking_lot", parking_lot),
        ],
        busy,
        waits,
        budget,
    )
}

/// The threads that take and release the lock of
/// `busy/overshoot-*/lock-churned/N` in a loop.
const CHURN_THREADS: usize = 8;

/// `CHURN_THREADS` threads that take and release a lock in a loop until
/// dropped.
struct Churn {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Churn {
    fn start<M: BenchMutex<()>>(m: &Arc<M>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..CHURN_THREADS)
            .map(|_| {
                let (m, stop) = (Arc::clone(m), Arc::clone(&stop));
                // Relaxed: the flag orders nothing; the join does.
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        m.with(|()| {});
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            t.join().expect("a churn thread panicked");
        }
    }
}

/// `busy/overshoot-*/lock-churned/N`: a 1 ms timed lock on a lock that
/// `CHURN_THREADS` threads take and release all the time. It may succeed;
/// what counts is that it never returns long after its deadline: a lock
/// whose timed waiter waits, to queue or to leave, for an internal lock
/// held by a preempted thread returns a scheduling round late.
fn overshoot_churned(busy: usize, waits: usize, budget: Duration) -> Workload {
    /// A churned lock of type `M`, and a wait that makes one timed lock
    /// on it with `try_for` (dropping the guard if it succeeds).
    fn churned<M: BenchMutex<()>>(try_for: fn(&M)) -> Wait {
        let m = Arc::new(M::new(()));
        let churn = Churn::start(&m);
        Box::new(move || {
            let _churn = &churn;
            overshoot(|| try_for(&m))
        })
    }
    fn lockfree() -> Wait {
        churned::<lockfree_sync::Mutex<()>>(|m| drop(m.try_lock_for(TIMEOUT)))
    }
    fn adaptive() -> Wait {
        churned::<Adaptive<LearnedPolicy, ()>>(|m| drop(m.0.try_lock_for(TIMEOUT)))
    }
    fn ast() -> Wait {
        churned::<ast_mutex::AstMutex<OneState, ()>>(|m| {
            drop(m.try_enter_for(OneState::Only, TIMEOUT));
        })
    }
    fn parking_lot() -> Wait {
        churned::<parking_lot::Mutex<()>>(|m| drop(m.try_lock_for(TIMEOUT)))
    }
    let impls: [(&'static str, MakeWait); 4] = [
        ("lockfree-sync", lockfree),
        ("adaptive", adaptive),
        ("ast-mutex", ast),
        ("parking_lot", parking_lot),
    ];
    let mut row = overshoot_row(
        "lock-churned",
        &format!("a lock that {CHURN_THREADS} other threads take and release in a loop"),
        busy,
        "parking_lot",
    );
    // Every implementation's churn threads run through every turn: each
    // is measured beside the same load.
    let churning = impls.len() * CHURN_THREADS;
    row.workload = row.workload.regime(format!(
        "one waiter beside {churning} threads churning the {} locks ({CHURN_THREADS} each) \
         and {busy} spinning threads: oversubscribed",
        impls.len()
    ));
    in_turns(row, &impls, busy, waits, budget)
}

fn overshoot_semaphore(busy: usize, waits: usize, budget: Duration) -> Workload {
    fn lockfree() -> Wait {
        let s = lockfree_sync::Semaphore::new(0);
        Box::new(move || overshoot(|| assert!(s.try_acquire_for(TIMEOUT).is_err())))
    }
    fn condvar() -> Wait {
        let s = CondvarSemaphore::new(0);
        Box::new(move || overshoot(|| assert!(!s.try_acquire_for(TIMEOUT))))
    }
    in_turns(
        overshoot_row(
            "semaphore",
            "a semaphore without permits",
            busy,
            "condvar-std",
        ),
        &[("lockfree-sync", lockfree), ("condvar-std", condvar)],
        busy,
        waits,
        budget,
    )
}

fn overshoot_recv(busy: usize, waits: usize, budget: Duration) -> Workload {
    fn empty<C: Mpsc>() -> Wait {
        let (tx, rx) = C::channel();
        Box::new(move || {
            let _tx = &tx;
            overshoot(|| assert!(C::recv_timeout(&rx, TIMEOUT).is_none()))
        })
    }
    in_turns(
        overshoot_row("recv", "an empty channel (it cannot succeed)", busy, "std"),
        &[
            ("lockfree-sync", empty::<LockfreeMpsc>),
            ("std", empty::<StdMpsc>),
            ("crossbeam", empty::<CrossbeamMpsc>),
            ("flume", empty::<FlumeMpsc>),
        ],
        busy,
        waits,
        budget,
    )
}

/// An unbounded multi-producer channel with a timed receive.
trait Mpsc: 'static {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn channel() -> (Self::Tx, Self::Rx);
    fn send(tx: &Self::Tx);
    fn recv(rx: &Self::Rx);
    /// `None` on timeout.
    fn recv_timeout(rx: &Self::Rx, timeout: Duration) -> Option<()>;
}

struct LockfreeMpsc;
struct StdMpsc;
struct CrossbeamMpsc;
struct FlumeMpsc;

/// The four channels share their method names (but for the timed receive:
/// lockfree-sync's is `try_recv_for`); only the types differ.
macro_rules! mpsc {
    ($name:ident, $tx:ty, $rx:ty, $channel:expr) => {
        mpsc!($name, $tx, $rx, $channel, recv_timeout);
    };
    ($name:ident, $tx:ty, $rx:ty, $channel:expr, $timed:ident) => {
        impl Mpsc for $name {
            type Tx = $tx;
            type Rx = $rx;
            fn channel() -> (Self::Tx, Self::Rx) {
                $channel
            }
            fn send(tx: &Self::Tx) {
                tx.send(()).expect("receiver alive");
            }
            fn recv(rx: &Self::Rx) {
                rx.recv().expect("sender alive");
            }
            fn recv_timeout(rx: &Self::Rx, timeout: Duration) -> Option<()> {
                rx.$timed(timeout).ok()
            }
        }
    };
}

mpsc!(
    LockfreeMpsc,
    lockfree_sync::mpsc::Sender<()>,
    lockfree_sync::mpsc::Receiver<()>,
    lockfree_sync::mpsc::channel(),
    try_recv_for
);
mpsc!(
    StdMpsc,
    std::sync::mpsc::Sender<()>,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::channel()
);
mpsc!(
    CrossbeamMpsc,
    crossbeam_channel::Sender<()>,
    crossbeam_channel::Receiver<()>,
    crossbeam_channel::unbounded()
);
mpsc!(
    FlumeMpsc,
    flume::Sender<()>,
    flume::Receiver<()>,
    flume::unbounded()
);
