//! `cargo xtask`: the workspace's commands.
//!
//! * `test`: fmt, clippy (also under `--cfg loom`), every test (unit, integration, doc, proptest), every
//!   loom model and the docs; ends with one line `N passed, N failed`.
//! * `loom [-p CRATE] [--preemptions N]`: the loom models (`tests/loom_*.rs`),
//!   built in one cargo call and run as many binaries at a time as there are
//!   CPUs.
//! * `soak [-p CRATE] [--minutes N]`: the `#[ignore]` soak tests, release.
//! * `asan [-p CRATE]`: tests and soak tests under AddressSanitizer.
//! * `fuzz TARGET [--seconds N]`: one cargo-fuzz target.
//! * `report [--quick|--full] [--only PREFIX] [--list] [--out DIR]`: the
//!   benchmark report (see `sync-bench`); `--list` prints every workload id
//!   with its one-line description.
//! * `report --compare REV [--rounds N] [--recheck N] [...]`: this tree's
//!   report against commit REV's, the two builds in alternation, row by row
//!   (`target/compare/SHA/compare.md`, SHA: REV's first 10 hex digits).

mod cargo;
mod compare;
mod loom;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cargo::{Cargo, Tally};
use crate::loom::loom;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "The sync family's workspace commands")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Everything CI checks: fmt, clippy, tests, loom models, docs, a 32-bit build.
    Test {
        /// Loom's preemption bound for models that set none of their own.
        #[arg(long, default_value_t = 2)]
        preemptions: usize,
    },
    /// Run the loom models (tests/loom_*.rs) of one crate or of all.
    Loom {
        /// The package whose models to run (all crates under crates/ if absent).
        #[arg(short = 'p', long = "package")]
        package: Option<String>,
        /// Loom's preemption bound for models that set none of their own.
        #[arg(long, default_value_t = 2)]
        preemptions: usize,
    },
    /// Run the `#[ignore]` soak tests in release mode.
    Soak {
        /// The package whose soak tests to run (all crates if absent).
        #[arg(short = 'p', long = "package")]
        package: Option<String>,
        /// Keep each soak test going for at least this many minutes.
        #[arg(long, default_value_t = 0.0)]
        minutes: f64,
    },
    /// Run the tests and the soak tests under AddressSanitizer.
    Asan {
        /// The package to test (all crates if absent).
        #[arg(short = 'p', long = "package")]
        package: Option<String>,
    },
    /// Run one cargo-fuzz target (installs cargo-fuzz when it is missing).
    Fuzz {
        /// The target's name, as in fuzz/fuzz_targets/NAME.rs.
        target: String,
        /// How long to fuzz.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Run the papers' experiments against the peers and write the report.
    ///
    /// The arguments go to sync-bench: [--quick|--full] [--only PREFIX]
    /// [--list] [--out DIR] (`cargo xtask report --help-bench` lists them).
    /// With `--compare REV [--rounds N] [--recheck N]`, REV's sync-bench is
    /// built too and the two run in alternation; the comparison is written to
    /// `target/compare/SHA/compare.md` (or under --out).
    Report {
        /// Arguments for sync-bench.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cargo = Cargo::new();
    let tally = match cli.command {
        Command::Test { preemptions } => test(&cargo, preemptions),
        Command::Loom {
            package,
            preemptions,
        } => {
            let mut t = Tally::default();
            loom(&cargo, package.as_deref(), preemptions, &mut t);
            t
        }
        Command::Soak { package, minutes } => soak(&cargo, package.as_deref(), minutes),
        Command::Asan { package } => asan(&cargo, package.as_deref()),
        Command::Fuzz { target, seconds } => fuzz(&cargo, &target, seconds),
        Command::Report { args } => return report(&cargo, args),
    };
    tally.finish()
}

/// The 32-bit target `cargo xtask test` checks the libraries on, when it
/// is installed.
const TARGET_32: &str = "i686-unknown-linux-gnu";

fn test(cargo: &Cargo, preemptions: usize) -> Tally {
    let mut t = Tally::default();
    t.check("fmt", cargo.cmd(["fmt", "--all", "--", "--check"]));
    let fuzz_sources = cargo.fuzz_sources();
    if !fuzz_sources.is_empty() {
        t.check(
            "fmt (fuzz)",
            cargo
                .tool("rustfmt", ["--check", "--edition", "2024"])
                .args(&fuzz_sources),
        );
    }
    t.check(
        "clippy",
        cargo.cmd([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    );
    // The crates' `cfg(loom)` code (their loom shims and models) is only
    // compiled by the loom step, which does not lint it: lint it here.
    let mut loom_clippy = vec!["clippy".to_owned()];
    for (pkg, _) in cargo.test_targets(None, "loom_") {
        loom_clippy.extend(["-p".to_owned(), pkg]);
    }
    loom_clippy.extend(["--all-targets", "--", "-D", "warnings"].map(String::from));
    t.check(
        "clippy (loom)",
        cargo
            .cmd(&loom_clippy)
            .env("RUSTFLAGS", cargo.rustflags("--cfg loom"))
            .env("CARGO_TARGET_DIR", cargo.root().join("target/loom-clippy")),
    );
    t.tests(
        "test",
        cargo
            .cmd(["test", "--workspace", "--no-fail-fast"])
            .env("PROPTEST_CASES", "64"),
    );
    loom(cargo, None, preemptions, &mut t);
    // The report's command line, in the test build: `cargo xtask report`
    // is the README's main command, and the test suite does not run it
    // otherwise (it once broke when sync-bench gained a second binary).
    t.check(
        "report --list",
        cargo.cmd([
            "run",
            "--quiet",
            "-p",
            "sync-bench",
            "--bin",
            "sync-bench",
            "--",
            "--list",
        ]),
    );
    t.check(
        "doc",
        cargo
            .cmd(["doc", "--workspace", "--no-deps"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    );
    // A 32-bit target compiles other paths (`c_long` is 32 bits there, and
    // sync-core's futex parker is 64-bit only): the libraries must build.
    if cargo.has_target(TARGET_32) {
        t.check(
            "check (32-bit)",
            cargo
                .cmd(["check", "--workspace", "--lib", "--target", TARGET_32])
                .env("CARGO_TARGET_DIR", cargo.root().join("target/check-32")),
        );
    } else {
        eprintln!("skipped: check (32-bit); `rustup target add {TARGET_32}` runs it");
    }
    t.check(
        "fuzz targets build",
        cargo
            .cmd(["check", "--manifest-path", "fuzz/Cargo.toml", "--bins"])
            .env("CARGO_TARGET_DIR", cargo.root().join("target/fuzz-check")),
    );
    t
}

fn soak(cargo: &Cargo, package: Option<&str>, minutes: f64) -> Tally {
    let mut t = Tally::default();
    for pkg in cargo.crates(package) {
        t.tests(
            &format!("soak {pkg}"),
            cargo
                .cmd([
                    "test",
                    "--release",
                    "-p",
                    &pkg,
                    "--tests",
                    "--",
                    "--ignored",
                ])
                .env("SYNC_SOAK_MINUTES", minutes.to_string()),
        );
    }
    t
}

fn asan(cargo: &Cargo, package: Option<&str>) -> Tally {
    let mut t = Tally::default();
    let target = cargo.host_triple();
    for pkg in cargo.crates(package) {
        t.tests(
            &format!("asan {pkg}"),
            cargo
                .cmd([
                    "test",
                    "--release",
                    "-p",
                    &pkg,
                    "--target",
                    &target,
                    "--lib",
                    "--tests",
                    "--",
                    "--include-ignored",
                ])
                .env("RUSTC_BOOTSTRAP", "1")
                .env("RUSTFLAGS", cargo.rustflags("-Zsanitizer=address"))
                .env("ASAN_OPTIONS", "detect_leaks=1")
                .env("CARGO_TARGET_DIR", cargo.root().join("target/asan")),
        );
    }
    t
}

fn fuzz(cargo: &Cargo, target: &str, seconds: u64) -> Tally {
    let mut t = Tally::default();
    if !cargo.cmd(["fuzz", "--version"]).quiet_ok() {
        t.check(
            "install cargo-fuzz",
            cargo.cmd(["install", "cargo-fuzz", "--locked"]),
        );
    }
    t.check(
        &format!("fuzz {target}"),
        cargo
            .cmd([
                "fuzz",
                "run",
                target,
                "--",
                &format!("-max_total_time={seconds}"),
            ])
            .current_dir(cargo.root().join("fuzz"))
            .env("RUSTC_BOOTSTRAP", "1"),
    );
    t
}

/// Runs sync-bench from the caller's directory, so a relative `--out` is
/// where the caller means (the default is target/report, under
/// `CARGO_TARGET_DIR` if set).
fn report(cargo: &Cargo, mut args: Vec<String>) -> ExitCode {
    if let Some(help) = args.iter_mut().find(|a| *a == "--help-bench") {
        *help = "--help".into();
    }
    if let Some(at) = args.iter().position(|a| a == "--compare") {
        let Some(rev) = args.get(at + 1).cloned() else {
            eprintln!("--compare needs a revision (a commit, tag or branch)");
            return ExitCode::FAILURE;
        };
        args.drain(at..=at + 1);
        let (old, dir) = match compare::build_rev(cargo, &rev) {
            Ok(built) => built,
            Err(e) => {
                eprintln!("could not build {rev}'s sync-bench: {e}");
                return ExitCode::FAILURE;
            }
        };
        if !args.iter().any(|a| a == "--out") {
            args.extend(["--out".into(), dir.to_string_lossy().into_owned()]);
        }
        args.extend(["--ab".into(), old.to_string_lossy().into_owned()]);
    }
    let manifest = cargo.root().join("Cargo.toml");
    let manifest = manifest.to_string_lossy();
    let mut cargo_args = vec![
        "run",
        "--release",
        "--quiet",
        "--manifest-path",
        &*manifest,
        "-p",
        "sync-bench",
        "--bin",
        "sync-bench",
        "--",
    ];
    cargo_args.extend(args.iter().map(String::as_str));
    let cwd = std::env::current_dir().expect("the current directory");
    cargo.cmd(&cargo_args).current_dir(cwd).exit_code()
}
