//! A distributed lock: run several at once and they take turns.
//!
//! ```text
//! cargo run --example lock -- 127.0.0.1:2181 /locks/printer 3   # hold it 3 s, twice
//! ```

use std::time::Duration;
use zk_client::recipes::Lock;
use zk_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, dir, rest @ ..] = args.as_slice() else {
        eprintln!("usage: lock <host:port> <lock dir> [hold seconds]");
        std::process::exit(2);
    };
    let hold = Duration::from_secs(rest.first().map(|s| s.parse()).transpose()?.unwrap_or(3));
    let client = Client::connect(server, Duration::from_secs(10)).await?;
    let me = std::process::id();
    let mut lock = Lock::new(&client, dir);
    for round in 1..=2 {
        println!("[{me}] waiting for {dir}");
        lock.acquire().await?;
        println!("[{me}] holding {dir} (round {round}, node {})", lock.node().unwrap_or("?"));
        tokio::time::sleep(hold).await;
        lock.release().await?;
        println!("[{me}] released");
    }
    client.close().await?;
    Ok(())
}
