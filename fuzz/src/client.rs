//! Client frames as the server's connection task reads them (the length prefix already taken off).

use bytes::{Bytes, BytesMut};
use zk_proto::jute::{self, Jute, Reader};
use zk_proto::{ConnectRequest, Request, RequestHeader};

/// The handshake frame, the first a connection sends: a decoded `ConnectRequest` re-encodes to
/// bytes that decode to the same value.
pub fn connect(data: &[u8]) {
    let Ok(req) = jute::from_bytes::<ConnectRequest>(Bytes::copy_from_slice(data)) else {
        return;
    };
    let again: ConnectRequest =
        jute::from_bytes(jute::to_bytes(&req)).expect("a re-encoded ConnectRequest decodes");
    assert_eq!(again, req);
}

/// Every later frame: a `RequestHeader`, then the body decoded by the header's opcode. Header and
/// body re-encode to bytes that decode to the same header and body, with nothing left over.
pub fn request(data: &[u8]) {
    let Some((hdr, req)) = decode(Bytes::copy_from_slice(data)) else {
        return;
    };
    let mut out = BytesMut::new();
    hdr.write(&mut out);
    req.encode(&mut out);
    let encoded = out.freeze();
    let (hdr2, req2) = decode(encoded.clone()).expect("a re-encoded request decodes");
    assert_eq!(hdr2, hdr);
    assert_eq!(req2, req);
    let mut r = Reader::new(encoded);
    RequestHeader::read(&mut r).expect("header");
    Request::decode(hdr.op, &mut r).expect("body");
    assert_eq!(r.remaining(), 0, "a re-encoded request has no trailing bytes");
}

fn decode(frame: Bytes) -> Option<(RequestHeader, Request)> {
    let mut r = Reader::new(frame);
    let hdr = RequestHeader::read(&mut r).ok()?;
    let req = Request::decode(hdr.op, &mut r).ok()?;
    Some((hdr, req))
}
