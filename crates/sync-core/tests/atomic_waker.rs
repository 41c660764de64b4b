//! `AtomicWaker` with wakers that panic: a panicking `clone` or `drop` in
//! `register` leaves the slot usable (the races are in `loom_waiter.rs`).
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};

use sync_core::testing::HostileWaker;
use sync_core::waker::AtomicWaker;

fn register_panics(slot: &AtomicWaker, waker: &std::task::Waker) -> String {
    let payload = catch_unwind(AssertUnwindSafe(|| slot.register(waker)))
        .expect_err("the waker's panic reaches the caller of register");
    payload.downcast::<&str>().map(|s| s.to_string()).unwrap()
}

/// Once the slot is free again, a register stores its waker without
/// waking it, and a wake reaches it.
fn assert_slot_works(slot: &AtomicWaker) {
    let next = HostileWaker::new();
    slot.register(&next.waker());
    assert_eq!(
        next.wakes(),
        0,
        "register woke its own task at once: the slot is stuck in REGISTERING"
    );
    slot.wake();
    assert_eq!(
        next.wakes(),
        1,
        "the wake did not reach the registered waker"
    );
    slot.register(&next.waker());
    assert_eq!(next.wakes(), 1);
}

#[test]
fn a_clone_that_panics_keeps_the_old_waker_and_frees_the_slot() {
    let slot = AtomicWaker::new();
    let old = HostileWaker::new();
    slot.register(&old.waker());
    let bad = HostileWaker::new();
    bad.panic_on_clones(1);
    let msg = register_panics(&slot, &bad.waker());
    assert_eq!(msg, "HostileWaker: clone panics");
    // The old waker is still registered: a wake reaches the task.
    slot.wake();
    assert_eq!(old.wakes(), 1, "the wakeup was lost");
    assert_eq!(bad.wakes(), 0);
    assert_slot_works(&slot);
}

#[test]
fn a_clone_that_panics_on_an_empty_slot_frees_the_slot() {
    let slot = AtomicWaker::new();
    let bad = HostileWaker::new();
    bad.panic_on_clones(1);
    register_panics(&slot, &bad.waker());
    assert!(slot.take().is_none());
    assert_slot_works(&slot);
}

#[test]
fn a_replaced_waker_whose_drop_panics_leaves_the_new_one_registered() {
    let slot = AtomicWaker::new();
    let old = HostileWaker::new();
    slot.register(&old.waker());
    // The stored clone's drop panics when `register` replaces it.
    old.panic_on_drops(1);
    let new = HostileWaker::new();
    let msg = register_panics(&slot, &new.waker());
    assert_eq!(msg, "HostileWaker: drop panics");
    assert_eq!(new.wakes(), 0, "no busy self-wake");
    slot.wake();
    assert_eq!(new.wakes(), 1, "the wakeup was lost");
    assert_eq!(old.wakes(), 0);
    assert_slot_works(&slot);
}
