//! lockfree_sync::mpsc under real threads and two executors (tokio and
//! futures' own).
#![cfg(not(loom))]

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use lockfree_sync::mpsc::{self, BLOCK_CAP, RecvError, SendError, TryRecvError};

/// Counts its drops.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>, #[allow(dead_code)] u64);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn fifo_across_blocks_then_disconnect() {
    let (tx, rx) = mpsc::channel();
    let n = BLOCK_CAP as u64 * 5 + 3;
    for i in 0..n {
        tx.send(i).unwrap();
    }
    drop(tx);
    for i in 0..n {
        assert_eq!(rx.recv(), Ok(i));
    }
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

#[test]
fn drains_everything_before_reporting_disconnection() {
    let (tx, rx) = mpsc::channel();
    let producers: Vec<_> = (0..4u64)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..10_000u64 {
                    tx.send((p, i)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut next = [0u64; 4];
    for (p, i) in rx.iter() {
        assert_eq!(next[p as usize], i, "producer {p} out of order");
        next[p as usize] += 1;
    }
    assert_eq!(next, [10_000; 4]);
    for p in producers {
        p.join().unwrap();
    }
}

#[test]
fn receiver_wakes_for_a_late_message() {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || rx.recv());
    thread::sleep(Duration::from_millis(50)); // the receiver is parked by now
    tx.send(9).unwrap();
    assert_eq!(h.join().unwrap(), Ok(9));
}

#[test]
fn last_sender_leaving_wakes_the_receiver() {
    let (tx, rx) = mpsc::channel::<u8>();
    let tx2 = tx.clone();
    let h = thread::spawn(move || rx.recv());
    thread::sleep(Duration::from_millis(30));
    drop(tx);
    thread::sleep(Duration::from_millis(30));
    drop(tx2);
    assert_eq!(h.join().unwrap(), Err(RecvError));
}

#[test]
fn send_after_receiver_dropped_hands_the_value_back() {
    let (tx, rx) = mpsc::channel();
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(
        tx.send(String::from("back")),
        Err(SendError(String::from("back")))
    );
}

#[test]
fn dropping_the_receiver_drops_every_queued_value_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let n = BLOCK_CAP * 3 + 1;
    for i in 0..n {
        tx.send(Counted(Arc::clone(&drops), i as u64)).unwrap();
    }
    drop(rx.recv().unwrap()); // one taken and dropped by us
    drop(rx);
    assert_eq!(
        drops.load(SeqCst),
        n,
        "queued values dropped with the receiver"
    );
    let back = tx.send(Counted(Arc::clone(&drops), 0)).unwrap_err();
    drop(back);
    drop(tx);
    assert_eq!(drops.load(SeqCst), n + 1);
}

#[test]
fn dropping_both_ends_with_values_queued_drops_them() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    for i in 0..5 {
        tx.send(Counted(Arc::clone(&drops), i)).unwrap();
        tx2.send(Counted(Arc::clone(&drops), i)).unwrap();
    }
    drop(tx);
    drop(tx2);
    drop(rx);
    assert_eq!(drops.load(SeqCst), 10);
}

#[test]
fn recv_timeout_times_out_then_receives() {
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    assert_eq!(
        rx.try_recv_for(Duration::from_millis(30)),
        Err(TryRecvError::Empty)
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(30),
        "returned early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(2), "returned late: {waited:?}");
    let h = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        tx.send(1).unwrap();
        tx
    });
    assert_eq!(rx.try_recv_for(Duration::from_secs(10)), Ok(1));
    drop(h.join().unwrap());
    assert_eq!(
        rx.try_recv_for(Duration::from_secs(10)),
        Err(TryRecvError::Disconnected)
    );
    // A timeout too large for `Instant` means "no deadline".
    let (tx, rx) = mpsc::channel();
    tx.send(2).unwrap();
    assert_eq!(rx.try_recv_for(Duration::MAX), Ok(2));
}

#[test]
fn try_iter_takes_what_is_queued() {
    let (tx, rx) = mpsc::channel();
    for i in 0..3 {
        tx.send(i).unwrap();
    }
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    tx.send(3).unwrap();
    drop(tx);
    assert_eq!(rx.into_iter().collect::<Vec<_>>(), [3]);
}

#[test]
fn many_short_lived_senders() {
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..200u64)
        .map(|i| {
            let tx = tx.clone();
            thread::spawn(move || tx.send(i).unwrap())
        })
        .collect();
    drop(tx);
    let mut got: Vec<u64> = rx.iter().collect();
    got.sort_unstable();
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn poll_recv_registers_and_is_woken() {
    let (tx, mut rx) = mpsc::channel();
    let woken = Arc::new(WakeCount::default());
    let waker = Waker::from(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    // The first poll of an empty queue yields to the executor (it wakes
    // the task itself); the next one publishes the task's waiter.
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    assert_eq!(woken.0.load(SeqCst), 1, "a yielding poll wakes its task");
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    assert_eq!(woken.0.load(SeqCst), 1);
    tx.send(1).unwrap();
    assert_eq!(woken.0.load(SeqCst), 2, "the send wakes the task");
    assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(1)));
    drop(tx);
    assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(None));
}

#[test]
fn cancelled_recv_async_loses_nothing() {
    let (tx, mut rx) = mpsc::channel();
    let woken = Arc::new(WakeCount::default());
    let waker = Waker::from(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    {
        let mut fut = pin!(rx.recv_async());
        assert!(fut.as_mut().poll(&mut cx).is_pending()); // yields
        assert!(fut.as_mut().poll(&mut cx).is_pending()); // waits
    } // dropped while waiting
    let before = woken.0.load(SeqCst);
    tx.send(5).unwrap();
    assert_eq!(
        woken.0.load(SeqCst),
        before,
        "a cancelled receive is not woken"
    );
    assert_eq!(rx.try_recv(), Ok(5));
}

#[test]
fn tokio_tasks_fan_in() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let sum = rt.block_on(async {
        let (tx, mut rx) = mpsc::channel::<u64>();
        for t in 0..16u64 {
            let tx = tx.clone();
            tokio::spawn(async move {
                for i in 0..1_000 {
                    tx.send(t * 1_000 + i).unwrap();
                    if i % 100 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            });
        }
        drop(tx);
        let receiver = tokio::spawn(async move {
            let mut sum = 0;
            while let Ok(v) = rx.recv_async().await {
                sum += v;
            }
            sum
        });
        receiver.await.unwrap()
    });
    assert_eq!(sum, (0..16_000u64).sum::<u64>());
}

#[test]
fn futures_executor_receives_from_threads() {
    let (tx, mut rx) = mpsc::channel();
    let h = thread::spawn(move || {
        for i in 0..1_000u32 {
            tx.send(i).unwrap();
            if i % 97 == 0 {
                thread::sleep(Duration::from_micros(200));
            }
        }
    });
    let got = futures::executor::block_on(async {
        let mut got = Vec::new();
        while let Some(v) = poll_fn(|cx| rx.poll_recv(cx)).await {
            got.push(v);
        }
        got
    });
    assert_eq!(got, (0..1_000).collect::<Vec<_>>());
    h.join().unwrap();
}

#[test]
fn errors_display() {
    assert!(!SendError(1).to_string().is_empty());
    assert!(!RecvError.to_string().is_empty());
    assert!(!TryRecvError::Empty.to_string().is_empty());
    assert!(!TryRecvError::Empty.to_string().is_empty());
    assert_eq!(format!("{:?}", SendError(1)), "SendError(..)");
}

#[derive(Default)]
struct WakeCount(AtomicUsize);

impl std::task::Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn blocking_recv_after_a_pending_poll_is_still_woken() {
    // A task's waiter left published by a Pending poll must not strand a
    // later blocking receive, nor a later poll.
    let (tx, mut rx) = mpsc::channel();
    let mut cx = Context::from_waker(Waker::noop());
    assert_eq!(rx.poll_recv(&mut cx), Poll::Pending);
    let h = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        tx.send(1).unwrap();
        thread::sleep(Duration::from_millis(30));
        tx.send(2).unwrap();
        tx
    });
    assert_eq!(rx.recv(), Ok(1));
    let woken = Arc::new(WakeCount::default());
    let waker = Waker::from(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    let got = loop {
        match rx.poll_recv(&mut cx) {
            Poll::Ready(v) => break v,
            Poll::Pending => {
                let deadline = Instant::now() + Duration::from_secs(10);
                while woken.0.load(SeqCst) == 0 {
                    assert!(Instant::now() < deadline, "the task was never woken");
                    thread::yield_now();
                }
                woken.0.store(0, SeqCst);
            }
        }
    };
    assert_eq!(got, Some(2));
    drop(h.join().unwrap());
}

/// A block of large messages is built on the heap, not on the sending
/// thread's stack: with the block built on the stack first, the first send
/// of a spawned thread (2 MiB stack) overflowed it (4 KiB messages in a
/// debug build, 16 KiB in release).
#[test]
fn large_messages_from_spawned_threads() {
    fn send_from_a_thread<const N: usize>() {
        let (tx, rx) = mpsc::channel::<[u8; N]>();
        thread::spawn(move || {
            for i in 0..3u8 {
                tx.send([i; N]).unwrap();
            }
        })
        .join()
        .unwrap();
        for i in 0..3u8 {
            let got = rx.recv().unwrap();
            assert!(got.iter().all(|&b| b == i));
        }
        assert_eq!(rx.recv(), Err(RecvError));
    }
    send_from_a_thread::<{ 4 * 1024 }>();
    send_from_a_thread::<{ 16 * 1024 }>();
    send_from_a_thread::<{ 64 * 1024 }>();
}

/// Panics when dropped if its flag says so, and counts its drops.
struct PanicsOnDrop(Arc<AtomicUsize>, bool);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        if self.1 {
            panic!("this message panics when dropped");
        }
    }
}

/// A queued message whose drop panics while the receiver's drop drains the
/// queue does not stop the drain: the rest are dropped too (as a `Vec`
/// does), not left queued until the last sender goes.
#[test]
fn a_panicking_message_drop_does_not_stop_the_receivers_drain() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    for i in 0..10 {
        tx.send(PanicsOnDrop(drops.clone(), i == 3)).unwrap();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(rx)));
    assert!(r.is_err(), "the message's drop did not panic");
    assert_eq!(drops.load(SeqCst), 10, "messages left undropped");
    drop(tx);
    assert_eq!(drops.load(SeqCst), 10);
}

/// `Sender` is `!Sync`; where one sender must be shared (as a `static` or
/// a server's state), its docs say to put it in a `Mutex`: eight threads
/// send through one `Mutex<Sender>` and every message arrives once, each
/// thread's in order.
#[test]
fn many_threads_send_through_one_sender_in_a_mutex() {
    let (tx, rx) = lockfree_sync::mpsc::channel::<(u64, u64)>();
    let tx = lockfree_sync::Mutex::new(tx);
    let per = 10_000u64;
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let tx = &tx;
            s.spawn(move || {
                for i in 0..per {
                    tx.lock().send((t, i)).unwrap();
                }
            });
        }
    });
    drop(tx);
    let mut next = [0u64; 8];
    for (t, i) in rx.iter() {
        assert_eq!(i, next[t as usize], "thread {t}'s messages out of order");
        next[t as usize] += 1;
    }
    assert_eq!(next, [per; 8], "messages lost or duplicated");
}

/// One sender moves through 300 short-lived threads in turn (each sends
/// 50 messages and hands it back), taking its unused nodes along, while a
/// clone sends from a long-lived thread throughout: every message arrives
/// once, and each producer's in order.
#[test]
fn a_sender_moves_through_short_lived_threads_beside_a_clone() {
    let (mut tx, rx) = lockfree_sync::mpsc::channel::<(u64, u64)>();
    let (rounds, per) = (300u64, 50u64);
    let steady = {
        let tx = tx.clone();
        thread::spawn(move || {
            for i in 0..rounds * per {
                tx.send((u64::MAX, i)).unwrap();
            }
        })
    };
    for t in 0..rounds {
        tx = thread::spawn(move || {
            for i in 0..per {
                tx.send((0, t * per + i)).unwrap();
            }
            tx
        })
        .join()
        .unwrap();
    }
    steady.join().unwrap();
    drop(tx);
    let mut next = std::collections::HashMap::new();
    let mut n = 0;
    for (t, i) in rx.iter() {
        let expected = next.entry(t).or_insert(0u64);
        assert_eq!(i, *expected, "producer {t}'s messages out of order");
        *expected += 1;
        n += 1;
    }
    assert_eq!(n, 2 * rounds * per, "messages lost or duplicated");
}

/// A hostile life for one sender: it moves from thread to thread, then
/// is cloned for more threads than cores while it sends too, and a clone
/// sends from a thread-local destructor. Every message arrives once, and the relayed messages (one
/// logical producer, ordered by the joins) arrive in order.
#[test]
fn a_sender_moved_cloned_and_used_from_a_thread_local_destructor() {
    use lockfree_sync::mpsc::Sender;
    use std::cell::RefCell;

    struct SendOnDrop(Sender<u64>, u64);
    impl Drop for SendOnDrop {
        fn drop(&mut self) {
            self.0.send(self.1).unwrap();
        }
    }
    std::thread_local! {
        static LAST_WORDS: RefCell<Option<SendOnDrop>> = const { RefCell::new(None) };
    }

    let (mut tx, rx) = lockfree_sync::mpsc::channel::<u64>();
    let relay = 1_000u64;
    for hop in 0..4u64 {
        tx = std::thread::spawn(move || {
            for i in 0..relay {
                tx.send(hop * relay + i).unwrap();
            }
            tx
        })
        .join()
        .unwrap();
    }
    let shared = 500u64;
    let base = 4 * relay;
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let tx = tx.clone();
            s.spawn(move || {
                for i in 0..shared {
                    tx.send(base + t * shared + i).unwrap();
                }
            });
        }
        for i in 0..shared {
            tx.send(base + 8 * shared + i).unwrap();
        }
    });
    let last = base + 9 * shared;
    let clone = tx.clone();
    std::thread::spawn(move || {
        LAST_WORDS.with(|w| *w.borrow_mut() = Some(SendOnDrop(clone, last)));
    })
    .join()
    .unwrap();
    drop(tx);
    let got: Vec<u64> = rx.iter().collect();
    let relayed: Vec<u64> = got.iter().copied().filter(|&v| v < base).collect();
    assert_eq!(
        relayed,
        (0..base).collect::<Vec<_>>(),
        "relayed messages reordered"
    );
    let mut all = got;
    all.sort_unstable();
    assert_eq!(all, (0..=last).collect::<Vec<_>>());
}

/// A channel whose receiver never moved past the first dummy (nothing
/// sent, or nothing received) frees it from the channel's last handle.
/// The receiver's pointer to that dummy was made from a shared reference
/// when the channel was made, and the channel's drop followed it while its
/// own `&mut self` was live: under Miri (Stacked Borrows, its default)
/// undefined behaviour, "not granting access to tag ... because that would
/// remove [Unique ...] which is strongly protected". Natively this passes
/// either way; `cargo +nightly miri test -p lockfree-sync --test mpsc
/// a_channel_dropped` reported the UB on the old code.
#[test]
fn a_channel_dropped_with_its_first_dummy_still_the_head_frees_it() {
    // Nothing ever sent; the sender goes last.
    let (tx, rx) = mpsc::channel::<String>();
    drop(rx);
    drop(tx);
    // Nothing ever sent; the receiver goes last.
    let (tx, rx) = mpsc::channel::<String>();
    drop(tx);
    assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
    drop(rx);
    // A message refused after the receiver left.
    let (tx, rx) = mpsc::channel::<String>();
    drop(rx);
    assert!(tx.send("late".to_owned()).is_err());
    drop(tx);
}
