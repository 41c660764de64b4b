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
