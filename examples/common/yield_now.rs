//! A yield for executors other than tokio's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Ready at its second poll, waking its task at the first: tokio's
/// `yield_now` without tokio (which `LocalPool` has none of).
pub struct YieldNow(pub bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
