//! Tasks and wakers for the family's tests: a waker that panics on
//! demand, an executor that polls inside `wake`, and small helpers for
//! polling futures by hand.

/// Awaits `f`, and sends on `filed` once a poll of it has returned
/// `Pending` (its waker is registered): for a test that must act only once
/// a task waits.
///
/// # Panics
///
/// If `filed`'s receiver is gone.
pub async fn pending_then<F: std::future::Future + Unpin>(
    mut f: F,
    filed: std::sync::mpsc::Sender<()>,
) -> F::Output {
    let mut filed = Some(filed);
    std::future::poll_fn(move |cx| {
        let poll = std::future::Future::poll(std::pin::Pin::new(&mut f), cx);
        if poll.is_pending() {
            if let Some(filed) = filed.take() {
                filed.send(()).expect("the test waits");
            }
        }
        poll
    })
    .await
}

/// Polls `f` once, with `waker`.
pub fn poll_once<F: std::future::Future + ?Sized>(
    f: std::pin::Pin<&mut F>,
    waker: &std::task::Waker,
) -> std::task::Poll<F::Output> {
    f.poll(&mut std::task::Context::from_waker(waker))
}

/// A task's waker that panics on demand (user code at its worst), counting
/// its wakes: for tests of what a primitive does when a waker's `clone` or
/// `drop` panics inside it. Every [`waker`](Self::waker) and every clone of
/// one share this state. It also counts the wakers dropped, without being
/// woken, on another thread than the one that made it
/// ([`foreign_drops`](Self::foreign_drops)).
#[cfg(not(loom))]
#[derive(Debug)]
pub struct HostileWaker {
    wakes: std::sync::atomic::AtomicUsize,
    clone_panics: std::sync::atomic::AtomicUsize,
    drop_panics: std::sync::atomic::AtomicUsize,
    foreign_drops: std::sync::atomic::AtomicUsize,
    owner: std::thread::ThreadId,
}

#[cfg(not(loom))]
impl HostileWaker {
    /// A waker that does not panic yet, made by (and owned by) the calling
    /// thread.
    pub fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            wakes: Default::default(),
            clone_panics: Default::default(),
            drop_panics: Default::default(),
            foreign_drops: Default::default(),
            owner: std::thread::current().id(),
        })
    }

    /// A new `Waker` on this state.
    pub fn waker(self: &std::sync::Arc<Self>) -> std::task::Waker {
        let data = std::sync::Arc::into_raw(std::sync::Arc::clone(self)).cast::<()>();
        // SAFETY: `data` is a counted reference to a `HostileWaker`, which
        // is what every function of `HOSTILE_VTABLE` expects; the reference
        // is released by `hostile_drop` (or `hostile_wake`).
        unsafe { std::task::Waker::from_raw(std::task::RawWaker::new(data, &HOSTILE_VTABLE)) }
    }

    /// The next `n` clones of its wakers panic (instead of cloning).
    pub fn panic_on_clones(&self, n: usize) {
        self.clone_panics
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// The next `n` drops of its wakers panic (after releasing the waker).
    pub fn panic_on_drops(&self, n: usize) {
        self.drop_panics
            .store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Keeps the panics of every `HostileWaker` out of the output from now
    /// on (any other panic is reported as before): for a test that makes
    /// many of them and measures memory, since the test harness keeps each
    /// panic's message. Installs a process-wide panic hook, once.
    pub fn quiet_panics() {
        super::quiet_panics_starting_with("HostileWaker: ");
    }

    /// How many times one of its wakers was woken.
    pub fn wakes(&self) -> usize {
        self.wakes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many of its wakers were dropped without being woken on another
    /// thread than the one that called [`new`](Self::new). A task's waker
    /// is dropped by its own polls, or woken (and so consumed) by whoever
    /// wakes it; a primitive that drops one elsewhere runs user code where
    /// its caller does not expect it (inside an unlock, say).
    pub fn foreign_drops(&self) -> usize {
        self.foreign_drops.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn take_one(count: &std::sync::atomic::AtomicUsize) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        count
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[cfg(not(loom))]
static HOSTILE_VTABLE: std::task::RawWakerVTable = std::task::RawWakerVTable::new(
    hostile_clone,
    hostile_wake,
    hostile_wake_by_ref,
    hostile_drop,
);

/// # Safety
///
/// `data` is a counted reference to a `HostileWaker` (see `waker`).
#[cfg(not(loom))]
unsafe fn hostile_clone(data: *const ()) -> std::task::RawWaker {
    // SAFETY: the caller's contract: `data` is alive while this waker is.
    let this = unsafe { &*data.cast::<HostileWaker>() };
    if HostileWaker::take_one(&this.clone_panics) {
        panic!("HostileWaker: clone panics");
    }
    // SAFETY: `data` came from `Arc::into_raw`; the new waker owns the
    // count taken here.
    unsafe { std::sync::Arc::increment_strong_count(data.cast::<HostileWaker>()) };
    std::task::RawWaker::new(data, &HOSTILE_VTABLE)
}

/// # Safety
///
/// As for `hostile_clone`; consumes the waker's reference.
#[cfg(not(loom))]
unsafe fn hostile_wake(data: *const ()) {
    // SAFETY: the caller's contract.
    unsafe {
        hostile_wake_by_ref(data);
        hostile_release(data, false);
    }
}

/// # Safety
///
/// As for `hostile_clone`.
#[cfg(not(loom))]
unsafe fn hostile_wake_by_ref(data: *const ()) {
    // SAFETY: the caller's contract: `data` is alive while this waker is.
    let this = unsafe { &*data.cast::<HostileWaker>() };
    this.wakes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// # Safety
///
/// As for `hostile_clone`; consumes the waker's reference.
#[cfg(not(loom))]
unsafe fn hostile_drop(data: *const ()) {
    // SAFETY: the caller's contract.
    unsafe { hostile_release(data, true) }
}

/// Releases a waker's reference: a drop (`dropped`) or a wake by value.
///
/// # Safety
///
/// As for `hostile_clone`; consumes the waker's reference.
#[cfg(not(loom))]
unsafe fn hostile_release(data: *const (), dropped: bool) {
    // SAFETY: the caller's contract: `data` is alive until we release it
    // below.
    let this = unsafe { &*data.cast::<HostileWaker>() };
    if dropped && std::thread::current().id() != this.owner {
        this.foreign_drops
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    // A wake by value releases the waker too: armed drops panic there as
    // well, as a waker whose `Drop` panics would.
    let panics = HostileWaker::take_one(&this.drop_panics);
    // SAFETY: releases the reference this waker owned (from `into_raw` or
    // `hostile_clone`); `data` is not used again.
    unsafe { std::sync::Arc::decrement_strong_count(data.cast::<HostileWaker>()) };
    if panics {
        panic!("HostileWaker: drop panics");
    }
}

/// A boxed task body for [`InlineTask`].
#[cfg(not(loom))]
type InlineBody = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A task whose waker polls it at once, on the waking thread: the executor
/// at its most re-entrant, for tests of a primitive whose release wakes a
/// task that takes and releases it in turn, inside the waker. A wake that
/// comes while the task is being polled (from inside its own poll, or from
/// another thread) has it polled again once that poll returns, as a real
/// executor would.
#[cfg(not(loom))]
pub struct InlineTask {
    body: std::sync::Mutex<Option<InlineBody>>,
    woken: std::sync::atomic::AtomicBool,
    /// Set once the body has returned: read without the body's lock, which
    /// a look would otherwise hold against a wake (whose `try_lock` would
    /// fail, and its poll be lost: nobody polling sees `woken`).
    done: std::sync::atomic::AtomicBool,
}

#[cfg(not(loom))]
impl InlineTask {
    /// Spawns `body` and polls it once, here.
    pub fn spawn(
        body: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::sync::Arc<Self> {
        let task = std::sync::Arc::new(Self {
            body: std::sync::Mutex::new(Some(Box::pin(body))),
            woken: std::sync::atomic::AtomicBool::new(false),
            done: std::sync::atomic::AtomicBool::new(false),
        });
        task.run();
        task
    }

    /// Whether the body has returned.
    pub fn is_done(&self) -> bool {
        // SeqCst: as `run`'s, which stores it before unlocking the body.
        self.done.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the body returns within `limit`, for a task woken on
    /// another thread: a primitive it released may hand on to a waiter
    /// (which then returns) before the task's poll itself returns.
    pub fn done_within(&self, limit: std::time::Duration) -> bool {
        super::holds_within(limit, || self.is_done())
    }

    fn run(self: &std::sync::Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        // SeqCst throughout: a wake that finds the task being polled sets
        // `woken` before its `try_lock` fails, and the poller reads it
        // after unlocking, so one of the two polls again.
        self.woken.store(true, SeqCst);
        let waker = std::task::Waker::from(std::sync::Arc::clone(self));
        loop {
            let mut slot = match self.body.try_lock() {
                Ok(slot) => slot,
                // Being polled: the poller sees `woken` and polls again.
                Err(std::sync::TryLockError::WouldBlock) => return,
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    panic!("InlineTask: its poll panicked")
                }
            };
            while self.woken.swap(false, SeqCst) {
                if let Some(body) = slot.as_mut()
                    && body
                        .as_mut()
                        .poll(&mut std::task::Context::from_waker(&waker))
                        .is_ready()
                {
                    *slot = None;
                    self.done.store(true, SeqCst);
                }
            }
            drop(slot);
            if !self.woken.load(SeqCst) {
                return;
            }
        }
    }
}

#[cfg(not(loom))]
impl std::task::Wake for InlineTask {
    fn wake(self: std::sync::Arc<Self>) {
        self.run();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.run();
    }
}

#[cfg(not(loom))]
impl std::fmt::Debug for InlineTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineTask")
            .field("done", &self.is_done())
            .finish()
    }
}

/// Runs `f` on a thread with a stack of `stack` bytes and panics, naming
/// `what`, if it has not finished within 60 s; a stack overflow aborts the
/// whole test binary instead (run it where that is a failure).
#[cfg(not(loom))]
pub fn on_small_stack(what: &str, stack: usize, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let t = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            f();
            let _ = done.send(());
        })
        .expect("spawn the test thread");
    if finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .is_err()
    {
        assert!(t.is_finished(), "{what}: not done within 60 s");
    }
    t.join()
        .unwrap_or_else(|_| panic!("{what}: the test thread panicked"));
}
