//! Apache's own command-line clients, unchanged, given all three members of an ensemble, carry on
//! across kill -9 of the leader: zkCli.sh (Java) and cli_mt (C), each driven one command at a time
//! on its stdin. Before the kill: an ephemeral created and a data watch set. After it: the client
//! reconnects by itself with the same session (or, on a zkrs follower, is kept connected through
//! the election without seeing a disconnection), whose ephemeral is still there (same owner, also
//! seen by another client), its watch fires for a write through another member, and further
//! commands succeed.
//!
//! Each scenario runs on an Apache ensemble first, which proves its expectations (the markers it
//! waits for are what Apache's clients print against Apache's servers), then on a zkrs ensemble;
//! the two runs' transcripts of what happened must be equal. `ZKRS_REAL_ONLY=apache` (or `zkrs`)
//! runs one half only.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use std::process::Command;
use std::time::Duration;
use support::ensemble::{Ensemble, Kind};
use support::interactive::Interactive;
use zk_proto::*;

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
const CLI_MT: &str = "/usr/lib/zookeeper/bin/cli_mt";
/// How long one command may take to be answered.
const STEP: Duration = Duration::from_secs(20);
/// How long the client may take to find the new leader's ensemble after the kill.
const FAILOVER: Duration = Duration::from_secs(60);

/// What one client prints, for the steps of the scenario.
struct Dialect {
    /// Which client (for messages).
    name: &'static str,
    /// The program.
    program: &'static str,
    /// Debian package that provides it.
    package: &'static str,
    /// Printed each time the session is (re)connected.
    connected: &'static str,
    /// Printed when the connection is lost.
    disconnected: &'static str,
    /// Creates the ephemeral /eph, and what its success prints.
    create_eph: (&'static str, &'static str),
    /// Reads /w with a watch, and what its success prints.
    watch_w: (&'static str, &'static str),
    /// Shows /eph's stat (with its ephemeralOwner line).
    stat_eph: &'static str,
    /// Creates /after, and what its success prints.
    create_after: (&'static str, &'static str),
    /// Printed when the watch on /w fires for a data change.
    fired: &'static str,
    /// Lists /, and how the answer's first line starts.
    list_root: (&'static str, &'static str),
    /// Ends the session.
    quit: &'static str,
    /// Lines kept in the transcript as the client's event history (prefixes).
    event_prefix: &'static str,
}

const ZKCLI_DIALECT: Dialect = Dialect {
    name: "zkCli.sh",
    program: ZKCLI,
    package: "zookeeper",
    connected: "WatchedEvent state:SyncConnected type:None path:null",
    disconnected: "WatchedEvent state:Disconnected type:None path:null",
    create_eph: ("create -e /eph e", "Created /eph"),
    watch_w: ("get -w /w", "\nw0\n"),
    stat_eph: "stat /eph",
    create_after: ("create /after a", "Created /after"),
    fired: "WatchedEvent state:SyncConnected type:NodeDataChanged path:/w",
    list_root: ("ls /", "["),
    quit: "quit",
    event_prefix: "WatchedEvent ",
};

const CLI_MT_DIALECT: Dialect = Dialect {
    name: "cli_mt",
    program: CLI_MT,
    package: "zookeeper-bin",
    connected: "Watcher SESSION_EVENT state = CONNECTED_STATE",
    disconnected: "Watcher SESSION_EVENT state = CONNECTING_STATE",
    create_eph: ("create +e /eph", "[/eph]: rc = 0"),
    watch_w: ("get /w", "/w: rc = 0"),
    stat_eph: "get /eph",
    create_after: ("create /after", "[/after]: rc = 0"),
    fired: "Watcher CHANGED_EVENT state = CONNECTED_STATE for path /w",
    list_root: ("ls /", "/: rc = 0"),
    quit: "quit",
    event_prefix: "Watcher ",
};

#[test]
fn zkcli_carries_on_across_the_leaders_death() {
    compare_on_both(&ZKCLI_DIALECT);
}

#[test]
fn cli_mt_carries_on_across_the_leaders_death() {
    compare_on_both(&CLI_MT_DIALECT);
}

/// Runs the scenario with `d`'s client on an Apache ensemble, then on a zkrs ensemble, and
/// compares what happened.
fn compare_on_both(d: &Dialect) {
    assert!(
        std::path::Path::new(d.program).exists(),
        "{} is missing: install Debian's {} (the README's test command does)",
        d.program,
        d.package
    );
    let only = std::env::var("ZKRS_REAL_ONLY").ok();
    let runs: Vec<(Kind, Vec<String>)> = [(Kind::Apache, "apache"), (Kind::Zkrs, "zkrs")]
        .into_iter()
        .filter(|(_, label)| only.as_deref().is_none_or(|o| o.is_empty() || o == *label))
        .map(|(kind, _)| (kind, across_leader_death(kind, d)))
        .collect();
    if let [(_, apache), (_, zkrs)] = &runs[..] {
        assert_eq!(apache, zkrs, "{}: the zkrs ensemble's run differs from the Apache ensemble's", d.name);
    }
}

/// The ephemeralOwner lines the client has printed, values as lowercase hex without `0x`.
fn owners(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ephemeralOwner = "))
        .map(|v| v.trim_start_matches("0x").to_lowercase())
        .collect()
}

/// The children of / in the client's last answer to `ls /`, sorted (servers list them in a
/// set's order): zkCli prints them as one `[a, b]` line, cli_mt one per tab-indented line.
fn root_children(output: &str, d: &Dialect) -> Vec<String> {
    // Only whole lines: the output is read as it arrives, and a line cut short ("[after, eph,
    // w, " or "\tzoo") would count a child that is not one.
    let mut lines: Vec<&str> = output.lines().collect();
    if !output.ends_with('\n') {
        lines.pop();
    }
    let start = lines.iter().rposition(|l| l.starts_with(d.list_root.1)).unwrap_or(lines.len());
    let mut v: Vec<String> = if d.list_root.1 == "[" {
        lines.get(start).map_or(vec![], |l| {
            l.trim_matches(|c| c == '[' || c == ']').split(", ").map(str::to_string).collect()
        })
    } else {
        lines[start..]
            .iter()
            .skip(1)
            .take_while(|l| l.starts_with('\t') && !l.contains('='))
            .map(|l| l.trim().to_string())
            .collect()
    };
    v.sort();
    v
}

/// Sends `d.stat_eph` and returns the ephemeralOwner it shows.
fn ask_owner(c: &mut Interactive, d: &Dialect) -> Option<String> {
    let before = owners(&c.output()).len();
    c.send(d.stat_eph);
    if !c.wait_for(STEP, |o| owners(o).len() > before) {
        return None;
    }
    owners(&c.output()).pop()
}

/// The scenario on a fresh ensemble of `kind`; returns the transcript of what happened (the
/// same for any correct ensemble). Fails on any step that does not happen.
fn across_leader_death(kind: Kind, d: &Dialect) -> Vec<String> {
    let mut e = Ensemble::configure(&[kind; 3]);
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    e.wait_mntr(leader, "zk_synced_followers", "2");
    let mut setup = e.client((leader + 1) % 3);
    assert_eq!(setup.create("/w", b"w0", CreateMode::Persistent).err(), ErrorCode::Ok);
    drop(setup.close());

    let hosts: Vec<String> = e.members.iter().map(|m| m.client.to_string()).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(d.program);
    match kind {
        _ if d.program == ZKCLI => {
            cmd.arg("-server").arg(hosts.join(","));
            // Its log goes next to its output, not into the Debian default /var/log.
            cmd.env("ZOO_LOG_DIR", dir.path());
        }
        _ => {
            cmd.arg(hosts.join(","));
        }
    }
    let mut c = Interactive::start(cmd, dir.path(), "client.out");
    let mut t: Vec<String> = Vec::new();
    let fail = |c: &Interactive, e: &Ensemble, what: &str| -> ! {
        panic!("{} on {kind:?}: {what}; client output:\n{}\n{}", d.name, c.output(), e.logs())
    };

    if !c.wait_count(d.connected, 1, STEP) {
        fail(&c, &e, "never connected");
    }
    t.push("connected".into());
    for (cmd, done) in [d.create_eph, d.watch_w] {
        c.send(cmd);
        if !c.wait_for(STEP, |o| o.contains(done)) {
            fail(&c, &e, &format!("`{cmd}` was not answered with {done:?}"));
        }
        t.push(format!("`{cmd}` answered"));
    }
    let Some(owner) = ask_owner(&mut c, d) else { fail(&c, &e, "no ephemeralOwner shown for /eph") };
    t.push(format!("/eph is ephemeral: {}", owner != "0"));

    // Which member the client is on: its session is listed there.
    let on_leader = support::ensemble::four(e.members[leader].client, "cons")
        .is_some_and(|cons| cons.contains(&format!("sid=0x{owner}")));
    e.kill(leader);
    t.push("leader killed".into());
    let reconnects = kind == Kind::Apache || on_leader;
    if !reconnects {
        // A zkrs follower keeps an idle client's connection through the election (a deliberate
        // difference: Apache's close them all, and the client reconnects): no disconnection
        // is seen, before or after the new leader serves.
        let new_leader = e.wait_for_leader();
        assert_ne!(new_leader, leader);
        std::thread::sleep(Duration::from_secs(1));
        if c.output().contains(d.disconnected) {
            fail(&c, &e, "a client of a follower lost its connection when the leader died");
        }
    } else {
        if !c.wait_count(d.disconnected, 1, FAILOVER) {
            fail(&c, &e, "never saw the connection lost");
        }
        if !c.wait_count(d.connected, 2, FAILOVER) {
            fail(&c, &e, "never reconnected");
        }
    }
    t.push("carried on: reconnected, or kept by a zkrs follower".into());
    let new_leader = e.wait_for_leader();
    assert_ne!(new_leader, leader);

    // The session and its ephemeral survived: the same owner, seen by the client and by another
    // client on another member.
    let Some(after) = ask_owner(&mut c, d) else {
        fail(&c, &e, "no ephemeralOwner for /eph after the failover")
    };
    t.push(format!("/eph owner unchanged: {}", after == owner));
    let mut other = e.client(new_leader);
    let r = other.exists("/eph", false);
    assert_eq!(r.err(), ErrorCode::Ok, "/eph is gone after the failover");
    let st: Stat = r.decode();
    t.push(format!(
        "/eph owner seen by another client is the client's: {}",
        format!("{:x}", st.ephemeral_owner) == owner
    ));

    c.send(d.create_after.0);
    if !c.wait_for(STEP, |o| o.contains(d.create_after.1)) {
        fail(&c, &e, &format!("`{}` after the failover did not succeed", d.create_after.0));
    }
    t.push(format!("`{}` succeeded", d.create_after.0));
    // The watch set before the kill fires for a write through another member.
    assert_eq!(other.set_data("/w", b"w1", -1).err(), ErrorCode::Ok);
    if !c.wait_for(STEP, |o| o.contains(d.fired)) {
        fail(&c, &e, "the watch on /w did not fire");
    }
    t.push("watch on /w fired".into());
    c.send(d.list_root.0);
    if !c.wait_for(STEP, |o| o.lines().any(|l| l.starts_with(d.list_root.1))) {
        fail(&c, &e, "ls / after the failover was not answered");
    }
    // cli_mt prints the children after the answer's first line: wait for all four of them.
    if !c.wait_for(STEP, |o| root_children(o, d).len() >= 4) {
        fail(&c, &e, "ls / after the failover did not list four children");
    }
    t.push(format!("`{}` answered: {:?}", d.list_root.0, root_children(&c.output(), d)));
    c.send(d.quit);
    let ended = c.finish(STEP);
    let (code, output) = (ended.code, ended.output);
    t.push(format!("exit {code:?}"));
    // What the client reported, in order: connection states and the watch. zkCli.sh's own
    // "state:Closed" at quit is left out: its event thread prints it while the JVM exits
    // (`System.exit` right after `close()`), so it shows or not by the client's timing alone, on
    // either server (seen missing once in a loaded run against zkrs).
    let mut events: Vec<String> = output
        .lines()
        .filter(|l| l.starts_with(d.event_prefix) && !l.contains("state:Closed"))
        .map(str::to_string)
        .collect();
    // The connection's loss and return, which a kept client does not go through: checked here
    // and left out, so that both kinds of run report the same history.
    let ended_badly = |what: &str| -> ! { panic!("{} on {kind:?}: {what}:\n{output}\n{}", d.name, e.logs()) };
    if reconnects {
        let Some(lost) = events.iter().position(|l| l.contains(d.disconnected)) else {
            ended_badly("no disconnection in the client's events")
        };
        events.remove(lost);
        let Some(back) = events[lost..].iter().position(|l| l.contains(d.connected)) else {
            ended_badly("no reconnection after the disconnection in the client's events")
        };
        events.remove(lost + back);
    } else if events.iter().any(|l| l.contains(d.disconnected)) {
        ended_badly("a kept client reported a disconnection");
    }
    t.extend(events);
    t.push(format!("new sessions reported: {}", output.matches("Got a new session id").count()));
    let listed = format!("`{}` answered: {:?}", d.list_root.0, ["after", "eph", "w", "zookeeper"]);
    for want in [
        listed.as_str(),
        "/eph is ephemeral: true",
        "/eph owner unchanged: true",
        "/eph owner seen by another client is the client's: true",
    ] {
        assert!(t.iter().any(|l| l == want), "{} on {kind:?}: not {want:?}\n{t:#?}\n{output}", d.name);
    }
    println!("{} on {kind:?}:\n{}", d.name, t.join("\n"));
    t
}
