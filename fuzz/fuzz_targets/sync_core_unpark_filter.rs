//! Parks up to four threads with tokens from the input, one after another,
//! runs `unpark_filter` with a script from the input, and checks it against
//! the sequential model: the filter sees the parked tokens in queue order,
//! stops where told, wakes exactly the accepted threads with the callback's
//! token, and `unpark_all` wakes the rest.
#![no_main]

use std::thread;

use libfuzzer_sys::fuzz_target;
use sync_core::parking_lot::{self, FilterOp, ParkResult, ParkToken, UnparkToken};
use sync_core::testing::wait_until_parked;

const ACCEPTED: UnparkToken = UnparkToken(1);
const REST: UnparkToken = UnparkToken(2);

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = 1 + n as usize % 4;
    if rest.len() < 2 * n {
        return;
    }
    let (tokens, script) = rest.split_at(n);
    let anchor = Box::new(0u8);
    let key = &*anchor as *const u8 as usize;

    let threads: Vec<_> = tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let th = thread::spawn(move || {
                // SAFETY: trivial callbacks.
                unsafe {
                    parking_lot::park(key, || true, || {}, |_, _| {}, ParkToken(t as usize), None)
                }
            });
            wait_until_parked(key, i + 1);
            th
        })
        .collect();

    // The sequential model: walk the queue with the script.
    let ops: Vec<FilterOp> = script[..n]
        .iter()
        .map(|b| match b % 3 {
            0 => FilterOp::Unpark,
            1 => FilterOp::Skip,
            _ => FilterOp::Stop,
        })
        .collect();
    let mut expected_seen = Vec::new();
    let mut accepted = vec![false; n];
    for (i, op) in ops.iter().enumerate() {
        expected_seen.push(tokens[i] as usize);
        match op {
            FilterOp::Unpark => accepted[i] = true,
            FilterOp::Skip => {}
            FilterOp::Stop => break,
        }
    }
    let unparked = accepted.iter().filter(|a| **a).count();

    let mut seen = Vec::new();
    let mut script_ops = ops.iter();
    // SAFETY: the filter only records and reads its script; the callback is
    // trivial.
    let r = unsafe {
        parking_lot::unpark_filter(
            key,
            |ParkToken(t)| {
                seen.push(t);
                *script_ops
                    .next()
                    .expect("the filter saw more threads than were parked")
            },
            |_| ACCEPTED,
        )
    };
    assert_eq!(seen, expected_seen, "filter order");
    assert_eq!(r.unparked_threads, unparked);
    assert_eq!(r.have_more_threads, unparked < n);

    // SAFETY: no callbacks.
    let rest_woken = unsafe { parking_lot::unpark_all(key, REST) };
    assert_eq!(rest_woken, n - unparked);
    for (th, accepted) in threads.into_iter().zip(accepted) {
        let want = if accepted { ACCEPTED } else { REST };
        assert_eq!(th.join().unwrap(), ParkResult::Unparked(want));
    }
});
