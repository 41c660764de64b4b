//! The two ends of a channel and their blocking (and timed) forms.

use core::fmt;
use core::marker::PhantomPinned;
use core::ptr;
use core::time::Duration;
use std::time::Instant;

use sync_core::sync::Arc;
use sync_core::sync::atomic::Ordering::*;
use sync_core::unwind::{self, Panics};
use sync_core::waiter::Wakeup;

use super::alt::{AltShared, CLAIM_SELF};
use super::slot::{
    Chan, EMPTY, Found, Outcome, RECEIVER, SENDER, Slot, move_value, shut, take_from,
};
use super::{RecvAsync, SendAsync, future::Phase};
use super::{RecvError, SendError, TryRecvError, TrySendError};

/// The sending end of a [`csp::channel`](crate::csp::channel()). Not `Clone`: the channel
/// is point to point.
///
/// Dropping it wakes a receiver that waits, with [`RecvError`]. If the
/// receiver waits as a task (or an [`Alt`](crate::csp::Alt)'s task) and its waker panics,
/// the panic goes on out of the drop once the channel is closed, unless
/// the thread is already unwinding: then it is dropped (a second panic
/// would abort the process).
///
/// # Examples
///
/// ```
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// let t = std::thread::spawn(move || rx.recv().unwrap());
/// tx.send(5).unwrap();
/// assert_eq!(t.join().unwrap(), 5);
/// ```
pub struct Sender<T> {
    pub(super) chan: Arc<Chan>,
    /// The slot of this sender's [`SendAsync`] while it is published.
    pub(super) published: Published<T>,
    /// Values of `T` go to the receiver's thread: `Send` only if `T` is.
    pub(super) _t: core::marker::PhantomData<T>,
}

impl<T> Sender<T> {
    /// Sends `value` and returns once the receiver has taken it.
    ///
    /// # Errors
    ///
    /// `Err(SendError(value))` if the receiver is gone (or goes while we
    /// wait): the value comes back.
    ///
    /// # Progress
    ///
    /// Blocks until the receiver arrives. Apart from that wait, one swap and
    /// a bounded number of steps (wait-free). If the receiver is not there,
    /// the thread spins briefly, yields while yields are cheap (not once
    /// more threads are runnable than cores), then parks.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread. Called from a task on a
    /// single-threaded executor whose other task is the partner (the receiver),
    /// it blocks that executor for ever: in async code use
    /// [`send_async`](Self::send_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// let (mut tx, rx) = lockfree_sync::csp::channel();
    /// drop(rx);
    /// assert_eq!(tx.send(1).unwrap_err().0, 1);
    /// ```
    pub fn send(&mut self, value: T) -> Result<(), SendError<T>> {
        self.send_timed(value, None).map_err(|e| match e {
            TrySendError::Disconnected(v) => SendError(v),
            TrySendError::Full(_) => unreachable!("a send without a deadline timed out"),
        })
    }

    /// Sends `value` if the receiver is waiting for it now.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] with the value if no receiver waits (nothing
    /// is left published), [`TrySendError::Disconnected`] with the value if
    /// the receiver is gone.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::csp::{self, TrySendError};
    ///
    /// let (mut tx, _rx) = csp::channel();
    /// assert_eq!(tx.try_send(1), Err(TrySendError::Full(1))); // nobody receives
    /// ```
    pub fn try_send(&mut self, value: T) -> Result<(), TrySendError<T>> {
        self.send_timed(value, Some(Instant::now()))
    }

    /// Sends `value` if the receiver takes it within `timeout`.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] with the value, as
    /// [`try_send`](Self::try_send) returns it, if no receiver took it in
    /// time (the offer is withdrawn: no receiver gets it later),
    /// [`TrySendError::Disconnected`] with the value if the receiver is
    /// gone.
    ///
    /// # Progress
    ///
    /// As [`send`](Self::send), for `timeout` at most, except that it
    /// never yields: after a brief spin the thread parks with the deadline
    /// as its timeout, and returns within the deadline
    /// plus a timer's and a scheduler's latency, whatever the load. A
    /// receiver that took the value just as the time ran out makes it
    /// `Ok`: the value is delivered exactly once, or handed back.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread until the deadline. Called from a task on a
    /// single-threaded executor whose other task is the partner (the receiver),
    /// it blocks that executor meanwhile: in async code use
    /// [`send_async`](Self::send_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::csp::{self, TrySendError};
    ///
    /// let (mut tx, _rx) = csp::channel();
    /// let r = tx.try_send_for(5, Duration::from_millis(1)); // nobody receives
    /// assert_eq!(r, Err(TrySendError::Full(5)));
    /// ```
    #[doc(alias = "send_timeout")]
    pub fn try_send_for(&mut self, value: T, timeout: Duration) -> Result<(), TrySendError<T>> {
        // A deadline past what `Instant` holds is no deadline.
        self.send_timed(value, Instant::now().checked_add(timeout))
    }

    /// Sends `value` if the receiver takes it before `deadline`.
    ///
    /// # Errors
    ///
    /// As [`try_send_for`](Self::try_send_for).
    ///
    /// # Progress
    ///
    /// As [`try_send_for`](Self::try_send_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_send_for`](Self::try_send_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// let t = std::thread::spawn(move || rx.recv());
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(tx.try_send_until('a', deadline), Ok(()));
    /// assert_eq!(t.join().unwrap(), Ok('a'));
    /// ```
    pub fn try_send_until(&mut self, value: T, deadline: Instant) -> Result<(), TrySendError<T>> {
        self.send_timed(value, Some(deadline))
    }

    fn send_timed(&mut self, value: T, deadline: Option<Instant>) -> Result<(), TrySendError<T>> {
        let slot = Slot::new(Some(value));
        let outcome = match self.offer(&slot) {
            Some((outcome, wakeup)) => {
                // The receiver's waker last: if it panics, the value is the
                // receiver's already, and the panic unwinds out of the send,
                // unless this thread is already unwinding (a send in a
                // `Drop` during a panic): then it is dropped, as a second
                // panic would abort.
                unwind::drop_resuming_some(wakeup);
                outcome
            }
            None => match slot.wait(
                self.chan.spins_until(SENDER, deadline),
                &self.chan.budget,
                deadline,
            ) {
                Some(outcome) => outcome,
                None => match slot.retract(&self.chan) {
                    Some(outcome) => outcome,
                    // Withdrawn: nobody touches the slot any more.
                    None => {
                        let value = slot.value.with_mut(|v| {
                            // SAFETY: withdrawn, as just said: the slot is
                            // ours alone.
                            unsafe { (*v).take() }
                        });
                        return Err(TrySendError::Full(
                            value.expect("an unsent value stays in its slot"),
                        ));
                    }
                },
            },
        };
        self.finish(&slot, outcome)
            .map_err(|SendError(v)| TrySendError::Disconnected(v))
    }

    /// Publishes `slot` (ours, holding the value): `Some(outcome)` if the
    /// rendezvous is over, `None` if we must wait for the receiver.
    ///
    /// With the outcome comes the waiting receiver's wakeup, for the caller
    /// to deliver (by dropping it) once it has recorded the send as over:
    /// the wakeup may run a task's waker, user code that may panic, and a
    /// future polled again after that panic must not offer again.
    pub(super) fn offer(&mut self, slot: &Slot<T>) -> Option<(Outcome, Option<Wakeup>)> {
        self.reclaim();
        let chan = &*self.chan;
        match chan.publish(SENDER, slot) {
            Found::Empty => None,
            Found::Closed => Some((Outcome::Shut, None)),
            Found::Slot(receiver) => {
                // Release: our next use of the word, or the receiver's,
                // sees it empty (the receiver's also through `complete`).
                chan.word.store(EMPTY, Release);
                // SAFETY: our slot, unpublished again; the receiver's slot
                // waits for our completion, so nobody else touches it.
                unsafe { move_value(slot, receiver) };
                // SAFETY: we took the receiver's slot out of the word.
                // Woken by our caller, last: the value is the receiver's
                // already, so a panicking waker (ours to run) loses nothing.
                let wakeup = unsafe { Slot::complete(receiver, Outcome::Done) };
                Some((Outcome::Done, wakeup))
            }
            Found::Alt(alt) => {
                if alt.claim(chan.id()) {
                    chan.word.store(EMPTY, Release);
                    // SAFETY: our claim gives us the Alt's slot, whose owner
                    // waits for our completion.
                    unsafe { move_value(slot, &alt.slot) };
                    // SAFETY: as above. Woken by our caller, as above.
                    let wakeup = unsafe { Slot::complete(&alt.slot, Outcome::Done) };
                    Some((Outcome::Done, wakeup))
                } else {
                    // The Alt took another channel: we came first after
                    // all, and our slot is in the word.
                    None
                }
            }
        }
    }

    /// Takes back the slot of a [`SendAsync`] that was leaked (with
    /// `mem::forget`) while its offer was published, as its drop would
    /// have: withdrawn (its value stays with the leaked future), or
    /// delivered already. Left in the channel word, it would make our next
    /// offer take it for a receiver's.
    pub(super) fn reclaim(&mut self) {
        if let Some(leaked) = self.published.take() {
            // SAFETY: see `Published`: the leaked future's slot is alive and
            // nobody else uses it.
            let _ = unsafe { &*leaked }.retract(&self.chan);
        }
    }

    pub(super) fn finish(&self, slot: &Slot<T>, outcome: Outcome) -> Result<(), SendError<T>> {
        match outcome {
            Outcome::Done => Ok(()),
            // SAFETY: complete with SHUT: nobody touches the slot any more.
            Outcome::Shut => Err(SendError(
                slot.value
                    .with_mut(|v| unsafe { (*v).take() })
                    .expect("an unsent value stays in its slot"),
            )),
        }
    }

    /// [`send`](Self::send) for async tasks.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes either withdraws the offer
    /// (the value is dropped with the future, never received) or, if the
    /// receiver had already taken it, leaves it delivered exactly once.
    /// [`SendAsync::cancel`] gives up the same way but hands an undelivered
    /// value back. A future leaked (with `mem::forget`) while it waits is
    /// withdrawn by this sender's next send: its value stays with the leaked
    /// future, unless the receiver took it before.
    ///
    /// # Progress
    ///
    /// As [`send`](Self::send); the task waits without spinning.
    ///
    /// # Examples
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// let t = std::thread::spawn(move || rx.recv().unwrap());
    /// tx.send_async(3).await.unwrap();
    /// assert_eq!(t.join().unwrap(), 3);
    /// # });
    /// ```
    pub fn send_async(&mut self, value: T) -> SendAsync<'_, T> {
        SendAsync {
            tx: self,
            slot: Slot::new(Some(value)),
            phase: Phase::Idle,
            parked: None,
            _pin: PhantomPinned,
        }
    }

    /// Whether the receiver has been dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::csp::channel::<u8>();
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // A leaked future's offer first, as the receiver's drop does: a
        // receive may have swapped its own slot into the word to take that
        // offer, and it stores the word empty next. Closed in between, the
        // close found the receiver's slot and the store then wiped it: the
        // channel looked open with the sender gone, and the next receive
        // waited for ever. The retract waits for that receive to complete
        // the offer, after its store.
        self.reclaim();
        // The receiver's waker last, under the panic policy: nothing of
        // ours that runs user code is left to drop after it.
        unwind::drop_resuming(shut::<T>(&self.chan));
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The receiving end of a [`csp::channel`](crate::csp::channel()). Not `Clone`.
///
/// Dropping it wakes a sender that waits, whose value comes back in
/// [`SendError`]. A sending task's waker that panics then is handled as
/// for [`Sender`]'s drop; a value kept for the next receive (see
/// [`recv_async`](Self::recv_async)) is dropped before that panic goes on,
/// and a panic of its own drop is then dropped.
///
/// # Examples
///
/// ```
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send([1, 2, 3]).unwrap());
/// assert_eq!(rx.recv(), Ok([1, 2, 3]));
/// ```
pub struct Receiver<T> {
    pub(super) chan: Arc<Chan>,
    /// A value delivered to a receiving future that was dropped at that
    /// moment: the next receive returns it.
    pub(super) stash: Option<T>,
    /// The slot of this receiver's [`RecvAsync`] while it is published.
    pub(super) published: Published<T>,
    /// The [`Alt`](crate::csp::Alt) published on this receiver's channel, while it is.
    pub(super) alt: AltEntry<T>,
}

impl<T> Receiver<T> {
    /// Waits for the sender and takes its value.
    ///
    /// # Errors
    ///
    /// [`RecvError`] if the sender is gone (or goes while we wait).
    ///
    /// # Progress
    ///
    /// Blocks until the sender arrives; otherwise one swap and a bounded
    /// number of steps. It spins briefly, yields while yields are cheap,
    /// then parks.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread. Called from a task on a
    /// single-threaded executor whose other task is the partner (the sender),
    /// it blocks that executor for ever: in async code use
    /// [`recv_async`](Self::recv_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, mut rx) = lockfree_sync::csp::channel::<u8>();
    /// drop(tx);
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn recv(&mut self) -> Result<T, RecvError> {
        self.recv_timed(None).map_err(|e| match e {
            TryRecvError::Disconnected => RecvError,
            TryRecvError::Empty => unreachable!("a receive without a deadline timed out"),
        })
    }

    /// Takes the value of a sender that is waiting now.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if no sender waits (nothing is left
    /// published), [`TryRecvError::Disconnected`] if the sender is gone.
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::csp::{self, TryRecvError};
    ///
    /// let (tx, mut rx) = csp::channel::<u8>();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty)); // nobody sends
    /// drop(tx);
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.recv_timed(Some(Instant::now())).map_err(|e| match e {
            TryRecvError::Empty => TryRecvError::Empty,
            TryRecvError::Disconnected => TryRecvError::Disconnected,
        })
    }

    /// Waits for the sender for `timeout` at most, and takes its value.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if no sender came in time (nothing is
    /// left published: a sender that comes later waits for the next
    /// receive), [`TryRecvError::Disconnected`] if the sender is gone.
    ///
    /// # Progress
    ///
    /// As [`recv`](Self::recv), for `timeout` at most, except that it
    /// never yields: after a brief spin the thread parks with the deadline
    /// as its timeout, and returns within the deadline
    /// plus a timer's and a scheduler's latency, whatever the load. A
    /// sender that handed its value over just as the time ran out makes it
    /// `Ok`: no value is lost.
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread until the deadline. Called from a task on a
    /// single-threaded executor whose other task is the partner (the sender),
    /// it blocks that executor meanwhile: in async code use
    /// [`recv_async`](Self::recv_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::csp::{self, TryRecvError};
    ///
    /// let (_tx, mut rx) = csp::channel::<u8>();
    /// let r = rx.try_recv_for(Duration::from_millis(1)); // nobody sends
    /// assert_eq!(r, Err(TryRecvError::Empty));
    /// ```
    #[doc(alias = "recv_timeout")]
    pub fn try_recv_for(&mut self, timeout: Duration) -> Result<T, TryRecvError> {
        // A deadline past what `Instant` holds is no deadline.
        self.recv_timed(Instant::now().checked_add(timeout))
    }

    /// Waits for the sender until `deadline` at most, and takes its value.
    ///
    /// # Errors
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Progress
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_recv_for`](Self::try_recv_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// std::thread::spawn(move || tx.send(7u8));
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(rx.try_recv_until(deadline), Ok(7));
    /// ```
    #[doc(alias = "recv_deadline")]
    pub fn try_recv_until(&mut self, deadline: Instant) -> Result<T, TryRecvError> {
        self.recv_timed(Some(deadline))
    }

    fn recv_timed(&mut self, deadline: Option<Instant>) -> Result<T, TryRecvError> {
        self.reclaim();
        if let Some(v) = self.stash.take() {
            return Ok(v);
        }
        let slot = Slot::new(None);
        let outcome = match self.accept(&slot) {
            Some(outcome) => outcome,
            None => match slot.wait(
                self.chan.spins_until(RECEIVER, deadline),
                &self.chan.budget,
                deadline,
            ) {
                Some(outcome) => outcome,
                // Withdrawn, or completed by a sender that took the slot
                // first.
                None => slot.retract(&self.chan).ok_or(TryRecvError::Empty)?,
            },
        };
        Self::finish(&slot, outcome).map_err(|RecvError| TryRecvError::Disconnected)
    }

    /// Publishes our (empty) slot: `Some(outcome)` if the rendezvous is
    /// over, `None` if we must wait for the sender.
    /// Takes back the slot of a [`RecvAsync`] that was leaked (with
    /// `mem::forget`) while it waited, as its drop would have: withdrawn,
    /// or, if a sender handed its value over, that value is kept for this
    /// receiver's next receive. Left in the channel word, it would make our
    /// next receive take it for a sender's.
    pub(super) fn reclaim(&mut self) {
        if let Some(shared) = self.alt.0.take() {
            self.reclaim_alt(&shared);
        }
        if let Some(leaked) = self.published.take() {
            // SAFETY: see `Published`: the leaked future's slot is alive and
            // nobody else uses it.
            let slot = unsafe { &*leaked };
            if let Some(Outcome::Done) = slot.retract(&self.chan) {
                debug_assert!(self.stash.is_none(), "a published receive had a stash");
                // SAFETY: complete: nobody else touches the slot.
                self.stash = slot.value.with_mut(|v| unsafe { (*v).take() });
            }
        }
    }

    /// Withdraws an Alt whose [`SelectAsync`] was leaked (with
    /// `mem::forget`) while it was published on this channel, as the
    /// future's drop would have: if a sender on this channel claimed it,
    /// the value it handed over is kept for this receiver's next receive.
    /// (Each receiver of the Alt does this for its own channel.)
    #[cold]
    fn reclaim_alt(&mut self, shared: &Arc<AltShared<T>>) {
        let chan = &*self.chan;
        // AcqRel: as in `Alt::disable`. Our reference keeps the Alt's
        // address from being reused meanwhile.
        if chan
            .word
            .compare_exchange(shared.entry(), EMPTY, AcqRel, Acquire)
            .is_ok()
        {
            // SAFETY: the word's reference, now ours.
            drop(unsafe { Arc::from_raw(Arc::as_ptr(shared)) });
        }
        if shared.claim(CLAIM_SELF) {
            // Nobody will complete the Alt's slot: take back the leaked
            // task's waiter if it is published there.
            let parked = shared.slot.state.swap(ptr::null_mut(), Acquire);
            if !parked.is_null() {
                // SAFETY: the reference the task left in `state`, untaken.
                drop(unsafe { Arc::from_raw(parked) });
            }
        } else if shared.claim.load(Acquire) == chan.id()
            && shared.slot.await_completion() == Outcome::Done
        {
            debug_assert!(self.stash.is_none(), "a published Alt had a stash");
            // SAFETY: complete: nobody else touches the slot.
            self.stash = shared.slot.value.with_mut(|v| unsafe { (*v).take() });
        }
    }

    pub(super) fn accept(&mut self, slot: &Slot<T>) -> Option<Outcome> {
        let chan = &*self.chan;
        match chan.publish(RECEIVER, slot) {
            Found::Empty => None,
            Found::Closed => Some(Outcome::Shut),
            Found::Slot(sender) => {
                // Release: as in `offer`.
                chan.word.store(EMPTY, Release);
                let value = take_from(sender, &mut self.stash);
                // Ours again (unpublished): the value goes where `finish`
                // takes it.
                // SAFETY: our slot, which nobody else touches now.
                slot.value.with_mut(|v| unsafe { *v = Some(value) });
                Some(Outcome::Done)
            }
            Found::Alt(_) => unreachable!("only a receiver's Alt publishes itself"),
        }
    }

    pub(super) fn finish(slot: &Slot<T>, outcome: Outcome) -> Result<T, RecvError> {
        match outcome {
            // SAFETY: complete: nobody else touches the slot.
            Outcome::Done => Ok(slot
                .value
                .with_mut(|v| unsafe { (*v).take() })
                .expect("a completed receive holds its value")),
            Outcome::Shut => Err(RecvError),
        }
    }

    /// [`recv`](Self::recv) for async tasks.
    ///
    /// # Errors
    ///
    /// As [`recv`](Self::recv).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future either withdraws it before any
    /// sender saw it (the value stays with the sender), or, if a sender had
    /// already handed its value over, keeps that value for this receiver's
    /// next receive. No value is lost or received twice. A future leaked
    /// (with `mem::forget`) while it waits is withdrawn the same way by this
    /// receiver's next receive (or an [`Alt`](crate::csp::Alt) built on it, or its drop).
    ///
    /// # Progress
    ///
    /// As [`recv`](Self::recv); the task waits without spinning.
    ///
    /// # Examples
    ///
    /// ```
    /// # futures::executor::block_on(async {
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// std::thread::spawn(move || tx.send('x').unwrap());
    /// assert_eq!(rx.recv_async().await, Ok('x'));
    /// # });
    /// ```
    pub fn recv_async(&mut self) -> RecvAsync<'_, T> {
        RecvAsync {
            rx: self,
            slot: Slot::new(None),
            phase: Phase::Idle,
            parked: None,
            _pin: PhantomPinned,
        }
    }

    /// Whether the sender has been dropped (values it handed over before
    /// may still be received).
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = lockfree_sync::csp::channel::<u8>();
    /// drop(tx);
    /// assert!(rx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // A value handed to a leaked future is dropped with us.
        self.reclaim();
        let wakeup = shut::<T>(&self.chan);
        // Two kinds of user code, run once the channel is closed: the
        // waiting sender's waker and the drop of a value kept for a next
        // receive. Each runs whatever the other does, and the first panic
        // goes on (unless we are unwinding already). A stash left to the
        // drop glue would be dropped while the waker's panic unwinds, and
        // a value whose drop panics too would abort the process.
        let mut panics = Panics::new();
        panics.drop(wakeup);
        panics.drop(self.stash.take());
        panics.resume();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// The slot of an end's future while it is published in the channel word
/// (null: none), so that the end can take it back if the future is leaked.
///
/// A future dropped while published withdraws its slot. One leaked with
/// `mem::forget` (after being pinned, say in a `Box`) never does: its slot
/// would stay in the word, and the end's next send (or receive) would find
/// a slot of its own side there and take it for the partner's (a send
/// "delivered" into a leaked sender slot, both values lost). So each end
/// records its future's slot, and its next operation (or an [`Alt`](crate::csp::Alt) built
/// on it) does what the leaked future's drop would have done.
pub(super) struct Published<T>(pub(super) *const Slot<T>);

impl<T> Published<T> {
    pub(super) const NONE: Self = Self(ptr::null());

    /// The slot of a leaked future, if one is recorded.
    pub(super) fn take(&mut self) -> Option<*const Slot<T>> {
        let slot = core::mem::replace(self, Self::NONE).0;
        (!slot.is_null()).then_some(slot)
    }
}

// SAFETY: the pointer is followed only by the end's owner, through `&mut`
// of the end, and only when the future that recorded it has neither
// finished nor been dropped (each clears it): that future was leaked. Its
// memory is then never freed (Pin's drop guarantee: a pinned value whose
// drop has not run stays valid), and nobody can touch the future again,
// since it borrowed the end mutably and the end is in use again. Values in
// the slot move as they would through the future (`T: Send` is required by
// the ends' own `Send`).
unsafe impl<T> Send for Published<T> {}
// SAFETY: as for `Send`: never followed through a shared reference.
unsafe impl<T> Sync for Published<T> {}

/// The shared part of an [`Alt`](crate::csp::Alt) published on a receiver's channel (see
/// [`Receiver::reclaim_alt`]).
pub(super) struct AltEntry<T>(pub(super) Option<Arc<AltShared<T>>>);

// SAFETY: the Alt's shared part holds at most a value on its way to this
// receiver (`T: Send`, as the receiver's own `Send` requires).
unsafe impl<T: Send> Send for AltEntry<T> {}
// SAFETY: only used through `&mut` of the receiver.
unsafe impl<T> Sync for AltEntry<T> {}
