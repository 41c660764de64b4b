//! [`AstMutex`]: a mutex entered with a set of abstract states.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use sync_core::parking_lot::{self, DEFAULT_PARK_TOKEN, ParkResult, UnparkToken};
use sync_core::sync::atomic::{AtomicU32, Ordering};
use sync_core::sync::cell::{MutPtr, UnsafeCell};
use sync_core::sync::{hint, thread};

use crate::state::{AbstractState, StateSet};
use crate::waiters::{GroupId, Table, Waiters};

/// Bits 0-5 of the lock word: the abstract state's index. While the lock is
/// held they keep the state the holder entered in.
const STATE_BITS: u32 = 0x3f;
/// Bit 6: the lock is held; the abstract state is "null" (paper, 2.1 step 3).
const LOCKED: u32 = 1 << 6;

/// The unpark token of a waiter woken to compete for the lock.
const TOKEN_WAKE: UnparkToken = UnparkToken(0);
/// The unpark token of a waiter handed the lock: `TOKEN_HANDOFF | state`.
const TOKEN_HANDOFF: usize = 1 << 8;

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

#[inline]
fn enterable(word: u32, mask: u64) -> bool {
    word & LOCKED == 0 && (mask >> (word & STATE_BITS)) & 1 != 0
}

/// What an exit does when a waiter accepts the next state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeMode {
    /// Release the lock, then wake one waiter that accepts the new state; it
    /// competes with threads arriving meanwhile. If it loses, it watches the
    /// state again and parks again at the tail of its group. The parking lot
    /// asks for a fair exit from time to time (about every half
    /// millisecond), and then the lock is handed to the woken waiter, so no
    /// waiter loses forever.
    ///
    /// The default: a wake-up costs tens of microseconds on a virtual
    /// machine, and letting running threads take the lock meanwhile keeps
    /// the lock busy.
    #[default]
    Compete,
    /// Hand the lock to the woken waiter, which returns from `enter` holding
    /// it in the new state (the paper's semantics). Every transfer to a
    /// parked waiter waits for its wake-up. When a waiter parks while an
    /// exit is already releasing, the exit wakes it with the lock if the
    /// state is still free and unchanged; if another thread entered first,
    /// the woken waiter competes.
    Handoff,
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
    spins: u32,
    yields: u32,
}

impl Config {
    /// [`WakeMode::Compete`], [`DEFAULT_SPINS`] and [`DEFAULT_YIELDS`].
    pub const fn new() -> Self {
        Self {
            wake_mode: WakeMode::Compete,
            spins: DEFAULT_SPINS,
            yields: DEFAULT_YIELDS,
        }
    }

    /// What an exit does for a waiter that accepts the next state.
    pub const fn wake_mode(mut self, mode: WakeMode) -> Self {
        self.wake_mode = mode;
        self
    }

    /// How many times a waiter reads the lock word, with a spin hint in
    /// between, before it yields.
    pub const fn spins(mut self, spins: u32) -> Self {
        self.spins = spins;
        self
    }

    /// How many times a waiter yields its core, reading the lock word after
    /// each yield, before it parks. With `spins(0)`, `yields(0)` parks at
    /// once.
    pub const fn yields(mut self, yields: u32) -> Self {
        self.yields = yields;
        self
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
/// replaces a mutex, its condition variables and their predicates.
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
/// Waiters with the same entry set wake in the order they parked. Among
/// groups of waiters whose sets contain the new state, exits take turns
/// (round robin), so no group is passed over forever. In
/// [`WakeMode::Compete`] a woken waiter can lose the lock to a thread that
/// arrived meanwhile; the parking lot's periodic fair exit hands the lock to
/// it instead, bounding how long it can lose. In [`WakeMode::Handoff`] every
/// exit that wakes a waiter hands the lock to it.
///
/// # Poisoning
///
/// There is none: a guard dropped while unwinding restores the state it
/// entered in, like any guard dropped without [`exit`](AstGuard::exit).
pub struct AstMutex<S, T: ?Sized> {
    /// The lock word: the state's index (bits 0-5) and `LOCKED` (bit 6).
    ///
    /// | word         | meaning                           |
    /// |--------------|-----------------------------------|
    /// | `s`          | free in state `s`                 |
    /// | `LOCKED | s` | held, entered in state `s`        |
    ///
    /// `enter` sets `LOCKED` (CAS from an enterable word); `exit` swaps in
    /// the next state (one RMW, or a store under the waiter table's lock
    /// when it wakes a waiter); a handoff stores `LOCKED | next` for the
    /// woken thread. Whether threads are parked, and for which states, is
    /// in the waiter table and its published summary, not here.
    word: AtomicU32,
    waiters: Waiters,
    config: Config,
    _states: PhantomData<fn() -> S>,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands `&mut T` to one thread at a time, and `T` moves
// with the mutex, so `T: Send` suffices for both (as for std's Mutex). The
// state type is only named, never stored.
unsafe impl<S, T: ?Sized + Send> Send for AstMutex<S, T> {}
// SAFETY: as above.
unsafe impl<S, T: ?Sized + Send> Sync for AstMutex<S, T> {}

impl<S: AbstractState, T> AstMutex<S, T> {
    /// A free mutex in state `initial`, guarding `data`.
    pub fn new(initial: S, data: T) -> Self {
        Self::with_config(initial, data, Config::new())
    }

    /// A free mutex in state `initial`, guarding `data`, waiting and waking
    /// as `config` says.
    pub fn with_config(initial: S, data: T, config: Config) -> Self {
        Self {
            word: AtomicU32::new(state_index(initial)),
            waiters: Waiters::new(),
            config,
            _states: PhantomData,
            data: UnsafeCell::new(data),
        }
    }

    /// Consumes the mutex and returns its data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

fn state_index<S: AbstractState>(s: S) -> u32 {
    let i = s.index();
    assert!(
        i < S::COUNT && i < 64,
        "{s:?}.index() = {i} is not below {}::COUNT = {} (at most 64)",
        core::any::type_name::<S>(),
        S::COUNT
    );
    i
}

fn entry_mask<S: AbstractState>(set: StateSet<S>, call: &str) -> u64 {
    assert!(
        !set.is_empty(),
        "AstMutex::{call} with an empty state set: no state can ever admit it"
    );
    set.bits()
}

impl<S: AbstractState, T: ?Sized> AstMutex<S, T> {
    /// The configuration the mutex was made with.
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
        let entered = match self.try_lock_in(mask) {
            Some(s) => s,
            None => self
                .lock_slow(mask, None)
                .expect("a wait without a deadline ends holding the lock"),
        };
        self.guard(entered)
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
        self.try_lock_in(mask).map(|s| self.guard(s))
    }

    /// Like [`enter`](Self::enter), giving up after `timeout`.
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
    /// passed meanwhile.
    ///
    /// # Panics
    ///
    /// If `set` is empty.
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
        Some(self.guard(entered))
    }

    /// The current state, or `None` while the lock is held.
    ///
    /// A snapshot: another thread may enter as soon as it is read.
    pub fn state(&self) -> Option<S> {
        // Acquire: pairs with the Release of the exit that stored the state.
        let w = self.word.load(Ordering::Acquire);
        (w & LOCKED == 0).then(|| S::from_index(w & STATE_BITS))
    }

    /// The data, through exclusive access to the mutex (no locking).
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        self.data.with_mut(|p| unsafe { &mut *p })
    }

    #[inline]
    fn guard(&self, entered: u32) -> AstGuard<'_, S, T> {
        AstGuard {
            mutex: self,
            entered,
            next: entered,
            data: ManuallyDrop::new(self.data.get_mut()),
        }
    }

    /// Takes the lock if the word is enterable for `mask`; returns the
    /// state entered in.
    #[inline]
    fn try_lock_in(&self, mask: u64) -> Option<u32> {
        let mut w = self.word.load(Ordering::Relaxed);
        while enterable(w, mask) {
            // Acquire: pairs with the Release of the exit that freed the word
            // (the CAS in `unlock` or the store in `release`).
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
        None
    }

    /// Watches the word, then parks in the group of `mask` until entered,
    /// handed the lock, or past `deadline`.
    #[cold]
    fn lock_slow(&self, mask: u64, deadline: Option<Instant>) -> Option<u32> {
        let group = self.waiters.group(mask);
        loop {
            if let Some(s) = self.watch(mask, deadline) {
                return Some(s);
            }
            // SAFETY: `validate` and `timed_out` take only the waiter
            // table's spin lock, which never calls into the parking lot,
            // and do not panic; the key is an address this mutex owns.
            let result = unsafe {
                parking_lot::park(
                    group.key,
                    || self.validate(group, mask),
                    || {},
                    |_, _| self.forget_waiter(group),
                    DEFAULT_PARK_TOKEN,
                    deadline,
                )
            };
            match result {
                ParkResult::Unparked(UnparkToken(t)) if t & TOKEN_HANDOFF != 0 => {
                    return Some(t as u32 & STATE_BITS);
                }
                // Woken to compete, or the state admitted us before we
                // slept: try again.
                ParkResult::Unparked(_) | ParkResult::Invalid => {}
                ParkResult::TimedOut => return None,
            }
        }
    }

    /// Watches the lock word for a state of `mask`, taking the lock if one
    /// comes: `spins` reads with a spin hint between them, then `yields`
    /// reads each after a yield. Past `deadline`, one read.
    #[inline]
    fn watch(&self, mask: u64, deadline: Option<Instant>) -> Option<u32> {
        // Under loom every spin and yield is a scheduling point: one read
        // after one spin explores a waiter that finds its state while
        // watching, without multiplying the paths.
        let (spins, yields) = if cfg!(loom) {
            (self.config.spins.min(1), 0)
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            (0, 0)
        } else {
            (self.config.spins, self.config.yields)
        };
        for _ in 0..spins {
            if let Some(s) = self.try_lock_in(mask) {
                return Some(s);
            }
            hint::spin_loop();
        }
        for _ in 0..yields {
            if let Some(s) = self.try_lock_in(mask) {
                return Some(s);
            }
            thread::yield_now();
        }
        self.try_lock_in(mask)
    }

    /// `park`'s validate, under the parking lot's bucket lock: sleep only if
    /// the word does not admit us, counting ourselves in the group.
    fn validate(&self, group: GroupId, mask: u64) -> bool {
        let mut t = self.waiters.lock();
        // Count ourselves and publish our states first, then read the word
        // with an RMW that changes nothing. An exit whose release comes
        // after this RMW in the word's modification order reads the summary
        // after its own RMW, which reads from ours: it sees our states and
        // wakes us (or takes the table lock we hold, and finds us counted).
        // An exit whose release came before it left the word enterable, and
        // we see that here.
        t.add(group);
        self.waiters.publish(&t);
        // AcqRel: Acquire pairs with the Release of the exit that freed the
        // word; Release carries the summary store to that exit's re-check.
        let w = self.word.fetch_or(0, Ordering::AcqRel);
        if enterable(w, mask) {
            t.remove(group);
            self.waiters.publish(&t);
            return false;
        }
        true
    }

    /// `park`'s timed_out, under the bucket lock: we left the queue.
    fn forget_waiter(&self, group: GroupId) {
        let mut t = self.waiters.lock();
        t.remove(group);
        self.waiters.publish(&t);
    }

    /// Frees the lock in state `next`; `entered` is the holder's entry state.
    ///
    /// If no parked thread accepts `next`, one RMW releases the lock. A re-check
    /// of the parked states then catches a waiter that counted itself
    /// meanwhile (see `validate`). Otherwise the slow path wakes one.
    ///
    /// Why the re-check cannot miss a waiter: while we hold the lock, every
    /// other write to the word is an RMW (`validate`'s), so if a waiter's RMW
    /// precedes our swap in the word's modification order, our swap reads
    /// from a release sequence headed by it. Its summary store is sequenced
    /// before its RMW, and our re-check after our swap, so we read that
    /// summary or a later one. If its RMW follows our swap, it reads our
    /// release and, when `next` admits it, does not sleep.
    #[inline]
    fn unlock(&self, entered: u32, next: u32) {
        let bit = 1u64 << next;
        // A first look, to keep the lock for a handoff or a fair exit when a
        // parked waiter accepts `next`.
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            return self.unlock_slow(next);
        }
        // An RMW, not a store, so that it reads from `validate`'s RMWs.
        // AcqRel: Release publishes the critical section (pairs with the
        // Acquire CAS in `try_lock_in` and RMW in `validate`); Acquire pairs
        // with `validate`'s RMW, ordering its summary store before our
        // re-check.
        let held = self.word.swap(next, Ordering::AcqRel);
        debug_assert_eq!(held, LOCKED | entered, "exit from a lock not held");
        if self.waiters.parked_states(Ordering::Acquire) & bit != 0 {
            self.wake_pass();
        }
    }

    /// An exit with waiters parked: free the lock in `next` and wake a
    /// waiter that accepts `next`, or hand it the lock.
    #[cold]
    fn unlock_slow(&self, next: u32) {
        let group = {
            let mut t = self.waiters.lock();
            match t.choose(1 << next) {
                Some(g) => g,
                None => {
                    // No parked waiter accepts `next`.
                    self.release(&t, next);
                    return;
                }
            }
        };
        let handoff = self.config.wake_mode == WakeMode::Handoff;
        // SAFETY: the callback takes only the table's spin lock and does not
        // panic; the key is an address this mutex owns.
        let result = unsafe {
            parking_lot::unpark_one(group.key, |r| {
                let mut t = self.waiters.lock();
                if r.unparked_threads != 0 {
                    t.remove(group);
                    self.waiters.publish(&t);
                    if handoff || r.be_fair {
                        // The woken thread owns the lock, entered in `next`;
                        // its `park` returning is ordered after this.
                        self.word.store(LOCKED | next, Ordering::Relaxed);
                        return UnparkToken(TOKEN_HANDOFF | next as usize);
                    }
                }
                self.release(&t, next);
                TOKEN_WAKE
            })
        };
        if result.unparked_threads == 0 {
            // The group emptied (a timeout) after we chose it; the lock is
            // free now, so wake whoever else accepts its state.
            self.wake_pass();
        }
    }

    /// Frees the word in state `next`, under the table lock (`_held` is the
    /// proof): `validate` reads the word under the same lock, so it sees
    /// either the held word, and is then counted before we look, or this.
    fn release(&self, _held: &Table, next: u32) {
        // Release: pairs with the Acquire CAS in `try_lock_in` and the
        // Acquire RMW in `validate`, publishing the holder's writes.
        self.word.store(next, Ordering::Release);
    }

    /// After an exit found no one to wake in the group it chose: while the
    /// lock is free, wake one waiter that accepts its state.
    #[cold]
    fn wake_pass(&self) {
        let handoff = self.config.wake_mode == WakeMode::Handoff;
        loop {
            let (group, state) = {
                let mut t = self.waiters.lock();
                let w = self.word.load(Ordering::Relaxed);
                if w & LOCKED != 0 {
                    return; // the holder's exit takes over
                }
                match t.choose(1 << (w & STATE_BITS)) {
                    Some(g) => (g, w & STATE_BITS),
                    None => return,
                }
            };
            // SAFETY: the callback takes only the table's spin lock and does
            // not panic; the key is an address this mutex owns.
            let result = unsafe {
                parking_lot::unpark_one(group.key, |r| {
                    if r.unparked_threads == 0 {
                        return TOKEN_WAKE;
                    }
                    self.forget_waiter(group);
                    // In Handoff mode, take the free lock for the woken
                    // thread if the state is still the one we woke it for.
                    // Acquire: pairs with the Release of the exit that freed
                    // the word; the woken thread's `park` returns after us.
                    let taken = handoff
                        && self
                            .word
                            .compare_exchange(
                                state,
                                LOCKED | state,
                                Ordering::Acquire,
                                Ordering::Relaxed,
                            )
                            .is_ok();
                    if taken {
                        UnparkToken(TOKEN_HANDOFF | state as usize)
                    } else {
                        TOKEN_WAKE
                    }
                })
            };
            if result.unparked_threads != 0 {
                return;
            }
        }
    }
}

impl<S: AbstractState, T: ?Sized + fmt::Debug> fmt::Debug for AstMutex<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("AstMutex");
        match self.try_lock_in(StateSet::<S>::ALL.bits()) {
            Some(s) => {
                let g = self.guard(s);
                d.field("state", &S::from_index(s)).field("data", &&*g);
            }
            None => {
                d.field("state", &format_args!("<locked>"));
            }
        }
        d.finish_non_exhaustive()
    }
}

/// The lock of an [`AstMutex`], held: derefs to the data.
///
/// [`exit`](Self::exit) names the next state. Dropping the guard without
/// `exit`, also while unwinding from a panic, restores the state it entered
/// in ([`entered_in`](Self::entered_in)) and wakes a waiter that accepts it,
/// if any.
#[must_use = "dropping the guard exits at once, restoring the entry state"]
pub struct AstGuard<'a, S: AbstractState, T: ?Sized> {
    mutex: &'a AstMutex<S, T>,
    entered: u32,
    next: u32,
    // Dropped before the unlock, so loom sees the access end first.
    data: ManuallyDrop<MutPtr<T>>,
}

// SAFETY: a shared guard only gives `&T`, so it may be shared across
// threads when `T` may (as std's MutexGuard). It is not `Send`: the raw
// pointer inside keeps it on the thread that entered.
unsafe impl<S: AbstractState, T: ?Sized + Sync> Sync for AstGuard<'_, S, T> {}

impl<S: AbstractState, T: ?Sized> AstGuard<'_, S, T> {
    /// The state the lock was in when this guard entered (or was handed it).
    pub fn entered_in(&self) -> S {
        S::from_index(self.entered)
    }

    /// Leaves the critical section in state `next`, waking a waiter whose
    /// entry set contains `next`.
    ///
    /// # Panics
    ///
    /// If `next.index()` is not below `S::COUNT` (a broken hand-written
    /// [`AbstractState`]).
    #[inline]
    pub fn exit(mut self, next: S) {
        self.next = state_index(next);
        // Drop unlocks.
    }
}

impl<S: AbstractState, T: ?Sized> Drop for AstGuard<'_, S, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.data) };
        self.mutex.unlock(self.entered, self.next);
    }
}

impl<S: AbstractState, T: ?Sized> Deref for AstGuard<'_, S, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // Shared access straight from the pointer: no `&mut T` is created,
        // so `&T`s handed out before (perhaps to other threads, the guard
        // being `Sync`) stay valid.
        // SAFETY: the guard holds the lock, so no one else accesses the
        // data, and `&self` excludes `deref_mut` while this borrow lives.
        self.data.with(|p| unsafe { &*p })
    }
}

impl<S: AbstractState, T: ?Sized> DerefMut for AstGuard<'_, S, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so no other access exists.
        unsafe { MutPtr::deref(&self.data) }
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
