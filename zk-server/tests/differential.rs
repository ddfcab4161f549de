//! Differential tests: every scenario runs against Apache ZooKeeper 3.8 and against zkrs-server, each
//! on a fresh server (so zxids are comparable exactly), and the two transcripts must be equal.
//! See `support/transcript.rs` for what is recorded and normalised, and for `ZKRS_DIFF_ONLY=apache`.
//!
//! A scenario never races two sessions: after a write by one session, a watcher is read up to a
//! barrier (a cheap read on its own connection), since a server queues an event before it answers
//! any later request of the watching session.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use bytes::Bytes;
use std::time::Duration;
use support::transcript::*;
use zk_proto::jute::Jute;
use zk_proto::*;

/// Reap containers and TTL nodes quickly (Apache gets the same as a -D flag from the harness).
const BASE: &str = "znode.container.checkIntervalMs=500";
/// TTL nodes enabled.
const EXTENDED: &str = "znode.container.checkIntervalMs=500\nextendedTypesEnabled=true";
/// A super user: digest of "super:secret".
const SUPER: &str = "znode.container.checkIntervalMs=500\n\
                     DigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=";
/// Short ticks for session timeout clamping and expiry: min 400 ms, max 4000 ms.
const FAST_TICK: &str = "znode.container.checkIntervalMs=500\ntickTime=200";

/// digest id of alice:pw1.
const ALICE: &str = "alice:0H3LR71td7bmv+FwKgVasiS36rc=";
/// digest id of bob:pw2.
const BOB: &str = "bob:DzYBVPYoUPHuiOrAcsz6mJwnG9k=";

const LONG: i32 = 30_000;

macro_rules! diff_tests {
    ($($name:ident : $cfg:expr;)*) => {
        $(
            #[test]
            fn $name() {
                run(stringify!($name), $cfg, sc::$name);
            }
        )*
    };
}

diff_tests! {
    create_modes: BASE;
    create_ttl_enabled: EXTENDED;
    create_errors: BASE;
    data_versions: BASE;
    delete_versions: BASE;
    children_counters: BASE;
    acl_ops: BASE;
    acl_digest: BASE;
    acl_ip: BASE;
    acl_super: SUPER;
    auth_failures: BASE;
    sync_whoami_ephemerals: BASE;
    invalid_paths: BASE;
    unknown_and_misplaced_ops: BASE;
    malformed_frames: BASE;
    malformed_handshakes: BASE;
    watches_one_shot: BASE;
    watches_persistent: BASE;
    watches_remove_check: BASE;
    watches_set_watches: BASE;
    watches_set_watches2: BASE;
    watches_need_read: BASE;
    watches_mode_overlap: BASE;
    watches_event_order: BASE;
    multi_ops: EXTENDED;
    multi_read: BASE;
    multi_malformed: BASE;
    session_close: BASE;
    session_expiry: FAST_TICK;
    session_reconnect: BASE;
    session_timeout_clamp: FAST_TICK;
    containers_reaped: BASE;
    ttl_reaped: EXTENDED;
}

/// Appends a jute ustring/buffer given as raw bytes.
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    (b.len() as i32).write(out);
    out.extend_from_slice(b);
}

/// A request frame payload: header, then whatever `body` appends.
fn raw(xid: i32, op: i32, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    RequestHeader { xid, op }.write(&mut out);
    body(&mut out);
    out
}

/// A short poll for events: used where a scenario expects none and has no later read to act as a
/// barrier.
const QUIET: Duration = Duration::from_millis(300);
const EVENT_WAIT: Duration = Duration::from_secs(10);

mod sc {
    use super::*;

    /// Pins: create in every mode through create, create2 and createContainer; the path returned
    /// (sequence suffix = %010d of the parent's cversion); full Stat of each (ephemeralOwner is the
    /// session for ephemerals, what containers show); getData null vs empty data; flag/opcode
    /// mismatches (container flag via create, non-container flag via createContainer); createTTL and
    /// TTL flags while extended types are disabled.
    pub fn create_modes(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/cm", b"", CreateMode::Persistent));
        for (p, mode) in [
            ("/cm/p", CreateMode::Persistent),
            ("/cm/e", CreateMode::Ephemeral),
            ("/cm/ps-", CreateMode::PersistentSequential),
            ("/cm/ps-", CreateMode::PersistentSequential),
            ("/cm/es-", CreateMode::EphemeralSequential),
            ("/cm/c-via-create", CreateMode::Container),
        ] {
            ctx.call(&mut a, create(p, b"data", mode));
            ctx.call(&mut a, exists(p, false));
        }
        for (p, flags) in [
            ("/cm/p2", 0),
            ("/cm/e2", 1),
            ("/cm/ps2-", 2),
            ("/cm/es2-", 3),
            ("/cm/c2", 4),
            ("/cm/t2", 5),
            ("/cm/ts2-", 6),
        ] {
            ctx.call(&mut a, create2(p, b"x", flags));
        }
        ctx.call(&mut a, create_container("/cm/c3"));
        ctx.call(&mut a, exists("/cm/c3", false));
        // createContainer with a non-container flag.
        ctx.call(
            &mut a,
            Request::CreateContainer(CreateRequest {
                path: "/cm/c4".into(),
                data: None,
                acl: open_acl(),
                flags: 0,
            }),
        );
        // TTL while extended types are off.
        ctx.call(&mut a, create_ttl("/cm/ttl", 5, 1000));
        ctx.call(&mut a, create_ttl("/cm/ttl0", 0, 1000));
        ctx.call(&mut a, create_acl("/cm/ttlflag", Some(b""), open_acl(), 5));
        // null vs empty data.
        ctx.call(&mut a, create_acl("/cm/null", None, open_acl(), 0));
        ctx.call(&mut a, get_data("/cm/null", false));
        ctx.call(&mut a, create_acl("/cm/empty", Some(b""), open_acl(), 0));
        ctx.call(&mut a, get_data("/cm/empty", false));
        ctx.call(&mut a, get_data("/cm/p", false));
        ctx.call(&mut a, get_data("/cm/missing", false));
        ctx.call(&mut a, exists("/cm/missing", false));
        ctx.call(&mut a, get_children("/cm", false));
        ctx.call(&mut a, get_children2("/cm", false));
        ctx.close_session(a);
        let mut b = ctx.connect("b", LONG);
        // The session's ephemerals went with it.
        ctx.call(&mut b, get_children2("/cm", false));
    }

    /// Pins: createTTL in both TTL modes with extended types on, the TTL bounds (0, negative, the
    /// maximum 0xFF_FFFF_FFFF, one past it), non-TTL flags through createTTL, TTL flags through
    /// create and create2, and what ephemeralOwner a TTL node shows.
    pub fn create_ttl_enabled(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/tt", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_ttl("/tt/a", 5, 100_000));
        ctx.call(&mut a, create_ttl("/tt/s-", 6, 100_000));
        ctx.call(&mut a, create_ttl("/tt/zero", 5, 0));
        ctx.call(&mut a, create_ttl("/tt/neg", 5, -1));
        ctx.call(&mut a, create_ttl("/tt/max", 5, 0xFF_FFFF_FFFF));
        ctx.call(&mut a, create_ttl("/tt/over", 5, 0x100_0000_0000));
        for flags in [0, 1, 2, 3, 4, 7, -1] {
            ctx.call(&mut a, create_ttl(&format!("/tt/f{flags}"), flags, 100_000));
        }
        ctx.call(&mut a, create_acl("/tt/viacreate", Some(b""), open_acl(), 5));
        ctx.call(&mut a, create2("/tt/viacreate2", b"", 5));
        ctx.call(&mut a, create2("/tt/viacreate2s-", b"", 6));
        ctx.call(&mut a, get_data("/tt/a", false));
        ctx.call(&mut a, get_children2("/tt", false));
    }

    /// Pins: NODEEXISTS, NONODE for a missing parent, NOCHILDRENFOREPHEMERALS (plain and
    /// sequential), invalid flags, creating "/" and under /zookeeper, null ACL vector, and which
    /// check wins when several fail; each failure's zxid use.
    pub fn create_errors(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/ce", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/ce", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/ce/missing/child", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/ce/eph", b"", CreateMode::Ephemeral));
        ctx.call(&mut a, create("/ce/eph/child", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/ce/eph/s-", b"", CreateMode::EphemeralSequential));
        for flags in [-1, 7, 8, 100, i32::MIN] {
            ctx.call(&mut a, create_acl(&format!("/ce/f{flags}"), Some(b""), open_acl(), flags));
        }
        // Invalid flags on a path that exists, and under a missing parent.
        ctx.call(&mut a, create_acl("/ce", Some(b""), open_acl(), 9));
        ctx.call(&mut a, create_acl("/ce/none/x", Some(b""), open_acl(), 9));
        // Existing node with an invalid ACL.
        ctx.call(&mut a, create_acl("/ce", Some(b""), vec![], 0));
        ctx.call(&mut a, create("/", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/zookeeper", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/zookeeper/mine", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/zookeeper/quota/mine", b"", CreateMode::Persistent));
        // A sequential create whose prefix ends with '/' is valid; non-sequential is not.
        ctx.call(&mut a, create("/ce/", b"", CreateMode::PersistentSequential));
        ctx.call(&mut a, create("/ce/", b"", CreateMode::Persistent));
        // A null ACL vector.
        let payload = raw(a.next_xid(), 1, |o| {
            put_bytes(o, b"/ce/nullacl");
            put_bytes(o, b"");
            (-1i32).write(o);
            0i32.write(o);
        });
        let xid = i32::from_be_bytes(payload[..4].try_into().unwrap());
        ctx.call_raw(&mut a, "create /ce/nullacl acl=null", xid, 1, &payload);
        ctx.call(&mut a, get_children2("/ce", false));
    }

    /// Pins: setData with matching, stale and -1 versions, on a missing node, with null and empty
    /// data; version/mzxid/mtime/dataLength movement; setData on "/".
    pub fn data_versions(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/dv", b"a", CreateMode::Persistent));
        ctx.call(&mut a, set_data("/dv", b"bb", 0));
        ctx.call(&mut a, set_data("/dv", b"cc", 0));
        ctx.call(&mut a, set_data("/dv", b"cc", 5));
        ctx.call(&mut a, set_data("/dv", b"ddd", -1));
        ctx.call(&mut a, set_data("/dv", b"e", -2));
        ctx.call(&mut a, get_data("/dv", false));
        ctx.call(&mut a, Request::SetData(SetDataRequest { path: "/dv".into(), data: None, version: 2 }));
        ctx.call(&mut a, get_data("/dv", false));
        ctx.call(&mut a, set_data("/dv", b"", 3));
        ctx.call(&mut a, get_data("/dv", false));
        ctx.call(&mut a, set_data("/dv/missing", b"x", -1));
        ctx.call(&mut a, set_data("/dv/missing", b"x", 7));
        ctx.call(&mut a, set_data("/", b"root", -1));
        ctx.call(&mut a, get_data("/", false));
        ctx.call(&mut a, get_data("/zookeeper", false));
        ctx.call(&mut a, get_data("/zookeeper/quota", false));
        ctx.call(&mut a, get_data("/zookeeper/config", false));
        ctx.call(&mut a, exists("/dv", false));
    }

    /// Pins: delete with stale, matching and -1 versions; NOTEMPTY vs BADVERSION precedence;
    /// NONODE; the protected paths "/", /zookeeper, /zookeeper/quota, /zookeeper/config.
    pub fn delete_versions(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/dl", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/dl/a", b"", CreateMode::Persistent));
        ctx.call(&mut a, set_data("/dl/a", b"1", -1));
        ctx.call(&mut a, delete("/dl", -1));
        ctx.call(&mut a, delete("/dl", 7));
        ctx.call(&mut a, delete("/dl/a", 0));
        ctx.call(&mut a, delete("/dl/a", 1));
        ctx.call(&mut a, delete("/dl/a", 1));
        ctx.call(&mut a, delete("/dl/a", -1));
        ctx.call(&mut a, delete("/dl/x/y", -1));
        for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
            ctx.call(&mut a, delete(p, -1));
            ctx.call(&mut a, delete(p, 5));
        }
        ctx.call(&mut a, delete("/dl", 0));
        ctx.call(&mut a, exists("/dl", false));
        ctx.call(&mut a, get_children2("/", false));
    }

    /// Pins: cversion, pzxid and numChildren after child creates and deletes (and that data changes
    /// and grandchild changes leave them alone); sequence numbers across deletes; getChildren and
    /// getChildren2 on missing nodes; getAllChildrenNumber on a subtree, "/" and a missing node.
    pub fn children_counters(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/cc", b"", CreateMode::Persistent));
        ctx.call(&mut a, get_children2("/cc", false));
        ctx.call(&mut a, create("/cc/a", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/cc/b", b"", CreateMode::Persistent));
        ctx.call(&mut a, get_children2("/cc", false));
        ctx.call(&mut a, delete("/cc/a", -1));
        ctx.call(&mut a, get_children2("/cc", false));
        ctx.call(&mut a, set_data("/cc", b"d", -1));
        ctx.call(&mut a, set_data("/cc/b", b"d", -1));
        ctx.call(&mut a, create("/cc/b/g", b"", CreateMode::Persistent));
        ctx.call(&mut a, get_children2("/cc", false));
        for _ in 0..3 {
            ctx.call(&mut a, create("/cc/s-", b"", CreateMode::PersistentSequential));
        }
        ctx.call(&mut a, get_children2("/cc", false));
        ctx.call(&mut a, delete("/cc/s-0000000004", -1));
        ctx.call(&mut a, delete("/cc/s-0000000005", -1));
        ctx.call(&mut a, create("/cc/s-", b"", CreateMode::PersistentSequential));
        ctx.call(&mut a, create("/cc/e-", b"", CreateMode::EphemeralSequential));
        // A sequential node with no prefix at all: the name is just the number.
        ctx.call(&mut a, create("/cc/", b"", CreateMode::PersistentSequential));
        ctx.call(&mut a, get_children2("/cc", false));
        ctx.call(&mut a, get_children("/cc/b", false));
        ctx.call(&mut a, get_children("/cc/none", false));
        ctx.call(&mut a, get_children2("/cc/none", false));
        for p in ["/cc", "/cc/b", "/cc/b/g", "/", "/zookeeper", "/cc/none"] {
            ctx.call(&mut a, Request::GetAllChildrenNumber(GetAllChildrenNumberRequest { path: p.into() }));
        }
        ctx.call(&mut a, get_children2("/", false));
        ctx.call(&mut a, get_children2("/zookeeper", false));
    }

    /// Pins: getACL/setACL with aversion checks; every INVALIDACL shape (empty list, unknown scheme,
    /// auth with no authenticated ids, malformed digest and ip ids, world with another id, bad
    /// perms); setACL and getACL on a missing node; that setACL does not move mzxid.
    pub fn acl_ops(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/acl", b"x", CreateMode::Persistent));
        ctx.call(&mut a, get_acl("/acl"));
        ctx.call(&mut a, set_acl("/acl", acl(perms::ALL, "world", "anyone"), 0));
        ctx.call(&mut a, set_acl("/acl", open_acl(), 0));
        ctx.call(&mut a, set_acl("/acl", open_acl(), -1));
        ctx.call(&mut a, set_acl("/acl", open_acl(), 2));
        ctx.call(&mut a, get_acl("/acl"));
        // Without ADMIN, setACL is refused before its version is looked at.
        ctx.call(&mut a, create("/acl-rw", b"", CreateMode::Persistent));
        ctx.call(&mut a, set_acl("/acl-rw", acl(perms::READ | perms::WRITE, "world", "anyone"), 0));
        ctx.call(&mut a, set_acl("/acl-rw", open_acl(), 1));
        ctx.call(&mut a, set_acl("/acl-rw", open_acl(), 7));
        ctx.call(&mut a, create("/acl-rw/child", b"", CreateMode::Persistent));
        ctx.call(&mut a, get_acl("/acl-rw"));
        ctx.call(&mut a, set_acl("/acl/none", open_acl(), -1));
        ctx.call(&mut a, get_acl("/acl/none"));
        let bad: Vec<(&str, Vec<Acl>)> = vec![
            ("empty", vec![]),
            ("unknown-scheme", acl(31, "foo", "bar")),
            ("auth-without-ids", acl(31, "auth", "")),
            ("digest-no-colon", acl(31, "digest", "alice")),
            ("ip-bad-octet", acl(31, "ip", "300.0.0.1")),
            ("ip-bad-bits", acl(31, "ip", "127.0.0.1/40")),
            ("ip-text", acl(31, "ip", "localhost")),
            ("world-other", acl(31, "world", "bob")),
            ("super-scheme", acl(31, "super", "x")),
            ("perms-0", acl(0, "world", "anyone")),
            ("perms-64", acl(64, "world", "anyone")),
            ("perms-neg", acl(-1, "world", "anyone")),
        ];
        for (what, list) in bad {
            ctx.note(format!("-- {what}"));
            // Each case gets its own setACL target, since an accepted odd ACL locks its node.
            let target = format!("/acl-{what}");
            ctx.call(&mut a, create(&target, b"", CreateMode::Persistent));
            ctx.call(&mut a, create_acl(&format!("/acl/{what}"), Some(b""), list.clone(), 0));
            ctx.call(&mut a, set_acl(&target, list, -1));
            ctx.call(&mut a, get_acl(&target));
        }
        // A list mixing a valid and an invalid entry.
        let mut mixed = open_acl();
        mixed.extend(acl(31, "foo", "bar"));
        ctx.call(&mut a, set_acl("/acl", mixed, -1));
        // Duplicate entries are kept or merged?
        let mut dup = open_acl();
        dup.extend(open_acl());
        ctx.call(&mut a, create_acl("/acl/dup", Some(b""), dup, 0));
        ctx.call(&mut a, get_acl("/acl/dup"));
        ctx.call(&mut a, get_acl("/"));
        ctx.call(&mut a, get_acl("/zookeeper"));
        ctx.call(&mut a, get_acl("/zookeeper/config"));
    }

    /// Pins: digest auth (addauth, whoAmI), the auth scheme expanding to the caller's ids, digest
    /// ACLs; NOAUTH for every kind of op (read, write, create child, delete child, getACL, setACL,
    /// exists); getACL masking for a reader without ADMIN.
    pub fn acl_digest(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.auth(&mut a, "digest", b"alice:pw1");
        ctx.call(&mut a, Request::WhoAmI);
        ctx.call(&mut a, create_acl("/dg", Some(b"secret"), acl(31, "auth", ""), 0));
        ctx.call(&mut a, get_acl("/dg"));
        ctx.call(&mut a, create("/dg/child", b"", CreateMode::Persistent));
        let mut read_only_bob = acl(perms::READ, "digest", BOB);
        read_only_bob.extend(acl(perms::ALL, "digest", ALICE));
        ctx.call(&mut a, create_acl("/dg2", Some(b"shared"), read_only_bob, 0));
        let mut admin_bob = acl(perms::ADMIN, "digest", BOB);
        admin_bob.extend(acl(perms::ALL, "digest", ALICE));
        ctx.call(&mut a, create_acl("/dg3", Some(b""), admin_bob, 0));
        ctx.call(&mut a, create_acl("/dg4", Some(b""), acl(perms::WRITE, "world", "anyone"), 0));
        for who in ["nobody", "bob"] {
            ctx.note(format!("-- b as {who}"));
            if who == "bob" {
                ctx.auth(&mut b, "digest", b"bob:pw2");
                ctx.call(&mut b, Request::WhoAmI);
            }
            for p in ["/dg", "/dg2", "/dg3", "/dg4"] {
                ctx.call(&mut b, get_data(p, false));
                ctx.call(&mut b, exists(p, false));
                ctx.call(&mut b, get_children2(p, false));
                ctx.call(&mut b, get_acl(p));
                ctx.call(&mut b, set_data(p, b"x", -1));
                ctx.call(&mut b, create(&format!("{p}/x"), b"", CreateMode::Persistent));
                ctx.call(&mut b, delete(&format!("{p}/child"), -1));
                ctx.call(&mut b, exists(&format!("{p}/missing"), false));
            }
        }
        // Wrong version and no permission together: which wins.
        ctx.call(&mut b, set_data("/dg", b"x", 99));
        ctx.call(&mut b, set_acl("/dg", open_acl(), 99));
        ctx.call(&mut b, set_acl("/dg3", open_acl(), 0));
        ctx.call(&mut b, get_acl("/dg3"));
        // A second identity on the same session.
        ctx.auth(&mut a, "digest", b"bob:pw2");
        ctx.call(&mut a, Request::WhoAmI);
        ctx.call(&mut a, create_acl("/dg5", Some(b""), acl(31, "auth", ""), 0));
        ctx.call(&mut a, get_acl("/dg5"));
    }

    /// Pins: ip ACLs: exact address, CIDR 127.0.0.0/8 and /32, a non-matching network, IPv6 ids
    /// against a v4 client; the ip id whoAmI reports.
    pub fn acl_ip(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, Request::WhoAmI);
        for (p, id, pm) in [
            ("/ip1", "127.0.0.1", perms::ALL),
            ("/ip2", "127.0.0.0/8", perms::READ),
            ("/ip3", "10.0.0.0/8", perms::ALL),
            ("/ip4", "127.0.0.1/32", perms::ALL),
            ("/ip5", "0.0.0.0/0", perms::READ),
            ("/ip6", "::1", perms::ALL),
            ("/ip7", "127.0.0.2", perms::ALL),
        ] {
            ctx.call(&mut a, create_acl(p, Some(b"v"), acl(pm, "ip", id), 0));
            ctx.call(&mut a, get_data(p, false));
            ctx.call(&mut a, set_data(p, b"w", -1));
            ctx.call(&mut a, get_acl(p));
        }
    }

    /// Pins: a session authenticated as the superDigest user passes every ACL check, shows in
    /// whoAmI, and a wrong super password is accepted as a plain digest id without privilege.
    pub fn acl_super(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.auth(&mut a, "digest", b"alice:pw1");
        ctx.call(&mut a, create_acl("/sp", Some(b"s"), acl(31, "digest", ALICE), 0));
        ctx.call(&mut a, create_acl("/sp/c", Some(b""), acl(0x1f, "digest", ALICE), 0));
        let mut w = ctx.connect("w", LONG);
        ctx.auth(&mut w, "digest", b"super:wrong");
        ctx.call(&mut w, Request::WhoAmI);
        ctx.call(&mut w, get_data("/sp", false));
        let mut s = ctx.connect("s", LONG);
        ctx.auth(&mut s, "digest", b"super:secret");
        ctx.call(&mut s, Request::WhoAmI);
        ctx.call(&mut s, get_data("/sp", false));
        ctx.call(&mut s, get_acl("/sp"));
        ctx.call(&mut s, set_data("/sp", b"t", -1));
        ctx.call(&mut s, create("/sp/new", b"", CreateMode::Persistent));
        ctx.call(&mut s, delete("/sp/c", -1));
        ctx.call(&mut s, set_acl("/sp", open_acl(), -1));
        ctx.call(&mut w, get_data("/sp", false));
    }

    /// Pins: addauth with an unknown scheme, a digest without a colon, the ip and world schemes
    /// through addauth: the auth reply, the close (or not) that follows, what whoAmI says after.
    pub fn auth_failures(ctx: &mut Ctx) {
        let cases: [(&str, &[u8]); 7] = [
            ("nosuch", b"x"),
            ("digest", b"nocolon"),
            ("digest", b""),
            ("digest", b":"),
            ("ip", b"127.0.0.1"),
            ("world", b"anyone"),
            ("super", b"x"),
        ];
        for (i, (scheme, auth)) in cases.into_iter().enumerate() {
            let mut c = ctx.connect(&format!("c{i}"), LONG);
            ctx.auth(&mut c, scheme, auth);
            ctx.call(&mut c, Request::WhoAmI);
            ctx.closed_within(&mut c, Duration::from_millis(300));
        }
    }

    /// Pins: sync on existing, missing and invalid paths; getEphemerals with no prefix, "/", a
    /// prefix that is not a path boundary, a missing prefix, from a session with none; whoAmI before
    /// and after addauth.
    pub fn sync_whoami_ephemerals(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        for p in ["/", "/nothing", "bad"] {
            ctx.call(&mut a, Request::Sync(SyncRequest { path: p.into() }));
        }
        ctx.call(&mut a, create("/eph", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/eph/one", b"", CreateMode::Ephemeral));
        ctx.call(&mut a, create("/eph/two", b"", CreateMode::Ephemeral));
        ctx.call(&mut a, create("/ephx", b"", CreateMode::Ephemeral));
        ctx.call(&mut a, create("/other", b"", CreateMode::Ephemeral));
        ctx.call(&mut b, create("/eph/b", b"", CreateMode::Ephemeral));
        for prefix in ["", "/", "/eph", "/eph/", "/eph/o", "/none", "eph"] {
            ctx.call(&mut a, Request::GetEphemerals(GetEphemeralsRequest { prefix_path: prefix.into() }));
        }
        let mut c = ctx.connect("c", LONG);
        ctx.call(&mut c, Request::GetEphemerals(GetEphemeralsRequest { prefix_path: "/".into() }));
        ctx.call(&mut c, Request::WhoAmI);
        ctx.auth(&mut c, "digest", b"alice:pw1");
        ctx.call(&mut c, Request::WhoAmI);
        ctx.auth(&mut c, "digest", b"alice:pw1");
        ctx.call(&mut c, Request::WhoAmI);
    }

    /// Pins: PathUtils rules, checked for each op that takes a path, with the path sent as raw bytes
    /// (the server must validate, and reads may answer differently from writes).
    pub fn invalid_paths(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let paths: Vec<Vec<u8>> = [
            "",
            "a",
            "a/b",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/a/./b",
            "/a/../b",
            "/a.",
            "/.a",
            "/a..b",
            "/...",
            "/a\0b",
            "/a\u{1}",
            "/a\u{1f}",
            "/a\u{7f}",
            "/a\u{80}",
            "/a\u{9f}",
            "/a\u{a0}",
            "/a\u{d7ff}",
            "/a\u{e000}",
            "/a\u{f8ff}",
            "/a\u{f900}",
            "/a\u{ffef}",
            "/a\u{fff0}",
            "/a\u{fffd}",
            "/a\u{ffff}",
            "/a\u{1f600}",
            "/zookeeper",
            "/",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([b"/a\xff".to_vec(), b"/a\xed\xa0\x80".to_vec(), b"/a\xc0\xaf".to_vec()])
        .collect();
        for p in &paths {
            let shown = format!("{:?}", String::from_utf8_lossy(p));
            let ops: [(i32, &str); 10] = [
                (1, "create"),
                (3, "exists"),
                (4, "getData"),
                (5, "setData"),
                (6, "getACL"),
                (12, "getChildren2"),
                (9, "sync"),
                (106, "addWatch"),
                (104, "getAllChildrenNumber"),
                (2, "delete"),
            ];
            for (op, name) in ops {
                // sync echoes its path. Java re-encodes a string with characters beyond U+FFFF as
                // CESU-8 and collapses some malformed UTF-8 differently; zkrs echoes standard UTF-8
                // (a deliberate difference, noted in ARCHITECTURE.md), so those echoes are not compared.
                let java_only_string =
                    std::str::from_utf8(p).map_or(true, |s| s.chars().any(|c| c as u32 > 0xffff));
                if op == 9 && java_only_string {
                    continue;
                }
                let xid = a.next_xid();
                let payload = raw(xid, op, |o| {
                    put_bytes(o, p);
                    match op {
                        1 => {
                            put_bytes(o, b"d");
                            open_acl().write(o);
                            0i32.write(o);
                        }
                        3 | 4 | 12 => false.write(o),
                        5 => {
                            put_bytes(o, b"d");
                            (-1i32).write(o);
                        }
                        106 => 0i32.write(o),
                        2 => (-1i32).write(o),
                        _ => {}
                    }
                });
                if ctx.call_raw(&mut a, &format!("{name} {shown}"), xid, op, &payload).is_none() {
                    return;
                }
            }
        }
        ctx.call(&mut a, get_children2("/", false));
    }

    /// Pins: an unknown opcode (UNIMPLEMENTED? close?), check outside multi, deleteContainer and
    /// createSession/notification/error opcodes from a client, reconfig while disabled, SASL with a
    /// garbage token, and a ping's reply header. After each, a second request shows whether the
    /// connection is still served.
    pub fn unknown_and_misplaced_ops(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/uo", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_container("/uo/c"));
        ctx.call(&mut a, create_container("/uo/c2"));
        ctx.call(&mut a, create_container("/uo/c3"));
        ctx.call(&mut a, create("/uo/c3/k", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_acl("/uo/p", Some(b""), acl(perms::READ, "world", "anyone"), 0));
        let cases: Vec<(&str, i32, Request)> = vec![
            ("op99", 99, Request::Ping),
            ("op-99", -99, Request::Ping),
            ("notification", 0, Request::Ping),
            ("createSession", -10, Request::Ping),
            ("error", -1, Request::Ping),
            ("op10", 10, Request::Ping),
            // A passing check outside a multi: Apache uses a zxid and never answers (its reply
            // serialization fails on a null stat); zkrs answers with the node's stat, which
            // zkrs_behaviour.rs pins. Only the failing form is compared here.
            ("checkBad", 13, check("/uo", 5)),
            ("deleteContainer-nonempty", 20, delete("/uo", -1)),
            ("deleteContainer", 20, delete("/uo/c", -1)),
            (
                "reconfig",
                16,
                Request::Reconfig(ReconfigRequest {
                    joining_servers: None,
                    leaving_servers: None,
                    new_members: None,
                    cur_config_id: -1,
                }),
            ),
            ("sasl", 102, Request::Sasl(GetSaslRequest { token: Bytes::from_static(b"junk") })),
            ("ping", 11, Request::Ping),
            ("getData-as-op", 4, get_data("/uo", false)),
        ];
        for (name, op, req) in cases {
            let mut c = ctx.connect(name, LONG);
            let xid = c.next_xid();
            // Apache never answers a check sent outside a multi; do not wait long for it.
            ctx.call_as_within(&mut c, xid, op, &req, Duration::from_secs(2));
            ctx.call(&mut c, exists("/uo", false));
        }
        // Apache reads deleteContainer's path as the raw bytes of the whole request buffer (its
        // own reaper builds it that way), so from a client, whatever the body, it is always
        // BADARGUMENTS (and an ErrorTxn); a bare UTF-8 path body shows that.
        for path in ["/uo/c2", "/uo/c3", "/uo/p", "/uo/none", "uo", "/uo/c2"] {
            let mut c = ctx.connect(&format!("deleteContainer-raw {path}"), LONG);
            let payload = raw(1, 20, |o| o.extend_from_slice(path.as_bytes()));
            ctx.call_raw(&mut c, &format!("deleteContainer raw {path:?}"), 1, 20, &payload);
            ctx.call(&mut c, exists("/uo", false));
        }
        // A ping under a normal xid, and a normal request under the ping xid.
        let mut p = ctx.connect("p", LONG);
        ctx.call_as(&mut p, 77, 11, &Request::Ping);
        ctx.call_as(&mut p, xid::PING, 3, &exists("/uo", false));
        ctx.call_as(&mut p, xid::AUTH, 3, &exists("/uo", false));
        ctx.call(&mut a, get_children2("/uo", false));
    }

    /// Pins: what happens on a request frame whose body is truncated, a frame longer than
    /// jute.maxbuffer, a negative length, an empty frame, a frame with trailing bytes after the
    /// record, and a frame with only a partial header. Each on its own session; a follow-up request
    /// shows whether the connection is still served.
    pub fn malformed_frames(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/mf", b"d", CreateMode::Persistent));

        let mut c = ctx.connect("truncated", LONG);
        let payload = raw(1, 4, |o| put_bytes(o, b"/mf"));
        ctx.call_raw(&mut c, "getData without watch byte", 1, 4, &payload);
        ctx.closed_within(&mut c, Duration::from_millis(500));

        let mut c = ctx.connect("truncated-write", LONG);
        let payload = raw(1, 1, |o| put_bytes(o, b"/mf/t"));
        ctx.call_raw(&mut c, "create with only a path", 1, 1, &payload);
        ctx.closed_within(&mut c, Duration::from_millis(500));

        let mut c = ctx.connect("badlen", LONG);
        let payload = raw(1, 4, |o| {
            (1000i32).write(o);
            o.extend_from_slice(b"/mf");
        });
        ctx.call_raw(&mut c, "getData path length past the end", 1, 4, &payload);
        ctx.closed_within(&mut c, Duration::from_millis(500));

        let mut c = ctx.connect("trailing", LONG);
        let payload = raw(1, 4, |o| {
            put_bytes(o, b"/mf");
            false.write(o);
            o.extend_from_slice(b"extra bytes");
        });
        ctx.call_raw(&mut c, "getData with trailing bytes", 1, 4, &payload);
        ctx.call(&mut c, exists("/mf", false));

        let mut c = ctx.connect("shortheader", LONG);
        ctx.call_raw(&mut c, "frame of 3 bytes", 1, 4, &[0, 0, 1]);
        ctx.closed_within(&mut c, Duration::from_millis(500));

        let mut c = ctx.connect("empty", LONG);
        ctx.call_raw(&mut c, "frame of 0 bytes", 1, 4, &[]);
        ctx.closed_within(&mut c, Duration::from_millis(500));

        let mut c = ctx.connect("toolong", LONG);
        c.write_raw(&0x0010_0000u32.to_be_bytes());
        c.write_raw(&[0u8; 64]);
        ctx.note("toolong: sent length 0x100000 (jute.maxbuffer + 1)");
        ctx.expect_closed(&mut c);

        let mut c = ctx.connect("maxlen", LONG);
        // Exactly jute.maxbuffer: allowed by the length check; the body is a setData.
        let data = vec![b'x'; 0xfffff - 8 - 4 - 3 - 4 - 4];
        let payload = raw(1, 5, |o| {
            put_bytes(o, b"/mf");
            put_bytes(o, &data);
            (-1i32).write(o);
        });
        ctx.note(format!("maxlen: payload {} bytes", payload.len()));
        ctx.call_raw(&mut c, "setData of exactly jute.maxbuffer", 1, 5, &payload);
        ctx.closed_within(&mut c, Duration::from_millis(500));

        let mut c = ctx.connect("neglen", LONG);
        c.write_raw(&(-5i32).to_be_bytes());
        ctx.note("neglen: sent length -5");
        ctx.expect_closed(&mut c);

        ctx.call(&mut a, get_data("/mf", false));
    }

    /// Pins: the handshake: garbage, a too-short body, a negative timeout, a huge password length,
    /// a protocol version other than 0, the old handshake without the readOnly byte (reply without
    /// it), readOnly=true on a read-write server, and a request before any handshake.
    pub fn malformed_handshakes(ctx: &mut Ctx) {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("garbage", b"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20\x21\x22\x23\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d".to_vec()),
            ("short", vec![0, 0, 0, 0, 0, 0, 0]),
            ("empty", vec![]),
            ("hugepasswd", {
                let mut o = Vec::new();
                0i32.write(&mut o);
                0i64.write(&mut o);
                LONG.write(&mut o);
                0i64.write(&mut o);
                (100_000i32).write(&mut o);
                o.extend_from_slice(&[0; 16]);
                o
            }),
            ("request-first", raw(1, 3, |o| {
                put_bytes(o, b"/");
                false.write(o);
            })),
        ];
        for (name, bytes) in cases {
            let mut c = support::transcript::Conn::open(name, ctx.addr());
            c.write_frame(&bytes);
            ctx.read_handshake(&mut c);
            ctx.closed_within(&mut c, Duration::from_millis(500));
        }
        let base = ConnectRequest { time_out: LONG, read_only: Some(false), ..Default::default() };
        let variants: Vec<(&str, ConnectRequest)> = vec![
            ("old-style", ConnectRequest { read_only: None, ..base.clone() }),
            ("readonly-true", ConnectRequest { read_only: Some(true), ..base.clone() }),
            ("protocol-7", ConnectRequest { protocol_version: 7, ..base.clone() }),
            ("negative-timeout", ConnectRequest { time_out: -1, ..base.clone() }),
            ("unknown-session", ConnectRequest { session_id: 0x1234_5678, ..base.clone() }),
            (
                "unknown-session-passwd",
                ConnectRequest {
                    session_id: 0x1234_5678,
                    passwd: Bytes::from_static(&[7; 16]),
                    ..base.clone()
                },
            ),
            ("lastzxid-ahead", ConnectRequest { last_zxid_seen: 1000, ..base.clone() }),
            ("passwd-on-new", ConnectRequest { passwd: Bytes::from_static(&[9; 16]), ..base }),
        ];
        for (name, req) in variants {
            let mut c = ctx.handshake(name, &req);
            if !c.closed && c.session_id != 0 {
                ctx.call(&mut c, exists("/", false));
            }
        }
    }

    /// Pins: one-shot data, exist and child watches: which ops fire which events (create, delete,
    /// setData, child add/remove; setACL none), that each fires once, that a watch set by exists on
    /// a missing node fires on create, that getData on a missing node leaves no watch, that a data
    /// and a child watch on a deleted node give one NodeDeleted, and event header zxids.
    pub fn watches_one_shot(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/w", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/w/x", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/w/y", b"", CreateMode::Persistent));
        ctx.call(&mut b, exists("/w", true));
        ctx.call(&mut b, get_data("/w/x", true));
        ctx.call(&mut b, get_children("/w", true));
        ctx.call(&mut b, exists("/w/new", true));
        ctx.call(&mut b, get_data("/w/nodata", true));
        ctx.call(&mut b, get_children("/w/nokids", true));
        ctx.call(&mut b, get_data("/w/y", true));
        ctx.call(&mut b, get_children2("/w/y", true));

        ctx.call(&mut a, set_data("/w", b"1", -1));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, set_data("/w", b"2", -1));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, create("/w/new", b"", CreateMode::Persistent));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, create("/w/nodata", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/w/nokids", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/w/nokids/k", b"", CreateMode::Persistent));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, set_acl("/w/x", open_acl(), -1));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, set_data("/w/x", b"", -1));
        ctx.call(&mut b, exists("/", false));
        // Data and child watch on /w/y: one NodeDeleted.
        ctx.call(&mut a, delete("/w/y", -1));
        ctx.call(&mut b, exists("/", false));
        // Re-arm, then delete: NodeDeleted on the data watch, NodeChildrenChanged on the parent.
        ctx.call(&mut b, exists("/w/x", true));
        ctx.call(&mut b, get_children("/w", true));
        ctx.call(&mut a, delete("/w/x", -1));
        ctx.call(&mut b, exists("/", false));
        // The watcher's own write fires its own watch.
        ctx.call(&mut b, get_data("/w", true));
        ctx.call(&mut b, set_data("/w", b"self", -1));
        ctx.call(&mut b, exists("/", false));
        // Same path watched twice by the same session: one event.
        ctx.call(&mut b, get_data("/w", true));
        ctx.call(&mut b, exists("/w", true));
        ctx.call(&mut a, set_data("/w", b"3", -1));
        ctx.call(&mut b, exists("/", false));
        // A watch on a node whose setData fails (bad version) does not fire.
        ctx.call(&mut b, get_data("/w", true));
        ctx.call(&mut a, set_data("/w", b"4", 100));
        ctx.call(&mut b, exists("/", false));
        ctx.no_events(&mut b, QUIET);
    }

    /// Pins: addWatch PERSISTENT (data and child events on the node, stays after firing, set on a
    /// missing node) and PERSISTENT_RECURSIVE (events for every descendant, never
    /// NodeChildrenChanged); a persistent plus a one-shot watch on the same path; addWatch with a
    /// bad mode; persistent watch on "/".
    pub fn watches_persistent(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut b, add_watch("/pw", AddWatchMode::Persistent));
        ctx.call(&mut b, add_watch("/pr", AddWatchMode::PersistentRecursive));
        ctx.call(&mut b, Request::AddWatch(AddWatchRequest { path: "/bad".into(), mode: 2 }));
        ctx.call(&mut b, Request::AddWatch(AddWatchRequest { path: "/bad".into(), mode: -1 }));
        let steps: Vec<Request> = vec![
            create("/pw", b"", CreateMode::Persistent),
            create("/pw/c", b"", CreateMode::Persistent),
            set_data("/pw", b"1", -1),
            set_data("/pw/c", b"1", -1),
            create("/pw/c/g", b"", CreateMode::Persistent),
            delete("/pw/c/g", -1),
            delete("/pw/c", -1),
            delete("/pw", -1),
            create("/pw", b"", CreateMode::Persistent),
            create("/pr", b"", CreateMode::Persistent),
            create("/pr/a", b"", CreateMode::Persistent),
            create("/pr/a/b", b"", CreateMode::Persistent),
            set_data("/pr/a/b", b"1", -1),
            set_acl("/pr/a/b", open_acl(), -1),
            delete("/pr/a/b", -1),
            create("/prx", b"", CreateMode::Persistent),
            create("/pr/e", b"", CreateMode::Ephemeral),
            delete("/pr/e", -1),
        ];
        for s in steps {
            ctx.call(&mut a, s);
            ctx.call(&mut b, exists("/", false));
        }
        // Persistent and one-shot on the same path.
        ctx.call(&mut b, get_data("/pw", true));
        ctx.call(&mut b, get_children("/pw", true));
        ctx.call(&mut a, set_data("/pw", b"2", -1));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, create("/pw/k", b"", CreateMode::Persistent));
        ctx.call(&mut b, exists("/", false));
        // Recursive watch overlapping a persistent one: /pw under a recursive watch on "/".
        ctx.call(&mut b, add_watch("/", AddWatchMode::PersistentRecursive));
        ctx.call(&mut a, set_data("/pw", b"3", -1));
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, create("/top", b"", CreateMode::Persistent));
        ctx.call(&mut b, exists("/", false));
        // A multi fires each op's events.
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/pr/m1", b"", CreateMode::Persistent),
                set_data("/pr/m1", b"x", -1),
                delete("/pr/m1", -1),
            ]),
        );
        ctx.call(&mut b, exists("/", false));
        // Removing the persistent watch; it no longer fires.
        ctx.call(&mut b, remove_watches("/", WatcherType::PersistentRecursive.code()));
        ctx.call(&mut b, remove_watches("/pw", WatcherType::Persistent.code()));
        ctx.call(&mut a, set_data("/pw", b"4", -1));
        ctx.call(&mut b, exists("/", false));
        ctx.no_events(&mut b, QUIET);
    }

    /// Pins: checkWatches and removeWatches for each watcher type (Children, Data, Any, Persistent,
    /// PersistentRecursive, an invalid type), NOWATCHER when none, on missing paths, exist watches
    /// counted as data watches, and whether the server sends any event on removal.
    pub fn watches_remove_check(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/rw", b"", CreateMode::Persistent));
        ctx.call(&mut b, get_data("/rw", true));
        for t in [1, 2, 3, 4, 5, 9] {
            ctx.call(&mut b, check_watches("/rw", t));
        }
        ctx.call(&mut b, remove_watches("/rw", 1));
        ctx.call(&mut b, remove_watches("/rw", 2));
        ctx.call(&mut b, check_watches("/rw", 2));
        ctx.call(&mut b, remove_watches("/rw", 2));
        ctx.call(&mut b, get_children("/rw", true));
        ctx.call(&mut b, get_data("/rw", true));
        ctx.call(&mut b, remove_watches("/rw", 3));
        ctx.call(&mut b, check_watches("/rw", 3));
        ctx.call(&mut b, remove_watches("/rw", 3));
        ctx.call(&mut b, exists("/rw/missing", true));
        ctx.call(&mut b, check_watches("/rw/missing", 2));
        ctx.call(&mut b, check_watches("/rw/missing", 1));
        ctx.call(&mut b, remove_watches("/rw/missing", 2));
        ctx.call(&mut b, remove_watches("/rw/missing", 2));
        ctx.call(&mut b, add_watch("/rw", AddWatchMode::Persistent));
        ctx.call(&mut b, add_watch("/rw2", AddWatchMode::PersistentRecursive));
        for t in [1, 2, 3, 4, 5] {
            ctx.call(&mut b, check_watches("/rw", t));
            ctx.call(&mut b, check_watches("/rw2", t));
        }
        ctx.call(&mut b, remove_watches("/rw", 1));
        ctx.call(&mut b, check_watches("/rw", 4));
        ctx.call(&mut b, remove_watches("/rw", 4));
        ctx.call(&mut b, remove_watches("/rw2", 3));
        ctx.call(&mut b, check_watches("/rw2", 5));
        ctx.call(&mut b, remove_watches("/rw", 9));
        ctx.call(&mut b, remove_watches("bad", 2));
        // Another session's watch is not ours to remove.
        ctx.call(&mut a, get_data("/rw", true));
        ctx.call(&mut b, check_watches("/rw", 2));
        ctx.call(&mut b, remove_watches("/rw", 2));
        ctx.call(&mut b, set_data("/rw", b"x", -1));
        ctx.call(&mut a, exists("/", false));
        ctx.no_events(&mut b, QUIET);
    }

    /// Pins: setWatches on a new connection of the same session, against relativeZxid: a data watch
    /// on a changed / unchanged / deleted / never-existing node, an exist watch on a created / still
    /// missing / existing node, a child watch on a node with new / no new children / deleted; then
    /// that the re-registered watches fire; and the setWatches reply (xid -8) vs its events.
    pub fn watches_set_watches(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/sw", b"", CreateMode::Persistent));
        for n in ["same", "chg", "gone", "kids", "quiet", "exists"] {
            ctx.call(&mut a, create(&format!("/sw/{n}"), b"", CreateMode::Persistent));
        }
        let rel = ctx.last_zxid(&mut b);
        let info = ctx.reconnect_info(&b);
        drop(b);
        ctx.call(&mut a, set_data("/sw/chg", b"1", -1));
        ctx.call(&mut a, delete("/sw/gone", -1));
        ctx.call(&mut a, create("/sw/kids/k", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/sw/born", b"", CreateMode::Persistent));
        let mut b2 = ctx.handshake("b2", &ConnectRequest { last_zxid_seen: rel, ..info.clone() });
        let sw = SetWatches {
            relative_zxid: rel,
            data_watches: ["/sw/same", "/sw/chg", "/sw/gone", "/sw/never"].map(String::from).to_vec(),
            exist_watches: ["/sw/born", "/sw/absent", "/sw/exists"].map(String::from).to_vec(),
            child_watches: ["/sw/kids", "/sw/quiet", "/sw/gone", "/sw/nokids"].map(String::from).to_vec(),
        };
        ctx.call_as(&mut b2, xid::SET_WATCHES, OpCode::SetWatches.code(), &Request::SetWatches(sw));
        ctx.call(&mut b2, exists("/", false));
        for t in [1, 2] {
            for p in ["/sw/same", "/sw/absent", "/sw/quiet", "/sw/never", "/sw/exists", "/sw/chg"] {
                ctx.call(&mut b2, check_watches(p, t));
            }
        }
        ctx.call(&mut a, set_data("/sw/same", b"x", -1));
        ctx.call(&mut a, create("/sw/absent", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/sw/quiet/q", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/sw/never", b"", CreateMode::Persistent));
        ctx.call(&mut a, set_data("/sw/exists", b"x", -1));
        ctx.call(&mut b2, exists("/", false));
        // relativeZxid ahead of the server and a setWatches under an ordinary xid.
        let sw = SetWatches {
            relative_zxid: 1_000_000,
            data_watches: vec!["/sw/same".into()],
            exist_watches: vec![],
            child_watches: vec![],
        };
        ctx.call(&mut b2, Request::SetWatches(sw));
        ctx.call(&mut b2, exists("/", false));
        ctx.call(&mut a, set_data("/sw/same", b"y", -1));
        ctx.call(&mut b2, exists("/", false));
        ctx.no_events(&mut b2, QUIET);
    }

    /// Pins: setWatches2 with persistent and persistent-recursive lists: those are re-added with no
    /// catch-up event, then fire as usual.
    pub fn watches_set_watches2(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/s2", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/s2/p", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/s2/r", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/s2/d", b"", CreateMode::Persistent));
        let rel = ctx.last_zxid(&mut a);
        let info = ctx.reconnect_info(&b);
        drop(b);
        ctx.call(&mut a, set_data("/s2/p", b"1", -1));
        ctx.call(&mut a, create("/s2/r/x", b"", CreateMode::Persistent));
        ctx.call(&mut a, set_data("/s2/d", b"1", -1));
        let mut b2 = ctx.handshake("b2", &ConnectRequest { last_zxid_seen: rel, ..info.clone() });
        let sw = SetWatches2 {
            relative_zxid: rel,
            data_watches: vec!["/s2/d".into()],
            exist_watches: vec!["/s2/e".into()],
            child_watches: vec!["/s2/r".into()],
            persistent_watches: vec!["/s2/p".into(), "/s2/missing".into()],
            persistent_recursive_watches: vec!["/s2/r".into()],
        };
        ctx.call_as(&mut b2, xid::SET_WATCHES, OpCode::SetWatches2.code(), &Request::SetWatches2(sw));
        ctx.call(&mut b2, exists("/", false));
        for t in [1, 2, 4, 5] {
            for p in ["/s2/p", "/s2/r", "/s2/missing", "/s2/e"] {
                ctx.call(&mut b2, check_watches(p, t));
            }
        }
        ctx.call(&mut a, set_data("/s2/p", b"2", -1));
        ctx.call(&mut a, set_data("/s2/r/x", b"2", -1));
        ctx.call(&mut a, create("/s2/missing", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/s2/e", b"", CreateMode::Persistent));
        ctx.call(&mut b2, exists("/", false));
        ctx.call(&mut a, set_data("/s2/p", b"3", -1));
        ctx.call(&mut b2, exists("/", false));
    }

    /// Pins: events go only to watchers with READ on the node (checked when the event fires,
    /// against the node's ACL then; for NodeChildrenChanged the parent's): a data watch set while
    /// readable then the ACL tightened, an exist watch on a node created unreadable, a child watch
    /// on a readable parent when an unreadable child comes and goes, a recursive watch over
    /// readable and unreadable descendants, and exists (which reads no ACL) setting a watch on an
    /// unreadable node. Each watcher is its own session so that no two watches share a path.
    pub fn watches_need_read(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.auth(&mut a, "digest", b"alice:pw1");
        let alice_only = acl(perms::ALL, "digest", ALICE);
        ctx.call(&mut a, create("/nr", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/nr/d", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/nr/x", b"", CreateMode::Persistent));
        let mut data = ctx.connect("data", LONG);
        ctx.call(&mut data, get_data("/nr/d", true));
        let mut exist = ctx.connect("exist", LONG);
        ctx.call(&mut exist, exists("/nr/e", true));
        let mut kids = ctx.connect("kids", LONG);
        ctx.call(&mut kids, get_children("/nr", true));
        let mut rec = ctx.connect("rec", LONG);
        ctx.call(&mut rec, add_watch("/nr", AddWatchMode::PersistentRecursive));
        let mut del = ctx.connect("del", LONG);
        ctx.call(&mut del, exists("/nr/x", true));
        let mut watchers = [data, exist, kids, rec, del];

        let steps: Vec<Request> = vec![
            set_acl("/nr/d", alice_only.clone(), -1),
            set_data("/nr/d", b"x", -1),
            create_acl("/nr/e", Some(b""), alice_only.clone(), 0),
            create_acl("/nr/e/f", Some(b""), alice_only.clone(), 0),
            set_data("/nr/e/f", b"x", -1),
            delete("/nr/e/f", -1),
            create("/nr/open", b"", CreateMode::Persistent),
            set_acl("/nr/x", alice_only.clone(), -1),
            delete("/nr/x", -1),
        ];
        for step in steps {
            ctx.call(&mut a, step);
            for w in watchers.iter_mut() {
                ctx.call(w, exists("/", false));
            }
        }
        // exists reads no ACL, so it leaves a watch on a node its caller cannot read.
        let data = &mut watchers[0];
        ctx.call(data, exists("/nr/d", true));
        ctx.call(data, get_data("/nr/d", true));
        ctx.call(data, get_children("/nr/d", true));
        ctx.call(data, check_watches("/nr/d", 3));
        ctx.call(data, add_watch("/nr/d", AddWatchMode::Persistent));
        ctx.call(&mut a, delete("/nr/d", -1));
        ctx.call(data, exists("/", false));
        // After addauth the same watcher gets events again.
        ctx.auth(data, "digest", b"alice:pw1");
        ctx.call(data, exists("/nr/e", true));
        ctx.call(&mut a, set_data("/nr/e", b"y", -1));
        ctx.call(data, exists("/", false));
        for w in watchers.iter_mut() {
            ctx.no_events(w, Duration::from_millis(100));
        }
    }

    /// Pins Apache's watch-mode bookkeeping, one mode per (session, path): a standard watch set
    /// after a persistent one on the same path turns it back into a one-shot watch, and a
    /// standard child watch followed by a recursive watch on the same path loses its
    /// NodeChildrenChanged (recursive watches never get that event).
    pub fn watches_mode_overlap(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        let mut c = ctx.connect("c", LONG);
        ctx.call(&mut a, create("/mo", b"", CreateMode::Persistent));
        ctx.call(&mut b, add_watch("/mo", AddWatchMode::Persistent));
        ctx.call(&mut b, get_data("/mo", true));
        ctx.call(&mut c, get_children("/mo", true));
        ctx.call(&mut c, add_watch("/mo", AddWatchMode::PersistentRecursive));
        for step in [
            set_data("/mo", b"1", -1),
            set_data("/mo", b"2", -1),
            create("/mo/k", b"", CreateMode::Persistent),
            create("/mo/k2", b"", CreateMode::Persistent),
        ] {
            ctx.call(&mut a, step);
            ctx.call(&mut b, exists("/", false));
            ctx.call(&mut c, exists("/", false));
        }
        ctx.call(&mut b, check_watches("/mo", 1));
        ctx.call(&mut b, check_watches("/mo", 2));
        ctx.call(&mut c, check_watches("/mo", 1));
        ctx.call(&mut c, check_watches("/mo", 2));
    }

    /// Pins: the order of events and replies on one connection: a session's own write firing its
    /// own watch (event before or after the write's reply), pipelined requests with events in
    /// between, and several events from one txn.
    pub fn watches_event_order(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/eo", b"", CreateMode::Persistent));
        ctx.call(&mut a, get_data("/eo", true));
        ctx.call(&mut a, get_children("/eo", true));
        ctx.call(&mut a, exists("/eo/k", true));
        ctx.pipeline(
            &mut a,
            vec![
                set_data("/eo", b"1", -1),
                get_data("/eo", true),
                create("/eo/k", b"", CreateMode::Persistent),
                set_data("/eo", b"2", -1),
                exists("/eo/k", true),
                delete("/eo/k", -1),
                get_children2("/eo", false),
            ],
        );
        ctx.no_events(&mut a, QUIET);
    }

    /// Pins: multi results per op (create, create2, createTTL, createContainer, setData, check,
    /// delete), zxid use on success and failure (ops before the failure report 0, the failing one
    /// its code, later ones RUNTIMEINCONSISTENCY; nothing applied), an empty multi, NOAUTH and
    /// invalid paths inside multi, and the events a multi fires.
    pub fn multi_ops(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/m", b"", CreateMode::Persistent));
        ctx.call(&mut b, get_children("/m", true));
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/m/a", b"a", CreateMode::Persistent),
                create2("/m/b", b"b", 0),
                create_ttl("/m/t", 5, 100_000),
                create_container("/m/c"),
                create("/m/s-", b"", CreateMode::PersistentSequential),
                set_data("/m/a", b"a2", 0),
                check("/m/a", 1),
                delete("/m/b", 0),
                create("/m/e", b"", CreateMode::Ephemeral),
            ]),
        );
        ctx.call(&mut b, exists("/", false));
        ctx.call(&mut a, get_children2("/m", false));
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/m/x", b"", CreateMode::Persistent),
                set_data("/m/none", b"", -1),
                create("/m/y", b"", CreateMode::Persistent),
            ]),
        );
        ctx.call(&mut a, exists("/m/x", false));
        ctx.call(
            &mut a,
            Request::Multi(vec![check("/m/a", 1), check("/m/a", 0), delete("/m/a", -1), delete("/m/a", -1)]),
        );
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/m/z", b"", CreateMode::Persistent),
                create("bad", b"", CreateMode::Persistent),
            ]),
        );
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/m/z", b"", CreateMode::Persistent),
                create("/m/z", b"", CreateMode::Persistent),
            ]),
        );
        ctx.call(
            &mut a,
            Request::Multi(vec![
                create("/m/q", b"", CreateMode::Persistent),
                delete("/m/q", -1),
                create("/m/q", b"", CreateMode::Persistent),
                create("/m/q/r", b"", CreateMode::Persistent),
            ]),
        );
        ctx.call(&mut a, Request::Multi(vec![]));
        ctx.call(&mut a, Request::Multi(vec![check("/m/none", -1)]));
        ctx.call(&mut a, Request::Multi(vec![create_acl("/m/bad", Some(b""), vec![], 0)]));
        ctx.call(&mut a, Request::Multi(vec![create_acl("/m/f", Some(b""), open_acl(), 42)]));
        ctx.call(&mut a, create_acl("/m/locked", Some(b""), acl(perms::READ, "world", "anyone"), 0));
        ctx.call(
            &mut a,
            Request::Multi(vec![
                set_data("/m/a", b"", -1),
                set_data("/m/locked", b"", -1),
                delete("/m/q/r", -1),
            ]),
        );
        ctx.call(&mut a, get_children2("/m", false));
        ctx.call(&mut b, exists("/", false));
    }

    /// Pins: multiRead results (getData, getChildren), a failing op among them (no atomicity: later
    /// ops still answer), NOAUTH inside multiRead, an empty multiRead, watches not set by it.
    pub fn multi_read(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/mr", b"d", CreateMode::Persistent));
        ctx.call(&mut a, create("/mr/k", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_acl("/mr/locked", Some(b""), acl(perms::WRITE, "world", "anyone"), 0));
        ctx.call(
            &mut a,
            Request::MultiRead(vec![
                get_data("/mr", false),
                get_children("/mr", false),
                get_data("/mr/none", false),
                get_children("/mr/none", false),
                get_data("/mr/locked", false),
                get_children("/mr/locked", false),
                get_data("/mr/k", true),
            ]),
        );
        ctx.call(&mut a, Request::MultiRead(vec![]));
        ctx.call(&mut a, check_watches("/mr/k", 2));
    }

    /// Pins: malformed multis: a read op inside a write multi, a write op inside multiRead, a
    /// nested multi, an unknown op type, a multi missing its end marker. Each on its own session;
    /// a follow-up request shows whether the connection is still served.
    pub fn multi_malformed(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/mm", b"", CreateMode::Persistent));
        let header = |o: &mut Vec<u8>, op: i32| MultiHeader { op, done: false, err: -1 }.write(o);
        let end = |o: &mut Vec<u8>| MultiHeader { op: -1, done: true, err: -1 }.write(o);
        let cases: Vec<(&str, i32, Vec<u8>)> = vec![
            ("getData-in-multi", 14, {
                let mut o = Vec::new();
                header(&mut o, 1);
                create("/mm/a", b"", CreateMode::Persistent).encode(&mut o);
                header(&mut o, 4);
                get_data("/mm", false).encode(&mut o);
                end(&mut o);
                o
            }),
            ("create-in-multiRead", 22, {
                let mut o = Vec::new();
                header(&mut o, 4);
                get_data("/mm", false).encode(&mut o);
                header(&mut o, 1);
                create("/mm/b", b"", CreateMode::Persistent).encode(&mut o);
                end(&mut o);
                o
            }),
            ("nested-multi", 14, {
                let mut o = Vec::new();
                header(&mut o, 14);
                end(&mut o);
                end(&mut o);
                o
            }),
            ("unknown-op", 14, {
                let mut o = Vec::new();
                header(&mut o, 77);
                end(&mut o);
                o
            }),
            ("no-end-marker", 14, {
                let mut o = Vec::new();
                header(&mut o, 1);
                create("/mm/c", b"", CreateMode::Persistent).encode(&mut o);
                o
            }),
            ("setACL-in-multi", 14, {
                let mut o = Vec::new();
                header(&mut o, 7);
                set_acl("/mm", open_acl(), -1).encode(&mut o);
                end(&mut o);
                o
            }),
        ];
        for (name, op, body) in cases {
            let mut c = ctx.connect(name, LONG);
            let payload = raw(1, op, |o| o.extend_from_slice(&body));
            ctx.call_raw(&mut c, name, 1, op, &payload);
            ctx.call(&mut c, exists("/mm", false));
        }
        ctx.call(&mut a, get_children2("/mm", false));
    }

    /// Pins: closeSession: its reply and zxid, the connection close, its ephemerals deleted, the
    /// events other sessions' watches get (in order), requests pipelined after closeSession, and
    /// that the closed session cannot be resumed.
    pub fn session_close(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/cs", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/cs/e1", b"", CreateMode::Ephemeral));
        ctx.call(&mut a, create("/cs/e-", b"", CreateMode::EphemeralSequential));
        ctx.call(&mut a, create("/e-root", b"", CreateMode::Ephemeral));
        ctx.call(&mut b, exists("/cs/e1", true));
        ctx.call(&mut b, get_data("/cs/e-0000000001", true));
        ctx.call(&mut b, get_children("/cs", true));
        ctx.call(&mut b, get_children("/", true));
        let old = ctx.reconnect_info(&a);
        // Requests pipelined behind a closeSession are not compared: Apache answers them with
        // SESSIONEXPIRED or drops them depending on a race between its threads (zkrs answers reads
        // and drops writes).
        ctx.pipeline(&mut a, vec![Request::CloseSession]);
        ctx.expect_closed(&mut a);
        // One txn deletes all the session's ephemerals; Apache fires their events in hash-set
        // order, so they are compared as a set.
        ctx.sort_events = true;
        ctx.call(&mut b, exists("/", false));
        ctx.sort_events = false;
        ctx.call(&mut b, get_children2("/cs", false));
        let mut again = ctx.handshake("a-again", &old);
        if again.session_id != 0 {
            ctx.call(&mut again, exists("/", false));
        }
        ctx.call(&mut b, exists("/", false));
    }

    /// Pins: session expiry: a session that stops pinging loses its ephemerals, a watcher sees
    /// NodeDeleted with the closeSession zxid, the expired connection is closed, and reconnecting
    /// with the old id gets timeOut=0/sessionId=0 and a close.
    pub fn session_expiry(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", 800);
        let mut b = ctx.connect("b", 4000);
        ctx.call(&mut a, create("/ex", b"", CreateMode::Ephemeral));
        ctx.call(&mut b, exists("/ex", true));
        let old = ctx.reconnect_info(&a);
        ctx.events_pinging(&mut b, 1, EVENT_WAIT);
        ctx.closed_within(&mut a, Duration::from_secs(2));
        ctx.call(&mut b, exists("/ex", false));
        let _dead = ctx.handshake("a-again", &old);
    }

    /// Pins: resuming a session on a new connection with the right password (same id, ephemerals
    /// kept, the old connection closed), with a wrong password, with a short password, with
    /// lastZxidSeen ahead of the server (closed without an answer), and an old-style handshake.
    pub fn session_reconnect(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        ctx.call(&mut a, create("/rc", b"", CreateMode::Ephemeral));
        let last = ctx.last_zxid(&mut a);
        let info = ctx.reconnect_info(&a);
        let mut a2 = ctx.handshake("a2", &ConnectRequest { time_out: 20_000, last_zxid_seen: last, ..info });
        ctx.closed_within(&mut a, Duration::from_secs(1));
        ctx.call(&mut a2, Request::GetEphemerals(GetEphemeralsRequest { prefix_path: "/".into() }));
        ctx.call(&mut a2, exists("/rc", false));
        let mut wrong = ctx.reconnect_info(&a2);
        wrong.passwd = Bytes::from_static(&[1; 16]);
        ctx.handshake("wrong-passwd", &wrong);
        let mut short = ctx.reconnect_info(&a2);
        short.passwd = short.passwd.slice(0..8);
        ctx.handshake("short-passwd", &short);
        let mut ahead = ctx.reconnect_info(&a2);
        ahead.last_zxid_seen = last + 100;
        ctx.handshake("zxid-ahead", &ahead);
        let mut old_style = ctx.reconnect_info(&a2);
        old_style.read_only = None;
        let mut a3 = ctx.handshake("old-style", &old_style);
        ctx.call(&mut a3, exists("/rc", false));
        ctx.closed_within(&mut a2, Duration::from_secs(1));
        ctx.call(&mut a3, set_data("/rc", b"x", -1));
    }

    /// Pins: timeout negotiation with tickTime=200: below 2*tick, above 20*tick, in between, 0 and
    /// negative; a resumed session renegotiates.
    pub fn session_timeout_clamp(ctx: &mut Ctx) {
        for (i, t) in [1, 399, 400, 401, 1234, 4000, 4001, 100_000, 0, -5].into_iter().enumerate() {
            let req = ConnectRequest { time_out: t, read_only: Some(false), ..Default::default() };
            let mut c = ctx.handshake(&format!("t{i}({t})"), &req);
            if c.session_id != 0 {
                ctx.call(&mut c, Request::CloseSession);
            }
        }
        let a = ctx.connect("a", 1000);
        let info = ctx.reconnect_info(&a);
        ctx.handshake("a2", &ConnectRequest { time_out: 100_000, ..info });
    }

    /// Pins: containers: an empty container that never had a child stays; once its last child is
    /// deleted it is reaped (deleteContainer txn, watchers see NodeDeleted and the parent's
    /// NodeChildrenChanged); a container with a child stays.
    pub fn containers_reaped(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/ct", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_container("/ct/c"));
        ctx.call(&mut a, create_container("/ct/never"));
        ctx.call(&mut a, create_container("/ct/kept"));
        ctx.call(&mut a, create("/ct/kept/k", b"", CreateMode::Persistent));
        ctx.call(&mut a, create("/ct/c/k", b"", CreateMode::Persistent));
        // The container flag through a plain create, and createContainer with flag 0: are they
        // containers?
        ctx.call(&mut a, create("/ct/viacreate", b"", CreateMode::Container));
        ctx.call(&mut a, create("/ct/viacreate/k", b"", CreateMode::Persistent));
        ctx.call(
            &mut a,
            Request::CreateContainer(CreateRequest {
                path: "/ct/flag0".into(),
                data: None,
                acl: open_acl(),
                flags: 0,
            }),
        );
        ctx.call(&mut a, create("/ct/flag0/k", b"", CreateMode::Persistent));
        ctx.call(&mut b, exists("/ct/c", true));
        ctx.call(&mut b, get_children("/ct", true));
        ctx.call(&mut a, delete("/ct/c/k", -1));
        ctx.events_pinging(&mut b, 2, EVENT_WAIT);
        ctx.call(&mut a, delete("/ct/viacreate/k", -1));
        ctx.call(&mut a, delete("/ct/flag0/k", -1));
        std::thread::sleep(Duration::from_millis(2500));
        ctx.call(&mut b, get_children2("/ct", false));
        ctx.call(&mut b, exists("/ct/never", false));
    }

    /// Pins: TTL nodes: an empty TTL node past its TTL is reaped; one with a child is not; the
    /// reap is a txn and watchers see NodeDeleted.
    pub fn ttl_reaped(ctx: &mut Ctx) {
        let mut a = ctx.connect("a", LONG);
        let mut b = ctx.connect("b", LONG);
        ctx.call(&mut a, create("/tl", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_ttl("/tl/short", 5, 300));
        ctx.call(&mut a, create_ttl("/tl/parent", 5, 300));
        ctx.call(&mut a, create("/tl/parent/k", b"", CreateMode::Persistent));
        ctx.call(&mut a, create_ttl("/tl/long", 5, 600_000));
        ctx.call(&mut b, exists("/tl/short", true));
        ctx.events_pinging(&mut b, 1, EVENT_WAIT);
        std::thread::sleep(Duration::from_millis(1500));
        ctx.call(&mut b, get_children2("/tl", false));
    }
}
