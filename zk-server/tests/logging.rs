//! Logging options: `logFormat=json` writes one JSON object a line, and `slowRequestThresholdMs`
//! logs a request answered that long after it arrived. A write is made slow for certain by
//! freezing (SIGSTOP) both followers of a three-server ensemble, so that its leader cannot commit
//! it until they are thawed.
// Clocks, threads and OS randomness are the driver's and the tests' to use; src/core denies them.
#![allow(clippy::disallowed_methods)]
mod support;
use std::time::Duration;
use support::ensemble::*;
use zk_proto::*;

#[test]
fn slow_requests_are_logged_as_json() {
    let e = Ensemble::start_with_extra(3, "slowRequestThresholdMs=500\nlogFormat=json\n");
    let leader = e.wait_for_leader();
    let mut c = e.client(leader);
    // Fast: not logged.
    assert_eq!(c.call(create_req("/fast")).err(), ErrorCode::Ok);
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    for &f in &followers {
        e.stop(f);
    }
    let xid = c.send(&create_req("/slow"));
    std::thread::sleep(Duration::from_millis(1000));
    for &f in &followers {
        e.cont(f);
    }
    assert_eq!(c.recv(xid).expect("reply").err(), ErrorCode::Ok);
    let line = e.wait_log(leader, "slow request");
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"));
    assert_eq!(v["level"], "WARN", "{line}");
    let msg = v["fields"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("CREA") && msg.contains("cxid"), "{line}");
    let ms: u64 =
        msg.rsplit("after ").next().and_then(|t| t.trim_end_matches(" ms").parse().ok()).unwrap_or(0);
    assert!(ms >= 500, "{line}");
    // Every line of the log is JSON, and only the slow write was logged as slow.
    let log = e.log(leader);
    for l in log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(serde_json::from_str::<serde_json::Value>(l).is_ok(), "not JSON: {l}");
    }
    assert_eq!(log.matches("slow request").count(), 1, "{log}");
}
