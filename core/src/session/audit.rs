//! The audit log: one JSON object per line for each security-relevant event (a session opened or
//! closed, a kernel compiled, a dispatch under a session, a limit hit, an error), written to a
//! file or handed to a callback. Off by default; when off, no event is even built. Events carry
//! sizes, ids, hashes and names, never tensor data or kernel source.

use crate::{Error, Result};
use serde_json::{Map, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Callback = Arc<dyn Fn(&str) + Send + Sync>;

enum Sink {
    File(std::fs::File),
    Callback(Callback),
}

static ON: AtomicBool = AtomicBool::new(false);
static SINK: Mutex<Option<Sink>> = Mutex::new(None);

fn install(sink: Option<Sink>) {
    let on = sink.is_some();
    *SINK.lock().unwrap_or_else(|p| p.into_inner()) = sink;
    ON.store(on, Ordering::SeqCst);
}

/// Appends every later event to the file at `path` (created if missing).
pub fn audit_to_file(path: &str) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::InvalidArgument(format!("cannot open the audit log {path:?}: {e}")))?;
    install(Some(Sink::File(f)));
    Ok(())
}

/// Hands every later event, one JSON line without its newline, to `f` (called on the thread
/// that caused the event; it must not call back into Kiln's audit functions).
pub fn audit_to_callback(f: impl Fn(&str) + Send + Sync + 'static) {
    install(Some(Sink::Callback(Arc::new(f))));
}

/// Stops the audit log (the default).
pub fn audit_off() {
    install(None);
}

pub fn audit_enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Records the event `kind` with the fields `build` gives (only built when the log is on).
pub(crate) fn event(kind: &str, build: impl FnOnce(&mut Map<String, Value>)) {
    if !audit_enabled() {
        return;
    }
    let mut m = Map::new();
    m.insert("ts_ms".into(), Value::from(crate::platform::unix_millis()));
    m.insert("event".into(), Value::from(kind));
    build(&mut m);
    let line = Value::Object(m).to_string();
    let sink = SINK.lock().unwrap_or_else(|p| p.into_inner());
    match &*sink {
        // A full disk must not fail the tenant's call: the event is lost, the work goes on.
        Some(Sink::File(f)) => {
            let mut f: &std::fs::File = f;
            let _ = writeln!(f, "{line}");
        }
        Some(Sink::Callback(cb)) => {
            let cb = cb.clone();
            drop(sink);
            cb(&line);
        }
        None => {}
    }
}

/// The stable name of an error's code, for events.
pub(crate) fn error_fields(m: &mut Map<String, Value>, e: &Error) {
    m.insert("code".into(), Value::from(e.code().name()));
    m.insert("message".into(), Value::from(e.message()));
}
