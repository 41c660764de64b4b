//! The tasks a holder is done with ([`drop_later`]): kept per thread, and
//! dropped once the thread has let go of every monitor, or before it parks
//! (see [`before_park`]).

use std::sync::Arc;

use sync_core::wake_chain;

#[cfg(doc)]
use super::running_queued;
use super::{
    DROPS, STATE, before_park, caught_aside, drop_caught, foreign_body, hold_back, keep, runs_here,
};
#[cfg(doc)]
use super::{finish, resume_deferred};

/// Anything that may go to another thread: a task the holder is done
/// with, kept by [`drop_later`] as a trait object of its own (a task is a
/// `dyn Job<T, S>`, which a thread-local list of every monitor's tasks
/// cannot name). `Send`: a park inside another thread's task body hands
/// what was kept before it to a thread of its own (see
/// [`elsewhere::deliver`](super::elsewhere::deliver)).
pub(crate) trait DropLater: Send + Sync {}

impl<X: ?Sized + Send + Sync> DropLater for X {}

/// A task kept by [`drop_later`].
pub(super) struct KeptDrop {
    /// The monitor whose task body ran when it was kept (0 if none, or
    /// once [`drop_deferred`] takes it up): a park inside that body keeps
    /// it (see [`before_park`]).
    monitor: usize,
    /// Its number on this thread (see `State::kept_seq`): a park inside a
    /// task body run from a queue hands it to a thread of its own if it was
    /// kept before that body began (see [`running_queued`]).
    seq: u64,
    pub(super) task: Arc<dyn DropLater>,
}

/// Keeps `task` (a task the holder is done with, maybe the last reference
/// to it) to be dropped once this thread runs no task body and has let go
/// of every monitor: at the end of the operation that served it, as a
/// deferred panic is resumed ([`finish`], [`resume_deferred`]). Its drop
/// may be user code's last word on a value (a result nobody took, a
/// precondition's captures), which may use this monitor. A panic in it is
/// deferred as any other.
///
/// The family's next blocking wait on this thread drops, before it parks,
/// the kept tasks of every monitor but those whose task bodies run on
/// this thread, innermost or below (see [`before_park`]).
pub(crate) fn drop_later(task: Arc<dyn DropLater>) {
    let (monitor, seq) = STATE.with(|s| {
        let seq = s.kept_seq.get() + 1;
        s.kept_seq.set(seq);
        (s.running.get(), seq)
    });
    let kept = KeptDrop { monitor, seq, task };
    match keep(&DROPS, kept, |s| &s.drops) {
        Some(k) => drop_caught(k.task),
        None => wake_chain::deliver_before_park(before_park),
    }
}

/// How many tasks [`drop_later`] keeps on this thread.
pub(crate) fn kept_drops() -> usize {
    if !STATE.with(|s| s.drops.get()) {
        return 0;
    }
    DROPS.try_with(|d| d.borrow().len()).unwrap_or(0)
}

/// Drops the tasks kept by [`drop_later`], newest first, no borrow held
/// while a drop runs (it may use a monitor, whose serve keeps more); their
/// panics are deferred. What the drops keep in turn goes the same way,
/// until nothing is kept. The list has no destructor (see `Kept`): its
/// room goes once it is drained, or a thread's exit would leak it.
#[inline]
pub(crate) fn drop_deferred() {
    // A look first (the common case: nothing kept), the drops out of line.
    if STATE.with(|s| s.drops.replace(false)) {
        drop_deferred_slow();
    }
}

/// [`drop_deferred`]'s drops: one at a time, newest first, each taken off
/// the list as it goes and dropped as a body of its own
/// ([`foreign_body`]), with the rest still on the list. A `Drop` that
/// parks (for what another result of the batch gives back: a permit)
/// thus has the park hook hand the rest to a thread of their own
/// ([`elsewhere::deliver`](super::elsewhere::deliver)) instead of
/// sleeping with them; an operation it makes delivers at its end only
/// what it kept itself. Taken out as one batch before the first drop, a
/// park in one found nothing to hand on and waited for ever; dropped from
/// the list without that, the park hook dropped the others inside the
/// body the `Drop` had called, a body their own code never runs in (one
/// that called a monitor held by a thread waiting for that body's monitor
/// waited for ever). Nothing parks, as in the common case: every one is
/// dropped here, on the thread that ran its task.
///
/// But for those kept before the innermost body run for another thread
/// began (see [`running_queued`]), which stay: only on a deliver thread,
/// or inside a `Drop` this function runs, does an operation end inside
/// such a body; anywhere else that body's monitor is held, and an
/// operation that ends there delivers nothing.
#[cold]
#[inline(never)]
fn drop_deferred_slow() {
    let since = STATE.with(|s| s.since.get());
    // Ours are results of no monitor held here now: an operation ends
    // once its thread has let go of every monitor, and a server's stint
    // has let go of its own (its drops run as tasks of it only so that a
    // call of it there panics). A park inside one of their drops hands the
    // rest on: kept back there as the server's monitor's, a `Drop` that
    // waited for one of them waited for ever. The list is in the order
    // kept (see `State::kept_seq`), so ours are at its end: a drop inside
    // one of them that makes an operation looks at that operation's own,
    // not at the rest (but for what a park could hand to no thread, put
    // back behind newer ones, see `elsewhere::deliver`: what stands in
    // front of it waits for the next round).
    let _ = DROPS.try_with(|d| {
        let mut d = d.borrow_mut();
        for k in d.iter_mut().rev().take_while(|k| k.seq >= since) {
            k.monitor = 0;
        }
    });
    loop {
        // The newest of ours, and whether others stay on the list.
        let next = DROPS
            .try_with(|d| {
                let mut d = d.borrow_mut();
                if d.last().is_none_or(|k| k.seq < since) {
                    return None;
                }
                let k = d.pop()?;
                Some((k, !d.is_empty()))
            })
            .ok()
            .flatten();
        let Some((k, rest)) = next else {
            break;
        };
        if rest {
            // Seen by a park inside this drop (see `before_park`), which
            // hands them on: kept before its body began.
            STATE.with(|s| s.drops.set(true));
            wake_chain::deliver_before_park(before_park);
        }
        foreign_body(move || caught_aside(move || drop(k.task)));
    }
    // Drained, or only those kept before the innermost foreign body left:
    // theirs to deliver.
    let left = DROPS
        .try_with(|d| {
            let mut d = d.borrow_mut();
            if d.is_empty() {
                drop(core::mem::take(&mut *d));
            }
            !d.is_empty()
        })
        .unwrap_or(false);
    STATE.with(|s| s.drops.set(left));
}

/// [`before_park`]'s part for the tasks kept by [`drop_later`]: drops them
/// one at a time, but for two kinds:
///
/// * those of the monitors whose task bodies run on this thread, innermost
///   or below, which it keeps: a `Drop` that uses the monitor it belongs
///   to would find it held, by this very thread (it waits for the end of
///   the body, as before). Below the innermost too: a serve that kept a
///   result nobody took and then ran a task whose body called another
///   monitor still holds its own, and a `Drop` that called it there
///   waited for ever for this thread.
/// * those kept before the innermost task body run from a monitor's queue
///   began (see [`running_queued`]), which go to `elsewhere`, for a thread
///   of their own ([`elsewhere::deliver`](super::elsewhere::deliver)).
///   That body may be another thread's call, made while that thread holds
///   another monitor, and these results are this thread's own code's:
///   dropped in that body, a result whose `Drop` calls the monitor that
///   other thread holds (a lease returned on drop) would wait for that
///   thread, which waits for this body; kept until the body ends, a body
///   that waits for what one of them releases (a permit its `Drop` gives
///   back) would wait for ever. On a thread of their own, neither waits
///   for the other.
///
/// Parked, the thread would keep the others for as long as it waits,
/// maybe for what one of them releases (a body that enabled a `when` of
/// another monitor whose completion was dropped, and then waits for a
/// permit its result holds, waited for ever). A `Drop` that uses the
/// monitor whose body runs below panics, as a task waker does there.
/// Whether it dropped any here.
pub(super) fn drop_deferred_before_park(elsewhere: &mut Vec<KeptDrop>) -> bool {
    if !STATE.with(|s| s.drops.replace(false)) {
        return false;
    }
    // Taken out first: no borrow while a drop runs (it may keep more).
    let Ok(all) = DROPS.try_with(|d| core::mem::take(&mut *d.borrow_mut())) else {
        return false;
    };
    let since = STATE.with(|s| s.since.get());
    let mut go = Vec::new();
    let mut held = Vec::new();
    for k in all {
        if k.monitor != 0 && runs_here(k.monitor) {
            held.push(k);
        } else if k.seq < since {
            elsewhere.push(k);
        } else {
            go.push(k);
        }
    }
    hold_back(&DROPS, held, |s| &s.drops);
    let dropped = !go.is_empty();
    for k in go {
        caught_aside(move || drop(k.task));
    }
    dropped
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::unwind::{DROPS, before_park, running, running_queued};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// A kept value that counts its drop, on the thread named, if any.
    struct Count(&'static AtomicUsize, Option<&'static str>);

    impl Drop for Count {
        fn drop(&mut self) {
            if let Some(on) = self.1 {
                let name = std::thread::current().name().map(str::to_owned);
                assert_eq!(name.as_deref(), Some(on), "dropped on its thread");
            }
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// The kept-drops list has no destructor: once drained it must hold no
    /// room, or every thread that ever kept a task would leak it at exit.
    #[test]
    fn a_drained_drop_list_keeps_no_room() {
        for _ in 0..100 {
            drop_later(Arc::new(String::from("a result nobody took")));
        }
        assert!(DROPS.with(|d| d.borrow().capacity()) >= 100);
        drop_deferred();
        assert_eq!(
            DROPS.with(|d| (d.borrow().len(), d.borrow().capacity())),
            (0, 0)
        );
    }

    /// Before a park, a task body's thread drops what it keeps of other
    /// monitors, and keeps its own monitor's (a `Drop` may use it).
    #[test]
    fn a_park_drops_the_kept_tasks_of_every_monitor_but_the_running_one() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let dropped = || DROPPED.load(SeqCst);
        running(1, || drop_later(Arc::new(Count(&DROPPED, None))));
        running(2, || drop_later(Arc::new(Count(&DROPPED, None))));
        running(1, || {
            before_park();
            assert_eq!(dropped(), 1, "monitor 2's, not the running one's");
            sync_core::wake_chain::before_park();
            assert_eq!(dropped(), 1);
        });
        running(2, before_park);
        assert_eq!(dropped(), 2);
        assert_eq!(kept_drops(), 0);
    }

    /// A park inside a task body run from a queue hands what the thread
    /// kept before that body began to a thread of its own, which drops
    /// it, and drops here what it kept inside the body.
    #[test]
    fn a_park_in_a_queued_body_hands_what_was_kept_before_it_to_a_thread() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let dropped = || DROPPED.load(SeqCst);
        let here = std::thread::current().name().unwrap_or_default().to_owned();
        let here: &'static str = Box::leak(here.into_boxed_str());
        running(1, || {
            // Kept in a body of monitor 4 that monitor 1's body called.
            running(4, || {
                drop_later(Arc::new(Count(&DROPPED, Some("active-monitor-deliver"))))
            });
            running_queued(2, || {
                // Kept in a body of monitor 3 that this body called.
                running(3, || drop_later(Arc::new(Count(&DROPPED, Some(here)))));
                before_park();
                assert_eq!(kept_drops(), 0, "none kept back");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while dropped() < 2 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the thread dropped it"
                    );
                    std::thread::yield_now();
                }
            });
        });
        assert_eq!(kept_drops(), 0);
    }

    /// A monitor whose body runs below the innermost is held by this
    /// thread too: its kept tasks stay, and go once it is let go of.
    #[test]
    fn a_park_keeps_the_kept_tasks_of_every_monitor_running_below() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let dropped = || DROPPED.load(SeqCst);
        running(1, || {
            drop_later(Arc::new(Count(&DROPPED, None)));
            running(2, || {
                running(3, || {
                    before_park();
                    assert_eq!(dropped(), 0, "monitor 1 runs below: held");
                });
            });
            before_park();
            assert_eq!(dropped(), 0);
        });
        before_park();
        assert_eq!(dropped(), 1);
        assert_eq!(kept_drops(), 0);
    }
}
