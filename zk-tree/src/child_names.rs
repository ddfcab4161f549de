//! A node's child names in the order Apache lists them (Java `HashSet` iteration order: by bucket
//! of the name's hash in the set's table, then insertion rank), built for large child sets.
//!
//! With a million children the naive way (look up every child by slot in the set's own order,
//! compare-sort `(bucket, rank)`, one `String` per name) spent most of its time on cache and TLB
//! misses: the child set iterates its slots in hash order, so every child's node and path buffer
//! was a random access into hundreds of megabytes. Here the slots are radix-sorted first, so the
//! nodes (and, as they were usually allocated in the same order, their path buffers) are read in
//! memory order; each name is copied once, into a compact arena of jute strings, while its key is
//! computed; the `(bucket, rank)` keys are radix-sorted; and the arena's strings are gathered in
//! that order into the jute encoding a getChildren reply carries, one buffer for the whole list.

use crate::java;
use crate::node::{Children, Slot};
use crate::nodes::NodeTable;

/// Child names in Apache's order, held as the jute encoding of the `vector<ustring>` a getChildren
/// reply carries (a big-endian `i32` count, then each name as a big-endian `i32` byte length and
/// its UTF-8 bytes), exactly what `Vec<String>`'s jute `write` of the same names produces. One
/// buffer instead of a `String` per child: a reply copies it whole.
#[derive(Clone, PartialEq, Eq)]
pub struct ChildNames {
    jute: Vec<u8>,
    len: usize,
}

impl Default for ChildNames {
    fn default() -> Self {
        ChildNames { jute: 0i32.to_be_bytes().to_vec(), len: 0 }
    }
}

impl std::fmt::Debug for ChildNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl ChildNames {
    /// Number of names.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The jute encoding of the list (`vector<ustring>`), count first.
    pub fn jute(&self) -> &[u8] {
        &self.jute
    }

    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let mut at = 4;
        (0..self.len).map(move |_| {
            let n = read_len(&self.jute, at);
            let name = &self.jute[at + 4..at + 4 + n];
            at += 4 + n;
            // Every name was copied from a `&str` path, so this never falls back.
            std::str::from_utf8(name).unwrap_or_default()
        })
    }

    /// The names as owned strings, in order.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_string).collect()
    }
}

/// The byte length stored big-endian at `jute[at..at + 4]` (one this module wrote).
fn read_len(jute: &[u8], at: usize) -> usize {
    let b = [jute[at], jute[at + 1], jute[at + 2], jute[at + 3]];
    u32::from_be_bytes(b) as usize
}

/// Below this many children a comparison sort of the records beats the radix passes (whose
/// counting arrays cost the same at any size) and the slot order buys no locality.
const RADIX_MIN: usize = 512;

/// Bits of the key one radix pass sorts by: 2,048 counters (8 KiB) per pass stay in L1.
const DIGIT_BITS: u32 = 11;

/// The child names of the set `children` (slots of `nodes`) in Java `HashSet` order: ascending
/// `(bucket of the name in a table of the set's Java capacity, insertion rank)`, and, should two
/// children ever share both (ranks are unique until 2^32 inserts into one parent wrap them),
/// ascending slot, as the Apache snapshot writer orders them.
pub(crate) fn ordered(nodes: &NodeTable, children: &Children) -> ChildNames {
    let cap = children.java_capacity();
    assert!(cap.is_power_of_two() && cap <= 1 << 30, "a Java table capacity: {cap}");
    let mut slots: Vec<Slot> = children.iter().collect();
    let large = slots.len() >= RADIX_MIN;
    if large {
        // Memory order, so the nodes and their buffers are read with the prefetcher's help.
        let max = slots.iter().copied().max().unwrap_or(0);
        radix_sort(&mut slots, bits_of(u64::from(max)), |s| u64::from(*s));
    } else {
        slots.sort_unstable();
    }

    // Each child's name, as a jute string, in slot order; where it starts in the arena; and its
    // key, (bucket, rank).
    let mut arena: Vec<u8> = Vec::with_capacity(slots.len() * 20);
    let mut starts: Vec<usize> = Vec::with_capacity(slots.len());
    let mut keys: Vec<u64> = Vec::with_capacity(slots.len());
    let mut max_rank = 0u32;
    for s in slots {
        let Some(node) = nodes.node(s) else {
            debug_assert!(false, "child slot {s} holds no node");
            continue;
        };
        let path = node.path_bytes();
        let name = &path[path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)..];
        let rank = node.stat.rank;
        max_rank = max_rank.max(rank);
        keys.push(((java::bucket_of_utf8(name, cap) as u64) << 32) | u64::from(rank));
        starts.push(arena.len());
        arena.extend_from_slice(&(name.len() as i32).to_be_bytes());
        arena.extend_from_slice(name);
    }
    // Keys packed to the bits in use: the bucket above the rank's significant bits.
    let rank_bits = bits_of(u64::from(max_rank));
    for k in &mut keys {
        *k = ((*k >> 32) << rank_bits) | (*k & 0xffff_ffff);
    }

    let order = sort_order(keys, rank_bits + cap.trailing_zeros());
    let mut jute = Vec::with_capacity(4 + arena.len());
    jute.extend_from_slice(&(order.len() as i32).to_be_bytes());
    for i in order {
        let at = starts[i];
        jute.extend_from_slice(&arena[at..at + 4 + read_len(&arena, at)]);
    }
    assert_eq!(jute.len(), 4 + arena.len(), "every name gathered once");
    ChildNames { jute, len: starts.len() }
}

/// The indices of `keys` (each below `2^key_bits`) in ascending order of (key, index).
fn sort_order(keys: Vec<u64>, key_bits: u32) -> Vec<usize> {
    let n = keys.len();
    let idx_bits = bits_of(n.saturating_sub(1) as u64);
    if n < RADIX_MIN {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by_key(|&i| (keys[i], i));
        order
    } else if key_bits + idx_bits <= u64::BITS {
        // One word a record, the index below the key: half the memory the radix passes move of
        // a (key, index) pair. The sort is stable and the words start in index order, so only
        // the key's bits need sorting.
        let mut packed: Vec<u64> =
            keys.into_iter().enumerate().map(|(i, k)| (k << idx_bits) | i as u64).collect();
        radix_sort(&mut packed, key_bits, |w| w >> idx_bits);
        let mask = (1u64 << idx_bits) - 1;
        packed.into_iter().map(|w| (w & mask) as usize).collect()
    } else {
        // A key and index wider than a word: a large set whose parent has seen many times more
        // inserts than it holds (8M for a set of 1M), so its ranks take many bits.
        let mut pairs: Vec<(u64, usize)> = keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect();
        radix_sort(&mut pairs, key_bits, |p| p.0);
        pairs.into_iter().map(|(_, i)| i).collect()
    }
}

/// Significant bits of `v` (0 for 0).
fn bits_of(v: u64) -> u32 {
    u64::BITS - v.leading_zeros()
}

/// Sorts `v` stably by `key`, whose values are all below `2^bits`, by least-significant-digit
/// radix passes of [`DIGIT_BITS`] bits (one counting pass for every digit, then one scatter pass
/// per digit).
pub(crate) fn radix_sort<T: Copy + Default>(v: &mut Vec<T>, bits: u32, key: impl Fn(&T) -> u64) {
    assert!(bits <= 64, "a key of {bits} bits");
    let passes = bits.div_ceil(DIGIT_BITS) as usize;
    if passes == 0 || v.len() < 2 {
        return;
    }
    let radix = 1usize << DIGIT_BITS;
    let mask = (radix - 1) as u64;
    let digit = |k: u64, p: usize| ((k >> (p as u32 * DIGIT_BITS)) & mask) as usize;
    let mut counts = vec![0usize; passes * radix];
    for x in v.iter() {
        let k = key(x);
        debug_assert!(bits == 64 || k >> bits == 0, "key {k:#x} beyond {bits} bits");
        for p in 0..passes {
            counts[p * radix + digit(k, p)] += 1;
        }
    }
    let mut tmp = vec![T::default(); v.len()];
    for p in 0..passes {
        let c = &mut counts[p * radix..(p + 1) * radix];
        if c.contains(&v.len()) {
            continue; // every key has the same digit here: the pass would not move anything
        }
        let mut sum = 0;
        for n in c.iter_mut() {
            let here = *n;
            *n = sum;
            sum += here;
        }
        for x in v.iter() {
            let d = digit(key(x), p);
            tmp[c[d]] = *x;
            c[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zk_proto::jute::Jute;

    #[test]
    fn radix_sort_is_a_stable_sort() {
        let mut r = java::JavaRandom::new(7);
        for (n, bits) in [(0usize, 5u32), (1, 0), (3000, 1), (5000, 20), (5000, 41), (700, 64)] {
            let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            let mut v: Vec<(u64, usize)> = (0..n)
                .map(|i| {
                    let k = ((r.next_int() as u32 as u64) << 32 | r.next_int() as u32 as u64) & mask;
                    (k, i)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|x| x.0);
            radix_sort(&mut v, bits, |x| x.0);
            assert_eq!(v, want, "{n} keys of {bits} bits");
        }
    }

    #[test]
    fn sort_order_sorts_by_key_then_index() {
        let mut r = java::JavaRandom::new(11);
        // (count, key bits, distinct keys): the comparison path, the packed word, and the pairs
        // that a key too wide for the word takes; few distinct keys make ties.
        for (n, bits, distinct) in
            [(100usize, 41u32, 1000u64), (5000, 41, 1000), (5000, 20, 1 << 20), (3000, 60, 50)]
        {
            let keys: Vec<u64> =
                (0..n).map(|_| ((r.next_int() as u32 as u64) % distinct) << (bits - 20)).collect();
            let mut want: Vec<usize> = (0..n).collect();
            want.sort_by_key(|&i| (keys[i], i));
            assert_eq!(sort_order(keys, bits), want, "{n} keys of {bits} bits");
        }
    }

    #[test]
    fn jute_matches_a_vec_of_strings() {
        let names = ["a", "", "c0-0000000001", "\u{e9}t\u{e9}", "\u{1f600}"];
        let mut jute = (names.len() as i32).to_be_bytes().to_vec();
        for n in names {
            jute.extend_from_slice(&(n.len() as i32).to_be_bytes());
            jute.extend_from_slice(n.as_bytes());
        }
        let c = ChildNames { jute, len: names.len() };
        let mut want = bytes::BytesMut::new();
        names.iter().map(|s| s.to_string()).collect::<Vec<_>>().write(&mut want);
        assert_eq!(c.jute(), &want[..]);
        assert_eq!(c.to_vec(), names);
        assert_eq!(format!("{c:?}"), format!("{names:?}"));
        let empty = ChildNames::default();
        let mut want = bytes::BytesMut::new();
        Vec::<String>::new().write(&mut want);
        assert_eq!((empty.jute(), empty.len(), empty.is_empty()), (&want[..], 0, true));
    }
}
