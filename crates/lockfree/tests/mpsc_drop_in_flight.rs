//! Dropping the receiver drops every message queued, including those
//! queued behind a send in flight: a producer preempted between its swap on
//! the tail and its link leaves the list unlinked behind it, and messages
//! that other senders queue meanwhile (their sends return `Ok`) must not
//! stay alive until the last sender goes (never, for a sender in a static).
//!
//! A real producer is frozen at a random point of its send loop by a signal
//! whose handler spins until the test releases it. The test then finds out
//! whether the freeze landed between the swap and the link: it sends a
//! probe from another sender, which a receive can take unless it is queued
//! behind an unlinked node. When it is, the other sender queues 1,000 more
//! messages and the receiver is dropped (on a thread of its own: the drop
//! waits for the frozen producer's link, which comes once it is released).
//! Before the fix the drop returned at once and dropped none of the 1,001.
#![cfg(all(not(loom), target_os = "linux"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

use lockfree_sync::mpsc::{self, TryRecvError};
use sync_core::testing::freeze;

/// Drops of the producer's messages.
static DROPS: AtomicUsize = AtomicUsize::new(0);
/// Drops of the other sender's messages (the probes).
static PROBE_DROPS: AtomicUsize = AtomicUsize::new(0);

/// Counts its drops (in a static: the producer's loop does as little as
/// possible besides its sends, so that more freezes land inside them).
/// `true`: a probe.
struct Counted(bool);

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0 {
            PROBE_DROPS.fetch_add(1, SeqCst);
        } else {
            DROPS.fetch_add(1, SeqCst);
        }
    }
}

/// Freezes that land between a swap and a link that the test tries for.
const CATCHES: usize = 2;
/// How long it tries, at most: on a loaded machine a freeze costs a few
/// milliseconds, and one freeze in tens to thousands lands in the window.
/// At least one catch is required.
const BUDGET: Duration = Duration::from_secs(90);

/// One channel with a producer sending on it, frozen again and again until
/// a freeze lands between its swap and its link (or `budget` freezes were
/// tried): then the scene of the module docs. Returns whether it was
/// caught, and the freezes tried.
fn one_catch(deadline: Instant) -> (bool, usize) {
    let (drops_before, probe_drops_before) = (DROPS.load(SeqCst), PROBE_DROPS.load(SeqCst));
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Counted>();
    let other = tx.clone();
    let producer = {
        let (received, stop) = (received.clone(), stop.clone());
        freeze::Freezable::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(SeqCst) {
                // A few blocks in flight at most, so that the producer
                // reuses spare blocks and is hardly ever frozen inside the
                // allocator.
                if sent - received.load(SeqCst) < 200 {
                    sent += 1;
                    if tx.send(Counted(false)).is_err() {
                        break; // the value came back and is dropped
                    }
                } else {
                    std::hint::spin_loop();
                }
            }
            (tx, sent)
        })
    };
    let probe = || Counted(true);
    let mut probes = 0;
    let mut tries = 0;
    let mut caught = false;
    let mut rx = Some(rx);
    while Instant::now() < deadline && !caught {
        tries += 1;
        let r = rx.as_ref().unwrap();
        let take = |m: Counted| {
            assert!(!m.0, "a probe received twice");
            received.fetch_add(1, SeqCst);
        };
        // Let the producer run a little, receiving.
        let until = Instant::now() + Duration::from_micros(20);
        while Instant::now() < until {
            if let Ok(m) = r.try_recv() {
                take(m);
            }
        }
        producer.freeze();
        // Everything linked before the frozen producer's node is taken;
        // then the probe is receivable unless it is queued behind an
        // unlinked node.
        loop {
            match r.try_recv() {
                Ok(m) => take(m),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => panic!("the senders are alive"),
            }
        }
        other.send(probe()).unwrap();
        probes += 1;
        match r.try_recv() {
            Ok(m) => assert!(m.0, "the frozen producer linked a message"),
            Err(TryRecvError::Empty) => caught = true,
            Err(TryRecvError::Disconnected) => panic!("the senders are alive"),
        }
        if caught {
            for _ in 0..1000 {
                other.send(probe()).unwrap();
            }
            probes += 1000;
            let before = PROBE_DROPS.load(SeqCst);
            // The drop waits for the frozen producer's link: on a thread of
            // its own, so that this one can release the producer.
            let dropper = {
                let rx = rx.take().unwrap();
                thread::spawn(move || {
                    drop(rx);
                    PROBE_DROPS.load(SeqCst)
                })
            };
            // Give the drop time to finish without the producer (as it did
            // before the fix), or to start waiting for it: a drop that has
            // not begun when the producer links would find nothing to wait
            // for either way.
            let waited = Instant::now();
            while !dropper.is_finished() && waited.elapsed() < Duration::from_millis(200) {
                thread::sleep(Duration::from_millis(1));
            }
            freeze::let_go();
            let at_drop = dropper.join().unwrap();
            assert_eq!(
                at_drop - before,
                1001,
                "messages queued behind a send in flight outlived the receiver; \
                 the sender that sent them is still alive"
            );
        }
        freeze::release();
    }
    drop(rx);
    stop.store(true, SeqCst);
    let (tx, sent) = producer.join();
    // Nothing dropped twice, nothing left once the channel is gone.
    drop((tx, other));
    assert_eq!(PROBE_DROPS.load(SeqCst) - probe_drops_before, probes);
    assert_eq!(DROPS.load(SeqCst) - drops_before, sent as usize);
    (caught, tries)
}

#[test]
fn receiver_drop_drops_messages_queued_behind_a_send_in_flight() {
    freeze::install();
    let deadline = Instant::now() + BUDGET;
    let (mut caught, mut tries) = (0, 0);
    while caught < CATCHES && Instant::now() < deadline {
        let (hit, n) = one_catch(deadline);
        caught += usize::from(hit);
        tries += n;
    }
    assert!(
        caught > 0,
        "none of {tries} freezes landed between a swap and a link"
    );
}
