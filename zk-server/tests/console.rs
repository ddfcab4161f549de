//! The operator's console (`/console`) in a real headless Chromium (Debian's chromium and
//! chromium-driver, driven by python3-selenium from `tests/console/console_browser.py`): it loads
//! with no failed request, shows the server's figures, browses a tree (one node of it with 10,000
//! children), runs a command, refuses an edit without credentials and makes it with them, finds a
//! node among the 10,000 by path (a substring, a prefix, and a search stopped at its limit), and
//! lists a real client's session with the watch it set (and says when the list is capped).
//! Screenshots of each step are kept in `target/console-screenshots/` (`standalone/`,
//! `ensemble/`). On a 3-server ensemble it shows the members, the leader, every member's zxid
//! (as `srvr` reports it) and lag, and follows the leader's kill: the killed member shows as
//! unreachable and the others' lag against the new leader.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use bytes::Bytes;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::client::{open_acl, RawClient};
use support::*;
use zk_proto::{perms, Acl, CreateMode, CreateRequest, ErrorCode, GetDataResponse, Id, Request};

fn assert_browser_installed() {
    for file in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            Path::new(file).exists(),
            "{file} is missing: install Debian's chromium and chromium-driver (./test.sh does)"
        );
    }
    let selenium = Command::new("/usr/bin/python3").args(["-c", "import selenium"]).status().unwrap();
    assert!(selenium.success(), "python3-selenium is missing: install it (./test.sh does)");
}

/// `target/console-screenshots/<test>`, emptied.
fn screenshots(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn create(c: &mut RawClient, path: &str, data: &[u8], acl: Vec<Acl>) {
    assert_eq!(c.create_with_acl(path, data, acl).err(), ErrorCode::Ok, "create {path}");
}

#[test]
fn console_browses_and_refuses_an_edit_without_credentials() {
    assert_browser_installed();
    let admin_port = free_port();
    let server = start(
        Target::Zkrs,
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin_port}\n\
             admin.restApi.enabled=true\nadmin.restApi.writable=true\nmaxSessionTimeout=120000\n"
        ),
    );
    // Two minutes: these clients send no pings, and their sessions must outlive the browser's run.
    let mut c = RawClient::connect(server.addr(), 120_000);
    create(&mut c, "/app", b"", open_acl());
    create(&mut c, "/app/config", b"hello console", open_acl());
    let admin = zk_tree::acl::digest_id("admin:adminpw").unwrap();
    create(
        &mut c,
        "/app/locked",
        b"v0",
        vec![
            Acl { perms: perms::READ, id: Id { scheme: "world".into(), id: "anyone".into() } },
            Acl { perms: perms::ALL, id: Id { scheme: "digest".into(), id: admin } },
        ],
    );

    // A node with 10,000 children, created 500 at a time.
    create(&mut c, "/big", b"", open_acl());
    for batch in 0..20 {
        let xids: Vec<i32> = (batch * 500..(batch + 1) * 500)
            .map(|i| {
                c.send(&Request::Create(CreateRequest {
                    path: format!("/big/n{i:05}"),
                    data: Some(Bytes::from(i.to_string())),
                    acl: open_acl(),
                    flags: CreateMode::Persistent.code(),
                }))
            })
            .collect();
        for xid in xids {
            assert_eq!(c.recv(xid).expect("create reply").err(), ErrorCode::Ok);
        }
    }

    // The session the sessions view must show, with its watch; and 25 more sessions, so a page
    // of 20 is capped.
    let _: GetDataResponse = c.get_data("/app/config", true).decode();
    let others: Vec<RawClient> = (0..25).map(|_| RawClient::connect(server.addr(), 120_000)).collect();
    let session = format!("0x{:x}", c.session.session_id as u64);

    let shots = screenshots("standalone");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console_browser.py");
    let child = Command::new("/usr/bin/python3")
        // No __pycache__ in the source tree (the scripts import browser.py).
        .arg("-B")
        .arg(&script)
        .arg(format!("http://127.0.0.1:{admin_port}"))
        .arg(&shots)
        .arg(&session)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the browser script");
    let out = wait_output(child, Duration::from_secs(180));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && stdout.contains("console ok"),
        "the console failed in Chromium (screenshots in {}):\n{stdout}\n{stderr}\nserver log:\n{}",
        shots.display(),
        server_log(server.dir.path())
    );
    drop(others);
    for step in [
        "1-overview",
        "2-tree",
        "2b-big-tree",
        "3-commands",
        "4-edit-refused",
        "5-edit-saved",
        "6-search",
        "7-sessions",
    ] {
        assert!(shots.join(format!("{step}.png")).exists(), "no screenshot of {step}");
    }
    // The one write that was allowed, as a wire client sees it.
    let d: GetDataResponse = c.get_data("/app/locked", false).decode();
    assert_eq!((d.data.unwrap_or_default().as_ref(), d.stat.version), (&b"edited by admin"[..], 1));
}

/// Each member's last zxid as `srvr` reports it.
fn member_zxids(e: &support::ensemble::Ensemble) -> Vec<i64> {
    e.members
        .iter()
        .map(|m| {
            let text = support::ensemble::srvr(m.client).expect("srvr");
            let hex = text.lines().find_map(|l| l.strip_prefix("Zxid: 0x")).expect("a Zxid line");
            i64::from_str_radix(hex.trim(), 16).expect("hex zxid")
        })
        .collect()
}

/// A line the script printed that starts with `prefix`, the rest of it; panics when the script
/// ends first.
fn line_after(out: &mut impl BufRead, prefix: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap_or(0) > 0, "the script ended before printing {prefix:?}");
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            return rest.trim().to_string();
        }
    }
}

#[test]
fn console_follows_a_leader_kill() {
    assert_browser_installed();
    let (mut e, admin_ports) =
        support::ensemble::Ensemble::start_with_admin_as(3, "admin.restApi.enabled=true\n", true);
    let leader = e.wait_for_leader();
    // A transaction, so the zxids are not the epoch's first; the session closed, so no expiry
    // moves them later.
    let mut c = e.client(leader);
    assert_eq!(c.create("/console-a", b"v", CreateMode::Persistent).err(), ErrorCode::Ok);
    c.close();
    let zxids_before = member_zxids(&e);
    let watcher = (leader + 1) % 3;
    let shots = screenshots("ensemble");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console_ensemble.py");
    let mut child = Command::new("/usr/bin/python3")
        // No __pycache__ in the source tree (the scripts import browser.py).
        .arg("-B")
        .arg(&script)
        .arg(format!("http://127.0.0.1:{}", admin_ports[watcher]))
        .arg(&shots)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the browser script");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let shown = line_after(&mut out, "leader ");
    assert_eq!(shown, (leader + 1).to_string(), "the console's leader");
    // Every member's zxid as the console shows it (all level, lag 0) is one `srvr` reported
    // while the page ran: the console's own REST session may add a transaction meanwhile.
    let shown = line_after(&mut out, "zxids ");
    let zxids_after = member_zxids(&e);
    for (i, z) in shown.split(',').enumerate() {
        let (sid, hex) = z.split_once('=').expect("sid=zxid");
        assert_eq!(sid, (i + 1).to_string(), "the console's rows in sid order: {shown}");
        let z = i64::from_str_radix(hex.trim_start_matches("0x"), 16).expect("hex zxid");
        assert!(
            (zxids_before[i]..=zxids_after[i]).contains(&z),
            "member {}: the console shows {hex}, srvr {:x} before and {:x} after",
            i + 1,
            zxids_before[i],
            zxids_after[i]
        );
    }
    e.kill(leader);
    let elected = e.wait_for_leader();
    // A write in the new leader's epoch, so every live member's lag is measured against it.
    let mut c = e.client(elected);
    assert_eq!(c.create("/console-b", b"v", CreateMode::Persistent).err(), ErrorCode::Ok);
    c.close();
    writeln!(child.stdin.as_mut().unwrap(), "killed").unwrap();
    let new = line_after(&mut out, "new leader ");
    assert_eq!(new, (elected + 1).to_string(), "the console's new leader");
    let down = line_after(&mut out, "unreachable ");
    assert_eq!(down, (leader + 1).to_string(), "the member the console shows unreachable");
    assert!(child.wait().unwrap().success());
}
