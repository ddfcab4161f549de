//! Leader election with a service that takes over when the leader dies.
//!
//! Each process is a candidate. The leader runs the "persistence service": it appends a record
//! to a log node every second, numbering records from where the last leader stopped. Kill the
//! leader (Ctrl-C, or kill -9 and wait a session timeout) and the next candidate takes over and
//! carries on the numbering. While its connection is down a leader is paused: it stops writing
//! until it knows whether it still leads.
//!
//! ```text
//! cargo run --example leader -- 127.0.0.1:2181 /election alpha    # in several terminals
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use zk_client::recipes::{Candidate, LeaderState};
use zk_client::{acl, Client, CreateMode, Error};

const SESSION: Duration = Duration::from_secs(6);

/// The service: appends numbered records while `active`; returns when `stop` resolves.
async fn persistence_service(
    client: &Client,
    log: &str,
    name: &str,
    active: Arc<AtomicBool>,
) -> Result<(), Error> {
    match client.create(log, b"0", &acl::open_unsafe(), CreateMode::Persistent).await {
        Ok(_) | Err(Error::NodeExists) => {}
        Err(e) => return Err(e),
    }
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !active.load(Ordering::SeqCst) {
            continue;
        }
        let (data, st) = client.get_data(log).await?;
        let n: u64 = String::from_utf8_lossy(&data).trim().parse().unwrap_or(0) + 1;
        // Versioned: a deposed leader's late write cannot overwrite its successor's.
        client.set_data(log, n.to_string().as_bytes(), st.version).await?;
        println!("[{name}] wrote record {n}");
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, dir, name] = args.as_slice() else {
        eprintln!("usage: leader <host:port> <election dir> <name>");
        std::process::exit(2);
    };
    let client = Client::connect(server, SESSION).await?;
    let mut cand = Candidate::new(&client, dir);
    println!("[{name}] candidate; current leader: {:?}", Candidate::leader(&client, dir).await?);
    cand.lead(name.as_bytes()).await?;
    println!("[{name}] I am the leader; starting the service");
    let active = Arc::new(AtomicBool::new(true));
    let log = format!("{dir}-log");
    let a = active.clone();
    let why = tokio::select! {
        why = cand.hold(SESSION, |s| {
            a.store(s == LeaderState::Leading, Ordering::SeqCst);
            println!("[{name}] {s:?}");
        }) => format!("leadership ended: {why}"),
        r = persistence_service(&client, &log, name, active.clone()) => format!("service stopped: {r:?}"),
        _ = tokio::signal::ctrl_c() => "interrupted".to_owned(),
    };
    println!("[{name}] {why}; stepping down");
    let _ = cand.resign().await;
    let _ = client.close().await;
    Ok(())
}
