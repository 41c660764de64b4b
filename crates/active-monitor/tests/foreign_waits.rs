//! Task bodies that wait on the family's other primitives (lockfree-sync's
//! channels, semaphore and mutex, an ast-mutex entry, an adaptive lock),
//! as a service that composes them does. Each failed before its fix.
#![cfg(not(loom))]
use std::sync::Arc;
use std::time::Duration;

use active_monitor::{Monitor, Order};
use sync_core::testing::ended_within;

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

/// A counter monitor, entered in relaxed program order.
fn counter() -> Arc<Monitor<u64>> {
    Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64))
}

/// A lease of a counter monitor, given back (counted there) on drop.
struct Lease(Arc<Monitor<u64>>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.call(|n| *n += 1);
    }
}

/// A brief park inside a task body: a 1 ms timed acquire that fails.
fn park_briefly() {
    let empty = lockfree_sync::Semaphore::new(0);
    assert!(empty.try_acquire_for(Duration::from_millis(1)).is_err());
}

/// Waits up to 10 s for each of the two threads to end, and checks that
/// both returned. If either hangs, `held` (what hung threads hold) is
/// leaked rather than dropped, and the test fails with `hang`.
fn both_end<H>(
    first: std::thread::JoinHandle<()>,
    second: std::thread::JoinHandle<()>,
    held: H,
    hang: &str,
) {
    let first = ended_within(Duration::from_secs(10), first);
    let second = ended_within(Duration::from_secs(10), second);
    if first.is_none() || second.is_none() {
        std::mem::forget(held);
        panic!("{hang}");
    }
    assert_eq!((first, second), (Some(true), Some(true)));
}

/// A task that awaits `v`'s switch (a `when_async`: the thread that turns
/// it on keeps the task's waker, which polls it on the spot), then `step`.
fn task_after_switch(
    v: &Arc<Monitor<bool>>,
    step: impl FnOnce() + Send + 'static,
) -> Arc<sync_core::testing::InlineTask> {
    let v = v.clone();
    sync_core::testing::InlineTask::spawn(async move {
        v.when_async(|on: &bool| *on, |_| ()).await;
        step();
    })
}

/// The first thread of the task-waker tests: in its body of `x` it turns
/// `v` on (the task's waker is kept until this thread's next park), says
/// so (`go`), waits for the second thread (`ready`), and then for the
/// second thread's call of `x` to queue; its serve of `x` runs that call
/// after its own body.
fn switch_in_x(
    x: &Arc<Monitor<u64>>,
    v: Arc<Monitor<bool>>,
    go: std::sync::mpsc::Sender<()>,
    ready: std::sync::mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    let x = x.clone();
    std::thread::spawn(move || {
        let held = Arc::clone(&x);
        x.call(move |_| {
            v.call(|on| *on = true);
            go.send(()).expect("the second thread waits");
            ready.recv().expect("the second thread goes on");
            until_queued(&held, 1);
        });
    })
}

/// Has this thread keep a lease of `y` as a result nobody took: a
/// fire-and-forget task of `z`, queued behind this thread's body of `z`
/// and run by its serve, returns it, and the thread keeps it until it
/// holds no monitor (or hands it on at a park).
fn keep_a_lease(y: &Arc<Monitor<u64>>, z: &Arc<Monitor<u64>>) {
    let (lease, z2) = (y.clone(), z.clone());
    z.call(move |_| drop(z2.submit(move |_| Lease(lease))));
}

/// Waits up to 10 s for `counter` to count one (a lease that a thread of
/// its own returns, see `unwind::elsewhere`), and checks it counts no more.
fn came_back_once(counter: &Monitor<u64>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while counter.call(|n| *n) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never came back"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter.call(|n| *n), 1, "the lease came back once");
}

/// What `read` returns once it returns `want`, or after `bound`: for what
/// a thread of its own (`active-monitor-deliver`) drops, which may come
/// after the test's threads have ended.
fn settled<V: PartialEq>(bound: Duration, read: impl Fn() -> V, want: V) -> V {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let v = read();
        if v == want || std::time::Instant::now() >= deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits, in a body of `m`, until `n` tasks of other threads are queued
/// behind it (their `call`s have watched the held monitor and queued, or
/// their submissions are in): the serve at this body's end runs them.
/// Panics after 10 s.
fn until_queued(m: &Monitor<u64>, n: usize) {
    assert!(
        sync_core::testing::holds_within(Duration::from_secs(10), || m.__test_queued() >= n),
        "{n} tasks never queued behind the held monitor: {m:?}"
    );
}

/// A second thread that, once `gone`, calls `q`, held by the first
/// thread, which runs that call's body from the queue: it parks briefly.
fn queue_a_brief_park(
    q: &Arc<Monitor<u64>>,
    gone: std::sync::mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    let q = q.clone();
    std::thread::spawn(move || {
        gone.recv().expect("the first thread goes on");
        q.call(|_| park_briefly());
    })
}

/// The second thread of the cross-thread park tests: once `gone`, in its
/// body of `y`, it says so (`in_y`) and calls `x`, held by the first
/// thread, which runs that call's body from the queue: it parks briefly.
fn call_x_from_y(
    x: &Arc<Monitor<u64>>,
    y: &Arc<Monitor<u64>>,
    gone: std::sync::mpsc::Receiver<()>,
    in_y: std::sync::mpsc::Sender<()>,
) -> std::thread::JoinHandle<()> {
    let (x, y) = (x.clone(), y.clone());
    std::thread::spawn(move || {
        gone.recv().expect("the first thread goes on");
        y.call(|_| {
            in_y.send(()).expect("the first thread waits");
            // Queued: the first thread holds `x`, and runs it.
            x.call(|_| park_briefly());
        });
    })
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
    assert_eq!(
        ended_within(Duration::from_secs(10), body),
        Some(true),
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

/// What the body of [`a_body_waiting_for_what_a_dropped_completions_task_holds`]
/// waits on.
#[derive(Clone, Copy, Debug)]
enum Held {
    /// A semaphore permit, the task's result.
    Result,
    /// A semaphore permit, in the task's precondition's captures.
    Capture,
    /// A send on drop, the task's result, for an mpsc receive.
    Message,
}

/// A `when` on `m` whose completion was dropped holds a semaphore permit
/// (its result, or its precondition's captures). A task body of another monitor enables
/// it: its call, on idle `m`, runs the `when` on the body's thread, and the
/// task, with what it holds, was kept to drop until the body ended (a
/// `Drop` may use a monitor that is held). The body then waited for that
/// permit, or message, for ever. A blocking wait of the family now drops
/// first what the thread keeps of monitors other than the body's.
fn a_body_waiting_for_what_a_dropped_completions_task_holds(held: Held) {
    struct Tell(lockfree_sync::mpsc::Sender<u32>);
    impl Drop for Tell {
        fn drop(&mut self) {
            let _ = self.0.send(7);
        }
    }
    let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    let (tx, rx) = lockfree_sync::mpsc::channel::<u32>();
    let outer = Arc::new(Monitor::new(()));
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let permit = sem.acquire_arc().expect("open");
    match held {
        Held::Result => drop(m.when(|e: &bool| *e, move |_| permit)),
        Held::Capture => drop(m.when(
            move |e: &bool| {
                let _held = &permit;
                *e
            },
            |_| (),
        )),
        Held::Message => {
            let tell = Tell(tx);
            drop(m.when(|e: &bool| *e, move |_| tell));
        }
    }
    let body = std::thread::spawn(move || {
        outer.call(move |_| {
            // Idle: the `when` runs here, as `m`'s holder.
            m.call(|e| *e = true);
            match held {
                Held::Message => assert_eq!(rx.recv(), Ok(7)),
                _ => sem.acquire().expect("open").forget(),
            }
        });
    });
    assert_eq!(
        ended_within(Duration::from_secs(10), body),
        Some(true),
        "{held:?}: the body waited for ever"
    );
}

#[test]
fn a_body_waiting_for_a_permit_a_result_nobody_took_holds_returns() {
    a_body_waiting_for_what_a_dropped_completions_task_holds(Held::Result);
}

#[test]
fn a_body_waiting_for_a_permit_a_dropped_tasks_precondition_holds_returns() {
    a_body_waiting_for_what_a_dropped_completions_task_holds(Held::Capture);
}

#[test]
fn a_body_waiting_for_a_message_a_result_nobody_took_sends_on_drop_returns() {
    a_body_waiting_for_what_a_dropped_completions_task_holds(Held::Message);
}

/// A waker that runs `f` when its last handle drops.
struct RunsOnDrop(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl std::task::Wake for RunsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for RunsOnDrop {
    fn drop(&mut self) {
        let f = self.0.lock().map(|mut f| f.take());
        if let Ok(Some(f)) = f {
            f();
        }
    }
}

/// A task body polls an mpsc receiver (`poll_recv`), leaving a waker
/// there whose drop enables, on another monitor, the `when_async` a task
/// awaits before it sends; then it receives, blocking. The receive drops
/// the waker it replaces, and the task's waker is kept on the body's
/// thread: that came after the park hook, and the body waited for the
/// task's message for ever. The waker left there is now dropped first.
#[test]
fn a_blocking_receive_drops_the_waker_it_replaces_before_its_park_hook() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let (tx, mut rx) = lockfree_sync::mpsc::channel::<u32>();
    let _task = {
        let m = Arc::clone(&m);
        sync_core::testing::InlineTask::spawn(async move {
            m.when_async(|enabled: &bool| *enabled, |_| ()).await;
            tx.send(7).expect("the body receives");
        })
    };
    let outer = Monitor::new(());
    let body = std::thread::spawn(move || {
        outer.call(move |_| {
            let enable: Box<dyn FnOnce() + Send> = Box::new(move || m.call(|e| *e = true));
            let waker =
                std::task::Waker::from(Arc::new(RunsOnDrop(std::sync::Mutex::new(Some(enable)))));
            let mut cx = std::task::Context::from_waker(&waker);
            // The first `Pending` may be a yield; the second leaves the
            // waker.
            let _ = rx.poll_recv(&mut cx);
            assert!(rx.poll_recv(&mut cx).is_pending());
            drop(waker);
            assert_eq!(rx.recv(), Ok(7));
        });
    });
    assert_eq!(
        ended_within(Duration::from_secs(10), body),
        Some(true),
        "the body waited for ever"
    );
}

/// A task body of one monitor enables, on another, the `when_async` a task
/// awaits (its waker kept on the body's thread), then drops the last
/// handle of a served monitor, whose server runs a task that waits, on an
/// mpsc receive, for that task's next step. The drop joins the server, and
/// joined it with the waker kept: it waited for ever. The join now comes
/// after what the thread keeps is delivered, as any wait of the family.
#[test]
fn dropping_the_last_served_handle_in_a_body_delivers_its_kept_wakers_first() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let (tx, rx) = lockfree_sync::mpsc::channel::<u64>();
    let _task = {
        let m = Arc::clone(&m);
        sync_core::testing::InlineTask::spawn(async move {
            m.when_async(|enabled: &bool| *enabled, |_| ()).await;
            tx.send(7).expect("the server receives");
        })
    };
    // The server runs the task below, whatever the load (the override is
    // the process's: one such test at a time).
    let _one = sync_core::testing::one_at_a_time();
    active_monitor::set_server_limit(1000);
    active_monitor::__test_set_saturation_override(Some(false));
    let served = Monitor::builder().order(Order::Relaxed).build_served(0u64);
    assert!(served.has_server());
    let (running, is_running) = std::sync::mpsc::channel();
    drop(served.submit(move |n| {
        running.send(()).expect("the test waits");
        *n = rx.recv().expect("the task sends");
    }));
    is_running.recv().expect("the server runs the task");
    let outer = Monitor::builder().order(Order::Relaxed).build(());
    let body = std::thread::spawn(move || {
        outer.call(move |_| {
            // Idle: runs here, and keeps the task's waker.
            m.call(|enabled| *enabled = true);
            drop(served);
        });
    });
    let returned = ended_within(Duration::from_secs(10), body);
    active_monitor::__test_set_saturation_override(None);
    assert_eq!(returned, Some(true), "the drop waited for ever");
}

/// A serve keeps a result nobody took (its `Drop` calls the monitor, a
/// lease returned to its pool), then runs a task whose body calls a second
/// monitor, whose body calls a third, held elsewhere, and parks for it.
/// The park dropped every kept result but the innermost body's monitor's:
/// the lease's call then waited for ever for the serve below it on the
/// same thread. It is kept until the serve has let go, and returned then.
#[test]
fn a_park_in_a_nested_body_keeps_the_results_of_the_monitor_served_below() {
    struct Lease(Arc<Monitor<u64>>);
    impl Drop for Lease {
        fn drop(&mut self) {
            self.0.call(|n| *n += 100);
        }
    }
    let (outer, middle, inner) = (counter(), counter(), counter());
    let (held, is_held) = std::sync::mpsc::channel::<()>();
    let (go, gone) = std::sync::mpsc::channel::<()>();
    // Holds the outer monitor while its tasks are queued; then serves them.
    let server = {
        let outer = outer.clone();
        std::thread::spawn(move || {
            outer.call(move |_| {
                held.send(()).expect("the test waits");
                gone.recv().expect("the test lets go");
            })
        })
    };
    is_held.recv().expect("the outer monitor is held");
    let lease = outer.clone();
    drop(outer.submit(move |n| {
        *n += 1;
        Lease(lease)
    }));
    // The inner monitor is held until the call below has queued (and
    // parks).
    let (inner_held, is_inner_held) = std::sync::mpsc::channel::<()>();
    let holder = {
        let inner = inner.clone();
        std::thread::spawn(move || {
            let held = Arc::clone(&inner);
            inner.call(move |_| {
                inner_held.send(()).expect("the test waits");
                until_queued(&held, 1);
            })
        })
    };
    is_inner_held.recv().expect("the inner monitor is held");
    let (m, i) = (middle.clone(), inner.clone());
    drop(outer.submit(move |n| {
        *n += 10;
        m.call(|_| i.call(|k| *k += 1));
    }));
    go.send(()).expect("the server waits");
    let served = ended_within(Duration::from_secs(10), server);
    holder.join().expect("the holder");
    if served.is_none() {
        std::mem::forget(outer);
        panic!("the serve hung on its own result's drop");
    }
    assert_eq!(served, Some(true));
    assert_eq!(outer.call(|n| *n), 111, "the lease came back once");
    assert_eq!(inner.call(|k| *k), 1);
}

/// A lease: a permit given back to its semaphore when dropped.
struct Permit(Arc<lockfree_sync::Semaphore>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.add_permits(1);
    }
}

/// A serve of `y`, called from a body of `x`, runs two `when`s its call
/// enabled, both fire and forget: the first's result (a permit given back
/// on drop) is kept as `y`'s; the second's body parks (a timed acquire
/// that times out), and that park's hook keeps the result back, `y`'s body
/// running, using up the thread's registration. Once `y` is let go of, the
/// result is due at the next park, and `x`'s body then waits for the very
/// permit it gives back: with the hook not armed again on the way out of
/// `y`'s body, it waited for ever.
#[test]
fn a_park_after_a_nested_serve_drops_what_that_serve_s_park_kept_back() {
    let x = Monitor::new(());
    let y = Monitor::new(false);
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let body = std::thread::spawn(move || {
        x.call(|_| {
            drop({
                let pool = Arc::clone(&pool);
                y.when(|on: &bool| *on, move |_| Permit(pool))
            });
            drop(y.when(
                |on: &bool| *on,
                |_| {
                    park_briefly();
                },
            ));
            y.call(|on| *on = true);
            pool.acquire().expect("open").forget();
        });
    });
    let returned = ended_within(Duration::from_secs(10), body);
    assert_eq!(returned, Some(true), "the outer body waited for ever");
}

/// A task body of one monitor drops the last handle of another, `m`,
/// whose `when` waits on its precondition and holds a semaphore permit
/// (its precondition's captures; its completion dropped). The drop
/// discards the `when`, and the task, with the permit, is kept to drop
/// until the body ends (a `Drop` may use the body's monitor), as a task of
/// the body's monitor: the body's next park kept it back as such, and the
/// body, waiting for that permit, waited for ever. It is kept as `m`'s,
/// whose body does not run here: the park drops it.
#[test]
fn a_body_waiting_for_a_permit_a_monitor_it_dropped_discarded_returns() {
    let sem = Arc::new(lockfree_sync::Semaphore::new(1));
    let outer = Monitor::new(());
    let m = Monitor::builder().order(Order::Relaxed).build(false);
    let permit = sem.acquire_arc().expect("open");
    drop(m.when(
        move |e: &bool| {
            let _held = &permit;
            *e
        },
        |_| (),
    ));
    let body = std::thread::spawn(move || {
        outer.call(move |_| {
            drop(m);
            sem.acquire().expect("open").forget();
        });
    });
    assert_eq!(
        ended_within(Duration::from_secs(10), body),
        Some(true),
        "the body waited for ever for a permit its dropped monitor's task held"
    );
}

/// At the end of its operation a thread drops two results nobody took,
/// newest first: a lease of `x` whose `Drop` calls `x`, whose body keeps a
/// result of its own and then parks (a timed acquire), and a lease of `y`
/// whose `Drop` calls `y`. The park dropped the lease of `y` inside that
/// body of `x`: its call of `y` waited for a second thread, in its body
/// of `y`, which waited for `x`. Neither thread's code calls `y` while
/// holding `x`. The lease of `y` is now dropped after the first `Drop`
/// has returned.
#[test]
fn a_park_in_a_result_s_drop_does_not_drop_the_next_result_there() {
    type Go = (std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>);
    struct LeaseX(Arc<Monitor<u64>>, std::sync::Mutex<Option<Go>>);
    impl Drop for LeaseX {
        fn drop(&mut self) {
            let (go, in_y) = self.1.lock().expect("once").take().expect("once");
            let x = Arc::clone(&self.0);
            self.0.call(move |_| {
                go.send(()).expect("the second thread waits");
                in_y.recv().expect("the second thread holds y");
                until_queued(&x, 1);
                // A result kept in this body: the park hook has work.
                let w = Arc::new(Monitor::new(0u64));
                let w2 = Arc::clone(&w);
                w.call(move |_| drop(w2.submit(|_| String::from("kept"))));
                park_briefly();
            });
        }
    }
    struct LeaseY(Arc<Monitor<u64>>);
    impl Drop for LeaseY {
        fn drop(&mut self) {
            self.0.call(|n| *n += 1);
        }
    }
    let (x, y, z) = (counter(), counter(), counter());
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let (in_y, is_in_y) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, y) = (x.clone(), y.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            y.call(move |_| {
                in_y.send(()).expect("the first thread waits");
                x.call(|n| *n += 1);
            });
        })
    };
    let first = {
        let (x, y, z) = (x.clone(), y.clone(), z.clone());
        std::thread::spawn(move || {
            let z2 = Arc::clone(&z);
            let go = std::sync::Mutex::new(Some((go, is_in_y)));
            // Queued behind this body, run by its serve: both results are
            // kept to the call's end.
            z.call(move |_| {
                drop(z2.submit(move |_| LeaseY(y)));
                drop(z2.submit(move |_| LeaseX(x, go)));
            });
        })
    };
    let first = ended_within(Duration::from_secs(10), first);
    let second = ended_within(Duration::from_secs(10), second);
    if first.is_none() || second.is_none() {
        // Both threads hang, holding `x` and `y`: leave them.
        std::mem::forget((x, y));
        panic!("the second lease's call waited for ever inside the first's body");
    }
    assert_eq!((first, second), (Some(true), Some(true)));
    assert_eq!(y.call(|n| *n), 1, "the lease of y came back once");
    assert_eq!(x.call(|n| *n), 1);
}

/// Where the newest result's `Drop` in
/// [`a_result_s_drop_waiting_for_an_older_result_s_permit`] parks.
#[derive(Clone, Copy, Debug)]
enum ParksIn {
    /// The `Drop` itself (a blocking acquire).
    Drop,
    /// After a call of another monitor (whose end delivers what it kept).
    DropAfterACall,
    /// Inside the body of another, idle monitor that the `Drop` calls.
    ABody,
}

/// At the end of a thread's own `call`, the results nobody took that its
/// serve kept are dropped, newest first, on that thread: the newest's
/// `Drop` waits for a permit that the older one's `Drop` gives back. They
/// were taken out as one batch before the first was dropped, so a park
/// in it found nothing to hand on, and it waited for ever for a result
/// dropped after it. Each is now dropped as a body of its own: its park
/// hands the rest of the batch to a thread of their own
/// (`active-monitor-deliver`); a result that does not park is dropped on
/// the calling thread, as before. `served`: the same at the end of a
/// server's stint, which runs both tasks (the older result was kept back
/// there as one of the server's monitor, whose tasks the stint's drops
/// run as).
fn a_result_s_drop_waiting_for_an_older_result_s_permit(parks: ParksIn, served: bool) {
    type On = Arc<std::sync::Mutex<Vec<(&'static str, String)>>>;
    fn record(on: &On, what: &'static str) {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        on.lock().expect("not poisoned").push((what, name));
    }
    struct Returns(Arc<lockfree_sync::Semaphore>, On);
    impl Drop for Returns {
        fn drop(&mut self) {
            record(&self.1, "returns");
            self.0.add_permits(1);
        }
    }
    struct Waits(
        Arc<lockfree_sync::Semaphore>,
        On,
        ParksIn,
        Arc<Monitor<u64>>,
    );
    impl Drop for Waits {
        fn drop(&mut self) {
            record(&self.1, "waits");
            let pool = Arc::clone(&self.0);
            match self.2 {
                ParksIn::Drop => pool.acquire().expect("open").forget(),
                ParksIn::DropAfterACall => {
                    self.3.call(|n| *n += 1);
                    pool.acquire().expect("open").forget();
                }
                ParksIn::ABody => self.3.call(move |n| {
                    pool.acquire().expect("open").forget();
                    *n += 1;
                }),
            }
            record(&self.1, "waited");
        }
    }
    let x = counter();
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let on = On::default();
    // Both tasks queued behind a task that holds the monitor, and run by
    // the same serve (or stint): their results are kept to its end.
    let submit_both = {
        let (pool, on, x) = (pool.clone(), on.clone(), x.clone());
        move |z: &Monitor<u64>| {
            let (a, b) = (pool.clone(), pool);
            let on2 = on.clone();
            drop(z.submit(move |_| Returns(b, on2)));
            // The newest: dropped first.
            drop(z.submit(move |_| Waits(a, on, parks, x)));
        }
    };
    let caller = "the caller".to_owned();
    let mut keep_alive = None;
    // The server runs the tasks, whatever the load (the override is the
    // process's: one such test at a time).
    let _one = served.then(sync_core::testing::one_at_a_time);
    if served {
        active_monitor::set_server_limit(1000);
        active_monitor::__test_set_saturation_override(Some(false));
        let z = Monitor::builder().order(Order::Relaxed).build_served(0u64);
        assert!(z.has_server());
        let (held, is_held) = std::sync::mpsc::channel::<()>();
        let (submitted, are_submitted) = std::sync::mpsc::channel::<()>();
        let hold = z.submit(move |_| {
            held.send(()).expect("the test waits");
            // Both queue behind this task, for the same stint.
            are_submitted
                .recv_timeout(Duration::from_secs(10))
                .expect("the test submits both");
        });
        is_held.recv().expect("the server runs it");
        submit_both(&z);
        submitted.send(()).expect("the server waits");
        hold.wait();
        active_monitor::__test_set_saturation_override(None);
        keep_alive = Some(z);
    } else {
        let caller = std::thread::Builder::new()
            .name(caller.clone())
            .spawn(move || {
                let z = counter();
                let z2 = Arc::clone(&z);
                z.call(move |_| submit_both(&z2));
            })
            .expect("a thread");
        if ended_within(Duration::from_secs(10), caller).is_none() {
            std::mem::forget((pool, x));
            panic!(
                "{parks:?}: the newest result's Drop waited for ever for the older one's permit"
            );
        }
    }
    let all_in = || on.lock().expect("not poisoned").len();
    if settled(Duration::from_secs(10), all_in, 3) != 3 {
        std::mem::forget((pool, x, keep_alive));
        panic!(
            "{parks:?}, served {served}: the newest result's Drop waited for ever for the older \
             one's permit"
        );
    }
    let on = on.lock().expect("not poisoned").clone();
    let on: Vec<_> = on
        .into_iter()
        .filter(|(what, _)| *what != "waited")
        .collect();
    assert_eq!(on[0].0, "waits", "{parks:?}: the newest first: {on:?}");
    if !served {
        assert_eq!(
            on[0].1, caller,
            "{parks:?}: dropped on the thread that ran it"
        );
    }
    assert_eq!(
        on[1],
        ("returns", "active-monitor-deliver".to_owned()),
        "{parks:?}: the rest handed on at the park"
    );
    assert_eq!(pool.available_permits(), 0, "the permit was taken");
    let calls = match parks {
        ParksIn::Drop => 0,
        _ => 1,
    };
    assert_eq!(x.call(|n| *n), calls);
}

#[test]
fn a_result_s_drop_waiting_for_an_older_result_s_permit_returns() {
    a_result_s_drop_waiting_for_an_older_result_s_permit(ParksIn::Drop, false);
}

#[test]
fn a_result_s_drop_waiting_after_a_call_for_an_older_result_s_permit_returns() {
    a_result_s_drop_waiting_for_an_older_result_s_permit(ParksIn::DropAfterACall, false);
}

#[test]
fn a_result_s_drop_waiting_in_a_body_for_an_older_result_s_permit_returns() {
    a_result_s_drop_waiting_for_an_older_result_s_permit(ParksIn::ABody, false);
}

#[test]
fn a_served_result_s_drop_waiting_for_an_older_result_s_permit_returns() {
    a_result_s_drop_waiting_for_an_older_result_s_permit(ParksIn::Drop, true);
}

#[test]
fn a_served_result_s_drop_waiting_in_a_body_for_an_older_result_s_permit_returns() {
    a_result_s_drop_waiting_for_an_older_result_s_permit(ParksIn::ABody, true);
}

/// Results nobody took whose `Drop`s do not park are all dropped on the
/// thread that ran their tasks, at its call's end, newest first.
#[test]
fn results_whose_drops_do_not_park_are_dropped_on_the_calling_thread() {
    struct Named(Arc<std::sync::Mutex<Vec<(u32, String)>>>, u32);
    impl Drop for Named {
        fn drop(&mut self) {
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            self.0.lock().expect("not poisoned").push((self.1, name));
        }
    }
    let z = counter();
    let on = Arc::new(std::sync::Mutex::new(Vec::new()));
    let caller = {
        let on = on.clone();
        std::thread::Builder::new()
            .name("the caller".into())
            .spawn(move || {
                let z2 = Arc::clone(&z);
                z.call(move |_| {
                    for i in 0..5 {
                        let on = on.clone();
                        drop(z2.submit(move |_| Named(on, i)));
                    }
                });
            })
            .expect("a thread")
    };
    assert_eq!(ended_within(Duration::from_secs(10), caller), Some(true));
    let on = on.lock().expect("not poisoned").clone();
    let want: Vec<_> = (0..5).rev().map(|i| (i, "the caller".to_owned())).collect();
    assert_eq!(on, want);
}

/// Thread 1 keeps, in its own body of `x`, a result nobody took whose
/// `Drop` returns it to `y` (a lease). After that body its serve of `x`
/// runs thread 2's task of `x`, called from thread 2's body of `y`, and
/// that task's body parks (a timed acquire). The park dropped thread 1's
/// lease there, inside thread 2's body: its call of `y` waited for thread
/// 2, which waited for its task of `x`, run by thread 1. Neither thread's
/// code calls `y` while holding `x`. Now a park inside a task body that a
/// serve runs from the queue hands what the thread kept before that body
/// began to a thread of its own, which drops it there.
#[test]
fn a_park_in_a_task_body_run_for_another_thread_keeps_this_thread_s_results() {
    let (x, y, z) = (counter(), counter(), counter());
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let (in_y, is_in_y) = std::sync::mpsc::channel::<()>();
    let second = call_x_from_y(&x, &y, gone, in_y);
    let first = {
        let (x, y) = (x.clone(), y.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                keep_a_lease(&y, &z);
                go.send(()).expect("the second thread waits");
                is_in_y.recv().expect("the second thread holds y");
                until_queued(&held, 1);
            });
        })
    };
    // Hung, both threads hold `x` and `y`: leave them.
    let hang = "the lease's call waited for ever inside another thread's body";
    both_end(first, second, (x, y.clone()), hang);
    came_back_once(&y);
}

/// The task body [`a_body_waiting_in_its_own_task_for_a_permit_it_kept`]
/// waits in: one of this thread's own, run on the spot on an idle
/// monitor.
#[derive(Clone, Copy, Debug)]
enum Own {
    /// `when_in`, its entry state current.
    WhenIn,
    /// `call_async`, polled once.
    CallAsync,
    /// `submit_async`, polled once.
    SubmitAsync,
}

/// A body of `x` keeps a result nobody took (a permit of `pool`: a `when`
/// of `y` its own call of `y` enabled), then makes a task of its own on an
/// idle `z`, which runs on the spot, and whose body waits for that permit.
/// The park there is the thread's own, inside its own body: the result is
/// dropped first, as a park in an inline `call` or `submit` drops it. The
/// thread's own task ran as one popped from `z`'s queue for another
/// thread (`running_queued`), whose parks keep what was kept before: the
/// body waited for ever.
fn a_body_waiting_in_its_own_task_for_a_permit_it_kept(own: Own) {
    let x = Monitor::new(());
    let y = Monitor::new(false);
    let z = Monitor::builder()
        .order(Order::Relaxed)
        .build_with_states(Door::Open, ());
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let body = std::thread::spawn(move || {
        x.call(|_| {
            drop({
                let pool = Arc::clone(&pool);
                y.when(|on: &bool| *on, move |_| Permit(pool))
            });
            y.call(|on| *on = true);
            let wait = {
                let pool = Arc::clone(&pool);
                move |_: &mut ()| pool.acquire().expect("open").forget()
            };
            match own {
                Own::WhenIn => z.when_in(Door::Open, move |d| (wait(d), Door::Open)).wait(),
                Own::CallAsync => {
                    let mut f = std::pin::pin!(z.call_async(wait));
                    let cx = &mut std::task::Context::from_waker(std::task::Waker::noop());
                    assert!(std::future::Future::poll(f.as_mut(), cx).is_ready());
                }
                Own::SubmitAsync => {
                    let mut f = std::pin::pin!(z.submit_async(wait));
                    let cx = &mut std::task::Context::from_waker(std::task::Waker::noop());
                    assert!(std::future::Future::poll(f.as_mut(), cx).is_ready());
                }
            }
        });
    });
    assert_eq!(
        ended_within(Duration::from_secs(10), body),
        Some(true),
        "{own:?}: the thread's own body waited for ever for a permit it kept"
    );
}

#[test]
fn a_when_in_run_on_the_spot_waiting_for_a_permit_its_thread_kept_returns() {
    a_body_waiting_in_its_own_task_for_a_permit_it_kept(Own::WhenIn);
}

#[test]
fn a_call_async_run_on_the_spot_waiting_for_a_permit_its_thread_kept_returns() {
    a_body_waiting_in_its_own_task_for_a_permit_it_kept(Own::CallAsync);
}

#[test]
fn a_submit_async_run_on_the_spot_waiting_for_a_permit_its_thread_kept_returns() {
    a_body_waiting_in_its_own_task_for_a_permit_it_kept(Own::SubmitAsync);
}

/// [`a_park_in_a_task_body_run_for_another_thread_keeps_this_thread_s_results`]
/// through a relay: the second thread's task of `x` is a `when`, filed,
/// and the first thread's inline call of `x` enables it, so the relay at
/// that call's end runs its body. Relays ran their bodies as the inline
/// call's own code: the park there dropped the first thread's lease, whose
/// call of `y` waited for the second thread, which waited for its `when`.
#[test]
fn a_park_in_a_relayed_body_run_for_another_thread_keeps_this_thread_s_results() {
    let (w, x, y, z) = (counter(), counter(), counter(), counter());
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let (filed, is_filed) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, y) = (x.clone(), y.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            y.call(|_| {
                // Idle `x`, its precondition false: filed.
                let enabled = x.when(|n: &u64| *n > 0, |_| park_briefly());
                filed.send(()).expect("the first thread waits");
                enabled.wait();
            });
        })
    };
    let first = {
        let (x, y) = (x.clone(), y.clone());
        std::thread::spawn(move || {
            w.call(move |_| {
                keep_a_lease(&y, &z);
                go.send(()).expect("the second thread waits");
                is_filed.recv().expect("the second thread holds y");
                // Inline (idle): its relay runs the second thread's `when`.
                x.call(|n| *n += 1);
            });
        })
    };
    // Hung, both threads hold `x`... and `y`: leave them.
    let hang = "the lease's call waited for ever inside another thread's relayed body";
    both_end(first, second, (x, y.clone()), hang);
    came_back_once(&y);
}

/// The task-waker form of
/// [`a_park_in_a_task_body_run_for_another_thread_keeps_this_thread_s_results`]:
/// the first thread's body of `x` enables a task's `when_async` on `v`
/// (the task's waker, which polls it on the spot, is kept on the thread),
/// and the task's next step calls `y`. Its serve of `x` then runs the
/// second thread's queued call of `x`, made from its body of `y`, whose
/// body parks: the park hook wakes the task there, and its call of `y`
/// waits for the second thread, which waits for its call of `x`. Kept
/// back instead, the next test's queued body, which waits for such a
/// task, would wait for ever: the waker goes to a thread of its own.
#[test]
fn a_park_in_a_task_body_run_for_another_thread_keeps_this_thread_s_task_wakers() {
    let (x, y) = (counter(), counter());
    let v = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let (stepped, has_stepped) = std::sync::mpsc::channel::<()>();
    let _task = {
        let y = y.clone();
        task_after_switch(&v, move || {
            y.call(|n| *n += 1);
            let _ = stepped.send(());
        })
    };
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let (in_y, is_in_y) = std::sync::mpsc::channel::<()>();
    let second = call_x_from_y(&x, &y, gone, in_y);
    let first = switch_in_x(&x, v, go, is_in_y);
    let hang = "the task's call of y waited for ever inside another thread's body";
    both_end(first, second, (x, y), hang);
    assert!(has_stepped.recv_timeout(Duration::from_secs(10)).is_ok());
}

/// What keeping the first thread's task wakers back in another thread's
/// queued body would cost: that body waits (an mpsc receive) for the next
/// step of a task the first thread's own body woke before the serve ran
/// the queued body. Kept back until the body ends, the waker would never
/// run: the body would wait for ever.
#[test]
fn a_queued_body_waiting_for_a_task_its_serving_thread_woke_returns() {
    let x = counter();
    let v = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let (tx, rx) = lockfree_sync::mpsc::channel::<u32>();
    let _task = task_after_switch(&v, move || {
        let _ = tx.send(7);
    });
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let (queuing, is_queuing) = std::sync::mpsc::channel::<()>();
    let second = {
        let x = x.clone();
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            queuing.send(()).expect("the first thread waits");
            // Queued: the first thread holds `x`, and runs it.
            x.call(move |_| assert_eq!(rx.recv(), Ok(7)));
        })
    };
    let first = switch_in_x(&x, v, go, is_queuing);
    let hang = "the queued body waited for ever for the task's message";
    both_end(first, second, x, hang);
}

/// The result form of the previous test: thread 1, in its own body of `x`,
/// has a fire-and-forget task of `z` take a lease from a pool (a semaphore
/// permit, its result: nobody takes it, and it is kept until thread 1
/// holds no monitor). Thread 2's call of `x` is queued meanwhile, and
/// thread 1's serve runs it after its own body: that body takes a lease
/// from the same pool, and parks for it. The lease thread 1 kept is the
/// only one: kept back until the body ends, it would never come.
#[test]
fn a_queued_body_waiting_for_a_lease_its_serve_kept_returns() {
    a_queued_body_waits_for_a_lease_its_serve_kept(|x, body| x.call(body));
}

/// [`a_queued_body_waiting_for_a_lease_its_serve_kept_returns`] with the
/// second thread's task submitted and waited for, not called: no hand-off
/// to the waiting thread can run it there, the serve runs it.
#[test]
fn a_queued_submit_waiting_for_a_lease_its_serve_kept_returns() {
    a_queued_body_waits_for_a_lease_its_serve_kept(|x, body| x.submit(body).wait());
}

/// A body the second thread enters `x` with.
type Body = Box<dyn FnOnce(&mut u64) + Send>;

fn a_queued_body_waits_for_a_lease_its_serve_kept(enter: fn(&Monitor<u64>, Body)) {
    let pool = Arc::new(lockfree_sync::Semaphore::new(1));
    let (x, z) = (counter(), counter());
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, pool) = (x.clone(), pool.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and runs it.
            enter(
                &x,
                Box::new(move |n| {
                    drop(pool.acquire().expect("open"));
                    *n += 1;
                }),
            );
        })
    };
    let first = {
        let (x, pool) = (x.clone(), pool.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                let z2 = z.clone();
                z.call(move |_| {
                    drop(z2.submit(move |_| pool.acquire_arc().expect("open")));
                });
                go.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    let hang = "the queued body waited for ever for the lease its serve kept";
    both_end(first, second, x.clone(), hang);
    assert_eq!(x.call(|n| *n), 1, "the second body ran once");
    assert_eq!(pool.available_permits(), 1, "the lease came back");
}

/// A thread's results handed to an `active-monitor-deliver` thread (see
/// [`a_park_in_a_task_body_run_for_another_thread_keeps_this_thread_s_results`])
/// were kept there on its own list and dropped one at a time: a `Drop`
/// that called `x` (idle: its body runs on that thread) and parked in that
/// body had the park hook drop the next result there, inside the body of
/// `x`, and that result's `Drop`, which calls `x` too, panicked as a call
/// from a task of its own monitor; the panic was dropped with the thread,
/// and the lease never came back. Each `Drop` there now runs as a body of
/// its own: a park inside it hands the rest to a further thread.
#[test]
fn a_park_in_a_drop_on_a_deliver_thread_does_not_drop_the_next_result_there() {
    struct Lease(Arc<Monitor<u64>>);
    impl Drop for Lease {
        fn drop(&mut self) {
            self.0.call(|n| {
                // A park of the family inside the body of `x`.
                park_briefly();
                *n += 1;
            });
        }
    }
    let (q, x, z) = (counter(), counter(), counter());
    let (go, gone) = std::sync::mpsc::channel::<()>();
    // Its park hands the first thread's two leases to a thread of their own.
    let second = queue_a_brief_park(&q, gone);
    let first = {
        let (q, x) = (q.clone(), x.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&q);
            q.call(move |_| {
                let z2 = z.clone();
                // Queued behind this body of `z`, run by its serve: both
                // results are kept until this thread holds no monitor.
                z.call(move |_| {
                    let (a, b) = (x.clone(), x.clone());
                    drop(z2.submit(move |_| Lease(a)));
                    drop(z2.submit(move |_| Lease(b)));
                });
                go.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    assert_eq!(ended_within(Duration::from_secs(10), first), Some(true));
    assert_eq!(ended_within(Duration::from_secs(10), second), Some(true));
    assert_eq!(
        settled(Duration::from_secs(10), || x.call(|n| *n), 2),
        2,
        "both leases came back, once each"
    );
}

/// On a deliver thread, a `Drop` that makes a call: that call's end
/// dropped every result still to come there, inside the `Drop`, taken out
/// of the list: a result whose `Drop` waits for what the first `Drop`
/// gives back after its call (a permit) waited for ever, and so did the
/// first. The results handed to that thread are dropped one at a time, by
/// its loop, and a call's end inside one of them drops only what it kept
/// itself.
#[test]
fn a_call_in_a_drop_on_a_deliver_thread_leaves_the_next_result_to_the_thread() {
    struct Returns(Arc<Monitor<u64>>, Arc<lockfree_sync::Semaphore>);
    impl Drop for Returns {
        fn drop(&mut self) {
            self.0.call(|n| *n += 1);
            self.1.add_permits(1);
        }
    }
    struct Waits(Arc<lockfree_sync::Semaphore>, std::sync::mpsc::Sender<()>);
    impl Drop for Waits {
        fn drop(&mut self) {
            self.0.acquire().expect("open").forget();
            let _ = self.1.send(());
        }
    }
    let (q, x, z) = (counter(), counter(), counter());
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let (got, has_got) = std::sync::mpsc::channel::<()>();
    let (go, gone) = std::sync::mpsc::channel::<()>();
    // Its park hands the first thread's two results to a thread of their own.
    let second = queue_a_brief_park(&q, gone);
    let first = {
        let (q, x) = (q.clone(), x.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&q);
            q.call(move |_| {
                let z2 = z.clone();
                // Queued behind this body of `z`, run by its serve: both
                // results are kept until this thread holds no monitor.
                z.call(move |_| {
                    let (a, b) = (pool.clone(), pool.clone());
                    drop(z2.submit(move |_| Waits(a, got)));
                    // The newest: dropped first.
                    drop(z2.submit(move |_| Returns(x, b)));
                });
                go.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    assert_eq!(ended_within(Duration::from_secs(10), first), Some(true));
    assert_eq!(ended_within(Duration::from_secs(10), second), Some(true));
    assert!(
        has_got.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the second result's Drop waited for ever inside the first's"
    );
    assert_eq!(x.call(|n| *n), 1);
}

/// What a lease kept by the first thread of
/// [`a_lease_s_drop_on_its_own_thread_waits_for_what_the_queued_body_feeds`]
/// waits for, in its `Drop`, from the body that parked.
#[derive(Clone, Copy, Debug)]
enum Feed {
    /// An mpsc message the body sends.
    Mpsc,
    /// A CSP rendezvous: the body's send parks until the `Drop` receives.
    Csp,
    /// A semaphore permit the body adds.
    Semaphore,
}

/// A lease returned in steps, each waiting for the body that parked: it
/// first lets the body on (`go`), then waits for what the body feeds it,
/// then books itself back on `y` and returns a permit of `pool`, which the
/// body waits for last.
struct PingPong {
    go: Arc<lockfree_sync::Semaphore>,
    feed: FeedRx,
    y: Arc<Monitor<u64>>,
    pool: Arc<lockfree_sync::Semaphore>,
    dropped_on: Arc<std::sync::Mutex<Vec<String>>>,
}

enum FeedRx {
    Mpsc(std::sync::Mutex<lockfree_sync::mpsc::Receiver<u32>>),
    Csp(std::sync::Mutex<lockfree_sync::csp::Receiver<u32>>),
    Semaphore(Arc<lockfree_sync::Semaphore>),
}

impl Drop for PingPong {
    fn drop(&mut self) {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        self.dropped_on.lock().expect("not poisoned").push(name);
        self.go.add_permits(1);
        match &self.feed {
            FeedRx::Mpsc(rx) => assert_eq!(rx.lock().expect("once").recv(), Ok(7)),
            FeedRx::Csp(rx) => assert_eq!(rx.lock().expect("once").recv(), Ok(7)),
            FeedRx::Semaphore(s) => s.acquire().expect("open").forget(),
        }
        self.y.call(|n| *n += 1);
        self.pool.add_permits(1);
    }
}

/// One instance of the composition: the first thread keeps a `PingPong`
/// lease (a result nobody took, in its body of `x`), and its serve of `x`
/// runs the second thread's queued call, whose body waits for the lease
/// to let it on, feeds it, and waits for its permit. The park hands the
/// lease to a thread of its own, whose `Drop` and the body take turns.
/// Returns the two threads (joined by the caller's watchdog) and checks.
fn ping_pong(feed: Feed) -> (Vec<std::thread::JoinHandle<()>>, impl FnOnce() + Send) {
    let (x, y, z) = (counter(), counter(), counter());
    let go = Arc::new(lockfree_sync::Semaphore::new(0));
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let dropped_on = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (mpsc_tx, mpsc_rx) = lockfree_sync::mpsc::channel::<u32>();
    let (mut csp_tx, csp_rx) = lockfree_sync::csp::channel::<u32>();
    let fed = Arc::new(lockfree_sync::Semaphore::new(0));
    let rx = match feed {
        Feed::Mpsc => FeedRx::Mpsc(std::sync::Mutex::new(mpsc_rx)),
        Feed::Csp => FeedRx::Csp(std::sync::Mutex::new(csp_rx)),
        Feed::Semaphore => FeedRx::Semaphore(fed.clone()),
    };
    let (start, started) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, go, pool) = (x.clone(), go.clone(), pool.clone());
        std::thread::spawn(move || {
            started.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and its serve runs it
            // (submitted: no hand-off to this thread).
            x.submit(move |n| {
                go.acquire().expect("open").forget();
                match feed {
                    Feed::Mpsc => mpsc_tx.send(7).expect("the lease receives"),
                    Feed::Csp => csp_tx.send(7).expect("the lease receives"),
                    Feed::Semaphore => fed.add_permits(1),
                }
                pool.acquire().expect("open").forget();
                *n += 1;
            })
            .wait();
        })
    };
    let first = {
        let (x, y, pool, dropped_on) = (x.clone(), y.clone(), pool.clone(), dropped_on.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                let z2 = z.clone();
                let lease = std::sync::Mutex::new(Some(PingPong {
                    go,
                    feed: rx,
                    y,
                    pool,
                    dropped_on,
                }));
                // Queued behind this body of `z`, run by its serve: the
                // lease is kept until this thread holds no monitor.
                z.call(move |_| {
                    drop(z2.submit(move |_| lease.lock().expect("once").take()));
                });
                start.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    let check = move || {
        assert_eq!(x.call(|n| *n), 1, "{feed:?}: the second body ran once");
        assert_eq!(
            y.call(|n| *n),
            1,
            "{feed:?}: the lease was booked back once"
        );
        assert_eq!(pool.available_permits(), 0, "{feed:?}: the body took it");
        let on = dropped_on.lock().expect("not poisoned").clone();
        assert_eq!(
            on,
            ["active-monitor-deliver"],
            "{feed:?}: dropped once, there"
        );
    };
    (vec![first, second], check)
}

fn a_lease_s_drop_on_its_own_thread_waits_for_what_the_queued_body_feeds(feed: Feed) {
    let (threads, check) = ping_pong(feed);
    for t in threads {
        assert_eq!(
            ended_within(Duration::from_secs(10), t),
            Some(true),
            "{feed:?}: the lease and the body waited for each other for ever"
        );
    }
    check();
}

#[test]
fn a_lease_s_drop_on_its_own_thread_waits_for_an_mpsc_message_the_queued_body_sends() {
    a_lease_s_drop_on_its_own_thread_waits_for_what_the_queued_body_feeds(Feed::Mpsc);
}

#[test]
fn a_lease_s_drop_on_its_own_thread_takes_a_csp_rendezvous_the_queued_body_offers() {
    a_lease_s_drop_on_its_own_thread_waits_for_what_the_queued_body_feeds(Feed::Csp);
}

#[test]
fn a_lease_s_drop_on_its_own_thread_waits_for_a_permit_the_queued_body_adds() {
    a_lease_s_drop_on_its_own_thread_waits_for_what_the_queued_body_feeds(Feed::Semaphore);
}

/// Several threads hand leases to threads of their own at once, each pair
/// with its own monitors, beside 50 busy threads: every lease and body
/// takes its turns, and every lease comes back once.
#[test]
fn several_threads_hand_their_leases_on_at_once_beside_busy_threads() {
    let _busy = sync_core::testing::BusyThreads::start(50);
    let runs: Vec<_> = [Feed::Mpsc, Feed::Csp, Feed::Semaphore, Feed::Csp]
        .into_iter()
        .map(ping_pong)
        .collect();
    let mut checks = Vec::new();
    let mut hung = false;
    for (threads, check) in runs {
        for t in threads {
            hung |= ended_within(Duration::from_secs(15), t) != Some(true);
        }
        checks.push(check);
    }
    assert!(!hung, "a lease and its body waited for each other for ever");
    for check in checks {
        check();
    }
}

/// A chain: the first thread hands two leases to a thread of its own,
/// which drops the newer first. That `Drop` takes `q` idle and holds it
/// while a third thread's call of `q` queues; its serve of `q` then runs
/// that call, whose body parks waiting for the permit the older lease
/// returns: the deliver thread runs a body for another thread in turn,
/// and hands the older lease on to a second thread of its own. Kept back
/// there, the permit would never come.
#[test]
fn a_deliver_thread_that_parks_in_another_thread_s_body_hands_its_rest_on() {
    struct Hold {
        q: Arc<Monitor<u64>>,
        in_q: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
        on: Arc<std::sync::Mutex<Vec<(String, std::thread::ThreadId)>>>,
    }
    impl Drop for Hold {
        fn drop(&mut self) {
            let me = std::thread::current();
            let name = me.name().unwrap_or("?").to_owned();
            self.on.lock().expect("not poisoned").push((name, me.id()));
            let in_q = self.in_q.lock().expect("once").take().expect("once");
            let held = Arc::clone(&self.q);
            self.q.call(move |n| {
                *n += 1;
                in_q.send(()).expect("the third thread waits");
                until_queued(&held, 1);
            });
        }
    }
    struct Give {
        pool: Arc<lockfree_sync::Semaphore>,
        on: Arc<std::sync::Mutex<Vec<(String, std::thread::ThreadId)>>>,
    }
    impl Drop for Give {
        fn drop(&mut self) {
            let me = std::thread::current();
            let name = me.name().unwrap_or("?").to_owned();
            self.on.lock().expect("not poisoned").push((name, me.id()));
            self.pool.add_permits(1);
        }
    }
    let (x, q, z) = (counter(), counter(), counter());
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let on = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (in_q, is_in_q) = std::sync::mpsc::channel::<()>();
    let (start, started) = std::sync::mpsc::channel::<()>();
    let third = {
        let (q, pool) = (q.clone(), pool.clone());
        std::thread::spawn(move || {
            is_in_q.recv().expect("the deliver thread holds q");
            // Queued: the deliver thread holds `q`, and its serve runs it.
            q.submit(move |n| {
                pool.acquire().expect("open").forget();
                *n += 10;
            })
            .wait();
        })
    };
    let second = {
        let x = x.clone();
        std::thread::spawn(move || {
            started.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and runs it; it parks.
            x.submit(|n| {
                park_briefly();
                *n += 1;
            })
            .wait();
        })
    };
    let first = {
        let (x, q, pool, on) = (x.clone(), q.clone(), pool.clone(), on.clone());
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                let z2 = z.clone();
                let give = Give {
                    pool,
                    on: on.clone(),
                };
                let hold = Hold {
                    q,
                    in_q: std::sync::Mutex::new(Some(in_q)),
                    on,
                };
                // Kept in this order: the newer (`hold`) is dropped first.
                z.call(move |_| {
                    drop(z2.submit(move |_| give));
                    drop(z2.submit(move |_| hold));
                });
                start.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    let ended: Vec<_> = [first, second, third]
        .into_iter()
        .map(|t| ended_within(Duration::from_secs(10), t))
        .collect();
    if ended.iter().any(Option::is_none) {
        std::mem::forget((x, q));
        panic!("the chain waited for ever: {ended:?}");
    }
    assert_eq!(ended, [Some(true); 3]);
    assert_eq!(x.call(|n| *n), 1);
    assert_eq!(
        q.call(|n| *n),
        11,
        "the hold's call and the third body, once each"
    );
    assert_eq!(
        pool.available_permits(),
        0,
        "the third body took the permit"
    );
    let on = on.lock().expect("not poisoned").clone();
    assert_eq!(on.len(), 2, "each lease dropped once: {on:?}");
    assert!(
        on.iter().all(|(name, _)| name == "active-monitor-deliver"),
        "{on:?}"
    );
    assert_ne!(
        on[0].1, on[1].1,
        "the older lease went on to a second thread"
    );
}

/// The first thread holds `x`; a caller's `call` of `x` queues and sleeps;
/// then the second thread submits to `x` a body that waits for that
/// caller's next step, once its call has returned (a permit it adds). The
/// first thread's serve runs the caller's task (its token set, its unpark
/// kept until the serve lets go of `x`: made under the monitor it would
/// lengthen every other caller's wait), then the second thread's body,
/// which parks. Only task wakers and results are delivered before a park:
/// the sleeping caller was never unparked, and the body waited for it for
/// ever, with `x`.
#[test]
fn a_queued_body_waiting_for_a_caller_its_serve_ran_returns() {
    let x = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    a_body_waiting_for_a_caller_its_holder_ran(x, |x, hold| {
        let x = x.clone();
        std::thread::spawn(move || x.call(move |_| hold()))
    });
}

/// [`a_queued_body_waiting_for_a_caller_its_serve_ran_returns`] on a
/// served monitor: its server thread runs a task that holds `x` while the
/// caller queues and sleeps and the second thread submits its body; the
/// server then runs the caller's task (its unpark kept until the stint
/// ends), then the body, which parks.
#[test]
fn a_served_body_waiting_for_a_caller_its_server_ran_returns() {
    // The server runs the tasks, whatever the load (the override is the
    // process's: one such test at a time).
    let _one = sync_core::testing::one_at_a_time();
    active_monitor::set_server_limit(1000);
    active_monitor::__test_set_saturation_override(Some(false));
    let x = Monitor::builder().order(Order::Relaxed).build_served(0u64);
    assert!(x.has_server());
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        a_body_waiting_for_a_caller_its_holder_ran(x, |x, hold| {
            let x = x.clone();
            std::thread::spawn(move || x.submit(move |_| hold()).wait())
        });
    }));
    active_monitor::__test_set_saturation_override(None);
    if let Err(p) = ran {
        std::panic::resume_unwind(p);
    }
}

/// The composition of the two tests above: `first` starts a thread whose
/// task of `x` (a `call`, or a task the server runs) runs `hold`, which
/// lets the caller and then the second thread queue behind it.
fn a_body_waiting_for_a_caller_its_holder_ran<M>(
    x: M,
    first: impl FnOnce(&M, Box<dyn FnOnce() + Send>) -> std::thread::JoinHandle<()>,
) where
    M: std::ops::Deref<Target = Monitor<u64>> + Clone + Send + 'static,
{
    let sem = Arc::new(lockfree_sync::Semaphore::new(0));
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let (go2, gone2) = std::sync::mpsc::channel::<()>();
    let caller = {
        let (x, sem) = (x.clone(), sem.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: `x` is held; this thread sleeps.
            x.call(|n| *n += 1);
            sem.add_permits(1);
        })
    };
    let second = {
        let (x, sem) = (x.clone(), sem.clone());
        std::thread::spawn(move || {
            gone2.recv().expect("the first thread goes on");
            x.submit(move |n| {
                sem.acquire().expect("open").forget();
                *n += 10;
            })
            .wait();
        })
    };
    let held = x.clone();
    let first = first(
        &x,
        Box::new(move || {
            go.send(()).expect("the caller waits");
            // The caller's task first (the second thread's body, run
            // before it, would wait for it for ever), and the caller
            // asleep (its wait parks soon after it queues).
            until_queued(&held, 1);
            std::thread::sleep(Duration::from_millis(150));
            go2.send(()).expect("the second thread waits");
            until_queued(&held, 2);
        }),
    );
    let ended: Vec<_> = [first, caller, second]
        .into_iter()
        .map(|t| ended_within(Duration::from_secs(10), t))
        .collect();
    if ended.iter().any(Option::is_none) {
        std::mem::forget(x);
        panic!("the body waited for ever for a caller whose unpark its serve kept: {ended:?}");
    }
    assert_eq!(ended, [Some(true); 3]);
    assert_eq!(x.call(|n| *n), 11);
}

/// A 1 ms timed wait in a body run for another thread, whose park hands
/// what the serving thread kept to a thread of its own (a thread start
/// before the wait begins), beside 50 busy threads: it returns within
/// 50 ms (the median of 20 tries), and every result kept is dropped once.
#[test]
fn a_timed_wait_that_hands_kept_results_on_returns_on_time_beside_busy_threads() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    struct Counted(Arc<AtomicUsize>, Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
            if std::thread::current().name() == Some("active-monitor-deliver") {
                self.1.fetch_add(1, SeqCst);
            }
        }
    }
    let _busy = sync_core::testing::BusyThreads::start(50);
    let (x, z) = (counter(), counter());
    let dropped = Arc::new(AtomicUsize::new(0));
    let elsewhere = Arc::new(AtomicUsize::new(0));
    let times = Arc::new(std::sync::Mutex::new(Vec::new()));
    const ROUNDS: usize = 20;
    for _ in 0..ROUNDS {
        let (go, gone) = std::sync::mpsc::channel::<()>();
        let second = {
            let (x, times2) = (x.clone(), times.clone());
            std::thread::spawn(move || {
                gone.recv().expect("the first thread goes on");
                x.submit(move |n| {
                    let empty = lockfree_sync::Semaphore::new(0);
                    let t = std::time::Instant::now();
                    assert!(empty.try_acquire_for(Duration::from_millis(1)).is_err());
                    let took = t.elapsed();
                    times2.lock().expect("not poisoned").push(took);
                    *n += 1;
                })
                .wait();
            })
        };
        let first = {
            let (x, z, dropped, elsewhere) =
                (x.clone(), z.clone(), dropped.clone(), elsewhere.clone());
            std::thread::spawn(move || {
                let held = Arc::clone(&x);
                x.call(move |_| {
                    let z2 = z.clone();
                    z.call(move |_| {
                        for _ in 0..3 {
                            let c = Counted(dropped.clone(), elsewhere.clone());
                            drop(z2.submit(move |_| c));
                        }
                    });
                    go.send(()).expect("the second thread waits");
                    until_queued(&held, 1);
                });
            })
        };
        assert_eq!(ended_within(Duration::from_secs(15), first), Some(true));
        assert_eq!(ended_within(Duration::from_secs(15), second), Some(true));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while dropped.load(SeqCst) < 3 * ROUNDS {
        assert!(std::time::Instant::now() < deadline, "kept results lost");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(dropped.load(SeqCst), 3 * ROUNDS, "each dropped once");
    assert_eq!(x.call(|n| *n), ROUNDS as u64);
    let mut all = times.lock().expect("not poisoned").clone();
    all.sort();
    let median = all[all.len() / 2];
    eprintln!(
        "1 ms timed waits {all:?}; {} of {} results dropped on a deliver thread",
        elsewhere.load(SeqCst),
        3 * ROUNDS
    );
    // The median: a few tries a scheduling round late say nothing about
    // the thread start (the machine's other load makes as many).
    assert!(
        median < Duration::from_millis(50),
        "the median 1 ms wait took {median:?}: {all:?}"
    );
}

/// The lock a queued body of [`a_queued_body_waiting_on_a_lock_a_woken_task_holds`]
/// waits on.
#[derive(Clone, Copy, Debug)]
enum Lock {
    Lockfree,
    Ast,
    Adaptive,
}

/// A task (polled on the spot by its waker) holds a lock of another crate
/// across its wait for a `when_async` that the first thread's body of `x`
/// enables (its waker kept on that thread); the first thread's serve of
/// `x` then runs the second thread's queued body, which waits for that
/// lock. The park hands the waker to a thread of its own, where the task
/// runs on and lets go of the lock; the body gets it.
fn a_queued_body_waiting_on_a_lock_a_woken_task_holds(lock: Lock) {
    let x = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let v = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let mutex = Arc::new(lockfree_sync::Mutex::new(0u32));
    let ast = Arc::new(ast_mutex::AstMutex::new(Door::Open, 0u32));
    let adaptive = Arc::new(adaptive_lock::AdaptiveMutex::new(0u32));
    let (stepped_on, stepped) = std::sync::mpsc::channel::<std::thread::ThreadId>();
    let task = {
        let (v, mutex, ast, adaptive) = (v.clone(), mutex.clone(), ast.clone(), adaptive.clone());
        sync_core::testing::InlineTask::spawn(async move {
            let guard: Box<dyn std::any::Any + Send> = match lock {
                Lock::Lockfree => Box::new(mutex.lock_arc()),
                Lock::Ast => Box::new(ast.enter_arc(Door::Open)),
                Lock::Adaptive => Box::new(adaptive.lock_arc()),
            };
            v.when_async(|on: &bool| *on, |_| ()).await;
            drop(guard);
            let _ = stepped_on.send(std::thread::current().id());
        })
    };
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, mutex, ast, adaptive) = (x.clone(), mutex.clone(), ast.clone(), adaptive.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and its serve runs it.
            x.submit(move |n| {
                match lock {
                    Lock::Lockfree => *mutex.lock() += 1,
                    Lock::Ast => *ast.enter(Door::Open) += 1,
                    Lock::Adaptive => *adaptive.lock() += 1,
                }
                *n += 1;
            })
            .wait();
        })
    };
    let first = {
        let x = x.clone();
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                // The task's waker is kept until this thread's next park.
                v.call(|on| *on = true);
                go.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    let first_id = first.thread().id();
    let first = ended_within(Duration::from_secs(10), first);
    let second = ended_within(Duration::from_secs(10), second);
    if first.is_none() || second.is_none() {
        std::mem::forget(x);
        panic!("{lock:?}: the queued body waited for ever for the lock the woken task holds");
    }
    assert_eq!((first, second), (Some(true), Some(true)));
    // Its drop of the guard hands the lock to the body, which may return
    // (and both threads end) before the task's poll does.
    assert!(
        task.done_within(Duration::from_secs(10)),
        "{lock:?}: the task ran to its end"
    );
    let on = stepped
        .recv_timeout(Duration::from_secs(1))
        .expect("stepped");
    assert_ne!(on, first_id, "{lock:?}: woken on a thread of its own");
    assert_eq!(x.call(|n| *n), 1);
    let taken = match lock {
        Lock::Lockfree => *mutex.lock(),
        Lock::Ast => *ast.enter(Door::Open),
        Lock::Adaptive => *adaptive.lock(),
    };
    assert_eq!(taken, 1, "{lock:?}: the body took the lock once");
}

#[test]
fn a_queued_body_waiting_on_a_lockfree_mutex_a_woken_task_holds_returns() {
    a_queued_body_waiting_on_a_lock_a_woken_task_holds(Lock::Lockfree);
}

#[test]
fn a_queued_body_waiting_on_an_ast_mutex_a_woken_task_holds_returns() {
    a_queued_body_waiting_on_a_lock_a_woken_task_holds(Lock::Ast);
}

#[test]
fn a_queued_body_waiting_on_an_adaptive_mutex_a_woken_task_holds_returns() {
    a_queued_body_waiting_on_a_lock_a_woken_task_holds(Lock::Adaptive);
}

/// [`a_queued_body_waiting_for_a_caller_its_serve_ran_returns`] through a
/// relay: the body that waits for the caller's next step is a `when`
/// filed by another thread, which the caller's task enables; the serve at
/// the end of the first thread's inline call runs the caller's task, then
/// relays the `when`, whose body parks.
#[test]
fn a_relayed_body_waiting_for_a_caller_its_serve_ran_returns() {
    let x = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let sem = Arc::new(lockfree_sync::Semaphore::new(0));
    let (filed, is_filed) = std::sync::mpsc::channel::<()>();
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let waiter = {
        let (x, sem) = (x.clone(), sem.clone());
        std::thread::spawn(move || {
            // Idle `x`, its precondition false: filed.
            let enabled = x.when(
                |n: &u64| *n >= 1,
                move |n| {
                    sem.acquire().expect("open").forget();
                    *n += 10;
                },
            );
            filed.send(()).expect("the first thread waits");
            enabled.wait();
        })
    };
    is_filed.recv().expect("filed");
    let caller = {
        let (x, sem) = (x.clone(), sem.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`; this thread sleeps.
            x.call(|n| *n += 1);
            sem.add_permits(1);
        })
    };
    let first = {
        let x = x.clone();
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                go.send(()).expect("the caller waits");
                // The caller's task is queued (else the caller runs it, and
                // the relayed body, on its thread, waits for its next step
                // for ever), and the caller asleep (its wait parks soon
                // after it queues).
                until_queued(&held, 1);
                std::thread::sleep(Duration::from_millis(200));
            });
        })
    };
    let ended: Vec<_> = [first, caller, waiter]
        .into_iter()
        .map(|t| ended_within(Duration::from_secs(10), t))
        .collect();
    if ended.iter().any(Option::is_none) {
        std::mem::forget(x);
        panic!(
            "the relayed body waited for ever for a caller whose unpark its serve kept: {ended:?}"
        );
    }
    assert_eq!(ended, [Some(true); 3]);
    assert_eq!(x.call(|n| *n), 11);
}

/// [`a_queued_body_waiting_for_a_task_its_serving_thread_woke_returns`]
/// with the task on a tokio current-thread runtime (its waker only
/// schedules it; the runtime's thread polls it): the first thread keeps
/// the waker, its serve runs the second thread's queued body, which parks
/// for the task's permit; the park hands the waker on, and the runtime
/// runs the task.
#[test]
fn a_queued_body_waiting_for_a_current_thread_runtime_task_its_serve_woke_returns() {
    let x = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let v = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let pool = Arc::new(lockfree_sync::Semaphore::new(0));
    let (filed, is_filed) = std::sync::mpsc::channel::<()>();
    let runtime = {
        let (v, pool) = (v.clone(), pool.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let enabled = Box::pin(v.when_async(|on: &bool| *on, |_| ()));
                sync_core::testing::pending_then(enabled, filed).await;
                pool.add_permits(1);
            });
        })
    };
    is_filed.recv().expect("the task filed its wait");
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let second = {
        let (x, pool) = (x.clone(), pool.clone());
        std::thread::spawn(move || {
            gone.recv().expect("the first thread goes on");
            // Queued: the first thread holds `x`, and its serve runs it.
            x.submit(move |n| {
                pool.acquire().expect("open").forget();
                *n += 1;
            })
            .wait();
        })
    };
    let first = {
        let x = x.clone();
        std::thread::spawn(move || {
            let held = Arc::clone(&x);
            x.call(move |_| {
                // The task's waker is kept until this thread's next park.
                v.call(|on| *on = true);
                go.send(()).expect("the second thread waits");
                until_queued(&held, 1);
            });
        })
    };
    let ended: Vec<_> = [first, second, runtime]
        .into_iter()
        .map(|t| ended_within(Duration::from_secs(10), t))
        .collect();
    if ended.iter().any(Option::is_none) {
        std::mem::forget(x);
        panic!("the queued body waited for ever for the runtime's task: {ended:?}");
    }
    assert_eq!(ended, [Some(true); 3]);
    assert_eq!(x.call(|n| *n), 1);
}
