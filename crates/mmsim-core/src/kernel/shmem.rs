//! Shared anonymous memory (mm/shmem.c): MAP_SHARED|MAP_ANONYMOUS maps a shmem object whose
//! page cache holds the pages; every process that inherits the mapping sees the same pages.
//! Differs from Linux: no swap, no huge shmem (shmem_enabled = never).

use super::mm_types::{i_mmap_insert, i_mmap_remove, pg, NIL};
use super::page_alloc::{gfp, ClearPath};
use super::vmstat::VmItem;
use super::{Kernel, MmId};

/// Kernel-variable lines of the objects' `mapping->tree_lock` (outside RAM).
const PAGECACHE_LOCK_LINE: u64 = 7 << 60;
use crate::units::Pfn;

/// A shmem inode: its page cache (index -> frame) and the vmas that map it.
#[derive(Clone, Debug)]
pub struct ShmemObject {
    pub pages: Vec<u32>,
    /// vmas referencing the object (the file's reference count).
    pub refs: u32,
    /// The mms whose vmas map the object, with how many vmas each, in the order they first
    /// mapped it (the file's i_mmap at mm granularity: seed 003 finds a sibling's page table
    /// through it).
    pub mms: Vec<(MmId, u32)>,
}

impl Kernel {
    /// `shmem_zero_setup` / `shmem_kernel_file_setup`: a new object of `nr_pages` pages, mapped
    /// by one vma of `mm`.
    pub fn shmem_new(&mut self, nr_pages: u64, mm: MmId) -> u32 {
        let obj = ShmemObject { pages: vec![NIL; nr_pages as usize], refs: 1, mms: vec![(mm, 1)] };
        if let Some(i) = self.shmem.iter().position(|s| s.is_none()) {
            self.shmem[i] = Some(obj);
            return i as u32;
        }
        self.shmem.push(Some(obj));
        (self.shmem.len() - 1) as u32
    }

    /// The object's size in pages (i_size).
    pub fn shmem_size(&self, obj: u32) -> u64 {
        self.shmem[obj as usize].as_ref().map_or(0, |o| o.pages.len() as u64)
    }

    /// `find_lock_page`'s `read_lock_irq(&mapping->tree_lock)` and `read_unlock_irq` (Linux
    /// 2.6.15 .. 2.6.26, `kernel/pagecache_lock=tree_lock`): two atomics on the object's lock
    /// line, which every process faulting on the object shares. Nothing with RCU lookups.
    pub fn pagecache_lookup_lock(&mut self, obj: u32) {
        if self.knobs.pagecache_tree_lock {
            let line = PAGECACHE_LOCK_LINE | obj as u64;
            for func in ["_read_lock_irq", "_read_unlock_irq"] {
                self.work.push(super::Work::Atomic { line, func, kind: super::AtomicKind::Rmw });
            }
        }
    }

    /// `filemap_get_folio`: the cached page at `index`, if any.
    pub fn shmem_find_folio(&self, obj: u32, index: u64) -> Option<Pfn> {
        let o = self.shmem[obj as usize].as_ref()?;
        match o.pages.get(index as usize) {
            Some(&p) if p != NIL => Some(Pfn(p)),
            _ => None,
        }
    }

    /// `shmem_get_folio_gfp(SGP_CACHE)`: the page at `index`, allocated and cleared on first
    /// use (shmem_alloc_and_add_folio; NR_SHMEM). None on allocation failure.
    pub fn shmem_get_folio(&mut self, obj: u32, index: u64) -> Option<Pfn> {
        if let Some(p) = self.shmem_find_folio(obj, index) {
            return Some(p);
        }
        // shmem_alloc_folio takes the mapping's gfp (no __GFP_ZERO) and shmem_get_folio_gfp
        // clears the new folio itself (so twice under init_on_alloc, as Linux does).
        let a = self.alloc_pages(0, gfp::USER | gfp::DIRECT_RECLAIM)?;
        self.clear_pages(a.pfn, 1, 1, ClearPath::User);
        let p = &mut self.mem.pages[a.pfn.idx()];
        p.set(pg::SHMEM);
        p.mapping = obj;
        p.index = index as u32;
        self.shmem[obj as usize].as_mut().expect("object").pages[index as usize] = a.pfn.0;
        self.stat.mod_item(VmItem::NrShmem, 1);
        Some(a.pfn)
    }

    /// `get_file` (+ `vma_interval_tree_insert`): one more vma of `mm` maps the object.
    pub fn shmem_get(&mut self, obj: u32, mm: MmId) {
        let o = self.shmem[obj as usize].as_mut().expect("object");
        o.refs += 1;
        i_mmap_insert(&mut o.mms, mm);
    }

    /// `fput` (+ `vma_interval_tree_remove`): a vma of `mm` no longer maps the object; the
    /// last reference's `shmem_evict_inode` truncates the page cache.
    pub fn shmem_put(&mut self, obj: u32, mm: MmId) {
        let o = self.shmem[obj as usize].as_mut().expect("object");
        o.refs -= 1;
        i_mmap_remove(&mut o.mms, mm);
        if o.refs > 0 {
            return;
        }
        let o = self.shmem[obj as usize].take().expect("object");
        for p in o.pages {
            if p != NIL {
                self.stat.mod_item(VmItem::NrShmem, -1);
                self.mem.pages[p as usize].clear(pg::SHMEM);
                self.folio_put(Pfn(p));
            }
        }
    }
}
