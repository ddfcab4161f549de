//! C programs compiled against Apache's zookeeper.h run on libzkrs (through the
//! libzookeeper_mt.so.2 soname), against zkrs-server and against Apache ZooKeeper; Debian's own
//! cli_mt and load_gen run unchanged on it.

mod support;

use std::path::Path;
use std::time::Duration;
use support::*;

fn api_test(target: Target) {
    let server = start(target);
    let exe = compile_c("api_test.c", true);
    let (ok, out) = run_on_libzkrs(&exe, &[&server.connect_string()], None, Duration::from_secs(60));
    assert!(ok && out.contains("ALL OK"), "{target:?}:\n{out}");
}

#[test]
fn api_behaviour_on_zkrs_server() {
    api_test(Target::Zkrs);
}

#[test]
fn api_behaviour_on_apache_zookeeper() {
    api_test(Target::Apache);
}

fn cli_mt(target: Target) {
    let server = start(target);
    let script = "create /c\nset /c abc\nget /c\ncreate /c/d\nls /c\ndelete /c/d\ndelete /c\nls /\nquit\n";
    let (ok, out) = run_on_libzkrs(
        Path::new("/usr/lib/zookeeper/bin/cli_mt"),
        &[&server.connect_string()],
        Some(script),
        Duration::from_secs(30),
    );
    assert!(ok, "{out}");
    for want in [
        "state = CONNECTED_STATE",
        "[/c]: rc = 0",
        "value_len = 3",
        "abc",
        "[/c/d]: rc = 0",
        "\td\n",
        "Watcher CHILD_EVENT",
        "Quitting",
    ] {
        assert!(out.contains(want), "{target:?}: missing {want:?} in\n{out}");
    }
}

#[test]
fn debian_cli_mt_on_zkrs_server() {
    cli_mt(Target::Zkrs);
}

#[test]
fn debian_cli_mt_on_apache_zookeeper() {
    cli_mt(Target::Apache);
}

#[test]
fn debian_load_gen_cycles() {
    let server = start(Target::Zkrs);
    // load_gen loops for ever: let it run a few seconds, then count completed cycles.
    let (_, out) = run_on_libzkrs(
        Path::new("/usr/lib/zookeeper/bin/load_gen"),
        &[&server.connect_string(), "/lg", "200"],
        None,
        Duration::from_secs(6),
    );
    let cycles = out.matches("Starting the delete cycle").count();
    assert!(cycles >= 3, "only {cycles} load_gen cycles:\n{}", &out[out.len().saturating_sub(3000)..]);
    assert!(!out.contains("ZOO_ERROR"), "{out}");
}

/// Null data, zoo_set_servers, single-watcher removal through checkWatches, deterministic order and
/// bad input: the same program passes on Debian's libzookeeper_mt (the reference) and on libzkrs.
fn gaps(target: Target) {
    let server = start(target);
    let exe = compile_c("gaps_test.c", true);
    let cs = server.connect_string();
    let (ok, out) = run_on_libzkrs(&exe, &[&cs, "zkrs"], None, Duration::from_secs(90));
    assert!(ok && out.contains("ALL OK"), "{target:?} on libzkrs:\n{out}");
    if Path::new(REFERENCE_LIB).exists() {
        let (ok, out) = run_on_reference(&exe, &[&cs], Duration::from_secs(90));
        assert!(ok && out.contains("ALL OK"), "{target:?} on Debian's library:\n{out}");
    }
}

#[test]
fn null_data_servers_watch_removal_bad_input_on_zkrs_server() {
    gaps(Target::Zkrs);
}

#[test]
fn null_data_servers_watch_removal_bad_input_on_apache_zookeeper() {
    gaps(Target::Apache);
}

/// Builds tests/c/<program>.c against include/ (libzkrs's additions are declared in zkrs_ext.h,
/// which Apache's headers lack), links it with libzkrs directly and runs it on `target`.
fn additions_program(program: &str, target: Target) {
    let server = start(target);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = tempfile::TempPath::try_from_path(
        std::env::temp_dir().join(format!("zkrs-{}-{program}-{target:?}", std::process::id())),
    )
    .expect("a temporary path");
    let o = std::process::Command::new("gcc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-DTHREADED")
        .arg(format!("-I{}", root.parent().unwrap().join("include").display()))
        .arg("-o")
        .arg(&exe)
        .arg(root.join(format!("tests/c/{program}.c")))
        .arg(libzkrs())
        .arg("-lpthread")
        .output()
        .expect("gcc");
    assert!(o.status.success(), "gcc:\n{}", String::from_utf8_lossy(&o.stderr));
    let (ok, out) = run_on_libzkrs(&exe, &[&server.connect_string()], None, Duration::from_secs(60));
    assert!(ok && out.contains("ALL OK"), "{target:?}:\n{out}");
}

/// multiRead: two existing nodes and a missing one, null data, truncation, String_vectors freed
/// with deallocate_String_vector, bad input refused.
fn multi_read(target: Target) {
    additions_program("multi_read_test", target);
}

#[test]
fn multi_read_on_zkrs_server() {
    multi_read(Target::Zkrs);
}

#[test]
fn multi_read_on_apache_zookeeper() {
    multi_read(Target::Apache);
}

/// The other additions: persistent and recursive watches and their removal, getEphemerals,
/// getAllChildrenNumber and whoAmI, each as Apache's server answers them too.
#[test]
fn additions_on_zkrs_server() {
    additions_program("ext_test", Target::Zkrs);
}

#[test]
fn additions_on_apache_zookeeper() {
    additions_program("ext_test", Target::Apache);
}
