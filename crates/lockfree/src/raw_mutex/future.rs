//! [`RawLockAsync`]: the future of [`RawMutex::lock_async`].

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering::*;
use sync_core::unwind::{self, Panics};
use sync_core::waiter::Waiter;

use super::{COMPETE, HANDOFF, RawMutex, taken};
use crate::backlog::Withdrawer;
use crate::patience::Patience;

/// The future of [`RawMutex::lock_async`]: resolves once the lock is held.
///
/// # Cancel safety
///
/// Dropping it at any point loses nothing: a queued waiter is withdrawn (its
/// node is freed by the withdrawal itself, or by whoever holds the queue's
/// dequeuing role then: memory follows the waiters present, not the number
/// of futures dropped), a lock already handed to
/// it is unlocked, and a wakeup already sent to it is passed to the next
/// waiter.
///
/// # Panics
///
/// Passing the lock or a wakeup on may wake another waiting task, whose
/// waker is user code, and withdrawing drops this task's waker, also user
/// code. If either panics, the drop first finishes withdrawing or passing
/// on (the other task holds its token), then resumes the panic,
/// unless the thread is already unwinding (a future dropped during a
/// panic): then the waker's panic is dropped, since a second panic would
/// abort the process.
///
/// A poll that queues may make the wake-up an unlock left to it (see
/// [`RawMutex::lock`]'s `# Panics`), and so run another waiting task's
/// waker. If it panics, the panic goes on out of that poll with the
/// request kept: a later poll gets the lock, and dropping the future
/// withdraws it. (A blocking lock drops such a panic instead.)
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct RawLockAsync<'a> {
    pub(super) mutex: &'a RawMutex,
    /// Our queued node, while we are counted.
    pub(super) node: Option<Arc<Waiter>>,
    /// Woken with COMPETE and not yet back in the queue or holding the lock.
    /// Unlike a woken thread, a task does not carry `WAKING` (its executor
    /// may poll it late, or never): if it is dropped now, it wakes another
    /// waiter in its place ([`RawMutex::rewake`]).
    pub(super) woken: bool,
    pub(super) done: bool,
    pub(super) patience: Patience,
}

impl Future for RawLockAsync<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        assert!(!this.done, "RawLockAsync polled after it completed");
        if let Some(node) = &this.node {
            match node.poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(HANDOFF) => {
                    this.node = None;
                    this.done = true;
                    this.mutex.handed_off(this.patience.waited_too_long());
                    return Poll::Ready(());
                }
                Poll::Ready(token) => {
                    debug_assert_eq!(token, COMPETE);
                    this.node = None;
                    this.woken = true;
                }
            }
        }
        let mutex = this.mutex;
        let mut w = mutex.word.load(Relaxed);
        let mut node = None;
        loop {
            if mutex.may(w, this.woken) {
                if let Some(unused) = node.take() {
                    // A waiter made for a count that failed, and the lock
                    // looks free now. It holds a clone of the task's waker,
                    // whose drop is user code: dropped before we take the
                    // lock, so that a panic of it goes on with nothing
                    // taken (dropped after, it unwound out of this poll
                    // with the lock held and no guard to release it).
                    unwind::drop_resuming(unused);
                    w = mutex.word.load(Relaxed);
                    continue;
                }
                // AcqRel: as in `lock_slow` (Acquire takes the lock; a task
                // carries no `WAKING` to hand on, so the Release half orders
                // nothing here: `taken(w, false)`).
                match mutex
                    .word
                    .compare_exchange_weak(w, taken(w, false), AcqRel, Relaxed)
                {
                    Ok(_) => {
                        this.woken = false;
                        this.done = true;
                        return Poll::Ready(());
                    }
                    Err(actual) => w = actual,
                }
                continue;
            }
            // Registered before it is pushed, so no wake can miss it.
            let waiter = node.get_or_insert_with(|| {
                Waiter::for_task(cx.waker(), this.patience.starving() as usize)
            });
            // AcqRel: as in `lock_slow` (a task hands no `WAKING` on, so
            // the Release half orders nothing here).
            match mutex.word.compare_exchange_weak(
                w,
                mutex.counted(w, false, waiter.data() != 0),
                AcqRel,
                Relaxed,
            ) {
                Ok(_) => {
                    this.woken = false;
                    mutex.queue.push(Arc::clone(waiter));
                    this.node = node;
                    // The wake-up a dequeuer may have left to us (it may
                    // be ours: our waker then runs here, and the next poll
                    // finds the token). Another task's waker that panics
                    // there: our request is recorded, so the panic goes on
                    // now (a later poll finds our token, the drop
                    // withdraws us).
                    mutex.pushed().resume();
                    return Poll::Pending;
                }
                Err(actual) => w = actual,
            }
        }
    }
}

impl Drop for RawLockAsync<'_> {
    /// See the type's docs, "Panics".
    fn drop(&mut self) {
        let mut panics = Panics::new();
        self.withdraw(&mut panics);
        // The lock and the wakeup are passed on: now another task's waker
        // panic may go on, unless we are unwinding already.
        panics.resume();
    }
}

impl RawLockAsync<'_> {
    /// What the drop does, with the wakers' panics kept in `panics`: the
    /// waiter is withdrawn, or the lock (or the wakeup) it was handed is
    /// passed on. The future holds nothing afterwards, and its drop does
    /// nothing.
    pub(crate) fn withdraw(&mut self, panics: &mut Panics) {
        if let Some(node) = self.node.take() {
            // A panic of our waker, dropped on withdrawal, waits until
            // the withdrawal is complete.
            match node.cancel_catching(panics) {
                // Withdrawn: a dequeuer uncounts and frees the node.
                Ok(()) => self.mutex.reclaim(Withdrawer::Future, panics),
                Err(HANDOFF) => {
                    // SAFETY: the lock was handed to us, so we hold it.
                    if let Some(woken) = unsafe { self.mutex.release() } {
                        panics.absorb(woken);
                    }
                }
                Err(_) => self.mutex.rewake(panics),
            }
        } else if self.woken {
            self.woken = false;
            self.mutex.rewake(panics);
        }
    }
}
