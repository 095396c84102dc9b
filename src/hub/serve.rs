//! The HTTP/1 accept loop: hyper's connection builder with its timer, so a connection that
//! sends no whole request head in time is closed, and a cap on connections that have not had a
//! request accepted yet. (`axum::serve` sets no timer, so nothing timed out: 20 silent and 20
//! trickling connections were all still open after 70 s.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::service::{service_fn, Service};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What bounds a connection before it is trusted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// hyper's header-read timeout (also the idle time between two requests).
    pub header_read: Duration,
    /// Connections at once that have not had a request accepted.
    pub pending: usize,
}

/// Serves `app` on `listener` until `stop` is cancelled, then asks every connection to close
/// after its current request and waits for them (upgraded sockets are not among them: the
/// hub's tracker owns those).
pub(super) async fn run(
    listener: TcpListener,
    app: Router,
    bounds: Bounds,
    stop: CancellationToken,
) {
    let pending = Arc::new(Semaphore::new(bounds.pending.max(1)));
    let connections = TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(bounds.header_read);
    loop {
        // At the cap, wait here: new connections stay in the kernel's listen backlog.
        let permit = tokio::select! {
            p = pending.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = stop.cancelled() => break,
        };
        let tcp = tokio::select! {
            a = listener.accept() => match a {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors and the like: give the hub a moment.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        // Frames are small and latency-bound (a streamed chunk, a task): without
        // TCP_NODELAY a second frame can wait for the tab's delayed ACK (up to 40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set: {e}");
        }
        // The connection's pending permit goes back once one of its requests is answered
        // below 400 (a 101 upgrade included: the WebSocket's own `hello` timeout takes over).
        let permit = Arc::new(Mutex::new(Some(permit)));
        let app = TowerToHyperService::new(app.clone());
        let service = service_fn(move |req: hyper::Request<Incoming>| {
            let answer = app.call(req);
            let permit = permit.clone();
            async move {
                let response = answer.await?;
                if response.status().as_u16() < 400 {
                    permit.lock().unwrap_or_else(|p| p.into_inner()).take();
                }
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let conn = http
            .serve_connection(TokioIo::new(tcp), service)
            .with_upgrades();
        let stop = stop.clone();
        connections.spawn(async move {
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    connections.close();
    connections.wait().await;
}
