//! The waiter queue and waiters under real threads: every node comes out
//! once, in each producer's order, and none leaks (checked by the `Arc`
//! counts here, and by AddressSanitizer under `cargo xtask asan`).
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::task::{Context, Poll, Waker};
use std::thread;

use sync_core::waiter::{ThreadSleep, Waiter, WaiterQueue};

#[test]
fn four_producers_one_consumer_keep_order_and_lose_nothing() {
    const PER: usize = 20_000;
    let q = Arc::new(WaiterQueue::new());
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for i in 0..PER {
                    q.push(Waiter::for_thread(p * PER + i));
                }
            })
        })
        .collect();
    let mut last = [None::<usize>; 4];
    let mut got = 0;
    let mut kept = Vec::new();
    while got < 4 * PER {
        // SAFETY: this thread is the only consumer.
        match unsafe { q.pop() } {
            Some(w) => {
                let (p, i) = (w.data() / PER, w.data() % PER);
                assert!(last[p].is_none_or(|l| l < i), "producer {p} out of order");
                last[p] = Some(i);
                got += 1;
                if got % 1000 == 0 {
                    kept.push(w);
                }
            }
            None => thread::yield_now(),
        }
    }
    for p in producers {
        p.join().unwrap();
    }
    // SAFETY: as above.
    assert!(unsafe { q.pop() }.is_none());
    assert!(q.is_empty());
    // The queue kept no reference to the nodes it handed out.
    assert!(kept.iter().all(|w| Arc::strong_count(w) == 1));
}

#[test]
fn dropping_a_queue_frees_the_nodes_left_in_it() {
    let q = WaiterQueue::new();
    let w = Waiter::for_thread(1);
    // Besides ours, the thread may keep a reference to its waiter.
    let before = Arc::strong_count(&w);
    q.push(Arc::clone(&w));
    q.push(Waiter::for_thread(2));
    assert_eq!(Arc::strong_count(&w), before + 1);
    drop(q);
    assert_eq!(Arc::strong_count(&w), before);
}

/// `push` is safe: a waiter that is in a queue already is refused, since
/// relinking it made the pops (even the queue's own drop) hand out
/// references no push gave them, freeing the waiter under its holders.
#[test]
fn a_waiter_already_in_a_queue_is_refused_by_push() {
    use std::mem::ManuallyDrop;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    // Not dropped if a push was accepted: the queues would be corrupt,
    // and dropping them would free `w`.
    let q = ManuallyDrop::new(WaiterQueue::new());
    let other = ManuallyDrop::new(WaiterQueue::new());
    let w = Waiter::for_task(Waker::noop(), 1);
    q.push(Arc::clone(&w));
    for (queue, which) in [(&q, "the same queue"), (&other, "another queue")] {
        let again = catch_unwind(AssertUnwindSafe(|| queue.push(Arc::clone(&w))));
        assert!(
            again.is_err(),
            "a waiter already in a queue was pushed again into {which}"
        );
    }
    // The refused pushes dropped their references and left the queues as
    // they were.
    assert_eq!(Arc::strong_count(&w), 2);
    assert!(other.is_empty());
    // SAFETY: this thread is the only consumer.
    let popped = unsafe { q.pop() }.expect("the waiter pushed once");
    assert!(Arc::ptr_eq(&popped, &w));
    // SAFETY: as above.
    assert!(unsafe { q.pop() }.is_none());
    // Popped, it may be pushed again, here or anywhere.
    other.push(popped);
    q.push(Waiter::for_task(Waker::noop(), 2));
    drop((ManuallyDrop::into_inner(q), ManuallyDrop::into_inner(other)));
    assert_eq!(Arc::strong_count(&w), 1);
}

#[test]
fn notify_and_cancel_race_with_one_winner() {
    for _ in 0..2000 {
        let w = Waiter::for_task(Waker::noop(), 0);
        let notified = {
            let w = Arc::clone(&w);
            thread::spawn(move || w.notify(9))
        };
        let cancelled = w.cancel();
        let notified = notified.join().unwrap();
        assert_eq!(cancelled.is_err(), notified, "both or neither won");
        if let Err(token) = cancelled {
            assert_eq!(token, 9);
        }
    }
}

#[test]
fn a_parked_thread_wakes_and_a_task_polls_ready() {
    let done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let done = Arc::clone(&done);
        thread::spawn(move || {
            // A thread's waiter is made by the thread that waits on it.
            let w = Waiter::for_thread(0);
            tx.send(Arc::clone(&w)).unwrap();
            let token = w.wait(true);
            done.store(true, Release);
            token
        })
    };
    let w = rx.recv().unwrap();
    thread::sleep(std::time::Duration::from_millis(5));
    assert!(!done.load(Acquire));
    assert!(w.notify(4));
    assert_eq!(waiter.join().unwrap(), 4);

    let t = Waiter::for_task(Waker::noop(), 0);
    let mut cx = Context::from_waker(Waker::noop());
    assert_eq!(t.poll(&mut cx), Poll::Pending);
    assert!(t.notify(2));
    assert_eq!(t.poll(&mut cx), Poll::Ready(2));
}

#[test]
#[should_panic(expected = "reserved")]
fn a_reserved_token_panics() {
    Waiter::for_thread(0).notify(0);
}

#[test]
#[should_panic(expected = "not the thread that made it")]
fn waiting_on_another_threads_waiter_panics() {
    let w = Waiter::for_thread(0);
    thread::spawn(move || w.wait(false))
        .join()
        .map_err(|e| std::panic::resume_unwind(e))
        .unwrap();
}

/// A waker that counts its live clones, so a test can see who still holds it.
struct Task;

impl std::task::Wake for Task {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn a_cancelled_task_waiter_releases_its_waker_at_once() {
    let q = WaiterQueue::new();
    let task = Arc::new(Task);
    let waker = Waker::from(Arc::clone(&task));
    let nodes: Vec<_> = (0..100).map(|i| Waiter::for_task(&waker, i)).collect();
    for n in &nodes {
        q.push(Arc::clone(n));
    }
    assert_eq!(Arc::strong_count(&task), 102);
    for n in &nodes {
        n.cancel().unwrap();
    }
    // Still queued (nobody consumed them), but the task is no longer kept.
    assert_eq!(
        Arc::strong_count(&task),
        2,
        "cancelled waiters keep the waker"
    );
    drop(nodes);
    assert!(!q.is_empty());
}

#[test]
fn a_timed_wait_times_out_cancelled_and_a_notify_then_fails() {
    let w = Waiter::for_thread(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(2);
    assert_eq!(w.wait_until(true, deadline), None);
    assert!(std::time::Instant::now() >= deadline);
    assert!(w.is_cancelled());
    assert!(!w.notify(7), "a notify after the timeout must fail");
}

#[test]
fn a_timed_wait_returns_the_token_of_a_notify_from_another_thread() {
    let w = Waiter::for_thread(0);
    let notifier = {
        let w = Arc::clone(&w);
        thread::spawn(move || {
            thread::sleep(std::time::Duration::from_millis(5));
            assert!(w.notify(9));
        })
    };
    let far = std::time::Instant::now() + std::time::Duration::from_secs(600);
    assert_eq!(w.wait_until(false, far), Some(9));
    notifier.join().unwrap();
}

/// `notify_deferred` hands the token over at once and unparks the thread
/// only when the wakeup is delivered (or dropped); a cancelled waiter gets
/// neither.
#[test]
fn notify_deferred_unparks_when_the_wakeup_is_delivered() {
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = thread::spawn(move || {
        let w = Waiter::for_thread(0);
        tx.send(Arc::clone(&w)).unwrap();
        w.wait(false)
    });
    let w = rx.recv().unwrap();
    let wakeup = Waiter::notify_deferred(&w, 7).expect("not cancelled");
    assert_eq!(w.token(), Some(7), "the token is handed over at once");
    wakeup.wake();
    assert_eq!(waiter.join().unwrap(), 7);

    let cancelled = Waiter::for_thread(0);
    assert!(cancelled.cancel().is_ok());
    assert!(Waiter::notify_deferred(&cancelled, 7).is_none());
}

/// Withdrawing a task's waiter drops its waker; if that drop panics,
/// `cancel_catching` keeps the panic and still reports the withdrawal, so
/// that the caller can finish its own (and `cancel` resumes it after).
#[test]
fn cancel_catching_keeps_the_panic_of_the_wakers_drop() {
    use sync_core::testing::HostileWaker;
    use sync_core::unwind::Panics;

    let hostile = HostileWaker::new();
    let waiter = Waiter::for_task(&hostile.waker(), 0);
    hostile.panic_on_drops(1);
    let mut panics = Panics::new();
    assert_eq!(waiter.cancel_catching(&mut panics), Ok(()));
    assert!(waiter.is_cancelled());
    assert!(!panics.is_empty(), "the waker's panic was lost");
    let payload = panics.take().unwrap();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"HostileWaker: drop panics")
    );
    // A notify that lost the race finds it withdrawn.
    assert!(!waiter.notify(1));

    // `cancel` withdraws first, then lets the panic go on.
    let waiter = Waiter::for_task(&hostile.waker(), 0);
    hostile.panic_on_drops(1);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| waiter.cancel()));
    assert!(r.is_err());
    assert!(waiter.is_cancelled());
    assert!(!waiter.notify(1));

    // A notified waiter is not withdrawn: the token comes back.
    let waiter = Waiter::for_task(&hostile.waker(), 0);
    assert!(waiter.notify(7));
    let mut panics = Panics::new();
    assert_eq!(waiter.cancel_catching(&mut panics), Err(7));
    assert!(panics.is_empty());
}

/// Notifies `w` (a waiter of the calling thread) with `token` and waits on
/// it: the wait returns that token at once.
fn notify_and_wait(w: &Waiter, token: usize) {
    assert!(w.notify(token));
    assert_eq!(w.wait(false), token);
}

/// A thread's waits share one node once the last one is free: the node
/// comes back new (no token, not withdrawn, the new word), and each wait on
/// it gets its own notify.
#[test]
fn a_threads_next_wait_reuses_its_free_node_as_new() {
    thread::spawn(|| {
        let first = Waiter::for_thread(1);
        let node = Arc::as_ptr(&first);
        notify_and_wait(&first, 10);
        drop(first);

        let second = Waiter::for_thread(2);
        assert_eq!(Arc::as_ptr(&second), node, "a free node was not reused");
        assert_eq!(second.data(), 2);
        assert_eq!(second.token(), None);
        assert!(!second.is_cancelled());
        let notifier = {
            let second = Arc::clone(&second);
            thread::spawn(move || {
                thread::sleep(std::time::Duration::from_millis(5));
                assert!(second.notify(20));
            })
        };
        assert_eq!(second.wait(false), 20);
        notifier.join().unwrap();
        drop(second);

        // A withdrawn node comes back live.
        let third = Waiter::for_thread(3);
        assert_eq!(Arc::as_ptr(&third), node);
        assert!(third.cancel().is_ok());
        drop(third);
        let fourth = Waiter::for_thread(4);
        assert_eq!(Arc::as_ptr(&fourth), node);
        assert!(!fourth.is_cancelled());
        notify_and_wait(&fourth, 40);
    })
    .join()
    .unwrap();
}

/// A node that anyone else still holds (a queue keeps a withdrawn one, an
/// outer wait is in progress) is left alone: the thread's next waiter is a
/// new node, and the held one keeps its state.
#[test]
fn a_node_still_held_elsewhere_is_not_reused() {
    thread::spawn(|| {
        let queue = WaiterQueue::new();
        let first = Waiter::for_thread(1);
        let node = Arc::as_ptr(&first);
        queue.push(Arc::clone(&first));
        assert!(first.cancel().is_ok());
        drop(first);

        let second = Waiter::for_thread(2);
        assert_ne!(Arc::as_ptr(&second), node, "a queued node was reused");
        // SAFETY: this thread is the queue's only consumer.
        let withdrawn = unsafe { queue.pop() }.expect("the withdrawn node");
        assert_eq!(Arc::as_ptr(&withdrawn), node);
        assert!(withdrawn.is_cancelled());
        assert_eq!(withdrawn.data(), 1);
        drop(withdrawn);

        // A wait inside a wait: the outer node is held by the outer caller.
        let inner = Waiter::for_thread(3);
        assert_ne!(Arc::as_ptr(&inner), Arc::as_ptr(&second));
        notify_and_wait(&inner, 30);
        assert_eq!(second.token(), None);
        notify_and_wait(&second, 20);
    })
    .join()
    .unwrap();
}

/// A thread-local's destructor can wait, whether it runs before or after
/// the thread's own node is destroyed.
#[test]
fn a_thread_local_destructor_can_wait_for_a_notify() {
    struct WaitsOnDrop;
    impl Drop for WaitsOnDrop {
        fn drop(&mut self) {
            for round in 1..=2 {
                let w = Waiter::for_thread(round);
                let notifier = {
                    let w = Arc::clone(&w);
                    thread::spawn(move || assert!(w.notify(round)))
                };
                assert_eq!(w.wait(false), round);
                notifier.join().unwrap();
            }
        }
    }
    thread_local! {
        static GUARD: std::cell::RefCell<Option<WaitsOnDrop>> = const { std::cell::RefCell::new(None) };
    }
    for guard_first in [true, false] {
        thread::spawn(move || {
            // Thread-locals are destroyed in the reverse order of their
            // first use, on this platform; either way the wait must work.
            if guard_first {
                GUARD.with(|g| *g.borrow_mut() = Some(WaitsOnDrop));
            }
            let w = Waiter::for_thread(0);
            assert!(w.notify(1));
            assert_eq!(w.wait(false), 1);
            if !guard_first {
                GUARD.with(|g| *g.borrow_mut() = Some(WaitsOnDrop));
            }
        })
        .join()
        .unwrap();
    }
}

/// Three threads that push a waiter and withdraw it, over and over, while
/// the consumer sweeps a backlog of them once (each form of sweep). A sweep
/// took out every waiter it found, those pushed meanwhile too, and the
/// producers pushed as fast as it freed: it returned only once they paused
/// (here, when they stop after 2 s; a `sweep` also kept the live ones in a
/// vector all along). A sweep now ends after the waiter that was last when
/// it began.
#[test]
fn a_sweep_ends_while_producers_keep_pushing_withdrawn_waiters() {
    use std::time::{Duration, Instant};
    const PRODUCERS_FOR: Duration = Duration::from_secs(2);
    for front in [false, true] {
        let q = Arc::new(WaiterQueue::new());
        let stop = Arc::new(AtomicBool::new(false));
        let producers: Vec<_> = (0..3)
            .map(|_| {
                let (q, stop) = (Arc::clone(&q), Arc::clone(&stop));
                thread::spawn(move || {
                    while !stop.load(Relaxed) {
                        let w = Waiter::for_thread(0);
                        q.push(Arc::clone(&w));
                        w.cancel().unwrap();
                    }
                })
            })
            .collect();
        // A backlog to sweep, as when a primitive sweeps: the consumer
        // then works behind the producers and never reaches the end.
        thread::sleep(Duration::from_millis(20));
        // Stops the producers after `PRODUCERS_FOR`, or once the sweep
        // has returned (it unparks this thread).
        let stopper = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let until = Instant::now() + PRODUCERS_FOR;
                while !stop.load(Relaxed) && Instant::now() < until {
                    thread::park_timeout(until - Instant::now());
                }
                stop.store(true, Relaxed);
            })
        };
        let began = Instant::now();
        // SAFETY: this thread is the only consumer.
        unsafe {
            if front {
                q.sweep_front();
            } else {
                q.sweep();
            }
        }
        let took = began.elapsed();
        stop.store(true, Relaxed);
        stopper.thread().unpark();
        for t in producers {
            t.join().unwrap();
        }
        stopper.join().unwrap();
        assert!(
            took < PRODUCERS_FOR / 2,
            "sweep (front: {front}) took {took:?}: it ran until the producers stopped"
        );
    }
}

/// A notify wakes the waiter's node, not its thread (64-bit Linux, where a
/// thread's waiter sleeps on a word in its node): a wake-up delivered
/// before the thread waits leaves no unpark behind to cut short a
/// `thread::park` of the caller's own.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[test]
fn a_notify_wakes_the_node_not_the_thread() {
    use std::time::{Duration, Instant};
    thread::spawn(|| {
        let w = Waiter::for_thread(0);
        let wakeup = Waiter::notify_deferred(&w, 5).expect("not cancelled");
        wakeup.wake();
        assert_eq!(w.wait(false), 5, "the wait finds the token at once");
        drop(w);
        let parked = Instant::now();
        thread::park_timeout(Duration::from_millis(50));
        assert!(
            parked.elapsed() >= Duration::from_millis(40),
            "a notify left an unpark token for the thread"
        );
    })
    .join()
    .unwrap();
}

/// Whether `sleep.sleep()` returns well before a backstop wake made 5 s
/// later: a sleep whose kept wake was lost then returns late, and its test
/// fails on the time instead of hanging.
fn sleeps_briefly(sleep: &Arc<ThreadSleep>) -> bool {
    use std::time::{Duration, Instant};
    let backstop = Arc::clone(sleep);
    thread::spawn(move || {
        thread::sleep(Duration::from_secs(5));
        backstop.wake();
    });
    let started = Instant::now();
    sleep.sleep();
    started.elapsed() < Duration::from_secs(4)
}

/// A wake made before the sleep is kept for it: the sleep returns at once,
/// and the next sleep waits for the next wake.
#[test]
fn a_thread_sleep_keeps_one_wake_for_its_next_sleep() {
    use std::time::{Duration, Instant};
    let sleep = Arc::new(ThreadSleep::new());
    sleep.wake();
    sleep.wake();
    assert!(
        sleeps_briefly(&sleep),
        "a wake made before the sleep was lost"
    );
    let waker = Arc::clone(&sleep);
    let woke = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        waker.wake();
    });
    let started = Instant::now();
    sleep.sleep();
    // Spurious returns are allowed, but not a second kept wake: two wakes
    // before a sleep are one.
    assert!(
        started.elapsed() >= Duration::from_millis(40),
        "two wakes before a sleep ended two sleeps"
    );
    woke.join().unwrap();
}

/// A wake that comes after the sleeper moved on ends its next sleep, not a
/// `thread::park` of the caller's own (64-bit Linux, where it sleeps on a
/// word of its own).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[test]
fn a_thread_sleep_wake_leaves_no_unpark_token() {
    use std::time::{Duration, Instant};
    thread::spawn(|| {
        let sleep = Arc::new(ThreadSleep::new());
        sleep.wake();
        let parked = Instant::now();
        thread::park_timeout(Duration::from_millis(50));
        assert!(
            parked.elapsed() >= Duration::from_millis(40),
            "a wake left an unpark token for the thread"
        );
        // The wake is kept for the sleep.
        assert!(
            sleeps_briefly(&sleep),
            "the wake was not kept for the sleep"
        );
    })
    .join()
    .unwrap();
}

/// Only the thread that made a sleep sleeps on it (checked in debug builds).
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "slept on only by the thread that made it")]
fn a_thread_sleep_slept_on_by_another_thread_panics() {
    let sleep = Arc::new(ThreadSleep::new());
    let other = Arc::clone(&sleep);
    let r = thread::spawn(move || other.sleep()).join();
    std::panic::resume_unwind(r.expect_err("the other thread's sleep panicked"));
}
