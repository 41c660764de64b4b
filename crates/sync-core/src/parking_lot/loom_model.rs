//! A loom model of `parking_lot_core` (see the parent module for its contract).

use std::collections::VecDeque;
use std::sync::PoisonError;
use std::time::Instant;

use loom::sync::{Mutex, MutexGuard};
use loom::thread::{self, Thread};

/// A value passed by a parked thread to the filter of `unpark_filter`.
#[derive(Copy, Clone, Debug, Default, Eq, PartialEq, Hash)]
pub struct ParkToken(pub usize);

/// A value returned by the unpark callback to every thread it wakes.
#[derive(Copy, Clone, Debug, Default, Eq, PartialEq, Hash)]
pub struct UnparkToken(pub usize);

/// The park token used by callers that have nothing to say.
pub const DEFAULT_PARK_TOKEN: ParkToken = ParkToken(0);

/// The unpark token used by callers that have nothing to say.
pub const DEFAULT_UNPARK_TOKEN: UnparkToken = UnparkToken(0);

/// How a `park` call ended.
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub enum ParkResult {
    /// Woken by an unpark call, with the token its callback returned.
    Unparked(UnparkToken),
    /// `validate` returned `false`; the thread never slept.
    Invalid,
    /// The timeout expired before an unpark call reached the thread.
    TimedOut,
}

impl ParkResult {
    /// Whether the thread was woken by an unpark call.
    pub fn is_unparked(self) -> bool {
        matches!(self, ParkResult::Unparked(_))
    }
}

/// What an unpark call did, as seen by its callback and its caller.
#[derive(Copy, Clone, Default, Debug, Eq, PartialEq)]
#[non_exhaustive]
pub struct UnparkResult {
    /// How many threads were woken.
    pub unparked_threads: usize,
    /// How many threads were requeued (always 0: requeue is not modelled).
    pub requeued_threads: usize,
    /// Whether threads parked on the key remain in the queue.
    pub have_more_threads: bool,
    /// Whether the caller should hand off fairly (see `set_be_fair`).
    pub be_fair: bool,
}

/// The filter's verdict on one parked thread.
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub enum FilterOp {
    /// Wake this thread and go on to the next.
    Unpark,
    /// Leave this thread parked and go on to the next.
    Skip,
    /// Leave this thread and all after it parked.
    Stop,
}

/// Bounded spinning; under loom one yield, after which spinning gives up.
#[derive(Debug, Default)]
pub struct SpinWait {
    _private: (),
}

impl SpinWait {
    /// A fresh spinner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resets the spinner.
    pub fn reset(&mut self) {}

    /// Yields to the model's scheduler and tells the caller to stop spinning.
    pub fn spin(&mut self) -> bool {
        thread::yield_now();
        false
    }

    /// Like [`spin`](Self::spin).
    pub fn spin_no_yield(&mut self) {
        thread::yield_now();
    }
}

struct Parked {
    id: usize,
    key: usize,
    token: ParkToken,
    thread: Thread,
}

#[derive(Default)]
struct Table {
    /// Parked threads of every key, in the order they parked.
    queue: VecDeque<Parked>,
    /// Threads taken out of `queue` by an unpark call, with the token for
    /// them, that have not yet seen it.
    woken: Vec<(usize, UnparkToken)>,
    next_id: usize,
    be_fair: bool,
}

impl Table {
    fn take_woken(&mut self, id: usize) -> Option<UnparkToken> {
        let i = self.woken.iter().position(|&(w, _)| w == id)?;
        Some(self.woken.swap_remove(i).1)
    }

    fn has_key(&self, key: usize) -> bool {
        self.queue.iter().any(|p| p.key == key)
    }
}

loom::lazy_static! {
    // Reset for every execution loom explores.
    static ref TABLE: Mutex<Table> = Mutex::new(Table::default());
}

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes every later unpark call of this execution report `be_fair`
/// (loom builds only; the default is `false`).
pub fn set_be_fair(fair: bool) {
    table().be_fair = fair;
}

/// Parks the current thread on `key` (see the module docs for the contract).
///
/// # Safety
///
/// `validate` and `timed_out` run under the queue lock: they must not panic
/// or call into the parking lot.
pub unsafe fn park(
    key: usize,
    validate: impl FnOnce() -> bool,
    before_sleep: impl FnOnce(),
    timed_out: impl FnOnce(usize, bool),
    park_token: ParkToken,
    timeout: Option<Instant>,
) -> ParkResult {
    let id = {
        let mut t = table();
        if !validate() {
            return ParkResult::Invalid;
        }
        let id = t.next_id;
        t.next_id += 1;
        t.queue.push_back(Parked {
            id,
            key,
            token: park_token,
            thread: thread::current(),
        });
        id
    };
    before_sleep();

    if timeout.is_some() {
        // The timer may fire at any point: let the others run, then settle
        // the race under the queue lock.
        thread::yield_now();
        let mut t = table();
        if let Some(token) = t.take_woken(id) {
            return ParkResult::Unparked(token);
        }
        let i = t.queue.iter().position(|p| p.id == id);
        let i = i.expect("parking lot model: a timed-out thread is neither queued nor woken");
        t.queue.remove(i);
        let was_last_thread = !t.has_key(key);
        timed_out(key, was_last_thread);
        return ParkResult::TimedOut;
    }

    loop {
        if let Some(token) = table().take_woken(id) {
            return ParkResult::Unparked(token);
        }
        // An unpark that lands between the check above and this call leaves
        // the thread's token set, so `park` returns at once and we re-check.
        thread::park();
    }
}

/// Offers the threads parked on `key` to `filter` in queue order and wakes
/// those it accepts with the token `callback` returns.
///
/// # Safety
///
/// `filter` and `callback` run under the queue lock: they must not panic or
/// call into the parking lot.
pub unsafe fn unpark_filter(
    key: usize,
    mut filter: impl FnMut(ParkToken) -> FilterOp,
    callback: impl FnOnce(UnparkResult) -> UnparkToken,
) -> UnparkResult {
    let mut t = table();
    let mut woken = Vec::new();
    let mut i = 0;
    while i < t.queue.len() {
        if t.queue[i].key != key {
            i += 1;
            continue;
        }
        match filter(t.queue[i].token) {
            FilterOp::Unpark => woken.extend(t.queue.remove(i)),
            FilterOp::Skip => i += 1,
            FilterOp::Stop => break,
        }
    }
    let result = UnparkResult {
        unparked_threads: woken.len(),
        have_more_threads: t.has_key(key),
        be_fair: t.be_fair && !woken.is_empty(),
        ..UnparkResult::default()
    };
    let token = callback(result);
    t.woken.extend(woken.iter().map(|p| (p.id, token)));
    drop(t);
    // As in parking_lot_core, threads are unparked after the lock is released.
    for p in woken {
        p.thread.unpark();
    }
    result
}

/// Wakes the first thread parked on `key`, if any.
///
/// # Safety
///
/// `callback` runs under the queue lock: it must not panic or call into the
/// parking lot.
pub unsafe fn unpark_one(
    key: usize,
    callback: impl FnOnce(UnparkResult) -> UnparkToken,
) -> UnparkResult {
    let mut first = true;
    let only_first = move |_| {
        if std::mem::take(&mut first) {
            FilterOp::Unpark
        } else {
            FilterOp::Stop
        }
    };
    // SAFETY: our filter neither panics nor calls into the parking lot; the
    // caller guarantees the same of `callback`.
    unsafe { unpark_filter(key, only_first, callback) }
}

/// Wakes every thread parked on `key` with `unpark_token`; returns how many.
///
/// # Safety
///
/// Always safe to call in this model; `unsafe` to keep `parking_lot_core`'s
/// signature.
pub unsafe fn unpark_all(key: usize, unpark_token: UnparkToken) -> usize {
    // SAFETY: both closures are trivial: no panic, no parking-lot call.
    let result = unsafe { unpark_filter(key, |_| FilterOp::Unpark, |_| unpark_token) };
    result.unparked_threads
}
