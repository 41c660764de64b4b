#![cfg(not(loom))]
//! Behaviour of the public API: delegation, completions, preconditions,
//! abstract states, OR/AND, panics, drop.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use active_monitor::{Discarded, Monitor, Order, and, or};

#[test]
fn call_and_submit_from_many_threads_lose_nothing() {
    const THREADS: usize = 4;
    const N: usize = 5_000;
    for capacity in [1, 2, 200] {
        let m = Arc::new(Monitor::builder().capacity(capacity).build(0usize));
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    let mut last = None;
                    for i in 0..N {
                        if i % 3 == 0 {
                            m.call(|n| *n += 1);
                        } else {
                            last = Some(m.submit(|n| {
                                *n += 1;
                                *n
                            }));
                        }
                    }
                    last.unwrap().wait()
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().unwrap() <= THREADS * N);
        }
        assert_eq!(m.call(|n| *n), THREADS * N, "capacity {capacity}");
    }
}

#[test]
fn a_relaxed_monitor_loses_nothing_either() {
    let m = Arc::new(
        Monitor::builder()
            .order(Order::Relaxed)
            .capacity(3)
            .batch(1)
            .build(0usize),
    );
    let hs: Vec<_> = (0..3)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                for _ in 0..3000 {
                    drop(m.submit(|n| *n += 1));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(m.call(|n| *n), 9000);
}

#[test]
fn a_panicking_task_resumes_in_its_waiter_and_the_monitor_keeps_serving() {
    let m = Monitor::new(1);
    let err = catch_unwind(AssertUnwindSafe(|| {
        m.call(|_| -> i32 { panic!("boom in call") })
    }))
    .unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"boom in call"));
    let c = m.submit(|_| -> i32 { panic!("boom in submit") });
    let err = catch_unwind(AssertUnwindSafe(|| c.wait())).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"boom in submit"));
    let c = m.when(|_| panic!("boom in precondition"), |n| *n);
    assert!(catch_unwind(AssertUnwindSafe(|| c.wait())).is_err());
    assert_eq!(m.call(|n| *n), 1);
}

#[test]
fn a_panicking_task_run_by_another_combiner_resumes_in_its_own_waiter() {
    let m = Arc::new(Monitor::new(0usize));
    let hs: Vec<_> = (0..4)
        .map(|t| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut panics = 0;
                for i in 0..2000 {
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        m.call(move |n| {
                            *n += 1;
                            if (i + t) % 7 == 0 {
                                panic!("task panic");
                            }
                        })
                    }));
                    panics += r.is_err() as usize;
                }
                panics
            })
        })
        .collect();
    let panics: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let expected: usize = (0..4)
        .map(|t| (0..2000).filter(|i| (i + t) % 7 == 0).count())
        .sum();
    assert_eq!(panics, expected);
    assert_eq!(m.call(|n| *n), 8000);
}

#[test]
fn when_runs_once_its_precondition_holds() {
    let m = Monitor::builder().order(Order::Relaxed).build(0);
    let c = m.when(
        |n| *n == 3,
        |n| {
            *n += 100;
            *n
        },
    );
    assert!(!c.is_done());
    m.submit(|n| *n += 1);
    m.submit(|n| *n += 1);
    assert!(!c.is_done());
    m.submit(|n| *n += 1);
    assert!(c.is_done());
    assert_eq!(c.wait(), 103);
}

#[test]
fn waiting_tasks_run_oldest_first_and_relay() {
    // Each waiting task enables the next: one state change relays through
    // all of them, in submission order.
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .build(Vec::<u32>::new());
    let cs: Vec<_> = (1..=5u32)
        .rev()
        .map(|k| m.when(move |v| v.len() as u32 == k, move |v| v.push(k)))
        .collect();
    let also = m.when(|v| !v.is_empty(), |v| v.len());
    m.submit(|v| v.push(0));
    // The younger task was ready as soon as 0 was pushed, but the older
    // ones run first, each enabling the next.
    assert_eq!(also.wait(), 6, "the oldest ready task runs first");
    drop(cs);
    assert_eq!(m.call(|v| v.clone()), [0, 1, 2, 3, 4, 5]);
}

ast_mutex::states! { enum Buf { Empty, Mid, Full } }

#[test]
fn when_in_runs_only_in_its_states_and_sets_the_next() {
    let m = Monitor::builder()
        .order(Order::Relaxed)
        .build_with_states(Buf::Empty, VecDeque::new());
    const CAP: usize = 2;
    let next = |q: &VecDeque<u32>| match q.len() {
        0 => Buf::Empty,
        CAP => Buf::Full,
        _ => Buf::Mid,
    };
    let takes: Vec<_> = (0..3)
        .map(|_| {
            m.when_in(Buf::Mid | Buf::Full, move |q| {
                (q.pop_front().unwrap(), next(q))
            })
        })
        .collect();
    assert!(takes.iter().all(|c| !c.is_done()));
    for i in 0..3 {
        m.when_in(Buf::Empty | Buf::Mid, move |q| {
            q.push_back(i);
            ((), next(q))
        });
    }
    let got: Vec<u32> = takes.into_iter().map(|c| c.wait()).collect();
    assert_eq!(got, [0, 1, 2]);
}

#[test]
#[should_panic(expected = "empty set of states")]
fn when_in_an_empty_set_panics() {
    let m = Monitor::with_states(Buf::Empty, ());
    drop(m.when_in(ast_mutex::StateSet::EMPTY, |_| ((), Buf::Empty)));
}

#[test]
fn a_bounded_queue_in_a_monitor_moves_every_item() {
    // The paper's figure 2, with blocking takes and asynchronous puts.
    const CAP: usize = 4;
    const ITEMS: u64 = 3_000;
    for order in [Order::Strict, Order::Relaxed] {
        let q = Arc::new(Monitor::builder().order(order).build(VecDeque::new()));
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let q = Arc::clone(&q);
                thread::spawn(move || {
                    for i in 0..ITEMS {
                        drop(q.when(
                            |d: &VecDeque<u64>| d.len() < CAP,
                            move |d| d.push_back(p * ITEMS + i),
                        ));
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let q = Arc::clone(&q);
                thread::spawn(move || {
                    let mut sum = 0u64;
                    for _ in 0..ITEMS {
                        let x = q
                            .when(
                                |d: &VecDeque<u64>| !d.is_empty(),
                                |d| d.pop_front().unwrap(),
                            )
                            .wait();
                        sum += x;
                    }
                    sum
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let sum: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(sum, (0..2 * ITEMS).sum::<u64>(), "{order:?}");
    }
}

#[test]
fn dropping_a_monitor_runs_queued_tasks_and_discards_waiting_ones() {
    let ran = Arc::new(AtomicUsize::new(0));
    let m = Monitor::builder().order(Order::Relaxed).build(0);
    let never = m.when(|n| *n > 100, |n| *n);
    let fine = m.when(|n| *n == 1, |n| *n);
    let r = Arc::clone(&ran);
    m.submit(move |n| {
        *n += 1;
        r.fetch_add(1, Ordering::SeqCst);
    });
    drop(m);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(fine.wait(), 1);
    assert_eq!(never.wait_result(), Err(Discarded));
}

#[test]
fn dropping_a_monitor_with_tasks_queued_by_other_threads_runs_them_all() {
    // Another thread holds the monitor in a long task while we queue; the
    // monitor is then dropped by its last owner with tasks still queued.
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0usize));
    let (tx, rx) = std::sync::mpsc::channel();
    let holder = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            m.call(move |_| {
                tx.send(()).unwrap();
                thread::sleep(Duration::from_millis(50));
            })
        })
    };
    rx.recv().unwrap();
    let cs: Vec<_> = (0..10)
        .map(|_| {
            m.submit(|n| {
                *n += 1;
                *n
            })
        })
        .collect();
    holder.join().unwrap();
    drop(m);
    let mut got: Vec<_> = cs.into_iter().map(|c| c.wait()).collect();
    got.sort();
    assert_eq!(got, (1..=10).collect::<Vec<_>>());
}

#[test]
#[should_panic(expected = "discarded")]
fn waiting_on_a_discarded_task_panics() {
    let m = Monitor::new(0);
    let c = m.when(|n| *n > 0, |n| *n);
    drop(m);
    c.wait();
}

#[test]
fn a_dropped_completion_does_not_cancel_its_task() {
    let m = Monitor::builder().order(Order::Relaxed).build(0);
    drop(m.when(|n| *n == 1, |n| *n += 10));
    m.submit(|n| *n += 1);
    assert_eq!(m.call(|n| *n), 11);
}

#[test]
fn completions_are_futures_on_tokio_and_futures() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u64));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let total = rt.block_on({
        let m = Arc::clone(&m);
        async move {
            let waiter = m.when(|n| *n >= 100, |n| *n);
            let tasks: Vec<_> = (0..4)
                .map(|_| {
                    let m = Arc::clone(&m);
                    tokio::spawn(async move {
                        for _ in 0..25 {
                            m.submit(|n| *n += 1).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            waiter.await.unwrap()
        }
    });
    assert_eq!(total, 100);
    let later = m.when(|n| *n == 101, |n| *n * 2);
    let m2 = Arc::clone(&m);
    let h = thread::spawn(move || m2.call(|n| *n += 1));
    assert_eq!(futures::executor::block_on(later), Ok(202));
    h.join().unwrap();
}

#[test]
fn strict_order_completes_a_task_before_the_next_monitor_sees_the_worker() {
    // Rule 3: the worker's task on `a` has run before its task on `b` runs,
    // even though `a` is busy when it submits.
    let a = Arc::new(Monitor::new(Vec::<u32>::new()));
    let b = Monitor::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let busy = {
        let a = Arc::clone(&a);
        thread::spawn(move || {
            a.call(move |_| {
                tx.send(()).unwrap();
                // Busy until the worker's task is queued, and a while
                // longer (its `call` on `b` waits meanwhile).
                released.recv().unwrap();
                thread::sleep(Duration::from_millis(30));
            })
        })
    };
    rx.recv().unwrap();
    let first = a.submit(|v| v.push(1)); // queued behind the busy task
    assert!(!first.is_done());
    release.send(()).unwrap();
    let a2 = Arc::clone(&a);
    let seen = b.call(move |_| a2.call(|v| v.len()));
    assert_eq!(
        seen, 1,
        "the task on `a` ran before the worker's task on `b`"
    );
    busy.join().unwrap();
}

#[test]
fn or_runs_exactly_one_operand() {
    for _ in 0..200 {
        let q1 = Arc::new(Monitor::new(VecDeque::<u32>::new()));
        let q2 = Arc::new(Monitor::new(VecDeque::<u32>::new()));
        let c = or((
            q1.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
            q2.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
        ))
        .unwrap();
        let (p1, p2) = (Arc::clone(&q1), Arc::clone(&q2));
        let h1 = thread::spawn(move || p1.call(|q| q.push_back(1)));
        let h2 = thread::spawn(move || p2.call(|q| q.push_back(2)));
        h1.join().unwrap();
        h2.join().unwrap();
        let (i, x) = c.wait();
        assert_eq!(x as usize, i + 1);
        // Nudge both monitors so a losing operand is looked at and dropped.
        let left = q1.call(|q| q.len()) + q2.call(|q| q.len());
        assert_eq!(left, 1, "exactly one item was taken");
    }
}

#[test]
fn or_and_and_reject_operands_on_one_monitor() {
    let m = Monitor::new(0);
    let other = Monitor::new(0);
    let err = or((
        other.op(|_| true, |n| *n),
        m.op(|_| true, |n| *n),
        m.op(|_| true, |n| *n),
    ))
    .unwrap_err();
    assert_eq!((err.first, err.second), (1, 2));
    assert!(err.to_string().contains("same monitor"));
    let err = and((m.op(|_| true, |n| *n), m.op(|_| true, |n| *n))).unwrap_err();
    assert_eq!((err.first, err.second), (0, 1));
    // Nothing was submitted.
    assert_eq!(m.call(|n| *n), 0);
}

#[test]
fn or_resolves_to_discarded_when_every_operand_is_dropped() {
    let a = Monitor::new(0);
    let b = Monitor::new(0);
    let c = or((a.op(|n| *n > 0, |n| *n), b.op(|n| *n > 0, |n| *n))).unwrap();
    drop(a);
    assert!(!c.is_done());
    drop(b);
    assert_eq!(c.wait_result(), Err(Discarded));
}

#[test]
fn and_runs_every_operand() {
    let a = Monitor::builder().order(Order::Relaxed).build(0);
    let b = Monitor::builder().order(Order::Relaxed).build(10);
    let both = and((a.op(|n| *n > 0, |n| *n), b.op(|_| true, |n| *n))).unwrap();
    assert!(!both.is_done());
    a.submit(|n| *n = 5);
    assert_eq!(both.wait(), vec![5, 10]);
}

#[test]
fn a_task_may_submit_to_its_own_monitor() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0));
    let inner = Arc::clone(&m);
    let c = m.call(move |n| {
        *n += 1;
        inner.submit(|n| *n += 1)
    });
    c.wait();
    assert_eq!(m.call(|n| *n), 2);
}

#[test]
fn get_mut_runs_queued_tasks_first() {
    let mut m = Monitor::new(0);
    m.submit(|n| *n += 1);
    assert_eq!(*m.get_mut(), 1);
}

#[test]
#[should_panic(expected = "capacity must be at least 1")]
fn a_zero_capacity_panics() {
    let _ = Monitor::builder().capacity(0);
}

#[test]
#[should_panic(expected = "batch must be at least 1")]
fn a_zero_batch_panics() {
    let _ = Monitor::builder().batch(0);
}

#[test]
fn relaxed_order_bounds_a_workers_waiting_tasks() {
    use active_monitor::WAITING_LIMIT;
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(false));
    let worker = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            let cs: Vec<_> = (0..WAITING_LIMIT)
                .map(|_| m.when(|open| *open, |_| ()))
                .collect();
            // One too many (a task that may wait, too): waits until the
            // oldest has run.
            let c = m.when(|_| true, |open| *open);
            (cs, c.wait())
        })
    };
    thread::sleep(Duration::from_millis(50));
    assert!(!worker.is_finished(), "the worker was not held back");
    m.call(|open| *open = true);
    let (cs, saw_open) = worker.join().unwrap();
    assert!(saw_open);
    assert!(cs.iter().all(|c| c.is_done()));
}

/// A blocking wait may leave its finished task to the thread, to drop
/// later; never one whose precondition holds a value of the user's: once
/// the task has run and the wait returned, the precondition's captures
/// are dropped, with `wait` and with `wait_result`.
#[test]
fn a_waited_tasks_precondition_captures_are_dropped_once_the_wait_returns() {
    for with_result in [false, true] {
        let m = Monitor::new(false);
        let token = Arc::new(());
        let captured = Arc::clone(&token);
        thread::scope(|s| {
            let c = m.when(
                move |open| {
                    let _ = &captured;
                    *open
                },
                |_| 7,
            );
            s.spawn(|| {
                thread::sleep(Duration::from_millis(20)); // the waiter parks
                m.submit(|open| *open = true);
            });
            let r = if with_result {
                c.wait_result().unwrap()
            } else {
                c.wait()
            };
            assert_eq!(r, 7);
        });
        // The enabling thread has finished: only a reference kept by this
        // thread could hold the capture now.
        assert_eq!(
            Arc::strong_count(&token),
            1,
            "a precondition's capture outlived the wait (wait_result: {with_result})"
        );
    }
}

/// A call of a monitor from a task body of another monitor that runs
/// inside a task of the first, on the same thread: the first is held by
/// this thread, below. It panics, as a call from a task of the monitor
/// itself does; it waited for ever.
#[test]
fn a_call_from_a_nested_task_of_the_same_monitor_panics() {
    let outer = Arc::new(Monitor::new(0u32));
    let inner = Monitor::new(());
    let (o, done) = (Arc::clone(&outer), std::sync::mpsc::channel::<bool>());
    let called = std::thread::spawn(move || {
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            o.call(|_| inner.call(|()| o.call(|n| *n += 1)))
        }))
        .is_err();
        done.0.send(panicked).expect("the test waits");
    });
    match done.1.recv_timeout(std::time::Duration::from_secs(10)) {
        Ok(panicked) => assert!(panicked, "the nested call returned"),
        Err(_) => {
            std::mem::forget(outer);
            panic!("the nested call hung");
        }
    }
    called.join().expect("caught");
    assert_eq!(outer.call(|n| *n), 0);
}

/// The same for a submission to the monitor's full queue from such a
/// nested body: only this thread could make room, and it holds the
/// monitor below. It panics; it waited for space for ever.
#[test]
fn a_submission_to_a_full_queue_from_a_nested_task_of_the_same_monitor_panics() {
    let outer = Arc::new(Monitor::builder().capacity(1).build(0u32));
    let inner = Monitor::new(());
    let (o, done) = (Arc::clone(&outer), std::sync::mpsc::channel::<bool>());
    let called = std::thread::spawn(move || {
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            o.call(|_| {
                inner.call(|()| {
                    // Queued: this thread holds `outer`; then it is full.
                    drop(o.submit(|n| *n += 1));
                    drop(o.submit(|n| *n += 1));
                })
            })
        }))
        .is_err();
        done.0.send(panicked).expect("the test waits");
    });
    match done.1.recv_timeout(std::time::Duration::from_secs(10)) {
        Ok(panicked) => assert!(panicked, "the nested submission returned"),
        Err(_) => {
            std::mem::forget(outer);
            panic!("the nested submission hung");
        }
    }
    called.join().expect("caught");
    assert_eq!(outer.call(|n| *n), 1, "the first submission ran once");
}

/// A task body that waits (blocking) for a task queued on its own monitor,
/// or on a monitor whose task runs below it on the thread: only this
/// thread could run that task, once the body returns. The wait panics, as
/// a call would; it parked for ever. The task runs once the monitor is
/// free, and nothing is lost: for `wait` and `wait_result`, for a task
/// queued by the body and for one that was waiting before the body began,
/// from the monitor's own task and from a nested one.
#[test]
fn a_wait_for_a_task_of_a_monitor_this_thread_runs_panics() {
    for (nested, queued_before, with_result) in (0..8).map(|i| (i & 1 != 0, i & 2 != 0, i & 4 != 0))
    {
        let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
        let other = Monitor::new(());
        let before = queued_before.then(|| m.when(|n| *n > 0, |n| *n += 10));
        let (m2, done) = (Arc::clone(&m), std::sync::mpsc::channel::<bool>());
        let waiter = thread::spawn(move || {
            let wait = |n: &mut u32| {
                *n += 1;
                let c = before.unwrap_or_else(|| m2.submit(|n| *n += 10));
                if with_result {
                    c.wait_result().expect("not discarded");
                } else {
                    c.wait();
                }
            };
            let panicked = catch_unwind(AssertUnwindSafe(|| {
                if nested {
                    m2.call(|n| other.call(|()| wait(n)));
                } else {
                    m2.call(wait);
                }
            }))
            .expect_err("the wait returned");
            let told =
                sync_core::testing::panic_text(&*panicked).contains("the wait would be for ever");
            done.0.send(told).expect("the test waits");
        });
        match done.1.recv_timeout(Duration::from_secs(10)) {
            Ok(told) => assert!(told, "the wait panicked with another message"),
            Err(_) => {
                std::mem::forget(m);
                panic!("the wait hung (nested {nested}, queued before {queued_before})");
            }
        }
        waiter.join().expect("caught");
        assert_eq!(
            m.call(|n| *n),
            11,
            "the body's change kept, the task ran once"
        );
    }
}

/// The check is on the task's monitor, not on the thread's being in a
/// task: a body that waits for a task another thread's monitor runs, or
/// for one of its own monitor that has already run, returns.
#[test]
fn a_task_body_may_wait_for_a_finished_task_of_its_own_monitor_and_for_other_monitors() {
    let m = Arc::new(Monitor::new(0u32));
    let served = Monitor::builder().build_served(5u32);
    let (m2, s2) = (Arc::clone(&m), served.clone());
    let done = m2.submit(|n| {
        *n += 1;
        *n
    }); // ran at once: the monitor was idle
    let r = m.call(move |n| {
        let finished = done.wait();
        let elsewhere = s2.submit(|v| *v * 2).wait();
        *n += 1;
        (finished, elsewhere)
    });
    assert_eq!(r, (1, 10));
    assert_eq!(m.call(|n| *n), 2);
}
