//! A double barrier: nobody starts until `count` members have entered, nobody finishes until
//! all have left.
//!
//! Members are ephemeral children of the barrier node, named by the caller; a persistent child
//! `ready` marks that enough have entered. Leaving follows ZooKeeper's recipe: the lowest member
//! waits for the highest, every other member deletes itself and waits for the lowest, so each
//! waits on one node. A member whose session dies is removed by the server, so a crashed member
//! does not hold the others forever on leave (it does hold them on enter until enough arrive).

use super::ensure_path;
use crate::{acl, Client, CreateMode, Error, Result};

const READY: &str = "ready";

/// One member's view of a double barrier. One round per barrier node: start a new round on a
/// new path.
#[derive(Debug, Clone)]
pub struct DoubleBarrier {
    client: Client,
    path: String,
    name: String,
    count: usize,
}

impl DoubleBarrier {
    /// Member `name` (unique among the members; not "ready") of the barrier at `path` for `count`
    /// members.
    pub fn new(client: &Client, path: &str, name: &str, count: usize) -> DoubleBarrier {
        DoubleBarrier {
            client: client.clone(),
            path: path.to_owned(),
            name: name.to_owned(),
            count: count.max(1),
        }
    }

    async fn members(&self) -> Result<Vec<String>> {
        let mut m: Vec<String> =
            self.client.get_children(&self.path).await?.into_iter().filter(|k| k != READY).collect();
        m.sort();
        Ok(m)
    }

    /// Joins and waits until `count` members have joined. Errors: BADARGUMENTS for the name
    /// "ready", NODEEXISTS if another session uses this name, SESSIONEXPIRED, CONNECTIONLOSS.
    pub async fn enter(&self) -> Result<()> {
        if self.name == READY || self.name.contains('/') {
            return Err(Error::BadArguments);
        }
        ensure_path(&self.client, &self.path).await?;
        let me = format!("{}/{}", self.path, self.name);
        match self.client.create(&me, b"", &acl::open_unsafe(), CreateMode::Ephemeral).await {
            Ok(_) => {}
            Err(Error::NodeExists) => {
                // Ours if an earlier attempt was lost to CONNECTIONLOSS.
                let st = self.client.exists(&me).await?;
                if st.map(|s| s.ephemeral_owner) != Some(self.client.session_id()) {
                    return Err(Error::NodeExists);
                }
            }
            Err(e) => return Err(e),
        }
        let ready = format!("{}/{READY}", self.path);
        loop {
            // Watch first, then count: a ready node created in between still fires the watch.
            let (st, w) = self.client.exists_w(&ready).await?;
            if st.is_some() {
                return Ok(());
            }
            if self.members().await?.len() >= self.count {
                match self.client.create(&ready, b"", &acl::open_unsafe(), CreateMode::Persistent).await {
                    Ok(_) | Err(Error::NodeExists) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            w.await?;
        }
    }

    /// Leaves and waits until every member has left. Errors: SESSIONEXPIRED, CONNECTIONLOSS.
    pub async fn leave(&self) -> Result<()> {
        let me = format!("{}/{}", self.path, self.name);
        loop {
            let m = self.members().await?;
            let mine = m.iter().position(|k| *k == self.name);
            let wait_on = match (mine, m.len()) {
                (_, 0) => break,
                (Some(_), 1) => {
                    self.delete_own(&me).await?;
                    break;
                }
                // Lowest: wait for the highest to go.
                (Some(0), _) => m.last().cloned(),
                // Others: leave now, then wait for the lowest.
                (Some(_), _) => {
                    self.delete_own(&me).await?;
                    m.first().cloned()
                }
                (None, _) => m.first().cloned(),
            };
            let Some(other) = wait_on else { break };
            if let (Some(_), w) = self.client.exists_w(&format!("{}/{other}", self.path)).await? {
                w.await?;
            }
        }
        // Last out: tidy up the marker (best effort; another member may have done it).
        match self.client.delete(&format!("{}/{READY}", self.path), -1).await {
            Ok(()) | Err(Error::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn delete_own(&self, me: &str) -> Result<()> {
        match self.client.delete(me, -1).await {
            Ok(()) | Err(Error::NoNode) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
