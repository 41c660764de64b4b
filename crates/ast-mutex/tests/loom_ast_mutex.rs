//! Loom models of AstMutex.
//!
//! Every model runs in the wake modes it concerns with spinning off (a
//! waiter queues at once, so the queue/notify protocol is what loom
//! explores). Threads and tasks wait on `sync_core::waiter`, whose loom
//! build makes a timed wait's timeout a nondeterministic early return. Run with
//! `cargo xtask loom -p ast-mutex`.
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ast_mutex::{AstMutex, Config, StateSet, WakeMode};
use sync_core::sync::{Arc, thread};
use sync_core::{loom, model};

ast_mutex::states! { enum St { A, B, C } }

const MODES: [WakeMode; 2] = [WakeMode::Compete, WakeMode::Handoff];

fn mutex(mode: WakeMode, initial: St) -> Arc<AstMutex<St, usize>> {
    let config = Config::new().wake_mode(mode).spins(0).yields(0);
    Arc::new(AstMutex::with_config(initial, 0, config))
}

/// A Compete mutex with concurrency restriction: one watcher at a time
/// (it spins once under loom), the others park at once.
fn restricted(initial: St) -> Arc<AstMutex<St, usize>> {
    let config = Config::new().spins(0).yields(0).watchers(1);
    Arc::new(AstMutex::with_config(initial, 0, config))
}

/// Concurrency restriction: two waiters for B while the holder exits to B.
/// One may watch (holding the one watcher slot) while the other parks at
/// once; the exit then leaves the parked one parked for the watcher, whose
/// exit to B must reach it. Each gets in exactly once.
#[test]
fn restricted_exit_leaves_a_parked_waiter_to_the_watcher() {
    model::check_with_bound(2, || two_waiters_for_b_each_get_in_once(&restricted(St::A)));
}

/// Handoff to a running waiter: two waiters for B while the holder exits
/// to B, without restriction. One may be watching (a Handoff waiter whose
/// policy watches shows exits that it runs with a watcher slot; one spin
/// under loom) while the other is parked; the exit then releases the lock
/// for the watcher instead of handing it to the parked one, whose turn
/// must still come. Each gets in exactly once.
#[test]
fn handoff_exit_leaves_a_parked_waiter_to_a_running_watcher() {
    model::check_with_bound(2, || {
        let config = Config::new()
            .wake_mode(WakeMode::Handoff)
            .spins(1)
            .yields(0);
        two_waiters_for_b_each_get_in_once(&Arc::new(AstMutex::with_config(St::A, 0, config)));
    });
}

/// The scenario of the two models above (and of the Broadcast model): the
/// holder of `m` (in A) exits to B while two waiters for B wait; each gets
/// in exactly once, and the waiter table is left empty.
fn two_waiters_for_b_each_get_in_once(m: &Arc<AstMutex<St, usize>>) {
    let mut holder = m.enter(St::A);
    let first = waiter(m, St::B, 1, St::B);
    let second = waiter(m, St::B | St::C, 10, St::B);
    *holder += 100;
    holder.exit(St::B);
    first.join().unwrap();
    second.join().unwrap();
    assert_eq!(*m.enter(St::B), 111);
    assert_eq!(m.__test_waiter_table_size(), (0, 0));
}

/// Concurrency restriction with a timed waiter: a patient waiter and a
/// timed one for B, the holder exits to B. Whether the timed one watched
/// (and the exit left the patient one parked for it) and then gave up, or
/// parked and timed out, the patient one gets in.
#[test]
fn restricted_timed_watcher_gives_up_and_passes_the_state_on() {
    model::check_with_bound(2, || {
        let m = restricted(St::A);
        let g = m.enter(St::A);
        let timed = timed_waiter(&m, St::B, 10, St::B);
        let patient = waiter(&m, St::B, 1, St::B);
        g.exit(St::B);
        let entered = timed.join().unwrap();
        patient.join().unwrap();
        assert_eq!(*m.enter(St::B), 1 + if entered { 10 } else { 0 });
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
    });
}

/// A thread that enters in a state of `want`, adds `add`, and exits in `next`.
fn waiter(
    m: &Arc<AstMutex<St, usize>>,
    want: impl Into<StateSet<St>>,
    add: usize,
    next: St,
) -> thread::JoinHandle<()> {
    let (m, want) = (Arc::clone(m), want.into());
    thread::spawn(move || {
        let mut g = m.enter(want);
        *g += add;
        g.exit(next);
    })
}

/// A thread that tries for a while (loom: until its timed park returns,
/// which may be at once) to enter in a state of `want`, and if it does,
/// adds `add` and exits in `next`; returns whether it entered.
fn timed_waiter(
    m: &Arc<AstMutex<St, usize>>,
    want: impl Into<StateSet<St>>,
    add: usize,
    next: St,
) -> thread::JoinHandle<bool> {
    let (m, want) = (Arc::clone(m), want.into());
    thread::spawn(
        move || match m.try_enter_for(want, Duration::from_secs(1)) {
            Some(mut g) => {
                *g += add;
                g.exit(next);
                true
            }
            None => false,
        },
    )
}

/// Waiters with different entry sets are woken only by a state in their
/// set, and each sees the state it was promised: A -> B (first waiter) ->
/// C (second waiter) -> A.
#[test]
fn exit_wakes_only_a_waiter_whose_set_contains_the_state() {
    for mode in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(mode, St::A);
            let wants_b = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut g = m.enter(St::B);
                    assert_eq!(g.entered_in(), St::B);
                    *g += 1;
                    g.exit(St::C);
                })
            };
            let wants_c = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut g = m.enter(St::C);
                    assert_eq!(g.entered_in(), St::C);
                    assert_eq!(*g, 2, "entered C before the B waiter made it");
                    *g += 1;
                    g.exit(St::A);
                })
            };
            let mut g = m.enter(St::A);
            *g += 1;
            g.exit(St::B);
            wants_b.join().unwrap();
            wants_c.join().unwrap();
            assert_eq!(m.state(), Some(St::A));
            assert_eq!(*m.enter(St::A), 3);
        });
    }
}

/// A parked waiter and a newcomer both want B while the holder exits in B:
/// each gets in exactly once, one at a time, whoever wins the race.
#[test]
fn newcomer_races_a_handoff() {
    for mode in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(mode, St::A);
            let mut holder = m.enter(St::A);
            let waiter = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut g = m.enter(St::B);
                    *g += 1;
                    g.exit(St::B);
                })
            };
            let newcomer = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut g = m.enter(St::B | St::C);
                    *g += 10;
                    g.exit(St::B);
                })
            };
            *holder += 100;
            holder.exit(St::B);
            waiter.join().unwrap();
            newcomer.join().unwrap();
            // The cell's accesses are checked by loom: an overlap fails.
            assert_eq!(*m.enter(St::B), 111);
        });
    }
}

/// A patient waiter for B and a hasty one (with a timeout) for `hasty_set`,
/// while the holder exits to B: the patient one always gets in, and the
/// count shows whether the hasty one did.
fn timeout_race(mode: WakeMode, hasty_set: StateSet<St>) {
    let m = mutex(mode, St::A);
    let patient = waiter(&m, St::B, 1, St::B);
    let hasty = timed_waiter(&m, hasty_set, 10, St::B);
    m.enter(St::A).exit(St::B);
    patient.join().unwrap();
    let hasty_entered = hasty.join().unwrap();
    assert_eq!(*m.enter(St::B), if hasty_entered { 11 } else { 1 });
    assert_eq!(m.state(), Some(St::B));
    // A timed-out waiter that found the table lock held left its node to
    // the next holder (loom: whenever its `try_lock` fails); that holder
    // removed it, and this look is one.
    assert_eq!(m.__test_waiter_table_size(), (0, 0));
}

/// The waiters are in different groups; the exit to B may race the
/// timeout, and the timed-out waiter may find the table lock held and
/// leave its node to the next holder (loom makes the table lock's
/// `lock_until` a `try_lock`). If the exit chose the timed-out waiter's group, its wake passes
/// on to the patient one.
#[test]
fn timeout_races_an_exit() {
    for mode in MODES {
        model::check_with_bound(2, move || timeout_race(mode, St::B | St::C));
    }
}

/// The waiters are in one group: its count and the published summary must
/// stay right while one of its threads leaves.
#[test]
fn two_waiters_of_one_group_one_timing_out() {
    for mode in MODES {
        model::check_with_bound(2, move || timeout_race(mode, St::B.into()));
    }
}

/// A guard dropped without `exit` restores the state it entered in and
/// wakes a waiter for that state.
#[test]
fn drop_restores_the_entry_state() {
    model::check_with_bound(2, || {
        let m = mutex(WakeMode::Compete, St::A);
        let dropper = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut g = m.enter(St::A);
                *g += 1;
                drop(g); // back to A
            })
        };
        let mover = waiter(&m, St::A, 1, St::B);
        // Whichever order they ran in, B comes once; send it back to A.
        let g = m.enter(St::B);
        assert!(*g >= 1);
        g.exit(St::A);
        dropper.join().unwrap();
        mover.join().unwrap();
        assert_eq!(m.state(), Some(St::A));
        assert_eq!(*m.enter(St::A), 2);
    });
}

/// A waiter woken for B loses the race to the holder barging back in, which
/// leaves in C: the exit to C must wake the C waiter, and the B waiter must
/// park again and be woken by the later exit to B.
///
/// Bound 1: at 2 it takes minutes (three threads, each wait and exit taking
/// the table lock); one preemption already puts the barging holder between
/// the wake-up and the woken waiter's try.
#[test]
fn a_woken_waiter_that_loses_the_race_strands_no_one() {
    model::check_with_bound(1, || {
        let m = mutex(WakeMode::Compete, St::A);
        let wants_b = waiter(&m, St::B, 1, St::A);
        let wants_c = waiter(&m, St::C, 10, St::B);
        m.enter(St::A).exit(St::B);
        // Barge back in while B's waiter may still be waking up.
        if let Some(mut g) = m.try_enter(St::B) {
            *g += 100;
            g.exit(St::C);
        } else {
            // It already got in; wait for it and send C's waiter on.
            m.enter(St::A).exit(St::C);
        }
        wants_b.join().unwrap();
        wants_c.join().unwrap();
        let total = *m.enter(St::A | St::B);
        assert!(total == 111 || total == 11, "total {total}");
    });
}

/// A waiter woken to compete that takes the lock by itself must take its
/// node out of the table, whatever state it then exits to: here it exits
/// to C, the C waiter gets in and exits to B, and that exit must reach the
/// B waiter queued behind the woken one's node (a node left in the table
/// would take that exit's pass and strand it). Each gets in once, in
/// whatever order the two B waiters arrive.
///
/// Bound 1: four threads, each wait and exit taking the table lock.
#[test]
fn a_woken_waiter_that_enters_by_itself_strands_no_one_behind_it() {
    model::check_with_bound(1, || {
        let m = mutex(WakeMode::Compete, St::A);
        let holder = m.enter(St::A);
        let first = waiter(&m, St::B, 1, St::C);
        let then_b = waiter(&m, St::C, 10, St::B);
        let last = waiter(&m, St::B, 100, St::B);
        holder.exit(St::B);
        for t in [first, then_b, last] {
            t.join().unwrap();
        }
        assert_eq!(*m.enter(St::B), 111);
    });
}

/// Polls `f` once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(f).poll(&mut cx)
}

/// A task queued for B is dropped while the holder exits to B, racing the
/// exit's handoff (or wake-up); a thread waits for B behind it. Whether the
/// future was still queued, handed the lock, or woken to compete when it
/// was dropped, the thread gets in, and the lock ends free in B.
#[test]
fn a_cancelled_async_waiter_races_an_exit() {
    for mode in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(mode, St::A);
            let holder = m.enter(St::A);
            let task = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut f = m.enter_async(St::B);
                    if let Poll::Ready(mut g) = poll_once(&mut f) {
                        *g += 10;
                        g.exit(St::B);
                    }
                    // Pending: dropped while queued, or after being notified.
                    drop(f);
                })
            };
            let patient = waiter(&m, St::B, 1, St::B);
            holder.exit(St::B);
            task.join().unwrap();
            patient.join().unwrap();
            let g = m.enter(St::B);
            assert!(*g == 1 || *g == 11, "count {}", *g);
            drop(g);
            assert_eq!(m.state(), Some(St::B));
            assert_eq!(m.__test_waiter_table_size(), (0, 0), "nothing left queued");
        });
    }
}

/// A task waits for B and is woken by the exit to B; it must return the
/// guard, in the state it was promised, whatever the interleaving.
#[test]
fn an_async_waiter_is_woken_by_an_exit() {
    for mode in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(mode, St::A);
            let task = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut g = loom::future::block_on(m.enter_async(St::B));
                    assert_eq!(g.entered_in(), St::B);
                    *g += 1;
                    g.exit(St::C);
                })
            };
            m.enter(St::A).exit(St::B);
            task.join().unwrap();
            assert_eq!(*m.enter(St::C), 1);
        });
    }
}

/// Broadcast: two waiters of B, one exit to B; both get in (each exits
/// back to B), and nothing stays queued.
#[test]
fn broadcast_lets_every_waiter_of_the_state_through() {
    model::check_with_bound(2, || {
        two_waiters_for_b_each_get_in_once(&mutex(WakeMode::Broadcast, St::A));
    });
}

/// A timed waiter woken to compete gives up (its deadline passed while it
/// slept) while the exit that woke it still holds the word: it must pass
/// the wake on, or the untimed waiter of the same state sleeps for ever
/// with the lock free in that state. (Found by an independent review.)
#[test]
fn a_timed_waiter_woken_past_its_deadline_passes_the_wake_on() {
    model::check_with_bound(2, || {
        let m = mutex(WakeMode::Compete, St::A);
        let g = m.enter(St::A);
        let timed = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let _ = m.try_enter_for(St::B, Duration::from_secs(1));
            })
        };
        let patient = waiter(&m, St::B, 1, St::B);
        g.exit(St::B);
        timed.join().unwrap();
        patient.join().unwrap();
    });
}

/// Lets the other threads run until one waiter is queued.
fn wait_until_queued(m: &AstMutex<St, usize>) {
    while m.__test_waiter_table_size() != (1, 1) {
        thread::yield_now();
    }
}

/// Barges into B `times` times: each `try_enter(B)` that succeeds adds 10
/// and drops its guard, back to B (an exit to B, which passes a woken
/// waiter for B). Returns how many succeeded.
fn barge_into_b(m: &AstMutex<St, usize>, times: usize) -> usize {
    let mut barges = 0;
    for _ in 0..times {
        if let Some(mut g) = m.try_enter(St::B) {
            *g += 10;
            barges += 1;
            drop(g);
        }
    }
    barges
}

/// Compete mode's bound, in exits (Handoff mode's is tighter: one pass
/// once the waiter runs; it uses the same skip and pending counts, so the
/// model runs in both): a waiter for B is woken by the exit to
/// B and, before it runs, the holder barges back in and leaves in B again,
/// over and over (each such exit passes the woken waiter). Under loom's
/// constants, two exits pass it once it runs, and three while it has not
/// run yet (pending), and an exit that passes it while it is pending may
/// be counted one exit late (exits skip the table but one in 2): the fifth
/// barge fails at the latest (the lock is held for the waiter, or the
/// waiter has been and left C). Before the bound counted exits, a woken
/// waiter that had not run yet was not counted at all, and every barge
/// succeeded.
#[test]
fn a_woken_waiter_passed_by_three_exits_is_handed_the_lock() {
    passed_by_three_exits("waiter", |m| waiter(m, St::B, 1, St::C));
}

/// The same with a task: the lock is handed to the woken task's slot, and
/// its next poll returns the guard.
#[test]
fn a_woken_task_passed_by_three_exits_is_handed_the_lock() {
    passed_by_three_exits("task", |m| {
        let m = Arc::clone(m);
        thread::spawn(move || {
            let mut g = loom::future::block_on(m.enter_async(St::B));
            *g += 1;
            g.exit(St::C);
        })
    });
}

/// The two models above, in every mode: `spawn` starts the first in line,
/// which waits for B, adds 1, and leaves in C.
fn passed_by_three_exits(
    what: &'static str,
    spawn: fn(&Arc<AstMutex<St, usize>>) -> thread::JoinHandle<()>,
) {
    for mode in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(mode, St::A);
            let g = m.enter(St::A);
            let first = spawn(&m);
            wait_until_queued(&m);
            g.exit(St::B);
            let barges = barge_into_b(&m, 5);
            assert!(
                barges <= 4,
                "{mode:?}: the woken {what} was passed by {barges} exits"
            );
            first.join().unwrap();
            assert_eq!(*m.enter(St::C), 1 + 10 * barges);
            assert_eq!(m.__test_waiter_table_size(), (0, 0));
        });
    }
}

/// Compete mode, when the woken waiter has not run yet: two waiters for B
/// are queued; the exit to B wakes the first and, before it runs, a thread
/// (here a timed one, for C, which never comes) queues while the lock is
/// free in B. It finds the first in line for B pending (woken, not back)
/// and wakes the second as well. Whatever runs first, each waiter for B
/// enters exactly once, the timed one gives up, and nothing stays queued.
#[test]
fn a_thread_that_parks_past_a_pending_waiter_wakes_the_next_in_line() {
    model::check_with_bound(1, || {
        let m = mutex(WakeMode::Compete, St::A);
        let g = m.enter(St::A);
        let first = waiter(&m, St::B, 1, St::B);
        let second = waiter(&m, St::B, 10, St::B);
        while m.__test_waiter_table_size() != (1, 2) {
            thread::yield_now();
        }
        g.exit(St::B);
        assert!(m.try_enter_for(St::C, Duration::from_secs(1)).is_none());
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(*m.enter(St::B), 11);
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
    });
}

/// A timed waiter, woken and then passed, gives up while the barging
/// holder's exit may be handing it the lock: either it gave up first (and
/// the lock stays free in B) or it owns the lock and uses it; the table is
/// left empty either way. Three barges: a waiter that has not run since
/// its wake-up is handed the lock only by the third exit to pass it.
#[test]
fn a_woken_timed_waiter_gives_up_racing_a_handoff() {
    model::check_with_bound(2, || {
        let m = mutex(WakeMode::Compete, St::A);
        let g = m.enter(St::A);
        let timed = timed_waiter(&m, St::B, 1, St::C);
        g.exit(St::B);
        let barges = barge_into_b(&m, 3);
        let entered = timed.join().unwrap();
        let end = if entered { St::C } else { St::B };
        assert_eq!(*m.enter(end), usize::from(entered) + 10 * barges);
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
    });
}

/// A woken timed waiter gives up while an exit that passes it holds the
/// table lock (under loom a give-up finds the table lock held whenever it
/// is, as beside busy threads it may stay held for a scheduling round): it
/// leaves without waiting for it, and the exit, which counted a pass
/// against it and woke no one, makes the serve it left owed once it has
/// released the table lock. A patient waiter queued behind it gets in.
/// Two barges: an exit that finds the woken waiter not yet running skips
/// the table but one in 2 (loom's `SERVE_EVERY`).
#[test]
fn a_woken_timed_waiter_that_gives_up_while_the_table_is_held_strands_no_one() {
    model::check_with_bound(2, || {
        let m = mutex(WakeMode::Compete, St::A);
        let g = m.enter(St::A);
        let timed = timed_waiter(&m, St::B, 10, St::B);
        let patient = waiter(&m, St::B, 1, St::B);
        g.exit(St::B);
        let barges = barge_into_b(&m, 2);
        let entered = timed.join().unwrap();
        patient.join().unwrap();
        assert_eq!(*m.enter(St::B), 1 + 10 * (usize::from(entered) + barges));
        assert_eq!(m.__test_waiter_table_size(), (0, 0));
    });
}

/// Exits that skip the table (Compete mode): a task queued first for B is
/// woken by the exit to B and never polled; a thread waits for B (queued
/// behind the task, or arriving later). Exits to B pass the woken task
/// without the table lock but one in `SERVE_EVERY` (2 under loom), so a
/// barging exit may free the lock and serve no one. The task is dropped,
/// racing that exit: whichever comes first, the thread gets in (the drop
/// publishes, reads the word with an RMW, and serves the free lock's
/// state), and nothing stays queued.
#[test]
fn a_skipped_woken_task_dropped_racing_an_exit_strands_no_one() {
    model::check_with_bound(2, || {
        let m = mutex(WakeMode::Compete, St::A);
        let holder = m.enter(St::A);
        let mut f = m.enter_async(St::B);
        assert!(poll_once(&mut f).is_pending(), "queued first for B");
        let patient = waiter(&m, St::B, 1, St::B);
        holder.exit(St::B); // wakes the task, which is not polled
        let barger = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                // A barging exit to B: it may skip the task.
                if let Some(mut g) = m.try_enter(St::B) {
                    *g += 10;
                }
            })
        };
        drop(f);
        barger.join().unwrap();
        patient.join().unwrap();
        let g = m.enter(St::B);
        assert!(*g == 1 || *g == 11, "count {}", *g);
        drop(g);
        assert_eq!(m.__test_waiter_table_size(), (0, 0), "nothing left queued");
    });
}
