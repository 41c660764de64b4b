//! Helpers for the family's own tests: not part of the public API, hidden
//! from the docs, and free to change in any release. The two assertion
//! macros are exported at the crate root because macros must be, and are
//! hidden there too.

use std::time::{Duration, Instant};

#[cfg(all(not(loom), target_os = "linux"))]
pub mod freeze;
mod tasks;

pub use tasks::*;

/// How long a soak test should keep going: `SYNC_SOAK_MINUTES` (set by
/// `cargo xtask soak --minutes N`), or zero, in which case a soak test runs
/// its fixed minimum of operations once.
pub fn soak_duration() -> Duration {
    let minutes = std::env::var("SYNC_SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse::<f64>().ok())
        .unwrap_or(0.0);
    Duration::from_secs_f64(minutes.max(0.0) * 60.0)
}

/// Runs `round` until it has run at least `min_rounds` times and
/// [`soak_duration`] has passed; returns the number of rounds.
pub fn soak(min_rounds: u64, mut round: impl FnMut(u64)) -> u64 {
    let deadline = Instant::now() + soak_duration();
    let mut n = 0;
    while n < min_rounds || Instant::now() < deadline {
        round(n);
        n += 1;
    }
    n
}

/// Counts the threads parked on `key` without waking any.
pub fn parked_on(key: usize) -> usize {
    let mut n = 0;
    // SAFETY: the filter only counts and the callback is trivial: neither
    // panics nor calls into the parking lot.
    unsafe {
        crate::parking_lot::unpark_filter(
            key,
            |_| {
                n += 1;
                crate::parking_lot::FilterOp::Skip
            },
            |_| crate::parking_lot::DEFAULT_UNPARK_TOKEN,
        )
    };
    n
}

/// Waits (yielding) until at least `n` threads are parked on `key`.
///
/// # Panics
///
/// After ten seconds, so that a test whose threads never park fails instead
/// of hanging.
pub fn wait_until_parked(key: usize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while parked_on(key) < n {
        assert!(
            Instant::now() < deadline,
            "{n} threads never parked on {key:#x}"
        );
        crate::sync::thread::yield_now();
    }
}

/// Asserts at compile time that a type implements every listed trait.
///
/// ```
/// sync_core::assert_impl!(std::sync::Mutex<u8>: Send, Sync);
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! assert_impl {
    ($t:ty: $($tr:path),+ $(,)?) => {
        const _: fn() = || {
            fn check<T: ?Sized $(+ $tr)+>() {}
            check::<$t>();
        };
    };
}

/// Asserts at compile time that a type does *not* implement a trait.
///
/// ```
/// sync_core::assert_not_impl!(std::rc::Rc<u8>: Send);
/// ```
///
/// ```compile_fail
/// sync_core::assert_not_impl!(u8: Send);
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! assert_not_impl {
    ($t:ty: $tr:path) => {
        const _: fn() = || {
            // Ambiguous, and so an error, exactly when `$t: $tr`.
            trait AmbiguousIfImpl<A> {
                fn some_item() {}
            }
            impl<T: ?Sized> AmbiguousIfImpl<()> for T {}
            impl<T: ?Sized + $tr> AmbiguousIfImpl<u8> for T {}
            let _ = <$t as AmbiguousIfImpl<_>>::some_item;
        };
    };
}

/// The system allocator, counting the bytes live: a test binary that
/// declares `#[global_allocator] static A: CountingAlloc = CountingAlloc;`
/// can check that what a primitive keeps grows with the waiters present,
/// not with the history of operations ([`live_bytes`]). Tests that read the
/// count should run one at a time (hold one lock around each).
#[derive(Debug)]
pub struct CountingAlloc;

static LIVE_BYTES: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

/// The bytes live in this binary, if it uses [`CountingAlloc`].
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

std::thread_local! {
    /// Bytes allocated minus bytes freed by this thread.
    static THREAD_BYTES: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

/// The bytes this thread allocated and has not freed (nor seen freed by
/// itself), if the binary uses [`CountingAlloc`]. Unlike [`live_bytes`],
/// it does not move with what the test harness allocates on its own
/// threads while the test runs (printing other tests' results), so a test
/// whose primitive allocates and frees on the calling thread can hold it to
/// a tight bound. A block freed by another thread still counts here.
pub fn thread_live_bytes() -> isize {
    THREAD_BYTES.try_with(std::cell::Cell::get).unwrap_or(0)
}

fn count(bytes: isize) {
    LIVE_BYTES.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    // `try_with`: the allocator runs during thread teardown too.
    let _ = THREAD_BYTES.try_with(|b| b.set(b.get() + bytes));
}

// SAFETY: defers every call to `System`, only counting sizes.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let p = unsafe { std::alloc::System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        count(-(layout.size() as isize));
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

/// `n` threads spinning on the CPUs until dropped (or [stopped](Self::stop)):
/// the oversubscribed regime a service runs in (more runnable threads than
/// cores), for tests that check a bound under it ("a 1 ms timed wait
/// returns within 50 ms").
///
/// One set runs at a time in a process: [`start`](Self::start) waits until
/// the set before it is dropped. The test harness runs a binary's tests in
/// parallel, and two tests that each start 50 would otherwise each run
/// beside 100, not in the regime they name.
#[cfg(not(loom))]
#[derive(Debug)]
pub struct BusyThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Each returns the CPU time it used.
    threads: Vec<std::thread::JoinHandle<Duration>>,
    // Dropped after the threads are joined (fields drop after `drop`).
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

#[cfg(not(loom))]
impl BusyThreads {
    /// Starts `n` spinning threads, and returns once each has started;
    /// first waits for any other set of this process to be dropped.
    ///
    /// # Deadlocks
    ///
    /// Starting a second set while this thread holds one.
    pub fn start(n: usize) -> Self {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        // A test that panicked with a set running poisons the lock, and
        // has stopped its threads as it unwound: the regime is free.
        let one_at_a_time = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let started = std::sync::Arc::new(AtomicUsize::new(0));
        let threads = (0..n)
            .map(|_| {
                let (stop, started) = (stop.clone(), started.clone());
                std::thread::spawn(move || {
                    started.fetch_add(1, Relaxed);
                    let mut x = 0u64;
                    while !stop.load(Relaxed) {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                    #[cfg(target_os = "linux")]
                    let used = thread_cpu_time();
                    #[cfg(not(target_os = "linux"))]
                    let used = Duration::ZERO;
                    used
                })
            })
            .collect();
        while started.load(Relaxed) < n {
            std::thread::sleep(Duration::from_millis(1));
        }
        Self {
            stop,
            threads,
            _one_at_a_time: one_at_a_time,
        }
    }

    /// Stops and joins the threads, and returns the CPU time they used in
    /// all (zero outside Linux): subtracted from the process's
    /// (`process_cpu_time`), what the rest of the process used beside them.
    ///
    /// # Panics
    ///
    /// If a spinning thread panicked (they do not).
    pub fn stop(mut self) -> Duration {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|t| t.join().expect("a spinning thread panicked"))
            .sum()
    }
}

#[cfg(not(loom))]
impl Drop for BusyThreads {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The CPU time (user plus system) the calling thread has used so far
/// (`getrusage(RUSAGE_THREAD)`).
///
/// # Panics
///
/// If the system refuses the call (it does not for the calling thread).
#[cfg(all(not(loom), target_os = "linux"))]
pub fn thread_cpu_time() -> Duration {
    rusage(libc::RUSAGE_THREAD)
}

/// The CPU time (user plus system) of this process so far, its ended
/// threads' included (`getrusage(RUSAGE_SELF)`).
///
/// # Panics
///
/// If the system refuses the call (it does not for the calling process).
#[cfg(all(not(loom), target_os = "linux"))]
pub fn process_cpu_time() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

#[cfg(all(not(loom), target_os = "linux"))]
fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage`; the call only writes it.
    let r = unsafe { libc::getrusage(who, &mut ru) };
    assert_eq!(r, 0, "getrusage({who}) failed");
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    time(ru.ru_utime) + time(ru.ru_stime)
}

/// The machine's runnable threads now (`/proc/loadavg`'s count, as the
/// [`load`](crate::load) sampler reads it, unsmoothed), where readable: for
/// a test whose point needs CPUs that are not saturated.
#[cfg(not(loom))]
pub fn runnable_threads() -> Option<u64> {
    crate::load::procs_running()
}

/// Whether the machine itself is crowded now: more runnable threads
/// ([`runnable_threads`]) than [`CROWDED`](crate::load::CROWDED) per CPU,
/// as beside other jobs. For a test whose check means nothing then (a
/// verdict of crowded CPUs that is right, a waiter that gives its core
/// away getting it back about as often as a spinner). Unlike
/// [`load::crowded`](crate::load::crowded), it counts this process's own
/// threads and ignores a saturation override.
#[cfg(not(loom))]
pub fn machine_crowded() -> bool {
    let crowded = crate::load::cpus() as u64 * crate::load::CROWDED;
    runnable_threads().is_some_and(|running| running > crowded)
}

/// Runs the tests of one test binary that hold the returned guard one at a
/// time: for tests whose threads spin on every core, or whose assertion
/// needs the CPUs (a bound on when a woken thread runs, a count of live
/// bytes), beside the binary's other tests, which cargo runs in parallel.
/// One lock per test binary; a test that panicked while holding it does
/// not poison it for the others.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `f` in a child process: the calling test binary, re-run on `test`
/// alone (`test` is the test's full name), with `env` set to it. For a
/// test whose failure is an abort (a panic out of a drop during
/// unwinding), which would end the whole test binary.
///
/// # Panics
///
/// If the child process fails or aborts, with its output.
#[track_caller]
pub fn in_child(env: &str, test: &str, f: impl FnOnce()) {
    if std::env::var(env).as_deref() == Ok(test) {
        f();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(env, test)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("could not re-run the test binary");
    assert!(
        out.status.success(),
        "`{test}` failed in its child process ({:?}; an abort is a panic out of a drop \
         during unwinding):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Keeps the panics whose message starts with `prefix` out of the output
/// from now on (any other panic is reported as before): for a test that
/// injects many panics, since the harness prints and keeps each message.
/// Installs a process-wide panic hook, once per prefix.
pub fn quiet_panics_starting_with(prefix: &'static str) {
    static QUIET: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut quiet = QUIET
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if quiet.contains(&prefix) {
        return;
    }
    quiet.push(prefix);
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !panic_text(info.payload()).starts_with(prefix) {
            report(info);
        }
    }));
}

/// Drops `value` while the thread unwinds from another panic, which must
/// come out unchanged (and the process must not abort: run such a test
/// [`in_child`]).
///
/// # Panics
///
/// If the first panic was lost or replaced.
#[track_caller]
pub fn drop_while_unwinding<T>(value: T) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _dropped_as_we_unwind = value;
        panic!("the first panic");
    }));
    let payload = r.expect_err("the first panic was lost");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the first panic"),
        "the first panic was replaced"
    );
}

/// A value whose drop counts itself in its counter and then panics, every
/// time: a user's value (a message, a mutex's data) whose `Drop` panics,
/// for checking that a primitive never drops it while another panic
/// unwinds (which aborts the process).
#[derive(Debug)]
pub struct DropBomb(pub std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl DropBomb {
    /// The message of every `DropBomb`'s panic.
    pub const PANIC: &'static str = "a value's drop panicked";
}

impl Drop for DropBomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        panic!("{}", Self::PANIC);
    }
}

/// A panic payload's message: a `&str` or `String` payload's text, or `""`
/// for any other payload.
///
/// # Examples
///
/// ```
/// let p = std::panic::catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
/// assert_eq!(sync_core::testing::panic_text(&*p), "boom 1");
/// ```
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or_default()
}

/// Runs `f`, which must panic with the `&str` payload `first` (a waker's
/// panic, say, that must come out ahead of a [`DropBomb`]'s that follows
/// it).
///
/// # Panics
///
/// If `f` returned, or its panic was another.
#[track_caller]
pub fn first_panic_is(first: &str, f: impl FnOnce()) {
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .expect_err("the first panic was lost");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&first));
}

/// Asserts that `f` returns within `bound`, and returns what it returned
/// with the time it took.
///
/// # Panics
///
/// If `f` took longer than `bound`, naming `what`.
#[track_caller]
pub fn within<R>(what: &str, bound: Duration, f: impl FnOnce() -> R) -> (R, Duration) {
    let began = Instant::now();
    let r = f();
    let took = began.elapsed();
    assert!(took <= bound, "{what} took {took:?}, more than {bound:?}");
    (r, took)
}

/// Whether `thread` ended within `bound`: `Some(true)` if it returned,
/// `Some(false)` if it panicked, `None` if it still runs (left running: a
/// test of a hang asserts `Some(true)`, and a thread that waits for ever
/// is not joined).
#[cfg(not(loom))]
pub fn ended_within(bound: Duration, thread: std::thread::JoinHandle<()>) -> Option<bool> {
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(thread.join().is_ok());
    });
    ended.recv_timeout(bound).ok()
}

/// Whether `cond` holds within `limit`, looking every millisecond: for
/// what another thread does with no signal of its own to wait on (a task
/// it queues, a count it bumps after the step the test ordered). A test of
/// a hang asserts it; `cond` is first looked at before any sleep.
pub fn holds_within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A thread whose scheduling state a test can look at (Linux: its entry
/// in `/proc`), named on the thread itself by [`current`](Self::current):
/// for a test whose point needs another thread asleep (parked, as opposed
/// to running or waiting for a CPU), where a sleep of the test's own would
/// only make that likely.
#[cfg(all(not(loom), target_os = "linux"))]
#[derive(Clone, Copy, Debug)]
pub struct KernelThread {
    tid: libc::pid_t,
}

#[cfg(all(not(loom), target_os = "linux"))]
impl KernelThread {
    /// The calling thread.
    pub fn current() -> Self {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        Self { tid }
    }

    /// Whether it sleeps now: blocked in the kernel (state `S`: a park, a
    /// futex or a timed sleep), not running nor runnable. `false` once it
    /// has ended.
    pub fn sleeps(&self) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{}/stat", self.tid));
        // "tid (name) S ...": the state follows the name's last ')'.
        stat.ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('S'))
            })
            .unwrap_or(false)
    }
}

/// Checks a timed wait against the machine: runs `f` (a wait that should
/// return `nominal` after it starts) `tries` times, each beside a plain
/// `thread::sleep(nominal)` started at the same moment on a thread of its
/// own, and asserts that the median of `f`'s times is at most `slack` plus
/// twice the median of the sleeps. Returns what each try returned.
///
/// A sleep measures the machine at that moment: how late a thread whose
/// timer has fired gets a CPU back, which no wait can beat. With more
/// runnable threads than cores, any single try can be preempted for a
/// whole scheduling round (tens of ms), and a machine loaded by other
/// processes delays sleeps too; one such draw must not fail a test. A wait
/// that yields is a round late on most tries and fails the median; a wait
/// that is only as late as a sleep passes unless most of its tries draw
/// from the tail of the delays while most of the sleeps beside them do not.
///
/// # Panics
///
/// If the median try is late, naming `what` and listing every time; if
/// `tries` is zero; and if `f` or a sleep thread panics.
#[cfg(not(loom))]
#[track_caller]
pub fn timely<R>(
    what: &str,
    nominal: Duration,
    slack: Duration,
    tries: usize,
    f: impl FnMut() -> R,
) -> Vec<R> {
    assert!(tries > 0, "timely({what}): no tries");
    let (results, waits, sleeps) = beside_sleeps(nominal, tries, f);
    let bound = slack + 2 * median(&sleeps);
    let took = median(&waits);
    assert!(
        took <= bound,
        "{what}: the median try took {took:?}, more than {bound:?} \
         ({slack:?} + twice the median sleep); tries {waits:?}, sleeps {sleeps:?}"
    );
    results
}

/// Checks a timed wait's tail against the machine: runs `f` (a wait that
/// should return `nominal` after it starts) `tries` times in a row, while
/// a thread of its own sleeps `nominal` again and again beside it, and
/// asserts that at most `late` tries took more than `slack` plus twice the
/// median of those sleeps. Returns what each try returned.
///
/// [`timely`] catches a wait that is late on most tries (one that yields);
/// this catches one that is late on a few. A wait that spins through its
/// deadline with more runnable threads than cores is preempted, and so a
/// scheduling round late, on about one try in four (its median is on
/// time), while a timed park is that late on about one in a hundred or
/// fewer. The tries run back to back: a sleep on the waiting thread
/// between them would pay for the CPU time the try spun (the scheduler
/// delays the thread's wake-up instead), hiding the lateness; and the
/// sleeps run on one thread for the whole check, since a thread spawned on
/// saturated CPUs waits a scheduling round before it first runs.
///
/// # Panics
///
/// If more than `late` tries are late, naming `what` and listing the late
/// times; if `tries` is zero; and if `f` or the sleeping thread panics.
#[cfg(not(loom))]
#[track_caller]
pub fn rarely_late<R>(
    what: &str,
    nominal: Duration,
    slack: Duration,
    tries: usize,
    late: usize,
    mut f: impl FnMut() -> R,
) -> Vec<R> {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    assert!(tries > 0, "rarely_late({what}): no tries");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (started_tx, started) = std::sync::mpsc::channel();
    let sleeper = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let _ = started_tx.send(());
            let mut sleeps = Vec::new();
            while !stop.load(Relaxed) || sleeps.is_empty() {
                let began = Instant::now();
                std::thread::sleep(nominal);
                sleeps.push(began.elapsed());
            }
            sleeps
        })
    };
    started.recv().expect("the sleeping thread panicked");
    let mut results = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..tries {
        let began = Instant::now();
        results.push(f());
        waits.push(began.elapsed());
    }
    stop.store(true, Relaxed);
    let sleeps = sleeper.join().expect("the sleeping thread panicked");
    let bound = slack + 2 * median(&sleeps);
    waits.sort();
    let over: Vec<_> = waits.iter().filter(|&&w| w > bound).collect();
    assert!(
        over.len() <= late,
        "{what}: {} of {tries} tries took more than {bound:?} ({slack:?} + \
         twice the median sleep), more than {late}: {over:?}; the sleeps' \
         median {:?}, slowest {:?}",
        over.len(),
        median(&sleeps),
        sleeps.iter().max()
    );
    results
}

/// Runs `f` `tries` times, each beside a `thread::sleep(nominal)` started
/// at the same moment on a thread of its own: what `f` returned, how long
/// each try took, and how long each sleep took.
#[cfg(not(loom))]
fn beside_sleeps<R>(
    nominal: Duration,
    tries: usize,
    mut f: impl FnMut() -> R,
) -> (Vec<R>, Vec<Duration>, Vec<Duration>) {
    let (mut results, mut waits, mut sleeps) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..tries {
        let sleep = std::thread::spawn(move || {
            let began = Instant::now();
            std::thread::sleep(nominal);
            began.elapsed()
        });
        let began = Instant::now();
        results.push(f());
        waits.push(began.elapsed());
        sleeps.push(
            sleep
                .join()
                .expect("the sleep beside a timed wait panicked"),
        );
    }
    (results, waits, sleeps)
}

/// The median of a non-empty list of times.
#[cfg(not(loom))]
fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    #[test]
    fn holds_within_waits_for_another_thread_and_gives_up_at_its_limit() {
        let set = Arc::new(AtomicBool::new(false));
        let setter = {
            let set = Arc::clone(&set);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                set.store(true, SeqCst);
            })
        };
        assert!(holds_within(Duration::from_secs(10), || set.load(SeqCst)));
        setter.join().expect("the setter");
        let began = Instant::now();
        assert!(!holds_within(Duration::from_millis(20), || false));
        assert!(began.elapsed() >= Duration::from_millis(20));
    }

    /// A thread that names itself and then runs `idle` until `stop`.
    #[cfg(target_os = "linux")]
    fn named_thread(
        stop: &Arc<AtomicBool>,
        idle: fn(),
    ) -> (KernelThread, std::thread::JoinHandle<()>) {
        let (named, name) = std::sync::mpsc::channel();
        let stop = Arc::clone(stop);
        let thread = std::thread::spawn(move || {
            named.send(KernelThread::current()).expect("the test waits");
            while !stop.load(SeqCst) {
                idle();
            }
        });
        (name.recv().expect("named"), thread)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_parked_thread_sleeps_and_a_spinning_one_does_not() {
        let stop = Arc::new(AtomicBool::new(false));
        let (parked_id, parked) = named_thread(&stop, std::thread::park);
        assert!(holds_within(Duration::from_secs(10), || parked_id.sleeps()));
        let (spinning, spinner) = named_thread(&stop, std::hint::spin_loop);
        // Running or runnable, never asleep, however often it is looked at.
        assert!(!holds_within(Duration::from_millis(50), || spinning.sleeps()));
        stop.store(true, SeqCst);
        spinner.join().expect("the spinner");
        parked.thread().unpark();
        parked.join().expect("the parked thread");
    }

    #[test]
    fn a_second_set_of_busy_threads_starts_only_once_the_first_is_dropped() {
        let first = BusyThreads::start(1);
        let dropped = Arc::new(AtomicBool::new(false));
        let second = {
            let dropped = Arc::clone(&dropped);
            std::thread::spawn(move || {
                let set = BusyThreads::start(1);
                // SeqCst: ordered after the main thread's store by the
                // lock the two sets share; the flag only reports it.
                let after = dropped.load(SeqCst);
                drop(set);
                after
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        dropped.store(true, SeqCst);
        drop(first);
        assert!(
            second.join().expect("the second set's thread"),
            "the second set ran beside the first"
        );
    }
}
