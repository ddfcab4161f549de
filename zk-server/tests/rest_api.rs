//! The REST data API (`admin.restApi.enabled`, `/api/v1/storage/{path}`) against a running
//! zkrs-server: off unless enabled and read-only unless writable; the ACL matrix a wire client
//! sees (digest by HTTP Basic credentials, the caller's ip, the HTTPS client certificate's x509
//! id) is the one a REST caller sees; create, set and delete with their conflicts; writes made
//! here seen by a wire client and the reverse, on a follower of an ensemble too; bad input
//! answered 4xx with the server still serving.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;

use base64::Engine as _;
use std::net::SocketAddr;
use support::client::RawClient;
use support::http::{exchange, request, tls_config, tls_exchange, Answer};
use support::pki::Pki;
use support::*;
use zk_proto::{perms, Acl, ErrorCode, GetDataResponse, Id, Request};

const ADMIN: &str = "admin:adminpw";
const READER: &str = "reader:readpw";

/// A zkrs server with its AdminServer on a port of its own and `keys` added; the AdminServer's
/// address.
fn server(keys: &str) -> (ServerProc, SocketAddr) {
    let port = free_port();
    let s = start(
        Target::Zkrs,
        &format!("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n{keys}"),
    );
    (s, SocketAddr::from(([127, 0, 0, 1], port)))
}

const WRITABLE: &str = "admin.restApi.enabled=true\nadmin.restApi.writable=true\n";

fn basic(cred: &str) -> Vec<(&'static str, String)> {
    vec![("Authorization", format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(cred)))]
}

/// `method` on the storage URL of `path` (query included), as `cred` (user:password) or anonymous.
fn call(addr: SocketAddr, method: &str, path: &str, cred: Option<&str>, body: Option<&[u8]>) -> Answer {
    let headers = cred.map(basic).unwrap_or_default();
    exchange(addr, &request(method, &format!("/api/v1/storage{path}"), &headers, body))
}

fn digest_acl(user_password: &str, perms: i32) -> Acl {
    let id = zk_tree::acl::digest_id(user_password).expect("digest id");
    Acl { perms, id: Id { scheme: "digest".into(), id } }
}

fn create_with_acl(c: &mut RawClient, path: &str, data: &[u8], acl: Vec<Acl>) {
    assert_eq!(c.create_with_acl(path, data, acl).err(), ErrorCode::Ok, "create {path}");
}

fn wire_data(c: &mut RawClient, path: &str) -> (Vec<u8>, i32) {
    let r = c.get_data(path, false);
    assert_eq!(r.err(), ErrorCode::Ok, "getData {path}");
    let d: GetDataResponse = r.decode();
    (d.data.unwrap_or_default().to_vec(), d.stat.version)
}

fn assert_status(a: &Answer, status: u16, what: &str) {
    assert_eq!(a.status, status, "{what}: {}\n{}", a.head, a.text());
}

#[test]
fn off_by_default_and_read_only_unless_writable() {
    let (_off, addr) = server("");
    let a = call(addr, "GET", "/", None, None);
    assert_status(&a, 404, "the API is off by default");
    assert!(!a.text().contains("children"), "{}", a.text());
    assert_status(&exchange(addr, &request("GET", "/console", &[], None)), 404, "no console without the API");

    let (_ro, addr) = server("admin.restApi.enabled=true\n");
    let a = call(addr, "GET", "/?children=true", None, None);
    assert_status(&a, 200, "reads are served");
    assert!(a.json()["children"].as_array().unwrap().iter().any(|c| c == "zookeeper"), "{}", a.text());
    for method in ["POST", "PUT", "DELETE"] {
        let a = call(addr, method, "/x", None, Some(b"v"));
        assert_status(&a, 405, method);
        assert_eq!(a.header("allow").as_deref(), Some("get, head"), "{}", a.head);
        assert!(a.text().contains("admin.restApi.writable"), "{}", a.text());
    }
    assert_status(&call(addr, "HEAD", "/x", None, None), 404, "nothing was created");
    let console = exchange(addr, &request("GET", "/console", &[], None));
    assert_status(&console, 200, "the console comes with the API");
    assert!(console.text().contains("/console/console.js"), "{}", console.text());
}

#[test]
fn acl_matrix_is_the_wire_protocols() {
    let (s, addr) = server(WRITABLE);
    let mut owner = RawClient::connect(s.addr(), 30_000);
    create_with_acl(
        &mut owner,
        "/secured",
        b"v0",
        vec![digest_acl(ADMIN, perms::ALL), digest_acl(READER, perms::READ)],
    );

    // The wire protocol's answers for the three callers...
    let mut anonymous = RawClient::connect(s.addr(), 30_000);
    assert_eq!(anonymous.get_data("/secured", false).err(), ErrorCode::NoAuth);
    let mut reader = RawClient::connect(s.addr(), 30_000);
    assert_eq!(reader.add_auth("digest", READER.as_bytes()), Some(ErrorCode::Ok));
    assert_eq!(reader.get_data("/secured", false).err(), ErrorCode::Ok);
    assert_eq!(reader.set_data("/secured", b"no", -1).err(), ErrorCode::NoAuth);

    // ... are the REST API's.
    let a = call(addr, "GET", "/secured", None, None);
    assert_status(&a, 403, "GET without credentials");
    assert_eq!(a.json()["error"], "NoAuth");
    assert_eq!(a.json()["code"], -102);
    assert_status(&call(addr, "GET", "/secured", Some("reader:wrong"), None), 403, "a wrong password");
    let a = call(addr, "GET", "/secured", Some(READER), None);
    assert_status(&a, 200, "GET as the reader");
    assert_eq!(a.body, b"v0");
    assert_eq!(a.header("x-zk-version").as_deref(), Some("0"));
    assert_eq!(a.header("content-type").as_deref(), Some("application/octet-stream"));
    let a = call(addr, "PUT", "/secured", Some(READER), Some(b"by reader"));
    assert_status(&a, 403, "PUT as the reader");
    assert_eq!(wire_data(&mut reader, "/secured"), (b"v0".to_vec(), 0), "the reader's PUT changed nothing");

    let a = call(addr, "PUT", "/secured?version=0", Some(ADMIN), Some(b"v1"));
    assert_status(&a, 200, "PUT as the admin");
    assert_eq!(a.json()["stat"]["version"], 1);
    assert_eq!(
        wire_data(&mut reader, "/secured"),
        (b"v1".to_vec(), 1),
        "the wire client sees the REST write"
    );
    let a = call(addr, "PUT", "/secured?version=0", Some(ADMIN), Some(b"v2"));
    assert_status(&a, 412, "PUT at a stale version");
    assert_eq!(a.json()["error"], "BadVersion");
    // Creating and deleting children are the parent's ACL's to allow, as on the wire.
    assert_status(
        &call(addr, "POST", "/secured/c", Some(READER), Some(b"")),
        403,
        "POST a child as the reader",
    );
    assert_status(
        &call(addr, "POST", "/secured/c", Some(ADMIN), Some(b"")),
        201,
        "POST a child as the admin",
    );
    assert_status(
        &call(addr, "DELETE", "/secured/c", Some(READER), None),
        403,
        "DELETE a child as the reader",
    );
    assert_status(&call(addr, "DELETE", "/secured/c", Some(ADMIN), None), 204, "DELETE a child as the admin");

    // The ACL itself: getACL needs READ or ADMIN, as on the wire.
    assert_status(&call(addr, "GET", "/secured?acl=true", None, None), 403, "GET ?acl=true anonymously");
    let a = call(addr, "GET", "/secured?acl=true", Some(READER), None);
    assert_status(&a, 200, "GET ?acl=true as the reader");
    let acl = a.json()["acl"].as_array().unwrap().clone();
    assert_eq!(acl.len(), 2, "{acl:?}");
    assert!(acl.iter().any(|e| e["scheme"] == "digest" && e["perms"] == "r"), "{acl:?}");

    // The caller's address is its ip identity, as a wire client's is.
    let ip_acl = |ip: &str| vec![Acl { perms: perms::READ, id: Id { scheme: "ip".into(), id: ip.into() } }];
    create_with_acl(&mut owner, "/local", b"here", ip_acl("127.0.0.1"));
    create_with_acl(&mut owner, "/elsewhere", b"there", ip_acl("10.9.9.9"));
    assert_status(&call(addr, "GET", "/local", None, None), 200, "an ip ACL naming the caller's address");
    assert_status(&call(addr, "GET", "/elsewhere", None, None), 403, "an ip ACL naming another address");

    // A node created with acl=creator belongs to the credentials that made it.
    let a = call(addr, "POST", "/mine?acl=creator", Some(ADMIN), Some(b"m"));
    assert_status(&a, 201, "POST acl=creator");
    assert_status(&call(addr, "GET", "/mine", None, None), 403, "someone else's node");
    assert_status(&call(addr, "GET", "/mine", Some(ADMIN), None), 200, "the creator's node");
    let a = call(addr, "POST", "/anon?acl=creator", None, Some(b"m"));
    assert_status(&a, 400, "acl=creator without credentials");
    assert_eq!(a.json()["error"], "InvalidAcl");

    // Credentials that are not HTTP Basic are refused as such.
    let a = exchange(
        addr,
        &request("GET", "/api/v1/storage/secured", &[("Authorization", "Bearer x".to_string())], None),
    );
    assert_status(&a, 401, "a Bearer token");
    assert!(a.header("www-authenticate").is_some_and(|v| v.starts_with("basic")), "{}", a.head);
}

#[test]
fn create_set_delete_and_conflicts() {
    let (s, addr) = server(WRITABLE);
    let a = call(addr, "POST", "/app", None, Some(b"hello"));
    assert_status(&a, 201, "POST /app");
    assert_eq!(a.header("location").as_deref(), Some("/api/v1/storage/app"));
    assert_eq!(a.json()["path"], "/app");
    assert_status(&call(addr, "POST", "/app", None, Some(b"again")), 409, "POST an existing node");
    assert_status(&call(addr, "POST", "/none/child", None, Some(b"")), 404, "POST under a missing parent");
    let a = call(addr, "POST", "/app/seq-?mode=persistent_sequential", None, Some(b"s"));
    assert_status(&a, 201, "POST sequential");
    assert_eq!(a.json()["path"], "/app/seq-0000000000");
    let a = call(addr, "POST", "/app/e?mode=ephemeral", None, Some(b""));
    assert_status(&a, 400, "POST ephemeral");
    assert!(a.text().contains("session"), "{}", a.text());
    assert_status(&call(addr, "POST", "/app/c?mode=bogus", None, Some(b"")), 400, "POST with a bad mode");

    let a = call(addr, "GET", "/app?children=true", None, None);
    assert_status(&a, 200, "GET children");
    assert_eq!(a.json()["children"], serde_json::json!(["seq-0000000000"]));
    assert_eq!(a.json()["stat"]["numChildren"], 1);
    let a = call(addr, "GET", "/app?format=json", None, None);
    assert_eq!(a.json()["data"], "aGVsbG8=");
    assert_eq!(a.json()["text"], "hello");
    let a = call(addr, "HEAD", "/app", None, None);
    assert_status(&a, 200, "HEAD an existing node");
    assert_eq!(a.header("x-zk-num-children").as_deref(), Some("1"));
    assert!(a.body.is_empty());
    assert_status(&call(addr, "HEAD", "/missing", None, None), 404, "HEAD a missing node");
    assert_status(&call(addr, "GET", "/missing", None, None), 404, "GET a missing node");
    assert_status(&call(addr, "PUT", "/missing", None, Some(b"x")), 404, "PUT a missing node");

    // Writes through REST are seen on the wire, and the reverse.
    let mut wire = RawClient::connect(s.addr(), 30_000);
    assert_eq!(wire_data(&mut wire, "/app"), (b"hello".to_vec(), 0));
    assert_eq!(wire.set_data("/app", b"from the wire", 0).err(), ErrorCode::Ok);
    let a = call(addr, "GET", "/app", None, None);
    assert_eq!(a.body, b"from the wire");
    assert_eq!(a.header("x-zk-version").as_deref(), Some("1"));

    assert_status(&call(addr, "DELETE", "/app", None, None), 409, "DELETE a node with children");
    let a = call(addr, "DELETE", "/app/seq-0000000000?version=5", None, None);
    assert_status(&a, 412, "DELETE at a wrong version");
    assert_status(&call(addr, "DELETE", "/app/seq-0000000000?version=0", None, None), 204, "DELETE");
    assert_status(&call(addr, "DELETE", "/app?version=1", None, None), 204, "DELETE /app");
    assert_eq!(wire.exists("/app", false).err(), ErrorCode::NoNode, "the wire client sees the delete");
    assert_status(&call(addr, "DELETE", "/app", None, None), 404, "DELETE a missing node");

    // An empty body makes an empty node; binary data comes back byte for byte.
    let bytes: Vec<u8> = (0..=255u8).collect();
    assert_status(&call(addr, "POST", "/bin", None, Some(&bytes)), 201, "POST binary");
    assert_eq!(call(addr, "GET", "/bin", None, None).body, bytes);
    assert_eq!(wire_data(&mut wire, "/bin").0, bytes);
}

#[test]
fn bad_input_gets_a_clear_4xx() {
    let (s, addr) = server(&format!("{WRITABLE}jute.maxbuffer=4096\n"));
    for (path, what) in [
        ("/a//b", "an empty segment"),
        ("/a/", "a trailing slash"),
        ("/a/..", "a relative segment"),
        ("/a%zz", "a bad escape"),
        ("/a%00b", "a NUL"),
        ("/%ff", "not UTF-8"),
    ] {
        let a = call(addr, "GET", path, None, None);
        assert_status(&a, 400, what);
        assert!(!a.json()["message"].as_str().unwrap().is_empty(), "{}", a.text());
    }
    assert_status(&call(addr, "POST", "/v", None, Some(b"x")), 201, "POST /v");
    for q in ["version=abc", "version=-2", "version=99999999999", "bogus=1", "children=maybe", "format=xml"] {
        let a = call(addr, "PUT", &format!("/v?{q}"), None, Some(b"y"));
        assert_status(&a, 400, q);
    }
    let a = call(addr, "PATCH", "/v", None, Some(b"y"));
    assert_status(&a, 405, "PATCH");

    // A body over jute.maxbuffer: refused by its declared length, and when sent in chunks.
    let big = vec![b'x'; 8192];
    let a = call(addr, "PUT", "/v", None, Some(&big));
    assert_status(&a, 413, "a body over jute.maxbuffer");
    let chunked = request("PUT", "/api/v1/storage/v", &[("Transfer-Encoding", "chunked".to_string())], None);
    let mut raw = chunked;
    for _ in 0..3 {
        raw.extend_from_slice(b"800\r\n");
        raw.extend_from_slice(&[b'y'; 0x800]);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    assert_status(&exchange(addr, &raw), 413, "a chunked body over jute.maxbuffer");
    let a = call(addr, "GET", "/v", None, None);
    assert_eq!(a.body, b"x", "refused writes changed nothing");

    // A browser page from elsewhere may not write; the server's own pages and non-browsers may.
    let from = |origin: &str| {
        let headers = [("Origin", origin.to_string())];
        exchange(addr, &request("POST", "/api/v1/storage/o", &headers, Some(b"o")))
    };
    let a = from("http://evil.example");
    assert_status(&a, 403, "a cross-origin POST");
    assert_eq!(a.json()["error"], "CrossOriginWrite");
    assert_status(&call(addr, "HEAD", "/o", None, None), 404, "the cross-origin POST created nothing");
    // The test client sends `Host: localhost`.
    assert_status(&from("http://localhost"), 201, "a POST from the server's own origin");

    // Malformed Basic credentials.
    let bad = exchange(
        addr,
        &request("GET", "/api/v1/storage/v", &[("Authorization", "Basic !!".to_string())], None),
    );
    assert_status(&bad, 401, "Basic credentials that are not base64");

    // The server still serves, and nothing panicked.
    assert_status(&call(addr, "GET", "/v", None, None), 200, "still serving");
    assert_eq!(s.four_letter("ruok"), "imok");
    let log = server_log(s.dir.path());
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn sessions_are_pooled_by_caller_and_closed_when_idle() {
    let (s, addr) = server(WRITABLE);
    for _ in 0..5 {
        assert_status(&call(addr, "GET", "/", None, None), 200, "anonymous");
        assert_status(&call(addr, "GET", "/", Some(ADMIN), None), 200, "admin");
    }
    // Two callers, two sessions; mntr counts its own connection too.
    assert_eq!(s.mntr_value("zk_num_alive_connections"), "3");
    // Closed after admin.restApi's idle time (10 s; the reaper runs every second).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while s.mntr_value("zk_num_alive_connections") != "1" {
        assert!(std::time::Instant::now() < deadline, "idle REST sessions were not closed");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let log = server_log(s.dir.path());
    assert_eq!(log.matches("REST session 0x").count(), 2, "{log}");
}

#[test]
fn client_certificate_is_the_x509_identity() {
    let pki = Pki::new();
    let (s, addr) = server(&format!(
        "{WRITABLE}admin.forceHttps=true\nadmin.needClientAuth=true\n\
         authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n\
         ssl.quorum.keyStore.location={}\nssl.quorum.keyStore.type=PEM\n\
         ssl.quorum.trustStore.location={}\nssl.quorum.trustStore.type=PEM\n",
        pki.p("server.pem"),
        pki.p("ca.pem")
    ));
    let mut owner = RawClient::connect(s.addr(), 30_000);
    let alice = Id { scheme: "x509".into(), id: "CN=alice,OU=Eng,O=Example,C=US".into() };
    create_with_acl(&mut owner, "/alices", b"a", vec![Acl { perms: perms::ALL, id: alice }]);
    let get = request("GET", "/api/v1/storage/alices", &[], None);
    let a = tls_exchange(tls_config(&pki, "ca.pem", Some("alice")), addr, &get).unwrap();
    assert_status(&a, 200, "GET with alice's certificate");
    assert_eq!(a.body, b"a");
    let a = tls_exchange(tls_config(&pki, "ca.pem", Some("bob")), addr, &get).unwrap();
    assert_status(&a, 403, "GET with bob's certificate");
    let put = request("PUT", "/api/v1/storage/alices", &[], Some(b"by alice"));
    let a = tls_exchange(tls_config(&pki, "ca.pem", Some("alice")), addr, &put).unwrap();
    assert_status(&a, 200, "PUT with alice's certificate");
    let a = tls_exchange(tls_config(&pki, "ca.pem", Some("alice")), addr, &get).unwrap();
    assert_eq!((a.body.as_slice(), a.header("x-zk-version").as_deref()), (&b"by alice"[..], Some("1")));
    assert_eq!(
        owner.get_data("/alices", false).err(),
        ErrorCode::NoAuth,
        "a wire client without the certificate"
    );
}

#[test]
fn a_followers_rest_api_writes_through_the_leader() {
    let (e, admin_ports) = support::ensemble::Ensemble::start_with_admin(3, WRITABLE);
    let leader = e.wait_for_leader();
    let follower = (leader + 1) % 3;
    e.wait_mode(follower, "follower");
    let f_addr = SocketAddr::from(([127, 0, 0, 1], admin_ports[follower]));
    let a = call(f_addr, "POST", "/via-follower", None, Some(b"f"));
    assert_status(&a, 201, "POST on a follower");
    let mut on_leader = e.client(leader);
    assert_eq!(wire_data(&mut on_leader, "/via-follower"), (b"f".to_vec(), 0), "the leader has it");
    let a = call(f_addr, "PUT", "/via-follower?version=0", None, Some(b"g"));
    assert_status(&a, 200, "PUT on a follower");
    let third = (leader + 2) % 3;
    let l_addr = SocketAddr::from(([127, 0, 0, 1], admin_ports[third]));
    // Another member's REST API reads it once that member has applied it (sync first, as a
    // client after another's write would).
    let mut c = e.client(third);
    let _ = c.call(Request::Sync(zk_proto::SyncRequest { path: "/via-follower".into() }));
    let a = call(l_addr, "GET", "/via-follower", None, None);
    assert_eq!(a.body, b"g", "{}", a.head);
}
