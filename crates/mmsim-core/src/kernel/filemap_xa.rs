//! The page cache's xarray nodes as kernel memory (lib/xarray.c's `xas_alloc`, `xas_nomem`,
//! `xa_node_free`; mm/workingset.c's `workingset_update_node`): each node a mapping's entries
//! need (kernel/xarray.rs) is a radix_tree_node object charged to the memcg of the task that
//! allocated it (i_pages is XA_FLAGS_ACCOUNT), uncharged when freed, and counted in
//! WORKINGSET_NODES while it holds only shadows.
//!
//! Differs from Linux: a node whose charge fails even with reclaim stays uncharged (Linux
//! fails the insertion with -ENOMEM and the caller gives up the folio); the shadow shrinker (`shadow_lru_isolate`),
//! which frees shadow-only nodes past an eighth of the memcg's pages, is not modelled.

use super::memcontrol::NO_MEMCG;
use super::page_alloc::gfp;
use super::slab::KmemCache;
use super::vmstat::VmItem;
use super::xarray::{XArray, XaHooks};
use super::Kernel;

/// The kernel side of an xarray operation: the current task's memcg, and the nodes whose
/// GFP_NOWAIT charge failed.
struct Hooks<'a> {
    k: &'a mut Kernel,
    memcg: u16,
    nomem: Vec<(u8, u64)>,
}

impl XaHooks for Hooks<'_> {
    /// `xas_alloc` under the lock: GFP_NOWAIT (no reclaim, so nothing else changes the mapping
    /// meanwhile), __GFP_ACCOUNT from XA_FLAGS_ACCOUNT. A node whose charge fails is left to
    /// `xas_nomem` (`with_xa`).
    fn node_alloc(&mut self, account: bool, key: (u8, u64)) -> u16 {
        if !account {
            if self.k.tp.is_some() {
                self.k.trace_kmem(crate::tracepoints::ev::KMEM_CACHE_ALLOC, KmemCache::RadixTreeNode, false, NO_MEMCG);
            }
            return NO_MEMCG;
        }
        match self.k.memcg_slab_post_alloc_hook(KmemCache::RadixTreeNode, self.memcg, gfp::KSWAPD_RECLAIM) {
            Ok(o) => o,
            Err(()) => {
                self.nomem.push(key);
                NO_MEMCG
            }
        }
    }

    fn node_free(&mut self, objcg: u16) {
        self.k.memcg_slab_free_hook(KmemCache::RadixTreeNode, objcg);
    }

    /// `__inc_lruvec_kmem_state` / `__dec_lruvec_kmem_state(node, WORKINGSET_NODES)`.
    fn shadow_list(&mut self, objcg: u16, delta: i64) {
        self.k.stat.mod_item(VmItem::WorkingsetNodes, delta);
        self.k.mod_memcg_item(objcg, VmItem::WorkingsetNodes, delta);
    }
}

impl Kernel {
    /// Run `f` on `obj`'s xarray with the kernel's hooks; then `xas_nomem` for each node
    /// whose GFP_NOWAIT charge failed: charged with the caller's `gfp_flags`, which may
    /// reclaim (Linux allocates the node with the lock dropped and retries the store; mmsim
    /// charges the node the store made, or gives the charge back if reclaim freed it).
    fn with_xa<R>(&mut self, obj: u32, gfp_flags: u32, f: impl FnOnce(&mut XArray, &mut Hooks) -> R) -> R {
        let mut xa = std::mem::take(&mut self.shmem[obj as usize].as_mut().expect("inode").xa);
        let memcg = if self.in_kthread { NO_MEMCG } else { self.cur_memcg() };
        let mut h = Hooks { k: self, memcg, nomem: Vec::new() };
        let r = f(&mut xa, &mut h);
        let nomem = std::mem::take(&mut h.nomem);
        self.shmem[obj as usize].as_mut().expect("inode").xa = xa;
        for key in nomem {
            let Ok(objcg) = self.memcg_slab_post_alloc_hook(KmemCache::RadixTreeNode, memcg, gfp_flags) else {
                continue;
            };
            match self.shmem[obj as usize].as_mut().and_then(|o| o.xa.set_objcg(key, objcg)) {
                // On the shadow list: now its memcg's WORKINGSET_NODES too.
                Some(true) => self.mod_memcg_item(objcg, VmItem::WorkingsetNodes, 1),
                Some(false) => {}
                None => self.memcg_slab_free_hook(KmemCache::RadixTreeNode, objcg),
            }
        }
        r
    }

    /// `xas_store` of an entry of `order` at `index` in `obj`'s i_pages (a folio, or with
    /// `value` a shadow or swap entry), a larger value entry there split first (as
    /// __filemap_add_folio and shmem_add_to_page_cache do).
    pub(super) fn xa_store(&mut self, obj: u32, index: u64, order: u32, value: bool, gfp_flags: u32) {
        self.with_xa(obj, gfp_flags, |xa, h| {
            if xa.load(index).is_some_and(|(_, e)| u32::from(e.order) > order) {
                xa.split(index, order as u8, h);
            }
            xa.store(index, order as u8, value, h);
        });
    }

    /// `xas_store(NULL)` of the entry covering `index` in `obj`'s i_pages.
    pub(super) fn xa_erase(&mut self, obj: u32, index: u64) {
        self.with_xa(obj, gfp::KERNEL, |xa, h| {
            if let Some((first, _)) = xa.load(index) {
                xa.erase(first, h);
            }
        });
    }

    /// `xas_split` of the entry at `index` into entries of `order` (a page-cache folio's split:
    /// `xas_split_alloc` with the mapping's gfp, its nodes uncharged).
    pub(super) fn xa_split(&mut self, obj: u32, index: u64, order: u32) {
        self.with_xa(obj, gfp::KERNEL, |xa, h| xa.split(index, order as u8, h));
    }

    /// The inode's xarray goes with it (every node freed).
    pub(super) fn xa_destroy(&mut self, obj: u32) {
        self.with_xa(obj, gfp::KERNEL, |xa, h| xa.destroy(h));
    }
}
