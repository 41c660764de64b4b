//! An occam-style pipeline: processes joined by `lockfree_sync::csp`
//! channels, each a rendezvous (a send returns once the next process has
//! taken the value, so no buffer grows anywhere).
//!
//! The same pipeline runs twice: first with one OS thread per process, then
//! with one async task per process on a 2-worker tokio runtime. The
//! processes are `numbers` (1..=N) → `square` → `keep_odd` → `sum`; in
//! the threaded run a monitor watches the progress reports of two of them
//! at once with `csp::Alt` (occam's ALT).
//!
//! `cargo run --release -p sync-examples --bin pipeline`

use std::thread;
use std::time::Instant;

use lockfree_sync::csp::{self, Alt, Receiver, Sender};

const N: u64 = 100_000;

/// The expected sum of the odd squares of 1..=N.
fn expected() -> u64 {
    (1..=N).map(|i| i * i).filter(|v| v % 2 == 1).sum()
}

fn with_threads() -> u64 {
    let (mut numbers_tx, mut numbers_rx) = csp::channel::<u64>();
    let (mut squares_tx, mut squares_rx) = csp::channel::<u64>();
    let (mut odd_tx, mut odd_rx) = csp::channel::<u64>();
    // Progress reports from two processes, to the monitor.
    let (mut square_report, square_reports) = csp::channel::<u64>();
    let (mut sum_report, sum_reports) = csp::channel::<u64>();

    let numbers = thread::spawn(move || {
        for i in 1..=N {
            numbers_tx.send(i).unwrap();
        }
        // Dropping the sender closes the channel: the next process ends.
    });
    let square = thread::spawn(move || {
        while let Ok(i) = numbers_rx.recv() {
            squares_tx.send(i * i).unwrap();
            if i % 25_000 == 0 {
                square_report.send(i).unwrap();
            }
        }
    });
    let keep_odd = thread::spawn(move || {
        while let Ok(v) = squares_rx.recv() {
            if v % 2 == 1 {
                odd_tx.send(v).unwrap();
            }
        }
    });
    let sum = thread::spawn(move || {
        let (mut total, mut count) = (0u64, 0u64);
        while let Ok(v) = odd_rx.recv() {
            total += v;
            count += 1;
            if count % 10_000 == 0 {
                sum_report.send(count).unwrap();
            }
        }
        total
    });

    // The monitor: ALT over the reports of both processes, until both have
    // ended. A closed channel stays ready, so it leaves the ALT.
    let mut open = vec![("square", square_reports), ("sum", sum_reports)];
    while !open.is_empty() {
        let mut alt = Alt::new(open.iter_mut().map(|(_, rx)| rx).collect());
        let (i, report) = alt.select();
        drop(alt);
        match report {
            Ok(n) => println!("  monitor: {} reports {n}", open[i].0),
            Err(_) => {
                println!("  monitor: {} has ended", open[i].0);
                open.remove(i);
            }
        }
    }
    for t in [numbers, square, keep_odd] {
        t.join().unwrap();
    }
    sum.join().unwrap()
}

/// One stage as an async task: receive, transform, send on.
async fn stage(mut rx: Receiver<u64>, mut tx: Sender<u64>, f: impl Fn(u64) -> Option<u64>) {
    while let Ok(v) = rx.recv_async().await {
        if let Some(out) = f(v) {
            if tx.send_async(out).await.is_err() {
                break;
            }
        }
    }
}

fn with_tasks() -> u64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let (mut numbers_tx, numbers_rx) = csp::channel::<u64>();
        let (squares_tx, squares_rx) = csp::channel::<u64>();
        let (odd_tx, mut odd_rx) = csp::channel::<u64>();
        let producer = tokio::spawn(async move {
            for i in 1..=N {
                numbers_tx.send_async(i).await.unwrap();
            }
        });
        let square = tokio::spawn(stage(numbers_rx, squares_tx, |i| Some(i * i)));
        let keep_odd = tokio::spawn(stage(squares_rx, odd_tx, |v| (v % 2 == 1).then_some(v)));
        let mut total = 0;
        while let Ok(v) = odd_rx.recv_async().await {
            total += v;
        }
        producer.await.unwrap();
        square.await.unwrap();
        keep_odd.await.unwrap();
        total
    })
}

fn main() {
    let want = expected();

    let start = Instant::now();
    let got = with_threads();
    println!(
        "threads: sum of the odd squares of 1..={N} = {got} in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(got, want);

    let start = Instant::now();
    let got = with_tasks();
    println!(
        "tasks:   sum of the odd squares of 1..={N} = {got} in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(got, want);
}
