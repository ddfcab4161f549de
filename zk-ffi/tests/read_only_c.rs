//! Read-only mode through libzkrs: a C program (mt, Apache's zookeeper.h) connects with
//! ZOO_READONLY to a partitioned ensemble's read-only member (Apache 3.8, and zkrs), sees ZOO_READONLY_STATE,
//! reads, gets ZNOTREADONLY for writes, and once the read-write quorum is back (the read-only
//! member staying cut off, so only the library's `isro` probes can find it) reaches
//! ZOO_CONNECTED_STATE with the session events Apache's C client delivers, and writes.

mod support;

// Shared with zk-client's read-only test.
#[path = "../../zk-client/tests/support/ensemble.rs"]
#[allow(dead_code)] // each test file uses a part of it
mod ensemble;

use ensemble::{RoEnsemble, RoServer};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::*;

#[test]
fn c_client_leaves_read_only_for_read_write_on_apache() {
    read_only_then_read_write(RoServer::Apache);
}

#[test]
fn c_client_leaves_read_only_for_read_write_on_zkrs() {
    read_only_then_read_write(RoServer::Zkrs(zkrs_server_binary()));
}

fn read_only_then_read_write(server: RoServer) {
    let mut e = RoEnsemble::start(server);
    // Written through member 3 with Debian's cli_mt, so member 3 holds the data.
    let (ok, out) = run_on_libzkrs(
        Path::new("/usr/lib/zookeeper/bin/cli_mt"),
        &[&e.members[2].client.to_string()],
        Some("create /ro\nset /ro before\nget /ro\nquit\n"),
        Duration::from_secs(60),
    );
    assert!(ok && out.contains("before"), "preparing /ro:\n{out}");
    e.cut_off_member_3();
    e.launch(2);
    e.wait_isro(2, "ro");

    let exe = compile_c("read_only_test.c", true);
    let lib = soname_dir();
    let mut child = Command::new(&exe)
        .arg(e.connect_string())
        .env("LD_LIBRARY_PATH", lib.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn read_only_test");
    let (tx, rx) = mpsc::sync_channel::<String>(1024);
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut out = String::new();
    let mut restarted = false;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                if line == "READ-ONLY OK" && !restarted {
                    // The quorum of members 1 and 2 comes back; member 3 stays cut off.
                    e.launch(0);
                    e.launch(1);
                    restarted = true;
                }
                out.push_str(&line);
                out.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
    }
    let status = child.wait().unwrap();
    let _ = reader.join();
    assert!(status.success() && out.contains("ALL OK"), "{status}\n{out}");
    assert_eq!(e.isro(2).as_deref(), Some("ro"), "member 3 stayed read-only: the probes found the way");
}
