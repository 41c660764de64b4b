//! The lock-free FIFO queue of [`Waiter`]s that the family's blocking
//! primitives keep their waiters in: its push, its single consumer's pop
//! and the sweeps that free withdrawn waiters.

use core::ptr;

use super::Waiter;
use crate::sync::Arc;
use crate::sync::atomic::{AtomicPtr, Ordering::*};

/// A lock-free FIFO queue of [`Waiter`]s: any number of producers, one
/// consumer at a time.
///
/// [`push`](Self::push) is wait-free (one swap and one store). The consumer
/// role is not enforced here: each primitive already has a word that says who
/// may dequeue (the lock holder, the thread that holds a "waking" or
/// "delivering" bit), so [`pop`](Self::pop) is `unsafe` and names that
/// obligation.
///
/// The algorithm is Vyukov's intrusive MPSC queue without the stub node, so
/// that an empty queue is two null pointers (`const`-constructible, movable):
///
/// * `push`: `prev = head.swap(node)`, then link `prev.next = node`, or, if
///   the queue was empty, `first = node`.
/// * `pop`: take `first` if its `next` is linked; if `first` looks last, try
///   to swing `head` from it to null. A producer that swapped `head` but has
///   not linked yet makes `pop` return `None` although the queue is not empty;
///   the caller, who knows from its own counter that a waiter is on its way,
///   retries.
///
/// A node is handed to the consumer only once no producer can still write its
/// `next`: either its `next` is already linked, or `head` still pointed at it
/// when the consumer swung `head` to null. That is what makes freeing popped
/// nodes sound.
pub struct WaiterQueue {
    /// The last node, where producers append (null: empty).
    head: AtomicPtr<Waiter>,
    /// The first node, where the consumer takes (null: empty, or the first
    /// producer has swapped `head` but not stored itself here yet).
    first: AtomicPtr<Waiter>,
}

// SAFETY: the queue owns `Arc<Waiter>`s (Send + Sync) through raw pointers;
// all shared access goes through atomics, and `pop`'s callers guarantee the
// single consumer.
unsafe impl Send for WaiterQueue {}
// SAFETY: as for `Send`.
unsafe impl Sync for WaiterQueue {}

impl WaiterQueue {
    crate::const_unless_loom! {
        /// An empty queue.
        pub fn new() -> Self {
            Self {
                head: AtomicPtr::new(ptr::null_mut()),
                first: AtomicPtr::new(ptr::null_mut()),
            }
        }
    }

    /// Appends `waiter`.
    ///
    /// # Panics
    ///
    /// If `waiter` is in a queue already (this one or another) and has not
    /// been popped from it: a node is linked through its own `next`, so it
    /// can be in one queue at a time. The queue is left untouched.
    pub fn push(&self, waiter: Arc<Waiter>) {
        // Checked in every build: relinking a queued node would make the
        // pops hand out references no push gave them (a use after free
        // from safe code). Acquire: pairs with the Release clear in `pop`,
        // so the last consumer's reads of `next` come before our store.
        assert!(
            !waiter.queued.swap(true, Acquire),
            "WaiterQueue::push: the waiter is already in a queue"
        );
        let node = Arc::into_raw(waiter).cast_mut();
        // SAFETY: `node` comes from `Arc::into_raw` and the queue now owns
        // that reference; no producer links to a node that is not in the
        // queue, so nobody else writes its `next`.
        unsafe { (*node).next.store(ptr::null_mut(), Relaxed) };
        // AcqRel: Release publishes `node.next = null` (and the node's
        // fields) to the producer that links after us; Acquire makes `prev`'s
        // fields visible before we write its `next`.
        let prev = self.head.swap(node, AcqRel);
        if prev.is_null() {
            // Release: pairs with the consumer's Acquire load of `first`.
            self.first.store(node, Release);
        } else {
            // Release: pairs with the consumer's Acquire load of `prev.next`.
            // `prev` is still alive: the consumer frees a node only once its
            // `next` is linked (not yet) or after swinging `head` from it to
            // null (which fails: we just swapped `head` away from it).
            // SAFETY: `prev` is a live queue node, as just argued.
            unsafe { (*prev).next.store(node, Release) };
        }
    }

    /// Takes the first waiter. `None` if the queue is empty, *or* if a
    /// producer is half-way through `push` (then retry).
    ///
    /// # Safety
    ///
    /// No other `pop` may run concurrently on this queue, and every pop must
    /// happen after the previous one (the primitive's protocol gives the
    /// consumer role to one thread at a time, with a Release/Acquire edge
    /// from one consumer to the next).
    #[inline]
    pub unsafe fn pop(&self) -> Option<Arc<Waiter>> {
        // Acquire: pairs with the Release store of `first` in `push`.
        let first = self.first.load(Acquire);
        if first.is_null() {
            return None;
        }
        // SAFETY: `first` is in the queue, which holds a reference to it, and
        // only the consumer (us) releases that reference.
        let next = unsafe { (*first).next.load(Acquire) };
        if !next.is_null() {
            self.first.store(next, Relaxed);
            // SAFETY: `first.next` is linked, so no producer will write to
            // `first` again; the queue's reference passes to the caller.
            return Some(unsafe { Self::hand_out(first) });
        }
        // `first` looks last: swing `head` from it to null, unless a
        // producer is appending after it (then it stays, and we return
        // `None`).
        // SAFETY: we are the consumer, and `first` is in the queue.
        if unsafe { self.unlink_last(ptr::null_mut(), first) } {
            // SAFETY: `head` was still `first`, so no producer had appended
            // after it and none ever will: the reference is ours.
            Some(unsafe { Self::hand_out(first) })
        } else {
            None
        }
    }

    /// The queue's reference to `node`, which has left it: it may be
    /// pushed again.
    ///
    /// # Safety
    ///
    /// `node` comes from `Arc::into_raw` in `push`, no producer will write
    /// its `next` any more, and the queue's reference to it is the
    /// caller's to take.
    #[inline]
    unsafe fn hand_out(node: *mut Waiter) -> Arc<Waiter> {
        // SAFETY: the queue's reference keeps `node` alive until `from_raw`.
        // Release: pairs with the Acquire swap of the next `push`.
        unsafe { (*node).queued.store(false, Release) };
        // SAFETY: as the caller guarantees.
        unsafe { Arc::from_raw(node) }
    }

    /// The first waiter, left in the queue: what the next [`pop`](Self::pop)
    /// would take (`None` as for `pop`, also while the first producer is
    /// half-way through `push`). A consumer uses it to free withdrawn
    /// waiters from the front without dequeuing a live one.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop): only the consumer may call it, and the
    /// reference must be dropped before its next `pop`.
    pub unsafe fn front(&self) -> Option<&Waiter> {
        // Acquire: pairs with the Release store of `first` in `push`.
        let first = self.first.load(Acquire);
        // SAFETY: a non-null `first` is in the queue, which holds a
        // reference to it that only the consumer (our caller) releases, by a
        // `pop` that must come after this borrow ends.
        unsafe { first.as_ref() }
    }

    /// Frees the withdrawn ([cancelled](Waiter::cancel)) waiters at the
    /// front of the queue, up to the first live one, and returns how many it
    /// freed. It also stops where a producer is half-way through a push (as
    /// [`pop`](Self::pop) returns `None` there), and after the waiter that
    /// was last when it found the first withdrawn one: waiters pushed
    /// meanwhile are left to the next sweep, so that producers that
    /// keep pushing (and withdrawing) cannot keep the consumer sweeping for
    /// as long as they go on.
    ///
    /// For a consumer that must not dequeue a live waiter (it has no lock to
    /// hand it) but should not leave withdrawn waiters piling up in front.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop): only the consumer may call it.
    pub unsafe fn sweep_front(&self) -> usize {
        let mut last = None;
        let mut freed = 0;
        loop {
            // SAFETY: our caller is the consumer; the borrow ends with this
            // statement, before the `pop`.
            let withdrawn = unsafe { self.front() }.is_some_and(Waiter::is_cancelled);
            if !withdrawn {
                return freed;
            }
            // Read at the first withdrawn waiter, before its pop: the common
            // call (a live waiter or none in front, on a primitive's waking
            // path) touches only the front, not the producers' end.
            let last = *last.get_or_insert_with(|| self.last());
            // SAFETY: as above.
            match unsafe { self.pop() } {
                Some(waiter) => {
                    debug_assert!(waiter.is_cancelled());
                    freed += 1;
                    if ptr::eq(Arc::as_ptr(&waiter), last) {
                        return freed;
                    }
                }
                None => return freed,
            }
        }
    }

    /// The last waiter in the queue now (null if it is empty), for a sweep
    /// to stop after: only compared with the waiters it pops, never read.
    /// It stays in the queue until the consumer (the caller) pops it, so no
    /// other waiter can have its address before that pop; and the pops
    /// reach it before any waiter pushed after this load.
    fn last(&self) -> *const Waiter {
        // Relaxed: the pointer is only compared. Every pop that took a node
        // out happened before this load (the consumer role's Release/Acquire
        // edge, or program order), so it never returns a node already
        // popped: `head` only ever names a node not yet handed out.
        self.head.load(Relaxed)
    }

    /// Frees every withdrawn ([cancelled](Waiter::cancel)) waiter in the
    /// queue, in place: each is unlinked from between its neighbours, and
    /// the live waiters keep their places and their order. It stops after
    /// the waiter that was last when it began, so that producers that keep
    /// pushing (and withdrawing) cannot keep the consumer sweeping for as
    /// long as they go on; and where a producer is half-way through a push,
    /// the waiter it links after stays (withdrawn or not), with what stands
    /// behind it, for the next sweep.
    ///
    /// Memory then follows the live waiters, whatever the number of waits
    /// withdrawn. The sweep costs the queue's length; a primitive calls it
    /// once the withdrawals it has counted are as many as the waiters it
    /// kept last time, so that each withdrawal pays a constant share.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop): only the consumer may call it.
    pub unsafe fn sweep(&self) -> Swept {
        // SAFETY: our caller's contract.
        unsafe { self.sweep_with(|_| {}) }
    }

    /// [`sweep`](Self::sweep), handing each withdrawn waiter to `freed`
    /// just before its node is freed: a primitive that counts a demand in
    /// the waiter's [`data`](Waiter::data) (the semaphore's permits) takes
    /// it back there.
    ///
    /// `freed` runs while the caller holds the consumer role; it must not
    /// reach this queue.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop): only the consumer may call it.
    pub unsafe fn sweep_with(&self, mut freed: impl FnMut(&Waiter)) -> Swept {
        let mut swept = Swept::default();
        let last = self.last();
        // The last waiter kept, whose `next` we rewrite to unlink the one
        // after it (null while every waiter so far was freed: then `first`
        // is rewritten, as `pop` does).
        let mut kept: *mut Waiter = ptr::null_mut();
        // Acquire: pairs with the Release store of `first` in `push`.
        let mut node = self.first.load(Acquire);
        while !last.is_null() && !node.is_null() {
            // SAFETY: `node` was reached from `first` through linked
            // `next`s; the queue holds a reference to it that only the
            // consumer (our caller) releases, and we have not.
            let waiter = unsafe { &*node };
            let was_last = ptr::eq(node, last);
            // Acquire: pairs with the Release store of `next` in `push`.
            let next = waiter.next.load(Acquire);
            let cancelled = waiter.is_cancelled();
            let unlinked = cancelled
                && if next.is_null() {
                    // SAFETY: `kept` and `node` are queue nodes, as above.
                    unsafe { self.unlink_last(kept, node) }
                } else {
                    // Linked: no producer writes `node.next` (nor, for the
                    // same reason, `kept.next`) again, and only the
                    // consumer reads them. Relaxed: the consumer role's
                    // Release/Acquire edge orders it before the next pop.
                    match kept.is_null() {
                        true => self.first.store(next, Relaxed),
                        // SAFETY: as above.
                        false => unsafe { (*kept).next.store(next, Relaxed) },
                    }
                    true
                };
            if unlinked {
                freed(waiter);
                // SAFETY: unlinked, and no producer writes its `next` any
                // more (it was linked, or `unlink_last` swung `head` away
                // from it); the queue's reference is ours to drop.
                drop(unsafe { Self::hand_out(node) });
                swept.freed += 1;
            } else {
                kept = node;
                swept.kept += usize::from(!cancelled);
            }
            if was_last || next.is_null() {
                break;
            }
            node = next;
        }
        swept
    }

    /// Unlinks `node`, which looks last (its `next` is null), from behind
    /// `kept` (null: `node` is first): `true` if it is out of the queue,
    /// `false` if a producer is appending after it (it stays).
    ///
    /// # Safety
    ///
    /// Only the consumer may call it; `node` is in the queue, and so is
    /// `kept` if not null, linked to `node`.
    #[inline]
    unsafe fn unlink_last(&self, kept: *mut Waiter, node: *mut Waiter) -> bool {
        // The link to `node` (`kept.next`, or `first`) is cleared before
        // `head` swings back from it: a producer that swaps `head`
        // afterwards writes that link, and must not be overwritten by our
        // clearing.
        let link = match kept.is_null() {
            true => &self.first,
            // SAFETY: `kept` is a queue node (our caller's contract).
            false => unsafe { &(*kept).next },
        };
        link.store(ptr::null_mut(), Relaxed);
        // AcqRel: Release orders the clearing before the next producer's
        // swap, which then finds `kept` (or null: empty) in `head`; Acquire
        // (on failure) is for symmetry with `push`'s swap.
        match self.head.compare_exchange(node, kept, AcqRel, Acquire) {
            Ok(_) => true,
            Err(_) => {
                // A producer appended after `node` and is about to link it
                // (`head` is not `node`, so no producer writes our link).
                link.store(node, Relaxed);
                false
            }
        }
    }

    /// Whether the queue looks empty (a hint: it may change at once).
    /// Inline: active-monitor's release looks at its producers waiting for
    /// space this way on every uncontended operation.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.load(Relaxed).is_null()
    }
}

/// What a [`WaiterQueue::sweep`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Withdrawn waiters freed.
    pub freed: usize,
    /// Live waiters passed, left in their places.
    pub kept: usize,
}

impl Default for WaiterQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for WaiterQueue {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no producer or consumer is running, so every
        // push has completed and pop never returns `None` early.
        while unsafe { self.pop() }.is_some() {}
    }
}

impl core::fmt::Debug for WaiterQueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaiterQueue")
            .field("empty", &self.is_empty())
            .finish()
    }
}
