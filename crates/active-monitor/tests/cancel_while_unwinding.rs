//! A `call_async` dropped while its thread unwinds withdraws its queued
//! task and drops the body there, in the unwind. A body whose drop panics,
//! with a payload whose own drop panics too, must not abort the process:
//! during an unwind the panic policy drops such panics (rule 3). Run in a
//! child process, where an abort is a failed exit status.
#![cfg(not(loom))]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};
use std::task::{Context, Waker};
use std::thread;

use active_monitor::Monitor;

/// A panic payload whose drop panics (caught, that panic is an ordinary
/// message).
struct PayloadBomb;

impl Drop for PayloadBomb {
    fn drop(&mut self) {
        panic!("the payload's drop panicked");
    }
}

/// Captured by a body: its drop panics with a [`PayloadBomb`].
struct BodyBomb;

impl Drop for BodyBomb {
    fn drop(&mut self) {
        std::panic::panic_any(PayloadBomb);
    }
}

/// Holds `m` on another thread until the returned sender is used.
fn hold(m: &Arc<Monitor<u32>>) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let m = Arc::clone(m);
    let h = thread::spawn(move || {
        m.call(move |_| {
            held_tx.send(()).unwrap();
            let _ = release_rx.recv();
        })
    });
    held_rx.recv().unwrap();
    (release_tx, h)
}

#[test]
fn a_call_async_dropped_by_an_unwind_drops_a_panicking_body_without_aborting() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_CANCEL_WHILE_UNWINDING_CHILD",
        "a_call_async_dropped_by_an_unwind_drops_a_panicking_body_without_aborting",
        || {
            let m = Arc::new(Monitor::new(0u32));
            let (release, holder) = hold(&m);
            let r = catch_unwind(AssertUnwindSafe(|| {
                let bomb = BodyBomb;
                let mut call = Box::pin(m.call_async(move |n| {
                    let _kept = &bomb;
                    *n += 1;
                }));
                let mut cx = Context::from_waker(Waker::noop());
                assert!(
                    call.as_mut().poll(&mut cx).is_pending(),
                    "queued behind the holder"
                );
                let _dropped_as_we_unwind = call;
                panic!("the first panic");
            }));
            let payload = r.expect_err("the first panic was lost");
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"the first panic"),
                "the first panic was replaced"
            );
            release.send(()).unwrap();
            holder.join().unwrap();
            assert_eq!(m.call(|n| *n), 0, "the withdrawn call ran");
        },
    );
}
