//! [`GssAcceptor`] over the system's GSSAPI library (MIT Kerberos), through the libgssapi
//! crate: accepting contexts, wrap and unwrap, the client's name. The acceptor's credential is
//! acquired from the keytab the JAAS file names with `gss_acquire_cred_from` (a call libgssapi
//! does not wrap, taken from its -sys crate), so no process-wide setting such as `KRB5_KTNAME`
//! is needed.

use crate::kerberos::{Accepted, GssAcceptor, GssContext};
use libgssapi::context::{SecurityContext, ServerCtx};
use libgssapi::credential::Cred;
use std::path::Path;

/// Accepting contexts with the keys of one principal from a keytab.
pub struct KeytabAcceptor {
    cred: Cred,
}

/// The krb5 principal name type (1.2.840.113554.1.2.2.1), DER without tag and length.
const KRB5_NT_PRINCIPAL: [u8; 10] = *b"\x2a\x86\x48\x86\xf7\x12\x01\x02\x02\x01";

impl KeytabAcceptor {
    /// Acquires the accepting credential of `principal` from `keytab`.
    ///
    /// Errors: a name or path with a NUL byte, a principal that does not parse, a keytab that
    /// cannot be read or holds no key for the principal (the library's message).
    pub fn new(principal: &str, keytab: &Path) -> Result<KeytabAcceptor, String> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(keytab.as_os_str().as_bytes())
            .map_err(|_| format!("keytab path {} has a NUL byte", keytab.display()))?;
        if principal.as_bytes().contains(&0) {
            return Err(format!("principal {principal:?} has a NUL byte"));
        }
        let cred = acquire(principal, &path).map_err(|e| {
            format!("cannot take the key of {principal} from keytab {}: {e}", keytab.display())
        })?;
        Ok(KeytabAcceptor { cred })
    }
}

/// `gss_import_name` of `principal` (krb5 principal syntax), then `gss_acquire_cred_from` with
/// the cred store `keytab=path`, for accepting only.
#[allow(unsafe_code)]
fn acquire(principal: &str, keytab: &std::ffi::CStr) -> Result<Cred, libgssapi::error::Error> {
    use libgssapi::error::{Error, MajorFlags};
    use libgssapi_sys as sys;
    use std::ptr;
    let fail = |major: u32, minor: u32| Error { major: MajorFlags::from_bits_retain(major), minor };
    let mut oid_bytes = KRB5_NT_PRINCIPAL;
    let mut oid =
        sys::gss_OID_desc_struct { length: oid_bytes.len() as u32, elements: oid_bytes.as_mut_ptr().cast() };
    let mut name_buf =
        sys::gss_buffer_desc_struct { length: principal.len(), value: principal.as_ptr().cast_mut().cast() };
    let mut minor = 0u32;
    let mut name: sys::gss_name_t = ptr::null_mut();
    // SAFETY: every pointer is to a live local for the duration of the call; the library
    // copies the name out of `name_buf` (it does not write through `value`) and allocates `name`.
    let major = unsafe { sys::gss_import_name(&mut minor, &mut name_buf, &mut oid, &mut name) };
    if major != sys::GSS_S_COMPLETE {
        return Err(fail(major, minor));
    }
    let mut element = sys::gss_key_value_element_desc { key: c"keytab".as_ptr(), value: keytab.as_ptr() };
    let store = sys::gss_key_value_set_desc { count: 1, elements: &mut element };
    let mut cred: sys::gss_cred_id_t = ptr::null_mut();
    // SAFETY: `name` came from gss_import_name above; `store` and its strings live across the
    // call; null out-pointers are allowed for the mechanisms and lifetime outputs.
    let major = unsafe {
        sys::gss_acquire_cred_from(
            &mut minor,
            name,
            sys::_GSS_C_INDEFINITE,
            ptr::null_mut(),
            sys::GSS_C_ACCEPT as sys::gss_cred_usage_t,
            &store,
            &mut cred,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    let mut release_minor = 0u32;
    // SAFETY: `name` is the library's, released once here.
    unsafe { sys::gss_release_name(&mut release_minor, &mut name) };
    if major != sys::GSS_S_COMPLETE {
        return Err(fail(major, minor));
    }
    // SAFETY: `cred` is a credential the library just allocated; `Cred` owns it from here and
    // releases it when dropped.
    Ok(unsafe { Cred::from_c(cred) })
}

impl GssAcceptor for KeytabAcceptor {
    fn start(&self) -> Box<dyn GssContext> {
        Box::new(Context(ServerCtx::new(Some(self.cred.clone()))))
    }
}

/// One accepting context.
struct Context(ServerCtx);

impl GssContext for Context {
    fn accept(&mut self, token: &[u8]) -> Result<Accepted, String> {
        let out = self.0.step(token, None).map_err(|e| e.to_string())?;
        let out = out.map(|b| b.to_vec());
        if !self.0.is_complete() {
            return Ok(Accepted::Continue(out.unwrap_or_default()));
        }
        let client = self.0.source_name().map_err(|e| e.to_string())?.to_string();
        Ok(Accepted::Established { token: out, client })
    }

    fn wrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        self.0.wrap(false, msg).map(|b| b.to_vec()).map_err(|e| e.to_string())
    }

    fn unwrap(&mut self, msg: &[u8]) -> Result<Vec<u8>, String> {
        self.0.unwrap(msg).map(|b| b.to_vec()).map_err(|e| e.to_string())
    }
}
