//! Whether the CPUs are saturated: the paper's switch from server threads
//! to plain locking ("the runtime library monitors ... CPU usage, for
//! example from /proc/stat ... If the CPU usage is high, our framework
//! switches to traditional locking", section 6.2).
//!
//! The measure is the kernel's count of runnable threads
//! (`procs_running` in `/proc/stat`), against the CPUs this process may
//! use ([`std::thread::available_parallelism`]). More runnable threads
//! than CPUs means that a server thread would share a CPU with the
//! workers it serves: every hand-over to it then waits for a time slice,
//! and a submitter that runs the task itself (combining, which is the lock
//! path) is faster. The count is smoothed (an exponentially weighted
//! average, a quarter per sample) and compared with a half-thread
//! hysteresis, so that one busy instant does not flip the mode.
//!
//! The sample is taken at most every [`INTERVAL`] by whoever calls
//! [`tick`] when it is due (server threads when they wake or go idle,
//! submitters to served monitors every 64th submission), and cached in an
//! atomic: the hot path, [`saturated`], is one relaxed load. Elsewhere than
//! on Linux, or when `/proc/stat` cannot be read, the CPUs are never
//! saturated (servers always serve).
//!
//! Loom: process-wide statics cannot be loom atomics (their constructors
//! are not `const`), and this is a heuristic, not a protocol: every
//! decision it drives is correct either way. So the statics are std's
//! atomics in every build, and under loom nothing is sampled (never
//! saturated, unless a test overrides it).

use std::sync::OnceLock;
// Process-wide statics: std's atomics in every build (see the module doc).
#[cfg(not(loom))]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

/// The shortest time between two samples of `/proc/stat`.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const INTERVAL: Duration = Duration::from_millis(5);

/// The verdict: bits 0-1 the override ([`NO_OVERRIDE`], [`NEVER`],
/// [`ALWAYS`]), bit 2 ([`SAMPLED`]) the sampler's own verdict, kept while
/// an override hides it. One word, so that a sample and an override never
/// overwrite each other.
static STATE: AtomicU8 = AtomicU8::new(0);
const NO_OVERRIDE: u8 = 0;
const NEVER: u8 = 1;
const ALWAYS: u8 = 2;
const OVERRIDE_MASK: u8 = 3;
const SAMPLED: u8 = 4;
/// When the next sample is due, in nanoseconds since the first sample.
#[cfg(not(loom))]
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The smoothed count of runnable threads, in sixteenths.
#[cfg(not(loom))]
static LOAD: AtomicU64 = AtomicU64::new(0);

/// Whether the CPUs are saturated, as last sampled: one relaxed load.
#[inline]
pub(crate) fn saturated() -> bool {
    let s = STATE.load(Relaxed);
    match s & OVERRIDE_MASK {
        NEVER => false,
        ALWAYS => true,
        _ => s & SAMPLED != 0,
    }
}

/// Samples the CPUs if the last sample is older than [`INTERVAL`].
pub(crate) fn tick() {
    #[cfg(not(loom))]
    {
        let now = since_epoch();
        let next = NEXT.load(Relaxed);
        if now < next {
            return;
        }
        // One caller samples; the others go on with the cached verdict.
        if NEXT
            .compare_exchange(next, now + INTERVAL.as_nanos() as u64, Relaxed, Relaxed)
            .is_ok()
        {
            sample();
        }
    }
}

/// A submitter's tick: every 64th call of this thread ticks.
#[inline]
pub(crate) fn tick_sometimes() {
    #[cfg(not(loom))]
    {
        std::thread_local! {
            static COUNT: core::cell::Cell<u8> = const { core::cell::Cell::new(0) };
        }
        let due = COUNT.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n % 64 == 0
        });
        if due {
            tick();
        }
    }
}

#[cfg(not(loom))]
fn since_epoch() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The CPUs this process may use.
pub(crate) fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(not(loom))]
fn sample() {
    let Some(running) = procs_running() else {
        STATE.fetch_and(!SAMPLED, Relaxed);
        return;
    };
    let was = LOAD.load(Relaxed);
    // A quarter of the new sample: a few samples (tens of ms) to move.
    let load = if was == 0 {
        running * 16
    } else {
        (3 * was + running * 16) / 4
    };
    LOAD.store(load, Relaxed);
    let cpus = cpus() as u64 * 16;
    // Runnable threads include the sampling one. Saturated above
    // `cpus + 1/2`, no longer at `cpus` or below.
    let sat = if STATE.load(Relaxed) & SAMPLED != 0 {
        load > cpus
    } else {
        load > cpus + 8
    };
    if sat {
        STATE.fetch_or(SAMPLED, Relaxed);
    } else {
        STATE.fetch_and(!SAMPLED, Relaxed);
    }
}

/// `procs_running` from `/proc/stat`, if readable.
#[cfg(not(loom))]
fn procs_running() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let line = stat.lines().find(|l| l.starts_with("procs_running "))?;
        line["procs_running ".len()..].trim().parse().ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Whether the CPUs are saturated, as the monitors see it now: the last
/// sample of the runnable threads (`procs_running` in `/proc/stat`, taken
/// at most every 5 ms while monitors with servers are in use), smoothed,
/// against [`std::thread::available_parallelism`]. Always `false` where
/// `/proc/stat` cannot be read.
///
/// While it is `true`, monitors with a server thread run like monitors
/// without one: a submitter that finds the monitor idle runs the tasks
/// itself (see [`Monitor`](crate::Monitor)'s "Execution").
///
/// # Examples
///
/// ```
/// // A hint: it may change with the next sample.
/// let busy = active_monitor::cpus_saturated();
/// # let _ = busy;
/// ```
pub fn cpus_saturated() -> bool {
    tick();
    saturated()
}

/// Test hook: forces the saturation verdict (`Some`) or returns it to the
/// sampler (`None`). Process-wide.
#[doc(hidden)]
pub fn set_saturation_override(verdict: Option<bool>) {
    let o = match verdict {
        None => NO_OVERRIDE,
        Some(false) => NEVER,
        Some(true) => ALWAYS,
    };
    // Relaxed: a process-wide hint; `fetch_update` keeps the sample's bit.
    let _ = STATE.fetch_update(Relaxed, Relaxed, |s| Some((s & !OVERRIDE_MASK) | o));
}
