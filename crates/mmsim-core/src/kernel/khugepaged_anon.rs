//! The collapse of anonymous memory (mm/khugepaged.c `hpage_collapse_scan_pmd`,
//! `collapse_huge_page`, `__collapse_huge_page_isolate`, `__collapse_huge_page_copy`) for
//! MADV_COLLAPSE (`madvise_collapse`, `cc->is_khugepaged` false: the max_ptes_* limits and
//! the young-page rule do not apply) and khugepaged's scan (`is_khugepaged`: they do). The 512
//! ptes under an aligned pmd are copied into a new PMD folio (none and zero-page ptes as
//! zeroes), the old pages freed, and the PTE table, emptied, is deposited under the new huge
//! pmd (VmPTE does not change).
//!
//! Differs from Linux: no swap, so no swap entries (max_ptes_swap never applies, nothing is
//! swapped in); THP_SCAN_EXCEED_SHARED_PTE is not counted (mmsim's /proc/vmstat has no such
//! line); no userfaultfd, LRU batches, page locks or memcg charge (SCAN_PAGE_LRU,
//! SCAN_PAGE_LOCK, SCAN_CGROUP_CHARGE_FAIL cannot happen); the mmap_lock drop between the scan
//! and the collapse changes nothing.

use super::khugepaged_scan::ScanResult;
use super::knobs::ThpEnabled;
use super::memory::{maybe_mkwrite, vm_page_prot};
use super::mm::{vm, MmCounter, Vma};
use super::mm_types::pg;
use super::mmap::Errno;
use super::pgtable::{self, Entry};
use super::vmstat::VmEvent;
use super::{Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// `thp_vma_allowable_order(vma, type, PMD_ORDER)` for an anonymous vma, with
    /// `thp_vma_suitable_order(vma, vm_end - HPAGE_PMD_SIZE)` (a whole aligned 2 MiB inside
    /// it): not VM_NOHUGEPAGE, VM_HUGETLB nor VM_SPECIAL (`VM_NO_KHUGEPAGED`); the sysfs
    /// `enabled` knob (always, or madvise with VM_HUGEPAGE) unless `forced` (MADV_COLLAPSE's
    /// TVA_FORCED_COLLAPSE: even with `never`).
    pub fn thp_vma_allowable_anon(&self, v: &Vma, forced: bool) -> bool {
        let hsize = self.geo.hpage_pmd_size();
        if !self.has_transparent_hugepage()
            || !v.is_anonymous()
            || v.flags & (vm::NOHUGEPAGE | vm::HUGETLB | vm::DONTEXPAND) != 0
            || v.end < hsize
            || !self.thp_vma_suitable_pmd(v, v.end - hsize)
        {
            return false;
        }
        forced
            || match self.knobs.thp_enabled {
                ThpEnabled::Always => true,
                ThpEnabled::Madvise => v.flags & vm::HUGEPAGE != 0,
                ThpEnabled::Never => false,
            }
    }

    /// `madvise_collapse` of the part [start, end) of anonymous vma `v`: each aligned 2 MiB
    /// is scanned (`hpage_collapse_scan_pmd`, as MADV_COLLAPSE); one already PMD-mapped counts
    /// as collapsed. A result on the list of those worth going on after (no PMD table, a page
    /// in use) is remembered, any other ends the loop (a pmd none: SCAN_PMD_NONE, so an
    /// untouched 2 MiB stops the ranges after it); unless every range is a THP at the end,
    /// the last result's errno (`madvise_collapse_errno`).
    pub(super) fn madvise_collapse_anon(&mut self, mm: MmId, v: &Vma, start: u64, end: u64) -> Result<(), Errno> {
        if !self.thp_vma_allowable_anon(v, true) {
            return Err(Errno::EINVAL);
        }
        self.lru_add_drain();
        if self.knobs.ptshare != 0 {
            self.pt_unshare_range(mm, start, end);
        }
        let hsize = self.geo.hpage_pmd_size();
        let hstart = start.next_multiple_of(hsize);
        let hend = self.geo.hpage_pmd_align_down(end);
        let mut thps = 0u64;
        let mut last_fail = ScanResult::Fail;
        let mut addr = hstart;
        while addr < hend {
            let r = self.hpage_collapse_scan_pmd(mm, addr, false);
            match r {
                ScanResult::Succeed | ScanResult::PmdMapped => thps += 1,
                ScanResult::PmdNull | ScanResult::PageNull | ScanResult::PageCount => last_fail = r,
                _ => {
                    last_fail = r;
                    break;
                }
            }
            addr += hsize;
        }
        // `thps == (hend - hstart) >> HPAGE_PMD_SHIFT`, unsigned: hstart > hend never holds.
        if hstart <= hend && thps == (hend - hstart) / hsize {
            return Ok(());
        }
        Err(match last_fail {
            ScanResult::AllocHugePageFail => Errno::ENOMEM,
            ScanResult::ExceedNonePte => Errno::EBUSY,
            ScanResult::PageCount => Errno::EAGAIN,
            _ => Errno::EINVAL,
        })
    }

    /// `find_pmd_or_thp_or_none`: the pmd slot of `addr` and whether it maps a PTE table.
    fn find_pmd_or_thp_or_none(&self, mm: MmId, addr: u64) -> Result<super::memory::Slot, ScanResult> {
        let Some(pmd) = self.pmd_slot(mm, addr) else {
            return Err(ScanResult::PmdNull);
        };
        let e = self.entry(pmd.table, pmd.idx);
        if e.none() {
            return Err(ScanResult::PmdNone);
        }
        if e.huge() {
            return Err(ScanResult::PmdMapped);
        }
        Ok(pmd)
    }

    /// `hpage_collapse_scan_pmd`: read the 512 ptes of the aligned 2 MiB at `addr` (of an
    /// anonymous vma). A none or zero-page pte counts against `max_ptes_none` (khugepaged
    /// only: THP_SCAN_EXCEED_NONE_PTE beyond it); a page mapped by more than one mm against
    /// `max_ptes_shared` (khugepaged only); a page with references other than its mappings is
    /// SCAN_PAGE_COUNT. Otherwise `collapse_huge_page`. khugepaged's need of a young pte
    /// (SCAN_LACK_REFERENCED_PAGE) always holds: x86 makes ptes young (vm_page_prot has
    /// _PAGE_ACCESSED) and mmsim has no reclaim aging to clear the bit. A read-only range collapses too (Linux 6.18 has no SCAN_PAGE_RO
    /// check: the host collapses a range of zero-page ptes, or one write-protected by fork).
    pub(super) fn hpage_collapse_scan_pmd(&mut self, mm: MmId, addr: u64, khugepaged: bool) -> ScanResult {
        let pmd = match self.find_pmd_or_thp_or_none(mm, addr) {
            Ok(p) => p,
            Err(r) => return r,
        };
        let table = self.entry(pmd.table, pmd.idx).pfn();
        if self.pt_is_shared(table) {
            return ScanResult::Fail;
        }
        let kn = &self.knobs.khugepaged;
        let (max_none, max_shared, max_swap) =
            (u64::from(kn.max_ptes_none), u64::from(kn.max_ptes_shared), u64::from(kn.max_ptes_swap));
        let (mut none_or_zero, mut shared, mut unmapped, mut referenced) = (0u64, 0u64, 0u64, 0u64);
        for i in 0..self.geo.hpage_pmd_nr() as usize {
            let e = self.entry(table, i);
            if e.is_swap() {
                unmapped += 1;
                if khugepaged && unmapped > max_swap {
                    self.stat.count(VmEvent::ThpScanExceedSwapPte);
                    return ScanResult::ExceedSwapPte;
                }
                continue;
            }
            if !e.present() || self.is_zero_pfn(e.pfn()) {
                none_or_zero += 1;
                if khugepaged && none_or_zero > max_none {
                    self.stat.count(VmEvent::ThpScanExceedNonePte);
                    return ScanResult::ExceedNonePte;
                }
                continue;
            }
            if e.special() {
                return ScanResult::PageNull;
            }
            let head = self.head_of(e.pfn());
            if !self.mem.pages[head.idx()].test(pg::ANON) {
                return ScanResult::PageAnon;
            }
            if self.folio_maybe_mapped_shared(head) {
                shared += 1;
                if khugepaged && shared > max_shared {
                    return ScanResult::ExceedSharedPte;
                }
            }
            // is_refcount_suitable: no reference but the mappings' and the swap cache's.
            let cache =
                if self.mem.pages[head.idx()].test(pg::SWAPCACHE) { self.folio_nr_pages(head) as i64 } else { 0 };
            if i64::from(self.mem.pages[head.idx()].refcount) != self.folio_mapcount(head) + cache {
                return ScanResult::PageCount;
            }
            if e.has(pgtable::ACCESSED) || self.mem.pages[head.idx()].test(pg::REFERENCED) {
                referenced += 1;
            }
        }
        // khugepaged wants the range in use, half of it if it would swap pages in.
        if khugepaged && (referenced == 0 || (unmapped > 0 && referenced < self.geo.hpage_pmd_nr() / 2)) {
            return ScanResult::LackReferencedPage;
        }
        if unmapped > 0 {
            let r = self.collapse_huge_page_swapin(mm, addr, table);
            if r != ScanResult::Succeed {
                return r;
            }
        }
        self.collapse_huge_page(mm, addr, khugepaged)
    }

    /// `__collapse_huge_page_swapin`: each swap pte of the range is faulted in
    /// (`do_swap_page`, with readahead); one whose folio must still be read makes the
    /// collapse give up (it would wait: SCAN_PAGE_LOCK), the read going on for a later scan.
    fn collapse_huge_page_swapin(&mut self, mm: MmId, addr: u64, table: Pfn) -> ScanResult {
        let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else { return ScanResult::AddressRange };
        for i in 0..self.geo.hpage_pmd_nr() as usize {
            let e = self.entry(table, i);
            if !e.is_swap() {
                continue;
            }
            let a = addr + ((i as u64) << self.geo.page_shift);
            let se = e.swp_entry();
            let ready = self.swap_cache_get_folio(se).is_some_and(|f| !self.mem.pages[f.idx()].test(pg::LOCKED));
            if !ready {
                // Start the read (with readahead) and give up for now.
                if self.swap_cache_get_folio(se).is_none() {
                    self.swapin_readahead(se, mm, &v, a);
                    self.stat.count(VmEvent::PgMajFault);
                }
                return ScanResult::PageLock;
            }
            let slot = super::memory::Slot { table, idx: i };
            let r = self.do_swap_page(mm, &v, a, false, slot);
            if r & super::vm_fault::ERROR != 0 {
                return ScanResult::Fail;
            }
        }
        ScanResult::Succeed
    }

    /// `collapse_huge_page`: allocate the PMD folio (THP_COLLAPSE_ALLOC, or
    /// THP_COLLAPSE_ALLOC_FAILED and SCAN_ALLOC_HUGE_PAGE_FAIL; khugepaged reclaims only with
    /// `khugepaged/defrag`), revalidate the vma, clear the pmd and flush, copy the pages (none
    /// and the zero page as zeroes: they add to RssAnon), drop the old ones, deposit the
    /// emptied PTE table and map the folio by the pmd (dirty, writable as the vma allows,
    /// mlocked in a VM_LOCKED vma).
    fn collapse_huge_page(&mut self, mm: MmId, addr: u64, khugepaged: bool) -> ScanResult {
        let r = self.collapse_huge_page_inner(mm, addr, khugepaged);
        crate::tracepoints::raise(&mut self.tp, crate::tracepoints::ev::COLLAPSE_HUGE_PAGE, || {
            format!("mm={mm} isolated={} status={}", u8::from(r == ScanResult::Succeed), r.name())
        });
        r
    }

    /// `collapse_huge_page`'s work (`collapse_huge_page` raises its tracepoint).
    fn collapse_huge_page_inner(&mut self, mm: MmId, addr: u64, khugepaged: bool) -> ScanResult {
        let (nr, hsize) = (self.geo.hpage_pmd_nr(), self.geo.hpage_pmd_size());
        let new = match self.alloc_charge_folio(khugepaged) {
            Ok(new) => new,
            Err(r) => return r,
        };
        if self.mem_cgroup_charge(new, self.mm(mm).memcg, super::page_alloc::gfp::HIGHUSER_MOVABLE).is_err() {
            self.folio_put(new);
            return ScanResult::CgroupChargeFail;
        }
        // hugepage_vma_revalidate(expect_anon): a reclaim may have run, nothing else.
        let v = match self.mm(mm).find_vma(addr).cloned() {
            Some(v) if v.start <= addr && self.thp_vma_suitable_pmd(&v, addr) => v,
            _ => {
                self.folio_put(new);
                return ScanResult::AddressRange;
            }
        };
        if !self.thp_vma_allowable_anon(&v, !khugepaged) {
            self.folio_put(new);
            return ScanResult::VmaCheck;
        }
        if v.anon_vma.is_none() {
            self.folio_put(new);
            return ScanResult::PageAnon;
        }
        let pmd = match self.find_pmd_or_thp_or_none(mm, addr) {
            Ok(p) => p,
            Err(r) => {
                self.folio_put(new);
                return r;
            }
        };
        // pmdp_collapse_flush.
        let table = self.entry(pmd.table, pmd.idx).pfn();
        self.set_entry(pmd.table, pmd.idx, Entry::NONE);
        self.flush_tlb_range(mm, addr, addr + hsize);
        // __collapse_huge_page_copy, then __collapse_huge_page_copy_succeeded.
        let mut filled = 0i64;
        for i in 0..nr as usize {
            let e = self.entry(table, i);
            let dst = Pfn(new.0 + i as u32);
            if !e.present() || self.is_zero_pfn(e.pfn()) {
                self.clear_pages(dst, 1, 1, super::page_alloc::ClearPath::User);
                filled += 1;
                if !e.none() {
                    self.set_entry(table, i, Entry::NONE);
                }
                continue;
            }
            let page = e.pfn();
            self.copy_page(dst, page);
            self.set_entry(table, i, Entry::NONE);
            self.remove_rmap_pte(page, mm);
            let h = self.head_of(page);
            self.mlock_vma_folio(h, &v, false);
            let cached = self.mem.pages[h.idx()].test(pg::SWAPCACHE);
            self.folio_put(h);
            // __collapse_huge_page_copy_succeeded's free_swap_cache.
            if cached && self.mem.pages[h.idx()].test(pg::SWAPCACHE) && self.folio_mapcount(h) == 0 {
                self.folio_free_swap(h);
            }
        }
        self.add_rss_at(pmd.table, mm, MmCounter::AnonPages, filled);
        self.folio_add_new_anon_rmap(new, mm, true, v.linear_page_index(addr, self.geo));
        self.folio_add_lru_vma(new, &v);
        self.deposit(pmd, table);
        let e = Entry::new(new, vm_page_prot(&v) | pgtable::PSE | pgtable::DIRTY | pgtable::ACCESSED);
        self.set_entry(pmd.table, pmd.idx, maybe_mkwrite(e, &v));
        ScanResult::Succeed
    }
}
