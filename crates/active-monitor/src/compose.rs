//! OR and AND across monitors (the paper's section 5).

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};

use ast_mutex::AbstractState;
// `std::sync::Arc`, not loom's: tasks are shared as trait objects, and
// loom's `Arc` cannot be coerced to one (the reference count is std's own,
// the protocol's atomics are all loom's).
use std::sync::Arc;
use sync_core::sync::atomic::{AtomicUsize, Ordering::*};
use sync_core::sync::cell::UnsafeCell;
use sync_core::wait::Watch;

use crate::completion::{Completion, Finish, HasSlot, Outcome, ResultSlot};
use crate::error::SameMonitor;
use crate::monitor::Monitor;
use crate::order::{self, Order, Pending};
use crate::task::{AsyncTask, Job, OrShared, OrTask, Plain, Pred, Task};

/// One operand of an [`or`] or an [`and`]: a precondition and a body on one
/// monitor, not submitted yet. Made by [`Monitor::op`].
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, or};
///
/// let a = Monitor::new(Vec::<u32>::new());
/// let b = Monitor::new(vec![7]);
/// let take_a = a.op(|v| !v.is_empty(), |v| v.pop().unwrap());
/// let take_b = b.op(|v| !v.is_empty(), |v| v.pop().unwrap());
/// assert_eq!(or((take_a, take_b)).unwrap().wait(), (1, 7));
/// ```
#[must_use = "an operand does nothing until given to `or` or `and`"]
pub struct Op<'m, T, S: AbstractState, P, F> {
    monitor: &'m Monitor<T, S>,
    pre: P,
    body: F,
}

impl<T, S: AbstractState, P, F> core::fmt::Debug for Op<'_, T, S, P, F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Op")
            .field("monitor", &self.monitor.id())
            .finish_non_exhaustive()
    }
}

impl<T, S: AbstractState> Monitor<T, S> {
    /// An operand for [`or`] / [`and`]: a task with precondition `pre` and
    /// body `body` on this monitor, submitted when the OR/AND is.
    ///
    /// # Examples
    ///
    /// ```
    /// use active_monitor::{Monitor, and};
    ///
    /// let a = Monitor::new(1);
    /// let b = Monitor::new(2);
    /// let both = and((a.op(|_| true, |n| *n), b.op(|_| true, |n| *n))).unwrap();
    /// assert_eq!(both.wait(), vec![1, 2]);
    /// ```
    pub fn op<P, F, R>(&self, pre: P, body: F) -> Op<'_, T, S, P, F>
    where
        P: Fn(&T) -> bool + Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
    {
        Op {
            monitor: self,
            pre,
            body,
        }
    }
}

mod sealed {
    use super::*;

    /// The operations on a tuple of operands (sealed).
    pub trait OperandsImpl<R>: Sized {
        /// The operands' monitors, in order (no allocation: an OR that
        /// runs at once allocates nothing).
        fn ids(&self) -> Ids;
        fn strict(&self) -> bool;
        /// Runs the first operand, in order, whose monitor is idle and
        /// whose precondition holds, inline: its position and outcome; the
        /// operands back if none did.
        fn run_first_ready(self) -> Result<Completion<(usize, R)>, Self>;
        fn submit_or(self, shared: &Arc<OrShared<R>>);
        fn submit_and(self, shared: &Arc<AndShared<R>>);
    }

    pub trait OneOp<R>: Sized {
        fn id(&self) -> usize;
        fn strict(&self) -> bool;
        fn run_if_ready(self, index: usize) -> Result<Completion<(usize, R)>, Self>;
        fn submit_or(self, index: usize, shared: &Arc<OrShared<R>>);
        fn submit_and(self, index: usize, shared: &Arc<AndShared<R>>);
    }
}

use sealed::{OneOp, OperandsImpl};

/// A tuple of 2 to 4 [`Op`]s with the same result type `R`, on different
/// monitors: what [`or`] and [`and`] accept.
pub trait Operands<R>: OperandsImpl<R> {}

impl<R, X: OperandsImpl<R>> Operands<R> for X {}

impl<T, S, P, F, R> OneOp<R> for Op<'_, T, S, P, F>
where
    T: 'static,
    S: AbstractState + Send,
    P: Fn(&T) -> bool + Send + 'static,
    F: FnOnce(&mut T) -> R + Send + 'static,
    R: Send + 'static,
{
    fn id(&self) -> usize {
        self.monitor.id()
    }

    fn strict(&self) -> bool {
        self.monitor.order() == Order::Strict
    }

    fn run_if_ready(self, index: usize) -> Result<Completion<(usize, R)>, Self> {
        let Op { monitor, pre, body } = self;
        match monitor.run_op_if_idle(pre, body) {
            Ok(Outcome::Value(r)) => Ok(Completion::from_outcome(Outcome::Value((index, r)))),
            Ok(Outcome::Panicked(p)) => Ok(Completion::from_outcome(Outcome::Panicked(p))),
            Ok(Outcome::Discarded) => unreachable!("an inline run is never discarded"),
            Err((pre, body)) => Err(Op { monitor, pre, body }),
        }
    }

    fn submit_or(self, index: usize, shared: &Arc<OrShared<R>>) {
        let task = OrTask::new(Pred(self.pre), Plain(self.body), index, Arc::clone(shared));
        let task = Task::Shared(Arc::new(task) as Arc<dyn Job<T, S>>);
        let locked = self.monitor.try_lock();
        self.monitor.submit_job(task, locked);
    }

    fn submit_and(self, index: usize, shared: &Arc<AndShared<R>>) {
        let part = Part {
            shared: Some(Arc::clone(shared)),
            index,
        };
        let body = self.body;
        let pre = self.pre;
        // A panic in the precondition is kept here, and the precondition
        // then says "holds": the body runs at once (same critical section)
        // and finishes the part with the panic instead of running the
        // operand's body. (Were the panic left to the task, the part would
        // be dropped unrun and the AND would resolve to `Discarded`.)
        let pre_panic: Arc<PrePanic> = Arc::default();
        let kept = Arc::clone(&pre_panic);
        let pre = move |t: &T| match catch_unwind(AssertUnwindSafe(|| pre(t))) {
            Ok(holds) => holds,
            Err(p) => {
                *kept.lock().unwrap_or_else(PoisonError::into_inner) = Some(p);
                true
            }
        };
        // The part rides in the body: run, it stores the result; dropped
        // unrun (the monitor discarded the task), it stores `Discarded`.
        let task: Arc<AsyncTask<T, S, _, _, ()>> = AsyncTask::new_arc(
            Pred(pre),
            Plain(move |t: &mut T| {
                let mut part = part;
                let panicked = pre_panic
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(p) = panicked {
                    // A drop the monitor makes (user code): its panic goes
                    // the policy's way. Unwinding from here, it finished
                    // the part as discarded, and the precondition's panic
                    // was lost with its own.
                    crate::unwind::drop_caught(body);
                    part.finish(Outcome::Panicked(p));
                    return;
                }
                let outcome = match catch_unwind(AssertUnwindSafe(|| body(t))) {
                    Ok(r) => Outcome::Value(r),
                    Err(p) => Outcome::Panicked(p),
                };
                part.finish(outcome);
            }),
        );
        let task = Task::Shared(task as Arc<dyn Job<T, S>>);
        let locked = self.monitor.try_lock();
        self.monitor.submit_job(task, locked);
    }
}

macro_rules! tuple_operands {
    ($($name:ident $idx:tt),+) => {
        impl<R, $($name: OneOp<R>),+> OperandsImpl<R> for ($($name,)+) {
            fn ids(&self) -> Ids {
                let ids = [$(self.$idx.id()),+];
                let mut all = [0; 4];
                all[..ids.len()].copy_from_slice(&ids);
                Ids(all, ids.len())
            }
            fn strict(&self) -> bool {
                false $(|| self.$idx.strict())+
            }
            fn run_first_ready(self) -> Result<Completion<(usize, R)>, Self> {
                let mut ops = ($(Some(self.$idx),)+);
                $(
                    let op = ops.$idx.take().expect("each operand is tried once");
                    match op.run_if_ready($idx) {
                        Ok(done) => return Ok(drop_unrun(done, ops)),
                        Err(op) => ops.$idx = Some(op),
                    }
                )+
                Err(($(ops.$idx.expect("handed back"),)+))
            }
            fn submit_or(self, shared: &Arc<OrShared<R>>) {
                $(self.$idx.submit_or($idx, shared);)+
            }
            fn submit_and(self, shared: &Arc<AndShared<R>>) {
                $(self.$idx.submit_and($idx, shared);)+
            }
        }
    };
}

tuple_operands!(A 0, B 1);
tuple_operands!(A 0, B 1, C 2);
tuple_operands!(A 0, B 1, C 2, D 3);

/// The completion of an OR that ran an operand inline, once the operands
/// that did not run are dropped. Their drop is user code: a panic in it
/// resumes in the completion's waiter (instead of the result, dropped), as
/// any panic of an operand does; `or` itself returns normally.
fn drop_unrun<R, Rest>(done: Completion<(usize, R)>, rest: Rest) -> Completion<(usize, R)> {
    match catch_unwind(AssertUnwindSafe(|| drop(rest))) {
        Ok(()) => done,
        Err(p) => {
            // Only the first panic is kept (as in `unwind`); the other's
            // payload goes the panic policy's way (its drop may panic too).
            if let Err(q) = catch_unwind(AssertUnwindSafe(|| drop(done))) {
                sync_core::unwind::discard(q);
            }
            Completion::from_outcome(Outcome::Panicked(p))
        }
    }
}

/// The monitors of 2 to 4 operands, in order.
#[derive(Debug)]
pub struct Ids([usize; 4], usize);

impl Ids {
    fn as_slice(&self) -> &[usize] {
        &self.0[..self.1]
    }
}

/// The first two positions naming the same monitor, if any.
fn same_monitor(ids: &[usize]) -> Option<(usize, usize)> {
    (0..ids.len()).find_map(|i| {
        ((i + 1)..ids.len())
            .find(|&j| ids[i] == ids[j])
            .map(|j| (i, j))
    })
}

/// Runs exactly one of the operands: the first whose precondition holds,
/// on its own monitor (the paper's OR). The completion gives the operand's
/// position in the tuple and its result.
///
/// First, the operands are tried in order, each on its own monitor if that
/// monitor is idle with nothing queued: the first whose precondition holds
/// runs at once, in the calling thread, and the OR is done; the later
/// operands are not looked at, nothing is allocated or queued, and the
/// operands that did not run are dropped. (A busy monitor is passed over:
/// its operand is looked at again below.) If none ran, the tries are
/// repeated for a few microseconds (a short spin, then a few yields), as
/// an item usually arrives within that time and a wake-up costs tens.
///
/// Otherwise every operand is queued on its monitor as a waiting task that
/// shares one *taken* flag. The monitor that first finds its operand's
/// precondition true wins a CAS on the flag and runs it; the others drop
/// theirs when they next look at them (the next time that monitor runs a
/// task, or sweeps its waiting tasks), so a losing operand's memory lives
/// until then.
///
/// # Errors
///
/// [`SameMonitor`], with the operands handed back unsubmitted, if two
/// operands are on the same monitor (the paper rejects this too).
///
/// # Panics
///
/// A panic in an operand's precondition or body resumes in the
/// completion's waiter (a panicking precondition ends the OR). So does a
/// panic in the drop of an operand that `or` itself drops unrun (after
/// another ran at once), instead of the result.
///
/// # Progress
///
/// The calling thread spins and yields for at most a few microseconds
/// before it queues the operands; it never blocks in `or` (but see
/// [`Order::Strict`] for the wait for its previous task). Waiting for the
/// result is [`Completion`]'s.
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, Order, or};
/// use std::collections::VecDeque;
///
/// // Relaxed: this thread fills the queues after submitting the OR.
/// let q1 = Monitor::builder().order(Order::Relaxed).build(VecDeque::<i32>::new());
/// let q2 = Monitor::builder().order(Order::Relaxed).build(VecDeque::<i32>::new());
/// let either = or((
///     q1.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
///     q2.op(|q| !q.is_empty(), |q| q.pop_front().unwrap()),
/// ))
/// .unwrap();
/// q2.submit(|q| q.push_back(5));
/// assert_eq!(either.wait(), (1, 5));
/// q1.submit(|q| q.push_back(6)); // the OR is taken: q1 keeps its item
/// assert_eq!(q1.call(|q| q.len()), 1);
/// ```
pub fn or<R, Ops>(ops: Ops) -> Result<Completion<(usize, R)>, SameMonitor<Ops>>
where
    Ops: Operands<R>,
    R: Send + 'static,
{
    let (ops, operands, order) = composed(ops)?;
    // Fast path: an operand whose monitor is idle and whose precondition
    // holds runs at once, without allocating or queueing anything; the
    // later operands are not looked at. Tried again for a moment before
    // queueing: a park and unpark costs as much as hundreds of tries.
    let mut ops = ops;
    let mut spin = Watch::default();
    loop {
        ops = match ops.run_first_ready() {
            Ok(done) => return Ok(crate::unwind::finish(done)),
            Err(ops) => ops,
        };
        if !spin.spin() {
            break;
        }
    }
    let shared = Arc::new(OrShared::new(operands));
    // Every operand is queued before a deferred panic may go on.
    ops.submit_or(&shared);
    Ok(crate::unwind::finish(composed_completion(shared, order)))
}

/// Runs every operand, each on its own monitor once its precondition holds
/// (the paper's AND); completes when all have run, with their results in
/// operand order.
///
/// # Errors
///
/// [`SameMonitor`], with the operands handed back unsubmitted, if two
/// operands are on the same monitor.
///
/// # Panics
///
/// A panic in an operand's precondition or body resumes in the
/// completion's waiter once all operands are finished. If a monitor is
/// dropped with its operand still waiting, the AND resolves to
/// [`Discarded`](crate::Discarded).
///
/// An AND is not a transaction: the operands that ran when another panics
/// or is discarded have run, their changes to their monitors stay, and
/// their results are dropped (they are not handed back). An operand whose
/// body moves a value out of its monitor loses that value then; to keep
/// it, the body can put it where the caller finds it (a channel, or an
/// `Arc<Mutex<_>>` it captures) rather than return it.
///
/// # Examples
///
/// ```
/// use active_monitor::{Monitor, and};
///
/// let a = Monitor::new(Vec::new());
/// let b = Monitor::new(Vec::new());
/// let both = and((a.op(|_| true, |v| v.push(1)), b.op(|_| true, |v| v.push(2)))).unwrap();
/// both.wait();
/// assert_eq!(a.call(|v| v.clone()), [1]);
/// assert_eq!(b.call(|v| v.clone()), [2]);
/// ```
pub fn and<R, Ops>(ops: Ops) -> Result<Completion<Vec<R>>, SameMonitor<Ops>>
where
    Ops: Operands<R>,
    R: Send + 'static,
{
    let (ops, operands, order) = composed(ops)?;
    let shared = Arc::new(AndShared::new(operands, ops.ids()));
    ops.submit_and(&shared);
    Ok(crate::unwind::finish(composed_completion(shared, order)))
}

/// The operands of an OR or AND, checked (no two on one monitor), with
/// their number and their program order (see [`composed_order`]).
fn composed<R, Ops: Operands<R>>(ops: Ops) -> Result<(Ops, usize, Order), SameMonitor<Ops>> {
    let ids = ops.ids();
    let ids = ids.as_slice();
    if let Some((first, second)) = same_monitor(ids) {
        return Err(SameMonitor { ops, first, second });
    }
    let order = composed_order(&ops);
    Ok((ops, ids.len(), order))
}

/// The program order of an OR or AND (`Operands::strict`),
/// after waiting as that order says before a new submission.
fn composed_order<R, Ops: Operands<R>>(ops: &Ops) -> Order {
    let order = if ops.strict() {
        Order::Strict
    } else {
        Order::Relaxed
    };
    order::before_submit(0, order);
    order
}

/// The completion of a submitted OR or AND, recorded as the submitter's
/// pending task if it has not completed at once.
fn composed_completion<T, S>(shared: Arc<S>, order: Order) -> Completion<T>
where
    S: HasSlot<T> + Pending + 'static,
{
    let completion = Completion::shared(Arc::clone(&shared) as Arc<dyn HasSlot<T>>, 0);
    if !completion.is_done() {
        order::submitted(0, true, &(shared as Arc<dyn Pending>), order);
    }
    completion
}

/// A panic of an AND operand's precondition, kept for its body.
type PrePanic = Mutex<Option<Box<dyn Any + Send + 'static>>>;

impl<R> core::fmt::Debug for AndShared<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AndShared")
            .field("remaining", &self.remaining.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// The shared state of one AND: each operand's outcome, and the result.
pub struct AndShared<R> {
    /// The operands' monitors (see `Pending::only_through_running`).
    monitors: Ids,
    remaining: AtomicUsize,
    parts: Box<[UnsafeCell<Option<Outcome<R>>>]>,
    slot: ResultSlot<Vec<R>>,
}

// SAFETY: part `i` is written once by operand `i`'s task (under its
// monitor) and read by the last operand to finish, after the AcqRel
// countdown orders every write before it; R crosses threads, hence Send.
unsafe impl<R: Send> Sync for AndShared<R> {}
// SAFETY: as for `Sync`.
unsafe impl<R: Send> Send for AndShared<R> {}

impl<R> AndShared<R> {
    fn new(n: usize, monitors: Ids) -> Self {
        Self {
            monitors,
            remaining: AtomicUsize::new(n),
            parts: (0..n).map(|_| UnsafeCell::new(None)).collect(),
            slot: ResultSlot::new(),
        }
    }
}

impl<R: Send> HasSlot<Vec<R>> for AndShared<R> {
    fn slot(&self) -> &ResultSlot<Vec<R>> {
        &self.slot
    }
}

impl<R: Send> Pending for AndShared<R> {
    fn finish(&self) -> &Finish {
        self.slot.finish()
    }

    /// Every operand must run: one on a monitor whose task this thread is
    /// running, innermost or below (queued there by that task's body, or
    /// a body it called), cannot run before that task returns.
    fn only_through_running(&self) -> bool {
        self.monitors
            .as_slice()
            .iter()
            .any(|&m| crate::unwind::runs_here(m))
    }
}

/// Operand `index`'s share of an AND: finishes it once, run or dropped.
struct Part<R> {
    shared: Option<Arc<AndShared<R>>>,
    index: usize,
}

impl<R> Part<R> {
    fn finish(&mut self, outcome: Outcome<R>) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        shared.parts[self.index].with_mut(|p| {
            // SAFETY: part `index` is written by this operand only, once.
            unsafe { *p = Some(outcome) };
        });
        // AcqRel: Release publishes our part; the last one's Acquire sees
        // every part.
        if shared.remaining.fetch_sub(1, AcqRel) != 1 {
            return;
        }
        let mut values = Vec::with_capacity(shared.parts.len());
        let mut end = None;
        // What the AND does not hand out (the values beside a panic or a
        // discarded operand, the later panics): user values, whose drop
        // may panic. Dropped only once the AND is complete: a panic there
        // before it left the AND's waiter waiting for ever.
        let mut later_panics = Vec::new();
        for part in shared.parts.iter() {
            let outcome = part.with_mut(|p| {
                // SAFETY: every operand has finished (countdown at 0).
                unsafe { (*p).take() }
            });
            match outcome {
                Some(Outcome::Value(v)) => values.push(v),
                Some(Outcome::Panicked(p)) => {
                    if matches!(end, Some(Outcome::Panicked(_))) {
                        later_panics.push(p);
                    } else {
                        end = Some(Outcome::Panicked(p));
                    }
                }
                Some(Outcome::Discarded) | None => {
                    if end.is_none() {
                        end = Some(Outcome::Discarded);
                    }
                }
            }
        }
        let (outcome, unused) = match end {
            None => (Outcome::Value(values), Vec::new()),
            Some(end) => (end, values),
        };
        // SAFETY: the last operand completes the AND, once.
        unsafe { shared.slot.complete(outcome) };
        // A panic in these drops is one of a drop the monitor makes: kept,
        // and resumed when the thread that finished the AND lets go of the
        // monitor (see `unwind`).
        // One at a time: a second panicking drop in one `Vec`'s drop would
        // run while the first unwinds, and abort the process.
        for value in unused {
            crate::unwind::drop_caught(value);
        }
        for p in later_panics {
            crate::unwind::drop_caught(p);
        }
    }
}

impl<R> Drop for Part<R> {
    fn drop(&mut self) {
        self.finish(Outcome::Discarded);
    }
}
