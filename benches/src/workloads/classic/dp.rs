//! DP: 16 dining philosophers (the paper's figures 2 and 3, tables VI
//! and X).
//!
//! Philosopher `p` eats with forks `p` (its left) and `p + 1` (its right,
//! modulo 16). Each meal is "think" (`work` units), take both forks, "eat"
//! (`work` units), put them back.
//!
//! * CP (figure 2a): one semaphore per fork; a philosopher takes its
//!   lower-numbered fork first, so the forks cannot deadlock.
//! * CM (figure 2b): one `Cell<bool>` per fork and the simulated
//!   `await fork[left] & fork[right]`; taking both is one step, since no
//!   context switch can fall between the test and the take.
//! * PCM (figure 3, DP1): West is philosophers 0-7, East 8-15, one region
//!   (thread) each. Forks 1-7 and 9-15 lie inside a region and are
//!   `Cell`s; forks 0 and 8 lie between the regions and are lockfree-sync
//!   semaphores, taken with `acquire_async`. A border philosopher takes its
//!   border fork first (the task sleeps, its region runs on), then awaits
//!   its inside fork; the chain of waits always ends at an eating inside
//!   philosopher, who holds no fork while it waits, so it cannot deadlock.
//!   The regions are real (one thread each), so no "protection
//!   synchronization" is needed inside a region: this is the paper's pure
//!   PCM, which it expected to be cheaper than its DP1.
//!
//! The check: a witness flag per fork, set when a philosopher takes the
//! fork and cleared when it puts it down; finding it already set means two
//! philosophers share a fork.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockfree_sync::Semaphore;

use super::runtime::{
    Fault, LocalFault, LocalTask, Pv, Region, busy, p_async, run_cm, run_regions, run_threads,
    wait_until, yield_now,
};
use super::{Config, Model, Violation};
use crate::twins::CondvarSemaphore;

/// The paper's table: 16 philosophers.
pub const PHILOSOPHERS: usize = 16;

/// One run of DP in `model`: `cfg.reps` meals per philosopher.
pub(super) fn run(model: Model, cfg: &Config) -> Result<Duration, Violation> {
    match model {
        Model::CpLockfree => cp::<Semaphore>(cfg),
        Model::CpStd => cp::<CondvarSemaphore>(cfg),
        Model::Cm => cm(cfg),
        Model::Pcm => pcm(cfg),
    }
}

fn forks_of(p: usize) -> (usize, usize) {
    (p, (p + 1) % PHILOSOPHERS)
}

/// Witness flags for threads: one per fork.
struct Held(Vec<AtomicBool>);

impl Held {
    fn new() -> Self {
        Self((0..PHILOSOPHERS).map(|_| AtomicBool::new(false)).collect())
    }

    fn take(&self, fork: usize, p: usize, fault: &Fault) {
        // Relaxed: a witness, not a synchronization; the swaps on one flag
        // are totally ordered, so two overlapping holders see each other.
        if self.0[fork].swap(true, Ordering::Relaxed) {
            fault.fail(|| format!("philosopher {p} took fork {fork} while another held it"));
        }
    }

    fn put(&self, fork: usize) {
        // Relaxed: as in `take`.
        self.0[fork].store(false, Ordering::Relaxed);
    }
}

fn cp<S: Pv>(cfg: &Config) -> Result<Duration, Violation> {
    let forks: Arc<Vec<S>> = Arc::new((0..PHILOSOPHERS).map(|_| S::new(1)).collect());
    let held = Arc::new(Held::new());
    let fault = Arc::new(Fault::default());
    let (work, meals) = (cfg.work, cfg.reps);
    let f = Arc::clone(&fault);
    let elapsed = run_threads(PHILOSOPHERS, move |p| {
        let (left, right) = forks_of(p);
        let (first, second) = (left.min(right), left.max(right));
        for _ in 0..meals {
            busy(work); // think
            forks[first].p();
            forks[second].p();
            held.take(left, p, &f);
            held.take(right, p, &f);
            busy(work); // eat
            held.put(left);
            held.put(right);
            forks[second].v();
            forks[first].v();
        }
    });
    fault.verdict(elapsed)
}

/// The cooperative philosophers' shared variables (one thread, no lock).
struct Table {
    /// `true`: the fork lies on the table.
    free: Vec<Cell<bool>>,
    /// The witness, apart from the program's own flags.
    held: Vec<Cell<bool>>,
    fault: LocalFault,
}

impl Table {
    fn new() -> Self {
        Self {
            free: (0..PHILOSOPHERS).map(|_| Cell::new(true)).collect(),
            held: (0..PHILOSOPHERS).map(|_| Cell::new(false)).collect(),
            fault: LocalFault::default(),
        }
    }

    fn take(&self, fork: usize, p: usize) {
        self.free[fork].set(false);
        if self.held[fork].replace(true) {
            self.fault
                .fail(|| format!("philosopher {p} took fork {fork} while another held it"));
        }
    }

    fn put(&self, fork: usize) {
        self.held[fork].set(false);
        self.free[fork].set(true);
    }
}

fn cm(cfg: &Config) -> Result<Duration, Violation> {
    let table = Rc::new(Table::new());
    let (work, meals, sabotage) = (cfg.work, cfg.reps, cfg.sabotage);
    let tasks: Vec<LocalTask> = (0..PHILOSOPHERS)
        .map(|p| {
            let t = Rc::clone(&table);
            Box::pin(async move {
                let (left, right) = forks_of(p);
                for _ in 0..meals {
                    busy(work); // think
                    if !sabotage {
                        wait_until(|| t.free[left].get() && t.free[right].get()).await;
                    }
                    t.take(left, p);
                    t.take(right, p);
                    if sabotage {
                        // The broken variant: no await, and a yield while
                        // eating, so a neighbour grabs a held fork.
                        yield_now().await;
                    }
                    busy(work); // eat
                    t.put(left);
                    t.put(right);
                }
            }) as LocalTask
        })
        .collect();
    let elapsed = run_cm(tasks);
    table.fault.verdict(elapsed)
}

/// The two forks between West and East: fork 0 (philosophers 15 and 0) and
/// fork 8 (7 and 8).
const BORDER_FORKS: [usize; 2] = [0, PHILOSOPHERS / 2];

/// What a PCM philosopher shares: its region's inside forks (`Rc`: one
/// thread), the two border forks, and the witness.
struct PcmShared {
    free: Rc<Vec<Cell<bool>>>,
    border: Arc<[Semaphore; 2]>,
    held: Arc<Held>,
    fault: Arc<Fault>,
}

async fn pcm_philosopher(p: usize, cfg: Config, s: PcmShared) {
    let (left, right) = forks_of(p);
    // `Some((b, inside))`: a border philosopher, its border fork `b` and
    // its inside fork.
    let crossing = BORDER_FORKS
        .iter()
        .position(|&f| f == left || f == right)
        .map(|b| (b, if left == BORDER_FORKS[b] { right } else { left }));
    for _ in 0..cfg.reps {
        busy(cfg.work); // think
        match crossing {
            None => {
                wait_until(|| s.free[left].get() && s.free[right].get()).await;
                s.free[left].set(false);
                s.free[right].set(false);
            }
            Some((b, inside)) => {
                p_async(&s.border[b]).await;
                wait_until(|| s.free[inside].get()).await;
                s.free[inside].set(false);
            }
        }
        s.held.take(left, p, &s.fault);
        s.held.take(right, p, &s.fault);
        busy(cfg.work); // eat
        s.held.put(left);
        s.held.put(right);
        match crossing {
            None => {
                s.free[left].set(true);
                s.free[right].set(true);
            }
            Some((b, inside)) => {
                s.free[inside].set(true);
                s.border[b].release(1);
            }
        }
    }
}

fn pcm(cfg: &Config) -> Result<Duration, Violation> {
    let border: Arc<[Semaphore; 2]> = Arc::new([Semaphore::new(1), Semaphore::new(1)]);
    // The witness spans both regions, so it is atomic (it checks; it does
    // not synchronize).
    let held = Arc::new(Held::new());
    let fault = Arc::new(Fault::default());
    let cfg = *cfg;
    let half = PHILOSOPHERS / 2;
    let regions: Vec<Region> = (0..2)
        .map(|r| {
            let (border, held, fault) =
                (Arc::clone(&border), Arc::clone(&held), Arc::clone(&fault));
            Box::new(move || {
                // The region's inside forks (the border entries are unused).
                let free: Rc<Vec<Cell<bool>>> =
                    Rc::new((0..PHILOSOPHERS).map(|_| Cell::new(true)).collect());
                (r * half..(r + 1) * half)
                    .map(|p| {
                        let shared = PcmShared {
                            free: Rc::clone(&free),
                            border: Arc::clone(&border),
                            held: Arc::clone(&held),
                            fault: Arc::clone(&fault),
                        };
                        Box::pin(pcm_philosopher(p, cfg, shared)) as LocalTask
                    })
                    .collect()
            }) as Region
        })
        .collect();
    let elapsed = run_regions(regions);
    fault.verdict(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fork_witness_sees_a_shared_fork() {
        let (held, fault) = (Held::new(), Fault::default());
        held.take(3, 2, &fault);
        held.put(3);
        held.take(3, 3, &fault);
        assert!(
            fault.verdict(Duration::ZERO).is_ok(),
            "one holder at a time"
        );
        held.take(3, 2, &fault);
        let v = fault.verdict(Duration::ZERO).unwrap_err();
        assert!(v.0.contains("fork 3"), "{v}");
    }

    #[test]
    fn the_cooperative_table_sees_a_shared_fork() {
        let t = Table::new();
        t.take(5, 4);
        t.take(5, 5);
        assert!(t.fault.verdict(Duration::ZERO).is_err());
    }
}
