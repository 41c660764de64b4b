//! Loom models of the shared waiting machinery: the lock-free waiter queue,
//! the notify/cancel race and the `AtomicWaker`. Run with
//! `cargo xtask loom -p sync-core`.
#![cfg(loom)]

use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use sync_core::model;
use sync_core::sync::atomic::{AtomicUsize, Ordering::*};
use sync_core::sync::{Arc, thread};
use sync_core::waiter::{Waiter, WaiterQueue};
use sync_core::waker::AtomicWaker;

/// Two producers push while the consumer pops: every node comes out exactly
/// once, each producer's in its own order, and `pop` returning `None` while a
/// push is half-done never loses a node. Nodes are freed by the consumer
/// (loom checks the `Arc` counts and the accesses to freed nodes).
#[test]
fn queue_two_producers_one_consumer() {
    model::check(|| {
        let q = Arc::new(WaiterQueue::new());
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let q = Arc::clone(&q);
                thread::spawn(move || {
                    for i in 0..2 {
                        q.push(Waiter::for_thread(p * 10 + i));
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < 4 {
            // SAFETY: this thread is the only consumer.
            match unsafe { q.pop() } {
                Some(w) => seen.push(w.data()),
                None => thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        // SAFETY: as above.
        assert!(unsafe { q.pop() }.is_none());
        let from = |p: usize| {
            seen.iter()
                .filter(|&&d| d / 10 == p)
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(from(0), [0, 1]);
        assert_eq!(from(1), [10, 11]);
    });
}

/// The queue empties and refills while a producer races the consumer's
/// "last node" CAS; nodes left in the queue are freed by its `Drop`.
#[test]
fn queue_refills_after_empty_and_drop_frees_the_rest() {
    model::check(|| {
        let q = Arc::new(WaiterQueue::new());
        q.push(Waiter::for_thread(1));
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(Waiter::for_thread(2)))
        };
        let first = loop {
            // SAFETY: this thread is the only consumer.
            if let Some(w) = unsafe { q.pop() } {
                break w;
            }
            thread::yield_now();
        };
        assert_eq!(first.data(), 1);
        producer.join().unwrap();
        // Node 2 stays in the queue; dropping the queue frees it.
        drop(q);
    });
}

/// A notify races a cancel: exactly one wins, and the thread that lost knows
/// it (the canceller gets the token, or the notifier gets `false`).
#[test]
fn notify_races_cancel() {
    model::check(|| {
        let waiter = Waiter::for_task(Waker::noop(), 0);
        let notified = {
            let waiter = Arc::clone(&waiter);
            thread::spawn(move || waiter.notify(7))
        };
        let cancelled = waiter.cancel();
        let notified = notified.join().unwrap();
        match cancelled {
            Ok(()) => assert!(!notified, "a cancelled waiter was notified"),
            Err(token) => {
                assert!(notified);
                assert_eq!(token, 7);
            }
        }
    });
}

/// A parked thread is woken by a notify from another thread, whatever the
/// order of the notify and the park.
#[test]
fn thread_waiter_is_woken() {
    model::check(|| {
        let waiter = Waiter::for_thread(0);
        let notifier = {
            let waiter = Arc::clone(&waiter);
            thread::spawn(move || assert!(waiter.notify(3)))
        };
        assert_eq!(waiter.wait(false), 3);
        notifier.join().unwrap();
    });
}

/// A timed wait races a notify: either the waiter gets the token (the notify
/// succeeded), or it times out and the notify fails (the notifier keeps what
/// the token carried). Never both, never neither.
#[test]
fn timed_wait_races_notify() {
    model::check(|| {
        let waiter = Waiter::for_thread(0);
        let notifier = {
            let waiter = Arc::clone(&waiter);
            thread::spawn(move || waiter.notify(3))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3600);
        let got = waiter.wait_until(false, deadline);
        let delivered = notifier.join().unwrap();
        assert_eq!(got.is_some(), delivered, "token lost or duplicated");
        if let Some(token) = got {
            assert_eq!(token, 3);
        } else {
            assert!(waiter.is_cancelled());
        }
    });
}

/// A task's waiter, polled once with `waker` while another thread notifies
/// it with token 5; returns it, and what that poll returned, once the
/// notifier is done.
fn polled_while_notified(waker: &Waker) -> (Arc<Waiter>, Poll<usize>) {
    let waiter = Waiter::for_task(Waker::noop(), 0);
    let notifier = {
        let waiter = Arc::clone(&waiter);
        thread::spawn(move || assert!(waiter.notify(5)))
    };
    let first = waiter.poll(&mut Context::from_waker(waker));
    notifier.join().unwrap();
    (waiter, first)
}

/// A task's waiter: the token set by another thread is seen by a poll, or
/// the waker registered by the poll is woken (never neither), across a
/// re-registration with a new waker.
#[test]
fn task_waiter_wake_is_not_lost() {
    model::check(|| {
        let woken = Arc::new(AtomicUsize::new(0));
        let waker = counting_waker(&woken);
        let (waiter, first) = polled_while_notified(&waker);
        let mut cx = Context::from_waker(&waker);
        if first.is_pending() {
            assert_eq!(
                woken.load(Acquire),
                1,
                "pending, and the waker was never woken"
            );
        }
        assert_eq!(waiter.poll(&mut cx), Poll::Ready(5));
    });
}

/// A poll that sees the token only after registering (the notify took the
/// slot before the register filled it) takes its waker back: once the
/// poller has `Ready`, the waiter holds no clone of its waker. Otherwise the
/// clone would be dropped with the node by whoever drops the last `Arc`,
/// such as the notifier inside a raw unlock, which must not unwind.
#[test]
fn task_waiter_ready_keeps_no_waker() {
    model::check(|| {
        struct Nothing;
        impl std::task::Wake for Nothing {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        let inner = std::sync::Arc::new(Nothing);
        let waker = Waker::from(std::sync::Arc::clone(&inner));
        let (waiter, first) = polled_while_notified(&waker);
        let mut cx = Context::from_waker(&waker);
        if first.is_pending() {
            assert_eq!(waiter.poll(&mut cx), Poll::Ready(5));
        }
        // `inner` and `waker`: no clone is left in the waiter.
        assert_eq!(
            std::sync::Arc::strong_count(&inner),
            2,
            "a clone of the poller's waker stayed in the notified waiter"
        );
    });
}

/// `AtomicWaker`: a wake racing a register wakes the new waker or leaves it
/// for the register to wake: one way or the other, it is woken.
#[test]
fn atomic_waker_register_races_wake() {
    model::check(|| {
        let flag = Arc::new(AtomicUsize::new(0));
        let woken = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(AtomicWaker::new());
        let waker = counting_waker(&woken);
        let waking = {
            let (slot, flag) = (Arc::clone(&slot), Arc::clone(&flag));
            thread::spawn(move || {
                flag.store(1, Release);
                slot.wake();
            })
        };
        slot.register(&waker);
        let saw_flag = flag.load(Acquire) == 1;
        waking.join().unwrap();
        assert!(
            saw_flag || woken.load(Acquire) >= 1,
            "the flag was not seen after register, and the waker was not woken"
        );
    });
}

/// `register` with a waker whose clone panics, racing a wake: the slot
/// keeps the old waker, which the wake or the register wakes (exactly once),
/// and the slot is free afterwards: a later register is not woken at once,
/// and a later wake reaches it.
#[test]
fn atomic_waker_register_whose_clone_panics_races_wake() {
    quiet_hostile_panics();
    model::check(|| {
        let woken = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(AtomicWaker::new());
        slot.register(&counting_waker(&woken));
        let waking = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || slot.wake())
        };
        // It panics, unless it finds the wake in progress (then it only
        // wakes `clone_panics` by reference).
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            slot.register(&clone_panics())
        }));
        waking.join().unwrap();
        assert_eq!(woken.load(Acquire), 1, "the old waker was not woken once");
        let later = Arc::new(AtomicUsize::new(0));
        slot.register(&counting_waker(&later));
        assert_eq!(later.load(Acquire), 0, "the slot was left REGISTERING");
        slot.wake();
        assert_eq!(later.load(Acquire), 1);
    });
}

/// A waker whose clone panics; waking or dropping it does nothing.
fn clone_panics() -> Waker {
    const MSG: &str = "hostile waker: clone panics";
    fn clone(_: *const ()) -> RawWaker {
        std::panic::panic_any(MSG)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer, so any
    // pointer satisfies the `RawWaker` contract.
    unsafe { Waker::from_raw(RawWaker::new(core::ptr::null(), &VTABLE)) }
}

/// Keeps the expected panics of `clone_panics` out of the output (loom
/// runs the model many times); any other panic is reported as usual.
fn quiet_hostile_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"hostile waker: clone panics") {
            report(info);
        }
    }));
}

fn counting_waker(count: &Arc<AtomicUsize>) -> Waker {
    struct Count(Arc<AtomicUsize>);
    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, AcqRel);
        }
    }
    Waker::from(std::sync::Arc::new(Count(Arc::clone(count))))
}

/// A consumer sweeps the queue while another thread withdraws a waiter in
/// it and then pushes a new one: every live waiter stays queued exactly
/// once and in its place, and the withdrawn one is either freed by the
/// sweep or still queued (withdrawn too late for it), never both.
#[test]
fn sweep_races_push_and_cancel() {
    model::check_with_bound(3, || {
        let q = Arc::new(WaiterQueue::new());
        let leaving = Waiter::for_thread(1);
        q.push(Arc::clone(&leaving));
        q.push(Waiter::for_thread(2));
        let other = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                leaving.cancel().unwrap();
                q.push(Waiter::for_thread(3));
            })
        };
        // SAFETY: this thread is the only consumer.
        let swept = unsafe { q.sweep() };
        other.join().unwrap();
        let mut left = Vec::new();
        // SAFETY: as above; every push has completed.
        while let Some(w) = unsafe { q.pop() } {
            left.push(w.data());
        }
        let expected: &[usize] = if swept.freed == 1 {
            &[2, 3]
        } else {
            &[1, 2, 3]
        };
        assert_eq!(left, expected, "{swept:?}");
        assert!(swept.kept <= 3);
    });
}

/// A sweep unlinks a withdrawn waiter at the tail, behind a live one, while
/// a producer appends after it: either the sweep swings the tail back to
/// the live waiter before the push (which then links behind it), or the
/// push comes first and the withdrawn waiter stays for the next sweep. The
/// order holds either way, and nothing is lost or freed twice.
#[test]
fn sweep_unlinks_a_withdrawn_tail_racing_a_push() {
    model::check_with_bound(3, || {
        let q = Arc::new(WaiterQueue::new());
        q.push(Waiter::for_thread(1));
        let gone = Waiter::for_thread(2);
        q.push(Arc::clone(&gone));
        gone.cancel().unwrap();
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(Waiter::for_thread(3)))
        };
        // SAFETY: this thread is the only consumer.
        let swept = unsafe { q.sweep() };
        producer.join().unwrap();
        let mut left = Vec::new();
        // SAFETY: as above; every push has completed.
        while let Some(w) = unsafe { q.pop() } {
            left.push(w.data());
        }
        let expected: &[usize] = if swept.freed == 1 {
            &[1, 3]
        } else {
            &[1, 2, 3]
        };
        assert_eq!(left, expected, "{swept:?}");
        // The live waiter, and the new one if it came before the sweep.
        assert!((1..=2).contains(&swept.kept), "{swept:?}");
    });
}

/// `sweep_front` frees withdrawn waiters at the front only, while a
/// producer pushes behind them: it stops at the first live waiter (which
/// stays first) or at the half-done push.
#[test]
fn sweep_front_stops_at_the_first_live_waiter() {
    model::check_with_bound(3, || {
        let q = Arc::new(WaiterQueue::new());
        let gone = Waiter::for_thread(1);
        q.push(Arc::clone(&gone));
        gone.cancel().unwrap();
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || q.push(Waiter::for_thread(2)))
        };
        // SAFETY: this thread is the only consumer.
        let freed = unsafe { q.sweep_front() };
        producer.join().unwrap();
        let mut left = Vec::new();
        // SAFETY: as above; every push has completed.
        while let Some(w) = unsafe { q.pop() } {
            left.push(w.data());
        }
        let expected: &[usize] = if freed == 1 { &[2] } else { &[1, 2] };
        assert_eq!(left, expected);
    });
}

/// A notifier hands a sleeping thread its token and keeps the wake-up in a
/// `WakeList`, delivered later (as after releasing a lock): the thread
/// returns with the token, whether it parked before or after.
#[test]
fn wake_list_delivers_a_deferred_wakeup() {
    use sync_core::unwind::Panics;
    use sync_core::wake_list::WakeList;
    model::check(|| {
        let waiter = Waiter::for_thread(0);
        let notifier = {
            let waiter = Arc::clone(&waiter);
            thread::spawn(move || {
                let mut wakes = WakeList::new();
                if let Some(wakeup) = Waiter::notify_deferred(&waiter, 5) {
                    wakes.push(wakeup);
                }
                // ... the notifier's lock would be released here ...
                let mut panics = Panics::new();
                wakes.wake_all(&mut panics);
                assert!(panics.is_empty());
            })
        };
        assert_eq!(waiter.wait(false), 5);
        notifier.join().unwrap();
    });
}

/// A thread waits twice in a row, queued each time, while the consumer
/// notifies each waiter it pops with the waiter's own word: the second
/// wait reuses the first's node when the consumer has already dropped it
/// (else it gets a new one), and in every interleaving it sees its own
/// word as a token, neither the first wait's token nor a stale link.
#[test]
fn a_threads_reused_node_is_waited_on_afresh() {
    model::check(|| {
        let queue = Arc::new(WaiterQueue::new());
        let consumer = {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                for _ in 0..2 {
                    let w = loop {
                        // SAFETY: this thread is the only consumer.
                        match unsafe { queue.pop() } {
                            Some(w) => break w,
                            None => thread::yield_now(),
                        }
                    };
                    assert!(w.notify(w.data() * 10));
                }
            })
        };
        for word in 1..=2 {
            let w = Waiter::for_thread(word);
            queue.push(Arc::clone(&w));
            assert_eq!(w.wait(false), word * 10);
        }
        consumer.join().unwrap();
    });
}

/// What is left in `q` once every push has completed, front first: each
/// waiter's word, and whether it was withdrawn.
fn drain(q: &WaiterQueue) -> Vec<(usize, bool)> {
    let mut left = Vec::new();
    // SAFETY: the caller is the only consumer, and every push has completed.
    while let Some(w) = unsafe { q.pop() } {
        left.push((w.data(), w.is_cancelled()));
    }
    left
}

/// A producer pushes a waiter and withdraws it, twice, then pushes a live
/// one, while the consumer sweeps a backlog of a withdrawn and a live
/// waiter once. The producer's waits share its thread's node: once the
/// sweep has freed the first, the second is the same node again (the same
/// address, pushed anew behind the sweep's last waiter: the ABA case of
/// the pointer the sweep stops at). The sweep ends (loom fails a model
/// that spins for ever); every live waiter stays queued exactly once;
/// every withdrawn one is freed by the sweep or left queued, never both;
/// and every node is freed by the end (loom checks the `Arc`s).
#[test]
fn sweep_races_a_producer_that_pushes_and_withdraws() {
    model::check_with_bound(3, || {
        let q = Arc::new(WaiterQueue::new());
        let gone = Waiter::for_task(Waker::noop(), 1);
        q.push(Arc::clone(&gone));
        gone.cancel().unwrap();
        drop(gone);
        q.push(Waiter::for_task(Waker::noop(), 2));
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for word in [10, 11] {
                    let w = Waiter::for_thread(word);
                    q.push(Arc::clone(&w));
                    w.cancel().unwrap();
                }
                q.push(Waiter::for_task(Waker::noop(), 12));
            })
        };
        // SAFETY: this thread is the only consumer.
        let swept = unsafe { q.sweep() };
        producer.join().unwrap();
        let left = drain(&q);
        let count = |word: usize| left.iter().filter(|&&(w, _)| w == word).count();
        assert_eq!(count(2), 1, "the live waiter: {left:?} {swept:?}");
        assert_eq!(
            count(12),
            1,
            "the producer's live waiter: {left:?} {swept:?}"
        );
        for word in [1, 10, 11] {
            assert!(count(word) <= 1, "{word} twice: {left:?} {swept:?}");
        }
        let withdrawn_left = left.iter().filter(|&&(_, c)| c).count();
        assert_eq!(
            swept.freed + withdrawn_left,
            3,
            "a withdrawn waiter lost or freed twice: {left:?} {swept:?}"
        );
        assert!(swept.kept <= 4, "{swept:?}");
    });
}

/// The same for `sweep_front`, which never reorders: what is left is the
/// tail of what was pushed, in order, and the sweep freed exactly the
/// waiters in front of it, all withdrawn.
#[test]
fn sweep_front_races_a_producer_that_pushes_and_withdraws() {
    model::check_with_bound(3, || {
        let q = Arc::new(WaiterQueue::new());
        let gone = Waiter::for_task(Waker::noop(), 1);
        q.push(Arc::clone(&gone));
        gone.cancel().unwrap();
        drop(gone);
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for word in [10, 11] {
                    let w = Waiter::for_thread(word);
                    q.push(Arc::clone(&w));
                    w.cancel().unwrap();
                }
                q.push(Waiter::for_task(Waker::noop(), 12));
            })
        };
        // SAFETY: this thread is the only consumer.
        let freed = unsafe { q.sweep_front() };
        producer.join().unwrap();
        let left: Vec<usize> = drain(&q).into_iter().map(|(w, _)| w).collect();
        let all = [1, 10, 11, 12];
        assert!(freed <= 3, "freed the live waiter: {freed} {left:?}");
        assert_eq!(left, all[freed..], "freed {freed}");
    });
}

/// `sweep_front` on an empty queue while a producer pushes a waiter and
/// withdraws it, twice (its node reused), then a live one: as above, it
/// frees a prefix of withdrawn waiters and keeps the rest in order.
#[test]
fn sweep_front_from_empty_races_a_producer_that_pushes_and_withdraws() {
    model::check_with_bound(3, || {
        let q = Arc::new(WaiterQueue::new());
        let producer = {
            let q = Arc::clone(&q);
            thread::spawn(move || {
                for word in [10, 11] {
                    let w = Waiter::for_thread(word);
                    q.push(Arc::clone(&w));
                    w.cancel().unwrap();
                }
                q.push(Waiter::for_task(Waker::noop(), 12));
            })
        };
        // SAFETY: this thread is the only consumer.
        let freed = unsafe { q.sweep_front() };
        producer.join().unwrap();
        let left: Vec<usize> = drain(&q).into_iter().map(|(w, _)| w).collect();
        let all = [10, 11, 12];
        assert!(freed <= 2, "freed the live waiter: {freed} {left:?}");
        assert_eq!(left, all[freed..], "freed {freed}");
    });
}
