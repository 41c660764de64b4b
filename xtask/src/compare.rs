//! `report --compare REV`: another commit's sync-bench, built beside ours.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cargo::Cargo;

/// The target directory cargo uses for this workspace.
fn target_dir(cargo: &Cargo) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| cargo.root().join("target"))
}

/// Builds commit `rev`'s sync-bench (once per commit: a second call reuses
/// it). Returns the binary and the folder for the comparison's reports,
/// `target/compare/SHA`. The commit's tree is exported with `git archive`
/// and built in its own target directory (shared by every compared commit,
/// so the dependencies build once), leaving this tree's build alone.
pub fn build_rev(cargo: &Cargo, rev: &str) -> Result<(PathBuf, PathBuf), String> {
    let out = Command::new("git")
        .args(["rev-parse", "--verify", &format!("{rev}^{{commit}}")])
        .current_dir(cargo.root())
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!("git does not know the commit {rev:?}"));
    }
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let short = &sha[..sha.len().min(10)];
    let base = target_dir(cargo).join("compare");
    let dir = base.join(short);
    let bin = dir.join("sync-bench");
    if bin.is_file() {
        return Ok((bin, dir));
    }
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    export(cargo.root(), &sha, &src)?;
    eprintln!("building {rev} ({short})'s sync-bench in {}", src.display());
    let target = base.join("target");
    let built = cargo
        .cmd([
            "build",
            "--release",
            "--quiet",
            "-p",
            "sync-bench",
            "--bin",
            "sync-bench",
        ])
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &target)
        .ok();
    if !built {
        return Err("cargo build failed".into());
    }
    std::fs::copy(target.join("release/sync-bench"), &bin)
        .map_err(|e| format!("copying the binary: {e}"))?;
    Ok((bin, dir))
}

/// `git archive SHA | tar -x -C dest`.
fn export(root: &Path, sha: &str, dest: &Path) -> Result<(), String> {
    let mut archive = Command::new("git")
        .args(["archive", "--format=tar", sha])
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git archive: {e}"))?;
    let stdout = archive.stdout.take().expect("piped stdout");
    // `-m`: the files get the time of extraction, not the commit's. The
    // target directory is shared by every compared commit and cargo names
    // a workspace crate's artifacts by its path within the workspace, so a
    // file older than the artifacts another commit left would be taken as
    // already built.
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-m")
        .arg("-C")
        .arg(dest)
        .stdin(stdout)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    let git = archive.wait().map_err(|e| format!("git archive: {e}"))?;
    if git.success() && tar.success() {
        Ok(())
    } else {
        Err(format!("exporting {sha} failed"))
    }
}
