//! The `busy/wake-*` rows: from an event (an unlock, a release, a send) to
//! the woken waiter's return, each implementation's waiter and waker on
//! threads of their own (see the parent module).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::turns::{Row, Wait, in_turns};
use super::{CrossbeamMpsc, FlumeMpsc, LockfreeMpsc, Mpsc, SETTLE, StdMpsc, regime};
use crate::harness::{Unit, Workload};
use crate::peers::{BenchMutex, OneState};
use crate::twins::CondvarSemaphore;
use crate::workloads::adaptive::{Adaptive, LearnedPolicy};

/// A wake-up row, with `park-floor` as its reference.
pub(super) fn wake_row(kind: &str, event: &str, busy: usize, peer: &str) -> Row {
    let p50 = format!("busy/wake-p50/{kind}/{busy}");
    let p99 = format!("busy/wake-p99/{kind}/{busy}");
    let title = |pct: &str| {
        format!(
            "Wake-up latency: from {event} to the woken waiter's return ({pct}, ms), with \
             {busy} threads spinning on the CPUs."
        )
    };
    let workload = Workload::new(p50, Unit::Ms)
        .title(title("median"))
        .companion(p99, title("99th percentile"))
        .param("busy", busy as u64)
        .regime(regime(busy))
        .baseline(peer);
    Row {
        workload,
        reference: (PARK_FLOOR, park_floor),
        waits_per_thread_set: Some(WAITS_PER_THREAD_SET),
    }
}

/// A wake-up row's waits per set of threads: a set draws one of the
/// scheduler's two wake-up modes for all its waits (see the `turns`
/// module), so a run's median is taken over several sets (10 in a quick
/// run of 20 waits: with 5, a row's median compared about as many draws
/// of the mode as a coin's, and moved by the mode's 2x between runs).
const WAITS_PER_THREAD_SET: usize = 2;

/// How a harness thread waits for another (a waiter between rounds, a
/// lock's helper, a waker waiting for its waiter's return): blocked on a
/// condition variable, rung by the thread that makes what it waits for
/// happen. These threads once slept 20 µs at a time instead: with every
/// implementation of a row keeping its idle threads, that put a thread's
/// wake-up on the CPUs every few microseconds, inside the windows the
/// rows measure, and paths with more steps between the event and the
/// waiter's return paid for it more often. Not the threads' park tokens:
/// the primitives under test (and std's and crossbeam's channels) park
/// through them, and a token left over would end their next park.
#[derive(Default)]
struct Bell {
    lock: Mutex<()>,
    rung: Condvar,
}

impl Bell {
    /// How long a wait looks again unrung: only to notice a waiter that
    /// panicked (it rings nobody), and a helper's unlock (it rings nobody
    /// then, see `wake_lock`).
    const LOOK_AGAIN: Duration = Duration::from_millis(1);

    /// Wakes the threads waiting on the bell. Called after making their
    /// condition true: the lock orders it after a waiter's last look.
    fn ring(&self) {
        drop(self.lock.lock().unwrap_or_else(PoisonError::into_inner));
        self.rung.notify_all();
    }

    /// Waits until `done` holds, calling `check` before each wait.
    fn wait_until(&self, mut done: impl FnMut() -> bool, mut check: impl FnMut()) {
        let mut held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !done() {
            check();
            held = self
                .rung
                .wait_timeout(held, Self::LOOK_AGAIN)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// One waiter thread, woken once per call of the returned [`Wait`] (the
/// waiter stops when it is dropped). Each round the waker calls `prepare`
/// (so that the wait will block), lets the waiter go; the waiter announces
/// itself and calls `wait`, which blocks until the waker's `wake`; the
/// waker lets it settle into its wait for [`SETTLE`], notes the time and
/// calls `wake`; the waiter notes when it returned. The round's result is
/// the latency, in ms.
pub(super) fn wake_turn<S: Send + Sync + 'static>(shared: S, ops: WakeOps<S>) -> Wait {
    struct Round<S> {
        shared: S,
        /// The round the waiter may start (the waker's count).
        go: AtomicU64,
        /// The round the waiter is about to wait in (0: none yet).
        ready: AtomicU64,
        /// When the waiter returned, in ns since `base`; 0: not yet.
        woke: AtomicU64,
        stop: AtomicBool,
        base: Instant,
        /// Rung by the waker at `go`, by the waiter at `ready` and `woke`.
        bell: Bell,
    }
    /// The waker's side: stops and joins the waiter when dropped.
    struct Waker<S> {
        r: Arc<Round<S>>,
        round: u64,
        waiter: Option<thread::JoinHandle<()>>,
    }
    impl<S> Waker<S> {
        /// Panics if the waiter's thread has ended: its `wait` panicked,
        /// and the round would wait for it for ever.
        fn check_waiter(&self) {
            if self.waiter.as_ref().is_some_and(|t| t.is_finished()) {
                panic!("the waiter panicked in round {}", self.round);
            }
        }
    }
    impl<S> Drop for Waker<S> {
        fn drop(&mut self) {
            self.r.stop.store(true, Ordering::Release);
            self.r.go.store(self.round + 1, Ordering::Release);
            self.r.bell.ring();
            if let Some(waiter) = self.waiter.take() {
                let ended = waiter.join();
                assert!(ended.is_ok() || thread::panicking(), "the waiter panicked");
            }
        }
    }
    let r = Arc::new(Round {
        shared,
        go: AtomicU64::new(0),
        ready: AtomicU64::new(0),
        woke: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        base: Instant::now(),
        bell: Bell::default(),
    });
    let waiter = {
        let r = Arc::clone(&r);
        thread::spawn(move || {
            let mut round = 0;
            loop {
                round += 1;
                // Acquire: pairs with the waker's Release store of `go`.
                r.bell
                    .wait_until(|| r.go.load(Ordering::Acquire) >= round, || ());
                if r.stop.load(Ordering::Acquire) {
                    return;
                }
                // Release: pairs with the waker's Acquire load of `ready`.
                r.ready.store(round, Ordering::Release);
                r.bell.ring();
                (ops.wait)(&r.shared);
                let ns = r.base.elapsed().as_nanos() as u64;
                // Release: pairs with the waker's Acquire load of `woke`.
                r.woke.store(ns, Ordering::Release);
                // After the time is taken: the ring is not measured.
                r.bell.ring();
            }
        })
    };
    let mut w = Waker {
        r,
        round: 0,
        waiter: Some(waiter),
    };
    Box::new(move || {
        w.round += 1;
        let (r, round) = (&w.r, w.round);
        (ops.prepare)(&r.shared);
        r.woke.store(0, Ordering::Relaxed);
        r.go.store(round, Ordering::Release);
        r.bell.ring();
        r.bell.wait_until(
            || r.ready.load(Ordering::Acquire) >= round,
            || w.check_waiter(),
        );
        thread::sleep(SETTLE);
        let at = (ops.wake)(&r.shared).duration_since(r.base).as_nanos() as u64;
        r.bell
            .wait_until(|| r.woke.load(Ordering::Acquire) != 0, || w.check_waiter());
        let woke = r.woke.load(Ordering::Acquire);
        woke.saturating_sub(at) as f64 / 1e6
    })
}

/// The reference beside every wake-up row.
const PARK_FLOOR: &str = "park-floor";

/// The [`PARK_FLOOR`] row: a thread that parks
/// (`thread::park`), woken by an `unpark`.
fn park_floor() -> Wait {
    struct Parked {
        waiter: std::sync::OnceLock<thread::Thread>,
        woken: AtomicBool,
    }
    wake_turn(
        Parked {
            waiter: std::sync::OnceLock::new(),
            woken: AtomicBool::new(false),
        },
        WakeOps {
            prepare: nothing,
            wait: |p| {
                p.waiter.get_or_init(thread::current);
                // Acquire: pairs with the Release store in `wake`.
                while !p.woken.swap(false, Ordering::Acquire) {
                    thread::park();
                }
            },
            wake: |p| {
                let at = Instant::now();
                // Release: pairs with the Acquire swap in `wait`.
                p.woken.store(true, Ordering::Release);
                p.waiter.get().expect("the waiter is waiting").unpark();
                at
            },
        },
    )
}

/// What [`wake_turn`] does with the primitive.
pub(super) struct WakeOps<S> {
    /// Makes the next `wait` block (the waker's thread, before the round).
    pub(super) prepare: fn(&S),
    /// Blocks until `wake` (the waiter).
    pub(super) wait: fn(&S),
    /// The event (the waker): returns when it happened.
    pub(super) wake: fn(&S) -> Instant,
}

/// The event of a primitive whose waker acts itself: now, then `act`.
macro_rules! now_then {
    ($s:ident => $act:expr) => {
        |$s| {
            let at = Instant::now();
            $act;
            at
        }
    };
}

fn nothing<S>(_: &S) {}

pub(super) fn wake_lock(busy: usize, waits: usize, budget: Duration) -> Workload {
    /// The waker holds the lock while the waiter blocks on it; its unlock
    /// is the event. A lock released by another thread than the one that
    /// took it would not do, so the waker holds it in a helper thread that
    /// takes it on a signal and lets go on another. The helper lives as
    /// long as the row's `Wait` and goes back to sleep after each unlock:
    /// a helper that exited after its unlock put its own exit (its stack
    /// unmapped, its thread-locals destroyed) before the woken waiter on a
    /// CPU it shared with busy threads, about 20 µs inside every lock's
    /// measured wake-up.
    fn held<M: BenchMutex<()>>() -> Wait {
        struct Held<M> {
            lock: M,
            /// The round the helper is asked to take the lock in.
            hold: AtomicU64,
            /// Set by the helper once it holds the lock.
            holding: AtomicBool,
            /// Set by the waker: the helper lets go.
            release: AtomicBool,
            /// When the helper let go: the event.
            released_at: std::sync::Mutex<Option<Instant>>,
            /// Set when the row's `Wait` is dropped: the helper ends.
            stop: AtomicBool,
            /// Rung by the waker at `hold` and `release`, by the helper at
            /// `holding`.
            bell: Bell,
        }
        /// The helper's loop: each round, take the lock, hold it until told
        /// to let go, note the time and let go.
        fn helper<M: BenchMutex<()>>(h: &Held<M>) {
            let mut round = 0;
            loop {
                round += 1;
                // Acquire: pairs with `hold`'s Release increment.
                h.bell.wait_until(
                    || h.hold.load(Ordering::Acquire) >= round || h.stop.load(Ordering::Acquire),
                    || (),
                );
                if h.hold.load(Ordering::Acquire) < round {
                    return;
                }
                h.lock.with(|_| {
                    h.holding.store(true, Ordering::Release);
                    h.bell.ring();
                    h.bell
                        .wait_until(|| h.release.swap(false, Ordering::AcqRel), || ());
                    // The unlock follows at once, as `with` returns.
                    *h.released_at.lock().expect("not poisoned") = Some(Instant::now());
                });
            }
        }
        /// The helper and its state; stops and joins the helper when dropped.
        struct Helper<M> {
            held: Arc<Held<M>>,
            thread: Option<thread::JoinHandle<()>>,
        }
        impl<M> Drop for Helper<M> {
            fn drop(&mut self) {
                self.held.stop.store(true, Ordering::Release);
                // A round that ended early (its waiter panicked) may have
                // left the helper holding the lock: it lets go, then stops.
                self.held.release.store(true, Ordering::Release);
                self.held.bell.ring();
                if let Some(t) = self.thread.take() {
                    let ended = t.join();
                    assert!(ended.is_ok() || thread::panicking(), "the helper panicked");
                }
            }
        }
        fn hold<M: BenchMutex<()>>(h: &Helper<M>) {
            // Release: pairs with the helper's Acquire load.
            h.held.hold.fetch_add(1, Ordering::Release);
            h.held.bell.ring();
            h.held
                .bell
                .wait_until(|| h.held.holding.swap(false, Ordering::AcqRel), || ());
        }
        let held = Arc::new(Held {
            lock: M::new(()),
            hold: AtomicU64::new(0),
            holding: AtomicBool::new(false),
            release: AtomicBool::new(false),
            released_at: std::sync::Mutex::new(None),
            stop: AtomicBool::new(false),
            bell: Bell::default(),
        });
        let thread = {
            let held = Arc::clone(&held);
            Some(thread::spawn(move || helper(&held)))
        };
        let held = Helper { held, thread };
        wake_turn(
            held,
            WakeOps {
                prepare: hold,
                wait: |h| h.held.lock.with(|_| ()),
                // The helper lets go: the waiter, blocked, is woken. The
                // event is the helper's unlock, not this signal to it. The
                // helper does not ring after its unlock (a system call
                // beside the woken waiter): the bell's wait looks again
                // after `Bell::LOOK_AGAIN`.
                wake: |h| {
                    h.held.release.store(true, Ordering::Release);
                    h.held.bell.ring();
                    let mut at = None;
                    h.held.bell.wait_until(
                        || {
                            at = h.held.released_at.lock().expect("not poisoned").take();
                            at.is_some()
                        },
                        || (),
                    );
                    at.expect("the helper let go")
                },
            },
        )
    }
    in_turns(
        wake_row("lock", "an unlock", busy, "parking_lot"),
        &[
            ("lockfree-sync", held::<lockfree_sync::Mutex<()>>),
            ("adaptive", held::<Adaptive<LearnedPolicy, ()>>),
            ("ast-mutex", held::<ast_mutex::AstMutex<OneState, ()>>),
            ("parking_lot", held::<parking_lot::Mutex<()>>),
            ("std", held::<std::sync::Mutex<()>>),
        ],
        busy,
        waits,
        budget,
    )
}

pub(super) fn wake_semaphore(busy: usize, waits: usize, budget: Duration) -> Workload {
    fn lockfree() -> Wait {
        wake_turn(
            lockfree_sync::Semaphore::new(0),
            WakeOps {
                prepare: nothing,
                wait: |s| s.acquire().expect("never closed").forget(),
                wake: now_then!(s => s.add_permits(1)),
            },
        )
    }
    in_turns(
        wake_row("semaphore", "a release", busy, "condvar-std"),
        &[("lockfree-sync", lockfree), ("condvar-std", released)],
        busy,
        waits,
        budget,
    )
}

/// A condition variable's waiter for a count, woken by a release that
/// raises it (`CondvarSemaphore`).
fn released() -> Wait {
    wake_turn(
        CondvarSemaphore::new(0),
        WakeOps {
            prepare: nothing,
            wait: CondvarSemaphore::acquire,
            wake: now_then!(s => s.release()),
        },
    )
}

/// A channel's receiver woken by a send.
fn sent<C: Mpsc>() -> Wait {
    let (tx, rx) = C::channel();
    // One message through first, unmeasured. A channel's first send may
    // allocate its storage (lockfree-sync's sender takes a block of nodes,
    // std's and crossbeam's list channels a block of slots), and a set's
    // channel is new: most of the row's waits are its first, so without
    // this the row timed that allocation (about 3 µs of lockfree-sync's
    // 11 at 50 busy threads) beside the wake-up.
    C::send(&tx);
    C::recv(&rx);
    wake_turn(
        (std::sync::Mutex::new(tx), std::sync::Mutex::new(rx)),
        WakeOps {
            prepare: nothing,
            wait: |(_, rx)| C::recv(&rx.lock().expect("not poisoned")),
            wake: |(tx, _)| {
                let tx = tx.lock().expect("not poisoned");
                let at = Instant::now();
                C::send(&tx);
                at
            },
        },
    )
}

pub(super) fn wake_recv(busy: usize, waits: usize, budget: Duration) -> Workload {
    in_turns(
        wake_row("recv", "a send", busy, "std"),
        &[
            ("lockfree-sync", sent::<LockfreeMpsc>),
            ("std", sent::<StdMpsc>),
            ("crossbeam", sent::<CrossbeamMpsc>),
            ("flume", sent::<FlumeMpsc>),
        ],
        busy,
        waits,
        budget,
    )
}

/// A thread waiting for a result that another thread's action produces:
/// an active monitor's `when` task whose precondition another thread's
/// submission makes true (the waiter blocks in `Completion::wait`), beside
/// a std channel's `recv` woken by a send and a condition variable's wait
/// for a count another thread raises, the ways a Rust program without a
/// monitor waits for another thread.
pub(super) fn wake_when(busy: usize, waits: usize, budget: Duration) -> Workload {
    fn monitor() -> Wait {
        wake_turn(
            active_monitor::Monitor::new(false),
            WakeOps {
                prepare: nothing,
                wait: |m| m.when(|open| *open, |open| *open = false).wait(),
                // Runs at once on the idle monitor, and the waiter's task
                // with it.
                wake: now_then!(m => drop(m.submit(|open| *open = true))),
            },
        )
    }
    in_turns(
        wake_row("when", "a submission that enables the task", busy, "std"),
        &[
            ("am", monitor),
            ("std", sent::<StdMpsc>),
            ("condvar-std", released),
        ],
        busy,
        waits,
        budget,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_whose_waiter_panics_fails_instead_of_hanging() {
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let round = std::panic::catch_unwind(|| {
                let mut wait = wake_turn(
                    (),
                    WakeOps {
                        prepare: nothing,
                        wait: |_| panic!("a wait that panics"),
                        wake: |_| Instant::now(),
                    },
                );
                wait()
            });
            let message = round.map_err(|e| e.downcast_ref::<String>().cloned());
            tx.send(message).expect("the test waits for the round");
        });
        let round = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the round hung after its waiter panicked");
        let message = round.expect_err("the round returned a wake-up from a waiter that panicked");
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("the waiter panicked")),
            "{message:?}"
        );
    }
}
