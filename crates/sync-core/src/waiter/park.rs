//! How a thread's [`Waiter`](super::Waiter) sleeps: on 64-bit Linux, on a
//! futex word inside the waiter's own node ([`Parker`]); elsewhere, and
//! under loom, with `thread::park`. (On 32-bit Linux the `timespec` the
//! futex call takes depends on the C library's time ABI, which std sorts
//! out per target: `thread::park` is the portable choice there.)
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
//! [`ModelFutex`], which sleeps and wakes as the kernel's futex does.

use core::time::Duration;

#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
use crate::sync::atomic::AtomicU32;
#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
use crate::sync::atomic::Ordering::{Acquire, Release};

/// Nobody is parked and no unpark is pending.
#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
const EMPTY: u32 = 0;
/// An unpark came first: the next park returns at once.
#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
const NOTIFIED: u32 = 1;
/// The owner is parked, or about to be, in [`Futex::wait`].
#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
const PARKED: u32 = u32::MAX;

/// The system's sleep on a word.
#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
pub trait Futex {
    /// Sleeps while `word` holds `expected` (compared atomically with going
    /// to sleep), for at most `timeout`; may return early for any reason.
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>);
    /// Wakes a thread sleeping in [`wait`](Self::wait) on `word`, if any
    /// (a wake with no sleeper is lost).
    fn wake(&self, word: &AtomicU32);
}

/// A word with `thread::park`'s contract for the one thread that parks on
/// it: a park returns after an unpark made before or during it, on its
/// timeout, or spuriously.
#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
#[derive(Debug)]
pub struct Parker<F> {
    word: AtomicU32,
    futex: F,
}

#[cfg(any(all(target_os = "linux", target_pointer_width = "64"), loom))]
impl<F: Futex> Parker<F> {
    /// A parker with no unpark pending.
    pub fn new(futex: F) -> Self {
        Self {
            word: AtomicU32::new(EMPTY),
            futex,
        }
    }

    /// Forgets an unpark that no park consumed (a node made new).
    #[cfg(not(loom))]
    #[inline]
    pub fn reset(&mut self) {
        *self.word.get_mut() = EMPTY;
    }

    /// Parks the calling thread, for at most `timeout`. Only one thread
    /// parks on a parker.
    pub fn park(&self, timeout: Option<Duration>) {
        // EMPTY → PARKED, or NOTIFIED → EMPTY (an unpark came first).
        // Acquire: pairs with `unpark`'s Release swap, so what the unparker
        // did before it is visible once this returns.
        if self.word.fetch_sub(1, Acquire) == NOTIFIED {
            return;
        }
        self.futex.wait(&self.word, PARKED, timeout);
        // Woken, timed out, interrupted or spurious alike: PARKED or
        // NOTIFIED → EMPTY; the caller looks at its own state again.
        // Acquire: as above, for an unpark that came meanwhile.
        self.word.swap(EMPTY, Acquire);
    }

    /// Makes the parked thread's current or next park return.
    #[inline]
    pub fn unpark(&self) {
        // Release: pairs with `park`'s Acquire.
        if self.word.swap(NOTIFIED, Release) == PARKED {
            self.futex.wake(&self.word);
        }
    }
}

/// Linux's futex, private to the process (64-bit targets: see the module).
#[cfg(all(target_os = "linux", target_pointer_width = "64", not(loom)))]
#[derive(Debug)]
pub(super) struct Os;

#[cfg(all(target_os = "linux", target_pointer_width = "64", not(loom)))]
impl Futex for Os {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|d| libc::timespec {
            // At most 68 years, which no kernel refuses: a park may return
            // early anyway.
            tv_sec: libc::time_t::from(i32::try_from(d.as_secs()).unwrap_or(i32::MAX)),
            tv_nsec: d.subsec_nanos().into(),
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(core::ptr::null(), |ts| ts as *const libc::timespec);
        // Every outcome (woken, EAGAIN, EINTR, ETIMEDOUT) is a return: the
        // caller looks at its word again. The kernel only reads the word.
        // SAFETY: `word` is a live, aligned u32 for the whole call (the
        // parker outlives its park); the timeout is a valid `timespec` or null.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
            );
        }
    }

    #[inline]
    fn wake(&self, word: &AtomicU32) {
        // SAFETY: FUTEX_WAKE uses the address only as a key: it neither
        // reads nor writes the word.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }
}

/// A futex for loom models: the word's check and the sleep happen under
/// one lock, which `wake` takes too, as the kernel's hash-bucket lock
/// does; a wake finds a sleeper or is lost. No timeouts (loom has no
/// time): a timed wait sleeps as an untimed one.
#[cfg(loom)]
#[derive(Debug, Default)]
pub struct ModelFutex {
    /// Whether a thread sleeps, and whether it was woken.
    sleep: loom::sync::Mutex<(bool, bool)>,
    woken: loom::sync::Condvar,
}

#[cfg(loom)]
impl Futex for ModelFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, _timeout: Option<Duration>) {
        let mut s = self.sleep.lock().expect("no panic under the lock");
        // SeqCst: the kernel's check is a full barrier.
        if word.load(crate::sync::atomic::Ordering::SeqCst) != expected {
            return;
        }
        *s = (true, false);
        while !s.1 {
            s = self.woken.wait(s).expect("no panic under the lock");
        }
        *s = (false, false);
    }

    fn wake(&self, _word: &AtomicU32) {
        let mut s = self.sleep.lock().expect("no panic under the lock");
        if s.0 {
            s.1 = true;
            self.woken.notify_one();
        }
    }
}

/// What a thread's waiter parks on.
#[cfg(all(target_os = "linux", target_pointer_width = "64", not(loom)))]
#[derive(Debug)]
pub(super) struct ThreadParker(Parker<Os>);

#[cfg(all(target_os = "linux", target_pointer_width = "64", not(loom)))]
impl ThreadParker {
    pub(super) fn new() -> Self {
        Self(Parker::new(Os))
    }

    #[inline]
    pub(super) fn reset(&mut self) {
        self.0.reset();
    }

    pub(super) fn park(&self, timeout: Option<Duration>) {
        self.0.park(timeout);
    }

    /// Unparks the owner (`_owner`: how the portable parker reaches it).
    #[inline]
    pub(super) fn unpark(&self, _owner: &crate::sync::thread::Thread) {
        self.0.unpark();
    }
}

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

    pub(super) fn park(&self, timeout: Option<Duration>) {
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
