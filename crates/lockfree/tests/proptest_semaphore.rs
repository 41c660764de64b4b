//! Random sequences of semaphore operations, driven from one thread with
//! futures polled by hand, against a sequential model of a FIFO semaphore.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use lockfree_sync::{AcquireAsync, AcquireError, Semaphore, SemaphorePermit, TryAcquireError};
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
    /// Close the semaphore.
    Close,
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
        1 => Just(Op::Close),
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
    /// Requests sent away by a close and not yet polled.
    refused: Vec<u64>,
    closed: bool,
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
        // Counted: the permits it finds free are banked for the head (which
        // it is: nothing is free while others wait), never held by it.
        let take = self.free.min(n);
        self.free -= take;
        self.queue.push_back((id, n));
        self.banked += take;
        false
    }

    fn close(&mut self) {
        self.closed = true;
        self.free += std::mem::take(&mut self.banked);
        self.refused.extend(self.queue.drain(..).map(|(id, _)| id));
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
        assert_eq!(need, n, "a waiting request holds no permits");
        // If it was the head, what was banked for it goes on.
        let banked = if pos == 0 {
            std::mem::take(&mut self.banked)
        } else {
            0
        };
        self.release(banked);
    }
}

struct Pending<'a> {
    id: u64,
    n: usize,
    fut: AcquireAsync<'a>,
}

fn poll<'s>(fut: &mut AcquireAsync<'s>) -> Poll<Result<SemaphorePermit<'s>, AcquireError>> {
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
                    if model.closed {
                        prop_assert!(matches!(poll(&mut fut), Poll::Ready(Err(_))), "acquire after close");
                        continue;
                    }
                    let ready = model.acquire(id, n);
                    match poll(&mut fut) {
                        Poll::Ready(Err(e)) => prop_assert!(false, "{e} while open"),
                        Poll::Ready(Ok(p)) => {
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
                    let refused = model.refused.iter().position(|&id| id == pending[i].id);
                    match poll(&mut pending[i].fut) {
                        Poll::Ready(Err(_)) => {
                            prop_assert!(refused.is_some(), "request {} refused while open", pending[i].id);
                            model.refused.remove(refused.unwrap());
                            drop(pending.remove(i));
                        }
                        Poll::Ready(Ok(p)) => {
                            prop_assert!(served.is_some(), "request {} served early", pending[i].id);
                            model.served.remove(served.unwrap());
                            prop_assert_eq!(p.permits(), pending[i].n);
                            held.push(p);
                            drop(pending.remove(i));
                        }
                        Poll::Pending => prop_assert!(served.is_none() && refused.is_none(), "request {} not served", pending[i].id),
                    }
                }
                Op::Cancel(i) if !pending.is_empty() => {
                    let p = pending.remove(i % pending.len());
                    if let Some(pos) = model.served.iter().position(|&(id, _)| id == p.id) {
                        // Served but never polled: the permits come back.
                        model.served.remove(pos);
                        model.release(p.n);
                    } else if let Some(pos) = model.refused.iter().position(|&id| id == p.id) {
                        model.refused.remove(pos);
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
                    let can = !model.closed && (n == 0 || (model.queue.is_empty() && model.free >= n));
                    match got {
                        Ok(p) => {
                            prop_assert!(can, "try_acquire_many({}) succeeded", n);
                            model.free -= n;
                            held.push(p);
                        }
                        Err(TryAcquireError::Closed) => prop_assert!(model.closed),
                        Err(TryAcquireError::NoPermits) => prop_assert!(!can && !model.closed),
                    }
                }
                Op::Close => {
                    sem.close();
                    model.close();
                }
                _ => {}
            }
            prop_assert_eq!(sem.available_permits(), model.free);
        }
    }
}
