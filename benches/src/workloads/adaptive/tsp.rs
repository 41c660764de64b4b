//! The paper's TSP experiment (section 4, tables 1-3): a best-first branch
//! and bound for the shortest tour, run by searcher threads that share a
//! work queue and the best tour found, through four locks:
//!
//! * `qlock`: the work queue (one per searcher when distributed);
//! * `glob-act-lock`: the number of active searchers (termination);
//! * `glob-low-lock`: the lowest tour value (one copy per searcher when
//!   distributed: a new best is propagated to every copy);
//! * `globlock`: the rest of the global state (the best tour's path).
//!
//! Three variants: `central` (one queue, one best value), `distributed`
//! (a queue per searcher on a ring, stealing from the next non-empty one
//! when the local one is empty) and `distributed-lb` (the same, and each
//! time a searcher takes a node it first moves one from the next queue into
//! its own: load balancing that keeps the queues' order closer to global).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Instant;

use crate::harness::{Mode, Unit, Workload, ms};
use crate::peers::BenchMutex;

use super::{Adaptive, BlockPolicy, LearnedPolicy, SimplePolicy};

/// The searcher threads (the paper ran one per processor on 10).
pub const SEARCHERS: usize = 4;

/// Which implementation of the shared abstractions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// One queue, one best value.
    Central,
    /// A queue and a best-value copy per searcher.
    Distributed,
    /// Distributed, with load balancing on every take.
    DistributedLb,
}

impl Variant {
    /// The three, in the paper's order.
    pub const ALL: [Variant; 3] = [
        Variant::Central,
        Variant::Distributed,
        Variant::DistributedLb,
    ];

    /// The id's last segment.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Central => "central",
            Variant::Distributed => "distributed",
            Variant::DistributedLb => "distributed-lb",
        }
    }
}

/// A complete graph's distances (asymmetric is allowed; ours are
/// symmetric), made from a seed.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The number of cities.
    pub n: usize,
    dist: Vec<u32>,
    /// For each city, its cheapest outgoing edge (for the bound).
    min_out: Vec<u32>,
}

impl Problem {
    /// `n` cities at random points of a 1000 × 1000 square (seeded).
    ///
    /// # Panics
    ///
    /// If `n` is not between 3 and 63.
    pub fn random(n: usize, seed: u64) -> Self {
        assert!((3..64).contains(&n), "3 to 63 cities, not {n}");
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 1000
        };
        let pts: Vec<(f64, f64)> = (0..n).map(|_| (next() as f64, next() as f64)).collect();
        let mut dist = vec![0; n * n];
        for i in 0..n {
            for j in 0..n {
                let (a, b) = (pts[i], pts[j]);
                dist[i * n + j] = ((a.0 - b.0).hypot(a.1 - b.1)).round() as u32;
            }
        }
        let min_out = (0..n)
            .map(|i| {
                (0..n)
                    .filter(|&j| j != i)
                    .map(|j| dist[i * n + j])
                    .min()
                    .unwrap_or(0)
            })
            .collect();
        Self { n, dist, min_out }
    }

    fn d(&self, a: usize, b: usize) -> u32 {
        self.dist[a * self.n + b]
    }
}

/// A subproblem: a partial tour from city 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    bound: u32,
    cost: u32,
    visited: u64,
    path: Vec<u8>,
}

impl Ord for Node {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Best first: the lowest bound, then the deepest.
        Reverse(self.bound)
            .cmp(&Reverse(other.bound))
            .then(self.path.len().cmp(&other.path.len()))
    }
}

impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Node {
    fn root(p: &Problem) -> Self {
        let bound = p.min_out.iter().sum();
        Node {
            bound,
            cost: 0,
            visited: 1,
            path: vec![0],
        }
    }

    fn last(&self) -> usize {
        *self.path.last().expect("a path starts at city 0") as usize
    }
}

/// What an expansion produced: children to queue, or a complete tour.
enum Expanded {
    Children(Vec<Node>),
    Tour(u32, Vec<u8>),
}

/// Expands `node`, pruning children whose bound is not below `best`.
fn expand(p: &Problem, node: &Node, best: u32) -> Expanded {
    let n = p.n;
    let last = node.last();
    if node.path.len() == n {
        let cost = node.cost + p.d(last, 0);
        return Expanded::Tour(cost, node.path.clone());
    }
    // The bound: the cost so far, plus for every city still to leave (the
    // last one and the unvisited) its cheapest way out.
    let mut rest: u32 = (0..n)
        .filter(|&c| node.visited & (1 << c) == 0)
        .map(|c| p.min_out[c])
        .sum();
    rest += p.min_out[last];
    let mut children = Vec::new();
    for c in 0..n {
        if node.visited & (1 << c) != 0 {
            continue;
        }
        let cost = node.cost + p.d(last, c);
        let bound = cost + rest - p.min_out[last];
        if bound >= best {
            continue;
        }
        let mut path = node.path.clone();
        path.push(c as u8);
        children.push(Node {
            bound,
            cost,
            visited: node.visited | (1 << c),
            path,
        });
    }
    Expanded::Children(children)
}

/// The sequential branch and bound: the optimum, and nodes expanded.
pub fn sequential(p: &Problem) -> (u32, Vec<u8>, u64) {
    let mut heap = BinaryHeap::new();
    heap.push(Node::root(p));
    let (mut best, mut tour, mut expanded) = (u32::MAX, Vec::new(), 0u64);
    while let Some(node) = heap.pop() {
        if node.bound >= best {
            continue;
        }
        expanded += 1;
        match expand(p, &node, best) {
            Expanded::Children(c) => heap.extend(c),
            Expanded::Tour(cost, path) => {
                if cost < best {
                    best = cost;
                    tour = path;
                }
            }
        }
    }
    (best, tour, expanded)
}

/// The shared state of a parallel run, over the lock type `M`.
pub struct Shared<M> {
    /// `qlock`s: one queue (central) or one per searcher.
    pub queues: Vec<M>,
    /// `glob-act-lock`: searchers holding a node.
    pub active: M,
    /// `glob-low-lock`s: the best value (central) or a copy per searcher.
    pub low: Vec<M>,
    /// `globlock`: the best tour's path, with its cost.
    pub global: M,
}

/// The four locks' data in one generic type: each lock guards a `Slot`.
pub enum Slot {
    /// A work queue.
    Queue(BinaryHeap<Node>),
    /// A counter or a tour value.
    Value(u64),
    /// The best tour.
    Tour(u32, Vec<u8>),
}

impl Slot {
    fn queue(&mut self) -> &mut BinaryHeap<Node> {
        match self {
            Slot::Queue(q) => q,
            _ => unreachable!("a queue lock"),
        }
    }
    fn value(&mut self) -> &mut u64 {
        match self {
            Slot::Value(v) => v,
            _ => unreachable!("a value lock"),
        }
    }
}

impl<M: BenchMutex<Slot>> Shared<M> {
    fn new(variant: Variant, searchers: usize) -> Self {
        let copies = if variant == Variant::Central {
            1
        } else {
            searchers
        };
        Self {
            queues: (0..copies)
                .map(|_| M::new(Slot::Queue(BinaryHeap::new())))
                .collect(),
            active: M::new(Slot::Value(0)),
            low: (0..copies)
                .map(|_| M::new(Slot::Value(u64::from(u32::MAX))))
                .collect(),
            global: M::new(Slot::Tour(u32::MAX, Vec::new())),
        }
    }

    fn best(&self, me: usize) -> u32 {
        let i = me % self.low.len();
        self.low[i].with(|s| *s.value()) as u32
    }

    /// Records a tour; propagates a new best to every copy.
    fn found(&self, cost: u32, path: Vec<u8>) {
        let better = self.global.with(|s| match s {
            Slot::Tour(c, p) if cost < *c => {
                *c = cost;
                *p = path;
                true
            }
            _ => false,
        });
        if better {
            for low in &self.low {
                low.with(|s| {
                    let v = s.value();
                    *v = (*v).min(u64::from(cost));
                });
            }
        }
    }

    /// Takes a node to expand (and counts this searcher active), from its
    /// own queue first, then along the ring.
    fn take(&self, variant: Variant, me: usize) -> Option<Node> {
        let q = self.queues.len();
        if variant == Variant::DistributedLb && q > 1 {
            // Load balancing: move one subproblem from the next queue here.
            let next = (me + 1) % q;
            if let Some(n) = self.queues[next].with(|s| s.queue().pop()) {
                self.queues[me].with(|s| s.queue().push(n));
            }
        }
        for k in 0..q {
            let i = (me + k) % q;
            let got = self.queues[i].with(|s| {
                let node = s.queue().pop();
                if node.is_some() {
                    // Active before the queue is seen without the node.
                    self.active.with(|a| *a.value() += 1);
                }
                node
            });
            if got.is_some() {
                return got;
            }
        }
        None
    }

    fn done(&self) -> bool {
        self.queues.iter().all(|q| q.with(|s| s.queue().is_empty()))
            && self.active.with(|a| *a.value() == 0)
    }

    fn searcher(&self, p: &Problem, variant: Variant, me: usize) -> u64 {
        let mut expanded = 0;
        loop {
            let Some(node) = self.take(variant, me) else {
                if self.done() {
                    return expanded;
                }
                thread::yield_now();
                continue;
            };
            let best = self.best(me);
            if node.bound < best {
                expanded += 1;
                match expand(p, &node, best) {
                    Expanded::Children(children) => {
                        let mine = me % self.queues.len();
                        self.queues[mine].with(|s| s.queue().extend(children));
                    }
                    Expanded::Tour(cost, path) => self.found(cost, path),
                }
            }
            self.active.with(|a| *a.value() -= 1);
        }
    }
}

/// Solves `p` with `searchers` threads on locks `M`: the best tour and its
/// cost, and the time taken.
pub fn solve<M: BenchMutex<Slot>>(
    p: &Arc<Problem>,
    variant: Variant,
    searchers: usize,
) -> (u32, Vec<u8>, std::time::Duration, Arc<Shared<M>>) {
    let shared = Arc::new(Shared::<M>::new(variant, searchers));
    shared.queues[0].with(|s| s.queue().push(Node::root(p)));
    let start = Instant::now();
    let handles: Vec<_> = (0..searchers)
        .map(|me| {
            let (shared, p) = (Arc::clone(&shared), Arc::clone(p));
            thread::spawn(move || shared.searcher(&p, variant, me))
        })
        .collect();
    for h in handles {
        h.join().expect("a searcher panicked");
    }
    let elapsed = start.elapsed();
    let (cost, path) = shared.global.with(|s| match s {
        Slot::Tour(c, p) => (*c, p.clone()),
        _ => unreachable!("the global lock"),
    });
    (cost, path, elapsed, shared)
}

/// The cities of the report's problem.
pub fn cities(mode: Mode) -> usize {
    mode.pick(11, 13)
}

/// The report's problem (fixed seed).
pub fn problem(mode: Mode) -> Problem {
    Problem::random(cities(mode), 0x5eed_7591)
}

/// `adaptive/tsp/<variant>`.
pub fn workload(mode: Mode, variant: Variant) -> Workload {
    let p = Arc::new(problem(mode));
    // The proven optimum every parallel search must find, solved on the
    // first sample rather than here: building the report's workloads (for
    // `--list`, or `--only` of another family) must not solve the instance.
    let optimum = Arc::new(OnceLock::new());
    fn imp<M: BenchMutex<Slot>>(
        p: &Arc<Problem>,
        variant: Variant,
        optimum: &Arc<OnceLock<u32>>,
    ) -> impl FnMut() -> f64 + 'static {
        let p = Arc::clone(p);
        let optimum = Arc::clone(optimum);
        move || {
            let optimum = *optimum.get_or_init(|| sequential(&p).0);
            let (cost, _, elapsed, _) = solve::<M>(&p, variant, SEARCHERS);
            assert_eq!(cost, optimum, "a parallel search missed the optimum");
            ms(elapsed)
        }
    }
    let seq = Arc::clone(&p);
    let seq_optimum = Arc::clone(&optimum);
    Workload::new(format!("adaptive/tsp/{}", variant.name()), Unit::Ms)
        .title(format!(
            "Branch and bound TSP on {} random cities, {SEARCHERS} searcher threads, four locks \
             ({} queue and best value): ms to the proven optimum.",
            p.n,
            match variant {
                Variant::Central => "one central",
                Variant::Distributed => "a distributed",
                Variant::DistributedLb => "a load-balanced distributed",
            }
        ))
        .param("cities", p.n)
        .param("searchers", SEARCHERS)
        .baseline("block")
        .baseline("parking_lot")
        .paper(match variant {
            Variant::Central => {
                "table 1 (32 cities, 10 processors of a BBN Butterfly): sequential 20666 ms, \
                 blocking lock 3207 ms, adaptive lock (simple-adapt) 2636 ms: 17.8% better."
            }
            Variant::Distributed => {
                "table 2: blocking lock 2973 ms, adaptive lock 2596 ms: 12.7% better."
            }
            Variant::DistributedLb => {
                "table 3: blocking lock 2054 ms, adaptive lock 1921 ms: 6.5% better."
            }
        })
        .implementation(
            "adaptive",
            imp::<Adaptive<LearnedPolicy, Slot>>(&p, variant, &optimum),
        )
        .implementation(
            "simple-adapt",
            imp::<Adaptive<SimplePolicy, Slot>>(&p, variant, &optimum),
        )
        .implementation(
            "block",
            imp::<Adaptive<BlockPolicy, Slot>>(&p, variant, &optimum),
        )
        .implementation(
            "parking_lot",
            imp::<::parking_lot::Mutex<Slot>>(&p, variant, &optimum),
        )
        .implementation("std", imp::<std::sync::Mutex<Slot>>(&p, variant, &optimum))
        .implementation("sequential", move || {
            let start = Instant::now();
            let (cost, _, _) = sequential(&seq);
            assert_eq!(cost, *seq_optimum.get_or_init(|| cost));
            ms(start.elapsed())
        })
}
