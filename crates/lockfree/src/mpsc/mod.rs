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
//! `Waiter` in `parked` (the paper's `waiting_thread` and `waiting_mark` in
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
mod receiver;

use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;
use core::ptr;

use sync_core::CachePadded;
use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;

pub use self::block::{BLOCK_BYTES, BLOCK_CAP, SPARE_BYTES};
use self::block::{Node, Range, Spares};
use self::queue::{Consumer, Shared, Signal, handshake_fence};
pub use self::receiver::{IntoIter, Iter, Receiver, RecvAsync, TryIter};
pub use crate::error::{RecvError, SendError, TryRecvError};

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

/// The sending end of an [`mpsc::channel`](channel). Clone it for each
/// thread or task that sends.
///
/// A `Sender` is [`Send`] but not [`Sync`], unlike std's, tokio's and
/// crossbeam-channel's: share it by cloning, not by reference. Each sender
/// hands out nodes from a range of a block that is its own, with plain
/// loads and stores, which is sound only while one thread at a time uses
/// it. A `Sync` sender must find out, at the first send after each move
/// (into a new thread, say), which thread may use its range now, and that
/// takes an atomic read-modify-write on the sender beside the queue's one
/// swap. This crate had such a sender; it made the first send of a
/// sender moved to a new thread about 5% slower (the report's
/// `lf/mpsc-many-senders` workload, run in one process beside this
/// design), for what a clone gives at no cost. Cloning is cheap and allocates
/// nothing: the clone takes half of this sender's unused nodes. Where a
/// `Sync` type is required (a `static`, state shared by a server's
/// handlers), put the sender in a [`Mutex`](crate::Mutex), or keep one
/// clone per worker.
///
/// Sharing a `&Sender` between threads does not compile; rustc's error
/// names `ClonePerThread`, the field that makes `Sender` `!Sync`:
///
/// ```compile_fail
/// let (tx, rx) = lockfree_sync::mpsc::channel::<u32>();
/// std::thread::scope(|s| {
///     s.spawn(|| tx.send(1).unwrap()); // error: `ClonePerThread` ... cannot be shared
/// });
/// ```
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
// Not cache-line aligned: a handle lives wherever its user puts it, and an
// alignment of 64 would pad every struct that holds one.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    /// This sender's unused nodes: only the thread that holds the sender
    /// touches them (`&self` is never shared between threads).
    own: Range<T>,
    _not_sync: PhantomData<ClonePerThread>,
}

/// What makes [`Sender`] `!Sync`, named so that rustc's error says what to
/// do: clone the sender for each thread (see [`Sender`]).
struct ClonePerThread(Cell<()>);

// SAFETY: the range's blocks are this sender's own (its unused nodes are
// owned by it) and move with it; messages go to the receiver's thread,
// hence `T: Send`.
unsafe impl<T: Send> Send for Sender<T> {}

impl<T> Sender<T> {
    fn new(shared: Arc<Shared<T>>) -> Self {
        Self {
            shared,
            own: Range::empty(),
            _not_sync: PhantomData,
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
    /// already, and is received. If the thread is already unwinding (a send
    /// from a `Drop` during a panic), the waker's panic is dropped instead,
    /// since a second panic would abort the process. A send that races the receiver's drop and
    /// drops the messages queued meanwhile passes on the first panic of
    /// their `Drop`s, once all of them are dropped.
    ///
    /// # Progress
    ///
    /// Wait-free: one swap on the queue's tail and a few plain loads and
    /// stores, plus an allocation every block ([`BLOCK_CAP`] sends for
    /// small messages, fewer for large ones: see [`BLOCK_BYTES`]), and a
    /// second swap and a wakeup when the receiver sleeps.
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
        // SAFETY: `Sender` is `!Sync`: the thread that holds it is the only
        // one that uses its range.
        let node = unsafe { self.own.next_node(&shared.spares) };
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
            shared.wake_receiver_resuming();
        }
        Ok(())
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
        // SAFETY: `Sender` is `!Sync`, so this thread is the only one using
        // our range, and the clone is ours alone.
        unsafe { self.own.split_into(&clone.own, &self.shared.spares) };
        clone
    }
}

impl<T> Drop for Sender<T> {
    /// The last sender wakes a waiting receiver. If the receiver waits as
    /// a task and its waker panics, the panic goes on once the sender is
    /// gone (it is dropped instead if the thread is already unwinding).
    fn drop(&mut self) {
        let spares = &self.shared.spares;
        // SAFETY: `&mut self`: nobody else uses the range.
        unsafe { self.own.release_unused(spares) };
        // SeqCst: pairs with the receiver's handshake (`quiet` reads the
        // count after publishing its waiter); Release (in every sender's
        // decrement) publishes their links to the receiver that reads 0.
        if self.shared.senders.fetch_sub(1, SeqCst) == 1 {
            handshake_fence();
            // The waker is user code: caught, and resumed only when not
            // unwinding (a panic out of a drop during unwinding aborts).
            self.shared.wake_receiver_resuming();
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
