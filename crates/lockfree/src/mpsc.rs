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

use core::cell::Cell;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::pin::Pin;
use core::ptr;
use core::task::{Context, Poll};
use std::alloc::Layout;
use std::time::{Duration, Instant};

use sync_core::CachePadded;
use sync_core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::{Arc, hint};
use sync_core::unwind::Panics;
use sync_core::wait;
use sync_core::waiter::Waiter;

/// Messages per block of nodes, at most (small under loom, so that models
/// cross block boundaries). A block holds fewer when its nodes would take
/// more than [`BLOCK_BYTES`] (one, for messages that large).
///
/// ```
/// assert!(lockfree_sync::mpsc::BLOCK_CAP >= 2);
/// ```
///
/// 128 nodes (3 KiB for a `u64` message): on two cores a producer that runs
/// while the receiver is descheduled queues hundreds of thousands of
/// messages, so blocks are allocated in one thread and freed in another by
/// the thousand, and the allocator's arena locks start to show (measured
/// with 32: 2 producers reached half the throughput of 1).
#[cfg(not(loom))]
pub const BLOCK_CAP: usize = 128;
/// Messages per block of nodes, at most (small under loom, so that models
/// cross block boundaries).
#[cfg(loom)]
pub const BLOCK_CAP: usize = 2;

/// The bytes of nodes a block holds at most, unless one node alone is
/// larger (a block holds at least one): what a sender keeps allocated while
/// nothing is queued. Small messages (up to about 16 bytes) still get
/// [`BLOCK_CAP`] nodes per block.
///
/// ```
/// assert_eq!(lockfree_sync::mpsc::BLOCK_BYTES, 4096);
/// ```
pub const BLOCK_BYTES: usize = 4096;

/// The bytes of released blocks a channel keeps for reuse, at most (and
/// at most four blocks). Blocks larger than this are freed once released.
///
/// ```
/// assert_eq!(lockfree_sync::mpsc::SPARE_BYTES, 16 * 1024);
/// ```
pub const SPARE_BYTES: usize = 16 * 1024;

/// The token a producer hands the receiver's waiter: "look again".
const LOOK: usize = 1;

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

/// How many spins a receive spends waiting for a producer that is between
/// its swap and its link (a running producer links within nanoseconds).
#[cfg(not(loom))]
const IN_FLIGHT_SPINS: u32 = 32;
/// Under loom a spin is a yield: one, and no other yield, so that models
/// stay small.
#[cfg(loom)]
const IN_FLIGHT_SPINS: u32 = 1;
/// How many times a receive yields, after [`IN_FLIGHT_SPINS`], to a
/// producer between its swap and its link (it may have been preempted on
/// this processor) before it reports "nothing yet": [`Receiver::try_recv`]
/// returns [`TryRecvError::Empty`], [`Receiver::poll_recv`] `Pending`.
#[cfg(not(loom))]
const IN_FLIGHT_YIELDS: u32 = 4;
/// See the other definition.
#[cfg(loom)]
const IN_FLIGHT_YIELDS: u32 = 0;

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

/// Orders the waiting handshake under loom. The handshake's four accesses
/// are `SeqCst`, which the memory model totally orders, so that on x86 a
/// producer pays only its swap and a plain load; loom models `SeqCst`
/// accesses as `AcqRel`, so under loom a `SeqCst` fence stands between each
/// side's write and read, which is what the `SeqCst` accesses guarantee.
#[inline(always)]
fn handshake_fence() {
    #[cfg(loom)]
    sync_core::sync::atomic::fence(SeqCst);
}

/// One message slot, linked into the queue.
struct Node<T> {
    /// The node after this one (null: none yet). Written once, by the
    /// producer that swapped `tail` away from this node.
    next: AtomicPtr<Node<T>>,
    /// The block this node belongs to (null: the channel's first dummy).
    block: *const Block<T>,
    /// The message, written by the producer before its swap, read once by
    /// the receiver.
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Node<T> {
    fn new() -> Self {
        Self {
            next: AtomicPtr::new(ptr::null_mut()),
            block: ptr::null(),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

/// [`Block::CAP`] nodes allocated at once, owned by one sender until it
/// has handed them all out. The nodes follow the header in the same
/// allocation (`nodes` only marks where they start).
#[repr(C)]
struct Block<T> {
    /// Nodes not yet released. Starts at [`Block::CAP`]; the receiver
    /// releases the nodes it moves past, the sender the nodes it never used;
    /// whoever brings it to zero frees the block.
    live: AtomicUsize,
    nodes: [Node<T>; 0],
}

impl<T> Block<T> {
    /// Nodes per block: as many as fit in [`BLOCK_BYTES`], within
    /// `1..=BLOCK_CAP`.
    const CAP: usize = {
        let fit = BLOCK_BYTES / size_of::<Node<T>>();
        if fit < 1 {
            1
        } else if fit > BLOCK_CAP {
            BLOCK_CAP
        } else {
            fit
        }
    };

    /// The allocation of a block: the header, then [`CAP`](Self::CAP)
    /// nodes.
    fn layout() -> Layout {
        let size = core::mem::offset_of!(Self, nodes) + Self::CAP * size_of::<Node<T>>();
        Layout::from_size_align(size, align_of::<Self>())
            .expect("a block of nodes fits in memory")
            .pad_to_align()
    }

    /// How many released blocks a channel keeps: [`SPARES`] at most, and
    /// [`SPARE_BYTES`] at most.
    fn spares() -> usize {
        (SPARE_BYTES / Self::layout().size()).min(SPARES)
    }

    /// Node `i` of `block`.
    ///
    /// # Safety
    ///
    /// `block` is alive (allocated by [`alloc`](Self::alloc), not freed) and
    /// `i < CAP`.
    #[inline]
    unsafe fn node(block: *mut Self, i: usize) -> *mut Node<T> {
        debug_assert!(i < Self::CAP);
        // SAFETY: the nodes follow the header in the block's allocation
        // (see `layout`), and `i` is in range: the caller's promise. A raw
        // place projection keeps the provenance of the whole allocation.
        unsafe { (&raw mut (*block).nodes).cast::<Node<T>>().add(i) }
    }

    /// A new block, every node pointing back at it. Built in place on the
    /// heap: a block of large messages is too large for a thread's stack.
    fn alloc() -> *mut Self {
        let layout = Self::layout();
        // SAFETY: the layout's size is not zero (the header is a word).
        let block = unsafe { std::alloc::alloc(layout) }.cast::<Self>();
        if block.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // Each field is written once, in place, through raw pointers (no
        // reference to uninitialized memory), before any read.
        // SAFETY: `block` is a fresh allocation of `layout` (a header, then
        // CAP nodes), which nobody else has.
        unsafe {
            (&raw mut (*block).live).write(AtomicUsize::new(Self::CAP));
            for i in 0..Self::CAP {
                Self::node(block, i).write(Node {
                    next: AtomicPtr::new(ptr::null_mut()),
                    block,
                    value: UnsafeCell::new(MaybeUninit::uninit()),
                });
            }
        }
        block
    }

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// The caller owns `block` (every node released, every value moved
    /// out) and never uses it again.
    unsafe fn free(block: *mut Self) {
        // The fields are dropped in place (the nodes' values are
        // `MaybeUninit`, already moved out), then the allocation freed.
        // SAFETY: ours, as the caller promises, and initialized by `alloc`
        // with `layout`.
        unsafe {
            ptr::drop_in_place(&raw mut (*block).live);
            for i in 0..Self::CAP {
                ptr::drop_in_place(Self::node(block, i));
            }
            std::alloc::dealloc(block.cast(), Self::layout());
        }
    }

    /// Releases `n` nodes of `block`; if they were its last, the block
    /// goes to `spares` (or is freed).
    ///
    /// # Safety
    ///
    /// The caller owns `n` unreleased nodes of `block` and never touches
    /// them again.
    unsafe fn release(block: *const Self, n: usize, spares: &Spares<T>) {
        // AcqRel: Release orders our use of the nodes before the block's
        // reuse or free; Acquire, for the last one, pairs with every other
        // release.
        // SAFETY: the caller's nodes keep the block alive until this RMW.
        if unsafe { (*block).live.fetch_sub(n, AcqRel) } == n {
            // SAFETY: every node is released: nobody uses the block, and
            // the values were all moved out (nodes never drop them).
            unsafe { spares.put(block.cast_mut()) };
        }
    }

    /// Makes a block whose nodes were all released as good as new.
    ///
    /// # Safety
    ///
    /// The caller owns the block (taken from the spares).
    unsafe fn reset(block: *mut Self) {
        // Relaxed: the block is ours; a sender publishes its nodes with the
        // Release of its swap on the tail, after this.
        // SAFETY: ours, as the caller promises.
        unsafe {
            (*block).live.store(Self::CAP, Relaxed);
            for i in 0..Self::CAP {
                (*Self::node(block, i)).next.store(ptr::null_mut(), Relaxed);
            }
        }
    }
}

/// How many released blocks a channel keeps for reuse, at most (see also
/// [`SPARE_BYTES`]).
#[cfg(not(loom))]
const SPARES: usize = 4;
/// How many released blocks a channel keeps for reuse (one under loom).
#[cfg(loom)]
const SPARES: usize = 1;

/// Blocks whose nodes are all released, kept for the next sender that needs
/// one. Blocks are allocated by the senders' threads and released mostly by
/// the receiver's: freeing them there makes the allocator's arenas contend
/// (measured on 2 producers: thousands of futex calls a second), reusing
/// them costs a swap. A bounded number is kept, so memory follows the
/// messages in flight, not the history.
struct Spares<T> {
    /// Null or a released block (owned by the slot).
    slots: [AtomicPtr<Block<T>>; SPARES],
}

impl<T> Spares<T> {
    fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Keeps `block`, or frees it if every slot is taken.
    ///
    /// # Safety
    ///
    /// Every node of `block` is released: the caller owns it.
    unsafe fn put(&self, block: *mut Block<T>) {
        for slot in &self.slots[..Block::<T>::spares()] {
            // Release: pairs with the Acquire swap in `take`, so the next
            // owner's reset comes after our last use.
            if slot
                .compare_exchange(ptr::null_mut(), block, Release, Relaxed)
                .is_ok()
            {
                return;
            }
        }
        // SAFETY: ours (the caller's promise), and every value moved out.
        unsafe { Block::free(block) };
    }

    /// A block for a sender: a kept one, reset, or a new one.
    fn take(&self) -> *mut Block<T> {
        for slot in &self.slots {
            // Relaxed: a hint that spares an RMW on an empty slot.
            if !slot.load(Relaxed).is_null() {
                // Acquire: pairs with the Release CAS in `put`.
                let block = slot.swap(ptr::null_mut(), Acquire);
                if !block.is_null() {
                    // SAFETY: the swap gave us the slot's block.
                    unsafe { Block::reset(block) };
                    return block;
                }
            }
        }
        Block::alloc()
    }
}

impl<T> Drop for Spares<T> {
    fn drop(&mut self) {
        for slot in &self.slots {
            // Relaxed: `&mut self`.
            let block = slot.load(Relaxed);
            if !block.is_null() {
                // SAFETY: the slot owned it; nobody else is left, and every
                // value was moved out before it was released.
                unsafe { Block::free(block) };
            }
        }
    }
}

/// What the receiver alone touches: the dummy and a batch of released
/// nodes.
struct Consumer<T> {
    /// The dummy: the node whose message was taken last (or the channel's
    /// first dummy).
    head: *mut Node<T>,
    /// Nodes of `batch_block` the receiver has moved past but not yet
    /// released: releasing them in one RMW per run of one block keeps the
    /// receive path free of RMWs.
    batch_block: *const Block<T>,
    batch: usize,
}

impl<T> Consumer<T> {
    /// Releases `node`, which the receiver has moved past.
    fn release(&mut self, node: *mut Node<T>, spares: &Spares<T>) {
        // SAFETY: `node` is unreleased, so its block is alive.
        let block = unsafe { (*node).block };
        if block.is_null() {
            return; // The channel's first dummy lives in `Shared`.
        }
        if block != self.batch_block {
            self.flush(spares);
            self.batch_block = block;
        }
        self.batch += 1;
    }

    /// Releases the batch.
    fn flush(&mut self, spares: &Spares<T>) {
        if self.batch > 0 {
            // SAFETY: the batch is nodes of `batch_block` that we moved
            // past, never released and never touch again.
            unsafe { Block::release(self.batch_block, self.batch, spares) };
            self.batch = 0;
        }
        self.batch_block = ptr::null();
    }
}

/// What `pop` found.
enum Pop<T> {
    Value(T),
    /// No message: `tail` is the dummy.
    Empty,
    /// A producer has swapped `tail` but not yet linked its node.
    InFlight,
}

/// The word the receiver and the senders signal each other through.
struct Signal {
    /// The receiver's waiter while it sleeps or is about to (null: not
    /// waiting); holds one reference (`Arc::into_raw`). The paper's
    /// `waiting_thread` and `waiting_mark` in one word.
    parked: AtomicPtr<Waiter>,
    /// The receiver is gone: sends fail.
    closed: AtomicBool,
    /// Once the receiver is gone: requests to drop what is queued, counted
    /// while one thread (the *drainer*) holds the consumer's role (non-zero:
    /// the role is held). See [`Shared::drain_closed`].
    drains: AtomicUsize,
}

struct Shared<T> {
    /// The last node, where producers append.
    tail: CachePadded<AtomicPtr<Node<T>>>,
    /// Read by every send, written when the receiver sleeps or leaves.
    signal: CachePadded<Signal>,
    /// Live senders.
    senders: CachePadded<AtomicUsize>,
    /// The receiver's state. Only the receiver touches it, then
    /// `Shared::drop`.
    consumer: UnsafeCell<Consumer<T>>,
    /// The first dummy.
    stub: Node<T>,
    /// Released blocks kept for reuse.
    spares: Spares<T>,
}

// SAFETY: the nodes' values are sent from senders to the receiver (T: Send);
// the consumer cell is touched by the single receiver (or by `drop`); the
// rest is atomics.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: as for `Send`: shared access is to atomics, and the consumer cell
// is only used through the `Receiver`, which is not `Sync`.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// Takes the next message.
    ///
    /// # Safety
    ///
    /// Only the receiver (or `drop`) calls it.
    unsafe fn pop(&self) -> Pop<T> {
        self.consumer.with_mut(|c| {
            // SAFETY: the caller is the single consumer.
            let c = unsafe { &mut *c };
            let head = c.head;
            // Acquire: pairs with the producer's Release link, so the
            // message written before it is visible.
            // SAFETY: the dummy is unreleased, so alive.
            let next = unsafe { (*head).next.load(Acquire) };
            if next.is_null() {
                // Relaxed: only tells the two cases apart; a caller that
                // sleeps on it looks again with SeqCst.
                return if self.tail.load(Relaxed) == head {
                    Pop::Empty
                } else {
                    Pop::InFlight
                };
            }
            // SAFETY: `next` is linked, its message was written before the
            // link and is read once, here; it becomes the dummy.
            let value = unsafe { (*next).value.with_mut(|v| (*v).assume_init_read()) };
            c.head = next;
            c.release(head, &self.spares);
            Pop::Value(value)
        })
    }

    /// Whether the receiver may sleep: nothing queued or on its way, and a
    /// sender left to wake it. SeqCst: the receiver's half of the
    /// handshake, after publishing its waiter.
    fn quiet(&self) -> bool {
        // SAFETY: read by the receiver, the only writer of `head`.
        let head = self.consumer.with(|c| unsafe { (*c).head });
        self.tail.load(SeqCst) == head && self.senders.load(SeqCst) != 0
    }

    /// Publishes `waiter` as the receiver's, then looks once more. `false`
    /// (and the waiter withdrawn) if a message or disconnection came first.
    ///
    /// Called by the receiver only.
    fn park_prepare(&self, waiter: &Arc<Waiter>) -> bool {
        let raw = Arc::into_raw(Arc::clone(waiter)).cast_mut();
        // SeqCst: the receiver's write in the handshake; pairs with the
        // SeqCst load in `send` (and the SeqCst fetch_sub of the last
        // sender's drop).
        let old = self.signal.parked.swap(raw, SeqCst);
        if !old.is_null() {
            // SAFETY: a waiter of an earlier wait that nobody took; the
            // slot's reference is now ours.
            drop(unsafe { Arc::from_raw(old) });
        }
        handshake_fence();
        if self.quiet() {
            return true;
        }
        self.withdraw();
        false
    }

    /// Takes the receiver's waiter back, if no sender took it.
    fn withdraw(&self) {
        // Acquire: pairs with the swap that published it.
        let old = self.signal.parked.swap(ptr::null_mut(), AcqRel);
        if !old.is_null() {
            // SAFETY: the slot held a reference, now ours.
            drop(unsafe { Arc::from_raw(old) });
        }
    }

    /// Wakes the receiver if it is waiting (called by a sender whose
    /// handshake saw the waiter, or by the last sender to leave).
    #[cold]
    fn wake_receiver(&self) {
        // Acquire: pairs with the receiver's SeqCst swap that published the
        // waiter. The swap makes us the only sender that wakes it.
        let raw = self.signal.parked.swap(ptr::null_mut(), AcqRel);
        if !raw.is_null() {
            // SAFETY: the slot's reference, now ours.
            let waiter = unsafe { Arc::from_raw(raw) };
            // Fails only if the receiver gave up waiting (a timeout or a
            // dropped future): it looks at the queue again anyway.
            waiter.notify(LOOK);
        }
    }

    /// Drops what is queued once the receiver is gone, as the drainer: the
    /// caller holds the consumer's role (`drains` went from 0 to `seen` by
    /// its own request). A pass drops every linked message; the role is
    /// given up only if no request came meanwhile (a CAS on the count seen
    /// at the pass's start), so a request made while the role is held is
    /// served by its holder.
    ///
    /// With `wait` (the receiver's drop), a pass waits for every send in
    /// flight to link its message (each is one store away from it) and
    /// ends only when the queue is empty as the handshake sees it (a
    /// `SeqCst` load of `tail`, after the `SeqCst` store of `closed`): a
    /// send whose swap comes later in that order sees `closed`, and drops
    /// what it queued itself ([`drain_late`](Self::drain_late)). Without
    /// `wait` (such a late send), a pass stops at a send in flight: it is a
    /// late one too, and requests a pass once it has linked.
    ///
    /// A message whose drop panics does not stop the drain: the first
    /// panic is kept in `panics`.
    ///
    /// # Safety
    ///
    /// The caller holds the drain role, with `drains == seen` counting the
    /// requests it serves.
    unsafe fn drain_closed(&self, mut seen: usize, wait: bool, panics: &mut Panics) {
        loop {
            let mut snoozes = 0u32;
            loop {
                // SAFETY: the drain role makes us the only consumer (the
                // receiver is gone or is the caller); each holder acquired
                // the role from the previous one's Release CAS on `drains`.
                match unsafe { self.pop() } {
                    Pop::Value(v) => panics.drop(v),
                    Pop::InFlight if wait => {
                        // A send between its swap and its link: one store
                        // away. Spin, then let it run.
                        if snoozes < IN_FLIGHT_SPINS {
                            snoozes += 1;
                            hint::spin_loop();
                        } else {
                            wait::give_way(None);
                        }
                    }
                    Pop::InFlight => break,
                    Pop::Empty => {
                        // SeqCst: the receiver's read in the close handshake
                        // (after its SeqCst store of `closed`); pairs with
                        // the SeqCst load of `closed` after a send's swap.
                        // SAFETY: the consumer's state is ours (above).
                        let head = self.consumer.with(|c| unsafe { (*c).head });
                        if !wait || self.tail.load(SeqCst) == head {
                            break;
                        }
                    }
                }
            }
            let spares = &self.spares;
            // SAFETY: as above; the blocks we moved past go back now.
            self.consumer
                .with_mut(|c| unsafe { Consumer::flush(&mut *c, spares) });
            // AcqRel: Release hands the consumer's state to the next
            // drainer; Acquire (on failure) pairs with the request that
            // moved the count, so its link is visible to our next pass.
            match self
                .signal
                .drains
                .compare_exchange(seen, 0, AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }

    /// Called by a send that saw `closed` after its swap: its message (and
    /// whatever is linked behind it) may have been queued after the
    /// receiver's drop drained the queue. Requests a drain pass, and runs
    /// it if no one holds the role.
    #[cold]
    #[inline(never)]
    fn drain_late(&self) {
        // AcqRel: Release publishes our link to the drainer whose CAS this
        // makes fail; Acquire, if we take the role, pairs with the previous
        // holder's Release CAS.
        if self.signal.drains.fetch_add(1, AcqRel) == 0 {
            let mut panics = Panics::new();
            // SAFETY: the count was 0: the role is ours, with one request.
            unsafe { self.drain_closed(1, false, &mut panics) };
            panics.resume();
        }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let mut panics = Panics::new();
        // SAFETY: `&mut self`: every sender and the receiver are gone, so
        // every send has completed and we are the only consumer.
        while let Pop::Value(v) = unsafe { self.pop() } {
            panics.drop(v);
        }
        // SAFETY: called once, nobody else left.
        unsafe { self.free() };
        panics.resume();
    }
}

impl<T> Shared<T> {
    /// The end of `Shared::drop`, once the messages are drained: releases
    /// the last dummy and the batch (freeing the blocks), and the waiter.
    ///
    /// # Safety
    ///
    /// Called once, by `Shared::drop`: nobody else is left.
    unsafe fn free(&self) {
        self.consumer.with_mut(|c| {
            // SAFETY: exclusive, as the caller promises.
            let c = unsafe { &mut *c };
            let head = c.head;
            // The last dummy is released too.
            c.release(head, &self.spares);
            c.flush(&self.spares);
        });
        // Relaxed: nobody else is left (the caller's promise).
        let parked = self.signal.parked.load(Relaxed);
        if !parked.is_null() {
            // SAFETY: the slot's reference, which nobody took.
            drop(unsafe { Arc::from_raw(parked) });
        }
    }
}

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

/// A send on a channel whose receiver is gone: the value comes back.
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel();
/// drop(rx);
/// let lockfree_sync::mpsc::SendError(back) = tx.send(String::from("kept")).unwrap_err();
/// assert_eq!(back, "kept");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receiver is gone")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Every sender is gone and every message has been received.
///
/// # Examples
///
/// ```
/// let (tx, rx) = lockfree_sync::mpsc::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(lockfree_sync::mpsc::RecvError));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders are gone")
    }
}

impl std::error::Error for RecvError {}

/// Why [`Receiver::try_recv`] returned no message.
///
/// # Examples
///
/// ```
/// use lockfree_sync::mpsc::{self, TryRecvError};
/// let (_tx, rx) = mpsc::channel::<u8>();
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing is queued now.
    Empty,
    /// Nothing is queued and every sender is gone.
    Disconnected,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("receiving on an empty channel"),
            Self::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are gone")
            }
        }
    }
}

impl std::error::Error for TryRecvError {}

/// Why [`Receiver::try_recv_for`] returned no message.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use lockfree_sync::mpsc::{self, RecvTimeoutError};
/// let (_tx, rx) = mpsc::channel::<u8>();
/// assert_eq!(rx.try_recv_for(Duration::ZERO), Err(RecvTimeoutError::Timeout));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvTimeoutError {
    /// Nothing came before the deadline.
    Timeout,
    /// Nothing is queued and every sender is gone.
    Disconnected,
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out waiting on a channel"),
            Self::Disconnected => {
                f.write_str("receiving on an empty channel whose senders are gone")
            }
        }
    }
}

impl std::error::Error for RecvTimeoutError {}
