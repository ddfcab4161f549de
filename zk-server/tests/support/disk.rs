//! A real full disk for tests: a small tmpfs (mounting needs root, as on the CI machines) and a
//! way to fill it.
#![allow(dead_code)]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a fixed size, unmounted on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    #[allow(unsafe_code)] // getuid, to tell "not root" from "mount broke"; libc has no safe wrapper.
    /// A tmpfs of `bytes`, or `None` (said on stderr) when not root.
    pub fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::Builder::new().prefix("zkrs-tmpfs-").tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("run mount");
        if out.status.success() {
            return Some(Tmpfs { dir });
        }
        let err = String::from_utf8_lossy(&out.stderr);
        // SAFETY: getuid has no preconditions.
        assert!(unsafe { libc::getuid() } != 0, "mounting a tmpfs as root failed: {err}");
        eprintln!("NOT RUN: mounting a tmpfs needs root ({})", err.trim());
        None
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// Fills the filesystem at `dir` with one file, then gives `leave` bytes back.
pub fn fill(dir: &Path, leave: u64) -> PathBuf {
    let path = dir.join("filler");
    let mut f = File::create(&path).unwrap();
    let chunk = vec![0xa5u8; 16 * 1024];
    let mut written = 0u64;
    while f.write_all(&chunk).is_ok() {
        written += chunk.len() as u64;
    }
    let _ = f.sync_all();
    let keep = written.saturating_sub(leave);
    f.set_len(keep).unwrap();
    f.sync_all().unwrap();
    path
}
