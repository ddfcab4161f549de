//! Client certificates on the TLS port: the subject read from the DER (zk-server `x509`).

use zk_server::x509::{name_rfc2253, subject_dn};
use zk_tree::x509::x509_id_valid;

/// A certificate (or, as well, the same bytes as a bare `Name`'s content): whatever subject is
/// read from it is a name an `x509` ACL may hold, so a client with that certificate can be
/// granted access by name.
pub fn subject(data: &[u8]) {
    for name in [subject_dn(data), name_rfc2253(data)].into_iter().flatten() {
        assert!(x509_id_valid(&name), "the subject {name:?} is not a valid x509 ACL id");
    }
}
