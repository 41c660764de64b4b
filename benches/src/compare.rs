//! Two builds of the report compared row by row: `cargo xtask report
//! --compare REV` (or `sync-bench --ab OLD_BINARY`).
//!
//! One run of each build cannot tell a 5% change from this machine's noise:
//! a row's median moves by 10-50% between two runs of the same binary, and
//! by more when a neighbour takes a core. So the two builds run in
//! alternation, `rounds` times each (the first to go swaps every round), and
//! a row is compared by the median over the rounds of its medians. The
//! peers' rows run the same code in both builds, so how far they moved (the
//! workload's *drift*) says how much of a change the machine made on its
//! own. (References do not count: most are built from the family's code,
//! such as `spin-twin` on sync-core's spin lock and adaptive-lock's fixed
//! policies.) Each row also says in how many rounds it was
//! slower than the old build beyond that round's drift: a change that slows
//! a row does so in nearly every round, while a row that only switches
//! between modes (a convoy that forms or not) is slower in about half.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::harness::{Better, Origin, Record};
use crate::report::Results;

/// One row (workload × implementation) measured by both builds.
#[derive(Clone, Debug, PartialEq)]
pub struct Delta {
    /// The workload id.
    pub workload: String,
    /// The implementation id.
    pub imp: String,
    /// Whose implementation it is.
    pub origin: Origin,
    /// The median over the rounds of the new build's medians.
    pub new: f64,
    /// The same for the old build.
    pub old: f64,
    /// How much worse the new build is: `new / old` for a time, `old / new`
    /// for a throughput; above 1 is slower.
    pub slowdown: f64,
    /// The slowdown of each round, in order (the new build's median in
    /// round *i* against the old build's in round *i*).
    pub rounds: Vec<f64>,
}

impl Delta {
    /// The smallest and largest slowdown of a single round.
    pub fn spread(&self) -> (f64, f64) {
        let lo = self.rounds.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self
            .rounds
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }
}

/// The median of `v` (the mean of the middle two for an even count).
///
/// # Panics
///
/// If `v` is empty.
fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "the median of no values");
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn slowdown(better: Better, new: f64, old: f64) -> f64 {
    match better {
        Better::Lower => new / old,
        Better::Higher => old / new,
    }
}

/// Every row that both builds measured in every round with the same
/// parameters, by workload and implementation. A row that a build lacks (a
/// workload added or renamed between the two) is left out, and so is one
/// whose parameters changed (see [`changed`]).
pub fn deltas(new: &[Results], old: &[Results]) -> Vec<Delta> {
    type Key = (String, String);
    let collect = |runs: &[Results]| {
        let mut rows: BTreeMap<Key, Vec<Record>> = BTreeMap::new();
        for run in runs {
            for r in &run.results {
                rows.entry((r.workload.clone(), r.imp.clone()))
                    .or_default()
                    .push(r.clone());
            }
        }
        rows.retain(|_, v| v.len() == runs.len());
        rows
    };
    let (new_rows, old_rows) = (collect(new), collect(old));
    new_rows
        .into_iter()
        .filter_map(|(key, n)| {
            let o = old_rows.get(&key)?;
            if n[0].params != o[0].params {
                return None;
            }
            let better = n[0].better;
            let rounds: Vec<f64> = n
                .iter()
                .zip(o)
                .map(|(n, o)| slowdown(better, n.median, o.median))
                .collect();
            let new = median(n.iter().map(|r| r.median).collect());
            let old = median(o.iter().map(|r| r.median).collect());
            Some(Delta {
                origin: Origin::of(&key.1),
                workload: key.0,
                imp: key.1,
                new,
                old,
                slowdown: slowdown(better, new, old),
                rounds,
            })
        })
        .collect()
}

/// The workloads that both builds ran with different parameters (a size
/// changed between the two), which [`deltas`] does not compare.
pub fn changed(new: &[Results], old: &[Results]) -> Vec<String> {
    let (Some(new), Some(old)) = (new.first(), old.first()) else {
        return Vec::new();
    };
    let mut workloads: Vec<String> = new
        .results
        .iter()
        .filter(|n| {
            old.results
                .iter()
                .any(|o| o.workload == n.workload && o.imp == n.imp && o.params != n.params)
        })
        .map(|n| n.workload.clone())
        .collect();
    workloads.dedup();
    workloads
}

/// The peers' rows of each workload that has any: the rows whose code is
/// the same in both builds.
fn peer_rows(deltas: &[Delta]) -> BTreeMap<&str, Vec<&Delta>> {
    let mut peers: BTreeMap<&str, Vec<&Delta>> = BTreeMap::new();
    for d in deltas.iter().filter(|d| d.origin == Origin::Peer) {
        peers.entry(&d.workload).or_default().push(d);
    }
    peers
}

/// The median slowdown of the peers' rows of each workload that has any:
/// how far the machine moved the workload on its own.
pub fn drift(deltas: &[Delta]) -> BTreeMap<String, f64> {
    peer_rows(deltas)
        .into_iter()
        .map(|(w, rows)| {
            (
                w.to_owned(),
                median(rows.iter().map(|d| d.slowdown).collect()),
            )
        })
        .collect()
}

/// The same as [`drift`] for each round apart: the median slowdown of round
/// *i* over the workload's peer rows.
fn round_drift(deltas: &[Delta]) -> BTreeMap<String, Vec<f64>> {
    peer_rows(deltas)
        .into_iter()
        .map(|(w, rows)| {
            let per_round = (0..rows[0].rounds.len())
                .map(|i| median(rows.iter().map(|d| d.rounds[i]).collect()))
                .collect();
            (w.to_owned(), per_round)
        })
        .collect()
}

/// In how many rounds `d` was slower than the old build beyond that
/// round's drift (or, without a drift, slower at all).
fn rounds_slower(d: &Delta, drift: Option<&[f64]>) -> usize {
    d.rounds
        .iter()
        .enumerate()
        .filter(|&(i, s)| *s > drift.map_or(1.0, |r| r[i]))
        .count()
}

/// Whether `d` is more than `threshold` (0.05 for 5%) slower, both as
/// measured and after dividing by its workload's drift.
fn is_flagged(d: &Delta, drift: &BTreeMap<String, f64>, threshold: f64) -> bool {
    let adjusted = d.slowdown / drift.get(&d.workload).copied().unwrap_or(1.0);
    d.slowdown > 1.0 + threshold && adjusted > 1.0 + threshold
}

/// Our rows that [`markdown`] flags, the slowest first.
pub fn flagged(deltas: &[Delta], threshold: f64) -> Vec<&Delta> {
    let drift = drift(deltas);
    let mut ours: Vec<&Delta> = deltas
        .iter()
        .filter(|d| d.origin == Origin::Ours && is_flagged(d, &drift, threshold))
        .collect();
    ours.sort_by(|a, b| b.slowdown.total_cmp(&a.slowdown));
    ours
}

/// The table's columns after the row's name: new, old, slowdown, the
/// rounds' spread, the drift, in how many rounds it was slower, and the
/// flag.
fn cells(
    d: &Delta,
    drift: &BTreeMap<String, f64>,
    per_round: &BTreeMap<String, Vec<f64>>,
    threshold: f64,
) -> String {
    let shown = drift
        .get(&d.workload)
        .map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"));
    format!(
        "{:.4} | {:.4} | {:.3} | {:.2}-{:.2} | {shown} | {}/{} | {}",
        d.new,
        d.old,
        d.slowdown,
        d.spread().0,
        d.spread().1,
        rounds_slower(d, per_round.get(&d.workload).map(Vec::as_slice)),
        d.rounds.len(),
        if is_flagged(d, drift, threshold) {
            "⚠"
        } else {
            ""
        },
    )
}

/// `compare.md`: our rows, the slowest first, with the workload's drift; a
/// row is flagged when it is more than `threshold` (0.05 for 5%) slower
/// both as measured and after dividing by the drift.
pub fn markdown(deltas: &[Delta], changed: &[String], rounds: usize, threshold: f64) -> String {
    let drift = drift(deltas);
    let per_round = round_drift(deltas);
    let mut ours: Vec<&Delta> = deltas.iter().filter(|d| d.origin == Origin::Ours).collect();
    ours.sort_by(|a, b| b.slowdown.total_cmp(&a.slowdown));
    let n_flagged = flagged(deltas, threshold).len();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# New build against old, {rounds} alternated rounds each\n\n\
         A row's value is the median over the rounds of its medians; \
         *slowdown* is new over old for a time and old over new for a \
         throughput (above 1: the new build is slower); *rounds* is the \
         smallest and largest slowdown of a single round; *drift* is the \
         median slowdown of the workload's peer rows, whose code is the \
         same in both builds; *slower in* counts the rounds in \
         which the row was slower than the old build by more than that \
         round's drift (a change that slows a row does so in nearly every \
         round; a row that switches between modes, in about half). Flagged \
         (⚠): more than {:.0}% slower both as measured and divided by the \
         drift. {n_flagged} of {} rows of ours flagged.\n",
        threshold * 100.0,
        ours.len(),
    );
    let _ = writeln!(
        md,
        "| workload | impl | new | old | slowdown | rounds | drift | slower in | |\n\
         |---|---|--:|--:|--:|---|--:|--:|---|"
    );
    for d in ours {
        let _ = writeln!(
            md,
            "| `{}` | `{}` | {} |",
            d.workload,
            d.imp,
            cells(d, &drift, &per_round, threshold),
        );
    }
    if !changed.is_empty() {
        let _ = writeln!(
            md,
            "\nNot compared, their parameters differ between the builds: {}.",
            changed
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    md
}

/// The section `--recheck` adds to `compare.md`: each row `first` flagged,
/// measured again by `alone` (its workload run alone, `rounds` alternated
/// rounds each, the same rule), and whether the flag stands. A row that one
/// run of a whole report flags can be a mode its workload fell into in
/// that run (a convoy, a scheduler state, a saturation verdict left by the
/// workload before it), which a run of the workload alone does not
/// inherit; a change that slows the row slows it alone too.
pub fn recheck_markdown(
    first: &[&Delta],
    alone: &[Delta],
    rounds: usize,
    threshold: f64,
) -> String {
    let drift = drift(alone);
    let per_round = round_drift(alone);
    let found = |d: &Delta| {
        alone
            .iter()
            .find(|a| a.workload == d.workload && a.imp == d.imp)
    };
    let standing = first
        .iter()
        .filter(|d| found(d).is_none_or(|a| is_flagged(a, &drift, threshold)))
        .count();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## The flagged rows again, each workload run alone, {rounds} alternated rounds each\n\n\
         The same columns and the same rule, for the runs of the workload alone; *first* is the \
         row's slowdown above. {standing} of {} flagged rows are still flagged (a row that the \
         runs alone did not measure counts as flagged).\n",
        first.len(),
    );
    let _ = writeln!(
        md,
        "| workload | impl | first | new | old | slowdown | rounds | drift | slower in | |\n\
         |---|---|--:|--:|--:|--:|---|--:|--:|---|"
    );
    for d in first {
        let row = match found(d) {
            Some(a) => cells(a, &drift, &per_round, threshold),
            None => "- | - | - | - | - | - | not measured alone".to_owned(),
        };
        let _ = writeln!(
            md,
            "| `{}` | `{}` | {:.3} | {row} |",
            d.workload, d.imp, d.slowdown
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{Mode, Unit};
    use crate::report::{Machine, SCHEMA};

    fn run(rows: &[(&str, &str, Better, f64)]) -> Results {
        Results {
            schema: SCHEMA,
            mode: Mode::Quick,
            machine: Machine {
                cpus: 2,
                cpu_model: "test".into(),
                rustc: "test".into(),
            },
            results: rows
                .iter()
                .map(|&(w, i, better, median)| Record {
                    workload: w.into(),
                    imp: i.into(),
                    unit: match better {
                        Better::Lower => Unit::Ms,
                        Better::Higher => Unit::MopsPerSec,
                    },
                    better,
                    median,
                    min: median,
                    max: median,
                    samples: 5,
                    params: Default::default(),
                })
                .collect(),
        }
    }

    #[test]
    fn slowdown_follows_the_units_direction_and_the_median_round() {
        use Better::*;
        let new = [
            run(&[
                ("t", "ast-mutex", Lower, 12.0),
                ("q", "lockfree-sync", Higher, 50.0),
            ]),
            run(&[
                ("t", "ast-mutex", Lower, 11.0),
                ("q", "lockfree-sync", Higher, 40.0),
            ]),
            run(&[
                ("t", "ast-mutex", Lower, 90.0),
                ("q", "lockfree-sync", Higher, 45.0),
            ]),
        ];
        let old: Vec<Results> = (0..3)
            .map(|_| {
                run(&[
                    ("t", "ast-mutex", Lower, 10.0),
                    ("q", "lockfree-sync", Higher, 50.0),
                ])
            })
            .collect();
        let d = deltas(&new, &old);
        let t = d.iter().find(|d| d.workload == "t").unwrap();
        // The outlier round (90 ms) moves neither median.
        assert_eq!((t.new, t.old), (12.0, 10.0));
        assert!((t.slowdown - 1.2).abs() < 1e-9);
        assert_eq!(t.spread(), (1.1, 9.0));
        let q = d.iter().find(|d| d.workload == "q").unwrap();
        // A throughput that fell from 50 to 45 is 1.11x slower.
        assert!((q.slowdown - 50.0 / 45.0).abs() < 1e-9);
        assert_eq!(q.origin, Origin::Ours);
    }

    #[test]
    fn rows_missing_from_a_build_or_a_round_are_left_out() {
        use Better::Lower;
        let new = [
            run(&[
                ("a", "ast-mutex", Lower, 1.0),
                ("b", "ast-mutex", Lower, 1.0),
            ]),
            run(&[("a", "ast-mutex", Lower, 1.0)]),
        ];
        let old: Vec<Results> = (0..2)
            .map(|_| {
                run(&[
                    ("a", "ast-mutex", Lower, 1.0),
                    ("c", "ast-mutex", Lower, 1.0),
                ])
            })
            .collect();
        let d = deltas(&new, &old);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].workload, "a");
    }

    #[test]
    fn rows_whose_parameters_changed_are_named_not_compared() {
        use Better::Lower;
        let new = [run(&[
            ("a", "ast-mutex", Lower, 9.0),
            ("b", "ast-mutex", Lower, 1.0),
        ])];
        let mut old = [run(&[
            ("a", "ast-mutex", Lower, 1.0),
            ("b", "ast-mutex", Lower, 1.0),
        ])];
        old[0].results[0].params.insert("ops".into(), 10.into());
        let d = deltas(&new, &old);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].workload, "b");
        assert_eq!(changed(&new, &old), ["a"]);
        assert!(
            markdown(&d, &changed(&new, &old), 1, 0.05).contains("differ between the builds: `a`")
        );
    }

    #[test]
    fn a_row_is_flagged_only_beyond_the_peers_drift() {
        use Better::Lower;
        let new = [run(&[
            ("slow", "ast-mutex", Lower, 1.3),
            ("slow", "std", Lower, 1.0),
            ("noisy", "ast-mutex", Lower, 1.3),
            ("noisy", "std", Lower, 1.3),
        ])];
        let old = [run(&[
            ("slow", "ast-mutex", Lower, 1.0),
            ("slow", "std", Lower, 1.0),
            ("noisy", "ast-mutex", Lower, 1.0),
            ("noisy", "std", Lower, 1.0),
        ])];
        let md = markdown(&deltas(&new, &old), &[], 1, 0.05);
        assert!(md.contains("1 of 2 rows of ours flagged"), "{md}");
        let slow = md.lines().find(|l| l.contains("`slow`")).unwrap();
        let noisy = md.lines().find(|l| l.contains("`noisy`")).unwrap();
        assert!(slow.ends_with("⚠ |"), "{slow}");
        assert!(!noisy.contains('⚠'), "{noisy}");
    }

    #[test]
    fn rounds_slower_count_beyond_each_rounds_drift() {
        use Better::Lower;
        // Round by round the peer (`std`) moves 1.0, 1.5, 1.0
        // and ours 1.2, 1.2, 0.9: beyond the round's drift in the first
        // round only (1.2 > 1.0; 1.2 < 1.5; 0.9 < 1.0).
        let (ours, peer) = ([1.2, 1.2, 0.9], [1.0, 1.5, 1.0]);
        let new: Vec<Results> = (0..3)
            .map(|i| {
                run(&[
                    ("w", "ast-mutex", Lower, ours[i]),
                    ("w", "std", Lower, peer[i]),
                ])
            })
            .collect();
        let old: Vec<Results> = (0..3)
            .map(|_| run(&[("w", "ast-mutex", Lower, 1.0), ("w", "std", Lower, 1.0)]))
            .collect();
        let d = deltas(&new, &old);
        assert_eq!(drift(&d).get("w"), Some(&1.0));
        let md = markdown(&d, &[], 3, 0.05);
        let row = md.lines().find(|l| l.contains("`ast-mutex`")).unwrap();
        assert!(row.contains("| 1/3 |"), "{row}");
        // 1.2 median slowdown and a drift of 1.0: still flagged.
        assert!(row.ends_with("⚠ |"), "{row}");
    }

    #[test]
    fn a_recheck_says_which_flags_stand_alone() {
        use Better::Lower;
        let pair = |slow: f64, mode: f64| {
            [run(&[
                ("slow", "ast-mutex", Lower, slow),
                ("slow", "std", Lower, 1.0),
                ("mode", "ast-mutex", Lower, mode),
                ("mode", "std", Lower, 1.0),
                ("gone", "ast-mutex", Lower, 2.0),
            ])]
        };
        let first = deltas(&pair(1.3, 1.2), &pair(1.0, 1.0));
        let flags = flagged(&first, 0.05);
        assert_eq!(
            flags
                .iter()
                .map(|d| d.workload.as_str())
                .collect::<Vec<_>>(),
            ["slow", "mode"]
        );
        // Alone, `slow` is still slower and `mode` is not.
        let mut alone = deltas(&pair(1.2, 1.0), &pair(1.0, 1.0));
        alone.retain(|d| d.workload != "gone");
        let md = recheck_markdown(&flags, &alone, 1, 0.05);
        assert!(md.contains("1 of 2 flagged rows are still flagged"), "{md}");
        assert!(line_in(&md, "slow").ends_with("⚠ |"), "{md}");
        assert!(!line_in(&md, "mode").contains('⚠'), "{md}");
        // A flagged row the runs alone did not measure stays flagged.
        let mut with_gone = flags.clone();
        let gone = Delta {
            workload: "gone".into(),
            ..flags[0].clone()
        };
        with_gone.push(&gone);
        let md = recheck_markdown(&with_gone, &alone, 1, 0.05);
        assert!(md.contains("2 of 3 flagged rows"), "{md}");
        assert!(line_in(&md, "gone").contains("not measured alone"), "{md}");
    }

    /// The line of `md` that names workload `w`.
    fn line_in<'a>(md: &'a str, w: &str) -> &'a str {
        md.lines().find(|l| l.contains(&format!("`{w}`"))).unwrap()
    }
}
