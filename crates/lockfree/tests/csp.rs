//! lockfree_sync::csp under real threads and two executors.
#![cfg(not(loom))]

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use lockfree_sync::csp::{self, Alt, RecvError, SendError};

/// Counts its drops.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>, u32);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn ping_pong_between_threads() {
    let (mut ping_tx, mut ping_rx) = csp::channel::<u64>();
    let (mut pong_tx, mut pong_rx) = csp::channel::<u64>();
    let echo = thread::spawn(move || {
        while let Ok(v) = ping_rx.recv() {
            pong_tx.send(v + 1).unwrap();
        }
    });
    for i in 0..20_000 {
        ping_tx.send(i).unwrap();
        assert_eq!(pong_rx.recv(), Ok(i + 1));
    }
    drop(ping_tx);
    echo.join().unwrap();
    assert_eq!(pong_rx.recv(), Err(RecvError));
}

#[test]
fn receiver_first_then_sender_first_with_sleeps() {
    let (mut tx, mut rx) = csp::channel();
    let r = thread::spawn(move || {
        let a = rx.recv().unwrap(); // waits (parks) for the sender
        thread::sleep(Duration::from_millis(50)); // the sender waits for us
        let b = rx.recv().unwrap();
        (a, b)
    });
    thread::sleep(Duration::from_millis(50));
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    assert_eq!(r.join().unwrap(), (1, 2));
}

#[test]
fn send_returns_only_after_the_receive() {
    let (mut tx, mut rx) = csp::channel();
    let taken = Arc::new(AtomicUsize::new(0));
    let t = {
        let taken = Arc::clone(&taken);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            taken.store(1, SeqCst);
            rx.recv().unwrap()
        })
    };
    tx.send(9).unwrap();
    assert_eq!(
        taken.load(SeqCst),
        1,
        "send returned before the receiver came"
    );
    assert_eq!(t.join().unwrap(), 9);
}

#[test]
fn dropping_the_receiver_hands_a_waiting_sender_its_value() {
    let (mut tx, rx) = csp::channel();
    let t = thread::spawn(move || tx.send(String::from("mine")));
    thread::sleep(Duration::from_millis(30)); // the sender is waiting
    drop(rx);
    assert_eq!(t.join().unwrap(), Err(SendError(String::from("mine"))));
}

#[test]
fn dropping_the_sender_wakes_a_waiting_receiver() {
    let (tx, mut rx) = csp::channel::<u8>();
    let t = thread::spawn(move || rx.recv());
    thread::sleep(Duration::from_millis(30));
    drop(tx);
    assert_eq!(t.join().unwrap(), Err(RecvError));
}

#[test]
fn closed_channel_fails_at_once() {
    let (mut tx, rx) = csp::channel();
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.send(1).unwrap_err().0, 1);
    assert_eq!(tx.send(2).unwrap_err().0, 2, "stays closed");
    let (tx, mut rx) = csp::channel::<u8>();
    drop(tx);
    assert!(rx.is_closed());
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn no_value_lost_or_dropped_twice() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = csp::channel();
    let d = Arc::clone(&drops);
    let t = thread::spawn(move || {
        for i in 0..1_000 {
            tx.send(Counted(Arc::clone(&d), i)).unwrap();
        }
    });
    for i in 0..1_000 {
        assert_eq!(rx.recv().unwrap().1, i);
    }
    t.join().unwrap();
    assert_eq!(drops.load(SeqCst), 1_000);
}

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn cancelled_send_async_withdraws_its_value() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = csp::channel();
    {
        let fut = pin!(tx.send_async(Counted(Arc::clone(&drops), 1)));
        assert!(poll_once(fut).is_pending());
    } // dropped: withdrawn
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the withdrawn value drops with the future"
    );
    let t = thread::spawn(move || tx.send(Counted(Arc::new(AtomicUsize::new(0)), 2)).is_ok());
    assert_eq!(
        rx.recv().unwrap().1,
        2,
        "the withdrawn value is never received"
    );
    assert!(t.join().unwrap());
}

#[test]
fn cancelled_recv_async_keeps_a_delivered_value() {
    let (mut tx, mut rx) = csp::channel();
    let t;
    {
        let mut fut = pin!(rx.recv_async());
        assert!(poll_once(fut.as_mut()).is_pending());
        // The sender finds our slot and completes the rendezvous.
        t = thread::spawn(move || {
            tx.send(7).unwrap();
            tx
        });
        let tx = t.join().unwrap();
        drop(tx);
    } // dropped after the value arrived
    assert_eq!(
        rx.recv(),
        Ok(7),
        "the delivered value is kept for the next receive"
    );
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn async_pipeline_on_tokio() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let total = rt.block_on(async {
        let (mut tx, mut rx) = csp::channel::<u64>();
        let mut handles = Vec::new();
        for _ in 0..4 {
            let (mut next_tx, next_rx) = csp::channel::<u64>();
            let mut stage_rx = std::mem::replace(&mut rx, next_rx);
            handles.push(tokio::spawn(async move {
                while let Ok(v) = stage_rx.recv_async().await {
                    if next_tx.send_async(v + 1).await.is_err() {
                        break;
                    }
                }
            }));
        }
        let feeder = tokio::spawn(async move {
            for i in 0..1_000 {
                tx.send_async(i).await.unwrap();
            }
        });
        let mut total = 0;
        while let Ok(v) = rx.recv_async().await {
            total += v;
        }
        feeder.await.unwrap();
        for h in handles {
            h.await.unwrap();
        }
        total
    });
    assert_eq!(total, (0..1_000u64).map(|i| i + 4).sum::<u64>());
}

#[test]
fn futures_executor_with_a_thread_partner() {
    let (mut tx, mut rx) = csp::channel();
    let t = thread::spawn(move || {
        for i in 0..500u32 {
            assert_eq!(rx.recv(), Ok(i));
        }
    });
    futures::executor::block_on(async {
        for i in 0..500u32 {
            tx.send_async(i).await.unwrap();
        }
    });
    t.join().unwrap();
}

#[test]
fn alt_takes_from_whichever_is_ready() {
    let (mut tx1, mut rx1) = csp::channel();
    let (mut tx2, mut rx2) = csp::channel();
    let a = thread::spawn(move || {
        for i in 0..500 {
            tx1.send((1, i)).unwrap();
        }
    });
    let b = thread::spawn(move || {
        for i in 0..500 {
            tx2.send((2, i)).unwrap();
        }
    });
    let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    let mut next = [0, 0];
    let mut closed = 0;
    while closed < 2 {
        match alt.select() {
            (i, Ok((c, v))) => {
                assert_eq!(c, i + 1, "value from the wrong channel");
                assert_eq!(next[i], v, "channel {i} out of order");
                next[i] += 1;
            }
            (i, Err(RecvError)) => {
                assert_eq!(next[i], 500, "closed before its last value");
                closed += 1;
                if closed < 2 {
                    // A closed channel stays ready: wait on the other alone.
                    let other = 1 - i;
                    drop(alt);
                    let rx = if other == 0 { &mut rx1 } else { &mut rx2 };
                    while let Ok((_, v)) = rx.recv() {
                        assert_eq!(next[other], v);
                        next[other] += 1;
                    }
                    break;
                }
            }
        }
    }
    assert_eq!(next, [500, 500]);
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
// Assigning `None` ends the old future's borrow of the sender.
#[allow(unused_assignments)]
fn alt_is_fair_between_always_ready_senders() {
    // Two sending futures, polled by hand, keep both channels ready before
    // every select: a round-robin ALT alternates between them.
    let (mut tx1, mut rx1) = csp::channel::<usize>();
    let (mut tx2, mut rx2) = csp::channel::<usize>();
    let mut f1 = Some(Box::pin(tx1.send_async(0)));
    let mut f2 = Some(Box::pin(tx2.send_async(1)));
    assert!(poll_once(f1.as_mut().unwrap().as_mut()).is_pending());
    assert!(poll_once(f2.as_mut().unwrap().as_mut()).is_pending());
    let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    let mut picks = Vec::new();
    for _ in 0..100 {
        let (i, v) = alt.select();
        assert_eq!(v, Ok(i));
        picks.push(i);
        // The taken sender's future completes; offer again.
        if i == 0 {
            assert!(poll_once(f1.as_mut().unwrap().as_mut()).is_ready());
            f1 = None;
            f1 = Some(Box::pin(tx1.send_async(0)));
            assert!(poll_once(f1.as_mut().unwrap().as_mut()).is_pending());
        } else {
            assert!(poll_once(f2.as_mut().unwrap().as_mut()).is_ready());
            f2 = None;
            f2 = Some(Box::pin(tx2.send_async(1)));
            assert!(poll_once(f2.as_mut().unwrap().as_mut()).is_pending());
        }
    }
    let zeros = picks.iter().filter(|&&i| i == 0).count();
    assert_eq!(zeros, 50, "not round robin: {picks:?}");
    assert!(
        picks.windows(2).all(|w| w[0] != w[1]),
        "not round robin: {picks:?}"
    );
}

#[test]
#[should_panic(expected = "no channels")]
fn alt_over_nothing_panics() {
    let _ = Alt::<u8>::new(Vec::new());
}

#[test]
fn errors_display() {
    assert!(!SendError(1).to_string().is_empty());
    assert!(!RecvError.to_string().is_empty());
    assert_eq!(format!("{:?}", SendError(1)), "SendError(..)");
}

#[test]
fn cancel_hands_back_an_undelivered_value_or_reports_delivery() {
    let (mut tx, mut rx) = csp::channel();
    {
        let mut fut = pin!(tx.send_async(String::from("a")));
        assert!(poll_once(fut.as_mut()).is_pending());
        assert_eq!(fut.as_mut().cancel(), Some(String::from("a")));
        assert_eq!(fut.cancel(), None, "a second cancel has nothing");
    }
    let t;
    {
        let mut fut = pin!(tx.send_async(String::from("b")));
        assert!(poll_once(fut.as_mut()).is_pending());
        t = thread::spawn(move || rx.recv());
        while !t.is_finished() {
            thread::yield_now();
        }
        assert_eq!(fut.cancel(), None, "delivered: nothing comes back");
    }
    assert_eq!(t.join().unwrap(), Ok(String::from("b")));
}

#[test]
fn select_async_on_tokio() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let (mut tx1, mut rx1) = csp::channel::<u32>();
        let (mut tx2, mut rx2) = csp::channel::<u32>();
        // Each sender stays alive (returned) so that its channel does not
        // close while the other still sends.
        let a = tokio::spawn(async move {
            for i in 0..200 {
                tx1.send_async(i).await.unwrap();
            }
            tx1
        });
        let b = tokio::spawn(async move {
            for i in 1_000..1_200 {
                tx2.send_async(i).await.unwrap();
            }
            tx2
        });
        let mut got = Vec::new();
        {
            let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
            while got.len() < 400 {
                match alt.select_async().await {
                    (_, Ok(v)) => got.push(v),
                    (i, Err(_)) => panic!("channel {i} closed early"),
                }
            }
        }
        a.await.unwrap();
        b.await.unwrap();
        got
    });
    let (low, high): (Vec<u32>, Vec<u32>) = got.into_iter().partition(|&v| v < 1_000);
    assert_eq!(low, (0..200).collect::<Vec<_>>());
    assert_eq!(high, (1_000..1_200).collect::<Vec<_>>());
}

#[test]
fn cancelled_select_async_keeps_a_delivered_value() {
    let (mut tx1, mut rx1) = csp::channel();
    let (_tx2, mut rx2) = csp::channel::<u8>();
    {
        let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
        {
            let mut select = pin!(alt.select_async());
            assert!(poll_once(select.as_mut()).is_pending());
            // A sender claims the waiting Alt and hands its value over.
            let t = thread::spawn(move || {
                tx1.send(5u8).unwrap();
                tx1
            });
            let tx1 = t.join().unwrap();
            drop(tx1);
        } // dropped after the value arrived
        assert_eq!(alt.select(), (0, Ok(5)), "kept for the next select");
        assert_eq!(alt.select(), (0, Err(RecvError)));
    }
    // A select dropped before any sender came withdraws cleanly.
    let (mut tx, mut rx) = csp::channel();
    {
        let mut alt = Alt::new(vec![&mut rx]);
        let mut select = pin!(alt.select_async());
        assert!(poll_once(select.as_mut()).is_pending());
    }
    let t = thread::spawn(move || tx.send(7u8));
    assert_eq!(rx.recv(), Ok(7));
    assert!(t.join().unwrap().is_ok());
}

/// Leaks `future` as `mem::forget` does (its drop never runs, its memory
/// stays), keeping its address in a static so that LeakSanitizer (`cargo
/// xtask asan`) counts it reachable rather than leaked.
fn leak<F>(future: std::pin::Pin<Box<F>>) {
    static KEPT: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
    let addr = std::ptr::from_ref::<F>(&future).addr();
    KEPT.lock().unwrap().push(addr);
    std::mem::forget(future);
}

/// A published `SendAsync` leaked with `mem::forget` left its slot in the
/// channel word, and the sender's next send took that sender slot for a
/// receiver's: it returned `Ok` at once and both values were lost. Now the
/// next send withdraws the leaked offer first and waits for a real receiver.
///
/// The receiver starts only once the next send's first poll has withdrawn
/// the leaked offer (and published 2), so 1 can no longer be received. (A
/// receiver that runs before that takes 1 from the leaked offer, which is
/// delivered: `a_leaked_send_future_taken_by_the_receiver_is_delivered`.
/// An earlier version started the receiver first and raced it.)
#[test]
fn a_leaked_send_future_does_not_swallow_the_next_send() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut leaked = Box::pin(tx.send_async(1));
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    let receiver = {
        let mut next = pin!(tx.send_async(2));
        assert!(poll_once(next.as_mut()).is_pending());
        let receiver = thread::spawn(move || (rx.recv(), rx.recv()));
        assert_eq!(futures::executor::block_on(next).map_err(|e| e.0), Ok(()));
        receiver
    };
    drop(tx);
    // 1 stays with the leaked future; 2 is received.
    assert_eq!(receiver.join().unwrap(), (Ok(2), Err(RecvError)));
}

/// The same with the blocking forms: a timed send after the leak finds no
/// receiver (it must not "deliver" into the leaked sender slot), and a
/// timed receive then finds no sender (both offers are withdrawn).
#[test]
fn a_leaked_send_future_is_withdrawn_by_the_next_blocking_send() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut leaked = Box::pin(tx.send_async(1));
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    assert_eq!(
        tx.try_send_for(2, Duration::from_millis(1)),
        Err(csp::TrySendError::Full(2))
    );
    assert_eq!(
        rx.try_recv_for(Duration::from_millis(1)),
        Err(csp::TryRecvError::Empty)
    );
    let receiver = thread::spawn(move || rx.recv());
    tx.send(3).unwrap();
    assert_eq!(receiver.join().unwrap(), Ok(3));
}

/// The same with an async send after the leak, and a value delivered to the
/// leaked offer before the next send: it counts as sent.
#[test]
fn a_leaked_send_future_taken_by_the_receiver_is_delivered() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut leaked = Box::pin(tx.send_async(1));
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    assert_eq!(rx.recv(), Ok(1)); // the leaked offer was still published
    let receiver = thread::spawn(move || rx.recv());
    futures::executor::block_on(tx.send_async(2)).unwrap();
    assert_eq!(receiver.join().unwrap(), Ok(2));
}

/// A sender dropped while a receiver takes the value of its leaked
/// `SendAsync`. The receive swaps its own slot into the channel word, finds
/// the leaked sender slot there, and then stores the word empty; the drop
/// closed the word in between, found the receiver's slot, and the store
/// then wiped the close: the receiver got the leaked value, and its next
/// receive waited for ever on a channel whose sender was gone
/// (`is_closed()` false). The drop now withdraws a leaked offer first (or
/// waits for the receive that took it), as the receiver's drop does.
///
/// The window is a few instructions wide: the two threads meet at a spin
/// barrier, and the sender drops after a varying spin, for many rounds.
#[test]
fn a_sender_dropped_as_its_leaked_offer_is_taken_still_closes_the_channel() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    // Each round leaks one small future (and keeps its address).
    const ROUNDS: u64 = 100_000;
    let budget = Duration::from_secs(5);
    let handoff = Arc::new(std::sync::Mutex::new(None::<csp::Receiver<u32>>));
    let (turn, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let receiver = {
        let (handoff, turn, stop) = (Arc::clone(&handoff), Arc::clone(&turn), Arc::clone(&stop));
        thread::spawn(move || {
            loop {
                // Wait for the sender's `true`, answer `false`.
                while !turn.load(SeqCst) {
                    if stop.load(SeqCst) {
                        return;
                    }
                    std::hint::spin_loop();
                }
                let mut rx = handoff.lock().unwrap().take().expect("a receiver");
                turn.store(false, SeqCst);
                // Far longer than the sender may be kept from its drop.
                let first = rx.try_recv_for(Duration::from_secs(30));
                let second = rx.try_recv_for(Duration::from_secs(30));
                assert!(
                    !(first.is_ok() && second == Err(csp::TryRecvError::Empty)),
                    "the sender's drop was lost: {first:?}, then {second:?}, closed: {}",
                    rx.is_closed()
                );
            }
        })
    };
    let start = Instant::now();
    let mut round = 0u64;
    while round < ROUNDS && start.elapsed() < budget && !receiver.is_finished() {
        round += 1;
        let (mut tx, rx) = csp::channel::<u32>();
        let mut offer = Box::pin(tx.send_async(1));
        assert!(poll_once(offer.as_mut()).is_pending());
        leak(offer);
        *handoff.lock().unwrap() = Some(rx);
        turn.store(true, SeqCst);
        while turn.load(SeqCst) && !receiver.is_finished() {
            std::hint::spin_loop();
        }
        for _ in 0..round % 97 {
            std::hint::spin_loop();
        }
        drop(tx);
    }
    stop.store(true, SeqCst);
    receiver.join().expect("no lost close");
}

/// A published `RecvAsync` leaked with `mem::forget`: a sender that then
/// delivered into its slot returned `Ok`, and the value was lost (the next
/// receive waited for another); a receive that found the leaked slot took
/// it for a sender's and panicked. Now the receiver's next receive takes
/// the leaked slot back, and returns a value delivered into it.
#[test]
fn a_leaked_recv_future_keeps_a_delivered_value_for_the_next_receive() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut leaked = Box::pin(rx.recv_async());
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    tx.send(7).unwrap(); // delivered into the leaked future's slot
    drop(tx);
    assert_eq!(rx.recv(), Ok(7));
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn a_leaked_recv_future_is_withdrawn_by_the_next_receive() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut leaked = Box::pin(rx.recv_async());
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20)); // the receiver waits first
        tx.send(8).map(|()| tx)
    });
    assert_eq!(rx.recv(), Ok(8));
    let tx = sender.join().unwrap().unwrap();
    // And through a future and an Alt.
    let mut leaked = Box::pin(rx.recv_async());
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    drop(tx);
    assert_eq!(futures::executor::block_on(rx.recv_async()), Err(RecvError));
    let (mut tx2, mut rx2) = csp::channel::<u32>();
    let mut leaked = Box::pin(rx2.recv_async());
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    let sender = thread::spawn(move || tx2.send(9).map(|()| tx2));
    let mut alt = Alt::new(vec![&mut rx2]);
    assert_eq!(alt.select(), (0, Ok(9)));
    drop(sender.join().unwrap().unwrap());
}

/// A value delivered to a leaked `RecvAsync` and never received is dropped
/// with the receiver, once.
#[test]
fn a_value_delivered_to_a_leaked_recv_future_drops_with_the_receiver() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = csp::channel::<Counted>();
    let mut leaked = Box::pin(rx.recv_async());
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    tx.send(Counted(drops.clone(), 1)).unwrap();
    assert_eq!(drops.load(SeqCst), 0);
    drop(rx);
    assert_eq!(drops.load(SeqCst), 1);
}

/// A waker that panics when woken (user code may).
struct PanickingWaker;

impl std::task::Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("this waker panics");
    }
}

/// A sending task's waker panicked as the receiver completed its slot: the
/// value had been moved into the receiver's stack slot, so the unwinding
/// receive dropped it, while the send resolved `Ok` (delivered). Now the
/// value waits in the receiver's stash while the sender is woken, and the
/// next receive returns it.
#[test]
fn a_panicking_sender_waker_loses_no_value() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let waker = Waker::from(Arc::new(PanickingWaker));
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = csp::channel::<Counted>();
    {
        let mut send = Box::pin(tx.send_async(Counted(drops.clone(), 1)));
        assert!(
            send.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let r = catch_unwind(AssertUnwindSafe(|| rx.recv().map(|c| c.1)));
        assert!(r.is_err(), "the sender's waker did not panic");
        assert_eq!(drops.load(SeqCst), 0, "the delivered value was dropped");
        assert!(matches!(poll_once(send.as_mut()), Poll::Ready(Ok(()))));
    }
    assert_eq!(rx.recv().map(|c| c.1), Ok(1));
    assert_eq!(drops.load(SeqCst), 1);
    // The same through an async receive and through an Alt.
    {
        let mut send = Box::pin(tx.send_async(Counted(drops.clone(), 2)));
        assert!(
            send.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let r = catch_unwind(AssertUnwindSafe(|| {
            futures::executor::block_on(rx.recv_async()).map(|c| c.1)
        }));
        assert!(r.is_err());
        assert!(matches!(poll_once(send.as_mut()), Poll::Ready(Ok(()))));
    }
    assert_eq!(
        futures::executor::block_on(rx.recv_async()).map(|c| c.1),
        Ok(2)
    );
    for value in [3, 4] {
        let mut send = Box::pin(tx.send_async(Counted(drops.clone(), value)));
        assert!(
            send.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let (_tx2, mut rx2) = csp::channel::<Counted>();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut alt = Alt::new(vec![&mut rx2, &mut rx]);
            if value == 3 {
                alt.select().1.map(|c| c.1)
            } else {
                futures::executor::block_on(alt.select_async())
                    .1
                    .map(|c| c.1)
            }
        }));
        assert!(r.is_err());
        assert!(matches!(poll_once(send.as_mut()), Poll::Ready(Ok(()))));
        let mut alt = Alt::new(vec![&mut rx2, &mut rx]);
        assert_eq!(alt.select().1.map(|c| c.1), Ok(value));
    }
    assert_eq!(drops.load(SeqCst), 4);
}

/// A receiving task's waker panics as the sender completes its slot: the
/// send unwinds, but the value is the receiver's already.
#[test]
fn a_panicking_receiver_waker_loses_no_value() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let waker = Waker::from(Arc::new(PanickingWaker));
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut recv = Box::pin(rx.recv_async());
    assert!(
        recv.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    assert!(catch_unwind(AssertUnwindSafe(|| tx.send(5))).is_err());
    assert_eq!(poll_once(recv.as_mut()), Poll::Ready(Ok(5)));
}

/// A send future whose first poll delivered the value and then panicked in
/// the receiving task's waker (caught by the caller) was still `Idle`: a
/// second poll offered again, publishing a slot without a value, so the
/// receiver's next receive panicked ("a sender's slot holds its value"), and
/// a completed re-send would have reported a second delivery. Now the poll
/// records the send as over before it wakes the receiver, and a poll after
/// the panic returns `Ok(())` (delivered, once). The same with an Alt's
/// task waiting for the value.
#[test]
fn a_send_future_polled_again_after_its_wake_panicked_delivers_once() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let panicking = Waker::from(Arc::new(PanickingWaker));
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = csp::channel::<Counted>();
    // Polls a send of `value` whose delivery wakes a panicking waker, then
    // polls it again after the panic: delivered, once.
    let mut send_with_panicking_wake = |value: u32| {
        let mut send = Box::pin(tx.send_async(Counted(drops.clone(), value)));
        let r = catch_unwind(AssertUnwindSafe(|| poll_once(send.as_mut())));
        assert!(r.is_err(), "the receiver's waker did not panic");
        assert!(matches!(poll_once(send.as_mut()), Poll::Ready(Ok(()))));
    };
    // A receiving task.
    {
        let mut recv = Box::pin(rx.recv_async());
        assert!(
            recv.as_mut()
                .poll(&mut Context::from_waker(&panicking))
                .is_pending()
        );
        send_with_panicking_wake(1);
        assert_eq!(drops.load(SeqCst), 0, "the delivered value was dropped");
        let Poll::Ready(Ok(c)) = poll_once(recv.as_mut()) else {
            panic!("the receiver did not get the value");
        };
        assert_eq!(c.1, 1);
    }
    assert_eq!(drops.load(SeqCst), 1);
    // Nothing is left published: the next receive finds no sender.
    assert!(matches!(rx.try_recv(), Err(csp::TryRecvError::Empty)));
    // An Alt's task.
    let (_tx2, mut rx2) = csp::channel::<Counted>();
    {
        let mut alt = Alt::new(vec![&mut rx2, &mut rx]);
        let mut select = Box::pin(alt.select_async());
        assert!(
            select
                .as_mut()
                .poll(&mut Context::from_waker(&panicking))
                .is_pending()
        );
        send_with_panicking_wake(2);
        assert_eq!(drops.load(SeqCst), 1, "the delivered value was dropped");
        let Poll::Ready((1, Ok(c))) = poll_once(select.as_mut()) else {
            panic!("the Alt did not get the value");
        };
        assert_eq!(c.1, 2);
    }
    assert_eq!(drops.load(SeqCst), 2);
    assert!(matches!(rx.try_recv(), Err(csp::TryRecvError::Empty)));
}

/// A `SelectAsync` leaked with `mem::forget` while its Alt was published
/// left the Alt's entries in the channel words: a sender then claimed the
/// dead Alt and "delivered" into it (the value lost, the send `Ok`). Now
/// the receiver's next receive (or the Alt's next select, or a new Alt)
/// withdraws the leaked Alt, and keeps a value a sender handed to it.
#[test]
fn a_leaked_select_future_loses_no_value() {
    // The sender comes after the leak, before the next receive.
    let (mut tx, mut rx) = csp::channel::<u32>();
    {
        let mut alt = Alt::new(vec![&mut rx]);
        let mut select = Box::pin(alt.select_async());
        assert!(poll_once(select.as_mut()).is_pending());
        leak(select);
    }
    let sender = thread::spawn(move || tx.send(1)); // then drops tx
    thread::sleep(Duration::from_millis(20));
    assert_eq!(rx.recv(), Ok(1));
    assert!(sender.join().unwrap().is_ok());
    assert_eq!(rx.recv(), Err(RecvError));

    // The same Alt selects again after the leak; the sender comes later.
    let (mut tx, mut rx) = csp::channel::<u32>();
    let (_tx2, mut rx2) = csp::channel::<u32>();
    let mut alt = Alt::new(vec![&mut rx2, &mut rx]);
    let mut select = Box::pin(alt.select_async());
    assert!(poll_once(select.as_mut()).is_pending());
    leak(select);
    let sender = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        tx.send(2).map(|()| tx)
    });
    assert_eq!(alt.select(), (1, Ok(2)));
    drop(sender.join().unwrap().unwrap());
    assert_eq!(alt.select(), (1, Err(RecvError)));
}

/// A later future cancelled before its first poll leaves the record of a
/// leaked one alone: the next send still withdraws the leaked offer.
#[test]
fn cancelling_an_idle_send_future_keeps_a_leaked_offer_withdrawable() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let mut leaked = Box::pin(tx.send_async(1));
    assert!(poll_once(leaked.as_mut()).is_pending());
    leak(leaked);
    let mut idle = Box::pin(tx.send_async(2));
    assert_eq!(idle.as_mut().cancel(), Some(2));
    drop(idle);
    // The next send's first poll withdraws the leaked offer and posts its
    // own, before the receiver exists: a receiver started earlier could
    // legitimately take the leaked offer first (a flake seen in CI).
    let mut third = Box::pin(tx.send_async(3));
    assert!(poll_once(third.as_mut()).is_pending());
    let receiver = thread::spawn(move || (rx.recv(), rx.recv()));
    assert_eq!(futures::executor::block_on(third).map_err(|e| e.0), Ok(()));
    drop(tx);
    assert_eq!(receiver.join().unwrap(), (Ok(3), Err(RecvError)));
}

/// A timed receive with nobody sending times out and leaves nothing
/// published: the next rendezvous works as usual.
#[test]
fn timed_recv_times_out_then_the_channel_still_works() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    assert_eq!(
        rx.try_recv_for(Duration::from_millis(5)),
        Err(csp::TryRecvError::Empty)
    );
    let sender = thread::spawn(move || {
        tx.send(1).unwrap();
        tx
    });
    assert_eq!(rx.try_recv_for(Duration::from_secs(60)), Ok(1));
    drop(sender.join().unwrap());
    assert_eq!(
        rx.try_recv_for(Duration::from_secs(60)),
        Err(csp::TryRecvError::Disconnected)
    );
}

/// A timed send with nobody receiving hands its value back, and a receiver
/// that comes later never sees it.
#[test]
fn timed_send_times_out_with_the_value_then_the_channel_still_works() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (mut tx, mut rx) = csp::channel();
    let back = tx
        .try_send_for(Counted(Arc::clone(&drops), 1), Duration::from_millis(5))
        .unwrap_err();
    let csp::TrySendError::Full(back) = back else {
        panic!("not a timeout: {back:?}");
    };
    assert_eq!(back.1, 1);
    assert_eq!(drops.load(SeqCst), 0);
    let receiver = thread::spawn(move || rx.recv().map(|v| v.1));
    tx.try_send_until(
        Counted(Arc::clone(&drops), 2),
        std::time::Instant::now() + Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(receiver.join().unwrap(), Ok(2));
    let e = tx
        .try_send_for(Counted(Arc::clone(&drops), 3), Duration::from_secs(60))
        .unwrap_err();
    assert!(matches!(e, csp::TrySendError::Disconnected(Counted(_, 3))));
}

/// Timed sends and receives racing each other with timeouts around the
/// partner's arrival: every value is received exactly once or handed back
/// to its sender, never both, never neither.
#[test]
fn timed_sends_and_receives_lose_and_duplicate_nothing() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let receiver = thread::spawn(move || {
        let mut got = Vec::new();
        loop {
            match rx.try_recv_for(Duration::from_micros(50)) {
                Ok(v) => got.push(v),
                Err(csp::TryRecvError::Empty) => {}
                Err(csp::TryRecvError::Disconnected) => return got,
            }
        }
    });
    let mut sent = Vec::new();
    for i in 0..2_000 {
        match tx.try_send_for(i, Duration::from_micros(50)) {
            Ok(()) => sent.push(i),
            Err(csp::TrySendError::Full(v)) => assert_eq!(v, i),
            Err(e) => panic!("{e:?}"),
        }
    }
    drop(tx);
    assert_eq!(receiver.join().unwrap(), sent);
}

/// A timed select with nobody sending times out and withdraws from every
/// channel; with a sender it returns its value.
#[test]
fn timed_select_times_out_then_takes_a_sender() {
    let (mut tx1, mut rx1) = csp::channel::<u32>();
    let (_tx2, mut rx2) = csp::channel::<u32>();
    {
        let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
        assert_eq!(alt.try_select_for(Duration::from_millis(5)), None);
    }
    // Nothing of the Alt is left in the words: a timed send finds nobody.
    assert_eq!(
        tx1.try_send_for(1, Duration::from_millis(1)),
        Err(csp::TrySendError::Full(1))
    );
    let sender = thread::spawn(move || tx1.send(2).map(|()| tx1));
    let mut alt = Alt::new(vec![&mut rx2, &mut rx1]);
    assert_eq!(
        alt.try_select_for(Duration::from_secs(60)),
        Some((1, Ok(2)))
    );
    drop(alt);
    drop(sender.join().unwrap().unwrap());
}

/// Timed selects racing timed senders with short timeouts: every value is
/// taken exactly once, or handed back to its sender.
#[test]
fn timed_selects_lose_and_duplicate_nothing() {
    let (tx1, mut rx1) = csp::channel::<u32>();
    let (tx2, mut rx2) = csp::channel::<u32>();
    let sender = |mut tx: csp::Sender<u32>, base: u32| {
        thread::spawn(move || {
            let mut sent = Vec::new();
            for i in base..base + 1_000 {
                if tx.try_send_for(i, Duration::from_micros(50)).is_ok() {
                    sent.push(i);
                }
            }
            (sent, tx) // kept open: a closed channel would stay ready
        })
    };
    let (a, b) = (sender(tx1, 0), sender(tx2, 10_000));
    let mut got = Vec::new();
    let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    // Once both have finished, no send is in flight (each returned).
    while !(a.is_finished() && b.is_finished()) {
        match alt.try_select_for(Duration::from_micros(50)) {
            Some((_, Ok(v))) => got.push(v),
            Some((i, Err(RecvError))) => panic!("channel {i} closed"),
            None => {}
        }
    }
    let (mut sent, _tx1) = a.join().unwrap();
    sent.extend(b.join().unwrap().0);
    got.sort_unstable();
    sent.sort_unstable();
    assert_eq!(got, sent);
}

/// The attempts: with nobody on the other side they return at once and
/// leave nothing published; with a partner waiting they complete the
/// rendezvous; after a close they report it (a send hands its value back).
#[test]
fn attempts_complete_only_with_a_waiting_partner() {
    let (mut tx, mut rx) = csp::channel::<u32>();
    assert_eq!(tx.try_send(1), Err(csp::TrySendError::Full(1)));
    assert_eq!(rx.try_recv(), Err(csp::TryRecvError::Empty));
    assert_eq!(Alt::new(vec![&mut rx]).try_select(), None);
    // A waiting receiver takes a try_send; a waiting sender a try_recv.
    let receiver = thread::spawn(move || {
        let got = rx.recv();
        (got, rx)
    });
    let mut sent = Err(csp::TrySendError::Full(2));
    while let Err(csp::TrySendError::Full(v)) = sent {
        thread::yield_now();
        sent = tx.try_send(v);
    }
    assert_eq!(sent, Ok(()));
    let (got, mut rx) = receiver.join().unwrap();
    assert_eq!(got, Ok(2));
    let sender = thread::spawn(move || tx.send(3).map(|()| tx));
    let got = loop {
        match rx.try_recv() {
            Err(csp::TryRecvError::Empty) => thread::yield_now(),
            other => break other,
        }
    };
    assert_eq!(got, Ok(3));
    let mut tx = sender.join().unwrap().unwrap();
    let sender = thread::spawn(move || tx.send(4).map(|()| tx));
    let got = loop {
        if let Some(got) = Alt::new(vec![&mut rx]).try_select() {
            break got;
        }
        thread::yield_now();
    };
    assert_eq!(got, (0, Ok(4)));
    drop(sender.join().unwrap().unwrap());
    assert_eq!(rx.try_recv(), Err(csp::TryRecvError::Disconnected));
    let (mut tx, rx) = csp::channel::<u32>();
    drop(rx);
    assert_eq!(tx.try_send(5), Err(csp::TrySendError::Disconnected(5)));
}

/// A sender that finds an Alt waiting rebuilds the `Arc` of the Alt's
/// shared part from the channel word (and drops it). The word held a
/// pointer made from a reference to the shared part, whose provenance
/// does not cover the `Arc`'s counts: under Miri (Stacked Borrows, its
/// default) the sender's rebuilt `Arc` touched the counts out of bounds,
/// undefined behaviour. Natively this passes either way; `cargo +nightly
/// miri test -p lockfree-sync --test csp a_sender_that_claims` reported
/// the UB on the old code.
#[test]
fn a_sender_that_claims_a_waiting_alt_takes_the_word_s_reference_to_it() {
    let cx = &mut Context::from_waker(Waker::noop());
    let (mut tx1, mut rx1) = csp::channel::<Box<u32>>();
    let (mut tx2, mut rx2) = csp::channel::<Box<u32>>();
    let mut alt = Alt::new(vec![&mut rx1, &mut rx2]);
    {
        let mut select = pin!(alt.select_async());
        assert!(select.as_mut().poll(cx).is_pending());
        // Claims the Alt through the word of channel 2.
        tx2.try_send(Box::new(2)).unwrap();
        match select.as_mut().poll(cx) {
            Poll::Ready((1, Ok(v))) => assert_eq!(*v, 2),
            other => panic!("the claim was lost: {other:?}"),
        }
    }
    {
        // Through the word of channel 1, the first enabled, this time.
        let mut select = pin!(alt.select_async());
        assert!(select.as_mut().poll(cx).is_pending());
        tx1.try_send(Box::new(1)).unwrap();
        match select.as_mut().poll(cx) {
            Poll::Ready((0, Ok(v))) => assert_eq!(*v, 1),
            other => panic!("the claim was lost: {other:?}"),
        }
    }
    // A sender that finds the Alt already claimed by the other channel.
    let mut select = pin!(alt.select_async());
    assert!(select.as_mut().poll(cx).is_pending());
    tx1.try_send(Box::new(3)).unwrap();
    assert!(matches!(
        tx2.try_send(Box::new(4)),
        Err(csp::TrySendError::Full(_))
    ));
    assert!(matches!(select.as_mut().poll(cx), Poll::Ready((0, Ok(_)))));
}
