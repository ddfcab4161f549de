//! Connect strings: "host1:port1,host2:port2[/chroot]", as Apache's clients take them.

use crate::core::HostPort;

/// ZooKeeper's client port, used when a host names none.
pub const DEFAULT_PORT: u16 = 2181;

/// A parsed connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    /// The servers, in the order written.
    pub hosts: Vec<HostPort>,
    /// The chroot, `None` when absent or "/".
    pub chroot: Option<String>,
}

/// Why a connect string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectStringError {
    /// No server named.
    #[error("connect string names no server")]
    NoHosts,
    /// A port that is not a number in 1..=65535.
    #[error("bad port in {0:?}")]
    BadPort(String),
    /// An IPv6 address with an unclosed bracket.
    #[error("bad address {0:?}")]
    BadAddress(String),
    /// The chroot is not a valid ZooKeeper path.
    #[error("bad chroot {0:?}")]
    BadChroot(String),
}

impl ConnectString {
    /// Parses `s`. Hosts are separated by commas; a host is `name`, `name:port`, `[v6]` or
    /// `[v6]:port`; everything from the first '/' is the chroot.
    pub fn parse(s: &str) -> Result<ConnectString, ConnectStringError> {
        let (hosts_part, chroot) = match s.find('/') {
            Some(i) => (&s[..i], Some(&s[i..])),
            None => (s, None),
        };
        let chroot = match chroot {
            None | Some("/") => None,
            Some(c) => {
                zk_proto::path::validate_path(c).map_err(|_| ConnectStringError::BadChroot(c.to_owned()))?;
                Some(c.to_owned())
            }
        };
        let mut hosts = Vec::new();
        for h in hosts_part.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            hosts.push(parse_host(h)?);
        }
        if hosts.is_empty() {
            return Err(ConnectStringError::NoHosts);
        }
        Ok(ConnectString { hosts, chroot })
    }
}

fn parse_port(p: &str, whole: &str) -> Result<u16, ConnectStringError> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConnectStringError::BadPort(whole.to_owned())),
    }
}

fn parse_host(h: &str) -> Result<HostPort, ConnectStringError> {
    if let Some(rest) = h.strip_prefix('[') {
        let end = rest.find(']').ok_or_else(|| ConnectStringError::BadAddress(h.to_owned()))?;
        let host = rest[..end].to_owned();
        let port = match &rest[end + 1..] {
            "" => DEFAULT_PORT,
            p => parse_port(
                p.strip_prefix(':').ok_or_else(|| ConnectStringError::BadAddress(h.to_owned()))?,
                h,
            )?,
        };
        return Ok(HostPort { host, port });
    }
    match h.rsplit_once(':') {
        // More than one colon without brackets: a bare IPv6 address, default port.
        Some((host, _)) if host.contains(':') => Ok(HostPort { host: h.to_owned(), port: DEFAULT_PORT }),
        Some((host, port)) => Ok(HostPort { host: host.to_owned(), port: parse_port(port, h)? }),
        None => Ok(HostPort { host: h.to_owned(), port: DEFAULT_PORT }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_and_chroot() {
        let c = ConnectString::parse("a:1,b,[::1]:3/app/x").unwrap();
        assert_eq!(
            c.hosts,
            [
                HostPort { host: "a".into(), port: 1 },
                HostPort { host: "b".into(), port: 2181 },
                HostPort { host: "::1".into(), port: 3 }
            ]
        );
        assert_eq!(c.chroot.as_deref(), Some("/app/x"));
        assert_eq!(ConnectString::parse("a/").unwrap().chroot, None);
        assert_eq!(ConnectString::parse("").unwrap_err(), ConnectStringError::NoHosts);
        assert!(matches!(ConnectString::parse("a:x"), Err(ConnectStringError::BadPort(_))));
        assert!(matches!(ConnectString::parse("a/b/"), Err(ConnectStringError::BadChroot(_))));
    }
}
