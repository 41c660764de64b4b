//! `adaptive/`: paper 003 (Mukherjee & Schwan, adaptive locks). Issue 9.

use crate::harness::{Mode, Workload};

/// This family's workloads, sized for `mode`.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let _ = mode;
    Vec::new()
}
