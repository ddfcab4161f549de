//! Running Fast Leader Election over the election port until this server decides.

use super::election_net::{ElectionNet, Received};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tracing::{debug, info};
use zk_quorum::election::{ElectionAction, FastLeaderElection, Vote};
use zk_quorum::wire::PeerState;

/// What an election decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The leader's server id.
    pub leader: i64,
    /// The vote that won.
    pub vote: Vote,
    /// This server's part: LEADING, FOLLOWING or OBSERVING.
    pub state: PeerState,
    /// How long the election took.
    pub took: Duration,
}

/// Drives `fle` (already looking) with the notifications `inbox` brings until it decides. Times
/// count from `origin` on the monotonic clock.
///
/// Errors: the election port's inbox closed (the server is shutting down).
pub async fn decide(
    fle: &mut FastLeaderElection,
    net: &ElectionNet,
    inbox: &mut mpsc::Receiver<Received>,
    origin: Instant,
) -> Result<Decision, &'static str> {
    let started = Instant::now();
    let now_ms = || origin.elapsed().as_millis() as u64;
    let mut down = net.peers_down();
    fle.set_peers_down(down.borrow_and_update().clone());
    loop {
        while let Some(a) = fle.poll_action() {
            match a {
                ElectionAction::Send { to, notification } => net.send(to, &notification),
                ElectionAction::Decided { leader, vote, state } => {
                    let took = started.elapsed();
                    info!("election decided in {took:.1?}: leader {leader}, this server {state:?}");
                    return Ok(Decision { leader, vote, state, took });
                }
            }
        }
        let wait = fle
            .poll_timeout()
            .map(|t| Duration::from_millis(t.saturating_sub(now_ms())))
            .unwrap_or(Duration::from_secs(60));
        tokio::select! {
            got = inbox.recv() => match got {
                Some((from, n)) => {
                    debug!("notification from {from}: {n:?}");
                    fle.handle_notification(from, n, now_ms());
                }
                None => return Err("the election port stopped"),
            },
            _ = tokio::time::sleep(wait) => fle.handle_timeout(now_ms()),
            Ok(()) = down.changed() => fle.set_peers_down(down.borrow_and_update().clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use zk_quorum::config::QuorumConfig;
    use zk_quorum::election::{ElectionConfig, PeerData};
    use zk_quorum::wire::HostPort;

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("port")
    }

    /// Three servers on loopback elect one leader through real election connections: the one
    /// with the newest (epoch, zxid), then the largest id, as Apache's rules choose.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_servers_elect_one_leader_over_tcp() {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let lines: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (q, e))| format!("server.{}=127.0.0.1:{q}:{e}:participant", i + 1))
            .collect();
        let cfg = QuorumConfig::parse(&format!("{}\nversion=0", lines.join("\n"))).expect("config");
        // Server 1 has the newest zxid: it must win although its id is the smallest.
        let data = [(0x1_0000_0009_i64, 1_i64), (0x1_0000_0005, 1), (0x1_0000_0005, 1)];
        let origin = Instant::now();
        let mut tasks = Vec::new();
        for sid in 1..=3_i64 {
            let e = ports[(sid - 1) as usize].1;
            let peers: HashMap<i64, SocketAddr> = (1..=3_i64)
                .filter(|&p| p != sid)
                .map(|p| (p, format!("127.0.0.1:{}", ports[(p - 1) as usize].1).parse().expect("addr")))
                .collect();
            let cfg = cfg.clone();
            let (zxid, epoch) = data[(sid - 1) as usize];
            tasks.push(tokio::spawn(async move {
                let listen: SocketAddr = format!("127.0.0.1:{e}").parse().expect("addr");
                let (net, mut inbox) = ElectionNet::start(
                    sid,
                    listen,
                    HostPort { host: "127.0.0.1".into(), port: e },
                    peers,
                    crate::ensemble::election_net::DEFAULT_CNX_TIMEOUT,
                    Default::default(),
                    false,
                )
                .await
                .expect("election port");
                let data = PeerData { last_logged_zxid: zxid, current_epoch: epoch };
                let mut fle = FastLeaderElection::new(ElectionConfig::new(sid, &cfg), data, 0);
                let d =
                    tokio::time::timeout(Duration::from_secs(20), decide(&mut fle, &net, &mut inbox, origin))
                        .await
                        .expect("decided in time")
                        .expect("decided");
                (sid, d)
            }));
        }
        let mut decisions = Vec::new();
        for t in tasks {
            decisions.push(t.await.expect("task"));
        }
        for (sid, d) in &decisions {
            assert_eq!(d.leader, 1, "server {sid}: {d:?}");
            let want = if *sid == 1 { PeerState::Leading } else { PeerState::Following };
            assert_eq!(d.state, want, "server {sid}");
        }
    }
}
