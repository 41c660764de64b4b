//! A drop of this crate that runs a task's waker and also owns the
//! mutex's last handle (an `ArcAstGuard`, an `EnterArcAsync`) drops that
//! handle, and so the mutex's value, before the waker's panic goes on.
//! Left to the drop glue, the handle was dropped while the waker's panic
//! unwound, and a value whose `Drop` panics too aborted the process
//! ("panic in a destructor during cleanup").
//!
//! Each test runs in a child process (this test binary, re-run on that one
//! test), so that an abort fails the test instead of killing the harness.
#![cfg(not(loom))]

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::task::{Wake, Waker};

use ast_mutex::{AstMutex, Config, EnterArcAsync, WakeMode};
use sync_core::testing::{DropBomb as Bomb, HostileWaker, first_panic_is, poll_once as poll};

ast_mutex::states! { enum S { A, B } }

type M = AstMutex<S, Bomb>;

fn configs() -> [Config; 4] {
    [
        Config::new(),
        Config::new().wake_mode(WakeMode::Handoff),
        Config::new().wake_mode(WakeMode::Broadcast),
        Config::new().watchers(1),
    ]
}

/// Runs `f` in a child process: this test binary, re-run on `test` alone.
fn in_child(test: &str, f: impl FnOnce()) {
    sync_core::testing::in_child("AST_MUTEX_PANICKING_VALUES_CHILD", test, f);
}

#[test]
fn an_enter_arc_future_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "an_enter_arc_future_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on",
        || {
            for config in configs() {
                let drops = Arc::new(AtomicUsize::new(0));
                let m = Arc::new(M::with_config(S::A, Bomb(Arc::clone(&drops)), config));
                // Held for ever by a guard that keeps no handle, so that
                // the future holds the last one.
                std::mem::forget(m.enter(S::A));
                let hostile = HostileWaker::new();
                let mut enter = Box::pin(Arc::clone(&m).enter_arc_async(S::A));
                assert!(poll(enter.as_mut(), &hostile.waker()).is_pending());
                drop(m);
                // Withdrawn by the drop, which drops the waker (it panics)
                // and then the last handle (whose `T`'s drop panics too).
                hostile.panic_on_drops(1);
                first_panic_is("HostileWaker: drop panics", || drop(enter));
                assert_eq!(drops.load(SeqCst), 1, "the mutex's value was dropped once");
            }
        },
    );
}

/// A task whose waker drops the task's enter future (with its handle on
/// the mutex) and then panics.
struct DropsItsFutureThenPanics(StdMutex<Option<Enter>>);

type Enter = Pin<Box<EnterArcAsync<S, Bomb>>>;

impl Wake for DropsItsFutureThenPanics {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        drop(self.0.lock().unwrap().take());
        panic!("a task's waker panicked");
    }
}

/// Holds `m` through an `ArcAstGuard` with a task waiting whose waker
/// drops the task's handle and panics; hands the guard to `release`, after
/// dropping every other handle.
fn the_guards_handle_is_the_last(release: impl Fn(ast_mutex::ArcAstGuard<S, Bomb>)) {
    for config in configs() {
        let drops = Arc::new(AtomicUsize::new(0));
        let m = Arc::new(M::with_config(S::A, Bomb(Arc::clone(&drops)), config));
        let guard = m.enter_arc(S::A);
        let task = Arc::new(DropsItsFutureThenPanics(StdMutex::new(None)));
        let waker = Waker::from(Arc::clone(&task));
        let mut enter = Box::pin(Arc::clone(&m).enter_arc_async(S::A));
        assert!(poll(enter.as_mut(), &waker).is_pending());
        *task.0.lock().unwrap() = Some(enter);
        drop((m, waker));
        // The exit wakes the task, whose waker drops the future's handle
        // and panics: the guard's handle is the last, and its drop drops
        // the mutex's value (which panics too).
        first_panic_is("a task's waker panicked", || release(guard));
        assert_eq!(drops.load(SeqCst), 1, "the mutex's value was dropped once");
    }
}

#[test]
fn an_arc_guard_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "an_arc_guard_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on",
        || the_guards_handle_is_the_last(drop),
    );
}

#[test]
fn an_arc_guards_exit_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "an_arc_guards_exit_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on",
        || the_guards_handle_is_the_last(|g| g.exit(S::A)),
    );
}

#[test]
fn an_arc_guards_exit_and_enter_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on() {
    in_child(
        "an_arc_guards_exit_and_enter_with_the_last_handle_drops_it_before_the_wakers_panic_goes_on",
        || {
            // The panic goes on from the exit: no entry is made.
            the_guards_handle_is_the_last(|g| drop(g.exit_and_enter(S::A, S::A)));
            the_guards_handle_is_the_last(|g| drop(g.exit_and_enter_async(S::A, S::A)));
        },
    );
}
