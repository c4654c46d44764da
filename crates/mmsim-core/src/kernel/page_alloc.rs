//! The buddy allocator (mm/page_alloc.c) with seed 002's zeroed free memory: per-order free
//! lists of blocks known to be zero and of blocks that are not (the seed's `free_area[ZEROED]`
//! and `free_area[NOT_ZEROED]`), `__GFP_ZERO`, `init_on_alloc`/`init_on_free`, the blocks
//! kscrubd takes off the lists to zero, and deterministic fault injection
//! (mm/fail_page_alloc.c). Differs from Linux: one zone, per-cpu page lists modelled for their
//! cost only (`Pcp`), no migratetypes and no compaction; reclaim is the caller's (see
//! `Kernel::alloc_pages`).

use super::content::PageContent;
use super::mm_types::{pg, FrameData, ObjTable, Page, NIL};

/// Host bytes of one compact table (`FrameData::ObjTable`) and its content slot.
pub const OBJ_TABLE_BYTES: u64 = std::mem::size_of::<ObjTable>() as u64;
use super::vmstat::{VmEvent, VmStat};
use crate::units::Pfn;

/// Largest buddy order (MAX_PAGE_ORDER): 4 MiB blocks of 4 KiB pages.
pub const MAX_ORDER: u32 = 10;

const ORDERS: usize = MAX_ORDER as usize + 1;
/// Index of the free lists of blocks not known to be zero (seed 002's `NOT_ZEROED`).
pub const NOT_ZEROED: usize = 0;
/// Index of the free lists of blocks known to be zero (seed 002's `ZEROED`).
pub const ZEROED: usize = 1;

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
    /// `__GFP_KSWAPD_RECLAIM`: an allocation below the low watermark wakes kswapd.
    pub const KSWAPD_RECLAIM: u32 = 1 << 5;
    /// `__GFP_NORETRY`: give up after one round of reclaim.
    pub const NORETRY: u32 = 1 << 6;
    /// `__GFP_RETRY_MAYFAIL`: retry as long as reclaim progresses, but never OOM-kill.
    pub const RETRY_MAYFAIL: u32 = 1 << 7;
    /// `__GFP_NOFAIL`.
    pub const NOFAIL: u32 = 1 << 8;
    /// `__GFP_HIGH`: may dip into half the min reserve (and a memcg charge may exceed its
    /// limit).
    pub const HIGH: u32 = 1 << 9;
    /// `__GFP_IO` (and `__GFP_FS`): reclaim may start I/O (write to swap).
    pub const IO: u32 = 1 << 10;
    /// `__GFP_MOVABLE` (with __GFP_HIGHMEM): user memory, ZONE_MOVABLE's for allocstall.
    pub const MOVABLE: u32 = 1 << 11;
    /// `__GFP_WRITE`: a page-cache folio allocated for a write (its refault is not one).
    pub const WRITE: u32 = 1 << 12;
    /// `GFP_KERNEL`.
    pub const KERNEL: u32 = DIRECT_RECLAIM | KSWAPD_RECLAIM | IO;
    /// `GFP_HIGHUSER_MOVABLE`: user pages (anonymous, page cache, swap-in).
    pub const HIGHUSER_MOVABLE: u32 = USER | KERNEL | MOVABLE;

    /// The flags as `show_gfp_flags` prints them in tracepoints.
    pub fn name(g: u32) -> String {
        let named = [
            (HIGHUSER_MOVABLE, "GFP_HIGHUSER_MOVABLE"),
            (KERNEL, "GFP_KERNEL"),
            (ZERO, "__GFP_ZERO"),
            (COMP, "__GFP_COMP"),
            (DIRECT_RECLAIM, "__GFP_DIRECT_RECLAIM"),
            (KSWAPD_RECLAIM, "__GFP_KSWAPD_RECLAIM"),
            (NORETRY, "__GFP_NORETRY"),
            (RETRY_MAYFAIL, "__GFP_RETRY_MAYFAIL"),
            (NOFAIL, "__GFP_NOFAIL"),
            (HIGH, "__GFP_HIGH"),
            (IO, "__GFP_IO"),
            (MOVABLE, "__GFP_MOVABLE"),
        ];
        let mut left = g & !TABLE;
        let mut out = Vec::new();
        for (bits, n) in named {
            if left & bits == bits && bits != 0 {
                out.push(n);
                left &= !bits;
            }
        }
        if out.is_empty() {
            "0".into()
        } else {
            out.join("|")
        }
    }
}

/// Which path of the kernel clears a block: it names the block's counter
/// (`mmsim_pgzero_*`) and decides its cost (kscrubd's goes to its engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClearPath {
    /// A `__GFP_ZERO` allocation found no zeroed block and cleared the one it took, in the
    /// caller's context (`prep_zero_page`; seed 002's one `clear_page(addr, order)` in
    /// `buffered_rmqueue`): hot zeroing.
    Alloc,
    /// The fault clears the user page it allocated (`clear_user_highpage`, `folio_zero_user`
    /// of Linux >= 6.13, when `user_alloc_needs_zeroing()`).
    User,
    /// `init_on_alloc=1`: `post_alloc_hook` clears every allocation (`kernel_init_pages`).
    InitOnAlloc,
    /// `init_on_free=1`: `free_pages_prepare` clears every freed block.
    InitOnFree,
    /// kscrubd zeroes a free block ahead of its use (seed 002's `zero_highest_order_page`).
    Kscrubd,
}

impl ClearPath {
    /// The vmstat event counting the base pages this path clears.
    pub fn event(self) -> VmEvent {
        match self {
            ClearPath::Alloc => VmEvent::PgZeroAlloc,
            ClearPath::User => VmEvent::PgZeroUser,
            ClearPath::InitOnAlloc => VmEvent::PgZeroInitOnAlloc,
            ClearPath::InitOnFree => VmEvent::PgZeroInitOnFree,
            ClearPath::Kscrubd => VmEvent::PgZeroKscrubd,
        }
    }
}

/// Host bytes of one frame's `struct page` and content slot (`PhysMem::metadata_bytes`).
pub const FRAME_METADATA_BYTES: u64 = (std::mem::size_of::<Page>() + std::mem::size_of::<FrameData>()) as u64;

/// Outcome of a successful allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocated {
    pub pfn: Pfn,
    /// Base pages that must be cleared (the block was not known to be zero and the request
    /// or `init_on_alloc` wants it zero); the caller clears them, by `clear`'s path.
    pub cleared: u64,
    /// The path that must clear them (None when `cleared` is 0).
    pub clear: Option<ClearPath>,
    /// The block came from the zeroed lists: its frames hold zeroes.
    pub zeroed: bool,
}

/// Physical memory: the `mem_map` array, frame contents and the zone's free areas.
pub struct PhysMem {
    pub pages: Vec<Page>,
    pub data: Vec<FrameData>,
    /// Heads of the free lists, `[NOT_ZEROED | ZEROED][order]`.
    free_head: [[u32; ORDERS]; 2],
    nr_free: [[u64; ORDERS]; 2],
    /// Free base pages in total and in zeroed blocks (seed 002's `zone->zero_pages`).
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
    /// Entries per page table (the geometry's PTRS_PER_TABLE).
    pub table_entries: usize,
    /// The entries of every table with entries, `table_entries` per slot.
    table_pool: Vec<u64>,
    /// Slots of freed tables, reused first.
    table_free: Vec<u32>,
    /// Frames holding a page table with entries (`FrameData::Table`).
    pub tables: u64,
    /// The compact tables (`FrameData::ObjTable`), and the slots of freed ones.
    pub obj_tables: Vec<ObjTable>,
    obj_free: Vec<u32>,
    /// `init_on_alloc` (boot parameter): every allocation is cleared.
    pub init_on_alloc: bool,
    /// `init_on_free` (boot parameter): every freed block is cleared and kept as zeroed.
    pub init_on_free: bool,
    /// `vm/scrub_merge=separate`: a zeroed and a not-zeroed buddy never coalesce (the seed's
    /// V3 code, whose two lists have a bitmap each); otherwise they coalesce into a block that
    /// is not zeroed (a merged block is zeroed only if both halves were).
    pub merge_separate: bool,
    /// `vm/scrub_start`: a free that coalesces to this order or higher asks for kscrubd.
    pub scrub_start: Option<u32>,
    /// A free coalesced to at least `scrub_start` since the kernel last looked
    /// (`wakeup_kscrubd`'s call in `free_pages_bulk`).
    pub scrub_wake: bool,
    /// The block kscrubd took off the free lists to zero (`scrubd_rmpage`) and has not yet
    /// given back (`end_zero_page`): (pfn, order).
    pub scrubbing: Option<(u32, u32)>,
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
            free_head: [[NIL; ORDERS]; 2],
            nr_free: [[0; ORDERS]; 2],
            free_pages: 0,
            zeroed_free_pages: 0,
            reserved,
            attempts: 0,
            fail_min_order: None,
            fail_every: 0,
            last_fail_injected: false,
            content_bytes: 0,
            table_entries: 512,
            table_pool: Vec::new(),
            table_free: Vec::new(),
            obj_tables: Vec::new(),
            obj_free: Vec::new(),
            tables: 0,
            init_on_alloc: false,
            init_on_free: false,
            merge_separate: false,
            scrub_start: None,
            scrub_wake: false,
            scrubbing: None,
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

    /// `init_on_free=1` at boot: memblock_free_all clears all of memory as it frees it ("mem
    /// auto-init: clearing system memory may take some time..."), so every free block starts
    /// zeroed. Deliberately different: the boot's clearing is not part of any run, so it costs
    /// nothing here.
    pub fn boot_init_on_free(&mut self) {
        for order in 0..=MAX_ORDER {
            while self.free_head[NOT_ZEROED][order as usize] != NIL {
                let pfn = self.free_head[NOT_ZEROED][order as usize];
                self.del_from_free_list(pfn, order);
                self.zero_frames(pfn, 1 << order);
                self.add_to_free_list(pfn, order, true);
            }
        }
    }

    pub fn nr_pages(&self) -> u64 {
        self.pages.len() as u64
    }

    /// Replace the contents of frame `i`, keeping `content_bytes` and `tables` up to date
    /// (a table with entries is made only by `take_table`).
    pub fn set_data(&mut self, i: usize, d: FrameData) {
        debug_assert!(!matches!(d, FrameData::Table(_) | FrameData::ObjTable(_)));
        self.content_bytes += d.heap_bytes();
        let old = std::mem::replace(&mut self.data[i], d);
        self.content_bytes -= old.heap_bytes();
        match old {
            FrameData::Table(slot) => {
                self.tables -= 1;
                self.content_bytes -= super::mm_types::table_host_bytes(self.table_entries);
                self.table_free.push(slot);
            }
            FrameData::ObjTable(slot) => {
                self.content_bytes -= OBJ_TABLE_BYTES;
                self.obj_free.push(slot);
            }
            _ => {}
        }
    }

    /// Make frame `i` (an empty table) a compact table of object `obj`'s pages from `base`.
    pub fn take_obj_table(&mut self, i: usize, obj: u32, base: u64, flags: u64) -> u32 {
        let t = ObjTable { obj, base, flags, ..Default::default() };
        let slot = match self.obj_free.pop() {
            Some(s) => {
                self.obj_tables[s as usize] = t;
                s
            }
            None => {
                self.obj_tables.push(t);
                (self.obj_tables.len() - 1) as u32
            }
        };
        self.content_bytes += OBJ_TABLE_BYTES;
        self.data[i] = FrameData::ObjTable(slot);
        slot
    }

    /// Turn compact table `i` into a table with entries (a slot of the pool) holding
    /// `entries`; returns the pool slot.
    pub fn expand_obj_table(&mut self, i: usize, entries: &[u64]) -> u32 {
        let FrameData::ObjTable(o) = self.data[i] else { panic!("not a compact table") };
        self.content_bytes -= OBJ_TABLE_BYTES;
        self.obj_free.push(o);
        self.data[i] = FrameData::EmptyTable;
        let s = self.take_table(i);
        for (k, &e) in entries.iter().enumerate() {
            *self.table_entry_mut(s, k) = e;
        }
        s
    }

    /// A zeroed slot of the table pool for frame `i`, which becomes a table with entries.
    pub fn take_table(&mut self, i: usize) -> u32 {
        let n = self.table_entries;
        let slot = match self.table_free.pop() {
            Some(s) => {
                self.table_pool[s as usize * n..(s as usize + 1) * n].fill(0);
                s
            }
            None => {
                self.table_pool.resize(self.table_pool.len() + n, 0);
                (self.table_pool.len() / n - 1) as u32
            }
        };
        self.tables += 1;
        self.content_bytes += super::mm_types::table_host_bytes(n);
        self.data[i] = FrameData::Table(slot);
        slot
    }

    /// Entry `idx` (below `table_entries`) of a table slot.
    #[inline(always)]
    pub fn table_entry(&self, slot: u32, idx: usize) -> u64 {
        debug_assert!(idx < self.table_entries);
        self.table_pool[(slot as usize) << self.table_entries.trailing_zeros() | idx]
    }

    /// Every entry of a table slot.
    #[inline]
    pub fn table_slot_entries(&self, slot: u32) -> &[u64] {
        let start = (slot as usize) << self.table_entries.trailing_zeros();
        &self.table_pool[start..start + self.table_entries]
    }

    /// Entry `idx` of a table slot, to write.
    #[inline(always)]
    pub fn table_entry_mut(&mut self, slot: u32, idx: usize) -> &mut u64 {
        debug_assert!(idx < self.table_entries);
        &mut self.table_pool[(slot as usize) << self.table_entries.trailing_zeros() | idx]
    }

    /// Make `pages` frames from `pfn` on hold zeroes (what clearing them leaves).
    pub fn zero_frames(&mut self, pfn: u32, pages: u64) {
        for i in 0..pages as u32 {
            if !matches!(self.data[(pfn + i) as usize], FrameData::Zero) {
                self.set_data((pfn + i) as usize, FrameData::Zero);
            }
        }
    }

    /// Host bytes of `mem_map` and the frames' content slots (fixed at boot).
    pub fn metadata_bytes(&self) -> u64 {
        (self.pages.capacity() * std::mem::size_of::<Page>() + self.data.capacity() * std::mem::size_of::<FrameData>())
            as u64
    }

    /// Host bytes of the page tables with entries.
    pub fn table_bytes(&self) -> u64 {
        self.tables * super::mm_types::table_host_bytes(self.table_entries)
            + (self.obj_tables.len() - self.obj_free.len()) as u64 * OBJ_TABLE_BYTES
    }

    /// Free blocks per order, both lists together (`/proc/buddyinfo`).
    pub fn buddyinfo(&self) -> Vec<u64> {
        (0..ORDERS).map(|o| self.nr_free[NOT_ZEROED][o] + self.nr_free[ZEROED][o]).collect()
    }

    /// Zeroed free blocks per order (seed 002's `zero:` column of show_free_areas).
    pub fn zeroed_buddyinfo(&self) -> Vec<u64> {
        self.nr_free[ZEROED].to_vec()
    }

    fn add_to_free_list(&mut self, pfn: u32, order: u32, zeroed: bool) {
        let list = zeroed as usize;
        let head = self.free_head[list][order as usize];
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
        self.free_head[list][order as usize] = pfn;
        self.nr_free[list][order as usize] += 1;
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
        let list = zeroed as usize;
        if prev != NIL {
            self.pages[prev as usize].next = next;
        } else {
            self.free_head[list][order as usize] = next;
        }
        if next != NIL {
            self.pages[next as usize].prev = prev;
        }
        let p = &mut self.pages[pfn as usize];
        p.flags &= !(pg::BUDDY | pg::ZEROED);
        p.next = NIL;
        p.prev = NIL;
        self.nr_free[list][order as usize] -= 1;
        self.free_pages -= 1 << order;
        if zeroed {
            self.zeroed_free_pages -= 1 << order;
        }
        zeroed
    }

    /// Whether a free block of at least `order` exists (`__zone_watermark_ok`'s order check).
    pub fn has_free_block(&self, order: u32) -> bool {
        (order..=MAX_ORDER).any(|o| self.nr_free[NOT_ZEROED][o as usize] + self.nr_free[ZEROED][o as usize] > 0)
    }

    /// `should_fail_alloc_page`: the fault-injection decision for one attempt.
    fn should_fail(&mut self, order: u32) -> bool {
        self.attempts += 1;
        if self.fail_min_order.is_some_and(|m| order >= m) {
            return true;
        }
        self.fail_every > 0 && self.attempts.is_multiple_of(self.fail_every)
    }

    /// `__rmqueue` on one list: the smallest block of at least `order` on it.
    fn find_block(&self, list: usize, order: u32) -> Option<(u32, u32)> {
        (order..=MAX_ORDER).map(|o| (self.free_head[list][o as usize], o)).find(|&(p, _)| p != NIL)
    }

    /// `__alloc_pages` without reclaim. A `__GFP_ZERO` request takes a zeroed block when one
    /// is free and any other request a block that is not zeroed, each falling back to the
    /// other list (seed 002's `buffered_rmqueue`, so that zeroed blocks last). The block is
    /// split (`expand`, the halves keep its state) and prepared; `post_alloc_hook` decides
    /// whether it must be cleared (`init = !init_on_free && (init_on_alloc || __GFP_ZERO)`,
    /// skipped for a zeroed block), which the caller does. None when injection or a lack of
    /// free blocks fails it.
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
        let want_zero = gfp_flags & gfp::ZERO != 0;
        let (first, second) = if want_zero { (ZEROED, NOT_ZEROED) } else { (NOT_ZEROED, ZEROED) };
        let (pfn, found) = self.find_block(first, order).or_else(|| self.find_block(second, order))?;
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
        match (want_zero, zeroed) {
            (true, true) => stat.count_n(VmEvent::PgZeroed, n as i64),
            (true, false) => stat.count_n(VmEvent::PgZeroMiss, n as i64),
            (false, true) => stat.count_n(VmEvent::PgZeroedWasted, n as i64),
            (false, false) => {}
        }
        // post_alloc_hook: init_on_free already cleared every free block.
        let init = !self.init_on_free && (self.init_on_alloc || want_zero);
        let clear =
            (init && !zeroed).then_some(if self.init_on_alloc { ClearPath::InitOnAlloc } else { ClearPath::Alloc });
        Some(Allocated { pfn: Pfn(pfn), cleared: if clear.is_some() { n } else { 0 }, clear, zeroed })
    }

    /// `__free_pages_ok`: return a block and merge it with free buddies. A block cleared by
    /// `init_on_free` (the caller did it) goes back zeroed; otherwise stale data stays in the
    /// frames (a freed page-table page keeps stale bytes too) and the block is not zeroed.
    /// Returns the order of the block it coalesced into.
    pub fn free(&mut self, pfn: Pfn, order: u32, zeroed: bool, stat: &mut VmStat) -> u32 {
        let n = 1u64 << order;
        stat.count_n(VmEvent::PgFree, n as i64);
        if !zeroed {
            for i in 0..n as u32 {
                if let FrameData::Table(_) | FrameData::EmptyTable | FrameData::ObjTable(_) =
                    self.data[(pfn.0 + i) as usize]
                {
                    self.set_data((pfn.0 + i) as usize, FrameData::Data(PageContent::filled(0xaa)));
                }
            }
        }
        self.free_one(pfn.0, order, zeroed)
    }

    /// `__free_one_page`: coalesce with free buddies of the same order (a zeroed block with a
    /// not-zeroed one only unless `merge_separate`; the result is zeroed only if both were),
    /// put the result on its list, and note a coalesced block of `scrub_start` or more.
    fn free_one(&mut self, pfn: u32, order: u32, zeroed: bool) -> u32 {
        let (mut pfn, mut order, mut zeroed) = (pfn, order, zeroed);
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
            let bz = b.test(pg::ZEROED);
            if self.merge_separate && bz != zeroed {
                break;
            }
            self.del_from_free_list(buddy, order);
            zeroed &= bz;
            pfn = pfn.min(buddy);
            order += 1;
        }
        self.add_to_free_list(pfn, order, zeroed);
        if !zeroed && self.scrub_start.is_some_and(|s| order >= s) {
            self.scrub_wake = true;
        }
        order
    }

    /// `scrubd_rmpage` as `zero_highest_order_page` calls it: take the first not-zeroed free
    /// block of the highest order at or above `stop` off the lists for kscrubd to zero.
    pub fn scrubd_rmpage(&mut self, stop: u32) -> Option<(Pfn, u32)> {
        debug_assert!(self.scrubbing.is_none());
        let order = (stop..=MAX_ORDER).rev().find(|&o| self.free_head[NOT_ZEROED][o as usize] != NIL)?;
        let pfn = self.free_head[NOT_ZEROED][order as usize];
        self.del_from_free_list(pfn, order);
        self.scrubbing = Some((pfn, order));
        Some((Pfn(pfn), order))
    }

    /// `end_zero_page`: the block kscrubd zeroed goes back to the free lists as zeroed
    /// (coalescing with its buddies). Returns its order.
    pub fn end_zero_page(&mut self) -> Option<u32> {
        let (pfn, order) = self.scrubbing.take()?;
        self.zero_frames(pfn, 1 << order);
        Some(self.free_one(pfn, order, true))
    }

    /// Free base pages in blocks of `order` or more that are not zeroed (kscrubd's work left).
    pub fn unzeroed_pages_from(&self, order: u32) -> u64 {
        (order..=MAX_ORDER).map(|o| self.nr_free[NOT_ZEROED][o as usize] << o).sum()
    }

    /// Mark a free block as zeroed (as kscrubd's `end_zero_page` leaves it); the caller
    /// cleared it. Tests use it to set up zeroed memory.
    pub fn mark_zeroed(&mut self, pfn: Pfn) -> bool {
        let p = &self.pages[pfn.idx()];
        if !p.test(pg::BUDDY) || p.test(pg::ZEROED) {
            return false;
        }
        let order = p.order as u32;
        self.del_from_free_list(pfn.0, order);
        self.zero_frames(pfn.0, 1 << order);
        self.add_to_free_list(pfn.0, order, true);
        true
    }

    /// Every free block as (pfn, order, zeroed), for the conservation check.
    pub fn free_blocks(&self) -> Vec<(u32, u32, bool)> {
        let mut v = Vec::new();
        for list in [NOT_ZEROED, ZEROED] {
            for o in 0..=MAX_ORDER {
                let mut p = self.free_head[list][o as usize];
                while p != NIL {
                    let pg = &self.pages[p as usize];
                    v.push((p, o, pg.test(pg::ZEROED)));
                    p = pg.next;
                }
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
        m.free(a.pfn, 0, false, &mut s);
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
            m.free(*p, 0, false, &mut s);
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
        m.free(a.pfn, 9, false, &mut s);
        assert_eq!(m.zeroed_free_pages, 0, "freed memory is never known to be zero");
        let d = m.alloc(0, gfp::ZERO, true, &mut s).unwrap();
        assert_eq!(d.cleared, 1);
    }

    /// Seed 002's free lists: a zeroed block splits into zeroed halves; `__GFP_ZERO` takes
    /// zeroed memory first and clears nothing; other requests take dirty memory first and
    /// only then zeroed ("wasted"); the merge rule decides what a freed block joins.
    #[test]
    fn zeroed_lists_split_prefer_and_merge() {
        let mut m = PhysMem::new(2048, 0);
        let mut s = stat();
        assert_eq!(m.buddyinfo(), vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert!(m.mark_zeroed(Pfn(1024)));
        assert_eq!((m.zeroed_free_pages, m.zeroed_buddyinfo()[10]), (1024, 1));
        // A plain request takes the dirty block, even though it must split it.
        let a = m.alloc(0, 0, true, &mut s).unwrap();
        assert_eq!((a.pfn, a.zeroed, a.clear), (Pfn(0), false, None));
        // __GFP_ZERO takes the zeroed block: split, the halves stay zeroed, no clear.
        let z = m.alloc(0, gfp::ZERO, true, &mut s).unwrap();
        assert_eq!((z.pfn, z.zeroed, z.cleared), (Pfn(1024), true, 0));
        assert_eq!(m.zeroed_free_pages, 1023);
        assert_eq!(m.zeroed_buddyinfo(), vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
        assert_eq!(s.events[VmEvent::PgZeroed], 1);
        // Freeing the zeroed page dirty: with the default rule it merges with its zeroed
        // buddies into one dirty order-10 block (the zeroing is lost) and asks for kscrubd.
        m.scrub_start = Some(10);
        m.free(z.pfn, 0, false, &mut s);
        assert_eq!((m.zeroed_free_pages, m.buddyinfo()[10], m.scrub_wake), (0, 1, true));
        // The seed's separate lists: it stays an order-0 dirty block beside them.
        let mut m2 = PhysMem::new(2048, 0);
        m2.merge_separate = true;
        m2.scrub_start = Some(10);
        m2.mark_zeroed(Pfn(1024));
        let z = m2.alloc(0, gfp::ZERO, true, &mut s).unwrap();
        m2.free(z.pfn, 0, false, &mut s);
        assert_eq!(
            (m2.zeroed_free_pages, m2.buddyinfo()[0], m2.zeroed_buddyinfo()[0], m2.scrub_wake),
            (1023, 2, 1, false)
        );
        // kscrubd zeroes the dirty page (the highest dirty block at or above order 0 is the
        // order-10 one first) and gives it back: zeroed halves coalesce into a zeroed block.
        m2.scrubd_rmpage(0);
        m2.end_zero_page();
        assert_eq!(m2.scrubd_rmpage(0), Some((z.pfn, 0)));
        assert_eq!(m2.end_zero_page(), Some(10));
        assert_eq!((m2.zeroed_free_pages, m2.zeroed_buddyinfo()[10]), (2048, 2));
    }

    #[test]
    fn a_plain_request_takes_zeroed_memory_last_and_counts_it_wasted() {
        let mut m = PhysMem::new(1024, 0);
        let mut s = stat();
        m.mark_zeroed(Pfn(0));
        let a = m.alloc(9, gfp::COMP, true, &mut s).unwrap();
        assert!(a.zeroed && a.clear.is_none());
        assert_eq!(s.events[VmEvent::PgZeroedWasted], 512);
        // __GFP_ZERO with no zeroed block left: a miss, cleared by the caller.
        m.free(a.pfn, 9, false, &mut s);
        let b = m.alloc(9, gfp::ZERO, true, &mut s).unwrap();
        assert_eq!((b.zeroed, b.cleared, b.clear), (false, 512, Some(ClearPath::Alloc)));
        assert_eq!(s.events[VmEvent::PgZeroMiss], 512);
    }

    /// `post_alloc_hook`'s decision: init_on_alloc clears every allocation (not again for a
    /// zeroed block); init_on_free makes every free block zeroed and no allocation clears.
    #[test]
    fn init_on_alloc_and_init_on_free_decide_the_clear() {
        let mut s = stat();
        let mut m = PhysMem::new(1024, 0);
        m.init_on_alloc = true;
        let a = m.alloc(0, 0, true, &mut s).unwrap();
        assert_eq!(a.clear, Some(ClearPath::InitOnAlloc));
        let mut m = PhysMem::new(1024, 0);
        m.init_on_free = true;
        m.boot_init_on_free();
        assert_eq!(m.zeroed_free_pages, 1024);
        let a = m.alloc(0, gfp::ZERO, true, &mut s).unwrap();
        assert_eq!((a.zeroed, a.clear), (true, None));
        m.set_data(a.pfn.idx(), FrameData::Data(PageContent::filled(1)));
        m.zero_frames(a.pfn.0, 1);
        m.free(a.pfn, 0, true, &mut s);
        assert_eq!((m.zeroed_free_pages, m.buddyinfo()[10]), (1024, 1), "cleared at free: merges back zeroed");
    }

    #[test]
    fn kscrubd_takes_the_highest_dirty_block_and_gives_it_back_zeroed() {
        let mut m = PhysMem::new(4096, 1);
        assert_eq!(m.unzeroed_pages_from(9), 3 * 1024 + 512);
        let (p, o) = m.scrubd_rmpage(9).unwrap();
        assert_eq!((o, m.free_pages), (10, 4095 - 1024), "off the lists while it is zeroed");
        assert_eq!(m.end_zero_page(), Some(10));
        assert_eq!(m.zeroed_free_pages, 1024);
        assert_eq!(m.free_blocks().iter().find(|b| b.0 == p.0), Some(&(p.0, 10, true)));
        while m.scrubd_rmpage(9).is_some() {
            m.end_zero_page();
        }
        assert_eq!((m.unzeroed_pages_from(9), m.unzeroed_pages_from(0)), (0, 511));
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

    proptest::proptest! {
        /// Random allocations, frees, kscrubd steps and policies: no `__GFP_ZERO` allocation
        /// ever gets a block that is neither zero nor cleared, the zeroed lists hold only
        /// zero frames, and the counters match the lists.
        #[test]
        fn gfp_zero_never_gets_dirty_memory(
            ops in proptest::collection::vec((0u8..6, 0u32..11, proptest::bool::ANY), 1..300),
            separate in proptest::bool::ANY,
            init_on_free in proptest::bool::ANY,
            init_on_alloc in proptest::bool::ANY,
        ) {
            let mut m = PhysMem::new(4096, 1);
            m.merge_separate = separate;
            m.init_on_alloc = init_on_alloc;
            m.init_on_free = init_on_free;
            if init_on_free {
                m.boot_init_on_free();
            }
            m.scrub_start = Some(3);
            let mut s = stat();
            let mut held: Vec<(Pfn, u32)> = Vec::new();
            for (kind, order, flag) in ops {
                match kind {
                    0..=2 => {
                        let flags = if flag { gfp::ZERO } else { 0 } | gfp::COMP;
                        let Some(a) = m.alloc(order.min(4), flags, true, &mut s) else { continue };
                        let n = 1u32 << order.min(4);
                        if let Some(_path) = a.clear {
                            m.zero_frames(a.pfn.0, 1 << order.min(4));
                        }
                        if flag || init_on_alloc {
                            for i in 0..n {
                                let d = &m.data[(a.pfn.0 + i) as usize];
                                proptest::prop_assert!(
                                    matches!(d, FrameData::Zero),
                                    "frame {:#x} of a zeroed allocation holds data", a.pfn.0 + i
                                );
                            }
                        }
                        // The user dirties it.
                        for i in 0..n {
                            m.set_data((a.pfn.0 + i) as usize, FrameData::Data(PageContent::filled(7)));
                        }
                        held.push((a.pfn, order.min(4)));
                    }
                    3 | 4 if !held.is_empty() => {
                        let (p, o) = held.swap_remove(order as usize % held.len());
                        if init_on_free {
                            m.zero_frames(p.0, 1 << o);
                        }
                        m.free(p, o, init_on_free, &mut s);
                    }
                    _ => {
                        if m.scrubbing.is_some() {
                            m.end_zero_page();
                        } else {
                            m.scrubd_rmpage(order.min(MAX_ORDER));
                        }
                    }
                }
                let mut zeroed = 0;
                for (p, o, z) in m.free_blocks() {
                    if z {
                        zeroed += 1u64 << o;
                        for i in 0..1u32 << o {
                            proptest::prop_assert!(matches!(m.data[(p + i) as usize], FrameData::Zero));
                        }
                    }
                }
                proptest::prop_assert_eq!(zeroed, m.zeroed_free_pages);
            }
        }
    }
}
