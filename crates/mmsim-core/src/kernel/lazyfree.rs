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

use std::collections::BTreeMap;

use super::memory::Slot;
use super::mm::{vm, MmCounter, Vma};
use super::mm_types::pg;
use super::pgtable::{self, Entry};
use super::vmstat::VmEvent;
use super::{Kernel, MmId};
use crate::fasthash::FastMap;
use crate::units::Pfn;

/// The lazyfree folios, oldest first, and what reclaim has discarded of them.
#[derive(Clone, Debug, Default)]
pub struct Lazyfree {
    /// (age, subpage) -> head frame: the order reclaim takes them in (a folio split while
    /// lazyfree leaves its pages at its place, in page order).
    order: BTreeMap<(u64, u32), u32>,
    /// Head frame -> its key in `order` and the linear page index of its first page.
    folios: FastMap<u32, ((u64, u32), u64)>,
    next_age: u64,
    /// Record the discards (`discards`) for a reference model to follow.
    pub record: bool,
    /// The ranges of each mm whose pages reclaim discarded (the mm read zeroes there now),
    /// in the order it discarded them, while `record`.
    pub discards: Vec<Discard>,
    /// The lru_lazyfree folio batch (`cpu_fbatches.lru_lazyfree`): head frames queued by
    /// MADV_FREE, each holding a reference, with their linear page index.
    pub(super) batch: Vec<(Pfn, u64)>,
}

/// `PAGEVEC_SIZE` (include/linux/pagevec.h): a folio batch drains when it holds this many.
const PAGEVEC_SIZE: usize = 31;

/// A mapping of a lazyfree folio that reclaim discarded: [addr, addr + len) of `mm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discard {
    pub mm: MmId,
    pub addr: u64,
    pub len: u64,
}

/// One mapping of a folio found by the rmap walk.
#[derive(Clone, Copy, Debug)]
struct Mapping {
    mm: MmId,
    addr: u64,
    slot: Slot,
    /// A huge pmd mapping the whole folio (else a pte mapping one page).
    pmd: bool,
}

impl Lazyfree {
    /// Lazyfree folios (head frames), oldest first.
    pub fn heads(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.values().copied()
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The linear page index of a lazyfree folio's first page.
    pub fn index(&self, head: u32) -> Option<u64> {
        self.folios.get(&head).map(|&(_, i)| i)
    }

    fn insert(&mut self, head: u32, key: (u64, u32), index: u64) {
        self.order.insert(key, head);
        self.folios.insert(head, (key, index));
    }

    fn remove(&mut self, head: u32) -> Option<((u64, u32), u64)> {
        let e = self.folios.remove(&head)?;
        self.order.remove(&e.0);
        Some(e)
    }

    fn new_key(&mut self) -> (u64, u32) {
        self.next_age += 1;
        (self.next_age, 0)
    }
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

    /// Whether `lru_lazyfree` would take a folio: anonymous, swap-backed (not yet lazyfree)
    /// and evictable (hugetlb folios are on no LRU).
    fn lazyfree_candidate(&self, head: Pfn) -> bool {
        let p = self.mem.pages[head.idx()];
        p.test(pg::ANON) && !p.test(pg::LAZYFREE) && !p.test(pg::MLOCKED) && !p.test(pg::HUGETLB)
    }

    /// `folio_mark_lazyfree`: queue a lazyfree candidate on the lru_lazyfree batch, which
    /// takes a reference on it (`folio_batch_add_and_move`: a full batch, or a large folio,
    /// drains at once). `index`: its first page's linear index.
    fn folio_mark_lazyfree(&mut self, head: Pfn, index: u64) {
        if !self.lazyfree_candidate(head) {
            return;
        }
        self.folio_get(head);
        self.lazyfree.batch.push((head, index));
        if self.lazyfree.batch.len() >= PAGEVEC_SIZE || self.folio_nr_pages(head) > 1 {
            self.lru_add_drain();
        }
    }

    /// `lru_lazyfree`: a queued folio that is still a candidate becomes lazyfree (PG_swapbacked
    /// cleared; pglazyfree counts its pages). One queued twice counts once.
    fn lru_lazyfree(&mut self, head: Pfn, index: u64) {
        if !self.lazyfree_candidate(head) {
            return;
        }
        self.mem.pages[head.idx()].set(pg::LAZYFREE);
        let key = self.lazyfree.new_key();
        self.lazyfree.insert(head.0, key, index);
        let nr = self.folio_nr_pages(head) as i64;
        self.stat.count_n(VmEvent::PgLazyFree, nr);
    }

    /// `lru_add_drain` (and `lru_add_drain_all`: mmsim has one batch): the lru_lazyfree batch
    /// moves (`folio_batch_move_lru`: `lru_lazyfree` on each folio, then their references
    /// put, which frees a folio nothing else holds).
    pub fn lru_add_drain(&mut self) {
        if self.lazyfree.batch.is_empty() {
            return;
        }
        let mut batch = std::mem::take(&mut self.lazyfree.batch);
        for &(head, index) in &batch {
            self.lru_lazyfree(head, index);
        }
        for &(head, _) in &batch {
            self.folio_put(head);
        }
        batch.clear();
        self.lazyfree.batch = batch;
    }

    /// The folios the lru_lazyfree batch holds a reference on (a folio once per queueing).
    pub(super) fn lazyfree_batch(&self) -> impl Iterator<Item = Pfn> + '_ {
        self.lazyfree.batch.iter().map(|&(h, _)| h)
    }

    /// A lazyfree folio is freed (or swap-backed again): it leaves the list.
    pub(super) fn lazyfree_forget(&mut self, head: Pfn) {
        self.mem.pages[head.idx()].clear(pg::LAZYFREE);
        self.lazyfree.remove(head.0);
    }

    /// A lazyfree folio is being split: it leaves the list, and `lazyfree_split_done` puts
    /// the pages that stay at its place. Returns its key and index.
    pub(super) fn lazyfree_split_begin(&mut self, head: Pfn) -> Option<((u64, u32), u64)> {
        if !self.mem.pages[head.idx()].test(pg::LAZYFREE) {
            return None;
        }
        self.mem.pages[head.idx()].clear(pg::LAZYFREE);
        self.lazyfree.remove(head.0)
    }

    /// The pages of a split lazyfree folio that are still allocated are lazyfree folios of
    /// their own (the split copies PG_swapbacked), in its place in the list.
    pub(super) fn lazyfree_split_done(&mut self, head: Pfn, n: u32, was: ((u64, u32), u64)) {
        let ((age, _), index) = was;
        for i in 0..n {
            let p = Pfn(head.0 + i);
            if self.mem.pages[p.idx()].refcount > 0 {
                self.mem.pages[p.idx()].set(pg::LAZYFREE);
                self.lazyfree.insert(p.0, (age, i), index + i as u64);
            }
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
        let index = v.linear_page_index(haddr, self.geo);
        self.folio_mark_lazyfree(head, index);
        true
    }

    /// `madvise_free_pte_range` over the ptes of [addr, end) in `table`.
    fn madvise_free_pte_range(&mut self, mm: MmId, v: &Vma, table: Pfn, addr: u64, end: u64, changed: &mut bool) {
        let ps = self.geo.page_size();
        let mut a = addr;
        while a < end {
            let idx = self.geo.table_index(a, 0);
            let e = self.entry(table, idx);
            if !e.present() || e.special() {
                a += ps;
                continue;
            }
            let page = e.pfn();
            let head = self.head_of(page);
            let folio_nr = self.folio_nr_pages(head);
            let mut nr = 1;
            if folio_nr > 1 {
                nr = self.folio_pte_batch(table, idx, page, head, (end - a) / ps);
                if nr < folio_nr {
                    // Not mapped here whole: split it, unless others map it (or it is mlocked,
                    // which mmsim does not split); either way its ptes here are skipped.
                    if self.folio_maybe_mapped_shared(head) || self.mem.pages[head.idx()].test(pg::MLOCKED) {
                        a += nr * ps;
                        continue;
                    }
                    let index = v.linear_page_index(a, self.geo) - (page.0 - head.0) as u64;
                    self.split_anon_folio(mm, head, index);
                    continue;
                }
            }
            if self.mem.pages[head.idx()].test(pg::DIRTY) {
                // A large folio here is mapped whole: mapped as many times as it has pages
                // means by this mapping only (a small one: mapped once).
                if self.folio_mapcount(head) != folio_nr as i64 {
                    a += nr * ps;
                    continue;
                }
                self.mem.pages[head.idx()].clear(pg::DIRTY);
            }
            for k in 0..nr as usize {
                let pe = self.entry(table, idx + k);
                if pe.has(pgtable::ACCESSED) || pe.has(pgtable::DIRTY) {
                    self.set_entry(table, idx + k, pe.without(pgtable::ACCESSED | pgtable::DIRTY));
                    *changed = true;
                }
            }
            let index = v.linear_page_index(a, self.geo) - (page.0 - head.0) as u64;
            self.folio_mark_lazyfree(head, index);
            a += nr * ps;
        }
    }

    /// `folio_pte_batch`: the ptes from `idx` on (at most `max`, within the table) that map
    /// the consecutive pages of `head`'s folio from `page` on.
    fn folio_pte_batch(&self, table: Pfn, idx: usize, page: Pfn, head: Pfn, max: u64) -> u64 {
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
    fn split_anon_folio(&mut self, mm: MmId, head: Pfn, index: u64) {
        if self.mem.pages[head.idx()].test(pg::DEFERRED) {
            self.deferred_split.retain(|&h| h != head.0);
        }
        let maps = self.anon_rmap(head, index, vec![mm]);
        self.split_folio(head);
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

    /// The mappings of a lazyfree folio (`rmap_walk_anon`): see `anon_rmap`, over every mm
    /// for a small folio, the folio's mms for a large one.
    fn lazyfree_rmap(&self, head: Pfn) -> Vec<Mapping> {
        let Some(index) = self.lazyfree.index(head.0) else { return Vec::new() };
        let mms: Vec<MmId> = if self.folio_nr_pages(head) > 1 {
            self.folio_mms.get(&head.0).map(|v| v.iter().map(|e| e.0).collect()).unwrap_or_default()
        } else {
            (0..self.mms.len() as MmId).filter(|&m| self.mms[m as usize].is_some()).collect()
        };
        self.anon_rmap(head, index, mms)
    }

    /// The mappings of the anonymous folio `head`, whose first page has linear page index
    /// `index`, in `mms` (in mm order): in each, the anonymous vmas whose vm_pgoff range holds
    /// the folio's pages, and there each pte mapping one of its pages or pmd mapping it
    /// whole. A PTE table several mms share (seed 003) is found once.
    fn anon_rmap(&self, head: Pfn, index: u64, mut mms: Vec<MmId>) -> Vec<Mapping> {
        let nr = self.folio_nr_pages(head);
        let shift = self.geo.page_shift;
        mms.sort_unstable();
        let mut out: Vec<Mapping> = Vec::new();
        for m in mms {
            for v in self.mm(m).vmas.values().filter(|v| v.is_anonymous() && v.flags & vm::HUGETLB == 0) {
                let pages = v.len() >> shift;
                let (lo, hi) = (index.max(v.pgoff), (index + nr).min(v.pgoff + pages));
                let mut i = lo;
                while let Some((addr, pmd, pe)) = self.pvmw_next_pmd(m, v, &mut i, hi) {
                    if pe.present() && pe.huge() {
                        let haddr = self.geo.hpage_pmd_align_down(addr);
                        if pe.pfn() == head && haddr == addr {
                            out.push(Mapping { mm: m, addr, slot: pmd, pmd: true });
                        }
                        i += (haddr + self.geo.hpage_pmd_size() - addr) >> shift;
                        continue;
                    }
                    if pe.present() {
                        let slot = Slot { table: pe.pfn(), idx: self.geo.table_index(addr, 0) };
                        let e = self.entry(slot.table, slot.idx);
                        let dup = || out.iter().any(|x| !x.pmd && x.slot == slot);
                        if e.present() && !e.special() && e.pfn().0 as u64 == head.0 as u64 + (i - index) && !dup() {
                            out.push(Mapping { mm: m, addr, slot, pmd: false });
                        }
                    }
                    i += 1;
                }
            }
        }
        out
    }

    /// The mappings reclaim's rmap walk finds of a lazyfree folio (the invariant checks).
    pub(super) fn lazyfree_rmap_count(&self, head: Pfn) -> usize {
        self.lazyfree_rmap(head).len()
    }

    /// Move a lazyfree folio to the back of the list (the young ones get a second round).
    fn lazyfree_rotate(&mut self, head: Pfn) {
        if let Some((_, index)) = self.lazyfree.remove(head.0) {
            let key = self.lazyfree.new_key();
            self.lazyfree.insert(head.0, key, index);
        }
    }

    /// Reclaim of lazyfree folios (`shrink_folio_list` on them), oldest first, until `want`
    /// pages were freed or each was looked at once. A folio some mapping has accessed since it
    /// was last looked at goes to the back, its young bits cleared (`folio_referenced`); an
    /// mlocked one stays. Otherwise `try_to_unmap` discards its mappings one by one (each
    /// mm's rss drops, `Discard` recorded) until one has written it (a dirty pte, or the folio
    /// flagged dirty): that one stays and the folio is swap-backed again. A folio all of
    /// whose mappings went is freed (pglazyfreed). Returns the pages freed.
    pub fn shrink_lazyfree(&mut self, want: u64) -> u64 {
        let mut freed = 0;
        let mut left = self.lazyfree.len();
        while freed < want && left > 0 {
            left -= 1;
            let Some(head) = self.lazyfree.heads().next().map(Pfn) else { break };
            if self.mem.pages[head.idx()].test(pg::MLOCKED) {
                self.lazyfree_rotate(head);
                continue;
            }
            let maps = self.lazyfree_rmap(head);
            let young = maps.iter().filter(|m| self.entry(m.slot.table, m.slot.idx).has(pgtable::ACCESSED)).count();
            if young > 0 {
                for m in &maps {
                    let e = self.entry(m.slot.table, m.slot.idx);
                    if e.has(pgtable::ACCESSED) {
                        self.set_entry(m.slot.table, m.slot.idx, e.without(pgtable::ACCESSED));
                        let len = if m.pmd { self.geo.hpage_pmd_size() } else { self.geo.page_size() };
                        self.flush_tlb_range(m.mm, m.addr, m.addr + len);
                    }
                }
                self.lazyfree_rotate(head);
                continue;
            }
            let nr = self.folio_nr_pages(head);
            let large = nr > 1;
            let mut all = !maps.is_empty();
            let mut i = 0;
            while i < maps.len() {
                // One mm's mappings at a time, as try_to_unmap_one unmaps a large folio's ptes
                // in a vma in one batch (dirty if any of them is).
                let mm = maps[i].mm;
                let j = i + maps[i..].iter().take_while(|m| m.mm == mm).count();
                let group = &maps[i..j];
                i = j;
                if group.iter().any(|m| self.entry(m.slot.table, m.slot.idx).has(pgtable::DIRTY)) {
                    self.mem.pages[head.idx()].set(pg::DIRTY);
                }
                if self.mem.pages[head.idx()].test(pg::DIRTY) {
                    // Written again: remapped, swap-backed (no longer lazyfree).
                    self.lazyfree_forget(head);
                    all = false;
                    break;
                }
                if self.mem.pages[head.idx()].refcount as i64 != self.folio_mapcount(head) {
                    // Another reference (a fault copying it): left as it is, for later.
                    self.lazyfree_rotate(head);
                    all = false;
                    break;
                }
                for m in group {
                    self.lazyfree_discard(head, m);
                }
                if large && self.mem.pages[head.idx()].refcount > 0 {
                    self.maybe_deferred_split(head);
                }
            }
            if all {
                // The last mapping's folio_put freed it (and took it off the list).
                freed += nr;
                self.stat.count_n(VmEvent::PgLazyFreed, nr as i64);
            }
        }
        freed
    }

    /// `try_to_unmap_one`'s discard of one clean mapping of lazyfree folio `head`.
    fn lazyfree_discard(&mut self, head: Pfn, m: &Mapping) {
        let len = if m.pmd { self.geo.hpage_pmd_size() } else { self.geo.page_size() };
        let e = self.entry(m.slot.table, m.slot.idx);
        self.set_entry(m.slot.table, m.slot.idx, Entry::NONE);
        if m.pmd {
            // __discard_anon_folio_pmd_locked: the deposited table goes too.
            self.zap_deposited_table(m.mm, m.slot);
            self.add_rss_at(m.slot.table, m.mm, MmCounter::AnonPages, -(self.geo.hpage_pmd_nr() as i64));
            self.remove_rmap_pmd(head, m.mm);
        } else {
            self.add_rss_at(m.slot.table, m.mm, MmCounter::AnonPages, -1);
            self.remove_rmap_pte_batched(e.pfn(), m.mm);
        }
        let reach = self.pt_reach.get(&m.slot.table.0).cloned().unwrap_or_else(|| vec![m.mm]);
        for &mm in &reach {
            self.flush_tlb_range(mm, m.addr, m.addr + len);
            if self.lazyfree.record {
                self.lazyfree.discards.push(Discard { mm, addr: m.addr, len });
            }
        }
        self.folio_put(head);
    }

    /// smaps' LazyFree of `mm`, in pages: its mapped pages of lazyfree folios that neither
    /// their pte (pmd) nor the folio says were written.
    pub fn lazyfree_pages(&self, mm: MmId) -> u64 {
        if self.lazyfree.is_empty() {
            return 0;
        }
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
