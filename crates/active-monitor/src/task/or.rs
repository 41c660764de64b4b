//! The OR combinator's tasks: one shared *taken* flag and result for the
//! operands.

use super::*;

impl<R> core::fmt::Debug for OrShared<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OrShared")
            .field("taken", &self.taken.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// The shared state of one OR: the paper's *taken* flag and the result.
pub struct OrShared<R> {
    taken: AtomicBool,
    /// Operands not yet finished; the last one to be discarded without the
    /// OR taken resolves it to `Discarded`.
    live: AtomicUsize,
    slot: ResultSlot<(usize, R)>,
}

impl<R> OrShared<R> {
    pub(crate) fn new(operands: usize) -> Self {
        Self {
            taken: AtomicBool::new(false),
            live: AtomicUsize::new(operands),
            slot: ResultSlot::new(),
        }
    }
}

impl<R: Send> HasSlot<(usize, R)> for OrShared<R> {
    fn slot(&self) -> &ResultSlot<(usize, R)> {
        &self.slot
    }

    fn cancel(&self) -> bool {
        // AcqRel: the paper's CAS on the taken flag, raced by the operands'
        // `run` (and a panicking precondition): winning it means no operand
        // runs; each drops its body when its monitor next looks at it.
        if self
            .taken
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            return false;
        }
        self.slot.finish().set_cancelled();
        true
    }
}

impl<R: Send> Pending for OrShared<R> {
    fn finish(&self) -> &Finish {
        self.slot.finish()
    }
}

/// One operand of an OR, queued on its own monitor.
pub(crate) struct OrTask<T, S, P, B, R> {
    pre: P,
    body: UnsafeCell<Option<B>>,
    index: usize,
    shared: Arc<OrShared<R>>,
    _data: PhantomData<fn(&mut T, S)>,
}

// SAFETY: as for `AsyncTask`: `pre` and `body` are used by the holder of
// the operand's monitor only.
unsafe impl<T, S, P: Send, B: Send, R: Send> Sync for OrTask<T, S, P, B, R> {}

impl<T, S, P, B, R> OrTask<T, S, P, B, R> {
    pub(crate) fn new(pre: P, body: B, index: usize, shared: Arc<OrShared<R>>) -> Self {
        Self {
            pre,
            body: UnsafeCell::new(Some(body)),
            index,
            shared,
            _data: PhantomData,
        }
    }

    fn take_body(&self) -> Option<B> {
        self.body.with_mut(|b| {
            // SAFETY: only the monitor's holder touches the body.
            unsafe { (*b).take() }
        })
    }

    /// This operand finishes without running. Its body stays in the task,
    /// dropped with it once the holder has let go of the monitor (the
    /// executor's `Task::drop_later`): a capture's `Drop` may use it.
    fn leave(&self) {
        // AcqRel: the last operand to leave sees every other's leaving.
        // Then it takes the taken flag itself (a CAS, not a load: the
        // owner's `Completion::cancel` races for it too, without touching
        // `live`, and a load could miss its win): whoever wins finishes
        // the OR, once.
        if self.shared.live.fetch_sub(1, AcqRel) == 1
            && self
                .shared
                .taken
                .compare_exchange(false, true, AcqRel, Acquire)
                .is_ok()
        {
            // SAFETY: no operand ran and nobody cancelled (we won the taken
            // flag) and we are the last: nobody else completes the slot.
            unsafe { self.shared.slot.complete_discarded() };
        }
    }
}

impl<T, S, P, B, R> Job<T, S> for OrTask<T, S, P, B, R>
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
        // Acquire: pairs with the winner's AcqRel CAS (nothing to read, but
        // cheap and clear).
        if self.shared.taken.load(Acquire) {
            self.leave();
            return Check::Gone;
        }
        match check_pre(&self.pre, data, state) {
            Ok(true) => Check::Run,
            Ok(false) => Check::Wait,
            Err(Outcome::Panicked(p)) => {
                // The body is dropped with the task (see `leave`).
                // A panicking precondition finishes the whole OR with the
                // panic, if no operand has taken it.
                if self
                    .shared
                    .taken
                    .compare_exchange(false, true, AcqRel, Acquire)
                    .is_ok()
                {
                    // SAFETY: we won the taken flag: nobody else completes.
                    unsafe { self.shared.slot.complete_panicked(p) };
                } else {
                    // Taken meanwhile (another operand ran, or the OR was
                    // cancelled): nobody takes the panic. Its payload is
                    // user code, dropped under the monitor: a panic of its
                    // drop unwound the holder (a server thread ended by
                    // it, and its monitor was never served again).
                    unwind::drop_caught(p);
                }
                self.shared.live.fetch_sub(1, AcqRel);
                Check::Gone
            }
            Err(_) => unreachable!(),
        }
    }

    unsafe fn run(&self, data: &mut T) -> Option<S> {
        // AcqRel: the paper's CAS on the taken flag; exactly one operand's
        // monitor wins it and runs its operand.
        if self
            .shared
            .taken
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_err()
        {
            self.leave();
            return None;
        }
        let body = self.take_body().expect("an OR operand runs once");
        let (outcome, next) = run_body(body, data);
        let outcome = match outcome {
            Outcome::Value(r) => Outcome::Value((self.index, r)),
            Outcome::Panicked(p) => Outcome::Panicked(p),
            Outcome::Discarded => Outcome::Discarded,
        };
        // SAFETY: we won the taken flag: the only completion of the slot.
        unsafe { self.shared.slot.complete(outcome) };
        self.shared.live.fetch_sub(1, AcqRel);
        next
    }

    unsafe fn discard(&self) {
        self.leave();
    }

    fn drops_user_values(&self) -> bool {
        // A losing operand keeps its body (see `leave`); the last operand
        // may hold the last reference to the OR's result.
        core::mem::needs_drop::<P>() || core::mem::needs_drop::<B>() || core::mem::needs_drop::<R>()
    }

    fn is_forsaken(&self) -> bool {
        // Acquire: as in `check`.
        self.shared.taken.load(Acquire)
    }
}
