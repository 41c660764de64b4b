//! A producer preempted between its swap on the tail and its link (the
//! message is "in flight") must not make the receiver wait for it:
//! `try_recv` returns `Empty` after a bounded snooze, `try_recv_for`
//! returns by its deadline, `poll_recv` returns `Pending` (waking its own
//! task) instead of blocking the executor.
//!
//! A real producer is frozen at a random point of its send loop by a
//! signal whose handler spins until the test releases it; some of the
//! freezes land between the swap and the link. Before the fix, a receive
//! made then spun until the producer ran again (here: until the watchdog
//! released it, a second later).
#![cfg(all(not(loom), target_os = "linux"))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use lockfree_sync::mpsc::{self, TryRecvError};
use sync_core::testing::freeze;

/// Bumped by every trial, watched by the watchdog.
static TRIAL: AtomicU64 = AtomicU64::new(0);

/// Longer than any receive may take while the producer is frozen, and
/// shorter than the watchdog's release.
const PROMPT: Duration = Duration::from_millis(500);

#[test]
fn receives_do_not_wait_for_a_frozen_producer() {
    freeze::install();
    let (tx, mut rx) = mpsc::channel::<u64>();
    let received = std::sync::Arc::new(AtomicU64::new(0));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let producer = {
        let (received, stop) = (received.clone(), stop.clone());
        freeze::Freezable::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                // Keep a few blocks in flight at most, so that the producer
                // reuses spare blocks and hardly ever allocates: a producer
                // frozen inside the allocator would hold up a receiver that
                // frees a block (a wait that is not the channel's).
                if i - received.load(SeqCst) < 200 {
                    tx.send(i).unwrap();
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    // Releases a frozen producer that a receive waits for (the old
    // behaviour), so that the test fails instead of hanging.
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(1));
    let mut next = 0u64;
    let mut take = |v: u64| {
        assert_eq!(v, next, "messages out of order");
        next += 1;
        received.store(next, SeqCst);
    };
    let mut cx = Context::from_waker(Waker::noop());
    for trial in 0..500 {
        TRIAL.store(trial, SeqCst);
        // Let the producer run a little, receiving.
        let until = Instant::now() + Duration::from_micros(200);
        while Instant::now() < until {
            if let Ok(v) = rx.try_recv() {
                take(v);
            }
        }
        producer.freeze();
        // The producer is frozen: each receive below returns promptly.
        let start = Instant::now();
        loop {
            match rx.try_recv() {
                Ok(v) => take(v),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => panic!("the producer is alive"),
            }
        }
        assert!(
            start.elapsed() < PROMPT,
            "try_recv waited for a frozen producer"
        );
        let start = Instant::now();
        assert_eq!(
            rx.try_recv_for(Duration::from_millis(1)),
            Err(TryRecvError::Empty)
        );
        assert!(
            start.elapsed() < PROMPT,
            "try_recv_for overran its deadline"
        );
        let start = Instant::now();
        assert!(rx.poll_recv(&mut cx).is_pending());
        assert!(start.elapsed() < PROMPT, "poll_recv blocked the executor");
        freeze::release();
    }
    stop.store(true, SeqCst);
    producer.join();
    drop(watchdog);
    // Nothing lost: every message sent arrives, in order.
    for v in rx.iter() {
        take(v);
    }
}
