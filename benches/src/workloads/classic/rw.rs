//! RW: readers and writers of one database (tables VIII and XII).
//!
//! [`READERS`] readers and [`WRITERS`] writers each make `reps` accesses:
//! `work` units outside, then enter, `work` units inside (reading, or
//! writing: the writer increments the database's version), exit.
//!
//! * CP: Andrews' "passing the baton" (the SR book's solution, the paper's
//!   first RW program): a mutual-exclusion semaphore `e` and the delay
//!   semaphores `r` and `w`, with the counts `nr`, `nw`, `dr`, `dw`
//!   guarded by the baton. An exit wakes either one waiting writer or the
//!   waiting readers one after another, never a waiter that cannot go on.
//! * CM: the counts are `Cell`s; a reader awaits `nw == 0`, a writer
//!   `nr == 0 && nw == 0` (a woken writer that still cannot go on yields
//!   again: the paper's "needless awakening").
//! * PCM: the paper's table XII program: the same baton code as CP on
//!   lockfree-sync's semaphores taken with `acquire_async`, with the readers
//!   and the writers split evenly between the two regions (the state is
//!   shared by both regions, so all of it crosses).
//!
//! The check: witness counts of readers and writers inside; a reader that
//! enters finds no writer inside, a writer finds no one. The database's
//! version is read and written non-atomically (a load and a store), so a
//! lost update also shows: at the end it must equal the writes made.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use lockfree_sync::Semaphore;

use super::runtime::{
    Counter, Fault, LocalFault, LocalTask, Pv, Region, busy, p_async, run_cm, run_regions,
    run_threads, wait_until, yield_now,
};
use super::{Config, Model, Violation};
use crate::twins::CondvarSemaphore;

/// Reader processes.
pub const READERS: usize = 8;
/// Writer processes.
pub const WRITERS: usize = 4;

/// One run of RW in `model`: `cfg.reps` accesses per process.
pub(super) fn run(model: Model, cfg: &Config) -> Result<Duration, Violation> {
    match model {
        Model::CpLockfree => cp::<Semaphore>(cfg),
        Model::CpStd => cp::<CondvarSemaphore>(cfg),
        Model::Cm => cm(cfg),
        Model::Pcm => pcm(cfg),
    }
}

/// The witness and the database, shared by threads.
#[derive(Default)]
struct Db {
    readers_in: AtomicUsize,
    writers_in: AtomicUsize,
    version: AtomicU64,
    fault: Fault,
}

impl Db {
    // SeqCst on the witness counts: an entering reader increments
    // `readers_in` then loads `writers_in`, a writer the reverse; in the
    // single total order at least one of two overlapping entries sees the
    // other (store-load, as Dekker's).
    fn reader_in(&self) {
        self.readers_in.fetch_add(1, Ordering::SeqCst);
        if self.writers_in.load(Ordering::SeqCst) != 0 {
            self.fault
                .fail(|| "a reader entered while a writer was inside".into());
        }
    }

    fn reader_out(&self) {
        self.readers_in.fetch_sub(1, Ordering::SeqCst);
    }

    fn writer_in(&self) {
        if self.writers_in.fetch_add(1, Ordering::SeqCst) != 0 {
            self.fault
                .fail(|| "a writer entered while a writer was inside".into());
        }
        if self.readers_in.load(Ordering::SeqCst) != 0 {
            self.fault
                .fail(|| "a writer entered while a reader was inside".into());
        }
    }

    /// The write: a load and a store (not one RMW), so that a second writer
    /// inside loses an update.
    fn write(&self) {
        // Relaxed: ordered by the baton (the `e`/`w` semaphores' handoff).
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Relaxed);
    }

    fn writer_out(&self) {
        self.writers_in.fetch_sub(1, Ordering::SeqCst);
    }

    fn verdict(&self, elapsed: Duration, writes: u64) -> Result<Duration, Violation> {
        // Relaxed: the threads were joined.
        let version = self.version.load(Ordering::Relaxed);
        if version != writes {
            self.fault
                .fail(|| format!("{writes} writes left the version at {version}: updates lost"));
        }
        self.fault.verdict(elapsed)
    }
}

/// Passing the baton: `e` guards the counts; `r` and `w` delay readers and
/// writers. Whoever holds the baton (has done `P(e)` or been handed it
/// through `r`/`w`) alone reads and writes the counts.
struct Baton<S> {
    e: S,
    r: S,
    w: S,
    nr: Counter,
    nw: Counter,
    dr: Counter,
    dw: Counter,
}

impl<S: Pv> Baton<S> {
    fn new() -> Self {
        Self {
            e: S::new(1),
            r: S::new(0),
            w: S::new(0),
            nr: Counter::default(),
            nw: Counter::default(),
            dr: Counter::default(),
            dw: Counter::default(),
        }
    }

    fn reader_enter(&self) {
        self.e.p();
        if self.nw.get() > 0 {
            self.dr.set(self.dr.get() + 1);
            self.e.v();
            self.r.p(); // the baton comes back through `r`
        }
        self.nr.set(self.nr.get() + 1);
        self.signal_reader_entered();
    }

    fn reader_exit(&self) {
        self.e.p();
        self.nr.set(self.nr.get() - 1);
        self.signal_reader_left();
    }

    fn writer_enter(&self) {
        self.e.p();
        if self.nr.get() > 0 || self.nw.get() > 0 {
            self.dw.set(self.dw.get() + 1);
            self.e.v();
            self.w.p();
        }
        self.nw.set(self.nw.get() + 1);
        self.e.v();
    }

    fn writer_exit(&self) {
        self.e.p();
        self.nw.set(self.nw.get() - 1);
        self.signal_writer_left();
    }
}

/// The baton's hand-off decisions, shared by the blocking and the async
/// forms: each passes the baton to exactly one of `r`, `w` or `e`.
trait Handoff {
    fn counts(&self) -> (&Counter, &Counter, &Counter, &Counter);
    fn pass_r(&self);
    fn pass_w(&self);
    fn pass_e(&self);

    /// After a reader entered: wake the next delayed reader, else free `e`.
    fn signal_reader_entered(&self) {
        let (_, _, dr, _) = self.counts();
        if dr.get() > 0 {
            dr.set(dr.get() - 1);
            self.pass_r();
        } else {
            self.pass_e();
        }
    }

    /// After a reader left: the last one wakes a delayed writer.
    fn signal_reader_left(&self) {
        let (nr, _, _, dw) = self.counts();
        if nr.get() == 0 && dw.get() > 0 {
            dw.set(dw.get() - 1);
            self.pass_w();
        } else {
            self.pass_e();
        }
    }

    /// After a writer left: readers first, then a writer, else free `e`.
    fn signal_writer_left(&self) {
        let (_, _, dr, dw) = self.counts();
        if dr.get() > 0 {
            dr.set(dr.get() - 1);
            self.pass_r();
        } else if dw.get() > 0 {
            dw.set(dw.get() - 1);
            self.pass_w();
        } else {
            self.pass_e();
        }
    }
}

impl<S: Pv> Handoff for Baton<S> {
    fn counts(&self) -> (&Counter, &Counter, &Counter, &Counter) {
        (&self.nr, &self.nw, &self.dr, &self.dw)
    }
    fn pass_r(&self) {
        self.r.v();
    }
    fn pass_w(&self) {
        self.w.v();
    }
    fn pass_e(&self) {
        self.e.v();
    }
}

fn cp<S: Pv>(cfg: &Config) -> Result<Duration, Violation> {
    let db = Arc::new(Db::default());
    let baton = Arc::new(Baton::<S>::new());
    let (work, reps) = (cfg.work, cfg.reps);
    let d = Arc::clone(&db);
    let elapsed = run_threads(READERS + WRITERS, move |i| {
        for _ in 0..reps {
            busy(work); // outside
            if i < READERS {
                baton.reader_enter();
                d.reader_in();
                busy(work); // read
                d.reader_out();
                baton.reader_exit();
            } else {
                baton.writer_enter();
                d.writer_in();
                d.write();
                busy(work); // write
                d.writer_out();
                baton.writer_exit();
            }
        }
    });
    db.verdict(elapsed, (WRITERS * reps) as u64)
}

/// The cooperative model's state: counts and witness in `Cell`s.
#[derive(Default)]
struct CmDb {
    nr: Cell<usize>,
    nw: Cell<usize>,
    readers_in: Cell<usize>,
    writers_in: Cell<usize>,
    version: Cell<u64>,
    fault: LocalFault,
}

fn cm(cfg: &Config) -> Result<Duration, Violation> {
    let db = Rc::new(CmDb::default());
    let (work, reps, sabotage) = (cfg.work, cfg.reps, cfg.sabotage);
    let tasks: Vec<LocalTask> = (0..READERS + WRITERS)
        .map(|i| {
            let db = Rc::clone(&db);
            Box::pin(async move {
                for _ in 0..reps {
                    busy(work); // outside
                    if i < READERS {
                        if !sabotage {
                            wait_until(|| db.nw.get() == 0).await;
                        }
                        db.nr.set(db.nr.get() + 1);
                        if db.writers_in.get() != 0 {
                            db.fault
                                .fail(|| "a reader entered while a writer was inside".into());
                        }
                        db.readers_in.set(db.readers_in.get() + 1);
                        if sabotage {
                            yield_now().await; // the broken variant yields inside
                        }
                        busy(work); // read
                        db.readers_in.set(db.readers_in.get() - 1);
                        db.nr.set(db.nr.get() - 1);
                    } else {
                        if !sabotage {
                            wait_until(|| db.nr.get() == 0 && db.nw.get() == 0).await;
                        }
                        db.nw.set(db.nw.get() + 1);
                        if db.writers_in.get() != 0 || db.readers_in.get() != 0 {
                            db.fault
                                .fail(|| "a writer entered while another was inside".into());
                        }
                        db.writers_in.set(db.writers_in.get() + 1);
                        let v = db.version.get();
                        if sabotage {
                            yield_now().await;
                        }
                        db.version.set(v + 1);
                        busy(work); // write
                        db.writers_in.set(db.writers_in.get() - 1);
                        db.nw.set(db.nw.get() - 1);
                    }
                }
            }) as LocalTask
        })
        .collect();
    let elapsed = run_cm(tasks);
    let writes = (WRITERS * reps) as u64;
    if db.version.get() != writes {
        let version = db.version.get();
        db.fault
            .fail(|| format!("{writes} writes left the version at {version}: updates lost"));
    }
    db.fault.verdict(elapsed)
}

/// The baton on lockfree-sync's semaphores for tasks: `P` is
/// `acquire_async`, `V` is `release`.
struct AsyncBaton(Baton<Semaphore>);

impl Handoff for AsyncBaton {
    fn counts(&self) -> (&Counter, &Counter, &Counter, &Counter) {
        self.0.counts()
    }
    fn pass_r(&self) {
        self.0.r.release(1);
    }
    fn pass_w(&self) {
        self.0.w.release(1);
    }
    fn pass_e(&self) {
        self.0.e.release(1);
    }
}

impl AsyncBaton {
    async fn reader_enter(&self) {
        let b = &self.0;
        p_async(&b.e).await;
        if b.nw.get() > 0 {
            b.dr.set(b.dr.get() + 1);
            b.e.release(1);
            p_async(&b.r).await;
        }
        b.nr.set(b.nr.get() + 1);
        self.signal_reader_entered();
    }

    async fn reader_exit(&self) {
        let b = &self.0;
        p_async(&b.e).await;
        b.nr.set(b.nr.get() - 1);
        self.signal_reader_left();
    }

    async fn writer_enter(&self) {
        let b = &self.0;
        p_async(&b.e).await;
        if b.nr.get() > 0 || b.nw.get() > 0 {
            b.dw.set(b.dw.get() + 1);
            b.e.release(1);
            p_async(&b.w).await;
        }
        b.nw.set(b.nw.get() + 1);
        b.e.release(1);
    }

    async fn writer_exit(&self) {
        let b = &self.0;
        p_async(&b.e).await;
        b.nw.set(b.nw.get() - 1);
        self.signal_writer_left();
    }
}

fn pcm(cfg: &Config) -> Result<Duration, Violation> {
    let db = Arc::new(Db::default());
    let baton = Arc::new(AsyncBaton(Baton::new()));
    let (work, reps) = (cfg.work, cfg.reps);
    let regions: Vec<Region> = (0..2)
        .map(|r| {
            let (db, baton) = (Arc::clone(&db), Arc::clone(&baton));
            Box::new(move || {
                // Region r: every other reader and every other writer.
                (0..READERS + WRITERS)
                    .filter(|i| i % 2 == r)
                    .map(|i| {
                        let (db, baton) = (Arc::clone(&db), Arc::clone(&baton));
                        Box::pin(async move {
                            for _ in 0..reps {
                                busy(work); // outside
                                if i < READERS {
                                    baton.reader_enter().await;
                                    db.reader_in();
                                    busy(work); // read
                                    db.reader_out();
                                    baton.reader_exit().await;
                                } else {
                                    baton.writer_enter().await;
                                    db.writer_in();
                                    db.write();
                                    busy(work); // write
                                    db.writer_out();
                                    baton.writer_exit().await;
                                }
                            }
                        }) as LocalTask
                    })
                    .collect()
            }) as Region
        })
        .collect();
    let elapsed = run_regions(regions);
    db.verdict(elapsed, (WRITERS * reps) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_witness_sees_a_writer_beside_a_reader() {
        let db = Db::default();
        db.reader_in();
        db.writer_in();
        let v = db.verdict(Duration::ZERO, 0).unwrap_err();
        assert!(v.0.contains("reader was inside"), "{v}");
    }

    #[test]
    fn the_witness_sees_a_reader_beside_a_writer_and_two_writers() {
        let db = Db::default();
        db.writer_in();
        db.reader_in();
        assert!(db.verdict(Duration::ZERO, 0).is_err());
        let db = Db::default();
        db.writer_in();
        db.writer_in();
        assert!(db.verdict(Duration::ZERO, 0).is_err());
    }

    #[test]
    fn a_lost_update_shows_in_the_version() {
        let db = Db::default();
        db.write();
        assert!(db.verdict(Duration::ZERO, 1).is_ok());
        assert!(db.verdict(Duration::ZERO, 2).is_err());
    }
}
