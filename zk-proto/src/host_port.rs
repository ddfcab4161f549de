//! A server address as ZooKeeper writes it: `host:port`, with an IPv6 literal in brackets
//! (`[::1]:2181`). One type for the connect strings of clients, the `server.N` and `clientPort`
//! values of zoo.cfg, and the addresses of the election handshake.

use std::fmt;

/// A host (name or literal address) and a port. IPv6 literals are kept without their brackets;
/// [`fmt::Display`] puts them back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// Host name or address literal, without IPv6 brackets.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

/// Why a `host:port` text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostPortError {
    /// Not `host:port` or `[v6]:port` (no colon, or too many outside brackets).
    #[error("not host:port: {0:?}")]
    NotHostPort(String),
    /// The port is not a number from 0 to 65535.
    #[error("not a port: {0:?}")]
    BadPort(String),
}

impl HostPort {
    /// A host and a port.
    pub fn new(host: impl Into<String>, port: u16) -> HostPort {
        HostPort { host: host.into(), port }
    }

    /// Parses `host:port` or `[v6addr]:port`.
    ///
    /// Errors: [`HostPortError::NotHostPort`] when the text is not of that shape,
    /// [`HostPortError::BadPort`] when the port is not a 16-bit number.
    pub fn parse(s: &str) -> Result<HostPort, HostPortError> {
        let (host, port) = split_host_port(s).ok_or_else(|| HostPortError::NotHostPort(s.to_owned()))?;
        let port: u16 = port.parse().map_err(|_| HostPortError::BadPort(port.to_owned()))?;
        Ok(HostPort { host: host.to_owned(), port })
    }

    /// True for `0.0.0.0` and `::`-style wildcard hosts, which nobody can be reached at.
    pub fn is_wildcard(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified())
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Splits `host:port` or `[v6]:port` into its host (without brackets) and port texts; `None`
/// unless there are exactly those two parts. A bracketed host holding another `[` is refused: it
/// would print as `[[h]:port`'s `[h:port`, which does not parse back (found by fuzzing).
pub fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let close = rest.find(']')?;
        let host = &rest[..close];
        let port = rest[close + 1..].strip_prefix(':')?;
        (!port.contains(':') && !host.contains('[')).then_some((host, port))
    } else {
        let mut parts = s.split(':');
        let (host, port) = (parts.next()?, parts.next()?);
        parts.next().is_none().then_some((host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_back() {
        for text in ["h:1", "127.0.0.1:2181", "[::1]:3888", "[fe80::1]:0"] {
            assert_eq!(HostPort::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(HostPort::parse("[::1]:3888").unwrap().host, "::1");
        assert_eq!(HostPort::parse("nocolon"), Err(HostPortError::NotHostPort("nocolon".into())));
        assert_eq!(HostPort::parse("a:b:c"), Err(HostPortError::NotHostPort("a:b:c".into())));
        assert_eq!(HostPort::parse("[::1]3888"), Err(HostPortError::NotHostPort("[::1]3888".into())));
        assert_eq!(HostPort::parse("h:99999"), Err(HostPortError::BadPort("99999".into())));
        assert_eq!(HostPort::parse("[[55]:30"), Err(HostPortError::NotHostPort("[[55]:30".into())));
        assert!(HostPort::parse("0.0.0.0:1").unwrap().is_wildcard());
        assert!(HostPort::parse("[::]:1").unwrap().is_wildcard());
        assert!(!HostPort::parse("localhost:1").unwrap().is_wildcard());
    }
}
