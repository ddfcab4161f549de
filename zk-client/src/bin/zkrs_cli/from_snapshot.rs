//! `export --from-snapshot` and `import --from-snapshot`: a subtree's export document made from
//! a snapshot file instead of a live server, with the readers the server and `zkrs-server
//! import` use, so every node's kind and counter come from the stored data: a snapshot keeps the
//! `ephemeralOwner` as stored, where containers (`i64::MIN`) and TTL nodes (`0xFF` in the high
//! byte, the TTL below) are told apart ([`kind_of_owner`]), and each node's stored cversion (its
//! count of child creates) beside its children.
//!
//! Two formats, told apart by the file's first bytes:
//! - Apache's (`ZKSN`): a data directory's `snapshot.<zxid>`, plain or compressed (`.gz`,
//!   `.snappy`, decompressed by `zk_log::apache_snap_stream`), or the file the AdminServer's
//!   `snapshot` command streams. The content is held whole, as its reader
//!   (`zk_log::apache::read_snapshot_bytes`) checks the Adler32 seals over all of it, and read
//!   twice: once to check it (seals, ACL keys, pre-order) and count each node's children, which
//!   the nodes do not carry and the document gives with each node before its children; then to
//!   write the nodes of the subtree in file order (pre-order, children in Apache's order),
//!   stopping after the subtree. Memory: the content (plus, while a compressed file is
//!   decompressed, the compressed bytes), 4 bytes a node for the counts, the ACL table.
//! - zkrs's (`ZKRSSNAP`, either container format): a data directory's `zkrs-snap/snapshot.<zxid>`.
//!   Its nodes are in slot order, a node may appear twice, and its content is fuzzy, so it is
//!   loaded as the server loads it (`zk_log::snapshot::read_snapshot_file`, one chunk at a time,
//!   into zk-tree's `SnapshotLoader`) and the subtree is walked depth-first, children in name
//!   order. Memory: the tree as a server holds it.
//!
//! A snapshot written while writes went on (a data directory's, when the server was not idle) is
//! fuzzy: each node as of some moment while it was written. That is said on stderr when the file
//! tells (Apache's: the zxid of its digest or last processed zxid past the one in its name;
//! zkrs's: the end zxid past the start zxid); the AdminServer's `snapshot` command of zkrs serves
//! the tree as of one zxid.
// The shell's side, not the sans-IO core: the document is stamped with the wall clock, and the
// import reads it from a thread writing it into a pipe.
#![allow(clippy::disallowed_methods)]

use super::export::ExportSummary;
use super::transfer::*;
use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zk_client::{acl, Acl};
use zk_log::apache::{try_read_snapshot_bytes, zxid_from_apache_name, ApacheError, APACHE_SNAP_MAGIC};
use zk_log::apache_snap_stream::{
    snapshot_content, SnapStreamKind, CONTENT_BYTES_MAX, GZIP_MAGIC, SNAPPY_MAGIC,
};
use zk_tree::tree::parent_of;
use zk_tree::{Database, SnapshotLoader, TreeConfig};

/// A snapshot file, read and checked, from which exports of any subtree are made.
pub struct Snapshot {
    /// The file as named on the command line.
    file: String,
    /// Its format, for the document and messages: `apache`, `apache-gz`, `apache-snappy`,
    /// `zkrs`.
    format: &'static str,
    /// The zxid its content is at, when it says.
    zxid: Option<i64>,
    /// Node records in the file.
    nodes: u64,
    /// The zxids a fuzzy snapshot was written between (the one it started at, the last one
    /// applied when it ended), when the file tells and they differ.
    fuzzy: Option<(i64, i64)>,
    tree: Tree,
}

enum Tree {
    Apache(ApacheTree),
    Zkrs(Box<Database>),
}

/// Apache's content and what the first reading learnt of it.
struct ApacheTree {
    /// The name errors give the content.
    label: String,
    content: Bytes,
    acls: HashMap<i64, Vec<Acl>>,
    /// Each node's number of children, by the node's place in the file.
    children: Vec<u32>,
}

/// The ACL key Apache's nodes name for world:anyone with every permission.
const OPEN_ACL_KEY: i64 = -1;

fn hex(zxid: i64) -> String {
    format!("0x{zxid:x}")
}

impl Snapshot {
    /// Reads the snapshot at `path`, either format (its first bytes tell), and checks it whole:
    /// nothing is exported from a file that turns out damaged. A fuzzy snapshot is said so on
    /// stderr.
    ///
    /// Errors: the file cannot be read, is neither format, or does not read cleanly (what and
    /// where, from the reader).
    pub fn load(path: &Path) -> Result<Snapshot, String> {
        let file = path.display().to_string();
        let mut head = Vec::with_capacity(8);
        std::fs::File::open(path)
            .and_then(|f| f.take(8).read_to_end(&mut head))
            .map_err(|e| format!("cannot read {file}: {e}"))?;
        let kind = if head == zk_log::snapshot::SNAP_MAGIC {
            return Self::load_zkrs(path, file);
        } else if head.starts_with(&APACHE_SNAP_MAGIC.to_be_bytes()) {
            SnapStreamKind::Plain
        } else if head.starts_with(&GZIP_MAGIC) {
            SnapStreamKind::Gzip
        } else if head == SNAPPY_MAGIC {
            SnapStreamKind::Snappy
        } else {
            return Err(format!(
                "{file} is not a snapshot: neither Apache's format (plain, gz or snappy) nor zkrs's"
            ));
        };
        Self::load_apache(path, file, kind)
    }

    fn load_apache(path: &Path, file: String, kind: SnapStreamKind) -> Result<Snapshot, String> {
        let data = std::fs::read(path).map_err(|e| format!("cannot read {file}: {e}"))?;
        let content =
            snapshot_content(&file, kind, Bytes::from(data), CONTENT_BYTES_MAX).map_err(|e| e.to_string())?;
        let label = match kind {
            SnapStreamKind::Plain => file.clone(),
            _ => format!("{file} (decompressed {})", kind.method_name()),
        };
        // Each node's children, counted along the branch from the root to the last node read:
        // the file is in pre-order, so a node's parent is on that branch.
        let mut children: Vec<u32> = Vec::new();
        let mut branch: Vec<(String, usize)> = Vec::new();
        let mut keys = BTreeSet::new();
        let read = try_read_snapshot_bytes(label.clone(), content.clone(), |n| {
            let at = children.len();
            if at == u32::MAX as usize {
                return Err("more nodes than this reader counts".into());
            }
            if at == 0 && n.path != "/" {
                return Err(format!("the first node is {}, not the root", n.path));
            }
            if at > 0 {
                let Some(parent) = parent_of(&n.path).filter(|_| n.path != "/") else {
                    return Err(format!("node {} is not a path below the root", n.path));
                };
                while branch.last().is_some_and(|(p, _)| p != parent) {
                    branch.pop();
                }
                let Some((_, p)) = branch.last() else {
                    return Err(format!(
                        "node {} does not follow its parent (Apache writes the nodes in pre-order)",
                        n.path
                    ));
                };
                children[*p] += 1;
            }
            keys.insert(n.acl_key);
            children.push(0);
            branch.push((n.path, at));
            Ok(())
        });
        let info = read.map_err(|e| match e {
            ApacheError::Stopped(why) => format!("{label}: {why}"),
            e => e.to_string(),
        })?;
        if children.is_empty() {
            return Err(format!("{label}: no nodes"));
        }
        let acls: HashMap<i64, Vec<Acl>> = info.acls.into_iter().collect();
        if let Some(k) = keys.iter().find(|k| **k != OPEN_ACL_KEY && !acls.contains_key(k)) {
            return Err(format!("{label}: a node names ACL key {k}, which the snapshot's ACL table lacks"));
        }
        // A data directory's file is named after the zxid it started at; the digest and the
        // last processed zxid are of the moment it ended.
        let named = path.file_name().and_then(|n| zxid_from_apache_name(&n.to_string_lossy(), "snapshot"));
        let end = info.last_processed_zxid.or(info.digest.map(|d| d.zxid));
        let fuzzy = fuzziness(&file, named, end);
        let format = match kind {
            SnapStreamKind::Plain => "apache",
            SnapStreamKind::Gzip => "apache-gz",
            SnapStreamKind::Snappy => "apache-snappy",
        };
        Ok(Snapshot {
            file,
            format,
            zxid: end.or(named),
            nodes: info.nodes,
            fuzzy,
            tree: Tree::Apache(ApacheTree { label, content, acls, children }),
        })
    }

    fn load_zkrs(path: &Path, file: String) -> Result<Snapshot, String> {
        // Extended types: the owners of TTL nodes are read as TTL nodes (the loader's indexes
        // only; the export reads each owner itself). No digest: nothing is compared.
        let cfg = TreeConfig { extended_types_enabled: true, tree_digest: false, ..TreeConfig::default() };
        let mut loader = SnapshotLoader::new(cfg);
        zk_log::snapshot::read_snapshot_file(path, &mut |chunk| {
            loader.feed(chunk).map_err(|e| e.to_string())
        })
        .map_err(|e| e.to_string())?;
        let start = loader.header().map(|h| h.start_zxid);
        let end = loader.end_state().map(|e| e.zxid);
        let nodes = loader.nodes_loaded();
        let db = loader.finish().map_err(|e| format!("{file}: {e}"))?;
        let fuzzy = fuzziness(&file, start, end);
        Ok(Snapshot {
            file,
            format: "zkrs",
            zxid: end.or(start),
            nodes,
            fuzzy,
            tree: Tree::Zkrs(Box::new(db)),
        })
    }

    /// The file, as named on the command line.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// One line about the file: its format, zxid and node count.
    pub fn describe(&self) -> String {
        let zxid = self.zxid.map_or(String::new(), |z| format!(" at zxid {}", hex(z)));
        let fuzzy =
            self.fuzzy.map_or(String::new(), |(a, b)| format!(", fuzzy from {} to {}", hex(a), hex(b)));
        format!("{}: {} snapshot{zxid}, {} nodes{fuzzy}", self.file, self.format, self.nodes)
    }

    /// Checks that `root` is in the snapshot and not an ephemeral.
    pub fn check_root(&self, root: &str) -> Result<(), String> {
        self.write(root, &mut std::io::sink(), Mode::Check).map(|_| ())
    }

    /// Writes the subtree at `root` to `out` as one export document, naming the ephemerals it
    /// leaves out on stderr.
    ///
    /// Errors: `root` is not in the snapshot or is an ephemeral (nothing written then), a node
    /// the document cannot hold (a TTL out of range), or the writer's.
    pub fn export(&self, root: &str, out: &mut dyn Write) -> Result<ExportSummary, String> {
        self.write(root, out, Mode::Export)
    }

    fn write(&self, root: &str, out: &mut dyn Write, mode: Mode) -> Result<ExportSummary, String> {
        let started = Instant::now();
        let now_ms = now_ms();
        let mut fields = vec![
            ("snapshot", serde_json::Value::from(self.file.as_str())),
            ("snapshot_format", serde_json::Value::from(self.format)),
        ];
        if let Some(z) = self.zxid {
            fields.push(("snapshot_zxid", serde_json::Value::from(hex(z))));
        }
        fields.push(("exported_at", serde_json::Value::from(rfc3339(now_ms))));
        fields.push(("exported_at_ms", serde_json::Value::from(now_ms)));
        let mut w = Writer {
            root,
            doc: DocWriter::new(out, root, &fields)?,
            ephemerals: 0,
            mode,
            progress: Progress::new("export"),
        };
        match &self.tree {
            Tree::Apache(t) => t.walk(root, &mut w)?,
            Tree::Zkrs(db) => walk_database(db, root, &mut w)?,
        }
        let nodes = w.doc.nodes();
        if nodes == 0 {
            return Err(format!("no node {root} in the snapshot {}", self.file));
        }
        let sum = ExportSummary { nodes, ephemerals: w.ephemerals, vanished: 0, elapsed: Duration::ZERO };
        if mode == Mode::Check {
            return Ok(sum);
        }
        if mode == Mode::Export {
            report_ephemerals_total(sum.ephemerals);
        }
        w.doc.finish(&[("skipped_ephemerals", serde_json::Value::from(sum.ephemerals))])?;
        Ok(ExportSummary { elapsed: started.elapsed(), ..sum })
    }

    /// An export document of the subtree at `root`, read as an import file: a thread writes it
    /// into a pipe the returned reader parses (the same checks as for a file), with the
    /// ephemerals unnamed (an import reads it more than once). The thread stops when the reader
    /// is dropped.
    ///
    /// Errors: the pipe or the thread cannot be made, or the document's header cannot be read.
    pub fn open_as_file(self: &Arc<Self>, root: &str) -> Result<(Header, FileReader), String> {
        let (rd, wr) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
        let (snap, root) = (Arc::clone(self), root.to_owned());
        let writer = std::thread::Builder::new()
            .name("snapshot-export".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::with_capacity(1 << 16, wr);
                let r = snap.write(&root, &mut out, Mode::Import).map(|_| ());
                // The pipe closes here, before the result is handed over: the reader sees its
                // end, then asks for the result.
                drop(out);
                r
            })
            .map_err(|e| format!("cannot start reading the snapshot: {e}"))?;
        // Buffered: serde_json reads its input a byte at a time.
        FileReader::open(std::io::BufReader::with_capacity(
            1 << 16,
            Piped { rd: Some(rd), writer: Some(writer) },
        ))
    }
}

/// What a document is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `export`: left-out ephemerals are named on stderr.
    Export,
    /// `import`: the same document, ephemerals unnamed.
    Import,
    /// The root alone, to check it, nothing named.
    Check,
}

/// The zxids a snapshot was written between, when they are known and differ, said on stderr.
fn fuzziness(file: &str, start: Option<i64>, end: Option<i64>) -> Option<(i64, i64)> {
    let (start, end) = (start?, end?);
    if end <= start {
        return None;
    }
    eprintln!(
        "snapshot {file} is fuzzy: it was written while the txns after zxid {} up to {} \
         were applied, so a node may be as of any moment in between (a snapshot of an idle server, \
         or zkrs's AdminServer snapshot command, is exact)",
        hex(start),
        hex(end)
    );
    Some((start, end))
}

/// Where the nodes go: the document, and what was left out.
struct Writer<'a, 'w> {
    root: &'a str,
    doc: DocWriter<'w>,
    ephemerals: u64,
    mode: Mode,
    progress: Progress,
}

/// What a walk says of the node it is at.
enum Step {
    /// Written.
    Written,
    /// An ephemeral, left out.
    Skipped,
}

impl Writer<'_, '_> {
    /// Writes the node at `path` (under the root) from what the snapshot stores of it.
    fn node(
        &mut self,
        path: &str,
        data: &[u8],
        acl: Vec<Acl>,
        owner: i64,
        stored_cversion: i32,
        num_children: u32,
    ) -> Result<Step, String> {
        let Some(kind) = kind_of_owner(owner) else {
            if path == self.root {
                return Err(format!(
                    "{path} is an ephemeral: ephemerals belong to their session, nothing to export"
                ));
            }
            self.ephemerals += 1;
            if self.mode == Mode::Export {
                report_ephemeral(self.ephemerals, path, owner);
            }
            return Ok(Step::Skipped);
        };
        if let Kind::Ttl(ms) = kind {
            if !(1..=MAX_TTL_MS).contains(&ms) {
                return Err(format!("{path}: a TTL node with a TTL of {ms} ms, outside 1..={MAX_TTL_MS}"));
            }
        }
        let n = i32::try_from(num_children).map_err(|_| format!("{path}: {num_children} children"))?;
        let rec = NodeRecord {
            path: relative(self.root, path).to_owned(),
            data: data.to_vec(),
            acl,
            kind,
            // What a client sees, as the server computes it: 2 × creates − numChildren.
            cversion: stored_cversion.wrapping_mul(2).wrapping_sub(n),
            num_children: n,
        };
        self.doc.node(&rec)?;
        let written = self.doc.nodes();
        self.progress.tick(|| format!("{written} nodes written"));
        Ok(Step::Written)
    }
}

impl ApacheTree {
    /// Writes the subtree at `root` in file order (pre-order), stopping once past it.
    fn walk(&self, root: &str, w: &mut Writer<'_, '_>) -> Result<(), String> {
        let mut at = 0usize;
        let mut failed = None;
        let open = acl::open_unsafe();
        let read = try_read_snapshot_bytes(self.label.clone(), self.content.clone(), |n| {
            let i = at;
            at += 1;
            if !is_under(root, &n.path) {
                // Pre-order: the subtree's nodes follow each other, so a node outside it after
                // them ends it.
                return if w.doc.nodes() > 0 { Err(String::new()) } else { Ok(()) };
            }
            // The system nodes are not data: an export of the whole tree leaves them out.
            if root == "/" && is_under("/zookeeper", &n.path) {
                return Ok(());
            }
            let acl = if n.acl_key == OPEN_ACL_KEY {
                open.clone()
            } else {
                self.acls.get(&n.acl_key).cloned().unwrap_or_default()
            };
            let data = n.data.as_deref().unwrap_or_default();
            let count = self.children.get(i).copied().unwrap_or(0);
            let step = w.node(&n.path, data, acl, n.stat.ephemeral_owner, n.stat.cversion, count);
            match step {
                Ok(Step::Written) if w.mode == Mode::Check => Err(String::new()),
                Ok(_) => Ok(()),
                Err(e) => {
                    failed = Some(e);
                    Err(String::new())
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        match read {
            Ok(_) | Err(ApacheError::Stopped(_)) => Ok(()),
            // Read whole once already: only a changed file could fail here.
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Writes the subtree at `root` of a loaded zkrs snapshot depth-first, children in name order.
fn walk_database(db: &Database, root: &str, w: &mut Writer<'_, '_>) -> Result<(), String> {
    let tree = db.tree();
    // The paths still to write, the next on top: the pending siblings along the current branch.
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let Some(node) = tree.get(&path) else { continue };
        let acl = tree.acl_of(&path).map(|a| a.as_ref().clone()).unwrap_or_default();
        let stored = node.stat_persisted().cversion;
        let count = u32::try_from(tree.num_children(node)).unwrap_or(u32::MAX);
        let step = w.node(&path, node.data().unwrap_or_default(), acl, node.owner(), stored, count)?;
        if w.mode == Mode::Check {
            return Ok(());
        }
        if let Step::Written = step {
            let mut kids = tree.child_names(node);
            if path == "/" {
                kids.retain(|k| k != "zookeeper");
            }
            kids.sort_unstable();
            stack.extend(kids.iter().rev().map(|k| join(&path, k)));
        }
    }
    Ok(())
}

/// The read end of the pipe an export is written into, and the thread writing it: at the end of
/// the document the thread's error, if any, is the reader's; dropped, the pipe closes (the
/// writer stops on its next write) and the thread is waited for.
struct Piped {
    rd: Option<std::io::PipeReader>,
    writer: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Read for Piped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match self.rd.as_mut() {
            Some(rd) => rd.read(buf)?,
            None => 0,
        };
        if n == 0 && !buf.is_empty() {
            if let Some(writer) = self.writer.take() {
                match writer.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(std::io::Error::other(e)),
                    Err(_) => return Err(std::io::Error::other("the snapshot's reader failed")),
                }
            }
        }
        Ok(n)
    }
}

impl Drop for Piped {
    fn drop(&mut self) {
        self.rd.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zk_client::Id;
    use zk_proto::{Jute, StatPersisted};

    const SESSION: i64 = 0x1234;
    const TTL_OWNER: i64 = 0xFF00_0000_0000_0BB8u64 as i64;

    fn digest() -> Vec<Acl> {
        vec![Acl { perms: 5, id: Id { scheme: "digest".into(), id: "u:h=".into() } }]
    }

    /// A node: path, data, ACL (None: world:anyone, all), owner, stored cversion.
    type TestNode<'a> = (&'a str, &'a [u8], Option<Vec<Acl>>, i64, i32);

    /// A tree in pre-order.
    fn nodes() -> Vec<TestNode<'static>> {
        vec![
            ("/", b"", None, 0, 2),
            ("/zookeeper", b"", None, 0, 0),
            ("/app", b"root", None, 0, 9),
            ("/app/box", b"c", None, i64::MIN, 1),
            ("/app/box/i", b"", Some(digest()), 0, 0),
            ("/app/eph", b"e", None, SESSION, 0),
            ("/app/s-0000000008", b"\0\xff", Some(digest()), 0, 0),
            ("/app/ttl", b"t", None, TTL_OWNER, 0),
            ("/other", b"", None, 0, 0),
        ]
    }

    fn stat(owner: i64, cversion: i32) -> StatPersisted {
        StatPersisted { ephemeral_owner: owner, cversion, czxid: 1, mzxid: 1, pzxid: 1, ..Default::default() }
    }

    /// `nodes` in Apache's file format, with its digest and seals; the digest's zxid is `end`.
    fn apache_file(nodes: &[TestNode<'_>], end: i64) -> Vec<u8> {
        apache_file_keyed(nodes, end, 1)
    }

    /// As [`apache_file`], the nodes with an ACL naming it as `key` (the table has it as 1).
    fn apache_file_keyed(nodes: &[TestNode<'_>], end: i64, key: i64) -> Vec<u8> {
        let mut out = Vec::new();
        APACHE_SNAP_MAGIC.write(&mut out);
        2i32.write(&mut out);
        (-1i64).write(&mut out);
        1i32.write(&mut out);
        SESSION.write(&mut out);
        30_000i32.write(&mut out);
        1i32.write(&mut out);
        1i64.write(&mut out);
        digest().write(&mut out);
        for (path, data, acl, owner, cversion) in nodes {
            let written = if *path == "/" { String::new() } else { path.to_string() };
            written.write(&mut out);
            Some(Bytes::copy_from_slice(data)).write(&mut out);
            (if acl.is_some() { key } else { OPEN_ACL_KEY }).write(&mut out);
            stat(*owner, *cversion).write(&mut out);
        }
        let seal = |out: &mut Vec<u8>| {
            i64::from(zk_log::apache::Adler32::of(out)).write(out);
            "/".to_string().write(out);
        };
        "/".to_string().write(&mut out);
        seal(&mut out);
        end.write(&mut out);
        2i32.write(&mut out);
        7i64.write(&mut out);
        seal(&mut out);
        out
    }

    /// `nodes` as a zkrs snapshot file in `dir`, at `zxid`.
    fn zkrs_file(dir: &Path, zxid: i64) -> std::path::PathBuf {
        let mut b = zk_tree::ContentBuilder::new(zxid, 0);
        b.session(SESSION, 30_000);
        for (path, data, acl, owner, cversion) in nodes() {
            b.node(path, Some(data), &acl.unwrap_or_else(acl::open_unsafe), &stat(owner, cversion));
        }
        let storage = zk_log::FileStorage::open_dir(dir).expect("dir");
        let mut w = zk_log::snapshot::SnapshotWriter::create(&storage, zxid).expect("create");
        w.write(&b.finish()).expect("write");
        let info = w.finish().expect("finish");
        dir.join(info.name)
    }

    fn records(snap: &Arc<Snapshot>, root: &str) -> Vec<NodeRecord> {
        let (h, mut r) = snap.open_as_file(root).expect("open");
        assert_eq!(h.source, root);
        std::iter::from_fn(|| r.next_record().expect("a good document")).collect()
    }

    fn want(rel: &str, kind: Kind, cversion: i32, num_children: i32) -> (String, Kind, i32, i32) {
        (rel.to_owned(), kind, cversion, num_children)
    }

    fn brief(recs: &[NodeRecord]) -> Vec<(String, Kind, i32, i32)> {
        recs.iter().map(|r| (r.path.clone(), r.kind, r.cversion, r.num_children)).collect()
    }

    /// Kinds from the owners, counters and child counts (the ephemeral counted, left out), data
    /// and ACLs: the same from Apache's format (plain and snappy) and zkrs's.
    #[test]
    fn kinds_and_counters_come_from_either_format() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("snapshot.20");
        std::fs::write(&plain, apache_file(&nodes(), 0x20)).unwrap();
        let snappy = dir.path().join("s.snappy");
        let content = apache_file(&nodes(), 0x20);
        std::fs::write(&snappy, zk_log::apache_snap_stream::snappy_java_stream(&content)).unwrap();
        let zkrs = zkrs_file(&dir.path().join("zkrs-snap"), 0x20);
        let expected = vec![
            want("", Kind::Persistent, 9 * 2 - 4, 4),
            want("box", Kind::Container, 1, 1),
            want("box/i", Kind::Persistent, 0, 0),
            want("s-0000000008", Kind::Persistent, 0, 0),
            want("ttl", Kind::Ttl(3000), 0, 0),
        ];
        for (file, format) in [(&plain, "apache"), (&snappy, "apache-snappy"), (&zkrs, "zkrs")] {
            let snap = Arc::new(Snapshot::load(file).unwrap_or_else(|e| panic!("{format}: {e}")));
            assert_eq!((snap.format, snap.zxid, snap.nodes), (format, Some(0x20), 9), "{format}");
            let recs = records(&snap, "/app");
            let mut got = brief(&recs);
            got.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(got, expected, "{format}");
            let s = recs.iter().find(|r| r.path == "s-0000000008").unwrap();
            assert_eq!((s.data.as_slice(), &s.acl), (&b"\0\xff"[..], &digest()), "{format}");
            let root = &recs[0];
            assert_eq!(
                (root.path.as_str(), root.acl.clone()),
                ("", acl::open_unsafe()),
                "{format}: root first"
            );
            // The whole tree: the root counts /zookeeper, which is left out.
            let all = brief(&records(&snap, "/"));
            assert_eq!(all[0], want("", Kind::Persistent, 2 * 2 - 3, 3), "{format}");
            assert!(all.iter().all(|r| !r.0.starts_with("zookeeper")), "{format}: {all:?}");
            assert_eq!(all.len(), 7, "{format}: {all:?}");
            // A leaf, and the document's trailer.
            let mut out = Vec::new();
            let sum = snap.export("/app/ttl", &mut out).unwrap();
            assert_eq!((sum.nodes, sum.ephemerals), (1, 0));
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains(r#""path":"","kind":"ttl","ttl_ms":3000"#), "{text}");
            assert!(text.contains(&format!("\"snapshot_format\":\"{format}\"")), "{text}");
            assert!(text.ends_with("\"node_count\":1,\"skipped_ephemerals\":0}\n"), "{text}");
        }
    }

    #[test]
    fn roots_that_are_missing_or_ephemeral_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("snapshot.20");
        std::fs::write(&plain, apache_file(&nodes(), 0x20)).unwrap();
        let zkrs = zkrs_file(&dir.path().join("zkrs-snap"), 0x20);
        for file in [plain, zkrs] {
            let snap = Snapshot::load(&file).unwrap();
            assert!(snap
                .check_root("/app/none")
                .unwrap_err()
                .starts_with("no node /app/none in the snapshot"));
            assert!(snap.check_root("/app/eph").unwrap_err().contains("is an ephemeral"));
            assert!(snap.check_root("/app/box").is_ok());
            let mut out = Vec::new();
            assert!(snap.export("/ap", &mut out).is_err());
            assert!(out.is_empty(), "nothing written for a missing root");
        }
    }

    #[test]
    fn damaged_or_foreign_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let load = |name: &str, bytes: &[u8]| {
            let f = dir.path().join(name);
            std::fs::write(&f, bytes).unwrap();
            Snapshot::load(&f).err().unwrap_or_else(|| panic!("{name} loaded"))
        };
        let good = apache_file(&nodes(), 0x20);
        let e = load("cut", &good[..good.len() - 60]);
        assert!(e.contains("cut at offset"), "{e}");
        let mut flipped = good.clone();
        flipped[100] ^= 0x01;
        let e = load("flipped", &flipped);
        assert!(e.contains("flipped"), "{e}");
        let e = load("json", b"{\"format\":\"zkrs-subtree-export\"}");
        assert!(e.contains("is not a snapshot"), "{e}");
        // A child before its parent.
        let mut order = nodes();
        order.swap(3, 4);
        let e = load("order", &apache_file(&order, 0x20));
        assert!(e.contains("node /app/box/i does not follow its parent"), "{e}");
        // An ACL key the table lacks.
        let e = load("acl", &apache_file_keyed(&nodes(), 0x20, 9));
        assert!(e.contains("names ACL key 9, which the snapshot's ACL table lacks"), "{e}");
        let e = Snapshot::load(&dir.path().join("none")).err().unwrap();
        assert!(e.starts_with("cannot read"), "{e}");
    }

    /// A snapshot written while txns were applied says so, and is exported all the same.
    #[test]
    fn a_fuzzy_snapshot_loads() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("snapshot.20");
        std::fs::write(&f, apache_file(&nodes(), 0x25)).unwrap();
        let snap = Snapshot::load(&f).unwrap();
        assert_eq!((snap.zxid, snap.fuzzy), (Some(0x25), Some((0x20, 0x25))));
        assert!(
            snap.describe().ends_with("at zxid 0x25, 9 nodes, fuzzy from 0x20 to 0x25"),
            "{}",
            snap.describe()
        );
        assert_eq!(records(&Arc::new(snap), "/app").len(), 5);
        std::fs::write(&f, apache_file(&nodes(), 0x20)).unwrap();
        assert_eq!(Snapshot::load(&f).unwrap().fuzzy, None, "written at one zxid");
        let named_anyhow = dir.path().join("served");
        std::fs::write(&named_anyhow, apache_file(&nodes(), 0x25)).unwrap();
        assert_eq!(Snapshot::load(&named_anyhow).unwrap().fuzzy, None, "no start zxid to tell");
    }

    /// An import that stops reading midway (a failure) stops the writing thread too.
    #[test]
    fn a_reader_dropped_midway_stops_the_writer() {
        let mut many = vec![("/", &b""[..], None, 0, 1), ("/a", &b""[..], None, 0, 20_000)];
        let names: Vec<String> = (0..20_000).map(|i| format!("/a/n{i:05}")).collect();
        for n in &names {
            many.push((n.as_str(), &b"0123456789"[..], None, 0, 0));
        }
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("big");
        std::fs::write(&f, apache_file(&many, 0)).unwrap();
        let snap = Arc::new(Snapshot::load(&f).unwrap());
        let (_, mut r) = snap.open_as_file("/a").unwrap();
        assert_eq!(r.next_record().unwrap().map(|r| r.num_children), Some(20_000));
        drop(r);
    }
}
