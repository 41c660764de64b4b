//! The guards of an [`AstMutex`]: borrowed ([`AstGuard`]) and owned
//! ([`ArcAstGuard`]). Both are a [`Lease`] (which states to leave, and the
//! data pointer) plus a way to reach the mutex.

use core::fmt;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};

// The owned guard's `Arc` is the user's std `Arc` in every build (loom's
// cannot be a method receiver); it only keeps the mutex alive.
use std::sync::Arc;
use sync_core::sync::cell::MutPtr;
use sync_core::unwind::Panics;

use crate::future::{EnterArcAsync, EnterAsync};
use crate::mutex::{AstMutex, entry_mask, state_index};
use crate::state::{AbstractState, StateSet};

/// What a held lock leaves behind: the states a drop exits in, and the
/// access to the data.
struct Lease<T: ?Sized> {
    /// The state the lock was entered in (or handed over in).
    entered: u32,
    /// The state a drop outside a panic leaves: `entered`, or `exit`'s.
    next: u32,
    /// The state a drop while the thread panics leaves (`on_unwind`).
    unwind: u32,
    // Dropped before the unlock, so loom sees the access end first.
    data: ManuallyDrop<MutPtr<T>>,
}

impl<T: ?Sized> Lease<T> {
    fn new<S: AbstractState>(mutex: &AstMutex<S, T>, entered: u32) -> Self {
        Self {
            entered,
            next: entered,
            unwind: entered,
            data: ManuallyDrop::new(mutex.data().get_mut()),
        }
    }

    /// Ends the data access; returns the state to unlock in.
    fn end(&mut self) -> u32 {
        // SAFETY: called once, from the guard's `drop`; the pointer is not
        // used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        if self.unwind != self.next && std::thread::panicking() {
            self.unwind
        } else {
            self.next
        }
    }

    /// The state entered in.
    fn entered_in<S: AbstractState>(&self) -> S {
        S::from_index(self.entered)
    }

    /// Makes a drop leave `next`, whether or not the thread panics.
    #[inline]
    fn exit_in<S: AbstractState>(&mut self, next: S) {
        let i = state_index(next);
        self.next = i;
        self.unwind = i;
    }

    /// Makes a drop while the thread panics leave `state`.
    fn unwind_in<S: AbstractState>(&mut self, state: S) {
        self.unwind = state_index(state);
    }

    /// Ends the lease and unlocks `mutex` (the guard's drop).
    #[inline]
    fn release<S: AbstractState>(&mut self, mutex: &AstMutex<S, T>) {
        let next = self.end();
        mutex.unlock(self.entered, next);
    }

    /// [`release`](Self::release), keeping the wakers' panics in `panics`.
    fn release_with<S: AbstractState>(&mut self, mutex: &AstMutex<S, T>, panics: &mut Panics) {
        let next = self.end();
        mutex.unlock_with(self.entered, next, panics);
    }

    fn get(&self) -> &T {
        // Shared access straight from the pointer: no `&mut T` is created,
        // so `&T`s handed out before (perhaps to other threads, the guard
        // being `Sync`) stay valid.
        // SAFETY: the guard holds the lock, so no one else accesses the
        // data, and `&self` excludes `get_mut` while this borrow lives.
        self.data.with(|p| unsafe { &*p })
    }

    fn get_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so no other access exists.
        unsafe { MutPtr::deref(&self.data) }
    }
}

/// The methods both guards have, written once: each hands the work to the
/// guard's [`Lease`]. Each method's docs come with the invocation.
macro_rules! lease_methods {
    (
        $(#[$entered:meta])* entered_in;
        $(#[$exit:meta])* exit;
        $(#[$unwind:meta])* on_unwind;
    ) => {
        $(#[$entered])*
        pub fn entered_in(&self) -> S {
            self.lease.entered_in()
        }

        $(#[$exit])*
        #[inline]
        pub fn exit(mut self, next: S) {
            self.lease.exit_in(next);
            // Drop unlocks.
        }

        $(#[$unwind])*
        pub fn on_unwind(&mut self, state: S) {
            self.lease.unwind_in(state);
        }
    };
}

/// The lock of an [`AstMutex`], held: derefs to the data.
///
/// [`exit`](Self::exit) names the next state. Dropping the guard without
/// `exit` restores the state it entered in ([`entered_in`](Self::entered_in))
/// and wakes a waiter that accepts it, if any.
///
/// The guard is `Send` when `T` is: the lock is not tied to a thread, so a
/// guard may be exited by another thread than the one that entered, and
/// held across an `.await` in a task that moves between threads.
///
/// # Panics
///
/// A guard dropped while its thread panics leaves the state named by
/// [`on_unwind`](Self::on_unwind), by default the state it entered in.
///
/// An exit (or a drop) that wakes a task whose waker panics completes first
/// (the lock is released or handed over, and every waiter it owes a wake-up
/// is woken), then the waker's panic goes on to the caller; if the thread is
/// already unwinding, the waker's panic is dropped instead of aborting the
/// process. In a thread-local destructor, which is not unwinding, the
/// panic goes on out of the destructor, and the process aborts (see
/// [`AstMutex`]'s `# Panics`).
///
/// # Examples
///
/// ```
/// ast_mutex::states! { enum Buf { Empty, Full } }
/// let m = ast_mutex::AstMutex::new(Buf::Empty, Vec::new());
/// let mut g = m.enter(Buf::Empty);
/// g.push(1);
/// assert_eq!(g.entered_in(), Buf::Empty);
/// g.exit(Buf::Full);
/// ```
#[must_use = "dropping the guard exits at once, restoring the entry state"]
pub struct AstGuard<'a, S: AbstractState, T: ?Sized> {
    mutex: &'a AstMutex<S, T>,
    lease: Lease<T>,
}

// SAFETY: the guard is the right to use `&mut T` until it unlocks, and the
// lock word may be released by any thread, so moving the guard moves that
// right, which `T: Send` allows (as moving a `&mut T`); it also moves a
// `&AstMutex`, which needs the mutex to be `Sync` (`S: Sync`).
unsafe impl<S: AbstractState + Sync, T: ?Sized + Send> Send for AstGuard<'_, S, T> {}
// SAFETY: a shared guard only gives `&T`, so it may be shared across
// threads when `T` may (as std's MutexGuard).
unsafe impl<S: AbstractState + Sync, T: ?Sized + Sync> Sync for AstGuard<'_, S, T> {}

impl<'a, S: AbstractState, T: ?Sized> AstGuard<'a, S, T> {
    pub(crate) fn new(mutex: &'a AstMutex<S, T>, entered: u32) -> Self {
        Self {
            mutex,
            lease: Lease::new(mutex, entered),
        }
    }

    lease_methods! {
        /// The state the lock was in when this guard entered (or was handed it).
        ///
        /// # Examples
        ///
        /// ```
        /// ast_mutex::states! { enum Light { Red, Green } }
        /// let m = ast_mutex::AstMutex::new(Light::Green, ());
        /// assert_eq!(m.enter(Light::Red | Light::Green).entered_in(), Light::Green);
        /// ```
        entered_in;

        /// Leaves the critical section in state `next`, waking a waiter whose
        /// entry set contains `next`.
        ///
        /// # Panics
        ///
        /// If `next.index()` is not below `S::COUNT` (a broken hand-written
        /// [`AbstractState`]). If the waker of a task this exit wakes panics,
        /// with that panic, once the exit is complete (see the type's
        /// `# Panics`).
        ///
        /// # Examples
        ///
        /// ```
        /// ast_mutex::states! { enum Light { Red, Green } }
        /// let m = ast_mutex::AstMutex::new(Light::Green, ());
        /// m.enter(Light::Green).exit(Light::Red);
        /// assert_eq!(m.state(), Some(Light::Red));
        /// ```
        exit;

        /// Names the state the lock is left in if this guard is dropped while
        /// the thread panics (by default the state it entered in). Call it
        /// before risky work, once the data no longer matches the entry state:
        /// a buffer filled before a panic should not be left `Mid`.
        ///
        /// "While the thread panics" is `std::thread::panicking()`: a guard
        /// taken and dropped (without `exit`) inside a `Drop` that runs during
        /// an unrelated unwind also leaves this state, so exit explicitly there.
        ///
        /// # Panics
        ///
        /// If `state.index()` is not below `S::COUNT`.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::panic::{AssertUnwindSafe, catch_unwind};
        /// ast_mutex::states! { enum Buf { Empty, Mid, Full } }
        /// let m = ast_mutex::AstMutex::new(Buf::Mid, vec![1]);
        /// let _ = catch_unwind(AssertUnwindSafe(|| {
        ///     let mut g = m.enter(Buf::Mid);
        ///     g.push(2);
        ///     g.on_unwind(Buf::Full); // the buffer is full now, whatever happens
        ///     panic!("risky work failed");
        /// }));
        /// assert_eq!(m.state(), Some(Buf::Full));
        /// ```
        on_unwind;
    }

    /// Exits in `next`, then waits to enter in a state of `set`: the
    /// counterpart of a condition variable's `wait`, returning a new guard.
    ///
    /// Nothing is lost between the two steps: the state is in the lock
    /// word, so a waiter cannot miss the exit that admits it.
    ///
    /// # Panics
    ///
    /// If `set` is empty (before exiting), or as [`exit`](Self::exit).
    ///
    /// # Deadlocks
    ///
    /// As [`AstMutex::enter`]: in a task on a single-threaded executor, await
    /// [`exit_and_enter_async`](Self::exit_and_enter_async) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum Turn { Ping, Pong } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Turn::Ping, 0));
    /// let pong = {
    ///     let m = Arc::clone(&m);
    ///     std::thread::spawn(move || {
    ///         let mut g = m.enter(Turn::Pong);
    ///         for _ in 0..3 {
    ///             *g += 1;
    ///             g = g.exit_and_enter(Turn::Ping, Turn::Pong);
    ///         }
    ///         g.exit(Turn::Ping);
    ///     })
    /// };
    /// let mut g = m.enter(Turn::Ping);
    /// for _ in 0..3 {
    ///     g = g.exit_and_enter(Turn::Pong, Turn::Ping);
    /// }
    /// assert_eq!(*g, 3);
    /// g.exit(Turn::Pong);
    /// pong.join().unwrap();
    /// ```
    #[doc(alias = "wait")]
    pub fn exit_and_enter(self, next: S, set: impl Into<StateSet<S>>) -> AstGuard<'a, S, T> {
        let mask = entry_mask(set.into(), "exit_and_enter");
        let mutex = self.mutex;
        self.exit(next);
        mutex.enter_mask(mask)
    }

    /// [`exit_and_enter`](Self::exit_and_enter) for async tasks: exits in
    /// `next` at once and returns the future of the next entry.
    ///
    /// # Cancel safety
    ///
    /// As [`AstMutex::enter_async`]; the exit has happened when this
    /// returns, whatever becomes of the future.
    ///
    /// # Panics
    ///
    /// If `set` is empty (before exiting), or as [`exit`](Self::exit).
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum Turn { Ping, Pong } }
    /// let m = ast_mutex::AstMutex::new(Turn::Ping, 0);
    /// futures::executor::block_on(async {
    ///     let mut g = m.enter_async(Turn::Ping).await;
    ///     *g += 1;
    ///     let wait = g.exit_and_enter_async(Turn::Pong, Turn::Pong);
    ///     assert_eq!(*wait.await, 1);
    /// });
    /// ```
    pub fn exit_and_enter_async(
        self,
        next: S,
        set: impl Into<StateSet<S>>,
    ) -> EnterAsync<'a, S, T> {
        let mask = entry_mask(set.into(), "exit_and_enter_async");
        let mutex = self.mutex;
        self.exit(next);
        EnterAsync::new(mutex, mask)
    }
}

impl<S: AbstractState, T: ?Sized> Drop for AstGuard<'_, S, T> {
    #[inline]
    fn drop(&mut self) {
        self.lease.release(self.mutex);
    }
}

impl<S: AbstractState, T: ?Sized> Deref for AstGuard<'_, S, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        self.lease.get()
    }
}

impl<S: AbstractState, T: ?Sized> DerefMut for AstGuard<'_, S, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.lease.get_mut()
    }
}

impl<S: AbstractState, T: ?Sized + fmt::Debug> fmt::Debug for AstGuard<'_, S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AstGuard")
            .field("entered_in", &self.entered_in())
            .field("data", &&**self)
            .finish()
    }
}

/// An owned guard: the lock of an `Arc<AstMutex>`, held, with no lifetime.
///
/// Returned by [`AstMutex::enter_arc`], [`AstMutex::try_enter_arc`] and
/// [`AstMutex::enter_arc_async`]; behaves as [`AstGuard`] and keeps the
/// mutex alive until dropped.
///
/// # Panics
///
/// As [`AstGuard`]: a drop while panicking leaves the
/// [`on_unwind`](Self::on_unwind) state. When an exit's waker panics, the
/// guard drops its handle on the mutex before the panic goes on, so a
/// guard that holds the last handle drops the `T` outside that unwind.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// ast_mutex::states! { enum Light { Red, Green } }
/// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, 0));
/// let mut g = m.enter_arc(Light::Red);
/// *g += 1;
/// assert!(Arc::ptr_eq(g.mutex(), &m));
/// g.exit(Light::Green);
/// ```
#[must_use = "dropping the guard exits at once, restoring the entry state"]
pub struct ArcAstGuard<S: AbstractState, T: ?Sized> {
    lease: Lease<T>,
    /// Dropped by `Drop`, after the unlock and before a waker's panic goes
    /// on (it may be the mutex's last handle).
    mutex: ManuallyDrop<Arc<AstMutex<S, T>>>,
}

// SAFETY: as for `AstGuard`; the `Arc` is `Send` when the mutex is
// `Send + Sync` (`S: Send + Sync`, `T: Send`).
unsafe impl<S: AbstractState + Send + Sync, T: ?Sized + Send> Send for ArcAstGuard<S, T> {}
// SAFETY: a shared guard gives `&T` and `&Arc<AstMutex>`.
unsafe impl<S: AbstractState + Send + Sync, T: ?Sized + Send + Sync> Sync for ArcAstGuard<S, T> {}

impl<S: AbstractState, T: ?Sized> ArcAstGuard<S, T> {
    pub(crate) fn new(mutex: Arc<AstMutex<S, T>>, entered: u32) -> Self {
        Self {
            lease: Lease::new(&mutex, entered),
            mutex: ManuallyDrop::new(mutex),
        }
    }

    /// Unlocks as the guard's drop does, and hands back its handle on the
    /// mutex with the panics of the wakers the exit ran.
    fn release_keeping(self) -> (Arc<AstMutex<S, T>>, Panics) {
        let mut this = ManuallyDrop::new(self);
        let mut panics = Panics::new();
        let this = &mut *this;
        this.lease.release_with(&this.mutex, &mut panics);
        // SAFETY: taken exactly once, here; the guard's `Drop` does not run.
        (unsafe { ManuallyDrop::take(&mut this.mutex) }, panics)
    }

    /// The mutex this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum One { Only } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(One::Only, ()));
    /// assert!(Arc::ptr_eq(m.enter_arc(One::Only).mutex(), &m));
    /// ```
    pub fn mutex(&self) -> &Arc<AstMutex<S, T>> {
        &self.mutex
    }

    lease_methods! {
        /// As [`AstGuard::entered_in`].
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// ast_mutex::states! { enum One { Only } }
        /// let m = Arc::new(ast_mutex::AstMutex::new(One::Only, ()));
        /// assert_eq!(m.enter_arc(One::Only).entered_in(), One::Only);
        /// ```
        entered_in;

        /// As [`AstGuard::exit`].
        ///
        /// # Panics
        ///
        /// If `next.index()` is not below `S::COUNT`.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// ast_mutex::states! { enum Light { Red, Green } }
        /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, ()));
        /// m.enter_arc(Light::Red).exit(Light::Green);
        /// assert_eq!(m.state(), Some(Light::Green));
        /// ```
        exit;

        /// As [`AstGuard::on_unwind`].
        ///
        /// # Panics
        ///
        /// If `state.index()` is not below `S::COUNT`.
        ///
        /// # Examples
        ///
        /// ```
        /// use std::sync::Arc;
        /// ast_mutex::states! { enum Job { Idle, Broken } }
        /// let m = Arc::new(ast_mutex::AstMutex::new(Job::Idle, ()));
        /// let mut g = m.enter_arc(Job::Idle);
        /// g.on_unwind(Job::Broken);
        /// drop(g); // not panicking: back to Idle
        /// assert_eq!(m.state(), Some(Job::Idle));
        /// ```
        on_unwind;
    }

    /// As [`AstGuard::exit_and_enter`], returning an owned guard.
    ///
    /// # Panics
    ///
    /// If `set` is empty (before exiting), or as [`exit`](Self::exit).
    ///
    /// # Deadlocks
    ///
    /// As [`AstMutex::enter`]: in a task on a single-threaded executor, await
    /// [`exit_and_enter_async`](Self::exit_and_enter_async) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, ()));
    /// let g = m.enter_arc(Light::Red).exit_and_enter(Light::Green, Light::Green);
    /// assert_eq!(g.entered_in(), Light::Green);
    /// ```
    pub fn exit_and_enter(self, next: S, set: impl Into<StateSet<S>>) -> ArcAstGuard<S, T> {
        let mask = entry_mask(set.into(), "exit_and_enter");
        self.exit_keeping(next).enter_arc_mask(mask)
    }

    /// As [`AstGuard::exit_and_enter_async`], returning the future of an
    /// owned guard.
    ///
    /// # Cancel safety
    ///
    /// As [`AstMutex::enter_async`].
    ///
    /// # Panics
    ///
    /// If `set` is empty (before exiting), or as [`exit`](Self::exit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, ()));
    /// let wait = m.enter_arc(Light::Red).exit_and_enter_async(Light::Green, Light::Green);
    /// assert_eq!(futures::executor::block_on(wait).entered_in(), Light::Green);
    /// ```
    pub fn exit_and_enter_async(self, next: S, set: impl Into<StateSet<S>>) -> EnterArcAsync<S, T> {
        let mask = entry_mask(set.into(), "exit_and_enter_async");
        EnterArcAsync::new(self.exit_keeping(next), mask)
    }

    /// Exits in `next` and hands back the guard's handle on the mutex. If
    /// a waker the exit ran panicked, the handle is dropped first (it may
    /// be the last: its drop drops the `T`) and the panic goes on; if the
    /// thread is already unwinding, the panic is dropped and the handle
    /// handed back, as `exit` would have gone on.
    fn exit_keeping(mut self, next: S) -> Arc<AstMutex<S, T>> {
        self.lease.exit_in(next);
        let (mutex, panics) = self.release_keeping();
        if panics.is_empty() || std::thread::panicking() {
            drop(panics);
            return mutex;
        }
        panics.drop_then_resume(mutex);
        unreachable!("a waker's panic goes on outside an unwind")
    }
}

impl<S: AbstractState, T: ?Sized> Drop for ArcAstGuard<S, T> {
    #[inline]
    fn drop(&mut self) {
        let mut panics = Panics::new();
        self.lease.release_with(&self.mutex, &mut panics);
        // SAFETY: taken exactly once, here; the field is not used again.
        let mutex = unsafe { ManuallyDrop::take(&mut self.mutex) };
        panics.drop_then_resume(mutex);
    }
}

impl<S: AbstractState, T: ?Sized> Deref for ArcAstGuard<S, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        self.lease.get()
    }
}

impl<S: AbstractState, T: ?Sized> DerefMut for ArcAstGuard<S, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.lease.get_mut()
    }
}

impl<S: AbstractState, T: ?Sized + fmt::Debug> fmt::Debug for ArcAstGuard<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArcAstGuard")
            .field("entered_in", &self.entered_in())
            .field("data", &&**self)
            .finish()
    }
}
