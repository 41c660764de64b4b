//! What the machine's load says about waiting: are there more runnable
//! threads than CPUs, and what does a yield cost right now?
//!
//! With more runnable threads than CPUs, giving the core away is not
//! waiting: `yield_now` puts the caller behind every runnable thread, for a
//! whole scheduling round, and a server thread or a spinning waiter shares
//! a CPU with the thread it waits for. Two signals, both process-wide and
//! cached so that reading them is one relaxed load:
//!
//! * [`saturated`]: the kernel's count of runnable threads (`procs_running`,
//!   read from `/proc/loadavg`), smoothed, against the CPUs this process may use
//!   ([`cpus`]). Sampled at most every [`INTERVAL`] by whoever calls
//!   [`tick`] when a sample is due. Elsewhere than on Linux, or when
//!   `/proc/loadavg` cannot be read, never saturated.
//! * [`yields_are_slow`]: heavily oversubscribed ([`CROWDED`] runnable
//!   threads per CPU), or a yield measured by [`measured_yield`] took
//!   longer than [`SLOW_YIELD`] recently.
//!
//! Loom: process-wide statics cannot be loom atomics (their constructors
//! are not `const`), and this is a heuristic, not a protocol: every
//! decision it drives must be correct either way. So the statics are std's
//! atomics in every build, and under loom nothing is sampled or measured
//! (never saturated, yields never slow, unless a test overrides it).
//!
//! # Examples
//!
//! ```
//! use sync_core::load;
//!
//! load::tick(); // samples the load if the last sample is old
//! if load::yields_are_slow() {
//!     // park (or sleep briefly) instead of yielding
//! }
//! assert!(load::cpus() >= 1);
//! ```

use std::sync::OnceLock;
// Process-wide statics: std's atomics in every build (see the module doc).
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

/// The shortest time between two samples of the load.
pub const INTERVAL: Duration = Duration::from_millis(5);

/// A yield that took longer than this gave the core to other runnable
/// threads: an uncontended yield is a system call of a microsecond or two.
pub const SLOW_YIELD: Duration = Duration::from_micros(200);

/// How long a slow yield is remembered: meanwhile [`yields_are_slow`].
pub const SLOW_YIELD_MEMORY: Duration = Duration::from_millis(250);

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
/// The sampler's verdict that the CPUs are heavily oversubscribed (more
/// than [`CROWDED`] runnable threads per CPU).
const HEAVY: u8 = 8;

/// Runnable threads per CPU beyond which a yield is taken to be slow
/// without measuring one. Between one and this many, yields are measured:
/// a few threads that block often leave a yield cheap (the thread it
/// yields to soon blocks), and parking instead would cost a wake-up.
pub const CROWDED: u64 = 4;
/// When the next sample is due, in nanoseconds since [`since_epoch`]'s epoch.
#[cfg_attr(loom, allow(dead_code))]
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The smoothed count of runnable threads, in sixteenths.
#[cfg_attr(loom, allow(dead_code))]
static LOAD: AtomicU64 = AtomicU64::new(0);
/// Until when (nanoseconds since the epoch) yields count as slow after a
/// slow one was measured; 0: none measured.
static SLOW_UNTIL: AtomicU64 = AtomicU64::new(0);

/// Whether more threads are runnable than there are CPUs, as last sampled
/// (smoothed, with half a thread of hysteresis): one relaxed load. Call
/// [`tick`] from time to time to keep it current.
///
/// # Examples
///
/// ```
/// let busy = sync_core::load::saturated();
/// # let _ = busy;
/// ```
#[inline]
pub fn saturated() -> bool {
    let s = STATE.load(Relaxed);
    match s & OVERRIDE_MASK {
        NEVER => false,
        ALWAYS => true,
        _ => s & SAMPLED != 0,
    }
}

/// Whether a yield would give the core away for a scheduling round: more
/// than [`CROWDED`] threads per CPU are runnable (as last sampled), or a
/// yield measured by [`measured_yield`] was slower than [`SLOW_YIELD`]
/// within the last [`SLOW_YIELD_MEMORY`].
///
/// # Examples
///
/// ```
/// let slow = sync_core::load::yields_are_slow();
/// # let _ = slow;
/// ```
#[inline]
pub fn yields_are_slow() -> bool {
    let s = STATE.load(Relaxed);
    match s & OVERRIDE_MASK {
        NEVER => return false,
        ALWAYS => return true,
        _ if s & HEAVY != 0 => return true,
        _ => {}
    }
    #[cfg(not(loom))]
    {
        let until = SLOW_UNTIL.load(Relaxed);
        until != 0 && since_epoch() < until
    }
    #[cfg(loom)]
    {
        false
    }
}

/// Yields the core once and records how long that took, so that later
/// waiters see [`yields_are_slow`]. Under loom, a plain yield to the model.
///
/// # Examples
///
/// ```
/// sync_core::load::measured_yield();
/// ```
pub fn measured_yield() {
    #[cfg(not(loom))]
    {
        let began = Instant::now();
        std::thread::yield_now();
        let took = began.elapsed();
        if took > SLOW_YIELD {
            let until = since_epoch() + SLOW_YIELD_MEMORY.as_nanos() as u64;
            SLOW_UNTIL.fetch_max(until, Relaxed);
        }
    }
    #[cfg(loom)]
    crate::sync::thread::yield_now();
}

/// Samples the runnable threads if the last sample is older than [`INTERVAL`]; one
/// caller samples, the others return at once.
///
/// # Examples
///
/// ```
/// sync_core::load::tick();
/// ```
pub fn tick() {
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

/// [`tick`] from a hot path: only every 64th call of this thread looks at
/// the clock.
///
/// # Examples
///
/// ```
/// sync_core::load::tick_sometimes();
/// ```
#[inline]
pub fn tick_sometimes() {
    #[cfg(not(loom))]
    {
        std::thread_local! {
            static COUNT: core::cell::Cell<u8> = const { core::cell::Cell::new(0) };
        }
        // `try_with`: a thread-local destructor may wait on a primitive.
        let due = COUNT
            .try_with(|c| {
                let n = c.get().wrapping_add(1);
                c.set(n);
                n % 64 == 0
            })
            .unwrap_or(false);
        if due {
            tick();
        }
    }
}

/// The CPUs this process may use ([`std::thread::available_parallelism`],
/// which follows affinity masks and cgroup quotas); 1 if unknown.
///
/// # Examples
///
/// ```
/// assert!(sync_core::load::cpus() >= 1);
/// ```
pub fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Test hook: forces [`saturated`] (and so [`yields_are_slow`]) to
/// `Some(verdict)`, or returns it to the sampler (`None`). Process-wide.
#[doc(hidden)]
pub fn set_saturation_override(verdict: Option<bool>) {
    let o = match verdict {
        None => NO_OVERRIDE,
        Some(false) => NEVER,
        Some(true) => ALWAYS,
    };
    // Relaxed: a process-wide hint; `fetch_update` keeps the sample's bit.
    let _ = STATE.fetch_update(Relaxed, Relaxed, |s| Some((s & !OVERRIDE_MASK) | o));
    if verdict == Some(false) {
        SLOW_UNTIL.store(0, Relaxed);
    }
}

#[cfg(not(loom))]
fn since_epoch() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    // Never 0, so that 0 can mean "never".
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

#[cfg(not(loom))]
fn sample() {
    let Some(running) = procs_running() else {
        STATE.fetch_and(!(SAMPLED | HEAVY), Relaxed);
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
    if load > cpus * CROWDED {
        STATE.fetch_or(HEAVY, Relaxed);
    } else {
        STATE.fetch_and(!HEAVY, Relaxed);
    }
}

/// The runnable threads, from `/proc/loadavg`'s fourth field
/// (`running/total`, the same count as `procs_running` in `/proc/stat`), if
/// readable. Read into a stack buffer: the sampler allocates nothing, so it
/// never shows in a count of live bytes taken by another thread.
#[cfg(not(loom))]
fn procs_running() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use std::io::Read;
        let mut buf = [0u8; 128];
        let mut file = std::fs::File::open("/proc/loadavg").ok()?;
        let mut len = 0;
        while len < buf.len() {
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(_) => return None,
            }
        }
        let text = core::str::from_utf8(&buf[..len]).ok()?;
        let field = text.split_ascii_whitespace().nth(3)?;
        field.split('/').next()?.parse().ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
