//! HTTPS on the AdminServer, as Apache ZooKeeper's JettyAdminServer offers it:
//! `admin.forceHttps` serves TLS only, `admin.portUnification` serves TLS and plain HTTP on the
//! one port, a connection's first byte telling them apart (`admin.forceHttps` wins when both are
//! set). The key and trust stores are the `ssl.quorum.*` ones (Apache's QuorumX509Util); of the
//! other `ssl.quorum.*` keys none applies (Apache hands Jetty the two stores alone, so its
//! protocol versions and suites are Jetty's defaults, here rustls's: TLS 1.2 and 1.3). A client
//! certificate is asked for only with `admin.needClientAuth` (Apache 3.9), and is then required.
//! With `sslQuorumReloadCertFiles` the stores are read again when their files change.
//!
//! Responses over TLS carry `Strict-Transport-Security` ([`STS_VALUE`]), as Jetty's
//! SecureRequestCustomizer adds it with the max-age Apache sets.

use crate::config::ServerConfig;
use crate::ssl_config::{ClientAuth, Setting};
use crate::tls::ServerTls;
use std::sync::Arc;
use tokio::net::TcpStream;

/// The `Strict-Transport-Security` value of every response over TLS: a day, sub-domains
/// included (Apache's `DEFAULT_STS_MAX_AGE`).
pub const STS_VALUE: &str = "max-age=86400; includeSubDomains";

/// The first byte of a TLS handshake record (a ClientHello); no HTTP request line begins with it.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The AdminServer's TLS context and whether plain HTTP is taken too.
#[derive(Debug)]
pub struct AdminTls {
    context: ServerTls,
    /// `admin.portUnification` without `admin.forceHttps`.
    plain_too: bool,
}

/// An accepted AdminServer connection, once told TLS or plain and, if TLS, after its handshake.
#[derive(Debug)]
pub enum AdminStream {
    /// Plain HTTP (port unification, first byte not a TLS record).
    Plain(TcpStream),
    /// HTTPS.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl AdminTls {
    /// The AdminServer's TLS for `cfg`: `None` when it serves plain HTTP only (neither
    /// `admin.forceHttps` nor `admin.portUnification`, or the AdminServer is disabled).
    ///
    /// Errors: a store that cannot be read or used (as [`crate::tls::build`]), naming the
    /// `ssl.quorum.*` key and its line. Apache loads the trust store even when it asks for no
    /// client certificate, so an unusable one is an error either way.
    pub fn load(cfg: &ServerConfig) -> Result<Option<AdminTls>, String> {
        if cfg.admin_https_wanted_by().is_none() {
            return Ok(None);
        }
        let mut ssl = cfg.ssl_quorum.clone();
        let auth = if cfg.admin_need_client_auth { ClientAuth::Need } else { ClientAuth::None };
        ssl.client_auth = Setting { value: auth, line: 0 };
        ssl.protocol = None;
        ssl.enabled_protocols = None;
        ssl.ciphersuites = None;
        ssl.cert_reload = cfg.ssl_quorum_reload;
        let file = cfg.config_file.as_deref();
        crate::tls::trust_roots(&ssl, file)?;
        let context = ServerTls::load(&ssl, file)?;
        Ok(Some(AdminTls { context, plain_too: cfg.admin_force_https.is_none() }))
    }

    /// Whether plain HTTP is served too (`admin.portUnification` alone).
    pub fn plain_too(&self) -> bool {
        self.plain_too
    }

    /// With `sslQuorumReloadCertFiles`, starts polling the stores' files; new connections use
    /// what was read last. A change that does not load is logged and the old context kept.
    pub fn watch_stores(self: &Arc<Self>) {
        if self.context.reload_wanted() {
            let tls = self.clone();
            crate::tls::poll_stores(move || tls.context.reload_if_changed());
        }
    }

    /// The ids an HTTPS client's certificate proves, as on the secure client port (`x509`, and
    /// `super` for the configured x509 super user); none without a certificate.
    ///
    /// Errors: the certificate's subject cannot be read.
    pub fn peer_ids(
        &self,
        stream: &tokio_rustls::server::TlsStream<TcpStream>,
    ) -> Result<Vec<zk_proto::Id>, crate::x509::DnError> {
        self.context.peer_ids(stream.get_ref().1.peer_certificates())
    }

    /// Sets an accepted connection up: with port unification, plain when its first byte does
    /// not open a TLS record (a connection closed before sending anything counts as plain, and
    /// ends there); else the TLS handshake. The caller bounds the time this takes.
    ///
    /// Errors: the first byte cannot be read, or the handshake fails (a plain request where
    /// only TLS is served, a client certificate missing or not trusted with
    /// `admin.needClientAuth`, a protocol error).
    pub async fn accept(&self, tcp: TcpStream) -> std::io::Result<AdminStream> {
        if self.plain_too {
            let mut first = [0u8; 1];
            if tcp.peek(&mut first).await? == 0 || first[0] != TLS_HANDSHAKE_RECORD {
                return Ok(AdminStream::Plain(tcp));
            }
        }
        let stream = self.context.acceptor().accept(tcp).await?;
        Ok(AdminStream::Tls(Box::new(stream)))
    }
}
