use std::error::Error;
use std::fmt;

/// Error returned from the `try_*` methods of [`Mutex`](crate::Mutex) and
/// [`RwLock`](crate::RwLock) when the lock is not available right now.
///
/// # Examples
///
/// ```
/// use hybrid_sync::Mutex;
///
/// let m = Mutex::new(1);
/// let _held = m.try_lock().unwrap();
/// let err = m.try_lock().unwrap_err();
/// assert_eq!(err.to_string(), "operation would block");
/// ```
#[derive(Debug)]
pub struct TryLockError(pub(crate) ());

impl fmt::Display for TryLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation would block")
    }
}

impl Error for TryLockError {}
