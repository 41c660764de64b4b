//! Random operation sequences against a sequential model of the mutex.
#![cfg(not(loom))]

use std::time::Duration;

use ast_mutex::{AbstractState, AstMutex, Config, StateSet, WakeMode};
use proptest::prelude::*;

ast_mutex::states! { enum S { A, B, C, D } }

#[derive(Clone, Debug)]
enum Op {
    /// `try_enter(set)`, or `try_enter_for(set, 0)` when `timed`.
    Enter { set: u64, timed: bool },
    /// Exit the held guard in this state, or drop it (restore) on `None`.
    Leave(Option<u32>),
    /// `state()`.
    Peek,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..16, any::<bool>()).prop_map(|(set, timed)| Op::Enter { set, timed }),
        proptest::option::of(0u32..4).prop_map(Op::Leave),
        Just(Op::Peek),
    ]
}

proptest! {
    #[test]
    fn behaves_like_the_sequential_model(
        initial in 0u32..4,
        mode in 0usize..3,
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let mode = [WakeMode::Compete, WakeMode::Handoff, WakeMode::Broadcast][mode];
        let m = AstMutex::with_config(S::from_index(initial), 0u32, Config::new().wake_mode(mode));
        // The model: the state when free, and the guard's entry state.
        let mut state = initial;
        let mut held: Option<(ast_mutex::AstGuard<'_, S, u32>, u32)> = None;
        let mut entries = 0u32;
        for op in ops {
            match op {
                Op::Enter { set, timed } => {
                    let set = StateSet::<S>::from_bits(set);
                    let got = if timed {
                        m.try_enter_for(set, Duration::ZERO)
                    } else {
                        m.try_enter(set)
                    };
                    let admits = held.is_none() && set.contains(S::from_index(state));
                    prop_assert_eq!(got.is_some(), admits, "entry with {:?} in {:?}", set, state);
                    if let Some(mut g) = got {
                        prop_assert_eq!(g.entered_in().index(), state);
                        *g += 1;
                        entries += 1;
                        held = Some((g, state));
                    }
                }
                Op::Leave(next) => {
                    if let Some((g, entered)) = held.take() {
                        match next {
                            Some(n) => { g.exit(S::from_index(n)); state = n; }
                            None => { drop(g); state = entered; }
                        }
                    }
                }
                Op::Peek => {
                    let expect = held.is_none().then(|| S::from_index(state));
                    prop_assert_eq!(m.state(), expect);
                }
            }
        }
        drop(held);
        prop_assert_eq!(m.state(), Some(S::from_index(state)));
        prop_assert_eq!(*m.enter(StateSet::ALL), entries);
    }
}

proptest! {
    /// The `StateSet` operators are the bit operations on the mask, within
    /// the states of `S`.
    #[test]
    fn state_set_operators_match_the_mask(a in 0u64..16, b in 0u64..16, s in 0u32..4) {
        let (x, y) = (StateSet::<S>::from_bits(a), StateSet::<S>::from_bits(b));
        let st = S::from_index(s);
        let sb = 1u64 << s;
        prop_assert_eq!((x | y).bits(), a | b);
        prop_assert_eq!((x & y).bits(), a & b);
        prop_assert_eq!((x - y).bits(), a & !b);
        prop_assert_eq!((!x).bits(), !a & 0xf);
        prop_assert_eq!((x | st).bits(), a | sb);
        prop_assert_eq!((x & st).bits(), a & sb);
        prop_assert_eq!((x - st).bits(), a & !sb);
        let mut z = x;
        z |= y;
        z &= !StateSet::from(st);
        z -= x & y;
        prop_assert_eq!(z.bits(), ((a | b) & !sb) & !(a & b));
        prop_assert_eq!(x.is_subset(y), a & !b == 0);
        prop_assert_eq!(x.is_superset(y), b & !a == 0);
        prop_assert_eq!(x.is_disjoint(y), a & b == 0);
        prop_assert_eq!(x.union(y).intersection(y.complement()), x - y);
        prop_assert_eq!(x.len(), a.count_ones() as usize);
    }
}
