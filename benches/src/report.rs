//! `results.json`, `report.md` and the SVG charts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::harness::{Better, Meta, Mode, Origin, Record, Unit};

/// The results schema version (`results.json`'s `schema`).
pub const SCHEMA: u32 = 1;

/// The machine the results were measured on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// `/proc/cpuinfo`'s model name.
    pub cpu_model: String,
    /// The compiler that built the harness.
    pub rustc: String,
}

impl Machine {
    /// This machine.
    pub fn detect() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        Self {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            rustc: env!("SYNC_BENCH_RUSTC").to_owned(),
        }
    }
}

/// The contents of `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Always [`SCHEMA`].
    pub schema: u32,
    /// Quick or full.
    pub mode: Mode,
    /// Where it ran.
    pub machine: Machine,
    /// One row per workload and implementation.
    pub results: Vec<Record>,
}

/// Writes `results.json`, `report.md` and the charts into `out`; returns
/// the report's Markdown.
pub fn write(out: &Path, results: &Results, metas: &[Meta]) -> std::io::Result<String> {
    std::fs::create_dir_all(out)?;
    let json =
        serde_json::to_string_pretty(results).map_err(|e| std::io::Error::other(e.to_string()))?;
    std::fs::write(out.join("results.json"), json + "\n")?;
    let charts = charts(out, results, metas)?;
    let md = markdown(results, metas, &charts);
    std::fs::write(out.join("report.md"), &md)?;
    Ok(md)
}

fn fmt_value(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The rows of one workload, in the order they were measured.
fn rows<'a>(results: &'a Results, id: &str) -> Vec<&'a Record> {
    results
        .results
        .iter()
        .filter(|r| r.workload == id)
        .collect()
}

/// `report.md`: the summary table (ours against the best peer, a row per
/// workload), then one table per workload with each implementation's
/// median, min, max and its ratio to the named baselines.
pub fn markdown(results: &Results, metas: &[Meta], charts: &Charts) -> String {
    let mut md = String::new();
    let m = &results.machine;
    let _ = writeln!(md, "# Benchmark report\n");
    let _ = writeln!(
        md,
        "Mode `{:?}`; {} CPUs ({}); {}.\n",
        results.mode, m.cpus, m.cpu_model, m.rustc
    );
    let _ = writeln!(
        md,
        "A *workload* is one experiment (a paper's table or figure, or a limit of the \
         machine), run by several *implementations*: ours, the *peers* (std and the \
         crates users choose between, or a construct built from them such as \
         `condvar-std`), and references (a paper's *twin*, the lock-based or \
         user-level version its authors compared against, such as `spin-twin` or \
         `portable-ast`, and floors). A *sweep* is a family of workloads that differ \
         in one parameter, the last part of their id (`ast/waiters/100`); it is drawn \
         as one line chart.\n"
    );
    let _ = writeln!(
        md,
        "Every implementation of a workload ran in the same process, in alternation, \
         after a warm-up; the tables give the median, min and max of the samples. \
         A ratio `× peer` is our median over the peer's median: below 1 is faster \
         for a time (`ms`, `ns/op`), above 1 is faster for a throughput (`Mops/s`). \
         Numbers move from run to run; compare within one report.\n"
    );
    summary(&mut md, results, metas);
    let mut family = "";
    for meta in metas {
        let rows = rows(results, &meta.id);
        if rows.is_empty() {
            continue;
        }
        if meta.family() != family {
            family = meta.family();
            let _ = writeln!(md, "## `{family}/`\n");
            if let Some(chart) = charts.families.get(family) {
                let _ = writeln!(md, "![{family}]({})\n", file_name(chart));
            }
            for (prefix, chart) in &charts.sweeps {
                if prefix.split('/').next() == Some(family) {
                    let _ = writeln!(md, "![{prefix}]({})\n", file_name(chart));
                }
            }
        }
        let unit = meta.unit();
        let _ = writeln!(
            md,
            "### `{}` ({}, {})\n",
            meta.id,
            unit.as_str(),
            better_text(unit.better())
        );
        if !meta.title.is_empty() {
            let _ = writeln!(md, "{}\n", meta.title);
        }
        let regime = meta.regime(m.cpus);
        if !regime.is_empty() {
            let _ = writeln!(md, "Regime: {regime}.\n");
        }
        if !meta.params.is_empty() {
            let params: Vec<String> = meta
                .params
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            let _ = writeln!(md, "Parameters: {}.\n", params.join(", "));
        }
        let baselines: Vec<&Record> = meta
            .baselines
            .iter()
            .filter_map(|b| rows.iter().find(|r| &r.imp == b).copied())
            .collect();
        let _ = write!(md, "| impl | median | min | max | samples |");
        for b in &baselines {
            let _ = write!(md, " × {} |", b.imp);
        }
        let _ = write!(md, "\n|---|--:|--:|--:|--:|");
        for _ in &baselines {
            let _ = write!(md, "--:|");
        }
        md.push('\n');
        for r in &rows {
            let _ = write!(
                md,
                "| `{}` | {} | {} | {} | {} |",
                r.imp,
                fmt_value(r.median),
                fmt_value(r.min),
                fmt_value(r.max),
                r.samples
            );
            for b in &baselines {
                let _ = write!(md, " {:.2} |", r.median / b.median);
            }
            md.push('\n');
        }
        md.push('\n');
        if let Some(paper) = &meta.paper {
            let _ = writeln!(md, "The paper: {paper}\n");
        }
    }
    // Issue 11: the paper's CM/CP and PCM/CP ratios beside ours.
    md.push_str(&crate::workloads::classic::ratio_table(results));
    md
}

fn better_text(better: Better) -> &'static str {
    match better {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
    }
}

/// The best record of `origin` among `rows` (the smallest median for a
/// time, the largest for a throughput).
fn best<'a>(meta: &Meta, rows: &[&'a Record], origin: Origin) -> Option<&'a Record> {
    let mut it = rows
        .iter()
        .copied()
        .filter(|r| meta.origin(&r.imp) == origin);
    let first = it.next()?;
    Some(it.fold(first, |b, r| {
        let better = match r.better {
            Better::Lower => r.median < b.median,
            Better::Higher => r.median > b.median,
        };
        if better { r } else { b }
    }))
}

/// One row of the summary table.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// The workload id.
    pub workload: String,
    /// Our best implementation and its median.
    pub ours: Option<(String, f64)>,
    /// The best peer and its median.
    pub peer: Option<(String, f64)>,
    /// Our median over the peer's.
    pub ratio: Option<f64>,
    /// Whether ours is better than the best peer (by the unit's direction).
    pub better: Option<bool>,
}

/// The summary rows: for each workload measured, our best implementation
/// against the best peer.
pub fn summary_rows(results: &Results, metas: &[Meta]) -> Vec<SummaryRow> {
    metas
        .iter()
        .filter_map(|meta| {
            let rows = rows(results, &meta.id);
            if rows.is_empty() {
                return None;
            }
            let ours = best(meta, &rows, Origin::Ours);
            let peer = best(meta, &rows, Origin::Peer);
            let (ratio, better) = match (ours, peer) {
                (Some(o), Some(p)) => {
                    let ratio = o.median / p.median;
                    let better = match o.better {
                        Better::Lower => ratio < 1.0,
                        Better::Higher => ratio > 1.0,
                    };
                    (Some(ratio), Some(better))
                }
                _ => (None, None),
            };
            Some(SummaryRow {
                workload: meta.id.clone(),
                ours: ours.map(|r| (r.imp.clone(), r.median)),
                peer: peer.map(|r| (r.imp.clone(), r.median)),
                ratio,
                better,
            })
        })
        .collect()
}

/// Within this fraction of the peer's median, ours is even with it.
const EVEN: f64 = 0.05;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Better,
    Even,
    Worse,
}

fn verdict(row: &SummaryRow) -> Verdict {
    match (row.ratio, row.better) {
        (Some(r), _) if (r - 1.0).abs() < EVEN => Verdict::Even,
        (_, Some(true)) => Verdict::Better,
        _ => Verdict::Worse,
    }
}

fn summary(md: &mut String, results: &Results, metas: &[Meta]) {
    let rows = summary_rows(results, metas);
    if rows.is_empty() {
        return;
    }
    let compared: Vec<&SummaryRow> = rows.iter().filter(|r| r.better.is_some()).collect();
    let count = |v: Verdict| compared.iter().filter(|r| verdict(r) == v).count();
    let _ = writeln!(md, "## Summary\n");
    let _ = writeln!(
        md,
        "Our best implementation against the best peer in each workload that has \
         both: better in {}, worse in {}, even (within {:.0}%) in {}, of {}. `ratio` \
         is ours over the peer's median (below 1 is better for a time, above 1 for a \
         throughput). Whose an implementation is follows its name \
         (`sync_bench::harness::Origin`); references (twins, floors) are not counted.\n",
        count(Verdict::Better),
        count(Verdict::Worse),
        EVEN * 100.0,
        count(Verdict::Even),
        compared.len()
    );
    let _ = writeln!(
        md,
        "| workload | regime | unit | ours (best) | best peer | ratio | |\n|---|---|---|--:|--:|--:|---|"
    );
    let cpus = results.machine.cpus;
    for (row, meta) in rows
        .iter()
        .filter_map(|r| Some((r, metas.iter().find(|m| m.id == r.workload)?)))
    {
        let cell = |v: &Option<(String, f64)>| match v {
            Some((name, median)) => format!("`{name}` {}", fmt_value(*median)),
            None => "—".to_owned(),
        };
        let verdict = match (row.better, verdict(row)) {
            (None, _) => "",
            (_, Verdict::Even) => "even",
            (_, Verdict::Better) => "better",
            (_, Verdict::Worse) => "**worse**",
        };
        let _ = writeln!(
            md,
            "| [`{}`](#{}) | {} | {} | {} | {} | {} | {verdict} |",
            row.workload,
            anchor(&meta.id, meta.unit()),
            meta.regime(cpus),
            meta.unit().as_str(),
            cell(&row.ours),
            cell(&row.peer),
            row.ratio.map_or("—".to_owned(), |r| format!("{r:.2}")),
        );
    }
    md.push('\n');
}

/// The GitHub anchor of a workload's heading (`### `id` (unit, ...)`).
fn anchor(id: &str, unit: Unit) -> String {
    let heading = format!("{id} ({}, {})", unit.as_str(), better_text(unit.better()));
    heading
        .chars()
        .filter_map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => Some(c),
            'A'..='Z' => Some(c.to_ascii_lowercase()),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The charts written, by family and by sweep prefix.
#[derive(Default, Debug)]
pub struct Charts {
    /// `family-<family>.svg`: one bar panel per workload that is not a
    /// sweep member.
    pub families: BTreeMap<String, PathBuf>,
    /// `sweep-<prefix>.svg`: median against the swept parameter.
    pub sweeps: BTreeMap<String, PathBuf>,
}

/// 24 colours that stay apart (Tableau 20 and four more).
const PALETTE: [RGBColor; 24] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(255, 152, 150),
    RGBColor(197, 176, 213),
    RGBColor(196, 156, 148),
    RGBColor(247, 182, 210),
    RGBColor(60, 60, 60),
    RGBColor(219, 219, 141),
    RGBColor(158, 218, 229),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
    RGBColor(0, 100, 0),
    RGBColor(255, 215, 0),
];

/// The implementations whose colour never changes, by palette index: std
/// is always grey, parking_lot orange, ours blue, green, red and purple.
const FIXED_COLOURS: [(&str, usize); 12] = [
    ("std", 7),
    ("parking_lot", 1),
    ("tokio", 5),
    ("crossbeam", 8),
    ("flume", 9),
    ("async-lock", 6),
    ("kanal", 16),
    ("crossfire", 18),
    ("ast-mutex", 0),
    ("lockfree-sync", 0),
    ("adaptive", 2),
    ("am", 3),
];

/// One colour per implementation name across every chart of a report:
/// the fixed ones first, then each other name (in name order) takes the
/// first colour that no implementation sharing a workload with it has.
pub fn colours(results: &Results) -> BTreeMap<String, usize> {
    let mut names: Vec<&str> = results.results.iter().map(|r| r.imp.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut map: BTreeMap<String, usize> = BTreeMap::new();
    for (name, c) in FIXED_COLOURS {
        if names.contains(&name) {
            map.insert(name.to_owned(), c);
        }
    }
    for name in names {
        if map.contains_key(name) {
            continue;
        }
        let workloads: Vec<&str> = results
            .results
            .iter()
            .filter(|r| r.imp == name)
            .map(|r| r.workload.as_str())
            .collect();
        let taken: Vec<usize> = results
            .results
            .iter()
            .filter(|r| workloads.contains(&r.workload.as_str()))
            .filter_map(|r| map.get(&r.imp).copied())
            .collect();
        // Keep clear of the fixed colours (orange means parking_lot) while
        // there are others left.
        let fixed = |c: &usize| FIXED_COLOURS.iter().any(|(_, f)| f == c);
        let c = (0..PALETTE.len())
            .find(|c| !taken.contains(c) && !fixed(c))
            .or_else(|| (0..PALETTE.len()).find(|c| !taken.contains(c)))
            .unwrap_or(map.len() % PALETTE.len());
        map.insert(name.to_owned(), c);
    }
    map
}

fn charts(out: &Path, results: &Results, metas: &[Meta]) -> std::io::Result<Charts> {
    let mut charts = Charts::default();
    let colours = colours(results);
    let colour = |name: &str| PALETTE[colours.get(name).copied().unwrap_or(7)];
    let measured: Vec<&Meta> = metas
        .iter()
        .filter(|m| !rows(results, &m.id).is_empty())
        .collect();
    let mut sweeps: BTreeMap<&str, Vec<(f64, &Meta)>> = BTreeMap::new();
    for meta in &measured {
        if let Some((prefix, x)) = meta.sweep() {
            sweeps.entry(prefix).or_default().push((x, meta));
        }
    }
    sweeps.retain(|_, points| points.len() > 1);
    // A sweep's members are drawn in its chart only.
    let in_sweep = |m: &Meta| m.sweep().is_some_and(|(p, _)| sweeps.contains_key(p));
    let mut families: BTreeMap<&str, Vec<&Meta>> = BTreeMap::new();
    for meta in measured.iter().copied().filter(|m| !in_sweep(m)) {
        families.entry(meta.family()).or_default().push(meta);
    }
    for (family, metas) in families {
        let path = out.join(format!("family-{family}.svg"));
        family_chart(&path, results, &metas, &colour)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        charts.families.insert(family.to_owned(), path);
    }
    for (prefix, points) in sweeps {
        let path = out.join(format!("sweep-{}.svg", prefix.replace('/', "-")));
        sweep_chart(&path, prefix, results, &points, &colour)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        charts.sweeps.insert(prefix.to_owned(), path);
    }
    Ok(charts)
}

type ChartResult = Result<(), Box<dyn std::error::Error>>;

/// A value of `unit` with its unit, for a tick label: times in ns, µs, ms
/// or s, rates in M…/s, with at most three significant digits.
pub fn fmt_tick(v: f64, unit: Unit) -> String {
    fn short(v: f64) -> String {
        let s = if v == 0.0 || v.abs() >= 100.0 {
            format!("{v:.0}")
        } else if v.abs() >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        };
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    }
    let ns = match unit {
        Unit::Ms => v * 1e6,
        Unit::NsPerOp => v,
        Unit::MopsPerSec | Unit::MedgesPerSec => return format!("{} {}", short(v), unit.as_str()),
    };
    let (scaled, name) = match ns.abs() {
        0.0 => (0.0, if unit == Unit::Ms { "ms" } else { "ns" }),
        a if a < 1e3 => (ns, "ns"),
        a if a < 1e6 => (ns / 1e3, "µs"),
        a if a < 1e9 => (ns / 1e6, "ms"),
        _ => (ns / 1e9, "s"),
    };
    format!("{} {name}", short(scaled))
}

/// The value axis's title: what the unit measures, and which way is better.
fn axis_title(unit: Unit) -> String {
    let what = match unit {
        Unit::Ms => "time for the whole run",
        Unit::NsPerOp => "time per operation",
        Unit::MopsPerSec => "million operations per second",
        Unit::MedgesPerSec => "million edges per second",
    };
    format!(
        "{what} ({}) — {}",
        unit.as_str(),
        better_text(unit.better())
    )
}

/// One horizontal bar panel per workload: the median of each
/// implementation, with a whisker from min to max; the first
/// implementation measured is at the top.
fn family_chart(
    path: &Path,
    results: &Results,
    metas: &[&Meta],
    colour: &dyn Fn(&str) -> RGBColor,
) -> ChartResult {
    const ROW: u32 = 26;
    const FRAME: u32 = 90;
    let heights: Vec<u32> = metas
        .iter()
        .map(|m| FRAME + ROW * rows(results, &m.id).len() as u32)
        .collect();
    let root = SVGBackend::new(path, (900, heights.iter().sum())).into_drawing_area();
    root.fill(&WHITE)?;
    let mut rest = root.clone();
    for (meta, h) in metas.iter().zip(&heights) {
        let (area, below) = rest.split_vertically(*h);
        rest = below;
        let rows = rows(results, &meta.id);
        let n = rows.len();
        let names: Vec<&str> = rows.iter().map(|r| r.imp.as_str()).collect();
        let unit = meta.unit();
        let top = rows.iter().map(|r| r.max).fold(0.0, f64::max) * 1.1;
        // Row i (from the top) spans [n - 1 - i, n - i) on the y axis.
        let mut chart = ChartBuilder::on(&area)
            .caption(meta.id.as_str(), ("sans-serif", 16))
            .margin(8)
            .margin_right(36)
            .x_label_area_size(40)
            .y_label_area_size(170)
            .build_cartesian_2d(0.0..top.max(f64::MIN_POSITIVE), 0.0..n as f64)?;
        let label = |y: &f64| {
            let i = n as f64 - 0.5 - *y;
            if (i - i.round()).abs() < 0.01 && i >= -0.01 {
                names
                    .get(i.round() as usize)
                    .map_or(String::new(), |s| s.to_string())
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(WHITE)
            .y_labels(2 * n + 1)
            .y_label_formatter(&label)
            .x_labels(6)
            .x_label_formatter(&|v| fmt_tick(*v, unit))
            .x_desc(axis_title(unit))
            .label_style(("sans-serif", 13))
            .draw()?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let y = (n - 1 - i) as f64;
            Rectangle::new(
                [(0.0, y + 0.15), (r.median, y + 0.85)],
                colour(&r.imp).mix(0.85).filled(),
            )
        }))?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let y = (n - 1 - i) as f64 + 0.5;
            PathElement::new(vec![(r.min, y), (r.max, y)], BLACK.stroke_width(2))
        }))?;
    }
    root.present()?;
    Ok(())
}

/// The median of each implementation against the swept parameter. The
/// swept values are evenly spaced (they are usually geometric: 0, 10, 100,
/// 1000), and the value axis is logarithmic when the medians span more than
/// 50x, so that a flat line is not crushed against zero by a steep one.
fn sweep_chart(
    path: &Path,
    prefix: &str,
    results: &Results,
    points: &[(f64, &Meta)],
    colour: &dyn Fn(&str) -> RGBColor,
) -> ChartResult {
    let mut xs: Vec<f64> = points.iter().map(|(x, _)| *x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut series: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
    for (x, meta) in points {
        let i = xs.iter().position(|v| v == x).expect("x was collected");
        for r in rows(results, &meta.id) {
            series.entry(r.imp.clone()).or_default().push((i, r.median));
        }
    }
    let values = || series.values().flatten().map(|(_, y)| *y);
    // The smallest positive median: a log axis cannot show 0 (a timed wait
    // that never overshot), and starting one at the smallest float made
    // plotters walk some 600 decades of ticks, for many minutes.
    let lo = values()
        .filter(|&y| y > 0.0)
        .fold(f64::MAX, f64::min)
        .min(values().fold(0.0, f64::max))
        .max(f64::MIN_POSITIVE);
    let hi = values().fold(0.0, f64::max).max(lo);
    let unit = points[0].1.unit();
    let root = SVGBackend::new(path, (900, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_desc = swept_parameter(prefix, points);
    let x_label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => xs.get(*i).map_or(String::new(), |x| format!("{x}")),
        _ => String::new(),
    };
    let y_label = |v: &f64| fmt_tick(*v, unit);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(prefix, ("sans-serif", 18))
        .margin(12)
        .margin_right(36)
        .x_label_area_size(44)
        .y_label_area_size(90);
    let x_range = (0..xs.len() - 1).into_segmented();
    if hi / lo > 50.0 {
        // Zeros are drawn at the bottom of the axis.
        for points in series.values_mut() {
            for (_, y) in points.iter_mut() {
                *y = y.max(lo / 1.5);
            }
        }
        let mut chart = builder.build_cartesian_2d(x_range, (lo / 1.5..hi * 1.5).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(format!("{}, log scale", axis_title(unit)))
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style(("sans-serif", 13))
            .draw()?;
        draw_series(&mut chart, series, colour)?;
    } else {
        let mut chart = builder.build_cartesian_2d(x_range, 0.0..(hi * 1.15))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(axis_title(unit))
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style(("sans-serif", 13))
            .draw()?;
        draw_series(&mut chart, series, colour)?;
    }
    root.present()?;
    Ok(())
}

/// The name of the swept parameter: the parameter whose value is the swept
/// value in every member, else the prefix's last part.
fn swept_parameter(prefix: &str, points: &[(f64, &Meta)]) -> String {
    let (_, first) = points[0];
    first
        .params
        .keys()
        .find(|k| {
            points
                .iter()
                .all(|(x, m)| m.params.get(*k).and_then(|v| v.as_f64()) == Some(*x))
        })
        .cloned()
        .unwrap_or_else(|| prefix.rsplit('/').next().unwrap_or(prefix).to_owned())
}

fn draw_series<'a, Y>(
    chart: &mut ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<
            plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize>,
            Y,
        >,
    >,
    series: BTreeMap<String, Vec<(usize, f64)>>,
    colour: &dyn Fn(&str) -> RGBColor,
) -> ChartResult
where
    Y: Ranged<ValueType = f64>,
{
    for (name, mut pts) in series {
        pts.sort_by_key(|p| p.0);
        let color = colour(&name);
        let pts: Vec<_> = pts
            .into_iter()
            .map(|(x, y)| (SegmentValue::CenterOf(x), y))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{Workload, measure};

    fn fake_results() -> (Results, Vec<Meta>) {
        let mut workloads = vec![
            Workload::new("fam/a", Unit::NsPerOp)
                .baseline("std")
                .origin("ours", Origin::Ours)
                .implementation("ours", || 5.0)
                .implementation("std", || 10.0)
                .implementation("spin-twin", || 1.0),
            Workload::new("fam/sweep/1", Unit::MopsPerSec)
                .origin("ours", Origin::Ours)
                .implementation("ours", || 1.0)
                .implementation("std", || 2.0),
            Workload::new("fam/sweep/4", Unit::MopsPerSec)
                .origin("ours", Origin::Ours)
                .implementation("ours", || 3.0)
                .implementation("std", || 2.5),
        ];
        let results = workloads
            .iter_mut()
            .flat_map(|w| measure(w, 1, 5, |_| {}))
            .collect();
        let results = Results {
            schema: SCHEMA,
            mode: Mode::Quick,
            machine: Machine::detect(),
            results,
        };
        (results, workloads.into_iter().map(|w| w.meta).collect())
    }

    #[test]
    fn writes_the_schema_the_design_fixes() {
        let (results, metas) = fake_results();
        let dir = std::env::temp_dir().join(format!("sync-bench-report-{}", std::process::id()));
        let md = write(&dir, &results, &metas).unwrap();

        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                .unwrap();
        assert_eq!(json["schema"], 1);
        assert_eq!(json["mode"], "quick");
        assert!(json["machine"]["cpus"].as_u64().unwrap() >= 1);
        let row = &json["results"][0];
        let mut keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "better", "impl", "max", "median", "min", "params", "samples", "unit", "workload"
            ]
        );
        assert_eq!(row["unit"], "ns/op");
        assert_eq!(row["better"], "lower");
        assert_eq!(json["results"][3]["unit"], "Mops/s");
        assert_eq!(json["results"][3]["better"], "higher");

        // The ratio column against the named baseline: 5 / 10.
        assert!(
            md.contains("| `ours` | 5.000 | 5.000 | 5.000 | 5 | 0.50 |"),
            "{md}"
        );
        assert!(dir.join("family-fam.svg").exists());
        assert!(dir.join("sweep-fam-sweep.svg").exists());
        let svg = std::fs::read_to_string(dir.join("sweep-fam-sweep.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("ours"));
        // A sweep's members are drawn in the sweep's chart only.
        let family = std::fs::read_to_string(dir.join("family-fam.svg")).unwrap();
        assert!(family.contains("fam/a"), "{family}");
        assert!(!family.contains("fam/sweep"), "{family}");
        // Axis titles with the unit and the direction; ticks with units.
        assert!(family.contains("time per operation (ns/op) — lower is better"));
        assert!(svg.contains("higher is better"));
        assert!(family.contains("\n10 ns\n"), "{family}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A sweep with a zero median (a timed wait that never overshot) and
    /// others 10^4 times larger gets a log axis that starts at the smallest
    /// positive median: from the smallest float, drawing it took minutes.
    #[test]
    fn a_log_sweep_with_a_zero_median_is_drawn() {
        let mut workloads = vec![
            Workload::new("z/sweep/1", Unit::Ms)
                .implementation("ours", || 0.0)
                .implementation("std", || 100.0),
            Workload::new("z/sweep/2", Unit::Ms)
                .implementation("ours", || 0.01)
                .implementation("std", || 200.0),
        ];
        let results = Results {
            schema: SCHEMA,
            mode: Mode::Quick,
            machine: Machine::detect(),
            results: workloads
                .iter_mut()
                .flat_map(|w| measure(w, 1, 3, |_| {}))
                .collect(),
        };
        let metas: Vec<Meta> = workloads.into_iter().map(|w| w.meta).collect();
        let dir = std::env::temp_dir().join(format!("sync-bench-zero-{}", std::process::id()));
        let started = std::time::Instant::now();
        write(&dir, &results, &metas).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        let svg = std::fs::read_to_string(dir.join("sweep-z-sweep.svg")).unwrap();
        assert!(svg.contains("log scale"), "a log axis: {svg}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_summary_puts_our_best_against_the_best_peer() {
        let (results, metas) = fake_results();
        let rows = summary_rows(&results, &metas);
        assert_eq!(rows.len(), 3);
        // ns/op: ours 5 against the peer's 10, better.
        assert_eq!(rows[0].ours, Some(("ours".to_owned(), 5.0)));
        assert_eq!(rows[0].peer, Some(("std".to_owned(), 10.0)));
        assert_eq!((rows[0].ratio, rows[0].better), (Some(0.5), Some(true)));
        // Mops/s: ours 1 against 2, worse; then 3 against 2.5, better.
        assert_eq!(rows[1].better, Some(false));
        assert_eq!(rows[2].better, Some(true));
        let md = markdown(&results, &metas, &Charts::default());
        let summary = md.find("## Summary").expect("a summary");
        assert!(
            summary < md.find("### `fam/a`").unwrap(),
            "the summary comes first"
        );
        assert!(
            md.contains("better in 2, worse in 1, even (within 5%) in 0, of 3"),
            "{md}"
        );
        assert!(
            md.contains("| `ours` 5.000 | `std` 10.0 | 0.50 | better |"),
            "{md}"
        );
        assert!(
            md.contains("| `ours` 1.000 | `std` 2.000 | 0.50 | **worse** |"),
            "{md}"
        );
        // Within 5% is even, whichever way.
        let mut even = rows[0].clone();
        even.ratio = Some(1.03);
        even.better = Some(false);
        assert!(verdict(&even) == Verdict::Even);
        even.ratio = Some(1.08);
        assert!(verdict(&even) == Verdict::Worse);
        // The reference is not counted as a peer.
        assert!(!md.contains("`spin-twin` 1"), "{md}");
        assert!(md.contains("(#fama-nsop-lower-is-better)"), "{md}");
    }

    #[test]
    fn every_implementation_keeps_one_colour() {
        let (results, _) = fake_results();
        let colours = colours(&results);
        assert_eq!(colours["std"], 7, "std is always grey");
        assert_ne!(colours["ours"], colours["spin-twin"]);
        assert_ne!(colours["ours"], colours["std"]);
        assert_ne!(colours["spin-twin"], colours["std"]);
    }

    #[test]
    fn ticks_carry_their_unit() {
        assert_eq!(fmt_tick(0.06, Unit::Ms), "60 µs");
        assert_eq!(fmt_tick(60000.0, Unit::NsPerOp), "60 µs");
        assert_eq!(fmt_tick(12.5, Unit::NsPerOp), "12.5 ns");
        assert_eq!(fmt_tick(1500.0, Unit::Ms), "1.5 s");
        assert_eq!(fmt_tick(0.0, Unit::Ms), "0 ms");
        assert_eq!(fmt_tick(2.5, Unit::MopsPerSec), "2.5 Mops/s");
    }
}
