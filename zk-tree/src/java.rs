//! Bits of Java behaviour that leak into ZooKeeper's observable output: `String.hashCode`,
//! the iteration order of a `java.util.HashSet<String>`, `java.util.Random`, and `String.split`.
//!
//! Apache ZooKeeper hands out children lists, ephemeral lists and closeSession's paths2Delete in
//! HashSet iteration order, so clients (and logged txns) see that order. We reproduce it from the
//! documented algorithms: buckets are `hash ^ (hash >>> 16)` masked by the table capacity (a power
//! of two that doubles once the size exceeds three quarters of it), and within a bucket entries
//! keep insertion order.

/// Java's `String.hashCode` over UTF-16 code units.
pub fn string_hash(s: &str) -> i32 {
    if s.is_ascii() {
        // An ASCII byte is its own UTF-16 code unit: no decoding.
        return ascii_hash(s.as_bytes());
    }
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

/// [`string_hash`] of ASCII bytes (each byte one UTF-16 code unit).
fn ascii_hash(b: &[u8]) -> i32 {
    debug_assert!(b.is_ascii());
    b.iter().fold(0i32, |h, &c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The bucket of a hash in a `HashMap` table of `capacity` (a power of two): `hash ^ (hash >>> 16)`
/// masked.
fn bucket_of_hash(h: i32, capacity: usize) -> usize {
    let h = h as u32;
    ((h ^ (h >> 16)) as usize) & (capacity - 1)
}

/// The bucket a string lands in inside a `HashMap` table of `capacity` (a power of two).
pub fn bucket(s: &str, capacity: usize) -> usize {
    bucket_of_hash(string_hash(s), capacity)
}

/// [`bucket`] of a string given as its UTF-8 bytes (a znode name read from its path's bytes,
/// skipping the UTF-8 check for the usual ASCII name). Bytes that are not UTF-8 hash as Java
/// would hash their lossy decoding (never the case for a path, which was a `&str`).
pub fn bucket_of_utf8(b: &[u8], capacity: usize) -> usize {
    let h = if b.is_ascii() { ascii_hash(b) } else { string_hash(&String::from_utf8_lossy(b)) };
    bucket_of_hash(h, capacity)
}

/// Smallest table capacity (>= `initial`, a power of two) a HashMap reaches after holding `max_len`
/// entries at once: it doubles whenever the size exceeds 0.75 of the capacity.
pub fn capacity_for(max_len: usize, initial: usize) -> usize {
    let mut cap = initial.max(1).next_power_of_two();
    while max_len > cap * 3 / 4 && cap < (1 << 30) {
        cap *= 2;
    }
    cap
}

/// Capacity of `new HashMap(other)` / `clone()` of a map with `len` entries:
/// `tableSizeFor(len / 0.75 + 1)`, or the default 16 when empty (the table is then made lazily).
pub fn capacity_for_copy(len: usize) -> usize {
    if len == 0 {
        return 16;
    }
    let want = ((len as f32) / 0.75f32 + 1.0f32) as usize;
    want.max(1).next_power_of_two().min(1 << 30)
}

/// Orders `items` (each with its insertion rank) as a Java HashSet of `capacity` iterates them.
pub fn hash_order<T: AsRef<str>>(items: &mut [(T, u64)], capacity: usize) {
    items.sort_by_cached_key(|(s, rank)| (bucket(s.as_ref(), capacity), *rank));
}

/// `java.util.Random`: the 48-bit linear congruential generator from its documentation.
pub struct JavaRandom {
    seed: u64,
}

const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const MASK48: u64 = (1 << 48) - 1;

impl JavaRandom {
    /// `new Random(seed)`.
    pub fn new(seed: i64) -> Self {
        JavaRandom { seed: (seed as u64 ^ MULTIPLIER) & MASK48 }
    }

    fn next(&mut self, bits: u32) -> i32 {
        self.seed = (self.seed.wrapping_mul(MULTIPLIER).wrapping_add(0xB)) & MASK48;
        (self.seed >> (48 - bits)) as i64 as i32
    }

    /// `nextInt()`.
    pub fn next_int(&mut self) -> i32 {
        self.next(32)
    }

    /// `nextBytes(out)`: each int fills up to four bytes, low byte first.
    pub fn next_bytes(&mut self, out: &mut [u8]) {
        let mut i = 0;
        while i < out.len() {
            let mut rnd = self.next_int();
            let n = (out.len() - i).min(4);
            for _ in 0..n {
                out[i] = rnd as u8;
                rnd >>= 8;
                i += 1;
            }
        }
    }
}

/// `s.split(sep)` with Java's rule of dropping trailing empty strings (an empty input gives one
/// empty string).
pub fn split_drop_trailing(s: &str, sep: char) -> Vec<&str> {
    if s.is_empty() {
        return vec![""];
    }
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() {
        // Java: "::".split(":") is an empty array.
        parts.clear();
    }
    parts
}

/// `Integer.parseInt`: optional sign, ASCII digits, i32 range.
pub fn parse_int(s: &str) -> Option<i32> {
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v: i64 = 0;
    for b in digits.bytes() {
        v = v * 10 + (b - b'0') as i64;
        if v > i32::MAX as i64 + 1 {
            return None;
        }
    }
    let v = if neg { -v } else { v };
    i32::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_hash_matches_java() {
        // Values computed by the JVM: "".hashCode()=0, "a"=97, "hello"=99162322,
        // "/zookeeper"=... checked via the polynomial.
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("hello"), 99162322);
        assert_eq!(string_hash("polygenelubricants"), i32::MIN);
        // Non-ASCII: "\u{e9}" is one UTF-16 unit (233), "\u{1f600}" a surrogate pair.
        assert_eq!(string_hash("\u{e9}"), 233);
        assert_eq!(string_hash("\u{1f600}"), 0xD83D * 31 + 0xDE00);
        for s in ["", "a", "c0-0000123456", "\u{e9}t\u{e9}", "x\u{1f600}y"] {
            for cap in [1, 16, 1 << 21] {
                assert_eq!(bucket_of_utf8(s.as_bytes(), cap), bucket(s, cap), "{s:?} in {cap}");
            }
        }
    }

    #[test]
    fn capacities() {
        assert_eq!(capacity_for(0, 16), 16);
        assert_eq!(capacity_for(12, 16), 16);
        assert_eq!(capacity_for(13, 16), 32);
        assert_eq!(capacity_for(6, 8), 8);
        assert_eq!(capacity_for(7, 8), 16);
        assert_eq!(capacity_for_copy(0), 16);
        assert_eq!(capacity_for_copy(1), 2);
        assert_eq!(capacity_for(2, 2), 4);
        assert_eq!(capacity_for_copy(3), 8);
        assert_eq!(capacity_for_copy(12), 32);
    }

    #[test]
    fn split_like_java() {
        assert_eq!(split_drop_trailing("a:b", ':'), vec!["a", "b"]);
        assert_eq!(split_drop_trailing("a:", ':'), vec!["a"]);
        assert_eq!(split_drop_trailing(":b", ':'), vec!["", "b"]);
        assert_eq!(split_drop_trailing("", ':'), vec![""]);
        assert!(split_drop_trailing("::", ':').is_empty());
        assert_eq!(split_drop_trailing("a::b", ':'), vec!["a", "", "b"]);
    }

    #[test]
    fn parse_int_like_java() {
        assert_eq!(parse_int("12"), Some(12));
        assert_eq!(parse_int("+7"), Some(7));
        assert_eq!(parse_int("-0"), Some(0));
        assert_eq!(parse_int("2147483648"), None);
        assert_eq!(parse_int("-2147483648"), Some(i32::MIN));
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("-"), None);
        assert_eq!(parse_int("1a"), None);
    }
}
