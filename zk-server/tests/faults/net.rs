//! The test network: one network namespace per server, each joined to a bridge in the harness's
//! own namespace by a veth pair, with its own address. Faults are made with iproute2 only:
//! partitions are blackhole routes (a packet to a cut peer is dropped silently, as a broken link
//! drops it), slow and lossy links are a qdisc on the server's end of its veth (netem where the
//! kernel has it, else a token bucket small enough to drop what overflows it). Everything made
//! here is removed on drop, and a leftover of a killed run with the same name is removed first.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `ip`/`tc` with `args`; the error names the command and what it printed.
pub fn run(prog: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{prog} {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{prog} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// How a slowed link is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaper {
    /// netem: delay with jitter, and random loss.
    Netem,
    /// A token bucket: a low rate, and drops when its small queue overflows (kernels without netem,
    /// this machine's among them).
    TokenBucket,
}

/// The namespaces, the bridge and the faults in force.
pub struct Net {
    prefix: String,
    subnet: (u8, u8),
    n: usize,
    cuts: BTreeSet<(usize, usize)>,
    slowed: BTreeSet<usize>,
    /// How this kernel can slow a link.
    pub shaper: Shaper,
}

static RUNS: AtomicU32 = AtomicU32::new(0);

impl Net {
    /// Makes the bridge and `n` namespaces. Needs root (CAP_NET_ADMIN).
    pub fn create(n: usize) -> Result<Net, String> {
        let run_no = RUNS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Interface names have at most 15 bytes: "zf" + the pid in hex (pid_max is at most 2^22)
        // + the run + a role letter + the index.
        let prefix = format!("zf{pid:06x}{}", run_no % 10);
        let subnet = (200 + (run_no % 50) as u8, (pid % 250) as u8);
        let mut net = Net {
            prefix,
            subnet,
            n,
            cuts: BTreeSet::new(),
            slowed: BTreeSet::new(),
            shaper: Shaper::TokenBucket,
        };
        sweep_stale();
        net.remove_all();
        let br = net.bridge();
        run("ip", &["link", "add", &br, "type", "bridge"])?;
        run("ip", &["addr", "add", &format!("{}/24", net.host_addr()), "dev", &br])?;
        run("ip", &["link", "set", &br, "up"])?;
        for i in 0..n {
            let ns = net.ns(i);
            let (h, v) = (format!("{}h{i}", net.prefix), format!("{}v{i}", net.prefix));
            run("ip", &["netns", "add", &ns])?;
            run("ip", &["link", "add", &h, "type", "veth", "peer", "name", &v])?;
            run("ip", &["link", "set", &v, "netns", &ns])?;
            run("ip", &["link", "set", &h, "master", &br])?;
            run("ip", &["link", "set", &h, "up"])?;
            run("ip", &["-n", &ns, "addr", "add", &format!("{}/24", net.addr(i)), "dev", &v])?;
            run("ip", &["-n", &ns, "link", "set", &v, "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        }
        // netem where the kernel has it.
        let v0 = format!("{}v0", net.prefix);
        if run(
            "ip",
            &["netns", "exec", &net.ns(0), "tc", "qdisc", "add", "dev", &v0, "root", "netem", "delay", "1ms"],
        )
        .is_ok()
        {
            let _ = run("ip", &["netns", "exec", &net.ns(0), "tc", "qdisc", "del", "dev", &v0, "root"]);
            net.shaper = Shaper::Netem;
        }
        Ok(net)
    }

    /// Server `i`'s namespace.
    pub fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.prefix)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.prefix)
    }

    /// Server `i`'s address.
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet.0, self.subnet.1, i as u8 + 1)
    }

    /// The harness's address on the bridge (clients connect from it).
    pub fn host_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.subnet.0, self.subnet.1, 254)
    }

    /// Cuts every pair in `pairs`, both ways (on top of the cuts in force).
    pub fn cut(&mut self, pairs: &[(usize, usize)]) -> Result<(), String> {
        for &(a, b) in pairs {
            for (from, to) in [(a, b), (b, a)] {
                if self.cuts.insert((from, to)) {
                    let dst = format!("{}/32", self.addr(to));
                    run("ip", &["-n", &self.ns(from), "route", "add", "blackhole", &dst])?;
                }
            }
        }
        Ok(())
    }

    /// Every pair between the groups of `sides` (servers in no group keep all their links, and a
    /// server in two groups is the bridge between them).
    pub fn split(&mut self, sides: &[Vec<usize>]) -> Result<(), String> {
        let mut pairs = Vec::new();
        for a in 0..self.n {
            for b in a + 1..self.n {
                let shared = sides.iter().any(|s| s.contains(&a) && s.contains(&b));
                let placed = sides.iter().any(|s| s.contains(&a)) && sides.iter().any(|s| s.contains(&b));
                if placed && !shared {
                    pairs.push((a, b));
                }
            }
        }
        self.cut(&pairs)
    }

    /// Removes every cut.
    pub fn heal(&mut self) -> Result<(), String> {
        let cuts: Vec<_> = std::mem::take(&mut self.cuts).into_iter().collect();
        for (from, to) in cuts {
            let dst = format!("{}/32", self.addr(to));
            run("ip", &["-n", &self.ns(from), "route", "del", "blackhole", &dst])?;
        }
        Ok(())
    }

    /// Slows server `i`'s link both ways: a qdisc on each end of its veth pair.
    pub fn slow(&mut self, i: usize) -> Result<(), String> {
        if !self.slowed.insert(i) {
            return Ok(());
        }
        let (h, v) = (format!("{}h{i}", self.prefix), format!("{}v{i}", self.prefix));
        let shape: &[&str] = match self.shaper {
            Shaper::Netem => &["netem", "delay", "40ms", "20ms", "loss", "3%"],
            Shaper::TokenBucket => &["tbf", "rate", "400kbit", "burst", "16kb", "limit", "24kb"],
        };
        let ns = self.ns(i);
        let mut a = vec!["netns", "exec", &ns, "tc", "qdisc", "add", "dev", &v, "root"];
        a.extend_from_slice(shape);
        run("ip", &a)?;
        let mut b = vec!["qdisc", "add", "dev", &h, "root"];
        b.extend_from_slice(shape);
        run("tc", &b)
    }

    /// Restores every slowed link.
    pub fn unslow(&mut self) -> Result<(), String> {
        for i in std::mem::take(&mut self.slowed) {
            let (h, v) = (format!("{}h{i}", self.prefix), format!("{}v{i}", self.prefix));
            run("ip", &["netns", "exec", &self.ns(i), "tc", "qdisc", "del", "dev", &v, "root"])?;
            run("tc", &["qdisc", "del", "dev", &h, "root"])?;
        }
        Ok(())
    }

    fn remove_all(&self) {
        for i in 0..self.n {
            let _ = run("ip", &["netns", "del", &self.ns(i)]);
            let _ = run("ip", &["link", "del", &format!("{}h{i}", self.prefix)]);
        }
        let _ = run("ip", &["link", "del", &self.bridge()]);
    }
}

/// Removes what runs whose process is gone (killed before their cleanup ran) left behind.
fn sweep_stale() {
    let Ok(out) = Command::new("ip").args(["-o", "link", "show"]).output() else { return };
    let links = String::from_utf8_lossy(&out.stdout).into_owned();
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    let spaces = String::from_utf8_lossy(&out.stdout).into_owned();
    let stale = |name: &str| -> bool {
        let Some(hex) = name.strip_prefix("zf").and_then(|r| r.get(..6)) else { return false };
        let Ok(pid) = u32::from_str_radix(hex, 16) else { return false };
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    };
    for ns in spaces.lines().filter_map(|l| l.split_whitespace().next()) {
        if stale(ns) {
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
    // "7: zf00a1b20br: <...>" or "8: zf00a1b20h1@if2: <...>"
    for l in links.lines() {
        let Some(name) = l.split(": ").nth(1).map(|n| n.split('@').next().unwrap_or(n)) else { continue };
        if stale(name) {
            let _ = run("ip", &["link", "del", name]);
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.remove_all();
    }
}
