//! The user guide's quick start, run as written: every `sh` block of
//! `docs/guide/src/quick-start.md`, in order, in one bash session, inside a network namespace of
//! its own (the guide uses the standard ports 2181, 8080-8083, 2888-2890 and 3888-3890, which the
//! namespace keeps off the machine's network). Needs root (`unshare -n`), Apache's zkCli.sh,
//! kazoo, curl and netcat, as test.sh installs them.
//!
//! Two things are not run literally. The block that builds and starts the server
//! (`cargo run --release ...`, the README's first set-up command) runs the binary this test was
//! built with, placed where that command leaves it (`target/release/zkrs-server` under the
//! working directory), in the background as a second terminal would have it; the test checks
//! that the block is the README's command. And where the guide says to press Ctrl-C ("Stop
//! it"), the test sends that server SIGINT. Everything else, `export PATH=...` included, is the
//! guide's text.
#![allow(clippy::disallowed_methods)]
use std::path::Path;
use std::process::Command;

const GUIDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide/src/quick-start.md");
const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
const BUILD_AND_RUN: &str = "cargo run --release -p zk-server --bin zkrs-server";

/// The chapter as the bash script the test runs: its `sh` blocks in order, each followed by a
/// line marking its end, with the two substitutions the module docs name.
fn script(chapter: &str) -> String {
    let mut out = String::from(
        "set -u\nexec 2>&1\nmkdir -p target/release\nln -s \"$ZKRS_SERVER_BIN\" target/release/zkrs-server\n",
    );
    let mut lines = chapter.lines();
    let mut n = 0;
    while let Some(line) = lines.next() {
        if line.starts_with("### Stop it") {
            out.push_str(
                "kill -INT \"$standalone\"; wait \"$standalone\"; echo \"standalone server stopped\"\n",
            );
            continue;
        }
        if line != "```sh" {
            continue;
        }
        let block: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        n += 1;
        if block == [BUILD_AND_RUN] {
            // The server runs in its own terminal in the guide: here, in the background, until
            // it answers.
            out.push_str(
                "target/release/zkrs-server > standalone.log 2>&1 &\nstandalone=$!\n\
                 for _ in $(seq 100); do echo srvr | nc -q 1 127.0.0.1 2181 2>/dev/null | grep -q Mode && break; sleep 0.1; done\n",
            );
        } else {
            out.push_str(&block.join("\n"));
            out.push('\n');
        }
        out.push_str(&format!("echo \"=== end of block {n} ($SECONDS s)\"\n"));
    }
    out
}

fn need(tool: &str) {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().expect("run sh");
    assert!(found.status.success(), "{tool} is missing: test.sh installs it");
}

#[test]
fn the_quick_start_runs_as_written() {
    let chapter = std::fs::read_to_string(GUIDE).expect("the guide's quick start");
    let readme = std::fs::read_to_string(README).expect("README.md");
    // The block the test replaces is the README's command (without its optional zoo.cfg).
    assert!(
        chapter.contains(&format!("```sh\n{BUILD_AND_RUN}\n```")),
        "the guide no longer starts with {BUILD_AND_RUN:?}"
    );
    assert!(
        readme.lines().any(|l| l.starts_with(BUILD_AND_RUN)),
        "README.md's server command is no longer {BUILD_AND_RUN:?}"
    );
    assert_eq!(euid(), 0, "the quick start runs in a network namespace of its own: run the test as root");
    for tool in ["unshare", "ip", "curl", "nc", "python3", "/usr/share/zookeeper/bin/zkCli.sh"] {
        need(tool);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let body = script(&chapter);
    std::fs::write(dir.path().join("quick-start.sh"), &body).expect("write the script");
    let out = Command::new("timeout")
        .args(["240", "unshare", "-n", "bash", "-c", "ip link set lo up && exec bash quick-start.sh"])
        .current_dir(dir.path())
        .env("ZKRS_SERVER_BIN", env!("CARGO_BIN_EXE_zkrs-server"))
        .env("HOME", dir.path())
        // A new user's shell: the system's python3 (with Debian's kazoo), not a tool manager's.
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .expect("run the quick start");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs = server_logs(dir.path());
    let blocks = body.matches("=== end of block").count();
    assert!(
        stdout.contains(&format!("=== end of block {blocks} (")),
        "the quick start stopped before its last block (status {:?})\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n{logs}",
        out.status
    );
    // What the guide says each block prints (by block number; unordered within a block).
    let outputs: Vec<&str> = stdout.split("=== end of block ").collect();
    let expected: [(usize, &[&str]); 11] = [
        (3, &["Mode: standalone", "\"error\" : null"]),
        (4, &["Created /hello", "world"]),
        (5, &["hello from kazoo version 0"]),
        (6, &["standalone server stopped", "tickTime=2000", "server.3=127.0.0.1:2890:3890"]),
        (8, &["Mode: leader", "Mode: follower"]),
        (9, &[" leads"]),
        (10, &["\"server_state\" : \"leader\"", "\"synced_followers\" : 2", "zk_synced_followers\t2"]),
        (11, &["Created /app", "v1"]),
        (12, &["Error contacting service", "Mode: leader", "Mode: follower"]),
        (13, &["before: v1", "after: v2"]),
        (14, &["Mode: follower", "Zxid: 0x"]),
    ];
    assert_eq!(blocks, 15, "the quick start has {blocks} blocks: update the expectations below");
    for (block, wants) in expected {
        // The text before "=== end of block N" is the N-1'th split's tail.
        let text = outputs[block - 1].split_once('\n').map_or("", |(_, rest)| rest);
        for want in wants {
            assert!(
                text.contains(want),
                "block {block} of the quick start did not print {want:?}:\n{text}\n--- stdout\n{stdout}\n{logs}"
            );
        }
    }
}

/// Whether this process runs as root: the effective uid, as `id -u` prints it.
fn euid() -> u32 {
    let out = Command::new("id").arg("-u").output().expect("run id");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a uid")
}

/// The servers' logs, for a failure's message.
fn server_logs(dir: &Path) -> String {
    let mut text = String::new();
    for name in
        ["standalone.log", "ensemble/zk1/server.log", "ensemble/zk2/server.log", "ensemble/zk3/server.log"]
    {
        let log = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        text.push_str(&format!("--- {name}\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
    }
    text
}
