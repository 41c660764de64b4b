//! A timed enter with more runnable threads than cores: 50 threads spin on
//! the CPUs while `try_enter_for` waits 1 ms for a state that never comes (or
//! for a lock that is held). The family's wait loop parks or sleeps
//! briefly rather than yield, so it returns within a generous 50 ms; the
//! precise figures are in the report (`busy/`).
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use ast_mutex::AstMutex;
use sync_core::testing::{BusyThreads, rarely_late, timely};

ast_mutex::states! {
    enum Light { Red, Green }
}

const TIMEOUT: Duration = Duration::from_millis(1);
const BOUND: Duration = Duration::from_millis(50);
/// Tries per form: the median must keep the bound (`testing::timely`).
const TRIES: usize = 5;

#[test]
fn timed_enters_return_on_time_with_50_busy_threads() {
    let _busy = BusyThreads::start(50);
    let m = AstMutex::new(Light::Red, 0u32);
    let r = timely(
        "try_enter_for(a state that never comes)",
        TIMEOUT,
        BOUND,
        TRIES,
        || m.try_enter_for(Light::Green, TIMEOUT).is_none(),
    );
    assert!(r.iter().all(|&r| r));
    let held = m.enter(Light::Red);
    let r = timely("try_enter_for(a held lock)", TIMEOUT, BOUND, TRIES, || {
        m.try_enter_for(Light::Red, TIMEOUT).is_none()
    });
    assert!(r.iter().all(|&r| r));
    held.exit(Light::Red);
}

/// Tries per form of the test below, and how many of them may be late.
const TAIL_TRIES: usize = 100;
const TAIL_LATE: usize = 5;

/// `Config::spins` "any value is safe with `try_enter_for`": with more
/// runnable threads than cores, a waiter that spins its whole millisecond
/// is preempted for a scheduling round (about 100 ms here) on about one
/// try in five, which `timely`'s median does not see; the watch spins only
/// briefly on saturated CPUs, then parks with the deadline, so it is late
/// about as rarely as a sleep.
#[test]
fn timed_enters_with_unbounded_spins_are_rarely_late_with_50_busy_threads() {
    let _busy = BusyThreads::start(50);
    let config = ast_mutex::Config::new().spins(u32::MAX);
    let m = AstMutex::with_config(Light::Red, 0u32, config);
    let r = rarely_late(
        "spins(u32::MAX): try_enter_for(a state that never comes)",
        TIMEOUT,
        BOUND,
        TAIL_TRIES,
        TAIL_LATE,
        || m.try_enter_for(Light::Green, TIMEOUT).is_none(),
    );
    assert!(r.iter().all(|&r| r));
    let held = m.enter(Light::Red);
    let r = rarely_late(
        "spins(u32::MAX): try_enter_for(a held lock)",
        TIMEOUT,
        BOUND,
        TAIL_TRIES,
        TAIL_LATE,
        || m.try_enter_for(Light::Red, TIMEOUT).is_none(),
    );
    assert!(r.iter().all(|&r| r));
    held.exit(Light::Red);
}

/// A timed enter on a mutex that other threads enter and exit all the
/// time, so that its waiter table's lock is busy: a holder of that lock
/// preempted for a scheduling round must not make the timed waiter wait
/// that round to queue, or to leave the queue once its deadline has passed
/// (it leaves its node to the table's next holder instead).
#[test]
fn timed_enters_on_a_mutex_busy_with_exits_are_rarely_late_with_50_busy_threads() {
    let _busy = BusyThreads::start(50);
    let m = Arc::new(AstMutex::new(Light::Red, 0u64));
    let churn = Churn::start(&m);
    let r = rarely_late(
        "try_enter_for(a state that never comes) beside 8 threads entering",
        TIMEOUT,
        BOUND,
        TAIL_TRIES,
        TAIL_LATE,
        || m.try_enter_for(Light::Green, TIMEOUT).is_none(),
    );
    churn.stop();
    assert!(r.iter().all(|&r| r));
    // Nothing stays queued: the nodes left to the table's next holder are
    // removed by it (this look takes the table lock).
    assert_eq!(m.__test_waiter_table_size(), (0, 0));
}

/// The waiters that used to wait for the waiter table's lock on leaving,
/// however long its holder was kept from running: one with a watcher slot
/// (`Config::watchers`, or Handoff mode with a policy that spins), which
/// must serve the waiters that exits left parked for it, and one that an
/// exit woke to compete and that lost, which must pass the wake-up on.
/// They now leave the node and the serve to the table lock's holder, so
/// they too return about as late as a sleep. The timed waiter competes
/// for the state that 8 threads enter and leave all the time.
#[test]
fn timed_enters_that_owe_a_serve_are_rarely_late_with_50_busy_threads() {
    use ast_mutex::{Config, WakeMode};

    let _busy = BusyThreads::start(50);
    let configs = [
        ("watchers(1)", Config::new().watchers(1)),
        ("Broadcast", Config::new().wake_mode(WakeMode::Broadcast)),
        ("Compete", Config::new().wake_mode(WakeMode::Compete)),
        (
            "Handoff, spins(64)",
            Config::new().wake_mode(WakeMode::Handoff).spins(64),
        ),
    ];
    for (name, config) in configs {
        let m = Arc::new(AstMutex::with_config(Light::Red, 0u64, config));
        let churn = Churn::start(&m);
        let mut entered = 0;
        rarely_late(
            &format!("{name}: try_enter_for(the state 8 threads enter)"),
            TIMEOUT,
            BOUND,
            TAIL_TRIES,
            TAIL_LATE,
            || {
                if let Some(mut g) = m.try_enter_for(Light::Red, TIMEOUT) {
                    *g += 1;
                    entered += 1;
                }
            },
        );
        rarely_late(
            &format!("{name}: try_enter_for(a state that never comes)"),
            TIMEOUT,
            BOUND,
            TAIL_TRIES,
            TAIL_LATE,
            || assert!(m.try_enter_for(Light::Green, TIMEOUT).is_none()),
        );
        churn.stop();
        // Every section counted once, and nothing stays queued: the nodes
        // left to the table's holders are removed by them.
        let total = *m.enter(Light::Red);
        assert!(
            total >= entered,
            "{name}: {total} sections, {entered} timed"
        );
        assert_eq!(m.__test_waiter_table_size(), (0, 0), "{name}");
    }
}

/// 8 threads that enter a mutex in Red, count a section, and leave it in
/// Red, in a loop, until stopped.
struct Churn {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Churn {
    fn start(m: &Arc<AstMutex<Light, u64>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..8)
            .map(|_| {
                let (m, stop) = (Arc::clone(m), Arc::clone(&stop));
                std::thread::spawn(move || {
                    // Relaxed: the flag orders nothing; the join does.
                    while !stop.load(Ordering::Relaxed) {
                        let mut g = m.enter(Light::Red);
                        *g += 1;
                        g.exit(Light::Red);
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.into_iter().for_each(|t| t.join().unwrap());
    }
}
