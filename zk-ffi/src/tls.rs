//! TLS for `zookeeper_init_ssl`, on rustls (ring) rather than OpenSSL: the certificate string of
//! Apache's C API (`"ca"` or `"ca,cert,key,passwd"`), and the TLS side of a connection the I/O
//! thread drives on a non-blocking socket.
//!
//! As Apache's C client, the server's certificate chain is checked against the CA file and its
//! host name is not (a cluster is usually reached by address; the C client never checked names).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use zk_client::tls_verify::ChainOnly;

/// Largest PEM file read: certificates and keys are a few KiB each.
const MAX_PEM_BYTES: u64 = 4 * 1024 * 1024;

fn read_pem(what: &str, path: &str) -> Result<Vec<u8>, String> {
    let len = std::fs::metadata(path).map_err(|e| format!("{what} {path}: {e}"))?.len();
    if len > MAX_PEM_BYTES {
        return Err(format!("{what} {path}: {len} bytes is too large"));
    }
    std::fs::read(path).map_err(|e| format!("{what} {path}: {e}"))
}

fn certs(what: &str, path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(what, path)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what} {path}: no CERTIFICATE block"));
    }
    Ok(certs)
}

/// The client context for `zookeeper_init_ssl`'s certificate string: `"ca"` (the server's
/// authority only) or `"ca,cert,key[,passwd]"` (also this client's certificate chain and its
/// private key, decrypted with `passwd` when it is an encrypted PKCS#8 one).
///
/// Errors: a part missing, a file that cannot be read or holds nothing usable, or a key that does
/// not match its certificate, in words for the log.
pub fn config_from_cert_string(spec: &str) -> Result<Arc<ClientConfig>, String> {
    let parts: Vec<&str> = spec.split(',').collect();
    let (ca, identity) = match parts.as_slice() {
        [ca] => (*ca, None),
        [ca, cert, key] => (*ca, Some((*cert, *key, ""))),
        [ca, cert, key, passwd] => (*ca, Some((*cert, *key, *passwd))),
        _ => return Err(format!("\"{spec}\" is neither \"ca\" nor \"ca,cert,key,passwd\"")),
    };
    if ca.is_empty() {
        return Err("the CA file is empty".into());
    }
    let mut roots = RootCertStore::empty();
    for c in certs("CA file", ca)? {
        roots.add(c).map_err(|e| format!("CA file {ca}: {e}"))?;
    }
    let verifier = ChainOnly::new(roots).map_err(|e| format!("CA file {ca}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key, passwd)) => {
            let chain = certs("certificate", cert)?;
            let key_der = private_key(key, &read_pem("key", key)?, passwd)?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| format!("certificate {cert} and key {key}: {e}"))?
        }
    };
    Ok(Arc::new(config))
}

/// The private key in the PEM text of file `path`: an unencrypted one (PKCS#8, PKCS#1 or SEC1),
/// or an `ENCRYPTED PRIVATE KEY` (PKCS#8 with PBES2) decrypted with `passwd`, as the OpenSSL build
/// of Apache's C client does.
fn private_key(path: &str, pem: &[u8], passwd: &str) -> Result<PrivateKeyDer<'static>, String> {
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = String::from_utf8_lossy(pem);
    let Some(begin) = text.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") else {
        return PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("key {path}: {e}"));
    };
    if passwd.is_empty() {
        return Err(format!("key {path} is encrypted and the certificate string has no passwd"));
    }
    let block = text[begin..].find(END).map(|n| &text[begin..begin + n + END.len()]);
    let block = block.ok_or_else(|| format!("key {path}: unterminated ENCRYPTED PRIVATE KEY"))?;
    let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes()).map_err(|e| format!("key {path}: {e}"))?;
    let info =
        pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| format!("key {path}: {e}"))?;
    let plain =
        info.decrypt(passwd).map_err(|e| format!("key {path}: cannot decrypt it with passwd: {e}"))?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
}

/// The name sent in the TLS handshake for `host` (an address or a DNS name; the certificate is
/// not checked against it).
fn server_name(host: &str) -> ServerName<'static> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("localhost").expect("valid name"))
}

/// Runs the handshake on the blocking `stream` (whose timeouts bound it).
///
/// Errors: the handshake failed or timed out.
pub fn handshake(
    config: &Arc<ClientConfig>,
    host: &str,
    stream: &mut TcpStream,
) -> std::io::Result<ClientConnection> {
    let mut tls = ClientConnection::new(config.clone(), server_name(host)).map_err(std::io::Error::other)?;
    while tls.is_handshaking() {
        tls.complete_io(stream)?;
    }
    // What the last flight left unsent.
    while tls.wants_write() {
        tls.write_tls(stream)?;
    }
    Ok(tls)
}

/// Reads what the non-blocking socket has through `tls`, handing each piece of plaintext to
/// `sink`. Returns false when the connection is over (closed, failed, or TLS refused it).
pub fn read_available(
    tls: &mut ClientConnection,
    stream: &mut TcpStream,
    mut sink: impl FnMut(&[u8]),
) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tls.read_tls(stream) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
        if tls.process_new_packets().is_err() {
            // Tell the server why (an alert), best effort.
            let _ = tls.write_tls(stream);
            return false;
        }
        loop {
            match tls.reader().read(&mut buf) {
                // close_notify: the server ended the connection cleanly.
                Ok(0) => return false,
                Ok(n) => sink(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => return false,
            }
        }
    }
}

/// Moves `wbuf` into TLS and TLS records onto the non-blocking socket until either is empty or
/// the socket is full. Returns false when the connection failed.
pub fn write_available(tls: &mut ClientConnection, stream: &mut TcpStream, wbuf: &mut Vec<u8>) -> bool {
    loop {
        while tls.wants_write() {
            match tls.write_tls(stream) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
        if wbuf.is_empty() {
            return true;
        }
        match tls.writer().write(wbuf) {
            Ok(0) => return true,
            Ok(n) => {
                wbuf.drain(..n);
            }
            Err(_) => return false,
        }
    }
}

/// Sends what is left and a close_notify on the (now blocking) socket, best effort.
pub fn finish(tls: &mut ClientConnection, stream: &mut TcpStream, wbuf: &[u8]) {
    let _ = tls.writer().write_all(wbuf);
    tls.send_close_notify();
    while tls.wants_write() {
        if tls.write_tls(stream).is_err() {
            break;
        }
    }
}

/// One request and its whole answer over TLS on a blocking `stream` (the read-write probe's
/// `isro`), at most `max` bytes of it.
pub fn ask(
    config: &Arc<ClientConfig>,
    host: &str,
    mut stream: TcpStream,
    request: &[u8],
    max: usize,
) -> Option<Vec<u8>> {
    let tls = handshake(config, host, &mut stream).ok()?;
    let mut s = rustls::StreamOwned::new(tls, stream);
    s.write_all(request).ok()?;
    s.flush().ok()?;
    let mut answer = Vec::with_capacity(max);
    // A server closing without close_notify ends the answer too.
    let _ = s.take(max as u64).read_to_end(&mut answer);
    Some(answer)
}
