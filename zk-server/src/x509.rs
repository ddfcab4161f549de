//! The `x509` authentication scheme's ids: a verified client certificate's subject as the string
//! Apache ZooKeeper's X509AuthenticationProvider makes of it (Java's `X500Principal.getName()`,
//! the RFC 2253 form). Which ACL ids are names is zk-tree's check (`x509_id_valid`).
//!
//! The rules below were checked against Java 17 on certificates made with openssl
//! (`tests/tls.rs` and the unit tests pin them):
//! - relative distinguished names in reverse order of the certificate, joined by `,`; the values
//!   of a multi-valued one in the certificate's order, joined by `+`;
//! - the keywords CN, C, L, ST, O, OU, STREET, DC and UID; any other attribute as its dotted OID,
//!   whose value is then `#` and the lowercase hex of its whole DER encoding (so is a value that is
//!   not a string type);
//! - in string values each of `, = + < > # ; " \` gets a backslash, NUL becomes `\00`, and leading
//!   and trailing spaces are escaped; every other character, non-ASCII included, is kept as it is.
//!
//! The parser reads only what it needs from a certificate rustls has already verified, and is
//! total: every length is checked against the bytes left.

use std::fmt::Write as _;

/// Why no subject name could be read from a certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed certificate: {0}")]
pub struct DnError(&'static str);

/// One DER element: its tag, its content, and its whole encoding.
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    whole: &'a [u8],
}

/// Reads the DER element at the start of `input`; returns it and the bytes after it.
fn read_tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), DnError> {
    let (&tag, rest) = input.split_first().ok_or(DnError("truncated element"))?;
    if tag & 0x1f == 0x1f {
        return Err(DnError("multi-byte tags are not used in certificates"));
    }
    let (&first, mut rest) = rest.split_first().ok_or(DnError("truncated length"))?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(DnError("bad length"));
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err(DnError("element longer than the certificate"));
    }
    let header = input.len() - rest.len();
    let tlv = Tlv { tag, content: &rest[..len], whole: &input[..header + len] };
    Ok((tlv, &rest[len..]))
}

/// Reads an element that must have tag `tag`.
fn expect<'a>(input: &'a [u8], tag: u8, what: &'static str) -> Result<(Tlv<'a>, &'a [u8]), DnError> {
    let (tlv, rest) = read_tlv(input)?;
    if tlv.tag != tag {
        return Err(DnError(what));
    }
    Ok((tlv, rest))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// The subject name of the DER certificate `cert`, as Java's `X500Principal.getName()` writes it.
///
/// Errors: the certificate's structure up to its subject is not DER as X.509 lays it out.
pub fn subject_dn(cert: &[u8]) -> Result<String, DnError> {
    let (cert, _) = expect(cert, SEQUENCE, "not a certificate")?;
    let (tbs, _) = expect(cert.content, SEQUENCE, "no tbsCertificate")?;
    let mut rest = tbs.content;
    // version [0] EXPLICIT, optional.
    if rest.first() == Some(&0xa0) {
        rest = read_tlv(rest)?.1;
    }
    let (_, rest) = expect(rest, 0x02, "no serial number")?;
    let (_, rest) = expect(rest, SEQUENCE, "no signature algorithm")?;
    let (_, rest) = expect(rest, SEQUENCE, "no issuer")?;
    let (_, rest) = expect(rest, SEQUENCE, "no validity")?;
    let (subject, _) = expect(rest, SEQUENCE, "no subject")?;
    name_rfc2253(subject.content)
}

/// The content of a DER `Name` (a sequence of relative distinguished names) in Java's RFC 2253
/// form.
pub fn name_rfc2253(mut rdns: &[u8]) -> Result<String, DnError> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (set, rest) = expect(rdns, SET, "a relative distinguished name is not a SET")?;
        rdns = rest;
        let mut avas = set.content;
        // SET SIZE (1..MAX): an empty one would print as nothing between commas, a name no x509
        // ACL can hold (found by fuzzing).
        if avas.is_empty() {
            return Err(DnError("an empty relative distinguished name"));
        }
        let mut rdn = String::new();
        while !avas.is_empty() {
            let (ava, rest) = expect(avas, SEQUENCE, "an attribute is not a SEQUENCE")?;
            avas = rest;
            let (oid, value) = expect(ava.content, OID, "an attribute has no type")?;
            let (value, _) = read_tlv(value)?;
            if !rdn.is_empty() {
                rdn.push('+');
            }
            write_ava(&mut rdn, oid.content, &value)?;
        }
        parts.push(rdn);
    }
    parts.reverse();
    Ok(parts.join(","))
}

fn write_ava(out: &mut String, oid: &[u8], value: &Tlv<'_>) -> Result<(), DnError> {
    let dotted = dotted_oid(oid)?;
    let keyword = match dotted.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    out.push_str(keyword.unwrap_or(&dotted));
    out.push('=');
    match (keyword, string_value(value)) {
        (Some(_), Some(text)) => escape_value(out, &text),
        _ => {
            out.push('#');
            for b in value.whole {
                let _ = write!(out, "{b:02x}");
            }
        }
    }
    Ok(())
}

/// The text of a string-typed attribute value, decoded as Java decodes each type; `None` for
/// types Java writes in hex.
fn string_value(v: &Tlv<'_>) -> Option<String> {
    let ascii = |b: &[u8]| b.iter().map(|&c| if c < 0x80 { char::from(c) } else { '\u{fffd}' }).collect();
    match v.tag {
        // UTF8String
        0x0c => Some(String::from_utf8_lossy(v.content).into_owned()),
        // PrintableString, IA5String, GeneralString
        0x13 | 0x16 | 0x1b => Some(ascii(v.content)),
        // TeletexString: ISO 8859-1
        0x14 => Some(v.content.iter().map(|&c| char::from(c)).collect()),
        // BMPString: UTF-16BE
        0x1e => {
            if !v.content.len().is_multiple_of(2) {
                return None;
            }
            let units: Vec<u16> = v.content.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            Some(String::from_utf16_lossy(&units))
        }
        _ => None,
    }
}

fn escape_value(out: &mut String, text: &str) {
    let mut escaped = String::with_capacity(text.len() + 4);
    for c in text.chars() {
        if ",=+<>#;\"\\".contains(c) {
            escaped.push('\\');
            escaped.push(c);
        } else if c == '\0' {
            escaped.push_str("\\00");
        } else {
            escaped.push(c);
        }
    }
    let chars: Vec<char> = escaped.chars().collect();
    let blank = |c: char| c == ' ' || c == '\r';
    let lead = chars.iter().position(|&c| !blank(c)).unwrap_or(chars.len());
    let trail = chars.iter().rposition(|&c| !blank(c));
    for (i, &c) in chars.iter().enumerate() {
        if i < lead || trail.is_none_or(|t| i > t) {
            out.push('\\');
        }
        out.push(c);
    }
}

/// An OBJECT IDENTIFIER's content as dotted decimal.
fn dotted_oid(content: &[u8]) -> Result<String, DnError> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut v: u64 = 0;
    for (i, &b) in content.iter().enumerate() {
        if v > (u64::MAX >> 7) {
            return Err(DnError("object identifier arc too large"));
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let (first, second) = if v < 80 { (v / 40, v % 40) } else { (2, v - 80) };
                arcs.extend([first, second]);
            } else {
                arcs.push(v);
            }
            v = 0;
        } else if i + 1 == content.len() {
            return Err(DnError("truncated object identifier"));
        }
    }
    if arcs.is_empty() {
        return Err(DnError("empty object identifier"));
    }
    Ok(arcs.iter().map(u64::to_string).collect::<Vec<_>>().join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if content.len() < 0x80 {
            v.push(content.len() as u8);
        } else {
            v.extend([0x82, (content.len() >> 8) as u8, content.len() as u8]);
        }
        v.extend_from_slice(content);
        v
    }

    fn oid(dotted: &str) -> Vec<u8> {
        let arcs: Vec<u64> = dotted.split('.').map(|a| a.parse().unwrap()).collect();
        let mut out = vec![(arcs[0] * 40 + arcs[1]) as u8];
        for &a in &arcs[2..] {
            let mut bytes = vec![(a & 0x7f) as u8];
            let mut rest = a >> 7;
            while rest > 0 {
                bytes.push((rest & 0x7f) as u8 | 0x80);
                rest >>= 7;
            }
            bytes.reverse();
            out.extend(bytes);
        }
        tlv(OID, &out)
    }

    /// A Name whose relative distinguished names hold `(oid, tag, value)` attributes.
    fn name(rdns: &[&[(&str, u8, &[u8])]]) -> Vec<u8> {
        let mut seq = Vec::new();
        for rdn in rdns {
            let mut set = Vec::new();
            for (o, tag, value) in *rdn {
                let mut ava = oid(o);
                ava.extend(tlv(*tag, value));
                set.extend(tlv(SEQUENCE, &ava));
            }
            seq.extend(tlv(SET, &set));
        }
        seq
    }

    const CN: &str = "2.5.4.3";
    const UTF8: u8 = 0x0c;
    const PRINTABLE: u8 = 0x13;

    // Expected strings: what Java 17's X500Principal.getName() printed for certificates with these
    // subjects (made with `openssl req -subj`).
    #[test]
    fn reverse_order_and_keywords() {
        let n = name(&[
            &[("2.5.4.6", PRINTABLE, b"US")],
            &[("2.5.4.10", UTF8, b"Example")],
            &[("2.5.4.11", UTF8, b"Eng")],
            &[(CN, UTF8, b"alice")],
        ]);
        assert_eq!(name_rfc2253(&n).unwrap(), "CN=alice,OU=Eng,O=Example,C=US");
        let n = name(&[
            &[("0.9.2342.19200300.100.1.25", 0x16, b"com")],
            &[("0.9.2342.19200300.100.1.1", UTF8, b"u1")],
            &[("2.5.4.9", UTF8, b"Main St")],
            &[("2.5.4.8", UTF8, b"CA")],
            &[("2.5.4.7", UTF8, b"SF")],
            &[("2.5.4.5", PRINTABLE, b"123")],
            &[("2.5.4.12", UTF8, b"Boss")],
            &[(CN, UTF8, "Zoë_*@x".as_bytes())],
        ]);
        assert_eq!(
            name_rfc2253(&n).unwrap(),
            "CN=Zoë_*@x,2.5.4.12=#0c04426f7373,2.5.4.5=#1303313233,L=SF,ST=CA,STREET=Main St,UID=u1,DC=com"
        );
    }

    #[test]
    fn unknown_attributes_in_hex_and_multi_valued() {
        let n = name(&[&[("1.2.840.113549.1.9.1", 0x16, b"a@b.c")], &[(CN, UTF8, b"a,b")]]);
        assert_eq!(name_rfc2253(&n).unwrap(), "CN=a\\,b,1.2.840.113549.1.9.1=#16056140622e63");
        let n = name(&[&[("2.5.4.10", UTF8, b"multi")], &[(CN, UTF8, b"bob"), ("2.5.4.11", UTF8, b"ops")]]);
        assert_eq!(name_rfc2253(&n).unwrap(), "CN=bob+OU=ops,O=multi");
    }

    #[test]
    fn escapes() {
        let one = |v: &[u8]| name_rfc2253(&name(&[&[(CN, UTF8, v)]])).unwrap();
        assert_eq!(one(b"#x=y"), "CN=\\#x\\=y");
        assert_eq!(one(b"a+b;c<d>e\"f\\g  "), "CN=a\\+b\\;c\\<d\\>e\\\"f\\\\g\\ \\ ");
        assert_eq!(one(b" lead trail "), "CN=\\ lead trail\\ ");
        assert_eq!(one(b"#hash"), "CN=\\#hash");
        assert_eq!(one(b"nul\0"), "CN=nul\\00");
        assert_eq!(one(b""), "CN=");
        assert_eq!(name_rfc2253(&[]).unwrap(), "");
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let good = name(&[&[(CN, UTF8, b"alice")], &[("2.5.4.10", UTF8, b"O")]]);
        for cut in 0..good.len() {
            let _ = name_rfc2253(&good[..cut]);
            let _ = subject_dn(&good[..cut]);
        }
        assert!(name_rfc2253(&[0x31, 0x85, 1, 1, 1, 1, 1]).is_err());
        assert!(name_rfc2253(&[0x31, 0x7f]).is_err());
        // Found by fuzzing (fuzz/ `x509_subject`): two empty RDNs read as the name ",".
        assert!(name_rfc2253(&[0x31, 0x00, 0x31, 0x00]).is_err());
        assert!(dotted_oid(&[0x80]).is_err());
        assert!(dotted_oid(&[0xff; 20]).is_err());
        let mut x = 0u32;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..24)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = subject_dn(&bytes);
            let _ = name_rfc2253(&bytes);
        }
    }
}
