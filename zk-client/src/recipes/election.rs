//! What a leader does while it leads: the paused state on connection loss, and the
//! single-znode election variant.
//!
//! A leader whose connection drops cannot know whether its session still lives: the ephemeral
//! node that makes it leader lasts until the server expires the session. It is *paused*: it
//! should stop acting as leader (another may take over once the session expires) but need not
//! give up, because a reconnect within the session timeout resumes the same session and with it
//! leadership. It stays paused until the session is known lost (SESSIONEXPIRED), or until a bound
//! the application chooses (at most the session timeout is safe) passes, and then steps down.

use super::{after_loss, ensure_path, Candidate};
use crate::{acl, Client, CreateMode, Error, EventType, Result, SessionState};
use std::time::Duration;

/// Where a leader stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderState {
    /// Connected and holding the leader node.
    Leading,
    /// Connection lost: the session (and so leadership) may still be alive. Do not act as leader.
    Paused,
}

/// Watches a leader's node `path` and the session until leadership ends; `on_change` hears every
/// Leading/Paused transition (Leading first). Returns why it ended: SESSIONEXPIRED (or
/// AUTHFAILED) when the session is gone, CONNECTIONLOSS when paused longer than `pause_bound`,
/// NONODE when the node was deleted.
async fn hold_node(
    client: &Client,
    path: &str,
    pause_bound: Duration,
    mut on_change: impl FnMut(LeaderState),
) -> Error {
    // Subscribed before the state is read, so no change between the two is missed.
    let mut states = client.state_events();
    let mut connected = match client.state() {
        SessionState::Connected | SessionState::ConnectedReadOnly => true,
        SessionState::Connecting | SessionState::Disconnected => false,
        SessionState::AuthFailed => return Error::AuthFailed,
        SessionState::Expired | SessionState::Closed => return Error::SessionExpired,
    };
    let mut last: Option<LeaderState> = None;
    let mut report = |s: LeaderState, last: &mut Option<LeaderState>| {
        if *last != Some(s) {
            *last = Some(s);
            on_change(s);
        }
    };
    loop {
        if connected {
            match client.exists_w(path).await {
                Ok((None, _)) => return Error::NoNode,
                Ok((Some(st), w)) => {
                    if st.ephemeral_owner != client.session_id() {
                        return Error::NoNode;
                    }
                    report(LeaderState::Leading, &mut last);
                    tokio::pin!(w);
                    loop {
                        tokio::select! {
                            ev = &mut w => match ev {
                                Ok(e) if e.event_type == EventType::NodeDeleted => return Error::NoNode,
                                Ok(_) | Err(Error::ConnectionLoss) => break,
                                Err(e) => return e,
                            },
                            s = states.next() => match s {
                                Some(SessionState::Disconnected) => { connected = false; break }
                                Some(SessionState::Expired | SessionState::Closed) | None => return Error::SessionExpired,
                                Some(SessionState::AuthFailed) => return Error::AuthFailed,
                                Some(_) => {}
                            },
                        }
                    }
                }
                Err(Error::ConnectionLoss) => connected = false,
                Err(e) => return e,
            }
        } else {
            report(LeaderState::Paused, &mut last);
            let deadline = tokio::time::sleep(pause_bound);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    s = states.next() => match s {
                        Some(SessionState::Connected | SessionState::ConnectedReadOnly) => { connected = true; break }
                        Some(SessionState::Expired | SessionState::Closed) | None => return Error::SessionExpired,
                        Some(SessionState::AuthFailed) => return Error::AuthFailed,
                        Some(_) => {}
                    },
                    _ = &mut deadline => return Error::ConnectionLoss,
                }
            }
        }
    }
}

impl Candidate {
    /// For the leader (after [`Candidate::lead`] returned): holds leadership until it ends, calling
    /// `on_change` with [`LeaderState::Paused`] when the connection drops and
    /// [`LeaderState::Leading`] when it is back. Returns why leadership ended: SESSIONEXPIRED,
    /// CONNECTIONLOSS (paused longer than `pause_bound`), or NONODE (the candidate node was
    /// deleted, or this instance is not in the election). Call [`Candidate::resign`] afterwards
    /// so a still-live node does not keep others waiting.
    pub async fn hold(&self, pause_bound: Duration, on_change: impl FnMut(LeaderState)) -> Error {
        let Some(node) = self.q.node.as_deref() else { return Error::NoNode };
        let path = format!("{}/{node}", self.q.dir);
        hold_node(&self.q.client, &path, pause_bound, on_change).await
    }
}

/// Leader election on one well-known ephemeral node: every candidate tries to create it, the one
/// that succeeds leads, the others watch it and try again when it goes. Simpler than
/// [`Candidate`], at the price of a herd when the leader leaves.
#[derive(Debug, Clone)]
pub struct SingleNodeElection {
    client: Client,
    path: String,
}

impl SingleNodeElection {
    /// An election on the node `path` (its parent is created if missing).
    pub fn new(client: &Client, path: &str) -> SingleNodeElection {
        SingleNodeElection { client: client.clone(), path: path.to_owned() }
    }

    /// Waits until this session leads, with `data` (e.g. an address) in the leader node.
    /// A create lost to CONNECTIONLOSS is recognised by the node's owner being this session.
    /// Errors: SESSIONEXPIRED, CONNECTIONLOSS after repeated failures, NOAUTH.
    pub async fn lead(&self, data: &[u8]) -> Result<()> {
        let mut attempt = 0;
        loop {
            match self.client.create(&self.path, data, &acl::open_unsafe(), CreateMode::Ephemeral).await {
                Ok(_) => return Ok(()),
                Err(Error::NoNode) => ensure_path(&self.client, zk_proto::path::parent(&self.path)).await?,
                Err(Error::NodeExists) => match self.client.exists_w(&self.path).await {
                    Ok((None, _)) => continue,
                    Ok((Some(st), _)) if st.ephemeral_owner == self.client.session_id() => return Ok(()),
                    Ok((Some(_), w)) => match w.await {
                        Ok(_) | Err(Error::ConnectionLoss) => continue,
                        Err(e) => return Err(e),
                    },
                    Err(Error::ConnectionLoss) => after_loss(&mut attempt).await?,
                    Err(e) => return Err(e),
                },
                // Created or not: the NODEEXISTS path above checks the owner.
                Err(Error::ConnectionLoss) => after_loss(&mut attempt).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// For the leader: as [`Candidate::hold`].
    pub async fn hold(&self, pause_bound: Duration, on_change: impl FnMut(LeaderState)) -> Error {
        hold_node(&self.client, &self.path, pause_bound, on_change).await
    }

    /// Steps down: deletes the leader node if this session owns it.
    pub async fn resign(&self) -> Result<()> {
        match self.client.exists(&self.path).await? {
            Some(st) if st.ephemeral_owner == self.client.session_id() => {
                match self.client.delete(&self.path, st.version).await {
                    Ok(()) | Err(Error::NoNode) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            _ => Ok(()),
        }
    }

    /// The current leader's data, `None` when nobody leads.
    pub async fn leader(&self) -> Result<Option<bytes::Bytes>> {
        match self.client.get_data(&self.path).await {
            Ok((d, _)) => Ok(Some(d)),
            Err(Error::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
