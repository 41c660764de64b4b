//! The paper's TSP branch and bound (Mukherjee & Schwan, section 4) on the
//! adaptive lock: the centralized queue, the distributed queues and the
//! distributed queues with load balancing, each with the paper's four locks
//! (`qlock`, `glob-act-lock`, `glob-low-lock`, `globlock`). Prints the tour
//! and what each lock's monitor saw. It is a binary of `sync-bench`
//! because it runs the report's solver (`adaptive/tsp`).
//!
//! ```text
//! cargo run --release -p sync-bench --bin tsp [CITIES] [SEARCHERS]
//! ```

use std::sync::Arc;
use std::time::Instant;

use adaptive_lock::{AdaptiveLockExt, Stats};
use clap::Parser;
use sync_bench::workloads::adaptive::tsp::{self, Problem, Slot, Variant};
use sync_bench::workloads::adaptive::{Adaptive, BlockPolicy, LearnedPolicy};

type Learned = Adaptive<LearnedPolicy, Slot>;
type Blocking = Adaptive<BlockPolicy, Slot>;

fn show(name: &str, s: &Stats) {
    println!(
        "    {name:<16} {:>8} acquisitions, {:>7} contended, {:>7} won spinning, {:>6} parks, \
         hold ~{:>6.1?}, now {:?}",
        s.total.acquisitions,
        s.total.contended,
        s.total.spin_successes,
        s.total.parks,
        s.hold_time,
        s.config.wait_policy(),
    );
}

#[derive(Parser)]
#[command(about = "The paper's TSP branch and bound on the adaptive lock")]
struct Args {
    /// Cities in the random problem.
    #[arg(default_value_t = 13, value_parser = two_or_more)]
    cities: usize,
    /// Searcher threads.
    #[arg(default_value_t = tsp::SEARCHERS, value_parser = positive)]
    searchers: usize,
}

fn at_least(s: &str, least: usize) -> Result<usize, String> {
    match s.parse() {
        Ok(n) if n >= least => Ok(n),
        Ok(_) => Err(format!("must be at least {least}")),
        Err(e) => Err(format!("{e}")),
    }
}

fn positive(s: &str) -> Result<usize, String> {
    at_least(s, 1)
}

fn two_or_more(s: &str) -> Result<usize, String> {
    at_least(s, 2)
}

fn main() {
    let Args { cities, searchers } = Args::parse();
    let p = Arc::new(Problem::random(cities, 0x5eed_7591));

    let start = Instant::now();
    let (best, tour, expanded) = tsp::sequential(&p);
    println!(
        "{cities} cities: shortest tour {best}, {tour:?} (sequential: {expanded} nodes in {:.1?})",
        start.elapsed()
    );

    for variant in Variant::ALL {
        let (cost, path, blocking, _) = tsp::solve::<Blocking>(&p, variant, searchers);
        assert_eq!(cost, best);
        let (cost, _, adaptive, shared) = tsp::solve::<Learned>(&p, variant, searchers);
        assert_eq!(cost, best);
        println!(
            "\n{} with {searchers} searchers: tour {cost} {path:?}\n  blocking locks {blocking:.1?}, \
             adaptive locks {adaptive:.1?} ({:+.1}%)",
            variant.name(),
            (blocking.as_secs_f64() - adaptive.as_secs_f64()) / blocking.as_secs_f64() * 100.0
        );
        println!("  the adaptive locks' monitors:");
        show("qlock[0]", &shared.queues[0].0.stats());
        show("glob-act-lock", &shared.active.0.stats());
        show("glob-low-lock[0]", &shared.low[0].0.stats());
        show("globlock", &shared.global.0.stats());
    }
}
