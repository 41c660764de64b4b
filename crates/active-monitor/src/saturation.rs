//! Whether the CPUs are saturated: the paper's switch from server threads
//! to plain locking ("the runtime library monitors ... CPU usage, for
//! example from /proc/stat ... If the CPU usage is high, our framework
//! switches to traditional locking", section 6.2).
//!
//! The measure is the kernel's count of runnable threads
//! (`procs_running`, read from `/proc/loadavg`), against the CPUs this process may
//! use ([`std::thread::available_parallelism`]). More runnable threads
//! than CPUs means that a server thread would share a CPU with the
//! workers it serves: every hand-over to it then waits for a time slice,
//! and a submitter that runs the task itself (combining, which is the lock
//! path) is faster. The count is smoothed (an exponentially weighted
//! average, a quarter per sample) and compared with a half-thread
//! hysteresis, so that one busy instant does not flip the mode.
//!
//! The sample is taken at most every
//! [`INTERVAL`](sync_core::load::INTERVAL) by whoever calls [`tick`] when
//! it is due (server threads when they wake or go idle, and every 64th
//! decision of a submitter between a served monitor's server and running
//! the task itself), and cached in an atomic: [`saturated`] is one relaxed
//! load, and a submitter's decision adds a thread-local count. Elsewhere
//! than on Linux, or when `/proc/loadavg` cannot be read, the CPUs are
//! never saturated (servers always serve).
//!
//! The sampler is the family's, [`sync_core::load`] (which also tells the
//! wait loops when yields are slow); this module names what the monitors
//! use of it. Under loom nothing is sampled (never saturated, unless a
//! test overrides it).

pub(crate) use sync_core::load::{cpus, saturated, tick, tick_sometimes};

/// [`saturated`], for a submitter deciding, before it holds the monitor,
/// whether a served monitor's task goes to its server: every 64th call of
/// the thread first samples the load if a sample is due
/// ([`tick_sometimes`]). The submitters must keep the verdict current
/// themselves: while it says "saturated" they run the tasks, the server
/// sleeps, and nobody else may sample; a verdict left by a burst of load
/// would then outlive the load for as long as they submit. A holder of the
/// monitor reads the cached verdict: a sample reads a file, which does not
/// belong in a critical section.
#[inline]
pub(crate) fn saturated_now() -> bool {
    tick_sometimes();
    saturated()
}

/// Whether the CPUs are saturated, as the monitors see it now: the last
/// sample of the runnable threads (`procs_running`, from `/proc/loadavg`, taken
/// at most every 5 ms while monitors with servers are in use), smoothed,
/// against [`std::thread::available_parallelism`]. Always `false` where
/// `/proc/loadavg` cannot be read.
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
pub fn __test_set_saturation_override(verdict: Option<bool>) {
    sync_core::load::set_saturation_override(verdict);
}
