//! The guards' lock_api-style methods on `Mutex`'s own guards
//! (`MutexGuard` and `ArcMutexGuard`): `unlocked`, `unlocked_fair`, `bump`
//! and `ArcMutexGuard::unlock_fair`. A task queued with `lock_async`, polled
//! once, is a waiter whose place in the queue is known without timing.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::task::{Poll, Wake, Waker};
use std::thread;
use std::time::Duration;

use lockfree_sync::{ArcMutexGuard, Fairness, Mutex, MutexGuard};
use sync_core::testing::poll_once;

/// A waker that records that it was woken, and panics when armed.
#[derive(Default)]
struct Flag {
    woken: AtomicBool,
    panics: AtomicBool,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, SeqCst);
        if self.panics.load(SeqCst) {
            panic!("the waker panics");
        }
    }
}

fn waker() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag::default());
    (flag.clone(), Waker::from(flag))
}

/// Runs `f` on a thread and fails if it has not returned within 20 s (a
/// relock that never comes back).
fn within_20s<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(Duration::from_secs(20))
        .expect("a guard method did not return within 20 s")
}

/// `unlocked` lets go for as long as `f` runs (another thread takes the
/// lock and changes the value), then holds the lock again.
#[test]
fn unlocked_lets_others_in_and_holds_the_lock_again() {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Arc::new(Mutex::with_fairness(0, fairness));
        let mut g = m.lock();
        *g = 1;
        let other = m.clone();
        let seen = MutexGuard::unlocked(&mut g, move || {
            thread::spawn(move || {
                let mut g = other.lock();
                *g += 10;
                *g
            })
            .join()
            .unwrap()
        });
        assert_eq!(seen, 11);
        assert_eq!(*g, 11);
        assert!(m.try_lock().is_none(), "the guard does not hold the lock");
        *g += 100;
        drop(g);

        let mut g = m.lock_arc();
        let other = m.clone();
        ArcMutexGuard::unlocked(&mut g, move || {
            thread::spawn(move || *other.lock() += 1000).join().unwrap()
        });
        assert_eq!(*g, 1111);
        assert!(m.try_lock().is_none(), "the guard does not hold the lock");
        drop(g);
        assert!(!m.is_locked());
    }
}

/// Runs `holder` on a thread of its own: it locks `m`, calls its argument,
/// which returns once a task is queued behind it, and then uses its guard.
/// The task (a `lock_async` polled once) is woken when the holder hands
/// it the lock; it then runs `task` on the value and unlocks. Returns what
/// `holder` returned.
fn with_a_task_queued_behind<T: Send + 'static, R: Send + 'static>(
    m: &Arc<Mutex<T>>,
    holder: impl FnOnce(&dyn Fn()) -> R + Send + 'static,
    task: impl FnOnce(&mut T),
) -> R {
    let (flag, w) = waker();
    let (locked, wait) = mpsc::channel();
    let (queued, go) = mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        holder(&|| {
            locked.send(()).unwrap();
            go.recv().unwrap();
        })
    });
    wait.recv_timeout(Duration::from_secs(20)).unwrap();
    let mut lock = Box::pin(m.lock_async());
    assert!(poll_once(lock.as_mut(), &w).is_pending());
    queued.send(()).unwrap();
    let started = std::time::Instant::now();
    while !flag.woken.load(SeqCst) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the queued task was not woken"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let Poll::Ready(mut g) = poll_once(lock.as_mut(), &w) else {
        panic!("the task was not handed the lock");
    };
    task(&mut g);
    drop(g);
    holder.join().unwrap()
}

/// `unlocked_fair` hands the lock to the queued task: the lock stays held
/// (by the task) while `f` runs, and the task's future is ready. The
/// guard's relock then waits for the task to unlock.
#[test]
fn unlocked_fair_hands_the_lock_to_the_oldest_waiter() {
    for arc in [false, true] {
        let m = Arc::new(Mutex::with_fairness(0, Fairness::Barging));
        let held = with_a_task_queued_behind(
            &m,
            {
                let m = m.clone();
                move |queued| {
                    let held_in = |m: &Mutex<i32>| m.is_locked();
                    if arc {
                        let mut g = m.lock_arc();
                        queued();
                        *g += 1;
                        ArcMutexGuard::unlocked_fair(&mut g, || held_in(&m))
                    } else {
                        let mut g = m.lock();
                        queued();
                        *g += 1;
                        MutexGuard::unlocked_fair(&mut g, || held_in(&m))
                    }
                }
            },
            |v| *v += 10,
        );
        assert!(
            held,
            "the lock was free while f ran: it was not handed over"
        );
        assert_eq!(*m.lock(), 11, "a lock was lost");
    }
}

/// `bump` with a waiter queued hands the lock over and queues again: the
/// task runs its critical section before the bumping thread's next one.
/// With nobody waiting it keeps the lock.
#[test]
fn bump_lets_the_queued_waiter_go_first() {
    for arc in [false, true] {
        let m = Arc::new(Mutex::new(Vec::new()));
        // Nobody waits: the lock stays with the guard.
        if arc {
            ArcMutexGuard::bump(&mut m.lock_arc());
        } else {
            MutexGuard::bump(&mut m.lock());
        }
        let bumper = {
            let m = m.clone();
            move |queued: &dyn Fn()| {
                if arc {
                    let mut g = m.lock_arc();
                    queued();
                    ArcMutexGuard::bump(&mut g);
                    g.push("bumper");
                } else {
                    let mut g = m.lock();
                    queued();
                    MutexGuard::bump(&mut g);
                    g.push("bumper");
                }
            }
        };
        with_a_task_queued_behind(&m, bumper, |v| v.push("task"));
        assert_eq!(*m.lock(), ["task", "bumper"]);
        assert!(!m.is_locked());
    }
}

/// `ArcMutexGuard::unlock_fair` hands the lock to the queued task, which
/// then holds it alone.
#[test]
fn arc_unlock_fair_hands_the_lock_over() {
    let m = Arc::new(Mutex::new(0));
    let g = m.lock_arc();
    let (flag, w) = waker();
    let mut task = Box::pin(m.lock_async());
    assert!(poll_once(task.as_mut(), &w).is_pending());
    ArcMutexGuard::unlock_fair(g);
    assert!(flag.woken.load(SeqCst));
    // Handed over: a newcomer cannot barge in before the task runs.
    assert!(
        m.try_lock().is_none(),
        "the lock was released, not handed over"
    );
    let Poll::Ready(g) = poll_once(task.as_mut(), &w) else {
        panic!("the task was not handed the lock");
    };
    drop(g);
    assert!(m.try_lock().is_some());
}

/// A panic of `f` goes on, and the guard holds the lock again: its drop
/// unlocks once, and the lock is free afterwards.
#[test]
fn a_panicking_f_leaves_the_guard_holding_the_lock() {
    let m = Arc::new(Mutex::new(0));
    within_20s(move || {
        let mut g = m.lock();
        let r = catch_unwind(AssertUnwindSafe(|| {
            MutexGuard::unlocked(&mut g, || panic!("f panics"));
        }));
        assert!(r.is_err());
        assert!(m.try_lock().is_none(), "the guard does not hold the lock");
        *g += 1;
        drop(g);

        let mut g = m.lock_arc();
        let r = catch_unwind(AssertUnwindSafe(|| {
            ArcMutexGuard::unlocked_fair(&mut g, || panic!("f panics"));
        }));
        assert!(r.is_err());
        assert!(m.try_lock().is_none(), "the guard does not hold the lock");
        *g += 1;
        drop(g);
        assert_eq!(*m.try_lock().expect("the lock was left held"), 2);
    });
}

/// An unlock in `unlocked` that wakes a task whose waker panics: the panic
/// goes on before `f` runs, with the guard holding the lock again; the
/// task, woken, still gets the lock once the guard is dropped.
#[test]
fn a_wakers_panic_in_unlocked_goes_on_with_the_lock_held_again() {
    let m = Arc::new(Mutex::with_fairness(0, Fairness::Barging));
    let (flag, w) = waker();
    // `unlocked` on the guard `g`, with a task queued whose waker panics.
    let check = |unlocked: &mut dyn FnMut(&mut bool)| {
        let mut task = Box::pin(m.lock_async());
        assert!(poll_once(task.as_mut(), &w).is_pending());
        flag.panics.store(true, SeqCst);
        let mut ran = false;
        let r = catch_unwind(AssertUnwindSafe(|| unlocked(&mut ran)));
        flag.panics.store(false, SeqCst);
        assert!(r.is_err(), "the waker's panic did not go on");
        assert!(flag.woken.swap(false, SeqCst));
        assert!(!ran, "f ran after a waker's panic");
        assert!(m.try_lock().is_none(), "the guard does not hold the lock");
        task
    };

    let mut g = m.lock();
    let mut task = check(&mut |ran| MutexGuard::unlocked(&mut g, || *ran = true));
    drop(g);
    let Poll::Ready(g) = poll_once(task.as_mut(), &w) else {
        panic!("the woken task did not get the free lock");
    };
    drop(g);

    let mut g = m.lock_arc();
    let mut task = check(&mut |ran| ArcMutexGuard::unlocked(&mut g, || *ran = true));
    drop(g);
    let Poll::Ready(g) = poll_once(task.as_mut(), &w) else {
        panic!("the woken task did not get the free lock");
    };
    drop(g);
    assert!(!m.is_locked());
}

/// Every guard method of both guards, by threads that also lock, time out
/// and hand off: one holder at a time, every lock counted, and the lock
/// free at the end.
#[test]
fn guard_methods_keep_exclusion_while_others_queue() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Arc::new(Mutex::with_fairness(0u64, fairness));
        let inside = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (m, inside, stop) = (m.clone(), inside.clone(), stop.clone());
                thread::spawn(move || {
                    let enter = || assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders");
                    let leave = || inside.fetch_sub(1, SeqCst);
                    let mut locks = 0u64;
                    // Locks through `$g`, then one method of `$Guard` picked
                    // by `$k`, then an unlock that hands over.
                    macro_rules! exercise {
                        ($g:expr, $Guard:ident, $k:expr) => {{
                            let mut g = $g;
                            enter();
                            *g += 1;
                            leave();
                            match $k {
                                0 => $Guard::bump(&mut g),
                                1 => $Guard::unlocked(&mut g, thread::yield_now),
                                _ => $Guard::unlocked_fair(&mut g, || ()),
                            }
                            // Held again after the method: still ours alone.
                            enter();
                            leave();
                            $Guard::unlock_fair(g);
                        }};
                    }
                    let mut i = t;
                    while !stop.load(Relaxed) {
                        i += 1;
                        if i % 2 == 0 {
                            let timeout = Duration::from_micros(i % 1500);
                            let Some(g) = m.try_lock_for(timeout) else {
                                continue;
                            };
                            exercise!(g, MutexGuard, i / 2 % 3);
                        } else {
                            exercise!(m.lock_arc(), ArcMutexGuard, i / 2 % 3);
                        }
                        locks += 1;
                    }
                    locks
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(500));
        stop.store(true, Relaxed);
        let locks: u64 = within_20s(move || threads.into_iter().map(|t| t.join().unwrap()).sum());
        assert!(locks > 0);
        assert!(!m.is_locked(), "{fairness:?}: the lock was left held");
        assert_eq!(*m.lock(), locks, "{fairness:?}: a lock lost an update");
    }
}
