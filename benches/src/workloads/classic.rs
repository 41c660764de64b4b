//! `classic/`: paper 002 (concurrent vs cooperative multithreading). Issue 11.

use crate::harness::{Mode, Workload};

/// This family's workloads, sized for `mode`.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let _ = mode;
    Vec::new()
}
