//! Memory after cancelled waits grows with what is live, not with the
//! history: futures dropped while awaiting program order, and `when` tasks
//! withdrawn with `Completion::cancel`. A counting global allocator
//! measures the bytes live in this test binary.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use active_monitor::{Monitor, Order};
use sync_core::testing::{CountingAlloc, live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

// The tests measure one counter: they run one at a time
// (`sync_core::testing::one_at_a_time`).

/// A task's stand-in: 1 KiB that a waker keeps alive.
struct Task {
    _stack: [u8; 1024],
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {}
}

/// Bytes still live after `rounds` submissions that await the worker's
/// pending `when` (strict order) and are dropped while they wait.
fn after_dropped_order_waits(rounds: usize) -> isize {
    let a = Monitor::new(0);
    let b = Monitor::new(0);
    // One submitter (a worker scope): its async submissions to `b` await
    // its pending `when` on `a` (rule 3).
    let (pending, kept) = futures::executor::block_on(active_monitor::worker(async {
        let pending = a.when(|n| *n > 0, |n| *n);
        let before = live_bytes();
        for _ in 0..rounds {
            let waker = Waker::from(Arc::new(Task { _stack: [0; 1024] }));
            let mut f = pin!(b.submit_async(|n| *n += 1));
            assert!(
                f.as_mut()
                    .poll(&mut Context::from_waker(&waker))
                    .is_pending(),
                "strict order: waits for the pending when"
            );
        }
        (pending, live_bytes() - before)
    }));
    // Enabled by another worker (ours would wait for it: strict order).
    std::thread::scope(|s| {
        s.spawn(|| a.submit(|n| *n = 1));
    });
    assert_eq!(pending.wait(), 1);
    kept
}

/// Asserts that what `after(rounds)` leaves live grows by less than
/// `bound` bytes from `few` to `many` rounds. Live bytes are the whole
/// process's: the least of three tries each, so that a transient
/// allocation elsewhere (a thread of an earlier test finishing) is not
/// taken for history kept. History kept would show in every try.
fn assert_history_not_kept(
    what: &str,
    after: fn(usize) -> isize,
    few: usize,
    many: usize,
    bound: isize,
) {
    let _one = sync_core::testing::one_at_a_time();
    let least = |rounds| (0..3).map(|_| after(rounds)).min().expect("three tries");
    let (kept_few, kept_many) = (least(few), least(many));
    assert!(
        kept_many - kept_few < bound,
        "{few} {what} kept {kept_few} bytes, {many} kept {kept_many}"
    );
}

#[test]
fn dropped_order_waits_do_not_pile_up() {
    // A withdrawn waiter's node is freed by the next newcomer's sweep:
    // what stays is a couple of nodes, whatever the history.
    assert_history_not_kept("dropped waits", after_dropped_order_waits, 10, 10_000, 4096);
}

/// Bytes still live after `rounds` `when` tasks withdrawn while they wait.
fn after_cancelled_whens(rounds: usize) -> isize {
    let m = Monitor::builder().order(Order::Relaxed).build(0u32);
    m.call(|_| ()); // warm: the thread-locals
    let before = live_bytes();
    for _ in 0..rounds {
        let body = [0u8; 256];
        let c = m.when(|n| *n > 0, move |n| *n + u32::from(body[0]));
        assert!(c.cancel().is_ok());
    }
    live_bytes() - before
}

#[test]
fn cancelled_whens_do_not_pile_up() {
    let _one = sync_core::testing::one_at_a_time();
    let few = after_cancelled_whens(100);
    let many = after_cancelled_whens(10_000);
    // The waiting list sweeps withdrawn tasks whenever it doubles.
    assert!(
        many - few < 16 * 1024,
        "100 cancelled whens kept {few} bytes, 10000 kept {many}"
    );
}

/// Producers that stop waiting for space (async submissions dropped while
/// the queue is full) leave their nodes in the monitor's queue of waiting
/// producers, which only its holder may pop. Producers are woken (and the
/// withdrawn nodes popped on the way) only once the queue is at most half
/// full; so the holder also sweeps them when it gives way after a batch,
/// once they outnumber the live ones, and a queue that stays full does not
/// keep one node per cancelled wait.
#[test]
fn producers_that_stop_waiting_for_space_leave_nothing_behind() {
    use std::sync::mpsc;

    let _one = sync_core::testing::one_at_a_time();
    const CANCELLED: usize = 2_000;
    // Capacity 4 and batch 1: the holder gives way after every task.
    let m = Arc::new(
        Monitor::builder()
            .capacity(4)
            .batch(1)
            .order(Order::Relaxed)
            .build(0u64),
    );
    // A holder whose task runs until `go`; queued behind it, a quick task,
    // one that runs until `go2`, and two more: after the quick one the
    // holder gives way with the queue still more than half full.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (go2_tx, go2_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let holder = {
        let (m, started_tx) = (Arc::clone(&m), started_tx.clone());
        std::thread::spawn(move || {
            m.call(move |n| {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                *n += 1;
            })
        })
    };
    started_rx.recv().unwrap();
    drop(m.submit(|n| *n += 1));
    drop(m.submit(move |n| {
        started_tx.send(()).unwrap();
        go2_rx.recv().unwrap();
        *n += 1;
    }));
    drop(m.submit(|n| *n += 1));
    drop(m.submit(|n| *n += 1));
    let waker = Waker::from(Arc::new(Task { _stack: [0; 1024] }));
    let mut cx = Context::from_waker(&waker);
    let before = live_bytes();
    for _ in 0..CANCELLED {
        let mut s = pin!(m.submit_async(|n| *n += 1000));
        assert!(s.as_mut().poll(&mut cx).is_pending(), "the queue is full");
    }
    // The holder's task ends; it runs the quick task, gives way (3 of 4
    // slots taken: nobody is woken for space) and runs the next task,
    // which waits.
    go_tx.send(()).unwrap();
    started_rx.recv().unwrap();
    let kept = live_bytes() - before;
    go2_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(m.call(|n| *n), 5);
    assert!(
        kept < 20_000,
        "{kept} bytes kept by {CANCELLED} cancelled waits for space"
    );
}

/// Bytes still live after `rounds` blocking waits by this thread for
/// `when` tasks that another thread enables (and that thread's waits for
/// this one's): a thread keeps its last waited-for task, to drop when it
/// next parks (see `Completion::wait`), so what stays is one task.
fn after_blocking_waits(rounds: usize) -> isize {
    let m = Monitor::new(false);
    m.call(|_| ()); // warm: the thread-locals
    let before = live_bytes();
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..rounds {
                m.when(|open| !*open, |open| *open = true).wait();
            }
        });
        for _ in 0..rounds {
            m.when(|open| *open, |open| *open = false).wait();
        }
    });
    live_bytes() - before
}

#[test]
fn blocking_waits_keep_one_task_per_thread_whatever_the_history() {
    assert_history_not_kept("blocking waits", after_blocking_waits, 10, 5_000, 1024);
}

/// Bytes still live after `rounds` `when` tasks with a 64 KiB result, each
/// waited for and its result dropped, behind an older `when` that stays
/// waiting. The submitter's record of program order points to its waiting
/// tasks; it used to let go of finished ones only from its front, so the
/// waiting one kept the memory of every task after it (a `Weak` keeps the
/// place of the result), up to `WAITING_LIMIT` of them.
fn after_finished_whens_behind_a_waiting_one(order: Order, rounds: usize) -> isize {
    assert!(rounds < active_monitor::WAITING_LIMIT);
    let m = Monitor::builder().order(order).build(0u64);
    m.call(|_| ()); // warm: the thread-locals
    let waiting = m.when(|n| *n == u64::MAX, |_| ());
    let before = live_bytes();
    for i in 0..rounds as u64 {
        let c = m.when(move |n| *n > i, |_| [7u8; 64 * 1024]);
        m.submit(|n| *n += 1);
        assert_eq!(c.wait()[0], 7);
    }
    let kept = live_bytes() - before;
    assert!(waiting.cancel().is_ok());
    kept
}

#[test]
fn finished_whens_behind_a_waiting_one_are_not_kept() {
    let _one = sync_core::testing::one_at_a_time();
    for order in [Order::Strict, Order::Relaxed] {
        let least = |rounds| {
            (0..3)
                .map(|_| after_finished_whens_behind_a_waiting_one(order, rounds))
                .min()
                .expect("three tries")
        };
        let (few, many) = (least(2), least(60));
        // The last task or two (until the next look at the record, or the
        // thread's next park), not one per round: 60 would be 3.75 MiB.
        assert!(
            many - few < 4 * 64 * 1024,
            "{order:?}: 2 finished whens kept {few} bytes, 60 kept {many}"
        );
    }
}
