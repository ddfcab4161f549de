//! `export`: a subtree written as one JSON document, node by node (the format in
//! `transfer.rs`).
// The shell's side, not the sans-IO core: the export is stamped with the wall clock.
#![allow(clippy::disallowed_methods)]

use super::transfer::*;
use bytes::Bytes;
use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};
use zk_client::{Acl, Client, Error, Stat};

/// Options of `export`.
#[derive(Debug, Default)]
pub struct ExportOptions {
    /// Sync the session's server with the leader before reading.
    pub sync: bool,
    /// Kinds the server does not show, by absolute path.
    pub kinds: Vec<(String, Kind)>,
}

/// What an export wrote.
#[derive(Debug)]
pub struct ExportSummary {
    /// Nodes written.
    pub nodes: u64,
    /// Ephemerals left out.
    pub ephemerals: u64,
    /// Nodes listed as a child that were gone when read.
    pub vanished: u64,
    /// How long it took.
    pub elapsed: Duration,
}

/// A node as read: data, ACL, and the children with the stat read with them.
struct Fetched {
    path: String,
    data: Bytes,
    acl: Vec<Acl>,
    stat: Stat,
    children: Vec<String>,
}

/// Reads one node with three pipelined requests; None when it is gone.
async fn fetch(c: &Client, path: String) -> Result<Option<Fetched>, String> {
    let (d, a, k) = tokio::join!(c.get_data(&path), c.get_acl(&path), c.get_children2(&path));
    let gone = |r: Result<(), &Error>| matches!(r, Err(Error::NoNode));
    if gone(d.as_ref().map(|_| ())) || gone(a.as_ref().map(|_| ())) || gone(k.as_ref().map(|_| ())) {
        return Ok(None);
    }
    let (data, _) = d.map_err(|e| op_failed("getData", &path, e))?;
    let (acl, _) = a.map_err(|e| op_failed("getACL", &path, e))?;
    let (mut children, stat) = k.map_err(|e| op_failed("getChildren", &path, e))?;
    children.sort();
    Ok(Some(Fetched { path, data, acl, stat, children }))
}

/// Writes the subtree at `root` to `out` as one document. `server` is recorded as given.
pub async fn export(
    c: &Client,
    server: &str,
    root: &str,
    out: &mut dyn Write,
    opts: &ExportOptions,
) -> Result<ExportSummary, String> {
    let started = Instant::now();
    for (p, _) in &opts.kinds {
        if !is_under(root, p) {
            return Err(format!("--kind {p}: not under {root}"));
        }
        match c.exists(p).await {
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("--kind {p}: no such node")),
            Err(e) => return Err(op_failed("exists", p, e)),
        }
    }
    if opts.sync {
        c.sync(root).await.map_err(|e| op_failed("sync", root, e))?;
    }
    let Some(first) = fetch(c, root.to_owned()).await? else {
        return Err(op_failed("getData", root, Error::NoNode));
    };
    if kind_of_owner(first.stat.ephemeral_owner).is_none() {
        return Err(format!("{root} is an ephemeral: ephemerals belong to their session, nothing to export"));
    }
    let now_ms = now_ms();
    let fields = [
        ("server", serde_json::Value::from(server)),
        ("exported_at", serde_json::Value::from(rfc3339(now_ms))),
        ("exported_at_ms", serde_json::Value::from(now_ms)),
        ("synced", serde_json::Value::from(opts.sync)),
    ];
    let mut doc = DocWriter::new(out, root, &fields)?;

    let mut sum = ExportSummary { nodes: 0, ephemerals: 0, vanished: 0, elapsed: Duration::ZERO };
    let mut progress = Progress::new("export");
    let mut emit = |f: Fetched, sum: &mut ExportSummary, doc: &mut DocWriter<'_>| -> Result<bool, String> {
        let declared = opts.kinds.iter().find(|(p, _)| *p == f.path).map(|(_, k)| *k);
        let Some(kind) = kind_of_owner(f.stat.ephemeral_owner) else {
            if declared.is_some() {
                return Err(format!("--kind {}: the node is an ephemeral", f.path));
            }
            sum.ephemerals += 1;
            report_ephemeral(sum.ephemerals, &f.path, f.stat.ephemeral_owner);
            return Ok(false);
        };
        let rec = NodeRecord {
            path: relative(root, &f.path).to_owned(),
            data: f.data.to_vec(),
            acl: f.acl,
            kind: declared.unwrap_or(kind),
            cversion: f.stat.cversion,
            num_children: f.stat.num_children,
        };
        doc.node(&rec)?;
        sum.nodes += 1;
        progress.tick(|| format!("{} nodes written", sum.nodes));
        Ok(true)
    };

    // Depth-first: a stack of sibling lists, each with the next few siblings being read ahead.
    // At most EXPORT_WINDOW reads are out at once over all levels, but the deepest level may
    // always have EXPORT_LEVEL_WINDOW: the levels above keep what they read ahead while the walk
    // is below them, and a deepest level left one read at a time makes every read a round trip
    // (a million nodes under a root of a thousand children took 75 s instead of 15).
    struct Level<'a> {
        names: VecDeque<String>,
        reading: InOrder<'a, Result<Option<Fetched>, String>>,
    }
    let level_of = |f: &Fetched| Level {
        names: f
            .children
            .iter()
            // The system nodes are not data: an export of the whole tree leaves them out.
            .filter(|k| !(f.path == "/" && *k == "zookeeper"))
            .map(|k| join(&f.path, k))
            .collect(),
        reading: InOrder::new(),
    };
    let mut levels = Vec::new();
    let first_level = level_of(&first);
    if emit(first, &mut sum, &mut doc)? {
        levels.push(first_level);
    }
    let mut reading = 0usize;
    while let Some(top) = levels.last_mut() {
        while !top.names.is_empty() && (reading < EXPORT_WINDOW || top.reading.len() < EXPORT_LEVEL_WINDOW) {
            let Some(p) = top.names.pop_front() else { break };
            top.reading.push(fetch(c, p)).await;
            reading += 1;
        }
        let Some(got) = top.reading.next().await else {
            levels.pop();
            continue;
        };
        reading -= 1;
        match got? {
            None => sum.vanished += 1,
            Some(f) => {
                let next = (!f.children.is_empty()).then(|| level_of(&f));
                if emit(f, &mut sum, &mut doc)? {
                    levels.extend(next);
                }
            }
        }
    }
    report_ephemerals_total(sum.ephemerals);
    doc.finish(&[
        ("skipped_ephemerals", serde_json::Value::from(sum.ephemerals)),
        ("vanished", serde_json::Value::from(sum.vanished)),
    ])?;
    sum.elapsed = started.elapsed();
    Ok(sum)
}
