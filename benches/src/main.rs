//! `sync-bench`: runs the registered workloads and writes the report.
//! Usually started by `cargo xtask report`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use sync_bench::harness::{Mode, measure};
use sync_bench::report::{self, Machine, Results, SCHEMA};
use sync_bench::workloads;

#[derive(Parser)]
#[command(about = "The papers' experiments against the peers")]
struct Args {
    /// Small sizes, a few minutes in all (the default).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The papers' sizes.
    #[arg(long)]
    full: bool,
    /// Only the workloads whose id starts with PREFIX.
    #[arg(long, value_name = "PREFIX")]
    only: Option<String>,
    /// Where to write results.json, report.md and the charts [default:
    /// the workspace's target/report].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let out = args.out.clone().unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/report")
    });
    let mode = if args.full { Mode::Full } else { Mode::Quick };
    let mut selected = workloads::all(mode);
    let known: Vec<String> = selected.iter().map(|w| w.meta.id.clone()).collect();
    if let Some(prefix) = &args.only {
        selected.retain(|w| w.meta.id.starts_with(prefix.as_str()));
        if selected.is_empty() {
            eprintln!("no workload id starts with {prefix:?}; the workloads are:");
            for id in known {
                eprintln!("  {id}");
            }
            return ExitCode::FAILURE;
        }
    }

    let runs: usize = selected
        .iter()
        .map(|w| w.impls.len() * (mode.warmup() + mode.samples()))
        .sum();
    let bar = ProgressBar::new(runs as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut records = Vec::new();
    for w in &mut selected {
        let id = w.meta.id.clone();
        records.extend(measure(w, mode.warmup(), mode.samples(), |imp| {
            bar.set_message(format!("{id} {imp}"));
            bar.inc(1);
        }));
    }
    bar.finish_and_clear();

    let results = Results {
        schema: SCHEMA,
        mode,
        machine: Machine::detect(),
        results: records,
    };
    let metas: Vec<_> = selected.into_iter().map(|w| w.meta).collect();
    match report::write(&out, &results, &metas) {
        Ok(md) => {
            println!("{md}");
            println!("Wrote {}/{{results.json,report.md,*.svg}}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("could not write the report to {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}
