//! Asynchronous tasks (`submit`, `when` and their async forms): who runs
//! the body, and the task shared with its `Completion`.

use super::*;

/// [`Runner::who`]: the monitor's holder runs the body (a task whose
/// [`Completion`] is handed out: dropping it lets the task run).
pub(crate) const BY_HOLDER: u8 = 0;
/// [`Runner::who`]: the future that awaits the task runs the body itself,
/// in its poll, holding the monitor; a holder that finds the task runnable
/// only removes it and signals the future (`when_async`, awaited).
pub(crate) const BY_AWAITER: u8 = 1;
/// [`Runner::who`]: the awaiting future holds the monitor and executes the
/// task now (its own poll): a precondition that holds runs the body here.
pub(crate) const AWAITER_HOLDS: u8 = 2;

/// Who runs an asynchronous task's body, and the signal a holder leaves
/// for an awaiting future that runs it itself.
///
/// Why an awaited `when_async` runs in its own future: a holder on another
/// thread that ran it could do so between the future's last `Pending` and
/// its drop (a timeout that fired meanwhile), and its result (a taken
/// item) would be dropped with the future. Run in the future's own poll,
/// a body's result is always output: a dropped future has taken nothing.
pub(crate) struct Runner {
    /// [`BY_HOLDER`], [`BY_AWAITER`] or [`AWAITER_HOLDS`]. Relaxed: written
    /// by the future before the task is published (the queue's Release
    /// push) or while it holds the monitor, read by holders (the lock's
    /// Acquire/Release orders both).
    who: AtomicU8,
    /// A holder found the precondition true and removed the task (it is
    /// neither queued nor waiting): the future submits it again.
    signalled: AtomicBool,
}

impl Runner {
    fn new() -> Self {
        Self {
            who: AtomicU8::new(BY_HOLDER),
            signalled: AtomicBool::new(false),
        }
    }

    /// Sets who runs the body (see [`Runner`]'s `who`).
    pub(crate) fn set(&self, who: u8) {
        self.who.store(who, Relaxed);
    }

    /// Whether a holder signalled since the last look (and clears it).
    pub(crate) fn take_signal(&self) -> bool {
        // Acquire: pairs with the Release store in `signal` (the task has
        // left the monitor's lists before).
        self.signalled.swap(false, Acquire)
    }

    fn signal<R>(&self, slot: &ResultSlot<R>) {
        // Release: pairs with `take_signal`'s Acquire.
        // An RMW, not a store: the signal stays set until the future's
        // swap reads it (loom's models of a plain store here let the
        // future's later swap read the initial value).
        self.signalled.swap(true, Release);
        slot.wake_awaiter();
    }
}

/// The largest task a thread keeps after a blocking wait (see
/// `AsyncTask::KEPT_BY_WAITER`): a task holds room for its result.
const KEPT_TASK_MAX_BYTES: usize = 256;

/// An asynchronous task: precondition, body and result slot in one
/// allocation shared with its `Completion`.
pub(crate) struct AsyncTask<T, S, P, B, R> {
    pre: P,
    /// Taken by whoever wins the slot's `Finish`: the monitor's holder
    /// (`claim`, then `run` or `discard`) or `cancel` (on the canceller's
    /// thread).
    body: UnsafeCell<Option<B>>,
    slot: ResultSlot<R>,
    runner: Runner,
    _data: PhantomData<fn(&mut T, S)>,
}

// SAFETY: `pre` is used by the monitor's holder only, one holder at a time
// with a happens-before edge between holders (the lock), as with a
// `Mutex<P>`. `body` is taken once, by whoever wins the `Finish` CAS
// (`claim` by the holder, or `cancel` on any thread): the CAS makes that
// one thread its owner, so moving it there needs only B: Send. P, B: Send
// suffice; the slot is Sync for R: Send.
unsafe impl<T, S, P: Send, B: Send, R: Send> Sync for AsyncTask<T, S, P, B, R> {}

impl<T, S, P, B, R> AsyncTask<T, S, P, B, R> {
    /// The task, allocated where it stays: its result slot (as large as a
    /// result) is never built on the stack and moved.
    #[cfg(not(loom))]
    pub(crate) fn new_arc(pre: P, body: B) -> Arc<Self> {
        use core::ptr::addr_of_mut;
        let mut task = Arc::<Self>::new_uninit();
        let p = Arc::get_mut(&mut task)
            .expect("just allocated")
            .as_mut_ptr();
        // Every field is written once, but the slot's value, a
        // `MaybeUninit` in a transparent cell that needs no initialization
        // (see `ResultSlot::init`); then the task is initialized.
        // SAFETY: `p` points to the new allocation, valid for writes, and
        // every field is initialized before `assume_init` (above).
        unsafe {
            addr_of_mut!((*p).pre).write(pre);
            addr_of_mut!((*p).body).write(UnsafeCell::new(Some(body)));
            ResultSlot::init(addr_of_mut!((*p).slot));
            addr_of_mut!((*p).runner).write(Runner::new());
            addr_of_mut!((*p)._data).write(PhantomData);
            task.assume_init()
        }
    }

    /// Under loom, whose cells cannot be left uninitialized: built and
    /// moved (models use small results).
    #[cfg(loom)]
    pub(crate) fn new_arc(pre: P, body: B) -> Arc<Self> {
        Arc::new(Self {
            pre,
            body: UnsafeCell::new(Some(body)),
            slot: ResultSlot::new(),
            runner: Runner::new(),
            _data: PhantomData,
        })
    }
}

/// What a submission hands out of a new asynchronous task: the queued
/// task, its completion, and, if program order records it (strict order,
/// or a task with a precondition), the task as the submitter's record
/// holds it.
pub(crate) type Handles<T, S, R> = (Task<T, S>, Completion<R>, Option<Arc<dyn Pending>>);

impl<T, S, P, B, R> AsyncTask<T, S, P, B, R>
where
    S: AbstractState,
    P: Pre<T, S> + 'static,
    B: Body<T, S, R> + 'static,
    R: Send + 'static,
    T: 'static,
{
    /// Whether a blocking wait for the task may leave it to its thread to
    /// drop later (see `Completion::shared_kept`): its precondition needs
    /// no drop (its body is gone and its result taken by then), and it is
    /// small, since a thread keeps one.
    const KEPT_BY_WAITER: bool =
        !core::mem::needs_drop::<P>() && size_of::<Self>() <= KEPT_TASK_MAX_BYTES;

    /// The task's [`Handles`] for `monitor` (`Monitor::id`), of `order`.
    pub(crate) fn handles(
        self: Arc<Self>,
        monitor: usize,
        order: Order,
        conditional: bool,
    ) -> Handles<T, S, R> {
        let task = Arc::clone(&self) as Arc<dyn HasSlot<R>>;
        let completion = if Self::KEPT_BY_WAITER {
            // SAFETY: `KEPT_BY_WAITER`: once the result is taken, nothing
            // of the task's needs a drop but the crate's own fields; R and
            // the task are 'static (this impl's bounds).
            unsafe { Completion::shared_kept(task, monitor) }
        } else {
            Completion::shared(task, monitor)
        };
        let pending =
            (order == Order::Strict || conditional).then(|| Arc::clone(&self) as Arc<dyn Pending>);
        (
            Task::Shared(self as Arc<dyn Job<T, S>>),
            completion,
            pending,
        )
    }
}

impl<T, S, P, B, R> Job<T, S> for AsyncTask<T, S, P, B, R>
where
    S: Copy,
    P: Pre<T, S>,
    B: Body<T, S, R>,
    R: Send,
{
    fn entry(&self) -> Option<u64> {
        self.pre.entry()
    }

    fn check(&self, data: &T, state: S) -> Check {
        // A withdrawn task leaves without its precondition being looked at
        // (its canceller dropped the body); so does a second reference to
        // a task that has run (see `SubmitAsync::completion`).
        if self.slot.finish().is_finished() {
            return Check::Gone;
        }
        match check_pre(&self.pre, data, state) {
            Ok(true) => Check::Run,
            Ok(false) => Check::Wait,
            Err(Outcome::Panicked(p)) => {
                if self.slot.finish().claim() {
                    unwind::drop_caught(self.take_body());
                    // SAFETY: claimed: the task finishes here, once.
                    unsafe { self.slot.complete_panicked(p) };
                } else {
                    // Withdrawn meanwhile: nobody takes the panic.
                    unwind::drop_caught(p);
                }
                Check::Gone
            }
            Err(_) => unreachable!(),
        }
    }

    unsafe fn run(&self, data: &mut T) -> Option<S> {
        // Its future runs it (see `Runner`): the task leaves the monitor
        // here, unclaimed (a drop of the future can still withdraw it),
        // and the future is woken to submit it again.
        if self.runner.who.load(Relaxed) == BY_AWAITER {
            self.runner.signal(&self.slot);
            return None;
        }
        // Withdrawn since `check`: it must not run.
        if !self.slot.finish().claim() {
            return None;
        }
        let body = self.take_body().expect("a task runs once");
        // SAFETY: claimed: we are the executor that owns the task.
        let out = unsafe { self.slot.value_ptr() };
        // The result is written in place, in the slot (see `ResultSlot`).
        let run = catch_unwind(AssertUnwindSafe(|| {
            crate::order::as_task(|| {
                // SAFETY: the slot's value, written once (claimed).
                unsafe { body.call_into(data, out) }
            })
        }));
        match run {
            Ok(next) => {
                // SAFETY: claimed, once, by the holder; the value written.
                unsafe { self.slot.complete_written() };
                next
            }
            Err(p) => {
                // SAFETY: claimed, once; nothing was written.
                unsafe { self.slot.complete_panicked(p) };
                None
            }
        }
    }

    unsafe fn discard(&self) {
        if self.slot.finish().claim() {
            unwind::drop_caught(self.take_body());
            // SAFETY: claimed, once, instead of `run` (our caller's
            // contract).
            unsafe { self.slot.complete_discarded() };
        }
    }

    fn drops_user_values(&self) -> bool {
        // The body is gone by the time the executor drops the task (run,
        // discarded, or dropped by a canceller).
        core::mem::needs_drop::<P>() || core::mem::needs_drop::<R>()
    }

    fn is_forsaken(&self) -> bool {
        self.slot.finish().is_finished()
    }
}

impl<T, S, P, B, R> AsyncTask<T, S, P, B, R> {
    fn take_body(&self) -> Option<B> {
        self.body.with_mut(|b| {
            // SAFETY: only whoever won the task's `Finish` (the holder's
            // `claim`, or `cancel`) touches the body, and only after.
            unsafe { (*b).take() }
        })
    }
}

impl<T, S, P: Send, B: Send, R: Send> HasSlot<R> for AsyncTask<T, S, P, B, R> {
    fn slot(&self) -> &ResultSlot<R> {
        &self.slot
    }

    fn runner(&self) -> Option<&Runner> {
        Some(&self.runner)
    }

    fn cancel(&self) -> bool {
        if !self.slot.finish().cancel() {
            return false;
        }
        // Won against `claim`: the body is ours to drop, here (the task
        // itself stays queued or waiting until its monitor drops it). A
        // panic in the body's drop goes on to the canceller, unless the
        // cancel comes from a drop during unwinding (a `CallAsync` dropped
        // by a panic): a second panic would abort, so it is then dropped,
        // and so is a panic of its payload's drop (rule 3).
        sync_core::unwind::drop_resuming(self.take_body());
        true
    }
}

impl<T, S, P: Send, B: Send, R: Send> Pending for AsyncTask<T, S, P, B, R> {
    fn finish(&self) -> &Finish {
        self.slot.finish()
    }
}

#[cfg(all(test, not(loom), target_pointer_width = "64"))]
mod tests {
    use super::*;

    /// A served monitor's tasks are allocated by the submitter and freed by
    /// the server. glibc frees chunks of up to 128 bytes (a request of up
    /// to 120) into its fast bins without taking the allocating thread's
    /// arena lock; larger ones take it, and submitter and server then
    /// contend on it for every task. A task with a small closure and a
    /// word-sized result must stay within that size.
    #[test]
    fn a_small_task_with_its_arc_header_fits_in_120_bytes() {
        let f = |v: &mut u64| *v += 1;
        let task = AsyncTask::<u64, crate::NoState, Always, Plain<_>, u64>::new_arc(
            Always,
            Plain(move |v: &mut u64| {
                f(v);
                *v
            }),
        );
        // The Arc's header: the strong and weak counts.
        let allocated = size_of_val(&*task) + 2 * size_of::<usize>();
        assert!(
            allocated <= 120,
            "a small task takes {allocated} bytes with its Arc header, over glibc's fast-bin \
             size (120)"
        );
    }
}
