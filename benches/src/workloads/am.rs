//! `am/`: paper 004 (ActiveMonitor). Issue 10.

use crate::harness::{Mode, Workload};

/// This family's workloads, sized for `mode`.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let _ = mode;
    Vec::new()
}
