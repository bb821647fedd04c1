//! The two front ends over the state machine in [`crate::raw`]: they differ
//! only in how a waiter waits. A future returns `Pending` with its waker in
//! the queue; a thread parks with its handle in the queue. Both share the
//! one FIFO, the same handoff and the same cancellation rules.

pub(crate) mod blocking;
pub(crate) mod future;
