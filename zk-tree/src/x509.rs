//! The `x509` scheme's ACL ids: which strings name an X.500 distinguished name. The ids
//! themselves come from verified client certificates (zk-server's `x509` module); an ACL entry
//! matches one by exact string, as Apache's X509AuthenticationProvider compares them.

/// Keywords Java's `X500Principal(String)` accepts (any case), besides dotted OIDs.
const KEYWORDS: [&str; 21] = [
    "CN",
    "C",
    "L",
    "S",
    "ST",
    "O",
    "OU",
    "T",
    "IP",
    "STREET",
    "DC",
    "DNQUALIFIER",
    "DNQ",
    "SURNAME",
    "GIVENNAME",
    "INITIALS",
    "GENERATION",
    "EMAIL",
    "EMAILADDRESS",
    "UID",
    "SERIALNUMBER",
];

/// Whether `id` is a distinguished name an `x509` ACL may name: attributes `keyword=value`
/// separated by `,` (or `;`) and `+`, with a known keyword or a dotted OID, backslash escapes that
/// escape something, and `#` values in hex; the empty name is one. Names that pass are compared
/// with certificate subjects as exact strings, as Apache does.
pub fn x509_id_valid(id: &str) -> bool {
    if id.trim().is_empty() {
        return true;
    }
    let mut avas: Vec<String> = vec![String::new()];
    let mut chars = id.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else { return false };
                let cur = avas.last_mut().expect("never empty");
                cur.push('\\');
                cur.push(n);
            }
            '"' => {
                quoted = !quoted;
                avas.last_mut().expect("never empty").push(c);
            }
            ',' | ';' | '+' if !quoted => avas.push(String::new()),
            _ => avas.last_mut().expect("never empty").push(c),
        }
    }
    if quoted {
        return false;
    }
    avas.iter().all(|ava| {
        let Some((key, value)) = ava.split_once('=') else { return false };
        let key = key.trim();
        let oid = key.strip_prefix("OID.").or_else(|| key.strip_prefix("oid.")).unwrap_or(key);
        let key_ok = KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(key))
            || (!oid.is_empty()
                && oid.split('.').count() >= 2
                && oid.split('.').all(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit())));
        let value = value.trim();
        let value_ok = match value.strip_prefix('#') {
            Some(hex) => {
                !hex.is_empty() && hex.len().is_multiple_of(2) && hex.bytes().all(|b| b.is_ascii_hexdigit())
            }
            None => true,
        };
        key_ok && value_ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_acl_names() {
        for ok in [
            "",
            "CN=alice,OU=Eng,O=Example,C=US",
            "cn=a+ou=b",
            "CN=a\\,b",
            "1.2.3=#0c0161",
            "CN=",
            "OID.2.5.4.3=x",
        ] {
            assert!(x509_id_valid(ok), "{ok}");
        }
        for bad in ["alice", "FOO=bar", "CN=a,", "CN=\"open", "1.2.3=#0", "CN=x\\"] {
            assert!(!x509_id_valid(bad), "{bad}");
        }
    }
}
