//! The crate's errors. The semaphore's are named as `tokio::sync`'s so that
//! code moves between the two without surprises; the CSP channel's are
//! re-exported from [`csp`](crate::csp).

use core::fmt;

/// The semaphore was [closed](crate::Semaphore::close): an acquire that
/// waits, or starts, after the close fails with this error.
///
/// In async code use [`acquire_async`](crate::Semaphore::acquire_async)`().await`.
/// [`Semaphore::acquire`](crate::Semaphore::acquire) is the blocking form:
/// `sem.acquire().await` does not compile (`Result<SemaphorePermit,
/// AcquireError>` is not a future), and removing the `.await`, as the
/// compiler suggests, blocks the executor's thread while it waits.
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

// The channels' errors, shared by `mpsc` and `csp` (each re-exports them),
// named as std's: one type per way a send or a receive can fail.

/// A send whose receiver is gone: the value comes back.
///
/// Returned by [`mpsc::Sender::send`](crate::mpsc::Sender::send) and
/// [`csp::Sender::send`](crate::csp::Sender::send).
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// drop(rx);
/// let lockfree_sync::mpsc::SendError(back) = tx.send(String::from("kept")).unwrap_err();
/// assert_eq!(back, "kept");
///
/// let (mut tx, rx) = lockfree_sync::csp::channel();
/// drop(rx);
/// let lockfree_sync::csp::SendError(back) = tx.send(vec![1]).unwrap_err();
/// assert_eq!(back, [1]);
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

/// A receive that can never succeed: the senders are gone and nothing is
/// left to receive.
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(lockfree_sync::mpsc::RecvError));
///
/// let (tx, mut rx) = lockfree_sync::csp::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(lockfree_sync::csp::RecvError));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on a channel whose senders are gone")
    }
}

impl std::error::Error for RecvError {}

/// Why an attempt to receive, or a bounded wait to receive, returned
/// nothing: `try_recv`, `try_recv_for` and `try_recv_until` of
/// [`mpsc::Receiver`](crate::mpsc::Receiver) and
/// [`csp::Receiver`](crate::csp::Receiver) (the family's naming rule: a
/// bounded wait returns as the attempt does).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockfree_sync::{csp, mpsc, mpsc::TryRecvError};
/// let (_tx, rx) = mpsc::channel::<u8>();
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// assert_eq!(rx.try_recv_for(Duration::ZERO), Err(TryRecvError::Empty));
/// let (tx, mut rx) = csp::channel::<u8>();
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// drop(tx);
/// let waited = rx.try_recv_for(Duration::from_millis(1));
/// assert_eq!(waited, Err(TryRecvError::Disconnected));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TryRecvError {
    /// Nothing to receive now, or nothing came in time for a bounded wait
    /// (for `csp`: no sender waits, or none came).
    Empty,
    /// Nothing to receive, and the senders are gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("receiving on an empty channel"),
            Self::Disconnected => f.write_str("receiving on a channel whose senders are gone"),
        }
    }
}

impl std::error::Error for TryRecvError {}

// The CSP channel's own errors (`crate::csp` re-exports them): only a CSP
// send can wait or be refused, and only an ALT selects.

/// Why [`Sender::try_send`](crate::csp::Sender::try_send), or a bounded
/// wait to send ([`try_send_for`](crate::csp::Sender::try_send_for),
/// [`try_send_until`](crate::csp::Sender::try_send_until)), did not send:
/// the value comes back either way.
///
/// # Examples
///
/// ```
/// use lockfree_sync::csp::{self, TrySendError};
///
/// let (mut tx, rx) = csp::channel();
/// drop(rx);
/// assert_eq!(tx.try_send(3), Err(TrySendError::Disconnected(3)));
/// assert_eq!(TrySendError::Full(4).into_inner(), 4);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// No receiver was waiting (a rendezvous channel holds no value), or
    /// none took the value in time for a bounded wait.
    Full(T),
    /// The receiver is gone.
    Disconnected(T),
}

impl<T> TrySendError<T> {
    /// The value that was not sent.
    ///
    /// # Examples
    ///
    /// ```
    /// let e = lockfree_sync::csp::TrySendError::Full('v');
    /// assert_eq!(e.into_inner(), 'v');
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(v) | Self::Disconnected(v) => v,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
            Self::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("no receiver waits on the CSP channel"),
            Self::Disconnected(_) => f.write_str("sending on a CSP channel whose receiver is gone"),
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}
