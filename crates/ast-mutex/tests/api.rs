//! Behaviour of the public API.
#![cfg(not(loom))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ast_mutex::{AbstractState, AstMutex, Config, StateSet, WakeMode};

ast_mutex::states! { enum S { A, B, C } }

const MODES: [WakeMode; 2] = [WakeMode::Compete, WakeMode::Handoff];

fn with_mode(mode: WakeMode) -> AstMutex<S, u32> {
    AstMutex::with_config(S::A, 0, Config::new().wake_mode(mode))
}

#[test]
#[should_panic(expected = "AstMutex::enter with an empty state set")]
fn enter_with_an_empty_set_panics() {
    let m = AstMutex::new(S::A, ());
    let _g = m.enter(StateSet::EMPTY);
}

#[test]
#[should_panic(expected = "AstMutex::try_enter with an empty state set")]
fn try_enter_with_an_empty_set_panics() {
    let m = AstMutex::new(S::A, ());
    let _g = m.try_enter(StateSet::EMPTY);
}

#[test]
#[should_panic(expected = "AstMutex::try_enter_for with an empty state set")]
fn enter_for_with_an_empty_set_panics() {
    let m = AstMutex::new(S::A, ());
    let _g = m.try_enter_for(StateSet::EMPTY, Duration::from_secs(1));
}

#[test]
fn state_is_null_while_held_and_the_exit_state_after() {
    let m = AstMutex::new(S::A, 5);
    assert_eq!(m.state(), Some(S::A));
    let mut g = m.enter(S::A | S::C);
    assert_eq!(g.entered_in(), S::A);
    assert_eq!(m.state(), None);
    assert!(m.try_enter(StateSet::ALL).is_none(), "held");
    *g += 1;
    g.exit(S::C);
    assert_eq!(m.state(), Some(S::C));
    assert!(
        m.try_enter(S::A).is_none(),
        "C does not admit an A-only entry"
    );
    assert_eq!(*m.try_enter(S::C).unwrap(), 6);
}

#[test]
fn dropping_a_guard_restores_the_entry_state() {
    let m = AstMutex::new(S::B, ());
    drop(m.enter(S::B));
    assert_eq!(m.state(), Some(S::B));
}

#[test]
fn a_panic_inside_restores_the_entry_state_and_wakes_its_waiter() {
    for mode in MODES {
        let m = Arc::new(with_mode(mode));
        // Entered before the waiter starts, so that the waiter must wait.
        let mut g = m.enter(S::A);
        let waiter = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let g = m.enter(S::A);
                assert_eq!(g.entered_in(), S::A);
                *g
            })
        };
        let r = catch_unwind(AssertUnwindSafe(move || {
            *g = 42;
            panic!("inside the critical section");
        }));
        assert!(r.is_err());
        assert_eq!(waiter.join().unwrap(), 42, "the waiter for A got in");
        assert_eq!(m.state(), Some(S::A));
    }
}

#[test]
fn enter_for_times_out_and_leaves_the_mutex_usable() {
    for mode in MODES {
        let m = with_mode(mode);
        let start = Instant::now();
        assert!(m.try_enter_for(S::B, Duration::from_millis(20)).is_none());
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(m.try_enter_until(S::C, Instant::now()).is_none());
        // The timed-out waiters left no trace: the fast path still works.
        m.enter(S::A).exit(S::B);
        assert_eq!(m.state(), Some(S::B));
    }
}

#[test]
fn exit_wakes_only_waiters_that_accept_the_state() {
    for mode in MODES {
        let m = Arc::new(AstMutex::with_config(
            S::A,
            Vec::new(),
            Config::new().wake_mode(mode).spins(0).yields(0),
        ));
        let started = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = [S::B, S::C]
            .into_iter()
            .map(|want| {
                let (m, started) = (Arc::clone(&m), Arc::clone(&started));
                thread::spawn(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let mut g = m.enter(want);
                    assert_eq!(g.entered_in(), want, "woken in a state outside the set");
                    g.push(want);
                    g.exit(S::A);
                })
            })
            .collect();
        while started.load(Ordering::SeqCst) < 2 {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(20)); // let them park
        // Many exits in A wake no one.
        for _ in 0..100 {
            m.enter(S::A).exit(S::A);
        }
        assert!(m.enter(S::A).is_empty());
        m.enter(S::A).exit(S::C);
        m.enter(S::A).exit(S::B);
        waiters.into_iter().for_each(|w| w.join().unwrap());
        assert_eq!(*m.enter(S::A), [S::C, S::B]);
    }
}

ast_mutex::states! { enum Relay { S0, S1, S2, S3, S4, S5, S6, S7, Done } }

/// Eight threads each wait for their own state and pass to the next: the
/// exits must find the right group every time.
#[test]
fn a_relay_through_many_entry_sets() {
    for mode in MODES {
        let m = Arc::new(AstMutex::with_config(
            Relay::Done,
            Vec::new(),
            Config::new().wake_mode(mode).spins(0).yields(0),
        ));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    for round in 0..50 {
                        let mut g = m.enter(Relay::from_index(i));
                        g.push((round, i));
                        g.exit(Relay::from_index(i + 1));
                    }
                })
            })
            .collect();
        for _ in 0..50 {
            m.enter(Relay::Done).exit(Relay::S0);
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        let log = m.enter(Relay::Done);
        let expected: Vec<_> = (0..50).flat_map(|r| (0..8).map(move |i| (r, i))).collect();
        assert_eq!(*log, expected);
    }
}

#[test]
fn handoff_mode_passes_the_entry_state_to_the_woken_thread() {
    let m = Arc::new(AstMutex::with_config(
        S::A,
        0u32,
        Config::new()
            .wake_mode(WakeMode::Handoff)
            .spins(0)
            .yields(0),
    ));
    let other = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            for _ in 0..1000 {
                let mut g = m.enter(S::B);
                assert_eq!(g.entered_in(), S::B);
                *g += 1;
                g.exit(S::A);
            }
        })
    };
    for _ in 0..1000 {
        let mut g = m.enter(S::A);
        assert_eq!(g.entered_in(), S::A);
        *g += 1;
        g.exit(S::B);
    }
    other.join().unwrap();
    assert_eq!(*m.enter(S::A), 2000);
}

/// Two shared borrows of one guard live at once. This cannot fail under a
/// normal build; under Miri it fails if `Deref` goes through a `&mut T`
/// (which invalidates the first borrow under Stacked Borrows).
#[test]
fn shared_borrows_of_a_guard_coexist() {
    let m = AstMutex::new(S::A, vec![1, 2]);
    let g = m.enter(S::A);
    let first = &*g;
    let second = &*g;
    assert_eq!(first.len() + second.len(), 4);
    assert_eq!(first[0], 1);
}

#[test]
fn get_mut_into_inner_and_debug() {
    let mut m = AstMutex::new(S::B, vec![1]);
    m.get_mut().push(2);
    assert_eq!(format!("{m:?}"), "AstMutex { state: B, data: [1, 2], .. }");
    let g = m.enter(S::B);
    assert_eq!(format!("{g:?}"), "AstGuard { entered_in: B, data: [1, 2] }");
    assert_eq!(format!("{m:?}"), "AstMutex { state: <locked>, .. }");
    drop(g);
    assert_eq!(m.into_inner(), [1, 2]);
}

#[test]
fn state_sets() {
    let ab = S::A | S::B;
    assert_eq!(ab.len(), 2);
    assert_eq!(!ab, StateSet::from(S::C));
    assert_eq!(ab & (S::B | S::C), StateSet::from(S::B));
    assert_eq!(
        StateSet::<S>::ALL.iter().collect::<Vec<_>>(),
        [S::A, S::B, S::C]
    );
    assert!(StateSet::<S>::EMPTY.is_empty());
    assert_eq!(
        [S::C, S::A].into_iter().collect::<StateSet<S>>(),
        S::A | S::C
    );
    assert_eq!(format!("{ab:?}"), "{A, B}");
    assert_eq!(StateSet::<S>::from_bits(0b101), S::A | S::C);
}

#[test]
#[should_panic(expected = "names states beyond the 3")]
fn from_bits_rejects_unknown_states() {
    let _ = StateSet::<S>::from_bits(0b1000);
}

#[test]
fn state_set_operators() {
    let mut set = StateSet::<S>::EMPTY;
    set |= S::A | S::B;
    assert_eq!(set, S::A | S::B);
    set |= S::C;
    assert_eq!(set, StateSet::ALL);
    assert_eq!(set & S::B, S::B.into());
    assert_eq!(set & (S::A | S::C), S::A | S::C);
    set &= S::A | S::B;
    assert_eq!(set, S::A | S::B);
    set &= S::B;
    assert_eq!(set, S::B.into());
    assert_eq!(StateSet::ALL - S::B, S::A | S::C);
    assert_eq!(StateSet::ALL - (S::A | S::B), S::C.into());
    let mut s = StateSet::<S>::ALL;
    s -= S::A;
    s -= StateSet::from(S::C);
    assert_eq!(s, S::B.into());
    assert_eq!(!s, S::A | S::C);
    assert!(s.is_subset(S::B | S::C) && !(S::A | S::B).is_subset(s));
    assert!((S::A | S::B).is_superset(s) && StateSet::<S>::EMPTY.is_subset(s));
    assert!(s.is_disjoint(S::A | S::C) && !s.is_disjoint(StateSet::ALL));
    const AC: StateSet<S> = S::A.into_set().union(S::C.into_set());
    const NOT_AC: StateSet<S> = AC.complement();
    const B: StateSet<S> = StateSet::<S>::ALL.difference(AC).intersection(NOT_AC);
    assert_eq!((AC, NOT_AC, B), (S::A | S::C, S::B.into(), S::B.into()));
}

static GLOBAL: AstMutex<S, Vec<u32>> = AstMutex::new(S::B, Vec::new());

#[test]
fn const_new_makes_a_static_mutex_in_its_initial_state() {
    assert!(GLOBAL.try_enter(S::A).is_none(), "starts in B");
    assert_eq!(GLOBAL.state(), Some(S::B));
    let mut g = GLOBAL.enter(S::B);
    g.push(1);
    g.exit(S::C);
    assert_eq!(*GLOBAL.enter(S::C), [1]);
}

#[test]
fn default_from_and_is_locked() {
    let m: AstMutex<S, u32> = AstMutex::default();
    assert_eq!(m.state(), Some(S::A), "the first state");
    assert!(!m.is_locked());
    let g = m.enter(S::A);
    assert!(m.is_locked());
    assert_eq!(m.state(), None);
    drop(g);
    assert!(!m.is_locked());
    let m: AstMutex<S, &str> = "x".into();
    assert_eq!((m.state(), *m.enter(S::A)), (Some(S::A), "x"));
}

#[test]
fn exit_and_enter_waits_like_a_condvar() {
    for mode in MODES {
        let m = Arc::new(with_mode(mode));
        let other = {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                for _ in 0..100 {
                    let mut g = m.enter(S::B);
                    *g += 1;
                    g.exit(S::A);
                }
            })
        };
        let mut g = m.enter(S::A);
        for i in 0..100 {
            assert_eq!(*g, i);
            g = g.exit_and_enter(S::B, S::A);
        }
        assert_eq!(*g, 100);
        drop(g);
        other.join().unwrap();
    }
}

#[test]
#[should_panic(expected = "AstMutex::exit_and_enter with an empty state set")]
fn exit_and_enter_with_an_empty_set_panics_before_exiting() {
    let m = AstMutex::new(S::A, ());
    let _ = m.enter(S::A).exit_and_enter(S::B, StateSet::EMPTY);
}
