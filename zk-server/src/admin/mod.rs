//! The operations surface over HTTP: Apache ZooKeeper's AdminServer (`admin.*`: JSON commands
//! under `admin.commandURL`, plus `/ready`; over HTTPS too, [`https`]), and the Prometheus
//! endpoint (`/metrics` on `metricsProvider.httpPort`, plain HTTP).
//!
//! Both are edge code: the HTTP servers ([`http`]) ask the driver for what they show with a
//! [`DriverMsg::Admin`](crate::driver::DriverMsg::Admin) message, as the four-letter words do, and
//! the driver renders the answer from the server's read model ([`crate::view`]) with
//! [`commands`] and [`metrics`].
//!
//! With `admin.restApi.enabled` the AdminServer also serves the REST data API ([`rest`]), whose
//! requests run on internal client sessions ([`session`]) through the same connection code and
//! core as the client port's, and the operator's console ([`console`]) that uses both, plus its
//! own read-only JSON: the ensemble's members ([`members`]) and the sessions with their watches
//! ([`session_list`]); the REST API's search by path is [`search`].

pub mod commands;
pub mod console;
pub mod http;
pub mod https;
pub mod members;
pub mod metrics;
pub mod rest;
pub mod restore;
pub mod search;
pub mod session;
pub mod session_list;
pub mod snapshot;

use crate::view::MntrValue;
use serde_json::{json, Value};

// The ensemble's part of the read model, under the path the quorum glue still names it by.

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
    /// The members to ask for the console's ensemble view, and this server's own figures.
    Ensemble,
    /// A page of the console's sessions view.
    Sessions(session_list::Page),
    /// Whether the caller's credentials hold every bit of `perm` on `/` (Apache 3.9's check for
    /// `snapshot` and `restore`, bit by bit since CVE-2025-58457); `None`: the caller gave
    /// none the server takes.
    Authorize {
        /// What the `Authorization` header proved.
        credentials: Option<snapshot::Credentials>,
        /// The permission bits needed.
        perm: i32,
        /// Check against the tree this server holds even while it serves nobody (forced
        /// recovery, asked for when no quorum serves); otherwise such a server answers
        /// [`snapshot::Authorization::NotServing`].
        even_not_serving: bool,
    },
    /// Take a snapshot now, unless one is under way (`csnp`'s request).
    SnapshotNow,
    /// Whether a copy of the tree fits under the memory brake now
    /// ([`crate::core::ServerCore::tree_copy_fits`]).
    CopyFits,
    /// What a restore's snapshot is decoded with: the tree's settings, if this server keeps
    /// snapshots, and whether a second tree fits under the memory brake.
    RestoreConfig,
    /// Restore the tree from `db` (the AdminServer's `restore`).
    Restore {
        /// The tree decoded from the snapshot sent.
        db: Box<zk_tree::Database>,
    },
    /// Where the last restore stands.
    RestoreStatus,
    /// Where the snapshots stand.
    SnapshotStatus,
    /// What to rebuild a consistent copy of the tree from, off the driver's thread, for a
    /// snapshot started in serving term `generation` (as [`AdminReply::Snapshot`] gave it).
    SnapshotSource {
        /// The serving term the snapshot started in.
        generation: u64,
    },
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
    /// The ensemble view's plan.
    Ensemble(Box<members::EnsemblePlan>),
    /// The answer to [`AdminAsk::Authorize`].
    Authorization(snapshot::Authorization),
    /// The answer to [`AdminAsk::SnapshotNow`], and the serving term it was given in
    /// ([`crate::core::ServerCore::serving_generation`]; `None` when not serving).
    Snapshot(crate::view::SnapshotAnswer, Option<u64>),
    /// The answer to [`AdminAsk::CopyFits`].
    CopyFits(bool),
    /// The answer to [`AdminAsk::RestoreConfig`].
    RestoreConfig(Option<zk_tree::TreeConfig>, bool),
    /// The answer to [`AdminAsk::Restore`] and [`AdminAsk::RestoreStatus`]: the core's answer
    /// (none once a final one was taken). `Restored` comes once the restored tree is durable.
    Restore(Option<crate::view::RestoreAnswer>),
    /// The answer to [`AdminAsk::SnapshotStatus`]: `None` without a snapshot thread.
    SnapshotStatus(Option<crate::core::SnapshotStatus>),
    /// The answer to [`AdminAsk::SnapshotSource`], or why there is none (this server keeps no
    /// snapshots, it is not serving, or it changed its role since the snapshot started).
    SnapshotSource(Result<Box<snapshot::ConsistentSource>, snapshot::SourceRefused>),
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
