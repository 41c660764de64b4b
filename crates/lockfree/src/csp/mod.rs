//! Vella's wait-free CSP channel: a synchronous, point-to-point rendezvous
//! (occam's `chan`), built on one swap per side; and [`Alt`], occam's `ALT`.
//!
//! # The protocol
//!
//! The channel is one word. It holds nothing (`EMPTY`), the slot of the
//! party that arrived first and waits, or `CLOSED`. Each side puts the
//! address of its own *slot* (on its stack, or inside its pinned future) in
//! the word with one swap:
//!
//! * If the swap returns `EMPTY`, this side came first: it waits for its
//!   partner to complete its slot.
//! * If it returns the partner's slot, this side came second: it empties the
//!   word (a plain store: the partner waits and nobody else uses the
//!   channel), moves the value (from the sender's slot into the receiver's,
//!   with no buffer in between), and completes the partner's slot, waking it
//!   if it sleeps.
//!
//! Both sides finish their part in a bounded number of steps, whatever the
//! other does: the channel is wait-free apart from the wait itself. (After
//! Vella and KRoC, where the word holds the waiting process's workspace.)
//!
//! A slot's `state` says whether it is complete (`DONE`, or `SHUT` when
//! the other end was dropped), and holds the owner's waiter once the
//! owner stops spinning and sleeps: the completer's swap on `state` both
//! completes the slot and takes the waiter to wake, so the wake is never
//! lost. A thread spins briefly before it sleeps (a cache-line round trip is
//! a hundred nanoseconds or so, a wakeup tens of microseconds).
//!
//! # Cancellation
//!
//! A future whose slot is published and that is dropped takes the slot back
//! with a CAS on the word. If the CAS fails, the partner (or an [`Alt`]) has
//! taken the slot and is a few steps from completing it: the drop waits for
//! those steps. A receiving future completed that way hands its value to the
//! [`Receiver`], whose next receive returns it: a value is never lost.
//!
//! A partner's waker is user code and may panic: the side that completes
//! the rendezvous wakes its partner last, once the value is where the
//! panic cannot lose it (in the receiver's slot, or in the receiver's
//! stash, which its next receive returns). The panic then unwinds out of
//! that side's `send` or `recv` (or `select`); the value is delivered
//! exactly once. If the thread is already unwinding (the operation runs in
//! a `Drop` during a panic), the waker's panic is dropped instead, since a
//! second panic would abort the process, and the operation returns as if
//! the waker had not panicked.
//!
//! # Examples
//!
//! ```
//! use lockfree_sync::csp;
//!
//! let (mut tx, mut rx) = csp::channel();
//! let producer = std::thread::spawn(move || {
//!     for i in 0..3 {
//!         tx.send(i).unwrap(); // returns once the receiver has taken `i`
//!     }
//! });
//! assert_eq!(rx.recv(), Ok(0));
//! assert_eq!(rx.recv(), Ok(1));
//! assert_eq!(rx.recv(), Ok(2));
//! producer.join().unwrap();
//! assert!(rx.recv().is_err()); // the sender is gone
//! ```

mod alt;
mod channel;
mod future;
mod slot;

use sync_core::sync::Arc;
use sync_core::sync::atomic::{AtomicPtr, AtomicU32};

pub use self::alt::{Alt, SelectAsync};
use self::channel::{AltEntry, Published};
pub use self::channel::{Receiver, Sender};
pub use self::future::{RecvAsync, SendAsync};
use self::slot::{Chan, EMPTY, SPINS};
pub use crate::error::{RecvError, SendError, TryRecvError, TrySendError};

/// Creates a CSP channel: a synchronous rendezvous between one [`Sender`]
/// and one [`Receiver`].
///
/// # Examples
///
/// ```
/// let (mut tx, mut rx) = lockfree_sync::csp::channel();
/// std::thread::spawn(move || tx.send("ping").unwrap());
/// assert_eq!(rx.recv(), Ok("ping"));
/// ```
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        word: AtomicPtr::new(EMPTY),
        cpus: [AtomicU32::new(u32::MAX), AtomicU32::new(u32::MAX)],
        budget: AtomicU32::new(SPINS),
    });
    (
        Sender {
            chan: Arc::clone(&chan),
            published: Published::NONE,
            _t: core::marker::PhantomData,
        },
        Receiver {
            chan,
            stash: None,
            published: Published::NONE,
            alt: AltEntry(None),
        },
    )
}
