//! `loom`: every loom model (`tests/loom_*.rs`), built in one cargo call
//! and run as many binaries at a time as there are CPUs.
//!
//! A loom binary runs its models on libtest's threads, and one model often
//! takes most of its binary's time (lockfree-sync's semaphore, ast-mutex):
//! run one binary after another, as `cargo test` does, and a core idles
//! while that model finishes. Here a second binary runs beside it. Each
//! binary's output is printed, whole, once it ends.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use serde_json::Value;

use crate::cargo::{Cargo, Counts, Tally, parse_test_result};

/// One built loom binary: its package, its name, where it is, and the
/// directory `cargo test` would run it in (its package's).
struct Binary {
    package: String,
    name: String,
    executable: PathBuf,
    dir: PathBuf,
}

/// Builds and runs the loom models of `package` (every crate's if `None`),
/// one step per package in `t`.
pub fn loom(cargo: &Cargo, package: Option<&str>, preemptions: usize, t: &mut Tally) {
    let targets = cargo.test_targets(package, "loom_");
    if targets.is_empty() {
        return;
    }
    let Some(binaries) = build(cargo, &targets) else {
        t.record_tests("loom (build)", false, Counts::default());
        return;
    };
    let next = AtomicUsize::new(0);
    let results = Mutex::new(BTreeMap::<String, (bool, Counts)>::new());
    let workers = thread::available_parallelism().map_or(2, |n| n.get());
    thread::scope(|s| {
        for _ in 0..workers.min(binaries.len()) {
            s.spawn(|| {
                while let Some(b) = binaries.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (ok, counts) = run(b, preemptions);
                    let mut results = results.lock().unwrap_or_else(|e| e.into_inner());
                    let entry = results
                        .entry(b.package.clone())
                        .or_insert((true, Counts::default()));
                    entry.0 &= ok;
                    entry.1.add(counts);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    for (pkg, _) in &targets {
        let (ok, counts) = results
            .get(pkg)
            .copied()
            .unwrap_or((false, Counts::default()));
        t.record_tests(&format!("loom {pkg}"), ok, counts);
    }
}

/// `cargo test --release --no-run` of every loom target, under `--cfg loom`:
/// the binaries built, or `None` if the build failed.
fn build(cargo: &Cargo, targets: &[(String, Vec<String>)]) -> Option<Vec<Binary>> {
    let mut args: Vec<String> = [
        "test",
        "--release",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    .map(String::from)
    .into();
    for (pkg, models) in targets {
        args.extend(["-p".to_owned(), pkg.clone()]);
        for m in models {
            args.extend(["--test".to_owned(), m.clone()]);
        }
    }
    let mut cmd = cargo
        .cmd(&args)
        .env("RUSTFLAGS", cargo.rustflags("--cfg loom"))
        .env("CARGO_TARGET_DIR", cargo.root().join("target/loom"))
        .into_command();
    eprintln!("\n$ {}", crate::cargo::describe(&cmd));
    let mut child = cmd.stdout(Stdio::piped()).spawn().ok()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut binaries = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(exe), Some(name), Some(manifest)) = (
            msg["executable"].as_str(),
            msg["target"]["name"].as_str(),
            msg["manifest_path"].as_str(),
        ) else {
            continue;
        };
        // Test names are unique across the workspace's loom models.
        let Some((pkg, _)) = targets.iter().find(|(_, m)| m.iter().any(|m| m == name)) else {
            continue;
        };
        binaries.push(Binary {
            package: pkg.clone(),
            name: name.to_owned(),
            executable: exe.into(),
            dir: PathBuf::from(manifest).parent()?.to_path_buf(),
        });
    }
    // In the order of the workspace's crates and their models, not of the
    // build's: the same order every run.
    let order = |b: &Binary| {
        targets
            .iter()
            .flat_map(|(_, m)| m)
            .position(|m| *m == b.name)
    };
    binaries.sort_by_key(order);
    let built = child.wait().is_ok_and(|s| s.success());
    let expected: usize = targets.iter().map(|(_, m)| m.len()).sum();
    (built && binaries.len() == expected).then_some(binaries)
}

/// Runs one loom binary, then prints its output whole: whether it passed,
/// and the counts libtest printed.
fn run(b: &Binary, preemptions: usize) -> (bool, Counts) {
    let out = Command::new(&b.executable)
        .current_dir(&b.dir)
        .env("LOOM_MAX_PREEMPTIONS", preemptions.to_string())
        .output();
    let mut lock = std::io::stdout().lock();
    let _ = writeln!(
        lock,
        "\n$ LOOM_MAX_PREEMPTIONS={preemptions} {} ({}, {})",
        b.executable.display(),
        b.package,
        b.name
    );
    let Ok(out) = out else {
        let _ = writeln!(lock, "could not start");
        return (false, Counts::default());
    };
    let _ = lock.write_all(&out.stdout);
    let _ = lock.write_all(&out.stderr);
    let mut counts = Counts::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        counts.add(parse_test_result(line));
    }
    (out.status.success(), counts)
}
