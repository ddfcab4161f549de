//! Certificates for the TLS tests, made with rcgen: an authority, the server and client
//! certificates it issues, and a directory of them as PEM key and trust stores.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair,
};

/// A self-signed certificate authority.
pub struct Authority {
    /// Its certificate and key.
    pub issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    /// A new authority named `name` (its CN).
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Authority { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    /// A certificate for `subject` (most general attribute first, as in `openssl -subj`): its PEM
    /// and its private key's (PKCS#8). A server certificate names localhost and 127.0.0.1.
    pub fn issue(&self, subject: &[(DnType, &str)], server: bool) -> (String, String) {
        let sans = if server { vec!["localhost".to_string(), "127.0.0.1".to_string()] } else { vec![] };
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name = DistinguishedName::new();
        for (t, v) in subject {
            params.distinguished_name.push(t.clone(), *v);
        }
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// The certificates of one test, as PEM files in a directory of their own.
pub struct Pki {
    /// The directory the files are in, removed on drop.
    pub dir: tempfile::TempDir,
}

impl Pki {
    /// The authority `ca.pem`; `server.pem` (key then certificate, Apache's PEM key store);
    /// `alice`, `bob` and `admin` `.crt`/`.key`; `stranger` from another authority; and
    /// `server2.pem`, a server certificate from that other authority (`ca2.pem`).
    pub fn new() -> Pki {
        let dir = tempfile::Builder::new().prefix("zkrs-tls-").tempdir().unwrap();
        let pki = Pki { dir };
        let ca = Authority::new("zkrs test CA");
        let other = Authority::new("another CA");
        pki.write("ca.pem", &ca.issuer.pem());
        pki.write("ca2.pem", &other.issuer.pem());
        let (cert, key) = ca.issue(&[(DnType::CommonName, "localhost")], true);
        pki.write("server.pem", &format!("{key}{cert}"));
        let (cert, key) = other.issue(&[(DnType::CommonName, "localhost")], true);
        pki.write("server2.pem", &format!("{key}{cert}"));
        let person = |cn| {
            vec![
                (DnType::CountryName, "US"),
                (DnType::OrganizationName, "Example"),
                (DnType::OrganizationalUnitName, "Eng"),
                (DnType::CommonName, cn),
            ]
        };
        for (name, subject, auth) in [
            ("alice", person("alice"), &ca),
            ("bob", person("bob"), &ca),
            ("admin", vec![(DnType::OrganizationName, "Example"), (DnType::CommonName, "admin")], &ca),
            ("stranger", person("alice"), &other),
        ] {
            let (cert, key) = auth.issue(&subject, false);
            pki.write(&format!("{name}.crt"), &cert);
            pki.write(&format!("{name}.key"), &key);
        }
        pki
    }

    /// Writes `text` into the file `name`.
    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).unwrap();
    }

    /// The path of the file `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The path of the file `name`, as text for zoo.cfg.
    pub fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}
