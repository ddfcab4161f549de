//! The election port: the connection handshake, the message framing and the notifications.

use bytes::{Bytes, BytesMut};
use zk_quorum::wire::notification::NOTIFICATION_VERSION;
use zk_quorum::wire::{decode_election_frame, decode_handshake, encode_election_frame, Notification};

/// A notification payload: a decoded `Notification` re-encodes (always in the version-2 form,
/// which upgrades a legacy one: an absent config goes out empty) to bytes that decode to the same
/// fields in that form, and re-encoding that gives the same bytes.
pub fn notification(data: &[u8]) {
    let Ok(n) = Notification::decode(&Bytes::copy_from_slice(data)) else {
        return;
    };
    let encoded = n.encode();
    let again =
        Notification::decode(&Bytes::from(encoded.clone())).expect("a re-encoded notification decodes");
    let upgraded = Notification {
        version: NOTIFICATION_VERSION,
        config: Some(n.config.clone().unwrap_or_default()),
        ..n
    };
    assert_eq!(again, upgraded);
    assert_eq!(again.encode(), encoded, "encoding is stable");
}

/// The bytes a connecting peer sends first: the handshake, then framed messages. A decoded
/// handshake consumes no more than the input, and re-encodes (when encodable) to bytes that
/// decode to the same handshake, wholly consumed; the frames after it come off in order, each
/// within the input, and re-frame to the very same bytes.
pub fn handshake(data: &[u8]) {
    let Ok(Some((hs, used))) = decode_handshake(data) else {
        return;
    };
    assert!(used <= data.len(), "consumed {used} of {}", data.len());
    if let Ok(encoded) = hs.encode() {
        let (again, used2) = decode_handshake(&encoded)
            .expect("a re-encoded handshake decodes")
            .expect("a re-encoded handshake is complete");
        assert_eq!(again, hs);
        assert_eq!(used2, encoded.len());
    }
    let mut buf = BytesMut::from(&data[used..]);
    let mut reframed = Vec::new();
    let mut taken = 0;
    while let Ok(Some(msg)) = decode_election_frame(&mut buf) {
        encode_election_frame(&msg, &mut reframed).expect("a decoded frame re-frames");
        taken += 4 + msg.len();
        // Each message goes through the notification decoder as the election does.
        notification(&msg);
    }
    assert_eq!(&reframed[..], &data[used..used + taken]);
}
