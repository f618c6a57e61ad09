//! Starting and stopping the service: both listeners with their own accept loops (hyper with a
//! timer, so that unfinished request heads time out; a connection cap below the open-file
//! limit; accept errors such as EMFILE back off instead of spinning), and shutdown within the
//! grace period (stop accepting, let in-flight requests finish within `shutdown_grace_ms`,
//! answer those still running SHUTTING_DOWN, close every session, and never wait for a GPU
//! wait still blocked on a worker thread).

use crate::api;
use crate::config::Config;
use crate::state::{lock, AppState};
use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinHandle;
use tower::ServiceExt;

/// Open files kept free of API connections: the listeners, the GPU driver's files, the metrics
/// port's connections (`METRICS_CONNECTIONS`), logs.
pub const FD_RESERVE: u64 = 64;
/// Connections the metrics listener holds at once (scrapers and probes only).
pub const METRICS_CONNECTIONS: usize = 16;
/// The pause after a failed accept (EMFILE and the like), so the loop does not spin on it.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Time after the grace period for the SHUTTING_DOWN answers to be written and sessions closed;
/// the process exits within `shutdown_grace_ms` plus about twice this.
pub const SHUTDOWN_MARGIN: Duration = Duration::from_millis(1000);
/// How long a new connection at the cap waits for the one it closed to go.
const EVICT_WAIT: Duration = Duration::from_millis(1000);

/// The process's open-file limit (RLIMIT_NOFILE, soft), if it has one.
pub fn open_file_limit() -> Option<u64> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(r.rlim_cur)
}

/// The API's connection cap: `max_connections`, but below the open-file limit.
pub fn connection_cap(max_connections: usize) -> usize {
    match open_file_limit() {
        Some(n) => {
            let room = n.saturating_sub(FD_RESERVE + METRICS_CONNECTIONS as u64).max(1);
            max_connections.min(usize::try_from(room).unwrap_or(usize::MAX))
        }
        None => max_connections,
    }
}

/// One listener's open connections.
pub struct Connections {
    pub cap: usize,
    slots: Arc<Semaphore>,
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
    /// Connections closed to make room at the cap, and accepts that failed.
    pub evicted: AtomicU64,
    pub accept_errors: AtomicU64,
}

struct Conn {
    /// Requests of this connection being answered.
    in_flight: AtomicUsize,
    /// Since when it has had no request in flight.
    idle_since: Mutex<Instant>,
    kill: Notify,
}

/// Marks a request in flight on its connection while it lives.
struct InFlight(Arc<Conn>);

impl InFlight {
    fn start(c: &Arc<Conn>) -> InFlight {
        c.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(c.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        *lock(&self.0.idle_since) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Connections {
    fn new(cap: usize) -> Arc<Connections> {
        Arc::new(Connections {
            cap,
            slots: Arc::new(Semaphore::new(cap)),
            live: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.cap - self.slots.available_permits()
    }

    /// Closes the connection idle the longest (no request in flight: a head still arriving, or
    /// keep-alive between requests); false if every connection has a request in flight.
    fn evict_idlest(&self) -> bool {
        let live = lock(&self.live);
        let idlest =
            live.values().filter(|c| c.in_flight.load(Ordering::SeqCst) == 0).min_by_key(|c| *lock(&c.idle_since));
        match idlest {
            Some(c) => {
                c.kill.notify_one();
                self.evicted.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    fn kill_all(&self) {
        for c in lock(&self.live).values() {
            c.kill.notify_one();
        }
    }

    /// Resolves once every connection is closed.
    async fn closed(&self) {
        if let Ok(all) = self.slots.acquire_many(self.cap as u32).await {
            drop(all);
        }
    }
}

/// Timeouts a connection is served with.
#[derive(Clone, Copy)]
struct ConnConfig {
    header_read_timeout: Duration,
}

/// Accepts until `stop`, each connection in a task of its own.
async fn accept_loop(
    listener: TcpListener,
    router: Router,
    conns: Arc<Connections>,
    cfg: ConnConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut last_report: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE, ENFILE, ENOBUFS, ECONNABORTED: the listener is fine; the connection or
                // the process's resources are not. Report at most once a second, wait, go on.
                conns.accept_errors.fetch_add(1, Ordering::Relaxed);
                if last_report.is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
                    eprintln!("kiln serve: accept failed ({e}); retrying");
                    last_report = Some(Instant::now());
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let permit = match conns.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // At the cap: the connection idle the longest makes room, else this one goes.
                if !conns.evict_idlest() {
                    continue;
                }
                match tokio::time::timeout(EVICT_WAIT, conns.slots.clone().acquire_owned()).await {
                    Ok(Ok(p)) => p,
                    _ => continue,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let id = conns.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            kill: Notify::new(),
        });
        lock(&conns.live).insert(id, conn.clone());
        let (router, conns, mut stop) = (router.clone(), conns.clone(), stop.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let svc_conn = conn.clone();
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let in_flight = InFlight::start(&svc_conn);
                let router = router.clone();
                async move {
                    let resp = router.oneshot(req.map(Body::new)).await;
                    drop(in_flight);
                    resp
                }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(cfg.header_read_timeout)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(served);
            let mut graceful = false;
            loop {
                tokio::select! {
                    _ = served.as_mut() => break,
                    _ = conn.kill.notified() => break,
                    _ = stop.wait_for(|s| *s), if !graceful => {
                        served.as_mut().graceful_shutdown();
                        graceful = true;
                    }
                }
            }
            lock(&conns.live).remove(&id);
        });
    }
}

/// A started service.
pub struct Running {
    pub api_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub state: Arc<AppState>,
    /// The API listener's connections.
    pub connections: Arc<Connections>,
    metrics_connections: Arc<Connections>,
    stop: watch::Sender<bool>,
    api: JoinHandle<()>,
    metrics: JoinHandle<()>,
}

/// What shutdown did.
#[derive(Debug)]
pub struct Stopped {
    /// False when in-flight requests were still running at the end of the grace period (they
    /// were answered SHUTTING_DOWN).
    pub drained: bool,
    pub sessions_closed: usize,
}

/// Binds both ports (port 0 picks a free one) and starts serving on the current runtime.
pub async fn start(config: Config) -> std::io::Result<Running> {
    let api_listener = TcpListener::bind(config.listen).await?;
    let metrics_listener = TcpListener::bind(config.metrics_listen).await?;
    let (api_addr, metrics_addr) = (api_listener.local_addr()?, metrics_listener.local_addr()?);
    let cfg = ConnConfig { header_read_timeout: Duration::from_millis(config.header_read_timeout_ms) };
    let connections = Connections::new(connection_cap(config.max_connections));
    let metrics_connections = Connections::new(METRICS_CONNECTIONS);
    let state = Arc::new(AppState::new(config).map_err(std::io::Error::other)?);
    let (stop, _) = watch::channel(false);
    let api = tokio::spawn(accept_loop(
        api_listener,
        api::api_router(state.clone()),
        connections.clone(),
        cfg,
        stop.subscribe(),
    ));
    let metrics = tokio::spawn(accept_loop(
        metrics_listener,
        api::metrics_router(state.clone()),
        metrics_connections.clone(),
        cfg,
        stop.subscribe(),
    ));
    Ok(Running { api_addr, metrics_addr, state, connections, metrics_connections, stop, api, metrics })
}

impl Running {
    /// Stops accepting, waits for in-flight requests (at most `shutdown_grace_ms`), answers
    /// those still running SHUTTING_DOWN, then closes every session. Returns within the grace
    /// period plus about 2 × `SHUTDOWN_MARGIN`, whatever the GPU is doing.
    pub async fn shutdown(self) -> Stopped {
        let _ = self.stop.send(true);
        let _ = self.api.await;
        let _ = self.metrics.await;
        let grace = Duration::from_millis(self.state.config.shutdown_grace_ms);
        let (api, metrics) = (self.connections, self.metrics_connections);
        let all_closed = || async {
            api.closed().await;
            metrics.closed().await;
        };
        let drained = tokio::time::timeout(grace, all_closed()).await.is_ok();
        if !drained {
            let _ = self.state.grace_over.send(true);
            if tokio::time::timeout(SHUTDOWN_MARGIN, all_closed()).await.is_err() {
                api.kill_all();
                metrics.kill_all();
            }
        }
        let slots = self.state.take_all_sessions();
        let n = slots.len();
        // A session's close may wait for its GPU work; a wedged device is not waited for.
        let closing = tokio::task::spawn_blocking(move || slots.iter().for_each(|s| s.close()));
        let _ = tokio::time::timeout(SHUTDOWN_MARGIN, closing).await;
        Stopped { drained, sessions_closed: n }
    }
}

/// What `kiln serve` runs: the service on a runtime of its own until SIGTERM or Ctrl-C, then
/// shutdown. `on_start` is told the addresses. The runtime is dropped without waiting for its
/// blocking threads: one may be in a GPU wait that lasts minutes, past the grace period.
pub fn run_until_signal(config: Config, on_start: impl FnOnce(&Running)) -> std::io::Result<Stopped> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let out = rt.block_on(async move {
        let running = start(config).await?;
        on_start(&running);
        shutdown_signal().await;
        println!("kiln serve: shutting down (finishing in-flight requests)");
        Ok(running.shutdown().await)
    });
    rt.shutdown_timeout(Duration::from_millis(100));
    out
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
