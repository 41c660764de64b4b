//! Random operation sequences on one thread against a sequential model:
//! lock state, exact counters, configuration kept as set (clamped).
#![cfg(not(loom))]

use std::time::Duration;

use adaptive_lock::{Config, RawAdaptiveLock, Scheduler, Static, WaitPolicy};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    TryLock,
    TimedLock,
    Lock,
    Unlock,
    UnlockFair,
    Configure(u32, u32, bool, bool, Option<u64>, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::TryLock),
        Just(Op::TimedLock),
        Just(Op::Lock),
        Just(Op::Unlock),
        Just(Op::UnlockFair),
        (
            any::<u32>(),
            any::<u32>(),
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(0u64..5_000_000),
            0u8..4,
        )
            .prop_map(|(s, y, b, p, t, k)| Op::Configure(s, y, b, p, t, k)),
    ]
}

proptest! {
    #[test]
    fn matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let lock = RawAdaptiveLock::with_policy(Static(WaitPolicy::new()));
        let mut held = false;
        let mut acquisitions = 0u64;
        let mut timeouts = 0u64;
        for op in ops {
            match op {
                Op::TryLock => {
                    prop_assert_eq!(lock.try_lock(), !held);
                    if !held { acquisitions += 1; }
                    held = true;
                }
                Op::TimedLock => {
                    let got = lock.try_lock_for(Duration::from_micros(50));
                    prop_assert_eq!(got, !held);
                    if got { acquisitions += 1 } else { timeouts += 1 }
                    held = true;
                }
                Op::Lock => {
                    if !held {
                        lock.lock();
                        acquisitions += 1;
                        held = true;
                    }
                }
                Op::Unlock | Op::UnlockFair => {
                    if held {
                        // SAFETY: the model says this thread holds it.
                        unsafe {
                            if matches!(op, Op::Unlock) { lock.unlock() } else { lock.unlock_fair() }
                        }
                        held = false;
                    }
                }
                Op::Configure(s, y, b, p, t, k) => {
                    let wait = WaitPolicy::new()
                        .spins(s % 2000)
                        .yields(y)
                        .backoff(b)
                        .park(p)
                        .timeout(t.map(Duration::from_nanos));
                    let scheduler = match k {
                        0 => Scheduler::FCFS,
                        1 => Scheduler::PRIORITY,
                        2 => Scheduler::HANDOFF,
                        _ => Scheduler::PRIORITY.handoff(true),
                    };
                    let c = Config::new().wait(wait).scheduler(scheduler).watchers(Some(k));
                    lock.configure(c);
                    prop_assert_eq!(lock.config(), c.clamped());
                    prop_assert_eq!(c.clamped().clamped(), c.clamped());
                    // What fits the word is kept exactly; what does not is
                    // clamped, and a finite count stays finite.
                    let kept = lock.config();
                    let w = kept.wait_policy();
                    prop_assert_eq!(w.spin_count(), s % 2000);
                    prop_assert_eq!(w.yield_count(), if y == u32::MAX { y } else { y.min(254) });
                    prop_assert_eq!((w.backs_off(), w.parks()), (b, p));
                    prop_assert_eq!(kept.scheduler_kind(), scheduler);
                    prop_assert_eq!(kept.watcher_limit(), Some(k));
                }
            }
            prop_assert_eq!(lock.is_locked(), held);
        }
        if held {
            // SAFETY: held, per the model.
            unsafe { lock.unlock() };
        }
        let s = lock.stats();
        prop_assert_eq!(s.total.acquisitions, acquisitions);
        prop_assert_eq!(s.total.timeouts, timeouts);
        prop_assert_eq!(s.total.parks, 0);
        prop_assert!(!lock.is_locked());
    }
}
