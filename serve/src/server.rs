//! Starting and stopping the service: both listeners, graceful shutdown (stop accepting, let
//! in-flight requests finish within `shutdown_grace_ms`, close every session).

use crate::api;
use crate::config::Config;
use crate::state::AppState;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A started service.
pub struct Running {
    pub api_addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub state: Arc<AppState>,
    stop: watch::Sender<bool>,
    api: JoinHandle<std::io::Result<()>>,
    metrics: JoinHandle<std::io::Result<()>>,
}

/// What shutdown did.
#[derive(Debug)]
pub struct Stopped {
    /// False when in-flight requests were still running at the end of the grace period.
    pub drained: bool,
    pub sessions_closed: usize,
}

/// Binds both ports (port 0 picks a free one) and starts serving on the current runtime.
pub async fn start(config: Config) -> std::io::Result<Running> {
    let api_listener = tokio::net::TcpListener::bind(config.listen).await?;
    let metrics_listener = tokio::net::TcpListener::bind(config.metrics_listen).await?;
    let (api_addr, metrics_addr) = (api_listener.local_addr()?, metrics_listener.local_addr()?);
    let state = Arc::new(AppState::new(config));
    let (stop, _) = watch::channel(false);
    let signal = |stop: &watch::Sender<bool>| {
        let mut rx = stop.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let api = tokio::spawn(
        axum::serve(api_listener, api::api_router(state.clone())).with_graceful_shutdown(signal(&stop)).into_future(),
    );
    let metrics = tokio::spawn(
        axum::serve(metrics_listener, api::metrics_router(state.clone()))
            .with_graceful_shutdown(signal(&stop))
            .into_future(),
    );
    Ok(Running { api_addr, metrics_addr, state, stop, api, metrics })
}

use std::future::IntoFuture;

impl Running {
    /// Stops accepting, waits for in-flight requests (at most `shutdown_grace_ms`), then closes
    /// every session.
    pub async fn shutdown(self) -> Stopped {
        let _ = self.stop.send(true);
        let grace = Duration::from_millis(self.state.config.shutdown_grace_ms);
        let (mut api, mut metrics) = (self.api, self.metrics);
        let drained = tokio::time::timeout(grace, async {
            let _ = (&mut api).await;
            let _ = (&mut metrics).await;
        })
        .await
        .is_ok();
        if !drained {
            api.abort();
            metrics.abort();
        }
        let slots = self.state.take_all_sessions();
        let n = slots.len();
        let _ = tokio::task::spawn_blocking(move || slots.iter().for_each(|s| s.close())).await;
        Stopped { drained, sessions_closed: n }
    }
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
