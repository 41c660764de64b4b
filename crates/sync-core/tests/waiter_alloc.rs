//! A thread's repeated waits allocate no node (`Waiter::for_thread` hands
//! out the thread's free node again), counted by this test binary's
//! allocator on the waiting thread alone.
#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::thread;

use sync_core::waiter::{Waiter, WaiterQueue};

struct Counting;

thread_local! {
    // Const-initialised and without a destructor: safe to touch from the
    // allocator.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; counting touches only a
// thread-local `Cell`, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// One wait as a primitive makes it: a node, queued, notified by the
/// consumer, waited on, dropped.
fn one_wait(queue: &WaiterQueue, token: usize) {
    let w = Waiter::for_thread(token);
    queue.push(Arc::clone(&w));
    // SAFETY: this thread is the queue's only consumer.
    let popped = unsafe { queue.pop() }.expect("just pushed");
    assert!(popped.notify(popped.data()));
    drop(popped);
    assert_eq!(w.wait(false), token);
}

#[test]
fn a_threads_waits_after_the_first_allocate_no_node() {
    thread::spawn(|| {
        let queue = WaiterQueue::new();
        one_wait(&queue, 1);
        let before = allocations();
        for token in 2..100 {
            one_wait(&queue, token);
        }
        assert_eq!(allocations() - before, 0, "a repeated wait allocated");

        // While the thread's node is held elsewhere, a wait allocates a
        // node of its own; once the thread's node is free, it is used
        // again.
        let held = Waiter::for_thread(1);
        let before = allocations();
        one_wait(&queue, 2);
        assert_eq!(allocations() - before, 1);
        drop(held);
        let before = allocations();
        one_wait(&queue, 3);
        assert_eq!(allocations() - before, 0);
    })
    .join()
    .unwrap();
}
