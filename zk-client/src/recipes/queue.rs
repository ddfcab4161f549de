//! A distributed FIFO queue: items are persistent-sequential children of the queue node.

use super::{after_loss, ensure_path, random_guid, sequence};
use crate::{acl, Client, CreateMode, Error, Result};
use bytes::Bytes;

const ITEM: &str = "qn-";

/// A FIFO queue under a directory node (created if missing). Several producers and consumers may
/// share it; each item is taken by at most one consumer.
#[derive(Debug, Clone)]
pub struct DistributedQueue {
    client: Client,
    dir: String,
}

impl DistributedQueue {
    /// The queue under `dir`.
    pub fn new(client: &Client, dir: &str) -> DistributedQueue {
        DistributedQueue { client: client.clone(), dir: dir.trim_end_matches('/').to_owned() }
    }

    /// Appends `data`; returns the item's node name. Each offer carries a fresh guid, so an
    /// offer lost to CONNECTIONLOSS is found instead of being added twice. Errors:
    /// SESSIONEXPIRED, CONNECTIONLOSS after repeated failures.
    pub async fn offer(&self, data: &[u8]) -> Result<String> {
        let prefix = format!("{ITEM}{}-", random_guid());
        let mut attempt = 0;
        loop {
            let path = format!("{}/{prefix}", self.dir);
            match self.client.create(&path, data, &acl::open_unsafe(), CreateMode::PersistentSequential).await
            {
                Ok(p) => return Ok(p.rsplit('/').next().unwrap_or_default().to_owned()),
                Err(Error::NoNode) => ensure_path(&self.client, &self.dir).await?,
                Err(Error::ConnectionLoss) => {
                    after_loss(&mut attempt).await?;
                    match self.client.get_children(&self.dir).await {
                        Ok(kids) => {
                            if let Some(k) = kids.into_iter().find(|k| k.starts_with(&prefix)) {
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

    async fn items(&self) -> Result<Vec<String>> {
        let mut kids: Vec<String> = match self.client.get_children(&self.dir).await {
            Ok(k) => k.into_iter().filter(|k| k.starts_with(ITEM)).collect(),
            Err(Error::NoNode) => Vec::new(),
            Err(e) => return Err(e),
        };
        kids.sort_by(|a, b| sequence(a).cmp(sequence(b)));
        Ok(kids)
    }

    /// Takes the head item, `None` when the queue is empty. Consumers race by deleting the item;
    /// the one whose delete succeeds has it. A CONNECTIONLOSS during that delete is returned:
    /// the item may have been taken by this call and is then lost (at-most-once delivery).
    pub async fn poll(&self) -> Result<Option<Bytes>> {
        for k in self.items().await? {
            let p = format!("{}/{k}", self.dir);
            let data = match self.client.get_data(&p).await {
                Ok((d, _)) => d,
                Err(Error::NoNode) => continue,
                Err(e) => return Err(e),
            };
            match self.client.delete(&p, -1).await {
                Ok(()) => return Ok(Some(data)),
                Err(Error::NoNode) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Takes the head item, waiting for one to be offered. Errors as [`DistributedQueue::poll`].
    pub async fn take(&self) -> Result<Bytes> {
        loop {
            if let Some(d) = self.poll().await? {
                return Ok(d);
            }
            match self.client.get_children_w(&self.dir).await {
                Ok((kids, w)) => {
                    if kids.iter().any(|k| k.starts_with(ITEM)) {
                        continue;
                    }
                    match w.await {
                        Ok(_) | Err(Error::ConnectionLoss) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(Error::NoNode) => ensure_path(&self.client, &self.dir).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// How many items are queued.
    pub async fn len(&self) -> Result<usize> {
        Ok(self.items().await?.len())
    }

    /// Whether the queue is empty.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }
}
