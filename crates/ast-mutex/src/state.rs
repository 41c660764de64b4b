//! Abstract states and sets of them.

use core::fmt;
use core::marker::PhantomData;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not, Sub, SubAssign};

/// A small enumeration of the abstract states of a guarded object.
///
/// Implement it with [`states!`](crate::states), which also gives the `|`
/// that builds a [`StateSet`]. A hand-written implementation must number its
/// states `0..COUNT` with `COUNT <= 64`, and `from_index(s.index()) == s`.
pub trait AbstractState: Copy + Eq + fmt::Debug + 'static {
    /// How many states there are (at most 64).
    const COUNT: u32;

    /// The state's number, in `0..COUNT`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ast_mutex::AbstractState;
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!(L::C.index(), 2);
    /// ```
    fn index(self) -> u32;

    /// The state numbered `index`.
    ///
    /// # Panics
    ///
    /// If `index >= COUNT`.
    ///
    /// # Examples
    ///
    /// ```
    /// use ast_mutex::AbstractState;
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!(L::from_index(1), L::B);
    /// ```
    fn from_index(index: u32) -> Self;
}

/// A set of abstract states: an entry set, held as a 64-bit mask.
///
/// Build one with `|` between states, from a single state (`From`), or from
/// [`ALL`](Self::ALL) and [`EMPTY`](Self::EMPTY). The set operators work
/// between sets and with single states: `|` and `|=` (union), `&` and `&=`
/// (intersection), `-` and `-=` (difference), `!` (complement within
/// [`ALL`](Self::ALL)); [`is_subset`](Self::is_subset) and
/// [`is_superset`](Self::is_superset) compare.
///
/// In a `const`, build sets with the `into_set` method that
/// [`states!`](crate::states) gives each state, and the `const fn`s
/// [`union`](Self::union), [`intersection`](Self::intersection),
/// [`difference`](Self::difference) and [`complement`](Self::complement).
///
/// # Examples
///
/// ```
/// ast_mutex::states! { enum Level { Empty, Mid, Full } }
/// use ast_mutex::StateSet;
///
/// let not_full = Level::Empty | Level::Mid;
/// assert!(not_full.contains(Level::Mid));
/// assert!(!not_full.contains(Level::Full));
/// assert_eq!(!not_full, StateSet::from(Level::Full));
/// assert_eq!(not_full.iter().collect::<Vec<_>>(), [Level::Empty, Level::Mid]);
/// assert_eq!(StateSet::<Level>::ALL.len(), 3);
///
/// let mut set = StateSet::ALL - Level::Full;
/// assert_eq!(set, not_full);
/// set &= Level::Mid | Level::Full;
/// assert_eq!(set, Level::Mid.into());
/// set |= Level::Empty | Level::Full;
/// assert!(not_full.is_subset(StateSet::ALL) && !not_full.is_subset(set - Level::Empty));
///
/// const NOT_EMPTY: StateSet<Level> = Level::Mid.into_set().union(Level::Full.into_set());
/// assert_eq!(NOT_EMPTY, Level::Mid | Level::Full);
/// ```
pub struct StateSet<S> {
    bits: u64,
    _states: PhantomData<fn() -> S>,
}

impl<S: AbstractState> StateSet<S> {
    /// No state: a set that `enter` refuses, since it could never return.
    pub const EMPTY: Self = Self::from_bits_unchecked(0);

    /// Every state of `S`.
    pub const ALL: Self = Self::from_bits_unchecked(if S::COUNT >= 64 {
        u64::MAX
    } else {
        (1u64 << S::COUNT) - 1
    });

    #[doc(hidden)]
    /// For [`states!`](crate::states)' `into_set`: `bits` must name states
    /// of `S` only.
    pub const fn __from_bits_unchecked(bits: u64) -> Self {
        Self::from_bits_unchecked(bits)
    }

    const fn from_bits_unchecked(bits: u64) -> Self {
        Self {
            bits,
            _states: PhantomData,
        }
    }

    /// The set whose mask is `bits` (bit `i` for the state numbered `i`).
    ///
    /// # Panics
    ///
    /// If `bits` names a state `S` does not have.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// let set = ast_mutex::StateSet::<L>::from_bits(0b101);
    /// assert_eq!(set, L::A | L::C);
    /// ```
    pub fn from_bits(bits: u64) -> Self {
        assert!(
            bits & !Self::ALL.bits == 0,
            "StateSet::from_bits: {bits:#x} names states beyond the {} of {}",
            S::COUNT,
            core::any::type_name::<S>()
        );
        Self::from_bits_unchecked(bits)
    }

    /// The mask: bit `i` for the state numbered `i`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!((L::A | L::C).bits(), 0b101);
    /// ```
    pub const fn bits(self) -> u64 {
        self.bits
    }

    /// Whether `state` is in the set.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert!((L::A | L::B).contains(L::B));
    /// assert!(!(L::A | L::B).contains(L::C));
    /// ```
    pub fn contains(self, state: S) -> bool {
        self.bits & bit(state) != 0
    }

    /// Whether the set has no state.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert!(ast_mutex::StateSet::<L>::EMPTY.is_empty());
    /// assert!(!ast_mutex::StateSet::from(L::A).is_empty());
    /// ```
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// How many states the set has.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!((L::A | L::C).len(), 2);
    /// ```
    pub const fn len(self) -> usize {
        self.bits.count_ones() as usize
    }

    /// The states in `self` or `other` (`|`), in a `const`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// const AB: ast_mutex::StateSet<L> = L::A.into_set().union(L::B.into_set());
    /// assert_eq!(AB, L::A | L::B);
    /// ```
    pub const fn union(self, other: Self) -> Self {
        Self::from_bits_unchecked(self.bits | other.bits)
    }

    /// The states in both `self` and `other` (`&`), in a `const`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!((L::A | L::B).intersection(L::B | L::C), L::B.into());
    /// ```
    pub const fn intersection(self, other: Self) -> Self {
        Self::from_bits_unchecked(self.bits & other.bits)
    }

    /// The states in `self` but not in `other` (`-`), in a `const`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!((L::A | L::B).difference(L::B.into()), L::A.into());
    /// ```
    pub const fn difference(self, other: Self) -> Self {
        Self::from_bits_unchecked(self.bits & !other.bits)
    }

    /// The states of `S` not in `self` (`!`), in a `const`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert_eq!((L::A | L::B).complement(), L::C.into());
    /// ```
    pub const fn complement(self) -> Self {
        Self::from_bits_unchecked(!self.bits & Self::ALL.bits)
    }

    /// Whether every state of `self` is in `other`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert!(ast_mutex::StateSet::from(L::A).is_subset(L::A | L::B));
    /// assert!(!(L::A | L::C).is_subset(L::A | L::B));
    /// ```
    pub const fn is_subset(self, other: Self) -> bool {
        self.bits & !other.bits == 0
    }

    /// Whether every state of `other` is in `self`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert!((L::A | L::B).is_superset(L::A.into()));
    /// ```
    pub const fn is_superset(self, other: Self) -> bool {
        other.is_subset(self)
    }

    /// Whether `self` and `other` have no state in common.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// assert!((L::A | L::B).is_disjoint(L::C.into()));
    /// ```
    pub const fn is_disjoint(self, other: Self) -> bool {
        self.bits & other.bits == 0
    }

    /// Adds `state`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// let mut set = ast_mutex::StateSet::from(L::A);
    /// set.insert(L::C);
    /// assert_eq!(set, L::A | L::C);
    /// ```
    pub fn insert(&mut self, state: S) {
        self.bits |= bit(state);
    }

    /// Removes `state`.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// let mut set = L::A | L::C;
    /// set.remove(L::A);
    /// assert_eq!(set, L::C.into());
    /// ```
    pub fn remove(&mut self, state: S) {
        self.bits &= !bit(state);
    }

    /// The states in the set, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// ast_mutex::states! { enum L { A, B, C } }
    /// let states: Vec<L> = (L::C | L::A).iter().collect();
    /// assert_eq!(states, [L::A, L::C]);
    /// ```
    pub fn iter(self) -> Iter<S> {
        Iter {
            bits: self.bits,
            _states: PhantomData,
        }
    }
}

fn bit<S: AbstractState>(state: S) -> u64 {
    1 << crate::mutex::state_index(state)
}

impl<S> Clone for StateSet<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for StateSet<S> {}
impl<S> PartialEq for StateSet<S> {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
    }
}
impl<S> Eq for StateSet<S> {}
impl<S> core::hash::Hash for StateSet<S> {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.bits.hash(h);
    }
}
impl<S: AbstractState> Default for StateSet<S> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<S: AbstractState> fmt::Debug for StateSet<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl<S: AbstractState> From<S> for StateSet<S> {
    fn from(state: S) -> Self {
        Self::from_bits_unchecked(bit(state))
    }
}

impl<S: AbstractState> BitOr for StateSet<S> {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self::from_bits_unchecked(self.bits | rhs.bits)
    }
}

impl<S: AbstractState> BitOr<S> for StateSet<S> {
    type Output = Self;
    fn bitor(self, rhs: S) -> Self {
        Self::from_bits_unchecked(self.bits | bit(rhs))
    }
}

impl<S: AbstractState> BitOrAssign<S> for StateSet<S> {
    fn bitor_assign(&mut self, rhs: S) {
        self.insert(rhs);
    }
}

impl<S: AbstractState> BitAnd for StateSet<S> {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        Self::from_bits_unchecked(self.bits & rhs.bits)
    }
}

impl<S: AbstractState> BitOrAssign for StateSet<S> {
    fn bitor_assign(&mut self, rhs: Self) {
        self.bits |= rhs.bits;
    }
}

impl<S: AbstractState> BitAnd<S> for StateSet<S> {
    type Output = Self;
    fn bitand(self, rhs: S) -> Self {
        Self::from_bits_unchecked(self.bits & bit(rhs))
    }
}

impl<S: AbstractState> BitAndAssign for StateSet<S> {
    fn bitand_assign(&mut self, rhs: Self) {
        self.bits &= rhs.bits;
    }
}

impl<S: AbstractState> BitAndAssign<S> for StateSet<S> {
    fn bitand_assign(&mut self, rhs: S) {
        self.bits &= bit(rhs);
    }
}

impl<S: AbstractState> Sub for StateSet<S> {
    type Output = Self;
    fn sub(self, rhs: Self) -> Self {
        self.difference(rhs)
    }
}

impl<S: AbstractState> Sub<S> for StateSet<S> {
    type Output = Self;
    fn sub(self, rhs: S) -> Self {
        Self::from_bits_unchecked(self.bits & !bit(rhs))
    }
}

impl<S: AbstractState> SubAssign for StateSet<S> {
    fn sub_assign(&mut self, rhs: Self) {
        self.bits &= !rhs.bits;
    }
}

impl<S: AbstractState> SubAssign<S> for StateSet<S> {
    fn sub_assign(&mut self, rhs: S) {
        self.remove(rhs);
    }
}

impl<S: AbstractState> Not for StateSet<S> {
    type Output = Self;
    /// The complement within [`ALL`](StateSet::ALL).
    fn not(self) -> Self {
        Self::from_bits_unchecked(!self.bits & Self::ALL.bits)
    }
}

impl<S: AbstractState> FromIterator<S> for StateSet<S> {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut set = Self::EMPTY;
        iter.into_iter().for_each(|s| set.insert(s));
        set
    }
}

impl<S: AbstractState> IntoIterator for StateSet<S> {
    type Item = S;
    type IntoIter = Iter<S>;
    fn into_iter(self) -> Iter<S> {
        self.iter()
    }
}

/// The states of a [`StateSet`], in index order.
#[derive(Clone, Debug)]
pub struct Iter<S> {
    bits: u64,
    _states: PhantomData<fn() -> S>,
}

impl<S: AbstractState> Iterator for Iter<S> {
    type Item = S;
    fn next(&mut self) -> Option<S> {
        if self.bits == 0 {
            return None;
        }
        let i = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        Some(S::from_index(i))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bits.count_ones() as usize;
        (n, Some(n))
    }
}

impl<S: AbstractState> ExactSizeIterator for Iter<S> {}

/// Declares an enumeration of abstract states and implements
/// [`AbstractState`](crate::AbstractState) and `|` for it, with a
/// `const fn into_set(self)` that makes a one-state [`StateSet`](crate::StateSet).
///
/// At most 64 states; more is a compile error.
///
/// # Examples
///
/// ```
/// ast_mutex::states! {
///     /// How full a buffer is.
///     pub enum Buf { Empty, Mid, Full }
/// }
/// use ast_mutex::AbstractState;
///
/// assert_eq!(Buf::COUNT, 3);
/// assert!((Buf::Empty | Buf::Mid).contains(Buf::Empty));
/// ```
///
/// ```compile_fail
/// ast_mutex::states! { enum TooMany {
///     S0, S1, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, S12, S13, S14, S15,
///     S16, S17, S18, S19, S20, S21, S22, S23, S24, S25, S26, S27, S28, S29, S30, S31,
///     S32, S33, S34, S35, S36, S37, S38, S39, S40, S41, S42, S43, S44, S45, S46, S47,
///     S48, S49, S50, S51, S52, S53, S54, S55, S56, S57, S58, S59, S60, S61, S62, S63,
///     S64,
/// } }
/// ```
#[macro_export]
macro_rules! states {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            const __AST_STATES: &'static [$name] = &[$($name::$variant),+];
        }

        const _: () = ::core::assert!(
            $name::__AST_STATES.len() <= 64,
            "an AstMutex supports at most 64 abstract states"
        );

        impl $crate::AbstractState for $name {
            const COUNT: u32 = $name::__AST_STATES.len() as u32;

            #[inline]
            fn index(self) -> u32 {
                self as u32
            }

            #[inline]
            fn from_index(index: u32) -> Self {
                match $name::__AST_STATES.get(index as usize) {
                    ::core::option::Option::Some(s) => *s,
                    ::core::option::Option::None => ::core::panic!(
                        "{} has no state numbered {}", ::core::stringify!($name), index
                    ),
                }
            }
        }

        impl $name {
            /// The set of this one state, in a `const` (`StateSet::from`
            /// elsewhere).
            #[allow(dead_code)]
            pub const fn into_set(self) -> $crate::StateSet<$name> {
                $crate::StateSet::<$name>::__from_bits_unchecked(1u64 << (self as u32))
            }
        }

        impl ::core::ops::BitOr for $name {
            type Output = $crate::StateSet<$name>;
            #[inline]
            fn bitor(self, rhs: Self) -> $crate::StateSet<$name> {
                $crate::StateSet::from(self) | rhs
            }
        }

        impl ::core::ops::BitOr<$crate::StateSet<$name>> for $name {
            type Output = $crate::StateSet<$name>;
            #[inline]
            fn bitor(self, rhs: $crate::StateSet<$name>) -> $crate::StateSet<$name> {
                rhs | self
            }
        }
    };
}
