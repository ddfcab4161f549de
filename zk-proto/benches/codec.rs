//! Codec throughput: the hot requests and replies of a ZooKeeper server, and frame splitting.
//!
//! Run with `cargo bench -p zk-proto`; every benchmark works on data built once up front, so the
//! numbers are the codec alone.
// criterion_group! defines an undocumented `pub fn`; a bench has no API to document.
#![allow(missing_docs)]

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use zk_proto::frame::write_frame;
use zk_proto::jute::{to_bytes, Jute, Reader};
use zk_proto::*;

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0010,
        mzxid: 0x1_0000_0020,
        ctime: 1_700_000_000_000,
        mtime: 1_700_000_000_500,
        version: 3,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: 0,
        data_length: 100,
        num_children: 0,
        pzxid: 0x1_0000_0010,
    }
}

fn open_acl() -> Vec<Acl> {
    vec![Acl { perms: perms::ALL, id: Id { scheme: "world".into(), id: "anyone".into() } }]
}

fn create(i: usize) -> CreateRequest {
    CreateRequest {
        path: format!("/app/locks/lock-{i:010}"),
        data: Some(Bytes::from_static(b"host-17:2181")),
        acl: open_acl(),
        flags: CreateMode::EphemeralSequential.code(),
    }
}

/// Header plus body of a request, as it arrives inside a frame.
fn request_frame(xid: i32, req: &Request) -> Bytes {
    let mut out = to_bytes(&RequestHeader { xid, op: req.op().code() });
    req.encode(&mut out);
    Bytes::from(out)
}

fn decode_request(frame: &Bytes) -> Request {
    let mut r = Reader::new(frame.clone());
    let h = RequestHeader::read(&mut r).unwrap();
    Request::decode(h.op, &mut r).unwrap()
}

fn bench_get_data(c: &mut Criterion) {
    let req = Request::GetData(GetDataRequest { path: "/app/config/service-a".into(), watch: true });
    let frame = request_frame(42, &req);
    let mut g = c.benchmark_group("getData request");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(64);
        b.iter(|| {
            out.clear();
            RequestHeader { xid: 42, op: OpCode::GetData.code() }.write(&mut out);
            black_box(&req).encode(&mut out);
            black_box(out.len())
        })
    });
    g.bench_function("decode", |b| b.iter(|| decode_request(black_box(&frame))));
    g.finish();
}

fn bench_get_data_response(c: &mut Criterion) {
    let resp = GetDataResponse { data: Some(Bytes::from(vec![0x5a; 100])), stat: stat() };
    let hdr = ReplyHeader { xid: 42, zxid: 0x1_0000_0020, err: 0 };
    let mut frame = to_bytes(&hdr);
    resp.write(&mut frame);
    let frame = Bytes::from(frame);
    let mut g = c.benchmark_group("GetDataResponse 100 B");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = BytesMut::with_capacity(256);
        b.iter(|| {
            out.clear();
            write_frame(&mut out, |o| {
                hdr.write(o);
                black_box(&resp).write(o);
            });
            black_box(out.len())
        })
    });
    g.bench_function("decode", |b| {
        b.iter(|| {
            let mut r = Reader::new(black_box(&frame).clone());
            let h = ReplyHeader::read(&mut r).unwrap();
            (h, GetDataResponse::read(&mut r).unwrap())
        })
    });
    g.finish();
}

fn bench_create(c: &mut Criterion) {
    let req = Request::Create(create(7));
    let frame = request_frame(43, &req);
    let mut g = c.benchmark_group("CreateRequest");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(128);
        b.iter(|| {
            out.clear();
            RequestHeader { xid: 43, op: OpCode::Create.code() }.write(&mut out);
            black_box(&req).encode(&mut out);
            black_box(out.len())
        })
    });
    g.bench_function("decode", |b| b.iter(|| decode_request(black_box(&frame))));
    g.finish();
}

fn bench_multi(c: &mut Criterion) {
    // Ten ops of the kinds a lock or leader recipe batches: creates, a check, set and delete.
    let mut ops: Vec<Request> = (0..6).map(|i| Request::Create(create(i))).collect();
    ops.push(Request::Check(CheckVersionRequest { path: "/app/locks".into(), version: 4 }));
    ops.push(Request::SetData(SetDataRequest {
        path: "/app/state".into(),
        data: Some(Bytes::from_static(b"leader=host-17")),
        version: -1,
    }));
    ops.push(Request::Delete(DeleteRequest { path: "/app/locks/lock-0000000001".into(), version: -1 }));
    ops.push(Request::Delete(DeleteRequest { path: "/app/locks/lock-0000000002".into(), version: -1 }));
    let req = Request::Multi(ops);
    let frame = request_frame(44, &req);
    let mut g = c.benchmark_group("multi 10 ops");
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(1024);
        b.iter(|| {
            out.clear();
            RequestHeader { xid: 44, op: OpCode::Multi.code() }.write(&mut out);
            black_box(&req).encode(&mut out);
            black_box(out.len())
        })
    });
    g.bench_function("decode", |b| b.iter(|| decode_request(black_box(&frame))));
    g.finish();
}

fn bench_frame_split(c: &mut Criterion) {
    // 1000 pings and small getData requests back to back, as a pipelining client sends them.
    let mut stream = BytesMut::new();
    for i in 0..1000 {
        let req = if i % 4 == 0 {
            Request::Ping
        } else {
            Request::GetData(GetDataRequest { path: format!("/n/{i}"), watch: false })
        };
        write_frame(&mut stream, |o| {
            RequestHeader { xid: i, op: req.op().code() }.write(o);
            req.encode(o);
        });
    }
    let stream = stream.freeze();
    let dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
    let mut g = c.benchmark_group("frame split");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("1000 small frames", |b| {
        b.iter_batched(
            || BytesMut::from(&stream[..]),
            |mut buf| {
                let mut n = 0;
                while let Some(f) = dec.decode(&mut buf).unwrap() {
                    n += f.len();
                }
                n
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_get_data,
    bench_get_data_response,
    bench_create,
    bench_multi,
    bench_frame_split
);
criterion_main!(benches);
