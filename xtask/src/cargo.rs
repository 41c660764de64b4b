//! Running cargo and counting what it reports.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde_json::Value;

/// The workspace, and the cargo that builds it.
pub struct Cargo {
    root: PathBuf,
    program: String,
}

impl Cargo {
    pub fn new() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask lives one level below the workspace root")
            .to_path_buf();
        let program = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        Self { root, program }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `cargo ARGS`, run from the workspace root.
    pub fn cmd<I, S>(&self, args: I) -> Step
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.tool(&self.program, args)
    }

    /// Another program, run from the workspace root.
    pub fn tool<I, S>(&self, program: impl AsRef<OsStr>, args: I) -> Step
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.root);
        Step(cmd)
    }

    /// RUSTFLAGS with `extra` appended to whatever the caller set.
    pub fn rustflags(&self, extra: &str) -> String {
        match std::env::var("RUSTFLAGS") {
            Ok(flags) if !flags.trim().is_empty() => format!("{flags} {extra}"),
            _ => extra.to_owned(),
        }
    }

    pub fn host_triple(&self) -> String {
        let out = Command::new("rustc")
            .arg("-vV")
            .output()
            .expect("rustc -vV");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .expect("rustc -vV names the host")
            .to_owned()
    }

    /// Whether the standard library for `target` is installed (`rustup
    /// target add`), so that `cargo check --target` can build for it.
    pub fn has_target(&self, target: &str) -> bool {
        Command::new("rustc")
            .args(["--print", "target-libdir", "--target", target])
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
            .and_then(|dir| std::fs::read_dir(dir).ok())
            .is_some_and(|mut entries| entries.next().is_some())
    }

    fn metadata(&self) -> Value {
        let out = Command::new(&self.program)
            .args(["metadata", "--format-version", "1", "--no-deps"])
            .current_dir(&self.root)
            .output()
            .expect("cargo metadata");
        assert!(out.status.success(), "cargo metadata failed");
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
    }

    /// The library crates (under `crates/`), or `only` if it names one.
    ///
    /// # Panics
    ///
    /// If `only` names no crate under `crates/`.
    pub fn crates(&self, only: Option<&str>) -> Vec<String> {
        let meta = self.metadata();
        let crates_dir = self.root.join("crates");
        let all: Vec<String> = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                p["manifest_path"]
                    .as_str()
                    .is_some_and(|m| Path::new(m).starts_with(&crates_dir))
            })
            .filter_map(|p| p["name"].as_str().map(String::from))
            .collect();
        match only {
            None => all,
            Some(name) if all.iter().any(|c| c == name) => vec![name.to_owned()],
            Some(name) => panic!("no crate named `{name}` under crates/ (there are: {all:?})"),
        }
    }

    /// For each crate, its integration tests whose names start with `prefix`.
    pub fn test_targets(&self, only: Option<&str>, prefix: &str) -> Vec<(String, Vec<String>)> {
        let meta = self.metadata();
        let crates = self.crates(only);
        meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| {
                let name = p["name"].as_str()?;
                if !crates.iter().any(|c| c == name) {
                    return None;
                }
                let tests: Vec<String> = p["targets"]
                    .as_array()?
                    .iter()
                    .filter(|t| {
                        t["kind"]
                            .as_array()
                            .is_some_and(|k| k.iter().any(|k| k == "test"))
                    })
                    .filter_map(|t| t["name"].as_str())
                    .filter(|n| n.starts_with(prefix))
                    .map(String::from)
                    .collect();
                (!tests.is_empty()).then(|| (name.to_owned(), tests))
            })
            .collect()
    }

    /// The fuzz targets' sources, for rustfmt.
    pub fn fuzz_sources(&self) -> Vec<PathBuf> {
        let dir = self.root.join("fuzz/fuzz_targets");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
        files.sort();
        files
    }
}

/// One command of a run.
pub struct Step(Command);

impl Step {
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.0.env(key, value);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.0.args(args);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.0.current_dir(dir);
        self
    }

    /// The command itself, for a caller that reads its output another way.
    pub fn into_command(self) -> Command {
        self.0
    }

    /// Runs with inherited output; whether it succeeded.
    pub fn ok(mut self) -> bool {
        eprintln!("$ {}", describe(&self.0));
        self.0.status().is_ok_and(|s| s.success())
    }

    /// Runs with inherited output; its exit status as ours.
    pub fn exit_code(self) -> ExitCode {
        if self.ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// Runs silently; whether it succeeded.
    pub fn quiet_ok(mut self) -> bool {
        self.0
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Runs, echoing its stdout, and returns the exit status's success and
    /// the `test result:` counts it printed.
    fn run(mut self) -> (bool, Counts) {
        eprintln!("\n$ {}", describe(&self.0));
        let mut child = match self.0.stdout(Stdio::piped()).spawn() {
            Ok(child) => child,
            Err(e) => {
                eprintln!("could not start: {e}");
                return (false, Counts::default());
            }
        };
        let mut counts = Counts::default();
        let stdout = child.stdout.take().expect("piped stdout");
        let mut out = std::io::stdout().lock();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            counts.add(parse_test_result(&line));
            let _ = writeln!(out, "{line}");
        }
        drop(out);
        let ok = child.wait().is_ok_and(|s| s.success());
        (ok, counts)
    }
}

pub fn describe(cmd: &Command) -> String {
    let envs: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into()).collect();
    format!(
        "{}{}{} {}",
        envs.join(" "),
        if envs.is_empty() { "" } else { " " },
        cmd.get_program().to_string_lossy(),
        args.join(" ")
    )
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
}

impl Counts {
    pub fn add(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}

/// Reads libtest's `test result: ok. 6 passed; 0 failed; ...` line.
pub fn parse_test_result(line: &str) -> Counts {
    let Some(rest) = line.trim().strip_prefix("test result: ") else {
        return Counts::default();
    };
    let mut counts = Counts::default();
    for part in rest.split(';') {
        let mut words = part.split_whitespace().rev();
        let (Some(what), Some(n)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse() else { continue };
        match what {
            "passed" => counts.passed = n,
            "failed" => counts.failed = n,
            _ => {}
        }
    }
    counts
}

/// What a run counted: tests from libtest's lines, and one per check.
#[derive(Default)]
pub struct Tally {
    total: Counts,
    steps: Vec<(String, bool, Counts)>,
}

impl Tally {
    /// A step that passes or fails as a whole (fmt, clippy, doc, a build).
    pub fn check(&mut self, name: &str, step: Step) {
        let (ok, _) = step.run();
        let counts = Counts {
            passed: ok as u64,
            failed: !ok as u64,
        };
        self.record(name, ok, counts);
    }

    /// A step that runs tests: counts what libtest reported, and one failure
    /// more if the step failed without a failing test (a build error, or a
    /// test binary that aborted).
    pub fn tests(&mut self, name: &str, step: Step) {
        let (ok, counts) = step.run();
        self.record_tests(name, ok, counts);
    }

    /// A step that ran tests another way (see [`tests`](Self::tests)).
    pub fn record_tests(&mut self, name: &str, ok: bool, mut counts: Counts) {
        if !ok && counts.failed == 0 {
            counts.failed = 1;
        }
        self.record(name, ok, counts);
    }

    fn record(&mut self, name: &str, ok: bool, counts: Counts) {
        self.total.add(counts);
        self.steps.push((name.to_owned(), ok, counts));
    }

    /// Prints the summary and the closing `N passed, N failed` line.
    pub fn finish(self) -> ExitCode {
        eprintln!("\nSummary:");
        for (name, ok, c) in &self.steps {
            let verdict = if *ok { "ok" } else { "FAILED" };
            eprintln!(
                "  {verdict:6} {name} ({} passed, {} failed)",
                c.passed, c.failed
            );
        }
        println!("{} passed, {} failed", self.total.passed, self.total.failed);
        if self.total.failed == 0 && self.steps.iter().all(|s| s.1) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libtest_summaries() {
        assert_eq!(
            parse_test_result(
                "test result: ok. 6 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s"
            ),
            Counts {
                passed: 6,
                failed: 0
            }
        );
        assert_eq!(
            parse_test_result("test result: FAILED. 3 passed; 2 failed; 0 ignored"),
            Counts {
                passed: 3,
                failed: 2
            }
        );
        assert_eq!(parse_test_result("test foo ... ok"), Counts::default());
        assert_eq!(parse_test_result("1 passed, 0 failed"), Counts::default());
    }

    #[test]
    fn a_failed_step_without_failing_tests_counts_as_one_failure() {
        let mut t = Tally::default();
        t.tests("false", Step(Command::new("false")));
        t.tests("true", Step(Command::new("true")));
        assert_eq!(
            t.total,
            Counts {
                passed: 0,
                failed: 1
            }
        );
        assert!(!t.steps[0].1);
        assert!(t.steps[1].1);
    }
}
