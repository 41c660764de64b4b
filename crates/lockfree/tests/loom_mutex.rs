//! Loom models of lockfree-sync's Mutex: the paper's algorithm 1 with its
//! count-then-enqueue window, handoff and barging, and async waiters dropped
//! at every point. Run with `cargo xtask loom -p lockfree-sync`.
//!
//! Under loom a waiter spins for one yield only, so it counts itself and
//! queues at once: the queue protocol is what loom explores.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll, Waker};

use lockfree_sync::{Fairness, Mutex};
use sync_core::model;
use sync_core::sync::{Arc, thread};

const MODES: [Fairness; 2] = [Fairness::Barging, Fairness::Fifo];

fn mutex(fairness: Fairness) -> Arc<Mutex<usize>> {
    Arc::new(Mutex::with_fairness(0, fairness))
}

/// Every thread is done: the word must be back to zero (no count, no
/// `WAKING`, no `STARVE` left behind), and the lock must still work.
fn assert_idle(m: &Mutex<usize>) {
    assert_eq!(m.raw().loom_word(), 0, "state left behind in the lock word");
    assert_eq!(m.raw().loom_handover(), 0, "a handover left half-way");
    assert_eq!(m.raw().loom_backlog(), 0, "withdrawals and frees disagree");
    assert!(m.try_lock().is_some());
}

fn incrementer(m: &Arc<Mutex<usize>>) -> thread::JoinHandle<()> {
    let m = Arc::clone(m);
    thread::spawn(move || *m.lock() += 1)
}

/// A newcomer that adds 10 if it finds the lock free (`try_lock`).
fn try_adder(m: &Arc<Mutex<usize>>) -> thread::JoinHandle<()> {
    let m = Arc::clone(m);
    thread::spawn(move || {
        if let Some(mut g) = m.try_lock() {
            *g += 10;
        }
    })
}

/// Three threads lock and unlock: mutual exclusion (loom checks the data
/// cell's accesses) and no lost wakeup (loom reports a deadlock if a waiter
/// sleeps forever).
#[test]
fn lock_unlock_three_threads() {
    for fairness in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(fairness);
            let a = incrementer(&m);
            let b = incrementer(&m);
            *m.lock() += 1;
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(*m.lock(), 3);
            assert_idle(&m);
        });
    }
}

/// The paper's lost-wakeup window: a waiter has counted itself but not yet
/// enqueued when the holder unlocks. The unlocker does not wait for the
/// node: it leaves the wake-up (or, FIFO, the lock) to the waiter (`OWED`),
/// which makes it once linked, or tells a dequeuer still holding the role
/// to look again (`LINKED`); the wake-up is never lost. A second waiter
/// makes the holder's unlock and the first waiter's unlock both see a
/// counted, half-queued waiter. (With this model, the async and sweep
/// models below reach every branch of that hand-over, in both modes.)
#[test]
fn waiter_counted_but_not_yet_enqueued() {
    for fairness in MODES {
        model::check_with_bound(3, move || {
            let m = mutex(fairness);
            let held = m.lock();
            let a = incrementer(&m);
            let b = incrementer(&m);
            drop(held);
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(*m.lock(), 2);
            assert_idle(&m);
        });
    }
}

/// An async waiter polled once (queued) and then dropped, racing the unlock
/// that dequeues it: the drop may come before the unlock reaches its node
/// (withdrawn), or after the lock or a wakeup was handed to it (which it must
/// pass on). Either way the blocking waiter gets the lock.
#[test]
fn async_waiter_dropped_while_queued_or_after_handoff() {
    for fairness in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(fairness);
            let held = m.lock();
            let dropper = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut fut = pin!(m.lock_async());
                    let mut cx = Context::from_waker(Waker::noop());
                    if let Poll::Ready(mut g) = fut.as_mut().poll(&mut cx) {
                        *g += 100; // the unlock came first: it locked
                    }
                    // Dropped here: queued, handed the lock, or woken.
                })
            };
            let blocker = incrementer(&m);
            drop(held);
            dropper.join().unwrap();
            blocker.join().unwrap();
            let n = *m.lock();
            assert!(n == 1 || n == 101, "count {n}");
            assert_idle(&m);
        });
    }
}

/// An async waiter that is driven to completion by loom's executor while a
/// thread contends: the task's waker is woken (not lost) and it gets the
/// lock.
#[test]
fn async_waiter_completes() {
    for fairness in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(fairness);
            let held = m.lock();
            let task = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    sync_core::loom::future::block_on(async {
                        *m.lock_async().await += 1;
                    })
                })
            };
            let blocker = incrementer(&m);
            drop(held);
            task.join().unwrap();
            blocker.join().unwrap();
            assert_eq!(*m.lock(), 2);
            assert_idle(&m);
        });
    }
}

/// A fair unlock hands the lock to the queued waiter even in barging mode,
/// while a newcomer races it.
#[test]
fn unlock_fair_hands_off_against_a_newcomer() {
    model::check_with_bound(2, || {
        let m = mutex(Fairness::Barging);
        let held = m.lock();
        let waiter = incrementer(&m);
        let newcomer = try_adder(&m);
        lockfree_sync::MutexGuard::unlock_fair(held);
        waiter.join().unwrap();
        newcomer.join().unwrap();
        let n = *m.lock();
        assert!(n == 1 || n == 11, "count {n}");
        assert_idle(&m);
    });
}

/// A guard's `unlocked` and `bump` let go and take the lock back inside
/// one guard while another thread locks: exclusion holds across each
/// relock (loom checks the cell's accesses: the guard's access ends before
/// its unlock and starts anew after its relock), and no update is lost.
#[test]
fn guard_methods_let_go_and_take_back_against_a_locker() {
    for fairness in MODES {
        model::check_with_bound(2, move || {
            let m = mutex(fairness);
            let other = incrementer(&m);
            let mut g = m.lock();
            *g += 1;
            lockfree_sync::MutexGuard::unlocked(&mut g, || ());
            *g += 1;
            lockfree_sync::MutexGuard::bump(&mut g);
            *g += 1;
            drop(g);
            other.join().unwrap();
            assert_eq!(*m.lock(), 4);
            assert_idle(&m);
        });
    }
}

/// Starvation mode: under loom a waiter starves once it has lost one race
/// (time is not modelled), so a waiter woken and beaten by the holder's
/// relock queues again with `STARVE` set; unlocks then hand it the lock and
/// newcomers queue instead of barging. Nobody may deadlock or lose an
/// update on the way in or out of the mode.
#[test]
fn starving_waiter_switches_to_handoffs_and_back() {
    model::check_with_bound(3, || {
        let m = mutex(Fairness::Barging);
        let mut g = m.lock();
        let starving = incrementer(&m);
        let newcomer = {
            let m = Arc::clone(&m);
            thread::spawn(move || *m.lock() += 100)
        };
        *g += 10;
        drop(g);
        *m.lock() += 1000; // the relock that may beat the woken waiter
        starving.join().unwrap();
        newcomer.join().unwrap();
        assert_eq!(*m.lock(), 1111);
        assert_idle(&m);
    });
}

/// A woken future gives up: it was woken to compete (it carries `WAKING`)
/// and is dropped instead of polled, while a newcomer may hold the lock and a
/// thread waits behind it. `pass_wake` must wake the thread if the lock is
/// free, or leave the waking to the holder's unlock if not.
#[test]
fn woken_future_dropped_passes_the_wakeup_on() {
    model::check_with_bound(2, || {
        let m = mutex(Fairness::Barging);
        let held = m.lock();
        let mut fut = Box::pin(m.lock_async());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        let blocker = incrementer(&m);
        let newcomer = try_adder(&m);
        drop(held); // may wake the future to compete
        drop(fut); // which gives up: the wakeup passes on
        blocker.join().unwrap();
        newcomer.join().unwrap();
        let n = *m.lock();
        assert!(n == 1 || n == 11, "count {n}");
        assert_idle(&m);
    });
}

/// A task woken to compete does not carry the dequeuer's role: a future
/// woken by an unlock and then neither polled nor dropped (a busy executor)
/// must not keep the next unlock from waking a thread queued behind a
/// relock. A newcomer races the relock. If the thread slept on, loom would
/// report a deadlock at its `join`. The future is dropped last, while the
/// lock may be free: its drop wakes nobody left, and leaves the word idle.
#[test]
fn woken_future_left_unpolled_does_not_hold_back_the_next_unlock() {
    model::check_with_bound(2, || {
        let m = mutex(Fairness::Barging);
        let held = m.lock();
        let mut fut = Box::pin(m.lock_async());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        drop(held); // wakes the future, which does not run
        let relock = m.lock();
        let blocker = incrementer(&m);
        let newcomer = try_adder(&m);
        drop(relock); // must wake the blocker if it queued
        blocker.join().unwrap();
        newcomer.join().unwrap();
        drop(fut);
        let n = *m.lock();
        assert!(n == 1 || n == 11, "count {n}");
        assert_idle(&m);
    });
}

/// A task and a thread wait while the holder unlocks and relocks: a task's
/// wakeup gives the dequeuer's role up at once, so the relock's unlock may
/// wake the thread while the woken task is on its way, and the task may
/// lose the race and queue again. Both must get the lock (loom reports a
/// deadlock if either sleeps for ever), and the word must end idle.
#[test]
fn woken_task_races_unlocks_and_a_thread_waiter() {
    model::check_with_bound(2, || {
        let m = mutex(Fairness::Barging);
        let held = m.lock();
        let task = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                sync_core::loom::future::block_on(async {
                    *m.lock_async().await += 1;
                })
            })
        };
        let blocker = incrementer(&m);
        drop(held);
        *m.lock() += 1;
        task.join().unwrap();
        blocker.join().unwrap();
        assert_eq!(*m.lock(), 3);
        assert_idle(&m);
    });
}

/// Starvation mode must end with the last waiter, however that waiter
/// leaves. Future `a` is woken, beaten by a relock, and queues again as
/// starving (`STARVE`); future `b` queues behind it. Then `b` leaves either
/// while still queued (a cancelled node that the unlock skips and uncounts)
/// or after the lock was handed to it (its drop unlocks without a poll).
/// When everyone is done the word must be idle, not left at `STARVE`. A
/// newcomer thread races the whole sequence with `try_lock`.
#[test]
fn starvation_mode_ends_when_the_last_waiter_leaves() {
    for b_leaves_queued in [true, false] {
        model::check_with_bound(2, move || {
            let m = mutex(Fairness::Barging);
            let mut cx = Context::from_waker(Waker::noop());
            let newcomer = try_adder(&m);
            let g = m.lock();
            let mut a = Box::pin(m.lock_async());
            let mut b = Some(Box::pin(m.lock_async()));
            let a_first = a.as_mut().poll(&mut cx); // queued
            drop(g); // wakes `a` to compete
            let relock = m.try_lock(); // beats it
            let a_again = a.as_mut().poll(&mut cx); // queues again, starving
            let b_first = b.as_mut().unwrap().as_mut().poll(&mut cx); // queues behind it
            if b_leaves_queued {
                drop(b.take());
            }
            drop(relock); // starvation mode: hands the lock to `a`
            if let Poll::Ready(mut g) = a_first {
                *g += 1;
            }
            if let Poll::Ready(mut g) = a_again {
                *g += 1;
            }
            drop(a); // handed the lock, never polled again: its drop unlocks
            if !b_leaves_queued {
                if let Poll::Ready(mut g) = b_first {
                    *g += 1;
                }
                drop(b.take()); // the same for `b`, the last waiter
            }
            newcomer.join().unwrap();
            assert_idle(&m);
        });
    }
}

/// A timed lock times out while the holder unlocks and a thread waits
/// behind it. Under loom the timer fires during every timed wait, racing the
/// unlock: the timed waiter is withdrawn, or keeps a lock handed to it, or
/// gives up a wakeup sent to it by passing it on. Either way the blocked
/// thread gets the lock and the word ends idle.
///
/// Three preemptions reach this: the unlock finds the timed waiter
/// half-way through its push and announces `OWED`; that waiter links,
/// times out and withdraws; the unlock's next pop takes its withdrawn node
/// and the one after finds the blocked thread half-way through its push.
/// Having dequeued, the unlock owes nothing, so it must announce afresh
/// before it leaves the wake-up to that thread (round 66's review found it
/// did not, and the thread parked for ever).
#[test]
fn timed_lock_times_out_racing_the_unlock() {
    for fairness in MODES {
        model::check_with_bound(3, move || {
            let m = mutex(fairness);
            let held = m.lock();
            let timed = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    if let Some(mut g) = m.try_lock_until(far_deadline()) {
                        *g += 100;
                    }
                })
            };
            let blocker = incrementer(&m);
            drop(held);
            timed.join().unwrap();
            blocker.join().unwrap();
            let n = *m.lock();
            assert!(n == 1 || n == 101, "count {n}");
            assert_idle(&m);
        });
    }
}

/// A deadline loom never reaches: under loom a timed wait times out during
/// the wait itself, whatever its deadline.
fn far_deadline() -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_secs(3600)
}

/// FIFO mode keeps its order when a waiter withdraws: B is queued while
/// main holds the lock; a timed waiter T times out and `reclaim` takes
/// `WAKING`, so main's unlock releases the lock instead of handing it over;
/// a newcomer must still not take it ahead of B.
#[test]
fn fifo_order_holds_while_a_withdrawing_waiter_holds_the_role() {
    model::check_with_bound(2, || {
        let m = Arc::new(Mutex::with_fairness(0usize, Fairness::Fifo));
        let held = m.lock();
        let b = {
            let m = Arc::clone(&m);
            thread::spawn(move || *m.lock() += 1)
        };
        while m.raw().loom_counted() == 0 {
            thread::yield_now();
        }
        let t = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                if let Some(mut g) = m.try_lock_until(far_deadline()) {
                    *g += 100;
                }
            })
        };
        let n = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                if let Some(mut g) = m.try_lock() {
                    // FIFO: B was counted before this thread existed; the lock
                    // may only reach a newcomer after B has had it.
                    assert_eq!(*g & 1, 1, "FIFO: newcomer took the lock ahead of queued B");
                    *g += 10;
                }
            })
        };
        drop(held);
        b.join().unwrap();
        t.join().unwrap();
        n.join().unwrap();
        assert_eq!(m.raw().loom_word(), 0);
    });
}

/// Two async waiters are queued, and two threads drop their futures while
/// the lock is released: the unlock pops the first one's withdrawn node
/// (left to it, as its withdrawal found the role taken), is tired after
/// that one under loom, and the second withdrawal, finding it so, may take
/// the role over (with the lock, in FIFO mode, to hand over). Whoever ends
/// up with it, the blocking waiter gets the lock, and nothing stays
/// counted, locked or half handed over.
#[test]
fn tired_dequeuer_hands_its_role_to_a_withdrawing_waiter() {
    for fairness in MODES {
        model::check_with_bound(2, move || {
            // Leaked, so that the futures can move to other threads (the
            // owned `lock_arc_async` takes a std `Arc`).
            let m: &'static Mutex<usize> = Box::leak(Box::new(Mutex::with_fairness(0, fairness)));
            let held = m.lock();
            let d1 = model::queued_then_dropped_elsewhere(m.lock_async());
            let d2 = model::queued_then_dropped_elsewhere(m.lock_async());
            let blocker = thread::spawn(move || *m.lock() += 1);
            drop(held);
            d1.join().unwrap();
            d2.join().unwrap();
            blocker.join().unwrap();
            assert_eq!(*m.lock(), 1);
            assert_idle(m);
        });
    }
}

/// As above, but every withdrawal that finds the dequeuer's role taken
/// waits for it to free the nodes withdrawn up to its own (the backlog's
/// limit lowered to nothing): the wait ends, whoever holds the role and
/// whenever it gives it up or hands it over, and every node is freed.
#[test]
fn withdrawals_wait_for_a_dequeuer_that_is_behind() {
    for fairness in MODES {
        model::check_with_bound(2, move || {
            let m: &'static Mutex<usize> = Box::leak(Box::new(Mutex::with_fairness(0, fairness)));
            m.raw().loom_backlog_limit(0);
            let held = m.lock();
            let d1 = model::queued_then_dropped_elsewhere(m.lock_async());
            let d2 = model::queued_then_dropped_elsewhere(m.lock_async());
            drop(held);
            d1.join().unwrap();
            d2.join().unwrap();
            assert_idle(m);
        });
    }
}

/// Two timed waiters time out together while the lock is held throughout:
/// the one that finds the dequeuer's role taken leaves its node to the
/// other, which must sweep again, so no withdrawn node stays counted.
#[test]
fn concurrent_timeouts_leave_no_withdrawn_node_counted() {
    model::check_with_bound(2, || {
        let m = Arc::new(Mutex::new(0usize));
        let held = m.lock();
        let timed = |m: &Arc<Mutex<usize>>| {
            let m = Arc::clone(m);
            thread::spawn(move || assert!(m.try_lock_until(far_deadline()).is_none()))
        };
        let t1 = timed(&m);
        let t2 = timed(&m);
        t1.join().unwrap();
        t2.join().unwrap();
        let w = m.raw().loom_word();
        drop(held);
        assert_eq!(w, 1, "withdrawn node(s) left counted/queued: word {w:#x}");
    });
}

/// A withdrawn waiter queued behind a live one is freed by its own
/// withdrawal (a full sweep of the queue), not left counted until the lock
/// reaches the live waiter; and the sweep, which takes the live waiter out
/// and puts it back, loses no wakeup. Main holds the lock and queues a live
/// future first; a timed thread queues behind it and times out (as every
/// timed wait does under loom). With `race`, main unlocks while the timed
/// thread withdraws and sweeps; without, only after it is done, and then
/// the word must count the live waiter alone. Either way the lock reaches
/// the live waiter and the word ends idle.
#[test]
fn withdrawn_waiter_behind_a_live_one_is_swept() {
    for fairness in MODES {
        for race in [false, true] {
            model::check_with_bound(2, move || {
                let m = mutex(fairness);
                let held = m.lock();
                let mut cx = Context::from_waker(Waker::noop());
                // Fully queued (counted and pushed) before the timed waiter.
                let mut live = Box::pin(m.lock_async());
                assert!(live.as_mut().poll(&mut cx).is_pending());
                let timed = {
                    let m = Arc::clone(&m);
                    thread::spawn(move || {
                        if let Some(mut g) = m.try_lock_until(far_deadline()) {
                            *g += 100;
                        }
                    })
                };
                let held = if race {
                    drop(held);
                    None
                } else {
                    Some(held)
                };
                timed.join().unwrap();
                if let Some(held) = held {
                    let (w, counted) = (m.raw().loom_word(), m.raw().loom_counted());
                    let flags = m.raw().loom_flags();
                    // LOCKED and one count (the live waiter): the withdrawn
                    // node is freed and uncounted, no role left taken, and
                    // no wake-up owed (both waiters had linked).
                    assert_eq!(counted, 1, "withdrawn node left counted: word {w:#x}");
                    assert_eq!(flags, 1, "state left in the word: {w:#x}");
                    drop(held);
                }
                // The unlock (main's, or the timed thread's if it got the
                // lock) handed the lock or a wakeup to the live waiter.
                match live.as_mut().poll(&mut cx) {
                    Poll::Ready(mut g) => *g += 1,
                    Poll::Pending => panic!("the live waiter was not woken"),
                }
                drop(live);
                let n = *m.lock();
                assert!(n == 1 || n == 101, "count {n}");
                assert_idle(&m);
            });
        }
    }
}

/// A live waiter that queues while a withdrawal sweeps (round 49's bounded
/// sweep stops after the node that was last when it began, so this waiter
/// may land behind it, or behind a push half-way) is still woken: the
/// withdrawer passes the role on, and an unlock dequeues it. Main holds the
/// lock; a timed thread queues and times out (as every timed wait does
/// under loom), sweeping the queue; a blocking locker queues meanwhile.
/// With `race`, main unlocks while they run; without, once the timed thread
/// is done. The locker gets the lock (loom reports a deadlock if it sleeps
/// for ever) and the word ends idle.
#[test]
fn a_waiter_queued_during_a_withdrawals_sweep_is_still_woken() {
    for fairness in MODES {
        for race in [false, true] {
            model::check_with_bound(2, move || {
                let m = mutex(fairness);
                let held = m.lock();
                let timed = {
                    let m = Arc::clone(&m);
                    thread::spawn(move || {
                        if let Some(mut g) = m.try_lock_until(far_deadline()) {
                            *g += 100;
                        }
                    })
                };
                let locker = incrementer(&m);
                if race {
                    drop(held);
                    timed.join().unwrap();
                } else {
                    timed.join().unwrap();
                    drop(held);
                }
                locker.join().unwrap();
                assert_eq!(*m.lock() % 100, 1, "the locker did not get the lock");
                assert_idle(&m);
            });
        }
    }
}

/// Runs `run` (preemption bound 3) in both fairness modes on a fresh
/// mutex (in a std `Arc`: `lock_arc_async` takes one), and asserts that in
/// each mode some execution set `reached`: the interleaving the model is
/// for was explored.
fn check_in_both_modes_reaching(
    reached: &'static AtomicBool,
    what: &str,
    run: fn(std::sync::Arc<Mutex<usize>>),
) {
    for fairness in MODES {
        reached.store(false, Relaxed);
        model::check_with_bound(3, move || {
            run(std::sync::Arc::new(Mutex::with_fairness(0, fairness)))
        });
        assert!(reached.load(Relaxed), "{fairness:?}: no execution {what}");
    }
}

/// A task's first `lock_arc_async` poll, with `waker`, on a thread of its
/// own: the future, unless the poll took the lock (then it adds `add`, and
/// its unlock, which may wake a panicking waker, is caught). A poll that
/// unwinds keeps its future and sets `unwound`, if given.
fn first_poll_elsewhere(
    m: &std::sync::Arc<Mutex<usize>>,
    waker: Waker,
    add: usize,
    unwound: Option<&'static AtomicBool>,
) -> thread::JoinHandle<Option<std::pin::Pin<Box<lockfree_sync::LockArcAsync<usize>>>>> {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let m = std::sync::Arc::clone(m);
    thread::spawn(move || {
        let mut fut = Box::pin(m.lock_arc_async());
        let mut cx = Context::from_waker(&waker);
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))) {
            Ok(Poll::Ready(mut g)) => {
                *g += add;
                let _ = catch_unwind(AssertUnwindSafe(move || drop(g)));
                None
            }
            Ok(Poll::Pending) => Some(fut),
            Err(_) => {
                if let Some(unwound) = unwound {
                    unwound.store(true, Relaxed);
                }
                Some(fut)
            }
        }
    })
}

/// Whether some execution of the model below had B's poll unwind with A's
/// panic (a plain atomic: it outlives the model's executions).
static QUEUEING_POLL_UNWOUND: AtomicBool = AtomicBool::new(false);

/// A lock that queues may make the wake-up an unlock left to it (the unlock
/// found the queue's front half-way through a push), and that wake-up may
/// pop an older waiting task and run its waker. Task A queues with a waker
/// that panics when woken, task B queues (each polled once, on its own
/// thread), and main unlocks meanwhile. A's panic goes on out of whichever
/// call woke it: main's unlock, A's own poll, or B's poll. B's poll keeps
/// its request when it unwinds: once A's future is dropped (giving up its
/// request, or passing on the lock or the wakeup handed to it), B's next
/// poll gets the lock. The word must end idle. Some execution must have
/// B's poll unwind with A's panic: the family's rule 2, as for the
/// semaphore's queueing poll (the mutex dropped that panic before).
#[test]
fn a_waker_panic_out_of_a_queueing_poll_keeps_its_request() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    check_in_both_modes_reaching(
        &QUEUEING_POLL_UNWOUND,
        "had the queueing poll run A's waker",
        |m| {
            let held = m.lock();
            let a = first_poll_elsewhere(&m, model::panicking_waker(), 100, None);
            let b =
                first_poll_elsewhere(&m, Waker::noop().clone(), 1, Some(&QUEUEING_POLL_UNWOUND));
            let _ = catch_unwind(AssertUnwindSafe(move || drop(held)));
            let a = a.join().unwrap();
            let b = b.join().unwrap();
            drop(a);
            if let Some(mut b) = b {
                match b.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                    Poll::Ready(mut g) => *g += 1,
                    Poll::Pending => panic!("B's request was lost"),
                }
            }
            let n = *m.lock();
            assert!(n == 1 || n == 101, "count {n}");
            assert_idle(&m);
        },
    );
}

sync_core::loom::thread_local! {
    /// Set on a model thread while its blocking `lock` runs.
    static IN_BLOCKING_LOCK: std::cell::Cell<bool> = std::cell::Cell::new(false);
}

/// Whether some execution of the model below had B's blocking lock run A's
/// waker (a plain atomic: it outlives the model's executions).
static BLOCKING_LOCK_RAN_A: AtomicBool = AtomicBool::new(false);

/// A's waker: notes whether a blocking lock runs it, then panics as
/// `model::panicking_waker`'s does.
fn noting_panicking_waker() -> Waker {
    struct NotesThenPanics;
    impl std::task::Wake for NotesThenPanics {
        fn wake(self: std::sync::Arc<Self>) {
            if IN_BLOCKING_LOCK.with(|b| b.get()) {
                BLOCKING_LOCK_RAN_A.store(true, Relaxed);
            }
            panic!("{}", model::WAKER_PANIC);
        }
    }
    sync_core::testing::quiet_panics_starting_with(model::WAKER_PANIC);
    Waker::from(std::sync::Arc::new(NotesThenPanics))
}

/// The blocking form of the model above: thread B's `lock` may make the
/// wake-up an unlock left to it and run task A's waker, which panics. The
/// blocking lock must not unwind (guards take the lock back with it while
/// they live on: `unlocked`, `bump`): it drops the panic and goes on
/// waiting, and gets the lock once A's future is gone. Some execution must
/// have B's lock run A's waker.
#[test]
fn a_waker_panic_met_by_a_blocking_lock_is_dropped() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    check_in_both_modes_reaching(
        &BLOCKING_LOCK_RAN_A,
        "had the blocking lock run A's waker",
        |m| {
            let held = m.lock();
            let a = first_poll_elsewhere(&m, noting_panicking_waker(), 0, None);
            let b = {
                let m = std::sync::Arc::clone(&m);
                thread::spawn(move || {
                    IN_BLOCKING_LOCK.with(|b| b.set(true));
                    let mut g = m.lock();
                    IN_BLOCKING_LOCK.with(|b| b.set(false));
                    *g += 1;
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(g)));
                })
            };
            let _ = catch_unwind(AssertUnwindSafe(move || drop(held)));
            drop(a.join().unwrap());
            b.join().expect("the blocking lock unwound");
            assert_eq!(*m.lock(), 1);
            assert_idle(&m);
        },
    );
}
