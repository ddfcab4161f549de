//! Property tests for zk-proto's decoders: arbitrary bytes never panic and never make a decoder
//! allocate more than a small multiple of its input, generated records survive
//! encode -> decode -> encode unchanged, and framing refuses lengths outside `0..=max`.

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use zk_proto::frame::FrameTooLong;
use zk_proto::jute::{from_bytes, to_bytes, DecodeError, Jute, Reader};
use zk_proto::response::{decode_multi_response, encode_multi_response};
use zk_proto::*;

// --- allocation accounting -------------------------------------------------------------------

/// Wraps the system allocator to record the largest single allocation made on this thread while a
/// measurement is running; that is what a hostile length prefix would inflate.
struct PeakAlloc;

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // try_with: the allocator can run while thread-locals are being torn down.
    let _ = MEASURING.try_with(|m| {
        if m.get() {
            let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
        }
    });
}

// A global allocator must be an `unsafe impl`. It forwards every call unchanged to `System` and
// only reads thread-local counters besides.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: our caller's contract for `alloc` is `System.alloc`'s; passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as in `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// Runs `f` and returns its result with the largest single allocation it made.
fn peak_alloc<R>(f: impl FnOnce() -> R) -> (R, usize) {
    PEAK.with(|p| p.set(0));
    MEASURING.with(|m| m.set(true));
    let r = f();
    MEASURING.with(|m| m.set(false));
    (r, PEAK.with(|p| p.get()))
}

/// The most one decode of `input_len` bytes may allocate at once. Decoders size vectors from a
/// count that was checked against the remaining bytes, and an element in memory is at most a
/// small multiple of its smallest encoding; growth by doubling adds another factor of two.
fn alloc_bound(input_len: usize) -> usize {
    32 * input_len + 1024
}

// --- every decoder on arbitrary bytes --------------------------------------------------------

/// Every opcode zk-proto knows, plus a few it does not.
fn all_ops() -> Vec<i32> {
    let mut ops: Vec<i32> = (-12..=23).chain(100..=108).collect();
    ops.extend([i32::MIN, i32::MAX, 999]);
    ops
}

/// Decodes `buf` with every decoder the crate has; returns how many succeeded (so the work is
/// not optimised away). Must never panic.
fn decode_everything(buf: &Bytes) -> usize {
    let mut ok = 0;
    for op in all_ops() {
        ok += Request::decode(op, &mut Reader::new(buf.clone())).is_ok() as usize;
        if let Some(code) = OpCode::from_i32(op) {
            ok += Txn::decode(code, &mut Reader::new(buf.clone())).is_ok() as usize;
        }
    }
    ok += decode_multi_response(&mut Reader::new(buf.clone())).is_ok() as usize;
    ok += from_bytes::<ConnectRequest>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<ConnectResponse>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<RequestHeader>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<ReplyHeader>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<TxnHeader>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<WatcherEvent>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<GetDataResponse>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<GetAclResponse>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<GetChildren2Response>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<Create2Response>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<WhoAmIResponse>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<GetEphemeralsResponse>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<MultiTxn>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<StatPersisted>(buf.clone()).is_ok() as usize;
    ok += from_bytes::<Option<Vec<Acl>>>(buf.clone()).is_ok() as usize;
    ok
}

/// Byte strings that look like jute more often than uniform noise does: small big-endian
/// integers (lengths, counts, opcodes, -1) mixed with random bytes.
fn jute_ish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        (-2i32..40).prop_map(|n| n.to_be_bytes().to_vec()),
        any::<i32>().prop_map(|n| n.to_be_bytes().to_vec()),
        prop::sample::select(vec![0u8, 1]).prop_map(|b| vec![b]),
        vec(any::<u8>(), 0..8),
    ];
    vec(piece, 0..24).prop_map(|ps| ps.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic_any_decoder(raw in vec(any::<u8>(), 0..256)) {
        let buf = Bytes::from(raw);
        let (_, peak) = peak_alloc(|| decode_everything(&buf));
        prop_assert!(peak <= alloc_bound(buf.len()), "peak allocation {} for {} bytes", peak, buf.len());
    }

    #[test]
    fn jute_shaped_bytes_never_panic_any_decoder(raw in jute_ish()) {
        let buf = Bytes::from(raw);
        let (_, peak) = peak_alloc(|| decode_everything(&buf));
        prop_assert!(peak <= alloc_bound(buf.len()), "peak allocation {} for {} bytes", peak, buf.len());
    }

    /// Valid requests with bytes flipped, cut short or extended: decoding still never panics.
    #[test]
    fn mutated_valid_requests_never_panic(
        req in arb_request(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut body = Vec::new();
        req.encode(&mut body);
        if !body.is_empty() {
            for (at, byte) in &flips {
                let i = at.index(body.len());
                body[i] ^= byte;
            }
            body.truncate(cut.index(body.len() + 1));
        }
        let buf = Bytes::from(body);
        let (_, peak) = peak_alloc(|| {
            Request::decode(req.op().code(), &mut Reader::new(buf.clone())).is_ok()
        });
        prop_assert!(peak <= alloc_bound(buf.len()));
        decode_everything(&buf);
    }

    #[test]
    fn frame_decoder_never_panics_on_random_streams(
        raw in vec(any::<u8>(), 0..512),
        max in 0u32..64,
        chunk in 1usize..17,
    ) {
        let dec = FrameDecoder::new(max);
        let mut buf = BytesMut::new();
        'feed: for piece in raw.chunks(chunk) {
            buf.extend_from_slice(piece);
            loop {
                match dec.decode(&mut buf) {
                    Ok(Some(frame)) => prop_assert!(frame.len() as u32 <= max),
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert!(e.len < 0 || e.len as u32 > max);
                        break 'feed;
                    }
                }
            }
        }
    }
}

// --- framing bounds --------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn frame_decoder_refuses_lengths_outside_the_limit(
        len in prop_oneof![any::<i32>(), -4i32..70_000],
        max in prop_oneof![0u32..70_000, Just(DEFAULT_MAX_FRAME)],
        have in 0usize..128,
    ) {
        // The length prefix followed by `have` bytes of a frame that is not complete yet (when
        // the length is legal).
        let have = if len >= 0 { have.min(len as usize).saturating_sub(1) } else { have };
        let mut buf = BytesMut::from(&len.to_be_bytes()[..]);
        buf.extend_from_slice(&vec![7u8; have]);
        let cap_before = buf.capacity();
        let res = FrameDecoder::new(max).decode(&mut buf);
        if len < 0 || len as u32 > max {
            prop_assert_eq!(res, Err(FrameTooLong { len, max }));
        } else if len == 0 {
            prop_assert_eq!(res, Ok(Some(Bytes::new())));
        } else {
            prop_assert_eq!(res, Ok(None));
            // Room for the whole frame, and never more than the largest legal frame needs.
            prop_assert!(buf.capacity() >= 4 + len as usize);
            prop_assert!(
                buf.capacity() <= (max as usize + 4).max(cap_before),
                "capacity {} for len {} max {} (was {})", buf.capacity(), len, max, cap_before
            );
        }
    }
}

#[test]
fn frame_decoder_waits_for_the_length_prefix() {
    let dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
    for n in 0..4 {
        let mut buf = BytesMut::from(&[0xffu8; 3][..n]);
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert_eq!(buf.len(), n);
    }
}

#[test]
fn frame_decoder_refuses_one_past_the_default_limit() {
    let dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
    let mut buf = BytesMut::from(&(0x100000i32).to_be_bytes()[..]);
    assert_eq!(dec.decode(&mut buf), Err(FrameTooLong { len: 0x100000, max: 0xfffff }));
    let mut buf = BytesMut::from(&(0xfffffi32).to_be_bytes()[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert!(buf.capacity() <= 0xfffff + 4);
}

// --- vector counts ---------------------------------------------------------------------------

/// A count far beyond the bytes that follow must fail before the vector is allocated.
fn assert_count_refused<T: Jute + std::fmt::Debug>(count: i32, tail: usize) {
    let mut raw = count.to_be_bytes().to_vec();
    raw.extend(vec![0u8; tail]);
    let buf = Bytes::from(raw);
    let (res, peak) = peak_alloc(|| from_bytes::<Vec<T>>(buf.clone()));
    assert_eq!(res.unwrap_err(), DecodeError::BadLength(count), "{}", std::any::type_name::<T>());
    assert!(peak < 256, "{}: allocated {peak} bytes for a refused count", std::any::type_name::<T>());
}

#[test]
fn oversized_vector_counts_are_refused_without_allocating() {
    for count in [i32::MAX, 1 << 20, 1000, 17] {
        assert_count_refused::<String>(count, 16);
        assert_count_refused::<Acl>(count, 0);
        assert_count_refused::<i64>(count, 8);
        assert_count_refused::<ClientInfo>(count, 4);
        assert_count_refused::<SubTxn>(count, 4);
    }
    for count in [-2, -100, i32::MIN] {
        assert_count_refused::<String>(count, 64);
    }
}

#[test]
fn record_vector_counts_are_checked_against_the_smallest_record() {
    // 100 ACL entries cannot fit in 100 bytes: each needs at least perms + two string lengths.
    let mut raw = 100i32.to_be_bytes().to_vec();
    raw.extend([0u8; 100]);
    let (res, peak) = peak_alloc(|| from_bytes::<Vec<Acl>>(Bytes::from(raw)));
    assert!(res.is_err());
    assert!(peak < 1024, "allocated {peak} bytes before failing");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_count_larger_than_the_input_is_refused(count in 1i32..i32::MAX, tail in vec(any::<u8>(), 0..64)) {
        prop_assume!(count as usize > tail.len());
        let mut raw = count.to_be_bytes().to_vec();
        raw.extend(&tail);
        let buf = Bytes::from(raw);
        let (res, peak) = peak_alloc(|| {
            (from_bytes::<Vec<String>>(buf.clone()).is_err(), from_bytes::<Vec<Acl>>(buf.clone()).is_err())
        });
        prop_assert_eq!(res, (true, true));
        prop_assert!(peak <= alloc_bound(buf.len()));
    }
}

// --- round trips ----------------------------------------------------------------------------

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-z/]{0,12}", 1 => "\\PC{0,8}"]
}

fn arb_bytes() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..24).prop_map(Bytes::from)
}

fn arb_opt_bytes() -> impl Strategy<Value = Option<Bytes>> {
    option::of(arb_bytes())
}

fn arb_strings() -> impl Strategy<Value = Vec<String>> {
    vec(arb_string(), 0..4)
}

fn arb_id() -> impl Strategy<Value = Id> {
    (arb_string(), arb_string()).prop_map(|(scheme, id)| Id { scheme, id })
}

fn arb_acls() -> impl Strategy<Value = Vec<Acl>> {
    vec((any::<i32>(), arb_id()).prop_map(|(perms, id)| Acl { perms, id }), 0..3)
}

fn arb_stat() -> impl Strategy<Value = Stat> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i32>(), any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |((czxid, mzxid, ctime, mtime), (version, cversion, aversion), (eo, dl, nc, pzxid))| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner: eo,
                data_length: dl,
                num_children: nc,
                pzxid,
            },
        )
}

fn arb_create() -> impl Strategy<Value = CreateRequest> {
    (arb_string(), arb_opt_bytes(), arb_acls(), any::<i32>())
        .prop_map(|(path, data, acl, flags)| CreateRequest { path, data, acl, flags })
}

/// Requests allowed inside a write multi.
fn arb_multi_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        arb_create().prop_map(Request::Create),
        arb_create().prop_map(Request::Create2),
        arb_create().prop_map(Request::CreateContainer),
        (arb_create(), any::<i64>()).prop_map(|(c, ttl)| Request::CreateTtl(CreateTtlRequest {
            path: c.path,
            data: c.data,
            acl: c.acl,
            flags: c.flags,
            ttl
        })),
        (arb_string(), any::<i32>())
            .prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        (arb_string(), arb_opt_bytes(), any::<i32>())
            .prop_map(|(path, data, version)| Request::SetData(SetDataRequest { path, data, version })),
        (arb_string(), any::<i32>())
            .prop_map(|(path, version)| Request::Check(CheckVersionRequest { path, version })),
    ]
}

fn arb_read_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        (arb_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::GetData(GetDataRequest { path, watch })),
        (arb_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::GetChildren(GetChildrenRequest { path, watch })),
    ]
}

fn arb_request() -> impl Strategy<Value = Request> {
    let watches = || (any::<i64>(), arb_strings(), arb_strings(), arb_strings());
    prop_oneof![
        arb_multi_op(),
        arb_read_op(),
        vec(arb_multi_op(), 0..5).prop_map(Request::Multi),
        vec(arb_read_op(), 0..5).prop_map(Request::MultiRead),
        (arb_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::Exists(ExistsRequest { path, watch })),
        (arb_string(), any::<bool>())
            .prop_map(|(path, watch)| Request::GetChildren2(GetChildren2Request { path, watch })),
        arb_string().prop_map(|path| Request::GetAcl(GetAclRequest { path })),
        (arb_string(), arb_acls(), any::<i32>())
            .prop_map(|(path, acl, version)| Request::SetAcl(SetAclRequest { path, acl, version })),
        arb_string().prop_map(|path| Request::Sync(SyncRequest { path })),
        (option::of(arb_string()), option::of(arb_string()), option::of(arb_string()), any::<i64>())
            .prop_map(|(joining_servers, leaving_servers, new_members, cur_config_id)| {
                Request::Reconfig(ReconfigRequest {
                    joining_servers,
                    leaving_servers,
                    new_members,
                    cur_config_id,
                })
            }),
        (arb_string(), any::<i32>()).prop_map(|(path, watcher_type)| {
            Request::CheckWatches(CheckWatchesRequest { path, watcher_type })
        }),
        (arb_string(), any::<i32>()).prop_map(|(path, watcher_type)| {
            Request::RemoveWatches(RemoveWatchesRequest { path, watcher_type })
        }),
        (any::<i32>(), arb_string(), arb_bytes())
            .prop_map(|(auth_type, scheme, auth)| Request::Auth(AuthPacket { auth_type, scheme, auth })),
        watches().prop_map(|(relative_zxid, data_watches, exist_watches, child_watches)| {
            Request::SetWatches(SetWatches { relative_zxid, data_watches, exist_watches, child_watches })
        }),
        (watches(), arb_strings(), arb_strings()).prop_map(|((relative_zxid, d, e, c), p, pr)| {
            Request::SetWatches2(SetWatches2 {
                relative_zxid,
                data_watches: d,
                exist_watches: e,
                child_watches: c,
                persistent_watches: p,
                persistent_recursive_watches: pr,
            })
        }),
        arb_bytes().prop_map(|token| Request::Sasl(GetSaslRequest { token })),
        arb_string().prop_map(|prefix_path| Request::GetEphemerals(GetEphemeralsRequest { prefix_path })),
        arb_string().prop_map(|path| Request::GetAllChildrenNumber(GetAllChildrenNumberRequest { path })),
        (arb_string(), any::<i32>())
            .prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode })),
        Just(Request::Ping),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
    ]
}

fn arb_error_code() -> impl Strategy<Value = ErrorCode> {
    (-130i32..=0).prop_filter_map("not an error code", ErrorCode::from_i32)
}

fn arb_op_result() -> impl Strategy<Value = OpResult> {
    prop_oneof![
        arb_string().prop_map(OpResult::Create),
        (arb_string(), arb_stat()).prop_map(|(p, s)| OpResult::Create2(p, s)),
        Just(OpResult::Delete),
        arb_stat().prop_map(OpResult::SetData),
        Just(OpResult::Check),
        arb_strings().prop_map(OpResult::GetChildren),
        (arb_opt_bytes(), arb_stat())
            .prop_map(|(data, stat)| OpResult::GetData(GetDataResponse { data, stat })),
        arb_error_code().prop_map(OpResult::Error),
    ]
}

/// A transaction together with the type it is logged under.
fn arb_single_txn() -> impl Strategy<Value = (OpCode, Txn)> {
    let create = (arb_string(), arb_opt_bytes(), arb_acls(), any::<bool>(), any::<i32>()).prop_map(
        |(path, data, acl, ephemeral, parent_cversion)| CreateTxn {
            path,
            data,
            acl,
            ephemeral,
            parent_cversion,
        },
    );
    prop_oneof![
        (prop::sample::select(vec![OpCode::Create, OpCode::Create2]), create)
            .prop_map(|(op, c)| (op, Txn::Create(c))),
        (arb_string(), arb_opt_bytes(), arb_acls(), any::<i32>(), any::<i64>()).prop_map(
            |(path, data, acl, parent_cversion, ttl)| {
                (OpCode::CreateTtl, Txn::CreateTtl(CreateTtlTxn { path, data, acl, parent_cversion, ttl }))
            }
        ),
        (arb_string(), arb_opt_bytes(), arb_acls(), any::<i32>()).prop_map(
            |(path, data, acl, parent_cversion)| {
                (
                    OpCode::CreateContainer,
                    Txn::CreateContainer(CreateContainerTxn { path, data, acl, parent_cversion }),
                )
            }
        ),
        arb_string().prop_map(|path| (OpCode::Delete, Txn::Delete(DeleteTxn { path }))),
        arb_string().prop_map(|path| (OpCode::DeleteContainer, Txn::DeleteContainer(DeleteTxn { path }))),
        (arb_string(), arb_opt_bytes(), any::<i32>()).prop_map(|(path, data, version)| (
            OpCode::SetData,
            Txn::SetData(SetDataTxn { path, data, version })
        )),
        (arb_string(), any::<i32>())
            .prop_map(|(path, version)| (OpCode::Check, Txn::Check(CheckVersionTxn { path, version }))),
        (arb_string(), arb_acls(), any::<i32>())
            .prop_map(|(path, acl, version)| (OpCode::SetAcl, Txn::SetAcl(SetAclTxn { path, acl, version }))),
        any::<i32>()
            .prop_map(|time_out| (OpCode::CreateSession, Txn::CreateSession(CreateSessionTxn { time_out }))),
        // A closeSession body with an empty list encodes as a count of 0 and reads back the same.
        arb_strings().prop_map(|paths2_delete| {
            (OpCode::CloseSession, Txn::CloseSession(CloseSessionTxn { paths2_delete }))
        }),
        any::<i32>().prop_map(|err| (OpCode::Error, Txn::Error(ErrorTxn { err }))),
    ]
}

fn arb_txn() -> impl Strategy<Value = (OpCode, Txn)> {
    prop_oneof![
        4 => arb_single_txn(),
        1 => vec(arb_single_txn(), 0..5).prop_map(|subs| (OpCode::Multi, Txn::Multi(subs))),
    ]
}

/// encode -> decode gives the value back, and its encoding again gives the same bytes.
fn record_round_trip<T: Jute + PartialEq + std::fmt::Debug>(v: &T) -> Result<(), TestCaseError> {
    let bytes = to_bytes(v);
    let mut r = Reader::new(Bytes::from(bytes.clone()));
    let back = T::read(&mut r).map_err(|e| TestCaseError::fail(format!("decode failed: {e}")))?;
    prop_assert_eq!(r.remaining(), 0);
    prop_assert_eq!(&back, v);
    prop_assert_eq!(to_bytes(&back), bytes);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn requests_round_trip(req in arb_request(), xid in any::<i32>()) {
        let header = RequestHeader { xid, op: req.op().code() };
        let mut frame = to_bytes(&header);
        req.encode(&mut frame);
        let mut r = Reader::new(Bytes::from(frame.clone()));
        let h = RequestHeader::read(&mut r).unwrap();
        prop_assert_eq!(&h, &header);
        let back = Request::decode(h.op, &mut r).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(r.remaining(), 0);
        prop_assert_eq!(&back, &req);
        let mut again = to_bytes(&h);
        back.encode(&mut again);
        prop_assert_eq!(again, frame);
    }

    #[test]
    fn multi_responses_round_trip(results in vec(arb_op_result(), 0..6)) {
        let mut body = Vec::new();
        encode_multi_response(&results, &mut body);
        let mut r = Reader::new(Bytes::from(body.clone()));
        let back = decode_multi_response(&mut r).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(r.remaining(), 0);
        prop_assert_eq!(&back, &results);
        let mut again = Vec::new();
        encode_multi_response(&back, &mut again);
        prop_assert_eq!(again, body);
    }

    #[test]
    fn txns_round_trip((op, txn) in arb_txn(), header in (any::<i64>(), any::<i32>(), any::<i64>(), any::<i64>())) {
        let h = TxnHeader { client_id: header.0, cxid: header.1, zxid: header.2, time: header.3, txn_type: op.code() };
        record_round_trip(&h)?;
        let mut body = Vec::new();
        txn.encode(&mut body);
        let mut r = Reader::new(Bytes::from(body.clone()));
        let back = Txn::decode(op, &mut r).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(r.remaining(), 0);
        prop_assert_eq!(&back, &txn);
        let mut again = Vec::new();
        back.encode(&mut again);
        prop_assert_eq!(again, body);
    }

    #[test]
    fn handshake_round_trips(
        (pv, zxid, timeout, session) in (any::<i32>(), any::<i64>(), any::<i32>(), any::<i64>()),
        passwd in arb_bytes(),
        read_only in option::of(any::<bool>()),
    ) {
        record_round_trip(&ConnectRequest {
            protocol_version: pv,
            last_zxid_seen: zxid,
            time_out: timeout,
            session_id: session,
            passwd: passwd.clone(),
            read_only,
        })?;
        record_round_trip(&ConnectResponse { protocol_version: pv, time_out: timeout, session_id: session, passwd, read_only })?;
    }

    #[test]
    fn reply_records_round_trip(
        stat in arb_stat(),
        data in arb_opt_bytes(),
        acl in arb_acls(),
        children in arb_strings(),
        path in arb_string(),
        (xid, zxid, err) in (any::<i32>(), any::<i64>(), any::<i32>()),
        who in vec((arb_string(), arb_string()), 0..3),
    ) {
        record_round_trip(&ReplyHeader { xid, zxid, err })?;
        record_round_trip(&GetDataResponse { data, stat: stat.clone() })?;
        record_round_trip(&GetAclResponse { acl, stat: stat.clone() })?;
        record_round_trip(&GetChildren2Response { children: children.clone(), stat: stat.clone() })?;
        record_round_trip(&Create2Response { path: path.clone(), stat })?;
        record_round_trip(&WatcherEvent { event_type: xid, state: err, path })?;
        record_round_trip(&GetEphemeralsResponse { ephemerals: children })?;
        let client_info = who.into_iter().map(|(auth_scheme, user)| ClientInfo { auth_scheme, user }).collect();
        record_round_trip(&WhoAmIResponse { client_info })?;
    }

    /// Null and empty buffers are different values and stay different.
    #[test]
    fn null_data_stays_apart_from_empty(path in arb_string(), version in any::<i32>()) {
        for data in [None, Some(Bytes::new())] {
            let req = SetDataRequest { path: path.clone(), data: data.clone(), version };
            let back: SetDataRequest = from_bytes(to_bytes(&req)).unwrap();
            prop_assert_eq!(back.data, data);
        }
    }
}

#[test]
fn multi_ops_outside_their_kind_are_refused() {
    // A getData inside a write multi, and a create inside a multiRead.
    let mut write = Vec::new();
    Request::Multi(vec![]).encode(&mut write);
    let mut bad = Vec::new();
    MultiHeader { op: OpCode::GetData.code(), done: false, err: -1 }.write(&mut bad);
    GetDataRequest { path: "/a".into(), watch: false }.write(&mut bad);
    bad.extend_from_slice(&write);
    let err = Request::decode(OpCode::Multi.code(), &mut Reader::new(Bytes::from(bad))).unwrap_err();
    assert_eq!(err, RequestError::BadMultiOp(OpCode::GetData.code()));
    assert_eq!(err.code(), ErrorCode::MarshallingError);

    let mut bad = Vec::new();
    MultiHeader { op: OpCode::Create.code(), done: false, err: -1 }.write(&mut bad);
    CreateRequest::default().write(&mut bad);
    bad.extend_from_slice(&write);
    let err = Request::decode(OpCode::MultiRead.code(), &mut Reader::new(Bytes::from(bad))).unwrap_err();
    assert_eq!(err, RequestError::BadMultiOp(OpCode::Create.code()));
}

#[test]
fn unknown_opcodes_answer_unimplemented() {
    for op in [0, 10, 23, 99, 108, -10, -1, i32::MIN] {
        let err = Request::decode(op, &mut Reader::new(Bytes::new())).unwrap_err();
        assert_eq!(err, RequestError::Unknown(op));
        assert_eq!(err.code(), ErrorCode::Unimplemented);
    }
}

#[test]
fn a_nearly_complete_frame_reserves_no_more_than_the_limit() {
    // Most of a frame already buffered: growing by doubling would reserve about twice the frame.
    for (max, len, have) in [(100u32, 100usize, 99usize), (DEFAULT_MAX_FRAME, 0xfffff, 0xf0000), (64, 40, 30)]
    {
        let mut buf = BytesMut::from(&(len as i32).to_be_bytes()[..]);
        buf.extend_from_slice(&vec![1u8; have]);
        assert_eq!(FrameDecoder::new(max).decode(&mut buf), Ok(None));
        assert!(buf.capacity() >= 4 + len);
        assert!(buf.capacity() <= max as usize + 4, "capacity {} for max {max}", buf.capacity());
        assert_eq!(buf.len(), 4 + have);
    }
}
