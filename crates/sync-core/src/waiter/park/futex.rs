//! The futex parker (64-bit Linux, and loom's model of it): a word with
//! `thread::park`'s contract, the protocol of std's futex parker.

use core::time::Duration;

use crate::sync::atomic::AtomicU32;
use crate::sync::atomic::Ordering::{Acquire, Release};

/// Nobody is parked and no unpark is pending.
const EMPTY: u32 = 0;
/// An unpark came first: the next park returns at once.
const NOTIFIED: u32 = 1;
/// The owner is parked, or about to be, in [`Futex::wait`].
const PARKED: u32 = u32::MAX;

/// The system's sleep on a word.
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
#[derive(Debug)]
pub struct Parker<F> {
    word: AtomicU32,
    futex: F,
}

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
#[cfg(not(loom))]
#[derive(Debug)]
struct Os;

#[cfg(not(loom))]
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
#[cfg(not(loom))]
#[derive(Debug)]
pub(in crate::waiter) struct ThreadParker(Parker<Os>);

#[cfg(not(loom))]
impl ThreadParker {
    pub(in crate::waiter) fn new() -> Self {
        Self(Parker::new(Os))
    }

    #[inline]
    pub(in crate::waiter) fn reset(&mut self) {
        self.0.reset();
    }

    pub(in crate::waiter) fn park(&self, timeout: Option<Duration>) {
        self.0.park(timeout);
    }

    /// Unparks the owner (`_owner`: how the portable parker reaches it).
    #[inline]
    pub(in crate::waiter) fn unpark(&self, _owner: &crate::sync::thread::Thread) {
        self.0.unpark();
    }
}
