#![cfg(loom)]
//! Loom model of program order's attribution: a task body belongs to its
//! own submitter, whoever runs it. Thread X submits to `a` a body that
//! files a `when` on `b`; thread Y calls `a` (so it may combine X's task)
//! and then enables the `when` with a call on `b`. Under strict order, Y
//! waited for that `when` whenever it ran X's body (the body's submission
//! was recorded as Y's own): loom reported the deadlock.

use active_monitor::{Completion, Monitor};
use sync_core::model::check_with_bound;
use sync_core::sync::{Arc, thread};

#[test]
fn a_body_run_by_another_thread_is_its_own_submitter() {
    check_with_bound(2, || {
        let a = Arc::new(Monitor::builder().batch(1).build(()));
        let b = Arc::new(Monitor::new(false)); // strict order
        let x = {
            let (a, b) = (Arc::clone(&a), Arc::clone(&b));
            thread::spawn(move || {
                let (tx, rx) = std::sync::mpsc::channel::<Completion<bool>>();
                let done = a.submit(move |_| {
                    let w = b.when(|r| *r, |r| *r);
                    tx.send(w).unwrap();
                });
                (done, rx)
            })
        };
        let y = {
            let (a, b) = (Arc::clone(&a), Arc::clone(&b));
            thread::spawn(move || {
                a.call(|_| ());
                b.call(|r| *r = true);
            })
        };
        y.join().unwrap();
        let (done, rx) = x.join().unwrap();
        // X's body may still be queued if nobody served it: serve it.
        a.call(|_| ());
        assert!(done.is_done());
        let w = rx.recv().unwrap();
        assert!(w.is_done() && w.wait(), "the when never ran");
    });
}
