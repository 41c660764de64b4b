//! Loom models of the futex parker a thread's `Waiter` sleeps on (64-bit
//! Linux), over `ModelFutex`, which checks the word and sleeps under one
//! lock, as the kernel does. Run with `cargo xtask loom -p sync-core`.
#![cfg(loom)]

use sync_core::model;
use sync_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use sync_core::sync::{Arc, thread};
use sync_core::waiter::park::{Futex, ModelFutex, Parker};

/// An unpark wakes the thread parked on the word, or makes its next park
/// return at once, in every interleaving with the park: loom reports a
/// deadlock if one is lost. The parked thread sees what the unparker wrote
/// before the unpark.
#[test]
fn an_unpark_is_never_lost() {
    model::check(park_until_unparked::<ModelFutex>);
}

/// One model: a thread parks until a flag another thread sets before its
/// unpark, over the futex `F`.
fn park_until_unparked<F: Futex + Default + Send + Sync + 'static>() {
    let shared = Arc::new((Parker::new(F::default()), AtomicBool::new(false)));
    let unparker = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || {
            shared.1.store(true, Relaxed);
            shared.0.unpark();
        })
    };
    // Relaxed: the park's Acquire pairs with the unpark's Release.
    while !shared.1.load(Relaxed) {
        shared.0.park(None);
    }
    unparker.join().unwrap();
}

/// One parker serves park after park (a node's successive waits): each
/// round's unpark is seen by that round's park, and a round's leftover
/// state does not end a later park early enough to lose a wake-up.
#[test]
fn a_parker_serves_two_rounds() {
    model::check(|| {
        let shared = Arc::new((Parker::new(ModelFutex::default()), AtomicUsize::new(0)));
        let unparker = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for round in 1..=2 {
                    shared.1.store(round, Relaxed);
                    shared.0.unpark();
                }
            })
        };
        for round in 1..=2 {
            while shared.1.load(Relaxed) < round {
                shared.0.park(None);
            }
        }
        unparker.join().unwrap();
    });
}

/// A futex whose wake does nothing.
#[derive(Default)]
struct Deaf(ModelFutex);

impl Futex for Deaf {
    fn wait(
        &self,
        word: &sync_core::sync::atomic::AtomicU32,
        expected: u32,
        _: Option<core::time::Duration>,
    ) {
        self.0.wait(word, expected, None);
    }
    fn wake(&self, _: &sync_core::sync::atomic::AtomicU32) {}
}

/// The model sees a lost wake-up: over a futex that never wakes, the
/// interleaving where the unpark comes after the park's check deadlocks.
#[test]
fn a_lost_wake_up_is_caught() {
    model::check_fails("a_lost_wake_up_is_caught", "deadlock", || {
        model::check(park_until_unparked::<Deaf>);
    });
}
