//! A panicking policy must never break the lock: its panics run in the
//! unlock path, and lock_api assumes an unlock that unwinds left the lock
//! held. Every guard method that unlocks is driven with a waiter parked and
//! a third thread probing with `try_lock`, while an owner count checks that
//! at most one thread is ever inside.
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use adaptive_lock::{
    AdaptiveMutex, AdaptiveMutexGuard, Config, MappedAdaptiveMutexGuard, Policy, RawAdaptiveLock,
    Stats,
};
use sync_core::testing::parked_on;

/// Panics in `adapt` once armed (every unlock samples).
struct PanicWhenArmed(&'static AtomicBool);

impl Policy for PanicWhenArmed {
    const INIT: Self = PanicWhenArmed(&NEVER);
    fn sampling_rate(&self) -> u32 {
        1
    }
    fn adapt(&mut self, _: &Stats) -> Option<Config> {
        if self.0.swap(false, Ordering::Relaxed) {
            panic!("policy panic");
        }
        None
    }
}

static NEVER: AtomicBool = AtomicBool::new(false);

type Lock = AdaptiveMutex<(), PanicWhenArmed>;
type Guard<'a> = AdaptiveMutexGuard<'a, (), PanicWhenArmed>;

/// Threads inside the critical section, and whether two ever were.
#[derive(Default)]
struct Owners {
    inside: AtomicUsize,
    broken: AtomicBool,
}

impl Owners {
    fn enter(&self) {
        if self.inside.fetch_add(1, Ordering::SeqCst) != 0 {
            self.broken.store(true, Ordering::SeqCst);
        }
    }
    fn exit(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }
    /// Stays inside for a while, so that a second owner would overlap.
    fn stay(&self) {
        self.enter();
        thread::sleep(Duration::from_millis(30));
        self.exit();
    }
}

fn key(m: &Lock) -> usize {
    // SAFETY: only the address is used.
    unsafe { m.raw() as *const RawAdaptiveLock<PanicWhenArmed> as usize }
}

/// Holds `m`, parks a waiter behind it, starts a prober, arms the policy
/// and runs `op` on the held guard (the owner count is the caller's to
/// leave and re-enter around the unlock). Returns whether `op` unwound.
fn scene(armed: &'static AtomicBool, op: impl FnOnce(Guard<'_>, &Owners)) -> bool {
    let m = Arc::new(Lock::with_policy((), PanicWhenArmed(armed)));
    let owners = Arc::new(Owners::default());
    let stop = Arc::new(AtomicBool::new(false));
    let g = m.lock();
    owners.enter();
    let waiter = {
        let (m, owners) = (Arc::clone(&m), Arc::clone(&owners));
        thread::spawn(move || {
            let _g = m.lock();
            owners.stay();
        })
    };
    let start = Instant::now();
    while parked_on(key(&m)) < 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "never parked");
        thread::sleep(Duration::from_millis(1));
    }
    let prober = {
        let (m, owners, stop) = (Arc::clone(&m), Arc::clone(&owners), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(_g) = m.try_lock() {
                    owners.enter();
                    owners.exit();
                }
                thread::yield_now();
            }
        })
    };
    armed.store(true, Ordering::Relaxed);
    let unwound = catch_unwind(AssertUnwindSafe(|| op(g, &owners))).is_err();
    waiter.join().expect("the waiter");
    stop.store(true, Ordering::Relaxed);
    prober.join().expect("the prober");
    assert!(!m.is_locked(), "left locked");
    assert!(
        !owners.broken.load(Ordering::SeqCst),
        "two threads held the lock at once"
    );
    unwound
}

#[test]
fn unlock_fair_keeps_exclusion_when_the_policy_panics() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    let unwound = scene(&ARMED, |g, owners| {
        owners.exit();
        AdaptiveMutexGuard::unlock_fair(g);
    });
    assert!(!unwound, "the unlock unwound");
}

#[test]
fn mapped_unlock_fair_keeps_exclusion_when_the_policy_panics() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    let unwound = scene(&ARMED, |g, owners| {
        let g = AdaptiveMutexGuard::map(g, |x| x);
        owners.exit();
        MappedAdaptiveMutexGuard::unlock_fair(g);
    });
    assert!(!unwound, "the unlock unwound");
}

#[test]
fn unlocked_keeps_exclusion_when_the_policy_panics() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    let unwound = scene(&ARMED, |mut g, owners| {
        owners.exit();
        AdaptiveMutexGuard::unlocked(&mut g, || thread::sleep(Duration::from_millis(5)));
        // The guard is ours again.
        owners.stay();
        drop(g);
    });
    assert!(!unwound, "the unlock unwound");
}

#[test]
fn unlocked_fair_keeps_exclusion_when_the_policy_panics() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    let unwound = scene(&ARMED, |mut g, owners| {
        owners.exit();
        AdaptiveMutexGuard::unlocked_fair(&mut g, || thread::sleep(Duration::from_millis(5)));
        owners.stay();
        drop(g);
    });
    assert!(!unwound, "the unlock unwound");
}

#[test]
fn bump_keeps_exclusion_when_the_policy_panics() {
    static ARMED: AtomicBool = AtomicBool::new(false);
    let unwound = scene(&ARMED, |mut g, owners| {
        owners.exit();
        AdaptiveMutexGuard::bump(&mut g);
        owners.stay();
        drop(g);
    });
    assert!(!unwound, "the unlock unwound");
}

/// Panics in the method `W` names: 0 `initial`, 1 `sampling_rate`,
/// 2 `uses_time`, which a lock made by `new` calls at its first unlock.
struct Fragile<const W: u8>;

impl<const W: u8> Policy for Fragile<W> {
    const INIT: Self = Fragile;
    fn initial(&self) -> Config {
        assert_ne!(W, 0, "initial panics");
        Config::new()
    }
    fn sampling_rate(&self) -> u32 {
        assert_ne!(W, 1, "sampling_rate panics");
        1
    }
    fn uses_time(&self) -> bool {
        assert_ne!(W, 2, "uses_time panics");
        true
    }
    fn adapt(&mut self, _: &Stats) -> Option<Config> {
        None
    }
}

/// The first unlock of a lock made by `new` asks the policy for its
/// initial configuration: a panic there must neither leave the lock held
/// nor unwind out of the unlock.
fn first_unlock_survives<const W: u8>() {
    let m = AdaptiveMutex::<u32, Fragile<W>>::const_new(0);
    let unwound = catch_unwind(AssertUnwindSafe(|| *m.lock() += 1)).is_err();
    assert!(!m.is_locked(), "the lock was left held");
    assert!(!unwound, "the unlock unwound");
    for _ in 0..3 {
        *m.lock() += 1;
    }
    assert_eq!(*m.lock(), 4);
    // The configuration stays the default one.
    assert_eq!(m.config(), Config::new());
}

#[test]
fn a_panicking_initial_does_not_leave_the_lock_held() {
    first_unlock_survives::<0>();
}

#[test]
fn a_panicking_sampling_rate_does_not_leave_the_lock_held() {
    first_unlock_survives::<1>();
}

#[test]
fn a_panicking_uses_time_does_not_leave_the_lock_held() {
    first_unlock_survives::<2>();
}

/// The policy's panics are counted in the monitor, once each.
#[test]
fn policy_panics_are_counted() {
    let m = AdaptiveMutex::<u32, Fragile<0>>::const_new(0);
    drop(m.lock());
    assert_eq!(m.stats().total.policy_panics, 1);
    static ARMED: AtomicBool = AtomicBool::new(false);
    let m = Lock::with_policy((), PanicWhenArmed(&ARMED));
    for _ in 0..3 {
        ARMED.store(true, Ordering::Relaxed);
        drop(m.lock());
    }
    let s = m.stats();
    assert_eq!((s.total.policy_panics, s.total.acquisitions), (3, 3));
}

/// Panics in `adapt` once `TLS_ARMED` is set (its `INIT` is the policy of
/// a lock in a `static`).
struct PanicInTls;

static TLS_ARMED: AtomicBool = AtomicBool::new(false);

impl Policy for PanicInTls {
    const INIT: Self = PanicInTls;
    fn adapt(&mut self, _: &Stats) -> Option<Config> {
        if TLS_ARMED.swap(false, Ordering::Relaxed) {
            panic!("policy panic in a thread-local destructor");
        }
        None
    }
}

/// A guard dropped by a thread-local destructor, whose unlock runs a
/// panicking policy: a panic out of a thread-local destructor aborts the
/// process, so the unlock must not unwind there either.
#[test]
fn a_policy_panic_in_a_thread_local_destructor_does_not_abort() {
    type TlsGuard = AdaptiveMutexGuard<'static, (), PanicInTls>;
    static M: AdaptiveMutex<(), PanicInTls> = AdaptiveMutex::const_new(());
    struct Holds(Option<TlsGuard>);
    impl Drop for Holds {
        fn drop(&mut self) {
            // The lock's first unlock is sampled: the policy runs.
            TLS_ARMED.store(true, Ordering::Relaxed);
            drop(self.0.take());
        }
    }
    thread_local! {
        static HELD: std::cell::RefCell<Holds> = const { std::cell::RefCell::new(Holds(None)) };
    }
    thread::spawn(|| HELD.with(|h| h.borrow_mut().0 = Some(M.lock())))
        .join()
        .expect("the thread and its destructors ran");
    assert!(!TLS_ARMED.load(Ordering::Relaxed), "the policy did not run");
    assert!(!M.is_locked());
    assert_eq!(M.stats().total.policy_panics, 1);
}

/// Every payload of a sample's policy panics is dropped once the lock is
/// released, not only the first: a `const_new` lock's first sample calls
/// four policy methods, and a payload whose `Drop` takes the same lock (a
/// log of the policy's failures) would otherwise deadlock.
#[test]
fn every_payload_of_a_samples_panics_is_dropped_after_the_release() {
    static LOG: AdaptiveMutex<Vec<&'static str>, Failing> = AdaptiveMutex::const_new(Vec::new());
    /// A panic payload that records itself in the log when dropped.
    struct Report(&'static str);
    impl Drop for Report {
        fn drop(&mut self) {
            let logged = LOG.try_lock_for(Duration::from_secs(5));
            logged
                .expect("a payload was dropped while the lock was held")
                .push(self.0);
        }
    }
    struct Failing;
    impl Policy for Failing {
        const INIT: Self = Failing;
        fn initial(&self) -> Config {
            std::panic::panic_any(Report("initial"))
        }
        fn sampling_rate(&self) -> u32 {
            std::panic::panic_any(Report("sampling_rate"))
        }
        fn uses_time(&self) -> bool {
            std::panic::panic_any(Report("uses_time"))
        }
        fn adapt(&mut self, _: &Stats) -> Option<Config> {
            std::panic::panic_any(Report("adapt"))
        }
    }
    LOG.lock().push("first");
    let mut log = LOG.lock().clone();
    log.sort_unstable();
    assert_eq!(
        log,
        ["adapt", "first", "initial", "sampling_rate", "uses_time"],
        "a payload was not dropped, or dropped while the lock was held"
    );
}
