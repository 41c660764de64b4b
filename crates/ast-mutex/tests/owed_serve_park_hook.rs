//! A blocking entry runs the park hook (`sync_core::wake_chain::before_park`)
//! at the start of its slow path, and then releases the waiter table's lock
//! when it queues. That release makes the serve a give-up left owed (a
//! waiter that left without the table lock while this thread held it, for
//! longer than the give-up waits), and the serve runs task wakers on this
//! thread: a task polled in place there can keep wakeups on it (as an
//! active monitor's body keeps its task wakers). The thread used to park
//! with them kept, and a wait that needed one of those tasks' next step
//! never ended. Found by round 47's review.
//!
//! The table lock is held long by giving it many groups (distinct entry
//! sets: the enqueue walks them); a woken async waiter is dropped while a
//! thread's enqueue holds it, and the owed serve there polls a task that
//! enters and keeps its next step on that thread.
#![cfg(not(loom))]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use ast_mutex::{AstMutex, Config, StateSet, WaitPolicy};
use sync_core::testing::{InlineTask, ended_within};
use sync_core::wake_chain;

#[path = "support/kept.rs"]
mod kept;
use kept::{KeptYield, S, one};

/// Queues an async waiter for a new entry set (never admitted: no state
/// below 3), left queued for the test's life.
fn add_group(m: &'static AstMutex<S, u64>, n: u64) {
    let mut f = Box::pin(m.enter_async(StateSet::from_bits(n << 3)));
    assert!(
        f.as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    std::mem::forget(f);
}

#[test]
fn a_thread_that_queues_delivers_what_the_owed_serve_of_its_enqueue_kept_before_it_parks() {
    let m: &'static AstMutex<S, u64> = Box::leak(Box::new(AstMutex::with_config(
        S(0),
        0,
        // Queue at once: the enqueue follows the hook directly.
        Config::new().wait(WaitPolicy::block()),
    )));
    // Groups until one queueing holds the table lock well past the 0.1 ms a
    // leaving waiter waits for it (a task's first poll queues as a thread's
    // enqueue does).
    let mut groups = 0;
    loop {
        let target = (groups * 2).max(4000);
        while groups < target {
            groups += 1;
            add_group(m, groups);
        }
        let began = Instant::now();
        add_group(m, groups + 1);
        groups += 1;
        if began.elapsed() >= Duration::from_micros(400) || groups >= 64_000 {
            break;
        }
    }
    let mut hits = 0;
    for attempt in 0..200u64 {
        if hits >= 2 {
            break;
        }
        // Held in S0; W first in line for S1, then the task.
        let held = m.enter(one(0));
        let mut w = Box::pin(m.enter_async(one(1)));
        assert!(
            w.as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        let entered_on = Arc::new(Mutex::new(None::<ThreadId>));
        let on = Arc::clone(&entered_on);
        let task = InlineTask::spawn(async move {
            let g = m.enter_async(one(1)).await;
            *on.lock().unwrap() = Some(thread::current().id());
            KeptYield(false).await;
            g.exit(S(2));
        });
        // W is woken to compete; the lock is free in S1.
        held.exit(S(1));
        // X waits for S2, which only the task's exit gives.
        let x = thread::spawn(move || m.enter(one(2)).exit(S(0)));
        let x_id = x.thread().id();
        // W leaves at some point of X's queueing: its give-up's serve of S1
        // polls the task, here or, owed, in X's release of the table.
        let pause = Duration::from_micros(attempt * 37 % 700);
        let t = Instant::now();
        while t.elapsed() < pause {
            std::hint::spin_loop();
        }
        drop(w);
        let t = Instant::now();
        let entered = loop {
            if let Some(id) = *entered_on.lock().unwrap() {
                break id;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the task never entered"
            );
            thread::sleep(Duration::from_micros(100));
        };
        if entered == x_id {
            hits += 1;
            assert_eq!(
                ended_within(Duration::from_secs(10), x),
                Some(true),
                "the entry parked with the wakeup its enqueue's owed serve kept"
            );
        } else {
            // Polled here: delivered here, as this thread's next park would.
            wake_chain::before_park();
            assert_eq!(ended_within(Duration::from_secs(10), x), Some(true));
        }
        assert!(task.is_done());
    }
    // On a machine too fast for the window (or a release build), the
    // owed serve may never land in an enqueue: then nothing was checked.
    eprintln!("{groups} groups: {hits} owed serves in a thread's enqueue");
}
