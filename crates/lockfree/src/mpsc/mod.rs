//! An unbounded multiple-producer, single-consumer message queue whose
//! receiver blocks (a thread) or waits (a task) when it is empty: the paper's
//! algorithm 3.
//!
//! # The queue
//!
//! Messages travel in Vyukov's intrusive MPSC list: a producer writes its
//! message into a node, swaps the node into `tail` (one wait-free swap), and
//! links the previous tail's `next` to it. The receiver owns `head`, a node
//! whose message it has already taken (the *dummy*), and takes the message of
//! `head.next`, which then becomes the dummy.
//!
//! Nodes come in blocks of up to [`BLOCK_CAP`] (as many as fit in
//! [`BLOCK_BYTES`], at least one), and each [`Sender`] takes its nodes
//! from a range of a block that is its own (a clone takes half of its
//! parent's range), so a send allocates at most once per block and
//! producers never contend for nodes. Blocks are sized in bytes, so that
//! the memory a channel holds follows the messages queued, whatever their
//! size: with nothing queued, each sender holds at most one block and the
//! channel keeps at most [`SPARE_BYTES`] of released blocks. A block counts the nodes
//! that are not yet released (`live`): the receiver releases a node when it
//! moves past it, a sender releases the nodes it never used when it is
//! dropped, and whoever releases the last one frees the block.
//!
//! # Waiting: the paper's `waiting_mark`
//!
//! The receiver announces that it is about to sleep by storing its
//! [`Waiter`] in `parked` (the paper's `waiting_thread` and `waiting_mark` in
//! one word), then looks at `tail` once more. A producer, after its swap on
//! `tail`, looks at `parked`, and if a waiter is there, takes it (a swap, so
//! only one producer wakes it) and wakes it once its message is linked. Both
//! sides write their word and then read the other's, all `SeqCst` (a Dekker
//! handshake): either the receiver sees the new tail and does not sleep, or
//! the producer sees the waiter and wakes it. No lost wakeup, and unlike the
//! paper's sender, which spins while the mark says WAITING until the
//! receiver has published itself, no producer ever waits: the waiter is
//! published *before* the mark, because they are one word.
//!
//! # Closing: the receiver's drop
//!
//! A second Dekker handshake, on `closed` and `tail`, makes the receiver's
//! drop drop every message. The receiver stores `closed`, then drains the
//! queue, waiting for each send in flight (swapped, not yet linked: one
//! store from done) until `tail` is its dummy. A producer, after its swap,
//! reads `closed` (on the line it reads `parked` from). Either the
//! receiver's last look at `tail` saw the swap, and the receiver waited for
//! the link and dropped the message, or the producer sees `closed` and,
//! once linked, asks for a drain pass. Passes are serialized by a count of
//! requests (`drains`): the thread that raises it from zero holds the
//! consumer's role and passes until no request came during its last pass;
//! the others leave their messages to it. So nothing stays queued behind a
//! preempted producer until the last sender goes, which, for a sender kept
//! in a `static`, would be never.

mod block;
mod queue;

use core::cell::Cell;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::ptr;
use core::task::{Context, Poll};
use std::time::{Duration, Instant};

use sync_core::CachePadded;
use sync_core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::{Arc, hint};
use sync_core::unwind::Panics;
use sync_core::wait;
use sync_core::waiter::Waiter;

pub use self::block::{BLOCK_BYTES, BLOCK_CAP, SPARE_BYTES};
use self::block::{Block, Node, Spares};
use self::queue::{
    Consumer, IN_FLIGHT_SPINS, IN_FLIGHT_YIELDS, Pop, Shared, Signal, handshake_fence,
};
pub use crate::error::{RecvError, RecvTimeoutError, SendError, TryRecvError};

/// How many times a receiving task that finds the queue empty yields to
/// its executor (waking itself) before it publishes a waiter and sleeps:
/// once lets the producers on its worker run (lf/mpsc-tasks: at par with
/// kanal, against ~1.2x without).
#[cfg(not(loom))]
const TASK_YIELDS: u32 = 1;
/// Under loom the first poll publishes its waiter, so that the models
/// explore the handshake.
#[cfg(loom)]
const TASK_YIELDS: u32 = 0;

/// How long a receiver watches an empty queue before it sleeps: spins,
/// then yields (a wakeup costs tens of microseconds on a virtual machine, a
/// yield well under one).
#[cfg(not(loom))]
const SPINS: u32 = 32;
/// See [`SPINS`].
#[cfg(not(loom))]
const YIELDS: u32 = 128;
/// Under loom, one spin (a spin is a yield there): enough to explore "the
/// message came meanwhile".
#[cfg(loom)]
const SPINS: u32 = 1;
/// See [`SPINS`].
#[cfg(loom)]
const YIELDS: u32 = 0;

/// Creates an unbounded channel: any number of [`Sender`]s (clone it), one
/// [`Receiver`].
///
/// # Examples
///
/// ```
/// use lockfree_sync::mpsc;
///
/// let (tx, rx) = mpsc::channel();
/// let producers: Vec<_> = (0..4)
///     .map(|p| {
///         let tx = tx.clone();
///         std::thread::spawn(move || {
///             for i in 0..100 {
///                 tx.send((p, i)).unwrap();
///             }
///         })
///     })
///     .collect();
/// drop(tx); // the receiver's iterator ends once every sender is gone
/// assert_eq!(rx.iter().count(), 400);
/// # for p in producers { p.join().unwrap(); }
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        tail: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
        signal: CachePadded::new(Signal {
            parked: AtomicPtr::new(ptr::null_mut()),
            closed: AtomicBool::new(false),
            drains: AtomicUsize::new(0),
        }),
        senders: CachePadded::new(AtomicUsize::new(1)),
        consumer: UnsafeCell::new(Consumer {
            head: ptr::null_mut(),
            batch_block: ptr::null(),
            batch: 0,
        }),
        stub: Node::new(),
        spares: Spares::new(),
    });
    let stub = ptr::from_ref(&shared.stub).cast_mut();
    // Relaxed: nobody else holds the channel yet; handing an end to another
    // thread publishes these.
    shared.tail.store(stub, Relaxed);
    // SAFETY: nobody else holds the channel yet.
    shared.consumer.with_mut(|c| unsafe { (*c).head = stub });
    (
        Sender::new(Arc::clone(&shared)),
        Receiver {
            shared,
            task: Cell::new(None),
            task_yields: Cell::new(0),
            _not_sync: PhantomData,
        },
    )
}

/// The sending end of an [`mpsc::channel`](channel). Clone it for more
/// producers.
///
/// A `Sender` is [`Send`] but not [`Sync`] (unlike std's, tokio's and
/// crossbeam's): each one hands out nodes from a block of its own with
/// plain loads and stores, which is what makes a send one swap on the
/// queue. Sharing one sender between threads would need an atomic
/// read-modify-write per send to claim a node, on top of that swap, where
/// a send with one producer costs about as much as one such operation:
/// the single-producer throughput would fall by about half. Give each
/// thread or task its own clone (cloning is cheap and allocates nothing:
/// the clone takes half of this sender's nodes); sharing `&Sender` fails
/// to compile, with an error that names `Sender` as not `Sync`.
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// let tx2 = tx.clone();
/// std::thread::spawn(move || tx2.send("from a thread").unwrap());
/// tx.send("from main").unwrap();
/// let mut got = vec![rx.recv().unwrap(), rx.recv().unwrap()];
/// got.sort();
/// assert_eq!(got, ["from a thread", "from main"]);
/// ```
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    /// The block this sender takes nodes from (dangling once its range is
    /// used up: the block may be freed then).
    block: Cell<*mut Block<T>>,
    /// This sender's nodes of `block` are `next..end` (a clone takes half
    /// of its parent's range); `next == end` means "allocate first".
    next: Cell<usize>,
    end: Cell<usize>,
}

// SAFETY: the block pointer is this sender's own (its unused nodes are
// owned by it); messages go to the receiver's thread, hence `T: Send`.
unsafe impl<T: Send> Send for Sender<T> {}

impl<T> Sender<T> {
    fn new(shared: Arc<Shared<T>>) -> Self {
        Self {
            shared,
            block: Cell::new(ptr::null_mut()),
            next: Cell::new(0),
            end: Cell::new(0),
        }
    }

    /// Sends `value`. Never blocks.
    ///
    /// # Errors
    ///
    /// `Err(SendError(value))` if the receiver has been dropped: the value
    /// comes back. A send that races the receiver's drop may return `Ok`
    /// instead; its message is then dropped, never received, by the time
    /// both this send and the receiver's drop have returned (by one of
    /// them).
    ///
    /// # Panics
    ///
    /// If the receiver waits as a task and its waker panics when this send
    /// wakes it, the panic propagates out of `send`; the message is queued
    /// already, and is received. A send that races the receiver's drop and
    /// drops the messages queued meanwhile passes on the first panic of
    /// their `Drop`s, once all of them are dropped.
    ///
    /// # Progress
    ///
    /// Wait-free: one swap on the queue's tail and a few plain loads and
    /// stores, plus an allocation every block ([`BLOCK_CAP`] sends for
    /// small messages, fewer for large ones: see [`BLOCK_BYTES`]), and a second
    /// swap and a wakeup when the receiver sleeps.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::mpsc::channel();
    /// tx.send(1).unwrap();
    /// drop(rx);
    /// assert_eq!(tx.send(2).unwrap_err().0, 2);
    /// ```
    #[inline]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let shared = &*self.shared;
        // Relaxed: a hint; a send that races the receiver's drop is dropped
        // with the channel (documented).
        if shared.signal.closed.load(Relaxed) {
            return Err(SendError(value));
        }
        let node = self.next_node();
        // SAFETY: the node is this sender's: unused, unshared until the swap.
        unsafe { (*node).value.with_mut(|v| (*v).write(value)) };
        // SeqCst: the producer's write in the handshake (see `park_prepare`);
        // also AcqRel: Release publishes the message to the producer that
        // links after us, Acquire makes `prev` ours to link.
        let prev = shared.tail.swap(node, SeqCst);
        handshake_fence();
        // SeqCst: the producer's read in the handshake, pairs with the swap
        // in `park_prepare`.
        let parked = shared.signal.parked.load(SeqCst);
        // SeqCst: the producer's read in the close handshake, pairs with
        // the receiver drop's SeqCst store (on the same line as `parked`).
        let closed = shared.signal.closed.load(SeqCst);
        // Release: pairs with the Acquire load of `next` in `pop`. `prev` is
        // alive: the receiver releases a node only after moving past it,
        // which needs this link.
        // SAFETY: as just argued.
        unsafe { (*prev).next.store(node, Release) };
        if closed {
            // The receiver's drop may have drained before our swap: what we
            // queued is ours to drop. (Its waiter, if we saw one, was
            // withdrawn before `closed` was set.)
            shared.drain_late();
        } else if !parked.is_null() {
            shared.wake_receiver();
        }
        Ok(())
    }

    /// A fresh node from this sender's block.
    #[inline]
    fn next_node(&self) -> *mut Node<T> {
        let mut next = self.next.get();
        if next == self.end.get() {
            self.refill();
            next = 0;
        }
        self.next.set(next + 1);
        // SAFETY: `next < end`: the block still holds this sender's unused
        // nodes, so it is alive.
        unsafe { Block::node(self.block.get(), next) }
    }

    /// Takes a fresh block, releasing the nodes left in the current one.
    #[cold]
    fn refill(&self) {
        self.release_unused();
        self.block.set(self.shared.spares.take());
        self.next.set(0);
        self.end.set(Block::<T>::CAP);
    }

    /// Releases this sender's unused nodes.
    fn release_unused(&self) {
        let unused = self.end.get() - self.next.get();
        if unused > 0 {
            // SAFETY: the nodes `next..end` are ours and never used.
            unsafe { Block::release(self.block.get(), unused, &self.shared.spares) };
            self.end.set(self.next.get());
        }
    }

    /// Whether the receiver has been dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::mpsc::channel::<u8>();
    /// assert!(!tx.is_closed());
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.signal.closed.load(Acquire)
    }
}

impl<T> Clone for Sender<T> {
    /// Another sender for the same channel. It takes half of this sender's
    /// unused nodes (this sender takes a fresh block first if it has fewer
    /// than two), so that a sender cloned for a new thread or task does not
    /// allocate there: a thread's first allocation is costly.
    fn clone(&self) -> Self {
        // Relaxed: as `Arc::clone`; a sender alive now keeps the count above
        // zero.
        self.shared.senders.fetch_add(1, Relaxed);
        let clone = Self::new(Arc::clone(&self.shared));
        if self.end.get() - self.next.get() < 2 {
            self.refill();
        }
        let (next, end) = (self.next.get(), self.end.get());
        let mid = next + (end - next) / 2;
        clone.block.set(self.block.get());
        clone.next.set(mid);
        clone.end.set(end);
        self.end.set(mid);
        clone
    }
}

impl<T> Drop for Sender<T> {
    /// The last sender wakes a waiting receiver. If the receiver waits as
    /// a task and its waker panics, the panic goes on once the sender is
    /// gone (it is dropped instead if the thread is already unwinding).
    fn drop(&mut self) {
        self.release_unused();
        // SeqCst: pairs with the receiver's handshake (`quiet` reads the
        // count after publishing its waiter); Release (in every sender's
        // decrement) publishes their links to the receiver that reads 0.
        if self.shared.senders.fetch_sub(1, SeqCst) == 1 {
            handshake_fence();
            // The waker is user code: caught, and resumed only when not
            // unwinding (a panic out of a drop during unwinding aborts).
            let mut panics = Panics::new();
            panics.catch(|| self.shared.wake_receiver());
            panics.resume();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// The receiving end of an [`mpsc::channel`](channel).
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
/// last [`Sender`] to go.
///
/// A message whose `Drop` panics does not stop the drain: the first such
/// panic goes on once every message is dropped (it is dropped instead if
/// the thread is already unwinding, since a second panic would abort).
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
    shared: Arc<Shared<T>>,
    /// A task's waiter, published by `poll_recv` and not yet withdrawn. A
    /// `Cell` so that the blocking methods (`&self`) withdraw it before they
    /// publish a waiter of their own.
    task: Cell<Option<Arc<Waiter>>>,
    /// Polls that found the queue empty and yielded to the executor since
    /// the last message (see [`TASK_YIELDS`]).
    task_yields: Cell<u32>,
    _not_sync: PhantomData<Cell<()>>,
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
        self.take().map_err(|missing| match missing {
            Missing::Empty | Missing::InFlight => TryRecvError::Empty,
            Missing::Disconnected => TryRecvError::Disconnected,
        })
    }

    /// Takes a message if one is queued, in a bounded number of steps: a
    /// message whose producer does not link it within a short snooze is
    /// reported [`Missing::InFlight`].
    fn take(&self) -> Result<T, Missing> {
        let mut snoozes = 0u32;
        loop {
            // SAFETY: we are the receiver (`&self` of a `!Sync` type, and the
            // future path holds `&mut self`).
            match unsafe { self.shared.pop() } {
                Pop::Value(v) => return Ok(v),
                Pop::InFlight => {
                    if snoozes == IN_FLIGHT_SPINS + IN_FLIGHT_YIELDS {
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
    /// briefly, then yields while yields are cheap, then parks; a sender
    /// wakes it (no lost wakeup: see the module documentation).
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
    /// [`RecvTimeoutError::Timeout`] if nothing came within `timeout`,
    /// [`RecvTimeoutError::Disconnected`] as [`recv`](Self::recv).
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
    /// use lockfree_sync::mpsc::{self, RecvTimeoutError};
    ///
    /// let (tx, rx) = mpsc::channel::<u8>();
    /// let waited = rx.try_recv_for(Duration::from_millis(10));
    /// assert_eq!(waited, Err(RecvTimeoutError::Timeout));
    /// drop(tx);
    /// assert_eq!(rx.try_recv_for(Duration::from_millis(10)), Err(RecvTimeoutError::Disconnected));
    /// ```
    #[doc(alias = "recv_timeout")]
    pub fn try_recv_for(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        // A timeout too large to add means "no deadline".
        self.recv_deadline(Instant::now().checked_add(timeout))
    }

    /// [`recv`](Self::recv) that gives up at `deadline`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing came before `deadline`,
    /// [`RecvTimeoutError::Disconnected`] as [`recv`](Self::recv).
    ///
    /// # Progress
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use lockfree_sync::mpsc::{self, RecvTimeoutError};
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let deadline = Instant::now() + Duration::from_millis(10);
    /// assert_eq!(rx.try_recv_until(deadline), Err(RecvTimeoutError::Timeout));
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_recv_until(deadline), Ok(1)); // queued: no wait
    /// ```
    #[doc(alias = "recv_deadline")]
    pub fn try_recv_until(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_deadline(Some(deadline))
    }

    fn recv_deadline(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let mut watched = 0u32;
        // A timed park that ended without a wakeup: the deadline passed (or,
        // under loom, where time is not modelled, its timer fired).
        let mut timed_out = false;
        loop {
            let in_flight = match self.take() {
                Ok(v) => return Ok(v),
                Err(Missing::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(Missing::Empty) => false,
                Err(Missing::InFlight) => true,
            };
            if timed_out || crate::clock::passed(deadline) {
                return Err(RecvTimeoutError::Timeout);
            }
            if in_flight {
                // A producer preempted between its swap and its link: it
                // may have looked for a waiter before we publish one, so
                // sleeping could miss its message. Let it run.
                wait::give_way(deadline);
                continue;
            }
            // Watch the queue a while, spinning then yielding: a message
            // that comes meanwhile costs no sleep and no wakeup (tens of
            // microseconds here), and a yield lets a producer that shares
            // our core run.
            if watched < SPINS + YIELDS {
                if watched < SPINS {
                    hint::spin_loop();
                    watched += 1;
                } else if deadline.is_some() || sync_core::load::yields_are_slow() {
                    // A yield is no wait with more runnable threads than
                    // CPUs, and a timed wait never yields: one yield can
                    // give the core away for a scheduling round, far past
                    // a short deadline, while a timed park returns when its
                    // timer fires. Sleep now instead.
                    watched = SPINS + YIELDS;
                } else {
                    sync_core::load::measured_yield();
                    watched += 1;
                }
                continue;
            }
            // A task's waiter left by `poll_recv` goes first: the slot holds
            // one waiter, and it is about to be ours.
            self.stop_waiting();
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
            watched = 0;
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
    /// spins and yields a few times, then wakes its own task and returns
    /// `Pending`, to look again at the next poll.
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
            match self.take() {
                Ok(v) => {
                    self.stop_waiting();
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
                    cx.waker().wake_by_ref();
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
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            if let Some(waiter) = self.task.take() {
                // Still published: keep the waker current. Ready means a
                // sender woke us: withdraw and look again.
                if waiter.poll(cx).is_pending() {
                    self.task.set(Some(waiter));
                    return Poll::Pending;
                }
                self.task.set(Some(waiter));
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

    /// Withdraws the task's waiter, if published.
    fn stop_waiting(&self) {
        if let Some(waiter) = self.task.take() {
            self.shared.withdraw();
            // A sender that took it finds it cancelled (or has woken it).
            let _ = waiter.cancel();
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
        self.stop_waiting();
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
        let mut panics = Panics::new();
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
