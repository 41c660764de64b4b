//! Paper 002's classic problems in one execution model: dining philosophers,
//! producer/consumer, readers/writers or Jacobi iteration, run as OS threads
//! with lockfree-sync's semaphores (`cp-lockfree`) or std's Mutex + Condvar
//! (`cp-std`), as async tasks on one thread that synchronize through `Cell`s
//! and yields (`cm`), or as two cooperative regions on two threads joined by
//! lockfree-sync's async semaphores (`pcm`). Each run checks the program's
//! correctness condition and prints the time. (A binary of `sync-bench`,
//! not of `sync-examples`: it runs the harness's programs, and a
//! `publish = false` package cannot depend on another.)
//!
//! ```text
//! cargo run --release -p sync-bench --bin classic -- \
//!     --problem dp|pc|rw|ji --model cp-lockfree|cp-std|cm|pcm --work N [--reps N] [--runs N]
//! ```
//!
//! `--work` is the busy work inside and outside each critical section (for
//! `ji`, the matrix size); `--reps` the meals, items, accesses or JI's
//! iteration bound (default: the report's quick size); `--model all` (the
//! default) runs every model and prints CM/CP and PCM/CP as the paper does
//! (over the better CP model). Without `--problem`, every problem runs.
//!
//! The paper compared CM with CP on one processor: `taskset -c 0` before
//! the command confines every model to one CPU, as there.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sync_bench::harness::{Mode, summarize};
use sync_bench::workloads::classic::{Config, Model, Program, run};

#[derive(Parser)]
#[command(about = "Paper 002's classic problems in each execution model")]
struct Args {
    /// dp, pc, rw or ji [default: every problem].
    #[arg(long, value_parser = parse::<Program>)]
    problem: Option<Program>,
    /// cp-lockfree, cp-std, cm, pcm, or all.
    #[arg(long, default_value = "all", value_parser = parse_models)]
    model: Models,
    /// The busy work inside and outside each critical section (for ji, the
    /// matrix size) [default: 1000, ji 128].
    #[arg(long)]
    work: Option<u64>,
    /// Meals, items, accesses or JI's iteration bound [default: the
    /// report's quick size].
    #[arg(long)]
    reps: Option<usize>,
    /// Runs per model; the median is printed.
    #[arg(long, default_value_t = 5, value_parser = positive)]
    runs: usize,
}

/// The models `--model` names (clap needs one type per argument).
#[derive(Clone)]
struct Models(Vec<Model>);

fn parse<T: std::str::FromStr<Err = String>>(s: &str) -> Result<T, String> {
    s.parse()
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}")),
    }
}

fn parse_models(s: &str) -> Result<Models, String> {
    if s == "all" {
        Ok(Models(Model::ALL.to_vec()))
    } else {
        s.parse().map(|m| Models(vec![m]))
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let programs = args.problem.map_or(Program::ALL.to_vec(), |p| vec![p]);
    for program in programs {
        if let Err(code) = run_one(program, &args.model.0, args.work, args.reps, args.runs) {
            return code;
        }
    }
    ExitCode::SUCCESS
}

/// Runs `program` in each of `models` `runs` times and prints the medians.
fn run_one(
    program: Program,
    models: &[Model],
    work: Option<u64>,
    reps: Option<usize>,
    runs: usize,
) -> Result<(), ExitCode> {
    let work = work.unwrap_or(if program == Program::Ji { 128 } else { 1000 });
    let mut cfg = Config::sized(program, work, Mode::Quick);
    if let Some(r) = reps {
        cfg.reps = r;
    }
    println!(
        "{} with work {work}, {} {} (median of {runs} runs, ms):",
        program.name(),
        cfg.reps,
        program.reps_name()
    );
    let mut medians = Vec::new();
    for &model in models {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            match run(program, model, &cfg) {
                Ok(t) => times.push(ms(t)),
                Err(v) => {
                    eprintln!("{}: correctness violated: {v}", model.name());
                    return Err(ExitCode::FAILURE);
                }
            }
        }
        let (median, min, max) = summarize(&times);
        println!(
            "  {:<12} {median:>10.3}  (min {min:.3}, max {max:.3}); checked",
            model.name()
        );
        medians.push((model, median));
    }
    let of = |m: Model| medians.iter().find(|(x, _)| *x == m).map(|&(_, t)| t);
    if let (Some(a), Some(b)) = (of(Model::CpLockfree), of(Model::CpStd)) {
        let cp = a.min(b);
        for (model, label) in [(Model::Cm, "CM/CP"), (Model::Pcm, "PCM/CP")] {
            if let Some(t) = of(model) {
                println!(
                    "  {label} = {:.0}% (over the better CP model)",
                    100.0 * t / cp
                );
            }
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
