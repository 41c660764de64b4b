//! The family's one panic policy for user code that runs inside a primitive.
//!
//! A primitive runs code it did not write: a task's [`Waker`](core::task::Waker),
//! a lock's policy, a value's `Drop`, a delegated task's body. Any of it may
//! panic. Every crate of the family follows the same four rules:
//!
//! 1. **No user code under an internal lock or borrow.** Wake-ups and drops
//!    are collected while the primitive's bookkeeping is held and run once it
//!    is released (a [`Wakeup`](crate::waiter::Wakeup), a value moved out).
//! 2. **The primitive's state is finished before the panic moves on.** A
//!    callback runs under [`Panics::catch`]; the operation completes its state
//!    change (releases what it must, hands over what it owes) and only then
//!    calls [`Panics::resume`], so the panic reaches the caller of the
//!    operation that ran the callback, with the primitive consistent. (A
//!    waiter that makes a wake-up another operation left to it, such as an
//!    unlock that found it half-way through queueing, is that operation:
//!    the panic goes on out of its wait once its own request is settled,
//!    unless that wait must not unwind, rule 4.)
//!    When several callbacks panic, the first panic is resumed and the later
//!    ones are dropped, with the `Panics`, once the operation is done (a
//!    payload's `drop` is user code too, which rule 1 keeps out of the
//!    primitive's locks).
//! 3. **Never a second panic.** If the thread is already unwinding when the
//!    panic would be resumed (a guard, a future or a channel end dropped
//!    during a panic), the caught panic is dropped instead, because a panic
//!    out of a `drop` during unwinding aborts the process. A payload whose own
//!    `drop` panics is replaced by that panic's payload, which is dropped in
//!    turn; only past [`DISCARD_DEPTH`] such payloads is the last one leaked.
//!    One case cannot be told apart: a drop run by a
//!    thread-local destructor is not unwinding, so a panic resumed there
//!    aborts the process, as any panic out of a thread-local destructor does
//!    (`std` gives no way to detect that context). Operations whose callback
//!    is the crate's own choice rather than the caller's (a lock's policy)
//!    therefore follow rule 4 instead.
//! 4. **An operation that must not unwind does not.** A raw unlock (lock_api
//!    assumes that an unlock which panics left the lock held), a raw
//!    blocking lock (lock_api takes the lock back with it while a guard
//!    lives on, in `unlocked` and `bump`), and anything else that has
//!    already given up what it owned, keeps the panic with
//!    [`Panics::take`] (or drops it) and records or reports it as its docs
//!    say, instead of resuming it.
//!
//! # Examples
//!
//! ```
//! use std::panic::{AssertUnwindSafe, catch_unwind};
//! use sync_core::unwind::Panics;
//!
//! let mut panics = Panics::new();
//! let mut woken = 0;
//! for i in 0..3 {
//!     // Every callback runs, whichever of them panics.
//!     panics.catch(|| {
//!         woken += 1;
//!         if i == 1 {
//!             panic!("a user waker panicked");
//!         }
//!     });
//! }
//! assert_eq!(woken, 3);
//! // The state is consistent: now the first panic goes on to the caller.
//! let resumed = catch_unwind(AssertUnwindSafe(move || panics.resume()));
//! assert!(resumed.is_err());
//! ```

use core::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// A caught panic's payload, as [`std::panic::catch_unwind`] returns it.
pub type Payload = Box<dyn Any + Send + 'static>;

/// The panics caught while one operation ran user callbacks: the first is
/// kept to be resumed once the operation is done; the later ones are kept
/// too, and dropped with the `Panics` (their `drop` is user code, which
/// must not run under the primitive's locks: rule 1), however the first
/// one leaves it ([`resume`](Self::resume), [`take`](Self::take)).
///
/// Dropping a `Panics` that still holds a panic drops that panic (rule 3 of
/// the [module docs](self)); call [`resume`](Self::resume) to pass it on.
#[derive(Default)]
#[must_use = "a caught panic is lost unless it is resumed"]
pub struct Panics(
    /// `None` until a panic is caught: one word, which the operations that
    /// pass a `Panics` along their fast paths move and test for nothing
    /// else. Boxed on the first catch (a panic's payload is already boxed).
    Option<Box<Caught>>,
);

/// What a [`Panics`] holds once it has caught a panic.
struct Caught {
    /// The panic to resume (`None` once taken).
    first: Option<Payload>,
    /// The later panics, dropped with the `Panics`.
    later: Vec<Payload>,
}

impl Panics {
    /// No panic caught yet.
    pub const fn new() -> Self {
        Self(None)
    }

    /// Runs `f` (user code), catching its panic: `Some(result)`, or `None`
    /// after a panic, which is kept if it is the first.
    #[inline]
    pub fn catch<R>(&mut self, f: impl FnOnce() -> R) -> Option<R> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => Some(r),
            Err(payload) => {
                self.keep(payload);
                None
            }
        }
    }

    /// Drops `value` (whose `Drop` is user code), catching its panic.
    #[inline]
    pub fn drop<X>(&mut self, value: X) {
        self.catch(move || drop(value));
    }

    /// Keeps `payload`: to be resumed if it is the first panic, to be
    /// dropped with `self` otherwise.
    #[cold]
    pub fn keep(&mut self, payload: Payload) {
        let caught = self.caught();
        if caught.first.is_none() {
            caught.first = Some(payload);
        } else {
            caught.later.push(payload);
        }
    }

    /// The caught panics, made on the first catch.
    fn caught(&mut self) -> &mut Caught {
        self.0.get_or_insert_with(|| {
            Box::new(Caught {
                first: None,
                later: Vec::new(),
            })
        })
    }

    /// Keeps the first panic `other` caught, as if caught here: for an
    /// operation that gathers the panics of the steps it runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::unwind::Panics;
    ///
    /// let mut step = Panics::new();
    /// step.catch(|| panic!("a waker panicked"));
    /// let mut all = Panics::new();
    /// all.absorb(step);
    /// assert!(!all.is_empty());
    /// drop(all.take());
    /// ```
    #[inline]
    pub fn absorb(&mut self, mut other: Panics) {
        if let Some(theirs) = other.0.take() {
            theirs.absorb_into(self);
        }
    }

    /// Whether a panic was caught (and its first one not taken).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|c| c.first.is_none())
    }

    /// Takes the first panic caught (for an operation that must not unwind);
    /// the later ones are dropped with `self`.
    #[inline]
    pub fn take(&mut self) -> Option<Payload> {
        self.0.as_mut().and_then(|c| c.first.take())
    }

    /// Resumes the first panic caught, if any, unless this thread is already
    /// unwinding: then the panic is dropped, since a second one would abort.
    /// The later panics are dropped first.
    #[inline]
    #[track_caller]
    pub fn resume(mut self) {
        if let Some(caught) = self.0.take() {
            caught.resume();
        }
    }

    /// Drops `value` (user code: a primitive's last handle, whose drop
    /// drops the user's `T`), catching its panic, then [`resume`]s: for a
    /// drop of a primitive's own that owns such a value and has caught
    /// wakers' panics, so that the value is not left to the drop glue,
    /// which would drop it while the first panic unwinds (and abort if its
    /// drop panics too). With nothing caught, the value is dropped plainly.
    ///
    /// [`resume`]: Self::resume
    #[inline]
    #[track_caller]
    pub fn drop_then_resume<X>(mut self, value: X) {
        if self.is_empty() {
            drop(value);
        } else {
            self.drop(value);
            self.resume();
        }
    }
}

// The cold halves of `Panics`' inline methods take the box itself: moving
// the panics out of it inline would put that copy and the box's free on
// every caller's fast path.
#[allow(
    clippy::boxed_local,
    reason = "the box is moved, not its contents, so the inline callers stay a null test"
)]
impl Caught {
    /// [`Panics::resume`] once a panic was caught: the later panics are
    /// dropped, then the first (if not taken) goes on.
    #[cold]
    #[inline(never)]
    fn resume(self: Box<Self>) {
        let Caught { first, later } = *self;
        discard_all(later);
        if let Some(payload) = first {
            resume_or_discard(payload);
        }
    }

    /// [`Panics`]'s drop once a panic was caught: every payload is dropped.
    #[cold]
    #[inline(never)]
    fn discard(self: Box<Self>) {
        let Caught { first, later } = *self;
        if let Some(payload) = first {
            discard(payload);
        }
        discard_all(later);
    }

    /// [`Panics::absorb`] of a `Panics` that caught a panic.
    #[cold]
    #[inline(never)]
    fn absorb_into(self: Box<Self>, panics: &mut Panics) {
        let Caught { first, mut later } = *self;
        if let Some(payload) = first {
            panics.keep(payload);
        }
        if !later.is_empty() {
            panics.caught().later.append(&mut later);
        }
    }
}

/// Drops caught payloads, each drop's own panic caught and discarded.
fn discard_all(payloads: Vec<Payload>) {
    for payload in payloads {
        discard(payload);
    }
}

impl Drop for Panics {
    #[inline]
    fn drop(&mut self) {
        if let Some(caught) = self.0.take() {
            caught.discard();
        }
    }
}

impl core::fmt::Debug for Panics {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (caught, later) = self
            .0
            .as_ref()
            .map_or((false, 0), |c| (c.first.is_some(), c.later.len()));
        f.debug_struct("Panics")
            .field("caught", &caught)
            .field("later", &later)
            .finish()
    }
}

/// Runs `f` (user code that must not unwind out of the caller) and drops its
/// panic, if any, following rule 3: for callbacks whose failure the caller
/// can ignore, such as a waker run on a path that has nobody to report to.
/// Returns `None` after a panic.
#[inline]
pub fn catch_and_discard<R>(f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Some(r),
        Err(payload) => {
            discard(payload);
            None
        }
    }
}

/// Drops `value`, whose `Drop` may run user code (the last handle of a
/// waiter that holds a task's waker), in a `drop` of the primitive's own:
/// its panic goes on to the caller, unless this thread is already unwinding
/// (rule 3), when it is dropped. Left to the drop glue instead, such a
/// panic during an unwind would abort the process.
#[track_caller]
pub fn drop_resuming<X>(value: X) {
    run_resuming(move || drop(value));
}

/// [`drop_resuming`] for a value that may be absent: with `None` it does
/// nothing at all, so that a hot path that usually has nothing to drop (a
/// rendezvous whose partner is awake, with no wakeup to deliver) does not
/// pay for catching a panic that cannot come.
#[inline]
#[track_caller]
pub fn drop_resuming_some<X>(value: Option<X>) {
    if let Some(value) = value {
        drop_resuming(value);
    }
}

/// Runs `f` (user code: a waker, a drop) in an operation whose state is
/// already consistent: its panic goes on to the caller, unless this thread
/// is already unwinding (rule 3), when it is dropped. `None` after a
/// dropped panic.
#[track_caller]
pub fn run_resuming<R>(f: impl FnOnce() -> R) -> Option<R> {
    let mut panics = Panics::new();
    let r = panics.catch(f);
    panics.resume();
    r
}

/// Resumes `payload` unless this thread is already unwinding, in which case
/// it is dropped (a second panic would abort the process).
#[track_caller]
pub fn resume_or_discard(payload: Payload) {
    if std::thread::panicking() {
        discard(payload);
    } else {
        resume_unwind(payload);
    }
}

/// How many payloads [`discard`] drops in a row, each the payload of the
/// panic of the previous one's `drop`, before it leaks the next.
pub const DISCARD_DEPTH: usize = 8;

/// Drops a panic's payload without unwinding: if that drop panics, the new
/// panic's payload is dropped the same way, and so on up to
/// [`DISCARD_DEPTH`] payloads; the one after is leaked (a payload type
/// whose `drop` always panics with another would never end). A payload
/// whose drop panics with an ordinary payload (a message) therefore leaves
/// nothing behind, however often it happens.
pub fn discard(payload: Payload) {
    let mut payload = payload;
    for _ in 0..DISCARD_DEPTH {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(again) => payload = again,
        }
    }
    core::mem::forget(payload);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicUsize, Ordering};

    /// A panic payload that counts its drops in the test's own counter.
    struct Counted(&'static AtomicUsize);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("drop");
        }
    }

    #[test]
    fn the_first_panic_is_resumed_after_every_callback_ran() {
        let mut panics = Panics::new();
        let mut ran = Vec::new();
        for i in 0..3 {
            let r = panics.catch(|| {
                ran.push(i);
                if i > 0 {
                    std::panic::panic_any(i);
                }
                i
            });
            assert_eq!(r, (i == 0).then_some(0));
        }
        assert_eq!(ran, [0, 1, 2]);
        assert!(!panics.is_empty());
        let payload = catch_unwind(AssertUnwindSafe(|| panics.resume())).unwrap_err();
        assert_eq!(*payload.downcast::<i32>().unwrap(), 1);
    }

    #[test]
    fn later_panics_are_dropped_with_the_panics_not_when_caught() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let mut panics = Panics::new();
        for _ in 0..3 {
            panics.catch(|| std::panic::panic_any(Counted(&DROPPED)));
        }
        // Caught under the primitive's lock, say: nothing dropped yet.
        assert_eq!(DROPPED.load(Ordering::Relaxed), 0);
        let first = panics.take().expect("the first panic");
        assert_eq!(DROPPED.load(Ordering::Relaxed), 0);
        // Released: the later ones go with the `Panics`.
        drop(panics);
        assert_eq!(DROPPED.load(Ordering::Relaxed), 2);
        drop(first);
        assert_eq!(DROPPED.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn an_absorbed_panics_keeps_its_later_panics_until_dropped() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        let mut all = Panics::new();
        all.catch(|| std::panic::panic_any(1i32));
        let mut step = Panics::new();
        for _ in 0..2 {
            step.catch(|| std::panic::panic_any(Counted(&DROPPED)));
        }
        all.absorb(step);
        // Both of the step's panics are later ones here: none dropped yet.
        assert_eq!(DROPPED.load(Ordering::Relaxed), 0);
        let first = all.take().expect("the first panic");
        assert_eq!(*first.downcast::<i32>().unwrap(), 1);
        assert!(all.is_empty());
        drop(all);
        assert_eq!(DROPPED.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn an_empty_panics_is_one_word() {
        // Operations pass a `Panics` along their fast paths by value.
        assert_eq!(
            core::mem::size_of::<Panics>(),
            core::mem::size_of::<usize>()
        );
        let mut p = Panics::new();
        assert!(p.is_empty());
        assert!(p.take().is_none());
        p.resume();
    }

    #[test]
    fn a_panicking_drop_is_caught() {
        let mut panics = Panics::new();
        panics.drop(PanicOnDrop);
        assert!(panics.take().is_some());
        assert!(panics.is_empty());
        panics.resume(); // nothing left: returns
    }

    #[test]
    fn resume_while_unwinding_drops_the_panic_instead_of_aborting() {
        struct ResumeOnDrop;
        impl Drop for ResumeOnDrop {
            fn drop(&mut self) {
                let mut panics = Panics::new();
                panics.drop(PanicOnDrop);
                // The thread is unwinding: resuming would abort.
                panics.resume();
            }
        }
        let r = catch_unwind(|| {
            let _guard = ResumeOnDrop;
            panic!("first");
        });
        let payload = r.unwrap_err();
        assert_eq!(*payload.downcast::<&str>().unwrap(), "first");
    }

    #[test]
    fn the_payload_of_a_payloads_panicking_drop_is_dropped_too() {
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        struct PanicsWithCounted;
        impl Drop for PanicsWithCounted {
            fn drop(&mut self) {
                std::panic::panic_any(Counted(&DROPPED));
            }
        }
        discard(Box::new(PanicsWithCounted));
        assert_eq!(
            DROPPED.load(Ordering::Relaxed),
            1,
            "the second payload leaked"
        );
        // A chain that never ends: each drop panics with another link.
        struct Chain;
        impl Drop for Chain {
            fn drop(&mut self) {
                std::panic::panic_any(Chain);
            }
        }
        discard(Box::new(Chain));
    }

    #[test]
    fn a_payload_whose_drop_panics_is_discarded_not_unwound() {
        discard(Box::new(PanicOnDrop));
        let mut panics = Panics::new();
        panics.keep(Box::new(0u8));
        panics.keep(Box::new(PanicOnDrop)); // second: discarded
        drop(panics); // first: discarded on drop
        assert_eq!(catch_and_discard(|| panic!("x")), None::<()>);
        assert_eq!(catch_and_discard(|| 7), Some(7));
    }
}
