//! The release of the waiter table's lock by an entry's enqueue makes the
//! serve that a waiter which gave up without the table lock left owed, and
//! that serve runs task wakers on the entry's thread. They are user code,
//! and they used to run with the entry's own node queued (and the park
//! hook, `sync_core::wake_chain::before_park`, run after the enqueue for
//! what they kept, too): a task polled in place there that entered the
//! same mutex, blocking, queued a second node of the same thread behind the
//! first and parked in it; an exit that served the first (the older) woke
//! a thread (or a task) that was not there to take the lock, the lock was
//! left free with the second node parked, and neither entry ever ended.
//! Found by round 48's review (round 47 listed the hook's case as
//! suspected).
//!
//! The table lock is held long by giving it many groups (distinct entry
//! sets: the enqueue walks them); a woken async waiter is dropped while an
//! entry's enqueue holds it, and the owed serve there polls a task that
//! enters the same mutex on that thread, directly or in the step it keeps
//! for the thread's park hook.
#![cfg(not(loom))]

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use ast_mutex::{AstMutex, Config, StateSet, WaitPolicy, WakeMode};
use sync_core::testing::{InlineTask, ended_within};
use sync_core::wake_chain;

#[path = "support/kept.rs"]
mod kept;
use kept::{KeptYield, S, one};

/// A waker that unparks a thread.
struct Unpark(thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Queues an async waiter for a new entry set (never admitted: no state
/// below 8), left queued for the test's life.
fn add_group(m: &'static AstMutex<S, u64>, n: u64) {
    let mut f = Box::pin(m.enter_async(StateSet::from_bits(n << 8)));
    assert!(
        f.as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    std::mem::forget(f);
}

/// A mutex whose enqueue holds the table lock well past the 0.1 ms a
/// leaving waiter waits for it.
fn slow_table(config: Config) -> &'static AstMutex<S, u64> {
    let m: &'static AstMutex<S, u64> = Box::leak(Box::new(AstMutex::with_config(S(0), 0, config)));
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
    m
}

/// Thread X enters S2 (queued: the lock is free in S1, for a woken async
/// waiter W); W is dropped while X's enqueue holds the table lock, and its
/// owed serve of S1 polls task T on X. T enters S1 and keeps its next step
/// on X; that step, run by X's park hook, frees the lock in S5 and then
/// enters S2 itself, blocking, before X's entry ends. The main thread then
/// enters S5 and exits to S2, the only exit that could serve either.
fn a_delivery_that_enters_the_same_mutex_ends(config: Config, kept: bool, x_task: bool) {
    let m = slow_table(config);
    let main = thread::current().id();
    let mut hits = 0;
    for attempt in 0..200u64 {
        if hits >= 2 {
            break;
        }
        let held = m.enter(one(0));
        let mut w = Box::pin(m.enter_async(one(1)));
        assert!(
            w.as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        let entered_on = Arc::new(Mutex::new(None::<ThreadId>));
        let inner = Arc::new(AtomicBool::new(false));
        let (on, inner_on) = (Arc::clone(&entered_on), Arc::clone(&inner));
        let task = InlineTask::spawn(async move {
            let g = m.enter_async(one(1)).await;
            *on.lock().unwrap() = Some(thread::current().id());
            if kept {
                KeptYield(false).await;
            }
            g.exit(S(5));
            if thread::current().id() != main {
                // On X, inside X's entry: blocking, as a task polled in
                // place may (the hook runs before the thread parks).
                inner_on.store(true, SeqCst);
                m.enter(one(2)).exit(S(2));
            }
        });
        held.exit(S(1));
        let x = thread::spawn(move || {
            if x_task {
                // X's entry is a task's, polled on this thread.
                let waker = Waker::from(Arc::new(Unpark(thread::current())));
                let mut f = std::pin::pin!(m.enter_async(one(2)));
                loop {
                    if let Poll::Ready(g) = f.as_mut().poll(&mut Context::from_waker(&waker)) {
                        break g.exit(S(0));
                    }
                    thread::park();
                }
            } else {
                m.enter(one(2)).exit(S(0));
            }
        });
        let x_id = x.thread().id();
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
            // Wait until T's entry has had time to park behind X's.
            let t = Instant::now();
            while !inner.load(SeqCst) && t.elapsed() < Duration::from_secs(10) {
                thread::sleep(Duration::from_micros(100));
            }
            thread::sleep(Duration::from_millis(20));
        } else {
            // Polled here: delivered here, as this thread's next park would.
            wake_chain::before_park();
        }
        let g = m.enter(one(5));
        g.exit(S(2));
        assert_eq!(
            ended_within(Duration::from_secs(10), x),
            Some(true),
            "an entry whose owed serve (or park hook) entered the same mutex never ended (attempt {attempt}, task on X: {})",
            entered == x_id
        );
        assert!(task.is_done());
        assert_eq!(m.state(), Some(S(0)));
    }
    eprintln!("{hits} owed serves in a thread's enqueue");
}

#[test]
fn compete() {
    a_delivery_that_enters_the_same_mutex_ends(
        Config::new().wait(WaitPolicy::block()),
        true,
        false,
    );
}

#[test]
fn handoff() {
    a_delivery_that_enters_the_same_mutex_ends(
        Config::new()
            .wait(WaitPolicy::block())
            .wake_mode(WakeMode::Handoff),
        true,
        false,
    );
}

#[test]
fn compete_in_the_owed_serve() {
    a_delivery_that_enters_the_same_mutex_ends(
        Config::new().wait(WaitPolicy::block()),
        false,
        false,
    );
}

#[test]
fn handoff_in_the_owed_serve() {
    a_delivery_that_enters_the_same_mutex_ends(
        Config::new()
            .wait(WaitPolicy::block())
            .wake_mode(WakeMode::Handoff),
        false,
        false,
    );
}

#[test]
fn a_task_s_entry_compete_in_the_owed_serve() {
    a_delivery_that_enters_the_same_mutex_ends(
        Config::new().wait(WaitPolicy::block()),
        false,
        true,
    );
}

#[test]
fn a_task_s_entry_handoff_in_the_owed_serve() {
    a_delivery_that_enters_the_same_mutex_ends(
        Config::new()
            .wait(WaitPolicy::block())
            .wake_mode(WakeMode::Handoff),
        false,
        true,
    );
}
