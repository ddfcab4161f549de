//! zkrs-cli: a ZooKeeper shell with zkCli.sh's commands and output.
//!
//! `zkrs-cli [-server host:port[,host:port]*[/chroot]] [-timeout ms] [-r] [cmd args...]`: with a
//! command it runs that one command and exits (0 on success, 1 on an error, 127 for an unknown
//! command, as zkCli.sh does); without one it reads commands interactively with line editing,
//! history and completion of command names and znode paths.
//!
//! What scripts parse is printed exactly as zkCli.sh prints it: data on stdout, Stat blocks
//! (`cZxid = 0x...`), ACL lines, `[a, b]` child lists, "Created /x" on stderr, and error messages
//! ("Node does not exist: /x", "KeeperErrorCode = ... for /x") on stderr. Times are printed in UTC
//! in Java's `Date.toString` format (zkCli.sh prints the JVM's local zone; the same on UTC hosts).
//!
//! TLS as Apache's Java client takes it: `zookeeper.client.secure=true` with PEM
//! `zookeeper.ssl.trustStore.location` and `zookeeper.ssl.keyStore.location`, from the
//! `-client-configuration` file or `-D` flags in `CLIENT_JVMFLAGS`/`JVMFLAGS`.
//!
//! Known differences from zkCli.sh: a node created without data holds empty data (zkCli.sh sends
//! null, which it reads back as "null"); `removewatches -l` always asks the server; the session is
//! closed when a one-shot command exits (zkCli.sh leaves it to expire).

#[path = "zkrs_cli/client_config.rs"]
mod client_config;
#[path = "zkrs_cli/export.rs"]
mod export;
#[path = "zkrs_cli/from_snapshot.rs"]
mod from_snapshot;
#[path = "zkrs_cli/import.rs"]
mod import;
#[path = "zkrs_cli/transfer.rs"]
mod transfer;

use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{DefaultHistory, History};
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::collections::{HashMap, VecDeque};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;
use zk_client::{
    acl, Acl, AddWatchMode, Client, CreateMode, Error, EventType, Id, KeeperState, MultiOp, SessionState,
    Stat, WatchedEvent, WatcherType,
};

/// Commands and their usage strings, as zkCli.sh lists them.
const COMMANDS: &[(&str, &str)] = &[
    ("addWatch", "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE"),
    ("addauth", "scheme auth"),
    ("close", ""),
    ("config", "[-c] [-w] [-s]"),
    ("connect", "host:port"),
    ("create", "[-s] [-e] [-c] [-t ttl] path [data] [acl]"),
    ("delete", "[-v version] path"),
    ("deleteall", "path [-b batch size]"),
    ("export", "[--sync] [--auth scheme:auth]... [--kind path=container|ttl:ms]... path [file] | --from-snapshot snapshot path [file]"),
    ("get", "[-s] [-w] path"),
    ("getAcl", "[-s] path"),
    ("getAllChildrenNumber", "path"),
    ("getEphemerals", "path"),
    ("history", ""),
    ("import", "[--merge [--overwrite]] [--auth scheme:auth]... (file | --from-snapshot snapshot --source path) [path]"),
    ("ls", "[-s] [-w] [-R] path"),
    ("printwatches", "on|off"),
    ("quit", ""),
    ("reconfig", "[-s] [-v version] [[-file path] | [-members serverID=host:port1:port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* [-remove serverId[,...]*]"),
    ("redo", "cmdno"),
    ("removewatches", "path [-c|-d|-a] [-l]"),
    ("set", "[-s] [-v version] path data"),
    ("setAcl", "[-s] [-v version] [-R] path acl"),
    ("stat", "[-w] path"),
    ("sync", "path"),
    ("version", ""),
    ("whoami", ""),
];

/// Lines of history kept in memory (interactive editing and the `history` command).
const HISTORY_MAX: usize = 1000;
/// Deletes per multi in `deleteall` unless `-b` says otherwise (zkCli.sh's default).
const DELETEALL_BATCH: usize = 1000;
/// How long path completion waits for the server before offering nothing.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(2);

fn usage_of(cmd: &str) -> String {
    let u = COMMANDS.iter().find(|(c, _)| *c == cmd).map(|(_, u)| *u).unwrap_or("");
    format!("{cmd} {u}")
}

fn print_usage() {
    eprintln!("ZooKeeper -server host:port -client-configuration properties-file cmd args");
    for (c, u) in COMMANDS {
        eprintln!("\t{c} {u}");
    }
}

/// A command that did not complete; `message` goes to stderr.
#[derive(Debug)]
enum CliError {
    /// Bad arguments or options (exit code 1).
    Parse(String),
    /// The command is unknown (exit code 127).
    NotFound(String),
    /// The server or client refused the operation (exit code 1).
    Failed(String),
}

impl CliError {
    fn exit_code(&self) -> i32 {
        match self {
            CliError::NotFound(_) => 127,
            _ => 1,
        }
    }
    fn message(&self) -> String {
        match self {
            CliError::Parse(m) | CliError::Failed(m) => m.clone(),
            CliError::NotFound(c) => format!("Command not found: Command not found {c}"),
        }
    }
}

/// ZooKeeper's name for an error code, as Java's `KeeperException` spells it.
fn code_message(e: Error) -> String {
    match e {
        Error::SystemError => "SystemError".into(),
        Error::RuntimeInconsistency => "RuntimeInconsistency".into(),
        Error::DataInconsistency => "DataInconsistency".into(),
        Error::ConnectionLoss => "ConnectionLoss".into(),
        Error::MarshallingError => "MarshallingError".into(),
        Error::NewConfigNoQuorum => "NewConfigNoQuorum".into(),
        Error::ReconfigInProgress => "ReconfigInProgress".into(),
        Error::Unimplemented => "Unimplemented".into(),
        Error::OperationTimeout => "OperationTimeout".into(),
        Error::BadArguments => "BadArguments".into(),
        Error::ApiError => "APIError".into(),
        Error::NoNode => "NoNode".into(),
        Error::NoAuth => "NoAuth".into(),
        Error::BadVersion => "BadVersion".into(),
        Error::NoChildrenForEphemerals => "NoChildrenForEphemerals".into(),
        Error::NodeExists => "NodeExists".into(),
        Error::InvalidAcl => "InvalidACL".into(),
        Error::AuthFailed => "AuthFailed".into(),
        Error::NotEmpty => "Directory not empty".into(),
        Error::SessionExpired => "Session expired".into(),
        Error::InvalidCallback => "Invalid callback".into(),
        Error::SessionMoved => "Session moved".into(),
        Error::NotReadOnly => "Not a read-only call".into(),
        Error::EphemeralOnLocalSession => "Ephemeral node on local session".into(),
        Error::NoWatcher => "No such watcher".into(),
        Error::ReconfigDisabled => "Reconfig is disabled".into(),
        Error::SessionClosedRequireSaslAuth => "Session closed because client failed to authenticate".into(),
        Error::QuotaExceeded => "Quota has exceeded".into(),
        Error::ThrottledOp => "Op throttled due to high load".into(),
        other => format!("Unknown error {}", other.code() as i32),
    }
}

/// `KeeperException.getMessage()`.
fn keeper_exception(e: Error, path: &str) -> String {
    if path.is_empty() {
        format!("KeeperErrorCode = {}", code_message(e))
    } else {
        format!("KeeperErrorCode = {} for {path}", code_message(e))
    }
}

/// The message zkCli.sh prints for an operation on `path` that failed with `e`.
fn failed(e: Error, path: &str) -> CliError {
    CliError::Failed(match e {
        Error::NoNode => format!("Node does not exist: {path}"),
        Error::NoChildrenForEphemerals => format!("Ephemerals cannot have children: {path}"),
        Error::NodeExists => format!("Node already exists: {path}"),
        Error::NotEmpty => format!("Node not empty: {path}"),
        Error::NotReadOnly => format!("Not a read-only call: {path}"),
        Error::InvalidAcl => format!("Acl is not valid : {path}"),
        Error::NoAuth => format!("Insufficient permission : {path}"),
        Error::BadArguments => format!("Arguments are not valid : {path}"),
        Error::BadVersion => format!("version No is not valid : {path}"),
        Error::ReconfigInProgress => {
            "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)".into()
        }
        Error::QuotaExceeded => format!("Quota has exceeded : {path}"),
        other => keeper_exception(other, path),
    })
}

/// Checks a path as the Java client does before sending, with its messages. Sequential creates
/// are checked with a digit appended, so "/q/" is a valid sequential prefix.
fn check_path(path: &str, sequential: bool) -> Result<(), CliError> {
    use zk_proto::path::PathError;
    let full = if sequential { format!("{path}1") } else { path.to_owned() };
    match zk_proto::path::validate_path(&full) {
        Ok(()) => Ok(()),
        Err(PathError::Empty) => Err(CliError::Failed("Path length must be > 0".into())),
        Err(PathError::NotAbsolute) => Err(CliError::Failed("Path must start with / character".into())),
        Err(PathError::TrailingSlash) => Err(CliError::Failed("Path must not end with / character".into())),
        Err(reason) => Err(CliError::Failed(format!("Invalid path string \"{full}\" caused by {reason}"))),
    }
}

/// A command line split into options and positional arguments, the way zkCli.sh's option
/// parser does: options may come anywhere, flags may be bundled (`-es`), and a token that is a
/// negative number is an argument.
#[derive(Debug)]
struct Parsed {
    opts: HashMap<char, String>,
    args: Vec<String>,
}

impl Parsed {
    fn has(&self, c: char) -> bool {
        self.opts.contains_key(&c)
    }
    fn int(&self, c: char) -> Result<Option<i64>, CliError> {
        match self.opts.get(&c) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| CliError::Parse(format!("For input string: \"{v}\""))),
        }
    }
}

/// A `reconfig` command line, as zkCli.sh reads it.
#[derive(Debug, Default, PartialEq, Eq)]
struct ReconfigArgs {
    joining: Option<String>,
    leaving: Option<String>,
    members: Option<String>,
    version: i64,
    stat: bool,
}

/// `reconfig [-s] [-v hexversion] (-file path | -members list | [-add list] [-remove ids])`:
/// lists are lower-cased and passed on, a file's membership lines become the member list; the
/// modes cannot be mixed (zkCli.sh's messages).
fn parse_reconfig(tokens: &[String]) -> Result<ReconfigArgs, CliError> {
    let usage = || CliError::Parse(usage_of("reconfig"));
    let mut r = ReconfigArgs { version: -1, ..Default::default() };
    let (mut file, mut version) = (None, None);
    let mut it = tokens.iter().skip(1);
    while let Some(t) = it.next() {
        let mut value = |name: &str| {
            it.next().cloned().ok_or_else(|| CliError::Parse(format!("Missing argument for option: {name}")))
        };
        match t.as_str() {
            "-s" => r.stat = true,
            "-v" => version = Some(value("v")?),
            "-file" => file = Some(value("file")?),
            "-members" => r.members = Some(value("members")?.to_lowercase()),
            "-add" => r.joining = Some(value("add")?.to_lowercase()),
            "-remove" => r.leaving = Some(value("remove")?.to_lowercase()),
            other if other.starts_with('-') => {
                return Err(CliError::Parse(format!("Unrecognized option: {other}")))
            }
            _ => {}
        }
    }
    let whole = file.is_some() || r.members.is_some();
    if !whole && r.joining.is_none() && r.leaving.is_none() {
        return Err(usage());
    }
    if let Some(v) = version {
        r.version = i64::from_str_radix(&v, 16)
            .map_err(|_| CliError::Parse("-v must be followed by a long (configuration version)".into()))?;
    }
    if whole && (r.joining.is_some() || r.leaving.is_some()) {
        return Err(CliError::Parse(
            "Can't use -file or -members together with -add or -remove (mixing incremental and \
             non-incremental modes is not allowed)"
                .into(),
        ));
    }
    if file.is_some() && r.members.is_some() {
        return Err(CliError::Parse(
            "Can't use -file and -members together (conflicting non-incremental modes)".into(),
        ));
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| CliError::Parse(format!("Error processing {path}: {e}")))?;
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| ["server.", "group.", "weight.", "version="].iter().any(|k| l.starts_with(k)))
            .collect();
        if !lines.iter().any(|l| l.starts_with("server.")) {
            return Err(CliError::Parse(format!("Error processing {path}: no server.N lines")));
        }
        r.members = Some(lines.join("\n"));
    }
    Ok(r)
}

fn is_negative_number(t: &str) -> bool {
    t.len() > 1 && t.starts_with('-') && t[1..].parse::<f64>().is_ok()
}

/// `flags` are options without a value, `valued` those that take one.
fn parse(tokens: &[String], flags: &str, valued: &str) -> Result<Parsed, CliError> {
    let mut p = Parsed { opts: HashMap::new(), args: Vec::new() };
    let mut it = tokens.iter();
    let mut rest_are_args = false;
    while let Some(t) = it.next() {
        if rest_are_args || !t.starts_with('-') || t == "-" || is_negative_number(t) {
            p.args.push(t.clone());
            continue;
        }
        if t == "--" {
            rest_are_args = true;
            continue;
        }
        let body = &t[1..];
        for (i, c) in body.char_indices() {
            if valued.contains(c) {
                let inline = &body[i + c.len_utf8()..];
                let v = if !inline.is_empty() {
                    inline.to_owned()
                } else {
                    it.next()
                        .cloned()
                        .ok_or_else(|| CliError::Parse(format!("Missing argument for option: {c}")))?
                };
                p.opts.insert(c, v);
                break;
            } else if flags.contains(c) {
                p.opts.insert(c, String::new());
            } else {
                return Err(CliError::Parse(format!("Unrecognized option: {t}")));
            }
        }
    }
    Ok(p)
}

/// Splits an interactive line into tokens: whitespace separates, and "double" or 'single' quotes
/// keep spaces inside a token (the quotes are dropped).
fn tokenize(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else { break };
        let mut tok = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            for c in chars.by_ref() {
                if c == first {
                    break;
                }
                tok.push(c);
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                tok.push(c);
                chars.next();
            }
        }
        out.push(tok);
    }
    out
}

/// The civil date (year, month 1-12, day 1-31) of a day counted from 1970-01-01, proleptic
/// Gregorian, by 400-year eras.
fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Java's `Date.toString()` for a time in ms since the epoch, in UTC:
/// "Thu Jan 01 00:00:00 UTC 1970".
fn java_date(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (year, month, day) = civil_date(days);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} UTC {}",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        sod / 3600,
        sod % 3600 / 60,
        sod % 60,
        year
    )
}

fn print_stat(st: &Stat) {
    println!("cZxid = 0x{:x}", st.czxid);
    println!("ctime = {}", java_date(st.ctime));
    println!("mZxid = 0x{:x}", st.mzxid);
    println!("mtime = {}", java_date(st.mtime));
    println!("pZxid = 0x{:x}", st.pzxid);
    println!("cversion = {}", st.cversion);
    println!("dataVersion = {}", st.version);
    println!("aclVersion = {}", st.aversion);
    println!("ephemeralOwner = 0x{:x}", st.ephemeral_owner);
    println!("dataLength = {}", st.data_length);
    println!("numChildren = {}", st.num_children);
}

/// zkCli.sh's permission letters, in its order.
fn perm_string(perms: i32) -> String {
    use zk_proto::perms::*;
    [(CREATE, 'c'), (DELETE, 'd'), (READ, 'r'), (WRITE, 'w'), (ADMIN, 'a')]
        .iter()
        .filter(|(p, _)| perms & p != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// A string as jute's CSV form writes it (zkCli.sh prints ids that way): a leading quote and
/// `%XX` escapes for the separators.
fn csv_string(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\0' => out.push_str("%00"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            ',' => out.push_str("%2C"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

/// `scheme:id:perms[,scheme:id:perms]*`; malformed entries are reported and skipped, as zkCli.sh
/// does (an empty result is then refused by the server as an invalid ACL).
fn parse_acl(s: &str) -> Vec<Acl> {
    let mut out = Vec::new();
    for a in s.split(',') {
        let (Some(first), Some(last)) = (a.find(':'), a.rfind(':')) else {
            eprintln!("{a} does not have the form scheme:id:perm");
            continue;
        };
        if first == last {
            eprintln!("{a} does not have the form scheme:id:perm");
            continue;
        }
        let mut perms = 0;
        for c in a[last + 1..].chars() {
            perms |= match c {
                'r' => zk_proto::perms::READ,
                'w' => zk_proto::perms::WRITE,
                'c' => zk_proto::perms::CREATE,
                'd' => zk_proto::perms::DELETE,
                'a' => zk_proto::perms::ADMIN,
                other => {
                    eprintln!("Unknown perm type: {other}");
                    0
                }
            };
        }
        out.push(Acl { perms, id: Id { scheme: a[..first].to_owned(), id: a[first + 1..last].to_owned() } });
    }
    out
}

fn print_event(print: &AtomicBool, ev: &WatchedEvent) {
    if !print.load(Ordering::Relaxed) {
        return;
    }
    let path = if ev.event_type == EventType::None { "null" } else { ev.path.as_str() };
    println!("\nWATCHER::\n\nWatchedEvent state:{:?} type:{:?} path:{path}", ev.state, ev.event_type);
}

fn prompt_state(c: Option<&Client>) -> &'static str {
    match c.map(Client::state) {
        None => "NOT_CONNECTED",
        Some(SessionState::Connecting | SessionState::Disconnected) => "CONNECTING",
        Some(SessionState::Connected) => "CONNECTED",
        Some(SessionState::ConnectedReadOnly) => "CONNECTEDREADONLY",
        Some(SessionState::Expired | SessionState::Closed) => "CLOSED",
        Some(SessionState::AuthFailed) => "AUTH_FAILED",
    }
}

/// The shell's state: the session, the options it was made with, and the numbered history.
struct Shell {
    rt: Arc<Runtime>,
    host: String,
    timeout: Duration,
    read_only: bool,
    tls: Option<zk_client::ClientTls>,
    sasl: Option<client_config::Sasl>,
    client: Option<Client>,
    print_watches: Arc<AtomicBool>,
    history: VecDeque<(u64, String)>,
    command_count: u64,
}

impl Shell {
    /// Opens a session to `host`, closing any earlier one; prints the connection event.
    fn connect(&mut self, host: &str) -> Result<(), CliError> {
        if let Some(old) = self.client.take() {
            let _ = self.rt.block_on(old.close());
        }
        self.host = host.to_owned();
        let mut builder =
            Client::builder(host).session_timeout(self.timeout).can_be_read_only(self.read_only);
        if let Some(tls) = &self.tls {
            builder = builder.tls(tls.clone());
        }
        match &self.sasl {
            Some(client_config::Sasl::DigestMd5(c)) => {
                builder = builder.sasl_digest_md5(&c.username, &c.password)
            }
            #[cfg(feature = "kerberos")]
            Some(client_config::Sasl::Kerberos(o)) => {
                builder = builder.sasl_gssapi(zk_client::gssapi::Kerberos::new(o.clone()).into_config())
            }
            None => {}
        }
        let client = self.rt.block_on(builder.connect_explained()).map_err(|f| {
            if let Some(reason) = &f.reason {
                eprintln!("SASL authentication failed: {reason}");
            }
            failed(f.error, "")
        })?;
        let state = if client.state() == SessionState::ConnectedReadOnly {
            KeeperState::ConnectedReadOnly
        } else {
            KeeperState::SyncConnected
        };
        print_event(
            &self.print_watches,
            &WatchedEvent { event_type: EventType::None, state, path: String::new() },
        );
        let mut states = client.state_events();
        let print = self.print_watches.clone();
        self.rt.spawn(async move {
            // The first connection was reported above; a later Connected follows a Disconnected.
            let mut lost = false;
            while let Some(s) = states.next().await {
                let news = match s {
                    SessionState::Connected | SessionState::ConnectedReadOnly => std::mem::take(&mut lost),
                    SessionState::Disconnected => {
                        lost = true;
                        true
                    }
                    // close and quit report Closed themselves; a one-shot exit is silent.
                    SessionState::Closed | SessionState::Connecting => false,
                    SessionState::Expired | SessionState::AuthFailed => true,
                };
                if news {
                    let ev = WatchedEvent {
                        event_type: EventType::None,
                        state: s.keeper_state(),
                        path: String::new(),
                    };
                    print_event(&print, &ev);
                }
            }
        });
        self.client = Some(client);
        Ok(())
    }

    /// Runs one command line (already split); returns the exit code it earns.
    fn execute(&mut self, tokens: &[String]) -> i32 {
        match self.dispatch(tokens) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{}", e.message());
                e.exit_code()
            }
        }
    }

    fn add_history(&mut self, line: &str) {
        self.history.push_back((self.command_count, line.to_owned()));
        if self.history.len() > HISTORY_MAX {
            self.history.pop_front();
        }
    }

    fn dispatch(&mut self, tokens: &[String]) -> Result<(), CliError> {
        let Some(cmd) = tokens.first() else {
            print_usage();
            return Err(CliError::Parse("No command entered".into()));
        };
        if !COMMANDS.iter().any(|(c, _)| c == cmd) {
            print_usage();
            return Err(CliError::NotFound(cmd.clone()));
        }
        match cmd.as_str() {
            "quit" => {
                self.close_session();
                return Ok(());
            }
            "history" => {
                let from = self.command_count.saturating_sub(10);
                for (n, l) in self.history.iter().filter(|(n, _)| *n >= from) {
                    println!("{n} - {l}");
                }
                return Ok(());
            }
            "redo" => {
                let n: u64 = tokens
                    .get(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| CliError::Parse(usage_of("redo")))?;
                if n >= self.command_count {
                    return Err(CliError::Parse("Command index out of range".into()));
                }
                let line = self
                    .history
                    .iter()
                    .find(|(i, _)| *i == n)
                    .map(|(_, l)| l.clone())
                    .ok_or_else(|| CliError::Parse("Command index out of range".into()))?;
                let toks = tokenize(&line);
                if toks.first().map(String::as_str) == Some("redo") {
                    return Err(CliError::Parse("No redoing redos".into()));
                }
                if let Some(last) = self.history.back_mut() {
                    last.1 = line;
                }
                return self.dispatch(&toks);
            }
            "printwatches" => {
                match tokens.get(1) {
                    None => println!(
                        "printwatches is {}",
                        if self.print_watches.load(Ordering::Relaxed) { "on" } else { "off" }
                    ),
                    Some(v) => self.print_watches.store(v == "on", Ordering::Relaxed),
                }
                return Ok(());
            }
            "version" => {
                println!("zkrs-cli version: {}", env!("CARGO_PKG_VERSION"));
                return Ok(());
            }
            "connect" => {
                let host = tokens.get(1).cloned().unwrap_or_else(|| self.host.clone());
                return self.connect(&host);
            }
            "export" if from_snapshot_export(tokens) => return export_snapshot(tokens),
            _ => {}
        }
        let client = match &self.client {
            Some(c) if !c.state().is_terminal() => c.clone(),
            _ => {
                println!("Not connected");
                return Ok(());
            }
        };
        let rt = self.rt.clone();
        rt.block_on(self.run(&client, cmd, tokens))
    }

    /// Closes the session (quit), reporting the Closed event as zkCli.sh's watcher does.
    fn close_session(&mut self) {
        if let Some(c) = self.client.take() {
            if !c.state().is_terminal() && self.rt.block_on(c.close()).is_ok() {
                let ev = WatchedEvent {
                    event_type: EventType::None,
                    state: KeeperState::Closed,
                    path: String::new(),
                };
                print_event(&self.print_watches, &ev);
            }
        }
    }

    fn watch_once(&self, w: zk_client::Watch) {
        let print = self.print_watches.clone();
        self.rt.spawn(async move {
            if let Ok(ev) = w.await {
                print_event(&print, &ev);
            }
        });
    }

    async fn run(&self, c: &Client, cmd: &str, tokens: &[String]) -> Result<(), CliError> {
        match cmd {
            "ls" => {
                let mut p = parse(tokens, "swR?", "")?;
                if p.args.len() > 2 {
                    eprintln!("'ls path [watch]' has been deprecated. Please use 'ls [-w] path' instead.");
                    p.opts.insert('w', String::new());
                }
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("ls")))?.clone();
                check_path(&path, false)?;
                if p.has('R') {
                    return self.ls_recursive(c, &path, p.has('w')).await;
                }
                let (mut kids, stat) = match (p.has('w'), p.has('s')) {
                    (true, true) => {
                        let (k, s, w) = c.get_children2_w(&path).await.map_err(|e| failed(e, &path))?;
                        self.watch_once(w);
                        (k, Some(s))
                    }
                    (true, false) => {
                        let (k, w) = c.get_children_w(&path).await.map_err(|e| failed(e, &path))?;
                        self.watch_once(w);
                        (k, None)
                    }
                    (false, true) => {
                        let (k, s) = c.get_children2(&path).await.map_err(|e| failed(e, &path))?;
                        (k, Some(s))
                    }
                    (false, false) => (c.get_children(&path).await.map_err(|e| failed(e, &path))?, None),
                };
                kids.sort();
                println!("[{}]", kids.join(", "));
                if let Some(s) = stat {
                    print_stat(&s);
                }
                Ok(())
            }
            "get" => {
                let mut p = parse(tokens, "sw", "")?;
                if p.args.len() > 2 {
                    eprintln!(
                        "'get path [watch]' has been deprecated. Please use 'get [-s] [-w] path' instead."
                    );
                    p.opts.insert('w', String::new());
                }
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("get")))?.clone();
                check_path(&path, false)?;
                let (data, stat) = if p.has('w') {
                    let (d, s, w) = c.get_data_w(&path).await.map_err(|e| failed(e, &path))?;
                    self.watch_once(w);
                    (d, s)
                } else {
                    c.get_data(&path).await.map_err(|e| failed(e, &path))?
                };
                println!("{}", String::from_utf8_lossy(&data));
                if p.has('s') {
                    print_stat(&stat);
                }
                Ok(())
            }
            "stat" => {
                let mut p = parse(tokens, "w", "")?;
                if p.args.len() > 2 {
                    eprintln!(
                        "'stat path [watch]' has been deprecated. Please use 'stat [-w] path' instead."
                    );
                    p.opts.insert('w', String::new());
                }
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("stat")))?.clone();
                check_path(&path, false)?;
                let stat = if p.has('w') {
                    let (s, w) = c.exists_w(&path).await.map_err(|e| failed(e, &path))?;
                    self.watch_once(w);
                    s
                } else {
                    c.exists(&path).await.map_err(|e| failed(e, &path))?
                };
                print_stat(&stat.ok_or_else(|| failed(Error::NoNode, &path))?);
                Ok(())
            }
            "set" => {
                let p = parse(tokens, "s", "v")?;
                if p.args.len() < 3 {
                    return Err(CliError::Parse(usage_of("set")));
                }
                let path = &p.args[1];
                check_path(path, false)?;
                let version = version_opt(&p)?;
                let st =
                    c.set_data(path, p.args[2].as_bytes(), version).await.map_err(|e| failed(e, path))?;
                if p.has('s') {
                    print_stat(&st);
                }
                Ok(())
            }
            "create" => self.create(c, tokens).await,
            "export" => self.export(c, tokens).await,
            "import" => self.import(c, tokens).await,
            "delete" => {
                let mut p = parse(tokens, "", "v")?;
                if p.args.len() < 2 {
                    return Err(CliError::Parse(usage_of("delete")));
                }
                if p.args.len() > 2 {
                    eprintln!(
                        "'delete path [version]' has been deprecated. Please use 'delete [-v version] path' instead."
                    );
                    let v = p.args[2].clone();
                    p.opts.insert('v', v);
                }
                let path = &p.args[1];
                check_path(path, false)?;
                let version = version_opt(&p)?;
                c.delete(path, version).await.map_err(|e| failed(e, path))
            }
            "deleteall" => {
                let p = parse(tokens, "", "b")?;
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("deleteall")))?;
                let batch = match p.opts.get(&'b') {
                    None => DELETEALL_BATCH,
                    Some(v) => match v.parse::<i32>() {
                        Ok(n) if n > 0 => n as usize,
                        Ok(_) => DELETEALL_BATCH,
                        Err(_) => return Err(CliError::Parse("-b argument must be an int value".into())),
                    },
                };
                check_path(path, false)?;
                if !delete_recursive(c, path, batch).await.map_err(|(e, p)| failed(e, &p))? {
                    eprintln!("Failed to delete some node(s) in the subtree!");
                }
                Ok(())
            }
            "getAcl" => {
                let p = parse(tokens, "s", "")?;
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("getAcl")))?;
                check_path(path, false)?;
                let (acl, stat) = c.get_acl(path).await.map_err(|e| failed(e, path))?;
                for a in &acl {
                    println!(
                        "{},{}\n: {}",
                        csv_string(&a.id.scheme),
                        csv_string(&a.id.id),
                        perm_string(a.perms)
                    );
                }
                if p.has('s') {
                    print_stat(&stat);
                }
                Ok(())
            }
            "setAcl" => {
                let p = parse(tokens, "sR", "v")?;
                if p.args.len() < 3 {
                    return Err(CliError::Parse(usage_of("setAcl")));
                }
                let path = &p.args[1];
                let acl = parse_acl(&p.args[2]);
                let version = version_opt(&p)?;
                check_path(path, false)?;
                if p.has('R') {
                    c.get_data(path).await.map_err(|e| failed(e, path))?;
                    let mut order = vec![path.clone()];
                    dfs(c, path, false, &mut order).await.map_err(|e| failed(e, path))?;
                    for n in order {
                        if let Err(e) = c.set_acl(&n, &acl, version).await {
                            // zkCli.sh prints these without a line break.
                            print!("{}", keeper_exception(e, &n));
                        }
                    }
                    return Ok(());
                }
                let st = c.set_acl(path, &acl, version).await.map_err(|e| failed(e, path))?;
                if p.has('s') {
                    print_stat(&st);
                }
                Ok(())
            }
            "addauth" => {
                let p = parse(tokens, "", "")?;
                if p.args.len() < 2 {
                    return Err(CliError::Parse(usage_of("addauth")));
                }
                let auth = p.args.get(2).map(String::as_bytes).unwrap_or_default();
                // zkCli.sh does not wait for the answer; a refusal shows as an AuthFailed event.
                let _ = c.add_auth(&p.args[1], auth).await;
                Ok(())
            }
            "addWatch" => {
                let p = parse(tokens, "", "m")?;
                if p.args.len() != 2 {
                    return Err(CliError::Parse(usage_of("addWatch")));
                }
                let mode = match p.opts.get(&'m').map(|m| m.to_uppercase()) {
                    None => AddWatchMode::PersistentRecursive,
                    Some(m) if m == "PERSISTENT_RECURSIVE" => AddWatchMode::PersistentRecursive,
                    Some(m) if m == "PERSISTENT" => AddWatchMode::Persistent,
                    Some(_) => return Err(CliError::Parse(usage_of("addWatch"))),
                };
                let path = &p.args[1];
                check_path(path, false)?;
                let mut w = c.add_watch(path, mode).await.map_err(|e| failed(e, path))?;
                let print = self.print_watches.clone();
                self.rt.spawn(async move {
                    while let Some(ev) = w.next().await {
                        if ev.event_type != EventType::None {
                            print_event(&print, &ev);
                        }
                    }
                });
                Ok(())
            }
            "removewatches" => {
                let p = parse(tokens, "cdal", "")?;
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("removewatches")))?;
                let kind = if p.has('c') {
                    WatcherType::Children
                } else if p.has('d') {
                    WatcherType::Data
                } else {
                    WatcherType::Any
                };
                check_path(path, false)?;
                c.remove_watches(path, kind).await.map_err(|e| failed(e, path))
            }
            "sync" => {
                let p = parse(tokens, "", "")?;
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("sync")))?;
                check_path(path, false)?;
                match c.sync(path).await {
                    Ok(_) => println!("Sync is OK"),
                    Err(e) => println!("Sync has failed. rc={}", e.code() as i32),
                }
                Ok(())
            }
            "whoami" => {
                let who = c.who_am_i().await.map_err(|e| failed(e, ""))?;
                println!("Auth scheme: User");
                for i in who {
                    println!("{}: {}", i.auth_scheme, i.user);
                }
                Ok(())
            }
            "getEphemerals" => {
                let p = parse(tokens, "", "")?;
                let prefix = p.args.get(1).map(String::as_str).unwrap_or("/");
                check_path(prefix, false)?;
                let e = c.get_ephemerals(prefix).await.map_err(|e| failed(e, prefix))?;
                println!("[{}]", e.join(", "));
                Ok(())
            }
            "getAllChildrenNumber" => {
                let p = parse(tokens, "", "")?;
                let path = p.args.get(1).ok_or_else(|| CliError::Parse(usage_of("getAllChildrenNumber")))?;
                check_path(path, false)?;
                println!("{}", c.get_all_children_number(path).await.map_err(|e| failed(e, path))?);
                Ok(())
            }
            "config" => {
                let p = parse(tokens, "cws", "")?;
                let (data, stat) = if p.has('w') {
                    let (d, s, w) = c.get_config_w().await.map_err(|e| failed(e, ""))?;
                    self.watch_once(w);
                    (d, s)
                } else {
                    c.get_config().await.map_err(|e| failed(e, ""))?
                };
                let text = String::from_utf8_lossy(&data);
                if p.has('c') {
                    println!("{}", client_config(&text));
                } else {
                    println!("{text}");
                }
                if p.has('s') {
                    print_stat(&stat);
                }
                Ok(())
            }
            "reconfig" => {
                let r = parse_reconfig(tokens)?;
                let (data, stat) = c
                    .reconfig(r.joining.as_deref(), r.leaving.as_deref(), r.members.as_deref(), r.version)
                    .await
                    .map_err(|e| failed(e, ""))?;
                println!("Committed new configuration:\n{}", String::from_utf8_lossy(&data));
                if r.stat {
                    print_stat(&stat);
                }
                Ok(())
            }
            "close" => {
                if c.close().await.is_ok() {
                    print_event(
                        &self.print_watches,
                        &WatchedEvent {
                            event_type: EventType::None,
                            state: KeeperState::Closed,
                            path: String::new(),
                        },
                    );
                }
                Ok(())
            }
            other => Err(CliError::NotFound(other.to_owned())),
        }
    }

    async fn create(&self, c: &Client, tokens: &[String]) -> Result<(), CliError> {
        let p = parse(tokens, "esc", "t")?;
        if p.args.len() < 2 {
            return Err(CliError::Parse(usage_of("create")));
        }
        let (e, s, cont, t) = (p.has('e'), p.has('s'), p.has('c'), p.has('t'));
        if cont && (e || s) {
            return Err(CliError::Parse(
                "-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.".into(),
            ));
        }
        let ttl = match p.opts.get(&'t') {
            None => 0,
            Some(v) => {
                v.parse::<i64>().map_err(|_| CliError::Parse("-t argument must be a long value".into()))?
            }
        };
        if t && e {
            return Err(CliError::Parse("TTLs cannot be used with Ephemeral znodes".into()));
        }
        if t && cont {
            return Err(CliError::Parse("TTLs cannot be used with Container znodes".into()));
        }
        let mode = match (e, s, cont, t) {
            (true, true, _, _) => CreateMode::EphemeralSequential,
            (true, false, _, _) => CreateMode::Ephemeral,
            (false, true, _, true) => CreateMode::PersistentSequentialWithTtl,
            (false, true, _, false) => CreateMode::PersistentSequential,
            (false, false, true, _) => CreateMode::Container,
            (false, false, false, true) => CreateMode::PersistentWithTtl,
            (false, false, false, false) => CreateMode::Persistent,
        };
        if t && !(1..=0xFF_FFFF_FFFF).contains(&ttl) {
            return Err(CliError::Parse(format!(
                "ttl must be positive and cannot be larger than: {}",
                0xFF_FFFF_FFFFi64
            )));
        }
        let path = &p.args[1];
        check_path(path, s)?;
        let data = p.args.get(2).map(String::as_bytes).unwrap_or_default();
        let acl = p.args.get(3).map(|a| parse_acl(a)).unwrap_or_else(acl::open_unsafe);
        let r = if t {
            c.create_ttl(path, data, &acl, mode, Duration::from_millis(ttl as u64)).await.map(|(p, _)| p)
        } else {
            c.create(path, data, &acl, mode).await
        };
        match r {
            Ok(created) => {
                eprintln!("Created {created}");
                Ok(())
            }
            Err(Error::EphemeralOnLocalSession) => {
                eprintln!("Unable to create ephemeral node on a local session");
                Err(failed(Error::EphemeralOnLocalSession, path))
            }
            Err(Error::InvalidAcl) => {
                eprintln!("{}", keeper_exception(Error::InvalidAcl, path));
                Err(failed(Error::InvalidAcl, path))
            }
            Err(err) => Err(failed(err, path)),
        }
    }

    /// `export [--sync] [--auth s:a]... [--kind path=kind]... path [file]`: the subtree as one
    /// JSON document, to `file` (written beside it and renamed when complete) or stdout.
    async fn export(&self, c: &Client, tokens: &[String]) -> Result<(), CliError> {
        let usage = || CliError::Parse(usage_of("export"));
        let mut opts = export::ExportOptions::default();
        let mut args = Vec::new();
        let mut it = tokens.iter().skip(1);
        while let Some(t) = it.next() {
            match t.as_str() {
                "--sync" => opts.sync = true,
                "--auth" => add_auth(c, it.next().ok_or_else(usage)?).await?,
                "--kind" => {
                    let spec = it.next().ok_or_else(usage)?;
                    let (path, kind) = spec
                        .rsplit_once('=')
                        .ok_or_else(|| CliError::Parse(format!("--kind {spec}: expected path=kind")))?;
                    check_path(path, false)?;
                    let kind = transfer::Kind::parse(kind).map_err(CliError::Parse)?;
                    opts.kinds.push((path.to_owned(), kind));
                }
                o if o.starts_with("--") => return Err(CliError::Parse(format!("Unrecognized option: {o}"))),
                _ => args.push(t.clone()),
            }
        }
        let (path, file) = match args.as_slice() {
            [p] => (p, None),
            [p, f] => (p, Some(f.as_str())),
            _ => return Err(usage()),
        };
        check_path(path, false)?;
        let mut out = ExportOut::open(file).map_err(|e| CliError::Failed(format!("export: {e}")))?;
        let written = export::export(c, &self.host, path, out.writer(), &opts).await;
        let sum = out.finish(written).map_err(|e| CliError::Failed(format!("export: {e}")))?;
        eprintln!(
            "export: {} nodes from {path} in {:.1} s ({} ephemerals skipped, {} gone while read)",
            sum.nodes,
            sum.elapsed.as_secs_f64(),
            sum.ephemerals,
            sum.vanished
        );
        Ok(())
    }

    /// `import [--merge [--overwrite]] [--auth s:a]... (file | --from-snapshot s --source p) [path]`.
    async fn import(&self, c: &Client, tokens: &[String]) -> Result<(), CliError> {
        let usage = || CliError::Parse(usage_of("import"));
        let mut opts = import::ImportOptions::default();
        let mut args = Vec::new();
        let (mut snapshot, mut source) = (None, None);
        let mut it = tokens.iter().skip(1);
        while let Some(t) = it.next() {
            match t.as_str() {
                "--merge" => opts.merge = true,
                "--overwrite" => opts.overwrite = true,
                "--auth" => add_auth(c, it.next().ok_or_else(usage)?).await?,
                "--from-snapshot" => snapshot = Some(it.next().ok_or_else(usage)?.clone()),
                "--source" => source = Some(it.next().ok_or_else(usage)?.clone()),
                o if o.starts_with("--") => return Err(CliError::Parse(format!("Unrecognized option: {o}"))),
                _ => args.push(t.clone()),
            }
        }
        if opts.overwrite && !opts.merge {
            return Err(CliError::Parse("--overwrite needs --merge".into()));
        }
        let failed = |e: String| CliError::Failed(format!("import: {e}"));
        let (file, target) = match (&snapshot, &source, args.as_slice()) {
            (None, None, [f]) => (Some(f), None),
            (None, None, [f, p]) => (Some(f), Some(p.as_str())),
            (Some(_), Some(_), []) => (None, None),
            (Some(_), Some(_), [p]) => (None, Some(p.as_str())),
            (Some(_), None, _) => {
                return Err(CliError::Parse(
                    "--from-snapshot needs --source path (the subtree to import)".into(),
                ))
            }
            (None, Some(_), _) => return Err(CliError::Parse("--source goes with --from-snapshot".into())),
            _ => return Err(usage()),
        };
        if let Some(p) = target {
            check_path(p, false)?;
        }
        let sum = match (file, snapshot, source) {
            (Some(f), _, _) => {
                let path = std::path::Path::new(f);
                import::import(c, &|| import::open_file(path), target, &opts).await
            }
            (None, Some(snap), Some(root)) => {
                check_path(&root, false)?;
                let snap = load_snapshot(&snap).map_err(failed)?;
                snap.check_root(&root).map_err(failed)?;
                import::import(c, &|| snap.open_as_file(&root), target, &opts).await
            }
            _ => return Err(usage()),
        }
        .map_err(failed)?;
        eprintln!(
            "import: {} nodes created, {} existing {}, {} counter increments, in {:.1} s",
            sum.created,
            sum.existing,
            if opts.overwrite { "overwritten" } else { "left" },
            sum.bumps,
            sum.elapsed.as_secs_f64()
        );
        if sum.ahead > 0 {
            eprintln!("import: {} parents kept a counter past the source's", sum.ahead);
        }
        Ok(())
    }

    async fn ls_recursive(&self, c: &Client, path: &str, watch: bool) -> Result<(), CliError> {
        if watch {
            let (_, _, w) = c.get_data_w(path).await.map_err(|e| failed(e, path))?;
            self.watch_once(w);
        } else {
            c.get_data(path).await.map_err(|e| failed(e, path))?;
        }
        let mut order = vec![path.to_owned()];
        dfs(c, path, watch, &mut order).await.map_err(|e| failed(e, path))?;
        for p in order {
            println!("{p}");
        }
        Ok(())
    }
}

/// Where an export goes: stdout, or a file written as `file.partial` and renamed once complete,
/// so a failed export leaves no file that looks whole.
enum ExportOut {
    Stdout(std::io::BufWriter<std::io::StdoutLock<'static>>),
    File { file: String, partial: String, out: std::io::BufWriter<std::fs::File> },
}

impl ExportOut {
    /// Stdout (`None`) or `file.partial`, created.
    fn open(file: Option<&str>) -> Result<ExportOut, String> {
        let Some(file) = file else {
            return Ok(ExportOut::Stdout(std::io::BufWriter::with_capacity(
                1 << 20,
                std::io::stdout().lock(),
            )));
        };
        let partial = format!("{file}.partial");
        let f = std::fs::File::create(&partial).map_err(|e| format!("cannot create {partial}: {e}"))?;
        Ok(ExportOut::File {
            file: file.to_owned(),
            partial,
            out: std::io::BufWriter::with_capacity(1 << 20, f),
        })
    }

    fn writer(&mut self) -> &mut dyn std::io::Write {
        match self {
            ExportOut::Stdout(w) => w,
            ExportOut::File { out, .. } => out,
        }
    }

    /// After the export: a file is synced and renamed if `written` is Ok, else removed.
    fn finish<T>(self, written: Result<T, String>) -> Result<T, String> {
        match self {
            ExportOut::Stdout(mut w) => {
                let flushed =
                    std::io::Write::flush(&mut w).map_err(|e| format!("cannot write the export: {e}"));
                written.and_then(|s| flushed.map(|()| s))
            }
            ExportOut::File { file, partial, out } => {
                let synced = out.into_inner().map_err(|e| e.into_error()).and_then(|f| f.sync_all());
                let done = written
                    .and_then(|s| synced.map(|()| s).map_err(|e| format!("cannot write {partial}: {e}")))
                    .and_then(|s| {
                        std::fs::rename(&partial, &file)
                            .map(|()| s)
                            .map_err(|e| format!("cannot rename {partial} to {file}: {e}"))
                    });
                if done.is_err() {
                    let _ = std::fs::remove_file(&partial);
                }
                done
            }
        }
    }
}

/// Whether `tokens` are an `export --from-snapshot`, which reads a file and needs no server.
fn from_snapshot_export(tokens: &[String]) -> bool {
    tokens.first().is_some_and(|t| t == "export") && tokens.iter().any(|t| t == "--from-snapshot")
}

/// Reads a snapshot for `--from-snapshot`, saying on stderr what it is.
fn load_snapshot(file: &str) -> Result<std::sync::Arc<from_snapshot::Snapshot>, String> {
    let snap = from_snapshot::Snapshot::load(std::path::Path::new(file))?;
    eprintln!("snapshot {}", snap.describe());
    Ok(std::sync::Arc::new(snap))
}

/// `export --from-snapshot snapshot path [file]`: the subtree read from a snapshot file (no
/// server asked), with every node's kind and counter as stored.
fn export_snapshot(tokens: &[String]) -> Result<(), CliError> {
    let usage = || CliError::Parse(usage_of("export"));
    let mut snapshot = None;
    let mut args = Vec::new();
    let mut it = tokens.iter().skip(1);
    while let Some(t) = it.next() {
        match t.as_str() {
            "--from-snapshot" => snapshot = Some(it.next().ok_or_else(usage)?.clone()),
            o @ ("--sync" | "--auth" | "--kind") => {
                return Err(CliError::Parse(format!(
                    "{o}: not with --from-snapshot (no server is asked; the snapshot holds every node's kind)"
                )))
            }
            o if o.starts_with("--") => return Err(CliError::Parse(format!("Unrecognized option: {o}"))),
            _ => args.push(t.clone()),
        }
    }
    let (Some(snapshot), [path, rest @ ..]) = (snapshot, args.as_slice()) else { return Err(usage()) };
    let file = match rest {
        [] => None,
        [f] => Some(f.as_str()),
        _ => return Err(usage()),
    };
    check_path(path, false)?;
    let failed = |e: String| CliError::Failed(format!("export: {e}"));
    let snap = load_snapshot(&snapshot).map_err(failed)?;
    // Checked before the output is opened: a missing root leaves no file behind.
    snap.check_root(path).map_err(failed)?;
    let mut out = ExportOut::open(file).map_err(failed)?;
    let written = snap.export(path, out.writer());
    let sum = out.finish(written).map_err(failed)?;
    eprintln!(
        "export: {} nodes from {path} of {} in {:.1} s ({} ephemerals skipped)",
        sum.nodes,
        snap.file(),
        sum.elapsed.as_secs_f64(),
        sum.ephemerals
    );
    Ok(())
}

/// `--auth scheme:auth` of export and import: as `addauth`, but waiting for the answer.
async fn add_auth(c: &Client, spec: &str) -> Result<(), CliError> {
    let (scheme, auth) = spec
        .split_once(':')
        .ok_or_else(|| CliError::Parse(format!("--auth {spec}: expected scheme:auth")))?;
    c.add_auth(scheme, auth.as_bytes())
        .await
        .map_err(|e| CliError::Failed(format!("--auth {scheme}: {}", transfer::code_name(e))))
}

fn version_opt(p: &Parsed) -> Result<i32, CliError> {
    match p.int('v')? {
        None => Ok(-1),
        Some(v) => i32::try_from(v).map_err(|_| CliError::Parse(format!("For input string: \"{v}\""))),
    }
}

fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// zkCli.sh's subtree walk: each node's sorted children are listed, then visited in turn; a node
/// that vanished meanwhile is skipped. Watches requested here are left but not reported.
async fn dfs(c: &Client, root: &str, watch: bool, out: &mut Vec<String>) -> Result<(), Error> {
    // An explicit stack instead of recursion: async recursion needs boxing, and a deep tree
    // should not grow the task's stack.
    let mut stack = vec![root.to_owned()];
    while let Some(node) = stack.pop() {
        let kids =
            if watch { c.get_children_w(&node).await.map(|(k, _)| k) } else { c.get_children(&node).await };
        let mut kids = match kids {
            Ok(k) => k,
            Err(Error::NoNode) => continue,
            Err(e) => return Err(e),
        };
        kids.sort();
        let paths: Vec<String> = kids.iter().map(|k| child_path(&node, k)).collect();
        // Children are printed before any grandchild; the walk then descends in sorted order.
        out.extend(paths.iter().cloned());
        stack.extend(paths.into_iter().rev());
    }
    Ok(())
}

/// Deletes `root` and everything below it in multis of `batch` deletes, deepest first. Ok(false)
/// when a batch failed (the rest is left); Err when the tree could not be listed.
async fn delete_recursive(c: &Client, root: &str, batch: usize) -> Result<bool, (Error, String)> {
    let mut tree = vec![root.to_owned()];
    let mut i = 0;
    while i < tree.len() {
        let node = tree[i].clone();
        let kids = c.get_children(&node).await.map_err(|e| (e, node.clone()))?;
        tree.extend(kids.iter().map(|k| child_path(&node, k)));
        i += 1;
    }
    for chunk in tree.rchunks(batch).map(|c| c.iter().rev()) {
        let ops: Vec<MultiOp> = chunk.map(|p| MultiOp::Delete { path: p.clone(), version: -1 }).collect();
        match c.multi(ops).await {
            Ok(r) if zk_client::multi_error(&r).is_none() => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// `config -c`: the client connection string from a dynamic config (`server.N=...;[host:]port`
/// lines): the version, a space, then the client addresses joined by commas.
fn client_config(text: &str) -> String {
    let mut version = String::new();
    let mut addrs = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("version=") {
            version = v.trim().to_owned();
        } else if line.starts_with("server.") {
            if let Some((_, client)) = line.split_once(';') {
                let client = client.trim();
                let addr = if client.contains(':') { client.to_owned() } else { format!("0.0.0.0:{client}") };
                addrs.push(addr);
            }
        }
    }
    format!("{version} {}", addrs.join(","))
}

/// Completion for the interactive shell: command names first, znode paths after.
struct ZkHelper {
    rt: Arc<Runtime>,
    client: Option<Client>,
}

impl Completer for ZkHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let head = &line[..pos];
        let start = head.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let word = &head[start..];
        if start == 0 {
            let m =
                COMMANDS.iter().filter(|(c, _)| c.starts_with(word)).map(|(c, _)| format!("{c} ")).collect();
            return Ok((0, m));
        }
        let (Some(client), true) = (&self.client, word.starts_with('/')) else {
            return Ok((start, Vec::new()));
        };
        let cut = word.rfind('/').unwrap_or(0);
        let parent = if cut == 0 { "/" } else { &word[..cut] };
        let partial = &word[cut + 1..];
        let kids = self
            .rt
            .block_on(async { tokio::time::timeout(COMPLETION_TIMEOUT, client.get_children(parent)).await })
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let mut m: Vec<String> =
            kids.iter().filter(|k| k.starts_with(partial)).map(|k| child_path(parent, k)).collect();
        m.sort();
        Ok((start, m))
    }
}

impl Hinter for ZkHelper {
    type Hint = String;
}
impl Highlighter for ZkHelper {}
impl Validator for ZkHelper {}
impl Helper for ZkHelper {}

struct Options {
    server: String,
    timeout: Duration,
    read_only: bool,
    client_configuration: Option<std::path::PathBuf>,
    command: Vec<String>,
}

fn parse_argv(argv: Vec<String>) -> Options {
    let mut o = Options {
        server: "localhost:2181".into(),
        timeout: Duration::from_millis(30_000),
        read_only: false,
        client_configuration: None,
        command: Vec::new(),
    };
    let mut it = argv.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-server" => o.server = it.next().unwrap_or(o.server),
            "-timeout" => {
                if let Some(ms) = it.next().and_then(|v| v.parse::<u64>().ok()) {
                    o.timeout = Duration::from_millis(ms);
                }
            }
            "-r" => o.read_only = true,
            // Accepted for zkCli.sh compatibility: this shell always waits for the connection.
            "-waitforconnection" => {}
            "-client-configuration" => o.client_configuration = it.next().map(Into::into),
            _ => {
                o.command.push(a);
                o.command.extend(it.by_ref());
            }
        }
    }
    o
}

fn interactive(shell: &mut Shell) -> i32 {
    println!("Welcome to ZooKeeper!");
    let mut code = 0;
    if !std::io::stdin().is_terminal() {
        // Piped commands: no prompt and no line editing, as zkCli.sh without a terminal.
        let mut line = String::new();
        loop {
            line.clear();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => return code,
                Ok(_) => {}
            }
            match run_line(shell, line.trim_end_matches(['\n', '\r'])) {
                Line::Empty => {}
                Line::Done(c) => code = c,
                Line::Quit => return code,
            }
        }
    }
    let mut ed: Editor<ZkHelper, DefaultHistory> = match Editor::new() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot start line editing: {e}");
            return 1;
        }
    };
    let _ = ed.history_mut().set_max_len(HISTORY_MAX);
    loop {
        ed.set_helper(Some(ZkHelper { rt: shell.rt.clone(), client: shell.client.clone() }));
        let prompt =
            format!("[zk: {}({}) {}] ", shell.host, prompt_state(shell.client.as_ref()), shell.command_count);
        match ed.readline(&prompt) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = ed.add_history_entry(line.as_str());
                }
                match run_line(shell, &line) {
                    Line::Empty => {}
                    Line::Done(c) => code = c,
                    Line::Quit => return code,
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(_) => return code,
        }
    }
}

/// What an interactive line came to.
enum Line {
    /// Blank: not numbered, changes nothing.
    Empty,
    /// A command ran and earned this exit code.
    Done(i32),
    /// `quit`: the session is closed; the shell exits with the previous command's code.
    Quit,
}

/// One interactive line: numbered and kept in the history unless empty.
fn run_line(shell: &mut Shell, line: &str) -> Line {
    let toks = tokenize(line);
    if toks.is_empty() {
        return Line::Empty;
    }
    shell.add_history(line);
    if toks[0] == "quit" {
        shell.close_session();
        return Line::Quit;
    }
    let code = shell.execute(&toks);
    shell.command_count += 1;
    Line::Done(code)
}

fn main() {
    let opts = parse_argv(std::env::args().skip(1).collect());
    // The settings first, while this is the only thread: the Kerberos configuration Java is
    // told of goes to the environment the system's GSSAPI library reads.
    let settings = client_config::load(opts.client_configuration.as_deref()).and_then(|p| {
        if let Some(conf) = client_config::krb5_config(&p) {
            std::env::set_var("KRB5_CONFIG", conf);
        }
        Ok((client_config::tls(&p)?, client_config::sasl(&p)?))
    });
    let (tls, sasl) = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let mut shell = Shell {
        rt: rt.clone(),
        host: opts.server.clone(),
        timeout: opts.timeout,
        read_only: opts.read_only,
        tls,
        sasl,
        client: None,
        print_watches: Arc::new(AtomicBool::new(true)),
        history: VecDeque::new(),
        command_count: 0,
    };
    // An export to stdout is the JSON document alone: the banner and the connection event,
    // which zkCli.sh prints to stdout, go nowhere for export and import.
    let transfer = matches!(opts.command.first().map(String::as_str), Some("export" | "import"));
    if transfer {
        shell.print_watches.store(false, Ordering::Relaxed);
    } else {
        println!("Connecting to {}", opts.server);
    }
    let code = if from_snapshot_export(&opts.command) {
        // A file in, a file out: no session.
        shell.execute(&opts.command)
    } else if opts.command.is_empty() {
        if let Err(e) = shell.connect(&opts.server) {
            eprintln!("{}", e.message());
        }
        interactive(&mut shell)
    } else {
        match shell.connect(&opts.server) {
            Ok(()) => shell.execute(&opts.command),
            Err(e) => {
                eprintln!("{}", e.message());
                e.exit_code()
            }
        }
    };
    if let Some(c) = shell.client.take() {
        let _ = rt.block_on(c.close());
    }
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn reconfig_lines_as_zkcli_reads_them() {
        let r =
            parse_reconfig(&s(&["reconfig", "-s", "-v", "1a", "-add", "SERVER.4=H:1:2;3", "-remove", "2"]))
                .unwrap();
        assert_eq!(
            r,
            ReconfigArgs {
                joining: Some("server.4=h:1:2;3".into()),
                leaving: Some("2".into()),
                members: None,
                version: 0x1a,
                stat: true
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("next.cfg");
        std::fs::write(&f, "# new members\nserver.1=h:1:2;3\nserver.2=h:4:5;6\nclientPort=9\n").unwrap();
        let r = parse_reconfig(&s(&["reconfig", "-file", f.to_str().unwrap()])).unwrap();
        assert_eq!((r.members.as_deref(), r.version), (Some("server.1=h:1:2;3\nserver.2=h:4:5;6"), -1));
        let err = |v: &[&str]| parse_reconfig(&s(v)).unwrap_err().message();
        assert!(err(&["reconfig", "-s"]).starts_with("reconfig [-s]"));
        assert_eq!(
            err(&["reconfig", "-v", "zz", "-remove", "1"]),
            "-v must be followed by a long (configuration version)"
        );
        assert!(err(&["reconfig", "-members", "server.1=h:1:2;3", "-remove", "1"])
            .starts_with("Can't use -file or -members"));
        assert!(err(&["reconfig", "-members", "a", "-file", "b"]).starts_with("Can't use -file and -members"));
        assert_eq!(err(&["reconfig", "-remove"]), "Missing argument for option: remove");
    }

    #[test]
    fn options_anywhere_bundled_and_valued() {
        let p = parse(&s(&["create", "-es", "/a", "d"]), "esc", "t").unwrap();
        assert!(p.has('e') && p.has('s'));
        assert_eq!(p.args, ["create", "/a", "d"]);
        let p = parse(&s(&["deleteall", "/a", "-b", "5"]), "", "b").unwrap();
        assert_eq!((p.args.len(), p.opts[&'b'].as_str()), (2, "5"));
        let p = parse(&s(&["set", "-v", "-1", "/a", "-7"]), "s", "v").unwrap();
        assert_eq!((p.int('v').unwrap(), p.args[2].as_str()), (Some(-1), "-7"));
        assert_eq!(
            parse(&s(&["ls", "-x", "/"]), "swR", "").unwrap_err().message(),
            "Unrecognized option: -x"
        );
        assert_eq!(
            parse(&s(&["set", "/a", "x", "-v"]), "s", "v").unwrap_err().message(),
            "Missing argument for option: v"
        );
    }

    #[test]
    fn tokens_and_quotes() {
        assert_eq!(tokenize("  set /a \"hello world\" 'x y' z "), ["set", "/a", "hello world", "x y", "z"]);
        assert!(tokenize("   ").is_empty());
    }

    #[test]
    fn java_formats() {
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_763_784_815_000), "Sat Nov 22 04:13:35 UTC 2025");
        assert_eq!(java_date(951_782_400_000), "Tue Feb 29 00:00:00 UTC 2000");
        assert_eq!(perm_string(31), "cdrwa");
        assert_eq!(perm_string(zk_proto::perms::READ | zk_proto::perms::ADMIN), "ra");
        assert_eq!(csv_string("a,b%"), "'a%2Cb%25");
        let acl = parse_acl("world:anyone:cdrwa,digest:u:h=:r");
        assert_eq!(acl[1].id.id, "u:h=");
        assert_eq!(acl[1].perms, zk_proto::perms::READ);
    }

    #[test]
    fn error_messages() {
        assert_eq!(failed(Error::NoNode, "/x").message(), "Node does not exist: /x");
        assert_eq!(failed(Error::NoWatcher, "/x").message(), "KeeperErrorCode = No such watcher for /x");
        assert_eq!(check_path("a", false).unwrap_err().message(), "Path must start with / character");
        assert!(check_path("/q/", true).is_ok());
        assert_eq!(
            check_path("/a//b", false).unwrap_err().message(),
            "Invalid path string \"/a//b\" caused by empty node name specified @3"
        );
        assert_eq!(
            client_config("server.1=h:1:2:participant;0.0.0.0:2181\nversion=100000000"),
            "100000000 0.0.0.0:2181"
        );
    }
}
