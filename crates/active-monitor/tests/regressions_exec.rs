//! Regressions found by an independent review of the execution code
//! (server, saturation, hand-over); the stranded-producer and waker tests
//! failed before their fixes. Each detects a hang with a watchdog instead
//! of hanging.
#![cfg(not(loom))]

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::mpsc;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::Duration;

use active_monitor::{__test_set_saturation_override, Monitor, Order, Served, set_server_limit};

fn serial(sat: Option<bool>) -> MutexGuard<'static, ()> {
    let g = sync_core::testing::one_at_a_time();
    set_server_limit(1000);
    __test_set_saturation_override(sat);
    g
}

/// Runs `f` on a thread; `Err` if it has not returned within `secs`.
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> Result<R, ()> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).map_err(|_| ())
}

/// A served monitor whose capacity is below the batch (4 < 5): producers
/// that wait for space are woken only by `wake_space` every `batch` tasks
/// of a server stint; `release` (server mode) never wakes them.
#[test]
fn served_small_queue_producers_are_not_stranded() {
    let _g = serial(Some(false));
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(4)
        .build_served(0u64);
    assert!(m.has_server());
    let d = producers_finished(&m, 20_000);
    assert_eq!(
        d, 3,
        "producers stranded: {d}/3 finished after 10 s; monitor: {m:?}"
    );
    assert_eq!(m.call(|n| *n), 60_000);
}

/// Same with batch(64) and capacity 64 (drained from full, the only
/// `wake_space` of a stint may come while the queue is more than half full).
#[test]
fn served_batch_equal_capacity_producers_are_not_stranded() {
    let _g = serial(Some(false));
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(64)
        .batch(64)
        .build_served(0u64);
    let d = producers_finished(&m, 50_000);
    assert_eq!(
        d, 3,
        "producers stranded: {d}/3 finished after 10 s; monitor: {m:?}"
    );
}

/// Three threads submit `each` increments apiece to `m`; returns how many
/// of them finished within 10 s (3, unless producers waiting for space
/// were stranded). Joins them when all finished.
fn producers_finished(m: &Served<u64>, each: u64) -> usize {
    let done = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let m = m.clone();
            let done = Arc::clone(&done);
            thread::spawn(move || {
                for _ in 0..each {
                    m.submit(|n| *n += 1);
                }
                done.fetch_add(1, SeqCst);
            })
        })
        .collect();
    for _ in 0..100 {
        if done.load(SeqCst) == 3 {
            for h in hs {
                h.join().unwrap();
            }
            return 3;
        }
        thread::sleep(Duration::from_millis(100));
    }
    done.load(SeqCst)
}

struct PanicWaker;
impl Wake for PanicWaker {
    fn wake(self: Arc<Self>) {
        panic!("hostile waker");
    }
}

/// An async producer waiting for space whose waker panics: the server's
/// `wake_space` (outside any guard) unwinds the server thread while it
/// holds the monitor.
#[test]
fn a_panicking_space_waker_does_not_kill_the_server() {
    let _g = serial(Some(false));
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(8)
        .build_served(0u64);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let started = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&started);
    let _blocker = m.submit(move |_| {
        s2.store(true, SeqCst);
        let _ = go_rx.recv();
    });
    fill_behind_a_panicking_space_waker(&m, &started);
    go_tx.send(()).unwrap();
    thread::sleep(Duration::from_millis(200));
    let m2 = m.clone();
    let r = within(5, move || m2.call(|n| *n));
    assert!(r.is_ok(), "call hangs after a space waker panicked: {m:?}");
}

/// Same on a combining monitor: a combiner's `release` -> `wake_space`
/// unwinds with the lock taken back.
#[test]
fn a_panicking_space_waker_does_not_leave_a_combining_monitor_locked() {
    let _g = serial(None);
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(8)
            .build(0u64),
    );
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let started = Arc::new(AtomicBool::new(false));
    let s2 = Arc::clone(&started);
    let m1 = Arc::clone(&m);
    let combiner = thread::spawn(move || {
        m1.submit(move |_| {
            s2.store(true, SeqCst);
            let _ = go_rx.recv();
        });
    });
    fill_behind_a_panicking_space_waker(&m, &started);
    go_tx.send(()).unwrap();
    let res = combiner.join();
    eprintln!("combiner ended: panicked = {}", res.is_err());
    let m2 = Arc::clone(&m);
    let r = within(5, move || m2.call(|n| *n));
    assert!(r.is_ok(), "call hangs after a space waker panicked: {m:?}");
}

/// Once the task blocking `m` has `started`, fills its queue (capacity 8)
/// and leaves an async producer waiting for space whose waker panics (the
/// future is leaked, so it stays registered).
fn fill_behind_a_panicking_space_waker(m: &Monitor<u64>, started: &AtomicBool) {
    while !started.load(SeqCst) {
        thread::yield_now();
    }
    for _ in 0..8 {
        m.submit(|n| *n += 1);
    }
    let waker = Waker::from(Arc::new(PanicWaker));
    let mut cx = Context::from_waker(&waker);
    let mut fut = Box::pin(m.submit_async(|n| *n += 100));
    assert!(fut.as_mut().poll(&mut cx).is_pending(), "queue not full?");
    core::mem::forget(fut);
}

/// Saturation flipping from true to false while a combiner (saturated
/// mode) lets go: the task published meanwhile must still run (the server
/// went to sleep while saturated). Stress version of the window in
/// `release` (try_lock returns false once not saturated).
#[test]
fn flipping_saturation_strands_no_task() {
    let _g = serial(Some(true));
    let m = Monitor::builder().order(Order::Relaxed).build_served(0u64);
    let stop = Arc::new(AtomicBool::new(false));
    let st = Arc::clone(&stop);
    let flipper = thread::spawn(move || {
        let mut on = false;
        while !st.load(Relaxed) {
            __test_set_saturation_override(Some(on));
            on = !on;
            for _ in 0..200 {
                std::hint::spin_loop();
            }
        }
    });
    let mut stuck = None;
    'outer: for round in 0..20_000 {
        let ms: Vec<_> = (0..2).map(|_| m.clone()).collect();
        let hs: Vec<_> = ms
            .into_iter()
            .map(|m| thread::spawn(move || m.submit(|n| *n += 1)))
            .collect();
        let cs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        for c in cs {
            // Give the server (or a combiner) ample time: a stranded task
            // stays pending for ever, one that a preempted server or
            // combiner runs is only late.
            let mut ok = false;
            for _ in 0..20_000 {
                if c.is_done() {
                    ok = true;
                    break;
                }
                thread::sleep(Duration::from_micros(500));
            }
            if !ok {
                // Still pending after 10 s: freeze saturation at "no" so
                // only the server may run it; if it was asleep it stays so.
                stop.store(true, Relaxed);
                stuck = Some(round);
                break 'outer;
            }
        }
    }
    stop.store(true, Relaxed);
    flipper.join().unwrap();
    __test_set_saturation_override(Some(false));
    assert!(stuck.is_none(), "a task stranded in round {stuck:?}: {m:?}");
}

thread_local! {
    static RAN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn heavy(n: &mut u64) {
    spin(5_000, n);
}

/// Long enough that a queue of 16 takes longer to drain than the busy
/// executor takes to poll its producers again.
fn heavier(n: &mut u64) {
    spin(100_000, n);
}

fn spin(iterations: u64, n: &mut u64) {
    for i in 0..iterations {
        std::hint::black_box(i);
    }
    *n += 1;
    RAN.with(|r| r.set(r.get() + 1));
}

/// A thread's combiner stint while async producers (tokio, 2 workers)
/// stream into a combining monitor: async producers asleep in `space` are
/// only woken (SPACE), never handed the monitor, and a woken task polls
/// long after the 64-spin offer is taken back. Once a stint has run a
/// queue's worth, every batch now ends by waking the producers waiting for
/// space, whatever the room, and offering the monitor without backing off
/// (a woken producer's poll takes the offer), instead of offering only
/// every few batches and waking producers only once the queue has drained
/// to half.
#[test]
fn a_combiner_stint_is_bounded_under_async_producers() {
    let _g = serial(None);
    const CAPACITY: usize = 16;
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(CAPACITY)
            .build(0u64),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..4 {
        let m = Arc::clone(&m);
        let stop = Arc::clone(&stop);
        rt.spawn(async move {
            while !stop.load(Relaxed) {
                drop(m.submit_async(heavy).completion().await);
            }
        });
    }
    let m1 = Arc::clone(&m);
    let stop1 = Arc::clone(&stop);
    let streamer = thread::spawn(move || {
        let mut most = 0;
        let mut slowest = Duration::ZERO;
        for _ in 0..2_000 {
            if stop1.load(Relaxed) {
                break;
            }
            let before = RAN.with(|r| r.get());
            let t = std::time::Instant::now();
            drop(m1.submit(heavy));
            slowest = slowest.max(t.elapsed());
            most = most.max(RAN.with(|r| r.get()) - before);
        }
        (most, slowest)
    });
    let (most, slowest) = streamer.join().unwrap();
    stop.store(true, Relaxed);
    drop(rt);
    eprintln!("most tasks in one submit: {most}, slowest submit: {slowest:?}");
    assert!(
        most <= 8 * CAPACITY as u64,
        "one submit ran {most} tasks ({slowest:?})"
    );
}

/// The stint under async producers whose executor is busy: it polls them
/// only every 100 µs or so (a `LocalPool` run in rounds), so a producer
/// woken for space never takes an offer in time (an offer lasts about a
/// microsecond), but refills the queue while the combiner still serves.
/// A thread that became the combiner must end its stint after about a
/// queue's worth all the same: it wakes the producers and lets the monitor
/// go, and they serve it when polled. Before, it took the monitor back
/// after each missed offer and served for as long as the producers
/// refilled the queue: one `submit` ran all of their tasks.
#[test]
fn a_combiner_stint_is_bounded_when_async_producers_poll_late() {
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    let _g = serial(None);
    const CAPACITY: usize = 16;
    const PER_PRODUCER: usize = 1_000;
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(CAPACITY)
            .build(0u64),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let executor = {
        let (m, done) = (Arc::clone(&m), Arc::clone(&done));
        thread::spawn(move || {
            let mut pool = LocalPool::new();
            for _ in 0..4 {
                let (m, done) = (Arc::clone(&m), Arc::clone(&done));
                pool.spawner()
                    .spawn_local(async move {
                        for _ in 0..PER_PRODUCER {
                            drop(m.submit_async(heavier).completion().await);
                        }
                        done.fetch_add(1, SeqCst);
                    })
                    .unwrap();
            }
            while done.load(SeqCst) < 4 {
                pool.run_until_stalled();
                thread::sleep(Duration::from_micros(100));
            }
        })
    };
    let mut most = 0;
    while done.load(SeqCst) < 4 {
        let before = RAN.with(|r| r.get());
        drop(m.submit(heavier));
        most = most.max(RAN.with(|r| r.get()) - before);
    }
    executor.join().unwrap();
    assert!(
        most <= 8 * CAPACITY as u64,
        "one submit ran {most} tasks of the {} submitted",
        4 * PER_PRODUCER
    );
}

/// `served_small_queue_producers_are_not_stranded` with async producers
/// (tokio multi_thread): their `SubmitAsync` futures wait in `space` too.
#[test]
fn served_small_queue_async_producers_are_not_stranded() {
    let _g = serial(Some(false));
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(4)
        .build_served(0u64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let m = m.clone();
        let done = Arc::clone(&done);
        rt.spawn(async move {
            for _ in 0..20_000 {
                drop(m.submit_async(|n| *n += 1).completion().await);
            }
            done.fetch_add(1, SeqCst);
        });
    }
    for _ in 0..100 {
        if done.load(SeqCst) == 3 {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    let d = done.load(SeqCst);
    rt.shutdown_background();
    assert_eq!(
        d, 3,
        "async producers stranded: {d}/3 finished after 10 s; {m:?}"
    );
}
