//! ABI parity with Debian's libzookeeper_mt.so.2: the export table and the struct layouts.

mod support;

use std::collections::BTreeSet;
use std::mem::{offset_of, size_of};
use support::*;
use zkrs::abi::*;

fn exports(lib: &std::path::Path) -> BTreeSet<(String, String)> {
    let out = std::process::Command::new("objdump").arg("-T").arg(lib).output().expect("objdump");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // "addr g DF .text size Base name" for defined globals.
            (f.len() >= 6 && f[1] == "g" && f[3] != "*UND*").then(|| {
                let kind = if f[2] == "DO" {
                    format!("object {}", u64::from_str_radix(f[4], 16).unwrap_or(0))
                } else {
                    "function".to_owned()
                };
                (f[f.len() - 1].to_owned(), kind)
            })
        })
        .collect()
}

#[test]
fn exports_every_symbol_of_the_reference_library() {
    let reference = exports(std::path::Path::new(REFERENCE_LIB));
    assert_eq!(reference.len(), 200, "Debian's library exports 200 symbols");
    let ours = exports(&libzkrs());
    let missing: Vec<_> = reference.difference(&ours).collect();
    assert!(missing.is_empty(), "missing or different (kind/size): {missing:?}");
}

#[test]
fn soname_is_the_reference_soname() {
    let out = std::process::Command::new("readelf").arg("-d").arg(libzkrs()).output().expect("readelf");
    assert!(String::from_utf8_lossy(&out.stdout).contains("[libzookeeper_mt.so.2]"));
}

#[test]
fn struct_layouts_match_apache_header() {
    let exe = compile_c("layout.c", false);
    let out = std::process::Command::new(&exe).output().expect("run layout");
    let text = String::from_utf8_lossy(&out.stdout);
    let c: std::collections::HashMap<String, usize> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.rsplitn(2, ' ');
            let n = f.next()?.parse().ok()?;
            Some((f.next()?.to_owned(), n))
        })
        .collect();
    let ours: Vec<(&str, usize)> = vec![
        ("sizeof struct Stat", size_of::<Stat>()),
        ("offsetof struct Stat.czxid", offset_of!(Stat, czxid)),
        ("offsetof struct Stat.mzxid", offset_of!(Stat, mzxid)),
        ("offsetof struct Stat.ctime", offset_of!(Stat, ctime)),
        ("offsetof struct Stat.mtime", offset_of!(Stat, mtime)),
        ("offsetof struct Stat.version", offset_of!(Stat, version)),
        ("offsetof struct Stat.cversion", offset_of!(Stat, cversion)),
        ("offsetof struct Stat.aversion", offset_of!(Stat, aversion)),
        ("offsetof struct Stat.ephemeralOwner", offset_of!(Stat, ephemeralOwner)),
        ("offsetof struct Stat.dataLength", offset_of!(Stat, dataLength)),
        ("offsetof struct Stat.numChildren", offset_of!(Stat, numChildren)),
        ("offsetof struct Stat.pzxid", offset_of!(Stat, pzxid)),
        ("sizeof struct Id", size_of::<Id>()),
        ("offsetof struct Id.scheme", offset_of!(Id, scheme)),
        ("offsetof struct Id.id", offset_of!(Id, id)),
        ("sizeof struct ACL", size_of::<ACL>()),
        ("offsetof struct ACL.perms", offset_of!(ACL, perms)),
        ("offsetof struct ACL.id", offset_of!(ACL, id)),
        ("sizeof struct ACL_vector", size_of::<ACL_vector>()),
        ("offsetof struct ACL_vector.count", offset_of!(ACL_vector, count)),
        ("offsetof struct ACL_vector.data", offset_of!(ACL_vector, data)),
        ("sizeof struct String_vector", size_of::<String_vector>()),
        ("offsetof struct String_vector.count", offset_of!(String_vector, count)),
        ("offsetof struct String_vector.data", offset_of!(String_vector, data)),
        ("sizeof struct buffer", size_of::<buffer>()),
        ("offsetof struct buffer.len", offset_of!(buffer, len)),
        ("offsetof struct buffer.buff", offset_of!(buffer, buff)),
        ("sizeof struct ClientInfo", size_of::<ClientInfo>()),
        ("sizeof struct ClientInfo_vector", size_of::<ClientInfo_vector>()),
        ("sizeof struct Id_vector", size_of::<Id_vector>()),
        ("sizeof struct StatPersisted", size_of::<StatPersisted>()),
        ("sizeof clientid_t", size_of::<clientid_t>()),
        ("offsetof clientid_t.client_id", offset_of!(clientid_t, client_id)),
        ("offsetof clientid_t.passwd", offset_of!(clientid_t, passwd)),
        ("sizeof zoo_op_t", size_of::<zoo_op_t>()),
        ("offsetof zoo_op_t.type", offset_of!(zoo_op_t, type_)),
        ("offsetof zoo_op_t.create_op.path", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, path)),
        ("offsetof zoo_op_t.create_op.data", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, data)),
        ("offsetof zoo_op_t.create_op.datalen", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, datalen)),
        ("offsetof zoo_op_t.create_op.buf", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, buf)),
        ("offsetof zoo_op_t.create_op.buflen", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, buflen)),
        ("offsetof zoo_op_t.create_op.acl", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, acl)),
        ("offsetof zoo_op_t.create_op.flags", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, flags)),
        ("offsetof zoo_op_t.create_op.ttl", offset_of!(zoo_op_t, u) + offset_of!(zoo_create_op, ttl)),
        (
            "offsetof zoo_op_t.delete_op.version",
            offset_of!(zoo_op_t, u) + offset_of!(zoo_version_op, version),
        ),
        ("offsetof zoo_op_t.set_op.data", offset_of!(zoo_op_t, u) + offset_of!(zoo_set_op, data)),
        ("offsetof zoo_op_t.set_op.datalen", offset_of!(zoo_op_t, u) + offset_of!(zoo_set_op, datalen)),
        ("offsetof zoo_op_t.set_op.version", offset_of!(zoo_op_t, u) + offset_of!(zoo_set_op, version)),
        ("offsetof zoo_op_t.set_op.stat", offset_of!(zoo_op_t, u) + offset_of!(zoo_set_op, stat)),
        ("offsetof zoo_op_t.check_op.version", offset_of!(zoo_op_t, u) + offset_of!(zoo_version_op, version)),
        ("sizeof zoo_op_result_t", size_of::<zoo_op_result_t>()),
        ("offsetof zoo_op_result_t.err", offset_of!(zoo_op_result_t, err)),
        ("offsetof zoo_op_result_t.value", offset_of!(zoo_op_result_t, value)),
        ("offsetof zoo_op_result_t.valuelen", offset_of!(zoo_op_result_t, valuelen)),
        ("offsetof zoo_op_result_t.stat", offset_of!(zoo_op_result_t, stat)),
    ];
    assert_eq!(c.len(), ours.len(), "C printed {} entries: {text}", c.len());
    for (name, n) in ours {
        assert_eq!(c.get(name), Some(&n), "{name}");
    }
}
