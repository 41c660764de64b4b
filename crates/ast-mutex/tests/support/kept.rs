//! What the owed-serve tests share: 64 states (enough distinct entry sets
//! to make the waiter table's walk long) and a future whose wakeup is kept
//! on the polling thread until its next park hook.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use ast_mutex::{AbstractState, StateSet};
use sync_core::wake_chain;

/// 64 states: enough distinct entry sets to make the table's walk long.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct S(pub u8);

impl AbstractState for S {
    const COUNT: u32 = 64;
    fn index(self) -> u32 {
        u32::from(self.0)
    }
    fn from_index(i: u32) -> Self {
        assert!(i < 64);
        S(i as u8)
    }
}

pub fn one(s: u8) -> StateSet<S> {
    StateSet::from_bits(1 << s)
}

std::thread_local! {
    /// The task wakeups this thread keeps until it parks.
    static KEPT: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
}

/// The park hook's delivery: wakes what the thread keeps.
fn deliver() {
    let kept: Vec<Waker> = KEPT.with(|k| std::mem::take(&mut *k.borrow_mut()));
    kept.into_iter().for_each(Waker::wake);
}

/// Pending once, its wakeup kept on the polling thread until that thread's
/// next park hook (as an active monitor keeps a body's task wakeups).
pub struct KeptYield(pub bool);

impl Future for KeptYield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        KEPT.with(|k| k.borrow_mut().push(cx.waker().clone()));
        wake_chain::deliver_before_park(deliver);
        Poll::Pending
    }
}
