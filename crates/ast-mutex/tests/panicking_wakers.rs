//! A task's waker that panics, met by a thread's timed entry that gives up:
//! the wake-up that give-up passes on is owed to the task, not to the
//! timed caller, so its panic is dropped and the entry returns `None`
//! (before the fix, `try_enter_for` resumed it in 4 of 5 three-second runs
//! of this workload). The same for `{:?}`, whose formatting enters and
//! exits the mutex (before its fix, about 200 of 15 million formattings in
//! 5 s panicked). In its own binary: it silences the wakers' panic
//! messages with a panic hook.
#![cfg(not(loom))]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use ast_mutex::{AstMutex, Config, StateSet, WakeMode};

ast_mutex::states! { enum S { A, B } }

struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a task's waker");
    }
}

#[test]
fn neither_a_timed_entry_that_gives_up_nor_debug_resumes_another_tasks_waker_panic() {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"a task's waker") {
            quiet(info);
        }
    }));
    for config in [
        Config::new(),
        Config::new().wake_mode(WakeMode::Handoff),
        Config::new().wake_mode(WakeMode::Broadcast),
        Config::new().watchers(1),
    ] {
        let m = Arc::new(AstMutex::with_config(S::A, 0u64, config));
        let stop = Arc::new(AtomicBool::new(false));
        let resumed = Arc::new(AtomicU64::new(0));
        // Timed entries for B that often give up, some after being woken.
        let timed: Vec<_> = (0..3)
            .map(|_| {
                let (m, stop, resumed) = (Arc::clone(&m), Arc::clone(&stop), Arc::clone(&resumed));
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let entry = catch_unwind(AssertUnwindSafe(|| {
                            m.try_enter_for(S::B, Duration::from_micros(50))
                                .map(|mut g| {
                                    *g += 1;
                                    g.exit(S::A)
                                })
                        }));
                        if entry.is_err() {
                            resumed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        // A thread that formats the mutex.
        let formatted = {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            thread::spawn(move || {
                let mut panicked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if catch_unwind(AssertUnwindSafe(|| format!("{m:?}"))).is_err() {
                        panicked += 1;
                    }
                }
                panicked
            })
        };
        // A churner that leaves A and B in turn; its exits may resume the
        // task's waker panic, as documented.
        let churn = {
            let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
            thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let mut g = m.enter(StateSet::ALL);
                    *g += 1;
                    let next = if i % 2 == 0 { S::B } else { S::A };
                    let _ = catch_unwind(AssertUnwindSafe(|| g.exit(next)));
                }
            })
        };
        // Tasks waiting for B whose waker panics, queued and dropped in turn.
        let waker = Waker::from(Arc::new(PanickingWaker));
        let end = Instant::now() + Duration::from_millis(600);
        while Instant::now() < end {
            let mut task = Box::pin(m.enter_async(S::B));
            let _ = catch_unwind(AssertUnwindSafe(|| {
                if let std::task::Poll::Ready(g) =
                    task.as_mut().poll(&mut Context::from_waker(&waker))
                {
                    g.exit(S::A);
                }
            }));
            thread::sleep(Duration::from_micros(20));
            let _ = catch_unwind(AssertUnwindSafe(|| drop(task)));
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
        timed.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(
            formatted.join().unwrap(),
            0,
            "{config:?}: formatting the mutex panicked with a task's waker panic"
        );
        assert_eq!(
            resumed.load(Ordering::Relaxed),
            0,
            "{config:?}: try_enter_for panicked with a task's waker panic"
        );
        // The mutex is consistent afterwards: free, and nobody left waiting.
        assert!(
            m.try_enter(StateSet::ALL).is_some(),
            "{config:?}: left held"
        );
        assert_eq!(m.__test_waiter_table_size(), (0, 0), "{config:?}");
    }
}
