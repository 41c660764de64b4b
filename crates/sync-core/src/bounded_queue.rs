//! A bounded FIFO array queue for many producers and one consumer at a
//! time, the family's queue of values beside [`WaiterQueue`](crate::waiter::WaiterQueue)
//! (the unbounded queue of waiters). active-monitor keeps its task queue in
//! it: the submitting workers produce, whoever holds the monitor (the
//! combiner or the server) consumes.
//!
//! The contract: bounded (a full queue hands the value back), a single
//! consumer whose role the caller's protocol guarantees (hence the `unsafe`
//! `pop`), a consumer that touches no shared counter per item. The
//! algorithm is Vyukov's bounded array queue, which needs no lock at all:
//!
//! * every slot has a sequence number `seq`: `2p` when it is free for
//!   position `p`, `2p + 1` when it holds position `p`'s value (doubling
//!   keeps the two apart even with one slot, where Vyukov's `p + 1` and
//!   `p + cap` would coincide). Slot `i` starts at `seq = 2i`;
//! * a producer reads `tail = t` and the slot `t % cap`. If `seq == 2t` the
//!   slot is free for lap `t / cap`: the producer claims position `t` by a
//!   CAS of `tail` from `t` to `t + 1`, writes the value, then publishes it
//!   with `seq = 2t + 1` (Release). If `seq < 2t` the slot still holds the
//!   previous lap's value: the queue is full. If `seq > 2t` another producer
//!   claimed `t` first: reload `tail`;
//! * the consumer reads the slot `head % cap`: if `seq == 2 head + 1` the
//!   value is there; it takes it and frees the slot for the next lap with
//!   `seq = 2 (head + cap)` (Release), then advances `head`. Otherwise the
//!   queue is empty, or the producer of position `head` is between its CAS
//!   and its publication (in flight).
//!
//! So the consumer writes no line that producers write (only `head`, which
//! producers never read on the fast path, and the slot it frees), and
//! producers contend only on `tail`. A producer in flight blocks the
//! consumer at its position; the caller's protocol copes with that
//! (active-monitor's: every producer looks at the monitor's lock after it
//! publishes, so a task is never stranded behind an in-flight producer).
//!
//! # Examples
//!
//! ```
//! use sync_core::bounded_queue::BoundedQueue;
//!
//! let q = BoundedQueue::new(2);
//! assert_eq!(q.push(1), Ok(()));
//! assert_eq!(q.push(2), Ok(()));
//! assert_eq!(q.push(3), Err(3)); // full: the value comes back
//! // SAFETY: this thread is the only consumer.
//! assert_eq!(unsafe { q.pop() }, Some(1));
//! assert_eq!(q.len(), 1);
//! ```

use core::mem::MaybeUninit;

use crate::CachePadded;
use crate::sync::atomic::{AtomicUsize, Ordering::*};
use crate::sync::cell::UnsafeCell;

/// The `seq` of a slot free for position `pos`.
fn free(pos: usize) -> usize {
    pos.wrapping_mul(2)
}

/// The `seq` of a slot holding position `pos`'s value.
fn full(pos: usize) -> usize {
    pos.wrapping_mul(2).wrapping_add(1)
}

/// One slot of the ring.
struct Slot<V> {
    /// `2 position` while free for `position`; `2 position + 1` once the
    /// value of `position` is published.
    seq: AtomicUsize,
    value: UnsafeCell<MaybeUninit<V>>,
}

/// A bounded multi-producer, single-consumer FIFO queue.
pub struct BoundedQueue<V> {
    /// The next position a producer claims. Written by producers (CAS).
    tail: CachePadded<AtomicUsize>,
    /// The next position the consumer takes. Written by the consumer only;
    /// atomic so that anyone may look at it (`is_empty`, `front_ready`).
    head: CachePadded<AtomicUsize>,
    slots: Box<[Slot<V>]>,
}

// SAFETY: values move from producers to the consumer (V: Send); a slot's
// value is accessed only by the producer that claimed its position (before
// publication) or by the single consumer (after it), as the slot's `seq`
// says.
unsafe impl<V: Send> Send for BoundedQueue<V> {}
// SAFETY: as for `Send`: shared access goes through the atomics.
unsafe impl<V: Send> Sync for BoundedQueue<V> {}

impl<V> BoundedQueue<V> {
    /// An empty queue of at least `cap` slots: `cap` rounded up to a power
    /// of two, so that a position's slot (`pos & (cap - 1)`) stays the same
    /// when positions wrap around `usize` (with `pos % cap` and a `cap`
    /// that does not divide 2^64, two positions of one lap would share a
    /// slot there).
    ///
    /// # Panics
    ///
    /// If `cap` is 0 or above `usize::MAX / 4 + 1`.
    pub fn new(cap: usize) -> Self {
        assert!(cap > 0, "a BoundedQueue needs at least one slot");
        let cap = cap
            .checked_next_power_of_two()
            .filter(|&c| c <= usize::MAX / 4 + 1)
            .expect("a BoundedQueue of at most usize::MAX / 4 + 1 slots");
        let slots = (0..cap)
            .map(|i| Slot {
                seq: AtomicUsize::new(free(i)),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Self {
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(AtomicUsize::new(0)),
            slots,
        }
    }

    /// How many slots the queue has.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn slot(&self, pos: usize) -> &Slot<V> {
        let i = pos & (self.slots.len() - 1);
        // SAFETY: the length is a power of two, at least 1 (`new`), so
        // `i`, masked by `len - 1`, is below it (no bounds check on every
        // push, pop and look).
        unsafe { self.slots.get_unchecked(i) }
    }

    /// Appends `value`, or hands it back if the queue is full.
    pub fn push(&self, value: V) -> Result<(), V> {
        let mut t = self.tail.load(Relaxed);
        loop {
            let slot = self.slot(t);
            // Acquire: pairs with the consumer's Release store that freed
            // the slot, so our write of the value comes after its read.
            let seq = slot.seq.load(Acquire);
            let diff = seq.wrapping_sub(free(t)) as isize;
            if diff == 0 {
                match self
                    .tail
                    .compare_exchange_weak(t, t.wrapping_add(1), Relaxed, Relaxed)
                {
                    Ok(_) => {
                        slot.value.with_mut(|v| {
                            // SAFETY: the CAS made position `t` ours, and the
                            // consumer does not read it before we publish.
                            unsafe { (*v).write(value) };
                        });
                        // Release: publishes the value to the consumer's
                        // Acquire load of `seq` in `pop`/`front_ready`.
                        slot.seq.store(full(t), Release);
                        return Ok(());
                    }
                    Err(now) => t = now,
                }
            } else if diff < 0 {
                // The slot still holds the value of position `t - cap`.
                return Err(value);
            } else {
                // Another producer claimed `t`.
                t = self.tail.load(Relaxed);
            }
        }
    }

    /// Takes the first value, if it is published (`None`: empty, or its
    /// producer is in flight).
    ///
    /// # Safety
    ///
    /// Only one consumer at a time, each pop happening after the previous
    /// one (active-monitor's lock gives both).
    pub unsafe fn pop(&self) -> Option<V> {
        let h = self.head.load(Relaxed);
        let slot = self.slot(h);
        // Acquire: pairs with the producer's Release publication.
        if slot.seq.load(Acquire) != full(h) {
            return None;
        }
        let value = slot.value.with(|v| {
            // SAFETY: `seq == h + 1`: the value of position `h` is published
            // and, as the only consumer, we take it once.
            unsafe { (*v).assume_init_read() }
        });
        // Release: pairs with the producer's Acquire load of `seq` in `push`
        // (our read of the value happens before its next write).
        slot.seq
            .store(free(h.wrapping_add(self.slots.len())), Release);
        // Release: whoever reads `head` and then the slot sees the freed
        // slot (`has_space`); the next consumer is ordered by the lock.
        self.head.store(h.wrapping_add(1), Release);
        Some(value)
    }

    /// The first value, if published, left in the queue.
    ///
    /// # Safety
    ///
    /// As for [`pop`](Self::pop); the borrow ends before the next `pop`.
    pub unsafe fn peek(&self) -> Option<&V> {
        let h = self.head.load(Relaxed);
        let slot = self.slot(h);
        // Acquire: pairs with the producer's Release publication.
        if slot.seq.load(Acquire) != full(h) {
            return None;
        }
        // SAFETY: published and, as the consumer, nobody takes it but us.
        Some(slot.value.with(|v| unsafe { (*v).assume_init_ref() }))
    }

    /// Whether the first value is published (a `pop` would succeed). Anyone
    /// may ask; the answer may change at once.
    pub fn front_ready(&self) -> bool {
        let h = self.head.load(Acquire);
        self.slot(h).seq.load(Acquire) == full(h)
    }

    /// Whether no position is claimed and not taken (including producers in
    /// flight). A hint for anyone, exact for the consumer when no producer
    /// runs.
    pub fn is_empty(&self) -> bool {
        self.tail.load(Acquire) == self.head.load(Acquire)
    }

    /// Whether a `push` would find a free slot now (a hint, used after a
    /// SeqCst fence by a producer about to sleep for space).
    pub fn has_space(&self) -> bool {
        let t = self.tail.load(Acquire);
        let seq = self.slot(t).seq.load(Acquire);
        seq.wrapping_sub(free(t)) as isize >= 0
    }

    /// How many positions are claimed and not yet taken (a hint).
    pub fn len(&self) -> usize {
        let h = self.head.load(Acquire);
        let t = self.tail.load(Acquire);
        t.wrapping_sub(h).min(self.slots.len())
    }
}

impl<V> core::fmt::Debug for BoundedQueue<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BoundedQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<V> Drop for BoundedQueue<V> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no producer is in flight and we are the only
        // consumer.
        while unsafe { self.pop() }.is_some() {}
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The queue's recorded histories checked against a sequential FIFO
    //! queue: with one consumer, a history is linearizable iff every value
    //! is taken once, and a value whose push returned before another's push
    //! began is taken first (which includes each producer's own order), and
    //! no value is taken before its push began.

    use super::BoundedQueue;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

    /// (producer, index, push invoked, push returned)
    type Push = (usize, usize, usize, usize);

    fn history(
        cap: usize,
        producers: usize,
        per: usize,
    ) -> (Vec<Push>, Vec<(usize, usize, usize)>) {
        let q = Arc::new(BoundedQueue::<(usize, usize)>::new(cap));
        let clock = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (q, clock, done) = (Arc::clone(&q), Arc::clone(&clock), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut pops = Vec::new();
                loop {
                    let finished = done.load(SeqCst);
                    // SAFETY: this thread is the only consumer.
                    match unsafe { q.pop() } {
                        Some((p, i)) => pops.push((p, i, clock.fetch_add(1, SeqCst))),
                        None if finished && q.is_empty() => return pops,
                        None => std::thread::yield_now(),
                    }
                }
            })
        };
        let ps: Vec<_> = (0..producers)
            .map(|p| {
                let (q, clock) = (Arc::clone(&q), Arc::clone(&clock));
                std::thread::spawn(move || {
                    let mut pushes = Vec::new();
                    for i in 0..per {
                        let invoked = clock.fetch_add(1, SeqCst);
                        while q.push((p, i)).is_err() {
                            std::thread::yield_now();
                        }
                        pushes.push((p, i, invoked, clock.fetch_add(1, SeqCst)));
                    }
                    pushes
                })
            })
            .collect();
        let pushes = ps.into_iter().flat_map(|h| h.join().unwrap()).collect();
        done.store(true, SeqCst);
        (pushes, consumer.join().unwrap())
    }

    #[test]
    fn histories_are_linearizable_against_a_sequential_queue() {
        for cap in [1, 2, 3, 8] {
            let (pushes, pops) = history(cap, 3, 3000);
            assert_eq!(
                pops.len(),
                pushes.len(),
                "cap {cap}: a value lost or duplicated"
            );
            let mut taken_at = std::collections::HashMap::new();
            for (k, &(p, i, t)) in pops.iter().enumerate() {
                assert!(
                    taken_at.insert((p, i), (k, t)).is_none(),
                    "cap {cap}: taken twice"
                );
            }
            let mut by_return = pushes.clone();
            by_return.sort_by_key(|&(_, _, _, ret)| ret);
            // For each push, every push that returned before it began must
            // be taken before it. Sweep by invocation time.
            let mut by_invoke = pushes.clone();
            by_invoke.sort_by_key(|&(_, _, inv, _)| inv);
            let mut j = 0;
            let mut latest_taken_before = None::<usize>;
            for &(p, i, inv, _) in &by_invoke {
                while j < by_return.len() && by_return[j].3 < inv {
                    let (q, k, _, _) = by_return[j];
                    let pos = taken_at[&(q, k)].0;
                    latest_taken_before =
                        Some(latest_taken_before.map_or(pos, |m: usize| m.max(pos)));
                    j += 1;
                }
                let (pos, t) = taken_at[&(p, i)];
                if let Some(m) = latest_taken_before {
                    assert!(
                        m < pos,
                        "cap {cap}: ({p},{i}) overtook a value pushed before it began"
                    );
                }
                assert!(t > inv, "cap {cap}: ({p},{i}) taken before its push began");
            }
        }
    }

    /// A queue of `cap` slots whose positions are about to wrap around
    /// `usize` (as if `usize::MAX - 1` values had gone through it).
    fn near_wrap(cap: usize) -> BoundedQueue<u32> {
        let q = BoundedQueue::new(cap);
        let start = usize::MAX - 1;
        q.head.store(start, SeqCst);
        q.tail.store(start, SeqCst);
        for k in 0..q.capacity() {
            let p = start.wrapping_add(k);
            q.slot(p).seq.store(super::free(p), SeqCst);
        }
        q
    }

    // Review LOW 10: with 3 slots, positions usize::MAX and 0 shared a slot
    // (`pos % 3`): the queue refused a push into an empty queue there.
    #[test]
    fn fifo_across_the_usize_wraparound_whatever_the_capacity() {
        for cap in [1, 3, 4, 200] {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let q = near_wrap(cap);
                let mut out = Vec::new();
                for v in 0..(2 * q.capacity() as u32 + 4) {
                    assert!(q.push(v).is_ok(), "cap {cap}: push {v} refused");
                    assert!(q.push(v + 1000).is_ok() || q.capacity() == 1);
                    // SAFETY: this thread is the only consumer.
                    out.push(unsafe { q.pop() });
                    if q.capacity() > 1 {
                        // SAFETY: as above.
                        out.push(unsafe { q.pop() });
                    }
                }
                let _ = tx.send(out);
            });
            let out = rx
                .recv_timeout(std::time::Duration::from_secs(2))
                .unwrap_or_else(|_| panic!("cap {cap}: hung or panicked across the wrap"));
            let want: Vec<_> = (0..(out.len() as u32 / if cap == 1 { 1 } else { 2 }))
                .flat_map(|v| {
                    if cap == 1 {
                        vec![Some(v)]
                    } else {
                        vec![Some(v), Some(v + 1000)]
                    }
                })
                .collect();
            assert_eq!(out, want, "cap {cap}");
        }
    }

    #[test]
    fn a_full_queue_refuses_and_hands_the_value_back() {
        let q = BoundedQueue::new(2);
        assert!(q.push(1).is_ok() && q.push(2).is_ok());
        assert_eq!(q.push(3), Err(3));
        assert!(!q.has_space());
        // SAFETY: single-threaded: the only consumer.
        assert_eq!(unsafe { q.pop() }, Some(1));
        assert!(q.has_space());
        assert!(q.push(3).is_ok());
        let pop = || {
            // SAFETY: as above.
            unsafe { q.pop() }
        };
        assert_eq!((pop(), pop(), pop()), (Some(2), Some(3), None));
    }
}
