//! [`AstMutex`]: a mutex entered with a set of abstract states.

use core::fmt;
use core::task::{Context, Poll};
use std::time::{Duration, Instant};

// The owned guards' handle is the user's std `Arc` in every build.
use std::sync::Arc as StdArc;

use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicU32, Ordering};
use sync_core::sync::cell::UnsafeCell;
use sync_core::unwind::Panics;
use sync_core::wait::{Next, WaitPolicy, Watch};
use sync_core::waiter::{Token, Waiter, Wakeup};

use crate::future::{Enter, EnterArc, Wait};
use crate::guard::{ArcAstGuard, AstGuard};
use crate::state::{AbstractState, StateSet};
use crate::waiters::{Handle, Slot, Table, Waiters};
use crate::watchers::{MAX_WATCHERS, Watchers};

/// Bits 0-5 of the lock word: the abstract state's index. While the lock is
/// held they keep the state the holder entered in.
pub(crate) const STATE_BITS: u32 = 0x3f;
/// Bit 6: the lock is held; the abstract state is "null" (paper, 2.1 step 3).
const LOCKED: u32 = 1 << 6;
/// Bit 7: free in the state the constructor was given, not yet written as
/// its index (a `const fn` cannot call [`AbstractState::index`]). The first
/// operation that reads it writes the index instead ([`AstMutex::resolve`]);
/// it is never set again.
const UNRESOLVED: u32 = 1 << 7;

/// The waiter token of a waiter woken to compete for the lock.
const TOKEN_WAKE: Token = 1;
/// The waiter token of a waiter handed the lock: `TOKEN_HANDOFF | state`.
const TOKEN_HANDOFF: Token = 1 << 8;

/// A waiter that this many exits served without the lock (woken to compete,
/// or passed while it was woken and had not taken the lock yet) is handed
/// the lock by the next exit that serves it, in every wake mode.
///
/// Chosen by measurement (`ast/bb-large`, `ast/wm-large` and the
/// `ast/spins/*`, `ast/yields/*` sweeps of `cargo xtask report`): on an
/// oversubscribed machine a woken waiter often waits for a CPU while the
/// running threads pass it, and a lock handed to it waits with it; at 2
/// those handoffs made the oversubscribed buffers up to twice as slow, at
/// 32 they cost nothing measurable. Loom models the same protocol with 2,
/// to reach the handoff in few steps.
const HANDOFF_AFTER_PASSES: u32 = if cfg!(loom) { 2 } else { 32 };

/// How many times a waiter reads the lock word, with a spin hint between
/// reads, before it starts yielding, by default.
///
/// Chosen by measurement (the `ast/spins/*` and `ast/yields/*` sweeps of
/// `cargo xtask report`): on a 2-core virtual machine where a wake-up costs
/// ~30 µs, busy spinning while other threads wait for the core slowed the
/// oversubscribed buffers down, and yielding sped them up several times.
pub const DEFAULT_SPINS: u32 = 16;

/// How many times a waiter yields its core (re-reading the lock word after
/// each yield) before it parks, by default. A yield hands the core to a
/// thread that may be about to change the state, and costs a system call
/// when no other thread is runnable; see [`DEFAULT_SPINS`].
pub const DEFAULT_YIELDS: u32 = 64;

/// How many exits may leave a parked first in line parked because a
/// watcher that accepts their state is running (concurrency restriction);
/// the next exit that serves it wakes it, and from then on it counts passes
/// as any woken waiter. Loom models the same protocol with 1.
const ROTATE_AFTER_SKIPS: u32 = if cfg!(loom) { 1 } else { 256 };

#[inline]
fn enterable(word: u32, mask: u64) -> bool {
    word & (LOCKED | UNRESOLVED) == 0 && (mask >> (word & STATE_BITS)) & 1 != 0
}

/// Whether `deadline` has passed. Always `false` under loom, whose models
/// must not depend on the clock: there a timeout is the nondeterministic
/// early return of a timed park.
#[inline]
fn past(deadline: Option<Instant>) -> bool {
    !cfg!(loom) && deadline.is_some_and(|d| Instant::now() >= d)
}

/// What an exit does when a waiter accepts the next state.
///
/// # Examples
///
/// ```
/// use ast_mutex::{AstMutex, Config, WakeMode};
/// ast_mutex::states! { enum Gate { Closed, Open } }
///
/// // Opening the gate lets every waiter for `Open` through, one at a time.
/// let gate = AstMutex::with_config(Gate::Closed, (), Config::new().wake_mode(WakeMode::Broadcast));
/// gate.enter(Gate::Closed).exit(Gate::Open);
/// assert_eq!(gate.state(), Some(Gate::Open));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeMode {
    /// Release the lock, then wake the waiter that accepts the new state
    /// and has waited longest; it competes with threads arriving meanwhile.
    /// If it loses, it watches the state again and waits again, keeping its
    /// place in line. It is still first in line while it is woken but not
    /// yet running: exits to its states meanwhile count against it rather
    /// than wake someone else, and once 32 exits have passed it the next
    /// one hands it the lock (see [`AstMutex`]'s `# Fairness`).
    ///
    /// The default: a wake-up costs tens of microseconds on a virtual
    /// machine, and letting running threads take the lock meanwhile keeps
    /// the lock busy.
    #[default]
    Compete,
    /// Hand the lock to the woken waiter, which returns from `enter` holding
    /// it in the new state (the paper's semantics). Every transfer to a
    /// waiting thread waits for its wake-up. When a waiter queues while an
    /// exit is already releasing, the exit wakes it with the lock if the
    /// state is still free and unchanged; if another thread entered first,
    /// the woken waiter competes.
    Handoff,
    /// Release the lock and wake *every* waiter that accepts the new state;
    /// they compete, and those that find the state gone wait again. For a
    /// state that is a gate (`Open`, `Shutdown`) that every waiter of it
    /// should pass, where the paper's one-waiter wake would leave the
    /// others asleep until the next exit to that state.
    Broadcast,
}

/// How an [`AstMutex`] waits and wakes.
///
/// # Examples
///
/// ```
/// use ast_mutex::{AstMutex, Config, WakeMode};
/// ast_mutex::states! { enum Door { Open, Closed } }
///
/// let config = Config::new().wake_mode(WakeMode::Handoff).spins(0).yields(8);
/// let door = AstMutex::with_config(Door::Closed, (), config);
/// assert_eq!(door.config(), config);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    wake_mode: WakeMode,
    /// How a waiter watches the word before it waits in the table.
    wait: WaitPolicy,
    /// Concurrency restriction: at most this many threads watch the word
    /// at a time; 0: no restriction.
    watchers: u8,
}

impl Config {
    /// [`WakeMode::Compete`], [`DEFAULT_SPINS`] and [`DEFAULT_YIELDS`].
    ///
    /// # Examples
    ///
    /// ```
    /// let c = ast_mutex::Config::new();
    /// assert_eq!(c, ast_mutex::Config::default());
    /// ```
    pub const fn new() -> Self {
        Self {
            wake_mode: WakeMode::Compete,
            wait: WaitPolicy::new()
                .spins(DEFAULT_SPINS)
                .yields(DEFAULT_YIELDS)
                .backoff(false),
            watchers: 0,
        }
    }

    /// What an exit does for a waiter that accepts the next state.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = ast_mutex::Config::new().wake_mode(ast_mutex::WakeMode::Handoff);
    /// ```
    pub const fn wake_mode(mut self, mode: WakeMode) -> Self {
        self.wake_mode = mode;
        self
    }

    /// How many times a waiter reads the lock word, with a spin hint in
    /// between, before it yields. A timed wait checks its deadline while it
    /// spins, so any value is safe with [`AstMutex::enter_for`].
    ///
    /// # Examples
    ///
    /// ```
    /// let c = ast_mutex::Config::new().spins(0);
    /// ```
    pub const fn spins(mut self, spins: u32) -> Self {
        self.wait = self.wait.spins(spins);
        self
    }

    /// How many times a waiter yields its core, reading the lock word after
    /// each yield, before it waits to be woken. With `spins(0)`, `yields(0)`
    /// waits at once. A timed wait checks its deadline after every yield.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = ast_mutex::Config::new().spins(0).yields(0); // wait at once
    /// ```
    pub const fn yields(mut self, yields: u32) -> Self {
        self.wait = self.wait.yields(yields);
        self
    }

    /// Sets the whole watch from the family's waiting vocabulary (spins,
    /// back-off, yields, park, watch timeout), so that one policy, such as
    /// an adaptive lock's, can drive an `AstMutex` too. The default is
    /// [`DEFAULT_SPINS`] spins without back-off and [`DEFAULT_YIELDS`]
    /// yields, then park. A policy that never parks
    /// ([`WaitPolicy::park`]`(false)`) makes a thread watch the word until
    /// it enters (or its deadline passes) instead of waiting in the table;
    /// a task always registers its waker after the watch.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::WaitPolicy;
    /// let c = ast_mutex::Config::new().wait(WaitPolicy::spin_then_block(10));
    /// assert_eq!(c.wait_policy(), WaitPolicy::spin_then_block(10));
    /// assert_eq!(ast_mutex::Config::new().spins(10).yields(0), c);
    /// ```
    pub const fn wait(mut self, policy: WaitPolicy) -> Self {
        self.wait = policy;
        self
    }

    /// Concurrency restriction in the entry-set queues: at most `n`
    /// threads of each entry set (and 4 in all) watch the lock word at a
    /// time, as the [`WaitPolicy`] says, before they park; a thread that
    /// arrives while `n` threads of its set watch (or 4 in all) parks in
    /// its queue at once. An exit whose first in line is parked while a
    /// watcher that accepts the new state is running leaves it parked, and
    /// the lock to the watcher. With more waiting threads than CPUs, only a
    /// few circulate and the rest sleep, so yields stay cheap and exits
    /// need not wake anyone while the watchers keep the lock busy.
    ///
    /// `0` (the default) turns it off: every waiter watches as the
    /// [`WaitPolicy`] says, and exits wake a waiter whenever one is parked.
    /// Only [`WakeMode::Compete`] leaves parked waiters parked for a
    /// watcher; the other modes only cap the watchers.
    ///
    /// # Fairness
    ///
    /// Parked waiters are rotated in: a parked first in line for a state is
    /// left parked by at most 256 exits to its states; the next one that
    /// serves it wakes it, and it then enters within 33 more (see
    /// [`AstMutex`]'s `# Fairness`): the 289th exit to its states at the
    /// latest hands it the lock.
    ///
    /// # Panics
    ///
    /// If `n` is above 4.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = ast_mutex::Config::new().watchers(1);
    /// assert_eq!(c.watcher_limit(), 1);
    /// ```
    pub const fn watchers(mut self, n: u32) -> Self {
        assert!(
            n as usize <= MAX_WATCHERS,
            "Config::watchers: at most 4 watchers"
        );
        self.watchers = n as u8;
        self
    }

    /// The cap on watching threads set by [`watchers`](Self::watchers);
    /// 0 if there is none.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(ast_mutex::Config::new().watchers(2).watcher_limit(), 2);
    /// ```
    pub const fn watcher_limit(&self) -> u32 {
        self.watchers as u32
    }

    /// The watch, as a [`WaitPolicy`].
    ///
    /// # Examples
    ///
    /// ```
    /// let p = ast_mutex::Config::new().wait_policy();
    /// assert_eq!((p.spin_count(), p.yield_count()), (ast_mutex::DEFAULT_SPINS, ast_mutex::DEFAULT_YIELDS));
    /// ```
    pub const fn wait_policy(&self) -> WaitPolicy {
        self.wait
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

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
/// The bound is counted in exits. In [`WakeMode::Handoff`] every exit hands
/// the lock to its first in line. In [`WakeMode::Compete`] (and
/// [`WakeMode::Broadcast`]) an exit wakes its first in line to compete, and
/// the woken waiter can lose the lock to a thread that takes it first
/// ([`try_enter`](Self::try_enter), or a thread arriving). A waiter keeps
/// its place while it is woken, including while it waits for a CPU or for
/// its executor to poll it: an exit to one of its states during that time
/// is counted against it, as one that passed it (and nobody else is woken
/// meanwhile: it is still first in line). **At most 32 exits for which a
/// waiter is first in line pass it; the 33rd hands it the lock**, whether
/// it is then sleeping, running, or woken and not yet running (it finds the
/// lock held for it). So however loaded the machine and however often other
/// threads barge in, a waiter that is first in line enters within 33 exits
/// to its states. (The bound is a compromise: each handoff to a waiter that
/// is not running idles the lock until it runs.)
///
/// A task woken to compete keeps its place until it is polled or dropped:
/// while it is not polled, the waiters behind it wait too, and after 32
/// exits the lock is held for it. Keep polling an [`Enter`] you created, or
/// drop it (which passes the wake-up or the lock on).
///
/// # Panics
///
/// There is no poisoning: a guard dropped while unwinding leaves the state
/// named by [`AstGuard::on_unwind`], by default the state it entered in, and
/// wakes a waiter that accepts it.
///
/// A task's waker is user code, and may panic. It never runs while the
/// mutex's internal table is locked: an exit (or a dropped [`Enter`] that
/// passes a wake-up or a lock on) first completes its state change and
/// wakes every task it owes a wake-up, then the first waker panic goes on
/// to its caller; if the thread is already unwinding (a guard or a future
/// dropped during a panic), that panic is dropped rather than aborting the
/// process.
///
/// # Progress
///
/// Memory and the work of an exit grow with the waiters present (the number
/// of distinct entry sets among them), never with the history of the mutex:
/// a waiter that times out or is cancelled leaves no trace, and leaves in
/// constant time wherever it is in line.
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
    word: AtomicU32,
    waiters: Waiters,
    /// The watcher slots of concurrency restriction.
    watchers: Watchers,
    config: Config,
    /// The state `UNRESOLVED` stands for.
    initial: S,
    data: UnsafeCell<T>,
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
    pub fn enter(&self, set: impl Into<StateSet<S>>) -> AstGuard<'_, S, T> {
        let mask = entry_mask(set.into(), "enter");
        self.enter_mask(mask)
    }

    #[inline]
    pub(crate) fn enter_mask(&self, mask: u64) -> AstGuard<'_, S, T> {
        let entered = match self.try_lock_in(mask) {
            Some(s) => s,
            None => self
                .lock_slow(mask, None)
                .expect("a wait without a deadline ends holding the lock"),
        };
        AstGuard::new(self, entered)
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
    pub fn try_enter(&self, set: impl Into<StateSet<S>>) -> Option<AstGuard<'_, S, T>> {
        let mask = entry_mask(set.into(), "try_enter");
        self.try_lock_in(mask).map(|s| AstGuard::new(self, s))
    }

    /// Like [`enter`](Self::enter), giving up after `timeout`.
    ///
    /// The deadline is checked while the waiter watches the state (between
    /// spins and after every yield) and after every wake-up, so the call
    /// returns within `timeout` plus about one scheduling quantum whatever
    /// the [`Config`].
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
    /// assert!(m.enter_for(Light::Green, Duration::from_millis(5)).is_none());
    /// ```
    pub fn enter_for(
        &self,
        set: impl Into<StateSet<S>>,
        timeout: Duration,
    ) -> Option<AstGuard<'_, S, T>> {
        let mask = entry_mask(set.into(), "enter_for");
        let deadline = Instant::now().checked_add(timeout);
        self.enter_mask_until(mask, deadline)
    }

    /// Like [`enter`](Self::enter), giving up at `deadline`.
    ///
    /// A waiter handed the lock by an exit returns it even if the deadline
    /// passed meanwhile. The deadline is honoured as in
    /// [`enter_for`](Self::enter_for).
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
    /// assert!(m.enter_until(Light::Green, soon).is_none());
    /// assert!(m.enter_until(Light::Red, soon).is_some());
    /// ```
    pub fn enter_until(
        &self,
        set: impl Into<StateSet<S>>,
        deadline: Instant,
    ) -> Option<AstGuard<'_, S, T>> {
        let mask = entry_mask(set.into(), "enter_until");
        self.enter_mask_until(mask, Some(deadline))
    }

    fn enter_mask_until(&self, mask: u64, deadline: Option<Instant>) -> Option<AstGuard<'_, S, T>> {
        let entered = match self.try_lock_in(mask) {
            Some(s) => s,
            None => self.lock_slow(mask, deadline)?,
        };
        Some(AstGuard::new(self, entered))
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
    /// compete keeps its place in line until it is polled or dropped, and
    /// after 32 exits to its states the lock is held for it: keep polling
    /// an `Enter` you created, as with tokio's mutex, or drop it (which
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
    pub fn enter_async(&self, set: impl Into<StateSet<S>>) -> Enter<'_, S, T> {
        let mask = entry_mask(set.into(), "enter_async");
        Enter::new(self, mask)
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

    /// How many distinct entry sets have waiters now, and how many waiters
    /// are queued: for tests of the reclamation promise.
    #[doc(hidden)]
    pub fn waiter_table_size(&self) -> (usize, usize) {
        let t = self.waiters.lock();
        (t.groups(), t.waiters())
    }

    pub(crate) fn data(&self) -> &UnsafeCell<T> {
        &self.data
    }

    /// Replaces `UNRESOLVED` by the index of `initial`; returns the word.
    #[cold]
    fn resolve(&self) -> u32 {
        let i = state_index(self.initial);
        // Relaxed: the two words mean the same state, and nothing is
        // published; the winner of a race writes what the loser would have.
        match self
            .word
            .compare_exchange(UNRESOLVED, i, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => i,
            Err(now) => now,
        }
    }

    /// Takes the lock if the word is enterable for `mask`; returns the
    /// state entered in.
    #[inline]
    pub(crate) fn try_lock_in(&self, mask: u64) -> Option<u32> {
        let mut w = self.word.load(Ordering::Relaxed);
        loop {
            if !enterable(w, mask) {
                if w & UNRESOLVED == 0 {
                    return None;
                }
                w = self.resolve();
                continue;
            }
            // Acquire: pairs with the Release of the exit that freed the word
            // (the swap in `unlock` or the store in `release`).
            match self.word.compare_exchange_weak(
                w,
                w | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(w & STATE_BITS),
                Err(now) => w = now,
            }
        }
    }

    /// Watches the word, then waits in the group of `mask` until entered,
    /// handed the lock, or past `deadline`.
    #[cold]
    fn lock_slow(&self, mask: u64, deadline: Option<Instant>) -> Option<u32> {
        let mut place = Place::default();
        // Woken to compete and not queued since: our node is woken, and a
        // give-up passes the wake on.
        let mut woken = false;
        let limit = self.config.watchers as usize;
        loop {
            // Concurrency restriction: a thread watches (as the policy
            // says) with a watcher slot, or when woken (it is first in line,
            // and exits count against it); any other parks after one look
            // at the word.
            let slot = if limit == 0 {
                None
            } else {
                self.watchers.claim(mask, limit)
            };
            let policy = if limit == 0 || slot.is_some() || place.node.is_some() {
                self.config.wait
            } else {
                WaitPolicy::block()
            };
            let entered = self.watch(mask, deadline, &mut place, policy);
            if let Some(i) = slot {
                self.watchers.give_back(i);
            }
            if entered.is_some() {
                return entered;
            }
            // Under loom, where time is not modelled, a timed waiter's timer
            // has fired by the time it was woken (as `Waiter::wait_until`
            // models it), or by the end of a watch with a watcher slot, so
            // the give-ups after a wake and after a watch are explored.
            if past(deadline) || (cfg!(loom) && deadline.is_some() && (woken || slot.is_some())) {
                let mut panics = Panics::new();
                // Handed the lock while we gave up: it is ours.
                let handed = self.abandon(&mut place, &mut panics);
                if handed.is_none() && slot.is_some() {
                    // An exit may have left its waiters parked for us.
                    self.wake_pass(&mut panics);
                }
                panics.resume();
                return handed;
            }
            woken = false;
            let waiter = Waiter::for_thread(0);
            match self.enqueue(mask, &mut place, &waiter) {
                Enqueued::Queued => {}
                Enqueued::Enterable => continue,
                Enqueued::Handed(s) => return Some(s),
            }
            let token = match deadline {
                None => waiter.wait(false),
                // A notify that wins the race with the timeout is returned:
                // what it carried (the lock) is ours.
                Some(deadline) => match waiter.wait_until(false, deadline) {
                    Some(token) => token,
                    None => {
                        // Cancelled: leave the queue (an exit may have
                        // removed the node already).
                        self.dequeue(&mut place);
                        return None;
                    }
                },
            };
            if token & TOKEN_HANDOFF != 0 {
                // The exit removed our node.
                place.node = None;
                return Some(token as u32 & STATE_BITS);
            }
            // Woken to compete: our node stays, woken; watch again (once, if
            // past the deadline).
            woken = true;
        }
    }

    /// Watches the lock word for a state of `mask`, taking the lock if one
    /// comes, as the configuration's [`WaitPolicy`] says (by default
    /// `spins` reads with a spin hint between them, then `yields` reads
    /// each after a yield), checking `deadline` throughout (the
    /// [`Watch`] reads the clock every 16 spins and before every yield).
    /// A woken waiter also watches its slot, where an exit may hand it the
    /// lock. Returns the state entered in, with the waiter's node gone.
    #[inline]
    fn watch(
        &self,
        mask: u64,
        deadline: Option<Instant>,
        place: &mut Place,
        policy: WaitPolicy,
    ) -> Option<u32> {
        // Under loom every spin and yield is a scheduling point: one read
        // after one spin explores a waiter that finds its state while
        // watching, without multiplying the paths.
        let policy = if cfg!(loom) {
            WaitPolicy::spin_then_block(policy.spin_count().min(1))
        } else {
            policy
        };
        let mut watch = Watch::new(policy);
        loop {
            if let Some(s) = place.take_handed() {
                return Some(s);
            }
            if let Some(s) = self.try_lock_in(mask) {
                self.leave(place);
                return Some(s);
            }
            match watch.pause(deadline) {
                Next::Poll => {}
                Next::Park | Next::TimedOut => return None,
            }
        }
    }

    /// Queues `waiter` for `mask` unless the word admits `mask`: a waiter
    /// without a node gets one at the end of its group (with a new ticket);
    /// a woken one is queued again in its place.
    pub(crate) fn enqueue(&self, mask: u64, place: &mut Place, waiter: &Arc<Waiter>) -> Enqueued {
        let mut t = self.waiters.lock();
        let fresh = match place.node {
            Some(h) => {
                // Handoffs to a woken node happen under the table lock.
                if let Some(s) = place.take_handed() {
                    return Enqueued::Handed(s);
                }
                t.requeue(h, Arc::clone(waiter));
                false
            }
            None => {
                let slot = Arc::clone(place.slot.get_or_insert_with(Slot::new));
                place.node = Some(t.insert(mask, slot, Arc::clone(waiter)));
                true
            }
        };
        // Queue ourselves and publish our states first, then read the word
        // with an RMW that changes nothing. An exit whose release comes
        // after this RMW in the word's modification order reads the summary
        // after its own RMW, which reads from ours: it sees our states and
        // serves us (or takes the table lock, and finds us queued). An exit
        // whose release came before it left the word enterable, and we see
        // that here.
        self.waiters.publish(&mut t);
        // AcqRel: Acquire pairs with the Release of the exit that freed the
        // word; Release carries the summary store to that exit's re-check.
        let w = self.word.fetch_or(0, Ordering::AcqRel);
        if enterable(w, mask) || w & UNRESOLVED != 0 {
            // Nobody served the node: exits serve under the table lock we
            // hold. A new node leaves; a woken one stays woken, in its place.
            let h = place.node.expect("queued above");
            if fresh {
                t.remove(h);
                place.node = None;
            } else {
                drop(t.unqueue(h));
            }
            self.waiters.publish(&mut t);
            return Enqueued::Enterable;
        }
        Enqueued::Queued
    }

    /// Removes the node of a waiter whose `Waiter` was cancelled (an exit
    /// may have removed it already, on finding it cancelled).
    pub(crate) fn dequeue(&self, place: &mut Place) {
        let Some(h) = place.node.take() else {
            return;
        };
        let mut t = self.waiters.lock();
        if t.remove(h) {
            self.waiters.publish(&mut t);
        }
    }

    /// Removes the node of a woken waiter that has just taken the lock.
    fn leave(&self, place: &mut Place) {
        let Some(h) = place.node.take() else {
            return;
        };
        let mut t = self.waiters.lock();
        // Nobody hands the lock to a waiter that took it by itself: the word
        // has been held by us since.
        let removed = t.remove(h);
        debug_assert!(
            removed,
            "a woken node is removed only by its waiter or a handoff"
        );
        self.waiters.publish(&mut t);
    }

    /// A woken (or never queued) waiter gives up: removes its node and, if
    /// it was woken, passes the wake-up on, since exits served it rather
    /// than wake anyone else. Returns the state of a lock handed to it
    /// meanwhile, which it then owns. Wakers' panics go to `panics`.
    fn abandon(&self, place: &mut Place, panics: &mut Panics) -> Option<u32> {
        let h = place.node.take()?;
        let mut wakeups = Wakeups::default();
        {
            let mut t = self.waiters.lock();
            // Under the table lock, under which handoffs are made.
            if let Some(s) = place.take_handed() {
                return Some(s);
            }
            let woken = t.is_woken(h);
            t.remove(h);
            if woken {
                self.serve_free(&mut t, &mut wakeups);
            }
            self.waiters.publish(&mut t);
        }
        wakeups.deliver(panics);
        None
    }

    /// A task's wait: `Ready(state)` once it holds the lock, entered in
    /// `state`.
    pub(crate) fn poll_enter(&self, wait: &mut Wait, cx: &mut Context<'_>) -> Poll<u32> {
        loop {
            if let Some(waiter) = &wait.waiter {
                match waiter.poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(token) => {
                        wait.waiter = None;
                        if token & TOKEN_HANDOFF != 0 {
                            // The exit removed our node.
                            wait.place.node = None;
                            wait.place.slot = None;
                            return Poll::Ready(token as u32 & STATE_BITS);
                        }
                        // Woken to compete: our node stays, woken.
                    }
                }
            }
            if let Some(s) = wait.place.take_handed() {
                return Poll::Ready(s);
            }
            if let Some(s) = self.try_lock_in(wait.mask) {
                self.leave(&mut wait.place);
                return Poll::Ready(s);
            }
            let waiter = Waiter::for_task(cx.waker(), 0);
            match self.enqueue(wait.mask, &mut wait.place, &waiter) {
                Enqueued::Queued => {
                    // A notify from now on wakes the waker registered above.
                    wait.waiter = Some(waiter);
                    return Poll::Pending;
                }
                Enqueued::Enterable => {}
                Enqueued::Handed(s) => return Poll::Ready(s),
            }
        }
    }

    /// A task's wait dropped before it returned a guard: leave the queue,
    /// or pass on the lock or the wake-up it was given. A waker that panics
    /// (dropped here, or woken by the pass-on) panics out of the drop once
    /// the mutex is consistent, unless the thread is already unwinding.
    pub(crate) fn cancel_wait(&self, wait: &mut Wait) {
        let mut panics = Panics::new();
        if let Some(waiter) = wait.waiter.take() {
            // A withdrawn waiter drops its waker: user code. If that panics,
            // the withdrawal itself was done.
            match panics.catch(|| waiter.cancel()).unwrap_or(Ok(())) {
                Ok(()) => {
                    self.dequeue(&mut wait.place);
                    return panics.resume();
                }
                Err(token) if token & TOKEN_HANDOFF != 0 => {
                    // Handed the lock (the exit removed our node): release
                    // it in the state it was handed in.
                    wait.place.node = None;
                    let s = token as u32 & STATE_BITS;
                    self.unlock_with(s, s, &mut panics);
                    return panics.resume();
                }
                // Woken to compete: our node is woken.
                Err(_) => {}
            }
        }
        if let Some(s) = self.abandon(&mut wait.place, &mut panics) {
            // Handed the lock while woken: release it as it was handed.
            self.unlock_with(s, s, &mut panics);
        }
        panics.resume();
    }

    /// Frees the lock in state `next`; `entered` is the holder's entry state.
    ///
    /// If no waiter accepts `next`, one RMW releases the lock. A re-check of
    /// the waiting states then catches a waiter that queued meanwhile (see
    /// `enqueue`). Otherwise the slow path serves one.
    ///
    /// Why the re-check cannot miss a waiter: while we hold the lock, every
    /// other write to the word is an RMW (`enqueue`'s), so if a waiter's RMW
    /// precedes our swap in the word's modification order, our swap reads
    /// from a release sequence headed by it. Its summary store is sequenced
    /// before its RMW, and our re-check after our swap, so we read that
    /// summary or a later one. If its RMW follows our swap, it reads our
    /// release and, when `next` admits it, does not wait.
    ///
    /// A task's waker that panics panics out of here, after the exit is
    /// complete (dropped if the thread is already unwinding).
    #[inline]
    pub(crate) fn unlock(&self, entered: u32, next: u32) {
        let bit = 1u64 << next;
        // A first look, to keep the lock for a handoff when a waiter
        // accepts `next`.
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            return self.unlock_slow_resume(next);
        }
        // An RMW, not a store, so that it reads from `enqueue`'s RMWs.
        // AcqRel: Release publishes the critical section (pairs with the
        // Acquire CAS in `try_lock_in` and RMW in `enqueue`); Acquire pairs
        // with `enqueue`'s RMW, ordering its summary store before our
        // re-check.
        let held = self.word.swap(next, Ordering::AcqRel);
        debug_assert_eq!(held, LOCKED | entered, "exit from a lock not held");
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            let mut panics = Panics::new();
            self.wake_pass(&mut panics);
            panics.resume();
        }
    }

    #[cold]
    fn unlock_slow_resume(&self, next: u32) {
        let mut panics = Panics::new();
        self.unlock_slow(next, &mut panics);
        panics.resume();
    }

    /// [`unlock`](Self::unlock), keeping wakers' panics in `panics`.
    fn unlock_with(&self, entered: u32, next: u32, panics: &mut Panics) {
        let bit = 1u64 << next;
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            return self.unlock_slow(next, panics);
        }
        // As in `unlock`.
        let held = self.word.swap(next, Ordering::AcqRel);
        debug_assert_eq!(held, LOCKED | entered, "exit from a lock not held");
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            self.wake_pass(panics);
        }
    }

    /// An exit with waiters for `next`: serve them (see `serve`), then wake
    /// the tasks, with the table lock released.
    #[cold]
    fn unlock_slow(&self, next: u32, panics: &mut Panics) {
        let mut wakeups = Wakeups::default();
        {
            let mut t = self.waiters.lock();
            self.serve(&mut t, next, true, &mut wakeups);
            self.waiters.publish(&mut t);
        }
        wakeups.deliver(panics);
    }

    /// Serves the waiters of `state`, under the table lock, when the caller
    /// holds the lock (`held`: an exit, which then gives the lock away or
    /// frees it in `state`) or when the lock is free in `state` (a pass-on,
    /// which takes it with a CAS to hand it over, and otherwise leaves it).
    ///
    /// The node that has waited longest among those accepting `state` is
    /// served: handed the lock in Handoff mode, or once `HANDOFF_AFTER_PASSES`
    /// exits have served it without the lock; otherwise woken to compete
    /// (every queued acceptor in Broadcast mode) and counted as passed. A
    /// node that is woken already, and not yet back (its waiter may be
    /// waiting for a CPU), is counted as passed by an exit, not woken again,
    /// and nobody else is woken for it: it is still first in line, and the
    /// exit that finds it passed often enough hands it the lock through its
    /// slot.
    fn serve(&self, t: &mut Table, state: u32, mut held: bool, wakeups: &mut Wakeups) {
        let bit = 1u64 << state;
        let mode = self.config.wake_mode;
        while let Some(i) = t.oldest(bit) {
            if mode == WakeMode::Handoff || t.passes(i) >= HANDOFF_AFTER_PASSES {
                if held {
                    // The notify's (or the slot's) Release publishes this
                    // store and our critical section to the new owner.
                    self.word.store(LOCKED | state, Ordering::Relaxed);
                } else {
                    // Take the free lock for the waiter if the state is
                    // still the one we serve; if someone entered first, its
                    // exit serves instead. Acquire: pairs with the Release
                    // of the exit that freed the word; the notify's Release
                    // hands it on.
                    if self
                        .word
                        .compare_exchange(
                            state,
                            LOCKED | state,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        )
                        .is_err()
                    {
                        return;
                    }
                    held = true;
                }
                let token = TOKEN_HANDOFF | state as usize;
                match t.take_waiter(i) {
                    None => {
                        t.hand_to_woken(i, token);
                        return;
                    }
                    Some(waiter) => {
                        let notified = Waiter::notify_deferred(&waiter, token);
                        t.remove_at(i);
                        if let Some(w) = notified {
                            wakeups.push(w);
                            return;
                        }
                        // Cancelled: we still hold the lock; serve the next.
                    }
                }
            } else if mode == WakeMode::Broadcast {
                for j in t.all(bit) {
                    match t.take_waiter(j) {
                        Some(waiter) => match Waiter::notify_deferred(&waiter, TOKEN_WAKE) {
                            Some(w) => {
                                t.pass(j);
                                wakeups.push(w);
                            }
                            None => t.remove_at(j),
                        },
                        None if held => t.pass(j),
                        None => {}
                    }
                }
                break;
            } else {
                // Concurrency restriction: a parked first in line stays
                // parked while a watcher that accepts the state runs (it
                // takes the lock), up to `ROTATE_AFTER_SKIPS` times.
                let limit = self.config.watchers as usize;
                if limit != 0
                    && t.is_queued_at(i)
                    && t.skips(i) < ROTATE_AFTER_SKIPS
                    && self.watchers.accept(bit)
                {
                    t.skip(i);
                    break;
                }
                match t.take_waiter(i) {
                    Some(waiter) => match Waiter::notify_deferred(&waiter, TOKEN_WAKE) {
                        // It cannot act on the wake before we release: if it
                        // finds the lock held, it queues again under the
                        // table lock we hold, and then sees the released
                        // word.
                        Some(w) => {
                            t.pass(i);
                            wakeups.push(w);
                            break;
                        }
                        None => t.remove_at(i), // cancelled: the next one
                    },
                    None => {
                        if held {
                            t.pass(i);
                        }
                        break;
                    }
                }
            }
        }
        if held {
            self.release(t, state);
        }
    }

    /// Frees the word in state `next`, under the table lock (`_held` is the
    /// proof): `enqueue` reads the word under the same lock, so it sees
    /// either the held word, and is then queued before we look, or this.
    fn release(&self, _held: &Table, next: u32) {
        // Release: pairs with the Acquire CAS in `try_lock_in` and the
        // Acquire RMW in `enqueue`, publishing the holder's writes.
        self.word.store(next, Ordering::Release);
    }

    /// Under the table lock: if the lock is free, serve the waiters of its
    /// state.
    fn serve_free(&self, t: &mut Table, wakeups: &mut Wakeups) {
        let w = self.word.load(Ordering::Relaxed);
        if w & (LOCKED | UNRESOLVED) == 0 {
            self.serve(t, w & STATE_BITS, false, wakeups);
        }
    }

    /// After an exit released the lock and then found a waiter for its
    /// state: while the lock is free, serve the waiters of its state.
    #[cold]
    fn wake_pass(&self, panics: &mut Panics) {
        let mut wakeups = Wakeups::default();
        {
            let mut t = self.waiters.lock();
            self.serve_free(&mut t, &mut wakeups);
            self.waiters.publish(&mut t);
        }
        wakeups.deliver(panics);
    }

    /// The state-index form of [`AbstractState::from_index`].
    pub(crate) fn state_of(index: u32) -> S {
        S::from_index(index)
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
    pub fn enter_arc(self: &StdArc<Self>, set: impl Into<StateSet<S>>) -> ArcAstGuard<S, T> {
        let mask = entry_mask(set.into(), "enter_arc");
        self.enter_arc_mask(mask)
    }

    pub(crate) fn enter_arc_mask(self: &StdArc<Self>, mask: u64) -> ArcAstGuard<S, T> {
        let entered = match self.try_lock_in(mask) {
            Some(s) => s,
            None => self
                .lock_slow(mask, None)
                .expect("a wait without a deadline ends holding the lock"),
        };
        ArcAstGuard::new(StdArc::clone(self), entered)
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
    pub fn try_enter_arc(
        self: &StdArc<Self>,
        set: impl Into<StateSet<S>>,
    ) -> Option<ArcAstGuard<S, T>> {
        let mask = entry_mask(set.into(), "try_enter_arc");
        self.try_lock_in(mask)
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
    pub fn enter_arc_async(self: &StdArc<Self>, set: impl Into<StateSet<S>>) -> EnterArc<S, T> {
        let mask = entry_mask(set.into(), "enter_arc_async");
        EnterArc::new(StdArc::clone(self), mask)
    }
}

/// The wake-ups an exit owes (a task's waker, or a thread's unpark),
/// delivered after the table lock is released. One, except in Broadcast
/// mode: no allocation then.
#[derive(Default)]
struct Wakeups {
    one: Option<Wakeup>,
    more: Vec<Wakeup>,
}

impl Wakeups {
    fn push(&mut self, w: Wakeup) {
        match self.one {
            None => self.one = Some(w),
            Some(_) => self.more.push(w),
        }
    }

    /// Wakes every waiter (a task's waker is user code): all of them,
    /// whichever panics, keeping the first panic in `panics`.
    fn deliver(self, panics: &mut Panics) {
        let Self { one, more } = self;
        for w in one.into_iter().chain(more) {
            panics.catch(|| w.wake());
        }
    }
}

/// A waiter's node in the table, kept across its wake-ups, and the slot
/// where an exit may hand it the lock while it is woken.
#[derive(Default)]
pub(crate) struct Place {
    pub node: Option<Handle>,
    pub slot: Option<Arc<Slot>>,
}

impl Place {
    /// The state of a lock handed over through the slot, if one was: the
    /// exit removed the node, and the slot is spent.
    #[inline]
    fn take_handed(&mut self) -> Option<u32> {
        let token = self.slot.as_ref()?.token()?;
        self.node = None;
        self.slot = None;
        Some(token as u32 & STATE_BITS)
    }
}

/// What [`AstMutex::enqueue`] did.
pub(crate) enum Enqueued {
    /// The waiter is queued; a notify will come.
    Queued,
    /// The word admits the waiter: try to enter.
    Enterable,
    /// The lock was handed to the (woken) waiter, in this state.
    Handed(u32),
}

impl<S: AbstractState, T: ?Sized + fmt::Debug> fmt::Debug for AstMutex<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("AstMutex");
        match self.try_lock_in(StateSet::<S>::ALL.bits()) {
            Some(s) => {
                let g = AstGuard::new(self, s);
                d.field("state", &S::from_index(s)).field("data", &&*g);
            }
            None => {
                d.field("state", &format_args!("<locked>"));
            }
        }
        d.finish_non_exhaustive()
    }
}
