//! Loopback ports for test servers, shared by the workspace's tests (included with `#[path]`).

use std::net::TcpListener;

/// A loopback port nobody listens on, below the kernel's ephemeral range (32768 and up on Linux).
///
/// A port the kernel hands out for `bind(0)` comes from the range it also gives outgoing
/// connections their local ports from: with other tests connecting in parallel, one of them could
/// take the port before the server binds it, and the server never started ("Address already in
/// use"). Ports below the range are only ever taken by listeners, and each test process walks its
/// own stretch of them (from its pid) so that parallel processes seldom try the same one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id() % 400 * 30;
    for _ in 0..SPAN {
        let port = (FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
