//! The huge-pmd twins of the fault, unmap and fork paths (mm/huge_memory.c): THP eligibility,
//! do_huge_pmd_anonymous_page with the huge zero folio, do_huge_pmd_wp_page, zap_huge_pmd,
//! __split_huge_pmd, copy_huge_pmd, and the deferred split queue and its shrinker.

use super::knobs::{HzpKind, HzpWp, ThpDefrag, ThpEnabled};
use super::memory::{maybe_mkwrite, vm_page_prot, Slot};
use super::mm::{vm, MmCounter, Vma};
use super::mm_types::pg;
use super::mmap::Errno;
use super::page_alloc::{gfp, Allocated};
use super::pgtable::{self, Entry};
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId};
use crate::units::Pfn;

impl Kernel {
    /// `has_transparent_hugepage`: a PMD-sized folio fits the buddy allocator (HPAGE_PMD_ORDER
    /// <= MAX_PAGE_ORDER). Otherwise THP is unsupported, as hugepage_init leaves it
    /// (TRANSPARENT_HUGEPAGE_UNSUPPORTED): no huge pmd, no huge zero page. ia64 with 16 KiB
    /// pages (32 MiB PMDs, order 11) is such a machine; Linux/ia64 never had THP at all.
    pub fn has_transparent_hugepage(&self) -> bool {
        self.geo.hpage_pmd_order() <= super::page_alloc::MAX_ORDER
    }

    /// `thp_vma_allowable_order(vma, PMD_ORDER)` + `thp_vma_suitable_order`: the knob and
    /// madvise flags allow THP for this anonymous vma and the aligned 2 MiB range around
    /// `addr` lies inside it.
    pub fn thp_vma_allowable(&self, vma: &Vma, addr: u64) -> bool {
        if !self.has_transparent_hugepage() || !vma.is_anonymous() || vma.flags & vm::NOHUGEPAGE != 0 {
            return false;
        }
        let allowed = match self.knobs.thp_enabled {
            ThpEnabled::Always => true,
            ThpEnabled::Madvise => vma.flags & vm::HUGEPAGE != 0,
            ThpEnabled::Never => false,
        };
        let haddr = self.geo.hpage_pmd_align_down(addr);
        allowed && haddr >= vma.start && haddr + self.geo.hpage_pmd_size() <= vma.end
    }

    /// `vma_thp_gfp_mask`: GFP_TRANSHUGE_LIGHT (no reclaim), with direct reclaim or kswapd's
    /// as `transparent_hugepage/defrag` says for a madvised vma or another.
    pub(super) fn vma_thp_gfp_mask(&self, vma: &Vma) -> u32 {
        let madvised = vma.flags & vm::HUGEPAGE != 0;
        let light = gfp::COMP | gfp::ZERO | gfp::USER | gfp::IO | gfp::MOVABLE;
        light
            | match self.knobs.thp_defrag {
                ThpDefrag::Always if madvised => gfp::DIRECT_RECLAIM,
                ThpDefrag::Always => gfp::DIRECT_RECLAIM | gfp::NORETRY,
                ThpDefrag::Defer => gfp::KSWAPD_RECLAIM,
                ThpDefrag::DeferMadvise if madvised => gfp::DIRECT_RECLAIM,
                ThpDefrag::DeferMadvise => gfp::KSWAPD_RECLAIM,
                ThpDefrag::Madvise if madvised => gfp::DIRECT_RECLAIM,
                ThpDefrag::Madvise | ThpDefrag::Never => 0,
            }
    }

    /// `vma_alloc_anon_folio_pmd`: a zeroed PMD-sized folio, or THP_FAULT_FALLBACK.
    /// Its charge to the mm's memcg with the same gfp: a failure counts THP_FAULT_FALLBACK
    /// and THP_FAULT_FALLBACK_CHARGE.
    fn vma_alloc_anon_folio_pmd(&mut self, mm: MmId, vma: &Vma, addr: u64) -> Option<Allocated> {
        let flags = self.vma_thp_gfp_mask(vma);
        let Some(a) = self.alloc_user_zeroed(self.geo.hpage_pmd_order(), flags, addr) else {
            self.stat.count(VmEvent::ThpFaultFallback);
            return None;
        };
        let memcg = self.mm(mm).memcg;
        if self.mem_cgroup_charge(a.pfn, memcg, flags).is_err() {
            self.mem.pages[a.pfn.idx()].refcount = 1;
            self.folio_put(a.pfn);
            self.stat.count(VmEvent::ThpFaultFallback);
            self.stat.count(VmEvent::ThpFaultFallbackCharge);
            return None;
        }
        Some(a)
    }

    /// `pgtable_trans_huge_deposit`.
    pub(super) fn deposit(&mut self, pmd: Slot, table: Pfn) {
        let old = self.deposited.insert((pmd.table.0, pmd.idx as u16), table.0);
        debug_assert!(old.is_none(), "double deposit");
    }

    /// `pgtable_trans_huge_withdraw`.
    fn withdraw(&mut self, pmd: Slot) -> Pfn {
        Pfn(self.deposited.remove(&(pmd.table.0, pmd.idx as u16)).expect("a huge pmd has a deposited table"))
    }

    /// `zap_deposited_table`: free the table deposited under a huge pmd (mm_dec_nr_ptes).
    pub(super) fn zap_deposited_table(&mut self, mm: MmId, pmd: Slot) {
        let t = self.withdraw(pmd);
        self.pte_free(Some(mm), t);
    }

    /// `map_anon_folio_pmd`: map a new THP by a pmd, counting THP_FAULT_ALLOC (and in the
    /// mm's memcg).
    fn map_anon_folio_pmd(&mut self, mm: MmId, vma: &Vma, folio: Pfn, pmd: Slot, addr: u64) {
        let e = maybe_mkwrite(
            Entry::new(folio, vm_page_prot(vma) | pgtable::PSE | pgtable::DIRTY | pgtable::ACCESSED),
            vma,
        );
        let index = vma.linear_page_index(self.geo.hpage_pmd_align_down(addr), self.geo);
        self.folio_add_new_anon_rmap(folio, mm, true, index);
        self.folio_add_lru_vma(folio, vma);
        let nr = self.geo.hpage_pmd_nr() as i64;
        self.add_rss_at(pmd.table, mm, MmCounter::AnonPages, nr);
        self.set_entry(pmd.table, pmd.idx, e);
        self.stat.count(VmEvent::ThpFaultAlloc);
        // count_memcg_event_mm.
        self.count_memcg_events(self.mm_memcg(mm), VmEvent::ThpFaultAlloc, 1);
    }

    /// `do_huge_pmd_anonymous_page`: a read fault maps the huge zero folio (when
    /// use_zero_page), a write fault a newly allocated zeroed THP; each with a deposited PTE
    /// table. VM_FAULT_FALLBACK sends the fault to the pte path.
    pub fn do_huge_pmd_anonymous_page(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, pmd: Slot) -> u32 {
        self.anon_vma_prepare(mm, vma.start);
        if !write && self.knobs.thp_use_zero_page && self.knobs.hzp_kind == HzpKind::Vhzp {
            return self.set_virtual_huge_zero_page(mm, vma, pmd);
        }
        if !write && self.knobs.thp_use_zero_page {
            let Some(pgtable) = self.pte_alloc_one(Some(mm)) else {
                return vm_fault::OOM;
            };
            let Some(zero) = self.mm_get_huge_zero_folio(mm) else {
                self.pte_free(Some(mm), pgtable);
                self.stat.count(VmEvent::ThpFaultFallback);
                return vm_fault::FALLBACK;
            };
            // set_huge_zero_folio: read-only, special, deposited table.
            self.deposit(pmd, pgtable);
            self.pt_table_added(pmd.table, pgtable, mm);
            let e = Entry::new(zero, vm_page_prot(vma) | pgtable::PSE | pgtable::SPECIAL);
            self.set_entry(pmd.table, pmd.idx, e);
            crate::tracepoints::raise(&mut self.tp, crate::tracepoints::ev::HUGE_ZERO_PAGE_MAP, || {
                format!("address={:#x}", self.geo.hpage_pmd_align_down(addr))
            });
            return 0;
        }
        let Some(folio) = self.vma_alloc_anon_folio_pmd(mm, vma, addr) else {
            return vm_fault::FALLBACK;
        };
        let Some(pgtable) = self.pte_alloc_one(Some(mm)) else {
            self.mem.pages[folio.pfn.idx()].refcount = 1;
            self.folio_put(folio.pfn);
            return vm_fault::OOM;
        };
        self.deposit(pmd, pgtable);
        self.pt_table_added(pmd.table, pgtable, mm);
        self.map_anon_folio_pmd(mm, vma, folio.pfn, pmd, addr);
        0
    }

    /// Seed 000's `do_huge_pmd_wp_zero_page_fallback`: no THP for a write to the huge zero
    /// page, so the deposited table becomes a PTE table whose entry at the fault address maps
    /// a new zeroed 4 KiB page and every other entry the 4 KiB zero page (no pmd split).
    fn do_huge_pmd_wp_zero_page_fallback(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot) -> u32 {
        let Some(page) = self.alloc_user_zeroed(0, gfp::HIGHUSER_MOVABLE, addr) else {
            return vm_fault::OOM;
        };
        if !self.charge_new_anon(page.pfn, mm) {
            return vm_fault::OOM;
        }
        let haddr = self.geo.hpage_pmd_align_down(addr);
        let table = self.withdraw(pmd);
        let zero = Entry::new(self.zero_pfn, vm_page_prot(vma) | pgtable::SPECIAL);
        let idx = ((addr - haddr) >> self.geo.page_shift) as usize;
        for i in 0..self.geo.ptrs_per_table() {
            self.set_entry(table, i, zero);
        }
        self.folio_add_new_anon_rmap(page.pfn, mm, false, vma.linear_page_index(addr, self.geo));
        self.folio_add_lru_vma(page.pfn, vma);
        self.add_rss_at(table, mm, MmCounter::AnonPages, 1);
        let e = maybe_mkwrite(Entry::new(page.pfn, vm_page_prot(vma) | pgtable::DIRTY | pgtable::ACCESSED), vma);
        self.set_entry(table, idx, e);
        self.set_entry(pmd.table, pmd.idx, Entry::new(table, pgtable::TABLE_FLAGS));
        self.flush_tlb_range(mm, haddr, haddr + self.geo.hpage_pmd_size());
        self.put_huge_zero_pmd();
        0
    }

    /// The virtual huge zero page (seed 000's alternative): a PTE table whose PTRS_PER_TABLE entries map
    /// the base zero page, its pmd marked (ZERO_TABLE) so a write fault can replace the whole
    /// range by a THP, as a write to the huge zero page does.
    fn set_virtual_huge_zero_page(&mut self, mm: MmId, vma: &Vma, pmd: Slot) -> u32 {
        let Some(table) = self.pte_alloc_one(Some(mm)) else {
            return vm_fault::OOM;
        };
        let zero = Entry::new(self.zero_pfn, vm_page_prot(vma) | pgtable::SPECIAL);
        for i in 0..self.geo.ptrs_per_table() {
            self.set_entry(table, i, zero);
        }
        self.set_entry(pmd.table, pmd.idx, Entry::new(table, pgtable::TABLE_FLAGS | pgtable::ZERO_TABLE));
        self.pt_table_added(pmd.table, table, mm);
        0
    }

    /// A write fault under a virtual huge zero pmd: replace the range by a THP, the table
    /// becoming its deposited table; without a THP (or if the range is no longer
    /// THP-suitable) the mark goes and the pte path copies 4 KiB.
    pub fn do_virtual_huge_zero_wp(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot) -> u32 {
        let e = self.entry(pmd.table, pmd.idx);
        let haddr = self.geo.hpage_pmd_align_down(addr);
        self.set_entry(pmd.table, pmd.idx, e.without(pgtable::ZERO_TABLE));
        if !self.thp_vma_allowable(vma, addr) {
            return vm_fault::FALLBACK;
        }
        let Some(folio) = self.vma_alloc_anon_folio_pmd(mm, vma, addr) else {
            return vm_fault::FALLBACK;
        };
        let table = e.pfn();
        for i in 0..self.geo.ptrs_per_table() {
            self.set_entry(table, i, Entry::NONE);
        }
        self.deposit(pmd, table);
        self.map_anon_folio_pmd(mm, vma, folio.pfn, pmd, addr);
        self.flush_tlb_range(mm, haddr, haddr + self.geo.hpage_pmd_size());
        0
    }

    /// Whether a huge pmd maps a page-cache folio (not anonymous, not the huge zero folio).
    pub fn is_file_pmd(&self, e: Entry) -> bool {
        e.huge() && !self.is_huge_zero_pmd(e) && self.mem.pages[e.pfn().idx()].mapping != super::mm_types::NIL
    }

    /// Whether a pmd entry maps the huge zero folio (is_huge_zero_pmd).
    pub fn is_huge_zero_pmd(&self, e: Entry) -> bool {
        e.huge() && Some(e.pfn()) == self.huge_zero.pfn
    }

    /// `do_huge_pmd_wp_page`: a write to a read-only huge pmd. On the huge zero folio,
    /// `do_huge_zero_wp_pmd` replaces it by a new THP (Linux >= 6.13); an exclusive THP is
    /// reused; otherwise the pmd is split and the pte path copies one 4 KiB page.
    pub fn do_huge_pmd_wp_page(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot) -> u32 {
        let e = self.entry(pmd.table, pmd.idx);
        let haddr = self.geo.hpage_pmd_align_down(addr);
        if self.is_huge_zero_pmd(e) {
            if let Some(folio) = self.vma_alloc_anon_folio_pmd(mm, vma, addr) {
                // do_huge_zero_wp_pmd: the deposited table stays deposited under the THP.
                self.map_anon_folio_pmd(mm, vma, folio.pfn, pmd, addr);
                self.flush_tlb_range(mm, haddr, haddr + self.geo.hpage_pmd_size());
                self.put_huge_zero_pmd();
                return 0;
            }
            if self.knobs.hzp_wp == HzpWp::Seed {
                return self.do_huge_pmd_wp_zero_page_fallback(mm, vma, addr, pmd);
            }
            self.__split_huge_pmd(mm, vma, pmd, haddr);
            return vm_fault::FALLBACK;
        }
        let head = e.pfn();
        let exclusive = self.mem.pages[head.idx()].test(pg::ANON_EXCLUSIVE);
        let reuse = exclusive || self.mem.pages[head.idx()].refcount == 1;
        if reuse {
            for i in 0..self.geo.hpage_pmd_nr() as u32 {
                self.mem.pages[(head.0 + i) as usize].set(pg::ANON_EXCLUSIVE);
            }
            self.stat.count(VmEvent::ReuseFault);
            let ne = maybe_mkwrite(e.with(pgtable::DIRTY | pgtable::ACCESSED), vma);
            self.set_entry(pmd.table, pmd.idx, ne);
            return 0;
        }
        self.__split_huge_pmd(mm, vma, pmd, haddr);
        vm_fault::FALLBACK
    }

    /// `zap_huge_pmd`: unmap a whole huge pmd and free its deposited table.
    pub fn zap_huge_pmd(&mut self, mm: MmId, pmd: Slot) {
        let e = self.entry(pmd.table, pmd.idx);
        if self.is_file_pmd(e) {
            self.zap_file_pmd(mm, pmd);
            return;
        }
        self.set_entry(pmd.table, pmd.idx, Entry::NONE);
        self.zap_deposited_table(mm, pmd);
        if self.is_huge_zero_pmd(e) {
            self.put_huge_zero_pmd();
            return;
        }
        let head = e.pfn();
        let nr = self.geo.hpage_pmd_nr() as i64;
        self.add_rss_at(pmd.table, mm, MmCounter::AnonPages, -nr);
        self.remove_rmap_pmd(head, mm);
        self.folio_put(head);
    }

    /// `__split_huge_pmd` -> `__split_huge_pmd_locked`: replace a huge pmd by its deposited
    /// PTE table filled with PTRS_PER_TABLE ptes (to the base zero page for the huge zero folio, to the
    /// subpages of the THP otherwise, keeping write/dirty/young). Counts THP_SPLIT_PMD.
    pub fn __split_huge_pmd(&mut self, mm: MmId, vma: &Vma, pmd: Slot, haddr: u64) {
        let e = self.entry(pmd.table, pmd.idx);
        debug_assert!(e.huge());
        self.stat.count(VmEvent::ThpSplitPmd);
        if self.is_file_pmd(e) {
            // __split_huge_pmd_locked of a file pmd: zapped, not remapped by ptes.
            self.zap_file_pmd(mm, pmd);
            self.flush_tlb_range(mm, haddr, haddr + self.geo.hpage_pmd_size());
            return;
        }
        let table = self.withdraw(pmd);
        if self.is_huge_zero_pmd(e) {
            // __split_huge_zero_page_pmd
            let z = Entry::new(self.zero_pfn, vm_page_prot(vma) | pgtable::SPECIAL);
            for i in 0..self.geo.ptrs_per_table() {
                self.set_entry(table, i, z);
            }
            self.put_huge_zero_pmd();
        } else {
            let head = e.pfn();
            if e.has(pgtable::DIRTY) {
                // __split_huge_pmd_locked: a dirty pmd's folio is marked dirty.
                self.mem.pages[head.idx()].set(pg::DIRTY);
            }
            let keep = e.0 & (pgtable::RW | pgtable::DIRTY | pgtable::ACCESSED);
            for i in 0..self.geo.ptrs_per_table() as u32 {
                let page = Pfn(head.0 + i);
                self.folio_get(head);
                self.add_rmap_pte(page, mm);
                let pe = Entry(Entry::new(page, vm_page_prot(vma)).0 | keep);
                self.set_entry(table, i as usize, pe);
            }
            self.remove_rmap_pmd(head, mm);
            self.folio_put(head);
        }
        self.set_entry(pmd.table, pmd.idx, Entry::new(table, pgtable::TABLE_FLAGS));
        // pmdp_invalidate: the huge translation must leave every TLB.
        self.flush_tlb_range(mm, haddr, haddr + self.geo.hpage_pmd_size());
    }

    /// Split the huge pmd covering `addr` if [start, end) cuts through it
    /// (`split_huge_pmd_if_needed`, called by vma splitting and madvise).
    pub fn split_huge_pmd_address(&mut self, mm: MmId, addr: u64) {
        let haddr = self.geo.hpage_pmd_align_down(addr);
        if haddr == addr {
            return;
        }
        let Some(pmd) = self.pmd_slot(mm, addr) else {
            return;
        };
        let e = self.entry(pmd.table, pmd.idx);
        if e.present() && e.huge() {
            let vma = self.mm(mm).vma_lookup(addr).expect("huge pmd inside a vma").clone();
            self.__split_huge_pmd(mm, &vma, pmd, haddr);
        }
    }

    /// `copy_huge_pmd`: fork shares a THP (write-protected in both) or the huge zero folio,
    /// depositing a new table for the child.
    pub fn copy_huge_pmd(&mut self, dst: MmId, src: MmId, vma: &Vma, dpmd: Slot, spmd: Slot) -> Result<(), Errno> {
        let _ = src;
        if !vma.is_anonymous() {
            // A file pmd is not copied: the child faults it in again.
            return Ok(());
        }
        let pgtable = self.pte_alloc_one(Some(dst)).ok_or(Errno::ENOMEM)?;
        // The pmd is read once the table is allocated (under the pmd lock, in Linux): the
        // allocation's reclaim may have discarded a lazyfree THP.
        let e = self.entry(spmd.table, spmd.idx);
        if !e.present() {
            self.pte_free(Some(dst), pgtable);
            return Ok(());
        }
        if self.is_huge_zero_pmd(e) {
            if self.mm_get_huge_zero_folio(dst).is_none() {
                self.pte_free(Some(dst), pgtable);
                return Err(Errno::ENOMEM);
            }
            self.deposit(dpmd, pgtable);
            self.pt_table_added(dpmd.table, pgtable, dst);
            self.set_entry(dpmd.table, dpmd.idx, e.without(pgtable::ACCESSED));
            return Ok(());
        }
        let head = e.pfn();
        for i in 0..self.geo.hpage_pmd_nr() as u32 {
            self.mem.pages[(head.0 + i) as usize].clear(pg::ANON_EXCLUSIVE);
        }
        self.folio_get(head);
        self.add_rmap_pmd(head, dst);
        let nr = self.geo.hpage_pmd_nr() as i64;
        self.add_rss_at(dpmd.table, dst, MmCounter::AnonPages, nr);
        self.deposit(dpmd, pgtable);
        self.pt_table_added(dpmd.table, pgtable, dst);
        let wp = if super::memory::is_cow_mapping(vma.flags) { e.without(pgtable::RW) } else { e };
        self.set_entry(spmd.table, spmd.idx, wp);
        self.set_entry(dpmd.table, dpmd.idx, wp.without(pgtable::ACCESSED));
        Ok(())
    }

    // ---- deferred split ------------------------------------------------------------------

    /// `deferred_split_folio`: queue an anonymous THP that is mapped only in part.
    pub fn maybe_deferred_split(&mut self, head: Pfn) {
        let h = self.mem.pages[head.idx()];
        if !h.test(pg::HEAD) || h.test(pg::DEFERRED) || h.entire_mapcount > 0 {
            return;
        }
        let n = self.folio_nr_pages(head) as u32;
        let mapped = (0..n).filter(|i| self.mem.pages[(head.0 + i) as usize].mapcount > 0).count();
        if mapped == 0 || mapped == n as usize {
            return;
        }
        self.mem.pages[head.idx()].set(pg::DEFERRED);
        self.deferred_split.push(head.0);
        self.stat.count(VmEvent::ThpDeferredSplitPage);
    }

    /// `deferred_split_scan`: split each queued folio into base pages (split_huge_page),
    /// freeing the subpages nothing maps. Folios still mapped by a pmd somewhere are skipped
    /// (Linux would split those pmds through the rmap; mmsim keeps no rmap).
    pub fn deferred_split_scan(&mut self) {
        let queue = std::mem::take(&mut self.deferred_split);
        for h in queue {
            let head = Pfn(h);
            let p = self.mem.pages[head.idx()];
            if p.entire_mapcount > 0 {
                self.deferred_split.push(h);
                continue;
            }
            self.split_folio(head);
        }
    }

    /// `split_huge_page`: turn a THP into base pages (kernel/huge_memory.rs
    /// `split_folio_to_list` with no list).
    pub(super) fn split_folio(&mut self, head: Pfn) -> bool {
        self.split_folio_to_list(head, None)
    }

    /// `split_folio_to_list` (`__folio_split` to order 0) of an anonymous large folio: its
    /// pmd mappings are split first (`unmap_folio` with TTU_SPLIT_HUGE_PMD, remapped by
    /// ptes), then each page becomes a folio of its own with the head's flags, memcg, swap
    /// slot and LRU list (placed next to the head, in Linux's order), keeping its mappings. A
    /// caller that isolated the folio (`list`) gets the new folios appended to it, each with
    /// an isolation reference. Pages nothing maps then go (a page in the swap cache with it,
    /// if no swap pte refers to its slot). False when it cannot be split: mlocked, or
    /// references beyond its mappings, caches and the caller's (`can_split_folio`).
    pub(super) fn split_folio_to_list(&mut self, head: Pfn, mut list: Option<&mut Vec<Pfn>>) -> bool {
        let n = self.folio_nr_pages(head) as u32;
        if n == 1 {
            return true;
        }
        if self.mem.pages[head.idx()].test(pg::MLOCKED) {
            return false;
        }
        // unmap_folio: pmd mappings become pte mappings of the same folio.
        if self.mem.pages[head.idx()].entire_mapcount > 0 {
            for h in self.rmap_walk(head).into_iter().filter(|h| h.pmd) {
                let Some(v) = self.mm(h.mm).vma_lookup(h.addr).cloned() else { continue };
                self.__split_huge_pmd(h.mm, &v, h.slot, h.addr);
            }
            if self.mem.pages[head.idx()].entire_mapcount > 0 {
                return false;
            }
        }
        let p = self.mem.pages[head.idx()];
        let swapcache = p.test(pg::SWAPCACHE);
        let isolated = list.is_some() as i32;
        let expected = self.folio_mapcount(head) as i32 + if swapcache { n as i32 } else { 0 } + isolated;
        if p.refcount != expected {
            return false;
        }
        if n as u64 >= self.geo.hpage_pmd_nr() {
            self.stat.count(VmEvent::ThpSplitPage);
        }
        self.folio_mms.remove(&head.0);
        if p.test(pg::DEFERRED) {
            self.deferred_split.retain(|&h| h != head.0);
        }
        let on_lru = p.test(pg::LRU);
        if on_lru {
            self.lruvec_del_folio(head);
        }
        let keep = pg::ANON
            | pg::DIRTY
            | pg::LAZYFREE
            | pg::ACTIVE
            | pg::REFERENCED
            | pg::WORKINGSET
            | pg::UNEVICTABLE
            | pg::SWAPCACHE
            | pg::LRU
            | pg::SHMEM;
        let hflags = p.flags & keep;
        let base = super::pgtable::SwpEntry(p.private);
        for i in 0..n {
            let pfn = head.0 + i;
            let sp = &mut self.mem.pages[pfn as usize];
            sp.flags = hflags | (sp.flags & pg::ANON_EXCLUSIVE);
            sp.order = 0;
            sp.head = pfn;
            sp.entire_mapcount = 0;
            sp.memcg = p.memcg;
            sp.index = p.index + i as u64;
            sp.mapping = p.mapping;
            sp.private = if swapcache { base.add(i).0 } else { 0 };
            sp.refcount = sp.mapcount + swapcache as i32 + if i == 0 { isolated } else { 0 };
            sp.next = super::mm_types::NIL;
            sp.prev = super::mm_types::NIL;
        }
        if swapcache {
            for i in 0..n {
                self.swap_cache_replace(base.add(i), Pfn(head.0 + i));
            }
        }
        // lru_add_split_folio: the head back where it was; the others just before it
        // (reclaim meets the head first, then the last page, ...), or onto the caller's list.
        if on_lru {
            self.lruvec_add_folio(head);
            for i in 1..n {
                self.lruvec_add_folio_before(Pfn(head.0 + i), head);
            }
        } else if let Some(l) = list.as_deref_mut() {
            for i in 1..n {
                let t = Pfn(head.0 + i);
                self.mem.pages[t.idx()].refcount += 1;
                l.push(t);
            }
        }
        // free_folio_and_swap_cache of the pages nothing maps (not the head's reference).
        for i in 1..n {
            let t = Pfn(head.0 + i);
            if self.mem.pages[t.idx()].mapcount > 0 || list.is_some() {
                continue;
            }
            if self.mem.pages[t.idx()].test(pg::SWAPCACHE) {
                self.folio_free_swap(t);
                continue;
            }
            self.mem.pages[t.idx()].refcount += 1;
            self.folio_put(t);
        }
        if list.is_none() && !swapcache && self.mem.pages[head.idx()].mapcount == 0 {
            self.mem.pages[head.idx()].refcount += 1;
            self.folio_put(head);
        }
        true
    }
}
