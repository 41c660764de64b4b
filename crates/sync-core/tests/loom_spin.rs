//! Loom model of the spin lock: mutual exclusion checked by loom's cell
//! tracking (a racy access fails the model) and by a count.
#![cfg(loom)]

use sync_core::model;
use sync_core::spin::SpinLock;
use sync_core::sync::{Arc, thread};

#[test]
fn spin_lock_excludes() {
    model::check_with_bound(3, || {
        let lock = Arc::new(SpinLock::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let lock = Arc::clone(&lock);
                thread::spawn(move || {
                    let mut g = lock.lock();
                    let v = *g;
                    *g = v + 1;
                })
            })
            .collect();
        if let Some(mut g) = lock.try_lock() {
            *g += 10;
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        let v = *lock.lock();
        assert!(v == 2 || v == 12, "lost an update: {v}");
    });
}
