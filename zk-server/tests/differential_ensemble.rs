//! Differential tests on ensembles: the same scripted scenarios on three Apache ZooKeeper 3.8
//! servers and on three zkrs servers (real processes, loopback ports), transcripts compared line
//! by line. The scenarios exercise what only an ensemble has: writes through followers, reads on
//! another member with and without sync, watches set on one member fired by writes through
//! another, sequence numbers handed out for creates through different members, a session moving
//! between members, stale versions checked by the leader, reconfig while it is disabled, and
//! /zookeeper/config.
//!
//! The recording is `support/transcript.rs`'s, with what must differ between two ensembles
//! normalised on top of what that module already normalises:
//! - a reply header's zxid becomes `*` (on a follower it is whatever that member has applied);
//! - czxid, mzxid and pzxid become their rank among the scenario's stat zxids (`z1` < `z2` < ...),
//!   so ordering and equality are compared, absolute values (epochs, session txns) are not;
//! - the ensemble's ports become names (`client2`, `quorum1`, ...);
//! - a read without sync on a member other than the writer's is recorded only as "the state before
//!   or after the write" (a follower applies a commit when it gets it), then read again after sync.
//!
//! Members are addressed by role: `L` the leader, `F1` and `F2` the followers. Both ensembles are
//! started once and run every scenario; `ZKRS_DIFF_ONLY`, `ZKRS_DIFF_PRINT` and `ZKRS_DIFF_DUMP`
//! work as for the standalone differential tests.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use std::collections::BTreeSet;
use std::time::Duration;
use support::ensemble::{Ensemble, Kind};
use support::transcript::*;
use zk_proto::*;

const L: usize = 0;
const F1: usize = 1;
const F2: usize = 2;
const LONG: i32 = 30_000;
const EVENT_WAIT: Duration = Duration::from_secs(20);

type Scenario = fn(&mut Ctx);

const SCENARIOS: &[(&str, Scenario)] = &[
    ("follower_writes", sc::follower_writes),
    ("cross_member_watches", sc::cross_member_watches),
    ("ephemerals_vanish_everywhere", sc::ephemerals_vanish_everywhere),
    ("sequential_across_members", sc::sequential_across_members),
    ("session_moves", sc::session_moves),
    ("expiry_across_members", sc::expiry_across_members),
    ("stale_versions", sc::stale_versions),
    ("multi_through_follower", sc::multi_through_follower),
    ("errors_through_followers", sc::errors_through_followers),
    ("reconfig_and_config", sc::reconfig_and_config),
];

/// Lines (or parts of lines) each scenario's transcript must have on either ensemble: what the
/// scenario is about did happen (two ensembles failing alike would compare equal).
const ANCHORS: &[(&str, &[&str])] = &[
    (
        "follower_writes",
        &["b getData \"/fw\" watch=false -> zxid=* Ok data=\"one\"", "unsynced read: the state before"],
    ),
    (
        "cross_member_watches",
        &[
            "b <event NodeDataChanged SyncConnected \"/cw\"",
            "l <event NodeChildrenChanged SyncConnected \"/cw\"",
        ],
    ),
    ("ephemerals_vanish_everywhere", &["w <event NodeDeleted SyncConnected \"/eph/e1\"", "owner=S2"]),
    ("sequential_across_members", &["path=\"/sq/n-0000000007\"", "path=\"/sq/e-0000000006\""]),
    (
        "session_moves",
        &[
            "a setData \"/mv/d\" data=\"old\" v=-1 -> closed",
            "a2 <event NodeDataChanged SyncConnected \"/mv/d\"",
            "a2 <event NodeCreated SyncConnected \"/mv/none\"",
            "l exists \"/mv/eph\" watch=false -> zxid=* Ok",
            "a2 setData \"/mv/d\" data=\"stale2\" v=-1 -> closed",
            "a3 setData \"/mv/d\" data=\"stale3\" v=-1 -> closed",
            "a4 setData \"/mv/d\" data=\"d2\" v=-1 -> zxid=* Ok",
            "a4 closeSession -> zxid=* Ok",
            "a5 <closed>",
        ],
    ),
    (
        "expiry_across_members",
        &[
            "w <event NodeDeleted SyncConnected \"/ex/e\"",
            "e2 connect -> protocolVersion=0 timeOut=0 session=0",
        ],
    ),
    ("stale_versions", &["b setData \"/cv\" data=\"stale\" v=0 -> zxid=* BadVersion"]),
    ("multi_through_follower", &["RuntimeInconsistency", "multiRead"]),
    ("errors_through_followers", &["b getData \"/er\" watch=false -> zxid=* NoAuth"]),
    (
        "reconfig_and_config",
        &["ReconfigDisabled", "config data: \"server.1=127.0.0.1:quorum1:election1:participant"],
    ),
];

/// Fails unless `lines` (scenario `name` on `label`) has its anchors, and no request or event
/// went unanswered.
fn check_sane(name: &str, label: &str, lines: &[String]) {
    let text = lines.join("\n");
    let (_, anchors) = ANCHORS.iter().find(|(n, _)| *n == name).expect("anchors for every scenario");
    for needle in anchors.iter() {
        assert!(text.contains(needle), "{name} on {label}: no {needle:?} in:\n{text}");
    }
    for bad in ["<no event within", "no reply within", "neither before nor after", "undecodable"] {
        assert!(!text.contains(bad), "{name} on {label}: {bad:?} in:\n{text}");
    }
}

#[test]
fn ensemble_scenarios_match_apache() {
    let runs: Vec<(&str, Vec<Vec<String>>)> = std::thread::scope(|s| {
        let handles: Vec<_> = [(Kind::Apache, "apache"), (Kind::Zkrs, "zkrs")]
            .into_iter()
            .filter(|(_, label)| selected(label))
            .map(|(kind, label)| (label, s.spawn(move || run_all(kind, label))))
            .collect();
        handles
            .into_iter()
            .map(|(label, h)| (label, h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))))
            .collect()
    });
    if let [(_, apache), (_, zkrs)] = &runs[..] {
        let failures: Vec<String> = SCENARIOS
            .iter()
            .zip(apache.iter().zip(zkrs))
            .filter_map(|((name, _), (a, z))| difference(name, a, z))
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// Starts a three-member ensemble of `kind`, runs every scenario on it, and returns the
/// normalised transcripts in scenario order.
fn run_all(kind: Kind, label: &str) -> Vec<Vec<String>> {
    let mut e = Ensemble::configure(&[kind; 3]);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", "2");
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let roles = [leader, followers[0], followers[1]];
    let ports = port_names(&e);
    SCENARIOS
        .iter()
        .map(|(name, scenario)| {
            let mut ctx = Ctx::for_servers(roles.iter().map(|&i| e.members[i].client).collect());
            scenario(&mut ctx);
            let lines = normalise(ctx.into_lines(), &ports);
            report(name, label, &lines);
            check_sane(name, label, &lines);
            lines
        })
        .collect()
}

/// Every port of the ensemble with a name that is the same in any ensemble: `client<myid>`,
/// `quorum<myid>`, `election<myid>` (read back from the members' zoo.cfg).
fn port_names(e: &Ensemble) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, m) in e.members.iter().enumerate() {
        out.push((m.client.port().to_string(), format!("client{}", i + 1)));
        let cfg = std::fs::read_to_string(m.dir.join("zoo.cfg")).expect("zoo.cfg");
        if i == 0 {
            for line in cfg.lines() {
                let Some((key, value)) = line.split_once('=') else { continue };
                let Some(id) = key.strip_prefix("server.") else { continue };
                let parts: Vec<&str> = value.split(':').collect();
                out.push((parts[1].to_string(), format!("quorum{id}")));
                out.push((parts[2].to_string(), format!("election{id}")));
            }
        }
    }
    out
}

/// Replaces every whole-number occurrence of a port by its name.
fn name_ports(line: &str, ports: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        match ports.iter().find(|(p, _)| p == digits) {
            Some((_, name)) => out.push_str(name),
            None => out.push_str(digits),
        }
        digits.clear();
    };
    for ch in line.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
        } else {
            flush(&mut digits, &mut out);
            out.push(ch);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// The value of each `key=<integer>` in `line`, with the byte range of the integer.
fn fields<'a>(line: &'a str, key: &'a str) -> impl Iterator<Item = (usize, usize, i64)> + 'a {
    line.match_indices(key).filter_map(move |(at, _)| {
        // A whole key: not the tail of a longer one (`zxid=` inside `czxid=`).
        let before = line[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
            return None;
        }
        let start = at + key.len();
        let len = line[start..]
            .char_indices()
            .take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && *c == '-'))
            .count();
        line[start..start + len].parse().ok().map(|v| (start, start + len, v))
    })
}

/// Rewrites `key=<integer>` fields of `line` with `f`.
fn rewrite(line: &str, key: &str, f: impl Fn(i64) -> String) -> String {
    let mut out = String::new();
    let mut last = 0;
    for (start, end, v) in fields(line, key).collect::<Vec<_>>() {
        out.push_str(&line[last..start]);
        out.push_str(&f(v));
        last = end;
    }
    out.push_str(&line[last..]);
    out
}

/// Hides a reply header's zxid (not -1 or 0, which are protocol constants).
fn hide_header_zxid(line: &str) -> String {
    rewrite(line, "zxid=", |v| if v <= 0 { v.to_string() } else { "*".into() })
}

/// The ensemble normalisation described at the top of the file.
fn normalise(lines: Vec<String>, ports: &[(String, String)]) -> Vec<String> {
    const STAT_ZXIDS: [&str; 3] = ["czxid=", "mzxid=", "pzxid="];
    let lines: Vec<String> = lines.iter().map(|l| hide_header_zxid(&name_ports(l, ports))).collect();
    let all: BTreeSet<i64> =
        lines.iter().flat_map(|l| STAT_ZXIDS.iter().flat_map(|k| fields(l, k).map(|(_, _, v)| v))).collect();
    let rank = |v: i64| match all.iter().position(|&x| x == v) {
        Some(_) if v == 0 => "0".to_string(),
        Some(r) => format!("z{}", r + 1),
        None => v.to_string(),
    };
    lines.into_iter().map(|l| STAT_ZXIDS.iter().fold(l, |l, k| rewrite(&l, k, rank))).collect()
}

/// The last transcript line with its header zxid hidden, kept in the transcript.
fn last_line(ctx: &mut Ctx) -> String {
    let line = ctx.take_last_line().expect("a line");
    ctx.note(line.clone());
    hide_header_zxid(&line)
}

/// Syncs `c`'s member with the leader, then records `req` read there; returns that read's line.
fn synced_read(ctx: &mut Ctx, c: &mut Conn, req: Request) -> String {
    ctx.call(c, Request::Sync(SyncRequest { path: "/".into() }));
    ctx.call(c, req);
    last_line(ctx)
}

/// Reads `req` on `c` right after a write made through another member, without sync: the member
/// may or may not have applied the write yet, so only "one of the two" is recorded (`before` is
/// the line a synced read gave before the write). Then reads again after sync, recording it.
fn unsynced_then_synced(ctx: &mut Ctx, c: &mut Conn, req: Request, before: &str) {
    ctx.call(c, req.clone());
    let unsynced = hide_header_zxid(&ctx.take_last_line().expect("a line"));
    let after = synced_read(ctx, c, req);
    if unsynced == before || unsynced == after {
        ctx.note(format!("{} unsynced read: the state before or after the write", c.name));
    } else {
        ctx.note(format!("{} unsynced read: neither before nor after the write: {unsynced}", c.name));
    }
}

/// Waits for `n` events on `c` and records them sorted: for one txn firing watches in an order a
/// server takes from a hash set (a closed session's ephemerals), which no client may rely on.
fn events_sorted(ctx: &mut Ctx, c: &mut Conn, n: usize) {
    let mark = ctx.lines().len();
    ctx.events(c, n, EVENT_WAIT);
    let mut got: Vec<String> =
        std::iter::from_fn(|| (ctx.lines().len() > mark).then(|| ctx.take_last_line())).flatten().collect();
    got.sort();
    for line in got {
        ctx.note(line);
    }
}

fn sync(path: &str) -> Request {
    Request::Sync(SyncRequest { path: path.into() })
}

mod sc {
    use super::*;

    /// Pins: a create and a setData through a follower are read back on the same member at once,
    /// and on the other follower and the leader after sync; children created through each member.
    pub fn follower_writes(ctx: &mut Ctx) {
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut b = ctx.connect_at("b", F2, LONG);
        let mut l = ctx.connect_at("l", L, LONG);
        let before = synced_read(ctx, &mut b, get_data("/fw", false));
        let before_l = synced_read(ctx, &mut l, exists("/fw", false));
        ctx.call(&mut a, create("/fw", b"one", CreateMode::Persistent));
        ctx.call(&mut a, get_data("/fw", false));
        let before_a = last_line(ctx);
        unsynced_then_synced(ctx, &mut b, get_data("/fw", false), &before);
        unsynced_then_synced(ctx, &mut l, exists("/fw", false), &before_l);
        ctx.call(&mut b, set_data("/fw", b"two", 0));
        ctx.call(&mut b, get_data("/fw", false));
        unsynced_then_synced(ctx, &mut a, get_data("/fw", false), &before_a);
        ctx.call(&mut a, create("/fw/c1", b"", CreateMode::Persistent));
        ctx.call(&mut b, create("/fw/c2", b"", CreateMode::Persistent));
        ctx.call(&mut l, create("/fw/c3", b"", CreateMode::Persistent));
        for c in [&mut a, &mut b, &mut l] {
            synced_read(ctx, c, get_children2("/fw", false));
        }
        ctx.call(&mut b, delete("/fw/c1", -1));
        synced_read(ctx, &mut a, exists("/fw/c1", false));
        synced_read(ctx, &mut l, get_children2("/fw", false));
    }

    /// Pins: data, exist and child watches set on one follower and on the leader fire for writes
    /// through the other follower (type, state, path); they are one-shot; a persistent recursive
    /// watch on a follower sees writes through the leader and the other follower.
    pub fn cross_member_watches(ctx: &mut Ctx) {
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut b = ctx.connect_at("b", F2, LONG);
        let mut l = ctx.connect_at("l", L, LONG);
        ctx.call(&mut a, create("/cw", b"x", CreateMode::Persistent));
        ctx.call(&mut b, sync("/cw"));
        ctx.call(&mut b, get_data("/cw", true));
        ctx.call(&mut b, exists("/cw/n", true));
        ctx.call(&mut b, get_children("/cw", true));
        ctx.call(&mut l, sync("/cw"));
        ctx.call(&mut l, exists("/cw", true));
        ctx.call(&mut l, get_children2("/cw", true));
        ctx.call(&mut a, set_data("/cw", b"y", -1));
        ctx.events(&mut b, 1, EVENT_WAIT);
        ctx.events(&mut l, 1, EVENT_WAIT);
        ctx.call(&mut a, create("/cw/n", b"", CreateMode::Persistent));
        ctx.events(&mut b, 2, EVENT_WAIT);
        ctx.events(&mut l, 1, EVENT_WAIT);
        // One-shot: nothing more for b and l. Their sync is a barrier: a member sends a watch
        // event for a write before the answer to a sync that follows it.
        ctx.call(&mut a, set_data("/cw", b"z", -1));
        ctx.call(&mut a, create("/cw/m", b"", CreateMode::Persistent));
        ctx.call(&mut b, sync("/cw"));
        ctx.call(&mut l, sync("/cw"));
        ctx.call(&mut b, add_watch("/cw", AddWatchMode::PersistentRecursive));
        ctx.call(&mut a, create("/cw/n/deep", b"", CreateMode::Persistent));
        ctx.events(&mut b, 1, EVENT_WAIT);
        ctx.call(&mut l, set_data("/cw/n/deep", b"d", -1));
        ctx.events(&mut b, 1, EVENT_WAIT);
        ctx.call(&mut a, delete("/cw/n/deep", -1));
        ctx.events(&mut b, 1, EVENT_WAIT);
        ctx.call(&mut b, remove_watches("/cw", 3));
        ctx.call(&mut l, set_data("/cw", b"w", -1));
        ctx.call(&mut b, sync("/cw"));
    }

    /// Pins: a session's ephemerals, created through a follower, show it as owner on every
    /// member; closing it (through that follower) deletes them everywhere and fires the watches
    /// set on the other members.
    pub fn ephemerals_vanish_everywhere(ctx: &mut Ctx) {
        let mut l = ctx.connect_at("l", L, LONG);
        let mut e = ctx.connect_at("e", F1, LONG);
        let mut w = ctx.connect_at("w", F2, LONG);
        ctx.call(&mut l, create("/eph", b"", CreateMode::Persistent));
        ctx.call(&mut e, create("/eph/e1", b"", CreateMode::Ephemeral));
        ctx.call(&mut e, create("/eph/s-", b"", CreateMode::EphemeralSequential));
        ctx.call(&mut e, create("/eph/s-", b"", CreateMode::EphemeralSequential));
        ctx.call(&mut e, Request::GetEphemerals(GetEphemeralsRequest { prefix_path: "/eph".into() }));
        ctx.call(&mut w, sync("/eph"));
        ctx.call(&mut w, get_children2("/eph", true));
        ctx.call(&mut w, exists("/eph/e1", true));
        ctx.call(&mut l, sync("/eph"));
        ctx.call(&mut l, get_data("/eph/s-0000000002", true));
        ctx.call(&mut l, Request::GetEphemerals(GetEphemeralsRequest { prefix_path: "/eph".into() }));
        ctx.close_session(e);
        events_sorted(ctx, &mut w, 2);
        ctx.events(&mut l, 1, EVENT_WAIT);
        synced_read(ctx, &mut w, get_children2("/eph", false));
        synced_read(ctx, &mut l, get_children2("/eph", false));
        let mut r = ctx.connect_at("r", F1, LONG);
        synced_read(ctx, &mut r, get_children2("/eph", false));
    }

    /// Pins: sequence numbers for creates through the leader and both followers interleaved,
    /// persistent and ephemeral, across deletes; every member lists the same children.
    pub fn sequential_across_members(ctx: &mut Ctx) {
        let mut l = ctx.connect_at("l", L, LONG);
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut b = ctx.connect_at("b", F2, LONG);
        ctx.call(&mut l, create("/sq", b"", CreateMode::Persistent));
        for _ in 0..2 {
            for c in [&mut l, &mut a, &mut b] {
                ctx.call(c, create("/sq/n-", b"", CreateMode::PersistentSequential));
            }
        }
        ctx.call(&mut b, create("/sq/e-", b"", CreateMode::EphemeralSequential));
        ctx.call(&mut a, delete("/sq/n-0000000004", -1));
        ctx.call(&mut l, create("/sq/n-", b"", CreateMode::PersistentSequential));
        ctx.call(&mut a, create2("/sq/n-", b"", CreateMode::PersistentSequential.code()));
        for c in [&mut l, &mut a, &mut b] {
            synced_read(ctx, c, get_children2("/sq", false));
        }
    }

    /// Pins: a session moves from a follower to the other follower (same id and password, its
    /// last zxid): it keeps its ephemeral; the old connection is refused writes; setWatches on
    /// the new member re-registers the watches (one for a change made while moving fires at once).
    /// Then on to the leader and back to a follower: each connection left behind (a follower's,
    /// the leader's own) is refused writes; but closeSession through one is not refused.
    pub fn session_moves(ctx: &mut Ctx) {
        let mut l = ctx.connect_at("l", L, LONG);
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut c = ctx.connect_at("c", F2, LONG);
        ctx.call(&mut a, create("/mv", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/mv/d", b"d0", CreateMode::Persistent));
        ctx.call(&mut a, create("/mv/eph", b"", CreateMode::Ephemeral));
        ctx.call(&mut a, get_data("/mv/d", true));
        ctx.call(&mut a, exists("/mv/none", true));
        ctx.call(&mut a, get_children("/mv", true));
        let rel = ctx.last_zxid(&mut a);
        // F2 has a's writes once its own sync returns: a reconnect with a last zxid the member
        // has not seen would be refused.
        ctx.call(&mut c, sync("/"));
        ctx.at = F2;
        let mut a2 = ctx.reconnect("a2", &a, LONG, rel);
        ctx.call(&mut a2, get_children2("/mv", false));
        // The connection left behind still reads (reads are answered where they arrive).
        ctx.call(&mut a, get_data("/mv/d", false));
        ctx.call(&mut a, set_data("/mv/d", b"old", -1));
        ctx.closed_within(&mut a, Duration::from_secs(3));
        drop(a);
        // A change while the watches are not registered anywhere.
        ctx.call(&mut l, set_data("/mv/d", b"d1", -1));
        ctx.call(&mut a2, sync("/"));
        let sw = SetWatches {
            relative_zxid: rel,
            data_watches: vec!["/mv/d".into()],
            exist_watches: vec!["/mv/none".into()],
            child_watches: vec!["/mv".into()],
        };
        // The data watch fires at once (before setWatches is answered): /mv/d changed after `rel`.
        ctx.call_as(&mut a2, xid::SET_WATCHES, OpCode::SetWatches.code(), &Request::SetWatches(sw));
        ctx.call(&mut l, create("/mv/none", b"", CreateMode::Persistent));
        ctx.events(&mut a2, 2, EVENT_WAIT);
        synced_read(ctx, &mut l, exists("/mv/eph", false));
        // On to the leader: the follower left behind has the session's write refused.
        let rel = ctx.last_zxid(&mut a2);
        ctx.at = L;
        let mut a3 = ctx.reconnect("a3", &a2, LONG, rel);
        ctx.call(&mut a2, set_data("/mv/d", b"stale2", -1));
        ctx.closed_within(&mut a2, Duration::from_secs(3));
        drop(a2);
        // Back to a follower: the leader's own connection left behind is refused writes too.
        let rel = ctx.last_zxid(&mut a3);
        let mut r = ctx.connect_at("r", F1, LONG);
        ctx.call(&mut r, sync("/"));
        ctx.at = F1;
        let mut a4 = ctx.reconnect("a4", &a3, LONG, rel);
        ctx.call(&mut a3, set_data("/mv/d", b"stale3", -1));
        ctx.closed_within(&mut a3, Duration::from_secs(3));
        drop(a3);
        ctx.call(&mut a4, set_data("/mv/d", b"d2", -1));
        // closeSession is not refused, whichever connection it comes from (a server's session
        // expiry closes sessions it does not own): the stale one ends the session.
        let rel = ctx.last_zxid(&mut a4);
        ctx.call(&mut c, sync("/"));
        ctx.at = F2;
        let mut a5 = ctx.reconnect("a5", &a4, LONG, rel);
        ctx.call(&mut a4, Request::CloseSession);
        ctx.closed_within(&mut a4, Duration::from_secs(5));
        ctx.closed_within(&mut a5, Duration::from_secs(5));
        synced_read(ctx, &mut l, get_children2("/mv", false));
        synced_read(ctx, &mut c, get_children2("/mv", false));
    }

    /// Pins: a session on a follower whose client goes silent expires (the leader decides): its
    /// ephemeral vanishes on every member, firing the watches set on another member; resuming
    /// it afterwards on another member is refused.
    pub fn expiry_across_members(ctx: &mut Ctx) {
        let mut l = ctx.connect_at("l", L, LONG);
        let mut w = ctx.connect_at("w", F2, LONG);
        // The smallest timeout (two ticks): it expires soon after its client goes silent.
        let mut e = ctx.connect_at("e", F1, 1_000);
        ctx.call(&mut l, create("/ex", b"", CreateMode::Persistent));
        ctx.call(&mut e, create("/ex/e", b"", CreateMode::Ephemeral));
        ctx.call(&mut e, create("/ex/s-", b"", CreateMode::EphemeralSequential));
        ctx.call(&mut w, sync("/ex"));
        ctx.call(&mut w, exists("/ex/e", true));
        ctx.call(&mut w, get_children2("/ex", true));
        let rel = ctx.last_zxid(&mut e);
        let (id, passwd) = (e.session_id, e.passwd.clone());
        drop(e);
        events_sorted(ctx, &mut w, 2);
        synced_read(ctx, &mut l, get_children2("/ex", false));
        let req = ConnectRequest {
            time_out: 1_000,
            session_id: id,
            passwd,
            last_zxid_seen: rel,
            read_only: Some(false),
            ..Default::default()
        };
        ctx.at = F2;
        ctx.handshake("e2", &req);
    }

    /// Pins: conditional setData, delete, setACL and multi check with versions made stale by a
    /// write through another member: the leader checks against its latest state.
    pub fn stale_versions(ctx: &mut Ctx) {
        let mut l = ctx.connect_at("l", L, LONG);
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut b = ctx.connect_at("b", F2, LONG);
        ctx.call(&mut l, create("/cv", b"0", CreateMode::Persistent));
        ctx.call(&mut a, set_data("/cv", b"1", 0));
        ctx.call(&mut b, set_data("/cv", b"stale", 0));
        ctx.call(&mut b, delete("/cv", 0));
        ctx.call(&mut a, set_acl("/cv", open_acl(), 0));
        ctx.call(&mut b, set_acl("/cv", open_acl(), 0));
        ctx.call(&mut b, Request::Multi(vec![check("/cv", 0), set_data("/cv", b"m", -1)]));
        ctx.call(&mut b, Request::Multi(vec![check("/cv", 1), set_data("/cv", b"m", 1)]));
        ctx.call(&mut a, delete("/cv", 1));
        ctx.call(&mut l, set_data("/cv", b"l", 1));
        ctx.call(&mut a, delete("/cv", 3));
        synced_read(ctx, &mut b, exists("/cv", false));
    }

    /// Pins: a multi through a follower with a failing op (every result, nothing applied on any
    /// member); a successful one; multiRead through the leader.
    pub fn multi_through_follower(ctx: &mut Ctx) {
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut b = ctx.connect_at("b", F2, LONG);
        let mut l = ctx.connect_at("l", L, LONG);
        ctx.call(&mut a, create("/mu", b"", CreateMode::Persistent));
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/mu/a", b"", CreateMode::Persistent),
                set_data("/mu", b"x", 5),
                create("/mu/b", b"", CreateMode::Persistent),
            ]),
        );
        ctx.call(
            &mut a,
            Request::Multi(vec![create("/mu/a", b"", CreateMode::Persistent), delete("/mu/none", -1)]),
        );
        synced_read(ctx, &mut b, get_children2("/mu", false));
        ctx.call(
            &mut b,
            Request::Multi(vec![
                create("/mu/a", b"", CreateMode::Persistent),
                create("/mu/s-", b"", CreateMode::PersistentSequential),
                create2("/mu/e", b"", CreateMode::Ephemeral.code()),
                set_data("/mu", b"x", 0),
                check("/mu", 1),
                delete("/mu/a", -1),
            ]),
        );
        synced_read(ctx, &mut a, get_children2("/mu", false));
        ctx.call(&mut l, sync("/mu"));
        ctx.call(
            &mut l,
            Request::MultiRead(vec![
                get_children("/mu", false),
                get_data("/mu", false),
                get_data("/mu/none", false),
            ]),
        );
    }

    /// Pins: errors for writes through followers: bad paths, /zookeeper, invalid ACLs, missing
    /// parents, and NOAUTH on another member for a node created with a digest ACL.
    pub fn errors_through_followers(ctx: &mut Ctx) {
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut b = ctx.connect_at("b", F2, LONG);
        for (i, path) in ["a", "/er/", "/er//x", "/er/.", ""].into_iter().enumerate() {
            // A fresh connection each: a server may close one over a bad path.
            let mut c = ctx.connect_at(&format!("p{i}"), F1 + i % 2, LONG);
            ctx.call(&mut c, create(path, b"", CreateMode::Persistent));
            ctx.call(&mut c, set_data(path, b"", -1));
        }
        ctx.call(&mut a, create("/er/missing/x", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/zookeeper/x", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_container("/er-container"));
        ctx.call(&mut b, create_ttl("/er-ttl", 5, 1000));
        ctx.call(&mut b, create2("/er-ttl2", b"", 5));
        ctx.call(&mut b, delete("/zookeeper/config", -1));
        ctx.call(&mut b, delete("/zookeeper", -1));
        ctx.call(&mut a, create_acl("/er", Some(b""), vec![], 0));
        ctx.call(&mut b, create_acl("/er", Some(b""), acl(31, "foo", "bar"), 0));
        ctx.call(&mut a, create_acl("/er", Some(b""), acl(31, "auth", ""), 0));
        ctx.auth(&mut a, "digest", b"alice:pw1");
        ctx.call(&mut a, create_acl("/er", Some(b"secret"), acl(31, "auth", ""), 0));
        ctx.call(&mut b, sync("/er"));
        ctx.call(&mut b, get_data("/er", false));
        ctx.call(&mut b, set_data("/er", b"x", -1));
        ctx.call(&mut b, create("/er/c", b"", CreateMode::Persistent));
        ctx.call(&mut b, get_acl("/er"));
        ctx.auth(&mut b, "digest", b"alice:pw1");
        ctx.call(&mut b, set_data("/er", b"x", 0));
        synced_read(ctx, &mut a, get_data("/er", false));
    }

    /// Pins: reconfig through a follower and the leader while reconfig is disabled (each form:
    /// incremental join, leave, whole new membership); /zookeeper/config read, its ACL, and a
    /// write to it.
    pub fn reconfig_and_config(ctx: &mut Ctx) {
        let mut a = ctx.connect_at("a", F1, LONG);
        let mut l = ctx.connect_at("l", L, LONG);
        let forms = [
            (Some("server.4=127.0.0.1:1:2;3"), None, None),
            (None, Some("3"), None),
            (None, None, Some("server.1=127.0.0.1:1:2;3")),
        ];
        for c in [&mut a, &mut l] {
            for (join, leave, members) in forms {
                let req = Request::Reconfig(ReconfigRequest {
                    joining_servers: join.map(String::from),
                    leaving_servers: leave.map(String::from),
                    new_members: members.map(String::from),
                    cur_config_id: -1,
                });
                ctx.call(c, req);
            }
        }
        for c in [&mut a, &mut l] {
            let got = ctx.call(c, get_data("/zookeeper/config", false));
            if let Some((h, body)) = got.filter(|(h, _)| h.err == 0) {
                let _ = h;
                let d: GetDataResponse = zk_proto::jute::from_bytes(body).expect("getData reply");
                let text = String::from_utf8_lossy(d.data.as_deref().unwrap_or_default()).into_owned();
                ctx.note(format!("config data: {text:?}"));
            }
            ctx.call(c, get_acl("/zookeeper/config"));
            ctx.call(c, exists("/zookeeper/config", false));
        }
        ctx.call(&mut a, set_data("/zookeeper/config", b"x", -1));
        ctx.call(&mut l, set_data("/zookeeper/config", b"x", -1));
    }
}
