//! The fuzz targets' bodies: one function per decoder of bytes from outside, each taking any
//! input and checking properties of what it decodes (decode → encode → decode gives the same
//! value), not only that it does not panic.
//!
//! The functions live here, in a workspace member without any fuzzing engine, so that
//! `tests/replay.rs` runs every one over its corpus (`corpus/<target>/`) in the ordinary test
//! run; `libfuzzer/` (its own workspace, outside the main one) links the same functions with
//! libFuzzer for coverage-guided runs (`fuzz/run.sh TARGET SECONDS`).
//!
//! A function panics when a property fails; an input the decoder refuses is fine.

pub mod client;
pub mod config;
pub mod election;
pub mod log;
pub mod quorum;
pub mod sasl;
pub mod snapshot;
pub mod x509;

/// A target's body: any input in, a panic when a property fails.
pub type Target = fn(&[u8]);

/// Every target: its name (the corpus folder and the libFuzzer binary) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("client_connect", client::connect),
    ("client_request", client::request),
    ("quorum_packet", quorum::packet),
    ("quorum_payload", quorum::payload),
    ("quorum_auth", quorum::auth),
    ("election_notification", election::notification),
    ("election_handshake", election::handshake),
    ("log_record", log::record),
    ("log_segment", log::segment),
    ("snapshot_content", snapshot::content),
    ("snapshot_file", snapshot::file),
    ("apache_snap", snapshot::apache_snap),
    ("apache_files", snapshot::apache_files),
    ("apache_snap_stream", snapshot::apache_snap_stream),
    ("zoo_cfg", config::zoo_cfg),
    ("x509_subject", x509::subject),
    ("sasl_token", sasl::token),
];
