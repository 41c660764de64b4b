//! The forms that return an [`ArcSemaphorePermit`]: the semaphore in an
//! [`Arc`], the permit without a lifetime.

use core::time::Duration;
use std::sync::Arc;
use std::time::Instant;

use super::future::Request;
use super::{AcquireArcAsync, ArcSemaphorePermit, Semaphore, after, check_request};
use crate::error::{AcquireError, TryAcquireError};

impl Semaphore {
    /// [`acquire`](Self::acquire), returning an [`ArcSemaphorePermit`],
    /// which keeps the semaphore alive and has no lifetime: for permits
    /// moved to another thread, or kept in a `'static` value.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread. Called from a task on a single-threaded
    /// executor while another task of that executor holds the permits, it
    /// blocks that executor for ever: in async code use
    /// [`acquire_arc_async`](Self::acquire_arc_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    /// let p = sem.acquire_arc().unwrap();
    /// std::thread::spawn(move || drop(p)).join().unwrap(); // 'static
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    pub fn acquire_arc(self: &Arc<Self>) -> Result<ArcSemaphorePermit, AcquireError> {
        self.acquire_many_arc(1)
    }

    /// [`acquire_many`](Self::acquire_many), returning an
    /// [`ArcSemaphorePermit`].
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
    ///
    /// # Deadlocks
    ///
    /// As [`acquire_arc`](Self::acquire_arc); the async twin is
    /// [`acquire_many_arc_async`](Self::acquire_many_arc_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(3));
    /// assert_eq!(sem.acquire_many_arc(3).unwrap().permits(), 3);
    /// ```
    pub fn acquire_many_arc(
        self: &Arc<Self>,
        n: usize,
    ) -> Result<ArcSemaphorePermit, AcquireError> {
        self.take_blocking(n)?;
        Ok(self.arc_permit(n))
    }

    /// [`try_acquire_for`](Self::try_acquire_for), returning an
    /// [`ArcSemaphorePermit`].
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for); the async twin is
    /// [`acquire_arc_async`](Self::acquire_arc_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(0));
    /// assert!(sem.try_acquire_arc_for(Duration::from_millis(1)).is_err());
    /// ```
    pub fn try_acquire_arc_for(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<ArcSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_arc_for(1, timeout)
    }

    /// [`try_acquire_many_for`](Self::try_acquire_many_for), returning an
    /// [`ArcSemaphorePermit`].
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
    /// As [`try_acquire_arc_for`](Self::try_acquire_arc_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(2));
    /// let p = sem.try_acquire_many_arc_for(2, Duration::from_millis(1)).unwrap();
    /// assert_eq!(p.permits(), 2);
    /// ```
    pub fn try_acquire_many_arc_for(
        self: &Arc<Self>,
        n: usize,
        timeout: Duration,
    ) -> Result<ArcSemaphorePermit, TryAcquireError> {
        self.take_timed(n, after(timeout))?;
        Ok(self.arc_permit(n))
    }

    /// [`try_acquire_until`](Self::try_acquire_until), returning an
    /// [`ArcSemaphorePermit`].
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_acquire_arc_for`](Self::try_acquire_arc_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Instant};
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    /// assert!(sem.try_acquire_arc_until(Instant::now()).is_ok());
    /// ```
    pub fn try_acquire_arc_until(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Result<ArcSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_arc_until(1, deadline)
    }

    /// [`try_acquire_many_until`](Self::try_acquire_many_until), returning
    /// an [`ArcSemaphorePermit`].
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
    /// As [`try_acquire_arc_for`](Self::try_acquire_arc_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Instant};
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    /// assert!(sem.try_acquire_many_arc_until(2, Instant::now()).is_err());
    /// ```
    pub fn try_acquire_many_arc_until(
        self: &Arc<Self>,
        n: usize,
        deadline: Instant,
    ) -> Result<ArcSemaphorePermit, TryAcquireError> {
        self.take_timed(n, Some(deadline))?;
        Ok(self.arc_permit(n))
    }

    /// A future that takes one permit and returns it as an
    /// [`ArcSemaphorePermit`], which keeps the semaphore alive and has no
    /// lifetime: for tasks that are spawned, or permits moved between tasks.
    ///
    /// # Errors
    ///
    /// As [`acquire_async`](Self::acquire_async).
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_async`](Self::acquire_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use lockfree_sync::Semaphore;
    ///
    /// let sem = Arc::new(Semaphore::new(1));
    /// let p = futures::executor::block_on(sem.acquire_arc_async()).unwrap();
    /// let t = std::thread::spawn(move || drop(p)); // 'static
    /// t.join().unwrap();
    /// assert_eq!(sem.available_permits(), 1);
    /// ```
    #[doc(alias = "acquire_owned")]
    pub fn acquire_arc_async(self: &Arc<Self>) -> AcquireArcAsync {
        self.acquire_many_arc_async(1)
    }

    /// [`acquire_arc_async`](Self::acquire_arc_async) for `n` permits at once.
    ///
    /// # Errors
    ///
    /// As [`acquire_async`](Self::acquire_async).
    ///
    /// # Cancel safety
    ///
    /// As for [`acquire_async`](Self::acquire_async).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS) (when called).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(3));
    /// let p = futures::executor::block_on(sem.acquire_many_arc_async(3)).unwrap();
    /// assert_eq!(p.permits(), 3);
    /// ```
    #[doc(alias = "acquire_many_owned")]
    pub fn acquire_many_arc_async(self: &Arc<Self>, n: usize) -> AcquireArcAsync {
        check_request(n);
        AcquireArcAsync {
            sem: Arc::clone(self),
            state: Request::new(n),
        }
    }

    /// [`try_acquire`](Self::try_acquire), returning an
    /// [`ArcSemaphorePermit`].
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    /// let p = sem.try_acquire_arc().unwrap();
    /// assert!(sem.try_acquire_arc().is_err());
    /// # drop(p);
    /// ```
    #[doc(alias = "try_acquire_owned")]
    pub fn try_acquire_arc(self: &Arc<Self>) -> Result<ArcSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_arc(1)
    }

    /// [`try_acquire_many`](Self::try_acquire_many), returning an
    /// [`ArcSemaphorePermit`].
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Panics
    ///
    /// If `n` exceeds [`MAX_PERMITS`](Self::MAX_PERMITS).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(2));
    /// assert_eq!(sem.try_acquire_many_arc(2).unwrap().permits(), 2);
    /// ```
    #[doc(alias = "try_acquire_many_owned")]
    pub fn try_acquire_many_arc(
        self: &Arc<Self>,
        n: usize,
    ) -> Result<ArcSemaphorePermit, TryAcquireError> {
        check_request(n);
        self.try_take_open(n)?;
        Ok(self.arc_permit(n))
    }

    fn arc_permit(self: &Arc<Self>, n: usize) -> ArcSemaphorePermit {
        ArcSemaphorePermit {
            sem: Arc::clone(self),
            permits: n,
        }
    }
}
