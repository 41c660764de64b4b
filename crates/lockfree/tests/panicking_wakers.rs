//! A task's waker is user code and may panic. Every drop of this crate that
//! wakes a task (a channel end, a mutex guard, a lock future passing the
//! lock or a wakeup on, a permit, an acquire future), and every channel
//! operation that does (a send, a receive, a select, a receiver's yield,
//! called from a user's `Drop`), follows the family's panic policy
//! (`sync_core::unwind`): the primitive is consistent first
//! (the woken task holds its token), then the panic goes on, unless the
//! thread is already unwinding: a panic out of a drop during unwinding
//! aborts the process, so the waker's panic is dropped instead.
//!
//! The "while unwinding" cases run in a child process (this test binary,
//! re-run on that one test), so that an abort fails the test instead of
//! killing the harness. The mpsc receiver's drop, which runs the queued
//! messages' `Drop`s (user code too), follows the same policy.
#![cfg(not(loom))]

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use lockfree_sync::{Fairness, LockApiMutex, Mutex, Semaphore, csp, mpsc};
use sync_core::testing::HostileWaker;

/// A waker that panics when woken while armed.
struct Armed(AtomicBool);

impl Wake for Armed {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.0.load(SeqCst) {
            panic!("a task's waker panicked");
        }
    }
}

fn armed_waker() -> (Arc<Armed>, Waker) {
    let armed = Arc::new(Armed(AtomicBool::new(false)));
    (armed.clone(), Waker::from(armed))
}

impl Armed {
    fn arm(&self) {
        self.0.store(true, SeqCst);
    }

    fn disarm(&self) {
        self.0.store(false, SeqCst);
    }

    /// Drops `value` with the waker armed, while unwinding from another
    /// panic or not, and checks the panic that comes out.
    fn drop_armed<T>(&self, value: T, while_unwinding: bool) {
        self.arm();
        if while_unwinding {
            sync_core::testing::drop_while_unwinding(value);
        } else {
            drop_resumes_the_wakers_panic(value);
        }
        self.disarm();
    }
}

/// Runs `f` in a child process: this test binary, re-run on `test` alone.
fn in_child(test: &str, f: impl FnOnce()) {
    sync_core::testing::in_child("LOCKFREE_PANICKING_WAKERS_CHILD", test, f);
}

/// Runs `f` outside any panic: a task's waker panics in it, and that panic
/// goes on out of `f`.
fn resumes_the_wakers_panic<R>(f: impl FnOnce() -> R) {
    let r = catch_unwind(AssertUnwindSafe(f));
    let payload = r.err().expect("the waker's panic was lost");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a task's waker panicked")
    );
}

/// Drops `value` outside any panic: the waker's panic goes on.
fn drop_resumes_the_wakers_panic<T>(value: T) {
    resumes_the_wakers_panic(move || drop(value));
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(waker))
}

// ---- mpsc: the last sender's drop wakes a receiving task ----

fn mpsc_last_sender(while_unwinding: bool) {
    let (tx, mut rx) = mpsc::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut cx = Context::from_waker(&waker);
    // The first poll yields to the executor, the second publishes the waker.
    assert!(rx.poll_recv(&mut cx).is_pending());
    assert!(rx.poll_recv(&mut cx).is_pending());
    armed.drop_armed(tx, while_unwinding);
    assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected));
    assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(None));
}

#[test]
fn mpsc_last_sender_dropped_while_unwinding() {
    in_child("mpsc_last_sender_dropped_while_unwinding", || {
        mpsc_last_sender(true);
    });
}

#[test]
fn mpsc_last_sender_dropped_resumes_the_wakers_panic() {
    mpsc_last_sender(false);
}

// ---- csp: either end's drop wakes the other's task (or an Alt's) ----

fn csp_sender_drop(while_unwinding: bool) {
    let (tx, mut rx) = csp::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut recv = Box::pin(rx.recv_async());
    assert!(poll(recv.as_mut(), &waker).is_pending());
    armed.drop_armed(tx, while_unwinding);
    assert_eq!(
        poll(recv.as_mut(), &waker),
        Poll::Ready(Err(csp::RecvError))
    );
}

#[test]
fn csp_sender_dropped_while_unwinding() {
    in_child("csp_sender_dropped_while_unwinding", || {
        csp_sender_drop(true)
    });
}

#[test]
fn csp_sender_dropped_resumes_the_wakers_panic() {
    csp_sender_drop(false);
}

fn csp_receiver_drop(while_unwinding: bool) {
    let (mut tx, rx) = csp::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut send = Box::pin(tx.send_async(5));
    assert!(poll(send.as_mut(), &waker).is_pending());
    armed.drop_armed(rx, while_unwinding);
    // The value comes back: the panic lost nothing.
    assert_eq!(
        poll(send.as_mut(), &waker),
        Poll::Ready(Err(csp::SendError(5)))
    );
}

#[test]
fn csp_receiver_dropped_while_unwinding() {
    in_child("csp_receiver_dropped_while_unwinding", || {
        csp_receiver_drop(true);
    });
}

#[test]
fn csp_receiver_dropped_resumes_the_wakers_panic() {
    csp_receiver_drop(false);
}

fn csp_alt(while_unwinding: bool) {
    let (tx1, mut rx1) = csp::channel::<u8>();
    let (_tx2, mut rx2) = csp::channel::<u8>();
    let mut alt = csp::Alt::new(vec![&mut rx1, &mut rx2]);
    let (armed, waker) = armed_waker();
    let mut select = Box::pin(alt.select_async());
    assert!(poll(select.as_mut(), &waker).is_pending());
    // The closing sender claims the Alt and wakes its task.
    armed.drop_armed(tx1, while_unwinding);
    assert_eq!(
        poll(select.as_mut(), &waker),
        Poll::Ready((0, Err(csp::RecvError)))
    );
}

#[test]
fn csp_alt_sender_dropped_while_unwinding() {
    in_child("csp_alt_sender_dropped_while_unwinding", || csp_alt(true));
}

#[test]
fn csp_alt_sender_dropped_resumes_the_wakers_panic() {
    csp_alt(false);
}

// ---- Mutex: a guard's drop wakes the next waiting task ----

fn mutex_guard_drop(while_unwinding: bool) {
    let m = Mutex::new(0);
    let g = m.lock();
    let (armed, waker) = armed_waker();
    let mut lock = Box::pin(m.lock_async());
    assert!(poll(lock.as_mut(), &waker).is_pending());
    armed.drop_armed(g, while_unwinding);
    // The wakeup was delivered: the task takes the lock.
    let Poll::Ready(mut g) = poll(lock.as_mut(), &waker) else {
        panic!("the woken task did not get the lock");
    };
    *g += 1;
    drop(g);
    assert_eq!(*m.lock(), 1);
}

#[test]
fn mutex_guard_dropped_while_unwinding() {
    in_child("mutex_guard_dropped_while_unwinding", || {
        mutex_guard_drop(true);
    });
}

#[test]
fn mutex_guard_dropped_resumes_the_wakers_panic() {
    mutex_guard_drop(false);
}

/// A lock future that had been woken to compete is dropped: it passes the
/// wakeup on to the next waiting task, whose waker panics.
fn woken_lock_future_drop(while_unwinding: bool) {
    let m = Mutex::new(0);
    let g = m.lock();
    let (armed, waker) = armed_waker();
    let mut first = Box::pin(m.lock_async());
    assert!(poll(first.as_mut(), Waker::noop()).is_pending());
    let mut second = Box::pin(m.lock_async());
    assert!(poll(second.as_mut(), &waker).is_pending());
    // Wakes `first` to compete (its waker is a no-op).
    drop(g);
    armed.drop_armed(first, while_unwinding);
    // The wakeup reached `second`, which takes the lock.
    let Poll::Ready(g) = poll(second.as_mut(), &waker) else {
        panic!("the wakeup passed on was lost");
    };
    drop(g);
    assert!(m.try_lock().is_some());
}

#[test]
fn woken_lock_future_dropped_while_unwinding() {
    in_child("woken_lock_future_dropped_while_unwinding", || {
        woken_lock_future_drop(true);
    });
}

#[test]
fn woken_lock_future_dropped_resumes_the_wakers_panic() {
    woken_lock_future_drop(false);
}

/// lock_api's `unlock_fair` over this crate's `RawMutex`, with a task
/// waiting on the same raw lock whose waker panics: the raw unlock must
/// not unwind (lock_api would skip its `mem::forget` and unlock a second
/// time, freeing the lock the task was just handed).
#[test]
fn lock_api_unlock_never_unwinds() {
    let m = LockApiMutex::new(0);
    let g = m.lock();
    // SAFETY: the raw lock is only locked and unlocked through its API.
    let raw = unsafe { m.raw() };
    let (armed, waker) = armed_waker();
    let mut lock = Box::pin(raw.lock_async());
    assert!(poll(lock.as_mut(), &waker).is_pending());
    armed.arm();
    let r = catch_unwind(AssertUnwindSafe(|| {
        lock_api::MutexGuard::unlock_fair(g);
    }));
    armed.disarm();
    assert!(r.is_ok(), "a raw unlock unwound");
    // Handed to the task, and held by it alone.
    assert_eq!(poll(lock.as_mut(), &waker), Poll::Ready(()));
    assert!(m.try_lock().is_none(), "the lock was released twice");
    // SAFETY: the task's future resolved: it holds the lock.
    unsafe { raw.unlock() };
    assert!(m.try_lock().is_some());
}

/// Formatting a free barging mutex with tasks queued takes and releases
/// the lock, and the release may wake a queued task. That wakeup is owed
/// to the task, not to the formatting: a panic of its waker is dropped
/// (as `AstMutex`'s `Debug` does), and the woken task gets the lock.
#[test]
fn formatting_a_mutex_never_unwinds_with_a_tasks_waker_panic() {
    let m = Mutex::with_fairness(0, Fairness::Barging);
    let g = m.lock();
    let (_calm, calm_waker) = armed_waker();
    let (armed, waker) = armed_waker();
    let mut first = Box::pin(m.lock_async());
    assert!(poll(first.as_mut(), &calm_waker).is_pending());
    let mut second = Box::pin(m.lock_async());
    assert!(poll(second.as_mut(), &waker).is_pending());
    // The unlock wakes the first task to compete; the lock is free, the
    // second still queued.
    drop(g);
    armed.arm();
    let mut woke_second = false;
    for _ in 0..4 {
        let r = catch_unwind(AssertUnwindSafe(|| format!("{m:?}")));
        let text = r.expect("formatting the mutex unwound with a task's waker panic");
        assert!(text.contains("data: 0"), "{text}");
        woke_second |= matches!(poll(second.as_mut(), &waker), Poll::Ready(_));
        if woke_second {
            break;
        }
    }
    armed.disarm();
    drop(first);
    // Nothing lost: the second task gets the lock (now, or when polled).
    if !woke_second {
        assert!(matches!(poll(second.as_mut(), &waker), Poll::Ready(_)));
    }
    drop(second);
    assert!(m.try_lock().is_some());
}

// ---- Semaphore: a permit's drop and an acquire future's drop ----

fn permit_drop(while_unwinding: bool) {
    let sem = Semaphore::new(1);
    let p = sem.try_acquire().unwrap();
    let (armed, waker) = armed_waker();
    let mut acquire = Box::pin(sem.acquire_async());
    assert!(poll(acquire.as_mut(), &waker).is_pending());
    armed.drop_armed(p, while_unwinding);
    let Poll::Ready(Ok(p)) = poll(acquire.as_mut(), &waker) else {
        panic!("the permit delivered was lost");
    };
    drop(p);
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn permit_dropped_while_unwinding() {
    in_child("permit_dropped_while_unwinding", || permit_drop(true));
}

#[test]
fn permit_dropped_resumes_the_wakers_panic() {
    permit_drop(false);
}

/// The head of the queue (waiting for 2 permits, 1 kept for it) is
/// withdrawn: its drop delivers the kept permit to the next task, whose
/// waker panics.
fn acquire_future_drop(while_unwinding: bool) {
    let sem = Semaphore::new(0);
    let mut head = Box::pin(sem.acquire_many_async(2));
    assert!(poll(head.as_mut(), Waker::noop()).is_pending());
    let (armed, waker) = armed_waker();
    let mut next = Box::pin(sem.acquire_async());
    assert!(poll(next.as_mut(), &waker).is_pending());
    sem.add_permits(1); // kept for the head
    armed.drop_armed(head, while_unwinding);
    let Poll::Ready(Ok(p)) = poll(next.as_mut(), &waker) else {
        panic!("the permit delivered was lost");
    };
    drop(p);
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn acquire_future_dropped_while_unwinding() {
    in_child("acquire_future_dropped_while_unwinding", || {
        acquire_future_drop(true);
    });
}

#[test]
fn acquire_future_dropped_resumes_the_wakers_panic() {
    acquire_future_drop(false);
}

// ---- mpsc: the receiver's drop runs the messages' `Drop`s ----

/// Panics when dropped, after counting.
struct PanicsOnDrop(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("a message's drop panicked");
    }
}

/// The receiver is dropped while the thread unwinds, with queued messages
/// whose drops panic: every message is dropped, and their panics are
/// dropped too (the drain used to let the first one unwind out of the
/// receiver's drop: an abort during unwinding).
#[test]
fn mpsc_receiver_dropped_while_unwinding_with_panicking_messages() {
    in_child(
        "mpsc_receiver_dropped_while_unwinding_with_panicking_messages",
        || {
            let drops = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (tx, rx) = mpsc::channel();
            for _ in 0..3 {
                tx.send(PanicsOnDrop(drops.clone())).unwrap();
            }
            sync_core::testing::drop_while_unwinding(rx);
            assert_eq!(drops.load(SeqCst), 3, "messages left undropped");
            drop(tx);
            assert_eq!(drops.load(SeqCst), 3);
        },
    );
}

// ---- a dropped future's own waker panics when it is dropped ----

/// Drops `value`, whose drop drops a `HostileWaker` armed to panic: outside
/// a panic the waker's panic goes on; while unwinding it is dropped.
fn drop_with_hostile_waker<T>(value: T, while_unwinding: bool) {
    if while_unwinding {
        sync_core::testing::drop_while_unwinding(value);
        return;
    }
    let r = catch_unwind(AssertUnwindSafe(move || drop(value)));
    let payload = r.expect_err("the waker's panic was lost");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"HostileWaker: drop panics")
    );
}

/// The head request (2 permits, the 1 free one kept for it) is dropped, and
/// withdrawing drops its waker, which panics: the withdrawal is finished
/// first, so the kept permit is free again (it was stuck until the next
/// `add_permits`).
fn acquire_future_with_waker_drop_panic(while_unwinding: bool) {
    let sem = Semaphore::new(1);
    let hostile = HostileWaker::new();
    let mut head = Box::pin(sem.acquire_many_async(2));
    assert!(poll(head.as_mut(), &hostile.waker()).is_pending());
    assert_eq!(
        sem.available_permits(),
        0,
        "the free permit is kept for the head"
    );
    hostile.panic_on_drops(1);
    drop_with_hostile_waker(head, while_unwinding);
    assert_eq!(
        sem.available_permits(),
        1,
        "the permit kept for the head is stuck"
    );
    let p = sem.try_acquire().expect("the permit is free again");
    drop(p);
    // And the semaphore still queues and serves.
    let mut next = Box::pin(sem.acquire_many_async(2));
    assert!(poll(next.as_mut(), Waker::noop()).is_pending());
    sem.add_permits(1);
    assert!(matches!(
        poll(next.as_mut(), Waker::noop()),
        Poll::Ready(Ok(_))
    ));
}

#[test]
fn acquire_future_whose_waker_drop_panics_frees_the_kept_permit() {
    acquire_future_with_waker_drop_panic(false);
}

#[test]
fn acquire_future_whose_waker_drop_panics_while_unwinding() {
    in_child(
        "acquire_future_whose_waker_drop_panics_while_unwinding",
        || {
            acquire_future_with_waker_drop_panic(true);
        },
    );
}

/// A queued lock future is dropped, and withdrawing drops its waker, which
/// panics: the withdrawal is finished (the node is reclaimed), and the
/// lock still passes to the next waiter. (The node left behind is measured
/// in `memory.rs`.)
fn lock_future_with_waker_drop_panic(while_unwinding: bool) {
    for fairness in [Fairness::Barging, Fairness::Fifo] {
        let m = Mutex::with_fairness(0u32, fairness);
        let held = m.lock();
        let hostile = HostileWaker::new();
        let mut leaving = Box::pin(m.lock_async());
        assert!(poll(leaving.as_mut(), &hostile.waker()).is_pending());
        hostile.panic_on_drops(1);
        drop_with_hostile_waker(leaving, while_unwinding);
        let next = HostileWaker::new();
        let mut waiting = Box::pin(m.lock_async());
        assert!(poll(waiting.as_mut(), &next.waker()).is_pending());
        drop(held);
        assert_eq!(
            next.wakes(),
            1,
            "{fairness:?}: the next waiter was not woken"
        );
        let Poll::Ready(mut g) = poll(waiting.as_mut(), &next.waker()) else {
            panic!("{fairness:?}: the lock did not pass to the next waiter");
        };
        *g += 1;
        drop(g);
        assert_eq!(*m.try_lock().expect("free"), 1);
    }
}

#[test]
fn lock_future_whose_waker_drop_panics_is_withdrawn() {
    lock_future_with_waker_drop_panic(false);
}

#[test]
fn lock_future_whose_waker_drop_panics_while_unwinding() {
    in_child(
        "lock_future_whose_waker_drop_panics_while_unwinding",
        || {
            lock_future_with_waker_drop_panic(true);
        },
    );
}

/// A queued lock future re-polled with a waker whose clone panics keeps its
/// old waker: the unlock that hands it the lock (FIFO) wakes it through
/// that, instead of handing the lock to a task nobody wakes.
#[test]
fn lock_future_repolled_with_a_waker_whose_clone_panics_is_still_woken() {
    let m = Mutex::with_fairness(0u32, Fairness::Fifo);
    let held = m.lock();
    let first = HostileWaker::new();
    let mut fut = Box::pin(m.lock_async());
    assert!(poll(fut.as_mut(), &first.waker()).is_pending());
    let bad = HostileWaker::new();
    bad.panic_on_clones(1);
    let r = catch_unwind(AssertUnwindSafe(|| {
        poll(fut.as_mut(), &bad.waker()).is_pending()
    }));
    assert!(r.is_err(), "the clone's panic goes on");
    drop(held);
    assert_eq!(
        first.wakes(),
        1,
        "the lock was handed to a task nobody woke"
    );
    let Poll::Ready(g) = poll(fut.as_mut(), &first.waker()) else {
        panic!("the lock was not handed over");
    };
    drop(g);
    assert!(!m.is_locked());
}

/// The receiver is dropped with a task's waiter still published, whose
/// waker panics when withdrawn: the drop still closes the channel (later
/// sends fail), then the panic goes on.
#[test]
fn mpsc_receiver_dropped_with_a_waker_whose_drop_panics_still_closes() {
    let (tx, mut rx) = mpsc::channel::<u32>();
    let hostile = HostileWaker::new();
    // The first empty poll yields; the next publishes the task's waiter.
    for _ in 0..4 {
        assert!(
            rx.poll_recv(&mut Context::from_waker(&hostile.waker()))
                .is_pending()
        );
    }
    hostile.panic_on_drops(1);
    drop_with_hostile_waker(rx, false);
    assert_eq!(
        tx.send(1),
        Err(mpsc::SendError(1)),
        "the channel was not closed"
    );
}

/// A receiving task re-polled with a waker whose clone panics keeps its
/// published waiter recorded: dropping the future then withdraws it (and
/// drops the old waker at once), and the receiver's drop, whose waker
/// panics when dropped, still closes the channel. Before, the poll took the
/// waiter out of the receiver and lost it to the panic, leaving it in the
/// channel: the cancelled future's waker lived on, and the receiver's drop
/// ran its `Drop` outside the panic policy, before closing.
#[test]
fn mpsc_receiver_repolled_with_a_waker_whose_clone_panics_keeps_its_waiter() {
    let (tx, mut rx) = mpsc::channel::<u32>();
    let first = HostileWaker::new();
    let bad = HostileWaker::new();
    bad.panic_on_clones(1);
    {
        let mut fut = Box::pin(rx.recv_async());
        // The first empty poll yields; a later one publishes the waiter.
        for _ in 0..4 {
            assert!(poll(fut.as_mut(), &first.waker()).is_pending());
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            poll(fut.as_mut(), &bad.waker()).is_pending()
        }));
        assert!(r.is_err(), "the clone's panic goes on");
        // Cancelled: its waiter is withdrawn.
        drop(fut);
    }
    assert_eq!(
        Arc::strong_count(&first),
        1,
        "a cancelled receive left its task's waker in the channel"
    );
    first.panic_on_drops(1);
    let r = catch_unwind(AssertUnwindSafe(move || drop(rx)));
    drop(r);
    assert_eq!(
        tx.send(1),
        Err(mpsc::SendError(1)),
        "the receiver's drop did not close the channel"
    );
}

/// `SendAsync::cancel` of a withdrawn offer drops the task's waker, whose
/// drop panics: the panic goes on, and the value is still the sender's (a
/// later `cancel` hands it back), neither reported delivered nor dropped.
/// Before, the first `cancel` marked the future finished before dropping
/// the waker, so the second answered `None` ("delivered") and the value
/// was dropped with the future.
#[test]
fn csp_send_cancelled_with_a_waker_whose_drop_panics_still_hands_the_value_back() {
    let (mut tx, mut rx) = csp::channel::<String>();
    let hostile = HostileWaker::new();
    {
        let mut send = Box::pin(tx.send_async(String::from("offer")));
        assert!(poll(send.as_mut(), &hostile.waker()).is_pending());
        hostile.panic_on_drops(1);
        let r = catch_unwind(AssertUnwindSafe(|| send.as_mut().cancel()));
        let payload = r.expect_err("the waker's panic was lost");
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"HostileWaker: drop panics")
        );
        assert_eq!(
            send.as_mut().cancel().as_deref(),
            Some("offer"),
            "the withdrawn value was not handed back"
        );
    }
    assert_eq!(rx.try_recv(), Err(csp::TryRecvError::Empty));
}

/// A waker whose first clone runs `on_clone` (a release of what the poll
/// waits for, standing in for a release on another thread in the instant
/// between a poll's look and its count), and whose next drop then panics.
struct ReleasingWaker {
    on_clone: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
    drop_panics: AtomicBool,
}

static RELEASING_VTABLE: std::task::RawWakerVTable = std::task::RawWakerVTable::new(
    releasing_clone,
    releasing_wake,
    releasing_wake_by_ref,
    releasing_drop,
);

unsafe fn releasing_clone(p: *const ()) -> std::task::RawWaker {
    // SAFETY: `p` is a counted `Arc<ReleasingWaker>` (see `releasing_waker`).
    let w = unsafe { &*p.cast::<ReleasingWaker>() };
    let release = w.on_clone.lock().unwrap().take();
    if let Some(release) = release {
        release();
        w.drop_panics.store(true, SeqCst);
    }
    // SAFETY: as above; the clone owns one more count.
    unsafe { Arc::increment_strong_count(p.cast::<ReleasingWaker>()) };
    std::task::RawWaker::new(p, &RELEASING_VTABLE)
}

unsafe fn releasing_wake(p: *const ()) {
    // SAFETY: forwarded.
    unsafe { releasing_drop(p) }
}

unsafe fn releasing_wake_by_ref(_: *const ()) {}

unsafe fn releasing_drop(p: *const ()) {
    // SAFETY: as in `releasing_clone`; this drop releases one count.
    let w = unsafe { Arc::from_raw(p.cast::<ReleasingWaker>()) };
    if w.drop_panics.swap(false, SeqCst) && !std::thread::panicking() {
        drop(w);
        panic!("a task's waker panicked");
    }
}

/// A [`releasing_waker`] whose first clone drops `held`'s value (a guard or
/// permit, released between a poll's look and its count).
fn waker_releasing<T: Send + 'static>(held: T) -> Waker {
    let held = std::sync::Mutex::new(Some(held));
    releasing_waker(move || drop(held.lock().unwrap().take()))
}

fn releasing_waker(on_clone: impl FnOnce() + Send + 'static) -> Waker {
    let w = Arc::new(ReleasingWaker {
        on_clone: std::sync::Mutex::new(Some(Box::new(on_clone))),
        drop_panics: AtomicBool::new(false),
    });
    // SAFETY: a counted `Arc<ReleasingWaker>`, what the vtable expects.
    unsafe {
        Waker::from_raw(std::task::RawWaker::new(
            Arc::into_raw(w).cast(),
            &RELEASING_VTABLE,
        ))
    }
}

/// A lock future's poll finds the lock held, makes its waiter (cloning
/// the waker), fails to count itself because the lock was released
/// meanwhile, and takes it: the unused waiter's waker, dropped by the
/// poll, panics. The panic goes on with the lock not taken (a later poll
/// takes it). Before, the waiter was dropped after the lock was taken: the
/// poll unwound with the lock held and no guard, so it was never released.
fn lock_future_whose_unused_waiter_panics(fairness: Fairness) {
    let m = Arc::new(Mutex::with_fairness(0u32, fairness));
    let waker = waker_releasing(m.lock_arc());
    let mut fut = Box::pin(m.lock_async());
    resumes_the_wakers_panic(|| poll(fut.as_mut(), &waker).is_ready());
    drop(fut);
    assert!(
        m.try_lock().is_some(),
        "the lock was taken by a poll that panicked ({fairness:?})"
    );
}

#[test]
fn barging_lock_future_whose_unused_waiter_panics_takes_no_lock() {
    lock_future_whose_unused_waiter_panics(Fairness::Barging);
}

#[test]
fn fifo_lock_future_whose_unused_waiter_panics_takes_no_lock() {
    lock_future_whose_unused_waiter_panics(Fairness::Fifo);
}

/// The same for an acquire: the permit is released between the poll's
/// look and its count, so the count finds it free; the unused waiter's
/// waker panics as it is dropped. The permit goes back before the panic
/// goes on. Before, the poll unwound holding it: a permit lost for good.
#[test]
fn acquire_future_whose_unused_waiter_panics_keeps_no_permit() {
    let sem = Arc::new(Semaphore::new(1));
    let waker = waker_releasing(sem.try_acquire_arc().expect("a free permit"));
    let mut fut = Box::pin(sem.acquire_async());
    resumes_the_wakers_panic(|| poll(fut.as_mut(), &waker).is_ready());
    drop(fut);
    assert_eq!(sem.available_permits(), 1, "the permit was lost");
}

/// A lock future polled in a loop, with a new waker each time, while the
/// holder unlocks: a poll can register its waker just after the unlock's
/// notify took the slot, and see the token only then. That poll takes its
/// waker back, so the unlock, which may drop the last reference to the
/// waiter, never drops a task's waker (user code: a raw unlock must not
/// unwind, and a guard dropped while unwinding would abort).
fn lock_future_ready_after_its_register(fairness: Fairness) {
    use std::sync::atomic::AtomicUsize;
    const ROUNDS: usize = 20_000;
    let m = Arc::new(Mutex::with_fairness((), fairness));
    // 1: the main thread holds the lock; 2: the task is queued; 3: done.
    let phase = Arc::new(AtomicUsize::new(0));
    let task = {
        let (m, phase) = (Arc::clone(&m), Arc::clone(&phase));
        std::thread::spawn(move || {
            let wakers = [HostileWaker::new(), HostileWaker::new()];
            let (a, b) = (wakers[0].waker(), wakers[1].waker());
            for _ in 0..ROUNDS {
                while phase.load(SeqCst) != 1 {
                    std::hint::spin_loop();
                }
                let mut lock = Box::pin(m.lock_async());
                assert!(poll(lock.as_mut(), &a).is_pending());
                phase.store(2, SeqCst);
                let mut i = 0usize;
                let guard = loop {
                    let w = if i % 2 == 0 { &b } else { &a };
                    i += 1;
                    if let Poll::Ready(g) = poll(lock.as_mut(), w) {
                        break g;
                    }
                };
                drop(guard);
                drop(lock);
                phase.store(3, SeqCst);
            }
            wakers.iter().map(|w| w.foreign_drops()).sum::<usize>()
        })
    };
    for round in 0..ROUNDS {
        let g = m.lock();
        phase.store(1, SeqCst);
        while phase.load(SeqCst) != 2 {
            std::hint::spin_loop();
        }
        for _ in 0..round % 64 {
            std::hint::spin_loop();
        }
        drop(g);
        while phase.load(SeqCst) != 3 {
            std::hint::spin_loop();
        }
    }
    assert_eq!(
        task.join().expect("the task's thread"),
        0,
        "a task's waker was dropped by another thread (the unlock) without being woken"
    );
}

#[test]
fn barging_lock_future_ready_after_its_register_leaves_no_waker_behind() {
    lock_future_ready_after_its_register(Fairness::Barging);
}

#[test]
fn fifo_lock_future_ready_after_its_register_leaves_no_waker_behind() {
    lock_future_ready_after_its_register(Fairness::Fifo);
}

// ---- a dropped csp future's own waker panics when it is dropped ----

/// A published csp future (a send, a receive, an `Alt`'s select) is
/// dropped, and the last handle of its waiter drops its waker, which
/// panics: outside a panic the panic goes on; while unwinding it is dropped
/// (found by review: the futures left the waiter to the drop glue, and the
/// process aborted). The channel still works afterwards.
fn csp_future_with_waker_drop_panic(which: &str, while_unwinding: bool) {
    let (mut tx, mut rx) = csp::channel::<u32>();
    let (_tx2, mut rx2) = csp::channel::<u32>();
    let hostile = HostileWaker::new();
    match which {
        "send" => {
            let mut f = Box::pin(tx.send_async(1));
            assert!(poll(f.as_mut(), &hostile.waker()).is_pending());
            hostile.panic_on_drops(1);
            drop_with_hostile_waker(f, while_unwinding);
        }
        "recv" => {
            let mut f = Box::pin(rx.recv_async());
            assert!(poll(f.as_mut(), &hostile.waker()).is_pending());
            hostile.panic_on_drops(1);
            drop_with_hostile_waker(f, while_unwinding);
        }
        _ => {
            let mut alt = csp::Alt::new(vec![&mut rx, &mut rx2]);
            let mut f = alt.select_async();
            assert!(poll(Pin::new(&mut f), &hostile.waker()).is_pending());
            hostile.panic_on_drops(1);
            drop_with_hostile_waker(f, while_unwinding);
        }
    }
    let sender = std::thread::spawn(move || tx.send(7));
    assert_eq!(rx.recv(), Ok(7));
    sender.join().unwrap().unwrap();
}

#[test]
fn csp_futures_whose_waker_drop_panics_resume_it() {
    for which in ["send", "recv", "select"] {
        csp_future_with_waker_drop_panic(which, false);
    }
}

#[test]
fn csp_futures_whose_waker_drop_panics_while_unwinding() {
    in_child(
        "csp_futures_whose_waker_drop_panics_while_unwinding",
        || {
            for which in ["send", "recv", "select"] {
                csp_future_with_waker_drop_panic(which, true);
            }
        },
    );
}

// ---- channel operations that wake a partner task, called from a `Drop` ----
//
// Not a drop of the crate's own, but the user's: a `Drop` that sends or
// receives while its thread unwinds. The operation wakes the partner's task;
// a panic of that waker must be dropped then (a second panic aborts), and
// go on out of the operation otherwise. Either way the value is delivered
// exactly once.

/// Runs its closure when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

impl Armed {
    /// Runs `op` from a `Drop` with the waker armed, while unwinding from
    /// another panic or not, and checks the panic that comes out.
    fn run_armed(&self, op: impl FnMut(), while_unwinding: bool) {
        self.drop_armed(OnDrop(op), while_unwinding);
    }
}

const FAR: std::time::Duration = std::time::Duration::from_secs(600);

fn mpsc_send(while_unwinding: bool) {
    let (tx, mut rx) = mpsc::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut cx = Context::from_waker(&waker);
    // The first poll yields to the executor, the second publishes the waker.
    assert!(rx.poll_recv(&mut cx).is_pending());
    assert!(rx.poll_recv(&mut cx).is_pending());
    let mut sent = false;
    armed.run_armed(|| sent = tx.send(7).is_ok(), while_unwinding);
    // While unwinding the send returned; otherwise it panicked.
    assert_eq!(sent, while_unwinding);
    assert_eq!(rx.poll_recv(&mut cx), Poll::Ready(Some(7)));
    assert_eq!(rx.try_recv(), Err(mpsc::TryRecvError::Empty));
}

#[test]
fn mpsc_send_while_unwinding() {
    in_child("mpsc_send_while_unwinding", || mpsc_send(true));
}

#[test]
fn mpsc_send_resumes_the_wakers_panic() {
    mpsc_send(false);
}

const SENDS: [&str; 3] = ["send", "try_send", "try_send_for"];

fn csp_send(form: &str, while_unwinding: bool) {
    let (mut tx, mut rx) = csp::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut recv = Box::pin(rx.recv_async());
    assert!(poll(recv.as_mut(), &waker).is_pending());
    let mut sent = false;
    armed.run_armed(
        || {
            sent = match form {
                "send" => tx.send(7).is_ok(),
                "try_send" => tx.try_send(7).is_ok(),
                _ => tx.try_send_for(7, FAR).is_ok(),
            }
        },
        while_unwinding,
    );
    assert_eq!(sent, while_unwinding, "{form}");
    // Delivered once, panic or not.
    assert_eq!(poll(recv.as_mut(), &waker), Poll::Ready(Ok(7)), "{form}");
}

#[test]
fn csp_send_while_unwinding() {
    in_child("csp_send_while_unwinding", || {
        for form in SENDS {
            csp_send(form, true);
        }
    });
}

#[test]
fn csp_send_resumes_the_wakers_panic() {
    for form in SENDS {
        csp_send(form, false);
    }
}

const RECVS: [&str; 3] = ["recv", "try_recv", "try_recv_for"];

fn csp_recv(form: &str, while_unwinding: bool) {
    let (mut tx, mut rx) = csp::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut send = Box::pin(tx.send_async(7));
    assert!(poll(send.as_mut(), &waker).is_pending());
    let mut got = None;
    armed.run_armed(
        || {
            got = match form {
                "recv" => rx.recv().ok(),
                "try_recv" => rx.try_recv().ok(),
                _ => rx.try_recv_for(FAR).ok(),
            }
        },
        while_unwinding,
    );
    if !while_unwinding {
        // The receive panicked with the value in the receiver's stash: the
        // next receive returns it.
        assert_eq!(got, None, "{form}");
        got = rx.try_recv().ok();
    }
    assert_eq!(got, Some(7), "{form}");
    assert_eq!(poll(send.as_mut(), &waker), Poll::Ready(Ok(())), "{form}");
    assert_eq!(rx.try_recv(), Err(csp::TryRecvError::Empty), "{form}");
}

#[test]
fn csp_recv_while_unwinding() {
    in_child("csp_recv_while_unwinding", || {
        for form in RECVS {
            csp_recv(form, true);
        }
    });
}

#[test]
fn csp_recv_resumes_the_wakers_panic() {
    for form in RECVS {
        csp_recv(form, false);
    }
}

const SELECTS: [&str; 3] = ["select", "try_select", "try_select_for"];

fn csp_select(form: &str, while_unwinding: bool) {
    let (mut tx, mut rx) = csp::channel::<u8>();
    let (_tx2, mut rx2) = csp::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut send = Box::pin(tx.send_async(7));
    assert!(poll(send.as_mut(), &waker).is_pending());
    let mut alt = csp::Alt::new(vec![&mut rx2, &mut rx]);
    let mut got = None;
    armed.run_armed(
        || {
            got = match form {
                "select" => Some(alt.select()),
                "try_select" => alt.try_select(),
                _ => alt.try_select_for(FAR),
            }
        },
        while_unwinding,
    );
    if !while_unwinding {
        // As for a receive: the value waits in the receiver's stash.
        assert_eq!(got, None, "{form}");
        got = alt.try_select();
    }
    assert_eq!(got, Some((1, Ok(7))), "{form}");
    assert_eq!(poll(send.as_mut(), &waker), Poll::Ready(Ok(())), "{form}");
}

#[test]
fn csp_select_while_unwinding() {
    in_child("csp_select_while_unwinding", || {
        for form in SELECTS {
            csp_select(form, true);
        }
    });
}

#[test]
fn csp_select_resumes_the_wakers_panic() {
    for form in SELECTS {
        csp_select(form, false);
    }
}

/// A send or receive future polled (by a `block_on` in a `Drop`, say) while
/// the thread unwinds, completing a rendezvous with a task whose waker
/// panics.
fn csp_future_poll(which: &str, while_unwinding: bool) {
    let (mut tx, mut rx) = csp::channel::<u8>();
    let (armed, waker) = armed_waker();
    if which == "send" {
        let mut recv = Box::pin(rx.recv_async());
        assert!(poll(recv.as_mut(), &waker).is_pending());
        let mut send = Box::pin(tx.send_async(7));
        let mut got = Poll::Pending;
        armed.run_armed(|| got = poll(send.as_mut(), Waker::noop()), while_unwinding);
        if !while_unwinding {
            assert_eq!(got, Poll::Pending);
            // A poll after the panic reports the send done; it does not
            // send again.
            got = poll(send.as_mut(), Waker::noop());
        }
        assert_eq!(got, Poll::Ready(Ok(())));
        assert_eq!(poll(recv.as_mut(), &waker), Poll::Ready(Ok(7)));
    } else {
        let mut send = Box::pin(tx.send_async(7));
        assert!(poll(send.as_mut(), &waker).is_pending());
        let mut recv = Box::pin(rx.recv_async());
        let mut got = Poll::Pending;
        armed.run_armed(|| got = poll(recv.as_mut(), Waker::noop()), while_unwinding);
        if !while_unwinding {
            assert_eq!(got, Poll::Pending);
            got = poll(recv.as_mut(), Waker::noop());
        }
        assert_eq!(got, Poll::Ready(Ok(7)));
        assert_eq!(poll(send.as_mut(), &waker), Poll::Ready(Ok(())));
    }
}

#[test]
fn csp_future_polls_while_unwinding() {
    in_child("csp_future_polls_while_unwinding", || {
        for which in ["send", "recv"] {
            csp_future_poll(which, true);
        }
    });
}

#[test]
fn csp_future_polls_resume_the_wakers_panic() {
    for which in ["send", "recv"] {
        csp_future_poll(which, false);
    }
}

/// The mpsc receiver's poll yields to its executor once by waking its own
/// task: polled from a `Drop` while the thread unwinds, with a waker that
/// panics, it must not abort.
fn mpsc_poll_recv_yield(while_unwinding: bool) {
    let (tx, mut rx) = mpsc::channel::<u8>();
    let (armed, waker) = armed_waker();
    let mut got = Poll::Ready(None);
    armed.run_armed(
        || got = rx.poll_recv(&mut Context::from_waker(&waker)),
        while_unwinding,
    );
    if while_unwinding {
        assert_eq!(got, Poll::Pending);
    }
    // The receiver still works.
    tx.send(3).unwrap();
    assert_eq!(
        rx.poll_recv(&mut Context::from_waker(&waker)),
        Poll::Ready(Some(3))
    );
}

#[test]
fn mpsc_poll_recv_yield_while_unwinding() {
    in_child("mpsc_poll_recv_yield_while_unwinding", || {
        mpsc_poll_recv_yield(true)
    });
}

#[test]
fn mpsc_poll_recv_yield_resumes_the_wakers_panic() {
    mpsc_poll_recv_yield(false);
}

/// A timed acquire that gives up withdraws its request; the permits kept
/// for it (a head request for two, one of them found free) then go to the
/// task queued behind it, whose waker panics. That panic goes on out of
/// the timed acquire (its documented `# Panics`), with no permit held: the
/// task holds the permit, and once it is done every permit is back.
///
/// The task queues and its waker is armed before the head's deadline; an
/// attempt in which this thread was kept from running until past it (the
/// head may have given up before either) tells nothing, and is made again.
#[test]
fn a_timed_acquire_that_gives_up_resumes_the_panic_of_the_waker_it_serves() {
    use std::time::{Duration, Instant};
    const GIVE_UP: Duration = Duration::from_millis(300);
    HostileWaker::quiet_panics();
    let mut judged = false;
    for _ in 0..10 {
        let sem = Semaphore::new(1);
        let in_time = std::thread::scope(|s| {
            let (began_tx, began) = std::sync::mpsc::channel();
            let sem = &sem;
            let head = s.spawn(move || {
                // Before the acquire reads the clock: its deadline is later.
                began_tx.send(Instant::now()).unwrap();
                catch_unwind(AssertUnwindSafe(|| {
                    sem.try_acquire_many_for(2, GIVE_UP).map(|p| p.permits())
                }))
            });
            let deadline = began.recv().unwrap() + GIVE_UP;
            // The head is counted and keeps the free permit (or has given
            // up already, past its deadline).
            while sem.available_permits() != 0 && !head.is_finished() {
                std::thread::yield_now();
            }
            let hostile = HostileWaker::new();
            let waker = hostile.waker();
            let mut fut = Box::pin(sem.acquire_async());
            let first = fut.as_mut().poll(&mut Context::from_waker(&waker));
            // The wake by value releases the waker: it panics there.
            hostile.panic_on_drops(1);
            if Instant::now() >= deadline {
                hostile.panic_on_drops(0);
                let _ = head.join();
                return false;
            }
            assert!(first.is_pending(), "queued behind the head");
            let r = head.join().unwrap();
            let payload = r.expect_err("the served task's panic goes on out of the timed acquire");
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"HostileWaker: drop panics")
            );
            match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(Ok(p)) => assert_eq!(p.permits(), 1),
                other => panic!("the task was not served: {other:?}"),
            }
            true
        });
        assert_eq!(sem.available_permits(), 1);
        if in_time {
            judged = true;
            break;
        }
    }
    assert!(
        judged,
        "every attempt was kept from running until past the head's deadline"
    );
}
