//! The fate of each isolated folio (mm/vmscan.c's `shrink_folio_list` and what it calls):
//! `folio_check_references`, swap allocation and THP splitting, `try_to_unmap`, `pageout`
//! (swap writeback; regular files' dirty folios are never written by reclaim) and
//! `__remove_mapping` into a shadow entry.

use super::mm::vm;
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::vmscan::*;
use super::vmstat::{VmEvent, VmItem};
use super::Kernel;
use crate::units::Pfn;

impl Kernel {
    /// `folio_check_references`.
    pub(super) fn folio_check_references(&mut self, f: Pfn, sc: &ScanControl) -> FolioRef {
        let (refs, flags) = self.folio_referenced(f, sc.target);
        if flags & vm::LOCKED != 0 {
            return FolioRef::Activate;
        }
        let was_ref = self.mem.pages[f.idx()].test(pg::REFERENCED);
        self.mem.pages[f.idx()].clear(pg::REFERENCED);
        if refs > 0 {
            self.mem.pages[f.idx()].set(pg::REFERENCED);
            if was_ref || refs > 1 {
                return FolioRef::Activate;
            }
            if flags & vm::EXEC != 0 && self.folio_is_file_lru(f) {
                return FolioRef::Activate;
            }
            return FolioRef::Keep;
        }
        if was_ref && self.folio_is_file_lru(f) {
            return FolioRef::ReclaimClean;
        }
        FolioRef::Reclaim
    }

    /// `shrink_folio_list`: decide each isolated folio's fate, oldest first: free it (clean
    /// page cache, a swap-cache folio written before, a clean lazyfree folio), start its
    /// write to swap and keep it, keep it, or activate it. Returns the pages reclaimed and
    /// the folios that stay (to go back to the LRU).
    pub(super) fn shrink_folio_list(
        &mut self,
        mut list: Vec<Pfn>,
        sc: &mut ScanControl,
        stat: &mut ReclaimStat,
        ignore_references: bool,
        memcg: u16,
    ) -> (u64, Vec<Pfn>) {
        let mut ret = Vec::new();
        let mut reclaimed = 0;
        // Oldest first: the list holds them in isolation order.
        list.reverse();
        while let Some(f) = list.pop() {
            let mut n = self.folio_nr_pages(f);
            sc.nr_scanned += n;
            let outcome = self.shrink_one_folio(f, &mut n, sc, stat, ignore_references, &mut list);
            match outcome {
                Outcome::Free => {
                    reclaimed += n;
                }
                Outcome::Keep => ret.push(f),
                Outcome::Retry => {}
                Outcome::Activate => {
                    if self.mem.pages[f.idx()].test(pg::SWAPCACHE)
                        && (self.mem_cgroup_swap_full(f) || self.mem.pages[f.idx()].test(pg::MLOCKED))
                    {
                        self.folio_free_swap(f);
                    }
                    if !self.mem.pages[f.idx()].test(pg::MLOCKED) {
                        self.mem.pages[f.idx()].set(pg::ACTIVE);
                        let file = self.folio_is_file_lru(f) as usize;
                        let nn = self.folio_nr_pages(f);
                        stat.nr_activate[file] += nn;
                        let m = self.mem.pages[f.idx()].memcg;
                        self.count_memcg_events(m, VmEvent::PgActivate, nn as i64);
                    }
                    ret.push(f);
                }
            }
        }
        let act = stat.nr_activate[0] + stat.nr_activate[1];
        if act > 0 {
            self.stat.count_n(VmEvent::PgActivate, act as i64);
        }
        let _ = memcg;
        (reclaimed, ret)
    }

    /// One folio of `shrink_folio_list`; `n` its pages (a split makes it 1); a split's other
    /// pieces join `list`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn shrink_one_folio(
        &mut self,
        f: Pfn,
        n: &mut u64,
        sc: &mut ScanControl,
        stat: &mut ReclaimStat,
        ignore_references: bool,
        list: &mut Vec<Pfn>,
    ) -> Outcome {
        if !self.folio_evictable(f) {
            return Outcome::Activate;
        }
        let mapped = self.folio_mapcount(f) > 0;
        if !sc.may_unmap && mapped {
            return Outcome::Keep;
        }
        let p = self.mem.pages[f.idx()];
        let file_lru = self.folio_is_file_lru(f);
        let anon = p.test(pg::ANON);
        // folio_check_dirty_writeback: anonymous (and lazyfree) folios count as neither.
        let (dirty, wb) = if anon || !file_lru { (false, false) } else { (p.test(pg::DIRTY), p.test(pg::WRITEBACK)) };
        if dirty || wb {
            stat.nr_dirty += *n;
        }
        if dirty && !wb {
            stat.nr_unqueued_dirty += *n;
        }
        if wb && p.test(pg::RECLAIM) {
            stat.nr_congested += *n;
        }
        if p.test(pg::WRITEBACK) {
            let kswapd = sc.reclaimer == Reclaimer::Kswapd;
            let sane = self.writeback_throttling_sane(sc);
            if kswapd && p.test(pg::RECLAIM) && self.pgdat_writeback {
                stat.nr_immediate += *n;
                return Outcome::Activate;
            }
            if sane || !p.test(pg::RECLAIM) {
                self.mem.pages[f.idx()].set(pg::RECLAIM);
                stat.nr_writeback += *n;
                return Outcome::Activate;
            }
            // cgroup v1's memcg reclaim waits for the write, then looks at the folio again.
            self.folio_wait_writeback(f);
            list.push(f);
            sc.nr_scanned -= *n;
            return Outcome::Retry;
        }
        let refs = if ignore_references { FolioRef::Reclaim } else { self.folio_check_references(f, sc) };
        match refs {
            FolioRef::Activate => return Outcome::Activate,
            FolioRef::Keep => {
                stat.nr_ref_keep += *n;
                return Outcome::Keep;
            }
            _ => {}
        }
        // Anonymous folios without a swap slot get one (a large one whole, or split).
        if anon && self.folio_test_swapbacked(f) && !self.mem.pages[f.idx()].test(pg::SWAPCACHE) {
            if sc.gfp & gfp::IO == 0 {
                return Outcome::Keep;
            }
            if self.folio_alloc_swap(f).is_err() {
                if *n == 1 {
                    return Outcome::Activate;
                }
                let pmd = *n >= self.geo.hpage_pmd_nr();
                if !self.split_folio_to_list(f, Some(list)) {
                    return Outcome::Activate;
                }
                if pmd {
                    self.count_vm_events_folio(f, VmEvent::ThpSwpoutFallback, 1);
                }
                sc.nr_scanned -= *n - 1;
                *n = 1;
                if self.folio_alloc_swap(f).is_err() {
                    return Outcome::Activate;
                }
            }
            // folio_mark_dirty: the write happens even if no pte was dirty.
            self.mem.pages[f.idx()].set(pg::DIRTY);
        }
        if self.folio_mapcount(f) > 0 {
            let lazy_before = self.mem.pages[f.idx()].test(pg::LAZYFREE);
            if !self.try_to_unmap(f) {
                stat.nr_unmap_fail += *n;
                if lazy_before && !self.mem.pages[f.idx()].test(pg::LAZYFREE) {
                    stat.nr_lazyfree_fail += *n;
                }
                return Outcome::Activate;
            }
        }
        let p = self.mem.pages[f.idx()];
        if p.test(pg::DIRTY) && !(anon && p.test(pg::LAZYFREE)) {
            if file_lru && (sc.reclaimer != Reclaimer::Kswapd || !p.test(pg::RECLAIM) || !self.pgdat_dirty) {
                self.stat.mod_item(VmItem::NrVmscanImmediateReclaim, *n as i64);
                self.mem.pages[f.idx()].set(pg::RECLAIM);
                return Outcome::Activate;
            }
            if refs == FolioRef::ReclaimClean || !sc.may_writepage {
                return Outcome::Keep;
            }
            match self.pageout(f, stat) {
                PageoutResult::Keep => return Outcome::Keep,
                PageoutResult::Activate => return Outcome::Activate,
                PageoutResult::Success => {
                    stat.nr_pageout += *n;
                    if self.mem.pages[f.idx()].test(pg::WRITEBACK) || self.mem.pages[f.idx()].test(pg::DIRTY) {
                        return Outcome::Keep;
                    }
                }
                PageoutResult::Clean => {}
            }
        }
        if anon && self.mem.pages[f.idx()].test(pg::LAZYFREE) {
            // Discarded by try_to_unmap if clean and unused; freeze the reference.
            if self.mem.pages[f.idx()].refcount != 1 || self.folio_mapcount(f) > 0 {
                return Outcome::Keep;
            }
            self.count_vm_events_folio(f, VmEvent::PgLazyFreed, *n as i64);
            self.lazyfree_forget(f);
            self.folio_put(f);
            return Outcome::Free;
        }
        if self.remove_mapping(f, true, sc.target) {
            return Outcome::Free;
        }
        Outcome::Keep
    }

    /// `writeback_throttling_sane`: global reclaim, or memcg reclaim on cgroup v2.
    pub(super) fn writeback_throttling_sane(&self, sc: &ScanControl) -> bool {
        sc.target.is_none() || self.knobs.reclaim.cgroup_memory == super::knobs::CgroupMemory::V2
    }

    /// `pageout`: write a dirty swap-backed folio (anonymous to swap; shmem to swap through
    /// `shmem_writeout`); page-cache folios of regular files are never written here.
    pub(super) fn pageout(&mut self, f: Pfn, _stat: &mut ReclaimStat) -> PageoutResult {
        let nr = self.folio_nr_pages(f) as i64;
        let expected = 1
            + if self.mem.pages[f.idx()].test(pg::SWAPCACHE) { nr } else { 0 }
            + if self.mem.pages[f.idx()].mapping != super::mm_types::NIL { nr } else { 0 };
        if self.mem.pages[f.idx()].refcount as i64 != expected {
            return PageoutResult::Keep;
        }
        let p = self.mem.pages[f.idx()];
        let shmem = p.test(pg::SHMEM) && p.mapping != super::mm_types::NIL;
        if !shmem && !p.test(pg::ANON) {
            return PageoutResult::Activate;
        }
        // folio_clear_dirty_for_io.
        if !p.test(pg::DIRTY) {
            return PageoutResult::Clean;
        }
        self.mem.pages[f.idx()].set(pg::RECLAIM);
        if shmem {
            self.mem.pages[f.idx()].clear(pg::DIRTY);
            if self.shmem_writeout(f) == PageoutResult::Activate {
                self.mem.pages[f.idx()].clear(pg::RECLAIM);
                return PageoutResult::Activate;
            }
        } else {
            self.swap_writeout(f);
        }
        if !self.mem.pages[f.idx()].test(pg::WRITEBACK) {
            self.mem.pages[f.idx()].clear(pg::RECLAIM);
        }
        self.stat.mod_item(VmItem::NrVmscanWrite, nr);
        self.kernel_cycles(self.cost.reclaim_pageout * nr as f64, "pageout");
        self.trace(crate::tracepoints::ev::VMSCAN_WRITE_FOLIO, || {
            format!("pfn={:#x} flags=RECLAIM_WB_ANON|RECLAIM_WB_ASYNC", f.0)
        });
        PageoutResult::Success
    }

    /// `__remove_mapping`: an isolated, clean, unmapped folio leaves the page cache or the
    /// swap cache (a workingset shadow in its place when reclaim evicted it) and is freed.
    pub(super) fn remove_mapping(&mut self, f: Pfn, reclaimed: bool, target: Option<u16>) -> bool {
        let p = self.mem.pages[f.idx()];
        let nr = self.folio_nr_pages(f) as i32;
        if p.test(pg::DIRTY) || p.test(pg::WRITEBACK) || p.test(pg::LOCKED) || self.folio_mapcount(f) > 0 {
            return false;
        }
        if p.test(pg::SWAPCACHE) {
            if p.refcount != 1 + nr {
                return false;
            }
            let shadow = reclaimed.then(|| self.workingset_eviction(f, target));
            let e = super::pgtable::SwpEntry(p.private);
            // Linux's order: the swap cache's statistics leave the folio's memcg before v1's
            // swapout clears the folio's memcg.
            self.__swap_cache_del_folio(f, shadow);
            self.memcg1_swapout(f, e);
            self.put_swap_entries(e, nr as u32);
            self.mem.pages[f.idx()].refcount -= nr;
            self.folio_put(f);
            return true;
        }
        if p.mapping == super::mm_types::NIL || p.test(pg::ANON) {
            // An anonymous folio nothing references but the isolation (its last pte gone).
            if p.refcount == 1 {
                self.folio_put(f);
                return true;
            }
            return false;
        }
        if p.refcount != 1 + nr {
            return false;
        }
        let obj = p.mapping;
        let shadow = (reclaimed && self.folio_is_file_lru(f)).then(|| self.workingset_eviction(f, target));
        self.filemap_remove_folio_shadow(obj, f, shadow);
        self.folio_put(f);
        true
    }
}

/// `pageout`'s result (`pageout_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageoutResult {
    Keep,
    Activate,
    Success,
    Clean,
}
