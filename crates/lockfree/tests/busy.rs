//! Timed waits with more runnable threads than cores: 50 threads spin on
//! the CPUs while each timed form waits 1 ms on something that never comes.
//! A wait loop that yields gives the core away for a scheduling round
//! (tens of milliseconds) per yield; the family's wait loop parks or sleeps
//! briefly instead, so each returns within a generous 50 ms. The precise
//! figures are in the report (`busy/`).
#![cfg(not(loom))]

use std::time::Duration;

use lockfree_sync::{Mutex, Semaphore, csp, mpsc};
use sync_core::testing::{BusyThreads, holds_within, timely};

const TIMEOUT: Duration = Duration::from_millis(1);
const BOUND: Duration = Duration::from_millis(50);
/// Tries per form: the median must keep the bound (`testing::timely`).
const TRIES: usize = 5;

#[test]
fn timed_waits_return_on_time_with_50_busy_threads() {
    let _busy = BusyThreads::start(50);
    let m = Mutex::new(0);
    let _held = m.lock();
    let sem = Semaphore::new(0);
    let (_tx, rx) = mpsc::channel::<u64>();
    let (mut csp_tx, _csp_rx) = csp::channel::<u64>();
    let (_csp_tx, mut csp_rx) = csp::channel::<u64>();
    let (_alt_tx, mut alt_rx) = csp::channel::<u64>();
    let r = timely("Mutex::try_lock_for(1 ms)", TIMEOUT, BOUND, TRIES, || {
        m.try_lock_for(TIMEOUT)
    });
    assert!(r.iter().all(Option::is_none));
    let r = timely(
        "Semaphore::try_acquire_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || sem.try_acquire_for(TIMEOUT).is_err(),
    );
    assert!(r.iter().all(|&r| r));
    let r = timely(
        "mpsc::Receiver::try_recv_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || rx.try_recv_for(TIMEOUT),
    );
    assert!(r.iter().all(|r| *r == Err(mpsc::TryRecvError::Empty)));
    let r = timely(
        "csp::Sender::try_send_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || csp_tx.try_send_for(7, TIMEOUT),
    );
    assert!(r.iter().all(|r| *r == Err(csp::TrySendError::Full(7))));
    let r = timely(
        "csp::Receiver::try_recv_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || csp_rx.try_recv_for(TIMEOUT),
    );
    assert!(r.iter().all(|r| *r == Err(csp::TryRecvError::Empty)));
    let r = timely(
        "csp::Alt::try_select_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || csp::Alt::new(vec![&mut alt_rx]).try_select_for(TIMEOUT),
    );
    assert!(r.iter().all(Option::is_none));
}

/// The timed forms of the mutex and the channel added to the naming rule's
/// table: the `Arc` mutex's and the deadline forms.
#[test]
fn arc_and_deadline_forms_return_on_time_with_50_busy_threads() {
    use std::sync::Arc;
    use std::time::Instant;
    let _busy = BusyThreads::start(50);
    let m = Arc::new(Mutex::new(0));
    let _held = m.lock();
    let (_tx, rx) = mpsc::channel::<u64>();
    let r = timely(
        "Mutex::try_lock_arc_for(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || m.try_lock_arc_for(TIMEOUT),
    );
    assert!(r.iter().all(Option::is_none));
    let r = timely(
        "Mutex::try_lock_arc_until(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || m.try_lock_arc_until(Instant::now() + TIMEOUT),
    );
    assert!(r.iter().all(Option::is_none));
    let r = timely("Mutex::try_lock_until(1 ms)", TIMEOUT, BOUND, TRIES, || {
        m.try_lock_until(Instant::now() + TIMEOUT)
    });
    assert!(r.iter().all(Option::is_none));
    let r = timely(
        "mpsc::Receiver::try_recv_until(1 ms)",
        TIMEOUT,
        BOUND,
        TRIES,
        || rx.try_recv_until(Instant::now() + TIMEOUT),
    );
    assert!(r.iter().all(|r| *r == Err(mpsc::TryRecvError::Empty)));
}

/// The timed forms again, each where its wait is not alone: a lock behind
/// a queue of threads and a task (both fairness modes), an acquire behind
/// a head request that permits trickle to, a head request served in part,
/// and an `Alt` whose senders make and withdraw timed offers meanwhile.
/// Each returns within the bound, and nothing is lost on the way.
#[test]
fn timed_waits_behind_others_return_on_time_with_50_busy_threads() {
    use lockfree_sync::Fairness;
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    use std::task::{Context, Waker};

    let _busy = BusyThreads::start(50);
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Arc::new(Mutex::with_fairness(0u32, fairness));
        let held = m.lock();
        let queued: Vec<_> = (0..3)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || *m.lock() += 1)
            })
            .collect();
        let mut task = Box::pin(m.lock_async());
        assert!(
            task.as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        std::thread::sleep(Duration::from_millis(20));
        let what = format!("{fairness:?} Mutex::try_lock_for(1 ms) behind a queue");
        let r = timely(&what, TIMEOUT, BOUND, TRIES, || {
            m.try_lock_for(TIMEOUT).is_none()
        });
        assert!(r.iter().all(|&timed_out| timed_out));
        drop(held);
        // The task may be the one woken (or handed the lock): it is never
        // polled again, so it is dropped, which passes that on.
        drop(task);
        for t in queued {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 3);
    }

    // The head asks for more than the feeder gives in the tries' time (a
    // head served during the tries would leave the permits fed after it
    // free for them), and is queued before the feeder starts (one that
    // queued later would find them free too): it keeps the one permit
    // there is once it is counted.
    const HEAD: usize = 1 << 20;
    let sem = Arc::new(Semaphore::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let head = {
        let sem = Arc::clone(&sem);
        std::thread::spawn(move || sem.acquire_many(HEAD).unwrap().forget())
    };
    assert!(
        holds_within(Duration::from_secs(10), || sem.available_permits() == 0),
        "the head never queued"
    );
    let fed = Arc::new(AtomicUsize::new(0));
    let feeder = {
        let (sem, stop, fed) = (Arc::clone(&sem), Arc::clone(&stop), Arc::clone(&fed));
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                sem.add_permits(1);
                fed.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    };
    // Trickling before the tries.
    assert!(
        holds_within(Duration::from_secs(10), || fed.load(Relaxed) != 0),
        "the feeder never ran"
    );
    let r = timely(
        "Semaphore::try_acquire_many_for(3, 1 ms) behind a head",
        TIMEOUT,
        BOUND,
        TRIES,
        || sem.try_acquire_many_for(3, TIMEOUT).is_err(),
    );
    assert!(r.iter().all(|&timed_out| timed_out));
    stop.store(true, Relaxed);
    feeder.join().unwrap();
    let fed = fed.load(Relaxed);
    assert!(!head.is_finished(), "the head was served early");
    sem.add_permits(HEAD);
    head.join().unwrap();
    assert_eq!(sem.available_permits(), 1 + fed, "a permit was lost");

    let sem = Semaphore::new(0);
    let r = timely(
        "Semaphore::try_acquire_many_for(5, 1 ms) served in part",
        TIMEOUT,
        BOUND,
        TRIES,
        || {
            sem.add_permits(2);
            let timed_out = sem.try_acquire_many_for(5, TIMEOUT).is_err();
            // The two found come back: the next try starts from none.
            assert_eq!(sem.forget_permits(2), 2);
            timed_out
        },
    );
    assert!(r.iter().all(|&timed_out| timed_out));

    let (tx1, mut rx1) = csp::channel::<u64>();
    let (tx2, mut rx2) = csp::channel::<u64>();
    let stop = Arc::new(AtomicBool::new(false));
    let offer = |mut tx: csp::Sender<u64>| {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(Relaxed) {
                if tx.try_send_for(sent, Duration::from_micros(300)).is_ok() {
                    sent += 1;
                }
            }
            (tx, sent)
        })
    };
    let (a, b) = (offer(tx1), offer(tx2));
    let mut alt = csp::Alt::new(vec![&mut rx1, &mut rx2]);
    let r = timely(
        "csp::Alt::try_select_for(1 ms) beside timed offers",
        TIMEOUT,
        BOUND,
        TRIES,
        || alt.try_select_for(TIMEOUT).map(|(_, v)| v.unwrap()),
    );
    drop(alt);
    stop.store(true, Relaxed);
    let ((_tx1, sent1), (_tx2, sent2)) = (a.join().unwrap(), b.join().unwrap());
    let kept = [rx1.try_recv(), rx2.try_recv()]
        .iter()
        .filter(|r| r.is_ok())
        .count();
    let selected = r.iter().filter(|v| v.is_some()).count();
    assert_eq!((selected + kept) as u64, sent1 + sent2, "a value was lost");
}
