//! `import`: an export file recreated under a path, checked whole first, created in multis,
//! then each parent's counter of creates made up to the source's (see `transfer.rs`).
// The shell's side, not the sans-IO core: the time an import took is measured.
#![allow(clippy::disallowed_methods)]

use super::transfer::*;
use bytes::Bytes;
use std::time::{Duration, Instant};
use zk_client::{acl, Acl, Client, CreateMode, Error, MultiOp, OpResult};
use zk_proto::ErrorCode;

/// Options of `import`.
#[derive(Debug, Default)]
pub struct ImportOptions {
    /// Import into an existing tree: existing nodes are left (or overwritten).
    pub merge: bool,
    /// With `merge`: existing nodes get the file's data and ACL.
    pub overwrite: bool,
}

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportSummary {
    /// Nodes created.
    pub created: u64,
    /// Nodes that existed (merge).
    pub existing: u64,
    /// Increments made to parents' counters with create+delete pairs.
    pub bumps: u64,
    /// Parents whose counter already passed the source's (merge).
    pub ahead: u64,
    /// How long it took.
    pub elapsed: Duration,
}

/// Opens an import's document from its start; called once for each pass over it.
pub type Opener<'a> = dyn Fn() -> Result<(Header, FileReader), String> + 'a;

/// The document in `file`.
pub fn open_file(file: &std::path::Path) -> Result<(Header, FileReader), String> {
    let f = std::fs::File::open(file)
        .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    FileReader::open(f)
}

/// A multi or a single create on the wire: the paths of its ops (to name a failure), how many
/// of them are creates of imported nodes and how many the throwaway child's, and the answer.
type Sent = (Vec<String>, (u64, u64), Result<Vec<OpResult>, Error>);

/// One op for [`Sender::add`]: the op, the path to name it by, its estimated size.
type Planned = (MultiOp, String, usize);

/// The ops of the next multi and their estimated size.
#[derive(Default)]
struct Batch {
    ops: Vec<MultiOp>,
    paths: Vec<String>,
    bytes: usize,
}

fn estimate(path: &str, data: usize, acl: &[Acl]) -> usize {
    64 + path.len() + data + acl.iter().map(|a| 16 + a.id.scheme.len() + a.id.id.len()).sum::<usize>()
}

/// The multis of an import: batches of ops sent in order, several on the wire; the first
/// failure stops further sending and is kept.
struct Sender<'a> {
    c: &'a Client,
    wire: InOrder<'a, Sent>,
    batch: Batch,
    failure: Option<String>,
    /// Nodes whose create was answered OK.
    created: u64,
    /// Ops on the throwaway child answered OK (two per increment).
    bump_ops: u64,
    progress: Progress,
}

impl<'a> Sender<'a> {
    fn new(c: &'a Client) -> Sender<'a> {
        Sender {
            c,
            wire: InOrder::strict(),
            batch: Batch::default(),
            failure: None,
            created: 0,
            bump_ops: 0,
            progress: Progress::new("import"),
        }
    }

    /// Adds ops that go in the same multi (a create and delete pair must not be split, or a
    /// failure between the two would leave the throwaway child behind).
    async fn add(&mut self, group: Vec<Planned>) {
        let (n, bytes) = (group.len(), group.iter().map(|g| g.2).sum::<usize>());
        if !self.batch.ops.is_empty()
            && (self.batch.ops.len() + n > BATCH_OPS || self.batch.bytes + bytes > BATCH_BYTES)
        {
            self.flush().await;
        }
        for (op, path, _) in group {
            self.batch.ops.push(op);
            self.batch.paths.push(path);
        }
        self.batch.bytes += bytes;
    }

    async fn flush(&mut self) {
        let Batch { ops, paths, .. } = std::mem::take(&mut self.batch);
        if ops.is_empty() || self.failure.is_some() {
            return;
        }
        let bump = paths.iter().filter(|p| p.ends_with(BUMP_CHILD)).count() as u64;
        let creates = ops.iter().filter(|o| matches!(o, MultiOp::Create { .. })).count() as u64;
        let counts = (creates.saturating_sub(bump / 2), bump);
        let c = self.c;
        let mut ops = ops;
        if ops.len() == 1 && matches!(ops[0], MultiOp::Create { .. }) {
            // A single create goes as itself: no multi framing to push a node near the size
            // limit over it.
            let Some(MultiOp::Create { path, data, acl, mode, ttl }) = ops.pop() else { return };
            self.wire
                .push(async move {
                    let r = match ttl {
                        Some(ms) => c
                            .create_ttl(&path, &data, &acl, mode, Duration::from_millis(ms.max(0) as u64))
                            .await
                            .map(|(p, s)| vec![OpResult::Create2(p, s)]),
                        None => c.create(&path, &data, &acl, mode).await.map(|p| vec![OpResult::Create(p)]),
                    };
                    (paths, counts, r)
                })
                .await;
        } else {
            self.wire.push(async move { (paths, counts, c.multi(ops).await) }).await;
        }
        while self.wire.len() >= MULTIS_IN_FLIGHT {
            self.collect_one().await;
        }
    }

    async fn collect_one(&mut self) {
        let Some((paths, (creates, bumps), r)) = self.wire.next().await else { return };
        let failed = match r {
            Err(e) => Some(format!(
                "{} ops from {}: {} ({})",
                paths.len(),
                paths.first().map_or("", String::as_str),
                code_name(e),
                match e {
                    Error::ConnectionLoss
                    | Error::OperationTimeout
                    | Error::RequestTimeout
                    | Error::SessionExpired => "whether they were applied is unknown",
                    _ => "not applied",
                }
            )),
            Ok(results) => match zk_client::multi_error(&results) {
                None => {
                    self.created += creates;
                    self.bump_ops += bumps;
                    let (created, increments) = (self.created, self.bump_ops / 2);
                    self.progress
                        .tick(|| format!("{created} nodes created, {increments} counter increments made"));
                    None
                }
                Some(_) => {
                    let culprit = results.iter().position(|r| {
                        matches!(r, OpResult::Error(e)
                            if *e != ErrorCode::RuntimeInconsistency && *e != ErrorCode::Ok)
                    });
                    let (path, e) = match culprit.and_then(|i| Some((paths.get(i)?, results.get(i)?))) {
                        Some((p, OpResult::Error(code))) => (p.as_str(), Error::from(*code)),
                        _ => (paths.first().map_or("", String::as_str), Error::SystemError),
                    };
                    Some(format!(
                        "{} (a multi of {} ops, none of it applied)",
                        op_failed("at", path, e),
                        paths.len()
                    ))
                }
            },
        };
        if self.failure.is_none() {
            self.failure = failed;
        }
    }

    /// Sends what is batched and waits for every answer; the first failure, if any.
    async fn drain(&mut self) -> Result<(), String> {
        self.flush().await;
        while self.wire.len() > 0 {
            self.collect_one().await;
        }
        match self.failure.take() {
            None => Ok(()),
            Some(f) => Err(f),
        }
    }
}

fn create_op(path: &str, rec: &NodeRecord) -> MultiOp {
    let (mode, ttl) = match rec.kind {
        Kind::Persistent => (CreateMode::Persistent, None),
        Kind::Container => (CreateMode::Container, None),
        Kind::Ttl(ms) => (CreateMode::PersistentWithTtl, Some(ms)),
    };
    MultiOp::Create {
        path: path.to_owned(),
        data: Bytes::copy_from_slice(&rec.data),
        acl: rec.acl.clone(),
        mode,
        ttl,
    }
}

/// Reads the document `open` opens (a file: [`open_file`]; a snapshot: `from_snapshot.rs`)
/// into the tree at `target` (the document's source path when None). The document is read three
/// times: checked whole before anything is written, then the nodes are created, then the
/// parents' counters are advanced.
pub async fn import(
    c: &Client,
    open: &Opener<'_>,
    target: Option<&str>,
    opts: &ImportOptions,
) -> Result<ImportSummary, String> {
    let started = Instant::now();
    // 1. The whole file is checked first, so a bad file writes nothing.
    let (header, mut reader) = open()?;
    let target = target.unwrap_or(&header.source).to_owned();
    if let Err(e) = zk_proto::path::validate_path(&target) {
        return Err(format!("bad target path {target}: {e}"));
    }
    let mut total = 0u64;
    while let Some(rec) = reader.next_record()? {
        let p = join(&target, &rec.path);
        if let Err(e) = zk_proto::path::validate_path(&p) {
            return Err(format!("bad export file: node \"{}\": {e}", rec.path));
        }
        if rec.path.rsplit('/').next() == Some(BUMP_CHILD) {
            return Err(format!(
                "bad export file: node \"{}\": {BUMP_CHILD} is the name the import uses",
                rec.path
            ));
        }
        total += 1;
    }
    // 2. The target: absent unless merging, with its parent present.
    let exists = c.exists(&target).await.map_err(|e| op_failed("exists", &target, e))?;
    if exists.is_some() && !opts.merge {
        return Err(format!("{target} exists: nothing imported (--merge imports into an existing tree)"));
    }
    if exists.is_none() && target != "/" {
        let parent = match target.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &target[..i],
        };
        if c.exists(parent).await.map_err(|e| op_failed("exists", parent, e))?.is_none() {
            return Err(format!("{parent} does not exist: create the target's parent first"));
        }
    }
    let mut sum = ImportSummary::default();
    // 3. The nodes, parents first, in multis.
    let (_, mut reader) = open()?;
    let mut tx = Sender::new(c);
    let mut pending_merge: Vec<NodeRecord> = Vec::new();
    while let Some(rec) = reader.next_record()? {
        if tx.failure.is_some() {
            break;
        }
        if opts.merge {
            pending_merge.push(rec);
            if pending_merge.len() >= STAT_WINDOW {
                merge_batch(c, &target, std::mem::take(&mut pending_merge), opts, &mut tx, &mut sum).await?;
            }
        } else {
            let p = join(&target, &rec.path);
            let bytes = estimate(&p, rec.data.len(), &rec.acl);
            tx.add(vec![(create_op(&p, &rec), p, bytes)]).await;
        }
    }
    if !pending_merge.is_empty() {
        merge_batch(c, &target, pending_merge, opts, &mut tx, &mut sum).await?;
    }
    let drained = tx.drain().await;
    sum.created = tx.created;
    if let Err(e) = drained {
        return Err(format!("import stopped after creating {} of {total} nodes: {e}", sum.created));
    }
    // 4. The counters: each parent's count of creates made up to the source's.
    let (_, mut reader) = open()?;
    let mut window: Vec<NodeRecord> = Vec::new();
    loop {
        let rec = reader.next_record()?;
        let end = rec.is_none();
        if let Some(rec) = rec {
            if rec.creates() > 0 {
                window.push(rec);
            }
        }
        if window.len() >= STAT_WINDOW || (end && !window.is_empty()) {
            advance_counters(c, &target, std::mem::take(&mut window), &mut tx, &mut sum).await?;
        }
        if end || tx.failure.is_some() {
            break;
        }
    }
    tx.drain().await.map_err(|e| {
        format!("import created {} nodes but stopped advancing the sequence counters: {e}", sum.created)
    })?;
    sum.elapsed = started.elapsed();
    Ok(sum)
}

/// An `exists` of each of `paths`, pipelined, to collect in their order.
async fn exists_in_order<'a>(
    c: &'a Client,
    paths: &'a [String],
) -> InOrder<'a, Result<Option<zk_client::Stat>, Error>> {
    let mut reads = InOrder::new();
    for p in paths {
        reads.push(c.exists(p)).await;
    }
    reads
}

/// `--merge`: which of `recs` exist; the others are created, the existing ones left or (with
/// `--overwrite`) given the file's data and ACL.
async fn merge_batch(
    c: &Client,
    target: &str,
    recs: Vec<NodeRecord>,
    opts: &ImportOptions,
    tx: &mut Sender<'_>,
    sum: &mut ImportSummary,
) -> Result<(), String> {
    let paths: Vec<String> = recs.iter().map(|r| join(target, &r.path)).collect();
    let mut reads = exists_in_order(c, &paths).await;
    let mut acls = InOrder::new();
    for (rec, p) in recs.iter().zip(&paths) {
        let found =
            reads.next().await.unwrap_or(Err(Error::SystemError)).map_err(|e| op_failed("exists", p, e))?;
        if found.is_none() {
            tx.add(vec![(create_op(p, rec), p.clone(), estimate(p, rec.data.len(), &rec.acl))]).await;
            continue;
        }
        sum.existing += 1;
        if opts.overwrite {
            let op =
                MultiOp::SetData { path: p.clone(), data: Bytes::copy_from_slice(&rec.data), version: -1 };
            tx.add(vec![(op, p.clone(), estimate(p, rec.data.len(), &[]))]).await;
            acls.push(async move { (p, c.set_acl(p, &rec.acl, -1).await) }).await;
        } else if sum.existing <= REPORT_EXISTING_MAX {
            eprintln!("import: {p} exists, left as it is");
        }
    }
    while let Some((p, r)) = acls.next().await {
        r.map_err(|e| op_failed("setACL", p, e))?;
    }
    Ok(())
}

/// Reads the target stat of each of `recs` and sends the create+delete pairs that bring its
/// count of creates to the source's.
async fn advance_counters(
    c: &Client,
    target: &str,
    recs: Vec<NodeRecord>,
    tx: &mut Sender<'_>,
    sum: &mut ImportSummary,
) -> Result<(), String> {
    let paths: Vec<String> = recs.iter().map(|r| join(target, &r.path)).collect();
    let mut reads = exists_in_order(c, &paths).await;
    let open = acl::open_unsafe();
    for (rec, p) in recs.iter().zip(&paths) {
        let stat = reads
            .next()
            .await
            .unwrap_or(Err(Error::SystemError))
            .map_err(|e| op_failed("exists", p, e))?
            .ok_or_else(|| op_failed("exists", p, Error::NoNode))?;
        let have = (i64::from(stat.cversion) + i64::from(stat.num_children)) / 2;
        let missing = rec.creates() - have;
        if missing < 0 {
            sum.ahead += 1;
            eprintln!(
                "import: {p}: its counter ({have} creates) is already past the source's ({}): left; \
                 sequential names there continue from {have}",
                rec.creates()
            );
        }
        let bump = join(p, BUMP_CHILD);
        for _ in 0..missing.max(0) {
            let create = MultiOp::Create {
                path: bump.clone(),
                data: Bytes::new(),
                acl: open.clone(),
                mode: CreateMode::Persistent,
                ttl: None,
            };
            let delete = MultiOp::Delete { path: bump.clone(), version: -1 };
            let bytes = estimate(&bump, 0, &open);
            tx.add(vec![(create, bump.clone(), bytes), (delete, bump.clone(), bytes)]).await;
            sum.bumps += 1;
            if tx.failure.is_some() {
                break;
            }
        }
        if tx.failure.is_some() {
            break;
        }
    }
    Ok(())
}
