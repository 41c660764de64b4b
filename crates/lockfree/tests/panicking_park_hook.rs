//! The family's park hook (`sync_core::wake_chain::before_park`) runs what
//! a crate registered on the thread (an active monitor's kept task
//! wakers) inside a blocking wait, and a panic that escapes it is dropped:
//! the wait goes on. A blocking CSP send or receive runs it with its slot,
//! on its own stack, already offered in the channel: when the hook's panic
//! unwound from there (round 46's review), the offer stayed in the channel
//! word after the stack frame was gone, and the partner then read (a
//! receive) or wrote (a send) freed stack memory. A blocking wait in a
//! `Drop` that runs while the thread unwinds (a lock, an acquire, a
//! receive) let the hook's panic out of that `Drop`, which aborted the
//! process.
//!
//! Each test runs in a child process (this test binary, re-run on that one
//! test): on the old code it reads or writes freed memory, or aborts.
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};

use std::time::Duration;

use lockfree_sync::csp::{self, Alt, TryRecvError, TrySendError};

/// Runs `f` in a child process: this test binary, re-run on `test` alone.
/// The child aborts if `f` has not returned within 30 s (on the old code,
/// a partner could spin for ever on a slot in freed memory).
fn in_child(test: &str, f: impl FnOnce()) {
    sync_core::testing::in_child("LOCKFREE_PANICKING_PARK_HOOK_CHILD", test, || {
        std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(30));
            eprintln!("the test hung");
            std::process::abort();
        });
        f();
    });
}

fn panicking_hook() {
    panic!("the park hook panics");
}

/// Runs `f` with a park hook that panics registered on this thread, and
/// checks that no panic came out of `f`.
fn with_panicking_hook<R>(f: impl FnOnce() -> R) -> R {
    sync_core::wake_chain::deliver_before_park(panicking_hook);
    catch_unwind(AssertUnwindSafe(f)).expect("the hook's panic is dropped, the wait goes on")
}

/// Runs `f` on another thread once the caller has had time to park.
fn later<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> std::thread::JoinHandle<R> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        f()
    })
}

/// Overwrites the stack below the caller, where the unwound wait's frame
/// was.
#[inline(never)]
fn scribble() {
    let junk = std::hint::black_box([0xa5u8; 16 * 1024]);
    std::hint::black_box(&junk);
}

#[test]
fn a_send_with_a_panicking_park_hook_waits_for_its_receiver() {
    in_child(
        "a_send_with_a_panicking_park_hook_waits_for_its_receiver",
        || {
            let (mut tx, mut rx) = csp::channel::<u64>();
            // Nobody receives yet: the send offers its value and, past its
            // spin, runs the hook before it parks.
            let receiver = later(move || {
                let got = rx.recv();
                (rx, got)
            });
            assert_eq!(with_panicking_hook(|| tx.send(7)), Ok(()));
            let (mut rx, got) = receiver.join().unwrap();
            assert_eq!(got, Ok(7));
            scribble();
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "no offer left");
            let t = std::thread::spawn(move || rx.recv());
            tx.send(8).unwrap();
            assert_eq!(t.join().unwrap(), Ok(8));
        },
    );
}

#[test]
fn a_timed_send_with_a_panicking_park_hook_waits_for_its_receiver() {
    in_child(
        "a_timed_send_with_a_panicking_park_hook_waits_for_its_receiver",
        || {
            let (mut tx, mut rx) = csp::channel::<u64>();
            let receiver = later(move || {
                let got = rx.recv();
                (rx, got)
            });
            assert_eq!(
                with_panicking_hook(|| tx.try_send_for(7, Duration::from_secs(60))),
                Ok(())
            );
            let (mut rx, got) = receiver.join().unwrap();
            assert_eq!(got, Ok(7));
            scribble();
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "no offer left");
        },
    );
}

#[test]
fn a_receive_with_a_panicking_park_hook_waits_for_its_sender() {
    in_child(
        "a_receive_with_a_panicking_park_hook_waits_for_its_sender",
        || {
            let (mut tx, mut rx) = csp::channel::<u64>();
            let sender = later(move || {
                let sent = tx.send(7);
                (tx, sent)
            });
            assert_eq!(with_panicking_hook(|| rx.recv()), Ok(7));
            let (mut tx, sent) = sender.join().unwrap();
            sent.unwrap();
            scribble();
            assert_eq!(
                tx.try_send(8),
                Err(TrySendError::Full(8)),
                "nobody waits to receive"
            );
            let t = std::thread::spawn(move || tx.send(9));
            assert_eq!(rx.recv(), Ok(9));
            t.join().unwrap().unwrap();
        },
    );
}

#[test]
fn a_select_with_a_panicking_park_hook_waits_for_a_sender() {
    in_child(
        "a_select_with_a_panicking_park_hook_waits_for_a_sender",
        || {
            let (mut tx1, mut rx1) = csp::channel::<u64>();
            let (tx2, mut rx2) = csp::channel::<u64>();
            let sender = later(move || {
                let mut tx2 = tx2;
                let sent = tx2.send(3);
                (tx2, sent)
            });
            {
                let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
                assert_eq!(with_panicking_hook(|| alt.select()), (1, Ok(3)));
            }
            let (mut tx2, sent) = sender.join().unwrap();
            sent.unwrap();
            // Nobody selects or receives now.
            assert_eq!(tx1.try_send(1), Err(TrySendError::Full(1)));
            assert_eq!(tx2.try_send(2), Err(TrySendError::Full(2)));
        },
    );
}

#[test]
fn a_send_in_a_drop_during_unwinding_drops_the_hooks_panic_and_still_delivers() {
    in_child(
        "a_send_in_a_drop_during_unwinding_drops_the_hooks_panic_and_still_delivers",
        || {
            /// Sends its value as it drops.
            struct SendOnDrop(csp::Sender<u64>);
            impl Drop for SendOnDrop {
                fn drop(&mut self) {
                    assert_eq!(self.0.send(1), Ok(()), "delivered");
                }
            }
            let (tx, mut rx) = csp::channel::<u64>();
            // The receiver comes late: the send, past its spin, runs the
            // hook while the thread unwinds.
            let receiver = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                rx.recv()
            });
            sync_core::wake_chain::deliver_before_park(panicking_hook);
            let payload = catch_unwind(AssertUnwindSafe(|| {
                let _sends = SendOnDrop(tx);
                panic!("the first panic");
            }))
            .expect_err("the first panic goes on");
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"the first panic"),
                "the first panic, unchanged (the hook's is dropped)"
            );
            assert_eq!(receiver.join().unwrap(), Ok(1));
        },
    );
}

/// Runs `wait` in a drop while the thread unwinds from a first panic, with
/// a park hook that panics registered: `wait` must reach the hook (the
/// primitive is held elsewhere for a while) and return once `release` has
/// run on another thread, and the first panic must come out unchanged.
fn waits_in_a_drop_during_unwinding(release: impl FnOnce() + Send + 'static, wait: impl FnOnce()) {
    struct OnDrop<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for OnDrop<F> {
        fn drop(&mut self) {
            (self.0.take().expect("once"))();
        }
    }
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        release();
    });
    sync_core::wake_chain::deliver_before_park(panicking_hook);
    let payload = catch_unwind(AssertUnwindSafe(|| {
        let _waits = OnDrop(Some(wait));
        panic!("the first panic");
    }))
    .expect_err("the first panic goes on");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the first panic"),
        "the first panic, unchanged (the hook's is dropped)"
    );
    releaser.join().unwrap();
}

#[test]
fn a_lock_in_a_drop_during_unwinding_drops_the_hooks_panic() {
    in_child(
        "a_lock_in_a_drop_during_unwinding_drops_the_hooks_panic",
        || {
            for fairness in [
                lockfree_sync::Fairness::Barging,
                lockfree_sync::Fairness::Fifo,
            ] {
                let m = std::sync::Arc::new(lockfree_sync::Mutex::with_fairness(0u64, fairness));
                let held = m.lock_arc();
                waits_in_a_drop_during_unwinding(move || drop(held), || *m.lock() += 1);
            }
        },
    );
}

#[test]
fn an_acquire_in_a_drop_during_unwinding_drops_the_hooks_panic() {
    in_child(
        "an_acquire_in_a_drop_during_unwinding_drops_the_hooks_panic",
        || {
            let sem = std::sync::Arc::new(lockfree_sync::Semaphore::new(0));
            let s = std::sync::Arc::clone(&sem);
            waits_in_a_drop_during_unwinding(
                move || s.add_permits(1),
                || drop(sem.acquire().expect("open")),
            );
        },
    );
}

#[test]
fn an_mpsc_receive_in_a_drop_during_unwinding_drops_the_hooks_panic() {
    in_child(
        "an_mpsc_receive_in_a_drop_during_unwinding_drops_the_hooks_panic",
        || {
            let (tx, rx) = lockfree_sync::mpsc::channel::<u64>();
            waits_in_a_drop_during_unwinding(
                move || tx.send(1).expect("the receiver waits"),
                || assert_eq!(rx.recv(), Ok(1)),
            );
        },
    );
}
