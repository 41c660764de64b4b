//! `results.json`, `report.md` and the SVG charts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::harness::{Better, Meta, Mode, Record};

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

/// `report.md`: one table per workload with each implementation's median,
/// min, max and its ratio to the named baselines.
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
        "Every implementation of a workload ran in the same process, in alternation, \
         after a warm-up; the table gives the median, min and max of the samples. \
         A ratio `× peer` is our median over the peer's median: below 1 is faster \
         for a time (`ms`, `ns/op`), above 1 is faster for a throughput (`Mops/s`). \
         Numbers move from run to run; compare within one report.\n"
    );
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
        let better = match unit.better() {
            Better::Lower => "lower is better",
            Better::Higher => "higher is better",
        };
        let _ = writeln!(md, "### `{}` ({}, {better})\n", meta.id, unit.as_str());
        if !meta.title.is_empty() {
            let _ = writeln!(md, "{}\n", meta.title);
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
    md
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The charts written, by family and by sweep prefix.
#[derive(Default, Debug)]
pub struct Charts {
    /// `family-<family>.svg`: one bar panel per workload.
    pub families: BTreeMap<String, PathBuf>,
    /// `sweep-<prefix>.svg`: median against the swept parameter.
    pub sweeps: BTreeMap<String, PathBuf>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn charts(out: &Path, results: &Results, metas: &[Meta]) -> std::io::Result<Charts> {
    let mut charts = Charts::default();
    let mut families: BTreeMap<&str, Vec<&Meta>> = BTreeMap::new();
    let mut sweeps: BTreeMap<&str, Vec<(f64, &Meta)>> = BTreeMap::new();
    for meta in metas.iter().filter(|m| !rows(results, &m.id).is_empty()) {
        families.entry(meta.family()).or_default().push(meta);
        if let Some((prefix, x)) = meta.sweep() {
            sweeps.entry(prefix).or_default().push((x, meta));
        }
    }
    for (family, metas) in families {
        let path = out.join(format!("family-{family}.svg"));
        family_chart(&path, results, &metas).map_err(|e| std::io::Error::other(e.to_string()))?;
        charts.families.insert(family.to_owned(), path);
    }
    for (prefix, points) in sweeps.into_iter().filter(|(_, p)| p.len() > 1) {
        let path = out.join(format!("sweep-{}.svg", prefix.replace('/', "-")));
        sweep_chart(&path, prefix, results, &points)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        charts.sweeps.insert(prefix.to_owned(), path);
    }
    Ok(charts)
}

type ChartResult = Result<(), Box<dyn std::error::Error>>;

/// One horizontal bar panel per workload: the median of each
/// implementation, with a whisker from min to max.
fn family_chart(path: &Path, results: &Results, metas: &[&Meta]) -> ChartResult {
    const PANEL: u32 = 190;
    let height = PANEL * metas.len() as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, meta) in root.split_evenly((metas.len(), 1)).iter().zip(metas) {
        let rows = rows(results, &meta.id);
        let names: Vec<&str> = rows.iter().map(|r| r.imp.as_str()).collect();
        let top = rows.iter().map(|r| r.max).fold(0.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} ({})", meta.id, meta.unit().as_str()),
                ("sans-serif", 16),
            )
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(150)
            .build_cartesian_2d(
                0.0..top.max(f64::MIN_POSITIVE),
                (0..names.len()).into_segmented(),
            )?;
        let label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) => names.get(*i).map_or(String::new(), |n| n.to_string()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(names.len())
            .y_label_formatter(&label)
            .draw()?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let color = PALETTE[i % PALETTE.len()];
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (r.median, SegmentValue::Exact(i + 1)),
                ],
                color.mix(0.8).filled(),
            );
            bar.set_margin(6, 6, 0, 0);
            bar
        }))?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            PathElement::new(
                vec![
                    (r.min, SegmentValue::CenterOf(i)),
                    (r.max, SegmentValue::CenterOf(i)),
                ],
                BLACK.stroke_width(2),
            )
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
    let lo = values().fold(f64::MAX, f64::min).max(f64::MIN_POSITIVE);
    let hi = values().fold(0.0, f64::max).max(lo);
    let unit = points[0].1.unit();
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let caption = format!("{prefix} ({})", unit.as_str());
    let x_desc = prefix.rsplit('/').next().unwrap_or(prefix).to_owned();
    let x_label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => xs.get(*i).map_or(String::new(), |x| format!("{x}")),
        _ => String::new(),
    };
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70);
    let x_range = (0..xs.len()).into_segmented();
    if hi / lo > 50.0 {
        let mut chart = builder.build_cartesian_2d(x_range, (lo / 1.5..hi * 1.5).log_scale())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(format!("{} (log)", unit.as_str()))
            .x_label_formatter(&x_label)
            .draw()?;
        draw_series(&mut chart, series)?;
    } else {
        let mut chart = builder.build_cartesian_2d(x_range, 0.0..(hi * 1.15))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(unit.as_str())
            .x_label_formatter(&x_label)
            .draw()?;
        draw_series(&mut chart, series)?;
    }
    root.present()?;
    Ok(())
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
) -> ChartResult
where
    Y: Ranged<ValueType = f64>,
{
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by_key(|p| p.0);
        let color = PALETTE[i % PALETTE.len()];
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
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{Unit, Workload, measure};

    fn fake_results() -> (Results, Vec<Meta>) {
        let mut workloads = vec![
            Workload::new("fam/a", Unit::NsPerOp)
                .baseline("peer")
                .implementation("ours", || 5.0)
                .implementation("peer", || 10.0),
            Workload::new("fam/sweep/1", Unit::MopsPerSec)
                .implementation("ours", || 1.0)
                .implementation("peer", || 2.0),
            Workload::new("fam/sweep/4", Unit::MopsPerSec)
                .implementation("ours", || 3.0)
                .implementation("peer", || 2.5),
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
        assert_eq!(json["results"][2]["unit"], "Mops/s");
        assert_eq!(json["results"][2]["better"], "higher");

        // The ratio column against the named baseline: 5 / 10.
        assert!(
            md.contains("| `ours` | 5.000 | 5.000 | 5.000 | 5 | 0.50 |"),
            "{md}"
        );
        assert!(dir.join("family-fam.svg").exists());
        assert!(dir.join("sweep-fam-sweep.svg").exists());
        let svg = std::fs::read_to_string(dir.join("sweep-fam-sweep.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("ours"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
