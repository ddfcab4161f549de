//! Fast Leader Election notifications: the payload of every election-port message.

use bytes::{Buf, BufMut, Bytes};

/// The notification version Apache 3.5+ sends: the one that carries the sender's config.
pub const NOTIFICATION_VERSION: i32 = 2;

/// A server's role as carried in a notification (and as an election outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerState {
    /// Electing a leader.
    Looking,
    /// Following a leader.
    Following,
    /// Leading.
    Leading,
    /// Observing a leader (a non-voter).
    Observing,
}

impl PeerState {
    /// The wire number: 0 LOOKING, 1 FOLLOWING, 2 LEADING, 3 OBSERVING.
    pub fn to_wire(self) -> i32 {
        match self {
            PeerState::Looking => 0,
            PeerState::Following => 1,
            PeerState::Leading => 2,
            PeerState::Observing => 3,
        }
    }

    /// The state for a wire number; `None` for any other value (Apache skips such a message).
    pub fn from_wire(v: i32) -> Option<PeerState> {
        match v {
            0 => Some(PeerState::Looking),
            1 => Some(PeerState::Following),
            2 => Some(PeerState::Leading),
            3 => Some(PeerState::Observing),
            _ => None,
        }
    }
}

/// One election notification: the sender's state and the vote it currently holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The sender's state.
    pub state: PeerState,
    /// The proposed leader's sid (`i64::MIN` from a non-voter that has no proposal).
    pub leader: i64,
    /// The proposed leader's last logged zxid.
    pub zxid: i64,
    /// The sender's election round (logical clock).
    pub election_epoch: i64,
    /// The proposed leader's current epoch.
    pub peer_epoch: i64,
    /// The notification version: 0 for the 28- and 40-byte legacy forms, otherwise as sent.
    pub version: i32,
    /// The sender's quorum config string (see [`crate::config`]), raw; present when `version > 1`.
    pub config: Option<Bytes>,
}

/// Why a notification was skipped. Apache logs and drops such a message; the connection stays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotificationError {
    /// Shorter than the 28 bytes of the oldest form.
    #[error("notification of {0} bytes is shorter than 28")]
    TooShort(usize),
    /// The message ended inside a field.
    #[error("notification truncated at offset {offset} of {len}")]
    Truncated {
        /// Where the missing field started.
        offset: usize,
        /// The message length.
        len: usize,
    },
    /// The config length was negative or longer than the message.
    #[error("notification config length {0} out of range")]
    BadConfigLength(i32),
    /// The state number was not 0..=3.
    #[error("unknown peer state {0}")]
    UnknownState(i32),
}

impl Notification {
    /// Encodes the version-2 form Apache 3.5+ sends: 44 bytes of header, then the config (an absent
    /// config is sent as an empty one). Decoding a legacy form and re-encoding thus upgrades it.
    pub fn encode(&self) -> Vec<u8> {
        let config: &[u8] = self.config.as_deref().unwrap_or(&[]);
        let mut out = Vec::with_capacity(44 + config.len());
        out.put_i32(self.state.to_wire());
        out.put_i64(self.leader);
        out.put_i64(self.zxid);
        out.put_i64(self.election_epoch);
        out.put_i64(self.peer_epoch);
        out.put_i32(NOTIFICATION_VERSION);
        out.put_i32(config.len() as i32);
        out.put_slice(config);
        out
    }

    /// Decodes a notification of any form, chosen by its total length as Apache does:
    /// under 28 bytes is refused; exactly 28 has no peer epoch (taken as `zxid >> 32`); exactly 40 has
    /// a peer epoch and four ignored bytes (version 0); longer reads the version and, when it is above
    /// 1, a config length (0..=message length) and the config. Trailing bytes are ignored.
    ///
    /// Errors: [`NotificationError`] for a short, truncated or out-of-range message or an unknown state.
    pub fn decode(msg: &Bytes) -> Result<Notification, NotificationError> {
        let len = msg.len();
        if len < 28 {
            return Err(NotificationError::TooShort(len));
        }
        let mut r = msg.clone();
        let raw_state = r.get_i32();
        let leader = r.get_i64();
        let zxid = r.get_i64();
        let election_epoch = r.get_i64();
        let truncated = |offset| NotificationError::Truncated { offset, len };
        let (peer_epoch, version, config) = if len == 28 {
            (zxid >> 32, 0, None)
        } else {
            if r.remaining() < 8 {
                return Err(truncated(28));
            }
            let peer_epoch = r.get_i64();
            if len == 40 {
                (peer_epoch, 0, None)
            } else {
                if r.remaining() < 4 {
                    return Err(truncated(36));
                }
                let version = r.get_i32();
                if version > 1 {
                    if r.remaining() < 4 {
                        return Err(truncated(40));
                    }
                    let config_len = r.get_i32();
                    if config_len < 0 || config_len as usize > len {
                        return Err(NotificationError::BadConfigLength(config_len));
                    }
                    if r.remaining() < config_len as usize {
                        return Err(truncated(44));
                    }
                    (peer_epoch, version, Some(r.split_to(config_len as usize)))
                } else {
                    (peer_epoch, version, None)
                }
            }
        };
        let state = PeerState::from_wire(raw_state).ok_or(NotificationError::UnknownState(raw_state))?;
        Ok(Notification { state, leader, zxid, election_epoch, peer_epoch, version, config })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Notification {
        Notification {
            state: PeerState::Looking,
            leader: 3,
            zxid: 0x1_0000_0005,
            election_epoch: 2,
            peer_epoch: 1,
            version: 2,
            config: Some(Bytes::from_static(b"server.1=h:1:2:participant\nversion=0")),
        }
    }

    #[test]
    fn version_2_round_trips() {
        let n = sample();
        let bytes = n.encode();
        assert_eq!(bytes.len(), 44 + 36);
        assert_eq!(Notification::decode(&Bytes::from(bytes)).unwrap(), n);
    }

    #[test]
    fn legacy_forms_are_read_by_length() {
        let full = Bytes::from(sample().encode());
        let n28 = Notification::decode(&full.slice(..28)).unwrap();
        assert_eq!((n28.peer_epoch, n28.version, n28.config), (1, 0, None));
        let mut b40 = full.slice(..36).to_vec();
        b40.extend_from_slice(&[9, 9, 9, 9]);
        let n40 = Notification::decode(&Bytes::from(b40)).unwrap();
        assert_eq!((n40.peer_epoch, n40.version, n40.config), (1, 0, None));
        // A version-1 message longer than 40 bytes carries no config.
        let mut v1 = full.slice(..36).to_vec();
        v1.extend_from_slice(&1i32.to_be_bytes());
        v1.extend_from_slice(b"junk");
        let n = Notification::decode(&Bytes::from(v1)).unwrap();
        assert_eq!((n.version, n.config), (1, None));
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        let full = Bytes::from(sample().encode());
        assert_eq!(Notification::decode(&full.slice(..27)), Err(NotificationError::TooShort(27)));
        for len in (29..40).chain(41..44) {
            assert!(
                matches!(Notification::decode(&full.slice(..len)), Err(NotificationError::Truncated { .. })),
                "len {len}"
            );
        }
        assert!(matches!(Notification::decode(&full.slice(..50)), Err(NotificationError::Truncated { .. })));
        let mut bad = full.to_vec();
        bad[40..44].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(
            Notification::decode(&Bytes::from(bad.clone())),
            Err(NotificationError::BadConfigLength(-1))
        );
        bad[40..44].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            Notification::decode(&Bytes::from(bad.clone())),
            Err(NotificationError::BadConfigLength(i32::MAX))
        );
        bad[0..4].copy_from_slice(&7i32.to_be_bytes());
        bad[40..44].copy_from_slice(&0i32.to_be_bytes());
        assert_eq!(Notification::decode(&Bytes::from(bad)), Err(NotificationError::UnknownState(7)));
    }

    proptest! {
        #[test]
        fn decode_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = Notification::decode(&Bytes::from(bytes));
        }

        #[test]
        fn round_trip(state in 0i32..4, leader: i64, zxid: i64, ee: i64, pe: i64,
                      config in proptest::collection::vec(any::<u8>(), 0..64)) {
            let n = Notification {
                state: PeerState::from_wire(state).unwrap(), leader, zxid, election_epoch: ee,
                peer_epoch: pe, version: 2, config: Some(Bytes::from(config)),
            };
            prop_assert_eq!(Notification::decode(&Bytes::from(n.encode())).unwrap(), n);
        }
    }
}
