//! `am/sll/*`: the paper's sorted linked list (SLL).

use super::*;

// ----------------------------------------------------------------- SLL --

/// A sorted singly linked list of distinct keys.
#[derive(Default)]
struct SortedList {
    head: Option<Box<Node>>,
}

struct Node {
    key: u32,
    next: Option<Box<Node>>,
}

impl SortedList {
    fn contains(&self, key: u32) -> bool {
        let mut cur = &self.head;
        while let Some(n) = cur {
            if n.key >= key {
                return n.key == key;
            }
            cur = &n.next;
        }
        false
    }

    fn insert(&mut self, key: u32) -> bool {
        let mut cur = &mut self.head;
        while cur.as_ref().is_some_and(|n| n.key < key) {
            cur = &mut cur.as_mut().expect("checked").next;
        }
        if cur.as_ref().is_some_and(|n| n.key == key) {
            return false;
        }
        let next = cur.take();
        *cur = Some(Box::new(Node { key, next }));
        true
    }

    fn remove(&mut self, key: u32) -> bool {
        let mut cur = &mut self.head;
        while cur.as_ref().is_some_and(|n| n.key < key) {
            cur = &mut cur.as_mut().expect("checked").next;
        }
        if cur.as_ref().is_some_and(|n| n.key == key) {
            let next = cur.as_mut().expect("checked").next.take();
            *cur = next;
            return true;
        }
        false
    }

    fn prefilled(rng: &mut Rng, entries: usize) -> Self {
        let mut l = Self::default();
        let mut n = 0;
        while n < entries {
            n += l.insert(rng.below(KEYS)) as usize;
        }
        l
    }
}

impl Drop for SortedList {
    fn drop(&mut self) {
        // Iteratively: a recursive drop of 1000 nodes is fine, of more not.
        let mut cur = self.head.take();
        while let Some(mut n) = cur {
            cur = n.next.take();
        }
    }
}

/// xorshift64*: a small seeded generator, the same sequence for every
/// implementation.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(super) fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * n as u64) >> 32) as u32
    }
}

const KEYS: u32 = 2000;
const PREFILL: usize = 1000;

/// Reads / inserts / deletes, in percent.
#[derive(Clone, Copy)]
pub(super) struct SllMix {
    name: &'static str,
    read: u32,
    insert: u32,
}

impl SllMix {
    pub(super) const READ: Self = Self {
        name: "read",
        read: 90,
        insert: 9,
    };
    pub(super) const WRITE: Self = Self {
        name: "write",
        read: 0,
        insert: 50,
    };
    pub(super) const MIXED: Self = Self {
        name: "mixed",
        read: 70,
        insert: 20,
    };
}

/// The list monitor, as each implementation offers it.
trait ListMonitor: Send + Sync + 'static {
    fn new(list: SortedList) -> Self;
    fn contains(&self, key: u32) -> bool;
    fn insert(&self, key: u32);
    fn remove(&self, key: u32);
    /// Waits for this thread's asynchronous operations (end of a run).
    fn flush(&self) {}
}

struct AmList<const SYNC: bool>(Monitor<SortedList>);

impl<const SYNC: bool> ListMonitor for AmList<SYNC> {
    fn new(list: SortedList) -> Self {
        Self(Monitor::new(list))
    }
    fn contains(&self, key: u32) -> bool {
        self.0.call(move |l| l.contains(key))
    }
    fn insert(&self, key: u32) {
        if SYNC {
            self.0.call(move |l| l.insert(key));
        } else {
            drop(self.0.submit(move |l| l.insert(key)));
        }
    }
    fn remove(&self, key: u32) {
        if SYNC {
            self.0.call(move |l| l.remove(key));
        } else {
            drop(self.0.submit(move |l| l.remove(key)));
        }
    }
    fn flush(&self) {
        // A synchronous call runs after this thread's queued tasks.
        self.0.call(|_| ());
    }
}

/// [`AmList`] (asynchronous inserts and deletes) with a server thread.
struct AmServerList(Served<SortedList>);

impl ListMonitor for AmServerList {
    fn new(list: SortedList) -> Self {
        Self(Monitor::builder().build_served(list))
    }
    fn contains(&self, key: u32) -> bool {
        self.0.call(move |l| l.contains(key))
    }
    fn insert(&self, key: u32) {
        drop(self.0.submit(move |l| l.insert(key)));
    }
    fn remove(&self, key: u32) {
        drop(self.0.submit(move |l| l.remove(key)));
    }
    fn flush(&self) {
        self.0.call(|_| ());
    }
}

struct LkList(parking_lot::RwLock<SortedList>);

impl ListMonitor for LkList {
    fn new(list: SortedList) -> Self {
        Self(parking_lot::RwLock::new(list))
    }
    fn contains(&self, key: u32) -> bool {
        self.0.read().contains(key)
    }
    fn insert(&self, key: u32) {
        self.0.write().insert(key);
    }
    fn remove(&self, key: u32) {
        self.0.write().remove(key);
    }
}

fn sll_sample<L: ListMonitor>(mix: SllMix, threads: usize, ops: u64) -> impl FnMut() -> f64 {
    move || {
        let list = L::new(SortedList::prefilled(&mut Rng::new(7), PREFILL));
        let list = Arc::new(list);
        let elapsed = run_threads(&list, threads, move |l, i| {
            let mut rng = Rng::new(100 + i as u64);
            for _ in 0..ops {
                let key = rng.below(KEYS);
                let dice = rng.below(100);
                if dice < mix.read {
                    black_box(l.contains(key));
                } else if dice < mix.read + mix.insert {
                    l.insert(key);
                } else {
                    l.remove(key);
                }
            }
            l.flush();
        });
        mops_per_sec(elapsed, ops * threads as u64)
    }
}

pub(super) fn sll(mode: Mode, mix: SllMix, threads: usize) -> Workload {
    // Quick: 10 000 operations a thread, so that the threads overlap. With
    // 3 000 (a few ms a thread) each of 8 threads on 2 CPUs ran most of
    // its operations within one scheduler time slice, alone on the list:
    // a lock then met almost no contention, unlike the full run.
    let ops = mode.pick(10_000, 30_000);
    let remove = 100 - mix.read - mix.insert;
    Workload::new(format!("am/sll/{}/{threads}", mix.name), Unit::MopsPerSec)
        .title(format!(
            "Sorted linked list, {PREFILL} entries prefilled, keys uniform in 0..{KEYS}: \
             {threads} threads do {ops} operations each, {}% reads, {}% inserts, {remove}% \
             deletes; inserts and deletes asynchronous.",
            mix.read, mix.insert
        ))
        .param("threads", threads)
        .param("ops", ops)
        .param("mix", format!("{}/{}/{remove}", mix.read, mix.insert))
        .baseline("lk")
        .paper(
            "figure 5 (SLL, 40-core Xeon, Java): AM clearly outperforms LK (a read-write \
             ReentrantLock monitor) and AMS in every mix: the critical section is heavy \
             (O(n)), so asynchronous inserts and deletes let workers go on.",
        )
        .implementation("am", sll_sample::<AmList<false>>(mix, threads, ops))
        .implementation("ams", sll_sample::<AmList<true>>(mix, threads, ops))
        .implementation("lk", sll_sample::<LkList>(mix, threads, ops))
        .implementation("am-server", sll_sample::<AmServerList>(mix, threads, ops))
}
