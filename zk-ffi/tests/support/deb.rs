//! Looking into Debian packages with dpkg-deb and lintian: shared by zk-ffi's tests of libzkrs's
//! packages and zk-server's of the server package (`#[path]`).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Runs `cmd`, which must succeed, and returns its standard output.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One member of a package's data archive, as `dpkg-deb -c` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `-rwxr-xr-x`, `drwxr-xr-x`, `lrwxrwxrwx` ...
    pub mode: String,
    /// `root/root` (dpkg-deb prints ids, `0/0`, for a package built without names).
    pub owner: String,
    /// The installed path, with ` -> target` for a symlink.
    pub path: String,
}

/// `dpkg-deb -c`'s members.
pub fn entries(deb: &Path) -> Vec<Entry> {
    run(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            Entry {
                mode: fields[0].to_string(),
                owner: fields[1].to_string(),
                path: fields[5..].join(" ").trim_start_matches('.').to_string(),
            }
        })
        .collect()
}

/// `dpkg-deb -c`'s paths, each with its link target when it is a symlink.
pub fn contents(deb: &Path) -> Vec<String> {
    entries(deb).into_iter().map(|e| e.path).collect()
}

/// A control field.
pub fn field(deb: &Path, name: &str) -> String {
    run(Command::new("dpkg-deb").arg("-f").arg(deb).arg(name)).trim().to_string()
}

/// A control member's text (`conffiles`, `postinst` ...).
pub fn control_file(deb: &Path, member: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb").arg("-e").arg(deb).arg(dir.path()));
    std::fs::read_to_string(dir.path().join(member)).unwrap_or_else(|e| panic!("{member}: {e}"))
}

/// lintian, when installed, finds no error and no warning in `debs`.
pub fn assert_lintian_clean(debs: &[&Path]) {
    if Command::new("lintian").arg("--version").output().is_ok_and(|o| o.status.success()) {
        let out = Command::new("lintian").args(debs).output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        let bad: Vec<&str> = report.lines().filter(|l| l.starts_with("E:") || l.starts_with("W:")).collect();
        assert!(bad.is_empty(), "lintian:\n{report}");
    } else {
        eprintln!("lintian not installed: the packages were not linted");
    }
}
