//! An async submission's poll that serves the monitor runs other tasks too:
//! their results nobody took are dropped once it lets go of the monitor,
//! and a panic in such a drop (a foreign panic) is kept for a poll or an
//! operation that changes nothing, never resumed by a poll whose own task
//! has run.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use active_monitor::{Monitor, Order};

/// A task's result whose drop panics (unless the thread already unwinds).
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a dropped result panics");
        }
    }
}

/// An item whose drops are counted: one lost in an unwind is still dropped.
struct Item(u32, Arc<AtomicUsize>);

impl Drop for Item {
    fn drop(&mut self) {
        self.1.fetch_add(1, SeqCst);
    }
}

/// A `when_async` whose poll finds the monitor idle runs its body there:
/// the take is done, and the poll outputs the item. A task its body
/// enabled ran in the same poll, and its result's drop panicked: before
/// the fix that panic resumed in the poll, after the take, and the item
/// was dropped with the future (the timeout-safe take lost an item).
#[test]
fn a_foreign_panic_never_unwinds_a_when_async_whose_body_ran() {
    for runtime in ["futures", "tokio"] {
        let dropped = Arc::new(AtomicUsize::new(0));
        let m = Monitor::builder()
            .order(Order::Relaxed)
            .build(VecDeque::from([Item(7, Arc::clone(&dropped))]));
        // Waits for the queue to empty; nobody takes its result.
        drop(m.when(|q: &VecDeque<Item>| q.is_empty(), |_| PanicOnDrop));
        let take = m.when_async(|q| !q.is_empty(), |q| q.pop_front().unwrap());
        let taken = catch_unwind(AssertUnwindSafe(|| match runtime {
            "futures" => futures::executor::block_on(take),
            _ => tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(take),
        }));
        let item = taken.unwrap_or_else(|_| {
            panic!(
                "{runtime}: the poll that took the item panicked instead of outputting it \
                 (items dropped: {})",
                dropped.load(SeqCst)
            )
        });
        assert_eq!(item.0, 7, "{runtime}");
        assert_eq!(dropped.load(SeqCst), 0, "{runtime}");
        // The foreign panic is not lost either: the next operation that
        // changes nothing of its own resumes it.
        let later = catch_unwind(AssertUnwindSafe(|| m.call(|q| q.len())));
        assert!(
            later.is_err(),
            "{runtime}: the dropped result's panic was lost"
        );
        assert_eq!(m.call(|q| q.len()), 0);
    }
}

/// A result nobody took is dropped once the thread that ran its task has
/// let go of the monitor, at the end of that thread's submission: also of
/// an async one. Before the fix, a `submit_async`, `call_async` or
/// `.completion()` poll that ran such a task kept its result in a
/// thread-local list until the thread's next monitor operation, and for
/// ever if there was none (a lease never returned to its pool).
#[test]
fn a_result_nobody_took_is_dropped_at_the_end_of_an_async_submission() {
    struct Lease(Arc<AtomicBool>);
    impl Drop for Lease {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    for how in ["submit_async", "call_async", "completion", "when_async"] {
        let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
        let returned = Arc::new(AtomicBool::new(false));
        let lease = Arc::clone(&returned);
        // Waits for the submission below; nobody takes its result.
        drop(m.when(|n: &u32| *n > 0, move |_| Lease(lease)));
        let m2 = Arc::clone(&m);
        let returned2 = Arc::clone(&returned);
        let on_the_thread = std::thread::spawn(move || {
            futures::executor::block_on(async {
                match how {
                    "submit_async" => m2.submit_async(|n| *n = 1).await,
                    "call_async" => m2.call_async(|n| *n = 1).await,
                    "completion" => drop(m2.submit_async(|n| *n = 1).completion().await),
                    _ => m2.when_async(|_| true, |n| *n = 1).await,
                }
            });
            returned2.load(SeqCst)
        })
        .join()
        .unwrap();
        assert!(
            on_the_thread,
            "{how}: the result nobody took was not dropped at the end of the submission"
        );
        assert!(returned.load(SeqCst), "{how}");
        assert_eq!(m.call(|n| *n), 1);
    }
}

/// A panic payload whose drop panics with a [`PanicOnDrop`], whose drop
/// panics in turn.
struct PayloadWhoseDropPanics;

impl Drop for PayloadWhoseDropPanics {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            std::panic::panic_any(PanicOnDrop);
        }
    }
}

/// Round 43: the poll keeps the foreign panic for the thread's next
/// operation. A thread that made none exited with it kept, and the
/// thread-local that kept it dropped it as the thread exited: a payload
/// whose drop panicked there aborted the process ("thread local panicked
/// on drop"). Now it is dropped there as a panic nobody takes.
#[test]
fn a_foreign_panic_kept_by_a_poll_does_not_abort_its_threads_exit() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_KEPT_PANIC_EXIT_CHILD",
        "a_foreign_panic_kept_by_a_poll_does_not_abort_its_threads_exit",
        || {
            let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
            // Fire and forget: its panic's payload is nobody's.
            drop(m.when(
                |n| *n > 0,
                |_| -> u32 { std::panic::panic_any(PayloadWhoseDropPanics) },
            ));
            let m2 = Arc::clone(&m);
            std::thread::spawn(move || {
                // The poll finds the monitor idle and runs the call, which
                // enables the `when`, whose payload is dropped as the poll
                // lets go of the monitor: the panic of that drop is kept.
                futures::executor::block_on(m2.call_async(|n| *n = 1));
            })
            .join()
            .expect("the thread's own work did not panic");
            assert_eq!(m.call(|n| *n), 1);
        },
    );
}

/// A dropped async submission that waits for queue space withdraws, then
/// resumes a foreign panic its thread keeps (a sweep it made may have
/// served). It resumed it before its own task, never queued, was dropped:
/// that drop came in the unwind, and a body whose captures' `Drop`
/// panicked aborted the process. The task is dropped first now, its panic
/// caught, and the first panic goes on.
#[test]
fn a_dropped_submission_waiting_for_space_drops_its_task_before_a_kept_panic_goes_on() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_DROPPED_SPACE_WAIT_CHILD",
        "a_dropped_submission_waiting_for_space_drops_its_task_before_a_kept_panic_goes_on",
        || {
            use sync_core::testing::{DropBomb, poll_once};
            let full = Arc::new(
                Monitor::builder()
                    .capacity(2)
                    .order(Order::Relaxed)
                    .build(0u32),
            );
            // A thread holds `full` until the test lets go.
            let (held, is_held) = std::sync::mpsc::channel();
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let holder = {
                let full = Arc::clone(&full);
                std::thread::spawn(move || {
                    full.call(move |_| {
                        held.send(()).expect("the test waits");
                        wait.recv().expect("the test lets go");
                    })
                })
            };
            is_held.recv().expect("the thread holds the monitor");
            drop((full.submit(|n| *n += 1), full.submit(|n| *n += 1)));
            let drops = Arc::new(AtomicUsize::new(0));
            let bomb = DropBomb(Arc::clone(&drops));
            let mut waiting = Box::pin(full.submit_async(move |n| {
                let _bomb = &bomb;
                *n += 100;
            }));
            let waker = std::task::Waker::noop();
            assert!(poll_once(waiting.as_mut(), waker).is_pending(), "no room");
            // A poll that runs a task enabling a `when` whose result,
            // nobody's, panics in its drop: the panic is kept.
            let m = Monitor::builder().order(Order::Relaxed).build(0u32);
            drop(m.when(|n| *n > 0, |_| PanicOnDrop));
            let mut call = Box::pin(m.call_async(|n| *n = 1));
            assert!(poll_once(call.as_mut(), waker).is_ready());
            let dropped = catch_unwind(AssertUnwindSafe(|| drop(waiting)));
            assert!(dropped.is_err(), "a panic goes on");
            assert_eq!(drops.load(SeqCst), 1, "the task was dropped once");
            go.send(()).expect("the holder waits");
            holder.join().expect("the holder's call");
            assert_eq!(full.call(|n| *n), 2);
        },
    );
}
/// The same for a `when_async`, whose drop cancels its task: the cancel
/// resumed the kept panic itself, before the future had dropped the task
/// (its precondition, whose captures' `Drop` panicked, aborted the
/// process).
#[test]
fn a_dropped_when_async_waiting_for_space_drops_its_task_before_a_kept_panic_goes_on() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_DROPPED_SPACE_WAIT_WHEN_CHILD",
        "a_dropped_when_async_waiting_for_space_drops_its_task_before_a_kept_panic_goes_on",
        || {
            use sync_core::testing::{DropBomb, poll_once};
            let full = Arc::new(
                Monitor::builder()
                    .capacity(2)
                    .order(Order::Relaxed)
                    .build(0u32),
            );
            // A thread holds `full` until the test lets go.
            let (held, is_held) = std::sync::mpsc::channel();
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let holder = {
                let full = Arc::clone(&full);
                std::thread::spawn(move || {
                    full.call(move |_| {
                        held.send(()).expect("the test waits");
                        wait.recv().expect("the test lets go");
                    })
                })
            };
            is_held.recv().expect("the thread holds the monitor");
            drop((full.submit(|n| *n += 1), full.submit(|n| *n += 1)));
            let drops = Arc::new(AtomicUsize::new(0));
            let bomb = DropBomb(Arc::clone(&drops));
            // Its precondition's captures stay with the task once the
            // cancel has dropped the body.
            let mut waiting = Box::pin(full.when_async(
                move |_| {
                    let _bomb = &bomb;
                    true
                },
                |n| *n += 100,
            ));
            let waker = std::task::Waker::noop();
            assert!(poll_once(waiting.as_mut(), waker).is_pending(), "no room");
            // A poll that runs a task enabling a `when` whose result,
            // nobody's, panics in its drop: the panic is kept.
            let m = Monitor::builder().order(Order::Relaxed).build(0u32);
            drop(m.when(|n| *n > 0, |_| PanicOnDrop));
            let mut call = Box::pin(m.call_async(|n| *n = 1));
            assert!(poll_once(call.as_mut(), waker).is_ready());
            let dropped = catch_unwind(AssertUnwindSafe(|| drop(waiting)));
            assert!(dropped.is_err(), "a panic goes on");
            assert_eq!(drops.load(SeqCst), 1, "the task was dropped once");
            go.send(()).expect("the holder waits");
            holder.join().expect("the holder's call");
            assert_eq!(full.call(|n| *n), 2);
        },
    );
}
