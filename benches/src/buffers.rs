//! Paper 000's experiment object, a bounded buffer of capacity 10, in every
//! implementation the paper compares (tables 3-8):
//!
//! * [`AstBuffer`] over [`AstMutex`] (ours) or [`PortableAst`] (the paper's
//!   portable AST: one mutex, one condition variable, broadcast);
//! * [`CondvarBuffer`]: two condition variables, `notify_one`;
//! * [`RepeatedTests`]: one condition variable, `notify_all`, the predicate
//!   re-tested by every woken thread.
//!
//! The watermarked buffer is the same buffer with four abstract states and
//! *marginal putters*, which put only below half full. Condition variables
//! cannot express that overlap, so [`CondvarBuffer`] does not offer it.

use std::collections::VecDeque;

use std::sync::{Condvar, Mutex, PoisonError};

use ast_mutex::{AstMutex, Config, StateSet};

pub use crate::peers::{Monitor, PlMonitor, StdMonitor};

/// The buffer's capacity (the paper's).
pub const CAP: usize = 10;

ast_mutex::states! {
    /// How full the buffer is; `Never` is a state it never reaches, for
    /// waiters that must stay parked.
    pub enum Level { Empty, Low, High, Full, Never }
}

/// The abstract state of a buffer holding `len` items.
pub fn level(len: usize) -> Level {
    match len {
        0 => Level::Empty,
        n if n < CAP / 2 => Level::Low,
        n if n < CAP => Level::High,
        _ => Level::Full,
    }
}

/// The entry sets.
pub fn not_full() -> StateSet<Level> {
    Level::Empty | Level::Low | Level::High
}
/// The marginal putter's entry set: at most half full after its put.
pub fn below_half() -> StateSet<Level> {
    Level::Empty | Level::Low
}
/// The getter's entry set.
pub fn not_empty() -> StateSet<Level> {
    Level::Low | Level::High | Level::Full
}

/// A bounded buffer shared by putters and getters.
pub trait Buffer: Send + Sync + 'static {
    /// Puts, waiting while the buffer is full.
    fn put(&self, item: u64);
    /// Puts, waiting while the buffer is half full or more.
    ///
    /// # Panics
    ///
    /// If the implementation cannot express the watermark.
    fn put_marginal(&self, item: u64);
    /// Takes the oldest item, waiting while the buffer is empty.
    fn get(&self) -> u64;
}

/// No buffer at all: every put and get returns at once. A transfer on it
/// measures what no buffer can avoid: spawning the threads, starting them
/// together and seeing the last one finish (the report's `harness-floor`).
pub struct HarnessFloor;

impl Buffer for HarnessFloor {
    fn put(&self, item: u64) {
        std::hint::black_box(item);
    }

    fn put_marginal(&self, item: u64) {
        std::hint::black_box(item);
    }

    fn get(&self) -> u64 {
        0
    }
}

/// The AST-sync API: enter with a set of states, leave naming the next.
pub trait AstLike: Send + Sync + 'static {
    /// Enters in a state of `set`, runs `f`, and exits in the state `f`
    /// returns.
    fn with(&self, set: StateSet<Level>, f: impl FnOnce(&mut VecDeque<u64>) -> Level);

    /// How many threads wait in the lock's queues, if it can tell.
    fn queued(&self) -> Option<usize> {
        None
    }
}

impl AstLike for AstMutex<Level, VecDeque<u64>> {
    #[inline]
    fn with(&self, set: StateSet<Level>, f: impl FnOnce(&mut VecDeque<u64>) -> Level) {
        let mut g = self.enter(set);
        let next = f(&mut g);
        g.exit(next);
    }

    fn queued(&self) -> Option<usize> {
        Some(self.__test_waiter_table_size().1)
    }
}

/// The paper's portable AST: the AST API on one std mutex and one
/// condition variable; every exit broadcasts and every waiter re-tests its
/// mask.
pub struct PortableAst {
    state: Mutex<(Level, VecDeque<u64>)>,
    changed: Condvar,
}

impl PortableAst {
    /// A buffer in state `Empty`.
    pub fn new() -> Self {
        Self {
            state: Mutex::new((Level::Empty, VecDeque::with_capacity(CAP))),
            changed: Condvar::new(),
        }
    }
}

impl Default for PortableAst {
    fn default() -> Self {
        Self::new()
    }
}

impl AstLike for PortableAst {
    fn with(&self, set: StateSet<Level>, f: impl FnOnce(&mut VecDeque<u64>) -> Level) {
        let g = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut g = self
            .changed
            .wait_while(g, |(state, _)| !set.contains(*state))
            .unwrap_or_else(PoisonError::into_inner);
        g.0 = f(&mut g.1);
        drop(g);
        self.changed.notify_all();
    }
}

/// A bounded buffer over any [`AstLike`] lock.
pub struct AstBuffer<A>(pub A);

impl AstBuffer<AstMutex<Level, VecDeque<u64>>> {
    /// A buffer on an [`AstMutex`] configured by `config`.
    pub fn with_config(config: Config) -> Self {
        Self(AstMutex::with_config(
            Level::Empty,
            VecDeque::with_capacity(CAP),
            config,
        ))
    }
}

impl<A: AstLike> Buffer for AstBuffer<A> {
    #[inline]
    fn put(&self, item: u64) {
        self.0.with(not_full(), |q| {
            q.push_back(item);
            level(q.len())
        });
    }

    #[inline]
    fn put_marginal(&self, item: u64) {
        self.0.with(below_half(), |q| {
            debug_assert!(q.len() < CAP / 2);
            q.push_back(item);
            level(q.len())
        });
    }

    #[inline]
    fn get(&self) -> u64 {
        let mut item = 0;
        self.0.with(not_empty(), |q| {
            item = q.pop_front().expect("entered in a non-empty state");
            level(q.len())
        });
        item
    }
}

impl<A: AstLike> AstBuffer<A> {
    /// Waits for a state that never comes, then passes it on: the parked
    /// bystanders of `ast/waiters`.
    pub fn wait_for_never(&self) {
        self.0.with(Level::Never.into(), |_| Level::Never);
    }

    /// Waits until `n` bystanders are queued, where the lock can tell, or
    /// for `fallback` otherwise.
    pub fn until_queued(&self, n: usize, fallback: std::time::Duration) {
        if self.0.queued().is_none() {
            return std::thread::sleep(fallback);
        }
        let give_up = std::time::Instant::now() + fallback * 10;
        while self.0.queued().is_some_and(|q| q < n) && std::time::Instant::now() < give_up {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Queued: each is about to sleep (or asleep).
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    /// Sets `Never` once the buffer is empty, releasing the bystanders.
    pub fn release_never(&self) {
        self.0.with(Level::Empty.into(), |_| Level::Never);
    }
}

const NOT_FULL: usize = 0;
const NOT_EMPTY: usize = 1;

/// Two condition variables, `notify_one`: the paper's "Cond. vars".
pub struct CondvarBuffer<M>(M);

impl<M: Monitor> CondvarBuffer<M> {
    /// An empty buffer.
    pub fn new() -> Self {
        Self(M::new(VecDeque::with_capacity(CAP), 2))
    }
}

impl<M: Monitor> Default for CondvarBuffer<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Monitor> Buffer for CondvarBuffer<M> {
    fn put(&self, item: u64) {
        self.0.run(
            NOT_FULL,
            |q| q.len() < CAP,
            |q| q.push_back(item),
            NOT_EMPTY,
            false,
        );
    }

    fn put_marginal(&self, _: u64) {
        panic!("two condition variables cannot express the watermark (the paper's point)");
    }

    fn get(&self) -> u64 {
        self.0.run(
            NOT_EMPTY,
            |q| !q.is_empty(),
            |q| q.pop_front().expect("waited for an item"),
            NOT_FULL,
            false,
        )
    }
}

/// One condition variable, `notify_all`: every woken thread re-tests its
/// predicate ("repeated tests").
pub struct RepeatedTests<M>(M);

impl<M: Monitor> RepeatedTests<M> {
    /// An empty buffer.
    pub fn new() -> Self {
        Self(M::new(VecDeque::with_capacity(CAP), 1))
    }
}

impl<M: Monitor> Default for RepeatedTests<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Monitor> Buffer for RepeatedTests<M> {
    fn put(&self, item: u64) {
        self.0
            .run(0, |q| q.len() < CAP, |q| q.push_back(item), 0, true);
    }

    fn put_marginal(&self, item: u64) {
        self.0
            .run(0, |q| q.len() < CAP / 2, |q| q.push_back(item), 0, true);
    }

    fn get(&self) -> u64 {
        self.0.run(
            0,
            |q| !q.is_empty(),
            |q| q.pop_front().expect("waited for an item"),
            0,
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ast_mutex::AbstractState;
    use std::sync::Arc;

    /// Every implementation delivers every item once, and marginal putters
    /// never overfill (a benchmark of a wrong buffer measures nothing).
    fn delivers<B: Buffer>(b: B, watermark: bool) {
        let b = Arc::new(b);
        let mut threads = Vec::new();
        for p in 0..3u64 {
            let b = Arc::clone(&b);
            threads.push(std::thread::spawn(move || {
                for i in 0..500 {
                    if watermark && p == 0 {
                        b.put_marginal(p * 1000 + i);
                    } else {
                        b.put(p * 1000 + i);
                    }
                }
                Vec::new()
            }));
        }
        for _ in 0..3 {
            let b = Arc::clone(&b);
            threads.push(std::thread::spawn(move || {
                (0..500).map(|_| b.get()).collect()
            }));
        }
        let mut got: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        got.sort_unstable();
        let want: Vec<u64> = (0..3)
            .flat_map(|p| (0..500).map(move |i| p * 1000 + i))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_buffer_delivers_every_item_once() {
        for watermark in [false, true] {
            delivers(AstBuffer::with_config(Config::new()), watermark);
            delivers(AstBuffer(PortableAst::new()), watermark);
            delivers(RepeatedTests::<StdMonitor>::new(), watermark);
            delivers(RepeatedTests::<PlMonitor>::new(), watermark);
        }
        delivers(CondvarBuffer::<StdMonitor>::new(), false);
        delivers(CondvarBuffer::<PlMonitor>::new(), false);
    }

    #[test]
    fn levels() {
        assert_eq!(level(0), Level::Empty);
        assert_eq!(level(4), Level::Low);
        assert_eq!(level(5), Level::High);
        assert_eq!(level(CAP), Level::Full);
        assert!(below_half().contains(level(CAP / 2 - 1)));
        assert!(!below_half().contains(level(CAP / 2)));
        assert_eq!(Level::COUNT, 5);
    }
}
