//! Reverse mapping for reclaim (mm/rmap.c): finding every pte and pmd that maps a folio
//! (`rmap_walk`), harvesting their accessed bits (`folio_referenced`), and unmapping them
//! (`try_to_unmap`: anonymous pages become swap ptes, page-cache pages are just unmapped,
//! clean lazyfree pages are discarded).
//!
//! Differs from Linux in how mappings are found, not in what is found. An anonymous folio
//! knows its linear page index (`folio->index`); mmsim has no anon_vma tree, so its walk
//! looks, in each mm that may map it (a large folio's mms, or every mm for a small one), at
//! the vma the index's identity address falls in (anonymous vmas keep vm_pgoff equal to
//! vm_start's page number), and, in an mm that has vmas where that does not hold (moved by
//! mremap, private file mappings with COW copies: `MmStruct::nonlinear_anon`), at those too.
//! A page-cache folio's walk goes through its inode's mms (`i_mmap_range`).

use super::memory::Slot;
use super::mm::{vm, MmCounter, Vma};
use super::mm_types::{pg, NIL};
use super::pgtable::{self, Entry, SwpEntry};
use super::{Kernel, MmId};
use crate::units::Pfn;

/// One mapping of a folio: a pte mapping one of its pages, or a pmd mapping it whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmapHit {
    pub mm: MmId,
    pub addr: u64,
    pub slot: Slot,
    pub pmd: bool,
    /// The vma's flags.
    pub vm_flags: u32,
}

impl Kernel {
    /// The vmas of `mm` that may map anonymous pages [index, index + nr) (see the module
    /// comment), with the indices [lo, hi) each covers.
    fn anon_vmas_covering(&self, mm: MmId, index: u64, nr: u64) -> Vec<(Vma, u64, u64)> {
        let shift = self.geo.page_shift;
        let m = self.mm(mm);
        let mut out: Vec<(Vma, u64, u64)> = Vec::new();
        let push = |v: &Vma, out: &mut Vec<(Vma, u64, u64)>| {
            if v.anon_vma.is_none() || v.flags & vm::HUGETLB != 0 || out.iter().any(|(o, _, _)| o.start == v.start) {
                return;
            }
            let pages = v.len() >> shift;
            let (lo, hi) = (index.max(v.pgoff), (index + nr).min(v.pgoff + pages));
            if lo < hi {
                out.push((v.clone(), lo, hi));
            }
        };
        let task = self.geo.task_size() >> shift;
        if index < task {
            let (lo, hi) = (index << shift, (index + nr).min(task) << shift);
            for start in m.vmas_in(lo, hi) {
                let v = &m.vmas[&start];
                if v.pgoff << shift == v.start {
                    push(v, &mut out);
                }
            }
        }
        if m.nonlinear_anon {
            for v in m.vmas.values() {
                if v.pgoff << shift != v.start || !v.is_anonymous() {
                    push(v, &mut out);
                }
            }
        }
        out
    }

    /// The mms an anonymous folio's walk looks in: a large folio's own (it tracks them), or
    /// every live mm.
    fn anon_rmap_mms(&self, head: Pfn) -> Vec<MmId> {
        if self.folio_nr_pages(head) > 1 {
            let mut v: Vec<MmId> =
                self.folio_mms.get(&head.0).map(|v| v.iter().map(|e| e.0).collect()).unwrap_or_default();
            v.sort_unstable();
            return v;
        }
        (0..self.mms.len() as MmId).filter(|&m| self.mms[m as usize].is_some()).collect()
    }

    /// `rmap_walk`: every pte and pmd mapping the folio headed at `head` (a pte table several
    /// mms share, seed 003, found once), stopping once all its mappings are found.
    pub fn rmap_walk(&self, head: Pfn) -> Vec<RmapHit> {
        let want = self.folio_mapcount(head);
        let mut out: Vec<RmapHit> = Vec::new();
        if want == 0 {
            return out;
        }
        let p = &self.mem.pages[head.idx()];
        let nr = self.folio_nr_pages(head);
        let index = p.index;
        if p.test(pg::ANON) {
            for mm in self.anon_rmap_mms(head) {
                for (v, lo, hi) in self.anon_vmas_covering(mm, index, nr) {
                    self.rmap_walk_vma(head, index, mm, &v, lo, hi, &mut out);
                    if out.len() as i64 >= want {
                        return out;
                    }
                }
            }
        } else if p.mapping != NIL && !p.test(pg::HUGETLB) {
            for (mm, v, lo, hi) in self.i_mmap_range(p.mapping, index, nr) {
                self.rmap_walk_vma(head, index, mm, &v, lo, hi, &mut out);
                if out.len() as i64 >= want {
                    return out;
                }
            }
        }
        out
    }

    /// `page_vma_mapped_walk` over the indices [lo, hi) of `v`: the mappings of the folio
    /// (first index `index`) there.
    #[allow(clippy::too_many_arguments)]
    fn rmap_walk_vma(&self, head: Pfn, index: u64, mm: MmId, v: &Vma, lo: u64, hi: u64, out: &mut Vec<RmapHit>) {
        let shift = self.geo.page_shift;
        let mut i = lo;
        while let Some((addr, pmd, pe)) = self.pvmw_next_pmd(mm, v, &mut i, hi) {
            if pe.present() && pe.huge() {
                let haddr = self.geo.hpage_pmd_align_down(addr);
                if pe.pfn() == head && !out.iter().any(|x| x.pmd && x.slot == pmd) {
                    out.push(RmapHit { mm, addr: haddr, slot: pmd, pmd: true, vm_flags: v.flags });
                }
                i += (haddr + self.geo.hpage_pmd_size() - addr) >> shift;
                continue;
            }
            if pe.present() {
                let slot = Slot { table: pe.pfn(), idx: self.geo.table_index(addr, 0) };
                let e = self.entry(slot.table, slot.idx);
                if e.present()
                    && !e.special()
                    && e.pfn().0 as u64 == head.0 as u64 + (i - index)
                    && !out.iter().any(|x| !x.pmd && x.slot == slot)
                {
                    out.push(RmapHit { mm, addr, slot, pmd: false, vm_flags: v.flags });
                }
            }
            i += 1;
        }
    }

    /// `folio_referenced`: how many vmas have used the folio since the last look (their
    /// accessed bits, which are cleared; x86 flushes no TLB for it, so a translation the TLB
    /// still holds sets no bit until it is walked again), and the flags of those vmas. A
    /// VM_LOCKED vma mlocks the folio and is reported at once (VM_LOCKED in the flags). With
    /// `target` a memcg reclaim's, the vmas of mms outside it are skipped.
    pub fn folio_referenced(&mut self, head: Pfn, target: Option<u16>) -> (u32, u32) {
        let hits = self.rmap_walk(head);
        let mut refs = 0u32;
        let mut flags = 0u32;
        let mut counted: Vec<(MmId, u64)> = Vec::new();
        for h in hits {
            let Some(v) = self.mm(h.mm).vma_lookup(h.addr).cloned() else { continue };
            if !v.has_recency() {
                continue;
            }
            if let Some(t) = target {
                if !self.memcg_is_descendant(self.mm(h.mm).memcg, t) {
                    continue;
                }
            }
            if v.flags & vm::LOCKED != 0 {
                self.mlock_vma_folio(head, &v, true);
                return (refs, flags | vm::LOCKED);
            }
            let e = self.entry(h.slot.table, h.slot.idx);
            if e.has(pgtable::ACCESSED) {
                self.set_entry(h.slot.table, h.slot.idx, e.without(pgtable::ACCESSED));
                if !counted.contains(&(h.mm, v.start)) {
                    counted.push((h.mm, v.start));
                    refs += 1;
                    flags |= v.flags & !vm::LOCKED;
                }
            }
        }
        (refs, flags)
    }

    /// `try_to_unmap` of an isolated, locked folio: each mapping goes. A swap-cache anonymous
    /// page's pte becomes its swap entry (exclusive if the page was); a page-cache page's is
    /// cleared (its dirty bit moving to the folio); a lazyfree folio still clean and unused is
    /// discarded (a mapping that wrote it makes it swap-backed again and stops the walk). A
    /// pmd mapping an anonymous THP is split first, its ptes then unmapped (a lazyfree one is
    /// discarded whole, `__discard_anon_folio_pmd_locked`). VM_LOCKED vmas
    /// stop the walk (the folio is mlocked). Returns whether the folio is no longer mapped.
    pub fn try_to_unmap(&mut self, head: Pfn) -> bool {
        let anon = self.mem.pages[head.idx()].test(pg::ANON);
        let lazy = anon && self.mem.pages[head.idx()].test(pg::LAZYFREE);
        // TTU_SPLIT_HUGE_PMD: a pmd-mapped anonymous THP is remapped by ptes first, unless it
        // is lazyfree: `unmap_huge_pmd_locked` discards that whole or keeps it.
        if anon && !lazy {
            for h in self.rmap_walk(head).into_iter().filter(|h| h.pmd) {
                let Some(v) = self.mm(h.mm).vma_lookup(h.addr).cloned() else { continue };
                if v.flags & vm::LOCKED != 0 {
                    self.mlock_vma_folio(head, &v, true);
                    return false;
                }
                self.__split_huge_pmd(h.mm, &v, h.slot, h.addr);
            }
        }
        let hits = self.rmap_walk(head);
        let mut flushed: Vec<(MmId, u64, u64)> = Vec::new();
        for h in hits {
            let Some(v) = self.mm(h.mm).vma_lookup(h.addr).cloned() else { continue };
            if v.flags & vm::LOCKED != 0 {
                self.mlock_vma_folio(head, &v, true);
                break;
            }
            let len = if h.pmd { self.geo.hpage_pmd_size() } else { self.geo.page_size() };
            let e = self.entry(h.slot.table, h.slot.idx);
            if lazy {
                if e.has(pgtable::DIRTY) || self.mem.pages[head.idx()].test(pg::DIRTY) {
                    // Written since MADV_FREE: swap-backed again, stays mapped.
                    self.mem.pages[head.idx()].set(pg::DIRTY);
                    self.lazyfree_forget(head);
                    break;
                }
                if self.mem.pages[head.idx()].refcount as i64 != self.folio_mapcount(head) + 1 {
                    break;
                }
                self.lazyfree_discard_one(head, h.mm, h.addr, h.slot, h.pmd);
                flushed.push((h.mm, h.addr, h.addr + len));
                continue;
            }
            if h.pmd {
                // A page-cache THP's pmd: zapped (file pmds are not split into ptes).
                self.zap_file_pmd(h.mm, h.slot);
                flushed.push((h.mm, h.addr, h.addr + len));
                continue;
            }
            let page = e.pfn();
            self.set_entry(h.slot.table, h.slot.idx, Entry::NONE);
            if e.has(pgtable::DIRTY) {
                if anon {
                    self.mem.pages[head.idx()].set(pg::DIRTY);
                } else {
                    self.folio_mark_dirty(head);
                }
            }
            if anon {
                let base = SwpEntry(self.mem.pages[head.idx()].private);
                let entry = base.add(page.0 - head.0);
                self.swap_duplicate(entry);
                let excl = self.mem.pages[page.idx()].test(pg::ANON_EXCLUSIVE);
                if excl {
                    self.mem.pages[page.idx()].clear(pg::ANON_EXCLUSIVE);
                }
                self.set_entry(h.slot.table, h.slot.idx, Entry::swp(entry, excl));
                self.add_rss_at(h.slot.table, h.mm, MmCounter::AnonPages, -1);
                self.add_swapents_at(h.slot.table, h.mm, 1);
            } else {
                let c = self.mm_counter(page);
                self.add_rss_at(h.slot.table, h.mm, c, -1);
            }
            self.remove_rmap_pte_batched(page, h.mm);
            self.mlock_vma_folio(head, &v, false);
            self.folio_put(head);
            flushed.push((h.mm, h.addr, h.addr + len));
        }
        for (mm, a, b) in flushed {
            let reach = self.pt_reach_of_addr(mm, a);
            for m in reach {
                self.flush_tlb_range(m, a, b);
            }
        }
        self.folio_mapcount(head) == 0
    }

    /// The mms that reach `mm`'s pte table at `addr` (seed 003), or just `mm`.
    fn pt_reach_of_addr(&self, mm: MmId, addr: u64) -> Vec<MmId> {
        if let Some(s) = self.pte_slot(mm, addr) {
            if let Some(r) = self.pt_reach.get(&s.table.0) {
                return r.clone();
            }
        }
        vec![mm]
    }

    /// MM_SWAPENTS of every mm that reaches `table` (seed 003), or `mm`'s.
    pub fn add_swapents_at(&mut self, table: Pfn, mm: MmId, n: i64) {
        if self.pt_sharing() {
            if let Some(r) = self.pt_reach.get(&table.0).cloned() {
                for m in r {
                    self.mm_mut(m).swapents += n;
                }
                return;
            }
        }
        self.mm_mut(mm).swapents += n;
    }
}
