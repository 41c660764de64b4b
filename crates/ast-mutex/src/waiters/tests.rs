//! Unit tests of the waiter table.

use sync_core::sync::Arc;
use sync_core::waiter::Waiter;

use super::*;

fn w() -> Arc<Waiter> {
    Waiter::for_thread(0)
}

#[test]
fn oldest_serves_arrival_order_and_woken_nodes_keep_their_place() {
    let ws = Waiters::new();
    let mut t = ws.lock();
    let a = t.insert(0b01, Slot::new(), w());
    let ab = t.insert(0b11, Slot::new(), w());
    let b = t.insert(0b10, Slot::new(), w());
    assert_eq!(t.summary, 0b11);
    assert_eq!(t.oldest(0b10), Some(ab.index), "oldest B acceptor");
    // Woken: still the oldest, still counted.
    assert!(t.take_waiter(ab.index).is_some());
    assert!(t.is_woken(ab));
    t.pass(ab.index, 1);
    assert_eq!((t.oldest(0b10), t.passes(ab.index)), (Some(ab.index), 1));
    t.requeue(ab, w());
    assert!(!t.is_woken(ab));
    assert!(t.remove(ab));
    assert!(!t.remove(ab), "a stale handle removes nothing");
    assert_eq!(t.oldest(0b10), Some(b.index), "then the {{B}} group");
    // A new node may reuse the freed one: the old handle stays stale.
    let c = t.insert(0b10, Slot::new(), w());
    assert!(!t.contains(ab) && t.contains(c));
    assert_eq!(t.all(0b10), [b.index, c.index]);
    assert!(t.remove(b));
    assert!(t.remove(c));
    assert_eq!(t.groups(), 1, "emptied groups are freed");
    assert_eq!(t.summary, 0b01);
    assert_eq!(t.oldest(0b10), None);
    assert!(t.remove(a));
    assert_eq!((t.groups(), t.waiters(), t.summary), (0, 0, 0));
    assert_eq!(t.slab_capacity(), 0, "the slab is freed with the last node");
}

#[test]
fn nodes_left_by_cancelled_waiters_go_at_the_next_lock() {
    let ws = Waiters::new();
    let waiters: Vec<_> = (0..5).map(|_| w()).collect();
    let hs: Vec<_> = {
        let mut t = ws.lock();
        // Four nodes for state bit 1, the last one for bit 2.
        (0..5)
            .map(|i| {
                t.insert(
                    if i < 4 { 1 } else { 2 },
                    Slot::new(),
                    Arc::clone(&waiters[i]),
                )
            })
            .collect()
    };
    // Two waiters of the first group cancel and leave their nodes; a
    // third is cancelled and not yet gone: the sweep takes it too.
    for i in [0, 2, 3] {
        waiters[i].cancel().expect("not notified");
    }
    ws.leave_later();
    ws.leave_later();
    let mut t = ws.lock();
    assert_eq!(t.all(1), [hs[1].index]);
    assert_eq!(t.all(2), [hs[4].index]);
    assert!(![0, 2, 3].iter().any(|&i| t.contains(hs[i])));
    assert_eq!(t.waiters(), 2);
    drop(t);
    // The last nodes leave the same way: the slab empties.
    for i in [1, 4] {
        waiters[i].cancel().expect("not notified");
        ws.leave_later();
    }
    assert_eq!(ws.lock().waiters(), 0);
}

/// A woken waiter that gave up without the table lock: an exit's
/// handoff to its slot fails (the lock stays the exit's), a handoff
/// made before the give-up is the waiter's, and the node goes at the
/// next lock with what it owed taken once.
#[test]
fn a_woken_node_whose_slot_was_abandoned_is_never_handed_the_lock() {
    let ws = Waiters::new();
    let (slot_a, slot_b) = (Slot::new(), Slot::new());
    let (a, b) = {
        let mut t = ws.lock();
        let a = t.insert(1, Arc::clone(&slot_a), w());
        let b = t.insert(1, Arc::clone(&slot_b), w());
        assert!(t.take_waiter(a.index).is_some() && t.take_waiter(b.index).is_some());
        (a, b)
    };
    // `a` gives up first; an exit then tries to hand it the lock.
    assert_eq!(slot_a.abandon(), Ok(()));
    assert_eq!(slot_a.token(), None);
    assert!(
        !ws.lock().hand_to_woken(a.index, 0x101),
        "handed to a waiter gone"
    );
    // An exit hands `b` the lock before `b` gives up: it is `b`'s.
    assert!(ws.lock().hand_to_woken(b.index, 0x102));
    assert_eq!(slot_b.abandon(), Err(0x102));
    assert_eq!(slot_b.token(), Some(0x102));
    assert_eq!(
        ws.lock().waiters(),
        0,
        "both nodes were removed by the exits"
    );
    // A node abandoned while no exit reaches it goes at the next lock.
    let slot_c = Slot::new();
    let c = {
        let mut t = ws.lock();
        let c = t.insert(1, Arc::clone(&slot_c), w());
        assert!(t.take_waiter(c.index).is_some());
        c
    };
    assert_eq!(slot_c.abandon(), Ok(()));
    ws.leave_owing(true);
    assert!(ws.owed_after_release());
    let mut t = ws.lock();
    assert!(!t.contains(c));
    assert!(ws.take_owed(), "the serve it owed, taken once");
    assert!(!ws.take_owed());
    drop(t);
    assert!(!ws.owed_after_release());
}

/// A waiter whose node an exit (or a sweep) removed still holds its
/// handle; once the slab was freed and a new waiter took the same
/// index, that handle must not name the new node. (Found by an
/// independent review: the late `remove` unlinked the new waiter's node,
/// which then slept for ever with the lock free.)
#[test]
fn a_stale_handle_does_not_name_a_node_after_the_slab_was_freed() {
    let ws = Waiters::new();
    let mut t = ws.lock();
    let old = t.insert(1, Slot::new(), w());
    let i = t.oldest(1).expect("queued");
    t.remove_at(i);
    assert_eq!(t.waiters(), 0, "the slab is freed");
    let new = t.insert(1, Slot::new(), w());
    assert_eq!(t.oldest(1), Some(i), "the same index again");
    assert!(!t.contains(old));
    assert!(!t.remove(old), "a stale handle removed a live node");
    assert!(t.contains(new));
    assert_eq!(t.waiters(), 1);
}

#[test]
fn removal_from_the_middle_keeps_the_list() {
    let ws = Waiters::new();
    let mut t = ws.lock();
    let hs: Vec<_> = (0..5).map(|_| t.insert(1, Slot::new(), w())).collect();
    for i in [2, 4, 0] {
        assert!(t.remove(hs[i]));
    }
    assert_eq!(t.all(1), [hs[1].index, hs[3].index]);
    assert_eq!(t.oldest(1), Some(hs[1].index));
    let h = t.insert(1, Slot::new(), w());
    assert_eq!(t.all(1), [hs[1].index, hs[3].index, h.index]);
    assert_eq!(t.waiters(), 3);
}

/// A crowd that came after a waiter still present, and left (in any
/// order), leaves no slab behind it: memory follows the waiters present,
/// not the largest crowd since the table was last empty (found by review:
/// 400,000 dropped futures beside one waiter kept 28 MB).
#[test]
fn a_crowd_that_left_leaves_no_slab_beside_a_waiter_that_stays() {
    let ws = Waiters::new();
    let mut t = ws.lock();
    let stays = t.insert(0b01, Slot::new(), w());
    for order in 0..3 {
        let mut crowd: Vec<_> = (0..1000)
            .map(|_| t.insert(0b10, Slot::new(), w()))
            .collect();
        match order {
            0 => {}
            1 => crowd.reverse(),
            _ => {
                // Every other one first, then the rest.
                let (even, odd): (Vec<_>, Vec<_>) =
                    crowd.iter().enumerate().partition(|(i, _)| i % 2 == 0);
                crowd = even.into_iter().chain(odd).map(|(_, h)| *h).collect();
            }
        }
        assert!(t.slab_capacity() >= 1001);
        for h in crowd {
            assert!(t.remove(h));
        }
        assert_eq!(t.waiters(), 1);
        assert!(t.contains(stays), "order {order}: the waiter that stays");
        assert!(
            t.slab_capacity() <= 16,
            "order {order}: the slab kept {} nodes for 1 waiter",
            t.slab_capacity()
        );
    }
    // Freed nodes in the middle are reused, and the table still works.
    let a = t.insert(0b10, Slot::new(), w());
    let b = t.insert(0b10, Slot::new(), w());
    assert!(t.remove(a));
    let c = t.insert(0b10, Slot::new(), w());
    assert_eq!(t.all(0b10), [b.index, c.index]);
    assert!(t.remove(b) && t.remove(c) && t.remove(stays));
    assert_eq!((t.waiters(), t.slab_capacity()), (0, 0));
}

/// A crowd of waiters on many distinct entry sets that came and went
/// leaves no room for their groups behind, beside a waiter that stays or
/// with none left (found by review: the groups' `Vec` kept the room of the
/// most distinct sets that ever waited at once).
#[test]
fn distinct_entry_sets_that_left_leave_no_room_for_their_groups() {
    let ws = Waiters::new();
    let mut t = ws.lock();
    let stays = t.insert(0b1, Slot::new(), w());
    let crowd: Vec<_> = (1..1000u64)
        .map(|i| t.insert(i << 1, Slot::new(), w()))
        .collect();
    assert!(t.groups_capacity() >= 1000);
    for h in crowd {
        assert!(t.remove(h));
    }
    assert!(
        t.groups_capacity() <= 16,
        "the groups kept room for {} sets beside 1",
        t.groups_capacity()
    );
    assert!(t.remove(stays));
    assert!(t.groups_capacity() <= 16);
}
