//! [`AstMutex`]: a mutex entered with a set of abstract states.

use core::fmt;
use std::time::{Duration, Instant};

// The owned guards' handle is the user's std `Arc` in every build.
use std::sync::Arc as StdArc;

use sync_core::sync::atomic::{AtomicU32, Ordering};
use sync_core::sync::cell::UnsafeCell;

use crate::config::Config;
#[cfg(doc)]
use crate::config::WakeMode;
use crate::future::{EnterArcAsync, EnterAsync};
use crate::guard::{ArcAstGuard, AstGuard};
use crate::raw::{LOCKED, STATE_BITS, UNRESOLVED};
use crate::state::{AbstractState, StateSet};
use crate::waiters::Waiters;
use crate::watchers::Watchers;

/// A mutex whose entry waits for the guarded object to be in one of a *set*
/// of abstract states, and whose exit names the state it leaves it in.
///
/// `enter(set)` returns once the lock is free and its state is in `set`;
/// while the lock is held the state is "null", and [`AstGuard::exit`] names
/// the next state and wakes only a waiter whose set contains it. One lock
/// replaces a mutex, its condition variables and their predicates. Threads
/// ([`enter`](Self::enter)) and async tasks ([`enter_async`](Self::enter_async))
/// wait in the same queues.
///
/// # Examples
///
/// A bounded buffer:
///
/// ```
/// use std::collections::VecDeque;
/// use std::sync::Arc;
/// use ast_mutex::AstMutex;
///
/// ast_mutex::states! { enum Buf { Empty, Mid, Full } }
/// const CAP: usize = 4;
///
/// let buf = Arc::new(AstMutex::new(Buf::Empty, VecDeque::with_capacity(CAP)));
/// let putter = {
///     let buf = Arc::clone(&buf);
///     std::thread::spawn(move || {
///         for i in 0..100 {
///             let mut g = buf.enter(Buf::Empty | Buf::Mid);
///             g.push_back(i);
///             let next = if g.len() == CAP { Buf::Full } else { Buf::Mid };
///             g.exit(next);
///         }
///     })
/// };
/// for i in 0..100 {
///     let mut g = buf.enter(Buf::Mid | Buf::Full);
///     assert_eq!(g.pop_front(), Some(i));
///     let next = if g.is_empty() { Buf::Empty } else { Buf::Mid };
///     g.exit(next);
/// }
/// putter.join().unwrap();
/// assert_eq!(buf.state(), Some(Buf::Empty));
/// ```
///
/// # Fairness
///
/// The waiters that accept a state are served in the order they arrived,
/// whatever their entry sets: an exit to `s` serves the longest-waiting
/// waiter whose set contains `s` (its *first in line*), so every waiter of
/// `s` is reached after at most as many exits to `s` as there are waiters
/// of `s` ahead of it.
///
/// The bound is counted in exits. An exit frees the lock before it serves
/// its first in line (unless a handoff is due); when a running thread
/// takes the lock in between, or, in [`WakeMode::Handoff`] and under
/// [`Config::watchers`](crate::Config::watchers), while another waiter
/// that accepts the state is watching the lock word (running), the exit
/// leaves a parked first in line parked for the running thread and counts
/// the exit against it: at most 256 exits do so, and the 257th serves it
/// as below. In [`WakeMode::Handoff`] an exit hands the lock to its first
/// in line once that waiter has been woken and has run (an exit wakes a
/// parked first in line that was not woken yet, and releases the lock).
/// In [`WakeMode::Compete`] (and
/// [`WakeMode::Broadcast`]) an exit wakes its first in line to compete, and
/// the woken waiter can lose the lock to a thread that takes it first
/// ([`try_enter`](Self::try_enter), or a thread arriving). A waiter keeps
/// its place while it is woken, including while it waits for a CPU or for
/// its executor to poll it: an exit to one of its states during that time
/// is counted against it, as one that passed it (such exits do not take
/// the mutex's internal table lock but one in 32, which counts the 32, so
/// up to 31 of them may not be counted yet when it runs). **Once 32 exits have
/// passed a waiter that is first in line, the next exit that serves it
/// hands it the lock if its thread is running or parked again; if it was
/// woken and has not run yet, one of the 32 exits after it has waited
/// 100 ms more does (exits read the clock every 32 passes: the first read
/// since its wake-up starts the 100 ms), and so does the
/// 1,048,576th exit that passes it.** Until then exits pass a woken waiter
/// that has not run yet without holding the lock for it: the lock would
/// idle until the scheduler runs it, which takes up to a scheduling round
/// when threads outnumber cores (tens of milliseconds with a few dozen
/// busy threads per core), and the threads that find it held then park,
/// each to be woken in turn. In Compete mode, a waiter that queues while
/// the lock is free in one of its states wakes the next thread waiting for
/// that state (one at a time, while fewer than four woken ones have not
/// run yet), so that the lock does not idle either. So however loaded the
/// machine and however often other threads barge in, a waiter that is
/// first in line enters, once 32 exits to its states have passed it (in
/// Handoff mode, once one has woken it), at the first exit to its states
/// after it runs that serves it (an exit that finds the lock taken before
/// it serves may not: the next one does), or within 32 exits once it has
/// waited 100 ms more for a CPU.
///
/// A thread that watches the lock word before it queues (as its
/// [`Config::wait`](crate::Config::wait) policy says) is not in line yet:
/// it enters if it finds the lock free in one of its states. **However its
/// policy watches (spins, yields, or never parks), a thread that has
/// watched for 2 ms past its spins (or, with long spins, past its 64th
/// read of the word) in one entry queues and waits to be served**, and the
/// bounds above apply to it from then on; the 2 ms count across its
/// wake-ups, so once they have passed, a woken thread looks once and
/// queues again. Blocking and timed entries alike (a timed one waits in
/// its queue until its deadline), so threads that exit and re-enter on
/// their fast path cannot keep a watching thread out for longer than that.
///
/// A task woken to compete keeps its place until it is polled or dropped:
/// while it is not polled, a waiter that queues may wake the next thread
/// behind it (Compete mode), and once 32 exits have passed it and 100 ms
/// more have passed, the lock is held for it. Keep polling an
/// [`EnterAsync`] you
/// created, or drop it (which passes the wake-up or the lock on).
///
/// # Panics
///
/// There is no poisoning: a guard dropped while unwinding leaves the state
/// named by [`AstGuard::on_unwind`], by default the state it entered in, and
/// wakes a waiter that accepts it.
///
/// A task's waker is user code, and may panic. It never runs while the
/// mutex's internal table is locked: an exit (or a dropped [`EnterAsync`] that
/// passes a wake-up or a lock on) first completes its state change and
/// wakes every task it owes a wake-up, then the first waker panic goes on
/// to its caller; if the thread is already unwinding (a guard or a future
/// dropped during a panic), that panic is dropped rather than aborting the
/// process. A thread-local destructor is not unwinding, and `std` gives
/// no way to tell that one is running: a guard exited or dropped there (or
/// an [`EnterAsync`] dropped there) that wakes a task whose waker panics
/// passes that panic on out of the destructor, and the process aborts, as
/// for any panic out of a thread-local destructor (the exit is complete by
/// then). A timed waiter that gives up (see
/// [`try_enter_for`](Self::try_enter_for)) may owe the next waiter a
/// wake-up; it makes it, or, if the table is locked, leaves it to the
/// thread that holds the table, which makes it once it has unlocked the
/// table, in the middle of its own entry, exit or give-up. Either way the
/// wake-up is not the operation of the thread that makes it, and a panic
/// of its waker is dropped: a timed entry that gives up returns `None`.
///
/// # Progress
///
/// Memory and the work of an exit grow with the waiters present (the number
/// of distinct entry sets among them), never with the history of the mutex:
/// a waiter that times out or is cancelled leaves no trace, and leaves in
/// constant time wherever it is in line. (One exception: the waiters'
/// table keeps room up to the newest place in use, so the memory of a
/// crowd that came and left is kept while a waiter that queued after it
/// stays, and given back when that waiter leaves.)
pub struct AstMutex<S, T: ?Sized> {
    /// The lock word: the state's index (bits 0-5), `LOCKED` (bit 6) and
    /// `UNRESOLVED` (bit 7).
    ///
    /// | word         | meaning                                      |
    /// |--------------|----------------------------------------------|
    /// | `UNRESOLVED` | free in `initial` (before the first access)  |
    /// | `s`          | free in state `s`                            |
    /// | `LOCKED | s` | held, entered in state `s`                   |
    ///
    /// `enter` sets `LOCKED` (CAS from an enterable word); `exit` swaps in
    /// the next state (one RMW, or a store under the waiter table's lock
    /// when it wakes a waiter); a handoff stores `LOCKED | next` for the
    /// woken waiter. Who waits, and for which states, is in the waiter
    /// table and its published summary, not here.
    pub(crate) word: AtomicU32,
    pub(crate) waiters: Waiters,
    /// The watcher slots of concurrency restriction.
    pub(crate) watchers: Watchers,
    pub(crate) config: Config,
    /// The state `UNRESOLVED` stands for.
    pub(crate) initial: S,
    pub(crate) data: UnsafeCell<T>,
}

// SAFETY: the mutex hands `&mut T` to one thread at a time, and `T` moves
// with the mutex, so `T: Send` suffices for the data (as for std's Mutex);
// the initial state is moved with it and read (copied) by any thread.
unsafe impl<S: Send, T: ?Sized + Send> Send for AstMutex<S, T> {}
// SAFETY: as above; threads sharing the mutex copy `initial` through `&S`.
unsafe impl<S: Sync, T: ?Sized + Send> Sync for AstMutex<S, T> {}

impl<S: AbstractState, T> AstMutex<S, T> {
    sync_core::const_unless_loom! {
        /// A free mutex in state `initial`, guarding `data`. A `const fn`:
        /// a mutex can be a `static`.
        ///
        /// # Panics
        ///
        /// Not here, but at the first operation, if `initial.index()` is not
        /// below `S::COUNT` (a broken hand-written [`AbstractState`]).
        ///
        /// # Examples
        ///
        /// ```
        /// use ast_mutex::AstMutex;
        /// ast_mutex::states! { enum Phase { Setup, Running } }
        ///
        /// static PHASE: AstMutex<Phase, u32> = AstMutex::new(Phase::Setup, 0);
        /// *PHASE.enter(Phase::Setup) += 1;
        /// assert_eq!(PHASE.state(), Some(Phase::Setup));
        /// ```
        pub fn new(initial: S, data: T) -> Self {
            Self::with_config(initial, data, Config::new())
        }
    }

    sync_core::const_unless_loom! {
        /// A free mutex in state `initial`, guarding `data`, waiting and
        /// waking as `config` says.
        ///
        /// # Panics
        ///
        /// As [`new`](Self::new).
        ///
        /// # Examples
        ///
        /// ```
        /// use ast_mutex::{AstMutex, Config};
        /// ast_mutex::states! { enum Phase { Setup, Running } }
        /// let m = AstMutex::with_config(Phase::Setup, (), Config::new().spins(0));
        /// ```
        pub fn with_config(initial: S, data: T, config: Config) -> Self {
            Self {
                word: AtomicU32::new(UNRESOLVED),
                waiters: Waiters::new(),
                watchers: Watchers::new(),
                config,
                initial,
                data: UnsafeCell::new(data),
            }
        }
    }

    /// Consumes the mutex and returns its data.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum One { Only } }
    /// let m = ast_mutex::AstMutex::new(One::Only, vec![1]);
    /// assert_eq!(m.into_inner(), [1]);
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<S: AbstractState, T: Default> Default for AstMutex<S, T> {
    /// A free mutex in the first state of `S` (numbered 0), guarding
    /// `T::default()`.
    fn default() -> Self {
        Self::new(S::from_index(0), T::default())
    }
}

impl<S: AbstractState, T> From<T> for AstMutex<S, T> {
    /// A free mutex in the first state of `S` (numbered 0), guarding `data`.
    fn from(data: T) -> Self {
        Self::new(S::from_index(0), data)
    }
}

pub(crate) fn state_index<S: AbstractState>(s: S) -> u32 {
    let i = s.index();
    assert!(
        i < S::COUNT && i < 64,
        "{s:?}.index() = {i} is not below {}::COUNT = {} (at most 64)",
        core::any::type_name::<S>(),
        S::COUNT
    );
    i
}

pub(crate) fn entry_mask<S: AbstractState>(set: StateSet<S>, call: &str) -> u64 {
    assert!(
        !set.is_empty(),
        "AstMutex::{call} with an empty state set: no state can ever admit it"
    );
    set.bits()
}

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// The configuration the mutex was made with.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum One { Only } }
    /// let m = ast_mutex::AstMutex::new(One::Only, ());
    /// assert_eq!(m.config(), ast_mutex::Config::new());
    /// ```
    pub fn config(&self) -> Config {
        self.config
    }

    /// Blocks until the lock is free in a state of `set`, and takes it.
    ///
    /// # Panics
    ///
    /// If `set` is empty: no state could ever admit the caller.
    ///
    /// # Deadlocks
    ///
    /// It blocks the calling thread. Called from a task on a single-threaded
    /// executor while another task of that executor holds the lock (or is
    /// the one that must bring the state into `set`), it blocks that
    /// executor for ever: await [`enter_async`](Self::enter_async) there.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = ast_mutex::AstMutex::new(Light::Green, 0);
    /// let mut g = m.enter(Light::Green);
    /// *g += 1;
    /// g.exit(Light::Red);
    /// assert_eq!(m.state(), Some(Light::Red));
    /// ```
    #[inline]
    #[doc(alias = "lock")]
    pub fn enter(&self, set: impl Into<StateSet<S>>) -> AstGuard<'_, S, T> {
        let mask = entry_mask(set.into(), "enter");
        self.enter_mask(mask)
    }

    #[inline]
    pub(crate) fn enter_mask(&self, mask: u64) -> AstGuard<'_, S, T> {
        AstGuard::new(self, self.lock_forever(mask))
    }

    /// Takes the lock for `mask`, waiting as long as it takes; returns the
    /// state entered in.
    #[inline]
    fn lock_forever(&self, mask: u64) -> u32 {
        self.lock_until(mask, None)
            .expect("a wait without a deadline ends holding the lock")
    }

    /// Takes the lock for `mask`, giving up at `deadline`; returns the state
    /// entered in.
    #[inline]
    fn lock_until(&self, mask: u64, deadline: Option<Instant>) -> Option<u32> {
        match self.try_lock_in(mask) {
            Some(s) => Some(s),
            None => self.lock_slow(mask, deadline),
        }
    }

    /// Takes the lock if it is free in a state of `set`; never blocks.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = ast_mutex::AstMutex::new(Light::Red, ());
    /// assert!(m.try_enter(Light::Green).is_none());
    /// let g = m.try_enter(Light::Red).unwrap();
    /// assert!(m.try_enter(Light::Red).is_none(), "held");
    /// drop(g); // restores Red
    /// assert!(m.try_enter(Light::Red).is_some());
    /// ```
    #[inline]
    #[doc(alias = "try_lock")]
    pub fn try_enter(&self, set: impl Into<StateSet<S>>) -> Option<AstGuard<'_, S, T>> {
        let mask = entry_mask(set.into(), "try_enter");
        self.try_lock_in(mask).map(|s| AstGuard::new(self, s))
    }

    /// Like [`enter`](Self::enter), giving up after `timeout`.
    ///
    /// The deadline is checked while the waiter watches the state (between
    /// spins and after every yield) and after every wake-up, and on
    /// saturated CPUs the waiter spins only briefly before it parks with the
    /// deadline (a spinning thread can be preempted for a scheduling round),
    /// so the call returns within `timeout` plus about one scheduling
    /// quantum whatever the [`Config`]'s spins and yields and wake mode.
    ///
    /// To queue, and to leave the queue once the deadline has passed, the
    /// call takes the mutex's internal waiter-table lock (a spin lock held
    /// for a few instructions), but never waits for it past the deadline
    /// (to leave, past about 0.1 ms): a thread preempted while it holds
    /// that lock can be kept from running for a scheduling round when more
    /// threads are runnable than there are cores. Not queued by then, the
    /// call returns `None`. Queued or woken, it leaves its place to be
    /// removed by the table lock's holder, and so does what it owes on
    /// leaving: a waiter that an exit woke to compete, or one that watched
    /// the word with a watcher slot ([`WakeMode::Handoff`] with a policy
    /// that spins or yields, or [`Config::watchers`]), was counted on by
    /// exits that woke no one else, and the holder serves the free lock's
    /// state in its place once it has unlocked the table. A lock handed to
    /// the waiter before it left is its own: the call then returns the
    /// guard.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = ast_mutex::AstMutex::new(Light::Red, ());
    /// assert!(m.try_enter_for(Light::Green, Duration::from_millis(5)).is_none());
    /// ```
    #[doc(alias = "enter_for", alias = "try_lock_for")]
    pub fn try_enter_for(
        &self,
        set: impl Into<StateSet<S>>,
        timeout: Duration,
    ) -> Option<AstGuard<'_, S, T>> {
        let mask = entry_mask(set.into(), "try_enter_for");
        let deadline = Instant::now().checked_add(timeout);
        self.lock_until(mask, deadline)
            .map(|s| AstGuard::new(self, s))
    }

    /// Like [`enter`](Self::enter), giving up at `deadline`.
    ///
    /// A waiter handed the lock by an exit returns it even if the deadline
    /// passed meanwhile. The deadline is honoured as in
    /// [`try_enter_for`](Self::try_enter_for).
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = ast_mutex::AstMutex::new(Light::Red, ());
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert!(m.try_enter_until(Light::Green, soon).is_none());
    /// assert!(m.try_enter_until(Light::Red, soon).is_some());
    /// ```
    #[doc(alias = "enter_until", alias = "try_lock_until")]
    pub fn try_enter_until(
        &self,
        set: impl Into<StateSet<S>>,
        deadline: Instant,
    ) -> Option<AstGuard<'_, S, T>> {
        let mask = entry_mask(set.into(), "try_enter_until");
        self.lock_until(mask, Some(deadline))
            .map(|s| AstGuard::new(self, s))
    }

    /// A future that resolves to a guard once the lock is free in a state
    /// of `set`: [`enter`](Self::enter) for async tasks, on any executor.
    ///
    /// The task waits in the same queues as threads, in arrival order, and
    /// does not park or spin on the lock while it waits. Queueing and
    /// leaving a queue take the mutex's short internal lock on its table of
    /// waiters (a few instructions under it, no user code); a thread that is
    /// preempted while it holds that lock delays the poll until it runs.
    ///
    /// # Fairness
    ///
    /// As for threads (see [`AstMutex`]'s `# Fairness`). A future woken to
    /// compete keeps its place in line until it is polled or dropped; while
    /// it is not polled, a waiter that queues may wake the next thread
    /// behind it, and once 32 exits to its states have passed it and
    /// 100 ms more have passed, the lock is held for it: keep
    /// polling an
    /// `EnterAsync` you created, as with tokio's mutex, or drop it (which
    /// passes the wake-up or the lock on).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point loses nothing: a waiting future
    /// leaves its queue (and frees its node and waker at once); a future
    /// that was already handed the lock by an exit passes it on (the lock
    /// is released in the state it was handed in, waking the next waiter
    /// for it); a future woken to compete passes the wake-up on.
    ///
    /// # Deadlocks
    ///
    /// The task's waker is called by the exit (or the dropped future) that
    /// serves the task, and that exit may have handed the task the lock
    /// already (in [`WakeMode::Handoff`], or once a handoff is due: see
    /// `# Fairness`). A waker that waits for this mutex before it wakes
    /// the task waits for a lock held for a task it has not woken: for
    /// ever with [`enter`](Self::enter), until its deadline with a timed
    /// entry. Wake the task first.
    ///
    /// # Panics
    ///
    /// If `set` is empty (when called, not when polled).
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum Buf { Empty, Full } }
    /// let m = ast_mutex::AstMutex::new(Buf::Empty, None);
    /// futures::executor::block_on(async {
    ///     let mut g = m.enter_async(Buf::Empty).await;
    ///     *g = Some(7);
    ///     g.exit(Buf::Full);
    ///     let mut g = m.enter_async(Buf::Full).await;
    ///     assert_eq!(g.take(), Some(7));
    ///     g.exit(Buf::Empty);
    /// });
    /// ```
    pub fn enter_async(&self, set: impl Into<StateSet<S>>) -> EnterAsync<'_, S, T> {
        let mask = entry_mask(set.into(), "enter_async");
        EnterAsync::new(self, mask)
    }

    /// Whether the lock is held (a snapshot).
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum One { Only } }
    /// let m = ast_mutex::AstMutex::new(One::Only, ());
    /// assert!(!m.is_locked());
    /// let g = m.enter(One::Only);
    /// assert!(m.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.word.load(Ordering::Relaxed) & LOCKED != 0
    }

    /// The current state, or `None` while the lock is held.
    ///
    /// A snapshot: another thread may enter as soon as it is read.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum One { Only } }
    /// let m = ast_mutex::AstMutex::new(One::Only, ());
    /// assert_eq!(m.state(), Some(One::Only));
    /// ```
    pub fn state(&self) -> Option<S> {
        // Acquire: pairs with the Release of the exit that stored the state.
        let mut w = self.word.load(Ordering::Acquire);
        if w & UNRESOLVED != 0 {
            w = self.resolve();
        }
        (w & LOCKED == 0).then(|| S::from_index(w & STATE_BITS))
    }

    /// The data, through exclusive access to the mutex (no locking).
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum One { Only } }
    /// let mut m = ast_mutex::AstMutex::new(One::Only, 1);
    /// *m.get_mut() += 1;
    /// assert_eq!(m.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        self.data.with_mut(|p| unsafe { &mut *p })
    }

    /// Test hook, not part of the API: how many distinct entry sets have
    /// waiters now, and how many waiters (queued or woken) have a node.
    #[doc(hidden)]
    pub fn __test_waiter_table_size(&self) -> (usize, usize) {
        let t = self.table();
        (t.groups(), t.waiters())
    }

    pub(crate) fn data(&self) -> &UnsafeCell<T> {
        &self.data
    }
}

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// Blocks until the lock is free in a state of `set`, and takes it,
    /// returning a guard that owns a reference count of the mutex (it has
    /// no lifetime: it can be moved into a thread or task).
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Deadlocks
    ///
    /// As [`enter`](Self::enter): in a task on a single-threaded executor,
    /// await [`enter_arc_async`](Self::enter_arc_async) instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, 0));
    /// let mut g = m.enter_arc(Light::Red);
    /// std::thread::spawn(move || {
    ///     *g += 1;
    ///     g.exit(Light::Green);
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(*m.enter(Light::Green), 1);
    /// ```
    #[doc(alias = "lock_arc")]
    pub fn enter_arc(self: &StdArc<Self>, set: impl Into<StateSet<S>>) -> ArcAstGuard<S, T> {
        let mask = entry_mask(set.into(), "enter_arc");
        self.enter_arc_mask(mask)
    }

    pub(crate) fn enter_arc_mask(self: &StdArc<Self>, mask: u64) -> ArcAstGuard<S, T> {
        ArcAstGuard::new(StdArc::clone(self), self.lock_forever(mask))
    }

    /// [`try_enter`](Self::try_enter) with an owned guard.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, ()));
    /// assert!(m.try_enter_arc(Light::Green).is_none());
    /// assert!(m.try_enter_arc(Light::Red).is_some());
    /// ```
    #[doc(alias = "try_lock_arc")]
    pub fn try_enter_arc(
        self: &StdArc<Self>,
        set: impl Into<StateSet<S>>,
    ) -> Option<ArcAstGuard<S, T>> {
        let mask = entry_mask(set.into(), "try_enter_arc");
        self.try_lock_in(mask)
            .map(|s| ArcAstGuard::new(StdArc::clone(self), s))
    }

    /// [`try_enter_for`](Self::try_enter_for) with an owned guard.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, ()));
    /// assert!(m.try_enter_arc_for(Light::Green, Duration::from_millis(5)).is_none());
    /// let g = m.try_enter_arc_for(Light::Red, Duration::from_millis(5)).unwrap();
    /// std::thread::spawn(move || g.exit(Light::Green)).join().unwrap();
    /// assert_eq!(m.state(), Some(Light::Green));
    /// ```
    #[doc(alias = "try_lock_arc_for")]
    pub fn try_enter_arc_for(
        self: &StdArc<Self>,
        set: impl Into<StateSet<S>>,
        timeout: Duration,
    ) -> Option<ArcAstGuard<S, T>> {
        let mask = entry_mask(set.into(), "try_enter_arc_for");
        let deadline = Instant::now().checked_add(timeout);
        self.lock_until(mask, deadline)
            .map(|s| ArcAstGuard::new(StdArc::clone(self), s))
    }

    /// [`try_enter_until`](Self::try_enter_until) with an owned guard.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, ()));
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert!(m.try_enter_arc_until(Light::Green, soon).is_none());
    /// assert!(m.try_enter_arc_until(Light::Red, soon).is_some());
    /// ```
    #[doc(alias = "try_lock_arc_until")]
    pub fn try_enter_arc_until(
        self: &StdArc<Self>,
        set: impl Into<StateSet<S>>,
        deadline: Instant,
    ) -> Option<ArcAstGuard<S, T>> {
        let mask = entry_mask(set.into(), "try_enter_arc_until");
        self.lock_until(mask, Some(deadline))
            .map(|s| ArcAstGuard::new(StdArc::clone(self), s))
    }

    /// [`enter_async`](Self::enter_async) with an owned guard: the future
    /// and its guard are `'static` (when `S` and `T` are), so a spawned task
    /// can hold them.
    ///
    /// # Cancel safety
    ///
    /// As [`enter_async`](Self::enter_async): dropping the future never
    /// loses a handed-over lock or a wake-up.
    ///
    /// # Deadlocks
    ///
    /// As [`enter_async`](Self::enter_async): a waker must wake its task
    /// before it waits for this mutex.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// ast_mutex::states! { enum Light { Red, Green } }
    /// let m = Arc::new(ast_mutex::AstMutex::new(Light::Red, 0));
    /// let wait = m.enter_arc_async(Light::Green);
    /// m.enter(Light::Red).exit(Light::Green);
    /// let g = futures::executor::block_on(wait);
    /// assert_eq!(g.entered_in(), Light::Green);
    /// ```
    #[doc(alias = "lock_owned", alias = "lock_arc_async")]
    pub fn enter_arc_async(
        self: &StdArc<Self>,
        set: impl Into<StateSet<S>>,
    ) -> EnterArcAsync<S, T> {
        let mask = entry_mask(set.into(), "enter_arc_async");
        EnterArcAsync::new(StdArc::clone(self), mask)
    }
}

impl<S: AbstractState, T: ?Sized + fmt::Debug> fmt::Debug for AstMutex<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("AstMutex");
        let Some(s) = self.try_lock_in(StateSet::<S>::ALL.bits()) else {
            d.field("state", &format_args!("<locked>"));
            return d.finish_non_exhaustive();
        };
        let g = AstGuard::new(self, s);
        d.field("state", &S::from_index(s)).field("data", &&*g);
        let r = d.finish_non_exhaustive();
        // The exit may wake a waiter whose waker panics: a wake-up owed to
        // another task, not to this formatting (rule 4 of the panic
        // policy), so its panic is dropped.
        let _ = sync_core::unwind::catch_and_discard(move || drop(g));
        r
    }
}
