//! `am/or/*`: the paper's OR over two queues.

use super::*;

// ------------------------------------------------------------------ OR --

const OR_CAP: usize = 16;

trait EitherQueue: Send + Sync + 'static {
    fn new() -> Self;
    fn put(&self, which: usize, x: u64);
    fn take_either(&self) -> u64;
}

struct AmEither([Monitor<VecDeque<u64>>; 2]);

impl EitherQueue for AmEither {
    fn new() -> Self {
        Self([(); 2].map(|_| Monitor::new(VecDeque::with_capacity(OR_CAP))))
    }
    fn put(&self, which: usize, x: u64) {
        drop(self.0[which].when(|q| q.len() < OR_CAP, move |q| q.push_back(x)));
    }
    fn take_either(&self) -> u64 {
        let [a, b] = &self.0;
        let (_, x) = or((
            a.op(|q| !q.is_empty(), |q| q.pop_front().expect("not empty")),
            b.op(|q| !q.is_empty(), |q| q.pop_front().expect("not empty")),
        ))
        .unwrap_or_else(|_| unreachable!("two monitors"))
        .wait();
        x
    }
}

/// The best alternative with the peers: two bounded crossbeam channels and
/// `select!` (`Select::ready` then `try_recv` is the same machinery; one
/// mutex over both queues, `LkEither`, moves 3-10x fewer items).
struct SelectEither([(cbc::Sender<u64>, cbc::Receiver<u64>); 2]);

impl EitherQueue for SelectEither {
    fn new() -> Self {
        Self([(); 2].map(|_| cbc::bounded(OR_CAP)))
    }
    fn put(&self, which: usize, x: u64) {
        self.0[which].0.send(x).expect("open");
    }
    fn take_either(&self) -> u64 {
        let [(_, a), (_, b)] = &self.0;
        cbc::select! {
            recv(a) -> x => x.expect("open"),
            recv(b) -> x => x.expect("open"),
        }
    }
}

/// The lock-based alternative (the paper's): one parking_lot mutex over
/// both queues, a condition variable for takers and one for putters.
struct LkEither(
    parking_lot::Mutex<[VecDeque<u64>; 2]>,
    parking_lot::Condvar,
    parking_lot::Condvar,
);

impl EitherQueue for LkEither {
    fn new() -> Self {
        Self(
            parking_lot::Mutex::new([(); 2].map(|_| VecDeque::with_capacity(OR_CAP))),
            parking_lot::Condvar::new(),
            parking_lot::Condvar::new(),
        )
    }
    fn put(&self, which: usize, x: u64) {
        let mut g = self.0.lock();
        while g[which].len() >= OR_CAP {
            self.2.wait(&mut g);
        }
        g[which].push_back(x);
        drop(g);
        self.1.notify_one();
    }
    fn take_either(&self) -> u64 {
        let mut g = self.0.lock();
        loop {
            if let Some(x) = g[0].pop_front().or_else(|| g[1].pop_front()) {
                drop(g);
                // Putters wait on either queue: wake them all (one queue's
                // putter woken for the other's slot would sleep again).
                self.2.notify_all();
                return x;
            }
            self.1.wait(&mut g);
        }
    }
}

fn or_sample<E: EitherQueue>(threads: usize, items: u64) -> impl FnMut() -> f64 {
    move || {
        let e = Arc::new((E::new(), std::sync::atomic::AtomicU64::new(0)));
        let producers = threads / 2;
        let elapsed = run_threads(&e, threads, move |(e, taken), i| {
            if i < producers {
                for k in 0..items {
                    e.put((k as usize + i) % 2, k);
                }
            } else {
                let mut sum = 0;
                for _ in 0..items {
                    sum += e.take_either();
                }
                taken.fetch_add(sum, std::sync::atomic::Ordering::Relaxed);
            }
        });
        // Every item taken once: the sums agree.
        let expected = producers as u64 * (items * (items - 1) / 2);
        assert_eq!(
            e.1.load(std::sync::atomic::Ordering::Relaxed),
            expected,
            "am/or: items lost or taken twice"
        );
        mops_per_sec(elapsed, 2 * items * producers as u64)
    }
}

pub(super) fn or_queues(mode: Mode, threads: usize) -> Workload {
    // Quick: 20 000 items a producer (a sample of a few ms; with 4 000,
    // under a millisecond, thread start-up decided much of it).
    let items = mode.pick(20_000, 40_000);
    Workload::new(format!("am/or/{threads}"), Unit::MopsPerSec)
        .title(format!(
            "Take from either of two bounded queues (capacity {OR_CAP}): {} producers put \
             {items} items each, alternating queues; {} consumers take from whichever has one.",
            threads / 2,
            threads / 2
        ))
        .param("threads", threads)
        .param("items", items)
        .param("capacity", OR_CAP)
        .baseline("crossbeam-select")
        .paper(
            "figure 5 (OR): AM's OR outperforms the lock-based alternatives (the paper found \
             no working transactional-memory one). Our baseline is the strongest alternative \
             a Rust user has: two crossbeam bounded channels and `select!`; `lk` is the \
             lock-based one (a parking_lot mutex over both queues, two condition variables). \
             Every sample checks that the items taken sum to the items put.",
        )
        .implementation("am", or_sample::<AmEither>(threads, items))
        .implementation(
            "crossbeam-select",
            or_sample::<SelectEither>(threads, items),
        )
        .implementation("lk", or_sample::<LkEither>(threads, items))
}
