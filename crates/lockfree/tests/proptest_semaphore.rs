//! Random sequences of semaphore operations, driven from one thread with
//! futures polled by hand, against a sequential model of a FIFO semaphore.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use lockfree_sync::{Acquire, Semaphore, SemaphorePermit};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Start an acquire of `n` permits and poll it once.
    Acquire(usize),
    /// Poll the i-th pending acquire.
    Poll(usize),
    /// Drop the i-th pending acquire (cancel it).
    Cancel(usize),
    /// Drop the i-th permit held.
    Drop(usize),
    /// Forget the i-th permit held.
    Forget(usize),
    /// Add `n` permits.
    Release(usize),
    TryAcquire(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..4usize).prop_map(Op::Acquire),
        3 => any::<usize>().prop_map(Op::Poll),
        1 => any::<usize>().prop_map(Op::Cancel),
        3 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::Forget),
        2 => (1..3usize).prop_map(Op::Release),
        1 => (1..3usize).prop_map(Op::TryAcquire),
    ]
}

/// The sequential semantics: free permits, and a FIFO of requests that each
/// wait until enough releases have accumulated for the request at the head.
#[derive(Debug, Default)]
struct Model {
    free: usize,
    /// Pending requests, oldest first: (id, permits still needed).
    queue: VecDeque<(u64, usize)>,
    /// Permits released towards the head request but not yet enough for it.
    banked: usize,
    /// Requests served and not yet polled: id -> permits.
    served: Vec<(u64, usize)>,
}

impl Model {
    fn acquire(&mut self, id: u64, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        if self.queue.is_empty() && self.free >= n {
            self.free -= n;
            return true;
        }
        // Counted: takes what is free, waits for the rest.
        let take = self.free.min(n);
        self.free -= take;
        self.queue.push_back((id, n - take));
        false
    }

    fn release(&mut self, mut n: usize) {
        let demand: usize = self.queue.iter().map(|&(_, need)| need).sum::<usize>() - self.banked;
        let covered = n.min(demand);
        self.banked += covered;
        n -= covered;
        self.free += n;
        while let Some(&(id, need)) = self.queue.front() {
            if need > self.banked {
                break;
            }
            self.banked -= need;
            self.queue.pop_front();
            self.served.push((id, need));
        }
    }

    fn cancel(&mut self, id: u64, n: usize) {
        let pos = self.queue.iter().position(|&(i, _)| i == id).unwrap();
        let (_, need) = self.queue.remove(pos).unwrap();
        // The permits it took when it was counted come back, and if it was
        // the head, so does what was banked for it.
        let banked = if pos == 0 {
            std::mem::take(&mut self.banked)
        } else {
            0
        };
        self.release(n - need + banked);
    }
}

struct Pending<'a> {
    id: u64,
    n: usize,
    fut: Acquire<'a>,
}

fn poll<'s>(fut: &mut Acquire<'s>) -> Poll<SemaphorePermit<'s>> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

proptest! {
    #[test]
    fn semaphore_matches_the_fifo_model(start in 0..4usize, ops in prop::collection::vec(op(), 1..60)) {
        let sem = Semaphore::new(start);
        let mut model = Model { free: start, ..Model::default() };
        let mut pending: Vec<Pending<'_>> = Vec::new();
        let mut held: Vec<SemaphorePermit<'_>> = Vec::new();
        let mut next_id = 0;
        for op in ops {
            match op {
                Op::Acquire(n) => {
                    let id = next_id;
                    next_id += 1;
                    let mut fut = sem.acquire_many_async(n);
                    let ready = model.acquire(id, n);
                    match poll(&mut fut) {
                        Poll::Ready(p) => {
                            prop_assert!(ready, "acquire({n}) served, the model queues it");
                            held.push(p);
                        }
                        Poll::Pending => {
                            prop_assert!(!ready, "acquire({n}) queued, the model serves it");
                            pending.push(Pending { id, n, fut });
                        }
                    }
                }
                Op::Poll(i) if !pending.is_empty() => {
                    let i = i % pending.len();
                    let served = model.served.iter().position(|&(id, _)| id == pending[i].id);
                    match poll(&mut pending[i].fut) {
                        Poll::Ready(p) => {
                            prop_assert!(served.is_some(), "request {} served early", pending[i].id);
                            model.served.remove(served.unwrap());
                            prop_assert_eq!(p.permits(), pending[i].n);
                            held.push(p);
                            drop(pending.remove(i));
                        }
                        Poll::Pending => prop_assert!(served.is_none(), "request {} not served", pending[i].id),
                    }
                }
                Op::Cancel(i) if !pending.is_empty() => {
                    let p = pending.remove(i % pending.len());
                    if let Some(pos) = model.served.iter().position(|&(id, _)| id == p.id) {
                        // Served but never polled: the permits come back.
                        model.served.remove(pos);
                        model.release(p.n);
                    } else {
                        model.cancel(p.id, p.n);
                    }
                    drop(p);
                }
                Op::Drop(i) if !held.is_empty() => {
                    let p = held.remove(i % held.len());
                    model.release(p.permits());
                    drop(p);
                }
                Op::Forget(i) if !held.is_empty() => held.remove(i % held.len()).forget(),
                Op::Release(n) => {
                    sem.release(n);
                    model.release(n);
                }
                Op::TryAcquire(n) => {
                    let got = sem.try_acquire_many(n);
                    let can = n == 0 || (model.queue.is_empty() && model.free >= n);
                    prop_assert_eq!(got.is_some(), can);
                    if let Some(p) = got {
                        model.free -= n;
                        held.push(p);
                    }
                }
                _ => {}
            }
            prop_assert_eq!(sem.available_permits(), model.free);
        }
    }
}
