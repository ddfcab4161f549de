//! Starting and stopping a standalone server: the listener, the core task, signals.

use crate::conn;
use crate::core::{CoreConfig, CounterRule, Now, ServerCore, SnapshotSettings, VoterSet};
use crate::driver::{Driver, DriverMsg, EnsembleDisk};
use crate::ensemble::peers::PeerIo;
use crate::ensemble::settings::EnsembleSettings;
use crate::node::{LogPosition, Node};
use crate::settings::Settings;
use crate::snapshots;
use crate::stats::ConnCounters;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tracing::{info, warn};
use zk_log::TxnSink;
use zk_tree::{Recovery, TreeConfig};

/// Messages the core's inbox holds before connection readers wait.
const CORE_INBOX: usize = 8 * 1024;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The transaction log could not be opened or recovered.
    #[error("transaction log in {dir}: {source}")]
    Log {
        /// The log directory.
        dir: std::path::PathBuf,
        /// The cause.
        source: zk_log::LogError,
    },
    /// The newest snapshot could not be loaded.
    #[error("snapshot in {dir}: {message}")]
    Snapshot {
        /// The snapshot directory.
        dir: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// dataDir holds Apache ZooKeeper's data and no zkrs data: serving an empty tree would look
    /// like data loss.
    #[error("{dir} holds Apache ZooKeeper data ({file}) and no zkrs data; import it first with `zkrs-server import <apache dataDir> <apache dataLogDir> <zkrs dataDir>`, or point dataDir elsewhere")]
    ApacheData {
        /// Apache's version-2 directory.
        dir: std::path::PathBuf,
        /// One of its files.
        file: String,
    },
    /// dataDir holds the staging directory of a `zkrs-server restore` into it that did not finish
    /// (killed, or failed without cleaning up, before it moved its result in) and no `zkrs-snap`
    /// ([`unfinished_restore`](crate::backup::restore::unfinished_restore)): the directory was
    /// meant to hold the restored data, and an empty tree served in its place would look like
    /// data loss. Refused before anything is created.
    #[error("{staging} is left by a `zkrs-server restore` into this dataDir that did not finish (it stopped before it moved its result in), and dataDir holds no snapshot in zkrs-snap: run the restore again (it removes {staging} and starts over), or remove {staging} to start with an empty tree{advice}")]
    UnfinishedRestore {
        /// The restore's staging directory.
        staging: std::path::PathBuf,
        /// What else dataDir holds and what to do about it (empty when it holds nothing else).
        advice: String,
    },
    /// dataDir holds a `zkrs-server restore`'s result, not yet snapshotted past (its newest
    /// snapshot is the restored one, at the zxid its marker names), and the transaction log in
    /// dataLogDir holds records but is not the restored server's: it holds no copy of the
    /// restore's marker, or the copy of another restore, or of another copy of this one (see
    /// [`restored_log`](crate::backup::restored_log)). It is an older log, most likely the
    /// dataLogDir the server used before the restore: replayed over the restored snapshot, it
    /// would bring back the state the restore went back from.
    #[error("{log_dir} holds a transaction log that is not this restored server's ({why}), and dataDir {data_dir} was restored to zxid {zxid:#x} (its newest snapshot is the restored one): replaying it would undo the restore. Point dataLogDir at an empty directory, or move {log_dir} away, and start again")]
    LogBesideRestore {
        /// The log directory (dataLogDir/zkrs-log).
        log_dir: std::path::PathBuf,
        /// The data directory (dataDir).
        data_dir: std::path::PathBuf,
        /// The restored zxid.
        zxid: i64,
        /// What the log holds, and why it is not the restored server's.
        why: String,
    },
    /// dataDir holds a restore marker (`zkrs-snap/zkrs-restored`, which `zkrs-server restore`
    /// writes) that cannot be read: the log in dataLogDir cannot be checked against the restore,
    /// and an older log replayed over the restored snapshot would undo it.
    #[error("{cause}: dataDir {data_dir} was restored by zkrs-server restore, and its restore marker cannot be read; the start checks the log in dataLogDir against it (so that an older log is not replayed over the restored snapshot) and does not go on without it. Fix the file (it holds the lines `zxid=0x…` and `restored_at_ms=…` the restore wrote), or remove it if the restore is long past or dataLogDir holds no older log (`zkrs-server backup` then no longer knows that the directory was restored: back it up into a new archive)")]
    RestoreMarker {
        /// The data directory (dataDir).
        data_dir: std::path::PathBuf,
        /// What is wrong with the marker, naming the file.
        cause: String,
    },
    /// The server stopped serving: a failure it cannot carry on after (the log failed other than
    /// by filling its disk).
    #[error("stopped: {reason}")]
    Stopped {
        /// Why.
        reason: String,
    },
    /// The server archives by itself (`zkrs.backup.to`), and the archive cannot be taken: another
    /// writer holds it (named), or it is no archive this build writes.
    #[error("zkrs.backup.to={target}: {why}")]
    Archive {
        /// The archive.
        target: String,
        /// Why.
        why: String,
    },
    /// The client port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// Refuses to start empty on top of Apache's snapshots or logs (dataDir/version-2,
/// dataLogDir/version-2).
fn refuse_apache_data(settings: &Settings) -> Result<(), StartError> {
    for dir in [&settings.data_dir, &settings.data_log_dir] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("snapshot.") || name.starts_with("log.") {
                return Err(StartError::ApacheData { dir: dir.clone(), file: name });
            }
        }
    }
    Ok(())
}

/// The refusal of a start on a data directory holding what a restore that did not finish left
/// ([`StartError::UnfinishedRestore`]), naming what else the directory holds; None when it holds
/// no such thing.
pub fn unfinished_restore(data_dir: &std::path::Path) -> Option<StartError> {
    use crate::backup::restore;
    let staging = restore::unfinished_restore(data_dir)?;
    let advice = restore::unfinished_restore_advice(&restore::unfinished_restore_others(data_dir));
    Some(StartError::UnfinishedRestore { staging, advice })
}

/// Runs a server until `shutdown` resolves: standalone, or, given the parsed configuration of an
/// ensemble (`ensemble`), as a member of it.
pub async fn run(
    settings: Settings,
    ensemble: Option<crate::config::ServerConfig>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), StartError> {
    if let Some(e) = unfinished_restore(&settings.snap_root) {
        return Err(e);
    }
    let settings = Arc::new(settings);
    let backlog = settings.listen_backlog();
    let mut listener = match settings.client_addr {
        Some(addr) => Some(bind_client(addr, backlog).map_err(|source| StartError::Bind { addr, source })?),
        None => None,
    };
    let secure_listener = match settings.secure_client_addr {
        Some(addr) => Some(bind_client(addr, backlog).map_err(|source| StartError::Bind { addr, source })?),
        None => None,
    };
    let tree_cfg = TreeConfig {
        extended_types_enabled: settings.extended_types_enabled,
        super_digest: settings.super_digest.clone(),
        x509_enabled: settings.x509_enabled,
        x509_super_user: settings.x509_super_user.clone(),
        sasl_enabled: settings.sasl.provider,
        tick_ms: settings.tick_ms,
        container_max_never_used_ms: settings.container_max_never_used_ms,
        memory_soft_limit_bytes: settings.tree_memory_soft_limit_bytes,
        // Only proposals carry the digest: a standalone server computes none.
        tree_digest: ensemble.is_some() && settings.digest_enabled,
        ..TreeConfig::default()
    };
    let snap_dir = settings.snap_root.join(zk_log::snapshot::SNAP_DIR_NAME);
    let snap_storage =
        snapshots::open_dir(&snap_dir).map_err(|source| StartError::Log { dir: snap_dir.clone(), source })?;
    let ensemble = match ensemble {
        Some(cfg) => Some(
            EnsembleSettings::from_config(&cfg, tree_cfg.clone())
                .map_err(|reason| StartError::Stopped { reason })?,
        ),
        None => None,
    };
    let load_started = std::time::Instant::now();
    let log_dir = settings.log_root.join(zk_log::LOG_DIR_NAME);
    let opts = zk_log::LogOptions { prealloc_bytes: settings.prealloc_bytes, ..Default::default() };
    // The log's recovery scan (every record's checksum) needs no database: it runs on a thread of
    // its own while this one loads the snapshot.
    let (db, opened) = std::thread::scope(|s| {
        let opening = std::thread::Builder::new()
            .name("zk-log-open".into())
            .spawn_scoped(s, || crate::log::open(&log_dir, settings.txn_log_append_mode, opts));
        let db = snapshots::load_newest(&snap_storage, tree_cfg.clone());
        let opened = match opening {
            Ok(handle) => handle.join().unwrap_or_else(|_| {
                Err(zk_log::LogError::Io {
                    op: "open the log (its thread panicked)",
                    file: log_dir.display().to_string(),
                    source: std::io::Error::other("panicked"),
                })
            }),
            // No thread to be had: open it here.
            Err(_) => crate::log::open(&log_dir, settings.txn_log_append_mode, opts),
        };
        (db, opened)
    });
    let (db, snap_name) = db.map_err(|message| StartError::Snapshot { dir: snap_dir.clone(), message })?;
    let snap_loaded = std::time::Instant::now();
    let mut log = opened.map_err(|source| StartError::Log { dir: log_dir.clone(), source })?;
    let mut rec = Recovery::new(db);
    // On a restored data directory, only the restored server's own log is replayed (and its
    // first start marks it so).
    let restored =
        crate::backup::restored_log::fit_log(&settings.snap_root, &snap_storage, rec.start_zxid(), &mut log)?;
    let what = log_dir.display().to_string();
    crate::log::replay(&mut log, &mut rec, &what)
        .map_err(|source| StartError::Log { dir: log_dir.clone(), source })?;
    // A snapshot that does not reproduce the digest it recorded is set aside for an older one
    // (not the restored one: an older state is not what was restored).
    let rec = snapshots::verified(&snap_storage, tree_cfg.clone(), rec, snap_name, |rec| {
        if let Some(z) = restored.filter(|z| rec.start_zxid() != *z) {
            return Err(format!(
                "the snapshot `zkrs-server restore` wrote, at zxid {z:#x}, did not reproduce the tree digest \
                 it recorded, and was set aside: {} in its place is not the restored state. Restore again \
                 into a new directory",
                if rec.start_zxid() > 0 { "an older snapshot" } else { "an empty tree" }
            ));
        }
        crate::log::replay(&mut log, rec, &what).map_err(|e| e.to_string())
    })
    .map_err(|message| StartError::Snapshot { dir: snap_dir.clone(), message })?;
    let replayed = rec.replayed();
    let startup = crate::driver::StartupLoad {
        snapshot: snap_loaded - load_started,
        txns: snap_loaded.elapsed(),
        txns_loaded: replayed,
    };
    if rec.last_zxid() == 0 {
        refuse_apache_data(&settings)?;
    }
    // A restore killed between its commit and removing its staging directory left that beside
    // the result: gone now, it cannot count as an unfinished restore later.
    match crate::backup::restore::remove_staging_beside_result(&settings.snap_root) {
        Ok(Some(staging)) => info!("removed {}, which a restore left beside its result", staging.display()),
        Ok(None) => {}
        Err(e) => warn!("a restore's staging directory beside its result stays: {e}"),
    }
    // The core's clock starts here; sessions restored start their timeouts afresh on it, as
    // Apache does on loading.
    let origin = std::time::Instant::now();
    let now = Driver::now(origin);
    let mut db = rec.finish(now.mono_ms());
    // An ensemble member's /zookeeper/config holds the membership, as Apache's members have it.
    // With reconfiguration on, the node holds the newest configuration the log has (the quorum
    // layer adopts it and tells the core), not the one this server started from.
    let config_node = ensemble
        .as_ref()
        .filter(|e| !e.replica.reconfig_enabled)
        .map(|e| (e.replica.config.to_config_string(), e.replica.config.version));
    if let Some((text, version)) = &config_node {
        db.set_config_node(text, *version, now.wall_ms);
    }
    // The writer thread reports durability into the core's select loop. Reports are one per
    // group of batches, and the log's queue holds at most LOG_QUEUE batches.
    const LOG_QUEUE: usize = 64;
    let (durable_tx, durable_rx) = mpsc::channel::<zk_log::WriterReport>(LOG_QUEUE * 2 + 8);
    let sync_times = log.sync_times();
    let writer = zk_log::LogWriter::spawn_with_reports(log, LOG_QUEUE, move |report| {
        let _ = durable_tx.blocking_send(report);
    })
    .map_err(|source| StartError::Log {
        dir: log_dir.clone(),
        source: zk_log::LogError::Io {
            op: "start the log writer thread",
            file: log_dir.display().to_string(),
            source,
        },
    })?;
    let permits = Arc::new(Semaphore::new(settings.global_outstanding_limit as usize));
    let (core_tx, core_rx) = mpsc::channel(CORE_INBOX);
    // The server archiving by itself takes its archive's lock before it serves; dropped when
    // this returns, which stops the archiver.
    let archiver = match &settings.backup {
        Some(b) => {
            let ask = crate::backup::continuous::ask_driver(core_tx.clone());
            let started =
                crate::backup::continuous::start(b, &settings.snap_root, &settings.log_root, ask).await;
            Some(started.map_err(|why| StartError::Archive { target: b.to.clone(), why })?)
        }
        None => {
            crate::backup::continuous::forget_progress(&snap_dir);
            None
        }
    };
    let archive = archiver.as_ref().map(|a| a.progress());
    let reports = core_tx.clone();
    let fence = Arc::new(snapshots::SnapshotFence::new());
    let snapshot_fence = fence.clone();
    let snap_tx = snapshots::spawn_writer(
        snap_storage.clone(),
        settings.snap_retain_count as usize,
        settings.snapshot_compression,
        fence.clone(),
        archive.clone(),
        move |r| {
            let _ = reports.blocking_send(DriverMsg::Snapshot(r));
        },
    )
    .map_err(|source| StartError::Log {
        dir: snap_dir.clone(),
        source: zk_log::LogError::Io {
            op: "start the snapshot thread",
            file: snap_dir.display().to_string(),
            source,
        },
    })?;
    let server_id = ensemble.as_ref().map_or(0, |e| e.my_sid);
    let log_position =
        LogPosition { base: writer.source().base_zxid(), durable: writer.source().durable_zxid() };
    let source = writer.source();
    let cfg = CoreConfig {
        settings: settings.clone(),
        server_id: server_id as u8,
        // Standalone: a quorum of one. An ensemble member starts down until it has a role.
        voters: VoterSet::solo(server_id),
        counter_rule: CounterRule::Wrap,
        snapshots: Some(SnapshotSettings {
            snap_count: settings.snap_count,
            snap_size_bytes: settings.snap_size_bytes,
            pace_floor: settings.snapshot_write_bytes_per_second,
            idle_ms: settings.snapshot_idle_ms,
            nodes_per_step: crate::core::NODES_PER_STEP,
        }),
        // A start that had to replay transactions takes a snapshot at once, so the next start is
        // fast.
        snapshot_now: replayed > 0,
        seed: seed(now),
        sasl_seed: {
            use rand::RngCore;
            let mut key = [0u8; 32];
            rand::rngs::OsRng.fill_bytes(&mut key);
            key
        },
    };
    let core = ServerCore::new(cfg, db, now);
    let connections = Arc::new(ConnCounters::default());
    let ensemble_mode = ensemble.is_some();
    let (node, ensemble_io) = match ensemble {
        None => (Node::standalone(core), None),
        Some(ens) => {
            let epochs = zk_log::EpochStore::open(snap_storage.clone(), log_position.durable)
                .map_err(|source| StartError::Log { dir: snap_dir.clone(), source })?;
            let node = Node::ensemble(
                core,
                ens.replica.clone(),
                (epochs.accepted(), epochs.current()),
                log_position,
                now,
            );
            let peers = PeerIo::start(ens).await.map_err(|e| StartError::Stopped {
                reason: format!("cannot open the election or quorum port: {e}"),
            })?;
            let disk = EnsembleDisk {
                epochs,
                snapshots: snap_storage.clone(),
                fence,
                source,
                tree_cfg: tree_cfg.clone(),
                config_node: config_node.clone(),
            };
            (node, Some((peers, disk)))
        }
    };
    let mut driver =
        Driver::new(node, origin, settings.clone(), Box::new(writer), Some(snap_tx), permits.clone())
            .with_metric_sources(sync_times, connections.clone())
            .with_startup_load(startup)
            .with_snapshot_disk(
                snap_storage.clone(),
                tree_cfg.clone(),
                settings.snapshot_compression,
                snapshot_fence,
            );
    // A reconfiguration may move this server's client address: the driver says where to.
    let (move_tx, mut move_rx) = tokio::sync::watch::channel(settings.client_addr);
    if let Some((peers, disk)) = ensemble_io {
        driver = driver.with_client_listener(move_tx).with_ensemble(peers, disk);
    }
    if let Some(progress) = archive {
        driver = driver.with_archive(progress);
    }
    let mut core_task = tokio::spawn(driver.run(core_rx, durable_rx));
    if let Some(admin) = &settings.admin {
        crate::admin::http::spawn_admin(
            admin,
            core_tx.clone(),
            connections.clone(),
            settings.clone(),
            permits.clone(),
        )
        .await;
    }
    if let Some(addr) = settings.metrics_addr {
        crate::admin::http::spawn_metrics(addr, core_tx.clone())
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
    }
    let how = if ensemble_mode { "as an ensemble member" } else { "standalone" };
    if let Some(addr) = settings.client_addr {
        info!("serving clients on {addr} ({how}; log in {})", log_dir.display());
        if settings.port_unification {
            info!("client.portUnification: {addr} also takes TLS clients");
        }
    }
    if let Some(addr) = settings.secure_client_addr {
        info!("serving TLS clients on {addr} ({how}; log in {})", log_dir.display());
    }
    let reload = settings
        .tls
        .clone()
        .filter(|t| t.reload_wanted())
        .map(|tls| crate::tls::poll_stores(move || tls.reload_if_changed()));

    // Open client connections: in all, and by client IP.
    let open: Arc<Mutex<OpenConns>> = Arc::default();
    let mut next_id: u64 = 1;
    let mut moves_ended = false;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            // The core stopped by itself: a failure it cannot serve on after.
            ended = &mut core_task => return core_result(ended),
            moved = move_rx.changed(), if !moves_ended => {
                if moved.is_err() {
                    // Standalone, or the driver has ended (its result comes next): no more moves.
                    moves_ended = true;
                    continue;
                }
                let to = *move_rx.borrow_and_update();
                listener = move_client_listener(listener.take(), to, backlog);
            }
            accepted = accept(listener.as_ref(), secure_listener.as_ref()) => {
                let (stream, remote, port) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: keep serving the others.
                        connections.reject();
                        warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let ip = remote.ip();
                if let Err(why) = open.lock().unwrap_or_else(|e| e.into_inner()).admit(ip, &settings) {
                    // Dropping the stream closes it: nothing is read from a refused connection.
                    connections.reject();
                    warn!("{why}");
                    continue;
                }
                let id = next_id;
                next_id += 1;
                let (core_tx, settings, permits) = (core_tx.clone(), settings.clone(), permits.clone());
                let serving = conn::serve_tcp(stream, port, remote, id, core_tx, settings, permits, connections.clone());
                tokio::spawn(Counted { conn: serving, _slot: Slot { open: open.clone(), ip } });
            }
        }
    }
    info!("shutting down");
    if let Some(task) = reload {
        task.abort();
    }
    let _ = core_tx.send(DriverMsg::Shutdown).await;
    core_result(core_task.await)
}

/// Moves the plain client listener to `to`, as Apache's members do when a reconfiguration gives
/// them another client address: the old socket is closed first (so `to` may be the same port on
/// another address), then `to` is bound. Connections accepted before stay open. When `to`
/// cannot be bound the error is logged and no plain listener is left, as in Apache.
fn move_client_listener(
    old: Option<TcpListener>,
    to: Option<std::net::SocketAddr>,
    backlog: u32,
) -> Option<TcpListener> {
    let was = old.as_ref().and_then(|l| l.local_addr().ok());
    if was.is_some() && was == to {
        return old;
    }
    drop(old);
    let to = to?;
    match bind_client(to, backlog) {
        Ok(l) => {
            info!(
                "serving clients on {to} (moved by a reconfiguration from {})",
                was.map_or_else(|| "none".to_owned(), |a| a.to_string())
            );
            Some(l)
        }
        Err(e) => {
            tracing::error!("cannot move the client listener to {to}: {e}; no client port is open");
            None
        }
    }
}

/// A client connection's task: its future, and its place in the count of open connections, given
/// back when the connection ends (or its task is dropped). A hand-written future rather than an
/// async block, whose state keeps the connection's arguments beside the future they made: the
/// task is the largest part of what an idle session costs (640 bytes a task with the async
/// block, by heaptrack; bench/RESULTS.md, 2026-11-30 twelfth session).
struct Counted<F> {
    conn: F,
    _slot: Slot,
}

impl<F: std::future::Future<Output = ()> + Unpin> std::future::Future for Counted<F> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::pin::Pin::new(&mut self.get_mut().conn).poll(cx)
    }
}

/// A connection's place in [`OpenConns`], released when dropped.
struct Slot {
    open: Arc<Mutex<OpenConns>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).release(self.ip);
    }
}

/// The client connections open, counted against `maxCnxns` (in all) and `maxClientCnxns` (per IP).
#[derive(Default)]
struct OpenConns {
    total: u32,
    per_ip: HashMap<IpAddr, u32>,
}

impl OpenConns {
    /// Counts a new connection from `ip`, or says which limit refuses it (Apache's wording).
    fn admit(&mut self, ip: IpAddr, settings: &Settings) -> Result<(), String> {
        if settings.max_cnxns > 0 && self.total >= settings.max_cnxns {
            return Err(format!("too many connections: max allowed is {} (maxCnxns)", settings.max_cnxns));
        }
        let n = self.per_ip.entry(ip).or_insert(0);
        if settings.max_client_cnxns > 0 && *n >= settings.max_client_cnxns {
            return Err(format!("too many connections from {ip}: max is {}", settings.max_client_cnxns));
        }
        *n += 1;
        self.total += 1;
        Ok(())
    }

    /// Forgets a connection from `ip` that has ended.
    fn release(&mut self, ip: IpAddr) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }
}

/// A client port's listener on `addr` with the listen backlog `backlog`
/// ([`Settings::listen_backlog`]); the address reusable at once after a restart, as with
/// `TcpListener::bind`.
fn bind_client(addr: std::net::SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The next connection on either client port.
async fn accept(
    plain: Option<&TcpListener>,
    secure: Option<&TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr, conn::Port)> {
    async fn on(l: Option<&TcpListener>) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
        match l {
            Some(l) => l.accept().await,
            None => std::future::pending().await,
        }
    }
    tokio::select! {
        r = on(plain) => r.map(|(s, a)| (s, a, conn::Port::Plain)),
        r = on(secure) => r.map(|(s, a)| (s, a, conn::Port::Secure)),
    }
}

fn core_result(ended: Result<Result<(), String>, tokio::task::JoinError>) -> Result<(), StartError> {
    match ended {
        Ok(Ok(())) => Ok(()),
        Ok(Err(reason)) => Err(StartError::Stopped { reason }),
        Err(e) => Err(StartError::Stopped { reason: format!("the core task failed: {e}") }),
    }
}

/// A seed for the core's randomness (the spread of snapshot thresholds): different on every
/// start, as Apache's draws are.
fn seed(now: Now) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(now.wall_ms);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client listener's backlog is clientPortListenBacklog's: with 2, and nothing
    /// accepted, the kernel completes a few connections (Linux queues backlog + 1) and drops
    /// the next one's handshake; unset, the backlog is the system's most, and 200 connections
    /// waiting to be accepted all complete.
    #[tokio::test]
    async fn the_client_listener_takes_the_configured_backlog() {
        use std::net::TcpStream;
        use std::time::Duration;
        let connect_all = |addr, n: usize| -> usize {
            let held: Vec<TcpStream> = (0..n)
                .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok())
                .collect();
            held.len()
        };
        let small = bind_client("127.0.0.1:0".parse().unwrap(), 2).expect("bind");
        let made = connect_all(small.local_addr().unwrap(), 6);
        assert!((2..=4).contains(&made), "{made} connections completed with a backlog of 2");
        let unset = Settings { client_port_listen_backlog: -1, ..test_settings() };
        assert_eq!(unset.listen_backlog(), 65_535);
        assert_eq!(Settings { client_port_listen_backlog: 0, ..test_settings() }.listen_backlog(), 65_535);
        assert_eq!(Settings { client_port_listen_backlog: 50, ..test_settings() }.listen_backlog(), 50);
        let large = bind_client("127.0.0.1:0".parse().unwrap(), unset.listen_backlog()).expect("bind");
        assert_eq!(connect_all(large.local_addr().unwrap(), 200), 200);
    }

    fn test_settings() -> Settings {
        let cfg =
            crate::config::ServerConfig::parse("dataDir=/tmp/zkrs-backlog-test\nclientPort=2181\n", None)
                .expect("config");
        Settings::from_config(&cfg).expect("settings")
    }

    /// The start refused on an unfinished restore names what else dataDir holds, and what an
    /// earlier build's forced restore moved aside is said to hold the old data.
    #[test]
    fn an_unfinished_restore_refusal_names_the_other_entries() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join(crate::backup::restore::STAGING_NAME)).unwrap();
        let alone = unfinished_restore(d).expect("refused").to_string();
        assert!(alone.contains("run the restore again") && !alone.contains("also holds"), "{alone}");
        for n in ["zkrs-snap.before-restore-17", "zkrs-log.before-restore-17", "myid"] {
            std::fs::create_dir_all(d.join(n)).unwrap();
        }
        let said = unfinished_restore(d).expect("refused").to_string();
        assert!(
            said.contains("dataDir also holds myid, zkrs-log.before-restore-17, zkrs-snap.before-restore-17"),
            "{said}"
        );
        assert!(said.contains("move those away first"), "{said}");
        assert!(said.contains("earlier build's `restore --force` moved aside"), "{said}");
    }
}
