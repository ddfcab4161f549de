//! A client program driven one line at a time on its stdin, its stdout and stderr going to one
//! file, for tests that act between its commands (kill a server, write through another client)
//! and wait for what it prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How a client program ended.
pub struct Ended {
    /// Exit code; None when killed by a signal (including for overstaying).
    pub code: Option<i32>,
    /// stdout and stderr interleaved, as a terminal would show them.
    pub output: String,
    /// Whether it was killed for overstaying.
    pub timed_out: bool,
}

/// A running client program. Killed on drop.
pub struct Interactive {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Where its stdout and stderr go, interleaved as a terminal would show them.
    pub path: PathBuf,
}

impl Interactive {
    /// Starts `cmd` with a piped stdin, writing its output to `dir/name`.
    pub fn start(mut cmd: Command, dir: &Path, name: &str) -> Interactive {
        let path = dir.join(name);
        let out = std::fs::File::create(&path).expect("output file");
        let err = out.try_clone().expect("output file");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let stdin = child.stdin.take();
        Interactive { child, stdin, path }
    }

    /// Writes `line` and a newline to its stdin (ignored once it has exited).
    pub fn send(&mut self, line: &str) {
        self.send_bytes(format!("{line}\n").as_bytes());
    }

    /// Writes `bytes` to its stdin as they are (ignored once it has exited: a client that exits
    /// early closes its stdin, and the test fails on what it printed).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = s.write_all(bytes).and_then(|_| s.flush());
        }
    }

    /// Everything it has printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }

    /// Waits until `done` holds for its output; false when `wait` passes first.
    pub fn wait_for(&self, wait: Duration, done: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            if done(&self.output()) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until `needle` occurs at least `n` times in its output.
    pub fn wait_count(&self, needle: &str, n: usize, wait: Duration) -> bool {
        self.wait_for(wait, |o| o.matches(needle).count() >= n)
    }

    /// Closes its stdin and waits up to `wait` for it to exit, killing it when it overstays.
    pub fn finish(mut self, wait: Duration) -> Ended {
        self.stdin = None;
        let deadline = Instant::now() + wait;
        let (code, timed_out) = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break (status.code(), false);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break (self.child.wait().expect("wait").code(), true);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ended { code, output: self.output(), timed_out }
    }
}

impl Drop for Interactive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
