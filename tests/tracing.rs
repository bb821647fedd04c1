//! tokio-console's resource-span schema (`--features tracing`), checked
//! with a recording subscriber: what tokio's `tests/tracing_sync.rs` checks
//! of tokio's own locks, plus acquisitions, waits and cancellations.
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use hybrid_sync::{Mutex, RwLock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Clone, Debug)]
struct SpanRec {
    name: &'static str,
    target: String,
    fields: BTreeMap<String, String>,
    parent: Option<u64>,
}

#[derive(Clone, Debug)]
struct EventRec {
    target: String,
    fields: BTreeMap<String, String>,
    /// The innermost entered span (or the explicit parent).
    span: Option<u64>,
}

#[derive(Default)]
struct Log {
    spans: BTreeMap<u64, SpanRec>,
    events: Vec<EventRec>,
}

/// Records every span and event; one per test, on the test's thread.
#[derive(Clone, Default)]
struct Recorder {
    next: Arc<AtomicUsize>,
    log: Arc<StdMutex<Log>>,
    stack: Arc<StdMutex<Vec<u64>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) as u64 + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = if let Some(p) = attrs.parent() {
            Some(p.into_u64())
        } else if attrs.is_contextual() {
            self.stack.lock().unwrap().last().copied()
        } else {
            None
        };
        let rec = SpanRec { name: attrs.metadata().name(), target: attrs.metadata().target().into(), fields, parent };
        self.log.lock().unwrap().spans.insert(id, rec);
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let span = match event.parent() {
            Some(p) => Some(p.into_u64()),
            None => self.stack.lock().unwrap().last().copied(),
        };
        let target = event.metadata().target().to_string();
        self.log.lock().unwrap().events.push(EventRec { target, fields, span });
    }
    fn enter(&self, id: &Id) {
        self.stack.lock().unwrap().push(id.into_u64());
    }
    fn exit(&self, id: &Id) {
        let mut stack = self.stack.lock().unwrap();
        let pos = stack.iter().rposition(|&s| s == id.into_u64()).expect("exit of an entered span");
        stack.remove(pos);
    }
}

impl Recorder {
    fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::subscriber::with_default(self.clone(), f)
    }
    fn resources(&self) -> Vec<(u64, SpanRec)> {
        let log = self.log.lock().unwrap();
        log.spans.iter().filter(|(_, s)| s.name == "runtime.resource").map(|(id, s)| (*id, s.clone())).collect()
    }
    /// The state updates inside span `id`, each as "field=value[,op]".
    fn updates(&self, id: u64) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.events
            .iter()
            .filter(|e| e.target == "runtime::resource::state_update" && e.span == Some(id))
            .map(|e| {
                let (k, v) = e.fields.iter().find(|(k, _)| !k.ends_with(".op") && *k != "message").unwrap();
                match e.fields.get(&format!("{k}.op")) {
                    Some(op) => format!("{k}={v},{op}"),
                    None => format!("{k}={v}"),
                }
            })
            .collect()
    }
}

fn f(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn rwlock_new_creates_tokios_resource_span() {
    let rec = Recorder::default();
    let (lock, line) = rec.run(|| (RwLock::new(0), line!()));
    let resources = rec.resources();
    assert_eq!(resources.len(), 1, "{resources:?}");
    let (id, span) = &resources[0];
    assert_eq!(span.parent, None);
    assert_eq!(span.target, "runtime::resource");
    let loc = f(&[
        ("concrete_type", "RwLock"),
        ("kind", "Sync"),
        ("loc.file", file!()),
        ("loc.line", &line.to_string()),
        ("loc.col", "36"),
    ]);
    assert_eq!(span.fields, loc);
    assert_eq!(rec.updates(*id), ["max_readers=134217727", "write_locked=false", "current_readers=0"]);
    drop(lock);

    let rec = Recorder::default();
    rec.run(|| RwLock::with_max_readers((), 7));
    let (id, _) = rec.resources()[0];
    assert_eq!(rec.updates(id)[0], "max_readers=7");
}

#[test]
fn mutex_new_creates_tokios_resource_span() {
    let rec = Recorder::default();
    rec.run(|| Mutex::new(0));
    let resources = rec.resources();
    assert_eq!(resources.len(), 1);
    let (id, span) = &resources[0];
    assert_eq!(span.fields["concrete_type"], "Mutex");
    assert_eq!(span.fields["kind"], "Sync");
    assert_eq!(rec.updates(*id), ["locked=false"]);
}

#[test]
fn const_new_locks_are_invisible_as_in_tokio() {
    let rec = Recorder::default();
    rec.run(|| {
        let lock = RwLock::const_new(0);
        drop(lock.try_write().unwrap());
        let m = Mutex::const_new(0);
        drop(m.blocking_lock());
    });
    let log = rec.log.lock().unwrap();
    assert!(log.spans.is_empty() && log.events.is_empty(), "{:?} {:?}", log.spans, log.events);
}

#[test]
fn acquisitions_and_releases_update_the_state() {
    let rec = Recorder::default();
    rec.run(|| {
        let lock = RwLock::new(0);
        let (a, b) = (lock.blocking_read(), lock.try_read().unwrap());
        drop((a, b));
        let w = futures::executor::block_on(lock.write());
        let r = w.downgrade();
        drop(r);
        drop(hybrid_sync::RwLockWriteGuard::downgrade_map(lock.try_write().unwrap(), |v| v));

        let m = Mutex::new(0);
        drop(futures::executor::block_on(m.lock()));
        drop(m.blocking_lock());
    });
    let resources = rec.resources();
    let rw = rec.updates(resources[0].0);
    assert_eq!(
        &rw[3..],
        [
            "current_readers=1,add",
            "current_readers=1,add",
            "current_readers=1,sub",
            "current_readers=1,sub",
            "write_locked=true,override",
            "write_locked=false,override",
            "current_readers=1,add",
            "current_readers=1,sub",
            "write_locked=true,override",
            "write_locked=false,override",
            "current_readers=1,add",
            "current_readers=1,sub",
        ]
    );
    let m = rec.updates(resources[1].0);
    assert_eq!(m, ["locked=false", "locked=true", "locked=false", "locked=true", "locked=false"]);
}

#[test]
fn a_wait_runs_inside_async_op_spans() {
    let rec = Recorder::default();
    rec.run(|| {
        let lock = RwLock::new(0);
        let w = lock.try_write().unwrap();
        let mut read = tokio_test::task::spawn(lock.read());
        assert!(read.poll().is_pending());
        drop(w);
        assert!(read.is_woken());
        let guard = match read.poll() {
            std::task::Poll::Ready(g) => g,
            std::task::Poll::Pending => panic!("the reader was woken to a free lock"),
        };
        drop(guard);
    });
    let log = rec.log.lock().unwrap();
    let resource = log.spans.iter().find(|(_, s)| s.name == "runtime.resource").map(|(id, _)| *id).unwrap();
    let (op, op_span) = log.spans.iter().find(|(_, s)| s.name == "runtime.resource.async_op").unwrap();
    assert_eq!(op_span.parent, Some(resource));
    assert_eq!(op_span.fields, f(&[("source", "RwLock::read"), ("inherits_child_attrs", "false")]));
    let (poll, poll_span) = log.spans.iter().find(|(_, s)| s.name == "runtime.resource.async_op.poll").unwrap();
    assert_eq!(poll_span.parent, Some(*op));
    let polls: Vec<_> = log
        .events
        .iter()
        .filter(|e| e.target == "runtime::resource::poll_op")
        .map(|e| (e.span, e.fields["op_name"].clone(), e.fields["is_ready"].clone()))
        .collect();
    assert_eq!(
        polls,
        [(Some(*poll), "poll".to_string(), "false".to_string()), (Some(*poll), "poll".to_string(), "true".to_string())]
    );
    // The uncontended write made no async-op span: only the wait did.
    assert_eq!(log.spans.values().filter(|s| s.name == "runtime.resource.async_op").count(), 1);
}

#[test]
fn cancelled_waits_leave_the_state_balanced() {
    let rec = Recorder::default();
    rec.run(|| {
        let lock = RwLock::new(0);
        for round in 0..50 {
            let w = lock.try_write().unwrap();
            let mut waiters: Vec<_> = (0..4)
                .map(|i| {
                    let mut t =
                        if (i + round) % 2 == 0 {
                            tokio_test::task::spawn(Box::pin(async { drop(lock.read().await) })
                                as std::pin::Pin<Box<dyn Future<Output = ()>>>)
                        } else {
                            tokio_test::task::spawn(Box::pin(async { drop(lock.write().await) })
                                as std::pin::Pin<Box<dyn Future<Output = ()>>>)
                        };
                    assert!(t.poll().is_pending());
                    t
                })
                .collect();
            drop(w);
            // Drop some waiters unpolled (possibly granted), finish the rest.
            for (i, mut t) in waiters.drain(..).enumerate() {
                if (i + round) % 3 == 0 {
                    drop(t);
                } else {
                    while t.poll().is_pending() {}
                }
            }
        }
        assert!(lock.try_write().is_ok());
    });
    let (id, _) = rec.resources()[0];
    let (mut readers, mut writer) = (0i64, false);
    for u in rec.updates(id) {
        match u.as_str() {
            "current_readers=1,add" => readers += 1,
            "current_readers=1,sub" => readers -= 1,
            "write_locked=true,override" => {
                assert!(!writer && readers == 0, "a writer beside another owner");
                writer = true;
            }
            "write_locked=false,override" => {
                assert!(writer, "a writer release without an acquisition");
                writer = false;
            }
            _ => {}
        }
        assert!(readers >= 0, "more read releases than acquisitions");
    }
    assert_eq!((readers, writer), (0, false));
}
