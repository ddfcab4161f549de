//! The HTTP servers: the AdminServer and the Prometheus endpoint, on hyper's HTTP/1 server.
//!
//! Each accepted connection is served by its own task, at most [`MAX_CONNECTIONS`] at once (more
//! wait in the kernel's accept queue); a request waits at most [`DRIVER_WAIT`] for the driver.
//! With HTTPS ([`super::https`]) a connection's TLS set-up runs in its task too, within
//! `admin.idleTimeout`, so a stalled or failed handshake holds up no other connection.

use super::https::{AdminStream, AdminTls, STS_VALUE};
use super::members::{self, EnsembleProbe};
use super::rest::{self, RestApi};
use super::session::{ServerSide, SessionPool};
use super::snapshot::{self, SnapshotCommand};
use super::{commands, console, metrics, session_list, AdminAsk, AdminReply};
use crate::driver::DriverMsg;
use crate::settings::{AdminSettings, Settings};
use crate::stats::ConnCounters;
use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, STRICT_TRANSPORT_SECURITY};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::{debug, warn};

/// HTTP connections served at once by each server.
pub const MAX_CONNECTIONS: usize = 64;

/// How long a request waits for the driver's answer.
pub const DRIVER_WAIT: Duration = Duration::from_secs(10);

/// How long a metrics connection may take to send a request's headers, idle keep-alive time
/// included (the AdminServer's is `admin.idleTimeout`, default the same).
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which endpoints a server offers.
#[derive(Debug)]
enum Routes {
    /// The AdminServer: commands under this URL, `/ready`, and the REST data API when it is on
    /// (with the console and its ensemble view, whose answers `probe` keeps).
    Admin { command_url: String, rest: Option<RestApi>, probe: EnsembleProbe, snapshot: Box<SnapshotCommand> },
    /// `/metrics`.
    Metrics,
}

/// Binds the AdminServer and serves it until the process ends. A port that cannot be bound is
/// logged and the server runs without it, as Apache's does. Plain connections on a unified
/// port are counted in `counters` (Apache's `insecure_admin_count`). The REST data API's
/// sessions are served like client connections, with `server`'s settings and `permits` (the
/// outstanding requests every connection shares).
pub async fn spawn_admin(
    settings: &AdminSettings,
    core: mpsc::Sender<DriverMsg>,
    counters: Arc<ConnCounters>,
    server: Arc<Settings>,
    permits: Arc<Semaphore>,
) -> Option<SocketAddr> {
    match TcpListener::bind(settings.addr).await {
        Ok(listener) => {
            let local = listener.local_addr().ok();
            let schemes = match &settings.tls {
                None => "http",
                Some(tls) if tls.plain_too() => "http and https",
                Some(_) => "https",
            };
            tracing::info!("AdminServer on {schemes}://{}{}", settings.addr, settings.command_url);
            if let Some(tls) = &settings.tls {
                tls.watch_stores();
            }
            let rest = settings.rest.map(|api| {
                tracing::info!(
                    "REST data API on {}{} ({})",
                    settings.addr,
                    rest::PREFIX,
                    if api.writable { "reads and writes" } else { "reads only" }
                );
                let max_body = server.max_frame as usize;
                let side = ServerSide {
                    driver: core.clone(),
                    settings: server,
                    permits,
                    counters: counters.clone(),
                };
                RestApi::new(SessionPool::start(side), api.writable, max_body)
            });
            let routes = Routes::Admin {
                command_url: settings.command_url.clone(),
                rest,
                probe: EnsembleProbe::default(),
                snapshot: Box::new(SnapshotCommand::new(
                    settings.snapshot_enabled,
                    settings.rate_limiter_interval,
                    settings.restore_enabled,
                    settings.restore_max_bytes,
                )),
            };
            let tls = settings.tls.clone().map(|t| (t, counters));
            tokio::spawn(serve(listener, routes, settings.idle_timeout, tls, core));
            local
        }
        Err(e) => {
            warn!("cannot start the AdminServer on {}: {e}; serving without it", settings.addr);
            None
        }
    }
}

/// Binds the Prometheus endpoint and serves it until the process ends.
pub async fn spawn_metrics(addr: SocketAddr, core: mpsc::Sender<DriverMsg>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracing::info!("Prometheus metrics on http://{addr}/metrics");
    tokio::spawn(serve(listener, Routes::Metrics, IDLE_TIMEOUT, None, core));
    Ok(local)
}

async fn serve(
    listener: TcpListener,
    routes: Routes,
    idle: Duration,
    tls: Option<(Arc<AdminTls>, Arc<ConnCounters>)>,
    core: mpsc::Sender<DriverMsg>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let routes = Arc::new(routes);
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let (stream, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                warn!("HTTP accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (routes, core, tls) = (routes.clone(), core.clone(), tls.clone());
        tokio::spawn(async move {
            let Some((tls, counters)) = tls else {
                return serve_connection(stream, peer, routes, core, idle, None, permit).await;
            };
            // Telling TLS from plain and the handshake get admin.idleTimeout in all, as a
            // request's headers do.
            match tokio::time::timeout(idle, tls.accept(stream)).await {
                Ok(Ok(AdminStream::Plain(s))) => {
                    counters.insecure_admin_one();
                    serve_connection(s, peer, routes, core, idle, None, permit).await
                }
                Ok(Ok(AdminStream::Tls(s))) => match tls.peer_ids(&s) {
                    Ok(ids) => serve_connection(*s, peer, routes, core, idle, Some(ids), permit).await,
                    Err(e) => warn!("AdminServer: closing {peer}: client certificate: {e}"),
                },
                Ok(Err(e)) => debug!("AdminServer: TLS set-up with {peer} failed: {e}"),
                Err(_) => debug!("AdminServer: no TLS handshake from {peer} within {} ms", idle.as_millis()),
            }
        });
    }
}

/// Serves HTTP/1 on one connection, plain or TLS (`secure`: the ids its client certificate
/// proved, empty without one), until it ends; `permit` is its slot among [`MAX_CONNECTIONS`].
async fn serve_connection<S>(
    io: S,
    peer: SocketAddr,
    routes: Arc<Routes>,
    core: mpsc::Sender<DriverMsg>,
    idle: Duration,
    secure: Option<Vec<zk_proto::Id>>,
    permit: tokio::sync::OwnedSemaphorePermit,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let cert_ids: Arc<[zk_proto::Id]> = secure.clone().unwrap_or_default().into();
    let secure = secure.is_some();
    let service = hyper::service::service_fn(move |req| {
        let (routes, core, cert_ids) = (routes.clone(), core.clone(), cert_ids.clone());
        async move {
            let mut r = route(&routes, &core, req, peer, &cert_ids).await;
            if secure {
                r.headers_mut().insert(STRICT_TRANSPORT_SECURITY, HeaderValue::from_static(STS_VALUE));
            }
            Ok::<_, std::convert::Infallible>(r)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(idle)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(io), service);
    if let Err(e) = conn.await {
        debug!("HTTP connection from {peer}: {e}");
    }
    drop(permit);
}

/// The body of every answer: whole, or streamed (the `snapshot` command's).
pub type AdminBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Apache 3.9's `snapshot` command goes to [`snapshot::serve`], whose answer may be a stream;
/// everything else to [`handle`].
async fn route(
    routes: &Routes,
    core: &mpsc::Sender<DriverMsg>,
    req: Request<Incoming>,
    peer: SocketAddr,
    cert_ids: &[zk_proto::Id],
) -> Response<AdminBody> {
    if let Routes::Admin { command_url, snapshot: cmd, .. } = routes {
        let head = req.method() == Method::HEAD;
        let name =
            req.uri().path().strip_prefix(command_url.as_str()).and_then(|rest| rest.strip_prefix('/'));
        let name = name.map(percent_decode);
        if let Some(asked) = name.as_deref().filter(|n| commands::primary_name(n) == Some("create_snapshot"))
        {
            if let Some(r) = snapshot::gate_create(cmd, asked, core, req.headers(), peer.ip(), cert_ids).await
            {
                return r;
            }
        }
        let leadership = |n: &&str| {
            matches!(
                commands::primary_name(n),
                Some(commands::YIELD_LEADERSHIP | commands::REQUEST_LEADERSHIP)
            )
        };
        if let Some(asked) = name.as_deref().filter(leadership) {
            if let Some(r) =
                snapshot::gate_leadership(cmd, asked, core, req.headers(), peer.ip(), cert_ids).await
            {
                return r;
            }
        }
        if let Some(asked) =
            name.as_deref().filter(|n| commands::primary_name(n) == Some(commands::FORCE_RECOVERY))
        {
            // As the leadership commands, checked against the tree this server holds while it
            // serves nobody (when recovery is wanted); the node itself wants its token.
            let gated = snapshot::Gated::Recovery;
            if let Err(r) = snapshot::gate(cmd, asked, gated, core, req.headers(), peer.ip(), cert_ids).await
            {
                return r;
            }
        }
        if let Some(asked) = name.as_deref().filter(|n| commands::primary_name(n) == Some(commands::RESTORE))
        {
            let asked = asked.to_string();
            return super::restore::serve(cmd, &asked, core, req, peer.ip(), cert_ids).await;
        }
        let name = name.filter(|n| commands::primary_name(n) == Some(commands::SNAPSHOT));
        if let Some(name) = name.filter(|_| head || req.method() == Method::GET) {
            let args = query_pairs(req.uri().query());
            let mut r =
                snapshot::serve(cmd, &name, core, req.headers(), &args, head, peer.ip(), cert_ids).await;
            if head {
                *r.body_mut() = Full::new(Bytes::new()).map_err(|never| match never {}).boxed_unsync();
            }
            return r;
        }
    }
    handle(routes, core, req, peer, cert_ids).await.map(|b| b.map_err(|never| match never {}).boxed_unsync())
}

fn response(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// JSON pretty-printed the way Apache's Jackson does (`"key" : value`, two-space indent).
pub fn to_pretty_json(value: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, JacksonFormatter::default());
    // Serializing a Value into a Vec cannot fail.
    let _ = value.serialize(&mut ser);
    out.push(b'\n');
    out
}

/// serde_json's pretty formatter with Jackson's `" : "` between a key and its value.
#[derive(Default)]
struct JacksonFormatter(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for JacksonFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b" : ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Sends `ask` to the driver and waits for its answer, each within [`DRIVER_WAIT`]; `None` when
/// the driver does not take or answer it.
pub(crate) async fn ask(core: &mpsc::Sender<DriverMsg>, ask: AdminAsk) -> Option<AdminReply> {
    let (tx, rx) = oneshot::channel();
    let sent = tokio::time::timeout(DRIVER_WAIT, core.send(DriverMsg::Admin { ask, reply: tx })).await;
    if !matches!(sent, Ok(Ok(()))) {
        return None;
    }
    tokio::time::timeout(DRIVER_WAIT, rx).await.ok()?.ok()
}

/// The console's sessions page (`?offset=&limit=`): 400 for a bad query.
async fn sessions_page(core: &mpsc::Sender<DriverMsg>, query: Option<&str>) -> Response<Full<Bytes>> {
    match session_list::Page::from_query(&query_pairs(query)) {
        Err(why) => response(
            StatusCode::BAD_REQUEST,
            "application/json",
            to_pretty_json(&serde_json::json!({ "error": why })),
        ),
        Ok(page) => match ask(core, AdminAsk::Sessions(page)).await {
            Some(AdminReply::Json(v)) => response(StatusCode::OK, "application/json", to_pretty_json(&v)),
            _ => unavailable(),
        },
    }
}

fn unavailable() -> Response<Full<Bytes>> {
    response(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "the server is not answering\n")
}

/// Splits a query string into its pairs, percent-decoded (at most 32).
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = query else { return Vec::new() };
    q.split('&')
        .filter(|p| !p.is_empty())
        .take(32)
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex =
                    std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn handle(
    routes: &Routes,
    core: &mpsc::Sender<DriverMsg>,
    req: Request<Incoming>,
    peer: SocketAddr,
    cert_ids: &[zk_proto::Id],
) -> Response<Full<Bytes>> {
    if let Routes::Admin { rest: Some(api), .. } = routes {
        if rest::znode_path(req.uri().path()).is_some() {
            let head = req.method() == Method::HEAD;
            let mut r = api.handle(req, peer.ip(), cert_ids).await;
            if head {
                *r.body_mut() = Full::new(Bytes::new());
            }
            return r;
        }
    }
    let method = req.method().clone();
    if let Routes::Admin { rest: Some(_), command_url, probe, .. } = routes {
        if matches!(method, Method::GET | Method::HEAD) {
            let console_json = match req.uri().path() {
                members::PATH => Some(probe.answer(core).await),
                session_list::PATH => Some(sessions_page(core, req.uri().query()).await),
                _ => None,
            };
            if let Some(mut r) = console_json {
                if method == Method::HEAD {
                    *r.body_mut() = Full::new(Bytes::new());
                }
                return r;
            }
            if let Some(mut r) = console::asset(req.uri().path(), command_url) {
                if method == Method::HEAD {
                    *r.body_mut() = Full::new(Bytes::new());
                }
                return r;
            }
        }
    }
    if method == Method::TRACE {
        // As Apache's Jetty: TRACE is refused.
        return response(StatusCode::FORBIDDEN, "text/plain", "");
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = response(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "only GET and HEAD\n");
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let path = req.uri().path();
    let mut r = match routes {
        Routes::Metrics if path == "/metrics" => match ask(core, AdminAsk::Metrics).await {
            Some(AdminReply::Metrics(values, figures)) => {
                response(StatusCode::OK, metrics::CONTENT_TYPE, metrics::render(values, &figures))
            }
            _ => unavailable(),
        },
        Routes::Admin { .. } if path == "/ready" => match ask(core, AdminAsk::Ready).await {
            Some(AdminReply::Ready(r)) => {
                let status = if r.serving { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                response(status, "application/json", to_pretty_json(&r.body()))
            }
            _ => unavailable(),
        },
        Routes::Admin { command_url, .. }
            if path == command_url || path.strip_prefix(command_url.as_str()) == Some("/") =>
        {
            let mut html = String::new();
            for name in commands::primary_names() {
                html.push_str(&format!("<a href=\"{command_url}/{name}\">{name}</a>\n<br/>\n"));
            }
            response(StatusCode::OK, "text/html", html)
        }
        Routes::Admin { command_url, .. } => {
            match path.strip_prefix(command_url.as_str()).and_then(|rest| rest.strip_prefix('/')) {
                Some(name) if !name.is_empty() => {
                    let args = query_pairs(req.uri().query());
                    match ask(core, AdminAsk::Command { name: percent_decode(name), args }).await {
                        Some(AdminReply::Json(v)) => {
                            response(StatusCode::OK, "application/json", to_pretty_json(&v))
                        }
                        _ => unavailable(),
                    }
                }
                _ => response(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
            }
        }
        Routes::Metrics => response(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    };
    if method == Method::HEAD {
        *r.body_mut() = Full::new(Bytes::new());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jackson_style_json() {
        let v = serde_json::json!({"a": 1, "b": [1, 2], "command": "x", "error": null});
        let text = String::from_utf8(to_pretty_json(&v)).unwrap();
        assert!(text.contains("\"a\" : 1"), "{text}");
        assert!(text.contains("\"error\" : null"), "{text}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
    }

    #[test]
    fn queries_decode() {
        assert_eq!(
            query_pairs(Some("traceMask=12&x=a%20b+c&bad=%zz&&end=%4")),
            vec![
                ("traceMask".into(), "12".into()),
                ("x".into(), "a b c".into()),
                ("bad".into(), "%zz".into()),
                ("end".into(), "%4".into())
            ]
        );
        assert!(query_pairs(None).is_empty());
    }
}
