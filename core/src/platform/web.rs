//! The browser (wasm32 + WebGPU): the page's one thread must never block, since the GPU's
//! answers arrive as promises that resolve only once control returns to the event loop. So
//! every wait is an `await`, error scopes are settled at the next await point, there is no
//! environment (settings keep their defaults) and no threads.

use crate::{Error, Result};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

pub(crate) use web_time::Instant;

/// No threads in the page: host copies run on the caller's.
pub(crate) const COPY_THREADS: usize = 1;

/// No environment in the page: every setting keeps its default.
pub(crate) fn env_var(_name: &str) -> Option<String> {
    None
}

type ScopeVerdict = Pin<Box<dyn Future<Output = Option<Error>>>>;

thread_local! {
    /// Error scopes popped but not yet answered (the answer is a promise).
    static PENDING_SCOPES: RefCell<Vec<ScopeVerdict>> = const { RefCell::new(Vec::new()) };
}

/// Pops `scope` now; its verdict is awaited by the next `settle_scopes` (every async wait does
/// that first), which reports what `on_error` makes of a caught error.
pub(crate) fn check_scope(
    scope: wgpu::ErrorScopeGuard,
    on_error: impl FnOnce(wgpu::Error) -> Error + 'static,
) -> Result<()> {
    let popped = scope.pop();
    PENDING_SCOPES.with(|p| p.borrow_mut().push(Box::pin(async move { popped.await.map(on_error) })));
    Ok(())
}

/// Awaits every error scope popped so far; the first error caught, if any.
pub(crate) async fn settle_scopes() -> Result<()> {
    let pending = PENDING_SCOPES.with(|p| std::mem::take(&mut *p.borrow_mut()));
    let mut first = None;
    for verdict in pending {
        if let Some(e) = verdict.await {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// The compile runs on the caller's thread: there is no other, and no way to stop one that
/// runs too long (the page's own watchdog does that).
pub(crate) fn run_compile<T>(_what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    f()
}

/// A one-shot channel from a wgpu callback to the future awaiting it.
pub(crate) fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new((None, None, false)));
    (Sender(shared.clone()), Receiver(shared))
}

/// (the value until taken, the waker to call, whether the sender is gone).
type Slot<T> = Arc<Mutex<(Option<T>, Option<Waker>, bool)>>;

pub(crate) struct Sender<T>(Slot<T>);

impl<T> Sender<T> {
    pub(crate) fn send(self, v: T) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(v);
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.2 = true;
        if let Some(w) = s.1.take() {
            w.wake();
        }
    }
}

pub(crate) struct Receiver<T>(Slot<T>);

impl<T> Receiver<T> {
    /// Without waiting: Some(Some(value)) once sent, Some(None) once the sender is gone without
    /// a value, None while neither (a readback's readiness check: `PendingRead::is_ready`).
    pub(crate) fn try_take(&self) -> Option<Option<T>> {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match s.0.take() {
            Some(v) => Some(Some(v)),
            None => s.2.then_some(None),
        }
    }
}

impl<T> Future for Receiver<T> {
    /// None when the callback was dropped without an answer.
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = s.0.take() {
            return Poll::Ready(Some(v));
        }
        if s.2 {
            return Poll::Ready(None);
        }
        s.1 = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Operators one statement may hold in the page. naga's WGSL front end recurses once per
/// operator of a chain (`~~~x`, `x+x+x`), and the page compiles on its own thread, whose stack
/// the browser bounds: measured in Chromium 156, 1,000 levels compile, 2,000 overflowed the
/// module's 1 MiB stack and 8,000 V8's own (a trap that leaves the module unusable). With the
/// module's stack at 8 MiB (web/build.rs), 1,000 keeps a wide margin below both.
const MAX_STATEMENT_OPERATORS: usize = 1000;

/// Refuses a kernel with a statement deeper than the page's stack can parse: counts the
/// operator characters of each statement (comments skipped), an over-count of its depth.
pub(crate) fn check_expression_depth(source: &str) -> Result<()> {
    let (mut ops, mut line) = (0usize, 1usize);
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            ';' | '{' | '}' => ops = 0,
            '+' | '-' | '*' | '/' | '%' | '&' | '|' | '^' | '~' | '!' | '<' | '>' | '=' => {
                ops += 1;
                if ops > MAX_STATEMENT_OPERATORS {
                    return Err(Error::Shader(format!(
                        "{line}:1: a statement has more than {MAX_STATEMENT_OPERATORS} operators: deeper than \
                         the browser's stack can parse (split it into several statements)"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Milliseconds since the Unix epoch (audit events' time stamps), from the page's clock.
pub(crate) fn unix_millis() -> u64 {
    web_time::SystemTime::now().duration_since(web_time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
