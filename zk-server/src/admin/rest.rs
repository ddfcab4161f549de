//! The REST data API (`admin.restApi.enabled`): znodes under `/api/v1/storage/{path}` on the
//! AdminServer's port, in ClickHouse Keeper's shape (GET data, `?children=true` the children,
//! HEAD exists, POST create 201, PUT set with `?version=`, DELETE with `?version=` 204).
//!
//! Every request runs as a ZooKeeper request on an internal session of the caller's
//! ([`super::session`]), so the server's own ACL checks, request order and write path apply: a
//! write made here is a transaction like any client's, forwarded to the leader from a follower.
//! The caller's identity is what a wire client from its address would have, plus HTTP Basic
//! credentials as `addauth digest user:password` and, over HTTPS with `admin.needClientAuth`, its
//! certificate's `x509` id.
//!
//! Errors come back as a JSON object (`error`, `code`, `message`) with the status
//! [`status_of`] gives for the ZooKeeper error code; bad input is answered 400 (413 for a body
//! over `jute.maxbuffer`) before anything reaches the server.

use super::search;
use super::session::{Reply, Session, SessionError, SessionKey, SessionPool};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, LOCATION, ORIGIN, WWW_AUTHENTICATE,
};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::Arc;
use zk_proto::jute;
use zk_proto::{
    perms, Acl, Create2Response, CreateMode, CreateRequest, DeleteRequest, ErrorCode, ExistsRequest,
    ExistsResponse, GetAclRequest, GetAclResponse, GetChildren2Request, GetChildren2Response,
    GetChildrenRequest, GetChildrenResponse, GetDataRequest, GetDataResponse, Id, SetDataRequest,
    SetDataResponse, Stat,
};

/// Where the API is served; a znode's path follows it.
pub const PREFIX: &str = "/api/v1/storage";

/// The REST data API of one AdminServer.
#[derive(Debug)]
pub struct RestApi {
    pool: Arc<SessionPool>,
    writable: bool,
    /// The largest body taken: `jute.maxbuffer`, the most a znode can hold.
    max_body: usize,
}

type Answer = Response<Full<Bytes>>;

/// A request refused before it reached the server, or a ZooKeeper error, as its HTTP answer.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    error: String,
    code: Option<i32>,
    message: String,
}

impl Refusal {
    fn bad(message: impl Into<String>) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            error: "BadRequest".into(),
            code: None,
            message: message.into(),
        }
    }

    fn zk(err: ErrorCode, path: &str) -> Refusal {
        let message = match err {
            ErrorCode::NoNode => format!("{path} does not exist"),
            ErrorCode::NodeExists => format!("{path} already exists"),
            ErrorCode::BadVersion => format!("{path} is not at the version given"),
            ErrorCode::NotEmpty => format!("{path} has children"),
            ErrorCode::NoAuth => {
                format!("the ACL of {path} (or its parent) does not allow this to the caller's ids")
            }
            _ => format!("{err} on {path}"),
        };
        Refusal { status: status_of(err), error: format!("{err:?}"), code: Some(err.code()), message }
    }

    fn answer(self) -> Answer {
        let body = json!({ "error": self.error, "code": self.code, "message": self.message });
        let mut r = json_response(self.status, &body);
        match self.status {
            StatusCode::UNAUTHORIZED => {
                r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"zkrs\""));
            }
            StatusCode::METHOD_NOT_ALLOWED => {
                r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            }
            _ => {}
        }
        r
    }
}

impl From<SessionError> for Refusal {
    fn from(e: SessionError) -> Refusal {
        let (status, error) = match e {
            SessionError::AuthFailed => (StatusCode::UNAUTHORIZED, "AuthFailed"),
            SessionError::Busy | SessionError::Refused(_) => (StatusCode::SERVICE_UNAVAILABLE, "Unavailable"),
            SessionError::Lost => (StatusCode::SERVICE_UNAVAILABLE, "ConnectionLoss"),
        };
        Refusal { status, error: error.into(), code: None, message: e.to_string() }
    }
}

/// The HTTP status a ZooKeeper error code is answered with (the guide's table, Operations).
pub fn status_of(err: ErrorCode) -> StatusCode {
    use ErrorCode::*;
    match err {
        Ok => StatusCode::OK,
        NoNode => StatusCode::NOT_FOUND,
        NodeExists | NotEmpty => StatusCode::CONFLICT,
        BadVersion => StatusCode::PRECONDITION_FAILED,
        NoAuth | QuotaExceeded => StatusCode::FORBIDDEN,
        AuthFailed | SessionClosedRequireSaslAuth => StatusCode::UNAUTHORIZED,
        BadArguments | InvalidAcl | NoChildrenForEphemerals | MarshallingError => StatusCode::BAD_REQUEST,
        Unimplemented => StatusCode::NOT_IMPLEMENTED,
        ConnectionLoss | OperationTimeout | RequestTimeout | SessionExpired | SessionMoved | NotReadOnly
        | ThrottledOp | UnknownSession => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn json_response(status: StatusCode, body: &Value) -> Answer {
    let mut text = serde_json::to_vec(body).unwrap_or_default();
    text.push(b'\n');
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A [`Stat`] as JSON, with Apache's field names.
pub fn stat_json(s: &Stat) -> Value {
    json!({
        "czxid": s.czxid, "mzxid": s.mzxid, "pzxid": s.pzxid,
        "ctime": s.ctime, "mtime": s.mtime,
        "version": s.version, "cversion": s.cversion, "aversion": s.aversion,
        "ephemeralOwner": s.ephemeral_owner, "dataLength": s.data_length, "numChildren": s.num_children,
    })
}

/// The stat as response headers, `X-ZK-<field>`, for the raw GET and HEAD.
fn stat_headers(h: &mut HeaderMap, s: &Stat) {
    let fields: [(&'static str, i64); 11] = [
        ("x-zk-czxid", s.czxid),
        ("x-zk-mzxid", s.mzxid),
        ("x-zk-pzxid", s.pzxid),
        ("x-zk-ctime", s.ctime),
        ("x-zk-mtime", s.mtime),
        ("x-zk-version", s.version.into()),
        ("x-zk-cversion", s.cversion.into()),
        ("x-zk-aversion", s.aversion.into()),
        ("x-zk-ephemeral-owner", s.ephemeral_owner),
        ("x-zk-data-length", s.data_length.into()),
        ("x-zk-num-children", s.num_children.into()),
    ];
    for (name, v) in fields {
        h.insert(name, HeaderValue::from(v));
    }
}

fn perms_text(p: i32) -> String {
    [(perms::CREATE, 'c'), (perms::DELETE, 'd'), (perms::READ, 'r'), (perms::WRITE, 'w'), (perms::ADMIN, 'a')]
        .iter()
        .filter(|(bit, _)| p & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// The query parameters the API knows; anything else is refused.
#[derive(Debug, Default)]
struct Query {
    children: bool,
    acl: bool,
    json: bool,
    version: Option<i32>,
    mode: Option<String>,
    new_acl: Option<String>,
    search: Option<String>,
    limit: Option<String>,
}

fn flag(key: &str, v: &str) -> Result<bool, Refusal> {
    match v {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(Refusal::bad(format!("{key}={v}: expected true or false"))),
    }
}

fn parse_query(pairs: Vec<(String, String)>) -> Result<Query, Refusal> {
    let mut q = Query::default();
    for (k, v) in pairs {
        match k.as_str() {
            "children" => q.children = flag(&k, &v)?,
            "acl" if matches!(v.as_str(), "open" | "creator") => q.new_acl = Some(v),
            "acl" => q.acl = flag(&k, &v)?,
            "format" => match v.as_str() {
                "raw" => q.json = false,
                "json" => q.json = true,
                _ => return Err(Refusal::bad(format!("format={v}: expected raw or json"))),
            },
            "version" => match v.parse::<i32>() {
                Ok(n) if n >= -1 => q.version = Some(n),
                _ => {
                    return Err(Refusal::bad(format!("version={v}: expected an integer, -1 for any version")))
                }
            },
            "mode" => q.mode = Some(v),
            "search" => q.search = Some(v),
            "limit" => q.limit = Some(v),
            _ => {
                return Err(Refusal::bad(format!(
                    "unknown query parameter {k:?} (known: children, acl, format, version, mode, search, \
                     limit)"
                )))
            }
        }
    }
    Ok(q)
}

/// Percent-decodes a URL path (no `+` for space, unlike a query), refusing invalid escapes and
/// bytes that are not UTF-8.
fn decode_path(raw: &str) -> Result<String, Refusal> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let byte = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Refusal::bad("bad percent escape in the path"))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Refusal::bad("the path is not UTF-8"))
}

/// The znode path a request URL names, validated as ZooKeeper validates paths; `None` when the
/// URL is not under [`PREFIX`].
pub fn znode_path(url_path: &str) -> Option<Result<String, String>> {
    let rest = url_path.strip_prefix(PREFIX)?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    let path = match decode_path(if rest.is_empty() { "/" } else { rest }) {
        Ok(p) => p,
        Err(r) => return Some(Err(r.message)),
    };
    Some(
        zk_proto::path::validate_path(&path)
            .map(|()| path.clone())
            .map_err(|e| format!("bad path {path:?}: {e}")),
    )
}

/// The caller's digest credentials from `Authorization: Basic`, as `user:password`.
fn basic_credentials(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    let Some(v) = headers.get(AUTHORIZATION) else { return Ok(None) };
    let unauthorized = |m: &str| Refusal {
        status: StatusCode::UNAUTHORIZED,
        error: "AuthFailed".into(),
        code: None,
        message: m.to_string(),
    };
    let v = v.to_str().map_err(|_| unauthorized("the Authorization header is not text"))?;
    let (scheme, b64) = v.trim().split_once(' ').unwrap_or((v, ""));
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(unauthorized("only Basic authentication is taken (digest user:password)"));
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| unauthorized("Basic credentials are not base64"))?;
    let cred = String::from_utf8(raw).map_err(|_| unauthorized("Basic credentials are not UTF-8"))?;
    if !cred.contains(':') {
        return Err(unauthorized("Basic credentials must be user:password"));
    }
    Ok(Some(cred))
}

impl RestApi {
    /// The API, its requests run on sessions from `pool`; `writable` serves POST, PUT and DELETE;
    /// bodies are limited to `max_body` bytes.
    pub fn new(pool: Arc<SessionPool>, writable: bool, max_body: usize) -> RestApi {
        RestApi { pool, writable, max_body }
    }

    /// Answers one request whose URL is under [`PREFIX`], from `peer`, whose TLS certificate
    /// proved `cert_ids` (none over plain HTTP).
    pub async fn handle(&self, req: Request<Incoming>, peer: IpAddr, cert_ids: &[Id]) -> Answer {
        match self.serve(req, peer, cert_ids).await {
            Ok(r) => r,
            Err(refusal) => refusal.answer(),
        }
    }

    async fn serve(&self, req: Request<Incoming>, peer: IpAddr, cert_ids: &[Id]) -> Result<Answer, Refusal> {
        let method = req.method().clone();
        let path = match znode_path(req.uri().path()) {
            Some(Ok(p)) => p,
            Some(Err(m)) => return Err(Refusal::bad(m)),
            None => return Err(Refusal::bad("not a storage URL")),
        };
        let query = parse_query(super::http::query_pairs(req.uri().query()))?;
        let writes = matches!(method, Method::POST | Method::PUT | Method::DELETE);
        let search = match &query.search {
            Some(text) if method == Method::GET => {
                Some(search::Query::new(text, query.limit.as_deref()).map_err(Refusal::bad)?)
            }
            Some(_) => return Err(Refusal::bad("search= is for GET")),
            None if query.limit.is_some() => return Err(Refusal::bad("limit= goes with search=")),
            None => None,
        };
        if !matches!(method, Method::GET | Method::HEAD) && !writes {
            return Err(Refusal {
                status: StatusCode::METHOD_NOT_ALLOWED,
                error: "MethodNotAllowed".into(),
                code: None,
                message: format!("{method} is not served here"),
            });
        }
        if writes && !self.writable {
            return Err(Refusal {
                status: StatusCode::METHOD_NOT_ALLOWED,
                error: "ReadOnlyApi".into(),
                code: None,
                message: "the REST API takes no writes: set admin.restApi.writable=true".into(),
            });
        }
        if writes && !same_origin(req.headers()) {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                error: "CrossOriginWrite".into(),
                code: None,
                message: "a browser page from another origin may not write here".into(),
            });
        }
        let key = SessionKey {
            ip: peer,
            digest: basic_credentials(req.headers())?,
            cert_ids: cert_ids.iter().map(|i| (i.scheme.clone(), i.id.clone())).collect(),
        };
        let body =
            if matches!(method, Method::POST | Method::PUT) { Some(self.body(req).await?) } else { None };
        let session = self.pool.session(&key).await?;
        let call = |r: zk_proto::Request| {
            let session = session.clone();
            async move { session.call(&r).await }
        };
        let ok = |reply: Reply, path: &str| -> Result<Bytes, Refusal> {
            match reply.err {
                ErrorCode::Ok => Ok(reply.body),
                e => Err(Refusal::zk(e, path)),
            }
        };
        let undecodable = |e: jute::DecodeError| Refusal {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            error: "MarshallingError".into(),
            code: None,
            message: format!("reply did not decode: {e}"),
        };
        if let Some(q) = search {
            return search_below(&session, &path, &q).await;
        }
        match method {
            Method::HEAD => {
                let reply =
                    call(zk_proto::Request::Exists(ExistsRequest { path: path.clone(), watch: false }))
                        .await?;
                let r: ExistsResponse = jute::from_bytes(ok(reply, &path)?).map_err(undecodable)?;
                let mut a = Response::new(Full::new(Bytes::new()));
                stat_headers(a.headers_mut(), &r.stat);
                Ok(a)
            }
            Method::GET if query.children => {
                let reply = call(zk_proto::Request::GetChildren2(GetChildren2Request {
                    path: path.clone(),
                    watch: false,
                }))
                .await?;
                let mut r: GetChildren2Response = jute::from_bytes(ok(reply, &path)?).map_err(undecodable)?;
                r.children.sort_unstable();
                Ok(json_response(
                    StatusCode::OK,
                    &json!({ "path": path, "children": r.children, "stat": stat_json(&r.stat) }),
                ))
            }
            Method::GET if query.acl => {
                let reply = call(zk_proto::Request::GetAcl(GetAclRequest { path: path.clone() })).await?;
                let r: GetAclResponse = jute::from_bytes(ok(reply, &path)?).map_err(undecodable)?;
                let acl: Vec<Value> = r
                    .acl
                    .iter()
                    .map(|a| json!({ "scheme": a.id.scheme, "id": a.id.id, "perms": perms_text(a.perms) }))
                    .collect();
                Ok(json_response(
                    StatusCode::OK,
                    &json!({ "path": path, "acl": acl, "stat": stat_json(&r.stat) }),
                ))
            }
            Method::GET => {
                let reply =
                    call(zk_proto::Request::GetData(GetDataRequest { path: path.clone(), watch: false }))
                        .await?;
                let r: GetDataResponse = jute::from_bytes(ok(reply, &path)?).map_err(undecodable)?;
                let data = r.data.unwrap_or_default();
                if query.json {
                    let text = std::str::from_utf8(&data).ok();
                    let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
                    return Ok(json_response(
                        StatusCode::OK,
                        &json!({ "path": path, "data": b64, "text": text, "stat": stat_json(&r.stat) }),
                    ));
                }
                let mut a = Response::new(Full::new(data));
                a.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
                stat_headers(a.headers_mut(), &r.stat);
                Ok(a)
            }
            Method::POST => {
                let mode = match query.mode.as_deref().unwrap_or("persistent") {
                    "persistent" => CreateMode::Persistent,
                    "persistent_sequential" => CreateMode::PersistentSequential,
                    "container" => CreateMode::Container,
                    "ephemeral" | "ephemeral_sequential" => {
                        return Err(Refusal::bad(
                            "ephemeral nodes end with their session, and a REST request has none of its \
                             own: create them from a client",
                        ))
                    }
                    m => {
                        return Err(Refusal::bad(format!(
                            "mode={m}: expected persistent, persistent_sequential or container"
                        )))
                    }
                };
                zk_proto::path::validate_create_path(&path, mode.is_sequential())
                    .map_err(|e| Refusal::bad(format!("bad path {path:?}: {e}")))?;
                let id = match query.new_acl.as_deref().unwrap_or("open") {
                    "creator" => Id { scheme: "auth".into(), id: String::new() },
                    _ => Id { scheme: "world".into(), id: "anyone".into() },
                };
                let create = CreateRequest {
                    path: path.clone(),
                    data: body,
                    acl: vec![Acl { perms: perms::ALL, id }],
                    flags: mode as i32,
                };
                let reply = call(zk_proto::Request::Create2(create)).await?;
                let r: Create2Response = jute::from_bytes(ok(reply, &path)?).map_err(undecodable)?;
                let mut a = json_response(
                    StatusCode::CREATED,
                    &json!({ "path": r.path, "stat": stat_json(&r.stat) }),
                );
                if let Ok(v) = HeaderValue::from_str(&format!("{PREFIX}{}", encode_path(&r.path))) {
                    a.headers_mut().insert(LOCATION, v);
                }
                Ok(a)
            }
            Method::PUT => {
                let set =
                    SetDataRequest { path: path.clone(), data: body, version: query.version.unwrap_or(-1) };
                let reply = call(zk_proto::Request::SetData(set)).await?;
                let r: SetDataResponse = jute::from_bytes(ok(reply, &path)?).map_err(undecodable)?;
                Ok(json_response(StatusCode::OK, &json!({ "path": path, "stat": stat_json(&r.stat) })))
            }
            _ => {
                let delete = DeleteRequest { path: path.clone(), version: query.version.unwrap_or(-1) };
                let reply = call(zk_proto::Request::Delete(delete)).await?;
                ok(reply, &path)?;
                let mut a = Response::new(Full::new(Bytes::new()));
                *a.status_mut() = StatusCode::NO_CONTENT;
                Ok(a)
            }
        }
    }

    /// The request's body, at most `max_body` bytes.
    async fn body(&self, req: Request<Incoming>) -> Result<Bytes, Refusal> {
        let too_big = || Refusal {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            error: "PayloadTooLarge".into(),
            code: None,
            message: format!("a znode holds at most {} bytes (jute.maxbuffer)", self.max_body),
        };
        let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(too_big());
        }
        match Limited::new(req.into_body(), self.max_body).collect().await {
            Ok(c) => Ok(c.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_big()),
            Err(e) => Err(Refusal::bad(format!("the body could not be read: {e}"))),
        }
    }
}

/// Answers a search below `root` ([`search`]), listing children with getChildren requests on
/// `session`, [`search::WINDOW`] in flight at once. A root that is missing or that the caller
/// may not read is refused as a read of it would be (404, 403).
async fn search_below(session: &Arc<Session>, root: &str, q: &search::Query) -> Result<Answer, Refusal> {
    let list = |batch: Vec<String>| {
        let calls: Vec<_> = batch
            .into_iter()
            .map(|path| {
                let session = session.clone();
                tokio::spawn(async move {
                    session
                        .call(&zk_proto::Request::GetChildren(GetChildrenRequest { path, watch: false }))
                        .await
                })
            })
            .collect();
        async move {
            let mut out = Vec::with_capacity(calls.len());
            for call in calls {
                let reply = call.await.map_err(|_| SessionError::Lost)??;
                out.push(match reply.err {
                    ErrorCode::Ok => jute::from_bytes::<GetChildrenResponse>(reply.body)
                        .map(|r| r.children)
                        .map_err(|_| ErrorCode::MarshallingError),
                    e => Err(e),
                });
            }
            Ok::<_, SessionError>(out)
        }
    };
    let found = search::search(root, q, list).await?;
    if let Some(e) = found.root_error {
        return Err(Refusal::zk(e, root));
    }
    Ok(json_response(StatusCode::OK, &found.to_json(root, q)))
}

/// Whether a request may write: it carries no `Origin` (not from a browser page, e.g. curl), or
/// one naming the host it was sent to. A page elsewhere could otherwise have a browser on the
/// operators' network send a form's POST here (a "simple" request, which browsers send without
/// asking first), with the browser's address as its `ip` identity.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(ORIGIN) else { return true };
    let origin = origin.to_str().unwrap_or("");
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    match (authority, headers.get(HOST).and_then(|h| h.to_str().ok())) {
        (Some(a), Some(host)) => a.eq_ignore_ascii_case(host),
        _ => false,
    }
}

/// `path` percent-encoded for a URL (bytes outside unreserved characters and `/`).
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_from_urls() {
        assert_eq!(znode_path("/api/v1/storage"), Some(Ok("/".into())));
        assert_eq!(znode_path("/api/v1/storage/"), Some(Ok("/".into())));
        assert_eq!(znode_path("/api/v1/storage/a/b%20c"), Some(Ok("/a/b c".into())));
        assert_eq!(znode_path("/api/v1/storagex"), None);
        assert_eq!(znode_path("/commands/ruok"), None);
        assert!(znode_path("/api/v1/storage/a/").unwrap().is_err());
        assert!(znode_path("/api/v1/storage/a//b").unwrap().is_err());
        assert!(znode_path("/api/v1/storage/a/..").unwrap().is_err());
        assert!(znode_path("/api/v1/storage/a%zz").unwrap().is_err());
        assert!(znode_path("/api/v1/storage/%ff").unwrap().is_err());
        assert!(znode_path("/api/v1/storage/a%00b").unwrap().is_err());
    }

    #[test]
    fn statuses() {
        assert_eq!(status_of(ErrorCode::NoNode), StatusCode::NOT_FOUND);
        assert_eq!(status_of(ErrorCode::NodeExists), StatusCode::CONFLICT);
        assert_eq!(status_of(ErrorCode::BadVersion), StatusCode::PRECONDITION_FAILED);
        assert_eq!(status_of(ErrorCode::NoAuth), StatusCode::FORBIDDEN);
        assert_eq!(status_of(ErrorCode::AuthFailed), StatusCode::UNAUTHORIZED);
        assert_eq!(status_of(ErrorCode::NotEmpty), StatusCode::CONFLICT);
        assert_eq!(status_of(ErrorCode::BadArguments), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(ErrorCode::SystemError), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn queries() {
        let q = |s: &str| parse_query(crate::admin::http::query_pairs(Some(s)));
        assert!(q("children=true").unwrap().children);
        assert_eq!(q("version=3").unwrap().version, Some(3));
        assert_eq!(q("version=-1").unwrap().version, Some(-1));
        assert!(q("version=-2").is_err());
        assert!(q("version=x").is_err());
        assert!(q("version=99999999999").is_err());
        assert!(q("bogus=1").is_err());
        assert!(q("format=xml").is_err());
        assert_eq!(q("acl=creator").unwrap().new_acl.as_deref(), Some("creator"));
        assert!(q("acl=true").unwrap().acl);
        assert_eq!(perms_text(perms::ALL), "cdrwa");
        assert_eq!(perms_text(perms::READ), "r");
        assert_eq!(encode_path("/a b/c"), "/a%20b/c");
    }

    #[test]
    fn origins() {
        let h = |pairs: &[(hyper::header::HeaderName, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(k, HeaderValue::from_static(v));
            }
            m
        };
        assert!(same_origin(&h(&[(HOST, "zk1:8080")])));
        assert!(same_origin(&h(&[(HOST, "zk1:8080"), (ORIGIN, "http://zk1:8080")])));
        assert!(same_origin(&h(&[(HOST, "ZK1:8080"), (ORIGIN, "https://zk1:8080")])));
        assert!(!same_origin(&h(&[(HOST, "zk1:8080"), (ORIGIN, "http://evil.example")])));
        assert!(!same_origin(&h(&[(HOST, "zk1:8080"), (ORIGIN, "null")])));
        assert!(!same_origin(&h(&[(ORIGIN, "http://zk1:8080")])));
    }

    #[test]
    fn basic_auth() {
        let mut h = HeaderMap::new();
        assert!(basic_credentials(&h).unwrap().is_none());
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic YWxpY2U6c2VjcmV0"));
        assert_eq!(basic_credentials(&h).unwrap().as_deref(), Some("alice:secret"));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert_eq!(basic_credentials(&h).err().unwrap().status, StatusCode::UNAUTHORIZED);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic !!!"));
        assert!(basic_credentials(&h).is_err());
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic YWxpY2U="));
        assert!(basic_credentials(&h).is_err());
    }
}
