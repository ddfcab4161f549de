//! SASL for `zookeeper_init_sasl`, Apache's C API when built with Cyrus SASL, without Cyrus: the
//! `sasl_callback_t` array is read with Cyrus's numeric ids and calling conventions, and the
//! DIGEST-MD5 exchange itself is zk-client's (zk-proto's mechanism), run by the session core
//! right after each handshake. With the `kerberos` feature, the mechanism list may name GSSAPI
//! instead: the credentials are the ones Cyrus's GSSAPI plugin takes (the default ticket cache,
//! `KRB5CCNAME`, or the client keytab `KRB5_CLIENT_KTNAME`), the server's name the host-based
//! service `<service>@<host>` of the parameters, and the exchange zk-client's
//! (`zk_client::gssapi`).

use libc::{c_char, c_int, c_uint, c_ulong, c_void};
use std::ffi::CStr;
use zk_client::SaslCredentials;

/// Cyrus's `SASL_CB_LIST_END`: the array's last entry.
pub const SASL_CB_LIST_END: c_ulong = 0;
/// Cyrus's `SASL_CB_USER`: the authorization name (`getsimple`).
pub const SASL_CB_USER: c_ulong = 0x4001;
/// Cyrus's `SASL_CB_AUTHNAME`: the authentication name (`getsimple`).
pub const SASL_CB_AUTHNAME: c_ulong = 0x4002;
/// Cyrus's `SASL_CB_PASS`: the password (`getsecret`).
pub const SASL_CB_PASS: c_ulong = 0x4004;
/// Cyrus's `SASL_CB_GETREALM`: the realm (`getrealm`).
pub const SASL_CB_GETREALM: c_ulong = 0x4008;
/// Cyrus's `SASL_OK`.
pub const SASL_OK: c_int = 0;
/// Cyrus's `SASL_FAIL`.
pub const SASL_FAIL: c_int = -1;
/// Entries read from a callback array at most (its end marker included).
const MAX_CALLBACKS: usize = 64;
/// Longest user name, realm or password taken from a callback, and the password file's first
/// line.
pub const MAX_SECRET_BYTES: usize = 1024;

/// Cyrus's `sasl_callback_t`.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct sasl_callback_t {
    /// `SASL_CB_*`.
    pub id: c_ulong,
    /// The callback, cast to `int (*)(void)` as Cyrus does; its real type follows from `id`.
    pub proc_: Option<unsafe extern "C" fn() -> c_int>,
    /// Passed back to the callback.
    pub context: *mut c_void,
}

/// Cyrus's `sasl_secret_t`: a length and that many bytes.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct sasl_secret_t {
    /// Bytes in `data`.
    pub len: c_ulong,
    /// The first byte; the rest follow.
    pub data: [u8; 1],
}

/// Apache's `zoo_sasl_params_t`.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct zoo_sasl_params_t {
    /// The service name: `zookeeper` (with GSSAPI, the first part of the server's principal).
    pub service: *const c_char,
    /// The server name: `zk-sasl-md5` for DIGEST-MD5; with GSSAPI, the host of the server's
    /// principal.
    pub host: *const c_char,
    /// Mechanisms to try: DIGEST-MD5, or GSSAPI with the `kerberos` feature (DIGEST-MD5 is
    /// taken when both are named, as it needs no Kerberos set-up).
    pub mechlist: *const c_char,
    /// The callbacks, ending with `SASL_CB_LIST_END`.
    pub callbacks: *const sasl_callback_t,
}

type GetSimple = unsafe extern "C" fn(*mut c_void, c_int, *mut *const c_char, *mut c_uint) -> c_int;
type GetSecret = unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, *mut *mut sasl_secret_t) -> c_int;

fn text(p: *const c_char) -> Option<String> {
    // SAFETY: a NUL-terminated string per the API, or NULL.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// How a `zookeeper_init_sasl` session authenticates.
pub enum Mechanism {
    /// DIGEST-MD5 with the callbacks' name and password.
    DigestMd5(SaslCredentials),
    /// GSSAPI (Kerberos), the `kerberos` feature.
    #[cfg(feature = "kerberos")]
    Gssapi(zk_client::core::gssapi::Gssapi),
}

/// The longest service or host name taken for GSSAPI.
#[cfg(feature = "kerberos")]
const MAX_NAME_BYTES: usize = 1024;

/// The mechanism `params` ask for: DIGEST-MD5 when the list names it (see [`credentials`]),
/// else GSSAPI when it names that and libzkrs has Kerberos.
///
/// Errors: NULL params, a list naming neither mechanism libzkrs has, GSSAPI without the
/// `kerberos` feature or without a service and host, and [`credentials`]' errors.
pub fn mechanism(params: *const zoo_sasl_params_t) -> Result<Mechanism, String> {
    if params.is_null() {
        return Err("sasl_params is NULL".into());
    }
    // SAFETY: a valid zoo_sasl_params_t per the API.
    let p = unsafe { &*params };
    let mechs = text(p.mechlist).unwrap_or_default();
    let named = |m: &str| mechs.split([' ', ',']).any(|n| n.eq_ignore_ascii_case(m));
    if named("DIGEST-MD5") {
        return credentials(params).map(Mechanism::DigestMd5);
    }
    if named("GSSAPI") {
        return gssapi(p);
    }
    Err(format!(
        "mechlist \"{mechs}\": libzkrs offers DIGEST-MD5{}",
        if cfg!(feature = "kerberos") {
            " and GSSAPI"
        } else {
            " only (GSSAPI needs libzkrs built with Kerberos)"
        }
    ))
}

#[cfg(feature = "kerberos")]
fn gssapi(p: &zoo_sasl_params_t) -> Result<Mechanism, String> {
    use zk_client::gssapi::{Credentials, Kerberos, KerberosOptions};
    let service =
        text(p.service).filter(|s| !s.is_empty()).ok_or("GSSAPI needs sasl_params->service (zookeeper)")?;
    let host = text(p.host)
        .filter(|h| !h.is_empty())
        .ok_or("GSSAPI needs sasl_params->host (the server's host name)")?;
    if service.len() > MAX_NAME_BYTES || host.len() > MAX_NAME_BYTES {
        return Err("GSSAPI service or host name too long".into());
    }
    let mut opts = KerberosOptions::new(Credentials::Default);
    opts.service = service.clone();
    opts.host_based_service = Some(format!("{service}@{host}"));
    Ok(Mechanism::Gssapi(Kerberos::new(opts).into_config()))
}

#[cfg(not(feature = "kerberos"))]
fn gssapi(_: &zoo_sasl_params_t) -> Result<Mechanism, String> {
    Err("mechlist GSSAPI: this libzkrs was built without Kerberos (zk-ffi's `kerberos` feature)".into())
}

/// The DIGEST-MD5 credentials `params` give: the name from `SASL_CB_AUTHNAME` (else
/// `SASL_CB_USER`) and the password from `SASL_CB_PASS`, asked once, now.
///
/// Errors: NULL params, a mechanism list without DIGEST-MD5, a service or host other than
/// ZooKeeper's (`zookeeper`, `zk-sasl-md5`: the server checks the digest URI they make), a
/// callback that fails or gives nothing, or values over [`MAX_SECRET_BYTES`].
pub fn credentials(params: *const zoo_sasl_params_t) -> Result<SaslCredentials, String> {
    if params.is_null() {
        return Err("sasl_params is NULL".into());
    }
    // SAFETY: a valid zoo_sasl_params_t per the API.
    let p = unsafe { &*params };
    let mechs = text(p.mechlist).unwrap_or_default();
    if !mechs.split([' ', ',']).any(|m| m.eq_ignore_ascii_case("DIGEST-MD5")) {
        return Err(format!("mechlist \"{mechs}\": not DIGEST-MD5"));
    }
    let service = text(p.service).unwrap_or_default();
    let host = text(p.host).unwrap_or_default();
    if service != zk_proto::digest_md5::SERVICE || host != zk_proto::digest_md5::SERVER_NAME {
        return Err(format!(
            "service \"{service}\" and host \"{host}\": ZooKeeper's servers answer as zookeeper and zk-sasl-md5"
        ));
    }
    if p.callbacks.is_null() {
        return Err("no callbacks".into());
    }
    let (mut user, mut authname, mut password) = (None, None, None);
    for i in 0..MAX_CALLBACKS {
        // SAFETY: the array ends with SASL_CB_LIST_END, read entry by entry up to it.
        let cb = unsafe { &*p.callbacks.add(i) };
        if cb.id == SASL_CB_LIST_END {
            break;
        }
        let Some(f) = cb.proc_ else { continue };
        match cb.id {
            SASL_CB_USER | SASL_CB_AUTHNAME => {
                // SAFETY: Cyrus's getsimple signature for these ids.
                let get: GetSimple =
                    unsafe { std::mem::transmute::<unsafe extern "C" fn() -> c_int, GetSimple>(f) };
                let (mut out, mut len): (*const c_char, c_uint) = (std::ptr::null(), 0);
                // SAFETY: the callback writes a pointer it keeps alive and its length.
                let rc = unsafe { get(cb.context, cb.id as c_int, &mut out, &mut len) };
                if rc != SASL_OK || out.is_null() {
                    return Err(format!(
                        "the SASL_CB_{} callback failed ({rc})",
                        if cb.id == SASL_CB_USER { "USER" } else { "AUTHNAME" }
                    ));
                }
                if len as usize > MAX_SECRET_BYTES {
                    return Err("user name too long".into());
                }
                // SAFETY: `len` bytes at `out` (Cyrus allows len 0 meaning NUL-terminated).
                let bytes = unsafe {
                    if len == 0 {
                        CStr::from_ptr(out).to_bytes()
                    } else {
                        std::slice::from_raw_parts(out as *const u8, len as usize)
                    }
                };
                let name = String::from_utf8_lossy(bytes).into_owned();
                if cb.id == SASL_CB_USER {
                    user = Some(name)
                } else {
                    authname = Some(name)
                }
            }
            SASL_CB_PASS => {
                // SAFETY: Cyrus's getsecret signature for this id.
                let get: GetSecret =
                    unsafe { std::mem::transmute::<unsafe extern "C" fn() -> c_int, GetSecret>(f) };
                let mut secret: *mut sasl_secret_t = std::ptr::null_mut();
                // SAFETY: the callback writes a secret it keeps alive (no sasl_conn_t exists: NULL).
                let rc = unsafe { get(std::ptr::null_mut(), cb.context, cb.id as c_int, &mut secret) };
                if rc != SASL_OK || secret.is_null() {
                    return Err(format!("the SASL_CB_PASS callback failed ({rc})"));
                }
                // SAFETY: a sasl_secret_t is its length followed by that many bytes.
                let (len, data) =
                    unsafe { ((*secret).len as usize, std::ptr::addr_of!((*secret).data) as *const u8) };
                if len > MAX_SECRET_BYTES {
                    return Err("password too long".into());
                }
                // SAFETY: as above.
                password = Some(
                    String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(data, len) }).into_owned(),
                );
            }
            // The realm is the one the server's challenge offers (ZooKeeper's servers offer one).
            _ => {}
        }
    }
    let name = authname.or(user).ok_or("no SASL_CB_AUTHNAME or SASL_CB_USER callback")?;
    let password = password.ok_or("no SASL_CB_PASS callback")?;
    Ok(SaslCredentials::new(name, password))
}

/// What `zoo_sasl_make_basic_callbacks` allocates, in one block the caller frees with free().
#[repr(C)]
struct BasicBlock {
    callbacks: [sasl_callback_t; 5],
    user: [c_char; MAX_SECRET_BYTES + 1],
    realm: [c_char; MAX_SECRET_BYTES + 1],
    password_file: [c_char; 4096],
    secret: sasl_secret_t,
    secret_rest: [u8; MAX_SECRET_BYTES],
}

unsafe extern "C" fn basic_simple(
    ctx: *mut c_void,
    _id: c_int,
    out: *mut *const c_char,
    len: *mut c_uint,
) -> c_int {
    if ctx.is_null() || out.is_null() {
        return SASL_FAIL;
    }
    // SAFETY: ctx is one of the block's NUL-terminated strings; out and len are the caller's.
    unsafe {
        *out = ctx as *const c_char;
        if !len.is_null() {
            *len = CStr::from_ptr(ctx as *const c_char).to_bytes().len() as c_uint;
        }
    }
    SASL_OK
}

unsafe extern "C" fn basic_realm(
    ctx: *mut c_void,
    _id: c_int,
    avail: *mut *const c_char,
    out: *mut *const c_char,
) -> c_int {
    if out.is_null() {
        return SASL_FAIL;
    }
    // SAFETY: ctx is the block's realm string; avail is Cyrus's NULL-terminated list or NULL.
    unsafe {
        *out = if !ctx.is_null() && *(ctx as *const c_char) != 0 {
            ctx as *const c_char
        } else if !avail.is_null() {
            *avail
        } else {
            std::ptr::null()
        };
    }
    SASL_OK
}

/// Reads the first line of the file named in the block and hands it out as the secret.
unsafe extern "C" fn basic_secret(
    _conn: *mut c_void,
    ctx: *mut c_void,
    _id: c_int,
    out: *mut *mut sasl_secret_t,
) -> c_int {
    if ctx.is_null() || out.is_null() {
        return SASL_FAIL;
    }
    let block = ctx as *mut BasicBlock;
    // SAFETY: ctx is the block zoo_sasl_make_basic_callbacks made.
    let path = unsafe { CStr::from_ptr((*block).password_file.as_ptr()) }.to_string_lossy().into_owned();
    let Ok(text) = read_first_line(&path) else { return SASL_FAIL };
    let bytes = text.as_bytes();
    if bytes.len() > MAX_SECRET_BYTES {
        return SASL_FAIL;
    }
    // SAFETY: the secret's data is followed by MAX_SECRET_BYTES more in the block (repr(C)).
    unsafe {
        let data = std::ptr::addr_of_mut!((*block).secret.data) as *mut u8;
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        (*block).secret.len = bytes.len() as c_ulong;
        *out = std::ptr::addr_of_mut!((*block).secret);
    }
    SASL_OK
}

fn read_first_line(path: &str) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(256);
    std::fs::File::open(path)?.take(MAX_SECRET_BYTES as u64 + 2).read_to_end(&mut buf)?;
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Ok(String::from_utf8_lossy(line).into_owned())
}

fn copy_into(dst: &mut [c_char], src: *const c_char) -> bool {
    let Some(s) = text(src) else { return true };
    if s.len() >= dst.len() {
        return false;
    }
    for (d, b) in dst.iter_mut().zip(s.bytes()) {
        *d = b as c_char;
    }
    true
}

/// Apache's `zoo_sasl_make_basic_callbacks`: a malloc'd callback array answering `SASL_CB_USER`
/// and `SASL_CB_AUTHNAME` with `user`, `SASL_CB_GETREALM` with `realm` (else the server's), and
/// `SASL_CB_PASS` with the first line of `password_file`, read when asked. One block: free() it
/// after the handle is closed. NULL when memory is refused or a string is too long.
#[no_mangle]
pub extern "C" fn zoo_sasl_make_basic_callbacks(
    user: *const c_char,
    realm: *const c_char,
    password_file: *const c_char,
) -> *mut sasl_callback_t {
    // SAFETY: calloc gives zeroed memory of the block's size; every field is valid zeroed.
    let block = unsafe { libc::calloc(1, std::mem::size_of::<BasicBlock>()) } as *mut BasicBlock;
    if block.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the block is ours until returned.
    let b = unsafe { &mut *block };
    if !copy_into(&mut b.user, user)
        || !copy_into(&mut b.realm, realm)
        || !copy_into(&mut b.password_file, password_file)
    {
        // SAFETY: allocated above.
        unsafe { libc::free(block as *mut c_void) };
        return std::ptr::null_mut();
    }
    // SAFETY: each function is cast to Cyrus's generic `int (*)(void)`, as Cyrus callers do;
    // credentials() casts it back by id.
    let generic =
        |f: *const ()| unsafe { std::mem::transmute::<*const (), unsafe extern "C" fn() -> c_int>(f) };
    let user_ctx = if user.is_null() { std::ptr::null_mut() } else { b.user.as_mut_ptr() as *mut c_void };
    b.callbacks = [
        sasl_callback_t {
            id: SASL_CB_USER,
            proc_: Some(generic(basic_simple as *const ())),
            context: user_ctx,
        },
        sasl_callback_t {
            id: SASL_CB_AUTHNAME,
            proc_: Some(generic(basic_simple as *const ())),
            context: user_ctx,
        },
        sasl_callback_t {
            id: SASL_CB_GETREALM,
            proc_: Some(generic(basic_realm as *const ())),
            context: b.realm.as_mut_ptr() as *mut c_void,
        },
        sasl_callback_t {
            id: if password_file.is_null() { SASL_CB_LIST_END } else { SASL_CB_PASS },
            proc_: Some(generic(basic_secret as *const ())),
            context: block as *mut c_void,
        },
        sasl_callback_t { id: SASL_CB_LIST_END, proc_: None, context: std::ptr::null_mut() },
    ];
    block as *mut sasl_callback_t
}
