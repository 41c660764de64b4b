//! occam's `ALT` over several receivers, blocking, timed and async.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::ptr;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::*};
use sync_core::unwind;
use sync_core::waiter::Waiter;

use super::slot::{ALT_TAG, CLOSED, EMPTY, MIN_SPINS, Outcome, Slot, take_from};
use super::{Receiver, RecvError};

/// The part of an [`Alt`] that senders reach through the channel words.
pub(super) struct AltShared<T> {
    /// 0 while open; [`CLAIM_SELF`] when the Alt took a ready sender
    /// itself; otherwise the [`Chan::id`] of the channel whose sender (or
    /// whose closing) claimed it.
    pub(super) claim: AtomicUsize,
    /// Where the claiming sender moves its value.
    pub(super) slot: Slot<T>,
}

// SAFETY: the slot's value cell is written by the one sender whose claim
// succeeded, before it completes the slot, and read by the Alt's owner
// after it sees the completion (Release/Acquire on the slot's state); the
// rest is atomics. Values move between threads: `T: Send`.
unsafe impl<T: Send> Send for AltShared<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for AltShared<T> {}

/// The Alt claimed itself.
pub(super) const CLAIM_SELF: usize = 1;

impl<T> AltShared<T> {
    /// The channel word that names this Alt (its address, tagged), to
    /// compare a word with. The words themselves hold entries that
    /// [`Alt::enable`] makes from `Arc::into_raw`, whose provenance a
    /// sender that rebuilds the `Arc` needs: this one's covers the shared
    /// part alone, not the counts.
    pub(super) fn entry(&self) -> *mut u8 {
        ptr::from_ref(self)
            .cast::<u8>()
            .cast_mut()
            .map_addr(|a| a | ALT_TAG)
    }

    /// Claims the Alt for channel `id`: only the first claim succeeds.
    pub(super) fn claim(&self, id: usize) -> bool {
        // AcqRel: Acquire pairs with the Alt's Release publication of its
        // entries; Release orders the claim before our completion.
        self.claim.compare_exchange(0, id, AcqRel, Acquire).is_ok()
    }
}

/// occam's `ALT`: waits on several CSP receivers at once and takes a value
/// from the first whose sender is ready.
///
/// # Fairness
///
/// When several senders are ready at once, [`select`](Self::select) looks
/// at the receivers in turn starting one past the receiver it took last
/// time, so a receiver whose sender is always ready cannot starve the
/// others. Among senders that arrive while it waits, the first to claim it
/// wins. The turn is the `Alt`'s own: a new `Alt` starts at its first
/// receiver, so one built anew for every select favours the first ready
/// receiver every time; keep the `Alt` across selects for the rotation.
///
/// # Examples
///
/// ```
/// use lockfree_sync::csp::{self, Alt};
///
/// let (mut tx1, mut rx1) = csp::channel();
/// let (mut tx2, mut rx2) = csp::channel();
/// // Each sender sends once and stays (a dropped sender's channel is ready
/// // with an error from then on).
/// let a = std::thread::spawn(move || tx1.send("one").map(|()| tx1));
/// let b = std::thread::spawn(move || tx2.send("two").map(|()| tx2));
/// let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
/// let mut got = vec![alt.select(), alt.select()];
/// got.sort();
/// assert_eq!(got, [(0, Ok("one")), (1, Ok("two"))]);
/// # a.join().unwrap().unwrap(); b.join().unwrap().unwrap();
/// ```
pub struct Alt<'a, T> {
    receivers: Vec<&'a mut Receiver<T>>,
    /// Where the next scan starts.
    next: usize,
}

impl<'a, T> Alt<'a, T> {
    /// An `ALT` over `receivers`; [`select`](Self::select) returns indexes
    /// into this list.
    ///
    /// # Panics
    ///
    /// If `receivers` is empty: such an ALT would wait forever.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_tx, mut rx) = lockfree_sync::csp::channel::<u8>();
    /// let alt = lockfree_sync::csp::Alt::new(vec![&mut rx]);
    /// assert_eq!(alt.len(), 1);
    /// ```
    pub fn new(mut receivers: Vec<&'a mut Receiver<T>>) -> Self {
        // A receiver's leaked future must not stay published where the
        // Alt looks for senders.
        for rx in &mut receivers {
            rx.reclaim();
        }
        assert!(
            !receivers.is_empty(),
            "Alt::new: an ALT over no channels would wait forever"
        );
        Self { receivers, next: 0 }
    }

    /// The number of receivers.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_t1, mut r1) = lockfree_sync::csp::channel::<u8>();
    /// let (_t2, mut r2) = lockfree_sync::csp::channel::<u8>();
    /// assert_eq!(lockfree_sync::csp::Alt::new(vec![&mut r1, &mut r2]).len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.receivers.len()
    }

    /// Always `false`: an `Alt` has at least one receiver.
    ///
    /// # Examples
    ///
    /// ```
    /// let (_tx, mut rx) = lockfree_sync::csp::channel::<u8>();
    /// assert!(!lockfree_sync::csp::Alt::new(vec![&mut rx]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.receivers.is_empty()
    }

    /// Waits until one receiver's sender is ready and takes its value:
    /// `(index, Ok(value))`, or `(index, Err(RecvError))` if that
    /// receiver's sender is gone. A closed channel stays ready, so drop it
    /// from the ALT (make a new one) once it has reported the error.
    ///
    /// # Progress
    ///
    /// Blocks until a sender is ready (or gone). It spins briefly, yields while yields are
    /// cheap, then parks. A sender that finds the Alt waiting claims it with one
    /// CAS; the Alt publishes and withdraws itself with one CAS per channel.
    ///
    /// # Fairness
    ///
    /// See [`Alt`].
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread. Called from a task on a
    /// single-threaded executor whose other task is the partner (a sender),
    /// it blocks that executor for ever: in async code use
    /// [`select_async`](Self::select_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// let (mut tx, mut rx) = lockfree_sync::csp::channel();
    /// let (_tx2, mut rx2) = lockfree_sync::csp::channel();
    /// std::thread::spawn(move || tx.send(1).unwrap());
    /// let mut alt = lockfree_sync::csp::Alt::new(vec![&mut rx2, &mut rx]);
    /// assert_eq!(alt.select(), (1, Ok(1)));
    /// ```
    pub fn select(&mut self) -> (usize, Result<T, RecvError>) {
        self.select_timed(None)
            .expect("a select without a deadline timed out")
    }

    /// Takes a value from a receiver whose sender is waiting now (or
    /// reports a closed channel): `None` if no channel is ready. Nothing is
    /// left published.
    ///
    /// # Fairness
    ///
    /// As [`select`](Self::select).
    ///
    /// # Examples
    ///
    /// ```
    /// let (_tx1, mut rx1) = lockfree_sync::csp::channel::<u8>();
    /// let (_tx2, mut rx2) = lockfree_sync::csp::channel::<u8>();
    /// let mut alt = lockfree_sync::csp::Alt::new(vec![&mut rx1, &mut rx2]);
    /// assert_eq!(alt.try_select(), None); // nobody sends
    /// ```
    pub fn try_select(&mut self) -> Option<(usize, Result<T, RecvError>)> {
        self.select_timed(Some(Instant::now()))
    }

    /// [`select`](Self::select) for `timeout` at most: `None`, as
    /// [`try_select`](Self::try_select) returns it, if no sender was ready
    /// (or gone) in time; the Alt is then withdrawn from every channel, and
    /// a sender that comes later waits for the next receive or select.
    ///
    /// # Progress
    ///
    /// As [`select`](Self::select), for `timeout` at most, except that
    /// it never yields: after a brief spin the thread parks with the
    /// deadline as its timeout, and returns within the
    /// deadline plus a timer's and a scheduler's latency, whatever the
    /// load. A sender that claimed the Alt just as the time ran out makes
    /// it `Some`: no value is lost.
    ///
    /// # Fairness
    ///
    /// As [`select`](Self::select).
    ///
    /// # Deadlocks
    ///
    /// Blocks the calling thread until the deadline. Called from a task on a
    /// single-threaded executor whose other task is the partner (a sender),
    /// it blocks that executor meanwhile: in async code use
    /// [`select_async`](Self::select_async)`().await`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use lockfree_sync::csp::{self, Alt};
    ///
    /// let (_tx1, mut rx1) = csp::channel::<u8>();
    /// let (_tx2, mut rx2) = csp::channel::<u8>();
    /// let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    /// assert_eq!(alt.try_select_for(Duration::from_millis(1)), None);
    /// ```
    #[doc(alias = "select_timeout")]
    pub fn try_select_for(&mut self, timeout: Duration) -> Option<(usize, Result<T, RecvError>)> {
        // A deadline past what `Instant` holds is no deadline.
        self.select_timed(Instant::now().checked_add(timeout))
    }

    /// [`select`](Self::select) until `deadline` at most: `None` as
    /// [`try_select_for`](Self::try_select_for) returns it.
    ///
    /// # Progress
    ///
    /// As [`try_select_for`](Self::try_select_for).
    ///
    /// # Deadlocks
    ///
    /// As [`try_select_for`](Self::try_select_for).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use lockfree_sync::csp::{self, Alt};
    ///
    /// let (mut tx, mut rx) = csp::channel();
    /// std::thread::spawn(move || tx.send(1u8));
    /// let mut alt = Alt::new(vec![&mut rx]);
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(alt.try_select_until(deadline), Some((0, Ok(1))));
    /// ```
    #[doc(alias = "select_deadline")]
    pub fn try_select_until(&mut self, deadline: Instant) -> Option<(usize, Result<T, RecvError>)> {
        self.select_timed(Some(deadline))
    }

    /// `None` once `deadline` has passed.
    fn select_timed(&mut self, deadline: Option<Instant>) -> Option<(usize, Result<T, RecvError>)> {
        loop {
            if let Some(got) = self.poll_ready() {
                return Some(got);
            }
            match self.wait(deadline) {
                Waited::Got(got) => return Some(got),
                Waited::Retry => {}
                Waited::TimedOut => return None,
            }
        }
    }

    /// The scan order: every index once, starting at `next`.
    fn order(&self) -> impl Iterator<Item = usize> + use<T> {
        let (n, start) = (self.receivers.len(), self.next);
        (0..n).map(move |k| (start + k) % n)
    }

    fn took(&mut self, i: usize, got: Result<T, RecvError>) -> (usize, Result<T, RecvError>) {
        self.next = (i + 1) % self.receivers.len();
        (i, got)
    }

    /// Takes a ready sender (or a closed channel, or a stashed value)
    /// without publishing anything.
    fn poll_ready(&mut self) -> Option<(usize, Result<T, RecvError>)> {
        // A select of this Alt leaked while published (see
        // `Receiver::reclaim_alt`).
        for rx in &mut self.receivers {
            rx.reclaim();
        }
        for i in self.order() {
            if let Some(v) = self.receivers[i].stash.take() {
                return Some(self.took(i, Ok(v)));
            }
            let chan = &*self.receivers[i].chan;
            // Acquire: pairs with the sender's Release swap, so its slot is
            // readable once we own it.
            let word = chan.word.load(Acquire);
            if word == CLOSED {
                return Some(self.took(i, Err(RecvError)));
            }
            if word == EMPTY || word.addr() & ALT_TAG != 0 {
                continue;
            }
            // A sender waits: take its slot (a CAS, since it may withdraw).
            if chan
                .word
                .compare_exchange(word, EMPTY, AcqRel, Acquire)
                .is_ok()
            {
                let value = take_from(word.cast(), &mut self.receivers[i].stash);
                return Some(self.took(i, Ok(value)));
            }
        }
        None
    }

    /// Publishes the Alt on every channel and waits for a claim, until
    /// `deadline` at most.
    fn wait(&mut self, deadline: Option<Instant>) -> Waited<T> {
        let mut enabled = self.enable();
        let result = match enabled.found.take() {
            Some((i, ready)) => {
                // Withdrawn first, then the ready sender completed (and
                // woken, which may panic).
                self.disable(&enabled);
                return Waited::Got(self.take_ready(i, ready));
            }
            None if enabled.retry => None,
            None => {
                let waited =
                    enabled
                        .shared
                        .slot
                        .wait(MIN_SPINS, &AtomicU32::new(MIN_SPINS), deadline);
                match waited {
                    Some(outcome) => Some(self.claimed(&enabled.shared, outcome)),
                    None => match self.abandon(&enabled) {
                        Some(got) => Some(got),
                        None => {
                            self.disable(&enabled);
                            return Waited::TimedOut;
                        }
                    },
                }
            }
        };
        self.disable(&enabled);
        match result {
            Some((i, got)) => Waited::Got(self.took(i, got)),
            None => Waited::Retry,
        }
    }

    /// Gives up waiting on an enabled Alt (a dropped future, a timed
    /// select whose time ran out), before it is disabled: `None` if nobody
    /// had claimed it (nobody will now), or what the sender (or closing
    /// end) that claimed it first left in its slot, and for which
    /// receiver.
    fn abandon(&self, enabled: &Enabled<T>) -> Option<(usize, Result<T, RecvError>)> {
        let slot = &enabled.shared.slot;
        if enabled.shared.claim(CLAIM_SELF) {
            // Nobody will complete the slot: take back the waiter (a
            // task's, or a timed-out thread's, cancelled) if it is
            // published there.
            let parked = slot.state.swap(ptr::null_mut(), Acquire);
            if !parked.is_null() {
                // SAFETY: our reference, left in `state`, untaken.
                drop(unsafe { Arc::from_raw(parked) });
            }
            None
        } else {
            // A sender (or a closing end) claimed us and is a few steps
            // from completing the slot: wait for it.
            let outcome = slot.await_completion();
            Some(self.claimed(&enabled.shared, outcome))
        }
    }

    /// Publishes the Alt on every channel, in scan order, until a channel
    /// turns out ready (then the Alt claims itself for it and takes it) or
    /// a sender claims the Alt.
    fn enable(&mut self) -> Enabled<T> {
        let shared = Arc::new(AltShared {
            claim: AtomicUsize::new(0),
            slot: Slot::new(None),
        });
        let mut enabled = Enabled {
            shared,
            channels: Vec::with_capacity(self.receivers.len()),
            found: None,
            retry: false,
        };
        for i in self.order() {
            let chan = &*self.receivers[i].chan;
            let raw = Arc::into_raw(Arc::clone(&enabled.shared));
            // The word's entry is made from `raw`, not from a reference to
            // the shared part: the sender that swaps it out rebuilds the
            // `Arc` from it (`Chan::found`), which needs the provenance
            // `into_raw` gives (the whole allocation, counts included).
            let entry = raw.cast::<u8>().cast_mut().map_addr(|a| a | ALT_TAG);
            // Release: publishes the Alt to the sender that swaps it out.
            match chan.word.compare_exchange(EMPTY, entry, AcqRel, Acquire) {
                Ok(_) => enabled.channels.push(i),
                Err(word) => {
                    // SAFETY: the reference we made for the word, unused.
                    drop(unsafe { Arc::from_raw(raw) });
                    // A sender is ready (or the channel closed) on a channel
                    // we had not enabled yet: claim ourselves for it, unless
                    // a sender on an enabled channel claimed us first.
                    if !enabled.shared.claim(CLAIM_SELF) {
                        break;
                    }
                    if word == CLOSED {
                        enabled.found = Some((i, None));
                    } else if chan
                        .word
                        .compare_exchange(word, EMPTY, AcqRel, Acquire)
                        .is_ok()
                    {
                        // The sender's slot is ours to complete: done once
                        // the Alt is withdrawn (`take_ready`).
                        enabled.found = Some((i, Some(Ready(word.cast()))));
                    } else {
                        // It withdrew. Senders that failed to claim us wait
                        // in their words: start over and find them.
                        enabled.retry = true;
                    }
                    break;
                }
            }
        }
        for &i in &enabled.channels {
            // Withdrawn by `disable`; if the select is leaked instead, by the
            // receiver's next use (`Receiver::reclaim`).
            self.receivers[i].alt.0 = Some(Arc::clone(&enabled.shared));
        }
        enabled
    }

    /// Completes the rendezvous with a sender found ready while publishing
    /// (its slot, taken out of the word of receiver `i`), or reports that
    /// channel closed. Called once the Alt is withdrawn from every channel,
    /// so that a sender's panicking waker leaves nothing of it published;
    /// the value waits in the receiver's stash meanwhile.
    fn take_ready(&mut self, i: usize, ready: Option<Ready<T>>) -> (usize, Result<T, RecvError>) {
        let got = match ready {
            Some(Ready(sender)) => Ok(take_from(sender, &mut self.receivers[i].stash)),
            None => Err(RecvError),
        };
        self.took(i, got)
    }

    /// What a sender (or a closing channel) that claimed the Alt left in
    /// its slot, and for which receiver.
    fn claimed(&self, shared: &AltShared<T>, outcome: Outcome) -> (usize, Result<T, RecvError>) {
        // Acquire: pairs with the claimer's CAS.
        let id = shared.claim.load(Acquire);
        let i = self
            .receivers
            .iter()
            .position(|rx| rx.chan.id() == id)
            .expect("the claimer is one of our channels");
        (i, Receiver::finish(&shared.slot, outcome))
    }

    /// Withdraws the Alt from every channel where it is still published.
    fn disable(&mut self, enabled: &Enabled<T>) {
        let entry = enabled.shared.entry();
        for &i in &enabled.channels {
            self.receivers[i].alt.0 = None;
            let chan = &*self.receivers[i].chan;
            if chan
                .word
                .compare_exchange(entry, EMPTY, AcqRel, Acquire)
                .is_ok()
            {
                // SAFETY: the word's reference, now ours.
                drop(unsafe { Arc::from_raw(Arc::as_ptr(&enabled.shared)) });
            }
            // Otherwise a sender swapped the entry out and owns that
            // reference.
        }
    }

    /// [`select`](Self::select) for async tasks.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future withdraws the Alt from every
    /// channel; a value that a sender handed over as it was dropped is kept
    /// by that receiver for its next receive (or the next select). No value
    /// is lost or received twice. A future leaked (with `mem::forget`)
    /// while it waits is withdrawn the same way by the next select, or by
    /// each receiver's next receive (or drop).
    ///
    /// # Progress
    ///
    /// Pending until a sender is ready (or gone); the sender that claims
    /// the Alt wakes the task.
    ///
    /// # Fairness
    ///
    /// As [`select`](Self::select).
    ///
    /// # Examples
    ///
    /// ```
    /// use lockfree_sync::csp::{self, Alt};
    /// # futures::executor::block_on(async {
    /// let (_tx1, mut rx1) = csp::channel::<u8>();
    /// let (mut tx2, mut rx2) = csp::channel();
    /// std::thread::spawn(move || tx2.send(2u8).unwrap());
    /// let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    /// assert_eq!(alt.select_async().await, (1, Ok(2)));
    /// # });
    /// ```
    pub fn select_async(&mut self) -> SelectAsync<'_, 'a, T> {
        SelectAsync {
            alt: self,
            waiting: None,
            parked: None,
        }
    }
}

/// The slot of a ready sender that an Alt took out of a channel word, to
/// complete once the Alt is withdrawn.
struct Ready<T>(*const Slot<T>);

// SAFETY: the Alt that took the slot out of the word is the only one to
// touch it (its owner waits for the completion); the value moves to the
// Alt's receiver, as through the channel (`T: Send`).
unsafe impl<T: Send> Send for Ready<T> {}
// SAFETY: never used through a shared reference.
unsafe impl<T: Send> Sync for Ready<T> {}

/// How [`Alt::wait`] ended.
enum Waited<T> {
    /// A value (or a closed channel) was taken.
    Got((usize, Result<T, RecvError>)),
    /// A ready sender withdrew while we took it: start over.
    Retry,
    /// The deadline passed; the Alt is withdrawn.
    TimedOut,
}

/// An Alt published on its channels, waiting for a claim.
struct Enabled<T> {
    shared: Arc<AltShared<T>>,
    /// The receivers (indexes) on whose channels the Alt is published.
    channels: Vec<usize>,
    /// A ready channel found while publishing (the Alt claimed itself):
    /// the slot of its sender, which the Alt took out of the word and
    /// completes with [`Alt::take_ready`], or `None` if it closed.
    found: Option<(usize, Option<Ready<T>>)>,
    /// A ready sender withdrew while we took it: start over.
    retry: bool,
}

/// The future of [`Alt::select_async`].
///
/// # Cancel safety
///
/// See [`Alt::select_async`].
///
/// # Examples
///
/// ```
/// # futures::executor::block_on(async {
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send(1u8).unwrap());
/// let mut alt = lockfree_sync::csp::Alt::new(vec![&mut rx]);
/// let select: lockfree_sync::csp::SelectAsync<'_, '_, u8> = alt.select_async();
/// assert_eq!(select.await, (0, Ok(1)));
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct SelectAsync<'s, 'a, T> {
    alt: &'s mut Alt<'a, T>,
    /// The Alt published on its channels, while the task waits.
    waiting: Option<Enabled<T>>,
    /// The task's waiter, published in the Alt's slot.
    parked: Option<Arc<Waiter>>,
}

// Nothing of the future is published by address (the Alt's shared part is
// on the heap), so it may move between polls.
impl<T> Unpin for SelectAsync<'_, '_, T> {}

impl<T> Future for SelectAsync<'_, '_, T> {
    type Output = (usize, Result<T, RecvError>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            if let Some(enabled) = &this.waiting {
                let outcome =
                    core::task::ready!(enabled.shared.slot.poll_wait(&mut this.parked, cx));
                let enabled = this.waiting.take().expect("just seen");
                this.parked = None;
                let (i, got) = this.alt.claimed(&enabled.shared, outcome);
                this.alt.disable(&enabled);
                return Poll::Ready(this.alt.took(i, got));
            }
            if let Some(got) = this.alt.poll_ready() {
                return Poll::Ready(got);
            }
            let mut enabled = this.alt.enable();
            if let Some((i, ready)) = enabled.found.take() {
                this.alt.disable(&enabled);
                return Poll::Ready(this.alt.take_ready(i, ready));
            }
            if enabled.retry {
                this.alt.disable(&enabled);
                continue;
            }
            this.waiting = Some(enabled);
        }
    }
}

impl<T> Drop for SelectAsync<'_, '_, T> {
    fn drop(&mut self) {
        if let Some(enabled) = self.waiting.take() {
            // Keep what a sender that claimed us handed over.
            if let Some((i, Ok(v))) = self.alt.abandon(&enabled) {
                self.alt.receivers[i].stash = Some(v);
            }
            self.alt.disable(&enabled);
        }
        // The task's waker may be in the waiter: dropped under the panic
        // policy, not by the drop glue (it may run during an unwind).
        unwind::drop_resuming(self.parked.take());
    }
}

impl<T> fmt::Debug for SelectAsync<'_, '_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectAsync")
            .field("waiting", &self.waiting.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Alt<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Alt")
            .field("receivers", &self.receivers.len())
            .finish()
    }
}
