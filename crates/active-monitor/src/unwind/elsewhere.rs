//! What a park inside another thread's task body can neither deliver
//! there nor keep: the results nobody took and the task wakeups that this
//! thread kept before that body began (see [`running_queued`]). They go to
//! a thread of their own ([`deliver`]). So do the results still to be
//! dropped at an operation's end when the `Drop` of one parks: each is
//! dropped as a body of its own ([`foreign_body`], see [`drop_deferred`]),
//! and the others were kept before it began.
//!
//! Such a body may be another thread's `call`, made while that thread
//! holds a second monitor, and what this thread kept is its own code's. A
//! `Drop` of a result, or a waker that polls its task on the spot, may
//! call the monitor that other thread holds: delivered in that body, it
//! waits for that thread, which waits for the body. Kept until the body
//! ends, a body that waits for what one of them gives back (a permit a
//! result returns on drop, the next step of a woken task) waits for ever.
//! On a thread of their own, neither waits for the other: the `Drop` or
//! the waker waits for the monitor it calls, the body for what it needs.
//!
//! This is a slow path: it takes a park inside a body run for another
//! thread while this thread keeps something from before that body.

use super::{KeptDrop, TaskWake};
#[cfg(doc)]
use super::{drop_deferred, foreign_body, running_queued};

/// Hands `drops` and `wakes` (kept by this thread before the innermost
/// task body run from a monitor's queue or relayed began) to a new
/// thread, which drops and wakes them as its own (see [`deliver_all`]).
/// If no thread can be started (or under loom, whose models start their
/// own), they are held back on this thread until that body ends, as
/// before this module: a body that waits for one of them then waits for
/// ever.
pub(super) fn deliver(drops: Vec<KeptDrop>, wakes: Vec<(u64, TaskWake)>) {
    #[cfg(not(loom))]
    let (drops, wakes) = match spawn(drops, wakes) {
        Ok(()) => return,
        Err(back) => back,
    };
    super::hold_back(&super::DROPS, drops, |s| &s.drops);
    super::hold_back(&super::TASK_WAKES, wakes, |s| &s.task_wakes);
}

/// What [`deliver`] hands a new thread.
#[cfg(not(loom))]
type Batch = (Vec<KeptDrop>, Vec<(u64, TaskWake)>);

/// Starts a thread that delivers the batch; hands it back if none starts.
#[cfg(not(loom))]
fn spawn(drops: Vec<KeptDrop>, wakes: Vec<(u64, TaskWake)>) -> Result<(), Batch> {
    use std::sync::{Arc, Mutex, PoisonError};
    // Shared, not moved in: a closure that `spawn` fails to run is dropped
    // here, and the batch with it, user code run in the very body this
    // module keeps it out of.
    let batch = Arc::new(Mutex::new(Some((drops, wakes))));
    let theirs = Arc::clone(&batch);
    let started = std::thread::Builder::new()
        .name("active-monitor-deliver".into())
        .spawn(move || {
            let taken = theirs.lock().unwrap_or_else(PoisonError::into_inner).take();
            drop(theirs);
            if let Some((drops, wakes)) = taken {
                deliver_all(drops, wakes);
            }
        });
    match started {
        Ok(_detached) => Ok(()),
        Err(_) => Err(batch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("a thread that did not start took nothing")),
    }
}

/// Drops and wakes what [`deliver`] handed this (new) thread, as its own:
/// kept on its lists first, then delivered one at a time, newest result
/// first, each as a body of its own ([`foreign_body`]). A `Drop` or a
/// waker that parks (one that calls a monitor another thread holds, or
/// one that waits for what another of them gives back) has the park hook
/// hand the rest to a further thread of their own before this thread
/// sleeps; an operation it makes delivers at its end only what it kept
/// itself, the rest stay for this loop (see [`drop_deferred`]). Delivered
/// there instead, inside what the `Drop` called, the next result's `Drop`
/// ran inside a body of a monitor that may be the very one it calls (a
/// second lease of `x`, dropped in the first lease's body of `x`: its
/// call panicked, the panic was dropped and the lease never came back),
/// or, taken out with the rest at that call's end, waited for ever for
/// what the first `Drop` gives back after the call. Panics are caught
/// (and set aside while the next one runs, see
/// [`caught_aside`](super::caught_aside)); nobody waits for this thread,
/// so a panic nobody takes is dropped, as a server's stint drops one
/// (`end_server_stint`).
#[cfg(not(loom))]
fn deliver_all(drops: Vec<KeptDrop>, wakes: Vec<(u64, TaskWake)>) {
    use super::{DEFERRED, DROPS, STATE, TASK_WAKES, caught, caught_aside, discard, drop_later};
    use super::{before_park, foreign_body};
    for k in drops {
        drop_later(k.task);
    }
    for (_, w) in wakes {
        if let Some(w) = super::keep_task(w) {
            caught(|| w.wake());
        }
    }
    loop {
        // Each borrow ends before the user code runs (it may keep more).
        // The park hook is armed for each: a park in an earlier one used
        // its registration up.
        if let Some(k) = DROPS.with(|d| d.borrow_mut().pop()) {
            sync_core::wake_chain::deliver_before_park(before_park);
            foreign_body(|| caught_aside(move || drop(k.task)));
            continue;
        }
        if let Some((_, w)) = TASK_WAKES.with(|l| l.borrow_mut().pop()) {
            sync_core::wake_chain::deliver_before_park(before_park);
            foreign_body(|| caught_aside(|| w.wake()));
            continue;
        }
        if STATE.with(|s| s.deferred.replace(false)) {
            if let Some(p) = DEFERRED.with(|d| d.take()) {
                // Its drop is user code too (see `end_server_stint`).
                caught(|| discard(p));
            }
            continue;
        }
        break;
    }
    // Both lists are empty: free their room, as an operation's end does.
    DROPS.with(|d| drop(core::mem::take(&mut *d.borrow_mut())));
    TASK_WAKES.with(|l| drop(core::mem::take(&mut *l.borrow_mut())));
    STATE.with(|s| {
        s.drops.set(false);
        s.task_wakes.set(false);
    });
    // The unparks of blocked callers that the drops' serves kept.
    super::wake_deferred();
}
