//! Tasks' wakeups run one after another on a thread, never one inside
//! another.
//!
//! A task's waker is user code, and it may use the primitive that woke it:
//! an executor that polls the task inside `wake` takes the lock (or the
//! permits) the task was woken for and releases it, and that release wakes
//! the next queued task, inside the first waker. Run where they come up,
//! those wakeups nest: one unlock runs every queued task's waker one inside
//! the other, on a stack as deep as the queue (100,000 tasks queued on a
//! `Mutex` or a `Semaphore` overflowed an 8 MB stack and aborted the
//! process). So wakeups nest at most [`NEST`] deep: one that comes up
//! deeper is queued on the thread, and the outermost runs it once the
//! current one returns. The stack stays shallow, and every wakeup still runs
//! before the outermost operation returns, on the same thread. Only tasks are concerned: a thread's unpark happens when it is
//! handed its token (`Waiter::notify_later`), which runs no user code.
//!
//! A waker's panic is caught into the outermost operation's `Panics`, which
//! resumes it as that operation's docs say (the nested release that queued
//! the wakeup returns normally).

use sync_core::unwind::Panics;

/// How deep wakeups may nest before they are queued instead. A waker that
/// blocks until another task, woken by a release it made itself, makes
/// progress still works at shallow depths (that task's waker runs at once);
/// a chain through the whole queue stays this many frames deep.
#[cfg(not(loom))]
const NEST: u32 = 32;

/// Runs `wake` (which wakes tasks, catching their wakers' panics into the
/// `Panics` it is given) now or, if this thread is already [`NEST`]
/// wakeups deep, queues it for the outermost to run once the current one
/// returns.
#[cfg(not(loom))]
pub(crate) fn run(panics: &mut Panics, wake: impl FnOnce(&mut Panics) + 'static) {
    // `try_with`: a thread-local destructor may release a lock after this
    // thread's chain is gone; it then wakes where it is.
    let depth = DEPTH.try_with(|depth| {
        let d = depth.get();
        if d < NEST {
            depth.set(d + 1);
        }
        d
    });
    match depth {
        Ok(0) => {
            // The outermost: runs what deeper wakeups queued, one after
            // another, each from depth 1 again.
            let _outer = Outer;
            wake(panics);
            while let Some(next) = pop() {
                next(panics);
            }
        }
        Ok(d) if d < NEST => {
            let _level = Level;
            wake(panics);
        }
        Ok(_) => {
            let mut wake = Some(wake);
            let _ = LATER.try_with(|later| {
                let wake = wake.take().expect("taken once");
                later.borrow_mut().push_back(Box::new(wake));
            });
            if let Some(wake) = wake {
                wake(panics);
            }
        }
        Err(_) => wake(panics),
    }
}

/// Under loom every model thread's wakeups run where they come up: the
/// models hold no waker that reenters the primitive.
#[cfg(loom)]
pub(crate) fn run(panics: &mut Panics, wake: impl FnOnce(&mut Panics) + 'static) {
    wake(panics);
}

#[cfg(not(loom))]
type Later = Box<dyn FnOnce(&mut Panics)>;

#[cfg(not(loom))]
std::thread_local! {
    /// How many of this crate's wakeups this thread is running, one inside
    /// the other (at most `NEST`).
    static DEPTH: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    /// The wakeups queued past `NEST`, oldest first. Borrowed only to push
    /// or pop, never while a waker runs.
    static LATER: core::cell::RefCell<std::collections::VecDeque<Later>> =
        const { core::cell::RefCell::new(std::collections::VecDeque::new()) };
}

#[cfg(not(loom))]
fn pop() -> Option<Later> {
    LATER
        .try_with(|later| later.borrow_mut().pop_front())
        .ok()
        .flatten()
}

/// Leaves a nested wakeup's level (also if a wake unwinds past its catch;
/// each catches its waker's panic, so none should).
#[cfg(not(loom))]
struct Level;

#[cfg(not(loom))]
impl Drop for Level {
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

/// Ends the outermost wakeup: should a wake have unwound past its catch,
/// runs what is still queued (their panics are dropped: the thread is
/// unwinding); frees the queue's room if a long chain grew it (memory
/// follows the chain running now, not the longest there ever was); and
/// resets the depth.
#[cfg(not(loom))]
struct Outer;

#[cfg(not(loom))]
impl Drop for Outer {
    fn drop(&mut self) {
        while let Some(next) = pop() {
            next(&mut Panics::new());
        }
        let _ = LATER.try_with(|later| {
            let mut later = later.borrow_mut();
            if later.capacity() > 64 {
                *later = std::collections::VecDeque::new();
            }
        });
        let _ = DEPTH.try_with(|depth| depth.set(0));
    }
}
