//! shmem and tmpfs through swap (mm/shmem.c, Linux 6.18): reclaim's `shmem_writeout` puts a
//! dirty shmem folio's swap entries in the object's page cache in its place
//! (`shmem_delete_from_page_cache`) and writes it to swap from the swap cache;
//! `shmem_swapin_folio` reads one back (cluster readahead by slot, `shmem_swapin_cluster`)
//! when a fault, read(2), write(2), fallocate or MADV_COLLAPSE meets the entry, and gives the
//! slot back; truncation and hole punching free the entries (`shmem_free_swap`).
//!
//! Differs from Linux: a large shmem folio that finds no free swap cluster is activated, not
//! split (mmsim's large shmem folios come from MADV_COLLAPSE only, and lie inside i_size);
//! no `SHMEM_F_LOCKED` (SHM_LOCK) nor `noswap` mount; no synchronous-device swap-in (no zram
//! yet). An entry is kept per page (index -> the page's slot), which is what Linux's large
//! entries become once `shmem_split_large_entry` has split them.

use super::mm_types::pg;
use super::page_alloc::{gfp, ClearPath};
use super::pgtable::SwpEntry;
use super::vmscan::PageoutResult;
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// The swap entry `mapping->i_pages` holds at `index` of a shmem object (`xa_is_value`).
    #[inline]
    pub fn shmem_swap_entry(&self, obj: u32, index: u64) -> Option<SwpEntry> {
        let o = self.shmem[obj as usize].as_ref()?;
        if o.swapped.is_empty() {
            return None;
        }
        o.swapped.get(&index).map(|&v| SwpEntry(v))
    }

    /// What the swap slot holding page `index` of `obj` has (None: not in swap, or a
    /// zero-filled slot).
    pub fn shmem_swapped_content(&self, obj: u32, index: u64) -> Option<&super::content::PageContent> {
        let e = self.shmem_swap_entry(obj, index)?;
        self.swap.si[e.ty()].data.get(&e.offset())
    }

    /// `info->swapped`: the object's pages in swap.
    pub fn shmem_nr_swapped(&self, obj: u32) -> u64 {
        self.shmem[obj as usize].as_ref().map_or(0, |o| o.swapped.len() as u64)
    }

    /// `shmem_writeout` of an isolated, unmapped, dirty shmem folio reclaim is paging out
    /// (`pageout` cleared its dirty bit): swap slots for it, its swap entries into the page
    /// cache in its place, and the write from the swap cache. `Activate` (redirtied) when
    /// there is no swap or no slot; a fallocated folio not yet used is cleared first.
    pub(super) fn shmem_writeout(&mut self, f: Pfn) -> PageoutResult {
        if self.swap.total_swap_pages == 0 {
            self.mem.pages[f.idx()].set(pg::DIRTY);
            return PageoutResult::Activate;
        }
        let nr = self.folio_nr_pages(f);
        if self.mem.pages[f.idx()].test(pg::FALLOC) {
            // !uptodate: folio_zero_range and folio_mark_uptodate before it is written.
            self.mem.pages[f.idx()].clear(pg::FALLOC);
            self.clear_pages(f, nr, 1, ClearPath::User);
        }
        let Ok(e) = self.folio_alloc_swap(f) else {
            // A large folio would be split and tried again (try_split): see the module's note.
            self.mem.pages[f.idx()].set(pg::DIRTY);
            return PageoutResult::Activate;
        };
        // swap_shmem_alloc: the page cache's reference on each slot.
        for i in 0..nr as u32 {
            self.swap_duplicate(e.add(i));
        }
        self.shmem_delete_from_page_cache(f, e);
        if !self.swap_writeout(f) && self.mem.pages[f.idx()].test(pg::DIRTY) {
            // Nothing was written and the folio is the only copy again: impossible while the
            // page cache holds the slots; reported, the folio kept.
            self.report_bug(format!("shmem folio {:#x}: swap_writeout freed its slots", f.0));
        }
        PageoutResult::Success
    }

    /// `shmem_delete_from_page_cache`: the folio leaves its object's page cache and the
    /// swap entries from `e` take its indices (`shmem_recalc_inode`: info->swapped).
    fn shmem_delete_from_page_cache(&mut self, f: Pfn, e: SwpEntry) {
        let obj = self.mem.pages[f.idx()].mapping;
        let (index, nr) = (self.mem.pages[f.idx()].index, self.folio_nr_pages(f));
        self.page_cache_delete(obj, f, true);
        let o = self.shmem[obj as usize].as_mut().expect("object");
        for i in 0..nr {
            o.swapped.insert(index + i, e.add(i as u32).0);
        }
    }

    /// `shmem_swapin_folio`: the page at `index` (which holds a swap entry) read back: found
    /// in the swap cache (a readahead hit), or read by `shmem_swapin_cluster` (a fault's
    /// PGMAJFAULT and VM_FAULT_MAJOR; `fault_mm` the faulting mm), then put back in the page
    /// cache (`shmem_add_to_page_cache`), out of the swap cache, dirty, its slots freed.
    /// Returns the page and the fault bits; None when memory or the charge ran out.
    pub(super) fn shmem_swapin_folio(&mut self, obj: u32, index: u64, fault_mm: Option<MmId>) -> Option<(Pfn, u32)> {
        let e = self.shmem_swap_entry(obj, index)?;
        let mut ret = 0;
        let folio = match self.swap_cache_get_folio(e) {
            Some(f) => {
                self.swap_update_readahead(f, None);
                f
            }
            None => {
                if let Some(mm) = fault_mm {
                    ret |= vm_fault::MAJOR;
                    self.stat.count(VmEvent::PgMajFault);
                    self.count_memcg_events(self.mm_memcg(mm), VmEvent::PgMajFault, 1);
                }
                let memcg = fault_mm.map_or_else(|| self.cur_memcg(), |mm| self.mm_memcg(mm));
                self.swap_cluster_readahead(e, memcg)?
            }
        };
        self.folio_get(folio);
        self.folio_wait_locked(folio);
        self.folio_wait_writeback(folio);
        let head_e = SwpEntry(self.mem.pages[folio.idx()].private);
        let nr = self.folio_nr_pages(folio);
        let base = index - (e.offset() - head_e.offset()) as u64;
        let ours = self.mem.pages[folio.idx()].test(pg::SWAPCACHE)
            && (0..nr).all(|i| self.shmem_swap_entry(obj, base + i) == Some(head_e.add(i as u32)));
        if !ours {
            // The swap cache's folio is not this object's any more (-EEXIST): none of this
            // happens between two steps in mmsim; reported, the page given up.
            self.folio_put(folio);
            self.report_bug(format!("shmem {obj} index {index}: swap-cache folio {:#x} is not its entry", folio.0));
            return None;
        }
        // A readahead folio was added as anonymous memory; it is this object's shmem.
        self.mem.pages[folio.idx()].clear(pg::ANON);
        let o = self.shmem[obj as usize].as_mut().expect("object");
        for i in 0..nr {
            o.swapped.remove(&(base + i));
        }
        // shmem_add_to_page_cache: a reference per page for the cache.
        let order = if nr > 1 { u32::from(self.mem.pages[folio.idx()].order) } else { 0 };
        self.__filemap_add_folio(obj, base, folio, order, gfp::HIGHUSER_MOVABLE);
        self.folio_get(folio);
        self.swap_cache_del_folio(folio);
        self.mem.pages[folio.idx()].set(pg::DIRTY);
        // swap_free_nr: the page cache's references on the slots.
        self.swap_free_nr(head_e, nr as u32);
        self.folio_put(folio);
        Some((Pfn(folio.0 + (index - base) as u32), ret))
    }

    /// `shmem_free_swap` over indices [start, end): each swap entry there leaves the page
    /// cache and drops its slot's reference (`free_swap_and_cache_nr`: a slot only the swap
    /// cache still holds has its folio removed from it when nothing maps it).
    pub(super) fn shmem_free_swap_range(&mut self, obj: u32, start: u64, end: u64) {
        let Some(o) = self.shmem[obj as usize].as_mut() else { return };
        if o.swapped.is_empty() {
            return;
        }
        let mut gone: Vec<(u64, u32)> =
            o.swapped.iter().filter(|(&i, _)| i >= start && i < end).map(|(&i, &v)| (i, v)).collect();
        gone.sort_unstable();
        for (i, _) in &gone {
            o.swapped.remove(i);
        }
        for (i, _) in &gone {
            self.xa_erase(obj, *i);
        }
        for (_, v) in gone {
            self.free_swap_and_cache_nr(SwpEntry(v), 1);
        }
    }

    /// `shmem_get_folio(SGP_READ)` for read(2): the cached page at `index`, swapped in if it
    /// is in swap; None for a hole (or when memory ran out). A page fallocate(2) added and
    /// nothing wrote yet (!PG_uptodate) is a hole too: SGP_READ lets the caller read zeroes
    /// and does not mark it accessed.
    pub fn shmem_get_folio_read(&mut self, obj: u32, index: u64) -> Option<Pfn> {
        if self.shmem_swap_entry(obj, index).is_some() {
            return self.shmem_swapin_folio(obj, index, None).map(|(p, _)| p);
        }
        self.shmem_find_folio(obj, index).filter(|p| !self.mem.pages[p.idx()].test(pg::FALLOC))
    }

    /// The pages of `obj` in swap at [start, end) read back (MADV_COLLAPSE's `collapse_file`
    /// and fallocate: SGP_NOALLOC / SGP_FALLOC); false when one could not be.
    pub(super) fn shmem_swapin_range(&mut self, obj: u32, start: u64, end: u64) -> bool {
        if self.shmem[obj as usize].as_ref().is_none_or(|o| o.swapped.is_empty()) {
            return true;
        }
        (start..end).all(|i| self.shmem_swap_entry(obj, i).is_none() || self.shmem_swapin_folio(obj, i, None).is_some())
    }
}
