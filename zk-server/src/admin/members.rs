//! The ensemble at a glance, for the console (`GET /console/api/ensemble`): every member's role,
//! last zxid and lag behind the leader, connections, latency and outstanding requests.
//!
//! # Why each member is asked `srvr` on its client port
//!
//! The console's page talks only to the server it was loaded from (its content security policy
//! allows `connect-src 'self'`, and an operator's browser may reach no other member), so that
//! server answers for the ensemble. It could learn the others' figures three ways:
//!
//! - the leader's own knowledge of its learners: only the leader has it, and it holds their
//!   acknowledged zxids but none of their connections, latency or outstanding requests;
//! - each member's AdminServer: its port is not in the ensemble's configuration (every member
//!   has its own `admin.serverPort`, and it may be off);
//! - the four-letter word `srvr` on each member's client port: the address is in the
//!   configuration (a server line's client address after `;`), `srvr` is always enabled (zkrs
//!   adds it to any `4lw.commands.whitelist`, and it is Apache's default whitelist), and its
//!   answer carries every figure the console shows, from zkrs and Apache members alike.
//!
//! So the third. Its costs are bounded: each member gets [`PROBE_TIMEOUT`] for the whole
//! exchange (connection, name lookup and answer), an answer is read up to [`SRVR_MAX_BYTES`],
//! at most [`MAX_MEMBERS`] are asked, all at once, and one round's answer is kept for
//! [`CACHE_FOR`] and shared by every console open on this server, so any number of browsers
//! cause at most one round of probes per [`CACHE_FOR`]. This server's own figures come from its
//! read model (the same `srvr` text, rendered without the network).
//!
//! A member that does not answer (down, partitioned, a secure-only client port) is listed as
//! unreachable with the reason; the answer as a whole is always 200.
//!
//! A server line without a client address leaves the member's client port unknown: it is then
//! asked at its quorum host on this server's own client port, the usual layout of one member per
//! machine with one `clientPort`.

use super::http::to_pretty_json;
use super::{AdminAsk, AdminReply};
use crate::driver::DriverMsg;
use crate::view::View;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, Mutex};
use zk_quorum::config::LearnerType;

/// Where the console asks for the ensemble's figures.
pub const PATH: &str = "/console/api/ensemble";

/// How long one member may take to answer `srvr`, connecting included.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

/// The most of a `srvr` answer read (zkrs's and Apache's are under 300 bytes).
pub const SRVR_MAX_BYTES: u64 = 4096;

/// The most members asked; any beyond are listed as not asked.
pub const MAX_MEMBERS: usize = 64;

/// How long one round of answers is reused.
pub const CACHE_FOR: Duration = Duration::from_millis(1000);

/// One member to ask, as the configuration names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTarget {
    /// Its server id (0 standalone).
    pub sid: i64,
    /// A voter, not an observer.
    pub voter: bool,
    /// The `host:port` its client port is asked at; `None` when it cannot be known.
    pub address: Option<String>,
    /// This server itself (answered from its own read model).
    pub is_self: bool,
}

/// What the driver gives for one round: the members and this server's own `srvr` answer.
#[derive(Debug, Clone)]
pub struct EnsemblePlan {
    /// The members in sid order, at most [`MAX_MEMBERS`].
    pub members: Vec<MemberTarget>,
    /// Members of the configuration left out by [`MAX_MEMBERS`].
    pub left_out: usize,
    /// This server's `srvr` text.
    pub own_srvr: String,
    /// A standalone server (no ensemble).
    pub standalone: bool,
}

/// The round's plan from this server's read model.
pub fn plan(v: &View<'_>) -> EnsemblePlan {
    let own_srvr = crate::fourlw::render("srvr", v);
    let own = v.advertised_client_addr();
    let Some(e) = &v.ensemble else {
        let me = MemberTarget { sid: 0, voter: true, address: Some(own.to_string()), is_self: true };
        return EnsemblePlan { members: vec![me], left_out: 0, own_srvr, standalone: true };
    };
    let all = e.config.servers.len();
    let members: Vec<MemberTarget> = e
        .config
        .servers
        .values()
        .take(MAX_MEMBERS)
        .map(|s| {
            let is_self = s.sid == e.my_sid;
            let quorum_host = s.addresses.first().map(|a| a.host.as_str());
            let address = if is_self {
                Some(own.to_string())
            } else {
                match (&s.client, quorum_host) {
                    (Some(c), Some(q)) if is_wildcard(&c.host) => Some(host_port(q, c.port)),
                    (Some(c), _) if !is_wildcard(&c.host) => Some(host_port(&c.host, c.port)),
                    (None, Some(q)) if own.port() != 0 => Some(host_port(q, own.port())),
                    _ => None,
                }
            };
            MemberTarget { sid: s.sid, voter: s.learner_type == LearnerType::Participant, address, is_self }
        })
        .collect();
    EnsemblePlan { left_out: all - members.len(), members, own_srvr, standalone: false }
}

fn is_wildcard(host: &str) -> bool {
    matches!(host, "" | "0.0.0.0" | "::" | "0:0:0:0:0:0:0:0")
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The figures of one `srvr` answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SrvrFigures {
    /// `Mode:` (`leader`, `follower`, `observer`, `standalone`, `read-only`), or `not serving`
    /// for a member that is electing or syncing.
    pub role: String,
    /// `Zxid:`.
    pub zxid: Option<i64>,
    /// `Connections:`.
    pub connections: Option<i64>,
    /// `Outstanding:`.
    pub outstanding: Option<i64>,
    /// `Latency min/avg/max:`, ms.
    pub latency_ms: Option<(f64, f64, f64)>,
    /// `Node count:`.
    pub node_count: Option<i64>,
}

/// Reads a `srvr` answer. Errors: a refusal (not in the whitelist), or text that is not a
/// `srvr` answer, as a sentence for the page.
pub fn parse_srvr(text: &str) -> Result<SrvrFigures, String> {
    if text.contains("not currently serving requests") {
        return Ok(SrvrFigures { role: "not serving".into(), ..Default::default() });
    }
    if text.contains("not in the whitelist") {
        return Err("srvr is not in the member's 4lw.commands.whitelist".into());
    }
    let mut f = SrvrFigures::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(": ") else { continue };
        let value = value.trim();
        match key {
            "Mode" => f.role = value.to_string(),
            "Zxid" => {
                f.zxid =
                    value.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()).map(|z| z as i64)
            }
            "Connections" => f.connections = value.parse().ok(),
            "Outstanding" => f.outstanding = value.parse().ok(),
            "Node count" => f.node_count = value.parse().ok(),
            "Latency min/avg/max" => {
                let parts: Vec<f64> = value.split('/').filter_map(|p| p.parse().ok()).collect();
                if let [min, avg, max] = parts[..] {
                    f.latency_ms = Some((min, avg, max));
                }
            }
            _ => {}
        }
    }
    if f.role.is_empty() {
        return Err("the answer is not a srvr answer".into());
    }
    Ok(f)
}

/// Asks `address` `srvr`, within [`PROBE_TIMEOUT`]. Errors: why there is no answer.
async fn ask_srvr(address: &str) -> Result<String, String> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(address).await?;
        s.write_all(b"srvr").await?;
        let mut buf = Vec::with_capacity(512);
        (&mut s).take(SRVR_MAX_BYTES).read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf).into_owned())
    };
    match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
    }
}

/// One member's answer: its figures, or why there are none.
pub type Answer = Result<SrvrFigures, String>;

/// The JSON the console reads, from the plan and each member's answer (in the plan's order).
pub fn assemble(plan: &EnsemblePlan, answers: &[Answer]) -> Value {
    let leader = plan.members.iter().zip(answers).find_map(|(m, a)| match a {
        Ok(f) if f.role == "leader" => Some((m.sid, f.zxid)),
        _ => None,
    });
    let leader_zxid = leader.and_then(|(_, z)| z);
    let members: Vec<Value> = plan
        .members
        .iter()
        .zip(answers)
        .map(|(m, a)| {
            let mut o = json!({
                "sid": m.sid,
                "self": m.is_self,
                "voter": m.voter,
                "address": m.address,
            });
            let fields = match a {
                Ok(f) => json!({
                    "reachable": true,
                    "error": null,
                    "role": f.role,
                    "zxid": f.zxid.map(|z| format!("0x{z:x}")),
                    "lag": lag(leader_zxid, f.zxid),
                    "connections": f.connections,
                    "outstanding": f.outstanding,
                    "latency_min_ms": f.latency_ms.map(|l| l.0),
                    "latency_avg_ms": f.latency_ms.map(|l| l.1),
                    "latency_max_ms": f.latency_ms.map(|l| l.2),
                    "node_count": f.node_count,
                }),
                Err(why) => json!({ "reachable": false, "error": why, "role": "unreachable" }),
            };
            if let (Value::Object(o), Value::Object(f)) = (&mut o, fields) {
                o.extend(f);
            }
            o
        })
        .collect();
    json!({
        "standalone": plan.standalone,
        "leader": leader.map(|(sid, _)| sid),
        "leader_zxid": leader_zxid.map(|z| format!("0x{z:x}")),
        "members": members,
        "left_out": plan.left_out,
        "probe_timeout_ms": PROBE_TIMEOUT.as_millis() as u64,
    })
}

/// Transactions `zxid` is behind `leader`'s: 0 when level or ahead (asked a moment later), the
/// counter difference within one epoch, `None` without both or across epochs (the member has
/// not yet synced with this leader: its counter means nothing against the leader's).
pub fn lag(leader: Option<i64>, zxid: Option<i64>) -> Option<i64> {
    let (l, z) = (leader?, zxid?);
    if z >= l {
        return Some(0);
    }
    (l >> 32 == z >> 32).then_some(l - z)
}

/// The ensemble view's answers, reused for [`CACHE_FOR`].
#[derive(Debug, Default)]
pub struct EnsembleProbe {
    last: Mutex<Option<(tokio::time::Instant, Value)>>,
}

impl EnsembleProbe {
    /// The answer to `GET` [`PATH`]: the cached round if fresh, otherwise a new one (asking the
    /// driver for the plan, then every other member at once). Concurrent requests wait for
    /// the one round in progress. 503 only when this server's driver does not answer.
    pub async fn answer(&self, core: &mpsc::Sender<DriverMsg>) -> Response<Full<Bytes>> {
        let mut last = self.last.lock().await;
        let fresh = last.as_ref().filter(|(at, _)| at.elapsed() < CACHE_FOR).map(|(_, v)| v.clone());
        let value = match fresh {
            Some(v) => v,
            None => {
                let Some(AdminReply::Ensemble(plan)) = super::http::ask(core, AdminAsk::Ensemble).await
                else {
                    return json_answer(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &json!({ "error": "the server is not answering" }),
                    );
                };
                let v = assemble(&plan, &probe_all(&plan).await);
                *last = Some((tokio::time::Instant::now(), v.clone()));
                v
            }
        };
        json_answer(StatusCode::OK, &value)
    }
}

/// Every member's answer, the others asked concurrently.
async fn probe_all(plan: &EnsemblePlan) -> Vec<Answer> {
    let asks: Vec<_> = plan
        .members
        .iter()
        .map(|m| {
            let (address, is_self) = (m.address.clone(), m.is_self);
            tokio::spawn(async move {
                match address {
                    _ if is_self => None,
                    Some(a) => Some(ask_srvr(&a).await.and_then(|t| parse_srvr(&t))),
                    None => Some(Err("its client address is not in the configuration".into())),
                }
            })
        })
        .collect();
    let mut out = Vec::with_capacity(asks.len());
    for ask in asks {
        out.push(match ask.await {
            Ok(Some(a)) => a,
            Ok(None) => parse_srvr(&plan.own_srvr),
            Err(e) => Err(format!("the probe failed: {e}")),
        });
    }
    out
}

fn json_answer(status: StatusCode, v: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(to_pretty_json(v))));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOLLOWER: &str = "Zookeeper version: 3.8.4-zkrs\nLatency min/avg/max: 0/1.5/9\nReceived: 10\n\
                            Sent: 10\nConnections: 3\nOutstanding: 2\nZxid: 0x100000005\nMode: follower\n\
                            Node count: 7\n";

    #[test]
    fn srvr_answers() {
        let f = parse_srvr(FOLLOWER).unwrap();
        assert_eq!(f.role, "follower");
        assert_eq!(f.zxid, Some(0x1_0000_0005));
        assert_eq!((f.connections, f.outstanding, f.node_count), (Some(3), Some(2), Some(7)));
        assert_eq!(f.latency_ms, Some((0.0, 1.5, 9.0)));
        let idle = parse_srvr("This ZooKeeper instance is not currently serving requests\n").unwrap();
        assert_eq!((idle.role.as_str(), idle.zxid), ("not serving", None));
        assert!(parse_srvr("srvr is not executed because it is not in the whitelist.\n")
            .unwrap_err()
            .contains("whitelist"));
        assert!(parse_srvr("").is_err());
        assert!(parse_srvr("garbage\n\u{0}: x\nZxid: 0xzz").is_err());
    }

    #[test]
    fn lags() {
        assert_eq!(lag(Some(0x1_0000_0009), Some(0x1_0000_0005)), Some(4));
        assert_eq!(lag(Some(0x1_0000_0009), Some(0x1_0000_000a)), Some(0));
        assert_eq!(lag(Some(0x2_0000_0001), Some(0x1_0000_0005)), None);
        assert_eq!(lag(None, Some(1)), None);
        assert_eq!(lag(Some(1), None), None);
    }

    fn target(sid: i64, is_self: bool) -> MemberTarget {
        MemberTarget { sid, voter: true, address: Some(format!("127.0.0.1:{}", 2180 + sid)), is_self }
    }

    #[test]
    fn assembled_json() {
        let plan = EnsemblePlan {
            members: vec![target(1, false), target(2, true), target(3, false)],
            left_out: 0,
            own_srvr: String::new(),
            standalone: false,
        };
        let leader = FOLLOWER.replace("follower", "leader").replace("0x100000005", "0x100000008");
        let answers =
            vec![parse_srvr(&leader), parse_srvr(FOLLOWER), Err("connection refused (os error 111)".into())];
        let v = assemble(&plan, &answers);
        assert_eq!(v["leader"], 1);
        assert_eq!(v["leader_zxid"], "0x100000008");
        let m = v["members"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!((m[0]["role"].as_str(), m[0]["lag"].as_i64()), (Some("leader"), Some(0)));
        assert_eq!((m[1]["self"].as_bool(), m[1]["lag"].as_i64()), (Some(true), Some(3)));
        assert_eq!(m[1]["zxid"], "0x100000005");
        assert_eq!((m[1]["connections"].as_i64(), m[1]["outstanding"].as_i64()), (Some(3), Some(2)));
        assert_eq!(
            (m[1]["latency_avg_ms"].as_f64(), m[1]["latency_max_ms"].as_f64()),
            (Some(1.5), Some(9.0))
        );
        assert_eq!((m[2]["reachable"].as_bool(), m[2]["role"].as_str()), (Some(false), Some("unreachable")));
        assert!(m[2]["error"].as_str().unwrap().contains("refused"));
        // No leader answering: no lag for anyone.
        let v = assemble(&plan, &[Err("down".into()), parse_srvr(FOLLOWER), Err("down".into())]);
        assert!(v["leader"].is_null() && v["members"][1]["lag"].is_null());
    }

    #[tokio::test]
    async fn an_unreachable_member_is_an_answer_not_an_error() {
        // A port nothing listens on: bind one, note it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let plan = EnsemblePlan {
            members: vec![
                target(1, true),
                MemberTarget {
                    sid: 2,
                    voter: true,
                    address: Some(format!("127.0.0.1:{port}")),
                    is_self: false,
                },
                MemberTarget { sid: 3, voter: false, address: None, is_self: false },
            ],
            left_out: 2,
            own_srvr: FOLLOWER.into(),
            standalone: false,
        };
        let answers = probe_all(&plan).await;
        assert_eq!(answers[0].as_ref().unwrap().role, "follower");
        assert!(answers[1].is_err());
        assert!(answers[2].as_ref().unwrap_err().contains("client address"));
        assert_eq!(assemble(&plan, &answers)["left_out"], 2);
    }

    #[tokio::test]
    async fn a_silent_member_times_out_and_a_long_answer_is_cut() {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let started = tokio::time::Instant::now();
        let e = ask_srvr(&addr).await.unwrap_err();
        assert!(e.contains("no answer within"), "{e}");
        assert!(started.elapsed() < PROBE_TIMEOUT * 3);

        let chatty = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = chatty.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = chatty.accept().await.unwrap();
            let mut word = [0u8; 4];
            s.read_exact(&mut word).await.unwrap();
            let _ = s.write_all(&vec![b'x'; 64 * 1024]).await;
        });
        assert_eq!(ask_srvr(&addr).await.unwrap().len() as u64, SRVR_MAX_BYTES);
    }
}
