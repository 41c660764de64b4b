//! The family's one waiting vocabulary: how a waiter watches a state before
//! it sleeps.
//!
//! Every blocking primitive of the family waits the same way: it *watches*
//! the state for a while (spinning, perhaps backing off, then yielding its
//! core), and then *parks* (a thread) or registers a waker (a task) until it
//! is woken. [`WaitPolicy`] names that watch with the attributes of
//! Mukherjee & Schwan's adaptive locks (spin-time, delay-time, sleep-time,
//! timeout), and [`Watch`] runs it, checking the caller's deadline inside the
//! loop, so a timed wait returns within its deadline plus one scheduling
//! quantum whatever the policy.
//!
//! **A yield is not a wait.** With more runnable threads than CPUs, one
//! `yield_now` gives the core away for a whole scheduling round, which can
//! be tens of milliseconds. So the watch yields only while yields are cheap
//! ([`load::yields_are_slow`] says otherwise
//! once the CPUs are saturated or a yield was measured slow): then a waiter
//! that may park parks at once, and one that never parks sleeps for
//! [`SNOOZE`] instead of yielding, which brings it back within a fraction of
//! a millisecond. A waiter with a deadline never sleeps past it, never
//! yields, and on saturated CPUs spins at most [`SATURATED_SPINS`] polls
//! (a spinning thread can be preempted for a scheduling round too).
//! [`give_way`] and [`Backoff`] apply the same rule to waits that cannot
//! park (a peer in the middle of a push). Two waiters whose park costs the
//! thread they wait for a wake-up judge yields by a narrower signal:
//! [`Watch::measured_yields_only`] by measured yields alone, and
//! [`Watch::yields_unless_crowded`] by heavy oversubscription and by its
//! own last yield; both still park beside heavy load.
//!
//! | paper's lock | constructor |
//! |---|---|
//! | pure spin | [`WaitPolicy::spin`] |
//! | spin with back-off | [`WaitPolicy::spin_backoff`] |
//! | pure sleep | [`WaitPolicy::block`] |
//! | conditional sleep/spin with timeout | [`WaitPolicy::conditional`] |
//! | mixed sleep/spin (combined locks) | [`WaitPolicy::spin_then_block`], [`WaitPolicy::new`] + setters |
//!
//! # Examples
//!
//! ```
//! use sync_core::sync::atomic::{AtomicBool, Ordering};
//! use sync_core::wait::{Next, WaitPolicy, Watch};
//!
//! let ready = AtomicBool::new(true);
//! let mut watch = Watch::new(WaitPolicy::new().spins(10).yields(2));
//! // Acquire: pairs with the Release store of whoever sets the flag.
//! while !ready.load(Ordering::Acquire) {
//!     match watch.pause(None) {
//!         Next::Poll => continue,
//!         Next::Park => { /* park until woken, then `watch.reset()` */ break }
//!         Next::TimedOut => unreachable!("no deadline"),
//!     }
//! }
//! ```

use core::time::Duration;
use std::time::Instant;

use crate::load;
use crate::sync::hint;
#[cfg(loom)]
use crate::sync::thread;

/// How long a waiter that cannot park sleeps instead of yielding once
/// yields are slow: long enough to give the core to the thread it waits
/// for, short enough that the waiter is back soon (a sleeper is scheduled
/// promptly when its timer fires; a yielder waits behind every runnable
/// thread).
pub const SNOOZE: Duration = Duration::from_micros(50);

/// The most polls a *timed* watch spins while the CPUs are saturated
/// ([`load::saturated`]), whatever its policy's spin count: past them it
/// goes on as past its spins (it parks with its deadline, or, under a
/// policy that never parks, sleeps at most [`SNOOZE`] between polls).
///
/// A spinning thread on saturated CPUs can be preempted at any moment, and
/// then waits for a whole scheduling round (tens of milliseconds with a
/// few dozen busy threads per CPU) before it runs again, past any deadline
/// it had; a parked or sleeping thread is woken by its timer and scheduled
/// with priority, so a timed wait that spins to its deadline is often a
/// scheduling round late there (the report's `busy/overshoot-*` rows). A
/// few dozen polls take microseconds, so such a wait is preempted about as
/// rarely as a sleep is delayed. The same order as the family's default
/// spin counts, which it leaves as they are. Untimed watches and watches
/// on CPUs with one free are not bounded: a spinning thread with a free CPU
/// is not preempted.
pub const SATURATED_SPINS: u32 = 32;

/// Gives the core to other threads once, the family's replacement for
/// `yield_now`: without a deadline, a yield while yields are cheap; once
/// they are slow ([`load::yields_are_slow`]), or whenever there is a
/// `deadline` (a yield's length is unbounded: it can cost a whole
/// scheduling round), a sleep of [`SNOOZE`], never past `deadline`. Under
/// loom, one yield to the model.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// let deadline = Instant::now() + Duration::from_millis(1);
/// sync_core::wait::give_way(Some(deadline));
/// ```
pub fn give_way(deadline: Option<Instant>) {
    #[cfg(loom)]
    {
        let _ = deadline;
        thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if deadline.is_none() {
            load::tick();
            if !load::yields_are_slow() {
                load::measured_yield();
                return;
            }
        }
        let nap = match deadline {
            None => SNOOZE,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) => left.min(SNOOZE),
                None => return,
            },
        };
        // A sleep, not `park_timeout`: it leaves the thread's unpark token
        // to the protocol that parks after this pause.
        std::thread::sleep(nap);
    }
}

/// A short wait for a peer that is known to be in the middle of a step (a
/// producer between its swap and its link, a role about to be released):
/// spin with back-off, then [`give_way`] on every further call. For waits
/// that cannot park because nobody would wake them.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use sync_core::wait::Backoff;
///
/// let linked = AtomicBool::new(true);
/// let mut backoff = Backoff::new();
/// // Acquire: pairs with the peer's Release store of the link.
/// while !linked.load(Ordering::Acquire) {
///     backoff.snooze();
/// }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// Spins after which [`snooze`](Self::snooze) gives the core away.
    const SPINS: u32 = MAX_BACKOFF_SHIFT;

    /// A back-off that has not waited yet.
    ///
    /// # Examples
    ///
    /// ```
    /// let b = sync_core::wait::Backoff::new();
    /// assert!(!b.is_spent());
    /// ```
    pub const fn new() -> Self {
        Self { step: 0 }
    }

    /// Waits a little longer each call: 2, 4, … 64 spin hints, then
    /// [`give_way`] each call.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut b = sync_core::wait::Backoff::new();
    /// for _ in 0..10 {
    ///     b.snooze();
    /// }
    /// assert!(b.is_spent());
    /// ```
    pub fn snooze(&mut self) {
        if self.step < Self::SPINS {
            for _ in 0..1u32 << (self.step + 1) {
                hint::spin_loop();
            }
            self.step += 1;
        } else {
            give_way(None);
        }
    }

    /// Whether the spins are spent (further snoozes give the core away).
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!sync_core::wait::Backoff::new().is_spent());
    /// ```
    pub fn is_spent(&self) -> bool {
        self.step >= Self::SPINS
    }

    /// Starts over.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut b = sync_core::wait::Backoff::new();
    /// (0..10).for_each(|_| b.snooze());
    /// b.reset();
    /// assert!(!b.is_spent());
    /// ```
    pub fn reset(&mut self) {
        self.step = 0;
    }
}

/// The largest back-off exponent: a backed-off poll waits at most 2^6 spin
/// hints (a few hundred nanoseconds).
const MAX_BACKOFF_SHIFT: u32 = 6;

/// How a waiter watches a state before it parks: the paper's mutable
/// attributes.
///
/// * `spins` (spin-time): polls of the state with a spin hint between them
///   (a timed wait on saturated CPUs makes at most [`SATURATED_SPINS`]: see
///   [`Watch::pause`]);
/// * `backoff` (delay-time): the pause after the i-th spin grows as 2^i
///   hints, up to 2^6;
/// * `yields`: polls with a yield of the core between them, after the spins
///   (a yield that gave the core to nobody is paced: [`load::paced_yield`]);
/// * `park` (sleep-time): whether the waiter sleeps once the spins and yields
///   are spent. Without it the waiter never sleeps: it keeps polling and
///   yielding (a pure spin lock that lets a preempted holder run);
/// * `timeout` (conditional waiting): a cap on the whole watch; once it has
///   passed the waiter parks, even without `park`.
///
/// Any values are safe for a timed wait: it returns within its deadline
/// plus about one scheduling quantum, since it never yields and, on
/// saturated CPUs, spins only [`SATURATED_SPINS`] polls before it parks or
/// sleeps (however many `spins` or however long a `timeout` the policy
/// gives).
///
/// The default is parking_lot's `SpinWait`: 3 spins backing off (2, 4 and 8
/// hints), 7 yields, then park.
///
/// # Examples
///
/// ```
/// use sync_core::wait::WaitPolicy;
///
/// let combined = WaitPolicy::spin_then_block(10);
/// assert_eq!((combined.spin_count(), combined.yield_count(), combined.parks()), (10, 0, true));
/// assert!(!WaitPolicy::spin().parks());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaitPolicy {
    spins: u32,
    yields: u32,
    backoff: bool,
    park: bool,
    timeout: Option<Duration>,
}

impl WaitPolicy {
    /// parking_lot's watch: 3 backed-off spins, 7 yields, then park.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new(), sync_core::wait::WaitPolicy::default());
    /// ```
    pub const fn new() -> Self {
        Self {
            spins: 3,
            yields: 7,
            backoff: true,
            park: true,
            timeout: None,
        }
    }

    /// Pure spin: poll with a spin hint, and after 100 polls yield between
    /// polls; never sleep.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(!sync_core::wait::WaitPolicy::spin().parks());
    /// ```
    pub const fn spin() -> Self {
        Self {
            spins: 100,
            yields: 0,
            backoff: false,
            park: false,
            timeout: None,
        }
    }

    /// Spin with back-off (Anderson et al.): 10 polls with a growing pause,
    /// then yield between polls; never sleep.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sync_core::wait::WaitPolicy::spin_backoff().backs_off());
    /// ```
    pub const fn spin_backoff() -> Self {
        Self {
            spins: 10,
            yields: 0,
            backoff: true,
            park: false,
            timeout: None,
        }
    }

    /// Pure sleep: park at once.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::block();
    /// assert_eq!((p.spin_count(), p.yield_count()), (0, 0));
    /// ```
    pub const fn block() -> Self {
        Self {
            spins: 0,
            yields: 0,
            backoff: false,
            park: true,
            timeout: None,
        }
    }

    /// The paper's combined lock: `spins` polls with a spin hint, then park.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::spin_then_block(50);
    /// assert_eq!(p.spin_count(), 50);
    /// ```
    pub const fn spin_then_block(spins: u32) -> Self {
        Self {
            spins,
            yields: 0,
            backoff: false,
            park: true,
            timeout: None,
        }
    }

    /// Conditional spin/sleep: spin (then yield) for at most `timeout`, then
    /// park.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = sync_core::wait::WaitPolicy::conditional(Duration::from_micros(20));
    /// assert_eq!(p.watch_timeout(), Some(Duration::from_micros(20)));
    /// ```
    pub const fn conditional(timeout: Duration) -> Self {
        Self {
            spins: u32::MAX,
            yields: 0,
            backoff: false,
            park: true,
            timeout: Some(timeout),
        }
    }

    /// Sets the number of spins (polls with a spin hint between them).
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().spins(40);
    /// assert_eq!(p.spin_count(), 40);
    /// ```
    pub const fn spins(mut self, spins: u32) -> Self {
        self.spins = spins;
        self
    }

    /// Sets the number of yields after the spins.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().yields(0);
    /// assert_eq!(p.yield_count(), 0);
    /// ```
    pub const fn yields(mut self, yields: u32) -> Self {
        self.yields = yields;
        self
    }

    /// Whether the pause after each spin grows exponentially.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().backoff(false);
    /// assert!(!p.backs_off());
    /// ```
    pub const fn backoff(mut self, backoff: bool) -> Self {
        self.backoff = backoff;
        self
    }

    /// Whether the waiter parks once its spins and yields are spent (if not,
    /// it keeps polling and yielding).
    ///
    /// # Examples
    ///
    /// ```
    /// let p = sync_core::wait::WaitPolicy::new().park(false);
    /// assert!(!p.parks());
    /// ```
    pub const fn park(mut self, park: bool) -> Self {
        self.park = park;
        self
    }

    /// Caps the whole watch: once `timeout` has passed since the watch
    /// began, the waiter parks. `None`: no cap.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = sync_core::wait::WaitPolicy::spin().timeout(Some(Duration::from_micros(50)));
    /// assert_eq!(p.watch_timeout(), Some(Duration::from_micros(50)));
    /// ```
    pub const fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The number of spins.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new().spin_count(), 3);
    /// ```
    pub const fn spin_count(&self) -> u32 {
        self.spins
    }

    /// The number of yields after the spins.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new().yield_count(), 7);
    /// ```
    pub const fn yield_count(&self) -> u32 {
        self.yields
    }

    /// Whether spins back off.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sync_core::wait::WaitPolicy::new().backs_off());
    /// ```
    pub const fn backs_off(&self) -> bool {
        self.backoff
    }

    /// Whether the waiter parks after the watch.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(sync_core::wait::WaitPolicy::block().parks());
    /// ```
    pub const fn parks(&self) -> bool {
        self.park
    }

    /// The cap on the watch, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(sync_core::wait::WaitPolicy::new().watch_timeout(), None);
    /// ```
    pub const fn watch_timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self::new()
    }
}

/// What a waiter does after a [`Watch::pause`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Poll the state again.
    Poll,
    /// The watch is over: park (or register a waker).
    Park,
    /// The caller's deadline has passed: give up.
    TimedOut,
}

/// One waiter's run of a [`WaitPolicy`]: call [`pause`](Self::pause)
/// after each poll of the state that found it not ready.
///
/// Under loom every pause is one yield to the model's scheduler (a spin hint
/// is a yield there) and deadlines are left to the parking lot's model,
/// whose timed park explores both outcomes; keep the policies of models
/// small (`spins(1)`).
///
/// # Examples
///
/// ```
/// use sync_core::wait::{Next, WaitPolicy, Watch};
///
/// let mut watch = Watch::new(WaitPolicy::spin_then_block(2));
/// assert_eq!(watch.pause(None), Next::Poll);
/// assert_eq!(watch.pause(None), Next::Poll);
/// assert_eq!(watch.pause(None), Next::Park);
/// assert_eq!(watch.polls(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct Watch {
    policy: WaitPolicy,
    polls: u32,
    began: Option<Instant>,
    /// The poll at which a timed watch found the CPUs saturated past
    /// [`SATURATED_SPINS`]: its spins end there, whatever the policy.
    spins_cut: Option<u32>,
    /// What decides whether a pause past the spins yields, and which
    /// yield it makes.
    yields: YieldRule,
    /// A yield of this watch took longer than [`load::SLOW_YIELD`] (kept
    /// only under [`YieldRule::UnlessCrowded`], whose yields end there).
    yielded_slowly: bool,
}

/// How a [`Watch`] decides to yield past its spins (see
/// [`Watch::measured_yields_only`] and [`Watch::yields_unless_crowded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum YieldRule {
    /// Sample the load ([`load::tick`]), yield while
    /// [`load::yields_are_slow`] says no, pacing a yield that gave the core
    /// to nobody ([`load::paced_yield`]). The default.
    Sampled,
    /// Yield while [`load::yields_are_slow`] says no, measuring each yield
    /// ([`load::measured_yield`]); sample only through the yields.
    Measured,
    /// Yield while the CPUs are not [`load::crowded`], whatever the
    /// process's yields were measured to cost, with a yield counted among
    /// this process's yielders but not judged ([`load::counted_yield`]),
    /// until one of this watch's yields is slower than
    /// [`load::SLOW_YIELD`]; take
    /// [`load::tick`]'s samples only after a yield of a scheduling round,
    /// or to check a verdict of crowded CPUs.
    UnlessCrowded,
}

impl Default for Watch {
    /// A watch of the default policy ([`WaitPolicy::new`]): the brief watch
    /// before a park that most of the family's waits make. Under loom it
    /// is [`WaitPolicy::block`] (no pause before the park), so that models
    /// do not explore a dozen identical yields.
    fn default() -> Self {
        Self::new(if cfg!(loom) {
            WaitPolicy::block()
        } else {
            WaitPolicy::new()
        })
    }
}

impl Watch {
    /// A watch that has not begun.
    ///
    /// # Examples
    ///
    /// ```
    /// let w = sync_core::wait::Watch::new(Default::default());
    /// assert_eq!(w.polls(), 0);
    /// ```
    pub fn new(policy: WaitPolicy) -> Self {
        Self {
            policy,
            polls: 0,
            began: None,
            spins_cut: None,
            yields: YieldRule::Sampled,
            yielded_slowly: false,
        }
    }

    /// This watch judges yields by how long yields took
    /// ([`load::measured_yield`], whose verdict every waiter shares) and
    /// samples the machine's runnable threads ([`load::tick`]) only to
    /// judge a slow yield: it yields while no yield has been measured slow,
    /// even on a machine with more runnable threads than CPUs. For a waiter
    /// whose yield is what lets the thread it waits for run (a receiver
    /// whose producer shares its CPU), and whose park costs that thread a
    /// wakeup. A timed wait still never yields. Kept by
    /// [`reset`](Self::reset) and [`set_policy`](Self::set_policy).
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{Next, WaitPolicy, Watch};
    ///
    /// let mut w = Watch::new(WaitPolicy::spin_then_block(1).yields(1)).measured_yields_only();
    /// assert_eq!(w.pause(None), Next::Poll); // the spin
    /// // Then one yield, unless a yield was measured slow lately.
    /// let next = w.pause(None);
    /// assert!(next == Next::Poll || next == Next::Park);
    /// assert_eq!(w.pause(None), Next::Park);
    /// ```
    #[must_use]
    pub fn measured_yields_only(mut self) -> Self {
        self.yields = YieldRule::Measured;
        self
    }

    /// This watch yields while the CPUs are not heavily oversubscribed
    /// ([`load::crowded`]: more than [`load::CROWDED`] runnable threads per
    /// CPU besides this process's yielders), whatever yields were measured
    /// to cost, and parks once they are. For a waiter whose park costs the
    /// thread it waits for an unpark on that thread's critical path (an
    /// active monitor's combiner runs every queued task and wakes their
    /// waiters), and whose yields, when a few more threads than cores are
    /// runnable, mostly hand the core to the threads that make progress:
    /// such yields are slow but not wasted, and the family's default, which
    /// parks once a yield was measured slow, parks these waiters whenever
    /// threads outnumber cores. Beside heavy load a yield gives the core
    /// away for a scheduling round, and the watch parks. Beside lighter
    /// load it yields up to the policy's yields while they are quick, and
    /// a yield slower than [`load::SLOW_YIELD`] is its last: that yield
    /// waited behind other runnable threads for their time slices, which
    /// gave the threads that make progress their turn (a thread that makes
    /// progress and one that only spins look the same to a waiter), and a
    /// second one could hold the waiter's return back as long again after
    /// the state it watches has changed, where a parked waiter is woken at
    /// once. Its yields count among [`load::own_yielders`] and are not judged
    /// ([`load::counted_yield`]). It samples the load ([`load::tick`]),
    /// whose verdicts other waiters and active monitors' servers follow,
    /// only to check a verdict of crowded CPUs (which may outlive the
    /// load) or after a yield of a scheduling round
    /// ([`load::ROUND_YIELD`]), not before every yield. A timed wait still
    /// never yields. Kept by [`reset`](Self::reset) and
    /// [`set_policy`](Self::set_policy).
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{Next, WaitPolicy, Watch};
    ///
    /// let mut w = Watch::new(WaitPolicy::spin_then_block(1).yields(1)).yields_unless_crowded();
    /// assert_eq!(w.pause(None), Next::Poll); // the spin
    /// // Then one yield, unless the CPUs are crowded.
    /// let next = w.pause(None);
    /// assert!(next == Next::Poll || next == Next::Park);
    /// assert_eq!(w.pause(None), Next::Park);
    /// ```
    #[must_use]
    pub fn yields_unless_crowded(mut self) -> Self {
        self.yields = YieldRule::UnlessCrowded;
        self
    }

    /// The policy this watch runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{WaitPolicy, Watch};
    /// assert_eq!(Watch::new(WaitPolicy::block()).policy(), WaitPolicy::block());
    /// ```
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }

    /// How many pauses the watch has made since it began (or was reset).
    ///
    /// # Examples
    ///
    /// ```
    /// let w = sync_core::wait::Watch::new(Default::default());
    /// assert_eq!(w.polls(), 0);
    /// ```
    pub fn polls(&self) -> u32 {
        self.polls
    }

    /// Starts over (after a wake-up), with `policy`.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{Next, WaitPolicy, Watch};
    /// let mut w = Watch::new(WaitPolicy::block());
    /// assert_eq!(w.pause(None), Next::Park);
    /// w.reset(WaitPolicy::spin_then_block(1));
    /// assert_eq!(w.pause(None), Next::Poll);
    /// ```
    pub fn reset(&mut self, policy: WaitPolicy) {
        let yields = self.yields;
        *self = Self::new(policy);
        self.yields = yields;
    }

    /// Runs `policy` from now on, keeping the watch's progress (the polls
    /// made and the time watched so far): for a policy that changes while a
    /// thread waits, so that changes cannot keep the watch from ending.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{Next, WaitPolicy, Watch};
    /// let mut w = Watch::new(WaitPolicy::spin_then_block(2));
    /// assert_eq!(w.pause(None), Next::Poll);
    /// assert_eq!(w.pause(None), Next::Poll);
    /// w.set_policy(WaitPolicy::spin_then_block(3));
    /// assert_eq!(w.pause(None), Next::Poll); // the third spin, not the first
    /// assert_eq!(w.pause(None), Next::Park);
    /// ```
    pub fn set_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// [`pause`](Self::pause) without a deadline, as parking_lot's
    /// `SpinWait::spin`: `true` if the caller should poll the state again,
    /// `false` once it should park (or register its waker).
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{WaitPolicy, Watch};
    ///
    /// let mut watch = Watch::new(WaitPolicy::spin_then_block(1));
    /// assert!(watch.spin());
    /// assert!(!watch.spin());
    /// ```
    #[inline]
    pub fn spin(&mut self) -> bool {
        self.pause(None) == Next::Poll
    }

    /// Waits once, as the policy says for this point of the watch, and
    /// tells the waiter what to do next. `deadline` is the caller's (a timed
    /// wait); it is checked before every pause once spinning is over, and
    /// every 16 spins.
    ///
    /// Past the spins, a pause yields only while yields are cheap
    /// ([`load::yields_are_slow`]) and the wait has no deadline. Once yields
    /// are slow, or when the wait is timed, a policy that parks ends the
    /// watch ([`Next::Park`]: the caller parks, with its deadline as the
    /// park's timeout), and one that never parks sleeps for [`SNOOZE`] at
    /// most, never past `deadline` (see [`give_way`]). A timed wait never
    /// yields, since one yield can cost a whole scheduling round before
    /// anyone notices that yields became slow; so it overshoots its deadline
    /// by a timer's latency, not by a scheduling round.
    ///
    /// **A timed wait on saturated CPUs spins only briefly.** With a
    /// deadline, once the CPUs are [saturated](load::saturated) (sampled
    /// from the [`SATURATED_SPINS`]-th poll on, every 16 polls), the watch
    /// ends its spins after at most [`SATURATED_SPINS`] polls, whatever the
    /// policy's spin count or `timeout`, and goes on as past its spins
    /// (parks, or sleeps briefly under a policy that never parks): a thread
    /// preempted while it spins waits a whole scheduling round, past any
    /// deadline. Untimed watches, and timed ones while a CPU is free, spin
    /// as the policy says. Under loom nothing is sampled: never saturated.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use sync_core::wait::{Next, WaitPolicy, Watch};
    ///
    /// let mut w = Watch::new(WaitPolicy::spin());
    /// assert_eq!(w.pause(Some(Instant::now())), Next::TimedOut);
    /// ```
    pub fn pause(&mut self, deadline: Option<Instant>) -> Next {
        let p = self.policy;
        let i = self.polls;
        // A timed watch on saturated CPUs spins only briefly: from
        // SATURATED_SPINS polls on it samples the load (at most every few
        // ms process-wide) every 16 polls, and once the CPUs are saturated
        // its spins end (see SATURATED_SPINS).
        if !cfg!(loom)
            && deadline.is_some()
            && self.spins_cut.is_none()
            && i < p.spins
            && i >= SATURATED_SPINS
            && (i - SATURATED_SPINS) % 16 == 0
        {
            load::tick();
            if load::saturated() {
                self.spins_cut = Some(i);
            }
        }
        let spins = self.spins_cut.map_or(p.spins, |cut| cut.min(p.spins));
        let spinning = i < spins;
        if !cfg!(loom) && (deadline.is_some() || p.timeout.is_some()) && (!spinning || i % 16 == 0)
        {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Next::TimedOut;
            }
            if let Some(t) = p.timeout {
                let began = *self.began.get_or_insert(now);
                if now.duration_since(began) >= t {
                    return Next::Park;
                }
            }
        }
        if spinning {
            let hints = if p.backoff {
                1u32 << (i + 1).min(MAX_BACKOFF_SHIFT)
            } else {
                1
            };
            for _ in 0..hints {
                hint::spin_loop();
            }
        } else if i - spins < p.yields || !p.park {
            if p.park {
                // A timed wait parks with its deadline rather than yield.
                if deadline.is_some() {
                    return Next::Park;
                }
                match self.yields {
                    YieldRule::Sampled => {
                        // Each pause past the spins samples the load (at
                        // most every few ms process-wide) before it reads
                        // the verdict, so that no yield of a saturated
                        // machine is the one that finds out.
                        load::tick();
                        if load::yields_are_slow() {
                            return Next::Park;
                        }
                        // The poll follows at once: pace a yield that gave
                        // the core to nobody.
                        load::paced_yield();
                    }
                    YieldRule::Measured => {
                        // Samples only through its measured yields.
                        if load::yields_are_slow() {
                            return Next::Park;
                        }
                        load::measured_yield();
                    }
                    YieldRule::UnlessCrowded => {
                        if self.yielded_slowly {
                            return Next::Park;
                        }
                        // `tick` only to check a verdict of crowded CPUs
                        // (which may outlive the load) or after a yield of
                        // a scheduling round: a served monitor's mode
                        // follows its samples, and a sample at every yield
                        // made these waiters' yields decide it.
                        if load::crowded() {
                            load::tick();
                            if load::crowded() {
                                return Next::Park;
                            }
                        }
                        let took = load::counted_yield();
                        if took >= load::ROUND_YIELD {
                            load::tick();
                        }
                        // A slow yield gave the threads that make progress
                        // their time slices: it is this watch's last (see
                        // `yields_unless_crowded`).
                        self.yielded_slowly = took >= load::SLOW_YIELD;
                    }
                }
                self.polls = i.saturating_add(1);
                return Next::Poll;
            }
            give_way(deadline);
        } else {
            return Next::Park;
        }
        self.polls = i.saturating_add(1);
        Next::Poll
    }
}
