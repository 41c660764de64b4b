//! Deadlines, the same way in every primitive of the crate and under loom.

use std::time::Instant;

/// Whether `deadline` has passed (never, for no deadline).
///
/// Never under loom: time is not modelled there, and a branch on the real
/// clock makes a model's executions differ from one run to the next (loom's
/// replay of a recorded execution then panics). A wait with a deadline
/// times out through `Waiter::wait_until` instead, which under loom lets
/// the other threads run once and then gives up, so the models explore the
/// timeout without reading the clock.
#[inline]
pub(crate) fn passed(deadline: Option<Instant>) -> bool {
    #[cfg(loom)]
    {
        let _ = deadline;
        false
    }
    #[cfg(not(loom))]
    deadline.is_some_and(|d| Instant::now() >= d)
}
