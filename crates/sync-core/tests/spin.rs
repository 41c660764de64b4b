//! The std build's spin lock under real contention (loom models it as a
//! mutex; see `sync_core::spin`).
#![cfg(not(loom))]

use std::sync::Arc;
use std::thread;

use sync_core::spin::SpinLock;

#[test]
fn excludes_under_contention() {
    // A non-atomic read-modify-write inside the lock: any overlap loses
    // an update.
    let lock = Arc::new(SpinLock::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                for _ in 0..50_000 {
                    let mut g = lock.lock();
                    let v = *g;
                    *g = std::hint::black_box(v) + 1;
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(*lock.lock(), 200_000);
}

#[test]
fn try_lock_fails_while_held() {
    let lock = SpinLock::new(1);
    let g = lock.lock();
    assert!(lock.try_lock().is_none());
    drop(g);
    assert_eq!(*lock.try_lock().expect("free again"), 1);
    assert_eq!(format!("{lock:?}"), "SpinLock { value: 1 }");
}
