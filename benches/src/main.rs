//! `sync-bench`: runs the registered workloads and writes the report.
//! Usually started by `cargo xtask report`.

use std::collections::BTreeMap;
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
    /// With --ab: afterwards, run each workload that has a flagged row
    /// alone, N more alternated rounds each (in DIR/recheck/), and add to
    /// compare.md whether each flag stands. A whole report's run can leave a
    /// workload in a mode (a convoy, a saturation verdict) that a run of it
    /// alone does not inherit.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "ab")]
    recheck: usize,
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
    let mode: &[String] = if args.full { &["--full".into()] } else { &[] };
    let mut pass = mode.to_vec();
    if let Some(prefix) = &args.only {
        pass.extend(["--only".into(), prefix.clone()]);
    }
    let rounds = args.rounds.max(1);
    let Some((news, olds)) = alternate(&me, old, &pass, out, rounds, args.resume) else {
        return ExitCode::FAILURE;
    };
    let deltas = compare::deltas(&news, &olds);
    let mut md = compare::markdown(&deltas, &compare::changed(&news, &olds), rounds, 0.05);
    if args.recheck > 0 {
        let flagged = compare::flagged(&deltas, 0.05);
        let mut alone = Vec::new();
        for (parent, ids) in by_workload(&flagged, args.full) {
            let mut pass = mode.to_vec();
            pass.extend(["--only".into(), parent.clone()]);
            let dir = out.join("recheck").join(parent.replace('/', "_"));
            let Some((n, o)) = alternate(&me, old, &pass, &dir, args.recheck, args.resume) else {
                return ExitCode::FAILURE;
            };
            // The prefix may select other workloads too (`am/or/2` and
            // `am/or/20`): keep the rechecked ones only.
            alone.extend(
                compare::deltas(&n, &o)
                    .into_iter()
                    .filter(|d| ids.contains(&d.workload)),
            );
        }
        md.push_str(&compare::recheck_markdown(
            &flagged,
            &alone,
            args.recheck,
            0.05,
        ));
    }
    let path = out.join("compare.md");
    if let Err(e) = std::fs::write(&path, &md) {
        eprintln!("could not write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("{md}");
    println!("Wrote {}", display_path(&path));
    ExitCode::SUCCESS
}

/// The workloads of the `flagged` rows, each by the id to run it alone with
/// (`--only`): its own, or for a companion row (a `-p99`) its parent's,
/// with the ids of the rows that run measures.
fn by_workload(flagged: &[&compare::Delta], full: bool) -> BTreeMap<String, Vec<String>> {
    let mode = if full { Mode::Full } else { Mode::Quick };
    let metas: Vec<_> = workloads::all(mode).into_iter().map(|w| w.meta).collect();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in flagged {
        let parent = metas
            .iter()
            .find(|m| {
                m.companion
                    .as_ref()
                    .is_some_and(|(id, _)| *id == d.workload)
            })
            .map_or_else(|| d.workload.clone(), |m| m.id.clone());
        let ids = groups.entry(parent.clone()).or_default();
        for id in [parent, d.workload.clone()] {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    groups
}

/// Runs this build (`me`) and `old` in alternation with the arguments
/// `pass`, `rounds` times each, the reports in `out/{new,old}-N`, and
/// returns their results (`None` after saying what failed).
fn alternate(
    me: &Path,
    old: &Path,
    pass: &[String],
    out: &Path,
    rounds: usize,
    resume: bool,
) -> Option<(Vec<Results>, Vec<Results>)> {
    let (mut news, mut olds) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        // The build that goes first swaps every round, so that neither
        // always runs on a machine the other has just warmed or heated.
        let order = if round % 2 == 1 {
            [("new", me), ("old", old)]
        } else {
            [("old", old), ("new", me)]
        };
        for (side, bin) in order {
            let dir = out.join(format!("{side}-{round}"));
            // Written once the round's run ended well: what --resume keeps.
            let complete = dir.join(".complete");
            if resume && complete.is_file() {
                eprintln!("round {round}/{rounds}: {side}, kept from an earlier run");
            } else {
                eprintln!(
                    "round {round}/{rounds}: {side} ({} {})",
                    bin.display(),
                    pass.join(" ")
                );
                let status = std::process::Command::new(bin)
                    .args(pass)
                    .arg("--out")
                    .arg(&dir)
                    .stdout(std::process::Stdio::null())
                    .status();
                if !status.is_ok_and(|s| s.success()) {
                    eprintln!("{} failed in round {round}", bin.display());
                    return None;
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
                    return None;
                }
            };
            if side == "new" {
                news.push(results);
            } else {
                olds.push(results);
            }
        }
    }
    Some((news, olds))
}
