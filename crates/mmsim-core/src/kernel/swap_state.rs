//! The swap cache and swap I/O (mm/swap_state.c, mm/swap_table.h, mm/page_io.c, Linux
//! 6.18): the per-cluster swap table holding folios and workingset shadows
//! (`swap_cache_add_folio`, `__swap_cache_del_folio`, `swap_cache_get_folio`), swap-in
//! (`__read_swap_cache_async`, `swap_read_folio`) with readahead by slot
//! (`swap_cluster_readahead`) or by address (`swap_vma_readahead`, `__swapin_nr_pages`) and
//! its hit accounting (`swap_update_readahead`), and swap-out (`swap_writeout`,
//! `__swap_writepage`) with the end of writeback.
//!
//! Differs from Linux: a read's data is in the frame at once; the folio stays locked
//! (`pg::LOCKED`) until the read completes on the device, and a fault that finds it waits
//! until then.

use super::blkdev::IoEvent;
use super::mm::Vma;
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::pgtable::SwpEntry;
use super::swapfile::{TABLE_FOLIO, TABLE_SHADOW};
use super::vmstat::{VmEvent, VmItem};
use super::{Kernel, MmId};
use crate::units::Pfn;

/// `SWAP_RA_ORDER_CEILING`: VMA readahead reads at most 2^5 pages.
const SWAP_RA_ORDER_CEILING: u32 = 5;
/// The readahead hits a fresh VMA (or the cluster readahead at boot) starts with.
const SWAP_RA_INITIAL_HITS: u32 = 4;

/// A VMA's swap readahead state (`vma->swap_readahead_info`): the last fault's address, the
/// window it used and the readahead hits since.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapRaInfo {
    pub addr: u64,
    pub win: u32,
    pub hits: u32,
}

/// `__swapin_nr_pages`: the readahead window from the hits since the last fault and whether
/// this fault follows the last one.
pub fn swapin_nr_pages(prev_offset: u64, offset: u64, hits: u32, max_pages: u32, prev_win: u32) -> u32 {
    let mut pages = hits + 2;
    if pages == 2 {
        if offset != prev_offset + 1 && offset + 1 != prev_offset {
            pages = 1;
        }
    } else {
        pages = pages.next_power_of_two().max(4);
    }
    pages = pages.min(max_pages);
    pages.max(prev_win / 2)
}

impl Kernel {
    /// The swap cache's folio for a slot (`swap_cache_get_folio`), its head frame.
    pub fn swap_cache_get_folio(&self, e: SwpEntry) -> Option<Pfn> {
        let v = self.swap.si[e.ty()].table(e.offset(), self.swap_cluster());
        (v & TABLE_FOLIO != 0).then_some(Pfn((v & !TABLE_FOLIO) as u32))
    }

    /// The workingset shadow a slot holds (`swap_cache_get_shadow`).
    pub fn swap_cache_get_shadow(&self, e: SwpEntry) -> Option<u64> {
        let v = self.swap.si[e.ty()].table(e.offset(), self.swap_cluster());
        (v & TABLE_SHADOW != 0).then_some(v & !TABLE_SHADOW)
    }

    fn swap_table_set(&mut self, e: SwpEntry, v: u64) {
        let cluster = self.swap_cluster();
        let c = &mut self.swap.si[e.ty()].clusters[(e.offset() / cluster) as usize];
        let t = c.table.as_mut().expect("an allocated slot's cluster has its table");
        t[(e.offset() % cluster) as usize] = v;
    }

    /// `swap_cache_add_folio`: the folio into the slots it reserved (SWAP_HAS_CACHE), a
    /// reference per page; returns the shadow the first slot held.
    pub fn swap_cache_add_folio(&mut self, head: Pfn, e: SwpEntry) -> Option<u64> {
        let nr = self.folio_nr_pages(head) as u32;
        let shadow = self.swap_cache_get_shadow(e);
        for i in 0..nr {
            self.swap_table_set(e.add(i), TABLE_FOLIO | head.0 as u64);
        }
        let p = &mut self.mem.pages[head.idx()];
        p.refcount += nr as i32;
        p.set(pg::SWAPCACHE);
        p.private = e.0;
        self.stat.mod_item(VmItem::NrFilePages, nr as i64);
        self.mod_lruvec_item(head, VmItem::NrSwapcached, nr as i64);
        shadow
    }

    /// A split's new folio takes its slot (`__swap_cache_replace_folio`).
    pub fn swap_cache_replace(&mut self, e: SwpEntry, folio: Pfn) {
        self.swap_table_set(e, TABLE_FOLIO | folio.0 as u64);
    }

    /// `__swap_cache_del_folio`: the folio leaves the swap cache, `shadow` (or nothing) left
    /// in its slots; the slots keep SWAP_HAS_CACHE (the caller puts them) and the references
    /// are the caller's to drop.
    pub fn __swap_cache_del_folio(&mut self, head: Pfn, shadow: Option<u64>) {
        let nr = self.folio_nr_pages(head) as u32;
        let e = SwpEntry(self.mem.pages[head.idx()].private);
        let v = shadow.map_or(0, |s| TABLE_SHADOW | s);
        for i in 0..nr {
            self.swap_table_set(e.add(i), v);
        }
        let p = &mut self.mem.pages[head.idx()];
        p.clear(pg::SWAPCACHE | pg::SWAP_READAHEAD);
        p.private = 0;
        self.stat.mod_item(VmItem::NrFilePages, -(nr as i64));
        self.mod_lruvec_item(head, VmItem::NrSwapcached, -(nr as i64));
    }

    /// `swap_cache_del_folio`: out of the swap cache (no shadow), its slots put and its
    /// references dropped (the folio is freed if that was the last).
    pub fn swap_cache_del_folio(&mut self, head: Pfn) {
        let nr = self.folio_nr_pages(head) as u32;
        let e = SwpEntry(self.mem.pages[head.idx()].private);
        self.__swap_cache_del_folio(head, None);
        self.put_swap_entries(e, nr);
        self.mem.pages[head.idx()].refcount -= nr as i32 - 1;
        self.folio_put(head);
    }

    /// `__read_swap_cache_async`: the swap cache's folio for the slot, or a new order-0 folio
    /// added for it (charged to the memcg the slot was charged to, the workingset told of
    /// any shadow, onto the LRU; `memcg`, the faulting mm's, if the slot's is unknown) that
    /// the caller reads into; None when the slot has no reference, or memory or the charge
    /// ran out. The bool: newly added.
    pub fn read_swap_cache_async(&mut self, e: SwpEntry, memcg: u16) -> Option<(Pfn, bool)> {
        if let Some(f) = self.swap_cache_get_folio(e) {
            return Some((f, false));
        }
        if self.swap_count(e) == 0 {
            return None;
        }
        let a = self.alloc_pages(0, gfp::HIGHUSER_MOVABLE)?;
        let page = a.pfn;
        if !self.swapcache_prepare(e) {
            self.free_new_folio(page);
            return None;
        }
        let memcg = self.swap_memcg_or(e, memcg);
        if self.mem_cgroup_charge(page, memcg, gfp::HIGHUSER_MOVABLE).is_err() {
            self.put_swap_entries(e, 1);
            self.free_new_folio(page);
            return None;
        }
        self.mem.pages[page.idx()].set(pg::ANON | pg::LOCKED);
        let shadow = self.swap_cache_add_folio(page, e);
        self.memcg1_swapin(e, 1);
        if let Some(s) = shadow {
            self.workingset_refault(page, s);
        }
        self.folio_add_lru(page);
        // The folio's own reference goes: the swap cache holds it now.
        self.folio_put(page);
        Some((page, true))
    }

    /// Free a just-allocated page nothing else knows (a failed swap-in's).
    fn free_new_folio(&mut self, page: Pfn) {
        self.folio_put(page);
    }

    /// `swap_read_folio`: read a new swap-cache folio from its slot: a zero-filled slot is
    /// read without I/O (swpin_zero), any other through the device (pswpin; the folio stays
    /// locked until the read completes).
    pub fn swap_read_folio(&mut self, head: Pfn) {
        let e = SwpEntry(self.mem.pages[head.idx()].private);
        let nr = self.folio_nr_pages(head) as u32;
        for i in 0..nr {
            self.swap_load_data(e.add(i), Pfn(head.0 + i));
        }
        if (0..nr).all(|i| self.swap.si[e.ty()].zeromap_test(e.offset() + i)) {
            self.count_vm_events_folio(head, VmEvent::SwpinZero, nr as i64);
            self.mem.pages[head.idx()].clear(pg::LOCKED);
            return;
        }
        self.count_vm_events_folio(head, VmEvent::Pswpin, nr as i64);
        self.count_read_io(nr as u64);
        self.submit_swap_bio(e.ty(), e.offset(), nr, false, IoEvent::SwapReadDone(head));
    }

    /// A swap read completed (`end_swap_bio_read`): the folio is unlocked.
    pub(super) fn swap_read_done(&mut self, head: Pfn) {
        self.mem.pages[head.idx()].clear(pg::LOCKED);
    }

    /// A swap write completed (`end_swap_bio_write` -> `folio_end_writeback`): writeback
    /// ends, and a folio reclaim is waiting for (PG_reclaim) goes to the inactive tail.
    pub(super) fn swap_write_done(&mut self, head: Pfn) {
        let p = &mut self.mem.pages[head.idx()];
        if !p.test(pg::WRITEBACK) {
            return;
        }
        p.clear(pg::WRITEBACK);
        let reclaim = p.test(pg::RECLAIM);
        let nr = self.folio_nr_pages(head) as i64;
        self.mod_lruvec_item(head, VmItem::NrWriteback, -nr);
        if reclaim {
            self.mem.pages[head.idx()].clear(pg::RECLAIM);
            self.folio_rotate_reclaimable(head);
        }
        // The I/O's hold on the folio.
        self.folio_put(head);
    }

    /// Wait until a folio under I/O (a read, `pg::LOCKED`) is unlocked: the time is the
    /// current task's (`folio_lock`).
    pub fn folio_wait_locked(&mut self, head: Pfn) {
        self.folio_wait_bit(head, pg::LOCKED, "locked");
    }

    /// Wait until a folio's writeback ends (`folio_wait_writeback`).
    pub fn folio_wait_writeback(&mut self, head: Pfn) {
        self.folio_wait_bit(head, pg::WRITEBACK, "under writeback");
    }

    /// `folio_wait_bit`: I/O completes until the folio's `bit` is clear (a bug, reported
    /// and cleared, if no I/O is pending that would clear it).
    fn folio_wait_bit(&mut self, head: Pfn, bit: u32, what: &str) {
        while self.mem.pages[head.idx()].test(bit) {
            if self.plug.holds_io() {
                // The task sleeps: its plug goes to the device first (sched_submit_work).
                self.blk_flush_plug();
            }
            let Some(t) = self.blk.next_completion() else {
                self.report_bug(format!("folio {:#x} {what} with no I/O pending", head.0));
                self.mem.pages[head.idx()].clear(bit);
                return;
            };
            self.io_wait_until(t);
        }
    }

    /// `swap_writeout` of a locked, dirty swap-cache folio reclaim is paging out. Returns
    /// true when the write was started (the folio is under writeback), false when no I/O
    /// was needed: nothing refers to the slots any more (they are freed, the folio comes
    /// back dirty), or every page is zero (the zeromap records them, swpout_zero).
    pub fn swap_writeout(&mut self, head: Pfn) -> bool {
        if self.folio_free_swap(head) {
            return false;
        }
        let e = SwpEntry(self.mem.pages[head.idx()].private);
        let nr = self.folio_nr_pages(head) as u32;
        self.mem.pages[head.idx()].clear(pg::DIRTY);
        if self.folio_zero_filled(head) {
            self.swap_store_data(e, head, nr);
            self.count_vm_events_folio(head, VmEvent::SwpoutZero, nr as i64);
            return false;
        }
        self.swap_store_data(e, head, nr);
        // __swap_writepage: count_swpout_vm_event at submission.
        self.count_vm_events_folio(head, VmEvent::Pswpout, nr as i64);
        if nr as u64 == self.geo.hpage_pmd_nr() {
            self.count_vm_events_folio(head, VmEvent::ThpSwpout, 1);
        }
        self.stat.count_n(VmEvent::PgpgOut, (nr as u64 * self.geo.page_size() / 1024) as i64);
        self.mem.pages[head.idx()].set(pg::WRITEBACK);
        self.mod_lruvec_item(head, VmItem::NrWriteback, nr as i64);
        // The bio's reference until the write completes.
        self.folio_get(head);
        self.submit_swap_bio(e.ty(), e.offset(), nr, true, IoEvent::SwapWriteDone(head));
        true
    }

    /// `swap_use_vma_readahead`: `swap/vma_ra_enabled` and no rotational swap area.
    pub fn swap_use_vma_readahead(&self) -> bool {
        self.knobs.reclaim.swap_vma_ra && self.swap.nr_rotate_swap == 0
    }

    /// `swap_update_readahead`: a fault found the folio in the swap cache; a page read ahead
    /// (or, by the shared bit, one reclaim is writing out) is a hit (its mark cleared,
    /// swap_ra_hit), which widens the next window. `at`: the
    /// faulting mm, vma and address (None for shmem's swap-in, which has no vma).
    pub fn swap_update_readahead(&mut self, head: Pfn, at: Option<(MmId, &Vma, u64)>) {
        if self.folio_nr_pages(head) > 1 {
            return;
        }
        // folio_test_clear_readahead: PG_readahead is PG_reclaim's bit, so a folio reclaim is
        // writing out (MADV_PAGEOUT, still under writeback) counts as a hit too, and loses
        // its PG_reclaim (its writeback's end no longer rotates it).
        let ra = self.mem.pages[head.idx()].test(pg::SWAP_READAHEAD | pg::RECLAIM);
        self.mem.pages[head.idx()].clear(pg::SWAP_READAHEAD | pg::RECLAIM);
        let vma_ra = self.swap_use_vma_readahead();
        if let (Some((mm, vma, addr)), true) = (at, vma_ra) {
            let key = (mm, vma.start);
            let mut info = self
                .swap_ra_info
                .get(&key)
                .copied()
                .unwrap_or(SwapRaInfo { hits: SWAP_RA_INITIAL_HITS, ..Default::default() });
            info.hits = (info.hits + ra as u32).min(63);
            info.addr = self.geo.page_align_down(addr);
            self.swap_ra_info.insert(key, info);
        }
        if ra {
            self.count_vm_events_folio(head, VmEvent::SwapRaHit, 1);
            if at.is_none() || !vma_ra {
                self.swap.ra_hits += 1;
            }
        }
    }

    /// Start reading slot `e` ahead (a readahead page): newly added folios are read and
    /// marked, counting swap_ra.
    fn swap_ra_one(&mut self, e: SwpEntry, memcg: u16) {
        if let Some((f, true)) = self.read_swap_cache_async(e, memcg) {
            self.swap_read_folio(f);
            self.mem.pages[f.idx()].set(pg::SWAP_READAHEAD);
            self.count_vm_events_folio(f, VmEvent::SwapRa, 1);
        }
    }

    /// `swapin_readahead`: the folio of `e` for a fault at `addr`, reading it and the pages
    /// around it (by address, or by slot on a machine with rotational swap). None when
    /// memory or the charge ran out.
    pub fn swapin_readahead(&mut self, e: SwpEntry, mm: MmId, vma: &Vma, addr: u64) -> Option<Pfn> {
        if self.swap_use_vma_readahead() {
            self.swap_vma_readahead(e, mm, vma, addr)
        } else {
            self.swap_cluster_readahead(e, self.mm_memcg(mm))
        }
    }

    /// `swap_cluster_readahead`: the aligned block of `win` slots around `e` (global state:
    /// the last offset, window and hits); new folios are charged to `memcg` where a slot's
    /// memcg is unknown.
    pub fn swap_cluster_readahead(&mut self, e: SwpEntry, memcg: u16) -> Option<Pfn> {
        let max_pages = 1u32 << self.knobs.reclaim.page_cluster;
        let off = e.offset();
        let win = if max_pages <= 1 {
            1
        } else {
            let hits = std::mem::take(&mut self.swap.ra_hits);
            let w =
                swapin_nr_pages(self.swap.ra_prev_offset as u64, off as u64, hits, max_pages, self.swap.ra_last_pages);
            if hits == 0 {
                self.swap.ra_prev_offset = off;
            }
            self.swap.ra_last_pages = w;
            w
        };
        if win > 1 {
            let mut start = off & !(win - 1);
            let mut end = off | (win - 1);
            if start == 0 {
                start = 1;
            }
            end = end.min(self.swap.si[e.ty()].max - 1);
            self.blk_start_plug();
            for o in start..=end {
                if o == off {
                    if let Some((f, true)) = self.read_swap_cache_async(e, memcg) {
                        self.swap_read_folio(f);
                    }
                } else {
                    self.swap_ra_one(SwpEntry::new(e.ty() as u32, o), memcg);
                }
            }
            self.blk_finish_plug();
            self.lru_add_drain();
        }
        let (f, new) = self.read_swap_cache_async(e, memcg)?;
        if new {
            self.swap_read_folio(f);
        }
        Some(f)
    }

    /// `swap_vma_readahead`: the swap ptes of a window around `addr` (forward or backward
    /// after a sequential fault, else centred), within its PMD range and the vma.
    pub fn swap_vma_readahead(&mut self, e: SwpEntry, mm: MmId, vma: &Vma, addr: u64) -> Option<Pfn> {
        let ps = self.geo.page_size();
        let memcg = self.mm_memcg(mm);
        let addr = self.geo.page_align_down(addr);
        let pc = self.knobs.reclaim.page_cluster.min(SWAP_RA_ORDER_CEILING);
        let max_win = 1u32 << pc;
        let key = (mm, vma.start);
        let info = self
            .swap_ra_info
            .get(&key)
            .copied()
            .unwrap_or(SwapRaInfo { hits: SWAP_RA_INITIAL_HITS, ..Default::default() });
        let win = if max_win == 1 {
            1
        } else {
            let w = swapin_nr_pages(info.addr / ps, addr / ps, info.hits, max_win, info.win);
            self.swap_ra_info.insert(key, SwapRaInfo { addr, win: w, hits: 0 });
            w
        };
        if win > 1 {
            let prev = info.addr;
            let left = if addr == prev + ps {
                addr
            } else if prev == addr + ps {
                addr.saturating_sub((win as u64 - 1) * ps)
            } else {
                addr.saturating_sub(((win as u64 - 1) / 2) * ps)
            };
            let pmd = self.geo.hpage_pmd_align_down(addr);
            let start = left.max(vma.start).max(pmd);
            let end = (left + win as u64 * ps).min(vma.end).min(pmd + self.geo.hpage_pmd_size());
            self.blk_start_plug();
            let mut a = start;
            while a < end {
                if let Some(slot) = self.pte_slot(mm, a) {
                    let pe = self.entry(slot.table, slot.idx);
                    if pe.is_swap() {
                        let se = pe.swp_entry();
                        if a == addr {
                            if let Some((f, true)) = self.read_swap_cache_async(se, memcg) {
                                self.swap_read_folio(f);
                            }
                        } else {
                            self.swap_ra_one(se, memcg);
                        }
                    }
                }
                a += ps;
            }
            self.blk_finish_plug();
            self.lru_add_drain();
        }
        let (f, new) = self.read_swap_cache_async(e, memcg)?;
        if new {
            self.swap_read_folio(f);
        }
        Some(f)
    }
}
