#![cfg(loom)]
//! Loom models of the asynchronous paths: a task waiting for queue space
//! (woken; dropped after its wake-up without losing the next producer's),
//! `Completion::cancel` racing the executor's run, and several waiters (two
//! tasks and a thread) on one pending task under strict program order.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::task::Wake;

use active_monitor::{Monitor, Order};
use sync_core::model::check_with_bound;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use sync_core::sync::{Arc, thread};

fn relaxed(capacity: usize, batch: usize) -> Monitor<usize> {
    Monitor::builder()
        .order(Order::Relaxed)
        .capacity(capacity)
        .batch(batch)
        .build(0)
}

/// A waker that raises a flag.
struct Flag(Arc<AtomicBool>);

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

fn flag_waker() -> (Waker, Arc<AtomicBool>) {
    let flag = Arc::new(AtomicBool::new(false));
    let waker = Waker::from(std::sync::Arc::new(Flag(Arc::clone(&flag))));
    (waker, flag)
}

fn poll<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

/// Starts a thread that holds `m` (inside a task) until `go` is raised;
/// returns once it holds it.
fn hold(m: &Arc<Monitor<usize>>, go: &Arc<AtomicBool>) -> thread::JoinHandle<()> {
    let held = Arc::new(AtomicBool::new(false));
    let (m, go, h) = (Arc::clone(m), Arc::clone(go), Arc::clone(&held));
    let t = thread::spawn(move || {
        m.call(|n| {
            h.store(true, SeqCst);
            while !go.load(SeqCst) {
                thread::yield_now();
            }
            *n += 1;
        })
    });
    while !held.load(SeqCst) {
        thread::yield_now();
    }
    t
}

/// A task waiting for space in a full queue (its waiter in the monitor's
/// `space` queue) is woken when the holder makes room, however its
/// registration interleaves with the holder's release; its task is then
/// queued and run. (The task's waker raises a flag: loom's own `block_on`
/// allows spurious wake-ups, which would hide a lost one.)
#[test]
fn an_async_producer_waiting_for_space_is_woken() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(1, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let a = m.submit(|n| *n += 10); // fills the one slot
        let done = Arc::new(AtomicBool::new(false));
        let (m1, d1) = (Arc::clone(&m), Arc::clone(&done));
        let producer = thread::spawn(move || {
            let (waker, woken) = flag_waker();
            let mut f = m1.submit_async(|n| *n += 100).completion();
            let c = match poll(&mut f, &waker) {
                Poll::Ready(c) => c,
                Poll::Pending => {
                    // Keep the future registered until the holder is gone.
                    while !d1.load(SeqCst) {
                        thread::yield_now();
                    }
                    assert!(woken.load(SeqCst), "the producer's wake-up was lost");
                    match poll(&mut f, &waker) {
                        Poll::Ready(c) => c,
                        Poll::Pending => panic!("woken, the monitor idle, and no room"),
                    }
                }
            };
            c.wait();
        });
        go.store(true, SeqCst);
        holder.join().unwrap();
        done.store(true, SeqCst);
        producer.join().unwrap();
        assert!(a.is_done());
        assert_eq!(m.call(|n| *n), 111, "a task was lost");
    });
}

/// Two producers wait for space: a task (polled once) and a thread. The
/// task is dropped, possibly after the holder woke it for the one free
/// slot: the wake-up is passed on, and the thread's task is queued and
/// run (a lost wake-up would leave it parked: loom reports the deadlock).
///
/// The holder's release re-checks `space` while there is room, so this
/// model also passes with the pass-on removed: it checks that nobody is
/// left parked, whichever of the two wakes the thread.
#[test]
fn a_dropped_space_waiter_passes_its_wake_up_on() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(1, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let a = m.submit(|n| *n += 10);
        let mut first = m.submit_async(|n| *n += 1000);
        let (waker, _) = flag_waker();
        assert!(poll(&mut first, &waker).is_pending(), "the queue is full");
        let m2 = Arc::clone(&m);
        let second = thread::spawn(move || m2.submit(|n| *n += 100));
        go.store(true, SeqCst);
        thread::yield_now();
        drop(first); // never submitted
        holder.join().unwrap();
        let b = second.join().unwrap();
        assert!(a.is_done());
        // The thread's task is queued (it may still be running on the
        // holder's behalf when we look: wait for it).
        b.wait();
        assert_eq!(
            m.call(|n| *n),
            111,
            "the dropped producer's task ran, or one was lost"
        );
    });
}

/// Two producers wait for space in a full queue (async submissions polled
/// once) and withdraw at once (dropped) while the monitor stays held:
/// each withdrawal counts itself and may sweep `space`. Afterwards every
/// withdrawn node still in `space` is counted for the next sweep. The
/// sweep zeroed the count (a Relaxed load and store) before it read
/// `space`: it could count the other producer's withdrawal out and yet
/// find its node not linked yet or not withdrawn yet (nothing ordered
/// them), and it stopped at a push half-way through with counted nodes
/// behind it; such a node stayed with no count standing for it, until
/// enough other producers withdrew.
#[test]
fn withdrawals_racing_a_sweep_of_space_are_swept_or_counted() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(1, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let a = m.submit(|n| *n += 10); // fills the one slot
        let m2 = Arc::clone(&m);
        let other = thread::spawn(move || {
            let mut f = m2.submit_async(|n| *n += 1000);
            let (waker, _) = flag_waker();
            assert!(poll(&mut f, &waker).is_pending(), "the queue is full");
            drop(f); // withdraws
        });
        let mut f = m.submit_async(|n| *n += 1000);
        let (waker, _) = flag_waker();
        assert!(poll(&mut f, &waker).is_pending(), "the queue is full");
        drop(f); // withdraws
        other.join().unwrap();
        // Still held: nobody has popped `space` for room.
        let (left, counted) = m.__test_space_audit();
        assert!(
            left <= counted,
            "{left} withdrawn producers left in `space`, {counted} counted"
        );
        go.store(true, SeqCst);
        holder.join().unwrap();
        a.wait();
        assert_eq!(m.call(|n| *n), 11);
    });
}

/// Two waiters on a queued task's end, as program order makes them (the
/// task's `Finish`; through a test hook, since one submitter's record
/// registers them one at a time): one withdraws (dropped) on another
/// thread while the second registers, and the registration sweeps once a
/// withdrawal is counted. Afterwards every withdrawn waiter still queued
/// is counted for the next sweep. The sweep zeroed the count before it
/// read the queue: a withdrawal it counted out but had no order with
/// (it read the waiter as live) stayed queued with no count standing for
/// it, until enough other waiters withdrew.
#[test]
fn a_withdrawal_racing_a_sweep_of_a_tasks_waiters_is_swept_or_counted() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(2, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let c = m.submit(|n| *n += 10); // queued behind the holder
        let (waker, _) = flag_waker();
        let mut first = c.__test_order_wait();
        assert!(poll(&mut first, &waker).is_pending(), "the task is queued");
        let other = thread::spawn(move || drop(first)); // withdraws
        let mut second = c.__test_order_wait();
        assert!(poll(&mut second, &waker).is_pending(), "the task is queued");
        other.join().unwrap();
        // Still queued: nobody has served the waiters.
        let (left, counted) = c.__test_order_audit();
        assert!(
            left <= counted,
            "{left} withdrawn waiters left on the task, {counted} counted"
        );
        drop(second);
        go.store(true, SeqCst);
        holder.join().unwrap();
        c.wait();
        assert_eq!(m.call(|n| *n), 11);
    });
}

/// The end of a stint with an async producer waiting for space (capacity
/// 1: a stint is over after one task). The holder runs `a`, a third
/// thread queues `c` meanwhile, and the holder, its stint over, wakes the
/// async producer and lets the monitor go without serving `c`: the woken
/// producer's next poll takes the idle monitor and serves `c` before its
/// own task (or someone else did). A stranded `c` shows as a completion
/// nobody completes (the final `wait` deadlocks).
#[test]
fn a_stint_ends_with_the_monitor_let_go_to_a_woken_async_producer() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(1, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let a = m.submit(|n| *n += 10); // fills the one slot
        let (waker, woken) = flag_waker();
        let mut f = m.submit_async(|n| *n += 100).completion();
        assert!(poll(&mut f, &waker).is_pending(), "the queue is full");
        let m1 = Arc::clone(&m);
        let third = thread::spawn(move || m1.submit(|n| *n += 1000));
        go.store(true, SeqCst);
        holder.join().unwrap();
        let c = third.join().unwrap();
        // The producer is polled only once it has been woken (as an
        // executor does), or once nobody else is left to wake it.
        assert!(woken.load(SeqCst), "the producer's wake-up was lost");
        let mine = match poll(&mut f, &waker) {
            Poll::Ready(mine) => mine,
            Poll::Pending => panic!("woken, and no room made"),
        };
        mine.wait();
        c.wait();
        assert!(a.is_done());
        assert_eq!(m.call(|n| *n), 1111, "a task was lost");
    });
}

/// Counts the drops of a task's body.
struct Body(Arc<AtomicUsize>);

impl Drop for Body {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// `Completion::cancel` races the executor that runs the task (another
/// thread's submission enables it): exactly one wins. Withdrawn, the body
/// never runs; handed back, its result is there. The body is dropped
/// exactly once either way.
#[test]
fn cancel_races_the_run_and_exactly_one_wins() {
    check_with_bound(3, || {
        let m = Arc::new(relaxed(2, 5));
        let runs = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let body = Body(Arc::clone(&drops));
        let r = Arc::clone(&runs);
        let c = m.when(
            |n| *n > 0,
            move |n| {
                let _body = body;
                r.fetch_add(1, SeqCst);
                *n * 10
            },
        );
        let m1 = Arc::clone(&m);
        let enabler = thread::spawn(move || m1.submit(|n| *n = 1).is_done());
        let cancelled = c.cancel();
        assert!(enabler.join().unwrap());
        match cancelled {
            Ok(()) => assert_eq!(runs.load(SeqCst), 0, "a withdrawn task ran"),
            Err(c) => {
                assert_eq!(c.wait(), 10, "the result was lost");
                assert_eq!(runs.load(SeqCst), 1);
            }
        }
        drop(m);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the body was not dropped exactly once"
        );
    });
}

/// Strict order: a submitter's `when` on `a` is pending; two of its async
/// submissions to `b` (in its `worker` scope) and then the submitter itself
/// (a synchronous submission) wait for it. Another thread enables it: every
/// waiter is woken (the pending task's single waker slot used to hold one
/// of them).
#[test]
fn every_waiter_on_a_pending_task_is_woken() {
    check_with_bound(2, || {
        let a = Arc::new(Monitor::new(0usize));
        let b = Arc::new(Monitor::new(0usize));
        let a1 = Arc::clone(&a);
        // One submitter: everything below runs in one poll of its scope.
        let scope = active_monitor::worker(async move {
            let c = a.when(|n| *n > 0, |n| *n);
            let mut f1 = b.submit_async(|n| *n += 1).completion();
            let mut f2 = b.submit_async(|n| *n += 10).completion();
            let (w1, k1) = flag_waker();
            let (w2, k2) = flag_waker();
            assert!(
                poll(&mut f1, &w1).is_pending(),
                "strict order: waits for `c`"
            );
            assert!(
                poll(&mut f2, &w2).is_pending(),
                "strict order: waits for `c`"
            );
            let enabler = thread::spawn(move || a1.call(|n| *n = 5));
            // The submitter's own synchronous submission parks until `c`
            // has finished.
            b.submit(|n| *n += 100).wait();
            assert!(c.is_done());
            enabler.join().unwrap();
            assert!(k1.load(SeqCst), "the first task's wake-up was lost");
            assert!(k2.load(SeqCst), "the second task's wake-up was lost");
            let noop = Waker::noop();
            let Poll::Ready(c1) = poll(&mut f1, noop) else {
                panic!("woken but not ready")
            };
            let Poll::Ready(c2) = poll(&mut f2, noop) else {
                panic!("woken but not ready")
            };
            c1.wait();
            c2.wait();
            assert_eq!(b.call(|n| *n), 111);
            assert_eq!(c.wait(), 5);
        });
        let mut scope = Box::pin(scope);
        assert!(
            scope
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_ready()
        );
    });
}

/// `Completion::cancel` of an OR races one operand's run (another thread
/// enables it) and the other monitor's drop on a third thread (which
/// discards its operand):
/// the taken flag decides, exactly once. Withdrawn, no operand ran; handed
/// back, the operand's result is there. Each body is dropped once.
#[test]
fn cancel_of_an_or_races_its_operands() {
    check_with_bound(2, || {
        let a = Arc::new(relaxed(2, 5));
        let b = relaxed(2, 5);
        let drops = Arc::new(AtomicUsize::new(0));
        let (da, db) = (Body(Arc::clone(&drops)), Body(Arc::clone(&drops)));
        let c = active_monitor::or((
            a.op(
                |n| *n > 0,
                move |n| {
                    let _body = da;
                    *n -= 1;
                    'a'
                },
            ),
            b.op(
                |n| *n > 0,
                move |n| {
                    let _body = db;
                    *n -= 1;
                    'b'
                },
            ),
        ))
        .unwrap();
        let a1 = Arc::clone(&a);
        let enabler = thread::spawn(move || a1.submit(|n| *n = 1).is_done());
        let dropper = thread::spawn(move || drop(b)); // discards its operand
        let cancelled = c.cancel();
        assert!(enabler.join().unwrap());
        dropper.join().unwrap();
        let left = a.call(|n| *n);
        match cancelled {
            Ok(()) => assert_eq!(left, 1, "a withdrawn OR ran an operand"),
            Err(c) => {
                assert_eq!(c.wait(), (0, 'a'), "the result was lost");
                assert_eq!(left, 0);
            }
        }
        drop(a);
        assert_eq!(drops.load(SeqCst), 2, "a body was not dropped exactly once");
    });
}

/// A `when_async` polled once while its precondition is false, then
/// dropped (a timeout that fired), races another thread's call that makes
/// the precondition hold: the item is taken by the future's poll (output)
/// or still there, never taken by the other thread with the result dropped
/// with the future. Kept instead, the future is woken and its next poll
/// takes the item (the signal is not lost).
#[test]
fn a_when_async_dropped_after_its_timeout_takes_nothing() {
    for keep in [false, true] {
        check_with_bound(2, move || {
            let m = Arc::new(relaxed(2, 2));
            let m1 = Arc::clone(&m);
            let enabler = thread::spawn(move || m1.call(|n| *n += 1));
            let (waker, woken) = flag_waker();
            let mut take = m.when_async(
                |n| *n > 0,
                |n| {
                    *n -= 1;
                    1usize
                },
            );
            let mut got = match poll(&mut take, &waker) {
                Poll::Ready(x) => Some(x),
                Poll::Pending => None,
            };
            if keep && got.is_none() {
                enabler.join().unwrap();
                assert!(woken.load(SeqCst), "the enabled take was not woken");
                let Poll::Ready(x) = poll(&mut take, &waker) else {
                    panic!("the woken take did not run")
                };
                got = Some(x);
            } else {
                drop(take);
                enabler.join().unwrap();
            }
            let left = m.call(|n| *n);
            assert_eq!(
                left + got.unwrap_or(0),
                1,
                "the item was lost (taken by a dropped future)"
            );
        });
    }
}

/// A `when_async` polled once (its task published as the future's to
/// run), then turned into a `Completion` while another thread enables it:
/// the enabler's holder may signal the future and drop the task from its
/// lists, or read the new owner and run it, or find the precondition false.
/// The completion always resolves, with the body run exactly once.
#[test]
fn a_completion_taken_from_a_polled_when_async_races_its_signal() {
    check_with_bound(2, move || {
        let m = Arc::new(relaxed(2, 2));
        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        let mut take = m.when_async(
            |n| *n > 0,
            move |n| {
                r.fetch_add(1, SeqCst);
                *n * 10
            },
        );
        let (waker, _) = flag_waker();
        assert!(poll(&mut take, &waker).is_pending());
        let m1 = Arc::clone(&m);
        let enabler = thread::spawn(move || m1.call(|n| *n += 1));
        let mut enqueue = take.completion();
        let c = loop {
            if let Poll::Ready(c) = poll(&mut enqueue, &waker) {
                break c;
            }
            thread::yield_now();
        };
        enabler.join().unwrap();
        assert_eq!(c.wait(), 10, "the completion resolved to the enabled run");
        // The second reference, if still listed, leaves without running.
        m.call(|n| *n += 1);
        assert_eq!(runs.load(SeqCst), 1, "the body ran once");
    });
}

/// Waiters on a queued task's end register while it finishes (program
/// order's waiters, through the test hook): the finisher notifies every
/// waiter it reaches and stops at one half-way through its push (swapped,
/// not linked); that waiter, once linked, finds the task finished and
/// notifies the rest (or asks the consumer role's holder to). Once every
/// thread is done, every waiter that registered has been woken.
#[test]
fn waiters_registering_while_a_task_finishes_are_all_woken() {
    /// Registers `w` on its task: `None` if the task had finished, else
    /// the flag its waker raises.
    fn register(w: &mut active_monitor::__TestOrderWait<()>) -> Option<Arc<AtomicBool>> {
        let (waker, woken) = flag_waker();
        poll(w, &waker).is_pending().then_some(woken)
    }
    check_with_bound(2, || {
        let m = Arc::new(relaxed(2, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let c = m.submit(|n| *n += 10); // queued behind the holder: its finisher
        let mut first = c.__test_order_wait();
        let other = thread::spawn(move || {
            let woken = register(&mut first);
            (first, woken)
        });
        go.store(true, SeqCst); // the holder lets go and runs `c`
        let mut second = c.__test_order_wait();
        let second_woken = register(&mut second);
        let (mut first, first_woken) = other.join().unwrap();
        holder.join().unwrap();
        c.wait();
        for (w, woken) in [(&mut first, first_woken), (&mut second, second_woken)] {
            if let Some(woken) = woken {
                assert!(
                    woken.load(SeqCst),
                    "a waiter on a finished task was not woken"
                );
                assert!(poll(w, Waker::noop()).is_ready());
            }
        }
        assert_eq!(m.call(|n| *n), 11);
    });
}

/// A newcomer's sweep of a task's waiters (due once a withdrawal is
/// counted) races the task's finish: the finish may find the queue empty
/// while the sweep has taken the live waiters out, and asks nobody; the
/// sweeper then serves them once it lets go. Every waiter is woken.
#[test]
fn a_finish_racing_a_sweep_of_its_waiters_wakes_them() {
    check_with_bound(2, || {
        let m = Arc::new(relaxed(2, 1));
        let go = Arc::new(AtomicBool::new(false));
        let holder = hold(&m, &go);
        let c = m.submit(|n| *n += 10); // queued behind the holder: its finisher
        let (waker, woken) = flag_waker();
        let mut live = c.__test_order_wait();
        assert!(poll(&mut live, &waker).is_pending(), "the task is queued");
        let mut gone = c.__test_order_wait();
        assert!(poll(&mut gone, Waker::noop()).is_pending());
        drop(gone); // withdrawn: the next registration sweeps
        let mut newcomer = c.__test_order_wait();
        let sweeper = thread::spawn(move || {
            let (waker, woken) = flag_waker();
            let pending = poll(&mut newcomer, &waker).is_pending();
            (newcomer, pending.then_some(woken))
        });
        go.store(true, SeqCst); // the holder lets go and runs `c`
        let (mut newcomer, newcomer_woken) = sweeper.join().unwrap();
        holder.join().unwrap();
        c.wait();
        assert!(woken.load(SeqCst), "the live waiter was not woken");
        assert!(poll(&mut live, Waker::noop()).is_ready());
        if let Some(woken) = newcomer_woken {
            assert!(woken.load(SeqCst), "the newcomer was not woken");
            assert!(poll(&mut newcomer, Waker::noop()).is_ready());
        }
        assert_eq!(m.call(|n| *n), 11);
    });
}
