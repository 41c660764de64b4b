//! Behaviour of Mutex and Semaphore through their public API: blocking and
//! async faces, fairness, cancellation at each point, panics and bad input.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::{Context, Poll, Wake, Waker};

use lockfree_sync::{Fairness, Mutex, MutexGuard, Semaphore};

/// A waker that counts its wakes.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counting_waker() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count(AtomicUsize::new(0)));
    (Arc::clone(&count), Waker::from(count))
}

fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

// ---- Mutex ----------------------------------------------------------------

#[test]
fn try_lock_fails_while_held_and_succeeds_after() {
    let m = Mutex::new(5);
    let g = m.lock();
    assert!(m.try_lock().is_none());
    assert!(m.is_locked());
    drop(g);
    assert_eq!(*m.try_lock().unwrap(), 5);
    assert!(!m.is_locked());
}

#[test]
fn a_panic_in_the_critical_section_unlocks() {
    let m = Arc::new(Mutex::new(0));
    let m2 = Arc::clone(&m);
    let r = std::thread::spawn(move || {
        let mut g = m2.lock();
        *g = 7;
        panic!("inside the critical section");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(*m.try_lock().expect("the panic unlocked the mutex"), 7);
}

#[test]
fn a_queued_task_is_woken_by_the_unlock() {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0, fairness);
        let g = m.lock();
        let (count, waker) = counting_waker();
        let mut fut = m.lock_async();
        assert!(poll_once(&mut fut, &waker).is_pending());
        assert_eq!(count.0.load(SeqCst), 0);
        drop(g);
        assert_eq!(
            count.0.load(SeqCst),
            1,
            "{fairness:?}: the unlock woke nobody"
        );
        let Poll::Ready(mut g) = poll_once(&mut fut, &waker) else {
            panic!("{fairness:?}: woken but not ready");
        };
        *g += 1;
    }
}

#[test]
fn fifo_hands_the_lock_to_queued_tasks_in_order() {
    let m = Mutex::with_fairness(Vec::new(), Fairness::Fifo);
    let held = m.lock();
    let (_, waker) = counting_waker();
    let mut futs: Vec<_> = (0..3).map(|_| m.lock_async()).collect();
    for f in &mut futs {
        assert!(poll_once(f, &waker).is_pending());
    }
    drop(held);
    // The lock now belongs to the first; the others are still queued, and a
    // newcomer cannot barge in.
    assert!(m.try_lock().is_none());
    for i in (1..3).rev() {
        assert!(poll_once(&mut futs[i], &waker).is_pending());
    }
    for (i, f) in futs.iter_mut().enumerate() {
        let Poll::Ready(mut g) = poll_once(f, &waker) else {
            panic!("waiter {i} not handed the lock in turn");
        };
        g.push(i);
    }
    assert_eq!(*m.lock(), [0, 1, 2]);
}

#[test]
fn barging_lets_a_newcomer_take_the_lock_from_a_woken_task() {
    let m = Mutex::new(0);
    let held = m.lock();
    let (_, waker) = counting_waker();
    let mut fut = m.lock_async();
    assert!(poll_once(&mut fut, &waker).is_pending());
    drop(held);
    // Released, not handed over: a newcomer may take it.
    let newcomer = m.try_lock().expect("barging mode releases the lock");
    assert!(
        poll_once(&mut fut, &waker).is_pending(),
        "requeued behind the newcomer"
    );
    drop(newcomer);
    assert!(poll_once(&mut fut, &waker).is_ready());
}

#[test]
fn unlock_fair_hands_off_in_barging_mode() {
    let m = Mutex::new(0);
    let held = m.lock();
    let (_, waker) = counting_waker();
    let mut fut = m.lock_async();
    assert!(poll_once(&mut fut, &waker).is_pending());
    MutexGuard::unlock_fair(held);
    assert!(m.try_lock().is_none(), "the lock was handed to the waiter");
    assert!(poll_once(&mut fut, &waker).is_ready());
}

#[test]
fn dropping_a_queued_lock_future_withdraws_it() {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0, fairness);
        let held = m.lock();
        let (_, waker) = counting_waker();
        let mut fut = m.lock_async();
        assert!(poll_once(&mut fut, &waker).is_pending());
        drop(fut);
        drop(held);
        assert!(
            m.try_lock().is_some(),
            "{fairness:?}: a withdrawn waiter kept the lock"
        );
    }
}

#[test]
fn dropping_a_lock_future_after_the_handoff_passes_the_lock_on() {
    let m = Mutex::with_fairness(0, Fairness::Fifo);
    let held = m.lock();
    let (_, waker) = counting_waker();
    let mut first = m.lock_async();
    let mut second = m.lock_async();
    assert!(poll_once(&mut first, &waker).is_pending());
    assert!(poll_once(&mut second, &waker).is_pending());
    drop(held); // handed to `first`
    drop(first); // which never saw it: the lock goes on to `second`
    assert!(poll_once(&mut second, &waker).is_ready());
    drop(second);
    assert!(m.try_lock().is_some());
}

#[test]
fn dropping_a_woken_lock_future_wakes_the_next_waiter() {
    let m = Mutex::new(0);
    let held = m.lock();
    let (_, w1) = counting_waker();
    let (count2, w2) = counting_waker();
    let mut first = m.lock_async();
    let mut second = m.lock_async();
    assert!(poll_once(&mut first, &w1).is_pending());
    assert!(poll_once(&mut second, &w2).is_pending());
    drop(held); // wakes `first` to compete
    assert_eq!(count2.0.load(SeqCst), 0);
    drop(first); // gives up: the wakeup must pass to `second`
    assert_eq!(
        count2.0.load(SeqCst),
        1,
        "the wakeup died with the dropped future"
    );
    assert!(poll_once(&mut second, &w2).is_ready());
}

#[test]
#[should_panic(expected = "polled after it completed")]
fn polling_a_completed_lock_future_panics() {
    let m = Mutex::new(0);
    let (_, waker) = counting_waker();
    let mut fut = m.lock_async();
    let Poll::Ready(g) = poll_once(&mut fut, &waker) else {
        unreachable!()
    };
    drop(g);
    let _ = poll_once(&mut fut, &waker);
}

#[test]
fn threads_and_tokio_tasks_share_one_mutex() {
    let m = Arc::new(Mutex::new(0u64));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    rt.block_on(async {
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let m = Arc::clone(&m);
                tokio::spawn(async move {
                    for i in 0..200 {
                        let mut g = m.lock_async().await;
                        if i % 50 == 0 {
                            tokio::task::yield_now().await; // held across .await
                        }
                        *g += 1;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock(), 2 * 2000 + 20 * 200);
}

#[test]
fn futures_executor_drives_lock_futures() {
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    let m = Arc::new(Mutex::with_fairness(0, Fairness::Fifo));
    let held = m.lock();
    let mut pool = LocalPool::new();
    for _ in 0..10 {
        let m = Arc::clone(&m);
        pool.spawner()
            .spawn_local(async move { *m.lock_async().await += 1 })
            .unwrap();
    }
    pool.run_until_stalled(); // every task queues
    assert_eq!(*held, 0);
    drop(held);
    pool.run();
    assert_eq!(*m.lock(), 10);
}

#[test]
fn lock_api_mutex_over_the_raw_lock() {
    let m: lock_api::Mutex<lockfree_sync::RawMutex, i32> = lock_api::Mutex::new(1);
    *m.lock() += 1;
    assert!(m.try_lock().is_some());
    let g = m.lock();
    lock_api::MutexGuard::unlock_fair(g);
    assert_eq!(*m.lock(), 2);
}

#[test]
fn debug_shows_the_data_or_that_it_is_locked() {
    let m = Mutex::new(3);
    assert!(format!("{m:?}").contains('3'));
    let _g = m.lock();
    assert!(format!("{m:?}").contains("<locked>"));
}

// ---- Semaphore ------------------------------------------------------------

#[test]
fn permits_are_counted_forgotten_and_released() {
    let sem = Semaphore::new(3);
    let a = sem.acquire_many(2).unwrap();
    assert_eq!(a.permits(), 2);
    assert_eq!(sem.available_permits(), 1);
    assert!(sem.try_acquire_many(2).is_err());
    let b = sem.try_acquire().unwrap();
    b.forget();
    drop(a);
    assert_eq!(sem.available_permits(), 2);
    sem.release(1);
    assert_eq!(sem.available_permits(), 3);
    assert_eq!(sem.acquire_many(0).unwrap().permits(), 0);
}

#[test]
#[should_panic(expected = "exceeds Semaphore::MAX_PERMITS")]
fn a_request_above_the_maximum_panics() {
    let _ = Semaphore::new(1).acquire_many(Semaphore::MAX_PERMITS + 1);
}

#[test]
#[should_panic(expected = "exceeds Semaphore::MAX_PERMITS")]
fn an_async_request_above_the_maximum_panics_when_made() {
    drop(Semaphore::new(1).acquire_many_async(Semaphore::MAX_PERMITS + 1));
}

#[test]
#[should_panic(expected = "more permits than Semaphore::MAX_PERMITS")]
fn a_semaphore_above_the_maximum_panics() {
    let _ = Semaphore::new(Semaphore::MAX_PERMITS + 1);
}

#[test]
fn an_overflowing_release_panics_and_changes_nothing() {
    let sem = Semaphore::new(Semaphore::MAX_PERMITS - 1);
    let r = std::panic::catch_unwind(|| sem.release(2));
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("would exceed Semaphore::MAX_PERMITS"), "{msg}");
    assert_eq!(sem.available_permits(), Semaphore::MAX_PERMITS - 1);
    sem.release(1);
    assert_eq!(sem.available_permits(), Semaphore::MAX_PERMITS);
}

/// The maximum bounds every permit of the semaphore, not only the free
/// ones: with all of them held, adding one more panics up front (before,
/// it succeeded, and a permit merged above the maximum then panicked in its
/// `Drop`, its permits lost: `available_permits` stayed 0).
#[test]
fn add_permits_counts_the_held_permits_too() {
    const MAX: usize = Semaphore::MAX_PERMITS;
    let sem = Semaphore::new(MAX);
    let mut held = sem.acquire_many(MAX).unwrap();
    assert_eq!(sem.available_permits(), 0);
    let r = std::panic::catch_unwind(|| sem.add_permits(1));
    let msg = *r
        .expect_err("more than MAX_PERMITS permits were made")
        .downcast::<String>()
        .unwrap();
    assert!(msg.contains("would exceed Semaphore::MAX_PERMITS"), "{msg}");
    // Nothing changed, and every permit held goes back without a panic.
    assert_eq!(sem.available_permits(), 0);
    let one = held.split(1).unwrap();
    held.merge(one);
    assert_eq!(held.permits(), MAX);
    drop(held);
    assert_eq!(sem.available_permits(), MAX);
}

/// Forgotten permits (`forget`, `forget_permits`) leave room for as many
/// new ones, and no more.
#[test]
fn forgotten_permits_make_room_under_the_maximum() {
    const MAX: usize = Semaphore::MAX_PERMITS;
    let sem = std::sync::Arc::new(Semaphore::new(MAX));
    sem.acquire_many(2).unwrap().forget();
    sem.try_acquire_arc().unwrap().forget();
    assert_eq!(sem.forget_permits(4), 4);
    let held = sem.acquire_many(MAX - 7).unwrap();
    sem.add_permits(7);
    let over = std::panic::catch_unwind(|| sem.add_permits(1));
    assert!(over.is_err(), "more than MAX_PERMITS permits were made");
    drop(held);
    assert_eq!(sem.available_permits(), MAX);
}

#[test]
fn waiters_are_served_in_fifo_order_and_big_requests_are_not_overtaken() {
    let sem = Semaphore::new(0);
    let (_, waker) = counting_waker();
    let mut big = sem.acquire_many_async(2);
    let mut small = sem.acquire_async();
    assert!(poll_once(&mut big, &waker).is_pending());
    assert!(poll_once(&mut small, &waker).is_pending());
    sem.release(1);
    assert!(
        poll_once(&mut small, &waker).is_pending(),
        "overtook the older request"
    );
    assert!(poll_once(&mut big, &waker).is_pending());
    sem.release(1);
    let Poll::Ready(Ok(p)) = poll_once(&mut big, &waker) else {
        panic!("two permits released, the head request not served");
    };
    assert_eq!(p.permits(), 2);
    assert!(poll_once(&mut small, &waker).is_pending());
    drop(p); // serves `small` and leaves one free
    let Poll::Ready(Ok(q)) = poll_once(&mut small, &waker) else {
        panic!("a permit released, the queued request not served");
    };
    assert_eq!(sem.available_permits(), 1);
    drop(q);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn a_release_wakes_a_queued_task() {
    let sem = Semaphore::new(0);
    let (count, waker) = counting_waker();
    let mut fut = sem.acquire_async();
    assert!(poll_once(&mut fut, &waker).is_pending());
    sem.release(1);
    assert_eq!(count.0.load(SeqCst), 1);
    assert!(poll_once(&mut fut, &waker).is_ready());
}

#[test]
fn dropping_a_queued_acquire_returns_the_permits_it_found_and_its_demand() {
    let sem = Semaphore::new(1);
    let (_, waker) = counting_waker();
    let mut fut = sem.acquire_many_async(3); // keeps 1 for the head (itself), waits for 2
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(sem.available_permits(), 0);
    drop(fut);
    assert_eq!(
        sem.available_permits(),
        1,
        "the permit kept for it came back"
    );
    sem.release(2); // meets the withdrawn demand, which is folded back
    assert_eq!(sem.available_permits(), 3);
    assert_eq!(sem.acquire_many(3).unwrap().permits(), 3);
}

#[test]
fn dropping_the_head_request_frees_the_permits_pending_for_it() {
    let sem = Semaphore::new(0);
    let (_, waker) = counting_waker();
    let mut big = sem.acquire_many_async(2);
    assert!(poll_once(&mut big, &waker).is_pending());
    sem.release(1); // held for `big`, which needs one more
    assert_eq!(sem.available_permits(), 0);
    drop(big);
    assert_eq!(
        sem.available_permits(),
        1,
        "the permit held for a withdrawn request was stranded"
    );
    assert!(sem.try_acquire().is_ok());
}

#[test]
fn a_panicking_waker_does_not_stall_the_semaphore() {
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("a waker that panics");
        }
    }
    let sem = Semaphore::new(0);
    let bad = Waker::from(Arc::new(Panics));
    let (count, good) = counting_waker();
    let mut first = sem.acquire_async();
    let mut second = sem.acquire_async();
    assert!(poll_once(&mut first, &bad).is_pending());
    assert!(poll_once(&mut second, &good).is_pending());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sem.release(2)));
    assert!(r.is_err(), "the waker's panic reaches the releaser");
    // The delivery finished before the panic went on: both were served.
    assert_eq!(count.0.load(SeqCst), 1);
    let Poll::Ready(Ok(p2)) = poll_once(&mut second, &good) else {
        panic!("the second waiter was not served");
    };
    let Poll::Ready(Ok(p1)) = poll_once(&mut first, &good) else {
        panic!("the first waiter was not served");
    };
    p1.forget();
    p2.forget();
    // And the deliverer's role was given up: later releases still deliver.
    let mut third = sem.acquire_many_async(2);
    assert!(poll_once(&mut third, &good).is_pending());
    sem.release(2);
    assert!(poll_once(&mut third, &good).is_ready());
}

#[test]
fn dropping_an_acquire_after_delivery_releases_the_permits() {
    let sem = Semaphore::new(0);
    let (_, waker) = counting_waker();
    let mut first = sem.acquire_async();
    let mut second = sem.acquire_async();
    assert!(poll_once(&mut first, &waker).is_pending());
    assert!(poll_once(&mut second, &waker).is_pending());
    sem.release(1); // delivered to `first`
    drop(first); // never took it: it goes on to `second`
    assert!(poll_once(&mut second, &waker).is_ready());
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn concurrency_never_exceeds_the_permits_on_two_executors() {
    const LIMIT: usize = 3;
    let sem = Arc::new(Semaphore::new(LIMIT));
    let inside = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let body = {
        let (sem, inside, max) = (Arc::clone(&sem), Arc::clone(&inside), Arc::clone(&max));
        move || {
            let (sem, inside, max) = (Arc::clone(&sem), Arc::clone(&inside), Arc::clone(&max));
            async move {
                for _ in 0..50 {
                    let _p = sem.acquire_async().await.unwrap();
                    let now = inside.fetch_add(1, SeqCst) + 1;
                    max.fetch_max(now, SeqCst);
                    futures::future::ready(()).await;
                    inside.fetch_sub(1, SeqCst);
                }
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..16).map(|_| tokio::spawn(body())).collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    futures::executor::block_on(futures::future::join_all((0..16).map(|_| body())));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || futures::executor::block_on(body()))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        max.load(SeqCst) <= LIMIT,
        "{} inside at once",
        max.load(SeqCst)
    );
    assert_eq!(sem.available_permits(), LIMIT);
}
