//! zk-log: record payloads (as the log and PROPOSAL packets carry them) and recovery of a
//! damaged segment.

use bytes::{Bytes, BytesMut};
use zk_log::format::{decode_payload, encode_segment_header, record_crc, segment_name};
use zk_log::{FaultStorage, LogOptions, SegmentLog, Storage, StorageFile};
use zk_proto::{DeleteTxn, Jute, OpCode, Txn, TxnHeader};

/// A record payload: a decoded (TxnHeader, Txn) re-encodes to bytes that decode to the same pair.
pub fn record(data: &[u8]) {
    let Ok((hdr, txn)) = decode_payload(Bytes::copy_from_slice(data)) else {
        return;
    };
    let encoded = encode(&hdr, &txn);
    let (hdr2, txn2) = decode_payload(encoded).expect("a re-encoded payload decodes");
    assert_eq!(hdr2, hdr);
    assert_eq!(txn2, txn);
}

fn encode(hdr: &TxnHeader, txn: &Txn) -> Bytes {
    let mut out = BytesMut::new();
    hdr.write(&mut out);
    txn.encode(&mut out);
    out.freeze()
}

/// Small sizes, so each run stays in a few pages.
const OPTS: LogOptions = LogOptions { prealloc_bytes: 4096, segment_bytes_max: 1 << 20 };

/// A segment file made from the input, opened (recovered) by [`SegmentLog::open`]. The first byte
/// chooses how the file is made: bit 0 clear, the rest of the input is the whole file; set, a
/// valid header for zxid 1 and records with correct checksums built from the input (each record
/// `[txn type][body length][body]`, the txn header filled in with zxids 1, 2, ...), so recovery's
/// later checks are reached. Bit 1 then flips one byte, bit 2 cuts the file short, at the offset
/// the last two bytes of the input give.
///
/// Properties when it opens: the records it reports read back in zxid order, stopping at most at
/// a record whose body does not decode; one more transaction appends and syncs; the log
/// reopens with one more record, that transaction last, and the records before it unchanged.
pub fn segment(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = build_segment(mode, rest);
    let storage = FaultStorage::new(0);
    let mut f = storage.create(&segment_name(1)).expect("create");
    f.allocate(file.len().max(1) as u64).expect("allocate");
    f.write_at(0, &file).expect("write");
    f.set_len(file.len() as u64).expect("set_len");
    f.sync().expect("sync");
    drop(f);
    storage.sync_dir().expect("sync_dir");

    let Ok(mut log) = SegmentLog::open(storage.clone(), OPTS) else {
        return;
    };
    let before = read_all(&log);
    assert!(before.len() as u64 <= log.recovery().records);
    let last = log.last_zxid();
    if let Some((z, _)) = before.last() {
        assert!(*z <= last);
    }
    let zxid = last.max(0) + 1;
    let hdr = TxnHeader { client_id: 1, cxid: 1, zxid, time: 0, txn_type: OpCode::Delete as i32 };
    let txn = Txn::Delete(DeleteTxn { path: "/fuzz".into() });
    if log.commit(&[(&hdr, &txn)]).is_err() {
        // Only a log too large for the small options fails here; nothing to check then.
        return;
    }
    let records = log.recovery().records;
    drop(log);
    let log = SegmentLog::open(storage, OPTS).expect("a log that opened and took an append reopens");
    assert_eq!(log.recovery().records, records + 1, "the append survives the reopen");
    assert_eq!(log.last_zxid(), zxid);
    let after = read_all(&log);
    let n = before.len().min(after.len().saturating_sub(1));
    assert_eq!(&after[..n], &before[..n], "the records before the append are unchanged");
    let appended =
        log.read_from(zxid).expect("read_from").next().expect("the appended record").expect("decodes");
    assert_eq!((appended.header, appended.txn), (hdr, txn));
}

fn build_segment(mode: u8, rest: &[u8]) -> Vec<u8> {
    let (body, at) = if mode & 6 != 0 && rest.len() >= 2 {
        let (b, a) = rest.split_at(rest.len() - 2);
        (b, u16::from_be_bytes([a[0], a[1]]) as usize)
    } else {
        (rest, 0)
    };
    let mut file = if mode & 1 == 0 {
        body.to_vec()
    } else {
        let mut file = encode_segment_header(1).to_vec();
        let mut i = 0;
        let mut zxid = 1i64;
        while i + 2 <= body.len() {
            let (op, n) = (body[i] as i8 as i32, body[i + 1] as usize);
            let txn = &body[(i + 2).min(body.len())..(i + 2 + n).min(body.len())];
            i += 2 + n;
            let hdr = TxnHeader { client_id: 1, cxid: zxid as i32, zxid, time: 0, txn_type: op };
            let mut payload = Vec::new();
            hdr.write(&mut payload);
            payload.extend_from_slice(txn);
            let len = payload.len() as u32;
            file.extend_from_slice(&len.to_le_bytes());
            file.extend_from_slice(&record_crc(len, zxid as u64, &payload).to_le_bytes());
            file.extend_from_slice(&(zxid as u64).to_le_bytes());
            file.extend_from_slice(&payload);
            zxid += 1;
        }
        file
    };
    if !file.is_empty() {
        let at = at % file.len();
        if mode & 2 != 0 {
            file[at] ^= 0xff;
        } else if mode & 4 != 0 {
            file.truncate(at);
        }
    }
    file
}

/// The records from the first on, up to the first that does not read: (zxid, entry).
fn read_all<S: Storage>(log: &SegmentLog<S>) -> Vec<(i64, (TxnHeader, Txn))> {
    let Some(first) = log.first_zxid() else {
        return Vec::new();
    };
    let mut out: Vec<(i64, (TxnHeader, Txn))> = Vec::new();
    for e in log.read_from(first).expect("read_from the first zxid") {
        let Ok(e) = e else { break };
        if let Some((prev, _)) = out.last() {
            assert!(e.header.zxid > *prev, "zxids go up");
        }
        out.push((e.header.zxid, (e.header, e.txn)));
    }
    out
}
