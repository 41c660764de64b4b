//! Program order, observed through sequence numbers: each task records its
//! worker, its position in the worker's program and a global execution
//! stamp. Under `Order::Strict` (rules 2 and 3) every worker's tasks run in
//! program order across monitors; under `Order::Relaxed` (appendix B) its
//! plain tasks on one monitor still do.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use active_monitor::{Completion, Monitor, Order};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
enum Kind {
    SubmitAsync,
    Call,
    When,
}

fn op() -> impl Strategy<Value = (usize, Kind)> {
    (
        0..2usize,
        prop_oneof![Just(Kind::SubmitAsync), Just(Kind::Call), Just(Kind::When)],
    )
}

/// (worker, position in its program, monitor, stamp)
type Log = Vec<(usize, usize, usize, usize)>;

fn run(order: Order, capacity: usize, programs: Vec<Vec<(usize, Kind)>>) -> Log {
    let clock = Arc::new(AtomicUsize::new(0));
    let monitors: Arc<Vec<Monitor<Log>>> = Arc::new(
        (0..2)
            .map(|_| {
                Monitor::builder()
                    .order(order)
                    .capacity(capacity)
                    .batch(2)
                    .build(Vec::new())
            })
            .collect(),
    );
    let workers: Vec<_> = programs
        .into_iter()
        .enumerate()
        .map(|(w, program)| {
            let (monitors, clock) = (Arc::clone(&monitors), Arc::clone(&clock));
            std::thread::spawn(move || {
                let mut pending: Vec<Completion<()>> = Vec::new();
                for (i, (m, kind)) in program.into_iter().enumerate() {
                    let clock = Arc::clone(&clock);
                    let task = move |log: &mut Log| {
                        // Long enough for the other workers to queue behind
                        // it, so that tasks are delegated, not run inline.
                        std::thread::yield_now();
                        log.push((w, i, m, clock.fetch_add(1, SeqCst)));
                    };
                    match kind {
                        Kind::SubmitAsync => pending.push(monitors[m].submit(task)),
                        Kind::Call => monitors[m].call(task),
                        Kind::When => pending.push(monitors[m].when(|_| true, task)),
                    }
                }
                for c in pending {
                    c.wait();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let monitors = Arc::try_unwrap(monitors).expect("workers joined");
    monitors
        .into_iter()
        .flat_map(|mut m| std::mem::take(&mut *m.get_mut()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn strict_order_keeps_every_workers_program_order(
        programs in prop::collection::vec(prop::collection::vec(op(), 1..40), 2..4),
        capacity in 1..4usize,
    ) {
        let total: usize = programs.iter().map(Vec::len).sum();
        let mut log = run(Order::Strict, capacity, programs);
        prop_assert_eq!(log.len(), total, "every task ran once");
        log.sort_by_key(|&(_, _, _, stamp)| stamp);
        let mut next = [0usize; 4];
        for (w, i, _, _) in log {
            prop_assert_eq!(i, next[w], "worker {} ran task {} out of program order", w, i);
            next[w] += 1;
        }
    }

    #[test]
    fn relaxed_order_keeps_program_order_per_monitor(
        programs in prop::collection::vec(prop::collection::vec(op(), 1..40), 2..4),
        capacity in 1..4usize,
    ) {
        let total: usize = programs.iter().map(Vec::len).sum();
        let mut log = run(Order::Relaxed, capacity, programs);
        prop_assert_eq!(log.len(), total, "every task ran once");
        log.sort_by_key(|&(_, _, _, stamp)| stamp);
        let mut last = [[None::<usize>; 2]; 4];
        for (w, i, m, _) in log {
            prop_assert!(last[w][m].is_none_or(|p| p < i), "worker {} on monitor {}: task {} after {:?}", w, m, i, last[w][m]);
            last[w][m] = Some(i);
        }
    }
}
