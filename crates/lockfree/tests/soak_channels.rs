//! Soak tests of lockfree-sync's channels: many threads and tasks, millions
//! of messages, invariants checked at the end (nothing lost, nothing
//! duplicated, per-producer FIFO). Run with
//! `cargo xtask soak -p lockfree-sync` (release; `--minutes N` to go on
//! longer) and under AddressSanitizer with `cargo xtask asan -p lockfree-sync`.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};
use std::thread;

use lockfree_sync::{csp, mpsc};
use sync_core::testing::soak;

/// A tiny xorshift, so each worker cancels at its own random points.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Four producers send a million messages each; the receiver mixes `recv`,
/// `try_recv`, `try_recv_for` and `poll_recv`. Every producer's messages
/// arrive in order, none is lost or duplicated (the sum), and the
/// disconnection comes after the last one.
#[test]
#[ignore = "soak: run with cargo xtask soak"]
fn mpsc_four_producers_fifo_and_sum() {
    const PRODUCERS: usize = 4;
    const PER: u64 = 1_000_000;
    soak(1, |round| {
        let (tx, mut rx) = mpsc::channel::<(usize, u64)>();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    for i in 0..PER {
                        tx.send((p, i)).unwrap();
                        if i % 4096 == 0 {
                            // Clones come and go, splitting blocks.
                            let extra = tx.clone();
                            drop(extra);
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        let mut next = [0u64; PRODUCERS];
        let mut sum = 0u64;
        let mut pick = rng(round + 7);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            let got = match pick() % 4 {
                0 => rx.recv().ok(),
                1 => match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(mpsc::TryRecvError::Empty) => continue,
                    Err(mpsc::TryRecvError::Disconnected) => None,
                },
                2 => match rx.try_recv_for(std::time::Duration::from_micros(50)) {
                    Ok(m) => Some(m),
                    Err(mpsc::TryRecvError::Empty) => continue,
                    Err(mpsc::TryRecvError::Disconnected) => None,
                },
                _ => match rx.poll_recv(&mut cx) {
                    Poll::Ready(m) => m,
                    Poll::Pending => continue,
                },
            };
            let Some((p, i)) = got else { break };
            assert_eq!(next[p], i, "producer {p} out of order");
            next[p] += 1;
            sum += i;
        }
        assert_eq!(next, [PER; PRODUCERS], "messages lost");
        assert_eq!(sum, PRODUCERS as u64 * PER * (PER - 1) / 2);
        for p in producers {
            p.join().unwrap();
        }
    });
}

/// Values that count their drops: every one is dropped exactly once.
struct Counted(Arc<AtomicUsize>, u64);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// An occam pipeline of eight async stages joined by CSP channels, a
/// hundred thousand values through, on a 2-worker runtime. Each stage
/// drops some of its receive futures after one poll (racing the partner; a
/// value handed over at that moment is kept for the next receive) and
/// cancels some of its sends after one poll (an undelivered value comes
/// back and is sent again). Every value comes out once, in order, and every
/// value made is dropped once.
#[test]
#[ignore = "soak: run with cargo xtask soak"]
fn csp_pipeline_with_cancelled_stages() {
    const STAGES: usize = 8;
    const VALUES: u64 = 100_000;
    soak(1, |round| {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let (mut first_tx, mut rx) = csp::channel::<Counted>();
        let mut stages = Vec::new();
        for s in 0..STAGES {
            let (mut next_tx, next_rx) = csp::channel::<Counted>();
            let mut stage_rx = std::mem::replace(&mut rx, next_rx);
            stages.push(rt.spawn(async move {
                let mut pick = rng(round * 31 + s as u64 + 1);
                loop {
                    // Sometimes give up on a receive after one poll.
                    if pick() % 8 == 0 {
                        let fut = pin!(stage_rx.recv_async());
                        if let Poll::Ready(got) = poll_once(fut) {
                            let Ok(v) = got else { break };
                            forward(&mut next_tx, v, &mut pick).await;
                        }
                        tokio::task::yield_now().await;
                        continue;
                    }
                    let Ok(v) = stage_rx.recv_async().await else {
                        break;
                    };
                    forward(&mut next_tx, v, &mut pick).await;
                }
            }));
        }
        let feeder = {
            let (drops, made) = (Arc::clone(&drops), Arc::clone(&made));
            thread::spawn(move || {
                for i in 0..VALUES {
                    made.fetch_add(1, SeqCst);
                    first_tx.send(Counted(Arc::clone(&drops), i)).unwrap();
                }
            })
        };
        let mut next = 0u64;
        while let Ok(v) = rx.recv() {
            assert_eq!(v.1, next, "a value lost, duplicated or reordered");
            next += 1;
        }
        assert_eq!(next, VALUES);
        feeder.join().unwrap();
        rt.block_on(async {
            for s in stages {
                s.await.unwrap();
            }
        });
        drop(rt);
        assert_eq!(
            drops.load(SeqCst),
            made.load(SeqCst),
            "a value dropped twice or leaked"
        );
    });
}

/// Sends `v` on, sometimes giving up the first offer after one poll: a
/// value the receiver had not taken comes back from `cancel` and is sent
/// again; one it had taken is not.
async fn forward(tx: &mut csp::Sender<Counted>, v: Counted, pick: &mut impl FnMut() -> u64) {
    let v = if pick() % 8 == 0 {
        let mut fut = pin!(tx.send_async(v));
        if let Poll::Ready(sent) = poll_once(fut.as_mut()) {
            sent.unwrap();
            return;
        }
        match fut.cancel() {
            Some(v) => v,
            None => return, // delivered as we gave up
        }
    } else {
        v
    };
    tx.send_async(v).await.unwrap();
}

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}
