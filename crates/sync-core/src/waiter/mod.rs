//! A waiter that is either a parked thread or a task's `Waker`, and the
//! lock-free FIFO queue the family's primitives keep them in.
//!
//! The papers block *user-level threads* without blocking kernel threads; in
//! Rust the user-level thread is the async task. A primitive built on this
//! module offers a blocking call and a future from one implementation: both
//! create a [`Waiter`], push it on a [`WaiterQueue`] and wait for a
//! [`notify`](Waiter::notify), by parking the thread ([`Waiter::wait`]) or by
//! returning `Pending` from `poll` ([`Waiter::poll`]).
//!
//! # The waiter's life
//!
//! A waiter's state moves once, from *waiting* to either a *token* (a
//! non-zero number the primitive chooses: "you own the lock", "compete
//! again", "your permits are here") or *cancelled*:
//!
//! * [`notify`](Waiter::notify) moves it to a token and wakes the thread or
//!   task; it fails if the waiter was cancelled first, so the notifier knows
//!   to give what it carried to somebody else.
//! * [`cancel`](Waiter::cancel) (a dropped future) moves it to cancelled; it
//!   fails with the token if a notify came first, so the canceller knows it
//!   now owns what the token stands for and must pass it on.
//!
//! Exactly one of the two wins, which is what makes cancellation at any point
//! lose neither a wakeup nor a handed-over lock or permit.
//!
//! A thread's waiter sleeps on a word in its own node on 64-bit Linux (a
//! futex: see the `park` module), elsewhere with `thread::park`. There a
//! notify therefore wakes the node, never the thread: a wake-up delivered
//! late, after the waiter found its token and moved on, cannot cut short a
//! `thread::park` of the caller's own. [`ThreadSleep`] is the same sleep
//! for a primitive that wakes a blocked thread through a `Waker`.
//!
//! # Reclamation
//!
//! Nodes are reference counted ([`Arc`]): the waiter holds one reference and
//! the queue holds one from [`push`](WaiterQueue::push) until
//! [`pop`](WaiterQueue::pop) hands it to the consumer. A cancelled future
//! therefore simply drops its reference and leaves its node in the queue,
//! marked cancelled; the consumer frees it when it reaches it. No node is
//! freed while a producer may still link to it (see [`WaiterQueue`]), no
//! garbage collector or epoch is needed, and loom checks the counts. A
//! thread also keeps a reference to its last node, to hand it out again
//! once the others are gone ([`Waiter::for_thread`]): one node per thread,
//! freed when the thread exits.
//!
//! Intrusive nodes owned by a pinned future were the other candidate; they
//! save the allocation, but only the lock-free queue's consumer may unlink
//! a node, so a future dropped while queued would have to wait for the
//! consumer to pass, which turns a cancellation into a block.

use core::ptr;
use core::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::sync::Arc;
use crate::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};
use crate::sync::thread::{self, Thread};
use crate::unwind::Panics;
use crate::wait::{Next, Watch};
use crate::waker::AtomicWaker;

#[cfg(not(loom))]
mod park;
/// The futex parker, public to its loom model.
#[cfg(loom)]
#[doc(hidden)]
pub mod park;
mod queue;
mod sleep;

pub use queue::{Swept, WaiterQueue};
pub use sleep::ThreadSleep;

/// What a notify carries: any value but 0 and `usize::MAX` (reserved for
/// "waiting" and "cancelled").
pub type Token = usize;

/// The state of a waiter nobody has notified or cancelled yet.
const WAITING: usize = 0;
/// The state of a cancelled waiter.
const CANCELLED: usize = usize::MAX;

/// How a waiter is woken.
#[derive(Debug)]
enum Wake {
    /// A parked OS thread.
    Thread(Thread),
    /// An async task.
    Task(AtomicWaker),
}

/// One waiting thread or task: a node of a [`WaiterQueue`].
///
/// `data` is the primitive's own word about the waiter (how many permits it
/// needs, whether it has waited too long), fixed before it is shared.
#[derive(Debug)]
pub struct Waiter {
    /// The queue link, written by the producer that enqueues after us.
    next: AtomicPtr<Waiter>,
    /// Whether the waiter is in a [`WaiterQueue`]: set by
    /// [`push`](WaiterQueue::push), cleared by the pop that hands it out.
    /// A node is linked through its own `next`, so it can be in one queue
    /// once: a second push would relink it, and the queues' pops would
    /// hand out references that no push gave them. `push` is a safe
    /// function, so it refuses such a node (see there). Not a loom atomic:
    /// it guards against misuse, and no protocol reads it.
    queued: core::sync::atomic::AtomicBool,
    /// Where a thread's waiter sleeps (the `park` module), beside `state`.
    parker: park::ThreadParker,
    state: AtomicUsize,
    wake: Wake,
    data: usize,
}

impl Waiter {
    /// A waiter for the calling thread.
    ///
    /// A thread's waits share one node: the thread keeps a node and hands
    /// it out again once nobody else holds it (every queue, notifier and
    /// earlier caller has dropped its reference), reset as new. A wait
    /// therefore neither allocates nor, after its wake-up, frees a node,
    /// except while the thread's node is still held (a wait inside a wait,
    /// a withdrawn node still queued, a notifier that has not let go yet):
    /// then it gets a new node of its own. From a thread-local's
    /// destructor, once the thread's node is gone, every call allocates.
    pub fn for_thread(data: usize) -> Arc<Self> {
        let new = || Self::with(Wake::Thread(thread::current()), data);
        OWN_WAITER
            .try_with(|own| {
                // Taken out while we look (nothing here reenters), and put
                // back.
                match own.take() {
                    Some(mut node) => {
                        let waiter = if Self::reuse(&mut node, data) {
                            Arc::clone(&node)
                        } else {
                            // Still held: the thread keeps it for a later
                            // wait.
                            new()
                        };
                        own.set(Some(node));
                        waiter
                    }
                    None => {
                        let node = new();
                        own.set(Some(Arc::clone(&node)));
                        node
                    }
                }
            })
            .unwrap_or_else(|_| new())
    }

    /// Resets the thread's kept `node` for a new wait if nobody else holds
    /// it.
    fn reuse(node: &mut Arc<Self>, data: usize) -> bool {
        // A plain load first: a node a notifier still holds is left alone
        // without a write to its line, which the notifier is using.
        if Arc::strong_count(node) != 1 {
            return false;
        }
        // Unique: the Acquire in `get_mut` pairs with the Release of every
        // other reference's drop, so whatever they did to the node is done.
        match Arc::get_mut(node) {
            Some(node) => {
                node.reset(data);
                true
            }
            None => false,
        }
    }

    /// Makes a node nobody else holds new again (it stays the calling
    /// thread's: `wake` is kept).
    fn reset(&mut self, data: usize) {
        // Exclusive access: plain stores suffice, and `push` publishes them.
        self.next.store(ptr::null_mut(), Relaxed);
        self.state.store(WAITING, Relaxed);
        self.parker.reset();
        self.data = data;
    }

    /// A waiter for a task, to be woken through `waker`.
    pub fn for_task(waker: &Waker, data: usize) -> Arc<Self> {
        let slot = AtomicWaker::new();
        slot.register(waker);
        Self::with(Wake::Task(slot), data)
    }

    fn with(wake: Wake, data: usize) -> Arc<Self> {
        Arc::new(Self {
            next: AtomicPtr::new(ptr::null_mut()),
            queued: core::sync::atomic::AtomicBool::new(false),
            parker: park::ThreadParker::new(),
            state: AtomicUsize::new(WAITING),
            wake,
            data,
        })
    }

    /// The primitive's word about this waiter, given at creation.
    #[inline]
    pub fn data(&self) -> usize {
        self.data
    }

    /// Whether this waiter parks a thread ([`for_thread`](Self::for_thread))
    /// rather than wakes a task. A notified thread runs on by itself; a
    /// task runs only when its executor polls it, so a primitive that hands
    /// a role to a woken waiter and walks away may rely on a thread coming
    /// back, not on a task.
    #[inline]
    pub fn is_thread(&self) -> bool {
        matches!(self.wake, Wake::Thread(_))
    }

    /// Hands `token` to the waiter and wakes it. Returns `false`, and wakes
    /// nobody, if the waiter was cancelled first.
    ///
    /// The token is published with Release: everything the notifier did
    /// before (a critical section, the permits it counted) happens before the
    /// waiter's [`token`](Self::token), [`wait`](Self::wait) or
    /// [`poll`](Self::poll) returns it.
    ///
    /// # Panics
    ///
    /// If `token` is 0 or `usize::MAX` (reserved), or if the waiter was
    /// already notified: a waiter is notified once.
    #[inline]
    pub fn notify(&self, token: Token) -> bool {
        let granted = self.set_token(token);
        if granted {
            self.wake_now();
        }
        granted
    }

    /// [`notify`](Self::notify) in two steps: hands `token` over now, and
    /// returns the wakeup to deliver later (`None` if the waiter was
    /// cancelled first). A primitive that holds a role while it hands out
    /// tokens wakes after giving the role up, so that the role is held for
    /// less time and a panicking waker cannot leave it held. Dropping the
    /// [`Wakeup`] wakes too. A thread is unparked at once (that cannot
    /// panic); only a task's waker is deferred.
    ///
    /// # Panics
    ///
    /// As [`notify`](Self::notify).
    #[inline]
    pub fn notify_later(this: &Arc<Self>, token: Token) -> Option<Wakeup> {
        if !this.set_token(token) {
            return None;
        }
        match this.wake {
            // Unparking is cheap and cannot panic; doing it now also keeps
            // the unpark from reaching the thread after it has moved on to
            // wait for something else (harmless with std, which allows
            // spurious unparks, but loom's `join` does not).
            Wake::Thread(_) => {
                this.wake_now();
                Some(Wakeup(None))
            }
            Wake::Task(_) => Some(Wakeup(Some(Arc::clone(this)))),
        }
    }

    /// [`notify_later`](Self::notify_later) that defers a thread's wake-up
    /// too, for a notifier that holds a lock other threads spin on: the
    /// wake-up (a system call when the thread sleeps) then runs when the
    /// [`Wakeup`] is delivered, after the lock is released. It may come
    /// after the waiter has found its token and moved on: on 64-bit Linux it
    /// then reaches only the waiter's node; elsewhere it unparks the thread, and
    /// `park` allows such spurious returns, so every correct park loop
    /// tolerates it. Under `--cfg loom`, whose `JoinHandle::join` does not
    /// tolerate them, a thread is woken at once, as by `notify_later`.
    ///
    /// # Panics
    ///
    /// As [`notify`](Self::notify).
    #[inline]
    pub fn notify_deferred(this: &Arc<Self>, token: Token) -> Option<Wakeup> {
        if cfg!(loom) {
            return Self::notify_later(this, token);
        }
        if !this.set_token(token) {
            return None;
        }
        Some(Wakeup(Some(Arc::clone(this))))
    }

    /// [`notify_deferred`](Self::notify_deferred) for a notifier that owns
    /// a reference to the waiter (taken while the waiter could not yet
    /// have gone): the [`Wakeup`] keeps that reference, with no clone and
    /// no drop of it here (two reference-count updates fewer, on a line
    /// the waiting thread uses too).
    ///
    /// # Panics
    ///
    /// As [`notify`](Self::notify).
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::waiter::Waiter;
    ///
    /// let waiter = Waiter::for_thread(0);
    /// let wakeup = Waiter::notify_deferred_owned(waiter.clone(), 7);
    /// drop(wakeup); // wakes this thread's waiter, which has not parked yet
    /// assert_eq!(waiter.wait(false), 7);
    /// ```
    #[inline]
    pub fn notify_deferred_owned(this: Arc<Self>, token: Token) -> Option<Wakeup> {
        if cfg!(loom) {
            return Self::notify_later(&this, token);
        }
        if !this.set_token(token) {
            return None;
        }
        Some(Wakeup(Some(this)))
    }

    #[inline]
    fn set_token(&self, token: Token) -> bool {
        assert!(
            token != WAITING && token != CANCELLED,
            "Waiter::notify: token {token:#x} is reserved"
        );
        // AcqRel: Release publishes the notifier's writes to the waiter's
        // Acquire load of `state`; Acquire (on failure) pairs with `cancel`.
        match self.state.compare_exchange(WAITING, token, AcqRel, Acquire) {
            Ok(_) => true,
            Err(CANCELLED) => false,
            Err(other) => panic!("Waiter::notify: already notified with {other:#x}"),
        }
    }

    #[inline]
    pub(crate) fn wake_now(&self) {
        match &self.wake {
            Wake::Thread(t) => self.parker.unpark(t),
            Wake::Task(w) => w.wake(),
        }
    }

    /// Withdraws the waiter. `Err(token)` if a notify won the race: the
    /// caller then owns whatever the token stands for.
    ///
    /// A withdrawn task's waiter drops its `Waker` at once: the node itself
    /// stays in its queue until the consumer reaches it, but it no longer
    /// keeps the task (with an executor such as tokio, the task's whole
    /// allocation) alive, so what a cancelled wait leaves behind is one small
    /// fixed-size node.
    ///
    /// A caller that has protocol work to do after the withdrawal (count
    /// it, pass on what a token carried) uses
    /// [`cancel_catching`](Self::cancel_catching) instead, so that a waker
    /// that panics cannot skip that work.
    ///
    /// # Panics
    ///
    /// If the task's `Waker` panics when it is dropped. The waiter is
    /// withdrawn all the same (the result would have been `Ok(())`).
    pub fn cancel(&self) -> Result<(), Token> {
        let mut panics = Panics::new();
        let result = self.cancel_catching(&mut panics);
        panics.resume();
        result
    }

    /// [`cancel`](Self::cancel), catching a panic of the task's `Waker`
    /// (dropped on withdrawal) into `panics` instead of unwinding: the
    /// result is then `Ok(())`, as the withdrawal itself was done. The
    /// caller finishes its own withdrawal (counts it, frees what was kept
    /// for the waiter) and then resumes the panic with
    /// [`Panics::resume`], following rule 2 of [`unwind`](crate::unwind).
    pub fn cancel_catching(&self, panics: &mut Panics) -> Result<(), Token> {
        let waker = self.cancel_taking_waker()?;
        panics.drop(waker);
        Ok(())
    }

    /// [`cancel`](Self::cancel) that hands the task's `Waker` back instead
    /// of dropping it: its drop is user code, which may use the primitive
    /// (the last handle to a task drops the task), so a caller whose own
    /// withdrawal is not done until it has counted the waiter out drops it
    /// after that, under [`Panics::drop`].
    pub fn cancel_taking_waker(&self) -> Result<Option<core::task::Waker>, Token> {
        // Acquire (on failure): pairs with notify's Release, so the caller
        // sees what the token hands over.
        match self
            .state
            .compare_exchange(WAITING, CANCELLED, Acquire, Acquire)
        {
            // Nobody wakes a cancelled waiter (`set_token` fails), and only
            // the waiting task registers: the waker is dead weight.
            Ok(_) => Ok(match &self.wake {
                Wake::Task(slot) => slot.take(),
                Wake::Thread(_) => None,
            }),
            Err(token) => {
                debug_assert_ne!(token, CANCELLED, "a waiter is cancelled once");
                Err(token)
            }
        }
    }

    /// Whether the waiter has been cancelled (it then stays cancelled).
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        self.state.load(Acquire) == CANCELLED
    }

    /// The token, once notified.
    #[inline]
    pub fn token(&self) -> Option<Token> {
        // Acquire: pairs with notify's Release.
        match self.state.load(Acquire) {
            WAITING | CANCELLED => None,
            token => Some(token),
        }
    }

    /// Waits until the waiter is notified, parking the calling thread;
    /// returns the token. With `spin`, it first spins briefly (worth it when
    /// the notify usually comes within microseconds: a handoff).
    ///
    /// # Panics
    ///
    /// If this is a task's waiter, if the calling thread is not the one that
    /// made it (the notify would unpark the wrong thread), or if it was
    /// cancelled.
    pub fn wait(&self, spin: bool) -> Token {
        self.assert_owner();
        // If asked, a short spin first: a notify that comes within it costs
        // no sleep and no wakeup (a system call on each side).
        if spin {
            // The family's watch: it yields only while yields are cheap.
            let mut watch = Watch::default();
            while watch.pause(None) == Next::Poll {
                if let Some(token) = self.token() {
                    return token;
                }
            }
        }
        loop {
            if let Some(token) = self.token() {
                return token;
            }
            assert!(!self.is_cancelled(), "Waiter::wait on a cancelled waiter");
            // A notify between the check and the park leaves the parker
            // notified, so the park returns at once.
            self.parker.park(None);
        }
    }

    /// [`wait`](Self::wait) with a deadline: `Some(token)` once notified, or
    /// `None` once `deadline` has passed, with the waiter then
    /// [cancelled](Self::cancel) (a notify that wins that race is returned as
    /// `Some`, so nothing it carried is lost). The deadline is checked inside
    /// the spin too, so the call returns within the deadline plus one
    /// scheduling quantum whatever `spin` says.
    ///
    /// Under `--cfg loom` the deadline's value is ignored: the thread lets
    /// the others run, then either finds its token or cancels, and loom
    /// explores both outcomes (as the parking-lot model does with timeouts).
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_until(&self, spin: bool, deadline: Instant) -> Option<Token> {
        self.assert_owner();
        #[cfg(loom)]
        {
            let _ = (spin, deadline);
            thread::yield_now();
            self.cancel().err()
        }
        #[cfg(not(loom))]
        {
            if spin {
                // The family's watch checks the deadline, and parks rather
                // than yield once yields are slow.
                let mut watch = Watch::default();
                while watch.pause(Some(deadline)) == Next::Poll {
                    if let Some(token) = self.token() {
                        return Some(token);
                    }
                }
            }
            loop {
                if let Some(token) = self.token() {
                    return Some(token);
                }
                let now = Instant::now();
                if now >= deadline {
                    return self.cancel().err();
                }
                // As in `wait`: a notify before the park leaves the parker
                // notified. Spurious returns only loop.
                self.parker.park(Some(deadline - now));
            }
        }
    }

    fn assert_owner(&self) {
        let Wake::Thread(owner) = &self.wake else {
            panic!("Waiter::wait on a task's waiter");
        };
        assert!(
            owner.id() == thread::current().id(),
            "Waiter::wait called by a thread that is not the thread that made it"
        );
    }

    /// `Ready(token)` once notified; otherwise registers the task's waker
    /// and returns `Pending`. Once a poll has returned `Ready`, the waiter
    /// holds no waker that its notifier will not wake: whoever drops the
    /// waiter's last `Arc` runs no user code.
    ///
    /// # Panics
    ///
    /// If this is a thread's waiter.
    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<Token> {
        let Wake::Task(slot) = &self.wake else {
            panic!("Waiter::poll on a thread's waiter");
        };
        // A notify is final: once the token is set nobody wakes this waiter
        // again, so a poll that sees it after registering takes its waker
        // back (see `register_unless`) and the node's last `Arc`, possibly
        // the notifier's inside a raw unlock, drops no user code.
        match slot.register_unless(cx.waker(), || self.token()) {
            Some(token) => Poll::Ready(token),
            None => Poll::Pending,
        }
    }
}

// The calling thread's last waiter, handed out again by
// `Waiter::for_thread` once it is unshared. Per thread; under loom, per
// model thread (loom's threads share one OS thread, whose own node would
// park and unpark another model thread).
#[cfg(not(loom))]
std::thread_local! {
    static OWN_WAITER: core::cell::Cell<Option<Arc<Waiter>>> = const { core::cell::Cell::new(None) };
}
#[cfg(loom)]
loom::thread_local! {
    static OWN_WAITER: core::cell::Cell<Option<Arc<Waiter>>> = core::cell::Cell::new(None);
}

/// A wakeup owed to a [`Waiter`] that was handed its token by
/// [`Waiter::notify_later`]: [`wake`](Self::wake) it, or drop it (which
/// wakes too).
#[must_use = "the waiter sleeps until it is woken"]
#[derive(Debug)]
pub struct Wakeup(Option<Arc<Waiter>>);

impl Wakeup {
    /// Whether there is nothing left to do (a thread already unparked by
    /// [`Waiter::notify_later`]).
    pub(crate) fn is_done(&self) -> bool {
        self.0.is_none()
    }

    /// Wakes the waiter (it already has its token).
    ///
    /// A task's waker may re-enter the primitive that woke it (an executor
    /// that polls the task on the spot, whose task releases what the next
    /// task waits for): so that one release reaching a whole queue of such
    /// tasks does not nest their wakers as deep as the queue, a task's
    /// wakeup made inside a few dozen others on this thread is queued on
    /// the thread instead, and the outermost wakeup runs it once the
    /// current one returns (before the outermost returns). A queued
    /// waker's panic then unwinds out of the outermost wakeup. A thread's
    /// unpark runs at once.
    // Inline, with `wake_now` and `Drop`: see `WakeList`'s methods.
    #[inline]
    pub fn wake(mut self) {
        if let Some(waiter) = self.0.take() {
            waiter.wake_now();
        }
    }
}

impl Drop for Wakeup {
    #[inline]
    fn drop(&mut self) {
        if let Some(waiter) = self.0.take() {
            waiter.wake_now();
        }
    }
}
