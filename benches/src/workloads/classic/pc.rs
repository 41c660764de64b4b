//! PC: one producer, one consumer, a single-slot buffer (tables VII and
//! XI).
//!
//! The producer makes item `i` (`work` units) and puts it in the slot; the
//! consumer takes it and uses it (`work` units).
//!
//! * CP: semaphores `empty` (1) and `full` (0) around the slot, as in the
//!   SR book.
//! * CM: the slot is a `Cell<Option<u64>>`; the producer awaits an empty
//!   slot, the consumer a full one.
//! * PCM: the producer is one region and the consumer the other (the
//!   paper's split), so the slot is shared across regions and guarded by
//!   the same two semaphores as CP, taken with `acquire_async`.
//!
//! The check: items arrive in order, each exactly once: the producer finds
//! the slot empty when it puts (nothing overwritten), the consumer finds
//! it full when it takes (nothing taken twice) and sees `0, 1, 2, …` with
//! no gap; the consumer stops only after the last item.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lockfree_sync::Semaphore;

use super::runtime::{
    Fault, LocalFault, LocalTask, Pv, Region, busy, p_async, run_cm, run_regions, run_threads,
    wait_until,
};
use super::{Config, Model, Violation};
use crate::twins::CondvarSemaphore;

/// One run of PC in `model`: `cfg.reps` items.
pub(super) fn run(model: Model, cfg: &Config) -> Result<Duration, Violation> {
    match model {
        Model::CpLockfree => cp::<Semaphore>(cfg),
        Model::CpStd => cp::<CondvarSemaphore>(cfg),
        Model::Cm => cm(cfg),
        Model::Pcm => pcm(cfg),
    }
}

/// The empty slot's mark.
const EMPTY: u64 = u64::MAX;

/// The slot shared by threads, with the exactly-once checks.
struct Slot {
    item: AtomicU64,
    fault: Fault,
}

impl Slot {
    fn new() -> Self {
        Self {
            item: AtomicU64::new(EMPTY),
            fault: Fault::default(),
        }
    }

    fn put(&self, i: u64) {
        // Relaxed: the `full` semaphore's release/acquire orders the item
        // for the consumer; the swap also checks the slot was empty.
        if self.item.swap(i, Ordering::Relaxed) != EMPTY {
            self.fault
                .fail(|| format!("item {i} overwrote an item not yet consumed"));
        }
    }

    fn take(&self, expected: u64) {
        // Relaxed: ordered by the `full` semaphore (see `put`); the `empty`
        // semaphore orders this swap before the producer's next put.
        let got = self.item.swap(EMPTY, Ordering::Relaxed);
        if got != expected {
            self.fault.fail(|| {
                format!(
                    "the consumer expected item {expected} and found {got:#x} (u64::MAX: empty)"
                )
            });
        }
    }
}

fn cp<S: Pv>(cfg: &Config) -> Result<Duration, Violation> {
    let slot = Arc::new(Slot::new());
    let sems = Arc::new([S::new(1), S::new(0)]); // empty, full
    let (work, items) = (cfg.work, cfg.reps as u64);
    let s = Arc::clone(&slot);
    let elapsed = run_threads(2, move |who| {
        let [empty, full] = &*sems;
        if who == 0 {
            for i in 0..items {
                busy(work); // produce
                empty.p();
                s.put(i);
                full.v();
            }
        } else {
            for i in 0..items {
                full.p();
                s.take(i);
                empty.v();
                busy(work); // consume
            }
        }
    });
    slot.fault.verdict(elapsed)
}

fn cm(cfg: &Config) -> Result<Duration, Violation> {
    let slot: Rc<Cell<Option<u64>>> = Rc::new(Cell::new(None));
    let done = Rc::new(Cell::new(false));
    let fault = Rc::new(LocalFault::default());
    let (work, items, sabotage) = (cfg.work, cfg.reps as u64, cfg.sabotage);
    let producer = {
        let (slot, done, fault) = (Rc::clone(&slot), Rc::clone(&done), Rc::clone(&fault));
        Box::pin(async move {
            for i in 0..items {
                busy(work); // produce
                if !sabotage {
                    wait_until(|| slot.get().is_none()).await;
                }
                if slot.replace(Some(i)).is_some() {
                    fault.fail(|| format!("item {i} overwrote an item not yet consumed"));
                }
            }
            done.set(true);
        }) as LocalTask
    };
    let consumer = {
        let (slot, done, fault) = (Rc::clone(&slot), Rc::clone(&done), Rc::clone(&fault));
        Box::pin(async move {
            for i in 0..items {
                // `done`: a broken producer must not leave the consumer
                // waiting forever.
                wait_until(|| slot.get().is_some() || done.get()).await;
                match slot.take() {
                    Some(got) if got == i => {}
                    got => {
                        fault.fail(|| format!("the consumer expected item {i} and found {got:?}"));
                        if got.is_none() {
                            return;
                        }
                    }
                }
                busy(work); // consume
            }
        }) as LocalTask
    };
    let elapsed = run_cm(vec![producer, consumer]);
    fault.verdict(elapsed)
}

fn pcm(cfg: &Config) -> Result<Duration, Violation> {
    let slot = Arc::new(Slot::new());
    let sems = Arc::new([Semaphore::new(1), Semaphore::new(0)]); // empty, full
    let (work, items) = (cfg.work, cfg.reps as u64);
    let regions: Vec<Region> = (0..2)
        .map(|who| {
            let (slot, sems) = (Arc::clone(&slot), Arc::clone(&sems));
            Box::new(move || {
                let task: LocalTask = Box::pin(async move {
                    let [empty, full] = &*sems;
                    if who == 0 {
                        for i in 0..items {
                            busy(work); // produce
                            p_async(empty).await;
                            slot.put(i);
                            full.release(1);
                        }
                    } else {
                        for i in 0..items {
                            p_async(full).await;
                            slot.take(i);
                            empty.release(1);
                            busy(work); // consume
                        }
                    }
                });
                vec![task]
            }) as Region
        })
        .collect();
    let elapsed = run_regions(regions);
    slot.fault.verdict(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_sees_an_overwrite() {
        let s = Slot::new();
        s.put(0);
        s.put(1);
        let v = s.fault.verdict(Duration::ZERO).unwrap_err();
        assert!(v.0.contains("overwrote"), "{v}");
    }

    #[test]
    fn the_slot_sees_a_lost_or_repeated_item() {
        let s = Slot::new();
        s.put(0);
        s.take(0);
        assert!(s.fault.verdict(Duration::ZERO).is_ok());
        s.take(1); // nothing was put: item 1 is lost
        assert!(s.fault.verdict(Duration::ZERO).is_err());
        let s = Slot::new();
        s.put(0);
        s.take(1); // item 0 arrived where 1 was due: a repeat
        assert!(s.fault.verdict(Duration::ZERO).is_err());
    }
}
