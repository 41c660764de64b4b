//! `classic/`: paper 002 (Keen et al., "A comparison of concurrent
//! programming and cooperative multithreading"), tables VI-XIII. Issue 11.
//!
//! Four classic programs, each written in four execution models:
//!
//! | program | what | module |
//! |---|---|---|
//! | DP | 16 dining philosophers | [`dp`] |
//! | PC | one producer, one consumer, a single-slot buffer | [`pc`] |
//! | RW | 8 readers and 4 writers of one database | [`rw`] |
//! | JI | Jacobi iteration, strips of rows, a barrier per iteration | [`ji`] |
//!
//! | model | threads | synchronization |
//! |---|---|---|
//! | `cp-lockfree` | one OS thread per process | lockfree-sync's `Semaphore` (`acquire` parks) |
//! | `cp-std` | one OS thread per process | semaphores of std `Mutex` + `Condvar` |
//! | `cm` | all tasks on one thread (`futures`' `LocalPool`) | none: `Cell`s and the simulated `await` (yield until the condition holds) |
//! | `pcm` | two threads, one cooperative region each | `Cell`s inside a region; lockfree-sync's `acquire_async` across |
//!
//! The paper's "work" is busy work (`lf/`'s counter increments) done
//! outside and inside each critical section; for JI the parameter is the
//! matrix size. Every run checks its program's correctness condition
//! (philosophers never share a fork; every item is consumed exactly once;
//! readers never overlap writers; Jacobi ends on the sequential run's
//! matrix, bit for bit) and a violation fails the run ([`Violation`]); the
//! benchmark panics on one.
//!
//! # Region split (`pcm`)
//!
//! * DP: West (philosophers 0-7) and East (8-15), the paper's figure 3;
//!   the two border forks are semaphores, the other 14 `Cell`s.
//! * PC: the producer is one region, the consumer the other (the paper's
//!   split): the slot crosses, so it keeps CP's two semaphores, async.
//! * RW: readers and writers alternate between the regions; the database's
//!   state is shared by both, so the program is CP's "passing the baton" on
//!   async semaphores (the paper's table XII program).
//! * JI: the first half of the strips and the second; a `Cell` barrier in
//!   each region, and the two regions' last arrivals meet through two
//!   semaphores (the paper's two-level barrier).
//!
//! # Regimes on 2 cores
//!
//! The paper compared CM with CP on *one* processor (tables VI-IX) and PCM
//! with CP on two (X-XIII). Here every model runs on the same 2-core
//! machine, so `cm` (one thread) gives up the second core that the CP
//! models use:
//!
//! * In `cm`, DP and RW never wait: no task yields inside a critical
//!   section, so a philosopher always finds its forks and a writer an empty
//!   database (the paper's "a philosopher can run to completion"). `cm`'s
//!   time is the busy work done serially plus a few `Cell` updates.
//! * At work 100 (about 25 ns of busy work per section here) the CP
//!   models' semaphore operations and the parks of threads preempted
//!   while holding a fork or the baton cost more than the second core
//!   gains: `cm` is below both CP models for DP and RW, as in the paper
//!   (measured 57-80%).
//! * From work 1000 on the busy work outweighs CP's synchronization, which
//!   is cheap here: an uncontended lockfree-sync P plus V costs about
//!   11 ns (`lf/sem-uncontended`; SR's cost 0.45-3.8 us per pair, table
//!   III), and a CP thread seldom blocks, since a time slice holds
//!   thousands of meals. CP then spreads the work over both cores and `cm`
//!   cannot, so CM/CP rises towards 2 for DP, PC and RW, where the
//!   paper's one-processor CM/CP tended to 1. Confined to one CPU
//!   (`taskset`, the paper's regime) `cm` stays at or below CP: DP 67%,
//!   96%, 97% and RW 61%, 96%, 98% at work 100, 1000, 10000 (one
//!   measurement on a loaded machine). PCM/CP is the comparison on equal
//!   hardware.
//! * PC alternates strictly (one slot): every item is a hand-off between
//!   the producer and the consumer. In `cm` that is a yield (tens of ns);
//!   in CP and `pcm` it is a wake-up of the other thread unless both stay
//!   awake, so CM/CP is far below 1 at small work and `cp-lockfree` is
//!   bimodal (below 1 ms when both threads stay on a core, 20-50 ms when
//!   they fall into parking and waking each other).
//! * JI is computation plus one barrier per iteration; with 8 processes
//!   on 2 cores (`ji/128`), CP pays a semaphore barrier of 8 threads per
//!   iteration (most of them parked), `cm` a few `Cell` updates, `pcm` a
//!   `Cell` barrier per region and one semaphore exchange between them.
//! * On a loaded machine the scheduler shares the CPUs per thread, so the
//!   models with more threads (CP: one per process) get more of them than
//!   `cm` (one) and `pcm` (two): measure on an otherwise idle machine.
//!
//! To see the paper's one-processor regime, confine the process to one
//! CPU: `taskset -c 0 cargo run --release -p sync-bench --bin classic`.
//!
//! The workload's `× cp-lockfree` and `× cp-std` columns are our ratios to
//! each CP model; the paper's CM/CP (and PCM/CP) is the ratio to the
//! better CP model, the larger of the two columns in the `cm` (or `pcm`)
//! row. The paper's figures are in each workload's note.

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::harness::{Mode, Unit, Workload, ms};
use crate::report::Results;

pub mod dp;
pub mod ji;
pub mod pc;
mod runtime;
pub mod rw;

/// An execution model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Model {
    /// OS threads with lockfree-sync's semaphores.
    CpLockfree,
    /// OS threads with semaphores of std `Mutex` + `Condvar`.
    CpStd,
    /// Async tasks on one thread, no atomics or locks: `Cell`s and yields.
    Cm,
    /// Two threads, each a cooperative region; lockfree-sync's async
    /// semaphores between the regions.
    Pcm,
}

impl Model {
    /// Every model, in report order.
    pub const ALL: [Model; 4] = [Model::CpLockfree, Model::CpStd, Model::Cm, Model::Pcm];

    /// The fixed implementation id.
    pub fn name(self) -> &'static str {
        match self {
            Model::CpLockfree => "cp-lockfree",
            Model::CpStd => "cp-std",
            Model::Cm => "cm",
            Model::Pcm => "pcm",
        }
    }
}

impl FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Model::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown model {s:?} (cp-lockfree, cp-std, cm or pcm)"))
    }
}

/// A program of the paper's table V.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// Dining philosophers.
    Dp,
    /// Producer/consumer, one slot.
    Pc,
    /// Readers and writers.
    Rw,
    /// Jacobi iteration.
    Ji,
}

impl Program {
    /// Every program, in report order.
    pub const ALL: [Program; 4] = [Program::Dp, Program::Pc, Program::Rw, Program::Ji];

    /// The id segment: `dp`, `pc`, `rw`, `ji`.
    pub fn name(self) -> &'static str {
        match self {
            Program::Dp => "dp",
            Program::Pc => "pc",
            Program::Rw => "rw",
            Program::Ji => "ji",
        }
    }

    /// What `Config::reps` counts for this program.
    pub fn reps_name(self) -> &'static str {
        match self {
            Program::Dp => "meals",
            Program::Pc => "items",
            Program::Rw => "accesses",
            Program::Ji => "max_iterations",
        }
    }
}

impl FromStr for Program {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Program::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown problem {s:?} (dp, pc, rw or ji)"))
    }
}

/// One run's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The paper's "work" (busy-work units outside and inside each critical
    /// section); for JI, the matrix size.
    pub work: u64,
    /// Meals per philosopher, items, accesses per reader or writer, or
    /// JI's iteration bound.
    pub reps: usize,
    /// JI's worker count (the other programs' counts are the paper's).
    pub processes: usize,
    /// Test only: the `cm` program drops its waits (and yields inside its
    /// critical sections), so its check must report a violation.
    pub sabotage: bool,
}

impl Config {
    /// The report's sizes for `program` at `work` in `mode`.
    pub fn sized(program: Program, work: u64, mode: Mode) -> Self {
        // Sized so that a `cm` sample takes a few to a few tens of
        // milliseconds (a unit of busy work is about a quarter of a
        // nanosecond here) and the slowest CP model stays under ~100 ms.
        let at = |table: [usize; 4]| {
            let i = WORKS.iter().rposition(|&w| w <= work).unwrap_or(0);
            table[i]
        };
        let quick = match program {
            Program::Dp => at([4_000, 2_000, 500, 50]),
            Program::Pc => at([5_000, 5_000, 2_000, 200]),
            Program::Rw => at([2_000, 1_000, 300, 30]),
            Program::Ji if work <= 128 => 300,
            Program::Ji => 100,
        };
        let reps = mode.pick(quick, quick * 10);
        Self {
            work,
            reps,
            processes: ji::processes_for(work as usize),
            sabotage: false,
        }
    }
}

/// A broken correctness condition: two philosophers on one fork, an item
/// lost or duplicated, a reader beside a writer, a Jacobi matrix that
/// differs from the sequential one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Violation {}

/// Runs `program` once in `model` and checks its correctness condition;
/// the time the processes took (starting them and the check not timed).
///
/// # Errors
///
/// The [`Violation`] the run's check found.
///
/// # Panics
///
/// For JI, if `cfg.work` (the matrix size) is below 3 or `cfg.processes`
/// is not between 1 (2 for `pcm`) and `work - 2`.
///
/// # Examples
///
/// ```
/// use sync_bench::workloads::classic::{Config, Model, Program, run};
///
/// let cfg = Config { work: 10, reps: 20, processes: 2, sabotage: false };
/// for model in Model::ALL {
///     run(Program::Dp, model, &cfg).expect("no two philosophers share a fork");
/// }
/// ```
pub fn run(program: Program, model: Model, cfg: &Config) -> Result<Duration, Violation> {
    match program {
        Program::Dp => dp::run(model, cfg),
        Program::Pc => pc::run(model, cfg),
        Program::Rw => rw::run(model, cfg),
        Program::Ji => ji::run(model, cfg, &ji::reference(cfg.work as usize, cfg.reps)),
    }
}

/// The works of `classic/{dp,pc,rw}/<work>`.
pub const WORKS: [u64; 4] = [100, 1_000, 10_000, 100_000];
/// The matrix sizes of `classic/ji/<n>`.
pub const JI_SIZES: [u64; 2] = [128, 256];

/// This family's workloads, sized for `mode`.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let mut all = Vec::new();
    for program in [Program::Dp, Program::Pc, Program::Rw] {
        for work in WORKS {
            all.push(workload(program, work, mode));
        }
    }
    for n in JI_SIZES {
        all.push(workload(Program::Ji, n, mode));
    }
    all
}

fn workload(program: Program, work: u64, mode: Mode) -> Workload {
    let cfg = Config::sized(program, work, mode);
    let id = format!("classic/{}/{work}", program.name());
    let mut w = Workload::new(id.clone(), Unit::Ms)
        .title(title(program, &cfg))
        .param(program.reps_name(), cfg.reps);
    w = if program == Program::Ji {
        w.param("n", work).param("processes", cfg.processes)
    } else {
        w.param("work", work)
    };
    w = w
        .regime(regime(program, &cfg))
        .baseline("cp-lockfree")
        .baseline("cp-std");
    if let Some(text) = paper(program, work) {
        w = w.paper(text);
    }
    for model in Model::ALL {
        // JI's reference is computed at the first sample, untimed, and kept.
        let reference: RefCell<Option<Vec<f64>>> = RefCell::new(None);
        let id = id.clone();
        w = w.implementation(model.name(), move || {
            let outcome = if program == Program::Ji {
                let mut r = reference.borrow_mut();
                let r = r.get_or_insert_with(|| ji::reference(work as usize, cfg.reps));
                ji::run(model, &cfg, r)
            } else {
                run(program, model, &cfg)
            };
            match outcome {
                Ok(elapsed) => ms(elapsed),
                Err(v) => panic!("{id} ({}): correctness violated: {v}", model.name()),
            }
        });
    }
    w
}

/// `report.md`'s table of this family: each workload's medians, our CM/CP
/// and PCM/CP (over the better CP model, as the paper's ratio) beside the
/// paper's (tables VI-XIII), and the issue's target (`cm` at most 1.0x the
/// better CP model for DP and RW at small work). Empty if no `classic/`
/// workload ran.
pub fn ratio_table(results: &Results) -> String {
    let median = |id: &str, imp: &str| {
        results
            .results
            .iter()
            .find(|r| r.workload == id && r.imp == imp)
            .map(|r| r.median)
    };
    let mut rows = Vec::new();
    for program in Program::ALL {
        let works: &[u64] = if program == Program::Ji {
            &JI_SIZES
        } else {
            &WORKS
        };
        for &work in works {
            let id = format!("classic/{}/{work}", program.name());
            let m: Option<Vec<f64>> = Model::ALL.iter().map(|m| median(&id, m.name())).collect();
            if let Some(m) = m {
                rows.push((program, work, id, m));
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "## `classic/`: CM/CP and PCM/CP beside the paper's\n\n\
         The ratios are over the better of the two CP models, as the paper's are over \
         the better of SR_IC and SR_TS; below 100% the cooperative model is faster. The \
         paper's CM/CP is on one CPU (tables VI-IX), its PCM/CP on two (X-XIII); here \
         every model runs on the same machine, so `cm` has one core where the others \
         have all of them.\n\n\
         | workload | cp-lockfree | cp-std | cm | pcm | CM/CP | paper CM/CP | PCM/CP | paper PCM/CP |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let mut target = Vec::new();
    for (program, work, id, m) in &rows {
        let cp = m[0].min(m[1]);
        let (cm, pcm) = (m[2] / cp, m[3] / cp);
        let (p1, p2) = paper_rows(*program, *work)
            .map_or((String::new(), String::new()), |(_, a, _, b)| {
                (format!("{:.0}%", a.3), format!("{:.0}%", b.3))
            });
        md.push_str(&format!(
            "| `{id}` | {:.3} | {:.3} | {:.3} | {:.3} | {:.0}% | {p1} | {:.0}% | {p2} |\n",
            m[0],
            m[1],
            m[2],
            m[3],
            100.0 * cm,
            100.0 * pcm
        ));
        if matches!(program, Program::Dp | Program::Rw) && *work <= 1_000 {
            let verdict = if cm <= 1.0 { "met" } else { "**missed**" };
            target.push(format!("`{id}` {:.2}x ({verdict})", cm));
        }
    }
    if !target.is_empty() {
        md.push_str(&format!(
            "\nTarget, `cm` at most 1.0x the better CP model for DP and RW at small work: {}.\n",
            target.join(", ")
        ));
    }
    md.push('\n');
    md
}

/// The threads each model runs on (they differ, so the harness cannot
/// derive the regime from one thread count).
fn regime(program: Program, cfg: &Config) -> String {
    let processes = match program {
        Program::Dp => dp::PHILOSOPHERS,
        Program::Pc => 2,
        Program::Rw => rw::READERS + rw::WRITERS,
        Program::Ji => cfg.processes,
    };
    let per_region = processes.div_ceil(2);
    let tasks = if per_region == 1 { "task" } else { "tasks" };
    format!(
        "{processes} processes: {processes} threads (cp), 1 thread (cm), 2 regions of \
         {per_region} {tasks} (pcm)"
    )
}

fn title(program: Program, cfg: &Config) -> String {
    match program {
        Program::Dp => format!(
            "16 dining philosophers, {} meals each, `work` units of thinking and of eating; \
             time for all meals",
            cfg.reps
        ),
        Program::Pc => format!(
            "one producer, one consumer, a single-slot buffer, {} items, `work` units to \
             produce and to consume each; time for all items",
            cfg.reps
        ),
        Program::Rw => format!(
            "{} readers and {} writers, {} accesses each, `work` units outside and inside; \
             time for all accesses",
            rw::READERS,
            rw::WRITERS,
            cfg.reps
        ),
        Program::Ji => format!(
            "Jacobi iteration on a {n}x{n} grid, {} processes, at most {} iterations with a \
             barrier each; time to the last iteration",
            cfg.processes,
            cfg.reps,
            n = cfg.work
        ),
    }
}

/// The paper's row for one workload: (SR_IC, SR_TS, SR_CM, ratio %) on one
/// processor, then on two.
type Row = (f64, f64, f64, f64);

fn paper_rows(program: Program, work: u64) -> Option<(&'static str, Row, &'static str, Row)> {
    let i = match program {
        Program::Ji => JI_SIZES.iter().position(|&n| n == work)?,
        _ => WORKS.iter().position(|&x| x == work)?,
    };
    let (one, one_rows, two, two_rows): (&str, [Row; 4], &str, [Row; 4]) = match program {
        Program::Dp => (
            "VI",
            [
                (0.42, 2.00, 0.13, 30.95),
                (3.69, 3.18, 1.19, 37.42),
                (33.41, 13.73, 11.73, 85.43),
                (318.39, 119.41, 117.13, 98.09),
            ],
            "X (DP1)",
            [
                (0.93, 3.49, 0.56, 60.21),
                (3.72, 4.59, 0.81, 21.77),
                (31.60, 12.69, 6.09, 47.99),
                (299.82, 63.56, 59.17, 93.09),
            ],
        ),
        Program::Pc => (
            "VII",
            [
                (2.32, 2.27, 2.19, 96.47),
                (22.95, 21.72, 21.61, 99.49),
                (229.09, 216.24, 215.76, 99.77),
                (2296.20, 2161.61, 2157.51, 99.81),
            ],
            "XI",
            [
                (1.43, 1.87, 1.25, 87.41),
                (12.04, 11.88, 10.91, 91.83),
                (123.40, 110.59, 108.85, 98.42),
                (1163.44, 1094.92, 1080.14, 98.65),
            ],
        ),
        Program::Rw => (
            "VIII",
            [
                (0.85, 0.49, 0.44, 89.79),
                (0.93, 0.87, 0.49, 56.32),
                (1.75, 2.19, 1.02, 58.28),
                (10.09, 14.61, 6.37, 63.13),
            ],
            "XII",
            [
                (1.35, 1.39, 0.60, 44.44),
                (1.49, 1.52, 0.65, 43.62),
                (2.81, 3.30, 1.33, 47.33),
                (16.04, 19.95, 7.92, 49.38),
            ],
        ),
        Program::Ji => (
            "IX",
            [
                (3.72, 3.81, 3.71, 99.73),
                (19.25, 18.80, 18.47, 98.24),
                (0.0, 0.0, 0.0, 0.0),
                (0.0, 0.0, 0.0, 0.0),
            ],
            "XIII",
            [
                (4.30, 4.21, 2.66, 63.18),
                (13.79, 14.13, 13.68, 99.20),
                (0.0, 0.0, 0.0, 0.0),
                (0.0, 0.0, 0.0, 0.0),
            ],
        ),
    };
    Some((one, one_rows[i], two, two_rows[i]))
}

fn paper(program: Program, work: u64) -> Option<String> {
    let (one, (ic, ts, cm, r1), two, (ic2, ts2, pcm, r2)) = paper_rows(program, work)?;
    let what = if program == Program::Ji {
        format!("test \"{work} {}\"", ji::processes_for(work as usize))
    } else {
        format!("work {work}")
    };
    Some(format!(
        "{what}: CM/CP {r1:.2}% (table {one}, one 550 MHz CPU: SR_IC {ic:.2} s, SR_TS \
         {ts:.2} s, SR_CM {cm:.2} s); PCM/CP {r2:.2}% (table {two}, two CPUs: SR_IC {ic2:.2} s, \
         SR_TS {ts2:.2} s, PCM {pcm:.2} s). CM/CP and PCM/CP are over the better CP \
         implementation: the larger of the `cm` (`pcm`) row's two ratio columns, and the \
         `classic/` table at the end of the report. Here `cm` has one core where CP has two \
         (see the module docs), so at large work CM/CP tends to 2, not 1."
    ))
}
