//! getChildren of a parent with many sequential children (names like `c0-0000123456`, 100-byte
//! values), at 100,000 and 1,000,000 children: the list in Apache's order, the whole read, and
//! the read plus the jute encoding of the reply body as the server's core writes it.
//!
//! Times are the thread's CPU time (`/proc/thread-self/schedstat`), not wall time: on a shared,
//! loaded machine wall time mostly measures the other processes.
//!
//! `cargo bench -p zk-tree --bench children` (`-- 100k` for the smaller tree alone)
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use bytes::BytesMut;
use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Duration;
use zk_proto::jute::Jute;

mod fixture;
use fixture::{create, Fixture};
use zk_proto::OpCode;

const PARENT: &str = "/seq";

/// A tree with `PARENT` holding `count` persistent-sequential children.
fn with_children(count: usize) -> Fixture {
    let mut f = Fixture::with_session();
    f.write(OpCode::Create, Some(create(PARENT.to_string(), 0)));
    for _ in 0..count {
        // PERSISTENT_SEQUENTIAL
        f.write(OpCode::Create, Some(create(format!("{PARENT}/c0-"), 2)));
    }
    f
}

/// The calling thread's CPU time in nanoseconds, formatted as criterion formats wall time.
struct CpuTime(WallTime);

/// CPU time the calling thread has run, in nanoseconds (Linux: the first field of its schedstat).
fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    s.split_whitespace().next().and_then(|v| v.parse().ok()).expect("schedstat's first field")
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        self.0.formatter()
    }
}

fn bench_size(c: &mut Criterion<CpuTime>, label: &str, count: usize) {
    let mut f = with_children(count);
    let mut g = c.benchmark_group(format!("children-{label}"));
    g.throughput(Throughput::Elements(count as u64))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(if count > 100_000 { 15 } else { 5 }));
    g.bench_function("child_names", |b| {
        b.iter(|| {
            let tree = f.db.tree();
            let n = tree.get(PARENT).expect("parent exists");
            tree.child_names(n)
        })
    });
    g.bench_function("get_children", |b| {
        b.iter(|| f.db.get_children(PARENT, &f.auth, None).expect("parent exists"))
    });
    g.bench_function("get_children+encode", |b| {
        b.iter(|| {
            let (names, stat) = f.db.get_children(PARENT, &f.auth, None).expect("parent exists");
            let mut buf = BytesMut::with_capacity(64 << 10);
            buf.extend_from_slice(names.jute());
            stat.write(&mut buf);
            buf.freeze()
        })
    });
    g.finish();
}

fn children(c: &mut Criterion<CpuTime>) {
    bench_size(c, "100k", 100_000);
    bench_size(c, "1M", 1_000_000);
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime(WallTime));
    targets = children
}
criterion_main!(benches);
