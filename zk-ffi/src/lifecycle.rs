//! Handle life cycle, server list, auth, context and watcher, and the small helpers of the ABI.

use crate::abi::{self, clientid_t, err, zoo_op_t, ACL_vector, Stat};
use crate::api::{cstr, handle};
use crate::consts::value;
use crate::handle::{fn_to_usize, Completion, Handle, Pending};
use crate::log;
use bytes::Bytes;
use libc::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zk_client::connect_string::ConnectString;
use zk_client::core::{Config, Op, Session, SessionCredentials};

static DETERMINISTIC: AtomicBool = AtomicBool::new(false);
static RESOLUTION_DELAY_MS: AtomicI32 = AtomicI32::new(0);
/// Set once by the single-threaded library's load-time constructor (csrc/st_mode.c): handles are
/// then driven by zookeeper_interest/zookeeper_process and no threads are started.
static SINGLE_THREADED: AtomicBool = AtomicBool::new(false);

/// Makes every later zookeeper_init create a single-threaded handle. Called by the constructor
/// of libzookeeper_st.so.2 (built from the same code); not part of Apache's API.
#[no_mangle]
pub extern "C" fn zkrs_use_single_threaded() {
    SINGLE_THREADED.store(true, Ordering::Release);
}

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

/// Creates a handle and starts connecting. Returns NULL with errno set when the host string is
/// NULL or malformed (EINVAL) or names a host that does not resolve (ENOENT).
#[no_mangle]
pub extern "C" fn zookeeper_init(
    host: *const c_char,
    watcher: abi::watcher_fn,
    recv_timeout: c_int,
    clientid: *const clientid_t,
    context: *mut c_void,
    flags: c_int,
) -> *mut c_void {
    zookeeper_init2(host, watcher, recv_timeout, clientid, context, flags, None)
}

/// zookeeper_init with a log callback for this handle.
#[no_mangle]
pub extern "C" fn zookeeper_init2(
    host: *const c_char,
    watcher: abi::watcher_fn,
    recv_timeout: c_int,
    clientid: *const clientid_t,
    context: *mut c_void,
    flags: c_int,
    log_callback: abi::log_callback_fn,
) -> *mut c_void {
    let threaded = !SINGLE_THREADED.load(Ordering::Acquire);
    init(host, watcher, recv_timeout, clientid, context, flags, log_callback, threaded, None, None)
}

/// zookeeper_init over TLS, as Apache's C client declares it when built with OpenSSL, here on
/// rustls: `cert` is `"ca"` (the file of the authority the servers' certificates chain to) or
/// `"ca,cert,key,passwd"` (also this client's certificate chain and private key, which a server
/// with `ssl.clientAuth=need` asks for and maps to the `x509` id; `passwd` decrypts an encrypted
/// PKCS#8 key and may be empty). The servers' certificates are checked against the authority, not against host names,
/// as Apache's C client does. Returns NULL with errno EINVAL for a NULL or unusable `cert`
/// (logged), otherwise as zookeeper_init.
#[no_mangle]
pub extern "C" fn zookeeper_init_ssl(
    host: *const c_char,
    cert: *const c_char,
    watcher: abi::watcher_fn,
    recv_timeout: c_int,
    clientid: *const clientid_t,
    context: *mut c_void,
    flags: c_int,
) -> *mut c_void {
    let Some(spec) = cstr(cert) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let tls = match crate::tls::config_from_cert_string(&spec) {
        Ok(t) => t,
        Err(e) => return refuse(None, "zookeeper_init_ssl", e),
    };
    let threaded = !SINGLE_THREADED.load(Ordering::Acquire);
    init(host, watcher, recv_timeout, clientid, context, flags, None, threaded, Some(tls), None)
}

/// Logs why an init call cannot use its parameters and fails it: NULL with errno EINVAL.
fn refuse(log_callback: abi::log_callback_fn, call: &str, why: impl std::fmt::Display) -> *mut c_void {
    log::log(log_callback, log::ERROR, call, format_args!("{why}"));
    set_errno(libc::EINVAL);
    std::ptr::null_mut()
}

/// zookeeper_init with SASL, as Apache's C client declares it when built with Cyrus SASL, here
/// on libzkrs's own DIGEST-MD5: `sasl_params` is `{"zookeeper", "zk-sasl-md5", "DIGEST-MD5",
/// callbacks}`, the callbacks Cyrus-style (`SASL_CB_AUTHNAME` or `SASL_CB_USER`, `SASL_CB_PASS`;
/// `zoo_sasl_make_basic_callbacks` makes them), asked once, here. With the `kerberos` feature,
/// `{"zookeeper", "<server host>", "GSSAPI", callbacks}` authenticates with Kerberos from the
/// default ticket cache (or `KRB5_CLIENT_KTNAME`'s keytab) to `zookeeper/<server host>`, as
/// Cyrus's GSSAPI plugin does; no ticket or an unknown service end the session as a refusal does. Each connection authenticates
/// before anything else is sent; a refused password ends the session (ZOO_AUTH_FAILED_STATE).
/// Returns NULL with errno EINVAL when the parameters cannot be used (logged), otherwise as
/// zookeeper_init2.
#[no_mangle]
pub extern "C" fn zookeeper_init_sasl(
    host: *const c_char,
    watcher: abi::watcher_fn,
    recv_timeout: c_int,
    clientid: *const clientid_t,
    context: *mut c_void,
    flags: c_int,
    log_callback: abi::log_callback_fn,
    sasl_params: *const crate::sasl::zoo_sasl_params_t,
) -> *mut c_void {
    let mechanism = match crate::sasl::mechanism(sasl_params) {
        Ok(m) => m,
        Err(e) => return refuse(log_callback, "zookeeper_init_sasl", e),
    };
    let threaded = !SINGLE_THREADED.load(Ordering::Acquire);
    init(host, watcher, recv_timeout, clientid, context, flags, log_callback, threaded, None, Some(mechanism))
}

pub(crate) fn init(
    host: *const c_char,
    watcher: abi::watcher_fn,
    recv_timeout: c_int,
    clientid: *const clientid_t,
    context: *mut c_void,
    flags: c_int,
    log_callback: abi::log_callback_fn,
    threaded: bool,
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<crate::sasl::Mechanism>,
) -> *mut c_void {
    let host_text = cstr(host);
    log::log(
        log_callback,
        log::INFO,
        "zookeeper_init_internal",
        format_args!(
            "Initiating client connection, host={} sessionTimeout={} watcher={:?} sessionId={:#x} context={:?} flags={}",
            host_text.as_deref().unwrap_or("(null)"),
            recv_timeout,
            watcher.map(|f| f as *const c_void),
            if clientid.is_null() { 0 } else { unsafe { (*clientid).client_id } },
            context,
            flags
        ),
    );
    let Some(text) = host_text.filter(|t| !t.is_empty()) else {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    };
    let cs = match ConnectString::parse(&text) {
        Ok(cs) => cs,
        Err(_) => {
            set_errno(libc::EINVAL);
            return std::ptr::null_mut();
        }
    };
    for hp in &cs.hosts {
        use std::net::ToSocketAddrs;
        if (hp.host.as_str(), hp.port).to_socket_addrs().map(|mut a| a.next().is_none()).unwrap_or(true) {
            log::log(log_callback, log::ERROR, "resolve_hosts", format_args!("cannot resolve {hp}"));
            set_errno(libc::ENOENT);
            return std::ptr::null_mut();
        }
    }
    let mut cfg = Config::new(cs.hosts, Duration::from_millis(recv_timeout.max(1) as u64));
    cfg.chroot = cs.chroot;
    cfg.can_be_read_only = flags & 1 != 0;
    // Apache's C client looks for a read-write server first 200 ms into a read-only connection.
    cfg.rw_probe_min = Duration::from_millis(200);
    cfg.max_pending = 100_000;
    match sasl {
        Some(crate::sasl::Mechanism::DigestMd5(creds)) => cfg.sasl = Some(creds),
        #[cfg(feature = "kerberos")]
        Some(crate::sasl::Mechanism::Gssapi(g)) => cfg.gssapi = Some(g),
        None => {}
    }
    if !clientid.is_null() {
        // SAFETY: a valid clientid_t per the API.
        let id = unsafe { &*clientid };
        if id.client_id != 0 {
            let pw: Vec<u8> = id.passwd.iter().map(|&c| c as u8).collect();
            cfg.session = Some(SessionCredentials { id: id.client_id, password: Bytes::from(pw) });
        }
    }
    let seed = if DETERMINISTIC.load(Ordering::Relaxed) { 0 } else { rand::random() };
    let mut core = Session::new(cfg, seed, Instant::now());
    if DETERMINISTIC.load(Ordering::Relaxed) {
        core.set_keep_host_order(true);
    }
    match Handle::start(core, watcher, context, log_callback, threaded, tls) {
        Ok(h) => Arc::into_raw(h) as *mut c_void,
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::ENOMEM));
            std::ptr::null_mut()
        }
    }
}

/// Ends the session and frees the handle: calls still pending complete with ZCLOSING, later
/// calls on the handle are undefined (the pointer is gone). From inside a callback the handle is
/// freed once the callback returns. Returns ZOK, or ZBADARGUMENTS for NULL.
#[no_mangle]
pub extern "C" fn zookeeper_close(zh: *mut c_void) -> c_int {
    if zh.is_null() {
        return err::ZBADARGUMENTS;
    }
    // SAFETY: the pointer came from Arc::into_raw in init; close takes the application's reference.
    let h = unsafe { Arc::from_raw(zh as *const Handle) };
    Handle::close(h)
}

/// The C state: ZOO_CONNECTING_STATE, ZOO_ASSOCIATING_STATE, ZOO_CONNECTED_STATE,
/// ZOO_READONLY_STATE, ZOO_EXPIRED_SESSION_STATE, ZOO_AUTH_FAILED_STATE; 0 for NULL.
#[no_mangle]
pub extern "C" fn zoo_state(zh: *mut c_void) -> c_int {
    handle(zh).map_or(0, |h| h.state.load(Ordering::Acquire))
}

/// The session id and password (valid while the handle lives; zero before the first connect).
#[no_mangle]
pub extern "C" fn zoo_client_id(zh: *mut c_void) -> *const clientid_t {
    handle(zh).map_or(std::ptr::null(), |h| h.client_id.0.get() as *const clientid_t)
}

/// The negotiated session timeout in ms (the requested one before connecting).
#[no_mangle]
pub extern "C" fn zoo_recv_timeout(zh: *mut c_void) -> c_int {
    handle(zh).map_or(0, |h| h.recv_timeout_ms.load(Ordering::Relaxed))
}

/// ZINVALIDSTATE when the session expired or authentication failed, else ZOK.
#[no_mangle]
pub extern "C" fn is_unrecoverable(zh: *mut c_void) -> c_int {
    match handle(zh).map(|h| h.state.load(Ordering::Acquire)) {
        Some(value::EXPIRED) | Some(value::AUTH_FAILED) => err::ZINVALIDSTATE,
        _ => err::ZOK,
    }
}

/// The connected server's address into `addr` (NULL when not connected).
#[no_mangle]
pub extern "C" fn zookeeper_get_connected_host(
    zh: *mut c_void,
    addr: *mut libc::sockaddr,
    addr_len: *mut libc::socklen_t,
) -> *mut libc::sockaddr {
    let Some(h) = handle(zh) else { return std::ptr::null_mut() };
    if addr.is_null() || addr_len.is_null() || h.state.load(Ordering::Acquire) != value::CONNECTED {
        return std::ptr::null_mut();
    }
    let fd = h.fd.load(Ordering::Acquire);
    // SAFETY: getpeername on our socket into the caller's buffer of *addr_len bytes.
    if fd < 0 || unsafe { libc::getpeername(fd, addr, addr_len) } != 0 {
        return std::ptr::null_mut();
    }
    addr
}

/// The context given to zookeeper_init (or zoo_set_context).
#[no_mangle]
pub extern "C" fn zoo_get_context(zh: *mut c_void) -> *const c_void {
    handle(zh).map_or(std::ptr::null(), |h| h.context.load(Ordering::Acquire))
}

/// Replaces the context passed to the global watcher.
#[no_mangle]
pub extern "C" fn zoo_set_context(zh: *mut c_void, context: *mut c_void) {
    if let Some(h) = handle(zh) {
        h.context.store(context, Ordering::Release);
    }
}

/// Replaces the global watcher; returns the previous one.
#[no_mangle]
pub extern "C" fn zoo_set_watcher(zh: *mut c_void, new_fn: abi::watcher_fn) -> abi::watcher_fn {
    let h = handle(zh)?;
    let old = h.watcher.swap(fn_to_usize(new_fn), Ordering::AcqRel);
    // SAFETY: stores 0 or a watcher_fn as usize.
    unsafe { std::mem::transmute::<usize, abi::watcher_fn>(old) }
}

/// Replaces the server list (the host string without a chroot). The new list
/// is used from the next connection on; a connection to a server no longer listed is dropped (its
/// pending calls complete with ZCONNECTIONLOSS) and the session moves to a listed server, and a
/// growing list moves it with probability 1 - old/new, as Apache's client rebalances. Errors:
/// ZBADARGUMENTS for a NULL handle, a NULL, empty or malformed list; ZSYSTEMERROR when a host
/// does not resolve.
#[no_mangle]
pub extern "C" fn zoo_set_servers(zh: *mut c_void, hosts: *const c_char) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let Some(text) = cstr(hosts) else { return err::ZBADARGUMENTS };
    let Ok(cs) = ConnectString::parse(&text) else { return err::ZBADARGUMENTS };
    for hp in &cs.hosts {
        use std::net::ToSocketAddrs;
        if (hp.host.as_str(), hp.port).to_socket_addrs().map(|mut a| a.next().is_none()).unwrap_or(true) {
            return err::ZSYSTEMERROR;
        }
    }
    if h.set_hosts(cs.hosts) {
        err::ZOK
    } else {
        err::ZBADARGUMENTS
    }
}

/// Sets the minimum delay between host re-resolutions (-1 never, 0 always). ZBADARGUMENTS below -1.
#[no_mangle]
pub extern "C" fn zoo_set_servers_resolution_delay(zh: *mut c_void, delay_ms: c_int) -> c_int {
    if handle(zh).is_none() || delay_ms < -1 {
        return err::ZBADARGUMENTS;
    }
    RESOLUTION_DELAY_MS.store(delay_ms, Ordering::Relaxed);
    err::ZOK
}

/// The next connection attempt goes to the next server: the session core already moves to the
/// next server on every reconnect, so there is nothing to change.
#[no_mangle]
pub extern "C" fn zoo_cycle_next_server(zh: *mut c_void) {
    let _ = handle(zh);
}

/// "host:port" of the server last dialled (an empty string before the first attempt).
#[no_mangle]
pub extern "C" fn zoo_get_current_server(zh: *mut c_void) -> *const c_char {
    handle(zh).map_or(std::ptr::null(), |h| h.current_server.0.get() as *const c_char)
}

/// With a non-zero argument, later handles try servers in connect-string order (no shuffle), as
/// Apache's client does for tests.
#[no_mangle]
pub extern "C" fn zoo_deterministic_conn_order(yes_or_no: c_int) {
    DETERMINISTIC.store(yes_or_no != 0, Ordering::Relaxed);
}

/// Sends credentials (kept and re-sent after every reconnect). ZBADARGUMENTS for a NULL scheme
/// or a negative length; ZINVALIDSTATE for an ended session.
#[no_mangle]
pub extern "C" fn zoo_add_auth(
    zh: *mut c_void,
    scheme: *const c_char,
    cert: *const c_char,
    cert_len: c_int,
    completion: abi::void_completion_t,
    data: *const c_void,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    let Some(scheme) = cstr(scheme) else { return err::ZBADARGUMENTS };
    if cert_len < 0 || (cert.is_null() && cert_len > 0) {
        return err::ZBADARGUMENTS;
    }
    let auth = if cert.is_null() {
        Bytes::new()
    } else {
        // SAFETY: cert_len readable bytes per the API.
        Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(cert.cast::<u8>(), cert_len as usize) })
    };
    h.submit(
        Op::AddAuth { scheme, auth },
        Pending { completion: Completion::Void(completion), data, watch: None },
    )
}

/// Locks the handle's auth list mutex.
#[no_mangle]
pub extern "C" fn zoo_lock_auth(zh: *mut c_void) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    // SAFETY: our own initialised pthread mutex.
    unsafe { libc::pthread_mutex_lock(h.auth_mutex.0.get()) }
}

/// Unlocks the handle's auth list mutex.
#[no_mangle]
pub extern "C" fn zoo_unlock_auth(zh: *mut c_void) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    // SAFETY: our own initialised pthread mutex.
    unsafe { libc::pthread_mutex_unlock(h.auth_mutex.0.get()) }
}

/// Sets the handle's log callback (NULL: log to the stream).
#[no_mangle]
pub extern "C" fn zoo_set_log_callback(zh: *mut c_void, callback: abi::log_callback_fn) {
    if let Some(h) = handle(zh) {
        h.log_cb.store(callback.map_or(0, |f| f as usize), Ordering::Release);
    }
}

/// The handle's log callback (NULL if none).
#[no_mangle]
pub extern "C" fn zoo_get_log_callback(zh: *const c_void) -> abi::log_callback_fn {
    handle(zh as *mut c_void).and_then(|h| h.log_callback())
}

/// zookeeper_interest (single-threaded driving): the fd to poll, the events wanted (ZOOKEEPER_READ
/// 2, ZOOKEEPER_WRITE 1) and the longest wait. A threaded handle is driven by its own thread: ZBADARGUMENTS.
#[no_mangle]
pub extern "C" fn zookeeper_interest(
    zh: *mut c_void,
    fd: *mut c_int,
    interest: *mut c_int,
    tv: *mut libc::timeval,
) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    if fd.is_null() || interest.is_null() || tv.is_null() || h.threaded {
        return err::ZBADARGUMENTS;
    }
    // SAFETY: non-NULL out-pointers per the API.
    unsafe { h.interest(&mut *fd, &mut *interest, &mut *tv) }
}

/// zookeeper_process (single-threaded driving): handles socket events and runs callbacks.
/// ZNOTHING when nothing was delivered; ZBADARGUMENTS for a threaded handle.
#[no_mangle]
pub extern "C" fn zookeeper_process(zh: *mut c_void, events: c_int) -> c_int {
    let Some(h) = handle(zh) else { return err::ZBADARGUMENTS };
    if h.threaded {
        return err::ZBADARGUMENTS;
    }
    h.process(events)
}

/// The text for an error code (strerror for positive values).
#[no_mangle]
pub extern "C" fn zerror(c: c_int) -> *const c_char {
    if c > 0 {
        // SAFETY: strerror returns a static string.
        return unsafe { libc::strerror(c) };
    }
    let s: &'static [u8] = match c {
        0 => b"ok\0",
        -1 => b"system error\0",
        -2 => b"run time inconsistency\0",
        -3 => b"data inconsistency\0",
        -4 => b"connection loss\0",
        -5 => b"marshalling error\0",
        -6 => b"unimplemented\0",
        -7 => b"operation timeout\0",
        -8 => b"bad arguments\0",
        -9 => b"invalid zhandle state\0",
        -13 => b"no quorum of new config is connected and up-to-date with the leader of last committed config - try invoking reconfiguration after new servers are connected and synced\0",
        -14 => b"Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)\0",
        -100 => b"api error\0",
        -101 => b"no node\0",
        -102 => b"not authenticated\0",
        -103 => b"bad version\0",
        -108 => b"no children for ephemerals\0",
        -110 => b"node exists\0",
        -111 => b"not empty\0",
        -112 => b"session expired\0",
        -113 => b"invalid callback\0",
        -114 => b"invalid acl\0",
        -115 => b"authentication failed\0",
        -116 => b"zookeeper is closing\0",
        -117 => b"(not error) no server responses to process\0",
        -118 => b"session moved to another server, so operation is ignored\0",
        -119 => b"state-changing request is passed to read-only server\0",
        -120 => b"attempt to create ephemeral node on a local session\0",
        -121 => b"the watcher couldn't be found\0",
        -123 => b"attempts to perform a reconfiguration operation when reconfiguration feature is disable\0",
        -124 => b"session closed by server because client is required to do SASL authentication\0",
        -127 => b"Operation was throttled due to high load\0",
        _ => b"unknown error\0",
    };
    s.as_ptr().cast()
}

/// Host to network byte order for 64-bit values.
#[no_mangle]
pub extern "C" fn zoo_htonll(v: i64) -> i64 {
    v.to_be()
}

pub(crate) fn op_mut<'a>(op: *mut zoo_op_t) -> Option<&'a mut zoo_op_t> {
    // SAFETY: a writable zoo_op_t or NULL per the API.
    (!op.is_null()).then(|| unsafe { &mut *op })
}

/// Fills `op` as a create.
#[no_mangle]
pub extern "C" fn zoo_create_op_init(
    op: *mut zoo_op_t,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    path_buffer: *mut c_char,
    path_buffer_len: c_int,
) {
    if let Some(o) = op_mut(op) {
        o.type_ = 1;
        o.u.create_op = abi::zoo_create_op {
            path,
            data: value,
            datalen: valuelen,
            buf: path_buffer,
            buflen: path_buffer_len,
            acl,
            flags: mode,
            ttl: 0,
        };
    }
}

/// Fills `op` as a create that also returns a Stat (create2).
#[no_mangle]
pub extern "C" fn zoo_create2_op_init(
    op: *mut zoo_op_t,
    path: *const c_char,
    value: *const c_char,
    valuelen: c_int,
    acl: *const ACL_vector,
    mode: c_int,
    path_buffer: *mut c_char,
    path_buffer_len: c_int,
) {
    zoo_create_op_init(op, path, value, valuelen, acl, mode, path_buffer, path_buffer_len);
    if let Some(o) = op_mut(op) {
        o.type_ = 15;
    }
}

/// Fills `op` as a delete.
#[no_mangle]
pub extern "C" fn zoo_delete_op_init(op: *mut zoo_op_t, path: *const c_char, version: c_int) {
    if let Some(o) = op_mut(op) {
        o.type_ = 2;
        o.u.delete_op = abi::zoo_version_op { path, version };
    }
}

/// Fills `op` as a setData (`stat` receives the new Stat if not NULL).
#[no_mangle]
pub extern "C" fn zoo_set_op_init(
    op: *mut zoo_op_t,
    path: *const c_char,
    buffer: *const c_char,
    buflen: c_int,
    version: c_int,
    stat: *mut Stat,
) {
    if let Some(o) = op_mut(op) {
        o.type_ = 5;
        o.u.set_op = abi::zoo_set_op { path, data: buffer, datalen: buflen, version, stat };
    }
}

/// Fills `op` as a version check.
#[no_mangle]
pub extern "C" fn zoo_check_op_init(op: *mut zoo_op_t, path: *const c_char, version: c_int) {
    if let Some(o) = op_mut(op) {
        o.type_ = 13;
        o.u.check_op = abi::zoo_version_op { path, version };
    }
}
