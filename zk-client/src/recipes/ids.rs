//! Unique IDs: a generator backed by sequential nodes, and a sequence-reservation service that
//! hands out IDs from blocks reserved in ZooKeeper.

use super::{after_loss, ensure_path, random_guid, sequence};
use crate::{acl, Client, CreateMode, Error, Result};
use std::ops::Range;

/// Unique IDs from the sequence numbers ZooKeeper gives sequential nodes under one directory.
/// IDs are unique and increasing per directory (gaps are possible), up to 2^31 - 1: past that the
/// server's counter wraps and [`UniqueIdGenerator::next`] fails with BADARGUMENTS.
#[derive(Debug, Clone)]
pub struct UniqueIdGenerator {
    client: Client,
    dir: String,
}

impl UniqueIdGenerator {
    /// IDs from the directory `dir` (created if missing).
    pub fn new(client: &Client, dir: &str) -> UniqueIdGenerator {
        UniqueIdGenerator { client: client.clone(), dir: dir.trim_end_matches('/').to_owned() }
    }

    /// A new ID. Creates an ephemeral-sequential node named with a fresh guid and deletes it
    /// again; after CONNECTIONLOSS the guid finds a node that was created anyway, so no ID is
    /// handed out twice. Errors: SESSIONEXPIRED, CONNECTIONLOSS after repeated failures.
    pub async fn next(&self) -> Result<i64> {
        let prefix = format!("id-{}-", random_guid());
        let mut attempt = 0;
        let name = loop {
            let path = format!("{}/{prefix}", self.dir);
            match self.client.create(&path, b"", &acl::open_unsafe(), CreateMode::EphemeralSequential).await {
                Ok(p) => break p.rsplit('/').next().unwrap_or_default().to_owned(),
                Err(Error::NoNode) => ensure_path(&self.client, &self.dir).await?,
                Err(Error::ConnectionLoss) => {
                    after_loss(&mut attempt).await?;
                    match self.client.get_children(&self.dir).await {
                        Ok(kids) => {
                            if let Some(k) = kids.into_iter().find(|k| k.starts_with(&prefix)) {
                                break k;
                            }
                        }
                        Err(Error::ConnectionLoss | Error::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        // The node has done its job; if this delete is lost the node goes with the session.
        let _ = self.client.delete(&format!("{}/{name}", self.dir), -1).await;
        match sequence(&name).parse::<i64>() {
            Ok(id) if id >= 0 => Ok(id),
            _ => Err(Error::BadArguments),
        }
    }
}

/// Reserves blocks of IDs by advancing a high-water mark stored (as decimal text) in one node,
/// with versioned compare-and-set. A reserved block is never reserved again: the mark only grows,
/// and ZooKeeper acknowledges a setData only once it is durable, so IDs do not repeat across
/// client or server restarts. IDs lost with a crashed client are skipped, not reused.
#[derive(Debug, Clone)]
pub struct SequenceReservation {
    client: Client,
    path: String,
    block: u32,
}

impl SequenceReservation {
    /// Blocks of `block` IDs (at least 1) from the mark at `path` (created at 0 when missing).
    pub fn new(client: &Client, path: &str, block: u32) -> SequenceReservation {
        SequenceReservation { client: client.clone(), path: path.to_owned(), block: block.max(1) }
    }

    /// Reserves the next block. A CONNECTIONLOSS is retried: the compare-and-set makes the retry
    /// safe (if the lost attempt was applied the retry sees the new mark and reserves the block
    /// after it, leaving a gap). Errors: SESSIONEXPIRED, MARSHALLINGERROR when the node holds
    /// something else, BADARGUMENTS when the mark would overflow, CONNECTIONLOSS after repeated
    /// failures.
    pub async fn reserve(&self) -> Result<Range<i64>> {
        let mut attempt = 0;
        loop {
            let (cur, version) = match self.client.get_data(&self.path).await {
                Ok((d, st)) => (super::parse(&d)?, st.version),
                Err(Error::NoNode) => {
                    match self
                        .client
                        .create(&self.path, b"0", &acl::open_unsafe(), CreateMode::Persistent)
                        .await
                    {
                        Ok(_) | Err(Error::NodeExists) => {}
                        Err(Error::NoNode) => {
                            ensure_path(&self.client, zk_proto::path::parent(&self.path)).await?
                        }
                        Err(Error::ConnectionLoss) => after_loss(&mut attempt).await?,
                        Err(e) => return Err(e),
                    }
                    continue;
                }
                Err(Error::ConnectionLoss) => {
                    after_loss(&mut attempt).await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let next = cur.checked_add(i64::from(self.block)).ok_or(Error::BadArguments)?;
            match self.client.set_data(&self.path, next.to_string().as_bytes(), version).await {
                Ok(_) => return Ok(cur..next),
                Err(Error::BadVersion) => continue,
                Err(Error::ConnectionLoss) => after_loss(&mut attempt).await?,
                Err(e) => return Err(e),
            }
        }
    }
}

/// IDs handed out one by one from blocks a [`SequenceReservation`] reserves.
#[derive(Debug, Clone)]
pub struct SequenceIds {
    reservation: SequenceReservation,
    current: Range<i64>,
}

impl SequenceIds {
    /// IDs from `reservation`'s blocks.
    pub fn new(reservation: SequenceReservation) -> SequenceIds {
        SequenceIds { reservation, current: 0..0 }
    }

    /// The next ID, reserving a new block when the current one is used up. Errors as
    /// [`SequenceReservation::reserve`].
    pub async fn next(&mut self) -> Result<i64> {
        if self.current.is_empty() {
            self.current = self.reservation.reserve().await?;
        }
        let id = self.current.start;
        self.current.start += 1;
        Ok(id)
    }
}
