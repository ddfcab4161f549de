//! `zkrs-server status`: what zkServer.sh's `status` tells of a running server (its mode), plus its
//! zxid and connection count, read with the `srvr` four-letter word on the configured client port.

use crate::config::ServerConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long `status` waits to connect and for the answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Largest `srvr` answer read.
const MAX_ANSWER: u64 = 64 * 1024;

/// What a running server reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// `standalone`, `leader`, `follower`, `observer` or `read-only`.
    pub mode: String,
    /// The last zxid, as `srvr` prints it (`0x...`).
    pub zxid: String,
    /// Client connections, the asking one included (as `srvr` counts).
    pub connections: String,
}

/// Why no status could be had.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// Nothing answered on the port.
    #[error("Error contacting service. It is probably not running. ({addr}: {source})")]
    Down {
        /// Where it was asked.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The server answered, but not with statistics (it is electing or syncing, or `srvr` is not
    /// in `4lw.commands.whitelist`).
    #[error("{0}")]
    NotServing(String),
    /// The configuration names no client port to ask.
    #[error("no client port in the configuration")]
    NoClientPort,
}

/// The address `status` asks: the configured client address, the loopback one when the server
/// listens on every interface.
pub fn client_addr(cfg: &ServerConfig) -> Result<SocketAddr, StatusError> {
    let hp = cfg.client_address.as_ref().ok_or(StatusError::NoClientPort)?;
    let host = match hp.host.as_str() {
        "" | "0.0.0.0" => "127.0.0.1",
        "::" => "::1",
        h => h,
    };
    (host, hp.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| StatusError::NotServing(format!("cannot resolve {host}")))
}

/// Asks the server at `addr` with `srvr`.
pub fn query(addr: SocketAddr) -> Result<Status, StatusError> {
    parse(&ask(addr, "srvr")?)
}

/// Sends the four-letter word `word` to the server at `addr` and returns its answer, of at most
/// 64 KiB (the rest is not read), as text.
///
/// Errors: [`StatusError::Down`] when nothing answers or the connection fails.
pub fn ask(addr: SocketAddr, word: &str) -> Result<String, StatusError> {
    let down = |source| StatusError::Down { addr, source };
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(down)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(down)?;
    s.write_all(word.as_bytes()).map_err(down)?;
    let mut bytes = Vec::new();
    s.take(MAX_ANSWER).read_to_end(&mut bytes).map_err(down)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads `srvr`'s answer.
pub fn parse(text: &str) -> Result<Status, StatusError> {
    let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string());
    match (field("Mode:"), field("Zxid:"), field("Connections:")) {
        (Some(mode), Some(zxid), Some(connections)) => Ok(Status { mode, zxid, connections }),
        _ => Err(StatusError::NotServing(text.trim().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_srvr() {
        let text = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nReceived: 1\nSent: 0\n\
                    Connections: 1\nOutstanding: 0\nZxid: 0x2\nMode: follower\nNode count: 5\n";
        assert_eq!(
            parse(text).unwrap(),
            Status { mode: "follower".into(), zxid: "0x2".into(), connections: "1".into() }
        );
        let busy = "This ZooKeeper instance is not currently serving requests\n";
        assert!(
            matches!(parse(busy), Err(StatusError::NotServing(t)) if t.contains("not currently serving"))
        );
    }
}
