//! [`ThreadSleep`]: a blocked thread's sleep, for a primitive that wakes
//! it through something other than a [`Waiter`](super::Waiter) (a `Waker`
//! it registers where a task's would go).

use crate::sync::thread::{self, Thread};

use super::park::ThreadParker;

/// One thread's sleep, which any thread can end: [`sleep`](Self::sleep)
/// returns after a [`wake`](Self::wake) made before or during it, or
/// spuriously, as `thread::park` does. It sleeps where a thread's
/// [`Waiter`](super::Waiter) does (on 64-bit Linux, a futex word of its
/// own; elsewhere, and under loom, `thread::park`), so a `wake` that comes
/// after the sleeper has moved on never cuts short a `thread::park` of
/// the caller's own there.
///
/// Made by the thread that sleeps on it, and slept on by that thread only;
/// share it (in an `Arc`, for example behind a `Waker`) with the threads
/// that wake it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use sync_core::waiter::ThreadSleep;
///
/// let sleep = Arc::new(ThreadSleep::new());
/// let done = Arc::new(AtomicBool::new(false));
/// let (s, d) = (Arc::clone(&sleep), Arc::clone(&done));
/// let t = std::thread::spawn(move || {
///     d.store(true, Ordering::Release);
///     s.wake();
/// });
/// while !done.load(Ordering::Acquire) {
///     sleep.sleep();
/// }
/// t.join().unwrap();
/// ```
#[derive(Debug)]
pub struct ThreadSleep {
    parker: ThreadParker,
    owner: Thread,
}

impl ThreadSleep {
    /// The calling thread's sleep, with no wake pending.
    pub fn new() -> Self {
        Self {
            parker: ThreadParker::new(),
            owner: thread::current(),
        }
    }

    /// Sleeps until a [`wake`](Self::wake) made before or during it (which
    /// it consumes), or spuriously: the caller looks at what it waits for
    /// again, in a loop.
    ///
    /// # Panics
    ///
    /// In debug builds, if the calling thread is not the one that made it.
    pub fn sleep(&self) {
        debug_assert!(
            thread::current().id() == self.owner.id(),
            "a ThreadSleep is slept on only by the thread that made it"
        );
        self.parker.park(None);
    }

    /// Ends the owner's current [`sleep`](Self::sleep), or its next one.
    #[inline]
    pub fn wake(&self) {
        self.parker.unpark(&self.owner);
    }
}

impl Default for ThreadSleep {
    fn default() -> Self {
        Self::new()
    }
}
