//! A hostile policy and configurations at the edges of the lock's word
//! (found by review): a panicking policy, a huge sampling rate, spin counts
//! growing past what the word holds, and the `const` constructor.
#![cfg(not(loom))]

use std::sync::Arc;
use std::thread;

use adaptive_lock::{AdaptiveMutex, Config, Policy, RawAdaptiveLock, SimpleAdapt, Stats};
use sync_core::wait::WaitPolicy;

/// Panics at every sample.
struct Panicky;

impl Policy for Panicky {
    const INIT: Self = Panicky;
    fn sampling_rate(&self) -> u32 {
        1
    }
    fn adapt(&mut self, _: &Stats) -> Option<Config> {
        panic!("policy panic");
    }
}

/// A panic in `Policy::adapt` runs in the unlock path: the lock must still
/// be released and keep serving (it once stayed held for ever), and the
/// unlock must not unwind (lock_api would take it for an unlock that left
/// the lock held): the panic is counted instead.
#[test]
fn a_panicking_policy_does_not_leave_the_lock_held() {
    let m = Arc::new(AdaptiveMutex::with_policy(0u32, Panicky));
    for _ in 0..3 {
        let m2 = Arc::clone(&m);
        thread::spawn(move || *m2.lock() += 1)
            .join()
            .expect("the unlock does not unwind");
        assert!(!m.is_locked(), "the lock was left held");
    }
    assert_eq!(m.stats().total.policy_panics, 3);
    // Every critical section ran (the lock served after each panic).
    let Ok(m) = Arc::try_unwrap(m) else {
        panic!("the threads are gone, so the Arc is unique")
    };
    assert_eq!(m.into_inner(), 3);
}

/// A guard dropped while its thread already unwinds must not abort the
/// process when the policy panics too: the policy's panic is dropped.
#[test]
fn a_policy_panic_during_an_unwind_does_not_abort() {
    let m = Arc::new(AdaptiveMutex::with_policy(0u32, Panicky));
    let m2 = Arc::clone(&m);
    let r = thread::spawn(move || {
        let _g = m2.lock();
        panic!("critical section panic");
    })
    .join();
    let msg = r.expect_err("the critical section's panic");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"critical section panic"));
    assert!(!m.is_locked());
}

struct HugeRate;

impl Policy for HugeRate {
    const INIT: Self = HugeRate;
    fn sampling_rate(&self) -> u32 {
        u32::MAX
    }
    fn adapt(&mut self, _: &Stats) -> Option<Config> {
        None
    }
}

/// A sampling rate above 2^31 is clamped, not an overflow panic.
#[test]
fn a_huge_sampling_rate_is_clamped() {
    let m = AdaptiveMutex::with_policy(0u32, HugeRate);
    *m.lock() += 1;
    let c = AdaptiveMutex::<u32, HugeRate>::const_new(0);
    *c.lock() += 1;
    assert_eq!(*m.lock() + *c.lock(), 2);
}

/// SimpleAdapt adds `step` spins per sample while few threads wait. Past
/// what the word holds the count used to read back as "unbounded", which
/// `-2*step` could never bring down: the lock latched at spinning for ever.
#[test]
fn simple_adapt_never_latches_at_unbounded_spins() {
    let raw = RawAdaptiveLock::with_policy(SimpleAdapt::INIT);
    let mut s = raw.stats();
    let mut p = SimpleAdapt {
        threshold: 1,
        step: 1 << 20,
    };
    s.config = Config::new().wait(WaitPolicy::spin_then_block(1)).clamped();
    s.waiting = 1;
    for _ in 0..64 {
        s.config = p.adapt(&s).expect("simple-adapt configures").clamped();
    }
    let grown = s.config.wait_policy().spin_count();
    assert!(grown < u32::MAX, "a finite count became unbounded");
    s.waiting = 100;
    for _ in 0..64 {
        s.config = p.adapt(&s).expect("simple-adapt configures").clamped();
    }
    assert!(
        s.config.wait_policy().parks() && s.config.wait_policy().spin_count() == 0,
        "heavy contention did not bring the spins down: {:?}",
        s.config.wait_policy()
    );
}

/// Finite counts stay finite in the word.
#[test]
fn finite_counts_are_clamped_to_finite_ones() {
    let c = Config::new()
        .wait(WaitPolicy::new().spins(u32::MAX - 1).yields(1000))
        .clamped();
    assert!(c.wait_policy().spin_count() < u32::MAX);
    assert_eq!(c.wait_policy().yield_count(), 254);
    let unbounded = Config::new()
        .wait(WaitPolicy::new().spins(u32::MAX).yields(u32::MAX))
        .clamped();
    assert_eq!(unbounded.wait_policy().spin_count(), u32::MAX);
    assert_eq!(unbounded.wait_policy().yield_count(), u32::MAX);
}

/// The `const` constructor applies the policy's initial configuration at
/// the first acquisition (it used to keep the default for ever).
#[test]
fn the_const_constructor_takes_the_policys_initial_configuration() {
    let m = AdaptiveMutex::<u32, SimpleAdapt>::const_new(0);
    let w = AdaptiveMutex::with_policy(0u32, SimpleAdapt::INIT);
    assert_eq!(w.config(), SimpleAdapt::INIT.initial().clamped());
    drop(m.lock());
    // The first sample configured it; the next samples (every other
    // unlock) adapt it as the policy says: with nobody waiting, pure spin,
    // which is also SimpleAdapt's initial configuration.
    assert_eq!(m.config(), w.config());
}

/// Calls back into its own lock from `adapt` (which runs with the lock
/// held): `try_lock` fails rather than deadlock or succeed, `stats` reads
/// the published snapshot, and `configure` is overridden by what `adapt`
/// returns.
struct Reentrant;

static SELF_LOCK: AdaptiveMutex<u32, Reentrant> = AdaptiveMutex::const_new(0);

impl Policy for Reentrant {
    const INIT: Self = Reentrant;
    fn sampling_rate(&self) -> u32 {
        1
    }
    fn adapt(&mut self, stats: &Stats) -> Option<Config> {
        assert!(
            SELF_LOCK.try_lock().is_none(),
            "the holder's lock was taken twice"
        );
        let published = SELF_LOCK.stats();
        assert!(published.total.acquisitions <= stats.total.acquisitions);
        SELF_LOCK.configure(Config::new().wait(WaitPolicy::spin()));
        Some(stats.config.wait(WaitPolicy::block()))
    }
}

#[test]
fn a_policy_may_call_back_into_its_own_lock() {
    for _ in 0..3 {
        *SELF_LOCK.lock() += 1;
    }
    let s = SELF_LOCK.stats();
    assert_eq!(s.total.policy_panics, 0, "an assertion in adapt failed");
    assert_eq!(s.config.wait_policy(), WaitPolicy::block());
    assert_eq!(*SELF_LOCK.lock(), 3);
}

/// `lock()`s, from `adapt`, the lock `LOCKS[self.0]` (once armed). The
/// policy runs while its thread holds its lock, so a `lock()` of that lock
/// (directly, or from the policy of another lock this one's policy took)
/// could never return: it used to hang the thread for ever.
struct LocksFromAdapt(usize);

static LOCKS: [AdaptiveMutex<u32, LocksFromAdapt>; 2] =
    [AdaptiveMutex::const_new(0), AdaptiveMutex::const_new(0)];
/// Which lock each lock's policy takes (`usize::MAX`: none).
static TARGET: [std::sync::atomic::AtomicUsize; 2] = [
    std::sync::atomic::AtomicUsize::new(usize::MAX),
    std::sync::atomic::AtomicUsize::new(usize::MAX),
];
static POLICY_LOCK_RETURNED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

impl Policy for LocksFromAdapt {
    const INIT: Self = LocksFromAdapt(usize::MAX);
    fn sampling_rate(&self) -> u32 {
        1
    }
    fn adapt(&mut self, stats: &Stats) -> Option<Config> {
        use std::sync::atomic::Ordering::SeqCst;
        // Which lock runs this policy: the one whose stats say it is held.
        let me = if self.0 == usize::MAX {
            usize::from(!LOCKS[0].is_locked())
        } else {
            self.0
        };
        self.0 = me;
        let target = TARGET[me].swap(usize::MAX, SeqCst);
        if target != usize::MAX {
            *LOCKS[target].lock() += 1;
            POLICY_LOCK_RETURNED.fetch_add(1, SeqCst);
        }
        Some(stats.config)
    }
}

/// Runs `f` on a thread, failing (rather than hanging) if it does not
/// finish within ten seconds.
fn finishes(f: impl FnOnce() + Send + 'static) {
    let t = thread::spawn(f);
    let start = std::time::Instant::now();
    while !t.is_finished() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "the thread hangs"
        );
        thread::sleep(std::time::Duration::from_millis(5));
    }
    t.join().unwrap();
}

#[test]
fn a_policy_that_locks_its_own_lock_panics_instead_of_hanging() {
    use std::sync::atomic::Ordering::SeqCst;
    // Each lock's first sample tells its policy which lock it is.
    finishes(|| {
        drop(LOCKS[0].lock());
        drop(LOCKS[1].lock());
    });
    let before = [0, 1].map(|i| LOCKS[i].stats().total.policy_panics);
    let returned = POLICY_LOCK_RETURNED.load(SeqCst);
    // Directly: lock 0's policy locks lock 0.
    TARGET[0].store(0, SeqCst);
    finishes(|| drop(LOCKS[0].lock()));
    assert_eq!(LOCKS[0].stats().total.policy_panics, before[0] + 1);
    assert!(!LOCKS[0].is_locked());
    // Through another lock: lock 0's policy locks lock 1, whose policy
    // locks lock 0. Lock 1's policy panics; lock 0's goes on.
    TARGET[0].store(1, SeqCst);
    TARGET[1].store(0, SeqCst);
    finishes(|| drop(LOCKS[0].lock()));
    assert_eq!(LOCKS[0].stats().total.policy_panics, before[0] + 1);
    assert_eq!(LOCKS[1].stats().total.policy_panics, before[1] + 1);
    assert_eq!(POLICY_LOCK_RETURNED.load(SeqCst), returned + 1);
    assert_eq!(*LOCKS[1].lock(), 1);
    // Another lock, from the policy, still works.
    TARGET[1].store(0, SeqCst);
    finishes(|| drop(LOCKS[1].lock()));
    assert_eq!(LOCKS[1].stats().total.policy_panics, before[1] + 1);
    assert_eq!(POLICY_LOCK_RETURNED.load(SeqCst), returned + 2);
    assert!(!LOCKS[0].is_locked() && !LOCKS[1].is_locked());
}

/// Takes its own lock with long timeouts from `adapt` (once armed), and
/// records what each attempt returned.
struct TimedSelfLock;

static TIMED_SELF: AdaptiveMutex<u32, TimedSelfLock> = AdaptiveMutex::const_new(0);
static TIMED_SELF_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Attempts made and attempts that returned the lock.
static TIMED_SELF_TRIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static TIMED_SELF_TAKEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Policy for TimedSelfLock {
    const INIT: Self = TimedSelfLock;
    fn sampling_rate(&self) -> u32 {
        1
    }
    fn adapt(&mut self, stats: &Stats) -> Option<Config> {
        use std::sync::atomic::Ordering::SeqCst;
        use std::time::{Duration, Instant};
        if TIMED_SELF_ARMED.swap(false, SeqCst) {
            let hour = Duration::from_secs(3600);
            let taken = [
                TIMED_SELF.try_lock_for(hour).is_some(),
                TIMED_SELF.try_lock_until(Instant::now() + hour).is_some(),
                TIMED_SELF.try_lock_with_priority_for(3, hour).is_some(),
                TIMED_SELF
                    .try_lock_with_priority_until(3, Instant::now() + hour)
                    .is_some(),
                // Too large for an `Instant`: waits without a deadline
                // elsewhere, and still fails at once here.
                TIMED_SELF.try_lock_for(Duration::MAX).is_some(),
                TIMED_SELF
                    .try_lock_with_priority_for(3, Duration::MAX)
                    .is_some(),
            ];
            TIMED_SELF_TRIES.fetch_add(taken.len(), SeqCst);
            TIMED_SELF_TAKEN.fetch_add(taken.iter().filter(|&&t| t).count(), SeqCst);
        }
        Some(stats.config)
    }
}

/// A timed lock of a lock, from that lock's policy, could only time out:
/// the policy runs while its thread holds the lock. It used to wait out
/// its whole timeout with the lock held (an hour here; a thread that asked
/// for a year hung for a year); it now returns at once, without the lock,
/// as `try_lock` does, and counts as a timeout. So does a timeout too
/// large for an `Instant` (`Duration::MAX`), which used to take the untimed
/// `lock` and panic (caught as the policy's panic).
#[test]
fn a_policy_that_times_a_lock_of_its_own_lock_fails_at_once() {
    use std::sync::atomic::Ordering::SeqCst;
    // The first sample applies the policy's configuration.
    finishes(|| drop(TIMED_SELF.lock()));
    let before = TIMED_SELF.stats().total;
    TIMED_SELF_ARMED.store(true, SeqCst);
    finishes(|| drop(TIMED_SELF.lock()));
    let after = TIMED_SELF.stats().total;
    assert_eq!(TIMED_SELF_TRIES.load(SeqCst), 6, "an attempt panicked");
    assert_eq!(
        TIMED_SELF_TAKEN.load(SeqCst),
        0,
        "the holder's lock was taken twice"
    );
    assert_eq!(after.timeouts, before.timeouts + 6);
    assert_eq!(after.policy_panics, before.policy_panics);
    assert_eq!(after.acquisitions, before.acquisitions + 1);
    assert!(!TIMED_SELF.is_locked());
}
