//! Loom models of lockfree_sync::mpsc: the paper's algorithm 3, whose
//! receiver sleeps on a `waiting_mark` handshake with the senders. Under loom
//! a block holds two nodes, so the models cross block boundaries. Run with
//! `cargo xtask loom -p lockfree-sync`.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use lockfree_sync::mpsc::{self, RecvError, TryRecvError};
use sync_core::model;
use sync_core::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use sync_core::sync::{Arc, thread};

/// One send racing one blocking receive, in either arrival order: the
/// receiver that sleeps first is woken (a lost wakeup is a loom deadlock),
/// the one that comes second takes the message without sleeping; after the
/// sender leaves, the receiver learns of it.
#[test]
fn send_and_recv_in_either_order() {
    model::check_with_bound(3, || {
        let (tx, rx) = mpsc::channel();
        let sender = thread::spawn(move || {
            tx.send(1).unwrap();
            tx
        });
        assert_eq!(rx.recv(), Ok(1));
        drop(sender.join().unwrap());
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// The `waiting_mark` window: two producers send while the receiver goes to
/// sleep and wakes repeatedly. Whatever the interleaving of the receiver's
/// "publish waiter, look at the tail" with each producer's "swap the tail,
/// look for a waiter", every message is received, in order per producer,
/// and the receiver never sleeps through one.
#[test]
fn waiting_mark_window_two_producers() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let a = thread::spawn(move || {
            tx.send(1).unwrap();
            tx.send(2).unwrap();
        });
        let b = thread::spawn(move || tx2.send(10).unwrap());
        let mut got = [rx.recv().unwrap(), rx.recv().unwrap(), rx.recv().unwrap()];
        let first_of_a = got.iter().position(|&v| v == 1).unwrap();
        let second_of_a = got.iter().position(|&v| v == 2).unwrap();
        assert!(
            first_of_a < second_of_a,
            "one producer's messages reordered"
        );
        got.sort_unstable();
        assert_eq!(got, [1, 2, 10]);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

/// A producer crosses into a new block (three messages, blocks of two)
/// while the receiver consumes and releases the old one: nothing lost, and
/// loom's leak check sees every block freed.
#[test]
fn producer_crosses_blocks_while_receiving() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel();
        let sender = thread::spawn(move || {
            for i in 0..3 {
                tx.send(i).unwrap();
            }
        });
        for i in 0..3 {
            assert_eq!(rx.recv(), Ok(i));
        }
        sender.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// Every sender leaves while the receiver sleeps: the last one wakes it, and
/// it first drains what was sent.
#[test]
fn close_while_receiver_waits() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel::<u8>();
        let tx2 = tx.clone();
        let a = thread::spawn(move || {
            tx.send(7).unwrap();
            drop(tx);
        });
        let b = thread::spawn(move || drop(tx2));
        assert_eq!(rx.recv(), Ok(7));
        assert_eq!(rx.recv(), Err(RecvError));
        a.join().unwrap();
        b.join().unwrap();
    });
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The receiver is dropped while a producer sends: every value is dropped
/// exactly once, by the receiver, by the channel, or handed back to the
/// sender in `SendError`.
#[test]
fn receiver_dropped_while_sending() {
    model::check_with_bound(2, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let sender = {
            let drops = Arc::clone(&drops);
            thread::spawn(move || {
                for _ in 0..3 {
                    if let Err(back) = tx.send(Counted(Arc::clone(&drops))) {
                        drop(back); // counted here
                    }
                }
            })
        };
        drop(rx);
        sender.join().unwrap();
        assert_eq!(drops.load(SeqCst), 3, "a value lost or dropped twice");
    });
}

/// A receiving task polls once (its waiter published), then its future is
/// dropped, racing a send: the message is neither lost nor duplicated, and a
/// later receive takes it.
#[test]
fn cancelled_recv_async() {
    model::check_with_bound(3, || {
        let (tx, mut rx) = mpsc::channel();
        let sender = thread::spawn(move || {
            tx.send(3).unwrap();
            tx
        });
        let mut cx = Context::from_waker(Waker::noop());
        let got = {
            let mut fut = pin!(rx.recv_async());
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(v) => Some(v.unwrap()),
                Poll::Pending => None,
            }
        }; // dropped, perhaps while a sender takes its waiter
        let tx = sender.join().unwrap();
        match got {
            Some(v) => assert_eq!(v, 3),
            None => assert_eq!(rx.try_recv(), Ok(3)),
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

/// A task waits in `recv_async` under an executor while a thread sends: the
/// task is woken (a lost wakeup leaves the executor blocked: loom deadlock).
#[test]
fn recv_async_is_woken() {
    model::check_with_bound(2, || {
        let (tx, mut rx) = mpsc::channel();
        let sender = thread::spawn(move || tx.send(4).unwrap());
        let got = sync_core::loom::future::block_on(async {
            let v = rx.recv_async().await;
            (v, rx.recv_async().await)
        });
        assert_eq!(got, (Ok(4), Err(RecvError)));
        sender.join().unwrap();
    });
}

/// A clone takes half of its parent's block: two threads send from the two
/// halves of one block while the receiver consumes, and the block is freed
/// exactly once, by whoever releases its last node (loom's leak and
/// data-race checks), whichever order the releases come in.
#[test]
fn clones_share_a_block() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel();
        tx.send(0).unwrap(); // the parent takes a block and uses one node
        let tx2 = tx.clone(); // fewer than two left: a fresh block, split
        let other = thread::spawn(move || {
            tx2.send(2).unwrap();
        });
        tx.send(1).unwrap();
        let got = [rx.recv().unwrap(), rx.recv().unwrap(), rx.recv().unwrap()];
        assert_eq!(got[0], 0);
        let mut rest = [got[1], got[2]];
        rest.sort_unstable();
        assert_eq!(rest, [1, 2]);
        other.join().unwrap();
        drop(tx);
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// A released block is kept and reused: the producer's fifth message (third
/// block, blocks of two) may land in the first block, which the receiver
/// released while the producer was sending; the reset must not race the
/// receiver's last reads of it (loom's cell checks), and nothing is lost.
#[test]
fn released_blocks_are_reused() {
    model::check_with_bound(1, || {
        let (tx, rx) = mpsc::channel();
        let sender = thread::spawn(move || {
            for i in 0..5 {
                tx.send(i).unwrap();
            }
        });
        for i in 0..5 {
            assert_eq!(rx.recv(), Ok(i));
        }
        sender.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// A receive that finds a producer between its swap and its link returns
/// (try_recv: `Empty`; poll_recv: `Pending`, after waking its task) instead
/// of waiting for it; the message arrives at a later receive, and the
/// disconnection only after it.
#[test]
fn receives_do_not_wait_for_a_send_in_flight() {
    model::check_with_bound(2, || {
        let (tx, mut rx) = mpsc::channel();
        let sender = thread::spawn(move || tx.send(3u8).unwrap());
        let mut cx = Context::from_waker(Waker::noop());
        let got = loop {
            match rx.try_recv() {
                Ok(v) => break v,
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => panic!("disconnected before the message"),
            }
            match rx.poll_recv(&mut cx) {
                Poll::Ready(Some(v)) => break v,
                Poll::Ready(None) => panic!("disconnected before the message"),
                Poll::Pending => thread::yield_now(),
            }
        };
        assert_eq!(got, 3);
        sender.join().unwrap();
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// `try_recv_for` racing a send: the timed park may time out (its waiter
/// cancelled while the sender may be notifying it), or the wait for a send
/// in flight may reach the deadline; the message is never lost.
#[test]
fn recv_timeout_races_send() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel();
        let sender = thread::spawn(move || {
            tx.send(1u8).unwrap();
            tx
        });
        let got = match rx.try_recv_for(std::time::Duration::from_millis(1)) {
            Ok(v) => v,
            Err(mpsc::TryRecvError::Empty) => rx.recv().unwrap(),
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(got, 1);
        drop(sender.join().unwrap());
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// Two senders, one of them possibly still in flight (swapped, not yet
/// linked) when the other's send returns and the receiver is dropped: the
/// receiver's drop waits for the link and drops both messages, while both
/// senders are still alive (before the fix, the message queued behind the
/// unlinked node stayed alive until the last sender went).
#[test]
fn receiver_drop_drops_messages_behind_a_send_in_flight() {
    model::check_with_bound(3, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let a = {
            let drops = Arc::clone(&drops);
            thread::spawn(move || {
                // Err only if the drop came first: the value comes back and
                // is dropped (counted) here.
                drop(tx.send(Counted(Arc::clone(&drops))));
                tx
            })
        };
        tx2.send(Counted(Arc::clone(&drops))).unwrap();
        drop(rx);
        // The drop has returned: what was sent before it is gone, whatever
        // `a` is doing.
        assert!(drops.load(SeqCst) >= 1, "a message outlived the receiver");
        let tx = a.join().unwrap();
        // `a`'s send has returned too: its message is gone as well.
        assert_eq!(drops.load(SeqCst), 2, "a message outlived the receiver");
        drop((tx, tx2));
        assert_eq!(drops.load(SeqCst), 2, "a message dropped twice");
    });
}

/// Two senders race the receiver's drop: a send that swaps after the
/// drain's last look at the tail sees `closed` and drops what it queued
/// (perhaps the other's message too, or leaves it to the other, which
/// requests a pass once linked). Once every send and the drop have
/// returned, every message is dropped, exactly once, with both senders
/// still alive.
#[test]
fn sends_racing_the_receivers_drop_drop_their_messages() {
    model::check_with_bound(2, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let spawn = |tx: mpsc::Sender<Counted>| {
            let drops = Arc::clone(&drops);
            thread::spawn(move || {
                drop(tx.send(Counted(Arc::clone(&drops))));
                tx
            })
        };
        let a = spawn(tx);
        let b = spawn(tx2);
        drop(rx);
        let senders = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(drops.load(SeqCst), 2, "a message outlived the receiver");
        drop(senders);
        assert_eq!(drops.load(SeqCst), 2, "a message dropped twice");
    });
}

/// A timed receive on a channel whose sender sends nothing until it
/// returns: it times out. Under loom time is not modelled, so the timeout
/// must come from the timed park, not from the real clock (which made the
/// model's executions differ between runs: loom's replay panicked).
#[test]
fn recv_timeout_times_out_without_the_real_clock() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel::<u8>();
        let other = thread::spawn(move || {
            thread::yield_now();
            tx
        });
        assert_eq!(
            rx.try_recv_for(std::time::Duration::from_millis(1)),
            Err(mpsc::TryRecvError::Empty)
        );
        let tx = other.join().unwrap();
        tx.send(1).unwrap();
        assert_eq!(rx.try_recv_for(std::time::Duration::from_millis(1)), Ok(1));
    });
}

/// A sender that has sent moves to another thread, sends there and comes
/// back, while its clone sends from a third thread: its unused nodes move
/// with it (the spawn and the join order the uses of its range, which loom
/// checks), and every message arrives, the moved sender's in order.
#[test]
fn a_sender_moves_between_threads_beside_its_clone() {
    model::check_with_bound(2, || {
        let (tx, rx) = mpsc::channel::<usize>();
        tx.send(1).unwrap();
        let clone = tx.clone();
        let other = thread::spawn(move || clone.send(9).unwrap());
        let tx = thread::spawn(move || {
            tx.send(2).unwrap();
            tx
        })
        .join()
        .unwrap();
        tx.send(3).unwrap();
        other.join().unwrap();
        drop(tx);
        let mut got: Vec<usize> = rx.iter().collect();
        let moved: Vec<usize> = got.iter().copied().filter(|&v| v != 9).collect();
        assert_eq!(moved, [1, 2, 3]);
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3, 9]);
    });
}
