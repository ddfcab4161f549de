//! The checks of a run, over what the clients recorded and the servers' trees at the end.

use super::workload::{History, Hold};
use crate::linear::{self, Event};
use std::collections::{BTreeMap, BTreeSet};

/// One check's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The check.
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// What was checked, in numbers.
    pub summary: String,
    /// What went wrong, each with the smallest history that shows it where one applies.
    pub anomalies: Vec<String>,
    /// Time ranges (µs) of the operations involved, for the timeline.
    pub spans: Vec<(u64, u64)>,
}

impl Verdict {
    fn new(name: &'static str, summary: String, anomalies: Vec<String>, spans: Vec<(u64, u64)>) -> Verdict {
        Verdict { name, passed: anomalies.is_empty(), summary, anomalies, spans }
    }
}

/// Linearizability of every key's history; a violation is reported with a minimal sub-history
/// (no operation can be left out and still have it fail).
pub fn linearizable(history: &History) -> Verdict {
    let mut anomalies = Vec::new();
    let mut spans = Vec::new();
    let mut undecided = 0;
    let (mut ops, mut unknown) = (0, 0);
    for (key, events) in &history.keys {
        ops += events.len();
        unknown += events.iter().filter(|e| e.done.is_none()).count();
        match linear::check(events) {
            Ok(()) => {}
            Err(e) if e.starts_with("search bound exceeded") => undecided += 1,
            Err(_) => {
                let minimal = minimize(events);
                spans.extend(minimal.iter().map(|e| (e.call, e.done.map_or(e.call, |d| d.0))));
                anomalies.push(format!(
                    "{key}: not linearizable; the smallest failing history (every write kept, reads \
                     left out while it still fails):\n{}\nthe whole history of {key}:\n{}",
                    describe(&minimal, key, history),
                    describe(events, key, history)
                ));
            }
        }
    }
    if undecided > 0 {
        anomalies.push(format!("{undecided} key histories were too large to decide (search bound)"));
    }
    Verdict::new(
        "linearizable registers (create, conditional set, sync+get)",
        format!("{} keys, {ops} operations ({unknown} of unknown outcome)", history.keys.len()),
        anomalies,
        spans,
    )
}

/// Leaves out operations one at a time while the history stays non-linearizable, until no single
/// one can go. Writes that took effect (or may have) stay: without them the rest fails for the
/// wrong reason (a set on a key whose create was left out), which shows nothing.
pub fn minimize(events: &[Event]) -> Vec<Event> {
    let fails = |h: &[Event]| matches!(linear::check(h), Err(e) if !e.starts_with("search bound"));
    let removable = |e: &Event| match (e.op, e.done) {
        (linear::Op::Get, _) => true,
        (_, None) => false,
        (_, Some((_, r))) => !matches!(r, linear::Ret::Created | linear::Ret::Set(_)),
    };
    let mut h = events.to_vec();
    // Bounded: each pass that changes anything removes an operation.
    loop {
        let before = h.len();
        let mut i = h.len();
        while i > 0 {
            i -= 1;
            if !removable(&h[i]) {
                continue;
            }
            let mut shorter = h.clone();
            shorter.remove(i);
            if fails(&shorter) {
                h = shorter;
            }
        }
        if h.len() == before {
            return h;
        }
    }
}

/// One line per operation of `key`, with who did it and, when known, the server that answered.
fn describe(events: &[Event], key: &str, history: &History) -> String {
    let mut sorted = events.to_vec();
    sorted.sort_by_key(|e| e.call);
    sorted
        .iter()
        .map(|e| {
            let line = match e.done {
                Some((t, r)) => {
                    format!("  {:>12.3} ms .. {:>12.3} ms  {:?} -> {:?}", ms(e.call), ms(t), e.op, r)
                }
                None => format!("  {:>12.3} ms .. (unknown)       {:?}", ms(e.call), e.op),
            };
            match history.answered.get(&(key.to_string(), e.call)) {
                Some(who) => format!("{line}  ({who})"),
                None => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Plain reads never went back from what the session had seen.
pub fn session_order(history: &History) -> Verdict {
    let reads = history.ops.iter().filter(|o| o.what.starts_with("get ")).count();
    Verdict::new(
        "session order (plain reads never older than what the session saw)",
        format!("{reads} plain reads"),
        history.order_violations.clone(),
        Vec::new(),
    )
}

/// Sequential creates: every acknowledged name present, names unique, numbers gap-free from 0.
pub fn sequential(history: &History, children: &[String]) -> Verdict {
    let mut anomalies = Vec::new();
    let present: BTreeSet<&String> = children.iter().collect();
    for name in &history.seq_acked {
        let leaf = name.rsplit('/').next().unwrap_or(name);
        if !present.contains(&leaf.to_string()) {
            anomalies.push(format!("acknowledged {name} is missing"));
        }
    }
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for name in &history.seq_acked {
        *counts.entry(name).or_default() += 1;
    }
    let twice: Vec<&&String> = counts.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).collect();
    if !twice.is_empty() {
        let some: Vec<&str> = twice.iter().take(10).map(|s| s.as_str()).collect();
        anomalies.push(format!(
            "{} names were acknowledged to two creates (a create acknowledged and then lost, its number given again): {}{}",
            twice.len(),
            some.join(", "),
            if twice.len() > some.len() { ", ..." } else { "" }
        ));
    }
    let mut numbers: Vec<i64> = children.iter().filter_map(|c| c.strip_prefix("n-")?.parse().ok()).collect();
    numbers.sort_unstable();
    for (i, n) in numbers.iter().enumerate() {
        if *n != i as i64 {
            anomalies.push(format!("sequence numbers not gap-free: position {i} holds {n}"));
            break;
        }
    }
    let extra = children.len().saturating_sub(history.seq_acked.len());
    if extra > history.seq_unknown {
        anomalies.push(format!(
            "{extra} names no acknowledged create made, but only {} unknown creates",
            history.seq_unknown
        ));
    }
    Verdict::new(
        "sequential creates (acknowledged present, unique, gap-free)",
        format!(
            "{} acknowledged, {} unknown, {} present",
            history.seq_acked.len(),
            history.seq_unknown,
            children.len()
        ),
        anomalies,
        Vec::new(),
    )
}

/// At most one lock holder at any time, by the holders' own view.
pub fn mutual_exclusion(holds: &[Hold]) -> Verdict {
    let mut sorted = holds.to_vec();
    sorted.sort_by_key(|h| h.from);
    let mut anomalies = Vec::new();
    let mut spans = Vec::new();
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            if b.from >= a.to {
                break;
            }
            if b.lane != a.lane {
                anomalies.push(format!(
                    "lanes {} and {} both held the lock: {:.3}..{:.3} ms and {:.3}..{:.3} ms",
                    a.lane,
                    b.lane,
                    ms(a.from),
                    ms(a.to),
                    ms(b.from),
                    ms(b.to)
                ));
                spans.push((a.from, a.to));
                spans.push((b.from, b.to));
            }
        }
    }
    Verdict::new("lock: at most one holder at a time", format!("{} holds", holds.len()), anomalies, spans)
}

/// Ephemeral nodes: those of ended sessions gone, those of live sessions whose create was
/// acknowledged present.
pub fn ephemerals(history: &History, children: &[String]) -> Verdict {
    let present: BTreeSet<&str> = children.iter().map(String::as_str).collect();
    let mut anomalies = Vec::new();
    let (mut ended, mut live) = (0, 0);
    for e in &history.ephemerals {
        let leaf = e.path.rsplit('/').next().unwrap_or(&e.path);
        if e.gone {
            ended += 1;
            if present.contains(leaf) {
                anomalies.push(format!("{} outlived its session", e.path));
            }
        } else if e.acked {
            live += 1;
            if !present.contains(leaf) {
                anomalies.push(format!("{} is missing though its session lives", e.path));
            }
        }
    }
    Verdict::new(
        "ephemerals (gone with their sessions, kept while they live)",
        format!("{ended} of ended sessions, {live} of live ones"),
        anomalies,
        Vec::new(),
    )
}

/// Every server's tree the same.
pub fn trees_equal(dumps: &[(usize, BTreeMap<String, String>)]) -> Verdict {
    let mut anomalies = Vec::new();
    if let Some((first, base)) = dumps.first() {
        for (i, d) in &dumps[1..] {
            if d != base {
                let differing = base
                    .iter()
                    .find(|(k, v)| d.get(*k) != Some(v))
                    .map(|(k, v)| {
                        format!("{k}: {v} on server {} but {:?} on server {}", first + 1, d.get(k), i + 1)
                    })
                    .or_else(|| {
                        d.keys()
                            .find(|k| !base.contains_key(*k))
                            .map(|k| format!("{k} only on server {}", i + 1))
                    })
                    .unwrap_or_default();
                anomalies.push(format!("server {} differs from server {}: {differing}", i + 1, first + 1));
            }
        }
    }
    let nodes = dumps.first().map_or(0, |d| d.1.len());
    Verdict::new(
        "trees equal on every server after healing",
        format!("{} servers, {nodes} znodes", dumps.len()),
        anomalies,
        Vec::new(),
    )
}
