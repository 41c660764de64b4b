//! Timed waits with more runnable threads than cores: 50 threads spin on
//! the CPUs while each timed form waits 1 ms on something that never comes.
//! A wait loop that yields gives the core away for a scheduling round
//! (tens of milliseconds) per yield; the family's wait loop parks or sleeps
//! briefly instead, so each returns within a generous 50 ms. The precise
//! figures are in the report (`busy/`).
#![cfg(not(loom))]

use std::time::Duration;

use lockfree_sync::{Mutex, Semaphore, csp, mpsc};
use sync_core::testing::{BusyThreads, timely};

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
