//! The configuration reference: every zoo.cfg key zkrs reads, with its default, what it means and
//! what it refuses, grouped as the user guide shows them.
//!
//! The guide's reference tables (`docs/guide/src/configuration.md`, between its "generated"
//! markers) are rendered from [`SECTIONS`] by [`markdown`], and the tests hold both ends: the
//! guide must match the rendering (`ZKRS_BLESS=1 cargo test -p zk-server --lib
//! config_reference` rewrites it), and every key the parsers (`config.rs`, `ssl_config.rs`,
//! `sasl_config.rs`) take must be documented here, found by reading their match arms. A key
//! added to a parser without a row here fails the tests.
//!
//! Cells are Markdown. In a `key` cell, the names are in backticks; a name starting with `.`
//! shares the first name's prefix (`ssl.trustStore.type`, `.password`), a final `.*` stands for
//! any suffix and a final `.N` or `.G` for a number.

/// A group of keys, one table of the guide.
#[derive(Debug)]
pub struct Section {
    /// The table's heading.
    pub title: &'static str,
    /// What comes between the heading and the table (may be empty).
    pub intro: &'static str,
    /// The keys.
    pub rows: &'static [Row],
}

/// One row: a key (or a family of keys read alike).
#[derive(Debug)]
pub struct Row {
    /// The key or keys, in backticks.
    pub key: &'static str,
    /// The default when the key is absent.
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
    /// The values that stop start-up (with the key and line named), or `—`.
    pub refused: &'static str,
}

/// The guide's tables, as Markdown: each section's heading, introduction and table, one blank
/// line between sections.
pub fn markdown() -> String {
    let mut out = String::new();
    for (i, s) in SECTIONS.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("### {}\n\n", s.title));
        if !s.intro.is_empty() {
            out.push_str(s.intro);
            out.push_str("\n\n");
        }
        out.push_str("| key | default | meaning | refused |\n|---|---|---|---|\n");
        for r in s.rows {
            out.push_str(&format!("| {} | {} | {} | {} |\n", r.key, r.default, r.meaning, r.refused));
        }
    }
    out
}

/// The key names (or patterns) a `key` cell documents.
fn names(cell: &str) -> Vec<String> {
    let ticked: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
    let base = ticked.first().and_then(|f| f.rfind('.').map(|i| &f[..=i])).unwrap_or("");
    ticked
        .iter()
        .map(|t| if let Some(rest) = t.strip_prefix('.') { format!("{base}{rest}") } else { t.to_string() })
        .collect()
}

/// Whether `key` is documented by some row (exactly, or by a `.*`, `.N` or `.G` pattern).
pub fn documents(key: &str) -> bool {
    SECTIONS.iter().flat_map(|s| s.rows).flat_map(|r| names(r.key)).any(|p| {
        if let Some(prefix) = p.strip_suffix('*') {
            key.starts_with(prefix) && key.len() > prefix.len()
        } else if let Some(prefix) = p.strip_suffix(".N").or_else(|| p.strip_suffix(".G")) {
            key.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        } else {
            p == key
        }
    })
}

/// The reference, section by section, in the guide's order.
pub const SECTIONS: &[Section] = &[
    Section {
        title: r#"Directories and ports"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`dataDir`"#,
                default: r#"none (required)"#,
                meaning: r#"Snapshots, `myid`, and the log unless `dataLogDir` is set."#,
                refused: r#"missing or empty"#,
            },
            Row {
                key: r#"`dataLogDir`"#,
                default: r#"`dataDir`"#,
                meaning: r#"The transaction log's directory. Put it on its own disk for the steadiest write latency."#,
                refused: r#"empty"#,
            },
            Row {
                key: r#"`clientPort`"#,
                default: r#"none"#,
                meaning: r#"Port clients connect to. A standalone server needs it or `secureClientPort`; a member may take it from its `server.N` line instead."#,
                refused: r#"not an integer; out of range; in an ensemble, a value that disagrees with this server's `server.N` client address"#,
            },
            Row {
                key: r#"`clientPortAddress`"#,
                default: r#"`0.0.0.0`"#,
                meaning: r#"Address the client port listens on."#,
                refused: r#"set without `clientPort`"#,
            },
            Row {
                key: r#"`secureClientPort`"#,
                default: r#"none"#,
                meaning: r#"Port for TLS clients ([Security](security.md#tls-for-clients))."#,
                refused: r#"not an integer; out of range"#,
            },
            Row {
                key: r#"`secureClientPortAddress`"#,
                default: r#"`0.0.0.0`"#,
                meaning: r#"Address of the TLS client port."#,
                refused: r#"set without `secureClientPort`"#,
            },
            Row {
                key: r#"`clientPortListenBacklog`"#,
                default: r#"-1 (the most the system allows: `net.core.somaxconn`)"#,
                meaning: r#"Listen backlog of the client ports: connections the kernel completes before the server accepts them. Past it, a client's connection attempt is dropped and retried a second or more later, which slows the reconnections after an election."#,
                refused: r#"not an integer"#,
            },
        ],
    },
    Section {
        title: r#"Time and sessions"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`tickTime`"#,
                default: r#"3000 ms (2000 without a zoo.cfg)"#,
                meaning: r#"The basic time unit, ms: session timeouts and the ensemble limits are in ticks."#,
                refused: r#"0 or negative; not an integer"#,
            },
            Row {
                key: r#"`minSessionTimeout`"#,
                default: r#"2 ticks"#,
                meaning: r#"Shortest session timeout granted, ms."#,
                refused: r#"negative (other than -1, "default"); larger than `maxSessionTimeout`"#,
            },
            Row {
                key: r#"`maxSessionTimeout`"#,
                default: r#"20 ticks"#,
                meaning: r#"Longest session timeout granted, ms."#,
                refused: r#"negative (other than -1)"#,
            },
            Row {
                key: r#"`localSessionsEnabled`"#,
                default: r#"false"#,
                meaning: r#"Accepted for compatibility. zkrs makes every session global, except those of a server in read-only mode, which are local to it; `true` is logged as a warning saying so."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`localSessionsUpgradingEnabled`"#,
                default: r#"false"#,
                meaning: r#"Accepted; see above."#,
                refused: r#"not a boolean"#,
            },
        ],
    },
    Section {
        title: r#"Ensemble"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`server.N`"#,
                default: r#"none"#,
                meaning: r#"A member: `host:quorumPort:electionPort[:participant\|observer][;[clientHost:]clientPort]`. N is the member's id (0 to 255, or 254 with `extendedTypesEnabled`)."#,
                refused: r#"a malformed value; equal quorum and election ports; several addresses joined with `\|` (multiAddress); an id out of range; in zoo.cfg when `dynamicConfigFile` is set; observers without participants"#,
            },
            Row {
                key: r#"`group.G`"#,
                default: r#"none"#,
                meaning: r#"Hierarchical quorums: `sid:sid:...`, the members of group G."#,
                refused: r#"a server in two groups; a participant in no group (once any `group` line exists)"#,
            },
            Row {
                key: r#"`weight.N`"#,
                default: r#"1 in a group"#,
                meaning: r#"Weight of member N in hierarchical quorums."#,
                refused: r#"not a non-negative number"#,
            },
            Row {
                key: r#"`initLimit`"#,
                default: r#"none (required in an ensemble)"#,
                meaning: r#"Ticks a follower may take to connect to the leader and sync."#,
                refused: r#"missing in an ensemble; negative"#,
            },
            Row {
                key: r#"`syncLimit`"#,
                default: r#"none (required in an ensemble)"#,
                meaning: r#"Ticks a follower may lag the leader before it is dropped."#,
                refused: r#"missing in an ensemble; negative"#,
            },
            Row {
                key: r#"`connectToLearnerMasterLimit`"#,
                default: r#"`initLimit`"#,
                meaning: r#"Ticks a follower may take to connect to the leader after an election."#,
                refused: r#"negative"#,
            },
            Row {
                key: r#"`electionAlg`"#,
                default: r#"3"#,
                meaning: r#"The election algorithm; 3 (fast leader election) is the only one."#,
                refused: r#"anything but 3"#,
            },
            Row {
                key: r#"`cnxTimeout`"#,
                default: r#"5000 ms"#,
                meaning: r#"Time allowed to open a connection to a peer's election port and exchange the handshake."#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`quorumListenOnAllIPs`"#,
                default: r#"false"#,
                meaning: r#"Listen on every address for the quorum and election ports, not only on the `server.N` line's."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`peerType`"#,
                default: r#"`participant`"#,
                meaning: r#"This server's role; its own `server.N` line wins (with a warning when they differ)."#,
                refused: r#"anything but `participant` or `observer`"#,
            },
            Row {
                key: r#"`standaloneEnabled`"#,
                default: r#"true"#,
                meaning: r#"With `false`, a server listed alone still runs as an ensemble member (needed to grow it by reconfiguration)."#,
                refused: r#"not a boolean; `false` without a participant"#,
            },
            Row {
                key: r#"`reconfigEnabled`"#,
                default: r#"false"#,
                meaning: r#"Allow dynamic reconfiguration (`reconfig`)."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`dynamicConfigFile`"#,
                default: r#"none"#,
                meaning: r#"File holding the member list ([above](#how-the-file-is-read))."#,
                refused: r#"unreadable; holding keys other than `server`, `group`, `weight`; holding `version`"#,
            },
            Row {
                key: r#"`leaderServes`"#,
                default: r#"`yes`"#,
                meaning: r#"With `no`, the leader takes no client connections. Only the exact value `no` turns it off; other values are taken as `yes` with a warning."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`syncEnabled`"#,
                default: r#"true"#,
                meaning: r#"Observers log and snapshot like followers."#,
                refused: r#"`false`: zkrs observers always do"#,
            },
            Row {
                key: r#"`observerMasterPort`"#,
                default: r#"none"#,
                meaning: r#"In Apache, a port on which followers serve observers' syncs. zkrs observers sync from the leader."#,
                refused: r#"any value"#,
            },
            Row {
                key: r#"`readonlymode.enabled`"#,
                default: r#"false"#,
                meaning: r#"A member cut off from its quorum serves read-only clients (enables `isro`). Apache 3.8 reads this only as a JVM property."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`digest.enabled`"#,
                default: r#"true"#,
                meaning: r#"Leaders stamp proposals with Apache's tree digest and members check it (`zk_digest_mismatches_count`). *JVM property in Apache.*"#,
                refused: r#"not a boolean"#,
            },
        ],
    },
    Section {
        title: r#"Snapshots and the transaction log"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`snapCount`"#,
                default: r#"100000"#,
                meaning: r#"Transactions between snapshots (each server picks a random point in the upper half, as Apache does). Values under 2 are raised to 2. *JVM property in Apache.*"#,
                refused: r#"not a number"#,
            },
            Row {
                key: r#"`snapSizeLimitInKb`"#,
                default: r#"4194304 (4 GiB)"#,
                meaning: r#"Also snapshot once about this much log was written; 0 or negative turns this trigger off. *JVM property in Apache.*"#,
                refused: r#"not a number"#,
            },
            Row {
                key: r#"`snapshot.writeMBPerSecond`"#,
                default: r#"10"#,
                meaning: r#"*zkrs.* Pace of snapshot writing, MB/s, raised to twice the log's rate when the log grows faster (measured again every 2 s while a snapshot is written), so that snapshots leave the disk to the log; 0 = no limit."#,
                refused: r#"not a number; negative"#,
            },
            Row {
                key: r#"`snapshot.idleSeconds`"#,
                default: r#"5"#,
                meaning: r#"*zkrs.* After this many seconds without writes, take a snapshot at full speed if the log since the last one holds at least a tenth of `snapCount` transactions, so that a restart after a burst replays nothing; 0 = off."#,
                refused: r#"not a number; negative"#,
            },
            Row {
                key: r#"`snapshot.minRequestIntervalSeconds`"#,
                default: r#"60"#,
                meaning: r#"*zkrs.* An operator's request for a snapshot (`csnp`, AdminServer `create_snapshot` and `snapshot`) starts none within this many seconds of the last snapshot's start; `csnp` then answers the refusal, `snapshot` serves the copy from the snapshots already on disk. 0 = no minimum."#,
                refused: r#"not a number; negative"#,
            },
            Row {
                key: r#"`snapshot.compression`"#,
                default: r#"`none`"#,
                meaning: r#"*zkrs.* `zstd` writes snapshot files with each 1 MiB chunk compressed on its own (format 2, [log format](../../log-format.md#snapshot-files)); every snapshot on disk is read whatever its format. A zkrs from before this key refuses a compressed snapshot: to go back to one, set `none` and have a snapshot taken first ([Operations](operations.md#compressed-snapshots)). SNAP to followers is unchanged."#,
                refused: r#"anything else"#,
            },
            Row {
                key: r#"`snapshot.compressionLevel`"#,
                default: r#"1"#,
                meaning: r#"*zkrs.* zstd's level for compressed snapshots (only with `snapshot.compression=zstd`; set without it, a warning). Snapshots are compressed on the snapshot thread while the server serves, and a follower compresses a received SNAP before it answers the leader: level 1 is the cheapest in CPU, and higher levels save little more on a tree's content. Capped at 6 (about 70 MB/s on one core, against 260 MB/s at level 1): above it zstd slows to 55 MB/s at 9 and 4 MB/s at 19, too slow to keep `snapshot.writeMBPerSecond`'s 10 MB/s floor on a loaded core and for a follower to store a large tree within `initLimit`."#,
                refused: r#"not an integer; outside 1 to 6"#,
            },
            Row {
                key: r#"`txnLog.appendMode`"#,
                default: r#"`pwrite`"#,
                meaning: r#"*zkrs.* How log appends reach the segment files: `pwrite`, or `mmap` (through the file's mapping). Same format, syncs and recovery either way ([log format](../../log-format.md#append-modes))."#,
                refused: r#"anything else"#,
            },
            Row {
                key: r#"`preAllocSize`"#,
                default: r#"65536 KiB"#,
                meaning: r#"Log segment preallocation step. *JVM property in Apache.*"#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`autopurge.snapRetainCount`"#,
                default: r#"3"#,
                meaning: r#"Snapshots kept; older ones and the log they cover are removed after each snapshot. Values under 3 are raised to 3."#,
                refused: r#"not an integer"#,
            },
            Row {
                key: r#"`autopurge.purgeInterval`"#,
                default: r#"0 (off)"#,
                meaning: r#"Hours between purges on a timer too; 0 or negative = none."#,
                refused: r#"not an integer"#,
            },
            Row {
                key: r#"`commitLogCount`"#,
                default: r#"500"#,
                meaning: r#"Committed proposals a leader keeps in memory to sync followers by DIFF. Values under 500 are raised to 500."#,
                refused: r#"not an integer"#,
            },
        ],
    },
    Section {
        title: r#"Continuous backup (zkrs)"#,
        intro: r#"The server archives its own log and snapshots, as `zkrs-server backup --follow` does, and its purge waits for the archive ([Operations](operations.md#the-server-archiving-by-itself))."#,
        rows: &[
            Row {
                key: r#"`zkrs.backup.to`"#,
                default: r#"unset (off)"#,
                meaning: r#"*zkrs.* The archive: a directory, or `s3://bucket/prefix` (the AWS environment variables configure S3). `{myid}` is replaced by the server's id; in an ensemble it is required, since each member archives its own log into its own archive. A relative directory is taken as `dataDir` is. Another writer of the archive (a `zkrs-server backup`, another server) stops the start, named."#,
                refused: r#"empty; a control character; no `{myid}` in an ensemble; a URL scheme other than `s3://`; `s3://` without a bucket"#,
            },
            Row {
                key: r#"`zkrs.backup.intervalSecs`"#,
                default: r#"10"#,
                meaning: r#"*zkrs.* Seconds between the starts of two archiver passes (fractions allowed)."#,
                refused: r#"not a number; less than 0.1; more than 86400"#,
            },
            Row {
                key: r#"`zkrs.backup.holdMaxBytes`"#,
                default: r#"10g"#,
                meaning: r#"*zkrs.* The most bytes of snapshots and log segments the purge keeps for an archive that has not taken them; past it, or when the file system holding the snapshots or the log has less free than a twentieth of its size (at most 4 GiB), they are removed anyway (logged at error, counted in `zk_backup_purges_forced`), and the archive has a gap. `k`, `m`, `g` suffixes allowed; 0 = no bound in bytes."#,
                refused: r#"not a whole number with an optional suffix"#,
            },
        ],
    },
    Section {
        title: r#"Clients, limits and the memory brake"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`maxClientCnxns`"#,
                default: r#"60"#,
                meaning: r#"Connections per client IP address; 0 or negative = no limit."#,
                refused: r#"not an integer"#,
            },
            Row {
                key: r#"`maxCnxns`"#,
                default: r#"0 (no limit)"#,
                meaning: r#"Client connections in all (both client ports). Negative is taken as 0 with a warning."#,
                refused: r#"not an integer"#,
            },
            Row {
                key: r#"`globalOutstandingLimit`"#,
                default: r#"1000"#,
                meaning: r#"Requests in flight across all connections."#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`jute.maxbuffer`"#,
                default: r#"1048575 (0xfffff)"#,
                meaning: r#"Largest request frame, bytes. *JVM property in Apache.*"#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`nio.sessionlessCnxnTimeout`"#,
                default: r#"10000 ms"#,
                meaning: r#"Time from accepting a connection to a complete handshake (or four-letter word). *JVM property in Apache.*"#,
                refused: r#"not an integer; 0 or negative"#,
            },
            Row {
                key: r#"`zkrs.treeMemorySoftLimitBytes`"#,
                default: r#"0 (off)"#,
                meaning: r#"*zkrs.* The memory brake: once the tree's accounted memory is over this many bytes (`k`, `m`, `g` suffixes allowed), creates and growing writes are answered SYSTEMERROR; reads, deletes and shrinking writes go on ([Operations](operations.md#the-memory-brake))."#,
                refused: r#"not a whole number with an optional suffix"#,
            },
            Row {
                key: r#"`zkrs.keepClientsThroughElection`"#,
                default: r#"true"#,
                meaning: r#"*zkrs.* A leader or follower that loses its leader keeps the client connections with nothing in flight, holding their requests until it serves again (at most a third of each session's timeout after it last heard from its leader), and holds new connections' handshakes meanwhile; `false` closes them all, as Apache does ([Ensembles](ensembles.md#when-the-leader-goes))."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`extendedTypesEnabled`"#,
                default: r#"false"#,
                meaning: r#"Allow TTL nodes (narrows server ids to 0-254). *JVM property in Apache.*"#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`znode.container.checkIntervalMs`"#,
                default: r#"60000"#,
                meaning: r#"How often empty containers and expired TTL nodes are looked for, ms. *JVM property in Apache.*"#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`znode.container.maxPerMinute`"#,
                default: r#"10000"#,
                meaning: r#"Most containers and TTL nodes deleted a minute. *JVM property in Apache.*"#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`znode.container.maxNeverUsedIntervalMs`"#,
                default: r#"0 (kept)"#,
                meaning: r#"Delete containers that never had a child after this many ms; 0 = keep them. *JVM property in Apache.*"#,
                refused: r#"not a number; negative"#,
            },
        ],
    },
    Section {
        title: r#"Monitoring: four-letter words, AdminServer, metrics"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`4lw.commands.whitelist`"#,
                default: r#"`srvr`"#,
                meaning: r#"Comma-separated four-letter words to answer, or `*` for all but `rcvr` (forced recovery: only when named, see [Operations](operations.md#recovering-from-a-lost-quorum)). `srvr` is always enabled, `isro` too in read-only mode; unknown names are dropped with a warning. *JVM property in Apache.*"#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`admin.enableServer`"#,
                default: r#"true"#,
                meaning: r#"Run the AdminServer. Only the exact value `false` turns it off (as in Apache); other values are taken as true with a warning."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`admin.serverAddress`"#,
                default: r#"`0.0.0.0` (`127.0.0.1` without a zoo.cfg)"#,
                meaning: r#"Address the AdminServer listens on."#,
                refused: r#"a host name that does not resolve"#,
            },
            Row {
                key: r#"`admin.serverPort`"#,
                default: r#"8080"#,
                meaning: r#"AdminServer port. A port that cannot be bound is logged and the server runs without its AdminServer, as Apache does."#,
                refused: r#"not a number; out of range"#,
            },
            Row {
                key: r#"`admin.commandURL`"#,
                default: r#"`/commands`"#,
                meaning: r#"Path the commands are served under."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`admin.idleTimeout`"#,
                default: r#"30000 ms"#,
                meaning: r#"Time allowed to send a request (and, over HTTPS, to finish the TLS handshake)."#,
                refused: r#"not a number; 0 or negative"#,
            },
            Row {
                key: r#"`admin.forceHttps`"#,
                default: r#"false"#,
                meaning: r#"AdminServer takes HTTPS only, with the `ssl.quorum.*` stores. Lenient boolean: only `true` turns it on."#,
                refused: r#"with the AdminServer on: a missing or unusable `ssl.quorum.keyStore.*` or `ssl.quorum.trustStore.*`"#,
            },
            Row {
                key: r#"`admin.portUnification`"#,
                default: r#"false"#,
                meaning: r#"AdminServer takes HTTPS and plain HTTP on one port. Lenient boolean."#,
                refused: r#"as `admin.forceHttps`"#,
            },
            Row {
                key: r#"`admin.needClientAuth`"#,
                default: r#"false"#,
                meaning: r#"HTTPS clients must show a certificate the `ssl.quorum` trust store vouches for (Apache 3.9's key). Lenient boolean."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`admin.snapshot.enabled`"#,
                default: r#"true"#,
                meaning: r#"Apache 3.9's key: serve the `snapshot` command ([Operations](operations.md#a-snapshot-over-http)); otherwise it answers 503. Java's `parseBoolean`: anything but `true` turns it off."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`admin.rateLimiterIntervalInMS`"#,
                default: r#"300000 ms"#,
                meaning: r#"Apache 3.9's key: at most one `snapshot` per interval, and one `restore`; the others get 429. Counted in milliseconds (Apache's code counts microseconds for `snapshot`)."#,
                refused: r#"not a number; negative"#,
            },
            Row {
                key: r#"`admin.restore.enabled`"#,
                default: r#"true"#,
                meaning: r#"Apache 3.9's key: serve the `restore` command ([Operations](operations.md#restoring-a-snapshot-over-http)); otherwise it answers 503. Java's `parseBoolean`: anything but `true` turns it off."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`admin.restore.maxBytes`"#,
                default: r#"1g"#,
                meaning: r#"*zkrs key.* The largest snapshot `restore` takes (it is held in memory while decoded); a larger one is answered 413. Bytes, optionally followed by `k`, `m` or `g`."#,
                refused: r#"not a size; 0"#,
            },
            Row {
                key: r#"`admin.restApi.enabled`"#,
                default: r#"false"#,
                meaning: r#"*zkrs key.* The AdminServer also serves the REST data API, `/api/v1/storage/{path}` ([REST data API](rest-api.md)): reads only, each request as a client session with the caller's credentials, so ACLs apply as on the client port; and the operator's console at `/console` ([Operations](operations.md#the-console))."#,
                refused: r#"not `true` or `false`"#,
            },
            Row {
                key: r#"`admin.restApi.writable`"#,
                default: r#"false"#,
                meaning: r#"*zkrs key.* The REST data API also creates (`POST`), sets (`PUT`) and deletes (`DELETE`) znodes; without it they are answered 405. Writes go through the server's one write path, from a follower too."#,
                refused: r#"not `true` or `false`"#,
            },
            Row {
                key: r#"`metricsProvider.className`"#,
                default: r#"Apache's `DefaultMetricsProvider`"#,
                meaning: r#"`org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider` turns on the Prometheus endpoint `/metrics`."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`metricsProvider.httpHost`"#,
                default: r#"`0.0.0.0`"#,
                meaning: r#"Address of `/metrics`."#,
                refused: r#"a host name that does not resolve"#,
            },
            Row {
                key: r#"`metricsProvider.httpPort`"#,
                default: r#"7000"#,
                meaning: r#"Port of `/metrics`. Unlike the AdminServer's, a port that cannot be bound stops start-up, as Apache's provider does."#,
                refused: r#"not a port"#,
            },
            Row {
                key: r#"`metricsProvider.*` (others)"#,
                default: r#"—"#,
                meaning: r#"Accepted and not used (`exportJvmInfo` and the like)."#,
                refused: r#"—"#,
            },
        ],
    },
    Section {
        title: r#"Logging (zkrs)"#,
        intro: r#""#,
        rows: &[
            Row {
                key: r#"`logLevel`"#,
                default: r#"`info`"#,
                meaning: r#"*zkrs.* Log filter, a `tracing` `EnvFilter` directive such as `warn` or `zk_server=debug,info`. The `RUST_LOG` environment variable, when set, wins."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`logFormat`"#,
                default: r#"`text`"#,
                meaning: r#"*zkrs.* `text`, or `json` for one JSON object a line."#,
                refused: r#"anything else"#,
            },
            Row {
                key: r#"`slowRequestThresholdMs`"#,
                default: r#"0 (off)"#,
                meaning: r#"*zkrs.* Log at WARN every request answered this many ms or more after it arrived, with its operation, client, session, cxid, zxid and time."#,
                refused: r#"not a number; negative"#,
            },
        ],
    },
    Section {
        title: r#"TLS for clients"#,
        intro: r#"The keys under `ssl.` (explained in [Security](security.md#tls-for-clients)). They are checked
when TLS is served (`secureClientPort` or `client.portUnification=true`); the files are read at
start-up. All are *JVM properties in Apache*."#,
        rows: &[
            Row {
                key: r#"`ssl.keyStore.location`"#,
                default: r#"none"#,
                meaning: r#"One PEM file: this server's private key and certificate chain."#,
                refused: r#"missing when TLS is served; unreadable; no key or no certificate; key and certificate that do not match"#,
            },
            Row {
                key: r#"`ssl.keyStore.type`"#,
                default: r#"from the file name"#,
                meaning: r#"`PEM`."#,
                refused: r#"`JKS`, `PKCS12`, `BCFKS` (with the command that converts the file); unknown types"#,
            },
            Row {
                key: r#"`ssl.keyStore.password`"#,
                default: r#"none"#,
                meaning: r#"Decrypts an encrypted PKCS#8 key. Never logged."#,
                refused: r#"a wrong password, or none for an encrypted key"#,
            },
            Row {
                key: r#"`ssl.keyStore.passwordPath`"#,
                default: r#"none"#,
                meaning: r#"A file holding that password."#,
                refused: r#"unreadable"#,
            },
            Row {
                key: r#"`ssl.trustStore.location`"#,
                default: r#"none"#,
                meaning: r#"PEM file of the authorities client certificates must chain to."#,
                refused: r#"missing when `ssl.clientAuth` is not `none`; no certificate in it"#,
            },
            Row {
                key: r#"`ssl.trustStore.type`, `.password`, `.passwordPath`"#,
                default: r#"—"#,
                meaning: r#"As for the key store (a PEM trust store needs no password)."#,
                refused: r#"as for the key store"#,
            },
            Row {
                key: r#"`ssl.clientAuth`"#,
                default: r#"`need`"#,
                meaning: r#"`need`: a client must show a trusted certificate; `want`: one without is served, an untrusted one refused; `none`."#,
                refused: r#"other values"#,
            },
            Row {
                key: r#"`ssl.protocol`"#,
                default: r#"`TLSv1.3` (1.3 and 1.2)"#,
                meaning: r#"`TLSv1.3`, `TLSv1.2` or `TLS`. Older versions are left out with a warning."#,
                refused: r#"nothing left to offer; an unknown name"#,
            },
            Row {
                key: r#"`ssl.enabledProtocols`"#,
                default: r#"—"#,
                meaning: r#"Comma-separated versions; wins over `ssl.protocol`."#,
                refused: r#"as `ssl.protocol`"#,
            },
            Row {
                key: r#"`ssl.ciphersuites`"#,
                default: r#"rustls's set"#,
                meaning: r#"Comma-separated IANA names (`TLS_AES_128_GCM_SHA256`); names rustls lacks are left out with a warning."#,
                refused: r#"none of them available"#,
            },
            Row {
                key: r#"`ssl.handshakeDetectionTimeoutMillis`"#,
                default: r#"5000"#,
                meaning: r#"With port unification, time allowed for a client's first byte. Values under 1 mean 5000."#,
                refused: r#"not a number"#,
            },
            Row {
                key: r#"`ssl.authProvider`"#,
                default: r#"`x509`"#,
                meaning: r#"Only `x509`."#,
                refused: r#"any other value"#,
            },
            Row {
                key: r#"`ssl.crl`, `ssl.ocsp`"#,
                default: r#"false"#,
                meaning: r#"Revocation checks are not supported."#,
                refused: r#"`true`"#,
            },
            Row {
                key: r#"`ssl.context.supplier.class`"#,
                default: r#"—"#,
                meaning: r#"A Java class; not applicable."#,
                refused: r#"any value"#,
            },
            Row {
                key: r#"`ssl.hostnameVerification`, `ssl.clientHostnameVerification`, `ssl.allowReverseDnsLookup`, `ssl.sslProvider`"#,
                default: r#"—"#,
                meaning: r#"Accepted and ignored on the client port (logged)."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`client.portUnification`"#,
                default: r#"false"#,
                meaning: r#"The plain `clientPort` also takes TLS clients, told apart by the first byte."#,
                refused: r#"`true` without `clientPort`"#,
            },
            Row {
                key: r#"`client.certReload`"#,
                default: r#"false"#,
                meaning: r#"Read both stores again within 2 s of a change to their files."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`X509AuthenticationProvider.superUser`"#,
                default: r#"none"#,
                meaning: r#"The certificate subject (as in `x509:` ids) that is super."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`serverCnxnFactory`"#,
                default: r#"—"#,
                meaning: r#"Accepted and not needed: one connection layer serves TLS and plain alike."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`authProvider.N` naming `org.apache.zookeeper.server.auth.X509AuthenticationProvider`"#,
                default: r#"—"#,
                meaning: r#"Registers the `x509` scheme without a TLS port."#,
                refused: r#"—"#,
            },
        ],
    },
    Section {
        title: r#"TLS between members and for the AdminServer's HTTPS"#,
        intro: r#"`sslQuorum`, `portUnification` and `sslQuorumReloadCertFiles` are Apache's zoo.cfg keys; the rest
are `ssl.quorum.` versions of the client keys above, with the same values and refusals
([Security](security.md#tls-between-ensemble-members)). They are checked when `sslQuorum` or
`portUnification` is true, or when the AdminServer serves HTTPS."#,
        rows: &[
            Row {
                key: r#"`sslQuorum`"#,
                default: r#"false"#,
                meaning: r#"Dial peers with TLS and take only TLS on this server's quorum and election ports."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`portUnification`"#,
                default: r#"false"#,
                meaning: r#"Quorum and election ports take TLS and plain connections alike (for switching a running ensemble)."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`sslQuorumReloadCertFiles`"#,
                default: r#"false"#,
                meaning: r#"Read the `ssl.quorum.*` stores again within 2 s of a change."#,
                refused: r#"not a boolean"#,
            },
            Row {
                key: r#"`ssl.quorum.keyStore.*`, `ssl.quorum.trustStore.*`"#,
                default: r#"none"#,
                meaning: r#"As under `ssl.`; the trust store is always required."#,
                refused: r#"as under `ssl.`; a missing trust store"#,
            },
            Row {
                key: r#"`ssl.quorum.clientAuth`, `.protocol`, `.enabledProtocols`, `.ciphersuites`, `.handshakeDetectionTimeoutMillis`"#,
                default: r#"as under `ssl.`"#,
                meaning: r#"As under `ssl.`."#,
                refused: r#"as under `ssl.`"#,
            },
            Row {
                key: r#"`ssl.quorum.hostnameVerification`"#,
                default: r#"true"#,
                meaning: r#"Each peer's certificate must name it: the dialled peer by the IP address connected to or its `server.N` host, the dialling peer by its IP address. No reverse DNS look-up is made."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`ssl.quorum.clientHostnameVerification`"#,
                default: r#"true"#,
                meaning: r#"With `false`, the accepting side skips the check of the dialling peer's name."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`ssl.quorum.allowReverseDnsLookup`"#,
                default: r#"false"#,
                meaning: r#"Not done; `true` is logged as a warning."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`ssl.quorum.sslProvider`"#,
                default: r#"—"#,
                meaning: r#"Ignored: rustls is always used."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`ssl.quorum.crl`, `.ocsp`, `.context.supplier.class`"#,
                default: r#"—"#,
                meaning: r#"As under `ssl.`."#,
                refused: r#"as under `ssl.`"#,
            },
        ],
    },
    Section {
        title: r#"SASL and authentication"#,
        intro: r#"All but `java.security.auth.login.config` are *JVM properties in Apache* or, for the
`quorum.auth.*` keys, Apache zoo.cfg keys ([Security](security.md#sasl-digest-md5-for-clients))."#,
        rows: &[
            Row {
                key: r#"`java.security.auth.login.config`"#,
                default: r#"none"#,
                meaning: r#"*zkrs* as a zoo.cfg key (Apache takes it only as `-Djava.security.auth.login.config`): the JAAS file with the SASL users."#,
                refused: r#"an unreadable or unparsable file (naming file and line); more than 10,000 users"#,
            },
            Row {
                key: r#"`authProvider.N` naming `org.apache.zookeeper.server.auth.SASLAuthenticationProvider`"#,
                default: r#"—"#,
                meaning: r#"Registers the `sasl` ACL scheme. Other provider classes are unknown keys."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`sasl.serverconfig`"#,
                default: r#"`Server`"#,
                meaning: r#"The JAAS section listing the users (DIGEST-MD5), or with `com.sun.security.auth.module.Krb5LoginModule` the server's Kerberos login (GSSAPI: options `useKeyTab=true`, `keyTab`, `principal`; [Security](security.md#kerberos-sasl-gssapi-for-clients)). A file without it leaves client SASL off."#,
                refused: r#"a Kerberos login without `useKeyTab=true`, `keyTab` or `principal`, or whose keytab has no key for the principal; Kerberos in a build without the `kerberos` feature"#,
            },
            Row {
                key: r#"`kerberos.removeHostFromPrincipal`"#,
                default: r#"false"#,
                meaning: r#"GSSAPI: a client principal `name/host@REALM` of the default realm gets the id `name@REALM`."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`kerberos.removeRealmFromPrincipal`"#,
                default: r#"false"#,
                meaning: r#"GSSAPI: a client principal of the default realm gets its id without `@REALM`."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`security.auth_to_local`"#,
                default: r#"`DEFAULT`"#,
                meaning: r#"GSSAPI: the rules that give principals their short names, in Apache's grammar: `DEFAULT` (the first component, for the default realm of `-Djava.security.krb5.conf`, `KRB5_CONFIG` or /etc/krb5.conf, or `-Djava.security.krb5.realm`) and `RULE:[n:format](filter)s/from/to/g` ([Security](security.md#mapping-principals-to-ids))."#,
                refused: r#"a list that does not parse: Hadoop's `/L` flag, a `$n` past the rule's components, a regular expression the regex crate does not take, a replacement naming a missing group"#,
            },
            Row {
                key: r#"`superUser`, `superUser.*`"#,
                default: r#"none"#,
                meaning: r#"SASL user names that are super."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`allowSaslFailedClients`"#,
                default: r#"false"#,
                meaning: r#"Keep a connection whose SASL exchange failed."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`enforce.auth.enabled`"#,
                default: r#"false"#,
                meaning: r#"Require authentication before any request but auth and SASL."#,
                refused: r#"`true` without `enforce.auth.schemes`"#,
            },
            Row {
                key: r#"`enforce.auth.schemes`"#,
                default: r#"none"#,
                meaning: r#"Comma-separated schemes, one of which a connection must have (`sasl`, `digest`, `ip`, `x509`)."#,
                refused: r#"a scheme that has no provider"#,
            },
            Row {
                key: r#"`sessionRequireClientSASLAuth`"#,
                default: r#"false"#,
                meaning: r#"Same as enforcing the `sasl` scheme."#,
                refused: r#"`true` without the SASL provider"#,
            },
            Row {
                key: r#"`DigestAuthenticationProvider.superDigest`"#,
                default: r#"none"#,
                meaning: r#"`super:<base64 SHA-1>`: the password of the `super` digest user ([Security](security.md#the-super-user))."#,
                refused: r#"a value without `:`"#,
            },
            Row {
                key: r#"`quorum.auth.enableSasl`"#,
                default: r#"false"#,
                meaning: r#"SASL between members: DIGEST-MD5, or GSSAPI (Kerberos) for a side whose section logs in with `Krb5LoginModule` ([Security](security.md#kerberos-between-ensemble-members))."#,
                refused: r#"not a boolean; `true` without a JAAS file or its sections; a section whose login module is neither DIGEST-MD5's nor `Krb5LoginModule`; a Kerberos login without `useKeyTab=true`, `keyTab` or `principal`; a server keytab without the principal's key; a Kerberos section in a build without the `kerberos` feature"#,
            },
            Row {
                key: r#"`quorum.auth.learnerRequireSasl`"#,
                default: r#"false"#,
                meaning: r#"This server authenticates to the leader."#,
                refused: r#"`true` without `enableSasl`"#,
            },
            Row {
                key: r#"`quorum.auth.serverRequireSasl`"#,
                default: r#"false"#,
                meaning: r#"Members connecting here must authenticate."#,
                refused: r#"`true` without `enableSasl` or without `learnerRequireSasl`"#,
            },
            Row {
                key: r#"`quorum.auth.learner.saslLoginContext`"#,
                default: r#"`QuorumLearner`"#,
                meaning: r#"JAAS section with this server's `username` and `password`, or its Kerberos login (`Krb5LoginModule` with `useKeyTab`, `keyTab`, `principal`, `storeKey`)."#,
                refused: r#"missing section; missing credentials when required"#,
            },
            Row {
                key: r#"`quorum.auth.server.saslLoginContext`"#,
                default: r#"`QuorumServer`"#,
                meaning: r#"JAAS section with the members' `user_NAME="password"` entries, or the Kerberos login members' tickets are accepted with."#,
                refused: r#"missing section"#,
            },
            Row {
                key: r#"`quorum.auth.kerberos.servicePrincipal`"#,
                default: r#"`zkquorum/localhost`"#,
                meaning: r#"The principal a Kerberos learner asks for; `service/_HOST` becomes `service/<member's host>`. Kerberos learners are authorized when their principal's host is a `server.N` host."#,
                refused: r#"—"#,
            },
            Row {
                key: r#"`quorum.cnxn.threads.size`"#,
                default: r#"20"#,
                meaning: r#"With quorum SASL, the most election connections set up (and authenticated) at once; smaller values are raised to 20 as in Apache, larger ones lowered to 4096."#,
                refused: r#"not a number"#,
            },
        ],
    },
    Section {
        title: r#"Testing only"#,
        intro: r#""#,
        rows: &[Row {
            key: r#"`testingonly.initialZxid`"#,
            default: r#"unset"#,
            meaning: r#"Counter each new epoch starts at, so that tests reach the end of an epoch quickly. Apache's test property; never in production."#,
            refused: r#"not a counter from 0 to 4294967293 (0xfffffffd; decimal or `0x` hexadecimal): an epoch's last zxid has counter 0xfffffffe"#,
        }],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    const GUIDE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide/src/configuration.md");
    const BEGIN: &str = "<!-- generated: the tables below come from zk-server/src/config_reference.rs -->";
    const END: &str = "<!-- end of the generated tables -->";

    /// The guide's tables are [`markdown`]'s output; `ZKRS_BLESS=1` writes them there.
    #[test]
    fn the_guide_shows_this_reference() {
        let text = std::fs::read_to_string(GUIDE).expect("the user guide's configuration chapter");
        let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
            panic!("{GUIDE} lacks the markers {BEGIN:?} and {END:?}");
        };
        let shown = text[b + BEGIN.len()..e].trim();
        let want = markdown();
        if shown == want.trim() {
            return;
        }
        if std::env::var("ZKRS_BLESS").is_ok() {
            let fresh = format!("{}{BEGIN}\n\n{want}\n{}", &text[..b], &text[e..]);
            std::fs::write(GUIDE, fresh).expect("rewrite the guide");
            return;
        }
        let first = shown.lines().zip(want.trim().lines()).find(|(a, b)| a != b);
        panic!(
            "{GUIDE}'s tables differ from config_reference.rs (ZKRS_BLESS=1 rewrites them): first \
             difference {first:?}"
        );
    }

    /// The keys a parser's match arms take: the quoted names before ` =>` (or ` if `) of the
    /// arms at `indent` spaces, in the lines after `from` up to `to`.
    fn arms(source: &str, from: &str, to: &str, indent: usize) -> Vec<String> {
        let start = source.find(from).unwrap_or_else(|| panic!("no {from:?} in the parser"));
        let rest = &source[start..];
        let end = rest.find(to).unwrap_or_else(|| panic!("no {to:?} after {from:?}"));
        let mut keys = Vec::new();
        for line in rest[..end].lines() {
            let body = line.trim_start();
            if line.len() - body.len() != indent || !body.starts_with('"') {
                continue;
            }
            let Some(head) = body.split(" =>").next() else { continue };
            let head = head.split(" if ").next().unwrap_or(head);
            keys.extend(head.split(" | ").map(|k| k.trim_matches('"').to_string()));
        }
        assert!(!keys.is_empty(), "no arms found after {from:?}: the test no longer reads the parser");
        keys
    }

    /// Every key the parsers take has a row here (or in the guide's lists of refused and
    /// ignored keys).
    #[test]
    fn every_key_the_parsers_take_is_documented() {
        let config = include_str!("config.rs");
        let ssl = include_str!("ssl_config.rs");
        let sasl = include_str!("sasl_config.rs");
        let mut keys = arms(config, "            match key {", "                k if cfg.sasl.take", 16);
        for suffix in arms(ssl, "    fn take_prefixed", "    fn take_client", 12) {
            keys.push(format!("ssl.{suffix}"));
            // `ssl.authProvider` is the client port's alone (its arm is guarded by is_client).
            if suffix != "authProvider" {
                keys.push(format!("ssl.quorum.{suffix}"));
            }
        }
        keys.extend(arms(ssl, "    fn take_client", "\n    }\n", 12));
        keys.extend(arms(sasl, "    pub fn take", "\n    }\n", 12));
        // Named by constants in the SASL parser, and the numbered families.
        keys.extend(
            [
                "java.security.auth.login.config",
                "quorum.auth.enableSasl",
                "quorum.auth.serverRequireSasl",
                "quorum.auth.learnerRequireSasl",
                "quorum.auth.learner.saslLoginContext",
                "quorum.auth.server.saslLoginContext",
                "quorum.auth.kerberos.servicePrincipal",
                "quorum.cnxn.threads.size",
                "superUser",
                "superUser.alice",
                "server.1",
                "group.1",
                "weight.1",
                "authProvider.1",
            ]
            .map(String::from),
        );
        assert!(keys.len() > 100, "{} keys read from the parsers", keys.len());
        let guide = std::fs::read_to_string(GUIDE).expect("the user guide's configuration chapter");
        let listed: Vec<String> = crate::config::APACHE_KEYS_IGNORED
            .iter()
            .chain(crate::config::APACHE_FEATURES_REFUSED.iter())
            .map(|k| k.to_string())
            .collect();
        for k in &listed {
            assert!(
                guide.contains(&format!("`{k}")),
                "{k} is not in the guide's lists of refused and ignored keys"
            );
        }
        let missing: Vec<&String> = keys.iter().filter(|k| !documents(k)).collect();
        assert!(missing.is_empty(), "keys the parsers take with no row in config_reference.rs: {missing:?}");
    }

    #[test]
    fn patterns_document_their_families_only() {
        assert!(documents("server.3") && documents("ssl.quorum.keyStore.location"));
        assert!(documents("ssl.trustStore.passwordPath"), "a name sharing the first one's prefix");
        assert!(!documents("server.") && !documents("server.x") && !documents("snapCountt"));
    }
}
