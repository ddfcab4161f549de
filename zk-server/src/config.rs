//! zoo.cfg and myid: the server's configuration, read the way Apache ZooKeeper 3.8 reads it.
//!
//! The file is a `java.util.Properties` file (see [`load_properties`] for the exact syntax) and the
//! keys mean what `QuorumPeerConfig` makes of them, so an existing zoo.cfg works unchanged. Keys that
//! Apache only understands as JVM system properties (`snapCount`, `4lw.commands.whitelist`,
//! `DigestAuthenticationProvider.superDigest`, ...) are first-class here, because Apache turns every
//! unknown zoo.cfg key into the system property `zookeeper.<key>`.
//!
//! Where we are stricter than Apache it is on purpose: a value Apache would silently replace by its
//! default (a typo in `snapCount`, say) stops start-up here with the key and the line named, since a
//! server that quietly runs with a different setting than the one written is worse than one that
//! refuses to start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Apache's default tick when zoo.cfg has no `tickTime` (ms).
pub const DEFAULT_TICK_TIME_MS: u32 = 3000;
/// Connections allowed per client IP by default.
pub const DEFAULT_MAX_CLIENT_CNXNS: i32 = 60;
/// Smallest `autopurge.snapRetainCount` Apache honours; smaller values are raised to it.
pub const MIN_SNAP_RETAIN_COUNT: u32 = 3;
/// Default `snapCount`: transactions between snapshots (randomised in `[n/2+1, n]`).
pub const DEFAULT_SNAP_COUNT: u32 = 100_000;
/// Default `snapSizeLimitInKb`: log bytes between snapshots, KiB (4 GiB; randomised in
/// `[n/2, n)`).
pub const DEFAULT_SNAP_SIZE_LIMIT_KB: i64 = 4_194_304;
/// Default `snapshot.writeMBPerSecond` (a zkrs key): snapshots are written at 10 MB/s, or at
/// twice the rate the log grows when that is more.
pub const DEFAULT_SNAPSHOT_WRITE_MB_PER_SECOND: u32 = 10;
/// Default `snapshot.compressionLevel` (a zkrs key): zstd's level 1, its fastest regular level.
/// Snapshots are compressed on the snapshot thread while the server serves, beside the core and
/// the connections on the same cores, so the CPU it takes is the cost that counts: on a million
/// znodes level 3 made the file only 1.2% smaller than level 1, for a slower compression
/// (bench/RESULTS.md, 2026-11-30, tenth session).
pub const DEFAULT_SNAPSHOT_COMPRESSION_LEVEL: i32 = 1;
/// Default `snapshot.idleSeconds` (a zkrs key): a snapshot is taken once writes have stopped for
/// this long, when the log written since the last one is worth replacing.
pub const DEFAULT_SNAPSHOT_IDLE_SECONDS: u32 = 5;
/// Default `snapshot.minRequestIntervalSeconds` (a zkrs key): an operator's request for a
/// snapshot (`csnp`, the AdminServer's `create_snapshot` and `snapshot`) starts none within this
/// long of the last snapshot's start.
pub const DEFAULT_SNAPSHOT_MIN_REQUEST_INTERVAL_SECONDS: u32 = 60;
/// Default `zkrs.backup.intervalSecs` (a zkrs key), in ms: the server's own archiver passes
/// every 10 s, as `zkrs-server backup --follow` does by default.
pub const DEFAULT_BACKUP_INTERVAL_MS: u64 = 10_000;
/// Default `zkrs.backup.holdMaxBytes` (a zkrs key): purge keeps at most 10 GiB of snapshots and
/// log segments for an archive that lags, then removes them anyway (the archive gets a gap), so
/// that a broken archive does not fill the disk and stop the server's writes.
pub const DEFAULT_BACKUP_HOLD_MAX_BYTES: u64 = 10 << 30;
/// Default `admin.restore.maxBytes` (a zkrs key): the largest snapshot the AdminServer's
/// `restore` takes, 1 GiB.
pub const DEFAULT_ADMIN_RESTORE_MAX_BYTES: u64 = 1 << 30;
/// Default `preAllocSize`, KiB (64 MiB txn log preallocation steps).
pub const DEFAULT_PRE_ALLOC_SIZE_KB: u64 = 65_536;
/// Default `globalOutstandingLimit`.
pub const DEFAULT_GLOBAL_OUTSTANDING_LIMIT: u32 = 1000;
/// Default (and minimum) `commitLogCount`.
pub const DEFAULT_COMMIT_LOG_COUNT: u32 = 500;
/// Default `nio.sessionlessCnxnTimeout`, ms (Apache's 10 s).
pub const DEFAULT_SESSIONLESS_CNXN_TIMEOUT_MS: u32 = 10_000;
/// Default `jute.maxbuffer`: largest frame accepted, bytes.
pub const DEFAULT_JUTE_MAX_BUFFER: u32 = 0xfffff;
/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// Default `admin.serverPort`.
pub const DEFAULT_ADMIN_SERVER_PORT: u16 = 8080;
/// Default `znode.container.checkIntervalMs`.
pub const DEFAULT_CONTAINER_CHECK_INTERVAL_MS: u32 = 60_000;
/// Default `znode.container.maxPerMinute`.
pub const DEFAULT_CONTAINER_MAX_PER_MINUTE: u32 = 10_000;
/// The only election algorithm Apache 3.8 accepts (fast leader election over TCP).
pub const ELECTION_ALG_FAST: u32 = 3;
/// Largest server id: session ids carry the server id in their top byte.
pub const MAX_SERVER_ID: u64 = 255;
/// Largest server id when `extendedTypesEnabled` (TTL nodes) is on, as in Apache.
pub const MAX_EXTENDED_SERVER_ID: u64 = 254;

/// Every four-letter word Apache 3.8 knows, and ClickHouse Keeper's `csnp`, `lgif`, `rqld` and
/// `ydld`; `4lw.commands.whitelist=*` enables all of them (not [`EXPLICIT_FOUR_LETTER_WORDS`]).
pub const FOUR_LETTER_WORDS: [&str; 23] = [
    "conf",
    "cons",
    "crst",
    "dirs",
    "dump",
    "envi",
    "gtmk",
    "ruok",
    "stmk",
    "srst",
    "srvr",
    "stat",
    "wchc",
    "wchp",
    "wchs",
    "mntr",
    "isro",
    "hash",
    "telnet close",
    "csnp",
    "lgif",
    "rqld",
    "ydld",
];

/// Four-letter words that `4lw.commands.whitelist=*` leaves out: only a whitelist that names
/// them enables them. `rcvr`, forced recovery (ClickHouse Keeper's), which makes one server lead
/// alone after its ensemble's quorum is lost for good.
pub const EXPLICIT_FOUR_LETTER_WORDS: [&str; 1] = ["rcvr"];

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file (zoo.cfg, the dynamic config file or myid) could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A key has a bad value, a required key is missing, or keys contradict each other.
    #[error("{}", describe_invalid(.file.as_deref(), *.line, .key, .message))]
    Invalid {
        /// The file the key is in (`None` when parsed from text).
        file: Option<PathBuf>,
        /// 1-based line of the key (`None` when the key is missing altogether).
        line: Option<u32>,
        /// The key, as written in the file (`myid` for the myid file).
        key: String,
        /// What is wrong, in words.
        message: String,
    },
}

impl ConfigError {
    /// The key named by the error (`None` for I/O errors).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Invalid { key, .. } => Some(key),
        }
    }

    /// The 1-based line named by the error, when there is one.
    pub fn line(&self) -> Option<u32> {
        match self {
            ConfigError::Io { .. } => None,
            ConfigError::Invalid { line, .. } => *line,
        }
    }
}

fn describe_invalid(file: Option<&Path>, line: Option<u32>, key: &str, message: &str) -> String {
    let place = match (file, line) {
        (Some(f), Some(l)) => format!("{} line {l}: ", f.display()),
        (Some(f), None) => format!("{}: ", f.display()),
        (None, Some(l)) => format!("line {l}: "),
        (None, None) => String::new(),
    };
    format!("{place}{key}: {message}")
}

/// A server's role in the ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerType {
    /// Votes in elections and in write quorums.
    Participant,
    /// Follows the leader without voting.
    Observer,
}

/// A host (name or literal address, without brackets) and a port.
pub use zk_proto::HostPort;

/// One `server.N=host:quorumPort:electionPort[:type][;[clientHost:]clientPort]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumServer {
    /// The server id N.
    pub id: u64,
    /// Host the quorum and election ports listen on.
    pub host: String,
    /// Port followers connect to the leader on.
    pub quorum_port: u16,
    /// Port leader election runs on.
    pub election_port: u16,
    /// Participant (default) or observer.
    pub peer_type: PeerType,
    /// Client address given after `;` (host `0.0.0.0` when only a port is given).
    pub client: Option<HostPort>,
}

/// The run-time values the `conf` four-letter word prints next to the configuration.
#[derive(Debug, Clone, Default)]
pub struct ConfStatus {
    /// The port the client listener is actually bound to (`None`: no listener, printed as -1).
    pub client_port: Option<u16>,
    /// Total bytes of the files under the snapshot directory ([`ServerConfig::snap_dir`]).
    pub snap_dir_bytes: u64,
    /// Total bytes of the files under the txn log directory ([`ServerConfig::log_dir`]).
    pub log_dir_bytes: u64,
}

/// A parsed and validated zoo.cfg (plus dynamic config file and myid), with Apache's defaults filled in.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The file this came from (`None` when parsed from text or built in).
    pub config_file: Option<PathBuf>,
    /// `tickTime`, ms (> 0).
    pub tick_time_ms: u32,
    /// `dataDir`: snapshots and myid live here. Relative paths are relative to the working directory.
    pub data_dir: PathBuf,
    /// `dataLogDir`: the txn log; defaults to `data_dir`.
    pub data_log_dir: PathBuf,
    /// Where clients connect: `clientPortAddress:clientPort` (host `0.0.0.0` when no address), or
    /// this server's `server.N` client address. `None` when no client port is configured anywhere
    /// (only possible for an ensemble member, standalone refuses it).
    pub client_address: Option<HostPort>,
    /// `secureClientPortAddress:secureClientPort` (host `0.0.0.0` when no address): where clients
    /// connect with TLS; `None` without a secure client port.
    pub secure_client_address: Option<HostPort>,
    /// The TLS settings (`ssl.*`, `client.portUnification`, `client.certReload`,
    /// `X509AuthenticationProvider.superUser`); validated when TLS is served.
    pub ssl: crate::ssl_config::SslConfig,
    /// The SASL and authentication enforcement keys (`authProvider.N`, `enforce.auth.*`,
    /// `sessionRequireClientSASLAuth`, `superUser`, `java.security.auth.login.config`);
    /// resolved with the JVM flags' system properties by the settings.
    pub sasl: crate::sasl_config::SaslConfig,
    /// The TLS settings between ensemble members (`ssl.quorum.*`); validated when `sslQuorum`
    /// or `portUnification` is true.
    pub ssl_quorum: crate::ssl_config::SslConfig,
    /// `sslQuorum`: this server dials its peers' quorum and election ports with TLS, and its own
    /// take only TLS (unless `portUnification`).
    pub ssl_quorum_enabled: bool,
    /// `portUnification`: this server's quorum and election ports take TLS and plain connections
    /// alike (for switching an ensemble to or from `sslQuorum` one server at a time).
    pub quorum_port_unification: bool,
    /// `sslQuorumReloadCertFiles`: the `ssl.quorum.*` stores are read again when their files
    /// change.
    pub ssl_quorum_reload: bool,
    /// `maxClientCnxns`: connections per client IP; 0 or negative means unlimited (as in Apache).
    pub max_client_cnxns: i32,
    /// `maxCnxns`: client connections in all (both client ports); 0 means unlimited, Apache's
    /// default. A negative value is taken as 0 with a warning, as Apache does.
    pub max_cnxns: i32,
    /// `nio.sessionlessCnxnTimeout` (Apache's `zookeeper.nio.sessionlessCnxnTimeout`, which a
    /// zoo.cfg line sets), ms, default 10000: how long a connection may take from its accept to a
    /// complete handshake or four-letter word, however slowly it trickles bytes in.
    pub sessionless_cnxn_timeout_ms: u32,
    /// `minSessionTimeout`, ms; defaults to 2 ticks.
    pub min_session_timeout_ms: u32,
    /// `maxSessionTimeout`, ms; defaults to 20 ticks; never below `min_session_timeout_ms`.
    pub max_session_timeout_ms: u32,
    /// `clientPortListenBacklog`; -1 (not set) = the most the system allows
    /// (`Settings::listen_backlog`).
    pub client_port_listen_backlog: i32,
    /// `initLimit`, ticks (0 = not set; required when distributed).
    pub init_limit: u32,
    /// `syncLimit`, ticks (0 = not set; required when distributed).
    pub sync_limit: u32,
    /// `connectToLearnerMasterLimit`, ticks (0 = not set).
    pub connect_to_learner_master_limit: u32,
    /// `electionAlg`; always 3.
    pub election_alg: u32,
    /// This server's role: `peerType`, overridden by its own `server.N` line when there is one.
    pub peer_type: PeerType,
    /// `server.N` lines by id.
    pub servers: BTreeMap<u64, QuorumServer>,
    /// `group.G=sid:sid:...` lines: group id to members (hierarchical quorums).
    pub groups: BTreeMap<u64, Vec<u64>>,
    /// `weight.N=w` lines, with weight 1 filled in for grouped participants given none.
    pub weights: BTreeMap<u64, u64>,
    /// `standaloneEnabled` (default true).
    pub standalone_enabled: bool,
    /// `reconfigEnabled` (default false).
    pub reconfig_enabled: bool,
    /// `dynamicConfigFile`, when the ensemble is listed in a separate file.
    pub dynamic_config_file: Option<PathBuf>,
    /// Version from the dynamic config file's name suffix (`zoo.cfg.dynamic.100000000` -> 0x100000000).
    pub dynamic_config_version: Option<u64>,
    /// `localSessionsEnabled` (default false).
    pub local_sessions_enabled: bool,
    /// `localSessionsUpgradingEnabled` (default false).
    pub local_sessions_upgrading_enabled: bool,
    /// `autopurge.snapRetainCount` (default and minimum 3).
    pub snap_retain_count: u32,
    /// `autopurge.purgeInterval`, hours; 0 = autopurge off (negative values also mean off).
    pub purge_interval_hours: u32,
    /// `syncEnabled` (default true): observers log and snapshot like followers.
    pub sync_enabled: bool,
    /// `quorumListenOnAllIPs` (default false).
    pub quorum_listen_on_all_ips: bool,
    /// `snapCount` (default 100000, minimum 2).
    pub snap_count: u32,
    /// `snapSizeLimitInKb` (default 4 GiB): a snapshot is also taken once about this much log was
    /// written since the last one; zero or negative turns the size trigger off.
    pub snap_size_limit_kb: i64,
    /// `snapshot.writeMBPerSecond` (a zkrs key, default 10): the pace a snapshot is written at, in
    /// MB (10^6 bytes) a second, so that it leaves the disk to the log's syncs; raised to twice the
    /// rate the log grew since the last snapshot when that is more, so that snapshots keep up with
    /// a busy log; 0 = as fast as the disk takes it.
    pub snapshot_write_mb_per_second: u32,
    /// `snapshot.idleSeconds` (a zkrs key, default 5): once no transaction has been applied for
    /// this many seconds, a snapshot is taken if the log since the last one holds at least a
    /// tenth of snapCount transactions and a sixteenth of that snapshot's size, written as fast
    /// as the disk takes it while writes stay away; so that a restart after a burst of writes
    /// replays nothing. 0 = off.
    pub snapshot_idle_seconds: u32,
    /// `snapshot.minRequestIntervalSeconds` (a zkrs key, default 60): an operator's request for
    /// a snapshot starts none within this many seconds of the last snapshot's start (each one
    /// serializes and syncs the whole tree and lets retention purge the log). 0 = no minimum.
    pub snapshot_min_request_interval_seconds: u32,
    /// `snapshot.compression` (a zkrs key, `none` or `zstd`, default `none`): how snapshot files
    /// store their chunks. `zstd` writes the compressed format (zk-log's snapshot format 2), which
    /// a zkrs from before it refuses; every snapshot already on disk is read whatever its format.
    pub snapshot_compression: zk_log::snapshot::Codec,
    /// `snapshot.compressionLevel` (a zkrs key, 1 to 6, default
    /// [`DEFAULT_SNAPSHOT_COMPRESSION_LEVEL`]): zstd's level when `snapshot.compression=zstd`
    /// (set without it: a warning, and no effect).
    pub snapshot_compression_level: i32,
    /// `txnLog.appendMode` (a zkrs key, `pwrite` or `mmap`, default `pwrite`): how the log's
    /// appends reach its segment files, with `pwrite` or through their shared mapping (zk-log's
    /// `AppendMode`; both keep the same format, syncs and recovery). Why `pwrite` is the default:
    /// bench/RESULTS.md (round 2) and docs/log-format.md.
    pub txn_log_append_mode: zk_log::AppendMode,
    /// `preAllocSize`, KiB (default 65536).
    pub pre_alloc_size_kb: u64,
    /// `globalOutstandingLimit` (default 1000).
    pub global_outstanding_limit: u32,
    /// `commitLogCount` (default and minimum 500): committed proposals kept in memory for DIFF syncs.
    pub commit_log_count: u32,
    /// `leaderServes` (default yes): whether the leader accepts client connections.
    pub leader_serves: bool,
    /// `cnxTimeout`, ms (default 5000): how long a connection to a peer's election port may take
    /// to open and exchange its handshake.
    pub cnx_timeout_ms: u32,
    /// Four-letter words enabled: `4lw.commands.whitelist` plus `srvr` always, plus `isro` when
    /// read-only mode is enabled.
    pub four_letter_words: BTreeSet<String>,
    /// `extendedTypesEnabled` (default false): TTL nodes allowed.
    pub extended_types_enabled: bool,
    /// `digest.enabled` (Apache's `zookeeper.digest.enabled`, default true): an ensemble member
    /// keeps the tree digest, stamps its proposals with it when leading, and checks it when
    /// applying its leader's.
    pub digest_enabled: bool,
    /// `DigestAuthenticationProvider.superDigest` (`super:<base64 sha1>`).
    pub super_digest: Option<String>,
    /// `jute.maxbuffer`, bytes (default 0xfffff).
    pub jute_max_buffer: u32,
    /// `readonlymode.enabled` (default false).
    pub read_only_mode_enabled: bool,
    /// `admin.enableServer` (default true; only the exact value `false` disables it, as in Apache).
    pub admin_enable_server: bool,
    /// `admin.serverAddress` (default `0.0.0.0`).
    pub admin_server_address: String,
    /// `admin.serverPort` (default 8080).
    pub admin_server_port: u16,
    /// `admin.commandURL` (default `/commands`): where the AdminServer's commands are served.
    pub admin_command_url: String,
    /// `admin.idleTimeout`, ms (default 30000): how long the AdminServer waits for a request.
    pub admin_idle_timeout_ms: u32,
    /// `admin.forceHttps` (default false): the AdminServer serves HTTPS only, with the
    /// `ssl.quorum.*` stores. Its line, when set to true.
    pub admin_force_https: Option<u32>,
    /// `admin.portUnification` (default false): the AdminServer serves HTTP and HTTPS on one
    /// port, told apart by a connection's first byte (`admin.forceHttps` wins when both are set).
    /// Its line, when set to true.
    pub admin_port_unification: Option<u32>,
    /// `admin.needClientAuth` (Apache 3.9; default false): HTTPS clients must show a certificate
    /// the `ssl.quorum.*` trust store vouches for. Without it none is asked for.
    pub admin_need_client_auth: bool,
    /// `admin.snapshot.enabled` (Apache 3.9; default true): the AdminServer's `snapshot` command
    /// is served. Java's `parseBoolean`: only `true`, in any case, keeps it on.
    pub admin_snapshot_enabled: bool,
    /// `admin.rateLimiterIntervalInMS` (Apache 3.9; default 300000): at most one `snapshot` per
    /// this many ms, and one `restore`.
    pub admin_rate_limiter_interval_ms: u64,
    /// `admin.restore.enabled` (Apache 3.9; default true): the AdminServer's `restore` command
    /// is served. Java's `parseBoolean`: only `true`, in any case, keeps it on.
    pub admin_restore_enabled: bool,
    /// `admin.restore.maxBytes` (a zkrs key; default 1 GiB): the largest snapshot a `restore`
    /// takes (it is held in memory while it is decoded); a larger one is answered 413.
    pub admin_restore_max_bytes: u64,
    /// `admin.restApi.enabled` (a zkrs key; default false): the AdminServer also serves the REST
    /// data API under `/api/v1/storage` (reads only, unless `admin.restApi.writable`).
    pub admin_rest_api_enabled: bool,
    /// `admin.restApi.writable` (a zkrs key; default false): the REST data API also creates,
    /// sets and deletes znodes (ACLs apply as for any client).
    pub admin_rest_api_writable: bool,
    /// `slowRequestThresholdMs` (zkrs key; default 0 = off): a request answered this many ms or
    /// more after it arrived is logged at WARN.
    pub slow_request_threshold_ms: u32,
    /// `zkrs.keepClientsThroughElection` (a zkrs key; default true): a leader or learner that
    /// leaves its role keeps the client connections with nothing in flight until it serves
    /// again (at most a third of each session's timeout after it last heard from its leader);
    /// false closes them all, as Apache's servers do.
    pub keep_clients_through_election: bool,
    /// `zkrs.treeMemorySoftLimitBytes` (a zkrs key; default 0 = off): the memory brake's soft
    /// limit on the tree's accounted bytes (zk-tree's `memory` module says what is counted).
    /// Past it, creates, setData growing a node's data and multis holding either are answered
    /// SYSTEMERROR; reads, deletes and shrinking writes go on. A whole number of bytes,
    /// optionally followed by `k`, `m` or `g` (KiB, MiB, GiB).
    pub tree_memory_soft_limit_bytes: u64,
    /// `zkrs.backup.to` (a zkrs key; unset by default): the archive the server archives into by
    /// itself (a directory, or `s3://bucket/prefix`), with `{myid}` replaced by the server's id
    /// (required in an ensemble: each member archives its own log into its own archive), a
    /// relative directory taken as `dataDir` is. `None`: the server does not archive.
    pub backup_to: Option<String>,
    /// `zkrs.backup.intervalSecs` (a zkrs key; default 10 s), in ms: between the starts of two
    /// passes of the server's archiver. Seconds, fractions allowed, more than 0 and at most
    /// 86400.
    pub backup_interval_ms: u64,
    /// `zkrs.backup.holdMaxBytes` (a zkrs key; default [`DEFAULT_BACKUP_HOLD_MAX_BYTES`]): the
    /// most bytes of snapshots and log segments the server's purge keeps for an archive that
    /// has not taken them; past it they are removed anyway, and the archive gets a gap. 0 = no
    /// bound. A whole number of bytes, optionally followed by `k`, `m` or `g`.
    pub backup_hold_max_bytes: u64,
    /// `testingonly.initialZxid` (Apache's system property `zookeeper.testingonly.initialZxid`;
    /// unset by default): the counter a leader starts each new epoch at, instead of 0, so that a
    /// test reaches the end of an epoch's zxids in a few writes. For tests only, as in Apache; a
    /// decimal number (as Apache reads it) or `0x` hexadecimal, at most 0xfffffffd (an epoch's
    /// last zxid has counter 0xfffffffe).
    pub initial_zxid_counter: Option<u32>,
    /// `logFormat` (zkrs key): `text` (default) or `json` (one JSON object a line).
    pub log_format: LogFormat,
    /// `logLevel` (zkrs key): the log filter (`info`, `warn`, `zk_server=debug,info`, ...) when
    /// RUST_LOG is not set; `None` = info.
    pub log_level: Option<String>,
    /// `metricsProvider.className` (default Apache's `DefaultMetricsProvider`); Apache's
    /// `PrometheusMetricsProvider` turns on the `/metrics` endpoint.
    pub metrics_provider_class_name: String,
    /// The other `metricsProvider.*` keys, prefix removed (`httpHost`, `httpPort` are used).
    pub metrics_provider: BTreeMap<String, String>,
    /// `znode.container.checkIntervalMs` (zkrs key; a JVM property in Apache; default 60000).
    pub container_check_interval_ms: u32,
    /// `znode.container.maxPerMinute` (zkrs key; a JVM property in Apache; default 10000).
    pub container_max_per_minute: u32,
    /// `znode.container.maxNeverUsedIntervalMs` (zkrs key; default 0 = never-used containers kept).
    pub container_max_never_used_interval_ms: u64,
    /// The id in `dataDir/myid`, when that file exists (required when distributed).
    pub my_id: Option<u64>,
    /// Keys zkrs does not know, with their values; each was logged with a warning.
    pub unknown: BTreeMap<String, String>,
}

/// One `key=value` pair of a properties file, with the line its logical line starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key, escapes resolved.
    pub key: String,
    /// The value, escapes resolved, leading whitespace removed (trailing whitespace kept, as Java does).
    pub value: String,
    /// 1-based line number of the first physical line of the entry.
    pub line: u32,
}

/// Splits properties text into entries exactly as `java.util.Properties.load` does.
///
/// Rules: lines end at `\n`, `\r` or `\r\n`; leading spaces, tabs and form feeds are skipped; a line
/// whose first other character is `#` or `!` is a comment (and never continues); a line ending in
/// an odd number of backslashes continues on the next line, whose leading whitespace is dropped; the
/// key ends at the first unescaped `=`, `:` or whitespace, after which whitespace and one `=` or `:`
/// are skipped; `\t \n \r \f \uXXXX` are escapes and a backslash before any other character stands
/// for that character. Entries are returned in file order, duplicates included.
///
/// Errors: a malformed `\uXXXX` escape, reported as `(line, message)`.
pub fn load_properties(text: &str) -> Result<Vec<Property>, (u32, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0usize;
    let mut line_no: u32 = 1;
    let is_ws = |c: char| c == ' ' || c == '\t' || c == '\u{c}';
    // Consumes one line terminator at `i` (if any), counting the line.
    let eat_eol = |i: &mut usize, line_no: &mut u32| {
        if *i < chars.len() && chars[*i] == '\r' {
            *i += 1;
            if *i < chars.len() && chars[*i] == '\n' {
                *i += 1;
            }
            *line_no += 1;
        } else if *i < chars.len() && chars[*i] == '\n' {
            *i += 1;
            *line_no += 1;
        }
    };
    while i < chars.len() {
        while i < chars.len() && is_ws(chars[i]) {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let c = chars[i];
        if c == '\n' || c == '\r' {
            eat_eol(&mut i, &mut line_no);
            continue;
        }
        let start_line = line_no;
        if c == '#' || c == '!' {
            while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                i += 1;
            }
            eat_eol(&mut i, &mut line_no);
            continue;
        }
        // Gather the logical line, joining continuations.
        let mut logical: Vec<char> = Vec::new();
        loop {
            let mut backslashes = 0usize;
            while i < chars.len() && chars[i] != '\n' && chars[i] != '\r' {
                if chars[i] == '\\' {
                    backslashes += 1;
                } else {
                    backslashes = 0;
                }
                logical.push(chars[i]);
                i += 1;
            }
            let continues = backslashes % 2 == 1;
            if continues {
                // The joining backslash is not part of the entry (also at end of input, as in Java).
                logical.pop();
            }
            if !continues || i >= chars.len() {
                eat_eol(&mut i, &mut line_no);
                break;
            }
            eat_eol(&mut i, &mut line_no);
            while i < chars.len() && is_ws(chars[i]) {
                i += 1;
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(&key).map_err(|m| (start_line, m))?;
        let value = unescape(&value).map_err(|m| (start_line, m))?;
        out.push(Property { key, value, line: start_line });
    }
    Ok(out)
}

fn split_key_value(buf: &[char]) -> (Vec<char>, Vec<char>) {
    let is_ws = |c: char| c == ' ' || c == '\t' || c == '\u{c}';
    let mut key_len = 0usize;
    let mut value_start = buf.len();
    let mut has_sep = false;
    let mut preceding_backslash = false;
    while key_len < buf.len() {
        let c = buf[key_len];
        if (c == '=' || c == ':') && !preceding_backslash {
            value_start = key_len + 1;
            has_sep = true;
            break;
        } else if is_ws(c) && !preceding_backslash {
            value_start = key_len + 1;
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
        key_len += 1;
    }
    while value_start < buf.len() {
        let c = buf[value_start];
        if !is_ws(c) {
            if !has_sep && (c == '=' || c == ':') {
                has_sep = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    (buf[..key_len].to_vec(), buf[value_start.min(buf.len())..].to_vec())
}

fn unescape(s: &[char]) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut i = 0usize;
    while i < s.len() {
        let c = s[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = s.get(i) else {
            // Unreachable from load_properties (odd trailing backslashes are removed), kept total.
            break;
        };
        i += 1;
        match e {
            'u' => {
                let hex: String = s.get(i..i + 4).map(|h| h.iter().collect()).unwrap_or_default();
                let code = if hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()) {
                    u32::from_str_radix(&hex, 16).ok()
                } else {
                    None
                };
                let Some(code) = code else {
                    return Err("malformed \\uxxxx escape".to_string());
                };
                i += 4;
                // A lone UTF-16 surrogate has no char; Java would keep it, we substitute U+FFFD.
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Java's `String.trim`: strips every character up to and including U+0020 from both ends.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

/// Java's `Long.parseLong` (ASCII digits): optional sign, at least one digit, no spaces.
fn java_parse_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// Java's `Integer.parseInt`.
fn java_parse_int(s: &str) -> Option<i32> {
    java_parse_long(s).and_then(|v| i32::try_from(v).ok())
}

/// Java's `Long.decode` (what `Integer.getInteger`/`Long.getLong` use): decimal, `0x`/`0X`/`#` hex,
/// leading `0` octal, optional sign in front.
fn java_decode_long(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(h) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
        (16, h)
    } else if let Some(h) = rest.strip_prefix('#') {
        (16, h)
    } else if rest.len() > 1 && rest.starts_with('0') {
        (8, &rest[1..])
    } else {
        (10, rest)
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    let v = if neg { -magnitude } else { magnitude };
    i64::try_from(v).ok()
}

/// Java's `Integer.decode`.
fn java_decode_int(s: &str) -> Option<i32> {
    java_decode_long(s).and_then(|v| i32::try_from(v).ok())
}

/// The file name part of Apache's `getVersionFromFilename`: the hex number after the last dot.
fn version_from_filename(name: &str) -> Option<u64> {
    let (_, suffix) = name.rsplit_once('.')?;
    let v = java_parse_hex_long(suffix)?;
    u64::try_from(v).ok()
}

fn java_parse_hex_long(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    i64::from_str_radix(s, 16).ok()
}

/// Apache's `ConfigUtils.getHostAndPort`: `[v6]:a:b` keeps the bracketed host whole, anything else
/// is split on `:`.
fn host_and_port_parts(s: &str) -> Result<Vec<String>, String> {
    if let Some(rest) = s.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err(format!("{s} starts with '[' but has no matching ']:'"));
        };
        let host = &rest[..close];
        let after = &rest[close + 1..];
        if after == ":" {
            return Err(format!("{s} doesn't have a port after colon"));
        }
        if let Some(ports) = after.strip_prefix(':') {
            let mut parts = vec![host.to_string()];
            parts.extend(java_split(ports, ':'));
            return Ok(parts);
        }
        // Java drops the brackets and returns the whole thing as a host (with no port).
        return Ok(vec![s.replace(['[', ']'], "")]);
    }
    Ok(java_split(s, ':'))
}

/// Java's `String.split` with a one-character literal: trailing empty pieces are removed.
fn java_split(s: &str, sep: char) -> Vec<String> {
    let mut parts: Vec<String> = s.split(sep).map(str::to_string).collect();
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() && !s.is_empty() {
        // Java: "::".split(":") is an empty array; "" stays [""].
        parts.clear();
    }
    parts
}

/// Where errors point: the file being read (if any).
struct Source<'a> {
    file: Option<&'a Path>,
}

impl Source<'_> {
    fn err(&self, key: &str, line: Option<u32>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.map(Path::to_path_buf),
            line,
            key: key.to_string(),
            message: message.into(),
        }
    }
}

const SERVER_FORMAT_HELP: &str = "expected host:quorumPort:electionPort[:participant|observer]\
     [;[clientHost:]clientPort]";

/// Keys Apache 3.8 understands that zkrs reads but has no use for (JVM pause monitor, multiple
/// addresses per server, the quorum oracle).
pub(crate) const APACHE_KEYS_IGNORED: [&str; 7] = [
    "jvm.pause.info-threshold.ms",
    "jvm.pause.warn-threshold.ms",
    "jvm.pause.sleep.time.ms",
    "jvm.pause.monitor",
    "multiAddress.reachabilityCheckTimeoutMs",
    "multiAddress.reachabilityCheckEnabled",
    "oraclePath",
];

/// Boolean keys Apache reads that zkrs cannot honour when true (several addresses per server):
/// false is accepted, true refused.
pub(crate) const APACHE_FEATURES_REFUSED: [&str; 1] = ["multiAddress.enabled"];

/// Values read so far, in Apache's raw form (0 / -1 meaning "not set") until validation.
struct Raw {
    tick_time: (i32, Option<u32>),
    data_dir: Option<(String, u32)>,
    data_log_dir: Option<(String, u32)>,
    client_port: (i32, Option<u32>),
    client_port_address: Option<(String, u32)>,
    secure_client_port: (i32, Option<u32>),
    secure_client_port_address: Option<(String, u32)>,
    min_session_timeout: (i32, Option<u32>),
    max_session_timeout: (i32, Option<u32>),
    init_limit: (i32, Option<u32>),
    sync_limit: (i32, Option<u32>),
    dynamic_config_file: Option<(String, u32)>,
    four_letter_words: Option<(String, u32)>,
    /// `zkrs.backup.to` as written, checked once myid and the membership are known.
    backup_to: Option<(String, u32)>,
    /// The last other `zkrs.backup.*` key set, and its line (of no use without the target).
    backup_tuned: Option<(&'static str, u32)>,
}

fn int_value(src: &Source<'_>, key: &str, value: &str, line: u32) -> Result<i32, ConfigError> {
    java_parse_int(value).ok_or_else(|| {
        src.err(key, Some(line), format!("\"{value}\" is not a valid integer (a 32-bit decimal number)"))
    })
}

fn decoded_value(src: &Source<'_>, key: &str, value: &str, line: u32) -> Result<i32, ConfigError> {
    java_decode_int(value).ok_or_else(|| {
        src.err(key, Some(line), format!("\"{value}\" is not a valid integer (decimal, 0x hex or 0 octal)"))
    })
}

/// A size in bytes: decimal digits, optionally followed by `k`, `m` or `g` (either case) for
/// KiB, MiB or GiB; None for anything else, or a size past `u64`.
fn byte_size(value: &str) -> Option<u64> {
    let (digits, unit) = match value.as_bytes().last()? {
        b'k' | b'K' => (&value[..value.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&value[..value.len() - 1], 1 << 20),
        b'g' | b'G' => (&value[..value.len() - 1], 1 << 30),
        _ => (value, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// `zkrs.backup.intervalSecs`'s value in ms: seconds (fractions allowed), more than 0 and at
/// most 86400; at least 1 ms.
fn interval_ms(value: &str) -> Option<u64> {
    let secs: f64 = value.parse().ok()?;
    // At least a tenth of a second: each pass reads the server's state on the driver's thread
    // (archiving review, helper-95).
    (secs.is_finite() && (0.1..=86_400.0).contains(&secs)).then(|| (secs * 1000.0).round() as u64)
}

/// `zkrs.backup.to`'s value (`to`, at `line`) as the server archives into it: `{myid}` replaced
/// by `id`, a relative directory taken against `base` as `dataDir` is.
///
/// Errors: empty; a control character; in an ensemble (`distributed`), no `{myid}` (each member
/// archives its own log, so the members' archives must differ: a second writer of one archive
/// is refused); a URL scheme other than `s3://`, or `s3://` without a bucket.
fn backup_target(
    src: &Source<'_>,
    to: &str,
    line: u32,
    distributed: bool,
    id: u64,
    base: Option<&Path>,
) -> Result<String, ConfigError> {
    const KEY: &str = "zkrs.backup.to";
    let at = Some(line);
    if to.is_empty() {
        return Err(src.err(KEY, at, "is empty: give a directory or s3://bucket/prefix, or remove the key"));
    }
    if to.chars().any(char::is_control) {
        return Err(src.err(KEY, at, "holds a control character"));
    }
    if distributed && !to.contains("{myid}") {
        return Err(src.err(
            KEY,
            at,
            format!(
                "\"{to}\" has no {{myid}}: in an ensemble each member archives its own log into its own \
                 archive, so the path must name the member (for example s3://bucket/zk/{{myid}} or \
                 /backup/zk/{{myid}}; {{myid}} is replaced by the id in myid); one archive takes one writer"
            ),
        ));
    }
    let to = to.replace("{myid}", &id.to_string());
    if let Some(rest) = to.strip_prefix("s3://") {
        if rest.split('/').next().unwrap_or("").is_empty() {
            return Err(src.err(KEY, at, format!("\"{to}\" names no bucket (s3://bucket/prefix)")));
        }
        return Ok(to);
    }
    if let Some((scheme, _)) = to.split_once("://") {
        return Err(src.err(
            KEY,
            at,
            format!("\"{scheme}://\" archives are not supported: give a directory, or s3://bucket/prefix"),
        ));
    }
    Ok(resolve(base, &to).display().to_string())
}

fn non_negative(src: &Source<'_>, key: &str, v: i32, line: u32) -> Result<u32, ConfigError> {
    u32::try_from(v).map_err(|_| src.err(key, Some(line), format!("{v} must not be negative")))
}

fn positive(src: &Source<'_>, key: &str, v: i64, line: u32) -> Result<u64, ConfigError> {
    if v <= 0 {
        return Err(src.err(key, Some(line), format!("{v} must be greater than 0")));
    }
    Ok(v as u64)
}

/// Apache's strict `parseBoolean`: `true` or `false`, any case.
fn bool_value(src: &Source<'_>, key: &str, value: &str, line: u32) -> Result<bool, ConfigError> {
    if value.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(src.err(key, Some(line), format!("invalid option \"{value}\"; choose 'true' or 'false'")))
    }
}

fn port_value(src: &Source<'_>, key: &str, v: i32, line: Option<u32>) -> Result<u16, ConfigError> {
    u16::try_from(v).map_err(|_| src.err(key, line, format!("port {v} is out of range (0-65535)")))
}

/// Parses a `server.N` value into its parts; `Err` holds the message for the key's error.
fn parse_server_value(id: u64, value: &str) -> Result<QuorumServer, String> {
    let value = java_trim(value);
    let halves = java_split(value, ';');
    if halves.is_empty() || halves.len() > 2 {
        return Err(format!("\"{value}\": {SERVER_FORMAT_HELP}"));
    }
    let mut client = None;
    if halves.len() == 2 {
        let parts = host_and_port_parts(&halves[1])?;
        if parts.is_empty() || parts.len() > 2 {
            return Err(format!("\"{value}\": bad client address; {SERVER_FORMAT_HELP}"));
        }
        let host = if parts.len() == 2 { parts[0].clone() } else { "0.0.0.0".to_string() };
        let port_text = &parts[parts.len() - 1];
        let port = java_parse_int(port_text)
            .ok_or_else(|| format!("client port \"{port_text}\" is not a number"))?;
        let port =
            u16::try_from(port).map_err(|_| format!("client port {port} is out of range (0-65535)"))?;
        client = Some(HostPort { host, port });
    }
    if halves[0].contains('|') {
        return Err(format!(
            "\"{value}\": several addresses per server (multiAddress) are not supported by zkrs"
        ));
    }
    let parts = host_and_port_parts(&halves[0])?;
    if parts.len() < 3 || parts.len() > 4 {
        return Err(format!("\"{value}\": {SERVER_FORMAT_HELP}"));
    }
    let port = |text: &str, what: &str| -> Result<u16, String> {
        let p = java_parse_int(text).ok_or_else(|| format!("{what} \"{text}\" is not a number"))?;
        u16::try_from(p).map_err(|_| format!("{what} {p} is out of range (0-65535)"))
    };
    let quorum_port = port(&parts[1], "quorum port")?;
    let election_port = port(&parts[2], "election port")?;
    if quorum_port == election_port {
        return Err(format!("quorum port and election port must be different (both {quorum_port})"));
    }
    let peer_type = match parts.get(3).map(|t| java_trim(t).to_ascii_lowercase()) {
        None => PeerType::Participant,
        Some(t) if t == "participant" => PeerType::Participant,
        Some(t) if t == "observer" => PeerType::Observer,
        Some(_) => {
            return Err(format!("unrecognised peer type \"{}\" (participant or observer)", parts[3]));
        }
    };
    Ok(QuorumServer { id, host: parts[0].clone(), quorum_port, election_port, peer_type, client })
}

/// Parses the `N` after the first dot of `server.N`, `group.N`, `weight.N` as Apache does.
fn key_number(key: &str) -> Option<i64> {
    let (_, n) = key.split_once('.')?;
    java_parse_long(n)
}

/// Joins a relative path onto `base` when one is given.
fn resolve(base: Option<&Path>, p: &str) -> PathBuf {
    match base {
        Some(b) if Path::new(p).is_relative() => b.join(p),
        _ => PathBuf::from(p),
    }
}

/// Ensemble membership as read from zoo.cfg or the dynamic config file.
#[derive(Default)]
struct Membership {
    servers: BTreeMap<u64, (QuorumServer, u32)>,
    groups: BTreeMap<u64, Vec<u64>>,
    weights: BTreeMap<u64, u64>,
    hierarchical: bool,
    first_line: Option<u32>,
}

impl Membership {
    /// Takes `server.N`, `group*`, `weight*` keys; returns false for any other key.
    fn take(&mut self, src: &Source<'_>, p: &Property, max_id: u64) -> Result<bool, ConfigError> {
        let key = java_trim(&p.key);
        let value = java_trim(&p.value);
        let line = Some(p.line);
        let id_of = |what: &str| -> Result<u64, ConfigError> {
            let n = key_number(key).ok_or_else(|| {
                src.err(key, line, format!("the part after the first '.' must be a {what} number"))
            })?;
            u64::try_from(n)
                .ok()
                .filter(|&n| n <= max_id)
                .ok_or_else(|| src.err(key, line, format!("{what} {n} is out of range (0-{max_id})")))
        };
        if key.starts_with("server.") {
            let id = id_of("server id")?;
            let server = parse_server_value(id, value).map_err(|m| src.err(key, line, m))?;
            self.servers.insert(id, (server, p.line));
        } else if key.starts_with("group") {
            self.hierarchical = true;
            let n = key_number(key)
                .ok_or_else(|| src.err(key, line, "the part after the first '.' must be a group number"))?;
            let gid = u64::try_from(n)
                .map_err(|_| src.err(key, line, format!("group id {n} must not be negative")))?;
            let mut members = Vec::new();
            for part in java_split(value, ':') {
                let sid = java_parse_long(&part)
                    .and_then(|s| u64::try_from(s).ok())
                    .ok_or_else(|| src.err(key, line, format!("\"{part}\" is not a server id")))?;
                if self.groups.values().any(|m| m.contains(&sid)) || members.contains(&sid) {
                    return Err(src.err(key, line, format!("server {sid} is in multiple groups")));
                }
                members.push(sid);
            }
            self.groups.insert(gid, members);
        } else if key.starts_with("weight") {
            self.hierarchical = true;
            let sid = id_of("server id")?;
            let w = java_parse_long(value)
                .and_then(|w| u64::try_from(w).ok())
                .ok_or_else(|| src.err(key, line, format!("\"{value}\" is not a valid weight")))?;
            self.weights.insert(sid, w);
        } else {
            return Ok(false);
        }
        self.first_line = Some(self.first_line.map_or(p.line, |l| l.min(p.line)));
        Ok(true)
    }
}

/// Keeps the last occurrence of each key (Properties is a map), in the order of their lines.
fn last_wins(props: Vec<Property>) -> Vec<Property> {
    let mut by_key: BTreeMap<String, Property> = BTreeMap::new();
    for p in props {
        by_key.insert(java_trim(&p.key).to_string(), p);
    }
    let mut v: Vec<Property> = by_key.into_values().collect();
    v.sort_by_key(|p| p.line);
    v
}

/// Java's `File.getAbsolutePath` on Unix: duplicate and trailing slashes removed, relative paths
/// prefixed with the working directory, `.` and `..` left in place.
pub fn java_absolute_path(path: &Path, cwd: &Path) -> String {
    fn normalize(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            if c == '/' && out.ends_with('/') {
                continue;
            }
            out.push(c);
        }
        if out.len() > 1 && out.ends_with('/') {
            out.pop();
        }
        out
    }
    let p = normalize(&path.to_string_lossy());
    if p.starts_with('/') {
        return p;
    }
    let base = normalize(&cwd.to_string_lossy());
    if p.is_empty() {
        base
    } else if base.ends_with('/') {
        format!("{base}{p}")
    } else {
        format!("{base}/{p}")
    }
}

/// Total size in bytes of the regular files under `path`, recursively (0 when it cannot be read),
/// as Apache computes `dataDirSize`/`dataLogSize` for `conf`.
pub fn directory_size_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries.flatten().map(|e| directory_size_bytes(&e.path())).fold(0u64, u64::saturating_add)
}

impl ServerConfig {
    /// The built-in configuration `zkrs-server` uses when started without a zoo.cfg: a standalone
    /// server on 127.0.0.1:2181, tickTime 2000, everything else at Apache's defaults (so only `srvr`
    /// among the four-letter words). The caller picks `data_dir` (the binary uses `./zkrs-data`).
    pub fn standalone_default(data_dir: impl Into<PathBuf>) -> ServerConfig {
        let data_dir = data_dir.into();
        let tick = 2000;
        ServerConfig {
            config_file: None,
            tick_time_ms: tick,
            data_log_dir: data_dir.clone(),
            data_dir,
            client_address: Some(HostPort { host: "127.0.0.1".to_string(), port: 2181 }),
            secure_client_address: None,
            ssl: crate::ssl_config::SslConfig::default(),
            sasl: crate::sasl_config::SaslConfig::default(),
            ssl_quorum: crate::ssl_config::SslConfig::quorum(),
            ssl_quorum_enabled: false,
            quorum_port_unification: false,
            ssl_quorum_reload: false,
            max_client_cnxns: DEFAULT_MAX_CLIENT_CNXNS,
            max_cnxns: 0,
            sessionless_cnxn_timeout_ms: DEFAULT_SESSIONLESS_CNXN_TIMEOUT_MS,
            min_session_timeout_ms: tick * 2,
            max_session_timeout_ms: tick * 20,
            client_port_listen_backlog: -1,
            init_limit: 0,
            sync_limit: 0,
            connect_to_learner_master_limit: 0,
            election_alg: ELECTION_ALG_FAST,
            peer_type: PeerType::Participant,
            servers: BTreeMap::new(),
            groups: BTreeMap::new(),
            weights: BTreeMap::new(),
            standalone_enabled: true,
            reconfig_enabled: false,
            dynamic_config_file: None,
            dynamic_config_version: None,
            local_sessions_enabled: false,
            local_sessions_upgrading_enabled: false,
            snap_retain_count: MIN_SNAP_RETAIN_COUNT,
            purge_interval_hours: 0,
            sync_enabled: true,
            quorum_listen_on_all_ips: false,
            snap_count: DEFAULT_SNAP_COUNT,
            snap_size_limit_kb: DEFAULT_SNAP_SIZE_LIMIT_KB,
            snapshot_write_mb_per_second: DEFAULT_SNAPSHOT_WRITE_MB_PER_SECOND,
            snapshot_idle_seconds: DEFAULT_SNAPSHOT_IDLE_SECONDS,
            snapshot_min_request_interval_seconds: DEFAULT_SNAPSHOT_MIN_REQUEST_INTERVAL_SECONDS,
            snapshot_compression: zk_log::snapshot::Codec::None,
            snapshot_compression_level: DEFAULT_SNAPSHOT_COMPRESSION_LEVEL,
            txn_log_append_mode: zk_log::AppendMode::default(),
            pre_alloc_size_kb: DEFAULT_PRE_ALLOC_SIZE_KB,
            global_outstanding_limit: DEFAULT_GLOBAL_OUTSTANDING_LIMIT,
            commit_log_count: DEFAULT_COMMIT_LOG_COUNT,
            leader_serves: true,
            cnx_timeout_ms: 5000,
            four_letter_words: ["srvr".to_string()].into_iter().collect(),
            extended_types_enabled: false,
            digest_enabled: true,
            super_digest: None,
            jute_max_buffer: DEFAULT_JUTE_MAX_BUFFER,
            read_only_mode_enabled: false,
            admin_enable_server: true,
            admin_server_address: "0.0.0.0".to_string(),
            admin_server_port: DEFAULT_ADMIN_SERVER_PORT,
            admin_command_url: "/commands".to_string(),
            admin_idle_timeout_ms: 30_000,
            admin_force_https: None,
            admin_port_unification: None,
            admin_need_client_auth: false,
            admin_rest_api_enabled: false,
            admin_rest_api_writable: false,
            admin_snapshot_enabled: true,
            admin_rate_limiter_interval_ms: 300_000,
            admin_restore_enabled: true,
            admin_restore_max_bytes: DEFAULT_ADMIN_RESTORE_MAX_BYTES,
            slow_request_threshold_ms: 0,
            tree_memory_soft_limit_bytes: 0,
            backup_to: None,
            backup_interval_ms: DEFAULT_BACKUP_INTERVAL_MS,
            backup_hold_max_bytes: DEFAULT_BACKUP_HOLD_MAX_BYTES,
            keep_clients_through_election: true,
            initial_zxid_counter: None,
            log_format: LogFormat::Text,
            log_level: None,
            metrics_provider_class_name: "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"
                .to_string(),
            metrics_provider: BTreeMap::new(),
            container_check_interval_ms: DEFAULT_CONTAINER_CHECK_INTERVAL_MS,
            container_max_per_minute: DEFAULT_CONTAINER_MAX_PER_MINUTE,
            container_max_never_used_interval_ms: 0,
            my_id: None,
            unknown: BTreeMap::new(),
        }
    }

    /// Reads and validates a zoo.cfg file, then the dynamic config file it names (if any) and
    /// `dataDir/myid` (if present). Relative paths in the file are relative to the working
    /// directory, as in Apache.
    ///
    /// Errors: [`ConfigError::Io`] when a file cannot be read; [`ConfigError::Invalid`], naming the
    /// key and line, for everything Apache's `QuorumPeerConfig` refuses and for the few things zkrs
    /// refuses on top (TLS, SASL, non-numeric values Apache would silently default).
    pub fn from_file(path: impl AsRef<Path>) -> Result<ServerConfig, ConfigError> {
        let path = path.as_ref();
        let text = read_text(path)?;
        let mut cfg = Self::parse_inner(&text, None, Some(path))?;
        cfg.config_file = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// Parses zoo.cfg text. `base_dir`, when given, is what relative `dataDir`, `dataLogDir` and
    /// `dynamicConfigFile` paths are joined onto; `None` leaves them relative to the working
    /// directory (Apache's behaviour). The myid and dynamic config files are read as by
    /// [`ServerConfig::from_file`]; errors are the same, with lines counted in `text`.
    pub fn parse(text: &str, base_dir: Option<&Path>) -> Result<ServerConfig, ConfigError> {
        Self::parse_inner(text, base_dir, None)
    }

    fn parse_inner(
        text: &str,
        base: Option<&Path>,
        file: Option<&Path>,
    ) -> Result<ServerConfig, ConfigError> {
        let src = Source { file };
        let props =
            load_properties(text).map_err(|(line, m)| src.err("(properties syntax)", Some(line), m))?;
        let props = last_wins(props);
        let has_dynamic_file = props.iter().any(|p| java_trim(&p.key) == "dynamicConfigFile");

        let mut cfg = ServerConfig::standalone_default(PathBuf::new());
        cfg.tick_time_ms = 0;
        cfg.client_address = None;
        cfg.four_letter_words.clear();
        let mut raw = Raw {
            tick_time: (DEFAULT_TICK_TIME_MS as i32, None),
            data_dir: None,
            data_log_dir: None,
            client_port: (0, None),
            client_port_address: None,
            secure_client_port: (0, None),
            secure_client_port_address: None,
            min_session_timeout: (-1, None),
            max_session_timeout: (-1, None),
            init_limit: (0, None),
            sync_limit: (0, None),
            dynamic_config_file: None,
            four_letter_words: None,
            backup_to: None,
            backup_tuned: None,
        };
        let mut members = Membership::default();
        // extendedTypesEnabled narrows the id range, so it must be known before server lines.
        let extended = props
            .iter()
            .find(|p| java_trim(&p.key) == "extendedTypesEnabled")
            .map(|p| bool_value(&src, "extendedTypesEnabled", java_trim(&p.value), p.line))
            .transpose()?
            .unwrap_or(false);
        let max_id = if extended { MAX_EXTENDED_SERVER_ID } else { MAX_SERVER_ID };
        // Where snapshot.compressionLevel was set: a level without compression is warned about.
        let mut compression_level_line = None;

        for p in &props {
            let key = java_trim(&p.key);
            let value = java_trim(&p.value);
            let line = p.line;
            let at = Some(line);
            match key {
                "dataDir" => raw.data_dir = Some((value.to_string(), line)),
                "dataLogDir" => raw.data_log_dir = Some((value.to_string(), line)),
                "clientPort" => raw.client_port = (int_value(&src, key, value, line)?, at),
                "clientPortAddress" => raw.client_port_address = Some((value.to_string(), line)),
                "secureClientPort" => raw.secure_client_port = (int_value(&src, key, value, line)?, at),
                "secureClientPortAddress" => raw.secure_client_port_address = Some((value.to_string(), line)),
                "clientPortListenBacklog" => {
                    cfg.client_port_listen_backlog = int_value(&src, key, value, line)?
                }
                "tickTime" => raw.tick_time = (int_value(&src, key, value, line)?, at),
                "maxClientCnxns" => cfg.max_client_cnxns = int_value(&src, key, value, line)?,
                "maxCnxns" => {
                    let v = int_value(&src, key, value, line)?;
                    if v < 0 {
                        tracing::warn!("maxCnxns={v} (line {line}) is negative; using 0 (no limit)");
                    }
                    cfg.max_cnxns = v.max(0);
                }
                "nio.sessionlessCnxnTimeout" => {
                    let v = int_value(&src, key, value, line)?;
                    cfg.sessionless_cnxn_timeout_ms = positive(&src, key, v.into(), line)? as u32;
                }
                "minSessionTimeout" => raw.min_session_timeout = (int_value(&src, key, value, line)?, at),
                "maxSessionTimeout" => raw.max_session_timeout = (int_value(&src, key, value, line)?, at),
                "initLimit" => raw.init_limit = (int_value(&src, key, value, line)?, at),
                "syncLimit" => raw.sync_limit = (int_value(&src, key, value, line)?, at),
                "connectToLearnerMasterLimit" => {
                    let v = int_value(&src, key, value, line)?;
                    cfg.connect_to_learner_master_limit = non_negative(&src, key, v, line)?;
                }
                "electionAlg" => {
                    let v = int_value(&src, key, value, line)?;
                    if v != ELECTION_ALG_FAST as i32 {
                        return Err(src.err(key, at, format!("{v} is not supported; only 3 is")));
                    }
                }
                "quorumListenOnAllIPs" => cfg.quorum_listen_on_all_ips = bool_value(&src, key, value, line)?,
                "peerType" => {
                    cfg.peer_type = match value.to_ascii_lowercase().as_str() {
                        "observer" => PeerType::Observer,
                        "participant" => PeerType::Participant,
                        _ => {
                            return Err(src.err(
                                key,
                                at,
                                format!("unrecognised peer type \"{value}\" (participant or observer)"),
                            ))
                        }
                    }
                }
                "syncEnabled" => {
                    cfg.sync_enabled = bool_value(&src, key, value, line)?;
                    if !cfg.sync_enabled {
                        return Err(src.err(
                            key,
                            at,
                            "false is not supported: zkrs observers always log and snapshot; remove it",
                        ));
                    }
                }
                "dynamicConfigFile" => raw.dynamic_config_file = Some((value.to_string(), line)),
                "autopurge.snapRetainCount" => {
                    let v = int_value(&src, key, value, line)?;
                    cfg.snap_retain_count = if v < MIN_SNAP_RETAIN_COUNT as i32 {
                        tracing::warn!(
                            "{key}={v} is below the minimum; using {MIN_SNAP_RETAIN_COUNT} (line {line})"
                        );
                        MIN_SNAP_RETAIN_COUNT
                    } else {
                        v as u32
                    };
                }
                "autopurge.purgeInterval" => {
                    // Apache schedules no purge for any value <= 0.
                    cfg.purge_interval_hours = int_value(&src, key, value, line)?.max(0) as u32;
                }
                "standaloneEnabled" => cfg.standalone_enabled = bool_value(&src, key, value, line)?,
                "sslQuorum" => cfg.ssl_quorum_enabled = bool_value(&src, key, value, line)?,
                "portUnification" => cfg.quorum_port_unification = bool_value(&src, key, value, line)?,
                "sslQuorumReloadCertFiles" => cfg.ssl_quorum_reload = bool_value(&src, key, value, line)?,
                "reconfigEnabled" => cfg.reconfig_enabled = bool_value(&src, key, value, line)?,
                "localSessionsEnabled" => {
                    cfg.local_sessions_enabled = bool_value(&src, key, value, line)?;
                    if cfg.local_sessions_enabled {
                        // Apache 3.8's read-only mode needs it (a read-only server makes local
                        // sessions only), so configurations carry it; zkrs's read-only sessions
                        // are local either way and every other session is global.
                        tracing::warn!(
                            "{key}=true (line {line}): zkrs makes every session global, except a \
                             read-only server's, which are local to it"
                        );
                    }
                }
                "observerMasterPort" => {
                    return Err(src.err(
                        key,
                        at,
                        "is not supported: zkrs followers do not serve observers (observers sync from the \
                         leader); remove it",
                    ));
                }
                "cnxTimeout" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.cnx_timeout_ms = positive(&src, key, v.into(), line)? as u32;
                }
                "localSessionsUpgradingEnabled" => {
                    cfg.local_sessions_upgrading_enabled = bool_value(&src, key, value, line)?
                }
                "metricsProvider.className" => cfg.metrics_provider_class_name = value.to_string(),
                k if k.starts_with("metricsProvider.") => {
                    cfg.metrics_provider.insert(k["metricsProvider.".len()..].to_string(), value.to_string());
                }
                k if (k.starts_with("server.") || k.starts_with("group") || k.starts_with("weight"))
                    && has_dynamic_file =>
                {
                    return Err(src.err(
                        k,
                        at,
                        "must be in the separate dynamic config file, since dynamicConfigFile is set",
                    ));
                }
                // server.N, group*, weight*: collected, validated once the whole file is read.
                _ if members.take(&src, p, max_id)? => {}
                // Apache turns the keys below into system properties; these are the ones it reads.
                "snapCount" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.snap_count = if v < 2 {
                        tracing::warn!("snapCount={v} is below 2; using 2 (line {line})");
                        2
                    } else {
                        v as u32
                    };
                }
                "snapSizeLimitInKb" => {
                    let v = java_parse_long(value)
                        .ok_or_else(|| src.err(key, at, format!("\"{value}\" is not a valid size in KiB")))?;
                    if v <= 0 {
                        tracing::info!(
                            "snapSizeLimitInKb={v} is not positive: no snapshots by log size (line {line})"
                        );
                    }
                    cfg.snap_size_limit_kb = v;
                }
                // zkrs's own key (Apache would only set a system property nobody reads).
                "snapshot.writeMBPerSecond" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.snapshot_write_mb_per_second = non_negative(&src, key, v, line)?;
                }
                // zkrs's own key: the quiet period after which a snapshot is taken.
                "snapshot.idleSeconds" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.snapshot_idle_seconds = non_negative(&src, key, v, line)?;
                }
                // zkrs's own key: how often an operator's request may start a snapshot.
                "snapshot.minRequestIntervalSeconds" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.snapshot_min_request_interval_seconds = non_negative(&src, key, v, line)?;
                }
                // zkrs's own keys: how snapshot files store their chunks.
                "snapshot.compression" => {
                    cfg.snapshot_compression = zk_log::snapshot::Codec::parse(value).ok_or_else(|| {
                        src.err(key, at, format!("\"{value}\" is not a snapshot compression (none or zstd)"))
                    })?;
                }
                "snapshot.compressionLevel" => {
                    let v = decoded_value(&src, key, value, line)?;
                    let levels = zk_log::snapshot::Compression::ZSTD_LEVELS;
                    if !levels.contains(&v) {
                        return Err(src.err(
                            key,
                            at,
                            format!(
                                "{v} is not a zstd level zkrs takes ({} to {}: higher levels compress \
                                 too slowly for the snapshot pace and a follower's SNAP install)",
                                levels.start(),
                                levels.end()
                            ),
                        ));
                    }
                    cfg.snapshot_compression_level = v;
                    compression_level_line = Some((v, line));
                }
                // zkrs's own key: how the transaction log's appends are written.
                "txnLog.appendMode" => {
                    cfg.txn_log_append_mode = zk_log::AppendMode::parse(value).ok_or_else(|| {
                        src.err(key, at, format!("\"{value}\" is not an append mode (pwrite or mmap)"))
                    })?;
                }
                "preAllocSize" => {
                    let v = java_parse_long(value)
                        .ok_or_else(|| src.err(key, at, format!("\"{value}\" is not a valid size in KiB")))?;
                    cfg.pre_alloc_size_kb = positive(&src, key, v, line)?;
                    if cfg.pre_alloc_size_kb > u64::MAX / 1024 {
                        return Err(src.err(key, at, format!("{v} KiB is too large")));
                    }
                }
                "globalOutstandingLimit" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.global_outstanding_limit = positive(&src, key, v.into(), line)? as u32;
                }
                "commitLogCount" => {
                    let v = int_value(&src, key, value, line)?;
                    cfg.commit_log_count = if v < DEFAULT_COMMIT_LOG_COUNT as i32 {
                        tracing::warn!(
                            "commitLogCount={v} is below {DEFAULT_COMMIT_LOG_COUNT}; using \
                             {DEFAULT_COMMIT_LOG_COUNT} (line {line})"
                        );
                        DEFAULT_COMMIT_LOG_COUNT
                    } else {
                        v as u32
                    };
                }
                "leaderServes" => {
                    // Apache disables it only for the exact value "no".
                    if value != "yes" && value != "no" {
                        tracing::warn!(
                            "leaderServes={value} (line {line}): only \"no\" disables it, taking it as yes"
                        );
                    }
                    cfg.leader_serves = value != "no";
                }
                "4lw.commands.whitelist" => raw.four_letter_words = Some((value.to_string(), line)),
                "extendedTypesEnabled" => cfg.extended_types_enabled = extended,
                "digest.enabled" => cfg.digest_enabled = bool_value(&src, key, value, line)?,
                "DigestAuthenticationProvider.superDigest" => {
                    if !value.contains(':') {
                        return Err(src.err(key, at, "expected super:<base64 digest>"));
                    }
                    cfg.super_digest = Some(value.to_string());
                }
                "jute.maxbuffer" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.jute_max_buffer = positive(&src, key, v.into(), line)? as u32;
                }
                "readonlymode.enabled" => cfg.read_only_mode_enabled = bool_value(&src, key, value, line)?,
                "admin.enableServer" => {
                    if !value.eq_ignore_ascii_case("true") && value != "false" {
                        tracing::warn!(
                            "admin.enableServer={value} (line {line}): only \"false\" disables it, \
                             taking it as true"
                        );
                    }
                    cfg.admin_enable_server = value != "false";
                }
                "admin.serverAddress" => cfg.admin_server_address = value.to_string(),
                "admin.commandURL" => cfg.admin_command_url = value.to_string(),
                "admin.idleTimeout" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.admin_idle_timeout_ms = positive(&src, key, v.into(), line)? as u32;
                }
                "admin.forceHttps" | "admin.portUnification" | "admin.needClientAuth" => {
                    // Apache reads them with Boolean.getBoolean: "true" in any case, else false.
                    let on = value.eq_ignore_ascii_case("true");
                    if !on && !value.eq_ignore_ascii_case("false") {
                        tracing::warn!(
                            "{key}={value} (line {line}): only \"true\" enables it, taking it as false"
                        );
                    }
                    match key {
                        "admin.forceHttps" => cfg.admin_force_https = on.then_some(line),
                        "admin.portUnification" => cfg.admin_port_unification = on.then_some(line),
                        _ => cfg.admin_need_client_auth = on,
                    }
                }
                // Apache 3.9's: read with Boolean.parseBoolean, so anything but "true" is false.
                "admin.snapshot.enabled" | "admin.restore.enabled" => {
                    let on = value.eq_ignore_ascii_case("true");
                    if !on && !value.eq_ignore_ascii_case("false") {
                        tracing::warn!(
                            "{key}={value} (line {line}): only \"true\" enables it, taking it as false"
                        );
                    }
                    if key == "admin.snapshot.enabled" {
                        cfg.admin_snapshot_enabled = on;
                    } else {
                        cfg.admin_restore_enabled = on;
                    }
                }
                "admin.restore.maxBytes" => {
                    cfg.admin_restore_max_bytes = match byte_size(value) {
                        Some(n) if n > 0 => n,
                        _ => {
                            return Err(src.err(
                                key,
                                at,
                                format!(
                                    "\"{value}\" is not a positive size in bytes (a whole number, \
                                     optionally followed by k, m or g)"
                                ),
                            ))
                        }
                    };
                }
                "admin.rateLimiterIntervalInMS" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.admin_rate_limiter_interval_ms = non_negative(&src, key, v, line)?.into();
                }
                // zkrs's own keys: the REST data API on the AdminServer's port.
                "admin.restApi.enabled" => cfg.admin_rest_api_enabled = bool_value(&src, key, value, line)?,
                "admin.restApi.writable" => cfg.admin_rest_api_writable = bool_value(&src, key, value, line)?,
                "slowRequestThresholdMs" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.slow_request_threshold_ms = non_negative(&src, key, v, line)?;
                }
                // zkrs's own key: clients kept through a change of leader.
                "zkrs.keepClientsThroughElection" => {
                    cfg.keep_clients_through_election = bool_value(&src, key, value, line)?
                }
                // zkrs's own key: the memory brake.
                "zkrs.treeMemorySoftLimitBytes" => {
                    cfg.tree_memory_soft_limit_bytes = byte_size(value).ok_or_else(|| {
                        src.err(
                            key,
                            at,
                            format!(
                                "\"{value}\" is not a size in bytes (a whole number, optionally \
                                 followed by k, m or g)"
                            ),
                        )
                    })?;
                }
                // zkrs's own keys: the server archiving by itself.
                "zkrs.backup.to" => raw.backup_to = Some((value.to_string(), line)),
                "zkrs.backup.intervalSecs" => {
                    cfg.backup_interval_ms = interval_ms(value).ok_or_else(|| {
                        src.err(
                            key,
                            at,
                            format!(
                                "\"{value}\" is not a number of seconds from 0.1 to 86400 \
                                 (fractions allowed)"
                            ),
                        )
                    })?;
                    raw.backup_tuned = Some(("zkrs.backup.intervalSecs", line));
                }
                "zkrs.backup.holdMaxBytes" => {
                    cfg.backup_hold_max_bytes = byte_size(value).ok_or_else(|| {
                        src.err(
                            key,
                            at,
                            format!(
                                "\"{value}\" is not a size in bytes (a whole number, optionally \
                                 followed by k, m or g; 0 = no bound)"
                            ),
                        )
                    })?;
                    raw.backup_tuned = Some(("zkrs.backup.holdMaxBytes", line));
                }
                "testingonly.initialZxid" => {
                    let parsed = match value.strip_prefix("0x").or_else(|| value.strip_prefix("0X")) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => value.parse::<u32>().ok(),
                    };
                    // Past 0xfffffffd an epoch has no zxid left to propose (its last counter is
                    // 0xfffffffe): every leader would step down at its first write.
                    let counter = parsed.filter(|c| *c < u32::MAX - 1).ok_or_else(|| {
                        src.err(
                            key,
                            at,
                            format!(
                                "\"{value}\" is not a zxid counter an epoch can start at (0 to \
                                 4294967293, decimal or 0x hexadecimal)"
                            ),
                        )
                    })?;
                    tracing::warn!(
                        "{key}={value} (line {line}): a leader starts each epoch's zxid counter at \
                         {counter:#x}; for tests only"
                    );
                    cfg.initial_zxid_counter = Some(counter);
                }
                "logFormat" => {
                    cfg.log_format = match value {
                        "text" => LogFormat::Text,
                        "json" => LogFormat::Json,
                        _ => {
                            return Err(src.err(
                                key,
                                Some(line),
                                format!("\"{value}\" is neither text nor json"),
                            ))
                        }
                    }
                }
                "logLevel" => cfg.log_level = Some(value.to_string()),
                "admin.serverPort" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.admin_server_port = port_value(&src, key, v, at)?;
                }
                "znode.container.checkIntervalMs" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.container_check_interval_ms = positive(&src, key, v.into(), line)? as u32;
                }
                "znode.container.maxPerMinute" => {
                    let v = decoded_value(&src, key, value, line)?;
                    cfg.container_max_per_minute = positive(&src, key, v.into(), line)? as u32;
                }
                "znode.container.maxNeverUsedIntervalMs" => {
                    let v = java_decode_long(value)
                        .ok_or_else(|| src.err(key, at, format!("\"{value}\" is not a valid integer")))?;
                    cfg.container_max_never_used_interval_ms = u64::try_from(v)
                        .map_err(|_| src.err(key, at, format!("{v} must not be negative")))?;
                }
                k if cfg.sasl.take(k, value, line).map_err(|m| src.err(k, at, m))? => {}
                k if cfg.ssl.take(k, value, line).map_err(|m| src.err(k, at, m))? => {}
                k if cfg.ssl_quorum.take(k, value, line).map_err(|m| src.err(k, at, m))? => {}
                k if APACHE_FEATURES_REFUSED.contains(&k) => {
                    if bool_value(&src, k, value, line)? {
                        return Err(src.err(k, at, "is not supported by zkrs; remove it or set it to false"));
                    }
                }
                k if APACHE_KEYS_IGNORED.contains(&k) => {
                    tracing::warn!("{k}={value} (line {line}) is not used by zkrs; ignored");
                }
                k => {
                    tracing::warn!(
                        "unknown configuration key {k} (line {line}); kept but not used \
                         (Apache would set the system property zookeeper.{k})"
                    );
                    cfg.unknown.insert(k.to_string(), value.to_string());
                }
            }
        }

        if let Some((v, line)) = compression_level_line {
            if cfg.snapshot_compression != zk_log::snapshot::Codec::Zstd {
                tracing::warn!(
                    "snapshot.compressionLevel={v} (line {line}) has no effect: snapshot.compression \
                     is not zstd, so snapshots are written uncompressed"
                );
            }
        }

        // Directories.
        let Some((data_dir, _)) = raw.data_dir.as_ref() else {
            return Err(src.err("dataDir", None, "is not set; it is required"));
        };
        if data_dir.is_empty() {
            return Err(src.err("dataDir", raw.data_dir.as_ref().map(|d| d.1), "is empty"));
        }
        cfg.data_dir = resolve(base, data_dir);
        cfg.data_log_dir = match &raw.data_log_dir {
            Some((d, line)) if d.is_empty() => {
                return Err(src.err("dataLogDir", Some(*line), "is empty"));
            }
            Some((d, _)) => resolve(base, d),
            None => cfg.data_dir.clone(),
        };

        // Client ports.
        let (client_port, client_line) = raw.client_port;
        if client_port == 0 {
            if let Some((_, line)) = &raw.client_port_address {
                return Err(src.err("clientPortAddress", Some(*line), "is set but clientPort is not set"));
            }
        } else {
            let port = port_value(&src, "clientPort", client_port, client_line)?;
            let host = raw.client_port_address.as_ref().map_or("0.0.0.0", |(h, _)| h.as_str());
            cfg.client_address = Some(HostPort { host: strip_brackets(host), port });
        }
        let (secure_port, secure_line) = raw.secure_client_port;
        if secure_port == 0 {
            if let Some((_, line)) = &raw.secure_client_port_address {
                return Err(src.err(
                    "secureClientPortAddress",
                    Some(*line),
                    "is set but secureClientPort is not set",
                ));
            }
        } else {
            let port = port_value(&src, "secureClientPort", secure_port, secure_line)?;
            let host = raw.secure_client_port_address.as_ref().map_or("0.0.0.0", |(h, _)| h.as_str());
            cfg.secure_client_address = Some(HostPort { host: strip_brackets(host), port });
        }

        // Ticks and session timeouts.
        let (tick, tick_line) = raw.tick_time;
        if tick == 0 {
            return Err(src.err("tickTime", tick_line, "is not set (0)"));
        }
        if tick < 0 {
            return Err(src.err("tickTime", tick_line, format!("{tick} must be greater than 0")));
        }
        cfg.tick_time_ms = tick as u32;
        let session_timeout = |key: &str, (v, line): (i32, Option<u32>), ticks: i32| {
            if v == -1 {
                return tick
                    .checked_mul(ticks)
                    .map(|t| t as u32)
                    .ok_or_else(|| src.err(key, tick_line, format!("{ticks} x tickTime overflows")));
            }
            u32::try_from(v).map_err(|_| src.err(key, line, format!("{v} must not be negative")))
        };
        cfg.min_session_timeout_ms = session_timeout("minSessionTimeout", raw.min_session_timeout, 2)?;
        cfg.max_session_timeout_ms = session_timeout("maxSessionTimeout", raw.max_session_timeout, 20)?;
        if cfg.min_session_timeout_ms > cfg.max_session_timeout_ms {
            let line = raw.min_session_timeout.1.or(raw.max_session_timeout.1);
            return Err(src.err(
                "minSessionTimeout",
                line,
                format!(
                    "{} must not be larger than maxSessionTimeout ({})",
                    cfg.min_session_timeout_ms, cfg.max_session_timeout_ms
                ),
            ));
        }
        cfg.init_limit = non_negative(&src, "initLimit", raw.init_limit.0, raw.init_limit.1.unwrap_or(0))?;
        cfg.sync_limit = non_negative(&src, "syncLimit", raw.sync_limit.0, raw.sync_limit.1.unwrap_or(0))?;

        // Ensemble membership: from the dynamic file when named, otherwise from this file.
        let dyn_text;
        let dyn_path;
        let mut member_src = Source { file };
        if let Some((dyn_file, line)) = &raw.dynamic_config_file {
            let path = resolve(base, dyn_file);
            dyn_text = read_text(&path).map_err(|e| match e {
                ConfigError::Io { path, source } => src.err(
                    "dynamicConfigFile",
                    Some(*line),
                    format!("cannot read {}: {source}", path.display()),
                ),
                other => other,
            })?;
            dyn_path = path;
            member_src = Source { file: Some(&dyn_path) };
            let dyn_props = load_properties(&dyn_text)
                .map_err(|(l, m)| member_src.err("(properties syntax)", Some(l), m))?;
            for p in last_wins(dyn_props) {
                let key = java_trim(&p.key);
                if key == "version" {
                    return Err(member_src.err(
                        key,
                        Some(p.line),
                        "must not be in the dynamic config file (the version is the file name's suffix)",
                    ));
                }
                if !members.take(&member_src, &p, max_id)? {
                    return Err(member_src.err(
                        key,
                        Some(p.line),
                        "unrecognised parameter in a dynamic config file",
                    ));
                }
            }
            cfg.dynamic_config_version =
                dyn_path.file_name().and_then(|n| version_from_filename(&n.to_string_lossy()));
            cfg.dynamic_config_file = Some(dyn_path.clone());
        }
        validate_membership(&member_src, &mut members, cfg.standalone_enabled)?;
        let participants =
            members.servers.values().filter(|(s, _)| s.peer_type == PeerType::Participant).count();
        cfg.servers = members.servers.iter().map(|(id, (s, _))| (*id, s.clone())).collect();
        cfg.groups = std::mem::take(&mut members.groups);
        cfg.weights = std::mem::take(&mut members.weights);

        // myid: read whenever present (a bad one is fatal even standalone, as in Apache).
        let myid_path = cfg.data_dir.join("myid");
        if myid_path.is_file() {
            let text = read_text(&myid_path)?;
            let msrc = Source { file: Some(&myid_path) };
            let first = text.split(['\n', '\r']).next().unwrap_or("");
            let trimmed = first.trim_matches([' ', '\t']);
            let id = java_parse_long(trimmed)
                .ok_or_else(|| msrc.err("myid", Some(1), format!("\"{first}\" is not a number")))?;
            let id = u64::try_from(id).ok().filter(|&i| i <= max_id).ok_or_else(|| {
                msrc.err("myid", Some(1), format!("server id {id} is out of range (0-{max_id})"))
            })?;
            cfg.my_id = Some(id);
        }

        let distributed = !cfg.standalone_enabled || participants > 1;
        if distributed {
            if cfg.init_limit == 0 {
                return Err(src.err(
                    "initLimit",
                    raw.init_limit.1,
                    "is not set; it is required when server.N lines list an ensemble",
                ));
            }
            if cfg.sync_limit == 0 {
                return Err(src.err(
                    "syncLimit",
                    raw.sync_limit.1,
                    "is not set; it is required when server.N lines list an ensemble",
                ));
            }
            let Some(id) = cfg.my_id else {
                return Err(ConfigError::Invalid {
                    file: Some(myid_path),
                    line: None,
                    key: "myid".to_string(),
                    message: "the myid file is missing; it is required when server.N lines list an \
                              ensemble"
                        .to_string(),
                });
            };
            // A myid the server list lacks parses, as in Apache: the server refuses to start
            // (`ServerConfig::not_in_peer_list`), with the exit status Apache's has then.
            if let Some(me) = cfg.servers.get(&id).cloned() {
                // Apache's setupClientPort: the server line's client address wins, but must agree.
                if let (Some(mine), Some(stat)) = (&me.client, &cfg.client_address) {
                    let any = stat.host == "0.0.0.0" || stat.host == "::";
                    if (any && mine.port != stat.port) || (!any && mine != stat) {
                        let line = cfg_member_line(&members, id);
                        return Err(member_src.err(
                            &format!("server.{id}"),
                            line,
                            format!(
                                "client address {mine} differs from clientPortAddress/clientPort {stat} \
                                 of this server (myid {id})"
                            ),
                        ));
                    }
                }
                if let Some(mine) = &me.client {
                    cfg.client_address = Some(mine.clone());
                }
                if me.peer_type != cfg.peer_type {
                    tracing::warn!(
                        "peerType {:?} differs from server.{id}'s type {:?}; using the server line",
                        cfg.peer_type,
                        me.peer_type
                    );
                    cfg.peer_type = me.peer_type;
                }
            }
        } else if cfg.client_address.is_none() && cfg.secure_client_address.is_none() {
            return Err(src.err(
                "clientPort",
                None,
                "is not set; a standalone server needs it or secureClientPort",
            ));
        }

        // TLS, once every source of the client address (clientPort, server.N) is known.
        if cfg.ssl.port_unification && cfg.client_address.is_none() {
            return Err(src.err("client.portUnification", None, "is true but clientPort is not set"));
        }
        if cfg.ssl.wanted(cfg.secure_client_address.is_some()) {
            cfg.ssl.validate().map_err(|(key, line, message)| src.err(&key, line, message))?;
        }
        if cfg.ssl_quorum_enabled || cfg.quorum_port_unification {
            cfg.ssl_quorum.validate().map_err(|(key, line, message)| src.err(&key, line, message))?;
        }
        if let Some(wanted_by) = cfg.admin_https_wanted_by() {
            cfg.ssl_quorum
                .validate_admin_https(&wanted_by)
                .map_err(|(key, line, message)| src.err(&key, line, message))?;
        }

        // The archive, once myid and the membership are known.
        match &raw.backup_to {
            Some((to, line)) => {
                let id = cfg.my_id.unwrap_or(0);
                cfg.backup_to = Some(backup_target(&src, to, *line, distributed, id, base)?);
            }
            None => {
                if let Some((key, line)) = raw.backup_tuned {
                    tracing::warn!("{key} (line {line}) has no effect: zkrs.backup.to is not set");
                }
            }
        }

        // Four-letter words, after readonlymode.enabled is known.
        cfg.four_letter_words = four_letter_set(raw.four_letter_words.as_ref(), cfg.read_only_mode_enabled);
        Ok(cfg)
    }

    /// Whether the AdminServer serves HTTPS (it is enabled, with `admin.forceHttps` or
    /// `admin.portUnification`): the key that asks for it and its line, as errors name them.
    pub fn admin_https_wanted_by(&self) -> Option<String> {
        if !self.admin_enable_server {
            return None;
        }
        let (key, line) = match (self.admin_force_https, self.admin_port_unification) {
            (Some(line), _) => ("admin.forceHttps", line),
            (None, Some(line)) => ("admin.portUnification", line),
            (None, None) => return None,
        };
        Some(format!("{key} at line {line}"))
    }

    /// Why an ensemble member cannot start: the server list (zoo.cfg's, or the dynamic file's
    /// it names) lacks its myid, as after a reconfiguration removed it. Apache's member parses
    /// such a configuration and then stops at start-up (exit status 1); so does zkrs. `None`
    /// when this server is listed, or is not an ensemble member.
    ///
    /// A dynamic configuration file (written when a reconfiguration or a forced recovery put
    /// its membership in force) that does not list this server refuses it too when it lists a
    /// single participant, where Apache would run it standalone (with `standaloneEnabled=true`):
    /// a server removed from an ensemble would serve a history of its own beside it (forced
    /// recovery review, helper-96, MAJOR 3).
    pub fn not_in_peer_list(&self) -> Option<String> {
        let id = self.my_id?;
        if self.servers.contains_key(&id) || (!self.is_distributed() && self.dynamic_config_file.is_none()) {
            return None;
        }
        let listed: Vec<String> = self.servers.keys().map(|s| format!("server.{s}")).collect();
        let from = match (&self.dynamic_config_file, &self.config_file) {
            (Some(f), _) | (None, Some(f)) => format!(" in {}", f.display()),
            (None, None) => String::new(),
        };
        Some(format!(
            "myid {id} is not in the peer list: the configuration{from} lists {} and no server.{id}; \
             a reconfiguration may have removed this server. Add it back from a member with \
             `reconfig -add server.{id}=...`, or start it with a configuration that lists it",
            listed.join(", ")
        ))
    }

    /// True when this server runs as an ensemble member (Apache's `isDistributed`): more than one
    /// participant is listed, or `standaloneEnabled=false`.
    pub fn is_distributed(&self) -> bool {
        !self.standalone_enabled
            || self.servers.values().filter(|s| s.peer_type == PeerType::Participant).count() > 1
    }

    /// Whether the four-letter word `cmd` may run (exact, case-sensitive name such as `"ruok"`).
    /// A command that is not allowed gets "`<cmd>` is not executed because it is not in the
    /// whitelist." from the caller.
    pub fn four_letter_allowed(&self, cmd: &str) -> bool {
        self.four_letter_words.contains(cmd)
    }

    /// `connectToLearnerMasterLimit` in ticks, falling back to `initLimit` when unset, as Apache does.
    pub fn effective_connect_to_learner_master_limit(&self) -> u32 {
        if self.connect_to_learner_master_limit == 0 {
            self.init_limit
        } else {
            self.connect_to_learner_master_limit
        }
    }

    /// Connections allowed per client IP; `None` means unlimited.
    pub fn max_client_cnxns_per_ip(&self) -> Option<u32> {
        u32::try_from(self.max_client_cnxns).ok().filter(|&n| n > 0)
    }

    /// Apache's snapshot directory, `dataDir/version-2`.
    pub fn snap_dir(&self) -> PathBuf {
        self.data_dir.join("version-2")
    }

    /// Apache's txn log directory, `dataLogDir/version-2`.
    pub fn log_dir(&self) -> PathBuf {
        self.data_log_dir.join("version-2")
    }

    /// The body of the `conf` four-letter word for a standalone server, byte for byte as Apache 3.8
    /// prints it (relative directories made absolute against the working directory).
    ///
    /// Apache prints the size of the txn log directory as `dataDirSize` and the size of the snapshot
    /// directory as `dataLogSize`; the same swap is reproduced here so tools see the same numbers.
    pub fn conf_text(&self, status: &ConfStatus) -> String {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        self.conf_text_in(status, &cwd)
    }

    /// [`ServerConfig::conf_text`] with the working directory given.
    pub fn conf_text_in(&self, status: &ConfStatus, cwd: &Path) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let port = status.client_port.map_or(-1, i32::from);
        let data = java_absolute_path(&self.data_dir, cwd);
        let log = java_absolute_path(&self.data_log_dir, cwd);
        // Writing into a String cannot fail.
        let _ = writeln!(s, "clientPort={port}");
        let secure = self.secure_client_address.as_ref().map_or(-1, |a| i32::from(a.port));
        let _ = writeln!(s, "secureClientPort={secure}");
        let _ = writeln!(s, "dataDir={data}/version-2");
        let _ = writeln!(s, "dataDirSize={}", status.log_dir_bytes);
        let _ = writeln!(s, "dataLogDir={log}/version-2");
        let _ = writeln!(s, "dataLogSize={}", status.snap_dir_bytes);
        let _ = writeln!(s, "tickTime={}", self.tick_time_ms);
        let _ = writeln!(s, "maxClientCnxns={}", self.max_client_cnxns);
        let _ = writeln!(s, "minSessionTimeout={}", self.min_session_timeout_ms);
        let _ = writeln!(s, "maxSessionTimeout={}", self.max_session_timeout_ms);
        let _ = writeln!(s, "clientPortListenBacklog={}", self.client_port_listen_backlog);
        // An ensemble member's own id, as Apache's quorum servers answer; 0 standalone.
        let id = if self.is_distributed() { self.my_id.unwrap_or(0) } else { 0 };
        let _ = writeln!(s, "serverId={id}");
        s
    }
}

fn cfg_member_line(members: &Membership, id: u64) -> Option<u32> {
    members.servers.get(&id).map(|(_, l)| *l)
}

fn strip_brackets(host: &str) -> String {
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).to_string()
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
    // Java reads properties as ISO-8859-1; UTF-8 files (the common case for paths) are taken as
    // UTF-8 so non-ASCII directory names survive, anything else byte for byte as Latin-1.
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.into_bytes().iter().map(|&b| char::from(b)).collect(),
    })
}

/// Apache's `parseDynamicConfig` and `QuorumHierarchical` checks on the server list.
fn validate_membership(
    src: &Source<'_>,
    members: &mut Membership,
    standalone_enabled: bool,
) -> Result<(), ConfigError> {
    let participants: Vec<u64> = members
        .servers
        .iter()
        .filter(|(_, (s, _))| s.peer_type == PeerType::Participant)
        .map(|(id, _)| *id)
        .collect();
    let observers = members.servers.len() - participants.len();
    let first_observer_line = members
        .servers
        .values()
        .filter(|(s, _)| s.peer_type == PeerType::Observer)
        .map(|(s, l)| (s.id, *l))
        .next();
    if participants.is_empty() {
        if !standalone_enabled {
            return Err(src.err(
                "standaloneEnabled",
                None,
                "is false, so at least one participant server.N line is needed",
            ));
        }
        if let Some((id, line)) = first_observer_line.filter(|_| observers > 0) {
            return Err(src.err(&format!("server.{id}"), Some(line), "observers without participants"));
        }
    } else if participants.len() == 1 && standalone_enabled {
        if let Some((id, line)) = first_observer_line {
            return Err(src.err(&format!("server.{id}"), Some(line), "observers without a quorum"));
        }
        tracing::warn!("only one server is listed; it is ignored and this server runs standalone");
    } else if participants.len() <= 2 {
        tracing::warn!("no server failure will be tolerated; an ensemble needs at least 3 servers");
    } else if participants.len().is_multiple_of(2) {
        tracing::warn!("an even number of participants; an odd number tolerates the same failures");
    }
    if members.hierarchical {
        for id in &participants {
            if !members.groups.values().any(|m| m.contains(id)) {
                let line = members.servers.get(id).map(|(_, l)| *l);
                return Err(src.err(&format!("server.{id}"), line, format!("server {id} is not in a group")));
            }
            members.weights.entry(*id).or_insert(1);
        }
    }
    Ok(())
}

/// The enabled four-letter words: the whitelist (`*` = all), plus `srvr` always, plus `isro` in
/// read-only mode, as Apache's `FourLetterCommands.isEnabled` builds them. Unknown names are
/// dropped with a warning (Apache keeps them, to no effect).
fn four_letter_set(list: Option<&(String, u32)>, read_only: bool) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    if let Some((list, line)) = list {
        for name in list.split(',').map(java_trim) {
            if name == "*" {
                // Everything but the explicit-only words, which may still be named beside it.
                set.extend(FOUR_LETTER_WORDS.iter().map(|w| w.to_string()));
                tracing::warn!(
                    "4lw.commands.whitelist (line {line}): * enables csnp, ydld and rqld, so anyone who \
                     reaches the client port can start snapshots (one per \
                     snapshot.minRequestIntervalSeconds) and move the leadership; list the words to leave \
                     them out"
                );
                continue;
            }
            if name.is_empty() {
                continue;
            }
            if EXPLICIT_FOUR_LETTER_WORDS.contains(&name) {
                tracing::warn!(
                    "4lw.commands.whitelist (line {line}): {name} lets anyone who reaches the client port \
                     force this server to lead alone once it has lost its quorum (with the token its first \
                     answer gives); the AdminServer's force_recovery asks for ALL on / instead"
                );
            }
            if FOUR_LETTER_WORDS.contains(&name) || EXPLICIT_FOUR_LETTER_WORDS.contains(&name) {
                set.insert(name.to_string());
            } else {
                tracing::warn!(
                    "4lw.commands.whitelist (line {line}): \"{name}\" is not a four-letter word; ignored"
                );
            }
        }
    }
    if read_only {
        set.insert("isro".to_string());
    }
    set.insert("srvr".to_string());
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "tickTime=2000\ndataDir=/tmp/zkrs-config-test-none\nclientPort=2181\n";

    fn ok(text: &str) -> ServerConfig {
        match ServerConfig::parse(text, None) {
            Ok(c) => c,
            Err(e) => panic!("expected success, got: {e}"),
        }
    }

    fn bad(text: &str) -> ConfigError {
        match ServerConfig::parse(text, None) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e,
        }
    }

    /// Asserts the error names `key` and `line` (in its fields and in its message).
    fn assert_err(e: &ConfigError, key: &str, line: Option<u32>, contains: &str) {
        let text = e.to_string();
        assert_eq!(e.key(), Some(key), "{text}");
        assert_eq!(e.line(), line, "{text}");
        assert!(text.contains(key), "{text}");
        if let Some(l) = line {
            assert!(text.contains(&format!("line {l}")), "{text}");
        }
        assert!(text.contains(contains), "{text} lacks {contains}");
    }

    fn with(extra: &str) -> String {
        format!("{BASE}{extra}")
    }

    /// `snapshot.compression` and `snapshot.compressionLevel`: defaults, values in either order
    /// and case, and refusals naming the key and the line.
    #[test]
    fn snapshot_compression_keys() {
        use zk_log::snapshot::{Codec, Compression};
        let c = ServerConfig::parse(BASE, None).unwrap();
        assert_eq!((c.snapshot_compression, c.snapshot_compression_level), (Codec::None, 1));
        let s = crate::settings::Settings::from_config(&c).expect("settings");
        assert_eq!(s.snapshot_compression, Compression::None);
        let c = ServerConfig::parse(&with("snapshot.compressionLevel=6\nsnapshot.compression=ZSTD\n"), None)
            .unwrap();
        assert_eq!((c.snapshot_compression, c.snapshot_compression_level), (Codec::Zstd, 6));
        let s = crate::settings::Settings::from_config(&c).expect("settings");
        assert_eq!(s.snapshot_compression, Compression::Zstd { level: 6 });
        let c = ServerConfig::parse(&with("snapshot.compression=zstd\n"), None).unwrap();
        let s = crate::settings::Settings::from_config(&c).expect("settings");
        assert_eq!(s.snapshot_compression, Compression::Zstd { level: 1 });
        assert_err(
            &bad(&with("snapshot.compression=gzip\n")),
            "snapshot.compression",
            Some(4),
            "none or zstd",
        );
        for v in ["0", "7", "9", "19", "20", "-3"] {
            let e = bad(&with(&format!("# c\nsnapshot.compressionLevel={v}\n")));
            assert_err(&e, "snapshot.compressionLevel", Some(5), "1 to 6");
        }
        assert_err(
            &bad(&with("snapshot.compressionLevel=fast\n")),
            "snapshot.compressionLevel",
            Some(4),
            "fast",
        );
    }

    /// What parsing `text` logs at `warn`.
    fn parse_warnings(text: &str) -> String {
        #[derive(Clone, Default)]
        struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("log buffer").extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let w = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::with_default(sub, || ServerConfig::parse(text, None).expect("parses"));
        let out = buf.0.lock().expect("log buffer").clone();
        String::from_utf8(out).expect("utf-8")
    }

    /// Review of h-zstd, note 8: a level set without `snapshot.compression=zstd` is warned about,
    /// naming the key and its line; with zstd, or without a level, nothing is said.
    #[test]
    fn a_compression_level_without_compression_is_warned_about() {
        let logged = parse_warnings(&with("# c\nsnapshot.compressionLevel=3\n"));
        assert!(logged.contains("snapshot.compressionLevel=3 (line 5) has no effect"), "{logged}");
        let logged = parse_warnings(&with("snapshot.compression=none\nsnapshot.compressionLevel=2\n"));
        assert!(logged.contains("snapshot.compressionLevel=2 (line 5) has no effect"), "{logged}");
        for quiet in
            ["snapshot.compressionLevel=3\nsnapshot.compression=zstd\n", "snapshot.compression=zstd\n", ""]
        {
            let logged = parse_warnings(&with(quiet));
            assert!(!logged.contains("compressionLevel"), "{quiet:?}: {logged}");
        }
    }

    fn props(text: &str) -> Vec<(String, String, u32)> {
        load_properties(text).unwrap().into_iter().map(|p| (p.key, p.value, p.line)).collect()
    }

    fn kv(k: &str, v: &str, l: u32) -> (String, String, u32) {
        (k.to_string(), v.to_string(), l)
    }

    // ---- java.util.Properties syntax ----

    #[test]
    fn separators_equals_colon_space() {
        assert_eq!(
            props("a=1\nb: 2\nc 3\nd\t=\t4\ne = : 5\nf\n"),
            vec![
                kv("a", "1", 1),
                kv("b", "2", 2),
                kv("c", "3", 3),
                kv("d", "4", 4),
                kv("e", ": 5", 5),
                kv("f", "", 6)
            ]
        );
    }

    #[test]
    fn comments_and_blank_lines() {
        assert_eq!(
            props("# c\n! c\n   # indented\n\n   \na=1 # not a comment\nb=x!y\n"),
            vec![kv("a", "1 # not a comment", 6), kv("b", "x!y", 7)]
        );
    }

    #[test]
    fn comment_line_never_continues() {
        assert_eq!(props("# comment \\\na=1\n"), vec![kv("a", "1", 2)]);
    }

    #[test]
    fn trailing_whitespace_kept_by_properties_trimmed_by_config() {
        assert_eq!(props("a=1  \t\n"), vec![kv("a", "1  \t", 1)]);
        assert_eq!(ok(&with("tickTime = 2500   \n")).tick_time_ms, 2500);
    }

    #[test]
    fn continuation_lines() {
        assert_eq!(
            props("a=one\\\n    two\\\n\tthree\nb=4\n"),
            vec![kv("a", "onetwothree", 1), kv("b", "4", 4)]
        );
        // Even backslash count: no continuation, one backslash kept.
        assert_eq!(props("a=x\\\\\nb=1\n"), vec![kv("a", "x\\", 1), kv("b", "1", 2)]);
        // A continued line may start with '#': it is data.
        assert_eq!(props("a=x\\\n#y\n"), vec![kv("a", "x#y", 1)]);
        // Backslash at end of input is dropped.
        assert_eq!(props("a=x\\"), vec![kv("a", "x", 1)]);
        // Continuation followed by an empty line ends the entry.
        assert_eq!(props("a=x\\\n\nb=1"), vec![kv("a", "x", 1), kv("b", "1", 3)]);
    }

    #[test]
    fn line_endings_cr_crlf() {
        assert_eq!(props("a=1\r\nb=2\rc=3\n"), vec![kv("a", "1", 1), kv("b", "2", 2), kv("c", "3", 3)]);
        assert_eq!(props("a=1\\\r\n  2\r\nb=3"), vec![kv("a", "12", 1), kv("b", "3", 3)]);
    }

    #[test]
    fn escapes() {
        assert_eq!(props("k\\=ey\\ x=v\\tw\\u0041\\q\n"), vec![kv("k=ey x", "v\twAq", 1)]);
        assert_eq!(load_properties("a=\\u12\n").unwrap_err().0, 1);
        let e = bad(&with("x=\\uZZZZ\n"));
        assert_eq!(e.line(), Some(4));
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let c = ok(&with("tickTime=1000\n"));
        assert_eq!(c.tick_time_ms, 1000);
        // The later occurrence decides, even when an earlier one is malformed (Properties is a map).
        assert_eq!(ok(&with("maxClientCnxns=x\nmaxClientCnxns=5\n")).max_client_cnxns, 5);
        let c = ok(&with("maxCnxns=200\nnio.sessionlessCnxnTimeout=2500\n"));
        assert_eq!((c.max_cnxns, c.sessionless_cnxn_timeout_ms), (200, 2500));
        let d = ok(&with("maxCnxns=-3\n"));
        assert_eq!((d.max_cnxns, d.sessionless_cnxn_timeout_ms), (0, DEFAULT_SESSIONLESS_CNXN_TIMEOUT_MS));
        assert_err(&bad(&with("maxClientCnxns=5\nmaxClientCnxns=x\n")), "maxClientCnxns", Some(5), "\"x\"");
    }

    // ---- defaults ----

    #[test]
    fn defaults() {
        let c = ok("dataDir=/tmp/zkrs-config-test-none\nclientPort=2181\n");
        assert_eq!(c.tick_time_ms, 3000);
        assert_eq!(c.data_log_dir, c.data_dir);
        assert_eq!(c.client_address, Some(HostPort { host: "0.0.0.0".into(), port: 2181 }));
        assert_eq!(c.secure_client_address, None);
        assert_eq!(c.max_client_cnxns, 60);
        assert_eq!(c.max_client_cnxns_per_ip(), Some(60));
        assert_eq!(c.min_session_timeout_ms, 6000);
        assert_eq!(c.max_session_timeout_ms, 60000);
        assert_eq!(c.client_port_listen_backlog, -1);
        assert_eq!((c.init_limit, c.sync_limit, c.connect_to_learner_master_limit), (0, 0, 0));
        assert_eq!(c.election_alg, 3);
        assert_eq!(c.peer_type, PeerType::Participant);
        assert!(c.servers.is_empty() && c.groups.is_empty() && c.weights.is_empty());
        assert!(c.standalone_enabled);
        assert!(!c.reconfig_enabled);
        assert_eq!(c.dynamic_config_file, None);
        assert!(!c.local_sessions_enabled && !c.local_sessions_upgrading_enabled);
        assert_eq!(c.snap_retain_count, 3);
        assert_eq!(c.purge_interval_hours, 0);
        assert_eq!(c.snapshot_write_mb_per_second, 10);
        assert_eq!(c.snapshot_idle_seconds, 5);
        assert_eq!(c.snapshot_min_request_interval_seconds, 60);
        assert_eq!(c.txn_log_append_mode, zk_log::AppendMode::default());
        assert!(c.sync_enabled && !c.quorum_listen_on_all_ips);
        assert_eq!(c.snap_count, 100_000);
        assert_eq!(c.snap_size_limit_kb, 4_194_304);
        assert_eq!(c.pre_alloc_size_kb, 65_536);
        assert_eq!(c.global_outstanding_limit, 1000);
        assert_eq!(c.commit_log_count, 500);
        assert!(c.leader_serves);
        assert_eq!(c.four_letter_words, ["srvr".to_string()].into_iter().collect());
        assert!(!c.extended_types_enabled);
        assert_eq!(c.super_digest, None);
        assert_eq!(c.jute_max_buffer, 0xfffff);
        assert!(!c.read_only_mode_enabled);
        assert!(c.admin_enable_server);
        assert_eq!(c.admin_server_address, "0.0.0.0");
        assert_eq!(c.admin_server_port, 8080);
        assert_eq!(c.metrics_provider_class_name, "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider");
        assert_eq!(c.container_check_interval_ms, 60_000);
        assert_eq!(c.container_max_per_minute, 10_000);
        assert_eq!(c.container_max_never_used_interval_ms, 0);
        assert_eq!(c.my_id, None);
        assert!(c.unknown.is_empty());
        assert!(!c.is_distributed());
    }

    #[test]
    fn standalone_default_values() {
        let c = ServerConfig::standalone_default("./zkrs-data");
        assert_eq!(c.client_address, Some(HostPort { host: "127.0.0.1".into(), port: 2181 }));
        assert_eq!(c.tick_time_ms, 2000);
        assert_eq!(c.data_dir, PathBuf::from("./zkrs-data"));
        assert_eq!(c.data_log_dir, PathBuf::from("./zkrs-data"));
        assert_eq!((c.min_session_timeout_ms, c.max_session_timeout_ms), (4000, 40000));
        assert!(c.four_letter_allowed("srvr"));
        assert!(!c.four_letter_allowed("ruok"));
        assert!(!c.is_distributed());
    }

    #[test]
    fn session_timeouts_follow_tick() {
        let c = ok(&with("tickTime=100\n"));
        assert_eq!((c.min_session_timeout_ms, c.max_session_timeout_ms), (200, 2000));
        let c = ok(&with("minSessionTimeout=-1\nmaxSessionTimeout=90000\n"));
        assert_eq!((c.min_session_timeout_ms, c.max_session_timeout_ms), (4000, 90000));
    }

    // ---- each key ----

    #[test]
    fn simple_keys() {
        let c = ok(&with(
            "dataLogDir=/tmp/zkrs-log\nclientPortAddress=127.0.0.2\nmaxClientCnxns=0\n\
             minSessionTimeout=1000\nmaxSessionTimeout=5000\nclientPortListenBacklog=128\n\
             initLimit=10\nsyncLimit=5\nconnectToLearnerMasterLimit=7\nelectionAlg=3\n\
             peerType=observer\nstandaloneEnabled=true\nreconfigEnabled=FALSE\n\
             localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true\nautopurge.snapRetainCount=5\n\
             autopurge.purgeInterval=24\nsyncEnabled=true\ncnxTimeout=0x200\nquorumListenOnAllIPs=true\nsnapCount=0x100\nsnapSizeLimitInKb=2048\n\
             preAllocSize=1024\nglobalOutstandingLimit=10\ncommitLogCount=600\nleaderServes=no\n\
             extendedTypesEnabled=true\nDigestAuthenticationProvider.superDigest=super:abc=\n\
             jute.maxbuffer=4194304\nreadonlymode.enabled=true\nadmin.enableServer=false\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort=9090\nadmin.commandURL=/cmds\nadmin.idleTimeout=5000\nadmin.forceHttps=false\n\
             slowRequestThresholdMs=250\nlogFormat=json\nlogLevel=warn\nmetricsProvider.className=x.Y\n\
             metricsProvider.httpPort=7000\nznode.container.checkIntervalMs=1000\n\
             znode.container.maxPerMinute=50\nznode.container.maxNeverUsedIntervalMs=300000\n\
             snapshot.writeMBPerSecond=0\ntxnLog.appendMode=MMAP\nsnapshot.idleSeconds=0\n\
             zkrs.treeMemorySoftLimitBytes=3m\n",
        ));
        assert_eq!(c.data_log_dir, PathBuf::from("/tmp/zkrs-log"));
        assert_eq!(c.client_address, Some(HostPort { host: "127.0.0.2".into(), port: 2181 }));
        assert_eq!(c.max_client_cnxns_per_ip(), None);
        assert_eq!((c.min_session_timeout_ms, c.max_session_timeout_ms), (1000, 5000));
        assert_eq!(c.client_port_listen_backlog, 128);
        assert_eq!((c.init_limit, c.sync_limit, c.connect_to_learner_master_limit), (10, 5, 7));
        assert_eq!(c.effective_connect_to_learner_master_limit(), 7);
        assert_eq!(c.peer_type, PeerType::Observer);
        assert!(!c.reconfig_enabled && c.local_sessions_enabled && c.local_sessions_upgrading_enabled);
        assert_eq!(c.cnx_timeout_ms, 512);
        assert_eq!((c.snap_retain_count, c.purge_interval_hours), (5, 24));
        assert!(c.sync_enabled && c.quorum_listen_on_all_ips);
        assert_eq!(c.snap_count, 256);
        assert_eq!(c.snap_size_limit_kb, 2048);
        assert_eq!(c.pre_alloc_size_kb, 1024);
        assert_eq!(c.global_outstanding_limit, 10);
        assert_eq!(c.commit_log_count, 600);
        assert!(!c.leader_serves);
        assert!(c.extended_types_enabled);
        assert_eq!(c.super_digest.as_deref(), Some("super:abc="));
        assert_eq!(c.jute_max_buffer, 4_194_304);
        assert!(c.read_only_mode_enabled);
        assert!(c.four_letter_allowed("isro") && c.four_letter_allowed("srvr"));
        assert!(!c.admin_enable_server);
        assert_eq!((c.admin_server_address.as_str(), c.admin_server_port), ("127.0.0.1", 9090));
        assert_eq!(c.admin_command_url, "/cmds");
        assert_eq!(c.admin_idle_timeout_ms, 5000);
        assert_eq!(c.slow_request_threshold_ms, 250);
        assert_eq!(c.tree_memory_soft_limit_bytes, 3 << 20);
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.log_level.as_deref(), Some("warn"));
        assert_eq!(c.metrics_provider_class_name, "x.Y");
        assert_eq!(c.metrics_provider.get("httpPort").map(String::as_str), Some("7000"));
        assert_eq!(c.container_check_interval_ms, 1000);
        assert_eq!(c.container_max_per_minute, 50);
        assert_eq!(c.container_max_never_used_interval_ms, 300_000);
        assert_eq!(c.snapshot_write_mb_per_second, 0);
        assert_eq!(c.snapshot_idle_seconds, 0);
        assert_eq!(c.txn_log_append_mode, zk_log::AppendMode::Mapped);
    }

    #[test]
    fn clamped_values_like_apache() {
        let c = ok(&with(
            "autopurge.snapRetainCount=1\nsnapCount=1\ncommitLogCount=10\nautopurge.purgeInterval=-3\n",
        ));
        assert_eq!(c.snap_retain_count, 3);
        assert_eq!(c.snap_count, 2);
        assert_eq!(c.commit_log_count, 500);
        assert_eq!(c.purge_interval_hours, 0);
    }

    #[test]
    fn lenient_flags_like_apache() {
        // Apache disables leaderServes only for "no" and the admin server only for "false".
        assert!(ok(&with("leaderServes=false\n")).leader_serves);
        assert!(ok(&with("admin.enableServer=off\n")).admin_enable_server);
        assert!(ok(&with("admin.enableServer=TRUE\n")).admin_enable_server);
    }

    #[test]
    fn relative_dirs_and_base_dir() {
        let c = ServerConfig::parse(
            "dataDir=data\ndataLogDir=/abs/log\nclientPort=1\n",
            Some(Path::new("/etc/zk")),
        )
        .unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/etc/zk/data"));
        assert_eq!(c.data_log_dir, PathBuf::from("/abs/log"));
        let c = ok("dataDir=./data\nclientPort=1\n");
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.snap_dir(), PathBuf::from("./data/version-2"));
        assert_eq!(c.log_dir(), PathBuf::from("./data/version-2"));
    }

    #[test]
    fn unknown_keys_are_kept() {
        let c = ok(&with("fooBar=baz\nzookeeper.something=1\n"));
        assert_eq!(c.unknown.get("fooBar").map(String::as_str), Some("baz"));
        assert_eq!(c.unknown.get("zookeeper.something").map(String::as_str), Some("1"));
        // Apache keys zkrs has no use for are accepted, not kept as unknown.
        let c = ok(&with("quorum.cnxn.threads.size=20\njvm.pause.monitor=true\nsslQuorum=false\n"));
        assert!(c.unknown.is_empty());
    }

    #[test]
    fn client_port_from_ipv6_address() {
        let c = ok(&with("clientPortAddress=[::1]\n"));
        assert_eq!(c.client_address, Some(HostPort { host: "::1".into(), port: 2181 }));
        assert_eq!(c.client_address.unwrap().to_string(), "[::1]:2181");
    }

    // ---- four-letter words ----

    #[test]
    fn four_letter_whitelist() {
        let c = ok(&with("4lw.commands.whitelist=stat, ruok,,conf , bogus\n"));
        let words: Vec<&str> = c.four_letter_words.iter().map(String::as_str).collect();
        assert_eq!(words, vec!["conf", "ruok", "srvr", "stat"]);
        assert!(c.four_letter_allowed("ruok"));
        assert!(!c.four_letter_allowed("RUOK"));
        assert!(!c.four_letter_allowed("bogus"));
        assert!(!c.four_letter_allowed("isro"));
        let all = ok(&with("4lw.commands.whitelist=ruok, *\n"));
        for w in FOUR_LETTER_WORDS {
            assert!(all.four_letter_allowed(w), "{w}");
        }
        // Forced recovery only when named, beside `*` or not.
        assert!(!all.four_letter_allowed("rcvr"));
        assert!(ok(&with("4lw.commands.whitelist=*, rcvr\n")).four_letter_allowed("rcvr"));
        assert!(ok(&with("4lw.commands.whitelist=rcvr\n")).four_letter_allowed("rcvr"));
        let only_srvr = ok(&with("4lw.commands.whitelist=\n"));
        assert_eq!(only_srvr.four_letter_words.len(), 1);
    }

    // ---- errors: key and line named ----

    #[test]
    fn non_numeric_values() {
        for key in [
            "tickTime",
            "clientPort",
            "maxClientCnxns",
            "maxCnxns",
            "nio.sessionlessCnxnTimeout",
            "minSessionTimeout",
            "maxSessionTimeout",
            "initLimit",
            "syncLimit",
            "electionAlg",
            "autopurge.snapRetainCount",
            "autopurge.purgeInterval",
            "snapCount",
            "preAllocSize",
            "globalOutstandingLimit",
            "commitLogCount",
            "jute.maxbuffer",
            "admin.serverPort",
            "secureClientPort",
            "clientPortListenBacklog",
            "connectToLearnerMasterLimit",
            "znode.container.checkIntervalMs",
            "znode.container.maxPerMinute",
            "znode.container.maxNeverUsedIntervalMs",
            "snapshot.writeMBPerSecond",
            "snapshot.idleSeconds",
            "snapshot.minRequestIntervalSeconds",
            "txnLog.appendMode",
            "zkrs.treeMemorySoftLimitBytes",
            "testingonly.initialZxid",
        ] {
            let e = bad(&with(&format!("# comment\n{key}=12abc\n")));
            assert_err(&e, key, Some(5), "12abc");
        }
        // Out of the 32-bit range.
        assert_err(&bad(&with("tickTime=99999999999\n")), "tickTime", Some(4), "99999999999");
        assert_err(
            &bad(&with("snapshot.writeMBPerSecond=-1\n")),
            "snapshot.writeMBPerSecond",
            Some(4),
            "negative",
        );
        assert_err(&bad(&with("snapshot.idleSeconds=-5\n")), "snapshot.idleSeconds", Some(4), "negative");
        for v in ["-1", "1.5g", "k", "12kb", "99999999999g"] {
            let e = bad(&with(&format!("zkrs.treeMemorySoftLimitBytes={v}\n")));
            assert_err(&e, "zkrs.treeMemorySoftLimitBytes", Some(4), "not a size in bytes");
        }
        let c = ServerConfig::parse(&with("zkrs.treeMemorySoftLimitBytes=65536\n"), None).unwrap();
        assert_eq!(c.tree_memory_soft_limit_bytes, 65536);
        // A zxid counter: 32 bits, decimal as Apache reads it, or hexadecimal.
        for v in ["-1", "4294967296", "0x1ffffffff", "0xzz", "", "4294967294", "0xffffffff"] {
            let e = bad(&with(&format!("testingonly.initialZxid={v}\n")));
            assert_err(&e, "testingonly.initialZxid", Some(4), "not a zxid counter");
        }
        for (v, want) in [("4294967293", 0xffff_fffd), ("0xfffffff0", 0xffff_fff0), ("0", 0)] {
            let c = ServerConfig::parse(&with(&format!("testingonly.initialZxid={v}\n")), None).unwrap();
            assert_eq!(c.initial_zxid_counter, Some(want), "{v}");
        }
        assert_eq!(ServerConfig::parse(&with(""), None).unwrap().initial_zxid_counter, None);
    }

    #[test]
    fn values_zkrs_cannot_honour_are_refused() {
        let cases = [
            ("syncEnabled=false\n", "syncEnabled", "always log"),
            ("observerMasterPort=2191\n", "observerMasterPort", "from the"),
            ("cnxTimeout=0\n", "cnxTimeout", ""),
        ];
        for (text, key, says) in cases {
            assert_err(&bad(&with(text)), key, Some(4), says);
        }
    }

    #[test]
    fn admin_https_takes_the_quorum_stores() {
        let stores = "ssl.quorum.keyStore.location=/k.pem\nssl.quorum.trustStore.location=/t.pem\n";
        // Boolean.getBoolean: "true" in any case turns a key on, anything else leaves it off.
        let c = ok(&with(&format!("admin.forceHttps=TRUE\nadmin.needClientAuth=True\n{stores}")));
        assert_eq!(
            (c.admin_force_https, c.admin_port_unification, c.admin_need_client_auth),
            (Some(4), None, true)
        );
        assert_eq!(c.admin_https_wanted_by().as_deref(), Some("admin.forceHttps at line 4"));
        let c = ok(&with(&format!("admin.portUnification=true\nadmin.forceHttps=yes\n{stores}")));
        assert_eq!(
            (c.admin_force_https, c.admin_port_unification, c.admin_need_client_auth),
            (None, Some(4), false)
        );
        assert_eq!(c.admin_https_wanted_by().as_deref(), Some("admin.portUnification at line 4"));
        // Both: forceHttps wins, as in Apache's JettyAdminServer.
        let c = ok(&with(&format!("admin.portUnification=true\nadmin.forceHttps=true\n{stores}")));
        assert_eq!(c.admin_https_wanted_by().as_deref(), Some("admin.forceHttps at line 5"));
        // A disabled AdminServer needs no stores.
        let c = ok(&with("admin.forceHttps=true\nadmin.enableServer=false\n"));
        assert_eq!(c.admin_https_wanted_by(), None);
        assert_eq!(ok(&with("admin.needClientAuth=true\n")).admin_https_wanted_by(), None);

        // Without the stores: the missing key, and the admin key's line in the message.
        let e = bad(&with("admin.forceHttps=true\n"));
        assert_err(&e, "ssl.quorum.keyStore.location", None, "admin.forceHttps at line 4");
        let e = bad(&with("admin.portUnification=true\nssl.quorum.keyStore.location=/k.pem\n"));
        assert_err(&e, "ssl.quorum.trustStore.location", None, "admin.portUnification at line 4");
        // Only PEM, refused with the line of the store's key.
        let e = bad(&with("admin.forceHttps=true\nssl.quorum.keyStore.location=/k.jks\n"));
        assert_err(&e, "ssl.quorum.keyStore.location", Some(5), "PEM");
        let e = bad(&with(&format!("admin.forceHttps=true\n{stores}ssl.quorum.trustStore.type=PKCS12\n")));
        assert_err(&e, "ssl.quorum.trustStore.type", Some(7), "PEM");
    }

    #[test]
    fn bad_booleans() {
        for key in [
            "standaloneEnabled",
            "reconfigEnabled",
            "localSessionsEnabled",
            "localSessionsUpgradingEnabled",
            "syncEnabled",
            "quorumListenOnAllIPs",
            "extendedTypesEnabled",
            "readonlymode.enabled",
            "sslQuorum",
            "digest.enabled",
        ] {
            assert_err(&bad(&with(&format!("{key}=yes\n"))), key, Some(4), "'true' or 'false'");
        }
    }

    #[test]
    fn client_port_errors() {
        let e = bad("dataDir=/tmp/x\n\nclientPort=70000\n");
        assert_err(&e, "clientPort", Some(3), "out of range");
        assert_err(&bad("dataDir=/tmp/x\nclientPort=-1\n"), "clientPort", Some(2), "out of range");
        let e = bad("dataDir=/tmp/x\nclientPortAddress=127.0.0.1\n");
        assert_err(&e, "clientPortAddress", Some(2), "clientPort is not set");
        assert_err(&bad("dataDir=/tmp/x\n"), "clientPort", None, "not set");
        let e = bad(&with("secureClientPort=2281\n"));
        assert_err(&e, "ssl.keyStore.location", None, "not set");
        let e = bad(&with("secureClientPort=2281\nssl.keyStore.location=/ks.jks\n"));
        assert_err(&e, "ssl.keyStore.location", Some(5), "only PEM");
        let e = bad(&with(
            "secureClientPort=2281\nssl.keyStore.location=/ks.pem\nssl.trustStore.type=PKCS12\n\
                           ssl.trustStore.location=/t\n",
        ));
        assert_err(&e, "ssl.trustStore.type", Some(6), "only PEM");
        let e = bad(&with("ssl.clientAuth=sometimes\n"));
        assert_err(&e, "ssl.clientAuth", Some(4), "need, want, none");
        let c = ok(&with(
            "secureClientPort=2281\nsecureClientPortAddress=127.0.0.1\nssl.keyStore.location=/ks.pem\n\
                          ssl.clientAuth=none\n",
        ));
        assert_eq!(c.secure_client_address, Some(HostPort { host: "127.0.0.1".into(), port: 2281 }));
        assert!(c.unknown.is_empty());
        // The TLS port alone is enough.
        let c = ok("tickTime=2000\ndataDir=/tmp/x\nsecureClientPort=2281\nssl.keyStore.location=/ks.pem\n\
                    ssl.clientAuth=none\n");
        assert_eq!(c.client_address, None);
        assert_eq!(c.secure_client_address, Some(HostPort { host: "0.0.0.0".into(), port: 2281 }));
        let e = bad(&with("secureClientPortAddress=0.0.0.0\n"));
        assert_err(&e, "secureClientPortAddress", Some(4), "secureClientPort is not set");
    }

    #[test]
    fn data_dir_errors() {
        assert_err(&bad("clientPort=2181\n"), "dataDir", None, "not set");
        assert_err(&bad("clientPort=2181\ndataDir=\n"), "dataDir", Some(2), "empty");
        assert_err(&bad(&with("dataLogDir= \n")), "dataLogDir", Some(4), "empty");
    }

    #[test]
    fn tick_and_timeout_errors() {
        assert_err(&bad(&with("tickTime=0\n")), "tickTime", Some(4), "not set");
        assert_err(&bad(&with("tickTime=-5\n")), "tickTime", Some(4), "greater than 0");
        let e = bad(&with("minSessionTimeout=50000\nmaxSessionTimeout=40000\n"));
        assert_err(&e, "minSessionTimeout", Some(4), "maxSessionTimeout");
        // Only max set, below the default min: the max line is named.
        let e = bad(&with("\nmaxSessionTimeout=100\n"));
        assert_err(&e, "minSessionTimeout", Some(5), "larger than maxSessionTimeout");
        assert_err(&bad(&with("maxSessionTimeout=-7\n")), "maxSessionTimeout", Some(4), "negative");
    }

    #[test]
    fn quorum_tls_keys() {
        let e = bad(&with("sslQuorum=true\nssl.quorum.keyStore.location=/ks.jks\n"));
        assert_err(&e, "ssl.quorum.keyStore.location", Some(5), "only PEM");
        let e = bad(&with("ssl.quorum.keyStore.location=/ks.pem\nsslQuorum=true\n"));
        assert_err(&e, "ssl.quorum.trustStore.location", None, "not set");
        assert_err(&bad(&with("ssl.quorum.clientAuth=maybe\n")), "ssl.quorum.clientAuth", Some(4), "need");
        assert_err(&bad(&with("sslQuorum=yes\n")), "sslQuorum", Some(4), "'true' or 'false'");
        let e = bad(&with("sslQuorumReloadCertFiles=yes\n"));
        assert_err(&e, "sslQuorumReloadCertFiles", Some(4), "'true' or 'false'");
        let c = ok(&with(
            "sslQuorum=true\nportUnification=true\nssl.quorum.keyStore.location=/ks.pem\n\
             ssl.quorum.trustStore.location=/ca.pem\nssl.quorum.hostnameVerification=false\n\
             ssl.keyStore.location=/client.pem\n",
        ));
        assert!(c.ssl_quorum_enabled && c.quorum_port_unification && !c.ssl_quorum.hostname_verification);
        assert_eq!(c.ssl_quorum.key_store.location.as_ref().map(|l| l.line), Some(6));
        // The client port's keys and the quorum's stay apart.
        assert_eq!(c.ssl.key_store.location.as_ref().map(|l| l.line), Some(9));
        assert!(c.ssl.trust_store.location.is_none());
    }

    #[test]
    fn other_value_errors() {
        assert_err(&bad(&with("electionAlg=1\n")), "electionAlg", Some(4), "only 3");
        assert_err(&bad(&with("peerType=leader\n")), "peerType", Some(4), "leader");
        assert_err(&bad(&with("preAllocSize=0\n")), "preAllocSize", Some(4), "greater than 0");
        assert_err(&bad(&with("snapSizeLimitInKb=4G\n")), "snapSizeLimitInKb", Some(4), "not a valid size");
        assert_err(&bad(&with("jute.maxbuffer=-1\n")), "jute.maxbuffer", Some(4), "greater than 0");
        assert_err(&bad(&with("globalOutstandingLimit=0\n")), "globalOutstandingLimit", Some(4), "greater");
        assert_err(
            &bad(&with("nio.sessionlessCnxnTimeout=0\n")),
            "nio.sessionlessCnxnTimeout",
            Some(4),
            "greater",
        );
        assert_err(&bad(&with("admin.serverPort=65536\n")), "admin.serverPort", Some(4), "out of range");
        let e = bad(&with("DigestAuthenticationProvider.superDigest=nocolon\n"));
        assert_err(&e, "DigestAuthenticationProvider.superDigest", Some(4), "super:");
        assert_err(&bad(&with("portUnification=true\n")), "ssl.quorum.keyStore.location", None, "not set");
        assert_err(
            &bad(&with("multiAddress.enabled=true\n")),
            "multiAddress.enabled",
            Some(4),
            "not supported",
        );
        assert_err(&bad(&with("initLimit=-1\n")), "initLimit", Some(4), "negative");
    }

    #[test]
    fn error_message_names_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zoo.cfg");
        std::fs::write(&path, format!("dataDir={}\nclientPort=2181\ntickTime=abc\n", dir.path().display()))
            .unwrap();
        let e = ServerConfig::from_file(&path).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with(&format!("{} line 3: tickTime: ", path.display())), "{text}");
        let e = ServerConfig::from_file(dir.path().join("missing.cfg")).unwrap_err();
        assert!(matches!(e, ConfigError::Io { .. }), "{e}");
    }

    // ---- server.N, group, weight ----

    #[test]
    fn server_line_variants() {
        let s = parse_server_value(1, "zk1:2888:3888").unwrap();
        assert_eq!(
            s,
            QuorumServer {
                id: 1,
                host: "zk1".into(),
                quorum_port: 2888,
                election_port: 3888,
                peer_type: PeerType::Participant,
                client: None
            }
        );
        let s = parse_server_value(2, "zk2:2888:3888:observer").unwrap();
        assert_eq!(s.peer_type, PeerType::Observer);
        let s = parse_server_value(2, "zk2:2888:3888:Participant;2181").unwrap();
        assert_eq!(s.peer_type, PeerType::Participant);
        assert_eq!(s.client, Some(HostPort { host: "0.0.0.0".into(), port: 2181 }));
        let s = parse_server_value(3, "zk3:2888:3888;10.0.0.3:2182").unwrap();
        assert_eq!(s.client, Some(HostPort { host: "10.0.0.3".into(), port: 2182 }));
        let s = parse_server_value(4, "[::1]:2888:3888:observer;[::1]:2181").unwrap();
        assert_eq!(s.host, "::1");
        assert_eq!(s.client, Some(HostPort { host: "::1".into(), port: 2181 }));
        // Trailing whitespace (Apache would choke on it) is tolerated.
        assert_eq!(parse_server_value(5, "h:1:2 ").unwrap().election_port, 2);
    }

    #[test]
    fn bad_server_lines() {
        for (value, msg) in [
            ("zk1:2888", "expected host:quorumPort"),
            ("zk1", "expected host:quorumPort"),
            ("zk1:2888:3888:observer:x", "expected host:quorumPort"),
            ("zk1:28x8:3888", "quorum port"),
            ("zk1:2888:99999", "out of range"),
            ("zk1:2888:2888", "must be different"),
            ("zk1:2888:3888:leader", "unrecognised peer type"),
            ("zk1:2888:3888;a:b:c", "bad client address"),
            ("zk1:2888:3888;x", "client port"),
            ("zk1:2888:3888;1;2", "expected host:quorumPort"),
            ("a:1:2|b:1:2", "multiAddress"),
            ("[::1:2888:3888", "no matching"),
        ] {
            let e = bad(&with(&format!("initLimit=5\nsyncLimit=2\n\nserver.1={value}\n")));
            assert_err(&e, "server.1", Some(7), msg);
        }
        assert_err(&bad(&with("server.x=a:1:2\n")), "server.x", Some(4), "server id");
        assert_err(&bad(&with("server.256=a:1:2\n")), "server.256", Some(4), "out of range (0-255)");
        assert_err(&bad(&with("server.-1=a:1:2\n")), "server.-1", Some(4), "out of range");
        let e = bad(&with("extendedTypesEnabled=true\nserver.255=a:1:2\n"));
        assert_err(&e, "server.255", Some(5), "0-254");
    }

    #[test]
    fn single_server_is_standalone() {
        let c = ok(&with("server.1=zk1:2888:3888\n"));
        assert!(!c.is_distributed());
        assert_eq!(c.servers.len(), 1);
    }

    #[test]
    fn observers_need_a_quorum() {
        let e = bad(&with("server.1=zk1:2888:3888\nserver.2=zk2:2888:3888:observer\n"));
        assert_err(&e, "server.2", Some(5), "observers without a quorum");
        let e = bad(&with("server.2=zk2:2888:3888:observer\n"));
        assert_err(&e, "server.2", Some(4), "observers without participants");
        assert_err(&bad(&with("standaloneEnabled=false\n")), "standaloneEnabled", None, "participant");
    }

    fn ensemble_dir(myid: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if let Some(id) = myid {
            std::fs::write(dir.path().join("myid"), id).unwrap();
        }
        dir
    }

    fn ensemble(dir: &Path, extra: &str) -> String {
        format!(
            "tickTime=2000\ndataDir={}\nclientPort=2181\ninitLimit=10\nsyncLimit=5\n\
             server.1=zk1:2888:3888\nserver.2=zk2:2888:3888\nserver.3=zk3:2888:3888;2182\n{extra}",
            dir.display()
        )
    }

    #[test]
    fn ensemble_with_myid() {
        let dir = ensemble_dir(Some("2\n"));
        let c = ok(&ensemble(dir.path(), ""));
        assert!(c.is_distributed());
        assert_eq!(c.my_id, Some(2));
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.client_address, Some(HostPort { host: "0.0.0.0".into(), port: 2181 }));
        assert_eq!(c.effective_connect_to_learner_master_limit(), 10);
        // `conf` names a member by its own id (a standalone server answers 0).
        assert!(c.conf_text_in(&ConfStatus::default(), Path::new("/")).ends_with("\nserverId=2\n"));
    }

    /// The server archiving by itself: `zkrs.backup.*`, their defaults and refusals naming the
    /// key and the line; `{myid}` required in an ensemble and replaced by the member's id.
    #[test]
    fn backup_keys() {
        let c = ok(BASE);
        assert_eq!(c.backup_to, None);
        assert_eq!((c.backup_interval_ms, c.backup_hold_max_bytes), (10_000, 10 << 30));
        assert!(crate::settings::Settings::from_config(&c).expect("settings").backup.is_none());
        let c = ok(&with(
            "zkrs.backup.to=/backup/zk\nzkrs.backup.intervalSecs=0.25\nzkrs.backup.holdMaxBytes=3g\n",
        ));
        assert_eq!(c.backup_to.as_deref(), Some("/backup/zk"));
        assert_eq!((c.backup_interval_ms, c.backup_hold_max_bytes), (250, 3 << 30));
        let b = crate::settings::Settings::from_config(&c).expect("settings").backup.expect("on");
        assert_eq!(b.interval, std::time::Duration::from_millis(250));
        let s3 = ok(&with("zkrs.backup.to=s3://bucket/zk/{myid}\n"));
        assert_eq!(s3.backup_to.as_deref(), Some("s3://bucket/zk/0"), "a standalone server is 0");
        let rel = ServerConfig::parse(&with("zkrs.backup.to=archive\n"), Some(Path::new("/etc/zk"))).unwrap();
        assert_eq!(rel.backup_to.as_deref(), Some("/etc/zk/archive"));
        assert_eq!(ok(&with("zkrs.backup.holdMaxBytes=0\n")).backup_hold_max_bytes, 0);
        for v in ["0", "0.001", "0.09", "-1", "86401", "ten", "inf", "NaN", ""] {
            let e = bad(&with(&format!("# c\nzkrs.backup.intervalSecs={v}\n")));
            assert_err(&e, "zkrs.backup.intervalSecs", Some(5), "from 0.1 to 86400");
        }
        assert_eq!(ok(&with("zkrs.backup.intervalSecs=0.1\n")).backup_interval_ms, 100);
        for v in ["-1", "10x", "g", "1.5g"] {
            let e = bad(&with(&format!("zkrs.backup.holdMaxBytes={v}\n")));
            assert_err(&e, "zkrs.backup.holdMaxBytes", Some(4), "not a size in bytes");
        }
        let refused = |value: &str, why: &str| {
            let e = bad(&with(&format!("zkrs.backup.to={value}\n")));
            assert_err(&e, "zkrs.backup.to", Some(4), why);
        };
        refused("", "is empty");
        refused("gs://b/p", "\"gs://\" archives are not supported");
        refused("s3:///p", "names no bucket");
        // A properties escape makes a newline, which the progress file could not hold.
        refused("/a\\nb", "control character");
        let logged = parse_warnings(&with("zkrs.backup.intervalSecs=5\n"));
        assert!(logged.contains("zkrs.backup.intervalSecs (line 4) has no effect"), "{logged}");
        // An ensemble member: its own archive, named by {myid}.
        let dir = ensemble_dir(Some("2\n"));
        let e = bad(&ensemble(dir.path(), "zkrs.backup.to=s3://bucket/zk\n"));
        assert_err(&e, "zkrs.backup.to", Some(9), "each member archives its own log");
        let c = ok(&ensemble(dir.path(), "zkrs.backup.to=/backup/zk-{myid}/x\n"));
        assert_eq!(c.backup_to.as_deref(), Some("/backup/zk-2/x"));
    }

    #[test]
    fn ensemble_client_port_from_server_line() {
        let dir = ensemble_dir(Some("3"));
        let c = ok(&ensemble(dir.path(), "").replace("clientPort=2181\n", ""));
        assert_eq!(c.client_address, Some(HostPort { host: "0.0.0.0".into(), port: 2182 }));
        // Static clientPort disagreeing with the server line is refused.
        let e = bad(&ensemble(dir.path(), ""));
        assert_err(&e, "server.3", Some(8), "differs");
    }

    #[test]
    fn ensemble_requires_limits_and_myid() {
        let dir = ensemble_dir(Some("1"));
        let text = ensemble(dir.path(), "");
        assert_err(&bad(&text.replace("initLimit=10\n", "")), "initLimit", None, "not set");
        assert_err(&bad(&text.replace("syncLimit=5\n", "syncLimit=0\n")), "syncLimit", Some(5), "not set");
        let none = ensemble_dir(None);
        assert_err(&bad(&ensemble(none.path(), "")), "myid", None, "missing");
        // A myid the list lacks parses (Apache's member stops later, at start-up).
        let four = ensemble_dir(Some("4"));
        let c = ok(&ensemble(four.path(), ""));
        assert_eq!(c.my_id, Some(4));
        let why = c.not_in_peer_list().expect("server 4 is not listed");
        assert!(why.contains("myid 4 is not in the peer list"), "{why}");
        assert!(why.contains("server.1, server.2, server.3"), "{why}");
        let one = ensemble_dir(Some("1"));
        assert_eq!(ok(&ensemble(one.path(), "")).not_in_peer_list(), None);
    }

    #[test]
    fn myid_errors_and_forms() {
        let dir = ensemble_dir(Some("abc"));
        let e = bad(&ensemble(dir.path(), ""));
        assert_err(&e, "myid", Some(1), "not a number");
        assert!(e.to_string().contains("myid line 1"), "{e}");
        // A bad myid is fatal even standalone, as in Apache.
        let e = bad(&format!("dataDir={}\nclientPort=1\n", dir.path().display()));
        assert_err(&e, "myid", Some(1), "not a number");
        let dir = ensemble_dir(Some("300"));
        assert_err(&bad(&ensemble(dir.path(), "")), "myid", Some(1), "out of range");
        let dir = ensemble_dir(Some(""));
        assert_err(&bad(&ensemble(dir.path(), "")), "myid", Some(1), "not a number");
        let dir = ensemble_dir(Some(" 1 \r\nignored"));
        assert_eq!(ok(&ensemble(dir.path(), "")).my_id, Some(1));
        // Standalone with a myid: read and kept.
        let c = ok(&format!("dataDir={}\nclientPort=1\n", dir.path().display()));
        assert_eq!(c.my_id, Some(1));
    }

    #[test]
    fn peer_type_follows_server_line() {
        let dir = ensemble_dir(Some("4"));
        let c = ok(&ensemble(dir.path(), "server.4=zk4:2888:3888:observer\n"));
        assert_eq!(c.peer_type, PeerType::Observer);
        let dir = ensemble_dir(Some("1"));
        let c = ok(&ensemble(dir.path(), "peerType=observer\n"));
        assert_eq!(c.peer_type, PeerType::Participant);
    }

    #[test]
    fn standalone_disabled_single_server_is_distributed() {
        let dir = ensemble_dir(Some("1"));
        let text = format!(
            "dataDir={}\nclientPort=2181\ninitLimit=5\nsyncLimit=2\nstandaloneEnabled=false\nserver.1=h:1:2\n",
            dir.path().display()
        );
        let c = ok(&text);
        assert!(c.is_distributed());
    }

    #[test]
    fn groups_and_weights() {
        let dir = ensemble_dir(Some("1"));
        let c = ok(&ensemble(dir.path(), "group.1=1:2\ngroup.2=3\nweight.1=2\nweight.2=0\n"));
        assert_eq!(c.groups.get(&1), Some(&vec![1, 2]));
        assert_eq!(c.groups.get(&2), Some(&vec![3]));
        assert_eq!(c.weights.get(&1), Some(&2));
        assert_eq!(c.weights.get(&2), Some(&0));
        assert_eq!(c.weights.get(&3), Some(&1));
        let e = bad(&ensemble(dir.path(), "group.1=1:2\n"));
        assert_err(&e, "server.3", Some(8), "not in a group");
        let e = bad(&ensemble(dir.path(), "group.1=1:2\ngroup.2=2:3\n"));
        assert!(e.key().is_some_and(|k| k.starts_with("group.")), "{e}");
        assert!(e.to_string().contains("multiple groups"), "{e}");
        assert_err(&bad(&ensemble(dir.path(), "group.1=1:x\n")), "group.1", Some(9), "not a server id");
        assert_err(&bad(&ensemble(dir.path(), "weight.1=heavy\n")), "weight.1", Some(9), "weight");
        assert_err(&bad(&ensemble(dir.path(), "groups=1\n")), "groups", Some(9), "group number");
    }

    #[test]
    fn dynamic_config_file() {
        let dir = ensemble_dir(Some("2"));
        let dyn_path = dir.path().join("zoo.cfg.dynamic.100000000");
        std::fs::write(
            &dyn_path,
            "server.1=zk1:2888:3888\nserver.2=zk2:2888:3888;2181\nserver.3=zk3:2888:3888\n",
        )
        .unwrap();
        let text = format!(
            "tickTime=2000\ndataDir={d}\ninitLimit=10\nsyncLimit=5\ndynamicConfigFile={p}\n",
            d = dir.path().display(),
            p = dyn_path.display()
        );
        let c = ok(&text);
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.dynamic_config_version, Some(0x1_0000_0000));
        assert_eq!(c.client_address, Some(HostPort { host: "0.0.0.0".into(), port: 2181 }));
        // server lines must not also be in the static file.
        let e = bad(&format!("{text}server.1=zk1:2888:3888\n"));
        assert_err(&e, "server.1", Some(6), "dynamic config file");
        // Errors inside the dynamic file name that file and its line.
        std::fs::write(&dyn_path, "server.1=zk1:2888:3888\nversion=1\n").unwrap();
        let e = bad(&text);
        assert_err(&e, "version", Some(2), "must not be in the dynamic config file");
        assert!(e.to_string().contains("zoo.cfg.dynamic.100000000 line 2"), "{e}");
        std::fs::write(&dyn_path, "tickTime=5\n").unwrap();
        assert_err(&bad(&text), "tickTime", Some(1), "unrecognised");
        let e = bad(&text.replace("zoo.cfg.dynamic.100000000", "nope"));
        assert_err(&e, "dynamicConfigFile", Some(5), "cannot read");
        // A dynamic file of one participant that does not list this server (a forced recovery's,
        // adopted): not run standalone, refused as not in the peer list.
        // Its zoo.cfg keeps its clientPort (the configuration gives it no client address).
        std::fs::write(&dyn_path, "server.1=zk1:2888:3888;2181\n").unwrap();
        let c = ok(&format!("{text}clientPort=2182\n"));
        assert!(!c.is_distributed());
        let why = c.not_in_peer_list().expect("server 2 is not listed");
        assert!(why.contains("myid 2 is not in the peer list"), "{why}");
    }

    // ---- number formats ----

    #[test]
    fn java_number_parsing() {
        assert_eq!(java_parse_int("+12"), Some(12));
        assert_eq!(java_parse_int("-12"), Some(-12));
        assert_eq!(java_parse_int("2147483648"), None);
        assert_eq!(java_parse_int(""), None);
        assert_eq!(java_parse_int("1 2"), None);
        assert_eq!(java_parse_int("0x10"), None);
        assert_eq!(java_decode_int("0x10"), Some(16));
        assert_eq!(java_decode_int("#ff"), Some(255));
        assert_eq!(java_decode_int("010"), Some(8));
        assert_eq!(java_decode_int("-0X10"), Some(-16));
        assert_eq!(java_decode_int("0"), Some(0));
        assert_eq!(java_decode_int("08"), None);
        assert_eq!(java_decode_int("0x-1"), None);
        assert_eq!(version_from_filename("zoo.cfg.dynamic.1001"), Some(0x1001));
        assert_eq!(version_from_filename("zoo.cfg.dynamic"), None);
    }

    // ---- conf ----

    #[test]
    fn conf_text_matches_apache() {
        let c = ok("tickTime=2000\ndataDir=/tmp/cfgw/data\nclientPort=21911\n4lw.commands.whitelist=*\n");
        let status = ConfStatus { client_port: Some(21911), snap_dir_bytes: 457, log_dir_bytes: 457 };
        assert_eq!(
            c.conf_text_in(&status, Path::new("/")),
            "clientPort=21911\nsecureClientPort=-1\ndataDir=/tmp/cfgw/data/version-2\ndataDirSize=457\n\
             dataLogDir=/tmp/cfgw/data/version-2\ndataLogSize=457\ntickTime=2000\nmaxClientCnxns=60\n\
             minSessionTimeout=4000\nmaxSessionTimeout=40000\nclientPortListenBacklog=-1\nserverId=0\n"
        );
        // Relative paths and the Apache size swap (captured from Apache 3.8.0).
        let c = ok("tickTime=2000\ndataDir=./data\ndataLogDir=logd\nclientPort=21911\n");
        let status = ConfStatus { client_port: Some(21911), snap_dir_bytes: 457, log_dir_bytes: 0 };
        let text = c.conf_text_in(&status, Path::new("/tmp/cfgw"));
        assert!(text.contains(
            "dataDir=/tmp/cfgw/./data/version-2\ndataDirSize=0\ndataLogDir=/tmp/cfgw/logd/version-2\n\
             dataLogSize=457\n"
        ));
        let none = ConfStatus::default();
        assert!(c.conf_text_in(&none, Path::new("/")).starts_with("clientPort=-1\n"));
    }

    #[test]
    fn java_paths() {
        assert_eq!(java_absolute_path(Path::new("/a//b/"), Path::new("/x")), "/a/b");
        assert_eq!(java_absolute_path(Path::new("d"), Path::new("/")), "/d");
        assert_eq!(java_absolute_path(Path::new("../d"), Path::new("/x/y/")), "/x/y/../d");
    }

    #[test]
    fn directory_sizes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), [0u8; 10]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), [0u8; 5]).unwrap();
        assert_eq!(directory_size_bytes(dir.path()), 15);
        assert_eq!(directory_size_bytes(&dir.path().join("nope")), 0);
    }
}
