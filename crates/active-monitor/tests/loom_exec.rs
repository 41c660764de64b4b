#![cfg(loom)]
//! Loom models of execution: the server thread's sleep (a task published
//! while it goes to sleep is never stranded), stopping a sleeping server
//! with tasks queued, and the combiner's hand-over to a concurrent
//! publisher (no task stranded, mutual exclusion kept).
//!
//! A stranded task shows as a completion nobody completes: `wait` on it
//! sleeps for ever and loom reports the deadlock. Mutual exclusion is
//! checked by loom itself: the data lives in a loom `UnsafeCell`, so two
//! holders touching it at once fail the model.

use active_monitor::{Monitor, Order, set_server_limit};
use sync_core::model::check_with_bound;
use sync_core::sync::{Arc, thread};

fn served() -> active_monitor::Served<usize> {
    // Process-wide; the models of this file all want a server.
    set_server_limit(usize::MAX - 1);
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .capacity(2)
        .batch(1)
        .build_served(0);
    assert!(m.has_server());
    m
}

/// A submitter publishes while the server watches its queue, goes to
/// sleep, or sleeps: the server runs the task (the submitter's `wait`
/// returns), whichever way the two fences fall.
#[test]
fn a_task_published_while_the_server_goes_to_sleep_is_run() {
    check_with_bound(2, || {
        let m = served();
        let m1 = m.clone();
        let t = thread::spawn(move || {
            m1.submit(|n| {
                *n += 1;
                *n
            })
            .wait()
        });
        assert_eq!(t.join().unwrap(), 1);
        // The last handle: stops and joins the server.
        drop(m);
    });
}

/// Two submissions, the second while the server may be going back to
/// sleep after the first: both run.
#[test]
fn a_server_woken_twice_runs_both_tasks() {
    check_with_bound(2, || {
        let m = served();
        let m1 = m.clone();
        let t = thread::spawn(move || {
            let a = m1.submit(|n| *n += 1);
            a.wait();
            m1.submit(|n| {
                *n += 10;
                *n
            })
            .wait()
        });
        assert_eq!(t.join().unwrap(), 11);
        drop(m);
    });
}

/// A `call` that finds the monitor idle runs inline on its caller while
/// another thread's task goes to the server: never two holders, and the
/// task published meanwhile is handed to the server when the caller lets
/// go (or run by the server if it is awake).
#[test]
fn an_inline_call_and_a_submission_to_the_server() {
    check_with_bound(2, || {
        let m = served();
        let m1 = m.clone();
        let t = thread::spawn(move || m1.submit(|n| *n += 10).wait());
        m.call(|n| *n += 1);
        t.join().unwrap();
        assert_eq!(m.call(|n| *n), 11);
        drop(m);
    });
}

/// The last handle is dropped while the server sleeps or serves, with
/// tasks queued: the drop stops and joins the server, and every task has
/// run by then (by the server, or by the monitor's drop).
#[test]
fn dropping_the_last_handle_stops_the_server_and_runs_queued_tasks() {
    check_with_bound(2, || {
        let m = served();
        let m1 = m.clone();
        let t = thread::spawn(move || {
            let a = m1.submit(|n| *n += 1);
            let b = m1.submit(|n| *n += 1);
            (a, b)
        });
        let (a, b) = t.join().unwrap();
        drop(m);
        assert!(a.is_done() && b.is_done(), "a task was stranded");
    });
}

/// Batch 1: a combiner that has run one task offers the monitor
/// (`HANDOVER`) while another thread publishes; the publisher takes it, or
/// the combiner takes it back. Every task runs exactly once, nobody is
/// left holding a monitor with tasks queued, and the data is never touched
/// by two holders at once.
#[test]
fn a_combiner_hands_over_to_a_concurrent_publisher() {
    check_with_bound(4, || {
        let m = Arc::new(
            Monitor::builder()
                .order(Order::Relaxed)
                .capacity(4)
                .batch(1)
                .build(0usize),
        );
        let hs: Vec<_> = [1, 10]
            .into_iter()
            .map(|k| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let a = m.submit(move |n| *n += k);
                    let b = m.submit(move |n| *n += 100 * k);
                    (a, b)
                })
            })
            .collect();
        // Both joined before looking: a thread's task may be run by the
        // other, still serving.
        let cs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        for (a, b) in cs {
            assert!(a.is_done() && b.is_done(), "a task was stranded: {m:?}");
        }
        assert_eq!(m.call(|n| *n), 1111);
    });
}
