//! Length-prefixed framing: a 4-byte big-endian length, then that many bytes.

use bytes::{Buf, Bytes, BytesMut};

/// Apache ZooKeeper's default `jute.maxbuffer`: 0xfffff bytes.
pub const DEFAULT_MAX_FRAME: u32 = 0xfffff;

/// A frame length that the peer must not send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frame length {len} outside 0..={max}")]
pub struct FrameTooLong {
    /// The length read.
    pub len: i32,
    /// The limit in force.
    pub max: u32,
}

/// Splits frames off a receive buffer, refusing lengths that are negative or over the limit.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max: u32,
}

impl FrameDecoder {
    /// A decoder that accepts frames of up to `max` bytes.
    pub fn new(max: u32) -> Self {
        FrameDecoder { max }
    }

    /// The next whole frame from `buf`, `Ok(None)` if more bytes are needed.
    ///
    /// Errors when the length prefix is negative or over the limit; the connection must then close.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameTooLong> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if len < 0 || len as u32 > self.max {
            return Err(FrameTooLong { len, max: self.max });
        }
        let need = 4 + len as usize;
        if buf.len() < need {
            if buf.capacity() < need {
                // Room for exactly the announced (bounded) frame. `BytesMut::reserve` grows like a
                // Vec, doubling, which could hold close to twice the limit per connection.
                let mut exact = BytesMut::with_capacity(need);
                exact.extend_from_slice(buf);
                *buf = exact;
            }
            return Ok(None);
        }
        let len = need - 4;
        buf.advance(4);
        Ok(Some(buf.split_to(len).freeze()))
    }
}

/// Appends a frame holding whatever `fill` writes, patching the length prefix afterwards.
pub fn write_frame(out: &mut BytesMut, fill: impl FnOnce(&mut BytesMut)) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    fill(out);
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}
