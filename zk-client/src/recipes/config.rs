//! A configuration store in one znode, whose readers reload on watch events.

use super::ensure_path;
use crate::{acl, Client, CreateMode, Error, Result, Watch};
use bytes::Bytes;
use std::time::Duration;

/// Pause before re-reading after CONNECTIONLOSS (the client is reconnecting meanwhile).
const LOSS_PAUSE: Duration = Duration::from_millis(200);

/// A configuration blob stored at one path.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    client: Client,
    path: String,
}

impl ConfigStore {
    /// The configuration at `path`.
    pub fn new(client: &Client, path: &str) -> ConfigStore {
        ConfigStore { client: client.clone(), path: path.to_owned() }
    }

    /// The current configuration and its version. Errors: NONODE when none was stored.
    pub async fn load(&self) -> Result<(Bytes, i32)> {
        self.client.get_data(&self.path).await.map(|(d, st)| (d, st.version))
    }

    /// Stores `data`. With `expected_version`, only if the stored version is still that one
    /// (BADVERSION otherwise; NONODE if there is none yet); without, unconditionally, creating the
    /// node and its parents when missing. Returns the new version. A CONNECTIONLOSS is returned:
    /// an unconditional store may be retried safely, a versioned one is then answered BADVERSION
    /// if the first attempt was applied.
    pub async fn store(&self, data: &[u8], expected_version: Option<i32>) -> Result<i32> {
        if let Some(v) = expected_version {
            return self.client.set_data(&self.path, data, v).await.map(|st| st.version);
        }
        loop {
            match self.client.set_data(&self.path, data, -1).await {
                Ok(st) => return Ok(st.version),
                Err(Error::NoNode) => {}
                Err(e) => return Err(e),
            }
            match self.client.create(&self.path, data, &acl::open_unsafe(), CreateMode::Persistent).await {
                Ok(_) => return Ok(0),
                Err(Error::NodeExists) => continue,
                Err(Error::NoNode) => ensure_path(&self.client, zk_proto::path::parent(&self.path)).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// A reader that returns each new configuration as it is stored.
    pub fn watcher(&self) -> ConfigWatcher {
        ConfigWatcher { client: self.client.clone(), path: self.path.clone(), seen: None, pending: None }
    }
}

/// Follows a [`ConfigStore`]: [`ConfigWatcher::next`] returns the configuration the first time,
/// then again each time it changes (reloaded when the data watch fires).
#[derive(Debug)]
pub struct ConfigWatcher {
    client: Client,
    path: String,
    /// What was last returned: nothing yet (`None`), "no node" (`Some(None)`), or the data
    /// with this mzxid (`Some(Some(mzxid))`).
    seen: Option<Option<i64>>,
    pending: Option<Watch>,
}

impl ConfigWatcher {
    /// Waits for a configuration not returned before: `Some(data)`, or `None` when the node was
    /// deleted (or does not exist yet on the first call). Changes in quick succession may be
    /// seen only as the last one. Errors: SESSIONEXPIRED (watches are gone with the session; make
    /// a new client and watcher), AUTHFAILED, NOAUTH. CONNECTIONLOSS is waited out: the watch
    /// survives reconnects.
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        loop {
            if let Some(w) = self.pending.take() {
                match w.await {
                    Ok(_) | Err(Error::ConnectionLoss) => {}
                    Err(e) => return Err(e),
                }
            }
            match self.client.get_data_w(&self.path).await {
                Ok((d, st, w)) => {
                    self.pending = Some(w);
                    if self.seen != Some(Some(st.mzxid)) {
                        self.seen = Some(Some(st.mzxid));
                        return Ok(Some(d));
                    }
                }
                Err(Error::NoNode) => match self.client.exists_w(&self.path).await {
                    Ok((None, w)) => {
                        self.pending = Some(w);
                        if self.seen != Some(None) {
                            self.seen = Some(None);
                            return Ok(None);
                        }
                    }
                    Ok((Some(_), _)) => continue,
                    Err(Error::ConnectionLoss) => tokio::time::sleep(LOSS_PAUSE).await,
                    Err(e) => return Err(e),
                },
                Err(Error::ConnectionLoss) => tokio::time::sleep(LOSS_PAUSE).await,
                Err(e) => return Err(e),
            }
        }
    }
}
