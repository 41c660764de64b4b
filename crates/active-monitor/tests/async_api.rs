#![cfg(not(loom))]
//! The asynchronous methods (`submit_async`, `when_async`, `when_in_async`,
//! `call_async`), worker scopes and `Completion::cancel`, on tokio
//! (current-thread and multi-thread) and on futures' executor.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use active_monitor::{Monitor, Order, and, or, worker};
use futures::task::LocalSpawnExt;

/// Runs `f` on a thread; `None` if it has not finished within `secs` (the
/// thread is leaked: the test then fails, it does not hang).
fn within<R: Send + 'static>(secs: u64, f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).ok()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

const PRODUCERS: u64 = 4;
const ITEMS: u64 = 500;

type Queue = Arc<Monitor<VecDeque<u64>>>;

/// The paper's bounded queue (capacity 4 in the data, 2 in the task
/// queue) with asynchronous puts and takes, each producer and consumer a
/// worker of its own: returns the sum of the items taken.
async fn producer(q: Queue, p: u64) {
    for i in 0..ITEMS {
        let item = p * ITEMS + i;
        // Queued (awaiting space in the task queue if it is full); the
        // put itself waits for room in the data.
        let _put = q
            .when_async(|d| d.len() < 4, move |d| d.push_back(item))
            .await;
    }
}

async fn consumer(q: Queue) -> u64 {
    let mut sum = 0;
    for _ in 0..ITEMS {
        sum += q
            .when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap())
            .await;
    }
    sum
}

fn queue() -> Queue {
    Arc::new(Monitor::builder().capacity(2).build(VecDeque::new()))
}

fn expected() -> u64 {
    (0..PRODUCERS * ITEMS).sum()
}

async fn tokio_bounded_queue() -> u64 {
    let q = queue();
    let mut consumers = Vec::new();
    for p in 0..PRODUCERS {
        tokio::spawn(worker(producer(Arc::clone(&q), p)));
        consumers.push(tokio::spawn(worker(consumer(Arc::clone(&q)))));
    }
    let mut sum = 0;
    for c in consumers {
        sum += c.await.unwrap();
    }
    sum
}

#[test]
fn async_methods_lose_nothing_on_tokio_multi_thread() {
    let sum = within(20, || multi_thread().block_on(tokio_bounded_queue()));
    assert_eq!(sum, Some(expected()));
}

#[test]
fn async_methods_lose_nothing_on_tokio_current_thread() {
    let sum = within(20, || current_thread().block_on(tokio_bounded_queue()));
    assert_eq!(sum, Some(expected()));
}

#[test]
fn async_methods_lose_nothing_on_a_local_pool() {
    let sum = within(20, || {
        let mut pool = futures::executor::LocalPool::new();
        let q = queue();
        let mut consumers = Vec::new();
        for p in 0..PRODUCERS {
            pool.spawner()
                .spawn_local(worker(producer(Arc::clone(&q), p)))
                .unwrap();
            consumers.push(
                pool.spawner()
                    .spawn_local_with_handle(worker(consumer(Arc::clone(&q))))
                    .unwrap(),
            );
        }
        pool.run_until(async {
            let mut sum = 0;
            for c in consumers {
                sum += c.await;
            }
            sum
        })
    });
    assert_eq!(sum, Some(expected()));
}

#[test]
fn call_async_and_when_in_async_on_futures_block_on() {
    ast_mutex::states! { enum Buf { Empty, Some } }
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .build_with_states(Buf::Empty, Vec::new());
    futures::executor::block_on(async {
        let take = m
            .when_in_async(Buf::Some, |v: &mut Vec<u32>| {
                let x = v.pop().unwrap();
                (x, if v.is_empty() { Buf::Empty } else { Buf::Some })
            })
            .completion()
            .await;
        assert!(!take.is_done());
        m.when_in_async(Buf::Empty | Buf::Some, |v| {
            v.push(3);
            ((), Buf::Some)
        })
        .await;
        assert_eq!(take.await, Ok(3));
        assert_eq!(m.call_async(|v| v.len()).await, 0);
    });
}

/// Holds `m` on another thread (inside a task) until `release` is told.
fn hold<T: Send + 'static>(m: &Arc<Monitor<T>>) -> (mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let m = Arc::clone(m);
    let h = thread::spawn(move || {
        m.call(move |_| {
            held_tx.send(()).unwrap();
            let _ = release_rx.recv();
        })
    });
    held_rx.recv().unwrap();
    (release_tx, h)
}

/// The issue's "when it is full, submit waits (asynchronously in async
/// code)": a task that fills a held monitor's queue awaits space while
/// another task on the same (only) thread keeps running; that task is the
/// one that lets the holder go. (`submit`, which parks the thread, hangs
/// here.)
#[test]
fn a_full_queue_makes_submit_async_await_not_park() {
    let done = within(10, || {
        current_thread().block_on(async {
            let m = Arc::new(Monitor::builder().capacity(1).build(0u64));
            let (release, holder) = hold(&m);
            let m1 = Arc::clone(&m);
            let producer = tokio::spawn(async move {
                let mut cs = Vec::new();
                for i in 1..=20 {
                    cs.push(m1.submit_async(move |n| *n += i).completion().await);
                }
                cs
            });
            // Runs while the producer awaits space.
            let ticker = tokio::spawn(async move {
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                release.send(()).unwrap();
            });
            ticker.await.unwrap();
            let cs = producer.await.unwrap();
            holder.join().unwrap();
            for c in cs {
                c.await.unwrap();
            }
            m.call(|n| *n)
        })
    });
    assert_eq!(
        done,
        Some((1..=20).sum()),
        "the runtime's thread was parked"
    );
}

/// Two async tasks on one thread, strict order: A awaits `when(n > 0)`, B
/// makes it true. Each in its own `worker` scope, both finish.
#[test]
fn two_tasks_on_one_thread_each_a_worker_on_tokio() {
    let r = within(5, || {
        current_thread().block_on(async {
            let m = Arc::new(Monitor::new(0));
            let (a, b) = (Arc::clone(&m), Arc::clone(&m));
            let ta = tokio::spawn(worker(async move {
                a.when_async(|n| *n > 0, |n| *n * 10).await
            }));
            tokio::task::yield_now().await;
            let tb = tokio::spawn(worker(async move {
                b.submit_async(|n| *n = 1).await;
            }));
            tb.await.unwrap();
            ta.await.unwrap()
        })
    });
    assert_eq!(r, Some(10), "the two tasks shared a worker");
}

#[test]
fn two_tasks_on_one_thread_each_a_worker_on_a_local_pool() {
    let r = within(5, || {
        let mut pool = futures::executor::LocalPool::new();
        let m = Arc::new(Monitor::new(0));
        let (a, b) = (Arc::clone(&m), Arc::clone(&m));
        let ta = pool
            .spawner()
            .spawn_local_with_handle(worker(async move {
                a.when_async(|n| *n > 0, |n| *n * 10).await
            }))
            .unwrap();
        pool.run_until_stalled();
        pool.spawner()
            .spawn_local(worker(async move {
                b.submit_async(|n| *n = 1).await;
            }))
            .unwrap();
        pool.run_until(ta)
    });
    assert_eq!(r, Some(10), "the two tasks shared a worker");
}

/// Without `worker`, two tasks on one thread are not one submitter: B's
/// submission does not wait for A's pending `when` (it used to, the two
/// sharing the thread's record). Another thread then enables A.
#[test]
fn two_unscoped_tasks_on_one_thread_do_not_wait_for_each_other_on_tokio() {
    let r = within(5, || {
        current_thread().block_on(async {
            let m = Arc::new(Monitor::new(0));
            let (a, b) = (Arc::clone(&m), Arc::clone(&m));
            let b_done = Arc::new(AtomicBool::new(false));
            let ta = tokio::spawn(async move { a.when_async(|n| *n > 0, |n| *n * 10).await });
            tokio::task::yield_now().await;
            let d = Arc::clone(&b_done);
            let tb = tokio::spawn(async move {
                b.submit_async(|n| *n += 2).await;
                d.store(true, SeqCst);
            });
            for _ in 0..20 {
                tokio::task::yield_now().await; // the thread is not parked
            }
            let b_before = b_done.load(SeqCst);
            let m1 = Arc::clone(&m);
            thread::spawn(move || m1.call(|n| *n = 1)).join().unwrap();
            let a = ta.await.unwrap();
            tb.await.unwrap();
            (b_before, a, m.call(|n| *n))
        })
    });
    assert_eq!(r, Some((true, 20, 1)), "B waited for A's pending when");
}

#[test]
fn two_unscoped_tasks_on_one_thread_do_not_wait_for_each_other_on_a_local_pool() {
    let r = within(5, || {
        let mut pool = futures::executor::LocalPool::new();
        let m = Arc::new(Monitor::new(0));
        let (a, b) = (Arc::clone(&m), Arc::clone(&m));
        let ta = pool
            .spawner()
            .spawn_local_with_handle(async move { a.when_async(|n| *n > 0, |n| *n * 10).await })
            .unwrap();
        pool.run_until_stalled();
        let tb = pool
            .spawner()
            .spawn_local_with_handle(async move {
                b.submit_async(|n| *n += 2).await;
            })
            .unwrap();
        // Returns: the pool's thread is not parked by B's submission.
        pool.run_until_stalled();
        let m1 = Arc::clone(&m);
        thread::spawn(move || m1.call(|n| *n = 1)).join().unwrap();
        let a = pool.run_until(ta);
        pool.run_until(tb);
        (a, m.call(|n| *n))
    });
    assert_eq!(r, Some((20, 1)), "B waited for A's pending when");
}

/// Relaxed order bounds a worker's tasks waiting on preconditions
/// (`WAITING_LIMIT`, 64). 100 consumer tasks on one thread (one
/// worker) await `when_async`: beyond the bound the submission awaits the
/// oldest waiting task instead of parking the thread, so the producer task
/// on the same thread runs and every consumer gets its item. (With `when`,
/// the 65th consumer parks the thread for ever.)
#[test]
fn relaxed_bound_beyond_64_waiting_tasks_awaits_on_one_thread() {
    const CONSUMERS: u32 = 100;
    let r = within(10, || {
        current_thread().block_on(async {
            let q = Arc::new(
                Monitor::builder()
                    .order(Order::Relaxed)
                    .build(VecDeque::<u32>::new()),
            );
            let consumers: Vec<_> = (0..CONSUMERS)
                .map(|_| {
                    let q = Arc::clone(&q);
                    tokio::spawn(async move {
                        q.when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap())
                            .await
                    })
                })
                .collect();
            tokio::task::yield_now().await;
            let q2 = Arc::clone(&q);
            tokio::spawn(async move {
                for i in 0..CONSUMERS {
                    q2.submit_async(move |d| d.push_back(i)).await;
                }
            })
            .await
            .unwrap();
            let mut sum = 0;
            for c in consumers {
                sum += c.await.unwrap();
            }
            sum
        })
    });
    assert_eq!(
        r,
        Some((0..CONSUMERS).sum()),
        "the runtime's thread was parked"
    );
}

/// Counts the drops of a task's body.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn cancel_withdraws_a_waiting_task_and_drops_its_body() {
    let m = Monitor::builder().order(Order::Relaxed).build(0);
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, body) = (Arc::clone(&runs), Counted(Arc::clone(&drops)));
    let c = m.when(
        |n| *n > 0,
        move |n| {
            let _body = body;
            r.fetch_add(1, SeqCst);
            *n
        },
    );
    assert!(c.cancel().is_ok());
    assert_eq!(drops.load(SeqCst), 1, "the body is dropped at once");
    m.submit(|n| *n = 1);
    assert_eq!(m.call(|n| *n), 1);
    assert_eq!(runs.load(SeqCst), 0, "a withdrawn task ran");
}

#[test]
fn cancel_hands_back_a_task_that_ran() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0));
    let c = m.when(|n| *n > 0, |n| *n * 10);
    m.submit(|n| *n = 4);
    let c = c.cancel().unwrap_err();
    assert_eq!(c.wait(), 40);
    let inline = m.submit(|n| *n);
    assert_eq!(inline.cancel().unwrap_err().wait(), 4);
}

#[test]
fn cancel_of_an_or_runs_no_operand() {
    let a = Monitor::builder().order(Order::Relaxed).build(0);
    let b = Monitor::builder().order(Order::Relaxed).build(0);
    let drops = Arc::new(AtomicUsize::new(0));
    let (da, db) = (Counted(Arc::clone(&drops)), Counted(Arc::clone(&drops)));
    let c = or((
        a.op(
            |n| *n > 0,
            move |n| {
                let _d = da;
                *n -= 1;
            },
        ),
        b.op(
            |n| *n > 0,
            move |n| {
                let _d = db;
                *n -= 1;
            },
        ),
    ))
    .unwrap();
    assert!(c.cancel().is_ok());
    a.submit(|n| *n = 1);
    b.submit(|n| *n = 1);
    assert_eq!((a.call(|n| *n), b.call(|n| *n)), (1, 1), "an operand ran");
    assert_eq!(drops.load(SeqCst), 2, "the operands' bodies are dropped");
}

#[test]
fn cancel_of_an_and_is_refused() {
    let a = Monitor::builder().order(Order::Relaxed).build(0);
    let b = Monitor::builder().order(Order::Relaxed).build(0);
    let c = and((a.op(|n| *n > 0, |n| *n), b.op(|n| *n > 0, |n| *n))).unwrap();
    let c = c.cancel().unwrap_err();
    a.submit(|n| *n = 1);
    b.submit(|n| *n = 2);
    assert_eq!(c.wait(), vec![1, 2]);
}

/// Strict order: a withdrawn task counts as finished, so the worker's next
/// submission to another monitor does not wait for it.
#[test]
fn a_cancelled_task_does_not_hold_back_strict_order() {
    let r = within(5, || {
        let a = Monitor::new(0);
        let b = Monitor::new(0);
        let c = a.when(|n| *n > 0, |n| *n);
        c.cancel().unwrap();
        b.submit(|n| *n += 1).wait();
        b.call(|n| *n)
    });
    assert_eq!(r, Some(1));
}

/// An async strict worker awaiting its pending `when` is woken by its
/// cancellation from elsewhere (the canceller finishes the task).
#[test]
fn cancelling_the_pending_task_wakes_the_workers_waiting_for_it() {
    let r = within(5, || {
        current_thread().block_on(worker(async {
            let a = Monitor::new(0);
            let b = Monitor::new(0);
            let c = a.when(|n| *n > 0, |n| *n);
            let mut next = pin!(b.submit_async(|n| *n += 1));
            let waker = Waker::noop();
            assert!(
                next.as_mut()
                    .poll(&mut Context::from_waker(waker))
                    .is_pending(),
                "strict order: waits for the when"
            );
            c.cancel().unwrap();
            next.await;
            b.call(|n| *n)
        }))
    });
    assert_eq!(r, Some(1));
}

fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

/// Dropping `call_async` after its task was queued withdraws it: the call
/// never happens.
#[test]
fn dropping_call_async_withdraws_its_queued_task() {
    let m = Arc::new(Monitor::new(0));
    let (release, holder) = hold(&m);
    let mut call = m.call_async(|n| {
        *n += 1;
        *n
    });
    assert!(
        poll_once(&mut call).is_pending(),
        "queued behind the holder"
    );
    drop(call);
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(m.call(|n| *n), 0, "a dropped call ran");
}

/// A panic payload whose drop panics (caught, that panic is an ordinary
/// message).
struct PayloadBomb;

impl Drop for PayloadBomb {
    fn drop(&mut self) {
        panic!("the payload's drop panicked");
    }
}

/// Captured by a body: its drop panics with a [`PayloadBomb`].
struct BodyBomb;

impl Drop for BodyBomb {
    fn drop(&mut self) {
        std::panic::panic_any(PayloadBomb);
    }
}

/// A `call_async` dropped while its thread unwinds withdraws its queued
/// task and drops the body there, in the unwind. A body whose drop panics,
/// with a payload whose own drop panics too, must not abort the process:
/// during an unwind the panic policy drops such panics (rule 3). Run in a
/// child process, where an abort is a failed exit status.
#[test]
fn a_call_async_dropped_by_an_unwind_drops_a_panicking_body_without_aborting() {
    sync_core::testing::in_child(
        "ACTIVE_MONITOR_CANCEL_WHILE_UNWINDING_CHILD",
        "a_call_async_dropped_by_an_unwind_drops_a_panicking_body_without_aborting",
        || {
            let m = Arc::new(Monitor::new(0u32));
            let (release, holder) = hold(&m);
            let bomb = BodyBomb;
            let mut call = m.call_async(move |n| {
                let _kept = &bomb;
                *n += 1;
            });
            assert!(
                poll_once(&mut call).is_pending(),
                "queued behind the holder"
            );
            sync_core::testing::drop_while_unwinding(call);
            release.send(()).unwrap();
            holder.join().unwrap();
            assert_eq!(m.call(|n| *n), 0, "the withdrawn call ran");
        },
    );
}

/// Dropping a `SubmitAsync` before it is ready (here: while it awaits space)
/// submits nothing; the others' tasks all run.
#[test]
fn a_dropped_submit_submits_nothing() {
    let m = Arc::new(Monitor::builder().capacity(1).build(0));
    let (release, holder) = hold(&m);
    let first = m.submit(|n| *n += 1);
    let mut second = m.submit_async(|n| *n += 10);
    assert!(poll_once(&mut second).is_pending(), "the queue is full");
    let m1 = Arc::clone(&m);
    let third = thread::spawn(move || m1.submit(|n| *n += 100));
    drop(second);
    release.send(()).unwrap();
    holder.join().unwrap();
    third.join().unwrap().wait();
    first.wait();
    assert_eq!(m.call(|n| *n), 101);
}

/// Consumers take items with 1 ms timeouts over `when` completions, under
/// load from producer threads; a timed-out take is cancelled, and taken
/// after all if it had already run. Every item is taken exactly once.
/// (Dropping the completion on timeout instead loses items: this test then
/// times out.)
#[test]
fn select_with_timeouts_over_when_loses_nothing_under_load() {
    const N: usize = 4000;
    let r = within(30, || {
        multi_thread().block_on(async {
            let q = Arc::new(Monitor::new(VecDeque::<usize>::new()));
            let taken = Arc::new(AtomicUsize::new(0));
            let timeouts = Arc::new(AtomicUsize::new(0));
            let producers: Vec<_> = (0..2)
                .map(|p| {
                    let (q, timeouts) = (Arc::clone(&q), Arc::clone(&timeouts));
                    thread::spawn(move || {
                        // Start once a take has timed out (on an empty
                        // queue it must): the timeout path is exercised.
                        while timeouts.load(SeqCst) == 0 {
                            thread::sleep(Duration::from_millis(1));
                        }
                        for i in 0..N / 2 {
                            q.submit(move |d| d.push_back(p * N / 2 + i));
                            if i % 64 == 0 {
                                thread::sleep(Duration::from_millis(2));
                            }
                        }
                    })
                })
                .collect();
            let consumers: Vec<_> = (0..3)
                .map(|_| {
                    let (q, taken, timeouts) =
                        (Arc::clone(&q), Arc::clone(&taken), Arc::clone(&timeouts));
                    tokio::spawn(worker(async move {
                        let mut sum = 0;
                        while taken.load(SeqCst) < N {
                            let mut c = q.when(|d| !d.is_empty(), |d| d.pop_front().unwrap());
                            let item = tokio::select! {
                                item = &mut c => Some(item.unwrap()),
                                _ = tokio::time::sleep(Duration::from_millis(1)) => {
                                    timeouts.fetch_add(1, SeqCst);
                                    match c.cancel() {
                                        Ok(()) => None,
                                        Err(c) => Some(c.await.unwrap()),
                                    }
                                }
                            };
                            if let Some(item) = item {
                                sum += item;
                                taken.fetch_add(1, SeqCst);
                            }
                        }
                        sum
                    }))
                })
                .collect();
            let mut sum = 0;
            for c in consumers {
                sum += c.await.unwrap();
            }
            for p in producers {
                p.join().unwrap();
            }
            (
                sum,
                taken.load(SeqCst),
                q.call(|d| d.len()),
                timeouts.load(SeqCst),
            )
        })
    });
    let (sum, taken, left, timeouts) =
        r.expect("items were lost: the consumers never took them all");
    assert_eq!((sum, taken, left), ((0..N).sum(), N, 0));
    assert!(timeouts > 0, "the test should exercise the timeouts");
}

#[test]
#[should_panic(expected = "SubmitAsync polled after it returned Ready")]
fn polling_a_submit_again_panics() {
    let m = Monitor::new(0);
    let mut f = m.submit_async(|n| *n += 1);
    assert!(poll_once(&mut f).is_ready());
    let _ = poll_once(&mut f);
}
