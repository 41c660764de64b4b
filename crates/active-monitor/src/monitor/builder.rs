//! [`Builder`]: how to build a [`Monitor`](super::Monitor).

use ast_mutex::AbstractState;
use sync_core::CachePadded;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize};
use sync_core::sync::cell::UnsafeCell;
use sync_core::waiter::WaiterQueue;

use crate::order::Order;
use crate::server::{Served, ServerSlot};
use sync_core::bounded_queue::BoundedQueue as TaskQueue;

use crate::NoState;

use super::*;

/// The default [`batch`](Builder::batch): tasks a combiner runs before it
/// gives way (the paper's five).
pub const DEFAULT_BATCH: usize = 5;
/// The default task-queue [`capacity`](Builder::capacity) asked for (the
/// paper's 200; the queue rounds it up to 256).
pub const DEFAULT_CAPACITY: usize = 200;

/// How to build a [`Monitor`]: the combiner's batch, the queue's capacity
/// and the program order.
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, Order};
///
/// let m = Monitor::builder()
///     .batch(8)
///     .capacity(64)
///     .order(Order::Relaxed)
///     .build(String::new());
/// m.submit(|s| s.push('a'));
/// assert_eq!(m.call(|s| s.clone()), "a");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Builder {
    batch: usize,
    capacity: usize,
    order: Order,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            batch: DEFAULT_BATCH,
            capacity: DEFAULT_CAPACITY,
            order: Order::Strict,
        }
    }
}

impl Builder {
    /// Tasks a combiner runs before it gives way ([`DEFAULT_BATCH`]). A
    /// combiner looks for somebody to hand the monitor to only between
    /// batches: with `usize::MAX` it never does, and keeps serving for as
    /// long as tasks keep coming.
    ///
    /// # Panics
    ///
    /// If `batch` is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().batch(1).build(0);
    /// assert_eq!(m.call(|n| *n), 0);
    /// ```
    pub fn batch(mut self, batch: usize) -> Self {
        assert!(batch > 0, "Monitor batch must be at least 1");
        self.batch = batch;
        self
    }

    /// The task queue's capacity ([`DEFAULT_CAPACITY`]): a submitter that
    /// finds it full waits for space. It is rounded up to a power of two
    /// (the queue's slot index is a mask, exact when positions wrap around
    /// `usize`); [`Monitor::capacity`] tells the rounded value. The slots
    /// (a few words each) are allocated when the monitor is built.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above `usize::MAX / 4 + 1`. Then, as
    /// `Vec::with_capacity` does, the build panics if the slots would
    /// take more than `isize::MAX` bytes, and aborts the process if their
    /// allocation fails.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().capacity(3).build(0);
    /// assert_eq!(m.capacity(), 4);
    /// assert_eq!(m.call(|n| *n), 0);
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        assert!(
            capacity > 0,
            "Monitor task-queue capacity must be at least 1"
        );
        assert!(
            capacity <= usize::MAX / 4 + 1,
            "Monitor task-queue capacity must be at most usize::MAX / 4 + 1"
        );
        self.capacity = capacity;
        self
    }

    /// The program order ([`Order::Strict`] by default).
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    /// let m = Monitor::builder().order(Order::Relaxed).build(0);
    /// assert_eq!(m.call(|n| *n), 0);
    /// ```
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// A monitor over `data`, without abstract states.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().build(1);
    /// assert_eq!(m.call(|n| *n), 1);
    /// ```
    pub fn build<T>(self, data: T) -> Monitor<T> {
        self.build_with_states(NoState::Any, data)
    }

    /// A monitor over `data` in abstract state `initial` (see
    /// [`Monitor::with_states`]).
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = active_monitor::Monitor::builder().build_with_states(Light::Red, ());
    /// assert_eq!(m.call(|_| 1), 1);
    /// ```
    pub fn build_with_states<T, S: AbstractState>(self, initial: S, data: T) -> Monitor<T, S> {
        self.monitor(initial, data, None)
    }

    /// A monitor over `data` with a dedicated server thread, shared (see
    /// [`Served`]): the server runs the tasks, submitters only publish
    /// them and wake the server if it sleeps. Needs `T: Send + 'static`:
    /// the thread may outlive the caller's scope (a monitor built with
    /// [`build`](Self::build) accepts borrowed data).
    ///
    /// If the process already has [`server_limit`](crate::server_limit)
    /// servers, the monitor gets none and runs by combining
    /// ([`Monitor::has_server`] tells). While the CPUs are saturated
    /// ([`cpus_saturated`](crate::cpus_saturated)), it also runs by
    /// combining; the server sleeps meanwhile. The server is started
    /// whether or not the CPUs are saturated now: saturation comes and
    /// goes, and a sleeping server costs no CPU.
    ///
    /// # Panics
    ///
    /// If the operating system cannot create the thread.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().build_served(0u64);
    /// let c = m.submit(|n| {
    ///     *n += 1;
    ///     *n
    /// }); // queued for the server, which runs it
    /// assert_eq!(c.wait(), 1);
    /// assert_eq!(m.call(|n| *n), 1);
    /// ```
    pub fn build_served<T: Send + 'static>(self, data: T) -> Served<T> {
        self.build_served_with_states(NoState::Any, data)
    }

    /// [`build_served`](Self::build_served) with abstract states (see
    /// [`Monitor::with_states`]).
    ///
    /// # Panics
    ///
    /// If the operating system cannot create the thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// ast_mutex::states! { enum Door { Closed, Open } }
    /// let m = Monitor::builder()
    ///     .order(Order::Relaxed)
    ///     .build_served_with_states(Door::Closed, 0u32);
    /// let enter = m.when_in(Door::Open, |n| (*n + 1, Door::Open));
    /// m.when_in(Door::Closed, |_| ((), Door::Open));
    /// assert_eq!(enter.wait(), 1);
    /// ```
    pub fn build_served_with_states<T: Send + 'static, S: AbstractState + Send + 'static>(
        self,
        initial: S,
        data: T,
    ) -> Served<T, S> {
        Served::start(|slot| self.monitor(initial, data, slot))
    }

    fn monitor<T, S: AbstractState>(
        self,
        initial: S,
        data: T,
        server: Option<ServerSlot>,
    ) -> Monitor<T, S> {
        Monitor {
            lock: CachePadded::new(AtomicUsize::new(0)),
            queue: TaskQueue::new(self.capacity),
            space: WaiterQueue::new(),
            space_popper: AtomicBool::new(false),
            space_count: SweepCount::new(),
            exec: UnsafeCell::new(Exec {
                data,
                state: initial,
                waiting: Waiting::default(),
            }),
            batch: self.batch,
            order: self.order,
            server,
            offers: AtomicUsize::new(0),
            offer_skip: AtomicUsize::new(0),
            offer_backoff: AtomicUsize::new(0),
            id: super::next_id(),
        }
    }
}
