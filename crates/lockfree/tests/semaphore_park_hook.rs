//! A blocking acquire runs the park hook (`sync_core::wake_chain::before_park`)
//! before it is counted, and then enqueues. An acquire that finds some but
//! not all of its permits free hands the ones it found to the delivery,
//! for the oldest waiter; when a releaser is between its two steps (it has
//! raised the count but not yet added to the delivery), the oldest waiter
//! is already covered, and the acquire delivers to it: its task waker runs
//! on the acquiring thread, after the hook. A task polled in place there
//! can keep wakeups on that thread (as an active monitor's body keeps its
//! task wakers); the acquire parked with them, and a wait that needed one
//! of those tasks' next step never ended. Found by round 48's review
//! (rounds 46 and 47 suspected it but could not reproduce it).
//!
//! The releaser is frozen at random points of its loop by a signal whose
//! handler spins until the test lets it go (`sync_core::testing::freeze`); some of
//! the freezes land between its two steps.
#![cfg(all(not(loom), target_os = "linux"))]

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use lockfree_sync::Semaphore;
use sync_core::testing::freeze;

/// A static: the park hook's delivery is a plain `fn`.
static SEM: Semaphore = Semaphore::new(0);
/// Set while the releaser must not start another round.
static PAUSE: AtomicBool = AtomicBool::new(false);
/// Wakeups kept on the acquiring thread, inside its acquire.
static KEPT: AtomicUsize = AtomicUsize::new(0);
/// When the acquire began (ns since `BASE`), 0 when none runs: the
/// watchdog lets the releaser go once it has waited a while.
static ACQUIRING_SINCE: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Set on the test thread while it acquires.
    static ACQUIRING: Cell<bool> = const { Cell::new(false) };
}

/// The kept task's next step: it gives a permit back.
fn deliver() {
    SEM.release(1);
}

/// The waker of the releaser's task. Run inside the test thread's acquire,
/// it keeps the task's next step on that thread until the thread's next
/// park hook (as an active monitor keeps the wakers of a body's tasks);
/// run anywhere else, the step runs at once.
struct KeepsItsStep;

impl Wake for KeepsItsStep {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if ACQUIRING.with(Cell::get) {
            KEPT.fetch_add(1, SeqCst);
            sync_core::wake_chain::deliver_before_park(deliver);
        } else {
            deliver();
        }
    }
}

#[test]
fn an_acquire_delivers_what_its_enqueues_wakers_kept_before_it_parks() {
    freeze::install();
    let stop = Arc::new(AtomicBool::new(false));
    // The releaser: a task waits for one permit, three are released (the
    // count first, then the delivery of the one the task lacks), the task
    // takes its permit; what is left free is forgotten.
    let releaser = {
        let stop = Arc::clone(&stop);
        freeze::Freezable::spawn(move || {
            let waker = Waker::from(Arc::new(KeepsItsStep));
            let mut cx = Context::from_waker(&waker);
            while !stop.load(SeqCst) {
                if PAUSE.load(SeqCst) {
                    std::hint::spin_loop();
                    continue;
                }
                let mut task = Box::pin(SEM.acquire_async());
                let first = task.as_mut().poll(&mut cx);
                SEM.release(3);
                let permit = match first {
                    Poll::Ready(p) => p,
                    Poll::Pending => loop {
                        if let Poll::Ready(p) = task.as_mut().poll(&mut cx) {
                            break p;
                        }
                    },
                };
                permit.expect("never closed").forget();
                SEM.forget_permits(usize::MAX);
            }
        })
    };
    let base = Instant::now();
    let since = move || base.elapsed().as_nanos() as u64 + 1;
    let watchdog_stop = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let stop = Arc::clone(&watchdog_stop);
        thread::spawn(move || {
            while !stop.load(SeqCst) {
                thread::sleep(Duration::from_millis(2));
                let t = ACQUIRING_SINCE.load(SeqCst);
                // The acquire waits for the releaser's delivery: let it go.
                if t != 0 && since() > t + 10_000_000 {
                    freeze::let_go();
                }
            }
        })
    };
    // A few seconds on a quiet machine; the bound is for a loaded one (on
    // 2 cores beside a load average of 140, 3 catches took 10 s).
    let end = Instant::now() + Duration::from_secs(60);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut failed = None;
    while KEPT.load(SeqCst) < 3 && Instant::now() < end {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        for _ in 0..rng % 2000 {
            std::hint::spin_loop();
        }
        releaser.freeze();
        // Two free permits: the releaser has raised the count by three and
        // not yet delivered the one its task lacks (or is delivering it).
        if SEM.available_permits() == 2 {
            PAUSE.store(true, SeqCst);
            let kept = KEPT.load(SeqCst);
            ACQUIRING.with(|a| a.set(true));
            ACQUIRING_SINCE.store(since(), SeqCst);
            // Our three: the two we find, less the one our enqueue
            // delivers to the task, the releaser's one, and the one the
            // task gives back, if its step is delivered.
            let got = SEM.try_acquire_many_for(3, Duration::from_secs(5));
            ACQUIRING_SINCE.store(0, SeqCst);
            ACQUIRING.with(|a| a.set(false));
            PAUSE.store(false, SeqCst);
            match got {
                Ok(permits) => drop(permits),
                Err(e) => {
                    failed = Some((e, KEPT.load(SeqCst) != kept));
                    // Deliver what is kept, so that the releaser can end.
                    sync_core::wake_chain::before_park();
                }
            }
        }
        freeze::release();
        if failed.is_some() {
            break;
        }
    }
    stop.store(true, SeqCst);
    releaser.join();
    watchdog_stop.store(true, SeqCst);
    watchdog.join().unwrap();
    if let Some((e, kept)) = failed {
        panic!(
            "the acquire parked with the wakeup its enqueue's delivery kept \
             (a wakeup was kept in it: {kept}): {e:?}"
        );
    }
    assert!(
        KEPT.load(SeqCst) > 0,
        "the releaser was never frozen between its two steps: nothing was tested"
    );
}
