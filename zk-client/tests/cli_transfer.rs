//! zkrs-cli's `export` and `import` between live servers, zkrs and Apache ZooKeeper in every
//! direction: a subtree with data, nesting, a digest ACL, a container, a TTL node, sequential
//! children after deletes and an ephemeral is exported, imported elsewhere, and compared node
//! for node (data, ACL, cversion, child count); the next sequential child gets the same name on
//! both sides; the container and the TTL node prove their kind on the target by being reaped
//! once empty. Then the refusals: an existing target, bad files, missing auth.
// Real servers on real time: the reaping of the imported container and TTL node is waited for.
#![allow(clippy::disallowed_methods)]
#[macro_use]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Target, TestServer};
use zk_client::{acl, Acl, Client, CreateMode, Id};

const T: Duration = Duration::from_secs(10);
/// The TTL of the exported TTL node, ms: short enough to watch it reaped on the target.
const TTL_MS: u64 = 2000;

/// Runs zkrs-cli once (off the runtime's threads): stdout, stderr, exit code.
async fn cli(server: &str, args: &[&str]) -> (String, String, i32) {
    let (server, args): (String, Vec<String>) = (server.into(), args.iter().map(|s| s.to_string()).collect());
    tokio::task::spawn_blocking(move || {
        let o = Command::new(env!("CARGO_BIN_EXE_zkrs-cli"))
            .args(["-server", &server])
            .args(&args)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            o.status.code().unwrap_or(-1),
        )
    })
    .await
    .unwrap()
}

async fn connect(addr: &str) -> Client {
    let c = Client::connect(addr, T).await.unwrap();
    c.add_auth("digest", b"u:pw").await.unwrap();
    c
}

/// The caller's digest identity with every permission (`auth` expands to it).
fn mine() -> Vec<Acl> {
    vec![Acl { perms: zk_proto::perms::ALL, id: Id { scheme: "auth".into(), id: String::new() } }]
}

/// Builds the source subtree at `root`; returns the session holding its ephemeral (keep it open).
async fn build_source(addr: &str, root: &str) -> Client {
    let c = connect(addr).await;
    let open = acl::open_unsafe();
    let p = |rel: &str| format!("{root}/{rel}");
    c.create(root, b"root data", &open, CreateMode::Persistent).await.unwrap();
    c.create(&p("cfg"), b"\x00\xffbinary\n", &mine(), CreateMode::Persistent).await.unwrap();
    c.create(&p("cfg/deep"), b"1", &mine(), CreateMode::Persistent).await.unwrap();
    c.create(&p("cfg/deep/er"), b"", &open, CreateMode::Persistent).await.unwrap();
    c.create(&p("cfg/deep/er/est"), "ünïcode".as_bytes(), &acl::read_unsafe(), CreateMode::Persistent)
        .await
        .unwrap();
    c.create(&p("box"), b"container", &open, CreateMode::Container).await.unwrap();
    c.create(&p("box/item"), b"i", &open, CreateMode::Persistent).await.unwrap();
    c.create_ttl(&p("ttl"), b"ttl", &open, CreateMode::PersistentWithTtl, Duration::from_millis(TTL_MS))
        .await
        .unwrap();
    c.create(&p("ttl/keep"), b"k", &open, CreateMode::Persistent).await.unwrap();
    c.create(&p("seq"), b"", &open, CreateMode::Persistent).await.unwrap();
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(c.create(&p("seq/s-"), b"x", &open, CreateMode::PersistentSequential).await.unwrap());
    }
    for m in &made[1..4] {
        c.delete(m, -1).await.unwrap();
    }
    c.create(&p("sessions"), b"", &open, CreateMode::Persistent).await.unwrap();
    c.create(&p("sessions/kept"), b"", &open, CreateMode::Persistent).await.unwrap();
    c.create(&p("sessions/mine"), b"e", &open, CreateMode::Ephemeral).await.unwrap();
    let (_, st) = c.get_data(&p("seq")).await.unwrap();
    assert_eq!((st.cversion, st.num_children), (8, 2), "sequential children after deletes");
    c
}

/// Every node under `root` (ephemerals left out), depth-first, relative paths.
async fn walk(c: &Client, root: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let path = if rel.is_empty() { root.to_owned() } else { format!("{root}/{rel}") };
        let (_, st) = c.get_data(&path).await.unwrap();
        if st.ephemeral_owner != 0 {
            continue;
        }
        out.push(rel.clone());
        let mut kids = c.get_children(&path).await.unwrap();
        kids.sort();
        for k in kids.into_iter().rev() {
            stack.push(if rel.is_empty() { k } else { format!("{rel}/{k}") });
        }
    }
    out
}

/// Node for node: data, ACL, cversion and child count. Under `sessions`, whose ephemeral was
/// not imported, the target has one child fewer and so a cversion one higher (its count of
/// creates is the same).
async fn assert_same_tree(src: &Client, src_root: &str, dst: &Client, dst_root: &str) {
    let nodes = walk(src, src_root).await;
    assert_eq!(nodes, walk(dst, dst_root).await, "the same nodes");
    assert_eq!(nodes.len(), 14);
    for rel in nodes {
        let at = |root: &str| if rel.is_empty() { root.to_owned() } else { format!("{root}/{rel}") };
        let (sd, ss) = src.get_data(&at(src_root)).await.unwrap();
        let (dd, ds) = dst.get_data(&at(dst_root)).await.unwrap();
        assert_eq!(sd, dd, "data of {rel}");
        assert_eq!(
            src.get_acl(&at(src_root)).await.unwrap().0,
            dst.get_acl(&at(dst_root)).await.unwrap().0,
            "ACL of {rel}"
        );
        let skipped = i32::from(rel == "sessions");
        assert_eq!(
            (ss.cversion + skipped, ss.num_children - skipped),
            (ds.cversion, ds.num_children),
            "stat of {rel}"
        );
    }
}

async fn wait_gone(c: &Client, path: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.exists(path).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "{what} {path} was not reaped: not created with its kind");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Export from `from`, import into `to` (the same server when `same`), compare.
async fn round_trip(from: Target, to: Target) {
    let src_srv = TestServer::start(from);
    let other;
    let dst_srv = if from == to {
        &src_srv
    } else {
        other = TestServer::start(to);
        &other
    };
    let (src_root, dst_root) = (support::unique("src"), support::unique("dst"));
    let src = build_source(&src_srv.addr, &src_root).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tree.json");
    let f = file.to_str().unwrap();
    let (box_kind, ttl_kind) = (format!("{src_root}/box=container"), format!("{src_root}/ttl=ttl:{TTL_MS}"));
    let (out, err, code) = cli(
        &src_srv.addr,
        &[
            "export",
            "--sync",
            "--auth",
            "digest:u:pw",
            "--kind",
            &box_kind,
            "--kind",
            &ttl_kind,
            &src_root,
            f,
        ],
    )
    .await;
    assert_eq!(code, 0, "export: {out}{err}");
    assert!(out.is_empty(), "nothing on stdout when writing a file: {out}");
    assert!(err.contains("skipped ephemeral") && err.contains("/sessions/mine"), "{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(r#""path":"box","kind":"container""#), "{text}");
    assert!(text.contains(&format!(r#""path":"ttl","kind":"ttl","ttl_ms":{TTL_MS}"#)), "{text}");
    assert!(!text.contains("mine"), "the ephemeral is not exported");

    // The same export to stdout is the same document (apart from its time).
    let (out, _, code) = cli(
        &src_srv.addr,
        &["export", "--auth", "digest:u:pw", "--kind", &box_kind, "--kind", &ttl_kind, &src_root],
    )
    .await;
    assert_eq!(code, 0);
    let nodes = |t: &str| t[t.find("\"nodes\"").unwrap()..].to_owned();
    assert_eq!(nodes(&out), nodes(&text));

    let (out, err, code) = cli(&dst_srv.addr, &["import", "--auth", "digest:u:pw", f, &dst_root]).await;
    assert_eq!(code, 0, "import: {out}{err}");
    assert!(err.contains("14 nodes created"), "{err}");
    let dst = connect(&dst_srv.addr).await;
    assert_same_tree(&src, &src_root, &dst, &dst_root).await;

    // The next sequential child is named alike on both sides.
    for parent in ["", "/seq", "/sessions", "/cfg/deep"] {
        let next = |c: &Client, root: &str| {
            let c = c.clone();
            let path = format!("{root}{parent}/n-");
            async move { c.create(&path, b"", &mine(), CreateMode::PersistentSequential).await.unwrap() }
        };
        let (a, b) = (next(&src, &src_root).await, next(&dst, &dst_root).await);
        assert_eq!(a.strip_prefix(&src_root), b.strip_prefix(&dst_root), "next sequential under {parent}");
    }
    // Kinds: emptied, the container and the TTL node are reaped on the target.
    dst.delete(&format!("{dst_root}/box/item"), -1).await.unwrap();
    dst.delete(&format!("{dst_root}/ttl/keep"), -1).await.unwrap();
    dst.create(&format!("{dst_root}/plain"), b"", &mine(), CreateMode::Persistent).await.unwrap();
    wait_gone(&dst, &format!("{dst_root}/box"), "container").await;
    wait_gone(&dst, &format!("{dst_root}/ttl"), "TTL node").await;
    assert!(dst.exists(&format!("{dst_root}/cfg")).await.unwrap().is_some());
    src.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkrs_to_apache() {
    round_trip(Target::Zkrs, Target::Apache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_to_zkrs() {
    round_trip(Target::Apache, Target::Zkrs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkrs_to_zkrs() {
    round_trip(Target::Zkrs, Target::Zkrs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_to_apache() {
    round_trip(Target::Apache, Target::Apache).await;
}

/// What is under `root`, with data: to show that nothing was written.
async fn snapshot(c: &Client, root: &str) -> Vec<(String, Vec<u8>)> {
    if c.exists(root).await.unwrap().is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for rel in walk(c, root).await {
        let path = if rel.is_empty() { root.to_owned() } else { format!("{root}/{rel}") };
        out.push((rel, c.get_data(&path).await.unwrap().0.to_vec()));
    }
    out
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    f.to_str().unwrap().to_owned()
}

/// Refusals that write nothing, and --merge / --overwrite.
async fn refusals_and_merge(target: Target) {
    let srv = TestServer::start(target);
    let a = srv.addr.clone();
    let c = connect(&a).await;
    let open = acl::open_unsafe();
    let root = support::unique("refuse");
    c.create(&root, b"r", &open, CreateMode::Persistent).await.unwrap();
    c.create(&format!("{root}/a"), b"a", &open, CreateMode::Persistent).await.unwrap();
    c.create(&format!("{root}/a/b"), b"b", &open, CreateMode::Persistent).await.unwrap();
    c.create(&format!("{root}/locked"), b"l", &mine(), CreateMode::Persistent).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let f = file.to_str().unwrap();

    // Reading a node the session may not read: Apache's code name, no file left behind.
    let (_, err, code) = cli(&a, &["export", &root, f]).await;
    assert_eq!(code, 1);
    assert!(err.contains(&format!("getData {root}/locked: NOAUTH (-102)")), "{err}");
    assert!(!file.exists() && !dir.path().join("t.json.partial").exists());
    let (_, err, code) = cli(&a, &["export", &format!("{root}/none"), f]).await;
    assert!(code == 1 && err.contains("NONODE (-101)"), "{err}");
    c.delete(&format!("{root}/locked"), -1).await.unwrap();
    let (_, err, code) = cli(&a, &["export", &root, f]).await;
    assert_eq!(code, 0, "{err}");
    let good = std::fs::read_to_string(&file).unwrap();

    // The target exists: refused, nothing written.
    c.set_data(&format!("{root}/a"), b"changed", -1).await.unwrap();
    c.delete(&format!("{root}/a/b"), -1).await.unwrap();
    let before = snapshot(&c, &root).await;
    let (_, err, code) = cli(&a, &["import", f]).await;
    assert_eq!(code, 1);
    assert!(err.contains(&format!("{root} exists: nothing imported")), "{err}");
    assert_eq!(snapshot(&c, &root).await, before);

    // Bad files: each refused with what is wrong, the target left absent.
    let dst = support::unique("bad");
    let cut = &good[..good.len() * 2 / 3];
    let bad_kind = good.replacen("\"kind\":\"persistent\"", "\"kind\":\"durable\"", 2);
    let orphan = good.replacen("\"path\":\"a/b\"", "\"path\":\"x/b\"", 1);
    let cases = [
        ("cut.json", cut.to_owned(), "bad export file"),
        ("kind.json", bad_kind, "unknown kind \"durable\""),
        ("orphan.json", orphan, "does not follow its parent"),
        ("other.json", "{\"format\":\"other\",\"nodes\":[]}".to_owned(), "not an export file"),
        ("notjson.json", "hello".to_owned(), "not an export file"),
    ];
    for (name, text, why) in cases {
        let bad = write(dir.path(), name, &text);
        let (_, err, code) = cli(&a, &["import", &bad, &dst]).await;
        assert_eq!(code, 1, "{name}");
        assert!(err.contains(why), "{name}: {err}");
        assert!(c.exists(&dst).await.unwrap().is_none(), "{name}: nothing written");
    }
    let (_, err, code) = cli(&a, &["import", &dir.path().join("none.json").to_string_lossy(), &dst]).await;
    assert!(code == 1 && err.contains("cannot read"), "{err}");
    let (_, err, code) = cli(&a, &["import", f, &format!("{dst}/under/missing")]).await;
    assert!(code == 1 && err.contains("does not exist"), "{err}");

    // --merge: existing nodes left and named, missing ones created; --overwrite sets data.
    let (_, err, code) = cli(&a, &["import", "--merge", f]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("{root}/a exists, left as it is")) && err.contains("1 nodes created"),
        "{err}"
    );
    assert_eq!(c.get_data(&format!("{root}/a")).await.unwrap().0.as_ref(), b"changed");
    assert_eq!(c.get_data(&format!("{root}/a/b")).await.unwrap().0.as_ref(), b"b");
    let (_, err, code) = cli(&a, &["import", "--merge", "--overwrite", f]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(c.get_data(&format!("{root}/a")).await.unwrap().0.as_ref(), b"a");
}

both!(refusals_and_merge);

/// A counter far past the child count: a parent with one child and a cversion of 20,001 comes
/// out the same, in multis of bounded size.
async fn a_large_counter(target: Target) {
    let srv = TestServer::start(target);
    let c = connect(&srv.addr).await;
    let root = support::unique("count");
    let dir = tempfile::tempdir().unwrap();
    let rec = |path: &str, cversion: i32, n: i32| {
        format!(
            r#"{{"path":"{path}","kind":"persistent","data":"","acl":[{{"scheme":"world","id":"anyone","perms":31}}],"cversion":{cversion},"num_children":{n}}}"#
        )
    };
    let text = format!(
        "{{\"format\":\"zkrs-subtree-export\",\"version\":1,\"source\":\"{root}\",\"nodes\":[\n{},\n{}\n],\"node_count\":2}}",
        rec("", 20_001, 1),
        rec("only", 0, 0)
    );
    let f = write(dir.path(), "count.json", &text);
    let (_, err, code) = cli(&srv.addr, &["import", &f]).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("10000 counter increments"), "{err}");
    let (_, st) = c.get_data(&root).await.unwrap();
    assert_eq!((st.cversion, st.num_children), (20_001, 1));
    let next = c.create(&format!("{root}/s-"), b"", &mine(), CreateMode::PersistentSequential).await.unwrap();
    assert_eq!(next, format!("{root}/s-0000010001"));
}

both!(a_large_counter);
