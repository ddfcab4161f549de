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
//! containers and TTL nodes alike; only ephemerals show their owner. The export therefore reads
//! a container or TTL node as persistent unless `--kind` declares it (or the file is edited);
//! the import creates whatever kind the file says.
//!
//! This module holds the format and what both sides share; `export.rs` and `import.rs` the two
//! commands.
// The shell's side, not the sans-IO core: the export is stamped with the wall clock and
// progress lines are spaced by it.
#![allow(clippy::disallowed_methods)]

use super::json::{self, Value};
use base64::Engine as _;
use std::collections::VecDeque;
use std::future::Future;
use std::io::BufRead;
use std::pin::Pin;
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
/// (containers `i64::MIN`, TTL nodes `0xFF` in the high byte and the TTL below) are read when a
/// server shows them; Apache 3.5.4+ and zkrs show 0 for both.
pub fn kind_of_owner(owner: i64) -> Option<Kind> {
    if owner == 0 {
        Some(Kind::Persistent)
    } else if owner == i64::MIN {
        Some(Kind::Container)
    } else if (owner as u64) >> 56 == 0xFF && (owner as u64 >> 40) & 0xFFFF == 0 {
        Some(Kind::Ttl(owner & MAX_TTL_MS))
    } else {
        None
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

    /// One line of the `nodes` array.
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(64 + self.data.len() * 4 / 3);
        s.push_str("{\"path\":");
        json::write_str(&mut s, &self.path);
        match self.kind {
            Kind::Persistent => s.push_str(",\"kind\":\"persistent\""),
            Kind::Container => s.push_str(",\"kind\":\"container\""),
            Kind::Ttl(ms) => s.push_str(&format!(",\"kind\":\"ttl\",\"ttl_ms\":{ms}")),
        }
        s.push_str(",\"data\":\"");
        base64::engine::general_purpose::STANDARD.encode_string(&self.data, &mut s);
        s.push_str("\",\"acl\":[");
        for (i, a) in self.acl.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"scheme\":");
            json::write_str(&mut s, &a.id.scheme);
            s.push_str(",\"id\":");
            json::write_str(&mut s, &a.id.id);
            s.push_str(&format!(",\"perms\":{}}}", a.perms));
        }
        s.push_str(&format!("],\"cversion\":{},\"num_children\":{}}}", self.cversion, self.num_children));
        s
    }

    /// Reads a record back, checking every field.
    pub fn from_value(v: &Value) -> Result<NodeRecord, String> {
        let field = |k: &str| v.get(k).ok_or_else(|| format!("missing \"{k}\""));
        let int = |k: &str| -> Result<i64, String> {
            field(k)?.as_i64().ok_or_else(|| format!("\"{k}\" is not an integer"))
        };
        let i32_field = |k: &str| -> Result<i32, String> {
            i32::try_from(int(k)?).map_err(|_| format!("\"{k}\" is out of range"))
        };
        let path = field("path")?.as_str().ok_or("\"path\" is not a string")?.to_owned();
        if path.starts_with('/') || path.ends_with('/') {
            return Err(format!("path \"{path}\" must be relative, without a leading or trailing /"));
        }
        let kind = match field("kind")?.as_str() {
            Some("persistent") => Kind::Persistent,
            Some("container") => Kind::Container,
            Some("ttl") => {
                let ms = int("ttl_ms")?;
                if !(1..=MAX_TTL_MS).contains(&ms) {
                    return Err(format!("\"ttl_ms\" must be 1..={MAX_TTL_MS}"));
                }
                Kind::Ttl(ms)
            }
            Some(k) => return Err(format!("unknown kind \"{k}\"")),
            None => return Err("\"kind\" is not a string".into()),
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(field("data")?.as_str().ok_or("\"data\" is not a string")?)
            .map_err(|e| format!("\"data\" is not base64: {e}"))?;
        let Value::Array(entries) = field("acl")? else { return Err("\"acl\" is not an array".into()) };
        let mut acl = Vec::with_capacity(entries.len());
        for e in entries {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or(format!("ACL entry without \"{k}\""))
            };
            let perms = e.get("perms").and_then(Value::as_i64).ok_or("ACL entry without \"perms\"")?;
            if !(0..=i64::from(zk_proto::perms::ALL)).contains(&perms) {
                return Err(format!("ACL perms {perms} out of range 0..=31"));
            }
            acl.push(Acl { perms: perms as i32, id: Id { scheme: s("scheme")?, id: s("id")? } });
        }
        if acl.is_empty() {
            return Err("empty ACL".into());
        }
        let (cversion, num_children) = (i32_field("cversion")?, i32_field("num_children")?);
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

/// Reads an export file node by node, checking its shape as it goes: the header before the
/// nodes, the root first, every node after its parent (depth-first), no more children under a
/// node than the count recorded with it, and the trailer's count.
pub struct FileReader<R> {
    json: json::Reader<R>,
    /// The branch from the root to the last node: path, children seen, children recorded.
    open: Vec<(String, i64, i64)>,
    count: u64,
    done: bool,
}

impl<R: BufRead> FileReader<R> {
    /// Reads the header, up to the start of the nodes.
    pub fn open(r: R) -> Result<(Header, FileReader<R>), String> {
        let mut json = json::Reader::new(r);
        let bad = |e: json::JsonError| format!("not an export file: {e}");
        json.begin_object().map_err(bad)?;
        let (mut format, mut version, mut source) = (None, None, None);
        loop {
            let Some(key) = json.next_key().map_err(bad)? else {
                return Err("not an export file: no \"nodes\"".into());
            };
            if key == "nodes" {
                break;
            }
            let v = json.value().map_err(bad)?;
            match key.as_str() {
                "format" => format = v.as_str().map(str::to_owned),
                "version" => version = v.as_i64(),
                "source" => source = v.as_str().map(str::to_owned),
                _ => {}
            }
        }
        if format.as_deref() != Some(FORMAT) {
            return Err(format!(
                "not an export file: \"format\" must come before \"nodes\" and be \"{FORMAT}\""
            ));
        }
        if version != Some(VERSION) {
            return Err(format!(
                "export format version {version:?} is not supported (this build reads {VERSION})"
            ));
        }
        let source = source.ok_or("not an export file: no \"source\" before \"nodes\"")?;
        json.begin_array().map_err(bad)?;
        Ok((Header { source }, FileReader { json, open: Vec::new(), count: 0, done: false }))
    }

    /// The next node, None after the last (the trailer checked then).
    pub fn next_record(&mut self) -> Result<Option<NodeRecord>, String> {
        if self.done {
            return Ok(None);
        }
        let at = |n: u64| format!("node {n}");
        let bad = |e: json::JsonError| format!("bad export file: {e}");
        if !self.json.next_element().map_err(bad)? {
            self.finish()?;
            return Ok(None);
        }
        let v = self.json.value().map_err(bad)?;
        let rec =
            NodeRecord::from_value(&v).map_err(|e| format!("bad export file: {}: {e}", at(self.count)))?;
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

    fn finish(&mut self) -> Result<(), String> {
        while !self.open.is_empty() {
            self.close_last()?;
        }
        let bad = |e: json::JsonError| format!("bad export file: {e}");
        let mut count = None;
        while let Some(key) = self.json.next_key().map_err(bad)? {
            let v = self.json.value().map_err(bad)?;
            if key == "node_count" {
                count = v.as_i64();
            }
        }
        self.json.end().map_err(bad)?;
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
        let lines: Vec<String> = nodes.iter().map(NodeRecord::to_json).collect();
        format!(
            "{{\"format\":\"{FORMAT}\",\"version\":1,\"source\":\"/s\",\"nodes\":[\n{}\n],\"node_count\":{count}}}",
            lines.join(",\n")
        )
    }

    fn read_all(text: &str) -> Result<Vec<NodeRecord>, String> {
        let (h, mut r) = FileReader::open(text.as_bytes())?;
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
            rec("", Kind::Persistent, 7, 3),
            rec("a", Kind::Container, 0, 0),
            rec("b", Kind::Ttl(3000), 2, 0),
            rec("b\"é", Kind::Persistent, -1, 1),
        ];
        assert_eq!(read_all(&doc(&nodes, 4)).unwrap(), nodes);
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
        let v2 = doc(&[root], 1).replace("\"version\":1", "\"version\":2");
        assert!(read_all(&v2).unwrap_err().contains("not supported"));
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
