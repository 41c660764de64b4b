//! A timed lock never yields: a yield on a machine with more runnable
//! threads than CPUs gives the core away for a scheduling round, far past a
//! short deadline, so a timed waiter parks with the time left after its
//! spin (the family's rule, `sync_core::wait`). A test binary of its own:
//! it forces the process-wide load verdict and watches the process-wide
//! count of yielding threads.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use lockfree_sync::Mutex;
use sync_core::load;

#[test]
fn a_timed_lock_of_a_held_mutex_never_yields() {
    // Yields cheap, as on an idle machine: an untimed waiter yields after
    // its spins, so only the deadline keeps a timed one from yielding.
    load::set_saturation_override(Some(false));
    let m = Arc::new(Mutex::new(()));
    let held = m.lock();
    let done = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (m, done) = (Arc::clone(&m), Arc::clone(&done));
        thread::spawn(move || {
            for _ in 0..50 {
                assert!(m.try_lock_for(Duration::from_millis(2)).is_none());
            }
            done.store(true, Ordering::Release);
        })
    };
    // The waiter counts itself in `own_yielders` while it yields.
    let mut most = 0;
    while !done.load(Ordering::Acquire) {
        most = most.max(load::own_yielders());
        std::hint::spin_loop();
    }
    waiter.join().expect("the waiter panicked");
    drop(held);
    load::set_saturation_override(None);
    assert_eq!(most, 0, "a timed waiter yielded");
    // The mutex is free and works after the timed-out waits.
    assert!(m.try_lock().is_some());
}
