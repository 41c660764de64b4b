//! Wakers that run their task on the spot (an inline executor), so that a
//! task whose precondition a holder made true runs its body and, letting
//! go of the monitor, wakes the next waiting task inside the waker that
//! woke it: one call then reaches every waiting task. Those wakeups must
//! not nest one inside the other, or the stack grows with the number of
//! waiting tasks and the process aborts on a stack overflow.
#![cfg(not(loom))]

use std::sync::Arc;

use active_monitor::Monitor;
use sync_core::testing::{InlineTask, on_small_stack};

/// Waiting tasks: nested, each wakeup took kilobytes of a debug build's
/// stack, so this many overflowed the test thread's.
const TASKS: usize = 5_000;
/// The test thread's stack: room for a few dozen nested wakeups, not for
/// one per task.
const STACK: usize = 4 << 20;

#[test]
fn a_call_reaching_every_waiting_inline_when_async_keeps_the_stack_flat() {
    on_small_stack("when_async", STACK, || {
        let m = Arc::new(Monitor::new(usize::MAX));
        // Task `i` waits for the count to be `i` and makes it `i + 1`.
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let m = Arc::clone(&m);
                InlineTask::spawn(async move {
                    m.when_async(move |n| *n == i, |n| *n += 1).await;
                })
            })
            .collect();
        // Enables the first, whose body enables the next...
        m.call(|n| *n = 0);
        assert_eq!(m.call(|n| *n), TASKS, "every task ran once");
        assert!(tasks.iter().all(|t| t.is_done()));
    });
}

#[test]
fn a_call_reaching_every_waiting_inline_task_that_calls_again_keeps_the_stack_flat() {
    on_small_stack("when then call", STACK, || {
        let m = Arc::new(Monitor::new(usize::MAX));
        // Task `i` waits for the count to be `i`, then makes it `i + 1`
        // with a call of its own.
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let m = Arc::clone(&m);
                InlineTask::spawn(async move {
                    m.when_async(move |n| *n == i, |_| ()).await;
                    m.call(|n| *n += 1);
                })
            })
            .collect();
        m.call(|n| *n = 0);
        assert_eq!(m.call(|n| *n), TASKS, "every task ran once");
        assert!(tasks.iter().all(|t| t.is_done()));
    });
}

/// A task on an inline executor awaits a completion that another thread's
/// holder fills, then calls the monitor. Woken while that holder still
/// held the monitor, its poll ran there: its `call` met the monitor held
/// by its own thread and panicked ("from a task of the same monitor"),
/// which lost the task and resumed in the holder's own, unrelated `call`.
/// The completion's waker, like an awaiter's, runs once the holder has let
/// go of the monitor: the task's `call` then finds it free.
#[test]
fn a_completion_whose_waker_polls_on_the_spot_finds_the_monitor_free() {
    use std::sync::mpsc;

    // Each way of awaiting a task the holder runs: a completion, an async
    // submission's result, and an OR's completion.
    for form in 0..3 {
        let m = Arc::new(Monitor::new(0u64));
        let (held, go) = (mpsc::channel(), mpsc::channel::<()>());
        let holder = {
            let m = Arc::clone(&m);
            let (held, go) = (held.0, go.1);
            std::thread::spawn(move || {
                m.call(move |n| {
                    held.send(()).expect("the test waits");
                    go.recv().expect("the test lets go");
                    *n += 1;
                });
            })
        };
        held.1.recv().expect("the holder runs");
        // Queued behind the holder's call: the holder runs it, then wakes
        // this task, which calls the monitor.
        let task = {
            let m = Arc::clone(&m);
            InlineTask::spawn(async move {
                match form {
                    0 => m.submit(|n| *n += 10).await.expect("ran"),
                    1 => m.call_async(|n| *n += 10).await,
                    _ => {
                        let other = Monitor::new(false);
                        let either = active_monitor::or((
                            m.op(|_| true, |n| *n += 10),
                            other.op(|ready| *ready, |_| ()),
                        ))
                        .expect("two monitors");
                        assert_eq!(either.await.expect("ran").0, 0, "the first ran");
                    }
                }
                m.call(|n| *n += 100);
            })
        };
        assert!(
            !task.is_done(),
            "form {form}: the task waits for the holder"
        );
        go.0.send(()).expect("the holder waits");
        assert!(
            holder.join().is_ok(),
            "form {form}: the holder's call unwound with the task's panic"
        );
        assert!(task.is_done(), "form {form}: the task did not finish");
        assert_eq!(m.call(|n| *n), 111, "form {form}");
    }
}

/// The same for a task's program-order wait: in a [`worker`] scope under
/// strict order, a submission to another monitor awaits the task's earlier
/// one, which another thread's holder runs. Notified under that holder, the
/// task went on in its waker and its `call` of the first monitor panicked.
///
/// [`worker`]: active_monitor::worker
#[test]
fn a_program_order_wait_whose_waker_polls_on_the_spot_finds_the_monitor_free() {
    use std::sync::mpsc;

    let (m, other) = (Arc::new(Monitor::new(0u64)), Arc::new(Monitor::new(0u64)));
    let (held, go) = (mpsc::channel(), mpsc::channel::<()>());
    let holder = {
        let m = Arc::clone(&m);
        let (held, go) = (held.0, go.1);
        std::thread::spawn(move || {
            m.call(move |n| {
                held.send(()).expect("the test waits");
                go.recv().expect("the test lets go");
                *n += 1;
            });
        })
    };
    held.1.recv().expect("the holder runs");
    let task = {
        let (m, other) = (Arc::clone(&m), Arc::clone(&other));
        InlineTask::spawn(active_monitor::worker(async move {
            // Queued behind the holder's call, and kept outstanding.
            let _earlier = m.submit_async(|n| *n += 10).completion().await;
            // Rule 3: awaits the earlier task, which the holder runs.
            other.submit_async(|n| *n += 1).await;
            m.call(|n| *n += 100);
        }))
    };
    assert!(!task.is_done(), "the task waits for the holder");
    go.0.send(()).expect("the holder waits");
    assert!(
        holder.join().is_ok(),
        "the holder's call unwound with the task's panic"
    );
    assert!(task.is_done(), "the task did not finish");
    assert_eq!((m.call(|n| *n), other.call(|n| *n)), (111, 1));
}
