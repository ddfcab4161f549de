//! A configuration updater and watchers: the updater stores a new value every few seconds, each
//! watcher prints every value it reloads.
//!
//! ```text
//! cargo run --example config -- 127.0.0.1:2181 watch /config       # in one or more terminals
//! cargo run --example config -- 127.0.0.1:2181 update /config      # a new value every 2 s
//! cargo run --example config -- 127.0.0.1:2181 set /config "k=v"   # one value
//! ```

use std::time::Duration;
use zk_client::recipes::ConfigStore;
use zk_client::Client;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, cmd, path, rest @ ..] = args.as_slice() else {
        eprintln!("usage: config <host:port> watch|update|set <path> [value]");
        std::process::exit(2);
    };
    let client = Client::connect(server, Duration::from_secs(10)).await?;
    let store = ConfigStore::new(&client, path);
    match cmd.as_str() {
        "watch" => {
            let mut w = store.watcher();
            loop {
                match w.next().await? {
                    Some(v) => println!("config: {}", String::from_utf8_lossy(&v)),
                    None => println!("config: (none)"),
                }
            }
        }
        "update" => {
            for n in 0u64.. {
                let value = format!("generation={n}");
                let version = store.store(value.as_bytes(), None).await?;
                println!("stored {value} (version {version})");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        "set" => {
            let value = rest.first().ok_or("set needs a value")?;
            println!("version {}", store.store(value.as_bytes(), None).await?);
        }
        other => return Err(format!("unknown command {other}").into()),
    }
    client.close().await?;
    Ok(())
}
