//! `am/`: paper 004 (ActiveMonitor). Issue 10.
//!
//! The paper's experiments (section 7): the bounded FIFO queue (BQ), the
//! sorted linked list (SLL), round-robin access (RR), OR over two queues,
//! plus the cost of one light delegated call. Implementations:
//!
//! * `am`: `active-monitor`, asynchronous where the paper is (puts, list
//!   inserts and deletes), strict program order (rules 2 and 3);
//! * `am-relaxed`: the same with `Order::Relaxed` (appendix B, "NPO");
//! * `ams`: `active-monitor` with synchronous delegation only;
//! * `lk`: the lock-based monitor (parking_lot `Mutex` + `Condvar`, or
//!   `RwLock` for the list: the paper's LK); `lk-std`: with std's;
//! * `actor`: the hand-made actor Rust users write today: a server thread
//!   fed by a crossbeam channel, with a reply channel per call;
//! * `am-server`: `active-monitor` with a dedicated server thread
//!   (`Builder::build_served`), otherwise as `am`. While the CPUs are
//!   saturated (more runnable threads than CPUs, from `/proc/stat`) it runs
//!   by combining, as the paper's runtime does.
//!
//! Every sample spawns the threads, starts them together and times until
//! the last one finishes a fixed number of operations (a time-bounded run
//! cannot stop blocked consumers cleanly). Counts are chosen so that the
//! quick mode's `am/` share stays near 90 s on 2 cores, which makes a
//! sample shorter than the 0.5 s.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use active_monitor::{Monitor, Order, Served, or};
use crossbeam_channel as cbc;

use crate::harness::{Mode, Unit, Workload, mops_per_sec, ns_per_op};
use crate::workloads::ast::run_threads;

mod bq;
mod call;
mod or;
mod rr;
mod sll;
mod sssp;

use bq::bq;
use call::{call, uncontended};
use or::or_queues;
use rr::rr;
use sll::{SllMix, sll};
use sssp::sssp;
pub use sssp::{AmPq, Graph, LkPq, SSSP_VERTICES, SharedPq, parallel_sssp};

/// This family's workloads, sized for `mode`.
pub fn workloads(mode: Mode) -> Vec<Workload> {
    let mut all = vec![uncontended(mode)];
    for body_us in [0, 5] {
        for threads in [4, 8, 32, 64] {
            all.push(call(mode, body_us, threads));
        }
    }
    for cap in [4, 16, 64] {
        for threads in [2, 4, 8] {
            all.push(bq(mode, cap, threads));
        }
    }
    for mix in [SllMix::READ, SllMix::WRITE, SllMix::MIXED] {
        for threads in [2, 4, 8] {
            all.push(sll(mode, mix, threads));
        }
    }
    for threads in [2, 4, 8] {
        all.push(rr(mode, threads));
    }
    for threads in [2, 4, 8] {
        all.push(or_queues(mode, threads));
    }
    for degree in [16, 128] {
        all.push(sssp(mode, degree));
    }
    all
}
