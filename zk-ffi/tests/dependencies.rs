//! libzkrs links zk-client's sans-IO session core and nothing of its async side: a C program that
//! loads the library must not carry a tokio runtime or the shell's line editor. A dependency edit
//! that turns zk-client's `tokio` or `cli` feature back on for zk-ffi fails here.

use std::process::Command;

/// Crates that only zk-client's `tokio` and `cli` features bring in.
const FORBIDDEN: &[&str] = &["tokio", "rustyline"];

#[test]
fn libzkrs_depends_on_no_async_runtime() {
    // `-e normal`: what the library links, not its build scripts or tests. `--offline`: the lock
    // file already names every package, so the test never touches the network.
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-p", "zk-ffi", "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(tree.lines().any(|l| l.starts_with("zk-client ")), "zk-client missing from:\n{tree}");
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(!FORBIDDEN.contains(&name), "libzkrs depends on {name}:\n{tree}");
    }
}
