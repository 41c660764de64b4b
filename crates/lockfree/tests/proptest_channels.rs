//! Random operation sequences on lockfree_sync's channels, checked against
//! sequential models: FIFO (per producer), nothing lost or duplicated,
//! disconnection only after the drain, values handed back on a closed send.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::thread;

use lockfree_sync::mpsc::{self, TryRecvError};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Send from sender `i % live senders`.
    Send(usize),
    Clone(usize),
    DropSender(usize),
    TryRecv,
    DropReceiver,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<usize>().prop_map(Op::Send),
        1 => any::<usize>().prop_map(Op::Clone),
        1 => any::<usize>().prop_map(Op::DropSender),
        5 => Just(Op::TryRecv),
        1 => Just(Op::DropReceiver),
    ]
}

/// A message that counts its drops.
#[derive(Debug)]
struct Msg {
    id: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Msg {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// One thread drives the queue; the model is a `VecDeque`.
    #[test]
    fn mpsc_matches_a_queue(ops in proptest::collection::vec(op(), 1..200)) {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let mut senders = vec![tx];
        let mut rx = Some(rx);
        let mut model: VecDeque<u64> = VecDeque::new();
        let (mut next_id, mut made) = (0u64, 0usize);
        for op in ops {
            match op {
                Op::Send(i) if !senders.is_empty() => {
                    let tx = &senders[i % senders.len()];
                    let msg = Msg { id: next_id, drops: Arc::clone(&drops) };
                    made += 1;
                    match tx.send(msg) {
                        Ok(()) => {
                            prop_assert!(rx.is_some(), "a send to a dropped receiver succeeded");
                            model.push_back(next_id);
                        }
                        Err(back) => {
                            prop_assert!(rx.is_none());
                            prop_assert_eq!(back.0.id, next_id, "the wrong value came back");
                        }
                    }
                    next_id += 1;
                }
                Op::Clone(i) if !senders.is_empty() => {
                    let tx = senders[i % senders.len()].clone();
                    senders.push(tx);
                }
                Op::DropSender(i) if !senders.is_empty() => {
                    let n = senders.len();
                    senders.remove(i % n);
                }
                Op::TryRecv => if let Some(rx) = &rx {
                    match rx.try_recv() {
                        Ok(msg) => prop_assert_eq!(Some(msg.id), model.pop_front()),
                        Err(TryRecvError::Empty) => {
                            prop_assert!(model.is_empty());
                            prop_assert!(!senders.is_empty());
                        }
                        Err(TryRecvError::Disconnected) => {
                            prop_assert!(model.is_empty(), "disconnected before the drain");
                            prop_assert!(senders.is_empty());
                        }
                    }
                },
                Op::DropReceiver if rx.is_some() => {
                    rx = None;
                    model.clear();
                }
                _ => {}
            }
        }
        drop(senders);
        if let Some(rx) = rx {
            for id in model.drain(..) {
                prop_assert_eq!(rx.try_recv().map(|m| m.id), Ok(id));
            }
            prop_assert_eq!(rx.try_recv().map(|m| m.id), Err(TryRecvError::Disconnected));
        }
        prop_assert_eq!(drops.load(SeqCst), made, "a value lost or dropped twice");
    }

    /// Producer threads send random counts while the receiver takes them
    /// with a random mix of `recv` and `try_recv`: per-producer FIFO, nothing
    /// lost or duplicated, disconnection only after the last one.
    #[test]
    fn mpsc_threads_keep_per_producer_fifo(
        counts in proptest::collection::vec(0u64..300, 1..4),
        blocking in any::<bool>(),
    ) {
        let (tx, rx) = mpsc::channel();
        let producers: Vec<_> = counts
            .iter()
            .enumerate()
            .map(|(p, &n)| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..n {
                        tx.send((p, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = vec![0u64; counts.len()];
        loop {
            let got = if blocking {
                rx.recv().ok()
            } else {
                match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => { thread::yield_now(); continue; }
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            let Some((p, i)) = got else { break };
            prop_assert_eq!(next[p], i, "producer {} out of order", p);
            next[p] += 1;
        }
        prop_assert_eq!(next, counts);
        for p in producers {
            p.join().unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A CSP channel between two threads, each side using the blocking or
    /// the async form at random, the receiver leaving after `keep` values:
    /// it gets exactly the first `keep` values in order, the sender's sends
    /// succeed for exactly those, and the first value it could not hand
    /// over comes back in the error. With `keep` past the end, the receiver
    /// sees the disconnection after the last value.
    #[test]
    fn csp_matches_a_rendezvous(
        values in proptest::collection::vec(any::<u16>(), 0..40),
        keep in 0usize..50,
        send_async in proptest::collection::vec(any::<bool>(), 40),
        recv_async in proptest::collection::vec(any::<bool>(), 50),
    ) {
        use lockfree_sync::csp;
        let (mut tx, mut rx) = csp::channel::<u16>();
        let sent = values.clone();
        let sender = thread::spawn(move || {
            for (i, v) in sent.into_iter().enumerate() {
                let r = if send_async[i] {
                    futures::executor::block_on(tx.send_async(v))
                } else {
                    tx.send(v)
                };
                if let Err(back) = r {
                    return (i, Some(back.0));
                }
            }
            (usize::MAX, None) // every value was taken
        });
        let mut got = Vec::new();
        let mut closed = false;
        for &is_async in &recv_async[..keep] {
            let r = if is_async {
                futures::executor::block_on(rx.recv_async())
            } else {
                rx.recv()
            };
            match r {
                Ok(v) => got.push(v),
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        drop(rx);
        let (stopped_at, back) = sender.join().unwrap();
        let taken = keep.min(values.len());
        prop_assert_eq!(&got[..], &values[..taken], "received out of order or lost");
        prop_assert_eq!(closed, keep > values.len(), "disconnection seen iff past the end");
        if taken < values.len() {
            prop_assert_eq!(stopped_at, taken, "a send succeeded without a receive");
            prop_assert_eq!(back, Some(values[taken]), "the unsent value did not come back");
        } else {
            prop_assert_eq!(back, None);
        }
    }
}
