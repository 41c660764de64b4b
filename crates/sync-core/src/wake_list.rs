//! The wake-ups a primitive owes, collected while it holds something and
//! delivered once it has let go.
//!
//! A primitive that decides, under its own lock or role, which waiters to
//! wake must not wake them there: a thread's unpark is a system call, and a
//! task's waker is user code that may take a while, re-enter the primitive
//! or panic. It therefore hands each waiter its token with
//! [`Waiter::notify_later`](crate::waiter::Waiter::notify_later) (or
//! `notify_deferred`), keeps the returned [`Wakeup`] in a [`WakeList`], and
//! calls [`WakeList::wake_all`] after releasing what it held.
//!
//! The first [`INLINE`] wake-ups are kept without allocating; that covers
//! every primitive that wakes one waiter at a time. Past that,
//! [`push`](WakeList::push) spills to the heap: a waker woken while the
//! primitive still holds its lock or role could need that very lock (a
//! task polled on the spot, a waker that acquires), so no wake-up is ever
//! made early to save an allocation.
//!
//! Waking follows the family's panic policy ([`crate::unwind`]): every
//! waiter is woken even if a waker panics; the first panic is kept in the
//! caller's [`Panics`] to be resumed once the primitive's state is
//! consistent. A `WakeList` dropped with wake-ups in it (an early return, or
//! an unwind) still wakes them, dropping any panic, so that no waiter sleeps
//! for a wake-up it was promised.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::thread;
//! use sync_core::unwind::Panics;
//! use sync_core::wake_list::WakeList;
//! use sync_core::waiter::Waiter;
//!
//! let (tx, rx) = std::sync::mpsc::channel();
//! let sleeper = thread::spawn(move || {
//!     // A thread's waiter is made by the thread that waits.
//!     let waiter = Waiter::for_thread(0);
//!     tx.send(Arc::clone(&waiter)).unwrap();
//!     waiter.wait(false)
//! });
//! let waiter = rx.recv().unwrap();
//!
//! let mut wakes = WakeList::new();
//! // ... under the primitive's lock: hand the token, keep the wake-up ...
//! if let Some(wakeup) = Waiter::notify_deferred(&waiter, 7) {
//!     wakes.push(wakeup);
//! }
//! // ... the lock is released: now wake.
//! let mut panics = Panics::new();
//! wakes.wake_all(&mut panics);
//! panics.resume();
//! assert_eq!(sleeper.join().unwrap(), 7);
//! ```

use crate::unwind::Panics;
use crate::waiter::Wakeup;

/// How many wake-ups a [`WakeList`] keeps without allocating.
pub const INLINE: usize = 4;

/// A list of deferred wake-ups: see the [module docs](self).
#[must_use = "the waiters sleep until the list is woken (or dropped)"]
#[derive(Default)]
pub struct WakeList {
    inline: [Option<Wakeup>; INLINE],
    /// Wake-ups past the first [`INLINE`]; empty (no allocation) until then.
    more: Vec<Wakeup>,
}

// The list's methods are `#[inline]`, so that they are compiled into the
// primitive that uses them: they run on its wake path, around the unpark's
// system call, where a call into this crate's code (elsewhere in the
// binary, and cold after the thread slept) costs a code page's first touch.
impl WakeList {
    /// An empty list; it does not allocate.
    #[inline]
    pub const fn new() -> Self {
        Self {
            inline: [None, None, None, None],
            more: Vec::new(),
        }
    }

    /// Keeps `wakeup` for [`wake_all`](Self::wake_all); allocates only past
    /// [`INLINE`] wake-ups. Runs no user code.
    #[inline]
    pub fn push(&mut self, wakeup: Wakeup) {
        if wakeup.is_done() {
            return;
        }
        match self.inline.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(wakeup),
            None => self.more.push(wakeup),
        }
    }

    /// Takes the kept wake-up if it is the only one (the list is then
    /// empty); `None` if none or more are kept (nothing is taken). For a
    /// primitive that usually keeps one: it wakes that one without moving
    /// the whole list.
    ///
    /// # Examples
    ///
    /// ```
    /// use sync_core::wake_list::WakeList;
    ///
    /// let mut list = WakeList::new();
    /// assert!(list.take_single().is_none());
    /// ```
    #[inline]
    pub fn take_single(&mut self) -> Option<Wakeup> {
        // Slots fill in order, and `more` is used only once they are full.
        if self.inline[1].is_some() {
            return None;
        }
        self.inline[0].take()
    }

    /// How many wake-ups are kept.
    pub fn len(&self) -> usize {
        self.inline.iter().filter(|slot| slot.is_some()).count() + self.more.len()
    }

    /// Whether no wake-up is kept.
    pub fn is_empty(&self) -> bool {
        // Slots fill in order and empty together, and `more` is used only
        // once they are full.
        self.inline[0].is_none()
    }

    /// Wakes every kept waiter, oldest first, whichever wakers panic; the
    /// first panic is kept in `panics` (resume it once the primitive is
    /// consistent). The list is empty afterwards and keeps its allocation.
    #[inline]
    pub fn wake_all(&mut self, panics: &mut Panics) {
        for slot in &mut self.inline {
            if let Some(wakeup) = slot.take() {
                panics.catch(|| wakeup.wake());
            }
        }
        for wakeup in self.more.drain(..) {
            panics.catch(|| wakeup.wake());
        }
    }
}

impl Drop for WakeList {
    #[inline]
    fn drop(&mut self) {
        if !self.is_empty() {
            // The caller returned (or unwound) without waking: the promised
            // wake-ups still happen, and a waker's panic is dropped (by
            // `Panics`' drop), since there is nobody left to hand it to.
            self.wake_all(&mut Panics::new());
        }
    }
}

impl core::fmt::Debug for WakeList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WakeList")
            .field("len", &self.len())
            .finish()
    }
}
