//! khugepaged for read-only file THP (CONFIG_READ_ONLY_THP_FOR_FS, mm/khugepaged.c), chosen by
//! `transparent_hugepage/file_text=khugepaged`: the mms registered by `khugepaged_enter_vma`,
//! the scan of one wake-up (`khugepaged_do_scan` -> `khugepaged_scan_mm_slot`), a file range's
//! scan (`hpage_collapse_scan_file`) and its collapse into a PMD folio in the page cache
//! (`collapse_file`, `retract_page_tables`, `collapse_pte_mapped_thp`). The thread itself,
//! its sleeps and its CPU, are the interpreter's (workload/interp/khugepaged.rs).
//!
//! Anonymous vmas are scanned too (`hpage_collapse_scan_pmd`, kernel/khugepaged_anon.rs),
//! registered by their mmap and MADV_HUGEPAGE, but only while the thread runs, that is with
//! `file_text=khugepaged` (so that the default runs keep no khugepaged thread).
//!
//! Differs from Linux: shmem ranges are not collapsed by khugepaged (their vmas are skipped
//! as ineligible, at 1 a vma); no shadow entries (SCAN_EXCEED_SWAP_PTE cannot
//! happen), no LRU batches (SCAN_PAGE_LRU), no page locks or concurrent truncation; a
//! mmap_lock trylock always succeeds.

use std::collections::BTreeMap;

use super::memory::Slot;
use super::mm::{vm, Backing, Vma};
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::vmstat::VmEvent;
use super::{Kernel, MmId};
use crate::units::{is_aligned, Pfn};

/// The results of mm/khugepaged.c's `enum scan_result` that mmsim's scans can reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScanResult {
    Succeed,
    Fail,
    PmdNull,
    PmdNone,
    PmdMapped,
    ExceedNonePte,
    ExceedSharedPte,
    PteMappedHugepage,
    PageNull,
    PageCount,
    PageAnon,
    VmaCheck,
    AddressRange,
    AllocHugePageFail,
    ExceedSwapPte,
    LackReferencedPage,
    PageLock,
    CgroupChargeFail,
}

impl ScanResult {
    /// The enumerator's name in mm/khugepaged.c.
    pub fn name(self) -> &'static str {
        match self {
            ScanResult::Succeed => "SCAN_SUCCEED",
            ScanResult::Fail => "SCAN_FAIL",
            ScanResult::PmdNull => "SCAN_PMD_NULL",
            ScanResult::PmdNone => "SCAN_PMD_NONE",
            ScanResult::ExceedNonePte => "SCAN_EXCEED_NONE_PTE",
            ScanResult::ExceedSharedPte => "SCAN_EXCEED_SHARED_PTE",
            ScanResult::PageNull => "SCAN_PAGE_NULL",
            ScanResult::PageCount => "SCAN_PAGE_COUNT",
            ScanResult::PageAnon => "SCAN_PAGE_ANON",
            ScanResult::AddressRange => "SCAN_ADDRESS_RANGE",
            ScanResult::PteMappedHugepage => "SCAN_PTE_MAPPED_HUGEPAGE",
            ScanResult::PmdMapped => "SCAN_PMD_MAPPED",
            ScanResult::AllocHugePageFail => "SCAN_ALLOC_HUGE_PAGE_FAIL",
            ScanResult::VmaCheck => "SCAN_VMA_CHECK",
            ScanResult::ExceedSwapPte => "SCAN_EXCEED_SWAP_PTE",
            ScanResult::LackReferencedPage => "SCAN_LACK_REFERENCED_PAGE",
            ScanResult::PageLock => "SCAN_PAGE_LOCK",
            ScanResult::CgroupChargeFail => "SCAN_CGROUP_CHARGE_FAIL",
        }
    }
}

/// khugepaged's global state (`khugepaged_scan`, `khugepaged_pages_collapsed`,
/// `khugepaged_full_scans`): the registered mms in list order, the cursor, and its counts.
#[derive(Clone, Debug, Default)]
pub struct KhugepagedState {
    /// `khugepaged_scan.mm_head`: registered mms, each with whether it is still alive (an
    /// exited mm under the cursor stays until the scan moves past it, as `collect_mm_slot`).
    pub mm_slots: Vec<(MmId, bool)>,
    /// `khugepaged_scan.mm_slot` (an index into `mm_slots`) and `.address`.
    pub cursor: Option<usize>,
    pub address: u64,
    /// sysfs `khugepaged/pages_collapsed` and `full_scans`.
    pub pages_collapsed: u64,
    pub full_scans: u64,
    /// How many ranges khugepaged's scan ended with each result (SCAN_* name), as the
    /// `mm_khugepaged_scan_file` tracepoint would count them.
    pub results: BTreeMap<&'static str, u64>,
    /// An mm was registered while the list was empty (`wake_up_interruptible`).
    pub wake: bool,
}

/// One wake-up's progress (`khugepaged_do_scan`'s locals), kept across the scan's steps.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanPass {
    pub progress: u64,
    pub pass_through_head: u32,
    /// An allocation failed once already in this wake-up (`wait` cleared).
    pub alloc_failed: bool,
    /// The wake-up's `lru_add_drain_all` was done.
    pub drained: bool,
}

/// What the thread does after a step of its scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanStep {
    /// Scan on (after `cond_resched`).
    Continue,
    /// `khugepaged_alloc_sleep`, then scan on.
    AllocSleep,
    /// The wake-up is over (`khugepaged_wait_work`).
    Done,
}

impl Kernel {
    /// `hugepage_pmd_enabled` as far as mmsim's khugepaged goes: the option is on and the
    /// top-level `enabled` is not `never`.
    pub fn khugepaged_enabled(&self) -> bool {
        self.knobs.file_text == super::knobs::FileText::Khugepaged
            && self.knobs.thp_enabled != super::knobs::ThpEnabled::Never
            && self.has_transparent_hugepage()
    }

    /// `file_thp_enabled`: CONFIG_READ_ONLY_THP_FOR_FS, a regular file (not shmem) that no open
    /// file may write (a running executable denies writers).
    pub fn file_thp_enabled(&self, v: &Vma) -> bool {
        let Backing::File(f) = v.backing else { return false };
        let obj = self.filp(f).inode;
        self.knobs.file_text == super::knobs::FileText::Khugepaged
            && !self.inode(obj).is_shmem()
            && !self.inode_is_open_for_write(obj)
    }

    /// `thp_vma_allowable_order(vma, TVA_KHUGEPAGED or TVA_FORCED_COLLAPSE, PMD_ORDER)` for a
    /// file vma: not VM_NOHUGEPAGE nor VM_NO_KHUGEPAGED, a whole aligned 2 MiB with the file
    /// offset congruent, the sysfs gate unless forced (MADV_COLLAPSE), `file_thp_enabled`.
    pub fn thp_vma_allowable_file(&self, v: &Vma, forced: bool) -> bool {
        let hsize = self.geo.hpage_pmd_size();
        if !self.has_transparent_hugepage()
            || v.flags & (vm::NOHUGEPAGE | vm::HUGETLB | vm::DONTEXPAND) != 0
            || v.end < hsize
            || !self.thp_vma_suitable_pmd(v, v.end - hsize)
        {
            return false;
        }
        let sysfs = match self.knobs.thp_enabled {
            super::knobs::ThpEnabled::Always => true,
            super::knobs::ThpEnabled::Madvise => v.flags & vm::HUGEPAGE != 0,
            super::knobs::ThpEnabled::Never => false,
        };
        (forced || sysfs) && self.file_thp_enabled(v)
    }

    /// `khugepaged_enter_vma` -> `__khugepaged_enter`: register `mm` (at the list's tail) when
    /// the vma at `addr` may be collapsed by khugepaged; the first registration wakes it.
    pub fn khugepaged_enter_vma(&mut self, mm: MmId, addr: u64) {
        if !self.khugepaged_enabled() || self.khugepaged.mm_slots.iter().any(|&(m, alive)| alive && m == mm) {
            return;
        }
        let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else { return };
        if self.thp_vma_allowable_file(&v, false) || self.thp_vma_allowable_anon(&v, false) {
            self.khugepaged_register(mm);
        }
    }

    /// `__khugepaged_enter` / `khugepaged_fork` (a child of a registered mm is registered).
    pub fn khugepaged_register(&mut self, mm: MmId) {
        let k = &mut self.khugepaged;
        if k.mm_slots.iter().any(|&(m, alive)| alive && m == mm) {
            return;
        }
        let empty = !k.mm_slots.iter().any(|s| s.1);
        k.mm_slots.push((mm, true));
        if empty {
            k.wake = true;
        }
    }

    /// Is `mm` registered with khugepaged (MMF_VM_HUGEPAGE)?
    pub fn khugepaged_registered(&self, mm: MmId) -> bool {
        self.khugepaged.mm_slots.iter().any(|&(m, alive)| alive && m == mm)
    }

    /// `__khugepaged_exit`: the mm leaves the list, or, under the cursor, is marked gone for
    /// the scan to pass (`collect_mm_slot`).
    pub fn khugepaged_exit(&mut self, mm: MmId) {
        let k = &mut self.khugepaged;
        let Some(i) = k.mm_slots.iter().position(|&(m, alive)| alive && m == mm) else { return };
        if k.cursor == Some(i) {
            k.mm_slots[i].1 = false;
            return;
        }
        k.mm_slots.remove(i);
        if let Some(c) = k.cursor.filter(|&c| c > i) {
            k.cursor = Some(c - 1);
        }
    }

    /// `khugepaged_has_work`: an mm is registered and PMD THP is enabled.
    pub fn khugepaged_has_work(&self) -> bool {
        self.khugepaged_enabled() && !self.khugepaged.mm_slots.is_empty()
    }

    /// One step of `khugepaged_do_scan`: one `khugepaged_scan_mm_slot` call (a file range at
    /// most: it drops mmap_lock for the range and returns), or the end of the wake-up when the
    /// budget `pages_to_scan` is spent or the list's head was passed twice.
    pub fn khugepaged_scan_step(&mut self, pass: &mut ScanPass) -> ScanStep {
        let pages = u64::from(self.knobs.khugepaged.pages_to_scan);
        if !pass.drained {
            pass.drained = true;
            self.lru_add_drain();
        }
        if self.khugepaged.cursor.is_none() {
            pass.pass_through_head += 1;
        }
        let mut result = None;
        if self.khugepaged_has_work() && pass.pass_through_head < 2 {
            let (p, r) = self.khugepaged_scan_mm_slot(pages - pass.progress);
            pass.progress += p;
            result = r;
        } else {
            pass.progress = pages;
        }
        if pass.progress >= pages {
            return ScanStep::Done;
        }
        if result == Some(ScanResult::AllocHugePageFail) {
            if pass.alloc_failed {
                return ScanStep::Done;
            }
            pass.alloc_failed = true;
            return ScanStep::AllocSleep;
        }
        ScanStep::Continue
    }

    /// `khugepaged_scan_mm_slot`: from the cursor, the mm's vmas in address order; an
    /// ineligible vma, or one wholly behind the cursor, costs 1; a range costs 512. A file
    /// range ends the call (mmap_lock was dropped for it), as does an anonymous range that
    /// went on to `collapse_huge_page`; after another anonymous range the scan goes on while
    /// `budget` lasts. At the end of the mm the cursor moves to the next (the last one's end
    /// is a full scan). Returns the progress and the last range's result.
    fn khugepaged_scan_mm_slot(&mut self, budget: u64) -> (u64, Option<ScanResult>) {
        let hsize = self.geo.hpage_pmd_size();
        let i = match self.khugepaged.cursor {
            Some(i) => i,
            None => {
                self.khugepaged.cursor = Some(0);
                self.khugepaged.address = 0;
                0
            }
        };
        let (mm, alive) = self.khugepaged.mm_slots[i];
        let mut progress = 1; // the mmap_lock trylock
        if alive {
            let vmas: Vec<Vma> = self.mm(mm).vmas.range(..).map(|(_, v)| v.clone()).collect();
            let mut address = self.khugepaged.address;
            for v in &vmas {
                if v.end <= address {
                    continue; // behind the cursor: the vma iterator starts past it
                }
                let anon = v.is_anonymous();
                if !(if anon { self.thp_vma_allowable_anon(v, false) } else { self.thp_vma_allowable_file(v, false) }) {
                    progress += 1;
                    continue;
                }
                let hstart = v.start.next_multiple_of(hsize);
                let hend = self.geo.hpage_pmd_align_down(v.end);
                if address > hend || hend <= hstart {
                    progress += 1;
                    continue;
                }
                let mut addr = address.max(hstart);
                while anon && addr < hend {
                    let r = self.hpage_collapse_scan_pmd(mm, addr, true);
                    crate::tracepoints::raise(&mut self.tp, crate::tracepoints::ev::KHUGEPAGED_SCAN_PMD, || {
                        format!("mm={mm} address={addr:#x} status={}", r.name())
                    });
                    if r == ScanResult::Succeed {
                        self.khugepaged.pages_collapsed += 1;
                    }
                    *self.khugepaged.results.entry(r.name()).or_insert(0) += 1;
                    addr += hsize;
                    self.khugepaged.address = addr;
                    progress += self.geo.hpage_pmd_nr();
                    // collapse_huge_page dropped mmap_lock: the call ends.
                    let dropped = matches!(
                        r,
                        ScanResult::Succeed
                            | ScanResult::AllocHugePageFail
                            | ScanResult::AddressRange
                            | ScanResult::VmaCheck
                            | ScanResult::PageAnon
                    );
                    if dropped || progress >= budget {
                        return (progress, Some(r));
                    }
                }
                if !anon && addr < hend {
                    let r = self.khugepaged_scan_file_range(mm, v, addr);
                    if r == ScanResult::Succeed {
                        self.khugepaged.pages_collapsed += 1;
                    }
                    *self.khugepaged.results.entry(r.name()).or_insert(0) += 1;
                    self.khugepaged.address = addr + hsize;
                    return (progress + self.geo.hpage_pmd_nr(), Some(r));
                }
                address = addr;
            }
        }
        // The mm is done (or gone): the cursor moves on.
        let k = &mut self.khugepaged;
        if !alive {
            k.mm_slots.remove(i);
        }
        let next = if alive { i + 1 } else { i };
        if next < k.mm_slots.len() {
            k.cursor = Some(next);
        } else {
            k.cursor = None;
            k.full_scans += 1;
        }
        k.address = 0;
        (progress, None)
    }

    /// The range at `addr` of file vma `v` in khugepaged's scan: `hpage_collapse_scan_file`,
    /// and for a range whose PMD folio is in the page cache already,
    /// `collapse_pte_mapped_thp(install_pmd = false)` (PMD-mapped counts as success).
    fn khugepaged_scan_file_range(&mut self, mm: MmId, v: &Vma, addr: u64) -> ScanResult {
        let (filp, obj) = self.vma_file(v);
        let start = v.linear_page_index(addr, self.geo);
        match self.hpage_collapse_scan_file(filp, obj, start, true) {
            ScanResult::PteMappedHugepage => {
                let head = self.shmem_find_folio(obj, start).map(|p| self.head_of(p)).expect("PMD folio");
                match self.collapse_pte_mapped_thp(mm, v, addr, head, false) {
                    ScanResult::PmdMapped => ScanResult::Succeed,
                    r => r,
                }
            }
            r => r,
        }
    }

    /// `hpage_collapse_scan_file` of a regular file: count the pages of [start, start + 512)
    /// in the page cache (a PMD folio at `start` is SCAN_PTE_MAPPED_HUGEPAGE); khugepaged
    /// needs at least 512 - max_ptes_none of them (THP_SCAN_EXCEED_NONE_PTE), MADV_COLLAPSE
    /// none; then `collapse_file`.
    pub(super) fn hpage_collapse_scan_file(&mut self, filp: u32, obj: u32, start: u64, khugepaged: bool) -> ScanResult {
        let nr = self.geo.hpage_pmd_nr();
        let mut present = 0;
        let mut i = start;
        while i < start + nr && i < self.shmem_size(obj) {
            let Some(p) = self.shmem_find_folio(obj, i) else {
                i += 1;
                continue;
            };
            let head = self.head_of(p);
            let (fi, fnr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
            if fnr == nr && fi == start {
                return ScanResult::PteMappedHugepage;
            }
            present += (fi + fnr).min(start + nr) - i;
            i = fi + fnr;
        }
        if khugepaged && present < nr - u64::from(self.knobs.khugepaged.max_ptes_none) {
            self.stat.count(VmEvent::ThpScanExceedNonePte);
            return ScanResult::ExceedNonePte;
        }
        self.collapse_file_regular(filp, obj, start, khugepaged)
    }

    /// `alloc_charge_folio`: the PMD-sized folio a collapse copies into (THP_COLLAPSE_ALLOC),
    /// or SCAN_ALLOC_HUGE_PAGE_FAIL (THP_COLLAPSE_ALLOC_FAILED); khugepaged's own collapses
    /// reclaim only with `khugepaged/defrag`, MADV_COLLAPSE's always.
    pub(super) fn alloc_charge_folio(&mut self, khugepaged: bool) -> Result<Pfn, ScanResult> {
        let reclaim = !khugepaged || self.knobs.khugepaged.defrag;
        let flags = gfp::USER | gfp::IO | gfp::MOVABLE | gfp::COMP | if reclaim { gfp::DIRECT_RECLAIM } else { 0 };
        let Some(a) = self.alloc_pages(self.geo.hpage_pmd_order(), flags) else {
            self.stat.count(VmEvent::ThpCollapseAllocFailed);
            return Err(ScanResult::AllocHugePageFail);
        };
        self.stat.count(VmEvent::ThpCollapseAlloc);
        Ok(a.pfn)
    }

    /// `collapse_file` of a regular file: allocate the PMD folio (THP_COLLAPSE_ALLOC, or
    /// THP_COLLAPSE_ALLOC_FAILED); read every page not cached (`page_cache_sync_readahead`
    /// through the vma's file, waiting for it); a dirty page starts writeback and fails the
    /// range, as does one under writeback; unmap the old pages everywhere (`try_to_unmap`),
    /// copy them in, put the folio in their place (NR_FILE_THPS), free the emptied PTE tables
    /// (`retract_page_tables`). No pmd is installed.
    fn collapse_file_regular(&mut self, filp: u32, obj: u32, start: u64, khugepaged: bool) -> ScanResult {
        let (nr, order) = (self.geo.hpage_pmd_nr(), self.geo.hpage_pmd_order());
        let new = match self.alloc_charge_folio(khugepaged) {
            Ok(new) => new,
            Err(r) => return r,
        };
        let fail = |k: &mut Kernel, r: ScanResult| {
            k.folio_put(new);
            r
        };
        let end = start + nr;
        let mut index = start;
        while index < end {
            if index >= self.shmem_size(obj) {
                return fail(self, ScanResult::Fail);
            }
            let page = match self.shmem_find_folio(obj, index) {
                Some(p) => p,
                None => {
                    let read = self.page_cache_sync_ra(filp, index, end - index);
                    self.current.effects.io_wait_pages += read;
                    match self.shmem_find_folio(obj, index) {
                        Some(p) => p,
                        None => return fail(self, ScanResult::Fail),
                    }
                }
            };
            let head = self.head_of(page);
            let h = self.mem.pages[head.idx()];
            if self.folio_nr_pages(head) == nr && h.index == start {
                return fail(self, ScanResult::PteMappedHugepage);
            }
            if h.test(pg::DIRTY) {
                // filemap_flush: writeback starts (and, in mmsim, completes now).
                self.file_fsync(filp);
                return fail(self, ScanResult::Fail);
            }
            if h.test(pg::WRITEBACK) {
                return fail(self, ScanResult::Fail);
            }
            index = h.index + self.folio_nr_pages(head);
        }
        if self.inode_is_open_for_write(obj) {
            return fail(self, ScanResult::Fail);
        }
        // Every page is cached (a reclaim during the reads may have taken one back: fail).
        if (start..end).any(|i| self.shmem_find_folio(obj, i).is_none()) {
            return fail(self, ScanResult::Fail);
        }
        let mut index = start;
        while index < end {
            let head = self.head_of(self.shmem_find_folio(obj, index).expect("cached"));
            self.try_to_unmap_file_folio(obj, head);
            let fnr = self.folio_nr_pages(head);
            for k in 0..fnr {
                self.copy_page(Pfn(new.0 + (index - start + k) as u32), Pfn(head.0 + k as u32));
            }
            index += fnr;
            self.filemap_remove_folio(obj, head);
        }
        self.filemap_add_folio(
            obj,
            start,
            new,
            order,
            super::page_alloc::gfp::HIGHUSER_MOVABLE | super::page_alloc::gfp::NOFAIL,
        );
        self.retract_page_tables(obj, start);
        ScanResult::Succeed
    }

    /// `try_to_unmap` of a page-cache folio: every pte (or pmd) that maps one of its pages,
    /// in every mm, is cleared; a private mapping's own copies (anonymous pages) stay.
    pub(super) fn try_to_unmap_file_folio(&mut self, obj: u32, head: Pfn) {
        let shift = self.geo.page_shift;
        let (fi, fnr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
        for (m, v, lo, hi) in self.i_mmap_range(obj, fi, fnr) {
            for i in lo..hi {
                let addr = v.start + ((i - v.pgoff) << shift);
                let Some(pmd) = self.pmd_slot(m, addr) else { continue };
                let pe = self.entry(pmd.table, pmd.idx);
                if !pe.present() {
                    continue;
                }
                if pe.huge() {
                    if pe.pfn() == head {
                        self.zap_file_pmd(m, pmd);
                        let haddr = self.geo.hpage_pmd_align_down(addr);
                        self.flush_tlb_range(m, haddr, haddr + self.geo.hpage_pmd_size());
                    }
                    continue;
                }
                let e = self.entry(pe.pfn(), self.geo.table_index(addr, 0));
                if e.present() && e.pfn() == Pfn(head.0 + (i - fi) as u32) {
                    self.zap_page_range(m, &v, addr, addr + self.geo.page_size());
                }
            }
        }
    }

    /// `retract_page_tables`: in every vma mapping index `start` of the inode at an aligned
    /// address over the whole 2 MiB, without an anon_vma, free the PTE table left empty.
    pub(super) fn retract_page_tables(&mut self, obj: u32, start: u64) {
        let hsize = self.geo.hpage_pmd_size();
        for (m, v, lo, _) in self.i_mmap_range(obj, start, 1) {
            let addr = v.start + ((lo - v.pgoff) << self.geo.page_shift);
            if v.anon_vma.is_none() && is_aligned(addr, hsize) && v.end >= addr + hsize {
                self.retract_pte_table(m, addr);
            }
        }
    }

    /// `collapse_pte_mapped_thp`: the range at `addr` of `mm`, whose PMD folio `head` is in
    /// the page cache: PMD-mapped already is SCAN_PMD_MAPPED; a PTE table mapping anything
    /// but the folio's own pages is SCAN_FAIL; else its ptes are cleared, the table freed,
    /// and with `install_pmd` (MADV_COLLAPSE) the folio mapped by the pmd.
    pub(super) fn collapse_pte_mapped_thp(
        &mut self,
        mm: MmId,
        v: &Vma,
        addr: u64,
        head: Pfn,
        install: bool,
    ) -> ScanResult {
        let haddr = self.geo.hpage_pmd_align_down(addr);
        let hsize = self.geo.hpage_pmd_size();
        if haddr < v.start || haddr + hsize > v.end || !self.thp_vma_suitable_pmd(v, haddr) {
            return ScanResult::VmaCheck;
        }
        let Some(pmd) = self.pmd_slot(mm, haddr) else {
            return self.install_pmd(mm, v, haddr, head, install);
        };
        let pe = self.entry(pmd.table, pmd.idx);
        if pe.present() && pe.huge() {
            return ScanResult::PmdMapped;
        }
        if pe.present() {
            for k in 0..self.geo.hpage_pmd_nr() as usize {
                let e = self.entry(pe.pfn(), k);
                if e.present() && e.pfn() != Pfn(head.0 + k as u32) {
                    return ScanResult::Fail;
                }
            }
            self.zap_page_range(mm, v, haddr, haddr + hsize);
            self.retract_pte_table(mm, haddr);
        }
        self.install_pmd(mm, v, haddr, head, install)
    }

    /// `set_huge_pmd` when asked: map `head` by the pmd at `haddr` (the pmd is none).
    fn install_pmd(&mut self, mm: MmId, v: &Vma, haddr: u64, head: Pfn, install: bool) -> ScanResult {
        if !install {
            return ScanResult::Succeed;
        }
        let Some(pmd): Option<Slot> = self.pmd_alloc(mm, haddr) else { return ScanResult::Fail };
        match self.do_set_pmd(mm, v, haddr, head, pmd, false) {
            0 => ScanResult::Succeed,
            _ => ScanResult::Fail,
        }
    }
}
