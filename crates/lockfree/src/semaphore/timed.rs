//! The timed forms: `try_acquire_for`, `try_acquire_until` and their
//! `_many` twins, which give up at a deadline.

use core::time::Duration;
use std::time::Instant;

use super::{Semaphore, SemaphorePermit, after, check_request};
use crate::error::TryAcquireError;

impl Semaphore {
    /// Takes one permit, parking the thread until one is free or `timeout`
    /// has passed.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::NoPermits`] if the time ran out (the request is
    /// withdrawn: nothing stays counted or queued),
    /// [`TryAcquireError::Closed`] if the semaphore is closed.
    ///
    /// # Progress
    ///
    /// Returns within `timeout` plus about one scheduling quantum: the
    /// deadline is checked inside the spin and yield loops too. One
    /// exception: a request that times out while releases are arriving may
    /// find it must deliver them to the waiters behind it (the semaphore has
    /// no lock, so whoever holds the deliverer's role does the delivering),
    /// and it returns once the releases stop arriving faster than it hands
    /// them out.
    ///
    /// # Panics
    ///
    /// A wait that times out withdraws its request, which may hand the
    /// permits kept for it to the waiters behind it and wake their tasks:
    /// if such a waker panics, the panic goes on out of this call once the
    /// withdrawal is complete, with no permit held, unless the thread is
    /// already unwinding (then it is dropped). See the type's *Panics*.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread until the deadline. Called from a task on a
    /// single-threaded executor while another task of that executor holds
    /// the permits, it blocks that executor meanwhile: in async code use
    /// [`acquire_async`](Self::acquire_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::{Semaphore, TryAcquireError};
    ///
    /// let sem = Semaphore::new(0);
    /// let r = sem.try_acquire_for(Duration::from_millis(1));
    /// assert_eq!(r.unwrap_err(), TryAcquireError::NoPermits);
    /// ```
    pub fn try_acquire_for(
        &self,
        timeout: Duration,
    ) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many_for(1, timeout)
    }

    /// [`try_acquire_for`](Self::try_acquire_for) for `n` permits at once.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS). A waker's panic
    /// as for [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let sem = lockfree_sync::Semaphore::new(2);
    /// let p = sem.try_acquire_many_for(2, Duration::from_millis(1)).unwrap();
    /// assert_eq!(p.permits(), 2);
    /// ```
    pub fn try_acquire_many_for(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.take_timed(n, after(timeout))?;
        Ok(SemaphorePermit::new(self, n))
    }

    /// Takes one permit, parking the thread until one is free or `deadline`
    /// has passed.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Progress
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Panics
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// let p = sem.try_acquire_until(Instant::now() + Duration::from_millis(1));
    /// assert!(p.is_ok());
    /// ```
    pub fn try_acquire_until(
        &self,
        deadline: Instant,
    ) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many_until(1, deadline)
    }

    /// [`try_acquire_until`](Self::try_acquire_until) for `n` permits at
    /// once.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS). A waker's panic
    /// as for [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// assert!(sem.try_acquire_many_until(2, Instant::now()).is_err());
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    pub fn try_acquire_many_until(
        &self,
        n: usize,
        deadline: Instant,
    ) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.take_timed(n, Some(deadline))?;
        Ok(SemaphorePermit::new(self, n))
    }

    /// Takes `n` permits, parking the thread until they are free or
    /// `deadline` has passed.
    pub(super) fn take_timed(
        &self,
        n: usize,
        deadline: Option<Instant>,
    ) -> Result<(), TryAcquireError> {
        check_request(n);
        match self.try_take_open(n) {
            Err(TryAcquireError::NoPermits) => self.acquire_slow(n, deadline),
            other => other,
        }
    }
}
