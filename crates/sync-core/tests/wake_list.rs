//! `WakeList` and the queue's sweeps under real threads and tasks: every
//! promised wake-up is delivered, whatever wakers panic and however the
//! list is left; a sweep keeps exactly the live waiters.
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::{Wake, Waker};
use std::thread;

use sync_core::unwind::Panics;
use sync_core::waiter::{Waiter, WaiterQueue};
use sync_core::wake_list::{INLINE, WakeList};

/// A waker that counts its wakes and panics on the ones it was told to.
struct Counting {
    woken: AtomicUsize,
    panic: bool,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.fetch_add(1, SeqCst);
        if self.panic {
            panic!("waker panics");
        }
    }
}

fn task_waiters(n: usize, panic_at: &[usize]) -> (Vec<Arc<Counting>>, Vec<Arc<Waiter>>) {
    let wakers: Vec<_> = (0..n)
        .map(|i| {
            Arc::new(Counting {
                woken: AtomicUsize::new(0),
                panic: panic_at.contains(&i),
            })
        })
        .collect();
    let waiters = wakers
        .iter()
        .map(|c| Waiter::for_task(&Waker::from(Arc::clone(c)), 0))
        .collect();
    (wakers, waiters)
}

fn woken(wakers: &[Arc<Counting>]) -> Vec<usize> {
    wakers.iter().map(|c| c.woken.load(SeqCst)).collect()
}

#[test]
fn wake_all_wakes_everyone_past_the_inline_part_and_keeps_the_first_panic() {
    let n = INLINE + 3;
    let (wakers, waiters) = task_waiters(n, &[1, INLINE + 1]);
    let mut list = WakeList::new();
    for w in &waiters {
        list.push(Waiter::notify_later(w, 9).expect("not cancelled"));
    }
    assert_eq!(list.len(), n);
    assert_eq!(woken(&wakers), vec![0; n], "push must not wake");
    let mut panics = Panics::new();
    list.wake_all(&mut panics);
    assert!(list.is_empty());
    assert_eq!(woken(&wakers), vec![1; n], "every waiter is woken once");
    let payload = panics.take().expect("the first panic is kept");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"waker panics"));
}

#[test]
fn a_dropped_list_still_wakes_even_while_unwinding() {
    let (wakers, waiters) = task_waiters(INLINE + 2, &[0]);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut list = WakeList::new();
        for w in &waiters {
            list.push(Waiter::notify_later(w, 9).unwrap());
        }
        // An operation that fails before it delivers: the list unwinds with
        // it, and a waker's panic during that unwind must not abort.
        panic!("the operation fails");
    }));
    assert!(result.is_err());
    assert_eq!(woken(&wakers), vec![1; INLINE + 2]);
}

#[test]
fn a_deferred_thread_wakeup_reaches_the_sleeping_thread() {
    let (tx, rx) = std::sync::mpsc::channel();
    let sleeper = thread::spawn(move || {
        let waiter = Waiter::for_thread(0);
        tx.send(Arc::clone(&waiter)).unwrap();
        waiter.wait(false)
    });
    let waiter = rx.recv().unwrap();
    let mut list = WakeList::new();
    list.push(Waiter::notify_deferred(&waiter, 3).unwrap());
    list.wake_all(&mut Panics::new());
    assert_eq!(sleeper.join().unwrap(), 3);
}

/// A queue of waiters `0..n` (their data), those that `withdrawn` names
/// cancelled, and the waiters.
fn queue_of(n: usize, withdrawn: impl Fn(usize) -> bool) -> (WaiterQueue, Vec<Arc<Waiter>>) {
    let q = WaiterQueue::new();
    let waiters: Vec<_> = (0..n).map(Waiter::for_thread).collect();
    for w in &waiters {
        q.push(Arc::clone(w));
    }
    for w in waiters.iter().filter(|w| withdrawn(w.data())) {
        w.cancel().unwrap();
    }
    (q, waiters)
}

/// Pops every waiter left in `q` and returns their data, in order.
fn drain(q: &WaiterQueue) -> Vec<usize> {
    let mut left = Vec::new();
    // SAFETY: the test's thread is the only consumer.
    while let Some(w) = unsafe { q.pop() } {
        left.push(w.data());
    }
    left
}

#[test]
fn sweep_keeps_exactly_the_live_waiters_in_order() {
    let (q, waiters) = queue_of(10, |i| i % 3 == 0);
    // Besides the queue's, ours and the thread's (its last waiter) remain.
    let expected: Vec<_> = waiters.iter().map(|w| Arc::strong_count(w) - 1).collect();
    // SAFETY: this thread is the only consumer.
    let swept = unsafe { q.sweep() };
    assert_eq!((swept.freed, swept.kept), (4, 6));
    assert_eq!(drain(&q), [1, 2, 4, 5, 7, 8]);
    // Freed nodes released the queue's references.
    let after: Vec<_> = waiters.iter().map(Arc::strong_count).collect();
    assert_eq!(after, expected);
}

#[test]
fn sweep_with_hands_over_exactly_the_waiters_it_frees() {
    let (q, _waiters) = queue_of(10, |i| i % 4 != 1);
    let mut freed = Vec::new();
    // SAFETY: this thread is the only consumer.
    let swept = unsafe { q.sweep_with(|w| freed.push(w.data())) };
    assert_eq!((swept.freed, swept.kept), (7, 3));
    // In queue order, and only the withdrawn ones.
    assert_eq!(freed, [0, 2, 3, 4, 6, 7, 8]);
    assert_eq!(drain(&q), [1, 5, 9]);
}

#[test]
fn sweep_front_frees_only_up_to_the_first_live_waiter() {
    let (q, _waiters) = queue_of(5, |i| [0, 1, 3].contains(&i));
    // SAFETY: this thread is the only consumer.
    assert_eq!(unsafe { q.sweep_front() }, 2);
    assert_eq!(drain(&q), [2, 3, 4]);
}

/// Memory follows the live waiters: a long history of withdrawn waits,
/// swept as a primitive does (once withdrawals reach the waiters kept last
/// time), never leaves more nodes than twice the live ones plus the slack.
#[test]
fn sweeping_as_withdrawals_arrive_bounds_the_queue() {
    let q = WaiterQueue::new();
    let live: Vec<_> = (0..8).map(Waiter::for_thread).collect();
    for w in &live {
        q.push(Arc::clone(w));
    }
    let (mut queued, mut withdrawn, mut kept) = (live.len(), 0, live.len());
    for i in 0..100_000 {
        let w = Waiter::for_thread(1000 + i);
        q.push(Arc::clone(&w));
        w.cancel().unwrap();
        queued += 1;
        withdrawn += 1;
        if withdrawn >= kept.max(16) {
            // SAFETY: this thread is the only consumer.
            let swept = unsafe { q.sweep() };
            queued -= swept.freed;
            withdrawn = 0;
            kept = swept.kept;
        }
        assert!(
            queued <= 2 * live.len() + 16,
            "{queued} nodes for 8 live waiters"
        );
    }
    assert_eq!(kept, live.len());
}
