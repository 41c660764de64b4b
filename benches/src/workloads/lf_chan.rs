//! `lf/` channel workloads: paper 001's message queue (algorithm 3, table 3)
//! and Vella's wait-free CSP channel, against the channels a Rust user
//! would pick instead.
//!
//! * `lf/mpsc/{1,2,4}`: throughput of an unbounded queue with P producers
//!   and one receiver.
//! * `lf/mpsc-drain`, `lf/mpsc-many-senders`: table 3 (dequeue from a
//!   pre-filled queue; enqueue by many short-lived threads).
//! * `lf/mpsc-tasks`: the same queue between async tasks.
//! * `lf/csp-pingpong`, `lf/csp-pipeline`: rendezvous channels, between two
//!   threads and along a pipeline with more threads than cores.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use sync_core::spin::SpinLock;

use crate::harness::{Mode, Unit, Workload, mops_per_sec, ms, ns_per_op};
use crate::workloads::ast::StartLine;

/// The `lf/` channel workloads.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let mut all = Vec::new();
    for producers in [1, 2, 4] {
        all.push(mpsc_throughput(mode, producers));
    }
    all.push(mpsc_drain(mode));
    all.push(mpsc_many_senders(mode));
    all.push(mpsc_tasks(mode));
    all.push(csp_pingpong(mode));
    all.push(csp_pingpong_pinned(mode, Placement::Apart));
    all.push(csp_pingpong_pinned(mode, Placement::Together));
    all.push(csp_pipeline(mode));
    all
}

/// An unbounded multi-producer channel, blocking receiver.
trait Mpsc: 'static {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn channel() -> (Self::Tx, Self::Rx);
    fn clone_tx(tx: &Self::Tx) -> Self::Tx;
    fn send(tx: &Self::Tx, value: u64);
    /// Blocks for a value; `None` once every sender is gone and drained.
    fn recv(rx: &mut Self::Rx) -> Option<u64>;
    /// A value if one is queued now.
    fn try_recv(rx: &mut Self::Rx) -> Option<u64>;
}

struct LockfreeMpsc;
struct StdMpsc;
struct CrossbeamMpsc;
struct FlumeMpsc;
struct KanalMpsc;
struct CrossfireMpsc;
struct TokioMpsc;
struct SpinTwinMpsc;

/// The peers whose std-like API fits the trait as it is: blocking `recv`,
/// `try_recv`, `send` returning the value on a closed channel.
macro_rules! std_like_mpsc {
    ($($peer:ident: $tx:ty, $rx:ty, $channel:expr;)*) => {$(
        impl Mpsc for $peer {
            type Tx = $tx;
            type Rx = $rx;
            fn channel() -> (Self::Tx, Self::Rx) {
                $channel
            }
            fn clone_tx(tx: &Self::Tx) -> Self::Tx {
                tx.clone()
            }
            fn send(tx: &Self::Tx, value: u64) {
                tx.send(value).expect("receiver alive");
            }
            fn recv(rx: &mut Self::Rx) -> Option<u64> {
                rx.recv().ok()
            }
            fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
                rx.try_recv().ok()
            }
        }
    )*};
}

std_like_mpsc! {
    LockfreeMpsc: lockfree_sync::mpsc::Sender<u64>, lockfree_sync::mpsc::Receiver<u64>, lockfree_sync::mpsc::channel();
    StdMpsc: std::sync::mpsc::Sender<u64>, std::sync::mpsc::Receiver<u64>, std::sync::mpsc::channel();
    CrossbeamMpsc: crossbeam_channel::Sender<u64>, crossbeam_channel::Receiver<u64>, crossbeam_channel::unbounded();
    FlumeMpsc: flume::Sender<u64>, flume::Receiver<u64>, flume::unbounded();
}

impl Mpsc for KanalMpsc {
    type Tx = kanal::Sender<u64>;
    type Rx = kanal::Receiver<u64>;
    fn channel() -> (Self::Tx, Self::Rx) {
        kanal::unbounded()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().ok()
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok().flatten()
    }
}

type CrossfireTx = crossfire::MTx<crossfire::mpsc::List<u64>>;
type CrossfireRx = crossfire::Rx<crossfire::mpsc::List<u64>>;

impl Mpsc for CrossfireMpsc {
    type Tx = CrossfireTx;
    type Rx = CrossfireRx;
    fn channel() -> (Self::Tx, Self::Rx) {
        // Crossfire's documented set-up: pick its backoff for this machine.
        crossfire::detect_backoff_cfg();
        crossfire::mpsc::unbounded_blocking()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().ok()
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

impl Mpsc for TokioMpsc {
    type Tx = tokio::sync::mpsc::UnboundedSender<u64>;
    type Rx = tokio::sync::mpsc::UnboundedReceiver<u64>;
    fn channel() -> (Self::Tx, Self::Rx) {
        tokio::sync::mpsc::unbounded_channel()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.blocking_recv()
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.try_recv().ok()
    }
}

/// The paper's lock-based twin of the message queue: a `VecDeque` behind a
/// spin lock; the receiver spins, then yields, while it is empty.
struct SpinQueue {
    queue: SpinLock<VecDeque<u64>>,
    senders: AtomicUsize,
}

/// A sender of [`SpinQueue`] (counted, so the receiver learns when all are
/// gone).
struct SpinTx(Arc<SpinQueue>);

impl Drop for SpinTx {
    fn drop(&mut self) {
        // Release: the receiver that reads 0 sees every push.
        self.0.senders.fetch_sub(1, Ordering::Release);
    }
}

impl Mpsc for SpinTwinMpsc {
    type Tx = SpinTx;
    type Rx = Arc<SpinQueue>;
    fn channel() -> (Self::Tx, Self::Rx) {
        let q = Arc::new(SpinQueue {
            queue: SpinLock::new(VecDeque::new()),
            senders: AtomicUsize::new(1),
        });
        (SpinTx(Arc::clone(&q)), q)
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.0.senders.fetch_add(1, Ordering::Relaxed);
        SpinTx(Arc::clone(&tx.0))
    }
    fn send(tx: &Self::Tx, value: u64) {
        tx.0.queue.lock().push_back(value);
    }
    fn recv(rx: &mut Self::Rx) -> Option<u64> {
        let mut spins = 0u32;
        loop {
            if let Some(v) = rx.queue.lock().pop_front() {
                return Some(v);
            }
            // Acquire: pairs with the senders' Release decrements.
            if rx.senders.load(Ordering::Acquire) == 0 {
                return rx.queue.lock().pop_front();
            }
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                thread::yield_now();
            }
        }
    }
    fn try_recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.queue.lock().pop_front()
    }
}

/// `producers` threads send `per` values each; the receiver (this thread)
/// takes them all: messages per second, from the start line to the last
/// receive.
fn throughput<C: Mpsc>(producers: usize, per: u64) -> impl FnMut() -> f64 {
    move || {
        let (tx, mut rx) = C::channel();
        let start = Arc::new(StartLine::new(producers + 1));
        let handles: Vec<_> = (0..producers)
            .map(|_| {
                let tx = C::clone_tx(&tx);
                let start = Arc::clone(&start);
                thread::spawn(move || {
                    start.wait();
                    for i in 0..per {
                        C::send(&tx, i);
                    }
                })
            })
            .collect();
        drop(tx);
        start.wait();
        let mut sum = 0u64;
        let mut n = 0u64;
        while let Some(v) = C::recv(&mut rx) {
            sum += v;
            n += 1;
        }
        let elapsed = start.started().elapsed();
        for h in handles {
            h.join().expect("a producer panicked");
        }
        assert_eq!(n, per * producers as u64, "messages lost");
        assert_eq!(
            sum,
            producers as u64 * per * (per - 1) / 2,
            "messages corrupted"
        );
        mops_per_sec(elapsed, n)
    }
}

fn mpsc_throughput(mode: Mode, producers: usize) -> Workload {
    let total = mode.pick(1_200_000, 10_000_000);
    let per = total / producers as u64;
    Workload::new(format!("lf/mpsc/{producers}"), Unit::MopsPerSec)
        .title(format!(
            "{producers} producer thread(s) send {per} messages each into one unbounded \
             channel; one receiver thread takes them all (2 cores): messages per second."
        ))
        .param("producers", producers)
        .param("messages", per * producers as u64)
        .baseline("kanal")
        .paper(
            "no throughput figure in the paper (table 3 times a single send and a single \
             receive; see lf/mpsc-drain and lf/mpsc-many-senders). `spin-twin` is the paper's \
             lock-based twin: a VecDeque behind a spin lock.",
        )
        .implementation("lockfree-sync", throughput::<LockfreeMpsc>(producers, per))
        .implementation("std", throughput::<StdMpsc>(producers, per))
        .implementation("crossbeam", throughput::<CrossbeamMpsc>(producers, per))
        .implementation("flume", throughput::<FlumeMpsc>(producers, per))
        .implementation("kanal", throughput::<KanalMpsc>(producers, per))
        .implementation("crossfire", throughput::<CrossfireMpsc>(producers, per))
        .implementation("tokio", throughput::<TokioMpsc>(producers, per))
        .implementation("spin-twin", throughput::<SpinTwinMpsc>(producers, per))
}

/// Receives `n` pre-filled messages: ns per receive (the filling is not
/// timed).
fn drain<C: Mpsc>(n: u64) -> impl FnMut() -> f64 {
    move || {
        let (tx, mut rx) = C::channel();
        for i in 0..n {
            C::send(&tx, i);
        }
        let start = Instant::now();
        let mut sum = 0u64;
        for _ in 0..n {
            sum += C::try_recv(&mut rx).expect("pre-filled");
        }
        let elapsed = start.elapsed();
        black_box(sum);
        drop(tx);
        ns_per_op(elapsed, n)
    }
}

fn mpsc_drain(mode: Mode) -> Workload {
    let n = mode.pick(1_000_000, 10_000_000);
    Workload::new("lf/mpsc-drain", Unit::NsPerOp)
        .title(format!(
            "One thread receives {n} messages from a pre-filled unbounded channel (it never \
             waits): ns per receive."
        ))
        .param("messages", n)
        .baseline("kanal")
        .paper(
            "table 3, receiving a message (ns, Core 2 Duo 1.83 GHz): lock-based 53, lock-free \
             57 (\"the difference ... is not significant\"; the FIFO queue dominates).",
        )
        .implementation("lockfree-sync", drain::<LockfreeMpsc>(n))
        .implementation("crossbeam", drain::<CrossbeamMpsc>(n))
        .implementation("kanal", drain::<KanalMpsc>(n))
        .implementation("std", drain::<StdMpsc>(n))
}

/// `threads` short-lived threads each send one message: the median time
/// of one send, timed inside each thread (spawning is not timed). The
/// median, not the mean: with 2,000 threads on 2 CPUs, a few sends in a
/// sample are preempted for a scheduling round (milliseconds, against a
/// send's few hundred ns), and a mean of 2,000 is as much a count of those
/// draws as a measure of the send: the mean of one sample ranged over 70x
/// from run to run.
fn many_senders<C: Mpsc>(threads: usize) -> impl FnMut() -> f64 {
    move || {
        let (tx, mut rx) = C::channel();
        let mut took_ns = Vec::with_capacity(threads);
        // In batches, so that at most a few hundred threads exist at once.
        for batch in 0..threads.div_ceil(250) {
            let handles: Vec<_> = (batch * 250..threads.min((batch + 1) * 250))
                .map(|i| {
                    let tx = C::clone_tx(&tx);
                    thread::Builder::new()
                        .stack_size(64 * 1024)
                        .spawn(move || {
                            let start = Instant::now();
                            C::send(&tx, i as u64);
                            start.elapsed().as_nanos() as f64
                        })
                        .expect("spawn a sender")
                })
                .collect();
            for h in handles {
                took_ns.push(h.join().expect("a sender panicked"));
            }
        }
        drop(tx);
        let mut n = 0;
        while C::recv(&mut rx).is_some() {
            n += 1;
        }
        assert_eq!(n, threads, "messages lost");
        took_ns.sort_by(f64::total_cmp);
        took_ns[threads / 2]
    }
}

fn mpsc_many_senders(mode: Mode) -> Workload {
    let threads = 2_000;
    let _ = mode;
    Workload::new("lf/mpsc-many-senders", Unit::NsPerOp)
        .title(format!(
            "{threads} short-lived threads each send one message (each with its own clone of \
             the sender): median ns per send, timed inside the thread."
        ))
        .param("threads", threads)
        .baseline("kanal")
        .paper(
            "table 3, sending a message (ns; 25,000 user-level threads, one message each): \
             lock-based 1,217, lock-free 1,202; the paper notes that this includes creating \
             and joining the threads. Here only the send is timed, and each thread is a \
             new OS thread with a freshly cloned sender, so a first send (cold caches, \
             and for a channel that allocates in the sending thread, that thread's first \
             allocation) is what is measured. The median of the 2,000 sends, not the \
             mean: a preempted send counts once, not by its milliseconds.",
        )
        .implementation("lockfree-sync", many_senders::<LockfreeMpsc>(threads))
        .implementation("crossbeam", many_senders::<CrossbeamMpsc>(threads))
        .implementation("kanal", many_senders::<KanalMpsc>(threads))
        .implementation("std", many_senders::<StdMpsc>(threads))
}

/// A multi-producer channel between async tasks: senders never wait.
trait TaskMpsc: 'static {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn channel() -> (Self::Tx, Self::Rx);
    fn clone_tx(tx: &Self::Tx) -> Self::Tx;
    /// `&mut`: each task owns its sender (a clone), as the workload gives it.
    fn send(tx: &mut Self::Tx, value: u64) -> impl Future<Output = ()> + Send + '_;
    fn recv(rx: &mut Self::Rx) -> impl Future<Output = Option<u64>> + Send + '_;
}

impl TaskMpsc for LockfreeMpsc {
    type Tx = lockfree_sync::mpsc::Sender<u64>;
    type Rx = lockfree_sync::mpsc::Receiver<u64>;
    fn channel() -> (Self::Tx, Self::Rx) {
        lockfree_sync::mpsc::channel()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    async fn send(tx: &mut Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv_async().await.ok()
    }
}

impl TaskMpsc for TokioMpsc {
    type Tx = tokio::sync::mpsc::UnboundedSender<u64>;
    type Rx = tokio::sync::mpsc::UnboundedReceiver<u64>;
    fn channel() -> (Self::Tx, Self::Rx) {
        tokio::sync::mpsc::unbounded_channel()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    async fn send(tx: &mut Self::Tx, value: u64) {
        tx.send(value).expect("receiver alive");
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().await
    }
}

impl TaskMpsc for FlumeMpsc {
    type Tx = flume::Sender<u64>;
    type Rx = flume::Receiver<u64>;
    fn channel() -> (Self::Tx, Self::Rx) {
        flume::unbounded()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    async fn send(tx: &mut Self::Tx, value: u64) {
        tx.send_async(value).await.expect("receiver alive");
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv_async().await.ok()
    }
}

impl TaskMpsc for KanalMpsc {
    type Tx = kanal::AsyncSender<u64>;
    type Rx = kanal::AsyncReceiver<u64>;
    fn channel() -> (Self::Tx, Self::Rx) {
        kanal::unbounded_async()
    }
    fn clone_tx(tx: &Self::Tx) -> Self::Tx {
        tx.clone()
    }
    async fn send(tx: &mut Self::Tx, value: u64) {
        tx.send(value).await.expect("receiver alive");
    }
    async fn recv(rx: &mut Self::Rx) -> Option<u64> {
        rx.recv().await.ok()
    }
}

/// `tasks` tasks send `per` messages each to one receiving task on a
/// 2-worker runtime: ms until the receiver has them all.
fn tasks<C: TaskMpsc>(tasks: usize, per: u64) -> impl FnMut() -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("build a tokio runtime");
    move || {
        rt.block_on(async {
            let (tx, mut rx) = C::channel();
            let start = Instant::now();
            let receiver = tokio::spawn(async move {
                let mut n = 0u64;
                while C::recv(&mut rx).await.is_some() {
                    n += 1;
                }
                n
            });
            for _ in 0..tasks {
                let mut tx = C::clone_tx(&tx);
                tokio::spawn(async move {
                    for i in 0..per {
                        C::send(&mut tx, i).await;
                    }
                });
            }
            drop(tx);
            let n = receiver.await.expect("the receiver panicked");
            let elapsed = start.elapsed();
            assert_eq!(n, tasks as u64 * per, "messages lost");
            ms(elapsed)
        })
    }
}

fn mpsc_tasks(mode: Mode) -> Workload {
    let (n_tasks, per) = (64, mode.pick(10_000, 10_000));
    Workload::new("lf/mpsc-tasks", Unit::Ms)
        .title(format!(
            "{n_tasks} async tasks send {per} messages each to one receiving task, on a \
             2-worker tokio runtime: ms until all are received."
        ))
        .param("tasks", n_tasks)
        .param("messages_per_task", per)
        .baseline("tokio")
        .paper(
            "figure 1 moved to the message queue: the paper's user-level threads are the \
             tasks, its two kernel threads the runtime's workers.",
        )
        .implementation("lockfree-sync", tasks::<LockfreeMpsc>(n_tasks, per))
        .implementation("tokio", tasks::<TokioMpsc>(n_tasks, per))
        .implementation("flume", tasks::<FlumeMpsc>(n_tasks, per))
        .implementation("kanal", tasks::<KanalMpsc>(n_tasks, per))
}

/// A rendezvous (zero-capacity) channel between two threads.
trait Rendezvous: 'static {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn channel() -> (Self::Tx, Self::Rx);
    fn send(tx: &mut Self::Tx, value: u64);
    /// `None` once the sender is gone.
    fn recv(rx: &mut Self::Rx) -> Option<u64>;
}

struct LockfreeCsp;
struct CrossbeamZero;
struct StdZero;
struct FlumeZero;
struct KanalZero;
struct SpinTwinCsp;

/// The rendezvous peers whose std-like API fits the trait as it is.
macro_rules! std_like_rendezvous {
    ($($peer:ident: $tx:ty, $rx:ty, $channel:expr;)*) => {$(
        impl Rendezvous for $peer {
            type Tx = $tx;
            type Rx = $rx;
            fn channel() -> (Self::Tx, Self::Rx) {
                $channel
            }
            fn send(tx: &mut Self::Tx, value: u64) {
                tx.send(value).expect("receiver alive");
            }
            fn recv(rx: &mut Self::Rx) -> Option<u64> {
                rx.recv().ok()
            }
        }
    )*};
}

std_like_rendezvous! {
    LockfreeCsp: lockfree_sync::csp::Sender<u64>, lockfree_sync::csp::Receiver<u64>, lockfree_sync::csp::channel();
    CrossbeamZero: crossbeam_channel::Sender<u64>, crossbeam_channel::Receiver<u64>, crossbeam_channel::bounded(0);
    StdZero: std::sync::mpsc::SyncSender<u64>, std::sync::mpsc::Receiver<u64>, std::sync::mpsc::sync_channel(0);
    FlumeZero: flume::Sender<u64>, flume::Receiver<u64>, flume::bounded(0);
    KanalZero: kanal::Sender<u64>, kanal::Receiver<u64>, kanal::bounded(0);
}

/// The lock-based twin of the CSP channel: a one-value slot behind a spin
/// lock. The sender fills the slot and spins until it is emptied; the
/// receiver spins until it is full. Both spin, then yield.
struct SpinSlot {
    slot: SpinLock<Option<u64>>,
    closed: AtomicBool,
}

fn snooze(spins: &mut u32) {
    if *spins < 64 {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

/// The sending end of [`SpinSlot`]; closes it when dropped.
struct SpinSlotTx(Arc<SpinSlot>);

impl Drop for SpinSlotTx {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
    }
}

impl Rendezvous for SpinTwinCsp {
    type Tx = SpinSlotTx;
    type Rx = Arc<SpinSlot>;
    fn channel() -> (Self::Tx, Self::Rx) {
        let s = Arc::new(SpinSlot {
            slot: SpinLock::new(None),
            closed: AtomicBool::new(false),
        });
        (SpinSlotTx(Arc::clone(&s)), s)
    }
    fn send(tx: &mut Self::Tx, value: u64) {
        let s = &tx.0;
        *s.slot.lock() = Some(value);
        let mut spins = 0;
        while s.slot.lock().is_some() {
            snooze(&mut spins);
        }
    }
    fn recv(rx: &mut Self::Rx) -> Option<u64> {
        let mut spins = 0;
        loop {
            if let Some(v) = rx.slot.lock().take() {
                return Some(v);
            }
            // Acquire: pairs with the sender's Release on drop; its last
            // value was taken before it could close.
            if rx.closed.load(Ordering::Acquire) {
                return None;
            }
            snooze(&mut spins);
        }
    }
}

/// Where the two threads of a ping-pong run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// Wherever the scheduler puts them.
    Free,
    /// Pinned to two different CPUs: the protocol's own cost.
    Apart,
    /// Pinned to one CPU: every rendezvous waits for the partner to be
    /// scheduled, the scheduler's cost.
    Together,
}

impl Placement {
    /// The CPUs of (this thread, the echo thread), if pinned.
    fn cpus(self) -> Option<(usize, usize)> {
        match self {
            Placement::Free => None,
            Placement::Apart => Some((0, 1)),
            Placement::Together => Some((0, 0)),
        }
    }
}

/// `n` round trips between this thread and an echo thread over two
/// rendezvous channels: ns per round trip.
fn pingpong<C: Rendezvous>(n: u64) -> impl FnMut() -> f64 {
    pingpong_placed::<C>(n, Placement::Free)
}

/// [`pingpong`] with the two threads placed as `placement` says (this
/// thread's affinity is restored afterwards).
fn pingpong_placed<C: Rendezvous>(n: u64, placement: Placement) -> impl FnMut() -> f64 {
    move || {
        let cpus = placement.cpus();
        let restore = cpus.and_then(|(mine, _)| crate::harness::pin_to_cpu(mine));
        let (mut ping_tx, mut ping_rx) = C::channel();
        let (mut pong_tx, mut pong_rx) = C::channel();
        let echo = thread::spawn(move || {
            if let Some((_, theirs)) = cpus {
                crate::harness::pin_to_cpu(theirs);
            }
            while let Some(v) = C::recv(&mut ping_rx) {
                C::send(&mut pong_tx, v);
            }
        });
        // One round trip before the clock starts: both threads are running.
        C::send(&mut ping_tx, 0);
        C::recv(&mut pong_rx);
        let start = Instant::now();
        for i in 0..n {
            C::send(&mut ping_tx, i);
            assert_eq!(C::recv(&mut pong_rx), Some(i));
        }
        let elapsed = start.elapsed();
        drop(ping_tx);
        echo.join().expect("the echo thread panicked");
        if let Some(mask) = restore {
            crate::harness::restore_affinity(&mask);
        }
        ns_per_op(elapsed, n)
    }
}

fn csp_pingpong(mode: Mode) -> Workload {
    let n = mode.pick(5_000, 50_000);
    Workload::new("lf/csp-pingpong", Unit::NsPerOp)
        .title(format!(
            "Two threads pass a value back and forth over two rendezvous channels, {n} round \
             trips: ns per round trip (two rendezvous)."
        ))
        .param("round_trips", n)
        .baseline("kanal")
        .paper(
            "the paper gives no figure for Vella's channel. The floor between two spinning \
             threads is two cache-line round trips (see base/cacheline-pingpong); a thread \
             that sleeps pays a wake-up (base/park-unpark) per rendezvous.",
        )
        .implementation("lockfree-sync", pingpong::<LockfreeCsp>(n))
        .implementation("crossbeam", pingpong::<CrossbeamZero>(n))
        .implementation("std", pingpong::<StdZero>(n))
        .implementation("flume", pingpong::<FlumeZero>(n))
        .implementation("kanal", pingpong::<KanalZero>(n))
        .implementation("spin-twin", pingpong::<SpinTwinCsp>(n))
}

/// `lf/csp-pingpong` with both threads pinned, to two CPUs or to one, so
/// that the protocol's cost and the scheduler's are seen apart.
fn csp_pingpong_pinned(mode: Mode, placement: Placement) -> Workload {
    let n = mode.pick(5_000, 50_000);
    let (id, where_) = match placement {
        Placement::Apart => ("lf/csp-pingpong-apart", "pinned to two different CPUs"),
        _ => ("lf/csp-pingpong-together", "both pinned to one CPU"),
    };
    // Pinned to one CPU, a round trip costs scheduler switches: fewer.
    let n = if placement == Placement::Together {
        n / 5
    } else {
        n
    };
    Workload::new(id, Unit::NsPerOp)
        .title(format!(
            "lf/csp-pingpong with the two threads {where_}: ns per round trip, {n} round trips.              Apart shows the protocol's cost; together, every rendezvous waits for the partner              to be scheduled."
        ))
        .param("round_trips", n)
        .param("threads", 2)
        .regime(format!("2 threads {where_}"))
        .baseline("kanal")
        .implementation("lockfree-sync", pingpong_placed::<LockfreeCsp>(n, placement))
        .implementation("crossbeam", pingpong_placed::<CrossbeamZero>(n, placement))
        .implementation("std", pingpong_placed::<StdZero>(n, placement))
        .implementation("flume", pingpong_placed::<FlumeZero>(n, placement))
        .implementation("kanal", pingpong_placed::<KanalZero>(n, placement))
}

/// `stages` threads, each receiving from the previous channel and sending
/// to the next, `n` values through: ms from the first send to the last
/// receive.
fn pipeline<C: Rendezvous>(stages: usize, n: u64) -> impl FnMut() -> f64 {
    move || {
        let (mut first_tx, mut rx) = C::channel();
        let mut handles = Vec::with_capacity(stages);
        for _ in 0..stages {
            let (mut next_tx, next_rx) = C::channel();
            let mut stage_rx = std::mem::replace(&mut rx, next_rx);
            handles.push(thread::spawn(move || {
                while let Some(v) = C::recv(&mut stage_rx) {
                    C::send(&mut next_tx, v + 1);
                }
            }));
        }
        let mut last_rx = rx;
        let start = Instant::now();
        let feeder = thread::spawn(move || {
            for i in 0..n {
                C::send(&mut first_tx, i);
            }
        });
        let mut sum = 0u64;
        for _ in 0..n {
            sum += C::recv(&mut last_rx).expect("the pipeline delivers every value");
        }
        let elapsed = start.elapsed();
        feeder.join().expect("the feeder panicked");
        for h in handles {
            h.join().expect("a stage panicked");
        }
        assert_eq!(sum, n * (n - 1) / 2 + n * stages as u64, "values corrupted");
        ms(elapsed)
    }
}

fn csp_pipeline(mode: Mode) -> Workload {
    let stages = 8;
    let n = mode.pick(10_000, 100_000);
    Workload::new("lf/csp-pipeline", Unit::Ms)
        .title(format!(
            "An occam-style pipeline: {stages} stage threads joined by rendezvous channels \
             (plus a feeder and the collector: threads outnumber the 2 cores), {n} values \
             through: ms."
        ))
        .param("stages", stages)
        .param("values", n)
        .baseline("kanal")
        .paper(
            "the paper gives no figure; occam pipelines are the channel's intended use. With \
             more threads than cores a waiting stage must give its core away, so spinning \
             long costs the stage that would make progress.",
        )
        .implementation("lockfree-sync", pipeline::<LockfreeCsp>(stages, n))
        .implementation("crossbeam", pipeline::<CrossbeamZero>(stages, n))
        .implementation("std", pipeline::<StdZero>(stages, n))
        .implementation("flume", pipeline::<FlumeZero>(stages, n))
        .implementation("kanal", pipeline::<KanalZero>(stages, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mpsc_peer_delivers_everything() {
        fn check<C: Mpsc>() {
            assert!(throughput::<C>(2, 1_000)() > 0.0);
            assert!(drain::<C>(100)() > 0.0);
        }
        check::<LockfreeMpsc>();
        check::<StdMpsc>();
        check::<CrossbeamMpsc>();
        check::<FlumeMpsc>();
        check::<KanalMpsc>();
        check::<CrossfireMpsc>();
        check::<TokioMpsc>();
        check::<SpinTwinMpsc>();
    }

    #[test]
    fn every_rendezvous_peer_delivers_in_order() {
        fn check<C: Rendezvous>() {
            assert!(pingpong::<C>(100)() > 0.0);
            assert!(pipeline::<C>(3, 100)() > 0.0);
        }
        check::<LockfreeCsp>();
        check::<CrossbeamZero>();
        check::<StdZero>();
        check::<FlumeZero>();
        check::<KanalZero>();
        check::<SpinTwinCsp>();
    }

    #[test]
    fn every_task_peer_delivers_everything() {
        assert!(tasks::<LockfreeMpsc>(4, 100)() > 0.0);
        assert!(tasks::<TokioMpsc>(4, 100)() > 0.0);
        assert!(tasks::<FlumeMpsc>(4, 100)() > 0.0);
        assert!(tasks::<KanalMpsc>(4, 100)() > 0.0);
    }
}
