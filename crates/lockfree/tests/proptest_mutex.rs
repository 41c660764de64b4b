//! Random sequences of mutex operations, driven from one thread with
//! futures polled by hand: the FIFO mode against a sequential handoff model,
//! and both modes against the invariants (one holder at a time, and every
//! queued future is woken in the end: no lost wakeup).
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use lockfree_sync::{Fairness, LockAsync, Mutex, MutexGuard};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Start a `lock_async` and poll it once.
    Lock,
    TryLock,
    /// Poll the i-th pending future.
    Poll(usize),
    /// Drop the i-th pending future.
    Cancel(usize),
    /// Drop the guard, if one is held.
    Unlock,
    /// `MutexGuard::unlock_fair`, if a guard is held.
    UnlockFair,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Lock),
        1 => Just(Op::TryLock),
        3 => any::<usize>().prop_map(Op::Poll),
        1 => any::<usize>().prop_map(Op::Cancel),
        2 => Just(Op::Unlock),
        1 => Just(Op::UnlockFair),
    ]
}

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

struct Pending<'a> {
    id: u64,
    fut: LockAsync<'a, u64>,
    wakes: Arc<Count>,
    waker: Waker,
}

impl<'a> Pending<'a> {
    fn new(id: u64, m: &'a Mutex<u64>) -> Self {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&wakes));
        Self {
            id,
            fut: m.lock_async(),
            wakes,
            waker,
        }
    }

    fn poll(&mut self) -> Poll<MutexGuard<'a, u64>> {
        Pin::new(&mut self.fut).poll(&mut Context::from_waker(&self.waker))
    }
}

/// Who holds a FIFO mutex, in the model.
#[derive(Debug, PartialEq)]
enum Owner {
    Free,
    Guard,
    /// Handed to this queued future, which has not polled since.
    Handed(u64),
}

proptest! {
    #[test]
    fn fifo_mutex_matches_the_handoff_model(ops in prop::collection::vec(op(), 1..60)) {
        let m = Mutex::with_fairness(0u64, Fairness::Fifo);
        let mut owner = Owner::Free;
        let mut queue: VecDeque<u64> = VecDeque::new();
        let mut pending: Vec<Pending<'_>> = Vec::new();
        let mut guard: Option<MutexGuard<'_, u64>> = None;
        let mut next_id = 0;
        // The model's unlock: the oldest queued future gets the lock.
        fn unlock(owner: &mut Owner, queue: &mut VecDeque<u64>) {
            *owner = match queue.pop_front() {
                Some(id) => Owner::Handed(id),
                None => Owner::Free,
            };
        }
        for op in ops {
            match op {
                Op::Lock | Op::TryLock if guard.is_some() => {}
                Op::Lock => {
                    let mut p = Pending::new(next_id, &m);
                    next_id += 1;
                    match p.poll() {
                        Poll::Ready(g) => {
                            prop_assert_eq!(&owner, &Owner::Free);
                            owner = Owner::Guard;
                            guard = Some(g);
                        }
                        Poll::Pending => {
                            prop_assert_ne!(&owner, &Owner::Free);
                            queue.push_back(p.id);
                            pending.push(p);
                        }
                    }
                }
                Op::TryLock => {
                    let g = m.try_lock();
                    prop_assert_eq!(g.is_some(), owner == Owner::Free);
                    if g.is_some() {
                        owner = Owner::Guard;
                        guard = g;
                    }
                }
                Op::Poll(i) if !pending.is_empty() => {
                    let i = i % pending.len();
                    let id = pending[i].id;
                    match pending[i].poll() {
                        Poll::Ready(g) => {
                            prop_assert_eq!(&owner, &Owner::Handed(id));
                            prop_assert!(guard.is_none());
                            owner = Owner::Guard;
                            guard = Some(g);
                            pending.remove(i);
                        }
                        Poll::Pending => prop_assert_ne!(&owner, &Owner::Handed(id)),
                    }
                }
                Op::Cancel(i) if !pending.is_empty() => {
                    let p = pending.remove(i % pending.len());
                    if owner == Owner::Handed(p.id) {
                        unlock(&mut owner, &mut queue);
                    } else {
                        queue.retain(|&id| id != p.id);
                    }
                    drop(p);
                }
                Op::Unlock if guard.is_some() => {
                    drop(guard.take());
                    unlock(&mut owner, &mut queue);
                }
                Op::UnlockFair if guard.is_some() => {
                    MutexGuard::unlock_fair(guard.take().unwrap());
                    unlock(&mut owner, &mut queue);
                }
                _ => {}
            }
            // A future handed the lock has been woken.
            if let Owner::Handed(id) = owner {
                let p = pending.iter().find(|p| p.id == id).unwrap();
                prop_assert!(p.wakes.0.load(SeqCst) > 0, "handed the lock without a wake");
            }
        }
    }

    #[test]
    fn no_wakeup_is_lost_in_either_mode(
        fifo in any::<bool>(),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let fairness = if fifo { Fairness::Fifo } else { Fairness::Barging };
        let m = Mutex::with_fairness(0u64, fairness);
        let mut pending: Vec<(Pending<'_>, usize)> = Vec::new();
        let mut guard: Option<MutexGuard<'_, u64>> = None;
        let mut next_id = 0;
        for op in ops {
            match op {
                Op::Lock => {
                    let mut p = Pending::new(next_id, &m);
                    next_id += 1;
                    match p.poll() {
                        Poll::Ready(g) => {
                            prop_assert!(guard.is_none(), "two guards at once");
                            guard = Some(g);
                        }
                        Poll::Pending => pending.push((p, 0)),
                    }
                }
                Op::TryLock => {
                    if let Some(g) = m.try_lock() {
                        prop_assert!(guard.is_none(), "two guards at once");
                        guard = Some(g);
                    }
                }
                Op::Poll(i) if !pending.is_empty() => {
                    let i = i % pending.len();
                    pending[i].1 = pending[i].0.wakes.0.load(SeqCst);
                    if let Poll::Ready(g) = pending[i].0.poll() {
                        prop_assert!(guard.is_none(), "two guards at once");
                        guard = Some(g);
                        pending.remove(i);
                    }
                }
                Op::Cancel(i) if !pending.is_empty() => {
                    drop(pending.remove(i % pending.len()));
                }
                Op::Unlock => drop(guard.take()),
                Op::UnlockFair => {
                    if let Some(g) = guard.take() {
                        MutexGuard::unlock_fair(g);
                    }
                }
                _ => {}
            }
        }
        // Drain: release the lock, and poll only futures that were woken since
        // their last poll. Each must get the lock in turn.
        drop(guard.take());
        while !pending.is_empty() {
            let woken = pending.iter().position(|(p, seen)| p.wakes.0.load(SeqCst) > *seen);
            let Some(i) = woken else {
                prop_assert!(false, "{} futures queued, none woken, lock free: a lost wakeup", pending.len());
                unreachable!();
            };
            pending[i].1 = pending[i].0.wakes.0.load(SeqCst);
            if let Poll::Ready(g) = pending[i].0.poll() {
                pending.remove(i);
                drop(g);
            }
        }
        prop_assert!(m.try_lock().is_some());
    }
}
