//! Allocation when the free lists run short (mm/page_alloc.c's `__alloc_pages_slowpath`):
//! kswapd woken below the low watermark, direct reclaim and its retries below min, and the
//! OOM killer (`out_of_memory`) when reclaim cannot help.

use super::page_alloc::{gfp, Allocated, ClearPath};
use super::vmstat::{VmEvent, VmItem};
use super::*;
use crate::units::Pfn;

impl Kernel {
    /// `alloc_pages`: the buddy fast path, then (with __GFP_DIRECT_RECLAIM) the shrinkers and
    /// one retry. An order-0 user or page-table allocation that still fails for want of memory
    /// invokes the OOM killer (`out_of_memory`), which picks a victim for the process layer.
    pub fn alloc_pages(&mut self, order: u32, gfp_flags: u32) -> Option<Allocated> {
        let a = self.alloc_pages_inner(order, gfp_flags)?;
        crate::tracepoints::raise(&mut self.tp, ev::MM_PAGE_ALLOC, || {
            format!("pfn={:#x} order={order} gfp_flags={gfp_flags:#x}", a.pfn.0)
        });
        if order == 0 {
            self.rmqueue_pcplist();
        }
        if let Some(path) = a.clear {
            // Seed 002's allocator clears a block with one clear_page(addr, order); Linux's
            // post_alloc_hook (kernel_init_pages) calls clear_highpage page by page.
            let chunk = if self.knobs.scrub_start.is_some() { a.cleared } else { 1 };
            self.clear_pages(a.pfn, a.cleared, chunk, path);
        }
        Some(a)
    }

    /// Clear `pages` base pages from `pfn` on (`clear_page` calls of `chunk` pages each): the
    /// frames hold zeroes, the path's counter and `mmsim_pgclear` count them, and the hardware
    /// is charged for it.
    pub fn clear_pages(&mut self, pfn: Pfn, pages: u64, chunk: u64, path: ClearPath) {
        self.clear_pages_hint(pfn, pages, chunk, path, NO_TARGET);
    }

    /// `clear_pages` with the subpage to clear last (`folio_zero_user`'s `addr_hint`).
    pub fn clear_pages_hint(&mut self, pfn: Pfn, pages: u64, chunk: u64, path: ClearPath, target: u32) {
        self.mem.zero_frames(pfn.0, pages);
        self.stat.count_n(VmEvent::PgClear, pages as i64);
        self.stat.count_n(path.event(), pages as i64);
        self.work.push(Work::Clear { pfn, pages, chunk, path, target });
    }

    /// `vma_alloc_zeroed_movable_folio` and the THP fault's allocation: a zeroed user folio of
    /// `order`. Linux >= 6.13 allocates it without `__GFP_ZERO` and clears it itself
    /// (`clear_user_highpage` / `folio_zero_user`) when `user_alloc_needs_zeroing()`, that is
    /// unless `init_on_alloc` cleared it already; so after `init_on_free` it is cleared twice.
    /// With seed 002's policy on (`vm/scrub_start` set) the fault asks the allocator for
    /// `__GFP_ZERO` memory instead (the seed's `alloc_zeroed_user_highpage`), which a prezeroed
    /// block serves without clearing.
    /// A large folio is cleared by `folio_zero_user(folio, addr)`: `process_huge_page` order,
    /// the subpage of `addr` last.
    pub fn alloc_user_zeroed(&mut self, order: u32, gfp_flags: u32, addr: u64) -> Option<Allocated> {
        if self.knobs.scrub_start.is_some() {
            return self.alloc_pages(order, gfp_flags | gfp::ZERO);
        }
        let a = self.alloc_pages(order, gfp_flags & !gfp::ZERO)?;
        if !self.knobs.init_on_alloc {
            let nr = 1u64 << order;
            let target = if order > 0 { ((addr / self.geo.page_size()) & (nr - 1)) as u32 } else { NO_TARGET };
            self.clear_pages_hint(a.pfn, nr, 1, ClearPath::User, target);
        }
        Some(a)
    }

    /// `__free_pages_ok` after `free_pages_prepare`: with `init_on_free` the block is cleared
    /// (`kernel_init_pages`, page by page) and goes back to the allocator zeroed.
    pub fn free_pages_ok(&mut self, pfn: Pfn, order: u32) {
        crate::tracepoints::raise(&mut self.tp, ev::MM_PAGE_FREE, || format!("pfn={:#x} order={order}", pfn.0));
        let init = self.knobs.init_on_free;
        if init {
            self.clear_pages(pfn, 1 << order, 1, ClearPath::InitOnFree);
        }
        self.mem.free(pfn, order, init, &mut self.stat);
    }

    /// `__alloc_pages`: the fast path above the low watermark; then the slow path: kswapd
    /// woken, a try above min, direct reclaim (`try_to_free_pages`) and retries while the
    /// reclaimable memory could still make the allocation fit (`should_reclaim_retry`), and
    /// for a small allocation the OOM killer. A reclaiming context (PF_MEMALLOC) may use the
    /// reserves below min. Fault injection (`fail_page_alloc`) fails an attempt outright.
    fn alloc_pages_inner(&mut self, order: u32, gfp_flags: u32) -> Option<Allocated> {
        use mmzone::Wmark;
        let reserve = (gfp_flags & gfp::HIGH != 0) as u32;
        if self.in_reclaim || self.zone_watermark_ok_free(order, self.wmark_pages(Wmark::Low), self.mem.free_pages, 0) {
            if let Some(a) = self.mem.alloc(order, gfp_flags, true, &mut self.stat) {
                return Some(a);
            }
            if self.mem.last_fail_injected {
                return None;
            }
        }
        // __alloc_pages_slowpath
        if gfp_flags & gfp::KSWAPD_RECLAIM != 0 {
            self.wakeup_kswapd(order, gfp_flags);
        }
        let try_min = |k: &mut Kernel| {
            let ok =
                k.in_reclaim || k.zone_watermark_ok_free(order, k.wmark_pages(Wmark::Min), k.mem.free_pages, reserve);
            if ok {
                k.mem.alloc(order, gfp_flags, false, &mut k.stat)
            } else {
                None
            }
        };
        if let Some(a) = try_min(self) {
            return Some(a);
        }
        if self.in_reclaim {
            // ALLOC_NO_WATERMARKS: whatever is free.
            return self.mem.alloc(order, gfp_flags, false, &mut self.stat);
        }
        if gfp_flags & gfp::DIRECT_RECLAIM == 0 {
            return None;
        }
        let mut no_progress_loops = 0u32;
        loop {
            if gfp_flags & gfp::KSWAPD_RECLAIM != 0 {
                self.wakeup_kswapd(order, gfp_flags);
            }
            if let Some(a) = try_min(self) {
                return Some(a);
            }
            let progress = self.try_to_free_pages(order, gfp_flags);
            if progress > 0 {
                if let Some(a) = try_min(self) {
                    return Some(a);
                }
            }
            if gfp_flags & gfp::NORETRY != 0 {
                return None;
            }
            if order > vmscan::PAGE_ALLOC_COSTLY_ORDER && gfp_flags & gfp::RETRY_MAYFAIL == 0 {
                return None;
            }
            if self.should_reclaim_retry(order, progress, &mut no_progress_loops) {
                continue;
            }
            break;
        }
        // __alloc_pages_may_oom: small allocations only.
        if order <= vmscan::PAGE_ALLOC_COSTLY_ORDER && gfp_flags & gfp::RETRY_MAYFAIL == 0 {
            self.out_of_memory();
        }
        None
    }

    /// `should_reclaim_retry`: retry while reclaim made progress recently (16 rounds without
    /// at most) and free plus reclaimable memory would pass the min watermark.
    fn should_reclaim_retry(&mut self, order: u32, progress: u64, loops: &mut u32) -> bool {
        if progress > 0 && order <= vmscan::PAGE_ALLOC_COSTLY_ORDER {
            *loops = 0;
        } else {
            *loops += 1;
        }
        if *loops > vmscan::MAX_RECLAIM_RETRIES {
            return false;
        }
        let it = &self.stat.items;
        let mut reclaimable = it[VmItem::NrActiveFile] + it[VmItem::NrInactiveFile];
        if self.swap.nr_swap_pages > 0 {
            reclaimable += it[VmItem::NrActiveAnon] + it[VmItem::NrInactiveAnon];
        }
        let available = reclaimable.max(0) as u64 + self.mem.free_pages;
        self.zone_watermark_ok_free(order, self.wmark_pages(mmzone::Wmark::Min), available, 0)
    }

    /// The shrinkers a direct reclaim runs (shrink_slab): the deferred split queue, and the
    /// huge zero folio's. Returns base pages freed.
    pub fn shrink_slab(&mut self) -> u64 {
        let before = self.mem.free_pages;
        self.deferred_split_scan();
        self.shrink_huge_zero_folio();
        self.sync_items();
        self.mem.free_pages - before
    }

    /// `out_of_memory` / `select_bad_process`: the mm with the highest oom_badness (rss plus
    /// page tables, ties to the newest) becomes the victim.
    fn out_of_memory(&mut self) {
        if self.oom_victim.is_some() {
            return;
        }
        let mut best: Option<(i64, MmId)> = None;
        for (i, m) in self.mms.iter().enumerate() {
            if let Some(m) = m {
                let points = m.rss_total() + m.swapents + m.pgtables_bytes / self.geo.page_size() as i64;
                if best.is_none_or(|(b, _)| points >= b) {
                    best = Some((points, i as MmId));
                }
            }
        }
        if let Some((_, id)) = best {
            self.stat.count(VmEvent::OomKill);
            let memcg = self.mm(id).memcg;
            self.memcg_memory_event(memcg, memcontrol::MemcgEvent::OomKill);
            self.oom_victim = Some(id);
        }
    }
}
