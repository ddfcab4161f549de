//! The operator's console (`/console`) in a real headless Chromium (Debian's chromium and
//! chromium-driver, driven by python3-selenium from `tests/console/console_browser.py`): it loads
//! with no failed request, shows the server's figures, browses a tree (one node of it with 10,000
//! children), runs a command, refuses an
//! edit without credentials and makes it with them. Screenshots of each step are kept in
//! `target/console-screenshots/`.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::process::Command;
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
             admin.restApi.enabled=true\nadmin.restApi.writable=true\n"
        ),
    );
    let mut c = RawClient::connect(server.addr(), 30_000);
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

    let shots: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console_browser.py");
    let child = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(format!("http://127.0.0.1:{admin_port}"))
        .arg(&shots)
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
    for step in ["1-overview", "2-tree", "2b-big-tree", "3-commands", "4-edit-refused", "5-edit-saved"] {
        assert!(shots.join(format!("{step}.png")).exists(), "no screenshot of {step}");
    }
    // The one write that was allowed, as a wire client sees it.
    let d: GetDataResponse = c.get_data("/app/locked", false).decode();
    assert_eq!((d.data.unwrap_or_default().as_ref(), d.stat.version), (&b"edited by admin"[..], 1));
}
