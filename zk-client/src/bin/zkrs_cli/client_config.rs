//! The Java client's TLS and SASL settings, read where zkCli.sh users keep them: the
//! `-client-configuration` properties file and the `-D` flags of `CLIENT_JVMFLAGS` / `JVMFLAGS`
//! (zkCli.sh hands those to the JVM as system properties). The file wins over the flags, as in
//! Apache's `ZKClientConfig`.

use std::collections::HashMap;
use std::path::Path;
use zk_client::jaas;
use zk_client::{ClientTls, SaslCredentials};

/// Largest client configuration file read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// `key=value` (or `key: value`) lines of a Java properties file, without comments; enough of
/// the format for client settings (no line continuations or escapes).
fn properties(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let at = l.find(['=', ':'])?;
            Some((l[..at].trim().to_string(), l[at + 1..].trim().to_string()))
        })
        .collect()
}

/// `-Dkey=value` words of JVM flags (a later one wins, as in Java).
fn system_properties(flags: &str) -> HashMap<String, String> {
    jaas::system_properties(flags).into_iter().collect()
}

/// The client settings: `CLIENT_JVMFLAGS` and `JVMFLAGS` system properties, then the file.
///
/// Errors: the file cannot be read.
pub fn load(file: Option<&Path>) -> Result<HashMap<String, String>, String> {
    let mut props = HashMap::new();
    for var in ["JVMFLAGS", "CLIENT_JVMFLAGS"] {
        if let Ok(flags) = std::env::var(var) {
            props.extend(system_properties(&flags));
        }
    }
    if let Some(path) = file {
        let read_err = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
        let len = std::fs::metadata(path).map_err(read_err)?.len();
        if len > MAX_CONFIG_BYTES {
            return Err(format!("{}: {len} bytes is too large for a client configuration", path.display()));
        }
        props.extend(properties(&std::fs::read_to_string(path).map_err(read_err)?));
    }
    Ok(props)
}

/// TLS as the settings ask for it: `None` unless `zookeeper.client.secure=true`; then the PEM
/// trust store (`zookeeper.ssl.trustStore.location`) and, when set, the PEM key store holding this
/// client's key and certificate chain (`zookeeper.ssl.keyStore.location`); server names checked
/// unless `zookeeper.ssl.hostnameVerification=false`.
///
/// Errors: a secure client without a trust store, a store type other than PEM, an unreadable or
/// unusable file, each naming the property.
pub fn tls(props: &HashMap<String, String>) -> Result<Option<ClientTls>, String> {
    let get = |k: &str| props.get(k).map(String::as_str).filter(|v| !v.is_empty());
    if !get("zookeeper.client.secure").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    for key in ["zookeeper.ssl.keyStore.type", "zookeeper.ssl.trustStore.type"] {
        if let Some(t) = get(key).filter(|t| !t.eq_ignore_ascii_case("PEM")) {
            return Err(format!("{key}={t}: zkrs-cli reads PEM stores only"));
        }
    }
    if get("zookeeper.ssl.keyStore.password").is_some()
        || get("zookeeper.ssl.keyStore.passwordPath").is_some()
    {
        eprintln!("zookeeper.ssl.keyStore.password is not used: zkrs-cli reads unencrypted keys");
    }
    let check_names =
        !get("zookeeper.ssl.hostnameVerification").is_some_and(|v| v.eq_ignore_ascii_case("false"));
    let ca = get("zookeeper.ssl.trustStore.location")
        .ok_or("zookeeper.client.secure=true needs zookeeper.ssl.trustStore.location (a PEM file of CA certificates)")?;
    let key_store = get("zookeeper.ssl.keyStore.location").map(Path::new);
    let identity = key_store.map(|k| (k, k));
    let tls = if check_names {
        ClientTls::from_pem_files(Path::new(ca), identity)
    } else {
        ClientTls::from_pem_files_any_name(Path::new(ca), identity)
    };
    tls.map(Some).map_err(|e| format!("zookeeper.ssl.*: {e}"))
}

/// How the shell authenticates with SASL, from the JAAS file's `Client` section.
#[derive(Debug)]
pub enum Sasl {
    /// DIGEST-MD5 with the section's `username` and `password`.
    DigestMd5(SaslCredentials),
    /// GSSAPI (Kerberos): the section uses `Krb5LoginModule`.
    #[cfg(feature = "kerberos")]
    Kerberos(zk_client::gssapi::KerberosOptions),
}

/// The JAAS login module of Kerberos logins.
const KRB5_LOGIN_MODULE: &str = "com.sun.security.auth.module.Krb5LoginModule";

/// SASL as Apache's Java client finds it: the JAAS file's `Client` section
/// (`zookeeper.sasl.clientconfig` names another), the file named by
/// `java.security.auth.login.config`. A section with `Krb5LoginModule` means GSSAPI (its
/// `useKeyTab`, `keyTab`, `principal`, `useTicketCache`, `ticketCache` options, and the
/// `zookeeper.sasl.client.username`, `zookeeper.server.principal`, `zookeeper.server.realm`,
/// `zookeeper.sasl.client.canonicalize.hostname` properties); otherwise its `username` and
/// `password` options mean DIGEST-MD5. None when the file is not named, when
/// `zookeeper.sasl.client=false`, or when the file has no such section (as the Java client,
/// which then goes on without SASL).
///
/// Errors: the file cannot be read or parsed (file and line), the section lacks a username or
/// password, or a Kerberos section cannot be used (no keytab or ticket cache to log in with,
/// or a shell built without the `kerberos` feature).
pub fn sasl(props: &HashMap<String, String>) -> Result<Option<Sasl>, String> {
    let get = |k: &str| props.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let Some(file) = get("java.security.auth.login.config") else { return Ok(None) };
    if get("zookeeper.sasl.client").is_some_and(|v| v.eq_ignore_ascii_case("false")) {
        return Ok(None);
    }
    let section = get("zookeeper.sasl.clientconfig").unwrap_or("Client");
    let login = jaas::read(Path::new(file)).map_err(|e| e.to_string())?;
    let Some(modules) = login.section(section) else {
        eprintln!("JAAS file {file} has no '{section}' section: not authenticating with SASL");
        return Ok(None);
    };
    if let Some(krb5) = modules.iter().find(|m| m.class == KRB5_LOGIN_MODULE) {
        return kerberos(props, &krb5.options)
            .map(Some)
            .map_err(|e| format!("JAAS file {file}, section {section}: {e}"));
    }
    let option = |name: &str| {
        modules.iter().flat_map(|m| m.options.iter()).find(|(k, _)| k == name).map(|(_, v)| v.clone())
    };
    match (option("username"), option("password")) {
        (Some(user), Some(password)) => Ok(Some(Sasl::DigestMd5(SaslCredentials::new(user, password)))),
        _ => Err(format!("JAAS file {file}: section {section} needs username and password options")),
    }
}

#[cfg(feature = "kerberos")]
fn kerberos(props: &HashMap<String, String>, options: &[(String, String)]) -> Result<Sasl, String> {
    let credentials = zk_client::gssapi::Credentials::from_jaas(options)?;
    let prop = |k: &str| props.get(k).cloned();
    Ok(Sasl::Kerberos(zk_client::gssapi::KerberosOptions::from_properties(credentials, &prop)))
}

#[cfg(not(feature = "kerberos"))]
fn kerberos(_: &HashMap<String, String>, _: &[(String, String)]) -> Result<Sasl, String> {
    Err(format!("{KRB5_LOGIN_MODULE} (Kerberos) needs zkrs-cli built with zk-client's `kerberos` feature"))
}

/// The Kerberos configuration file Java is told of (`java.security.krb5.conf`), which the
/// system's library reads from `KRB5_CONFIG`.
pub fn krb5_config(props: &HashMap<String, String>) -> Option<String> {
    props.get("java.security.krb5.conf").filter(|v| !v.is_empty()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_flags() {
        let p = properties(
            "# c\nzookeeper.client.secure = true\n!x\nzookeeper.ssl.trustStore.location:/ca.pem\nbad\n",
        );
        assert_eq!(p.get("zookeeper.client.secure").map(String::as_str), Some("true"));
        assert_eq!(p.get("zookeeper.ssl.trustStore.location").map(String::as_str), Some("/ca.pem"));
        assert_eq!(p.len(), 2);
        let f = system_properties("-Xmx1g -Dzookeeper.client.secure=true -Dfoo");
        assert_eq!(f.len(), 2);
        assert_eq!(tls(&HashMap::new()).unwrap().map(|_| ()), None);
        let secure: HashMap<String, String> =
            [("zookeeper.client.secure".to_string(), "true".to_string())].into();
        assert!(tls(&secure).unwrap_err().contains("trustStore.location"));
        let mut jks = secure.clone();
        jks.insert("zookeeper.ssl.trustStore.type".into(), "JKS".into());
        assert!(tls(&jks).unwrap_err().contains("PEM"));
    }

    #[test]
    fn sasl_from_the_jaas_client_section() {
        let dir = tempfile::tempdir().unwrap();
        let jaas = dir.path().join("jaas.conf");
        std::fs::write(&jaas, "Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"bob\" password=\"pw\"; };").unwrap();
        let mut p: HashMap<String, String> = HashMap::new();
        assert!(sasl(&p).unwrap().is_none());
        p.insert("java.security.auth.login.config".into(), jaas.display().to_string());
        let Some(Sasl::DigestMd5(c)) = sasl(&p).unwrap() else { panic!("DIGEST-MD5 expected") };
        assert_eq!((c.username.as_str(), c.password.as_str()), ("bob", "pw"));
        p.insert("zookeeper.sasl.clientconfig".into(), "Other".into());
        assert!(sasl(&p).unwrap().is_none());
        p.remove("zookeeper.sasl.clientconfig");
        p.insert("zookeeper.sasl.client".into(), "false".into());
        assert!(sasl(&p).unwrap().is_none());
        p.remove("zookeeper.sasl.client");
        std::fs::write(&jaas, "Client { m required username=bob; };").unwrap();
        assert!(sasl(&p).unwrap_err().contains("username and password"));
        std::fs::write(&jaas, "Client {\n m required username=;\n};").unwrap();
        assert!(sasl(&p).unwrap_err().contains("line 2"));
    }

    #[test]
    fn kerberos_from_a_krb5_login_module() {
        let dir = tempfile::tempdir().unwrap();
        let jaas = dir.path().join("jaas.conf");
        std::fs::write(
            &jaas,
            "Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
             keyTab=\"/k/alice.keytab\" principal=\"alice@R.TEST\"; };",
        )
        .unwrap();
        let mut p = HashMap::new();
        p.insert("java.security.auth.login.config".into(), jaas.display().to_string());
        p.insert("zookeeper.server.principal".into(), "zookeeper/zk1@R.TEST".into());
        let r = sasl(&p);
        #[cfg(feature = "kerberos")]
        {
            let Ok(Some(Sasl::Kerberos(o))) = r else { panic!("Kerberos expected") };
            assert_eq!(o.server_principal.as_deref(), Some("zookeeper/zk1@R.TEST"));
            assert_eq!(
                o.credentials,
                zk_client::gssapi::Credentials::Keytab {
                    principal: "alice@R.TEST".into(),
                    keytab: "/k/alice.keytab".into()
                }
            );
            std::fs::write(&jaas, "Client { com.sun.security.auth.module.Krb5LoginModule required; };")
                .unwrap();
            let e = sasl(&p).err().unwrap();
            assert!(e.contains("useKeyTab") && e.contains("section Client"), "{e}");
        }
        #[cfg(not(feature = "kerberos"))]
        assert!(r.err().unwrap().contains("`kerberos` feature"));
    }
}
