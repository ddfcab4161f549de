//! A shared read/write lock: readers share it, a writer holds it alone.
//!
//! Each request is an ephemeral-sequential node `_c_<guid>-read-N` or `_c_<guid>-write-N` under
//! the lock directory. A reader waits only for the last writer queued before it; a writer waits
//! for whichever node is just before it. Each waits on that one node (no herd effect). The
//! per-instance guid lets a create lost to CONNECTIONLOSS be found again.

use super::{after_loss, ensure_path, random_guid, sequence};
use crate::{acl, Client, CreateMode, Error, Result};

const READ: &str = "-read-";
const WRITE: &str = "-write-";

/// A read/write lock under a directory node (created if missing). One instance holds at most
/// one request at a time.
#[derive(Debug)]
pub struct RwLock {
    client: Client,
    dir: String,
    guid: String,
    node: Option<String>,
}

impl RwLock {
    /// The lock under `dir`.
    pub fn new(client: &Client, dir: &str) -> RwLock {
        RwLock {
            client: client.clone(),
            dir: dir.trim_end_matches('/').to_owned(),
            guid: format!("_c_{}", random_guid()),
            node: None,
        }
    }

    /// Waits until this instance shares the lock with other readers (no writer ahead of it).
    /// Errors: SESSIONEXPIRED (the request died with the session), CONNECTIONLOSS after
    /// repeated failures, NONODE if the request node was deleted by someone else, BADARGUMENTS
    /// if this instance already holds or waits for the lock.
    pub async fn read_lock(&mut self) -> Result<()> {
        self.lock(READ).await
    }

    /// Waits until this instance holds the lock alone. Errors as [`RwLock::read_lock`].
    pub async fn write_lock(&mut self) -> Result<()> {
        self.lock(WRITE).await
    }

    /// Releases the lock or withdraws the request; nothing to do when not holding it.
    pub async fn unlock(&mut self) -> Result<()> {
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

    async fn lock(&mut self, kind: &str) -> Result<()> {
        if self.node.is_some() {
            return Err(Error::BadArguments);
        }
        let me = self.enqueue(kind).await?;
        match self.wait(&me, kind == WRITE).await {
            Ok(()) => Ok(()),
            Err(e) => {
                // Leave no request behind to block others (unless the session is gone anyway).
                if e != Error::SessionExpired {
                    let _ = self.unlock().await;
                }
                self.node = None;
                Err(e)
            }
        }
    }

    async fn enqueue(&mut self, kind: &str) -> Result<String> {
        let prefix = format!("{}{kind}", self.guid);
        let mut attempt = 0;
        loop {
            let path = format!("{}/{prefix}", self.dir);
            match self.client.create(&path, b"", &acl::open_unsafe(), CreateMode::EphemeralSequential).await {
                Ok(p) => {
                    let name = p.rsplit('/').next().unwrap_or_default().to_owned();
                    self.node = Some(name.clone());
                    return Ok(name);
                }
                Err(Error::NoNode) => ensure_path(&self.client, &self.dir).await?,
                Err(Error::ConnectionLoss) => {
                    after_loss(&mut attempt).await?;
                    match self.client.get_children(&self.dir).await {
                        Ok(kids) => {
                            if let Some(k) = kids.into_iter().find(|k| k.starts_with(&prefix)) {
                                self.node = Some(k.clone());
                                return Ok(k);
                            }
                        }
                        Err(Error::ConnectionLoss | Error::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn wait(&self, me: &str, write: bool) -> Result<()> {
        let mut attempt = 0;
        loop {
            let kids = match self.client.get_children(&self.dir).await {
                Ok(k) => k,
                Err(Error::ConnectionLoss) => {
                    after_loss(&mut attempt).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut kids: Vec<String> =
                kids.into_iter().filter(|k| k.contains(READ) || k.contains(WRITE)).collect();
            kids.sort_by(|a, b| sequence(a).cmp(sequence(b)));
            let pos = kids.iter().position(|k| k == me).ok_or(Error::NoNode)?;
            let blocker = if write {
                pos.checked_sub(1).map(|i| &kids[i])
            } else {
                kids[..pos].iter().rev().find(|k| k.contains(WRITE))
            };
            let Some(blocker) = blocker else { return Ok(()) };
            match self.client.exists_w(&format!("{}/{blocker}", self.dir)).await {
                Ok((None, _)) => continue,
                Ok((Some(_), w)) => match w.await {
                    Ok(_) | Err(Error::ConnectionLoss) => continue,
                    Err(e) => return Err(e),
                },
                Err(Error::ConnectionLoss) => after_loss(&mut attempt).await?,
                Err(e) => return Err(e),
            }
        }
    }
}
