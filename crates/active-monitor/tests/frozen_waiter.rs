//! A waiter preempted half-way through its registration (between its swap
//! on the waiter queue's tail and its link) must not make the thread that
//! finishes the task burn its CPU waiting for it: once yields are slow
//! (the CPUs oversubscribed), that thread gives its core away (the family's
//! wait) instead of spinning on it.
//!
//! A real waiter thread is frozen at a random point of its loop (register
//! on a queued task's end, withdraw) by a signal whose handler spins until
//! the test releases it; some of the freezes land inside a registration.
//! Then another thread finishes the task and must notify every waiter, so
//! it waits for the frozen one's link. Before the fix it spun meanwhile:
//! its CPU time grew as fast as the frozen thread's (which spins in the
//! signal handler).
#![cfg(all(not(loom), target_os = "linux"))]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Waker};
use std::thread;
use std::time::{Duration, Instant};

use active_monitor::{__TestOrderWait, Monitor, Order};
use sync_core::testing::freeze;

/// Bumped by every trial, watched by the watchdog.
static TRIAL: AtomicU64 = AtomicU64::new(0);

/// How long a finish may take before the test takes it for one that waits
/// for the frozen waiter (a finish that does not wait takes microseconds).
const PROMPT: Duration = Duration::from_millis(300);

/// The most trials, and the finishes that wait for the frozen waiter
/// after which the test stops.
const TRIALS: u64 = 4000;
const WAITS: usize = 3;

/// How long the test watches a finisher that waits for the frozen waiter.
const WATCH: Duration = Duration::from_millis(400);

#[test]
fn a_finisher_does_not_spin_on_a_frozen_waiter() {
    freeze::install();
    // Yields are slow (as beside 50 busy threads on 2 CPUs): a wait for a
    // peer must then give its core away.
    active_monitor::__test_set_saturation_override(Some(true));
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    // The task the waiter registers on, replaced each trial.
    let task: Arc<Mutex<Option<__TestOrderWait<u64>>>> = Arc::new(Mutex::new(None));
    let generation = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (task, generation, stop) = (task.clone(), generation.clone(), stop.clone());
        freeze::Freezable::spawn(move || {
            let mut cx = Context::from_waker(Waker::noop());
            let mut seen = u64::MAX;
            let mut current: Option<__TestOrderWait<u64>> = None;
            while !stop.load(SeqCst) {
                let g = generation.load(SeqCst);
                if g != seen {
                    seen = g;
                    current = task.lock().unwrap().clone();
                }
                if let Some(t) = &current {
                    // Registers (unless the task has finished), withdraws.
                    let mut w = t.clone();
                    let _ = Pin::new(&mut w).poll(&mut cx);
                }
            }
        })
    };
    // The thread that finishes each trial's task (its `call` runs it).
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let finisher = {
        let m = m.clone();
        freeze::Freezable::spawn(move || {
            for k in go_rx {
                m.call(|n| *n = k);
                done_tx.send(()).unwrap();
            }
        })
    };
    // Lets a frozen waiter go if a trial stalls (a hang would otherwise
    // keep the finisher waiting for ever).
    let watchdog_stop = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let stop = watchdog_stop.clone();
        thread::spawn(move || {
            let mut seen = (u64::MAX, Instant::now());
            while !stop.load(SeqCst) {
                thread::sleep(Duration::from_millis(10));
                let trial = TRIAL.load(SeqCst);
                if trial != seen.0 {
                    seen = (trial, Instant::now());
                } else if seen.1.elapsed() > Duration::from_secs(3) {
                    freeze::let_go();
                }
            }
        })
    };
    // Trials until a few finishes waited for the frozen waiter (about one
    // in a few hundred freezes lands inside a registration).
    let mut waits = 0;
    let mut trials = 0;
    for k in 1..=TRIALS {
        if waits == WAITS {
            break;
        }
        trials = k;
        TRIAL.store(k, SeqCst);
        // A task queued on its precondition: the finisher's `call` enables
        // and runs it.
        let c = m.when(move |n| *n == k, |n| *n);
        *task.lock().unwrap() = Some(c.__test_order_wait());
        generation.fetch_add(1, SeqCst);
        thread::sleep(Duration::from_micros(300));
        waiter.freeze();
        go_tx.send(k).unwrap();
        if done_rx.recv_timeout(PROMPT).is_err() {
            // The finisher waits for the frozen waiter's link.
            waits += 1;
            // The frozen waiter spins in the signal handler: it gets the
            // CPU time a spinner gets on this machine now, which the
            // finisher got too while it spun.
            let (cpu, spun) = (finisher.cpu_time(), waiter.cpu_time());
            thread::sleep(WATCH);
            let (cpu, spun) = (finisher.cpu_time() - cpu, waiter.cpu_time() - spun);
            eprintln!("trial {k}: the finisher used {cpu:?} of CPU, a spinner {spun:?}");
            assert!(
                cpu < spun * 3 / 5,
                "the finisher spun on a frozen waiter: {cpu:?} of CPU, a spinner {spun:?}"
            );
            freeze::release();
            done_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the finisher went on once the waiter did");
        } else {
            freeze::release();
        }
        assert_eq!(c.wait(), k);
        *task.lock().unwrap() = None;
    }
    eprintln!("{waits} of {trials} finishes waited for the frozen waiter");
    assert!(waits > 0, "no freeze landed inside a registration");
    active_monitor::__test_set_saturation_override(None);
    stop.store(true, SeqCst);
    drop(go_tx);
    waiter.join();
    finisher.join();
    watchdog_stop.store(true, SeqCst);
    watchdog.join().unwrap();
}
