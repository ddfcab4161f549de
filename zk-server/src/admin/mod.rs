//! The operations surface over HTTP: Apache ZooKeeper's AdminServer (`admin.*`: JSON commands
//! under `admin.commandURL`, plus `/ready`; over HTTPS too, [`https`]), and the Prometheus
//! endpoint (`/metrics` on `metricsProvider.httpPort`, plain HTTP).
//!
//! Both are edge code: the HTTP servers ([`http`]) ask the driver for what they show with a
//! [`DriverMsg::Admin`](crate::driver::DriverMsg::Admin) message, as the four-letter words do, and
//! the driver renders the answer from the core's view ([`commands`], [`metrics`]).

pub mod commands;
pub mod http;
pub mod https;
pub mod metrics;

use crate::fourlw::MntrValue;
use serde_json::{json, Map, Value};
use zk_quorum::config::{LearnerType, QuorumConfig};

/// What an HTTP request asks the driver for.
#[derive(Debug)]
pub enum AdminAsk {
    /// An AdminServer command by name or alias, with the query's `key=value` pairs.
    Command {
        /// The name in the URL.
        name: String,
        /// The query string's pairs.
        args: Vec<(String, String)>,
    },
    /// Whether the server serves (`/ready`).
    Ready,
    /// The figures `/metrics` exports (those of `mntr`).
    Metrics,
}

/// The driver's answer to an [`AdminAsk`].
#[derive(Debug)]
pub enum AdminReply {
    /// A command's JSON.
    Json(Value),
    /// Readiness.
    Ready(Readiness),
    /// `mntr`'s figures and the rest of what `/metrics` exports.
    Metrics(Vec<(String, MntrValue)>, Box<metrics::Figures>),
}

/// Whether the server serves clients, and in which role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// Serving clients read-write: standalone, or a leader (unless `leaderServes=no`) or learner
    /// of an established quorum.
    pub serving: bool,
    /// `standalone`, `leader`, `follower`, `observer`, `read-only` or `looking`.
    pub role: &'static str,
    /// Whether this server has an established leader (itself included).
    pub has_leader: bool,
}

impl Readiness {
    /// The `/ready` body, in ClickHouse Keeper's shape.
    pub fn body(&self) -> Value {
        json!({
            "status": if self.serving { "ok" } else { "fail" },
            "details": { "role": self.role, "hasLeader": self.has_leader },
        })
    }
}

/// An ensemble member's view of the ensemble, for `leader`, `voting_view` and `zabstate`.
#[derive(Debug, Clone)]
pub struct EnsembleView {
    /// myid.
    pub my_sid: i64,
    /// Whether this server leads an established quorum.
    pub leading: bool,
    /// The leader this server serves under (itself when leading), once known.
    pub leader_sid: Option<i64>,
    /// Whether this server is an observer.
    pub observer: bool,
    /// Apache's ZabState, lower case: `election`, `discovery`, `synchronization`, `broadcast`.
    pub zab_state: &'static str,
    /// The servers.
    pub config: QuorumConfig,
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl EnsembleView {
    /// The host of server `sid`'s first address.
    pub fn leader_host(&self, sid: i64) -> Option<String> {
        let spec = self.config.servers.get(&sid)?;
        spec.addresses.first().map(|a| host_port(&a.host, a.quorum_port))
    }

    /// `voting_view`'s `current_config`: every voter by sid. A server line without a client
    /// address shows none, except this server's own, which is where it listens (`own_client`),
    /// as in Apache.
    pub fn voting_view(&self, own_client: std::net::SocketAddr) -> Map<String, Value> {
        self.config
            .servers
            .values()
            .filter(|s| s.learner_type == LearnerType::Participant)
            .map(|s| {
                let view = json!({
                    "server_addresses":
                        s.addresses.iter().map(|a| host_port(&a.host, a.quorum_port)).collect::<Vec<_>>(),
                    "election_addresses":
                        s.addresses.iter().map(|a| host_port(&a.host, a.election_port)).collect::<Vec<_>>(),
                    "client_address": match &s.client {
                        Some(c) => host_port(&c.host, c.port),
                        None if s.sid == self.my_sid => host_port(&own_client.ip().to_string(), own_client.port()),
                        None => String::new(),
                    },
                    "learner_type": "participant",
                });
                (s.sid.to_string(), view)
            })
            .collect()
    }

    fn addresses(&self, port: impl Fn(&zk_quorum::config::ServerAddress) -> u16) -> Value {
        let addrs = self.config.servers.get(&self.my_sid).map(|s| s.addresses.as_slice()).unwrap_or_default();
        let all: Vec<String> = addrs.iter().map(|a| host_port(&a.host, port(a))).collect();
        let one = all.first().cloned().unwrap_or_default();
        // Apache's MultipleAddresses as Jackson writes it. A server's own addresses count as
        // reachable (Apache probes them; they are this process's).
        json!({
            "empty": addrs.is_empty(),
            "all_addresses": all,
            "all_reachable_addresses": all,
            "one": one,
            "reachable_address": one,
            "wildcard_addresses": addrs.iter().map(|a| host_port("0.0.0.0", port(a))).collect::<Vec<_>>(),
            "all_ports": addrs.iter().map(&port).collect::<Vec<_>>(),
            "all_host_strings": addrs.iter().map(|a| a.host.clone()).collect::<Vec<_>>(),
            "all_reachable_addresses_or_all": all,
            "reachable_or_one": one,
        })
    }

    /// `zabstate`'s `quorum_address` (Apache serializes its MultipleAddresses object).
    pub fn quorum_address(&self) -> Value {
        self.addresses(|a| a.quorum_port)
    }

    /// `zabstate`'s `election_address`.
    pub fn election_address(&self) -> Value {
        self.addresses(|a| a.election_port)
    }
}
