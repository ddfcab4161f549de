//! Search by path in the tree (the REST API's `GET /api/v1/storage/{path}?search=TEXT`): the
//! nodes below `{path}` whose path starts with TEXT (when TEXT starts with `/`) or contains it
//! (otherwise), found by listing children breadth first, each level in name order.
//!
//! The walk lists children with the caller's own getChildren requests ([`super::rest`] sends
//! them on the caller's session), so it finds only what the caller could find by browsing: a
//! node whose children its ACL does not let the caller read is counted as unreadable and not
//! entered. A prefix search enters only the nodes that can hold a match, so `/app/conf` lists
//! `/`, `/app` and whatever lies under the matches.
//!
//! Bounded on the server: at most [`MAX_VISITS`] nodes listed and `limit` matches (at most
//! [`MAX_RESULTS`]); the answer says which bound ended the walk. The queue of nodes still to list
//! never holds more than the visits left, and [`WINDOW`] listings are in flight at once.

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::future::Future;
use zk_proto::ErrorCode;

/// The most nodes one search lists.
pub const MAX_VISITS: usize = 50_000;

/// Matches returned when the query does not say.
pub const DEFAULT_RESULTS: usize = 100;

/// The most matches one search returns.
pub const MAX_RESULTS: usize = 1000;

/// getChildren requests in flight at once.
pub const WINDOW: usize = 32;

/// The longest search text taken (a znode path is at most this long in practice).
pub const MAX_TEXT: usize = 1024;

/// What a search looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The text: a path prefix when it starts with `/`, else a substring of the path.
    pub text: String,
    /// The most matches returned.
    pub limit: usize,
}

impl Query {
    /// A query from `search=` and `limit=` values. Errors: an empty or overlong text, a limit
    /// that is not 1 to [`MAX_RESULTS`].
    pub fn new(text: &str, limit: Option<&str>) -> Result<Query, String> {
        if text.is_empty() {
            return Err("search=: give the text to look for".into());
        }
        if text.len() > MAX_TEXT {
            return Err(format!("search=: at most {MAX_TEXT} bytes"));
        }
        let limit = match limit {
            None => DEFAULT_RESULTS,
            Some(l) => match l.parse::<usize>() {
                Ok(n) if (1..=MAX_RESULTS).contains(&n) => n,
                _ => return Err(format!("limit={l}: expected 1 to {MAX_RESULTS}")),
            },
        };
        Ok(Query { text: text.to_string(), limit })
    }

    fn prefix(&self) -> bool {
        self.text.starts_with('/')
    }

    fn matches(&self, path: &str) -> bool {
        if self.prefix() {
            path.starts_with(&self.text)
        } else {
            path.contains(&self.text)
        }
    }

    /// Whether a node below `path` can match: always for a substring; for a prefix, when the
    /// prefix goes on below `path` or `path` already starts with it.
    fn may_hold(&self, path: &str) -> bool {
        if !self.prefix() || path == "/" || path.starts_with(&self.text) {
            return true;
        }
        self.text.strip_prefix(path).is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Which bound ended a search before the tree below its root was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncated {
    /// `limit` matches were found.
    Results,
    /// [`MAX_VISITS`] nodes were listed.
    Visits,
}

/// A search's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The matching paths, in the walk's order (by depth, then name).
    pub matches: Vec<String>,
    /// Nodes listed.
    pub visited: usize,
    /// Nodes whose children the caller may not read (not entered).
    pub unreadable: usize,
    /// Why the walk stopped early, if it did.
    pub truncated: Option<Truncated>,
    /// The root's own error (NoNode, NoAuth), when it could not be listed.
    pub root_error: Option<ErrorCode>,
}

impl Found {
    /// The answer's JSON for root `root` and query `q`.
    pub fn to_json(&self, root: &str, q: &Query) -> Value {
        json!({
            "path": root,
            "search": q.text,
            "mode": if q.prefix() { "prefix" } else { "substring" },
            "matches": self.matches,
            "visited": self.visited,
            "unreadable": self.unreadable,
            "truncated": match self.truncated {
                None => Value::Null,
                Some(Truncated::Results) => "results".into(),
                Some(Truncated::Visits) => "visits".into(),
            },
            "limits": { "results": q.limit, "visits": MAX_VISITS },
        })
    }
}

fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// Walks the tree below `root` for `q`, listing nodes with `list`: given up to [`WINDOW`] paths,
/// it answers each one's children or its error code, in order. Errors: `list`'s, which end the
/// search (the connection to the server is gone). A node gone meanwhile (NoNode) is skipped.
pub async fn search<E, F, Fut>(root: &str, q: &Query, mut list: F) -> Result<Found, E>
where
    F: FnMut(Vec<String>) -> Fut,
    Fut: Future<Output = Result<Vec<Result<Vec<String>, ErrorCode>>, E>>,
{
    let mut found =
        Found { matches: Vec::new(), visited: 0, unreadable: 0, truncated: None, root_error: None };
    if root != "/" && q.matches(root) {
        found.matches.push(root.to_string());
        if found.matches.len() >= q.limit {
            found.truncated = Some(Truncated::Results);
            return Ok(found);
        }
    }
    let mut queue: VecDeque<String> = VecDeque::from([root.to_string()]);
    // Nodes not queued because the visits left could not list them.
    let mut dropped = false;
    'walk: while !queue.is_empty() {
        let room = MAX_VISITS - found.visited;
        if room == 0 {
            found.truncated = Some(Truncated::Visits);
            break;
        }
        let batch: Vec<String> = queue.drain(..queue.len().min(WINDOW).min(room)).collect();
        let answers = list(batch.clone()).await?;
        found.visited += batch.len();
        for (parent, answer) in batch.iter().zip(answers) {
            let mut children = match answer {
                Ok(c) => c,
                Err(e) if found.visited == 1 => {
                    found.matches.clear();
                    found.root_error = Some(e);
                    return Ok(found);
                }
                Err(ErrorCode::NoAuth) => {
                    found.unreadable += 1;
                    continue;
                }
                Err(_) => continue,
            };
            children.sort_unstable();
            for name in children {
                let path = child_path(parent, &name);
                if q.matches(&path) {
                    found.matches.push(path.clone());
                    if found.matches.len() >= q.limit {
                        found.truncated = Some(Truncated::Results);
                        break 'walk;
                    }
                }
                if q.may_hold(&path) {
                    if queue.len() < MAX_VISITS - found.visited {
                        queue.push_back(path);
                    } else {
                        dropped = true;
                    }
                }
            }
        }
    }
    if found.truncated.is_none() && dropped {
        found.truncated = Some(Truncated::Visits);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A tree as parent -> children; `locked` nodes answer NoAuth.
    struct Tree {
        kids: BTreeMap<String, Vec<String>>,
        locked: Vec<String>,
    }

    impl Tree {
        fn new(paths: &[&str]) -> Tree {
            let mut kids: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for p in paths {
                let (parent, name) = p.rsplit_once('/').unwrap();
                let parent = if parent.is_empty() { "/" } else { parent };
                kids.entry(parent.to_string()).or_default().push(name.to_string());
            }
            Tree { kids, locked: Vec::new() }
        }

        async fn run(&self, root: &str, q: &Query) -> (Found, usize) {
            let mut calls = 0usize;
            let found = search::<(), _, _>(root, q, |batch| {
                calls += 1;
                assert!(batch.len() <= WINDOW);
                let out = batch
                    .iter()
                    .map(|p| {
                        if self.locked.contains(p) {
                            Err(ErrorCode::NoAuth)
                        } else {
                            Ok(self.kids.get(p).cloned().unwrap_or_default())
                        }
                    })
                    .collect();
                std::future::ready(Ok(out))
            })
            .await
            .unwrap();
            (found, calls)
        }
    }

    fn q(text: &str, limit: usize) -> Query {
        Query { text: text.into(), limit }
    }

    #[tokio::test]
    async fn substring_and_prefix() {
        let mut t = Tree::new(&["/app", "/app/config", "/app/cache", "/big", "/big/n1", "/big/n2", "/zoo"]);
        let (f, _) = t.run("/", &q("con", 10)).await;
        assert_eq!(f.matches, vec!["/app/config"]);
        assert_eq!((f.visited, f.truncated), (8, None));
        // A prefix enters only what can hold a match: /, /app and the match.
        let (f, _) = t.run("/", &q("/app/c", 10)).await;
        assert_eq!(f.matches, vec!["/app/cache", "/app/config"]);
        assert_eq!(f.visited, 4);
        // From a root below /, the root counts when it matches.
        let (f, _) = t.run("/big", &q("big", 10)).await;
        assert_eq!(f.matches, vec!["/big", "/big/n1", "/big/n2"]);
        // An unreadable node is counted and not entered.
        t.locked.push("/app".into());
        let (f, _) = t.run("/", &q("config", 10)).await;
        assert!(f.matches.is_empty());
        assert_eq!((f.unreadable, f.root_error), (1, None));
        // An unreadable root is the answer's error.
        let (f, _) = t.run("/app", &q("config", 10)).await;
        assert_eq!((f.visited, f.root_error), (1, Some(ErrorCode::NoAuth)));
    }

    #[tokio::test]
    async fn bounded_by_results_and_by_visits() {
        let names: Vec<String> = (0..MAX_VISITS + 10).map(|i| format!("/n{i:06}")).collect();
        let nested: Vec<String> = (0..MAX_VISITS + 10).map(|i| format!("/n000000/m{i:06}")).collect();
        let all: Vec<&str> = names.iter().chain(&nested).map(String::as_str).collect();
        let t = Tree::new(&all);
        // Results: the first `limit` matches in name order, and it says so.
        let (f, _) = t.run("/", &q("n0", 5)).await;
        assert_eq!(f.matches.len(), 5);
        assert_eq!(f.truncated, Some(Truncated::Results));
        // Visits: never more than MAX_VISITS nodes listed, WINDOW at a time, and it says so.
        let (f, calls) = t.run("/", &q("nothing-matches", MAX_RESULTS)).await;
        assert_eq!(f.visited, MAX_VISITS);
        assert_eq!(f.truncated, Some(Truncated::Visits));
        assert!(calls <= MAX_VISITS / WINDOW + 2, "{calls}");
        let v = f.to_json("/", &q("nothing-matches", MAX_RESULTS));
        assert_eq!((v["truncated"].as_str(), v["mode"].as_str()), (Some("visits"), Some("substring")));
        assert_eq!(v["limits"]["visits"], MAX_VISITS);
    }

    #[test]
    fn queries() {
        assert_eq!(Query::new("x", None).unwrap().limit, DEFAULT_RESULTS);
        assert_eq!(Query::new("x", Some("7")).unwrap().limit, 7);
        assert!(Query::new("", None).is_err());
        assert!(Query::new("x", Some("0")).is_err());
        assert!(Query::new("x", Some(&(MAX_RESULTS + 1).to_string())).is_err());
        assert!(Query::new(&"x".repeat(MAX_TEXT + 1), None).is_err());
        let p = q("/app/c", 1);
        assert!(
            p.may_hold("/app") && p.may_hold("/app/config/x") && !p.may_hold("/apple") && !p.may_hold("/b")
        );
    }
}
