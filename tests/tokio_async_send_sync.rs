//! Ported from tokio 1.54.1 tests/async_send_sync.rs (MIT licence, (c) Tokio Contributors):
//! the compile-time Send/Sync/Unpin table, lock rows only, with `tokio::sync` swapped
//! for `hybrid_sync`. A row that does not hold fails to compile.
#![allow(dead_code, clippy::all)]
#![warn(rust_2018_idioms)]
#![allow(clippy::type_complexity, clippy::diverging_sub_expression)]
use std::cell::Cell;
use std::rc::Rc;
// The names of these structs behaves better when sorted.
// Send: Yes, Sync: Yes
#[derive(Clone)]
#[allow(unused)]
struct YY {}

// Send: Yes, Sync: No
#[derive(Clone)]
#[allow(unused)]
struct YN {
    _value: Cell<u8>,
}

// Send: No, Sync: No
#[derive(Clone)]
#[allow(unused)]
struct NN {
    _value: Rc<u8>,
}

#[allow(dead_code)]
type BoxFutureSync<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + Sync>>;
#[allow(dead_code)]
type BoxFutureSend<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;
#[allow(dead_code)]
type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

#[allow(dead_code)]
#[allow(dead_code)]
#[allow(dead_code)]
#[allow(dead_code)]
fn require_send<T: Send>(_t: &T) {}
#[allow(dead_code)]
fn require_sync<T: Sync>(_t: &T) {}
#[allow(dead_code)]
fn require_unpin<T: Unpin>(_t: &T) {}

#[allow(dead_code)]
struct Invalid;

#[allow(unused)]
trait AmbiguousIfSend<A> {
    fn some_item(&self) {}
}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
impl<T: ?Sized + Send> AmbiguousIfSend<Invalid> for T {}

#[allow(unused)]
trait AmbiguousIfSync<A> {
    fn some_item(&self) {}
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<Invalid> for T {}

#[allow(unused)]
trait AmbiguousIfUnpin<A> {
    fn some_item(&self) {}
}
impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
impl<T: ?Sized + Unpin> AmbiguousIfUnpin<Invalid> for T {}

macro_rules! into_todo {
    ($typ:ty) => {{
        let x: $typ = todo!();
        x
    }};
}

macro_rules! async_assert_fn_send {
    (Send & $(!)?Sync & $(!)?Unpin, $value:expr) => {
        require_send(&$value);
    };
    (!Send & $(!)?Sync & $(!)?Unpin, $value:expr) => {
        AmbiguousIfSend::some_item(&$value);
    };
}
macro_rules! async_assert_fn_sync {
    ($(!)?Send & Sync & $(!)?Unpin, $value:expr) => {
        require_sync(&$value);
    };
    ($(!)?Send & !Sync & $(!)?Unpin, $value:expr) => {
        AmbiguousIfSync::some_item(&$value);
    };
}
macro_rules! async_assert_fn_unpin {
    ($(!)?Send & $(!)?Sync & Unpin, $value:expr) => {
        require_unpin(&$value);
    };
    ($(!)?Send & $(!)?Sync & !Unpin, $value:expr) => {
        AmbiguousIfUnpin::some_item(&$value);
    };
}

macro_rules! async_assert_fn {
    ($($f:ident $(< $($generic:ty),* > )? )::+($($arg:ty),*): $($tok:tt)*) => {
        #[allow(unreachable_code)]
        #[allow(unused_variables)]
        const _: fn() = || {
            let f = $($f $(::<$($generic),*>)? )::+( $( into_todo!($arg) ),* );
            async_assert_fn_send!($($tok)*, f);
            async_assert_fn_sync!($($tok)*, f);
            async_assert_fn_unpin!($($tok)*, f);
        };
    };
}
macro_rules! assert_value {
    ($type:ty: $($tok:tt)*) => {
        #[allow(unreachable_code)]
        #[allow(unused_variables)]
        const _: fn() = || {
            let f: $type = todo!();
            async_assert_fn_send!($($tok)*, f);
            async_assert_fn_sync!($($tok)*, f);
            async_assert_fn_unpin!($($tok)*, f);
        };
    };
}

assert_value!(hybrid_sync::MappedMutexGuard<'_, NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::MappedMutexGuard<'_, YN>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::MappedMutexGuard<'_, YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::Mutex<NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::Mutex<YN>: Send & Sync & Unpin);
assert_value!(hybrid_sync::Mutex<YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::MutexGuard<'_, NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::MutexGuard<'_, YN>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::MutexGuard<'_, YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::OwnedMutexGuard<NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMutexGuard<YN>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMutexGuard<YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<NN,NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<NN,YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<NN,YY>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<YN,NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<YN,YN>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<YN,YY>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<YY,NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<YY,YN>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedMappedMutexGuard<YY,YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockMappedWriteGuard<NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockMappedWriteGuard<YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockMappedWriteGuard<YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockReadGuard<NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockReadGuard<YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockReadGuard<YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockWriteGuard<NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockWriteGuard<YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::OwnedRwLockWriteGuard<YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::RwLock<NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLock<YN>: Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLock<YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::RwLockMappedWriteGuard<'_, NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLockMappedWriteGuard<'_, YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLockMappedWriteGuard<'_, YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::RwLockReadGuard<'_, NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLockReadGuard<'_, YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLockReadGuard<'_, YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::RwLockWriteGuard<'_, NN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLockWriteGuard<'_, YN>: !Send & !Sync & Unpin);
assert_value!(hybrid_sync::RwLockWriteGuard<'_, YY>: Send & Sync & Unpin);
assert_value!(hybrid_sync::TryLockError: Send & Sync & Unpin);
async_assert_fn!(hybrid_sync::Mutex<NN>::lock(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::Mutex<NN>::lock_owned(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::Mutex<YN>::lock(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::Mutex<YN>::lock_owned(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::Mutex<YY>::lock(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::Mutex<YY>::lock_owned(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<NN>::read(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<NN>::read_owned(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<NN>::write_owned(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YN>::read_owned(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YN>::write_owned(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YY>::read_owned(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YY>::write_owned(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<NN>::write(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YN>::read(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YN>::write(_): !Send & !Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YY>::read(_): Send & Sync & !Unpin);
async_assert_fn!(hybrid_sync::RwLock<YY>::write(_): Send & Sync & !Unpin);

// Rows tokio has no equivalent for: the blocking API returns the same guard
// types, so a guard from a thread can move into a task and back.
#[allow(dead_code)]
fn blocking_guards_are_the_async_guards(m: &hybrid_sync::Mutex<YY>, r: &hybrid_sync::RwLock<YY>) {
    let _: hybrid_sync::MutexGuard<'_, YY> = m.blocking_lock();
    let _: hybrid_sync::RwLockReadGuard<'_, YY> = r.blocking_read();
    let _: hybrid_sync::RwLockWriteGuard<'_, YY> = r.blocking_write();
}
