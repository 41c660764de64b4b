//! Execution: dedicated server threads, their cap, the fallback to
//! combining when the CPUs are saturated, and the combiner's bounded stint
//! (hand-over).
//!
//! The cap and the saturation verdict are process-wide, so every test that
//! builds a served monitor holds `sync_core::testing::one_at_a_time`
//! (through `serial`) and sets both as it needs.
#![cfg(not(loom))]

use std::cell::Cell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};
use std::thread::{self, ThreadId};
use std::time::Duration;

use active_monitor::{
    __test_set_saturation_override, Discarded, Monitor, Order, Served, servers, set_server_limit,
};

/// Serialises the tests of this file that touch process-wide settings, and
/// sets them: a cap high enough, and the CPUs not saturated.
fn serial() -> MutexGuard<'static, ()> {
    let g = sync_core::testing::one_at_a_time();
    set_server_limit(1000);
    __test_set_saturation_override(Some(false));
    g
}

fn served<T: Send + 'static>(order: Order, data: T) -> Served<T> {
    let m = Monitor::builder().order(order).build_served(data);
    assert!(m.has_server(), "under the cap: a server");
    m
}

fn me() -> ThreadId {
    thread::current().id()
}

// ------------------------------------------------ the server runs tasks --

#[test]
fn a_served_monitor_runs_submitted_tasks_on_its_server() {
    let _g = serial();
    let m = served(Order::Strict, 0u64);
    let caller = me();
    let by_submit = m.submit(|_| me());
    assert_ne!(by_submit.wait(), caller, "submit ran on the caller");
    let by_when = m.when(|_| true, |_| me());
    assert_ne!(by_when.wait(), caller, "when ran on the caller");
}

/// A `call` that finds the monitor idle runs at once on its caller (it
/// waits anyway); one that finds tasks queued is run by the server, after
/// them.
#[test]
fn a_call_on_an_idle_served_monitor_runs_inline_and_queues_behind_work() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u64);
    let caller = me();
    thread::sleep(Duration::from_millis(2)); // idle, the server asleep
    assert_eq!(m.call(|_| me()), caller, "idle: the caller runs it");
    // Keep the server busy so that tasks queue behind it.
    let gate = Arc::new(AtomicBool::new(false));
    let g = Arc::clone(&gate);
    let (started, is_started) = std::sync::mpsc::channel();
    let busy = m.submit(move |_| {
        started.send(()).expect("the test waits");
        while !g.load(Ordering::Acquire) {
            thread::yield_now();
        }
        me()
    });
    is_started.recv().expect("the server runs it");
    let queued = m.submit(|n| *n += 1);
    let m2 = m.clone();
    let call = thread::spawn(move || m2.call(|n| (me(), *n)));
    // The call found a task queued, and queued behind it.
    assert!(
        sync_core::testing::holds_within(Duration::from_secs(10), || m.__test_queued() >= 2),
        "the call never queued: {m:?}"
    );
    gate.store(true, Ordering::Release);
    let server = busy.wait();
    queued.wait();
    let (who, seen) = call.join().unwrap();
    assert_eq!(seen, 1, "the call ran after the task queued before it");
    assert_ne!(server, caller, "the server ran the busy task");
    assert_eq!(who, server, "the server ran the call queued behind work");
}

#[test]
fn served_call_and_submit_from_many_threads_lose_nothing() {
    let _g = serial();
    for order in [Order::Strict, Order::Relaxed] {
        let m = served(order, Vec::new());
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let m = m.clone();
                thread::spawn(move || {
                    for i in 0..2_000u64 {
                        if i % 3 == 0 {
                            m.call(move |v| v.push((w, i)));
                        } else {
                            m.submit(move |v| v.push((w, i)));
                        }
                    }
                    // Everything of this worker ran before this call.
                    m.call(move |v| v.iter().filter(|(x, _)| *x == w).count())
                })
            })
            .collect();
        for w in workers {
            assert_eq!(w.join().unwrap(), 2_000);
        }
        // Program order per worker (rule 2).
        let v = m.call(|v| v.clone());
        for w in 0..4 {
            let mine: Vec<_> = v.iter().filter(|(x, _)| *x == w).map(|(_, i)| *i).collect();
            assert_eq!(mine, (0..2_000).collect::<Vec<_>>(), "worker {w}'s order");
        }
    }
}

#[test]
fn a_served_bounded_queue_moves_every_item() {
    let _g = serial();
    const CAP: usize = 4;
    let q = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(8)
        .build_served(VecDeque::new());
    assert!(q.has_server());
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let q = q.clone();
            thread::spawn(move || {
                for i in 0..5_000u64 {
                    q.when(
                        |d: &VecDeque<u64>| d.len() < CAP,
                        move |d| d.push_back(p * 1_000_000 + i),
                    );
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            thread::spawn(move || {
                (0..5_000)
                    .map(|_| {
                        q.when(
                            |d: &VecDeque<u64>| !d.is_empty(),
                            |d| d.pop_front().unwrap(),
                        )
                        .wait()
                    })
                    .sum::<u64>()
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let sum: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    let per = (0..5_000u64).sum::<u64>();
    assert_eq!(sum, 2 * per + 1_000_000 * 5_000);
}

#[test]
fn a_panicking_task_on_the_server_resumes_in_its_waiter_and_the_server_keeps_serving() {
    let _g = serial();
    let m = served(Order::Relaxed, 1u32);
    let c = m.submit(|_| -> u32 { panic!("task failed") });
    let err = catch_unwind(AssertUnwindSafe(|| c.wait())).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"task failed"));
    let err = catch_unwind(AssertUnwindSafe(|| {
        m.call(|_| -> u32 { panic!("call failed") })
    }));
    assert!(err.is_err());
    assert_eq!(m.call(|n| *n), 1);
}

#[test]
fn served_completions_are_futures_on_tokio_and_futures() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u64);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let got = rt.block_on({
        let m = m.clone();
        async move {
            let waiting = m.when(|n| *n >= 2, |n| *n * 10);
            m.submit(|n| *n += 1).await.unwrap();
            m.submit(|n| *n += 1).await.unwrap();
            waiting.await.unwrap()
        }
    });
    assert_eq!(got, 20);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let m = m.clone();
            rt.spawn(async move {
                for _ in 0..100 {
                    m.submit(|n| *n += 1).await.unwrap();
                }
            })
        })
        .collect();
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(futures::executor::block_on(m.submit(|n| *n)), Ok(2 + 800));
}

#[test]
fn a_task_on_the_server_may_submit_to_its_own_monitor_but_not_call_it() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u32);
    let inner = m.clone();
    let c = m.submit(move |n| {
        *n += 1;
        // Queued behind us; the server runs it next.
        drop(inner.submit(|n| *n += 10));
        let r = catch_unwind(AssertUnwindSafe(|| inner.call(|n| *n)));
        r.is_err()
    });
    assert!(
        c.wait(),
        "a call from the server's own task must panic, not hang"
    );
    assert_eq!(m.call(|n| *n), 11);
}

/// On a served monitor, a task's blocking wait for another task of the
/// monitor is a wait for the server itself: it panics, as a call does
/// (the panic resumes in the task's waiter), and the server goes on to
/// run the awaited task.
#[test]
fn a_task_on_the_server_that_waits_for_its_own_monitor_s_task_panics() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u32);
    let inner = m.clone();
    let c = m.submit(move |n| {
        *n += 1;
        let queued = inner.submit(|n| *n += 10);
        catch_unwind(AssertUnwindSafe(|| queued.wait())).is_err()
    });
    assert!(
        c.wait(),
        "a wait from the server's own task must panic, not hang"
    );
    assert_eq!(m.call(|n| *n), 11);
}

// ------------------------------------------------------------ sleeping --

#[test]
fn a_sleeping_server_is_woken_by_a_submission() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u32);
    for round in 1..=5u32 {
        // Longer than the server's watch: it sleeps.
        thread::sleep(Duration::from_millis(2));
        let caller = me();
        assert_ne!(
            m.submit(move |n| {
                *n += 1;
                me()
            })
            .wait(),
            caller
        );
        assert_eq!(m.call(|n| *n), round);
    }
}

#[test]
fn dropping_a_served_monitor_with_a_sleeping_server_runs_queued_tasks_and_discards_waiting_ones() {
    let _g = serial();
    let before = servers();
    let m = served(Order::Relaxed, 0u32);
    assert_eq!(servers(), before + 1);
    thread::sleep(Duration::from_millis(2)); // the server sleeps
    let waiting = m.when(|n| *n > 100, |n| *n);
    let queued: Vec<_> = (0..10).map(|_| m.submit(|n| *n += 1)).collect();
    let last = m.submit(|n| *n);
    drop(m); // stops and joins the server: nothing hangs
    assert_eq!(servers(), before, "the server's slot is given back");
    for c in queued {
        c.wait();
    }
    assert_eq!(last.wait(), 10);
    assert_eq!(waiting.wait_result(), Err(Discarded));
}

#[test]
fn the_last_handle_dropped_on_another_thread_joins_the_server() {
    let _g = serial();
    let before = servers();
    let m = served(Order::Relaxed, Vec::<u32>::new());
    let cs: Vec<_> = (0..100).map(|i| m.submit(move |v| v.push(i))).collect();
    thread::spawn(move || drop(m)).join().unwrap();
    assert_eq!(servers(), before);
    assert!(cs.iter().all(|c| c.is_done()));
}

#[test]
fn the_last_handle_dropped_by_a_task_on_the_server_stops_it() {
    let _g = serial();
    let before = servers();
    let m = served(Order::Relaxed, 0u32);
    let inner = m.clone();
    let gate = Arc::new(AtomicBool::new(false));
    let g = Arc::clone(&gate);
    // The task holds a handle; once the user's is gone, the server's own
    // reference is the last, and the monitor drops on the server thread.
    let c = m.submit(move |n| {
        while !g.load(Ordering::Acquire) {
            thread::yield_now();
        }
        *n += 1;
        drop(inner);
    });
    drop(m);
    gate.store(true, Ordering::Release);
    c.wait();
    // The server ends on its own; the slot is given back by the drop.
    assert!(
        sync_core::testing::holds_within(Duration::from_secs(10), || servers() == before),
        "the server's slot was not given back"
    );
}

// ------------------------------------------------------------------ cap --

#[test]
fn beyond_the_cap_a_served_monitor_combines_and_the_count_goes_down_on_drop() {
    let _g = serial();
    let running = servers();
    set_server_limit(running + 1);
    let a = Monitor::builder().build_served(0u32);
    assert!(a.has_server());
    assert_eq!(servers(), running + 1);
    // The cap is reached: no thread, combining (the caller runs it).
    let b = Monitor::builder().build_served(0u32);
    assert!(!b.has_server());
    assert_eq!(servers(), running + 1);
    assert_eq!(b.call(|_| me()), me());
    assert_eq!(b.submit(|n| *n + 1).wait(), 1);
    drop(a);
    assert_eq!(servers(), running);
    // A slot is free again.
    let c = Monitor::builder().build_served(0u32);
    assert!(c.has_server());
    drop((b, c));
    set_server_limit(1000);
}

// ----------------------------------------------------------- saturation --

#[test]
fn when_saturated_submitters_run_tasks_themselves_and_the_server_sleeps() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u32);
    __test_set_saturation_override(Some(true));
    // The server watches no more; give it time to go to sleep.
    thread::sleep(Duration::from_millis(2));
    for _ in 0..10 {
        assert_eq!(m.call(|_| me()), me(), "saturated: the caller runs it");
        assert_eq!(m.submit(|_| me()).wait(), me());
    }
    // Back to serving: the server runs tasks again.
    __test_set_saturation_override(Some(false));
    for _ in 0..10 {
        // (A call on an idle monitor runs inline either way.)
        assert_ne!(
            m.submit(|_| me()).wait(),
            me(),
            "not saturated: the server runs it"
        );
    }
    __test_set_saturation_override(Some(false));
}

#[test]
fn switching_saturation_back_and_forth_under_load_loses_nothing() {
    let _g = serial();
    let m = served(Order::Relaxed, 0u64);
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut on = false;
            while !stop.load(Ordering::Relaxed) {
                on = !on;
                __test_set_saturation_override(Some(on));
                thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let m = m.clone();
            thread::spawn(move || {
                let cs: Vec<_> = (0..5_000).map(|_| m.submit(|n| *n += 1)).collect();
                for c in cs {
                    c.wait();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    __test_set_saturation_override(Some(false));
    assert_eq!(m.call(|n| *n), 15_000);
}

// ------------------------------------------------------------ hand-over --

thread_local! {
    /// Tasks this thread has run (as combiner or caller).
    static RAN: Cell<u64> = const { Cell::new(0) };
}

fn ran() -> u64 {
    RAN.with(Cell::get)
}

/// Review MED 7: under a sustained stream of asynchronous submissions from
/// other threads, one combiner's `submit` served the stream (the reviewer's
/// streamer served a whole second of it). Its stint is now bounded: after
/// its batch it hands the monitor over to a publishing submitter, or to a
/// producer it woke for space, and takes it back only for another batch
/// when none comes. Each streamer counts the tasks it ran within each of
/// its own submits. The bound asserted is loose (a few queues' worth); the
/// old code ran most of the stream in one submit (1,100 to 2,000 of the
/// 3,000 tasks in three runs).
///
/// The bound is a scheduling property: a combiner hands over to a peer that
/// is running, and with more runnable threads than cores (this binary runs
/// its tests in parallel) its peers can all be off the CPU for a scheduling
/// round, during which a correct combiner keeps serving. So the stream is
/// run up to three times and one run within the bound passes; the old code
/// broke the bound on every run.
#[test]
fn a_combiners_submit_returns_after_a_bounded_number_of_tasks() {
    const CAPACITY: usize = 16;
    let mut runs = Vec::new();
    for _ in 0..3 {
        let most = longest_submit_of_a_stream(CAPACITY);
        // At most the queue's contents when it began, and some batches
        // more until another thread took the monitor (offers back off to
        // one in 9 batches while nobody takes them).
        if most <= 8 * CAPACITY as u64 {
            return;
        }
        runs.push(most);
    }
    panic!("the longest submit of each run ran {runs:?} tasks: the combiner did not hand over");
}

/// Three threads stream submissions to one monitor: the most tasks one
/// submit ran.
fn longest_submit_of_a_stream(capacity: usize) -> u64 {
    const STREAM: u64 = 1_000;
    const THREADS: u64 = 3;
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(capacity)
            .build(0u64),
    );
    let started = Arc::new(AtomicUsize::new(0));
    let streams: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = Arc::clone(&m);
            let started = Arc::clone(&started);
            thread::spawn(move || {
                started.fetch_add(1, Ordering::Relaxed);
                while started.load(Ordering::Relaxed) < THREADS as usize {
                    thread::yield_now();
                }
                let mut most = 0;
                for _ in 0..STREAM {
                    let before = ran();
                    // Heavier than a submission (microseconds): the streams
                    // outpace the combiner, whose queue never runs dry.
                    drop(m.submit(|n| {
                        for i in 0..5_000u64 {
                            std::hint::black_box(i);
                        }
                        *n += 1;
                        RAN.with(|r| r.set(r.get() + 1));
                    }));
                    most = most.max(ran() - before);
                }
                most
            })
        })
        .collect();
    let most = streams.into_iter().map(|s| s.join().unwrap()).max();
    assert_eq!(m.call(|n| *n), THREADS * STREAM);
    most.expect("three streams")
}

// ----------------------------------------------------------------- soak --

/// Many threads, a served monitor with a small queue, the saturation
/// verdict flipping, calls, submits and `when`s mixed: every task runs
/// exactly once (a non-atomic count inside the monitor equals the tasks
/// submitted), every completion resolves, and the server is joined.
#[test]
#[ignore = "soak: run with --ignored"]
fn soak_a_served_monitor_under_flipping_saturation() {
    let _g = serial();
    const THREADS: u64 = 8;
    const OPS: u64 = 1_000_000;
    let before = servers();
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(8)
        .build_served(0u64);
    assert!(m.has_server());
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut on = false;
            while !stop.load(Ordering::Relaxed) {
                on = !on;
                __test_set_saturation_override(Some(on));
                thread::sleep(Duration::from_micros(300));
            }
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let m = m.clone();
            thread::spawn(move || {
                let mut pending = VecDeque::new();
                for i in 0..OPS {
                    match (w + i) % 4 {
                        0 => m.call(|n| *n += 1),
                        1 | 2 => pending.push_back(m.submit(|n| *n += 1)),
                        _ => pending.push_back(m.when(|_| true, |n| *n += 1)),
                    }
                    if pending.len() > 64 {
                        pending.pop_front().unwrap().wait();
                    }
                }
                for c in pending {
                    c.wait();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    __test_set_saturation_override(Some(false));
    assert_eq!(m.call(|n| *n), THREADS * OPS);
    drop(m);
    assert_eq!(servers(), before);
}

/// Combining under streams of heavy and light tasks from many threads:
/// every task runs once and no submit serves the whole stream.
#[test]
#[ignore = "soak: run with --ignored"]
fn soak_combining_hand_over_under_streams() {
    const THREADS: u64 = 8;
    const OPS: u64 = 500_000;
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(16)
            .build(0u64),
    );
    let streams: Vec<_> = (0..THREADS)
        .map(|w| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut most = 0;
                for i in 0..OPS {
                    let before = ran();
                    let heavy = (w + i) % 16 == 0;
                    drop(m.submit(move |n| {
                        if heavy {
                            for k in 0..2_000u64 {
                                std::hint::black_box(k);
                            }
                        }
                        *n += 1;
                        RAN.with(|r| r.set(r.get() + 1));
                    }));
                    most = most.max(ran() - before);
                }
                most
            })
        })
        .collect();
    let most = streams
        .into_iter()
        .map(|s| s.join().unwrap())
        .max()
        .unwrap();
    assert_eq!(m.call(|n| *n), THREADS * OPS);
    // With 8 threads on 2 CPUs the would-be takers are mostly descheduled
    // when an offer is made, so stints are longer than in the test above
    // (up to 1,455 tasks seen); the old code served the stream (millions).
    assert!(most <= 10_000, "one submit ran {most} tasks");
}
