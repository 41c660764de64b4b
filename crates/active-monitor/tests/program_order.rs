//! Program order belongs to a task's submitter (a thread, a task body, or
//! a `worker` scope), never to the thread that happens to run a body (a
//! combiner or a server thread); a task waiting on its precondition does
//! not hold back its submitter's later tasks on the same monitor. Each
//! test hung before (a watchdog turns a hang into a failure).
#![cfg(not(loom))]
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use active_monitor::{
    __test_set_saturation_override, Monitor, Order, WAITING_LIMIT, set_server_limit, worker,
};

/// Runs `f` on a thread of its own; fails if it has not returned within a
/// generous bound (it hangs: the thread is left behind), resumes its panic.
fn within(what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p)
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung"),
    }
}

/// A monitor over `()`, combining or with a server thread.
type Unit = Arc<dyn std::ops::Deref<Target = Monitor<()>> + Send + Sync>;

fn unit(served: bool, order: Order) -> Unit {
    if served {
        set_server_limit(1000);
        __test_set_saturation_override(Some(false));
        let s = Monitor::builder().order(order).build_served(());
        assert!(s.has_server());
        Arc::new(s)
    } else {
        Arc::new(Box::new(Monitor::builder().order(order).build(())))
    }
}

/// Holds `a` (a call whose body waits), lets `queue` submit tasks to it
/// from other threads meanwhile, then lets go: the caller (combining) or
/// the server runs the queued bodies.
fn hold_while(a: &Monitor<()>, queue: impl FnOnce() + Send) {
    a.call(|_| std::thread::scope(|s| drop(s.spawn(queue))));
}

/// Case 1: thread Y combines `a` and runs X's task, whose body registers
/// `b.when(ready, ..)`; Y's own next `b.call(set ready)` (and a call on a
/// third monitor) must not wait for that `when`.
#[test]
fn a_body_run_by_a_combiner_is_not_the_combiners_submission() {
    within("combiner's own call after running a body's when", || {
        let a = Monitor::new(()); // strict order, combining
        let b = Arc::new(Monitor::new(false));
        let c = Monitor::new(0);
        let ran = Arc::new(AtomicBool::new(false));
        hold_while(&a, || {
            let (b, ran) = (Arc::clone(&b), Arc::clone(&ran));
            // X: queued behind our call; we (Y) run it when we let go.
            a.submit(move |_| {
                b.when(|r| *r, move |_| ran.store(true, SeqCst));
            });
        });
        // Y's own submissions: nothing of Y's is pending.
        c.call(|n| *n += 1);
        b.call(|r| *r = true);
        assert!(ran.load(SeqCst));
    });
}

/// Case 2: the combiner (or the server) runs one client's body that files
/// a `when` on `b`, then another client's body that enables it: the
/// second must not wait for the first inside the monitor (every later
/// `a.call` would hang).
fn two_clients(served: bool) {
    within(
        "second client's body after a first client's when",
        move || {
            let a = unit(served, Order::Strict);
            let b = Arc::new(Monitor::new(false));
            let ran = Arc::new(AtomicBool::new(false));
            hold_while(&a, || {
                let (b1, ran) = (Arc::clone(&b), Arc::clone(&ran));
                a.submit(move |_| {
                    b1.when(|r| *r, move |_| ran.store(true, SeqCst));
                });
                let b2 = Arc::clone(&b);
                std::thread::scope(|s| {
                    s.spawn(|| {
                        a.submit(move |_| {
                            let d = Monitor::new(0);
                            d.call(|n| *n += 1); // rule 3 for this body's own tasks
                            b2.call(|r| *r = true);
                        })
                    });
                });
            });
            a.call(|_| ());
            assert!(b.call(|r| *r));
            assert!(ran.load(SeqCst));
        },
    );
}

#[test]
fn clients_bodies_are_their_own_submitters_combining() {
    two_clients(false);
}

#[test]
fn clients_bodies_are_their_own_submitters_served() {
    two_clients(true);
}

/// Case 3: more bodies than the bound on waiting tasks, each filing one
/// waiting `when` on `b`, run by one combiner (or server): none counts
/// against another's bound.
fn many_bodies(served: bool) {
    within("bodies filing waiting tasks", move || {
        let a = unit(served, Order::Relaxed);
        let b = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
        let ran = Arc::new(AtomicUsize::new(0));
        let n = WAITING_LIMIT + 1;
        hold_while(&a, || {
            for _ in 0..n {
                let (b, ran) = (Arc::clone(&b), Arc::clone(&ran));
                a.submit(move |_| {
                    b.when(|r| *r, move |_| ran.fetch_add(1, SeqCst));
                });
            }
        });
        a.call(|_| ()); // not wedged
        b.call(|r| *r = true);
        assert_eq!(ran.load(SeqCst), n);
    });
}

#[test]
fn bodies_do_not_share_the_waiting_bound_combining() {
    many_bodies(false);
}

#[test]
fn bodies_do_not_share_the_waiting_bound_served() {
    many_bodies(true);
}

/// Case 4, synchronously: a `when` then the `submit` that enables it, from
/// one thread, under the default (strict) order.
#[test]
fn a_waiting_when_does_not_hold_back_its_submitters_next_task() {
    within("when then submit from one thread", || {
        let m = Monitor::new(0); // strict
        let c = m.when(|n| *n > 0, |n| *n * 10);
        m.submit(|n| *n = 4);
        assert_eq!(c.wait(), 40);
        // And a call after a waiting when.
        let c = m.when(|n| *n > 4, |n| *n);
        assert_eq!(m.call(|n| *n), 4);
        m.call(|n| *n = 5);
        assert_eq!(c.wait(), 5);
    });
}

/// Rule 2 still holds: a submitter's tasks on one monitor are taken up in
/// submission order (a plain task never overtakes an earlier plain one),
/// and its waiting tasks run oldest first once enabled.
#[test]
fn rule_2_tasks_of_one_submitter_start_in_order() {
    within("rule 2", rule_2);
}

fn rule_2() {
    let m = Monitor::new(Vec::new());
    let w1 = m.when(|v: &Vec<u32>| !v.is_empty(), |v| v.push(10));
    let w2 = m.when(|v: &Vec<u32>| !v.is_empty(), |v| v.push(20));
    for i in 0..3 {
        m.submit(move |v| v.push(i));
    }
    w1.wait();
    w2.wait();
    assert_eq!(m.call(|v| v.clone()), [0, 10, 20, 1, 2]);
}

/// Rule 3 still holds for a thread: its task on another monitor completes
/// before its next submission.
#[test]
fn rule_3_a_thread_waits_for_its_task_on_another_monitor() {
    let a = Arc::new(Monitor::new(false));
    let b = Monitor::new(0);
    let enabled = Arc::new(AtomicBool::new(false));
    let done = a.when(|r| *r, |_| 1);
    let enabler = {
        let (a, enabled) = (Arc::clone(&a), Arc::clone(&enabled));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            enabled.store(true, SeqCst);
            a.call(|r| *r = true);
        })
    };
    b.call(|n| *n += 1); // waits for `done`, which waits for the enabler
    assert!(enabled.load(SeqCst));
    assert!(done.is_done());
    enabler.join().unwrap();
}

/// Rule 3 covers a waiting task that a later task on the same monitor
/// overtook: the submitter's next submission elsewhere waits for it too.
#[test]
fn rule_3_covers_a_waiting_task_overtaken_on_its_monitor() {
    let a = Arc::new(Monitor::new(false));
    let b = Monitor::new(0);
    let enabled = Arc::new(AtomicBool::new(false));
    // Both queued behind a holder, so that both are recorded: the plain
    // task, last, overtakes the waiting one (rule 2) and finishes.
    let (waiting, overtaking) = {
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let a2 = Arc::clone(&a);
        let h = std::thread::spawn(move || {
            a2.call(move |_| {
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            })
        });
        held_rx.recv().unwrap();
        let w = a.when(|r| *r, |_| 1);
        let o = a.submit(|_| ());
        go_tx.send(()).unwrap();
        h.join().unwrap();
        (w, o)
    };
    overtaking.wait();
    assert!(!waiting.is_done());
    let enabler = {
        let (a, enabled) = (Arc::clone(&a), Arc::clone(&enabled));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            enabled.store(true, SeqCst);
            a.call(|r| *r = true);
        })
    };
    b.call(|n| *n += 1);
    assert!(
        enabled.load(SeqCst),
        "b's call went ahead of the waiting task"
    );
    assert!(waiting.is_done());
    enabler.join().unwrap();
}

/// Rule 3 after several tasks on one monitor: a submission to the same
/// monitor drops the earlier task from the record (nothing to wait for
/// there), and the submitter's next submission elsewhere still waits for
/// both, since the later one runs after the earlier.
#[test]
fn rule_3_covers_every_task_of_a_run_on_one_monitor() {
    for served in [false, true] {
        let a = unit(served, Order::Strict);
        let b = Monitor::new(0);
        let ran = Arc::new(AtomicUsize::new(0));
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let holder = {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                a.call(move |_| {
                    held_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    // Queued tasks wait for this body; the submitter below
                    // reaches `b` first.
                    std::thread::sleep(Duration::from_millis(20));
                })
            })
        };
        held_rx.recv().unwrap();
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let ran = Arc::clone(&ran);
                a.submit(move |_| {
                    ran.fetch_add(1, SeqCst);
                })
            })
            .collect();
        go_tx.send(()).unwrap();
        b.call(|n| *n += 1); // waits for the last of `a`'s tasks
        assert_eq!(
            ran.load(SeqCst),
            3,
            "b's call went ahead of a's tasks (served: {served})"
        );
        assert!(tasks.iter().all(|t| t.is_done()));
        holder.join().unwrap();
    }
}

/// `r`, a call's outcome, is a panic whose message names rule 3.
fn panics_naming_rule_3(r: std::thread::Result<()>) {
    let p = r.expect_err("must panic");
    let msg = p
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(msg.contains("rule 3"), "{msg}");
}

/// A rule-3 wait that could only wait for itself panics, naming the rule:
/// a body of `a` queues a task on `a` (it cannot run while the body runs),
/// then calls another monitor.
#[test]
fn a_wait_for_itself_panics_naming_the_rule() {
    within("self wait", || {
        let a = Arc::new(Monitor::new(0));
        let b = Monitor::new(0);
        let a2 = Arc::clone(&a);
        let r = catch_unwind(AssertUnwindSafe(|| {
            a.call(move |_| {
                // Queued: we hold `a`.
                let _queued = a2.submit(|n| *n += 1);
                b.call(|n| *n += 1);
            })
        }));
        panics_naming_rule_3(r);
        assert_eq!(a.call(|n| *n), 1);
    });
}

/// The same through an AND: a body of `a` submits an AND with an operand
/// on `a` (queued: it cannot run while the body runs), then calls another
/// monitor. Found by review: the AND is recorded under no one monitor, and
/// the wait hung instead of panicking. An OR is not a wait for itself: its
/// operand on another monitor can still complete it.
#[test]
fn a_wait_for_itself_through_an_and_panics_naming_the_rule() {
    within("self wait through an AND", || {
        let a = Arc::new(Monitor::new(0));
        let b = Arc::new(Monitor::new(0));
        let c = Monitor::new(0);
        let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
        let r = catch_unwind(AssertUnwindSafe(|| {
            a.call(move |_| {
                let _both = active_monitor::and((
                    a2.op(|_| true, |n| *n += 1),
                    b2.op(|_| true, |n| *n += 1),
                ))
                .unwrap();
                c.call(|n| *n += 1);
            })
        }));
        panics_naming_rule_3(r);
        // The AND ran once `a` was free.
        assert_eq!((a.call(|n| *n), b.call(|n| *n)), (1, 1));
    });
}

/// The same from a body of another monitor called inside a task of `a`: a
/// body of `b`, run inside one of `a`, queues a task on `a` (held by this
/// thread, below) and calls a third monitor. The check looked only at the
/// innermost running monitor (`b`), and the wait hung.
#[test]
fn a_wait_for_itself_from_a_nested_body_panics_naming_the_rule() {
    within("self wait from a nested body", || {
        let a = Arc::new(Monitor::new(0));
        let b = Monitor::new(0);
        let c = Monitor::new(0);
        let a2 = Arc::clone(&a);
        let r = catch_unwind(AssertUnwindSafe(|| {
            a.call(move |_| {
                b.call(|_| {
                    // Queued: this thread holds `a`.
                    let _queued = a2.submit(|n| *n += 1);
                    c.call(|n| *n += 1);
                })
            })
        }));
        panics_naming_rule_3(r);
        assert_eq!(a.call(|n| *n), 1);
    });
}

/// And through an AND with an operand on `a`, from the same nested body.
#[test]
fn a_wait_for_itself_through_an_and_from_a_nested_body_panics_naming_the_rule() {
    within("self wait through an AND from a nested body", || {
        let a = Arc::new(Monitor::new(0));
        let b = Arc::new(Monitor::new(0));
        let c = Monitor::new(0);
        let d = Monitor::new(0);
        let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
        let r = catch_unwind(AssertUnwindSafe(|| {
            a.call(move |_| {
                d.call(|_| {
                    let _both = active_monitor::and((
                        a2.op(|_| true, |n| *n += 1),
                        b2.op(|_| true, |n| *n += 1),
                    ))
                    .unwrap();
                    c.call(|n| *n += 1);
                })
            })
        }));
        panics_naming_rule_3(r);
        assert_eq!((a.call(|n| *n), b.call(|n| *n)), (1, 1));
    });
}

type Queue = Monitor<std::collections::VecDeque<u32>>;
type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Case 4, async: a producer task and a consumer task on one thread, both
/// with `when_async`, under strict order.
async fn produce_consume<Q>(q: Arc<Q>, spawn: impl Fn(BoxFuture))
where
    Q: std::ops::Deref<Target = Queue> + Send + Sync + 'static,
{
    const N: u32 = 200;
    let (tx, rx) = futures::channel::oneshot::channel();
    let qc = Arc::clone(&q);
    spawn(Box::pin(async move {
        let mut sum = 0;
        for _ in 0..N {
            sum += qc
                .when_async(|d| !d.is_empty(), |d| d.pop_front().unwrap())
                .await;
        }
        tx.send(sum).unwrap();
    }));
    let qp = Arc::clone(&q);
    spawn(Box::pin(async move {
        for i in 0..N {
            qp.when_async(|d| d.len() < 4, move |d| d.push_back(i))
                .await;
        }
    }));
    assert_eq!(rx.await.unwrap(), (0..N).sum::<u32>());
}

#[test]
fn producer_consumer_tasks_current_thread() {
    within("current-thread runtime", || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let q = Arc::new(Box::new(Monitor::new(Default::default())));
        rt.block_on(produce_consume(q, |f| drop(tokio::spawn(f))));
    });
}

#[test]
fn producer_consumer_tasks_multi_thread() {
    within("multi-thread runtime", || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let q = Arc::new(Box::new(Monitor::new(Default::default())));
        rt.block_on(produce_consume(q, |f| drop(tokio::spawn(f))));
    });
}

#[test]
fn producer_consumer_tasks_local_pool() {
    within("LocalPool", || {
        use futures::task::SpawnExt;
        let mut pool = futures::executor::LocalPool::new();
        let sp = pool.spawner();
        let q = Arc::new(Box::new(Monitor::new(Default::default())));
        pool.run_until(produce_consume(q, move |f| sp.spawn(f).unwrap()));
    });
}

#[test]
fn producer_consumer_tasks_served_current_thread() {
    within("served, current-thread runtime", || {
        set_server_limit(1000);
        __test_set_saturation_override(Some(false));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let q = Arc::new(Monitor::builder().build_served(Default::default()));
        rt.block_on(produce_consume(q, |f| drop(tokio::spawn(f))));
    });
}

#[test]
fn producer_consumer_tasks_served_local_pool() {
    within("served, LocalPool", || {
        use futures::task::SpawnExt;
        set_server_limit(1000);
        __test_set_saturation_override(Some(false));
        let mut pool = futures::executor::LocalPool::new();
        let sp = pool.spawner();
        let q = Arc::new(Monitor::builder().build_served(Default::default()));
        pool.run_until(produce_consume(q, move |f| sp.spawn(f).unwrap()));
    });
}

/// Two async tasks on one thread that keep completions in `worker`
/// scopes: rule 3 holds within each, and neither holds back the other.
#[test]
fn worker_scopes_keep_rule_3_per_task_current_thread() {
    within("worker scopes", || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let a = Arc::new(Monitor::new(0));
            let b = Arc::new(Monitor::new(0));
            let (a1, b1) = (Arc::clone(&a), Arc::clone(&b));
            let t1 = tokio::spawn(worker(async move {
                // Waits on `a` until task 2 enables it; then rule 3 makes
                // this task's `b` submission await it.
                let w = a1.when_async(|n| *n > 0, |n| *n).completion().await;
                let seen = b1.call_async(|n| *n).await;
                (w.await.unwrap(), seen)
            }));
            let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
            let t2 = tokio::spawn(worker(async move {
                b2.call_async(|n| *n = 7).await;
                a2.call_async(|n| *n = 1).await;
            }));
            t2.await.unwrap();
            assert_eq!(t1.await.unwrap(), (1, 7));
        });
    });
}
