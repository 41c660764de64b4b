//! A panic that the monitor defers (a result nobody took whose `Drop`
//! panics, here) resumes in whichever thread was holding the monitor, at
//! the end of its call or submission. These tests run such panics against
//! callers whose own tasks are queued behind a holder: each caller's task
//! must run exactly once whether or not a foreign panic reaches the caller,
//! and the monitor must never be left held.
//!
//! Before the fix, a caller serving the monitor resumed the foreign panic
//! half-way through its `call`, unwinding past its own task while that task
//! was still queued (on the caller's stack) or handed back to it: the
//! monitor stayed held for ever (4 runs in 6 stalled within 2.3 s) or the
//! process aborted; and a submitter that served a full queue to make room
//! resumed it before pushing its task, which was lost (25-296 lost per run).
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use active_monitor::Monitor;

/// A task's result whose drop panics (unless the thread already unwinds).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("a dropped result panics");
        }
    }
}

/// Joins the test threads with a watchdog: a thread stuck in a wedged
/// monitor fails the test (saying `what`) instead of hanging it.
fn join_within_10_s(threads: Vec<thread::JoinHandle<()>>, what: &str) {
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        for t in threads {
            t.join().expect("the test threads catch every panic");
        }
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the test threads did not finish within 10 s{what}"
    );
}

/// How the callers hand in their tasks.
#[derive(Clone, Copy)]
enum Callers {
    Call,
    SubmitAndWait,
}

/// One thread submits tasks whose results panic when dropped (fire and
/// forget), three call (or submit and wait) at once, until the callers have
/// met `foreign` foreign panics or `limit` has passed. Every task must have
/// run once: the counter ends at the number of tasks handed in. Fails,
/// rather than hangs, if the threads stop making progress.
fn run(capacity: usize, callers: Callers, foreign: u64, limit: Duration) {
    let m = Arc::new(Monitor::builder().capacity(capacity).build(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let handed_in = Arc::new(AtomicU64::new(0));
    let panics_seen = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    {
        let (m, stop, handed_in) = (m.clone(), stop.clone(), handed_in.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Relaxed) {
                // The submission itself may receive another deferred panic
                // (ours, from an earlier result): the task is queued anyway.
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    drop(m.submit(|n| {
                        *n += 1;
                        PanicOnDrop
                    }))
                }));
                handed_in.fetch_add(1, Relaxed);
            }
        }));
    }
    for _ in 0..3 {
        let (m, stop, handed_in, seen) = (
            m.clone(),
            stop.clone(),
            handed_in.clone(),
            panics_seen.clone(),
        );
        threads.push(thread::spawn(move || {
            while !stop.load(Relaxed) {
                let r = catch_unwind(AssertUnwindSafe(|| match callers {
                    Callers::Call => m.call(|n| *n += 1),
                    Callers::SubmitAndWait => m.submit(|n| *n += 1).wait(),
                }));
                handed_in.fetch_add(1, Relaxed);
                if r.is_err() {
                    seen.fetch_add(1, Relaxed);
                }
            }
        }));
    }
    let start = Instant::now();
    let mut last = (0, Instant::now());
    while start.elapsed() < limit && panics_seen.load(Relaxed) < foreign {
        thread::sleep(Duration::from_millis(20));
        let now = handed_in.load(Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        }
        assert!(
            last.1.elapsed() < Duration::from_secs(5),
            "no task handed in for 5 s: the monitor is wedged ({m:?})"
        );
    }
    stop.store(true, Relaxed);
    join_within_10_s(threads, &format!(": the monitor is wedged ({m:?})"));
    let ran = m.call(|n| *n);
    assert_eq!(
        ran,
        handed_in.load(Relaxed),
        "every task handed in runs exactly once, foreign panic or not"
    );
}

#[test]
fn a_foreign_panic_never_unwinds_a_call_whose_task_is_queued() {
    run(256, Callers::Call, 300, Duration::from_secs(3));
}

#[test]
fn a_foreign_panic_never_loses_a_task_submitted_into_a_full_queue() {
    run(16, Callers::SubmitAndWait, 300, Duration::from_secs(3));
}

/// Producers of a queue of two, most of them fire and forget: they keep
/// finding it full, registering for space and withdrawing when room
/// appears at once, and every few dozen withdrawals one sweeps the
/// withdrawn and, finding the monitor idle, serves it before pushing its
/// own task. Results nobody took panic on drop. Before the fix, that
/// sweep's serve resumed the foreign panic in the producer before its
/// task was pushed: the task was lost (1 in about 20 million here, in 2 of
/// 6 runs of 3 s; so this test fails on the old code only now and then).
#[test]
fn a_foreign_panic_never_loses_a_task_whose_producer_swept_the_space_queue() {
    let m = Arc::new(Monitor::builder().capacity(2).build(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let handed_in = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..2 {
        let (m, stop, handed_in) = (m.clone(), stop.clone(), handed_in.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Relaxed) {
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    drop(m.submit(|n| {
                        *n += 1;
                        PanicOnDrop
                    }))
                }));
                handed_in.fetch_add(1, Relaxed);
            }
        }));
    }
    for _ in 0..6 {
        let (m, stop, handed_in) = (m.clone(), stop.clone(), handed_in.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Relaxed) {
                let _ = catch_unwind(AssertUnwindSafe(|| drop(m.submit(|n| *n += 1))));
                handed_in.fetch_add(1, Relaxed);
            }
        }));
    }
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Relaxed);
    join_within_10_s(threads, &format!(": the monitor is wedged ({m:?})"));
    assert_eq!(
        m.call(|n| *n),
        handed_in.load(Relaxed),
        "every task handed in runs exactly once, foreign panic or not"
    );
}

/// Under strict order a submitter's next submission to another monitor
/// looks at its last task (rule 3) through the order record's weak
/// reference. That look may hold the task's last reference when the
/// holder that ran it lets go of its own: the look then drops the task,
/// and with it the result nobody took. Before the fix, that drop's panic
/// went on at once, at the start of the submission, which never happened:
/// the `call` panicked and its task never ran.
#[test]
fn a_foreign_panic_met_by_program_order_never_loses_the_task_it_holds_back() {
    let a = Arc::new(Monitor::new(0u64));
    let b = Arc::new(Monitor::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let handed_in = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    // Keeps `a` busy, so that the dropped submissions below are queued and
    // run by another thread.
    {
        let (a, stop) = (a.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Relaxed) {
                let _ = catch_unwind(AssertUnwindSafe(|| a.call(|n| *n += 1)));
            }
        }));
    }
    let panics_seen = Arc::new(AtomicU64::new(0));
    for _ in 0..3 {
        let (a, b, stop, handed_in, seen) = (
            a.clone(),
            b.clone(),
            stop.clone(),
            handed_in.clone(),
            panics_seen.clone(),
        );
        threads.push(thread::spawn(move || {
            while !stop.load(Relaxed) {
                let _ = catch_unwind(AssertUnwindSafe(|| drop(a.submit(|_| PanicOnDrop))));
                let r = catch_unwind(AssertUnwindSafe(|| b.call(|n| *n += 1)));
                handed_in.fetch_add(1, Relaxed);
                if r.is_err() {
                    seen.fetch_add(1, Relaxed);
                }
            }
        }));
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) && panics_seen.load(Relaxed) < 300 {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Relaxed);
    join_within_10_s(threads, "");
    assert_eq!(
        b.call(|n| *n),
        handed_in.load(Relaxed),
        "every call handed in runs exactly once, foreign panic or not"
    );
}

/// A call on an idle monitor runs its body in place and returns the
/// body's result straight into its caller's place. A panic deferred
/// meanwhile (a result nobody took whose `Drop` panics, of another monitor
/// the body called) resumed as the call's last step, with the result
/// already there: Rust does not drop a function's return value when a
/// local's `Drop` unwinds after it is written, so the result was leaked,
/// its `Drop` never run. Here it is a lockfree-sync permit: never given
/// back, and the next acquire waited for ever.
#[test]
fn a_panic_resumed_at_the_end_of_an_inline_call_drops_the_call_s_result() {
    use active_monitor::Order;
    use sync_core::testing::DropBomb;
    let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    let m = Monitor::builder().order(Order::Relaxed).build(());
    let o = Monitor::builder().order(Order::Relaxed).build(false);
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bomb = DropBomb(Arc::clone(&dropped));
    drop(o.when(|e| *e, move |_| bomb));
    let s = Arc::clone(&sem);
    let r = catch_unwind(AssertUnwindSafe(|| {
        // Idle: the body runs here, and so does `o`'s `when`, whose
        // result is kept until the call has let go of `m`.
        m.call(|_| {
            o.call(|e| *e = true);
            s.try_acquire_arc().expect("a permit is free")
        })
    }));
    let p = r.expect_err("the bomb's panic goes on at the end of the call");
    assert_eq!(
        p.downcast_ref::<String>().map(String::as_str),
        Some(DropBomb::PANIC)
    );
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        sem.available_permits(),
        1,
        "the call's result (a permit) was leaked, not dropped"
    );
}

/// The same with a result too large to copy (written straight into the
/// caller's place): the call returns it, and the deferred panic goes on at
/// the thread's next operation instead.
#[test]
fn a_panic_deferred_in_an_inline_call_with_a_large_result_goes_on_at_the_next_operation() {
    use active_monitor::Order;
    use sync_core::testing::DropBomb;
    struct Large {
        _permit: lockfree_sync::ArcSemaphorePermit,
        _pad: [u8; 16 * 1024],
    }
    let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    let m = Monitor::builder().order(Order::Relaxed).build(());
    let o = Monitor::builder().order(Order::Relaxed).build(false);
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bomb = DropBomb(Arc::clone(&dropped));
    drop(o.when(|e| *e, move |_| bomb));
    let s = Arc::clone(&sem);
    let large = m.call(|_| {
        o.call(|e| *e = true);
        Large {
            _permit: s.try_acquire_arc().expect("a permit is free"),
            _pad: [0; 16 * 1024],
        }
    });
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(sem.available_permits(), 0, "the caller holds it");
    drop(large);
    assert_eq!(sem.available_permits(), 1);
    let p = catch_unwind(AssertUnwindSafe(|| m.call(|_| ())))
        .expect_err("the bomb's panic goes on at the next operation");
    assert_eq!(
        p.downcast_ref::<String>().map(String::as_str),
        Some(DropBomb::PANIC)
    );
}

/// How a test takes a completion's result.
#[derive(Clone, Copy)]
enum Take {
    Wait,
    WaitResult,
    Await,
}

/// A relaxed monitor (so that this thread's next submissions elsewhere do
/// not wait for it) and a `when` on it, still waiting, whose precondition
/// holds a `DropBomb`; with the bomb's drop count.
fn a_when_with_a_bombed_precondition<R: Send + 'static>(
    body: impl FnOnce(&mut bool) -> R + Send + 'static,
) -> (
    Monitor<bool>,
    active_monitor::Completion<R>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let m = Monitor::builder()
        .order(active_monitor::Order::Relaxed)
        .build(false);
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bomb = sync_core::testing::DropBomb(Arc::clone(&dropped));
    let c = m.when(
        move |e: &bool| {
            let _held = &bomb;
            *e
        },
        body,
    );
    (m, c, dropped)
}

/// Asserts that `p` is a `DropBomb`'s panic.
fn assert_the_bomb_s(p: &Box<dyn std::any::Any + Send>) {
    assert_eq!(
        p.downcast_ref::<String>().map(String::as_str),
        Some(sync_core::testing::DropBomb::PANIC)
    );
}

/// A `when` whose precondition's captures panic when dropped, enabled by
/// another submission: once it has run, its waiter holds the task's last
/// reference, and lets go of it once the result is out.
///
/// Found before: `wait` read the result straight into its caller's place
/// and then dropped the task, so the precondition's panic unwound after the
/// result was written, which Rust does not drop then, and the result (a
/// lockfree-sync permit) was leaked; when the task's own panic was being
/// resumed, that drop panicked during the unwind and aborted the process.
/// Then (found by review): the drop's panic was deferred, and went on in
/// the thread's next operation, on any monitor, or was lost. Now it
/// resumes from the wait that made the drop, the result dropped first, and
/// a waiter that unwinds already discards it.
fn a_completion_s_wait_drops_a_precondition_that_panics(body_panics: bool, take: Take) {
    let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    let s = Arc::clone(&sem);
    let (m, c, dropped) = a_when_with_a_bombed_precondition(move |_| {
        assert!(!body_panics, "the task's own panic");
        s.try_acquire_arc().expect("a permit is free")
    });
    // Runs the `when`; the executor lets go of the task at the call's end.
    m.call(|e| *e = true);
    let r = catch_unwind(AssertUnwindSafe(|| match take {
        Take::Wait => c.wait(),
        Take::WaitResult => c.wait_result().expect("it ran"),
        Take::Await => futures::executor::block_on(c).expect("it ran"),
    }));
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
    let p = r.expect_err("the wait that dropped the precondition panics");
    if body_panics {
        // The task's own panic; the precondition's is discarded.
        assert_eq!(p.downcast_ref::<&str>(), Some(&"the task's own panic"));
    } else {
        assert_the_bomb_s(&p);
    }
    assert_eq!(sem.available_permits(), 1, "the result was leaked");
    // Nothing goes on at the thread's next operations, on this monitor or
    // another.
    let other = Monitor::new(0u64);
    assert_eq!(other.call(|n| std::mem::replace(n, 1)), 0);
    m.call(|_| ());
    assert_eq!(other.call(|n| *n), 1);
}

#[test]
fn a_completion_s_wait_drops_a_panicking_precondition_after_taking_the_result() {
    a_completion_s_wait_drops_a_precondition_that_panics(false, Take::Wait);
}

#[test]
fn a_completion_s_wait_result_drops_a_panicking_precondition_after_taking_the_result() {
    a_completion_s_wait_drops_a_precondition_that_panics(false, Take::WaitResult);
}

#[test]
fn an_awaited_completion_drops_a_panicking_precondition_after_taking_the_result() {
    a_completion_s_wait_drops_a_precondition_that_panics(false, Take::Await);
}

#[test]
fn a_completion_s_wait_drops_a_panicking_precondition_while_the_task_s_panic_resumes() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_PRECONDITION_CHILD",
        "a_completion_s_wait_drops_a_panicking_precondition_while_the_task_s_panic_resumes",
        || a_completion_s_wait_drops_a_precondition_that_panics(true, Take::Wait),
    );
}

/// A result larger than 4 KiB is read straight into the waiter's place:
/// the panic of the precondition that the wait drops then cannot go on
/// from the wait without leaking the result, and is kept for the thread's
/// next operation, as documented (as a `call`'s on an idle monitor).
#[test]
fn after_a_large_result_a_precondition_s_drop_panic_goes_on_at_the_next_operation() {
    let (m, c, dropped) = a_when_with_a_bombed_precondition(|_| [7u8; 8192]);
    m.call(|e| *e = true);
    let r = c.wait();
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!((r[0], r[8191]), (7, 7));
    let p = catch_unwind(AssertUnwindSafe(|| m.call(|_| ())))
        .expect_err("the precondition's panic goes on at the next operation");
    assert_the_bomb_s(&p);
    m.call(|_| ());
}

/// A `when` discarded with its monitor, whose precondition panics when
/// dropped: the waiter that finds it discarded holds its last reference,
/// and the panic is that wait's, not the thread's next operation's (found
/// by review: `drop(monitor)` and the wait returned, and an unrelated call
/// on another monitor panicked).
#[test]
fn a_discarded_task_s_panicking_precondition_goes_on_in_the_wait_that_drops_it() {
    for take in [Take::WaitResult, Take::Await] {
        let (m, c, dropped) = a_when_with_a_bombed_precondition(|_| 1u32);
        drop(m);
        assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 0);
        let r = catch_unwind(AssertUnwindSafe(|| match take {
            Take::Await => futures::executor::block_on(c),
            _ => c.wait_result(),
        }));
        assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
        let p = r.expect_err("the wait that dropped the precondition panics");
        assert_the_bomb_s(&p);
        let other = Monitor::new(0u64);
        assert_eq!(other.call(|n| std::mem::replace(n, 1)), 0);
    }
}

/// A lease whose `Drop` returns it with a call of `x`, then counts it.
struct Lease(Arc<Monitor<u64>>, Arc<AtomicU64>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.call(|n| *n += 1);
        self.1.fetch_add(1, Relaxed);
    }
}

/// At the end of a call, two results nobody took are dropped, newest
/// first: one whose `Drop` panics, then a lease whose `Drop` calls `x` and
/// then counts. The first panic was kept for the call's end, and the
/// lease's own call of `x` resumed it at its end, inside the lease's
/// `Drop`: the rest of that `Drop` never ran (a permit never given back).
/// The panic of one result's drop now goes on where it belongs, at the end
/// of the operation that served it, not in the next result's `Drop`.
#[test]
fn a_result_s_drop_panic_does_not_cut_the_next_result_s_drop_short() {
    use active_monitor::Order;
    use sync_core::testing::DropBomb;
    let x = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let z = Arc::new(Monitor::builder().order(Order::Relaxed).build(()));
    let counted = Arc::new(AtomicU64::new(0));
    let bombs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (lease, bomb) = (Lease(x.clone(), counted.clone()), DropBomb(bombs.clone()));
    let z2 = z.clone();
    let r = catch_unwind(AssertUnwindSafe(|| {
        // Queued behind this body, run by its serve: both results are
        // kept until the call's end.
        z.call(move |_| {
            drop(z2.submit(move |_| lease));
            drop(z2.submit(move |_| bomb));
        })
    }));
    let p = r.expect_err("the bomb's panic goes on at the end of the call");
    assert_eq!(
        p.downcast_ref::<String>().map(String::as_str),
        Some(DropBomb::PANIC)
    );
    assert_eq!(bombs.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(x.call(|n| *n), 1, "the lease was returned once");
    assert_eq!(counted.load(Relaxed), 1, "the lease's Drop ran to its end");
}

/// A waker whose `wake` panics, and a task polled on the spot by its
/// waker, both woken at the end of a call that enabled their `when_async`:
/// the task's next step is a call of `x`, whose end resumed the first
/// waker's panic inside the task's poll. The task's future unwound, and
/// the task was lost (an `async fn` that panicked is never polled again).
/// The waker's panic now goes on at the end of the call that woke it.
#[test]
fn a_waker_s_panic_does_not_unwind_another_task_polled_on_the_spot() {
    use active_monitor::Order;
    struct PanickingWaker;
    impl std::task::Wake for PanickingWaker {
        fn wake(self: Arc<Self>) {
            panic!("a waker panics");
        }
    }
    let x = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let v = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    // Filed first: woken first.
    let mut first = Box::pin(v.when_async(|on: &bool| *on, |_| ()));
    let waker = std::task::Waker::from(Arc::new(PanickingWaker));
    let cx = &mut std::task::Context::from_waker(&waker);
    assert!(std::future::Future::poll(first.as_mut(), cx).is_pending());
    let stepped = Arc::new(AtomicBool::new(false));
    let task = {
        let (v, x, stepped) = (v.clone(), x.clone(), stepped.clone());
        sync_core::testing::InlineTask::spawn(async move {
            v.when_async(|on: &bool| *on, |_| ()).await;
            x.call(|n| *n += 1);
            stepped.store(true, Relaxed);
        })
    };
    let r = catch_unwind(AssertUnwindSafe(|| v.call(|on| *on = true)));
    let p = r.expect_err("the waker's panic goes on at the end of the call");
    assert_eq!(p.downcast_ref::<&str>(), Some(&"a waker panics"));
    assert!(task.is_done(), "the task polled on the spot was lost");
    assert!(stepped.load(Relaxed));
    assert_eq!(x.call(|n| *n), 1);
    drop(first);
}
