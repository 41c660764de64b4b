//! Drives `lockfree_sync::mpsc` and `lockfree_sync::csp` through operation
//! sequences from the input, on one thread with futures polled by hand, and
//! checks them against sequential models:
//!
//! * mpsc: messages come out in the order they went in (one thread, so one
//!   global FIFO), nothing lost or duplicated, disconnection only after the
//!   drain, a send to a dropped receiver hands the value back, and a
//!   receiving task that waits is woken by the next send or by the last
//!   sender leaving (no lost wakeup);
//! * csp: a value is received at most once, and exactly when its send
//!   completed or its cancel reported it delivered; a cancelled send that
//!   gets its value back never has it received; two futures of one channel
//!   are never both pending with neither woken (a lost wakeup);
//! * every value made is dropped exactly once.
#![no_main]

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use libfuzzer_sys::fuzz_target;
use lockfree_sync::{csp, mpsc};

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A waker that counts, and the count last seen.
struct Watch {
    wakes: Arc<Count>,
    waker: Waker,
    seen: usize,
}

impl Watch {
    fn new() -> Self {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&wakes));
        Self {
            wakes,
            waker,
            seen: 0,
        }
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(SeqCst) > self.seen
    }

    fn cx(&mut self) -> Context<'_> {
        self.seen = self.wakes.0.load(SeqCst);
        Context::from_waker(&self.waker)
    }
}

/// A value that counts its drops.
struct Val {
    id: u32,
    drops: Arc<AtomicUsize>,
}

impl Drop for Val {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

fn run_mpsc(data: &[u8], drops: &Arc<AtomicUsize>) -> usize {
    let (tx, rx) = mpsc::channel::<Val>();
    let mut senders = vec![tx];
    let mut rx = Some(rx);
    let mut model = VecDeque::new();
    let mut made = 0usize;
    let mut watch = Watch::new();
    let mut waiting = false; // a poll_recv returned Pending
    for &b in data {
        match b % 6 {
            0 | 1 if !senders.is_empty() => {
                let id = made as u32;
                made += 1;
                let tx = &senders[(b as usize / 6) % senders.len()];
                match tx.send(Val {
                    id,
                    drops: Arc::clone(drops),
                }) {
                    Ok(()) => {
                        assert!(rx.is_some(), "a send to a dropped receiver succeeded");
                        model.push_back(id);
                        if waiting {
                            assert!(watch.woken(), "a waiting receiver was not woken by a send");
                        }
                    }
                    Err(back) => {
                        assert!(rx.is_none());
                        assert_eq!(back.0.id, id, "the wrong value came back");
                    }
                }
            }
            2 if !senders.is_empty() => {
                let tx = senders[(b as usize / 6) % senders.len()].clone();
                senders.push(tx);
            }
            3 if !senders.is_empty() => {
                let n = senders.len();
                senders.remove((b as usize / 6) % n);
                if senders.is_empty() && waiting {
                    assert!(
                        watch.woken(),
                        "the last sender left without waking the receiver"
                    );
                }
            }
            4 => {
                if let Some(rx) = &mut rx {
                    match rx.poll_recv(&mut watch.cx()) {
                        Poll::Ready(Some(v)) => {
                            assert_eq!(Some(v.id), model.pop_front(), "out of order");
                            waiting = false;
                        }
                        Poll::Ready(None) => {
                            assert!(model.is_empty(), "disconnected before the drain");
                            assert!(senders.is_empty());
                            waiting = false;
                        }
                        Poll::Pending => {
                            assert!(model.is_empty(), "pending with messages queued");
                            waiting = true;
                        }
                    }
                }
            }
            5 => {
                if b / 6 % 4 == 0 {
                    rx = None;
                    model.clear();
                    waiting = false;
                } else if let Some(rx) = &rx {
                    match rx.try_recv() {
                        Ok(v) => assert_eq!(Some(v.id), model.pop_front(), "out of order"),
                        Err(mpsc::TryRecvError::Empty) => {
                            assert!(model.is_empty() && !senders.is_empty())
                        }
                        Err(mpsc::TryRecvError::Disconnected) => {
                            assert!(model.is_empty() && senders.is_empty())
                        }
                    }
                }
            }
            _ => {}
        }
    }
    made
}

type SendFut<'a> = Pin<Box<csp::SendAsync<'a, Val>>>;
type RecvFut<'a> = Pin<Box<csp::RecvAsync<'a, Val>>>;

/// A future polled by hand: its waker, and whether its last poll was
/// `Pending`.
struct Hand<F> {
    fut: F,
    watch: Watch,
    pending: bool,
}

#[allow(unused_assignments)] // `send = None` before `send = Some(..)` ends a borrow.
fn run_csp(data: &[u8], drops: &Arc<AtomicUsize>) -> usize {
    let (mut tx, mut rx) = csp::channel::<Val>();
    let mut made = 0usize;
    // Ids whose delivery the sender learned of (Ok, or cancel → None), ids
    // the receiver got, and ids handed back by a cancel.
    let mut delivered = Vec::new();
    let mut received = Vec::new();
    let mut handed_back = Vec::new();
    {
        let (tx, rx) = (&mut tx, &mut rx);
        let mut send: Option<(Hand<SendFut<'_>>, u32)> = None;
        let mut recv: Option<Hand<RecvFut<'_>>> = None;
        for &b in data {
            match b % 6 {
                0 => {
                    if send.is_none() {
                        let id = made as u32;
                        made += 1;
                        let v = Val {
                            id,
                            drops: Arc::clone(drops),
                        };
                        // Overwriting the whole variable ends the borrow of
                        // the finished future.
                        send = None;
                        let hand = Hand {
                            fut: Box::pin(tx.send_async(v)),
                            watch: Watch::new(),
                            pending: false,
                        };
                        send = Some((hand, id));
                    }
                }
                1 => {
                    if let Some((h, id)) = &mut send {
                        match h.fut.as_mut().poll(&mut h.watch.cx()) {
                            Poll::Ready(r) => {
                                assert!(r.is_ok(), "the receiver is alive");
                                delivered.push(*id);
                                send = None;
                            }
                            Poll::Pending => h.pending = true,
                        }
                    }
                }
                2 => {
                    if let Some((mut h, id)) = send.take() {
                        match h.fut.as_mut().cancel() {
                            Some(v) => {
                                assert_eq!(v.id, id, "the wrong value came back");
                                handed_back.push(id);
                            }
                            None => delivered.push(id),
                        }
                    }
                }
                3 => {
                    if recv.is_none() {
                        recv = None;
                        recv = Some(Hand {
                            fut: Box::pin(rx.recv_async()),
                            watch: Watch::new(),
                            pending: false,
                        });
                    }
                }
                4 => {
                    if let Some(h) = &mut recv {
                        match h.fut.as_mut().poll(&mut h.watch.cx()) {
                            Poll::Ready(r) => {
                                received.push(r.expect("the sender is alive").id);
                                recv = None;
                            }
                            Poll::Pending => h.pending = true,
                        }
                    }
                }
                _ => {
                    // Drop the receiving future (a value handed over at that
                    // moment is kept for the next receive).
                    recv = None;
                }
            }
            if let (Some((s, _)), Some(r)) = (&send, &recv) {
                // Both waiting: the one that came second completed the
                // first, whose waker must then have been woken.
                if s.pending && r.pending {
                    assert!(s.watch.woken() || r.watch.woken(), "a lost wakeup");
                }
            }
        }
        // Finish whatever is in flight, so that the model is exact.
        if let Some((mut h, id)) = send.take() {
            match h.fut.as_mut().cancel() {
                Some(v) => {
                    assert_eq!(v.id, id);
                    handed_back.push(id);
                }
                None => delivered.push(id),
            }
        }
    }
    // A value delivered to a dropped receiving future is kept for the next
    // receive: take it.
    if received.len() < delivered.len() {
        let mut watch = Watch::new();
        let mut fut = Box::pin(rx.recv_async());
        match fut.as_mut().poll(&mut watch.cx()) {
            Poll::Ready(Ok(v)) => received.push(v.id),
            _ => panic!("a delivered value was lost"),
        }
    }
    received.sort_unstable();
    delivered.sort_unstable();
    assert_eq!(received, delivered, "received differs from delivered");
    for id in &handed_back {
        assert!(!received.contains(id), "a handed-back value was received");
    }
    drop(tx);
    let mut watch = Watch::new();
    let mut fut = Box::pin(rx.recv_async());
    assert!(
        matches!(fut.as_mut().poll(&mut watch.cx()), Poll::Ready(Err(_))),
        "the closed channel delivered something"
    );
    made
}

fuzz_target!(|data: &[u8]| {
    let drops = Arc::new(AtomicUsize::new(0));
    let (first, second) = data.split_at(data.len() / 2);
    let made = run_mpsc(first, &drops) + run_csp(second, &drops);
    assert_eq!(drops.load(SeqCst), made, "a value lost or dropped twice");
});
