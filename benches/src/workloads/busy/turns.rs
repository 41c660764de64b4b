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
//! over one that just used the CPU (so a wait depends on what the thread
//! ran before it, the previous wait included). A `thread::sleep` draws
//! the same two values. Measured one implementation per start of the busy
//! threads, a row compared draws of that state; in turns, every
//! implementation sees the same states, and in a random order none always
//! follows the same neighbour.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
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
/// Called before the busy threads start; the `Wait` is dropped after they
/// stop.
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
}

/// The implementations of one row and the results of their runs not yet
/// handed to the harness.
struct Turns {
    makers: Vec<MakeWait>,
    /// Per implementation: (median, 99th percentile) of each run.
    results: Vec<VecDeque<(f64, f64)>>,
    busy: usize,
    waits: usize,
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
    /// but at least 3), one each in turn, in a new random order every turn.
    fn run(&mut self) {
        let n = self.makers.len();
        let mut waits: Vec<Wait> = self.makers.iter().map(|make| make()).collect();
        let mut v = vec![Vec::with_capacity(self.waits); n];
        {
            let _busy = BusyThreads::start(self.busy);
            let began = Instant::now();
            let budget = self.budget * n as u32;
            let mut order: Vec<usize> = (0..n).collect();
            while v[0].len() < self.waits && (v[0].len() < 3 || began.elapsed() < budget) {
                self.shuffle(&mut order);
                for &i in &order {
                    v[i].push(waits[i]());
                }
            }
        }
        drop(waits);
        for (results, v) in self.results.iter_mut().zip(v) {
            results.push_back(percentile_pair(v));
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
    } = row;
    let mut impls = impls.to_vec();
    impls.push(reference);
    let turns = Rc::new(RefCell::new(Turns {
        makers: impls.iter().map(|&(_, make)| make).collect(),
        results: vec![VecDeque::new(); impls.len()],
        busy,
        waits,
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
    use std::cell::Cell;

    use super::*;
    use crate::harness::{Unit, measure};

    thread_local! {
        /// Waits made by the test's makers, per maker: (made, waited).
        static MADE: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    fn counted(value: f64) -> Wait {
        MADE.with(|m| m.set((m.get().0 + 1, m.get().1)));
        Box::new(move || {
            MADE.with(|m| m.set((m.get().0, m.get().1 + 1)));
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

    #[test]
    fn every_implementation_gets_its_own_waits_from_one_run_per_round() {
        let row = Row {
            workload: Workload::new("busy/test/0", Unit::Ms).companion("busy/test-p99/0", "p99"),
            reference: ("sleep-floor", floor),
        };
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
        assert_eq!(MADE.with(Cell::get), (4 * 3, 4 * 3 * 4));
    }

    #[test]
    fn a_run_past_its_budget_still_makes_three_waits_each() {
        let row = Row {
            workload: Workload::new("busy/test/0", Unit::Ms).companion("busy/test-p99/0", "p99"),
            reference: ("sleep-floor", floor),
        };
        let mut w = in_turns(row, &[("lockfree-sync", one)], 0, 20, Duration::ZERO);
        MADE.with(|m| m.set((0, 0)));
        measure(&mut w, 0, 1, |_| {});
        assert_eq!(MADE.with(Cell::get), (2, 2 * 3));
    }
}
