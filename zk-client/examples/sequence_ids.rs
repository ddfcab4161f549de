//! Sequence IDs that never repeat: unique IDs from sequential nodes, and IDs handed out from
//! blocks reserved in ZooKeeper (run it twice, or restart the server in between: the second run
//! continues above the first).
//!
//! ```text
//! cargo run --example sequence_ids -- 127.0.0.1:2181 /ids 10 [block size]
//! ```

use std::time::Duration;
use zk_client::recipes::{SequenceIds, SequenceReservation, UniqueIdGenerator};
use zk_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, base, count, rest @ ..] = args.as_slice() else {
        eprintln!("usage: sequence_ids <host:port> <base path> <count> [block size]");
        std::process::exit(2);
    };
    let count: u32 = count.parse()?;
    let block: u32 = rest.first().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let client = Client::connect(server, Duration::from_secs(10)).await?;
    let unique = UniqueIdGenerator::new(&client, &format!("{base}/unique"));
    let mut reserved =
        SequenceIds::new(SequenceReservation::new(&client, &format!("{base}/reserved"), block));
    for _ in 0..count {
        println!("unique {:>6}   reserved {:>8}", unique.next().await?, reserved.next().await?);
    }
    client.close().await?;
    Ok(())
}
