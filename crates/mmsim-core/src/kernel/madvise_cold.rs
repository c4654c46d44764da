//! MADV_COLD and MADV_PAGEOUT (mm/madvise.c `madvise_cold`, `madvise_pageout` and their
//! page walk `madvise_cold_or_pageout_pte_range`): the range's folios that only this
//! mapping maps are marked old (PG_referenced cleared, PG_workingset set on an active one);
//! MADV_COLD also clears the ptes' accessed bits and moves active folios to the inactive list
//! (`folio_deactivate`), MADV_PAGEOUT isolates them and reclaims them at once, a page
//! table (2 MiB) at a time (`reclaim_pages`: anonymous memory goes to swap, clean page cache
//! is dropped).
//!
//! Differs from Linux: a page-cache THP the range covers in part is left alone (mmsim does
//! not split page-cache folios; Linux splits it and goes on); the caller may always page out
//! a file's pages (`can_do_file_pageout`: mmsim's processes own their files).

use super::memory::Slot;
use super::mm::{vm, Vma};
use super::mm_types::pg;
use super::mmap::Errno;
use super::pgtable;
use super::{Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// `madvise_cold` (`pageout` false) or `madvise_pageout` of [start, end) of the vma `v`.
    pub(super) fn madvise_cold_or_pageout(
        &mut self,
        mm: MmId,
        v: &Vma,
        start: u64,
        end: u64,
        pageout: bool,
    ) -> Result<(), Errno> {
        // can_madv_lru_vma.
        if v.flags & (vm::LOCKED | vm::HUGETLB) != 0 {
            return Err(Errno::EINVAL);
        }
        self.lru_add_drain();
        let mut young = false;
        let mut addr = start;
        while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut addr, end) {
            let mut list: Vec<Pfn> = Vec::new();
            let e = self.entry(pmd.table, pmd.idx);
            let done =
                e.present() && e.huge() && self.cold_huge_pmd(mm, v, pmd, addr, next, pageout, &mut list, &mut young);
            if !done {
                let e = self.entry(pmd.table, pmd.idx);
                if e.present() && !e.huge() {
                    self.cold_pte_range(mm, v, e.pfn(), addr, next, pageout, &mut list, &mut young);
                }
            }
            if pageout {
                self.reclaim_pages(list);
            }
            addr = next;
        }
        if young {
            // tlb_finish_mmu: the old entries leave the TLBs, so that the next use sets their
            // accessed bits again.
            self.flush_tlb_range(mm, start, end);
        }
        self.sync_items();
        Ok(())
    }

    /// The pmd step: true when the pmd was dealt with (the huge zero page, a folio others map,
    /// a THP covered whole, or a page-cache THP covered in part); false after splitting an
    /// anonymous THP the range covers in part (the pte walk takes its pages).
    #[allow(clippy::too_many_arguments)]
    fn cold_huge_pmd(
        &mut self,
        mm: MmId,
        v: &Vma,
        pmd: Slot,
        addr: u64,
        next: u64,
        pageout: bool,
        list: &mut Vec<Pfn>,
        young: &mut bool,
    ) -> bool {
        let e = self.entry(pmd.table, pmd.idx);
        if self.is_huge_zero_pmd(e) || self.is_hugetlb_pmd(e) {
            return true;
        }
        let head = e.pfn();
        if self.folio_maybe_mapped_shared(head) {
            return true;
        }
        if next - addr != self.geo.hpage_pmd_size() {
            if !self.mem.pages[head.idx()].test(pg::ANON) || self.mem.pages[head.idx()].test(pg::MLOCKED) {
                return true;
            }
            let haddr = self.geo.hpage_pmd_align_down(addr);
            self.__split_huge_pmd(mm, v, pmd, haddr);
            self.split_anon_folio(mm, head, v.linear_page_index(haddr, self.geo));
            return false;
        }
        if !pageout && e.has(pgtable::ACCESSED) {
            self.set_entry(pmd.table, pmd.idx, e.without(pgtable::ACCESSED));
            *young = true;
        }
        self.cold_folio(head, pageout, list);
        true
    }

    /// The pte step over [addr, end) of the PTE table `table`.
    #[allow(clippy::too_many_arguments)]
    fn cold_pte_range(
        &mut self,
        mm: MmId,
        v: &Vma,
        table: Pfn,
        addr: u64,
        end: u64,
        pageout: bool,
        list: &mut Vec<Pfn>,
        young: &mut bool,
    ) {
        // A large folio mapped here in part is split first (`split_folio`).
        self.for_each_pte_folio(mm, v, table, addr, end, |k, idx, head, nr| {
            // Only a folio on the LRU that this mapping alone maps (whole).
            if !k.mem.pages[head.idx()].test(pg::LRU) || k.folio_mapcount(head) != k.folio_nr_pages(head) as i64 {
                return;
            }
            if !pageout {
                for i in 0..nr as usize {
                    let pe = k.entry(table, idx + i);
                    if pe.has(pgtable::ACCESSED) {
                        k.set_entry(table, idx + i, pe.without(pgtable::ACCESSED));
                        *young = true;
                    }
                }
            }
            k.cold_folio(head, pageout, list);
        });
    }

    /// A folio of the range: old now; deactivated (MADV_COLD) or isolated for reclaim
    /// (MADV_PAGEOUT; an unevictable one goes straight back).
    fn cold_folio(&mut self, head: Pfn, pageout: bool, list: &mut Vec<Pfn>) {
        let p = &mut self.mem.pages[head.idx()];
        p.clear(pg::REFERENCED);
        if p.test(pg::ACTIVE) {
            p.set(pg::WORKINGSET);
        }
        if !pageout {
            self.folio_deactivate(head);
        } else if self.folio_isolate_lru(head) {
            if self.mem.pages[head.idx()].test(pg::UNEVICTABLE) {
                self.folio_putback_lru(head);
            } else {
                list.push(head);
            }
        }
    }

    /// `folio_isolate_lru`: a folio on the LRU comes off it, with a reference.
    pub fn folio_isolate_lru(&mut self, head: Pfn) -> bool {
        if !self.mem.pages[head.idx()].test(pg::LRU) {
            return false;
        }
        self.lruvec_del_folio(head);
        self.mem.pages[head.idx()].clear(pg::LRU);
        self.folio_get(head);
        true
    }
}
