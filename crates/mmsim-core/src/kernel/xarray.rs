//! The node structure of a mapping's `i_pages` xarray (lib/xarray.c, Linux 6.18): which
//! `xa_node`s the page cache's entries (folios, workingset shadows, shmem swap entries) need,
//! so that each node's allocation and free can be charged to a memory cgroup (the radix_tree_node
//! slab cache; a mapping's i_pages is XA_FLAGS_ACCOUNT) and a node holding only shadows can be
//! counted in WORKINGSET_NODES (`workingset_update_node`).
//!
//! Entries are stored as Linux stores them: an entry of order `o` at an index aligned to it lives
//! in the node of shift `o - o % 6`, in `1 << (o % 6)` slots (the first holds it, the others
//! sibling entries); the tree grows a level at a time over its highest index (`xas_expand`,
//! with `xas_max`'s extra index for an entry covering index 0) and shrinks back (`xas_shrink`);
//! a node goes when its last slot empties (`xas_delete_node`), a subtree when a larger entry
//! replaces it (`xas_free_nodes`), and `xas_split` turns a value entry into smaller ones, with
//! a new node under each of its slots when they are a level below.
//!
//! Differs from Linux: the entries' contents are kept elsewhere (the mapping's `pages`,
//! `shadows` and `swapped`); marks, RCU and the per-node private lists other than the shadow
//! list's membership are not modelled.

use std::collections::BTreeMap;

use crate::fasthash::FastMap;

/// `XA_CHUNK_SHIFT`: a node has 64 slots.
pub const XA_CHUNK_SHIFT: u32 = 6;
const XA_CHUNK_SIZE: u64 = 1 << XA_CHUNK_SHIFT;

/// What a node needs beyond its place: `count` (occupied slots, sibling entries and child
/// pointers included), `nr_values` (of them, value entries' slots), the memcg its allocation
/// was charged to (u16::MAX: none), and whether it is on the workingset's shadow_nodes list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XaNode {
    pub count: u8,
    pub nr_values: u8,
    pub objcg: u16,
    pub listed: bool,
}

/// An entry: its order and whether it is a value entry (a shadow or a swap entry) rather than
/// a folio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XaEntry {
    pub order: u8,
    pub value: bool,
}

/// What the caller accounts for a node (kernel/filemap_xa.rs): its allocation (charged to
/// a memcg, whose index it returns; `account` false for `xas_split_alloc`'s nodes, which
/// __filemap_add_folio makes without __GFP_ACCOUNT), its free, and its joining (+1) or
/// leaving (-1) the shadow list.
pub trait XaHooks {
    fn node_alloc(&mut self, account: bool, key: (u8, u64)) -> u16;
    fn node_free(&mut self, objcg: u16);
    fn shadow_list(&mut self, objcg: u16, delta: i64);
}

/// A mapping's xarray, by its nodes.
#[derive(Clone, Debug, Default)]
pub struct XArray {
    /// Every entry by its first index.
    entries: BTreeMap<u64, XaEntry>,
    /// Every node by (level: shift / 6, index >> (shift + 6)).
    nodes: FastMap<(u8, u64), XaNode>,
    /// Levels of nodes (the root's shift is 6 * (height - 1)); 0: no node, the head holding
    /// nothing or an entry of order 0 at index 0.
    height: u8,
    /// Nodes that hold only shadows go on the shadow list (`mapping_set_update`: not for
    /// shmem, whose value entries are swap entries).
    pub track_shadows: bool,
}

/// The node's key at `level` of the node holding `index`.
#[inline]
fn key(level: u8, index: u64) -> (u8, u64) {
    (level, index >> (XA_CHUNK_SHIFT * (level as u32 + 1)))
}

/// The first index a node covers.
#[inline]
fn node_base(level: u8, k: u64) -> u64 {
    k << (XA_CHUNK_SHIFT * (level as u32 + 1))
}

/// `xas_max` of an entry of `order` at `index`: its last index, one more for an entry that
/// covers index 0 (so that it is never held by the head).
fn xas_max(index: u64, order: u8) -> u64 {
    if order == 0 {
        return index;
    }
    let mask = (1u64 << order) - 1;
    let max = index | mask;
    if max == mask {
        max + 1
    } else {
        max
    }
}

/// The node levels a tree needs for indices up to `max` (0: the head alone, for max 0).
fn height_for(max: u64) -> u8 {
    if max == 0 {
        return 0;
    }
    let mut h = 1u8;
    while (max >> (XA_CHUNK_SHIFT * h as u32)) != 0 {
        h += 1;
    }
    h
}

impl XArray {
    /// An xarray for a mapping (`track_shadows`: a file's, not shmem's).
    pub fn new(track_shadows: bool) -> XArray {
        XArray { track_shadows, ..Default::default() }
    }

    /// The nodes allocated.
    pub fn nr_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The tree's levels of nodes.
    pub fn height(&self) -> u8 {
        self.height
    }

    /// Every node with its key.
    pub fn nodes(&self) -> impl Iterator<Item = (&(u8, u64), &XaNode)> {
        self.nodes.iter()
    }

    /// Charge a node made uncharged (`xas_nomem`'s allocation after GFP_NOWAIT failed):
    /// whether it is on the shadow list, None when it is no longer there or has a charge.
    pub fn set_objcg(&mut self, key: (u8, u64), objcg: u16) -> Option<bool> {
        match self.nodes.get_mut(&key) {
            Some(n) if n.objcg == u16::MAX => {
                n.objcg = objcg;
                Some(n.listed)
            }
            _ => None,
        }
    }

    /// The entry covering `index`: its first index and the entry.
    pub fn load(&self, index: u64) -> Option<(u64, XaEntry)> {
        let (&first, &e) = self.entries.range(..=index).next_back()?;
        (index < first + (1u64 << e.order)).then_some((first, e))
    }

    /// `xas_store` of an entry of `order` at `index` (aligned): what the range held (smaller
    /// entries, whole subtrees) is replaced. A larger entry covering the range must have been
    /// split first (the caller's `xas_split`).
    pub fn store(&mut self, index: u64, order: u8, value: bool, h: &mut impl XaHooks) {
        debug_assert_eq!(index & ((1u64 << order) - 1), 0, "unaligned entry");
        debug_assert!(
            self.load(index).is_none_or(|(f, e)| f >= index && e.order <= order),
            "store inside a larger entry"
        );
        self.expand(xas_max(index, order), h);
        let level = order / XA_CHUNK_SHIFT as u8;
        if self.height == 0 {
            // The head holds an entry of order 0 at index 0.
            self.entries.insert(index, XaEntry { order, value });
            return;
        }
        // xas_create: the nodes down to the entry's level.
        for l in (level..self.height).rev() {
            let k = key(l, index);
            if let std::collections::hash_map::Entry::Vacant(v) = self.nodes.entry(k) {
                v.insert(XaNode { count: 0, nr_values: 0, objcg: h.node_alloc(true, k), listed: false });
                if l + 1 < self.height {
                    self.nodes.get_mut(&key(l + 1, index)).expect("parent").count += 1;
                }
            }
        }
        // What the entry's slots held: smaller entries of this level, subtrees below it.
        let nr = 1u64 << order;
        let (mut old_slots, mut old_values) = (0u32, 0u32);
        let inside: Vec<(u64, XaEntry)> = self.entries.range(index..index + nr).map(|(&i, &e)| (i, e)).collect();
        for (i, e) in inside {
            self.entries.remove(&i);
            if e.order / XA_CHUNK_SHIFT as u8 == level {
                let s = 1u32 << (e.order % XA_CHUNK_SHIFT as u8);
                old_slots += s;
                old_values += if e.value { s } else { 0 };
            }
        }
        if level > 0 {
            let slot_span = 1u64 << (XA_CHUNK_SHIFT * level as u32);
            let mut i = index;
            while i < index + nr {
                if self.nodes.contains_key(&key(level - 1, i)) {
                    old_slots += 1;
                    self.free_subtree(level - 1, key(level - 1, i).1, h);
                }
                i += slot_span;
            }
        }
        let slots = 1u32 << (order % XA_CHUNK_SHIFT as u8);
        let k = key(level, index);
        let n = self.nodes.get_mut(&k).expect("node");
        n.count = (n.count as u32 + slots - old_slots) as u8;
        n.nr_values = (n.nr_values as u32 + if value { slots } else { 0 } - old_values) as u8;
        self.entries.insert(index, XaEntry { order, value });
        self.update(k, h);
        if old_slots > slots {
            self.after_count_drop(k, h);
        }
    }

    /// `xas_store(NULL)` of the entry that starts at `index`.
    pub fn erase(&mut self, index: u64, h: &mut impl XaHooks) {
        let Some(e) = self.entries.remove(&index) else { return };
        if self.height == 0 {
            return;
        }
        let level = e.order / XA_CHUNK_SHIFT as u8;
        let slots = 1u8 << (e.order % XA_CHUNK_SHIFT as u8);
        let k = key(level, index);
        let n = self.nodes.get_mut(&k).expect("node of an entry");
        n.count -= slots;
        if e.value {
            n.nr_values -= slots;
        }
        self.update(k, h);
        self.after_count_drop(k, h);
    }

    /// `xas_split` of the value entry covering `index` into entries of `order` (each the same
    /// value), after `xas_split_alloc` made a node under each of its slots if they are a level
    /// below. Returns whether an entry was split.
    pub fn split(&mut self, index: u64, order: u8, h: &mut impl XaHooks) -> bool {
        let Some((first, e)) = self.load(index) else { return false };
        if e.order <= order {
            return false;
        }
        let (old_level, new_level) = (e.order / XA_CHUNK_SHIFT as u8, order / XA_CHUNK_SHIFT as u8);
        self.entries.remove(&first);
        let nr = 1u64 << e.order;
        let step = 1u64 << order;
        for i in (first..first + nr).step_by(step as usize) {
            self.entries.insert(i, XaEntry { order, value: e.value });
        }
        if self.height == 0 || old_level == new_level {
            return true;
        }
        debug_assert_eq!(new_level + 1, old_level, "xas_split splits one level at most");
        // Each slot of the old entry now points to a full node of the new entries.
        let slots = 1u64 << (e.order % XA_CHUNK_SHIFT as u8);
        let span = 1u64 << (XA_CHUNK_SHIFT * old_level as u32);
        for s in 0..slots {
            let ck = key(new_level, first + s * span);
            let nv = if e.value { XA_CHUNK_SIZE as u8 } else { 0 };
            let objcg = h.node_alloc(false, ck);
            self.nodes.insert(ck, XaNode { count: XA_CHUNK_SIZE as u8, nr_values: nv, objcg, listed: false });
            self.update(ck, h);
        }
        let pk = key(old_level, first);
        if e.value {
            let n = self.nodes.get_mut(&pk).expect("node of an entry");
            n.nr_values -= slots as u8;
        }
        self.update(pk, h);
        true
    }

    /// Every entry and node goes (the inode is evicted).
    pub fn destroy(&mut self, h: &mut impl XaHooks) {
        let mut nodes: Vec<((u8, u64), XaNode)> = self.nodes.drain().collect();
        nodes.sort_unstable_by_key(|(k, _)| *k);
        for (_, n) in nodes {
            Self::free_node(n, h);
        }
        self.entries.clear();
        self.height = 0;
    }

    /// `xas_expand`: grow the tree until it covers `max`. A tree holding anything gets a new
    /// root per level with the old head in its slot 0; an empty one only its height.
    fn expand(&mut self, max: u64, h: &mut impl XaHooks) {
        let need = height_for(max);
        if need <= self.height {
            return;
        }
        if self.entries.is_empty() {
            self.height = need;
            return;
        }
        while self.height < need {
            let level = self.height;
            let head_value = level == 0 && self.entries.get(&0).is_some_and(|e| e.value);
            let objcg = h.node_alloc(true, (level, 0));
            self.nodes.insert((level, 0), XaNode { count: 1, nr_values: u8::from(head_value), objcg, listed: false });
            self.height += 1;
            self.update((level, 0), h);
        }
    }

    /// `xas_free_nodes`: a subtree goes with the entries in it.
    fn free_subtree(&mut self, level: u8, k: u64, h: &mut impl XaHooks) {
        let base = node_base(level, k);
        let end = base + (1u64 << (XA_CHUNK_SHIFT * (level as u32 + 1)));
        let doomed: Vec<u64> = self.entries.range(base..end).map(|(&i, _)| i).collect();
        for i in doomed {
            self.entries.remove(&i);
        }
        for l in (0..=level).rev() {
            let shift = XA_CHUNK_SHIFT * (l as u32 + 1);
            for ck in (base >> shift)..(end >> shift) {
                if let Some(n) = self.nodes.remove(&(l, ck)) {
                    Self::free_node(n, h);
                }
            }
        }
    }

    /// `xa_node_free` after the last `xas_update`: off the shadow list, then freed.
    fn free_node(n: XaNode, h: &mut impl XaHooks) {
        if n.listed {
            h.shadow_list(n.objcg, -1);
        }
        h.node_free(n.objcg);
    }

    /// `xas_update` -> `workingset_update_node`: a node holding only shadows joins the shadow
    /// list, one holding anything else (or nothing) leaves it.
    fn update(&mut self, k: (u8, u64), h: &mut impl XaHooks) {
        if !self.track_shadows {
            return;
        }
        let Some(n) = self.nodes.get_mut(&k) else { return };
        let want = n.count != 0 && n.count == n.nr_values;
        if want != n.listed {
            n.listed = want;
            h.shadow_list(n.objcg, if want { 1 } else { -1 });
        }
    }

    /// `xas_delete_node` after a node's count fell: empty nodes go, each taking its slot in
    /// its parent; then, at the root, `xas_shrink`.
    fn after_count_drop(&mut self, mut k: (u8, u64), h: &mut impl XaHooks) {
        loop {
            let n = self.nodes[&k];
            if n.count != 0 {
                break;
            }
            self.nodes.remove(&k);
            Self::free_node(n, h);
            if k.0 + 1 >= self.height {
                // The root went: the head is empty.
                self.height = 0;
                return;
            }
            let pk = (k.0 + 1, k.1 >> XA_CHUNK_SHIFT);
            self.nodes.get_mut(&pk).expect("parent").count -= 1;
            self.update(pk, h);
            k = pk;
        }
        if k.0 + 1 == self.height {
            self.shrink(h);
        }
    }

    /// `xas_shrink`: while the root holds one thing in slot 0, a child node becomes the root;
    /// an entry in a leaf root's slot 0 (index 0, order 0) goes to the head.
    fn shrink(&mut self, h: &mut impl XaHooks) {
        while self.height > 0 {
            let level = self.height - 1;
            let n = self.nodes[&(level, 0)];
            if n.count != 1 {
                break;
            }
            if level == 0 {
                if self.entries.get(&0).is_none_or(|e| e.order != 0) {
                    break;
                }
            } else if !self.nodes.contains_key(&(level - 1, 0)) {
                break;
            }
            self.nodes.remove(&(level, 0));
            Self::free_node(n, h);
            self.height -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what the hooks saw: nodes allocated (charged and not), freed, shadow list.
    #[derive(Default)]
    struct Rec {
        charged: i64,
        uncharged: i64,
        freed: i64,
        listed: i64,
    }

    impl XaHooks for Rec {
        fn node_alloc(&mut self, account: bool, _key: (u8, u64)) -> u16 {
            if account {
                self.charged += 1;
                1
            } else {
                self.uncharged += 1;
                u16::MAX
            }
        }
        fn node_free(&mut self, _objcg: u16) {
            self.freed += 1;
        }
        fn shadow_list(&mut self, _objcg: u16, delta: i64) {
            self.listed += delta;
        }
    }

    #[test]
    fn one_page_at_index_0_lives_in_the_head_and_a_second_makes_a_leaf() {
        let (mut x, mut h) = (XArray::new(true), Rec::default());
        x.store(0, 0, false, &mut h);
        assert_eq!((x.nr_nodes(), x.height()), (0, 0));
        x.store(5, 0, false, &mut h);
        assert_eq!((x.nr_nodes(), x.height()), (1, 1));
        x.erase(5, &mut h);
        assert_eq!((x.nr_nodes(), x.height()), (0, 0), "xas_shrink moves index 0 back to the head");
        x.erase(0, &mut h);
        assert_eq!((h.charged, h.freed), (1, 1));
    }

    #[test]
    fn a_pmd_folio_takes_eight_slots_of_a_shift_6_node_and_index_0_forces_the_level() {
        let (mut x, mut h) = (XArray::new(true), Rec::default());
        x.store(0, 9, false, &mut h);
        assert_eq!((x.nr_nodes(), x.height()), (1, 2), "xas_max: index 0 needs the shift-6 node, the root");
        assert_eq!(x.nodes[&(1, 0)].count, 8);
        // A 512 MiB file's worth of PMD folios: 32 nodes of shift 6 and the root of shift 12.
        for i in 1..256u64 {
            x.store(i * 512, 9, false, &mut h);
        }
        assert_eq!((x.nr_nodes(), x.height()), (33, 3));
        assert_eq!((h.charged, h.freed), (33, 0));
    }

    #[test]
    fn eviction_leaves_shadow_nodes_listed_and_a_refault_of_a_small_folio_splits_the_shadow() {
        let (mut x, mut h) = (XArray::new(true), Rec::default());
        for i in 0..8u64 {
            x.store(i * 512, 9, false, &mut h);
        }
        // Reclaim replaces each folio by a shadow of its order: the node now holds only shadows.
        for i in 0..8u64 {
            x.store(i * 512, 9, true, &mut h);
        }
        assert_eq!((h.charged, h.listed), (1, 1));
        // A 16 KiB folio refaults at index 0: the order-9 shadow splits into order-2 shadows in
        // 8 new leaf nodes (not charged, each listed), and the folio replaces one (its leaf
        // leaves the list, as the parent, now holding pointers, does).
        assert!(x.split(0, 2, &mut h));
        x.store(0, 2, false, &mut h);
        assert_eq!((h.uncharged, h.listed), (8, 1 + 8 - 1 - 1));
        assert_eq!(x.nr_nodes(), 1 + 8);
        assert_eq!(x.load(4), Some((4, XaEntry { order: 2, value: true })));
        assert_eq!(x.load(1), Some((0, XaEntry { order: 2, value: false })));
        // A PMD folio back at 0 frees the 8 leaves again.
        x.store(0, 9, false, &mut h);
        assert_eq!((h.freed, h.listed, x.nr_nodes()), (8, 0, 1));
    }

    #[test]
    fn erasing_everything_frees_every_node() {
        let (mut x, mut h) = (XArray::new(false), Rec::default());
        let mut idx = Vec::new();
        let mut i = 0u64;
        for order in [0u8, 2, 4, 6, 8, 9, 9, 0, 3] {
            let n = 1u64 << order;
            i = i.div_ceil(n) * n;
            x.store(i, order, false, &mut h);
            idx.push(i);
            i += n;
        }
        for i in idx.into_iter().rev() {
            x.erase(i, &mut h);
        }
        assert_eq!((x.nr_nodes(), x.height()), (0, 0));
        assert_eq!(h.charged, h.freed);
    }
}
