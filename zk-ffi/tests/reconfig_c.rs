//! Dynamic reconfiguration through libzkrs: a C program (mt, Apache's zookeeper.h) calls
//! `zoo_getconfig` and `zoo_reconfig` on a three-server ensemble with `reconfigEnabled=true`,
//! Apache 3.8's and zkrs's, with the same results: NOAUTH without the super user, a follower
//! (server 1: the largest id leads a fresh ensemble) removed, BADVERSION from a stale version,
//! the follower added back.

mod support;

// Shared with zk-client's tests.
#[path = "../../zk-client/tests/support/ensemble.rs"]
#[allow(dead_code)] // each test file uses a part of it
mod ensemble;

use ensemble::{RoEnsemble, RoServer};
use std::time::Duration;
use support::*;

/// `super:secret` as the super user, for both servers.
const EXTRA: &str =
    "reconfigEnabled=true\nDigestAuthenticationProvider.superDigest=super:lK75jTNcA+U9vtVEw5vB51mj/w4=\n";

fn reconfigure(server: RoServer) -> String {
    let e = RoEnsemble::start_with(server, EXTRA);
    let exe = compile_c("reconfig_test.c", true);
    let (ok, out) =
        run_on_libzkrs(&exe, &[&e.connect_string(), "1", &e.joining_spec(0)], None, Duration::from_secs(120));
    assert!(ok && out.contains("ALL OK"), "{out}\n{}", e.logs());
    // The checks, without the numbers (versions differ between runs).
    out.lines().map(|l| l.split(':').next().unwrap_or(l).to_owned()).collect::<Vec<_>>().join("\n")
}

#[test]
fn c_client_reconfigures_apache_and_zkrs_ensembles_alike() {
    let zkrs = reconfigure(RoServer::Zkrs(zkrs_server_binary()));
    let apache = reconfigure(RoServer::Apache);
    assert_eq!(zkrs, apache);
}
