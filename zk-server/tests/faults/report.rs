//! A run's report (report.md) and its timeline (timeline.svg): operations per client lane,
//! coloured by how they ended, under bands for the faults in force; anomalies outlined in red.

use super::check::Verdict;
use super::workload::{History, Outcome};
use super::FaultRecord;
use std::fmt::Write as _;
use std::path::Path;

/// What the report says about the run itself.
pub struct RunInfo<'a> {
    /// The seed.
    pub seed: u64,
    /// "zkrs" or "apache".
    pub target: &'a str,
    /// Servers.
    pub servers: usize,
    /// Seconds of faults and traffic.
    pub seconds: u64,
    /// How slow links were made.
    pub shaper: &'a str,
    /// Whether wall clocks could be jumped.
    pub clock_jumps: bool,
    /// Each server's implementation ("1 apache, 2 zkrs, 3 apache").
    pub members: String,
}

/// Writes report.md and timeline.svg into `dir`.
pub fn write(
    dir: &Path,
    info: &RunInfo<'_>,
    faults: &[FaultRecord],
    history: &History,
    verdicts: &[Verdict],
) -> std::io::Result<()> {
    let mut md = String::new();
    let passed = verdicts.iter().all(|v| v.passed);
    let _ = writeln!(md, "# Fault run: {} ({} servers), seed {}\n", info.target, info.servers, info.seed);
    let _ = writeln!(md, "Verdict: **{}**\n", if passed { "no anomalies" } else { "ANOMALIES FOUND" });
    let _ = writeln!(md, "Servers: {}.\n", info.members);
    let _ = writeln!(
        md,
        "{} s of traffic under faults; slow links by {}; wall-clock jumps {}. \
         Reproduce: `FAULT_SEEDS={} FAULT_SERVERS={} FAULT_SECS={} FAULT_TARGET={} bench/faults.sh`.\n",
        info.seconds,
        info.shaper,
        if info.clock_jumps {
            "on (libfaketime)"
        } else {
            "off (libfaketime not installed, FAULT_FAKETIME=0, or an Apache run)"
        },
        info.seed,
        info.servers,
        info.seconds,
        info.target
    );
    let _ = writeln!(md, "## Checks\n\n| check | result | checked |\n|---|---|---|");
    for v in verdicts {
        let _ = writeln!(md, "| {} | {} | {} |", v.name, if v.passed { "ok" } else { "FAILED" }, v.summary);
    }
    let _ = writeln!(md, "\n## Operations\n\n| kind | ok | failed | unknown |\n|---|---|---|---|");
    let mut kinds: std::collections::BTreeMap<String, [usize; 3]> = Default::default();
    for o in &history.ops {
        let kind = o.what.split(' ').next().unwrap_or("").to_string();
        let k = if o.what.contains("sequential") {
            "create sequential".to_string()
        } else if o.what.contains("ephemeral") {
            "create ephemeral".to_string()
        } else if o.what.starts_with("lock") {
            o.what.clone()
        } else {
            kind
        };
        let e = kinds.entry(k).or_default();
        e[match o.outcome {
            Outcome::Ok => 0,
            Outcome::Failed => 1,
            Outcome::Unknown => 2,
        }] += 1;
    }
    for (k, [a, b, c]) in &kinds {
        let _ = writeln!(md, "| {k} | {a} | {b} | {c} |");
    }
    let _ = writeln!(md, "\n## Faults\n\n| from (s) | to (s) | fault |\n|---|---|---|");
    for f in faults {
        let _ = writeln!(md, "| {:.2} | {:.2} | {} |", f.from as f64 / 1e6, f.to as f64 / 1e6, f.what);
    }
    for v in verdicts.iter().filter(|v| !v.passed) {
        let _ = writeln!(md, "\n## Anomalies: {}\n", v.name);
        for a in &v.anomalies {
            let _ = writeln!(md, "```\n{a}\n```");
        }
    }
    let _ = writeln!(
        md,
        "\nTimeline: timeline.svg. Server logs: server*.log.{}",
        if passed { "" } else { " Data and log directories as the run left them: server*-data/." }
    );
    std::fs::write(dir.join("report.md"), md)?;
    std::fs::write(dir.join("timeline.svg"), timeline(info, faults, history, verdicts))
}

fn timeline(info: &RunInfo<'_>, faults: &[FaultRecord], history: &History, verdicts: &[Verdict]) -> String {
    const LANE_H: f64 = 16.0;
    const LEFT: f64 = 70.0;
    const WIDTH: f64 = 1400.0;
    const MAX_OPS: usize = 40_000;
    let lanes = history.ops.iter().map(|o| o.lane + 1).max().unwrap_or(1);
    let end = history.ops.iter().map(|o| o.done).chain(faults.iter().map(|f| f.to)).max().unwrap_or(1).max(1);
    let fault_rows = 4usize;
    let top = 40.0 + fault_rows as f64 * 14.0;
    let height = top + lanes as f64 * LANE_H + 40.0;
    let x = |us: u64| LEFT + (WIDTH - LEFT - 10.0) * us as f64 / end as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" font-size="10">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#fff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="8" y="16" font-size="13">{} ({} servers), seed {}: green ok, grey failed, orange unknown; red outline: anomaly</text>"#,
        info.target, info.servers, info.seed
    );
    // Seconds.
    let secs = end / 1_000_000;
    for t in 0..=secs {
        let xx = x(t * 1_000_000);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/>"##,
            top - 4.0,
            height - 30.0
        );
        if t % 5 == 0 {
            let _ = writeln!(s, r#"<text x="{xx:.1}" y="{:.1}">{t}s</text>"#, height - 16.0);
        }
    }
    // Faults, in rows so that overlapping ones stay readable.
    for (i, f) in faults.iter().enumerate() {
        let row = i % fault_rows;
        let y = 26.0 + row as f64 * 14.0;
        let (x0, x1) = (x(f.from), x(f.to).max(x(f.from) + 1.0));
        let _ = writeln!(
            s,
            r##"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="12" fill="#b0c4de"><title>{}</title></rect><rect x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="#b0c4de" opacity="0.18"/>"##,
            x1 - x0,
            escape(&f.what),
            x1 - x0,
            lanes as f64 * LANE_H
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            x0 + 2.0,
            y + 10.0,
            escape(&label(&f.what))
        );
    }
    for lane in 0..lanes {
        let _ = writeln!(s, r#"<text x="4" y="{:.1}">lane {lane}</text>"#, top + lane as f64 * LANE_H + 11.0);
    }
    for o in history.ops.iter().take(MAX_OPS) {
        let fill = match o.outcome {
            Outcome::Ok => "#3a3",
            Outcome::Failed => "#999",
            Outcome::Unknown => "#f90",
        };
        let (x0, x1) = (x(o.call), x(o.done).max(x(o.call) + 0.8));
        let y = top + o.lane as f64 * LANE_H + 2.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{} ({:.3}..{:.3} ms)</title></rect>"#,
            x1 - x0,
            LANE_H - 4.0,
            escape(&o.what),
            o.call as f64 / 1e3,
            o.done as f64 / 1e3
        );
    }
    for v in verdicts {
        for &(a, b) in &v.spans {
            let (x0, x1) = (x(a), x(b).max(x(a) + 2.0));
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="red" stroke-width="1.5"/>"#,
                x1 - x0,
                lanes as f64 * LANE_H
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// A fault's short name: "kill", or "partition+kill" for two at once.
fn label(what: &str) -> String {
    what.split(" + ").map(|part| part.split(':').next().unwrap_or("")).collect::<Vec<_>>().join("+")
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
