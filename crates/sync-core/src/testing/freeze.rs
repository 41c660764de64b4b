//! Freezing a thread at a random point of its loop: a signal (`SIGUSR1`)
//! whose handler spins until the test lets it go. The family's tests use
//! it to stop a thread between two steps of a protocol (a send between its
//! swap on the tail and its link, a sweep between its two reads) while
//! other threads go on.
//!
//! One frozen thread at a time per test binary (the handler's flags are
//! statics), and `SIGUSR1` must not be used otherwise in a binary that
//! uses this module.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Set before the thread is signalled: the handler spins while it is set.
static HOLD: AtomicBool = AtomicBool::new(false);
/// Set by the handler while it holds the thread.
static HELD: AtomicBool = AtomicBool::new(false);

extern "C" fn hold(_: libc::c_int) {
    // Async-signal-safe: atomics only.
    HELD.store(true, SeqCst);
    while HOLD.load(SeqCst) {
        std::hint::spin_loop();
    }
    HELD.store(false, SeqCst);
}

/// Installs the handler (once per test, before any
/// [`Freezable::freeze`]).
///
/// # Panics
///
/// If `sigaction` fails.
pub fn install() {
    // SAFETY: installs a handler that only touches atomics; SIGUSR1 is not
    // used elsewhere in a test binary that uses this module.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = hold as extern "C" fn(libc::c_int) as libc::sighandler_t;
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
}

/// A thread that can be frozen, named by its id: one that
/// [`Freezable::spawn`] started, or one that named itself with
/// [`Target::current`] (a thread a library starts, reached through code
/// it runs: a served monitor's task).
#[derive(Clone, Copy, Debug)]
pub struct Target {
    id: libc::pthread_t,
}

impl Target {
    /// The calling thread.
    pub fn current() -> Self {
        // SAFETY: pthread_self has no preconditions.
        let id = unsafe { libc::pthread_self() };
        Target { id }
    }

    /// Stops the thread wherever it is, until [`release`] (or
    /// [`let_go`]); returns once it is held.
    ///
    /// # Safety
    ///
    /// The id still names the thread: it has not ended, or it is a joinable
    /// thread not joined yet (the id of a thread that has gone may name
    /// another one, or none).
    ///
    /// # Panics
    ///
    /// If the signal cannot be sent.
    pub unsafe fn freeze(&self) {
        HOLD.store(true, SeqCst);
        // SAFETY: the id names a thread (our caller's contract).
        assert_eq!(unsafe { libc::pthread_kill(self.id, libc::SIGUSR1) }, 0);
        while !HELD.load(SeqCst) {
            thread::yield_now();
        }
    }

    /// The CPU time the thread has run so far.
    ///
    /// # Safety
    ///
    /// As for [`freeze`](Self::freeze): the id still names the thread.
    ///
    /// # Panics
    ///
    /// If the thread's CPU clock cannot be read.
    pub unsafe fn cpu_time(&self) -> Duration {
        let mut clock: libc::clockid_t = 0;
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: plain FFI calls about a thread that the id still names
        // (our caller's contract); `clock` and `t` are valid to write.
        unsafe {
            assert_eq!(libc::pthread_getcpuclockid(self.id, &mut clock), 0);
            assert_eq!(libc::clock_gettime(clock, &mut t), 0);
        }
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }
}

/// A thread that can be frozen.
#[derive(Debug)]
pub struct Freezable<R> {
    target: Target,
    thread: thread::JoinHandle<R>,
}

impl<R: Send + 'static> Freezable<R> {
    /// Spawns `body` on a thread that [`freeze`](Self::freeze) can stop.
    pub fn spawn(body: impl FnOnce() -> R + Send + 'static) -> Self {
        let (target_tx, target_rx) = mpsc::channel();
        let thread = thread::spawn(move || {
            target_tx.send(Target::current()).unwrap();
            body()
        });
        let target = target_rx.recv().unwrap();
        Freezable { target, thread }
    }

    /// Stops the thread wherever it is, until [`release`] (or
    /// [`let_go`]); returns once it is held.
    ///
    /// # Panics
    ///
    /// If the signal cannot be sent.
    pub fn freeze(&self) {
        // SAFETY: we hold the thread's handle, not joined: its id still
        // names it (the tests' bodies also run until told to stop, after
        // the last freeze).
        unsafe { self.target.freeze() }
    }

    /// The CPU time the thread has run so far.
    ///
    /// # Panics
    ///
    /// If the thread's CPU clock cannot be read.
    pub fn cpu_time(&self) -> Duration {
        // SAFETY: as in `freeze`: not joined, its id still names it.
        unsafe { self.target.cpu_time() }
    }

    /// The thread, for what takes a [`Target`].
    pub fn target(&self) -> Target {
        self.target
    }

    /// Joins the thread.
    ///
    /// # Panics
    ///
    /// If the thread panicked.
    pub fn join(self) -> R {
        self.thread.join().unwrap()
    }
}

/// Lets the frozen thread go on, without waiting for it (a watchdog's or a
/// waiting test's release).
pub fn let_go() {
    HOLD.store(false, SeqCst);
}

/// Lets the frozen thread go on, and returns once it has left the handler.
pub fn release() {
    let_go();
    while HELD.load(SeqCst) {
        thread::yield_now();
    }
}

/// Lets the frozen thread go once `progress` (a counter the test bumps at
/// each trial) has not moved for `stall`: a test whose wait depends on a
/// frozen thread then fails on its own assertions instead of hanging.
/// Stops, and is joined, when dropped.
#[derive(Debug)]
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts watching `progress`.
    pub fn start(progress: &'static AtomicU64, stall: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut seen = (u64::MAX, Instant::now());
                while !stop.load(SeqCst) {
                    thread::sleep(Duration::from_millis(10));
                    let now = progress.load(SeqCst);
                    if now != seen.0 {
                        seen = (now, Instant::now());
                    } else if seen.1.elapsed() > stall {
                        let_go();
                    }
                }
            })
        };
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
