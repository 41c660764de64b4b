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

// The `mpsc` channel's errors (re-exported as `mpsc::SendError`, ...),
// named as std's.

/// A send on a channel whose receiver is gone: the value comes back.
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// drop(rx);
/// let lockfree_sync::mpsc::SendError(back) = tx.send(String::from("kept")).unwrap_err();
/// assert_eq!(back, "kept");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receiver is gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Every sender is gone and every message has been received.
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(lockfree_sync::mpsc::RecvError));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders are gone")
    }
}

impl std::error::Error for RecvError {}

/// Why [`Receiver::try_recv`](crate::mpsc::Receiver::try_recv) returned no message.
///
/// # Examples
///
/// ```
/// use lockfree_sync::mpsc::{self, TryRecvError};
/// let (_tx, rx) = mpsc::channel::<u8>();
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing is queued now.
    Empty,
    /// Nothing is queued and every sender is gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("receiving on an empty channel"),
            Self::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are gone")
            }
        }
    }
}

impl std::error::Error for TryRecvError {}

/// Why [`Receiver::try_recv_for`](crate::mpsc::Receiver::try_recv_for) returned no message.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockfree_sync::mpsc::{self, RecvTimeoutError};
/// let (_tx, rx) = mpsc::channel::<u8>();
/// assert_eq!(rx.try_recv_for(Duration::ZERO), Err(RecvTimeoutError::Timeout));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvTimeoutError {
    /// Nothing came before the deadline.
    Timeout,
    /// Nothing is queued and every sender is gone.
    Disconnected,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out waiting on a channel"),
            Self::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are gone")
            }
        }
    }
}

impl std::error::Error for RecvTimeoutError {}
