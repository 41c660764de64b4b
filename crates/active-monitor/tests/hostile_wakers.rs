//! A task's waker is user code and may panic inside the monitor's futures:
//! its `clone` when a completion registers it, its `drop` when it is
//! replaced or withdrawn. The completion stays usable: no wake-up is lost
//! and no poll wakes its own task at once; and a completion that returns
//! `Ready` leaves no clone of its waker to be dropped by another thread.
#![cfg(not(loom))]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use active_monitor::Monitor;
use sync_core::testing::HostileWaker;

fn poll<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// Re-polled with a waker whose clone panics, a waiting completion keeps
/// its old waker: the call that enables it wakes it, and the polls in
/// between do not wake it at once (before the fix, the waker slot stayed
/// "registering": the wake-up was lost and every poll woke the task).
#[test]
fn a_completion_repolled_with_a_waker_whose_clone_panics_is_still_woken() {
    let mon = Monitor::new(0u64);
    let mut c = mon.when(|x| *x > 0, |x| *x);
    let good = HostileWaker::new();
    assert!(poll(&mut c, &good.waker()).is_pending());
    let bad = HostileWaker::new();
    bad.panic_on_clones(1);
    let r = catch_unwind(AssertUnwindSafe(|| poll(&mut c, &bad.waker())));
    assert!(r.is_err(), "the clone's panic goes on");
    assert!(poll(&mut c, &good.waker()).is_pending());
    assert_eq!(good.wakes(), 0, "the poll woke its own task");
    mon.call(|x| *x = 3);
    assert_eq!(good.wakes(), 1, "the wake-up was lost");
    assert_eq!(poll(&mut c, Waker::noop()), Poll::Ready(Ok(3)));
}

/// Re-polled with another waker, a completion drops the one it held, whose
/// drop panics: the new waker is registered and woken.
#[test]
fn a_completion_whose_replaced_waker_panics_on_drop_is_still_woken() {
    let mon = Monitor::new(0u64);
    let mut c = mon.when(|x| *x > 0, |x| *x);
    let old = HostileWaker::new();
    assert!(poll(&mut c, &old.waker()).is_pending());
    old.panic_on_drops(1);
    let new = HostileWaker::new();
    let r = catch_unwind(AssertUnwindSafe(|| poll(&mut c, &new.waker())));
    assert!(r.is_err(), "the drop's panic goes on");
    assert_eq!(new.wakes(), 0, "the poll woke its own task");
    mon.call(|x| *x = 3);
    assert_eq!(new.wakes(), 1, "the wake-up was lost");
    assert_eq!(poll(&mut c, Waker::noop()), Poll::Ready(Ok(3)));
}

/// A completion polled while another thread's submission runs its task: a
/// poll can register its waker just after the task's finish took the slot,
/// and see the task done only then. That poll takes its waker back. Left
/// in the task, the waker would be dropped by whoever drops the task last,
/// often the thread that ran it, outside the catch that guards a waker's
/// user code (a `Drop` that panics there unwinds out of that thread's
/// submission).
#[test]
fn a_completion_ready_after_its_register_leaves_no_waker_behind() {
    use std::sync::{Arc, mpsc};
    const ROUNDS: usize = 20_000;
    let (to_enabler, monitors) = mpsc::channel::<Arc<Monitor<u64>>>();
    let (enabled, done) = mpsc::channel::<()>();
    let enabler = std::thread::spawn(move || {
        for mon in monitors {
            mon.submit(|x| *x = 1);
            drop(mon);
            enabled.send(()).expect("the test waits");
        }
    });
    let waker = HostileWaker::new();
    let w = waker.waker();
    for _ in 0..ROUNDS {
        let mon = Arc::new(Monitor::new(0u64));
        let mut c = mon.when(|x| *x > 0, |x| *x * 10);
        to_enabler.send(Arc::clone(&mon)).expect("the enabler runs");
        drop(mon);
        let r = loop {
            if let Poll::Ready(r) = poll(&mut c, &w) {
                break r;
            }
        };
        assert_eq!(r, Ok(10));
        done.recv().expect("the enabler runs");
    }
    drop(to_enabler);
    enabler.join().expect("the enabler");
    assert_eq!(
        waker.foreign_drops(),
        0,
        "a task's waker was dropped by the thread that ran the task, without being woken"
    );
}
