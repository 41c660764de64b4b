//! The futures of the async send and receive.

use core::fmt;
use core::future::Future;
use core::marker::PhantomPinned;
use core::pin::Pin;
use core::task::{Context, Poll};

use sync_core::sync::Arc;
use sync_core::unwind::{self, Panics};
use sync_core::waiter::Waiter;

use super::channel::Published;
use super::slot::{Outcome, Slot};
use super::{Receiver, RecvError, SendError, Sender};

/// Where a future is in its rendezvous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Not yet offered.
    Idle,
    /// Our slot is in the channel word (or taken by the partner).
    Published,
    /// The rendezvous is over (delivered, or refused by a closed channel)
    /// but the output not returned yet: the poll that completed it woke the
    /// partner's task, and that waker (user code) panicked. A poll after
    /// that panic returns this outcome instead of offering again.
    Over(Outcome),
    /// Over: the output was returned.
    Finished,
}

/// The future of [`Sender::send_async`].
///
/// # Cancel safety
///
/// See [`Sender::send_async`] and [`SendAsync::cancel`].
///
/// # Panics
///
/// A poll that delivers the value to a waiting task wakes that task, and
/// its waker is user code: if it panics, the panic goes on out of the poll,
/// with the value delivered, unless the thread is already unwinding (a poll
/// from a `Drop` during a panic): then the panic is dropped, since a second
/// one would abort the process. A poll after that panic returns `Ok(())`,
/// as the one that panicked would have; it does not send again.
///
/// Dropping the future drops the task's waker and an undelivered value,
/// each whatever the other's drop does: the first panic goes on (the
/// waker's, if both panic), unless the thread is already unwinding.
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// let t = std::thread::spawn(move || rx.recv());
/// let send: lockfree_sync::csp::SendAsync<'_, u8> = tx.send_async(9);
/// send.await.unwrap();
/// assert_eq!(t.join().unwrap(), Ok(9));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct SendAsync<'a, T> {
    pub(super) tx: &'a mut Sender<T>,
    /// Our half of the rendezvous; its address is published, so the future
    /// is `!Unpin`.
    pub(super) slot: Slot<T>,
    pub(super) phase: Phase,
    pub(super) parked: Option<Arc<Waiter>>,
    pub(super) _pin: PhantomPinned,
}

impl<T> Future for SendAsync<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: we never move out of the pinned future; the slot's address
        // stays valid until `drop` has retracted or awaited it.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = match this.phase {
            Phase::Idle => match this.tx.offer(&this.slot) {
                Some((outcome, wakeup)) => {
                    // Recorded before the receiver's waker runs: if it
                    // panics, the next poll returns this outcome (the value
                    // was delivered exactly once) instead of offering an
                    // empty slot.
                    this.phase = Phase::Over(outcome);
                    // Resumed unless this thread is already unwinding (a
                    // poll in a `Drop` during a panic): then dropped.
                    unwind::drop_resuming_some(wakeup);
                    outcome
                }
                None => {
                    this.phase = Phase::Published;
                    this.tx.published = Published(&raw const this.slot);
                    core::task::ready!(this.slot.poll_wait(&mut this.parked, cx))
                }
            },
            Phase::Published => core::task::ready!(this.slot.poll_wait(&mut this.parked, cx)),
            Phase::Over(outcome) => outcome,
            Phase::Finished => panic!("SendAsync polled after it completed"),
        };
        this.phase = Phase::Finished;
        this.tx.published = Published::NONE;
        this.parked = None;
        Poll::Ready(this.tx.finish(&this.slot, outcome))
    }
}

impl<T> SendAsync<'_, T> {
    /// Gives up the send and says what became of the value: `Some(value)`
    /// if the receiver never took it (the offer is withdrawn, or the
    /// receiver is gone), `None` if it was delivered (perhaps just now, as
    /// we gave up). Dropping the future instead drops an undelivered value.
    ///
    /// # Cancel safety
    ///
    /// This is the cancellation that loses nothing: the value is either
    /// delivered exactly once or handed back.
    ///
    /// # Panics
    ///
    /// Giving up drops the task's waker (user code). If its drop panics,
    /// the panic goes on once the send is settled, unless the thread is
    /// already unwinding (then it is dropped): a withdrawn value stays in
    /// the future, so a later `cancel` returns it (and a poll offers it
    /// again), a value the receiver refused by going away is returned by a
    /// later `cancel` too, and a delivered one makes it return `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::pin::pin;
    /// use std::task::{Context, Waker};
    ///
    /// let (mut tx, _rx) = lockfree_sync::csp::channel();
    /// let mut send = pin!(tx.send_async(String::from("offer")));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(send.as_mut().poll(&mut cx).is_pending()); // nobody receives
    /// assert_eq!(send.cancel(), Some(String::from("offer")));
    /// ```
    pub fn cancel(self: Pin<&mut Self>) -> Option<T> {
        // SAFETY: we do not move out of the pinned future; the slot stays
        // where it is until it is retracted or completed.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = match this.phase {
            Phase::Finished => return None,
            Phase::Idle => None,
            // Not published: nobody else touches the slot.
            Phase::Over(outcome) => Some(outcome),
            Phase::Published => {
                // Ours (an idle future leaves a leaked one's record alone).
                this.tx.published = Published::NONE;
                this.slot.retract(&this.tx.chan)
            }
        };
        // What became of the value is recorded before the task's waker
        // (user code) is dropped: if its drop panics, the panic goes on
        // (rule 2 of `sync_core::unwind`) and the future still says it. A
        // withdrawn offer is as if never made (a later `cancel` returns the
        // value, a poll offers it again), a refused one is over (a later
        // `cancel` returns the value, a poll the `SendError`), a delivered
        // one is finished. Dropping the waiter with a plain assignment,
        // after `Finished`, made a later `cancel` answer "delivered" for a
        // value that was not, and drop it with the future.
        this.phase = match outcome {
            None => Phase::Idle,
            Some(Outcome::Done) => Phase::Finished,
            Some(refused) => Phase::Over(refused),
        };
        unwind::drop_resuming(this.parked.take());
        this.phase = Phase::Finished;
        match outcome {
            Some(Outcome::Done) => None,
            // Never offered, withdrawn, or refused by a closing receiver:
            // nobody else touches the slot.
            // SAFETY: as just said.
            None | Some(Outcome::Shut) => this.slot.value.with_mut(|v| unsafe { (*v).take() }),
        }
    }
}

impl<T> Drop for SendAsync<'_, T> {
    fn drop(&mut self) {
        if self.phase == Phase::Published {
            // Withdrawn (the value drops with us), or delivered already.
            let _ = self.slot.retract(&self.tx.chan);
            self.tx.published = Published::NONE;
        }
        // Two kinds of user code: the task's waker (in the waiter) and the
        // value if it was not delivered (never offered, withdrawn, or
        // refused by a closed channel). Both are dropped here under the
        // panic policy, each whatever the other does, and the first panic
        // goes on (unless we are unwinding already). Left to the drop glue,
        // the value was dropped while the waker's panic unwound, and a
        // value whose drop panics too aborted the process.
        let mut panics = Panics::new();
        panics.drop(self.parked.take());
        // SAFETY: not published any more (retracted, or completed by the
        // partner): nobody else touches the slot.
        if let Some(value) = self.slot.value.with_mut(|v| unsafe { (*v).take() }) {
            panics.drop(value);
        }
        panics.resume();
    }
}

impl<T> fmt::Debug for SendAsync<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendAsync")
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

/// The future of [`Receiver::recv_async`].
///
/// # Cancel safety
///
/// See [`Receiver::recv_async`].
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send(4u8).unwrap());
/// let recv: lockfree_sync::csp::RecvAsync<'_, u8> = rx.recv_async();
/// assert_eq!(recv.await, Ok(4));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RecvAsync<'a, T> {
    pub(super) rx: &'a mut Receiver<T>,
    /// Our half of the rendezvous; its address is published, so the future
    /// is `!Unpin`.
    pub(super) slot: Slot<T>,
    pub(super) phase: Phase,
    pub(super) parked: Option<Arc<Waiter>>,
    pub(super) _pin: PhantomPinned,
}

impl<T> Future for RecvAsync<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: as in `SendAsync::poll`.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = match this.phase {
            Phase::Idle => {
                this.rx.reclaim();
                if let Some(v) = this.rx.stash.take() {
                    this.phase = Phase::Finished;
                    return Poll::Ready(Ok(v));
                }
                match this.rx.accept(&this.slot) {
                    Some(outcome) => outcome,
                    None => {
                        this.phase = Phase::Published;
                        this.rx.published = Published(&raw const this.slot);
                        core::task::ready!(this.slot.poll_wait(&mut this.parked, cx))
                    }
                }
            }
            Phase::Published => core::task::ready!(this.slot.poll_wait(&mut this.parked, cx)),
            // Not used by a receive: a receiver's completion leaves the
            // value in its stash while the sender is woken, and the next
            // poll (`Idle`) returns it.
            Phase::Over(outcome) => outcome,
            Phase::Finished => panic!("RecvAsync polled after it completed"),
        };
        this.phase = Phase::Finished;
        this.rx.published = Published::NONE;
        this.parked = None;
        Poll::Ready(Receiver::finish(&this.slot, outcome))
    }
}

impl<T> Drop for RecvAsync<'_, T> {
    fn drop(&mut self) {
        if self.phase == Phase::Published {
            self.rx.published = Published::NONE;
            if let Some(Outcome::Done) = self.slot.retract(&self.rx.chan) {
                // Handed over as we gave up: keep it for the next receive.
                // SAFETY: complete: nobody else touches the slot.
                self.rx.stash = self.slot.value.with_mut(|v| unsafe { (*v).take() });
            }
        }
        // As in `SendAsync`'s drop.
        unwind::drop_resuming(self.parked.take());
    }
}

impl<T> fmt::Debug for RecvAsync<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvAsync")
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}
