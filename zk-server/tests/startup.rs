//! The zkrs-server process: bad configuration stops start-up with a message naming the key and the
//! line; unknown keys are only warned about; SIGTERM shuts down cleanly and keeps the data.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::process::Command;
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::*;
use zk_proto::*;

fn run_with_cfg(cfg: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoo.cfg");
    std::fs::write(&path, cfg.replace("DIR", &dir.path().display().to_string())).unwrap();
    let out = Command::new(zkrs_binary()).arg(&path).env("RUST_LOG", "warn").output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_values_name_the_key_and_line() {
    let (code, err) = run_with_cfg("tickTime=2000\ndataDir=DIR/data\nclientPort=notaport\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("clientPort") && err.contains("line 3"), "{err}");

    let (code, err) = run_with_cfg("dataDir=DIR/data\nclientPort=2181\ntickTime=-5\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("tickTime") && err.contains("line 3"), "{err}");

    let (code, err) =
        run_with_cfg("dataDir=DIR/data\nclientPort=2181\nminSessionTimeout=9000\nmaxSessionTimeout=4000\n");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("SessionTimeout"), "{err}");
}

#[test]
fn missing_config_file_is_a_clear_error() {
    let out = Command::new(zkrs_binary()).arg("/nonexistent/zoo.cfg").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/zoo.cfg"), "{err}");
}

#[test]
fn unknown_keys_are_warned_about_not_fatal() {
    let mut server = start(Target::Zkrs, "someFutureKey=1");
    assert!(server.four_letter("ruok") == "imok");
    server.kill();
    let log = server_log(server.dir.path());
    assert!(log.contains("someFutureKey"), "the unknown key is named in a warning:\n{log}");
}

#[test]
fn sigterm_shuts_down_cleanly_and_keeps_data() {
    let mut server = start(Target::Zkrs, "");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/kept", b"v", CreateMode::Persistent).err(), ErrorCode::Ok);
    let pid = server.pid();
    assert!(Command::new("kill").arg("-TERM").arg(pid.to_string()).status().unwrap().success());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = server.try_wait() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}");
    server.restart();
    let mut c = RawClient::connect(server.addr(), 30_000);
    let d: GetDataResponse = c.get_data("/kept", false).decode();
    assert_eq!(d.data.as_deref(), Some(&b"v"[..]));
}

/// Pointed at a dataDir where Apache ZooKeeper kept its data (and zkrs has none), zkrs refuses to
/// start empty and says how to import; after `zkrs-server import` it serves Apache's tree.
#[test]
fn apache_data_dir_is_refused_then_imported() {
    let mut apache = start(Target::Apache, "");
    let mut c = RawClient::connect(apache.addr(), 30_000);
    assert_eq!(c.create("/from-apache", b"hello", CreateMode::Persistent).err(), ErrorCode::Ok);
    drop(c);
    apache.kill();
    let apache_data = apache.dir.path().join("data");
    let cfg = std::fs::read_to_string(apache.config_path()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoo.cfg");
    std::fs::write(&path, &cfg).unwrap();
    let out = Command::new(zkrs_binary()).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds Apache ZooKeeper data") && err.contains("zkrs-server import"), "{err}");

    let zkrs_data = dir.path().join("zkrs-data");
    let out = Command::new(zkrs_binary())
        .args([
            "import",
            apache_data.to_str().unwrap(),
            apache_data.to_str().unwrap(),
            zkrs_data.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let port = free_port();
    let zcfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n",
        zkrs_data.display()
    );
    std::fs::write(&path, zcfg).unwrap();
    let mut child =
        Command::new(zkrs_binary()).arg(&path).stderr(std::process::Stdio::null()).spawn().unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let t0 = Instant::now();
    let mut c = loop {
        if let Ok(s) = std::net::TcpStream::connect(addr) {
            drop(s);
            break RawClient::connect(addr, 30_000);
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "imported server did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    let d: GetDataResponse = c.get_data("/from-apache", false).decode();
    assert_eq!(d.data.as_deref(), Some(&b"hello"[..]));
    let _ = child.kill();
    let _ = child.wait();
}
