//! The accept loop: HTTP/1.1 connections with declared limits, instead of
//! `axum::serve`'s implicit ones (CONTRACT-facing behaviour is unchanged).
//!
//! - **Header-read timeout** ([`ConnLimits::header_read`]): a client must
//!   send a request's whole head within it. hyper starts this timer whenever
//!   a connection waits for a request head, so it is also the **idle
//!   keep-alive timeout**: a connection that sends nothing is closed after it.
//! - **Connection limit** ([`ConnLimits::max_connections`]): beyond it the
//!   loop stops accepting until a connection ends; further clients wait in
//!   the kernel's backlog rather than in Signet's memory.
//! - Request and body-read timeouts and the in-flight limit on `/hooks` are
//!   request-level: see `http::limits`.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};

use axum::{Router, extract::ConnectInfo};
use hyper::{Request, body::Incoming};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tower::ServiceExt;

#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub header_read: Duration,
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting (the listener is closed: new connections are refused) and lets
/// open requests finish, for at most `drain`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    drain: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            () = &mut shutdown => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        spawn_conn(&graceful, &router, limits, stream, remote, Some(permit));
    }
    // Connections the kernel already completed are taken too (they would
    // be reset when the listener closes); after that, new ones are refused.
    match listener.into_std() {
        Ok(std_listener) => {
            while let Ok((stream, remote)) = std_listener.accept() {
                if let Ok(stream) = stream.set_nonblocking(true).and_then(|()| TcpStream::from_std(stream)) {
                    spawn_conn(&graceful, &router, limits, stream, remote, None);
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot take the queued connections at shutdown"),
    }
    // A connection just taken has not sent its request head yet, and hyper
    // closes a connection with no request in progress at once on shutdown:
    // give the heads on their way a moment to arrive.
    tokio::time::sleep(SETTLE.min(drain / 4)).await;
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(drain) => {
            tracing::warn!("connections still open after the shutdown grace period; closing them")
        }
    }
}

/// How long connections taken at shutdown get to send their request head.
const SETTLE: Duration = Duration::from_millis(250);

fn spawn_conn(
    graceful: &GracefulShutdown,
    router: &Router,
    limits: ConnLimits,
    stream: TcpStream,
    remote: SocketAddr,
    permit: Option<OwnedSemaphorePermit>,
) {
    let router = router.clone();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(remote));
        let router = router.clone();
        async move {
            Ok::<_, Infallible>(router.oneshot(req.map(axum::body::Body::new)).await.unwrap_or_else(|e| match e {}))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read).keep_alive(true);
    let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
    tokio::spawn(async move {
        // Errors here are the client's (reset, header timeout): nothing to report.
        let _ = conn.await;
        drop(permit);
    });
}
