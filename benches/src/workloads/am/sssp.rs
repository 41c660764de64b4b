//! `am/sssp/*`: parallel single-source shortest paths over a shared
//! priority queue.

use super::sll::Rng;
use super::*;

// ---------------------------------------------------------------- SSSP --

/// A directed graph in compressed sparse rows, with edge weights.
pub struct Graph {
    /// Edges of vertex `v`: `offsets[v]..offsets[v + 1]`.
    pub offsets: Vec<u32>,
    /// Edge targets.
    pub targets: Vec<u32>,
    /// Edge weights, 1..=100.
    pub weights: Vec<u32>,
}

impl Graph {
    /// Vertices.
    pub fn vertices(&self) -> usize {
        self.offsets.len() - 1
    }

    /// An R-MAT graph (Chakrabarti, Zhan & Faloutsos, with GTgraph's
    /// default probabilities a = 0.45, b = c = 0.15, d = 0.25) of
    /// `vertices` vertices and `degree` edges per vertex on average,
    /// weights uniform in 1..=100, from a fixed seed.
    pub fn rmat(vertices: usize, degree: usize, seed: u64) -> Self {
        let scale = usize::BITS - (vertices - 1).leading_zeros();
        let mut rng = Rng::new(seed);
        let edges = vertices * degree;
        let mut list: Vec<(u32, u32, u32)> = Vec::with_capacity(edges);
        while list.len() < edges {
            let (mut src, mut dst) = (0u32, 0u32);
            for _ in 0..scale {
                let r = rng.below(100);
                let (down, right) = match r {
                    0..45 => (0, 0),
                    45..60 => (0, 1),
                    60..75 => (1, 0),
                    _ => (1, 1),
                };
                src = src << 1 | down;
                dst = dst << 1 | right;
            }
            if (src as usize) < vertices && (dst as usize) < vertices && src != dst {
                list.push((src, dst, 1 + rng.below(100)));
            }
        }
        let mut offsets = vec![0u32; vertices + 1];
        for &(s, _, _) in &list {
            offsets[s as usize + 1] += 1;
        }
        for v in 0..vertices {
            offsets[v + 1] += offsets[v];
        }
        let mut at = offsets.clone();
        let mut targets = vec![0u32; edges];
        let mut weights = vec![0u32; edges];
        for (s, d, w) in list {
            let i = at[s as usize] as usize;
            at[s as usize] += 1;
            targets[i] = d;
            weights[i] = w;
        }
        Self {
            offsets,
            targets,
            weights,
        }
    }

    /// Sequential Dijkstra from `source` (the reference).
    pub fn dijkstra(&self, source: u32) -> Vec<u64> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut dist = vec![u64::MAX; self.vertices()];
        let mut heap = BinaryHeap::new();
        dist[source as usize] = 0;
        heap.push(Reverse((0u64, source)));
        while let Some(Reverse((d, v))) = heap.pop() {
            if d > dist[v as usize] {
                continue;
            }
            let (lo, hi) = (
                self.offsets[v as usize] as usize,
                self.offsets[v as usize + 1] as usize,
            );
            for e in lo..hi {
                let (u, nd) = (self.targets[e] as usize, d + self.weights[e] as u64);
                if nd < dist[u] {
                    dist[u] = nd;
                    heap.push(Reverse((nd, u as u32)));
                }
            }
        }
        dist
    }
}

/// The shared priority queue of parallel Dijkstra, with the count of
/// pushed items not yet fully processed (the run ends when it reaches 0).
pub trait SharedPq: Send + Sync + 'static {
    /// An empty queue.
    fn new() -> Self;
    /// Pushes a tentative distance (counted as pending).
    fn put(&self, d: u64, v: u32);
    /// The smallest item, waiting while the queue is empty and items are
    /// pending; `None` once nothing is pending.
    fn take(&self) -> Option<(u64, u32)>;
    /// One taken item is fully processed (its pushes done).
    fn done_one(&self);
}

type Heap = std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>>;

/// The priority queue as an active monitor: `put` asynchronous (the
/// paper's only change to Java's blocking priority queue) unless `SYNC`.
pub struct AmPq<const SYNC: bool> {
    m: Monitor<Heap>,
    pending: Arc<std::sync::atomic::AtomicUsize>,
}

impl<const SYNC: bool> SharedPq for AmPq<SYNC> {
    fn new() -> Self {
        Self {
            m: Monitor::new(Heap::new()),
            pending: Arc::default(),
        }
    }
    fn put(&self, d: u64, v: u32) {
        self.pending
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let push = move |h: &mut Heap| h.push(std::cmp::Reverse((d, v)));
        if SYNC {
            self.m.call(push);
        } else {
            drop(self.m.submit(push));
        }
    }
    fn take(&self) -> Option<(u64, u32)> {
        let pending = Arc::clone(&self.pending);
        self.m
            .when(
                move |h| !h.is_empty() || pending.load(std::sync::atomic::Ordering::Acquire) == 0,
                |h| h.pop().map(|std::cmp::Reverse(x)| x),
            )
            .wait()
    }
    fn done_one(&self) {
        if self
            .pending
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            // Nothing pending: a task makes the monitor re-check the
            // waiting takes (their precondition reads `pending`).
            drop(self.m.submit(|_| ()));
        }
    }
}

/// The lock-based priority queue: a mutex and a condition variable.
pub struct LkPq {
    heap: parking_lot::Mutex<Heap>,
    ready: parking_lot::Condvar,
    pending: std::sync::atomic::AtomicUsize,
}

impl SharedPq for LkPq {
    fn new() -> Self {
        Self {
            heap: parking_lot::Mutex::new(Heap::new()),
            ready: parking_lot::Condvar::new(),
            pending: Default::default(),
        }
    }
    fn put(&self, d: u64, v: u32) {
        self.pending
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.heap.lock().push(std::cmp::Reverse((d, v)));
        self.ready.notify_one();
    }
    fn take(&self) -> Option<(u64, u32)> {
        let mut h = self.heap.lock();
        loop {
            if let Some(std::cmp::Reverse(x)) = h.pop() {
                return Some(x);
            }
            if self.pending.load(std::sync::atomic::Ordering::Acquire) == 0 {
                return None;
            }
            self.ready.wait(&mut h);
        }
    }
    fn done_one(&self) {
        if self
            .pending
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            let _h = self.heap.lock();
            self.ready.notify_all();
        }
    }
}

/// Parallel Dijkstra on `threads` threads sharing `Q`: returns the
/// distances and the edges scanned.
pub fn parallel_sssp<Q: SharedPq>(
    g: &Arc<Graph>,
    source: u32,
    threads: usize,
) -> (Vec<u64>, u64, Duration) {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    struct Shared<Q> {
        g: Arc<Graph>,
        q: Q,
        dist: Vec<AtomicU64>,
        scanned: AtomicU64,
    }
    let shared = Arc::new(Shared {
        g: Arc::clone(g),
        q: Q::new(),
        dist: (0..g.vertices())
            .map(|_| AtomicU64::new(u64::MAX))
            .collect(),
        scanned: AtomicU64::new(0),
    });
    shared.dist[source as usize].store(0, Relaxed);
    shared.q.put(0, source);
    let elapsed = run_threads(&shared, threads, |s, _| {
        let mut scanned = 0u64;
        while let Some((d, v)) = s.q.take() {
            if d <= s.dist[v as usize].load(Relaxed) {
                let (lo, hi) = (
                    s.g.offsets[v as usize] as usize,
                    s.g.offsets[v as usize + 1] as usize,
                );
                scanned += (hi - lo) as u64;
                for e in lo..hi {
                    let u = s.g.targets[e] as usize;
                    let nd = d + s.g.weights[e] as u64;
                    // Relaxed: the distances are only compared; the queue's
                    // own synchronization orders the pushes.
                    if s.dist[u].fetch_min(nd, Relaxed) > nd {
                        s.q.put(nd, u as u32);
                    }
                }
            }
            s.q.done_one();
        }
        s.scanned.fetch_add(scanned, Relaxed);
    });
    let dist = shared.dist.iter().map(|d| d.load(Relaxed)).collect();
    (dist, shared.scanned.load(Relaxed), elapsed)
}

/// The SSSP experiment's vertices (the paper's R16 and R128).
pub const SSSP_VERTICES: usize = 50_000;
const SSSP_THREADS: usize = 4;

fn sssp_sample<Q: SharedPq>(
    graph: Arc<std::sync::OnceLock<(Arc<Graph>, Vec<u64>)>>,
    degree: usize,
) -> impl FnMut() -> f64 {
    move || {
        let (g, reference) = graph.get_or_init(|| {
            let g = Graph::rmat(SSSP_VERTICES, degree, 16);
            let d = g.dijkstra(0);
            (Arc::new(g), d)
        });
        let (dist, scanned, elapsed) = parallel_sssp::<Q>(g, 0, SSSP_THREADS);
        assert!(dist == *reference, "parallel SSSP disagrees with Dijkstra");
        scanned as f64 / elapsed.as_secs_f64() / 1e6
    }
}

pub(super) fn sssp(mode: Mode, degree: usize) -> Workload {
    let _ = mode;
    let graph = Arc::new(std::sync::OnceLock::new());
    Workload::new(format!("am/sssp/rmat{degree}"), Unit::MedgesPerSec)
        .title(format!(
            "Parallel Dijkstra ({SSSP_THREADS} threads, one shared priority queue) from vertex \
             0 of an R-MAT graph of {SSSP_VERTICES} vertices and {degree} edges per vertex \
             (fixed seed): edges scanned per second."
        ))
        .param("vertices", SSSP_VERTICES)
        .param("degree", degree)
        .param("threads", SSSP_THREADS)
        .baseline("lk")
        .paper(
            "figure 3 (PSSSP, 40-core Xeon, Java): AM outperforms LK and AMS on every graph, \
             by most on the densest R-MAT graph (R512): the only difference is the \
             asynchronous put.",
        )
        .implementation("am", sssp_sample::<AmPq<false>>(Arc::clone(&graph), degree))
        .implementation("ams", sssp_sample::<AmPq<true>>(Arc::clone(&graph), degree))
        .implementation("lk", sssp_sample::<LkPq>(graph, degree))
}
