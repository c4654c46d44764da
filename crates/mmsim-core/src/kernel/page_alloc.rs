//! The buddy allocator (mm/page_alloc.c): per-order free lists whose blocks know whether they
//! are already zeroed, `__GFP_ZERO`, and deterministic fault injection
//! (mm/fail_page_alloc.c). Differs from Linux: one zone, no per-cpu page lists, no
//! migratetypes and no compaction; reclaim is the caller's (see `Kernel::alloc_pages`).

use super::content::PageContent;
use super::mm_types::{pg, FrameData, Page, NIL};
use super::vmstat::{VmEvent, VmStat};
use crate::units::Pfn;

/// Largest buddy order (MAX_PAGE_ORDER): 4 MiB blocks of 4 KiB pages.
pub const MAX_ORDER: u32 = 10;

/// Allocation flags (include/linux/gfp_types.h), the subset the model acts on.
pub mod gfp {
    /// Return zeroed memory (`__GFP_ZERO`).
    pub const ZERO: u32 = 1 << 0;
    /// Make a compound page (`__GFP_COMP`).
    pub const COMP: u32 = 1 << 1;
    /// The caller may reclaim (run shrinkers) before failing (`__GFP_DIRECT_RECLAIM`).
    pub const DIRECT_RECLAIM: u32 = 1 << 2;
    /// A user page (GFP_HIGHUSER_MOVABLE): order-0 user faults that fail end in the OOM path.
    pub const USER: u32 = 1 << 3;
    /// A page-table page (GFP_PGTABLE_USER).
    pub const TABLE: u32 = 1 << 4;
}

/// Host bytes of one frame's `struct page` and content slot (`PhysMem::metadata_bytes`).
pub const FRAME_METADATA_BYTES: u64 = (std::mem::size_of::<Page>() + std::mem::size_of::<FrameData>()) as u64;

/// Outcome of a successful allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocated {
    pub pfn: Pfn,
    /// Base pages that had to be cleared because the block was not known to be zero.
    pub cleared: u64,
}

/// Physical memory: the `mem_map` array, frame contents and the zone's free areas.
pub struct PhysMem {
    pub pages: Vec<Page>,
    pub data: Vec<FrameData>,
    free_head: [u32; MAX_ORDER as usize + 1],
    nr_free: [u64; MAX_ORDER as usize + 1],
    /// Free base pages in total and in zeroed blocks.
    pub free_pages: u64,
    pub zeroed_free_pages: u64,
    /// Frames never handed to the allocator (zero page, kernel image).
    pub reserved: u64,
    /// Allocation attempts so far (the clock of `fail_page_alloc/every`).
    attempts: u64,
    pub fail_min_order: Option<u32>,
    pub fail_every: u64,
    /// Whether the last failed allocation was failed by injection.
    pub last_fail_injected: bool,
    /// Host heap bytes of every frame's contents (`FrameData::heap_bytes`), kept as they change.
    pub content_bytes: u64,
    /// Frames holding a page table with entries (`FrameData::Table`).
    pub tables: u64,
}

impl PhysMem {
    /// A machine with `nr_pages` frames; the first `reserved` are kept back, the rest freed
    /// into the buddy lists in the largest blocks alignment allows (memblock_free_all).
    pub fn new(nr_pages: u64, reserved: u64) -> PhysMem {
        assert!(nr_pages < NIL as u64, "frame numbers are 32-bit");
        let n = nr_pages as usize;
        let mut m = PhysMem {
            pages: vec![Page::default(); n],
            data: Vec::new(),
            free_head: [NIL; MAX_ORDER as usize + 1],
            nr_free: [0; MAX_ORDER as usize + 1],
            free_pages: 0,
            zeroed_free_pages: 0,
            reserved,
            attempts: 0,
            fail_min_order: None,
            fail_every: 0,
            last_fail_injected: false,
            content_bytes: 0,
            tables: 0,
        };
        m.data.resize_with(n, FrameData::default);
        for p in 0..reserved.min(nr_pages) {
            let pg = &mut m.pages[p as usize];
            pg.flags = pg::RESERVED;
            pg.refcount = 1;
            pg.head = p as u32;
        }
        // Memory at boot holds whatever firmware left: not known to be zero.
        let mut pfn = reserved;
        while pfn < nr_pages {
            let mut order = MAX_ORDER;
            while order > 0 && (pfn & ((1 << order) - 1) != 0 || pfn + (1 << order) > nr_pages) {
                order -= 1;
            }
            m.add_to_free_list(pfn as u32, order, false);
            pfn += 1 << order;
        }
        m
    }

    pub fn nr_pages(&self) -> u64 {
        self.pages.len() as u64
    }

    /// Replace the contents of frame `i`, keeping `content_bytes` and `tables` up to date.
    pub fn set_data(&mut self, i: usize, d: FrameData) {
        self.content_bytes += d.heap_bytes();
        self.tables += matches!(d, FrameData::Table(_)) as u64;
        let old = std::mem::replace(&mut self.data[i], d);
        self.content_bytes -= old.heap_bytes();
        self.tables -= matches!(old, FrameData::Table(_)) as u64;
    }

    /// Host bytes of `mem_map` and the frames' content slots (fixed at boot).
    pub fn metadata_bytes(&self) -> u64 {
        (self.pages.capacity() * std::mem::size_of::<Page>() + self.data.capacity() * std::mem::size_of::<FrameData>())
            as u64
    }

    /// Host bytes of the page tables with entries.
    pub fn table_bytes(&self) -> u64 {
        self.tables * super::mm_types::TABLE_HOST_BYTES
    }

    /// Free blocks per order (`/proc/buddyinfo`).
    pub fn buddyinfo(&self) -> Vec<u64> {
        self.nr_free.to_vec()
    }

    fn add_to_free_list(&mut self, pfn: u32, order: u32, zeroed: bool) {
        let head = self.free_head[order as usize];
        {
            let p = &mut self.pages[pfn as usize];
            p.flags = pg::BUDDY | if zeroed { pg::ZEROED } else { 0 };
            p.order = order as u8;
            p.refcount = 0;
            p.mapcount = 0;
            p.entire_mapcount = 0;
            p.head = pfn;
            p.mapping = NIL;
            p.next = head;
            p.prev = NIL;
        }
        if head != NIL {
            self.pages[head as usize].prev = pfn;
        }
        self.free_head[order as usize] = pfn;
        self.nr_free[order as usize] += 1;
        self.free_pages += 1 << order;
        if zeroed {
            self.zeroed_free_pages += 1 << order;
        }
    }

    fn del_from_free_list(&mut self, pfn: u32, order: u32) -> bool {
        let (next, prev, zeroed) = {
            let p = &self.pages[pfn as usize];
            (p.next, p.prev, p.test(pg::ZEROED))
        };
        if prev != NIL {
            self.pages[prev as usize].next = next;
        } else {
            self.free_head[order as usize] = next;
        }
        if next != NIL {
            self.pages[next as usize].prev = prev;
        }
        let p = &mut self.pages[pfn as usize];
        p.flags &= !(pg::BUDDY | pg::ZEROED);
        p.next = NIL;
        p.prev = NIL;
        self.nr_free[order as usize] -= 1;
        self.free_pages -= 1 << order;
        if zeroed {
            self.zeroed_free_pages -= 1 << order;
        }
        zeroed
    }

    /// `should_fail_alloc_page`: the fault-injection decision for one attempt.
    fn should_fail(&mut self, order: u32) -> bool {
        self.attempts += 1;
        if self.fail_min_order.is_some_and(|m| order >= m) {
            return true;
        }
        self.fail_every > 0 && self.attempts.is_multiple_of(self.fail_every)
    }

    /// `__alloc_pages` without reclaim: take the smallest free block of at least `order`,
    /// split it (`expand`), prepare the pages, clear them for `__GFP_ZERO` unless the block
    /// was already zeroed. None when injection or a lack of free blocks fails it.
    pub fn alloc(&mut self, order: u32, gfp_flags: u32, inject: bool, stat: &mut VmStat) -> Option<Allocated> {
        self.last_fail_injected = false;
        if order > MAX_ORDER {
            return None;
        }
        if inject && self.should_fail(order) {
            stat.count(VmEvent::AllocFailInjected);
            self.last_fail_injected = true;
            return None;
        }
        let found = (order..=MAX_ORDER).find(|&o| self.free_head[o as usize] != NIL)?;
        let pfn = self.free_head[found as usize];
        let zeroed = self.del_from_free_list(pfn, found);
        // expand(): hand the upper halves back, each inheriting the zeroed state.
        let mut o = found;
        while o > order {
            o -= 1;
            self.add_to_free_list(pfn + (1 << o), o, zeroed);
        }
        let n = 1u64 << order;
        stat.count_n(VmEvent::PgAlloc, n as i64);
        for i in 0..n as u32 {
            let p = &mut self.pages[(pfn + i) as usize];
            *p = Page::default();
            p.head = pfn;
        }
        let head = &mut self.pages[pfn as usize];
        head.refcount = 1;
        if order > 0 && gfp_flags & gfp::COMP != 0 {
            head.set(pg::HEAD);
            head.order = order as u8;
            for i in 1..n as u32 {
                self.pages[(pfn + i) as usize].set(pg::TAIL);
            }
        } else {
            head.order = order as u8;
        }
        let mut cleared = 0;
        if gfp_flags & gfp::ZERO != 0 {
            if zeroed {
                stat.count_n(VmEvent::PgZeroed, n as i64);
            } else {
                // clear_highpage() on each base page.
                for i in 0..n as u32 {
                    self.set_data((pfn + i) as usize, FrameData::Zero);
                }
                cleared = n;
                stat.count_n(VmEvent::PgClear, n as i64);
            }
        }
        Some(Allocated { pfn: Pfn(pfn), cleared })
    }

    /// `__free_pages_ok`: return a block and merge it with free buddies. Stale data stays in
    /// the frames (a freed page-table page keeps stale bytes too), so the block is not zeroed.
    pub fn free(&mut self, pfn: Pfn, order: u32, stat: &mut VmStat) {
        let mut pfn = pfn.0;
        let n = 1u64 << order;
        stat.count_n(VmEvent::PgFree, n as i64);
        for i in 0..n as u32 {
            if let FrameData::Table(_) | FrameData::EmptyTable = self.data[(pfn + i) as usize] {
                self.set_data((pfn + i) as usize, FrameData::Data(Box::new(PageContent::filled(0xaa))));
            }
        }
        let mut order = order;
        let total = self.pages.len() as u32;
        while order < MAX_ORDER {
            let buddy = pfn ^ (1 << order);
            if buddy >= total {
                break;
            }
            let b = &self.pages[buddy as usize];
            if !b.test(pg::BUDDY) || b.order as u32 != order {
                break;
            }
            // A zeroed buddy merged with a dirty block makes a dirty block (seed 002).
            self.del_from_free_list(buddy, order);
            pfn = pfn.min(buddy);
            order += 1;
        }
        self.add_to_free_list(pfn, order, false);
    }

    /// Mark a free block as zeroed (kscrubd's `zero_and_mark`, seed 002); the caller cleared it.
    pub fn mark_zeroed(&mut self, pfn: Pfn) -> bool {
        let p = &mut self.pages[pfn.idx()];
        if !p.test(pg::BUDDY) || p.test(pg::ZEROED) {
            return false;
        }
        let order = p.order as u32;
        p.set(pg::ZEROED);
        self.zeroed_free_pages += 1 << order;
        for i in 0..1u32 << order {
            self.set_data((pfn.0 + i) as usize, FrameData::Zero);
        }
        true
    }

    /// Every free block as (pfn, order, zeroed), for the conservation check.
    pub fn free_blocks(&self) -> Vec<(u32, u32, bool)> {
        let mut v = Vec::new();
        for o in 0..=MAX_ORDER {
            let mut p = self.free_head[o as usize];
            while p != NIL {
                let pg = &self.pages[p as usize];
                v.push((p, o, pg.test(pg::ZEROED)));
                p = pg.next;
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat() -> VmStat {
        VmStat::default()
    }

    #[test]
    fn boot_free_lists_and_merge() {
        let mut m = PhysMem::new(4096, 1);
        assert_eq!(m.free_pages, 4095);
        // pfn 1..4096: orders 0,1,2,...,9 then 3 blocks of order 10.
        assert_eq!(m.buddyinfo(), vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3]);
        let mut s = stat();
        let a = m.alloc(0, 0, true, &mut s).unwrap();
        assert_eq!(a.pfn, Pfn(1));
        m.free(a.pfn, 0, &mut s);
        assert_eq!(m.free_pages, 4095);
        assert_eq!(m.buddyinfo(), vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3]);
    }

    #[test]
    fn split_and_coalesce_exactly() {
        let mut m = PhysMem::new(1024, 0);
        let mut s = stat();
        let mut got = Vec::new();
        for _ in 0..1024 {
            got.push(m.alloc(0, 0, true, &mut s).unwrap().pfn);
        }
        assert!(m.alloc(0, 0, true, &mut s).is_none());
        assert_eq!(m.free_pages, 0);
        for p in got.iter().rev() {
            m.free(*p, 0, &mut s);
        }
        assert_eq!(m.buddyinfo()[10], 1, "everything merges back into one block");
    }

    #[test]
    fn zeroed_blocks_skip_clearing() {
        let mut m = PhysMem::new(1024, 0);
        let mut s = stat();
        let blk = m.free_blocks()[0].0;
        assert!(m.mark_zeroed(Pfn(blk)));
        let a = m.alloc(9, gfp::ZERO | gfp::COMP, true, &mut s).unwrap();
        assert_eq!(a.cleared, 0, "zeroed block: no clear_page");
        assert_eq!(m.zeroed_free_pages, 512, "the other half stays zeroed");
        let b = m.alloc(9, gfp::ZERO, true, &mut s).unwrap();
        assert_eq!(b.cleared, 0);
        let c = m.alloc(0, gfp::ZERO, true, &mut s);
        assert!(c.is_none());
        m.free(a.pfn, 9, &mut s);
        assert_eq!(m.zeroed_free_pages, 0, "freed memory is never known to be zero");
        let d = m.alloc(0, gfp::ZERO, true, &mut s).unwrap();
        assert_eq!(d.cleared, 1);
    }

    #[test]
    fn fault_injection() {
        let mut m = PhysMem::new(4096, 0);
        let mut s = stat();
        m.fail_min_order = Some(9);
        assert!(m.alloc(9, gfp::COMP, true, &mut s).is_none());
        assert!(m.alloc(0, 0, true, &mut s).is_some());
        m.fail_min_order = None;
        m.fail_every = 3;
        let ok: Vec<bool> = (0..6).map(|_| m.alloc(0, 0, true, &mut s).is_some()).collect();
        // attempts 3..8 (two were made above): the 3rd and 6th fail.
        assert_eq!(ok, vec![false, true, true, false, true, true]);
        assert_eq!(s.events[VmEvent::AllocFailInjected], 3);
    }
}
