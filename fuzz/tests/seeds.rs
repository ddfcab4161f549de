//! Writes the seeds that are built rather than captured: transactions, log segments, zkrs
//! snapshots, and Apache snapshot and log files, each checked to decode before it is written.
//! `cargo test -p zkrs-fuzz --test seeds -- --ignored` (re)writes them into `corpus/`;
//! `seed_corpus.py` writes the ones taken from the golden captures.

use bytes::Bytes;
use std::path::Path;
use zk_log::apache::{Adler32, ApacheLog, APACHE_LOG_MAGIC, APACHE_SNAP_MAGIC, APACHE_VERSION};
use zk_log::conformance::sample_txn;
use zk_log::read_small_file;
use zk_log::snapshot::SnapshotWriter;
use zk_log::FaultStorage;
use zk_proto::{Acl, Id, Jute, StatPersisted, Txn, TxnHeader};
use zk_tree::{load_snapshot, ContentBuilder, TreeConfig};

fn put(target: &str, name: &str, data: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    std::fs::write(dir.join(name), data).expect("write seed");
}

fn payload(hdr: &TxnHeader, txn: &Txn) -> Vec<u8> {
    let mut out = Vec::new();
    hdr.write(&mut out);
    txn.encode(&mut out);
    out
}

fn content() -> Vec<u8> {
    let mut b = ContentBuilder::new(5, 4);
    b.session(0x100, 30000);
    let world = [Acl { perms: 31, id: Id { scheme: "world".into(), id: "anyone".into() } }];
    let digest = [Acl { perms: 1, id: Id { scheme: "digest".into(), id: "u:x".into() } }];
    let stat = |zxid: i64, owner: i64| StatPersisted {
        czxid: zxid,
        mzxid: zxid,
        ctime: 1,
        mtime: 1,
        version: 0,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: owner,
        pzxid: zxid,
    };
    b.node("/", None, &world, &stat(0, 0));
    b.node("/a", Some(b"hello"), &world, &stat(1, 0));
    b.node("/a/b", Some(b""), &digest, &stat(2, 0));
    b.node("/e", None, &world, &stat(3, 0x100));
    b.finish()
}

#[test]
#[ignore = "writes the built seeds into corpus/; run by hand"]
fn write_built_seeds() {
    // Transactions, one per kind sample_txn makes.
    let txns: Vec<(TxnHeader, Txn)> = (1..=7).map(|z| sample_txn(z, 8)).collect();
    for (hdr, txn) in &txns {
        put("log_record", &format!("txn-{}", hdr.zxid), &payload(hdr, txn));
    }
    // Segments as log::segment builds them: [type][len][body] per record.
    let mut records = Vec::new();
    for (hdr, txn) in &txns {
        let mut body = Vec::new();
        txn.encode(&mut body);
        if body.len() < 256 {
            records.push(hdr.txn_type as u8);
            records.push(body.len() as u8);
            records.extend_from_slice(&body);
        }
    }
    for (mode, name) in [(1u8, "built"), (3, "built-flipped"), (5, "built-torn")] {
        let mut seed = vec![mode];
        seed.extend_from_slice(&records);
        if mode != 1 {
            seed.extend_from_slice(&((records.len() / 2) as u16 + 32).to_be_bytes());
        }
        put("log_segment", name, &seed);
    }
    // A raw segment (mode 0) as SegmentLog writes it.
    let storage = FaultStorage::new(0);
    let mut log = zk_log::SegmentLog::open(
        storage.clone(),
        zk_log::LogOptions { prealloc_bytes: 4096, segment_bytes_max: 1 << 20 },
    )
    .expect("open");
    let batch: Vec<(&TxnHeader, &Txn)> = txns.iter().map(|(h, t)| (h, t)).collect();
    log.commit(&batch).expect("commit");
    let name = log.segment_names()[0].clone();
    drop(log);
    let seg = read_small_file(&storage, &name, 1 << 20).expect("read").expect("segment");
    let mut raw = vec![0u8];
    raw.extend_from_slice(&seg);
    put("log_segment", "written", &raw);

    // zkrs snapshot content and file.
    let content = content();
    let db = load_snapshot(TreeConfig::default(), &content).expect("seed content loads");
    let mut seed = vec![128u8];
    seed.extend_from_slice(&content);
    put("snapshot_content", "built", &seed);
    let storage = FaultStorage::new(0);
    let mut w = SnapshotWriter::create(&storage, 5).expect("create");
    w.write(&content).expect("write");
    let info = w.finish().expect("finish");
    let file = read_small_file(&storage, &info.name, 1 << 20).expect("read").expect("snapshot file");
    put("snapshot_file", "built", &file);
    // The same content compressed (format 2).
    let compression = zk_log::snapshot::Compression::Zstd { level: 1 };
    let mut w = SnapshotWriter::create_with(&storage, 6, compression).expect("create");
    w.write(&content).expect("write");
    let info = w.finish().expect("finish");
    let file = read_small_file(&storage, &info.name, 1 << 20).expect("read").expect("snapshot file");
    put("snapshot_file", "built-zstd", &file);

    // The SNAP stream of the same database, and an Apache snapshot file around it.
    let stream = db.apache_snap_to_vec();
    let mut seed = vec![128u8];
    seed.extend_from_slice(&stream);
    put("apache_snap", "built", &seed);
    let signature = 4 + zk_tree::apache_snap::SIGNATURE.len();
    let mut snap = Vec::new();
    APACHE_SNAP_MAGIC.write(&mut snap);
    APACHE_VERSION.write(&mut snap);
    7i64.write(&mut snap);
    snap.extend_from_slice(&stream[..stream.len() - signature]);
    (Adler32::of(&snap) as i64).write(&mut snap);
    "/".to_string().write(&mut snap);
    zk_log::apache::read_snapshot_bytes("snapshot.5".into(), Bytes::from(snap.clone()), |_| {})
        .expect("the built Apache snapshot reads");
    let mut seed = vec![0u8];
    seed.extend_from_slice(&snap);
    put("apache_files", "snapshot", &seed);

    // An Apache transaction log of the sample transactions.
    let mut alog = Vec::new();
    APACHE_LOG_MAGIC.write(&mut alog);
    APACHE_VERSION.write(&mut alog);
    7i64.write(&mut alog);
    for (hdr, txn) in &txns {
        let p = payload(hdr, txn);
        (Adler32::of(&p) as i64).write(&mut alog);
        (p.len() as i32).write(&mut alog);
        alog.extend_from_slice(&p);
        alog.push(b'B');
    }
    let read = ApacheLog::from_bytes("log.1".into(), Bytes::from(alog.clone())).expect("header");
    assert_eq!(read.collect::<Result<Vec<_>, _>>().expect("entries").len(), txns.len());
    let mut seed = vec![1u8];
    seed.extend_from_slice(&alog);
    put("apache_files", "log", &seed);

    // Client certificates: a plain subject, and one with escapes and several attributes.
    for (name, dn) in [
        ("cert-cn", vec![(rcgen::DnType::CommonName, "client")]),
        (
            "cert-escapes",
            vec![
                (rcgen::DnType::CountryName, "NL"),
                (rcgen::DnType::OrganizationName, "a, \"b\" + c"),
                (rcgen::DnType::CommonName, " #lead"),
            ],
        ),
    ] {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t, v);
        }
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        zk_server::x509::subject_dn(cert.der()).expect("the seed certificate's subject reads");
        put("x509_subject", name, cert.der());
    }

    // zoo.cfg: the Debian package's, and an ensemble's.
    let debian = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../zk-server/debian/zoo.cfg"))
        .expect("zoo.cfg");
    put("zoo_cfg", "debian", &debian);
    put(
        "zoo_cfg",
        "ensemble",
        b"tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=/var/lib/zk\nclientPort=2181\n\
server.1=zk1:2888:3888;2181\nserver.2=zk2:2888:3888\nserver.3=zk3:2888:3888:observer\n\
autopurge.snapRetainCount=3\n4lw.commands.whitelist=stat, ruok\\\n  , conf\n",
    );
}
