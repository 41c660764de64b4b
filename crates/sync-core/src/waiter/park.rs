//! How a thread's [`Waiter`](super::Waiter) sleeps: on 64-bit Linux, on a
//! futex word inside the waiter's own node (`Parker`, in `park/futex.rs`);
//! elsewhere, and under loom, with `thread::park`. (On 32-bit Linux the
//! `timespec` the futex call takes depends on the C library's time ABI,
//! which std sorts out per target: `thread::park` is the portable choice
//! there.)
//!
//! Why not `thread::park` everywhere: a notify is the last step of an
//! unlock (or a send, a release) that usually runs with cold caches, after
//! the notifier held the lock for a while. `Thread::unpark` reaches its
//! system call through a chain of calls into std, spread over the binary,
//! and through the parker's own line; the word beside the token is written
//! on the token's line, and the system call is made from the notifier's
//! own code. No unpark reaches the thread itself either: a wake-up that
//! comes after the waiter has moved on cannot cut short a `thread::park`
//! of the caller's own.
//!
//! The protocol is std's futex parker: the same three states and the same
//! orderings. Its loom model (`tests/loom_park.rs`) runs it over
//! `ModelFutex`, which sleeps and wakes as the kernel's futex does.

#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
mod futex;
#[cfg(all(target_os = "linux", target_pointer_width = "64", not(loom)))]
pub(super) use futex::ThreadParker;
#[cfg(loom)]
pub use futex::{Futex, ModelFutex, Parker};

/// What a thread's waiter parks on: the thread's own parker.
#[cfg(not(all(target_os = "linux", target_pointer_width = "64", not(loom))))]
#[derive(Debug)]
pub(super) struct ThreadParker;

#[cfg(not(all(target_os = "linux", target_pointer_width = "64", not(loom))))]
impl ThreadParker {
    pub(super) fn new() -> Self {
        Self
    }

    #[inline]
    pub(super) fn reset(&mut self) {}

    pub(super) fn park(&self, timeout: Option<core::time::Duration>) {
        match timeout {
            None => crate::sync::thread::park(),
            #[cfg(not(loom))]
            Some(t) => crate::sync::thread::park_timeout(t),
            // `Waiter::wait_until` never parks under loom.
            #[cfg(loom)]
            Some(_) => unreachable!("no timed park under loom"),
        }
    }

    #[inline]
    pub(super) fn unpark(&self, owner: &crate::sync::thread::Thread) {
        owner.unpark();
    }
}
