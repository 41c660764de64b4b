//! User code inside the async entry: wakers whose `wake` enters the same
//! mutex (blocking) and whose `drop` looks at the mutex's waiter table;
//! entry sets that overlap partially while states change under them; a
//! current-thread tokio runtime whose tasks enter against a blocking holder
//! on another thread; `exit_and_enter` and `exit_and_enter_async` under
//! all of it. Every scene checks exclusion (a plain counter inside the
//! lock), that every entry completed, and that nothing is left queued, and
//! runs under a watchdog.
#![cfg(not(loom))]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::thread;
use std::time::Duration;

use ast_mutex::{AstMutex, Config, StateSet, WaitPolicy, WakeMode};

ast_mutex::states! { enum S { A, B, C } }

const MODES: [WakeMode; 3] = [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast];
const WATCHDOG: Duration = Duration::from_secs(60);

/// Each wake mode, with the default watch, with a watch that never parks,
/// and under concurrency restriction.
fn configs() -> impl Iterator<Item = Config> {
    MODES.into_iter().flat_map(|mode| {
        let c = Config::new().wake_mode(mode);
        [c, c.wait(WaitPolicy::spin()), c.watchers(1)]
    })
}

/// The data: entries counted with a plain (non-atomic) add, and a flag
/// that says someone is inside.
#[derive(Default)]
struct Inside {
    entries: u64,
    busy: bool,
}

type M = AstMutex<S, Inside>;

/// Runs a critical section: asserts exclusion, counts it.
fn section(g: &mut Inside) {
    assert!(!g.busy, "two holders at once");
    g.busy = true;
    g.entries += 1;
    std::hint::black_box(&mut *g);
    g.busy = false;
}

/// Runs `scene` on a thread of its own; panics if it has not ended within
/// `WATCHDOG` (the thread is left behind).
fn with_watchdog(what: &str, scene: impl FnOnce() + Send + 'static) {
    let (done, ended) = mpsc::channel();
    let t = thread::spawn(move || {
        scene();
        let _ = done.send(());
    });
    match ended.recv_timeout(WATCHDOG) {
        Ok(()) => t.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The scene panicked: show its panic.
            if let Err(e) = t.join() {
                std::panic::resume_unwind(e);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for {WATCHDOG:?}"),
    }
}

thread_local! {
    /// Whether this thread is inside a hook already: a hook's own exit may
    /// wake another hooked waker, whose hook does nothing then.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// What a hooked waker does besides waking.
struct Hooks {
    m: Arc<M>,
    /// The inner waker (the executor's).
    inner: Waker,
    /// `wake` wakes the task, then enters the mutex, blocking, in any state
    /// (and leaves it in the state it found); on a runtime's thread (where
    /// blocking could keep the task that holds the lock from its poll) it
    /// only tries to.
    enter_on_wake: bool,
    /// Every drop of a waker takes the waiter table's lock (through
    /// `__test_waiter_table_size`): held by this thread, it would hang.
    look_on_drop: bool,
    hook_runs: Arc<AtomicUsize>,
}

impl Hooks {
    fn run(&self, waking: bool) {
        if IN_HOOK.with(|h| h.replace(true)) {
            return;
        }
        if waking && self.enter_on_wake {
            let g = if tokio::runtime::Handle::try_current().is_ok() {
                self.m.try_enter(S::A | S::B | S::C)
            } else {
                Some(self.m.enter(S::A | S::B | S::C))
            };
            if let Some(mut g) = g {
                section(&mut g);
                let s = g.entered_in();
                g.exit(s);
                self.hook_runs.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !waking && self.look_on_drop {
            let _ = self.m.__test_waiter_table_size();
            drop(self.m.try_enter(S::A | S::B | S::C));
            self.hook_runs.fetch_add(1, Ordering::Relaxed);
        }
        IN_HOOK.with(|h| h.set(false));
    }
}

/// A waker whose every clone is a box of its own, so that every drop of
/// one runs the drop hook.
fn hooked(hooks: Arc<Hooks>) -> Waker {
    fn raw(hooks: Arc<Hooks>) -> RawWaker {
        RawWaker::new(Arc::into_raw(hooks).cast(), &VTABLE)
    }
    unsafe fn clone(p: *const ()) -> RawWaker {
        // SAFETY: `p` is a counted `Arc<Hooks>` (see `raw`).
        let hooks = unsafe { Arc::from_raw(p.cast::<Hooks>()) };
        let copy = Arc::clone(&hooks);
        std::mem::forget(hooks);
        raw(copy)
    }
    unsafe fn wake(p: *const ()) {
        // SAFETY: as in `clone`; this consumes the reference.
        let hooks = unsafe { Arc::from_raw(p.cast::<Hooks>()) };
        hooks.inner.wake_by_ref();
        hooks.run(true);
    }
    unsafe fn wake_by_ref(p: *const ()) {
        // SAFETY: as in `clone`; borrowed.
        let hooks = unsafe { &*p.cast::<Hooks>() };
        hooks.inner.wake_by_ref();
        hooks.run(true);
    }
    unsafe fn drop(p: *const ()) {
        // SAFETY: as in `clone`; this consumes the reference.
        let hooks = unsafe { Arc::from_raw(p.cast::<Hooks>()) };
        hooks.run(false);
    }
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop);
    // SAFETY: the vtable's functions treat the pointer as `raw` made it.
    unsafe { Waker::from_raw(raw(hooks)) }
}

/// Polls `fut` with a hooked waker (made anew at each poll from `hooks`,
/// around the executor's).
struct Hooked<F> {
    fut: Pin<Box<F>>,
    make: Box<dyn Fn(Waker) -> Arc<Hooks> + Send>,
}

impl<F: Future> Future for Hooked<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let waker = hooked((self.make)(cx.waker().clone()));
        self.fut.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

/// Tasks on a multi-thread tokio runtime and threads enter with entry
/// sets that overlap partially ({A, B}, {B, C}, {C, A}, {A}, …) and leave
/// in the next state of a cycle, so the set of enterable waiters changes
/// under them at every exit; the tasks' wakers run hooks (see `Hooks`).
fn overlapping_scene(config: Config, enter_on_wake: bool, look_on_drop: bool) {
    const TASKS: usize = 12;
    const THREADS: usize = 3;
    const ROUNDS: usize = 150;
    let m = Arc::new(AstMutex::with_config(S::A, Inside::default(), config));
    let hook_runs = Arc::new(AtomicUsize::new(0));
    // Tasks and threads that are done.
    let done = Arc::new(AtomicUsize::new(0));
    let sets: [StateSet<S>; 6] = [
        S::A | S::B,
        S::B | S::C,
        S::C | S::A,
        S::A.into(),
        S::B.into(),
        S::C.into(),
    ];
    let next = |s: S, i: usize| match (s, i % 2) {
        (S::A, 0) => S::B,
        (S::A, _) => S::C,
        (S::B, 0) => S::C,
        (S::B, _) => S::A,
        (S::C, 0) => S::A,
        (S::C, _) => S::B,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (m, hook_runs, done) = (Arc::clone(&m), Arc::clone(&hook_runs), Arc::clone(&done));
            let set = sets[i % sets.len()];
            rt.spawn(async move {
                for r in 0..ROUNDS {
                    let mh = Arc::clone(&m);
                    let hr = Arc::clone(&hook_runs);
                    let make = Box::new(move |inner| {
                        Arc::new(Hooks {
                            m: Arc::clone(&mh),
                            inner,
                            enter_on_wake,
                            look_on_drop,
                            hook_runs: Arc::clone(&hr),
                        })
                    });
                    // Every third entry through exit_and_enter_async.
                    let mut g = Hooked {
                        fut: Box::pin(m.enter_async(set)),
                        make,
                    }
                    .await;
                    section(&mut g);
                    let s = g.entered_in();
                    if r % 3 == 0 {
                        let mut g = g
                            .exit_and_enter_async(next(s, i + r), S::A | S::B | S::C)
                            .await;
                        section(&mut g);
                        let s = g.entered_in();
                        g.exit(next(s, i));
                    } else {
                        g.exit(next(s, i + r));
                    }
                    if r % 8 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    // The driver: enters in any state and leaves in the next of the cycle
    // until every task and thread is done, so that every entry set comes
    // round (a waiter left alone with a set that no state in the lock
    // matches would wait for ever, as it should).
    let driver = {
        let (m, done) = (Arc::clone(&m), Arc::clone(&done));
        thread::spawn(move || {
            let mut turns = 0u64;
            while done.load(Ordering::SeqCst) < TASKS + THREADS {
                if let Some(mut g) = m.try_enter_for(S::A | S::B | S::C, Duration::from_millis(1)) {
                    section(&mut g);
                    turns += 1;
                    let s = g.entered_in();
                    g.exit(next(s, 0));
                }
            }
            turns
        })
    };
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (m, done) = (Arc::clone(&m), Arc::clone(&done));
            let set = sets[(i + 3) % sets.len()] | sets[i];
            thread::spawn(move || {
                let mut g = m.enter(set);
                for r in 0..ROUNDS {
                    section(&mut g);
                    let s = g.entered_in();
                    if r + 1 == ROUNDS {
                        g.exit(next(s, i + r));
                        break;
                    }
                    g = g.exit_and_enter(next(s, i + r), set);
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    drop(rt);
    let turns = driver.join().unwrap();
    let g = m.enter(S::A | S::B | S::C);
    let want = (TASKS * ROUNDS + TASKS * ROUNDS.div_ceil(3) + THREADS * ROUNDS) as u64 + turns;
    // The hooks that entered (a drop hook only looks).
    let hook_entries = if enter_on_wake {
        hook_runs.load(Ordering::Relaxed) as u64
    } else {
        0
    };
    assert_eq!(g.entries, want + hook_entries, "{config:?}");
    drop(g);
    assert_eq!(
        m.__test_waiter_table_size(),
        (0, 0),
        "{config:?}: left queued"
    );
}

#[test]
fn wakers_that_enter_the_mutex_in_wake_with_overlapping_sets() {
    let _one = sync_core::testing::one_at_a_time();
    for config in configs() {
        with_watchdog("enter in wake", move || {
            overlapping_scene(config, true, false)
        });
    }
}

#[test]
fn wakers_whose_drop_takes_the_table_lock_with_overlapping_sets() {
    let _one = sync_core::testing::one_at_a_time();
    for config in configs() {
        with_watchdog("table lock in drop", move || {
            overlapping_scene(config, false, true)
        });
    }
}

/// Tasks on a current-thread runtime enter against a thread that holds
/// the lock (blocking) and hands it back and forth through the states:
/// every exit of the thread wakes a task whose runtime thread is parked
/// (or busy with another task), and every exit of a task must reach the
/// thread. Also with cancellation: every fifth wait is raced with a short
/// tokio timeout, and with policies that watch (spin() never parks).
#[test]
fn current_thread_tasks_against_a_blocking_holder() {
    let _one = sync_core::testing::one_at_a_time();
    for mode in MODES {
        for wait in [WaitPolicy::new(), WaitPolicy::block(), WaitPolicy::spin()] {
            with_watchdog("current-thread", move || {
                current_thread_scene(Config::new().wake_mode(mode).wait(wait))
            });
        }
    }
}

fn current_thread_scene(config: Config) {
    const TASKS: usize = 8;
    const ROUNDS: usize = 100;
    let m = Arc::new(AstMutex::with_config(S::A, Inside::default(), config));
    let stop = Arc::new(AtomicBool::new(false));
    // The holder: enters in A, leaves in B (for the tasks), over and over;
    // also in C now and then, which nobody but it accepts.
    let holder = {
        let (m, stop) = (Arc::clone(&m), Arc::clone(&stop));
        thread::spawn(move || {
            let mut rounds = 0u64;
            let mut g = m.enter(S::A | S::C);
            while !stop.load(Ordering::Relaxed) {
                section(&mut g);
                rounds += 1;
                g = if rounds % 7 == 0 {
                    g.exit_and_enter(S::C, S::C)
                } else {
                    // For the tasks; back once one of them leaves it in A.
                    g.exit(S::B);
                    match m.try_enter_for(S::A | S::C, Duration::from_millis(20)) {
                        Some(g) => g,
                        None => m.enter(S::A | S::C),
                    }
                };
            }
            g.exit(S::A);
            rounds
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cancelled = Arc::new(AtomicUsize::new(0));
    let entered = rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (m, cancelled) = (Arc::clone(&m), Arc::clone(&cancelled));
                tokio::spawn(async move {
                    let mut entered = 0;
                    let mut r = 0;
                    while entered < ROUNDS {
                        r += 1;
                        let g = if (i + r) % 5 == 0 {
                            match tokio::time::timeout(
                                Duration::from_micros(50),
                                m.enter_async(S::B),
                            )
                            .await
                            {
                                Ok(g) => g,
                                Err(_) => {
                                    cancelled.fetch_add(1, Ordering::Relaxed);
                                    continue;
                                }
                            }
                        } else {
                            m.enter_async(S::B).await
                        };
                        let mut g = g;
                        section(&mut g);
                        entered += 1;
                        g.exit(S::A);
                        if r % 4 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    entered
                })
            })
            .collect();
        let mut all = 0;
        for t in tasks {
            all += t.await.unwrap();
        }
        all
    });
    // The holder may be waiting for a task to leave B: the test thread
    // does, until the holder has seen `stop`.
    stop.store(true, Ordering::Relaxed);
    let mut extra = 0;
    while !holder.is_finished() {
        if let Some(mut g) = m.try_enter_for(S::B, Duration::from_millis(1)) {
            section(&mut g);
            extra += 1;
            g.exit(S::A);
        }
    }
    let rounds = holder.join().unwrap() + extra;
    assert_eq!(entered, TASKS * ROUNDS);
    let g = m.enter(S::A | S::B | S::C);
    assert_eq!(g.entries, rounds + (TASKS * ROUNDS) as u64);
    drop(g);
    assert_eq!(m.__test_waiter_table_size(), (0, 0), "left queued");
}
