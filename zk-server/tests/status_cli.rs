//! `zkrs-server status` and `version`, as operators use zkServer.sh's: the mode of the server the
//! config names (Apache's too: the same `srvr` question), exit 1 with zkServer.sh's message when
//! nothing answers.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::process::Command;
use support::*;

fn status(cfg: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(zkrs_binary()).arg("status").arg(cfg).output().expect("run zkrs-server status");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn status_reports_a_running_server_and_fails_when_down() {
    let mut zkrs = start(Target::Zkrs, "");
    let apache = start(Target::Apache, "");
    for (name, s) in [("zkrs", &zkrs), ("apache", &apache)] {
        let (code, out, err) = status(&s.config_path());
        assert_eq!(code, Some(0), "{name}: {out}{err}");
        assert!(out.contains(&format!("Client port found: {}.", s.port)), "{name}: {out}");
        assert!(out.contains("Mode: standalone\n"), "{name}: {out}");
        assert!(out.contains("Zxid: 0x"), "{name}: {out}");
        assert!(out.contains("Connections: 1\n"), "{name}: {out}");
    }
    zkrs.kill();
    let (code, out, err) = status(&zkrs.config_path());
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("Error contacting service. It is probably not running."), "{err}");
    assert!(!out.contains("Mode:"), "{out}");
}

#[test]
fn version_prints_the_version() {
    let out = Command::new(zkrs_binary()).arg("version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("zkrs-server 3.8.0-zkrs-"), "{text}");
}
