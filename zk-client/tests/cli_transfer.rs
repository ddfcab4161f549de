//! zkrs-cli's `export` and `import` between live servers, zkrs and Apache ZooKeeper in every
//! direction: a subtree with data, nesting, a digest ACL, a container, a TTL node, sequential
//! children after deletes and an ephemeral is exported, imported elsewhere, and compared node
//! for node (data, ACL, cversion, child count); the next sequential child gets the same name on
//! both sides; the container and the TTL node prove their kind on the target by being reaped
//! once empty. Then the refusals: an existing target, bad files, missing auth.
//!
//! `--from-snapshot`: the same subtree taken from snapshot files, without any `--kind`: from a
//! zkrs server, the file its AdminServer's `snapshot` command serves and its own zstd snapshot
//! in the data directory; from Apache 3.8, the plain and the gz snapshots of its data directory.
//! Each export is the live export's nodes exactly; each is imported (as a file, or straight from
//! the snapshot) into Apache and zkrs and checked as above.
// Real servers on real time: the reaping of the imported container and TTL node is waited for.
#![allow(clippy::disallowed_methods)]
#[macro_use]
mod support;

use std::path::{Path, PathBuf};
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
/// creates is the same), while the ephemeral lives.
async fn assert_same_tree(src: &Client, src_root: &str, dst: &Client, dst_root: &str) {
    let nodes = walk(src, src_root).await;
    assert_eq!(nodes, walk(dst, dst_root).await, "the same nodes");
    assert_eq!(nodes.len(), 14);
    let ephemeral = src.exists(&format!("{src_root}/sessions/mine")).await.unwrap().is_some();
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
        let skipped = i32::from(rel == "sessions" && ephemeral);
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

/// The node records of an export document, sorted (an export from Apache's snapshot format
/// lists children in the file's order, the others in name order).
fn node_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("{\"path\""))
        .map(|l| l.trim_end_matches(',').to_owned())
        .collect();
    lines.sort();
    lines
}

/// The live export of `root` with its container and TTL node declared: what every export from
/// a snapshot must equal, node for node.
async fn live_export(addr: &str, root: &str, dir: &Path) -> Vec<String> {
    let file = dir.join("live.json");
    let (box_kind, ttl_kind) = (format!("{root}/box=container"), format!("{root}/ttl=ttl:{TTL_MS}"));
    let args = ["export", "--auth", "digest:u:pw", "--kind", &box_kind, "--kind", &ttl_kind, root];
    let (_, err, code) = cli(addr, &[&args[..], &[file.to_str().unwrap()]].concat()).await;
    assert_eq!(code, 0, "live export: {err}");
    let lines = node_lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(lines.len(), 14, "{lines:?}");
    lines
}

/// `export --from-snapshot snap root`, to a file, with no server to ask (the address given is
/// nobody's): the kinds without any `--kind`, the ephemeral left out; the node records.
async fn snapshot_export(snap: &Path, root: &str, dir: &Path, name: &str) -> Vec<String> {
    let file = dir.join(name);
    let (out, err, code) = cli(
        "127.0.0.1:1",
        &["export", "--from-snapshot", snap.to_str().unwrap(), root, file.to_str().unwrap()],
    )
    .await;
    assert_eq!(code, 0, "export from {}: {out}{err}", snap.display());
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("skipped ephemeral") && err.contains("/sessions/mine"), "{err}");
    assert!(err.contains("export: 14 nodes from"), "{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(r#""path":"box","kind":"container""#), "{text}");
    assert!(text.contains(&format!(r#""path":"ttl","kind":"ttl","ttl_ms":{TTL_MS}"#)), "{text}");
    node_lines(&text)
}

/// The newest file in `dir` whose name passes `keep`, by modification time then name.
fn newest(dir: &Path, keep: impl Fn(&str) -> bool) -> PathBuf {
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap())
        .filter(|e| keep(&e.file_name().to_string_lossy()))
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    files.sort();
    files.pop().unwrap_or_else(|| panic!("no such file in {}", dir.display())).1
}

/// A GET of the AdminServer at `admin`: the status and the body (the server sends a length).
async fn http_get(admin: u16, path: &str, auth: &str) -> (u16, Vec<u8>) {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
    );
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", admin)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let at = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
        let head = String::from_utf8_lossy(&raw[..at]).to_ascii_lowercase();
        let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, raw[at + 4..].to_vec())
    })
    .await
    .unwrap()
}

/// Each target's next sequential name under a few parents is the source's; then, emptied, the
/// container and the TTL node are reaped on every target.
async fn next_names_and_kinds(src: &Client, src_root: &str, targets: &[(&Client, &str)]) {
    for parent in ["", "/seq", "/sessions", "/cfg/deep"] {
        let path = format!("{src_root}{parent}/n-");
        let want = src.create(&path, b"", &mine(), CreateMode::PersistentSequential).await.unwrap();
        for (c, root) in targets {
            let got =
                c.create(&format!("{root}{parent}/n-"), b"", &mine(), CreateMode::PersistentSequential).await;
            assert_eq!(
                got.unwrap().strip_prefix(root),
                want.strip_prefix(src_root),
                "next sequential under {parent}"
            );
        }
    }
    for (c, root) in targets {
        c.delete(&format!("{root}/box/item"), -1).await.unwrap();
        c.delete(&format!("{root}/ttl/keep"), -1).await.unwrap();
    }
    for (c, root) in targets {
        wait_gone(c, &format!("{root}/box"), "container").await;
        wait_gone(c, &format!("{root}/ttl"), "TTL node").await;
        assert!(c.exists(&format!("{root}/cfg")).await.unwrap().is_some());
    }
}

/// A zkrs source: the snapshot its AdminServer serves (Apache's format, the tree at one zxid)
/// and the zstd snapshot that request left in its data directory are both the live tree; the
/// served file goes into Apache 3.8 straight from the snapshot, the data directory's into zkrs
/// through a file. Then the refusals of the snapshot path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkrs_snapshots_to_apache_and_zkrs() {
    let admin = support::free_port();
    let apache = tokio::task::spawn_blocking(|| TestServer::start(Target::Apache));
    let src_srv = TestServer::start_with(
        Target::Zkrs,
        &format!(
            "admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={admin}\n\
             snapshot.minRequestIntervalSeconds=0\nsnapshot.compression=zstd\n"
        ),
    );
    let src_root = support::unique("snapsrc");
    let src = build_source(&src_srv.addr, &src_root).await;
    let dir = tempfile::tempdir().unwrap();
    let live = live_export(&src_srv.addr, &src_root, dir.path()).await;

    // The `snapshot` command serves whoever holds ALL on the root by a proven id.
    src.set_acl("/", &[mine(), acl::open_unsafe()].concat(), -1).await.unwrap();
    let (status, body) = http_get(admin, "/commands/snapshot?streaming=true", "digest u:pw").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let served = dir.path().join("served");
    std::fs::write(&served, &body).unwrap();
    assert_eq!(snapshot_export(&served, &src_root, dir.path(), "served.json").await, live);
    let snaps = src_srv.data_dir().unwrap().join("zkrs-snap");
    let on_disk = newest(&snaps, |n| n.starts_with("snapshot.") && !n.ends_with(".tmp"));
    assert_eq!(snapshot_export(&on_disk, &src_root, dir.path(), "disk.json").await, live);

    // Into Apache straight from the served snapshot, into zkrs from the data directory's export.
    let apache = apache.await.unwrap();
    let (apache_root, zkrs_root) = (support::unique("fromsnap"), support::unique("fromdisk"));
    let args = ["import", "--auth", "digest:u:pw", "--from-snapshot", served.to_str().unwrap()];
    let (out, err, code) =
        cli(&apache.addr, &[&args[..], &["--source", &src_root, &apache_root]].concat()).await;
    assert_eq!(code, 0, "import --from-snapshot: {out}{err}");
    assert!(err.contains("14 nodes created") && !err.contains("skipped ephemeral"), "{err}");
    let disk_json = dir.path().join("disk.json");
    let (out, err, code) =
        cli(&src_srv.addr, &["import", "--auth", "digest:u:pw", disk_json.to_str().unwrap(), &zkrs_root])
            .await;
    assert_eq!(code, 0, "import: {out}{err}");
    let (to_apache, to_zkrs) = (connect(&apache.addr).await, connect(&src_srv.addr).await);
    assert_same_tree(&src, &src_root, &to_apache, &apache_root).await;
    assert_same_tree(&src, &src_root, &to_zkrs, &zkrs_root).await;
    next_names_and_kinds(&src, &src_root, &[(&to_apache, &apache_root), (&to_zkrs, &zkrs_root)]).await;

    // Refused, nothing written: not a snapshot, a root it lacks, a cut file, --kind with it,
    // --from-snapshot without --source.
    let cases: [(&[&str], &str); 5] = [
        (&["export", "--from-snapshot", disk_json.to_str().unwrap(), "/x"], "is not a snapshot"),
        (
            &["export", "--from-snapshot", served.to_str().unwrap(), "/nowhere"],
            "no node /nowhere in the snapshot",
        ),
        (
            &["export", "--from-snapshot", served.to_str().unwrap(), "--kind", "/a=container", "/a"],
            "not with --from-snapshot",
        ),
        (&["import", "--from-snapshot", served.to_str().unwrap(), "/x"], "needs --source"),
        (
            &["import", "--from-snapshot", served.to_str().unwrap(), "--source", "/nowhere", "/x"],
            "no node /nowhere",
        ),
    ];
    for (args, why) in cases {
        let (_, err, code) = cli(&apache.addr, args).await;
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let cut = dir.path().join("cut");
    std::fs::write(&cut, &body[..body.len() / 2]).unwrap();
    let out_file = dir.path().join("cut.json");
    let (_, err, code) = cli(
        "127.0.0.1:1",
        &["export", "--from-snapshot", cut.to_str().unwrap(), &src_root, out_file.to_str().unwrap()],
    )
    .await;
    assert!(code == 1 && err.contains(cut.to_str().unwrap()), "{err}");
    assert!(!out_file.exists() && !dir.path().join("cut.json.partial").exists());
    assert!(to_apache.exists("/x").await.unwrap().is_none(), "nothing imported");
    src.close().await.unwrap();
}

/// An Apache 3.8 source: the plain snapshot its restart writes, and the gz one a restart with
/// `zookeeper.snapshot.compression.method=gz` writes, are both the live tree; the gz one goes into
/// zkrs straight from the snapshot, the plain one through a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apache_snapshots_to_zkrs() {
    let zkrs = tokio::task::spawn_blocking(|| TestServer::start(Target::Zkrs));
    let mut src_srv = TestServer::start(Target::Apache);
    let src_root = support::unique("apsnap");
    let dir = tempfile::tempdir().unwrap();
    let live = {
        let src = build_source(&src_srv.addr, &src_root).await;
        let live = live_export(&src_srv.addr, &src_root, dir.path()).await;
        // Apache writes a snapshot of what it loaded as it starts: the whole tree, the
        // ephemeral's session still alive in it.
        let v2 = src_srv.data_dir().unwrap().join("version-2");
        src_srv.restart();
        let plain =
            newest(&v2, |n| n.starts_with("snapshot.") && !n.ends_with(".gz") && !n.ends_with(".snappy"));
        std::fs::copy(&plain, dir.path().join(plain.file_name().unwrap())).unwrap();
        src_srv.restart_with_jvm_flags("-Dzookeeper.snapshot.compression.method=gz");
        let gz = newest(&v2, |n| n.starts_with("snapshot.") && n.ends_with(".gz"));
        std::fs::copy(&gz, dir.path().join(gz.file_name().unwrap())).unwrap();
        drop(src);
        live
    };
    let file_of =
        |suffix: bool| newest(dir.path(), |n| n.starts_with("snapshot.") && n.ends_with(".gz") == suffix);
    let (plain, gz) = (file_of(false), file_of(true));
    assert_eq!(snapshot_export(&plain, &src_root, dir.path(), "plain.json").await, live);
    assert_eq!(snapshot_export(&gz, &src_root, dir.path(), "gz.json").await, live);

    let zkrs = zkrs.await.unwrap();
    let (from_gz, from_plain) = (support::unique("fromgz"), support::unique("fromplain"));
    let args = ["import", "--auth", "digest:u:pw", "--from-snapshot", gz.to_str().unwrap(), "--source"];
    let (out, err, code) = cli(&zkrs.addr, &[&args[..], &[&src_root, &from_gz]].concat()).await;
    assert_eq!(code, 0, "import --from-snapshot: {out}{err}");
    let plain_json = dir.path().join("plain.json");
    let (out, err, code) =
        cli(&zkrs.addr, &["import", "--auth", "digest:u:pw", plain_json.to_str().unwrap(), &from_plain])
            .await;
    assert_eq!(code, 0, "import: {out}{err}");
    let (src, dst) = (connect(&src_srv.addr).await, connect(&zkrs.addr).await);
    assert_same_tree(&src, &src_root, &dst, &from_gz).await;
    assert_same_tree(&src, &src_root, &dst, &from_plain).await;
    next_names_and_kinds(&src, &src_root, &[(&dst, &from_gz), (&dst, &from_plain)]).await;
}
