//! Wakers that run their task on the spot (an inline executor), so that a
//! task whose precondition a holder made true runs its body and, letting
//! go of the monitor, wakes the next waiting task inside the waker that
//! woke it: one call then reaches every waiting task. Those wakeups must
//! not nest one inside the other, or the stack grows with the number of
//! waiting tasks and the process aborts on a stack overflow.
#![cfg(not(loom))]

use std::sync::Arc;

use active_monitor::Monitor;
use sync_core::testing::{InlineTask, on_small_stack};

/// Waiting tasks: nested, each wakeup took kilobytes of a debug build's
/// stack, so this many overflowed the test thread's.
const TASKS: usize = 5_000;
/// The test thread's stack: room for a few dozen nested wakeups, not for
/// one per task.
const STACK: usize = 4 << 20;

#[test]
fn a_call_reaching_every_waiting_inline_when_async_keeps_the_stack_flat() {
    on_small_stack("when_async", STACK, || {
        let m = Arc::new(Monitor::new(usize::MAX));
        // Task `i` waits for the count to be `i` and makes it `i + 1`.
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let m = Arc::clone(&m);
                InlineTask::spawn(async move {
                    m.when_async(move |n| *n == i, |n| *n += 1).await;
                })
            })
            .collect();
        // Enables the first, whose body enables the next...
        m.call(|n| *n = 0);
        assert_eq!(m.call(|n| *n), TASKS, "every task ran once");
        assert!(tasks.iter().all(|t| t.is_done()));
    });
}

#[test]
fn a_call_reaching_every_waiting_inline_task_that_calls_again_keeps_the_stack_flat() {
    on_small_stack("when then call", STACK, || {
        let m = Arc::new(Monitor::new(usize::MAX));
        // Task `i` waits for the count to be `i`, then makes it `i + 1`
        // with a call of its own.
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let m = Arc::clone(&m);
                InlineTask::spawn(async move {
                    m.when_async(move |n| *n == i, |_| ()).await;
                    m.call(|n| *n += 1);
                })
            })
            .collect();
        m.call(|n| *n = 0);
        assert_eq!(m.call(|n| *n), TASKS, "every task ran once");
        assert!(tasks.iter().all(|t| t.is_done()));
    });
}

/// A thread inside a `call` of a monitor, blocked in its body (which adds
/// 1) until [`release`](Self::release).
struct Holder {
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Holder {
    /// Returns once the thread holds `m`.
    fn hold(m: &Arc<Monitor<u64>>) -> Self {
        let (held, is_held) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let m = Arc::clone(m);
        let thread = std::thread::spawn(move || {
            m.call(move |n| {
                held.send(()).expect("the test waits");
                wait.recv().expect("the test lets go");
                *n += 1;
            });
        });
        is_held.recv().expect("the holder runs");
        Self { go, thread }
    }

    /// Lets the body end; the thread, to join.
    fn release(self) -> std::thread::JoinHandle<()> {
        self.go.send(()).expect("the holder waits");
        self.thread
    }
}

/// A task on an inline executor awaits a completion that another thread's
/// holder fills, then calls the monitor. Woken while that holder still
/// held the monitor, its poll ran there: its `call` met the monitor held
/// by its own thread and panicked ("from a task of the same monitor"),
/// which lost the task and resumed in the holder's own, unrelated `call`.
/// The completion's waker, like an awaiter's, runs once the holder has let
/// go of the monitor: the task's `call` then finds it free.
#[test]
fn a_completion_whose_waker_polls_on_the_spot_finds_the_monitor_free() {
    // Each way of awaiting a task the holder runs: a completion, an async
    // submission's result, an OR's completion and an AND's.
    for form in 0..4 {
        let m = Arc::new(Monitor::new(0u64));
        let holder = Holder::hold(&m);
        // Queued behind the holder's call: the holder runs it, then wakes
        // this task, which calls the monitor.
        let task = {
            let m = Arc::clone(&m);
            InlineTask::spawn(async move {
                match form {
                    0 => m.submit(|n| *n += 10).await.expect("ran"),
                    1 => m.call_async(|n| *n += 10).await,
                    2 => {
                        let other = Monitor::new(false);
                        let either = active_monitor::or((
                            m.op(|_| true, |n| *n += 10),
                            other.op(|ready| *ready, |_| ()),
                        ))
                        .expect("two monitors");
                        assert_eq!(either.await.expect("ran").0, 0, "the first ran");
                    }
                    _ => {
                        // The other operand runs at once; the holder runs
                        // this one last, and completes the AND.
                        let other = Monitor::new(0u64);
                        let both = active_monitor::and((
                            m.op(|_| true, |n| *n += 10),
                            other.op(|_| true, |_| ()),
                        ))
                        .expect("two monitors");
                        assert_eq!(both.await.expect("ran").len(), 2);
                    }
                }
                m.call(|n| *n += 100);
            })
        };
        assert!(
            !task.is_done(),
            "form {form}: the task waits for the holder"
        );
        assert!(
            holder.release().join().is_ok(),
            "form {form}: the holder's call unwound with the task's panic"
        );
        assert!(task.is_done(), "form {form}: the task did not finish");
        assert_eq!(m.call(|n| *n), 111, "form {form}");
    }
}

/// The same for a task's program-order wait: in a [`worker`] scope under
/// strict order, a submission to another monitor awaits the task's earlier
/// one, which another thread's holder runs. Notified under that holder, the
/// task went on in its waker and its `call` of the first monitor panicked.
///
/// [`worker`]: active_monitor::worker
#[test]
fn a_program_order_wait_whose_waker_polls_on_the_spot_finds_the_monitor_free() {
    let (m, other) = (Arc::new(Monitor::new(0u64)), Arc::new(Monitor::new(0u64)));
    let holder = Holder::hold(&m);
    let task = {
        let (m, other) = (Arc::clone(&m), Arc::clone(&other));
        InlineTask::spawn(active_monitor::worker(async move {
            // Queued behind the holder's call, and kept outstanding.
            let _earlier = m.submit_async(|n| *n += 10).completion().await;
            // Rule 3: awaits the earlier task, which the holder runs.
            other.submit_async(|n| *n += 1).await;
            m.call(|n| *n += 100);
        }))
    };
    assert!(!task.is_done(), "the task waits for the holder");
    assert!(
        holder.release().join().is_ok(),
        "the holder's call unwound with the task's panic"
    );
    assert!(task.is_done(), "the task did not finish");
    assert_eq!((m.call(|n| *n), other.call(|n| *n)), (111, 1));
}

/// Runs `f` on a thread; `None` if it has not returned within 10 s (a
/// hang, reported instead of hanging the test).
fn within_10s<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10)).ok()
}

/// The same for an async producer waiting for queue space: woken by the
/// holder while it held the monitor, its task was queued there, and its
/// `call` then queued a task for that very thread and waited for it: the
/// holder's thread hung for ever, and the monitor with it.
#[test]
fn a_producer_whose_waker_polls_on_the_spot_finds_the_monitor_free() {
    let m = Arc::new(
        Monitor::builder()
            .capacity(2)
            .order(active_monitor::Order::Relaxed)
            .build(0u64),
    );
    let holder = Holder::hold(&m);
    // The queue is full: the task waits for space.
    drop((m.submit(|n| *n += 1000), m.submit(|n| *n += 1000)));
    let task = {
        let m = Arc::clone(&m);
        InlineTask::spawn(async move {
            let _queued = m.submit_async(|n| *n += 10).completion().await;
            m.call(|n| *n += 100);
        })
    };
    assert!(!task.is_done(), "the task waits for space");
    let holder = holder.release();
    let joined = within_10s(move || holder.join().is_ok());
    assert_eq!(joined, Some(true), "the holder hung, or unwound");
    assert!(task.is_done(), "the task did not finish");
    assert_eq!(m.call(|n| *n), 2111);
}

/// The tests' exclusive lock, and a served monitor (the saturation verdict
/// held at "not saturated") whose server is busy in a task that waits for
/// the returned sender (and then adds 1).
fn served_with_a_busy_server(
    build: impl FnOnce() -> active_monitor::Served<u64>,
) -> (
    std::sync::MutexGuard<'static, ()>,
    active_monitor::Served<u64>,
    std::sync::mpsc::Sender<()>,
) {
    use std::sync::mpsc;

    let one = sync_core::testing::one_at_a_time();
    active_monitor::set_server_limit(1000);
    active_monitor::__test_set_saturation_override(Some(false));
    let m = build();
    assert!(m.has_server());
    let (held, go) = (mpsc::channel(), mpsc::channel::<()>());
    // The server runs this, and waits.
    drop(m.submit(move |n| {
        held.0.send(()).expect("the test waits");
        go.1.recv().expect("the test lets go");
        *n += 1;
    }));
    held.1.recv().expect("the server runs");
    (one, m, go.0)
}

/// On a served monitor the server woke such a producer in its stint: the
/// producer's `call` waited for the server, on the server's own thread,
/// and the monitor never served again. Its waker now runs once the server
/// has let go of the monitor, as a task of the monitor: the `call` panics
/// there (dropped with the server's other panics), as a call from a task
/// of the monitor does, and the monitor keeps serving.
#[test]
fn a_served_monitor_keeps_serving_whatever_a_producers_waker_calls() {
    let (_one, m, go) = served_with_a_busy_server(|| {
        Monitor::builder()
            .capacity(2)
            .order(active_monitor::Order::Relaxed)
            .build_served(0u64)
    });
    drop((m.submit(|n| *n += 1000), m.submit(|n| *n += 1000)));
    let task = {
        let m = m.clone();
        InlineTask::spawn(async move {
            let _queued = m.submit_async(|n| *n += 10).completion().await;
            m.call(|n| *n += 100);
        })
    };
    assert!(!task.is_done(), "the task waits for space");
    go.send(()).expect("the server waits");
    // Served until the producer's task has run (its `call` on the server
    // thread does not).
    let served = {
        let m = m.clone();
        within_10s(move || {
            while m.call(|n| *n) % 100 != 11 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    active_monitor::__test_set_saturation_override(None);
    assert!(served.is_some(), "the monitor no longer serves");
}

/// What a waker the server runs sets off runs as a task of the monitor
/// too. The server ran a completion's waker (a task polled on the spot) as
/// a task of its monitor, but that task called a combining monitor whose
/// holder, this thread, enabled a second task; that task's waker, kept
/// until the thread ran no task body, ran once the server's stint was
/// over, as a task of no monitor. Its `call` of the served monitor, held
/// by another thread with a task queued, then queued itself for the
/// server, this very thread, and waited for ever: the monitor never served
/// again. It now panics there, as a call from a task of the monitor does,
/// and the monitor keeps serving.
#[test]
fn a_served_monitor_keeps_serving_whatever_a_task_woken_by_its_wakers_calls() {
    use active_monitor::Order::Relaxed;
    use std::sync::{Mutex, mpsc};

    let (_one, m, go) =
        served_with_a_busy_server(|| Monitor::builder().order(Relaxed).build_served(0u64));
    let other = Arc::new(Monitor::builder().order(Relaxed).build(false));
    // The second task: woken by whoever enables `other`, it calls `m`.
    let second = {
        let (m, other) = (m.clone(), Arc::clone(&other));
        InlineTask::spawn(async move {
            other.when_async(|ready| *ready, |_| ()).await;
            m.call(|n| *n += 100);
        })
    };
    // Another thread's call of `m`, blocked in its body until the test
    // lets it go.
    let (holder_go, holder_wait) = mpsc::channel::<()>();
    let holder_wait = Arc::new(Mutex::new(Some(holder_wait)));
    // The first task: woken by the server, it has another thread hold `m`
    // with a task queued behind it, then enables the second task.
    let first = {
        let (m, other) = (m.clone(), Arc::clone(&other));
        InlineTask::spawn(async move {
            m.submit(|n| *n += 10).await.expect("ran");
            let wait = holder_wait.lock().unwrap().take().expect("once");
            let (holding, is_holding) = mpsc::channel();
            let holder = m.clone();
            std::thread::spawn(move || {
                holder.call(move |n| {
                    holding.send(()).expect("the task waits");
                    wait.recv().expect("the test lets go");
                    *n += 1000;
                })
            });
            is_holding.recv().expect("the holder runs");
            drop(m.submit(|n| *n += 10_000));
            other.call(|ready| *ready = true);
        })
    };
    assert!(!first.is_done(), "the first task waits for the server");
    go.send(()).expect("the server waits");
    std::thread::sleep(std::time::Duration::from_millis(100));
    holder_go.send(()).expect("the holder waits");
    // Served until every task but the second's `call` has run.
    let served = {
        let m = m.clone();
        within_10s(move || {
            while m.call(|n| *n) != 11_011 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    active_monitor::__test_set_saturation_override(None);
    if served.is_none() {
        // The server thread waits for itself: dropping the last handle
        // would join it for ever.
        std::mem::forget(m);
        panic!("the monitor no longer serves");
    }
    assert!(first.is_done(), "the first task did not finish");
    drop(second);
}

/// A `call` that found the monitor free with tasks queued served a batch,
/// then handed the monitor to its own queued task, and only then delivered
/// the task wakers its batch kept: a waker that polled its task on the
/// spot, whose `call` of the monitor found it held for its own thread,
/// waited for ever, and the monitor with it. (A served monitor whose
/// verdict flips to saturated, its server busy elsewhere, is one way to
/// leave tasks queued on a free monitor.) A caller is handed the monitor
/// only once it waits for its token.
#[test]
fn a_call_delivering_task_wakers_is_not_handed_the_monitor_meanwhile() {
    use std::sync::{Mutex, mpsc};

    let (_one, m, go) = served_with_a_busy_server(|| {
        Monitor::builder()
            .batch(1)
            .order(active_monitor::Order::Relaxed)
            .build_served(0u64)
    });
    // Its completion's waker, which the server runs once its stint is
    // over, keeps the server busy (holding nothing) until the test lets go.
    let (gate, gate_wait) = mpsc::channel::<()>();
    let (in_waker, is_in_waker) = mpsc::channel::<()>();
    let gate_wait = Arc::new(Mutex::new(Some((gate_wait, in_waker))));
    let busy = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| *n += 2).await.expect("ran");
            let (wait, in_waker) = gate_wait.lock().unwrap().take().expect("once");
            in_waker.send(()).expect("the test waits");
            wait.recv().expect("the test lets go");
        })
    };
    go.send(()).expect("the server waits");
    is_in_waker.recv().expect("the server runs the waker");
    // Queued for the busy server, on a free monitor.
    let task = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| *n += 10).await.expect("ran");
            m.call(|n| *n += 100);
        })
    };
    active_monitor::__test_set_saturation_override(Some(true));
    // Takes the free monitor, runs the task's submission (a batch of 1)
    // and so wakes the task, whose `call` comes on this thread.
    let called = {
        let m = m.clone();
        within_10s(move || m.call(|n| *n += 1000))
    };
    gate.send(()).expect("the waker waits");
    active_monitor::__test_set_saturation_override(None);
    if called.is_none() {
        // The monitor is held for a thread that waits for it: dropping the
        // last handle would join the server for ever.
        std::mem::forget(m);
        panic!("the call hung");
    }
    assert!(task.is_done(), "the task did not finish");
    assert_eq!(m.call(|n| *n), 1113);
    drop(busy);
}

/// A task body's `call` that takes a free served monitor with tasks queued
/// (saturated, its server busy elsewhere) serves them before its own. One
/// of them enables, on a second monitor, the `when_async` of an inline
/// task: its waker is kept on the caller's thread, a body running below.
/// The verdict flips back, and the serve gives the monitor to the server
/// with the caller's task still queued; the caller then parked with the
/// waker kept. The server was busy in a waker until that very task's next
/// step, and so never came back: the call waited for ever. A call now
/// delivers what its serve kept before it waits.
#[test]
fn a_call_whose_serve_kept_task_wakers_delivers_them_before_it_waits() {
    use std::sync::{Mutex, mpsc};

    let (_one, m, go) = served_with_a_busy_server(|| {
        Monitor::builder()
            .order(active_monitor::Order::Relaxed)
            .build_served(0u64)
    });
    // The server, once its first task is done, runs this task's waker and
    // waits there, holding nothing, for `gate`.
    let (gate, gate_wait) = mpsc::channel::<()>();
    let (in_waker, is_in_waker) = mpsc::channel::<()>();
    let gate_wait = Arc::new(Mutex::new(Some((gate_wait, in_waker))));
    let busy = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| *n += 2).await.expect("ran");
            let (wait, in_waker) = gate_wait.lock().unwrap().take().expect("once");
            in_waker.send(()).expect("the test waits");
            wait.recv().expect("the task lets go");
        })
    };
    go.send(()).expect("the server waits");
    is_in_waker.recv().expect("the server runs the waker");
    // Lets the server go, once a holder enables it.
    let other = Arc::new(
        Monitor::builder()
            .order(active_monitor::Order::Relaxed)
            .build(false),
    );
    let task = {
        let other = Arc::clone(&other);
        InlineTask::spawn(async move {
            other.when_async(|enabled: &bool| *enabled, |_| ()).await;
            gate.send(()).expect("the server waits");
        })
    };
    // Queued for the busy server, on a free monitor: enables the task and
    // flips the verdict back, so that the serve that runs it stops there.
    drop(m.submit(move |n| {
        other.call(|enabled| *enabled = true);
        active_monitor::__test_set_saturation_override(Some(false));
        *n += 10;
    }));
    active_monitor::__test_set_saturation_override(Some(true));
    let outer = Monitor::builder()
        .order(active_monitor::Order::Relaxed)
        .build(());
    let called = {
        let m = m.clone();
        within_10s(move || outer.call(move |_| m.call(|n| *n += 1000)))
    };
    active_monitor::__test_set_saturation_override(None);
    if called.is_none() {
        // The server waits for ever: dropping the last handle would join
        // it for ever too.
        std::mem::forget((m, busy));
        panic!("the call waited for ever");
    }
    assert!(task.is_done(), "the task did not finish");
    assert_eq!(m.call(|n| *n), 1013);
    drop(busy);
}

/// A call that took a free monitor with tasks queued (a served monitor
/// whose verdict flipped while its server is busy in a waker) serves a
/// batch; with its own task next, the hand-over to itself first wakes the
/// async producers waiting for space. Their wakers were kept after the
/// look at what the caller keeps, and delivered while the monitor was held
/// for it: a producer's task polled on the spot whose `call` came on this
/// thread parked for ever behind it.
#[test]
fn a_call_handed_the_monitor_by_itself_delivers_no_producer_waker_meanwhile() {
    use std::sync::{Mutex, mpsc};

    let (_one, m, go) = served_with_a_busy_server(|| {
        Monitor::builder()
            .batch(1)
            .capacity(2)
            .order(active_monitor::Order::Relaxed)
            .build_served(0u64)
    });
    let (gate, gate_wait) = mpsc::channel::<()>();
    let (in_waker, is_in_waker) = mpsc::channel::<()>();
    let gate_wait = Arc::new(Mutex::new(Some((gate_wait, in_waker))));
    let busy = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| *n += 2).await.expect("ran");
            let (wait, in_waker) = gate_wait.lock().unwrap().take().expect("once");
            in_waker.send(()).expect("the test waits");
            wait.recv().expect("the test lets go");
        })
    };
    go.send(()).expect("the server waits");
    is_in_waker.recv().expect("the server runs the waker");
    // A full queue on a free monitor, and a producer waiting for space.
    drop((m.submit(|n| *n += 1000), m.submit(|n| *n += 1000)));
    let task = {
        let m = m.clone();
        InlineTask::spawn(async move {
            let _queued = m.submit_async(|n| *n += 10).completion().await;
            m.call(|n| *n += 100);
        })
    };
    assert!(!task.is_done(), "the task waits for space");
    active_monitor::__test_set_saturation_override(Some(true));
    let called = {
        let m = m.clone();
        within_10s(move || m.call(|n| *n += 10_000))
    };
    gate.send(()).expect("the waker waits");
    active_monitor::__test_set_saturation_override(None);
    if called.is_none() {
        std::mem::forget(m);
        panic!("the call hung");
    }
    assert!(task.is_done(), "the task did not finish");
    assert_eq!(m.call(|n| *n), 12_113);
    drop(busy);
}

/// A call that served a batch and let go of the monitor with its own task
/// still queued (the verdict flipped back to a server that is busy) then
/// delivered a completion's waker, which polled its task on the spot. That
/// task's `call` took the free monitor and, at the end of its first batch,
/// handed it to the outer call's task, next in the queue: the same thread,
/// but not at the end of that call's serve. The outer call was never to
/// wait for it, and the inner one waited for ever behind it.
#[test]
fn a_call_made_in_a_waker_does_not_hand_the_monitor_to_the_call_below_it() {
    let (_one, m, go) = served_with_a_busy_server(|| {
        Monitor::builder()
            .batch(1)
            .order(active_monitor::Order::Relaxed)
            .build_served(0u64)
    });
    let (gate, gate_wait) = std::sync::mpsc::channel::<()>();
    let (in_waker, is_in_waker) = std::sync::mpsc::channel::<()>();
    let gate_wait = Arc::new(std::sync::Mutex::new(Some((gate_wait, in_waker))));
    let busy = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| *n += 2).await.expect("ran");
            let (wait, in_waker) = gate_wait.lock().unwrap().take().expect("once");
            in_waker.send(()).expect("the test waits");
            wait.recv().expect("the test lets go");
        })
    };
    go.send(()).expect("the server waits");
    is_in_waker.recv().expect("the server runs the waker");
    // Queued for the busy server, on a free monitor: the task's submission,
    // whose body flips the verdict back (the server serves), and a task
    // behind it.
    let task = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| {
                active_monitor::__test_set_saturation_override(Some(false));
                *n += 10;
            })
            .await
            .expect("ran");
            // The verdict flips again.
            active_monitor::__test_set_saturation_override(Some(true));
            m.call(|n| *n += 100);
        })
    };
    drop(m.submit(|n| *n += 1000));
    active_monitor::__test_set_saturation_override(Some(true));
    let called = {
        let m = m.clone();
        within_10s(move || m.call(|n| *n += 10_000))
    };
    gate.send(()).expect("the waker waits");
    active_monitor::__test_set_saturation_override(None);
    if called.is_none() {
        std::mem::forget(m);
        panic!("the call hung");
    }
    assert!(task.is_done(), "the task did not finish");
    assert_eq!(m.call(|n| *n), 11_113);
    drop(busy);
}

/// A call handed the monitor by itself, at the end of its own serve, then
/// ran its park hook, which drops the results nobody took that the serve
/// kept: a result whose `Drop` calls the monitor (a lease returned to its
/// pool) waited there for ever for the monitor this very thread held.
#[test]
fn a_call_handed_the_monitor_by_itself_drops_no_kept_result_meanwhile() {
    use std::sync::{Mutex, mpsc};

    /// Calls its monitor when dropped.
    struct Lease(active_monitor::Served<u64>);
    impl Drop for Lease {
        fn drop(&mut self) {
            self.0.call(|n| *n += 100);
        }
    }

    let (_one, m, go) = served_with_a_busy_server(|| {
        Monitor::builder()
            .batch(1)
            .order(active_monitor::Order::Relaxed)
            .build_served(0u64)
    });
    let (gate, gate_wait) = mpsc::channel::<()>();
    let (in_waker, is_in_waker) = mpsc::channel::<()>();
    let gate_wait = Arc::new(Mutex::new(Some((gate_wait, in_waker))));
    let busy = {
        let m = m.clone();
        InlineTask::spawn(async move {
            m.submit(|n| *n += 2).await.expect("ran");
            let (wait, in_waker) = gate_wait.lock().unwrap().take().expect("once");
            in_waker.send(()).expect("the test waits");
            wait.recv().expect("the test lets go");
        })
    };
    go.send(()).expect("the server waits");
    is_in_waker.recv().expect("the server runs the waker");
    // On the free monitor (its server is busy in the waker), a task whose
    // completion is dropped: the call below serves it, then its own task,
    // which it hands to itself.
    let lease = m.clone();
    drop(m.submit(move |n| {
        *n += 10;
        Lease(lease)
    }));
    active_monitor::__test_set_saturation_override(Some(true));
    let called = {
        let m = m.clone();
        within_10s(move || m.call(|n| *n += 1000))
    };
    gate.send(()).expect("the waker waits");
    active_monitor::__test_set_saturation_override(None);
    if called.is_none() {
        std::mem::forget(m);
        panic!("the call hung");
    }
    assert_eq!(m.call(|n| *n), 1113, "the lease came back once");
    drop(busy);
}
