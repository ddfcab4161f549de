//! libzkrs's Debian packages (zk-ffi/debian/build-deb.sh), built from this test run's library:
//! their contents (the libraries under Apache's sonames with their links, the headers, the
//! pkg-config files), their control fields, lintian (when installed) with no error or warning,
//! and a program built with `pkg-config zookeeper_mt` against the unpacked packages that runs
//! on them against a zkrs server.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::deb::*;
use support::*;

/// Builds both packages into `out`: (libzkrs2, libzkrs-dev).
fn build(out: &Path) -> (PathBuf, PathBuf) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("debian/build-deb.sh");
    let lib_dir = libzkrs().parent().unwrap().to_path_buf();
    let listed = run(Command::new(script).arg(out).arg(&lib_dir));
    let debs: Vec<PathBuf> = listed.lines().map(PathBuf::from).collect();
    assert_eq!(debs.len(), 2, "{listed}");
    (debs[0].clone(), debs[1].clone())
}

#[test]
fn library_packages_hold_the_libraries_headers_and_pkg_config_files() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, dev) = build(dir.path());
    let lib = "/usr/lib/x86_64-linux-gnu";
    let rt = contents(&runtime);
    for want in [
        format!("{lib}/libzookeeper_mt.so.2.0.0"),
        format!("{lib}/libzookeeper_mt.so.2 -> libzookeeper_mt.so.2.0.0"),
        format!("{lib}/libzookeeper_st.so.2.0.0"),
        format!("{lib}/libzookeeper_st.so.2 -> libzookeeper_st.so.2.0.0"),
        "/usr/share/doc/libzkrs2/copyright".to_string(),
        "/usr/share/doc/libzkrs2/changelog.Debian.gz".to_string(),
    ] {
        assert!(rt.contains(&want), "libzkrs2 lacks {want}: {rt:#?}");
    }
    let d = contents(&dev);
    for want in [
        format!("{lib}/libzkrs.so -> libzookeeper_mt.so.2"),
        format!("{lib}/libzookeeper_mt.so -> libzookeeper_mt.so.2"),
        format!("{lib}/libzookeeper_st.so -> libzookeeper_st.so.2"),
        format!("{lib}/pkgconfig/zkrs.pc"),
        format!("{lib}/pkgconfig/zookeeper_mt.pc"),
        format!("{lib}/pkgconfig/zookeeper_st.pc"),
    ] {
        assert!(d.contains(&want), "libzkrs-dev lacks {want}: {d:#?}");
    }
    let headers =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/zookeeper")).unwrap();
    for h in headers {
        let name = h.unwrap().file_name().into_string().unwrap();
        assert!(d.contains(&format!("/usr/include/zookeeper/{name}")), "libzkrs-dev lacks {name}");
    }
    // The libraries carry Apache's sonames, and the packages take the place of Debian's.
    for (f, soname) in [
        ("libzookeeper_mt.so.2.0.0", "libzookeeper_mt.so.2"),
        ("libzookeeper_st.so.2.0.0", "libzookeeper_st.so.2"),
    ] {
        let root = tempfile::tempdir().unwrap();
        run(Command::new("dpkg-deb").arg("-x").arg(&runtime).arg(root.path()));
        let dynamic = run(Command::new("objdump").arg("-p").arg(root.path().join(&lib[1..]).join(f)));
        assert!(dynamic.contains(&format!("SONAME               {soname}")), "{f}: {dynamic}");
    }
    assert_eq!(field(&runtime, "Provides"), "libzookeeper-mt2, libzookeeper-st2");
    assert_eq!(field(&runtime, "Conflicts"), "libzookeeper-mt2, libzookeeper-st2");
    assert_eq!(field(&runtime, "Section"), "libs");
    assert!(field(&runtime, "Depends").starts_with("libc6 (>= 2."), "{}", field(&runtime, "Depends"));
    assert_eq!(field(&dev, "Depends"), format!("libzkrs2 (= {})", field(&runtime, "Version")));
    assert_eq!(field(&dev, "Provides"), "libzookeeper-mt-dev, libzookeeper-st-dev");
    let control = run(Command::new("dpkg-deb").arg("--ctrl-tarfile").arg(&runtime).stdout(Stdio::piped()));
    for member in ["shlibs", "triggers", "md5sums"] {
        assert!(control.contains(member), "libzkrs2's control lacks {member}");
    }
    assert_lintian_clean(&[&runtime, &dev]);
}

/// Unpacked into a throw-away root, the packages build a program with the flags
/// `pkg-config zookeeper_mt` gives (libzkrs's own header included) and run it.
#[test]
fn a_program_builds_and_runs_on_the_unpacked_packages() {
    let dir = tempfile::tempdir().unwrap();
    let (runtime, dev) = build(dir.path());
    let root = dir.path().join("root");
    for deb in [&runtime, &dev] {
        run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root));
    }
    let libdir = root.join("usr/lib/x86_64-linux-gnu");
    let flags = run(Command::new("pkg-config")
        .args(["--cflags", "--libs", "zookeeper_mt"])
        .env("PKG_CONFIG_PATH", libdir.join("pkgconfig"))
        .env("PKG_CONFIG_SYSROOT_DIR", &root));
    let src = dir.path().join("count.c");
    std::fs::write(
        &src,
        r#"#include <zookeeper/zkrs_ext.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    zhandle_t *zh = zookeeper_init(argv[argc - 1], NULL, 10000, NULL, NULL, 0);
    int count = -1, rc = ZCONNECTIONLOSS;
    for (int i = 0; i < 100 && rc == ZCONNECTIONLOSS; i++) {
        rc = zoo_get_all_children_number(zh, "/", &count);
        if (rc == ZCONNECTIONLOSS) usleep(100000);
    }
    printf("rc=%d count=%d\n", rc, count);
    zookeeper_close(zh);
    return rc == ZOK ? 0 : 1;
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("count");
    run(Command::new("gcc").arg("-o").arg(&exe).arg(&src).args(flags.split_whitespace()));
    let needed = run(Command::new("objdump").arg("-p").arg(&exe));
    assert!(needed.contains("NEEDED               libzookeeper_mt.so.2"), "{needed}");
    let server = start(Target::Zkrs);
    let child = Command::new(&exe)
        .arg(server.connect_string())
        .env("LD_LIBRARY_PATH", &libdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, out) = wait_output(child, Duration::from_secs(30));
    // "/" holds /zookeeper, its config and quota nodes.
    assert!(ok && out.contains("rc=0 count=3"), "{out}");
}
