//! [`WaitPolicy`]: how a waiter watches a state before it parks.

use core::time::Duration;

#[cfg(doc)]
use super::{SATURATED_SPINS, Watch};
#[cfg(doc)]
use crate::load;

/// How a waiter watches a state before it parks: the paper's mutable
/// attributes.
///
/// * `spins` (spin-time): polls of the state with a spin hint between them
///   (on saturated CPUs a timed wait makes at most [`SATURATED_SPINS`],
///   and a watch that parks spins at most a fraction of a millisecond: see
///   [`Watch::pause`]);
/// * `backoff` (delay-time): the pause after the i-th spin grows as 2^i
///   hints, up to 2^6;
/// * `yields`: polls with a yield of the core between them, after the spins
///   (a yield that gave the core to nobody is paced: [`load::paced_yield`]);
/// * `park` (sleep-time): whether the waiter sleeps once the spins and yields
///   are spent. Without it the waiter never sleeps: it keeps polling and
///   yielding (a pure spin lock that lets a preempted holder run);
/// * `timeout` (conditional waiting): a cap on the whole watch; once it has
///   passed the waiter parks, even without `park`.
///
/// Any values are safe for a timed wait: it returns within its deadline
/// plus about one scheduling quantum, since it never yields and, on
/// saturated CPUs, spins only [`SATURATED_SPINS`] polls before it parks or
/// sleeps (however many `spins` or however long a `timeout` the policy
/// gives).
///
/// The default is parking_lot's `SpinWait`: 3 spins backing off (2, 4 and 8
/// hints), 7 yields, then park.
///
/// # Examples
///
/// ```
/// use sync_core::wait::WaitPolicy;
///
/// let combined = WaitPolicy::spin_then_block(10);
/// assert_eq!((combined.spin_count(), combined.yield_count(), combined.parks()), (10, 0, true));
/// assert!(!WaitPolicy::spin().parks());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaitPolicy {
    pub(super) spins: u32,
    pub(super) yields: u32,
    pub(super) backoff: bool,
    pub(super) park: bool,
    pub(super) timeout: Option<Duration>,
}

impl WaitPolicy {
    /// parking_lot's watch: 3 backed-off spins, 7 yields, then park.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new(), sync_core::wait::WaitPolicy::default());
    /// ```
    pub const fn new() -> Self {
        Self {
            spins: 3,
            yields: 7,
            backoff: true,
            park: true,
            timeout: None,
        }
    }

    /// Pure spin: poll with a spin hint, and after 100 polls yield between
    /// polls; never sleep.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!sync_core::wait::WaitPolicy::spin().parks());
    /// ```
    pub const fn spin() -> Self {
        Self {
            spins: 100,
            yields: 0,
            backoff: false,
            park: false,
            timeout: None,
        }
    }

    /// Spin with back-off (Anderson et al.): 10 polls with a growing pause,
    /// then yield between polls; never sleep.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sync_core::wait::WaitPolicy::spin_backoff().backs_off());
    /// ```
    pub const fn spin_backoff() -> Self {
        Self {
            spins: 10,
            yields: 0,
            backoff: true,
            park: false,
            timeout: None,
        }
    }

    /// Pure sleep: park at once.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::block();
    /// assert_eq!((p.spin_count(), p.yield_count()), (0, 0));
    /// ```
    pub const fn block() -> Self {
        Self {
            spins: 0,
            yields: 0,
            backoff: false,
            park: true,
            timeout: None,
        }
    }

    /// The paper's combined lock: `spins` polls with a spin hint, then park.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::spin_then_block(50);
    /// assert_eq!(p.spin_count(), 50);
    /// ```
    pub const fn spin_then_block(spins: u32) -> Self {
        Self {
            spins,
            yields: 0,
            backoff: false,
            park: true,
            timeout: None,
        }
    }

    /// Conditional spin/sleep: spin (then yield) for at most `timeout`, then
    /// park.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = sync_core::wait::WaitPolicy::conditional(Duration::from_micros(20));
    /// assert_eq!(p.watch_timeout(), Some(Duration::from_micros(20)));
    /// ```
    pub const fn conditional(timeout: Duration) -> Self {
        Self {
            spins: u32::MAX,
            yields: 0,
            backoff: false,
            park: true,
            timeout: Some(timeout),
        }
    }

    /// Sets the number of spins (polls with a spin hint between them).
    ///
    /// On saturated CPUs, whatever the count, a timed watch spins at most
    /// [`SATURATED_SPINS`](super::SATURATED_SPINS) times, and an untimed
    /// one under a policy that parks at most
    /// [`SATURATED_SPIN_TIME`](super::SATURATED_SPIN_TIME): a spinning
    /// waiter there keeps a core from the thread it waits for. A policy
    /// that never parks spins them all when untimed (bounded where the
    /// primitive asks by [`WATCH_AT_MOST`](super::WATCH_AT_MOST)).
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().spins(40);
    /// assert_eq!(p.spin_count(), 40);
    /// ```
    pub const fn spins(mut self, spins: u32) -> Self {
        self.spins = spins;
        self
    }

    /// Sets the number of yields after the spins.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().yields(0);
    /// assert_eq!(p.yield_count(), 0);
    /// ```
    pub const fn yields(mut self, yields: u32) -> Self {
        self.yields = yields;
        self
    }

    /// Whether the pause after each spin grows exponentially.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().backoff(false);
    /// assert!(!p.backs_off());
    /// ```
    pub const fn backoff(mut self, backoff: bool) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether the waiter parks once its spins and yields are spent (if not,
    /// it keeps polling and yielding).
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().park(false);
    /// assert!(!p.parks());
    /// ```
    pub const fn park(mut self, park: bool) -> Self {
        self.park = park;
        self
    }

    /// Caps the whole watch: once `timeout` has passed since the watch
    /// began, the waiter parks. `None`: no cap.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = sync_core::wait::WaitPolicy::spin().timeout(Some(Duration::from_micros(50)));
    /// assert_eq!(p.watch_timeout(), Some(Duration::from_micros(50)));
    /// ```
    pub const fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The number of spins.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new().spin_count(), 3);
    /// ```
    pub const fn spin_count(&self) -> u32 {
        self.spins
    }

    /// The number of yields after the spins.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new().yield_count(), 7);
    /// ```
    pub const fn yield_count(&self) -> u32 {
        self.yields
    }

    /// Whether spins back off.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sync_core::wait::WaitPolicy::new().backs_off());
    /// ```
    pub const fn backs_off(&self) -> bool {
        self.backoff
    }

    /// Whether the waiter parks after the watch.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sync_core::wait::WaitPolicy::block().parks());
    /// ```
    pub const fn parks(&self) -> bool {
        self.park
    }

    /// The cap on the watch, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new().watch_timeout(), None);
    /// ```
    pub const fn watch_timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::new()
    }
}
