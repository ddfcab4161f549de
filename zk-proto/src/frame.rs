//! Length-prefixed framing: a 4-byte big-endian length, then that many bytes.

use bytes::{Buf, Bytes, BytesMut};

/// Apache ZooKeeper's default `jute.maxbuffer`: 0xfffff bytes.
pub const DEFAULT_MAX_FRAME: u32 = 0xfffff;

/// Least capacity of a receive buffer that [`FrameDecoder::decode`] makes for a frame that did not
/// fit the one it was given (unless the largest frame allowed is smaller): what the reads after
/// that frame fill.
pub const MIN_READ_BLOCK: usize = 16 * 1024;

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
                // Room for the announced (bounded) frame, and no more when it is large:
                // `BytesMut::reserve` grows like a Vec, doubling, which could hold close to twice
                // the limit per connection. A small frame gets a block: a BytesMut grows back to
                // the capacity it was made with, so a buffer made for one small frame would take
                // the frames after it a read each (two recv calls per request under a pipelined
                // load, where a block takes a hundred). Never more than the largest frame needs.
                let block = MIN_READ_BLOCK.min(self.max as usize + 4);
                let mut fresh = BytesMut::with_capacity(need.max(block));
                fresh.extend_from_slice(buf);
                *buf = fresh;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `stream` into `buf` the way tokio's `read_buf` does (into the spare capacity, after
    /// reserving 64 bytes when there is none), decoding every whole frame after each read;
    /// returns the frames and the number of reads.
    fn read_all(stream: &[u8], mut buf: BytesMut, dec: FrameDecoder) -> (Vec<Bytes>, usize) {
        let (mut frames, mut reads, mut at) = (Vec::new(), 0, 0);
        while at < stream.len() {
            if buf.capacity() == buf.len() {
                buf.reserve(64);
            }
            let n = (buf.capacity() - buf.len()).min(stream.len() - at);
            buf.extend_from_slice(&stream[at..at + n]);
            at += n;
            reads += 1;
            while let Some(f) = dec.decode(&mut buf).expect("lengths in range") {
                frames.push(f);
            }
        }
        (frames, reads)
    }

    #[test]
    fn pipelined_small_frames_take_many_to_a_read() {
        // 2,000 frames of 150 bytes (a setData of 100 bytes is about that), back to back.
        let mut stream = Vec::new();
        for i in 0..2000u32 {
            stream.extend_from_slice(&146u32.to_be_bytes());
            stream.extend_from_slice(&i.to_be_bytes());
            stream.extend_from_slice(&[7; 142]);
        }
        let (frames, reads) =
            read_all(&stream, BytesMut::with_capacity(16 * 1024), FrameDecoder::new(DEFAULT_MAX_FRAME));
        assert_eq!(frames.len(), 2000);
        assert!(frames.iter().enumerate().all(|(i, f)| f[..4] == (i as u32).to_be_bytes()));
        // 300,000 bytes in blocks of 16 KiB, and a short read to finish each frame that straddles
        // a block's end: about 37. A buffer sized to one frame would take one read per frame.
        assert!(reads < 60, "{reads} reads for 2,000 frames");
    }

    #[test]
    fn a_large_frame_gets_exactly_its_room() {
        let len = 600_000usize;
        let mut stream = (len as u32).to_be_bytes().to_vec();
        stream.resize(4 + len, 1);
        let mut buf = BytesMut::with_capacity(16 * 1024);
        buf.extend_from_slice(&stream[..1000]);
        let dec = FrameDecoder::new(DEFAULT_MAX_FRAME);
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert_eq!(buf.capacity(), 4 + len, "room for the frame, not double");
        buf.extend_from_slice(&stream[1000..]);
        assert_eq!(dec.decode(&mut buf).ok().flatten().map(|f| f.len()), Some(len));
        assert_eq!(
            dec.decode(&mut BytesMut::from(&[0xff, 0, 0, 0][..])),
            Err(FrameTooLong { len: -16777216, max: DEFAULT_MAX_FRAME })
        );
    }
}
