//! The console's sessions and their watches (`GET /console/api/sessions?offset=&limit=`): one page
//! of the ensemble's sessions, each with its timeout, ephemeral count and, when it is connected
//! to this server, its remote address, when it was last answered and the paths it watches here.
//!
//! It reads what `dump` (the sessions and their ephemerals), `cons` (the connections) and `wchc`
//! (watches by session, [`super::commands::watches_by_session`]) read, joined by session id and
//! bounded: at most [`MAX_LIMIT`] sessions a page and [`MAX_WATCHES_SHOWN`] paths a session,
//! each with the full count so the page can say what it left out. Watches live on the server
//! a client is connected to, so a session connected elsewhere shows none here.

use super::commands::watches_by_session;
use crate::view::View;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;

/// Where the console asks for the sessions.
pub const PATH: &str = "/console/api/sessions";

/// Sessions on a page when the query does not say.
pub const DEFAULT_LIMIT: usize = 100;

/// The most sessions on one page.
pub const MAX_LIMIT: usize = 500;

/// The most watched paths listed for one session.
pub const MAX_WATCHES_SHOWN: usize = 50;

/// Which page: sessions `offset..offset + limit` in session id order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Sessions skipped.
    pub offset: usize,
    /// Sessions listed, at most [`MAX_LIMIT`].
    pub limit: usize,
}

impl Page {
    /// The page a query's pairs ask for. Errors: a value that is not a number, a limit of 0 or
    /// above [`MAX_LIMIT`], an unknown key.
    pub fn from_query(pairs: &[(String, String)]) -> Result<Page, String> {
        let mut p = Page { offset: 0, limit: DEFAULT_LIMIT };
        for (k, v) in pairs {
            let n: usize = v.parse().map_err(|_| format!("{k}={v}: expected a whole number"))?;
            match k.as_str() {
                "offset" => p.offset = n,
                "limit" if (1..=MAX_LIMIT).contains(&n) => p.limit = n,
                "limit" => return Err(format!("limit={v}: expected 1 to {MAX_LIMIT}")),
                _ => return Err(format!("unknown query parameter {k:?} (known: offset, limit)")),
            }
        }
        Ok(p)
    }
}

/// What a page is made of, gathered from the read model.
#[derive(Debug, Default)]
pub struct Facts {
    /// Every session and its timeout (ms).
    pub sessions: Vec<(i64, i32)>,
    /// Each session's ephemeral nodes.
    pub ephemerals: BTreeMap<i64, Vec<String>>,
    /// The paths each session watches on this server.
    pub watches: BTreeMap<i64, Vec<String>>,
    /// The sessions connected to this server: remote address and when last answered.
    pub here: HashMap<i64, (String, Option<i64>)>,
    /// `wchs`: connections watching, paths watched, watches.
    pub summary: (usize, usize, usize),
    /// The wall clock, ms since the Unix epoch.
    pub now_ms: i64,
}

impl Facts {
    /// The facts as this server's read model has them.
    pub fn of(v: &View<'_>) -> Facts {
        let watches = watches_by_session(v);
        let here = v
            .conns
            .iter()
            .map(|c| {
                let seen = c.stats.last_request().map(|l| l.at_wall_ms);
                (c.stats.session.load(Relaxed), (c.remote.to_string(), seen))
            })
            .filter(|(sid, _)| *sid != 0)
            .collect();
        Facts {
            sessions: v.db.sessions().iter().collect(),
            ephemerals: v.db.ephemerals_by_session(),
            summary: (watches.len(), v.db.watched_path_count(), v.db.data_watch_count()),
            watches,
            here,
            now_ms: v.wall_ms,
        }
    }
}

/// The page's JSON: sessions in id order from `page.offset`, at most `page.limit`, and
/// `capped` when more follow.
pub fn render(mut f: Facts, page: Page) -> Value {
    f.sessions.sort_unstable_by_key(|(sid, _)| *sid);
    let total = f.sessions.len();
    let sessions: Vec<Value> = f
        .sessions
        .iter()
        .skip(page.offset)
        .take(page.limit)
        .map(|&(sid, timeout)| {
            let conn = f.here.get(&sid);
            let watched = f.watches.get(&sid).map(Vec::as_slice).unwrap_or_default();
            json!({
                // Hex text: a session id does not fit a JavaScript number.
                "id": format!("0x{:x}", sid as u64),
                "timeout_ms": timeout,
                "ephemerals": f.ephemerals.get(&sid).map_or(0, Vec::len),
                "connected_here": conn.is_some(),
                "remote": conn.map(|c| c.0.clone()),
                "last_seen_ms": conn.and_then(|c| c.1),
                "watch_count": watched.len(),
                "watches": &watched[..watched.len().min(MAX_WATCHES_SHOWN)],
            })
        })
        .collect();
    let shown = sessions.len();
    json!({
        "total": total,
        "offset": page.offset,
        "limit": page.limit,
        "shown": shown,
        "capped": page.offset + shown < total,
        "max_watches_shown": MAX_WATCHES_SHOWN,
        "watch_summary": { "connections": f.summary.0, "paths": f.summary.1, "watches": f.summary.2 },
        "now_ms": f.now_ms,
        "sessions": sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Result<Page, String> {
        Page::from_query(&crate::admin::http::query_pairs(Some(s)))
    }

    #[test]
    fn pages() {
        assert_eq!(q("").unwrap(), Page { offset: 0, limit: DEFAULT_LIMIT });
        assert_eq!(q("offset=200&limit=50").unwrap(), Page { offset: 200, limit: 50 });
        assert_eq!(q(&format!("limit={MAX_LIMIT}")).unwrap().limit, MAX_LIMIT);
        assert!(q(&format!("limit={}", MAX_LIMIT + 1)).is_err());
        assert!(q("limit=0").is_err());
        assert!(q("offset=-1").is_err());
        assert!(q("offset=x").is_err());
        assert!(q("sort=id").is_err());
    }

    #[test]
    fn a_page_is_bounded_and_says_so() {
        let many: Vec<String> = (0..MAX_WATCHES_SHOWN + 5).map(|i| format!("/w{i:03}")).collect();
        let f = || Facts {
            sessions: (1..=250).rev().map(|i| (i, 30_000)).chain([(-5, 4000)]).collect(),
            ephemerals: [(3, vec!["/e1".to_string(), "/e2".to_string()])].into(),
            watches: [(3, many.clone())].into(),
            here: [(3, ("127.0.0.1:5000".to_string(), Some(77)))].into(),
            summary: (1, many.len(), many.len()),
            now_ms: 1000,
        };
        let v = render(f(), Page { offset: 0, limit: 100 });
        assert_eq!(
            (v["total"].as_u64(), v["shown"].as_u64(), v["capped"].as_bool()),
            (Some(251), Some(100), Some(true))
        );
        let s = v["sessions"].as_array().unwrap();
        assert_eq!(s.len(), 100);
        // Id order; a negative id (its high bit set) as the unsigned hex Apache prints.
        assert_eq!(s[0]["id"], "0xfffffffffffffffb");
        assert_eq!(s[1]["id"], "0x1");
        let third = &s[3];
        assert_eq!(third["id"], "0x3");
        assert_eq!((third["ephemerals"].as_u64(), third["connected_here"].as_bool()), (Some(2), Some(true)));
        assert_eq!(
            (third["remote"].as_str(), third["last_seen_ms"].as_i64()),
            (Some("127.0.0.1:5000"), Some(77))
        );
        assert_eq!(third["watch_count"].as_u64(), Some(many.len() as u64));
        assert_eq!(third["watches"].as_array().unwrap().len(), MAX_WATCHES_SHOWN);
        assert!(s[1]["remote"].is_null() && s[1]["watches"].as_array().unwrap().is_empty());
        // The last page is not capped; a page past the end is empty.
        let v = render(f(), Page { offset: 200, limit: 100 });
        assert_eq!((v["shown"].as_u64(), v["capped"].as_bool()), (Some(51), Some(false)));
        let v = render(f(), Page { offset: 1000, limit: 10 });
        assert_eq!((v["shown"].as_u64(), v["capped"].as_bool()), (Some(0), Some(false)));
    }
}
