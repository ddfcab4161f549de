//! Group membership: create a group, join it, list it, delete it.
//!
//! ```text
//! cargo run --example group -- 127.0.0.1:2181 create /zoo
//! cargo run --example group -- 127.0.0.1:2181 join /zoo duck      # stays a member until Ctrl-C
//! cargo run --example group -- 127.0.0.1:2181 list /zoo [--watch] # --watch: print every change
//! cargo run --example group -- 127.0.0.1:2181 delete /zoo
//! ```

use std::time::Duration;
use zk_client::recipes::Group;
use zk_client::{acl, Client, CreateMode, Error};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, cmd, group, rest @ ..] = args.as_slice() else {
        eprintln!("usage: group <host:port> create|join|list|delete <group> [member|--watch]");
        std::process::exit(2);
    };
    let client = Client::connect(server, Duration::from_secs(10)).await?;
    match cmd.as_str() {
        "create" => {
            let p = client.create(group, b"", &acl::open_unsafe(), CreateMode::Persistent).await?;
            println!("Created {p}");
        }
        "join" => {
            let member = rest.first().ok_or("join needs a member name")?;
            Group::new(&client, group).join(member, b"").await?;
            println!("Joined {group} as {member}; Ctrl-C to leave");
            tokio::signal::ctrl_c().await?;
        }
        "list" => {
            let g = Group::new(&client, group);
            loop {
                let (members, changed) = match g.members_w().await {
                    Ok(m) => m,
                    Err(Error::NoNode) => return Err(format!("Group {group} does not exist").into()),
                    Err(e) => return Err(e.into()),
                };
                if members.is_empty() {
                    println!("No members in group {group}");
                } else {
                    println!("{}", members.join("\n"));
                }
                if rest.first().map(String::as_str) != Some("--watch") {
                    break;
                }
                changed.await?;
                println!("--");
            }
        }
        "delete" => {
            for m in client.get_children(group).await? {
                client.delete(&format!("{group}/{m}"), -1).await?;
            }
            client.delete(group, -1).await?;
            println!("Deleted {group}");
        }
        other => return Err(format!("unknown command {other}").into()),
    }
    client.close().await?;
    Ok(())
}
