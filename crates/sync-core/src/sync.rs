//! The one import point for atomics, cells, `Arc`, threads and spin hints.
//!
//! Every crate of the family writes `use sync_core::sync::...` instead of
//! `std::sync::...`. Normally these are the std types at zero cost; under
//! `--cfg loom` they are loom's, so loom sees every access that matters.
//!
//! The two builds differ in one way users may notice: loom's constructors are
//! not `const`, so a primitive that wants a `const fn new` must provide it for
//! `cfg(not(loom))` only.

/// Atomic integer and pointer types, `fence` and `Ordering`.
pub mod atomic {
    #[cfg(not(loom))]
    pub use core::sync::atomic::{
        AtomicBool, AtomicI32, AtomicI64, AtomicIsize, AtomicPtr, AtomicU8, AtomicU16, AtomicU32,
        AtomicU64, AtomicUsize, Ordering, fence,
    };
    #[cfg(loom)]
    pub use loom::sync::atomic::{
        AtomicBool, AtomicI32, AtomicI64, AtomicIsize, AtomicPtr, AtomicU8, AtomicU16, AtomicU32,
        AtomicU64, AtomicUsize, Ordering, fence,
    };
}

#[cfg(not(loom))]
pub use std::sync::Arc;

#[cfg(loom)]
pub use loom::sync::Arc;

/// Thread spawning, parking and yielding.
pub mod thread {
    #[cfg(not(loom))]
    pub use std::thread::{JoinHandle, Thread, current, park, park_timeout, spawn, yield_now};

    #[cfg(loom)]
    pub use loom::thread::{JoinHandle, Thread, current, park, spawn, yield_now};

    /// The processor the calling thread runs on now, if the platform says
    /// (Linux; a couple of nanoseconds through the vDSO). A hint for
    /// waiting policies: spinning for a partner that last ran on this very
    /// processor is wasted, since it cannot run until we stop. `None` under
    /// loom, which has no processors.
    ///
    /// # Examples
    ///
    /// ```
    /// let cpu = sync_core::sync::thread::current_cpu();
    /// # let _ = cpu;
    /// ```
    #[inline]
    pub fn current_cpu() -> Option<u32> {
        #[cfg(all(target_os = "linux", not(loom)))]
        {
            // SAFETY: `sched_getcpu` has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            u32::try_from(cpu).ok()
        }
        #[cfg(not(all(target_os = "linux", not(loom))))]
        {
            None
        }
    }
}

/// Spin-loop hints.
pub mod hint {
    /// Tells the processor that the caller is spinning on a value another
    /// thread will change.
    ///
    /// Under loom this yields to the model's scheduler instead: a loop that
    /// spins without yielding would make loom explore an unbounded number of
    /// identical steps.
    #[inline(always)]
    pub fn spin_loop() {
        #[cfg(not(loom))]
        core::hint::spin_loop();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}

/// Interior mutability checked by loom.
pub mod cell {
    /// `UnsafeCell` with loom's closure API, so that loom can check every
    /// access for data races.
    ///
    /// Access goes through [`with`](UnsafeCell::with) (shared) and
    /// [`with_mut`](UnsafeCell::with_mut) (exclusive); the raw pointer each
    /// closure receives is valid for the closure's duration. The caller keeps
    /// the usual `UnsafeCell` obligations when it dereferences that pointer.
    #[cfg(not(loom))]
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        /// Wraps `value`.
        #[inline(always)]
        pub const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        /// Unwraps the value.
        #[inline(always)]
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    #[cfg(not(loom))]
    impl<T: ?Sized> UnsafeCell<T> {
        /// Runs `f` with a pointer for shared access to the value.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a pointer for exclusive access to the value.
        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    #[cfg(not(loom))]
    impl<T: ?Sized> UnsafeCell<T> {
        /// A pointer for shared access, for guards that outlive a closure.
        #[inline(always)]
        pub fn get(&self) -> ConstPtr<T> {
            ConstPtr(self.0.get())
        }

        /// A pointer for exclusive access, for guards that outlive a closure.
        #[inline(always)]
        pub fn get_mut(&self) -> MutPtr<T> {
            MutPtr(self.0.get())
        }
    }

    /// A shared pointer into an [`UnsafeCell`] (loom tracks its lifetime).
    #[cfg(not(loom))]
    #[derive(Debug)]
    pub struct ConstPtr<T: ?Sized>(*const T);

    #[cfg(not(loom))]
    impl<T: ?Sized> ConstPtr<T> {
        /// Runs `f` with the raw pointer.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0)
        }

        /// Dereferences the pointer.
        ///
        /// # Safety
        ///
        /// No exclusive access to the value may exist while the reference
        /// lives.
        #[inline(always)]
        pub unsafe fn deref(&self) -> &T {
            // SAFETY: the caller guarantees there is no exclusive access.
            unsafe { &*self.0 }
        }
    }

    /// An exclusive pointer into an [`UnsafeCell`] (loom tracks its
    /// lifetime).
    #[cfg(not(loom))]
    #[derive(Debug)]
    pub struct MutPtr<T: ?Sized>(*mut T);

    #[cfg(not(loom))]
    impl<T: ?Sized> MutPtr<T> {
        /// Runs `f` with the raw pointer. A guard's `Deref` derives `&T`
        /// from it directly: going through [`deref`](Self::deref) would
        /// create a `&mut T` first, which invalidates every `&T` handed out
        /// before it.
        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0)
        }

        /// Dereferences the pointer.
        ///
        /// # Safety
        ///
        /// No other access to the value may exist while the reference
        /// lives.
        #[inline(always)]
        #[allow(clippy::mut_from_ref)]
        pub unsafe fn deref(&self) -> &mut T {
            // SAFETY: the caller guarantees the access is exclusive.
            unsafe { &mut *self.0 }
        }
    }

    #[cfg(loom)]
    pub use loom::cell::{ConstPtr, MutPtr, UnsafeCell};
}

/// Defines a constructor that is a `const fn` normally and a plain `fn`
/// under loom, whose types have no `const` constructors: written once, so
/// the two builds cannot drift apart.
///
/// ```
/// use sync_core::sync::atomic::AtomicUsize;
///
/// pub struct Counter(AtomicUsize);
///
/// impl Counter {
///     sync_core::const_unless_loom! {
///         /// A counter at zero.
///         pub fn new() -> Self {
///             Self(AtomicUsize::new(0))
///         }
///     }
/// }
/// # let _ = Counter::new();
/// ```
#[macro_export]
macro_rules! const_unless_loom {
    ($(#[$attr:meta])* $vis:vis fn $name:ident($($args:tt)*) -> $ret:ty $body:block) => {
        $(#[$attr])*
        #[cfg(not(loom))]
        $vis const fn $name($($args)*) -> $ret $body

        $(#[$attr])*
        #[cfg(loom)]
        $vis fn $name($($args)*) -> $ret $body
    };
}
