//! The Send/Sync promises of the public types, positive and negative.
#![cfg(not(loom))]

use std::cell::Cell;
use std::rc::Rc;

use ast_mutex::{
    ArcAstGuard, AstGuard, AstMutex, Config, EnterArcAsync, EnterAsync, StateSet, WakeMode,
};
use sync_core::{assert_impl, assert_not_impl};

ast_mutex::states! { enum S { A, B } }

// The mutex is shared across threads whenever its data may move across them.
assert_impl!(AstMutex<S, Vec<u8>>: Send, Sync);
assert_impl!(AstMutex<S, Cell<u8>>: Send, Sync);
assert_not_impl!(AstMutex<S, Rc<u8>>: Send);
assert_not_impl!(AstMutex<S, Rc<u8>>: Sync);

// A guard moves like `&mut T` (the lock is not tied to a thread) and is
// shared like `&T`.
assert_impl!(AstGuard<'static, S, Vec<u8>>: Send, Sync);
assert_impl!(AstGuard<'static, S, Cell<u8>>: Send);
assert_not_impl!(AstGuard<'static, S, Cell<u8>>: Sync);
assert_not_impl!(AstGuard<'static, S, Rc<u8>>: Send);
assert_impl!(ArcAstGuard<S, Vec<u8>>: Send, Sync);
assert_impl!(ArcAstGuard<S, Cell<u8>>: Send);
assert_not_impl!(ArcAstGuard<S, Cell<u8>>: Sync);
assert_not_impl!(ArcAstGuard<S, Rc<u8>>: Send);

// The futures can be spawned on a multi-threaded executor.
assert_impl!(EnterAsync<'static, S, Vec<u8>>: Send, Sync, Unpin);
assert_impl!(EnterArcAsync<S, Vec<u8>>: Send, Sync, Unpin);
assert_impl!(EnterAsync<'static, S, Cell<u8>>: Send);
assert_not_impl!(EnterArcAsync<S, Rc<u8>>: Send);

// The initial state is kept in the mutex: a state type that is not `Sync`
// makes the mutex not `Sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RawState(*const u8);
impl ast_mutex::AbstractState for RawState {
    const COUNT: u32 = 1;
    fn index(self) -> u32 {
        0
    }
    fn from_index(_: u32) -> Self {
        RawState(std::ptr::null())
    }
}
assert_not_impl!(AstMutex<RawState, u8>: Sync);
assert_not_impl!(AstMutex<RawState, u8>: Send);

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

#[test]
fn a_guard_exits_on_another_thread() {
    let m = AstMutex::new(S::A, 1);
    let g = m.enter(S::A);
    std::thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(*g, 1);
            g.exit(S::B);
        });
    });
    assert_eq!(m.state(), Some(S::B));
    assert!(m.try_enter(S::B).is_some());
}
