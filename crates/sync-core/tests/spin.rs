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

#[test]
fn lock_until_gives_up_at_its_deadline_and_takes_a_lock_freed_in_time() {
    use std::time::{Duration, Instant};

    let lock = Arc::new(SpinLock::new(0u32));
    let held = lock.lock();
    let began = Instant::now();
    assert!(lock.lock_until(began + Duration::from_millis(1)).is_none());
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(1), "gave up early: {took:?}");
    assert!(took < Duration::from_secs(1), "gave up late: {took:?}");
    // Freed by another thread before the deadline: taken.
    let (tx, rx) = std::sync::mpsc::channel();
    let holder = {
        let lock = Arc::clone(&lock);
        thread::spawn(move || {
            let mut g = lock.lock();
            *g += 1;
            tx.send(()).unwrap();
            thread::sleep(Duration::from_millis(5));
        })
    };
    drop(held);
    rx.recv().unwrap();
    let g = lock
        .lock_until(Instant::now() + Duration::from_secs(60))
        .expect("freed long before the deadline");
    assert_eq!(*g, 1);
    drop(g);
    holder.join().unwrap();
}
