//! `export` and `import`: a subtree copied between live ensembles through the ordinary client
//! protocol, so the source and the target may be zkrs or Apache ZooKeeper.
//!
//! The file is one JSON document (docs/guide, "Exporting and importing a subtree"): a header
//! (format, version, source path, time), the nodes depth-first with every parent before its
//! children, then a trailer (node count, ephemerals skipped). Both sides stream it: the export
//! holds at most [`EXPORT_WINDOW`] nodes (and [`EXPORT_LEVEL_WINDOW`] more per level below the
//! first) plus the pending child names along the current branch, the import one batch of
//! [`BATCH_OPS`] operations and [`MULTIS_IN_FLIGHT`] multis on the wire.
//!
//! Sequence counters. A parent's sequential children are numbered by the count of creates
//! under it; clients see that count as `cversion = 2 × creates − numChildren`. The import
//! recreates the children (one create each) and then makes up the rest of the source's count
//! with pairs of a create and a delete of a throwaway child ([`BUMP_CHILD`]), so the next
//! sequential child on the target gets the name it would get on the source.
//!
//! Kinds. Both Apache ZooKeeper (3.5.4 on) and zkrs report `ephemeralOwner = 0` to clients for
//! containers and TTL nodes alike; only ephemerals show their owner. The export from a live
//! server therefore reads a container or TTL node as persistent unless `--kind` declares it (or
//! the file is edited); an export from a snapshot file (`from_snapshot.rs`) reads the owner as
//! stored, which says the kind. The import creates whatever kind the file says.
//!
//! This module holds the format and what both sides share; `export.rs` and `import.rs` the two
//! commands, `from_snapshot.rs` the export made from a snapshot file.
// The shell's side, not the sans-IO core: the export is stamped with the wall clock and
// progress lines are spaced by it.
#![allow(clippy::disallowed_methods)]

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::sync::mpsc::{sync_channel, Receiver};
use std::task::Poll;
use std::time::{Duration, Instant};
use zk_client::{Acl, Error, Id};
use zk_proto::ErrorCode;

/// The `format` field of the document.
pub const FORMAT: &str = "zkrs-subtree-export";
/// The `version` field this build writes and reads.
pub const VERSION: i64 = 1;
/// Nodes being read at once by an export (three requests each).
pub const EXPORT_WINDOW: usize = 128;
/// Reads the deepest level of an export may have out even when the levels above hold the rest.
pub const EXPORT_LEVEL_WINDOW: usize = 32;
/// Operations in one multi of an import.
pub const BATCH_OPS: usize = 1000;
/// Estimated request bytes in one multi: half of Apache's default jute.maxbuffer, so a batch
/// is never refused for its size. A node larger than this is created on its own.
pub const BATCH_BYTES: usize = 512 * 1024;
/// Multis (or single creates) of an import on the wire at once.
pub const MULTIS_IN_FLIGHT: usize = 8;
/// Target nodes whose stat is read at once before their counters are advanced.
pub const STAT_WINDOW: usize = 256;
/// The child an import creates and deletes at once to advance a parent's counter.
pub const BUMP_CHILD: &str = "zkrs-import-cversion-bump";
/// The largest TTL a server accepts, ms.
pub const MAX_TTL_MS: i64 = 0xFF_FFFF_FFFF;
/// Existing nodes an import into `--merge` names one by one; beyond, it only counts them.
pub const REPORT_EXISTING_MAX: u64 = 20;
/// Ephemerals an export names one by one; beyond, it only counts them.
pub const REPORT_EPHEMERALS_MAX: u64 = 20;
/// A string of a node record longer than this is refused, once read: the base64 of a node's
/// data stays under 1.5 MB with jute.maxbuffer's 1 MB; this leaves room for servers configured
/// with a larger one. (Nesting is limited by serde_json's recursion limit.)
pub const MAX_STRING_BYTES: usize = 64 << 20;
/// A node record with more ACL entries than this is refused.
pub const MAX_ACL_ENTRIES: usize = 65_536;
/// Nodes the parser of an import file may have read ahead of the import.
pub const READ_AHEAD: usize = 32;

/// A node's kind as the file records it. Ephemerals are never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A plain node.
    Persistent,
    /// Removed by the server once it had children and has none left.
    Container,
    /// Removed by the server once it has no children and no change for this many ms.
    Ttl(i64),
}

impl Kind {
    /// `container`, `persistent` or `ttl:MS` (the `--kind` syntax).
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "persistent" => Ok(Kind::Persistent),
            "container" => Ok(Kind::Container),
            _ => match s.strip_prefix("ttl:").map(str::parse::<i64>) {
                Some(Ok(ms)) if (1..=MAX_TTL_MS).contains(&ms) => Ok(Kind::Ttl(ms)),
                Some(_) => Err(format!("a TTL must be 1..={MAX_TTL_MS} ms: {s}")),
                None => Err(format!("unknown kind {s} (persistent, container or ttl:MS)")),
            },
        }
    }
}

/// What an `ephemeralOwner` says of a node: None for an ephemeral. The stored encodings
/// (containers `i64::MIN`, TTL nodes `0xFF` in the high byte, 16 bits of zero and the TTL below)
/// are read as a server with extended types enabled reads them (zk-tree's `owner_kind`): from a
/// snapshot, or from a server that shows them (Apache 3.5.4+ and zkrs show clients 0 for both).
pub fn kind_of_owner(owner: i64) -> Option<Kind> {
    use zk_tree::node::{owner_kind, ttl_of, OwnerKind};
    match owner_kind(owner, true) {
        OwnerKind::Void => Some(Kind::Persistent),
        OwnerKind::Container => Some(Kind::Container),
        OwnerKind::Ttl => Some(Kind::Ttl(ttl_of(owner))),
        OwnerKind::Normal => None,
    }
}

/// Names a left-out ephemeral on stderr, the first [`REPORT_EPHEMERALS_MAX`] of them; `count`
/// counts it.
pub fn report_ephemeral(count: u64, path: &str, owner: i64) {
    if count <= REPORT_EPHEMERALS_MAX {
        eprintln!(
            "export: skipped ephemeral {path} (session 0x{owner:x}): ephemerals belong to their session"
        );
    }
}

/// Says on stderr how many ephemerals were left out, when more than were named.
pub fn report_ephemerals_total(count: u64) {
    if count > REPORT_EPHEMERALS_MAX {
        eprintln!("export: skipped {count} ephemerals in all");
    }
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Writes one export document to `out`: the header (on the first node, so a source that fails
/// before its root writes nothing), the nodes one a line, the trailer.
pub struct DocWriter<'w> {
    out: &'w mut dyn std::io::Write,
    /// The header, written with the first node.
    head: Option<String>,
    nodes: u64,
}

fn json_err(e: serde_json::Error) -> String {
    format!("cannot write the export: {e}")
}

fn io_err(e: std::io::Error) -> String {
    format!("cannot write the export: {e}")
}

/// `"name":value` pairs, comma-separated.
fn json_fields(fields: &[(&str, serde_json::Value)]) -> Result<String, String> {
    let mut s = String::new();
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&serde_json::to_string(name).map_err(json_err)?);
        s.push(':');
        s.push_str(&serde_json::to_string(value).map_err(json_err)?);
    }
    Ok(s)
}

impl<'w> DocWriter<'w> {
    /// A document of the subtree at `source`, whose header carries `fields` after `format`,
    /// `version` and `source`. Nothing is written yet.
    pub fn new(
        out: &'w mut dyn std::io::Write,
        source: &str,
        fields: &[(&str, serde_json::Value)],
    ) -> Result<DocWriter<'w>, String> {
        let mut head = format!("{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"source\":");
        head.push_str(&serde_json::to_string(source).map_err(json_err)?);
        if !fields.is_empty() {
            head.push(',');
            head.push_str(&json_fields(fields)?);
        }
        head.push_str(",\n\"nodes\":[");
        Ok(DocWriter { out, head: Some(head), nodes: 0 })
    }

    /// Nodes written.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Writes `rec` on a line of its own (the header first, before the first node).
    pub fn node(&mut self, rec: &NodeRecord) -> Result<(), String> {
        if let Some(head) = self.head.take() {
            self.out.write_all(head.as_bytes()).map_err(io_err)?;
        }
        let sep = if self.nodes == 0 { "\n" } else { ",\n" };
        self.out.write_all(sep.as_bytes()).map_err(io_err)?;
        rec.write_json(&mut *self.out).map_err(json_err)?;
        self.nodes += 1;
        Ok(())
    }

    /// Closes the nodes and writes the trailer, `node_count` then `fields`, and flushes.
    ///
    /// Errors: no node was written (a document has its root at least), or the writer's.
    pub fn finish(self, fields: &[(&str, serde_json::Value)]) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("no node to export".into());
        }
        let mut tail = format!("\n],\n\"node_count\":{}", self.nodes);
        if !fields.is_empty() {
            tail.push(',');
            tail.push_str(&json_fields(fields)?);
        }
        tail.push_str("}\n");
        self.out.write_all(tail.as_bytes()).map_err(io_err)?;
        self.out.flush().map_err(io_err)
    }
}

/// One node of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    /// Relative to the exported root ("" for the root itself), without a leading slash.
    pub path: String,
    /// The data.
    pub data: Vec<u8>,
    /// The ACL.
    pub acl: Vec<Acl>,
    /// Its kind.
    pub kind: Kind,
    /// The source's cversion, as clients see it.
    pub cversion: i32,
    /// The source's child count, read with that cversion.
    pub num_children: i32,
}

impl NodeRecord {
    /// The number of creates under this node on the source: what its next sequential child is
    /// numbered with.
    pub fn creates(&self) -> i64 {
        (i64::from(self.cversion) + i64::from(self.num_children)) / 2
    }

    /// Writes the record as one line of the `nodes` array (compact JSON, no newline).
    pub fn write_json<W: std::io::Write>(&self, out: W) -> serde_json::Result<()> {
        let (kind, ttl_ms) = match self.kind {
            Kind::Persistent => ("persistent", None),
            Kind::Container => ("container", None),
            Kind::Ttl(ms) => ("ttl", Some(ms)),
        };
        let acl =
            self.acl.iter().map(|a| AclOut { scheme: &a.id.scheme, id: &a.id.id, perms: a.perms }).collect();
        let data = base64::engine::general_purpose::STANDARD.encode(&self.data);
        let rec = NodeOut {
            path: &self.path,
            kind,
            ttl_ms,
            data,
            acl,
            cversion: self.cversion,
            num_children: self.num_children,
        };
        serde_json::to_writer(out, &rec)
    }
}

/// A node record as written, fields in the file's order.
#[derive(Serialize)]
struct NodeOut<'a> {
    path: &'a str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<i64>,
    data: String,
    acl: Vec<AclOut<'a>>,
    cversion: i32,
    num_children: i32,
}

/// An ACL entry as written.
#[derive(Serialize)]
struct AclOut<'a> {
    scheme: &'a str,
    id: &'a str,
    perms: i32,
}

/// A node record as read, before its fields are checked. Integers are read as i64, exactly;
/// unknown fields are skipped.
#[derive(Deserialize)]
struct NodeIn {
    path: String,
    kind: String,
    #[serde(default)]
    ttl_ms: Option<i64>,
    data: String,
    acl: Vec<AclIn>,
    cversion: i64,
    num_children: i64,
}

/// An ACL entry as read.
#[derive(Deserialize)]
struct AclIn {
    scheme: String,
    id: String,
    perms: i64,
}

impl NodeIn {
    /// The record, every field checked.
    fn check(self) -> Result<NodeRecord, String> {
        let long = |what: &str, s: &str| {
            if s.len() > MAX_STRING_BYTES {
                Err(format!("{what} is longer than {} MiB", MAX_STRING_BYTES >> 20))
            } else {
                Ok(())
            }
        };
        long("\"path\"", &self.path)?;
        long("\"data\"", &self.data)?;
        let path = self.path;
        if path.starts_with('/') || path.ends_with('/') {
            return Err(format!("path \"{path}\" must be relative, without a leading or trailing /"));
        }
        let kind = match self.kind.as_str() {
            "persistent" => Kind::Persistent,
            "container" => Kind::Container,
            "ttl" => {
                let ms = self.ttl_ms.ok_or("missing \"ttl_ms\"")?;
                if !(1..=MAX_TTL_MS).contains(&ms) {
                    return Err(format!("\"ttl_ms\" must be 1..={MAX_TTL_MS}"));
                }
                Kind::Ttl(ms)
            }
            k => return Err(format!("unknown kind \"{k}\"")),
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|e| format!("\"data\" is not base64: {e}"))?;
        if self.acl.len() > MAX_ACL_ENTRIES {
            return Err(format!("more than {MAX_ACL_ENTRIES} ACL entries"));
        }
        let mut acl = Vec::with_capacity(self.acl.len());
        for e in self.acl {
            long("an ACL scheme", &e.scheme)?;
            long("an ACL id", &e.id)?;
            if !(0..=i64::from(zk_proto::perms::ALL)).contains(&e.perms) {
                return Err(format!("ACL perms {} out of range 0..=31", e.perms));
            }
            acl.push(Acl { perms: e.perms as i32, id: Id { scheme: e.scheme, id: e.id } });
        }
        if acl.is_empty() {
            return Err("empty ACL".into());
        }
        let i32_field = |k: &str, v: i64| i32::try_from(v).map_err(|_| format!("\"{k}\" is out of range"));
        let (cversion, num_children) =
            (i32_field("cversion", self.cversion)?, i32_field("num_children", self.num_children)?);
        let (cv, n) = (i64::from(cversion), i64::from(num_children));
        if n < 0 || cv < -n || (cv + n) % 2 != 0 {
            // 2 × creates − numChildren: never below −numChildren, and of numChildren's parity.
            return Err(format!("cversion {cversion} cannot go with {num_children} children"));
        }
        Ok(NodeRecord { path, data, acl, kind, cversion, num_children })
    }
}

/// Apache's name of an error code (`KeeperException.Code`), with its number.
pub fn code_name(e: Error) -> String {
    let name = match e.code() {
        ErrorCode::Ok => "OK",
        ErrorCode::SystemError => "SYSTEMERROR",
        ErrorCode::RuntimeInconsistency => "RUNTIMEINCONSISTENCY",
        ErrorCode::DataInconsistency => "DATAINCONSISTENCY",
        ErrorCode::ConnectionLoss => "CONNECTIONLOSS",
        ErrorCode::MarshallingError => "MARSHALLINGERROR",
        ErrorCode::Unimplemented => "UNIMPLEMENTED",
        ErrorCode::OperationTimeout => "OPERATIONTIMEOUT",
        ErrorCode::BadArguments => "BADARGUMENTS",
        ErrorCode::UnknownSession => "UNKNOWNSESSION",
        ErrorCode::NewConfigNoQuorum => "NEWCONFIGNOQUORUM",
        ErrorCode::ReconfigInProgress => "RECONFIGINPROGRESS",
        ErrorCode::ApiError => "APIERROR",
        ErrorCode::NoNode => "NONODE",
        ErrorCode::NoAuth => "NOAUTH",
        ErrorCode::BadVersion => "BADVERSION",
        ErrorCode::NoChildrenForEphemerals => "NOCHILDRENFOREPHEMERALS",
        ErrorCode::NodeExists => "NODEEXISTS",
        ErrorCode::NotEmpty => "NOTEMPTY",
        ErrorCode::SessionExpired => "SESSIONEXPIRED",
        ErrorCode::InvalidCallback => "INVALIDCALLBACK",
        ErrorCode::InvalidAcl => "INVALIDACL",
        ErrorCode::AuthFailed => "AUTHFAILED",
        ErrorCode::SessionMoved => "SESSIONMOVED",
        ErrorCode::NotReadOnly => "NOTREADONLY",
        ErrorCode::EphemeralOnLocalSession => "EPHEMERALONLOCALSESSION",
        ErrorCode::NoWatcher => "NOWATCHER",
        ErrorCode::RequestTimeout => "REQUESTTIMEOUT",
        ErrorCode::ReconfigDisabled => "RECONFIGDISABLED",
        ErrorCode::SessionClosedRequireSaslAuth => "SESSIONCLOSEDREQUIRESASLAUTH",
        ErrorCode::QuotaExceeded => "QUOTAEXCEEDED",
        ErrorCode::ThrottledOp => "THROTTLEDOP",
    };
    format!("{name} ({})", e.code().code())
}

/// "getData /x: NONODE (-101)".
pub fn op_failed(what: &str, path: &str, e: Error) -> String {
    format!("{what} {path}: {}", code_name(e))
}

/// `root` joined with a relative path.
pub fn join(root: &str, rel: &str) -> String {
    match (root, rel) {
        (r, "") => r.to_owned(),
        ("/", rel) => format!("/{rel}"),
        (r, rel) => format!("{r}/{rel}"),
    }
}

/// `path` relative to `root` (which it is under).
pub fn relative<'a>(root: &str, path: &'a str) -> &'a str {
    if path.len() == root.len() {
        ""
    } else if root == "/" {
        &path[1..]
    } else {
        &path[root.len() + 1..]
    }
}

/// Whether `path` is `root` or below it.
pub fn is_under(root: &str, path: &str) -> bool {
    path == root || root == "/" || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'))
}

/// Requests issued in order and collected in order, with several on the wire at once.
///
/// A future is polled once as it is pushed, which hands its request to the client's command
/// queue, or, when that queue is full, takes its place in line for it (tokio's channel serves
/// waiting senders first come, first served). That first poll runs outside tokio's cooperative
/// budget: with the budget spent, a send would return Pending without taking its place in line,
/// and a request pushed after the task's next yield could overtake it (seen: a multi creating
/// children reached the server before the one creating their parent). A [`InOrder::strict`]
/// queue also polls the requests still waiting for the queue before a new one, so requests reach
/// the server in push order, which lets a multi creating children follow the one creating their
/// parent before that one is answered.
pub struct InOrder<'a, T> {
    queue: VecDeque<Slot<'a, T>>,
    strict: bool,
}

/// A request of [`InOrder`]: on the wire, or answered when it was issued.
pub enum Slot<'a, T> {
    /// Not answered yet.
    Waiting(Pin<Box<dyn Future<Output = T> + 'a>>),
    /// Answered.
    Done(T),
}

impl<'a, T> InOrder<'a, T> {
    /// An empty queue for independent requests (reads of different nodes).
    pub fn new() -> Self {
        InOrder { queue: VecDeque::new(), strict: false }
    }

    /// An empty queue whose requests reach the server in push order in every case.
    pub fn strict() -> Self {
        InOrder { queue: VecDeque::new(), strict: true }
    }

    /// Requests pushed and not yet collected.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Polls each request not answered yet, oldest first, outside the cooperative budget.
    async fn poll_waiting(&mut self) {
        let queue = &mut self.queue;
        std::future::poll_fn(|cx| {
            for slot in queue.iter_mut() {
                if let Slot::Waiting(f) = slot {
                    if let Poll::Ready(v) = f.as_mut().poll(cx) {
                        *slot = Slot::Done(v);
                    }
                }
            }
            Poll::Ready(())
        })
        .await
    }

    /// Issues the request `f` makes.
    pub async fn push(&mut self, f: impl Future<Output = T> + 'a) {
        if self.strict {
            self.poll_waiting().await;
        }
        let mut f: Pin<Box<dyn Future<Output = T> + 'a>> = Box::pin(tokio::task::unconstrained(f));
        let first = std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await;
        self.queue.push_back(match first {
            Poll::Ready(v) => Slot::Done(v),
            Poll::Pending => Slot::Waiting(f),
        });
    }

    /// The oldest result, None when nothing is pending.
    pub async fn next(&mut self) -> Option<T> {
        match self.queue.pop_front()? {
            Slot::Done(v) => Some(v),
            Slot::Waiting(f) => Some(f.await),
        }
    }
}

/// Prints a progress line on stderr at most once a second.
pub struct Progress {
    what: &'static str,
    started: Instant,
    last: Instant,
}

impl Progress {
    /// Lines start with `what`.
    pub fn new(what: &'static str) -> Progress {
        let now = Instant::now();
        Progress { what, started: now, last: now }
    }

    /// Prints `line()` if the last line is a second old.
    pub fn tick(&mut self, line: impl FnOnce() -> String) {
        if self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            eprintln!("{}: {} ({:.0} s)", self.what, line(), self.started.elapsed().as_secs_f64());
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for ms since the epoch.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = super::civil_date(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        ms.rem_euclid(1000)
    )
}

/// The header of a file being imported.
#[derive(Debug)]
pub struct Header {
    /// The exported root on the source.
    pub source: String,
}

/// What [`stream`] hands over, in document order: the header, each node, then the trailer's
/// `node_count` once the whole document has been read.
enum Item {
    Header(Header),
    Node(NodeRecord),
    End(Option<i64>),
}

/// Where the items of a document being read go: an error stops the reading.
type Sink<'a> = dyn FnMut(Item) -> Result<(), String> + 'a;

/// Reads one export document from `r` with serde_json, handing its header, each node (checked
/// field by field) and the trailer's count to `sink` as they are read: the `nodes` array is
/// visited element by element, so only one node is held at a time. serde_json's errors name the
/// line and column where they were seen; a node whose fields fail a check is named by its index
/// and path.
fn stream<R: Read>(r: R, sink: &mut Sink<'_>) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_reader(r);
    let mut doc = Doc { sink, failed: None, in_nodes: false, count: 0 };
    let read = serde::Deserializer::deserialize_map(&mut de, &mut doc);
    let read = read.and_then(|count| de.end().map(|()| count));
    match read {
        Ok(count) => (doc.sink)(Item::End(count)),
        Err(e) => Err(match doc.failed.take() {
            // serde_json's position would be past the node (and the separator after it): the
            // message names the node instead.
            Some(msg) => msg,
            None if doc.in_nodes => format!("bad export file: {e}"),
            None => format!("not an export file: {e}"),
        }),
    }
}

/// The state of [`stream`]: the visitor of the top-level object.
struct Doc<'s, 'a> {
    sink: &'s mut Sink<'a>,
    /// The message of a check that failed (serde's error then only carries the position).
    failed: Option<String>,
    /// Whether the `nodes` array has been reached.
    in_nodes: bool,
    /// Nodes read.
    count: u64,
}

impl Doc<'_, '_> {
    fn fail<E: de::Error>(&mut self, msg: String) -> E {
        let e = E::custom(&msg);
        self.failed = Some(msg);
        e
    }

    fn emit<E: de::Error>(&mut self, item: Item) -> Result<(), E> {
        (self.sink)(item).map_err(|msg| self.fail(msg))
    }
}

impl<'de> Visitor<'de> for &mut Doc<'_, '_> {
    /// The trailer's `node_count`.
    type Value = Option<i64>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<i64>, A::Error> {
        let (mut format, mut version, mut source, mut node_count) = (None, None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "nodes" if !self.in_nodes => {
                    if format.as_deref() != Some(FORMAT) {
                        return Err(self.fail(format!(
                            "not an export file: \"format\" must come before \"nodes\" and be \"{FORMAT}\""
                        )));
                    }
                    if version != Some(VERSION) {
                        return Err(self.fail(format!(
                            "export format version {version:?} is not supported (this build reads {VERSION})"
                        )));
                    }
                    let Some(source) = source.take() else {
                        return Err(self.fail("not an export file: no \"source\" before \"nodes\"".into()));
                    };
                    self.emit(Item::Header(Header { source }))?;
                    self.in_nodes = true;
                    map.next_value_seed(Nodes(&mut *self))?;
                }
                "format" if !self.in_nodes => {
                    format = map.next_value::<serde_json::Value>()?.as_str().map(str::to_owned)
                }
                "version" if !self.in_nodes => version = map.next_value::<serde_json::Value>()?.as_i64(),
                "source" if !self.in_nodes => {
                    source = map.next_value::<serde_json::Value>()?.as_str().map(str::to_owned)
                }
                "node_count" if self.in_nodes => node_count = map.next_value::<serde_json::Value>()?.as_i64(),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !self.in_nodes {
            return Err(self.fail("not an export file: no \"nodes\"".into()));
        }
        Ok(node_count)
    }
}

/// The `nodes` array, visited element by element.
struct Nodes<'d, 's, 'a>(&'d mut Doc<'s, 'a>);

impl<'de> DeserializeSeed<'de> for Nodes<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Nodes<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of nodes")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let doc = self.0;
        while let Some(raw) = seq.next_element::<NodeIn>()? {
            let raw_path = raw.path.chars().take(200).collect::<String>();
            let rec = match raw.check() {
                Ok(rec) => rec,
                Err(e) => {
                    let msg = format!("bad export file: node {} (path \"{}\"): {e}", doc.count, raw_path);
                    return Err(doc.fail(msg));
                }
            };
            doc.count += 1;
            doc.emit(Item::Node(rec))?;
        }
        Ok(())
    }
}

/// Reads an export file node by node, checking its shape as it goes: the header before the
/// nodes, the root first, every node after its parent (depth-first), no more children under a
/// node than the count recorded with it, and the trailer's count. A thread parses the file
/// ([`stream`]) at most [`READ_AHEAD`] nodes ahead of the caller.
pub struct FileReader {
    items: Option<Receiver<Result<Item, String>>>,
    parser: Option<std::thread::JoinHandle<()>>,
    /// The branch from the root to the last node: path, children seen, children recorded.
    open: Vec<(String, i64, i64)>,
    count: u64,
    done: bool,
}

impl FileReader {
    /// Starts reading `r`, up to the start of the nodes.
    pub fn open<R: Read + Send + 'static>(r: R) -> Result<(Header, FileReader), String> {
        let (tx, rx) = sync_channel(READ_AHEAD);
        let parser = std::thread::Builder::new()
            .name("import-reader".into())
            .spawn(move || {
                let mut sink = |item| tx.send(Ok(item)).map_err(|_| "the import stopped reading".to_owned());
                let read = stream(r, &mut sink);
                if let Err(e) = read {
                    let _ = tx.send(Err(e));
                }
            })
            .map_err(|e| format!("cannot start reading the file: {e}"))?;
        let mut reader =
            FileReader { items: Some(rx), parser: Some(parser), open: Vec::new(), count: 0, done: false };
        match reader.recv()? {
            Item::Header(h) => Ok((h, reader)),
            _ => Err("not an export file: no header".into()),
        }
    }

    fn recv(&mut self) -> Result<Item, String> {
        match self.items.as_ref().map(Receiver::recv) {
            Some(Ok(item)) => item,
            _ => Err("bad export file: the reader stopped".into()),
        }
    }

    /// The next node, None after the last (the trailer checked then).
    pub fn next_record(&mut self) -> Result<Option<NodeRecord>, String> {
        if self.done {
            return Ok(None);
        }
        let at = |n: u64| format!("node {n}");
        let rec = match self.recv()? {
            Item::Node(rec) => rec,
            Item::End(count) => {
                self.finish(count)?;
                return Ok(None);
            }
            Item::Header(_) => return Err("bad export file: a second header".into()),
        };
        if self.count == 0 {
            if !rec.path.is_empty() {
                return Err("bad export file: the first node must be the root (path \"\")".into());
            }
        } else {
            if rec.path.is_empty() {
                return Err(format!("bad export file: {}: a second root", at(self.count)));
            }
            let parent = rec.path.rsplit_once('/').map_or("", |(p, _)| p);
            while self.open.last().is_some_and(|(p, _, _)| p != parent) {
                self.close_last()?;
            }
            let Some(top) = self.open.last_mut() else {
                return Err(format!(
                    "bad export file: {}: \"{}\" does not follow its parent (nodes must be depth-first, parents first)",
                    at(self.count),
                    rec.path
                ));
            };
            top.1 += 1;
        }
        self.open.push((rec.path.clone(), 0, i64::from(rec.num_children)));
        self.count += 1;
        Ok(Some(rec))
    }

    fn close_last(&mut self) -> Result<(), String> {
        if let Some((p, seen, recorded)) = self.open.pop() {
            if seen > recorded {
                return Err(format!(
                    "bad export file: \"{p}\" has {seen} children listed, {recorded} recorded"
                ));
            }
        }
        Ok(())
    }

    fn finish(&mut self, count: Option<i64>) -> Result<(), String> {
        while !self.open.is_empty() {
            self.close_last()?;
        }
        if self.count == 0 {
            return Err("bad export file: no nodes".into());
        }
        if count != Some(self.count as i64) {
            return Err(format!(
                "bad export file: {} nodes, the trailer's node_count says {count:?}",
                self.count
            ));
        }
        self.done = true;
        Ok(())
    }
}

impl Drop for FileReader {
    /// Stops the parser (its next hand-over fails) and waits for it.
    fn drop(&mut self) {
        self.items.take();
        if let Some(parser) = self.parser.take() {
            let _ = parser.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(path: &str, kind: Kind, cversion: i32, num_children: i32) -> NodeRecord {
        NodeRecord {
            path: path.into(),
            data: b"d\0\xff".to_vec(),
            acl: vec![Acl { perms: 5, id: Id { scheme: "digest".into(), id: "u:h=".into() } }],
            kind,
            cversion,
            num_children,
        }
    }

    fn doc(nodes: &[NodeRecord], count: usize) -> String {
        let lines: Vec<String> = nodes
            .iter()
            .map(|n| {
                let mut line = Vec::new();
                n.write_json(&mut line).unwrap();
                String::from_utf8(line).unwrap()
            })
            .collect();
        format!(
            "{{\"format\":\"{FORMAT}\",\"version\":1,\"source\":\"/s\",\"nodes\":[\n{}\n],\"node_count\":{count}}}",
            lines.join(",\n")
        )
    }

    fn read_all(text: &str) -> Result<Vec<NodeRecord>, String> {
        let (h, mut r) = FileReader::open(std::io::Cursor::new(text.as_bytes().to_vec()))?;
        assert_eq!(h.source, "/s");
        let mut out = Vec::new();
        while let Some(rec) = r.next_record()? {
            out.push(rec);
        }
        Ok(out)
    }

    /// The requests of a strict queue leave in push order, even when the first was pushed with
    /// the task's cooperative budget spent (which left it unsent and let the next one, pushed
    /// after a yield, overtake it: a million-node import failed with NONODE one run in two).
    #[tokio::test(flavor = "current_thread")]
    async fn requests_leave_in_push_order_even_with_the_budget_spent() {
        for strict in [false, true] {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(16);
            let mut q = if strict { InOrder::strict() } else { InOrder::new() };
            // Spend this task's budget: a tokio operation polled now returns Pending.
            std::future::poll_fn(|cx| {
                for _ in 0..1000 {
                    let mut spend = std::pin::pin!(tokio::task::consume_budget());
                    let _ = spend.as_mut().poll(cx);
                }
                Poll::Ready(())
            })
            .await;
            let send = |i: u32| {
                let tx = tx.clone();
                async move {
                    tx.send(i).await.map_err(|_| "closed")?;
                    std::future::pending::<Result<(), &str>>().await
                }
            };
            q.push(send(1)).await;
            tokio::task::yield_now().await;
            q.push(send(2)).await;
            let sent: Vec<u32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
            assert_eq!(sent, [1, 2], "strict: {strict}");
        }
    }

    #[test]
    fn records_round_trip() {
        let nodes = vec![
            rec("", Kind::Persistent, 6, 4),
            rec("a", Kind::Container, 0, 0),
            rec("b", Kind::Ttl(3000), 2, 0),
            rec("b\"é\u{1}\n", Kind::Persistent, -1, 1),
            rec("c", Kind::Ttl(MAX_TTL_MS), 2_147_483_646, 0),
        ];
        let text = doc(&nodes, 5);
        assert_eq!(text.lines().count(), 7, "one node a line:\n{text}");
        assert_eq!(read_all(&text).unwrap(), nodes);
        assert_eq!(nodes[0].creates(), 5);
    }

    #[test]
    fn bad_shapes_are_refused() {
        let err = |nodes: &[NodeRecord], count| read_all(&doc(nodes, count)).unwrap_err();
        let root = rec("", Kind::Persistent, 1, 1);
        assert!(err(&[rec("a", Kind::Persistent, 0, 0)], 1).contains("the first node must be the root"));
        assert!(err(&[root.clone(), rec("x/y", Kind::Persistent, 0, 0)], 2)
            .contains("does not follow its parent"));
        assert!(err(&[root.clone(), rec("a", Kind::Persistent, 0, 0), rec("b", Kind::Persistent, 0, 0)], 3)
            .contains("has 2 children listed, 1 recorded"));
        assert!(err(&[root.clone(), rec("a", Kind::Persistent, 0, 0)], 5).contains("node_count"));
        assert!(err(&[rec("", Kind::Persistent, 1, 0)], 1).contains("cannot go with"));
        let cut = doc(std::slice::from_ref(&root), 1);
        assert!(read_all(&cut[..cut.len() - 3]).unwrap_err().starts_with("bad export file"));
        assert!(read_all("{\"nodes\":[]}").unwrap_err().contains("\"format\""));
        let v2 = doc(std::slice::from_ref(&root), 1).replace("\"version\":1", "\"version\":2");
        assert!(read_all(&v2).unwrap_err().contains("not supported"));
        // Where: serde_json's line and column, for syntax and for checks of a node's fields.
        let good = doc(std::slice::from_ref(&root), 1);
        let syntax = good.replacen("\"path\":\"\"", "\"path\" \"\"", 1);
        let e = read_all(&syntax).unwrap_err();
        assert!(e.starts_with("bad export file: expected `:` at line 2 column"), "{e}");
        let e = read_all(&good.replace("\"perms\":5", "\"perms\":99")).unwrap_err();
        assert!(e == "bad export file: node 0 (path \"\"): ACL perms 99 out of range 0..=31", "{e}");
        let e = read_all(&good.replace("\"cversion\":1", "\"cversion\":1.5")).unwrap_err();
        assert!(e.contains("invalid type: floating point") && e.contains("line 2"), "{e}");
        assert!(read_all(&format!("{good} x")).unwrap_err().contains("trailing characters at line 3"));
        assert!(read_all("hello")
            .unwrap_err()
            .starts_with("not an export file: expected value at line 1 column 1"));
    }

    #[test]
    fn a_reader_dropped_midway_stops_its_parser() {
        let mut nodes = vec![rec("", Kind::Persistent, 20_000, 10_000)];
        nodes.extend((0..10_000).map(|i| rec(&format!("n{i}"), Kind::Persistent, 0, 0)));
        let (_, mut r) =
            FileReader::open(std::io::Cursor::new(doc(&nodes, nodes.len()).into_bytes())).unwrap();
        assert_eq!(r.next_record().unwrap(), Some(nodes[0].clone()));
        // Joins the parser, blocked handing over a node READ_AHEAD ahead: it must give up.
        drop(r);
    }

    #[test]
    fn kinds_from_owners_and_flags() {
        assert_eq!(kind_of_owner(0), Some(Kind::Persistent));
        assert_eq!(kind_of_owner(i64::MIN), Some(Kind::Container));
        assert_eq!(kind_of_owner(0xFF00_0000_0000_0BB8u64 as i64), Some(Kind::Ttl(3000)));
        assert_eq!(kind_of_owner(0x1000_0000_0000_0001), None);
        assert_eq!(Kind::parse("ttl:5"), Ok(Kind::Ttl(5)));
        assert!(Kind::parse("ttl:0").is_err() && Kind::parse("eph").is_err());
        assert_eq!(code_name(Error::NodeExists), "NODEEXISTS (-110)");
        assert_eq!(rfc3339(1_763_784_815_123), "2025-11-22T04:13:35.123Z");
        assert_eq!(
            (join("/", "a"), join("/r", "a/b"), join("/r", "")),
            ("/a".into(), "/r/a/b".into(), "/r".into())
        );
        assert_eq!((relative("/", "/a/b"), relative("/r", "/r/a"), relative("/r", "/r")), ("a/b", "a", ""));
        assert!(is_under("/r", "/r/x") && !is_under("/r", "/rx") && is_under("/", "/x"));
    }
}
