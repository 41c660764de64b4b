//! Parallel single-source shortest paths (the paper's PSSSP): Dijkstra's
//! label-correcting loop on four threads sharing one priority queue. The
//! queue is an active monitor whose `put` is asynchronous, the paper's only
//! change to Java's blocking priority queue; `take` waits with `when`
//! until an item is there or nothing is pending. Compared with the same
//! queue under synchronous delegation and under a Mutex + Condvar, and
//! checked against sequential Dijkstra.
//!
//! `cargo run --release -p sync-bench --bin sssp` (a sync-bench binary: it
//! runs the report's solver)

use std::sync::Arc;
use std::time::Instant;

use sync_bench::workloads::am::{AmPq, Graph, LkPq, SSSP_VERTICES, SharedPq, parallel_sssp};

fn run<Q: SharedPq>(name: &str, g: &Arc<Graph>, reference: &[u64]) {
    let (dist, scanned, elapsed) = parallel_sssp::<Q>(g, 0, 4);
    assert_eq!(dist, reference, "{name}: wrong distances");
    println!(
        "{name:>4}: {elapsed:>9.2?}, {scanned} edges scanned, {:.1} Medges/s",
        scanned as f64 / elapsed.as_secs_f64() / 1e6
    );
}

fn main() {
    let start = Instant::now();
    let g = Arc::new(Graph::rmat(SSSP_VERTICES, 16, 16));
    let reference = g.dijkstra(0);
    let reached = reference.iter().filter(|&&d| d != u64::MAX).count();
    println!(
        "R-MAT graph: {} vertices, {} edges, {reached} reachable from vertex 0 (built in {:.2?})",
        g.vertices(),
        g.targets.len(),
        start.elapsed()
    );
    for _ in 0..2 {
        run::<AmPq<false>>("am", &g, &reference);
        run::<AmPq<true>>("ams", &g, &reference);
        run::<LkPq>("lk", &g, &reference);
    }
}
