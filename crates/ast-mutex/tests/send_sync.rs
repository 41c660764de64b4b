//! The Send/Sync promises of the public types, positive and negative.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;

use ast_mutex::{AstGuard, AstMutex, Config, StateSet, WakeMode};
use sync_core::{assert_impl, assert_not_impl};

ast_mutex::states! { enum S { A, B } }

// The mutex is shared across threads whenever its data may move across them.
assert_impl!(AstMutex<S, Vec<u8>>: Send, Sync);
assert_impl!(AstMutex<S, Cell<u8>>: Send, Sync);
assert_not_impl!(AstMutex<S, Rc<u8>>: Send);
assert_not_impl!(AstMutex<S, Rc<u8>>: Sync);

// A guard stays on the thread that entered, and is shared like `&T`.
assert_not_impl!(AstGuard<'static, S, Vec<u8>>: Send);
assert_impl!(AstGuard<'static, S, Vec<u8>>: Sync);
assert_not_impl!(AstGuard<'static, S, Cell<u8>>: Sync);

// Plain values.
assert_impl!(StateSet<S>: Send, Sync, Copy);
assert_impl!(Config: Send, Sync, Copy);
assert_impl!(WakeMode: Send, Sync, Copy);
assert_impl!(S: Send, Sync, Copy, Ord, std::hash::Hash);

#[test]
fn guards_are_shared_by_reference_across_scoped_threads() {
    let m = AstMutex::new(S::A, vec![1, 2, 3]);
    let g = m.enter(S::A);
    let total: i32 = std::thread::scope(|s| {
        let a = s.spawn(|| g.iter().sum::<i32>());
        let b = s.spawn(|| g.len() as i32);
        a.join().unwrap() + b.join().unwrap()
    });
    assert_eq!(total, 9);
    g.exit(S::B);
}
