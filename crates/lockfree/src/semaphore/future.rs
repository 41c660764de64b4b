//! The futures of the semaphore's async acquires.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use sync_core::sync::Arc;
use sync_core::unwind::Panics;
use sync_core::waiter::Waiter;

use super::raw::{GRANTED, token_result};
use super::{ArcSemaphorePermit, Semaphore, SemaphorePermit};
use crate::backlog::Withdrawer;
use crate::error::{AcquireError, TryAcquireError};

/// An async request's state, shared by [`AcquireAsync`] and [`AcquireArcAsync`].
#[derive(Debug)]
pub(super) struct Request {
    pub(super) n: usize,
    pub(super) node: Option<Arc<Waiter>>,
    done: bool,
}

impl Request {
    pub(super) fn new(n: usize) -> Self {
        Self {
            n,
            node: None,
            done: false,
        }
    }

    pub(super) fn poll(
        &mut self,
        sem: &Semaphore,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), AcquireError>> {
        assert!(!self.done, "an acquire future polled after it completed");
        let result = if let Some(node) = &self.node {
            let token = core::task::ready!(node.poll(cx));
            self.node = None;
            token_result(token)
        } else {
            match sem.try_take_open(self.n) {
                Ok(()) => Ok(()),
                Err(TryAcquireError::Closed) => Err(AcquireError::closed()),
                Err(TryAcquireError::NoPermits) => {
                    // Allocated (and the waker cloned) before we are
                    // counted: a deliverer that sees our count waits for our
                    // push, so the window between them holds no allocation
                    // and no user code. Registered before it is pushed, so no
                    // delivery can miss it.
                    let node = Waiter::for_task(cx.waker(), self.n);
                    match sem.commit(self.n) {
                        Ok(()) => {
                            // Free after all: the permits are ours, and the
                            // unused waiter, with its clone of the task's
                            // waker (user code), is dropped. If that drop
                            // panics, the panic goes on with the permits
                            // given back first (unless the thread is already
                            // unwinding: then the panic is dropped and the
                            // permits are this poll's output).
                            let mut panics = Panics::new();
                            panics.drop(node);
                            if !panics.is_empty() && !std::thread::panicking() {
                                panics.catch(|| sem.put_back(self.n));
                                panics.resume();
                            }
                            // Closed since we looked: the permits go back.
                            sem.took(self.n).map_err(|_| AcquireError::closed())
                        }
                        Err(found) => {
                            let panics = sem.enqueue(Arc::clone(&node), found);
                            // Recorded before a panic of another waiter's
                            // waker (from the delivery we ran) goes on: a
                            // later poll takes what our request gets, and a
                            // drop withdraws it or gives it back.
                            let token = node.token();
                            self.node = Some(node);
                            panics.resume();
                            // Our found permits, or a close, may have served
                            // us already.
                            let Some(token) = token else {
                                return Poll::Pending;
                            };
                            self.node = None;
                            token_result(token)
                        }
                    }
                }
            }
        };
        self.done = true;
        Poll::Ready(result)
    }

    /// The future is dropped: withdraw the request, or give back what it
    /// was handed. A panic of the task's waker (dropped on withdrawal: user
    /// code) is resumed once the withdrawal is complete, unless the thread
    /// is already unwinding (`sync_core::unwind`, rules 2 and 3).
    pub(super) fn cancel(&mut self, sem: &Semaphore) {
        let Some(node) = self.node.take() else {
            return;
        };
        let mut panics = Panics::new();
        // The task's waker is dropped last: its drop is user code, which
        // may acquire from this semaphore (the last handle to a task drops
        // the task), and until `withdrawn` has folded our demand, permits
        // kept for it are not free to anyone else.
        let waker = match node.cancel_taking_waker() {
            // Withdrawn: the deliverer folds our demand when it reaches the
            // node (and frees what `pending` kept for it).
            Ok(waker) => {
                panics.catch(|| sem.withdrawn(Withdrawer::Future));
                waker
            }
            // Everything was delivered: give it all back.
            Err(GRANTED) => {
                panics.catch(|| sem.put_back(self.n));
                None
            }
            // Sent away by a close: our demand is folded already.
            Err(_) => None,
        };
        panics.drop(waker);
        panics.resume();
    }
}

/// The future of [`Semaphore::acquire_async`] and
/// [`Semaphore::acquire_many_async`].
///
/// # Cancel safety
///
/// Dropping it loses no permit: see [`Semaphore::acquire_async`].
///
/// # Examples
///
/// ```
/// let sem = lockfree_sync::Semaphore::new(1);
/// let fut: lockfree_sync::AcquireAsync<'_> = sem.acquire_async();
/// assert!(futures::executor::block_on(fut).is_ok());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct AcquireAsync<'a> {
    pub(super) sem: &'a Semaphore,
    pub(super) state: Request,
}

impl<'a> Future for AcquireAsync<'a> {
    type Output = Result<SemaphorePermit<'a>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let sem = this.sem;
        this.state
            .poll(sem, cx)
            .map(|r| r.map(|()| SemaphorePermit::new(sem, this.state.n)))
    }
}

impl Drop for AcquireAsync<'_> {
    fn drop(&mut self) {
        self.state.cancel(self.sem);
    }
}

impl fmt::Debug for AcquireAsync<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireAsync")
            .field("permits", &self.state.n)
            .field("queued", &self.state.node.is_some())
            .finish()
    }
}

/// The future of [`Semaphore::acquire_arc_async`] and
/// [`Semaphore::acquire_many_arc_async`].
///
/// # Cancel safety
///
/// Dropping it loses no permit: see [`Semaphore::acquire_async`].
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// let sem = Arc::new(lockfree_sync::Semaphore::new(1));
/// let fut: lockfree_sync::AcquireArcAsync = sem.acquire_arc_async();
/// assert!(futures::executor::block_on(fut).is_ok());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct AcquireArcAsync {
    pub(super) sem: std::sync::Arc<Semaphore>,
    pub(super) state: Request,
}

impl Future for AcquireArcAsync {
    type Output = Result<ArcSemaphorePermit, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let r = core::task::ready!(this.state.poll(&this.sem, cx));
        Poll::Ready(r.map(|()| ArcSemaphorePermit {
            sem: std::sync::Arc::clone(&this.sem),
            permits: this.state.n,
        }))
    }
}

impl Drop for AcquireArcAsync {
    fn drop(&mut self) {
        self.state.cancel(&self.sem);
    }
}

impl fmt::Debug for AcquireArcAsync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireArcAsync")
            .field("permits", &self.state.n)
            .field("queued", &self.state.node.is_some())
            .finish()
    }
}
