//! The machinery every guard shares, so the ten public guard types are thin
//! wrappers instead of ten copies of the same unsafe code.

use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use std::sync::Arc;

use crate::raw::RawRwLock;
use crate::state::Kind;

/// Something that keeps a lock alive: a reference or an `Arc`.
pub(crate) trait Holder {
    fn raw(&self) -> &RawRwLock;
}

impl Holder for &RawRwLock {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        self
    }
}

impl<L: Holder + ?Sized> Holder for &L {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        (**self).raw()
    }
}

impl<L: Holder + ?Sized> Holder for Arc<L> {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        (**self).raw()
    }
}

/// A held lock: the holder, the data the guard points at, and the mode to
/// release on drop (`WRITE`).
///
/// # Safety
///
/// While a `Held` exists, its holder's raw lock is held in its mode on the
/// `Held`'s behalf, and `data` points into the lock's data.
pub(crate) struct Held<H: Holder, U: ?Sized, const WRITE: bool> {
    holder: ManuallyDrop<H>,
    data: NonNull<U>,
}

impl<H: Holder, U: ?Sized, const WRITE: bool> Held<H, U, WRITE> {
    /// # Safety
    /// The caller holds `holder`'s lock in mode `WRITE` and gives it to the
    /// new value; `data` points into the lock's data.
    #[inline]
    pub(crate) unsafe fn new(holder: H, data: NonNull<U>) -> Self {
        Held { holder: ManuallyDrop::new(holder), data }
    }

    #[inline]
    pub(crate) fn holder(&self) -> &H {
        &self.holder
    }

    #[inline]
    pub(crate) fn data(&self) -> NonNull<U> {
        self.data
    }

    /// Takes the holder out without releasing the lock.
    #[inline]
    fn into_holder(self) -> H {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the holder is moved out once.
        unsafe { ManuallyDrop::take(&mut this.holder) }
    }

    /// Re-points the guard, possibly under a different holder. `f` runs
    /// first, with the lock still held by `self`: if it panics, `self` is
    /// dropped and the lock released; if it returns `None`, `self` comes back.
    #[inline]
    pub(crate) fn try_remap<H2: Holder, V: ?Sized>(
        self,
        holder: impl FnOnce(H) -> H2,
        f: impl FnOnce(NonNull<U>) -> Option<NonNull<V>>,
    ) -> Result<Held<H2, V, WRITE>, Self> {
        match f(self.data) {
            // SAFETY: the lock moves from `self` to the new value unchanged.
            Some(data) => Ok(unsafe { Held::new(holder(self.into_holder()), data) }),
            None => Err(self),
        }
    }

    /// [`try_remap`](Self::try_remap) for a mapping that cannot fail.
    #[inline]
    pub(crate) fn remap<H2: Holder, V: ?Sized>(
        self,
        holder: impl FnOnce(H) -> H2,
        f: impl FnOnce(NonNull<U>) -> NonNull<V>,
    ) -> Held<H2, V, WRITE> {
        match self.try_remap(holder, |d| Some(f(d))) {
            Ok(held) => held,
            Err(_) => unreachable!(),
        }
    }
}

impl<H: Holder, U: ?Sized> Held<H, U, true> {
    /// Turns the write lock into a read lock of the (re-pointed) data. `f`
    /// runs while the write lock is still held, so nobody can read between.
    #[inline]
    pub(crate) fn try_downgrade<V: ?Sized>(
        self,
        f: impl FnOnce(NonNull<U>) -> Option<NonNull<V>>,
    ) -> Result<Held<H, V, false>, Self> {
        let data = match f(self.data) {
            Some(data) => data,
            None => return Err(self),
        };
        let holder = self.into_holder();
        // SAFETY: we held the write lock; it becomes the read lock we hand on.
        unsafe {
            holder.raw().downgrade();
            Ok(Held::new(holder, data))
        }
    }
}

impl<H: Holder, U: ?Sized, const WRITE: bool> Drop for Held<H, U, WRITE> {
    #[inline]
    fn drop(&mut self) {
        let kind = if WRITE { Kind::Write } else { Kind::Read };
        // SAFETY: we hold the lock in this mode (type invariant). It is
        // released before the holder goes: an `Arc` holder may be the last
        // one, and the lock must not be touched after it is freed.
        unsafe {
            self.holder.raw().unlock(kind);
            ManuallyDrop::drop(&mut self.holder);
        }
    }
}

/// `NonNull` from a reference, for mapping closures.
#[inline]
pub(crate) fn nn<V: ?Sized>(r: &V) -> NonNull<V> {
    NonNull::from(r)
}

/// `NonNull` from a mutable reference, for mapping closures.
#[inline]
pub(crate) fn nn_mut<V: ?Sized>(r: &mut V) -> NonNull<V> {
    NonNull::from(r)
}

/// `Deref` (and `DerefMut` for write guards), `Debug` and `Display` for a
/// public guard type whose `inner` is a [`Held`]. One definition, so the
/// guards cannot drift apart.
macro_rules! impl_guard_traits {
    (ref, [$($generics:tt)*] $guard:ty => $target:ty) => {
        impl<$($generics)*> core::ops::Deref for $guard {
            type Target = $target;
            #[inline]
            fn deref(&self) -> &$target {
                // SAFETY: the guard holds the lock, so the data is valid and
                // not written by anyone else while this borrow lasts.
                unsafe { self.inner.data().as_ref() }
            }
        }
        impl<$($generics)*> core::fmt::Debug for $guard
        where
            $target: core::fmt::Debug,
        {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&**self, f)
            }
        }
        impl<$($generics)*> core::fmt::Display for $guard
        where
            $target: core::fmt::Display,
        {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Display::fmt(&**self, f)
            }
        }
    };
    (mut, [$($generics:tt)*] $guard:ty => $target:ty) => {
        $crate::guard::impl_guard_traits!(ref, [$($generics)*] $guard => $target);
        impl<$($generics)*> core::ops::DerefMut for $guard {
            #[inline]
            fn deref_mut(&mut self) -> &mut $target {
                // SAFETY: the guard holds the lock exclusively.
                unsafe { self.inner.data().as_mut() }
            }
        }
    };
}
pub(crate) use impl_guard_traits;
