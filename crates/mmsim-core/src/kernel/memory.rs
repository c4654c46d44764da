//! The generic fault and page-table paths of mm/memory.c: table allocation, handle_mm_fault,
//! do_anonymous_page, do_wp_page/wp_page_copy, do_fault with fault-around for shmem,
//! zap_page_range (unmap), free_pgd_range, and copy_page_range for fork.

use super::mm::{vm, MmCounter, Vma};
use super::mm_types::pg;
use super::mmap::Errno;
use super::page_alloc::gfp;
use super::pgtable::{self, Entry, TABLE_FLAGS};
use super::vmstat::VmEvent;
use super::{vm_fault, Kernel, MmId};
use crate::units::{align_down, Pfn};

/// A slot in a page-table page: the table frame and the entry index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub table: Pfn,
    pub idx: usize,
}

/// Leaf protection bits for a vma (vm_get_page_prot): private mappings are mapped read-only
/// until written (COW), shared writable ones writable; NX unless the vma is executable.
pub fn vm_page_prot(vma: &Vma) -> u64 {
    // x86's protection_map has _PAGE_ACCESSED in every entry: a new pte is born young.
    let mut f = pgtable::P | pgtable::USER | pgtable::ACCESSED;
    if vma.flags & vm::WRITE != 0 && vma.is_shared() {
        f |= pgtable::RW;
    }
    if vma.flags & vm::EXEC == 0 {
        f |= pgtable::NX;
    }
    f
}

/// `maybe_mkwrite`: make an entry writable if the vma allows writes.
pub fn maybe_mkwrite(e: Entry, vma: &Vma) -> Entry {
    if vma.flags & vm::WRITE != 0 {
        e.with(pgtable::RW)
    } else {
        e
    }
}

/// `is_cow_mapping`: private and may be written.
pub fn is_cow_mapping(flags: u32) -> bool {
    flags & (vm::SHARED | vm::MAYWRITE) == vm::MAYWRITE
}

impl Kernel {
    // ---- walking and allocating tables ---------------------------------------------------

    /// The entry one level down from a table entry, when it points to a table.
    fn next_table(&self, table: Pfn, idx: usize) -> Option<Pfn> {
        let e = self.entry(table, idx);
        (e.present() && !e.huge()).then(|| e.pfn())
    }

    /// The PMD slot for `addr` if the PUD and PMD tables exist (pmd_off without allocation).
    pub fn pmd_slot(&self, mm: MmId, addr: u64) -> Option<Slot> {
        let pgd = self.mm(mm).pgd;
        let pud = self.next_table(pgd, self.geo.table_index(addr, 3))?;
        let pmd = self.next_table(pud, self.geo.table_index(addr, 2))?;
        Some(Slot { table: pmd, idx: self.geo.table_index(addr, 1) })
    }

    /// A step of a walk over the pmds of [*addr, end) (the pud and pmd levels of
    /// `zap_pud_range`, `change_pud_range`, `copy_pud_range`, ...): `*addr` moves to the first
    /// address below `end` whose PMD table exists, skipping a PUD range without one whole as
    /// `pud_none` does; its `pmd_addr_end` and PMD slot, or None at the end.
    pub(super) fn pmd_walk_next(&self, mm: MmId, addr: &mut u64, end: u64) -> Option<(u64, Slot)> {
        while *addr < end {
            if let Some(pmd) = self.pmd_slot(mm, *addr) {
                return Some((self.geo.pmd_addr_end(*addr, end), pmd));
            }
            *addr = self.geo.pud_addr_end(*addr, end);
        }
        None
    }

    /// The pmd step of `page_vma_mapped_walk` over the pages [*index, hi) of the object `v`
    /// maps: `*index` moves to the first page whose PMD table exists in `mm`; its address
    /// (`vma_address`), PMD slot and pmd entry, or None at `hi`.
    pub(super) fn pvmw_next_pmd(&self, mm: MmId, v: &Vma, index: &mut u64, hi: u64) -> Option<(u64, Slot, Entry)> {
        while *index < hi {
            let addr = v.start + ((*index - v.pgoff) << self.geo.page_shift);
            if let Some(pmd) = self.pmd_slot(mm, addr) {
                return Some((addr, pmd, self.entry(pmd.table, pmd.idx)));
            }
            *index += 1;
        }
        None
    }

    /// The PTE slot for `addr` if a PTE table is installed (not a huge pmd).
    pub fn pte_slot(&self, mm: MmId, addr: u64) -> Option<Slot> {
        let pmd = self.pmd_slot(mm, addr)?;
        let pte = self.next_table(pmd.table, pmd.idx)?;
        Some(Slot { table: pte, idx: self.geo.table_index(addr, 0) })
    }

    /// `__pud_alloc` + `__pmd_alloc`: the PMD slot for `addr`, allocating the PUD and PMD
    /// tables on the way. None when a table allocation failed (VM_FAULT_OOM).
    pub fn pmd_alloc(&mut self, mm: MmId, addr: u64) -> Option<Slot> {
        let pgd = self.mm(mm).pgd;
        let pud = self.table_alloc(mm, pgd, self.geo.table_index(addr, 3))?;
        let pmd = self.table_alloc(mm, pud, self.geo.table_index(addr, 2))?;
        Some(Slot { table: pmd, idx: self.geo.table_index(addr, 1) })
    }

    /// Populate `table[idx]` with a new lower-level table if it is none.
    pub(super) fn table_alloc(&mut self, mm: MmId, table: Pfn, idx: usize) -> Option<Pfn> {
        let e = self.entry(table, idx);
        if e.present() {
            debug_assert!(!e.huge());
            return Some(e.pfn());
        }
        let new = self.pte_alloc_one(Some(mm))?;
        self.set_entry(table, idx, Entry::new(new, TABLE_FLAGS));
        self.pt_table_added(table, new, mm);
        Some(new)
    }

    /// `pte_alloc`: install a PTE table under an empty pmd.
    pub fn pte_alloc(&mut self, mm: MmId, pmd: Slot) -> Option<Pfn> {
        self.table_alloc(mm, pmd.table, pmd.idx)
    }

    // ---- faults --------------------------------------------------------------------------

    /// `handle_mm_fault` -> `__handle_mm_fault`: allocate the upper tables, try the huge pmd
    /// paths, then the pte path. Returns VM_FAULT_* bits. The caller (the arch fault handler)
    /// has found the vma and checked access rights.
    pub fn handle_mm_fault(&mut self, mm: MmId, addr: u64, write: bool) -> u32 {
        let vma = self.mm(mm).vma_lookup(addr).expect("arch handler checked the vma").clone();
        self.handle_mm_fault_vma(mm, vma, addr, write)
    }

    /// `handle_mm_fault` as Linux calls it: with the vma the arch handler found (a copy of
    /// it: the fault paths below may change the mm's vmas).
    pub fn handle_mm_fault_vma(&mut self, mm: MmId, vma: Vma, addr: u64, write: bool) -> u32 {
        if vma.flags & vm::HUGETLB != 0 {
            return self.hugetlb_fault(mm, &vma, addr, write);
        }
        // Seed 003: attach a sibling's tables before allocating our own.
        if self.knobs.ptshare != 0 && !self.pt_share_fault(mm, &vma, addr) {
            return vm_fault::OOM;
        }
        let Some(pmd) = self.pmd_alloc(mm, addr) else {
            return vm_fault::OOM;
        };
        let e = self.entry(pmd.table, pmd.idx);
        // Seed 004's prototype: a PMD page of its own for a text range's first fault.
        if e.none()
            && !write
            && self.knobs.file_text == super::knobs::FileText::Seed
            && self.seed_text_eligible(&vma, addr)
        {
            self.current.fault_path = "do_seed_text_pmd";
            let ret = self.do_seed_text_pmd(mm, &vma, addr, pmd);
            if ret & vm_fault::FALLBACK == 0 {
                return ret;
            }
        }
        if e.none() && self.thp_vma_allowable(&vma, addr) {
            self.current.fault_path = "do_huge_pmd_anonymous_page";
            let ret = self.do_huge_pmd_anonymous_page(mm, &vma, addr, write, pmd);
            if ret & vm_fault::FALLBACK == 0 {
                return ret;
            }
        } else if write && e.present() && !e.huge() && e.has(pgtable::ZERO_TABLE) {
            self.current.fault_path = "do_virtual_huge_zero_wp";
            let ret = self.do_virtual_huge_zero_wp(mm, &vma, addr, pmd);
            if ret & vm_fault::FALLBACK == 0 {
                return ret;
            }
        } else if e.present() && e.huge() && !vma.is_anonymous() {
            // wp_huge_pmd on a page-cache folio: no ->huge_fault, so a write to a read-only
            // pmd splits it (the pmd is cleared) and the pte path takes the fault.
            if write && !e.write() {
                self.__split_huge_pmd(mm, &vma, pmd, self.geo.hpage_pmd_align_down(addr));
            } else {
                self.current.fault_path = "huge_pmd_set_accessed";
                let ne = if write { e.with(pgtable::ACCESSED | pgtable::DIRTY) } else { e.with(pgtable::ACCESSED) };
                self.set_entry(pmd.table, pmd.idx, ne);
                return 0;
            }
        } else if e.present() && e.huge() {
            if write && !e.write() {
                self.current.fault_path = "do_huge_pmd_wp_page";
                let ret = self.do_huge_pmd_wp_page(mm, &vma, addr, pmd);
                if ret & vm_fault::FALLBACK == 0 {
                    return ret;
                }
            } else {
                // huge_pmd_set_accessed: a spurious fault (another thread fixed it).
                self.current.fault_path = "huge_pmd_set_accessed";
                let mut ne = e.with(pgtable::ACCESSED);
                if write {
                    ne = ne.with(pgtable::DIRTY);
                }
                self.set_entry(pmd.table, pmd.idx, ne);
                return 0;
            }
        }
        self.handle_pte_fault(mm, &vma, addr, write, pmd)
    }

    /// `handle_pte_fault`.
    fn handle_pte_fault(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, pmd: Slot) -> u32 {
        let pmd_e = self.entry(pmd.table, pmd.idx);
        if let super::mm::Backing::File(_) = vma.backing {
            let pte = if pmd_e.none() { Entry::NONE } else { self.entry(pmd_e.pfn(), self.geo.table_index(addr, 0)) };
            if pte.none() {
                self.current.fault_path = "do_fault";
                return self.do_file_fault(mm, vma, addr, write, pmd);
            }
        }
        let pte_table = if pmd_e.none() {
            if vma.is_anonymous() {
                // do_anonymous_page allocates the table itself.
                self.current.fault_path = "do_anonymous_page";
                return self.do_anonymous_page(mm, vma, addr, write, pmd);
            }
            self.current.fault_path = "do_fault";
            return self.do_fault(mm, vma, addr, write, pmd);
        } else {
            pmd_e.pfn()
        };
        let slot = Slot { table: pte_table, idx: self.geo.table_index(addr, 0) };
        let pte = self.entry(slot.table, slot.idx);
        if pte.none() {
            if vma.is_anonymous() {
                self.current.fault_path = "do_anonymous_page";
                return self.do_anonymous_page(mm, vma, addr, write, pmd);
            }
            self.current.fault_path = "do_fault";
            return self.do_fault(mm, vma, addr, write, pmd);
        }
        if !pte.present() {
            self.current.fault_path = "do_swap_page";
            return self.do_swap_page(mm, vma, addr, write, slot);
        }
        if write && !pte.write() {
            self.current.fault_path = "do_wp_page";
            return self.do_wp_page(mm, vma, addr, slot);
        }
        self.current.fault_path = "handle_pte_fault";
        // Spurious: mark young (and dirty); the access will go through.
        let mut ne = pte.with(pgtable::ACCESSED);
        if write {
            ne = ne.with(pgtable::DIRTY);
        }
        self.set_entry(slot.table, slot.idx, ne);
        0
    }

    /// `anon_vma_prepare`: give the vma an anon_vma (it now may be copied at fork and is no
    /// longer mergeable with a vma that has another).
    pub fn anon_vma_prepare(&mut self, mm: MmId, start: u64) -> u32 {
        if let Some(a) = self.mm(mm).vmas[&start].anon_vma {
            return a;
        }
        let a = self.new_anon_vma();
        let shift = self.geo.page_shift;
        let m = self.mm_mut(mm);
        let v = m.vmas.get_mut(&start).expect("vma");
        v.anon_vma = Some(a);
        if !v.is_anonymous() || v.pgoff << shift != v.start {
            // Anonymous pages (COW copies) in a vma whose index is not its address's
            // (kernel/rmap.rs).
            m.nonlinear_anon = true;
        }
        a
    }

    /// `do_anonymous_page`: a read maps the zero page (pte_special, not counted in rss); a write
    /// allocates a zeroed page (vma_alloc_zeroed_movable_folio) mapped writable and dirty.
    fn do_anonymous_page(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, pmd: Slot) -> u32 {
        let Some(table) = self.pte_alloc(mm, pmd) else {
            return vm_fault::OOM;
        };
        let idx = self.geo.table_index(addr, 0);
        if !write {
            let e = Entry::new(self.zero_pfn, vm_page_prot(vma) | pgtable::SPECIAL);
            self.set_entry(table, idx, e);
            return 0;
        }
        self.anon_vma_prepare(mm, vma.start);
        let Some(a) = self.alloc_user_zeroed(0, gfp::HIGHUSER_MOVABLE, addr) else {
            return vm_fault::OOM;
        };
        if !self.charge_new_anon(a.pfn, mm) {
            return vm_fault::OOM;
        }
        self.folio_add_new_anon_rmap(a.pfn, mm, false, vma.linear_page_index(addr, self.geo));
        self.folio_add_lru_vma(a.pfn, vma);
        self.add_rss_at(table, mm, MmCounter::AnonPages, 1);
        let e = maybe_mkwrite(Entry::new(a.pfn, vm_page_prot(vma) | pgtable::DIRTY), vma);
        self.set_entry(table, idx, e);
        0
    }

    /// `do_wp_page`: a write to a present read-only pte of a writable vma. The zero page and
    /// shared anonymous pages are copied (wp_page_copy); an exclusive anonymous page, or one
    /// whose last other reference is gone, is reused (wp_page_reuse).
    pub(super) fn do_wp_page(&mut self, mm: MmId, vma: &Vma, addr: u64, slot: Slot) -> u32 {
        let pte = self.entry(slot.table, slot.idx);
        let pfn = pte.pfn();
        if vma.is_shared() {
            // wp_page_shared: ext4's page_mkwrite dirties the folio (shmem needs none); make
            // the pte writable.
            let h = self.head_of(pfn);
            self.folio_mark_dirty(h);
            self.set_entry(slot.table, slot.idx, maybe_mkwrite(pte.with(pgtable::DIRTY), vma));
            return 0;
        }
        if !self.is_zero_pfn(pfn) && self.wp_can_reuse_anon_folio(pfn, mm) {
            self.stat.count(VmEvent::ReuseFault);
            self.mem.pages[pfn.idx()].set(pg::ANON_EXCLUSIVE);
            let ne = maybe_mkwrite(pte.with(pgtable::DIRTY | pgtable::ACCESSED), vma);
            self.set_entry(slot.table, slot.idx, ne);
            return 0;
        }
        self.wp_page_copy(mm, vma, addr, slot)
    }

    /// `wp_can_reuse_anon_folio`: PageAnonExclusive, or a small folio whose only reference
    /// is this mapping; a large folio mapped only by this mm with no other references
    /// (`__wp_can_reuse_large_anon_folio`).
    fn wp_can_reuse_anon_folio(&mut self, page: Pfn, mm: MmId) -> bool {
        let p = self.mem.pages[page.idx()];
        if !p.test(pg::ANON) {
            return false;
        }
        if p.test(pg::ANON_EXCLUSIVE) {
            return true;
        }
        let head = self.head_of(page);
        let h = self.mem.pages[head.idx()];
        if h.test(pg::HEAD) {
            let only_me = self.folio_mms.get(&head.0).is_some_and(|v| v.len() == 1 && v[0].0 == mm);
            return only_me && self.folio_mapcount(head) == h.refcount as i64;
        }
        h.refcount == 1
    }

    /// `wp_page_copy`: allocate a new page (zeroed when the old one is the zero page, else a
    /// copy of it), map it writable, and drop the old mapping.
    fn wp_page_copy(&mut self, mm: MmId, vma: &Vma, addr: u64, slot: Slot) -> u32 {
        let orig_pte = self.entry(slot.table, slot.idx);
        let old = orig_pte.pfn();
        let zero = self.is_zero_pfn(old);
        self.anon_vma_prepare(mm, vma.start);
        let flags = gfp::HIGHUSER_MOVABLE;
        // do_wp_page's folio_get: the old folio is held while the new one is allocated and
        // charged (reclaim in either may unmap it, but cannot free it from under the copy).
        let old_head = self.head_of(old);
        if !zero {
            self.folio_get(old_head);
        }
        let a = if zero { self.alloc_user_zeroed(0, flags, addr) } else { self.alloc_pages(0, flags) };
        let charged = a.is_some_and(|a| self.charge_new_anon(a.pfn, mm));
        if !zero {
            self.folio_put(old_head);
        }
        let Some(a) = a.filter(|_| charged) else {
            return vm_fault::OOM;
        };
        if self.entry(slot.table, slot.idx) != orig_pte {
            // pte_same failed: the allocation's reclaim unmapped the old page (or aged its
            // pte). The new folio goes and the access faults again.
            self.folio_put(a.pfn);
            return 0;
        }
        if !zero {
            self.copy_page(a.pfn, old);
            self.stat.count(VmEvent::CowFault);
        }
        self.folio_add_new_anon_rmap(a.pfn, mm, false, vma.linear_page_index(addr, self.geo));
        self.folio_add_lru_vma(a.pfn, vma);
        if zero {
            self.add_rss_at(slot.table, mm, MmCounter::AnonPages, 1);
        } else {
            let c = self.mm_counter(old);
            if c != MmCounter::AnonPages {
                self.add_rss_at(slot.table, mm, c, -1);
                self.add_rss_at(slot.table, mm, MmCounter::AnonPages, 1);
            }
        }
        let e = maybe_mkwrite(Entry::new(a.pfn, vm_page_prot(vma) | pgtable::DIRTY | pgtable::ACCESSED), vma);
        self.set_entry(slot.table, slot.idx, e);
        // ptep_clear_flush: the old translation leaves every TLB.
        let page = self.geo.page_align_down(addr);
        self.flush_tlb_range(mm, page, page + self.geo.page_size());
        if !zero {
            self.remove_rmap_pte(old, mm);
            let h = self.head_of(old);
            self.mlock_vma_folio(h, vma, false);
            self.folio_put(h);
        }
        0
    }

    /// `do_fault` for shmem: `do_read_fault` (with fault-around) or `do_shared_fault`.
    fn do_fault(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, pmd: Slot) -> u32 {
        let Some(table) = self.pte_alloc(mm, pmd) else {
            return vm_fault::OOM;
        };
        let idx = self.geo.table_index(addr, 0);
        if !write && self.knobs.fault_around_bytes > self.geo.page_size() {
            self.do_fault_around(mm, vma, addr, table);
            if !self.entry(table, idx).none() {
                return vm_fault::NOPAGE;
            }
        }
        let super::mm::Backing::Shmem(obj) = vma.backing else {
            return vm_fault::SIGBUS;
        };
        let index = vma.linear_page_index(addr, self.geo);
        self.pagecache_lookup_lock(obj);
        if index >= self.shmem_size(obj) {
            // shmem_get_folio_gfp: an index past i_size (a mapping mremap grew past the
            // object) is -EINVAL, which the fault turns into SIGBUS.
            return vm_fault::SIGBUS;
        }
        let Some((page, ret)) = self.shmem_fault_folio(obj, index, mm) else {
            return vm_fault::OOM;
        };
        if write {
            // do_shared_fault's fault_dirty_shared_page.
            let head = self.head_of(page);
            self.folio_mark_dirty(head);
        }
        self.map_shmem_pte(mm, vma, page, table, idx, write);
        ret
    }

    /// Map a shmem page at `table[idx]` (set_pte_range via finish_fault/filemap_map_pages).
    fn map_shmem_pte(&mut self, mm: MmId, vma: &Vma, page: Pfn, table: Pfn, idx: usize, dirty: bool) {
        self.folio_get(page);
        self.add_rmap_pte(page, mm);
        self.mlock_vma_folio(page, vma, true);
        self.add_rss_at(table, mm, MmCounter::ShmemPages, 1);
        let mut e = Entry::new(page, vm_page_prot(vma));
        if dirty {
            e = maybe_mkwrite(e.with(pgtable::DIRTY), vma);
        }
        self.set_entry(table, idx, e);
    }

    /// `do_fault_around`'s window: the first and last entries of `addr`'s PTE table in the
    /// fault_around_bytes-aligned block around it, clipped to the vma and the table.
    pub(super) fn fault_around_window(&self, vma: &Vma, addr: u64) -> (u64, u64) {
        let nr = self.knobs.fault_around_bytes >> self.geo.page_shift;
        let pte_off = self.geo.table_index(addr, 0) as u64;
        let vma_off = (addr - vma.start) >> self.geo.page_shift;
        let vma_pages = vma.len() >> self.geo.page_shift;
        let from = align_down(pte_off, nr).max(pte_off - pte_off.min(vma_off));
        let to = (from + nr).min(self.geo.ptrs_per_table() as u64).min(pte_off + vma_pages - vma_off) - 1;
        (from, to)
    }

    /// `do_fault_around` + `filemap_map_pages`: map the pages of the aligned window around the
    /// fault (fault_around_bytes, clamped to the vma and the PTE table) that are already in
    /// the page cache and not yet mapped.
    fn do_fault_around(&mut self, mm: MmId, vma: &Vma, addr: u64, table: Pfn) {
        let super::mm::Backing::Shmem(obj) = vma.backing else {
            return;
        };
        let (from, to) = self.fault_around_window(vma, addr);
        let base = self.geo.hpage_pmd_align_down(addr);
        let mut mapped = 0;
        for i in from..=to {
            if !self.entry(table, i as usize).none() {
                continue;
            }
            let a = base + (i << self.geo.page_shift);
            let index = vma.linear_page_index(a, self.geo);
            if let Some(page) = self.shmem_find_folio(obj, index) {
                self.map_shmem_pte(mm, vma, page, table, i as usize, false);
                mapped += 1;
            }
        }
        self.stat.count_n(VmEvent::FaultAroundPages, mapped);
    }

    // ---- unmapping -----------------------------------------------------------------------

    /// `unmap_page_range` / `zap_pmd_range` / `zap_pte_range` over [start, end) of one vma:
    /// whole huge pmds are zapped (zap_huge_pmd), partial ones split first.
    pub fn zap_page_range(&mut self, mm: MmId, vma: &Vma, start: u64, end: u64) {
        self.zap_page_range_details(mm, vma, start, end, false);
    }

    /// `zap_page_range_single` with `zap_details.reclaim_pt` (MADV_DONTNEED): with
    /// CONFIG_PT_RECLAIM (Linux >= 6.14, on in x86-64's defconfig; knob `kernel/pt_reclaim`) a
    /// PTE table whose whole 2 MiB span the zap covers and that is left empty is freed
    /// (mm/pt_reclaim.c `try_to_free_pte`).
    pub fn zap_page_range_reclaim_pt(&mut self, mm: MmId, vma: &Vma, start: u64, end: u64) {
        self.zap_page_range_details(mm, vma, start, end, self.knobs.pt_reclaim);
    }

    fn zap_page_range_details(&mut self, mm: MmId, vma: &Vma, start: u64, end: u64, reclaim_pt: bool) {
        // The lru_add_drain before tlb_gather_mmu (zap_page_range_single, vms_clear_ptes,
        // exit_mmap).
        self.lru_add_drain();
        if vma.flags & vm::HUGETLB != 0 {
            self.unmap_hugepage_range(mm, vma, start, end);
            return;
        }
        // munlock_vma_folio with each rmap removal of a VM_LOCKED vma (zap_huge_pmd's, and
        // zap_pte_range's once a batch).
        let locked = vma.flags & vm::LOCKED != 0;
        // tlb_finish_mmu: one flush of the whole range once the entries are cleared.
        self.flush_tlb_range(mm, start, end);
        let mut addr = start;
        while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut addr, end) {
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() && e.huge() {
                if next - addr == self.geo.hpage_pmd_size() {
                    if locked && !self.is_huge_zero_pmd(e) {
                        self.munlock_folio(e.pfn());
                    }
                    self.zap_huge_pmd(mm, pmd);
                    addr = next;
                    continue;
                }
                self.__split_huge_pmd(mm, vma, pmd, self.geo.hpage_pmd_align_down(addr));
            }
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() {
                if e.has(pgtable::ZERO_TABLE) {
                    // The virtual huge zero page is no longer all zero pages.
                    self.set_entry(pmd.table, pmd.idx, e.without(pgtable::ZERO_TABLE));
                }
                if self.pt_sharing() && self.pt_reach.contains_key(&e.pfn().0) {
                    // Seed 003: entries other mms map through change; every CPU that may
                    // cache one of their translations is flushed.
                    self.work.push(super::Work::FlushShared { table: e.pfn(), start: addr, end: next });
                }
                self.zap_pte_range(mm, e.pfn(), addr, next, vma.has_recency(), locked);
                // reclaim_pt_is_enabled: the zap spans the table's whole PMD range (a table
                // other mms share stays with them).
                if reclaim_pt
                    && next - addr == self.geo.hpage_pmd_size()
                    && !self.pt_is_shared(e.pfn())
                    && (0..self.geo.ptrs_per_table()).all(|i| !self.entry(e.pfn(), i).present())
                {
                    self.set_entry(pmd.table, pmd.idx, Entry::NONE);
                    self.pte_free(Some(mm), e.pfn());
                }
            }
            addr = next;
        }
    }

    /// `zap_pte_range` of a table left where no vma is (seed 003's `rfc` exit sweep).
    pub(super) fn zap_pte_range_stale(&mut self, mm: MmId, table: Pfn, addr: u64, end: u64) {
        self.zap_pte_range(mm, table, addr, end, true, false);
    }

    /// `folio_pte_batch` as zap_present_ptes uses it: whether any pte of the batch that
    /// starts at `a` (pte `first`, of folio `head`: the ptes up to `end` that map its next
    /// pages in a row) is young.
    fn folio_pte_batch_young(&self, table: Pfn, mut a: u64, end: u64, head: Pfn, first: Entry) -> bool {
        let (mut e, mut pfn) = (first, first.pfn());
        loop {
            if e.has(pgtable::ACCESSED) {
                return true;
            }
            a += self.geo.page_size();
            pfn = Pfn(pfn.0 + 1);
            if a >= end {
                return false;
            }
            e = self.entry(table, self.geo.table_index(a, 0));
            if !e.present() || e.special() || e.pfn() != pfn || self.head_of(pfn) != head {
                return false;
            }
        }
    }

    /// `zap_pte_range`: clear the ptes of [addr, end) in one table, dropping rss, rmap and refs.
    /// `recency`: `vma_has_recency` of the vma the ptes are in (a young pte of a file folio
    /// marks it accessed).
    fn zap_pte_range(&mut self, mm: MmId, table: Pfn, addr: u64, end: u64, recency: bool, locked: bool) {
        // The pages each rss counter loses, given back once at the end (add_mm_rss_vec): a
        // decrease never moves the high-water mark, so the counts end the same.
        let mut rss = [0i64; 3];
        // zap_present_folio_ptes takes the ptes of one folio together (folio_pte_batch: the
        // next pages of the folio, in a row): a file folio is marked accessed once, before its
        // rmap goes, if any of them was young; then the batch's rmap removal munlocks the folio
        // where the vma is VM_LOCKED (munlock_vma_folio). (The folio of the batch open, and
        // the pfn and the address that continue it.)
        let mut batch: Option<(Pfn, u32, u64)> = None;
        let ps = self.geo.page_size();
        let mut a = addr;
        while a < end {
            let idx = self.geo.table_index(a, 0);
            let e = self.entry(table, idx);
            if e.is_swap() {
                self.zap_swap_pte(mm, table, idx, e);
            } else if e.present() {
                self.set_entry(table, idx, Entry::NONE);
                let pfn = e.pfn();
                if !e.special() {
                    let c = self.mm_counter(pfn);
                    let h = self.head_of(pfn);
                    if e.has(pgtable::DIRTY) && c != MmCounter::AnonPages {
                        // zap_present_folio_ptes: a dirty pte dirties its page-cache folio.
                        self.folio_mark_dirty(h);
                    }
                    let marks = c != MmCounter::AnonPages && recency;
                    // Batches matter only to a file folio's mark and a locked vma's munlock.
                    let first =
                        (marks || locked) && !batch.is_some_and(|(bh, next, at)| bh == h && next == pfn.0 && at == a);
                    // A young pte of a file folio: it was used (vma_has_recency).
                    if first && marks && self.folio_pte_batch_young(table, a, end, h, e) {
                        self.folio_mark_accessed(h);
                    }
                    if marks || locked {
                        batch = Some((h, pfn.0 + 1, a + ps));
                    }
                    rss[c as usize] -= 1;
                    self.remove_rmap_pte(pfn, mm);
                    if first && locked {
                        self.munlock_folio(h);
                    }
                    self.folio_put(h);
                }
            }
            a += ps;
        }
        if !self.sabotage.skip_rss_dec {
            for c in [MmCounter::FilePages, MmCounter::AnonPages, MmCounter::ShmemPages] {
                if rss[c as usize] != 0 {
                    self.add_rss_at(table, mm, c, rss[c as usize]);
                }
            }
        }
    }

    /// `free_pgd_range`: free the page tables that map only [addr, end), given that nothing is
    /// mapped in [floor, addr) or [end, ceiling) (ceiling 0 = the top of the address space).
    pub fn free_pgd_range(&mut self, mm: MmId, addr: u64, end: u64, floor: u64, ceiling: u64) {
        let mut addr = self.geo.hpage_pmd_align_down(addr);
        let mut end = end;
        if addr < floor {
            addr = addr.wrapping_add(self.geo.hpage_pmd_size());
            if addr == 0 {
                return;
            }
        }
        let mut ceiling = ceiling;
        if ceiling != 0 {
            ceiling = self.geo.hpage_pmd_align_down(ceiling);
            if ceiling == 0 {
                return;
            }
        }
        if end.wrapping_sub(1) > ceiling.wrapping_sub(1) {
            end -= self.geo.hpage_pmd_size();
        }
        if addr > end.wrapping_sub(1) {
            return;
        }
        let pgd = self.mm(mm).pgd;
        let mut a = addr;
        loop {
            let next = self.geo.pgd_addr_end(a, end);
            let idx = self.geo.table_index(a, 3);
            if self.entry(pgd, idx).present() {
                self.free_pud_range(mm, Slot { table: pgd, idx }, a, next, floor, ceiling);
            }
            a = next;
            if a == end {
                break;
            }
        }
    }

    /// `free_pud_range` (p4d folded): free PMD tables, then the PUD table if it covers only
    /// [floor, ceiling). A table other mms still share (seed 003 under `rfc`: a partial
    /// munmap left it attached) is left, and so is every table above it.
    fn free_pud_range(&mut self, mm: MmId, pgd: Slot, addr: u64, end: u64, floor: u64, ceiling: u64) {
        let pud_table = self.entry(pgd.table, pgd.idx).pfn();
        if self.pt_is_shared(pud_table) {
            return;
        }
        let start = addr;
        let mut kept = false;
        let mut a = addr;
        loop {
            let next = self.geo.pud_addr_end(a, end);
            let idx = self.geo.table_index(a, 2);
            if self.entry(pud_table, idx).present() {
                kept |= !self.free_pmd_range(mm, Slot { table: pud_table, idx }, a, next, floor, ceiling);
            }
            a = next;
            if a == end {
                break;
            }
        }
        if !kept && free_upper_ok(start, end, floor, ceiling, self.geo.level_size(3)) {
            self.set_entry(pgd.table, pgd.idx, Entry::NONE);
            self.pte_free(Some(mm), pud_table);
        }
    }

    /// `free_pmd_range`: free PTE tables (free_pte_range), then the PMD table if it covers
    /// only [floor, ceiling). False when a shared table was left in place (seed 003, `rfc`).
    fn free_pmd_range(&mut self, mm: MmId, pud: Slot, addr: u64, end: u64, floor: u64, ceiling: u64) -> bool {
        let e = self.entry(pud.table, pud.idx);
        if e.huge() {
            return true;
        }
        let pmd_table = e.pfn();
        if self.pt_is_shared(pmd_table) {
            return false;
        }
        let start = addr;
        let mut kept = false;
        let mut a = addr;
        loop {
            let next = self.geo.pmd_addr_end(a, end);
            let idx = self.geo.table_index(a, 1);
            let e = self.entry(pmd_table, idx);
            if e.present() && !e.huge() {
                if self.pt_is_shared(e.pfn()) {
                    kept = true;
                } else {
                    self.set_entry(pmd_table, idx, Entry::NONE);
                    self.pte_free(Some(mm), e.pfn());
                }
            }
            a = next;
            if a == end {
                break;
            }
        }
        if !kept && free_upper_ok(start, end, floor, ceiling, self.geo.level_size(2)) {
            self.set_entry(pud.table, pud.idx, Entry::NONE);
            self.pte_free(Some(mm), pmd_table);
        }
        !kept
    }

    // ---- fork ----------------------------------------------------------------------------

    /// `copy_page_range`: copy one vma's page tables into the child, unless the child can
    /// refault everything (`vma_needs_copy`: only vmas with an anon_vma are copied). Private
    /// writable ptes become read-only in both (COW). Err on allocation failure (fork ENOMEM).
    pub fn copy_page_range(&mut self, dst: MmId, src: MmId, vma: &Vma) -> Result<(), Errno> {
        if self.knobs.ptshare != 0 && super::ptshare::pt_shareable_vma(vma) {
            // Seed 003: share the parent's tables instead.
            return self.pt_copy_range(dst, src, vma);
        }
        if vma.anon_vma.is_none() {
            return Ok(());
        }
        if vma.flags & vm::HUGETLB != 0 {
            return self.copy_hugetlb_page_range(dst, src, vma);
        }
        let mut addr = vma.start;
        while let Some((next, spmd)) = self.pmd_walk_next(src, &mut addr, vma.end) {
            let e = self.entry(spmd.table, spmd.idx);
            if e.none() {
                addr = next;
                continue;
            }
            let dpmd = self.pmd_alloc(dst, addr).ok_or(Errno::ENOMEM)?;
            if e.huge() {
                self.copy_huge_pmd(dst, src, vma, dpmd, spmd)?;
            } else {
                let dtable = self.pte_alloc(dst, dpmd).ok_or(Errno::ENOMEM)?;
                self.copy_pte_range(dst, src, vma, dtable, e.pfn(), addr, next);
                if e.has(pgtable::ZERO_TABLE) {
                    let d = self.entry(dpmd.table, dpmd.idx);
                    self.set_entry(dpmd.table, dpmd.idx, d.with(pgtable::ZERO_TABLE));
                }
            }
            addr = next;
        }
        Ok(())
    }

    /// `copy_pte_range` / `copy_present_pte`.
    #[allow(clippy::too_many_arguments)]
    fn copy_pte_range(&mut self, dst: MmId, _src: MmId, vma: &Vma, dtable: Pfn, stable: Pfn, addr: u64, end: u64) {
        let cow = is_cow_mapping(vma.flags);
        let mut a = addr;
        while a < end {
            let idx = self.geo.table_index(a, 0);
            let mut e = self.entry(stable, idx);
            a += self.geo.page_size();
            if e.is_swap() {
                self.copy_swap_pte(dst, dtable, stable, idx, e);
                continue;
            }
            if !e.present() {
                continue;
            }
            if !e.special() {
                let page = e.pfn();
                // folio_try_dup_anon_rmap_pte: the page is now shared, never exclusive.
                self.mem.pages[page.idx()].clear(pg::ANON_EXCLUSIVE);
                let h = self.head_of(page);
                self.folio_get(h);
                self.add_rmap_pte(page, dst);
                let c = self.mm_counter(page);
                self.add_rss_at(dtable, dst, c, 1);
            }
            if cow && e.write() {
                e = e.without(pgtable::RW);
                self.set_entry(stable, idx, e);
            }
            if vma.is_shared() {
                e = e.without(pgtable::DIRTY);
            }
            self.set_entry(dtable, idx, e.without(pgtable::ACCESSED));
        }
    }
}

/// The tail test of free_pmd_range/free_pud_range: the upper table covering `start` (aligned
/// down to `size`) may go only if [floor, ceiling) spans all of it.
fn free_upper_ok(start: u64, end: u64, floor: u64, ceiling: u64, size: u64) -> bool {
    let start = align_down(start, size);
    if start < floor {
        return false;
    }
    let mut ceiling = ceiling;
    if ceiling != 0 {
        ceiling = align_down(ceiling, size);
        if ceiling == 0 {
            return false;
        }
    }
    end.wrapping_sub(1) <= ceiling.wrapping_sub(1)
}
