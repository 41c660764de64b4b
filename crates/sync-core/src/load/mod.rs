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
//!   longer than [`SLOW_YIELD`] recently while the threads besides this
//!   process's yielding waiters saturated the CPUs (remembered for
//!   [`SLOW_YIELD_MEMORY`], longer while yields keep being slow, and
//!   forgotten by the first sample that finds those threads no longer
//!   saturating the CPUs).
//!
//! **Our own yielding waiters are not load.** A thread that yields in a
//! wait loop is runnable, and a yield passes through every other yielder;
//! but each of them gives the core back at once, so a thousand of this
//! process's waiters yielding in turn do not make a yield give the core
//! away for a scheduling round, as a thousand busy threads would. So both
//! signals of [`yields_are_slow`] leave them out: the threads of this
//! process inside [`measured_yield`] ([`own_yielders`]) are subtracted from
//! the runnable count before it is compared with [`CROWDED`], and a
//! measured yield is slow only beyond [`SLOW_YIELD`] plus
//! [`OWN_YIELDER_TURN`] for each of them on its CPU. [`saturated`] counts
//! every runnable thread, yielders included: they do share the CPUs.
//!
//! **Nor is a yield behind one working thread a CPU.** A measured yield
//! counts as slow only while the runnable threads besides our yielders
//! outnumber the CPUs. With at most one of them per CPU, a yield waits
//! behind the one working there, however long it works, but nothing piles
//! up behind it, and it is often the thread the yielder waits for or
//! hands to: a pipeline of more stages than CPUs, passing values along by
//! yielding, has about one working stage per CPU, which runs on for as
//! long as its partners on the other CPU are ready. Parking there would
//! turn every handoff into a wake-up, and the parked stages' wake-ups
//! into more slow yields.
//!
//! A yielding waiter counts itself in a counter of the CPU it yields on,
//! each on a cache line of its own: a pipeline of threads that hand values
//! along by yielding to each other (two read-modify-writes a yield) would
//! otherwise pass one counter's line between the CPUs on every yield.
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

use crate::CachePadded;
use std::sync::OnceLock;
// Process-wide statics: std's atomics in every build (see the module doc).
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

#[cfg(not(loom))]
mod procfs;
#[cfg(not(loom))]
pub(crate) use procfs::procs_running;

/// The shortest time between two samples of the load.
pub const INTERVAL: Duration = Duration::from_millis(5);

/// A yield that took longer than this gave the core to other runnable
/// threads: an uncontended yield is a system call of a microsecond or two.
pub const SLOW_YIELD: Duration = Duration::from_micros(200);

/// How long a slow yield is remembered at first: meanwhile
/// [`yields_are_slow`]. A yield found slow again within this long after
/// the memory of the last one ran out doubles the next memory, up to
/// [`SLOW_YIELD_MEMORY_MAX`]; a yield measured fast starts over from this.
/// So under lasting load (threads that never block) the waiters that
/// find out by yielding, a scheduling round each, become rare. A sample
/// ([`tick`]) that finds the CPUs no longer [`saturated`] forgets the
/// memory at once: the threads that made yields slow have gone.
pub const SLOW_YIELD_MEMORY: Duration = Duration::from_millis(250);

/// A yield at least this slow gave the core away for a scheduling round
/// (several milliseconds with a few busy threads per CPU): only such yields,
/// found again soon after the memory of the last one ran out, lengthen the
/// memory (see [`SLOW_YIELD_MEMORY`]). A yield slower than [`SLOW_YIELD`]
/// but shorter than this waited behind a few threads that soon blocked:
/// remembered for [`SLOW_YIELD_MEMORY`] only.
pub const ROUND_YIELD: Duration = Duration::from_millis(4);

/// The longest a slow yield is remembered (see [`SLOW_YIELD_MEMORY`]).
pub const SLOW_YIELD_MEMORY_MAX: Duration = Duration::from_secs(4);

/// The verdict: bits 0-1 the override ([`NO_OVERRIDE`], [`NEVER`],
/// [`ALWAYS`]), bits 2-4 ([`SAMPLED`], [`HEAVY`], [`OTHERS_SATURATE`]) the
/// sampler's own verdicts, kept while an override hides them. One word, so
/// that a sample and an override never overwrite each other.
static STATE: AtomicU8 = AtomicU8::new(0);
const NO_OVERRIDE: u8 = 0;
const NEVER: u8 = 1;
const ALWAYS: u8 = 2;
const OVERRIDE_MASK: u8 = 3;
const SAMPLED: u8 = 4;
/// The sampler's verdict that the CPUs are heavily oversubscribed (more
/// than [`CROWDED`] runnable threads per CPU).
const HEAVY: u8 = 8;
/// The sampler's verdict that the runnable threads besides this process's
/// yielding waiters outnumber the CPUs: only then does a slow measured
/// yield count (see [`measured_yield`]).
const OTHERS_SATURATE: u8 = 16;
/// The sampler's verdicts, every bit of [`STATE`] besides the override.
#[cfg_attr(loom, allow(dead_code))]
const SAMPLED_BITS: u8 = SAMPLED | HEAVY | OTHERS_SATURATE;

/// Runnable threads per CPU beyond which a yield is taken to be slow
/// without measuring one. Between one and this many, yields are measured:
/// a few threads that block often leave a yield cheap (the thread it
/// yields to soon blocks), and parking instead would cost a wake-up.
pub const CROWDED: u64 = 4;
/// What one of this process's yielding waiters is taken to cost a yield
/// that passes through it: it runs, finds its state unchanged and yields
/// again (two system calls and a context switch). A yield is slow
/// (see [`measured_yield`]) only beyond [`SLOW_YIELD`] plus this for each
/// other thread of this process that was yielding on the same CPU.
pub const OWN_YIELDER_TURN: Duration = Duration::from_micros(5);

/// A yield that returned within this gave the core to nobody: no other
/// thread was runnable on its CPU (see [`paced_yield`]).
pub const QUICK_YIELD: Duration = Duration::from_micros(5);

/// The spin hints [`paced_yield`] makes after a yield that gave the core to
/// nobody.
pub const YIELD_PACE: u32 = 16;

/// The counters of [`YIELDERS`]; CPUs beyond them share counters (a CPU
/// counts in the one of its number modulo this).
const YIELDER_COUNTERS: usize = 16;

/// The threads of this process inside [`measured_yield`], each counted in
/// the counter of the CPU its yield began on (the first one where the
/// platform does not say: see [`crate::sync::thread::current_cpu`]), one
/// cache line each.
static YIELDERS: [CachePadded<AtomicUsize>; YIELDER_COUNTERS] =
    [const { CachePadded::new(AtomicUsize::new(0)) }; YIELDER_COUNTERS];
/// When the next sample is due, in nanoseconds since [`since_epoch`]'s epoch.
#[cfg_attr(loom, allow(dead_code))]
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The smoothed count of runnable threads, in sixteenths.
#[cfg_attr(loom, allow(dead_code))]
static LOAD: AtomicU64 = AtomicU64::new(0);
/// The smoothed count of runnable threads other than [`own_yielders`], in
/// sixteenths.
#[cfg_attr(loom, allow(dead_code))]
static OTHERS: AtomicU64 = AtomicU64::new(0);
/// Until when (nanoseconds since the epoch) yields count as slow after a
/// slow one was measured; 0: none measured.
static SLOW_UNTIL: AtomicU64 = AtomicU64::new(0);
/// How many times [`SLOW_YIELD_MEMORY`] was doubled for the memory that
/// `SLOW_UNTIL` ends (see [`remember_slow_yield`]).
static MEMORY_DOUBLINGS: AtomicU8 = AtomicU8::new(0);

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
    sampled_verdict(SAMPLED)
}

/// The sampler's verdict `bit` of [`STATE`] (`SAMPLED`, `HEAVY` or
/// `OTHERS_SATURATE`), unless an override hides it.
#[inline]
fn sampled_verdict(bit: u8) -> bool {
    let s = STATE.load(Relaxed);
    match s & OVERRIDE_MASK {
        NEVER => false,
        ALWAYS => true,
        _ => s & bit != 0,
    }
}

/// Whether a yield would give the core away for a scheduling round: more
/// than [`CROWDED`] threads per CPU are runnable besides this process's
/// yielding waiters (as last sampled), or a yield measured by
/// [`measured_yield`] was slow within the last [`SLOW_YIELD_MEMORY`] and
/// no sample since has found the threads besides this process's yielding
/// waiters no longer saturating the CPUs.
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

/// Whether the CPUs are heavily oversubscribed, as last sampled: more
/// than [`CROWDED`] runnable threads per CPU besides this process's
/// yielding waiters. The half of [`yields_are_slow`] that no measured
/// yield feeds: a yield that waited behind this process's own working
/// threads (which make progress meanwhile) does not set it. One relaxed
/// load; call [`tick`] from time to time to keep it current.
///
/// # Examples
///
/// ```
/// let crowded = sync_core::load::crowded();
/// // Crowded CPUs make yields slow.
/// assert!(!crowded || sync_core::load::yields_are_slow());
/// ```
#[inline]
pub fn crowded() -> bool {
    sampled_verdict(HEAVY)
}

/// Yields the core once and records how long that took, so that later
/// waiters see [`yields_are_slow`]: a yield is slow if it took longer than
/// [`SLOW_YIELD`] plus [`OWN_YIELDER_TURN`] for each other thread of this
/// process that was yielding on its CPU when it began (a yield passes
/// through them, and they give the core back at once), and the runnable
/// threads besides this process's yielders outnumber the CPUs (sampled
/// then with [`tick`]; see the module's doc): with a CPU idle, a slow
/// yield only met another thread placed on the same CPU for a moment, and
/// with one such thread a CPU it waited behind that thread's work, not
/// behind a queue of threads.
/// While it yields the caller counts in [`own_yielders`]. Under loom, a
/// plain yield to the model.
///
/// # Examples
///
/// ```
/// sync_core::load::measured_yield();
/// ```
pub fn measured_yield() {
    let _ = measured_yield_took();
}

/// A [`measured_yield`] for a watch that polls again at once: one that
/// gave the core to nobody (returned within [`QUICK_YIELD`]: no other
/// thread wanted this CPU) is followed by [`YIELD_PACE`] spin hints. Two
/// threads handing a lock or a buffer back and forth on their own CPUs
/// otherwise poll the line the other is writing as often as a system call
/// returns, and each poll takes the line from the thread that works on it.
/// Under loom, a plain yield to the model.
///
/// # Examples
///
/// ```
/// sync_core::load::paced_yield();
/// // It counted itself among the yielders only while it yielded.
/// assert_eq!(sync_core::load::own_yielders(), 0);
/// ```
pub fn paced_yield() {
    let took = measured_yield_took();
    // Not under loom, where a spin hint is one more yield to the model.
    if !cfg!(loom) && took < QUICK_YIELD {
        for _ in 0..YIELD_PACE {
            core::hint::spin_loop();
        }
    }
}

/// Yields the core once, counted among [`own_yielders`] while it yields
/// (so that a sample does not take this process's waiters for load, as
/// with [`measured_yield`]), but not judged: it leaves
/// [`yields_are_slow`] as it was. Returns how long the yield took (zero
/// under loom, where it is a plain yield to the model). For a waiter that
/// yields whatever a yield costs while the CPUs are not [`crowded`] (see
/// [`Watch::yields_unless_crowded`](crate::wait::Watch::yields_unless_crowded)).
///
/// # Examples
///
/// ```
/// let took = sync_core::load::counted_yield();
/// # let _ = took;
/// // It counted itself among the yielders only while it yielded.
/// assert_eq!(sync_core::load::own_yielders(), 0);
/// ```
pub fn counted_yield() -> Duration {
    #[cfg(loom)]
    {
        crate::sync::thread::yield_now();
        Duration::ZERO
    }
    #[cfg(not(loom))]
    {
        yield_counted().1
    }
}

/// Yields once, counted in the yielders of the CPU it began on; returns
/// how many of ours were yielding there then, and how long it took.
#[cfg(not(loom))]
fn yield_counted() -> (usize, Duration) {
    // Relaxed: a count for a heuristic; nothing is published with it.
    let counter = cpu_counter();
    // The same counter after the yield, wherever the thread runs then.
    let beside = counter.fetch_add(1, Relaxed);
    let began = Instant::now();
    std::thread::yield_now();
    let took = began.elapsed();
    counter.fetch_sub(1, Relaxed);
    (beside, took)
}

/// [`measured_yield`], telling how long the yield took (zero under loom).
fn measured_yield_took() -> Duration {
    #[cfg(loom)]
    {
        crate::sync::thread::yield_now();
        Duration::ZERO
    }
    #[cfg(not(loom))]
    {
        let (beside, took) = yield_counted();
        let sampled_saturation = || {
            tick();
            sampled_verdict(OTHERS_SATURATE)
        };
        if counts_as_slow(took, beside, sampled_saturation) {
            let now = since_epoch();
            let was = SLOW_UNTIL.load(Relaxed);
            // Relaxed, both: a heuristic's state; two yielders that race
            // here leave one of their (equally valid) memories.
            let doublings = remember_slow_yield(took, was, now, MEMORY_DOUBLINGS.load(Relaxed));
            MEMORY_DOUBLINGS.store(doublings, Relaxed);
            SLOW_UNTIL.fetch_max(now + memory(doublings), Relaxed);
        } else if MEMORY_DOUBLINGS.load(Relaxed) != 0 {
            // Read first: yielding waiters measure often, and a store on
            // every yield would move the line between their CPUs.
            MEMORY_DOUBLINGS.store(0, Relaxed);
        }
        took
    }
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

/// How many threads of this process are yielding in [`measured_yield`]
/// now (a snapshot): the runnable threads that [`yields_are_slow`] does not
/// count as load.
///
/// # Examples
///
/// ```
/// // No other thread of this doctest yields.
/// assert_eq!(sync_core::load::own_yielders(), 0);
/// ```
pub fn own_yielders() -> usize {
    YIELDERS.iter().map(|c| c.load(Relaxed)).sum()
}

/// The counter of [`YIELDERS`] of the CPU the caller runs on.
#[cfg(not(loom))]
fn cpu_counter() -> &'static AtomicUsize {
    let cpu = crate::sync::thread::current_cpu().map_or(0, |cpu| cpu as usize);
    &YIELDERS[cpu % YIELDER_COUNTERS]
}

/// The doublings that take [`SLOW_YIELD_MEMORY`] to [`SLOW_YIELD_MEMORY_MAX`].
const MOST_DOUBLINGS: u8 =
    (SLOW_YIELD_MEMORY_MAX.as_nanos() / SLOW_YIELD_MEMORY.as_nanos()).ilog2() as u8;

/// The doublings of the memory of a yield that took `took` (a slow one)
/// measured at `now`, when the last memory (of `doublings` doublings) ends
/// at `was` (0: none): for a yield of a scheduling round ([`ROUND_YIELD`]
/// or more), one more if that memory ran out less than
/// [`SLOW_YIELD_MEMORY`] ago (the load lasted), the same while it runs (a
/// yield that began before it); none otherwise.
///
/// Shorter slow yields never lengthen the memory. Threads that run briefly
/// and block (a semaphore passed around a dozen threads) make a yield wait
/// behind a few of them now and then, for a millisecond or two, while most
/// of their yields are fast; a memory doubled by those kept such waiters
/// parking for seconds, and a FIFO semaphore whose waiters park hands each
/// permit to a thread that must be woken first.
#[cfg_attr(loom, allow(dead_code))]
fn remember_slow_yield(took: Duration, was: u64, now: u64, doublings: u8) -> u8 {
    let base = SLOW_YIELD_MEMORY.as_nanos() as u64;
    if took < ROUND_YIELD || was == 0 || now >= was + base {
        0
    } else if now >= was {
        doublings.saturating_add(1).min(MOST_DOUBLINGS)
    } else {
        doublings
    }
}

/// The memory of a slow yield after `doublings` doublings, in nanoseconds.
#[cfg_attr(loom, allow(dead_code))]
fn memory(doublings: u8) -> u64 {
    (SLOW_YIELD_MEMORY.as_nanos() as u64) << doublings
}

/// Whether a yield that took `took`, begun beside `beside` of our yielders
/// on its CPU, shows that yields are slow. Only past
/// [`slow_yield_beside`], and only if `saturated` (asked only then, since
/// it samples the load) says the threads besides our yielders saturate
/// the CPUs: a slow yield on a machine with an idle CPU was the
/// scheduler's placement (two runnable threads on one CPU, which its
/// balancing soon undoes), and one beside a single working thread a CPU
/// waited for that thread's work; neither is a sign that yields are slow.
#[cfg_attr(loom, allow(dead_code))]
fn counts_as_slow(took: Duration, beside: usize, saturated: impl FnOnce() -> bool) -> bool {
    took > slow_yield_beside(beside) && saturated()
}

/// How long a yield may take beside `beside` yielding threads of this
/// process on its CPU before it counts as slow.
#[cfg_attr(loom, allow(dead_code))]
fn slow_yield_beside(beside: usize) -> Duration {
    let turns = u32::try_from(beside).unwrap_or(u32::MAX);
    SLOW_YIELD.saturating_add(OWN_YIELDER_TURN.saturating_mul(turns))
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

/// Test hook: forces [`saturated`] (and so [`yields_are_slow`] and
/// [`crowded`]) to `Some(verdict)`, or returns it to the sampler (`None`).
/// Process-wide.
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
        forget_slow_yields();
    }
}

/// Test hook: the verdicts that a sample of `running` runnable threads
/// taken just now would leave with no sample before it (the smoothed
/// counts start over from it), as a burst of load that has since gone
/// leaves them; the next sample is due after [`INTERVAL`]. Process-wide.
#[cfg(not(loom))]
#[doc(hidden)]
pub fn record_sample_for_test(running: u64) {
    LOAD.store(0, Relaxed);
    OTHERS.store(0, Relaxed);
    record(running);
    NEXT.store(since_epoch() + INTERVAL.as_nanos() as u64, Relaxed);
}

#[cfg(not(loom))]
fn since_epoch() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    // Never 0, so that 0 can mean "never".
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// A quarter of the new sample `now` (a count) into the smoothed `was` (in
/// sixteenths; 0: no sample yet): a few samples (tens of ms) to move.
#[cfg_attr(loom, allow(dead_code))]
fn smooth(was: u64, now: u64) -> u64 {
    if was == 0 {
        now * 16
    } else {
        (3 * was + now * 16) / 4
    }
}

/// The runnable threads that are not this process's yielding waiters:
/// `running` sampled, `yielders` of ours among them (read beside it, so
/// perhaps a few more than were counted; the sampling thread stays).
#[cfg_attr(loom, allow(dead_code))]
fn others_running(running: u64, yielders: usize) -> u64 {
    running.saturating_sub(yielders as u64).max(1)
}

#[cfg(not(loom))]
fn sample() {
    let Some(running) = procs_running() else {
        STATE.fetch_and(!SAMPLED_BITS, Relaxed);
        forget_slow_yields();
        return;
    };
    record(running);
}

/// Folds `running` runnable threads, just counted, into the smoothed
/// counts and the verdicts.
#[cfg(not(loom))]
fn record(running: u64) {
    let others = others_running(running, own_yielders());
    let load = smooth(LOAD.load(Relaxed), running);
    LOAD.store(load, Relaxed);
    let others = smooth(OTHERS.load(Relaxed), others);
    OTHERS.store(others, Relaxed);
    let cpus = cpus() as u64;
    let next = |s: u8| (s & !SAMPLED_BITS) | verdicts(s, load, others, cpus);
    // Relaxed: a heuristic's state. One update of the word, which keeps an
    // override stored meanwhile.
    let (Ok(was) | Err(was)) = STATE.fetch_update(Relaxed, Relaxed, |s| Some(next(s)));
    if next(was) & OTHERS_SATURATE == 0 {
        forget_slow_yields();
    }
}

/// The sampler's verdicts ([`SAMPLED`], [`HEAVY`], [`OTHERS_SATURATE`])
/// for the smoothed runnable threads `load` and `others` (in sixteenths),
/// on `cpus` CPUs, the last verdicts being `was`. Runnable threads include
/// the sampling one: a count saturates the CPUs above `cpus + 1/2`, and no
/// longer at `cpus` or below.
#[cfg_attr(loom, allow(dead_code))]
fn verdicts(was: u8, load: u64, others: u64, cpus: u64) -> u8 {
    let cpus = cpus * 16;
    let over = |count: u64, bit: u8| {
        let saturates = if was & bit != 0 {
            count > cpus
        } else {
            count > cpus + 8
        };
        if saturates { bit } else { 0 }
    };
    let heavy = if others > cpus * CROWDED { HEAVY } else { 0 };
    over(load, SAMPLED) | over(others, OTHERS_SATURATE) | heavy
}

/// Forgets the slow yields measured so far, because the threads besides
/// this process's yielders no longer saturate the CPUs: a yield counts as
/// slow only while they do (see [`measured_yield`]), since it gave the
/// core to threads that held every CPU, and a sample with a CPU to spare
/// for each of them says those threads have gone.
/// Without this, waiters that park because of the memory never measure a
/// yield that would refute it, and a burst of load (a spin lock's
/// yielding waiters, a build) would keep every waiter of the process
/// parking for up to [`SLOW_YIELD_MEMORY_MAX`] after it ended.
fn forget_slow_yields() {
    // Read first: the sampler runs every few ms, and most samples find
    // nothing to forget.
    if SLOW_UNTIL.load(Relaxed) != 0 {
        SLOW_UNTIL.store(0, Relaxed);
    }
    if MEMORY_DOUBLINGS.load(Relaxed) != 0 {
        MEMORY_DOUBLINGS.store(0, Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn own_yielders_are_not_counted_as_crowding() {
        // A thousand of our waiters yielding beside two runnable threads.
        assert_eq!(others_running(1002, 1000), 2);
        // Counted a moment later than `running`: never below one.
        assert_eq!(others_running(5, 9), 1);
        assert_eq!(others_running(40, 0), 40);
    }

    #[test]
    fn a_slow_yield_counts_only_on_saturated_cpus() {
        let slow = SLOW_YIELD * 20;
        assert!(counts_as_slow(slow, 0, || true));
        // An idle CPU: the yield met a thread placed beside it for a moment.
        assert!(!counts_as_slow(slow, 0, || false));
        // A fast yield never asks (asking samples the load).
        assert!(!counts_as_slow(SLOW_YIELD / 2, 0, || {
            panic!("a fast yield sampled the load")
        }));
    }

    #[test]
    fn our_yielders_saturate_the_cpus_but_do_not_make_yields_slow() {
        let t = |n: u64| n * 16;
        // Eight runnable threads on 2 CPUs, all but two of them our
        // yielders (a pipeline): saturated, but a slow yield does not count.
        assert_eq!(verdicts(0, t(8), t(2), 2), SAMPLED);
        // Five besides our yielders: it counts, and is not yet crowded.
        assert_eq!(verdicts(0, t(8), t(5), 2), SAMPLED | OTHERS_SATURATE);
        // More than CROWDED a CPU besides them: crowded as well.
        let crowded = t(2 * CROWDED + 1);
        assert_eq!(
            verdicts(0, crowded, crowded, 2),
            SAMPLED | OTHERS_SATURATE | HEAVY
        );
    }

    #[test]
    fn a_verdict_of_saturation_has_half_a_thread_of_hysteresis() {
        let all = SAMPLED | OTHERS_SATURATE;
        // Two and a quarter threads on 2 CPUs: saturated only if it was.
        assert_eq!(verdicts(0, 36, 36, 2), 0);
        assert_eq!(verdicts(all, 36, 36, 2), all);
        assert_eq!(verdicts(SAMPLED, 36, 36, 2), SAMPLED);
        // Past two and a half: saturated either way; at two: neither.
        assert_eq!(verdicts(0, 41, 41, 2), all);
        assert_eq!(verdicts(all, 32, 32, 2), 0);
    }

    #[test]
    fn a_yield_through_our_own_yielders_may_take_longer() {
        assert_eq!(slow_yield_beside(0), SLOW_YIELD);
        assert_eq!(slow_yield_beside(500), SLOW_YIELD + OWN_YIELDER_TURN * 500);
        // No overflow, however many.
        assert!(slow_yield_beside(usize::MAX) > Duration::from_secs(3600));
    }

    #[test]
    fn a_slow_yield_is_remembered_longer_while_the_load_lasts() {
        let base = SLOW_YIELD_MEMORY.as_nanos() as u64;
        let round = ROUND_YIELD;
        // The first slow yield: the base memory.
        assert_eq!(remember_slow_yield(round, 0, 10, 0), 0);
        assert_eq!(memory(0), base);
        // Slow again soon after the memory ran out: doubled, each time.
        assert_eq!(remember_slow_yield(round, 1000, 1000, 0), 1);
        assert_eq!(remember_slow_yield(round, 1000, 1000 + base - 1, 1), 2);
        assert_eq!(memory(2), 4 * base);
        // Up to the longest memory, and no further.
        let most = remember_slow_yield(round, 1000, 1000, 200);
        assert_eq!(memory(most), SLOW_YIELD_MEMORY_MAX.as_nanos() as u64);
        // A yield that began before the memory ran out changes nothing.
        assert_eq!(remember_slow_yield(round, 1000, 999, 3), 3);
        // Slow again long after: the load had gone; the base again.
        assert_eq!(remember_slow_yield(round, 1000, 1000 + base, 3), 0);
    }

    #[test]
    fn only_a_yield_of_a_scheduling_round_lengthens_the_memory() {
        let short = SLOW_YIELD * 5;
        assert!(short < ROUND_YIELD);
        // Soon after a memory ran out, a round-long yield doubles it and a
        // merely slow one starts over from the base.
        assert_eq!(remember_slow_yield(ROUND_YIELD, 1000, 1000, 2), 3);
        assert_eq!(remember_slow_yield(short, 1000, 1000, 2), 0);
        assert_eq!(remember_slow_yield(short, 1000, 999, 2), 0);
    }

    #[test]
    fn smoothing_moves_a_quarter_of_the_way() {
        assert_eq!(smooth(0, 3), 48);
        assert_eq!(smooth(64, 0), 48);
        assert_eq!(smooth(16, 5), (48 + 80) / 4);
    }
}
