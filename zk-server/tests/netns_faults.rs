//! Real-process fault testing: zkrs ensembles in network namespaces under a seeded schedule of
//! partitions, slow links, kill -9, SIGSTOP, a full log disk and wall-clock jumps, with clients
//! whose histories are checked (linearizable registers, session order, sequential creates, the
//! lock recipe, ephemerals) and the servers' trees compared after healing. Each run leaves a
//! report and a timeline under target/faults/.
//!
//! Needs root (network namespaces, tmpfs mounts). The CI-sized runs are below; longer ones, and
//! runs against Apache ZooKeeper, are `bench/faults.sh`.
// Clocks, threads and OS randomness are the harness's to use.
#![allow(clippy::disallowed_methods)]
mod faults;
#[path = "node_sim/linear.rs"]
mod linear;
mod support;

use faults::{run, RunConfig, Target};
use std::path::PathBuf;

fn out_dir() -> PathBuf {
    std::env::var_os("FAULT_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/faults"))
}

fn check_run(cfg: RunConfig) {
    let outcome = run(&cfg).unwrap_or_else(|e| panic!("the harness could not run seed {}: {e}", cfg.seed));
    println!(
        "seed {} on {} servers: {} operations, {} faults, report {}",
        cfg.seed,
        cfg.servers,
        outcome.ops,
        outcome.faults,
        outcome.dir.join("report.md").display()
    );
    let failed: Vec<String> = outcome
        .verdicts
        .iter()
        .filter(|v| !v.passed)
        .map(|v| format!("{}: {}\n{}", v.name, v.summary, v.anomalies.join("\n")))
        .collect();
    assert!(failed.is_empty(), "anomalies (report {}):\n{}", outcome.dir.display(), failed.join("\n\n"));
    assert!(outcome.ops > 100, "too few operations to mean anything: {}", outcome.ops);
    assert!(outcome.faults > 3, "too few faults: {}", outcome.faults);
}

/// The CI-sized runs: fixed seeds, a three- and a five-server ensemble.
#[test]
fn zkrs_keeps_its_promises_under_seeded_faults() {
    for (seed, servers) in [(1, 3), (2, 5)] {
        check_run(RunConfig { target: Target::Zkrs, servers, seconds: 30, seed, out: out_dir() });
    }
}

/// The long command (`bench/faults.sh`): FAULT_SEEDS (a count, or first..last), FAULT_SECS,
/// FAULT_SERVERS, FAULT_TARGET (zkrs, apache, or mixed: Apache and zkrs servers in one ensemble).
#[test]
#[ignore = "long: run by bench/faults.sh"]
fn seeded_fault_runs() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let seeds = env("FAULT_SEEDS", "10");
    let seeds: Vec<u64> = match seeds.split_once("..") {
        Some((a, b)) => (a.parse().expect("FAULT_SEEDS")..=b.parse().expect("FAULT_SEEDS")).collect(),
        None => (100..100 + seeds.parse::<u64>().expect("FAULT_SEEDS")).collect(),
    };
    let seconds = env("FAULT_SECS", "60").parse().expect("FAULT_SECS");
    let servers = env("FAULT_SERVERS", "5").parse().expect("FAULT_SERVERS");
    let target = match env("FAULT_TARGET", "zkrs").as_str() {
        "apache" => Target::Apache,
        "zkrs" => Target::Zkrs,
        "mixed" => Target::Mixed,
        other => panic!("FAULT_TARGET={other}: zkrs, apache or mixed"),
    };
    let mut failed = Vec::new();
    let (mut ops, mut faults) = (0, 0);
    for &seed in &seeds {
        match run(&RunConfig { target, servers, seconds, seed, out: out_dir() }) {
            Ok(o) => {
                ops += o.ops;
                faults += o.faults;
                let bad: Vec<&str> = o.verdicts.iter().filter(|v| !v.passed).map(|v| v.name).collect();
                println!(
                    "seed {seed}: {} operations, {} faults: {}",
                    o.ops,
                    o.faults,
                    if bad.is_empty() { "ok".to_string() } else { format!("ANOMALIES {bad:?}") }
                );
                if !bad.is_empty() {
                    failed.push(format!("seed {seed}: {bad:?} ({})", o.dir.display()));
                }
            }
            Err(e) => failed.push(format!("seed {seed}: harness: {e}")),
        }
    }
    println!("{} runs, {ops} operations, {faults} faults, {} with anomalies", seeds.len(), failed.len());
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The checks find what they are for, on made-up records (no servers needed).
#[test]
fn checkers_catch_known_anomalies() {
    use faults::check;
    use faults::workload::{Ephemeral, History, Hold};
    use linear::{Event, Op, Ret};
    use std::collections::BTreeMap;

    // A lost acknowledged write, among operations that do not matter to it.
    let ev = |op, call, done, r| Event { op, call, done: Some((done, r)) };
    let mut h = History::default();
    h.keys.insert(
        "/reg/k".into(),
        vec![
            ev(Op::Get, 0, 1, Ret::NoNode),
            ev(Op::Create(1), 2, 3, Ret::Created),
            Event { op: Op::Set(5, 0), call: 2, done: None },
            ev(Op::Set(2, -1), 4, 5, Ret::Set(1)),
            ev(Op::Get, 6, 7, Ret::Value(1, 0)),
        ],
    );
    let v = check::linearizable(&h);
    assert!(!v.passed);
    // The minimal history keeps the writes and only the read that shows the loss.
    let minimal = check::minimize(&h.keys["/reg/k"]);
    assert!(linear::check(&minimal).is_err(), "{}", v.anomalies[0]);
    let ops: Vec<Op> = minimal.iter().map(|e| e.op).collect();
    assert_eq!(ops, [Op::Create(1), Op::Set(5, 0), Op::Set(2, -1), Op::Get], "{}", v.anomalies[0]);
    h.keys.clear();
    h.keys.insert(
        "/reg/k".into(),
        vec![ev(Op::Create(1), 0, 1, Ret::Created), ev(Op::Get, 2, 3, Ret::Value(1, 0))],
    );
    assert!(check::linearizable(&h).passed);

    // Sequential names: a missing acknowledged one, and a gap.
    h.seq_acked = vec!["/seq/n-0000000000".into(), "/seq/n-0000000001".into()];
    assert!(check::sequential(&h, &["n-0000000000".into(), "n-0000000001".into()]).passed);
    assert!(!check::sequential(&h, &["n-0000000000".into()]).passed);
    assert!(
        !check::sequential(&h, &["n-0000000000".into(), "n-0000000001".into(), "n-0000000003".into()]).passed
    );

    // Two lock holders at once; one after the other is fine.
    let hold = |lane, from, to| Hold { lane, from, to };
    assert!(check::mutual_exclusion(&[hold(0, 0, 10), hold(1, 10, 20), hold(0, 25, 30)]).passed);
    assert!(!check::mutual_exclusion(&[hold(0, 0, 10), hold(1, 5, 20)]).passed);

    // An ephemeral outliving its session; a live session's node missing.
    h.ephemerals = vec![
        Ephemeral { path: "/eph/gone".into(), acked: true, gone: true },
        Ephemeral { path: "/eph/live".into(), acked: true, gone: false },
    ];
    assert!(check::ephemerals(&h, &["live".into()]).passed);
    assert!(!check::ephemerals(&h, &["live".into(), "gone".into()]).passed);
    assert!(!check::ephemerals(&h, &[]).passed);

    // Trees that differ.
    let tree = |v: &str| BTreeMap::from([("/a".to_string(), v.to_string())]);
    assert!(check::trees_equal(&[(0, tree("x")), (1, tree("x"))]).passed);
    assert!(!check::trees_equal(&[(0, tree("x")), (1, tree("y"))]).passed);
}
