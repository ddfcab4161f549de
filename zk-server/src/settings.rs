//! The run-time settings the server's moving parts read, resolved once from the zoo.cfg.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Settings of a running standalone server, in the units the code uses.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where clients connect (clientPort); `None` when only the TLS port is configured.
    pub client_addr: Option<SocketAddr>,
    /// Where clients connect with TLS (secureClientPort), if anywhere.
    pub secure_client_addr: Option<SocketAddr>,
    /// `clientPortListenBacklog` as configured (-1 when not set): the client ports' listen
    /// backlog ([`Settings::listen_backlog`]).
    pub client_port_listen_backlog: i32,
    /// The TLS context, when TLS is served (a secure port or port unification).
    pub tls: Option<std::sync::Arc<crate::tls::ServerTls>>,
    /// `client.portUnification`: the plain port also takes TLS connections.
    pub port_unification: bool,
    /// The `x509` auth scheme exists (TLS is served, or an `authProvider.N` line names it).
    pub x509_enabled: bool,
    /// `X509AuthenticationProvider.superUser`.
    pub x509_super_user: Option<String>,
    /// SASL users and authentication enforcement.
    pub sasl: crate::sasl_config::SaslSettings,
    /// The tick, ms: session expiry granularity.
    pub tick_ms: i64,
    /// Smallest session timeout granted, ms.
    pub min_session_timeout_ms: i32,
    /// Largest session timeout granted, ms.
    pub max_session_timeout_ms: i32,
    /// Largest frame accepted (jute.maxbuffer).
    pub max_frame: u32,
    /// Connections allowed per client IP; 0 = unlimited.
    pub max_client_cnxns: u32,
    /// Client connections allowed in all; 0 = unlimited.
    pub max_cnxns: u32,
    /// How long a connection may take from its accept to its handshake or four-letter word.
    pub sessionless_cnxn_timeout: std::time::Duration,
    /// Requests in flight across all connections before reading pauses.
    pub global_outstanding_limit: u32,
    /// Four-letter words allowed; `None` = all but [`crate::config::EXPLICIT_FOUR_LETTER_WORDS`].
    pub four_letter_words: Option<HashSet<String>>,
    /// TTL nodes allowed.
    pub extended_types_enabled: bool,
    /// An ensemble member keeps the tree digest (`digest.enabled`).
    pub digest_enabled: bool,
    /// `DigestAuthenticationProvider.superDigest`.
    pub super_digest: Option<String>,
    /// How often empty containers and expired TTL nodes are looked for, ms.
    pub container_check_interval_ms: u64,
    /// Most containers and TTL nodes reaped per minute.
    pub container_max_per_minute: u32,
    /// Containers that never had a child are reaped once this old, ms; 0 = never.
    pub container_max_never_used_ms: i64,
    /// Snapshot directory (dataDir).
    pub data_dir: PathBuf,
    /// Transaction log directory (dataLogDir).
    pub data_log_dir: PathBuf,
    /// dataDir itself: zkrs keeps its snapshots under it.
    pub snap_root: PathBuf,
    /// dataLogDir itself: zkrs keeps its transaction log under it.
    pub log_root: PathBuf,
    /// Log segments grow in steps of this many bytes (preAllocSize).
    pub prealloc_bytes: u64,
    /// Transactions between snapshots (snapCount).
    pub snap_count: u64,
    /// Log bytes between snapshots (snapSizeLimitInKb); 0 = no size trigger.
    pub snap_size_bytes: u64,
    /// Snapshots are written at this many bytes a second, or twice the log's rate when that is
    /// more (snapshot.writeMBPerSecond); 0 = no limit.
    pub snapshot_write_bytes_per_second: u64,
    /// A snapshot is taken once no transaction has been applied for this long, ms
    /// (snapshot.idleSeconds); 0 = never for that reason.
    pub snapshot_idle_ms: u64,
    /// An operator's request starts no snapshot within this long of the last one's start, ms
    /// (snapshot.minRequestIntervalSeconds); 0 = no minimum.
    pub snapshot_min_request_interval_ms: u64,
    /// How snapshot files store their chunks (snapshot.compression, snapshot.compressionLevel).
    pub snapshot_compression: zk_log::snapshot::Compression,
    /// How the transaction log's appends are written (txnLog.appendMode): with `pwrite` or
    /// through the segment's mapping.
    pub txn_log_append_mode: zk_log::AppendMode,
    /// Snapshots kept (autopurge.snapRetainCount); older ones and the log they cover are removed.
    pub snap_retain_count: u32,
    /// autopurge.purgeInterval, hours: retention also runs on this timer; 0 = only after each
    /// snapshot.
    pub purge_interval_hours: u32,
    /// The `conf` four-letter word's text.
    pub conf_text: String,
    /// `leaderServes`: whether the leader of an ensemble takes client connections.
    pub leader_serves: bool,
    /// `zkrs.keepClientsThroughElection`: whether a leader or learner leaving its role keeps
    /// its idle clients' connections (`core::kept`).
    pub keep_clients: bool,
    /// `readonlymode.enabled`: whether a server cut off from its quorum serves read-only clients.
    pub read_only_mode: bool,
    /// The AdminServer (`admin.*`), or `None` when `admin.enableServer=false`.
    pub admin: Option<AdminSettings>,
    /// Where the Prometheus `/metrics` endpoint listens (`metricsProvider.httpHost`,
    /// `metricsProvider.httpPort`), when `metricsProvider.className` names Apache's
    /// `PrometheusMetricsProvider`.
    pub metrics_addr: Option<SocketAddr>,
    /// Requests answered this long after they arrived (or longer) are logged; `None` = off
    /// (`slowRequestThresholdMs`).
    pub slow_request: Option<std::time::Duration>,
    /// The memory brake's soft limit on the tree's accounted bytes
    /// (`zkrs.treeMemorySoftLimitBytes`; 0 = off), handed to zk-tree as
    /// `TreeConfig::memory_soft_limit_bytes`.
    pub tree_memory_soft_limit_bytes: u64,
    /// The counter a leader starts each new epoch's zxids at (`testingonly.initialZxid`, for
    /// tests; 0 when unset).
    pub initial_zxid_counter: u32,
    /// The zoo.cfg's text as read at start-up (the `initial_configuration` command), its
    /// passwords replaced by `***` ([`redact_passwords`]), or `None` when the server started from
    /// its embedded defaults.
    pub initial_config: Option<String>,
    /// The archive the server archives into by itself (`zkrs.backup.*`), or `None`.
    pub backup: Option<crate::backup::continuous::BackupSettings>,
}

/// `text` (a zoo.cfg) with the value of every key ending in "password" (any case: the
/// `ssl.*.password` keys and the like) replaced by `***`, the rule Apache 3.9 applies to the
/// configuration it logs (CVE-2026-24308). Apache's `initial_configuration` still shows the file
/// as it is; zkrs shows it redacted, so that no HTTP client reads a key store's password.
pub fn redact_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let ending = &line[body.len()..];
        let trimmed = body.trim_start();
        let sep = trimmed.find(['=', ':']);
        match sep {
            Some(at)
                if !trimmed.starts_with(['#', '!'])
                    && trimmed[..at].trim_end().to_ascii_lowercase().ends_with("password") =>
            {
                let key_end = body.len() - trimmed.len() + at;
                out.push_str(&body[..=key_end]);
                out.push_str("***");
                out.push_str(ending);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Where and how the AdminServer serves.
#[derive(Debug, Clone)]
pub struct AdminSettings {
    /// `admin.serverAddress` and `admin.serverPort`.
    pub addr: SocketAddr,
    /// `admin.commandURL`, without a trailing `/`.
    pub command_url: String,
    /// `admin.idleTimeout`: how long a connection may take to send a request's headers, and
    /// (with HTTPS) to finish its TLS handshake.
    pub idle_timeout: std::time::Duration,
    /// HTTPS (`admin.forceHttps`, `admin.portUnification`), or `None` for plain HTTP only.
    pub tls: Option<std::sync::Arc<crate::admin::https::AdminTls>>,
    /// The REST data API (`admin.restApi.enabled`), or `None` when it is off.
    pub rest: Option<RestApi>,
    /// Apache 3.9's `snapshot` command is served (`admin.snapshot.enabled`).
    pub snapshot_enabled: bool,
    /// At most one `snapshot` per this long (`admin.rateLimiterIntervalInMS`), and one
    /// `restore`.
    pub rate_limiter_interval: std::time::Duration,
    /// Apache 3.9's `restore` command is served (`admin.restore.enabled`).
    pub restore_enabled: bool,
    /// The largest snapshot `restore` takes (`admin.restore.maxBytes`).
    pub restore_max_bytes: u64,
}

/// The REST data API's settings (`admin.restApi.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestApi {
    /// `admin.restApi.writable`: `POST`, `PUT` and `DELETE` are served.
    pub writable: bool,
}

/// The `metricsProvider.className` that turns on the Prometheus endpoint.
pub const PROMETHEUS_PROVIDER: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";

/// `host` and `port` as a socket address: an IP literal, or a name resolved once now.
fn resolve(key: &str, host: &str, port: u16) -> Result<SocketAddr, String> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{key}: cannot resolve host {host}"))
}

/// The AdminServer's and the metrics endpoint's settings from the parsed configuration.
fn http_endpoints(
    cfg: &crate::config::ServerConfig,
) -> Result<(Option<AdminSettings>, Option<SocketAddr>), String> {
    let admin = if cfg.admin_enable_server {
        let addr = resolve("admin.serverAddress", &cfg.admin_server_address, cfg.admin_server_port)?;
        let mut url = cfg.admin_command_url.trim_end_matches('/').to_string();
        if !url.starts_with('/') {
            url.insert(0, '/');
        }
        let idle_timeout = std::time::Duration::from_millis(cfg.admin_idle_timeout_ms.into());
        let tls = crate::admin::https::AdminTls::load(cfg)?.map(std::sync::Arc::new);
        let rest = cfg.admin_rest_api_enabled.then_some(RestApi { writable: cfg.admin_rest_api_writable });
        if cfg.admin_rest_api_writable && !cfg.admin_rest_api_enabled {
            tracing::warn!(
                "admin.restApi.writable=true without admin.restApi.enabled=true: no REST API is served"
            );
        }
        Some(AdminSettings {
            addr,
            command_url: url,
            idle_timeout,
            tls,
            rest,
            snapshot_enabled: cfg.admin_snapshot_enabled,
            rate_limiter_interval: std::time::Duration::from_millis(cfg.admin_rate_limiter_interval_ms),
            restore_enabled: cfg.admin_restore_enabled,
            restore_max_bytes: cfg.admin_restore_max_bytes,
        })
    } else {
        None
    };
    let metrics = if cfg.metrics_provider_class_name == PROMETHEUS_PROVIDER {
        let host = cfg.metrics_provider.get("httpHost").map_or("0.0.0.0", String::as_str);
        let port = match cfg.metrics_provider.get("httpPort") {
            None => 7000,
            Some(p) => {
                p.trim().parse::<u16>().map_err(|_| format!("metricsProvider.httpPort={p}: not a port"))?
            }
        };
        Some(resolve("metricsProvider.httpHost", host, port)?)
    } else {
        None
    };
    Ok((admin, metrics))
}

impl Settings {
    /// Whether `cmd` may be answered.
    pub fn four_letter_allowed(&self, cmd: &str) -> bool {
        match &self.four_letter_words {
            None => !crate::config::EXPLICIT_FOUR_LETTER_WORDS.contains(&cmd),
            Some(set) => set.contains(cmd),
        }
    }

    /// The listen backlog the client ports are bound with: `clientPortListenBacklog` when set
    /// above zero, else the most the system allows (Linux caps a larger request at
    /// `net.core.somaxconn`, 4096 by default). The kernel completes the connections the server
    /// has not accepted yet up to the backlog; past it, it drops their handshakes and each
    /// client waits a second or more to try again. After an election thousands of clients
    /// reconnect to the survivors at once (ZOOKEEPER-1049's storm), so the default is the
    /// largest queue rather than a small fixed one.
    pub fn listen_backlog(&self) -> u32 {
        u32::try_from(self.client_port_listen_backlog).ok().filter(|&b| b > 0).unwrap_or(65_535)
    }

    /// Clamps a requested session timeout into [min, max], as Apache ZooKeeper negotiates.
    pub fn negotiate_timeout(&self, requested: i32) -> i32 {
        requested
            .clamp(self.min_session_timeout_ms, self.max_session_timeout_ms.max(self.min_session_timeout_ms))
    }
}

impl Settings {
    /// Resolves the settings of a standalone server from its parsed configuration.
    ///
    /// Errors name the key when the configuration asks for something a standalone zkrs cannot do.
    pub fn from_config(cfg: &crate::config::ServerConfig) -> Result<Settings, String> {
        let client_addr = match &cfg.client_address {
            Some(hp) if hp.host.is_empty() => {
                Some(SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), hp.port))
            }
            // A host name is resolved once, as Apache does at start-up.
            Some(hp) => Some(resolve("clientPortAddress", &hp.host, hp.port)?),
            None => None,
        };
        let status = crate::config::ConfStatus {
            client_port: client_addr.map(|a| a.port()),
            snap_dir_bytes: crate::config::directory_size_bytes(&cfg.snap_dir()),
            log_dir_bytes: crate::config::directory_size_bytes(&cfg.log_dir()),
        };
        let (admin, metrics_addr) = http_endpoints(cfg)?;
        let secure_client_addr = match &cfg.secure_client_address {
            Some(hp) if hp.host.is_empty() => {
                Some(SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), hp.port))
            }
            Some(hp) => Some(resolve("secureClientPortAddress", &hp.host, hp.port)?),
            None => None,
        };
        if client_addr.is_none() && secure_client_addr.is_none() {
            return Err("clientPort is not set: a standalone server needs it or secureClientPort".into());
        }
        let tls = if cfg.ssl.wanted(secure_client_addr.is_some()) {
            Some(std::sync::Arc::new(crate::tls::ServerTls::load(&cfg.ssl, cfg.config_file.as_deref())?))
        } else {
            None
        };
        let x509_enabled = cfg.ssl.x509_enabled(cfg.secure_client_address.is_some());
        let sasl =
            crate::sasl_config::SaslSettings::resolve(&cfg.sasl, &|v| std::env::var(v).ok(), x509_enabled)?;
        let initial_config = cfg
            .config_file
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|t| redact_passwords(&t));
        Ok(Settings {
            admin,
            metrics_addr,
            initial_config,
            backup: cfg.backup_to.as_ref().map(|to| crate::backup::continuous::BackupSettings {
                to: to.clone(),
                interval: std::time::Duration::from_millis(cfg.backup_interval_ms),
                hold_max_bytes: cfg.backup_hold_max_bytes,
            }),
            slow_request: (cfg.slow_request_threshold_ms > 0)
                .then(|| std::time::Duration::from_millis(cfg.slow_request_threshold_ms.into())),
            tree_memory_soft_limit_bytes: cfg.tree_memory_soft_limit_bytes,
            initial_zxid_counter: cfg.initial_zxid_counter.unwrap_or(0),
            client_addr,
            secure_client_addr,
            client_port_listen_backlog: cfg.client_port_listen_backlog,
            tls,
            port_unification: cfg.ssl.port_unification,
            x509_enabled,
            sasl,
            x509_super_user: cfg.ssl.x509_super_user.clone(),
            tick_ms: cfg.tick_time_ms as i64,
            min_session_timeout_ms: cfg.min_session_timeout_ms.min(i32::MAX as u32) as i32,
            max_session_timeout_ms: cfg.max_session_timeout_ms.min(i32::MAX as u32) as i32,
            max_frame: cfg.jute_max_buffer,
            max_client_cnxns: cfg.max_client_cnxns.max(0) as u32,
            max_cnxns: cfg.max_cnxns.max(0) as u32,
            sessionless_cnxn_timeout: std::time::Duration::from_millis(
                cfg.sessionless_cnxn_timeout_ms.into(),
            ),
            global_outstanding_limit: cfg.global_outstanding_limit.max(1),
            four_letter_words: if cfg.four_letter_words.contains("*") {
                None
            } else {
                Some(cfg.four_letter_words.iter().cloned().collect())
            },
            extended_types_enabled: cfg.extended_types_enabled,
            digest_enabled: cfg.digest_enabled,
            super_digest: cfg.super_digest.clone(),
            container_check_interval_ms: cfg.container_check_interval_ms as u64,
            container_max_per_minute: cfg.container_max_per_minute,
            container_max_never_used_ms: cfg.container_max_never_used_interval_ms.min(i64::MAX as u64) as i64,
            data_dir: cfg.snap_dir(),
            data_log_dir: cfg.log_dir(),
            snap_root: cfg.data_dir.clone(),
            log_root: cfg.data_log_dir.clone(),
            prealloc_bytes: cfg.pre_alloc_size_kb.saturating_mul(1024).max(4096),
            snap_count: u64::from(cfg.snap_count),
            snap_size_bytes: u64::try_from(cfg.snap_size_limit_kb).unwrap_or(0).saturating_mul(1024),
            snapshot_write_bytes_per_second: u64::from(cfg.snapshot_write_mb_per_second) * 1_000_000,
            snapshot_idle_ms: u64::from(cfg.snapshot_idle_seconds) * 1000,
            snapshot_min_request_interval_ms: u64::from(cfg.snapshot_min_request_interval_seconds) * 1000,
            snapshot_compression: match cfg.snapshot_compression {
                zk_log::snapshot::Codec::None => zk_log::snapshot::Compression::None,
                zk_log::snapshot::Codec::Zstd => {
                    zk_log::snapshot::Compression::Zstd { level: cfg.snapshot_compression_level }
                }
            },
            txn_log_append_mode: cfg.txn_log_append_mode,
            snap_retain_count: cfg.snap_retain_count,
            purge_interval_hours: cfg.purge_interval_hours,
            conf_text: cfg.conf_text(&status),
            leader_serves: cfg.leader_serves,
            keep_clients: cfg.keep_clients_through_election,
            read_only_mode: cfg.read_only_mode_enabled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::redact_passwords;

    #[test]
    fn passwords_are_redacted_and_the_rest_kept() {
        let cfg = "tickTime=2000\nssl.keyStore.password=s3cret\r\n  ssl.quorum.trustStore.Password = x:y\n\
                   # ssl.keyStore.password=commented\nmetricsProvider.passwordPath=/p\nsome.password:colon";
        assert_eq!(
            redact_passwords(cfg),
            "tickTime=2000\nssl.keyStore.password=***\r\n  ssl.quorum.trustStore.Password =***\n\
             # ssl.keyStore.password=commented\nmetricsProvider.passwordPath=/p\nsome.password:***"
        );
    }
}
