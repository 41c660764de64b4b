#![cfg(not(loom))]
//! Blocking calls from several threads at once, each answered with its
//! result (`DONE`) or handed the monitor (`HANDOFF`): the job lives on the
//! caller's stack, so the executor must not touch it once the caller can
//! see its token. Run under Miri (`cargo +nightly miri test -p
//! active-monitor --test call_handoff`) this checks that no reference into
//! a returned caller's frame is still live (Stacked Borrows).

use std::sync::Arc;
use std::thread;

use active_monitor::{Monitor, Order};

#[test]
fn blocking_calls_are_answered_or_handed_over() {
    const THREADS: usize = 3;
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .batch(1)
            .capacity(2)
            .build(0usize),
    );
    let hs: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut last = 0;
                for _ in 0..rounds {
                    let now = m.call(|n| {
                        *n += 1;
                        *n
                    });
                    assert!(now > last, "a call saw an older value than its previous");
                    last = now;
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(m.call(|n| *n), THREADS * rounds);
}
