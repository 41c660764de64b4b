//! The last task a thread waited for, kept by that thread.
//!
//! A blocking [`wait`](super::Completion::wait) takes the task's result
//! and would then drop the task: usually its last reference, since the
//! executor let go of it when it finished. That drop runs no user code
//! (the body is gone, the result taken, and only tasks whose precondition
//! needs no drop are kept), but it runs on the woken thread's way back to
//! its caller, on memory and code that went cold while the thread slept.
//! So the thread keeps the task instead (one per thread) and drops it
//! where it has time: before it next parks for a completion, when it keeps
//! another task, or when it exits.

// Under loom nothing is kept (see `KEPT`).
#![cfg_attr(loom, allow(dead_code))]

#[cfg(not(loom))]
use core::cell::Cell;
use core::mem::MaybeUninit;
use std::sync::Arc;

use super::HasSlot;

/// A `*const dyn HasSlot<R>` whose `R` is known only to the function that
/// drops it ([`Kept::release`]).
type Erased = MaybeUninit<[usize; 2]>;

/// A kept task: the pointer `Arc::into_raw` gave, and how to drop it.
struct Kept {
    raw: Erased,
    /// `release::<R>` for the `R` that [`keep`] was called with.
    release: unsafe fn(Erased),
}

impl Drop for Kept {
    fn drop(&mut self) {
        // SAFETY: `raw` was written by `keep::<R>` and `release` is
        // `release::<R>`; a `Kept` is dropped once.
        unsafe { (self.release)(self.raw) }
    }
}

/// Drops the `Arc<dyn HasSlot<R>>` that `keep::<R>` wrote into `raw`.
///
/// # Safety
///
/// `raw` holds a pointer from `Arc::<dyn HasSlot<R>>::into_raw`, not yet
/// given back.
unsafe fn release<R>(raw: Erased) {
    // SAFETY: our caller's contract: the same type `keep` wrote.
    let task = unsafe { raw.as_ptr().cast::<*const dyn HasSlot<R>>().read() };
    // SAFETY: from `Arc::into_raw`, given back once.
    drop(unsafe { Arc::from_raw(task) });
}

// Under loom there is no keeping: its model threads share one OS thread,
// and a task (with loom atomics inside) kept past its execution would be
// dropped in another.
#[cfg(not(loom))]
std::thread_local! {
    static KEPT: Cell<Option<Kept>> = const { Cell::new(None) };
}

/// Keeps `task` for the calling thread to drop later, and drops the task
/// kept before (if the thread did not park since). A thread whose
/// thread-locals are being destroyed keeps nothing: the task is handed
/// back.
///
/// # Safety
///
/// Once the task's result is taken, dropping it runs no user code and
/// touches nothing that may be gone by the thread's next park or exit
/// (`Completion::shared_kept`'s contract).
pub(super) unsafe fn keep<R>(task: Arc<dyn HasSlot<R>>) -> Option<Arc<dyn HasSlot<R>>> {
    #[cfg(not(loom))]
    {
        let kept = Cell::new(Some(Kept::new(task)));
        let before = KEPT.try_with(|k| k.replace(kept.take()));
        drop(before);
        // Still here if the thread-local is gone: handed back.
        // SAFETY: made by `Kept::new::<R>` above.
        kept.take().map(|k| unsafe { k.into_task::<R>() })
    }
    #[cfg(loom)]
    Some(task)
}

impl Kept {
    #[inline]
    fn new<R>(task: Arc<dyn HasSlot<R>>) -> Self {
        const {
            assert!(size_of::<*const dyn HasSlot<R>>() <= size_of::<Erased>());
            assert!(align_of::<*const dyn HasSlot<R>>() <= align_of::<Erased>());
        }
        let mut raw = Erased::uninit();
        // SAFETY: `raw` is large and aligned enough (asserted above).
        unsafe {
            raw.as_mut_ptr()
                .cast::<*const dyn HasSlot<R>>()
                .write(Arc::into_raw(task));
        }
        Self {
            raw,
            release: release::<R>,
        }
    }

    /// The task back, not dropped.
    ///
    /// # Safety
    ///
    /// Made by `Kept::new::<R>`.
    #[cfg(not(loom))]
    unsafe fn into_task<R>(self) -> Arc<dyn HasSlot<R>> {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: our caller's contract: the type `new` wrote, given back
        // once (`this` is not dropped).
        unsafe { Arc::from_raw(this.raw.as_ptr().cast::<*const dyn HasSlot<R>>().read()) }
    }
}

/// Drops the task the calling thread keeps, if any: before it parks.
pub(super) fn release_kept() {
    #[cfg(not(loom))]
    drop(KEPT.try_with(Cell::take));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Weak;
    use std::thread;

    use super::*;
    use crate::completion::ResultSlot;

    /// A task stand-in, and a `Weak` that tells whether it is still alive.
    fn task() -> (Arc<dyn HasSlot<u64>>, Weak<dyn HasSlot<u64>>) {
        let task = Arc::new(ResultSlot::<u64>::new()) as Arc<dyn HasSlot<u64>>;
        let alive = Arc::downgrade(&task);
        (task, alive)
    }

    /// Keeps `task`; whether the thread kept it.
    fn keep_task(task: Arc<dyn HasSlot<u64>>) -> bool {
        // SAFETY: a bare slot whose value was never written: its drop runs
        // no user code.
        unsafe { keep(task) }.is_none()
    }

    #[test]
    fn a_kept_task_lives_until_the_thread_next_parks() {
        thread::spawn(|| {
            let (task, alive) = task();
            assert!(keep_task(task));
            assert!(alive.upgrade().is_some(), "kept");
            release_kept();
            assert!(alive.upgrade().is_none(), "dropped before the park");
            release_kept(); // nothing kept: nothing to do
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_keeps_one_task_the_one_before_is_dropped() {
        thread::spawn(|| {
            let (first, first_alive) = task();
            let (second, second_alive) = task();
            assert!(keep_task(first));
            assert!(keep_task(second));
            assert!(first_alive.upgrade().is_none(), "the one before is dropped");
            assert!(second_alive.upgrade().is_some());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_kept_task_is_dropped_when_its_thread_exits() {
        let alive = thread::spawn(|| {
            let (task, alive) = task();
            assert!(keep_task(task));
            alive
        })
        .join()
        .unwrap();
        assert!(alive.upgrade().is_none());
    }

    /// From a thread-local's destructor that runs after `KEPT`'s (it was
    /// created before the thread kept anything), a task is handed back.
    #[test]
    fn a_thread_whose_thread_local_is_gone_hands_the_task_back() {
        use std::cell::RefCell;
        use std::sync::Mutex;
        static KEPT_IN_DROP: Mutex<Option<bool>> = Mutex::new(None);
        struct KeepsInDrop;
        impl Drop for KeepsInDrop {
            fn drop(&mut self) {
                let (task, _) = task();
                *KEPT_IN_DROP.lock().unwrap() = Some(keep_task(task));
            }
        }
        thread_local! {
            static LATE: RefCell<Option<KeepsInDrop>> = const { RefCell::new(None) };
        }
        thread::spawn(|| {
            LATE.with(|l| *l.borrow_mut() = Some(KeepsInDrop));
            // `KEPT` registers its destructor after `LATE`'s: it runs
            // first.
            let (task, _) = task();
            assert!(keep_task(task));
        })
        .join()
        .unwrap();
        assert_eq!(*KEPT_IN_DROP.lock().unwrap(), Some(false));
    }
}
