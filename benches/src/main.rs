//! `sync-bench`: runs the registered workloads and writes the report.
//! Usually started by `cargo xtask report`.

use std::path::{Path, PathBuf};
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
    /// Print every workload id (those under --only PREFIX) with its
    /// one-line description, and run nothing.
    #[arg(long)]
    list: bool,
    /// Where to write results.json, report.md and the charts [default:
    /// target/report, under $CARGO_TARGET_DIR if set].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// The default output directory: `report/` in the target directory that
/// cargo uses (`CARGO_TARGET_DIR`, else the workspace's `target/`).
fn default_out() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("report")
}

/// `path` as the user would type it: relative to the current directory
/// when it is below it, without `..` detours.
fn display_path(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| d.canonicalize().ok());
    match cwd.as_deref().and_then(|cwd| path.strip_prefix(cwd).ok()) {
        Some(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let out = args.out.clone().unwrap_or_else(default_out);
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
    if args.list {
        let width = selected.iter().map(|w| w.meta.id.len()).max().unwrap_or(0);
        for meta in selected
            .iter()
            .flat_map(|w| std::iter::once(w.meta.clone()).chain(w.meta.companion()))
        {
            println!("{:width$}  {}", meta.id, meta.summary());
        }
        return ExitCode::SUCCESS;
    }

    let runs: usize = selected
        .iter()
        .map(|w| w.impls.len() * (mode.warmup() + mode.samples()))
        .sum();
    let bar = ProgressBar::new(runs as u64).with_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs, ~{eta} left  {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let mut results = Results {
        schema: SCHEMA,
        mode,
        machine: Machine::detect(),
        results: Vec::new(),
    };
    let mut metas = Vec::with_capacity(selected.len());
    let shown = display_path(&out);
    for w in &mut selected {
        let id = w.meta.id.clone();
        results
            .results
            .extend(measure(w, mode.warmup(), mode.samples(), |imp| {
                bar.set_message(format!("{id} {imp}"));
                bar.inc(1);
            }));
        metas.push(w.meta.clone());
        metas.extend(w.meta.companion());
        // Written after every workload, so an interrupted run keeps what
        // it measured.
        if let Err(e) = report::write(&out, &results, &metas) {
            bar.abandon();
            eprintln!("could not write the report to {shown}: {e}");
            return ExitCode::FAILURE;
        }
    }
    bar.finish_and_clear();

    match report::write(&out, &results, &metas) {
        Ok(md) => {
            println!("{md}");
            println!(
                "Wrote {0}/results.json, {0}/report.md and the charts {0}/*.svg",
                display_path(&out)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("could not write the report to {shown}: {e}");
            ExitCode::FAILURE
        }
    }
}
