//! The jute binary encoding: big-endian fixed-size integers, length-prefixed buffers, strings and
//! vectors, where a length of -1 stands for null.
//!
//! Decoding never trusts a length: every length is checked against the bytes that remain before
//! anything is allocated, so a decoder's allocation is bounded by the frame it reads.

use bytes::{Buf, BufMut, Bytes};

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the record did.
    #[error("record truncated: needed {needed} more bytes, {remaining} remain")]
    Truncated {
        /// Bytes the next field needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A length prefix was negative (other than -1 for null) or larger than the input.
    #[error("bad length {0}")]
    BadLength(i32),
    /// A field held a value its type does not allow (an unknown opcode, an unknown enum value...).
    #[error("invalid value {value} for {what}")]
    InvalidValue {
        /// What was being decoded.
        what: &'static str,
        /// The value that was read.
        value: i64,
    },
}

/// A cursor over one frame's bytes. Buffers are handed out as zero-copy slices of the frame.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    /// Reads from `buf`.
    pub fn new(buf: Bytes) -> Self {
        Reader { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The bytes not yet read, without consuming them.
    pub fn rest(&self) -> &Bytes {
        &self.buf
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated { needed: n, remaining: self.buf.len() })
        } else {
            Ok(())
        }
    }

    /// Reads a big-endian i32.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    /// Reads a big-endian i64.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    /// Reads a length prefix: `None` for -1 (null), an error for any other negative value or a length
    /// longer than what remains, scaled by `min_elem` bytes per element.
    pub fn len_prefix(&mut self, min_elem: usize) -> Result<Option<usize>, DecodeError> {
        let n = self.i32()?;
        if n == -1 {
            return Ok(None);
        }
        if n < 0 || (n as usize).saturating_mul(min_elem) > self.buf.len() {
            return Err(DecodeError::BadLength(n));
        }
        Ok(Some(n as usize))
    }

    /// Reads `n` raw bytes as a zero-copy slice.
    pub fn bytes(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }
}

/// A value with a jute encoding.
pub trait Jute: Sized {
    /// Appends the encoding of `self` to `out`.
    fn write<B: BufMut>(&self, out: &mut B);
    /// Decodes one value from `r`.
    fn read(r: &mut Reader) -> Result<Self, DecodeError>;
    /// Smallest number of bytes one encoded value occupies; bounds vector counts while decoding.
    const MIN_SIZE: usize = 1;
}

impl Jute for i32 {
    fn write<B: BufMut>(&self, out: &mut B) {
        out.put_i32(*self);
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.i32()
    }
    const MIN_SIZE: usize = 4;
}

impl Jute for i64 {
    fn write<B: BufMut>(&self, out: &mut B) {
        out.put_i64(*self);
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        r.i64()
    }
    const MIN_SIZE: usize = 8;
}

impl Jute for bool {
    fn write<B: BufMut>(&self, out: &mut B) {
        out.put_u8(u8::from(*self));
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        // Java's DataInput.readBoolean: any non-zero byte is true.
        Ok(r.u8()? != 0)
    }
}

/// `buffer` that may be null (-1 length). Used where ZooKeeper keeps null apart from empty: znode data.
impl Jute for Option<Bytes> {
    fn write<B: BufMut>(&self, out: &mut B) {
        match self {
            None => out.put_i32(-1),
            Some(b) => {
                out.put_i32(b.len() as i32);
                out.put_slice(b);
            }
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.len_prefix(1)? {
            None => Ok(None),
            Some(n) => Ok(Some(r.bytes(n)?)),
        }
    }
    const MIN_SIZE: usize = 4;
}

/// `buffer` where null reads as empty.
impl Jute for Bytes {
    fn write<B: BufMut>(&self, out: &mut B) {
        out.put_i32(self.len() as i32);
        out.put_slice(self);
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Option::<Bytes>::read(r)?.unwrap_or_default())
    }
    const MIN_SIZE: usize = 4;
}

/// `ustring` where null reads as empty. Invalid UTF-8 is replaced, as Java's decoder does.
impl Jute for String {
    fn write<B: BufMut>(&self, out: &mut B) {
        out.put_i32(self.len() as i32);
        out.put_slice(self.as_bytes());
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Option::<String>::read(r)?.unwrap_or_default())
    }
    const MIN_SIZE: usize = 4;
}

/// `ustring` that may be null.
impl Jute for Option<String> {
    fn write<B: BufMut>(&self, out: &mut B) {
        match self {
            None => out.put_i32(-1),
            Some(s) => s.write(out),
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.len_prefix(1)? {
            None => Ok(None),
            Some(n) => {
                let b = r.bytes(n)?;
                Ok(Some(match std::str::from_utf8(&b) {
                    Ok(s) => s.to_owned(),
                    Err(_) => String::from_utf8_lossy(&b).into_owned(),
                }))
            }
        }
    }
    const MIN_SIZE: usize = 4;
}

/// `vector<T>` where null reads as empty.
impl<T: Jute> Jute for Vec<T> {
    fn write<B: BufMut>(&self, out: &mut B) {
        out.put_i32(self.len() as i32);
        for v in self {
            v.write(out);
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Option::<Vec<T>>::read(r)?.unwrap_or_default())
    }
    const MIN_SIZE: usize = 4;
}

/// `vector<T>` that may be null.
impl<T: Jute> Jute for Option<Vec<T>> {
    fn write<B: BufMut>(&self, out: &mut B) {
        match self {
            None => out.put_i32(-1),
            Some(v) => v.write(out),
        }
    }
    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.len_prefix(T::MIN_SIZE)? {
            None => Ok(None),
            Some(n) => {
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(T::read(r)?);
                }
                Ok(Some(v))
            }
        }
    }
    const MIN_SIZE: usize = 4;
}

/// Encodes a value into a fresh buffer.
pub fn to_bytes<T: Jute>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    v.write(&mut out);
    out
}

/// Decodes a value from the whole of `buf`; trailing bytes are allowed, as Apache ZooKeeper allows them.
pub fn from_bytes<T: Jute>(buf: impl Into<Bytes>) -> Result<T, DecodeError> {
    T::read(&mut Reader::new(buf.into()))
}

/// Declares a jute record: a struct with public fields encoded in declaration order.
#[macro_export]
macro_rules! record {
    ($(#[$m:meta])* pub struct $name:ident { $( $(#[$fm:meta])* pub $f:ident : $t:ty ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name { $( $(#[$fm])* pub $f: $t ),* }

        impl $crate::jute::Jute for $name {
            #[allow(unused_variables)]
            fn write<B: ::bytes::BufMut>(&self, out: &mut B) {
                $( $crate::jute::Jute::write(&self.$f, out); )*
            }
            #[allow(unused_variables)]
            fn read(r: &mut $crate::jute::Reader) -> Result<Self, $crate::jute::DecodeError> {
                Ok(Self { $( $f: $crate::jute::Jute::read(r)? ),* })
            }
            // The sum of the fields' smallest encodings, so that a vector count of records is checked
            // against what that many records need at least; without it a count of n one-byte
            // "records" would allocate n full structs (56 bytes each for Acl) before failing. Never 0.
            const MIN_SIZE: usize = {
                let n = 0 $( + <$t as $crate::jute::Jute>::MIN_SIZE )*;
                if n == 0 { 1 } else { n }
            };
        }
    };
}
