//! MADV_COLLAPSE (mm/khugepaged.c `madvise_collapse`, `hpage_collapse_scan_file`,
//! `collapse_file`, `retract_page_tables`, `collapse_pte_mapped_thp`) for shmem, tmpfs and,
//! with CONFIG_READ_ONLY_THP_FOR_FS (`file_text=khugepaged`), regular files nobody has open
//! for write: the 512 pages of each PMD-aligned range are copied into a new PMD folio that
//! replaces them in the page cache, and the caller's range is mapped by the pmd. A regular
//! file (ext4) without the option gets EINVAL, as on this machine's 6.18. The khugepaged
//! thread's scan is in kernel/khugepaged_scan.rs; anonymous memory's collapse in
//! kernel/khugepaged_anon.rs.

use super::khugepaged_scan::ScanResult;
use super::mm::{vm, Backing, Vma};
use super::mmap::Errno;
use super::page_alloc::gfp;
use super::pgtable::Entry;
use super::{Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// The inode a vma maps (shmem object or file), if any.
    pub fn vma_inode(&self, v: &Vma) -> Option<u32> {
        match v.backing {
            Backing::Shmem(o) => Some(o),
            Backing::File(f) => Some(self.filp(f).inode),
            _ => None,
        }
    }

    /// `thp_vma_suitable_order(vma, addr, PMD_ORDER)`: the aligned 2 MiB around `addr` lies in
    /// the vma and the file offset is congruent to the address.
    pub(super) fn thp_vma_suitable_pmd(&self, v: &Vma, addr: u64) -> bool {
        let hsize = self.geo.hpage_pmd_size();
        let haddr = self.geo.hpage_pmd_align_down(addr);
        let congruent = match v.backing {
            Backing::Anon => true,
            _ => ((v.start >> self.geo.page_shift).wrapping_sub(v.pgoff)).is_multiple_of(self.geo.hpage_pmd_nr()),
        };
        congruent && haddr >= v.start && haddr + hsize <= v.end
    }

    /// `madvise_collapse`: every PMD-aligned 2 MiB of [start, end) becomes a THP. EINVAL when
    /// the vma may not have one (VM_NOHUGEPAGE, hugetlb, no aligned range, a regular file).
    pub fn madvise_collapse(&mut self, mm: MmId, start: u64, end: u64) -> Result<(), Errno> {
        if self.mm(mm).vmas_in(start, end).iter().any(|s| self.mm(mm).vmas[s].is_anonymous()) {
            return self.madvise_collapse_walk(mm, start, end);
        }
        self.madvise_collapse_file(mm, start, end)
    }

    /// `madvise_walk_vmas` for MADV_COLLAPSE over a range with an anonymous vma: each vma's
    /// part of the range collapsed on its own (`madvise_collapse_anon`, or the file path for
    /// a file vma), the first error returned at once; ENOMEM at the end for a hole.
    fn madvise_collapse_walk(&mut self, mm: MmId, start: u64, end: u64) -> Result<(), Errno> {
        self.madvise_walk_vmas(mm, start, end, |k, v, s, e| {
            if v.is_anonymous() {
                k.madvise_collapse_anon(mm, v, s, e)
            } else {
                k.madvise_collapse_file(mm, s, e)
            }
        })
    }

    /// `madvise_collapse` of a range without anonymous vmas (shmem, tmpfs, files).
    fn madvise_collapse_file(&mut self, mm: MmId, start: u64, end: u64) -> Result<(), Errno> {
        let v = self.mm(mm).vma_lookup(start).cloned().ok_or(Errno::ENOMEM)?;
        let hsize = self.geo.hpage_pmd_size();
        if !self.has_transparent_hugepage()
            || v.flags & (vm::NOHUGEPAGE | vm::HUGETLB) != 0
            || v.end < hsize
            || !self.thp_vma_suitable_pmd(&v, v.end - hsize)
        {
            return Err(Errno::EINVAL);
        }
        let Some(obj) = self.vma_inode(&v) else {
            return Err(Errno::EINVAL);
        };
        // A regular file: TVA_FORCED_COLLAPSE's file_thp_enabled (the option, no writer).
        let shmem = self.inode(obj).is_shmem();
        if !shmem && !self.thp_vma_allowable_file(&v, true) {
            return Err(Errno::EINVAL);
        }
        self.lru_add_drain();
        let hstart = start.next_multiple_of(hsize);
        let hend = self.geo.hpage_pmd_align_down(end);
        if hstart > hend {
            // A range inside one PMD that reaches neither of its ends: no THP collapsed, and
            // `thps == (hend - hstart) >> HPAGE_PMD_SHIFT` fails on the unsigned wrap, so
            // madvise_collapse_errno(SCAN_FAIL): EINVAL. (hstart == hend: nothing to do, 0.)
            return Err(Errno::EINVAL);
        }
        let mut addr = hstart;
        let mut result = Ok(());
        while addr < hend {
            let Some(v) = self.mm(mm).vma_lookup(addr).cloned() else {
                return Err(Errno::ENOMEM);
            };
            if self.vma_inode(&v) != Some(obj)
                || !self.thp_vma_suitable_pmd(&v, addr)
                || (!shmem && !self.thp_vma_allowable_file(&v, true))
            {
                result = Err(Errno::EINVAL);
                addr += hsize;
                continue;
            }
            let index = v.linear_page_index(addr, self.geo);
            if index + self.geo.hpage_pmd_nr() > self.shmem_size(obj) {
                // Past i_size: SCAN_FAIL.
                result = Err(Errno::EINVAL);
                addr += hsize;
                continue;
            }
            if !shmem {
                let (filp, _) = self.vma_file(&v);
                match self.hpage_collapse_scan_file(filp, obj, index, false) {
                    ScanResult::AllocHugePageFail => return Err(Errno::ENOMEM),
                    ScanResult::Succeed | ScanResult::PteMappedHugepage => {}
                    _ => result = Err(Errno::EINVAL),
                }
            }
            let head = match self.shmem_find_folio(obj, index).map(|p| self.head_of(p)) {
                Some(h) if self.folio_nr_pages(h) == self.geo.hpage_pmd_nr() => h,
                _ if !shmem => {
                    addr += hsize;
                    continue;
                }
                _ => match self.collapse_file(obj, index) {
                    Some(h) => h,
                    None => return Err(Errno::ENOMEM),
                },
            };
            match self.collapse_pte_mapped_thp(mm, &v, addr, head, true) {
                ScanResult::Succeed | ScanResult::PmdMapped => {}
                _ => result = Err(Errno::EINVAL),
            }
            addr += hsize;
        }
        result
    }

    /// `collapse_file` (shmem): unmap the range's pages from every mapping (try_to_unmap),
    /// copy them (holes as zeroes) into a new PMD folio (THP_COLLAPSE_ALLOC), put it in their
    /// place in the page cache, and free the emptied page tables of suitable vmas
    /// (`retract_page_tables`). None when no PMD folio could be allocated.
    fn collapse_file(&mut self, obj: u32, index: u64) -> Option<Pfn> {
        let nr = self.geo.hpage_pmd_nr();
        let order = self.geo.hpage_pmd_order();
        // MADV_COLLAPSE's: with direct reclaim.
        let new = self.alloc_charge_folio(false).ok()?;
        // Each page in turn: one in swap is read back (SGP_NOALLOC; if one cannot be,
        // SCAN_FAIL), and each is held (locked and isolated in Linux) so that the reclaim a
        // later swap-in's charge runs cannot write it out again before the copy.
        let mut held: Vec<Pfn> = Vec::new();
        for i in 0..nr {
            if self.shmem_swap_entry(obj, index + i).is_some()
                && self.shmem_swapin_folio(obj, index + i, None).is_none()
            {
                for h in held {
                    self.folio_put(h);
                }
                self.folio_put(new);
                return None;
            }
            if let Some(p) = self.shmem_find_folio(obj, index + i) {
                let h = self.head_of(p);
                if held.last() != Some(&h) {
                    self.folio_get(h);
                    held.push(h);
                }
            }
        }
        for i in 0..nr {
            match self.shmem_find_folio(obj, index + i) {
                Some(p) => {
                    let h = self.head_of(p);
                    // try_to_unmap: every mapping of the old page goes (a private mapping's
                    // own copies stay).
                    self.try_to_unmap_file_folio(obj, h);
                    self.copy_page(Pfn(new.0 + i as u32), p);
                    self.filemap_remove_folio(obj, h);
                }
                None => self.clear_pages(Pfn(new.0 + i as u32), 1, 1, super::page_alloc::ClearPath::User),
            }
        }
        for h in held {
            self.folio_put(h);
        }
        // khugepaged charges the new folio first (SCAN_CGROUP_CHARGE_FAIL on failure);
        // mmsim's collapse charges it here, forced, once the old pages are gone.
        self.filemap_add_folio(obj, index, new, order, gfp::HIGHUSER_MOVABLE | gfp::NOFAIL);
        // "if (is_shmem) folio_mark_dirty(new_folio)".
        self.folio_mark_dirty(new);
        self.retract_page_tables(obj, index);
        Some(new)
    }

    /// `vma_interval_tree_foreach` over the inode's `i_mmap` for pages [index, index + nr):
    /// each mm and vma of the inode that maps some of them, with the indices [lo, hi) it maps.
    pub(super) fn i_mmap_range(&self, obj: u32, index: u64, nr: u64) -> Vec<(MmId, Vma, u64, u64)> {
        let mut out = Vec::new();
        for &(m, _) in &self.inode(obj).mms {
            for v in self.mm(m).vmas.values().filter(|v| self.vma_inode(v) == Some(obj)) {
                let pages = v.len() >> self.geo.page_shift;
                let (lo, hi) = (index.max(v.pgoff), (index + nr).min(v.pgoff + pages));
                if lo < hi {
                    out.push((m, v.clone(), lo, hi));
                }
            }
        }
        out
    }

    /// Free the PTE table under `addr`'s pmd if none of its entries is present.
    pub(super) fn retract_pte_table(&mut self, mm: MmId, addr: u64) {
        let Some(pmd) = self.pmd_slot(mm, addr) else { return };
        let e = self.entry(pmd.table, pmd.idx);
        if !e.present() || e.huge() || self.pt_is_shared(e.pfn()) {
            return;
        }
        if (0..self.geo.ptrs_per_table()).any(|i| self.entry(e.pfn(), i).present()) {
            return;
        }
        self.set_entry(pmd.table, pmd.idx, Entry::NONE);
        self.pte_free(Some(mm), e.pfn());
        self.flush_tlb_range(mm, addr, addr + self.geo.hpage_pmd_size());
    }
}
