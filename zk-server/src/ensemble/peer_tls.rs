//! TLS between ensemble members: `sslQuorum` and `portUnification`, with the `ssl.quorum.*` keys.
//!
//! As in Apache, one context serves both the quorum port and the election port, and both sides
//! authenticate: the dialling side presents its certificate and checks the accepting side's chain
//! against the trust store, the accepting side does the same the other way (`ssl.quorum.clientAuth`,
//! need by default). With `ssl.quorum.hostnameVerification` (default true) the certificate must
//! also name the peer: the dialled peer by the IP address connected to or by its host as its
//! `server.N` line writes it, the dialling peer by the IP address it connects from (no reverse DNS
//! look-up, as Apache 3.9.5's `allowReverseDnsLookup` default). Names are checked right after the
//! handshake, so chain errors and name errors are told apart in the log.
//!
//! `sslQuorum` decides how this server dials; how it accepts: plain only (neither key), TLS only
//! (`sslQuorum`), or both (`portUnification`: a connection whose first byte opens a TLS handshake
//! record is served with TLS, any other plain), which lets an ensemble switch one server at a time.

use crate::config::ServerConfig;
use crate::ssl_config::SslConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::ClientConfig;
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use zk_proto::tls_verify::ChainOnly;

/// The first byte of a TLS handshake record (a ClientHello): no quorum packet (its type, a small
/// big-endian int) nor election handshake (a negative protocol version, or an old-style server id)
/// begins with it.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Connections one port sets up at once (a TLS handshake, port unification's wait for the first
/// byte, the election handshake): past it the port accepts no more until one is done, so peers
/// that connect and never finish hold a bounded number of tasks and buffers.
pub const MAX_PENDING_SETUPS: usize = 64;

/// A connection between ensemble members, plain or TLS.
#[derive(Debug)]
pub enum PeerStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (either side of the handshake).
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl AsyncRead for PeerStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Why a connection between members was not set up.
#[derive(Debug)]
pub enum SetupError {
    /// The peer went away (closed, or sent nothing in time): worth a debug line at most.
    Gone(String),
    /// The peer is not let in: plain where only TLS is taken, a failed handshake, a certificate
    /// not trusted or not naming the peer.
    Refused(String),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Gone(why) | SetupError::Refused(why) => f.write_str(why),
        }
    }
}

fn handshake_error(e: io::Error, plain_refused: bool) -> SetupError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return SetupError::Gone("closed during the TLS handshake".into());
    }
    let only = if plain_refused { " (sslQuorum without portUnification takes TLS only)" } else { "" };
    SetupError::Refused(format!("TLS handshake failed{only}: {e}"))
}

/// The quorum's TLS contexts and policy, built once at start-up.
pub struct PeerTls {
    /// The contexts new connections use.
    current: RwLock<Contexts>,
    /// With `sslQuorumReloadCertFiles`: the stores' times when last read, and how to read them.
    reload: Option<(crate::tls::StoreStamps, SslConfig, Option<std::path::PathBuf>)>,
    /// `sslQuorum`: dial with TLS, and refuse plain connections unless `take_plain`.
    dial_tls: bool,
    /// `portUnification`: plain connections are taken too.
    take_plain: bool,
    /// `ssl.quorum.hostnameVerification`: the dialled peer's certificate must name it.
    check_dialled: bool,
    /// ... and `ssl.quorum.clientHostnameVerification`: the dialling peer's too.
    check_accepting: bool,
    /// How long port unification waits for a connection's first byte.
    detection_timeout: Duration,
    /// Each server's host as its `server.N` line writes it, for the dialled peer's name check.
    hosts: HashMap<i64, String>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls")
            .field("dial_tls", &self.dial_tls)
            .field("take_plain", &self.take_plain)
            .finish_non_exhaustive()
    }
}

/// Whether the leaf certificate names `ip` (an IP address entry) or `host` (a DNS name entry).
///
/// Errors: it names neither, or cannot be parsed.
fn check_names(chain: Option<&[CertificateDer<'_>]>, ip: IpAddr, host: Option<&str>) -> Result<(), String> {
    let leaf = chain.and_then(|c| c.first()).ok_or("the peer showed no certificate")?;
    let parsed =
        rustls::server::ParsedCertificate::try_from(leaf).map_err(|e| format!("its certificate: {e}"))?;
    if rustls::client::verify_server_name(&parsed, &ServerName::IpAddress(ip.into())).is_ok() {
        return Ok(());
    }
    if let Some(name) = host.and_then(|h| ServerName::try_from(h.to_string()).ok()) {
        if rustls::client::verify_server_name(&parsed, &name).is_ok() {
            return Ok(());
        }
    }
    Err(match host {
        Some(h) if h != ip.to_string() => {
            format!("its certificate names neither {ip} nor {h} (ssl.quorum.hostnameVerification)")
        }
        _ => format!("its certificate does not name {ip} (ssl.quorum.hostnameVerification)"),
    })
}

/// One line per member connection set up with TLS, as Apache logs its quorum handshakes.
fn log_handshake(ip: IpAddr, conn: &rustls::CommonState) {
    let version = conn.protocol_version().and_then(|v| v.as_str()).unwrap_or("?");
    let suite = conn.negotiated_cipher_suite().and_then(|s| s.suite().as_str()).unwrap_or("?");
    tracing::info!("TLS handshake complete with {ip}: {version} {suite}");
}

/// The two sides' contexts, replaced together when the stores are read again.
#[derive(Clone)]
struct Contexts {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
}

/// Reads the stores and builds both sides' contexts. Errors: as [`crate::tls::build`].
fn contexts(ssl: &SslConfig, file: Option<&std::path::Path>) -> Result<Contexts, String> {
    let server = crate::tls::build(ssl, file)?;
    let (provider, versions) = crate::tls::suites_and_versions(ssl, file)?;
    let (roots, ts_at) = crate::tls::trust_roots(ssl, file)?;
    let (chain, key) = crate::tls::key_pair(ssl, file)?;
    // The chain is checked in the handshake, the names right after it (see check_names).
    let verifier = ChainOnly::new(roots).map_err(|e| format!("{ts_at}: {e}"))?;
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("{p}protocol / {p}enabledProtocols / {p}ciphersuites: {e}", p = ssl.prefix))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("{}: {e}", ssl.key("keyStore.location")))?;
    Ok(Contexts {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
        connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
    })
}

impl PeerTls {
    /// The quorum's TLS for `cfg`: None when neither `sslQuorum` nor `portUnification` is set.
    ///
    /// Errors: as [`crate::tls::build`], naming the `ssl.quorum.*` key and its line.
    pub fn load(cfg: &ServerConfig) -> Result<Option<Arc<PeerTls>>, String> {
        if !cfg.ssl_quorum_enabled && !cfg.quorum_port_unification {
            return Ok(None);
        }
        let ssl = &cfg.ssl_quorum;
        let file = cfg.config_file.clone();
        let stamps = cfg.ssl_quorum_reload.then(|| crate::tls::StoreStamps::new(ssl));
        let current = contexts(ssl, file.as_deref())?;
        Ok(Some(Arc::new(PeerTls {
            current: RwLock::new(current),
            reload: stamps.map(|s| (s, ssl.clone(), file)),
            dial_tls: cfg.ssl_quorum_enabled,
            take_plain: cfg.quorum_port_unification,
            check_dialled: ssl.hostname_verification,
            check_accepting: ssl.hostname_verification && ssl.client_hostname_verification,
            detection_timeout: Duration::from_millis(ssl.handshake_detection_timeout_ms.into()),
            hosts: cfg.servers.values().map(|s| (s.id as i64, s.host.clone())).collect(),
        })))
    }

    fn current(&self) -> Contexts {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether `sslQuorumReloadCertFiles` asks for the stores to be watched.
    pub fn reload_wanted(&self) -> bool {
        self.reload.is_some()
    }

    /// Reads the stores again if a file changed since they were last read (with
    /// `sslQuorumReloadCertFiles`); returns whether the contexts were replaced. Connections up
    /// keep theirs; new ones use the new. Stores that do not load are logged and the old
    /// contexts kept (a half-written file is read again on its next change).
    pub fn reload_if_changed(&self) -> bool {
        let Some((stamps, ssl, file)) = &self.reload else { return false };
        if !stamps.changed(ssl) {
            return false;
        }
        match contexts(ssl, file.as_deref()) {
            Ok(c) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = c;
                tracing::info!("quorum TLS key and trust stores read again: new member connections use them");
                true
            }
            Err(e) => {
                tracing::warn!(
                    "quorum TLS stores changed but cannot be used, keeping the previous ones: {e}"
                );
                false
            }
        }
    }
}

/// Sets up an accepted connection: plain without quorum TLS; with it, the TLS handshake (within
/// `limit`), or, with port unification, plain when the first byte does not open a TLS handshake.
///
/// Errors: a plain connection where only TLS is taken, a failed or slow handshake, a certificate
/// that is not trusted or does not name the peer.
pub async fn accept(
    tls: Option<&PeerTls>,
    tcp: TcpStream,
    limit: Duration,
) -> Result<PeerStream, SetupError> {
    let _ = tcp.set_nodelay(true);
    let Some(t) = tls else { return Ok(PeerStream::Plain(tcp)) };
    if t.take_plain {
        let mut first = [0u8; 1];
        match tokio::time::timeout(t.detection_timeout, tcp.peek(&mut first)).await {
            Err(_) => return Err(SetupError::Gone("sent nothing in time to tell TLS from plain".into())),
            Ok(Ok(0)) => return Err(SetupError::Gone("closed before sending anything".into())),
            Ok(Err(e)) => return Err(SetupError::Gone(format!("read: {e}"))),
            Ok(Ok(_)) if first[0] != TLS_HANDSHAKE_RECORD => return Ok(PeerStream::Plain(tcp)),
            Ok(Ok(_)) => {}
        }
    }
    let ip = tcp.peer_addr().map_err(|e| SetupError::Gone(e.to_string()))?.ip();
    let stream = match tokio::time::timeout(limit, t.current().acceptor.accept(tcp)).await {
        Err(_) => return Err(SetupError::Gone("TLS handshake timed out".into())),
        Ok(Err(e)) => return Err(handshake_error(e, !t.take_plain)),
        Ok(Ok(s)) => s,
    };
    // A peer without a certificate got this far only with clientAuth want or none; as in Apache,
    // there is then no name to check.
    let chain = stream.get_ref().1.peer_certificates();
    if t.check_accepting && chain.is_some() {
        check_names(chain, ip, None).map_err(SetupError::Refused)?;
    }
    log_handshake(ip, stream.get_ref().1);
    Ok(PeerStream::Tls(Box::new(stream.into())))
}

/// Sets up a connection this server dialled to server `sid`: the TLS handshake (within `limit`)
/// when `sslQuorum` is set, else plain.
///
/// Errors: a failed or slow handshake, a certificate that is not trusted or does not name the
/// peer.
pub async fn connect(
    tls: Option<&PeerTls>,
    tcp: TcpStream,
    sid: i64,
    limit: Duration,
) -> Result<PeerStream, SetupError> {
    let _ = tcp.set_nodelay(true);
    let Some(t) = tls.filter(|t| t.dial_tls) else { return Ok(PeerStream::Plain(tcp)) };
    let ip = tcp.peer_addr().map_err(|e| SetupError::Gone(e.to_string()))?.ip();
    let stream = match tokio::time::timeout(
        limit,
        t.current().connector.connect(ServerName::IpAddress(ip.into()), tcp),
    )
    .await
    {
        Err(_) => return Err(SetupError::Gone("TLS handshake timed out".into())),
        Ok(Err(e)) => return Err(handshake_error(e, false)),
        Ok(Ok(s)) => s,
    };
    if t.check_dialled {
        check_names(stream.get_ref().1.peer_certificates(), ip, t.hosts.get(&sid).map(String::as_str))
            .map_err(SetupError::Refused)?;
    }
    log_handshake(ip, stream.get_ref().1);
    Ok(PeerStream::Tls(Box::new(stream.into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(sans: &[&str]) -> CertificateDer<'static> {
        let params = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("params");
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("cert").der().clone()
    }

    /// The names Apache's hostname verification accepts: the address, or the host dialled.
    #[test]
    fn a_certificate_must_name_the_address_or_the_host_dialled() {
        let ip: IpAddr = "127.0.0.1".parse().expect("ip");
        let by_ip = [cert(&["127.0.0.1"])];
        assert_eq!(check_names(Some(&by_ip), ip, None), Ok(()));
        assert_eq!(check_names(Some(&by_ip), ip, Some("zk1.example")), Ok(()));
        let by_name = [cert(&["zk1.example"])];
        assert_eq!(check_names(Some(&by_name), ip, Some("zk1.example")), Ok(()));
        let e = check_names(Some(&by_name), ip, None).unwrap_err();
        assert!(e.contains("does not name 127.0.0.1"), "{e}");
        let e = check_names(Some(&by_name), ip, Some("zk2.example")).unwrap_err();
        assert!(e.contains("neither 127.0.0.1 nor zk2.example"), "{e}");
        assert!(check_names(None, ip, None).is_err());
        assert!(check_names(Some(&[CertificateDer::from(vec![1u8, 2, 3])]), ip, None).is_err());
    }

    /// CVE-2026-24281: the peer's address is never turned into a name. A certificate naming only
    /// `localhost` (what 127.0.0.1 resolves back to) does not pass for a peer at 127.0.0.1 that
    /// no `server.N` line calls `localhost`, as it would with Apache's old reverse-DNS fallback.
    #[test]
    fn no_reverse_dns_fallback() {
        let ip: IpAddr = "127.0.0.1".parse().expect("ip");
        let by_name = [cert(&["localhost"])];
        let e = check_names(Some(&by_name), ip, None).unwrap_err();
        assert!(e.contains("does not name 127.0.0.1"), "{e}");
        assert!(check_names(Some(&by_name), ip, Some("127.0.0.1")).is_err());
        // The host of the server.N line is checked as written.
        assert_eq!(check_names(Some(&by_name), ip, Some("localhost")), Ok(()));
    }

    /// Without quorum TLS every accepted connection stays plain, with nothing read from it.
    #[tokio::test]
    async fn without_quorum_tls_connections_stay_plain() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _peer = TcpStream::connect(addr).await.expect("connect");
        let (tcp, _) = listener.accept().await.expect("accept");
        assert!(matches!(accept(None, tcp, Duration::from_secs(1)).await, Ok(PeerStream::Plain(_))));
    }
}
