//! Loom model of a served monitor while saturation ends (found by an
//! independent review). In its own test binary: the saturation override
//! is process-wide, and would change the other models running beside it.
#![cfg(loom)]

use active_monitor::{__test_set_saturation_override, Monitor, Order, set_server_limit};
use sync_core::model::check_with_bound;
use sync_core::sync::thread;

/// Saturation ends between a saturated-mode combiner's last look in
/// `serve_loop` and its `release`, while another thread publishes a task
/// and the server sleeps: the release takes the monitor back (`take`, not
/// the server-aware `try_lock`) and hands the task to the server (found by
/// review; deadlocked before).
#[test]
fn a_task_published_while_saturation_ends_is_not_stranded() {
    check_with_bound(2, || {
        set_server_limit(usize::MAX - 1);
        __test_set_saturation_override(Some(true));
        let m = Monitor::builder()
            .order(Order::Relaxed)
            .capacity(2)
            .batch(1)
            .build_served(0usize);
        assert!(m.has_server());
        let m1 = m.clone();
        let c = thread::spawn(move || {
            m1.submit(|n| *n += 1);
        });
        let m2 = m.clone();
        let p = thread::spawn(move || {
            let x = m2.submit(|n| *n += 10);
            // Saturation ends (a sample, in real life).
            __test_set_saturation_override(Some(false));
            x
        });
        c.join().unwrap();
        let x = p.join().unwrap();
        x.wait(); // stranded: nobody runs it, loom reports a deadlock
        assert_eq!(m.call(|n| *n), 11);
        drop(m);
    });
}
