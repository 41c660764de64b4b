//! Task bodies that wait on the family's other primitives (lockfree-sync's
//! channels, semaphore and mutex, an ast-mutex entry, an adaptive lock),
//! as a service that composes them does. Each failed before its fix.
#![cfg(not(loom))]
use std::sync::Arc;
use std::time::Duration;

use active_monitor::{Monitor, Order};

ast_mutex::states! { enum Door { Open } }

/// What the body waits on, and what the task's next step gives it.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Mpsc,
    Semaphore,
    Mutex,
    Csp,
    AstMutex,
    AdaptiveMutex,
}

#[derive(Default)]
struct S {
    enabled: bool,
}

/// A task body of one monitor enables, on another, the `when_async` an
/// async task awaits (the body's thread runs it as that monitor's holder),
/// then blocks, on one of the family's other primitives, until the task's
/// next step: a send, a release, an unlock, which needs nothing the body
/// holds. The task's waker was kept on the body's thread until the body
/// ended (a waker polled there may use the body's monitor), and only this
/// crate's own waits delivered it before parking: the body waited for
/// ever. Every blocking wait of the family now delivers it first.
fn a_body_waiting_on(wait: Wait) {
    let outer = Arc::new(Monitor::new(()));
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(S::default()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("a runtime");
    let (tx, rx) = lockfree_sync::mpsc::channel::<u32>();
    let (mut csp_tx, mut csp_rx) = lockfree_sync::csp::channel::<u32>();
    let sem = Arc::new(lockfree_sync::Semaphore::new(0));
    let mutex = Arc::new(lockfree_sync::Mutex::new(()));
    let ast = Arc::new(ast_mutex::AstMutex::new(Door::Open, ()));
    let adaptive = Arc::new(adaptive_lock::AdaptiveMutex::new(()));
    // The locks are held by a thread of their own until the task's next
    // step tells it to let go.
    let (let_go, told) = std::sync::mpsc::channel::<()>();
    let (held, is_held) = std::sync::mpsc::channel::<()>();
    let holder = {
        let (mutex, ast, adaptive) = (mutex.clone(), ast.clone(), adaptive.clone());
        std::thread::spawn(move || {
            // Held until the task's next step says, or not held at all.
            let guard: Option<Box<dyn std::any::Any>> = match wait {
                Wait::Mutex => Some(Box::new(mutex.lock_arc())),
                Wait::AstMutex => Some(Box::new(ast.enter_arc(Door::Open))),
                Wait::AdaptiveMutex => Some(Box::new(adaptive.lock_arc())),
                _ => None,
            };
            held.send(()).expect("the test waits");
            if guard.is_some() {
                let _ = told.recv();
            }
            drop(guard);
        })
    };
    is_held.recv().expect("the holder holds");
    let (filed, is_filed) = std::sync::mpsc::channel();
    let task = {
        let (m, sem) = (Arc::clone(&m), Arc::clone(&sem));
        rt.spawn(async move {
            let enabled = Box::pin(m.when_async(|s: &S| s.enabled, |_| ()));
            sync_core::testing::pending_then(enabled, filed).await;
            match wait {
                Wait::Mpsc => tx.send(7).expect("the body receives"),
                Wait::Semaphore => sem.add_permits(1),
                Wait::Csp => csp_tx.send_async(7).await.expect("the body receives"),
                _ => let_go.send(()).expect("the holder waits"),
            }
        })
    };
    is_filed.recv().expect("the task filed its wait");
    let body = {
        let (outer, m) = (Arc::clone(&outer), Arc::clone(&m));
        std::thread::spawn(move || {
            outer.call(move |_| {
                // Idle: runs here, and so does the enabled task.
                m.call(|s| s.enabled = true);
                match wait {
                    Wait::Mpsc => assert_eq!(rx.recv(), Ok(7)),
                    Wait::Semaphore => sem.acquire().expect("open").forget(),
                    Wait::Mutex => drop(mutex.lock()),
                    Wait::Csp => assert_eq!(csp_rx.recv(), Ok(7)),
                    Wait::AstMutex => drop(ast.enter(Door::Open)),
                    Wait::AdaptiveMutex => drop(adaptive.lock()),
                }
            });
        })
    };
    let (done, returned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(body.join().is_ok());
    });
    assert_eq!(
        returned.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "{wait:?}: the body waited for ever"
    );
    rt.block_on(task).expect("the task finished");
    holder.join().expect("the holder let go");
}

#[test]
fn a_body_waiting_on_an_mpsc_receive_for_a_task_it_woke_returns() {
    a_body_waiting_on(Wait::Mpsc);
}

#[test]
fn a_body_waiting_on_a_semaphore_for_a_task_it_woke_returns() {
    a_body_waiting_on(Wait::Semaphore);
}

#[test]
fn a_body_waiting_on_a_lockfree_mutex_for_a_task_it_woke_returns() {
    a_body_waiting_on(Wait::Mutex);
}

#[test]
fn a_body_waiting_on_a_csp_receive_for_a_task_it_woke_returns() {
    a_body_waiting_on(Wait::Csp);
}

#[test]
fn a_body_waiting_on_an_ast_mutex_for_a_task_it_woke_returns() {
    a_body_waiting_on(Wait::AstMutex);
}

#[test]
fn a_body_waiting_on_an_adaptive_mutex_for_a_task_it_woke_returns() {
    a_body_waiting_on(Wait::AdaptiveMutex);
}

/// A task body of monitor `a` sends a message that a task, polled by its
/// executor inside the send's wakeup (on the body's thread), receives; the
/// task then submits, fire and forget, a `when` on `b` that waits. Another
/// crate's wakeup ran the task as part of the body: its `when` was the
/// body's last asynchronous task, and under strict order the body's next
/// submission, to `c`, waited for it (rule 3), for as long as nobody
/// enabled it. A task woken by any crate of the family now submits as a
/// submitter of its own, as one woken by this crate does.
#[test]
fn a_task_polled_in_another_crates_wakeup_is_a_submitter_of_its_own() {
    // Strict order, the default.
    let a = Arc::new(Monitor::new(()));
    let b = Arc::new(Monitor::new(false));
    let c = Arc::new(Monitor::new(0u32));
    let (tx, mut rx) = lockfree_sync::mpsc::channel::<u32>();
    let _task = {
        let b = Arc::clone(&b);
        sync_core::testing::InlineTask::spawn(async move {
            assert_eq!(rx.recv_async().await, Ok(1));
            // Its own task, left waiting.
            let _waits = b.when(|enabled: &bool| *enabled, |_| ());
        })
    };
    let (done, returned) = std::sync::mpsc::channel();
    let body = {
        let (a, c) = (Arc::clone(&a), Arc::clone(&c));
        std::thread::spawn(move || {
            a.call(move |_| {
                // The task runs here, inside the send.
                tx.send(1).expect("the task receives");
                c.call(|n| *n += 1);
            });
            let _ = done.send(());
        })
    };
    let waited = returned.recv_timeout(Duration::from_secs(10));
    // Let the body go in any case.
    b.call(|enabled| *enabled = true);
    body.join().expect("the body returned");
    assert_eq!(
        waited,
        Ok(()),
        "the body waited for the `when` of a task it woke"
    );
    assert_eq!(c.call(|n| *n), 1);
}

/// The same for a result nobody took, run by a `call` in the body (a
/// `when` it enabled): kept until the body ended, its `Drop`, which
/// returns a permit, never ran while the body waited on the semaphore for
/// that very permit. The family's waits drop it first now.
#[test]
fn a_body_waiting_on_a_semaphore_for_what_a_result_nobody_took_releases_returns() {
    /// A permit, given back when dropped.
    struct Lease(Arc<lockfree_sync::Semaphore>);
    impl Drop for Lease {
        fn drop(&mut self) {
            self.0.add_permits(1);
        }
    }
    let outer = Arc::new(Monitor::new(()));
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let sem = Arc::new(lockfree_sync::Semaphore::new(0));
    drop({
        let sem = Arc::clone(&sem);
        m.when(|on| *on, move |_| Lease(sem))
    });
    let body = {
        let (outer, m, sem) = (Arc::clone(&outer), Arc::clone(&m), Arc::clone(&sem));
        std::thread::spawn(move || {
            outer.call(move |_| {
                // Idle: runs here, and so does the enabled task.
                m.call(|on| *on = true);
                sem.acquire().expect("open").forget();
            });
        })
    };
    let (done, returned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(body.join().is_ok());
    });
    assert_eq!(
        returned.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the body waited for ever"
    );
}
