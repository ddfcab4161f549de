//! Apache 3.9's AdminServer `restore` command (alias `rest`): a `POST` whose body is a snapshot
//! in Apache's format (as the `snapshot` command serves it) replaces the server's tree.
//!
//! As Apache 3.9.5 answers it, in this order: the authentication and authorization answers of
//! the `snapshot` command (ALL on `/`, each bit on its own; [`super::snapshot`]); then
//! `admin.restore.enabled=false` (default true): 503; more than one request per
//! `admin.rateLimiterIntervalInMS`: 429 (its own limiter); else `{"last_zxid": <the zxid the
//! snapshot is at>}` with 200, or 500 with the reason in `error` (Apache's is null). `GET` is
//! answered 405 (`Allow: POST`).
//!
//! Deliberate differences, for the restore to be safe where Apache's is not: the restored tree is
//! durable before the answer (written as a snapshot, the log reset after it; Apache's lives in
//! memory until its next snapshot, and a crash loses it); the server carries on from the first
//! zxid it never used, given back as `zxid_after_restore` (Apache's last processed zxid becomes
//! the snapshot's, which can be below zxids its clients have seen); every client
//! connection is closed, so clients come back to the restored tree with their sessions if the
//! snapshot holds them (Apache keeps the connections, and their watches on the old tree are
//! lost without an event); and an ensemble member refuses it (500): one member's tree replaced
//! under its peers would diverge from them. A body larger than `admin.restore.maxBytes` (a zkrs
//! key, default 1 GiB) is answered 413; one not there within [`BODY_WAIT`] 408; a second
//! restore while one is under way 429; an empty body 400; one that is not a whole, sealed
//! snapshot 500, with nothing changed.

use super::http::{ask, AdminBody};
use super::snapshot::{driver_gone, gate, named_response, Gated, SnapshotCommand, MEMORY_REFUSAL};
use super::{AdminAsk, AdminReply};
use crate::driver::DriverMsg;
use crate::view::RestoreAnswer;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH};
use hyper::{Method, Request, Response, StatusCode};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{info, warn};
use zk_proto::Id;

/// How long the command waits for the proposals made before it to be durable and the restored
/// tree to be written.
pub const RESTORE_WAIT: Duration = Duration::from_secs(600);

/// How long the snapshot may take to arrive: a client that stalls holds the one restore's slot
/// and what it sent so far until then.
pub const BODY_WAIT: Duration = Duration::from_secs(600);

/// How often it asks the driver whether the restore is done.
const POLL_EVERY: Duration = Duration::from_millis(20);

fn answer(status: StatusCode, error: Option<&str>) -> Response<AdminBody> {
    named_response(super::commands::RESTORE, status, error)
}

/// Serves one `restore` request, asked for as `name` (`restore` or `rest`).
pub async fn serve(
    cmd: &SnapshotCommand,
    name: &str,
    core: &mpsc::Sender<DriverMsg>,
    req: Request<Incoming>,
    peer: IpAddr,
    cert_ids: &[Id],
) -> Response<AdminBody> {
    if req.method() != Method::POST {
        let mut r = named_response(name, StatusCode::METHOD_NOT_ALLOWED, Some("restore takes a POST"));
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    // One at a time: the slot is held until the answer (a client gone before it leaves the
    // restore to finish, and the next one is refused while it does).
    let _one = match gate(cmd, name, Gated::Restore, core, req.headers(), peer, cert_ids).await {
        Ok(slot) => slot,
        Err(r) => return r,
    };
    let max = cmd.restore_max_bytes;
    let too_large = || {
        warn!("restore command from {peer}: the snapshot is larger than admin.restore.maxBytes ({max})");
        answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some(&format!("the snapshot is larger than admin.restore.maxBytes ({max} bytes)")),
        )
    };
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return too_large();
    }
    // Before the body is read: a second tree must fit under the memory brake.
    let cfg = match ask(core, AdminAsk::RestoreConfig).await {
        Some(AdminReply::RestoreConfig(Some(cfg), true)) => cfg,
        Some(AdminReply::RestoreConfig(Some(_), false)) => {
            warn!("restore command from {peer}: {MEMORY_REFUSAL}");
            return answer(StatusCode::SERVICE_UNAVAILABLE, Some(MEMORY_REFUSAL));
        }
        Some(AdminReply::RestoreConfig(None, _)) => {
            return answer(StatusCode::INTERNAL_SERVER_ERROR, Some("this server keeps no snapshots"))
        }
        _ => return driver_gone(),
    };
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let read =
        tokio::time::timeout(BODY_WAIT, http_body_util::Limited::new(req.into_body(), limit).collect());
    let body = match read.await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Ok(Err(e)) => {
            warn!("restore command from {peer}: reading the snapshot failed: {e}");
            return answer(StatusCode::BAD_REQUEST, Some("the snapshot could not be read from the request"));
        }
        Err(_) => {
            warn!("restore command from {peer}: the snapshot took longer than {BODY_WAIT:?} to arrive");
            return answer(
                StatusCode::REQUEST_TIMEOUT,
                Some("the snapshot took longer than 600 s to arrive"),
            );
        }
    };
    if body.is_empty() {
        return answer(StatusCode::BAD_REQUEST, Some("no snapshot in the request's body"));
    }
    let started = Instant::now();
    let size = body.len();
    let decoded = match decode(body, cfg).await {
        Ok(d) => d,
        Err(why) => {
            warn!("restore command from {peer}: {why}");
            return answer(StatusCode::INTERNAL_SERVER_ERROR, Some(&why));
        }
    };
    let (db, nodes) = decoded;
    info!(
        "restore command from {peer}: a snapshot of {size} bytes, {nodes} nodes, decoded in {:?}",
        started.elapsed()
    );
    let mut reply = ask(core, AdminAsk::Restore { db: Box::new(db) }).await;
    let deadline = Instant::now() + RESTORE_WAIT;
    loop {
        let answer_now = match reply {
            Some(AdminReply::Restore(a)) => a,
            _ => return driver_gone(),
        };
        match answer_now {
            Some(RestoreAnswer::Refused(why)) => {
                warn!("restore command from {peer}: {why}");
                return answer(StatusCode::INTERNAL_SERVER_ERROR, Some(why));
            }
            Some(RestoreAnswer::Restored { snapshot_zxid, zxid }) => {
                info!(
                    "restore command from {peer}: the tree of the snapshot at {snapshot_zxid:#x} is in \
                     place and durable as of zxid {zxid:#x}, in {:?}",
                    started.elapsed()
                );
                let body = super::http::to_pretty_json(&serde_json::json!({
                    "last_zxid": snapshot_zxid,
                    "zxid_after_restore": zxid,
                    "command": super::commands::RESTORE,
                    "error": null,
                }));
                let mut r = Response::new(
                    http_body_util::Full::new(Bytes::from(body))
                        .map_err(|never| match never {})
                        .boxed_unsync(),
                );
                r.headers_mut()
                    .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                return r;
            }
            Some(RestoreAnswer::Pending) => {}
            None => {
                // Another asker took the answer (one restore at a time is refused): not ours.
                return answer(StatusCode::INTERNAL_SERVER_ERROR, Some("the restore's answer was lost"));
            }
        }
        if Instant::now() >= deadline {
            return answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some("the restore was not done within 600 s (see the server's log)"),
            );
        }
        tokio::time::sleep(POLL_EVERY).await;
        reply = ask(core, AdminAsk::RestoreStatus).await;
    }
}

/// Decodes the snapshot on a thread of its own (a large tree takes seconds): the database, ready
/// to serve, and its node count.
async fn decode(body: Bytes, cfg: zk_tree::TreeConfig) -> Result<(zk_tree::Database, u64), String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("zk-restore-read".into()).spawn(move || {
        let decoded = crate::tools::restore_content(body, &cfg).map(|(db, nodes, _)| (db, nodes));
        let _ = tx.send(decoded);
    });
    if let Err(e) = spawned {
        return Err(format!("no thread to decode the snapshot: {e}"));
    }
    rx.await.unwrap_or_else(|_| Err("the thread decoding the snapshot stopped".into()))
}
