//! Starting and stopping a standalone server: the listener, the core task, signals.

use crate::conn;
use crate::core::{Core, CoreMsg};
use crate::log::MemoryLog;
use crate::settings::Settings;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tracing::{info, warn};
use zk_tree::{Database, TreeConfig};

/// Messages the core's inbox holds before connection readers wait.
const CORE_INBOX: usize = 8 * 1024;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The client port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// Runs a standalone server until `shutdown` resolves.
pub async fn run(
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), StartError> {
    let settings = Arc::new(settings);
    let listener = TcpListener::bind(settings.client_addr)
        .await
        .map_err(|source| StartError::Bind { addr: settings.client_addr, source })?;
    let db = Database::new(TreeConfig {
        extended_types_enabled: settings.extended_types_enabled,
        super_digest: settings.super_digest.clone(),
        tick_ms: settings.tick_ms,
        container_max_never_used_ms: settings.container_max_never_used_ms,
        ..TreeConfig::default()
    });
    let permits = Arc::new(Semaphore::new(settings.global_outstanding_limit as usize));
    let core = Core::new(settings.clone(), db, Box::new(MemoryLog::default()), permits.clone());
    let (core_tx, core_rx) = mpsc::channel(CORE_INBOX);
    let core_task = tokio::spawn(core.run(core_rx));
    info!("serving clients on {} (standalone; state in memory only)", settings.client_addr);

    let per_ip: Arc<Mutex<HashMap<IpAddr, u32>>> = Arc::default();
    let mut next_id: u64 = 1;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, remote) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: keep serving the others.
                        warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let ip = remote.ip();
                {
                    let mut m = per_ip.lock().unwrap_or_else(|e| e.into_inner());
                    let n = m.entry(ip).or_insert(0);
                    if settings.max_client_cnxns > 0 && *n >= settings.max_client_cnxns {
                        warn!("too many connections from {ip}: max is {}", settings.max_client_cnxns);
                        continue;
                    }
                    *n += 1;
                }
                let id = next_id;
                next_id += 1;
                let (core_tx, settings, permits, per_ip) = (core_tx.clone(), settings.clone(), permits.clone(), per_ip.clone());
                tokio::spawn(async move {
                    conn::serve(stream, remote, id, core_tx, settings, permits).await;
                    let mut m = per_ip.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(n) = m.get_mut(&ip) {
                        *n -= 1;
                        if *n == 0 {
                            m.remove(&ip);
                        }
                    }
                });
            }
        }
    }
    info!("shutting down");
    let _ = core_tx.send(CoreMsg::Shutdown).await;
    let _ = core_task.await;
    Ok(())
}
