//! `am/uncontended` and `am/call/*`: the cost of a light delegated call,
//! alone and with many callers.

use super::*;

// -------------------------------------------------------- uncontended --

pub(super) fn uncontended(mode: Mode) -> Workload {
    let ops = mode.pick(1_000_000, 10_000_000);
    let actor_ops = ops / 20;
    Workload::new("am/uncontended", Unit::NsPerOp)
        .title("One light delegated call (increment a counter) from one thread: ns per call.")
        .param("ops", ops)
        .baseline("parking_lot")
        .paper(
            "no figure: the paper notes that light critical sections gain little from \
             delegation. The target: a light `call` within 3x a bare lock plus unlock.",
        )
        .implementation("am", {
            let m = Monitor::new(0u64);
            move || {
                let start = Instant::now();
                for _ in 0..ops {
                    drop(m.submit(|v| *v = black_box(*v + 1)));
                }
                ns_per_op(start.elapsed(), ops)
            }
        })
        .implementation("ams", {
            let m = Monitor::new(0u64);
            move || {
                let start = Instant::now();
                for _ in 0..ops {
                    m.call(|v| *v = black_box(*v + 1));
                }
                ns_per_op(start.elapsed(), ops)
            }
        })
        .implementation("am-server", move || {
            // Built per sample: a server thread (and its slot under the
            // process's cap) only while it is measured.
            let m = Monitor::builder().build_served(0u64);
            let start = Instant::now();
            for _ in 0..ops {
                drop(m.submit(|v| *v = black_box(*v + 1)));
            }
            // Every task has run (the call runs after them).
            m.call(|v| black_box(*v));
            ns_per_op(start.elapsed(), ops)
        })
        .implementation("lk", {
            let m = (parking_lot::Mutex::new(0u64), parking_lot::Condvar::new());
            move || {
                let start = Instant::now();
                for _ in 0..ops {
                    let mut g = m.0.lock();
                    *g = black_box(*g + 1);
                    m.1.notify_all();
                }
                ns_per_op(start.elapsed(), ops)
            }
        })
        .implementation("actor", move || {
            let (tx, rx) = cbc::unbounded::<cbc::Sender<u64>>();
            let server = thread::spawn(move || {
                let mut v = 0u64;
                for reply in rx {
                    v = black_box(v + 1);
                    let _ = reply.send(v);
                }
            });
            let start = Instant::now();
            for _ in 0..actor_ops {
                let (reply, answer) = cbc::bounded(1);
                tx.send(reply).expect("the actor runs");
                black_box(answer.recv().expect("the actor replies"));
            }
            let t = ns_per_op(start.elapsed(), actor_ops);
            drop(tx);
            server.join().expect("the actor thread");
            t
        })
        .implementation("parking_lot", {
            let m = parking_lot::Mutex::new(0u64);
            move || {
                let start = Instant::now();
                for _ in 0..ops {
                    let mut g = m.lock();
                    *g = black_box(*g + 1);
                }
                ns_per_op(start.elapsed(), ops)
            }
        })
}

// ----------------------------------------------------------------- call --

/// Runs `call` (one call on the shared monitor) on `threads` threads started
/// together, each until `run` has passed since the start (a timer thread
/// raises the flag, so the callers only read it); ns per call, from the start
/// until the last caller finished, over all calls.
fn call_sample<M: Send + Sync + 'static>(
    make: impl Fn() -> M + 'static,
    threads: usize,
    run: Duration,
    call: fn(&M),
) -> impl FnMut() -> f64 {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    struct Shared<M> {
        m: M,
        stop: AtomicBool,
        calls: AtomicU64,
    }
    move || {
        let shared = Arc::new(Shared {
            m: make(),
            stop: AtomicBool::new(false),
            calls: AtomicU64::new(0),
        });
        let timer = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                thread::sleep(run);
                shared.stop.store(true, Relaxed);
            })
        };
        let elapsed = run_threads(&shared, threads, move |s, _| {
            let mut n = 0u64;
            while !s.stop.load(Relaxed) {
                call(&s.m);
                n += 1;
            }
            s.calls.fetch_add(n, Relaxed);
        });
        timer.join().expect("the timer thread");
        ns_per_op(elapsed, shared.calls.load(Relaxed).max(1))
    }
}

/// The body of an `am/call` call: an increment, then `body_us` µs of
/// calibrated busy work.
#[inline]
fn call_body<const BODY_US: u64>(v: &mut u64) {
    *v = black_box(*v + 1);
    crate::workloads::adaptive::busy(BODY_US * 1_000);
}

fn call_with<const BODY_US: u64>(mode: Mode, threads: usize) -> Workload {
    let run = Duration::from_millis(mode.pick(300, 1_000));
    let id = if BODY_US == 0 {
        format!("am/call/{threads}")
    } else {
        format!("am/call-{BODY_US}us/{threads}")
    };
    let body = if BODY_US == 0 {
        "a short body (increment a counter)".to_string()
    } else {
        format!("a {BODY_US} µs body (increment a counter, then {BODY_US} µs of busy work)")
    };
    Workload::new(id, Unit::NsPerOp)
        .title(format!(
            "{threads} threads call one monitor with {body}, back to back, for {} ms per \
             sample: ns per call over all threads (`am/call/N`: the short body, \
             `am/call-5us/N`: the 5 µs body). Steady state: a convoy of sleeping callers, \
             which forms after about 100 ms, is inside every sample.",
            run.as_millis()
        ))
        .description(format!(
            "{threads} threads calling one monitor with {body}: ns per call."
        ))
        .param("threads", threads)
        .param("body_us", BODY_US)
        .param("run_ms", run.as_millis() as u64)
        .baseline("parking_lot")
        .paper(
            "no figure: contended synchronous calls, where delegation should not lose to a \
             lock by more than its uncontended overhead. The target: `am` within 3x \
             parking_lot's time per call at every thread count.",
        )
        .implementation(
            "am",
            call_sample(
                || Monitor::new(0u64),
                threads,
                run,
                |m| m.call(call_body::<BODY_US>),
            ),
        )
        .implementation(
            "am-server",
            // Built per sample: a server thread only while it is measured.
            call_sample(
                || Monitor::builder().build_served(0u64),
                threads,
                run,
                |m| m.call(call_body::<BODY_US>),
            ),
        )
        .implementation(
            "parking_lot",
            call_sample(
                || parking_lot::Mutex::new(0u64),
                threads,
                run,
                |m| call_body::<BODY_US>(&mut m.lock()),
            ),
        )
}

pub(super) fn call(mode: Mode, body_us: u64, threads: usize) -> Workload {
    match body_us {
        0 => call_with::<0>(mode, threads),
        5 => call_with::<5>(mode, threads),
        _ => unreachable!("am/call: body of 0 or 5 µs"),
    }
}
