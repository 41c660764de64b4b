//! The queue's shared state: the receiver's end of Vyukov's list, the
//! waiting handshake (`waiting_mark`) and the drain after the receiver's
//! drop. See the module documentation of [`mpsc`](super).

use core::ptr;

use sync_core::CachePadded;
use sync_core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::sync::{Arc, hint};
use sync_core::unwind::Panics;
use sync_core::wait;
use sync_core::waiter::Waiter;

use super::block::{Block, Node, Spares};

/// The token a producer hands the receiver's waiter: "look again".
pub(super) const LOOK: usize = 1;

/// How many spins a receive spends waiting for a producer that is between
/// its swap and its link (a running producer links within nanoseconds).
#[cfg(not(loom))]
pub(super) const IN_FLIGHT_SPINS: u32 = 32;
/// Under loom a spin is a yield: one, and no other yield, so that models
/// stay small.
#[cfg(loom)]
pub(super) const IN_FLIGHT_SPINS: u32 = 1;
/// How many times [`Receiver::try_recv`] (and a blocking `recv`) yields,
/// after [`IN_FLIGHT_SPINS`], to a producer between its swap and its link
/// (it may have been preempted on this processor) before it returns
/// [`TryRecvError::Empty`] (or looks again).
/// [`Receiver::poll_recv`] does not yield (it returns `Pending`, its task
/// woken), nor does a timed receive inside this snooze (it gives way
/// itself, never past its deadline).
#[cfg(not(loom))]
pub(super) const IN_FLIGHT_YIELDS: u32 = 4;
/// See the other definition.
#[cfg(loom)]
pub(super) const IN_FLIGHT_YIELDS: u32 = 0;

/// Orders the waiting handshake under loom. The handshake's four accesses
/// are `SeqCst`, which the memory model totally orders, so that on x86 a
/// producer pays only its swap and a plain load; loom models `SeqCst`
/// accesses as `AcqRel`, so under loom a `SeqCst` fence stands between each
/// side's write and read, which is what the `SeqCst` accesses guarantee.
#[inline(always)]
pub(super) fn handshake_fence() {
    #[cfg(loom)]
    sync_core::sync::atomic::fence(SeqCst);
}

/// What the receiver alone touches: the dummy and a batch of released
/// nodes.
pub(super) struct Consumer<T> {
    /// The dummy: the node whose message was taken last (or the channel's
    /// first dummy).
    pub(super) head: *mut Node<T>,
    /// Nodes of `batch_block` the receiver has moved past but not yet
    /// released: releasing them in one RMW per run of one block keeps the
    /// receive path free of RMWs.
    pub(super) batch_block: *const Block<T>,
    pub(super) batch: usize,
}

impl<T> Consumer<T> {
    /// Releases `node`, which the receiver has moved past.
    pub(super) fn release(&mut self, node: *mut Node<T>, spares: &Spares<T>) {
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
    pub(super) fn flush(&mut self, spares: &Spares<T>) {
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
pub(super) enum Pop<T> {
    Value(T),
    /// No message: `tail` is the dummy.
    Empty,
    /// A producer has swapped `tail` but not yet linked its node.
    InFlight,
}

/// The word the receiver and the senders signal each other through.
pub(super) struct Signal {
    /// The receiver's waiter while it sleeps or is about to (null: not
    /// waiting); holds one reference (`Arc::into_raw`). The paper's
    /// `waiting_thread` and `waiting_mark` in one word.
    pub(super) parked: AtomicPtr<Waiter>,
    /// The receiver is gone: sends fail.
    pub(super) closed: AtomicBool,
    /// Once the receiver is gone: requests to drop what is queued, counted
    /// while one thread (the *drainer*) holds the consumer's role (non-zero:
    /// the role is held). See [`Shared::drain_closed`].
    pub(super) drains: AtomicUsize,
}

pub(super) struct Shared<T> {
    /// The last node, where producers append.
    pub(super) tail: CachePadded<AtomicPtr<Node<T>>>,
    /// Read by every send, written when the receiver sleeps or leaves.
    pub(super) signal: CachePadded<Signal>,
    /// Live senders.
    pub(super) senders: CachePadded<AtomicUsize>,
    /// The receiver's state. Only the receiver touches it, then
    /// `Shared::drop`.
    pub(super) consumer: UnsafeCell<Consumer<T>>,
    /// The first dummy.
    pub(super) stub: Node<T>,
    /// Released blocks kept for reuse.
    pub(super) spares: Spares<T>,
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
    pub(super) unsafe fn pop(&self) -> Pop<T> {
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

    /// Whether a message is linked after the dummy: what a waiting receiver
    /// watches. Unlike [`pop`](Self::pop) on an empty queue, it leaves the
    /// tail alone: the tail's line is the one every send swaps, and a
    /// receiver that read it at every poll would pull it from the producers
    /// at every send, slowing them to the receiver's pace.
    ///
    /// Called by the receiver only.
    pub(super) fn linked(&self) -> bool {
        // SAFETY: read by the receiver, the only writer of `head`; the
        // dummy is unreleased, so alive.
        let head = self.consumer.with(|c| unsafe { (*c).head });
        // Relaxed: a hint; the `pop` that follows reads the link with
        // Acquire.
        // SAFETY: as just argued.
        !unsafe { (*head).next.load(Relaxed) }.is_null()
    }

    /// Whether the receiver may sleep: nothing queued or on its way, and a
    /// sender left to wake it. SeqCst: the receiver's half of the
    /// handshake, after publishing its waiter.
    pub(super) fn quiet(&self) -> bool {
        // SAFETY: read by the receiver, the only writer of `head`.
        let head = self.consumer.with(|c| unsafe { (*c).head });
        self.tail.load(SeqCst) == head && self.senders.load(SeqCst) != 0
    }

    /// Publishes `waiter` as the receiver's, then looks once more. `false`
    /// (and the waiter withdrawn) if a message or disconnection came first.
    ///
    /// Called by the receiver only.
    pub(super) fn park_prepare(&self, waiter: &Arc<Waiter>) -> bool {
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
    pub(super) fn withdraw(&self) {
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
    pub(super) fn wake_receiver(&self) {
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

    /// [`wake_receiver`](Self::wake_receiver), whose waker (user code) may
    /// panic: the panic goes on to the caller, unless this thread is
    /// already unwinding (a send or a sender's drop during a panic), when it
    /// is dropped (the family's rule 3, `sync_core::unwind`).
    ///
    /// Never inlined: it stays out of `send`'s body, whose hot path must
    /// stay small (inlined there, it slowed the report's single-producer
    /// `lf/mpsc/1` row in nearly every round of an A/B comparison).
    #[cold]
    #[inline(never)]
    pub(super) fn wake_receiver_resuming(&self) {
        sync_core::unwind::run_resuming(|| self.wake_receiver());
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
    pub(super) unsafe fn drain_closed(&self, mut seen: usize, wait: bool, panics: &mut Panics) {
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
    pub(super) fn drain_late(&self) {
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
        // The receiver's pointer to the first dummy (if it is still the
        // dummy) was made from a shared reference to `stub` when the
        // channel was made; the pops below follow it while `&mut self`,
        // made since, is live: give them one made from `&mut self`.
        let stub = ptr::from_mut(&mut self.stub);
        self.consumer.with_mut(|c| {
            // SAFETY: `&mut self`: nobody else touches the consumer.
            let c = unsafe { &mut *c };
            if ptr::eq(c.head, stub) {
                c.head = stub;
            }
        });
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
    pub(super) unsafe fn free(&self) {
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
