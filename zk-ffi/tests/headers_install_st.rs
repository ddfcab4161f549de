//! include/ against Apache's header, the install script, and the single-threaded library.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn include() -> PathBuf {
    root().join("include")
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("zkrs-h-{}-{name}", std::process::id()))
}

/// gcc `src` with `args` into a temporary executable (removed when the result drops).
fn gcc(src: &Path, name: &str, args: &[&str]) -> tempfile::TempPath {
    let out = tempfile::TempPath::try_from_path(tmp(name)).expect("a temporary path");
    let o = Command::new("gcc").arg("-o").arg(&out).arg(src).args(args).output().expect("gcc");
    assert!(o.status.success(), "gcc {}:\n{}", src.display(), String::from_utf8_lossy(&o.stderr));
    out
}

fn output(exe: &Path) -> String {
    let o = Command::new(exe).env("LD_LIBRARY_PATH", libzkrs().parent().unwrap()).output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()
}

fn c(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(name)
}

/// Every ABI struct and every jute record has the same size and field offsets under our headers
/// as under Apache's (the programs also name every field, so the names match too).
#[test]
fn our_headers_lay_out_structs_as_apaches() {
    if !Path::new("/usr/include/zookeeper/zookeeper.h").exists() {
        eprintln!("Apache's header not installed: skipped");
        return;
    }
    let inc = format!("-I{}", include().display());
    for prog in ["layout.c", "jute_layout.c"] {
        let ours = gcc(&c(prog), &format!("ours-{prog}"), &["-DTHREADED", &inc]);
        let theirs = gcc(&c(prog), &format!("theirs-{prog}"), &["-DTHREADED"]);
        let (a, b) = (output(&ours), output(&theirs));
        assert!(a.lines().count() > 50, "{a}");
        assert_eq!(a, b, "{prog}");
    }
}

/// Typical programs compile against include/ alone and link with -lzkrs: our C tests (mt and st)
/// and, when the Apache sources are at hand, Apache's own cli.c (mt and st) and load_gen.c.
#[test]
fn programs_written_for_apaches_header_compile_against_ours() {
    let inc = format!("-I{}", include().display());
    let inc2 = format!("-I{}", include().join("zookeeper").display());
    let libdir = format!("-L{}", libzkrs().parent().unwrap().display());
    for prog in ["api_test.c", "gaps_test.c"] {
        gcc(
            &c(prog),
            &format!("mt-{prog}"),
            &["-Wall", "-Werror", "-DTHREADED", &inc, &libdir, "-lzkrs", "-lpthread"],
        );
    }
    gcc(&c("st_test.c"), "st-compile", &["-Wall", "-Werror", &inc2, &libdir, "-lzkrs", "-lpthread"]);
    let mirror = Path::new("/work/.mirror/apache+zookeeper/repo");
    if !mirror.exists() {
        return;
    }
    for (file, threaded) in [("cli.c", true), ("cli.c", false), ("load_gen.c", true)] {
        let o = Command::new("git")
            .arg("-C")
            .arg(mirror)
            .arg("show")
            .arg(format!("release-3.8.0-1:zookeeper-client/zookeeper-client-c/src/{file}"))
            .output()
            .unwrap();
        assert!(o.status.success());
        let src = tempfile::TempPath::try_from_path(tmp(file)).expect("a temporary path");
        std::fs::write(&src, &o.stdout).unwrap();
        let mut args = vec![inc2.as_str(), libdir.as_str(), "-lzkrs", "-lpthread"];
        if threaded {
            args.insert(0, "-DTHREADED");
        }
        gcc(&src, &format!("apache-{file}-{threaded}"), &args);
    }
}

fn build_st() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let archive = libzkrs().parent().unwrap().join("libzkrs.a");
    let st = Command::new(root().join("zk-ffi/build-st.sh")).arg(&archive).arg(d.path()).status().unwrap();
    assert!(st.success());
    d
}

const SYNC_CALLS: [&str; 23] = [
    "zoo_create",
    "zoo_create2",
    "zoo_create_ttl",
    "zoo_create2_ttl",
    "zoo_delete",
    "zoo_exists",
    "zoo_wexists",
    "zoo_get",
    "zoo_wget",
    "zoo_set",
    "zoo_set2",
    "zoo_get_children",
    "zoo_wget_children",
    "zoo_get_children2",
    "zoo_wget_children2",
    "zoo_get_acl",
    "zoo_set_acl",
    "zoo_multi",
    "zoo_getconfig",
    "zoo_wgetconfig",
    "zoo_reconfig",
    "zoo_remove_watches",
    "zoo_remove_all_watches",
];

fn exported(lib: &Path) -> std::collections::BTreeSet<String> {
    let out = Command::new("objdump").arg("-T").arg(lib).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[1] == "g" && f[3] != "*UND*").then(|| f[f.len() - 1].to_owned())
        })
        .collect()
}

/// libzookeeper_st.so.2 exports Apache's 177 (the mt set without the 23 sync calls) plus our
/// asynchronous additions (addWatch, getEphemerals, multiRead and its two op helpers), under the
/// st soname; it matches Debian's st library when installed.
#[test]
fn st_library_exports_the_single_threaded_set() {
    let d = build_st();
    let st = d.path().join("libzookeeper_st.so.2");
    let ours = exported(&st);
    let mut expected = exported(Path::new(REFERENCE_LIB));
    assert_eq!(expected.len(), 200);
    for s in SYNC_CALLS {
        assert!(expected.remove(s), "{s}");
    }
    assert_eq!(expected.len(), 177);
    let missing: Vec<_> = expected.difference(&ours).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    let extra: Vec<_> = ours.difference(&expected).collect();
    assert_eq!(
        extra,
        [
            "zoo_aadd_watch",
            "zoo_aget_ephemerals",
            "zoo_amulti_read",
            "zoo_get_children_op_init",
            "zoo_get_data_op_init"
        ],
        "extra exports"
    );
    let dynamic = Command::new("objdump").arg("-p").arg(&st).output().unwrap();
    assert!(String::from_utf8_lossy(&dynamic.stdout).contains("SONAME               libzookeeper_st.so.2"));
    let debian = Path::new("/usr/lib/x86_64-linux-gnu/libzookeeper_st.so.2");
    if debian.exists() {
        let theirs = exported(debian);
        let missing: Vec<_> = theirs.difference(&ours).collect();
        assert!(missing.is_empty(), "missing vs Debian's st: {missing:?}");
    }
}

/// A poll() loop drives an st handle: connect, async calls, a watch, close; every callback runs on
/// the application's thread inside zookeeper_process. Apache's cli.c built single-threaded runs too.
#[test]
fn st_handle_driven_by_poll_on_zkrs_server() {
    let d = build_st();
    let server = start(Target::Zkrs);
    let inc2 = format!("-I{}", include().join("zookeeper").display());
    let lib = d.path().join("libzookeeper_st.so.2");
    let exe = gcc(&c("st_test.c"), "st_test", &["-Wall", &inc2, lib.to_str().unwrap(), "-lpthread"]);
    let child = Command::new(&exe)
        .arg(server.connect_string())
        .env("LD_LIBRARY_PATH", d.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, out) = wait_output(child, Duration::from_secs(60));
    assert!(ok && out.contains("ALL OK"), "{out}");
}

/// install.sh lays out the libraries, soname links, headers and pkg-config files; a program built
/// with `pkg-config zookeeper_mt` flags runs on the installed library.
#[test]
fn install_script_into_prefix() {
    let prefix = tempfile::tempdir().unwrap();
    // The library sits in <target>/<profile>/ after `cargo build`, but only in
    // <target>/<profile>/deps/ in a fresh clone where just `cargo test` ran: install from wherever
    // it is, by pointing the script at a profile directory holding it.
    let lib_dir = libzkrs().parent().unwrap().to_path_buf();
    let staged = tempfile::tempdir().unwrap();
    let profile_dir = staged.path().join("debug");
    std::fs::create_dir_all(&profile_dir).unwrap();
    for f in ["libzkrs.so", "libzkrs.a"] {
        std::fs::copy(lib_dir.join(f), profile_dir.join(f))
            .unwrap_or_else(|e| panic!("{f} in {}: {e}", lib_dir.display()));
    }
    let st = Command::new(root().join("zk-ffi/install.sh"))
        .arg(prefix.path())
        .args(["--no-build", "--profile", "debug"])
        .env("CARGO_TARGET_DIR", staged.path())
        .status()
        .unwrap();
    assert!(st.success());
    let lib = prefix.path().join("lib");
    for f in ["libzkrs.so", "libzookeeper_st.so.2"] {
        assert!(lib.join(f).is_file(), "{f}");
    }
    for (link, to) in [
        ("libzookeeper_mt.so.2", "libzkrs.so"),
        ("libzookeeper_mt.so", "libzookeeper_mt.so.2"),
        ("libzookeeper_st.so", "libzookeeper_st.so.2"),
    ] {
        assert_eq!(std::fs::read_link(lib.join(link)).unwrap(), Path::new(to), "{link}");
    }
    for h in [
        "zookeeper.h",
        "zookeeper.jute.h",
        "zookeeper_log.h",
        "zookeeper_version.h",
        "proto.h",
        "recordio.h",
        "zkrs_ext.h",
    ] {
        assert!(prefix.path().join("include/zookeeper").join(h).is_file(), "{h}");
    }
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "zookeeper_mt"])
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .output()
        .unwrap();
    assert!(pc.status.success());
    let flags = String::from_utf8(pc.stdout).unwrap();
    assert!(flags.contains("-DTHREADED") && flags.contains("-lzookeeper_mt"), "{flags}");
    for name in ["zkrs", "zookeeper_st"] {
        let ok = Command::new("pkg-config")
            .args(["--exists", name])
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .status()
            .unwrap();
        assert!(ok.success(), "{name}.pc");
    }
    let mut args: Vec<&str> = flags.split_whitespace().collect();
    args.push("-lpthread");
    let exe = gcc(&c("gaps_test.c"), "pc-gaps", &args);
    let server = start(Target::Zkrs);
    let child = Command::new(&exe)
        .args([server.connect_string().as_str(), "zkrs"])
        .env("LD_LIBRARY_PATH", &lib)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, out) = wait_output(child, Duration::from_secs(90));
    assert!(ok && out.contains("ALL OK"), "{out}");
}
