//! The Send/Sync promises of the public types, positive and negative.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use active_monitor::{
    Builder, CallAsync, Completion, DataMut, Discarded, Enqueue, Monitor, NoState, Order,
    SameMonitor, Served, SubmitAsync, Worker,
};
use sync_core::{assert_impl, assert_not_impl};

ast_mutex::states! { enum S { A, B } }

// A monitor is shared across threads whenever its data may move across
// them (one thread at a time runs tasks on it, as with a Mutex).
assert_impl!(Monitor<Vec<u8>>: Send, Sync);
assert_impl!(Monitor<Cell<u8>>: Send, Sync);
assert_impl!(Monitor<Vec<u8>, S>: Send, Sync);
assert_not_impl!(Monitor<Rc<u8>>: Send);
assert_not_impl!(Monitor<Rc<u8>>: Sync);

// A served monitor's handle shares the monitor (an `Arc`), with the same
// bounds; its data must be 'static (the server thread owns a reference).
assert_impl!(Served<Vec<u8>>: Send, Sync, Clone);
assert_impl!(Served<Cell<u8>>: Send, Sync);
assert_impl!(Served<Vec<u8>, S>: Send, Sync);
assert_not_impl!(Served<Rc<u8>>: Send);
assert_not_impl!(Served<Rc<u8>>: Sync);

// A completion carries the result (and maybe a panic payload, which is
// only Send) to whoever waits: Send when the result is, never Sync.
assert_impl!(Completion<Vec<u8>>: Send, Unpin);
assert_impl!(Completion<Cell<u8>>: Send);
assert_not_impl!(Completion<Vec<u8>>: Sync);
assert_not_impl!(Completion<Rc<u8>>: Send);

// The owner's borrow of the data hands out `&T` through a shared
// reference, as a MutexGuard does: Sync only when the data is (a
// `DataMut<Cell<_>>` shared between scoped threads would race).
assert_impl!(DataMut<'static, Vec<u8>>: Send, Sync);
assert_impl!(DataMut<'static, Cell<u8>>: Send);
assert_not_impl!(DataMut<'static, Cell<u8>>: Sync);
assert_not_impl!(DataMut<'static, Rc<u8>>: Send);

// The async submissions' futures carry the task (Send closures) and borrow
// the monitor (Sync): Send, so a spawned task may hold them across an
// .await; they are never shared (not Sync), as the task they carry is
// reached only by whoever polls.
assert_impl!(SubmitAsync<'static, Vec<u8>, NoState, Vec<u8>>: Send, Unpin);
assert_impl!(CallAsync<'static, Vec<u8>, NoState, Vec<u8>>: Send, Unpin);
assert_impl!(Enqueue<'static, Vec<u8>, NoState, Vec<u8>>: Send, Unpin);
assert_not_impl!(Enqueue<'static, Vec<u8>, NoState, Vec<u8>>: Sync);
assert_not_impl!(SubmitAsync<'static, Vec<u8>, NoState, Vec<u8>>: Sync);
assert_not_impl!(SubmitAsync<'static, Rc<u8>, NoState, u8>: Send);
assert_not_impl!(SubmitAsync<'static, u8, NoState, Rc<u8>>: Send);
assert_not_impl!(CallAsync<'static, u8, NoState, Rc<u8>>: Send);

// A worker scope is Send when its future is (its record of pending tasks
// is), and carries that future's Unpin.
assert_impl!(Worker<std::future::Ready<u8>>: Send, Sync, Unpin);
assert_not_impl!(Worker<std::future::Ready<Rc<u8>>>: Send);

/// The futures of the async methods are Send when their closures are: a
/// multi-thread runtime may move the task that awaits them.
#[test]
fn async_submissions_are_send() {
    fn send<F: std::future::Future + Send>(f: F) -> F {
        f
    }
    let m = Monitor::new(0u32);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let m = Arc::new(m);
    let m1 = Arc::clone(&m);
    let n = rt
        .block_on(rt.spawn(send(active_monitor::worker(async move {
            m1.submit_async(|n| *n += 1).await;
            let c = m1.submit_async(|n| *n).completion().await;
            c.await.unwrap() + m1.when_async(|n| *n > 0, |n| *n).await
        }))))
        .unwrap();
    assert_eq!(n, 2);
}

// Plain values.
assert_impl!(Builder: Send, Sync, Copy);
assert_impl!(Order: Send, Sync, Copy);
assert_impl!(Discarded: Send, Sync, Copy, std::error::Error);
assert_impl!(NoState: Send, Sync, Copy);
assert_impl!(SameMonitor<(u8, u8)>: Send, Sync, std::error::Error);

#[test]
fn a_completion_is_awaited_on_another_thread() {
    let m = Arc::new(Monitor::builder().order(Order::Relaxed).build(0u32));
    let c = m.when(|n| *n > 0, |n| *n);
    let h = std::thread::spawn(move || futures::executor::block_on(c));
    m.submit(|n| *n = 9);
    assert_eq!(h.join().unwrap(), Ok(9));
}
