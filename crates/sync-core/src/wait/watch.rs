//! [`Watch`]: one waiter's run of a [`WaitPolicy`].

use std::time::Instant;

#[cfg(doc)]
use super::SNOOZE;
use super::{
    MAX_BACKOFF_SHIFT, SATURATED_SPIN_TIME, SATURATED_SPINS, WATCH_AT_MOST, WATCH_CLOCK_AFTER,
    WaitPolicy, give_way,
};
use crate::load;
use crate::sync::hint;

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
    /// The poll at which a watch that can end (timed, or parking after its
    /// spins) ended its spins on saturated CPUs (see [`SATURATED_SPINS`]
    /// and [`SATURATED_SPIN_TIME`]), whatever the policy.
    spins_cut: Option<u32>,
    /// When an untimed watch first found the CPUs saturated while it spun:
    /// the start of its [`SATURATED_SPIN_TIME`].
    saturated_since: Option<Instant>,
    /// What decides whether a pause past the spins yields, and which
    /// yield it makes.
    yields: YieldRule,
    /// A yield of this watch took longer than [`load::SLOW_YIELD`] (kept
    /// only under [`YieldRule::UnlessCrowded`], whose yields end there).
    yielded_slowly: bool,
    /// When [`overdue`](Watch::overdue) started the clock of
    /// [`WATCH_AT_MOST`]; kept by [`reset`](Watch::reset).
    watching_since: Option<Instant>,
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
            saturated_since: None,
            yields: YieldRule::Sampled,
            yielded_slowly: false,
            watching_since: None,
        }
    }

    /// This watch judges yields by how long yields took
    /// ([`load::measured_yield`], whose verdict every waiter shares) and
    /// samples the machine's runnable threads ([`load::tick`]) only to
    /// judge a slow yield, or to check a verdict of crowded CPUs
    /// ([`load::crowded`]) before it parks on it: it yields while no yield
    /// has been measured slow, even on a machine with more runnable threads
    /// than CPUs. For a waiter
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

    /// Starts over (after a wake-up), with `policy`. Keeps the clock of
    /// [`overdue`](Self::overdue): its bound is on the whole wait.
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
        let (yields, watching_since) = (self.yields, self.watching_since);
        *self = Self::new(policy);
        (self.yields, self.watching_since) = (yields, watching_since);
    }

    /// Whether this wait has watched for [`WATCH_AT_MOST`] past its spins
    /// (or past [`WATCH_CLOCK_AFTER`] polls): a waiter that asks before
    /// each [`pause`](Self::pause) parks once it is, whatever its policy, so
    /// that the lock's fairness (its queue, its handoffs), which serves
    /// only waiters that park, serves it too.
    ///
    /// The clock starts at the first call made past the spins of a watch
    /// that goes on after them (it yields, never parks, or has a watch
    /// timeout), or past [`WATCH_CLOCK_AFTER`] polls, and is kept by
    /// [`reset`](Self::reset) and [`set_policy`](Self::set_policy): once
    /// overdue, a wait stays overdue after each wake-up. Once it has
    /// started, each call reads the clock. Under loom there is no clock:
    /// never overdue.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wait::{WaitPolicy, Watch};
    ///
    /// let mut w = Watch::new(WaitPolicy::spin_then_block(4));
    /// // Within its spins, and a watch that parks after them: no clock.
    /// assert!(!w.overdue());
    /// ```
    pub fn overdue(&mut self) -> bool {
        let p = self.policy;
        if self.watching_since.is_none() {
            // Whether the watch goes on past the spins (yields, never
            // parks, or watches until a timeout); one that parks after
            // them needs no clock unless its spins are long.
            let watches_on = p.yields > 0 || !p.park || p.timeout.is_some();
            if !cfg!(loom)
                && ((watches_on && self.polls >= p.spins) || self.polls >= WATCH_CLOCK_AFTER)
            {
                self.watching_since = Some(Instant::now());
            }
        }
        self.watching_since
            .is_some_and(|t| t.elapsed() >= WATCH_AT_MOST)
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

    /// Whether this untimed watch has spun for [`SATURATED_SPIN_TIME`]
    /// since it first found the CPUs saturated (called on each sample that
    /// finds them so).
    fn spun_saturated_for_long(&mut self) -> bool {
        let now = Instant::now();
        now.duration_since(*self.saturated_since.get_or_insert(now)) >= SATURATED_SPIN_TIME
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
    /// **On saturated CPUs a watch that can end spins only briefly.** Once
    /// the CPUs are [saturated](load::saturated) (sampled from the
    /// [`SATURATED_SPINS`]-th poll on, every 16 polls), a watch with a
    /// deadline ends its spins after at most [`SATURATED_SPINS`] polls, and
    /// an untimed one under a policy that parks ends them once it has spun
    /// [`SATURATED_SPIN_TIME`] on them, whatever the policy's spin count or
    /// `timeout`. Then it goes on as past its spins (yields while they are
    /// cheap, parks, or sleeps briefly under a policy that never parks): a
    /// thread preempted while it spins waits a whole scheduling round, past
    /// any deadline, and a waiter that spins for long keeps a core from
    /// the thread it waits for. Untimed watches of a policy that never
    /// parks (a spin lock the user chose), and any watch while a CPU is
    /// free, spin as the policy says. Under loom nothing is sampled: never
    /// saturated.
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
        // A watch that can end (a deadline, or a park after its spins) spins
        // only briefly on saturated CPUs: from SATURATED_SPINS polls on it
        // samples the load (at most every few ms process-wide) every 16
        // polls, and once the CPUs are saturated its spins end, at once if
        // it is timed (see SATURATED_SPINS), after SATURATED_SPIN_TIME if
        // not.
        if !cfg!(loom)
            && (deadline.is_some() || p.park)
            && self.spins_cut.is_none()
            && i < p.spins
            && i >= SATURATED_SPINS
            && (i - SATURATED_SPINS) % 16 == 0
        {
            load::tick();
            if load::saturated() && (deadline.is_some() || self.spun_saturated_for_long()) {
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
                        // Samples through its measured yields, and a
                        // parked waiter makes none: a verdict of crowded
                        // CPUs (which may outlive the load) is checked with
                        // a sample first, as `UnlessCrowded` does, or these
                        // watches would park for as long as nothing else
                        // in the process samples.
                        if load::crowded() {
                            load::tick();
                        }
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
