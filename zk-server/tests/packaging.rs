//! The Debian package's inputs (zk-server/debian, `[package.metadata.deb]`): the systemd unit
//! passes `systemd-analyze verify`, the maintainer scripts parse and carry cargo-deb's
//! `#DEBHELPER#` token, and every asset taken from the source tree exists. Building the package
//! itself (a release build and cargo-deb) is `zk-server/debian/build-deb.sh`, outside the test run.
use std::path::Path;
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
