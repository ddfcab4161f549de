//! include/zookeeper/zkrs_ext.h is what cbindgen writes from src/ext.rs, so a change to a Rust
//! signature of libzkrs's additions cannot leave the C header behind; and the header compiles
//! (C and C++, with and without THREADED) against include/.

use std::path::PathBuf;
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn committed_header() -> PathBuf {
    crate_dir().parent().unwrap().join("include/zookeeper/zkrs_ext.h")
}

/// What cbindgen writes now, with the crate's cbindgen.toml, from src/ext.rs alone.
fn generate() -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/ext.rs"))
        .generate()
        .expect("cbindgen parses src/ext.rs");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("UTF-8")
}

/// A line diff good enough to read in a test failure: the lines each side lacks, numbered.
fn diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<_>, Vec<_>) = (old.lines().collect(), new.lines().collect());
    let mut out = String::new();
    for (i, l) in a.iter().enumerate() {
        if !b.contains(l) {
            out.push_str(&format!("-{:4} {l}\n", i + 1));
        }
    }
    for (i, l) in b.iter().enumerate() {
        if !a.contains(l) {
            out.push_str(&format!("+{:4} {l}\n", i + 1));
        }
    }
    if out.is_empty() {
        out.push_str("(same lines, in another order)\n");
    }
    out
}

#[test]
fn committed_header_is_what_cbindgen_generates() {
    let fresh = generate();
    let path = committed_header();
    if std::env::var_os("ZKRS_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} differs from what cbindgen generates from src/ext.rs (- committed, + generated):\n{}\
         Review the change and run `ZKRS_BLESS=1 cargo test -p zk-ffi --test ext_header`.",
        path.display(),
        diff(&committed, &fresh)
    );
}

/// Every function src/ext.rs exports is declared, and nothing of Apache's API is redeclared.
#[test]
fn header_declares_exactly_the_additions() {
    let src = std::fs::read_to_string(crate_dir().join("src/ext.rs")).unwrap();
    let exported: Vec<&str> =
        src.split("pub extern \"C\" fn ").skip(1).map(|rest| rest.split('(').next().unwrap()).collect();
    assert_eq!(exported.len(), 10, "{exported:?}");
    let header = std::fs::read_to_string(committed_header()).unwrap();
    for f in &exported {
        assert!(header.contains(&format!(" {f}(")), "{f} is not declared in zkrs_ext.h");
    }
    assert_eq!(header.matches("ZOOAPI").count(), exported.len(), "a declaration ext.rs does not export");
    let apache =
        std::fs::read_to_string(crate_dir().parent().unwrap().join("include/zookeeper/zookeeper.h")).unwrap();
    for f in &exported {
        assert!(!apache.contains(&format!(" {f}(")), "{f} is declared in zookeeper.h too");
    }
}

fn compile(compiler: &str, lang: &str, src: &str, defines: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("t.{lang}"));
    std::fs::write(&file, src).unwrap();
    let include = crate_dir().parent().unwrap().join("include");
    let mut cmd = Command::new(compiler);
    cmd.args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(format!("-I{}", include.display()))
        .args(defines)
        .arg(&file);
    if lang == "c" {
        cmd.args(["-std=c11", "-Wstrict-prototypes", "-Wmissing-prototypes"]);
    }
    let o = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && compiler != "cc" => {
            eprintln!("{compiler} not installed: skipped");
            return;
        }
        Err(e) => panic!("{compiler}: {e}"),
    };
    assert!(o.status.success(), "{compiler} {defines:?}:\n{}", String::from_utf8_lossy(&o.stderr));
}

/// The header stands on its own (it includes zookeeper.h) and its declarations type-check against
/// the calls a program makes, with THREADED (mt) and without (st, where the synchronous calls are
/// absent), in C and in C++.
#[test]
fn header_compiles_in_c_and_cxx() {
    let common = r#"#include <zookeeper/zkrs_ext.h>
static void w(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh; (void)type; (void)state; (void)path; (void)ctx;
}
static void done(int rc, const void *data) { (void)rc; (void)data; }
static void names(int rc, const struct String_vector *s, const void *data) { (void)rc; (void)s; (void)data; }
int calls(zhandle_t *zh);
int calls(zhandle_t *zh) {
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    char buf[16];
    struct Stat stat;
    struct String_vector children;
    int rc = 0;
    zoo_get_data_op_init(&ops[0], "/a", buf, (int)sizeof buf, &stat);
    zoo_get_children_op_init(&ops[1], "/", &children);
    rc |= zoo_amulti_read(zh, 2, ops, results, done, NULL);
    rc |= zoo_aadd_watch(zh, "/a", ZOO_ADD_WATCH_PERSISTENT_RECURSIVE, w, NULL, done, NULL);
    rc |= zoo_aget_ephemerals(zh, "/", names, NULL);
#ifdef THREADED
    {
        struct ClientInfo_vector infos;
        int count;
        rc |= zoo_add_watch(zh, "/a", ZOO_ADD_WATCH_PERSISTENT, w, NULL);
        rc |= zoo_get_ephemerals(zh, "/", &children);
        rc |= zoo_get_all_children_number(zh, "/", &count);
        rc |= zoo_whoami(zh, &infos);
        rc |= zoo_multi_read(zh, 2, ops, results);
    }
#else
    rc |= zoo_add_watch;
#endif
    return rc;
}
"#;
    // Without THREADED the synchronous calls must not be declared: the `#else` branch above names
    // one, so the st compile is expected to fail exactly there.
    compile("cc", "c", common, &["-DTHREADED"]);
    compile("c++", "cpp", common, &["-DTHREADED"]);
    let st = common.replace("    rc |= zoo_add_watch;\n", "");
    compile("cc", "c", &st, &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("st.c");
    std::fs::write(&file, common).unwrap();
    let include = crate_dir().parent().unwrap().join("include");
    let o = Command::new("cc")
        .args(["-fsyntax-only", &format!("-I{}", include.display())])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("zoo_add_watch"), "{err}");
}
