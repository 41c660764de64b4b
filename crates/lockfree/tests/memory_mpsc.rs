//! The memory an mpsc channel holds follows the messages queued, not the
//! size of its blocks: with nothing queued, each sender holds at most one
//! block of `BLOCK_BYTES` (or one node) and the channel keeps at most
//! `SPARE_BYTES` of released blocks, whatever the message size. A counting
//! global allocator (`sync_core::testing::CountingAlloc`) measures the
//! bytes live in this test binary.
#![cfg(not(loom))]

use std::thread;

use lockfree_sync::mpsc::{self, BLOCK_BYTES, BLOCK_CAP, SPARE_BYTES};
use sync_core::testing::{CountingAlloc, live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

// The tests measure one counter: they run one at a time
// (`sync_core::testing::one_at_a_time`).

/// `senders` senders, each of which has sent `BLOCK_CAP` messages of `N`
/// bytes (enough to move past any block it shared with its parent), every
/// message received: the bytes the channel holds then, with nothing queued.
fn idle_bytes<const N: usize>(senders: usize) -> isize {
    let _one = sync_core::testing::one_at_a_time();
    let before = live_bytes();
    let (tx, rx) = mpsc::channel::<[u8; N]>();
    let txs: Vec<_> = (0..senders).map(|_| tx.clone()).collect();
    drop(tx);
    let mut keep = Vec::new();
    for tx in txs {
        // Each sender on a thread of its own, then kept alive, idle.
        keep.push(
            thread::spawn(move || {
                for _ in 0..BLOCK_CAP {
                    tx.send([1; N]).unwrap();
                }
                tx
            })
            .join()
            .unwrap(),
        );
        while rx.try_recv().is_ok() {}
    }
    let held = live_bytes() - before;
    drop(keep);
    drop(rx);
    held
}

#[test]
fn idle_senders_hold_at_most_a_small_block_each() {
    const SENDERS: usize = 8;
    // Each sender's block, the spares, and the channel itself (a few cache
    // lines), with room for the vector of senders.
    let bound = (SENDERS * BLOCK_BYTES + SPARE_BYTES + 8 * 1024) as isize;
    for (size, held) in [
        (8, idle_bytes::<8>(SENDERS)),
        (256, idle_bytes::<256>(SENDERS)),
        (1024, idle_bytes::<1024>(SENDERS)),
    ] {
        assert!(
            held <= bound,
            "{SENDERS} idle senders of {size}-byte messages hold {held} bytes with nothing \
             queued (bound {bound})"
        );
    }
}

#[test]
fn messages_larger_than_a_block_take_one_node_per_block() {
    const SENDERS: usize = 4;
    const N: usize = 16 * 1024;
    // One node per sender, no spares (a block is larger than SPARE_BYTES),
    // and the channel itself.
    let bound = (SENDERS * (N + 64) + 8 * 1024) as isize;
    let held = idle_bytes::<N>(SENDERS);
    assert!(
        held <= bound,
        "{SENDERS} idle senders of {N}-byte messages hold {held} bytes (bound {bound})"
    );
}
