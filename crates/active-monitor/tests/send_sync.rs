//! The Send/Sync promises of the public types, positive and negative.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use active_monitor::{
    Builder, Completion, DataMut, Discarded, Monitor, NoState, Order, SameMonitor, Served,
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
    assert_eq!(h.join().unwrap(), 9);
}
