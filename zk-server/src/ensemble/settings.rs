//! An ensemble member's settings, resolved from zoo.cfg.

use super::peer_tls::PeerTls;
use crate::config::{PeerType, ServerConfig};
use crate::node::ReplicaConfig;
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use zk_quorum::config::QuorumConfig;
use zk_tree::TreeConfig;

/// How this server's sockets are placed in its ensemble.
#[derive(Debug, Clone)]
pub struct EnsembleSettings {
    /// myid.
    pub my_sid: i64,
    /// The node's part of the settings.
    pub replica: ReplicaConfig,
    /// Where this server's election port listens.
    pub election_listen: SocketAddr,
    /// Every other server's election address.
    pub election_peers: HashMap<i64, SocketAddr>,
    /// Where this server's quorum port listens (it accepts learners while it leads).
    pub quorum_listen: SocketAddr,
    /// Every server's quorum address.
    pub quorum_addrs: HashMap<i64, SocketAddr>,
    /// The largest quorum packet accepted.
    pub max_packet: usize,
    /// How a database received by SNAP is set up.
    pub tree_cfg: TreeConfig,
    /// `cnxTimeout`: the longest an election connection may take to open and shake hands.
    pub cnx_timeout: Duration,
    /// The zoo.cfg this server started from: an activated configuration is written beside it
    /// (`zoo.cfg.dynamic.<version>`) and zoo.cfg then names that file, as Apache does.
    pub config_file: Option<std::path::PathBuf>,
    /// TLS between members (`sslQuorum`, `portUnification`); None: plain only.
    pub tls: Option<Arc<PeerTls>>,
    /// SASL between members (`quorum.auth.enableSasl`); None: off.
    pub sasl: Option<Arc<crate::sasl_config::QuorumSasl>>,
}

/// initLimit in ms: how long a learner has to connect and sync, and a dial to connect.
pub(super) fn init_limit(s: &EnsembleSettings) -> u64 {
    s.replica.tick_ms * s.replica.init_limit.max(1)
}

/// The first address `host:port` resolves to; the error names `what` (the zoo.cfg key).
pub(super) fn resolve(host: &str, port: u16, what: &str) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{what}: cannot resolve host {host}"))
}

impl EnsembleSettings {
    /// Resolves this server's place in the ensemble `cfg` lists.
    ///
    /// Errors name the key: no myid, an unresolvable host, a configuration zk-quorum cannot
    /// read.
    pub fn from_config(cfg: &ServerConfig, tree_cfg: TreeConfig) -> Result<EnsembleSettings, String> {
        let my_id =
            cfg.my_id.ok_or("myid: the myid file is required when server.N lines list an ensemble")?;
        let me = cfg.servers.get(&my_id).ok_or_else(|| {
            cfg.not_in_peer_list().unwrap_or_else(|| format!("myid {my_id} is not in the peer list"))
        })?;
        // The configuration as Apache writes it into notifications and NEWLEADER.
        let mut lines = Vec::new();
        for s in cfg.servers.values() {
            let kind = if s.peer_type == PeerType::Observer { "observer" } else { "participant" };
            let mut line = format!("server.{}={}:{}:{}:{kind}", s.id, s.host, s.quorum_port, s.election_port);
            if let Some(c) = &s.client {
                let host = if c.host.is_empty() { "0.0.0.0" } else { c.host.as_str() };
                line.push_str(&format!(";{host}:{}", c.port));
            }
            lines.push(line);
        }
        for (g, members) in &cfg.groups {
            let m: Vec<String> = members.iter().map(u64::to_string).collect();
            lines.push(format!("group.{g}={}", m.join(":")));
        }
        for (sid, w) in &cfg.weights {
            lines.push(format!("weight.{sid}={w}"));
        }
        lines.push(format!("version={:x}", cfg.dynamic_config_version.unwrap_or(0)));
        let config = QuorumConfig::parse(&lines.join("\n")).map_err(|e| format!("server.N: {e}"))?;
        let mut election_peers = HashMap::new();
        let mut quorum_addrs = HashMap::new();
        for s in cfg.servers.values() {
            let sid = s.id as i64;
            quorum_addrs.insert(sid, resolve(&s.host, s.quorum_port, &format!("server.{}", s.id))?);
            if s.id != my_id {
                election_peers.insert(sid, resolve(&s.host, s.election_port, &format!("server.{}", s.id))?);
            }
        }
        let mine = |port: u16| -> Result<SocketAddr, String> {
            if cfg.quorum_listen_on_all_ips {
                Ok(SocketAddr::from(([0, 0, 0, 0], port)))
            } else {
                resolve(&me.host, port, &format!("server.{my_id}"))
            }
        };
        Ok(EnsembleSettings {
            my_sid: my_id as i64,
            replica: ReplicaConfig {
                my_sid: my_id as i64,
                config,
                observer: me.peer_type == PeerType::Observer,
                tick_ms: u64::from(cfg.tick_time_ms),
                init_limit: u64::from(cfg.init_limit),
                sync_limit: u64::from(cfg.sync_limit),
                committed_log_max: cfg.commit_log_count as usize,
                read_only_mode: cfg.read_only_mode_enabled,
                reconfig_enabled: cfg.reconfig_enabled,
                standalone_enabled: cfg.standalone_enabled,
                snap_step_items: crate::node::replica::SNAP_STEP_ITEMS,
                sync_piece_bytes: zk_quorum::zab::DEFAULT_SYNC_PIECE_BYTES,
                sync_piece_packets: zk_quorum::zab::DEFAULT_SYNC_PIECE_PACKETS,
            },
            election_listen: mine(me.election_port)?,
            election_peers,
            quorum_listen: mine(me.quorum_port)?,
            quorum_addrs,
            max_packet: cfg.jute_max_buffer as usize + 1024,
            tree_cfg,
            cnx_timeout: std::time::Duration::from_millis(u64::from(cfg.cnx_timeout_ms)),
            config_file: cfg.config_file.clone(),
            tls: super::peer_tls::PeerTls::load(cfg)?,
            sasl: crate::sasl_config::QuorumSasl::resolve(&cfg.sasl, &|v| std::env::var(v).ok())?.map(
                |mut sasl| {
                    // The members' hosts as the server.N lines spell them (Apache's view at
                    // start-up): for `_HOST`, and the hosts Kerberos learners may come from.
                    sasl.hosts = cfg.servers.values().map(|s| (s.id as i64, s.host.clone())).collect();
                    std::sync::Arc::new(sasl)
                },
            ),
        })
    }
}
