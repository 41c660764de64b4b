//! A service's pipeline across the family: monitor -> semaphore (a lease
//! pool) -> mpsc -> csp -> monitor, with threads and tokio tasks (current-
//! thread and multi-thread runtimes), values whose `Drop` gives a permit
//! back and calls a monitor (a lease), fire-and-forget results nobody
//! takes, beside busy threads, optionally with panics in every stage's
//! callbacks. At the end every value was dropped exactly once, every
//! permit and lease came back, and nothing hung (watchdog). Each runs for
//! `SYNC_SOAK_MINUTES` (`cargo xtask soak`), at least 3 s:
//! `cargo test -p active-monitor --release --test pipeline_soak -- --ignored`.
#![cfg(not(loom))]
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use active_monitor::{Monitor, Order};
use lockfree_sync::{ArcSemaphorePermit, Semaphore};
use sync_core::testing::{BusyThreads, ended_within};

const POOL: usize = 6;

/// Everything the pipeline counts.
struct Books {
    made: AtomicU64,
    dropped: Mutex<HashSet<u64>>,
    double: AtomicU64,
    /// Items dropped on an `active-monitor-deliver` thread (a park in a
    /// body run for another thread handed them on).
    elsewhere: AtomicU64,
    /// Whether the user callbacks panic now and then (set per run).
    panics: AtomicBool,
}

fn books() -> &'static Books {
    static B: std::sync::OnceLock<Books> = std::sync::OnceLock::new();
    B.get_or_init(|| Books {
        made: AtomicU64::new(0),
        dropped: Mutex::new(HashSet::new()),
        double: AtomicU64::new(0),
        elsewhere: AtomicU64::new(0),
        panics: AtomicBool::new(false),
    })
}

/// A rare panic of a user callback, when panics are on.
fn maybe_panic(what: &str, id: u64, every: u64) {
    if books().panics.load(SeqCst) && id % every == every - 1 {
        panic!("injected: {what}");
    }
}

/// A lease returned to a pool monitor on drop.
struct Lease(Arc<Monitor<u64>>);
impl Drop for Lease {
    fn drop(&mut self) {
        self.0.call(|n| *n += 1);
    }
}

/// The pipeline's value: a permit of the pool and a lease of the monitor.
struct Item {
    id: u64,
    _permit: ArcSemaphorePermit,
    _lease: Lease,
}

impl Item {
    fn new(permit: ArcSemaphorePermit, leases: &Arc<Monitor<u64>>) -> Self {
        let id = books().made.fetch_add(1, SeqCst);
        Item {
            id,
            _permit: permit,
            _lease: Lease(Arc::clone(leases)),
        }
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        if !books().dropped.lock().unwrap().insert(self.id) {
            books().double.fetch_add(1, SeqCst);
        }
        if std::thread::current().name() == Some("active-monitor-deliver") {
            books().elsewhere.fetch_add(1, SeqCst);
        }
        // The fields (the permit, the lease) drop after, even so.
        maybe_panic("item drop", self.id, 97);
    }
}

#[derive(Default)]
struct Sink {
    count: u64,
}

fn run(busy: usize, panics: bool, run_for: Duration) {
    sync_core::testing::quiet_panics_starting_with("injected");
    books().panics.store(panics, SeqCst);
    // The books are the process's: this run's part (one run at a time).
    let made_before = books().made.load(SeqCst);
    let dropped_before = books().dropped.lock().unwrap().len() as u64;
    let elsewhere_before = books().elsewhere.load(SeqCst);
    let _busy = (busy > 0).then(|| BusyThreads::start(busy));
    let pool = Arc::new(Semaphore::new(POOL));
    let leases = Arc::new(Monitor::new(0u64));
    let source = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let sink = Arc::new(Monitor::new(Sink::default()));
    let gate = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let adaptive = Arc::new(adaptive_lock::AdaptiveMutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = lockfree_sync::mpsc::channel::<Item>();
    let (mut csp_tx, mut csp_rx) = lockfree_sync::csp::channel::<Item>();
    let sent = Arc::new(AtomicU64::new(0));

    // Stage 1, threads: a monitor body takes a lease (waits on the
    // semaphore inside the body), sometimes a fire-and-forget result.
    let producer = |k: u64| {
        let (pool, leases, source, gate, adaptive, stop, tx, sent) = (
            pool.clone(),
            leases.clone(),
            source.clone(),
            gate.clone(),
            adaptive.clone(),
            stop.clone(),
            tx.clone(),
            sent.clone(),
        );
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                i += 1;
                let r = catch_unwind(AssertUnwindSafe(|| {
                    let (pool2, leases2, adaptive2) =
                        (pool.clone(), leases.clone(), adaptive.clone());
                    let item = source.call(move |n| {
                        *n += 1;
                        *adaptive2.lock() += 1;
                        let permit = pool2.acquire_arc().expect("open");
                        maybe_panic("stage 1 body", *n, 89);
                        Item::new(permit, &leases2)
                    });
                    // A result nobody takes: kept, then returned. Its
                    // permit is taken here: a body that waits for one
                    // while its serve keeps results of the same monitor
                    // waits for ever (a documented limit).
                    if let Some(permit) =
                        (i % 7 == k).then(|| pool.try_acquire_arc().ok()).flatten()
                    {
                        let leases2 = leases.clone();
                        drop(gate.when(
                            move |g: &u64| {
                                maybe_panic("precondition", *g, 113);
                                true
                            },
                            move |g| {
                                *g += 1;
                                Item::new(permit, &leases2)
                            },
                        ));
                    }
                    if tx.send(item).is_ok() {
                        sent.fetch_add(1, SeqCst);
                    }
                }));
                drop(r);
            }
        })
    };
    let producers: Vec<_> = (0..3).map(producer).collect();

    // Stage 1, tokio tasks on a multi-thread runtime.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a runtime");
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (pool, leases, source, stop, tx, sent) = (
                pool.clone(),
                leases.clone(),
                source.clone(),
                stop.clone(),
                tx.clone(),
                sent.clone(),
            );
            rt.spawn(async move {
                while !stop.load(SeqCst) {
                    // The permit after the monitor, as the threads take
                    // them (the other order is a lock-order inversion).
                    let n = source
                        .call_async(|n| {
                            *n += 1;
                            *n
                        })
                        .await;
                    let permit = pool.acquire_arc_async().await.expect("open");
                    let item = Item::new(permit, &leases);
                    maybe_panic("task item", n, 1_000_000_007);
                    if tx.send(item).is_ok() {
                        sent.fetch_add(1, SeqCst);
                    }
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();

    // Stage 2: mpsc -> csp, on a current-thread runtime.
    let relay = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let mut rx = rx;
        rt.block_on(async move {
            while let Ok(item) = rx.recv_async().await {
                if let Err(e) = csp_tx.send_async(item).await {
                    drop(e);
                    break;
                }
            }
        });
    });

    // Stage 3: csp -> a monitor body that consumes it.
    let consumer = {
        let sink = sink.clone();
        std::thread::spawn(move || {
            while let Ok(item) = csp_rx.recv() {
                let r = catch_unwind(AssertUnwindSafe(|| {
                    sink.call(move |s| {
                        s.count += 1;
                        // Not before: an item dropped by that unwind whose
                        // own drop panics aborts (Rust's rule).
                        drop(item);
                        maybe_panic("stage 3 body", s.count, 83);
                    })
                }));
                drop(r);
            }
        })
    };

    std::thread::sleep(run_for);
    stop.store(true, SeqCst);
    for p in producers {
        p.join().expect("a producer");
    }
    for t in tasks {
        rt.block_on(t).expect("a task");
    }
    drop(tx);
    relay.join().expect("the relay");
    consumer.join().expect("the consumer");
    // The kept results went at the operations' ends, or to a deliver
    // thread of their own (detached: give them time).
    let made = books().made.load(SeqCst) - made_before;
    let deadline = Instant::now() + Duration::from_secs(30);
    while (books().dropped.lock().unwrap().len() as u64 - dropped_before < made
        || pool.available_permits() != POOL)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let dropped = books().dropped.lock().unwrap().len() as u64 - dropped_before;
    assert_eq!(books().double.load(SeqCst), 0, "an item dropped twice");
    assert_eq!(made, dropped, "items lost");
    assert_eq!(leases.call(|n| *n), made, "leases lost or returned twice");
    assert_eq!(pool.available_permits(), POOL, "permits lost");
    eprintln!(
        "made {made}, sent {}, consumed {}, {} dropped on a deliver thread",
        sent.load(SeqCst),
        sink.call(|s| s.count),
        books().elsewhere.load(SeqCst) - elsewhere_before
    );
}

fn watched(busy: usize, panics: bool) {
    // One run at a time: the books are the process's.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let run_for = sync_core::testing::soak_duration().max(Duration::from_secs(3));
    let start = Instant::now();
    let t = std::thread::spawn(move || run(busy, panics, run_for));
    let ended = ended_within(run_for + Duration::from_secs(60), t);
    assert_eq!(
        ended,
        Some(true),
        "hung or failed after {:?}",
        start.elapsed()
    );
}

#[test]
#[ignore = "soak: run with --ignored"]
fn pipeline_idle() {
    watched(0, false);
}

#[test]
#[ignore = "soak: run with --ignored"]
fn pipeline_beside_50_busy_threads() {
    watched(50, false);
}

#[test]
#[ignore = "soak: run with --ignored"]
fn pipeline_with_panics_idle() {
    watched(0, true);
}

#[test]
#[ignore = "soak: run with --ignored"]
fn pipeline_with_panics_beside_50_busy_threads() {
    watched(50, true);
}
