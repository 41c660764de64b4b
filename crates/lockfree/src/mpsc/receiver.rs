//! The receiving end: its receives (blocking, timed, async, polled), its
//! iterators and its drop.

use core::cell::Cell;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::time::{Duration, Instant};

use sync_core::load;
use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering::*;
use sync_core::sync::hint;
use sync_core::unwind::Panics;
use sync_core::wait::{self, Next, WaitPolicy, Watch};
use sync_core::waiter::Waiter;

use super::queue::{IN_FLIGHT_SPINS, IN_FLIGHT_YIELDS, Pop, Shared, handshake_fence};
use super::{RecvError, TryRecvError};

/// How many times a receiving task that finds the queue empty yields to
/// its executor (waking itself) before it publishes a waiter and sleeps:
/// once lets the producers on its worker run, which is cheaper than a
/// wakeup when a message comes meanwhile.
#[cfg(not(loom))]
const TASK_YIELDS: u32 = 1;
/// Under loom the first poll publishes its waiter, so that the models
/// explore the handshake.
#[cfg(loom)]
const TASK_YIELDS: u32 = 0;

/// How long a receiver watches an empty queue before it sleeps: spins
/// (polls made at once, then spaced ones: see [`space_poll`]), then yields
/// while yields are cheap (a wakeup costs far more than a cheap yield),
/// judged by measured yields only (see [`Watch::measured_yields_only`]: a
/// yield is what lets a producer that shares the receiver's CPU run). A
/// timed receive never yields. Under loom, one spin (a spin is a yield
/// there): enough to explore "the message came meanwhile".
fn new_watch() -> Watch {
    let policy = if cfg!(loom) {
        WaitPolicy::spin_then_block(1)
    } else {
        WaitPolicy::spin_then_block(EAGER_POLLS + SPACED_POLLS).yields(128)
    };
    Watch::new(policy).measured_yields_only()
}

/// Polls of an empty queue a receiver makes at once: a message whose
/// producer is between its swap and its link shows up within a few
/// instructions.
const EAGER_POLLS: u32 = 2;
/// The spaced polls that follow, before the receiver yields.
const SPACED_POLLS: u32 = 8;
/// Spin hints before each spaced poll.
const POLL_GAP: u32 = if cfg!(loom) { 0 } else { 128 };

/// Spaces out a spinning receiver's polls after the first
/// [`EAGER_POLLS`]. A poll of the dummy's link takes the cache line that
/// the producer writes next from that producer's core. A receiver that
/// polls again at once whenever it has caught up with a streaming producer
/// keeps pace with it message by message, and every message then costs
/// both of them a line transfer; spaced polls let the producer run ahead by
/// a few lines, which the receiver then reads in one stretch. Not when
/// yields are slow (more runnable threads than CPUs): there the producer
/// may be waiting for the CPU the receiver spins on, and the receiver
/// parks after its spins instead. (A yield or a park spaces the later
/// polls.)
#[inline]
fn space_poll(watch: &Watch, spaced: bool) {
    let polls = watch.polls();
    if spaced && polls > EAGER_POLLS && polls <= EAGER_POLLS + SPACED_POLLS {
        // No gap under loom (`POLL_GAP` is 0 there).
        #[cfg_attr(loom, allow(clippy::reversed_empty_ranges))]
        for _ in 0..POLL_GAP {
            hint::spin_loop();
        }
    }
}

/// The receiving end of an [`mpsc::channel`](super::channel).
///
/// [`Send`] but not [`Sync`]: there is one receiver.
///
/// # Dropping the receiver
///
/// Dropping it makes later sends fail and drops every message queued,
/// including those queued behind a send in flight: the drop waits for each
/// send that is between its two steps (it has swapped the tail, and is one
/// store from linking its message) to finish. A send that races the drop
/// may return `Ok`; its message is dropped, never received, by the time
/// both that send and the drop have returned. Nothing queued waits for the
/// last [`Sender`](super::Sender) to go.
///
/// A message whose `Drop` panics does not stop the drain, nor does a task's
/// waker (left by [`poll_recv`](Receiver::poll_recv)) whose `Drop` panics
/// when the drop withdraws it: the first such panic goes on once the
/// channel is closed and every message is dropped (it is dropped instead
/// if the thread is already unwinding, since a second panic would abort).
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// std::thread::spawn(move || {
///     for i in 0..3 {
///         tx.send(i).unwrap();
///     }
/// });
/// assert_eq!(rx.iter().collect::<Vec<_>>(), [0, 1, 2]);
/// ```
pub struct Receiver<T> {
    pub(super) shared: Arc<Shared<T>>,
    /// A task's waiter, published by `poll_recv` and not yet withdrawn. A
    /// `Cell` so that the blocking methods (`&self`) withdraw it before they
    /// publish a waiter of their own.
    pub(super) task: Cell<Option<Arc<Waiter>>>,
    /// Polls that found the queue empty and yielded to the executor since
    /// the last message (see [`TASK_YIELDS`]).
    pub(super) task_yields: Cell<u32>,
    pub(super) _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the receiver moves messages to its own thread (T: Send); the
// consumer state goes with it.
unsafe impl<T: Send> Send for Receiver<T> {}

impl<T> Receiver<T> {
    /// Takes a message if one is queued, without waiting.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if nothing is queued,
    /// [`TryRecvError::Disconnected`] if moreover every sender is gone.
    ///
    /// # Progress
    ///
    /// Returns without waiting for anybody: a bounded number of steps. When
    /// the next message's producer is between its two steps (it has swapped
    /// the tail but not yet linked its message), the call spins a few times
    /// (a running producer links within nanoseconds) and yields four
    /// times, then returns [`TryRecvError::Empty`]: the
    /// producer, preempted perhaps, is alive mid-send, so this is not a
    /// disconnection, and the message (with every message queued behind
    /// it) arrives once it links.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::mpsc::{self, TryRecvError};
    ///
    /// let (tx, rx) = mpsc::channel();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.send(7).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.try_recv(), Ok(7)); // drained before the disconnection
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.take::<IN_FLIGHT_YIELDS>()
            .map_err(|missing| match missing {
                Missing::Empty | Missing::InFlight => TryRecvError::Empty,
                Missing::Disconnected => TryRecvError::Disconnected,
            })
    }

    /// Takes a message if one is queued, in a bounded number of steps: a
    /// message whose producer does not link it within a short snooze
    /// ([`IN_FLIGHT_SPINS`] spins, then `YIELDS` times giving the core
    /// away) is reported [`Missing::InFlight`].
    ///
    /// Only [`try_recv`](Self::try_recv) gives the core away here (its
    /// documented four yields). A poll must not: a yield, or the nap that
    /// replaces it when yields are slow, can keep the executor's thread
    /// for a scheduling round, and the poll's own answer (`Pending`, with
    /// its task woken) already lets the producer run. Nor must a timed
    /// receive: it gives way itself, never past its deadline. (A blocking
    /// [`recv`](Self::recv) may: it has no deadline to overrun.)
    fn take<const YIELDS: u32>(&self) -> Result<T, Missing> {
        let mut snoozes = 0u32;
        loop {
            // SAFETY: we are the receiver (`&self` of a `!Sync` type, and the
            // future path holds `&mut self`).
            match unsafe { self.shared.pop() } {
                Pop::Value(v) => return Ok(v),
                Pop::InFlight => {
                    if snoozes == IN_FLIGHT_SPINS + YIELDS {
                        return Err(Missing::InFlight);
                    }
                    if snoozes < IN_FLIGHT_SPINS {
                        hint::spin_loop();
                    } else {
                        wait::give_way(None);
                    }
                    snoozes += 1;
                }
                Pop::Empty => {
                    // Acquire: pairs with every sender's decrement, so the
                    // links of the last sends are visible to the pop below.
                    if self.shared.senders.load(Acquire) != 0 {
                        return Err(Missing::Empty);
                    }
                    // SAFETY: as above. No sender is left, so no send is
                    // in flight: this finds the last message or nothing.
                    return match unsafe { self.shared.pop() } {
                        Pop::Value(v) => Ok(v),
                        _ => Err(Missing::Disconnected),
                    };
                }
            }
        }
    }

    /// Waits for a message, parking the thread when the queue is empty.
    ///
    /// # Errors
    ///
    /// [`RecvError`] once every sender is gone and every message sent has
    /// been received.
    ///
    /// # Progress
    ///
    /// Blocks until a message or the disconnection arrives. It spins
    /// briefly (spacing its polls out, so that a producer it has caught up
    /// with runs ahead rather than hand it one message at a time), then
    /// yields while yields are cheap, then parks; a sender wakes it (no
    /// lost wakeup: see the module documentation).
    ///
    /// # Deadlocks
    ///
    /// It blocks the calling thread. Called from a task on a
    /// single-threaded executor whose other task would send the message,
    /// it blocks that executor for ever: in async code use
    /// [`recv_async`](Self::recv_async).
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::mpsc::channel();
    /// std::thread::spawn(move || tx.send("hi").unwrap());
    /// assert_eq!(rx.recv(), Ok("hi"));
    /// assert!(rx.recv().is_err()); // the sender is gone
    /// ```
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_deadline(None).map_err(|_| RecvError)
    }

    /// [`recv`](Self::recv) that gives up after `timeout` (std's
    /// `recv_timeout`). A timeout too large for an `Instant` waits without
    /// a deadline.
    ///
    /// # Deadlocks
    ///
    /// As [`recv`](Self::recv), until the deadline.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if nothing came within `timeout`,
    /// [`TryRecvError::Disconnected`] as [`recv`](Self::recv).
    ///
    /// # Progress
    ///
    /// Returns within `timeout` plus a timer's latency: it spins briefly,
    /// then parks with the time left as the park's timeout. It never
    /// yields to wait (a yield can give the core away for a whole
    /// scheduling round when threads outnumber cores); while a producer is
    /// between its two steps (see [`try_recv`](Self::try_recv)) it gives
    /// its core away, never past the deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::mpsc::{self, TryRecvError};
    ///
    /// let (tx, rx) = mpsc::channel::<u8>();
    /// let waited = rx.try_recv_for(Duration::from_millis(10));
    /// assert_eq!(waited, Err(TryRecvError::Empty));
    /// drop(tx);
    /// assert_eq!(rx.try_recv_for(Duration::from_millis(10)), Err(TryRecvError::Disconnected));
    /// ```
    #[doc(alias = "recv_timeout")]
    pub fn try_recv_for(&self, timeout: Duration) -> Result<T, TryRecvError> {
        // A timeout too large to add means "no deadline".
        self.recv_deadline(Instant::now().checked_add(timeout))
    }

    /// [`recv`](Self::recv) that gives up at `deadline`.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if nothing came before `deadline`,
    /// [`TryRecvError::Disconnected`] as [`recv`](Self::recv).
    ///
    /// # Progress
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use lockfree_sync::mpsc::{self, TryRecvError};
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let deadline = Instant::now() + Duration::from_millis(10);
    /// assert_eq!(rx.try_recv_until(deadline), Err(TryRecvError::Empty));
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_recv_until(deadline), Ok(1)); // queued: no wait
    /// ```
    #[doc(alias = "recv_deadline")]
    pub fn try_recv_until(&self, deadline: Instant) -> Result<T, TryRecvError> {
        self.recv_deadline(Some(deadline))
    }

    fn recv_deadline(&self, deadline: Option<Instant>) -> Result<T, TryRecvError> {
        // The family's watch: a message that comes meanwhile costs no sleep
        // and no wakeup. Made when the queue is first found empty: a
        // receive that finds a message at once (a receiver keeping up with
        // a stream) would pay for building it on every message.
        let mut watch: Option<Watch> = None;
        // A timed park that ended without a wakeup: the deadline passed (or,
        // under loom, where time is not modelled, its timer fired).
        let mut timed_out = false;
        loop {
            // A timed receive makes no yields inside: the in-flight branch
            // below gives way with the deadline. A receive without one has
            // no deadline to overrun, and keeps `try_recv`'s snooze.
            let took = if deadline.is_some() {
                self.take::<0>()
            } else {
                self.take::<IN_FLIGHT_YIELDS>()
            };
            let in_flight = match took {
                Ok(v) => return Ok(v),
                Err(Missing::Disconnected) => return Err(TryRecvError::Disconnected),
                Err(Missing::Empty) => false,
                Err(Missing::InFlight) => true,
            };
            if timed_out || crate::clock::passed(deadline) {
                return Err(TryRecvError::Empty);
            }
            if in_flight {
                // A producer preempted between its swap and its link: it
                // may have looked for a waiter before we publish one, so
                // sleeping could miss its message. Let it run.
                wait::give_way(deadline);
                continue;
            }
            // Watch the dummy's link alone until a message is linked or it
            // is time to sleep: `take` on an empty queue reads the tail,
            // whose line every send swaps. (A disconnection is found when
            // `park_prepare` fails, below, and `take` runs again.)
            let spaced = !load::yields_are_slow();
            let w = watch.get_or_insert_with(new_watch);
            let linked = loop {
                match w.pause(deadline) {
                    Next::Poll => {
                        space_poll(w, spaced);
                        if self.shared.linked() {
                            break true;
                        }
                    }
                    Next::TimedOut => return Err(TryRecvError::Empty),
                    Next::Park => break false,
                }
            };
            if linked {
                continue;
            }
            // A task's waiter left by `poll_recv` goes first: the slot holds
            // one waiter, and it is about to be ours. Before the park hook:
            // its waker's drop is user code, which may keep what the hook
            // delivers.
            self.stop_waiting();
            // We park: what this thread keeps for the family's blocking
            // waits goes first (an active monitor's task wakers, see
            // `wake_chain::deliver_before_park`), before our waiter is
            // published (a message they send is found by `park_prepare`).
            sync_core::wake_chain::before_park();
            let waiter = Waiter::for_thread(0);
            if !self.shared.park_prepare(&waiter) {
                continue;
            }
            // A timed-out wait comes back cancelled: a sender that took the
            // waiter meanwhile finds it so and does not unpark us later.
            match deadline {
                None => drop(waiter.wait(false)),
                Some(d) => timed_out = waiter.wait_until(false, d).is_none(),
            }
            self.shared.withdraw();
            watch = None;
        }
    }

    /// Waits for a message in an async task.
    ///
    /// # Errors
    ///
    /// The future resolves to [`RecvError`] as [`recv`](Self::recv) returns
    /// it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: messages stay in the queue until the future returns one,
    /// so dropping it loses nothing; the next receive takes the message.
    ///
    /// # Progress
    ///
    /// Pending until a message or the disconnection arrives; a sender wakes
    /// the task. A poll never blocks the executor's thread: when the next
    /// message's producer is between its two steps (preempted, perhaps,
    /// after swapping the tail and before linking its message), the poll
    /// spins briefly, then wakes its own task and returns `Pending`, to
    /// look again at the next poll. It never yields the thread or sleeps
    /// (with more runnable threads than CPUs either can keep the executor's
    /// thread away for a scheduling round): returning `Pending` is its
    /// yield.
    ///
    /// # Examples
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let (tx, mut rx) = lockfree_sync::mpsc::channel();
    /// tx.send(5).unwrap();
    /// assert_eq!(rx.recv_async().await, Ok(5));
    /// # });
    /// ```
    pub fn recv_async(&mut self) -> RecvAsync<'_, T> {
        RecvAsync { rx: self }
    }

    /// Polls for a message, as a `Stream` would: `Ready(Some(message))`,
    /// `Ready(None)` once every sender is gone and the queue is drained, or
    /// `Pending`. The first `Pending` after a message is a yield (the task
    /// is woken again at once, so that other tasks, producers perhaps, run
    /// first); the next registers the task's waker, which a sender or the
    /// last sender's drop wakes.
    ///
    /// # Cancel safety
    ///
    /// Messages stay queued until this returns one. A `Pending` poll leaves
    /// the task's waiter published until the next poll or
    /// [`recv`](Self::recv)-family call.
    ///
    /// # Panics
    ///
    /// Withdrawing the task's waiter drops its waker (user code). If that
    /// drop panics while a message is being returned, the message is
    /// returned and the panic is dropped (resuming it would lose the
    /// message); otherwise the panic goes on, once the waiter is withdrawn.
    /// A poll that yields to the executor wakes its own task: if that wake
    /// panics, the panic goes on out of the poll, unless the thread is
    /// already unwinding (a poll from a `Drop` during a panic): then it is
    /// dropped, since a second panic would abort the process.
    ///
    /// # Progress
    ///
    /// As [`recv_async`](Self::recv_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    /// # futures::executor::block_on(async {
    /// let (tx, mut rx) = lockfree_sync::mpsc::channel();
    /// tx.send('a').unwrap();
    /// drop(tx);
    /// assert_eq!(poll_fn(|cx| rx.poll_recv(cx)).await, Some('a'));
    /// assert_eq!(poll_fn(|cx| rx.poll_recv(cx)).await, None);
    /// # });
    /// ```
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        loop {
            // No yields: see `take`.
            match self.take::<0>() {
                Ok(v) => {
                    // The message is ours: a panic of our own waker's drop
                    // (withdrawn here) must not lose it, so it is dropped
                    // (`sync_core::unwind`, rule 4).
                    if let Some(waiter) = self.task.get_mut().take() {
                        let mut panics = Panics::new();
                        self.withdraw_catching(waiter, &mut panics);
                        drop(panics);
                    }
                    self.task_yields.set(0);
                    return Poll::Ready(Some(v));
                }
                Err(Missing::Disconnected) => {
                    self.stop_waiting();
                    return Poll::Ready(None);
                }
                Err(Missing::InFlight) => {
                    // A producer preempted between its swap and its link
                    // may not wake us: poll again soon rather than block
                    // the executor's thread.
                    wake_self(cx);
                    return Poll::Pending;
                }
                Err(Missing::Empty) => {}
            }
            // Never under loom (TASK_YIELDS is 0 there).
            #[allow(clippy::absurd_extreme_comparisons)]
            let may_yield = self.task_yields.get() < TASK_YIELDS;
            if may_yield && self.task.get_mut().is_none() {
                // Let the executor run other tasks (producers, perhaps)
                // once before we sleep: cheaper than publishing a waiter
                // and being woken, when a message comes meanwhile.
                self.task_yields.set(self.task_yields.get() + 1);
                wake_self(cx);
                return Poll::Pending;
            }
            if let Some(waiter) = self.task.get_mut() {
                // Still published: keep the waker current. Ready means a
                // sender woke us: withdraw and look again. Polled in place:
                // the poll runs user code (the new waker's clone, the old
                // one's drop), and a panic of it must leave the published
                // waiter recorded, for a drop of the future (or of the
                // receiver) to withdraw.
                if waiter.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.stop_waiting();
                continue;
            }
            let waiter = Waiter::for_task(cx.waker(), 0);
            if self.shared.park_prepare(&waiter) {
                self.task.set(Some(waiter));
                return Poll::Pending;
            }
        }
    }

    /// Withdraws the task's waiter, if published. Withdrawing drops the
    /// task's waker (user code): a panic there is caught into `panics`, for
    /// the caller to resume once its own work is done.
    fn stop_waiting_catching(&self, panics: &mut Panics) {
        if let Some(waiter) = self.task.take() {
            self.withdraw_catching(waiter, panics);
        }
    }

    /// Withdraws `waiter`, the task's waiter just taken out of `task`.
    fn withdraw_catching(&self, waiter: Arc<Waiter>, panics: &mut Panics) {
        self.shared.withdraw();
        // A sender that took it finds it cancelled (or has woken it).
        let _ = waiter.cancel_catching(panics);
    }

    /// [`stop_waiting_catching`](Self::stop_waiting_catching), resuming
    /// the waker's panic at once: for callers with nothing left to do.
    /// With no waiter published (a receive that found its message at
    /// once, the common case) there is no user code to run, and nothing
    /// to catch.
    fn stop_waiting(&self) {
        if let Some(waiter) = self.task.take() {
            let mut panics = Panics::new();
            self.withdraw_catching(waiter, &mut panics);
            panics.resume();
        }
    }

    /// A blocking iterator: [`recv`](Self::recv) until disconnection.
    ///
    /// # Progress
    ///
    /// Each `next` blocks as [`recv`](Self::recv) does.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::mpsc::channel();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<i32>(), 3);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// An iterator over the messages queued now: [`try_recv`](Self::try_recv)
    /// until it fails.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::mpsc::channel();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 2]);
    /// assert_eq!(rx.try_iter().next(), None); // the sender is still alive
    /// ```
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }
}

/// Why [`Receiver::take`] returned no message.
enum Missing {
    /// Nothing queued.
    Empty,
    /// A producer has swapped the tail but not linked its message within
    /// the snooze.
    InFlight,
    /// Nothing queued, and every sender is gone.
    Disconnected,
}

impl<T> Drop for Receiver<T> {
    /// See the type's docs, "Dropping the receiver".
    fn drop(&mut self) {
        // A panic of the task's waker, dropped as it is withdrawn, waits
        // until the channel is closed and drained.
        let mut panics = Panics::new();
        self.stop_waiting_catching(&mut panics);
        self.shared.withdraw();
        // The drain role is ours before anybody can ask for it: a send asks
        // only once it sees `closed`. Relaxed: the Release store below
        // publishes it to those.
        self.shared.signal.drains.store(1, Relaxed);
        // SeqCst: the receiver's write in the close handshake; pairs with
        // the SeqCst load of `closed` after each send's swap (see
        // `drain_closed`). Also Release for `is_closed`'s Acquire.
        self.shared.signal.closed.store(true, SeqCst);
        handshake_fence();
        // SAFETY: we are the receiver, and took the role with one request.
        unsafe { self.shared.drain_closed(1, true, &mut panics) };
        panics.resume();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

/// The future of [`Receiver::recv_async`].
///
/// # Cancel safety
///
/// Cancel safe: dropping it loses no message.
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (tx, mut rx) = lockfree_sync::mpsc::channel();
/// std::thread::spawn(move || tx.send(1).unwrap());
/// let recv: lockfree_sync::mpsc::RecvAsync<'_, i32> = rx.recv_async();
/// assert_eq!(recv.await, Ok(1));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RecvAsync<'a, T> {
    rx: &'a mut Receiver<T>,
}

impl<T> Future for RecvAsync<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().rx.poll_recv(cx).map(|v| v.ok_or(RecvError))
    }
}

impl<T> Drop for RecvAsync<'_, T> {
    fn drop(&mut self) {
        // Cancelled (or done): withdraw the waiter, so no sender wakes a
        // task that no longer waits.
        self.rx.stop_waiting();
    }
}

impl<T> fmt::Debug for RecvAsync<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvAsync").finish_non_exhaustive()
    }
}

/// The blocking iterator of [`Receiver::iter`].
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// std::thread::spawn(move || (0..3).for_each(|i| tx.send(i).unwrap()));
/// let all: Vec<i32> = rx.iter().collect(); // ends when the sender is gone
/// assert_eq!(all, [0, 1, 2]);
/// ```
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

/// The non-blocking iterator of [`Receiver::try_iter`].
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// tx.send(1).unwrap();
/// let now: Vec<i32> = rx.try_iter().collect(); // what is queued now
/// assert_eq!(now, [1]);
/// ```
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// The owning blocking iterator of a [`Receiver`].
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// tx.send('a').unwrap();
/// drop(tx);
/// for c in rx {
///     assert_eq!(c, 'a');
/// }
/// ```
#[derive(Debug)]
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

/// Wakes the polling task itself (a yield to its executor). The waker is
/// user code: its panic goes on out of the poll, unless this thread is
/// already unwinding (a poll from a `Drop` during a panic), when it is
/// dropped, since a second panic would abort (`sync_core::unwind`, rule 3).
#[cold]
fn wake_self(cx: &Context<'_>) {
    sync_core::unwind::run_resuming(|| cx.waker().wake_by_ref());
}
