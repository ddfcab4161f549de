//! The node table: znodes in a slab of slots, found by path through an index that stores slot
//! numbers with 32 bits of their path's hash. A path is thus stored once, and a parent refers to
//! its children by slot. Keeping the hash bits in the index means growing it never touches the
//! nodes: rehashing a million entries reads 8 MB of index instead of chasing a million paths
//! through cache misses, which stalled the server for about 100 ms at each doubling.

use crate::node::{Children, Node, Slot};
use hashbrown::{DefaultHashBuilder, HashMap, HashTable};
use std::hash::BuildHasher;

/// Znodes by path.
#[derive(Debug, Default)]
pub struct NodeTable {
    slots: Slab,
    free: Vec<Slot>,
    /// (slot, low 32 bits of the path's hash).
    index: HashTable<(Slot, u32)>,
    /// Child sets by the slot of their node. Most nodes are leaves: an 8-byte field in every
    /// node cost more than this map's entry in the few that have children.
    children: HashMap<Slot, Children>,
    /// foldhash, seeded per table so that paths chosen by clients cannot force collisions; much
    /// cheaper than SipHash on this path-per-request lookup.
    hasher: PathHasher,
}

/// The hash function of a node table's path index: foldhash with a random seed, and a token that
/// tells two seeds apart, so that a snapshot decoder on another thread can hash the paths it
/// decodes ahead of the table they go into ([`NodeTable::adopt_hasher`]) and the loader can
/// check it hashed them the table's way.
#[derive(Debug, Clone)]
pub(crate) struct PathHasher {
    build: DefaultHashBuilder,
    /// The hash of [`TOKEN_PROBE`] under `build`: equal tokens, the same function (but for a
    /// chance of 2^-64).
    token: u64,
}

/// What a [`PathHasher`]'s token is the hash of.
const TOKEN_PROBE: &[u8] = b"zkrs path index";

impl Default for PathHasher {
    fn default() -> Self {
        let build = DefaultHashBuilder::default();
        let token = build.hash_one(TOKEN_PROBE);
        PathHasher { build, token }
    }
}

impl PathHasher {
    /// The index's hash of a path's bytes (every lookup and insert goes through it, so they
    /// agree).
    #[inline]
    pub(crate) fn hash(&self, path: &[u8]) -> u32 {
        self.build.hash_one(path) as u32
    }

    /// Tells this function from another ([`PathHasher::hash`] agrees where tokens do).
    pub(crate) fn token(&self) -> u64 {
        self.token
    }
}

/// Below this many entries a table built at once ([`NodeTable::index_loaded`],
/// [`Children::extend_ranked`]) is filled in the order given: it fits in the cache anyway, and
/// sorting costs more than it saves.
pub(crate) const BULK_SORT_MIN: usize = 1 << 16;

/// Bits of a hashbrown table's bucket index, from its capacity (`buckets / 8 * 7` for eight
/// buckets or more): where an entry of hash `h` starts probing is `h & (2^bits - 1)`. None when
/// the capacity does not say (a small table, or a layout this does not know): a bulk fill then
/// goes in the order given, which is only slower.
pub(crate) fn bucket_bits(capacity: usize) -> Option<u32> {
    if capacity < 8 || !capacity.is_multiple_of(7) {
        return None;
    }
    let buckets = (capacity / 7).checked_mul(8)?;
    buckets.is_power_of_two().then(|| buckets.trailing_zeros())
}

/// The table's hash of an entry, from the 32 bits it keeps: spread over 64 bits, as hashbrown
/// takes its bucket from the low bits and its tag from the top ones.
fn spread(h: u32) -> u64 {
    (h as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl NodeTable {
    /// The table's hash of a path's bytes (every lookup and insert goes through it, so they agree).
    fn hash(&self, path: &[u8]) -> u32 {
        self.hasher.hash(path)
    }

    /// The function the path index hashes with.
    pub(crate) fn hasher(&self) -> &PathHasher {
        &self.hasher
    }

    /// Takes `h` as the path index's hash function; false (and nothing changed) unless the table
    /// has never held a node, since the index's entries keep their hashes.
    pub(crate) fn adopt_hasher(&mut self, h: &PathHasher) -> bool {
        if self.slots.len() != 0 || !self.index.is_empty() {
            return false;
        }
        self.hasher = h.clone();
        true
    }

    /// Stores a node of a snapshot being loaded in a new slot at the end, without indexing its
    /// path: [`NodeTable::index_loaded`] indexes every such node at once when the load ends.
    /// Until then the node is not found by path.
    pub(crate) fn push_loaded(&mut self, node: Node) -> Slot {
        self.slots.push(node)
    }

    /// Indexes the nodes [`NodeTable::push_loaded`] stored, given as `(path hash << 32) | slot`
    /// in slot order (the hash by [`NodeTable::hasher`]). A path stored twice (a fuzzy snapshot
    /// recorded a node deleted and created again) is indexed at its first slot; returns each
    /// such pair (first slot, later slot), in the order of the later slot, for the caller to
    /// move the later node into the first slot ([`NodeTable::move_loaded`]), as a node read
    /// again replaces the one read before.
    ///
    /// The entries are inserted in the order of the buckets they land in, so that filling a
    /// table of millions walks its memory once instead of missing the cache on every insert.
    pub(crate) fn index_loaded(&mut self, mut entries: Vec<u64>) -> Vec<(Slot, Slot)> {
        self.index.reserve(entries.len(), |&(_, hh)| spread(hh));
        if entries.len() >= BULK_SORT_MIN {
            if let Some(bits) = bucket_bits(self.index.capacity()) {
                let mask = (1u64 << bits) - 1;
                // Stable: entries of one bucket stay in slot order, so a path's first slot is
                // met first.
                crate::child_names::radix_sort(&mut entries, bits, |e| spread((e >> 32) as u32) & mask);
            }
        }
        let mut dups = Vec::new();
        let NodeTable { slots, index, .. } = self;
        for e in entries {
            let (h, s) = ((e >> 32) as u32, e as u32 as Slot);
            // The paths are compared only when the 32 hash bits agree, which spares reading
            // every node's buffer.
            let same = |&(t, hh): &(Slot, u32)| {
                hh == h
                    && match (slots.get(t), slots.get(s)) {
                        (Some(a), Some(b)) => a.path_bytes() == b.path_bytes(),
                        _ => false,
                    }
            };
            match index.entry(spread(h), same, |&(_, hh)| spread(hh)) {
                hashbrown::hash_table::Entry::Occupied(o) => dups.push((o.get().0, s)),
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert((s, h));
                }
            }
        }
        dups.sort_unstable_by_key(|&(_, later)| later);
        dups
    }

    /// Moves the node in slot `from` (with its child set) into slot `into`, whose node (returned)
    /// and child set it replaces; `from` is left free. For a loader's nodes read twice
    /// ([`NodeTable::index_loaded`]): the path index, which names `into`, is unchanged, so the
    /// two must hold the same path. None (and nothing changed) if either slot is empty.
    pub(crate) fn move_loaded(&mut self, from: Slot, into: Slot) -> Option<Node> {
        if from == into || self.slots.get(from).is_none() || self.slots.get(into).is_none() {
            return None;
        }
        let node = self.slots.entry(from).take()?;
        self.free.push(from);
        let kids = self.children.remove(&from);
        self.children.remove(&into);
        if let Some(k) = kids {
            self.children.insert(into, k);
        }
        self.slots.entry(into).replace(node)
    }

    /// The slot holding `path`.
    pub fn find(&self, path: &str) -> Option<Slot> {
        self.find_bytes(path.as_bytes())
    }

    /// The slot holding the path whose bytes are `path` (no UTF-8 check on the way: a loader
    /// going over every node compares the bytes it stores).
    pub(crate) fn find_bytes(&self, path: &[u8]) -> Option<Slot> {
        let slots = &self.slots;
        let h = self.hash(path);
        self.index
            .find(spread(h), |&(s, hh)| hh == h && slots.get(s).is_some_and(|n| n.path_bytes() == path))
            .map(|&(s, _)| s)
    }

    /// Looks up each of `paths` and reads what the look-up will touch (the index's entry, the
    /// node, the start of its buffer), changing nothing: a replay calls it for the paths of the
    /// next few transactions before applying them, so that their cache misses overlap, stage by
    /// stage, instead of each look-up waiting for its own one after the other. `hashes` is
    /// scratch space.
    pub(crate) fn warm(&self, paths: &[&[u8]], hashes: &mut Vec<(u32, Slot)>) {
        hashes.clear();
        hashes.extend(paths.iter().map(|p| (self.hash(p), Slot::MAX)));
        // Independent look-ups, one loop each stage: the processor runs ahead into the next ones
        // while a miss is outstanding.
        for e in hashes.iter_mut() {
            let h = e.0;
            if let Some(&(s, _)) = self.index.find(spread(h), |&(_, hh)| hh == h) {
                e.1 = s;
            }
        }
        let mut touched = 0u32;
        for &(_, s) in hashes.iter() {
            if let Some(n) = self.slots.get(s) {
                touched = touched.wrapping_add(u32::from(n.path_bytes().last().copied().unwrap_or(0)));
            }
        }
        std::hint::black_box(touched);
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.find(path).and_then(|s| self.node(s))
    }

    /// Whether `path` exists.
    pub fn contains(&self, path: &str) -> bool {
        self.find(path).is_some()
    }

    /// The node in slot `s`.
    pub fn node(&self, s: Slot) -> Option<&Node> {
        self.slots.get(s)
    }

    /// The node in slot `s`, to change (its path must stay the same).
    pub fn node_mut(&mut self, s: Slot) -> Option<&mut Node> {
        self.slots.get_mut(s)
    }

    /// Stores a node whose path is not present yet, returning its slot.
    pub fn insert(&mut self, node: Node) -> Slot {
        let h = self.hash(node.path_bytes());
        let slot = place(&mut self.slots, &mut self.free, node);
        self.index.insert_unique(spread(h), (slot, h), |&(_, hh)| spread(hh));
        slot
    }

    /// The child set of the node in slot `s`, if it has one.
    pub fn children(&self, s: Slot) -> Option<&Children> {
        self.children.get(&s)
    }

    /// The child set of `n` (found by its path, and only when it has one: a leaf costs nothing).
    pub fn children_of(&self, n: &Node) -> Option<&Children> {
        if !n.has_children() {
            return None;
        }
        self.find_bytes(n.path_bytes()).and_then(|s| self.children.get(&s))
    }

    /// Number of children of `n`.
    pub fn num_children(&self, n: &Node) -> usize {
        self.children_of(n).map_or(0, Children::len)
    }

    /// The child set of the node in slot `s`, to change.
    pub fn children_mut(&mut self, s: Slot) -> Option<&mut Children> {
        self.children.get_mut(&s)
    }

    /// The child set of the node in slot `s`, made empty first if it has none; None without a
    /// node there.
    pub fn children_entry(&mut self, s: Slot) -> Option<&mut Children> {
        self.slots.get_mut(s)?.set_has_children(true);
        Some(self.children.entry(s).or_default())
    }

    /// Gives the node in slot `s` the child set `c` (or none), replacing what it had.
    pub fn set_children(&mut self, s: Slot, c: Option<Children>) {
        let Some(n) = self.slots.get_mut(s) else { return };
        n.set_has_children(c.is_some());
        match c {
            Some(c) => {
                self.children.insert(s, c);
            }
            None => {
                self.children.remove(&s);
            }
        }
    }

    /// One past the highest slot number in use or free (slots are `0..slot_count()`).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Removes the node at `path`, with its child set.
    pub fn remove(&mut self, path: &str) -> Option<(Slot, Node, Option<Children>)> {
        let h = self.hash(path.as_bytes());
        let slots = &self.slots;
        let entry = self
            .index
            .find_entry(spread(h), |&(s, hh)| {
                hh == h && slots.get(s).is_some_and(|n| n.path_bytes() == path.as_bytes())
            })
            .ok()?;
        let ((slot, _), _) = entry.remove();
        let node = self.slots.entry(slot).take()?;
        self.free.push(slot);
        let children = self.children.remove(&slot);
        Some((slot, node, children))
    }

    /// Removes the node in slot `s`, with its child set.
    pub fn remove_slot(&mut self, s: Slot) -> Option<(Node, Option<Children>)> {
        let path = self.node(s)?.path().to_string();
        self.remove(&path).map(|(_, n, c)| (n, c))
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Every node, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &Node> {
        self.slots.iter()
    }
}

/// Puts `node` in a freed slot if there is one, else in a new one at the end; returns the slot.
/// (Apart from the index, which [`NodeTable::insert`] updates.)
fn place(slots: &mut Slab, free: &mut Vec<Slot>, node: Node) -> Slot {
    match free.pop() {
        Some(s) => {
            *slots.entry(s) = Some(node);
            s
        }
        None => slots.push(node),
    }
}

/// Slots in fixed-size chunks: growing never moves the nodes already stored. A plain `Vec` of a
/// million 56-byte nodes is copied whole when it doubles, a stall of tens of milliseconds on the
/// core; a new chunk is one small allocation.
#[derive(Debug, Default)]
struct Slab {
    chunks: Vec<Box<[Option<Node>]>>,
    len: usize,
}

/// Bytes of one chunk: 512 KiB, a whole number of the 64 KiB slices mimalloc (the server's
/// allocator) gives an allocation this large, so a chunk wastes nothing to rounding. Chunks of
/// 4,096 slots (425,984 bytes) were each rounded up to 7 slices, 32 KiB lost per chunk.
const SLAB_CHUNK_BYTES: usize = 512 << 10;

/// Slots per chunk: as many as fit in [`SLAB_CHUNK_BYTES`].
const SLAB_CHUNK: usize = SLAB_CHUNK_BYTES / std::mem::size_of::<Option<Node>>();

impl Slab {
    fn get(&self, s: Slot) -> Option<&Node> {
        let s = s as usize;
        if s >= self.len {
            return None;
        }
        self.chunks[s / SLAB_CHUNK][s % SLAB_CHUNK].as_ref()
    }

    fn get_mut(&mut self, s: Slot) -> Option<&mut Node> {
        let s = s as usize;
        if s >= self.len {
            return None;
        }
        self.chunks[s / SLAB_CHUNK][s % SLAB_CHUNK].as_mut()
    }

    /// The slot itself, which must exist (below `len`).
    fn entry(&mut self, s: Slot) -> &mut Option<Node> {
        let s = s as usize;
        &mut self.chunks[s / SLAB_CHUNK][s % SLAB_CHUNK]
    }

    /// Stores `node` in a new slot at the end; returns its number.
    fn push(&mut self, node: Node) -> Slot {
        let s = self.len;
        if s.is_multiple_of(SLAB_CHUNK) {
            self.chunks.push((0..SLAB_CHUNK).map(|_| None).collect());
        }
        self.chunks[s / SLAB_CHUNK][s % SLAB_CHUNK] = Some(node);
        self.len += 1;
        s as Slot
    }

    fn len(&self) -> usize {
        self.len
    }

    /// The nodes, in slot order.
    fn iter(&self) -> impl Iterator<Item = &Node> {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn node(p: &str) -> Node {
        Node::new(p, None, Arc::new(vec![]), Default::default())
    }

    #[test]
    fn insert_find_remove_reuse() {
        let mut t = NodeTable::default();
        let a = t.insert(node("/a"));
        let b = t.insert(node("/b"));
        assert_eq!(t.find("/a"), Some(a));
        assert_eq!(t.get("/b").map(|n| n.path()), Some("/b"));
        assert!(t.find("/c").is_none());
        assert_eq!(t.remove("/a").map(|(s, _, _)| s), Some(a));
        assert!(t.remove("/a").is_none());
        let c = t.insert(node("/c"));
        assert_eq!(c, a, "freed slot reused");
        assert_eq!(t.len(), 2);
        assert!(t.remove_slot(b).is_some());
        assert_eq!(t.iter().map(|n| n.path().to_string()).collect::<Vec<_>>(), vec!["/c".to_string()]);
        for i in 0..1000 {
            t.insert(node(&format!("/n{i}")));
        }
        assert!((0..1000).all(|i| t.contains(&format!("/n{i}"))));
    }
}
