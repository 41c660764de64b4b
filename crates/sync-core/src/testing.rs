//! Helpers for the family's own tests: not part of the public API, hidden
//! from the docs, and free to change in any release. The two assertion
//! macros are exported at the crate root because macros must be, and are
//! hidden there too.

use std::time::{Duration, Instant};

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

/// `n` threads spinning on the CPUs until dropped: the oversubscribed
/// regime a service runs in (more runnable threads than cores), for tests
/// that check a bound under it ("a 1 ms timed wait returns within 50 ms").
///
/// One set runs at a time in a process: [`start`](Self::start) waits until
/// the set before it is dropped. The test harness runs a binary's tests in
/// parallel, and two tests that each start 50 would otherwise each run
/// beside 100, not in the regime they name.
#[cfg(not(loom))]
#[derive(Debug)]
pub struct BusyThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
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

/// The machine's runnable threads now (`/proc/loadavg`'s count, as the
/// [`load`](crate::load) sampler reads it, unsmoothed), where readable: for
/// a test whose point needs CPUs that are not saturated.
#[cfg(not(loom))]
pub fn runnable_threads() -> Option<u64> {
    crate::load::procs_running()
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

/// Awaits `f`, and sends on `filed` once a poll of it has returned
/// `Pending` (its waker is registered): for a test that must act only once
/// a task waits.
///
/// # Panics
///
/// If `filed`'s receiver is gone.
pub async fn pending_then<F: std::future::Future + Unpin>(
    mut f: F,
    filed: std::sync::mpsc::Sender<()>,
) -> F::Output {
    let mut filed = Some(filed);
    std::future::poll_fn(move |cx| {
        let poll = std::future::Future::poll(std::pin::Pin::new(&mut f), cx);
        if poll.is_pending() {
            if let Some(filed) = filed.take() {
                filed.send(()).expect("the test waits");
            }
        }
        poll
    })
    .await
}

/// Polls `f` once, with `waker`.
pub fn poll_once<F: std::future::Future + ?Sized>(
    f: std::pin::Pin<&mut F>,
    waker: &std::task::Waker,
) -> std::task::Poll<F::Output> {
    f.poll(&mut std::task::Context::from_waker(waker))
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

/// A task's waker that panics on demand (user code at its worst), counting
/// its wakes: for tests of what a primitive does when a waker's `clone` or
/// `drop` panics inside it. Every [`waker`](Self::waker) and every clone of
/// one share this state. It also counts the wakers dropped, without being
/// woken, on another thread than the one that made it
/// ([`foreign_drops`](Self::foreign_drops)).
#[cfg(not(loom))]
#[derive(Debug)]
pub struct HostileWaker {
    wakes: std::sync::atomic::AtomicUsize,
    clone_panics: std::sync::atomic::AtomicUsize,
    drop_panics: std::sync::atomic::AtomicUsize,
    foreign_drops: std::sync::atomic::AtomicUsize,
    owner: std::thread::ThreadId,
}

#[cfg(not(loom))]
impl HostileWaker {
    /// A waker that does not panic yet, made by (and owned by) the calling
    /// thread.
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            wakes: Default::default(),
            clone_panics: Default::default(),
            drop_panics: Default::default(),
            foreign_drops: Default::default(),
            owner: std::thread::current().id(),
        })
    }

    /// A new `Waker` on this state.
    pub fn waker(self: &std::sync::Arc<Self>) -> std::task::Waker {
        let data = std::sync::Arc::into_raw(std::sync::Arc::clone(self)).cast::<()>();
        // SAFETY: `data` is a counted reference to a `HostileWaker`, which
        // is what every function of `HOSTILE_VTABLE` expects; the reference
        // is released by `hostile_drop` (or `hostile_wake`).
        unsafe { std::task::Waker::from_raw(std::task::RawWaker::new(data, &HOSTILE_VTABLE)) }
    }

    /// The next `n` clones of its wakers panic (instead of cloning).
    pub fn panic_on_clones(&self, n: usize) {
        self.clone_panics
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// The next `n` drops of its wakers panic (after releasing the waker).
    pub fn panic_on_drops(&self, n: usize) {
        self.drop_panics
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Keeps the panics of every `HostileWaker` out of the output from now
    /// on (any other panic is reported as before): for a test that makes
    /// many of them and measures memory, since the test harness keeps each
    /// panic's message. Installs a process-wide panic hook, once.
    pub fn quiet_panics() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let report = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let ours = info
                    .payload()
                    .downcast_ref::<&str>()
                    .is_some_and(|m| m.starts_with("HostileWaker: "));
                if !ours {
                    report(info);
                }
            }));
        });
    }

    /// How many times one of its wakers was woken.
    pub fn wakes(&self) -> usize {
        self.wakes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many of its wakers were dropped without being woken on another
    /// thread than the one that called [`new`](Self::new). A task's waker
    /// is dropped by its own polls, or woken (and so consumed) by whoever
    /// wakes it; a primitive that drops one elsewhere runs user code where
    /// its caller does not expect it (inside an unlock, say).
    pub fn foreign_drops(&self) -> usize {
        self.foreign_drops.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn take_one(count: &std::sync::atomic::AtomicUsize) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        count
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[cfg(not(loom))]
static HOSTILE_VTABLE: std::task::RawWakerVTable = std::task::RawWakerVTable::new(
    hostile_clone,
    hostile_wake,
    hostile_wake_by_ref,
    hostile_drop,
);

/// # Safety
///
/// `data` is a counted reference to a `HostileWaker` (see `waker`).
#[cfg(not(loom))]
unsafe fn hostile_clone(data: *const ()) -> std::task::RawWaker {
    // SAFETY: the caller's contract: `data` is alive while this waker is.
    let this = unsafe { &*data.cast::<HostileWaker>() };
    if HostileWaker::take_one(&this.clone_panics) {
        panic!("HostileWaker: clone panics");
    }
    // SAFETY: `data` came from `Arc::into_raw`; the new waker owns the
    // count taken here.
    unsafe { std::sync::Arc::increment_strong_count(data.cast::<HostileWaker>()) };
    std::task::RawWaker::new(data, &HOSTILE_VTABLE)
}

/// # Safety
///
/// As for `hostile_clone`; consumes the waker's reference.
#[cfg(not(loom))]
unsafe fn hostile_wake(data: *const ()) {
    // SAFETY: the caller's contract.
    unsafe {
        hostile_wake_by_ref(data);
        hostile_release(data, false);
    }
}

/// # Safety
///
/// As for `hostile_clone`.
#[cfg(not(loom))]
unsafe fn hostile_wake_by_ref(data: *const ()) {
    // SAFETY: the caller's contract: `data` is alive while this waker is.
    let this = unsafe { &*data.cast::<HostileWaker>() };
    this.wakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// # Safety
///
/// As for `hostile_clone`; consumes the waker's reference.
#[cfg(not(loom))]
unsafe fn hostile_drop(data: *const ()) {
    // SAFETY: the caller's contract.
    unsafe { hostile_release(data, true) }
}

/// Releases a waker's reference: a drop (`dropped`) or a wake by value.
///
/// # Safety
///
/// As for `hostile_clone`; consumes the waker's reference.
#[cfg(not(loom))]
unsafe fn hostile_release(data: *const (), dropped: bool) {
    // SAFETY: the caller's contract: `data` is alive until we release it
    // below.
    let this = unsafe { &*data.cast::<HostileWaker>() };
    if dropped && std::thread::current().id() != this.owner {
        this.foreign_drops
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    // A wake by value releases the waker too: armed drops panic there as
    // well, as a waker whose `Drop` panics would.
    let panics = HostileWaker::take_one(&this.drop_panics);
    // SAFETY: releases the reference this waker owned (from `into_raw` or
    // `hostile_clone`); `data` is not used again.
    unsafe { std::sync::Arc::decrement_strong_count(data.cast::<HostileWaker>()) };
    if panics {
        panic!("HostileWaker: drop panics");
    }
}

/// A boxed task body for [`InlineTask`].
#[cfg(not(loom))]
type InlineBody = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A task whose waker polls it at once, on the waking thread: the executor
/// at its most re-entrant, for tests of a primitive whose release wakes a
/// task that takes and releases it in turn, inside the waker. A wake that
/// comes while the task is being polled (from inside its own poll, or from
/// another thread) has it polled again once that poll returns, as a real
/// executor would.
#[cfg(not(loom))]
pub struct InlineTask {
    body: std::sync::Mutex<Option<InlineBody>>,
    woken: std::sync::atomic::AtomicBool,
}

#[cfg(not(loom))]
impl InlineTask {
    /// Spawns `body` and polls it once, here.
    pub fn spawn(
        body: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::sync::Arc<Self> {
        let task = std::sync::Arc::new(Self {
            body: std::sync::Mutex::new(Some(Box::pin(body))),
            woken: std::sync::atomic::AtomicBool::new(false),
        });
        task.run();
        task
    }

    /// Whether the body has returned.
    pub fn is_done(&self) -> bool {
        self.body.lock().expect("not poisoned").is_none()
    }

    fn run(self: &std::sync::Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        // SeqCst throughout: a wake that finds the task being polled sets
        // `woken` before its `try_lock` fails, and the poller reads it
        // after unlocking, so one of the two polls again.
        self.woken.store(true, SeqCst);
        let waker = std::task::Waker::from(std::sync::Arc::clone(self));
        loop {
            let mut slot = match self.body.try_lock() {
                Ok(slot) => slot,
                // Being polled: the poller sees `woken` and polls again.
                Err(std::sync::TryLockError::WouldBlock) => return,
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    panic!("InlineTask: its poll panicked")
                }
            };
            while self.woken.swap(false, SeqCst) {
                if let Some(body) = slot.as_mut()
                    && body
                        .as_mut()
                        .poll(&mut std::task::Context::from_waker(&waker))
                        .is_ready()
                {
                    *slot = None;
                }
            }
            drop(slot);
            if !self.woken.load(SeqCst) {
                return;
            }
        }
    }
}

#[cfg(not(loom))]
impl std::task::Wake for InlineTask {
    fn wake(self: std::sync::Arc<Self>) {
        self.run();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.run();
    }
}

#[cfg(not(loom))]
impl std::fmt::Debug for InlineTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineTask")
            .field("done", &self.is_done())
            .finish()
    }
}

/// Runs `f` on a thread with a stack of `stack` bytes and panics, naming
/// `what`, if it has not finished within 60 s; a stack overflow aborts the
/// whole test binary instead (run it where that is a failure).
#[cfg(not(loom))]
pub fn on_small_stack(what: &str, stack: usize, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let t = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            f();
            let _ = done.send(());
        })
        .expect("spawn the test thread");
    if finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .is_err()
    {
        assert!(t.is_finished(), "{what}: not done within 60 s");
    }
    t.join()
        .unwrap_or_else(|_| panic!("{what}: the test thread panicked"));
}
