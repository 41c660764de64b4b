//! Paper 002's programs (`sync_bench::workloads::classic`) on small runs:
//! every program in every model meets its correctness condition, and a
//! deliberately broken cooperative program is caught by the same checks.

use sync_bench::harness::Mode;
use sync_bench::workloads::classic::{self, Config, Model, Program, run};

fn small(program: Program) -> Config {
    let (work, reps) = match program {
        Program::Dp => (10, 60),
        Program::Pc => (10, 300),
        Program::Rw => (10, 40),
        // A 20x20 grid, 4 workers of 4 or 5 rows, up to 60 iterations.
        Program::Ji => (20, 60),
    };
    Config {
        work,
        reps,
        processes: 4,
        sabotage: false,
    }
}

fn every_model_meets_the_condition(program: Program) {
    let cfg = small(program);
    for model in Model::ALL {
        // Several runs: the thread models interleave differently each time.
        for round in 0..3 {
            if let Err(v) = run(program, model, &cfg) {
                panic!("{} in {} (run {round}): {v}", program.name(), model.name());
            }
        }
    }
}

#[test]
fn dp_philosophers_never_share_a_fork_in_any_model() {
    every_model_meets_the_condition(Program::Dp);
}

#[test]
fn pc_every_item_is_consumed_exactly_once_in_any_model() {
    every_model_meets_the_condition(Program::Pc);
}

#[test]
fn rw_readers_never_overlap_writers_in_any_model() {
    every_model_meets_the_condition(Program::Rw);
}

#[test]
fn ji_every_model_ends_on_the_sequential_matrix() {
    every_model_meets_the_condition(Program::Ji);
}

#[test]
fn ji_with_two_processes_and_with_eight() {
    // The paper's two shapes ("256 2", "128 8"), on a small grid.
    for processes in [2, 8] {
        let cfg = Config {
            processes,
            ..small(Program::Ji)
        };
        for model in Model::ALL {
            run(Program::Ji, model, &cfg)
                .unwrap_or_else(|v| panic!("{processes} processes, {}: {v}", model.name()));
        }
    }
}

/// The checks must be able to fail: the sabotaged `cm` program drops its
/// waits (and yields inside its critical sections, or skips JI's barrier).
#[test]
fn a_cooperative_program_without_its_waits_is_caught() {
    for program in Program::ALL {
        let cfg = Config {
            sabotage: true,
            ..small(program)
        };
        let verdict = run(program, Model::Cm, &cfg);
        assert!(
            verdict.is_err(),
            "{}: the broken program passed its check",
            program.name()
        );
    }
}

#[test]
fn the_sabotage_names_what_broke() {
    let broken = |program| {
        let cfg = Config {
            sabotage: true,
            ..small(program)
        };
        run(program, Model::Cm, &cfg).unwrap_err().0
    };
    assert!(broken(Program::Dp).contains("fork"));
    assert!(broken(Program::Pc).contains("item"));
    assert!(broken(Program::Rw).contains("entered"));
    assert!(broken(Program::Ji).contains("sequential run"));
}

#[test]
fn the_report_has_every_workload_in_every_model() {
    let ws = classic::workloads(Mode::Quick);
    let mut ids: Vec<&str> = ws.iter().map(|w| w.meta.id.as_str()).collect();
    ids.sort();
    let mut expected = Vec::new();
    for p in ["dp", "pc", "rw"] {
        for work in [100, 1000, 10000, 100000] {
            expected.push(format!("classic/{p}/{work}"));
        }
    }
    expected.push("classic/ji/128".into());
    expected.push("classic/ji/256".into());
    expected.sort();
    assert_eq!(ids, expected);
    for w in &ws {
        let names: Vec<&str> = w.impls.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(
            names,
            ["cp-lockfree", "cp-std", "cm", "pcm"],
            "{}",
            w.meta.id
        );
        assert!(
            w.meta.paper.is_some(),
            "{} cites the paper's figures",
            w.meta.id
        );
        // The paper's thread counts are kept in quick mode.
        if w.meta.id == "classic/ji/128" {
            assert_eq!(w.meta.params["processes"], 8);
        }
    }
}

#[test]
fn names_parse_back() {
    for m in Model::ALL {
        assert_eq!(m.name().parse::<Model>(), Ok(m));
    }
    for p in Program::ALL {
        assert_eq!(p.name().parse::<Program>(), Ok(p));
    }
    assert!("threads".parse::<Model>().is_err());
}
