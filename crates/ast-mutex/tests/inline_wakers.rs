//! Wakers that run their task on the spot (an inline executor), so that a
//! task woken by an exit enters, and exits in turn inside the waker that
//! woke it: one exit then reaches every queued task. Those wakeups must not
//! nest one inside the other, or the stack grows with the queue and the
//! process aborts on a stack overflow.
#![cfg(not(loom))]

use std::sync::Arc;

use ast_mutex::{AstMutex, Config, WakeMode};
use sync_core::testing::{InlineTask, on_small_stack};

ast_mutex::states! { enum One { Only } }

/// Queued tasks: nested, each wakeup took kilobytes of a debug build's
/// stack, so this many overflowed the test thread's.
const TASKS: usize = 20_000;
/// The test thread's stack: room for a few dozen nested wakeups, not for
/// one per task.
const STACK: usize = 4 << 20;

#[test]
fn an_exit_reaching_every_queued_inline_task_keeps_the_stack_flat() {
    for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
        on_small_stack(&format!("{mode:?}"), STACK, move || {
            let m = Arc::new(AstMutex::with_config(
                One::Only,
                0usize,
                Config::new().wake_mode(mode),
            ));
            let held = m.enter(One::Only);
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    let m = Arc::clone(&m);
                    InlineTask::spawn(async move {
                        let mut g = m.enter_async(One::Only).await;
                        *g += 1;
                        g.exit(One::Only);
                    })
                })
                .collect();
            // Wakes the first task, whose waker runs it, whose exit wakes
            // the next...
            held.exit(One::Only);
            let g = m.enter(One::Only);
            assert_eq!(*g, TASKS, "every task ran once ({mode:?})");
            g.exit(One::Only);
            assert!(tasks.iter().all(|t| t.is_done()), "{mode:?}");
        });
    }
}

/// A task whose body panics after its exit (so its waker panics, and so
/// do the wakers of the tasks whose exits woke it, up to the outermost
/// wakeup): the tasks still queued behind it run all the same, and none
/// of them inside that panic's unwind, where its body would see
/// `std::thread::panicking()` (and a lock it released would not be
/// poisoned by its own panic).
#[test]
fn a_tasks_panic_runs_no_other_task_inside_its_unwind() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    const QUEUED: usize = 200;
    const PANICS: usize = 100;
    let m = Arc::new(AstMutex::new(One::Only, 0usize));
    let unwinding = Arc::new(AtomicUsize::new(0));
    let held = m.enter(One::Only);
    let tasks: Vec<_> = (0..QUEUED)
        .map(|k| {
            let m = Arc::clone(&m);
            let unwinding = Arc::clone(&unwinding);
            InlineTask::spawn(async move {
                let mut g = m.enter_async(One::Only).await;
                *g += 1;
                g.exit(One::Only);
                if std::thread::panicking() {
                    unwinding.fetch_add(1, SeqCst);
                }
                assert!(k != PANICS, "task {k} panics");
            })
        })
        .collect();
    let exit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| held.exit(One::Only)));
    assert!(exit.is_err(), "the task's panic reached the first exit");
    assert_eq!(
        unwinding.load(SeqCst),
        0,
        "tasks ran inside the unwind of another task's panic"
    );
    let g = m.enter(One::Only);
    assert_eq!(*g, QUEUED, "every task entered once");
    g.exit(One::Only);
    // The tasks behind the panicking one finished.
    for t in &tasks[PANICS + 1..] {
        assert!(t.is_done());
    }
}
