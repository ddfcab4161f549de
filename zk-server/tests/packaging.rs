//! The Debian package: its inputs (zk-server/debian, `[package.metadata.deb]`: the systemd unit
//! passes `systemd-analyze verify`, the maintainer scripts parse and carry cargo-deb's
//! `#DEBHELPER#` token, every asset taken from the source tree exists), and the package
//! `zk-server/debian/build-deb.sh` builds from this test run's (dev profile) binaries: its files,
//! modes, owners, conffiles, maintainer scripts and control fields, lintian-clean.
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
