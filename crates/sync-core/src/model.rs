//! Running loom models (loom builds only).
//!
//! `cargo xtask loom` sets `LOOM_MAX_PREEMPTIONS` (2 by default, or
//! `--preemptions N`): [`check`] uses it. A model whose state space needs a
//! bound of its own, small enough for CI or large enough to reach its bug,
//! calls [`check_with_bound`], which ignores the environment.

/// Runs `f` under loom with the environment's settings.
pub fn check<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    loom::model::Builder::new().check(f);
}

/// Runs `f` under loom with at most `preemptions` preemptions per execution.
pub fn check_with_bound<F>(preemptions: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// Asserts that `run` (a broken protocol under [`check`]) makes loom fail
/// with a message containing `expected`: the way to show that a model can
/// catch the bug it guards against.
///
/// Loom reports some failures, deadlocks among them, by aborting the process,
/// so `#[should_panic]` cannot observe them. `check_fails` therefore re-runs
/// the calling test in a child process, where `run` is executed, and checks
/// that the child failed and said `expected`. `test_name` is the calling
/// test's name as libtest knows it (its function name, for a test at the top
/// of an integration-test file).
///
/// # Panics
///
/// If the child succeeds, or fails without saying `expected`.
pub fn check_fails(test_name: &str, expected: &str, run: impl FnOnce()) {
    const CHILD: &str = "SYNC_CORE_EXPECTED_FAILURE";
    if std::env::var(CHILD).as_deref() == Ok(test_name) {
        run();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([test_name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, test_name)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("could not re-run the test binary");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "loom found no failure in `{test_name}`, expected one saying {expected:?}:\n{said}"
    );
    assert!(
        said.contains(expected),
        "`{test_name}` failed without saying {expected:?}:\n{said}"
    );
}

/// Polls `fut` once on this thread, which must queue it (it must return
/// `Pending`), then drops it on a new model thread: a task that withdraws
/// a queued wait while the model's other threads run. Join the handle
/// before the model's final checks.
///
/// # Panics
///
/// If the poll completes the future.
pub fn queued_then_dropped_elsewhere<F>(fut: F) -> crate::sync::thread::JoinHandle<()>
where
    F: std::future::Future + Send + 'static,
{
    let mut fut = Box::pin(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        fut.as_mut().poll(&mut cx).is_pending(),
        "the future completed instead of queueing"
    );
    crate::sync::thread::spawn(move || drop(fut))
}

/// The message of [`panicking_waker`]'s panics.
pub const WAKER_PANIC: &str = "a task's waker panicked";

/// A waker that panics with [`WAKER_PANIC`] when woken: a waiting task's
/// user code, run by whichever thread wakes that task. Its panics are kept
/// out of the test's output ([`quiet_panics_starting_with`]), since loom
/// runs a model many times; any other panic is reported as usual.
///
/// [`quiet_panics_starting_with`]: crate::testing::quiet_panics_starting_with
pub fn panicking_waker() -> std::task::Waker {
    struct Panics;
    impl std::task::Wake for Panics {
        fn wake(self: std::sync::Arc<Self>) {
            panic!("{WAKER_PANIC}");
        }
    }
    crate::testing::quiet_panics_starting_with(WAKER_PANIC);
    std::task::Waker::from(std::sync::Arc::new(Panics))
}
