//! Producers waiting for queue space on a served monitor: they sleep until
//! the server makes room, whatever the lock word says. A counting global
//! allocator counts the allocations each submission makes (a waiter node
//! per round of waiting).
#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::task::{Context, Waker};
use std::thread;
use std::time::{Duration, Instant};

use active_monitor::{__test_set_saturation_override, Monitor, Order, set_server_limit};

/// The system allocator, counting allocations and the bytes live.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// The tests read process-wide counters and settings: one at a time.
use sync_core::testing::one_at_a_time;

// SAFETY: defers every call to `System`, only counting them.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A served monitor with a full queue: the lock word is free whenever the
/// server is between stints (a `call` that ran inline let go, the server
/// is awake but not yet running), and that free word is not the
/// producers' to take. A producer used to withdraw at once from the
/// waiters for space because "the monitor is idle with a task ready", and
/// go round again until the server ran: 10 to 38 waiter nodes allocated
/// per submission, and a core busy. Now it sleeps until the server wakes
/// it: a few allocations per submission (the task, a waiter now and
/// then). The same run also left producers asleep with room in the queue
/// now and then: the server's release found the monitor held by an inline
/// `call`, whose release did not look at the producers waiting for space.
#[test]
fn producers_of_a_served_monitor_wait_for_space_without_spinning() {
    const PRODUCERS: u64 = 4;
    const TASKS: u64 = 20_000;
    let _one = one_at_a_time();
    set_server_limit(1000);
    __test_set_saturation_override(Some(false));
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(4)
        .build_served(0u64);
    assert!(m.has_server());
    let stop = Arc::new(AtomicBool::new(false));
    // Calls on the idle monitor run inline and let go: the lock word is
    // free while the queue refills.
    let caller = {
        let (m, stop) = (m.clone(), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Relaxed) {
                m.call(|n| *n += 0);
            }
        })
    };
    // More runnable threads than CPUs: the server thread waits for a CPU
    // now and then, with the lock word free and the queue full.
    let bystanders: Vec<_> = (0..4)
        .map(|_| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                while !stop.load(Relaxed) {
                    for i in 0..10_000u64 {
                        std::hint::black_box(i);
                    }
                }
            })
        })
        .collect();
    let before = ALLOCS.load(Relaxed);
    let finished = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let m = m.clone();
            let finished = Arc::clone(&finished);
            thread::spawn(move || {
                for _ in 0..TASKS {
                    drop(m.submit(|n| {
                        for i in 0..200u64 {
                            std::hint::black_box(i);
                        }
                        *n += 1;
                    }));
                }
                finished.fetch_add(1, Relaxed);
            })
        })
        .collect();
    // A watchdog instead of a hang: producers left asleep with room in the
    // queue (a release that found the monitor held by an inline call did
    // not wake them) fail the test.
    let deadline = Instant::now() + Duration::from_secs(60);
    while finished.load(Relaxed) < PRODUCERS {
        assert!(
            Instant::now() < deadline,
            "producers stranded waiting for space: {m:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
    for p in producers {
        p.join().unwrap();
    }
    let allocs = ALLOCS.load(Relaxed) - before;
    stop.store(true, Relaxed);
    caller.join().unwrap();
    for b in bystanders {
        b.join().unwrap();
    }
    assert_eq!(m.call(|n| *n), PRODUCERS * TASKS);
    let per_submit = allocs as f64 / (PRODUCERS * TASKS) as f64;
    __test_set_saturation_override(None);
    assert!(
        per_submit < 3.0,
        "{per_submit:.1} allocations per submission: producers spin for space"
    );
}

/// Bytes still live after `rounds` asynchronous submissions that wait for
/// space (the queue is full, its holder busy in one long task) and are
/// dropped while they wait.
fn after_dropped_space_waits(rounds: usize) -> isize {
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(1)
        .build(0u64);
    let gate = Barrier::new(2);
    thread::scope(|s| {
        s.spawn(|| {
            m.call(|_| {
                gate.wait();
                gate.wait();
            })
        });
        gate.wait();
        // The holder is inside its task: fill the queue.
        let queued = m.submit(|n| *n += 1);
        let before = LIVE.load(Relaxed);
        for _ in 0..rounds {
            let mut f = pin!(m.submit_async(|n| *n += 1));
            assert!(
                f.as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()))
                    .is_pending(),
                "the queue is full: the submission waits for space"
            );
        }
        let kept = LIVE.load(Relaxed) - before;
        gate.wait();
        queued.wait();
        kept
    })
}

/// Asynchronous submissions that stop waiting for space while one long
/// task holds the monitor: their nodes stay in the queue of producers
/// until someone sweeps it, and only the holder did, after its batch, so
/// 100,000 of them kept 7.2 MB until the long task ended. Now the
/// withdrawing side sweeps too, once withdrawn nodes outnumber the live
/// ones: what stays is bounded by the producers waiting, at all times.
#[test]
fn dropped_space_waits_do_not_pile_up_while_the_holder_is_busy() {
    let _one = one_at_a_time();
    let few = after_dropped_space_waits(10);
    let many = after_dropped_space_waits(100_000);
    assert!(
        many - few < 16 * 1024,
        "10 dropped waits for space kept {few} bytes, 100000 kept {many}"
    );
}
