//! Apache 3.9's AdminServer `snapshot` command (alias `snap`): a snapshot of the tree in Apache's
//! file format, streamed to the caller.
//!
//! As Apache 3.9.5 answers it (its `Commands.runCommand` and `SnapshotCommand`), in this order:
//! - the server not serving: 200, JSON error "This ZooKeeper instance is not currently serving
//!   requests" (this answer and the authentication ones name the command as the URL does,
//!   `snap` for the alias; the later ones by its primary name, as Apache's);
//! - no `Authorization` header: 401, "Auth info is missing for the command"; a header naming no
//!   scheme the server takes, or credentials that prove no id: 401, "Not authenticated"; ids
//!   without every bit of ALL on `/` (each bit checked on its own, CVE-2025-58457): 403, "Not
//!   authorized". The header is `digest user:password`, `ip` (the TCP peer's address; no
//!   forwarding header is believed) or `x509` (the client certificate of an HTTPS connection);
//! - `admin.snapshot.enabled=false` (default true): 503; more than one request per
//!   `admin.rateLimiterIntervalInMS` (default 300000): 429. Both with a JSON body naming the
//!   command and a null error;
//! - else 200 with headers `last_zxid` (`0x` and the zxid in hex) and `snapshot_size` (bytes),
//!   and, unless `streaming=false` (Java's `parseBoolean`: only `true` in any case is true), the
//!   snapshot as `application/octet-stream`; with `streaming=false` the JSON body alone.
//!
//! Deliberate differences: Apache's limiter for this command counts its interval in
//! microseconds (a snapshot every 300 ms with the default), here in milliseconds as the key's
//! name and Apache's documentation say. Apache streams the file its `takeSnapshot` wrote, which is
//! fuzzy (nodes captured at different zxids while writes went on); here the core takes a snapshot
//! as `csnp` does, then a copy of the tree is rebuilt from it and the log after it exactly as of
//! one committed zxid ([`crate::snapshots::consistent_copy`]), and that copy is written as
//! Apache's file ([`crate::apache_snap_file`]), so `last_zxid` is the zxid the whole content is
//! at. A failure is a 500 whose JSON error says why (Apache's is null); so is a server that
//! changed its role between the snapshot's start and the copy (down and back reloads the tree
//! from the whole log, uncommitted proposals included), or whose log was cut (a resync) while
//! the copy read it.
//!
//! Memory: the copy of the tree while the request is served (one request at a time; another
//! meanwhile is answered 429; none under the memory brake or when twice the tree would pass
//! `zkrs.treeMemorySoftLimitBytes`: 503), and at most [`STREAM_CHUNKS`] chunks of about 64 KiB queued for
//! the connection: the writer waits for the client to take them, at most [`CHUNK_WAIT`] for
//! each, and stops when, past the first [`THROUGHPUT_WINDOW`], the client has taken less than
//! [`MIN_BYTES_PER_WINDOW`] per window on average; then it gives up and frees the copy.

use super::http::{ask, to_pretty_json, AdminBody};
use super::{AdminAsk, AdminReply};
use crate::driver::DriverMsg;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{HeaderMap, Response, StatusCode};
use serde_json::json;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Semaphore};
use tracing::{info, warn};
use zk_proto::Id;

/// Chunks queued between the thread writing the snapshot and the connection.
pub const STREAM_CHUNKS: usize = 4;

/// How long the command waits for the core's snapshot to be written.
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(600);

/// How long the writer waits for the client to take one chunk before it gives up.
pub const CHUNK_WAIT: Duration = Duration::from_secs(60);

/// The unit the client's least reading pace is counted in (and its grace at the start).
pub const THROUGHPUT_WINDOW: Duration = Duration::from_secs(60);

/// The least the client must take per [`THROUGHPUT_WINDOW`] on average, bytes (about 17 KB/s): a
/// client taking a chunk just inside [`CHUNK_WAIT`] each time would otherwise hold the copy of
/// the tree, and the one request's slot, for days.
pub const MIN_BYTES_PER_WINDOW: u64 = 1 << 20;

/// How often it asks the driver whether that snapshot is written.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// The response header carrying the zxid the snapshot is at.
pub const LAST_ZXID_HEADER: &str = "last_zxid";
/// The response header carrying the snapshot's size in bytes.
pub const SNAPSHOT_SIZE_HEADER: &str = "snapshot_size";

/// What the `Authorization` header proved, for the driver to turn into ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `digest user:password`: the id the bytes after the scheme prove (`user:` and the
    /// base64 of their SHA-1, [`zk_tree::digest_id`]), hashed off the driver's thread.
    Digest(String),
    /// `ip`: the TCP peer's address.
    Ip(IpAddr),
    /// `x509`: the ids the HTTPS client's certificate proved.
    X509(Vec<Id>),
}

/// The driver's verdict on a caller's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authorization {
    /// The server is not serving: Apache answers so before it looks at credentials.
    NotServing,
    /// The credentials prove no id.
    NotAuthenticated,
    /// Some bit of the permission is held by none of the ids on `/`.
    Denied,
    /// Every bit is held.
    Granted,
}

/// Why the `Authorization` header gives no credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProblem {
    /// There is none.
    Missing,
    /// It names no scheme the server takes, or lacks what the scheme needs.
    Unusable,
}

/// The credentials in `header`, read as Apache 3.9 reads them: the value split at single
/// spaces (Java's `split(" ")`, trailing empty parts dropped) into a scheme and, for digest,
/// the secret; `ip` and `x509` need nothing after the scheme and take the id from the
/// connection (`peer`, `cert_ids`).
///
/// Errors: [`HeaderProblem::Missing`] without a header; [`HeaderProblem::Unusable`] for more
/// than two parts, an unknown scheme, digest without a secret, x509 without a certificate.
pub fn credentials(
    header: Option<&HeaderValue>,
    peer: IpAddr,
    cert_ids: &[Id],
) -> Result<Credentials, HeaderProblem> {
    let Some(value) = header else { return Err(HeaderProblem::Missing) };
    let mut parts: Vec<&[u8]> = value.as_bytes().split(|&b| b == b' ').collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    match parts.as_slice() {
        [b"digest", secret] => zk_tree::digest_id(&String::from_utf8_lossy(secret))
            .map(Credentials::Digest)
            .ok_or(HeaderProblem::Unusable),
        [b"ip"] | [b"ip", _] => Ok(Credentials::Ip(peer)),
        [b"x509"] | [b"x509", _] if !cert_ids.is_empty() => Ok(Credentials::X509(cert_ids.to_vec())),
        _ => Err(HeaderProblem::Unusable),
    }
}

/// Why the driver gives no [`ConsistentSource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRefused {
    /// A copy of the tree would not fit under the memory brake (`zkrs.treeMemorySoftLimitBytes`):
    /// 503, the caller may come back once the tree is smaller.
    Memory,
    /// Anything else (no snapshots kept, not serving, a role change since the start): 500, why.
    Other(&'static str),
}

/// The error a copy refused for memory answers.
pub const MEMORY_REFUSAL: &str =
    "a copy of the tree would not fit under zkrs.treeMemorySoftLimitBytes (the memory brake)";

/// What a consistent copy of the tree is rebuilt from: the snapshot directory, the log, and
/// the zxid to rebuild it at (committed and durable when the driver answered).
pub struct ConsistentSource {
    /// The snapshot directory.
    pub storage: zk_log::FileStorage,
    /// How the copy is set up.
    pub tree_cfg: zk_tree::TreeConfig,
    /// The log's durable records.
    pub log: Box<dyn zk_log::TxnSource>,
    /// The zxid to rebuild the tree at (or the snapshot's end, if later).
    pub through: i64,
    /// An ensemble member's log cut fence and its generation when `through` was chosen: a cut
    /// since (a TRUNC, a SNAP's log reset) may have rewritten the records the copy read.
    pub fence: Option<(std::sync::Arc<crate::snapshots::SnapshotFence>, u64)>,
}

impl ConsistentSource {
    /// The copy of the tree at `through`, rebuilt off the driver's thread; given up once `stop`
    /// says so.
    ///
    /// Errors: [`crate::snapshots::consistent_copy`]'s, or the log was cut while it was read.
    pub fn rebuild(self, stop: &dyn Fn() -> bool) -> Result<zk_tree::Database, String> {
        let ConsistentSource { storage, tree_cfg, log, through, fence } = self;
        let db = crate::snapshots::consistent_copy(&storage, tree_cfg, log.as_ref(), through, stop)?;
        if let Some((fence, at)) = fence {
            if fence.generation() != at {
                return Err("the log was cut (the server resynchronized) while the copy was read".into());
            }
        }
        Ok(db)
    }
}

impl std::fmt::Debug for ConsistentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsistentSource").field("through", &self.through).finish_non_exhaustive()
    }
}

/// Apache's `RateLimiter` with a rate of one: allowed once, then again only after `interval`
/// has passed since the last reset.
#[derive(Debug)]
struct RateLimiter {
    interval: Duration,
    last_reset: Instant,
    remained: u32,
}

impl RateLimiter {
    /// Whether [`RateLimiter::allow`] would let a request through at `now`, spending nothing.
    fn would_allow(&self, now: Instant) -> bool {
        now > self.last_reset + self.interval || self.remained > 0
    }

    fn allow(&mut self, now: Instant) -> bool {
        if now > self.last_reset + self.interval {
            self.remained = 1;
            self.last_reset = now;
        }
        if self.remained > 0 {
            self.remained -= 1;
            return true;
        }
        false
    }
}

/// Failed authorizations a peer may have per [`FAILURE_WINDOW`]; past them it is answered 429
/// without its credentials being looked at, so that passwords cannot be tried at the pace the
/// server answers.
pub const FAILURES_PER_WINDOW: u32 = 20;

/// The window [`FAILURES_PER_WINDOW`] counts over.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Peers whose failures are remembered at most (one entry each).
const FAILURE_PEERS: usize = 4096;

/// Failed authorizations by peer, each counted from its first in the window. A peer is its
/// IPv4 address, or the /64 network of its IPv6 address (one host is commonly given a whole
/// /64, so its single addresses would each be a fresh peer).
#[derive(Debug, Default)]
struct FailureLimiter {
    by_peer: std::collections::HashMap<IpAddr, (Instant, u32)>,
}

/// The key `peer`'s failures are counted under: the IPv4 address (also when mapped into IPv6),
/// or the first 64 bits of an IPv6 address.
fn peer_key(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 => v4,
    }
}

impl FailureLimiter {
    /// Whether `peer` has used up its failures for now.
    fn blocked(&self, peer: IpAddr, now: Instant) -> bool {
        self.by_peer.get(&peer_key(peer)).is_some_and(|(since, n)| {
            *n >= FAILURES_PER_WINDOW && now.duration_since(*since) < FAILURE_WINDOW
        })
    }

    /// A password from `peer` is about to be checked at `now`: counted as failed at once, so
    /// that a burst of requests sent together is held to the limit as one sent in turn is (the
    /// check takes a round trip to the driver); [`FailureLimiter::forgive`] takes it back if it
    /// proves right. False, counting nothing, if the peer is blocked already.
    fn attempt(&mut self, peer: IpAddr, now: Instant) -> bool {
        if self.blocked(peer, now) {
            return false;
        }
        self.failed(peer, now);
        true
    }

    /// The attempt counted for `peer` did not fail after all.
    fn forgive(&mut self, peer: IpAddr) {
        if let Some((_, n)) = self.by_peer.get_mut(&peer_key(peer)) {
            *n = n.saturating_sub(1);
        }
    }

    /// `peer` failed at `now`. The table stays bounded: when full, entries whose window has
    /// passed go, and if none has, the oldest.
    fn failed(&mut self, peer: IpAddr, now: Instant) {
        let peer = peer_key(peer);
        if !self.by_peer.contains_key(&peer) && self.by_peer.len() >= FAILURE_PEERS {
            self.by_peer.retain(|_, (since, _)| now.duration_since(*since) < FAILURE_WINDOW);
            if self.by_peer.len() >= FAILURE_PEERS {
                if let Some(oldest) =
                    self.by_peer.iter().min_by_key(|(_, (since, _))| *since).map(|(p, _)| *p)
                {
                    self.by_peer.remove(&oldest);
                }
            }
        }
        let e = self.by_peer.entry(peer).or_insert((now, 0));
        if now.duration_since(e.0) >= FAILURE_WINDOW {
            *e = (now, 0);
        }
        e.1 = e.1.saturating_add(1);
    }
}

/// The `snapshot` and `restore` commands' settings and state, one per AdminServer.
#[derive(Debug)]
pub struct SnapshotCommand {
    enabled: bool,
    limiter: Mutex<RateLimiter>,
    /// Failed authorizations by peer, for both commands.
    failures: Mutex<FailureLimiter>,
    /// One snapshot served at a time: each holds a copy of the tree.
    serving: std::sync::Arc<Semaphore>,
    restore_enabled: bool,
    /// `restore`'s own limiter (Apache's command has one of its own, of the same interval).
    restore_limiter: Mutex<RateLimiter>,
    /// The largest snapshot `restore` takes.
    pub(super) restore_max_bytes: u64,
    /// One restore at a time.
    pub(super) restoring: std::sync::Arc<Semaphore>,
}

impl SnapshotCommand {
    /// The commands as `admin.snapshot.enabled`, `admin.restore.enabled`,
    /// `admin.rateLimiterIntervalInMS` and `admin.restore.maxBytes` configure them.
    pub fn new(
        enabled: bool,
        interval: Duration,
        restore_enabled: bool,
        restore_max_bytes: u64,
    ) -> SnapshotCommand {
        let limiter = || Mutex::new(RateLimiter { interval, last_reset: Instant::now(), remained: 1 });
        SnapshotCommand {
            enabled,
            limiter: limiter(),
            failures: Mutex::new(FailureLimiter::default()),
            serving: std::sync::Arc::new(Semaphore::new(1)),
            restore_enabled,
            restore_limiter: limiter(),
            restore_max_bytes,
            restoring: std::sync::Arc::new(Semaphore::new(1)),
        }
    }
}

/// Which command [`gate`] lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gated {
    /// `snapshot`: also takes the one serving slot.
    Snapshot,
    /// `create_snapshot` over HTTP: `snapshot`'s checks and limiter.
    CreateSnapshot,
    /// `restore`: its own switch and limiter.
    Restore,
    /// `yield_leadership` and `request_leadership` (ClickHouse Keeper's `ydld`, `rqld`):
    /// `snapshot`'s authorization only (a second handover while one is under way is refused by
    /// the node itself).
    Leadership,
    /// `force_recovery` (ClickHouse Keeper's `rcvr`): as [`Gated::Leadership`], checked against
    /// the tree this server holds while it serves nobody (when recovery is wanted).
    Recovery,
}

impl Gated {
    fn primary(self) -> &'static str {
        match self {
            Gated::Snapshot => super::commands::SNAPSHOT,
            Gated::CreateSnapshot => "create_snapshot",
            Gated::Restore => super::commands::RESTORE,
            Gated::Leadership => "leadership",
            Gated::Recovery => super::commands::FORCE_RECOVERY,
        }
    }
}

/// A JSON answer naming `command`: the name in the URL for what Apache answers before the
/// command runs (not serving, authentication, authorization), the primary name after.
pub(super) fn named_response(command: &str, status: StatusCode, error: Option<&str>) -> Response<AdminBody> {
    let body = to_pretty_json(&json!({ "command": command, "error": error }));
    let mut r = Response::new(
        http_body_util::Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn json_response(status: StatusCode, error: Option<&str>) -> Response<AdminBody> {
    named_response(super::commands::SNAPSHOT, status, error)
}

/// Whether the caller may have a snapshot (`snapshot`, or `create_snapshot` over HTTP, asked
/// for as `name`; `primary` is the command's primary name): the server serves, the
/// `Authorization` header proves ids holding ALL on `/`, the command is enabled
/// (`admin.snapshot.enabled`) and the rate limiter lets it through. Otherwise the answer to
/// give, in Apache's order. `snapshot` and `restore` each take their one slot (returned) before
/// the rate limiter is asked, so a request turned away for a busy slot spends no token;
/// `restore` has its own switch (`admin.restore.enabled`) and limiter.
pub(super) async fn gate(
    cmd: &SnapshotCommand,
    name: &str,
    which: Gated,
    core: &mpsc::Sender<DriverMsg>,
    headers: &HeaderMap,
    peer: IpAddr,
    cert_ids: &[Id],
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, Response<AdminBody>> {
    let primary = which.primary();
    let parsed = credentials(headers.get(AUTHORIZATION), peer, cert_ids);
    // Only a password can be guessed: a request without credentials, or with ip or x509 ones,
    // guesses nothing, and counting it would let any page an operator's browser opens (or
    // anyone behind the same proxy) lock the operator out. A password counts as a failure
    // before it is checked and is forgiven if right, so a burst sent at once meets the limit.
    let guess = matches!(parsed, Ok(Credentials::Digest(_)));
    let forgive = || {
        if let Ok(mut f) = cmd.failures.lock() {
            f.forgive(peer);
        }
    };
    let now = Instant::now();
    let admitted = cmd
        .failures
        .lock()
        .map(|mut f| if guess { f.attempt(peer, now) } else { !f.blocked(peer, now) })
        .unwrap_or(false);
    if !admitted {
        warn!("{primary} command from {peer}: refused, {FAILURES_PER_WINDOW} failed authorizations within {FAILURE_WINDOW:?}");
        return Err(named_response(
            name,
            StatusCode::TOO_MANY_REQUESTS,
            Some("Too many failed authorizations"),
        ));
    }
    let ask_auth = AdminAsk::Authorize {
        credentials: parsed.clone().ok(),
        perm: zk_proto::perms::ALL,
        even_not_serving: which == Gated::Recovery,
    };
    let verdict = match ask(core, ask_auth).await {
        Some(AdminReply::Authorization(v)) => v,
        _ => {
            if guess {
                forgive();
            }
            return Err(driver_gone());
        }
    };
    if guess && matches!(verdict, Authorization::Granted | Authorization::NotServing) {
        forgive();
    }
    match (verdict, parsed) {
        (Authorization::NotServing, _) => {
            return Err(named_response(
                name,
                StatusCode::OK,
                Some("This ZooKeeper instance is not currently serving requests"),
            ))
        }
        (_, Err(HeaderProblem::Missing)) => {
            warn!("{primary} command from {peer}: no Authorization header");
            return Err(named_response(
                name,
                StatusCode::UNAUTHORIZED,
                Some("Auth info is missing for the command"),
            ));
        }
        (Authorization::NotAuthenticated, _) | (_, Err(HeaderProblem::Unusable)) => {
            warn!("{primary} command from {peer}: not authenticated");
            return Err(named_response(name, StatusCode::UNAUTHORIZED, Some("Not authenticated")));
        }
        (Authorization::Denied, _) => {
            warn!("{primary} command from {peer}: not authorized (ALL on / needed)");
            return Err(named_response(name, StatusCode::FORBIDDEN, Some("Not authorized")));
        }
        (Authorization::Granted, Ok(_)) => {}
    }
    if matches!(which, Gated::Leadership | Gated::Recovery) {
        return Ok(None);
    }
    let (enabled, key, limiter) = match which {
        Gated::Restore => (cmd.restore_enabled, "admin.restore.enabled", &cmd.restore_limiter),
        _ => (cmd.enabled, "admin.snapshot.enabled", &cmd.limiter),
    };
    if !enabled {
        warn!("{primary} command from {peer}: disabled ({key}=false)");
        return Err(named_response(primary, StatusCode::SERVICE_UNAVAILABLE, None));
    }
    // The one serving slot before the rate limiter's token: a request turned away because
    // another is being served must not use up the interval of the next one.
    // Apache's answer first when the limiter would refuse; then the command's one slot, before
    // the limiter's token is spent, so a request turned away for a busy slot spends none.
    let rate_limited = || {
        warn!("{primary} command from {peer}: rate limited (admin.rateLimiterIntervalInMS)");
        named_response(primary, StatusCode::TOO_MANY_REQUESTS, None)
    };
    if !limiter.lock().map(|l| l.would_allow(Instant::now())).unwrap_or(false) {
        return Err(rate_limited());
    }
    let slot = match which {
        Gated::Snapshot => Some((&cmd.serving, "another snapshot is being served")),
        Gated::Restore => Some((&cmd.restoring, "another restore is under way")),
        Gated::CreateSnapshot | Gated::Leadership | Gated::Recovery => None,
    };
    let permit = match slot {
        Some((slot, busy)) => match slot.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                warn!("{primary} command from {peer}: {busy}");
                return Err(named_response(primary, StatusCode::TOO_MANY_REQUESTS, Some(busy)));
            }
        },
        None => None,
    };
    if !limiter.lock().map(|mut l| l.allow(Instant::now())).unwrap_or(false) {
        return Err(rate_limited());
    }
    Ok(permit)
}

/// Serves `create_snapshot` (alias `csnp`) over HTTP, asked for as `name`: a snapshot is
/// written to disk, so the caller passes the `snapshot` command's checks first: ALL on `/`,
/// `admin.snapshot.enabled`, one request per `admin.rateLimiterIntervalInMS` (shared with
/// `snapshot`). Then `None`: the command runs as the others do.
pub async fn gate_create(
    cmd: &SnapshotCommand,
    name: &str,
    core: &mpsc::Sender<DriverMsg>,
    headers: &HeaderMap,
    peer: IpAddr,
    cert_ids: &[Id],
) -> Option<Response<AdminBody>> {
    gate(cmd, name, Gated::CreateSnapshot, core, headers, peer, cert_ids).await.err()
}

/// Lets `yield_leadership` or `request_leadership`, asked for as `name`, through when the
/// `Authorization` header proves ids holding ALL on `/`, as for `snapshot` (moving the
/// leadership is an operator's act); otherwise the answer to give. `None`: the command runs as
/// the others do.
pub async fn gate_leadership(
    cmd: &SnapshotCommand,
    name: &str,
    core: &mpsc::Sender<DriverMsg>,
    headers: &HeaderMap,
    peer: IpAddr,
    cert_ids: &[Id],
) -> Option<Response<AdminBody>> {
    gate(cmd, name, Gated::Leadership, core, headers, peer, cert_ids).await.err()
}

pub(super) fn driver_gone() -> Response<AdminBody> {
    json_response(StatusCode::SERVICE_UNAVAILABLE, Some("the server is not answering"))
}

/// Serves one `snapshot` request, asked for as `name` (`snapshot` or `snap`): `head` for a HEAD
/// request (answered as `streaming=false`).
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    cmd: &SnapshotCommand,
    name: &str,
    core: &mpsc::Sender<DriverMsg>,
    headers: &HeaderMap,
    args: &[(String, String)],
    head: bool,
    peer: IpAddr,
    cert_ids: &[Id],
) -> Response<AdminBody> {
    let permit = match gate(cmd, name, Gated::Snapshot, core, headers, peer, cert_ids).await {
        Ok(Some(permit)) => permit,
        Ok(None) => unreachable!("gate takes the serving slot when asked to"),
        Err(r) => return r,
    };
    // Refused before a snapshot is asked for, which may take minutes to be written, as well as
    // when the copy is about to be made.
    match ask(core, AdminAsk::CopyFits).await {
        Some(AdminReply::CopyFits(true)) => {}
        Some(AdminReply::CopyFits(false)) => {
            warn!("snapshot command from {peer}: {MEMORY_REFUSAL}");
            return json_response(StatusCode::SERVICE_UNAVAILABLE, Some(MEMORY_REFUSAL));
        }
        _ => return driver_gone(),
    }
    let streaming = !head
        && args.iter().find(|(k, _)| k == "streaming").is_none_or(|(_, v)| v.eq_ignore_ascii_case("true"));
    let started = Instant::now();
    // Within snapshot.minRequestIntervalSeconds of the last snapshot none is started: the copy
    // is rebuilt from the snapshots already on disk and the log after them.
    let (zxid, generation) = match ask(core, AdminAsk::SnapshotNow).await {
        Some(AdminReply::Snapshot(crate::view::SnapshotAnswer::Started(z), Some(g)))
        | Some(AdminReply::Snapshot(crate::view::SnapshotAnswer::UnderWay(z), Some(g))) => (Some(z), g),
        Some(AdminReply::Snapshot(crate::view::SnapshotAnswer::TooSoon, Some(g))) => (None, g),
        Some(AdminReply::Snapshot(crate::view::SnapshotAnswer::Refused(why), _)) => {
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some(why));
        }
        Some(AdminReply::Snapshot(_, None)) => {
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some("the server is not serving"));
        }
        _ => return driver_gone(),
    };
    if let Some(zxid) = zxid {
        if let Err(why) = written(core, zxid).await {
            warn!("snapshot command from {peer}: {why}");
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some(&why));
        }
    }
    let source = match ask(core, AdminAsk::SnapshotSource { generation }).await {
        Some(AdminReply::SnapshotSource(Ok(s))) => s,
        Some(AdminReply::SnapshotSource(Err(SourceRefused::Memory))) => {
            warn!("snapshot command from {peer}: {MEMORY_REFUSAL}");
            return json_response(StatusCode::SERVICE_UNAVAILABLE, Some(MEMORY_REFUSAL));
        }
        Some(AdminReply::SnapshotSource(Err(SourceRefused::Other(why)))) => {
            warn!("snapshot command from {peer}: {why}");
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some(why));
        }
        _ => return driver_gone(),
    };
    let (tx, mut rx) = mpsc::channel::<Bytes>(STREAM_CHUNKS);
    let (head_tx, head_rx) = tokio::sync::oneshot::channel::<Result<(i64, u64), String>>();
    // The copy is built, measured and written on a thread of its own at background priority
    // (as the snapshot thread's), off the async threads; the permit goes with it. A client gone
    // before the headers stops it.
    let runtime = tokio::runtime::Handle::current();
    let copy = move || {
        crate::snapshots::background_priority();
        let _permit = permit;
        let db = match source.rebuild(&|| head_tx.is_closed()) {
            Ok(db) => db,
            Err(why) => {
                let _ = head_tx.send(Err(why));
                return;
            }
        };
        if head_tx.is_closed() {
            return;
        }
        let size = crate::apache_snap_file::size(&db);
        if head_tx.send(Ok((db.last_applied_zxid(), size))).is_err() || !streaming {
            return;
        }
        let mut pace = Throughput::new(Instant::now());
        let sent = crate::apache_snap_file::write(&db, &mut |chunk| {
            // A client that stops reading would hold the copy of the tree (and the one
            // request's slot) for good: it gets CHUNK_WAIT per chunk, and must take
            // MIN_BYTES_PER_WINDOW in each THROUGHPUT_WINDOW.
            // The timer is made inside the runtime's context: this thread is not one of its own.
            let send =
                async { tokio::time::timeout(CHUNK_WAIT, tx.send(Bytes::copy_from_slice(chunk))).await };
            match runtime.block_on(send) {
                Ok(Ok(())) if pace.taken(Instant::now(), chunk.len() as u64) => Ok(()),
                Ok(Ok(())) => Err("the client read less than 1 MiB in a minute"),
                Ok(Err(_)) => Err("the client went away"),
                Err(_) => Err("the client took no data for a minute"),
            }
        });
        if let Err(why) = sent {
            info!("snapshot stream to {peer} stopped: {why}");
        }
    };
    if let Err(e) = std::thread::Builder::new().name("zk-snap-copy".into()).spawn(copy) {
        warn!("snapshot command from {peer}: no thread for the copy: {e}");
        return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some("no thread for the copy"));
    }
    let (last_zxid, size) = match head_rx.await {
        Ok(Ok(h)) => h,
        Ok(Err(why)) => {
            warn!("snapshot command from {peer}: {why}");
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some(&why));
        }
        Err(_) => {
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, Some("the snapshot writer stopped"))
        }
    };
    info!(
        "snapshot command from {peer}: a snapshot at 0x{last_zxid:x}, {size} bytes, ready in {:?}{}",
        started.elapsed(),
        if streaming { ", streaming" } else { "" }
    );
    let mut r = if streaming {
        let mut r = Response::new(ChunkBody { rx: Some(rx) }.boxed_unsync());
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        r.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(size));
        r
    } else {
        rx.close();
        json_response(StatusCode::OK, None)
    };
    if let Ok(v) = HeaderValue::from_str(&format!("0x{last_zxid:x}")) {
        r.headers_mut().insert(LAST_ZXID_HEADER, v);
    }
    r.headers_mut().insert(SNAPSHOT_SIZE_HEADER, HeaderValue::from(size));
    r
}

/// Waits until the snapshot that starts at `zxid` (or a later one) is written.
///
/// Errors: it failed, or it took longer than [`SNAPSHOT_WAIT`].
async fn written(core: &mpsc::Sender<DriverMsg>, zxid: i64) -> Result<(), String> {
    let deadline = Instant::now() + SNAPSHOT_WAIT;
    loop {
        let status = match ask(core, AdminAsk::SnapshotStatus).await {
            Some(AdminReply::SnapshotStatus(Some(s))) => s,
            Some(AdminReply::SnapshotStatus(None)) => return Err("this server takes no snapshots".into()),
            _ => return Err("the server is not answering".into()),
        };
        if status.last_written.is_some_and(|w| w >= zxid) {
            return Ok(());
        }
        if status.under_way.is_none_or(|u| u < zxid) {
            return Err(format!("the snapshot at 0x{zxid:x} was not written (see the server's log)"));
        }
        if Instant::now() >= deadline {
            return Err(format!("the snapshot at 0x{zxid:x} took longer than {SNAPSHOT_WAIT:?}"));
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// The client's reading pace: once the first [`THROUGHPUT_WINDOW`] has passed, the bytes it has
/// taken must average at least [`MIN_BYTES_PER_WINDOW`] per window over the whole stream, or the
/// stream stops. Checked at each chunk taken (a client that takes none meets [`CHUNK_WAIT`]), so
/// a stream of `n` bytes holds the copy of the tree for at most about `n / MIN_BYTES_PER_WINDOW + 1`
/// windows plus one chunk's wait, whatever pattern of pauses the client reads with.
#[derive(Debug)]
struct Throughput {
    start: Instant,
    taken: u64,
}

impl Throughput {
    fn new(now: Instant) -> Throughput {
        Throughput { start: now, taken: 0 }
    }

    /// `bytes` were taken at `now`; false when the client is behind the least pace.
    fn taken(&mut self, now: Instant, bytes: u64) -> bool {
        self.taken = self.taken.saturating_add(bytes);
        let windows = now.duration_since(self.start).as_secs_f64() / THROUGHPUT_WINDOW.as_secs_f64();
        windows <= 1.0 || self.taken as f64 >= (windows - 1.0) * MIN_BYTES_PER_WINDOW as f64
    }
}

/// A response body fed chunk by chunk from a bounded channel; it ends when the writer drops
/// its sender.
struct ChunkBody {
    rx: Option<mpsc::Receiver<Bytes>>,
}

impl Body for ChunkBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(rx) = self.rx.as_mut() else { return Poll::Ready(None) };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(chunk)) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authorization_header_is_read_as_apache_reads_it() {
        let peer: IpAddr = [10, 0, 0, 7].into();
        let alice = Id { scheme: "x509".into(), id: "CN=alice".into() };
        let read = |v: &str, certs: &[Id]| credentials(Some(&HeaderValue::from_str(v).unwrap()), peer, certs);
        let bob = Credentials::Digest(zk_tree::digest_id("bob:pw").unwrap());
        assert_eq!(read("digest bob:pw", &[]), Ok(bob.clone()));
        assert_eq!(read("digest bob:pw ", &[]), Ok(bob), "trailing part dropped");
        assert_eq!(read("digest", &[]), Err(HeaderProblem::Unusable));
        assert_eq!(read("digest a b", &[]), Err(HeaderProblem::Unusable));
        assert_eq!(read("digest  bob:pw", &[]), Err(HeaderProblem::Unusable), "an empty part between");
        assert_eq!(read("ip", &[]), Ok(Credentials::Ip(peer)));
        assert_eq!(read("x509", &[]), Err(HeaderProblem::Unusable), "no certificate");
        assert_eq!(read("x509", std::slice::from_ref(&alice)), Ok(Credentials::X509(vec![alice])));
        assert_eq!(read("Basic Ym9iOnB3", &[]), Err(HeaderProblem::Unusable));
        assert_eq!(read("DIGEST bob:pw", &[]), Err(HeaderProblem::Unusable), "schemes are case-sensitive");
        assert_eq!(credentials(None, peer, &[]), Err(HeaderProblem::Missing));
    }

    /// Review finding 4: a client taking a chunk just inside CHUNK_WAIT each time is cut off at
    /// the end of the first window it falls behind in; one keeping up is not. The pace is an
    /// average over the whole stream: a client taking 1 MiB just before each window check ends
    /// (about 9 KB/s with per-window counting) falls behind within three windows.
    #[test]
    fn a_slow_reader_is_cut_off_after_a_window() {
        let t0 = Instant::now();
        let mut slow = Throughput::new(t0);
        let chunk = 64 * 1024;
        assert!(slow.taken(t0 + Duration::from_secs(59), chunk));
        assert!(!slow.taken(t0 + Duration::from_secs(118), chunk), "64 KiB in the first two minutes");
        let mut fast = Throughput::new(t0);
        for i in 0..1_000u64 {
            assert!(fast.taken(t0 + Duration::from_millis(i * 100), chunk), "6.4 MiB a second, at {i}");
        }
        // Just enough on average, up to the end.
        let mut steady = Throughput::new(t0);
        for s in 1..=600u64 {
            assert!(steady.taken(t0 + Duration::from_secs(s), MIN_BYTES_PER_WINDOW / 50), "at {s} s");
        }
        // 1 MiB in a burst every 119 s: in time for the first window's check, not for later ones.
        let mut bursts = Throughput::new(t0);
        let cut = (1..=10u64)
            .find(|k| !bursts.taken(t0 + Duration::from_secs(119 * k), MIN_BYTES_PER_WINDOW))
            .expect("cut off");
        assert!(cut <= 3, "cut off at burst {cut}");
    }

    /// Review finding 11: a peer gets FAILURES_PER_WINDOW failed authorizations per window;
    /// others are not held up by it, and the table of peers stays bounded.
    #[test]
    fn failed_authorizations_are_limited_per_peer() {
        let t0 = Instant::now();
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let mut f = FailureLimiter::default();
        for i in 0..FAILURES_PER_WINDOW {
            assert!(!f.blocked(a, t0), "after {i}");
            f.failed(a, t0 + Duration::from_millis(u64::from(i)));
        }
        assert!(f.blocked(a, t0 + Duration::from_secs(1)));
        assert!(!f.blocked(b, t0 + Duration::from_secs(1)), "another peer");
        assert!(!f.blocked(a, t0 + FAILURE_WINDOW), "once the window has passed");
        for i in 0..(FAILURE_PEERS as u32 + 10) {
            f.failed(IpAddr::from(i.to_be_bytes()), t0 + Duration::from_secs(2));
        }
        assert!(f.by_peer.len() <= FAILURE_PEERS);
    }

    /// Review of the fixes, finding 1: a burst of passwords sent together is held to the limit,
    /// each counted before its check (a right one is forgiven); and one IPv6 host cannot take a
    /// fresh allowance per address of its /64.
    #[test]
    fn guesses_count_before_their_check_and_ipv6_by_network() {
        let t0 = Instant::now();
        let a: IpAddr = [10, 0, 0, 1].into();
        let mut f = FailureLimiter::default();
        let admitted = (0..100).filter(|_| f.attempt(a, t0)).count();
        assert_eq!(admitted, FAILURES_PER_WINDOW as usize, "a burst of 100 in flight at once");
        let mut f = FailureLimiter::default();
        for _ in 0..100 {
            assert!(f.attempt(a, t0), "a right password is forgiven");
            f.forgive(a);
        }
        let mut f = FailureLimiter::default();
        let base: u128 = 0x2001_0db8_0000_0001 << 64;
        for i in 0..u128::from(FAILURES_PER_WINDOW) {
            f.failed(IpAddr::V6((base | (i * 0x1_0001)).into()), t0);
        }
        assert!(f.blocked(IpAddr::V6((base | 0xdead_beef).into()), t0), "same /64");
        assert!(!f.blocked(IpAddr::V6(((base + (1 << 64)) | 1).into()), t0), "the next /64");
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let mut f = FailureLimiter::default();
        for _ in 0..FAILURES_PER_WINDOW {
            f.failed(mapped, t0);
        }
        assert!(f.blocked(a, t0), "an IPv4 address mapped into IPv6 is that IPv4 address");
    }

    #[test]
    fn one_request_per_interval() {
        let t0 = Instant::now();
        let mut l = RateLimiter { interval: Duration::from_millis(1000), last_reset: t0, remained: 1 };
        assert!(l.would_allow(t0) && l.would_allow(t0), "asking spends nothing");
        assert!(l.allow(t0), "the first is allowed at once");
        assert!(!l.would_allow(t0 + Duration::from_millis(500)));
        assert!(!l.allow(t0 + Duration::from_millis(500)));
        assert!(!l.allow(t0 + Duration::from_millis(1000)), "not before the interval has passed");
        assert!(l.allow(t0 + Duration::from_millis(1001)));
        assert!(!l.allow(t0 + Duration::from_millis(1500)), "the interval counts from that reset");
        assert!(l.allow(t0 + Duration::from_millis(2002)));
    }
}
