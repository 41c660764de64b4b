//! JI: Jacobi iteration with a barrier (tables IX and XIII).
//!
//! An `n × n` grid, its edges fixed (the top row 1.0, the others 0.0);
//! every iteration replaces each inside point by the mean of its four
//! neighbours in the previous grid. The `processes` workers own equal
//! strips of rows; after each iteration they meet at a barrier that also
//! takes the largest change of the iteration over all strips, and stop when
//! it falls under [`EPSILON`] or after `reps` iterations. Two grids
//! alternate, so one barrier per iteration suffices: nobody writes a grid
//! until everyone has finished reading it.
//!
//! * CP: a barrier of semaphores shared by all processes: a semaphore used
//!   as a lock around the arrival count and the running maximum, and two
//!   gates (one per parity of the iteration) that the last arrival opens
//!   for the `processes - 1` others.
//! * CM: the barrier is shared variables: the arrival count, the maximum
//!   and a generation number in `Cell`s; a worker awaits the next
//!   generation.
//! * PCM: the paper's two-level barrier: each region (half of the workers,
//!   one thread) meets at a `Cell` barrier as in CM; the last arrival of
//!   each region then meets the other region's last arrival through two
//!   lockfree-sync semaphores (`acquire_async`), the two exchanging their
//!   regions' maxima, and releases its region. The region's other workers
//!   sleep meanwhile instead of polling (see `RegionEvent`: they wait on
//!   the other thread, not on their own).
//!
//! The check: the final grid equals, bit for bit, the grid of a sequential
//! run (the same arithmetic in the same order per point, and the maximum
//! does not depend on the order of the strips). The grids are shared by
//! threads as `Relaxed` atomic words (plain loads and stores on x86), the
//! barrier ordering them.

use std::cell::Cell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lockfree_sync::Semaphore;

use super::runtime::{
    Counter, LocalTask, Pv, Region, RegionEvent, p_async, run_cm, run_regions, run_threads,
    wait_until,
};
use super::{Config, Model, Violation};
use crate::twins::CondvarSemaphore;

/// The convergence bound on the largest change of one iteration.
pub const EPSILON: f64 = 1e-9;

/// The paper's process count for a matrix size: "128 8" and "256 2"
/// (table IX); other sizes take 4.
pub fn processes_for(n: usize) -> usize {
    match n {
        128 => 8,
        256 => 2,
        _ => 4,
    }
}

/// A grid the kernel reads and writes.
trait Grid {
    fn get(&self, i: usize) -> f64;
    fn set(&self, i: usize, v: f64);
}

impl Grid for [AtomicU64] {
    #[inline]
    fn get(&self, i: usize) -> f64 {
        // Relaxed: the barrier orders the iterations (see the module docs).
        f64::from_bits(self[i].load(Ordering::Relaxed))
    }
    #[inline]
    fn set(&self, i: usize, v: f64) {
        // Relaxed: as in `get`.
        self[i].store(v.to_bits(), Ordering::Relaxed);
    }
}

impl Grid for [Cell<f64>] {
    #[inline]
    fn get(&self, i: usize) -> f64 {
        self[i].get()
    }
    #[inline]
    fn set(&self, i: usize, v: f64) {
        self[i].set(v);
    }
}

fn initial(n: usize, i: usize) -> f64 {
    if i < n { 1.0 } else { 0.0 }
}

/// One iteration over `rows` of `old` into `new`; the largest change.
fn relax<G: Grid + ?Sized>(old: &G, new: &G, n: usize, rows: Range<usize>) -> f64 {
    let mut max = 0.0f64;
    for r in rows {
        for c in 1..n - 1 {
            let i = r * n + c;
            let v = 0.25 * (old.get(i - n) + old.get(i + n) + old.get(i - 1) + old.get(i + 1));
            max = max.max((v - old.get(i)).abs());
            new.set(i, v);
        }
    }
    max
}

/// The rows of worker `w` of `p`.
fn strip(n: usize, p: usize, w: usize) -> Range<usize> {
    let inside = n - 2;
    1 + inside * w / p..1 + inside * (w + 1) / p
}

/// The parameters of one run.
#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    p: usize,
    iters: usize,
}

/// The sequential run's final grid, the reference of every model.
pub fn reference(n: usize, iters: usize) -> Vec<f64> {
    let grids: [Vec<Cell<f64>>; 2] =
        std::array::from_fn(|_| (0..n * n).map(|i| Cell::new(initial(n, i))).collect());
    let mut k = 0;
    while k < iters {
        let max = relax(&grids[k % 2][..], &grids[(k + 1) % 2][..], n, 1..n - 1);
        k += 1;
        if max < EPSILON {
            break;
        }
    }
    grids[k % 2].iter().map(Cell::get).collect()
}

/// One run of JI in `model`: an `cfg.work`-square grid, `cfg.processes`
/// workers, at most `cfg.reps` iterations, checked against `reference`.
pub(super) fn run(model: Model, cfg: &Config, reference: &[f64]) -> Result<Duration, Violation> {
    let shape = Shape {
        n: cfg.work as usize,
        p: cfg.processes,
        iters: cfg.reps,
    };
    assert!(
        shape.n >= 3,
        "a Jacobi grid needs at least 3 rows, got {}",
        shape.n
    );
    assert!(
        (1..=shape.n - 2).contains(&shape.p),
        "between 1 and n - 2 processes, got {}",
        shape.p
    );
    let (elapsed, grid) = match model {
        Model::CpLockfree => cp::<Semaphore>(shape),
        Model::CpStd => cp::<CondvarSemaphore>(shape),
        Model::Cm => cm(shape, cfg.sabotage),
        Model::Pcm => pcm(shape),
    }?;
    if grid.len() != reference.len() {
        return Err(Violation(format!(
            "the grid has {} points, the reference {}",
            grid.len(),
            reference.len()
        )));
    }
    if let Some(i) = (0..grid.len()).find(|&i| grid[i].to_bits() != reference[i].to_bits()) {
        return Err(Violation(format!(
            "point ({}, {}) is {} where the sequential run has {}",
            i / shape.n,
            i % shape.n,
            grid[i],
            reference[i]
        )));
    }
    Ok(elapsed)
}

type Outcome = Result<(Duration, Vec<f64>), Violation>;

fn atomic_grids(n: usize) -> Arc<[Vec<AtomicU64>; 2]> {
    Arc::new(std::array::from_fn(|_| {
        (0..n * n)
            .map(|i| AtomicU64::new(initial(n, i).to_bits()))
            .collect()
    }))
}

/// The iteration loop of one worker, with `barrier(k, local_max)` giving
/// the iteration's global maximum. Returns the iterations done.
fn iterate<G: Grid + ?Sized>(
    grids: [&G; 2],
    shape: Shape,
    w: usize,
    mut barrier: impl FnMut(usize, f64) -> f64,
) -> usize {
    let rows = strip(shape.n, shape.p, w);
    let mut k = 0;
    while k < shape.iters {
        let local = relax(grids[k % 2], grids[(k + 1) % 2], shape.n, rows.clone());
        let global = barrier(k, local);
        k += 1;
        if global < EPSILON {
            break;
        }
    }
    k
}

/// CP's barrier: semaphores shared by all processes. The count and the
/// running maxima are guarded by `mutex`; the last arrival of iteration
/// `k` opens `gate[k % 2]` for the others and resets the other parity's
/// maximum (nobody reads it any more: everyone has arrived here).
struct SemBarrier<S> {
    p: usize,
    mutex: S,
    gate: [S; 2],
    count: Counter,
    max: [AtomicU64; 2],
}

impl<S: Pv> SemBarrier<S> {
    fn new(p: usize) -> Self {
        Self {
            p,
            mutex: S::new(1),
            gate: [S::new(0), S::new(0)],
            count: Counter::default(),
            max: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    fn wait(&self, k: usize, local: f64) -> f64 {
        let ph = k % 2;
        self.mutex.p();
        // Relaxed: the `mutex` semaphore orders these; a waiter reads the
        // final maximum after `gate[ph]`'s release/acquire.
        let max = f64::from_bits(self.max[ph].load(Ordering::Relaxed)).max(local);
        self.max[ph].store(max.to_bits(), Ordering::Relaxed);
        let arrived = self.count.get() + 1;
        if arrived == self.p {
            self.count.set(0);
            self.max[1 - ph].store(0, Ordering::Relaxed);
            self.mutex.v();
            for _ in 1..self.p {
                self.gate[ph].v();
            }
            max
        } else {
            self.count.set(arrived);
            self.mutex.v();
            self.gate[ph].p();
            f64::from_bits(self.max[ph].load(Ordering::Relaxed))
        }
    }
}

fn cp<S: Pv>(shape: Shape) -> Outcome {
    let grids = atomic_grids(shape.n);
    let barrier = Arc::new(SemBarrier::<S>::new(shape.p));
    let done = Arc::new(AtomicU64::new(0));
    let (g, d) = (Arc::clone(&grids), Arc::clone(&done));
    let elapsed = run_threads(shape.p, move |w| {
        let k = iterate([&g[0][..], &g[1][..]], shape, w, |k, m| barrier.wait(k, m));
        // Relaxed: read after the join.
        d.store(k as u64, Ordering::Relaxed);
    });
    let k = done.load(Ordering::Relaxed) as usize;
    let grid = grids[k % 2]
        .iter()
        .map(|a| f64::from_bits(a.load(Ordering::Relaxed)));
    Ok((elapsed, grid.collect()))
}

/// CM's (and a PCM region's) barrier: shared variables in `Cell`s.
struct CellBarrier {
    p: usize,
    count: Cell<usize>,
    max: Cell<f64>,
    /// The generation, advanced by each iteration's last arrival.
    event: RegionEvent,
    result: Cell<f64>,
}

impl CellBarrier {
    fn new(p: usize) -> Self {
        Self {
            p,
            count: Cell::new(0),
            max: Cell::new(0.0),
            event: RegionEvent::default(),
            result: Cell::new(0.0),
        }
    }

    /// Arrives with `local`; `Some(max)` for the last arrival, which must
    /// then call [`open`](Self::open) with the iteration's maximum.
    fn arrive(&self, local: f64) -> Option<f64> {
        self.max.set(self.max.get().max(local));
        self.count.set(self.count.get() + 1);
        (self.count.get() == self.p).then(|| self.max.get())
    }

    /// The last arrival releases the others with the global maximum.
    fn open(&self, global: f64) {
        self.count.set(0);
        self.max.set(0.0);
        self.result.set(global);
        self.event.advance();
    }

    /// A waiter, as CM: yields until the next generation; the global
    /// maximum. (The next iteration's last arrival overwrites `result`
    /// only after everyone arrived there, so after every waiter read it.)
    async fn wait(&self) -> f64 {
        let g = self.event.generation();
        wait_until(|| self.event.generation() != g).await;
        self.result.get()
    }

    /// A waiter of a PCM region: sleeps until the next generation (see
    /// [`RegionEvent`] for why it does not poll); the global maximum.
    async fn sleep(&self) -> f64 {
        self.event.after(self.event.generation()).await;
        self.result.get()
    }
}

fn cell_grids(n: usize) -> Rc<[Vec<Cell<f64>>; 2]> {
    Rc::new(std::array::from_fn(|_| {
        (0..n * n).map(|i| Cell::new(initial(n, i))).collect()
    }))
}

fn cm(shape: Shape, sabotage: bool) -> Outcome {
    let grids = cell_grids(shape.n);
    let barrier = Rc::new(CellBarrier::new(shape.p));
    let done = Rc::new(Cell::new(0));
    let tasks: Vec<LocalTask> = (0..shape.p)
        .map(|w| {
            let (grids, barrier, done) = (Rc::clone(&grids), Rc::clone(&barrier), Rc::clone(&done));
            Box::pin(async move {
                let rows = strip(shape.n, shape.p, w);
                let mut k = 0;
                while k < shape.iters {
                    let local = relax(
                        &grids[k % 2][..],
                        &grids[(k + 1) % 2][..],
                        shape.n,
                        rows.clone(),
                    );
                    let global = if sabotage {
                        // The broken variant: no barrier at all.
                        local
                    } else {
                        match barrier.arrive(local) {
                            Some(max) => {
                                barrier.open(max);
                                max
                            }
                            None => barrier.wait().await,
                        }
                    };
                    k += 1;
                    if global < EPSILON {
                        break;
                    }
                }
                done.set(k);
            }) as LocalTask
        })
        .collect();
    let elapsed = run_cm(tasks);
    let grid = grids[done.get() % 2].iter().map(Cell::get).collect();
    Ok((elapsed, grid))
}

/// Where the two regions' last arrivals meet: each releases the other's
/// semaphore and takes its own; the maxima are published in slots of the
/// iteration's parity (a region leader writes slot `k % 2` again only at
/// iteration `k + 2`, after the other leader released it at `k + 1`,
/// hence after that leader read the slot of `k`).
struct Crossing {
    sem: [Semaphore; 2],
    max: [[AtomicU64; 2]; 2],
}

impl Crossing {
    async fn exchange(&self, region: usize, k: usize, mine: f64) -> f64 {
        let other = 1 - region;
        // Relaxed: published by the release below, which pairs with the
        // other leader's acquire of `sem[other]`.
        self.max[region][k % 2].store(mine.to_bits(), Ordering::Relaxed);
        self.sem[other].release(1);
        // Pairs with the other leader's `release` of `sem[region]`: its
        // region's grid rows and its maximum are visible after this.
        p_async(&self.sem[region]).await;
        let theirs = f64::from_bits(self.max[other][k % 2].load(Ordering::Relaxed));
        mine.max(theirs)
    }
}

fn pcm(shape: Shape) -> Outcome {
    assert!(shape.p >= 2, "pcm needs a worker per region at least");
    let grids = atomic_grids(shape.n);
    let crossing = Arc::new(Crossing {
        sem: [Semaphore::new(0), Semaphore::new(0)],
        max: std::array::from_fn(|_| [AtomicU64::new(0), AtomicU64::new(0)]),
    });
    let done = Arc::new(AtomicU64::new(0));
    let regions: Vec<Region> = (0..2)
        .map(|r| {
            let (grids, crossing, done) =
                (Arc::clone(&grids), Arc::clone(&crossing), Arc::clone(&done));
            Box::new(move || {
                let workers = strip_workers(shape.p, r);
                let barrier = Rc::new(CellBarrier::new(workers.len()));
                workers
                    .map(|w| {
                        let (grids, crossing, done, barrier) = (
                            Arc::clone(&grids),
                            Arc::clone(&crossing),
                            Arc::clone(&done),
                            Rc::clone(&barrier),
                        );
                        Box::pin(async move {
                            let rows = strip(shape.n, shape.p, w);
                            let mut k = 0;
                            while k < shape.iters {
                                let local = relax(
                                    &grids[k % 2][..],
                                    &grids[(k + 1) % 2][..],
                                    shape.n,
                                    rows.clone(),
                                );
                                let global = match barrier.arrive(local) {
                                    Some(mine) => {
                                        let global = crossing.exchange(r, k, mine).await;
                                        barrier.open(global);
                                        global
                                    }
                                    None => barrier.sleep().await,
                                };
                                k += 1;
                                if global < EPSILON {
                                    break;
                                }
                            }
                            // Relaxed: read after the join.
                            done.store(k as u64, Ordering::Relaxed);
                        }) as LocalTask
                    })
                    .collect()
            }) as Region
        })
        .collect();
    let elapsed = run_regions(regions);
    let k = done.load(Ordering::Relaxed) as usize;
    let grid = grids[k % 2]
        .iter()
        .map(|a| f64::from_bits(a.load(Ordering::Relaxed)));
    Ok((elapsed, grid.collect()))
}

/// The workers of region `r` of 2: the first half of the strips, or the
/// second.
fn strip_workers(p: usize, r: usize) -> Range<usize> {
    if r == 0 { 0..p / 2 } else { p / 2..p }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            work: 12,
            reps: 30,
            processes: 4,
            sabotage: false,
        }
    }

    #[test]
    fn a_grid_off_the_reference_is_caught() {
        let mut reference = reference(12, 30);
        for model in Model::ALL {
            assert!(run(model, &cfg(), &reference).is_ok(), "{}", model.name());
        }
        reference[5 * 12 + 5] += 1e-12;
        for model in Model::ALL {
            let v = run(model, &cfg(), &reference).unwrap_err();
            assert!(v.0.contains("(5, 5)"), "{}: {v}", model.name());
        }
    }

    #[test]
    fn the_strips_cover_the_inside_rows_once() {
        for (n, p) in [(12, 4), (128, 8), (256, 2), (13, 3)] {
            let rows: Vec<usize> = (0..p).flat_map(|w| strip(n, p, w)).collect();
            assert_eq!(rows, (1..n - 1).collect::<Vec<_>>(), "n {n}, p {p}");
        }
    }

    #[test]
    fn the_run_converges_before_the_bound_on_a_small_grid() {
        // 5x5 converges (change below EPSILON) long before 10^4 iterations,
        // so the stop by convergence is exercised in every model too.
        let cfg = Config {
            work: 5,
            reps: 10_000,
            processes: 3,
            sabotage: false,
        };
        let reference = reference(5, 10_000);
        for model in Model::ALL {
            run(model, &cfg, &reference).unwrap_or_else(|v| panic!("{}: {v}", model.name()));
        }
    }
}
