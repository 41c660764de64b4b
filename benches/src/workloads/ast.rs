//! `ast/`: paper 000 (Ohki & Kuno, AST-sync), tables 3-8, plus the cost of
//! parked bystanders, the spin limit, and the bounded buffer on async tasks
//! (`ast/bb-tasks`: `enter_async` against tokio's Mutex with Notify).
//!
//! `(Nw x Cw : Nr x Cr)` is the paper's notation: Nw putters putting Cw
//! items each, Nr getters getting Cr each; the watermarked buffer adds
//! marginal putters in the middle. Every sample spawns the threads, starts
//! them together and times until the last one finishes; `harness-floor`
//! does that with no buffer at all (its puts and gets return at once), the
//! part of every sample that no buffer can save.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use ast_mutex::{AstMutex, Config, WakeMode};

use crate::peers::OneState;
use crate::workloads::base::uncontended;

use crate::buffers::{
    AstBuffer, AstLike, Buffer, CAP, CondvarBuffer, HarnessFloor, Level, PlMonitor, PortableAst,
    RepeatedTests, StdMonitor, level, not_empty, not_full,
};
use crate::harness::{Mode, Unit, Workload, ms};

/// Who moves how many items.
#[derive(Clone, Copy, Debug)]
struct Mix {
    putters: (usize, usize),
    marginal: (usize, usize),
    getters: (usize, usize),
}

impl Mix {
    fn notation(&self) -> String {
        let (p, m, g) = (self.putters, self.marginal, self.getters);
        if m.0 == 0 {
            format!("{}x{}:{}x{}", p.0, p.1, g.0, g.1)
        } else {
            format!("{}x{}:{}x{}:{}x{}", p.0, p.1, m.0, m.1, g.0, g.1)
        }
    }

    fn items(&self) -> usize {
        self.getters.0 * self.getters.1
    }
}

const STACK: usize = 256 * 1024;

/// Runs the mix on `b` and returns the time from the moment the last thread
/// is ready until the last one finishes. Threads meet at a yielding barrier
/// and stamp their own finish, so neither waking them nor joining them is
/// timed.
fn transfer<B: Buffer>(b: &Arc<B>, mix: Mix) -> Duration {
    let (p, m, g) = (mix.putters, mix.marginal, mix.getters);
    assert_eq!(
        p.0 * p.1 + m.0 * m.1,
        g.0 * g.1,
        "puts and gets must balance"
    );
    let n = p.0 + m.0 + g.0;
    let start = Arc::new(StartLine::new(n));
    let spawn = |f: Box<dyn FnOnce(&B) + Send>| {
        let (b, start) = (Arc::clone(b), Arc::clone(&start));
        thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || {
                start.wait();
                f(&b);
                Instant::now()
            })
            .expect("spawn a benchmark thread")
    };
    let mut threads = Vec::with_capacity(n);
    for t in 0..p.0 {
        threads.push(spawn(Box::new(move |b| {
            (0..p.1).for_each(|i| b.put((t * p.1 + i) as u64))
        })));
    }
    for t in 0..m.0 {
        threads.push(spawn(Box::new(move |b| {
            (0..m.1).for_each(|i| b.put_marginal((t * m.1 + i) as u64))
        })));
    }
    for _ in 0..g.0 {
        threads.push(spawn(Box::new(move |b| {
            (0..g.1).for_each(|_| {
                std::hint::black_box(b.get());
            })
        })));
    }
    let end = threads
        .into_iter()
        .map(|t| t.join().expect("a benchmark thread panicked"))
        .max()
        .expect("at least one thread");
    end - start.started()
}

/// Runs `work(i)` on `n` threads started together; returns the time from
/// the start until the last one finished.
pub(crate) fn run_threads<S: Send + Sync + 'static>(
    shared: &Arc<S>,
    n: usize,
    work: impl Fn(&S, usize) + Copy + Send + 'static,
) -> Duration {
    let start = Arc::new(StartLine::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (shared, start) = (Arc::clone(shared), Arc::clone(&start));
            thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    start.wait();
                    work(&shared, i);
                    Instant::now()
                })
                .expect("spawn a benchmark thread")
        })
        .collect();
    let end = handles
        .into_iter()
        .map(|h| h.join().expect("a benchmark thread panicked"))
        .max()
        .expect("one thread at least");
    end - start.started()
}

/// A barrier whose last arrival records the start time; waiters yield.
pub(crate) struct StartLine {
    arrived: AtomicUsize,
    n: usize,
    at: OnceLock<Instant>,
}

impl StartLine {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            arrived: AtomicUsize::new(0),
            n,
            at: OnceLock::new(),
        }
    }

    pub(crate) fn wait(&self) {
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.at.get_or_init(Instant::now);
        }
        while self.at.get().is_none() {
            thread::yield_now();
        }
    }

    pub(crate) fn started(&self) -> Instant {
        *self.at.get().expect("every thread passed the start line")
    }
}

fn sample<B: Buffer>(make: impl Fn() -> B + 'static, mix: Mix) -> impl FnMut() -> f64 {
    move || ms(transfer(&Arc::new(make()), mix))
}

fn ast(
    mode: WakeMode,
) -> impl Fn() -> AstBuffer<ast_mutex::AstMutex<crate::buffers::Level, std::collections::VecDeque<u64>>>
{
    move || AstBuffer::with_config(Config::new().wake_mode(mode))
}

/// A bounded-buffer workload with every implementation that can express it.
fn buffer_workload(id: &str, title: &str, mix: Mix, watermark: bool, paper: &str) -> Workload {
    let mut w = Workload::new(id, Unit::Ms)
        .title(format!("{title} `({})`, capacity 10.", mix.notation()))
        .param("mix", mix.notation())
        .param("items", mix.items())
        .param("capacity", crate::buffers::CAP)
        .baseline("repeated-tests-std")
        .paper(paper)
        .implementation("ast-mutex", sample(ast(WakeMode::Compete), mix))
        .implementation("ast-mutex-handoff", sample(ast(WakeMode::Handoff), mix))
        .implementation(
            "ast-mutex-restricted",
            sample(
                move || AstBuffer::with_config(Config::new().watchers(1)),
                mix,
            ),
        );
    if !watermark {
        w = w
            .baseline("condvar-std")
            .baseline("condvar-parking_lot")
            .implementation("condvar-std", sample(CondvarBuffer::<StdMonitor>::new, mix))
            .implementation(
                "condvar-parking_lot",
                sample(CondvarBuffer::<PlMonitor>::new, mix),
            );
    }
    w.implementation(
        "repeated-tests-std",
        sample(RepeatedTests::<StdMonitor>::new, mix),
    )
    .implementation(
        "repeated-tests-parking_lot",
        sample(RepeatedTests::<PlMonitor>::new, mix),
    )
    .implementation(
        "portable-ast",
        sample(|| AstBuffer(PortableAst::new()), mix),
    )
    // Not a buffer: the cost of the threads alone, which every row pays.
    .implementation("harness-floor", sample(|| HarnessFloor, mix))
}

/// How long after its start a sample of `ast/waiters/*` begins to measure,
/// whatever its number of bystanders. Spawning and queueing a thousand of
/// them takes a few hundred milliseconds and none takes a few; beside busy
/// threads (which start with the sample) the pair's time depends on how
/// long those have run, and a pause alone, or threads parked on a std
/// `Condvar` that the buffer never sees, moved `busy/4/ast/waiters/0` by
/// as much as the bystanders did. From a common start, the rows differ by
/// the bystanders only.
const BYSTANDERS_SETTLE: Duration = Duration::from_millis(400);

/// Where the bystanders of `ast/waiters/*` wait.
#[derive(Clone, Copy)]
enum Bystanders {
    /// On the buffer, for a state that never comes.
    OnTheBuffer,
    /// On a std `Condvar` that the buffer never sees: what that many
    /// parked threads cost the process, whichever lock they wait on.
    Elsewhere,
}

/// `N` bystanders parked on a state that never comes (or elsewhere) while
/// one putter and one getter move `items` through the buffer: the mean time
/// of a batch of `items`, over as many batches as fill `at_least` (at least
/// one), with the same parked bystanders. A batch can be shorter than a
/// scheduling round (beside busy threads, `busy/4/ast/waiters/*`), and a
/// sample that holds one batch then measures whether a round fell inside
/// it; every sample holds several rounds.
fn with_bystanders<A: AstLike>(
    make: impl Fn() -> AstBuffer<A> + 'static,
    bystanders: usize,
    items: usize,
    at_least: Duration,
    place: Bystanders,
) -> impl FnMut() -> f64 {
    move || {
        let began = Instant::now();
        let b = Arc::new(make());
        // Elsewhere: a gate, and how many wait at it.
        let gate = Arc::new((Mutex::new((false, 0usize)), Condvar::new()));
        let parked: Vec<_> = (0..bystanders)
            .map(|_| {
                let b = Arc::clone(&b);
                let gate = Arc::clone(&gate);
                thread::Builder::new()
                    .stack_size(STACK)
                    .spawn(move || match place {
                        Bystanders::OnTheBuffer => b.wait_for_never(),
                        Bystanders::Elsewhere => {
                            let (lock, cv) = &*gate;
                            let mut g = lock.lock().expect("the gate");
                            g.1 += 1;
                            while !g.0 {
                                g = cv.wait(g).expect("the gate");
                            }
                        }
                    })
                    .expect("spawn a bystander")
            })
            .collect();
        // Let them reach their wait and park (each watches for a few
        // microseconds first): until they are queued where the lock tells.
        let fallback = Duration::from_millis(20) + Duration::from_micros(100) * bystanders as u32;
        match place {
            Bystanders::OnTheBuffer => b.until_queued(bystanders, fallback),
            Bystanders::Elsewhere => {
                let (lock, cv) = &*gate;
                let g = lock.lock().expect("the gate");
                let _g = cv
                    .wait_timeout_while(g, fallback * 10, |g| g.1 < bystanders)
                    .expect("the gate");
            }
        }
        // Every sample measures from the same moment after it began,
        // whatever the number of bystanders (see `BYSTANDERS_SETTLE`).
        if let Some(left) = BYSTANDERS_SETTLE.checked_sub(began.elapsed()) {
            thread::sleep(left);
        }
        let mix = Mix {
            putters: (1, items),
            marginal: (0, 0),
            getters: (1, items),
        };
        let (mut elapsed, mut batches) = (Duration::ZERO, 0u32);
        while batches == 0 || elapsed < at_least {
            elapsed += transfer(&b, mix);
            batches += 1;
        }
        match place {
            // Each released bystander passes `Never` on to the next.
            Bystanders::OnTheBuffer => b.release_never(),
            Bystanders::Elsewhere => {
                gate.0.lock().expect("the gate").0 = true;
                gate.1.notify_all();
            }
        }
        parked
            .into_iter()
            .for_each(|t| t.join().expect("a bystander panicked"));
        ms(elapsed) / f64::from(batches)
    }
}

/// The `ast/` workloads.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    // The regime is the number of threads a side, so the sizes shrink the
    // items per thread, never the threads: quick mode runs 50 a side (the
    // issue's probe, where condition variables already suffer on 2 cores),
    // full mode the paper's 500 a side (tables 3-6: 500x100). At 500 a side
    // the broadcasting implementations take about 1.5 ms an item here, so
    // full mode moves 10 items per thread (5000 in all) to keep `--full
    // --only ast/` within about 10 minutes.
    let (a_side, per) = mode.pick((50, 200), (500, 10));
    let small = Mix {
        putters: (a_side, per),
        marginal: (0, 0),
        getters: (a_side, per),
    };
    let large = Mix {
        putters: (a_side, per),
        marginal: (0, 0),
        getters: (1, a_side * per),
    };
    let wm_small = Mix {
        putters: (a_side / 2, per),
        marginal: (a_side / 2, per),
        getters: (a_side, per),
    };
    let wm_large = Mix {
        putters: (a_side / 2, per),
        marginal: (a_side / 2, per),
        getters: (1, a_side * per),
    };
    let ops = mode.pick(2_000_000, 20_000_000);
    let mut all = vec![
        Workload::new("ast/uncontended", Unit::NsPerOp)
            .title(
                "One enter plus exit by a single thread, no waiters: the fast path, \
                 against a plain mutex's lock plus unlock.",
            )
            .param("ops", ops)
            .baseline("parking_lot")
            .implementation("ast-mutex", uncontended::<AstMutex<OneState, u64>>(ops))
            .implementation("parking_lot", uncontended::<::parking_lot::Mutex<u64>>(ops))
            .implementation("std", uncontended::<std::sync::Mutex<u64>>(ops)),
        buffer_workload(
            "ast/bb-small",
            "Bounded buffer, as many getters as putters",
            small,
            false,
            "table 3 (500x100:500x100, elapsed s, FreeBSD, 2 CPUs): cond. vars 7.16, \
             repeated tests 20.26, portable AST 19.91, kernel AST 6.41; kernel AST = \
             0.32x repeated tests, 0.90x cond. vars.",
        ),
        buffer_workload(
            "ast/bb-large",
            "Bounded buffer, many putters, one getter",
            large,
            false,
            "table 4 (500x100:1x50000, elapsed s): cond. vars 5.80, repeated tests \
             16.99, portable AST 17.40, kernel AST 5.75; kernel AST = 0.34x repeated \
             tests, 0.99x cond. vars.",
        ),
        buffer_workload(
            "ast/wm-small",
            "Watermarked buffer: putters, marginal putters (only below half full), getters",
            wm_small,
            true,
            "table 5 (250x100:250x100:500x100, elapsed s): repeated tests 27.83, \
             portable AST 26.19, kernel AST 6.38; kernel AST = 0.23x repeated tests.",
        ),
        buffer_workload(
            "ast/wm-large",
            "Watermarked buffer, one getter",
            wm_large,
            true,
            "table 6 (250x100:250x100:1x50000, elapsed s): repeated tests 19.82, \
             portable AST 18.27, kernel AST 5.83; kernel AST = 0.29x repeated tests.",
        ),
    ];

    // The portable AST wakes every bystander on every exit: about 7 ms an
    // item with 1000 of them here (a sample of 2000 items took 14 s), so
    // the items stay few; the regime is the number of bystanders.
    let items = mode.pick(500, 1_000);
    // Batches per sample: enough for several scheduling rounds of the
    // busy/ variants' background threads.
    let at_least = mode.pick(Duration::from_millis(100), Duration::from_millis(300));
    for n in [0, 10, 100, 1000] {
        all.push(
            Workload::new(format!("ast/waiters/{n}"), Unit::Ms)
                .title(format!(
                    "{n} threads parked on a state that never comes while one putter and \
                     one getter move {items} items (the mean of the batches that fill \
                     {at_least:?}): an exit must not pay for them."
                ))
                .param("bystanders", n)
                .param("items", items)
                .param("sample_at_least_ms", at_least.as_millis() as u64)
                .implementation(
                    "ast-mutex",
                    with_bystanders(
                        ast(WakeMode::Compete),
                        n,
                        items,
                        at_least,
                        Bystanders::OnTheBuffer,
                    ),
                )
                .implementation(
                    "portable-ast",
                    with_bystanders(
                        || AstBuffer(PortableAst::new()),
                        n,
                        items,
                        at_least,
                        Bystanders::OnTheBuffer,
                    ),
                )
                // Not a buffer's bystanders: the same ast-mutex pair beside
                // `n` threads parked on a std `Condvar`, so that the cost of
                // parked threads to the process shows apart from an exit's.
                .implementation(
                    "parked-elsewhere",
                    with_bystanders(
                        ast(WakeMode::Compete),
                        n,
                        items,
                        at_least,
                        Bystanders::Elsewhere,
                    ),
                ),
        );
    }

    // How long to watch before parking, around the defaults (bb-large: the
    // oversubscribed case, where it matters most).
    let sweep = |dim: &str, n: u32, config: Config| {
        Workload::new(format!("ast/{dim}/{n}"), Unit::Ms)
            .title(format!(
                "`ast/bb-large` with waiters that watch the lock word with {n} {dim} before \
                 they park (defaults: {} spins, {} yields).",
                ast_mutex::DEFAULT_SPINS,
                ast_mutex::DEFAULT_YIELDS
            ))
            .param(dim, n)
            .param("mix", large.notation())
            .implementation(
                "ast-mutex",
                sample(move || AstBuffer::with_config(config), large),
            )
    };
    for spins in [0, 16, 256, 4096] {
        all.push(sweep("spins", spins, Config::new().spins(spins)));
    }
    for yields in [0, 4, 16, 64, 256] {
        all.push(sweep("yields", yields, Config::new().yields(yields)));
    }
    let (producers, per) = mode.pick((16, 500), (250, 400));
    // The same buffer on both of tokio's schedulers: on a current-thread
    // runtime a task woken to compete runs only when the tasks ahead of it
    // in the run queue have yielded, so the wake modes trade differently.
    for (id, on, regime, runtime) in [
        (
            "ast/bb-tasks",
            "a 2-worker tokio runtime",
            "2 worker threads",
            two_workers as fn() -> tokio::runtime::Runtime,
        ),
        (
            "ast/bb-tasks-current-thread",
            "tokio's current-thread runtime",
            "one thread (current-thread runtime)",
            current_thread,
        ),
    ] {
        all.push(
            Workload::new(id, Unit::Ms)
                .title(format!(
                    "The bounded buffer (capacity {CAP}) on tasks: {producers} putter tasks \
                     putting {per} items each to one getter task on {on}; `enter_async` \
                     against tokio's Mutex with two Notify (a condition variable pair for \
                     tasks)."
                ))
                .param("mix", format!("{producers}x{per}:1x{}", producers * per))
                .regime(format!("{} tasks on {regime}", producers + 1))
                .implementation(
                    "ast-mutex",
                    tasks_ast(runtime, WakeMode::Compete, producers, per),
                )
                .implementation(
                    "ast-mutex-handoff",
                    tasks_ast(runtime, WakeMode::Handoff, producers, per),
                )
                .implementation("tokio-notify", tasks_tokio(runtime, producers, per)),
        );
    }
    all
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("build a tokio runtime")
}

fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("build a tokio runtime")
}

/// `ast/bb-tasks` on an `AstMutex`: tasks wait with `enter_arc_async`.
fn tasks_ast(
    runtime: fn() -> tokio::runtime::Runtime,
    mode: WakeMode,
    producers: u64,
    per: u64,
) -> impl FnMut() -> f64 {
    let rt = runtime();
    move || {
        let config = Config::new().wake_mode(mode);
        let b = Arc::new(AstMutex::with_config(
            Level::Empty,
            VecDeque::with_capacity(CAP),
            config,
        ));
        let start = Instant::now();
        let sum = rt.block_on(async {
            let putters: Vec<_> = (0..producers)
                .map(|p| {
                    let b = Arc::clone(&b);
                    tokio::spawn(async move {
                        for i in 0..per {
                            let mut g = b.enter_arc_async(not_full()).await;
                            g.push_back(p * per + i);
                            let next = level(g.len());
                            g.exit(next);
                        }
                    })
                })
                .collect();
            let getter = {
                let b = Arc::clone(&b);
                tokio::spawn(async move {
                    let mut sum = 0;
                    for _ in 0..producers * per {
                        let mut g = b.enter_arc_async(not_empty()).await;
                        sum += g.pop_front().expect("not empty");
                        let next = level(g.len());
                        g.exit(next);
                    }
                    sum
                })
            };
            for p in putters {
                p.await.expect("a putter panicked");
            }
            getter.await.expect("the getter panicked")
        });
        let elapsed = start.elapsed();
        assert_eq!(sum, (0..producers * per).sum::<u64>(), "every item once");
        ms(elapsed)
    }
}

/// `ast/bb-tasks` on tokio's Mutex with a `Notify` per condition.
fn tasks_tokio(
    runtime: fn() -> tokio::runtime::Runtime,
    producers: u64,
    per: u64,
) -> impl FnMut() -> f64 {
    use tokio::sync::{Mutex, Notify};
    struct Shared {
        q: Mutex<VecDeque<u64>>,
        not_full: Notify,
        not_empty: Notify,
    }
    let rt = runtime();
    move || {
        let b = Arc::new(Shared {
            q: Mutex::new(VecDeque::with_capacity(CAP)),
            not_full: Notify::new(),
            not_empty: Notify::new(),
        });
        let start = Instant::now();
        let sum = rt.block_on(async {
            let putters: Vec<_> = (0..producers)
                .map(|p| {
                    let b = Arc::clone(&b);
                    tokio::spawn(async move {
                        for i in 0..per {
                            loop {
                                let mut q = b.q.lock().await;
                                if q.len() < CAP {
                                    q.push_back(p * per + i);
                                    drop(q);
                                    b.not_empty.notify_one();
                                    break;
                                }
                                // A `notify_one` that comes before
                                // this waits is kept as a permit.
                                let wait = b.not_full.notified();
                                drop(q);
                                wait.await;
                            }
                        }
                    })
                })
                .collect();
            let getter = {
                let b = Arc::clone(&b);
                tokio::spawn(async move {
                    let mut sum = 0;
                    for _ in 0..producers * per {
                        loop {
                            let mut q = b.q.lock().await;
                            if let Some(x) = q.pop_front() {
                                drop(q);
                                b.not_full.notify_one();
                                sum += x;
                                break;
                            }
                            let wait = b.not_empty.notified();
                            drop(q);
                            wait.await;
                        }
                    }
                    sum
                })
            };
            for p in putters {
                p.await.expect("a putter panicked");
            }
            getter.await.expect("the getter panicked")
        });
        let elapsed = start.elapsed();
        assert_eq!(sum, (0..producers * per).sum::<u64>(), "every item once");
        ms(elapsed)
    }
}
