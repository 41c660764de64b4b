#![cfg(loom)]
//! Loom models of `or`'s paths racing the tasks that make its operands
//! ready: the try at once on each idle monitor (`Monitor::run_op_if_idle`),
//! then the queued operands sharing the taken flag.
//!
//! Each model checks, after joining, that the OR is done without anybody
//! running a monitor again (no lost wake-up, no stranded operand) and that
//! exactly one operand ran.

use active_monitor::{Monitor, Order, or};
use sync_core::model::check_with_bound;
use sync_core::sync::{Arc, thread};

fn relaxed() -> Monitor<usize> {
    Monitor::builder()
        .order(Order::Relaxed)
        .capacity(2)
        .batch(5)
        .build(0)
}

/// An OR made while two other threads each make one operand ready: it runs
/// at once on whichever monitor it finds ready, or waits and is run by the
/// monitor whose task makes an operand true; exactly one operand runs.
#[test]
fn or_made_while_both_monitors_fill_runs_exactly_once() {
    check_with_bound(2, || {
        let a = Arc::new(relaxed());
        let b = Arc::new(relaxed());
        let (a1, b1) = (Arc::clone(&a), Arc::clone(&b));
        let ta = thread::spawn(move || a1.submit(|n| *n += 1));
        let tb = thread::spawn(move || b1.submit(|n| *n += 1));
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
        let (pa, pb) = (ta.join().unwrap(), tb.join().unwrap());
        assert!(pa.is_done() && pb.is_done(), "a put was stranded");
        assert!(c.is_done(), "the OR was stranded or never woken");
        let (i, which) = c.wait();
        assert_eq!(which, ['a', 'b'][i]);
        assert_eq!(
            a.call(|n| *n) + b.call(|n| *n),
            1,
            "exactly one operand ran"
        );
    });
}

/// Two ORs over the same two monitors, one item on each: the ORs race for
/// the monitors (one passes over the other's busy monitor, or queues its
/// operands there); each takes exactly one item, none is taken twice.
#[test]
fn two_ors_racing_for_two_items_take_one_each() {
    check_with_bound(2, || {
        let a = Arc::new(relaxed());
        let b = Arc::new(relaxed());
        a.call(|n| *n = 1);
        b.call(|n| *n = 1);
        let take = |a: &Monitor<usize>, b: &Monitor<usize>| {
            or((a.op(|n| *n > 0, |n| *n -= 1), b.op(|n| *n > 0, |n| *n -= 1))).unwrap()
        };
        let (a1, b1) = (Arc::clone(&a), Arc::clone(&b));
        let other = thread::spawn(move || take(&a1, &b1));
        let mine = take(&a, &b);
        let theirs = other.join().unwrap();
        assert!(mine.is_done() && theirs.is_done(), "an OR was stranded");
        assert_eq!(
            a.call(|n| *n) + b.call(|n| *n),
            0,
            "an item was taken twice or not at all"
        );
    });
}
