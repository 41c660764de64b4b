#![cfg(not(loom))]
//! A server thread meets user code whose panic nobody takes: it must keep
//! serving. Alone in its binary: it needs a server thread (the process cap)
//! and sets the saturation verdict, which is process-wide (to "not
//! saturated", for the binary's whole run: the server runs the tasks).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use active_monitor::{
    __test_set_saturation_override, Discarded, Monitor, Order, or, set_server_limit,
};

/// A panic payload whose drop panics (unless the thread already unwinds).
struct PanickingPayload;

impl Drop for PanickingPayload {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("drop of a panic's payload");
        }
    }
}

/// Runs `f` on a thread; `None` if it has not finished within `secs`.
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

// Round 42: an OR operand's precondition panicked while another operand
// took the OR. Its check, losing the taken flag, dropped the panic's
// payload under the monitor, outside any catch: a drop that panicked
// unwound the holder. On a served monitor that was the server thread,
// which ended, and the monitor's submitted tasks never ran again.
#[test]
fn a_server_survives_the_payload_of_an_or_precondition_that_lost() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    static IN_PRE: AtomicBool = AtomicBool::new(false);
    static TAKEN: AtomicBool = AtomicBool::new(false);
    __test_set_saturation_override(Some(false));
    // One server per test, whatever the CPU count (the tests run at once).
    set_server_limit(64);
    let a = Monitor::builder().order(Order::Relaxed).build_served(0u32);
    let b = Monitor::builder().order(Order::Relaxed).build(0u32);
    let either = or((
        a.op(
            |_| {
                if ARMED.load(SeqCst) && !IN_PRE.swap(true, SeqCst) {
                    // Let the other operand take the OR first.
                    while !TAKEN.load(SeqCst) {
                        thread::sleep(Duration::from_millis(1));
                    }
                    std::panic::panic_any(PanickingPayload);
                }
                false
            },
            |_| 1,
        ),
        b.op(|n| *n > 0, |_| 2),
    ))
    .unwrap();
    ARMED.store(true, SeqCst);
    // The task's run re-checks the operand (on the server, or here if the
    // monitor has no server).
    let a2 = a.clone();
    let nudge = thread::spawn(move || {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(a2.submit(|_| ()));
        }));
    });
    while !IN_PRE.load(SeqCst) {
        thread::sleep(Duration::from_millis(1));
    }
    b.call(|n| *n = 1);
    TAKEN.store(true, SeqCst);
    assert_eq!(either.wait(), (1, 2));
    nudge.join().unwrap();
    let served = within(10, move || {
        let x = a.submit(|n| {
            *n += 1;
            *n
        });
        x.wait()
    });
    assert_eq!(served, Some(1), "the monitor no longer serves its tasks");
}

// Round 42: a task whose body panicked keeps the panic for its completion.
// With the completion dropped and a result and precondition that need no
// drop, the server dropped the task at once, outside any catch: a payload
// whose drop panicked ended the server thread, and the monitor's submitted
// tasks never ran again.
#[test]
fn a_server_survives_the_payload_of_a_panic_nobody_took() {
    __test_set_saturation_override(Some(false));
    // One server per test, whatever the CPU count (the tests run at once).
    set_server_limit(64);
    let m = Monitor::builder().order(Order::Relaxed).build_served(0u32);
    // Queued behind a slow task, so that the holder (the server, or a
    // combiner if the process has no server to spare) runs it.
    let slow = m.submit(|_| thread::sleep(Duration::from_millis(50)));
    drop(m.submit(|_| -> u32 { std::panic::panic_any(PanickingPayload) }));
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slow.wait()));
    let served = within(10, move || {
        let after = m.submit(|n| {
            *n += 1;
            *n
        });
        after.wait()
    });
    assert_eq!(served, Some(1), "the monitor no longer serves its tasks");
}

/// A waker whose drop panics (unless the thread already unwinds).
fn waker_whose_drop_panics() -> std::task::Waker {
    use std::task::{RawWaker, RawWakerVTable, Waker};
    unsafe fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    unsafe fn wake(_: *const ()) {}
    unsafe fn drop(_: *const ()) {
        if !thread::panicking() {
            panic!("drop of a waker");
        }
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop);
    // SAFETY: the vtable's functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(core::ptr::null(), &VTABLE)) }
}

// Round 42, the same at-once drop: a completion polled (its waker kept in
// the task) and then cancelled leaves the waker in the withdrawn task,
// which the server dropped at once when it reached it. A waker whose drop
// panicked ended the server thread.
#[test]
fn a_server_survives_the_waker_of_a_cancelled_completion() {
    use std::future::Future;
    __test_set_saturation_override(Some(false));
    // One server per test, whatever the CPU count (the tests run at once).
    set_server_limit(64);
    let m = Monitor::builder().order(Order::Relaxed).build_served(0u32);
    assert!(m.has_server(), "under the cap: a server");
    // Slow until the completion behind it is withdrawn.
    let (withdrawn, is_withdrawn) = mpsc::channel::<()>();
    let slow = m.submit(move |_| {
        let _ = is_withdrawn.recv_timeout(Duration::from_secs(10));
    });
    let mut c = m.submit(|n| *n);
    let waker = std::mem::ManuallyDrop::new(waker_whose_drop_panics());
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::pin::Pin::new(&mut c).poll(&mut cx).is_pending());
    assert!(c.cancel().is_ok(), "queued behind the slow task: withdrawn");
    withdrawn.send(()).expect("the slow task waits");
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slow.wait()));
    let served = within(10, move || {
        let after = m.submit(|n| {
            *n += 1;
            *n
        });
        after.wait()
    });
    assert_eq!(served, Some(1), "the monitor no longer serves its tasks");
}

/// A body whose drop panics with a [`PanickingPayload`].
struct BodyWhosePayloadPanics;

impl Drop for BodyWhosePayloadPanics {
    fn drop(&mut self) {
        if !thread::panicking() {
            std::panic::panic_any(PanickingPayload);
        }
    }
}

/// Sends on its channel when dropped: in a thread-local, when its thread
/// exits.
struct SignalsExit(mpsc::Sender<()>);

impl Drop for SignalsExit {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

thread_local! {
    static ON_EXIT: std::cell::RefCell<Option<SignalsExit>> = const { std::cell::RefCell::new(None) };
}

// Round 43: a task on the server thread drops the monitor's last handle,
// so the server drops the monitor itself on its way out. The monitor's
// drop discards the tasks still waiting and resumes a panic of their
// drops (a body's) at its end, which unwound out of the server thread:
// nobody waits for it, and std drops a detached thread's panic payload
// outside any catch, so a payload whose drop panics aborted the process
// ("thread result panicked on drop").
#[test]
fn a_server_that_drops_its_own_monitor_drops_the_panics_of_that_drop() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_SERVER_SELF_DROP_CHILD",
        "a_server_that_drops_its_own_monitor_drops_the_panics_of_that_drop",
        || {
            __test_set_saturation_override(Some(false));
            set_server_limit(64);
            let m = Monitor::builder().order(Order::Relaxed).build_served(0u32);
            assert!(m.has_server(), "under the cap: a server");
            let body = BodyWhosePayloadPanics;
            let never = m.when(
                |n| *n > 0,
                move |_| {
                    let _kept = &body;
                },
            );
            let (exited, on_exit) = mpsc::channel();
            let (go, wait_go) = mpsc::channel::<()>();
            let last = m.clone();
            m.submit(move |_| {
                ON_EXIT.with(|e| *e.borrow_mut() = Some(SignalsExit(exited)));
                let _ = wait_go.recv();
                // The last handle: this thread cannot join itself, so it
                // drops the monitor once it leaves its loop.
                drop(last);
            });
            drop(m);
            go.send(()).unwrap();
            assert_eq!(never.wait_result(), Err(Discarded));
            // The thread-local's destructor runs as the thread exits, after
            // std dropped the thread's result (the abort was there).
            on_exit
                .recv_timeout(Duration::from_secs(10))
                .expect("the server thread exited");
        },
    );
}

/// Three payloads, each dropped by the one before's drop: the task's
/// [`FirstPayload`] panics with a [`SecondPayload`], which panics with a
/// [`PanickingPayload`].
struct FirstPayload;

static FIRST_DROPPED: AtomicBool = AtomicBool::new(false);

impl Drop for FirstPayload {
    fn drop(&mut self) {
        FIRST_DROPPED.store(true, SeqCst);
        if !thread::panicking() {
            std::panic::panic_any(SecondPayload);
        }
    }
}

struct SecondPayload;

impl Drop for SecondPayload {
    fn drop(&mut self) {
        if !thread::panicking() {
            std::panic::panic_any(PanickingPayload);
        }
    }
}

// Round 43: the server dropped the payload of a panic caught in its loop
// with `drop_caught`, which keeps the panic of that drop for the thread's
// next operation. A server that stopped before its next turn exited with
// it kept, and the thread-local that kept it dropped it as the thread
// exited: a payload whose drop panicked there aborted the process.
#[test]
fn a_stopped_server_keeps_no_panic_for_its_exit() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_SERVER_EXIT_CHILD",
        "a_stopped_server_keeps_no_panic_for_its_exit",
        || {
            __test_set_saturation_override(Some(false));
            set_server_limit(64);
            let m = Monitor::builder().order(Order::Relaxed).build_served(0u32);
            assert!(m.has_server(), "under the cap: a server");
            // Fire and forget: nobody takes the panic, the server drops it.
            drop(m.submit(|_| -> u32 { std::panic::panic_any(FirstPayload) }));
            while !FIRST_DROPPED.load(SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            // The last handle: stops the server and joins it (its exit).
            drop(m);
        },
    );
}

/// Whether a [`RegrowingPayload`]'s drop panics with another one.
static REGROW: AtomicBool = AtomicBool::new(true);

/// A panic payload whose drop panics with another such payload (until
/// [`REGROW`] is cleared): dropped as a panic nobody takes, it never ends.
struct RegrowingPayload;

/// How many [`RegrowingPayload`]s were dropped.
static DROPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for RegrowingPayload {
    fn drop(&mut self) {
        DROPS.fetch_add(1, SeqCst);
        if REGROW.load(SeqCst) && !thread::panicking() {
            std::panic::panic_any(RegrowingPayload);
        }
    }
}

// Round 45's end of a server's stint drops what it keeps, as tasks of the
// monitor, in a loop until nothing is kept, and a panic's payload dropped
// there whose drop panicked was kept for the next round: a payload whose
// drop panics with another of its kind kept the server in that loop for
// ever, and the monitor's submitted tasks never ran again. `discard`
// (sync-core) leaks such a payload after a few rounds.
#[test]
fn a_server_survives_a_payload_whose_drop_panics_with_another() {
    __test_set_saturation_override(Some(false));
    // One server per test, whatever the CPU count (the tests run at once).
    set_server_limit(64);
    let m = Monitor::builder().order(Order::Relaxed).build_served(0u32);
    assert!(m.has_server());
    let slow = m.submit(|_| thread::sleep(Duration::from_millis(50)));
    drop(m.submit(|_| -> u32 { std::panic::panic_any(RegrowingPayload) }));
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slow.wait()));
    // The payload's first drop, in the stint, and the next, after it.
    let start = std::time::Instant::now();
    while DROPS.load(SeqCst) < 2 && start.elapsed() < Duration::from_secs(10) {
        thread::sleep(Duration::from_millis(1));
    }
    let served = {
        let m = m.clone();
        within(10, move || m.submit(|n| *n + 1).wait())
    };
    // Let an old server out of its loop, whatever the verdict.
    REGROW.store(false, SeqCst);
    assert_eq!(served, Some(1), "the monitor no longer serves its tasks");
}
