//! [`Monitor`]: the active monitor; its builder (`builder`), its methods
//! (`api`), the combining executor (`combiner`), the server thread's side
//! (`serving`), the producers waiting for queue space (`space`) and the
//! waiting tasks (`waiting`).

use core::fmt;
use core::marker::PhantomData;

use ast_mutex::AbstractState;
use sync_core::CachePadded;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::wait::Backoff;
use sync_core::waiter::WaiterQueue;

use crate::order::Order;
use crate::server::ServerSlot;
use crate::sweep::SweepCount;
use crate::task::Task;
use crate::unwind;
use sync_core::bounded_queue::BoundedQueue as TaskQueue;

use crate::NoState;

mod api;
mod api_async;
mod builder;
mod combiner;
mod serving;
mod space;
mod waiting;

pub use builder::{Builder, DEFAULT_BATCH, DEFAULT_CAPACITY};
use combiner::{CALL_BACKOFF_MAX, CALL_LOCK_SPINS, Unlock};
use space::Handover;
use waiting::{Exec, Waiting};

/// [`Monitor::lock`]: someone holds the monitor (a combiner serving, a
/// caller or server it was handed to, or `Drop`).
pub(super) const LOCKED: usize = 1;

/// [`Monitor::lock`], low bits: a combiner that has run its batch offers
/// the monitor to whoever publishes next; it still holds it until someone
/// takes it (`take`, a CAS to [`LOCKED`]) or it takes it back (the same
/// CAS). The bits above [`STATE`] number the offer, so that an offerer
/// tells its own offer from a later one (someone took ours, served, and
/// offered in turn): it then knows it was taken, and does not take the
/// later offer back as if it were its own.
pub(super) const HANDOVER: usize = 2;
/// The low bits of [`Monitor::lock`]: 0, [`LOCKED`] or [`HANDOVER`].
pub(super) const STATE: usize = 3;

/// A holder waits for another thread half-way through its push into one
/// of the monitor's queues (a producer that claimed the task queue's first
/// position and has not published its task, a producer registering in
/// `space` to wait for room, the server queuing its waiter in `sleeper`):
/// a few instructions, unless that thread was preempted there (then for as
/// long as it waits for a CPU, a scheduling round beside busy threads).
/// The family's wait: a short spin, then our core is given away (a sleep
/// once yields are slow), never spun on.
fn wait_for_push(backoff: &mut Backoff) {
    backoff.snooze();
}

/// A monitor whose critical sections are *tasks*, run by whoever holds it:
/// the paper's ActiveMonitor.
///
/// A task is a closure over the protected data (`&mut T`), optionally with
/// a precondition. Workers never lock the data themselves:
///
/// * [`call`](Self::call) runs a task and returns its result (synchronous
///   delegation);
/// * [`submit`](Self::submit) returns a [`Completion`](crate::Completion) at once
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
///   waiting for queue space; or, if async producers wait for space, it
///   lets the monitor go and wakes them (each looks at the monitor when
///   its executor polls it, and serves it if nobody else does); or it
///   offers it to the next publisher, or hands it to the next blocked
///   caller even if asleep. So a combiner's stint is bounded even under a
///   stream of submissions from other threads or tasks: what the queue
///   held when it began, plus about a queue's worth (with a
///   [`Builder::batch`] of `usize::MAX`, whose batch never ends, only by
///   the tasks submitted while it serves).
///
///   A `call` that finds the monitor held with nothing queued (its holder
///   runs a task of its own, as a lock's holder runs its critical section)
///   first watches the monitor a short while, as a lock's waiter spins,
///   and runs its task itself once the monitor is let go; only then does
///   it queue the task. A blocked caller whose task a combiner ran is
///   given its result at once, and woken, if it sleeps, once the combiner
///   has let go of the monitor.
/// * **A dedicated server thread** ([`Builder::build_served`], which
///   returns a shared [`Served`](crate::Served) handle): the server runs the tasks;
///   submitters only publish, and wake the server if it sleeps. A `call`
///   that finds the monitor idle (nothing queued, nobody holding it) runs
///   its task at once, as with combining: its caller waits anyway, and a
///   round trip to the server costs a wake-up or two (a sleeping server's
///   is a system call each way, far more than the task itself); a `call`
///   that finds tasks
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
/// drains). A task that submits to its own monitor (an actor's tick that
/// schedules the next one) publishes too: a chain of such tasks that never
/// ends keeps the thread that serves it for ever, on a monitor without a
/// server the submitter that started it; give such a chain a served
/// monitor. A server serves for as long as tasks come; that is its job.
/// An awaited [`when_async`](Self::when_async) runs its body in its own
/// poll, which needs the monitor free: on a monitor that is never idle (a
/// chain as above) it may wait for as long as the chain runs, where a
/// blocking [`when`](Self::when) is run by the holder. A
/// task runs only while someone holds the
/// monitor, so a task must not block on the monitor it runs on: a `call`
/// on its own monitor from inside one of its tasks panics, and so does a
/// `submit`, `when` or `when_in` that finds the queue full, and so does
/// a blocking `wait` (or `wait_result`) for an unfinished task of the
/// monitor (each would wait for ever). The same holds below the innermost
/// task: a task of `a` that calls into `b`, whose task then calls `a`,
/// finds `a`'s queue full or waits for a task of `a`, panics. (A wait
/// for an [`or`](crate::or) or [`and`](crate::and) with an operand on
/// such a monitor is not checked: it deadlocks.) A task's waker (a
/// completion's, an awaiting future's, a producer's woken for queue space)
/// runs once the thread that woke it has let go of the monitor, so that an
/// executor that polls the task inside `wake` finds the monitor free; on a
/// server thread it runs as a task of the monitor, and so does what it sets
/// off there: a task polled there is held to the rules above. A `call`
/// it makes on the monitor while another thread holds it panics (the panic
/// is dropped with the server's others), as does an async submission
/// (`submit_async`...) that finds the queue full, and a `wait` for an
/// unfinished task of the monitor. A task body
/// that blocks (on this crate, or on a lockfree-sync channel, semaphore or
/// mutex, an ast-mutex entry or an adaptive-lock lock) first wakes the
/// task wakers its thread keeps, so that it may wait for those tasks' next
/// steps, and drops the results nobody took and preconditions it keeps of
/// monitors other than those whose task bodies run on the thread, the
/// body's and any below it (see "Panics in tasks"); a body that blocks on anything
/// else (a `std` channel, a sleep) keeps them until it ends. The body's
/// monitor is still held then: a task polled on the spot there that
/// blocks on it panics, as a call from a task of it does, and so does such
/// a `Drop` that calls it.
///
/// # Panics in tasks
///
/// A panic in a precondition or a body is caught; it resumes in whoever
/// takes the task's result ([`Completion::wait`](crate::Completion::wait), `.await`, or the `call`
/// itself). The monitor keeps serving. The data is not poisoned: it is left
/// as the panicking body left it.
///
/// A result whose [`Completion`](crate::Completion) was dropped, and a
/// precondition, are dropped once the thread that ran their task has let
/// go of the monitor (at the end of its `call` or submission, or of a
/// server's stint), so that their `Drop` may use this monitor (a lease
/// that returns itself to its pool). Inside a task body of another
/// monitor, that is at the end of the body, or before the body's thread
/// parks in a blocking wait of the family, whichever comes first; but
/// never while a task body of their own monitor runs on the thread (the
/// thread holds it): a body that parks there waiting for what such a drop
/// releases waits for ever. On a server thread they are dropped
/// as tasks of the monitor (a `Drop` there that used it would wait for its
/// own server: it panics, as a `call` from a task of the monitor does, and
/// the panic is dropped with the server's others). Run inside a task body
/// of another monitor (a `call` made there), they are dropped once that
/// body ends too, or before the thread parks in a blocking wait of the
/// family (this crate's, or those that wake the kept task wakers, see
/// "Progress"), so that a body may wait for what such a drop releases;
/// the body's monitor is still held then, and a drop that calls it
/// panics, as a call from a task of it does. A thread keeps those of one
/// stint: a combiner's is bounded by about twice the queue's capacity, and
/// a server lets go of the monitor to drop them once it keeps a few
/// dozen.
///
/// A panic in a drop the monitor makes (a body never run, a result whose
/// [`Completion`](crate::Completion) was dropped, a precondition, the
/// payload of a task's panic that nobody takes) or in a completion's waker
/// is caught too: the monitor stays consistent and is let go of, then the
/// panic resumes in the thread that was holding it, when its `call` or
/// submission returns (or is dropped if that thread already unwinds). An
/// async submission's poll whose task has been queued or has run keeps it
/// for the thread's next poll or operation that changes nothing, and so
/// does a `call` run on an idle monitor whose result is larger than 4 KiB
/// (written straight into the caller's place, it could not be dropped
/// first; a `call`'s result is never leaked by such a panic). On a
/// server thread nobody waits for the server, so such a panic is dropped
/// there (a task's own panic still resumes in its waiter), and so is one a
/// thread still keeps when it exits (with the panics of its payload's
/// drop). A completion's waiter that holds the task's last reference once
/// it has the result drops the precondition itself: a panic of that drop
/// resumes from its wait, or, after a result larger than 4 KiB, at the
/// thread's next operation (see [`Completion`](crate::Completion)'s
/// `# Panics`).
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
    /// while waiting, threads that found room after all) whose nodes are
    /// still there, and the live ones the last sweep kept: when to sweep
    /// (`sweep_space`).
    space_count: SweepCount,
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
    /// The monitor's identity for program order and for "this thread runs
    /// a task of it" (`unwind::running`): unique in the process, never 0
    /// (an OR/AND's), and, unlike the monitor's address, the same after
    /// the monitor is moved (a `Monitor` is a plain value: moved into a
    /// `Box`, a `Vec` that grows, a struct) while it has tasks pending.
    id: usize,
}

/// The next `Monitor::id`. Plain std (not loom's, as `server.rs`'s
/// counts): it orders nothing, it only has to hand out each number once.
static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// A new monitor's identity (see `Monitor::id`).
pub(crate) fn next_id() -> usize {
    // Once a monitor exists, every task wakeup of the family runs as a
    // submitter of its own, as this crate's own wakers do.
    sync_core::wake_chain::run_wakeups_in(wake_as_task);
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Runs a task wakeup of any crate of the family (`wake_chain`) as a
/// submitter of its own (`order::as_task`), as this crate runs its own
/// task wakers: a task an executor polls inside `wake`, in the body of a
/// task of a monitor (that released a lock the task waited for, sent it
/// a message), submitted as that body, and under strict order the body's
/// next submission to another monitor waited for the task's (rule 3).
fn wake_as_task(wake: &mut dyn FnMut()) {
    crate::order::as_task(wake);
}

// SAFETY: the monitor owns a T and tasks that carry closures and results
// across threads (they are Send by the bounds of the submitting methods).
unsafe impl<T: Send, S: AbstractState + Send> Send for Monitor<T, S> {}
// SAFETY: `exec` is accessed only by the holder of `lock` (one thread at a
// time, ordered by the lock's Acquire/Release), so sharing the monitor
// shares T between threads one at a time, as a Mutex does: T: Send.
unsafe impl<T: Send, S: AbstractState + Send> Sync for Monitor<T, S> {}

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

impl<T: Default> Default for Monitor<T> {
    /// A monitor over `T::default()`, with the defaults ([`Builder`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let m: active_monitor::Monitor<Vec<u8>> = Default::default();
    /// assert!(m.call(|v| v.is_empty()));
    /// ```
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for Monitor<T> {
    /// A monitor over `data`, with the defaults ([`Builder`]), as
    /// [`Monitor::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::from(3);
    /// assert_eq!(m.call(|n| *n), 3);
    /// ```
    fn from(data: T) -> Self {
        Self::new(data)
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

    /// The monitor's identity for program order (see the field).
    #[inline]
    pub(crate) fn id(&self) -> usize {
        self.id
    }

    /// The combiner's batch ([`Builder::batch`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().batch(3).build(0);
    /// assert_eq!(m.batch(), 3);
    /// ```
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The task queue's capacity (the builder's, rounded up to a power of
    /// two).
    ///
    /// # Examples
    ///
    /// ```
    /// let m = active_monitor::Monitor::builder().capacity(100).build(0);
    /// assert_eq!(m.capacity(), 128);
    /// ```
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// The program order ([`Builder::order`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, Order};
    ///
    /// assert_eq!(Monitor::new(0).order(), Order::Strict);
    /// ```
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
}

impl<T, S: AbstractState> Drop for Monitor<T, S> {
    /// Runs the queued tasks (their completions get their results), then discards
    /// the tasks still waiting on preconditions (their completions resolve
    /// to [`Discarded`](crate::Discarded)). Nothing is left waiting.
    fn drop(&mut self) {
        self.run_queued();
        // As this monitor's tasks: a task body of another monitor that
        // drops this one keeps the discarded tasks (user values, see
        // `unwind::drop_later`) until it ends, but its next park drops
        // them (this monitor's body does not run here); kept as that
        // body's monitor's, a body that then waited for what one of them
        // holds (a permit in a precondition's captures) waited for ever.
        unwind::running(self.id(), || {
            self.exec.with_mut(|e| {
                // SAFETY: `&mut self`: nobody else holds the monitor.
                unsafe { (*e).waiting.discard_all() }
            });
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
