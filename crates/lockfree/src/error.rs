//! The semaphore's errors, named as `tokio::sync`'s so that code moves
//! between the two without surprises.

use core::fmt;

/// The semaphore was [closed](crate::Semaphore::close): an acquire that
/// waits, or starts, after the close fails with this error.
///
/// # Examples
///
/// ```
/// use lockfree_sync::{AcquireError, Semaphore};
///
/// let sem = Semaphore::new(1);
/// sem.close();
/// assert_eq!(sem.acquire().unwrap_err(), AcquireError::closed());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AcquireError(());

impl AcquireError {
    /// The error (there is only one reason: the semaphore is closed).
    ///
    /// # Examples
    ///
    /// ```
    /// let e = lockfree_sync::AcquireError::closed();
    /// assert_eq!(e.to_string(), "semaphore closed");
    /// ```
    pub const fn closed() -> Self {
        Self(())
    }
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("semaphore closed")
    }
}

impl std::error::Error for AcquireError {}

/// Why a `try_acquire*` call (including a timed one) returned without
/// permits.
///
/// # Examples
///
/// ```
/// use lockfree_sync::{Semaphore, TryAcquireError};
///
/// let sem = Semaphore::new(0);
/// assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::NoPermits);
/// sem.close();
/// assert_eq!(sem.try_acquire().unwrap_err(), TryAcquireError::Closed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TryAcquireError {
    /// The semaphore was [closed](crate::Semaphore::close).
    Closed,
    /// Too few permits were free (for a timed call: until the deadline), or
    /// other requests were waiting for them.
    NoPermits,
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("semaphore closed"),
            Self::NoPermits => f.write_str("no permits available"),
        }
    }
}

impl std::error::Error for TryAcquireError {}

impl From<AcquireError> for TryAcquireError {
    fn from(_: AcquireError) -> Self {
        Self::Closed
    }
}
