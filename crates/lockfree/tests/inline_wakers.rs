//! Wakers that run their task on the spot (an inline executor), so that a
//! task woken by a release takes the lock or permits and releases them in
//! turn, inside the waker that woke it: one release then reaches every
//! queued task. Those wakeups must not nest one inside the other, or the
//! stack grows with the queue and the process aborts on a stack overflow.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use lockfree_sync::{Fairness, Mutex, Semaphore};
use sync_core::testing::{InlineTask as Inline, on_small_stack};

/// Queued tasks: on the old code each nested wakeup took a few hundred
/// bytes of stack (release build) or kilobytes (debug), so this many
/// overflowed the test thread's stack.
const TASKS: usize = 20_000;
/// The test thread's stack: room for a few dozen nested wakeups, not for
/// one per task.
const STACK: usize = 4 << 20;

fn unlock_runs_every_queued_inline_task(fairness: Fairness) {
    on_small_stack("unlock", STACK, move || {
        let m = Arc::new(Mutex::with_fairness(0usize, fairness));
        let held = m.lock();
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let m = Arc::clone(&m);
                Inline::spawn(async move { *m.lock_async().await += 1 })
            })
            .collect();
        // Wakes the first task, whose waker runs it, whose unlock wakes the
        // next...
        drop(held);
        assert_eq!(*m.lock(), TASKS, "every task ran once");
        assert!(tasks.iter().all(|t| t.is_done()));
    });
}

#[test]
fn an_unlock_reaching_every_queued_inline_task_keeps_the_stack_flat_barging() {
    unlock_runs_every_queued_inline_task(Fairness::Barging);
}

#[test]
fn an_unlock_reaching_every_queued_inline_task_keeps_the_stack_flat_fifo() {
    unlock_runs_every_queued_inline_task(Fairness::Fifo);
}

#[test]
fn a_release_reaching_every_queued_inline_task_keeps_the_stack_flat() {
    on_small_stack("release", STACK, || {
        let sem = Arc::new(Semaphore::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (sem, ran) = (Arc::clone(&sem), Arc::clone(&ran));
                Inline::spawn(async move {
                    let permit = sem.acquire_async().await.unwrap();
                    ran.fetch_add(1, SeqCst);
                    drop(permit); // delivers to the next task
                })
            })
            .collect();
        sem.add_permits(1);
        assert_eq!(ran.load(SeqCst), TASKS, "every task ran once");
        assert_eq!(sem.available_permits(), 1);
        assert!(tasks.iter().all(|t| t.is_done()));
    });
}

/// A pipeline of `TASKS` channels, each stage a task that receives from one
/// and sends to the next: one send at the head runs every stage inside the
/// wakers of the stages before it.
#[test]
fn a_send_through_a_pipeline_of_inline_mpsc_tasks_keeps_the_stack_flat() {
    on_small_stack("mpsc pipeline", STACK, || {
        let (head, mut rx) = lockfree_sync::mpsc::channel::<usize>();
        let mut stages = Vec::with_capacity(TASKS);
        for _ in 0..TASKS {
            let (tx, next_rx) = lockfree_sync::mpsc::channel::<usize>();
            let mut stage_rx = std::mem::replace(&mut rx, next_rx);
            stages.push(Inline::spawn(async move {
                let v = stage_rx.recv_async().await.expect("a value");
                tx.send(v + 1).expect("the next stage waits");
            }));
        }
        head.send(0).expect("the first stage waits");
        assert_eq!(rx.try_recv(), Ok(TASKS), "every stage ran once");
        assert!(stages.iter().all(|t| t.is_done()));
    });
}

#[test]
fn a_send_through_a_pipeline_of_inline_csp_tasks_keeps_the_stack_flat() {
    on_small_stack("csp pipeline", STACK, || {
        let (mut head, mut rx) = lockfree_sync::csp::channel::<usize>();
        let mut stages = Vec::with_capacity(TASKS);
        for _ in 0..TASKS {
            let (mut tx, next_rx) = lockfree_sync::csp::channel::<usize>();
            let mut stage_rx = std::mem::replace(&mut rx, next_rx);
            stages.push(Inline::spawn(async move {
                let v = stage_rx.recv_async().await.expect("a value");
                tx.send_async(v + 1).await.expect("the next stage takes it");
            }));
        }
        // The last stage's send waits for a receiver: this one.
        let tail = std::thread::scope(|s| {
            let tail = s.spawn(move || rx.recv().expect("the last stage sends"));
            head.send(0).expect("the first stage waits");
            tail.join().expect("the tail receives")
        });
        assert_eq!(tail, TASKS, "every stage ran once");
        assert!(stages.iter().all(|t| t.is_done()));
    });
}

thread_local! {
    /// A guard a thread keeps until it exits: its destructor unlocks.
    static KEPT: std::cell::RefCell<Option<lockfree_sync::ArcMutexGuard<usize>>> =
        const { std::cell::RefCell::new(None) };
}

/// An unlock in a thread-local's destructor, at the thread's exit, reaching
/// every queued task: a thread-local destroyed before it (here the wake
/// chain's own queue, made by an earlier chain on the thread, was destroyed
/// first) must not make the wakeups nest (on the old code the chain then
/// woke every task where it came up, and the thread overflowed its stack:
/// SIGSEGV).
#[test]
fn an_unlock_in_a_thread_locals_destructor_reaching_every_queued_inline_task_keeps_the_stack_flat()
{
    let ran = Arc::new(AtomicUsize::new(0));
    let queue = |m: &Arc<Mutex<usize>>, n: usize, ran: &Arc<AtomicUsize>| -> Vec<_> {
        (0..n)
            .map(|_| {
                let (m, ran) = (Arc::clone(m), Arc::clone(ran));
                Inline::spawn(async move {
                    *m.lock_async().await += 1;
                    ran.fetch_add(1, SeqCst);
                })
            })
            .collect()
    };
    let exiting = {
        let ran = Arc::clone(&ran);
        std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || {
                // Made first, so destroyed after whatever is made below.
                KEPT.with(|_| {});
                // A chain past the nesting depth on this thread, so that
                // the chain keeps what it needs for one.
                let warm = Arc::new(Mutex::new(0));
                let held = warm.lock_arc();
                let warmed = Arc::new(AtomicUsize::new(0));
                let _warm_tasks = queue(&warm, 100, &warmed);
                drop(held);
                assert_eq!(warmed.load(SeqCst), 100);
                // Then the thread keeps a guard that TASKS tasks wait for.
                let m = Arc::new(Mutex::new(0));
                let held = m.lock_arc();
                let tasks = queue(&m, TASKS, &ran);
                KEPT.with(|kept| *kept.borrow_mut() = Some(held));
                tasks
            })
            .expect("a thread")
    };
    let tasks = exiting.join().expect("the thread exits");
    assert_eq!(ran.load(SeqCst), TASKS, "every task ran once");
    assert!(tasks.iter().all(|t| t.is_done()));
}
