//! A small blocking HTTP/1.1 client for the AdminServer tests: one request per connection
//! (`Connection: close`), over plain TCP or TLS (rustls, with a client certificate or none).

use super::pki::Pki;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// What an exchange gave: the status (0 when no HTTP response came), the head (lower-cased) and
/// the body's bytes.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status code, 0 when no response came.
    pub status: u16,
    /// The status line and headers, lower-cased.
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics with the answer when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// A header's value (the name lower-case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    }
}

/// Parses a raw response (no chunked bodies: the AdminServer always sends a length).
pub fn parse(raw: &[u8]) -> Answer {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n");
    let (head, body) = match split {
        Some(i) => (&raw[..i], raw[i + 4..].to_vec()),
        None => (raw, Vec::new()),
    };
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let status = if head.starts_with("http/1.") {
        head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
    } else {
        0
    };
    Answer { status, head, body }
}

/// The request's bytes: `method path`, the `headers` given, a Content-Length when `body` is
/// `Some`.
pub fn request(method: &str, path: &str, headers: &[(&str, String)], body: Option<&[u8]>) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        out.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    bytes
}

/// Sends `raw` over plain TCP and reads the answer to the end.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Answer {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    parse(&out)
}

/// A rustls client trusting the authorities in `ca` (a file of `pki`) and showing `who`'s
/// certificate (`alice`, `bob`, ...: its `.crt`/`.key` files), or none.
pub fn tls_config(pki: &Pki, ca: &str, who: Option<&str>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pki.path(ca)).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match who {
        None => builder.with_no_client_auth(),
        Some(w) => {
            let chain = CertificateDer::pem_file_iter(pki.path(&format!("{w}.crt")))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{w}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    })
}

/// Sends `raw` over TLS with `config` (the server named `localhost`) and reads the answer.
///
/// Errors: the connection, the handshake or the write failed, or no HTTP response came.
pub fn tls_exchange(
    config: Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    raw: &[u8],
) -> Result<Answer, String> {
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(raw).map_err(|e| format!("handshake or write: {e}"))?;
    let mut out = Vec::new();
    let read = tls.read_to_end(&mut out);
    let answer = parse(&out);
    match read {
        // A server that ends the connection without close_notify still gave its answer.
        Err(e) if answer.status == 0 => Err(format!("read: {e}")),
        _ if answer.status == 0 => Err("no HTTP response".into()),
        _ => Ok(answer),
    }
}
