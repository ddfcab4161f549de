//! Test support: find libzkrs.so and the servers, compile C against Apache's header, start
//! zkrs-server or Apache ZooKeeper on a free port.
#![allow(dead_code)]

pub mod deb;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's libzookeeper_mt (the reference).
pub const REFERENCE_LIB: &str = "/usr/lib/x86_64-linux-gnu/libzookeeper_mt.so.2";

fn target_dir() -> PathBuf {
    // tests run from target/<profile>/deps/<name>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The libzkrs.so built for this test run: the newer of `deps/` (what `cargo test` builds) and
/// the profile directory (what `cargo build` copies there, possibly from an older build with
/// other features).
pub fn libzkrs() -> PathBuf {
    let dir = target_dir();
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    [dir.join("deps/libzkrs.so"), dir.join("libzkrs.so")]
        .into_iter()
        .filter_map(|p| modified(&p).map(|t| (t, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("libzkrs.so not found under {}", dir.display()))
}

/// A directory holding libzookeeper_mt.so.2 -> libzkrs.so, for LD_LIBRARY_PATH.
pub fn soname_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(libzkrs(), d.path().join("libzookeeper_mt.so.2")).unwrap();
    d
}

/// Compiles tests/c/<name> against Apache's header (THREADED when `mt`), linked with -lzookeeper_mt
/// (so the loader decides which library runs it). The program is removed when the result drops:
/// test runs leave nothing behind in /tmp.
pub fn compile_c(name: &str, mt: bool) -> tempfile::TempPath {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(name);
    // A path of its own per call: two tests compiling the same program to one path race, and a
    // program run while another gcc rewrites it fails with ETXTBSY ("Text file busy").
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = tempfile::TempPath::try_from_path(std::env::temp_dir().join(format!(
        "zkrs-{}-{n}-{}",
        std::process::id(),
        name.trim_end_matches(".c")
    )))
    .expect("a temporary path");
    let mut cmd = Command::new("gcc");
    cmd.arg("-Wall").arg("-o").arg(&out).arg(&src);
    if mt {
        cmd.arg("-DTHREADED").arg("-lzookeeper_mt").arg("-lpthread");
    }
    let st = cmd.status().expect("gcc");
    assert!(st.success(), "compiling {name}");
    out
}

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Apache ZooKeeper from Debian's package.
    Apache,
    /// zkrs-server.
    Zkrs,
}

/// A running server, killed on drop.
pub struct Server {
    /// Client port on 127.0.0.1.
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Server {
    /// "127.0.0.1:port".
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The workspace's zkrs-server, built first when missing.
pub fn zkrs_server_binary() -> PathBuf {
    // test.sh names the one its run built (with the `kerberos` feature the GSSAPI test needs).
    if let Ok(p) = std::env::var("ZKRS_SERVER_BIN") {
        return PathBuf::from(p);
    }
    let p = target_dir().join("zkrs-server");
    if !p.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "zk-server", "--bin", "zkrs-server"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build zkrs-server");
        assert!(st.success());
    }
    p
}

/// Starts `target` standalone on a free port and waits until it serves (`srvr` answers with
/// statistics; Apache answers `ruok` before it accepts sessions).
pub fn start(target: Target) -> Server {
    start_with(target, "")
}

/// [`start`] with `extra` zoo.cfg lines.
pub fn start_with(target: Target, extra: &str) -> Server {
    start_with_jvm_flags(target, extra, "")
}

/// [`start_with`], with `SERVER_JVMFLAGS` set to `jvm_flags` as zkServer.sh takes them: Apache's
/// JVM gets them on its command line (split at white space), zkrs-server in its environment.
pub fn start_with_jvm_flags(target: Target, extra: &str, jvm_flags: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n{extra}",
            data.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
    let child = match target {
        Target::Zkrs => Command::new(zkrs_server_binary())
            .arg(&cfg)
            .env("SERVER_JVMFLAGS", jvm_flags)
            .env_remove("JVMFLAGS")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn(),
        Target::Apache => Command::new("java")
            // zkrs reads the JAAS file's name from zoo.cfg too; Apache only from its JVM flags.
            .args(
                extra
                    .lines()
                    .filter(|l| l.starts_with("java.security.auth.login.config="))
                    .map(|l| format!("-D{l}")),
            )
            .arg(format!("-Dzookeeper.log.dir={}", dir.path().display()))
            .args(jvm_flags.split_whitespace())
            .args([
                "-Xmx512m",
                "-cp",
                "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar",
                "org.apache.zookeeper.server.ZooKeeperServerMain",
            ])
            .arg(&cfg)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn(),
    }
    .expect("start server");
    let server = Server { port, child, _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            // A server still starting may accept and stay silent: never wait on it unbounded.
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.write_all(b"srvr");
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            if out.contains("Mode:") {
                return server;
            }
        }
        assert!(Instant::now() < deadline, "{target:?} did not start");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `exe args` with libzkrs as libzookeeper_mt.so.2; returns (success, stdout+stderr).
pub fn run_on_libzkrs(exe: &Path, args: &[&str], stdin: Option<&str>, limit: Duration) -> (bool, String) {
    run_on_libzkrs_with_env(exe, args, &[], stdin, limit)
}

/// [`run_on_libzkrs`] with `env` added to the program's environment.
pub fn run_on_libzkrs_with_env(
    exe: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
    limit: Duration,
) -> (bool, String) {
    let lib = soname_dir();
    let mut child = Command::new(exe)
        .args(args)
        .envs(env.iter().copied())
        .env("LD_LIBRARY_PATH", lib.path())
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Both streams are read as they come, so that a script can wait for the session.
    let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let readers: Vec<_> = [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ]
    .into_iter()
    .map(|mut r| {
        let out = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = r.read(&mut buf) {
                out.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    })
    .collect();
    if let Some(input) = stdin {
        let mut w = child.stdin.take().unwrap();
        let input = input.to_owned();
        let seen = out.clone();
        let connect_by = Instant::now() + limit;
        std::thread::spawn(move || {
            // A script is for a connected session (cli_mt runs each line at once, and a loaded
            // machine may take seconds to connect): its first line waits for the session event.
            while !seen.lock().unwrap().contains("state = CONNECTED") && Instant::now() < connect_by {
                std::thread::sleep(Duration::from_millis(20));
            }
            for line in input.lines() {
                let _ = writeln!(w, "{line}");
                std::thread::sleep(Duration::from_millis(300));
            }
        });
    }
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for r in readers {
        let _ = r.join();
    }
    let out = out.lock().unwrap().clone();
    (status.is_some_and(|s| s.success()), out)
}

/// Runs `exe args` on the system's libzookeeper_mt (no LD_LIBRARY_PATH); (success, output).
pub fn run_on_reference(exe: &Path, args: &[&str], limit: Duration) -> (bool, String) {
    let child = Command::new(exe)
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_output(child, limit)
}

/// Waits up to `limit` for `child` (killing it past that); (success, stdout+stderr).
pub fn wait_output(mut child: Child, limit: Duration) -> (bool, String) {
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = t1.join().unwrap_or_default();
    out.push_str(&t2.join().unwrap_or_default());
    (status.is_some_and(|s| s.success()), out)
}
