//! `sync-bench`: runs the registered workloads and writes the report.
//! Usually started by `cargo xtask report`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use sync_bench::compare;
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
    /// Compare this build with another build of sync-bench: run the two in
    /// alternation, --rounds times each, and write DIR/compare.md (the
    /// rounds' reports go to DIR/new-N and DIR/old-N). `cargo xtask report
    /// --compare REV` builds REV and passes it here.
    #[arg(long, value_name = "OLD_BINARY", conflicts_with = "list")]
    ab: Option<PathBuf>,
    /// How many rounds each build runs with --ab.
    #[arg(long, default_value_t = 3, requires = "ab")]
    rounds: usize,
    /// With --ab: keep the rounds a previous run of the same comparison
    /// finished (DIR/new-N, DIR/old-N) and run only the missing ones.
    #[arg(long, requires = "ab")]
    resume: bool,
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
    if let Some(old) = &args.ab {
        return ab(&args, old, &out);
    }
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

/// `--ab OLD_BINARY`: this build and `old` in alternation, then
/// `compare.md`.
fn ab(args: &Args, old: &Path, out: &Path) -> ExitCode {
    let me = std::env::current_exe().expect("the path of this program");
    let mut pass: Vec<String> = Vec::new();
    if args.full {
        pass.push("--full".into());
    }
    if let Some(prefix) = &args.only {
        pass.extend(["--only".into(), prefix.clone()]);
    }
    let rounds = args.rounds.max(1);
    let (mut news, mut olds) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        // The build that goes first swaps every round, so that neither
        // always runs on a machine the other has just warmed or heated.
        let order = if round % 2 == 1 {
            [("new", me.as_path()), ("old", old)]
        } else {
            [("old", old), ("new", me.as_path())]
        };
        for (side, bin) in order {
            let dir = out.join(format!("{side}-{round}"));
            // Written once the round's run ended well: what --resume keeps.
            let complete = dir.join(".complete");
            if args.resume && complete.is_file() {
                eprintln!("round {round}/{rounds}: {side}, kept from an earlier run");
            } else {
                eprintln!("round {round}/{rounds}: {side} ({})", bin.display());
                let status = std::process::Command::new(bin)
                    .args(&pass)
                    .arg("--out")
                    .arg(&dir)
                    .stdout(std::process::Stdio::null())
                    .status();
                if !status.is_ok_and(|s| s.success()) {
                    eprintln!("{} failed in round {round}", bin.display());
                    return ExitCode::FAILURE;
                }
                if let Err(e) = std::fs::write(&complete, "") {
                    eprintln!("could not write {}: {e}", complete.display());
                }
            }
            let results: Results = match std::fs::read_to_string(dir.join("results.json"))
                .map_err(|e| e.to_string())
                .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("could not read {}/results.json: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
            };
            if side == "new" {
                news.push(results);
            } else {
                olds.push(results);
            }
        }
    }
    let md = compare::markdown(
        &compare::deltas(&news, &olds),
        &compare::changed(&news, &olds),
        rounds,
        0.05,
    );
    let path = out.join("compare.md");
    if let Err(e) = std::fs::write(&path, &md) {
        eprintln!("could not write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("{md}");
    println!("Wrote {}", display_path(&path));
    ExitCode::SUCCESS
}
