//! [`ResultSlot`]: the one-shot slot the executor writes a task's result
//! into, and [`HasSlot`], what a completion reads it from.

use core::any::Any;
use core::mem::MaybeUninit;
use core::task::{RawWaker, RawWakerVTable, Waker};
use std::panic::resume_unwind;

use core::ptr::addr_of_mut;
use std::sync::Arc;
use sync_core::sync::atomic::Ordering::*;
use sync_core::sync::cell::UnsafeCell;
use sync_core::waiter::ThreadSleep;
use sync_core::waker::AtomicWaker;

use crate::error::Discarded;
use crate::unwind;

use super::*;

/// A one-shot result slot: written once by the executor, read once by the
/// [`Completion`].
///
/// Its [`Finish`] says how far the task got and wakes the submitters waiting
/// for it under strict program order; `waker` is the completion owner's (a
/// task, or a thread in [`Completion::wait`]).
///
/// The result is kept apart from how the task ended, so that a body writes
/// it in place ([`value_ptr`](Self::value_ptr)) and a waiter reads it out
/// once ([`read_value`](Self::read_value)): a large result is never moved
/// through an `Outcome` on either thread's stack.
pub(crate) struct ResultSlot<R> {
    finish: Finish,
    /// The result, once the body wrote it (`ended` is [`Ended::Value`]),
    /// until the completion's owner reads it out.
    value: UnsafeCell<Value<R>>,
    ended: UnsafeCell<Ended>,
    waker: AtomicWaker,
}

/// A result written in place, and whether it is there: its drop drops it
/// if nobody took it. The slot itself has no `Drop`: its cells are dropped
/// as plain values (the last `Arc`'s drop orders that after every access;
/// loom, which does not see std's `Arc`, would take an access there for a
/// race with the owner's take).
struct Value<R> {
    r: MaybeUninit<R>,
    init: bool,
}

impl<R> Drop for Value<R> {
    fn drop(&mut self) {
        if self.init {
            // SAFETY: `init`: written by the body, not read out.
            unsafe { self.r.assume_init_drop() }
        }
    }
}

/// How a task ended, as its slot keeps it until the result is taken.
///
/// A panic's payload is boxed once more: a thin pointer keeps `Ended` at
/// two words, and with it a small task within glibc's fast-bin size (see
/// `AsyncTask`). The extra allocation is on the panic path only.
enum Ended {
    /// Not yet, or taken.
    Not,
    /// The body returned: the slot's `value` holds the result.
    Value,
    Panicked(Box<Box<dyn Any + Send + 'static>>),
    Discarded,
}

// SAFETY: `value` and `ended` are written once by the executor before the
// state becomes READY (Release) and read by the single owner of the
// completion after it sees READY (Acquire); R crosses threads, hence
// R: Send.
unsafe impl<R: Send> Send for ResultSlot<R> {}
// SAFETY: as for `Send`; no `&R` is ever shared.
unsafe impl<R: Send> Sync for ResultSlot<R> {}

impl<R> ResultSlot<R> {
    pub(crate) fn new() -> Self {
        Self {
            finish: Finish::new(),
            value: UnsafeCell::new(Value {
                r: MaybeUninit::uninit(),
                init: false,
            }),
            ended: UnsafeCell::new(Ended::Not),
            waker: AtomicWaker::new(),
        }
    }

    /// Initializes a slot in place, leaving its value (a `MaybeUninit`)
    /// as it is: a large result's room is never built on the stack.
    ///
    /// # Safety
    ///
    /// `p` is valid for writes of a `ResultSlot<R>`; the slot is
    /// initialized afterwards.
    #[cfg(not(loom))]
    pub(crate) unsafe fn init(p: *mut Self) {
        // SAFETY: our caller's contract; `value` needs no initialization.
        unsafe {
            addr_of_mut!((*p).finish).write(Finish::new());
            // `value`: its flag only (the cell is `repr(transparent)`
            // without loom); the value itself is written by the body.
            let value = addr_of_mut!((*p).value).cast::<Value<R>>();
            addr_of_mut!((*value).init).write(false);
            addr_of_mut!((*p).ended).write(UnsafeCell::new(Ended::Not));
            addr_of_mut!((*p).waker).write(AtomicWaker::new());
        }
    }

    pub(crate) fn finish(&self) -> &Finish {
        &self.finish
    }

    /// Where the body writes the result, before
    /// [`complete_written`](Self::complete_written).
    ///
    /// # Safety
    ///
    /// Only for the executor that owns the task (it claimed it), which
    /// writes it at most once.
    pub(crate) unsafe fn value_ptr(&self) -> *mut R {
        // SAFETY: a pointer into the slot, for the executor's one write.
        self.value
            .with_mut(|v| unsafe { addr_of_mut!((*v).r) }.cast::<R>())
    }

    /// The body wrote the result at [`value_ptr`](Self::value_ptr): marks
    /// the task finished and wakes the waiters.
    ///
    /// # Safety
    ///
    /// As [`complete`](Self::complete), after the write.
    pub(crate) unsafe fn complete_written(&self) {
        self.value.with_mut(|v| {
            // SAFETY: only the executor writes, once, before READY.
            unsafe { (*v).init = true };
        });
        self.ended.with_mut(|e| {
            // SAFETY: only the executor writes, once, before READY.
            unsafe { *e = Ended::Value };
        });
        self.publish();
    }

    /// Stores the outcome and wakes the waiters.
    ///
    /// # Safety
    ///
    /// Called at most once, by the executor that owns the task (it claimed
    /// it, or won an OR's taken flag).
    pub(crate) unsafe fn complete(&self, outcome: Outcome<R>) {
        let ended = match outcome {
            Outcome::Value(r) => {
                self.value.with_mut(|v| {
                    // SAFETY: our caller's contract: the one write.
                    unsafe {
                        (*v).r.write(r);
                        (*v).init = true;
                    }
                });
                Ended::Value
            }
            Outcome::Panicked(p) => Ended::Panicked(Box::new(p)),
            Outcome::Discarded => Ended::Discarded,
        };
        self.ended.with_mut(|e| {
            // SAFETY: only the executor writes, once, before READY.
            unsafe { *e = ended };
        });
        self.publish();
    }

    /// The task panicked: [`complete`](Self::complete) without an
    /// `Outcome<R>` (as large as a result) on the caller's frame.
    ///
    /// # Safety
    ///
    /// As [`complete`](Self::complete).
    pub(crate) unsafe fn complete_panicked(&self, p: Box<dyn Any + Send + 'static>) {
        self.complete_other(Ended::Panicked(Box::new(p)));
    }

    /// The task never ran: `complete(Outcome::Discarded)`, without an
    /// `Outcome<R>` on the caller's frame.
    ///
    /// # Safety
    ///
    /// As [`complete`](Self::complete).
    pub(crate) unsafe fn complete_discarded(&self) {
        self.complete_other(Ended::Discarded);
    }

    fn complete_other(&self, ended: Ended) {
        self.ended.with_mut(|e| {
            // SAFETY: only the executor writes, once, before READY (the
            // callers' contract).
            unsafe { *e = ended };
        });
        self.publish();
    }

    fn publish(&self) {
        self.finish.set_ready();
        // The AtomicWaker's RMW (`take`) orders this wake after the READY
        // store for a register that looks at the state after registering.
        let Some(waker) = self.waker.take() else {
            return;
        };
        if is_thread_waker(&waker) {
            // A blocked `wait`: an unpark, no user code.
            waker.wake();
        } else {
            // A task's waker is user code, which may poll the task on the
            // spot and go on to use this monitor (a `call` after the
            // `.await`): as an awaiter's (`wake_awaiter`), it runs once
            // this thread has let go of the monitor, where such a call
            // finds it free (woken under it, the call found the monitor
            // held by its own thread and panicked). Its panic is resumed
            // then too (see `unwind`).
            unwind::wake_task_after_holder(waker);
        }
    }

    /// Wakes the future that awaits the task without its finishing (the
    /// task's precondition holds: see `Runner`).
    pub(crate) fn wake_awaiter(&self) {
        // A waker is user code, which may poll the future on the spot: it
        // runs once this thread has let go of the monitor, so that such a
        // poll finds it free and runs the task itself (woken under it, the
        // poll queued the task again, and the holder signalled it again,
        // for ever). Its panic is resumed then too (see `unwind`).
        if let Some(waker) = self.waker.take() {
            unwind::wake_task_later(waker);
        }
    }

    /// Takes the result, in place: the value read straight out of the slot
    /// into the caller's place. A panic resumes here; a discarded task is
    /// `Err(Discarded)` ([`read_value`](Self::read_value) for the value
    /// alone).
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, and the caller is the completion's single
    /// owner, taking the result once.
    pub(super) unsafe fn take_result(&self) -> Result<R, Discarded> {
        if self.ended_is_value() {
            // SAFETY: our caller's contract.
            Ok(unsafe { self.read_value() })
        } else {
            // SAFETY: our caller's contract.
            Err(unsafe { self.take_other() })
        }
    }

    /// Whether the task's body returned (its value is in the slot).
    fn ended_is_value(&self) -> bool {
        self.ended.with(|e| {
            // SAFETY: read by the completion's owner after READY (or by
            // nobody else before it).
            matches!(unsafe { &*e }, Ended::Value)
        })
    }

    /// Reads the value out (a body's result).
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, the caller is the completion's single
    /// owner, taking the result once, and `ended_is_value()`.
    pub(crate) unsafe fn read_value(&self) -> R {
        // Marked taken before the read, which is the tail, so that the
        // value goes straight to our caller's place.
        self.value.with_mut(|v| {
            // SAFETY: our caller's contract: the single owner, once.
            unsafe {
                (*v).init = false;
                (*v).r.assume_init_read()
            }
        })
    }

    /// A task that did not return: resumes its panic, or `Discarded`.
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, the caller is the completion's single
    /// owner, taking the result once, and not `ended_is_value()`.
    unsafe fn take_other(&self) -> Discarded {
        let ended = self.ended.with_mut(|e| {
            // SAFETY: our caller's contract: the single owner, once.
            unsafe { core::mem::replace(&mut *e, Ended::Not) }
        });
        match ended {
            Ended::Panicked(p) => resume_unwind(*p),
            Ended::Discarded => Discarded,
            Ended::Value | Ended::Not => unreachable!("a completion's outcome is taken once"),
        }
    }

    /// The result of a finished task, or the task's panic resumed; panics
    /// if it was discarded (`Completion::wait`).
    ///
    /// # Safety
    ///
    /// `is_done()` returned true, and the caller is the completion's single
    /// owner, taking the result once.
    pub(super) unsafe fn take_or_panic(&self) -> R {
        if self.ended_is_value() {
            // SAFETY: our caller's contract.
            unsafe { self.read_value() }
        } else {
            // SAFETY: our caller's contract.
            let e = unsafe { self.take_other() };
            panic!("{e}")
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        // Acquire: pairs with the Release store in `Finish::set_ready`.
        self.finish.state.load(Acquire) == READY
    }

    pub(super) fn poll_done(&self, cx: &Waker) -> bool {
        // Finishing is final: a poll that sees it only after registering
        // takes its waker back (see `register_unless`), so that it is not
        // dropped with the task by whoever drops the task last (a combiner
        // or a server, serving other callers).
        self.waker
            .register_unless(cx, || self.is_done().then_some(()))
            .is_some()
    }

    /// Parks the calling thread until the outcome is ready.
    ///
    /// # Panics
    ///
    /// Before it parks, if `for_ever()`: the outcome can only come from
    /// a monitor that this thread holds below the wait (see
    /// `Completion::wait`'s `# Panics`).
    pub(super) fn block(&self, for_ever: impl FnOnce() -> bool) {
        // The completion's watch (see `finish::watch` for why it is not
        // the family's).
        if super::finish::watch(|| self.is_done()) {
            return;
        }
        // Looked at only once the watch has failed: a wait that is served
        // in time never reads the thread's frames. Nothing has changed yet
        // (the kept task, the deferred drops), so the panic leaves the
        // thread as it found it, and the completion, dropped as it unwinds,
        // lets the task run when the monitor is free.
        assert!(
            self.is_done() || !for_ever(),
            "a wait for a task of a monitor whose task this thread is running (or runs below, \
             or a waker or task it polls): the monitor is not free until that task returns, so \
             the wait would be for ever (take the result after the task returns, or .await it \
             in an async task)"
        );
        // The thread is about to park: time to drop the task it kept from
        // its last wait (see `kept`), off its way back to its caller.
        super::kept::release_kept();
        // And the finished tasks its record of program order still points
        // to, whose memory it would keep until its next submission.
        crate::order::forget_dropped();
        unwind::before_park();
        let sleep = own_sleep();
        let waker = thread_waker(&sleep);
        while !self.poll_done(&waker) {
            // A wake between the register and the sleep leaves the sleep's
            // wake pending: the sleep returns at once.
            sleep.sleep();
        }
    }
}

/// The calling thread's sleep: its own ([`OWN_SLEEP`]), made at its first
/// blocking wait, so that a wait neither allocates nor, once woken, frees
/// one (a fresh sleep's last reference may be dropped after the wake-up,
/// on the woken thread's way out). A thread whose thread-locals are being
/// destroyed (a wait from a thread-local's `Drop`) gets a fresh one.
fn own_sleep() -> Arc<ThreadSleep> {
    OWN_SLEEP
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::new(ThreadSleep::new()))
}

/// A `Waker` that ends `sleep`'s sleep (its thread's): a count of the
/// `Arc`, with [`THREAD_WAKER`] as its vtable. Waking it runs sync-core's
/// parker (on 64-bit Linux a futex word of the thread's own, not
/// `Thread::unpark`).
fn thread_waker(sleep: &Arc<ThreadSleep>) -> Waker {
    let sleep = Arc::into_raw(Arc::clone(sleep));
    // SAFETY: `THREAD_WAKER`'s functions take a pointer from
    // `Arc::<ThreadSleep>::into_raw` that owns one count, which this is.
    unsafe { Waker::from_raw(RawWaker::new(sleep.cast(), &THREAD_WAKER)) }
}

/// Whether `waker` is a blocked thread's (made by [`thread_waker`]), not a
/// task's: waking it runs no user code. A `static`'s address is unique, so
/// the vtable tells.
fn is_thread_waker(waker: &Waker) -> bool {
    core::ptr::eq(waker.vtable(), &THREAD_WAKER)
}

/// The vtable of the wakers [`thread_waker`] makes. Each function takes
/// the data pointer of such a waker: from `Arc::<ThreadSleep>::into_raw`,
/// owning one count of the `Arc`.
static THREAD_WAKER: RawWakerVTable = RawWakerVTable::new(
    thread_waker_clone,
    thread_waker_wake,
    thread_waker_wake_by_ref,
    thread_waker_drop,
);

/// # Safety
///
/// `p` is a live thread waker's data pointer (see [`THREAD_WAKER`]).
unsafe fn thread_waker_clone(p: *const ()) -> RawWaker {
    // SAFETY: our caller's contract: a live `Arc<ThreadSleep>`; the new
    // count is the clone's.
    unsafe { Arc::increment_strong_count(p.cast::<ThreadSleep>()) };
    RawWaker::new(p, &THREAD_WAKER)
}

/// # Safety
///
/// As [`thread_waker_clone`]; consumes the waker's count.
unsafe fn thread_waker_wake(p: *const ()) {
    // SAFETY: our caller's contract: the waker's own count, given back once.
    let sleep = unsafe { Arc::from_raw(p.cast::<ThreadSleep>()) };
    sleep.wake();
}

/// # Safety
///
/// As [`thread_waker_clone`].
unsafe fn thread_waker_wake_by_ref(p: *const ()) {
    // SAFETY: our caller's contract: a live `Arc<ThreadSleep>`, borrowed.
    unsafe { &*p.cast::<ThreadSleep>() }.wake();
}

/// # Safety
///
/// As [`thread_waker_clone`]; consumes the waker's count.
unsafe fn thread_waker_drop(p: *const ()) {
    // SAFETY: our caller's contract: the waker's own count, given back once.
    drop(unsafe { Arc::from_raw(p.cast::<ThreadSleep>()) });
}

// Per thread; under loom, per model thread (loom's threads share one OS
// thread, whose own thread-local would wake another model thread).
#[cfg(not(loom))]
std::thread_local! {
    static OWN_SLEEP: Arc<ThreadSleep> = Arc::new(ThreadSleep::new());
}
#[cfg(loom)]
sync_core::loom::thread_local! {
    static OWN_SLEEP: Arc<ThreadSleep> = Arc::new(ThreadSleep::new());
}

/// Whatever holds a [`ResultSlot`]: the task itself, so that a submitted
/// task and its completion share one allocation.
pub(crate) trait HasSlot<R>: Send + Sync {
    fn slot(&self) -> &ResultSlot<R>;

    /// Withdraws the task if it has not started ([`Completion::cancel`]):
    /// `true` if it will never run (its body is dropped, by now or by the
    /// executors that still hold it). The default refuses.
    fn cancel(&self) -> bool {
        false
    }

    /// Who runs the task's body, for an asynchronous task whose future may
    /// run it itself; `None` for the others.
    fn runner(&self) -> Option<&crate::task::Runner> {
        None
    }
}

impl<R: Send> HasSlot<R> for ResultSlot<R> {
    fn slot(&self) -> &ResultSlot<R> {
        self
    }
}
