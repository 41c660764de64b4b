//! A producer preempted between its swap on the tail and its link (its
//! message "in flight") must not make `poll_recv` give its thread away, nor
//! a timed receive wait past its deadline: a poll answers `Pending` (its
//! task woken) after a brief spin, and a timed receive gives way only until
//! its deadline.
//!
//! Before the fix, both went through `try_recv`'s snooze, which yields four
//! times: a sleep each when yields are slow (more runnable threads than
//! CPUs), where each can keep the thread away for a scheduling round. The
//! test makes yields slow (`set_saturation_override`), so that each such
//! yield is a sleep, which the thread's count of voluntary context switches
//! shows; a spin or a `Pending` adds none.
//!
//! A real producer is frozen at a random point of its send loop by a signal
//! whose handler spins until the test releases it; some of the freezes land
//! between the swap and the link, which `try_recv`'s own snooze (it still
//! yields, so sleeps) tells apart.
#![cfg(all(not(loom), target_os = "linux"))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use lockfree_sync::mpsc::{self, TryRecvError};
use sync_core::testing::freeze;

/// The number of sends the producer has started.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// The calling thread's voluntary context switches so far (a sleep or a
/// park adds one; a spin or a preemption none).
fn voluntary_switches() -> i64 {
    // SAFETY: `rusage` is plain data; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a `rusage`.
    let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(status, 0);
    usage.ru_nvcsw
}

/// Counts its wakes.
struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, SeqCst);
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

#[test]
fn in_flight_polls_and_timed_receives_do_not_give_the_thread_away() {
    // Every yield of the family is a short sleep now (the machine's load
    // cannot change that for this process until it is cleared).
    sync_core::load::set_saturation_override(Some(true));
    freeze::install();
    let (tx, mut rx) = mpsc::channel::<u64>();
    let received = std::sync::Arc::new(AtomicU64::new(0));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let producer = {
        let (received, stop) = (received.clone(), stop.clone());
        freeze::Freezable::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) {
                // A few blocks in flight at most, so that the producer
                // reuses spare blocks and hardly ever allocates.
                if i - received.load(SeqCst) < 100 {
                    STARTED.store(i + 1, SeqCst);
                    tx.send(i).unwrap();
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let mut next = 0u64;
    let mut take = |v: u64| {
        assert_eq!(v, next, "messages out of order");
        next += 1;
        received.store(next, SeqCst);
    };
    let flag = std::sync::Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut in_flight = 0;
    let mut bad = Vec::new();
    let start = Instant::now();
    while in_flight < 3 && start.elapsed() < Duration::from_secs(60) {
        // Let the producer run a little, receiving.
        let until = Instant::now() + Duration::from_micros(100);
        while Instant::now() < until {
            if let Ok(v) = rx.try_recv() {
                take(v);
            }
        }
        producer.freeze();
        // Drain what is linked; the last `try_recv` snoozes (sleeps) only
        // if the next message is in flight.
        let mut slept_in_try_recv;
        loop {
            let before = voluntary_switches();
            let got = rx.try_recv();
            slept_in_try_recv = voluntary_switches() > before;
            match got {
                Ok(v) => take(v),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => panic!("the producer is alive"),
            }
        }
        if slept_in_try_recv && STARTED.load(SeqCst) > received.load(SeqCst) {
            in_flight += 1;
            flag.0.store(false, SeqCst);
            let before = voluntary_switches();
            let polled = rx.poll_recv(&mut cx);
            let slept = voluntary_switches() - before;
            assert!(polled.is_pending(), "the message is in flight");
            assert!(
                flag.0.load(SeqCst),
                "a poll that finds a message in flight wakes its task"
            );
            if slept != 0 {
                bad.push(format!("poll_recv slept {slept} times"));
            }
            let before = voluntary_switches();
            let timed = rx.try_recv_for(Duration::ZERO);
            let slept = voluntary_switches() - before;
            assert_eq!(timed, Err(TryRecvError::Empty));
            if slept != 0 {
                bad.push(format!("try_recv_for(0) slept {slept} times"));
            }
        }
        freeze::release();
        // Take the task's waiter back, if the poll published one.
        if let Poll::Ready(Some(v)) = rx.poll_recv(&mut cx) {
            take(v);
        }
    }
    stop.store(true, SeqCst);
    producer.join();
    sync_core::load::set_saturation_override(None);
    // Nothing lost: every message sent arrives, in order.
    for v in rx.iter() {
        take(v);
    }
    assert!(
        in_flight > 0,
        "no freeze landed between a swap and its link"
    );
    assert!(bad.is_empty(), "with a message in flight: {bad:?}");
}
