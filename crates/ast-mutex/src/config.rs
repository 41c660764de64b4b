//! How an [`AstMutex`] waits and wakes: [`Config`] and [`WakeMode`].

use sync_core::wait::WaitPolicy;

#[cfg(doc)]
use crate::AstMutex;
use crate::watchers::MAX_WATCHERS;

/// How many times a waiter reads the lock word, with a spin hint between
/// reads, before it starts yielding, by default.
///
/// Few: a waiter that spins while other threads wait for a CPU delays the
/// thread that would change the state. The report's `ast/spins/*` and
/// `ast/yields/*` sweeps measure the choice.
///
/// # Examples
///
/// ```
/// assert_eq!(ast_mutex::Config::new().wait_policy().spin_count(), ast_mutex::DEFAULT_SPINS);
/// ```
pub const DEFAULT_SPINS: u32 = 16;

/// How many times a waiter yields its core (re-reading the lock word after
/// each yield) before it parks, by default. A yield hands the core to a
/// thread that may be about to change the state, and costs a system call
/// when no other thread is runnable; see [`DEFAULT_SPINS`]. Once yields
/// are slow (the CPUs are crowded, or a yield gave the core away for long),
/// the family's wait loop parks instead of yielding.
///
/// # Examples
///
/// ```
/// assert_eq!(ast_mutex::Config::new().wait_policy().yield_count(), ast_mutex::DEFAULT_YIELDS);
/// ```
pub const DEFAULT_YIELDS: u32 = 64;

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
    /// yet running: exits to its states meanwhile count against it, and a
    /// waiter that queues while the lock is free in one of its states wakes
    /// the next thread waiting for that state, so that a woken thread
    /// waiting for a CPU does not leave the lock idle. Once 32 exits have
    /// passed it, the next one hands it the lock if it is running or parked
    /// again, and one of the 32 exits after it has waited 100 ms more for a
    /// CPU does in any case (see [`AstMutex`]'s `# Fairness`).
    ///
    /// The default: a woken thread takes a while to run, and letting
    /// running threads take the lock meanwhile keeps the lock busy.
    #[default]
    Compete,
    /// Hand the lock to the waiter that has waited longest once it has
    /// been woken and has run: it returns from `enter` holding the lock in
    /// the state the exit named (the paper's handoff, FIFO among the
    /// waiters of a state), but an exit does not hold the lock for a
    /// thread it has not woken yet (after Kashyap et al., ATC 2017: hand
    /// the lock to a waiter that runs).
    ///
    /// An exit whose first in line is parked and has not been woken yet
    /// wakes it and releases the lock. Once it has run, the thread takes
    /// the free lock itself, or the next exit to one of its states that
    /// serves it hands it the lock: through its slot while it watches the
    /// lock word, or with its wake-up if it has queued again. Handing the
    /// lock to a parked waiter at once would leave it idle until that
    /// thread runs, which takes a scheduling round when threads outnumber
    /// cores. While it is woken and has not run yet, exits pass it as in
    /// [`Compete`](Self::Compete) (a waiter that queues meanwhile wakes no
    /// one else for it), and it is handed the lock once it has waited for
    /// a CPU for as long as Compete's bound says.
    ///
    /// While a waiter that accepts the new state is running (watching the
    /// lock word before it parks), an exit leaves a parked first in line
    /// parked and releases the lock for the running one, counting the exit
    /// against the parked one: at most 256 exits to its states do so, and
    /// the 257th wakes it, or hands it the lock if it was woken before
    /// (see [`AstMutex`](crate::AstMutex)'s `# Fairness`).
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
    pub(crate) wake_mode: WakeMode,
    /// How a waiter watches the word before it waits in the table.
    pub(crate) wait: WaitPolicy,
    /// Concurrency restriction: at most this many threads watch the word
    /// at a time; 0: no restriction.
    pub(crate) watchers: u8,
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
    /// spins. On saturated CPUs (more runnable threads than CPUs, where a
    /// spinning thread can be preempted for a scheduling round, and keeps a
    /// core from the thread that would let it in), a timed entry spins only
    /// a few dozen reads, and an untimed one whose policy waits to be woken
    /// after its watch (the default) spins for a fraction of a millisecond
    /// at most, before it goes on to its yields or waits; so any value is
    /// safe there. Past 64 reads, a waiter that has watched for 2 ms waits
    /// to be woken however many spins are left (see [`wait`](Self::wait)).
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
    /// A waiter that has yielded for 2 ms waits to be woken however many
    /// yields are left (see [`wait`](Self::wait)).
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
    /// ([`WaitPolicy::park`]`(false)`), or that spins, yields or watches for
    /// long, makes a thread watch the word until it enters, its deadline
    /// passes, or it has watched for 2 ms past its spins (past its 64th
    /// read, with long spins) in this entry: then it waits in the table
    /// whatever the policy, where exits serve it in turn (see
    /// [`AstMutex`]'s `# Fairness`). A task registers its waker after one
    /// look at the word, whatever the policy.
    ///
    /// # Examples
    ///
    /// ```
    /// use ast_mutex::WaitPolicy;
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
    /// [`WaitPolicy`] says, and an exit wakes a parked first in line unless
    /// a running thread took the lock before the exit served it, or (in
    /// [`WakeMode::Handoff`]) a running watcher accepts the state. With
    /// restriction, [`WakeMode::Compete`] and [`WakeMode::Handoff`] leave
    /// parked waiters parked for a watcher; [`WakeMode::Broadcast`] only
    /// caps the watchers. Both reasons count toward the same bound of 256
    /// exits (see `# Fairness`).
    ///
    /// # Fairness
    ///
    /// Parked waiters are rotated in: a parked first in line for a state is
    /// left parked by at most 256 exits to its states; the next one that
    /// serves it wakes it, and from then on the bounds of
    /// [`AstMutex`]'s `# Fairness` hold: once 32 exits have passed it, it
    /// enters at the first exit after it runs, or after it has waited
    /// 100 ms more for a CPU.
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
