//! Quotas as Apache 3.8 keeps them: `/zookeeper/quota/<path>/zookeeper_limits` marks a quota
//! root (kept in a prefix set like Apache's PathTrie), and the sibling `zookeeper_stats` node's
//! data is rewritten in place ("count=N,bytes=M") as nodes under the root are created, deleted or
//! rewritten. Enforcement (QUOTAEXCEEDED for hard limits) applies only when configured, as
//! Apache's `zookeeper.enforceQuota`.

use std::collections::{BTreeMap, HashSet};

/// The quota management node.
pub const QUOTA_ROOT: &str = "/zookeeper/quota";
/// Name of a quota's limits node.
pub const LIMIT_NODE: &str = "zookeeper_limits";
/// Name of a quota's stats node.
pub const STAT_NODE: &str = "zookeeper_stats";

/// Path of the stats node of the quota rooted at `prefix`.
pub fn stat_path(prefix: &str) -> String {
    format!("{QUOTA_ROOT}{prefix}/{STAT_NODE}")
}

/// Path of the limits node of the quota rooted at `prefix`.
pub fn limit_path(prefix: &str) -> String {
    format!("{QUOTA_ROOT}{prefix}/{LIMIT_NODE}")
}

/// Path components as PathTrie splits them: blank segments dropped.
fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|t| !t.trim_matches(|c: char| c <= ' ').is_empty())
}

fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in components(path) {
        out.push('/');
        out.push_str(c);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// The quota roots (Apache's PathTrie nodes that carry the property).
#[derive(Debug, Default, Clone)]
pub struct QuotaRoots {
    roots: HashSet<String>,
}

impl QuotaRoots {
    /// Marks `path` as a quota root (ignored for an empty path, where Apache throws).
    pub fn add(&mut self, path: &str) {
        if !path.is_empty() {
            self.roots.insert(normalize(path));
        }
    }

    /// Unmarks `path`.
    pub fn remove(&mut self, path: &str) {
        self.roots.remove(&normalize(path));
    }

    /// The deepest quota root at or above `path`, None if there is none (or it is "/").
    pub fn max_prefix(&self, path: &str) -> Option<String> {
        if self.roots.is_empty() {
            return None;
        }
        let mut cur = String::new();
        let mut best = None;
        for c in components(path) {
            cur.push('/');
            cur.push_str(c);
            if self.roots.contains(&cur) {
                best = Some(cur.clone());
            }
        }
        best.filter(|b| b != "/")
    }
}

/// Apache's StatsTrack: `key=value` pairs separated by ',' or ';'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsTrack {
    values: BTreeMap<String, i64>,
}

impl StatsTrack {
    /// Parses node data. None where Apache would throw (a pair without '=', a bad number).
    pub fn parse(data: &[u8]) -> Option<StatsTrack> {
        let text = String::from_utf8_lossy(data);
        let mut values = BTreeMap::new();
        if text.is_empty() {
            return Some(StatsTrack { values });
        }
        let mut pairs: Vec<&str> = text.split([',', ';']).collect();
        // Java's split drops trailing empty strings; runs of separators count as one.
        while pairs.last() == Some(&"") {
            pairs.pop();
        }
        let mut first = true;
        for pair in pairs {
            if pair.is_empty() && !first {
                continue;
            }
            first = false;
            let kv = crate::java::split_drop_trailing(pair, '=');
            let key = kv.first()?;
            let val = kv.get(1)?;
            let v = if val.is_empty() { -1 } else { parse_long(val)? };
            values.insert(key.to_string(), v);
        }
        Some(StatsTrack { values })
    }

    /// A value, -1 when absent.
    pub fn get(&self, key: &str) -> i64 {
        self.values.get(key).copied().unwrap_or(-1)
    }

    /// Sets a value.
    pub fn set(&mut self, key: &str, v: i64) {
        self.values.insert(key.to_string(), v);
    }

    /// Apache's text form: `count=C,bytes=B`, then (after a stray '=', as 3.8 writes it) the
    /// other keys sorted, each as `;key=value`.
    pub fn to_text(&self) -> String {
        let mut s = format!("count={},bytes={}", self.get("count"), self.get("bytes"));
        let others: Vec<(&String, &i64)> =
            self.values.iter().filter(|(k, _)| *k != "count" && *k != "bytes").collect();
        if !others.is_empty() {
            s.push('=');
            for (k, v) in others {
                s.push_str(&format!(";{k}={v}"));
            }
        }
        s
    }
}

/// `Long.parseLong`.
fn parse_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// Whether a change of `count_diff` nodes and `bytes_diff` bytes under a quota with these limits
/// and current stats breaks a hard limit (soft limits only log in Apache).
pub fn exceeds(limits: &StatsTrack, stats: &StatsTrack, bytes_diff: i64, count_diff: i64) -> bool {
    let check_count = count_diff != 0 && (limits.get("count") > -1 || limits.get("countHardLimit") > -1);
    let check_bytes = bytes_diff != 0 && (limits.get("bytes") > -1 || limits.get("byteHardLimit") > -1);
    let count_hard = limits.get("countHardLimit");
    if check_count && count_hard > -1 && stats.get("count").saturating_add(count_diff) > count_hard {
        return true;
    }
    let bytes_hard = limits.get("byteHardLimit");
    check_bytes && bytes_hard > -1 && stats.get("bytes").saturating_add(bytes_diff) > bytes_hard
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_text_round_trip() {
        let s = StatsTrack::parse(b"count=3,bytes=10").unwrap();
        assert_eq!((s.get("count"), s.get("bytes")), (3, 10));
        assert_eq!(s.to_text(), "count=3,bytes=10");
        let l = StatsTrack::parse(b"count=-1,bytes=-1;countHardLimit=5").unwrap();
        assert_eq!(l.get("countHardLimit"), 5);
        assert_eq!(l.to_text(), "count=-1,bytes=-1=;countHardLimit=5");
        // Reading back Apache's own odd form works.
        let again = StatsTrack::parse(l.to_text().as_bytes()).unwrap();
        assert_eq!(again, l);
        assert_eq!(StatsTrack::parse(b"").unwrap().to_text(), "count=-1,bytes=-1");
        assert!(StatsTrack::parse(b"count").is_none());
        assert!(StatsTrack::parse(b"count=x").is_none());
    }

    #[test]
    fn roots_and_prefixes() {
        let mut r = QuotaRoots::default();
        assert_eq!(r.max_prefix("/a/b"), None);
        r.add("/a");
        r.add("/a/b/c");
        assert_eq!(r.max_prefix("/a/b"), Some("/a".into()));
        assert_eq!(r.max_prefix("/a/b/c/d"), Some("/a/b/c".into()));
        assert_eq!(r.max_prefix("/ab"), None);
        r.remove("/a");
        assert_eq!(r.max_prefix("/a/b"), None);
        r.add("/");
        assert_eq!(r.max_prefix("/x"), None);
    }

    #[test]
    fn hard_limits_only() {
        let limits = StatsTrack::parse(b"count=1,bytes=-1;countHardLimit=2").unwrap();
        let stats = StatsTrack::parse(b"count=2,bytes=0").unwrap();
        assert!(exceeds(&limits, &stats, 0, 1));
        assert!(!exceeds(&limits, &stats, 5, 0));
        let soft = StatsTrack::parse(b"count=1,bytes=1").unwrap();
        assert!(!exceeds(&soft, &stats, 100, 1));
    }
}
