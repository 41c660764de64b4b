//! `am/rr/*`: the paper's round-robin access (RR).

use super::*;

// ------------------------------------------------------------------ RR --

trait Turns: Send + Sync + 'static {
    fn new(n: usize) -> Self;
    /// Waits for turn `i`, then passes it on.
    fn take_turn(&self, i: usize);
}

struct AmTurns(Monitor<usize>, usize);

impl Turns for AmTurns {
    fn new(n: usize) -> Self {
        Self(Monitor::new(0), n)
    }
    fn take_turn(&self, i: usize) {
        let n = self.1;
        self.0
            .when(move |t| *t == i, move |t| *t = (i + 1) % n)
            .wait();
    }
}

struct LkTurns(parking_lot::Mutex<usize>, parking_lot::Condvar, usize);

impl Turns for LkTurns {
    fn new(n: usize) -> Self {
        Self(parking_lot::Mutex::new(0), parking_lot::Condvar::new(), n)
    }
    fn take_turn(&self, i: usize) {
        let mut t = self.0.lock();
        while *t != i {
            self.1.wait(&mut t);
        }
        *t = (i + 1) % self.2;
        // One condition for every thread's turn: signal all (a lock-based
        // monitor cannot know whose turn it is without one condition
        // variable per thread).
        self.1.notify_all();
    }
}

fn rr_sample<R: Turns>(threads: usize, rounds: u64) -> impl FnMut() -> f64 {
    move || {
        let r = Arc::new(R::new(threads));
        let elapsed = run_threads(&r, threads, move |r, i| {
            for _ in 0..rounds {
                r.take_turn(i);
            }
        });
        mops_per_sec(elapsed, rounds * threads as u64)
    }
}

pub(super) fn rr(mode: Mode, threads: usize) -> Workload {
    let rounds = mode.pick(3_000, 30_000);
    Workload::new(format!("am/rr/{threads}"), Unit::MopsPerSec)
        .title(format!(
            "Round-robin access: {threads} threads take turns on one monitor in thread-id \
             order, {rounds} rounds; every access synchronous and conditional."
        ))
        .param("threads", threads)
        .param("rounds", rounds)
        .baseline("lk")
        .paper(
            "figure 5 (RR, from AutoSynch): AM (= AMS, no asynchronous operation) is ~3-4x \
             faster than LK, which spends its time waiting for lock acquisitions.",
        )
        .implementation("am", rr_sample::<AmTurns>(threads, rounds))
        .implementation("lk", rr_sample::<LkTurns>(threads, rounds))
}
