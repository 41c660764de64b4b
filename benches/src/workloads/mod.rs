//! The registry of workloads: one module per paper, plus `base`.
//!
//! Ids are fixed names (issues list them) so results compare across
//! versions: `family/name[/param]`. A new family adds its module here and
//! its workloads to [`all`].

use crate::harness::{Mode, Workload};

pub mod ast;
pub mod base;
pub mod lf;
pub mod lf_chan;

/// Every workload, sized for `mode`, in report order.
pub fn all(mode: Mode) -> Vec<Workload> {
    let mut all = Vec::new();
    all.extend(base::workloads(mode));
    all.extend(ast::workloads(mode));
    all.extend(lf::workloads(mode));
    all.extend(lf_chan::workloads(mode));
    all
}
