//! tokio-console visibility, behind the `tracing` feature: each lock made by
//! `RwLock::new`, `RwLock::with_max_readers` or `Mutex::new` is a
//! `runtime.resource` span with tokio's own schema, so tokio-console lists
//! hybrid locks beside tokio's in its Resources view:
//!
//! - at construction, a span `runtime.resource` (`parent: None`,
//!   `concrete_type = "RwLock"` or `"Mutex"`, `kind = "Sync"`, `loc.file`,
//!   `loc.line`, `loc.col` of the caller) and, inside it, state events with
//!   target `runtime::resource::state_update`: `max_readers`,
//!   `write_locked = false`, `current_readers = 0` (RwLock) or
//!   `locked = false` (Mutex);
//! - each acquisition: `current_readers = 1, current_readers.op = "add"` or
//!   `write_locked = true, write_locked.op = "override"` (Mutex:
//!   `locked = true`), and the matching `"sub"` / `false` on release;
//! - each wait of an async acquisition runs inside a
//!   `runtime.resource.async_op` span (`source = "RwLock::read"` and so on,
//!   `inherits_child_attrs = false`) with a `runtime.resource.async_op.poll`
//!   child entered on every poll, which ends with a
//!   `runtime::resource::poll_op` event (`op_name = "poll"`, `is_ready`).
//!
//! tokio's spans take their module path as target (`tokio::sync::rwlock`);
//! ours take `runtime::resource` (and `runtime::resource::async_op`), so
//! the filter console-subscriber installs (`tokio=trace,runtime=trace`)
//! keeps them without any configuration.
//!
//! Differences from tokio, both deliberate: the async-op spans are made
//! only when an acquisition has to wait (the uncontended path stays one
//! compare-and-swap), and nothing is emitted for a lock whose span is
//! disabled (no subscriber wants it) or absent (`const_new` locks, as in
//! tokio, and `LockRef`). Blocking acquisitions emit the same state events.
//! Without the feature every hook is an empty inline function and the lock
//! does not grow.

#[cfg(feature = "tracing")]
mod imp {
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};

    use crate::state::Kind;

    const STATE: &str = "runtime::resource::state_update";

    /// A lock's resource span.
    pub(crate) struct Trace {
        span: tracing::Span,
        mutex: bool,
    }

    impl Trace {
        /// No span: `const_new` locks and `LockRef`.
        pub(crate) const fn none() -> Self {
            Trace { span: tracing::Span::none(), mutex: false }
        }

        #[track_caller]
        fn resource(concrete_type: &'static str) -> tracing::Span {
            let location = core::panic::Location::caller();
            tracing::trace_span!(
                target: "runtime::resource",
                parent: None,
                "runtime.resource",
                concrete_type = concrete_type,
                kind = "Sync",
                loc.file = location.file(),
                loc.line = location.line(),
                loc.col = location.column(),
            )
        }

        /// An `RwLock`'s span, made where the caller's caller stands.
        #[track_caller]
        pub(crate) fn rwlock(max_readers: u32) -> Self {
            let span = Self::resource("RwLock");
            span.in_scope(|| {
                tracing::trace!(target: STATE, max_readers = max_readers);
                tracing::trace!(target: STATE, write_locked = false);
                tracing::trace!(target: STATE, current_readers = 0);
            });
            Trace { span, mutex: false }
        }

        /// A `Mutex`'s span.
        #[track_caller]
        pub(crate) fn mutex() -> Self {
            let span = Self::resource("Mutex");
            span.in_scope(|| tracing::trace!(target: STATE, locked = false));
            Trace { span, mutex: true }
        }

        #[inline]
        fn wanted(&self) -> bool {
            !self.span.is_disabled()
        }

        /// The lock was acquired in mode `kind`.
        #[inline]
        pub(crate) fn acquired(&self, kind: Kind) {
            if self.wanted() {
                self.state(kind, true);
            }
        }

        /// A lock of mode `kind` is being released.
        #[inline]
        pub(crate) fn released(&self, kind: Kind) {
            if self.wanted() {
                self.state(kind, false);
            }
        }

        /// The write lock became a read lock.
        #[inline]
        pub(crate) fn downgraded(&self) {
            if self.wanted() {
                self.state(Kind::Write, false);
                self.state(Kind::Read, true);
            }
        }

        #[cold]
        fn state(&self, kind: Kind, held: bool) {
            self.span.in_scope(|| match (self.mutex, kind, held) {
                (true, _, locked) => tracing::trace!(target: STATE, locked = locked),
                (false, Kind::Write, locked) => {
                    tracing::trace!(target: STATE, write_locked = locked, write_locked.op = "override")
                }
                (false, Kind::Read, true) => {
                    tracing::trace!(target: STATE, current_readers = 1, current_readers.op = "add")
                }
                (false, Kind::Read, false) => {
                    tracing::trace!(target: STATE, current_readers = 1, current_readers.op = "sub")
                }
            });
        }

        /// `inner`, an acquisition that has to wait, inside the async-op
        /// spans tokio-console expects.
        #[inline]
        pub(crate) fn async_op<F: Future>(&self, inner: F, source: &'static str) -> AsyncOp<F> {
            if !self.wanted() {
                return AsyncOp { inner, spans: None };
            }
            let spans = self.span.in_scope(|| {
                let async_op =
                    tracing::trace_span!(target: "runtime::resource::async_op", "runtime.resource.async_op", source = source, inherits_child_attrs = false);
                let poll = async_op.in_scope(|| {
                    tracing::trace_span!(target: "runtime::resource::async_op", "runtime.resource.async_op.poll")
                });
                [self.span.clone(), async_op, poll]
            });
            AsyncOp { inner, spans: Some(spans) }
        }
    }

    /// A future inside a lock's async-op spans (resource, async op, poll).
    pub(crate) struct AsyncOp<F> {
        inner: F,
        spans: Option<[tracing::Span; 3]>,
    }

    impl<F: Future> Future for AsyncOp<F> {
        type Output = F::Output;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            // SAFETY: `inner` is structurally pinned: it is never moved out
            // of `self` (no method hands it out by value) and is dropped in
            // place with `self`; `spans` is not pinned (it is only read).
            let this = unsafe { self.get_unchecked_mut() };
            // SAFETY: see above; `this` stays pinned for as long as `inner`.
            let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
            let Some(spans) = &this.spans else {
                return inner.poll(cx);
            };
            let _resource = spans[0].enter();
            let _async_op = spans[1].enter();
            let _poll = spans[2].enter();
            let result = inner.poll(cx);
            tracing::trace!(target: "runtime::resource::poll_op", op_name = "poll", is_ready = result.is_ready());
            result
        }
    }
}

#[cfg(not(feature = "tracing"))]
mod imp {
    use crate::state::Kind;

    /// No span: zero-sized.
    pub(crate) struct Trace;

    impl Trace {
        pub(crate) const fn none() -> Self {
            Trace
        }
        #[inline(always)]
        pub(crate) fn rwlock(_max_readers: u32) -> Self {
            Trace
        }
        #[inline(always)]
        pub(crate) fn mutex() -> Self {
            Trace
        }
        #[inline(always)]
        pub(crate) fn acquired(&self, _: Kind) {}
        #[inline(always)]
        pub(crate) fn released(&self, _: Kind) {}
        #[inline(always)]
        pub(crate) fn downgraded(&self) {}
        #[inline(always)]
        pub(crate) fn async_op<F>(&self, inner: F, _source: &'static str) -> F {
            inner
        }
    }

    /// No spans: the future itself.
    pub(crate) type AsyncOp<F> = F;
}

pub(crate) use imp::{AsyncOp, Trace};
