//! `am/bq/*`: the paper's bounded FIFO queue (BQ), and the bounded-queue
//! peers (the lock-based monitors and the actor) that `am/or/*` shares.

use super::*;
use crate::peers::{Monitor as CondvarMonitor, PlMonitor, StdMonitor};

// ---------------------------------------------------------------- peers --

/// A bounded FIFO queue of `u64`: the BQ and OR experiments' monitor.
trait BoundedQueue: Send + Sync + 'static {
    fn new(cap: usize) -> Self;
    fn put(&self, x: u64);
    fn take(&self) -> u64;
}

/// The paper's figure 2 on `active-monitor`: `put` asynchronous (unless
/// `SYNC`), `take` synchronous, both `waituntil`.
struct AmQueue<const ORDER_RELAXED: bool, const SYNC: bool> {
    m: Monitor<VecDeque<u64>>,
    cap: usize,
}

impl<const ORDER_RELAXED: bool, const SYNC: bool> BoundedQueue for AmQueue<ORDER_RELAXED, SYNC> {
    fn new(cap: usize) -> Self {
        let order = if ORDER_RELAXED {
            Order::Relaxed
        } else {
            Order::Strict
        };
        Self {
            m: Monitor::builder()
                .order(order)
                .build(VecDeque::with_capacity(cap)),
            cap,
        }
    }
    fn put(&self, x: u64) {
        let cap = self.cap;
        let c = self.m.when(move |q| q.len() < cap, move |q| q.push_back(x));
        if SYNC {
            c.wait();
        }
    }
    fn take(&self) -> u64 {
        self.m
            .when(|q| !q.is_empty(), |q| q.pop_front().expect("not empty"))
            .wait()
    }
}

/// [`AmQueue`] (strict order, asynchronous puts) with a server thread.
struct AmServerQueue {
    m: Served<VecDeque<u64>>,
    cap: usize,
}

impl BoundedQueue for AmServerQueue {
    fn new(cap: usize) -> Self {
        Self {
            m: Monitor::builder().build_served(VecDeque::with_capacity(cap)),
            cap,
        }
    }
    fn put(&self, x: u64) {
        let cap = self.cap;
        drop(self.m.when(move |q| q.len() < cap, move |q| q.push_back(x)));
    }
    fn take(&self) -> u64 {
        self.m
            .when(|q| !q.is_empty(), |q| q.pop_front().expect("not empty"))
            .wait()
    }
}

/// The lock-based monitor: a mutex and two condition variables.
struct LkQueue<M> {
    m: M,
    cap: usize,
}

/// Condition variables of [`LkQueue`]'s monitor.
const NOT_FULL: usize = 0;
const NOT_EMPTY: usize = 1;

impl<M: CondvarMonitor> BoundedQueue for LkQueue<M> {
    fn new(cap: usize) -> Self {
        Self {
            m: M::new(VecDeque::new(), 2),
            cap,
        }
    }
    fn put(&self, x: u64) {
        let cap = self.cap;
        self.m.run(
            NOT_FULL,
            |q| q.len() < cap,
            |q| q.push_back(x),
            NOT_EMPTY,
            false,
        );
    }
    fn take(&self) -> u64 {
        self.m.run(
            NOT_EMPTY,
            |q| !q.is_empty(),
            |q| q.pop_front().expect("not empty"),
            NOT_FULL,
            false,
        )
    }
}

/// The hand-made actor: a server thread owns the queue and answers
/// requests from a channel; every call carries its own reply channel.
struct ActorQueue {
    tx: cbc::Sender<Req>,
    server: Option<thread::JoinHandle<()>>,
}

enum Req {
    Put(u64, cbc::Sender<()>),
    Take(cbc::Sender<u64>),
    Stop,
}

impl BoundedQueue for ActorQueue {
    fn new(cap: usize) -> Self {
        let (tx, rx) = cbc::unbounded::<Req>();
        let server = thread::spawn(move || {
            let mut q = VecDeque::with_capacity(cap);
            let mut puts: VecDeque<(u64, cbc::Sender<()>)> = VecDeque::new();
            let mut takes: VecDeque<cbc::Sender<u64>> = VecDeque::new();
            for req in rx {
                match req {
                    Req::Put(x, reply) => puts.push_back((x, reply)),
                    Req::Take(reply) => takes.push_back(reply),
                    Req::Stop => return,
                }
                // Serve whatever can be served now.
                loop {
                    let mut progress = false;
                    if q.len() < cap {
                        if let Some((x, reply)) = puts.pop_front() {
                            q.push_back(x);
                            let _ = reply.send(());
                            progress = true;
                        }
                    }
                    if !q.is_empty() {
                        if let Some(reply) = takes.pop_front() {
                            let _ = reply.send(q.pop_front().expect("not empty"));
                            progress = true;
                        }
                    }
                    if !progress {
                        break;
                    }
                }
            }
        });
        Self {
            tx,
            server: Some(server),
        }
    }
    fn put(&self, x: u64) {
        let (reply, done) = cbc::bounded(1);
        self.tx.send(Req::Put(x, reply)).expect("the actor runs");
        done.recv().expect("the actor replies");
    }
    fn take(&self) -> u64 {
        let (reply, value) = cbc::bounded(1);
        self.tx.send(Req::Take(reply)).expect("the actor runs");
        value.recv().expect("the actor replies")
    }
}

impl Drop for ActorQueue {
    fn drop(&mut self) {
        let _ = self.tx.send(Req::Stop);
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
    }
}

// ------------------------------------------------------------------ BQ --

/// Half the threads put `items` each, half take as many; Mops/s of puts
/// and takes together.
fn bq_sample<Q: BoundedQueue>(cap: usize, threads: usize, items: u64) -> impl FnMut() -> f64 {
    move || {
        let q = Arc::new(Q::new(cap));
        let producers = threads / 2;
        let elapsed = run_threads(&q, threads, move |q, i| {
            if i < producers {
                for k in 0..items {
                    q.put(k);
                }
            } else {
                let mut sum = 0;
                for _ in 0..items {
                    sum += q.take();
                }
                black_box(sum);
            }
        });
        mops_per_sec(elapsed, 2 * items * producers as u64)
    }
}

pub(super) fn bq(mode: Mode, cap: usize, threads: usize) -> Workload {
    let items = mode.pick(6_000, 60_000);
    Workload::new(format!("am/bq/{cap}/{threads}"), Unit::MopsPerSec)
        .title(format!(
            "Bounded FIFO queue of capacity {cap}: {} producers put {items} items each, {} \
             consumers take them; puts asynchronous, takes synchronous (the paper's BQ).",
            threads / 2,
            threads / 2
        ))
        .param("capacity", cap)
        .param("threads", threads)
        .param("items", items)
        .baseline("lk")
        .baseline("actor")
        .paper(
            "figure 4 (40-core Xeon, Java): for capacities 4 to 16 AM significantly \
             outperforms LK; at 32 and 64 LK wins (non-fair lock, rare blocking); figure 7: \
             out-of-program-order (NPO, our `am-relaxed`) improves AM further.",
        )
        .implementation(
            "am",
            bq_sample::<AmQueue<false, false>>(cap, threads, items),
        )
        .implementation(
            "am-relaxed",
            bq_sample::<AmQueue<true, false>>(cap, threads, items),
        )
        .implementation(
            "ams",
            bq_sample::<AmQueue<false, true>>(cap, threads, items),
        )
        .implementation("lk", bq_sample::<LkQueue<PlMonitor>>(cap, threads, items))
        .implementation(
            "lk-std",
            bq_sample::<LkQueue<StdMonitor>>(cap, threads, items),
        )
        .implementation("actor", bq_sample::<ActorQueue>(cap, threads, items))
        .implementation("am-server", bq_sample::<AmServerQueue>(cap, threads, items))
}
