//! Apache's own clients, unchanged, against a server: zkCli.sh (Java), cli_mt (C) and kazoo (Python).
//!
//! Every test runs one client scenario against Apache ZooKeeper first, which proves the scenario and
//! its expected transcript right, then against zkrs-server, which is the drop-in claim. Each run starts
//! a fresh server, so zxids are deterministic and appear in the transcripts; times, session ids and
//! log noise are normalised away. `ZKRS_REAL_ONLY=apache` (or `zkrs`) runs one half only.
//!
//! A missing client fails the test with a message naming the package; the README's test command
//! installs them all.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::interactive::{Ended as Finished, Interactive};
use support::*;

const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
const CLI_MT: &str = "/usr/lib/zookeeper/bin/cli_mt";
/// Debian's python, which has python3-kazoo; the `python3` on PATH may be another one.
const PYTHON: &str = "/usr/bin/python3";

/// Upper bound for one client process; a healthy run takes about a second.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long cli_mt may take to answer one command before the scenario is abandoned.
const CLI_MT_STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// The targets selected by `ZKRS_REAL_ONLY` (`apache` or `zkrs`), Apache first.
fn targets() -> Vec<Target> {
    match std::env::var("ZKRS_REAL_ONLY").ok().as_deref() {
        None | Some("") => BOTH.to_vec(),
        Some("apache") => vec![Target::Apache],
        Some("zkrs") => vec![Target::Zkrs],
        Some(other) => panic!("ZKRS_REAL_ONLY must be `apache` or `zkrs`, not {other:?}"),
    }
}

/// Fails clearly when a client program is missing, naming the package that provides it.
fn require(path: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: install Debian's {package} (the README's test command does)"
    );
}

/// Compares a normalised transcript with the expected one, line by line, with a readable failure.
fn check(target: Target, scenario: &str, got: &str, expected: &str) {
    if got.trim_end() == expected.trim_end() {
        return;
    }
    let g: Vec<&str> = got.trim_end().lines().collect();
    let e: Vec<&str> = expected.trim_end().lines().collect();
    let first = g.iter().zip(&e).position(|(a, b)| a != b).unwrap_or(g.len().min(e.len()));
    let hint = match target {
        Target::Apache => "Apache differs: the scenario or its expected transcript is wrong",
        Target::Zkrs => "zkrs differs from the transcript Apache produces",
    };
    panic!(
        "{scenario} against {target:?}: {hint}.\nfirst difference at line {}:\n  expected: {:?}\n  got:      {:?}\n\
         ---- full transcript got ----\n{got}\n---- end ----",
        first + 1,
        e.get(first).copied().unwrap_or("<end>"),
        g.get(first).copied().unwrap_or("<end>"),
    );
}

/// Runs `cmd` with `stdin` fed at once and closed, collecting interleaved output.
fn run(cmd: Command, stdin: &[u8], dir: &Path, name: &str) -> Finished {
    let mut c = Interactive::start(cmd, dir, name);
    c.send_bytes(stdin);
    c.finish(CLIENT_TIMEOUT)
}

// ---------------------------------------------------------------------------------------------
// zkCli.sh

/// Runs zkCli.sh against `server`: `args` after `-server host:port`, `stdin` piped in.
fn zkcli(server: &ServerProc, args: &[&str], stdin: &str, name: &str) -> Finished {
    let mut cmd = Command::new(ZKCLI);
    cmd.arg("-server").arg(server.connect_string()).args(args);
    // The client writes its log next to the server's, not into the Debian default /var/log.
    cmd.env("ZOO_LOG_DIR", server.dir.path());
    let f = run(cmd, stdin.as_bytes(), server.dir.path(), name);
    assert!(!f.timed_out, "zkCli.sh {args:?} did not finish in {CLIENT_TIMEOUT:?}; output:\n{}", f.output);
    f
}

/// Keeps the zkCli output lines that matter. Watch notifications are printed by the client's event
/// thread and race with command output, so they are collected into a separate section in arrival
/// order. Times become `<time>`, a non-zero ephemeralOwner `<session>`; bracketed lists are sorted
/// (getEphemerals prints the server's set in its own order).
fn normalize_zkcli(raw: &str) -> String {
    let mut lines = Vec::new();
    let mut events = Vec::new();
    for line in raw.lines() {
        let line = line.trim_end();
        if line.is_empty()
            || line.starts_with("SLF4J:")
            || line == "WATCHER::"
            || line.starts_with("Connecting to ")
            || line == "Welcome to ZooKeeper!"
            || line == "JLine support is disabled"
        {
            continue;
        }
        if line.starts_with("WatchedEvent ") {
            events.push(line.to_string());
        } else if line.starts_with("ctime = ") || line.starts_with("mtime = ") {
            lines.push(format!("{} = <time>", &line[..5]));
        } else if line.starts_with("ephemeralOwner = ") && line != "ephemeralOwner = 0x0" {
            lines.push("ephemeralOwner = <session>".to_string());
        } else if line.starts_with('[') && line.ends_with(']') {
            let mut items: Vec<&str> = line[1..line.len() - 1].split(", ").collect();
            items.sort_unstable();
            lines.push(format!("[{}]", items.join(", ")));
        } else {
            lines.push(line.to_string());
        }
    }
    lines.push("--- events".to_string());
    lines.extend(events);
    lines.join("\n")
}

/// One-shot invocations, each its own JVM and session: output and exit code per command.
#[test]
fn zkcli_one_shot_commands() {
    require(ZKCLI, "zookeeper");
    let steps: &[&[&str]] = &[
        &["create", "/one", "first"],
        &["create", "-e", "/one/eph", "gone-after-exit"],
        &["get", "-s", "/one"],
        &["create", "/one", "again"],
        &["set", "-v", "3", "/one", "stale"],
        &["get", "/missing"],
        &["ls", "-R", "/"],
        &["deleteall", "/one"],
        &["stat", "/one"],
    ];
    for target in targets() {
        let server = start(target, "");
        let mut transcript = String::new();
        for (i, args) in steps.iter().enumerate() {
            let f = zkcli(&server, args, "", &format!("zkcli-one-shot-{i}.out"));
            transcript.push_str(&format!("$ {} -> exit {:?}\n", args.join(" "), f.code));
            transcript.push_str(&normalize_zkcli(&f.output));
            transcript.push('\n');
        }
        check(target, "zkCli.sh one-shot commands", &transcript, ZKCLI_ONE_SHOT);
    }
}

const ZKCLI_ONE_SHOT: &str = "\
$ create /one first -> exit Some(0)
Created /one
--- events
WatchedEvent state:SyncConnected type:None path:null
$ create -e /one/eph gone-after-exit -> exit Some(0)
Created /one/eph
--- events
WatchedEvent state:SyncConnected type:None path:null
$ get -s /one -> exit Some(0)
first
cZxid = 0x2
ctime = <time>
mZxid = 0x2
mtime = <time>
pZxid = 0x4
cversion = 1
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 1
--- events
WatchedEvent state:SyncConnected type:None path:null
$ create /one again -> exit Some(1)
Node already exists: /one
--- events
WatchedEvent state:SyncConnected type:None path:null
$ set -v 3 /one stale -> exit Some(1)
version No is not valid : /one
--- events
WatchedEvent state:SyncConnected type:None path:null
$ get /missing -> exit Some(1)
Node does not exist: /missing
--- events
WatchedEvent state:SyncConnected type:None path:null
$ ls -R / -> exit Some(0)
/
/one
/zookeeper
/one/eph
/zookeeper/config
/zookeeper/quota
--- events
WatchedEvent state:SyncConnected type:None path:null
$ deleteall /one -> exit Some(0)
--- events
WatchedEvent state:SyncConnected type:None path:null
$ stat /one -> exit Some(1)
Node does not exist: /one
--- events
WatchedEvent state:SyncConnected type:None path:null
";

/// A piped interactive session: every znode command, ACLs and auth, and the error messages.
#[test]
fn zkcli_piped_session() {
    zkcli_script_on_both(
        include_str!("clients/zkcli_session.txt"),
        "extendedTypesEnabled=true",
        "session",
        ZKCLI_SESSION,
    );
}

/// Pipes `script` into zkCli.sh against each target (started with `extra` zoo.cfg lines) and checks
/// the normalised transcript against `expected`.
fn zkcli_script_on_both(script: &str, extra: &str, what: &str, expected: &str) {
    require(ZKCLI, "zookeeper");
    for target in targets() {
        let server = start(target, extra);
        let f = zkcli(&server, &[], script, &format!("zkcli-{what}.out"));
        let transcript = format!("exit {:?}\n{}", f.code, normalize_zkcli(&f.output));
        check(target, &format!("zkCli.sh {what}"), &transcript, expected);
    }
}

const ZKCLI_SESSION: &str = "\
exit Some(0)
Created /app
Created /app/cfg
Created /app/eph
Created /app/seq-0000000002
Created /app/seq-0000000003
Created /app/eseq-0000000004
Created /cont
Created /ttl
Node already exists: /app/cfg
Node does not exist: /nope/child
Ephemerals cannot have children: /app/eph/child
v1
v1
cZxid = 0x3
ctime = <time>
mZxid = 0x3
mtime = <time>
pZxid = 0x3
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 2
numChildren = 0
Node does not exist: /nope
cZxid = 0x3
ctime = <time>
mZxid = 0xe
mtime = <time>
pZxid = 0x3
cversion = 0
dataVersion = 2
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 2
numChildren = 0
version No is not valid : /app/cfg
Node does not exist: /nope
cZxid = 0x3
ctime = <time>
mZxid = 0x10
mtime = <time>
pZxid = 0x3
cversion = 0
dataVersion = 3
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 2
numChildren = 0
cZxid = 0x4
ctime = <time>
mZxid = 0x4
mtime = <time>
pZxid = 0x4
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = <session>
dataLength = 1
numChildren = 0
cZxid = 0x8
ctime = <time>
mZxid = 0x8
mtime = <time>
pZxid = 0x8
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 0
numChildren = 0
cZxid = 0x9
ctime = <time>
mZxid = 0x9
mtime = <time>
pZxid = 0x9
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 1
numChildren = 0
Node does not exist: /nope
[cfg, eph, eseq-0000000004, seq-0000000002, seq-0000000003]
/app
/app/cfg
/app/eph
/app/eseq-0000000004
/app/seq-0000000002
/app/seq-0000000003
[cfg, eph, eseq-0000000004, seq-0000000002, seq-0000000003]
cZxid = 0x2
ctime = <time>
mZxid = 0x2
mtime = <time>
pZxid = 0x7
cversion = 5
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 0
numChildren = 5
Node does not exist: /nope
[/app/eph, /app/eseq-0000000004]
[/app/eph, /app/eseq-0000000004]
5
11
Sync is OK
Auth scheme: User
ip: 127.0.0.1
Auth scheme: User
digest: alice
ip: 127.0.0.1
Created /sec
'digest,'alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=
: cdrwa
'digest,'alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=
: cdrwa
cZxid = 0x12
ctime = <time>
mZxid = 0x12
mtime = <time>
pZxid = 0x12
cversion = 0
dataVersion = 0
aclVersion = 1
ephemeralOwner = 0x0
dataLength = 1
numChildren = 0
Insufficient permission : /sec
Insufficient permission : /sec
'world,'anyone
: r
Insufficient permission : /app/x
Insufficient permission : /app/cfg
Node not empty: /app
[app, sec, zookeeper]
--- events
WatchedEvent state:SyncConnected type:None path:null
WatchedEvent state:Closed type:None path:null
";

/// Watches from zkCli: addWatch (persistent and recursive), get -w, ls -w, stat -w, removewatches.
#[test]
fn zkcli_watches() {
    zkcli_script_on_both(include_str!("clients/zkcli_watches.txt"), "", "watches", ZKCLI_WATCHES);
}

const ZKCLI_WATCHES: &str = "\
exit Some(0)
Created /w
Created /w/c
Created /p
Created /p/k
Created /g
g
Created /l
[]
Created /l/a
Created /l/b
Node does not exist: /nonode
Created /nonode
Created /rmw
r
KeeperErrorCode = No such watcher for /rmw
Sync is OK
[g, l, nonode, p, rmw, zookeeper]
--- events
WatchedEvent state:SyncConnected type:None path:null
WatchedEvent state:SyncConnected type:NodeDataChanged path:/w
WatchedEvent state:SyncConnected type:NodeCreated path:/w/c
WatchedEvent state:SyncConnected type:NodeDataChanged path:/w/c
WatchedEvent state:SyncConnected type:NodeDeleted path:/w/c
WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/p
WatchedEvent state:SyncConnected type:NodeDataChanged path:/p
WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/p
WatchedEvent state:SyncConnected type:NodeDataChanged path:/g
WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/l
WatchedEvent state:SyncConnected type:NodeCreated path:/nonode
WatchedEvent state:SyncConnected type:DataWatchRemoved path:/rmw
WatchedEvent state:SyncConnected type:NodeDeleted path:/w
WatchedEvent state:Closed type:None path:null
";

// ---------------------------------------------------------------------------------------------
// cli_mt

/// The C client's lines that matter: times and session ids normalised, `time = N msec` dropped, and
/// runs of child names sorted (cli_mt prints children in the server's order, which is a set's).
fn normalize_cli_mt(raw: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut children: Vec<String> = Vec::new();
    let flush = |lines: &mut Vec<String>, children: &mut Vec<String>| {
        children.sort_unstable();
        lines.append(children);
    };
    for line in raw.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with("time = ") {
            continue;
        }
        // Child names are tab-indented without '='; stat lines always carry one.
        if line.starts_with('\t') && !line.contains('=') {
            children.push(line.to_string());
            continue;
        }
        flush(&mut lines, &mut children);
        let t = line.trim_start();
        let norm = if t.starts_with("ctime = ") || t.starts_with("mtime=") {
            format!("\t{} <time>", &t[..t.find('=').unwrap() + 1])
        } else if line.starts_with("Got a new session id: ") {
            "Got a new session id: <session>".to_string()
        } else if line.starts_with("session Id = ") {
            "session Id = <session>".to_string()
        } else if t.starts_with("ephemeralOwner = ") && t != "ephemeralOwner = 0" {
            "\tephemeralOwner = <session>".to_string()
        } else {
            line.to_string()
        };
        lines.push(norm);
    }
    flush(&mut lines, &mut children);
    lines.join("\n")
}

/// Reads what a running client has written so far.
fn read_so_far(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until `done` holds for the client's output, or the step timeout passes.
fn wait_output(path: &Path, done: impl Fn(&str) -> bool) -> bool {
    let deadline = Instant::now() + CLI_MT_STEP_TIMEOUT;
    while Instant::now() < deadline {
        if done(&read_so_far(path)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// How many replies cli_mt has reported: its completion callbacks print `path: rc = N`.
fn replies(out: &str) -> usize {
    out.lines().filter(|l| l.contains(": rc = ")).count()
}

/// Waits until the output stops growing, so a reply's trailing lines are in before the next command's
/// own first line (which cli_mt prints from the main thread, not the completion thread).
fn settle(path: &Path) {
    let mut len = read_so_far(path).len();
    loop {
        std::thread::sleep(Duration::from_millis(40));
        let now = read_so_far(path).len();
        if now == len {
            return;
        }
        len = now;
    }
}

/// Drives cli_mt one command at a time: each command is sent only after the previous one completed,
/// so the transcript's order is the protocol's order (cli_mt prints from its completion thread).
fn cli_mt_session(server: &ServerProc, commands: &[&str]) -> String {
    let mut cmd = Command::new(CLI_MT);
    cmd.arg(server.connect_string());
    let mut child = Interactive::start(cmd, server.dir.path(), "cli_mt.out");
    let path = child.path.clone();
    let mut failure = None;
    if !wait_output(&path, |o| o.contains("Got a new session id")) {
        failure = Some("TIMEOUT waiting for the session".to_string());
    }
    for cmd in commands {
        if failure.is_some() {
            break;
        }
        let before = replies(&read_so_far(&path));
        child.send(cmd);
        // cli_mt runs these synchronously on its main thread (exists prints only an error), so the
        // next command cannot overtake them.
        if matches!(*cmd, "quit" | "myid") || cmd.starts_with("exists ") || cmd.starts_with("wexists ") {
            continue;
        }
        if wait_output(&path, |o| replies(o) > before) {
            settle(&path);
        } else {
            failure = Some(format!("TIMEOUT waiting for `{cmd}` to complete"));
        }
    }
    let Finished { code, output, timed_out } = child.finish(Duration::from_secs(10));
    let mut transcript = normalize_cli_mt(&output);
    if let Some(f) = failure {
        transcript.push_str(&format!("\n{f}"));
    }
    transcript.push_str(&format!("\nexit {code:?} timed_out={timed_out}"));
    transcript
}

/// The C client: create (plain, ephemeral, sequential, create2, container, TTL), get/set, ls/ls2,
/// exists, wexists, one-shot watches from get/ls/exists, delete errors, sync.
#[test]
fn cli_mt_scenario() {
    require(CLI_MT, "zookeeper-bin");
    let commands = [
        "create /cm",
        "create /cm",
        "create +e /cm/e",
        "create +s /cm/s",
        "create2 /cm/c2",
        "create +c /cmc",
        "create +t=600000 /cmttl",
        "get /cm",
        "set /cm hello",
        "get /cm",
        "set /nope x",
        "ls /cm",
        "delete /cm/e",
        "ls2 /cm",
        "exists /cm",
        "exists /zz",
        "wexists /zz",
        "create /zz",
        "delete /zz",
        "delete /nope",
        "delete /cm",
        "sync /",
        "myid",
        "quit",
    ];
    for target in targets() {
        let server = start(target, "extendedTypesEnabled=true");
        let transcript = cli_mt_session(&server, &commands);
        check(target, "cli_mt scenario", &transcript, CLI_MT_EXPECTED);
    }
}

const CLI_MT_EXPECTED: &str = "\
Watcher SESSION_EVENT state = CONNECTED_STATE
Got a new session id: <session>
Creating [/cm] node (mode: 0)
[/cm]: rc = 0
\tname = /cm
Creating [/cm] node (mode: 0)
[/cm]: rc = -110
Creating [/cm/e] node (mode: 1)
[/cm/e]: rc = 0
\tname = /cm/e
Creating [/cm/s] node (mode: 2)
[/cm/s]: rc = 0
\tname = /cm/s0000000001
Creating [/cm/c2] node (mode: 0)
[/cm/c2]: rc = 0
\tname = /cm/c2
\tctime = <time>
\tczxid=6
\tmtime= <time>
\tmzxid=6
\tversion=0\taversion=0
\tephemeralOwner = 0
Creating [/cmc] node (mode: 4)
[/cmc]: rc = 0
\tname = /cmc
Creating [/cmttl] node (mode: 5)
[/cmttl]: rc = 0
\tname = /cmttl
/cm: rc = 0
 value_len = 3
new
Stat:
\tctime = <time>
\tczxid=2
\tmtime= <time>
\tmzxid=2
\tversion=0\taversion=0
\tephemeralOwner = 0
Watcher CHANGED_EVENT state = CONNECTED_STATE for path /cm
/cm: rc = 0 Stat:
\tctime = <time>
\tczxid=2
\tmtime= <time>
\tmzxid=9
\tversion=1\taversion=0
\tephemeralOwner = 0
/cm: rc = 0
 value_len = 5
hello
Stat:
\tctime = <time>
\tczxid=2
\tmtime= <time>
\tmzxid=9
\tversion=1\taversion=0
\tephemeralOwner = 0
/nope: rc = -101 Stat:
null
/cm: rc = 0
\tc2
\te
\ts0000000001
Watcher CHILD_EVENT state = CONNECTED_STATE for path /cm
/cm/e: rc = 0
/cm: rc = 0
\tc2
\ts0000000001
\tctime = <time>
\tczxid=2
\tmtime= <time>
\tmzxid=9
\tversion=1\taversion=0
\tephemeralOwner = 0
Error -101 for /zz
Error -101 for /zz
Creating [/zz] node (mode: 0)
Watcher CREATED_EVENT state = CONNECTED_STATE for path /zz
[/zz]: rc = 0
\tname = /zz
/zz: rc = 0
/nope: rc = -101
/cm: rc = -111
[/]: rc = 0
\tname = /
Quitting...
session Id = <session>
exit Some(0) timed_out=false
";

// ---------------------------------------------------------------------------------------------
// kazoo

/// kazoo: creates, versions, watches, DataWatch/ChildrenWatch, transactions, Lock and Election with
/// two clients, Counter, a dropped connection, and ephemerals vanishing on session close. The
/// script prints a deterministic transcript (see tests/clients/kazoo_scenario.py).
#[test]
fn kazoo_scenario() {
    require(PYTHON, "python3");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/kazoo_scenario.py");
    let probe = Command::new(PYTHON).args(["-c", "import kazoo"]).output().expect("run python3");
    assert!(
        probe.status.success(),
        "kazoo is missing for {PYTHON}: install Debian's python3-kazoo (the README's test command does)"
    );
    for target in targets() {
        let server = start(target, "");
        let mut cmd = Command::new(PYTHON);
        cmd.arg(&script).arg(server.connect_string());
        let f = run(cmd, b"", server.dir.path(), "kazoo.out");
        let transcript = format!(
            "{}exit {:?} timed_out={}",
            f.output.lines().filter(|l| !is_kazoo_log(l)).map(|l| format!("{l}\n")).collect::<String>(),
            f.code,
            f.timed_out
        );
        check(target, "kazoo scenario", &transcript, KAZOO_EXPECTED);
    }
}

/// Kazoo's own log lines on stderr (connection drops it reports), which the transcript leaves out.
fn is_kazoo_log(line: &str) -> bool {
    line.starts_with("Connection dropped") || line.starts_with("Transition to ")
}

const KAZOO_EXPECTED: &str = "\
connected CONNECTED
== create
makepath /k/a/b
seq /k/seq-0000000001
seq /k/seq-0000000002
eph /k/eph
ephseq /k/eseq-0000000004
eph owner is session True dataLength 1
exists missing None
create existing NodeExistsError
create no parent NoNodeError
create under ephemeral NoChildrenForEphemeralsError
== get/set
get b'x' czxid=0x5 mzxid=0x5 pzxid=0x5 version=0 cversion=0 aversion=0 dataLength=1 numChildren=0
set v0 czxid=0x5 mzxid=0xd pzxid=0x5 version=1 cversion=0 aversion=0 dataLength=1 numChildren=0
set stale BadVersionError
set any czxid=0x5 mzxid=0xf pzxid=0x5 version=2 cversion=0 aversion=0 dataLength=2 numChildren=0
delete stale BadVersionError
delete missing NoNodeError
delete non-empty NotEmptyError
get missing NoNodeError
children ['a', 'eph', 'eseq-0000000004', 'seq-0000000001', 'seq-0000000002']
children stat ['a', 'eph', 'eseq-0000000004', 'seq-0000000001', 'seq-0000000002'] czxid=0x3 mzxid=0x3 pzxid=0x9 version=0 cversion=5 aversion=0 dataLength=0 numChildren=5
root b'' numChildren 2
== get_children watch
children []
event type=CHILD state=CONNECTED path=/k/w
event type=CHANGED state=CONNECTED path=/k/w/c2
queue empty after one-shot True
event type=CREATED state=CONNECTED path=/k/w/c3
event type=DELETED state=CONNECTED path=/k/w/c3
== DataWatch
dw (None, None, None)
dw (b'one', 0, 'CREATED')
dw (b'two', 1, 'CHANGED')
dw (None, None, 'DELETED')
== ChildrenWatch
cw []
cw ['x']
cw ['x', 'y']
cw ['y']
== transaction
commit ['/k/t1', True, 'ZnodeStat', True]
after b'txn' None True
failed commit ['RolledBackError', 'BadVersionError', 'RuntimeInconsistency']
rolled back None True
== Lock
one acquired True
contenders ['one', 'two']
two waiting True
two acquired after release True
contenders ['two']
lock children []
== Election
c1 leads
contenders ['c1', 'c2']
c2 not yet leading True
c2 leads
elect children []
== Counter
c1 value 3
c2 value 13 c1 sees 13
== reconnect
dw (b'0', 0, None)
cw []
state SUSPENDED
state CONNECTED
raw watch event type=NONE state=CONNECTING path=None
same session True
ephemeral survived True
dw (b'1', 1)
cw ['kid']
== session close
event type=DELETED state=CONNECTED path=/k/e2
e2 after close None
children ['a', 'cnt', 'cw', 'elect', 'eph', 'eseq-0000000004', 'lock', 'rw', 'rwc', 'seq-0000000002', 't1', 'w']
cleaned None
== done
exit Some(0) timed_out=false
";

/// Debian's C load generator (load_gen, on Apache's own libzookeeper_mt) keeps thousands of async
/// requests and watches in flight; its writes trigger its own watch events faster than it reads
/// them. zkrs must slow it down, as Apache does, and never drop it: it runs cycle after cycle.
#[test]
fn load_gen_is_throttled_not_dropped() {
    let load_gen = "/usr/lib/zookeeper/bin/load_gen";
    assert!(std::path::Path::new(load_gen).exists(), "{load_gen} missing: install Debian's zookeeper-bin");
    let mut server = start(Target::Zkrs, "");
    let mut child = std::process::Command::new(load_gen)
        .arg(server.connect_string())
        .arg("/lg")
        .arg("2000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start load_gen");
    std::thread::sleep(std::time::Duration::from_secs(8));
    let _ = child.kill();
    let out = child.wait_with_output().expect("load_gen output");
    let log = String::from_utf8_lossy(&out.stderr);
    let cycles = log.matches("Starting the write cycle").count();
    assert!(cycles >= 3, "load_gen made too little progress ({cycles} write cycles):\n{log}");
    assert!(!log.contains("ZOO_ERROR"), "load_gen reported errors:\n{log}");
    assert_eq!(server.four_letter("ruok"), "imok");
    server.kill();
    let server_log = server_log(server.dir.path());
    assert!(!server_log.contains("not reading"), "a connection was dropped:\n{server_log}");
}
