//! A waiter preempted half-way through its registration (between its swap
//! on a waiter queue's tail and its link) must not make the thread that
//! wakes the waiters burn its CPU waiting for it: once yields are slow
//! (the CPUs oversubscribed), that thread gives its core away (the family's
//! wait) instead of spinning on it. Such queues: the waiters on a task's
//! end (program order), which its finisher notifies; the producers waiting
//! for room in a full task queue, which the monitor's holder wakes when it
//! lets go; the task queue itself, whose first task a holder that queues
//! its own into a full queue runs to make room; and a served monitor's
//! sleeping server, which a submitter wakes (handing it the monitor) and
//! the last handle's drop wakes to stop.
//!
//! A real thread is frozen at a random point of its loop (register,
//! withdraw; submit; serve, go to sleep) by a signal whose handler spins
//! until the test releases it; some of the freezes land inside a push.
//! Then another thread waits for the frozen one's link. Before the fix it
//! spun meanwhile: its CPU time grew as fast as the frozen thread's (which
//! spins in the signal handler).
#![cfg(all(not(loom), target_os = "linux"))]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use active_monitor::{__TestOrderWait, Monitor, Order, Served};
use sync_core::testing::{freeze, machine_crowded};

/// One frozen thread at a time per binary (the handler's flags are
/// statics): the tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes this binary's turn (see [`SERIAL`]) and installs the freeze
/// handler.
fn turn() -> MutexGuard<'static, ()> {
    let turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    freeze::install();
    turn
}

/// A monitor whose task queue has one slot, served one task a stint.
fn one_slot() -> Arc<Monitor<u64>> {
    Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(1)
            .batch(1)
            .build(0u64),
    )
}

/// Bumped by every trial, watched by the watchdog.
static TRIAL: AtomicU64 = AtomicU64::new(0);

/// How long a wake-up may take before the test takes it for one that
/// waits for the frozen waiter (one that does not wait takes microseconds).
const PROMPT: Duration = Duration::from_millis(100);

/// How long a finisher that does not wait for the frozen waiter may take
/// to finish: a scheduling round or a preemption (tens to hundreds of
/// milliseconds on a loaded machine), well below the watchdog's 3 s, after
/// which it lets the frozen waiter go and a finisher that waited for it
/// finishes too.
const FINISH: Duration = Duration::from_secs(2);

/// The most trials.
const TRIALS: u64 = 4000;

/// How long the test watches a waker that waits for the frozen waiter.
const WATCH: Duration = Duration::from_millis(250);

/// Watches `waker`, which waits for the frozen `waiter`, for [`WATCH`]:
/// its CPU time must stay well below the frozen thread's. That one spins
/// in the signal handler: it gets the CPU time a spinner gets on this
/// machine now, which the waker got too while it spun. Returns the
/// waker's CPU time.
fn assert_gives_way(k: u64, waker: freeze::Target, waiter: freeze::Target) -> Duration {
    // SAFETY: both threads run until the test has let the frozen one go
    // (the waker waits for it), after this.
    let cpu_times = || unsafe { (waker.cpu_time(), waiter.cpu_time()) };
    let crowded = machine_crowded();
    let (cpu, spun) = cpu_times();
    thread::sleep(WATCH);
    let (cpu_now, spun_now) = cpu_times();
    let (cpu, spun) = (cpu_now - cpu, spun_now - spun);
    eprintln!("trial {k}: the waker used {cpu:?} of CPU, a spinner {spun:?}");
    if crowded || machine_crowded() {
        // Beside other jobs' threads, a waiter that gives its core away
        // is handed it back about as often as a spinner gets it.
        eprintln!("trial {k}: the machine is crowded: no comparison");
        return cpu;
    }
    assert!(
        cpu < spun * 3 / 5,
        "the waker spun on a frozen waiter: {cpu:?} of CPU, a spinner {spun:?}"
    );
    cpu
}

/// Runs trials: `prepare(k)` sets trial `k` up (the waiter registers
/// meanwhile), then `waiter` is frozen and `wake()` makes `waker` wake the
/// waiters; `done` says when it has. Where it does not within [`PROMPT`],
/// it waits for the frozen waiter: its CPU time must then stay well below
/// the frozen thread's. `after(k)` checks the trial with the waiter let
/// go. The trials stop after `waits` such waits.
fn trials(
    waits_wanted: usize,
    waiter: &freeze::Freezable<()>,
    waker: &freeze::Freezable<()>,
    done: &mpsc::Receiver<()>,
    mut prepare: impl FnMut(u64),
    mut wake: impl FnMut(),
    mut after: impl FnMut(u64),
) {
    // Lets a frozen waiter go if a trial stalls (a hang would otherwise
    // keep the waker waiting for ever).
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(3));
    // Trials until enough wake-ups waited for the frozen waiter.
    let mut waits = 0;
    let mut trials = 0;
    for k in 1..=TRIALS {
        if waits == waits_wanted {
            break;
        }
        trials = k;
        TRIAL.store(k, SeqCst);
        prepare(k);
        thread::sleep(Duration::from_micros(300));
        waiter.freeze();
        wake();
        if done.recv_timeout(PROMPT).is_err() {
            waits += 1;
            let _ = assert_gives_way(k, waker.target(), waiter.target());
            freeze::release();
            done.recv_timeout(Duration::from_secs(10))
                .expect("the waker went on once the waiter did");
        } else {
            freeze::release();
        }
        after(k);
    }
    eprintln!("{waits} of {trials} wake-ups waited for the frozen waiter");
    assert!(waits > 0, "no freeze landed inside a registration");
    drop(watchdog);
}

/// A waker that raises a flag.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// A task's finisher notifies the waiters on its end (program order), one
/// of them frozen half-way through its registration: the finisher does
/// not wait for it (it stops there), and that waiter, let go, finds the
/// task finished and notifies the waiter queued behind it.
#[test]
fn a_finisher_does_not_wait_for_a_frozen_waiter() {
    let _turn = turn();
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    // The task the waiter registers on, replaced each trial.
    let task: Arc<Mutex<Option<__TestOrderWait<u64>>>> = Arc::new(Mutex::new(None));
    let generation = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (task, generation, stop) = (task.clone(), generation.clone(), stop.clone());
        freeze::Freezable::spawn(move || {
            let mut cx = Context::from_waker(Waker::noop());
            let mut seen = u64::MAX;
            let mut current: Option<__TestOrderWait<u64>> = None;
            while !stop.load(SeqCst) {
                let g = generation.load(SeqCst);
                if g != seen {
                    seen = g;
                    current = task.lock().unwrap().clone();
                }
                if let Some(t) = &current {
                    // Registers (unless the task has finished), withdraws.
                    let mut w = t.clone();
                    let _ = Pin::new(&mut w).poll(&mut cx);
                }
            }
        })
    };
    // The thread that finishes each trial's task (its `call` runs it).
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let finisher = {
        let m = m.clone();
        std::thread::spawn(move || {
            for k in go_rx {
                m.call(|n| *n = k);
                done_tx.send(()).unwrap();
            }
        })
    };
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(3));
    let mut search = Search::start();
    let (mut landed, mut k) = (0, 0);
    while landed < 3 {
        assert!(search.goes_on(), "no freeze landed inside a registration");
        k += 1;
        TRIAL.store(k, SeqCst);
        // A task queued on its precondition: the finisher's `call` enables
        // and runs it.
        let c = m.when(move |n| *n == k, |n| *n);
        *task.lock().unwrap() = Some(c.__test_order_wait());
        generation.fetch_add(1, SeqCst);
        thread::sleep(Duration::from_micros(300));
        waiter.freeze();
        let in_flight = c.__test_order_in_flight();
        // Another waiter, queued behind the frozen one if that one is
        // half-way through.
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let behind_waker = Waker::from(flag.clone());
        let mut behind = c.__test_order_wait();
        let mut cx = Context::from_waker(&behind_waker);
        assert!(Pin::new(&mut behind).poll(&mut cx).is_pending());
        go_tx.send(k).unwrap();
        let finish = done_rx.recv_timeout(FINISH);
        if in_flight {
            landed += 1;
            eprintln!("trial {k}: a finish with a waiter frozen half-way through its push");
            finish.expect("the finisher waited for the frozen waiter");
            // The finisher stopped at the frozen waiter.
            assert!(
                !flag.0.load(SeqCst),
                "a waiter behind the frozen one was notified"
            );
        }
        freeze::release();
        if !in_flight {
            finish.expect("the finish went on");
        }
        // The frozen waiter, let go, notifies the one behind it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !flag.0.load(SeqCst) {
            assert!(Instant::now() < deadline, "the waiter behind was not woken");
            thread::sleep(Duration::from_millis(1));
        }
        assert!(Pin::new(&mut behind).poll(&mut cx).is_ready());
        assert_eq!(c.wait(), k);
        *task.lock().unwrap() = None;
    }
    eprintln!("{landed} of {k} freezes landed inside a registration");
    drop(watchdog);
    stop.store(true, SeqCst);
    drop(go_tx);
    waiter.join();
    finisher.join().unwrap();
}

/// The holder of a monitor with a full task queue lets go, and wakes the
/// producers waiting for room, one of them frozen half-way through its
/// registration.
#[test]
fn a_releasing_holder_does_not_spin_on_a_frozen_producer() {
    let _turn = turn();
    active_monitor::__test_set_saturation_override(Some(true));
    let m = one_slot();
    // Raised while the queue is full and held: the producer registers for
    // room (an async submission polled once), and withdraws (dropped).
    // `idle`: the producer has seen `full` lowered (no poll under way).
    let full = Arc::new(AtomicBool::new(false));
    let idle = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (m, full, idle, stop) = (m.clone(), full.clone(), idle.clone(), stop.clone());
        freeze::Freezable::spawn(move || {
            let mut cx = Context::from_waker(Waker::noop());
            while !stop.load(SeqCst) {
                if full.load(SeqCst) {
                    let mut f = m.submit_async(|_| ());
                    let _ = Pin::new(&mut f).poll(&mut cx);
                } else {
                    idle.store(true, SeqCst);
                    std::hint::spin_loop();
                }
            }
        })
    };
    // The holder: holds the monitor in a `call` until told to let go.
    let (hold_tx, hold_rx) = mpsc::channel::<()>();
    let (held_tx, held_rx) = mpsc::channel::<()>();
    let let_go = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let holder = {
        let (m, let_go) = (m.clone(), let_go.clone());
        freeze::Freezable::spawn(move || {
            for () in hold_rx {
                m.call(|_| {
                    held_tx.send(()).unwrap();
                    while !let_go.swap(false, SeqCst) {
                        thread::sleep(Duration::from_micros(20));
                    }
                });
                done_tx.send(()).unwrap();
            }
        })
    };
    let queued = Cell::new(None);
    // The holder also waits for a producer frozen in a sweep of the
    // producers' queue (its consumer role), as the family does: only
    // about one wait in eight is for a registration half-way through.
    trials(
        16,
        &producer,
        &holder,
        &done_rx,
        |k| {
            hold_tx.send(()).unwrap();
            held_rx.recv().unwrap();
            // Fills the one slot: the producer waits for room.
            queued.set(Some(m.submit(move |n| *n = k)));
            full.store(true, SeqCst);
        },
        || let_go.store(true, SeqCst),
        |k| {
            full.store(false, SeqCst);
            idle.store(false, SeqCst);
            while !idle.load(SeqCst) {
                thread::yield_now();
            }
            queued.take().unwrap().wait();
            // Also serves what the producer queued once there was room
            // (behind which the next trial's task would wait).
            assert_eq!(m.call(|n| *n), k);
        },
    );
    active_monitor::__test_set_saturation_override(None);
    stop.store(true, SeqCst);
    drop(hold_tx);
    producer.join();
    holder.join();
}

/// How long a test looks for a freeze inside the window it needs before it
/// gives up, counting only the time the machine is not crowded (see
/// [`Search`]).
const SEARCH: Duration = Duration::from_secs(30);

/// How long a test looks for a freeze in all, crowded or not.
const SEARCH_MAX: Duration = Duration::from_secs(120);

/// A test's search for a freeze inside the window it needs: [`SEARCH`] of
/// time on a machine that is not crowded, and at most [`SEARCH_MAX`].
struct Search {
    began: Instant,
    last: Instant,
    quiet: Duration,
}

impl Search {
    fn start() -> Self {
        let now = Instant::now();
        Self {
            began: now,
            last: now,
            quiet: Duration::ZERO,
        }
    }

    /// Whether the search goes on: called once a trial.
    fn goes_on(&mut self) -> bool {
        let now = Instant::now();
        if !machine_crowded() {
            self.quiet += now - self.last;
        }
        self.last = now;
        self.quiet < SEARCH && now - self.began < SEARCH_MAX
    }
}

/// The CPU time over [`WATCH`] below which a waker sleeps (parked), rather
/// than waits as the family does (it wakes every [`SNOOZE`]).
///
/// [`SNOOZE`]: sync_core::wait::SNOOZE
const ASLEEP: Duration = Duration::from_millis(1);

/// Waits for `count` to move once the frozen thread is let go: the thread
/// that waited for it went on.
fn goes_on(count: &AtomicU64, what: &str) {
    let before = count.load(SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count.load(SeqCst) == before {
        assert!(Instant::now() < deadline, "{what} did not go on");
        thread::sleep(Duration::from_millis(1));
    }
}

/// A caller takes the idle monitor and queues its task behind a producer
/// frozen half-way through its push into the queue's one slot (the
/// position claimed, the task not published): the queue is full and its
/// first task cannot be run yet, so the caller, holding the monitor, waits
/// for that producer (`push_held`).
#[test]
fn a_caller_does_not_spin_on_a_producer_frozen_in_the_first_position() {
    let _turn = turn();
    active_monitor::__test_set_saturation_override(Some(true));
    let m = one_slot();
    let stop = Arc::new(AtomicBool::new(false));
    // The producer: one submission after another, queued while the caller
    // holds the monitor. It polls its submission until it is queued (a
    // thread would sleep while the slot is taken): it claims the slot as
    // soon as it is free, as often as the caller empties it.
    let submitted = Arc::new(AtomicU64::new(0));
    let producer = {
        let (m, stop, submitted) = (m.clone(), stop.clone(), submitted.clone());
        freeze::Freezable::spawn(move || {
            let mut cx = Context::from_waker(Waker::noop());
            while !stop.load(SeqCst) {
                let mut queued = m.submit_async(|n| *n += 1).completion();
                while !stop.load(SeqCst) {
                    if Pin::new(&mut queued).poll(&mut cx).is_ready() {
                        submitted.fetch_add(1, SeqCst);
                        break;
                    }
                }
            }
        })
    };
    // The caller: one call after another.
    let calls = Arc::new(AtomicU64::new(0));
    let caller = {
        let (m, stop, calls) = (m.clone(), stop.clone(), calls.clone());
        freeze::Freezable::spawn(move || {
            while !stop.load(SeqCst) {
                m.call(|n| *n += 1);
                calls.fetch_add(1, SeqCst);
            }
        })
    };
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(3));
    let (mut waits, mut k) = (0, 0);
    let mut search = Search::start();
    while waits < 3 && search.goes_on() {
        k += 1;
        TRIAL.store(k, SeqCst);
        thread::sleep(Duration::from_micros(50));
        producer.freeze();
        // Landed: the first position is in flight, and the caller is stuck
        // with the monitor held: it took it idle and waits in `push_held`.
        // Or the producer was frozen in its own `push_held` (it took the
        // monitor idle too), holding it, and the caller waits for it
        // asleep: no CPU time at all, not the wait this test is about (a
        // wait that gives its core away still wakes every few dozen
        // microseconds).
        let landed = m.__test_front_in_flight().is_some() && {
            let before = calls.load(SeqCst);
            thread::sleep(PROMPT);
            calls.load(SeqCst) == before && m.__test_front_in_flight() == Some(true)
        };
        if landed && assert_gives_way(k, caller.target(), producer.target()) > ASLEEP {
            waits += 1;
        }
        freeze::release();
        if landed {
            goes_on(&calls, "the caller");
        }
    }
    eprintln!("{waits} of {k} freezes landed inside a push of the first position");
    assert!(
        waits > 0,
        "no freeze landed inside a push of the first position"
    );
    drop(watchdog);
    active_monitor::__test_set_saturation_override(None);
    stop.store(true, SeqCst);
    caller.join();
    producer.join();
    // Nothing lost: the queued tasks run before this call's.
    let (calls, submitted) = (calls.load(SeqCst), submitted.load(SeqCst));
    assert_eq!(m.call(|n| *n), calls + submitted);
}

/// The served monitor's server thread (a submitted task runs there while
/// the CPUs are not saturated).
fn server_thread(m: &Monitor<u64>) -> freeze::Target {
    let (on, server) = m
        .submit(|_| (thread::current().id(), freeze::Target::current()))
        .wait();
    assert_ne!(on, thread::current().id(), "the task ran on the server");
    server
}

/// A pause of 0 to 63 microseconds, from a xorshift state: a server
/// watches an empty queue for 20 µs, then queues its waiter and sleeps, so
/// it often goes to sleep between two submissions so paced.
fn pause(x: &mut u32) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(u64::from(*x % 64)) {
        std::hint::spin_loop();
    }
}

/// Gives the server of `m` a task, then freezes it somewhere on its way
/// back to sleep (it watches the empty queue for 20 µs first), until a
/// freeze lands inside the push of its waiter: returns with the server
/// frozen there, and the monitor idle. `k` counts the trials (each
/// submits one task), `x` is the pauses' xorshift state.
fn freeze_server_in_its_push(m: &Monitor<u64>, server: freeze::Target, k: &mut u64, x: &mut u32) {
    let mut search = Search::start();
    loop {
        assert!(
            search.goes_on(),
            "no freeze landed inside the server's push of its waiter"
        );
        *k += 1;
        TRIAL.store(*k, SeqCst);
        drop(m.submit(|n| *n += 1));
        pause(x);
        // SAFETY: the server runs until the monitor's last handle goes,
        // after the freeze.
        unsafe { server.freeze() };
        if m.__test_sleeper_in_flight() {
            eprintln!("trial {k}: the server is frozen inside the push of its waiter");
            return;
        }
        freeze::release();
    }
}

/// A submitter wakes the server of a served monitor (which serves: the
/// CPUs are not saturated) by handing it the monitor, held; the server is
/// frozen half-way through queuing its waiter before it sleeps, so the
/// submitter, holding the monitor, waits for that push (`hand_to_server`).
#[test]
fn a_submitter_does_not_spin_on_a_server_frozen_going_to_sleep() {
    let _turn = turn();
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(3));
    active_monitor::__test_set_saturation_override(Some(false));
    let m = Monitor::builder().order(Order::Relaxed).build_served(0u64);
    assert!(m.has_server(), "a server thread, under the cap");
    let server = server_thread(&m);
    // The submitter: one submission each time it is told.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let submitter = {
        let m = m.clone();
        freeze::Freezable::spawn(move || {
            for () in go_rx {
                drop(m.submit(|n| *n += 1));
                done_tx.send(()).unwrap();
            }
        })
    };
    let (mut k, mut x) = (0, 0x9e37_79b9);
    for _ in 0..2 {
        freeze_server_in_its_push(&m, server, &mut k, &mut x);
        go_tx.send(()).unwrap();
        assert!(
            done_rx.recv_timeout(PROMPT).is_err(),
            "the submission waits for the server's push"
        );
        // Yields are slow from now on (as beside busy threads): the
        // family's wait then sleeps instead of yielding.
        active_monitor::__test_set_saturation_override(Some(true));
        let _ = assert_gives_way(k, submitter.target(), server);
        active_monitor::__test_set_saturation_override(Some(false));
        freeze::release();
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the submitter went on once the server did");
    }
    drop(go_tx);
    submitter.join();
    // Nothing lost: the server runs the queued tasks before this call's.
    assert_eq!(m.call(|n| *n), k + 2);
    drop(watchdog);
    active_monitor::__test_set_saturation_override(None);
}

/// The last handle of a served monitor goes while its server is frozen
/// half-way through queuing its waiter before it sleeps: the drop wakes
/// the server to stop, and waits for that push (`wake_server_to_stop`),
/// taking the monitor and letting it go each time it looks.
#[test]
fn the_last_handle_does_not_spin_on_a_server_frozen_going_to_sleep() {
    let _turn = turn();
    let watchdog = freeze::Watchdog::start(&TRIAL, Duration::from_secs(3));
    let (mut k, mut x) = (0, 0x9e37_79b9);
    for _ in 0..2 {
        active_monitor::__test_set_saturation_override(Some(false));
        let m = Monitor::builder().order(Order::Relaxed).build_served(0u64);
        assert!(m.has_server(), "a server thread, under the cap");
        let server = server_thread(&m);
        freeze_server_in_its_push(&m, server, &mut k, &mut x);
        // The last handle goes on another thread.
        let dropped = Arc::new(AtomicBool::new(false));
        let (handle_tx, handle_rx) = mpsc::channel::<Served<u64>>();
        let dropper = {
            let dropped = dropped.clone();
            freeze::Freezable::spawn(move || {
                drop(handle_rx.recv().unwrap());
                dropped.store(true, SeqCst);
            })
        };
        handle_tx.send(m).unwrap();
        thread::sleep(PROMPT);
        assert!(!dropped.load(SeqCst), "the drop waits for the server");
        // Yields are slow from now on (as beside busy threads): the
        // family's wait then sleeps instead of yielding.
        active_monitor::__test_set_saturation_override(Some(true));
        let _ = assert_gives_way(k, dropper.target(), server);
        freeze::release();
        // The server stops, and the drop joins it.
        dropper.join();
        assert!(dropped.load(SeqCst));
    }
    drop(watchdog);
    active_monitor::__test_set_saturation_override(None);
}
