//! The async API: [`Client`], built with [`ClientBuilder`], plus the watch and state handles.

use crate::connect_string::ConnectString;
use crate::core::{
    Config, MultiOp, Op, ReadOp, Response, Session, SessionCredentials, SessionState, WatchedEvent,
};
use crate::driver::{Command, Driver, Shared, WatchSink};
use crate::error::{Error, Result};
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use zk_proto::{
    Acl, AddWatchMode, ClientInfo, CreateMode, EventType, KeeperState, OpResult, Stat, WatcherType,
};

/// Commands waiting for the session task; senders wait (backpressure) beyond this.
const COMMAND_QUEUE: usize = 1024;
/// State changes kept for a slow [`StateEvents`] reader before it skips ahead.
const STATE_EVENTS: usize = 64;
/// How long [`Client::close`] waits for the session task to publish the Closed state.
const CLOSE_STATE_WAIT: Duration = Duration::from_secs(1);
/// Events buffered per persistent watch; a consumer further behind has its stream closed.
pub const PERSISTENT_WATCH_BUFFER: usize = 1024;

/// Options for a [`Client`]; [`Client::builder`] starts one.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    connect_string: String,
    session_timeout: Duration,
    can_be_read_only: bool,
    session: Option<SessionCredentials>,
    max_pending: usize,
    max_frame: u32,
    reconnect_delay_max: Duration,
    tls: Option<crate::tls::ClientTls>,
    sasl: Option<crate::core::SaslCredentials>,
    gssapi: Option<crate::core::gssapi::Gssapi>,
}

impl ClientBuilder {
    /// Requested session timeout (default 30 s); the server clamps it.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }

    /// Accept read-only servers (default false).
    pub fn can_be_read_only(mut self, yes: bool) -> Self {
        self.can_be_read_only = yes;
        self
    }

    /// Resume an existing session instead of creating one.
    pub fn session(mut self, creds: SessionCredentials) -> Self {
        self.session = Some(creds);
        self
    }

    /// Operations queued or in flight at most (default 10,000); callers wait beyond it.
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n.max(1);
        self
    }

    /// The largest reply accepted, in bytes (default 0xfffff, Apache's `jute.maxbuffer`). A
    /// longer reply (a getChildren of a parent with many children, a multiRead of large nodes)
    /// drops the connection: the request fails with CONNECTIONLOSS and the client reconnects.
    pub fn max_frame(mut self, bytes: u32) -> Self {
        self.max_frame = bytes;
        self
    }

    /// Upper bound of the random pause before redialling (default 1 s, as Apache's client).
    pub fn reconnect_delay_max(mut self, d: Duration) -> Self {
        self.reconnect_delay_max = d;
        self
    }

    /// Connects with TLS (to a server's secure client port); plain TCP by default.
    pub fn tls(mut self, tls: crate::tls::ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Authenticates every connection with SASL DIGEST-MD5 as `username` (the server's ACL id
    /// `sasl:<username>`), right after the handshake and before any other request, as Apache's
    /// Java client with a JAAS `Client` section and kazoo's `sasl_options` do. A refused
    /// password makes [`ClientBuilder::connect`] fail with AUTHFAILED.
    pub fn sasl_digest_md5(mut self, username: &str, password: &str) -> Self {
        self.sasl = Some(crate::core::SaslCredentials::new(username, password));
        self
    }

    /// Authenticates every connection with SASL GSSAPI (Kerberos) through `mechanism` (with the
    /// `kerberos` feature, `zk_client::gssapi::Kerberos::into_config`), right after the handshake
    /// and before any other request, as Apache's Java client with a `Krb5LoginModule` `Client`
    /// section does; the server's ACL id becomes `sasl:<principal>` (as its rules map it). No
    /// credentials, an unknown service principal or a server's refusal make
    /// [`ClientBuilder::connect`] fail with AUTHFAILED (the reason is logged). Taken over
    /// [`ClientBuilder::sasl_digest_md5`] when both are given.
    pub fn sasl_gssapi(mut self, mechanism: crate::core::gssapi::Gssapi) -> Self {
        self.gssapi = Some(mechanism);
        self
    }

    /// Starts the session task and waits until the first connection is established.
    ///
    /// Errors: BADARGUMENTS for a malformed connect string; SESSIONEXPIRED when resuming a session
    /// the server no longer knows; AUTHFAILED when the SASL exchange fails; CONNECTIONLOSS when no server accepted a session within the
    /// session timeout. Must be called inside a tokio runtime.
    pub async fn connect(self) -> Result<Client> {
        self.connect_explained().await.map_err(|f| f.error)
    }

    /// [`ClientBuilder::connect`], with the reason when the SASL exchange failed (the
    /// Kerberos library's message: no ticket, a keytab without the principal's key, an unknown
    /// service principal; or the server's refusal).
    ///
    /// Errors: as [`ClientBuilder::connect`], in [`ConnectFailure::error`].
    pub async fn connect_explained(self) -> std::result::Result<Client, ConnectFailure> {
        let cs = ConnectString::parse(&self.connect_string).map_err(|_| Error::BadArguments)?;
        let mut cfg = Config::new(cs.hosts, self.session_timeout);
        cfg.chroot = cs.chroot;
        cfg.can_be_read_only = self.can_be_read_only;
        cfg.session = self.session;
        cfg.max_pending = self.max_pending;
        cfg.max_frame = self.max_frame;
        cfg.reconnect_delay_max = self.reconnect_delay_max;
        cfg.sasl = self.sasl;
        cfg.gssapi = self.gssapi;
        let core = Session::new(cfg, rand::random(), Instant::now());
        let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
        let (state_tx, state_rx) = watch::channel(SessionState::Connecting);
        let (events_tx, _) = broadcast::channel(STATE_EVENTS);
        let shared = Arc::new(Mutex::new(Shared {
            session_id: 0,
            password: Bytes::new(),
            timeout: self.session_timeout,
            connection: None,
            sasl_failure: None,
        }));
        let driver = Driver {
            core,
            rx,
            state_tx,
            events_tx: events_tx.clone(),
            shared: shared.clone(),
            tls: self.tls,
        };
        tokio::spawn(driver.run());
        let client = Client { tx, state: state_rx, events: events_tx, shared };
        let mut st = client.state.clone();
        let outcome = {
            let wait = st.wait_for(|s| *s != SessionState::Connecting && *s != SessionState::Disconnected);
            match tokio::time::timeout(self.session_timeout, wait).await {
                Ok(Ok(s)) => Some(*s),
                _ => None,
            }
        };
        match outcome {
            Some(SessionState::Connected | SessionState::ConnectedReadOnly) => Ok(client),
            Some(SessionState::AuthFailed) => Err(ConnectFailure {
                error: Error::AuthFailed,
                reason: client.shared.lock().ok().and_then(|sh| sh.sasl_failure.clone()),
            }),
            Some(_) => Err(Error::SessionExpired.into()),
            None => Err(Error::ConnectionLoss.into()),
        }
    }
}

/// Why [`ClientBuilder::connect_explained`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectFailure {
    /// The error [`ClientBuilder::connect`] gives.
    pub error: Error,
    /// For AUTHFAILED after a failed SASL exchange, what failed.
    pub reason: Option<String>,
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.reason {
            Some(r) => write!(f, "{}: {r}", self.error),
            None => write!(f, "{}", self.error),
        }
    }
}

impl std::error::Error for ConnectFailure {}

impl From<Error> for ConnectFailure {
    fn from(error: Error) -> ConnectFailure {
        ConnectFailure { error, reason: None }
    }
}

/// A ZooKeeper session. Cheap to clone; every clone drives the same session, and the session is
/// closed when the last clone is dropped (or by [`Client::close`]).
///
/// Operations complete in the order they were issued. Any operation may fail with CONNECTIONLOSS
/// when the connection drops while it is outstanding (it may or may not have been applied; the
/// client reconnects on its own), with SESSIONEXPIRED once the session has expired or been closed,
/// and with AUTHFAILED after an addAuth was refused.
#[derive(Debug, Clone)]
pub struct Client {
    tx: mpsc::Sender<Command>,
    state: watch::Receiver<SessionState>,
    events: broadcast::Sender<SessionState>,
    shared: Arc<Mutex<Shared>>,
}

/// A one-shot watch: resolves with the event that fired it, or with the error that ended the
/// session (SESSIONEXPIRED, AUTHFAILED; CONNECTIONLOSS if the client was dropped).
#[derive(Debug)]
pub struct Watch {
    rx: oneshot::Receiver<WatchedEvent>,
}

fn end_of_session(ev: WatchedEvent) -> Result<WatchedEvent> {
    if ev.event_type != EventType::None {
        return Ok(ev);
    }
    Err(match ev.state {
        KeeperState::AuthFailed => Error::AuthFailed,
        KeeperState::Expired | KeeperState::Closed => Error::SessionExpired,
        _ => Error::ConnectionLoss,
    })
}

impl Future for Watch {
    type Output = Result<WatchedEvent>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| match r {
            Ok(ev) => end_of_session(ev),
            Err(_) => Err(Error::ConnectionLoss),
        })
    }
}

/// A persistent (or persistent-recursive) watch: every event on its path (or subtree) in order.
/// It ends after a PersistentWatchRemoved event, when the session ends (a last None event carries
/// the state), or when its consumer falls [`PERSISTENT_WATCH_BUFFER`] events behind.
#[derive(Debug)]
pub struct PersistentWatch {
    rx: mpsc::Receiver<WatchedEvent>,
}

impl PersistentWatch {
    /// The next event, or `None` once the watch has ended.
    pub async fn next(&mut self) -> Option<WatchedEvent> {
        self.rx.recv().await
    }
}

/// Session state changes, in order: Connected, Disconnected, ConnectedReadOnly, Expired,
/// AuthFailed, Closed.
#[derive(Debug)]
pub struct StateEvents {
    rx: broadcast::Receiver<SessionState>,
}

impl StateEvents {
    /// The next state change; `None` once the session task has ended. A reader more than 64
    /// changes behind skips to the oldest one still kept.
    pub async fn next(&mut self) -> Option<SessionState> {
        loop {
            match self.rx.recv().await {
                Ok(s) => return Some(s),
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

fn unexpected(r: Response) -> Error {
    tracing::error!("reply of the wrong shape: {r:?}");
    Error::MarshallingError
}

impl Client {
    /// Connects with the default options and `session_timeout`. See [`ClientBuilder::connect`].
    pub async fn connect(connect_string: &str, session_timeout: Duration) -> Result<Client> {
        Client::builder(connect_string).session_timeout(session_timeout).connect().await
    }

    /// Options for connecting to `connect_string` ("host:port,host:port/chroot").
    pub fn builder(connect_string: &str) -> ClientBuilder {
        ClientBuilder {
            connect_string: connect_string.to_owned(),
            session_timeout: Duration::from_secs(30),
            can_be_read_only: false,
            session: None,
            max_pending: 10_000,
            max_frame: zk_proto::DEFAULT_MAX_FRAME,
            reconnect_delay_max: Duration::from_secs(1),
            tls: None,
            sasl: None,
            gssapi: None,
        }
    }

    /// The current session state.
    pub fn state(&self) -> SessionState {
        *self.state.borrow()
    }

    /// A stream of the state changes from now on.
    pub fn state_events(&self) -> StateEvents {
        StateEvents { rx: self.events.subscribe() }
    }

    /// The session id and password, to resume this session from another client
    /// ([`ClientBuilder::session`]).
    pub fn credentials(&self) -> SessionCredentials {
        let sh = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        SessionCredentials { id: sh.session_id, password: sh.password.clone() }
    }

    /// The session id.
    pub fn session_id(&self) -> i64 {
        self.credentials().id
    }

    /// The server of the latest connection, as "host:port" from the connect string, and its
    /// number (1 for the session's first connection, then one more for each). The connection may
    /// have been lost since; two calls that give the same number saw one connection throughout,
    /// so every request between them went to that server. `None` before the first connection.
    pub fn connection(&self) -> Option<(String, u64)> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).connection.clone()
    }

    /// The timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).timeout
    }

    fn gone(&self) -> Error {
        match self.state() {
            SessionState::AuthFailed => Error::AuthFailed,
            SessionState::Expired | SessionState::Closed => Error::SessionExpired,
            _ => Error::ConnectionLoss,
        }
    }

    async fn call(&self, op: Op, watch: Option<WatchSink>) -> Result<Response> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Command { op, reply, watch }).await.map_err(|_| self.gone())?;
        rx.await.map_err(|_| self.gone())?
    }

    async fn call_watched(&self, op: Op) -> Result<(Response, Watch)> {
        let (tx, rx) = oneshot::channel();
        let r = self.call(op, Some(WatchSink::Once(tx))).await?;
        Ok((r, Watch { rx }))
    }

    /// Creates a node and returns its path (with the sequence suffix for sequential modes).
    /// Containers are created with createContainer; the TTL modes need [`Client::create_ttl`].
    ///
    /// Errors: NODEEXISTS, NONODE (no parent), NOCHILDRENFOREPHEMERALS, NOAUTH, INVALIDACL (also
    /// for an empty ACL), BADARGUMENTS (bad path, or a TTL mode).
    pub async fn create(&self, path: &str, data: &[u8], acl: &[Acl], mode: CreateMode) -> Result<String> {
        let op = Op::Create {
            path: path.into(),
            data: Bytes::copy_from_slice(data),
            acl: acl.to_vec(),
            mode,
            ttl: None,
            with_stat: false,
        };
        match self.call(op, None).await? {
            Response::Create { path, .. } => Ok(path),
            r => Err(unexpected(r)),
        }
    }

    /// Like [`Client::create`], returning the new node's Stat too (create2).
    pub async fn create2(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        self.create_full(path, data, acl, mode, None).await
    }

    /// Creates a node in a TTL mode (PersistentWithTtl, PersistentSequentialWithTtl): removed by
    /// the server once it has had no children and no change for `ttl`. Needs the server's
    /// extendedTypesEnabled; otherwise UNIMPLEMENTED. BADARGUMENTS for a ttl out of
    /// 1 ms..=0xFF_FFFF_FFFF ms or a non-TTL mode.
    pub async fn create_ttl(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Duration,
    ) -> Result<(String, Stat)> {
        if !mode.is_ttl() {
            return Err(Error::BadArguments);
        }
        let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.create_full(path, data, acl, mode, Some(ms)).await
    }

    async fn create_full(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Option<i64>,
    ) -> Result<(String, Stat)> {
        let op = Op::Create {
            path: path.into(),
            data: Bytes::copy_from_slice(data),
            acl: acl.to_vec(),
            mode,
            ttl,
            with_stat: true,
        };
        match self.call(op, None).await? {
            Response::Create { path, stat: Some(stat) } => Ok((path, stat)),
            r => Err(unexpected(r)),
        }
    }

    /// Deletes a node if its version is `version` (-1: any).
    /// Errors: NONODE, BADVERSION, NOTEMPTY, NOAUTH, BADARGUMENTS.
    pub async fn delete(&self, path: &str, version: i32) -> Result<()> {
        self.call(Op::Delete { path: path.into(), version }, None).await.map(|_| ())
    }

    /// The node's Stat, or `None` if it does not exist.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>> {
        match self.call(Op::Exists { path: path.into(), watch: false }, None).await? {
            Response::Exists(s) => Ok(s),
            r => Err(unexpected(r)),
        }
    }

    /// Like [`Client::exists`], leaving a watch: fires NodeCreated if the node does not exist yet,
    /// NodeDataChanged or NodeDeleted if it does.
    pub async fn exists_w(&self, path: &str) -> Result<(Option<Stat>, Watch)> {
        match self.call_watched(Op::Exists { path: path.into(), watch: true }).await? {
            (Response::Exists(s), w) => Ok((s, w)),
            (r, _) => Err(unexpected(r)),
        }
    }

    /// The node's data and Stat. Errors: NONODE, NOAUTH.
    pub async fn get_data(&self, path: &str) -> Result<(Bytes, Stat)> {
        match self.call(Op::GetData { path: path.into(), watch: false }, None).await? {
            Response::Data { data, stat } => Ok((data, stat)),
            r => Err(unexpected(r)),
        }
    }

    /// Like [`Client::get_data`], leaving a data watch (NodeDataChanged / NodeDeleted).
    /// No watch is left when the call fails.
    pub async fn get_data_w(&self, path: &str) -> Result<(Bytes, Stat, Watch)> {
        match self.call_watched(Op::GetData { path: path.into(), watch: true }).await? {
            (Response::Data { data, stat }, w) => Ok((data, stat, w)),
            (r, _) => Err(unexpected(r)),
        }
    }

    /// Replaces the node's data if its version is `version` (-1: any); returns the new Stat.
    /// Errors: NONODE, BADVERSION, NOAUTH.
    pub async fn set_data(&self, path: &str, data: &[u8], version: i32) -> Result<Stat> {
        match self
            .call(Op::SetData { path: path.into(), data: Bytes::copy_from_slice(data), version }, None)
            .await?
        {
            Response::Stat(s) => Ok(s),
            r => Err(unexpected(r)),
        }
    }

    /// The node's ACL and Stat. Errors: NONODE, NOAUTH.
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        match self.call(Op::GetAcl { path: path.into() }, None).await? {
            Response::Acl { acl, stat } => Ok((acl, stat)),
            r => Err(unexpected(r)),
        }
    }

    /// Replaces the node's ACL if its ACL version is `version` (-1: any).
    /// Errors: NONODE, BADVERSION, NOAUTH, INVALIDACL.
    pub async fn set_acl(&self, path: &str, acl: &[Acl], version: i32) -> Result<Stat> {
        match self.call(Op::SetAcl { path: path.into(), acl: acl.to_vec(), version }, None).await? {
            Response::Stat(s) => Ok(s),
            r => Err(unexpected(r)),
        }
    }

    async fn children(
        &self,
        path: &str,
        watch: bool,
        with_stat: bool,
    ) -> Result<(Vec<String>, Option<Stat>, Option<Watch>)> {
        let op = Op::GetChildren { path: path.into(), watch, with_stat };
        let (r, w) = if watch {
            let (r, w) = self.call_watched(op).await?;
            (r, Some(w))
        } else {
            (self.call(op, None).await?, None)
        };
        match r {
            Response::Children { children, stat } => Ok((children, stat, w)),
            r => Err(unexpected(r)),
        }
    }

    /// The node's children (names, in the server's order). Errors: NONODE, NOAUTH.
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        Ok(self.children(path, false, false).await?.0)
    }

    /// Like [`Client::get_children`], leaving a child watch (NodeChildrenChanged / NodeDeleted).
    pub async fn get_children_w(&self, path: &str) -> Result<(Vec<String>, Watch)> {
        let (c, _, w) = self.children(path, true, false).await?;
        w.map(|w| (c, w)).ok_or(Error::SystemError)
    }

    /// The node's children and its Stat (getChildren2).
    pub async fn get_children2(&self, path: &str) -> Result<(Vec<String>, Stat)> {
        let (c, s, _) = self.children(path, false, true).await?;
        s.map(|s| (c, s)).ok_or(Error::MarshallingError)
    }

    /// Like [`Client::get_children2`], leaving a child watch.
    pub async fn get_children2_w(&self, path: &str) -> Result<(Vec<String>, Stat, Watch)> {
        match self.children(path, true, true).await? {
            (c, Some(s), Some(w)) => Ok((c, s, w)),
            _ => Err(Error::MarshallingError),
        }
    }

    /// Waits until the server this session talks to has caught up with the leader for `path`.
    pub async fn sync(&self, path: &str) -> Result<String> {
        match self.call(Op::Sync { path: path.into() }, None).await? {
            Response::Sync(p) => Ok(p),
            r => Err(unexpected(r)),
        }
    }

    /// Applies writes atomically. When the server refused the multi the results say why: the
    /// failing op carries its error, earlier ones `Error(Ok)`, later ones RUNTIMEINCONSISTENCY;
    /// [`multi_error`] picks the cause. Errors (as `Err`) only for transport and argument problems.
    pub async fn multi(&self, ops: Vec<MultiOp>) -> Result<Vec<OpResult>> {
        match self.call(Op::Multi(ops), None).await? {
            Response::Multi(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    /// Reads several nodes in one round trip; each result is independent (GetData, GetChildren,
    /// or the op's own Error).
    pub async fn multi_read(&self, ops: Vec<ReadOp>) -> Result<Vec<OpResult>> {
        match self.call(Op::MultiRead(ops), None).await? {
            Response::Multi(r) => Ok(r),
            r => Err(unexpected(r)),
        }
    }

    /// Adds a persistent watch on `path` (or, recursive, on its whole subtree). Events arrive on the
    /// returned stream until [`Client::remove_watches`] with `Any` or the session ends.
    pub async fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<PersistentWatch> {
        let (tx, rx) = mpsc::channel(PERSISTENT_WATCH_BUFFER);
        self.call(Op::AddWatch { path: path.into(), mode }, Some(WatchSink::Stream(tx))).await?;
        Ok(PersistentWatch { rx })
    }

    /// Removes every watch of `kind` (Children, Data or Any) this session holds on `path`; each
    /// removed watcher gets a DataWatchRemoved / ChildWatchRemoved / PersistentWatchRemoved event.
    /// Errors: NOWATCHER when this client holds none (checked locally first, as Apache's client
    /// does), BADARGUMENTS for another watcher type.
    pub async fn remove_watches(&self, path: &str, kind: WatcherType) -> Result<()> {
        self.call(Op::RemoveWatches { path: path.into(), kind }, None).await.map(|_| ())
    }

    /// The paths of this session's ephemeral nodes under `prefix` ("/" for all).
    pub async fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>> {
        match self.call(Op::GetEphemerals { prefix: prefix.into() }, None).await? {
            Response::Paths(p) => Ok(p),
            r => Err(unexpected(r)),
        }
    }

    /// How many descendants `path` has, at any depth. Errors: NONODE, NOAUTH.
    pub async fn get_all_children_number(&self, path: &str) -> Result<i32> {
        match self.call(Op::GetAllChildrenNumber { path: path.into() }, None).await? {
            Response::Count(n) => Ok(n),
            r => Err(unexpected(r)),
        }
    }

    /// The identities the server has authenticated this session as.
    pub async fn who_am_i(&self) -> Result<Vec<ClientInfo>> {
        match self.call(Op::WhoAmI, None).await? {
            Response::WhoAmI(v) => Ok(v),
            r => Err(unexpected(r)),
        }
    }

    /// Adds credentials (e.g. `("digest", b"user:password")`), kept and replayed after every
    /// reconnect. An unknown scheme or refused credentials end the session: AUTHFAILED.
    pub async fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        self.call(Op::AddAuth { scheme: scheme.into(), auth: Bytes::copy_from_slice(auth) }, None)
            .await
            .map(|_| ())
    }

    /// The ensemble's dynamic configuration (/zookeeper/config, never chrooted).
    pub async fn get_config(&self) -> Result<(Bytes, Stat)> {
        match self.call(Op::GetConfig { watch: false }, None).await? {
            Response::Data { data, stat } => Ok((data, stat)),
            r => Err(unexpected(r)),
        }
    }

    /// Like [`Client::get_config`], leaving a data watch on the config node.
    pub async fn get_config_w(&self) -> Result<(Bytes, Stat, Watch)> {
        match self.call_watched(Op::GetConfig { watch: true }).await? {
            (Response::Data { data, stat }, w) => Ok((data, stat, w)),
            (r, _) => Err(unexpected(r)),
        }
    }

    /// Changes the ensemble membership; returns the new config. Errors: RECONFIGDISABLED (the
    /// default on servers), NEWCONFIGNOQUORUM, RECONFIGINPROGRESS, BADVERSION, NOAUTH,
    /// BADARGUMENTS.
    pub async fn reconfig(
        &self,
        joining: Option<&str>,
        leaving: Option<&str>,
        new_members: Option<&str>,
        from_config: i64,
    ) -> Result<(Bytes, Stat)> {
        let op = Op::Reconfig {
            joining: joining.map(Into::into),
            leaving: leaving.map(Into::into),
            new_members: new_members.map(Into::into),
            from_config,
        };
        match self.call(op, None).await? {
            Response::Data { data, stat } => Ok((data, stat)),
            r => Err(unexpected(r)),
        }
    }

    /// Closes the session: its ephemeral nodes go, its watches end. Later calls on any clone fail
    /// with SESSIONEXPIRED, as Apache's client reports them.
    pub async fn close(&self) -> Result<()> {
        match self.call(Op::Close, None).await {
            Ok(_) | Err(Error::SessionExpired) => {
                // The session task answers the close before it publishes the Closed state; wait
                // for that too, so `state()` says Closed as soon as close returns. The task
                // publishes it in the same step, so the bound is only a guard.
                let mut st = self.state.clone();
                let _ = tokio::time::timeout(CLOSE_STATE_WAIT, st.wait_for(|s| s.is_terminal())).await;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// The error that made a multi fail, if it did: the first result that is an error other than OK
/// and RUNTIMEINCONSISTENCY.
pub fn multi_error(results: &[OpResult]) -> Option<Error> {
    results.iter().find_map(|r| match r {
        OpResult::Error(c)
            if *c != zk_proto::ErrorCode::Ok && *c != zk_proto::ErrorCode::RuntimeInconsistency =>
        {
            Some(Error::from(*c))
        }
        _ => None,
    })
}
