//! Unit tests of the learned policy: which arm it keeps, explores and
//! leaves, for given monitor windows.

use super::*;

fn window(acquisitions: u64, micros: u64, config: Config) -> Stats {
    let w = crate::stats::Counters {
        acquisitions,
        contended: acquisitions / 2,
        ..Default::default()
    };
    Stats {
        waiting: 1,
        total: w,
        window: w,
        window_time: Duration::from_micros(micros),
        hold_time: Duration::from_micros(1),
        spin_polls: 0,
        park_wait: Duration::ZERO,
        config,
        cpus: 2,
    }
}

/// Where every arm gives the same acquisitions per second (a holder
/// that sleeps inside the lock), the arm whose waiters burn CPU
/// watching loses, though it was kept before: on throughput alone the
/// tie kept it for ever.
#[test]
fn learned_leaves_never_park_when_it_only_burns_cpu() {
    let mut p = Learned::new();
    let mut c = Config::new();
    // First, never park (arm 3) is clearly the fastest: it is kept.
    let rate = [10, 10, 10, 30];
    for _ in 0..ARMS as u32 * PROBE {
        let arm = p.arm();
        c = p.adapt(&window(rate[arm] * 10, 10, c)).unwrap();
    }
    assert_eq!(p.arm(), 3);
    // Then every arm does 30 per µs, but never park's waiters keep
    // both CPUs busy watching for the whole window.
    let mut arms = Vec::new();
    for _ in 0..200 {
        let arm = p.arm();
        arms.push(arm);
        let mut s = window(300, 10, c);
        if arm == 3 {
            s.window.watch_cpu = 2 * s.window_time;
        }
        c = p.adapt(&s).unwrap();
    }
    assert_ne!(p.arm(), 3, "still never parking: {arms:?}");
    // And it sits out explorations from then on: most of the last
    // hundred samples are on other arms.
    let late = arms[100..].iter().filter(|&&a| a == 3).count();
    assert!(
        late <= 10,
        "never park for {late} of the last 100 samples: {arms:?}"
    );
}

/// With more threads waiting than CPUs, never parking is tried both
/// with every waiter watching (arm 3, the static `spin_backoff`) and
/// with one watcher per CPU (arm 4), and the one that does better is
/// kept with its own configuration: where every waiter watching is
/// faster, no watcher cap is left in force.
#[test]
fn learned_tries_never_park_with_and_without_restriction_when_crowded() {
    let crowded = |acquisitions, c| {
        let mut s = window(acquisitions, 10, c);
        s.waiting = 16;
        s
    };
    for (fastest, cap) in [(3, None), (4, Some(2))] {
        let mut p = Learned::new();
        let mut c = Config::new();
        let mut explored = Vec::new();
        for _ in 0..ARMS as u32 * PROBE {
            let arm = p.arm();
            explored.push(arm);
            let rate = if arm == fastest { 30 } else { 10 };
            c = p.adapt(&crowded(rate * 10, c)).unwrap();
        }
        // Every arm is tried (the hold is short enough for each).
        assert_eq!(explored, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]);
        assert_eq!(p.arm(), fastest);
        assert_eq!(c.wait_policy(), WaitPolicy::spin_backoff());
        assert_eq!(c.watcher_limit(), cap, "arm {fastest}");
    }
}

/// One window of the best arm that spans a pause in the lock's use (a
/// thousand times the others' length: nobody held or wanted the lock
/// for a while) does not sink that arm: its rate is the median of its
/// windows, not their pooled rate.
#[test]
fn learned_keeps_the_fastest_arm_across_a_window_spanning_a_pause() {
    let mut p = Learned::new();
    let mut c = Config::new();
    let rate = [10, 10, 10, 30, 10];
    let mut explored = Vec::new();
    for i in 0..ARMS as u32 * PROBE {
        let arm = p.arm();
        explored.push(arm);
        let mut s = window(rate[arm] * 10, 10, c);
        s.waiting = 16;
        if i == 10 {
            // Arm 3's second window.
            s.window_time = Duration::from_millis(10);
        }
        c = p.adapt(&s).unwrap();
    }
    assert_eq!(explored, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]);
    assert_eq!(p.arm(), 3, "the pause sank the fastest arm");
}

/// Windows whose lengths vary widely (here one in three is ten times
/// slower, at random, whatever the arm: a thread switch or a park
/// inside a window of a few microseconds) are not a change of load:
/// with the load steady, the policy explores less and less. The
/// windows' mean rate, compared with the kept arm's pooled rate,
/// took such noise for a change and explored again and again.
#[test]
fn learned_takes_noisy_windows_for_a_steady_load() {
    let mut p = Learned::new();
    let mut c = Config::new();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut exploring = 0;
    for _ in 0..1_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let micros = if seed % 3 == 0 { 100 } else { 10 };
        let mut s = window(100, micros, c);
        s.waiting = 1;
        c = p.adapt(&s).unwrap();
        exploring += u32::from(p.exploring);
    }
    assert!(
        exploring < 300,
        "exploring for {exploring} of 1000 samples of a steady load"
    );
}

/// Never parking is kept while the lock is held briefly; then the
/// holder starts sleeping in it (a hold of a millisecond): the policy
/// leaves never parking at once, not at the end of its keep (which a
/// steady load makes long).
#[test]
fn learned_leaves_never_park_as_soon_as_the_hold_grows() {
    let mut p = Learned::new();
    let mut c = Config::new();
    let rate = [10, 10, 10, 30];
    for _ in 0..4 * PROBE {
        let arm = p.arm();
        c = p.adapt(&window(rate[arm] * 10, 10, c)).unwrap();
    }
    assert_eq!(p.arm(), 3);
    for _ in 0..100 {
        let arm = p.arm();
        c = p.adapt(&window(rate[arm] * 10, 10, c)).unwrap();
    }
    assert_eq!(p.arm(), 3, "a steady load keeps never parking");
    let mut s = window(100, 100_000, c);
    s.hold_time = Duration::from_millis(1);
    c = p.adapt(&s).unwrap();
    assert!(c.wait_policy().parks(), "still never parking: {c:?}");
}

/// More threads wait than there are CPUs and the lock is held for
/// 100 µs (more than two wake-ups): the arms that watch past a few
/// spins (the long watch, never parking with and without restriction)
/// are not explored, only those that park soon.
#[test]
fn learned_does_not_explore_watching_when_crowded_and_held_long() {
    let mut p = Learned::new();
    let mut c = Config::new();
    let mut explored = Vec::new();
    for _ in 0..60 {
        explored.push(p.arm());
        let mut s = window(100, 1_000, c);
        s.hold_time = Duration::from_micros(100);
        s.waiting = 16;
        c = p.adapt(&s).unwrap();
        assert!(c.wait_policy().parks() && c.watcher_limit().is_none());
    }
    assert!(
        explored.iter().all(|&a| a == 0 || a == 2),
        "explored {explored:?}"
    );
    // And parking_lot's arm parks after its spins, without yielding
    // (the waiters ahead are parked; a yield only burns CPU).
    assert!(explored.contains(&0));
    let mut s = window(100, 1_000, c);
    s.hold_time = Duration::from_micros(100);
    s.waiting = 16;
    assert_eq!(Learned::policy(0, &s), WaitPolicy::new().yields(0));
    s.waiting = 1;
    assert_eq!(Learned::policy(0, &s), WaitPolicy::new());
    // Not crowded (one waiter on two CPUs), the same hold: every arm
    // but the restricted one is tried.
    let mut p = Learned::new();
    let mut explored = Vec::new();
    for _ in 0..ARMS as u32 * PROBE {
        explored.push(p.arm());
        let mut s = window(100, 1_000, c);
        s.hold_time = Duration::from_micros(100);
        c = p.adapt(&s).unwrap();
    }
    assert_eq!(explored[..12], [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
}

/// A lock held for a millisecond (a holder that sleeps in it): never
/// park is not even explored.
#[test]
fn learned_does_not_explore_never_park_for_long_holds() {
    let mut p = Learned::new();
    let mut c = Config::new();
    for _ in 0..100 {
        let mut s = window(100, 100_000, c);
        s.hold_time = Duration::from_millis(1);
        s.waiting = 16;
        c = p.adapt(&s).unwrap();
        assert!(p.arm() < 3, "never park explored: arm {}", p.arm());
        assert!(c.wait_policy().parks());
    }
}

/// Explores the four arms, keeps the fastest, and explores again
/// after keeping it for a while; keeps it twice as long once confirmed.
#[test]
fn learned_keeps_the_fastest_arm() {
    let mut p = Learned::new();
    let mut c = Config::new();
    // Arm 1 (long watch) gives 3x the acquisitions per µs.
    let rate = [10, 30, 5, 12];
    let step = |p: &mut Learned, c: &mut Config| {
        let arm = p.arm();
        *c = p.adapt(&window(rate[arm] * 10, 10, *c)).unwrap();
        arm
    };
    let explored: Vec<usize> = (0..12).map(|_| step(&mut p, &mut c)).collect();
    assert_eq!(explored, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    assert_eq!(p.arm(), 1);
    assert_eq!(c.wait_policy(), Learned::policy(1, &window(1, 1, c)));
    let kept = (0..MIN_EXPLOIT).map(|_| step(&mut p, &mut c));
    assert!(kept.into_iter().all(|a| a == 1));
    // Exploring again: the three slower arms (under 70% of the best's
    // rate) sit this one out, so only arm 1 is probed, then kept for
    // twice as long.
    let explored: Vec<usize> = (0..PROBE).map(|_| step(&mut p, &mut c)).collect();
    assert_eq!(explored, [1, 1, 1]);
    assert_eq!((p.arm(), p.keep_for), (1, 2 * MIN_EXPLOIT));
    (0..2 * MIN_EXPLOIT).for_each(|_| {
        step(&mut p, &mut c);
    });
    // The next exploration tries them all again; they then sit out two.
    let explored: Vec<usize> = (0..12).map(|_| step(&mut p, &mut c)).collect();
    assert_eq!(explored, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    assert_eq!(p.rest, [2, 0, 2, 2, 0]);
    // A change of load: windows at a tenth of the rate start an
    // exploration within a few windows (once the smoothed rate is
    // under half the kept arm's mean, twice), with the shortest keep;
    // one slow window does not.
    step(&mut p, &mut c);
    assert!(!p.exploring);
    let slow = |p: &mut Learned, c: &mut Config| {
        *c = p.adapt(&window(rate[p.arm()] * 10, 100, *c)).unwrap();
    };
    slow(&mut p, &mut c);
    step(&mut p, &mut c);
    step(&mut p, &mut c);
    assert!(!p.exploring);
    let mut n = 0;
    while !p.exploring {
        slow(&mut p, &mut c);
        n += 1;
        assert!(n <= 6, "a tenfold drop went unnoticed");
    }
    assert_eq!((p.arm(), p.keep_for, p.rest), (0, MIN_EXPLOIT, [0; ARMS]));
    // Windows without contention teach nothing.
    let before = p;
    let mut quiet = window(100, 10, c);
    quiet.window.contended = 0;
    p.adapt(&quiet);
    assert_eq!(p, before);
}

/// Windows whose rate is bimodal (a holder preempted or not, a wake-up
/// that lands on an idle CPU or not) for every arm: never park (arm 3)
/// runs at the lock's full rate in most windows, the others in fewer.
/// A challenger's three probes all fast are then a common draw, and,
/// compared with the kept arm's whole run (its slow windows included),
/// they won explorations often enough to keep a slower arm for much of
/// the time. Pooled with what earlier explorations saw of it, a
/// challenger's lucky draw weighs less, and the fastest arm stays in
/// force.
#[test]
fn learned_keeps_the_fastest_arm_through_bimodal_windows() {
    let mut p = Learned::new();
    let mut c = Config::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    // Percent of each arm's windows at the full rate (else half of it):
    // never park's windows take 13 µs on average, the others' 15.5-16.5.
    let fast = [35, 45, 35, 70, 40];
    let mut on_best = 0;
    let samples = 20_000;
    for _ in 0..samples {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let arm = p.arm();
        let micros = if seed % 100 < fast[arm] { 10 } else { 20 };
        let mut s = window(100, micros, c);
        s.waiting = 16;
        c = p.adapt(&s).unwrap();
        on_best += u32::from(arm == 3);
    }
    assert!(
        on_best * 100 >= samples * 90,
        "the fastest arm in force for {on_best} of {samples} samples"
    );
}
