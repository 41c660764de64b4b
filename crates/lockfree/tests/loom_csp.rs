//! Loom models of lockfree_sync::csp: Vella's swap-only rendezvous, the
//! closing of an end, cancelled futures on both ends, and `Alt`. Run with
//! `cargo xtask loom -p lockfree-sync`.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use lockfree_sync::csp::{self, Alt, RecvError};
use sync_core::model;
use sync_core::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use sync_core::sync::{Arc, thread};

/// Counts its drops.
struct Counted(Arc<AtomicUsize>, u8);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// One rendezvous in either arrival order (the one that comes first waits,
/// spinning, then parked; the second completes it with one swap), then a
/// second one after which the sender leaves: nothing is lost and the wait
/// never misses its wakeup (loom reports a deadlock).
#[test]
fn rendezvous_in_either_order() {
    model::check_with_bound(3, || {
        let (mut tx, mut rx) = csp::channel();
        let sender = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        sender.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// The sender leaves while the receiver waits (or before it comes): the
/// receiver is woken with an error.
#[test]
fn sender_dropped_while_receiver_waits() {
    model::check_with_bound(3, || {
        let (tx, mut rx) = csp::channel::<u8>();
        let closer = thread::spawn(move || drop(tx));
        assert_eq!(rx.recv(), Err(RecvError));
        closer.join().unwrap();
    });
}

/// The receiver leaves while the sender waits, or after it took the value:
/// either the value was received (and the send succeeded) or it comes back
/// to the sender in the error; it is dropped exactly once.
#[test]
fn receiver_dropped_while_sender_waits() {
    model::check_with_bound(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = csp::channel();
        let receiver = thread::spawn(move || {
            // Sometimes takes one value, then leaves.
            let got = rx.recv().ok().map(|v: Counted| v.1);
            drop(rx);
            got
        });
        let first = tx.send(Counted(Arc::clone(&drops), 1));
        assert!(first.is_ok(), "the receiver takes the first value");
        let second = tx.send(Counted(Arc::clone(&drops), 2));
        let back = second.expect_err("nobody takes the second value");
        assert_eq!(back.0.1, 2, "the unsent value comes back");
        drop(back);
        assert_eq!(receiver.join().unwrap(), Some(1));
        assert_eq!(drops.load(SeqCst), 2);
    });
}

/// A sending task polls once and drops its future, racing the receiver:
/// the value is received exactly once or withdrawn (dropped with the
/// future), never both, never lost in between.
#[test]
fn cancelled_send_async() {
    model::check_with_bound(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut tx, mut rx) = csp::channel();
        let receiver = thread::spawn(move || rx.recv().ok().map(|v: Counted| v.1));
        let sent = {
            let fut = pin!(tx.send_async(Counted(Arc::clone(&drops), 1)));
            poll_once(fut).is_ready()
        }; // dropped here if still pending
        drop(tx); // a withdrawn send leaves the receiver to this close
        let got = receiver.join().unwrap();
        if sent {
            assert_eq!(got, Some(1));
        }
        assert_eq!(drops.load(SeqCst), 1, "the value dropped once");
    });
}

/// A receiving task polls once and drops its future while the sender
/// comes: a value handed over at that moment is kept for the next receive,
/// otherwise the sender still holds it; received exactly once either way.
#[test]
fn cancelled_recv_async() {
    model::check_with_bound(3, || {
        let (mut tx, mut rx) = csp::channel();
        let sender = thread::spawn(move || {
            tx.send(5).unwrap();
            tx
        });
        let first = {
            let fut = pin!(rx.recv_async());
            match poll_once(fut) {
                Poll::Ready(v) => Some(v.unwrap()),
                Poll::Pending => None,
            }
        }; // dropped here if still pending
        let got = match first {
            Some(v) => v,
            None => rx.recv().unwrap(),
        };
        assert_eq!(got, 5);
        drop(sender.join().unwrap());
        assert_eq!(rx.recv(), Err(RecvError), "received twice");
    });
}

/// An ALT over two channels whose senders arrive concurrently with it: each
/// value is taken exactly once, from the right channel; a sender that loses
/// the claim race waits in its channel and is taken by the next select.
#[test]
fn alt_with_two_senders() {
    model::check_with_bound(2, || {
        let (mut tx1, mut rx1) = csp::channel();
        let (mut tx2, mut rx2) = csp::channel();
        let a = thread::spawn(move || {
            tx1.send(10).unwrap();
            tx1
        });
        let b = thread::spawn(move || {
            tx2.send(20).unwrap();
            tx2
        });
        let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
        let mut got = [alt.select(), alt.select()];
        got.sort();
        assert_eq!(got, [(0, Ok(10)), (1, Ok(20))]);
        drop(alt);
        drop(a.join().unwrap());
        drop(b.join().unwrap());
    });
}

/// An ALT waits while one sender sends and the other channel closes: the
/// ALT sees the value and the closing, each once.
#[test]
fn alt_with_a_closing_sender() {
    model::check_with_bound(2, || {
        let (mut tx1, mut rx1) = csp::channel();
        let (tx2, mut rx2) = csp::channel::<u8>();
        let a = thread::spawn(move || {
            tx1.send(1).unwrap();
            tx1
        });
        let b = thread::spawn(move || drop(tx2));
        let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
        let first = alt.select();
        let got = if first.0 == 1 {
            assert_eq!(first.1, Err(RecvError));
            // The closed channel stays ready: take the value directly.
            drop(alt);
            rx1.recv()
        } else {
            assert_eq!(alt.select(), (1, Err(RecvError)));
            first.1
        };
        assert_eq!(got, Ok(1));
        drop(a.join().unwrap());
        b.join().unwrap();
    });
}

/// A sending task polls once and then cancels with `SendAsync::cancel`,
/// racing the receiver: the value is delivered exactly once or comes back,
/// never both, never neither.
#[test]
fn cancelled_send_async_hands_the_value_back() {
    model::check_with_bound(3, || {
        let (mut tx, mut rx) = csp::channel();
        let receiver = thread::spawn(move || rx.recv().ok());
        let back = {
            let mut fut = pin!(tx.send_async(1u8));
            match poll_once(fut.as_mut()) {
                Poll::Ready(sent) => {
                    sent.unwrap();
                    None
                }
                Poll::Pending => fut.cancel(),
            }
        };
        drop(tx);
        let got = receiver.join().unwrap();
        assert!(
            got.is_some() != back.is_some(),
            "delivered {got:?} and handed back {back:?}"
        );
    });
}

/// An async ALT polled once and dropped while a sender arrives: the value
/// is taken by that poll, or kept for the next receive (the sender claimed
/// the Alt as it was dropped), or still with the sender; received exactly
/// once in every case.
#[test]
fn cancelled_select_async() {
    model::check_with_bound(2, || {
        let (mut tx, mut rx) = csp::channel();
        let sender = thread::spawn(move || {
            tx.send(8u8).unwrap();
            tx
        });
        let first = {
            let mut alt = Alt::new(vec![&mut rx]);
            let mut select = pin!(alt.select_async());
            match poll_once(select.as_mut()) {
                Poll::Ready((0, got)) => Some(got.unwrap()),
                Poll::Ready(other) => panic!("{other:?}"),
                Poll::Pending => None,
            }
        };
        let got = match first {
            Some(v) => v,
            None => rx.recv().unwrap(),
        };
        assert_eq!(got, 8);
        drop(sender.join().unwrap());
        assert_eq!(rx.recv(), Err(RecvError), "received twice");
    });
}

/// An async ALT waits under an executor while two senders arrive: woken
/// (no lost wakeup), each value taken once.
#[test]
fn select_async_with_two_senders() {
    model::check_with_bound(2, || {
        let (mut tx1, mut rx1) = csp::channel();
        let (mut tx2, mut rx2) = csp::channel();
        let a = thread::spawn(move || {
            tx1.send(1u8).unwrap();
            tx1
        });
        let b = thread::spawn(move || {
            tx2.send(2u8).unwrap();
            tx2
        });
        let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
        let mut got = sync_core::loom::future::block_on(async {
            [alt.select_async().await, alt.select_async().await]
        });
        got.sort();
        assert_eq!(got, [(0, Ok(1)), (1, Ok(2))]);
        drop(alt);
        drop(a.join().unwrap());
        drop(b.join().unwrap());
    });
}

/// The race behind `a_leaked_send_future_does_not_swallow_the_next_send`:
/// a published offer is withdrawn by the sender (here by the future's
/// drop, which runs the same `retract` as the next send's reclaim of a
/// leaked future) while the receiver may take it; then the sender sends
/// again and leaves. The receiver gets 1 then 2 (it took the offer before
/// the withdrawal: delivered), or 2 then the close (withdrawn): never 1
/// alone, never 2 lost, never a value twice.
#[test]
fn withdrawn_offer_then_next_send() {
    model::check_with_bound(3, || {
        let (mut tx, mut rx) = csp::channel::<u8>();
        let sender = thread::spawn(move || {
            let first = {
                let fut = pin!(tx.send_async(1));
                poll_once(fut).is_ready()
            }; // withdrawn here if still pending
            tx.send(2).unwrap();
            first
        });
        let got = (rx.recv(), rx.recv());
        let first = sender.join().unwrap();
        if first {
            assert_eq!(got, (Ok(1), Ok(2)));
        } else {
            assert!(
                got == (Ok(1), Ok(2)) || got == (Ok(2), Err(RecvError)),
                "{got:?}"
            );
        }
    });
}

/// A timed receive racing a sender, timing out (under loom: after letting
/// the other thread run once) unless the value came: the value is received
/// exactly when the send succeeds; after a timeout the receiver leaves and
/// the value comes back to the sender.
#[test]
fn timed_recv_racing_a_sender() {
    model::check_with_bound(3, || {
        let (mut tx, mut rx) = csp::channel::<u8>();
        let sender = thread::spawn(move || tx.send(5).map_err(|e| e.0));
        let got = rx.try_recv_for(std::time::Duration::from_millis(1));
        if got.is_err() {
            assert_eq!(got, Err(csp::TryRecvError::Empty));
            drop(rx);
        }
        let sent = sender.join().unwrap();
        match got {
            Ok(v) => assert_eq!((v, sent), (5, Ok(()))),
            Err(_) => assert_eq!(sent, Err(5)),
        }
    });
}

/// A timed send racing a receiver: delivered exactly when the send says
/// so; after a timeout the value is back and the receiver sees the close.
#[test]
fn timed_send_racing_a_receiver() {
    model::check_with_bound(3, || {
        let (mut tx, mut rx) = csp::channel::<u8>();
        let receiver = thread::spawn(move || rx.recv());
        let sent = tx.try_send_for(6, std::time::Duration::from_millis(1));
        drop(tx);
        let got = receiver.join().unwrap();
        match sent {
            Ok(()) => assert_eq!(got, Ok(6)),
            Err(e) => {
                assert_eq!(e, csp::TrySendError::Full(6));
                assert_eq!(got, Err(RecvError));
            }
        }
    });
}

/// A timed select racing a sender: the value is taken exactly when the
/// send succeeds; after a timeout the Alt is withdrawn, the receiver
/// leaves and the value comes back to the sender.
#[test]
fn timed_select_racing_a_sender() {
    model::check_with_bound(2, || {
        let (mut tx, mut rx) = csp::channel::<u8>();
        let sender = thread::spawn(move || tx.send(8).map_err(|e| e.0));
        let got = Alt::new(vec![&mut rx]).try_select_for(std::time::Duration::from_millis(1));
        if got.is_none() {
            drop(rx);
        }
        let sent = sender.join().unwrap();
        match got {
            Some(taken) => assert_eq!((taken, sent), ((0, Ok(8)), Ok(()))),
            None => assert_eq!(sent, Err(8)),
        }
    });
}
