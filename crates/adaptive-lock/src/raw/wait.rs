//! The slow paths: how a waiter watches the lock word and parks, and how a
//! release picks whom to wake (the scheduler) and hands the lock over.

use std::time::Instant;

use sync_core::parking_lot::{self, FilterOp, ParkResult, ParkToken, UnparkResult, UnparkToken};
use sync_core::sync::atomic::Ordering;
use sync_core::wait::{Next, WaitPolicy, Watch};

use super::monitor::{CONTENDED_RATE, ewma, in_policy_of, now, thread_cpu_ns};
use super::{LOCKED_BIT, PARKED_BIT, RawAdaptiveLock};
use crate::config::Config;
use crate::policy::Policy;

/// The unpark token of a release that leaves the woken thread to compete.
const TOKEN_NORMAL: UnparkToken = UnparkToken(0);
/// The unpark token of a release that hands the lock to the woken thread.
const TOKEN_HANDOFF: UnparkToken = UnparkToken(1);

/// Aging of the priority scheduler: after this many releases in a row that
/// woke a waiter other than the longest-parked one, the next release hands
/// the lock to the longest-parked waiter, whatever its priority. Under loom
/// 1, so that a model with three threads reaches the aged handoff.
const PRIORITY_AGING: u32 = if cfg!(loom) { 1 } else { 16 };

/// The panic of a `lock()` made by a lock's policy on that lock.
#[cold]
#[inline(never)]
#[track_caller]
fn policy_locked_its_lock() -> ! {
    panic!(
        "adaptive-lock: a lock's policy called lock() on the lock it adapts, which its thread \
         holds while the policy runs (this would never return); try_lock and timed locks of it fail at once"
    )
}

impl<P: Policy> RawAdaptiveLock<P> {
    /// The policy a waiter registered behind `ahead` others runs; `timed`
    /// for a wait with a deadline.
    ///
    /// A timed wait may park even under a policy that never parks: past its
    /// spins it watches as the policy says while yields are cheap, and parks
    /// (with its deadline as the park's timeout) once they are slow, so that
    /// it returns near its deadline instead of after a series of sleeps,
    /// each of which waits for a CPU again on a saturated machine.
    fn watch_policy(bits: u64, ahead: u32, timed: bool) -> WaitPolicy {
        let config = Config::from_bits(bits);
        match config.watcher_limit() {
            Some(n) if ahead >= u32::from(n) => WaitPolicy::block(),
            _ if timed => config.wait_policy().park(true),
            _ => config.wait_policy(),
        }
    }

    /// Waits for the lock; `false` if `deadline` passed first. Registers
    /// the thread in the `waiting` sensor for the whole wait, and, once it
    /// holds the lock, records how it waited.
    #[cold]
    pub(super) fn lock_slow(&self, deadline: Option<Instant>, priority: usize) -> bool {
        // The lock's policy runs while its thread holds the lock: a wait
        // from there can only end in its deadline. Without one it would
        // never end (a panic that names the rule); with one it gives up
        // at once, as `try_lock` does, rather than keep the lock held by
        // this thread for the whole timeout.
        if in_policy_of(self as *const Self as usize) {
            if deadline.is_none() {
                policy_locked_its_lock();
            }
            // Relaxed: a counter.
            self.timeouts.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // We may park: what this thread keeps for the family's blocking
        // waits goes first (an active monitor's task wakers, see
        // `wake_chain::deliver_before_park`), before we are counted: here
        // the wait has changed nothing yet (not even the `waiting` sensor),
        // so a task the hook polls in place may wait for this very lock.
        sync_core::wake_chain::before_park();
        // Relaxed: a sensor; the lock word orders the data.
        // How many waiters were registered ahead of this one: the watcher
        // cap applies to it by this count until it is woken, and never
        // after (see the wake-up below).
        let mut ahead = self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut bits = self.config.load(Ordering::Relaxed);
        let timed = deadline.is_some();
        let mut watch = Watch::new(Self::watch_policy(bits, ahead, timed));
        // Relaxed: a hint; the queue lock orders parking and waking.
        let mut epoch = self.handoff_epoch.load(Ordering::Relaxed);
        let mut parks = 0u64;
        // The thread's CPU clock when its watch went past the spins (read
        // once per watch, and only by waiters that get that far), and the
        // CPU time such watches took: the monitor's cost of waiting.
        let mut past_spins: Option<u64> = None;
        let mut watch_cpu = 0u64;
        let mut parked_at = None;
        let mut handoff = false;
        let mut state = self.state.load(Ordering::Relaxed);
        let won = loop {
            if state & LOCKED_BIT == 0 {
                // Acquire: pairs with the Release of the unlock that freed
                // the lock.
                match self.state.compare_exchange_weak(
                    state,
                    state | LOCKED_BIT,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break true,
                    Err(s) => state = s,
                }
                continue;
            }

            // Reconfiguration takes effect at the next poll.
            let latest = self.config.load(Ordering::Relaxed);
            if latest != bits {
                bits = latest;
                // The watch keeps its progress (polls made, time watched):
                // restarting it at every change would let a policy that
                // changes faster than the budget keep a waiter from ever
                // parking.
                watch.set_policy(Self::watch_policy(bits, ahead, timed));
            }
            // A handoff passed this watching waiter by (the lock went from
            // one holder to a parked thread without ever looking free): it
            // joins the queue now, whatever its waiting policy, so that the
            // handoff scheduler serves it in turn; watching on, it could be
            // passed by at every release. Relaxed: a hint, as above.
            let passed = self.handoff_epoch.load(Ordering::Relaxed) != epoch;
            // A waiter that has watched the word for `wait::WATCH_AT_MOST` past
            // its spins without taking the lock parks, whatever its policy
            // (the clock is kept across wake-ups: the bound is on the whole
            // wait), so that the release that wakes it, and the parking
            // lot's eventual fairness (a handoff about every half
            // millisecond), serve it. Watching on under a policy that never
            // parks, it could be passed for ever by threads that free and
            // retake the lock on its fast path; `parking_lot`'s own waiters
            // park after a few spins.
            let overdue = watch.overdue();
            let p = watch.policy();
            let polls = watch.polls();
            if !passed && !overdue {
                if past_spins.is_none()
                    && polls >= p.spin_count()
                    && (p.yield_count() > 0 || !p.parks())
                {
                    past_spins = Some(thread_cpu_ns().unwrap_or(0));
                }
                match watch.pause(deadline) {
                    Next::Poll => {
                        state = self.state.load(Ordering::Relaxed);
                        continue;
                    }
                    Next::TimedOut => break false,
                    Next::Park => {}
                }
            }

            // Mark the lock as having parked threads, so that its unlock
            // takes the slow path and wakes one.
            if state & PARKED_BIT == 0 {
                if let Err(s) = self.state.compare_exchange_weak(
                    state,
                    state | PARKED_BIT,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    state = s;
                    continue;
                }
            }

            let addr = self as *const Self as usize;
            // Under the queue lock: if the holder released meanwhile (the
            // word is no longer LOCKED | PARKED), do not sleep. Pairs with
            // the unlock's `unpark_one`, which takes the same queue lock.
            let validate = || self.state.load(Ordering::Relaxed) == LOCKED_BIT | PARKED_BIT;
            let timed_out = |_, was_last_thread| {
                // Clear PARKED if we were the last parked thread: nobody is
                // left to wake.
                if was_last_thread {
                    self.state.fetch_and(!PARKED_BIT, Ordering::Relaxed);
                }
            };
            if let Some(from) = past_spins.take() {
                watch_cpu += thread_cpu_ns().unwrap_or(from).saturating_sub(from);
            }
            parks += 1;
            if parked_at.is_none() {
                parked_at = now();
            }
            // SAFETY: `validate` and `timed_out` only touch the lock word:
            // they neither panic nor call into the parking lot; `addr` is
            // this lock's address, valid while we wait on it.
            let result = unsafe {
                parking_lot::park(
                    addr,
                    validate,
                    || {},
                    timed_out,
                    ParkToken(priority),
                    deadline,
                )
            };
            match result {
                // The releaser left LOCKED set for us.
                ParkResult::Unparked(TOKEN_HANDOFF) => {
                    handoff = true;
                    break true;
                }
                ParkResult::Unparked(_) | ParkResult::Invalid => {}
                ParkResult::TimedOut => break false,
            }
            // Woken to compete: watch again with the configuration in force.
            // It has been rotated in, so the cap no longer holds it back,
            // also when the configuration changes while it watches.
            ahead = 0;
            bits = self.config.load(Ordering::Relaxed);
            watch.reset(Self::watch_policy(bits, ahead, timed));
            epoch = self.handoff_epoch.load(Ordering::Relaxed);
            state = self.state.load(Ordering::Relaxed);
        };
        if let Some(from) = past_spins {
            watch_cpu += thread_cpu_ns().unwrap_or(from).saturating_sub(from);
        }
        // Relaxed: a sensor.
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        if !won {
            // Relaxed: a counter.
            self.timeouts.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let woke = if parks > 0 { now() } else { None };
        // SAFETY: we hold the lock.
        let sample = self.holder.with_mut(|h| unsafe {
            let h = &mut *h;
            h.contended += 1;
            // Only when there is something to add: an acquisition whose
            // watch succeeded within its spins stores only to the fields at
            // the head of `Holder` (`watch_cpu_ns` lies past its first
            // cache line).
            if parks > 0 {
                h.parks += parks;
            }
            if watch_cpu > 0 {
                h.watch_cpu_ns = h.watch_cpu_ns.saturating_add(watch_cpu);
            }
            if handoff {
                h.handoffs += 1;
            }
            if parks == 0 {
                h.spin_successes += 1;
                h.spin_polls = ewma(u64::from(h.spin_polls), u64::from(watch.polls()).max(1))
                    .min(u64::from(u32::MAX)) as u32;
            } else if let (Some(a), Some(b)) = (parked_at, woke) {
                let ns = b.duration_since(a).as_nanos().min(u64::MAX as u128) as u64;
                h.park_wait_ns = ewma(h.park_wait_ns, ns.max(1));
            }
            // Contention is what the policy must learn from: sample every
            // CONTENDED_RATE-th contended acquisition too (already on the
            // slow path), unless the sampling rate is faster still.
            h.contended & h.mask.min(CONTENDED_RATE - 1) == 0
        });
        if sample {
            self.begin_sample();
        }
        true
    }

    /// Wakes a parked thread (the scheduler picks which) and releases or
    /// hands over the lock.
    #[cold]
    pub(super) fn unlock_slow(&self, force_fair: bool) {
        let config = self.config();
        let handoff = force_fair || config.scheduler_kind().is_handoff();
        let addr = self as *const Self as usize;
        // Runs under the queue lock, after the parking lot chose whom to
        // wake: either keep LOCKED for the woken thread (handoff) or release.
        let release = |result: UnparkResult, handoff: bool| {
            // The word is written with swaps, not plain stores (as
            // parking_lot does): a waiter may CAS PARKED in concurrently,
            // outside the queue lock. Under the memory model the store would
            // be ordered after that CAS, but loom (0.7) may let a later load
            // read the CAS past the store, an execution that cannot happen,
            // and then reports a lost wake-up; an RMW keeps the models exact
            // and costs nothing next to the wake-up on this path. This is
            // loom's known bug tokio-rs/loom#254 (RMW atomicity not applied
            // to a concurrent store; fix proposed in loom#391): a two-thread
            // model where a relaxed CAS 1 -> 3 succeeds and the other
            // thread's `store(0)` is then followed by its own load of 3
            // fails under loom 0.7.2, though coherence forbids it.
            if result.unparked_threads != 0 && (handoff || result.be_fair) {
                // Relaxed: a hint to watching waiters (see `lock_slow`).
                self.handoff_epoch.fetch_add(1, Ordering::Relaxed);
                if !result.have_more_threads {
                    // Relaxed: the woken thread's Acquire is the parking
                    // lot's queue lock, which this callback holds.
                    self.state.swap(LOCKED_BIT, Ordering::Relaxed);
                }
                return TOKEN_HANDOFF;
            }
            // Release: pairs with the Acquire of the next lock.
            if result.have_more_threads {
                self.state.swap(PARKED_BIT, Ordering::Release);
            } else {
                self.state.swap(0, Ordering::Release);
            }
            TOKEN_NORMAL
        };
        if !config.scheduler_kind().is_priority() {
            // SAFETY: `release` only writes the lock word and the epoch:
            // it neither panics nor calls into the parking lot.
            unsafe { parking_lot::unpark_one(addr, |result| release(result, handoff)) };
            return;
        }
        // Aging: after PRIORITY_AGING releases in a row that passed over the
        // longest-parked waiter, this one hands the lock to it.
        // SAFETY: the caller holds the lock.
        let aged = self
            .holder
            .with(|h| unsafe { (*h).passed_over >= PRIORITY_AGING });
        loop {
            // First pass: the highest priority parked now (wakes nobody).
            let mut best = None;
            if !aged {
                // SAFETY: the filter and callback only read tokens; neither
                // panics nor calls into the parking lot.
                unsafe {
                    parking_lot::unpark_filter(
                        addr,
                        |ParkToken(p)| {
                            best = best.max(Some(p));
                            FilterOp::Skip
                        },
                        |_| TOKEN_NORMAL,
                    )
                };
            }
            // Second pass: wake the first thread of that priority (the
            // first thread, if aged). If it left meanwhile (timed out) and
            // others remain, keep the lock and look again rather than
            // release with nobody woken.
            let target = best.unwrap_or(0);
            let mut woken = false;
            let mut first = true;
            // A Cell: the filter sets it and the callback (called after the
            // filter, by the same `unpark_filter`) reads it.
            let woke_first = core::cell::Cell::new(false);
            let mut retry = false;
            let filter = |ParkToken(p)| {
                let at_front = core::mem::replace(&mut first, false);
                if woken {
                    FilterOp::Stop
                } else if aged || p >= target {
                    woken = true;
                    woke_first.set(at_front);
                    FilterOp::Unpark
                } else {
                    FilterOp::Skip
                }
            };
            let callback = |result: UnparkResult| {
                if result.unparked_threads == 0 && result.have_more_threads {
                    retry = true;
                    return TOKEN_NORMAL;
                }
                if result.unparked_threads != 0 {
                    // SAFETY: the lock is still held: `release` below frees
                    // or hands it over only after this write, and the woken
                    // thread runs only after this callback returns.
                    self.holder.with_mut(|h| unsafe {
                        let h = &mut *h;
                        h.passed_over = if woke_first.get() {
                            0
                        } else {
                            h.passed_over + 1
                        };
                    });
                }
                release(result, handoff || aged)
            };
            // `filter` only reads the token; `callback` only writes the lock
            // word, the epoch and the holder's aging count (the lock is held).
            // SAFETY: so neither panics nor calls into the parking lot.
            unsafe { parking_lot::unpark_filter(addr, filter, callback) };
            if !retry {
                return;
            }
        }
    }
}
