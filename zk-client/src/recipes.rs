//! Coordination recipes on the public API: locks (exclusive [`Lock`], shared [`RwLock`]), leader
//! election ([`Candidate`] with its paused state, [`SingleNodeElection`]), group membership
//! ([`Group`]), a configuration store ([`ConfigStore`]), a compare-and-set [`Counter`], unique IDs
//! ([`UniqueIdGenerator`], [`SequenceReservation`]), barriers ([`Barrier`], [`DoubleBarrier`]), a
//! [`DistributedQueue`], and [`RetryPolicy`].
//!
//! Failures they handle the way ZooKeeper's recipe documents describe:
//! - a create lost to a connection drop (CONNECTIONLOSS) may have happened: sequential nodes carry a
//!   per-instance random prefix so the recipe finds its own node instead of leaving an orphan;
//! - waiters watch only their predecessor (no herd effect when the holder leaves);
//! - SESSIONEXPIRED is returned to the caller, never retried: the session's ephemerals, and with
//!   them lock ownership or leadership, are gone.

use crate::{acl, Client, CreateMode, Error, Result};

mod config;
mod double_barrier;
mod election;
mod ids;
mod queue;
mod retry;
mod rwlock;

pub use config::{ConfigStore, ConfigWatcher};
pub use double_barrier::DoubleBarrier;
pub use election::{LeaderState, SingleNodeElection};
pub use ids::{SequenceIds, SequenceReservation, UniqueIdGenerator};
pub use queue::DistributedQueue;
pub use retry::{Idempotence, RetryPolicy};
pub use rwlock::RwLock;

/// Retries of a CONNECTIONLOSS before giving up; the client reconnects meanwhile.
const LOSS_RETRIES: u32 = 20;

fn random_guid() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The 10-digit sequence suffix ZooKeeper appends.
fn sequence(name: &str) -> &str {
    &name[name.len().saturating_sub(10)..]
}

async fn ensure_path(client: &Client, path: &str) -> Result<()> {
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        at.push('/');
        at.push_str(part);
        match client.create(&at, b"", &acl::open_unsafe(), CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits a little while the client reconnects, then lets the caller retry.
async fn after_loss(attempt: &mut u32) -> Result<()> {
    *attempt += 1;
    if *attempt > LOSS_RETRIES {
        return Err(Error::ConnectionLoss);
    }
    tokio::time::sleep(std::time::Duration::from_millis(100 * u64::from((*attempt).min(10)))).await;
    Ok(())
}

/// A queue of ephemeral-sequential nodes under `dir`: the lowest is first. Lock and election are
/// both this.
#[derive(Debug)]
struct Queue {
    client: Client,
    dir: String,
    /// "_c_<guid>-<tag>-": unique to this instance, so a lost create can be recognised.
    prefix: String,
    tag: String,
    node: Option<String>,
}

impl Queue {
    fn new(client: &Client, dir: &str, tag: &str) -> Queue {
        Queue {
            client: client.clone(),
            dir: dir.trim_end_matches('/').to_owned(),
            prefix: format!("_c_{}-{tag}-", random_guid()),
            tag: format!("-{tag}-"),
            node: None,
        }
    }

    async fn find_own(&self) -> Result<Option<String>> {
        let kids = self.client.get_children(&self.dir).await?;
        Ok(kids.into_iter().find(|k| k.starts_with(&self.prefix)))
    }

    async fn enqueue(&mut self, data: &[u8]) -> Result<String> {
        if let Some(n) = &self.node {
            return Ok(n.clone());
        }
        let mut attempt = 0;
        loop {
            let path = format!("{}/{}", self.dir, self.prefix);
            match self.client.create(&path, data, &acl::open_unsafe(), CreateMode::EphemeralSequential).await
            {
                Ok(p) => {
                    let name = p.rsplit('/').next().unwrap_or_default().to_owned();
                    self.node = Some(name.clone());
                    return Ok(name);
                }
                Err(Error::NoNode) => ensure_path(&self.client, &self.dir).await?,
                Err(Error::ConnectionLoss) => {
                    after_loss(&mut attempt).await?;
                    // The create may have happened: our prefix says which node is ours.
                    match self.find_own().await {
                        Ok(Some(name)) => {
                            self.node = Some(name.clone());
                            return Ok(name);
                        }
                        Ok(None) | Err(Error::ConnectionLoss) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sorted queue members and our position.
    async fn position(&self, me: &str) -> Result<(Vec<String>, Option<usize>)> {
        let mut kids: Vec<String> = self
            .client
            .get_children(&self.dir)
            .await?
            .into_iter()
            .filter(|k| k.contains(&self.tag))
            .collect();
        kids.sort_by(|a, b| sequence(a).cmp(sequence(b)));
        let pos = kids.iter().position(|k| k == me);
        Ok((kids, pos))
    }

    /// Waits until our node is the lowest. NONODE if our node vanished (session expired and was
    /// replaced, or someone deleted it).
    async fn wait_first(&mut self) -> Result<()> {
        let me = self.node.clone().ok_or(Error::NoNode)?;
        loop {
            let (kids, pos) = self.position(&me).await?;
            match pos {
                None => {
                    self.node = None;
                    return Err(Error::NoNode);
                }
                Some(0) => return Ok(()),
                Some(i) => {
                    let pred = format!("{}/{}", self.dir, kids[i - 1]);
                    match self.client.exists_w(&pred).await? {
                        (None, _) => continue,
                        (Some(_), w) => {
                            // Any event (deleted, or a removal) means: look again.
                            w.await?;
                        }
                    }
                }
            }
        }
    }

    async fn leave(&mut self) -> Result<()> {
        if let Some(n) = self.node.take() {
            match self.client.delete(&format!("{}/{n}", self.dir), -1).await {
                Ok(()) | Err(Error::NoNode) => {}
                Err(e) => {
                    self.node = Some(n);
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

/// An exclusive lock under a directory node: acquired by whoever holds the lowest
/// ephemeral-sequential node; each waiter watches only the node just before its own.
#[derive(Debug)]
pub struct Lock {
    q: Queue,
}

impl Lock {
    /// A lock under `dir` (created if missing).
    pub fn new(client: &Client, dir: &str) -> Lock {
        Lock { q: Queue::new(client, dir, "lock") }
    }

    /// Waits until this instance holds the lock. Errors: SESSIONEXPIRED (the lock is lost with the
    /// session), CONNECTIONLOSS after repeated failures, NONODE if our node was deleted by
    /// someone else.
    pub async fn acquire(&mut self) -> Result<()> {
        self.q.enqueue(b"").await?;
        self.q.wait_first().await
    }

    /// Releases the lock (or leaves the queue). Safe to call when not holding it.
    pub async fn release(&mut self) -> Result<()> {
        self.q.leave().await
    }

    /// The name of this instance's node, while it has one.
    pub fn node(&self) -> Option<&str> {
        self.q.node.as_deref()
    }
}

/// Leader election among candidates under a directory: the lowest candidate leads; the others each
/// watch the candidate just before them. Leadership lasts as long as the candidate's session.
#[derive(Debug)]
pub struct Candidate {
    q: Queue,
}

impl Candidate {
    /// A candidate under `dir` (created if missing).
    pub fn new(client: &Client, dir: &str) -> Candidate {
        Candidate { q: Queue::new(client, dir, "n") }
    }

    /// Joins the election with `data` (e.g. this process's address) and waits until leading.
    /// Errors as [`Lock::acquire`].
    pub async fn lead(&mut self, data: &[u8]) -> Result<()> {
        self.q.enqueue(data).await?;
        self.q.wait_first().await
    }

    /// Steps down (and leaves the election).
    pub async fn resign(&mut self) -> Result<()> {
        self.q.leave().await
    }

    /// The current leader's data, `None` when there is no candidate.
    pub async fn leader(client: &Client, dir: &str) -> Result<Option<bytes::Bytes>> {
        let kids = match client.get_children(dir).await {
            Ok(k) => k,
            // No election directory yet: nobody has stood.
            Err(Error::NoNode) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut kids: Vec<String> = kids.into_iter().filter(|k| k.contains("-n-")).collect();
        kids.sort_by(|a, b| sequence(a).cmp(sequence(b)));
        for k in kids {
            match client.get_data(&format!("{dir}/{k}")).await {
                Ok((d, _)) => return Ok(Some(d)),
                Err(Error::NoNode) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

/// A shared 64-bit counter in one node, updated by versioned compare-and-set.
#[derive(Debug, Clone)]
pub struct Counter {
    client: Client,
    path: String,
}

impl Counter {
    /// The counter stored at `path` (created at 0 on first use).
    pub fn new(client: &Client, path: &str) -> Counter {
        Counter { client: client.clone(), path: path.to_owned() }
    }

    /// The current value. MARSHALLINGERROR if the node holds something other than a decimal i64.
    pub async fn get(&self) -> Result<i64> {
        match self.client.get_data(&self.path).await {
            Ok((d, _)) => parse(&d),
            Err(Error::NoNode) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Adds `delta` and returns the new value, retrying on concurrent updates (BADVERSION). A
    /// CONNECTIONLOSS is returned rather than retried: the update may have been applied, and
    /// retrying a non-idempotent write could apply it twice.
    pub async fn add(&self, delta: i64) -> Result<i64> {
        loop {
            let (cur, version) = match self.client.get_data(&self.path).await {
                Ok((d, st)) => (parse(&d)?, st.version),
                Err(Error::NoNode) => {
                    match self
                        .client
                        .create(&self.path, b"0", &acl::open_unsafe(), CreateMode::Persistent)
                        .await
                    {
                        Ok(_) | Err(Error::NodeExists) => continue,
                        Err(Error::NoNode) => {
                            let parent = zk_proto::path::parent(&self.path).to_owned();
                            ensure_path(&self.client, &parent).await?;
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            let next = cur.checked_add(delta).ok_or(Error::BadArguments)?;
            match self.client.set_data(&self.path, next.to_string().as_bytes(), version).await {
                Ok(_) => return Ok(next),
                Err(Error::BadVersion) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

fn parse(d: &[u8]) -> Result<i64> {
    if d.is_empty() {
        return Ok(0);
    }
    std::str::from_utf8(d).ok().and_then(|s| s.trim().parse().ok()).ok_or(Error::MarshallingError)
}

/// A barrier: a node that, while it exists, holds everyone who waits on it.
#[derive(Debug, Clone)]
pub struct Barrier {
    client: Client,
    path: String,
}

impl Barrier {
    /// The barrier at `path`.
    pub fn new(client: &Client, path: &str) -> Barrier {
        Barrier { client: client.clone(), path: path.to_owned() }
    }

    /// Raises the barrier (creates the node; already raised is fine).
    pub async fn raise(&self) -> Result<()> {
        match self.client.create(&self.path, b"", &acl::open_unsafe(), CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Lowers the barrier, releasing every waiter.
    pub async fn lower(&self) -> Result<()> {
        match self.client.delete(&self.path, -1).await {
            Ok(()) | Err(Error::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Returns once the barrier is down.
    pub async fn wait(&self) -> Result<()> {
        loop {
            match self.client.exists_w(&self.path).await? {
                (None, _) => return Ok(()),
                (Some(_), w) => {
                    w.await?;
                }
            }
        }
    }
}

/// Group membership: each member is an ephemeral child of the group node, gone with its session.
#[derive(Debug, Clone)]
pub struct Group {
    client: Client,
    path: String,
}

impl Group {
    /// The group at `path` (created on first join).
    pub fn new(client: &Client, path: &str) -> Group {
        Group { client: client.clone(), path: path.to_owned() }
    }

    /// Joins as `member` with `data`. NODEEXISTS if the name is taken.
    pub async fn join(&self, member: &str, data: &[u8]) -> Result<()> {
        ensure_path(&self.client, &self.path).await?;
        let p = format!("{}/{member}", self.path);
        self.client.create(&p, data, &acl::open_unsafe(), CreateMode::Ephemeral).await.map(|_| ())
    }

    /// Leaves the group.
    pub async fn leave(&self, member: &str) -> Result<()> {
        match self.client.delete(&format!("{}/{member}", self.path), -1).await {
            Ok(()) | Err(Error::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Current members, sorted.
    pub async fn members(&self) -> Result<Vec<String>> {
        let mut m = self.client.get_children(&self.path).await?;
        m.sort();
        Ok(m)
    }

    /// Current members and a watch that fires on the next change.
    pub async fn members_w(&self) -> Result<(Vec<String>, crate::Watch)> {
        let (mut m, w) = self.client.get_children_w(&self.path).await?;
        m.sort();
        Ok((m, w))
    }
}
