//! The permits a [`Semaphore`] hands out.

use core::fmt;

use sync_core::sync::atomic::Ordering::*;

use super::Semaphore;

/// Permits taken from a [`Semaphore`]; they go back when it drops.
///
/// # Examples
///
/// ```
/// let sem = lockfree_sync::Semaphore::new(3);
/// let mut p = sem.acquire_many(3).unwrap();
/// let one = p.split(1).unwrap();
/// assert_eq!((p.permits(), one.permits()), (2, 1));
/// drop(one);
/// assert_eq!(sem.available_permits(), 1);
/// ```
#[must_use = "dropping the permit releases it at once"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    permits: usize,
}

impl<'a> SemaphorePermit<'a> {
    pub(super) fn new(sem: &'a Semaphore, permits: usize) -> Self {
        Self { sem, permits }
    }

    /// How many permits this holds.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(2);
    /// assert_eq!(sem.acquire_many(2).unwrap().permits(), 2);
    /// ```
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// The semaphore the permits came from.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// let p = sem.acquire().unwrap();
    /// assert!(std::ptr::eq(p.semaphore(), &sem));
    /// ```
    pub fn semaphore(&self) -> &'a Semaphore {
        self.sem
    }

    /// Keeps the permits out of the semaphore for good (until
    /// [`add_permits`](Semaphore::add_permits) puts them back).
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(1);
    /// sem.acquire().unwrap().forget();
    /// assert_eq!(sem.available_permits(), 0);
    /// ```
    pub fn forget(mut self) {
        forget(self.sem, &mut self.permits);
    }

    /// Moves `other`'s permits into this one. (Together they never exceed
    /// [`Semaphore::MAX_PERMITS`]: a semaphore never holds more, see
    /// [`add_permits`](Semaphore::add_permits).)
    ///
    /// # Panics
    ///
    /// If the two came from different semaphores.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(2);
    /// let mut a = sem.acquire().unwrap();
    /// a.merge(sem.acquire().unwrap());
    /// assert_eq!(a.permits(), 2);
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        merge(self.sem, other.sem, &mut self.permits, &mut other.permits);
    }

    /// Splits `n` permits off into a new permit; `None` (and nothing
    /// changes) if this holds fewer than `n`.
    ///
    /// # Examples
    ///
    /// ```
    /// let sem = lockfree_sync::Semaphore::new(2);
    /// let mut a = sem.acquire_many(2).unwrap();
    /// assert!(a.split(3).is_none());
    /// let b = a.split(1).unwrap();
    /// assert_eq!((a.permits(), b.permits()), (1, 1));
    /// ```
    pub fn split(&mut self, n: usize) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        Some(Self::new(self.sem, n))
    }
}

impl Drop for SemaphorePermit<'_> {
    #[inline]
    fn drop(&mut self) {
        give_back(self.sem, self.permits);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish()
    }
}

/// Permits taken from a [`Semaphore`] in an [`Arc`](std::sync::Arc), with
/// no lifetime: they go back when it drops.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// let sem = Arc::new(lockfree_sync::Semaphore::new(2));
/// let mut p = sem.try_acquire_many_arc(2).unwrap();
/// let q = p.split(1).unwrap();
/// std::thread::spawn(move || drop(q)).join().unwrap();
/// assert_eq!(sem.available_permits(), 1);
/// # drop(p);
/// ```
#[must_use = "dropping the permit releases it at once"]
pub struct ArcSemaphorePermit {
    pub(super) sem: std::sync::Arc<Semaphore>,
    pub(super) permits: usize,
}

impl ArcSemaphorePermit {
    /// How many permits this holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(2));
    /// assert_eq!(sem.try_acquire_arc().unwrap().permits(), 1);
    /// ```
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// The semaphore the permits came from.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    /// let p = sem.try_acquire_arc().unwrap();
    /// assert!(Arc::ptr_eq(p.semaphore(), &sem));
    /// ```
    pub fn semaphore(&self) -> &std::sync::Arc<Semaphore> {
        &self.sem
    }

    /// Keeps the permits out of the semaphore for good (until
    /// [`add_permits`](Semaphore::add_permits) puts them back).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    /// sem.try_acquire_arc().unwrap().forget();
    /// assert_eq!(sem.available_permits(), 0);
    /// ```
    pub fn forget(mut self) {
        forget(&self.sem, &mut self.permits);
    }

    /// Moves `other`'s permits into this one. (Together they never exceed
    /// [`Semaphore::MAX_PERMITS`]: a semaphore never holds more, see
    /// [`add_permits`](Semaphore::add_permits).)
    ///
    /// # Panics
    ///
    /// If the two came from different semaphores.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(2));
    /// let mut a = sem.try_acquire_arc().unwrap();
    /// a.merge(sem.try_acquire_arc().unwrap());
    /// assert_eq!(a.permits(), 2);
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        merge(&self.sem, &other.sem, &mut self.permits, &mut other.permits);
    }

    /// Splits `n` permits off into a new permit; `None` (and nothing
    /// changes) if this holds fewer than `n`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// let sem = Arc::new(lockfree_sync::Semaphore::new(2));
    /// let mut a = sem.try_acquire_many_arc(2).unwrap();
    /// let b = a.split(2).unwrap();
    /// assert_eq!((a.permits(), b.permits()), (0, 2));
    /// ```
    pub fn split(&mut self, n: usize) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        Some(Self {
            sem: std::sync::Arc::clone(&self.sem),
            permits: n,
        })
    }
}

impl Drop for ArcSemaphorePermit {
    #[inline]
    fn drop(&mut self) {
        give_back(&self.sem, self.permits);
    }
}

impl fmt::Debug for ArcSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArcSemaphorePermit")
            .field("permits", &self.permits)
            .finish()
    }
}

// What both kinds of permit do with their permits, written once.

/// Keeps `permits` out of `sem` for good (until `add_permits`).
fn forget(sem: &Semaphore, permits: &mut usize) {
    // Relaxed: a bound (see `Semaphore::total`).
    sem.total.fetch_sub(*permits, Relaxed);
    *permits = 0;
}

/// Moves `from`'s permits into `into`'s, checking that they come from the
/// same semaphore.
#[track_caller]
fn merge(sem: &Semaphore, other: &Semaphore, into: &mut usize, from: &mut usize) {
    assert!(
        core::ptr::eq(sem, other),
        "a permit's merge: the permits come from different semaphores"
    );
    *into += core::mem::take(from);
}

/// Returns a dropped permit's permits.
#[inline]
fn give_back(sem: &Semaphore, permits: usize) {
    if permits > 0 {
        sem.put_back(permits);
    }
}
