//! The blocks of nodes the senders take their message slots from, and the
//! released blocks a channel keeps for reuse.

use core::mem::MaybeUninit;
use core::ptr;
use std::alloc::Layout;

use sync_core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;

/// Messages per block of nodes, at most (small under loom, so that models
/// cross block boundaries). A block holds fewer when its nodes would take
/// more than [`BLOCK_BYTES`] (one, for messages that large).
///
/// ```
/// assert!(lockfree_sync::mpsc::BLOCK_CAP >= 2);
/// ```
///
/// 128 nodes (3 KiB for a `u64` message): a producer that runs while the
/// receiver is descheduled queues a great many messages, so blocks are
/// allocated in one thread and freed in another by the thousand; larger
/// blocks keep the allocator's arena locks out of that path.
#[cfg(not(loom))]
pub const BLOCK_CAP: usize = 128;
/// Messages per block of nodes, at most (small under loom, so that models
/// cross block boundaries).
#[cfg(loom)]
pub const BLOCK_CAP: usize = 2;

/// The bytes of nodes a block holds at most, unless one node alone is
/// larger (a block holds at least one): what a sender keeps allocated while
/// nothing is queued (twice that for a sender that threads other than
/// its owner send through: see [`Sender`](super::Sender)). Small messages (up to about 16 bytes) still get
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

/// One message slot, linked into the queue.
pub(super) struct Node<T> {
    /// The node after this one (null: none yet). Written once, by the
    /// producer that swapped `tail` away from this node.
    pub(super) next: AtomicPtr<Node<T>>,
    /// The block this node belongs to (null: the channel's first dummy).
    pub(super) block: *const Block<T>,
    /// The message, written by the producer before its swap, read once by
    /// the receiver.
    pub(super) value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Node<T> {
    pub(super) fn new() -> Self {
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
pub(super) struct Block<T> {
    /// Nodes not yet released. Starts at [`Block::CAP`]; the receiver
    /// releases the nodes it moves past, the sender the nodes it never used;
    /// whoever brings it to zero frees the block.
    pub(super) live: AtomicUsize,
    pub(super) nodes: [Node<T>; 0],
}

impl<T> Block<T> {
    /// Nodes per block: as many as fit in [`BLOCK_BYTES`], within
    /// `1..=BLOCK_CAP`.
    pub(super) const CAP: usize = {
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
    pub(super) fn layout() -> Layout {
        let size = core::mem::offset_of!(Self, nodes) + Self::CAP * size_of::<Node<T>>();
        Layout::from_size_align(size, align_of::<Self>())
            .expect("a block of nodes fits in memory")
            .pad_to_align()
    }

    /// How many released blocks a channel keeps: [`SPARES`] at most, and
    /// [`SPARE_BYTES`] at most.
    pub(super) fn spares() -> usize {
        (SPARE_BYTES / Self::layout().size()).min(SPARES)
    }

    /// Node `i` of `block`.
    ///
    /// # Safety
    ///
    /// `block` is alive (allocated by [`alloc`](Self::alloc), not freed) and
    /// `i < CAP`.
    #[inline]
    pub(super) unsafe fn node(block: *mut Self, i: usize) -> *mut Node<T> {
        debug_assert!(i < Self::CAP);
        // SAFETY: the nodes follow the header in the block's allocation
        // (see `layout`), and `i` is in range: the caller's promise. A raw
        // place projection keeps the provenance of the whole allocation.
        unsafe { (&raw mut (*block).nodes).cast::<Node<T>>().add(i) }
    }

    /// A new block, every node pointing back at it. Built in place on the
    /// heap: a block of large messages is too large for a thread's stack.
    pub(super) fn alloc() -> *mut Self {
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
    pub(super) unsafe fn free(block: *mut Self) {
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
    pub(super) unsafe fn release(block: *const Self, n: usize, spares: &Spares<T>) {
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
    pub(super) unsafe fn reset(block: *mut Self) {
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
pub(super) const SPARES: usize = 4;
/// How many released blocks a channel keeps for reuse (one under loom).
#[cfg(loom)]
pub(super) const SPARES: usize = 1;

/// Blocks whose nodes are all released, kept for the next sender that needs
/// one. Blocks are allocated by the senders' threads and released mostly by
/// the receiver's: freeing them there makes the allocator's arenas
/// contend, reusing them costs a swap. A bounded number is kept, so memory follows the
/// messages in flight, not the history.
pub(super) struct Spares<T> {
    /// Null or a released block (owned by the slot).
    pub(super) slots: [AtomicPtr<Block<T>>; SPARES],
}

impl<T> Spares<T> {
    pub(super) fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// Keeps `block`, or frees it if every slot is taken.
    ///
    /// # Safety
    ///
    /// Every node of `block` is released: the caller owns it.
    pub(super) unsafe fn put(&self, block: *mut Block<T>) {
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
    pub(super) fn take(&self) -> *mut Block<T> {
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

/// A sender's nodes: `next..end` of `block`, owned by the sender and not
/// yet used (`next == end`: none, take a block first). Only one thread at a
/// time uses a range (a [`Sender`](super::Sender) is `!Sync`), so the
/// fields sit in one cell, which loom checks for concurrent use.
pub(super) struct Range<T> {
    cell: UnsafeCell<RangeState<T>>,
}

struct RangeState<T> {
    /// Dangling once the range is used up: the block may be freed then.
    block: *mut Block<T>,
    next: usize,
    end: usize,
}

// SAFETY: a range's nodes are unused nodes of blocks it owns, which may be
// used from any thread; every use of the cell goes through an `unsafe` method
// whose caller promises that no other thread uses the range meanwhile.
unsafe impl<T: Send> Send for Range<T> {}
// SAFETY: as for `Send`: shared access alone does nothing (see above).
unsafe impl<T: Send> Sync for Range<T> {}

impl<T> Range<T> {
    pub(super) fn empty() -> Self {
        Self {
            cell: UnsafeCell::new(RangeState {
                block: ptr::null_mut(),
                next: 0,
                end: 0,
            }),
        }
    }

    /// A fresh node; takes a block first if the range is used up.
    ///
    /// # Safety
    ///
    /// No other thread uses this range meanwhile.
    #[inline]
    pub(super) unsafe fn next_node(&self, spares: &Spares<T>) -> *mut Node<T> {
        self.cell.with_mut(|r| {
            // SAFETY: the range is ours for now (the caller's promise).
            let r = unsafe { &mut *r };
            if r.next == r.end {
                // SAFETY: as above.
                unsafe { r.refill(spares) };
            }
            let i = r.next;
            r.next += 1;
            // SAFETY: `i < end`: the block still holds our unused nodes, so
            // it is alive.
            unsafe { Block::node(r.block, i) }
        })
    }

    /// Releases the unused nodes.
    ///
    /// # Safety
    ///
    /// No other thread uses this range meanwhile.
    pub(super) unsafe fn release_unused(&self, spares: &Spares<T>) {
        self.cell.with_mut(|r| {
            // SAFETY: the range is ours (the caller's promise).
            unsafe { (*r).release_unused(spares) }
        });
    }

    /// Hands half of the unused nodes to `to` (an empty range), taking a
    /// fresh block first if fewer than two are left, so that a clone made
    /// for a new thread or task does not allocate there.
    ///
    /// # Safety
    ///
    /// No other thread uses either range meanwhile.
    pub(super) unsafe fn split_into(&self, to: &Self, spares: &Spares<T>) {
        self.cell.with_mut(|r| {
            // SAFETY: the range is ours (the caller's promise).
            let r = unsafe { &mut *r };
            if r.end - r.next < 2 {
                // SAFETY: as above.
                unsafe { r.refill(spares) };
            }
            let mid = r.next + (r.end - r.next) / 2;
            to.cell.with_mut(|t| {
                // SAFETY: `to` is ours too (the caller's promise).
                let t = unsafe { &mut *t };
                debug_assert_eq!(t.next, t.end, "split into an empty range");
                t.block = r.block;
                t.next = mid;
                t.end = r.end;
            });
            r.end = mid;
        });
    }
}

impl<T> RangeState<T> {
    /// Takes a fresh block, releasing the nodes left in the current one.
    ///
    /// # Safety
    ///
    /// The range is the caller's.
    #[cold]
    unsafe fn refill(&mut self, spares: &Spares<T>) {
        // SAFETY: the caller's.
        unsafe { self.release_unused(spares) };
        self.block = spares.take();
        self.next = 0;
        self.end = Block::<T>::CAP;
    }

    /// # Safety
    ///
    /// The range is the caller's.
    unsafe fn release_unused(&mut self, spares: &Spares<T>) {
        let unused = self.end - self.next;
        if unused > 0 {
            // SAFETY: the nodes `next..end` are ours and never used.
            unsafe { Block::release(self.block, unused, spares) };
            self.end = self.next;
        }
    }
}
