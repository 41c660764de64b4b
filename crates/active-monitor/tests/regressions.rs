#![cfg(not(loom))]
//! Regressions from the review of issue 10: each test here failed (hung or
//! asserted) on the code before its fix.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::Duration;

use active_monitor::{Monitor, Order, or};

/// Runs `f` on a thread; `None` if it has not finished within `secs` (the
/// thread is leaked: the test then fails, it does not hang).
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

/// A value whose drop panics (unless the thread already unwinds).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("drop of a user value");
        }
    }
}

/// Holds `m` on another thread (a `call`) while `queue` queues tasks
/// behind it, and until it has; returns whether the holder's call
/// panicked.
fn behind_a_holder(m: &Arc<Monitor<u32>>, queue: impl FnOnce(&Monitor<u32>)) -> bool {
    let (started_tx, started_rx) = mpsc::channel();
    let (queued_tx, queued_rx) = mpsc::channel::<()>();
    let m1 = Arc::clone(m);
    let holder = thread::spawn(move || {
        catch_unwind(AssertUnwindSafe(|| {
            m1.call(move |_| {
                started_tx.send(()).unwrap();
                queued_rx.recv().unwrap();
            })
        }))
        .is_err()
    });
    started_rx.recv().unwrap();
    queue(m);
    queued_tx.send(()).unwrap();
    holder.join().unwrap()
}

// MED 4: a result nobody took is dropped by the combiner; its drop panicked
// out of `serve` and left the monitor held for ever.
#[test]
fn a_panicking_drop_of_a_result_does_not_wedge_the_monitor() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
    let holder_panicked = behind_a_holder(&m, |m| drop(m.submit(|_| PanicOnDrop)));
    // The panic is resumed in the combiner, once it let go of the monitor.
    assert!(holder_panicked, "the drop's panic was lost");
    let m2 = Arc::clone(&m);
    assert_eq!(
        within(3, move || m2.call(|n| *n + 1)),
        Some(1),
        "monitor wedged"
    );
}

struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("waker");
    }
}

// MED 4: a completion's waker is user code, woken by the combiner.
#[test]
fn a_panicking_waker_does_not_wedge_the_monitor() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
    let mut c = None;
    let holder_panicked = behind_a_holder(&m, |m| {
        let mut fut = m.submit(|n| *n + 7);
        let waker = Waker::from(Arc::new(PanickingWaker));
        let mut cx = Context::from_waker(&waker);
        assert!(std::pin::Pin::new(&mut fut).poll(&mut cx).is_pending());
        c = Some(fut);
    });
    assert!(holder_panicked, "the waker's panic was lost");
    assert_eq!(c.unwrap().wait(), 7);
    let m2 = Arc::clone(&m);
    assert_eq!(
        within(3, move || m2.call(|n| *n + 1)),
        Some(1),
        "monitor wedged"
    );
}

// MED 4: an OR operand that lost drops its body when its monitor finds it
// taken. (Neither operand holds when the OR is made, so both are queued:
// an operand that runs at once leaves the others unsubmitted, see
// `tests/or.rs`.)
#[test]
fn a_panicking_drop_of_a_losing_or_body_does_not_wedge_the_monitor() {
    let a = Monitor::builder().order(Order::Relaxed).build(0u32);
    let b = Monitor::builder().order(Order::Relaxed).build(0u32);
    let body = PanicOnDrop;
    let c = or((
        b.op(
            |n| *n > 0,
            move |n| {
                let _keep = &body;
                *n
            },
        ),
        a.op(|n| *n > 0, |n| *n + 1),
    ))
    .unwrap();
    assert!(!c.is_done());
    a.submit(|n| *n = 1);
    assert_eq!(c.wait(), (1, 2));
    // b's operand is found taken at b's next task: its body drops there.
    let b = Arc::new(b);
    let b1 = Arc::clone(&b);
    let r = within(3, move || {
        catch_unwind(AssertUnwindSafe(|| b1.call(|n| *n = 1))).is_err()
    });
    assert_eq!(r, Some(true), "hung, or the drop's panic was lost");
    let b2 = Arc::clone(&b);
    assert_eq!(
        within(3, move || b2.call(|n| *n)),
        Some(1),
        "monitor wedged"
    );
}

// MED 3: `get_mut` changed the data without re-checking the waiting tasks:
// a task whose precondition it made true waited for ever.
#[test]
fn get_mut_runs_the_waiting_tasks_it_enables() {
    let r = within(3, || {
        let mut m = Monitor::builder().order(Order::Relaxed).build(0);
        let c = m.when(|n| *n > 0, |n| *n * 10);
        *m.get_mut() = 1;
        // Nobody submits anything after this.
        c.wait()
    });
    assert_eq!(r, Some(10), "the enabled task never ran");
}

/// `n` ORs whose operand on `b` never holds and whose operand on `a` runs
/// at once; how many of b's operands are still alive after (counted by a
/// value each captures).
fn or_losers_left(b_first: bool, n: usize) -> usize {
    let a = Monitor::builder().order(Order::Relaxed).build(0u64);
    let b = Monitor::builder().order(Order::Relaxed).build(0u64);
    let sentinel = Arc::new(());
    for _ in 0..n {
        let s = Arc::clone(&sentinel);
        let never = b.op(
            move |_| {
                let _ = &s;
                false
            },
            |n| *n,
        );
        let c = if b_first {
            or((never, a.op(|_| true, |n| *n))).unwrap()
        } else {
            or((a.op(|_| true, |n| *n), never)).unwrap()
        };
        assert_eq!(c.wait().0, usize::from(b_first));
    }
    // Nothing ever runs on b: only filing sweeps it.
    Arc::strong_count(&sentinel) - 1
}

// MED 5: OR operands that lost stayed filed on a monitor where nothing runs:
// memory grew with the number of ORs ever made, not with the live ones.
#[test]
fn losing_or_operands_do_not_pile_up_on_an_idle_monitor() {
    for b_first in [true, false] {
        let left_small = or_losers_left(b_first, 1_000);
        let left_large = or_losers_left(b_first, 10_000);
        // Amortised sweep: at most about twice the sweep threshold,
        // whatever the history.
        assert!(
            left_small <= 64 && left_large <= 64,
            "b_first {b_first}: {left_small} / {left_large} dead operands still filed"
        );
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    sync_core::testing::panic_text(p).to_string()
}

// LOW 9: a task submitting to its own monitor with the queue full waited
// for space that only its own thread could make: a deadlock. It now panics
// with a clear message, resumed in the task's waiter, and the monitor keeps
// serving.
#[test]
fn a_nested_submit_on_a_full_queue_panics_instead_of_deadlocking() {
    let r = within(3, || {
        let m = Arc::new(
            Monitor::builder()
                .order(Order::Relaxed)
                .capacity(1)
                .build(0u64),
        );
        let m1 = Arc::clone(&m);
        let err = catch_unwind(AssertUnwindSafe(|| {
            m.call(move |_| {
                drop(m1.submit(|n| *n += 1)); // queued: the queue is full now
                drop(m1.submit(|n| *n += 1));
            })
        }))
        .map_err(|p| panic_message(&*p));
        (err, m.call(|n| *n))
    });
    let (err, n) = r.expect("nested submit deadlocked");
    let msg = err.expect_err("the second nested submit must panic");
    assert!(msg.contains("its own monitor whose queue is full"), "{msg}");
    assert_eq!(n, 1, "the first nested submit ran");
}

// LOW 9, same for a nested call (documented as a deadlock before).
#[test]
fn a_call_from_a_task_of_the_same_monitor_panics_instead_of_deadlocking() {
    let r = within(3, || {
        let m = Arc::new(Monitor::new(0u64));
        let m1 = Arc::clone(&m);
        let err = catch_unwind(AssertUnwindSafe(|| m.call(move |_| m1.call(|n| *n))))
            .map_err(|p| panic_message(&*p));
        (err, m.call(|n| *n + 1))
    });
    let (err, n) = r.expect("nested call deadlocked");
    assert!(err.expect_err("must panic").contains("same monitor"));
    assert_eq!(n, 1);
}

// LOW 8: an AND whose operand's precondition panicked resolved to
// `Discarded`: the panic was lost.
#[test]
fn an_and_whose_precondition_panics_resumes_the_panic() {
    let a = Monitor::builder().order(Order::Relaxed).build(0u64);
    let b = Monitor::builder().order(Order::Relaxed).build(0u64);
    let c = active_monitor::and((
        a.op(|_| true, |n| *n),
        b.op(|_| -> bool { panic!("pre boom") }, |n| *n),
    ))
    .unwrap();
    let err = catch_unwind(AssertUnwindSafe(|| c.wait())).unwrap_err();
    assert_eq!(panic_message(&*err), "pre boom");
    // Both monitors keep serving.
    assert_eq!(a.call(|n| *n + 1) + b.call(|n| *n + 1), 2);
}

// HIGH 2: under relaxed order, a thread's 17th task waiting on a
// precondition parked the thread until the oldest ran: one thread that
// then submits the enabling tasks deadlocked. The bound is now 64 (a
// trade-off, see `Order::Relaxed`): up to it, nothing parks.
#[test]
fn relaxed_order_lets_one_thread_wait_on_many_preconditions() {
    // The next submission after `WAITING_LIMIT` waiting ones parks.
    let n = active_monitor::WAITING_LIMIT - 1;
    assert!(n > 16);
    let r = within(3, move || {
        let m = Monitor::builder().order(Order::Relaxed).build(0u32);
        let cs: Vec<_> = (0..n).map(|_| m.when(|n| *n > 0, |n| *n -= 1)).collect();
        for _ in 0..n {
            drop(m.submit(|n| *n += 1));
        }
        cs.into_iter().for_each(|c| c.wait());
        m.call(|n| *n)
    });
    assert_eq!(r, Some(0), "the thread was parked by its own waiting tasks");
}

// HIGH 2, async: 17 consumers awaiting `when` on one current-thread
// runtime, then a producer task on the same thread: the producer's
// submission parked the runtime's only thread (still so beyond 64).
#[test]
fn relaxed_order_many_async_consumers_on_one_thread() {
    let r = within(5, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            use std::collections::VecDeque;
            let q = Arc::new(
                Monitor::builder()
                    .order(Order::Relaxed)
                    .build(VecDeque::<u32>::new()),
            );
            let consumers: Vec<_> = (0..40)
                .map(|_| {
                    let q = Arc::clone(&q);
                    tokio::spawn(async move {
                        q.when(|d| !d.is_empty(), |d| d.pop_front().unwrap())
                            .await
                            .unwrap()
                    })
                })
                .collect();
            tokio::task::yield_now().await;
            let q2 = Arc::clone(&q);
            tokio::spawn(async move {
                for i in 0..40 {
                    q2.submit(move |d| d.push_back(i)).await.unwrap();
                }
            })
            .await
            .unwrap();
            let mut sum = 0;
            for c in consumers {
                sum += c.await.unwrap();
            }
            sum
        })
    });
    assert_eq!(r, Some((0..40).sum()), "the runtime's thread was parked");
}

// HIGH 2, futures' executor: same, with a local pool on one thread.
#[test]
fn relaxed_order_many_consumers_on_a_local_pool() {
    let r = within(5, || {
        use futures::task::LocalSpawnExt;
        let mut pool = futures::executor::LocalPool::new();
        let spawner = pool.spawner();
        let q = Arc::new(
            Monitor::builder()
                .order(Order::Relaxed)
                .build(Vec::<u32>::new()),
        );
        let total = Arc::new(std::sync::atomic::AtomicU32::new(0));
        for _ in 0..40 {
            let (q, total) = (Arc::clone(&q), Arc::clone(&total));
            spawner
                .spawn_local(async move {
                    let v = q
                        .when(|d| !d.is_empty(), |d| d.pop().unwrap())
                        .await
                        .unwrap();
                    total.fetch_add(v, std::sync::atomic::Ordering::Relaxed);
                })
                .unwrap();
        }
        pool.run_until_stalled();
        for i in 0..40 {
            drop(q.submit(move |d| d.push(i)));
        }
        pool.run();
        total.load(std::sync::atomic::Ordering::Relaxed)
    });
    assert_eq!(r, Some((0..40).sum()));
}

// Round 42: a monitor is a plain value, and a thread may move it (into a
// `Box`, a `Vec` that grows) while one of its tasks waits on a
// precondition. Program order named a monitor by its address: after the
// move, strict order took the same monitor for another one, and the
// enabling `submit` (rule 3) or `call` waited for the task it was to
// enable, for ever.
#[test]
fn a_moved_monitor_keeps_its_program_order() {
    let boxed = within(10, || {
        let m = Monitor::new(0u32);
        let first = m.when(|n| *n > 0, |n| *n);
        let m = Box::new(m); // moved
        m.submit(|n| *n = 1);
        first.wait()
    });
    assert_eq!(boxed, Some(1), "the submit after the move hung");
    let grown = within(10, || {
        let mut ms = vec![Monitor::new(0u32)];
        let first = ms[0].when(|n| *n > 0, |n| *n);
        ms.extend((0..16).map(|_| Monitor::new(0u32))); // reallocates: ms[0] moves
        ms[0].call(|n| *n = 2);
        first.wait()
    });
    assert_eq!(grown, Some(2), "the call after the move hung");
}

// Round 42: the last operand of an AND to finish dropped the values the
// AND would not hand out (beside another operand's panic, or a monitor
// dropped with its operand waiting) before completing it. A value whose
// drop panicked unwound out of that, and the AND never resolved: its
// waiter waited for ever.
#[test]
fn an_and_resolves_whatever_the_drop_of_a_value_it_leaves_does() {
    // Beside another operand's panic: the waiter gets that panic; the
    // drop's panic goes on in the thread that finished the AND.
    let panicked = within(10, || {
        let a = Monitor::new(0u32);
        let b = Monitor::new(0u32);
        let both = catch_unwind(AssertUnwindSafe(|| {
            active_monitor::and((
                a.op(|_| true, |_| Some(PanicOnDrop)),
                b.op(|_| true, |_| -> Option<PanicOnDrop> { panic!("operand 1") }),
            ))
            .unwrap()
        }));
        let both = match both {
            Ok(c) => c,
            // Both operands ran inline: the drop's panic resumed at the
            // end of `and`; nothing is left to wait for.
            Err(p) => return panic_message(&*p),
        };
        match catch_unwind(AssertUnwindSafe(|| both.wait())) {
            Ok(_) => String::from("the AND returned its values"),
            Err(p) => panic_message(&*p),
        }
    });
    assert!(
        matches!(
            panicked.as_deref(),
            Some("operand 1" | "drop of a user value")
        ),
        "the AND never resolved: {panicked:?}"
    );
    // Beside an operand discarded with its monitor.
    let discarded = within(10, || {
        let a = Monitor::new(0u32);
        let b = Monitor::new(0u32);
        let both = active_monitor::and((
            a.op(|_| true, |_| Some(PanicOnDrop)),
            b.op(|n| *n > 0, |_| None),
        ))
        .unwrap();
        let dropped = catch_unwind(AssertUnwindSafe(|| drop(b)));
        (dropped.is_err(), both.wait_result().is_err())
    });
    assert_eq!(
        discarded,
        Some((true, true)),
        "the AND never resolved (or the drop's panic was lost)"
    );
}

/// A value whose drop panics with a payload whose own drop panics.
struct PanicsWithAPanickingPayload;

impl Drop for PanicsWithAPanickingPayload {
    fn drop(&mut self) {
        struct Payload;
        impl Drop for Payload {
            fn drop(&mut self) {
                if !thread::panicking() {
                    panic!("drop of a panic's payload");
                }
            }
        }
        if !thread::panicking() {
            std::panic::panic_any(Payload);
        }
    }
}

// Round 42: an OR that ran an operand at once, and whose unrun operand's
// drop panicked, dropped its result in a catch and let the caught payload
// go by `let _`: a payload whose drop panics made `or` itself panic, where
// its docs say it returns normally with the first panic in the completion.
#[test]
fn an_or_returns_normally_whatever_the_payloads_it_drops() {
    let a = Monitor::new(0u32);
    let b = Monitor::new(0u32);
    let captured = PanicOnDrop;
    let either = catch_unwind(AssertUnwindSafe(|| {
        or((
            a.op(|_| true, |_| PanicsWithAPanickingPayload),
            b.op(
                |_| true,
                move |_| {
                    let _keep = &captured;
                    PanicsWithAPanickingPayload
                },
            ),
        ))
        .unwrap()
    }))
    .expect("`or` itself panicked");
    let err = catch_unwind(AssertUnwindSafe(|| drop(either.wait()))).unwrap_err();
    assert_eq!(panic_message(&*err), "drop of a user value");
}

// Round 42: an AND operand whose precondition panicked dropped its unrun
// body in its task, outside the panic policy. A body whose drop panicked
// unwound that task: the AND resolved to `Discarded`, and both panics were
// lost.
#[test]
fn an_and_whose_precondition_panics_keeps_the_panic_whatever_the_body_drop_does() {
    let a = Monitor::builder().order(Order::Relaxed).build(0u64);
    let b = Monitor::builder().order(Order::Relaxed).build(0u64);
    let captured = PanicOnDrop;
    let both = catch_unwind(AssertUnwindSafe(|| {
        active_monitor::and((
            a.op(|_| true, |n| *n),
            b.op(
                |_| -> bool { panic!("pre boom") },
                move |n| {
                    let _keep = &captured;
                    *n
                },
            ),
        ))
        .unwrap()
    }));
    match both {
        // The operands ran at once: the drop's panic resumed at the end of
        // `and` (the holder's operation).
        Err(p) => assert_eq!(panic_message(&*p), "drop of a user value"),
        Ok(both) => {
            let err = catch_unwind(AssertUnwindSafe(|| both.wait())).unwrap_err();
            assert_eq!(panic_message(&*err), "pre boom");
        }
    }
    assert_eq!(a.call(|n| *n + 1) + b.call(|n| *n + 1), 2);
}
