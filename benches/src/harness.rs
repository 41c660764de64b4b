//! Workloads, implementations and the measuring method.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How big the experiments are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Small sizes: the whole suite in a few minutes on 2 cores.
    Quick,
    /// The papers' sizes.
    Full,
}

impl Mode {
    /// Picks the quick or the full size.
    pub fn pick<T>(self, quick: T, full: T) -> T {
        match self {
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }

    /// Samples per implementation, after the warm-up: 5 in both modes.
    /// `--full` changes the sizes (the papers'), not the method, so that a
    /// family's `--full` run stays within about 10 minutes on 2 cores
    /// (`ast/` took 10 minutes with 10 samples and 2 warm-ups, `lf/` was
    /// estimated at 21).
    pub fn samples(self) -> usize {
        5
    }

    /// Warm-up runs per implementation, not recorded: 1 in both modes.
    pub fn warmup(self) -> usize {
        1
    }
}

/// The unit a workload reports in (the fixed set of the results schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// Milliseconds for the whole experiment.
    #[serde(rename = "ms")]
    Ms,
    /// Nanoseconds per operation.
    #[serde(rename = "ns/op")]
    NsPerOp,
    /// Millions of operations per second.
    #[serde(rename = "Mops/s")]
    MopsPerSec,
    /// Millions of graph edges per second.
    #[serde(rename = "Medges/s")]
    MedgesPerSec,
}

impl Unit {
    /// Whether a smaller or a larger value is better.
    pub fn better(self) -> Better {
        match self {
            Unit::Ms | Unit::NsPerOp => Better::Lower,
            Unit::MopsPerSec | Unit::MedgesPerSec => Better::Higher,
        }
    }

    /// The unit as written in `results.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::NsPerOp => "ns/op",
            Unit::MopsPerSec => "Mops/s",
            Unit::MedgesPerSec => "Medges/s",
        }
    }
}

/// Which direction of a unit is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Smaller values are better (times).
    Lower,
    /// Larger values are better (throughputs).
    Higher,
}

/// One implementation of a workload: a closure that runs the experiment
/// once and returns the measurement in the workload's unit.
pub struct Impl {
    /// The fixed implementation id (`std`, `parking_lot`, `ast-mutex`, …).
    pub name: String,
    /// One run: the workload's value, and its companion's if it has one.
    sample: Box<dyn FnMut() -> (f64, Option<f64>)>,
}

/// What a workload is, apart from how to run it: what the report needs.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    /// The fixed workload id, `family/name[/param]`.
    pub id: String,
    /// One sentence on what is measured, for the report.
    pub title: String,
    /// The unit of every sample.
    pub unit: Option<Unit>,
    /// The parameters, recorded in `results.json`.
    pub params: Map<String, Value>,
    /// The peers every implementation's ratio is computed against.
    pub baselines: Vec<String>,
    /// The paper's own figures for this experiment, shown beside ours.
    pub paper: Option<String>,
    /// A one-line description for `--list` (the title's first sentence if
    /// empty).
    pub description: String,
    /// The regime the workload shows (uncontended, threads within the
    /// cores, oversubscribed...), if the default from its thread count
    /// ([`Meta::threads`]) does not say it.
    pub regime: Option<String>,
    /// Implementations whose [`Origin`] is not the one [`Origin::of`] gives
    /// their name.
    pub origins: Vec<(String, Origin)>,
    /// A second workload measured by the same runs (id, title): a p99 beside
    /// a p50, so that one run of the experiment gives both rows.
    pub companion: Option<(String, String)>,
    /// The companion's unit, where it is not this workload's (the CPU time
    /// beside a throughput, see [`Workload::in_background`]).
    pub companion_unit: Option<Unit>,
}

impl Meta {
    /// The companion workload's description: this one's, with the
    /// companion's id and title.
    pub fn companion(&self) -> Option<Meta> {
        let (id, title) = self.companion.as_ref()?;
        Some(Meta {
            id: id.clone(),
            title: title.clone(),
            description: String::new(),
            unit: self.companion_unit.or(self.unit),
            companion: None,
            companion_unit: None,
            ..self.clone()
        })
    }

    /// The workload's unit.
    pub fn unit(&self) -> Unit {
        self.unit.expect("every workload has a unit")
    }

    /// The family: the id's first segment (`base`, `ast`, `lf`, …).
    pub fn family(&self) -> &str {
        self.id.split('/').next().unwrap_or(&self.id)
    }

    /// For a sweep member such as `ast/waiters/100`: (`ast/waiters`, 100).
    pub fn sweep(&self) -> Option<(&str, f64)> {
        let (prefix, last) = self.id.rsplit_once('/')?;
        let x = last.parse().ok()?;
        Some((prefix, x))
    }

    /// The one-line description `--list` prints: [`Workload::description`],
    /// or else the title's first sentence.
    pub fn summary(&self) -> String {
        let text = if self.description.is_empty() {
            &self.title
        } else {
            &self.description
        };
        let first = match text.find(". ") {
            Some(end) => &text[..=end],
            None => text.as_str(),
        };
        first.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// How many threads run at once, read from the parameters: `threads`
    /// (or `searchers`, `processes`), the paper notation `mix`
    /// (`500x100:1x50000` is 501 threads), `producers` (plus the receiver),
    /// `stages` (plus a feeder and a collector) or `bystanders` (plus a
    /// putter and a getter); 1 for an `uncontended` workload. `None` if
    /// none is given.
    pub fn threads(&self) -> Option<usize> {
        let p = &self.params;
        let get = |k: &str| p.get(k).and_then(Value::as_u64).map(|n| n as usize);
        if let Some(n) = get("threads")
            .or_else(|| get("searchers"))
            .or_else(|| get("processes"))
        {
            return Some(n);
        }
        if let Some(n) = get("producers") {
            return Some(n + 1);
        }
        if let Some(n) = get("stages") {
            return Some(n + 2);
        }
        if self.id.ends_with("uncontended") {
            return Some(1);
        }
        if let Some(mix) = p.get("mix").and_then(Value::as_str) {
            let counts: Option<Vec<usize>> = mix
                .split(':')
                .map(|part| part.split_once('x')?.0.trim().parse().ok())
                .collect();
            return counts.map(|c| c.iter().sum());
        }
        let bystanders = p.get("bystanders").and_then(Value::as_u64)?;
        Some(bystanders as usize + 2)
    }

    /// The regime the workload shows on a machine with `cpus` CPUs: its
    /// [`Workload::regime`], or one derived from [`Meta::threads`].
    pub fn regime(&self, cpus: usize) -> String {
        if let Some(r) = &self.regime {
            return r.clone();
        }
        let p = &self.params;
        let tasks = p.get("tasks").and_then(Value::as_u64);
        let workers = p.get("workers").and_then(Value::as_u64);
        match (self.threads(), tasks, workers) {
            (None, Some(t), Some(w)) => return format!("{t} tasks on {w} worker threads"),
            (None, Some(t), None) => return format!("{t} tasks"),
            _ => {}
        }
        match self.threads() {
            None => String::new(),
            Some(1) => "1 thread: uncontended".to_owned(),
            Some(n) if n <= cpus => format!("{n} threads on {cpus} CPUs"),
            Some(n) => format!("{n} threads on {cpus} CPUs: oversubscribed"),
        }
    }

    /// Who wrote the implementation `name`: an override given with
    /// [`Workload::origin`], or else [`Origin::of`] its name.
    pub fn origin(&self, name: &str) -> Origin {
        self.origins
            .iter()
            .find(|(n, _)| n == name)
            .map_or_else(|| Origin::of(name), |(_, o)| *o)
    }
}

/// Whose an implementation is, for the report's summary table (ours against
/// the best peer; references are shown but not counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// One of the family's crates (its name starts with one in [`OURS`]).
    Ours,
    /// What people use today: a peer crate or std, or a construct built
    /// from one (a name with a [`PEERS`] entry as a `-`-separated part, such
    /// as `condvar-std` or `tokio-notify`).
    Peer,
    /// Everything else: a paper's twin (`spin-twin`, `portable-ast`), a
    /// floor (`rmw-floor`), a fixed policy, a sequential run, or a model
    /// written in the benchmark alone (`cm`).
    Reference,
}

/// The implementation names of the family's crates: `ast-mutex`,
/// `lockfree-sync`, `adaptive` (adaptive-lock), `am` (active-monitor),
/// `cp-lockfree` and `pcm` (the classic problems on our crates). A name is
/// ours if it is one of these or starts with one and a `-`
/// (`ast-mutex-handoff`, `lockfree-sync-fifo`, `am-relaxed`). The classic
/// problems' `cm` model runs none of the family's code (tasks on one
/// thread, `Cell`s): it is a reference.
pub const OURS: &[&str] = &[
    "ast-mutex",
    "lockfree-sync",
    "adaptive",
    "simple-adapt",
    "am",
    "ams",
    "cp-lockfree",
    "pcm",
];

/// The peers: std, the crates users choose between, and the hand-made
/// peer constructs named in the issues (`lk`: a parking_lot monitor,
/// `actor`: a server thread fed by a channel).
pub const PEERS: &[&str] = &[
    "std",
    "parking_lot",
    "parking_lot_core",
    "crossbeam",
    "tokio",
    "flume",
    "async-lock",
    "kanal",
    "crossfire",
    "lk",
    "actor",
];

impl Origin {
    /// The origin of an implementation by its name (see [`OURS`] and
    /// [`PEERS`]).
    pub fn of(name: &str) -> Origin {
        let prefixed =
            |p: &str| name == p || name.strip_prefix(p).is_some_and(|r| r.starts_with('-'));
        if OURS.iter().any(|p| prefixed(p)) {
            return Origin::Ours;
        }
        let part = |p: &str| {
            prefixed(p)
                || name.strip_suffix(p).is_some_and(|r| r.ends_with('-'))
                || name.contains(&format!("-{p}-"))
        };
        if PEERS.iter().any(|p| part(p)) {
            Origin::Peer
        } else {
            Origin::Reference
        }
    }
}

/// An experiment with all its implementations.
pub struct Workload {
    /// What the report needs to know.
    pub meta: Meta,
    /// The implementations, measured in alternation.
    pub impls: Vec<Impl>,
}

impl Workload {
    /// A workload with the given fixed id and unit.
    pub fn new(id: impl Into<String>, unit: Unit) -> Self {
        Self {
            meta: Meta {
                id: id.into(),
                unit: Some(unit),
                ..Meta::default()
            },
            impls: Vec::new(),
        }
    }

    /// Says what is measured.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.meta.title = title.into();
        self
    }

    /// Records a parameter.
    pub fn param(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.meta.params.insert(key.to_owned(), value.into());
        self
    }

    /// Names an implementation whose median every ratio is taken against.
    pub fn baseline(mut self, name: &str) -> Self {
        self.meta.baselines.push(name.to_owned());
        self
    }

    /// The paper's own figures, shown beside ours in the report.
    pub fn paper(mut self, text: impl Into<String>) -> Self {
        self.meta.paper = Some(text.into());
        self
    }

    /// The one-line description `--list` prints (default: the title's
    /// first sentence).
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.meta.description = text.into();
        self
    }

    /// Names the regime the workload shows, when its thread count alone
    /// does not (default: from [`Meta::threads`]).
    pub fn regime(mut self, text: impl Into<String>) -> Self {
        self.meta.regime = Some(text.into());
        self
    }

    /// Says whose the implementation `name` is, when its name does not
    /// follow the rule of [`Origin::of`].
    pub fn origin(mut self, name: &str, origin: Origin) -> Self {
        self.meta.origins.push((name.to_owned(), origin));
        self
    }

    /// Adds an implementation; `sample` runs the experiment once.
    pub fn implementation(mut self, name: &str, mut sample: impl FnMut() -> f64 + 'static) -> Self {
        self.impls.push(Impl {
            name: name.to_owned(),
            sample: Box::new(move || (sample(), None)),
        });
        self
    }

    /// The same experiment with `busy` threads spinning on the CPUs during
    /// every run (started before the run, stopped after it, neither timed):
    /// the id becomes `busy/{busy}/{id}` and the parameter `busy` is set.
    ///
    /// A workload without a companion gets one, `busy/{busy}/cpu/{id}`: the
    /// CPU time the run's own threads used (the process's, less the
    /// spinning threads'), in ms. Beside spinning threads a primitive's
    /// throughput depends on how many of its threads it keeps running, since
    /// each runnable thread takes its share of the CPUs from the spinning
    /// ones; the companion shows that share, so that a primitive that
    /// passivates its surplus waiters (and leaves the CPUs to the other
    /// work) can be told from one that is slow.
    pub fn in_background(mut self, busy: usize) -> Self {
        let cpu = self.meta.companion.is_none();
        if cpu {
            self.meta.companion = Some((
                format!("busy/{busy}/cpu/{}", self.meta.id),
                format!(
                    "CPU time the run's own threads used (ms; the process's, less the \
                     spinning threads'), beside {busy} threads spinning on the CPUs: what {} \
                     took from them. Read it beside the throughput row.",
                    self.meta.id
                ),
            ));
            self.meta.companion_unit = Some(Unit::Ms);
        } else if let Some((id, _)) = &mut self.meta.companion {
            *id = format!("busy/{busy}/{id}");
        }
        self.meta.id = format!("busy/{busy}/{}", self.meta.id);
        self.meta.title = format!(
            "{} Run beside {busy} threads spinning on the CPUs.",
            self.meta.title
        );
        let regime = self.meta.regime(sync_core::load::cpus());
        self.meta.regime = Some(format!("{regime}, beside {busy} spinning threads"));
        self.meta.params.insert("busy".to_owned(), busy.into());
        for imp in &mut self.impls {
            let mut inner = std::mem::replace(&mut imp.sample, Box::new(|| (0.0, None)));
            imp.sample = Box::new(move || {
                let began = sync_core::testing::process_cpu_time();
                let spinning = sync_core::testing::BusyThreads::start(busy);
                let (value, companion) = inner();
                let theirs = spinning.stop();
                let ours = sync_core::testing::process_cpu_time()
                    .saturating_sub(began)
                    .saturating_sub(theirs);
                (value, if cpu { Some(ms(ours)) } else { companion })
            });
        }
        self
    }

    /// Declares a companion workload, `id` with `title`, whose values the
    /// same runs give (see [`Workload::implementation_pair`]).
    pub fn companion(mut self, id: impl Into<String>, title: impl Into<String>) -> Self {
        self.meta.companion = Some((id.into(), title.into()));
        self
    }

    /// Adds an implementation whose one run gives this workload's value and
    /// its companion's.
    ///
    /// # Panics
    ///
    /// If no [`companion`](Self::companion) was declared first.
    pub fn implementation_pair(
        mut self,
        name: &str,
        mut sample: impl FnMut() -> (f64, f64) + 'static,
    ) -> Self {
        assert!(
            self.meta.companion.is_some(),
            "implementation_pair needs a companion workload (Workload::companion)"
        );
        self.impls.push(Impl {
            name: name.to_owned(),
            sample: Box::new(move || {
                let (a, b) = sample();
                (a, Some(b))
            }),
        });
        self
    }
}

/// One implementation's measurements of one workload: a row of
/// `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The workload id.
    pub workload: String,
    /// The implementation id.
    #[serde(rename = "impl")]
    pub imp: String,
    /// The unit.
    pub unit: Unit,
    /// Whether lower or higher is better.
    pub better: Better,
    /// The median of the samples.
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// How many samples (after the warm-up).
    pub samples: usize,
    /// The workload's parameters.
    pub params: Map<String, Value>,
}

/// Median, min and max of `values`.
///
/// # Panics
///
/// If `values` is empty or holds a NaN.
pub fn summarize(values: &[f64]) -> (f64, f64, f64) {
    assert!(!values.is_empty(), "no samples to summarize");
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("a sample is NaN"));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

/// The order in which round `round` runs `n` implementations: rotated by one
/// each round, so that no implementation always runs first (cold) or right
/// after the same neighbour.
pub fn alternation(n: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |i| (i + round) % n.max(1))
}

/// Runs every implementation of `w`: `warmup` unrecorded runs each, then
/// `samples` rounds in alternation. `tick` is called after every run, with
/// the implementation's name.
pub fn measure(
    w: &mut Workload,
    warmup: usize,
    samples: usize,
    mut tick: impl FnMut(&str),
) -> Vec<Record> {
    let n = w.impls.len();
    for imp in &mut w.impls {
        for _ in 0..warmup {
            (imp.sample)();
            tick(&imp.name);
        }
    }
    let mut values = vec![Vec::with_capacity(samples); n];
    let mut companions = vec![Vec::with_capacity(samples); n];
    for round in 0..samples {
        for i in alternation(n, round) {
            let imp = &mut w.impls[i];
            let (value, companion) = (imp.sample)();
            values[i].push(value);
            companions[i].extend(companion);
            tick(&imp.name);
        }
    }
    let unit = w.meta.unit();
    let companion_unit = w.meta.companion_unit.unwrap_or(unit);
    let record = |id: &str, imp: &Impl, v: &[f64], unit: Unit| {
        let (median, min, max) = summarize(v);
        Record {
            workload: id.to_owned(),
            imp: imp.name.clone(),
            unit,
            better: unit.better(),
            median,
            min,
            max,
            samples: v.len(),
            params: w.meta.params.clone(),
        }
    };
    let mut records: Vec<Record> = w
        .impls
        .iter()
        .zip(&values)
        .map(|(imp, v)| record(&w.meta.id, imp, v, unit))
        .collect();
    if let Some((id, _)) = &w.meta.companion {
        records.extend(
            w.impls
                .iter()
                .zip(&companions)
                .filter(|(_, v)| !v.is_empty())
                .map(|(imp, v)| record(id, imp, v, companion_unit)),
        );
    }
    records
}

/// Runs `partner` on a new thread and `leader` on this one, starting both
/// together, and returns how long `leader` took. The spawn is not timed.
pub fn time_pair(partner: impl FnOnce() + Send + 'static, leader: impl FnOnce()) -> Duration {
    let barrier = Arc::new(Barrier::new(2));
    let b = Arc::clone(&barrier);
    let t = thread::spawn(move || {
        b.wait();
        partner();
    });
    barrier.wait();
    let start = Instant::now();
    leader();
    let elapsed = start.elapsed();
    t.join().expect("the partner thread panicked");
    elapsed
}

/// A thread's CPU affinity, to restore after pinning.
#[cfg(target_os = "linux")]
pub struct Affinity(libc::cpu_set_t);
/// A thread's CPU affinity, to restore after pinning.
#[cfg(not(target_os = "linux"))]
pub struct Affinity;

/// Pins the calling thread to `cpu`; returns its former affinity, or
/// `None` where pinning is not possible (not Linux, no such CPU).
pub fn pin_to_cpu(cpu: usize) -> Option<Affinity> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `cpu_set_t` is plain data, valid when zeroed; both calls
        // get a pointer to a live, correctly sized set for the calling
        // thread (pid 0).
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut old) != 0 {
                return None;
            }
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                return None;
            }
            Some(Affinity(old))
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        None
    }
}

/// Gives the calling thread back the affinity [`pin_to_cpu`] returned.
pub fn restore_affinity(affinity: &Affinity) {
    #[cfg(target_os = "linux")]
    // SAFETY: a pointer to a live, correctly sized set, for the calling
    // thread (pid 0).
    unsafe {
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &affinity.0);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = affinity;
}

/// Nanoseconds per operation.
pub fn ns_per_op(elapsed: Duration, ops: u64) -> f64 {
    elapsed.as_nanos() as f64 / ops as f64
}

/// Millions of operations per second.
pub fn mops_per_sec(elapsed: Duration, ops: u64) -> f64 {
    ops as f64 / elapsed.as_secs_f64() / 1e6
}

/// Milliseconds.
pub fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn summarize_takes_median_min_max() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert_eq!(summarize(&[7.0]), (7.0, 7.0, 7.0));
    }

    #[test]
    fn alternation_rotates_the_first_implementation() {
        let firsts: Vec<usize> = (0..3).map(|r| alternation(3, r).next().unwrap()).collect();
        assert_eq!(firsts, [0, 1, 2]);
        for r in 0..5 {
            let mut order: Vec<usize> = alternation(3, r).collect();
            order.sort();
            assert_eq!(order, [0, 1, 2], "every impl runs once per round");
        }
    }

    #[test]
    fn measure_warms_up_alternates_and_records() {
        let log = Rc::new(std::cell::RefCell::new(Vec::new()));
        let counter = Rc::new(Cell::new(0.0));
        let (la, lb, c) = (Rc::clone(&log), Rc::clone(&log), Rc::clone(&counter));
        let mut w = Workload::new("test/w", Unit::NsPerOp)
            .param("threads", 2)
            .implementation("a", move || {
                la.borrow_mut().push('a');
                c.set(c.get() + 1.0);
                c.get()
            })
            .implementation("b", move || {
                lb.borrow_mut().push('b');
                10.0
            });
        let mut ticks = 0;
        let records = measure(&mut w, 1, 4, |_| ticks += 1);
        assert_eq!(ticks, 2 * (1 + 4));
        let log: String = log.borrow().iter().collect();
        assert_eq!(
            log,
            "ab" /* warm-up */
                .to_owned()
                + "abbaabba"
        );
        // `a` returned 1 (warm-up, dropped), then 2, 3, 4, 5.
        let a = &records[0];
        assert_eq!(
            (a.imp.as_str(), a.median, a.min, a.max, a.samples),
            ("a", 3.5, 2.0, 5.0, 4)
        );
        assert_eq!(records[1].median, 10.0);
        assert_eq!(a.better, Better::Lower);
        assert_eq!(a.params["threads"], 2);
    }

    #[test]
    fn a_companion_gets_its_own_records_from_the_same_runs() {
        let runs = Rc::new(Cell::new(0));
        let r = Rc::clone(&runs);
        let mut w = Workload::new("test/p50", Unit::Ms)
            .companion("test/p99", "the tail")
            .implementation_pair("a", move || {
                r.set(r.get() + 1);
                (1.0, 9.0)
            })
            .in_background(0);
        assert_eq!(w.meta.id, "busy/0/test/p50");
        let records = measure(&mut w, 1, 3, |_| {});
        assert_eq!(runs.get(), 4, "one run gives both values");
        let ids: Vec<(&str, f64)> = records
            .iter()
            .map(|r| (r.workload.as_str(), r.median))
            .collect();
        assert_eq!(ids, [("busy/0/test/p50", 1.0), ("busy/0/test/p99", 9.0)]);
        let companion = w.meta.companion().expect("declared");
        assert_eq!(
            (companion.id.as_str(), companion.title.as_str()),
            ("busy/0/test/p99", "the tail")
        );
        assert_eq!(companion.params["busy"], 0);
    }

    #[test]
    fn a_run_beside_spinning_threads_reports_its_own_cpu_time() {
        // The run uses 20 ms of CPU on its own thread; the spinning thread
        // beside it uses its own, which the companion leaves out.
        const OWN: Duration = Duration::from_millis(20);
        let mut w = Workload::new("test/x", Unit::MopsPerSec)
            .implementation("a", || {
                let began = sync_core::testing::thread_cpu_time();
                while sync_core::testing::thread_cpu_time() - began < OWN {
                    std::hint::spin_loop();
                }
                1.0
            })
            .in_background(1);
        let cpu = w.meta.companion().expect("declared by in_background");
        assert_eq!(cpu.id, "busy/1/cpu/test/x");
        assert_eq!((cpu.unit(), w.meta.unit()), (Unit::Ms, Unit::MopsPerSec));
        let records = measure(&mut w, 0, 1, |_| {});
        let rows: Vec<(&str, Unit, Better)> = records
            .iter()
            .map(|r| (r.workload.as_str(), r.unit, r.better))
            .collect();
        assert_eq!(
            rows,
            [
                ("busy/1/test/x", Unit::MopsPerSec, Better::Higher),
                ("busy/1/cpu/test/x", Unit::Ms, Better::Lower)
            ]
        );
        assert_eq!(records[0].median, 1.0);
        // At least the run's own CPU (other tests of this process run
        // beside it, so no upper bound).
        assert!(records[1].median >= ms(OWN), "{}", records[1].median);
    }

    #[test]
    fn origins_follow_the_naming_rule() {
        for ours in [
            "ast-mutex",
            "ast-mutex-handoff",
            "lockfree-sync-fifo",
            "adaptive",
            "am",
            "am-relaxed",
            "pcm",
        ] {
            assert_eq!(Origin::of(ours), Origin::Ours, "{ours}");
        }
        for peer in [
            "std",
            "condvar-std",
            "repeated-tests-parking_lot",
            "tokio-notify",
            "std-park",
            "async-lock",
            "lk-std",
            "cp-std",
            "a-kanal-b",
        ] {
            assert_eq!(Origin::of(peer), Origin::Peer, "{peer}");
        }
        for reference in [
            "spin-twin",
            "portable-ast",
            "rmw-floor",
            "spin",
            "block",
            "sequential",
            "amsterdam",
            "stdx",
            "cm",
        ] {
            assert_eq!(Origin::of(reference), Origin::Reference, "{reference}");
        }
        let w = Workload::new("f/w", Unit::Ms).origin("block", Origin::Ours);
        assert_eq!(w.meta.origin("block"), Origin::Ours);
        assert_eq!(w.meta.origin("std"), Origin::Peer);
    }

    #[test]
    fn threads_and_regime_come_from_the_parameters() {
        let w = Workload::new("f/w", Unit::Ms).param("mix", "50x10:50x10");
        assert_eq!(w.meta.threads(), Some(100));
        assert_eq!(w.meta.regime(2), "100 threads on 2 CPUs: oversubscribed");
        let w = Workload::new("f/w", Unit::Ms).param("threads", 2);
        assert_eq!(w.meta.regime(2), "2 threads on 2 CPUs");
        let w = Workload::new("f/w", Unit::Ms).param("bystanders", 10);
        assert_eq!(w.meta.threads(), Some(12));
        let w = Workload::new("f/w", Unit::Ms).param("producers", 4);
        assert_eq!(w.meta.threads(), Some(5));
        let w = Workload::new("f/uncontended", Unit::Ms).param("ops", 4);
        assert_eq!(w.meta.regime(2), "1 thread: uncontended");
        let w = Workload::new("f/w", Unit::Ms)
            .param("tasks", 60)
            .param("workers", 2);
        assert_eq!(w.meta.regime(2), "60 tasks on 2 worker threads");
        let w = Workload::new("f/w", Unit::Ms)
            .param("ops", 10)
            .regime("1 task");
        assert_eq!(
            (w.meta.threads(), w.meta.regime(2).as_str()),
            (None, "1 task")
        );
    }

    #[test]
    fn the_summary_is_the_first_sentence() {
        let w = Workload::new("f/w", Unit::Ms).title("One thing, measured. More   detail\n here.");
        assert_eq!(w.meta.summary(), "One thing, measured.");
        let w = w.description("Short.");
        assert_eq!(w.meta.summary(), "Short.");
    }

    #[test]
    fn sweep_ids_split_into_prefix_and_value() {
        let w = Workload::new("ast/waiters/100", Unit::Ms);
        assert_eq!(w.meta.sweep(), Some(("ast/waiters", 100.0)));
        assert_eq!(w.meta.family(), "ast");
        assert_eq!(
            Workload::new("base/park-unpark", Unit::Ms).meta.sweep(),
            None
        );
    }
}
