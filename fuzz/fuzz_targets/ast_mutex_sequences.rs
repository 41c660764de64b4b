//! Drives an `AstMutex` (in the wake mode the input picks) through
//! operation sequences from the input: `enter_async` futures polled by hand,
//! dropped at any point (queued, woken, or handed the lock), `try_enter`,
//! exits to any state, plain drops. It checks what must hold whatever the
//! order:
//!
//! * never two guards, and a guard's entry state is in its set;
//! * no lost wakeup: once nothing is held, whenever a pending future accepts
//!   the current state, some pending future has been woken, and re-polling
//!   only woken futures lets every future that accepts a reachable state in;
//! * nothing is left behind: with every future gone, no waiter is queued.
#![no_main]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use ast_mutex::{AbstractState, AstGuard, AstMutex, Config, EnterAsync, StateSet, WakeMode};
use libfuzzer_sys::fuzz_target;

ast_mutex::states! { enum St { A, B, C, D } }

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A future with its own counting waker, the wake count it last saw, and
/// its entry set.
struct Polled<'a> {
    fut: EnterAsync<'a, St, u32>,
    set: StateSet<St>,
    wakes: Arc<Count>,
    waker: Waker,
    seen: usize,
}

impl<'a> Polled<'a> {
    fn new(m: &'a AstMutex<St, u32>, set: StateSet<St>) -> Self {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&wakes));
        Self {
            fut: m.enter_async(set),
            set,
            wakes,
            waker,
            seen: 0,
        }
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(SeqCst) > self.seen
    }

    fn poll(&mut self) -> Poll<AstGuard<'a, St, u32>> {
        self.seen = self.wakes.0.load(SeqCst);
        let r = Pin::new(&mut self.fut).poll(&mut Context::from_waker(&self.waker));
        if let Poll::Ready(g) = &r {
            assert!(self.set.contains(g.entered_in()), "entered outside its set");
        }
        r
    }
}

fn set_of(bits: usize) -> StateSet<St> {
    match bits & 0xf {
        0 => StateSet::ALL,
        b => StateSet::from_bits(b as u64),
    }
}

fn hold<'a>(slot: &mut Option<AstGuard<'a, St, u32>>, g: AstGuard<'a, St, u32>) {
    assert!(slot.is_none(), "two guards at once");
    *slot = Some(g);
}

fuzz_target!(|data: &[u8]| {
    let Some((&setup, ops)) = data.split_first() else {
        return;
    };
    let mode = [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast][setup as usize % 3];
    let initial = St::from_index(u32::from(setup >> 2) % St::COUNT);
    let m = AstMutex::with_config(initial, 0u32, Config::new().wake_mode(mode));
    let mut guard: Option<AstGuard<'_, St, u32>> = None;
    let mut futures: Vec<Polled<'_>> = Vec::new();

    for &op in ops.iter().take(200) {
        let arg = (op >> 3) as usize;
        match op & 0x7 {
            0 if futures.len() < 16 => {
                let mut f = Polled::new(&m, set_of(arg));
                match f.poll() {
                    Poll::Ready(g) => hold(&mut guard, g),
                    Poll::Pending => futures.push(f),
                }
            }
            1 if !futures.is_empty() => {
                let i = arg % futures.len();
                if let Poll::Ready(g) = futures[i].poll() {
                    futures.swap_remove(i);
                    hold(&mut guard, g);
                }
            }
            2 if !futures.is_empty() => {
                // Dropped wherever it is: queued, woken, or handed the lock.
                futures.swap_remove(arg % futures.len());
            }
            3 => {
                if let Some(mut g) = guard.take() {
                    *g += 1;
                    g.exit(St::from_index(arg as u32 % St::COUNT));
                }
            }
            4 => drop(guard.take()),
            5 => {
                if let Some(g) = m.try_enter(set_of(arg)) {
                    hold(&mut guard, g);
                }
            }
            6 => {
                if let Some(g) = guard.take() {
                    let next = St::from_index(arg as u32 % St::COUNT);
                    // `exit_and_enter` would block: exit, then queue a
                    // future for the set (the async counterpart).
                    g.exit(next);
                    let mut f = Polled::new(&m, set_of(arg >> 2));
                    match f.poll() {
                        Poll::Ready(g) => hold(&mut guard, g),
                        Poll::Pending => futures.push(f),
                    }
                }
            }
            _ => {}
        }
        // (Locked without a guard is fine: handed to a future not yet polled.)
        assert!(guard.is_none() || m.is_locked(), "a guard on a free lock");
    }

    // Release, then let everyone in whose set holds the state, re-polling
    // only the woken: each gets in and leaves the state as it found it. A
    // lock held with no guard was handed to a future, which must be woken.
    drop(guard.take());
    loop {
        let waiting_for_it = match m.state() {
            None => true,
            Some(state) => futures.iter().any(|f| f.set.contains(state)),
        };
        if !waiting_for_it {
            break;
        }
        assert!(
            futures.iter().any(Polled::woken),
            "lost wakeup: {mode:?}, state {:?}, no waiting future was woken",
            m.state()
        );
        let mut i = 0;
        while i < futures.len() {
            if futures[i].woken() {
                if let Poll::Ready(g) = futures[i].poll() {
                    futures.swap_remove(i);
                    drop(g); // back to the state it entered in, waking the next
                    continue;
                }
            }
            i += 1;
        }
    }
    drop(futures);
    assert_eq!(
        m.__test_waiter_table_size(),
        (0, 0),
        "a dropped future left a waiter queued"
    );
    assert!(!m.is_locked());
});
