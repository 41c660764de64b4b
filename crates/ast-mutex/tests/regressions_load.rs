//! Regression tests for what a second stress pass found in ast-mutex: the
//! Compete-mode bound counted wake-ups, not exits (a woken waiter waiting
//! for a CPU was passed by any number of exits), cancelling queued waiters
//! newest-first was quadratic, and a panicking waker unwound out of an exit
//! (aborting when the exit ran in a guard's drop during a panic).
#![cfg(not(loom))]

use std::future::Future;
use std::hint::black_box;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use ast_mutex::{AstMutex, Config, StateSet, WakeMode};
use sync_core::testing::HostileWaker;

ast_mutex::states! { enum F { Idle, A, B, Stop } }

/// The scene of `regressions::every_group_that_accepts_a_state_gets_its_turns`
/// (waiters on {A} ×2, {A, B} ×2, {B}, a driver exiting to A and B in turn)
/// under load: two CPU-bound threads keep both cores busy, so a woken waiter
/// waits for a CPU, and two barging threads take the lock with `try_enter`
/// whenever it is free in A or B and leave it in the same state (they never
/// consume a turn, but each of their exits passes the woken waiter). No
/// thread may wait for ever: before the fix the bound counted wake-ups,
/// exits that passed a woken waiter while it waited for a CPU went
/// uncounted, and a thread got 0-1 of 200 turns, waiting through the whole
/// scene. Ten scenes made the test fail reliably.
#[test]
fn every_group_gets_its_turns_under_load_and_barging() {
    for run in 0..SCENES {
        scene_under_load(run);
    }
}

const SCENES: usize = 5;

/// How long a scene runs (and at least `MIN_ROUNDS` rounds).
const SCENE_TIME: Duration = Duration::from_millis(600);
const MIN_ROUNDS: usize = 200;

/// The longest wait a scene allows a thread. The contract (see `AstMutex`'s
/// `# Fairness`) bounds in exits the wait of a first in line that runs, and
/// in time, 100 ms, the wait of one that was woken and is still waiting for
/// a CPU: exits pass it meanwhile without holding the lock for it, so how
/// many rounds pass it depends on the scheduler, not on the mutex (beside
/// the two hogs, thousands of rounds can run while a woken thread waits a
/// few milliseconds for a CPU). What the scene can bound is the wait: first
/// in line, a thread waits at most 100 ms for a CPU before an exit holds
/// the lock for it, behind at most four others that each can. A thread
/// starved by the barging waits through the whole scene, longer than this.
/// The bound in exits is checked exactly, without a scheduler in the way,
/// by `async_enter.rs`'s `a_woken_task_not_polled_is_handed_the_lock_after_32_passes_and_100_ms`.
const MAX_WAIT: Duration = Duration::from_millis(500);

fn scene_under_load(run: usize) {
    let config = Config::new().spins(0).yields(0);
    let m = Arc::new(AstMutex::with_config(F::Idle, [[0usize; 2]; 5], config));
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..2 {
        let stop = Arc::clone(&stop);
        load.push(thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..1000 {
                    x = black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            }
        }));
    }
    for _ in 0..2 {
        let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
        load.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Dropped without exit: back to the state it entered in.
                drop(m.try_enter(F::A | F::B));
                thread::yield_now();
            }
        }));
    }
    let sets = [
        F::A.into(),
        F::A.into(),
        F::A | F::B,
        F::A | F::B,
        StateSet::from(F::B),
    ];
    let mut threads = Vec::new();
    for (i, set) in sets.into_iter().enumerate() {
        let mc = Arc::clone(&m);
        // Returns its longest wait.
        threads.push(thread::spawn(move || {
            let m = mc;
            let mut longest = Duration::ZERO;
            loop {
                let started = Instant::now();
                let mut g = m.enter(set | F::Stop);
                longest = longest.max(started.elapsed());
                match g.entered_in() {
                    F::Stop => {
                        g.exit(F::Stop);
                        return longest;
                    }
                    F::A => g[i][0] += 1,
                    F::B => g[i][1] += 1,
                    F::Idle => unreachable!(),
                }
                g.exit(F::Idle);
            }
        }));
        while m.__test_waiter_table_size().1 < i + 1 {
            thread::yield_now();
        }
    }
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < MIN_ROUNDS || start.elapsed() < SCENE_TIME {
        rounds += 1;
        m.enter(F::Idle).exit(F::A);
        m.enter(F::Idle).exit(F::B);
    }
    let counts = *m.enter(F::Idle);
    m.enter(F::Idle).exit(F::Stop);
    let waits: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    let a_total: usize = counts.iter().map(|c| c[0]).sum();
    let b_total: usize = counts.iter().map(|c| c[1]).sum();
    assert_eq!(
        (a_total, b_total),
        (rounds, rounds),
        "run {run}: {counts:?}"
    );
    for (i, wait) in waits.iter().enumerate() {
        assert!(
            *wait <= MAX_WAIT,
            "run {run}: thread {i} waited {wait:?} in a {:?} scene: \
             turns {counts:?} of {rounds} rounds, longest waits {waits:?}",
            start.elapsed()
        );
    }
}

/// Polls `f` once with `waker`.
fn poll_with<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// Queues `n` futures of one group on a held lock, then drops them in the
/// given order; returns how long the drops took.
fn cancel_all(n: usize, newest_first: bool) -> Duration {
    let m = AstMutex::new(F::Idle, ());
    let g = m.enter(F::Idle);
    let mut futs: Vec<_> = (0..n).map(|_| m.enter_async(F::Idle)).collect();
    for f in &mut futs {
        assert!(poll_with(f, Waker::noop()).is_pending());
    }
    assert_eq!(m.__test_waiter_table_size(), (1, n));
    if newest_first {
        futs.reverse();
    }
    let start = Instant::now();
    drop(futs);
    let took = start.elapsed();
    assert_eq!(m.__test_waiter_table_size(), (0, 0));
    drop(g);
    took
}

/// Cancelling N queued waiters of one group costs the same whichever end
/// they leave from. Before the fix a cancel searched its group from the
/// oldest waiter, so newest-first was quadratic: 32k cancels took about a
/// second (28 µs each, under the table's spin lock) against 7 ms
/// oldest-first in a release build, and far longer in a debug one.
#[test]
fn cancelling_queued_waiters_costs_the_same_from_either_end() {
    const N: usize = 32 * 1024;
    let oldest_first = cancel_all(N, false);
    let newest_first = cancel_all(N, true);
    assert!(
        newest_first < oldest_first * 8 + Duration::from_millis(100),
        "newest-first {newest_first:?}, oldest-first {oldest_first:?}"
    );
}

/// A waker that panics when woken (and counts its wake-ups).
struct PanickingWaker(AtomicUsize);

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
        panic!("a task's waker panicked");
    }
}

fn panicking_waker() -> (Arc<PanickingWaker>, Waker) {
    let w = Arc::new(PanickingWaker(AtomicUsize::new(0)));
    (Arc::clone(&w), Waker::from(w))
}

/// An exit that wakes tasks whose wakers panic: every one of them is woken
/// (in Broadcast mode, both), the exit's state change is complete, and then
/// the first panic reaches the caller of `exit`. Before the fix the second
/// panicking waker of a broadcast panicked while the first unwound, which
/// aborted the process.
#[test]
fn a_panicking_waker_panics_out_of_exit_after_the_exit_is_done() {
    for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
        let m = AstMutex::with_config(F::Idle, 0, Config::new().wake_mode(mode));
        let g = m.enter(F::Idle);
        let (c1, w1) = panicking_waker();
        let (c2, w2) = panicking_waker();
        let mut f1 = m.enter_async(F::A);
        let mut f2 = m.enter_async(F::A);
        assert!(poll_with(&mut f1, &w1).is_pending());
        assert!(poll_with(&mut f2, &w2).is_pending());
        let r = catch_unwind(AssertUnwindSafe(|| g.exit(F::A)));
        let payload = r.expect_err("the waker's panic reaches the exit's caller");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"a task's waker panicked")
        );
        let woken = c1.0.load(Ordering::Relaxed) + c2.0.load(Ordering::Relaxed);
        let expected = if mode == WakeMode::Broadcast { 2 } else { 1 };
        assert_eq!(woken, expected, "{mode:?}");
        // The mutex is consistent: the woken task gets the lock, then the
        // other one.
        let mut g1 = match poll_with(&mut f1, Waker::noop()) {
            Poll::Ready(g) => g,
            Poll::Pending => panic!("{mode:?}: the first task was woken but cannot enter"),
        };
        *g1 += 1;
        // The second one's waker panics again: out of this exit too.
        let r = catch_unwind(AssertUnwindSafe(|| g1.exit(F::A)));
        assert_eq!(r.is_err(), mode != WakeMode::Broadcast, "{mode:?}");
        let Poll::Ready(g2) = poll_with(&mut f2, Waker::noop()) else {
            panic!("{mode:?}: the second task cannot enter");
        };
        assert_eq!(*g2, 1);
        drop(g2);
        assert_eq!(m.state(), Some(F::A));
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
    }
}

/// A guard dropped while its thread unwinds wakes a task whose waker
/// panics: the exit completes and the waker's panic is dropped (a second
/// panic during unwinding would abort the process, as it did before the
/// fix); the original panic reaches `catch_unwind`.
#[test]
fn a_panicking_waker_in_a_guard_drop_during_unwinding_does_not_abort() {
    for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
        let m = AstMutex::with_config(F::Idle, 0, Config::new().wake_mode(mode));
        let (count, w) = panicking_waker();
        let mut f = m.enter_async(F::A);
        assert!(poll_with(&mut f, &w).is_pending());
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut g = m.enter(F::Idle);
            g.on_unwind(F::A);
            panic!("the critical section failed");
        }));
        let payload = r.expect_err("the section's panic");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"the critical section failed")
        );
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "{mode:?}: woken");
        let Poll::Ready(g) = poll_with(&mut f, Waker::noop()) else {
            panic!("{mode:?}: the task cannot enter");
        };
        assert_eq!(g.entered_in(), F::A);
    }
}

/// A future woken to compete (or handed the lock) and then dropped passes
/// the wake-up (or the lock) on, to a task whose waker panics. The drop
/// panics with it when the thread is not unwinding, and the mutex is
/// consistent; when it is unwinding the panic is dropped rather than
/// aborting (it aborted before the fix).
#[test]
fn a_panicking_waker_woken_from_a_cancelled_future_drop() {
    for mode in [WakeMode::Compete, WakeMode::Handoff] {
        for unwinding in [false, true] {
            let m = AstMutex::with_config(F::Idle, 0, Config::new().wake_mode(mode));
            let g = m.enter(F::Idle);
            let mut first = m.enter_async(F::A);
            assert!(poll_with(&mut first, Waker::noop()).is_pending());
            let (count, w) = panicking_waker();
            let mut second = m.enter_async(F::A);
            assert!(poll_with(&mut second, &w).is_pending());
            g.exit(F::A); // notifies `first` (its waker does nothing)
            let r = catch_unwind(AssertUnwindSafe(|| {
                if unwinding {
                    struct DropOnUnwind<T>(Option<T>);
                    impl<T> Drop for DropOnUnwind<T> {
                        fn drop(&mut self) {
                            drop(self.0.take());
                        }
                    }
                    let _d = DropOnUnwind(Some(first));
                    panic!("unwinding");
                } else {
                    drop(first);
                }
            }));
            let payload = r.expect_err("a panic either way");
            let expected = if unwinding {
                "unwinding"
            } else {
                "a task's waker panicked"
            };
            assert_eq!(payload.downcast_ref::<&str>(), Some(&expected), "{mode:?}");
            assert_eq!(count.0.load(Ordering::Relaxed), 1, "{mode:?}: woken");
            let Poll::Ready(g) = poll_with(&mut second, Waker::noop()) else {
                panic!("{mode:?}: the second task cannot enter");
            };
            drop(g);
            assert_eq!(m.state(), Some(F::A));
            assert_eq!(m.__test_waiter_table_size(), (0, 0));
        }
    }
}

/// A queued task re-polled with a waker whose clone panics: its old waker
/// stays registered, so the exit still wakes it, and later polls do not
/// wake the task at once (before the fix the waker slot was left
/// "registering" for ever: the exit's wake-up was lost and every poll woke
/// the task again, a busy loop).
#[test]
fn a_waker_whose_clone_panics_neither_loses_the_wakeup_nor_spins() {
    for mode in [WakeMode::Compete, WakeMode::Handoff] {
        let m = AstMutex::with_config(F::Idle, 0, Config::new().wake_mode(mode));
        let g = m.enter(F::Idle);
        let good = HostileWaker::new();
        let mut f = m.enter_async(F::A);
        assert!(poll_with(&mut f, &good.waker()).is_pending());
        let bad = HostileWaker::new();
        bad.panic_on_clones(1);
        let r = catch_unwind(AssertUnwindSafe(|| poll_with(&mut f, &bad.waker())));
        assert!(r.is_err(), "{mode:?}: the clone's panic goes on");
        assert!(poll_with(&mut f, &good.waker()).is_pending());
        assert_eq!(good.wakes(), 0, "{mode:?}: the poll woke its own task");
        g.exit(F::A);
        assert_eq!(good.wakes(), 1, "{mode:?}: the exit's wake-up was lost");
        let Poll::Ready(g) = poll_with(&mut f, Waker::noop()) else {
            panic!("{mode:?}: the task cannot enter");
        };
        assert_eq!(g.entered_in(), F::A);
    }
}

/// A queued task's future is dropped and its waker panics when the
/// withdrawal drops it: the panic goes on, and the waiter is gone from the
/// mutex's table.
#[test]
fn a_waker_whose_drop_panics_on_cancel_leaves_no_waiter() {
    for mode in [WakeMode::Compete, WakeMode::Handoff] {
        let m = AstMutex::with_config(F::Idle, 0, Config::new().wake_mode(mode));
        let g = m.enter(F::Idle);
        let hostile = HostileWaker::new();
        let mut f = m.enter_async(F::A);
        assert!(poll_with(&mut f, &hostile.waker()).is_pending());
        hostile.panic_on_drops(1);
        let r = catch_unwind(AssertUnwindSafe(|| drop(f)));
        let payload = r.expect_err("the waker's panic goes on");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"HostileWaker: drop panics")
        );
        g.exit(F::A);
        assert_eq!(m.__test_waiter_table_size(), (0, 0), "{mode:?}");
        drop(m.enter(F::A));
    }
}

/// Many more threads than cores, each entering and leaving through the
/// same states as its peers, with tasks cancelled mid-wait among them:
/// everything completes and nothing is left queued.
#[test]
fn oversubscribed_threads_and_cancelled_tasks_complete() {
    const THREADS: usize = 32;
    const ITERS: usize = 300;
    for mode in [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast] {
        let m = Arc::new(AstMutex::with_config(
            F::Idle,
            0usize,
            Config::new().wake_mode(mode).spins(0).yields(1),
        ));
        let start = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|i| {
                let (m, start) = (Arc::clone(&m), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    for k in 0..ITERS {
                        if k % 7 == i % 7 {
                            let mut f = m.enter_async(F::Idle | F::A);
                            let _ = poll_with(&mut f, Waker::noop());
                            drop(f);
                        }
                        let (want, next) = if i % 2 == 0 {
                            (StateSet::from(F::Idle), F::A)
                        } else {
                            (StateSet::from(F::A), F::Idle)
                        };
                        match m.try_enter_for(want, Duration::from_millis(20)) {
                            Some(mut g) => {
                                *g += 1;
                                g.exit(next);
                            }
                            None => {
                                // Nobody of the other parity is left: move on.
                                if let Some(g) = m.try_enter(F::Idle | F::A) {
                                    let s = g.entered_in();
                                    g.exit(if s == F::Idle { F::A } else { F::Idle });
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.__test_waiter_table_size(), (0, 0), "{mode:?}");
        assert!(!m.is_locked(), "{mode:?}");
    }
}
