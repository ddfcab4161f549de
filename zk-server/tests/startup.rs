//! The zkrs-server process: bad configuration stops start-up with a message naming the key and the
//! line; unknown keys are only warned about; SIGTERM shuts down cleanly and keeps the data.
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
