//! A `WaiterQueue::sweep_front` that began on an empty queue, while
//! producers keep pushing withdrawn waiters: the consumer is frozen (a
//! signal whose handler waits) at a random point of its loop of sweeps, the
//! producers push meanwhile, and once thawed the sweep in progress must
//! return. One frozen between its read of the queue's last waiter (none)
//! and its first look at the front kept freeing what the producers pushed
//! for as long as they outpaced it. SIGUSR1 is this binary's.
#![cfg(all(not(loom), target_os = "linux"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::thread;
use std::time::{Duration, Instant};

use sync_core::waiter::{Waiter, WaiterQueue};

static FROZEN: AtomicBool = AtomicBool::new(false);
static IN_HANDLER: AtomicBool = AtomicBool::new(false);

extern "C" fn freeze(_: libc::c_int) {
    IN_HANDLER.store(true, SeqCst);
    while FROZEN.load(SeqCst) {
        std::hint::spin_loop();
    }
    IN_HANDLER.store(false, SeqCst);
}

/// The CPU time `clock` (a thread's CPU clock) has run.
fn cpu(clock: libc::clockid_t) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    assert_eq!(unsafe { libc::clock_gettime(clock, &mut t) }, 0);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Trials: each freezes the consumer at a random point of its loop; a few
/// in a hundred land between the two reads (on the old code, 12 runs failed
/// at trials 1 to 90).
const TRIALS: usize = 200;
/// Waiters the producers push while the consumer is frozen (about 1 ms of
/// pushes): a backlog the consumer then works behind.
const BACKLOG: u64 = 10_000;
/// CPU time the thawed sweep may take: freeing the backlog takes far less
/// (a few ms), however loaded the machine.
const BOUND: Duration = Duration::from_millis(500);

#[test]
fn a_sweep_front_begun_on_an_empty_queue_ends_while_producers_keep_pushing() {
    // SAFETY: installs a handler that only touches atomics; SIGUSR1 is not
    // used otherwise in this binary.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = freeze as extern "C" fn(libc::c_int) as usize;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let q = Arc::new(WaiterQueue::new());
    let stop = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let pushed = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..3)
        .map(|_| {
            let (q, stop, gate) = (Arc::clone(&q), Arc::clone(&stop), Arc::clone(&gate));
            let pushed = Arc::clone(&pushed);
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                    if gate.load(Relaxed) {
                        let w = Waiter::for_thread(0);
                        w.cancel().unwrap();
                        q.push(w);
                        n += 1;
                        if n % 256 == 0 {
                            pushed.fetch_add(256, Relaxed);
                        }
                    } else {
                        // Leave the CPUs to the consumer and the test.
                        thread::sleep(Duration::from_micros(100));
                    }
                }
            })
        })
        .collect();
    let (ids, id) = std::sync::mpsc::channel();
    let consumer = {
        let (q, stop, calls) = (Arc::clone(&q), Arc::clone(&stop), Arc::clone(&calls));
        thread::spawn(move || {
            // SAFETY: plain FFI calls about this thread.
            let me = unsafe { libc::pthread_self() };
            let mut clock: libc::clockid_t = 0;
            // SAFETY: as above; `clock` is valid to write.
            assert_eq!(unsafe { libc::pthread_getcpuclockid(me, &mut clock) }, 0);
            ids.send((me, clock)).unwrap();
            // A plain store, not an RMW: the loop is mostly the sweep's
            // two reads, so that a freeze often lands between them.
            let mut n = 0;
            while !stop.load(Relaxed) {
                // SAFETY: this thread is the only consumer.
                unsafe { q.sweep_front() };
                n += 1;
                calls.store(n, Relaxed);
            }
        })
    };
    let (me, clock) = id.recv().unwrap();
    let mut stuck = None;
    for trial in 0..TRIALS {
        gate.store(false, Relaxed);
        // Drained (the producers stopped pushing): the queue is empty.
        let began = Instant::now();
        while !q.is_empty() && began.elapsed() < Duration::from_secs(10) {
            thread::yield_now();
        }
        // The consumer back in its loop of sweeps on the empty queue.
        let at = calls.load(Relaxed);
        while calls.load(Relaxed) < at + 100 && began.elapsed() < Duration::from_secs(10) {
            thread::yield_now();
        }
        FROZEN.store(true, SeqCst);
        // SAFETY: `me` is the consumer thread, still running.
        assert_eq!(unsafe { libc::pthread_kill(me, libc::SIGUSR1) }, 0);
        while !IN_HANDLER.load(SeqCst) {
            thread::yield_now();
        }
        let from = pushed.load(Relaxed);
        gate.store(true, Relaxed);
        let began = Instant::now();
        while pushed.load(Relaxed) - from < BACKLOG && began.elapsed() < Duration::from_secs(10) {
            std::hint::spin_loop();
        }
        let before = calls.load(SeqCst);
        let cpu_before = cpu(clock);
        FROZEN.store(false, SeqCst);
        let thawed = Instant::now();
        while calls.load(SeqCst) == before && thawed.elapsed() < Duration::from_secs(10) {
            if cpu(clock) - cpu_before > BOUND {
                stuck = Some(trial);
                break;
            }
            thread::yield_now();
        }
        if stuck.is_some() {
            break;
        }
    }
    stop.store(true, Relaxed);
    FROZEN.store(false, SeqCst);
    for p in producers {
        p.join().unwrap();
    }
    consumer.join().unwrap();
    assert!(
        stuck.is_none(),
        "a sweep_front thawed after its read of an empty queue kept sweeping \
         for {BOUND:?} of CPU time while the producers pushed (trial {stuck:?})"
    );
}
