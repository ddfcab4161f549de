//! Scripted tests of the server core (`zk_server::core::ServerCore`), with no sockets, threads
//! or clocks: each file under `tests/testdata/core` is a sequence of events, each followed by the
//! exact actions the core returns for it. When behaviour changes on purpose, run
//! `REWRITE=1 cargo test -p zk-server --test core_scripts` and review the diff of the scripts.
//!
//! Two directives: `start [voters=(1,2,3)] [snapshots]`, with zoo.cfg lines as input, makes a
//! new core (this server is the first voter); `run`, with one command a line as input, hands
//! the core every command's event and then takes every action (one group of the driver's).
//!
//! Commands (arguments are `key=value`; sessions appear as s1, s2, ... in the order the core
//! hands them out; zxids in hex):
//! - `connect conn=C [timeout=MS] [session=sN] [lastzxid=Z] [badpass]`: a handshake.
//! - requests on a connection: `create conn=C xid=X path=P [data=D] [flags=F]`, `create2 ...`,
//!   `set conn=C xid=X path=P data=D [version=V]`, `delete conn=C xid=X path=P [version=V]`,
//!   `get|exists|children conn=C xid=X path=P [watch]`, `sync conn=C xid=X path=P`,
//!   `close-session conn=C xid=X`, `ping conn=C`, `undecodable conn=C xid=X op=N` (a body that
//!   did not decode), `unknown-op conn=C xid=X op=N` (an opcode zk-proto does not know).
//! - `durable zxid=Z` / `durable`: the log made everything through Z (or all handed) durable.
//! - `log-full`, `log-broken`: the log refused a batch for a full disk / failed otherwise.
//! - `ack sid=N zxid=Z`: a follower's ACK.
//! - `closed conn=C`: the connection went away.
//! - `set-role role=down|standalone`: the server stops serving (an election) or serves alone.
//! - Leader side: `fwd-session session=ID timeout=MS`, `fwd-create|fwd-sync from=L session=ID
//!   cxid=X path=P` (a learner's forwarded requests), `touch session=sN` (a learner's ping).
//! - Learner side: `committed-session|committed-create|committed-close zxid=Z session=sN|ID
//!   [cxid=X] [timeout=MS] [path=P pcv=N]` (the leader's commits), `sync-done`.
//! - `advance ms=N`: both clocks move N ms, then the timers run. `wall-jump ms=N`: only the wall
//!   clock moves (an NTP step), then the timers run. `timers`: run the timers now.
//! - `chunk-done`, `snapshot-done [purge=Z]`: the snapshot thread's reports.
//! - `restore zxid=Z path=P [data=D] [session=ID timeout=MS]`: an operator restores a tree
//!   holding one node, at zxid Z (with a session, made at Z-1, owning it as an ephemeral);
//!   `log-reset zxid=Z`: the log's reset to Z is durable; `restore-status`: the restore's
//!   answer is shown after the actions.
#![allow(clippy::disallowed_methods)]

use bytes::Bytes;
use datadriven::{walk, TestCase};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;
use zk_proto::jute::{Jute, Reader};
use zk_proto::*;
use zk_server::config::ServerConfig;
use zk_server::core::SnapJob;
use zk_server::core::{
    Action, CoreConfig, CounterRule, Event, Now, Role, ServerCore, SnapshotSettings, VoterSet,
};
use zk_server::settings::Settings;
use zk_server::stats::ConnStats;

const WALL_START_MS: i64 = 1_700_000_000_000;

struct Script {
    core: Option<ServerCore>,
    now: Now,
    /// Session ids in the order they appeared, for naming them sN.
    sessions: Vec<i64>,
    /// What each (connection, xid) asked, to read its reply.
    ops: HashMap<(u64, i32), OpCode>,
    /// Connections that have had their handshake answered.
    connected: std::collections::HashSet<u64>,
    /// Highest zxid handed to the log.
    persisted: i64,
    /// The tree's settings `start` gave the core (for a restore's tree).
    tree: zk_tree::TreeConfig,
    /// A `restore-status` asked for the restore's answer after the actions.
    show_restore: bool,
}

impl Script {
    fn new() -> Script {
        Script {
            core: None,
            now: Now { mono_us: 1_000_000, wall_ms: WALL_START_MS },
            sessions: Vec::new(),
            ops: HashMap::new(),
            connected: Default::default(),
            persisted: 0,
            tree: Default::default(),
            show_restore: false,
        }
    }

    fn core(&mut self) -> &mut ServerCore {
        self.core.as_mut().expect("`start` first")
    }

    fn session_name(&mut self, id: i64) -> String {
        if id == 0 {
            return "0".into();
        }
        let i = match self.sessions.iter().position(|&s| s == id) {
            Some(i) => i,
            None => {
                self.sessions.push(id);
                self.sessions.len() - 1
            }
        };
        format!("s{}", i + 1)
    }

    fn session_id(&self, name: &str) -> i64 {
        let n: usize = name.trim_start_matches('s').parse().expect("session name sN");
        self.sessions[n - 1]
    }

    fn run(&mut self, tc: &mut TestCase) -> String {
        let input = tc.input.clone();
        let mut cmd = Cmd::from_case(tc);
        let tc = &mut cmd;
        if tc.directive == "start" {
            let voters: Vec<i64> = tc.try_take_args("voters").unwrap().unwrap_or_else(|| vec![0]);
            let snapshots = tc.take_flag("snapshots").unwrap();
            let role: Option<String> = tc.try_take_arg("role").unwrap();
            let epoch: u32 = tc.try_take_arg("epoch").unwrap().unwrap_or(1);
            let cfg_text = format!("tickTime=2000\ndataDir=/nonexistent\nclientPort=2181\n{input}");
            let cfg = ServerConfig::parse(&cfg_text, None).expect("zoo.cfg");
            let settings = Arc::new(Settings::from_config(&cfg).expect("settings"));
            let me = voters[0];
            let cfg = CoreConfig {
                settings: settings.clone(),
                server_id: me as u8,
                voters: VoterSet::new(me, voters.iter().copied()),
                counter_rule: if voters.len() == 1 { CounterRule::Wrap } else { CounterRule::StopAtEpochEnd },
                snapshots: snapshots.then_some(SnapshotSettings {
                    snap_count: settings.snap_count,
                    snap_size_bytes: settings.snap_size_bytes,
                    pace_floor: settings.snapshot_write_bytes_per_second,
                    idle_ms: settings.snapshot_idle_ms,
                    nodes_per_step: zk_server::core::NODES_PER_STEP,
                }),
                snapshot_now: false,
                seed: 1,
                sasl_seed: [1; 32],
            };
            let tree = zk_tree::TreeConfig {
                tick_ms: settings.tick_ms,
                super_digest: settings.super_digest.clone(),
                ..Default::default()
            };
            self.tree = tree.clone();
            let mut db = zk_tree::Database::new(tree);
            db.start_leading(self.now.mono_ms());
            let voter_set = VoterSet::new(me, voters.iter().copied());
            let mut core = ServerCore::new(cfg, db, self.now);
            match role.as_deref() {
                // Several voters and no role named: the leader of epoch 0.
                None if voters.len() > 1 => {
                    core.set_role(Role::Leader { epoch: 0 }, voter_set, None, self.now)
                }
                None => {}
                Some("leader") => core.set_role(Role::Leader { epoch }, voter_set, None, self.now),
                Some("follower") => {
                    core.set_role(Role::Learner { observer: false }, voter_set, None, self.now)
                }
                Some("observer") => {
                    core.set_role(Role::Learner { observer: true }, voter_set, None, self.now)
                }
                Some("down") => core.set_role(Role::Down, voter_set, None, self.now),
                Some(other) => panic!("unknown role {other}"),
            }
            self.core = Some(core);
            tc.finish();
            return "ok\n".into();
        }
        if tc.directive == "run" {
            tc.finish();
            for line in input.lines() {
                let mut sub = Cmd::parse(line);
                let ev = self.event(&mut sub);
                sub.finish();
                if let Some(ev) = ev {
                    let now = self.now;
                    self.core().handle(now, ev);
                }
            }
            let mut out = self.drain();
            if std::mem::take(&mut self.show_restore) {
                let answer = self.core().take_restore_answer();
                writeln!(out, "restore: {answer:?}").unwrap();
            }
            return out;
        }
        panic!("unknown directive {} (start or run)", tc.directive)
    }

    /// The event a command stands for (None for the timer commands, which act directly).
    fn event(&mut self, tc: &mut Cmd) -> Option<Event> {
        let d = tc.directive.clone();
        let req = |s: &mut Script, tc: &mut Cmd, op: OpCode, body: Request| -> Event {
            let conn: u64 = tc.take_arg("conn").unwrap();
            let xid: i32 = tc.try_take_arg("xid").unwrap().unwrap_or(xid::PING);
            s.ops.insert((conn, xid), op);
            let mut raw = bytes::BytesMut::new();
            body.encode(&mut raw);
            Event::Request {
                conn,
                xid,
                op: op.code(),
                body: Ok(body),
                raw: raw.freeze(),
                received_us: s.now.mono_us,
            }
        };
        let path = |tc: &mut Cmd| -> String { tc.take_arg("path").unwrap() };
        let data = |tc: &mut Cmd| -> Option<Bytes> {
            tc.try_take_arg::<String>("data").unwrap().map(|d| Bytes::from(d.into_bytes()))
        };
        let world = vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }];
        Some(match d.as_str() {
            "connect" => {
                let conn: u64 = tc.take_arg("conn").unwrap();
                let timeout: i32 = tc.try_take_arg("timeout").unwrap().unwrap_or(30_000);
                let session =
                    tc.try_take_arg::<String>("session").unwrap().map(|n| self.session_id(&n)).unwrap_or(0);
                let last_zxid_seen =
                    tc.try_take_arg::<String>("lastzxid").unwrap().map(|z| hex(&z)).unwrap_or(0);
                let passwd = if tc.take_flag("badpass").unwrap() {
                    Bytes::from_static(&[1; 16])
                } else {
                    Bytes::copy_from_slice(&zk_tree::session_password(session))
                };
                let req = ConnectRequest {
                    protocol_version: 0,
                    last_zxid_seen,
                    time_out: timeout,
                    session_id: session,
                    passwd,
                    read_only: Some(tc.take_flag("ro").unwrap()),
                };
                let remote = format!("127.0.0.1:{}", 40000 + conn).parse().unwrap();
                Event::Connect { conn, remote, req, ids: vec![], stats: Arc::new(ConnStats::new()) }
            }
            "create" | "create2" => {
                let p = path(tc);
                let data = data(tc);
                let flags: i32 = tc.try_take_arg("flags").unwrap().unwrap_or(0);
                let r = CreateRequest { path: p, data, acl: world, flags };
                if d == "create" {
                    req(self, tc, OpCode::Create, Request::Create(r))
                } else {
                    req(self, tc, OpCode::Create2, Request::Create2(r))
                }
            }
            "set" => {
                let r = SetDataRequest {
                    path: path(tc),
                    data: data(tc),
                    version: tc.try_take_arg("version").unwrap().unwrap_or(-1),
                };
                req(self, tc, OpCode::SetData, Request::SetData(r))
            }
            "delete" => {
                let r = DeleteRequest {
                    path: path(tc),
                    version: tc.try_take_arg("version").unwrap().unwrap_or(-1),
                };
                req(self, tc, OpCode::Delete, Request::Delete(r))
            }
            "get" => {
                let r = GetDataRequest { path: path(tc), watch: tc.take_flag("watch").unwrap() };
                req(self, tc, OpCode::GetData, Request::GetData(r))
            }
            "exists" => {
                let r = ExistsRequest { path: path(tc), watch: tc.take_flag("watch").unwrap() };
                req(self, tc, OpCode::Exists, Request::Exists(r))
            }
            "children" => {
                let r = GetChildrenRequest { path: path(tc), watch: tc.take_flag("watch").unwrap() };
                req(self, tc, OpCode::GetChildren, Request::GetChildren(r))
            }
            "sync" => {
                let r = SyncRequest { path: path(tc) };
                req(self, tc, OpCode::Sync, Request::Sync(r))
            }
            "close-session" => req(self, tc, OpCode::CloseSession, Request::CloseSession),
            "addauth" => {
                let r = AuthPacket {
                    auth_type: 0,
                    scheme: tc.take_arg("scheme").unwrap(),
                    auth: Bytes::from(tc.take_arg::<String>("auth").unwrap().into_bytes()),
                };
                req(self, tc, OpCode::Auth, Request::Auth(r))
            }
            // Reconfiguration: the quorum layer's view, and a client's request (servers by id, at
            // the ports `member_spec` gives them).
            "membership" => {
                let servers: Vec<i64> = tc.try_take_args("servers").unwrap().expect("servers");
                let observers: Vec<i64> = tc.try_take_args("observers").unwrap().unwrap_or_default();
                let version = hex(&tc.take_arg::<String>("version").unwrap());
                let text = config_text(&servers, &observers, version);
                Event::Membership(zk_server::core::Membership {
                    config: zk_quorum::config::QuorumConfig::parse(&text).expect("config"),
                    reconfig_enabled: !tc.take_flag("disabled").unwrap(),
                    standalone_enabled: true,
                })
            }
            "synced" => Event::SyncedFollowers(
                tc.try_take_args::<i64>("sids").unwrap().unwrap_or_default().into_iter().collect(),
            ),
            "reconfig" => {
                let join: Option<Vec<i64>> = tc.try_take_args("join").unwrap();
                let observe: Option<Vec<i64>> = tc.try_take_args("observe").unwrap();
                let mut joining: Vec<String> = join
                    .unwrap_or_default()
                    .iter()
                    .map(|n| format!("server.{n}={}", member_spec(*n, false)))
                    .collect();
                joining.extend(
                    observe
                        .unwrap_or_default()
                        .iter()
                        .map(|n| format!("server.{n}={}", member_spec(*n, true))),
                );
                if tc.take_flag("malformed").unwrap() {
                    joining.push("server.9=127.0.0.1".into());
                }
                let leave: Option<Vec<i64>> = tc.try_take_args("leave").unwrap();
                let r = ReconfigRequest {
                    joining_servers: (!joining.is_empty()).then(|| joining.join(",")),
                    leaving_servers: leave
                        .map(|l| l.iter().map(i64::to_string).collect::<Vec<_>>().join(",")),
                    new_members: None,
                    cur_config_id: tc.try_take_arg::<String>("id").unwrap().map(|z| hex(&z)).unwrap_or(-1),
                };
                req(self, tc, OpCode::Reconfig, Request::Reconfig(r))
            }
            "ping" => req(self, tc, OpCode::Ping, Request::Ping),
            "add-watch" => {
                let r = AddWatchRequest { path: path(tc), mode: tc.take_arg("mode").unwrap() };
                req(self, tc, OpCode::AddWatch, Request::AddWatch(r))
            }
            "undecodable" => {
                let conn: u64 = tc.take_arg("conn").unwrap();
                let xid: i32 = tc.take_arg("xid").unwrap();
                let op: i32 = tc.take_arg("op").unwrap();
                let what = "test body";
                Event::Request {
                    conn,
                    xid,
                    op,
                    body: Err(RequestError::Decode(DecodeError::InvalidValue { what, value: 0 })),
                    raw: Bytes::new(),
                    received_us: self.now.mono_us,
                }
            }
            "unknown-op" => {
                let conn: u64 = tc.take_arg("conn").unwrap();
                let xid: i32 = tc.take_arg("xid").unwrap();
                let op: i32 = tc.take_arg("op").unwrap();
                Event::Request {
                    conn,
                    xid,
                    op,
                    body: Err(RequestError::Unknown(op)),
                    raw: Bytes::new(),
                    received_us: self.now.mono_us,
                }
            }
            "durable" => {
                let zxid =
                    tc.try_take_arg::<String>("zxid").unwrap().map(|z| hex(&z)).unwrap_or(self.persisted);
                Event::Durable { zxid }
            }
            "log-full" => Event::LogFailed {
                error: zk_log::LogError::Io {
                    op: "allocate",
                    file: "log.1".into(),
                    source: std::io::Error::from_raw_os_error(libc_enospc()),
                },
            },
            "log-broken" => Event::LogFailed {
                error: zk_log::LogError::Io {
                    op: "sync",
                    file: "log.1".into(),
                    source: std::io::Error::other("EIO"),
                },
            },
            "ack" => {
                let sid: i64 = tc.take_arg("sid").unwrap();
                let zxid = hex(&tc.take_arg::<String>("zxid").unwrap());
                Event::Ack { sid, zxid }
            }
            "closed" => Event::Closed { conn: tc.take_arg("conn").unwrap() },
            // The leader's side of learners.
            "fwd-session" => Event::ForwardedCreateSession {
                session: hex(&tc.take_arg::<String>("session").unwrap()),
                cxid: 0,
                timeout_ms: tc.take_arg("timeout").unwrap(),
            },
            "fwd-create" | "fwd-sync" => {
                let from: u64 = tc.take_arg("from").unwrap();
                let session = hex(&tc.take_arg::<String>("session").unwrap());
                let cxid: i32 = tc.take_arg("cxid").unwrap();
                let p = path(tc);
                let (op, body) = if d == "fwd-sync" {
                    (OpCode::Sync, Request::Sync(SyncRequest { path: p }))
                } else {
                    (
                        OpCode::Create,
                        Request::Create(CreateRequest { path: p, data: None, acl: world, flags: 0 }),
                    )
                };
                let auth = vec![Id { scheme: "ip".into(), id: "127.0.0.2".into() }];
                Event::Forwarded { from, session, cxid, op: op.code(), body: Ok(body), auth }
            }
            "touch" => Event::Touch {
                sessions: vec![(self.session_id(&tc.take_arg::<String>("session").unwrap()), 0)],
            },
            // A learner's side: what its leader commits, and sync answers.
            "committed-session" | "committed-create" | "committed-close" | "committed-set" => {
                let zxid = hex(&tc.take_arg::<String>("zxid").unwrap());
                let name: String = tc.take_arg("session").unwrap();
                let client_id = if name.starts_with("0x") { hex(&name) } else { self.session_id(&name) };
                let cxid: i32 = tc.try_take_arg("cxid").unwrap().unwrap_or(0);
                let (op, txn) = match d.as_str() {
                    "committed-session" => (
                        OpCode::CreateSession,
                        Txn::CreateSession(CreateSessionTxn { time_out: tc.take_arg("timeout").unwrap() }),
                    ),
                    "committed-set" => (
                        OpCode::SetData,
                        Txn::SetData(SetDataTxn {
                            path: path(tc),
                            data: data(tc),
                            version: tc.take_arg("version").unwrap(),
                        }),
                    ),
                    "committed-close" => {
                        (OpCode::CloseSession, Txn::CloseSession(CloseSessionTxn { paths2_delete: vec![] }))
                    }
                    _ => (
                        OpCode::Create,
                        Txn::Create(CreateTxn {
                            path: path(tc),
                            data: None,
                            acl: world,
                            ephemeral: false,
                            parent_cversion: tc.take_arg("pcv").unwrap(),
                        }),
                    ),
                };
                let hdr = TxnHeader { client_id, cxid, zxid, time: self.now.wall_ms, txn_type: op.code() };
                Event::Committed { hdr, txn, digest: None }
            }
            "sync-done" => Event::SyncDone,
            "restore" => {
                // A tree holding one node, applied at `zxid`; with `session` (hex) and `timeout`,
                // a session too, which owns the node as an ephemeral.
                let zxid = hex(&tc.take_arg::<String>("zxid").unwrap());
                let session = tc.try_take_arg::<String>("session").unwrap().map(|s| hex(&s));
                let mut db = zk_tree::Database::new(self.tree.clone());
                let header = |client_id: i64, zxid: i64, op: OpCode| TxnHeader {
                    client_id,
                    cxid: 0,
                    zxid,
                    time: self.now.wall_ms,
                    txn_type: op.code(),
                };
                if let Some(id) = session {
                    let timeout: i32 = tc.take_arg("timeout").unwrap();
                    let txn = Txn::CreateSession(CreateSessionTxn { time_out: timeout });
                    db.apply(&header(id, zxid - 1, OpCode::CreateSession), &txn);
                }
                let txn = Txn::Create(CreateTxn {
                    path: path(tc),
                    data: data(tc),
                    acl: world,
                    ephemeral: session.is_some(),
                    parent_cversion: 1,
                });
                db.apply(&header(session.unwrap_or(0), zxid, OpCode::Create), &txn);
                Event::Restore { db: Box::new(db) }
            }
            "log-reset" => Event::LogReset { zxid: hex(&tc.take_arg::<String>("zxid").unwrap()) },
            "restore-status" => {
                self.show_restore = true;
                return None;
            }
            "chunk-done" => Event::SnapshotChunkDone { buffer: Vec::new() },
            "snapshot-done" => Event::SnapshotDone {
                ok: true,
                purge_logs_before: tc.try_take_arg::<String>("purge").unwrap().map(|z| hex(&z)),
            },
            // The learner last heard from its leader `ago` ms before now.
            "leader-contact" => {
                let ago: u64 = tc.take_arg("ago").unwrap();
                let ms = self.now.mono_ms() - ago;
                self.core().note_leader_contact(ms);
                return None;
            }
            "set-role" => {
                let role = match tc.take_arg::<String>("role").unwrap().as_str() {
                    "down" => Role::Down,
                    "standalone" => Role::Standalone,
                    "read-only" => Role::ReadOnly,
                    "follower" => Role::Learner { observer: false },
                    "leader" => Role::Leader { epoch: tc.try_take_arg("epoch").unwrap().unwrap_or(2) },
                    other => panic!("set-role: {other}"),
                };
                let now = self.now;
                self.core().set_role(role, VoterSet::solo(0), None, now);
                return None;
            }
            "advance" | "wall-jump" | "timers" => {
                let ms: u64 = tc.try_take_arg("ms").unwrap().unwrap_or(0);
                if d == "advance" {
                    self.now.mono_us += ms * 1000;
                }
                self.now.wall_ms += ms as i64;
                let now = self.now;
                self.core().handle_timeout(now);
                return None;
            }
            other => panic!("unknown command {other}"),
        })
    }

    /// Takes every action and renders it, one a line.
    fn drain(&mut self) -> String {
        let mut out = String::new();
        while let Some(a) = self.core().poll_action() {
            let line = self.render(a);
            out.push_str(&line);
            out.push('\n');
        }
        if out.is_empty() {
            out.push_str("(nothing)\n");
        }
        out
    }

    fn render(&mut self, a: Action) -> String {
        match a {
            Action::Reply { conn, frame } => self.render_reply(conn, frame),
            Action::Frame { conn, frame } => {
                let mut r = Reader::new(frame.slice(4..));
                if self.connected.insert(conn) {
                    let resp = ConnectResponse::read(&mut r).expect("connect response");
                    let s = self.session_name(resp.session_id);
                    let ro = if resp.read_only == Some(true) { " read-only" } else { "" };
                    format!("connected conn={conn} session={s} timeout={}{ro}", resp.time_out)
                } else {
                    let hdr = ReplyHeader::read(&mut r).expect("header");
                    assert_eq!(hdr.xid, xid::NOTIFICATION);
                    let ev = WatcherEvent::read(&mut r).expect("event");
                    let ty = EventType::from_i32(ev.event_type).map(|t| format!("{t:?}")).unwrap_or_default();
                    format!("event conn={conn} {ty} {}", ev.path)
                }
            }
            Action::SessionReady { conn } => format!("ready conn={conn}"),
            Action::Close { conn } => {
                self.connected.remove(&conn);
                format!("close conn={conn}")
            }
            Action::ReleasePermit => "release-permit".into(),
            Action::Persist { records, inline } => {
                let mut s = String::from(if inline { "persist inline" } else { "persist" });
                for (zxid, payload) in records.payloads() {
                    let (hdr, txn) =
                        zk_log::format::decode_payload(Bytes::copy_from_slice(payload)).expect("record");
                    self.persisted = zxid;
                    let _ = write!(s, " {}", self.txn_text(&hdr, &txn));
                }
                s
            }
            Action::Propose { payloads } => payloads
                .into_iter()
                .map(|(_, p)| {
                    let (hdr, txn) = zk_log::format::decode_payload(p).expect("proposal payload");
                    format!("propose {}", self.txn_text(&hdr, &txn))
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Action::Commit { zxid } => format!("commit 0x{zxid:x}"),
            Action::CommitAndActivate { zxid, designated, config } => {
                format!("commit-and-activate 0x{zxid:x} designated={designated} {}", config_summary(&config))
            }
            Action::Forward { session, cxid, op, body, auth } => {
                let s = self.session_name(session);
                let op = OpCode::from_i32(op).map(|o| format!("{o:?}")).unwrap_or_else(|| op.to_string());
                let ids: Vec<String> = auth.iter().map(|i| format!("{}:{}", i.scheme, i.id)).collect();
                format!("forward {s} cxid={cxid} {op} ({} bytes) auth={ids:?}", body.len())
            }
            Action::Revalidate { session, timeout_ms } => {
                format!("revalidate {} timeout={timeout_ms}", self.session_name(session))
            }
            Action::SyncReady { to } => format!("sync-ready to={to}"),
            Action::ResumeLog => "resume-log".into(),
            Action::StepDown { reason, .. } => format!("step-down {reason}"),
            Action::PurgeLogBefore { zxid } => format!("purge-log-before 0x{zxid:x}"),
            Action::Snapshot(job) => match job {
                SnapJob::Begin { zxid, pace } => format!("snapshot begin zxid=0x{zxid:x} pace={pace}"),
                SnapJob::Pace(p) => format!("snapshot pace={p}"),
                SnapJob::Chunk(b) => format!("snapshot chunk ({} bytes)", b.len()),
                SnapJob::Finish => "snapshot finish".into(),
                SnapJob::Retain => "snapshot retain".into(),
                SnapJob::Abort => "snapshot abort".into(),
            },
            Action::Stop { reason } => format!("stop: {reason}"),
            Action::InstallRestored { zxid } => format!("install-restored 0x{zxid:x}"),
        }
    }

    fn txn_text(&mut self, hdr: &TxnHeader, txn: &Txn) -> String {
        let s = self.session_name(hdr.client_id);
        let what = match txn {
            Txn::CreateSession(t) => format!("createSession({s} timeout={})", t.time_out),
            Txn::CloseSession(t) => format!("closeSession({s} {:?})", t.paths2_delete),
            Txn::Create(t) => format!("create({})", t.path),
            Txn::SetData(t) => format!("setData({} v{})", t.path, t.version),
            Txn::Delete(t) => format!("delete({})", t.path),
            Txn::Error(e) => format!("error({})", e.err),
            other => format!("{other:?}"),
        };
        format!("0x{:x}:{what}", hdr.zxid)
    }

    fn render_reply(&mut self, conn: u64, frame: Bytes) -> String {
        let mut r = Reader::new(frame.slice(4..));
        let hdr = ReplyHeader::read(&mut r).expect("reply header");
        let mut s = format!("reply conn={conn} xid={} zxid=0x{:x} err={}", hdr.xid, hdr.zxid, hdr.err);
        if hdr.err != 0 {
            if let Some(e) = ErrorCode::from_i32(hdr.err) {
                let _ = write!(s, " ({e:?})");
            }
            return s;
        }
        let stat =
            |st: &Stat| format!("stat(czxid=0x{:x} mzxid=0x{:x} version={})", st.czxid, st.mzxid, st.version);
        match self.ops.get(&(conn, hdr.xid)).copied() {
            Some(OpCode::Create) | Some(OpCode::Sync) => {
                let _ = write!(s, " {}", String::read(&mut r).expect("path"));
            }
            Some(OpCode::Create2) => {
                let p = String::read(&mut r).expect("path");
                let _ = write!(s, " {p} {}", stat(&Stat::read(&mut r).expect("stat")));
            }
            Some(OpCode::SetData) | Some(OpCode::Exists) => {
                let _ = write!(s, " {}", stat(&Stat::read(&mut r).expect("stat")));
            }
            Some(OpCode::GetData) => {
                let d = Option::<Bytes>::read(&mut r).expect("data").unwrap_or_default();
                let _ = write!(
                    s,
                    " {:?} {}",
                    String::from_utf8_lossy(&d),
                    stat(&Stat::read(&mut r).expect("stat"))
                );
            }
            Some(OpCode::GetChildren) => {
                let _ = write!(s, " {:?}", Vec::<String>::read(&mut r).expect("children"));
            }
            Some(OpCode::Reconfig) => {
                let d = Option::<Bytes>::read(&mut r).expect("data").unwrap_or_default();
                let _ = write!(s, " {} {}", config_summary(&d), stat(&Stat::read(&mut r).expect("stat")));
            }
            _ => {}
        }
        s
    }
}

/// Server `n`'s member spec in the scripts: quorum port 2880+n, election 3880+n, client 2180+n.
fn member_spec(n: i64, observer: bool) -> String {
    let kind = if observer { "observer" } else { "participant" };
    format!("127.0.0.1:{}:{}:{kind};127.0.0.1:{}", 2880 + n, 3880 + n, 2180 + n)
}

fn config_text(servers: &[i64], observers: &[i64], version: i64) -> String {
    let mut t: String = servers.iter().map(|n| format!("server.{n}={}\n", member_spec(*n, false))).collect();
    t.extend(observers.iter().map(|n| format!("server.{n}={}\n", member_spec(*n, true))));
    t + &format!("version={version:x}")
}

/// A config string as `members=(1,2,3o) version=0x..`, after checking that it parses.
fn config_summary(bytes: &[u8]) -> String {
    let c =
        zk_quorum::config::QuorumConfig::parse(std::str::from_utf8(bytes).expect("utf-8")).expect("config");
    let members: Vec<String> = c
        .servers
        .values()
        .map(|s| {
            let o = if s.learner_type == zk_quorum::config::LearnerType::Observer { "o" } else { "" };
            format!("{}{o}", s.sid)
        })
        .collect();
    format!("members=({}) version=0x{:x}", members.join(","), c.version)
}

fn hex(z: &str) -> i64 {
    i64::from_str_radix(z.trim_start_matches("0x"), 16).expect("hex zxid")
}

fn libc_enospc() -> i32 {
    28
}

/// One command: its name and arguments (from a script stanza or a line of a `batch`).
struct Cmd {
    directive: String,
    args: HashMap<String, Vec<String>>,
}

impl Cmd {
    fn from_case(tc: &mut TestCase) -> Cmd {
        Cmd { directive: tc.directive.clone(), args: std::mem::take(&mut tc.args) }
    }

    fn parse(line: &str) -> Cmd {
        let mut words = line.split_whitespace();
        let directive = words.next().expect("a command").to_string();
        let mut args = HashMap::new();
        for w in words {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            // `k=(a,b)` is a list, as on a stanza's own line.
            let vals = match v.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
                Some(list) => list.split(',').filter(|x| !x.is_empty()).map(str::to_string).collect(),
                None if v.is_empty() => vec![],
                None => vec![v.to_string()],
            };
            args.insert(k.to_string(), vals);
        }
        Cmd { directive, args }
    }

    fn try_take_arg<T: FromStr>(&mut self, k: &str) -> Result<Option<T>, String> {
        match self.args.remove(k) {
            None => Ok(None),
            Some(v) if v.len() == 1 => v[0].parse().map(Some).map_err(|_| format!("bad value for {k}")),
            Some(_) => Err(format!("{k} takes one value")),
        }
    }

    fn take_arg<T: FromStr>(&mut self, k: &str) -> Result<T, String> {
        self.try_take_arg(k)?.ok_or_else(|| format!("{} needs {k}=", self.directive))
    }

    fn take_flag(&mut self, k: &str) -> Result<bool, String> {
        Ok(self.args.remove(k).is_some())
    }

    fn try_take_args<T: FromStr>(&mut self, k: &str) -> Result<Option<Vec<T>>, String> {
        match self.args.remove(k) {
            None => Ok(None),
            Some(v) => v
                .iter()
                .map(|x| x.parse().map_err(|_| format!("bad value for {k}")))
                .collect::<Result<_, _>>()
                .map(Some),
        }
    }

    /// Every argument was used (a misspelt one is a broken script, not a silent default).
    fn finish(&self) {
        assert!(self.args.is_empty(), "{}: unused arguments {:?}", self.directive, self.args.keys());
    }
}

#[test]
fn core_scripts() {
    walk("tests/testdata/core", |f| {
        let mut s = Script::new();
        f.run(|tc| s.run(tc));
    });
}
