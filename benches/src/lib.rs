//! The sync family's benchmark harness: the papers' experiments, our
//! primitives against the peers, measured side by side in one process.
//!
//! * [`harness`]: workloads, implementations, and the method (warm-up,
//!   alternation, at least five samples, median/min/max).
//! * [`workloads`]: the registry of every workload, one module per paper
//!   (and `base`, the machine's own limits).
//! * [`peers`]: one trait per kind of primitive, implemented for every peer
//!   and for ours, so that a workload is written once.
//! * [`buffers`]: paper 000's bounded buffer in every implementation compared.
//! * [`twins`]: paper 001's lock-based semaphore twin and the condvar
//!   ("system") semaphore.
//! * [`report`]: `results.json`, `report.md` and the SVG charts.
//! * [`compare`]: two builds' reports compared row by row (`--compare`).
//!
//! Run it with `cargo xtask report`.

pub mod buffers;
pub mod compare;
pub mod harness;
pub mod peers;
pub mod report;
pub mod twins;
pub mod workloads;

/// The README's code blocks, compiled and run as doc tests
/// (`cargo test -p sync-bench --doc`), so that the examples users copy keep
/// building.
#[cfg(doctest)]
pub mod readmes {
    #[doc = include_str!("../../README.md")]
    pub struct Workspace;
    #[doc = include_str!("../../crates/sync-core/README.md")]
    pub struct SyncCore;
    #[doc = include_str!("../../crates/ast-mutex/README.md")]
    pub struct AstMutex;
    #[doc = include_str!("../../crates/lockfree/README.md")]
    pub struct LockfreeSync;
    #[doc = include_str!("../../crates/adaptive-lock/README.md")]
    pub struct AdaptiveLock;
    #[doc = include_str!("../../crates/active-monitor/README.md")]
    pub struct ActiveMonitor;
}
