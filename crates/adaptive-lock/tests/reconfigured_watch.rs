//! A waiter woken past the watcher cap keeps watching through a
//! reconfiguration. The test forces the load sampler's verdict
//! (`load::set_saturation_override`), process-wide, so this file is a test
//! binary of its own with one test.
#![cfg(not(loom))]

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use adaptive_lock::{AdaptiveMutex, Config, Policy, RawAdaptiveLock, Static, WaitPolicy};
use sync_core::load::set_saturation_override;
use sync_core::testing::{parked_on, wait_until_parked};

fn key<T, P: Policy>(m: &AdaptiveMutex<T, P>) -> usize {
    // SAFETY: only the address is used.
    unsafe { m.raw() as *const RawAdaptiveLock<P> as usize }
}

/// Gives the saturation verdict back to the sampler when dropped.
struct SamplerBack;

impl Drop for SamplerBack {
    fn drop(&mut self) {
        set_saturation_override(None);
    }
}

/// A waiter that arrived behind the watcher cap parks at once; once woken
/// it watches and competes as any watcher. It used to be sent back to park
/// by the first reconfiguration it saw while watching: the cap was applied
/// again with the count of waiters ahead of it when it arrived.
#[test]
fn a_woken_waiter_keeps_watching_through_a_reconfiguration() {
    // Long spins, one watcher, never reconfigured by the policy.
    let spins = WaitPolicy::spin_then_block(u32::MAX);
    let c = Config::new().wait(spins).watchers(Some(1));
    // Only attempts that reconfigure well within a watch's bound (the
    // watch parks 2 ms after it began, whatever its policy) and end their
    // look before it tell anything.
    let window = Duration::from_micros(1500);
    // On saturated CPUs (a loaded test machine) an untimed watch that
    // parks spins for `wait::SATURATED_SPIN_TIME` at most, whatever its
    // count, so a woken waiter there parks again by design within the
    // window: judge the cap's rule on CPUs taken as free (process-wide:
    // this binary has no other test), and give the verdict back even if
    // an assertion fails.
    set_saturation_override(Some(false));
    let _back = SamplerBack;
    let (mut judged, mut reparked) = (0, 0);
    for _ in 0..40 {
        if judged == 5 {
            break;
        }
        let m = Arc::new(AdaptiveMutex::with_policy(0u64, Static(spins)));
        m.configure(c);
        let g = m.lock();
        // A registers first (and leaves on its timeout), so that B arrives
        // behind the cap and parks at once.
        let a = {
            let m = Arc::clone(&m);
            thread::spawn(move || m.try_lock_for(Duration::from_millis(100)).is_some())
        };
        let start = Instant::now();
        while m.stats().waiting < 1 && !a.is_finished() {
            assert!(start.elapsed() < Duration::from_secs(10));
            thread::yield_now();
        }
        let b = {
            let m = Arc::clone(&m);
            thread::spawn(move || *m.lock() += 1)
        };
        while m.stats().waiting < 2 && !a.is_finished() {
            assert!(start.elapsed() < Duration::from_secs(10));
            thread::yield_now();
        }
        if a.is_finished() {
            // A left before B registered (a loaded machine): B may watch,
            // nothing to judge.
            assert!(!a.join().unwrap());
            drop(g);
            b.join().unwrap();
            continue;
        }
        assert!(!a.join().unwrap());
        wait_until_parked(key(&m), 1);
        // Before the wake-up: B's watch cannot begin earlier.
        let woken = Instant::now();
        // Wake B to watch, as a release does when another thread takes the
        // lock first (the token of a release that does not hand it over).
        // SAFETY: the callback only returns a token; the lock's waiters
        // take an unpark with that token for a wake-up to compete.
        unsafe {
            sync_core::parking_lot::unpark_one(key(&m), |_| sync_core::parking_lot::UnparkToken(0))
        };
        // B watching (it has left the queue, and has had time to read the
        // configuration it was woken into), then the reconfiguration.
        while woken.elapsed() < window / 5 {
            std::hint::spin_loop();
        }
        let watching = parked_on(key(&m)) == 0;
        m.configure(c.wait(WaitPolicy::spin_then_block(1 << 20)));
        let mut parked_again = false;
        let mut looked_in_time = false;
        while woken.elapsed() < window {
            let parked = parked_on(key(&m)) != 0;
            // Seen within the window (the clock read after the look), a
            // park is never the watch's own bound.
            looked_in_time = woken.elapsed() < window;
            if parked && looked_in_time {
                parked_again = true;
                break;
            }
            std::hint::spin_loop();
        }
        // An attempt whose looks were all delayed past the window tells
        // nothing.
        if watching && looked_in_time {
            judged += 1;
            reparked += usize::from(parked_again);
        }
        drop(g);
        b.join().unwrap();
        assert_eq!(*m.lock(), 1);
    }
    assert_eq!(
        reparked, 0,
        "{reparked} of {judged} woken waiters parked again at a reconfiguration"
    );
}
