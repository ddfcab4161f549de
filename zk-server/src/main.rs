//! `zkrs-server [zoo.cfg]`: a drop-in Apache ZooKeeper server.
//!
//! With a path, it reads that zoo.cfg (and myid) exactly as Apache ZooKeeper does. Without one, it
//! serves standalone on 127.0.0.1:2181 with its embedded defaults and `./zkrs-data` as data directory.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: the server allocates and frees many small buffers per
/// request on several threads, and in a create-heavy profile glibc's malloc (with its fastbin
/// consolidation) took about a quarter of the server's CPU.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tracing::{error, info};
use zk_server::config::ServerConfig;
use zk_server::settings::Settings;

const USAGE: &str = "usage: zkrs-server [path/to/zoo.cfg]\n\
       zkrs-server status [path/to/zoo.cfg]   (a running server's mode, zxid, connections; exit 1 if down)\n\
       zkrs-server version\n\
       zkrs-server import APACHE_DATA_DIR APACHE_DATA_LOG_DIR ZKRS_DATA_DIR\n\
       zkrs-server purge DATA_DIR DATA_LOG_DIR [-n COUNT]   (stopped server; keeps COUNT >= 3 snapshots)\n\
       zkrs-server dump-log PATH         (a zkrs-log directory or one segment)\n\
       zkrs-server dump-snapshot PATH    (one zkrs snapshot file)\n\
       zkrs-server backup (--config zoo.cfg | --data-dir D [--data-log-dir L]) --to ARCHIVE\n\
                          [--server HOST:PORT] [--follow] [--interval SECS]\n\
                          (--server: the client port of the server running on D, on this host)\n\
       zkrs-server restore --from ARCHIVE (--config zoo.cfg | --data-dir OUT [--data-log-dir L])\n\
                           [--zxid Z | --time T] [--subtree /path] [--ensemble [--epoch-above N]]\n\
                           (OUT empty or absent; L, when separate, holding no zkrs-log;\n\
                           --ensemble: for every member of an ensemble rolled back as a whole)\n\n\
Starts a ZooKeeper-compatible server. Without a config file it serves standalone on\n\
127.0.0.1:2181 with data in ./zkrs-data. `import` turns an Apache ZooKeeper data directory\n\
(its version-2 snapshots, plain, .gz or .snappy, and logs) into a zkrs snapshot to start from.\n\
`backup` copies a running server's durable log and snapshots into ARCHIVE (a directory,\n\
s3://bucket/prefix with the AWS_* environment variables, gs://bucket/prefix with the GOOGLE_*\n\
ones, or az://container/prefix with the AZURE_* ones) under a manifest; `restore` builds a\n\
data directory from one as of zxid Z, time T (RFC 3339 or epoch ms) or its newest transaction,\n\
whole or one subtree; it never writes over data.\n\
Log verbosity: RUST_LOG, else the zoo.cfg's logLevel (default info); logFormat=json writes one\n\
JSON object a line.";

/// Sets up logging: RUST_LOG, else the zoo.cfg's `logLevel`, else info; the zoo.cfg's `logFormat`
/// (`json`: one JSON object a line). The configuration is read here a first time, before logging
/// exists, only for these two keys; its warnings are logged when it is read again.
fn init_logging(args: &[String]) {
    use zk_server::config::LogFormat;
    let cfg = match args {
        [path] if !path.starts_with('-') && !matches!(path.as_str(), "version" | "status") => {
            ServerConfig::from_file(path).ok()
        }
        _ => None,
    };
    let level = cfg.as_ref().and_then(|c| c.log_level.clone()).unwrap_or_else(|| "info".to_string());
    let mut bad_level = None;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&level))
        .unwrap_or_else(|e| {
            bad_level = Some(format!("logLevel={level}: {e}; logging at info"));
            tracing_subscriber::EnvFilter::new("info")
        });
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if cfg.is_some_and(|c| c.log_format == LogFormat::Json) {
        builder.json().with_current_span(false).init();
    } else {
        use std::io::IsTerminal;
        builder.with_ansi(std::io::stderr().is_terminal()).init();
    }
    if let Some(msg) = bad_level {
        tracing::warn!("{msg}");
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    init_logging(&args);
    if let Some(code) = run_tool(&args) {
        return code;
    }
    let cfg = match args.as_slice() {
        [] => {
            info!("no zoo.cfg given: using the embedded standalone defaults");
            let mut cfg = ServerConfig::standalone_default("zkrs-data");
            // Clients are served on the loopback address only; so is the AdminServer.
            cfg.admin_server_address = "127.0.0.1".to_string();
            cfg
        }
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [flag] if flag == "-V" || flag == "--version" => {
            println!("zkrs-server {}", zk_server::view::version());
            return ExitCode::SUCCESS;
        }
        [path] => match ServerConfig::from_file(path) {
            Ok(c) => c,
            Err(e) => {
                error!("{e}");
                eprintln!("zkrs-server: {e}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(why) = cfg.not_in_peer_list() {
        // Exit status 1, as Apache's member exits then (its start-up fails after the parse; a
        // configuration error is 2).
        error!("{why}");
        eprintln!("zkrs-server: {why}");
        return ExitCode::from(1);
    }
    let settings = match Settings::from_config(&cfg) {
        Ok(s) => s,
        Err(e) => {
            error!("{e}");
            eprintln!("zkrs-server: {e}");
            return ExitCode::from(2);
        }
    };
    // Before anything is created in dataDir (`server::run` asks too, after this directory is
    // made): a restore that did not finish left only its staging directory there, which the
    // restore, run again as the refusal says, must find alone.
    if let Some(e) = zk_server::server::unfinished_restore(&settings.snap_root) {
        error!("{e}");
        eprintln!("zkrs-server: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = std::fs::create_dir_all(&settings.data_dir) {
        let msg = format!("dataDir {}: {e}", settings.data_dir.display());
        error!("{msg}");
        eprintln!("zkrs-server: {msg}");
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zkrs-server: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let ensemble = cfg.is_distributed().then(|| cfg.clone());
    let result = rt.block_on(zk_server::server::run(settings, ensemble, shutdown_signal()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Every error here stops start-up, like a configuration error.
            error!("{e}");
            eprintln!("zkrs-server: {e}");
            ExitCode::from(2)
        }
    }
}

/// The offline subcommands; `None` when `args` asks for the server.
fn run_tool(args: &[String]) -> Option<ExitCode> {
    use std::path::Path;
    match args {
        [cmd] if cmd == "version" => {
            println!("zkrs-server {}", zk_server::view::version());
            return Some(ExitCode::SUCCESS);
        }
        [cmd, rest @ ..] if cmd == "status" && rest.len() <= 1 => return Some(status(rest.first())),
        _ => {}
    }
    let mut out = std::io::stdout().lock();
    let result = match args {
        [cmd, apache_data, apache_log, dest] if cmd == "import" => {
            let mut progress = std::io::stderr();
            zk_server::tools::import_apache(
                Path::new(apache_data),
                Path::new(apache_log),
                Path::new(dest),
                zk_tree::TreeConfig::default(),
                &mut progress,
            )
            .map(|r| {
                println!(
                    "imported {} znodes and {} sessions at zxid 0x{:x} into {}",
                    r.nodes,
                    r.sessions,
                    r.last_zxid,
                    Path::new(dest).display()
                );
            })
        }
        [cmd, data, log, rest @ ..] if cmd == "purge" => {
            let keep = match rest {
                [] => zk_server::tools::PURGE_KEEP_MIN,
                [flag, n] if flag == "-n" => match n.parse() {
                    Ok(n) => n,
                    Err(_) => {
                        eprintln!("zkrs-server purge: -n takes a number, got {n}");
                        return Some(ExitCode::from(2));
                    }
                },
                _ => {
                    eprintln!("{USAGE}");
                    return Some(ExitCode::from(2));
                }
            };
            zk_server::tools::purge(Path::new(data), Path::new(log), keep).map(|r| {
                for name in r.snapshots_removed.iter().chain(&r.segments_removed) {
                    println!("removed {name}");
                }
                println!("kept {} snapshot(s): {}", r.snapshots_kept.len(), r.snapshots_kept.join(", "));
                if let Some(why) = &r.kept_for_archive {
                    println!("{why}");
                }
            })
        }
        [cmd, path] if cmd == "dump-log" => zk_server::tools::dump_log(Path::new(path), &mut out).map(|_| ()),
        [cmd, path] if cmd == "dump-snapshot" => {
            zk_server::tools::dump_snapshot(Path::new(path), &mut out).map(|_| ())
        }
        [cmd, rest @ ..] if cmd == "backup" => return Some(backup(rest)),
        [cmd, rest @ ..] if cmd == "restore" => return Some(restore(rest)),
        [cmd, ..] if cmd == "import" || cmd == "purge" || cmd == "dump-log" || cmd == "dump-snapshot" => {
            eprintln!("{USAGE}");
            return Some(ExitCode::from(2));
        }
        _ => return None,
    };
    Some(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zkrs-server {}: {e}", args[0]);
            ExitCode::from(1)
        }
    })
}

/// `--name value` options and bare `--flag`s, each allowed at most once; `None` (after printing
/// why) for anything else.
fn options<'a>(
    cmd: &str,
    args: &'a [String],
    valued: &[&str],
    flags: &[&str],
) -> Option<std::collections::HashMap<&'a str, Option<&'a str>>> {
    let mut got = std::collections::HashMap::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.as_str();
        let value = if valued.contains(&a) {
            match it.next() {
                Some(v) => Some(v.as_str()),
                None => {
                    eprintln!("zkrs-server {cmd}: {a} needs a value\n{USAGE}");
                    return None;
                }
            }
        } else if flags.contains(&a) {
            None
        } else {
            eprintln!("zkrs-server {cmd}: unknown argument `{a}`\n{USAGE}");
            return None;
        };
        if got.insert(a, value).is_some() {
            eprintln!("zkrs-server {cmd}: {a} given twice");
            return None;
        }
    }
    Some(got)
}

/// The server's dataDir and dataLogDir for `backup` and `restore`: from `--config` (a zoo.cfg),
/// or `--data-dir` and `--data-log-dir` (which defaults to the first), not both ways; the second
/// is None when neither `--config` nor `--data-log-dir` named it. An error is printed.
fn server_dirs(
    cmd: &str,
    o: &std::collections::HashMap<&str, Option<&str>>,
) -> Option<(std::path::PathBuf, Option<std::path::PathBuf>)> {
    let given = |k: &str| o.get(k).copied().flatten();
    let (cfg, data, log) = (given("--config"), given("--data-dir"), given("--data-log-dir"));
    if cfg.is_some() && (data.is_some() || log.is_some()) {
        eprintln!("zkrs-server {cmd}: give --config or --data-dir (with --data-log-dir), not both");
        return None;
    }
    match (cfg, data) {
        (Some(cfg), _) => match ServerConfig::from_file(cfg) {
            Ok(c) => Some((c.data_dir, Some(c.data_log_dir))),
            Err(e) => {
                eprintln!("zkrs-server {cmd}: --config {cfg}: {e}");
                None
            }
        },
        (None, Some(d)) => Some((d.into(), log.map(Into::into))),
        (None, None) => {
            eprintln!("zkrs-server {cmd}: --data-dir (or --config) is required\n{USAGE}");
            None
        }
    }
}

/// `backup`: archives a server's closed files, once or with `--follow` until stopped.
fn backup(args: &[String]) -> ExitCode {
    let Some(o) = options(
        "backup",
        args,
        &["--config", "--data-dir", "--data-log-dir", "--to", "--interval", "--server"],
        &["--follow"],
    ) else {
        return ExitCode::from(2);
    };
    let Some(Some(to)) = o.get("--to") else {
        eprintln!("zkrs-server backup: --to is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let Some((data, log)) = server_dirs("backup", &o) else {
        return ExitCode::from(2);
    };
    let log = log.unwrap_or_else(|| data.clone());
    let interval = match o.get("--interval").copied().flatten().map(str::parse::<f64>) {
        None => std::time::Duration::from_secs(10),
        Some(Ok(s)) if s > 0.0 && s <= 86_400.0 => std::time::Duration::from_secs_f64(s),
        Some(_) => {
            eprintln!("zkrs-server backup: --interval takes seconds, more than 0 and at most 86400");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let follow = o.contains_key("--follow");
    let server = o.get("--server").copied().flatten();
    match zk_server::backup::archiver::run(to, &data, &log, server, follow, interval, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zkrs-server backup: {e}");
            ExitCode::from(1)
        }
    }
}

/// A zxid as given on the command line: `0x` hex or decimal.
fn parse_zxid(s: &str) -> Option<i64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok().and_then(|v| i64::try_from(v).ok()),
        None => s.parse().ok(),
    }
    .filter(|z| *z >= 0)
}

/// `restore`: builds a data directory from an archive.
fn restore(args: &[String]) -> ExitCode {
    use zk_server::backup::restore::Point;
    if args.iter().any(|a| a == "--force") {
        eprintln!(
            "zkrs-server restore: --force is no longer taken: a restore writes only into an empty (or absent) \
             data directory, never over data; restore into a new directory and point dataDir (and dataLogDir) \
             at it (and dataLogDir at an empty directory: an old zkrs-log would be replayed over the restored \
             tree), or move the old zkrs-snap and zkrs-log away yourself, with the server stopped"
        );
        return ExitCode::from(2);
    }
    let Some(o) = options(
        "restore",
        args,
        &[
            "--from",
            "--config",
            "--data-dir",
            "--data-log-dir",
            "--zxid",
            "--time",
            "--subtree",
            "--epoch-above",
        ],
        &["--ensemble"],
    ) else {
        return ExitCode::from(2);
    };
    let Some(Some(from)) = o.get("--from") else {
        eprintln!("zkrs-server restore: --from is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let Some((out_dir, log_dir)) = server_dirs("restore", &o) else {
        return ExitCode::from(2);
    };
    let point = match (o.get("--zxid").copied().flatten(), o.get("--time").copied().flatten()) {
        (Some(_), Some(_)) => {
            eprintln!("zkrs-server restore: give --zxid or --time, not both");
            return ExitCode::from(2);
        }
        (Some(z), None) => match parse_zxid(z) {
            Some(z) => Point::Zxid(z),
            None => {
                eprintln!("zkrs-server restore: --zxid {z}: not a zxid (decimal, or hex with 0x)");
                return ExitCode::from(2);
            }
        },
        (None, Some(t)) => match zk_server::backup::time::parse_time_ms(t) {
            Ok(ms) => Point::Time(ms),
            Err(e) => {
                eprintln!("zkrs-server restore: --time {e}");
                return ExitCode::from(2);
            }
        },
        (None, None) => Point::Newest,
    };
    let subtree = o.get("--subtree").copied().flatten();
    let ensemble = match (o.contains_key("--ensemble"), o.get("--epoch-above").copied().flatten()) {
        (false, None) => None,
        (false, Some(_)) => {
            eprintln!("zkrs-server restore: --epoch-above goes with --ensemble");
            return ExitCode::from(2);
        }
        (true, None) => Some(0),
        (true, Some(n)) => match n.parse::<u32>() {
            Ok(n) => Some(n),
            Err(_) => {
                eprintln!("zkrs-server restore: --epoch-above {n}: not an epoch (a whole number)");
                return ExitCode::from(2);
            }
        },
    };
    // A zoo.cfg of an ensemble member restored without --ensemble: most likely a rollback of the
    // ensemble missing the flag (restore review, helper-97).
    let member = o
        .get("--config")
        .copied()
        .flatten()
        .and_then(|c| ServerConfig::from_file(c).ok())
        .is_some_and(|c| c.is_distributed());
    if member && ensemble.is_none() {
        eprintln!(
            "zkrs-server restore: NOTE: this zoo.cfg is an ensemble member's; to roll the ensemble back, \
             restore every member with --ensemble (a member restored without it can lose the election to an \
             old member on its old data); to rebuild one member, give it an empty data directory instead"
        );
    }
    let mut progress = std::io::stderr();
    let result = zk_server::backup::target::open(from).and_then(|t| {
        zk_server::backup::restore::restore_with(
            t.as_ref(),
            &out_dir,
            log_dir.as_deref(),
            point,
            subtree,
            ensemble,
            &mut progress,
        )
    });
    match result {
        Ok(r) => {
            println!("restored {} znodes at zxid 0x{:x} into {}", r.nodes, r.zxid, out_dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("zkrs-server restore: {e}");
            ExitCode::from(1)
        }
    }
}

/// `status [zoo.cfg]`: as zkServer.sh's `status`, asks the server the configuration names (the
/// embedded defaults without one) and prints its mode; exit 1 when it does not answer.
fn status(path: Option<&String>) -> ExitCode {
    let cfg = match path {
        None => ServerConfig::standalone_default("zkrs-data"),
        Some(p) => match ServerConfig::from_file(p) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("zkrs-server status: {e}");
                return ExitCode::from(2);
            }
        },
    };
    // Written with errors ignored: `zkrs-server status | grep -q ...` closes the pipe early,
    // and the exit status still tells.
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Some(p) = path {
        let _ = writeln!(out, "Using config: {p}");
    }
    let addr = match zk_server::status::client_addr(&cfg) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let _ = writeln!(
        out,
        "Client port found: {}. Client address: {}. Client SSL: false.",
        addr.port(),
        addr.ip()
    );
    match zk_server::status::query(addr) {
        Ok(s) => {
            let _ = writeln!(out, "Mode: {}\nZxid: {}\nConnections: {}", s.mode, s.zxid, s.connections);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => info!("SIGINT received"),
            _ = term.recv() => info!("SIGTERM received"),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
