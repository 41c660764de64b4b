//! Tasks' wakeups run one after another on a thread, never one inside
//! another past a small depth.
//!
//! A task's waker is user code, and it may use the primitive that woke it:
//! an executor that polls the task inside `wake` takes the lock (the
//! permits, the entry, the monitor) the task was woken for and releases
//! it, and that release wakes the next waiting task inside the first
//! waker. Run where they come up, those wakeups nest: one unlock runs every
//! queued task's waker one inside the other, on a stack as deep as the
//! queue (100,000 tasks queued on a lockfree-sync `Mutex` or `Semaphore`
//! overflowed an 8 MB stack and aborted the process), and so does a
//! pipeline of channels whose receiving tasks each send to the next. So
//! every task wakeup of the family ([`wake`], which
//! [`AtomicWaker::wake`](crate::waker::AtomicWaker::wake), a
//! [`Wakeup`](crate::waiter::Wakeup) and a [`Waiter`](crate::waiter::Waiter)'s
//! notify go through) nests at most [`NEST`] deep on a thread: one that
//! comes up deeper is queued on the thread, and the outermost runs it once
//! the current one returns. The stack stays shallow, and every wakeup still
//! runs before the outermost wakeup returns, on the same thread, so before
//! the outermost operation (the one whose wakeup is the outermost)
//! returns. An operation made inside a waker past [`NEST`] deep (an unlock
//! by a task polled there) returns before the wakeups it queued have run,
//! and so does a waker run from the queue before the wakeups queued behind
//! it. This holds in thread-locals' destructors too: the chain keeps
//! nothing in a thread-local that has a destructor of its own.
//!
//! Only tasks are concerned: a thread's unpark runs no user code.
//!
//! A panic of the outermost's waker or of a queued one does not stop the
//! wakeups still queued: the outermost runs every one of them first (none
//! inside an unwind, where a waker's task would see
//! [`std::thread::panicking`] and a lock it releases would not be
//! poisoned by its own panic), so that nobody sleeps for a wakeup it was
//! promised; then the first of those panics unwinds out of the outermost
//! wakeup, where the primitive's own catch (the family's panic policy,
//! [`crate::unwind`]) takes it as it takes that wakeup's own, and the
//! later ones are dropped.
//!
//! The trade-off: a wakeup that comes up past [`NEST`] runs only once the
//! waker running at depth 1 on this thread has returned. So a waker that
//! blocks until a task woken by its own work (its release, or a release
//! made by a waker it ran in turn) makes progress may wait for a wakeup
//! that is queued behind it, for ever; and so may a waker that the
//! outermost runs from the queue and that blocks until any task whose
//! wakeup is still queued behind it makes progress. A waker that does not
//! block, as wakers should not, is not concerned.
//!
//! Under loom every model thread's wakeups run where they come up: the
//! models hold no waker that re-enters the primitive.

use core::task::Waker;

/// How deep a thread's task wakeups may nest before they are queued
/// instead.
pub const NEST: u32 = 32;

/// Wakes `waker` (a task's) now, or, if this thread is already [`NEST`]
/// task wakeups deep, queues it for the outermost to run once the current
/// one returns (see the module docs).
///
/// # Panics
///
/// Resumes the panic of `waker`, or, when this is the outermost wakeup,
/// the first panic of `waker` and the wakers queued behind it, once all of
/// them have run (dropped instead if the thread is already unwinding: see
/// [`unwind`](crate::unwind), rule 3).
///
/// # Examples
///
/// ```
/// use std::task::Waker;
///
/// sync_core::wake_chain::wake(Waker::noop().clone());
/// ```
#[cfg(not(loom))]
pub fn wake(waker: Waker) {
    // `with`, not `try_with`: neither thread-local has a destructor, so
    // both are there in other thread-locals' destructors too.
    let depth = DEPTH.with(|depth| {
        let d = depth.get();
        if d & LEVELS < NEST {
            depth.set(d + 1);
        }
        d
    });
    match depth {
        0 => {
            // The outermost: runs what deeper wakeups queued, one after
            // another, each from depth 1 again, whichever of them panic,
            // and only then resumes the first panic.
            let outer = Outer;
            let mut panics = crate::unwind::Panics::new();
            panics.catch(|| run(waker));
            while let Some(next) = pop() {
                // The later panics are dropped at once: a long chain of
                // panicking wakers keeps none of them.
                if panics.is_empty() {
                    panics.catch(|| run(next));
                } else {
                    crate::unwind::catch_and_discard(|| run(next));
                }
            }
            drop(outer);
            panics.resume();
        }
        d if d & LEVELS < NEST => {
            let _level = Level;
            run(waker);
        }
        _ => {
            push(waker);
            DEPTH.with(|depth| depth.set(depth.get() | QUEUED));
        }
    }
}

/// Under loom: wakes where it comes up (see the module docs).
#[cfg(loom)]
pub fn wake(waker: Waker) {
    run(waker);
}

/// Has the thread's next [`before_park`] call `deliver` first: for a crate
/// that keeps task wakeups on a thread until it lets go of something (an
/// active monitor keeps them while a task body of one runs), and that must
/// deliver them before the thread parks in any of the family's blocking
/// waits, or the thread may wait for one of those very tasks for ever (a
/// body that set off a task and then waits, on a lockfree-sync channel, a
/// semaphore, a mutex or an ast-mutex entry, for that task's next step).
///
/// One function per thread: a second registration before the next
/// [`before_park`] replaces the first. `deliver` is taken out before it
/// runs, so it may register again (the tasks it wakes, polled in place,
/// may keep wakeups of their own): [`before_park`] then runs it again,
/// until nothing is registered. `deliver` must not unwind: a panic that
/// escapes it is dropped (see [`before_park`]).
///
/// # Examples
///
/// ```
/// fn deliver() {}
/// sync_core::wake_chain::deliver_before_park(deliver);
/// sync_core::wake_chain::before_park();
/// ```
#[cfg(not(loom))]
pub fn deliver_before_park(deliver: fn()) {
    BEFORE_PARK.with(|b| b.set(Some(deliver)));
}

/// Under loom: nothing is registered (a model's blocking waits deliver
/// nothing).
#[cfg(loom)]
pub fn deliver_before_park(deliver: fn()) {
    let _ = deliver;
}

/// Runs what [`deliver_before_park`] registered on this thread, if
/// anything, and again while running it registered more: every blocking
/// wait of the family calls it before it parks the thread (a wait that will
/// not park need not), so that nothing is kept on the thread while it
/// sleeps. A thread-local read when nothing is registered.
///
/// Never unwinds: the registered function must deal with its own user
/// code's panics (active-monitor keeps them for the operation they belong
/// to), and a panic that escapes it is dropped (its payload's drop too,
/// see [`unwind::catch_and_discard`](crate::unwind::catch_and_discard)).
/// It runs inside another primitive's blocking wait, which has nobody to
/// report it to: a wait that unwound there would leave a relock (a lock_api
/// guard's `unlocked` or `bump`) without its lock, or a wait half made.
#[cfg(not(loom))]
#[inline]
pub fn before_park() {
    while let Some(deliver) = BEFORE_PARK.with(core::cell::Cell::take) {
        deliver_out_of_line(deliver);
    }
}

/// Runs a registered delivery, dropping a panic that escapes it (see
/// [`before_park`]); out of line, off the waits' paths.
#[cfg(not(loom))]
#[inline(never)]
fn deliver_out_of_line(deliver: fn()) {
    crate::unwind::catch_and_discard(deliver);
}

/// Under loom: nothing to run.
#[cfg(loom)]
#[inline]
pub fn before_park() {}

/// Has every task wakeup of the family, on every thread, run inside
/// `around` from now on: `around` gets the wakeup to run (call it once).
/// For a crate that keeps per-thread state about the user code running
/// (active-monitor's program order: which submitter a submission belongs
/// to), so that a task an executor polls inside `wake` is not taken for
/// the code that woke it (a monitor's task body that released a lock the
/// task waited for). Set once per process; a later call is ignored.
///
/// # Examples
///
/// ```
/// fn around(wake: &mut dyn FnMut()) {
///     wake();
/// }
/// sync_core::wake_chain::run_wakeups_in(around);
/// sync_core::wake_chain::wake(std::task::Waker::noop().clone());
/// ```
pub fn run_wakeups_in(around: fn(&mut dyn FnMut())) {
    let _ = AROUND.set(around);
}

/// What [`run_wakeups_in`] set.
static AROUND: std::sync::OnceLock<fn(&mut dyn FnMut())> = std::sync::OnceLock::new();

/// Runs one wakeup, inside what [`run_wakeups_in`] set if anything. The
/// wrapped path is out of line: inlined at every wakeup of the family, it
/// made the wakeup paths (and code around them) measurably slower.
#[inline]
fn run(waker: Waker) {
    match AROUND.get() {
        None => waker.wake(),
        Some(&around) => run_around(around, waker),
    }
}

/// [`run`] inside `around`.
#[inline(never)]
fn run_around(around: fn(&mut dyn FnMut()), waker: Waker) {
    let mut waker = Some(waker);
    around(&mut || {
        if let Some(w) = waker.take() {
            w.wake();
        }
    });
}

/// `DEPTH`'s bit that says `LATER` may hold wakeups: the outermost looks
/// at `LATER` only then.
#[cfg(not(loom))]
const QUEUED: u32 = 1 << 31;
/// `DEPTH`'s bits that count the nested wakeups.
#[cfg(not(loom))]
const LEVELS: u32 = !QUEUED;

/// The wakeups a thread queued past `NEST`, oldest first.
#[cfg(not(loom))]
type Queue = std::collections::VecDeque<Waker>;

// Neither thread-local has a destructor, so both stay usable in the
// destructors of other thread-locals: an unlock there reaches a queue of
// tasks as anywhere else. (A queue kept in a thread-local with a destructor
// was gone once that destructor had run, and the wakeups past `NEST` then
// nested where they came up, without bound: a stack overflow.)
#[cfg(not(loom))]
std::thread_local! {
    /// How many task wakeups this thread is running, one inside the other
    /// (at most `NEST`), and `QUEUED`.
    static DEPTH: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    /// The wakeups queued past `NEST` (null: none queued): allocated by
    /// the first one a chain queues, freed by the outermost when it ends,
    /// so that nothing is left for a destructor. Touched only to push or
    /// pop, never while a waker runs.
    static LATER: core::cell::Cell<*mut Queue> = const { core::cell::Cell::new(core::ptr::null_mut()) };
    /// What [`before_park`] runs next (see [`deliver_before_park`]).
    static BEFORE_PARK: core::cell::Cell<Option<fn()>> = const { core::cell::Cell::new(None) };
}

/// Queues `waker` for the outermost wakeup to run.
#[cfg(not(loom))]
fn push(waker: Waker) {
    LATER.with(|later| {
        let mut queue = later.get();
        if queue.is_null() {
            queue = Box::into_raw(Box::default());
            later.set(queue);
        }
        // SAFETY: the queue is this thread's, allocated above or by an
        // earlier push of this chain and freed only by `free_queue`; nothing
        // else touches it while we push (no user code runs here).
        unsafe { (*queue).push_back(waker) };
    });
}

/// The next queued wakeup, if `QUEUED` says there may be one. (`QUEUED`
/// stays set until the outermost ends, which then frees the queue.)
#[cfg(not(loom))]
fn pop() -> Option<Waker> {
    if DEPTH.with(|depth| depth.get() & QUEUED == 0) {
        return None;
    }
    let queue = LATER.with(core::cell::Cell::get);
    if queue.is_null() {
        return None;
    }
    // SAFETY: as in `push`; the waker is run after this returns.
    unsafe { (*queue).pop_front() }
}

/// Frees this thread's queue, empty by now.
#[cfg(not(loom))]
fn free_queue() {
    let queue = LATER.with(|later| later.replace(core::ptr::null_mut()));
    if !queue.is_null() {
        // SAFETY: allocated by `push` with `Box::into_raw` and taken out of
        // the thread-local above, so freed once. Empty: its drop runs no
        // user code.
        drop(unsafe { Box::from_raw(queue) });
    }
}

/// Leaves a nested wakeup's level, also when its waker unwinds.
#[cfg(not(loom))]
struct Level;

#[cfg(not(loom))]
impl Drop for Level {
    fn drop(&mut self) {
        DEPTH.with(|depth| {
            let d = depth.get();
            depth.set(d & QUEUED | (d & LEVELS).saturating_sub(1));
        });
    }
}

/// Ends the outermost wakeup: runs what is still queued, dropping their
/// panics (only if the chain itself unwound, which no waker's panic does:
/// the outermost catches them); frees
/// the queue (memory follows the chain running now, and a thread's exit
/// finds nothing to free); and resets the depth.
#[cfg(not(loom))]
struct Outer;

#[cfg(not(loom))]
impl Drop for Outer {
    fn drop(&mut self) {
        if DEPTH.with(|depth| depth.get() & QUEUED != 0) {
            while let Some(next) = pop() {
                crate::unwind::catch_and_discard(move || run(next));
            }
            free_queue();
        }
        DEPTH.with(|depth| depth.set(0));
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Arc;
    use crate::unwind::Panics;
    use crate::waiter::Waiter;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::task::{Wake, Waker};

    /// A task whose waker wakes the next task's waiter (as an inline
    /// executor whose task releases what the next one waits for), and
    /// records the stack depth it ran at.
    struct Link {
        next: std::sync::Mutex<Option<Arc<Waiter>>>,
        ran: Arc<AtomicUsize>,
        deepest: Arc<AtomicUsize>,
        base: usize,
    }

    impl Wake for Link {
        fn wake(self: std::sync::Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            let here = 0u8;
            let depth = self.base.saturating_sub(&here as *const u8 as usize);
            self.deepest.fetch_max(depth, SeqCst);
            self.ran.fetch_add(1, SeqCst);
            if let Some(next) = self.next.lock().unwrap().take() {
                if let Some(w) = Waiter::notify_later(&next, 1) {
                    w.wake();
                }
            }
        }
    }

    /// `tasks` task waiters, built from the last: `make` gets the waiter
    /// after the one it makes the waker of. Returns the first.
    fn chain<W: Wake + Send + Sync + 'static>(
        tasks: usize,
        mut make: impl FnMut(Option<Arc<Waiter>>) -> W,
    ) -> Arc<Waiter> {
        let mut next = None;
        for _ in 0..tasks {
            let waker = Waker::from(std::sync::Arc::new(make(next.take())));
            next = Some(Waiter::for_task(&waker, 0));
        }
        next.expect("a first task")
    }

    #[test]
    fn a_chain_of_task_wakeups_runs_every_one_on_a_shallow_stack() {
        const TASKS: usize = 10_000;
        let ran = Arc::new(AtomicUsize::new(0));
        let deepest = Arc::new(AtomicUsize::new(0));
        let here = 0u8;
        let base = &here as *const u8 as usize;
        let first = chain(TASKS, |next| Link {
            next: std::sync::Mutex::new(next),
            ran: Arc::clone(&ran),
            deepest: Arc::clone(&deepest),
            base,
        });
        let mut panics = Panics::new();
        panics.catch(|| {
            Waiter::notify_later(&first, 1)
                .expect("not cancelled")
                .wake()
        });
        panics.resume();
        assert_eq!(ran.load(SeqCst), TASKS, "every wakeup ran");
        // NEST nested wakeups of a few frames each, not TASKS of them.
        assert!(
            deepest.load(SeqCst) < 256 * 1024,
            "the chain nested {} bytes deep",
            deepest.load(SeqCst)
        );
        assert_eq!(DEPTH.with(|d| d.get()), 0, "the depth is reset");
    }

    /// A plain waker that wakes the next through [`wake`] (as an
    /// executor's task that calls a primitive whose wakers are its own
    /// list, not `Waiter`s).
    struct Plain {
        next: std::sync::Mutex<Option<Waker>>,
        ran: Arc<AtomicUsize>,
        deepest: Arc<AtomicUsize>,
        base: usize,
    }

    impl Wake for Plain {
        fn wake(self: std::sync::Arc<Self>) {
            let here = 0u8;
            let depth = self.base.saturating_sub(&here as *const u8 as usize);
            self.deepest.fetch_max(depth, SeqCst);
            self.ran.fetch_add(1, SeqCst);
            if let Some(next) = self.next.lock().unwrap().take() {
                wake(next);
            }
        }
    }

    #[test]
    fn what_is_registered_runs_at_the_next_park_and_again_if_it_registered_again() {
        static RAN: AtomicUsize = AtomicUsize::new(0);
        fn deliver() {
            // The second run registers again, as a delivery that kept
            // more would.
            if RAN.fetch_add(1, SeqCst) == 1 {
                deliver_before_park(deliver);
            }
        }
        before_park();
        assert_eq!(RAN.load(SeqCst), 0, "nothing registered, nothing ran");
        deliver_before_park(deliver);
        deliver_before_park(deliver);
        before_park();
        assert_eq!(RAN.load(SeqCst), 1, "one registration, one run");
        before_park();
        assert_eq!(RAN.load(SeqCst), 1, "taken out by its run");
        deliver_before_park(deliver);
        // One park: a thread must not sleep with what its delivery kept.
        before_park();
        assert_eq!(
            RAN.load(SeqCst),
            3,
            "registered again by its run: run again"
        );
        before_park();
        assert_eq!(RAN.load(SeqCst), 3);
    }

    #[test]
    fn a_delivery_that_panics_does_not_unwind_out_of_the_wait_it_runs_in() {
        static RAN: AtomicUsize = AtomicUsize::new(0);
        fn deliver() {
            // The first run registers again, then panics with a payload
            // whose own drop panics: neither comes out, and the second
            // registration still runs.
            if RAN.fetch_add(1, SeqCst) == 0 {
                deliver_before_park(deliver);
                std::panic::panic_any(crate::testing::DropBomb(std::sync::Arc::clone(&BOMBS)));
            }
        }
        static BOMBS: std::sync::LazyLock<std::sync::Arc<AtomicUsize>> =
            std::sync::LazyLock::new(Default::default);
        deliver_before_park(deliver);
        before_park();
        assert_eq!(
            RAN.load(SeqCst),
            2,
            "the delivery registered again before its panic"
        );
        assert_eq!(BOMBS.load(SeqCst), 1, "the payload was dropped");
        before_park();
        assert_eq!(RAN.load(SeqCst), 2);
    }

    #[test]
    fn a_chain_of_plain_wakers_runs_every_one_on_a_shallow_stack_twice() {
        const TASKS: usize = 10_000;
        let here = 0u8;
        let base = &here as *const u8 as usize;
        // Twice: what the first chain queued leaves nothing behind.
        for _ in 0..2 {
            let ran = Arc::new(AtomicUsize::new(0));
            let deepest = Arc::new(AtomicUsize::new(0));
            let mut next: Option<Waker> = None;
            for _ in 0..TASKS {
                next = Some(Waker::from(std::sync::Arc::new(Plain {
                    next: std::sync::Mutex::new(next.take()),
                    ran: Arc::clone(&ran),
                    deepest: Arc::clone(&deepest),
                    base,
                })));
            }
            wake(next.expect("a first waker"));
            assert_eq!(ran.load(SeqCst), TASKS, "every wakeup ran");
            assert!(
                deepest.load(SeqCst) < 256 * 1024,
                "the chain nested {} bytes deep",
                deepest.load(SeqCst)
            );
            assert_eq!(DEPTH.with(|d| d.get()), 0, "the depth is reset");
            assert!(LATER.with(|l| l.get().is_null()), "the queue is freed");
        }
    }

    /// A chain of `TASKS` plain wakers, the first woken here; returns
    /// how deep below this frame the stack went.
    fn run_plain_chain(tasks: usize, ran: &Arc<AtomicUsize>) -> usize {
        let here = 0u8;
        let base = &here as *const u8 as usize;
        let deepest = Arc::new(AtomicUsize::new(0));
        let mut next: Option<Waker> = None;
        for _ in 0..tasks {
            next = Some(Waker::from(std::sync::Arc::new(Plain {
                next: std::sync::Mutex::new(next.take()),
                ran: Arc::clone(ran),
                deepest: Arc::clone(&deepest),
                base,
            })));
        }
        wake(next.expect("a first waker"));
        deepest.load(SeqCst)
    }

    #[test]
    fn a_chain_in_a_thread_local_destructor_runs_on_a_shallow_stack_too() {
        const TASKS: usize = 10_000;
        static RAN: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();
        static DEEPEST: AtomicUsize = AtomicUsize::new(0);
        struct WakesAChain;
        impl Drop for WakesAChain {
            fn drop(&mut self) {
                let deepest = run_plain_chain(TASKS, RAN.get().expect("set"));
                DEEPEST.store(deepest, SeqCst);
            }
        }
        std::thread_local! {
            static AT_EXIT: WakesAChain = const { WakesAChain };
        }
        let ran = Arc::clone(RAN.get_or_init(|| Arc::new(AtomicUsize::new(0))));
        // Room for every wakeup nested (an old chain, whose queue was a
        // thread-local dropped with the thread, ran them in place there),
        // so that the test fails on the depth, not on an overflow.
        crate::testing::on_small_stack("a chain at thread exit", 256 << 20, || {
            // Its destructor registered first, so it runs after those of
            // thread-locals first used later, as the chain's queue below.
            AT_EXIT.with(|_| {});
            // A chain deep enough to queue.
            let ran = Arc::new(AtomicUsize::new(0));
            run_plain_chain(4 * NEST as usize, &ran);
            assert_eq!(ran.load(SeqCst), 4 * NEST as usize);
        });
        assert_eq!(ran.load(SeqCst), TASKS, "every wakeup ran");
        assert!(
            DEEPEST.load(SeqCst) < 256 * 1024,
            "the chain nested {} bytes deep",
            DEEPEST.load(SeqCst)
        );
    }

    #[test]
    fn a_wakers_panic_leaves_the_outermost_wakeup_once_every_queued_one_ran() {
        struct Panicky {
            next: std::sync::Mutex<Option<Arc<Waiter>>>,
            ran: Arc<AtomicUsize>,
            unwinding: Arc<AtomicUsize>,
            panic_at: usize,
        }
        impl Wake for Panicky {
            fn wake(self: std::sync::Arc<Self>) {
                self.wake_by_ref();
            }
            fn wake_by_ref(self: &std::sync::Arc<Self>) {
                if std::thread::panicking() {
                    self.unwinding.fetch_add(1, SeqCst);
                }
                let n = self.ran.fetch_add(1, SeqCst);
                if let Some(next) = self.next.lock().unwrap().take() {
                    if let Some(w) = Waiter::notify_later(&next, 1) {
                        w.wake();
                    }
                }
                assert!(n != self.panic_at, "waker {n} panics");
            }
        }
        const TASKS: usize = 200;
        // The outermost's own waker, and a queued one (past NEST), each
        // after its wakeup went NEST deep and queued the next.
        for panic_at in [0, 100] {
            let ran = Arc::new(AtomicUsize::new(0));
            let unwinding = Arc::new(AtomicUsize::new(0));
            let first = chain(TASKS, |next| Panicky {
                next: std::sync::Mutex::new(next),
                ran: Arc::clone(&ran),
                unwinding: Arc::clone(&unwinding),
                panic_at,
            });
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Waiter::notify_later(&first, 1)
                    .expect("not cancelled")
                    .wake()
            }));
            let payload = caught.expect_err("the waker's panic left the outermost");
            assert_eq!(
                payload.downcast_ref::<String>().map(String::as_str),
                Some(format!("waker {panic_at} panics").as_str())
            );
            assert_eq!(ran.load(SeqCst), TASKS, "every wakeup ran all the same");
            assert_eq!(
                unwinding.load(SeqCst),
                0,
                "wakeups ran inside the unwind of another waker's panic ({panic_at})"
            );
            assert_eq!(DEPTH.with(|d| d.get()), 0, "the depth is reset");
        }
    }
}
