//! The HTTP server loop: axum's `serve` with a deadline on request headers.
//!
//! A client that opens a connection and sends its request's headers slowly, or not at all (a
//! slow or hostile client: "slowloris"), used to hold its connection, and a file descriptor,
//! forever: enough of them and the server could accept no connection at all, its agents'
//! heartbeats included, and every node was lost. Here a connection whose next request's
//! headers have not all arrived [`HEADER_READ_TIMEOUT`] after the server started waiting for
//! them is closed; that also closes a keep-alive connection idle for that long (clients open
//! a new one).

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::time::Duration;
use tokio::net::TcpListener;
use tower::ServiceExt;

/// How long a connection may take to send a request's headers, counted from when the server
/// starts waiting for them (the connection's opening, or the end of its previous response).
/// Longer than the API client keeps a connection idle (`fairsched_api::client`: 20 s), so
/// that agents and the CLI close idle connections themselves, never racing the server's close
/// with a request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` resolves, then lets the requests in flight
/// finish (connections close after their current response) and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, app, shutdown, HEADER_READ_TIMEOUT).await
}

/// [`serve`] with another header deadline (tests).
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    header_read_timeout: Duration,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // A connection reset before it was accepted: nothing to do.
                Err(e) if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                ) => continue,
                // Out of file descriptors (or memory): the listener itself is fine; wait for
                // connections to close instead of spinning.
                Err(e) => {
                    tracing::error!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(|req: Request<Incoming>| req.map(axum::body::Body::new)),
        );
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
