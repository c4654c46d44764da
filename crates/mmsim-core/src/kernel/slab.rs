//! The slab caches whose objects memory cgroups are charged for (SLAB_ACCOUNT caches, and
//! __GFP_ACCOUNT allocations such as the page cache's xarray nodes), and their object sizes.
//!
//! Differs from Linux: no slabs. An object is its charge (`obj_full_size`: the cache's
//! `s->size` and the obj_ext pointer) and its NR_SLAB_*_B update to its memcg
//! (kernel/memcontrol_kmem.rs); the node's NR_SLAB_* counters, which count slab pages, are
//! not kept, and objects no memcg is charged for are not modelled. Of the accounted caches the
//! vmas, ext4's buffer heads and the page cache's xarray nodes are modelled (docs/model/reclaim.md lists the others).

use super::memcontrol::{EXTRA_SLAB_RECLAIMABLE_B, EXTRA_SLAB_UNRECLAIMABLE_B};

/// An accounted slab cache of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KmemCache {
    /// `vm_area_cachep` (SLAB_ACCOUNT): each vma.
    VmAreaStruct,
    /// `bh_cachep` (SLAB_RECLAIM_ACCOUNT; `folio_alloc_buffers` allocates with __GFP_ACCOUNT
    /// under the folio's memcg): an ext4 folio's buffer heads.
    BufferHead,
    /// `radix_tree_node_cachep` (SLAB_RECLAIM_ACCOUNT; a mapping's i_pages is
    /// XA_FLAGS_ACCOUNT): an xarray node of the page cache.
    RadixTreeNode,
}

impl KmemCache {
    pub const ALL: [KmemCache; 3] = [KmemCache::VmAreaStruct, KmemCache::BufferHead, KmemCache::RadixTreeNode];

    /// Its name in /sys/kernel/slab (and the profile's `slab` table).
    pub fn name(self) -> &'static str {
        match self {
            KmemCache::VmAreaStruct => "vm_area_struct",
            KmemCache::BufferHead => "buffer_head",
            KmemCache::RadixTreeNode => "radix_tree_node",
        }
    }

    /// `cache_vmstat_idx`: NR_SLAB_RECLAIMABLE_B for a SLAB_RECLAIM_ACCOUNT cache, else
    /// NR_SLAB_UNRECLAIMABLE_B (as `MemCgroup::extra` indices).
    pub fn vmstat_idx(self) -> usize {
        match self {
            KmemCache::VmAreaStruct => EXTRA_SLAB_UNRECLAIMABLE_B,
            KmemCache::BufferHead | KmemCache::RadixTreeNode => EXTRA_SLAB_RECLAIMABLE_B,
        }
    }
}

/// `s->size` of each cache (the profile's `slab` table), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabSizes(pub [u32; KmemCache::ALL.len()]);

impl SlabSizes {
    /// `obj_full_size`: what one object charges, its cache's size and the obj_ext entry that
    /// records its objcg (`sizeof(struct obj_cgroup *)`).
    #[inline]
    pub fn obj_full_size(&self, cache: KmemCache) -> u64 {
        self.0[cache as usize] as u64 + 8
    }
}

impl Default for SlabSizes {
    /// The sizes of this repository's default profile (profiles/default.toml's `slab`).
    fn default() -> Self {
        SlabSizes([192, 104, 584])
    }
}
