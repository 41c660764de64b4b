//! The registry of workloads: one module per paper, plus `base`.
//!
//! Ids are fixed names (issues list them) so results compare across
//! versions: `family/name[/param]`. A new family adds its module here and
//! its workloads to [`all`].

use crate::harness::{Mode, Workload};

pub mod adaptive;
pub mod am;
pub mod ast;
pub mod base;
pub mod busy;
pub mod classic;
pub mod lf;
pub mod lf_chan;

/// Every workload, sized for `mode`, in report order.
pub fn all(mode: Mode) -> Vec<Workload> {
    let mut all = Vec::new();
    all.extend(base::workloads(mode));
    all.extend(ast::workloads(mode));
    all.extend(lf::workloads(mode));
    all.extend(lf_chan::workloads(mode));
    all.extend(adaptive::workloads(mode));
    all.extend(am::workloads(mode));
    all.extend(classic::workloads(mode));
    all.extend(busy::workloads(mode));
    all
}
