//! [`ThinBytes`]: an owned byte buffer in 12 bytes (a pointer and a 32-bit length, aligned to 4),
//! where a `Box<[u8]>` takes 16. A znode keeps one; with a million of them the 4 bytes, and the
//! 4 of padding they let the node drop, are 8 MB.

use std::ptr::NonNull;

/// An owned, immutable-length byte buffer of at most `u32::MAX` bytes: a `Box<[u8]>` whose
/// length is kept in 32 bits, packed to an alignment of 4 so that the struct holding it can put
/// a 4-byte field beside it.
#[repr(C, packed(4))]
pub(crate) struct ThinBytes {
    /// The first byte of what `Box::<[u8]>::into_raw` gave (dangling when empty, as a `Box`'s).
    ptr: NonNull<u8>,
    /// Its length.
    len: u32,
}

// SAFETY: a ThinBytes owns its bytes as the Box<[u8]> it was made from did, and that Box is Send
// and Sync; nothing is shared with another owner.
unsafe impl Send for ThinBytes {}
// SAFETY: as above; `&ThinBytes` only gives out `&[u8]`.
unsafe impl Sync for ThinBytes {}

impl ThinBytes {
    /// Takes ownership of `b`. Panics if it holds more than `u32::MAX` bytes, which a znode
    /// cannot: its path and data arrive in one frame, and frames are limited to `jute.maxbuffer`
    /// (an int in Apache ZooKeeper, so under 2 GiB).
    pub(crate) fn new(b: Box<[u8]>) -> Self {
        let len = u32::try_from(b.len()).expect("a znode's buffer is under 4 GiB (frames are limited)");
        let raw: *mut [u8] = Box::into_raw(b);
        // A Box's pointer is never null (a dangling, aligned one when empty).
        let ptr = NonNull::new(raw.cast::<u8>()).unwrap_or(NonNull::dangling());
        ThinBytes { ptr, len }
    }

    /// The bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        let (ptr, len) = (self.ptr, self.len);
        // SAFETY: `ptr` and `len` are those of the Box<[u8]> this owns (see `new`), which stays
        // alive and unchanged in length until `drop`; the shared borrow of self keeps it so.
        unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len as usize) }
    }

    /// The bytes, to change in place.
    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        let (ptr, len) = (self.ptr, self.len);
        // SAFETY: as in `as_slice`, and the unique borrow of self makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len as usize) }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let (ptr, len) = (self.ptr, self.len);
        let raw = std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len as usize);
        // SAFETY: `raw` is exactly the pointer `Box::into_raw` returned in `new` (same address and
        // length), not freed before: this is the one owner, dropped once.
        drop(unsafe { Box::from_raw(raw) });
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> Self {
        ThinBytes::new(self.as_slice().into())
    }
}

impl std::fmt::Debug for ThinBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owns_clones_and_changes_its_bytes() {
        assert_eq!(std::mem::size_of::<ThinBytes>(), 12);
        assert_eq!(std::mem::size_of::<Option<ThinBytes>>(), 12);
        for len in [0usize, 1, 7, 128, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut t = ThinBytes::new(bytes.clone().into_boxed_slice());
            assert_eq!(t.as_slice(), bytes.as_slice());
            let c = t.clone();
            if let Some(b) = t.as_mut_slice().first_mut() {
                *b = 0xff;
            }
            assert_eq!(c.as_slice(), bytes.as_slice(), "a clone has its own bytes");
            assert_eq!(t.as_slice().first().copied(), if len > 0 { Some(0xff) } else { None });
            assert_eq!(t.as_slice().len(), len);
            drop(t);
            assert_eq!(c.as_slice(), bytes.as_slice());
        }
        // Moved across a thread and dropped there.
        let t = ThinBytes::new(vec![1u8, 2, 3].into_boxed_slice());
        #[allow(clippy::disallowed_methods)] // A test's own thread, to check Send.
        let back = std::thread::spawn(move || t.as_slice().to_vec()).join().ok();
        assert_eq!(back, Some(vec![1, 2, 3]));
    }
}
