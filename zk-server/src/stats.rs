//! Counters behind the four-letter words: server-wide latency and packet counts, and per-connection
//! figures for `cons`.

use crate::summary::Summary;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use zk_proto::OpCode;

/// Client connections the listener refused and the clients dropped, and plain HTTP connections
/// on the AdminServer's unified port, counted where it happens (the accept loops, each
/// connection's reader) and read by `mntr` and `/metrics`.
#[derive(Debug, Default)]
pub struct ConnCounters {
    rejected: AtomicU64,
    dropped: AtomicU64,
    insecure_admin: AtomicU64,
}

impl ConnCounters {
    /// A connection refused: over `maxClientCnxns`, or `accept` failed (Apache's
    /// `connection_rejected`).
    pub fn reject(&self) {
        self.rejected.fetch_add(1, Relaxed);
    }

    /// A connection whose client closed it or broke it (EOF or a read error) while the server
    /// still served it (Apache's `connection_drop_count`).
    pub fn drop_one(&self) {
        self.dropped.fetch_add(1, Relaxed);
    }

    /// A plain HTTP connection on the AdminServer's port under `admin.portUnification` (Apache's
    /// `insecure_admin_count`).
    pub fn insecure_admin_one(&self) {
        self.insecure_admin.fetch_add(1, Relaxed);
    }

    /// Zeroes the counts (`srst`).
    pub fn reset(&self) {
        self.rejected.store(0, Relaxed);
        self.dropped.store(0, Relaxed);
        self.insecure_admin.store(0, Relaxed);
    }

    /// Connections refused so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Relaxed)
    }

    /// Connections dropped by their clients so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Plain connections on the AdminServer's unified port so far.
    pub fn insecure_admin(&self) -> u64 {
        self.insecure_admin.load(Relaxed)
    }
}

/// Server-wide statistics, owned by the core task.
#[derive(Debug)]
pub struct ServerStats {
    /// Requests received.
    pub packets_received: u64,
    /// Frames sent.
    pub packets_sent: u64,
    /// Failed addauth attempts.
    pub auth_failed: u64,
    /// Writes answered SYSTEMERROR because the transaction log was out of space.
    pub writes_refused: u64,
    /// Writes answered SYSTEMERROR by the memory brake (`zkrs.treeMemorySoftLimitBytes`), as
    /// leader or standalone server (the server that preps them).
    pub writes_refused_memory: u64,
    /// Whether the log is refusing writes right now (out of space).
    pub disk_full: bool,
    /// Sessions this server expired for want of pings, as standalone server or leader (Apache's
    /// `stale_sessions_expired`).
    pub sessions_expired: u64,
    /// Txns after whose apply the tree digest differed from the one their proposal carried
    /// (Apache's `digest_mismatches_count`).
    pub digest_mismatches: u64,
    /// Times the server left its role for a digest mismatch, to rebuild its tree from disk and
    /// sync again (zkrs's own; Apache only counts the mismatch).
    pub digest_resyncs: u64,
    latency_min_us: u64,
    latency_max_us: u64,
    latency_total_us: u64,
    latency_count: u64,
    /// Reads' times from receipt to reply (Apache's `readlatency`).
    pub read_latency: Summary,
    /// Writes' times from receipt to reply (Apache's `updatelatency`: requests that became
    /// transactions, failed ones included).
    pub update_latency: Summary,
}

impl ServerStats {
    /// Zeroed statistics.
    pub fn new() -> Self {
        ServerStats {
            packets_received: 0,
            packets_sent: 0,
            auth_failed: 0,
            writes_refused: 0,
            writes_refused_memory: 0,
            disk_full: false,
            sessions_expired: 0,
            digest_mismatches: 0,
            digest_resyncs: 0,
            latency_min_us: u64::MAX,
            latency_max_us: 0,
            latency_total_us: 0,
            latency_count: 0,
            read_latency: Summary::default(),
            update_latency: Summary::default(),
        }
    }

    /// Zeroes everything (`srst`).
    pub fn reset(&mut self) {
        let disk_full = self.disk_full;
        *self = ServerStats::new();
        self.disk_full = disk_full;
    }

    /// Records one request's time from receipt to reply, answered at `now_ms`; `write`: it was a
    /// transaction.
    pub fn record_latency(&mut self, d: Duration, write: bool, now_ms: u64) {
        let us = d.as_micros() as u64;
        if write { &mut self.update_latency } else { &mut self.read_latency }.observe(us, now_ms);
        self.latency_min_us = self.latency_min_us.min(us);
        self.latency_max_us = self.latency_max_us.max(us);
        self.latency_total_us += us;
        self.latency_count += 1;
    }

    /// (min, avg, max) in ms, as Apache prints them.
    pub fn latency_ms(&self) -> (u64, f64, u64) {
        if self.latency_count == 0 {
            return (0, 0.0, 0);
        }
        (
            self.latency_min_us / 1000,
            self.latency_total_us as f64 / self.latency_count as f64 / 1000.0,
            self.latency_max_us / 1000,
        )
    }
}

impl Default for ServerStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Per-connection statistics, shared by the connection task and the core.
#[derive(Debug)]
pub struct ConnStats {
    /// Frames received.
    pub received: AtomicU64,
    /// Frames sent.
    pub sent: AtomicU64,
    /// Session id, 0 before the handshake completes.
    pub session: AtomicI64,
    /// Negotiated timeout.
    pub timeout_ms: AtomicI32,
    /// When the connection was established, ms since the epoch.
    pub established_ms: i64,
    /// It arrived on the TLS client port (secureClientPort): the AdminServer lists it under
    /// `secure_connections`, as Apache lists its secure factory's.
    pub secure_port: bool,
    last: Mutex<LastOp>,
}

#[derive(Debug, Default, Clone)]
struct LastOp {
    op: Option<OpCode>,
    cxid: i32,
    zxid: i64,
    at_wall_ms: i64,
    latency_ms: u64,
    min_ms: u64,
    max_ms: u64,
    total_ms: u64,
    count: u64,
}

impl ConnStats {
    /// Fresh counters for a connection opened now.
    pub fn new() -> Self {
        ConnStats {
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            session: AtomicI64::new(0),
            timeout_ms: AtomicI32::new(0),
            established_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
            secure_port: false,
            last: Mutex::new(LastOp::default()),
        }
    }

    /// Fresh counters for a connection opened now on the TLS client port.
    pub fn on_secure_port() -> Self {
        ConnStats { secure_port: true, ..ConnStats::new() }
    }

    /// Records the session once bound.
    pub fn set_session(&self, sid: i64, timeout_ms: i32) {
        self.session.store(sid, Relaxed);
        self.timeout_ms.store(timeout_ms, Relaxed);
    }

    /// Records a request answered at `wall_ms` (ms since the Unix epoch).
    pub fn record(&self, op: OpCode, cxid: i32, zxid: i64, latency: Duration, wall_ms: i64) {
        let ms = latency.as_millis() as u64;
        let mut l = self.last.lock().unwrap_or_else(|e| e.into_inner());
        l.op = Some(op);
        l.cxid = cxid;
        l.zxid = zxid;
        l.at_wall_ms = wall_ms;
        l.latency_ms = ms;
        l.min_ms = if l.count == 0 { ms } else { l.min_ms.min(ms) };
        l.max_ms = l.max_ms.max(ms);
        l.total_ms += ms;
        l.count += 1;
    }

    /// Zeroes the counters (`crst`).
    pub fn reset(&self) {
        self.received.store(0, Relaxed);
        self.sent.store(0, Relaxed);
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = LastOp::default();
    }

    /// The last request's figures, or `None` before the first one was answered.
    pub fn last_request(&self) -> Option<LastRequest> {
        let l = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (l.count > 0).then(|| LastRequest {
            op: l.op.map(op_abbrev).unwrap_or("NA"),
            cxid: l.cxid,
            zxid: l.zxid,
            at_wall_ms: l.at_wall_ms,
            latency_ms: l.latency_ms,
            min_ms: l.min_ms,
            avg_ms: l.total_ms.checked_div(l.count).unwrap_or(0),
            max_ms: l.max_ms,
        })
    }

    /// The `cons` details after the queued/recved/sent counts, or `None` before the handshake.
    pub fn details(&self) -> Option<String> {
        let sid = self.session.load(Relaxed);
        if sid == 0 {
            return None;
        }
        let l = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let avg = l.total_ms.checked_div(l.count).unwrap_or(0);
        let mut s = format!(
            ",sid=0x{sid:x},lop={},est={},to={}",
            l.op.map(op_abbrev).unwrap_or("NA"),
            self.established_ms,
            self.timeout_ms.load(Relaxed)
        );
        if l.count > 0 {
            s.push_str(&format!(",lcxid=0x{:x},lzxid=0x{:x},lresp={}", l.cxid, l.zxid, l.at_wall_ms));
            s.push_str(&format!(
                ",llat={},minlat={},avglat={},maxlat={}",
                l.latency_ms, l.min_ms, avg, l.max_ms
            ));
        }
        Some(s)
    }
}

/// A connection's last request and its latencies, as `cons` shows them.
#[derive(Debug, Clone, Copy)]
pub struct LastRequest {
    /// The operation's four-letter abbreviation.
    pub op: &'static str,
    /// Its cxid.
    pub cxid: i32,
    /// The zxid of its reply.
    pub zxid: i64,
    /// When it was answered, ms since the Unix epoch.
    pub at_wall_ms: i64,
    /// Its latency, ms.
    pub latency_ms: u64,
    /// The connection's smallest latency, ms.
    pub min_ms: u64,
    /// The connection's mean latency, ms.
    pub avg_ms: u64,
    /// The connection's largest latency, ms.
    pub max_ms: u64,
}

impl Default for ConnStats {
    fn default() -> Self {
        Self::new()
    }
}

/// The four-letter abbreviation Apache shows for the last operation in `cons`.
pub fn op_abbrev(op: OpCode) -> &'static str {
    match op {
        OpCode::Notification => "NOTI",
        OpCode::Create | OpCode::Create2 | OpCode::CreateTtl | OpCode::CreateContainer => "CREA",
        OpCode::Delete | OpCode::DeleteContainer => "DELE",
        OpCode::Exists => "EXIS",
        OpCode::GetData => "GETD",
        OpCode::SetData => "SETD",
        OpCode::GetAcl => "GETA",
        OpCode::SetAcl => "SETA",
        OpCode::GetChildren => "GETC",
        OpCode::GetChildren2 => "GETC",
        OpCode::Sync => "SYNC",
        OpCode::Ping => "PING",
        OpCode::Check => "CHEC",
        OpCode::Multi => "MULT",
        OpCode::MultiRead => "MLTR",
        OpCode::Reconfig => "RECO",
        OpCode::CheckWatches => "CHKW",
        OpCode::RemoveWatches => "REMW",
        OpCode::Auth => "AUTH",
        OpCode::SetWatches => "SETW",
        OpCode::SetWatches2 => "STW2",
        OpCode::Sasl => "SASL",
        OpCode::GetEphemerals => "GETE",
        OpCode::GetAllChildrenNumber => "GETACN",
        OpCode::AddWatch => "ADDW",
        OpCode::WhoAmI => "HOMI",
        OpCode::CreateSession => "SESS",
        OpCode::CloseSession => "CLOS",
        OpCode::Error => "NA",
    }
}
