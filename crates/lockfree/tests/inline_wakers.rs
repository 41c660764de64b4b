//! Wakers that run their task on the spot (an inline executor), so that a
//! task woken by a release takes the lock or permits and releases them in
//! turn, inside the waker that woke it: one release then reaches every
//! queued task. Those wakeups must not nest one inside the other, or the
//! stack grows with the queue and the process aborts on a stack overflow.
#![cfg(not(loom))]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex, mpsc};
use std::task::{Context, Wake, Waker};
use std::thread;
use std::time::Duration;

use lockfree_sync::{Fairness, Mutex, Semaphore};

/// Queued tasks: on the old code each nested wakeup took a few hundred
/// bytes of stack (release build) or kilobytes (debug), so this many
/// overflowed the test thread's stack.
const TASKS: usize = 20_000;
/// The test thread's stack: room for a few dozen nested wakeups, not for
/// one per task.
const STACK: usize = 4 << 20;

type Body = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A task whose waker polls it at once, on the waking thread.
struct Inline(StdMutex<Option<Body>>);

impl Inline {
    fn spawn(body: impl Future<Output = ()> + Send + 'static) -> Arc<Self> {
        let task = Arc::new(Self(StdMutex::new(Some(Box::pin(body)))));
        task.run();
        task
    }

    fn run(self: &Arc<Self>) {
        let waker = Waker::from(Arc::clone(self));
        let mut slot = self.0.lock().unwrap();
        if let Some(body) = slot.as_mut() {
            if body
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready()
            {
                *slot = None;
            }
        }
    }
}

impl Wake for Inline {
    fn wake(self: Arc<Self>) {
        self.run();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.run();
    }
}

/// Runs `f` on a thread with a small stack; fails if it does not finish
/// in time (a stack overflow aborts the whole test binary instead).
fn on_small_stack(what: &str, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let t = thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            f();
            done.send(()).unwrap();
        })
        .unwrap();
    finished
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: not done within 60 s"));
    t.join().unwrap();
}

fn unlock_runs_every_queued_inline_task(fairness: Fairness) {
    on_small_stack("unlock", move || {
        let m = Arc::new(Mutex::with_fairness(0usize, fairness));
        let held = m.lock();
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let m = Arc::clone(&m);
                Inline::spawn(async move { *m.lock_async().await += 1 })
            })
            .collect();
        // Wakes the first task, whose waker runs it, whose unlock wakes the
        // next...
        drop(held);
        assert_eq!(*m.lock(), TASKS, "every task ran once");
        assert!(tasks.iter().all(|t| t.0.lock().unwrap().is_none()));
    });
}

#[test]
fn an_unlock_reaching_every_queued_inline_task_keeps_the_stack_flat_barging() {
    unlock_runs_every_queued_inline_task(Fairness::Barging);
}

#[test]
fn an_unlock_reaching_every_queued_inline_task_keeps_the_stack_flat_fifo() {
    unlock_runs_every_queued_inline_task(Fairness::Fifo);
}

#[test]
fn a_release_reaching_every_queued_inline_task_keeps_the_stack_flat() {
    on_small_stack("release", || {
        let sem = Arc::new(Semaphore::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (sem, ran) = (Arc::clone(&sem), Arc::clone(&ran));
                Inline::spawn(async move {
                    let permit = sem.acquire_async().await.unwrap();
                    ran.fetch_add(1, SeqCst);
                    drop(permit); // delivers to the next task
                })
            })
            .collect();
        sem.add_permits(1);
        assert_eq!(ran.load(SeqCst), TASKS, "every task ran once");
        assert_eq!(sem.available_permits(), 1);
        assert!(tasks.iter().all(|t| t.0.lock().unwrap().is_none()));
    });
}
