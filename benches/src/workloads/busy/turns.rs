//! The `busy/` waits measured in turns: every implementation of a row
//! waits beside the *same* busy threads, one wait each per turn, in a new
//! random order every turn, with a reference among them that shows what
//! the kernel alone gives: `sleep-floor` (a plain `thread::sleep` of the
//! timeout) beside the overshoot rows, `park-floor` (a thread woken from
//! `thread::park`) beside the wake-up rows.
//!
//! Why: with 50 threads spinning on 2 CPUs, a thread whose timer fires
//! either gets a CPU at once (about 0.1 ms late) or waits for the running
//! thread's time slice to end (about 3 ms late). Which one happens depends
//! on the scheduler's state: it stays the same for many waits in a row,
//! changes with the busy threads' start, and favours a thread that slept
//! over one that just used the CPU. Measured one implementation per start
//! of the busy threads, a row compared draws of that state; in turns,
//! every implementation sees the same states, and in a random order none
//! always follows the same neighbour.
//!
//! **Each implementation waits on a thread of its own**, started before the
//! busy threads and told when to make each wait. A thread's claim on the
//! CPU depends on what *it* ran before, and a service's threads carry their
//! own history, not a benchmark's neighbour's. On one shared thread, what
//! each wait drew depended on the implementations that happened to wait
//! before it (a peer whose timed wait yields for its whole timeout, as
//! parking_lot's `try_lock_for` does, runs for a scheduling round at a
//! time): a row's median switched between the two values from run to run
//! and between implementations within a run, so a `-p50` row compared coin
//! tosses. On threads of their own, the implementations that park draw the
//! same value as `sleep-floor` run after run.
//!
//! **A wake-up row spreads each run over several sets of fresh threads.**
//! With 50 busy threads, a woken waiter either runs at once or several
//! microseconds later (in our probes, after the waker had gone to sleep).
//! Which one it draws is a property of the threads, not of the primitive:
//! it stays the same for every wake-up between the same waker and waiter,
//! and changes when they are new threads (a standalone probe of `std`'s,
//! `lockfree-sync`'s and `ast-mutex`'s mutexes, 20 and 30 sets of threads
//! of 20-50 wake-ups each: nearly every set's median was one mode or the
//! other, for every lock). A run whose threads live for all its waits gives each
//! implementation one draw, and a row's median compared draws. A row that
//! sets [`waits_per_thread_set`](Row::waits_per_thread_set) starts the
//! implementations' threads, and the busy threads, anew after that many
//! waits, so each run's median is taken over several draws.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sync_core::testing::BusyThreads;

use super::{TIMEOUT, overshoot, percentile_pair};
use crate::harness::{Origin, Workload};

/// One measured wait, ready to be made again: returns how late a timed
/// wait that cannot succeed returned (ms past [`TIMEOUT`]), or how long a
/// waiter took to return after the event that woke it (ms).
pub(super) type Wait = Box<dyn FnMut() -> f64>;

/// Makes an implementation's [`Wait`] (its lock held, its channel empty,
/// its waiter thread started).
/// Called on the implementation's own thread (see the module's docs)
/// before the busy threads start; the `Wait` is dropped after they stop.
pub(super) type MakeWait = fn() -> Wait;

/// The reference beside every overshoot row.
pub(super) const SLEEP_FLOOR: &str = "sleep-floor";

/// The [`SLEEP_FLOOR`] row: a 1 ms `thread::sleep`.
pub(super) fn sleep_floor() -> Wait {
    Box::new(|| overshoot(|| thread::sleep(TIMEOUT)))
}

/// A row to measure in turns: its workload, and the reference that shows
/// the kernel's own floor beside it ([`sleep_floor`] for an overshoot row,
/// a parked thread's wake-up for a wake-up row).
pub(super) struct Row {
    pub workload: Workload,
    pub reference: (&'static str, MakeWait),
    /// After how many waits each a run starts every implementation's
    /// thread (and its `Wait`) and the busy threads anew; `None`: once per
    /// run (see the module's docs).
    pub waits_per_thread_set: Option<usize>,
}

/// The implementations of one row and the results of their runs not yet
/// handed to the harness.
struct Turns {
    makers: Vec<MakeWait>,
    /// Per implementation: (median, 99th percentile) of each run.
    results: Vec<VecDeque<(f64, f64)>>,
    busy: usize,
    waits: usize,
    /// See [`Row::waits_per_thread_set`].
    per_set: usize,
    budget: Duration,
    /// The state of the generator that orders each turn.
    seed: u64,
}

impl Turns {
    /// Puts `order` in a new random order (Fisher-Yates, with a linear
    /// congruential generator: the order needs no quality, only no bias).
    fn shuffle(&mut self, order: &mut [usize]) {
        for k in (1..order.len()).rev() {
            self.seed = self
                .seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            order.swap(k, (self.seed >> 33) as usize % (k + 1));
        }
    }

    /// One run: `busy` threads spin while every implementation makes
    /// `waits` waits (fewer once `budget` per implementation has passed,
    /// but at least 3), one each in turn, in a new random order every turn,
    /// each on its own [`WaitThread`]; the threads, busy ones included, are
    /// started anew every `per_set` waits (and each set makes at least one
    /// wait).
    fn run(&mut self) {
        let n = self.makers.len();
        let mut v = vec![Vec::with_capacity(self.waits); n];
        let sets = self.waits.div_ceil(self.per_set.max(1));
        let began = Instant::now();
        let mut order: Vec<usize> = (0..n).collect();
        for set in 1..=sets {
            // This set's share of the waits and of the budget, and at
            // least its share of the three waits every run makes.
            let goal = (self.waits * set).div_ceil(sets);
            let floor = (3 * set).div_ceil(sets);
            let budget = self.budget * n as u32 * set as u32 / sets as u32;
            let waiters: Vec<WaitThread> = self
                .makers
                .iter()
                .map(|&make| WaitThread::start(make))
                .collect();
            {
                let _busy = BusyThreads::start(self.busy);
                let before = v[0].len();
                // Every set makes a wait, or its threads measured nothing.
                while v[0].len() < goal
                    && (v[0].len() == before || v[0].len() < floor || began.elapsed() < budget)
                {
                    self.shuffle(&mut order);
                    for &i in &order {
                        v[i].push(waiters[i].wait());
                    }
                }
            }
            drop(waiters);
        }
        for (results, v) in self.results.iter_mut().zip(v) {
            results.push_back(percentile_pair(v));
        }
    }
}

/// An implementation's thread: it makes the implementation's [`Wait`],
/// then makes one wait each time it is told to, and drops the `Wait` when
/// this handle is dropped.
struct WaitThread {
    go: Option<mpsc::Sender<()>>,
    done: mpsc::Receiver<f64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl WaitThread {
    /// Starts the thread and waits until it has made its `Wait`.
    fn start(make: MakeWait) -> Self {
        let (go, told) = mpsc::channel::<()>();
        let (tell, done) = mpsc::channel();
        let thread = thread::spawn(move || {
            let mut wait = make();
            tell.send(f64::NAN).expect("the run waits for the thread");
            while told.recv().is_ok() {
                tell.send(wait()).expect("the run waits for each wait");
            }
        });
        done.recv().expect("the implementation's Wait was made");
        Self {
            go: Some(go),
            done,
            thread: Some(thread),
        }
    }

    /// One wait on the thread: its result.
    fn wait(&self) -> f64 {
        self.go
            .as_ref()
            .expect("not dropped")
            .send(())
            .expect("the thread runs until dropped");
        self.done.recv().expect("the wait did not panic")
    }
}

impl Drop for WaitThread {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop; it drops its Wait.
        drop(self.go.take());
        if let Some(t) = self.thread.take()
            && t.join().is_err()
            && !thread::panicking()
        {
            panic!("an implementation's wait thread panicked");
        }
    }
}

/// Adds `impls` (name, maker) and the row's reference to its workload,
/// measured in turns (see the module's docs); every peer among them
/// becomes a baseline. The harness asks each implementation for a run in
/// turn, so the first to ask runs all of them, and the others take their
/// results from that run.
pub(super) fn in_turns(
    row: Row,
    impls: &[(&'static str, MakeWait)],
    busy: usize,
    waits: usize,
    budget: Duration,
) -> Workload {
    let Row {
        workload: w,
        reference,
        waits_per_thread_set,
    } = row;
    let mut impls = impls.to_vec();
    impls.push(reference);
    let turns = Rc::new(RefCell::new(Turns {
        makers: impls.iter().map(|&(_, make)| make).collect(),
        results: vec![VecDeque::new(); impls.len()],
        busy,
        waits,
        per_set: waits_per_thread_set.unwrap_or(waits),
        budget,
        seed: 0x5eed,
    }));
    impls.iter().enumerate().fold(w, |w, (i, &(name, _))| {
        let w = if Origin::of(name) == Origin::Peer && !w.meta.baselines.iter().any(|b| b == name) {
            w.baseline(name)
        } else {
            w
        };
        let turns = Rc::clone(&turns);
        w.implementation_pair(name, move || {
            let mut t = turns.borrow_mut();
            if t.results[i].is_empty() {
                t.run();
            }
            t.results[i]
                .pop_front()
                .expect("a run gives every implementation a result")
        })
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::{Mutex, MutexGuard};
    use std::thread::ThreadId;

    use super::*;
    use crate::harness::{Unit, measure};

    /// Waits made and waited by the test's makers.
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static WAITED: AtomicUsize = AtomicUsize::new(0);
    /// The threads the makers ran on.
    static THREADS: Mutex<Option<HashSet<ThreadId>>> = Mutex::new(None);
    /// The tests share the counters: one at a time.
    static ONE_TEST: Mutex<()> = Mutex::new(());

    /// Takes the counters for a test, reset.
    fn counters() -> MutexGuard<'static, ()> {
        let guard = ONE_TEST.lock().unwrap_or_else(|e| e.into_inner());
        MADE.store(0, Relaxed);
        WAITED.store(0, Relaxed);
        *THREADS.lock().unwrap() = Some(HashSet::new());
        guard
    }

    fn counted(value: f64) -> Wait {
        MADE.fetch_add(1, Relaxed);
        let me = thread::current().id();
        THREADS.lock().unwrap().get_or_insert_default().insert(me);
        Box::new(move || {
            assert_eq!(thread::current().id(), me, "a Wait waits where it was made");
            WAITED.fetch_add(1, Relaxed);
            value
        })
    }

    fn one() -> Wait {
        counted(1.0)
    }

    fn two() -> Wait {
        counted(2.0)
    }

    fn floor() -> Wait {
        counted(0.5)
    }

    /// The tests' row, with `sleep-floor` (`floor`) as its reference.
    fn test_row(waits_per_thread_set: Option<usize>) -> Row {
        Row {
            workload: Workload::new("busy/test/0", Unit::Ms).companion("busy/test-p99/0", "p99"),
            reference: ("sleep-floor", floor),
            waits_per_thread_set,
        }
    }

    #[test]
    fn every_implementation_gets_its_own_waits_from_one_run_per_round() {
        let _counters = counters();
        let row = test_row(None);
        let mut w = in_turns(
            row,
            &[("lockfree-sync", one), ("std", two)],
            0,
            4,
            Duration::from_secs(60),
        );
        // A peer becomes a baseline; ours and the reference do not.
        assert_eq!(w.meta.baselines, ["std"]);
        let records = measure(&mut w, 1, 3, |_| {});
        let median = |imp: &str| {
            records
                .iter()
                .find(|r| r.workload == "busy/test/0" && r.imp == imp)
                .map(|r| (r.median, r.samples))
        };
        assert_eq!(median("lockfree-sync"), Some((1.0, 3)));
        assert_eq!(median("std"), Some((2.0, 3)));
        assert_eq!(median("sleep-floor"), Some((0.5, 3)));
        // One run per round (the warm-up and 3 samples), each making every
        // implementation's wait once and waiting 4 times with it.
        assert_eq!(
            (MADE.load(Relaxed), WAITED.load(Relaxed)),
            (4 * 3, 4 * 3 * 4)
        );
        // Each on a thread of its own, none the harness's.
        let threads = THREADS.lock().unwrap().take().unwrap();
        assert_eq!(threads.len(), 4 * 3);
        assert!(!threads.contains(&thread::current().id()));
    }

    #[test]
    fn a_run_past_its_budget_still_makes_three_waits_each() {
        let row = test_row(None);
        let mut w = in_turns(row, &[("lockfree-sync", one)], 0, 20, Duration::ZERO);
        let _counters = counters();
        measure(&mut w, 0, 1, |_| {});
        assert_eq!((MADE.load(Relaxed), WAITED.load(Relaxed)), (2, 2 * 3));
    }

    #[test]
    fn a_row_with_thread_sets_starts_every_thread_anew_after_so_many_waits() {
        let row = test_row(Some(3));
        let mut w = in_turns(
            row,
            &[("lockfree-sync", one), ("std", two)],
            0,
            10,
            Duration::from_secs(60),
        );
        let _counters = counters();
        let records = measure(&mut w, 0, 1, |_| {});
        let median = |imp: &str| {
            records
                .iter()
                .find(|r| r.workload == "busy/test/0" && r.imp == imp)
                .map(|r| r.median)
        };
        assert_eq!(median("lockfree-sync"), Some(1.0));
        // 10 waits in sets of at most 3: 4 sets, each making every
        // implementation's wait (3 of them) on a thread of its own.
        assert_eq!((MADE.load(Relaxed), WAITED.load(Relaxed)), (4 * 3, 3 * 10));
        let threads = THREADS.lock().unwrap().take().unwrap();
        assert_eq!(threads.len(), 4 * 3);
    }

    #[test]
    fn thread_sets_past_the_budget_still_make_a_wait_each() {
        let row = test_row(Some(2));
        let mut w = in_turns(row, &[("lockfree-sync", one)], 0, 20, Duration::ZERO);
        let _counters = counters();
        measure(&mut w, 0, 1, |_| {});
        // 10 sets of one wait each: every set makes one, past its budget.
        assert_eq!((MADE.load(Relaxed), WAITED.load(Relaxed)), (2 * 10, 2 * 10));
    }
}
