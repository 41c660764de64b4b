//! Error types.

use core::fmt;

/// A task that never ran: its [`Monitor`](crate::Monitor) was dropped while
/// the task's precondition was false (or, for an [`or`](crate::or), while no
/// operand could run), so nothing could ever run it. For an
/// [`and`](crate::and), one operand never ran; the others may have, and
/// their results were dropped (see [`and`](crate::and)'s `# Panics`).
///
/// # Examples
///
/// ```
/// use active_monitor::{Discarded, Monitor};
///
/// let m = Monitor::new(false);
/// let c = m.when(|ready| *ready, |_| ());
/// drop(m);
/// assert_eq!(c.wait_result(), Err(Discarded));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Discarded;

impl fmt::Display for Discarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the task was discarded: its monitor was dropped before its precondition held")
    }
}

impl std::error::Error for Discarded {}

/// [`or`](crate::or) or [`and`](crate::and) was given two operands on the
/// same monitor (the paper rejects this: program order could not be kept).
/// The operands are handed back, untouched.
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, SameMonitor, or};
///
/// let m = Monitor::new(0);
/// let err = or((m.op(|_| true, |n| *n), m.op(|_| true, |n| *n))).unwrap_err();
/// assert_eq!((err.first, err.second), (0, 1));
/// ```
pub struct SameMonitor<Ops> {
    /// The operands, as given.
    pub ops: Ops,
    /// The position of the first of two operands on one monitor.
    pub first: usize,
    /// The position of the second.
    pub second: usize,
}

impl<Ops> fmt::Debug for SameMonitor<Ops> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SameMonitor")
            .field("first", &self.first)
            .field("second", &self.second)
            .finish_non_exhaustive()
    }
}

impl<Ops> fmt::Display for SameMonitor<Ops> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "operands {} and {} of an OR/AND are on the same monitor (each operand needs its own monitor)",
            self.first, self.second
        )
    }
}

impl<Ops> std::error::Error for SameMonitor<Ops> {}
