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

/// The same from a thread-local destructor, on a thread whose wake chain
/// had queued a wakeup before: the chain's queue, a thread-local first
/// used after the guard's, was gone by then, and every wakeup past the
/// chain's depth ran in place (a stack overflow: an abort, so the test
/// runs in a child process).
#[test]
fn an_exit_in_a_thread_local_destructor_keeps_the_stack_flat_too() {
    use std::cell::RefCell;
    use std::sync::OnceLock;

    use ast_mutex::AstGuard;

    type M = AstMutex<One, usize>;
    static M: OnceLock<M> = OnceLock::new();
    thread_local! {
        static HELD: RefCell<Option<AstGuard<'static, One, usize>>> = const { RefCell::new(None) };
    }
    fn spawn_tasks(m: &'static M, n: usize) -> Vec<Arc<InlineTask>> {
        (0..n)
            .map(|_| {
                InlineTask::spawn(async move {
                    let mut g = m.enter_async(One::Only).await;
                    *g += 1;
                    g.exit(One::Only);
                })
            })
            .collect()
    }
    sync_core::testing::in_child(
        "AST_MUTEX_CHILD",
        "an_exit_in_a_thread_local_destructor_keeps_the_stack_flat_too",
        || {
            let m = M.get_or_init(|| AstMutex::new(One::Only, 0));
            let tasks = Arc::new(std::sync::Mutex::new(Vec::new()));
            let kept = Arc::clone(&tasks);
            on_small_stack("thread exit", STACK, move || {
                // The guard's thread-local first: its destructor runs after
                // those of thread-locals first used later.
                HELD.with(|_| {});
                // A chain deeper than the wake chain's depth: it queues.
                let g = m.enter(One::Only);
                let first = spawn_tasks(m, 100);
                drop(g);
                assert!(first.iter().all(|t| t.is_done()));
                // Held at the thread's exit, with every task queued.
                let g = m.enter(One::Only);
                *kept.lock().unwrap() = spawn_tasks(m, TASKS);
                HELD.with(|h| *h.borrow_mut() = Some(g));
            });
            let g = m.enter(One::Only);
            assert_eq!(*g, 100 + TASKS, "every task ran once");
            g.exit(One::Only);
            assert!(tasks.lock().unwrap().iter().all(|t| t.is_done()));
        },
    );
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
