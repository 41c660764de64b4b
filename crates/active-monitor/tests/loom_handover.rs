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

/// A served monitor with a queue of one slot: a producer waits for space
/// while a `call` runs inline on the idle monitor and the server drains the
/// queue. The producer sleeps (it does not take the free monitor from the
/// server), and whoever lets go last with room in the queue wakes it: the
/// server, or the inline caller if the server's release found the monitor
/// held by it.
#[test]
fn a_producer_waiting_for_space_on_a_served_monitor_is_woken() {
    check_with_bound(1, || {
        active_monitor::set_server_limit(usize::MAX - 1);
        let m = Monitor::builder()
            .order(Order::Relaxed)
            .capacity(1)
            .batch(1)
            .build_served(0usize);
        assert!(m.has_server());
        let m1 = m.clone();
        let t = thread::spawn(move || {
            let a = m1.submit(|n| *n += 1);
            let b = m1.submit(|n| *n += 10);
            (a, b)
        });
        m.call(|n| *n += 100);
        let (a, b) = t.join().unwrap();
        a.wait();
        b.wait();
        assert_eq!(m.call(|n| *n), 111);
        drop(m);
    });
}
