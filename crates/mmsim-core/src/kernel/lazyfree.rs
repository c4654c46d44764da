//! MADV_FREE and the reclaim of what it frees (mm/madvise.c `madvise_free_single_vma`,
//! `madvise_free_pte_range`; mm/huge_memory.c `madvise_free_huge_pmd`; mm/swap.c
//! `folio_mark_lazyfree` / `lru_lazyfree`; mm/rmap.c `try_to_unmap_one`'s lazyfree case;
//! mm/vmscan.c `shrink_folio_list`'s PGLAZYFREED; fs/proc/task_mmu.c smaps' LazyFree).
//!
//! MADV_FREE cleans the ptes (young and dirty cleared) of the private anonymous pages of a
//! range and marks their folios lazyfree (PG_swapbacked cleared, `pg::LAZYFREE` here;
//! pglazyfree counts their pages). A write before reclaim dirties a pte again and the data
//! stays; reclaim (the direct reclaim of a failed allocation, `Kernel::alloc_pages`) discards
//! a lazyfree folio no mapping has written: its mappings are cleared (rss drops) and the
//! folio freed (pglazyfreed), so a later access faults in a zero page.
//!
//! Differs from Linux, deliberately:
//! - No LRU, and of the per-CPU LRU batches only lru_lazyfree, one for the machine rather
//!   than one per CPU (as if every task ran on one CPU, as the native runner pins its tasks):
//!   MADV_FREE queues a folio there with a reference (`folio_mark_lazyfree`), and it becomes
//!   lazyfree, pglazyfree counting it, when the batch drains (`lru_lazyfree`): when it holds
//!   PAGEVEC_SIZE folios or a large one, and at the `lru_add_drain` of MADV_FREE, of every
//!   zap (munmap, MADV_DONTNEED, exit), of mlock, of collapse and of reclaim; a snapshot
//!   drains it too, as the native runner's does (its mlock calls `lru_add_drain_all`). While
//!   queued, the batch's reference makes a write fault copy the folio rather than reuse it
//!   (`wp_can_reuse_anon_folio`). Linux's `lru_add` batch, whose folios are not yet on the
//!   LRU (a write fault drains it first), is not modelled. Reclaim takes lazyfree folios oldest
//!   marked first, after the clean page cache (`shrink_page_cache`), as the inactive file
//!   LRU would put them; a folio a mapping has accessed since (a young pte) gets a second
//!   round (its young bits cleared, it goes to the back), where Linux's
//!   `folio_check_references` keeps it once and activates it if used again.
//! - The rmap walk: a lazyfree folio remembers its linear page index (folio->index), and
//!   reclaim finds its mappings in the anonymous vmas of every mm whose vm_pgoff range holds
//!   it (every mm for a small folio, the folio's mms for a large one), in mm order, where
//!   Linux walks the anon_vma tree. Mappings are discarded in that order until one has
//!   written the folio (it then stays, swap-backed again), as `try_to_unmap_one` does.

use super::memory::Slot;
use super::mm::{vm, MmCounter, Vma};
use super::mm_types::pg;
use super::pgtable::{self, Entry};
use super::vmstat::VmEvent;
use super::{Kernel, MmId};
use crate::units::Pfn;

/// What reclaim has discarded of lazyfree folios, for a reference model to follow.
#[derive(Clone, Debug, Default)]
pub struct Lazyfree {
    /// Record the discards (`discards`) for a reference model to follow.
    pub record: bool,
    /// The ranges of each mm whose pages reclaim discarded (the mm read zeroes there now),
    /// in the order it discarded them, while `record`.
    pub discards: Vec<Discard>,
}

/// A mapping of a lazyfree folio that reclaim discarded: [addr, addr + len) of `mm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discard {
    pub mm: MmId,
    pub addr: u64,
    pub len: u64,
}

impl Kernel {
    /// `folio_maybe_mapped_shared`: a small folio mapped more than once; a large one mapped
    /// by a pmd and anything else, more times than it has pages, or by more than one mm.
    pub(super) fn folio_maybe_mapped_shared(&self, head: Pfn) -> bool {
        let mapcount = self.folio_mapcount(head);
        let h = self.mem.pages[head.idx()];
        if !h.test(pg::HEAD) {
            return mapcount > 1;
        }
        if mapcount <= 1 {
            return false;
        }
        if h.entire_mapcount > 0 || mapcount > self.folio_nr_pages(head) as i64 {
            return true;
        }
        self.folio_mms.get(&head.0).is_some_and(|v| v.len() > 1)
    }

    /// Whether `lru_lazyfree` would take a folio: anonymous, swap-backed (not yet lazyfree),
    /// not in the swap cache, evictable.
    fn lazyfree_candidate(&self, head: Pfn) -> bool {
        let p = self.mem.pages[head.idx()];
        p.test(pg::ANON)
            && !p.test(pg::LAZYFREE)
            && !p.test(pg::MLOCKED)
            && !p.test(pg::HUGETLB)
            && !p.test(pg::SWAPCACHE)
            && !p.test(pg::UNEVICTABLE)
    }

    /// `folio_mark_lazyfree`: queue a lazyfree candidate on the LRU on this CPU's
    /// lru_lazyfree batch (kernel/swap.rs).
    fn folio_mark_lazyfree(&mut self, head: Pfn) {
        if !self.lazyfree_candidate(head) || !self.mem.pages[head.idx()].test(pg::LRU) {
            return;
        }
        self.queue_lazyfree(head);
    }

    /// `lru_lazyfree` (the batch's move): a candidate leaves its list, loses PG_swapbacked
    /// (PG_active, PG_referenced), and joins the inactive file list's head; pglazyfree
    /// counts its pages.
    pub(super) fn lru_lazyfree(&mut self, head: Pfn) {
        if !self.lazyfree_candidate(head) {
            return;
        }
        self.lruvec_del_folio(head);
        let p = &mut self.mem.pages[head.idx()];
        p.clear(pg::ACTIVE | pg::REFERENCED);
        p.set(pg::LAZYFREE);
        self.lruvec_add_folio(head);
        let nr = self.folio_nr_pages(head) as i64;
        self.count_vm_events_folio(head, VmEvent::PgLazyFree, nr);
    }

    /// A lazyfree folio is written again (reclaim found a dirty pte or flag): swap-backed
    /// again (`folio_set_swapbacked`). Its LRU list follows when it is put back.
    pub(super) fn lazyfree_forget(&mut self, head: Pfn) {
        let on_lru = self.mem.pages[head.idx()].test(pg::LRU);
        if on_lru {
            self.lruvec_del_folio(head);
        }
        self.mem.pages[head.idx()].clear(pg::LAZYFREE);
        if on_lru {
            self.lruvec_add_folio(head);
        }
    }

    /// `madvise_free_single_vma` over [start, end) of the anonymous vma `v`: each present
    /// page mapped here (`madvise_free_pte_range`; a THP by `madvise_free_huge_pmd`) has its
    /// ptes made old and clean and its folio marked lazyfree. A THP or pte-mapped large folio
    /// the range covers in part is split first, unless other mms map it (then it is left).
    /// A folio flagged dirty is taken only when this mapping is its only one.
    pub(super) fn madvise_free_single_vma(&mut self, mm: MmId, v: &Vma, start: u64, end: u64) {
        self.lru_add_drain();
        let mut changed = false;
        let mut addr = start;
        while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut addr, end) {
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() && e.huge() && self.madvise_free_huge_pmd(mm, v, pmd, addr, next, &mut changed) {
                addr = next;
                continue;
            }
            let e = self.entry(pmd.table, pmd.idx);
            if e.present() && !e.huge() {
                self.madvise_free_pte_range(mm, v, e.pfn(), addr, next, &mut changed);
            }
            addr = next;
        }
        if changed {
            // tlb_finish_mmu: the cleaned entries leave the TLBs, so the next write through
            // them dirties them again.
            self.flush_tlb_range(mm, start, end);
        }
    }

    /// `madvise_free_huge_pmd`: true when the pmd was dealt with (the huge zero folio, a THP
    /// other mms map, or a THP the range covers whole: cleaned and marked lazyfree); false
    /// after splitting a THP the range covers in part (the pte walk takes its pages).
    fn madvise_free_huge_pmd(
        &mut self,
        mm: MmId,
        v: &Vma,
        pmd: Slot,
        addr: u64,
        next: u64,
        changed: &mut bool,
    ) -> bool {
        let e = self.entry(pmd.table, pmd.idx);
        if self.is_huge_zero_pmd(e) {
            return true;
        }
        let head = e.pfn();
        if self.folio_maybe_mapped_shared(head) {
            return true;
        }
        let haddr = self.geo.hpage_pmd_align_down(addr);
        if next - addr != self.geo.hpage_pmd_size() {
            if self.mem.pages[head.idx()].test(pg::MLOCKED) {
                // mmsim splits no mlocked folio (its mlock count): left as a failed split is.
                return true;
            }
            // split_folio: the pmd first (its only mapping), then the folio.
            self.__split_huge_pmd(mm, v, pmd, haddr);
            self.split_anon_folio(mm, head, v.linear_page_index(haddr, self.geo));
            return false;
        }
        self.mem.pages[head.idx()].clear(pg::DIRTY);
        if e.has(pgtable::ACCESSED) || e.has(pgtable::DIRTY) {
            self.set_entry(pmd.table, pmd.idx, e.without(pgtable::ACCESSED | pgtable::DIRTY));
            *changed = true;
        }
        self.folio_mark_lazyfree(head);
        true
    }

    /// `madvise_free_pte_range` over the ptes of [addr, end) in `table`.
    fn madvise_free_pte_range(&mut self, mm: MmId, v: &Vma, table: Pfn, addr: u64, end: u64, changed: &mut bool) {
        self.for_each_pte_folio(mm, v, table, addr, end, |k, idx, head, nr| {
            if k.mem.pages[head.idx()].test(pg::DIRTY) {
                // A large folio here is mapped whole: mapped as many times as it has pages
                // means by this mapping only (a small one: mapped once).
                if k.folio_mapcount(head) != k.folio_nr_pages(head) as i64 {
                    return;
                }
                k.mem.pages[head.idx()].clear(pg::DIRTY);
            }
            for i in 0..nr as usize {
                let pe = k.entry(table, idx + i);
                if pe.has(pgtable::ACCESSED) || pe.has(pgtable::DIRTY) {
                    k.set_entry(table, idx + i, pe.without(pgtable::ACCESSED | pgtable::DIRTY));
                    *changed = true;
                }
            }
            k.folio_mark_lazyfree(head);
        });
    }

    /// The walk MADV_FREE and MADV_COLD share: over the present ptes of [addr, end) in
    /// `table`, `f(kernel, pte index, folio head, ptes)` for each folio this mapping maps
    /// whole (`pte_batch_or_split`: one mapped here in part is split first; one left whole
    /// but mapped in part is skipped).
    pub(super) fn for_each_pte_folio(
        &mut self,
        mm: MmId,
        v: &Vma,
        table: Pfn,
        addr: u64,
        end: u64,
        mut f: impl FnMut(&mut Self, usize, Pfn, u64),
    ) {
        let ps = self.geo.page_size();
        let mut a = addr;
        while a < end {
            let idx = self.geo.table_index(a, 0);
            let e = self.entry(table, idx);
            if !e.present() || e.special() {
                a += ps;
                continue;
            }
            let head = self.head_of(e.pfn());
            let nr = match self.pte_batch_or_split(mm, v, table, a, end) {
                None => continue,
                Some((nr, false)) => {
                    a += nr * ps;
                    continue;
                }
                Some((nr, true)) => nr,
            };
            f(self, idx, head, nr);
            a += nr * ps;
        }
    }

    /// The ptes of `table` from `a` (below `end`) that map the folio the one at `a` maps, and
    /// whether they map it whole (a small folio: 1, true), as MADV_FREE's and MADV_COLD's
    /// walks take a large folio: one mapped here only in part is split (`split_folio`) and
    /// None is returned (the caller looks at the pte again); one others map, mlocked (which
    /// mmsim does not split) or not anonymous is left whole, its ptes here to be skipped.
    pub(super) fn pte_batch_or_split(
        &mut self,
        mm: MmId,
        v: &Vma,
        table: Pfn,
        a: u64,
        end: u64,
    ) -> Option<(u64, bool)> {
        let idx = self.geo.table_index(a, 0);
        let page = self.entry(table, idx).pfn();
        let head = self.head_of(page);
        let folio_nr = self.folio_nr_pages(head);
        if folio_nr == 1 {
            return Some((1, true));
        }
        let nr = self.folio_pte_batch(table, idx, page, head, (end - a) / self.geo.page_size());
        if nr == folio_nr {
            return Some((nr, true));
        }
        let p = self.mem.pages[head.idx()];
        if self.folio_maybe_mapped_shared(head) || !p.test(pg::ANON) || p.test(pg::MLOCKED) {
            return Some((nr, false));
        }
        let index = v.linear_page_index(a, self.geo) - (page.0 - head.0) as u64;
        self.split_anon_folio(mm, head, index);
        None
    }

    /// `folio_pte_batch`: the ptes from `idx` on (at most `max`, within the table) that map
    /// the consecutive pages of `head`'s folio from `page` on.
    pub(super) fn folio_pte_batch(&self, table: Pfn, idx: usize, page: Pfn, head: Pfn, max: u64) -> u64 {
        let last = head.0 as u64 + self.folio_nr_pages(head);
        let room = (self.geo.ptrs_per_table() - idx) as u64;
        let mut n = 0;
        while n < max.min(room) && (page.0 as u64 + n) < last {
            let e = self.entry(table, idx + n as usize);
            if !e.present() || e.special() || e.pfn().0 != page.0 + n as u32 {
                break;
            }
            n += 1;
        }
        n.max(1)
    }

    /// `split_folio` of an anonymous large folio that only mm `mm` maps, by ptes (`index`: its
    /// first page's linear page index): it leaves the deferred split queue and becomes base
    /// pages (kernel/huge_memory.rs `split_folio`), and, as `remap_page` does with
    /// RMP_USE_SHARED_ZEROPAGE (Linux >= 6.12), each page that holds only zeroes and is not
    /// mlocked is mapped by the shared zero page instead and freed (rss down).
    pub(super) fn split_anon_folio(&mut self, mm: MmId, head: Pfn, index: u64) {
        if self.mem.pages[head.idx()].test(pg::DEFERRED) {
            self.deferred_split.retain(|&h| h != head.0);
        }
        let _ = index;
        let maps: Vec<_> = self.rmap_walk(head).into_iter().filter(|m| m.mm == mm).collect();
        if !self.split_folio(head) {
            return;
        }
        let mut flushed: Option<(u64, u64)> = None;
        for m in maps.iter().filter(|m| !m.pmd) {
            let e = self.entry(m.slot.table, m.slot.idx);
            let page = e.pfn();
            let Some(v) = self.mm(mm).vma_lookup(m.addr).cloned() else { continue };
            let zero = self.page_content(page).is_none_or(|c| c.is_zero());
            if !zero || v.flags & vm::LOCKED != 0 || self.mem.pages[page.idx()].test(pg::MLOCKED) {
                continue;
            }
            // try_to_map_unused_to_zeropage: a special pte of the vma's protection.
            let z = Entry::new(self.zero_pfn, super::memory::vm_page_prot(&v) | pgtable::SPECIAL);
            self.set_entry(m.slot.table, m.slot.idx, z);
            self.add_rss_at(m.slot.table, mm, MmCounter::AnonPages, -1);
            self.remove_rmap_pte_batched(page, mm);
            self.folio_put(page);
            let (a, b) = flushed.map_or((m.addr, m.addr), |f| f);
            flushed = Some((a.min(m.addr), b.max(m.addr + self.geo.page_size())));
        }
        if let Some((a, b)) = flushed {
            self.flush_tlb_range(mm, a, b);
        }
        self.sync_items();
    }

    /// `try_to_unmap_one`'s discard of one clean mapping of lazyfree folio `head`.
    pub(super) fn lazyfree_discard_one(&mut self, head: Pfn, mm: MmId, addr: u64, slot: Slot, pmd: bool) {
        let len = if pmd { self.geo.hpage_pmd_size() } else { self.geo.page_size() };
        let e = self.entry(slot.table, slot.idx);
        self.set_entry(slot.table, slot.idx, Entry::NONE);
        if pmd {
            // __discard_anon_folio_pmd_locked: the deposited table goes too.
            self.zap_deposited_table(mm, slot);
            self.add_rss_at(slot.table, mm, MmCounter::AnonPages, -(self.geo.hpage_pmd_nr() as i64));
            self.remove_rmap_pmd(head, mm);
        } else {
            self.add_rss_at(slot.table, mm, MmCounter::AnonPages, -1);
            self.remove_rmap_pte_batched(e.pfn(), mm);
        }
        let reach = self.pt_reach.get(&slot.table.0).cloned().unwrap_or_else(|| vec![mm]);
        for &m in &reach {
            if self.lazyfree.record {
                self.lazyfree.discards.push(Discard { mm: m, addr, len });
            }
        }
        self.folio_put(head);
    }

    /// smaps' LazyFree of `mm`, in pages: its mapped pages of lazyfree folios that neither
    /// their pte (pmd) nor the folio says were written.
    pub fn lazyfree_pages(&self, mm: MmId) -> u64 {
        let mut n = 0;
        for v in self.mm(mm).vmas.values().filter(|v| v.is_anonymous() && v.flags & vm::HUGETLB == 0) {
            let mut a = v.start;
            while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut a, v.end) {
                let pe = self.entry(pmd.table, pmd.idx);
                if pe.present() && pe.huge() {
                    let p = self.mem.pages[pe.pfn().idx()];
                    if !self.is_huge_zero_pmd(pe)
                        && p.test(pg::LAZYFREE)
                        && !p.test(pg::DIRTY)
                        && !pe.has(pgtable::DIRTY)
                    {
                        n += (next - a) >> self.geo.page_shift;
                    }
                } else if pe.present() {
                    let mut x = a;
                    while x < next {
                        let e = self.entry(pe.pfn(), self.geo.table_index(x, 0));
                        if e.present() && !e.special() && !e.has(pgtable::DIRTY) {
                            let h = self.mem.pages[self.head_of(e.pfn()).idx()];
                            if h.test(pg::LAZYFREE) && !h.test(pg::DIRTY) {
                                n += 1;
                            }
                        }
                        x += self.geo.page_size();
                    }
                }
                a = next;
            }
        }
        n
    }

    /// Take the discards recorded since the last call.
    pub fn take_lazyfree_discards(&mut self) -> Vec<Discard> {
        std::mem::take(&mut self.lazyfree.discards)
    }
}
