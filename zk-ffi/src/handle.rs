//! The zhandle_t: one session core, the socket it runs on, and the threads that drive it.
//!
//! Threads (the mt library): an I/O thread owns the socket. It polls the socket and a wake-up
//! pipe, feeds the core, writes its frames, and turns the core's events into jobs. Async
//! completions and watcher calls are jobs for the completion thread, which runs them one at a
//! time in the order the core produced them. Sync calls are completed on the I/O thread directly
//! (their caller is blocked on a slot), so a sync call made from inside a callback works: it waits
//! for the I/O thread, never for the completion thread it is running on.
//!
//! Locks: `shared` (core, pending calls, watchers, socket) is never held while application code
//! runs; `jobs` is held only to push or pop.

use crate::abi::{self, clientid_t, err, log_callback_fn, watcher_fn};
use crate::consts::value;
use crate::log;
use libc::{c_char, c_int, c_void};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};
use zk_client::core::{Event, Op, OpId, Response, RwProbe, Session, SessionState, WatcherId};
use zk_proto::{ErrorCode, EventType, KeeperState};

/// How a finished operation reaches the application.
pub enum Completion {
    /// No callback (an async call given a NULL completion).
    Nothing,
    Void(abi::void_completion_t),
    Stat(abi::stat_completion_t),
    Data(abi::data_completion_t),
    Strings(abi::strings_completion_t),
    StringsStat(abi::strings_stat_completion_t),
    String(abi::string_completion_t),
    StringStat(abi::string_stat_completion_t),
    Acl(abi::acl_completion_t),
    /// A multi (or, with `read`, a multiRead): results are written into the caller's arrays
    /// before the callback.
    Multi {
        cb: abi::void_completion_t,
        read: bool,
        ops: *const abi::zoo_op_t,
        results: *mut abi::zoo_op_result_t,
        count: usize,
    },
    /// A sync call: the caller waits on the slot.
    Sync(Arc<SyncSlot>),
}

/// A registered watcher as the application gave it.
#[derive(Clone, Copy, Debug)]
pub struct Watcher {
    pub func: watcher_fn,
    pub ctx: *mut c_void,
}

impl PartialEq for Watcher {
    /// Apache's client tells watchers apart by function address and context, so does this one.
    fn eq(&self, other: &Watcher) -> bool {
        fn_to_usize(self.func) == fn_to_usize(other.func) && self.ctx == other.ctx
    }
}

/// Which local watch a watcher is, for removeWatches (child or data side).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WatchSide {
    Data,
    Child,
    Persistent,
}

/// A watcher registered (or to be registered when its operation succeeds).
#[derive(Clone, Debug)]
pub struct WatchEntry {
    pub watcher: Watcher,
    pub path: String,
    pub side: WatchSide,
}

/// An operation waiting for its result.
pub struct Pending {
    pub completion: Completion,
    pub data: *const c_void,
    pub watch: Option<WatchEntry>,
}

/// What the completion thread runs.
pub enum Job {
    Complete { completion: Completion, data: *const c_void, result: Result<Response, c_int> },
    Watch { watcher: Watcher, event_type: c_int, state: c_int, path: std::ffi::CString },
}

// SAFETY: the raw pointers are the application's callback data and result arrays; the C API
// contract makes them valid until the completion runs, from whichever thread runs it.
unsafe impl Send for Completion {}
unsafe impl Send for Pending {}
unsafe impl Send for Job {}
unsafe impl Send for WatchEntry {}
unsafe impl Send for Watcher {}

/// Where a sync call's result lands.
#[derive(Default)]
pub struct SyncSlot {
    result: Mutex<Option<Result<Response, c_int>>>,
    ready: Condvar,
}

impl SyncSlot {
    pub fn fill(&self, r: Result<Response, c_int>) {
        let mut g = self.result.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(r);
        }
        self.ready.notify_all();
    }

    /// Waits for the result (`limit` bounds the wait; None waits for ever).
    pub fn wait(&self, limit: Option<Duration>) -> Option<Result<Response, c_int>> {
        let deadline = limit.map(|l| Instant::now() + l);
        let mut g = self.result.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = g.take() {
                return Some(r);
            }
            match deadline {
                None => g = self.ready.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    g = self.ready.wait_timeout(g, d - now).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
    }
}

/// The connection the core runs on.
pub struct Conn {
    pub stream: TcpStream,
    /// Frames not yet written (plaintext; TLS encrypts them as they go out).
    pub wbuf: Vec<u8>,
    /// The TLS session over `stream`, for a handle made by zookeeper_init_ssl.
    pub tls: Option<rustls::ClientConnection>,
}

impl Conn {
    /// Whether there is something to write: frames, or TLS records.
    pub fn wants_write(&self) -> bool {
        !self.wbuf.is_empty() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Closing: one best-effort blocking write of what is left (a final closeSession), a TLS
    /// close_notify, then shutdown.
    fn finish(mut self) {
        let _ = self.stream.set_nonblocking(false);
        let _ = self.stream.set_write_timeout(Some(Duration::from_millis(100)));
        match self.tls.as_mut() {
            Some(tls) => crate::tls::finish(tls, &mut self.stream, &self.wbuf),
            None => {
                let _ = self.stream.write_all(&self.wbuf);
            }
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// State behind the `shared` lock.
pub struct Shared {
    pub core: Session,
    pub pending: HashMap<OpId, Pending>,
    pub watchers: HashMap<WatcherId, WatchEntry>,
    pub conn: Option<Conn>,
    /// Set by zookeeper_close: the I/O thread exits.
    pub io_stop: bool,
    /// Events turned into jobs but not yet handed to whoever runs them (st: zookeeper_process).
    pub local_jobs: VecDeque<Job>,
    /// Watchers to forget when the checkWatches op with this id succeeds (zoo_remove_watches).
    pub removals: HashMap<OpId, Removal>,
}

/// One watcher (function and context) of a watcher type (1 child, 2 data, 3 any) on a path, to be
/// forgotten once the server confirmed it holds the watch.
pub struct Removal {
    pub path: String,
    pub wtype: c_int,
    pub watcher: Watcher,
}

// SAFETY: the watcher context is the application's pointer, handed back to it only.
unsafe impl Send for Removal {}

/// Whether a local watch on `side` is of watcher type `wtype` (1 children, 2 data, 3 any).
pub fn side_matches(wtype: c_int, side: WatchSide) -> bool {
    match wtype {
        1 => side == WatchSide::Child,
        2 => side == WatchSide::Data,
        _ => true,
    }
}

impl Shared {
    /// Forgets the local watchers on `path` of `wtype` (and function/context `w` when given), in
    /// the core too; returns how many.
    pub fn remove_watchers(&mut self, path: &str, wtype: c_int, w: Option<Watcher>) -> usize {
        let ids: Vec<WatcherId> = self
            .watchers
            .iter()
            .filter(|(_, e)| {
                e.path == path && side_matches(wtype, e.side) && w.is_none_or(|w| w == e.watcher)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            self.watchers.remove(id);
            self.core.forget_watcher(*id);
        }
        ids.len()
    }
}

/// Completion-thread queue.
#[derive(Default)]
pub struct Jobs {
    pub queue: VecDeque<Job>,
    /// Exit once the queue is empty.
    pub stop: bool,
}

/// A fixed text buffer whose address stays valid for the handle's life (zoo_get_current_server).
pub struct FixedText(pub std::cell::UnsafeCell<[c_char; 320]>);
// SAFETY: written only under `shared`; readers get a pointer, as with Apache's internal buffer.
unsafe impl Sync for FixedText {}
unsafe impl Send for FixedText {}

/// The client id the application reads through a pointer.
pub struct ClientIdCell(pub std::cell::UnsafeCell<clientid_t>);
// SAFETY: written only under `shared`; readers race benignly, as with Apache's handle field.
unsafe impl Sync for ClientIdCell {}
unsafe impl Send for ClientIdCell {}

/// The opaque zhandle_t.
pub struct Handle {
    pub shared: Mutex<Shared>,
    pub jobs: Mutex<Jobs>,
    pub jobs_ready: Condvar,
    wake_rd: c_int,
    wake_wr: c_int,
    pub threaded: bool,
    pub context: AtomicPtr<c_void>,
    pub watcher: AtomicUsize,
    pub log_cb: AtomicUsize,
    pub state: AtomicI32,
    pub recv_timeout_ms: AtomicI32,
    pub closing: AtomicBool,
    pub fd: AtomicI32,
    pub client_id: ClientIdCell,
    pub current_server: FixedText,
    pub completion_thread: Mutex<Option<ThreadId>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub auth_mutex: AuthMutex,
    /// TLS for every connection (zookeeper_init_ssl); plain TCP when `None`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// The mutex zoo_lock_auth/zoo_unlock_auth take (a pthread mutex: locked and unlocked by separate
/// calls).
pub struct AuthMutex(pub std::cell::UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a pthread mutex is made to be shared between threads.
unsafe impl Sync for AuthMutex {}
unsafe impl Send for AuthMutex {}

/// Reads a watcher_fn stored as usize.
fn fn_from_usize(v: usize) -> watcher_fn {
    // SAFETY: only ever stores 0 or a watcher_fn transmuted to usize (same size as a pointer).
    unsafe { std::mem::transmute::<usize, watcher_fn>(v) }
}

/// Stores a watcher_fn as usize.
pub fn fn_to_usize(f: watcher_fn) -> usize {
    f.map_or(0, |f| f as usize)
}

impl Handle {
    /// A handle around `core`; `threaded` starts the I/O and completion threads.
    pub fn start(
        core: Session,
        watcher: watcher_fn,
        context: *mut c_void,
        log_cb: log_callback_fn,
        threaded: bool,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> std::io::Result<Arc<Handle>> {
        let mut fds = [0 as c_int; 2];
        // SAFETY: fds is a valid out-array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let timeout = core.negotiated_timeout().as_millis().min(i32::MAX as u128) as i32;
        let h = Arc::new(Handle {
            shared: Mutex::new(Shared {
                core,
                pending: HashMap::new(),
                watchers: HashMap::new(),
                conn: None,
                io_stop: false,
                local_jobs: VecDeque::new(),
                removals: HashMap::new(),
            }),
            jobs: Mutex::new(Jobs::default()),
            jobs_ready: Condvar::new(),
            wake_rd: fds[0],
            wake_wr: fds[1],
            threaded,
            context: AtomicPtr::new(context),
            watcher: AtomicUsize::new(fn_to_usize(watcher)),
            log_cb: AtomicUsize::new(log_cb.map_or(0, |f| f as usize)),
            state: AtomicI32::new(value::CONNECTING),
            recv_timeout_ms: AtomicI32::new(timeout),
            closing: AtomicBool::new(false),
            fd: AtomicI32::new(-1),
            client_id: ClientIdCell(std::cell::UnsafeCell::new(clientid_t::default())),
            current_server: FixedText(std::cell::UnsafeCell::new([0; 320])),
            completion_thread: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            auth_mutex: AuthMutex(std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)),
            tls,
        });
        {
            let sh = h.lock();
            h.update_client_id(&sh);
        }
        if threaded {
            let io = Arc::clone(&h);
            let t1 = std::thread::Builder::new().name("zk-io".into()).spawn(move || io.io_loop())?;
            let cq = Arc::clone(&h);
            let t2 = std::thread::Builder::new()
                .name("zk-completion".into())
                .spawn(move || cq.completion_loop())?;
            *h.completion_thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t2.thread().id());
            h.threads.lock().unwrap_or_else(|e| e.into_inner()).extend([t1, t2]);
        }
        Ok(h)
    }

    pub fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn log_callback(&self) -> log_callback_fn {
        let v = self.log_cb.load(Ordering::Relaxed);
        // SAFETY: stores 0 or a log_callback_fn as usize.
        unsafe { std::mem::transmute::<usize, log_callback_fn>(v) }
    }

    pub fn global_watcher(&self) -> Watcher {
        Watcher {
            func: fn_from_usize(self.watcher.load(Ordering::Acquire)),
            ctx: self.context.load(Ordering::Acquire),
        }
    }

    /// Wakes the I/O thread (new work to send).
    pub fn wake(&self) {
        let b = 1u8;
        // SAFETY: writing one byte to our own pipe; a full pipe already means "wake up".
        unsafe { libc::write(self.wake_wr, (&b as *const u8).cast(), 1) };
    }

    fn drain_wake(&self) {
        let mut buf = [0u8; 64];
        // SAFETY: reading into a local buffer from our own non-blocking pipe.
        while unsafe { libc::read(self.wake_rd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }

    fn update_client_id(&self, sh: &Shared) {
        let mut id = clientid_t { client_id: sh.core.session_id(), passwd: [0; 16] };
        for (d, s) in id.passwd.iter_mut().zip(sh.core.session_password().iter()) {
            *d = *s as c_char;
        }
        // SAFETY: written under `shared`; see ClientIdCell.
        unsafe { *self.client_id.0.get() = id };
        let t = sh.core.negotiated_timeout().as_millis().min(i32::MAX as u128) as i32;
        self.recv_timeout_ms.store(t, Ordering::Relaxed);
    }

    fn set_current_server(&self, text: &str) {
        // SAFETY: written under `shared` by the driving thread only.
        let buf = unsafe { &mut *self.current_server.0.get() };
        let n = text.len().min(buf.len() - 1);
        for (d, s) in buf.iter_mut().zip(text.as_bytes()[..n].iter()) {
            *d = *s as c_char;
        }
        buf[n] = 0;
    }

    /// Submits `op`; `pending` says how its result is delivered. Returns ZOK or the error the
    /// call itself must return.
    pub fn submit(&self, op: Op, pending: Pending) -> c_int {
        self.submit_removal(op, pending, None)
    }

    /// [`Handle::submit`] that also forgets `removal`'s watcher when the op succeeds.
    pub fn submit_removal(&self, op: Op, pending: Pending, removal: Option<Removal>) -> c_int {
        if self.closing.load(Ordering::Acquire) {
            return err::ZINVALIDSTATE;
        }
        let mut sh = self.lock();
        if sh.core.state().is_terminal() {
            return err::ZINVALIDSTATE;
        }
        if !sh.core.has_capacity() {
            return err::ZSYSTEMERROR;
        }
        match sh.core.submit(op, Instant::now()) {
            Ok(id) => {
                sh.pending.insert(id, pending);
                if let Some(r) = removal {
                    sh.removals.insert(id, r);
                }
                self.after_input(&mut sh);
                drop(sh);
                self.wake();
                err::ZOK
            }
            Err(_) => err::ZSYSTEMERROR,
        }
    }

    /// zoo_set_servers: hands the new list to the core, which drops the connection when it must
    /// move; the driving thread (or loop) then dials from the new list. False for an empty list.
    pub fn set_hosts(&self, hosts: Vec<zk_client::core::HostPort>) -> bool {
        let mut sh = self.lock();
        let ok = sh.core.set_hosts(hosts, Instant::now());
        self.pump(&mut sh);
        drop(sh);
        self.wake();
        ok
    }

    /// Moves the core's events into jobs; run after every input to the core.
    fn after_input(&self, sh: &mut Shared) {
        let mut jobs = Vec::new();
        let mut session_targets: Vec<Watcher> = Vec::new();
        let mut group: Option<(i32, i32, String)> = None;
        let mut delivered: Vec<Watcher> = Vec::new();
        let closing = self.closing.load(Ordering::Acquire);
        while let Some(ev) = sh.core.poll_event() {
            match ev {
                Event::Completed { id, result, watch_registered } => {
                    group = None;
                    if let Some(r) = sh.removals.remove(&id) {
                        if result.is_ok() {
                            sh.remove_watchers(&r.path, r.wtype, Some(r.watcher));
                        }
                    }
                    let Some(p) = sh.pending.remove(&id) else { continue };
                    if watch_registered {
                        if let Some(w) = p.watch {
                            sh.watchers.insert(id, w);
                        }
                    }
                    let result = result.map_err(|e| map_error(e, closing));
                    match p.completion {
                        Completion::Sync(slot) => slot.fill(result),
                        completion => jobs.push(Job::Complete { completion, data: p.data, result }),
                    }
                }
                Event::Watch { watcher, event, retained } => {
                    let entry = if retained {
                        sh.watchers.get(&watcher).cloned()
                    } else {
                        sh.watchers.remove(&watcher)
                    };
                    let Some(entry) = entry else { continue };
                    if event.event_type == EventType::None {
                        if event.state != KeeperState::Closed {
                            session_targets.push(entry.watcher);
                        }
                        continue;
                    }
                    let Some(t) = c_event_type(event.event_type) else { continue };
                    let key = (t, c_state(event.state), event.path.clone());
                    if group.as_ref() != Some(&key) {
                        group = Some(key.clone());
                        delivered.clear();
                    }
                    // One call per (function, context) and event, as Apache keeps watchers in a set.
                    if delivered.contains(&entry.watcher) {
                        continue;
                    }
                    delivered.push(entry.watcher);
                    let Ok(path) = std::ffi::CString::new(event.path) else { continue };
                    jobs.push(Job::Watch { watcher: entry.watcher, event_type: t, state: key.1, path });
                }
                Event::State(s) => {
                    group = None;
                    self.update_client_id(sh);
                    let st = match s {
                        SessionState::Connecting | SessionState::Disconnected => value::CONNECTING,
                        SessionState::Connected => value::CONNECTED,
                        SessionState::ConnectedReadOnly => value::READONLY,
                        SessionState::Expired => value::EXPIRED,
                        SessionState::AuthFailed => value::AUTH_FAILED,
                        SessionState::Closed => 0,
                    };
                    self.state.store(st, Ordering::Release);
                    if s == SessionState::Closed {
                        session_targets.clear();
                        continue;
                    }
                    let cb = self.log_callback();
                    match s {
                        SessionState::Connected | SessionState::ConnectedReadOnly => log::log(
                            cb,
                            log::INFO,
                            "check_events",
                            format_args!(
                                "session establishment complete on server {}, session_id=0x{:016x}, negotiated timeout={}",
                                current_text(self),
                                sh.core.session_id(),
                                sh.core.negotiated_timeout().as_millis()
                            ),
                        ),
                        SessionState::Expired => log::log(cb, log::ERROR, "check_events", format_args!("session 0x{:016x} has expired", sh.core.session_id())),
                        SessionState::AuthFailed => match sh.core.sasl_failure() {
                            Some(why) => log::log(cb, log::ERROR, "check_events", format_args!("authentication failed: {why}")),
                            None => log::log(cb, log::ERROR, "check_events", format_args!("authentication failed")),
                        },
                        _ => {}
                    }
                    let mut targets = vec![self.global_watcher()];
                    targets.append(&mut session_targets);
                    if !s.is_terminal() {
                        targets.extend(sh.watchers.values().map(|w| w.watcher));
                    }
                    let mut seen: Vec<Watcher> = Vec::new();
                    for w in targets {
                        if w.func.is_none() || seen.contains(&w) {
                            continue;
                        }
                        seen.push(w);
                        jobs.push(Job::Watch {
                            watcher: w,
                            event_type: value::SESSION_EVENT,
                            state: st,
                            path: std::ffi::CString::default(),
                        });
                    }
                }
            }
        }
        if jobs.is_empty() {
            return;
        }
        if self.threaded {
            let mut q = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            q.queue.extend(jobs);
            drop(q);
            self.jobs_ready.notify_one();
        } else {
            sh.local_jobs.extend(jobs);
        }
    }

    /// Writes what the core wants sent, honours a close request, and turns events into jobs.
    fn pump(&self, sh: &mut Shared) {
        while let Some(f) = sh.core.poll_transmit() {
            if let Some(c) = sh.conn.as_mut() {
                c.wbuf.extend_from_slice(&f);
            }
        }
        if sh.core.poll_close() {
            if let Some(c) = sh.conn.take() {
                // A final closeSession may still be buffered.
                c.finish();
            }
            self.fd.store(-1, Ordering::Release);
        }
        self.after_input(sh);
    }

    /// The server to dial now, if the core wants a connection.
    fn due_dial(&self, sh: &mut Shared, now: Instant) -> Option<zk_client::core::HostPort> {
        if sh.conn.is_none() && !sh.io_stop {
            sh.core.poll_connect(now)
        } else {
            None
        }
    }

    /// A read-write probe to run now, if the core (connected read-only) wants one.
    fn due_probe(&self, sh: &mut Shared, now: Instant) -> Option<RwProbe> {
        if sh.conn.is_some() && !sh.io_stop {
            sh.core.poll_probe(now)
        } else {
            None
        }
    }

    /// Runs probe `p` (blocking, as Apache's C client does from zookeeper_interest: a second each
    /// for connecting and for the answer) and reports the answer to the core. When the server
    /// serves writes the core drops the read-only connection: the watchers get the
    /// ZOO_CONNECTING_STATE session event and the next dial goes to that server.
    fn probe(&self, p: RwProbe) {
        let answer = ask_isro(&p.host, self.tls.as_ref());
        let mut sh = self.lock();
        let was_read_only = sh.core.state() == SessionState::ConnectedReadOnly;
        sh.core.handle_probe_answer(Instant::now(), p.id, answer.as_deref());
        if was_read_only && sh.core.state() != SessionState::ConnectedReadOnly {
            log::log(
                self.log_callback(),
                log::INFO,
                "zookeeper_interest",
                format_args!("r/w server found at {}", p.host),
            );
        }
        self.pump(&mut sh);
    }

    /// Dials `hp` (blocking, bounded by the core's connect timeout) and reports to the core.
    fn dial(&self, hp: zk_client::core::HostPort, limit: Duration) {
        let text = hp.to_string();
        let cb = self.log_callback();
        log::log(cb, log::INFO, "zookeeper_interest", format_args!("Initiating client connection to {text}"));
        let limit = limit.max(Duration::from_millis(1));
        let mut result = Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no address"));
        if let Ok(addrs) = (hp.host.as_str(), hp.port).to_socket_addrs() {
            for a in addrs {
                result = TcpStream::connect_timeout(&a, limit);
                if result.is_ok() {
                    break;
                }
            }
        }
        // TLS: the handshake, blocking like the connect and bounded by the same limit.
        let result = result.and_then(|mut s| {
            let tls = match &self.tls {
                Some(cfg) => {
                    s.set_read_timeout(Some(limit))?;
                    s.set_write_timeout(Some(limit))?;
                    let tls = crate::tls::handshake(cfg, &hp.host, &mut s)
                        .map_err(|e| std::io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
                    s.set_read_timeout(None)?;
                    s.set_write_timeout(None)?;
                    Some(tls)
                }
                None => None,
            };
            Ok((s, tls))
        });
        let mut sh = self.lock();
        let now = Instant::now();
        self.set_current_server(&text);
        match result {
            Ok((s, tls)) if !sh.io_stop => {
                let _ = s.set_nodelay(true);
                let _ = s.set_nonblocking(true);
                self.fd.store(s.as_raw_fd(), Ordering::Release);
                sh.conn = Some(Conn { stream: s, wbuf: Vec::new(), tls });
                if self.state.load(Ordering::Acquire) == value::CONNECTING {
                    self.state.store(value::ASSOCIATING, Ordering::Release);
                }
                sh.core.handle_connected(now);
            }
            Ok(_) => {}
            Err(e) => {
                log::log(
                    cb,
                    log::WARN,
                    "handle_socket_error_msg",
                    format_args!("connect to {text} failed: {e}"),
                );
                sh.core.handle_connection_lost(now);
            }
        }
        self.after_input(&mut sh);
    }

    /// Reads what the socket has; reports a closed or failed socket to the core.
    fn on_readable(&self, sh: &mut Shared) {
        let Shared { conn, core, .. } = sh;
        if let Some(Conn { tls: Some(tls), stream, .. }) = conn.as_mut() {
            if !crate::tls::read_available(tls, stream, |b| core.handle_bytes(Instant::now(), b)) {
                self.lost(sh);
            }
            return;
        }
        let mut buf = [0u8; 64 * 1024];
        loop {
            let Some(c) = sh.conn.as_mut() else { return };
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    self.lost(sh);
                    return;
                }
                Ok(n) => {
                    sh.core.handle_bytes(Instant::now(), &buf[..n]);
                    if n < buf.len() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.lost(sh);
                    return;
                }
            }
        }
    }

    fn on_writable(&self, sh: &mut Shared) {
        let Some(c) = sh.conn.as_mut() else { return };
        if let Some(tls) = c.tls.as_mut() {
            if !crate::tls::write_available(tls, &mut c.stream, &mut c.wbuf) {
                self.lost(sh);
            }
            return;
        }
        while !c.wbuf.is_empty() {
            match c.stream.write(&c.wbuf) {
                Ok(n) => {
                    c.wbuf.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.lost(sh);
                    return;
                }
            }
        }
    }

    fn lost(&self, sh: &mut Shared) {
        sh.conn = None;
        self.fd.store(-1, Ordering::Release);
        sh.core.handle_connection_lost(Instant::now());
    }

    /// The I/O thread: one iteration prepares, polls, then feeds the core.
    fn io_loop(self: Arc<Self>) {
        loop {
            let (fd, want_write, timeout_ms) = {
                let mut sh = self.lock();
                if sh.io_stop {
                    return;
                }
                let now = Instant::now();
                sh.core.handle_timeout(now);
                self.pump(&mut sh);
                if let Some(hp) = self.due_dial(&mut sh, now) {
                    let limit = sh.core.connect_timeout();
                    drop(sh);
                    self.dial(hp, limit);
                    continue;
                }
                if let Some(p) = self.due_probe(&mut sh, now) {
                    drop(sh);
                    self.probe(p);
                    continue;
                }
                // Write eagerly: most frames go out without waiting for POLLOUT.
                self.on_writable(&mut sh);
                self.pump(&mut sh);
                let fd = sh.conn.as_ref().map_or(-1, |c| c.stream.as_raw_fd());
                let want_write = sh.conn.as_ref().is_some_and(Conn::wants_write);
                let t = sh.core.poll_timeout().map_or(1000, |d| {
                    d.saturating_duration_since(Instant::now()).as_millis().min(1000) as c_int
                });
                (fd, want_write, t)
            };
            let mut pfds = [
                libc::pollfd { fd: self.wake_rd, events: libc::POLLIN, revents: 0 },
                libc::pollfd {
                    fd,
                    events: libc::POLLIN | if want_write { libc::POLLOUT } else { 0 },
                    revents: 0,
                },
            ];
            let n = if fd >= 0 { 2 } else { 1 };
            // SAFETY: pfds holds `n` valid pollfd entries.
            unsafe { libc::poll(pfds.as_mut_ptr(), n, timeout_ms.max(0) + 1) };
            if pfds[0].revents != 0 {
                self.drain_wake();
            }
            if n == 2 && pfds[1].revents != 0 {
                let mut sh = self.lock();
                if sh.conn.as_ref().map(|c| c.stream.as_raw_fd()) == Some(fd) {
                    if pfds[1].revents & libc::POLLOUT != 0 {
                        self.on_writable(&mut sh);
                    }
                    if pfds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                        self.on_readable(&mut sh);
                    }
                }
                self.pump(&mut sh);
            }
        }
    }

    /// The completion thread: runs jobs in order until told to stop with an empty queue.
    fn completion_loop(self: Arc<Self>) {
        loop {
            let job = {
                let mut q = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(j) = q.queue.pop_front() {
                        break j;
                    }
                    if q.stop {
                        return;
                    }
                    q = self.jobs_ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            self.run_job(job);
        }
    }

    /// Runs one job on the current thread.
    pub fn run_job(&self, job: Job) {
        let zh = self as *const Handle as *mut c_void;
        match job {
            Job::Watch { watcher, event_type, state, path } => {
                if let Some(f) = watcher.func {
                    // SAFETY: the application's watcher, called with its own context and a path
                    // valid for the call.
                    unsafe { f(zh, event_type, state, path.as_ptr(), watcher.ctx) };
                }
            }
            Job::Complete { completion, data, result } => crate::deliver::deliver(completion, data, result),
        }
    }

    /// zookeeper_close for a threaded handle (`this` is the handle the application owned).
    pub fn close(this: Arc<Handle>) -> c_int {
        if this.closing.swap(true, Ordering::AcqRel) {
            return err::ZOK;
        }
        let in_callback = *this.completion_thread.lock().unwrap_or_else(|e| e.into_inner())
            == Some(std::thread::current().id());
        // Ask the server to end the session; wait a bounded time for its answer.
        let slot = Arc::new(SyncSlot::default());
        let connected = {
            let mut sh = this.lock();
            let open = !sh.core.state().is_terminal();
            if open {
                if let Ok(id) = sh.core.submit(Op::Close, Instant::now()) {
                    sh.pending.insert(
                        id,
                        Pending {
                            completion: Completion::Sync(Arc::clone(&slot)),
                            data: std::ptr::null(),
                            watch: None,
                        },
                    );
                }
                this.after_input(&mut sh);
            }
            open
        };
        if connected && this.threaded {
            this.wake();
            let limit =
                Duration::from_millis(this.recv_timeout_ms.load(Ordering::Relaxed).clamp(100, 3000) as u64);
            let _ = slot.wait(Some(limit));
        }
        // Whatever is still pending ends with ZCLOSING.
        {
            let mut sh = this.lock();
            sh.io_stop = true;
            if let Some(mut c) = sh.conn.take() {
                while let Some(f) = sh.core.poll_transmit() {
                    c.wbuf.extend_from_slice(&f);
                }
                c.finish();
            }
            this.fd.store(-1, Ordering::Release);
            let pend: Vec<Pending> = sh.pending.drain().map(|(_, p)| p).collect();
            let mut jobs = Vec::new();
            for p in pend {
                match p.completion {
                    Completion::Sync(s) => s.fill(Err(err::ZCLOSING)),
                    completion => {
                        jobs.push(Job::Complete { completion, data: p.data, result: Err(err::ZCLOSING) })
                    }
                }
            }
            if this.threaded {
                this.jobs.lock().unwrap_or_else(|e| e.into_inner()).queue.extend(jobs);
            } else {
                sh.local_jobs.extend(jobs);
            }
        }
        this.wake();
        if !this.threaded {
            let jobs: Vec<Job> = this.lock().local_jobs.drain(..).collect();
            for j in jobs {
                this.run_job(j);
            }
            return err::ZOK;
        }
        {
            let mut q = this.jobs.lock().unwrap_or_else(|e| e.into_inner());
            q.stop = true;
        }
        this.jobs_ready.notify_all();
        let threads: Vec<JoinHandle<()>> =
            this.threads.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect();
        for t in threads {
            if t.thread().id() == std::thread::current().id() {
                // Closed from inside a callback: the completion thread finishes its queue and
                // drops the last reference after this callback returns.
                continue;
            }
            let _ = t.join();
        }
        let _ = in_callback;
        err::ZOK
    }

    // ---- single-threaded driving (zookeeper_interest / zookeeper_process) ----

    /// zookeeper_interest: dials when due, and says which fd to poll for what and for how long.
    pub fn interest(&self, fd: &mut c_int, interest: &mut c_int, tv: &mut libc::timeval) -> c_int {
        let now = Instant::now();
        let mut sh = self.lock();
        sh.core.handle_timeout(now);
        self.pump(&mut sh);
        if let Some(hp) = self.due_dial(&mut sh, now) {
            let limit = sh.core.connect_timeout();
            drop(sh);
            self.dial(hp, limit);
            sh = self.lock();
            self.pump(&mut sh);
        }
        if let Some(p) = self.due_probe(&mut sh, now) {
            drop(sh);
            self.probe(p);
            sh = self.lock();
        }
        self.on_writable(&mut sh);
        self.pump(&mut sh);
        match sh.conn.as_ref() {
            Some(c) => {
                *fd = c.stream.as_raw_fd();
                // Apache's bits: ZOOKEEPER_READ is 2, ZOOKEEPER_WRITE is 1.
                *interest = 2 | if c.wants_write() { 1 } else { 0 };
            }
            None => {
                *fd = -1;
                *interest = 0;
            }
        }
        let wait = sh
            .core
            .poll_timeout()
            .map_or(Duration::from_secs(1), |d| d.saturating_duration_since(Instant::now()));
        tv.tv_sec = wait.as_secs() as libc::time_t;
        tv.tv_usec = wait.subsec_micros() as libc::suseconds_t;
        let terminal = sh.core.state().is_terminal();
        drop(sh);
        if terminal {
            return err::ZINVALIDSTATE;
        }
        err::ZOK
    }

    /// zookeeper_process: handles the socket events (ZOOKEEPER_READ 2, ZOOKEEPER_WRITE 1) and runs
    /// the callbacks.
    pub fn process(&self, events: c_int) -> c_int {
        let mut sh = self.lock();
        // ZOOKEEPER_WRITE (1), then ZOOKEEPER_READ (2).
        if events & 1 != 0 {
            self.on_writable(&mut sh);
        }
        if events & 2 != 0 {
            self.on_readable(&mut sh);
        }
        let now = Instant::now();
        sh.core.handle_timeout(now);
        self.pump(&mut sh);
        let jobs: Vec<Job> = sh.local_jobs.drain(..).collect();
        let terminal = sh.core.state().is_terminal();
        drop(sh);
        let had = !jobs.is_empty();
        for j in jobs {
            self.run_job(j);
        }
        if terminal {
            return err::ZINVALIDSTATE;
        }
        if had {
            err::ZOK
        } else {
            err::ZNOTHING
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: closing our own pipe fds once.
        unsafe {
            libc::close(self.wake_rd);
            libc::close(self.wake_wr);
        }
    }
}

fn current_text(h: &Handle) -> String {
    // SAFETY: the buffer is always NUL-terminated.
    unsafe { std::ffi::CStr::from_ptr((*h.current_server.0.get()).as_ptr()) }.to_string_lossy().into_owned()
}

/// The C error code for a core error; after zookeeper_close the session-ending codes read ZCLOSING.
pub fn map_error(e: ErrorCode, closing: bool) -> c_int {
    if closing && matches!(e, ErrorCode::SessionExpired | ErrorCode::ConnectionLoss) {
        return err::ZCLOSING;
    }
    e.code()
}

fn c_event_type(t: EventType) -> Option<c_int> {
    match t {
        EventType::NodeCreated => Some(1),
        EventType::NodeDeleted => Some(2),
        EventType::NodeDataChanged => Some(3),
        EventType::NodeChildrenChanged => Some(4),
        // Removal notices have no C event type; Apache's C client does not call watchers for them.
        _ => None,
    }
}

fn c_state(s: KeeperState) -> c_int {
    match s {
        KeeperState::SyncConnected => value::CONNECTED,
        KeeperState::ConnectedReadOnly => value::READONLY,
        KeeperState::Expired => value::EXPIRED,
        KeeperState::AuthFailed => value::AUTH_FAILED,
        KeeperState::Disconnected => value::CONNECTING,
        _ => value::CONNECTED,
    }
}

/// Asks `hp` whether it serves writes: connects, sends `isro`, reads what the server sends before
/// closing (bounded). `None` when any step fails or times out.
fn ask_isro(hp: &zk_client::core::HostPort, tls: Option<&Arc<rustls::ClientConfig>>) -> Option<Vec<u8>> {
    use zk_client::core::{RW_PROBE_MAX_ANSWER, RW_PROBE_REQUEST, RW_PROBE_TIMEOUT};
    let addrs = (hp.host.as_str(), hp.port).to_socket_addrs().ok()?;
    let mut s = addrs.into_iter().find_map(|a| TcpStream::connect_timeout(&a, RW_PROBE_TIMEOUT).ok())?;
    s.set_write_timeout(Some(RW_PROBE_TIMEOUT)).ok()?;
    s.set_read_timeout(Some(RW_PROBE_TIMEOUT)).ok()?;
    if let Some(cfg) = tls {
        return crate::tls::ask(cfg, &hp.host, s, RW_PROBE_REQUEST, RW_PROBE_MAX_ANSWER);
    }
    s.write_all(RW_PROBE_REQUEST).ok()?;
    let mut answer = Vec::with_capacity(RW_PROBE_MAX_ANSWER);
    s.take(RW_PROBE_MAX_ANSWER as u64).read_to_end(&mut answer).ok()?;
    Some(answer)
}
