#![cfg(loom)]
//! Loom models of the combiner's hand-overs: to a blocked caller (one that
//! still spins for its token, or, once the stint is over, one asleep),
//! and of producers waiting for space. A stranded task shows as a caller
//! or a completion nobody completes (loom reports the deadlock); mutual
//! exclusion is checked by loom itself (the data is in a loom
//! `UnsafeCell`).

use active_monitor::{Monitor, Order};
use sync_core::model::check_with_bound;
use sync_core::sync::{Arc, thread};

/// Three blocking callers, batch 1 and a queue of two slots (so a stint
/// is over after two tasks): each call is run by a combiner or handed
/// over, to a caller that spins or, at the end of a stint, to one asleep;
/// every call returns its own result.
#[test]
fn blocked_callers_are_served_or_handed_the_monitor() {
    check_with_bound(2, || {
        let m = Arc::new(
            Monitor::builder()
                .order(Order::Relaxed)
                .capacity(2)
                .batch(1)
                .build(0usize),
        );
        let hs: Vec<_> = [1, 10]
            .into_iter()
            .map(|k| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    m.call(move |n| {
                        *n += k;
                        *n
                    })
                })
            })
            .collect();
        let mine = m.call(|n| {
            *n += 100;
            *n
        });
        let theirs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(mine % 100 == 0 || mine % 10 < 2);
        assert!(theirs[0] % 10 == 1 && theirs[1] % 100 >= 10);
        assert_eq!(m.call(|n| *n), 111);
    });
}
