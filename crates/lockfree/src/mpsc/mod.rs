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
//! size: with nothing queued, each sender holds at most one block (two if
//! threads other than its owner send through it: see [`Sender`]) and the
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
use sync_core::unwind::Panics;

pub use self::block::{BLOCK_BYTES, BLOCK_CAP, SPARE_BYTES};
use self::block::{Block, Node, Range, Spares};
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

/// The sending end of an [`mpsc::channel`](channel). Clone it for more
/// producers.
///
/// A `Sender` is [`Send`] and [`Sync`], as std's, tokio's and crossbeam's
/// are. Each one hands out nodes from blocks of its own. The first thread
/// that sends through it where it now lives becomes its *owner*, and
/// takes nodes with plain loads and stores; any other thread sending
/// through the same sender (a shared `&Sender`) claims a second range of
/// the sender's nodes for the length of its send, with one uncontended
/// swap, and a send that finds that range claimed by a third thread takes
/// a block of its own for its one message instead of waiting. So sharing
/// `&Sender` works and stays wait-free, but a clone per thread or task is
/// faster (cloning is cheap and allocates nothing: the clone takes half of
/// this sender's nodes). Moving a sender (to another thread, say) makes
/// the first thread that sends through it at its new place its owner; a
/// sender that stays in place (in an `Arc`, a `Box` or a task that moves
/// between worker threads) keeps its first owner.
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
// alignment of 64 would pad every struct that holds one. Measured, it also
// made a short-lived thread's first send slower (the sender and the
// closure that carries it to the thread grew from 80 to 128 bytes and
// more), not faster.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    /// The owner's token (see [`thread_token`]; 0: none). Valid only while
    /// `home` is this sender's address: a sender moved away from `home` can
    /// no longer be reached by its owner there.
    owner: AtomicUsize,
    /// The address this sender had when its owner claimed it (0: never
    /// claimed). Written, after `owner`, by a claim under `busy`.
    home: AtomicUsize,
    /// The owner's nodes: only the owner touches them (or `&mut self`).
    own: Range<T>,
    /// Set while a thread other than the owner uses `lent` (or claims the
    /// sender): only the thread that set it touches them. Acquire on
    /// setting pairs with the Release that cleared it.
    busy: AtomicBool,
    /// The nodes of the sends by other threads than the owner.
    lent: Range<T>,
}

/// A number no other live thread has, or 0 (none): the address of a
/// thread-local of this thread, which stays valid until the thread has
/// ended (a `Cell` with a constant initializer and no `Drop`), or 0 once
/// it no longer is (where thread-locals are freed while the thread runs
/// its last destructors). A later thread may get the same number once
/// this one has ended: it then inherits what this thread owned, which is
/// sound because an ended thread no longer uses it and the freeing of the
/// old thread's thread-locals happens before the allocation of the new
/// one's (as for any memory that is freed and allocated again). Cheaper
/// than a global count, whose cache line a new thread would take from
/// another core on its first send.
#[cfg(not(loom))]
#[inline]
fn thread_token() -> usize {
    std::thread_local! {
        // Not a zero-sized type: distinct threads' cells have distinct
        // addresses.
        static TOKEN: Cell<u8> = const { Cell::new(0) };
    }
    TOKEN.try_with(|t| ptr::from_ref(t) as usize).unwrap_or(0)
}

/// Under loom, a number from a global count: loom frees a model thread's
/// thread-locals without modelling the allocator's ordering, so reused
/// addresses would read as races. Not a loom atomic: a source of distinct
/// numbers, which orders nothing.
#[cfg(loom)]
fn thread_token() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    sync_core::loom::thread_local! {
        static TOKEN: Cell<usize> = Cell::new(0);
    }
    TOKEN.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, Relaxed));
        }
        t.get()
    })
}

// SAFETY: the blocks are this sender's own (its unused nodes are owned by
// it); messages go to the receiver's thread, hence `T: Send`.
unsafe impl<T: Send> Send for Sender<T> {}
// SAFETY: `own` is only touched by the owner thread, the one whose token is
// in `owner` while `home` is the sender's address (a claim under `busy`
// sets them; see `with_range`; no two live threads share a token, and a
// thread that gets an ended thread's token comes after it: see
// `thread_token`), and `lent` only by the thread that holds
// `busy` (claimed with an Acquire swap, released with a Release store, so
// each holder sees the previous one's writes); both by `&mut self`. The
// rest is the shared channel, and a send moves a `T` to the receiver's
// thread.
unsafe impl<T: Send> Sync for Sender<T> {}

impl<T> Sender<T> {
    fn new(shared: Arc<Shared<T>>) -> Self {
        Self {
            shared,
            owner: AtomicUsize::new(0),
            home: AtomicUsize::new(0),
            own: Range::empty(),
            busy: AtomicBool::new(false),
            lent: Range::empty(),
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
    /// stores (the sender's owner thread; another thread adds one
    /// uncontended swap and a store on the sender, and a send that finds
    /// the sender in use by a third thread takes a block of its own
    /// instead of waiting), plus an allocation every block ([`BLOCK_CAP`]
    /// sends for small messages, fewer for large ones: see
    /// [`BLOCK_BYTES`]), and a second swap and a wakeup when the receiver
    /// sleeps.
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
        let spares = &shared.spares;
        let node = self.with_range(|range| {
            // SAFETY: `with_range` hands us a range no other thread uses.
            unsafe { range.next_node(spares) }
        });
        // `None`: another thread is using the lent range.
        let node = node.unwrap_or_else(|| self.lone_node());
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

    /// Runs `f` on the range of nodes this thread may use now: `own` if it
    /// is the owner, without an RMW; otherwise, holding `busy`, `own` if it
    /// becomes the owner (nobody owns the sender where it now lives) or
    /// `lent`. `None`, without running `f`, if another thread holds `busy`.
    #[inline]
    fn with_range<R>(&self, f: impl FnOnce(&Range<T>) -> R) -> Option<R> {
        let me = thread_token();
        let here = ptr::from_ref(self) as usize;
        // Acquire: pairs with the Release store of `home` in `claim`, so
        // that `owner` is read as that claim or a later write left it.
        if self.home.load(Acquire) == here && self.owner.load(Relaxed) == me {
            // Only one live thread has our token, and `owner` changes at
            // this address only by a claim that finds `home` elsewhere.
            return Some(f(&self.own));
        }
        self.claim(me, here, f)
    }

    /// [`with_range`](Self::with_range) for a thread that is not the
    /// owner (yet).
    ///
    /// Not `#[cold]`: a thread's first send through a sender comes here,
    /// and code placed apart from `send` costs a new thread's first send
    /// more than this function's few instructions.
    #[inline]
    fn claim<R>(&self, me: usize, here: usize, f: impl FnOnce(&Range<T>) -> R) -> Option<R> {
        // Acquire: pairs with the Release that ended the previous claim.
        if self.busy.swap(true, Acquire) {
            return None;
        }
        // Relaxed: `home` changes only under `busy`, which we hold.
        let range = if self.home.load(Relaxed) == here || me == 0 {
            // Owned here: the owner may be using `own` right now. (Or we
            // have no token to own it with.)
            &self.lent
        } else {
            // Nobody owns the sender where it lives now: any owner it had
            // sent through it elsewhere, before it moved here (a move
            // happens after every use at the old address). We become the
            // owner.
            self.owner.store(me, Relaxed);
            // Release: pairs with the Acquire load in `with_range`.
            self.home.store(here, Release);
            &self.own
        };
        let r = f(range);
        // Release: our use of the range happens before the next claim.
        self.busy.store(false, Release);
        Some(r)
    }

    /// A node for one send through a sender that another thread is using:
    /// node 0 of a block of its own, whose other nodes are released at
    /// once (the receiver releases node 0 as it moves past it).
    #[cold]
    fn lone_node(&self) -> *mut Node<T> {
        let block = self.shared.spares.take();
        let rest = Block::<T>::CAP - 1;
        if rest > 0 {
            // SAFETY: the block is ours (fresh or reset): we release the
            // nodes we never use, keeping node 0 unreleased.
            unsafe { Block::release(block, rest, &self.shared.spares) };
        }
        // SAFETY: node 0 is ours and unreleased, so the block is alive.
        unsafe { Block::node(block, 0) }
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
        let spares = &self.shared.spares;
        // If another thread is using this sender's lent range, the clone
        // starts without nodes (its first send takes a block).
        self.with_range(|range| {
            // SAFETY: `with_range` hands us a range no other thread uses,
            // and the clone is ours alone.
            unsafe { range.split_into(&clone.own, spares) }
        });
        clone
    }
}

impl<T> Drop for Sender<T> {
    /// The last sender wakes a waiting receiver. If the receiver waits as
    /// a task and its waker panics, the panic goes on once the sender is
    /// gone (it is dropped instead if the thread is already unwinding).
    fn drop(&mut self) {
        let spares = &self.shared.spares;
        // SAFETY: `&mut self`: nobody else uses the ranges.
        unsafe {
            self.own.release_unused(spares);
            self.lent.release_unused(spares);
        }
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
