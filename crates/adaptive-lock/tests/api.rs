//! Behaviour of the adaptive lock through its public API: timeouts under
//! every waiting policy, priority and FCFS order, handoff, panics inside
//! critical sections, external control and exact monitor counts.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use adaptive_lock::{
    AdaptiveMutex, Config, Learned, Policy, RawAdaptiveLock, Scheduler, SimpleAdapt, Static,
    WaitPolicy,
};
use sync_core::testing::parked_on;

fn key<T, P: Policy>(m: &AdaptiveMutex<T, P>) -> usize {
    // SAFETY: only the address is used.
    unsafe { m.raw() as *const RawAdaptiveLock<P> as usize }
}

/// Waits until `n` threads are parked on `m`.
fn until_parked<T, P: Policy>(m: &AdaptiveMutex<T, P>, n: usize) {
    let start = Instant::now();
    while parked_on(key(m)) < n {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waiters never parked"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

const POLICIES: [WaitPolicy; 6] = [
    WaitPolicy::new(),
    WaitPolicy::spin(),
    WaitPolicy::spin_backoff(),
    WaitPolicy::block(),
    WaitPolicy::spin_then_block(1_000_000),
    WaitPolicy::conditional(Duration::from_millis(500)),
];

/// A 1 ms timed lock returns on time whatever the policy, while busy
/// threads load both cores: the deadline is checked while spinning and
/// yielding, not only before parking.
#[test]
fn timed_lock_fires_on_time_under_every_policy_and_load() {
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for wait in POLICIES {
        let m = Arc::new(AdaptiveMutex::with_policy(0, Static(wait)));
        let guard = m.lock();
        let m2 = Arc::clone(&m);
        let late = thread::spawn(move || {
            let start = Instant::now();
            let got = m2.try_lock_for(Duration::from_millis(1)).is_some();
            (got, start.elapsed())
        })
        .join()
        .unwrap();
        drop(guard);
        assert!(!late.0, "{wait:?}: got a held lock");
        // Generous: a waiter that never checked its deadline while it
        // watches would wait for ever (the guard is held until it returns);
        // a few scheduling quanta on a loaded 2-core VM reach 100 ms.
        assert!(
            late.1 < Duration::from_millis(500),
            "{wait:?}: a 1 ms timeout took {:?}",
            late.1
        );
        assert_eq!(m.stats().total.timeouts, 1);
    }
    stop.store(true, Ordering::Relaxed);
    load.into_iter().for_each(|t| t.join().unwrap());
}

/// Parks a waiter of each priority in `prios` behind the held lock, one at
/// a time, then releases: the order in which they got the lock.
fn release_order(scheduler: Scheduler, prios: &[usize]) -> Vec<usize> {
    let m = Arc::new(AdaptiveMutex::with_policy(
        Vec::new(),
        Static(WaitPolicy::block()),
    ));
    m.configure(Config::new().wait(WaitPolicy::block()).scheduler(scheduler));
    let guard = m.lock();
    let mut ts = Vec::new();
    for (i, &p) in prios.iter().enumerate() {
        let m2 = Arc::clone(&m);
        ts.push(thread::spawn(move || m2.lock_with_priority(p).push(p)));
        until_parked(&m, i + 1);
    }
    drop(guard);
    ts.into_iter().for_each(|t| t.join().unwrap());
    Arc::try_unwrap(m)
        .expect("every waiter joined")
        .into_inner()
}

#[test]
fn priority_scheduler_wakes_the_highest_first() {
    let order = release_order(Scheduler::PRIORITY.handoff(true), &[1, 5, 3, 5]);
    assert_eq!(order, [5, 5, 3, 1]);
}

#[test]
fn fcfs_scheduler_wakes_in_arrival_order() {
    let order = release_order(Scheduler::HANDOFF, &[1, 5, 3]);
    assert_eq!(order, [1, 5, 3]);
}

/// With handoff, the releasing thread cannot take the lock back before the
/// woken waiter has had it.
#[test]
fn handoff_release_gives_the_lock_to_the_waiter() {
    let m = Arc::new(AdaptiveMutex::with_policy(
        0u32,
        Static(WaitPolicy::block()),
    ));
    m.configure(
        Config::new()
            .wait(WaitPolicy::block())
            .scheduler(Scheduler::HANDOFF),
    );
    let guard = m.lock();
    let m2 = Arc::clone(&m);
    let t = thread::spawn(move || *m2.lock() = 7);
    until_parked(&m, 1);
    drop(guard);
    // The waiter owns it now (or has already run): we see its write.
    assert_eq!(*m.lock(), 7);
    t.join().unwrap();
    // Ours, and perhaps the waiter's back to us if we parked meanwhile.
    assert!(m.stats().total.handoffs >= 1);
}

#[test]
fn unlock_fair_hands_over_under_a_barging_scheduler() {
    let m = Arc::new(AdaptiveMutex::with_policy(
        0u32,
        Static(WaitPolicy::block()),
    ));
    let guard = m.lock();
    let m2 = Arc::clone(&m);
    let t = thread::spawn(move || *m2.lock() = 7);
    until_parked(&m, 1);
    adaptive_lock::AdaptiveMutexGuard::unlock_fair(guard);
    t.join().unwrap();
    assert_eq!(*m.lock(), 7);
    assert_eq!(m.stats().total.handoffs, 1);
}

/// lock_api mutexes are not poisoned: a panic in a critical section
/// releases the lock and leaves the data as it was.
#[test]
fn a_panic_inside_the_critical_section_releases_the_lock() {
    let m = Arc::new(AdaptiveMutex::<i32>::new(1));
    let m2 = Arc::clone(&m);
    let r = thread::spawn(move || {
        let mut g = m2.lock();
        *g = 2;
        panic!("inside the critical section");
    })
    .join();
    assert!(r.is_err());
    assert!(!m.is_locked());
    assert_eq!(*m.lock(), 2);
}

#[test]
fn counters_are_exact_after_join() {
    for threads in [2, 4] {
        let m = Arc::new(AdaptiveMutex::<u64>::new(0));
        let ts: Vec<_> = (0..threads)
            .map(|_| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    for i in 0..20_000 {
                        if i % 7 == 0 {
                            if let Some(mut g) = m.try_lock_for(Duration::from_secs(10)) {
                                *g += 1;
                            }
                        } else {
                            *m.lock() += 1;
                        }
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        let s = m.stats();
        assert_eq!(*m.lock(), threads * 20_000);
        assert_eq!(s.total.acquisitions, threads * 20_000);
        assert!(s.total.contended <= s.total.acquisitions);
        assert!(s.total.spin_successes <= s.total.contended);
        assert_eq!(s.waiting, 0);
    }
}

#[test]
fn configure_is_external_control_and_static_keeps_it() {
    let m = AdaptiveMutex::with_policy((), Static(WaitPolicy::new()));
    let c = Config::new()
        .wait(WaitPolicy::spin_then_block(40))
        .scheduler(Scheduler::PRIORITY)
        .watchers(Some(2));
    m.configure(c);
    for _ in 0..1_000 {
        drop(m.lock());
    }
    assert_eq!(m.config(), c);
}

/// The paper's simple-adapt: pure spin with nobody waiting.
#[test]
fn simple_adapt_spins_when_nobody_waits() {
    let m = AdaptiveMutex::with_policy(
        (),
        SimpleAdapt {
            threshold: 1,
            step: 10,
        },
    );
    m.configure(Config::new().wait(WaitPolicy::block()));
    for _ in 0..4 {
        drop(m.lock());
    }
    assert_eq!(m.config().wait_policy(), WaitPolicy::spin());
}

/// The monitor's hold-time estimate follows the critical section under the
/// learned policy.
#[test]
fn learned_policy_learns_from_contention() {
    let m = Arc::new(AdaptiveMutex::<u64, Learned>::new(0));
    let ts: Vec<_> = (0..3)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                for _ in 0..2_000 {
                    let mut g = m.lock();
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_micros(5) {
                        *g += 1;
                    }
                }
            })
        })
        .collect();
    ts.into_iter().for_each(|t| t.join().unwrap());
    let s = m.stats();
    assert!(s.total.contended > 0);
    assert!(
        s.hold_time >= Duration::from_micros(4),
        "hold time estimate {:?}",
        s.hold_time
    );
}

#[test]
fn uncontended_lock_does_not_wait() {
    let m = AdaptiveMutex::<i32>::new(0);
    for _ in 0..100 {
        *m.lock() += 1;
    }
    let s = m.stats();
    assert_eq!(s.total.acquisitions, 100);
    assert_eq!(s.total.contended, 0);
    assert_eq!(s.total.parks, 0);
}

/// `AdaptiveMutex::new(value)` infers the default policy: with the old type
/// alias (`lock_api::Mutex<RawAdaptiveLock<P>, T>` with `P = Learned`),
/// this failed to compile (E0283, the alias's default is not used while
/// inferring).
#[test]
fn new_infers_the_default_policy() {
    let m = AdaptiveMutex::new(0u64);
    let m: &AdaptiveMutex<u64, Learned> = &m;
    *m.lock() += 1;
    assert_eq!(*m.lock(), 1);
}

/// The owned guard: moved to another thread, it keeps the lock until it is
/// dropped there; the timed forms give up while it is held; `unlock_fair`
/// releases.
#[test]
fn lock_arc_guards_outlive_the_borrow_and_release_on_drop() {
    use adaptive_lock::ArcAdaptiveMutexGuard;
    let m = Arc::new(AdaptiveMutex::new(Vec::new()));
    let mut guard = m.lock_arc();
    guard.push(1);
    assert!(m.try_lock_arc().is_none());
    assert!(m.try_lock_arc_for(Duration::from_millis(1)).is_none());
    assert!(
        m.try_lock_arc_until(Instant::now() + Duration::from_millis(1))
            .is_none()
    );
    let other = thread::spawn(move || {
        guard.push(2);
        drop(guard);
    });
    other.join().unwrap();
    let guard = m
        .try_lock_arc_for(Duration::from_secs(5))
        .expect("released");
    assert_eq!(*guard, [1, 2]);
    assert!(Arc::ptr_eq(ArcAdaptiveMutexGuard::mutex(&guard), &m));
    ArcAdaptiveMutexGuard::unlock_fair(guard);
    assert!(!m.is_locked());
    // Every guard dropped: the lock's only owner is `m`.
    assert_eq!(Arc::strong_count(&m), 1);
    assert_eq!(m.stats().total.acquisitions, 2);
}

/// The timed priority forms give up while the lock is held.
#[test]
fn timed_priority_locks_give_up_while_held() {
    let m = AdaptiveMutex::new(0);
    let held = m.lock();
    thread::scope(|s| {
        s.spawn(|| {
            assert!(
                m.try_lock_with_priority_for(3, Duration::from_millis(1))
                    .is_none()
            );
            let deadline = Instant::now() + Duration::from_millis(1);
            assert!(m.try_lock_with_priority_until(3, deadline).is_none());
        });
    });
    drop(held);
    assert!(
        m.try_lock_with_priority_for(3, Duration::from_millis(1))
            .is_some()
    );
    assert_eq!(m.stats().total.timeouts, 2);
}

#[test]
fn try_map_or_err_maps_or_gives_the_guard_back_with_the_error() {
    use adaptive_lock::AdaptiveMutexGuard;
    let m = AdaptiveMutex::new(vec![1, 2]);
    let mut second =
        AdaptiveMutexGuard::try_map_or_err(m.lock(), |v| v.get_mut(1).ok_or("none")).unwrap();
    *second += 1;
    drop(second);
    let Err((guard, error)) =
        AdaptiveMutexGuard::try_map_or_err(m.lock(), |v| v.get_mut(9).ok_or(9))
    else {
        panic!("mapped a missing element");
    };
    assert_eq!((&*guard, error), (&vec![1, 3], 9));
    assert!(m.is_locked(), "the guard came back holding the lock");
    drop(guard);
    assert!(!m.is_locked());
}

#[test]
fn an_arc_guard_has_lock_apis_associated_functions() {
    use adaptive_lock::ArcAdaptiveMutexGuard;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let m = Arc::new(AdaptiveMutex::with_policy(
        0u32,
        Static(WaitPolicy::block()),
    ));
    let mut guard = m.lock_arc();
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        ArcAdaptiveMutexGuard::unlocked(&mut guard, || {
            assert!(!m.is_locked(), "released while `f` runs");
            panic!("`f` panics");
        })
    }));
    assert!(unwound.is_err());
    assert!(m.is_locked(), "taken back when `f` unwound");
    *guard += 1;
    ArcAdaptiveMutexGuard::unlocked_fair(&mut guard, || assert!(!m.is_locked()));
    // `bump` hands the lock to the parked thread and takes it back after it.
    let m2 = Arc::clone(&m);
    let t = thread::spawn(move || *m2.lock() += 10);
    until_parked(&m, 1);
    ArcAdaptiveMutexGuard::bump(&mut guard);
    assert_eq!(*guard, 11);
    let back = ArcAdaptiveMutexGuard::into_arc(guard);
    assert!(Arc::ptr_eq(&back, &m) && !m.is_locked());
    t.join().unwrap();
}
