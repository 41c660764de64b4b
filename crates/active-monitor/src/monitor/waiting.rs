//! The holder's side: the data, the abstract state and the tasks waiting
//! on their preconditions.

use std::collections::VecDeque;

use ast_mutex::AbstractState;
use sync_core::waiter::Waiter;

use crate::task::{Check, DONE, Task};
use crate::unwind;

/// The holder's side of the monitor.
pub(super) struct Exec<T, S> {
    pub(super) data: T,
    pub(super) state: S,
    pub(super) waiting: Waiting<T, S>,
}

impl<T, S: AbstractState> Exec<T, S> {
    pub(super) fn execute(&mut self, task: Task<T, S>) {
        match task.job().check(&self.data, self.state) {
            Check::Run => {
                self.run(task);
                self.relay();
            }
            Check::Wait => self.waiting.file(task),
            Check::Gone => task.drop_later(),
        }
    }

    pub(super) fn run(&mut self, task: Task<T, S>) {
        // A blocking caller is notified only once nothing refers to its job
        // (on its stack) any more: not from inside `run(&self)`.
        let caller = task.caller();
        // SAFETY: we hold the monitor; `check` said Run in this state.
        if let Some(next) = unsafe { task.job().run(&mut self.data) } {
            self.state = next;
        }
        // The last reference to a task whose completion was dropped: its
        // result and precondition are user values, whose drop may use this
        // monitor.
        task.drop_later();
        if let Some(waiter) = caller {
            // Release (in `notify_deferred`): the result written by `run`
            // happens before the caller's Acquire of the token. A caller
            // that spins sees it at once; a sleeping one is unparked once
            // we have let go of the monitor (`unwind::wake_later`), not on
            // every other caller's time.
            // The wakeup keeps `waiter`, our reference (taken while the
            // job was still there): no clone of it, no drop.
            unwind::wake_later(Waiter::notify_deferred_owned(waiter, DONE));
        }
    }

    /// Whether any task waits on its precondition.
    #[inline]
    pub(super) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Relay invariance: after a task ran, run the waiting tasks whose
    /// precondition now holds, oldest first, until none does.
    #[inline]
    pub(super) fn relay(&mut self) {
        // Most monitors have no waiting task most of the time: no call.
        if !self.waiting.is_empty() {
            self.relay_waiting();
        }
    }

    /// Each task's body may be another thread's (it filed the task): its
    /// parks keep what this thread kept before it (see
    /// `unwind::foreign_body`).
    #[inline(never)]
    pub(super) fn relay_waiting(&mut self) {
        while let Some(task) = self.waiting.take_ready(&self.data, self.state) {
            unwind::foreign_body(|| self.run(task));
        }
    }
}

/// Waiting tasks with their submission order, oldest first.
type Fifo<T, S> = VecDeque<(u64, Task<T, S>)>;

/// The fewest waiting tasks that trigger a sweep of forsaken ones.
pub(super) const SWEEP_MIN: usize = 32;

/// Tasks waiting on their preconditions. Memory grows with the tasks that
/// wait, never with the history: an entry set's list is dropped with its
/// last task, and OR operands whose OR was taken on another monitor are
/// swept out whenever the lists have doubled since the last sweep (they
/// would otherwise stay until a task runs here, and pile up on a monitor
/// where nothing runs).
pub(super) struct Waiting<T, S> {
    /// Submission order among waiting tasks.
    next_seq: u64,
    /// The number of waiting tasks at which `file` sweeps next.
    sweep_at: usize,
    /// Tasks with predicates, oldest first.
    by_pred: Fifo<T, S>,
    /// Tasks with entry sets, one FIFO list per distinct set (its mask).
    by_set: Vec<(u64, Fifo<T, S>)>,
}

impl<T, S> Default for Waiting<T, S> {
    fn default() -> Self {
        Self {
            next_seq: 0,
            sweep_at: SWEEP_MIN,
            by_pred: VecDeque::new(),
            by_set: Vec::new(),
        }
    }
}

impl<T, S: AbstractState> Waiting<T, S> {
    pub(super) fn file(&mut self, task: Task<T, S>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        match task.job().entry() {
            None => self.by_pred.push_back((seq, task)),
            Some(mask) => match self.by_set.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, list)) => list.push_back((seq, task)),
                None => self.by_set.push((mask, VecDeque::from([(seq, task)]))),
            },
        }
        let len = self.len();
        if len >= self.sweep_at {
            self.sweep();
            // Amortised: the next sweep only after as many new filings
            // again as tasks are left.
            self.sweep_at = SWEEP_MIN.max(2 * self.len());
        }
    }

    /// Whether no task waits.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.by_pred.is_empty() && self.by_set.is_empty()
    }

    /// How many tasks wait.
    pub(super) fn len(&self) -> usize {
        self.by_pred.len() + self.by_set.iter().map(|(_, l)| l.len()).sum::<usize>()
    }

    /// Drops the forsaken tasks (OR operands taken elsewhere), keeping the
    /// others in order.
    pub(super) fn sweep(&mut self) {
        let mut gone = Vec::new();
        let mut split = |list: &mut Fifo<T, S>| {
            for (seq, t) in core::mem::take(list) {
                if t.job().is_forsaken() {
                    // SAFETY: the task never ran; it leaves the list here.
                    unsafe { t.job().discard() };
                    gone.push(t);
                } else {
                    list.push_back((seq, t));
                }
            }
        };
        split(&mut self.by_pred);
        for (_, list) in &mut self.by_set {
            split(list);
        }
        self.by_set.retain(|(_, l)| !l.is_empty());
        // Their drops are user code (see `unwind`).
        for t in gone {
            t.drop_later();
        }
    }

    /// The oldest waiting task whose precondition holds, removed.
    pub(super) fn take_ready(&mut self, data: &T, state: S) -> Option<Task<T, S>> {
        if self.by_pred.is_empty() && self.by_set.is_empty() {
            return None;
        }
        let bit = 1u64 << state.index();
        // Entry sets: only the lists whose set contains the state; their
        // fronts are the candidates (OR operands already taken elsewhere
        // are dropped on the way).
        let mut best_set: Option<(u64, usize)> = None;
        let mut i = 0;
        while i < self.by_set.len() {
            let (mask, list) = &mut self.by_set[i];
            if *mask & bit != 0 {
                while let Some((seq, t)) = list.front() {
                    match t.job().check(data, state) {
                        Check::Run => {
                            if best_set.is_none_or(|(s, _)| *seq < s) {
                                best_set = Some((*seq, i));
                            }
                            break;
                        }
                        Check::Gone => {
                            if let Some((_, t)) = list.pop_front() {
                                t.drop_later();
                            }
                        }
                        Check::Wait => unreachable!("an entry set that contains the state"),
                    }
                }
                if list.is_empty() {
                    self.by_set.swap_remove(i);
                    // The last list moved into slot i, unvisited: visit it.
                    continue;
                }
            }
            i += 1;
        }
        // Predicates: the oldest that holds, if older than the set's.
        let limit = best_set.map_or(u64::MAX, |(s, _)| s);
        let mut j = 0;
        while j < self.by_pred.len() {
            let (seq, t) = &self.by_pred[j];
            if *seq > limit {
                break;
            }
            match t.job().check(data, state) {
                Check::Run => return self.by_pred.remove(j).map(|(_, t)| t),
                Check::Gone => {
                    if let Some((_, t)) = self.by_pred.remove(j) {
                        t.drop_later();
                    }
                }
                Check::Wait => j += 1,
            }
        }
        let (_, i) = best_set?;
        let list = &mut self.by_set[i].1;
        let (_, task) = list.pop_front().expect("a candidate");
        if list.is_empty() {
            self.by_set.swap_remove(i);
        }
        Some(task)
    }

    pub(super) fn discard_all(&mut self) {
        let sets = self.by_set.drain(..).flat_map(|(_, l)| l);
        for (_, task) in self.by_pred.drain(..).chain(sets) {
            // SAFETY: the task never ran and is dropped here.
            unsafe { task.job().discard() };
            task.drop_later();
        }
    }
}
