#![cfg(loom)]
//! Loom models of the monitor's protocols: submission and combining (a task
//! queued while the combiner releases is run by someone), the handoff to a
//! blocked caller, a full queue, `when` wake-ups, OR across two monitors,
//! and drop with pending tasks.
//!
//! Each model checks what a lost wake-up or a stranded task would break:
//! after the threads are joined, every completion is done and every task
//! ran exactly once, without anybody running the monitor again.

use active_monitor::{Completion, Monitor, Order, or};
use sync_core::model::check_with_bound;
use sync_core::sync::thread::JoinHandle;
use sync_core::sync::{Arc, thread};

/// Joins the submitting threads, then checks that none of their tasks was
/// stranded: every completion is done without anybody running the monitor
/// again. Both are joined before looking, since a thread's second task may
/// be run by the other thread, still serving.
fn assert_none_stranded(m: &Monitor<usize>, hs: Vec<JoinHandle<(Completion<()>, Completion<()>)>>) {
    let cs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    for (a, b) in cs {
        assert!(a.is_done() && b.is_done(), "a task was stranded: {m:?}");
    }
}

fn relaxed(capacity: usize, batch: usize) -> Monitor<usize> {
    Monitor::builder()
        .order(Order::Relaxed)
        .capacity(capacity)
        .batch(batch)
        .build(0)
}

/// Two submitters race each other and the combiner's release: no task is
/// stranded in an idle monitor's queue.
#[test]
fn submitted_tasks_are_never_stranded() {
    check_with_bound(3, || {
        let m = Arc::new(relaxed(2, 1));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                thread::spawn(move || m.submit(|n| *n += 1))
            })
            .collect();
        let cs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(cs.iter().all(|c| c.is_done()), "a task was stranded");
        // The data shows both, exactly once.
        let m = Arc::try_unwrap(m).unwrap_or_else(|_| panic!("joined"));
        let mut m = m;
        assert_eq!(*m.get_mut(), 2);
    });
}

/// Blocking callers and a submitter with batch 1: the combiner hands the
/// monitor to a blocked caller; every call returns its own result.
#[test]
fn calls_are_combined_or_handed_off() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(2, 1));
        let m1 = Arc::clone(&m);
        let t1 = thread::spawn(move || {
            m1.call(|n| {
                *n += 1;
                *n
            })
        });
        let m2 = Arc::clone(&m);
        let t2 = thread::spawn(move || m2.submit(|n| *n += 10));
        let mine = m.call(|n| {
            *n += 100;
            *n
        });
        let theirs = t1.join().unwrap();
        let c = t2.join().unwrap();
        assert!(c.is_done(), "the submitted task was stranded");
        assert_ne!(mine, theirs);
        assert!(mine % 10 == 0 || mine % 10 == 1);
        assert!(theirs % 100 >= 1);
        assert_eq!(m.call(|n| *n), 111);
    });
}

/// A queue of one slot: submitters wait for space and are woken.
#[test]
fn a_full_queue_wakes_its_waiting_producers() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(1, 1));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let a = m.submit(|n| *n += 1);
                    let b = m.submit(|n| *n += 1);
                    (a, b)
                })
            })
            .collect();
        assert_none_stranded(&m, hs);
        assert_eq!(m.call(|n| *n), 4);
    });
}

/// A queue of two slots: producers are woken only once it is half full
/// (here: one task left), and still never left asleep.
#[test]
fn a_half_drained_queue_wakes_its_waiting_producers() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(2, 1));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let a = m.submit(|n| *n += 1);
                    let b = m.submit(|n| *n += 1);
                    let c = m.submit(|n| *n += 1);
                    // The thread's own call runs after its queued task (the
                    // queue is FIFO), whoever runs them.
                    m.call(|_| ());
                    assert!(c.is_done(), "a call overtook the thread's task");
                    (a, b)
                })
            })
            .collect();
        assert_none_stranded(&m, hs);
        assert_eq!(m.call(|n| *n), 6);
    });
}

/// A `when` task queued while another thread changes the state: it runs as
/// soon as its precondition holds, with nobody running the monitor again.
#[test]
fn when_is_not_lost_when_the_state_changes_while_it_is_queued() {
    check_with_bound(3, || {
        let m = Arc::new(relaxed(2, 5));
        let m1 = Arc::clone(&m);
        let waiter = thread::spawn(move || m1.when(|n| *n == 1, |n| *n + 10));
        let m2 = Arc::clone(&m);
        let setter = thread::spawn(move || m2.submit(|n| *n = 1));
        let c = waiter.join().unwrap();
        let s = setter.join().unwrap();
        assert!(s.is_done());
        assert!(c.is_done(), "the when task's wake-up was lost");
        assert_eq!(c.wait(), 11);
    });
}

/// A thread blocked on a `when` completion is woken by the task that
/// enables it.
#[test]
fn a_thread_waiting_on_when_is_woken() {
    check_with_bound(3, || {
        let m = Arc::new(relaxed(2, 5));
        let m1 = Arc::clone(&m);
        let waiter = thread::spawn(move || m1.when(|n| *n == 1, |n| *n + 10).wait());
        m.submit(|n| *n = 1).wait();
        assert_eq!(waiter.join().unwrap(), 11);
    });
}

/// OR over two monitors, both made ready by other threads: exactly one
/// operand runs.
#[test]
fn or_runs_exactly_once_across_two_monitors() {
    check_with_bound(2, || {
        let a = Arc::new(relaxed(2, 5));
        let b = Arc::new(relaxed(2, 5));
        let c = or((
            a.op(
                |n| *n > 0,
                |n| {
                    *n -= 1;
                    'a'
                },
            ),
            b.op(
                |n| *n > 0,
                |n| {
                    *n -= 1;
                    'b'
                },
            ),
        ))
        .unwrap();
        let (a1, b1) = (Arc::clone(&a), Arc::clone(&b));
        let ta = thread::spawn(move || a1.submit(|n| *n += 1).is_done());
        let tb = thread::spawn(move || b1.submit(|n| *n += 1).is_done());
        assert!(ta.join().unwrap() && tb.join().unwrap());
        assert!(c.is_done(), "the OR was never run");
        let (i, which) = c.wait();
        assert_eq!((i, which), if i == 0 { (0, 'a') } else { (1, 'b') });
        assert_eq!(
            a.call(|n| *n) + b.call(|n| *n),
            1,
            "exactly one operand ran"
        );
    });
}

/// The last owner drops the monitor while tasks that other threads queued
/// are pending and a `when` task waits: the queued tasks run, the waiting
/// one is discarded, nothing hangs.
#[test]
fn drop_with_pending_tasks_runs_or_discards_them() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(2, 1));
        let never = m.when(|n| *n > 5, |n| *n);
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                thread::spawn(move || m.submit(|n| *n += 1))
            })
            .collect();
        drop(m);
        let cs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        // Each submitted task ran: its completion resolves with its value.
        for c in cs {
            c.wait();
        }
        assert!(
            never.is_done(),
            "the monitor is gone: its waiting task must be resolved"
        );
        assert_eq!(never.wait_result(), Err(active_monitor::Discarded));
    });
}
