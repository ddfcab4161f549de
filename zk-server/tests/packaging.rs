//! The Debian package: its inputs (zk-server/debian, `[package.metadata.deb]`: the systemd unit
//! passes `systemd-analyze verify`, the maintainer scripts parse and carry cargo-deb's
//! `#DEBHELPER#` token, every asset taken from the source tree exists), and the package
//! `zk-server/debian/build-deb.sh` builds from this test run's (dev profile) binaries: its files,
//! modes, owners, conffiles, maintainer scripts and control fields, lintian-clean.
// Clocks are the tests' to use (a deadline while the server starts); src/core denies them.
#![allow(clippy::disallowed_methods)]
#[path = "../../zk-ffi/tests/support/deb.rs"]
mod deb;

use deb::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn debian() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/debian"))
}

#[test]
fn the_unit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    // verify checks that ExecStart's binary exists: point it at the one this test run built.
    let unit = std::fs::read_to_string(debian().join("zkrs.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/zkrs-server /etc/zkrs/zoo.cfg\n"), "{unit}");
    for key in ["User=zkrs", "StateDirectory=zkrs", "ProtectSystem=strict", "NoNewPrivileges=true"] {
        assert!(unit.contains(key), "{key} missing:\n{unit}");
    }
    let unit = unit.replace("/usr/bin/zkrs-server", env!("CARGO_BIN_EXE_zkrs-server"));
    let path = dir.path().join("zkrs.service");
    std::fs::write(&path, unit).unwrap();
    // The man page is installed by the package, not here: not looked for.
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.trim().is_empty(), "systemd-analyze verify:\n{err}");
}

#[test]
fn maintainer_scripts_parse() {
    for script in ["postinst", "postrm"] {
        let path = debian().join(script);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("#DEBHELPER#"), "{script} lacks #DEBHELPER#");
        let ok = Command::new("sh").arg("-n").arg(&path).status().unwrap();
        assert!(ok.success(), "{script} does not parse");
    }
}

#[test]
fn assets_from_the_tree_exist() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let mut n = 0;
    for line in manifest.lines().map(str::trim).filter(|l| l.starts_with("[\"")) {
        let source = line.trim_start_matches("[\"").split('"').next().unwrap();
        if let Some(page) = source.strip_prefix("target/release/man/") {
            // Built from debian/man by build-deb.sh.
            let page = page.trim_end_matches(".gz");
            assert!(debian().join("man").join(page).exists(), "man page {page}");
        } else if !source.starts_with("target/") {
            assert!(Path::new(env!("CARGO_MANIFEST_DIR")).join(source).exists(), "asset {source}");
        }
        n += 1;
    }
    assert!(n >= 8, "the assets were not found in Cargo.toml");
}

/// Builds the server package with build-deb.sh into `out` from this test run's binaries (the dev
/// profile's; zkrs-cli is zk-client's, built here when the run did not build it), with
/// cargo-deb's fast compression.
fn build_server_deb(out: &Path) -> PathBuf {
    // The script writes the man pages into the shared target directory, and cargo-deb its work
    // files: one build at a time.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let bins = Path::new(env!("CARGO_BIN_EXE_zkrs-server")).parent().unwrap();
    assert!(bins.join("zkrs-bench").exists(), "zkrs-bench is built with the tests");
    if !bins.join("zkrs-cli").exists() {
        run(Command::new(env!("CARGO")).args(["build", "-p", "zk-client", "--bin", "zkrs-cli"]));
    }
    let script = debian().join("build-deb.sh");
    // The script finds the binaries under $CARGO_TARGET_DIR/debug.
    let target_dir = bins.parent().unwrap();
    run(Command::new(script)
        .arg("--fast")
        .env("ZKRS_DEB_PROFILE", "dev")
        .env("ZKRS_DEB_PREBUILT", "1")
        .env("ZKRS_DEB_OUT", out)
        .env("CARGO_TARGET_DIR", target_dir));
    let version = env!("CARGO_PKG_VERSION");
    let arch = run(Command::new("dpkg").arg("--print-architecture")).trim().to_string();
    let deb = out.join(format!("zkrs_{version}-1_{arch}.deb"));
    assert!(deb.exists(), "{} not built", deb.display());
    deb
}

#[test]
fn the_server_package_holds_the_binaries_unit_config_and_man_pages() {
    let dir = tempfile::tempdir().unwrap();
    let deb = build_server_deb(dir.path());
    let entries = entries(&deb);
    let entry = |path: &str| {
        entries.iter().find(|e| e.path == path).unwrap_or_else(|| panic!("no {path} in {entries:#?}"))
    };
    let executable = "-rwxr-xr-x";
    let plain = "-rw-r--r--";
    for (path, mode) in [
        ("/usr/bin/zkrs-server", executable),
        ("/usr/bin/zkrs-cli", executable),
        ("/usr/bin/zkrs-bench", executable),
        ("/usr/lib/systemd/system/zkrs.service", plain),
        ("/etc/zkrs/zoo.cfg", plain),
        ("/usr/share/man/man1/zkrs-server.1.gz", plain),
        ("/usr/share/man/man1/zkrs-cli.1.gz", plain),
        ("/usr/share/man/man1/zkrs-bench.1.gz", plain),
        ("/usr/share/doc/zkrs/copyright", plain),
        ("/usr/share/doc/zkrs/changelog.Debian.gz", plain),
        ("/usr/share/lintian/overrides/zkrs", plain),
    ] {
        let e = entry(path);
        assert_eq!(e.mode, mode, "{path}");
    }
    for e in &entries {
        assert!(e.owner == "root/root" || e.owner == "0/0", "{e:?} is not root's");
        assert!(!e.mode.contains('s') && !e.mode.ends_with('w'), "{e:?}: setuid or world-writable");
        assert!(
            e.path.starts_with("/usr/") || e.path.starts_with("/etc/zkrs/") || e.path == "/etc/",
            "{e:?} outside /usr and /etc/zkrs (the data directory is made at configure time)"
        );
    }
    // The installed unit and config are the tree's.
    let root = dir.path().join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    for (installed, source) in
        [("usr/lib/systemd/system/zkrs.service", "zkrs.service"), ("etc/zkrs/zoo.cfg", "zoo.cfg")]
    {
        let (a, b) =
            (std::fs::read(root.join(installed)).unwrap(), std::fs::read(debian().join(source)).unwrap());
        assert!(a == b, "{installed} differs from debian/{source}");
    }
    // The binaries are stripped (their symbols are in zkrs-dbgsym) and run.
    let server = root.join("usr/bin/zkrs-server");
    let symbols = run(Command::new("objdump").arg("-h").arg(&server));
    assert!(!symbols.contains(".debug_info"), "zkrs-server is not stripped");
    let version = run(Command::new(&server).arg("version"));
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");

    assert_eq!(control_file(&deb, "conffiles").trim(), "/etc/zkrs/zoo.cfg");
    let postinst = control_file(&deb, "postinst");
    for want in
        ["adduser --system --group --home /var/lib/zkrs", "chown zkrs:zkrs /var/lib/zkrs", "zkrs.service"]
    {
        assert!(postinst.contains(want), "postinst lacks {want}:\n{postinst}");
    }
    assert!(!postinst.contains("#DEBHELPER#"), "cargo-deb did not fill #DEBHELPER#:\n{postinst}");
    let postrm = control_file(&deb, "postrm");
    assert!(postrm.contains("rm -rf /var/lib/zkrs") && postrm.contains("deluser"), "{postrm}");
    let prerm = control_file(&deb, "prerm");
    assert!(prerm.contains("zkrs.service"), "prerm stops the unit:\n{prerm}");
    let info = run(Command::new("dpkg-deb").arg("-I").arg(&deb));
    for script in ["postinst", "postrm", "prerm"] {
        assert!(
            info.lines()
                .any(|l| l.contains(" * ") && l.trim_end().ends_with("#!/bin/sh") && l.contains(script)),
            "{script} is not an executable shell script:\n{info}"
        );
    }
    assert_eq!(field(&deb, "Package"), "zkrs");
    assert_eq!(field(&deb, "Section"), "net");
    let depends = field(&deb, "Depends");
    assert!(depends.contains("adduser") && depends.contains("libc6 (>= 2."), "{depends}");
    assert_lintian_clean(&[&deb]);
}

/// A free TCP port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A `Key=value` line of the unit's `[Service]` section.
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("the unit has no {key}:\n{unit}"))
}

/// The package unpacked into a throw-away root; the unit verified there; the server started as
/// the unit starts it (its ExecStart, WorkingDirectory, UMask, Environment, as an unprivileged
/// user standing in for `zkrs` when the test runs as root), with /etc/zkrs/zoo.cfg and
/// /var/lib/zkrs taken from the root (the conffile edited for free ports and the root's data
/// directory, as an administrator edits it); Apache's zkCli.sh creates and reads a node;
/// `zkrs-server status` reports the server; SIGTERM (the unit's KillSignal) stops it cleanly.
#[test]
fn the_installed_package_serves_zkcli() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    // The stand-in user must reach the root's files.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let deb = build_server_deb(&dir.path().join("out"));
    let root = dir.path().join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    let under_root = |p: &str| root.join(p.trim_start_matches('/'));

    let unit = std::fs::read_to_string(under_root("/usr/lib/systemd/system/zkrs.service")).unwrap();
    let exec: Vec<&str> = unit_value(&unit, "ExecStart").split_whitespace().collect();
    assert_eq!(exec, ["/usr/bin/zkrs-server", "/etc/zkrs/zoo.cfg"]);
    let (user, workdir, umask) =
        (unit_value(&unit, "User"), unit_value(&unit, "WorkingDirectory"), unit_value(&unit, "UMask"));
    assert_eq!((user, workdir, umask), ("zkrs", "/var/lib/zkrs", "0027"));
    let (env_key, env_value) = unit_value(&unit, "Environment").split_once('=').unwrap();
    assert_eq!(unit_value(&unit, "KillSignal"), "SIGTERM");

    // systemd-analyze verify on the installed unit, its ExecStart pointed into the root.
    let server = under_root(exec[0]);
    let verified = dir.path().join("zkrs.service");
    std::fs::write(&verified, unit.replace(exec[0], server.to_str().unwrap())).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&verified).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.trim().is_empty(), "systemd-analyze verify:\n{err}");

    // What postinst does: the data directory, the service user's, 0750.
    let data = under_root(workdir);
    std::fs::create_dir_all(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o750)).unwrap();
    // /proc/self belongs to the effective user.
    let as_root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    // An id no account uses, standing in for the zkrs system user postinst would make (the test
    // adds no account to this machine).
    let uid = 61_999u32;
    if as_root {
        std::os::unix::fs::chown(&data, Some(uid), Some(uid)).unwrap();
    } else {
        eprintln!("not root: the server runs as this test's user, not as a stand-in for {user}");
    }

    // The conffile as an administrator edits it: free ports, the root's data directory.
    let cfg_path = under_root(exec[1]);
    let cfg = std::fs::read_to_string(&cfg_path).unwrap();
    let (client_port, admin_port) = (free_port(), free_port());
    let mut edited = String::new();
    for line in cfg.lines() {
        let line = match line {
            "dataDir=/var/lib/zkrs" => format!("dataDir={}", data.display()),
            "clientPort=2181" => format!("clientPort={client_port}"),
            "admin.serverPort=8080" => format!("admin.serverPort={admin_port}"),
            other => other.to_string(),
        };
        edited.push_str(&line);
        edited.push('\n');
    }
    for (key, n) in [("dataDir=", 1), ("clientPort=", 1), ("admin.serverPort=", 1)] {
        let replaced = edited.lines().filter(|l| l.starts_with(key) && !cfg.contains(*l)).count();
        assert_eq!(replaced, n, "{key} not found as packaged:\n{cfg}");
    }
    std::fs::write(&cfg_path, edited).unwrap();

    let stderr = std::fs::File::create(dir.path().join("server.log")).unwrap();
    // UMask=0027 set by the shell that then becomes the server (or setpriv, then the server).
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("umask {umask}; exec \"$@\""), "sh"]);
    if as_root {
        cmd.args([
            "setpriv",
            "--reuid",
            &uid.to_string(),
            "--regid",
            &uid.to_string(),
            "--clear-groups",
            "--",
        ]);
    }
    let uid_text = uid.to_string();
    let mut child = cmd
        .arg(&server)
        .arg(&cfg_path)
        .current_dir(&data)
        .env(env_key, env_value)
        .stdout(stderr.try_clone().unwrap())
        .stderr(stderr)
        .spawn()
        .expect("start the server as the unit does");
    struct Stop<'a>(&'a mut std::process::Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let guard = Stop(&mut child);

    // zkrs-server status, from the package, against the running server (its srvr).
    let status = || Command::new(&server).arg("status").arg(&cfg_path).output().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let report = loop {
        let out = status();
        if out.status.success() {
            break String::from_utf8_lossy(&out.stdout).into_owned();
        }
        let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        assert!(std::time::Instant::now() < deadline, "the server never served:\n{log}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(report.contains("Mode: standalone"), "{report}");
    assert!(report.contains(&format!("Client port found: {client_port}.")), "{report}");

    let zkcli = |args: &[&str]| {
        let out = Command::new("/usr/share/zookeeper/bin/zkCli.sh")
            .arg("-server")
            .arg(format!("127.0.0.1:{client_port}"))
            .args(args)
            .output()
            .expect("Apache's zkCli.sh (Debian's zookeeper)");
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    let created = zkcli(&["create", "/packaged", "from-zkcli"]);
    assert!(created.contains("Created /packaged"), "{created}");
    let got = zkcli(&["get", "/packaged"]);
    assert!(got.lines().any(|l| l == "from-zkcli"), "{got}");
    let report = String::from_utf8_lossy(&status().stdout).into_owned();
    assert!(report.contains("Zxid: 0x"), "{report}");

    // The data is the service user's, written under the unit's umask.
    for entry in std::fs::read_dir(&data).unwrap() {
        let meta = entry.unwrap().metadata().unwrap();
        if as_root {
            assert_eq!(meta.uid().to_string(), uid_text, "{meta:?}");
        }
        assert_eq!(meta.mode() & 0o007, 0, "UMask=0027: {:o}", meta.mode());
    }

    // KillSignal=SIGTERM: a clean stop.
    run(Command::new("kill").args(["-TERM", &guard.0.id().to_string()]));
    let exit = guard.0.wait().unwrap();
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(exit.success(), "{exit:?}:\n{log}");
    assert!(!status().status.success(), "status reports a stopped server as running");
    drop(guard);

    // Starting the real unit needs systemd as PID 1.
    let pid1 = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
    if pid1.trim() != "systemd" {
        eprintln!("PID 1 is {:?}, not systemd: the unit itself was not started", pid1.trim());
    } else {
        eprintln!("systemd is PID 1, but this test does not install the unit into the machine's systemd");
    }
}
