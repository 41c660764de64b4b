//! The semaphore's protocol: the two words, the deliverer's role and
//! the head it keeps, the wait of a counted thread (see the module's notes).

use std::time::Instant;

use sync_core::sync::Arc;
use sync_core::sync::atomic::{Ordering::*, fence};
use sync_core::unwind::Panics;
use sync_core::wait::{self, WaitPolicy, Watch};
use sync_core::waiter::{Token, Waiter};
use sync_core::wake_list::WakeList;

use super::Semaphore;
use crate::backlog::Withdrawer;
use crate::error::{AcquireError, TryAcquireError};
#[cfg(not(loom))]
use crate::handover::TIRED_AFTER;
use crate::handover::Tiredness;
#[cfg(doc)]
use crate::patience::IN_FLIGHT_SPINS;
use crate::patience::spin_in_flight;

/// `pending`'s deliverer bit.
pub(super) const ACTIVE: usize = 0b001;
/// `pending`'s "look at the head again" bit, set by a cancelled waiter (and
/// by `close`) so that the deliverer cannot retire past it.
pub(super) const RECHECK: usize = 0b010;
/// `pending`'s closed bit: set once by `close`, never cleared.
pub(super) const CLOSED: usize = 0b100;
/// `pending`'s "delivery owed" bit: a deliverer found the queue's front
/// half-way through a push and retired; the waiter, once linked, runs the
/// delivery (see `run_delivery` and `enqueue`).
pub(super) const OWED: usize = 0b1000;
/// Where `pending`'s amount starts.
pub(super) const SHIFT: u32 = 4;
/// The token of a waiter whose permits have all been delivered.
pub(super) const GRANTED: Token = 1;
/// The token of a waiter that a close sent away without permits.
pub(super) const CLOSED_TOKEN: Token = 2;

/// How many delivery passes after the first (each ends in a retirement
/// that failed) make a deliverer ask for help (see [`crate::handover`]).
/// Grants do not reset the count: the wakeups of the waiters granted wait
/// for the deliverer to leave.
#[cfg(not(loom))]
const TIRED_PASSES: u32 = TIRED_AFTER;
/// Under loom, two: after one, every model with a cancel or a race at
/// retirement explores the handover, and they took many times as long (the
/// handover's own model still reaches it).
#[cfg(loom)]
const TIRED_PASSES: u32 = 2;

/// The most withdrawn waiters a delivery pass folds at the head in one
/// go: a pass ends (and counts towards asking for help, see
/// `TIRED_PASSES`) after a bounded amount of work, however many withdrawn
/// waiters cancels that keep coming have queued.
const STEP: usize = 64;

/// Why a blocking wait ended without permits.
pub(super) type Fail = TryAcquireError;

impl Semaphore {
    /// Returns `n` permits that exist (held, or just counted in `total`):
    /// they cover the oldest waiters' demand first, then become free. Never
    /// goes past [`MAX_PERMITS`](Self::MAX_PERMITS), which bounds `total`.
    #[inline]
    pub(super) fn put_back(&self, n: usize) {
        // Release: pairs with the Acquire of whoever takes the permits (a
        // CAS in `try_take`, `commit`'s fetch_sub, or the deliverer's
        // `pending` load).
        let c = self.count.fetch_add(n as isize, Release);
        debug_assert!(
            c <= (Self::MAX_PERMITS - n) as isize,
            "more permits than the semaphore's total"
        );
        if c < 0 {
            // The first `-c` of our permits cover counted waiters' demand.
            self.deliver(n.min(c.unsigned_abs()));
        }
    }

    /// `try_take`, failing on a closed semaphore (see [`took`](Self::took)).
    #[inline]
    pub(super) fn try_take_open(&self, n: usize) -> Result<(), TryAcquireError> {
        if self.try_take(n) {
            self.took(n)
        } else if self.is_closed() {
            Err(TryAcquireError::Closed)
        } else {
            Err(TryAcquireError::NoPermits)
        }
    }

    /// Called once an acquire has taken `n` permits (`try_take`, or a
    /// `commit` that found them free): `Ok`, or, if the semaphore is
    /// closed by now, the permits go back and the acquire fails, as one
    /// that came after the close.
    ///
    /// The look comes after the take, not only before it: a permit released
    /// after a close went to an acquire that had looked before the close
    /// (a thread in its spin, a task's poll), so that an acquire succeeded
    /// after the close had returned. The take's Acquire pairs with the
    /// Release of the permits' return, which a close before that return
    /// happens before, so this load sees `CLOSED`.
    #[inline]
    pub(super) fn took(&self, n: usize) -> Result<(), TryAcquireError> {
        if self.is_closed() {
            self.give_back_closed(n);
            return Err(TryAcquireError::Closed);
        }
        Ok(())
    }

    /// [`took`](Self::took)'s return of permits taken from a closed
    /// semaphore. A counted waiter the close has not sent away yet may be
    /// owed them: the delivery then sends it away and may run its waker,
    /// whose panic goes on once the permits are back (rule 2 of
    /// `sync_core::unwind`), as from a release.
    #[cold]
    #[inline(never)]
    fn give_back_closed(&self, n: usize) {
        if n > 0 {
            self.put_back(n);
        }
    }

    /// Takes `n` permits if free; never counts the caller as a waiter.
    #[inline]
    pub(super) fn try_take(&self, n: usize) -> bool {
        if n == 0 {
            // Nothing to wait for, even behind a queue.
            return true;
        }
        let n = n as isize;
        let mut c = self.count.load(Relaxed);
        while c >= n {
            // Acquire: pairs with the Release of the release that freed them.
            match self.count.compare_exchange_weak(c, c - n, Acquire, Relaxed) {
                Ok(_) => return true,
                Err(actual) => c = actual,
            }
        }
        false
    }

    /// Counts the caller as a waiter for `n` permits. `Ok(())` if they were
    /// free after all; otherwise `Err(found)`: the free permits it found,
    /// which it must [`enqueue`](Self::enqueue) for the oldest waiter.
    pub(super) fn commit(&self, n: usize) -> Result<(), usize> {
        // AcqRel: Acquire, the permits we may take came from a Release (and,
        // after a close, we see what the drain saw: see the module's notes);
        // Release for the drain's RMW that may follow ours.
        let c = self.count.fetch_sub(n as isize, AcqRel);
        if c >= n as isize {
            return Ok(());
        }
        Err(c.max(0) as usize)
    }

    /// Queues a counted `waiter` (its data its whole request), hands the
    /// `found` free permits its count absorbed to the delivery (for the
    /// oldest waiter, which may be this one), and makes sure a close that
    /// missed it still sends it away.
    ///
    /// That delivery wakes other waiters, whose wakers may panic. Their
    /// panics are returned, not resumed: the caller first records its
    /// waiter (a future) or withdraws it (a thread), so that no counted
    /// request is left that nobody waits for or withdraws, and then
    /// resumes them (`sync_core::unwind`, rule 2).
    ///
    /// A deliverer that found the queue's front half-way through a push
    /// (this one's, or one ahead of it) retired and left the delivery owed
    /// (`OWED`): the push is followed by a look at `pending`, and the
    /// waiter then runs the delivery, or makes the running deliverer look
    /// again.
    #[must_use = "the panics of the wakers the delivery woke go on once the caller's request is settled"]
    pub(super) fn enqueue(&self, waiter: Arc<Waiter>, found: usize) -> Panics {
        let mut panics = Panics::new();
        self.queue.push(waiter);
        // SeqCst: between our link (the push) and our look at `pending`;
        // pairs with the fence in `run_delivery` between a deliverer's
        // announcement of `OWED` and its second look at the queue. Of the
        // two looks, at least one sees the other side's write.
        fence(SeqCst);
        if found > 0 {
            // Like a release that finds `count` negative: `found` of the
            // deficit is now covered. The delivery resumes a waker's panic
            // only once it has retired (the semaphore is consistent). Its
            // RMW on `pending` also makes a running deliverer look again,
            // or runs the delivery owed.
            panics.catch(|| self.deliver(found));
            if self.is_closed() {
                // The drain may have finished before our push: run it again.
                panics.catch(|| self.recheck());
            }
        } else {
            // Acquire: as `is_closed`'s.
            let w = self.pending.load(Acquire);
            if w & CLOSED != 0 {
                // The drain may have finished before our push: run it
                // again.
                panics.catch(|| self.recheck());
            } else if w & OWED != 0 {
                // The delivery owed to a waiter half-way through its push.
                panics.catch(|| self.run_owed());
            }
        }
        panics
    }

    #[cold]
    pub(super) fn acquire_slow(&self, n: usize, deadline: Option<Instant>) -> Result<(), Fail> {
        // Spin while nobody is queued: a permit freed within the spin is
        // taken without queueing, so a busy semaphore keeps its permits
        // moving between running threads instead of handing each one to a
        // thread that must be woken. The deadline is checked in the spin.
        // A timed wait does not yield: a yield that finds other threads
        // runnable gives the core away for a scheduling round, far past a
        // short deadline; it parks with the time left instead.
        // (Under loom the default watch does not pause at all.)
        let mut watch = match deadline {
            Some(_) if !cfg!(loom) => Watch::new(WaitPolicy::new().yields(0)),
            _ => Watch::default(),
        };
        while self.count.load(Relaxed) >= 0 && watch.pause(deadline) == wait::Next::Poll {
            if self.try_take(n) {
                return self.took(n);
            }
        }
        if expired(deadline) {
            // Not counted: nothing to withdraw (the caller already tried).
            return self.try_take_open(n);
        }
        // We will park: what this thread keeps for the family's blocking
        // waits goes first (an active monitor's task wakers, see
        // `wake_chain::deliver_before_park`), before we are counted, and
        // only now, past the spin that most contended acquires end in.
        sync_core::wake_chain::before_park();
        // Allocated before we are counted: a deliverer that sees our count
        // waits for our push, so keep that window short.
        let waiter = Waiter::for_thread(n);
        // The paper's wait: one fetch_sub counts us in.
        let Err(found) = self.commit(n) else {
            return self.took(n);
        };
        let mut panics = self.enqueue(Arc::clone(&waiter), found);
        if !panics.is_empty() {
            // Another waiter's waker panicked in the delivery we ran. Our
            // request is settled before the panic goes on: withdrawn, or its
            // permits given back if they were already delivered to us (the
            // deliveries these run may catch more panics: the first goes on).
            match waiter.cancel() {
                Ok(()) => panics.catch(|| self.withdrawn(Withdrawer::Thread)),
                Err(GRANTED) => panics.catch(|| self.put_back(n)),
                // Sent away by a close: our demand is folded already.
                Err(_) => None,
            };
            panics.resume();
            // Not resumed (this thread is already unwinding): wait again.
            return self.acquire_slow(n, deadline);
        }
        if found > 0 {
            // The enqueue delivered the free permits we found, and so may
            // have run other waiters' task wakers here, after the hook
            // above: a task polled in place there may have kept wakeups on
            // this thread (an active monitor's body). Delivered before we
            // park, or we could wait for one of those very tasks. (With
            // nothing found, our enqueue ran no delivery but a close's
            // drain, which sends us away too: we do not park.)
            sync_core::wake_chain::before_park();
        }
        // Spin before parking: a delivery is a handoff, and a releaser
        // usually comes within microseconds.
        let token = match deadline {
            None => waiter.wait(true),
            // `None`: the deadline passed and the waiter is withdrawn (a
            // delivery that won the race comes back as `Some`). No spin
            // (nor yields) here: the watch above has spun.
            Some(deadline) => match waiter.wait_until(false, deadline) {
                Some(token) => token,
                None => {
                    // The deliverer folds our demand.
                    self.withdrawn(Withdrawer::Thread);
                    return Err(Fail::NoPermits);
                }
            },
        };
        token_result(token).map_err(Fail::from)
    }

    /// Adds `d` permits to the delivery, and delivers if nobody is.
    pub(super) fn deliver(&self, d: usize) {
        let add = d << SHIFT;
        let mut w = self.pending.load(Relaxed);
        loop {
            // Add our permits, and take the deliverer's role if it is free:
            // one RMW either way.
            let new = w.wrapping_add(add) | ACTIVE;
            // AcqRel: Release hands our permits (and `count`'s change) to
            // the deliverer, which loads `pending` with Acquire; Acquire, if
            // we become the deliverer, pairs with the Release of the previous
            // one's retirement, so we see the queue and `head` as it left
            // them.
            match self.pending.compare_exchange_weak(w, new, AcqRel, Relaxed) {
                // Somebody is delivering: it cannot retire without seeing
                // our addition.
                Ok(prev) if prev & ACTIVE != 0 => return,
                Ok(_) => return self.run_delivery(),
                Err(actual) => w = actual,
            }
        }
    }

    /// Called by a waiter that cancelled (or found the semaphore closed
    /// after its push): if it was the head, permits `pending` holds for it
    /// must not wait for the next release. Runs a delivery, or makes the
    /// running deliverer look again.
    pub(super) fn recheck(&self) {
        if self.mark_recheck() {
            self.run_delivery();
        }
    }

    /// Sets `RECHECK`, and `ACTIVE`: `true` if nobody was delivering (we
    /// hold the role now and must deliver), `false` if the running
    /// deliverer will look again.
    fn mark_recheck(&self) -> bool {
        // AcqRel: Release orders our cancel (or push) before the deliverer's
        // next look; Acquire as in `deliver`, if we become the deliverer.
        self.pending.fetch_or(ACTIVE | RECHECK, AcqRel) & ACTIVE == 0
    }

    /// Called by a waiter after its push, with `OWED` seen set: runs the
    /// delivery left to a waiter half-way through its push if nobody is
    /// delivering, or makes the running deliverer look at the queue again
    /// (`RECHECK` fails its retirement), unless it is no longer owed.
    fn run_owed(&self) {
        let mut w = self.pending.load(Relaxed);
        while w & OWED != 0 {
            // A CAS that changes the word either way: setting `RECHECK`
            // (even if set already, the deliverer cleared it before the
            // value it will retire from) fails the retirement.
            let new = if w & ACTIVE == 0 {
                w | ACTIVE
            } else {
                w | RECHECK
            };
            // AcqRel: Release orders our push before the deliverer's next
            // look; Acquire, if we take the role, pairs with the Release of
            // the retirement that left the delivery owed.
            match self.pending.compare_exchange_weak(w, new, AcqRel, Relaxed) {
                Ok(_) => {
                    if w & ACTIVE == 0 {
                        self.run_delivery();
                    }
                    return;
                }
                Err(actual) => w = actual,
            }
        }
    }

    /// Called by a waiter that cancelled: counts it for the queue's
    /// sweep, and rechecks; if a deliverer that keeps finding nothing
    /// to deliver asks for help, takes the role over from it (see
    /// [`crate::handover`]). If the running deliverer is far behind the
    /// withdrawals, a dropped future waits for it to catch up, or for its
    /// role (see [`crate::backlog`]).
    pub(super) fn withdrawn(&self, who: Withdrawer) {
        let ticket = self.backlog.withdraw();
        if self.mark_recheck() || self.handover.offer().is_some() {
            return self.run_delivery();
        }
        let took_the_role = self.backlog.let_the_dequeuer_catch_up(who, ticket, || {
            // Relaxed: a look before the RMW, which decides (and sets
            // `RECHECK` only when the role may be ours).
            (self.pending.load(Relaxed) & ACTIVE == 0 && self.mark_recheck())
                || self.handover.offer().is_some()
        });
        if took_the_role {
            self.run_delivery();
        }
    }

    /// Hands `pending` permits to waiters in order, or, once closed, sends
    /// every waiter away. The caller holds ACTIVE.
    pub(super) fn run_delivery(&self) {
        // Our callers (`deliver`, `recheck`, `close`) have just set ACTIVE.
        let role = Role(self);
        let mut panics = Panics::new();
        // The wakeups we owe, delivered once we retire: never while we hold
        // the role, which a waker may need (one that acquires, or polls its
        // task on the spot), so past the few kept inline the list allocates.
        let mut wakeups = WakeList::new();
        // Whether to fold cancelled waiters at the head even with nothing to
        // deliver (after a cancel), so that their demand and nodes do not
        // linger until the next release.
        let mut sweep = false;
        // Whether we announced `OWED` since we last found a head (then
        // looked at the queue again), and whether the last look found its
        // front still half-way through a push: we then retire leaving the
        // delivery owed to that waiter.
        let mut announced = false;
        let mut spins = 0;
        // Passes after the first: cancels that keep setting `RECHECK` fail
        // our retirement as often as we try it.
        let mut tired = Tiredness::after(TIRED_PASSES);
        let mut first = true;
        // Whether the last pass swept the queue (the next one delivers).
        let mut swept = false;
        // Whether the last run of withdrawn heads stopped at `STEP` with
        // more to do: we pass again rather than retire, so that withdrawn
        // waiters do not stay queued until the next release.
        let mut unfinished = false;
        'pass: loop {
            if !first && self.handover.fruitless(&mut tired) {
                if sweep {
                    // A pass of ours was to fold cancelled waiters at the
                    // head: the helper's first pass does it instead.
                    // Relaxed: the handover's Release publishes it.
                    self.pending.fetch_or(RECHECK, Relaxed);
                }
                if self.handover.accept(&mut tired, false) {
                    // The helper holds ACTIVE now, and delivers from here.
                    wakeups.wake_all(&mut panics);
                    panics.resume();
                    return;
                }
            }
            first = false;
            // Acquire: pairs with releasers' Release additions.
            let mut w = self.pending.load(Acquire);
            if w & RECHECK != 0 {
                // A waiter cancelled: this pass looks at the head afresh, and
                // a later cancel changes the word, failing our retirement.
                w = self.pending.fetch_and(!RECHECK, AcqRel) & !RECHECK;
                sweep = true;
            }
            let amount = (w as isize) >> SHIFT;
            let mut leave_owed = false;
            if w & CLOSED != 0 {
                // The drain takes every node, withdrawn or not, and ends
                // when none is left: what a run of withdrawn heads stopped
                // at before the close is the drain's now. (Left set, it made
                // a deliverer that found nothing left to drain pass again
                // for ever.)
                unfinished = false;
                if let Some(head) = role.take_head().or_else(|| role.pop()) {
                    self.found_head(w, &mut spins, &mut announced);
                    // Fold first (a waiter sent away finds its demand gone),
                    // then send it away unless it cancelled meanwhile (its
                    // canceller leaves the fold to us either way).
                    self.fold(head.data());
                    match Waiter::notify_later(&head, CLOSED_TOKEN) {
                        Some(wakeup) => wakeups.push(wakeup),
                        // Withdrawn: its node goes now.
                        None => self.backlog.freed(1),
                    }
                    continue;
                }
                // The queue looks empty. AcqRel RMW: the last look at
                // `count`; a waiter counted after it sees CLOSED (module
                // notes), one counted before it shows here.
                let c = self.count.fetch_add(0, AcqRel);
                if c < 0 || amount > 0 {
                    // A counted waiter has not finished its push: leave the
                    // drain to it rather than wait for it.
                    if self.in_flight(&mut spins, &mut announced) {
                        continue;
                    }
                    leave_owed = true;
                }
            } else {
                if (sweep || unfinished) && !swept && role.sweep() {
                    // Demand was folded: look at the words again. The next
                    // pass delivers before it sweeps again: cancels that
                    // keep coming would otherwise keep us sweeping while
                    // the head waits.
                    swept = true;
                    continue;
                }
                swept = false;
                if amount <= 0 && (sweep || unfinished) {
                    sweep = false;
                    // A `None` (a push half-done) just ends the sweep.
                    let (head, folded, more) = role.live_head();
                    unfinished = more;
                    if let Some(head) = head {
                        role.put_head(head);
                    }
                    if folded {
                        continue;
                    }
                }
                if amount > 0 {
                    'deliver: {
                        // `pending` covers demand, so a counted waiter is queued
                        // or about to be.
                        let (head, folded, more) = role.live_head();
                        unfinished = more;
                        if folded {
                            // Withdrawn heads gone, their demand folded: look
                            // at the words again.
                            self.found_head(w, &mut spins, &mut announced);
                            if let Some(head) = head {
                                role.put_head(head);
                            }
                            continue 'pass;
                        }
                        let Some(head) = head else {
                            // Half-way through its push: leave the delivery to
                            // it rather than wait for it.
                            if self.in_flight(&mut spins, &mut announced) {
                                continue 'pass;
                            }
                            leave_owed = true;
                            break 'deliver;
                        };
                        self.found_head(w, &mut spins, &mut announced);
                        let need = head.data();
                        if amount as usize >= need {
                            // AcqRel: Acquire is already ours; Release for the
                            // next deliverer.
                            self.pending.fetch_sub(need << SHIFT, AcqRel);
                            // The token now, the wakeup after we retire: the role
                            // is held for less time (a wakeup may schedule a
                            // task), and a panicking waker cannot leave it held.
                            match Waiter::notify_later(&head, GRANTED) {
                                Some(wakeup) => wakeups.push(wakeup),
                                None => {
                                    // Cancelled meanwhile: take the permits back
                                    // and fold its demand.
                                    self.pending.fetch_add(need << SHIFT, AcqRel);
                                    self.fold(need);
                                    self.backlog.freed(1);
                                }
                            }
                            continue 'pass;
                        }
                        // The oldest waiter needs more than we hold: it waits at
                        // the head for later releases.
                        role.put_head(head);
                    }
                }
            }
            // Retire, unless somebody added permits (or closed, or linked a
            // waiter the delivery is owed to) since we looked. Nothing is
            // owed any more unless we leave it so. Release: pairs with the
            // next deliverer's Acquire (and with that of the waiter that
            // takes the role for a delivery owed to it, see `enqueue`).
            if unfinished && !leave_owed {
                // More withdrawn waiters than our steps took: on with the
                // next pass (a waiter that keeps cancelling takes over from
                // a deliverer tired of them).
                continue;
            }
            // Leaving the delivery owed with work left: the waiter that
            // takes it over finds `RECHECK`, and sweeps.
            let keep = match (leave_owed, unfinished) {
                (false, _) => 0,
                (true, false) => OWED,
                (true, true) => OWED | RECHECK,
            };
            if self
                .pending
                .compare_exchange(w, w & !(ACTIVE | OWED) | keep, Release, Relaxed)
                .is_ok()
            {
                // Retired: stop asking for help. (Only after the CAS: a
                // failed retirement is one more fruitless pass. The TIRED
                // this clears may already be the next deliverer's, which
                // then asks again at its next fruitless pass.)
                self.handover.rest(&mut tired);
                // A task's wakeup nests only a few deep in this thread's
                // other wakeups (a waker that takes permits and releases
                // them): see `Wakeup::wake`.
                wakeups.wake_all(&mut panics);
                // The family's policy (sync_core::unwind): the first
                // waker's panic goes on now that the semaphore is
                // consistent, unless this thread is already unwinding (a
                // permit or a future dropped during a panic), where a
                // second panic would abort: it is dropped then.
                panics.resume();
                return;
            }
        }
    }

    /// Under the role, with a counted waiter half-way through its push (the
    /// queue's front not linked yet): `true` to look at the queue again,
    /// after a spin hint, the first [`IN_FLIGHT_SPINS`] times (a running
    /// waiter links within nanoseconds); then announces `OWED` and returns
    /// `true` once more (a waiter that linked before the announcement is
    /// seen now); after that, `false` (retire leaving `OWED`: the waiter
    /// sees it once linked, see `enqueue`).
    fn in_flight(&self, spins: &mut u32, announced: &mut bool) -> bool {
        if spin_in_flight(spins) {
            return true;
        }
        if *announced {
            return false;
        }
        // Relaxed: the fence orders it before our next look at the queue;
        // pairs with the fence in `enqueue`, between a waiter's link and its
        // look at `pending`.
        self.pending.fetch_or(OWED, Relaxed);
        fence(SeqCst);
        *announced = true;
        true
    }

    /// Under the role, on finding a head: nothing is owed any more (only
    /// the role's holder sets `OWED`; the retirement clears it too).
    fn found_head(&self, w: usize, spins: &mut u32, announced: &mut bool) {
        *spins = 0;
        if *announced || w & OWED != 0 {
            // Relaxed: our retirement's Release publishes what we did.
            self.pending.fetch_and(!OWED, Relaxed);
            *announced = false;
        }
    }

    /// Removes a queued waiter's `need` from the deficit. The part of it
    /// that `pending` had already covered becomes free permits again.
    pub(super) fn fold(&self, need: usize) {
        // AcqRel: our permits (if `count` turns positive) are published with
        // Release; Acquire for symmetry with `release`.
        let old = self.count.fetch_add(need as isize, AcqRel);
        let uncovered = old.min(0).unsigned_abs();
        let covered = need.saturating_sub(uncovered);
        if covered > 0 {
            // May dip below zero while a releaser has raised `count` but not
            // yet added to `pending`; its addition restores the balance.
            self.pending.fetch_sub(covered << SHIFT, AcqRel);
        }
    }
}

/// What a waiter's token means.
pub(super) fn token_result(token: Token) -> Result<(), AcquireError> {
    match token {
        GRANTED => Ok(()),
        CLOSED_TOKEN => Err(AcquireError::closed()),
        other => unreachable!("a semaphore waiter got token {other}"),
    }
}

/// Whether `deadline` has passed: see [`crate::clock::passed`].
fn expired(deadline: Option<Instant>) -> bool {
    crate::clock::passed(deadline)
}

/// The deliverer's role: made only by `run_delivery`, whose callers have
/// just set `pending`'s ACTIVE bit, and gone before it retires. Holding it
/// means the `head` and the queue's consumer side are this thread's.
struct Role<'a>(&'a Semaphore);

impl Role<'_> {
    /// Runs `f` on the head the deliverer took from the queue and keeps
    /// for later releases (`None`: the queue's front is the head).
    fn head<R>(&self, f: impl FnOnce(&mut Option<Arc<Waiter>>) -> R) -> R {
        // SAFETY: only the ACTIVE holder touches `head`, and ACTIVE passes
        // from one holder to the next with Release/Acquire RMWs; `f` does
        // not reach `head` again.
        self.0.head.with_mut(|h| f(unsafe { &mut *h }))
    }

    /// The oldest waiter the deliverer has dequeued.
    fn take_head(&self) -> Option<Arc<Waiter>> {
        self.head(Option::take)
    }

    /// Puts the oldest waiter back in front.
    fn put_head(&self, waiter: Arc<Waiter>) {
        self.head(|h| {
            debug_assert!(h.is_none(), "two heads");
            *h = Some(waiter);
        });
    }

    /// Takes the oldest live waiter (`None` if there is none, or the
    /// queue's front is half-way through a push), folding the withdrawn
    /// ones in front of it in one go (one fold for their summed demand,
    /// the same as a fold each); whether it folded any; and whether it
    /// stopped at [`STEP`] of them (the waiter returned may be withdrawn
    /// too, and more may follow).
    fn live_head(&self) -> (Option<Arc<Waiter>>, bool, bool) {
        let mut withdrawn = 0;
        let mut looked = 0;
        let head = loop {
            match self.take_head().or_else(|| self.pop()) {
                // At most `STEP` in one go: each pass stays short.
                Some(waiter) if waiter.is_cancelled() && looked < STEP => {
                    looked += 1;
                    withdrawn += waiter.data();
                }
                other => break other,
            }
        };
        if withdrawn != 0 {
            self.0.fold(withdrawn);
        }
        self.0.backlog.freed(looked);
        (head, withdrawn != 0, looked == STEP)
    }

    /// After a cancel: once the withdrawn waiters not yet freed are as many
    /// as the live ones the last sweep kept that are still queued
    /// ([`Backlog::sweep_due`]), sweeps the queue
    /// ([`WaiterQueue::sweep_with`]), freeing the withdrawn waiters behind
    /// live ones in place and folding their demand. Each sweep costs the
    /// queue's length, which as many withdrawals pay for (O(1) each,
    /// amortized), and memory follows the live waiters, whatever the number
    /// of cancels. Returns whether it freed any.
    ///
    /// [`WaiterQueue::sweep_with`]: sync_core::waiter::WaiterQueue::sweep_with
    /// [`Backlog::sweep_due`]: crate::backlog::Backlog::sweep_due
    fn sweep(&self) -> bool {
        let sem = self.0;
        // Only the ACTIVE holder writes the backlog's counts of nodes freed
        // and kept, and the role's Release/Acquire handoff orders one
        // holder's writes before the next's.
        if !sem.backlog.sweep_due(sem.backlog.withdrawals()) {
            return false;
        }
        let mut withdrawn = 0;
        // SAFETY: the ACTIVE holder is the queue's only consumer (see
        // `pop`). The sweep stops after the waiter that was last when it
        // began: cancels that keep coming wait for the next one.
        let swept = unsafe { sem.queue.sweep_with(|w| withdrawn += w.data()) };
        if withdrawn != 0 {
            // One fold for the sum is the same as a fold each: `fold`
            // frees whatever part of the demand `pending` had covered
            // (only the queue's front can have any, when no head is kept).
            sem.fold(withdrawn);
        }
        sem.backlog.freed(swept.freed);
        sem.backlog.swept(swept.kept);
        swept.freed != 0
    }

    fn pop(&self) -> Option<Arc<Waiter>> {
        // SAFETY: the ACTIVE holder is the queue's only consumer, and each
        // holder's pops happen after the previous holder's (see above).
        let popped = unsafe { self.0.queue.pop() };
        if popped.is_some() {
            self.0.backlog.popped(1);
        }
        popped
    }
}
