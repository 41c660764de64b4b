//! The `busy/` rows of rendezvous channels (capacity 0) and their
//! selects: lockfree-sync's CSP channel and `Alt` beside std's
//! `sync_channel(0)`, crossbeam's and flume's `bounded(0)` (and their
//! selects; std has none).
//!
//! * `busy/wake-{p50,p99}/csp/N`: a receiver blocks; the event is the send.
//! * `busy/wake-{p50,p99}/alt/N`: a select over two receivers blocks; the
//!   event is a send on one of them.
//! * `busy/overshoot-{p50,p99}/csp-recv/N`, `.../csp-send/N`,
//!   `.../alt/N`: a 1 ms timed receive, send or select that nobody
//!   answers.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::turns::{Wait, in_turns};
use super::{TIMEOUT, WakeOps, overshoot, overshoot_row, wake_row, wake_turn};
use crate::harness::Workload;

/// A rendezvous channel with a timed receive.
trait Zero: 'static {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn channel() -> (Self::Tx, Self::Rx);
    fn send(tx: &mut Self::Tx);
    fn recv(rx: &mut Self::Rx);
    /// Whether a value came within `timeout`.
    fn recv_timeout(rx: &mut Self::Rx, timeout: Duration) -> bool;
}

/// A rendezvous channel with a timed send.
trait ZeroSend: Zero {
    /// Whether a receiver took the value within `timeout`.
    fn send_timeout(tx: &mut Self::Tx, timeout: Duration) -> bool;
}

/// A rendezvous channel whose receivers can be selected over.
trait ZeroSelect: Zero {
    /// Waits for a value on `a` or `b`.
    fn select(a: &mut Self::Rx, b: &mut Self::Rx);
    /// Whether a value came on `a` or `b` within `timeout`.
    fn select_timeout(a: &mut Self::Rx, b: &mut Self::Rx, timeout: Duration) -> bool;
}

struct LockfreeCsp;
struct StdZero;
struct CrossbeamZero;
struct FlumeZero;

/// The channels share their method names; only the types differ.
macro_rules! zero {
    ($name:ident, $tx:ty, $rx:ty, $channel:expr) => {
        impl Zero for $name {
            type Tx = $tx;
            type Rx = $rx;
            fn channel() -> (Self::Tx, Self::Rx) {
                $channel
            }
            fn send(tx: &mut Self::Tx) {
                tx.send(1).expect("receiver alive");
            }
            fn recv(rx: &mut Self::Rx) {
                rx.recv().expect("sender alive");
            }
            fn recv_timeout(rx: &mut Self::Rx, timeout: Duration) -> bool {
                Self::timed_recv(rx, timeout)
            }
        }
    };
}

zero!(
    LockfreeCsp,
    lockfree_sync::csp::Sender<u64>,
    lockfree_sync::csp::Receiver<u64>,
    lockfree_sync::csp::channel()
);
zero!(
    StdZero,
    std::sync::mpsc::SyncSender<u64>,
    std::sync::mpsc::Receiver<u64>,
    std::sync::mpsc::sync_channel(0)
);
zero!(
    CrossbeamZero,
    crossbeam_channel::Sender<u64>,
    crossbeam_channel::Receiver<u64>,
    crossbeam_channel::bounded(0)
);
zero!(
    FlumeZero,
    flume::Sender<u64>,
    flume::Receiver<u64>,
    flume::bounded(0)
);

impl LockfreeCsp {
    fn timed_recv(rx: &mut lockfree_sync::csp::Receiver<u64>, timeout: Duration) -> bool {
        rx.try_recv_for(timeout).is_ok()
    }
}

impl StdZero {
    fn timed_recv(rx: &mut std::sync::mpsc::Receiver<u64>, timeout: Duration) -> bool {
        rx.recv_timeout(timeout).is_ok()
    }
}

impl CrossbeamZero {
    fn timed_recv(rx: &mut crossbeam_channel::Receiver<u64>, timeout: Duration) -> bool {
        rx.recv_timeout(timeout).is_ok()
    }
}

impl FlumeZero {
    fn timed_recv(rx: &mut flume::Receiver<u64>, timeout: Duration) -> bool {
        rx.recv_timeout(timeout).is_ok()
    }
}

impl ZeroSend for LockfreeCsp {
    fn send_timeout(tx: &mut Self::Tx, timeout: Duration) -> bool {
        tx.try_send_for(1, timeout).is_ok()
    }
}

impl ZeroSend for CrossbeamZero {
    fn send_timeout(tx: &mut Self::Tx, timeout: Duration) -> bool {
        tx.send_timeout(1, timeout).is_ok()
    }
}

impl ZeroSend for FlumeZero {
    fn send_timeout(tx: &mut Self::Tx, timeout: Duration) -> bool {
        tx.send_timeout(1, timeout).is_ok()
    }
}

impl ZeroSelect for LockfreeCsp {
    fn select(a: &mut Self::Rx, b: &mut Self::Rx) {
        let (_, got) = lockfree_sync::csp::Alt::new(vec![a, b]).select();
        got.expect("sender alive");
    }
    fn select_timeout(a: &mut Self::Rx, b: &mut Self::Rx, timeout: Duration) -> bool {
        lockfree_sync::csp::Alt::new(vec![a, b])
            .try_select_for(timeout)
            .is_some()
    }
}

impl ZeroSelect for CrossbeamZero {
    fn select(a: &mut Self::Rx, b: &mut Self::Rx) {
        let mut sel = crossbeam_channel::Select::new();
        sel.recv(a);
        sel.recv(b);
        let op = sel.select();
        let rx = if op.index() == 0 { &*a } else { &*b };
        op.recv(rx).expect("sender alive");
    }
    fn select_timeout(a: &mut Self::Rx, b: &mut Self::Rx, timeout: Duration) -> bool {
        let mut sel = crossbeam_channel::Select::new();
        sel.recv(a);
        sel.recv(b);
        match sel.select_timeout(timeout) {
            Ok(op) => {
                let rx = if op.index() == 0 { &*a } else { &*b };
                op.recv(rx).is_ok()
            }
            Err(_) => false,
        }
    }
}

impl ZeroSelect for FlumeZero {
    fn select(a: &mut Self::Rx, b: &mut Self::Rx) {
        flume::Selector::new()
            .recv(a, |r| r.expect("sender alive"))
            .recv(b, |r| r.expect("sender alive"))
            .wait();
    }
    fn select_timeout(a: &mut Self::Rx, b: &mut Self::Rx, timeout: Duration) -> bool {
        flume::Selector::new()
            .recv(a, |r| r.is_ok())
            .recv(b, |r| r.is_ok())
            .wait_timeout(timeout)
            .unwrap_or(false)
    }
}

/// The `busy/` rows of rendezvous channels for `busy` spinning threads.
pub(super) fn workloads(busy: usize, waits: usize, budget: Duration) -> Vec<Workload> {
    vec![
        in_turns(
            overshoot_row("csp-recv", "an empty rendezvous channel", busy, "std"),
            &[
                ("lockfree-sync", empty_recv::<LockfreeCsp>),
                ("std", empty_recv::<StdZero>),
                ("crossbeam", empty_recv::<CrossbeamZero>),
                ("flume", empty_recv::<FlumeZero>),
            ],
            busy,
            waits,
            budget,
        ),
        in_turns(
            overshoot_row(
                "csp-send",
                "a rendezvous channel nobody receives from",
                busy,
                "crossbeam",
            ),
            &[
                ("lockfree-sync", unanswered_send::<LockfreeCsp>),
                ("crossbeam", unanswered_send::<CrossbeamZero>),
                ("flume", unanswered_send::<FlumeZero>),
            ],
            busy,
            waits,
            budget,
        ),
        in_turns(
            overshoot_row(
                "alt",
                "a select over two empty rendezvous channels",
                busy,
                "crossbeam",
            ),
            &[
                ("lockfree-sync", empty_select::<LockfreeCsp>),
                ("crossbeam", empty_select::<CrossbeamZero>),
                ("flume", empty_select::<FlumeZero>),
            ],
            busy,
            waits,
            budget,
        ),
        in_turns(
            wake_row("csp", "a send on a rendezvous channel", busy, "std"),
            &[
                ("lockfree-sync", wake_recv::<LockfreeCsp>),
                ("std", wake_recv::<StdZero>),
                ("crossbeam", wake_recv::<CrossbeamZero>),
                ("flume", wake_recv::<FlumeZero>),
            ],
            busy,
            waits,
            budget,
        ),
        in_turns(
            wake_row(
                "alt",
                "a send on one of two selected rendezvous channels",
                busy,
                "crossbeam",
            ),
            &[
                ("lockfree-sync", wake_select::<LockfreeCsp>),
                ("crossbeam", wake_select::<CrossbeamZero>),
                ("flume", wake_select::<FlumeZero>),
            ],
            busy,
            waits,
            budget,
        ),
    ]
}

fn empty_recv<C: Zero>() -> Wait {
    let (tx, mut rx) = C::channel();
    Box::new(move || {
        let _tx = &tx;
        overshoot(|| assert!(!C::recv_timeout(&mut rx, TIMEOUT)))
    })
}

fn unanswered_send<C: ZeroSend>() -> Wait {
    let (mut tx, rx) = C::channel();
    Box::new(move || {
        let _rx = &rx;
        overshoot(|| assert!(!C::send_timeout(&mut tx, TIMEOUT)))
    })
}

fn empty_select<C: ZeroSelect>() -> Wait {
    let (tx1, mut rx1) = C::channel();
    let (tx2, mut rx2) = C::channel();
    Box::new(move || {
        let _tx = (&tx1, &tx2);
        overshoot(|| assert!(!C::select_timeout(&mut rx1, &mut rx2, TIMEOUT)))
    })
}

/// The ends, each behind a lock (the waiter and the waker take turns).
type Ends<C> = (Mutex<<C as Zero>::Tx>, Mutex<<C as Zero>::Rx>);

fn wake_recv<C: Zero>() -> Wait {
    let (tx, rx) = C::channel();
    wake_turn(
        (Mutex::new(tx), Mutex::new(rx)),
        WakeOps::<Ends<C>> {
            prepare: |_| {},
            wait: |(_, rx)| C::recv(&mut rx.lock().expect("not poisoned")),
            wake: |(tx, _)| {
                let mut tx = tx.lock().expect("not poisoned");
                let at = Instant::now();
                C::send(&mut tx);
                at
            },
        },
    )
}

fn wake_select<C: ZeroSelect>() -> Wait {
    let (tx, rx) = C::channel();
    // The other channel's sender stays, silent.
    let (quiet_tx, quiet_rx) = C::channel();
    wake_turn(
        (Mutex::new((tx, quiet_tx)), Mutex::new((quiet_rx, rx))),
        WakeOps {
            prepare: |_| {},
            wait: |(_, rx)| {
                let (quiet, rx) = &mut *rx.lock().expect("not poisoned");
                C::select(quiet, rx);
            },
            wake: |(tx, _)| {
                let (tx, _) = &mut *tx.lock().expect("not poisoned");
                let at = Instant::now();
                C::send(tx);
                at
            },
        },
    )
}
