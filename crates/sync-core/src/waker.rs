//! [`AtomicWaker`]: one task's `Waker`, registered by the task and taken by
//! any thread that wakes it, without a lock.
//!
//! This is the algorithm of `futures::task::AtomicWaker` (and tokio's), built
//! on the [`sync`](crate::sync) shim so that loom checks it together with the
//! primitives that use it. One task registers (each `poll`); any number of
//! threads may call [`wake`](AtomicWaker::wake) concurrently.

use core::task::Waker;

use crate::sync::atomic::{AtomicUsize, Ordering::*};
use crate::sync::cell::UnsafeCell;
use crate::unwind::Panics;

/// Nobody is touching the slot.
const IDLE: usize = 0;
/// The task is writing the slot.
const REGISTERING: usize = 0b01;
/// A waker is taking the slot.
const WAKING: usize = 0b10;

/// A slot for one `Waker`, written by the task and taken by a waker thread.
///
/// # Examples
///
/// ```
/// use std::task::{Context, Waker};
/// use sync_core::waker::AtomicWaker;
///
/// let slot = AtomicWaker::new();
/// slot.register(Waker::noop());
/// slot.wake(); // wakes the registered task (a no-op waker here)
/// ```
pub struct AtomicWaker {
    state: AtomicUsize,
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: the `waker` cell is only accessed by the thread that moved `state`
// from IDLE to REGISTERING or set WAKING from IDLE: the state machine gives one
// thread at a time exclusive access, and `Waker` is Send + Sync.
unsafe impl Send for AtomicWaker {}
// SAFETY: as for `Send`.
unsafe impl Sync for AtomicWaker {}

impl AtomicWaker {
    crate::const_unless_loom! {
        /// An empty slot.
        pub fn new() -> Self {
            Self {
                state: AtomicUsize::new(IDLE),
                waker: UnsafeCell::new(None),
            }
        }
    }

    /// Stores `waker` to be woken by the next [`wake`](Self::wake).
    ///
    /// Only one task may register at a time (the owner of the slot). If a
    /// wake races this call, `waker` is woken right away, so a wakeup is
    /// never lost.
    ///
    /// # Panics
    ///
    /// Registering clones `waker` and drops the waker it replaces; waking
    /// it (when a wake races the call) runs it. All of that is user code.
    /// If any of it panics, the slot is left consistent first and the
    /// first panic is then resumed (unless the thread is already
    /// unwinding: see [`unwind`](crate::unwind), rule 3):
    ///
    /// * if the clone panics, the slot keeps the waker it held (a later
    ///   [`wake`](Self::wake) still reaches the task through it, and a wake
    ///   that raced the call is delivered to it);
    /// * the replaced waker is dropped only once the slot is free again, so
    ///   a panic in its `Drop` leaves the new waker registered.
    ///
    /// Either way later registers and wakes work as if the call had not
    /// panicked: no wakeup is lost and no later register wakes its own task
    /// at once.
    pub fn register(&self, waker: &Waker) {
        // Acquire: pairs with the Release that ended the previous register or
        // take, so this thread sees the slot as they left it.
        match self
            .state
            .compare_exchange(IDLE, REGISTERING, Acquire, Acquire)
        {
            Ok(_) => {
                let mut panics = Panics::new();
                // The waker this call replaces, dropped once the slot is
                // free again: its `Drop` is user code.
                let replaced = self.waker.with_mut(|slot| {
                    // SAFETY: REGISTERING gives this thread exclusive access to
                    // the slot until it leaves that state.
                    let slot = unsafe { &mut *slot };
                    if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        return None;
                    }
                    // The clone is user code: if it panics, the old waker
                    // stays in the slot and the state change below still
                    // runs, so the slot is never left REGISTERING.
                    panics
                        .catch(|| waker.clone())
                        .and_then(|new| slot.replace(new))
                });
                // AcqRel: Release publishes the slot to `take`; Acquire (on
                // failure) sees a concurrent `take`'s WAKING.
                let racing = match self
                    .state
                    .compare_exchange(REGISTERING, IDLE, AcqRel, Acquire)
                {
                    Ok(_) => None,
                    Err(actual) => {
                        // A wake arrived while we wrote: it could not take
                        // the waker, so we wake it ourselves (the new one,
                        // or the old one if the clone panicked).
                        debug_assert_eq!(actual, REGISTERING | WAKING);
                        let taken = self.waker.with_mut(|slot| {
                            // SAFETY: still REGISTERING: the waking thread
                            // backed off without touching the slot.
                            unsafe { (*slot).take() }
                        });
                        // AcqRel: Release pairs with the Acquire of the next
                        // register or take, which sees the empty slot.
                        self.state.swap(IDLE, AcqRel);
                        taken
                    }
                };
                // The slot is free: now the rest of the user code.
                if let Some(w) = racing {
                    panics.catch(|| w.wake());
                }
                if let Some(old) = replaced {
                    panics.drop(old);
                }
                panics.resume();
            }
            // A wake is taking the old waker right now: wake the new one
            // directly, as the old one may belong to a previous poll.
            Err(WAKING) => waker.wake_by_ref(),
            // REGISTERING: concurrent registers are the caller's bug; leaving
            // the slot alone is the safe answer.
            Err(_) => waker.wake_by_ref(),
        }
    }

    /// The poll of a future that waits for a final event: `ready()` if it
    /// already returns `Some`; otherwise registers `waker` and looks again.
    ///
    /// When it returns `Some`, the slot keeps no waker of this call. An
    /// event between the register and the second look may have taken the
    /// slot before the register filled it; as the event is final, nobody
    /// wakes for it again, so the waker is taken back and dropped here, in
    /// its own task's poll. Left in the slot, it would be dropped (user
    /// code) by whoever drops the slot last: often the thread that caused
    /// the event, inside an operation that must not unwind.
    ///
    /// # Panics
    ///
    /// As [`register`](Self::register); and the waker taken back is dropped
    /// here (user code).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::task::Waker;
    /// use sync_core::waker::AtomicWaker;
    ///
    /// let slot = AtomicWaker::new();
    /// let done = AtomicBool::new(false);
    /// let look = || done.load(Ordering::Acquire).then_some(());
    /// assert_eq!(slot.register_unless(Waker::noop(), look), None);
    /// done.store(true, Ordering::Release);
    /// slot.wake();
    /// assert_eq!(slot.register_unless(Waker::noop(), look), Some(()));
    /// ```
    pub fn register_unless<T>(&self, waker: &Waker, ready: impl Fn() -> Option<T>) -> Option<T> {
        if let Some(t) = ready() {
            return Some(t);
        }
        self.register(waker);
        // An event before the register found the old waker (or none): look
        // again so that this poll does not sleep on it.
        let t = ready()?;
        drop(self.take());
        Some(t)
    }

    /// Takes the registered waker, if any, and wakes it through this
    /// thread's [`wake_chain`](crate::wake_chain): inside a few dozen
    /// other task wakeups on this thread, it runs once the outermost's
    /// current waker returns, before the outermost returns.
    ///
    /// # Panics
    ///
    /// Resumes the waker's panic (see [`wake_chain::wake`](crate::wake_chain::wake)).
    pub fn wake(&self) {
        if let Some(waker) = self.take() {
            crate::wake_chain::wake(waker);
        }
    }

    /// Takes the registered waker without waking it.
    pub fn take(&self) -> Option<Waker> {
        // AcqRel: Acquire pairs with the Release that ended `register`, so the
        // slot's contents are visible; Release orders our prior writes (the
        // reason to wake) before a racing register's re-check.
        match self.state.fetch_or(WAKING, AcqRel) {
            IDLE => {
                let waker = self.waker.with_mut(|slot| {
                    // SAFETY: we moved IDLE to WAKING, which excludes
                    // registers and other takes until we clear it.
                    unsafe { (*slot).take() }
                });
                // Release: pairs with the Acquire of the next register.
                self.state.fetch_and(!WAKING, Release);
                waker
            }
            // REGISTERING: the register sees WAKING and wakes for us.
            // WAKING: another thread is already taking it.
            _ => None,
        }
    }
}

impl Default for AtomicWaker {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for AtomicWaker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AtomicWaker")
            .field("state", &self.state.load(Relaxed))
            .finish_non_exhaustive()
    }
}
