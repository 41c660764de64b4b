//! [`Monitor`]: the active monitor, its combining executor and its builder.

use core::fmt;
use core::marker::PhantomData;
use core::task::Context;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use ast_mutex::{AbstractState, StateSet};
use sync_core::CachePadded;
use sync_core::sync::Arc as LoomArc;
// `std::sync::Arc`, not loom's: tasks are shared as trait objects, and
// loom's `Arc` cannot be coerced to one (the reference count is std's own,
// the protocol's atomics are all loom's).
use std::sync::Arc;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*, fence};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::hint;
use sync_core::waiter::{Waiter, WaiterQueue};

use crate::completion::{Completion, HasSlot, Outcome, fits_inline};
use crate::order::{self, Order, Pending};
use crate::queue::TaskQueue;
use crate::saturation;
use crate::server::{HELD, Served, ServerSlot};
use crate::submit::{CallAsync, Submit};
use crate::task::{
    Always, AsyncTask, Body, CallJob, Check, DONE, HANDOFF, InSet, Job, Plain, Pre, Pred, Stated,
    Task,
};
use crate::unwind;

use crate::NoState;

/// The default [`batch`](Builder::batch): tasks a combiner runs before it
/// gives way (the paper's five).
pub const DEFAULT_BATCH: usize = 5;
/// The default task-queue [`capacity`](Builder::capacity) asked for (the
/// paper's 200; the queue rounds it up to 256).
pub const DEFAULT_CAPACITY: usize = 200;

/// [`Monitor::lock`]: someone holds the monitor (a combiner serving, a
/// caller or server it was handed to, or `Drop`).
const LOCKED: usize = 1;

/// [`Monitor::lock`], low bits: a combiner that has run its batch offers
/// the monitor to whoever publishes next; it still holds it until someone
/// takes it (`take`, a CAS to [`LOCKED`]) or it takes it back (the same
/// CAS). The bits above [`STATE`] number the offer, so that an offerer
/// tells its own offer from a later one (someone took ours, served, and
/// offered in turn): it then knows it was taken, and does not take the
/// later offer back as if it were its own.
const HANDOVER: usize = 2;
/// The low bits of [`Monitor::lock`]: 0, [`LOCKED`] or [`HANDOVER`].
const STATE: usize = 3;

/// How many times a combiner offering the monitor ([`HANDOVER`]) looks
/// for a taker before it takes the monitor back: about a microsecond, the
/// gap between two submissions of a thread that streams them.
#[cfg(not(loom))]
const HANDOVER_SPINS: usize = 64;
/// Under loom, none: a taker may still come between the offer and the
/// CAS that takes it back (a preemption), and each spin would multiply the
/// schedules of every model that gives way.
#[cfg(loom)]
const HANDOVER_SPINS: usize = 0;

/// How many times a contended `call` looks at the lock word for the holder
/// to let go before it queues its task (`spin_for_call`): about as long
/// as a short critical section.
#[cfg(not(loom))]
const CALL_LOCK_SPINS: usize = 32;
/// Under loom, one look: the models see both a caller that takes the
/// monitor after all and one that queues.
#[cfg(loom)]
const CALL_LOCK_SPINS: usize = 1;

/// The most batches a combiner serves between two offers
/// (`offer_handover`) after offers were not taken.
const OFFER_BACKOFF_MAX: usize = 8;

/// The fewest withdrawn producers that trigger a sweep of `space`
/// (`Monitor::sweep_space`). Under loom, one: every withdrawal sweeps, so
/// that the models see sweeps race the holder's wake-ups.
#[cfg(not(loom))]
const SPACE_SWEEP_MIN: usize = SWEEP_MIN;
#[cfg(loom)]
const SPACE_SWEEP_MIN: usize = 1;

/// What [`Monitor::hand_to_producer`] did with the monitor.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Handover {
    /// Handed it, held, to a producer thread ([`SPACE_HELD`]).
    Thread,
    /// Let it go, then woke async producers ([`SPACE`]): each looks at
    /// the monitor when it is polled (or passes the wake-up on if it is
    /// dropped), so the queued tasks are not stranded. Also: let it go,
    /// and nothing was left to serve, or someone else took it.
    Tasks,
    /// Let it go for producers that had all withdrawn, and took it back:
    /// work remained. Still held.
    Retaken,
    /// Nothing: no producer waits for space. Still held.
    Nobody,
}

/// The token a producer waiting for queue space is woken with.
const SPACE: usize = 3;
/// The token that hands the monitor, held, to a producer thread waiting
/// for space (`hand_to_producer`): it serves, then pushes.
const SPACE_HELD: usize = 4;

/// A monitor whose critical sections are *tasks*, run by whoever holds it:
/// the paper's ActiveMonitor.
///
/// A task is a closure over the protected data (`&mut T`), optionally with
/// a precondition. Workers never lock the data themselves:
///
/// * [`call`](Self::call) runs a task and returns its result (synchronous
///   delegation);
/// * [`submit`](Self::submit) returns a [`Completion`] at once
///   (asynchronous);
/// * [`when`](Self::when) submits a task that runs only once its
///   precondition holds (the paper's `waituntil`); [`when_in`](Self::when_in)
///   does the same with a set of abstract states (see
///   [`with_states`](Self::with_states)).
///
/// # Execution
///
/// Tasks go through a bounded FIFO queue ([`Builder::capacity`], 200 by
/// default). Two ways to run them:
///
/// * **Combining** (the default, [`Builder::build`]): a worker that finds
///   the monitor idle takes it and becomes the *combiner*: it runs its own
///   task and the queued ones, up to [`Builder::batch`] tasks (5 by
///   default), then hands over: to a worker blocked in `call` whose task
///   is next, if that worker is still running (spinning for its result;
///   the monitor passes to it held), or else, if the next task is
///   asynchronous, it *offers* the monitor to whoever publishes next, for
///   about a microsecond, and serves another batch only if nobody took
///   it. A caller that has fallen asleep is served, not handed the
///   monitor: waking a thread costs tens of microseconds during which
///   nobody would serve. Once its stint has run as many tasks as the
///   queue holds, it hands the monitor, held, to a producer thread asleep
///   waiting for queue space, or to the next publisher, or to the next
///   blocked caller even if asleep. So a combiner's stint is bounded even
///   under a stream of submissions from other threads: what the queue
///   held when it began, plus about a queue's worth.
/// * **A dedicated server thread** ([`Builder::build_served`], which
///   returns a shared [`Served`] handle): the server runs the tasks;
///   submitters only publish, and wake the server if it sleeps. A `call`
///   that finds the monitor idle (nothing queued, nobody holding it) runs
///   its task at once, as with combining: its caller waits anyway, and a
///   round trip to the server costs a wake-up or two (56-81 µs measured on
///   this project's 2-CPU VM for a sleeping server, 0.6-15 µs for a
///   watching one, against 25-40 ns inline); a `call` that finds tasks
///   queued waits for the server to run it after them. An idle server watches
///   the queue for 20 µs, less than a wake-up, then sleeps on a waiter,
///   with a fence protocol so that a task published while it goes to sleep
///   is never stranded. At most [`server_limit`](crate::server_limit)
///   servers run in the process (one per CPU by default, see
///   [`set_server_limit`](crate::set_server_limit)); beyond it a monitor
///   built with a server runs by combining ([`Monitor::has_server`]
///   tells). While the CPUs are saturated (more runnable threads than
///   CPUs, sampled from `/proc/loadavg` every 5 ms at most, see
///   [`cpus_saturated`](crate::cpus_saturated)), a served monitor runs by
///   combining too, which is plain locking for its submitters, and its
///   server sleeps: the paper's fallback. When the last handle is dropped,
///   the server is stopped and joined, and the monitor is dropped as below.
///
/// Either way, no thread busy-waits for work beyond the server's short
/// watch: an idle monitor is a word and an empty queue, and waiters sleep.
///
/// After every task that runs, the combiner re-checks the waiting tasks'
/// preconditions itself and runs the first that holds (the paper's relay
/// invariance): it evaluates predicates, it wakes nobody to evaluate them,
/// and there is no broadcast. Tasks with entry sets are filed by set, and
/// only the sets that contain the current state are looked at: no
/// predicate is evaluated for them at all.
///
/// # Fairness
///
/// The queue is FIFO, and waiting tasks are re-checked oldest first:
/// tasks run in queue order, whoever runs them.
///
/// # Progress
///
/// A combiner's stint is bounded as described above: after each batch it
/// hands over or offers the monitor, and takes it back only when nobody
/// takes it (then other submitters are not publishing, and the queue
/// drains). A server serves for as long as tasks come; that is its job. A
/// task runs only while someone holds the
/// monitor, so a task must not block on the monitor it runs on: a `call`
/// on its own monitor from inside one of its tasks panics, and so does a
/// `submit`, `when` or `when_in` that finds the queue full (both would
/// wait for ever); a result's `wait` on its own monitor deadlocks. (Only
/// the innermost monitor is known: a task of `a` that calls into `b`,
/// whose task then blocks on `a`, deadlocks.)
///
/// # Panics in tasks
///
/// A panic in a precondition or a body is caught; it resumes in whoever
/// takes the task's result ([`Completion::wait`], `.await`, or the `call`
/// itself). The monitor keeps serving. The data is not poisoned: it is left
/// as the panicking body left it.
///
/// A panic in a drop the monitor makes (a body never run, a result whose
/// [`Completion`] was dropped, a precondition) or in a completion's waker
/// is caught too: the monitor stays consistent and is let go of, then the
/// panic resumes in the thread that was holding it, when its `call` or
/// submission returns (or is dropped if that thread already unwinds). On
/// a server thread nobody waits for the server, so such a panic is
/// dropped there (a task's own panic still resumes in its waiter).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use active_monitor::Monitor;
///
/// let m = Arc::new(Monitor::new(Vec::new()));
/// let workers: Vec<_> = (0..4)
///     .map(|i| {
///         let m = Arc::clone(&m);
///         std::thread::spawn(move || {
///             m.submit(move |v| v.push(i)); // returns at once
///             m.call(|v| v.len()) // runs after this worker's push
///         })
///     })
///     .collect();
/// for w in workers {
///     assert!(w.join().unwrap() >= 1);
/// }
/// assert_eq!(m.call(|v| v.len()), 4);
/// ```
pub struct Monitor<T, S: AbstractState = NoState> {
    /// 0: idle; [`LOCKED`]: held; [`HANDOVER`] (with an offer number above
    /// [`STATE`]): held, offered to the next submitter. Taken by a CAS from 0 or `HANDOVER` to `LOCKED` (Acquire,
    /// `take`); released by a store of 0 (Release, `release`) or offered by
    /// a store of `HANDOVER` (Release, `offer_handover`); passed without
    /// release to a blocked caller (`HANDOFF`) or to the server (`HELD`).
    ///
    /// | from | to | by |
    /// |---|---|---|
    /// | 0 | `LOCKED` | `take`: a submitter, the server, `wake_server` |
    /// | `LOCKED` | 0 | `release`, `release_served` |
    /// | `LOCKED` | `HANDOVER` | `offer_handover`, after a batch |
    /// | `HANDOVER` | `LOCKED` | `take` (a taker), or the offerer taking it back |
    lock: CachePadded<AtomicUsize>,
    queue: TaskQueue<Task<T, S>>,
    /// Producers waiting for queue space; popped by whoever holds
    /// `space_popper`.
    space: WaiterQueue,
    /// The consumer role of `space` (a flag taken by CAS, Acquire, and let
    /// go with Release: one popper at a time, each after the previous):
    /// the monitor's holder takes it to wake or hand over to producers, a
    /// withdrawing producer to sweep (`space_withdrawn`).
    space_popper: AtomicBool,
    /// Producers that withdrew from `space` (async submissions dropped
    /// while waiting) since it was last swept: a heuristic count that only
    /// decides when to sweep (`sweep_space`).
    space_withdrawn: AtomicUsize,
    /// The live producers the last sweep of `space` kept.
    space_kept: AtomicUsize,
    /// The data, the abstract state and the waiting tasks: the holder's.
    exec: UnsafeCell<Exec<T, S>>,
    batch: usize,
    order: Order,
    /// The server thread's side, if the monitor has one.
    server: Option<ServerSlot>,
    /// Offers made ([`HANDOVER`]): numbers them. Written by the holder.
    offers: AtomicUsize,
    /// Batches to serve before the next offer, and the current back-off
    /// (see `give_way`). The holder's (atomics only to be `Sync`).
    offer_skip: AtomicUsize,
    offer_backoff: AtomicUsize,
}

// SAFETY: the monitor owns a T and tasks that carry closures and results
// across threads (they are Send by the bounds of the submitting methods).
unsafe impl<T: Send, S: AbstractState + Send> Send for Monitor<T, S> {}
// SAFETY: `exec` is accessed only by the holder of `lock` (one thread at a
// time, ordered by the lock's Acquire/Release), so sharing the monitor
// shares T between threads one at a time, as a Mutex does: T: Send.
unsafe impl<T: Send, S: AbstractState + Send> Sync for Monitor<T, S> {}

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
    /// Tasks a combiner runs before it gives way ([`DEFAULT_BATCH`]).
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
    /// `usize`); [`Monitor::capacity`] tells the rounded value.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above `usize::MAX / 4 + 1`.
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
            space_withdrawn: AtomicUsize::new(0),
            space_kept: AtomicUsize::new(0),
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
        }
    }
}

impl<T> Monitor<T> {
    /// A monitor over `data`, with the defaults ([`Builder`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(0);
    /// m.submit(|n| *n += 2);
    /// assert_eq!(m.call(|n| *n), 2);
    /// ```
    pub fn new(data: T) -> Self {
        Builder::default().build(data)
    }
}

impl Monitor<()> {
    /// A [`Builder`] with the defaults (`Monitor::builder()` whatever the
    /// data type: the builder's `build` chooses it).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().capacity(16).build(0);
    /// assert_eq!(m.call(|n| *n), 0);
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl<T, S: AbstractState> Monitor<T, S> {
    /// A monitor over `data` whose abstract state starts at `initial`.
    ///
    /// Abstract states (ast-mutex's [`states!`](ast_mutex::states)) name
    /// the conditions tasks wait for: a [`when_in`](Self::when_in) task
    /// gives the set of states it can run in, and names the next state when
    /// it runs. The monitor then looks only at the tasks whose set contains
    /// the current state, instead of evaluating predicates (the paper's
    /// predicate tagging, with the tags given).
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// ast_mutex::states! { enum Buf { Empty, Mid, Full } }
    /// const CAP: usize = 2;
    ///
    /// // Relaxed: this one thread enables its own waiting task below, which
    /// // strict order forbids (see `Order::Strict`).
    /// let m = Monitor::builder()
    ///     .order(Order::Relaxed)
    ///     .build_with_states(Buf::Empty, Vec::new());
    /// let next = |v: &Vec<i32>| match v.len() {
    ///     0 => Buf::Empty,
    ///     CAP => Buf::Full,
    ///     _ => Buf::Mid,
    /// };
    /// let take = m.when_in(Buf::Mid | Buf::Full, move |v| {
    ///     let x = v.remove(0);
    ///     (x, next(v))
    /// });
    /// assert!(!take.is_done()); // empty: the task waits
    /// m.when_in(Buf::Empty | Buf::Mid, move |v| {
    ///     v.push(7);
    ///     ((), next(v))
    /// });
    /// assert_eq!(take.wait(), 7);
    /// ```
    pub fn with_states(initial: S, data: T) -> Self {
        Builder::default().build_with_states(initial, data)
    }

    /// The monitor's identity for program order.
    pub(crate) fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// The combiner's batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The task queue's capacity (the builder's, rounded up to a power of
    /// two).
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// The program order.
    pub fn order(&self) -> Order {
        self.order
    }

    /// Whether the monitor has a dedicated server thread: built with
    /// [`Builder::build_served`] while the process had fewer than
    /// [`server_limit`](crate::server_limit) servers.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(0);
    /// assert!(!m.has_server());
    /// ```
    pub fn has_server(&self) -> bool {
        self.server.is_some()
    }

    pub(crate) fn server_slot(&self) -> Option<&ServerSlot> {
        self.server.as_ref()
    }

    /// The data, for the monitor's owner: runs every queued task first (as
    /// `Drop` does), so the data is as the tasks submitted so far leave it.
    /// Tasks waiting on preconditions stay waiting.
    ///
    /// The guard derefs to the data. When it is dropped, the waiting tasks'
    /// preconditions are re-checked, and those that now hold run (relay
    /// invariance, as after any task): a change made here enables them as a
    /// task's would.
    ///
    /// # Panics
    ///
    /// The guard's drop resumes a panic caught in a drop or a waker while
    /// the queued or enabled tasks ran (see [`Monitor`]'s "Panics in
    /// tasks"); a task's own panic resumes in its waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let mut m = Monitor::builder().order(Order::Relaxed).build(0);
    /// m.submit(|n| *n += 1);
    /// let c = m.when(|n| *n >= 2, |n| *n * 10);
    /// *m.get_mut() += 1; // the guard's drop runs the enabled task
    /// assert_eq!(c.wait(), 20);
    /// ```
    pub fn get_mut(&mut self) -> DataMut<'_, T, S> {
        self.run_queued();
        DataMut {
            monitor: self,
            _sync_only_if_t_is: PhantomData,
        }
    }

    /// Runs a task on the data and returns its result: synchronous
    /// delegation.
    ///
    /// If the monitor is idle, the calling thread runs `f` itself at once,
    /// then any tasks queued meanwhile (it is the combiner). Otherwise `f`
    /// is queued and the thread sleeps until a combiner has run it, or until
    /// the monitor is handed to it.
    ///
    /// Under [`Order::Strict`], first waits for this submitter's previous
    /// asynchronous task if it was on another monitor (rule 3, see
    /// [`Order`]). In async code use [`call_async`](Self::call_async),
    /// which awaits instead of parking.
    ///
    /// The result is written once, where the body returns it: a call costs
    /// no more stack for a large result than the body itself.
    ///
    /// # Panics
    ///
    /// Resumes `f`'s panic (the monitor keeps serving). Panics if called
    /// from inside a task of this same monitor (it would wait for ever; the
    /// panic then resumes in that task's waiter).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(vec![3, 1, 2]);
    /// let max = m.call(|v| {
    ///     v.sort();
    ///     *v.last().unwrap()
    /// });
    /// assert_eq!(max, 3);
    /// ```
    pub fn call<F, R>(&self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R + Send,
        R: Send,
    {
        order::before_plain_submit(self.id(), self.order);
        if self.try_lock_for_call() {
            if self.queue.is_empty() {
                // Idle: run it here, like a lock.
                return self.call_inline(f);
            }
            return self.call_queued(f, true);
        }
        assert!(
            !unwind::is_running(self.id()),
            "Monitor::call from a task of the same monitor: it would wait for ever"
        );
        match self.spin_for_call() {
            Some(true) => self.call_inline(f),
            Some(false) => self.call_queued(f, true),
            None => self.call_queued(f, false),
        }
    }

    /// A `call` that found the monitor held with nothing queued: its holder
    /// is running a task of its own, as a lock's holder runs its critical
    /// section. Like a lock's waiter, spin a short while for it to let go
    /// and take it then, rather than queue the task and wait to be run
    /// (or woken): the running caller keeps taking an idle monitor, and
    /// nobody is woken. `Some(empty)` once taken (`empty`: nothing queued,
    /// run inline); `None` if tasks are queued (a combiner or a server
    /// serves them: queue behind them, in FIFO order) or the holder did
    /// not let go within the spin.
    #[inline]
    fn spin_for_call(&self) -> Option<bool> {
        for _ in 0..CALL_LOCK_SPINS {
            if !self.queue.is_empty() {
                return None;
            }
            hint::spin_loop();
            let s = self.lock.load(Relaxed);
            if (s == 0 || s & STATE == HANDOVER) && self.try_lock_for_call() {
                return Some(self.queue.is_empty());
            }
        }
        None
    }

    /// Runs `f` under the held monitor and returns its result as the body
    /// returns it: no `Outcome`, no `catch_unwind`, so that a large result
    /// is written once, in the caller's place, and costs no more stack than
    /// the body itself. Then the waiting tasks are re-checked and the
    /// monitor is served, as after any task; if `f` panics, the same
    /// happens while the panic unwinds to the caller (whose task it is),
    /// so the monitor is never left held.
    fn call_inline<F, R>(&self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        /// Relays and serves once the body is done, or unwinding.
        struct After<'a, T, S: AbstractState>(&'a Monitor<T, S>);
        impl<T, S: AbstractState> Drop for After<'_, T, S> {
            fn drop(&mut self) {
                let m = self.0;
                // Most monitors have no waiting task most of the time: then
                // nothing to relay, and no user code runs here.
                // SAFETY: we hold the monitor; a shared look.
                if m.exec.with(|e| unsafe { (*e).has_waiting() }) {
                    let guard = Unlock(m);
                    unwind::running(m.id(), || {
                        m.exec.with_mut(|e| {
                            // SAFETY: we hold the monitor.
                            unsafe { (*e).relay() }
                        })
                    });
                    core::mem::forget(guard);
                }
                // Resumes a deferred panic, or drops it if the body's own
                // panic unwinds.
                m.serve();
            }
        }
        // Dropped after the tail expression: relays and serves once the
        // result is in our caller's place.
        let _after = After(self);
        unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: we hold the monitor; `_after`'s relay comes after
                // this borrow ends.
                order::as_task(|| f(unsafe { &mut (*e).data }))
            })
        })
    }

    /// `submit` on an idle monitor, for a result that fits a completion
    /// (apart, so that `submit`'s own frame has no room for an outcome).
    #[inline(never)]
    fn submit_inline<F, R>(&self, f: F) -> Completion<R>
    where
        F: FnOnce(&mut T) -> R,
    {
        // The completion is made before serving: the outcome goes straight
        // into it, and is not kept aside across the call.
        let completion = Completion::from_outcome(self.run_inline(f));
        self.serve();
        completion
    }

    /// `when` on an idle monitor whose precondition holds, for a result
    /// that fits a completion (apart, as `submit_inline`).
    #[inline(never)]
    fn when_inline<P, F, R>(&self, pre: P, body: F) -> Result<Completion<R>, (P, F)>
    where
        P: Fn(&T) -> bool,
        F: FnOnce(&mut T) -> R,
    {
        self.run_op_if_idle(pre, body).map(Completion::from_outcome)
    }

    /// Runs `f` under the held monitor; the waiting tasks are re-checked.
    fn run_inline<F, R>(&self, f: F) -> Outcome<R>
    where
        F: FnOnce(&mut T) -> R,
    {
        let guard = Unlock(self);
        let outcome = unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: we hold the monitor.
                let exec = unsafe { &mut *e };
                let outcome =
                    match catch_unwind(AssertUnwindSafe(|| order::as_task(|| f(&mut exec.data)))) {
                        Ok(r) => Outcome::Value(r),
                        Err(p) => Outcome::Panicked(p),
                    };
                if exec.has_waiting() {
                    exec.relay();
                }
                outcome
            })
        });
        core::mem::forget(guard);
        outcome
    }

    #[cold]
    fn call_queued<F, R>(&self, f: F, locked: bool) -> R
    where
        F: FnOnce(&mut T) -> R + Send,
        R: Send,
    {
        let job = CallJob::new(f);
        // SAFETY: `job` stays on this frame until its waiter is notified:
        // we return only after `wait` gave DONE, or after running it
        // ourselves following HANDOFF.
        let task = unsafe { job.task::<T, S>() };
        if locked {
            // We hold the monitor, with tasks queued before us: queue ours
            // behind them (FIFO keeps other workers' and our own earlier
            // tasks first) and serve.
            self.push_held(task);
            self.serve();
        } else {
            self.push(task);
            self.after_push();
        }
        match job.wait() {
            DONE => unwrap_call(job.take_result()),
            HANDOFF => {
                // The monitor is ours, held, and our task is the one the
                // previous holder popped for us: run it here.
                self.call_inline(job.take_body())
            }
            t => unreachable!("unexpected token {t}"),
        }
    }

    /// Submits a task and returns its [`Completion`] at once: asynchronous
    /// delegation.
    ///
    /// If the monitor is idle, the calling thread runs `f` at once (the
    /// completion is then ready) and any tasks queued meanwhile. Otherwise
    /// `f` is queued for the holder; if the queue is full, the thread waits
    /// for space (helping to run the queue if the monitor becomes idle).
    /// That wait parks the thread: in async code use
    /// [`submit_async`](Self::submit_async), which awaits instead.
    ///
    /// Under [`Order::Strict`], first waits (parked, too) for this
    /// submitter's previous asynchronous task if it was on another monitor
    /// (rule 3, see [`Order`]).
    ///
    /// The returned [`Completion`] may be dropped: the task still runs
    /// (fire and forget, the paper's asynchronous call). To give a task up,
    /// [`cancel`](Completion::cancel) its completion.
    ///
    /// # Cancel safety
    ///
    /// Nothing to cancel in the call itself (it returns once the task is
    /// queued); see [`Completion`]'s.
    ///
    /// # Panics
    ///
    /// Never for `f`'s panic: it resumes in the completion's waiter. Panics
    /// if called from inside a task of this same monitor while its queue is
    /// full: only the task's own thread could make room, and it is busy
    /// running the task (the panic then resumes in that task's waiter).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(0u32);
    /// let c = m.submit(|n| {
    ///     *n += 1;
    ///     *n
    /// });
    /// assert_eq!(c.wait(), 1);
    /// ```
    pub fn submit<F, R>(&self, f: F) -> Completion<R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        order::before_plain_submit(self.id(), self.order);
        if self.try_lock() {
            // A result too large for the completion itself is written in
            // place, in the task's slot (see `fits_inline`).
            if self.queue.is_empty() && fits_inline::<R>() {
                return self.submit_inline(f);
            }
            return self.submit_task(AsyncTask::new_arc(Always, Plain(f)), false, true);
        }
        self.submit_task(AsyncTask::new_arc(Always, Plain(f)), false, false)
    }

    /// Submits a task that runs once `pre` holds: the paper's `waituntil`.
    ///
    /// Whoever holds the monitor evaluates `pre` (the paper's closure of
    /// predicates): when the task comes out of the queue, and again after
    /// every task that runs while it waits, until it holds. Then `body` runs
    /// at once, in the same critical section. Nobody is woken to evaluate a
    /// predicate; the task's waiter is woken once, with the result.
    ///
    /// `pre` should be cheap and must not have side effects: it is evaluated
    /// any number of times.
    ///
    /// While the task waits, its submitter's later tasks on this monitor
    /// go ahead (the one that enables it included); under
    /// [`Order::Strict`] the submitter's next submission to *another*
    /// monitor waits for it to complete or be
    /// [cancelled](Completion::cancel) (rule 3, see [`Order`]). At most
    /// [`WAITING_LIMIT`](crate::WAITING_LIMIT) of a submitter's tasks wait
    /// at once. In async code use [`when_async`](Self::when_async), which
    /// awaits instead of parking.
    ///
    /// # Panics
    ///
    /// Never for `pre`'s or `body`'s panic: it resumes in the completion's
    /// waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let m = Monitor::new(0);
    /// let c = m.when(|n| *n >= 2, |n| *n * 10);
    /// m.submit(|n| *n += 1);
    /// assert!(!c.is_done());
    /// m.submit(|n| *n += 1);
    /// assert_eq!(c.wait(), 20);
    /// ```
    pub fn when<P, F, R>(&self, pre: P, body: F) -> Completion<R>
    where
        P: Fn(&T) -> bool + Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        order::before_submit(self.id(), self.order);
        // Idle with nothing queued and `pre` true: run at once, as `submit`
        // does (no allocation, no wake-up); a large result goes through the
        // task's slot (see `fits_inline`).
        let (pre, body) = if fits_inline::<R>() {
            match self.when_inline(pre, body) {
                Ok(c) => return c,
                Err(back) => back,
            }
        } else {
            (pre, body)
        };
        let task = AsyncTask::new_arc(Pred(pre), Plain(body));
        let locked = self.try_lock();
        self.submit_task(task, true, locked)
    }

    /// Submits a task that runs once the monitor's abstract state is in
    /// `set`; its body returns its result and the next abstract state.
    ///
    /// Only tasks whose entry set contains the current state are looked at:
    /// their order of submission decides, and no predicate is evaluated.
    ///
    /// # Panics
    ///
    /// If `set` is empty (the task could never run). A panic in `body`
    /// resumes in the completion's waiter; the abstract state is then left
    /// as it was.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// ast_mutex::states! { enum Door { Closed, Open } }
    ///
    /// let m = Monitor::builder()
    ///     .order(Order::Relaxed)
    ///     .build_with_states(Door::Closed, 0u32);
    /// let enter = m.when_in(Door::Open, |visits| {
    ///     *visits += 1;
    ///     (*visits, Door::Open)
    /// });
    /// m.when_in(Door::Closed, |_| ((), Door::Open));
    /// assert_eq!(enter.wait(), 1);
    /// ```
    pub fn when_in<F, R>(&self, set: impl Into<StateSet<S>>, body: F) -> Completion<R>
    where
        F: FnOnce(&mut T) -> (R, S) + Send + 'static,
        R: Send + 'static,
        T: 'static,
        S: Send,
    {
        let set = entry_set(set.into(), "when_in");
        order::before_submit(self.id(), self.order);
        let task = AsyncTask::new_arc(InSet(set), Stated(body));
        let locked = self.try_lock();
        self.submit_task(task, true, locked)
    }

    /// [`submit`](Self::submit) for async code: a future that submits the
    /// task without blocking the thread, then outputs its result (awaited
    /// once). [`Submit::completion`] outputs the task's [`Completion`]
    /// instead, once it is queued.
    ///
    /// Where `submit` parks the thread (the queue is full, or program order
    /// makes it wait for an earlier task of this worker), the future awaits
    /// instead: it registers its task's waker and returns `Pending`, and the
    /// executor runs its other tasks meanwhile. See [`Submit`] for the
    /// steps.
    ///
    /// An async task that awaits each submission's result is in program
    /// order by construction (each task has finished before the next is
    /// submitted). To keep completions outstanding across submissions with
    /// [`Order::Strict`]'s rule 3, run the task in a
    /// [`worker`](crate::worker) scope (see [`Order`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the task if it has not started (see
    /// [`Submit`]): a timeout around it loses nothing.
    ///
    /// # Panics
    ///
    /// As [`Submit`]. `f`'s panic resumes in the completion's waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(0u32);
    /// let r = futures::executor::block_on(async {
    ///     m.submit_async(|n| {
    ///         *n += 1;
    ///         *n
    ///     })
    ///     .await // submitted, run, and its result
    /// });
    /// assert_eq!(r, 1);
    /// ```
    pub fn submit_async<F, R>(&self, f: F) -> Submit<'_, T, S, R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        Submit::new(self, AsyncTask::new_arc(Always, Plain(f)), false)
    }

    /// [`when`](Self::when) for async code: a future that submits the task
    /// without blocking the thread (see [`submit_async`](Self::submit_async)),
    /// and outputs its result once `pre` held and `body` ran.
    ///
    /// # Cancel safety
    ///
    /// As [`submit_async`](Self::submit_async): dropping the future while
    /// the task waits on its precondition withdraws it, so a timeout loses
    /// nothing (a `take` that timed out took no item).
    ///
    /// # Panics
    ///
    /// As [`Submit`]. `pre`'s or `body`'s panic resumes in the completion's
    /// waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// let m = Monitor::new(0);
    /// futures::executor::block_on(async {
    ///     // Both at once: the take waits until the put has run.
    ///     let (taken, ()) = futures::future::join(
    ///         m.when_async(|n| *n > 0, |n| *n * 10),
    ///         m.submit_async(|n| *n = 4),
    ///     )
    ///     .await;
    ///     assert_eq!(taken, 40);
    /// });
    /// ```
    pub fn when_async<P, F, R>(&self, pre: P, body: F) -> Submit<'_, T, S, R>
    where
        P: Fn(&T) -> bool + Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        Submit::new(self, AsyncTask::new_arc(Pred(pre), Plain(body)), true)
    }

    /// [`when_in`](Self::when_in) for async code: a future that submits the
    /// task without blocking the thread (see
    /// [`submit_async`](Self::submit_async)).
    ///
    /// # Cancel safety
    ///
    /// As [`when_async`](Self::when_async).
    ///
    /// # Panics
    ///
    /// If `set` is empty (at once, not when polled); otherwise as
    /// [`Submit`]. `body`'s panic resumes in the completion's waiter.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// ast_mutex::states! { enum Door { Closed, Open } }
    ///
    /// let m = Monitor::builder()
    ///     .order(Order::Relaxed)
    ///     .build_with_states(Door::Closed, 0u32);
    /// futures::executor::block_on(async {
    ///     let enter = m.when_in_async(Door::Open, |n| (*n + 1, Door::Open)).completion().await;
    ///     m.when_in_async(Door::Closed, |_| ((), Door::Open)).await;
    ///     assert_eq!(enter.await, Ok(1));
    /// });
    /// ```
    pub fn when_in_async<F, R>(&self, set: impl Into<StateSet<S>>, body: F) -> Submit<'_, T, S, R>
    where
        F: FnOnce(&mut T) -> (R, S) + Send + 'static,
        R: Send + 'static,
        T: 'static,
        S: Send,
    {
        let set = entry_set(set.into(), "when_in_async");
        Submit::new(self, AsyncTask::new_arc(InSet(set), Stated(body)), true)
    }

    /// [`call`](Self::call) for async code: submits `f` as
    /// [`submit_async`](Self::submit_async) does, then awaits its result.
    /// Unlike `call`, the task may outlive the caller's frame (the future
    /// can be dropped while the task is queued), hence `'static`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the task if it has not started; if it
    /// has, it runs to its end and its result is dropped (see
    /// [`CallAsync`]).
    ///
    /// # Panics
    ///
    /// Resumes `f`'s panic; otherwise as [`Submit`].
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::new(vec![3, 1, 2]);
    /// let max = futures::executor::block_on(m.call_async(|v| {
    ///     v.sort();
    ///     *v.last().unwrap()
    /// }));
    /// assert_eq!(max, 3);
    /// ```
    pub fn call_async<F, R>(&self, f: F) -> CallAsync<'_, T, S, R>
    where
        F: FnOnce(&mut T) -> R + Send + 'static,
        R: Send + 'static,
        T: 'static,
    {
        CallAsync::new(self.submit_async(f))
    }

    /// For an OR operand (`compose::or`) and `when`: if the monitor is idle with
    /// nothing queued, takes it, evaluates `pre` and, if it holds, runs
    /// `body` in the same critical section (then the waiting tasks are
    /// re-checked, as after any task); then serves and lets go as `submit`
    /// does. `Err((pre, body))` if the monitor was busy, or queued tasks
    /// had to run first (they are served), or `pre` was false: nothing of
    /// this operand ran. A panic in `pre` or `body` is the outcome (`pre`
    /// and `body` are then dropped here).
    pub(crate) fn run_op_if_idle<P, F, R>(&self, pre: P, body: F) -> Result<Outcome<R>, (P, F)>
    where
        P: Fn(&T) -> bool,
        F: FnOnce(&mut T) -> R,
    {
        if !self.try_lock() {
            return Err((pre, body));
        }
        if !self.queue.is_empty() {
            // Tasks queued before us come first: serve them, and let the
            // caller queue the operand behind whatever remains.
            self.serve();
            return Err((pre, body));
        }
        let guard = Unlock(self);
        let outcome = unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: we hold the monitor.
                let exec = unsafe { &mut *e };
                match catch_unwind(AssertUnwindSafe(|| pre(&exec.data))) {
                    // Nothing changed: no waiting task to re-check.
                    Ok(false) => Err((pre, body)),
                    Ok(true) => {
                        let outcome = match catch_unwind(AssertUnwindSafe(|| {
                            order::as_task(|| body(&mut exec.data))
                        })) {
                            Ok(r) => Outcome::Value(r),
                            Err(p) => Outcome::Panicked(p),
                        };
                        // Drops are user code (see `unwind`).
                        unwind::drop_caught(pre);
                        exec.relay();
                        Ok(outcome)
                    }
                    Err(p) => {
                        unwind::drop_caught(pre);
                        unwind::drop_caught(body);
                        Ok(Outcome::Panicked(p))
                    }
                }
            })
        });
        core::mem::forget(guard);
        self.serve();
        outcome
    }

    /// Queues `task` (or runs it, if `locked` and the queue is empty) and
    /// returns its completion.
    fn submit_task<P, B, R>(
        &self,
        task: Arc<AsyncTask<T, S, P, B, R>>,
        conditional: bool,
        locked: bool,
    ) -> Completion<R>
    where
        P: Pre<T, S> + 'static,
        B: Body<T, S, R> + 'static,
        R: Send + 'static,
        T: 'static,
    {
        let completion = Completion::shared(Arc::clone(&task) as Arc<dyn HasSlot<R>>);
        let pending = (self.order == Order::Strict || conditional)
            .then(|| Arc::clone(&task) as Arc<dyn Pending>);
        self.submit_job(Task::Shared(task as Arc<dyn Job<T, S>>), locked);
        if let Some(pending) = pending {
            if !completion.is_done() {
                order::submitted(self.id(), conditional, &pending, self.order);
            }
        }
        completion
    }

    /// Queues `task`, or runs it if `locked` (the caller took the monitor)
    /// and nothing is queued; serves if it holds the monitor.
    pub(crate) fn submit_job(&self, task: Task<T, S>, locked: bool) {
        if locked {
            if self.queue.is_empty() {
                self.execute(task);
            } else {
                self.push_held(task);
            }
            self.serve();
        } else {
            self.push(task);
            self.after_push();
        }
    }

    /// A submitter takes the monitor if it is idle (or offered), to run
    /// its task and the queued ones. Never while the monitor's server
    /// serves (CPUs not saturated): the submitter then only publishes.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        if self.server.is_some() && !saturation::saturated() {
            return false;
        }
        self.take()
    }

    /// `call`'s [`try_lock`](Self::try_lock): with a server too, a caller
    /// that finds nothing queued and nobody holding the monitor takes it and
    /// runs its task at once. It waits for the result anyway, and a round
    /// trip to the server costs a wake-up or two (tens of microseconds)
    /// where a lock costs tens of nanoseconds; whatever is queued meanwhile
    /// goes to the server when the caller lets go (`serve_loop`).
    #[inline]
    pub(crate) fn try_lock_for_call(&self) -> bool {
        if self.server.is_some() && !saturation::saturated() && !self.queue.is_empty() {
            return false;
        }
        self.take()
    }

    /// Takes the monitor if it is idle, or offered by a combiner that has
    /// run its batch ([`HANDOVER`]).
    #[inline]
    pub(crate) fn take(&self) -> bool {
        let s = self.lock.load(Relaxed);
        // Acquire: pairs with the Release store of 0 in `release` or of
        // HANDOVER in `offer_handover`, so the previous holder's writes to
        // the data are visible.
        (s == 0 || s & STATE == HANDOVER)
            && self
                .lock
                .compare_exchange(s, LOCKED, Acquire, Relaxed)
                .is_ok()
    }

    /// After publishing a task without holding the monitor: serve it if the
    /// monitor is idle or offered; with a server, wake it if it sleeps.
    #[inline]
    fn after_push(&self) {
        // SeqCst fence: pairs with the fence in `release` (either the
        // releasing holder sees our published task, or we see the monitor
        // idle: a task is never stranded in an idle monitor's queue), and
        // with the one in `prepare_sleep` (either the server about to sleep
        // sees our task, or we see its waiter and wake it).
        fence(SeqCst);
        if let Some(srv) = &self.server {
            saturation::tick_sometimes();
            if !saturation::saturated() {
                if !srv.sleeper.is_empty() {
                    self.wake_server();
                }
                return;
            }
        }
        if self.take() {
            self.serve();
        }
    }

    /// Hands the monitor to the sleeping server (a submitter, after the
    /// fence of `after_push`). If the server withdrew its waiter (it saw a
    /// task and is awake), lets go of the monitor again: the server takes
    /// it.
    #[cold]
    fn wake_server(&self) {
        if self.take() && !self.hand_to_server() {
            self.release_served();
        }
    }

    /// Pops the server's waiter and wakes it holding the monitor. `false`
    /// (still holding) if it has none live: it withdrew, it is awake.
    /// The caller holds the monitor (the `sleeper` queue's consumer).
    fn hand_to_server(&self) -> bool {
        let Some(srv) = &self.server else {
            return false;
        };
        loop {
            // SAFETY: we hold the monitor: the only consumer of `sleeper`,
            // after the previous holder (lock Acquire/Release).
            match unsafe { srv.sleeper.pop() } {
                // Release (in `notify`): the server, woken, sees the data
                // as we left it.
                Some(w) => {
                    if w.notify(HELD) {
                        return true;
                    }
                }
                None if srv.sleeper.is_empty() => return false,
                // The server is half-way through its push: a few
                // instructions.
                None => hint::spin_loop(),
            }
        }
    }

    /// Wakes the sleeping server so that it finds `stop` set (the last user
    /// handle's drop, after its fence). A holder other than the server
    /// pops the waiter; if someone else holds the monitor meanwhile, it
    /// lets go soon (a submitter handing over, or a combiner).
    pub(crate) fn wake_server_to_stop(&self) {
        let Some(srv) = &self.server else {
            return;
        };
        while !srv.sleeper.is_empty() {
            if !self.take() {
                sync_core::wait::give_way(None);
                continue;
            }
            // SAFETY: we hold the monitor: the `sleeper` queue's consumer.
            while let Some(w) = unsafe { srv.sleeper.pop() } {
                // `false`: withdrawn, that server is awake and sees `stop`.
                w.notify(crate::server::STOP);
            }
            // Release: pairs with the Acquire CAS in `take`.
            self.lock.store(0, Release);
            // Not empty yet: the server is half-way through its push.
            hint::spin_loop();
        }
    }

    /// Lets go of a monitor whose server serves (not saturated): a holder
    /// other than the server gives the queued tasks to the server, waking
    /// it if it sleeps, instead of running them.
    fn release_served(&self) {
        let Some(srv) = &self.server else {
            return;
        };
        loop {
            // Release: pairs with the Acquire CAS in `take`.
            self.lock.store(0, Release);
            // SeqCst fence: pairs with the fence in `prepare_sleep`: either
            // we see the server's waiter, or the server sees the tasks
            // (and the lock free) and does not sleep.
            fence(SeqCst);
            let for_server = self.queue.front_ready() && !srv.sleeper.is_empty();
            // Producers waiting for space (the fence also pairs with the
            // one in `enqueue_for_space`): the server wakes them in its
            // stint, but the one that just drained the queue may have found
            // the monitor held by us and left them to our release.
            let for_space = !self.space.is_empty() && self.room_for_waiters();
            if !for_server && !for_space {
                return;
            }
            if !self.take() {
                // Another holder: its own release looks again.
                return;
            }
            if for_space {
                self.wake_space();
            }
            if for_server && self.hand_to_server() {
                return;
            }
        }
    }

    /// Pushes `task` without holding the monitor; waits for space if the
    /// queue is full.
    fn push(&self, mut task: Task<T, S>) {
        loop {
            match self.queue.push(task) {
                Ok(()) => return,
                Err(t) => task = t,
            }
            self.wait_for_space();
        }
    }

    #[cold]
    fn wait_for_space(&self) {
        if let Some(waiter) = self.enqueue_for_space(|| Waiter::for_thread(0)) {
            self.woken_for_space(waiter.wait(false));
        }
    }

    /// [`wait_for_space`](Self::wait_for_space) for a task: `Some(waiter)`
    /// registered in `space` (poll it), or `None` if there is room to try
    /// again at once.
    #[cold]
    pub(crate) fn wait_for_space_async(&self, cx: &mut Context<'_>) -> Option<LoomArc<Waiter>> {
        self.enqueue_for_space(|| Waiter::for_task(cx.waker(), 0))
    }

    /// Registers a waiter (made by `make`) in `space` to be woken when the
    /// queue has room; `None` if it need not wait: the monitor was idle
    /// (we served it, which made room) or room appeared meanwhile.
    fn enqueue_for_space(&self, make: impl FnOnce() -> LoomArc<Waiter>) -> Option<LoomArc<Waiter>> {
        // Nobody else can make room while we hold the monitor, and we
        // cannot run tasks while one of ours has the data.
        assert!(
            !unwind::is_running(self.id()),
            "a task submitted to its own monitor whose queue is full: it would wait for ever \
             (raise the monitor's capacity, or submit from outside the task)"
        );
        if self.try_lock() {
            // Idle with a full queue: make room ourselves.
            self.serve();
            return None;
        }
        let waiter = make();
        self.space.push(LoomArc::clone(&waiter));
        // SeqCst fence: pairs with the fence in `release`. Either the
        // releasing holder sees us in `space` (and wakes us when it makes
        // room), or we see the room it made, or the monitor idle.
        fence(SeqCst);
        // An idle monitor matters only with a task ready at the front:
        // if its producer is in flight, that producer's `after_push` serves
        // it (or wakes the server), and the release after that wakes us.
        // Withdrawing then would only spin until it publishes. Nor is an
        // idle monitor ours to take while its server serves: the server
        // runs the task (we wake it if it sleeps), and its stint wakes us
        // once there is room (`serve_server`, `release`); withdrawing
        // would spin until the server thread runs.
        let idle_with_work = self.lock.load(Relaxed) == 0 && self.queue.front_ready();
        if idle_with_work && self.server.is_some() && !saturation::saturated() {
            self.wake_sleeping_server();
            return Some(waiter);
        }
        if self.queue.has_space() || idle_with_work {
            // Withdraw; a notify that won the race is as good (or hands us
            // the monitor: only a thread waiter is handed it, see
            // `hand_to_producer`).
            match waiter.cancel() {
                // Our node stays in `space` until the holder sweeps it.
                Ok(()) => self.space_withdrawn(),
                Err(token) => self.woken_for_space(token),
            }
            return None;
        }
        Some(waiter)
    }

    /// Wakes the monitor's server if it sleeps (it then takes the monitor,
    /// handed over held).
    fn wake_sleeping_server(&self) {
        if let Some(srv) = &self.server {
            if !srv.sleeper.is_empty() {
                self.wake_server();
            }
        }
    }

    /// A producer withdrew from `space` (an async `Submit` dropped while
    /// waiting, or a thread that found room after all): counted, and the
    /// withdrawn nodes are freed (by the withdrawing producer itself, if
    /// nobody pops `space` at the moment) once they outnumber the live
    /// ones (`sweep_space`). Not only by the monitor's holder: a holder
    /// busy in one long task would leave every node of the producers that
    /// gave up meanwhile in `space`.
    pub(crate) fn space_withdrawn(&self) {
        self.space_withdrawn.fetch_add(1, Relaxed);
        self.sweep_space();
    }

    /// Takes the consumer role of `space` if nobody has it.
    fn try_pop_space(&self) -> bool {
        // Acquire: pairs with the Release in `end_pop_space`, so our pops
        // come after the previous popper's.
        self.space_popper
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
    }

    /// Takes the consumer role of `space`, waiting for a producer that
    /// sweeps it (a few pops and pushes) to finish.
    fn pop_space(&self) {
        let mut spins = 0u32;
        while !self.try_pop_space() {
            spins += 1;
            if spins % 64 == 0 {
                // The sweeper may wait for a CPU.
                sync_core::wait::give_way(None);
            } else {
                hint::spin_loop();
            }
        }
    }

    /// Lets go of the consumer role of `space`.
    fn end_pop_space(&self) {
        // Release: pairs with the Acquire CAS in `try_pop_space`.
        self.space_popper.store(false, Release);
    }

    /// Frees the nodes of producers that withdrew from `space`, once they
    /// are at least as many as the live ones the last sweep kept (and at
    /// least [`SPACE_SWEEP_MIN`]): `space` then holds about twice the producers
    /// waiting, whatever the number of waits cancelled, and a sweep's cost
    /// is paid by as many withdrawals. Anyone may call it: it sweeps only
    /// if the consumer role of `space` is free (else the next withdrawal,
    /// or the holder's next wake-up, sweeps).
    fn sweep_space(&self) {
        let withdrawn = self.space_withdrawn.load(Relaxed);
        if withdrawn < SPACE_SWEEP_MIN.max(self.space_kept.load(Relaxed)) || !self.try_pop_space() {
            return;
        }
        let kept = self.sweep_space_popping();
        self.end_pop_space();
        if kept {
            self.look_after_space();
        }
    }

    /// After a sweep put live producers back into `space`: whoever let go
    /// of the monitor while the sweep had them out found `space` empty and
    /// woke nobody. Like a producer that registers, we look at the monitor
    /// after a SeqCst fence (pairs with the fences in `release` and
    /// `release_served`: either that holder sees the producers, or we see
    /// the monitor let go); if it is free (or offered), we take it, wake
    /// the producers there is room for, and let go as a holder does. If it
    /// is held (by us, too, when a task of this monitor dropped a
    /// submission), its holder's release looks at `space` after us.
    fn look_after_space(&self) {
        fence(SeqCst);
        if !self.take() {
            return;
        }
        self.wake_space();
        if self.server.is_some() && !saturation::saturated() {
            self.release_served();
        } else {
            self.serve();
        }
    }

    /// [`sweep_space`](Self::sweep_space) for a caller that has the
    /// consumer role; `true` if it swept and put live producers back.
    fn sweep_space_popping(&self) -> bool {
        let withdrawn = self.space_withdrawn.load(Relaxed);
        if withdrawn < SPACE_SWEEP_MIN.max(self.space_kept.load(Relaxed)) {
            return false;
        }
        self.space_withdrawn.store(0, Relaxed);
        let mut keep = Vec::new();
        while !self.space.is_empty() {
            // SAFETY: we have the consumer role of `space`.
            match unsafe { self.space.pop() } {
                Some(w) => {
                    if !w.is_cancelled() {
                        keep.push(w);
                    }
                }
                // A producer half-way through its push: leave the rest to
                // the next sweep.
                None => break,
            }
        }
        self.space_kept.store(keep.len(), Relaxed);
        // Back in the order they waited (behind any that came meanwhile).
        // A producer that withdraws after this is counted again; one that
        // stays is woken as before (nothing is lost: the nodes stay the
        // same waiters).
        let kept = !keep.is_empty();
        for w in keep {
            self.space.push(w);
        }
        kept
    }

    /// A producer woken for space (its waiter was notified) gives up
    /// without pushing: the wake-up is passed on. If the monitor is idle we
    /// take it and serve, and its release wakes the next producers while
    /// there is room; if it is held, the holder's release does (it looks at
    /// `space` after its SeqCst fence, which pairs with ours).
    #[cold]
    pub(crate) fn pass_space_on(&self) {
        self.after_push();
    }

    /// The asynchronous submissions' step ([`Submit`]): runs `task` if the
    /// monitor is idle (serving what is queued), or queues it;
    /// `Err(task)` if the queue is full.
    pub(crate) fn try_submit(&self, task: Task<T, S>) -> Result<(), Task<T, S>> {
        if self.try_lock() {
            self.submit_job(task, true);
            return Ok(());
        }
        self.queue.push(task)?;
        self.after_push();
        Ok(())
    }

    /// Pushes `task` while holding the monitor (we are the consumer: if the
    /// queue is full, run the first task to make room).
    fn push_held(&self, mut task: Task<T, S>) {
        loop {
            match self.queue.push(task) {
                Ok(()) => return,
                Err(t) => task = t,
            }
            match self.pop() {
                Some(first) => self.execute(first),
                // The first position's producer is in flight.
                None => hint::spin_loop(),
            }
        }
    }

    /// Takes the first queued task.
    fn pop(&self) -> Option<Task<T, S>> {
        // SAFETY: the caller holds the monitor: the only consumer, after
        // the previous holder (lock Acquire/Release).
        unsafe { self.queue.pop() }
    }

    /// Checks and runs (or files) one task. The caller holds the monitor.
    fn execute(&self, task: Task<T, S>) {
        let guard = Unlock(self);
        self.execute_unguarded(task);
        core::mem::forget(guard);
    }

    /// `execute`, without letting go of the monitor if it unwinds (for the
    /// owner, who holds no lock).
    fn execute_unguarded(&self, task: Task<T, S>) {
        unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: the caller holds the monitor.
                unsafe { (*e).execute(task) }
            })
        });
    }

    /// Serves the queue while holding the monitor; returns once the monitor
    /// is released or handed off. Then resumes a panic caught in a drop or
    /// a waker meanwhile (see `unwind`), unless a task body of another
    /// monitor runs below us on this thread (its own serve resumes it).
    fn serve(&self) {
        self.serve_loop();
        unwind::resume_deferred();
    }

    /// A combiner's stint: at most `batch` tasks of its own choosing, then
    /// it gives way (`give_way`). Taking the monitor back after a release
    /// (work remained and nobody took it) does not restart the count, so
    /// the stint is bounded whatever other threads submit meanwhile.
    fn serve_loop(&self) {
        let mut budget = self.batch;
        // Tasks run in this stint (see `give_way`).
        let mut served = 0;
        loop {
            if self.server.is_some() && !saturation::saturated() {
                // The server's work: hand it over.
                self.release_served();
                return;
            }
            if budget == 0 {
                if self.give_way(served) {
                    return;
                }
                budget = self.batch;
                continue;
            }
            match self.pop() {
                Some(task) => {
                    self.execute(task);
                    budget -= 1;
                    served += 1;
                }
                None => {
                    if self.release() {
                        return;
                    }
                }
            }
        }
    }

    /// After a batch: hands the monitor to a blocked caller whose task is
    /// next if that caller is running (it spins for its token), keeps
    /// serving if the next task's caller sleeps, offers the monitor to
    /// whoever publishes next ([`HANDOVER`]) if the next task is
    /// asynchronous, or releases it if nothing is queued. Once the stint
    /// has run `served` tasks, as many as the queue holds, it must end: the
    /// monitor goes, held, to a producer asleep waiting for space, or to
    /// the next publisher, or to the next task's caller even if it sleeps.
    /// `false` if we still hold it: serve another batch.
    ///
    /// Waking a sleeping thread costs a wake-up (tens of microseconds, and
    /// up to a scheduling quantum when there are more threads than CPUs)
    /// during which nobody serves, and every caller that comes meanwhile
    /// queues behind it and falls asleep in turn: handing the monitor to a
    /// sleeping caller after every batch made a convoy that never
    /// dissolved (hundreds of times slower than a lock with 32 threads
    /// calling). Running a sleeping caller's task costs its unpark, and the
    /// monitor keeps being served. After a queue's worth of tasks a wake-up
    /// costs a few percent, and the stint stays bounded: about what was
    /// queued when it began, plus that many.
    fn give_way(&self, served: usize) -> bool {
        self.sweep_space();
        // SAFETY: we are the consumer; the borrow ends before `pop`.
        let front =
            unsafe { self.queue.peek() }.map(|t| (t.job().is_blocking(), t.job().caller_spins()));
        let Some((blocking, spins)) = front else {
            return self.release();
        };
        if blocking && spins {
            // A running caller: it takes over within a few instructions.
            self.hand_off_front();
            return true;
        }
        if served < self.queue.capacity() {
            if blocking {
                // Its caller waits for it anyway: run it.
                return false;
            }
            return self.offer_backing_off();
        }
        // The stint is over. A producer thread waiting for space is handed
        // the monitor, held. Async producers waiting for space are woken,
        // and the monitor is let go of for them: a woken producer always
        // looks at the monitor when its executor polls it (it pushes and
        // serves an idle monitor, or passes the wake-up on if dropped,
        // which does the same), so the queued tasks are not stranded, and
        // whoever comes first serves them. Otherwise the monitor is offered
        // (backing off: with a small queue the stint is over after a few
        // batches, and an offer nobody takes costs its spin and a yield
        // each time).
        match self.hand_to_producer() {
            Handover::Thread | Handover::Tasks => return true,
            Handover::Retaken => return false,
            Handover::Nobody => {}
        }
        if self.offer_backing_off() {
            return true;
        }
        if blocking {
            self.hand_off_front();
            return true;
        }
        false
    }

    /// Hands the monitor, held, to the caller of the front task, a blocked
    /// `call` (after `peek`): it runs the task itself, then serves.
    fn hand_off_front(&self) {
        self.wake_space();
        let task = self.pop().expect("peeked");
        // SAFETY: a blocking call's task, not run; we hold the monitor
        // and touch it no more after this.
        unsafe { task.handoff() };
    }

    /// Offers the monitor to the next publisher, unless offers are backing
    /// off: offers nobody takes cost their spin each, so after a miss the
    /// combiner serves more batches before the next offer (1, 2, 4, up to
    /// [`OFFER_BACKOFF_MAX`]), back to every batch once one is taken. The
    /// stint stays bounded. `true` if the offer was taken.
    fn offer_backing_off(&self) -> bool {
        let skip = self.offer_skip.load(Relaxed);
        if skip > 0 {
            self.offer_skip.store(skip - 1, Relaxed);
            return false;
        }
        if self.offer_handover() {
            self.offer_backoff.store(0, Relaxed);
            return true;
        }
        let backoff = (2 * self.offer_backoff.load(Relaxed)).clamp(1, OFFER_BACKOFF_MAX);
        self.offer_backoff.store(backoff, Relaxed);
        self.offer_skip.store(backoff, Relaxed);
        false
    }

    /// Hands the held monitor to a producer thread waiting for space
    /// ([`SPACE_HELD`]): it serves, then pushes its task. `true` if one
    /// took it; we then touch the monitor no more. A producer that waits
    /// in a task (not a thread) is only woken ([`SPACE`]): a task runs when
    /// its executor polls it, which a combiner must not wait for.
    ///
    /// Unlike an offer, this needs no taker to come by: the producer is
    /// there, asleep, and the notify (Release, paired with its Acquire of
    /// the token) passes the monitor and the data as we left them.
    fn hand_to_producer(&self) -> Handover {
        // SeqCst fence: as in `wake_space` (pairs with the producer's fence
        // in `wait_for_space`: either we see it in `space`, or it sees the
        // room or the offer and does not sleep).
        fence(SeqCst);
        // A producer sweeping `space`: skip this hand-over (the stint ends
        // by another).
        if self.space.is_empty() || !self.try_pop_space() {
            return Handover::Nobody;
        }
        let mut tasks = Vec::new();
        let mut handed = false;
        while !handed && !self.space.is_empty() {
            // SAFETY: we have the consumer role of `space`.
            match unsafe { self.space.pop() } {
                Some(w) if w.is_thread() => handed = w.notify(SPACE_HELD),
                Some(w) => tasks.push(w),
                // A producer is half-way through its push.
                None => hint::spin_loop(),
            }
        }
        if handed {
            // The monitor is the thread's now: the woken tasks' looks at it
            // are its holder's to answer.
            for w in &tasks {
                Self::notify_space(w);
            }
            self.end_pop_space();
            return Handover::Thread;
        }
        if tasks.is_empty() {
            self.end_pop_space();
            return Handover::Nobody;
        }
        // Let go first, then wake: each woken producer's look at the
        // monitor comes after our release (the Release store below is
        // sequenced before the notify's Release CAS of its token, which the
        // producer acquires before it looks).
        self.unlock_plain();
        let mut woken = false;
        for w in &tasks {
            woken |= Self::notify_space(w);
        }
        self.end_pop_space();
        if woken {
            return Handover::Tasks;
        }
        // All of them withdrew meanwhile: nobody is bound to look. Look as
        // a releasing holder does.
        if self.look_after_release() {
            Handover::Tasks
        } else {
            Handover::Retaken
        }
    }

    /// A producer woken while waiting for space: with [`SPACE_HELD`] it
    /// holds the monitor, handed over by a combiner after its batch, and
    /// serves (making room) before it pushes.
    fn woken_for_space(&self, token: usize) {
        if token == SPACE_HELD {
            self.serve();
        }
    }

    /// Offers the held monitor to the next submitter that publishes (its
    /// `after_push` takes it from [`HANDOVER`]), for a short while; then
    /// takes it back if nobody did. `true` if someone took it.
    ///
    /// No task is stranded: the queued tasks are served either by the
    /// taker, who holds the monitor from its CAS on, or by us, who hold it
    /// again from ours; exactly one of the two CASes from our offer
    /// succeeds.
    fn offer_handover(&self) -> bool {
        self.wake_space();
        // Release: pairs with the Acquire CAS in the taker's `take`, which
        // then sees the data as we left it. Only the holder writes the lock
        // word while it is LOCKED, so a store suffices.
        let offer = HANDOVER | (self.offers.fetch_add(1, Relaxed) << 2);
        self.lock.store(offer, Release);
        for _ in 0..HANDOVER_SPINS {
            hint::spin_loop();
            if self.lock.load(Relaxed) != offer {
                return true;
            }
        }
        // One yield: with more threads than CPUs the publisher that would
        // take the offer may be waiting for ours (a yield with nobody to
        // run is a fraction of a microsecond). Not the family's give_way:
        // once yields are slow it sleeps, and nobody serves while an offer
        // sleeps (am/call/32 went from 5x to 25x parking_lot with it).
        #[cfg(not(loom))]
        {
            std::thread::yield_now();
            if self.lock.load(Relaxed) != offer {
                return true;
            }
        }

        // Acquire: pairs with the Release store of HANDOVER by whoever
        // offers it now (a taker that served and offered it in turn); the
        // offer is ours to take back as much as anyone's.
        self.lock
            .compare_exchange(offer, LOCKED, Acquire, Relaxed)
            .is_err()
    }

    /// The server's stint: runs the queue until it is empty (and stays
    /// empty through `release`'s check), waking producers waiting for
    /// space every `batch` tasks. The server holds the monitor.
    pub(crate) fn serve_server(&self) {
        if let Some(srv) = &self.server {
            // Our own withdrawn waiters, left by `prepare_sleep`: nobody
            // else pushes there, so this empties the queue, which thus
            // holds at most the waiters of one idle spell.
            // SAFETY: we hold the monitor: the `sleeper` queue's consumer.
            while unsafe { srv.sleeper.pop() }.is_some() {}
        }
        let mut n = 0;
        loop {
            match self.pop() {
                Some(task) => {
                    self.execute(task);
                    n += 1;
                    if n == self.batch {
                        n = 0;
                        self.wake_space();
                    }
                }
                None => {
                    if self.release() {
                        return;
                    }
                }
            }
        }
    }

    /// An idle server watches the queue for [`SPIN`](crate::server::SPIN)
    /// (not when the CPUs are saturated: it then yields its CPU at once).
    /// `true` once a task is ready and the monitor is free to take.
    pub(crate) fn idle_watch(&self) -> bool {
        if saturation::saturated() {
            return false;
        }
        #[cfg(not(loom))]
        {
            let start = std::time::Instant::now();
            loop {
                for _ in 0..32 {
                    if self.work_for_server() {
                        return true;
                    }
                    hint::spin_loop();
                }
                if start.elapsed() >= crate::server::SPIN {
                    return false;
                }
            }
        }
        #[cfg(loom)]
        {
            self.work_for_server()
        }
    }

    /// Lets go of the monitor without looking for work (the server, ending:
    /// the monitor's drop runs what is queued).
    pub(crate) fn unlock_plain(&self) {
        // Release: pairs with the Acquire CAS in `take`.
        self.lock.store(0, Release);
    }

    /// Whether a task is ready and nobody holds the monitor.
    pub(crate) fn work_for_server(&self) -> bool {
        let s = self.lock.load(Relaxed);
        (s == 0 || s & STATE == HANDOVER) && self.queue.front_ready()
    }

    /// The server's step before it sleeps: queues `waiter` on `sleeper`,
    /// then looks for work once more. `None`: sleep (a submitter or a
    /// holder will hand the monitor over with `HELD`). `Some(held)`: do not
    /// sleep; `held` if the monitor was handed over meanwhile.
    pub(crate) fn prepare_sleep(&self, waiter: &LoomArc<Waiter>) -> Option<bool> {
        let srv = self.server.as_ref()?;
        srv.sleeper.push(LoomArc::clone(waiter));
        // SeqCst fence: pairs with the fences in `after_push` and
        // `release_served`: either they see our waiter and hand us the
        // monitor, or we see their task (and the monitor free).
        fence(SeqCst);
        // Relaxed `stop`: ordered by the fence (see `Users::drop`).
        if self.work_for_server() || srv.stop.load(Relaxed) {
            // Withdraw; a notify that won the race handed us the monitor
            // (`HELD`), or told us to stop (`STOP`: not a hand-over).
            return Some(matches!(waiter.cancel(), Err(HELD)));
        }
        None
    }

    /// Releases the monitor. Returns `false` if it took it back because work
    /// remained (a published task, or producers waiting for space) and
    /// nobody else had taken it.
    fn release(&self) -> bool {
        // Release: pairs with the Acquire CAS in `try_lock` (the next
        // holder sees the data as we left it).
        self.lock.store(0, Release);
        self.look_after_release()
    }

    /// [`release`](Self::release)'s look for work, once the monitor is let
    /// go of: `false` if it took the monitor back.
    fn look_after_release(&self) -> bool {
        // SeqCst fence: pairs with the fences in `after_push` and
        // `wait_for_space` (see there).
        fence(SeqCst);
        // Producers waiting for space matter only once the queue is at most
        // half full (a fuller queue's tasks are served, by us or by their
        // producers after they publish, and it drains to half).
        if !self.queue.front_ready() && (self.space.is_empty() || !self.room_for_waiters()) {
            return true;
        }
        // `take`, not `try_lock`: with a server that serves, `try_lock`
        // always fails, so neither producers waiting for space nor a task
        // published while saturation ended would be looked after (the
        // server may sleep). Taken back, a server keeps serving; another
        // holder goes round `serve_loop` into `release_served`.
        if !self.take() {
            return true;
        }
        self.wake_space();
        false
    }

    /// Wakes as many producers waiting for space as there are free slots.
    /// The caller holds the monitor; it takes the consumer role of `space`
    /// (waiting for a producer that sweeps it).
    ///
    /// Producers are woken only once the queue is at most half full: each
    /// then finds room for several tasks, instead of one wake-up (tens of
    /// microseconds) per slot freed.
    fn wake_space(&self) {
        // SeqCst fence: as in `release`, for a holder that gives way by a
        // handoff (without releasing).
        fence(SeqCst);
        if self.space.is_empty() {
            return;
        }
        self.pop_space();
        // We hold the monitor: the producers put back are woken below, or
        // by our release.
        self.sweep_space_popping();
        self.wake_space_popping();
        self.end_pop_space();
    }

    /// [`wake_space`](Self::wake_space)'s wake-ups, with the consumer role
    /// of `space`.
    fn wake_space_popping(&self) {
        if !self.room_for_waiters() {
            return;
        }
        let mut free = self.queue.capacity() - self.queue.len();
        // Re-check the room every time: producers woken first refill the
        // queue and wait in `space` again while this loop still runs; waking
        // them once more would only park them again (at 8 threads on 2 CPUs
        // that was a park and a wake-up per two operations).
        while free > 0 && !self.space.is_empty() && self.room_for_waiters() {
            // SAFETY: we have the consumer role of `space`.
            match unsafe { self.space.pop() } {
                Some(w) => {
                    if Self::notify_space(&w) {
                        free -= 1;
                    }
                }
                // A producer is half-way through its push: it links in a
                // few instructions.
                None => hint::spin_loop(),
            }
        }
    }

    /// Wakes a producer waiting for space with [`SPACE`]; `false` if it had
    /// withdrawn. An async producer's waker is user code, run while we hold
    /// the monitor: a panic in it is caught and resumed once the monitor is
    /// let go of (see `unwind`), never left to unwind with the monitor held.
    fn notify_space(w: &LoomArc<Waiter>) -> bool {
        match Waiter::notify_later(w, SPACE) {
            Some(wake) => {
                unwind::caught(|| wake.wake());
                true
            }
            None => false,
        }
    }

    /// Whether the queue has drained enough to wake producers waiting for
    /// space (at most half full).
    fn room_for_waiters(&self) -> bool {
        self.queue.len() <= self.queue.capacity() / 2
    }

    /// Runs every queued task (no one else is around).
    fn run_queued(&mut self) {
        while let Some(task) = self.pop() {
            self.execute_unguarded(task);
        }
    }
}

impl<T, S: AbstractState> Drop for Monitor<T, S> {
    /// Runs the queued tasks (their completions get their results), then discards
    /// the tasks still waiting on preconditions (their completions resolve
    /// to [`Discarded`](crate::Discarded)). Nothing is left waiting.
    fn drop(&mut self) {
        self.run_queued();
        self.exec.with_mut(|e| {
            // SAFETY: `&mut self`: nobody else holds the monitor.
            unsafe { (*e).waiting.discard_all() }
        });
        unwind::resume_deferred();
    }
}

impl<T, S: AbstractState> fmt::Debug for Monitor<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor")
            .field("held", &(self.lock.load(Relaxed) != 0))
            .field("queued", &self.queue.len())
            .field("capacity", &self.queue.capacity())
            .field("batch", &self.batch)
            .field("order", &self.order)
            .field("server", &self.server.is_some())
            .finish_non_exhaustive()
    }
}

/// Lets go of the monitor if the holder unwinds (a panic that escaped
/// every catch: none is known, user code is caught where it runs), then
/// serves what remains if nobody else took it, so the monitor is never
/// left held by a thread that has gone.
struct Unlock<'a, T, S: AbstractState>(&'a Monitor<T, S>);

impl<T, S: AbstractState> Drop for Unlock<'_, T, S> {
    fn drop(&mut self) {
        if !self.0.release() {
            self.0.serve_loop();
        }
        // The callers whose tasks ran are not left asleep by the unwind.
        unwind::wake_deferred();
    }
}

/// The monitor's data, borrowed by its owner ([`Monitor::get_mut`]); its
/// drop runs the waiting tasks the change enabled.
///
/// # Examples
///
/// ```
/// let mut m = active_monitor::Monitor::new(vec![1]);
/// m.get_mut().push(2);
/// assert_eq!(m.call(|v| v.len()), 2);
/// ```
#[must_use = "the guard is the data; dropping it at once changes nothing"]
pub struct DataMut<'a, T, S: AbstractState = NoState> {
    monitor: &'a mut Monitor<T, S>,
    /// `&DataMut` hands out `&T`, so `DataMut` may be shared between
    /// threads only when `T: Sync` (as std's `MutexGuard`); `&mut Monitor`
    /// alone is `Sync` whenever `T: Send`. `RwLock<T>` is `Send` when
    /// `T: Send` and `Sync` when `T: Send + Sync`: exactly the bounds
    /// wanted, without an `unsafe impl`.
    _sync_only_if_t_is: PhantomData<std::sync::RwLock<T>>,
}

impl<T, S: AbstractState> core::ops::Deref for DataMut<'_, T, S> {
    type Target = T;

    fn deref(&self) -> &T {
        let exec = self.monitor.exec.with(|e| e);
        // SAFETY: the guard borrows the monitor mutably: nobody holds it.
        unsafe { &(*exec).data }
    }
}

impl<T, S: AbstractState> core::ops::DerefMut for DataMut<'_, T, S> {
    fn deref_mut(&mut self) -> &mut T {
        let exec = self.monitor.exec.with_mut(|e| e);
        // SAFETY: as for `deref`, and `&mut self` makes it unique.
        unsafe { &mut (*exec).data }
    }
}

impl<T, S: AbstractState> Drop for DataMut<'_, T, S> {
    fn drop(&mut self) {
        let id = self.monitor.id();
        unwind::running(id, || {
            self.monitor.exec.with_mut(|e| {
                // SAFETY: `&mut` monitor: nobody else holds it.
                unsafe { (*e).relay() }
            })
        });
        unwind::resume_deferred();
    }
}

impl<T: fmt::Debug, S: AbstractState> fmt::Debug for DataMut<'_, T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A `when_in` task's entry set, as a mask.
///
/// # Panics
///
/// If `set` is empty (the task could never run); `method` names the caller.
fn entry_set<S: AbstractState>(set: StateSet<S>, method: &str) -> u64 {
    assert!(
        !set.is_empty(),
        "Monitor::{method} with an empty set of states: the task could never run"
    );
    set.bits()
}

fn unwrap_call<R>(outcome: Outcome<R>) -> R {
    match outcome {
        Outcome::Value(r) => r,
        Outcome::Panicked(p) => resume_unwind(p),
        Outcome::Discarded => unreachable!("a call is never discarded"),
    }
}

/// The holder's side of the monitor.
struct Exec<T, S> {
    data: T,
    state: S,
    waiting: Waiting<T, S>,
}

impl<T, S: AbstractState> Exec<T, S> {
    fn execute(&mut self, task: Task<T, S>) {
        match task.job().check(&self.data, self.state) {
            Check::Run => {
                self.run(task);
                self.relay();
            }
            Check::Wait => self.waiting.file(task),
            Check::Gone => unwind::drop_caught(task),
        }
    }

    fn run(&mut self, task: Task<T, S>) {
        // A blocking caller is notified only once nothing refers to its job
        // (on its stack) any more: not from inside `run(&self)`.
        let caller = task.caller();
        // SAFETY: we hold the monitor; `check` said Run in this state.
        if let Some(next) = unsafe { task.job().run(&mut self.data) } {
            self.state = next;
        }
        // The last reference to a task whose completion was dropped: its
        // result and precondition are user values.
        unwind::drop_caught(task);
        if let Some(waiter) = caller {
            // Release (in `notify_deferred`): the result written by `run`
            // happens before the caller's Acquire of the token. A caller
            // that spins sees it at once; a sleeping one is unparked once
            // we have let go of the monitor (`unwind::wake_later`), not on
            // every other caller's time.
            unwind::wake_later(Waiter::notify_deferred(&waiter, DONE));
        }
    }

    /// Whether any task waits on its precondition.
    #[inline]
    fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Relay invariance: after a task ran, run the waiting tasks whose
    /// precondition now holds, oldest first, until none does.
    #[inline]
    fn relay(&mut self) {
        // Most monitors have no waiting task most of the time: no call.
        if !self.waiting.is_empty() {
            self.relay_waiting();
        }
    }

    #[inline(never)]
    fn relay_waiting(&mut self) {
        while let Some(task) = self.waiting.take_ready(&self.data, self.state) {
            self.run(task);
        }
    }
}

/// Waiting tasks with their submission order, oldest first.
type Fifo<T, S> = VecDeque<(u64, Task<T, S>)>;

/// The fewest waiting tasks that trigger a sweep of forsaken ones.
const SWEEP_MIN: usize = 32;

/// Tasks waiting on their preconditions. Memory grows with the tasks that
/// wait, never with the history: an entry set's list is dropped with its
/// last task, and OR operands whose OR was taken on another monitor are
/// swept out whenever the lists have doubled since the last sweep (they
/// would otherwise stay until a task runs here, and pile up on a monitor
/// where nothing runs).
struct Waiting<T, S> {
    /// Submission order among waiting tasks.
    next_seq: u64,
    /// The number of waiting tasks at which `file` sweeps next.
    sweep_at: usize,
    /// Tasks with predicates, oldest first.
    by_pred: Fifo<T, S>,
    /// Tasks with entry sets, one FIFO list per distinct set (its mask).
    by_set: Vec<(u64, Fifo<T, S>)>,
}

impl<T, S> Default for Waiting<T, S> {
    fn default() -> Self {
        Self {
            next_seq: 0,
            sweep_at: SWEEP_MIN,
            by_pred: VecDeque::new(),
            by_set: Vec::new(),
        }
    }
}

impl<T, S: AbstractState> Waiting<T, S> {
    fn file(&mut self, task: Task<T, S>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        match task.job().entry() {
            None => self.by_pred.push_back((seq, task)),
            Some(mask) => match self.by_set.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, list)) => list.push_back((seq, task)),
                None => self.by_set.push((mask, VecDeque::from([(seq, task)]))),
            },
        }
        let len = self.len();
        if len >= self.sweep_at {
            self.sweep();
            // Amortised: the next sweep only after as many new filings
            // again as tasks are left.
            self.sweep_at = SWEEP_MIN.max(2 * self.len());
        }
    }

    /// Whether no task waits.
    #[inline]
    fn is_empty(&self) -> bool {
        self.by_pred.is_empty() && self.by_set.is_empty()
    }

    /// How many tasks wait.
    fn len(&self) -> usize {
        self.by_pred.len() + self.by_set.iter().map(|(_, l)| l.len()).sum::<usize>()
    }

    /// Drops the forsaken tasks (OR operands taken elsewhere), keeping the
    /// others in order.
    fn sweep(&mut self) {
        let mut gone = Vec::new();
        let mut split = |list: &mut Fifo<T, S>| {
            for (seq, t) in core::mem::take(list) {
                if t.job().is_forsaken() {
                    // SAFETY: the task never ran; it leaves the list here.
                    unsafe { t.job().discard() };
                    gone.push(t);
                } else {
                    list.push_back((seq, t));
                }
            }
        };
        split(&mut self.by_pred);
        for (_, list) in &mut self.by_set {
            split(list);
        }
        self.by_set.retain(|(_, l)| !l.is_empty());
        // Their drops are user code (see `unwind`).
        for t in gone {
            unwind::drop_caught(t);
        }
    }

    /// The oldest waiting task whose precondition holds, removed.
    fn take_ready(&mut self, data: &T, state: S) -> Option<Task<T, S>> {
        if self.by_pred.is_empty() && self.by_set.is_empty() {
            return None;
        }
        let bit = 1u64 << state.index();
        // Entry sets: only the lists whose set contains the state; their
        // fronts are the candidates (OR operands already taken elsewhere
        // are dropped on the way).
        let mut best_set: Option<(u64, usize)> = None;
        let mut i = 0;
        while i < self.by_set.len() {
            let (mask, list) = &mut self.by_set[i];
            if *mask & bit != 0 {
                while let Some((seq, t)) = list.front() {
                    match t.job().check(data, state) {
                        Check::Run => {
                            if best_set.is_none_or(|(s, _)| *seq < s) {
                                best_set = Some((*seq, i));
                            }
                            break;
                        }
                        Check::Gone => unwind::drop_caught(list.pop_front()),
                        Check::Wait => unreachable!("an entry set that contains the state"),
                    }
                }
                if list.is_empty() {
                    self.by_set.swap_remove(i);
                    // The last list moved into slot i, unvisited: visit it.
                    continue;
                }
            }
            i += 1;
        }
        // Predicates: the oldest that holds, if older than the set's.
        let limit = best_set.map_or(u64::MAX, |(s, _)| s);
        let mut j = 0;
        while j < self.by_pred.len() {
            let (seq, t) = &self.by_pred[j];
            if *seq > limit {
                break;
            }
            match t.job().check(data, state) {
                Check::Run => return self.by_pred.remove(j).map(|(_, t)| t),
                Check::Gone => unwind::drop_caught(self.by_pred.remove(j)),
                Check::Wait => j += 1,
            }
        }
        let (_, i) = best_set?;
        let list = &mut self.by_set[i].1;
        let (_, task) = list.pop_front().expect("a candidate");
        if list.is_empty() {
            self.by_set.swap_remove(i);
        }
        Some(task)
    }

    fn discard_all(&mut self) {
        let sets = self.by_set.drain(..).flat_map(|(_, l)| l);
        for (_, task) in self.by_pred.drain(..).chain(sets) {
            // SAFETY: the task never ran and is dropped here.
            unsafe { task.job().discard() };
            unwind::drop_caught(task);
        }
    }
}
