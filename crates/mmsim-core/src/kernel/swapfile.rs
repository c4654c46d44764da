//! Swap areas (mm/swapfile.c, Linux 6.18): `swapon` of the machine's swap devices, slot
//! allocation by cluster (`folio_alloc_swap`, `cluster_alloc_swap_entry`,
//! `alloc_swap_scan_cluster`), the slots' counts (`swap_map`: `swap_duplicate`,
//! `swap_free_nr`, `put_swap_folio`, `free_swap_and_cache_nr`), `folio_free_swap`,
//! `__try_to_reclaim_swap`, and what /proc/swaps, SwapTotal and SwapFree show.
//!
//! Each area keeps the data written to its slots (mmsim's: the device's contents), so a page
//! swapped out and read back holds what was written; a zero-filled page is written nowhere
//! (the zeromap). Differs from Linux: counts are plain integers (no continuation pages, no
//! SWAP_MAP_MAX), no discard, no swapoff; the per-CPU cluster cursors are kept for
//! non-rotational devices as Linux does.

use super::content::PageContent;
use super::mm_types::{pg, FrameData};
use super::pgtable::SwpEntry;
use super::Kernel;
use crate::fasthash::FastMap;
use crate::units::Pfn;
use crate::workload::spec_memcg::{SwapKind, SwapSpec};

/// `SWAP_HAS_CACHE`: the swap cache holds (or is about to hold) a folio for the slot.
pub const SWAP_HAS_CACHE: u32 = 1 << 31;
/// `SWAP_MAP_BAD`: the header page (or a bad block): never allocated.
pub const SWAP_MAP_BAD: u32 = (1 << 31) - 1;
/// Orders a cluster may serve (`SWAP_NR_ORDERS`: up to the PMD order).
pub const SWAP_NR_ORDERS: usize = 10;

/// Which list a cluster is on (`enum swap_cluster_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClusterFlag {
    /// Off every list (isolated by an allocation).
    #[default]
    None,
    Free,
    Nonfull,
    Frag,
    Full,
}

/// `struct swap_cluster_info`.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Slots allocated (the header and slots past the area's end counted in).
    pub count: u32,
    pub flag: ClusterFlag,
    /// The folio order it serves once it holds a large allocation.
    pub order: u8,
    /// The swap table (6.18's swap cache): per slot 0 (empty), a folio (`TABLE_FOLIO | head`)
    /// or a shadow (`TABLE_SHADOW | value`); None while the cluster is free. Its page is a
    /// kernel page of the machine (`table_pfn`).
    pub table: Option<Box<[u64]>>,
    pub table_pfn: u32,
    next: u32,
    prev: u32,
}

/// A swap table slot holding a folio (the low bits are its head frame).
pub const TABLE_FOLIO: u64 = 1 << 62;
/// A swap table slot holding a workingset shadow (the low bits).
pub const TABLE_SHADOW: u64 = 1 << 63;

const NIL: u32 = u32::MAX;

/// A list of clusters by index, linked through the clusters (`struct list_head`).
#[derive(Clone, Copy, Debug)]
struct ClusterList {
    head: u32,
    tail: u32,
}

impl Default for ClusterList {
    fn default() -> Self {
        ClusterList { head: NIL, tail: NIL }
    }
}

/// `struct swap_info_struct`.
#[derive(Clone, Debug)]
pub struct SwapInfo {
    pub ty: usize,
    pub kind: SwapKind,
    pub prio: i32,
    /// Slots, the header included.
    pub max: u32,
    /// Usable slots (`max - 1`).
    pub pages: u32,
    pub inuse: u32,
    /// `swap_map`: each slot's count of swap ptes (and shmem references), with
    /// `SWAP_HAS_CACHE`.
    pub map: Vec<u32>,
    /// `zeromap`: slots holding a zero-filled page (no data written).
    pub zeromap: Vec<u64>,
    pub clusters: Vec<Cluster>,
    free: ClusterList,
    nonfull: [ClusterList; SWAP_NR_ORDERS],
    frag: [ClusterList; SWAP_NR_ORDERS],
    full: ClusterList,
    /// A rotational device's allocation cursor per order (`global_cluster->next`).
    global_next: [u32; SWAP_NR_ORDERS],
    /// SWP_SOLIDSTATE: not rotational (per-CPU cursors, VMA readahead).
    pub solidstate: bool,
    /// SWP_BLKDEV: a partition (a swap file has no large entries in 6.18).
    pub blkdev: bool,
    /// The data written to each slot that is not zero-filled (the device's contents).
    pub data: FastMap<u32, PageContent>,
    /// `swap_cgroup`: the memcg each allocated slot is charged to.
    pub memcg: Vec<u16>,
    /// Its name in /proc/swaps.
    pub name: String,
}

/// Every swap area, and the global counts.
#[derive(Clone, Debug, Default)]
pub struct SwapState {
    pub si: Vec<SwapInfo>,
    /// `nr_swap_pages`: free usable slots.
    pub nr_swap_pages: i64,
    /// `total_swap_pages`.
    pub total_swap_pages: i64,
    /// `least_priority`: the last automatic priority given.
    least_priority: i32,
    /// The areas by priority, highest first; equal ones in round-robin order
    /// (`swap_avail_heads`' plist), those not full.
    avail: Vec<usize>,
    /// `percpu_swap_cluster`: per CPU and order, the area and slot to allocate from next
    /// (non-rotational areas; 0 slot: none).
    percpu: Vec<[(usize, u32); SWAP_NR_ORDERS]>,
    /// `nr_rotate_swap`: rotational areas enabled (VMA readahead is then off everywhere).
    pub nr_rotate_swap: u32,
    /// The cluster readahead's state (`swap_cluster_readahead`'s statics).
    pub ra_prev_offset: u32,
    pub ra_last_pages: u32,
    pub ra_hits: u32,
}

impl SwapInfo {
    fn list(&mut self, flag: ClusterFlag, order: usize) -> &mut ClusterList {
        match flag {
            ClusterFlag::Free => &mut self.free,
            ClusterFlag::Nonfull => &mut self.nonfull[order],
            ClusterFlag::Frag => &mut self.frag[order],
            ClusterFlag::Full => &mut self.full,
            ClusterFlag::None => unreachable!("no list"),
        }
    }

    fn list_del(&mut self, ci: u32) {
        let (flag, order) = (self.clusters[ci as usize].flag, self.clusters[ci as usize].order as usize);
        if flag == ClusterFlag::None {
            return;
        }
        let (n, p) = (self.clusters[ci as usize].next, self.clusters[ci as usize].prev);
        let l = *self.list(flag, order);
        let mut l2 = l;
        if p == NIL {
            l2.head = n;
        } else {
            self.clusters[p as usize].next = n;
        }
        if n == NIL {
            l2.tail = p;
        } else {
            self.clusters[n as usize].prev = p;
        }
        *self.list(flag, order) = l2;
        let c = &mut self.clusters[ci as usize];
        c.next = NIL;
        c.prev = NIL;
        c.flag = ClusterFlag::None;
    }

    /// `move_cluster`: off its list, onto the tail of `flag`'s (of its order).
    fn move_cluster(&mut self, ci: u32, flag: ClusterFlag) {
        self.list_del(ci);
        let order = self.clusters[ci as usize].order as usize;
        let l = *self.list(flag, order);
        let mut l2 = l;
        self.clusters[ci as usize].prev = l.tail;
        self.clusters[ci as usize].next = NIL;
        if l.tail == NIL {
            l2.head = ci;
        } else {
            self.clusters[l.tail as usize].next = ci;
        }
        l2.tail = ci;
        *self.list(flag, order) = l2;
        self.clusters[ci as usize].flag = flag;
    }

    fn list_head(&self, flag: ClusterFlag, order: usize) -> u32 {
        match flag {
            ClusterFlag::Free => self.free.head,
            ClusterFlag::Nonfull => self.nonfull[order].head,
            ClusterFlag::Frag => self.frag[order].head,
            ClusterFlag::Full => self.full.head,
            ClusterFlag::None => NIL,
        }
    }

    /// The slot's count of references (`swap_count`).
    #[inline]
    pub fn count(&self, off: u32) -> u32 {
        self.map[off as usize] & !SWAP_HAS_CACHE
    }

    fn zeromap_set(&mut self, off: u32, v: bool) {
        let (w, b) = (off as usize / 64, off % 64);
        if v {
            self.zeromap[w] |= 1 << b;
        } else {
            self.zeromap[w] &= !(1 << b);
        }
    }

    /// Whether the slot holds a zero-filled page.
    pub fn zeromap_test(&self, off: u32) -> bool {
        self.zeromap[off as usize / 64] & (1 << (off % 64)) != 0
    }

    /// The swap table value of a slot (0: nothing).
    #[inline]
    pub fn table(&self, off: u32, cluster: u32) -> u64 {
        let c = &self.clusters[(off / cluster) as usize];
        c.table.as_ref().map_or(0, |t| t[(off % cluster) as usize])
    }

    fn cluster_is_usable(&self, ci: u32, order: usize, cluster: u32) -> bool {
        let c = &self.clusters[ci as usize];
        c.flag != ClusterFlag::Full
            && c.table.is_some()
            && (order == 0 || c.count == 0 || c.order as usize == order)
            && c.count < cluster
    }
}

impl Kernel {
    /// Slots per cluster (`SWAPFILE_CLUSTER`: HPAGE_PMD_NR with THP_SWAP).
    #[inline]
    pub fn swap_cluster(&self) -> u32 {
        self.geo.hpage_pmd_nr() as u32
    }

    /// `swapon` of the machine's swap devices, in order, at boot (an area of `size` bytes:
    /// mkswap's header in slot 0; priorities given, or -2, -3, ...).
    pub fn swapon_all(&mut self, specs: &[SwapSpec]) {
        self.swap.least_priority = -1;
        for (i, s) in specs.iter().enumerate() {
            self.swapon(s, i);
        }
    }

    fn swapon(&mut self, s: &SwapSpec, i: usize) {
        let cluster = self.swap_cluster();
        let max = (s.size.0 / self.geo.page_size()) as u32;
        let nr_clusters = max.div_ceil(cluster);
        let prio = match s.priority {
            Some(p) if p >= 0 => p,
            Some(p) => {
                self.swap.least_priority = self.swap.least_priority.min(p);
                p
            }
            None => {
                self.swap.least_priority -= 1;
                self.swap.least_priority
            }
        };
        let kind = s.kind;
        let name = match kind {
            SwapKind::File => format!("/swapfile{i}"),
            SwapKind::Partition => format!("/dev/vdb{}", i + 1),
        };
        let rotational = self.blk.timing.rotational;
        let mut si = SwapInfo {
            ty: i,
            kind,
            prio,
            max,
            pages: max - 1,
            inuse: 0,
            map: vec![0; max as usize],
            zeromap: vec![0; (max as usize).div_ceil(64)],
            clusters: vec![Cluster { next: NIL, prev: NIL, ..Default::default() }; nr_clusters as usize],
            free: ClusterList::default(),
            nonfull: Default::default(),
            frag: Default::default(),
            full: ClusterList::default(),
            global_next: [0; SWAP_NR_ORDERS],
            solidstate: !rotational,
            blkdev: kind == SwapKind::Partition,
            data: FastMap::default(),
            memcg: vec![0; max as usize],
            name,
        };
        // setup_swap_map / setup_clusters: the header and the slots past the end are
        // counted in their clusters, which start on nonfull[0] with their tables; the others
        // on the free list without.
        si.map[0] = SWAP_MAP_BAD;
        si.clusters[0].count += 1;
        let past = nr_clusters * cluster - max;
        si.clusters[nr_clusters as usize - 1].count += past;
        for ci in 0..nr_clusters {
            if si.clusters[ci as usize].count > 0 {
                si.move_cluster(ci, ClusterFlag::Nonfull);
            } else {
                si.move_cluster(ci, ClusterFlag::Free);
            }
        }
        let pages = si.pages as i64;
        self.swap.si.push(si);
        for ci in 0..nr_clusters {
            if self.swap.si[i].clusters[ci as usize].count > 0 {
                self.swap_cluster_alloc_table(i, ci);
            }
        }
        if rotational {
            self.swap.nr_rotate_swap += 1;
        }
        self.swap.nr_swap_pages += pages;
        self.swap.total_swap_pages += pages;
        self.swap.avail.push(i);
        self.swap_sort_avail();
    }

    /// The avail list in priority order, a stable sort (equal ones keep their turn order).
    fn swap_sort_avail(&mut self) {
        let si = &self.swap.si;
        self.swap.avail.sort_by_key(|&t| std::cmp::Reverse(si[t].prio));
    }

    /// `swap_cluster_alloc_table`: the page a cluster's swap table lives in (a kernel page
    /// taken from the allocator; None when none is free, as the atomic allocation fails).
    fn swap_cluster_alloc_table(&mut self, ty: usize, ci: u32) -> bool {
        if self.swap.si[ty].clusters[ci as usize].table.is_some() {
            return true;
        }
        let Some(a) = self.alloc_pages(0, super::page_alloc::gfp::HIGH) else { return false };
        self.mem.pages[a.pfn.idx()].set(pg::RESERVED);
        self.kernel_pages += 1;
        let n = self.swap_cluster() as usize;
        let c = &mut self.swap.si[ty].clusters[ci as usize];
        c.table = Some(vec![0u64; n].into_boxed_slice());
        c.table_pfn = a.pfn.0;
        true
    }

    /// `__free_cluster`: an emptied cluster's table page goes back, and it joins the free
    /// list's tail.
    fn swap_free_cluster(&mut self, ty: usize, ci: u32) {
        let c = &mut self.swap.si[ty].clusters[ci as usize];
        if c.table.take().is_some() {
            let pfn = Pfn(c.table_pfn);
            self.mem.pages[pfn.idx()].clear(pg::RESERVED);
            self.kernel_pages -= 1;
            self.mem.pages[pfn.idx()].refcount = 1;
            self.folio_put(pfn);
        }
        let si = &mut self.swap.si[ty];
        si.clusters[ci as usize].order = 0;
        si.move_cluster(ci, ClusterFlag::Free);
    }

    /// `relocate_cluster` after an allocation: a cluster left partly used goes to frag[order],
    /// a full one to full.
    fn relocate_cluster(&mut self, ty: usize, ci: u32) {
        let cluster = self.swap_cluster();
        let si = &mut self.swap.si[ty];
        let c = &si.clusters[ci as usize];
        if c.count == 0 {
            if c.flag != ClusterFlag::Free {
                self.swap_free_cluster(ty, ci);
            }
            return;
        }
        if c.count >= cluster {
            if c.flag != ClusterFlag::Full {
                si.move_cluster(ci, ClusterFlag::Full);
            }
        } else if c.flag != ClusterFlag::Frag {
            si.move_cluster(ci, ClusterFlag::Frag);
        }
    }

    /// `vm_swap_full`: more than half of swap is used.
    pub fn vm_swap_full(&self) -> bool {
        self.swap.nr_swap_pages * 2 < self.swap.total_swap_pages
    }

    /// `alloc_swap_scan_cluster`: the first `1 << order` free slots from `off` on in the
    /// cluster (slots only the swap cache holds are taken back when swap is full), and the
    /// cursor moved past them. Returns the first slot (0: none).
    fn alloc_swap_scan_cluster(&mut self, ty: usize, ci: u32, mut off: u32, order: usize) -> u32 {
        let cluster = self.swap_cluster();
        let n = 1u32 << order;
        let start = ci * cluster;
        let end = (start + cluster).min(self.swap.si[ty].max);
        let mut found = 0;
        let mut next = 0;
        if end >= n && self.swap.si[ty].clusters[ci as usize].count + n <= cluster {
            let last = end - n;
            while off <= last {
                let full = self.vm_swap_full();
                let si = &self.swap.si[ty];
                let mut ok = true;
                let mut reclaim = false;
                for o in off..off + n {
                    match si.map[o as usize] {
                        0 => {}
                        SWAP_HAS_CACHE if full => reclaim = true,
                        _ => {
                            ok = false;
                            break;
                        }
                    }
                }
                if !ok {
                    off += n;
                    continue;
                }
                if reclaim {
                    let mut all = true;
                    for o in off..off + n {
                        if self.swap.si[ty].map[o as usize] == SWAP_HAS_CACHE
                            && !self.try_to_reclaim_swap(ty, o, TtrsFlags::ANYWAY)
                        {
                            all = false;
                        }
                    }
                    if !self.swap.si[ty].cluster_is_usable(ci, order, cluster) {
                        break;
                    }
                    if !all || (off..off + n).any(|o| self.swap.si[ty].map[o as usize] != 0) {
                        off += n;
                        continue;
                    }
                }
                // cluster_alloc_range
                let si = &mut self.swap.si[ty];
                if si.clusters[ci as usize].count == 0 {
                    si.clusters[ci as usize].order = order as u8;
                }
                for o in off..off + n {
                    si.map[o as usize] = SWAP_HAS_CACHE;
                }
                si.clusters[ci as usize].count += n;
                si.inuse += n;
                self.swap.nr_swap_pages -= n as i64;
                found = off;
                off += n;
                if self.swap.si[ty].clusters[ci as usize].count < cluster && off <= last {
                    next = off;
                }
                break;
            }
        }
        self.relocate_cluster(ty, ci);
        if self.swap.si[ty].solidstate {
            let cpu = self.cur_cpu;
            if self.swap.percpu.len() <= cpu {
                self.swap.percpu.resize(cpu + 1, [(0, 0); SWAP_NR_ORDERS]);
            }
            self.swap.percpu[cpu][order] = (ty, next);
        } else {
            self.swap.si[ty].global_next[order] = next;
        }
        found
    }

    /// `alloc_swap_scan_list`: take clusters off the head of a list (one, or all of them
    /// with `scan_all`) and scan each from its start.
    fn alloc_swap_scan_list(&mut self, ty: usize, flag: ClusterFlag, order: usize, scan_all: bool) -> u32 {
        let cluster = self.swap_cluster();
        loop {
            let ci = self.swap.si[ty].list_head(flag, order);
            if ci == NIL {
                return 0;
            }
            // isolate_lock_cluster: off the list, its table allocated if it has none.
            self.swap.si[ty].list_del(ci);
            if !self.swap_cluster_alloc_table(ty, ci) {
                self.swap.si[ty].move_cluster(ci, flag);
                return 0;
            }
            let found = self.alloc_swap_scan_cluster(ty, ci, ci * cluster, order);
            if found != 0 || !scan_all {
                return found;
            }
        }
    }

    /// `cluster_alloc_swap_entry`: a slot run of `1 << order` in area `ty` (0: none).
    fn cluster_alloc_swap_entry(&mut self, ty: usize, order: usize) -> u32 {
        let cluster = self.swap_cluster();
        if order > 0 && !self.swap.si[ty].blkdev {
            return 0;
        }
        if !self.swap.si[ty].solidstate {
            let off = self.swap.si[ty].global_next[order];
            if off != 0 {
                let ci = off / cluster;
                if self.swap.si[ty].cluster_is_usable(ci, order, cluster) {
                    let off = if self.swap.si[ty].clusters[ci as usize].count == 0 { ci * cluster } else { off };
                    let f = self.alloc_swap_scan_cluster(ty, ci, off, order);
                    if f != 0 {
                        return f;
                    }
                }
            }
        }
        let pmd = self.geo.hpage_pmd_order() as usize;
        if order < pmd {
            let f = self.alloc_swap_scan_list(ty, ClusterFlag::Nonfull, order, true);
            if f != 0 {
                return f;
            }
        }
        let f = self.alloc_swap_scan_list(ty, ClusterFlag::Free, order, false);
        if f != 0 {
            return f;
        }
        if self.vm_swap_full() {
            self.swap_reclaim_full_clusters(ty);
        }
        if order < pmd {
            let f = self.alloc_swap_scan_list(ty, ClusterFlag::Frag, order, false);
            if f != 0 {
                return f;
            }
        }
        if order > 0 {
            return 0;
        }
        for o in 1..SWAP_NR_ORDERS {
            for flag in [ClusterFlag::Frag, ClusterFlag::Nonfull] {
                let f = self.alloc_swap_scan_list(ty, flag, o, true);
                if f != 0 {
                    return f;
                }
            }
        }
        0
    }

    /// `swap_reclaim_full_clusters(si, false)`: the first full cluster's slots only the swap
    /// cache holds are reclaimed.
    fn swap_reclaim_full_clusters(&mut self, ty: usize) {
        let ci = self.swap.si[ty].full.head;
        if ci == NIL {
            return;
        }
        let cluster = self.swap_cluster();
        for o in ci * cluster..((ci + 1) * cluster).min(self.swap.si[ty].max) {
            if self.swap.si[ty].map[o as usize] == SWAP_HAS_CACHE {
                self.try_to_reclaim_swap(ty, o, TtrsFlags::ANYWAY);
            }
        }
    }

    /// `swap_alloc_fast` then `swap_alloc_slow`: a run of `1 << order` slots of the highest
    /// priority area that has them (equal priorities in turn).
    fn get_swap_pages(&mut self, order: usize) -> Option<SwpEntry> {
        let cluster = self.swap_cluster();
        // Fast path: this CPU's cursor on a non-rotational area.
        let cpu = self.cur_cpu;
        if let Some(&(ty, off)) = self.swap.percpu.get(cpu).map(|p| &p[order]) {
            if off != 0 && ty < self.swap.si.len() && self.swap.avail.contains(&ty) {
                let ci = off / cluster;
                if self.swap.si[ty].cluster_is_usable(ci, order, cluster) {
                    let o = if self.swap.si[ty].clusters[ci as usize].count == 0 { ci * cluster } else { off };
                    let f = self.alloc_swap_scan_cluster(ty, ci, o, order);
                    if f != 0 {
                        self.swap_usage_check(ty);
                        return Some(SwpEntry::new(ty as u32, f));
                    }
                }
            }
        }
        // Slow path: the avail list in order; each area tried goes behind its equals.
        let mut tried = Vec::new();
        loop {
            let &ty = self.swap.avail.iter().find(|t| !tried.contains(*t))?;
            tried.push(ty);
            let prio = self.swap.si[ty].prio;
            if let Some(pos) = self.swap.avail.iter().position(|&t| t == ty) {
                let t = self.swap.avail.remove(pos);
                let end = self.swap.avail.iter().rposition(|&u| self.swap.si[u].prio == prio).map_or(pos, |p| p + 1);
                self.swap.avail.insert(end.max(pos), t);
            }
            let f = self.cluster_alloc_swap_entry(ty, order);
            if f != 0 {
                self.swap_usage_check(ty);
                return Some(SwpEntry::new(ty as u32, f));
            }
            if order > 0 {
                return None;
            }
        }
    }

    /// `swap_usage_add`'s check: a full area leaves the avail list.
    fn swap_usage_check(&mut self, ty: usize) {
        let si = &self.swap.si[ty];
        if si.inuse >= si.pages {
            self.swap.avail.retain(|&t| t != ty);
        }
    }

    /// `folio_alloc_swap`: swap slots for an anonymous (or shmem) folio, charged to its memcg
    /// (cgroup v2), and the folio into the swap cache. Err when there is none (the caller
    /// activates the folio, or splits a large one).
    #[allow(clippy::result_unit_err)] // -ENOMEM: no slot
    pub fn folio_alloc_swap(&mut self, head: Pfn) -> Result<SwpEntry, ()> {
        let order = self.mem.pages[head.idx()].order as usize;
        let order = if self.mem.pages[head.idx()].test(pg::HEAD) { order } else { 0 };
        if order >= SWAP_NR_ORDERS || self.swap.si.is_empty() {
            return Err(());
        }
        let Some(e) = self.get_swap_pages(order) else {
            self.memcg_swap_event(head, super::memcontrol::SwapEventKind::Fail);
            return Err(());
        };
        let nr = 1u32 << order;
        if !self.mem_cgroup_try_charge_swap(head, e, nr) {
            self.put_swap_entries(e, nr);
            return Err(());
        }
        self.swap_cache_add_folio(head, e);
        Ok(e)
    }

    /// The area of an entry.
    #[inline]
    pub fn swap_info(&self, e: SwpEntry) -> &SwapInfo {
        &self.swap.si[e.ty()]
    }

    /// `__swap_count`.
    #[inline]
    pub fn swap_count(&self, e: SwpEntry) -> u32 {
        self.swap.si[e.ty()].count(e.offset())
    }

    /// `swap_duplicate`: one more reference (a copied swap pte, a swap pte installed by
    /// unmap).
    pub fn swap_duplicate(&mut self, e: SwpEntry) {
        let m = &mut self.swap.si[e.ty()].map[e.offset() as usize];
        debug_assert!(*m != 0 && *m != SWAP_MAP_BAD, "swap_duplicate of a free slot {e:?}");
        *m += 1;
    }

    /// `swapcache_prepare`: claim SWAP_HAS_CACHE of a slot that has references (false: no
    /// reference, or some cache already claimed it).
    pub fn swapcache_prepare(&mut self, e: SwpEntry) -> bool {
        let m = &mut self.swap.si[e.ty()].map[e.offset() as usize];
        if *m & !SWAP_HAS_CACHE == 0 || *m & SWAP_HAS_CACHE != 0 || *m == SWAP_MAP_BAD {
            return false;
        }
        *m |= SWAP_HAS_CACHE;
        true
    }

    /// `swap_free_nr`: drop one reference of each of `nr` slots (`swap_entry_put_locked`);
    /// a slot left with nothing is freed.
    pub fn swap_free_nr(&mut self, e: SwpEntry, nr: u32) {
        for i in 0..nr {
            let s = e.add(i);
            let m = &mut self.swap.si[s.ty()].map[s.offset() as usize];
            debug_assert!(*m & !SWAP_HAS_CACHE > 0, "swap_free of slot {s:?} with no reference");
            *m -= 1;
            if *m == 0 {
                self.swap_entries_free(s, 1);
            }
        }
    }

    /// `put_swap_folio` / `swapcache_clear`: the swap cache lets go of `nr` slots; those with
    /// no reference are freed.
    pub fn put_swap_entries(&mut self, e: SwpEntry, nr: u32) {
        for i in 0..nr {
            let s = e.add(i);
            let m = &mut self.swap.si[s.ty()].map[s.offset() as usize];
            *m &= !SWAP_HAS_CACHE;
            if *m == 0 {
                self.swap_entries_free(s, 1);
            }
        }
    }

    /// `swap_entries_free` / `swap_range_free`: slots back to the area (their cluster's
    /// count, the memcg's swap charge, their data, zeromap bits and shadows go).
    fn swap_entries_free(&mut self, e: SwpEntry, nr: u32) {
        let cluster = self.swap_cluster();
        let ty = e.ty();
        self.mem_cgroup_uncharge_swap(e, nr);
        let si = &mut self.swap.si[ty];
        for i in 0..nr {
            let off = e.offset() + i;
            si.map[off as usize] = 0;
            si.zeromap_set(off, false);
            si.data.remove(&off);
            let c = &mut si.clusters[(off / cluster) as usize];
            if let Some(t) = c.table.as_mut() {
                let v = &mut t[(off % cluster) as usize];
                debug_assert!(*v & TABLE_FOLIO == 0, "freeing slot {off:#x} still in the swap cache");
                *v = 0;
            }
            c.count -= 1;
        }
        si.inuse -= nr;
        self.swap.nr_swap_pages += nr as i64;
        if !self.swap.avail.contains(&ty) {
            self.swap.avail.push(ty);
            self.swap_sort_avail();
        }
        let ci = e.offset() / cluster;
        let si = &mut self.swap.si[ty];
        if si.clusters[ci as usize].count == 0 {
            self.swap_free_cluster(ty, ci);
        } else if si.clusters[ci as usize].flag != ClusterFlag::Nonfull {
            // partial_free_cluster
            si.move_cluster(ci, ClusterFlag::Nonfull);
        }
    }

    /// `free_swap_and_cache_nr`: a zapped run of `nr` swap ptes drops its references; a slot
    /// then held only by the swap cache has its folio removed from it if nothing maps it.
    pub fn free_swap_and_cache_nr(&mut self, e: SwpEntry, nr: u32) {
        let mut only_cache = Vec::new();
        for i in 0..nr {
            let s = e.add(i);
            let m = &mut self.swap.si[s.ty()].map[s.offset() as usize];
            *m -= 1;
            if *m == 0 {
                self.swap_entries_free(s, 1);
            } else if *m == SWAP_HAS_CACHE {
                only_cache.push(s);
            }
        }
        for s in only_cache {
            if self.swap.si[s.ty()].map[s.offset() as usize] == SWAP_HAS_CACHE {
                self.try_to_reclaim_swap(s.ty(), s.offset(), TtrsFlags::UNMAPPED | TtrsFlags::FULL);
            }
        }
    }

    /// `__try_to_reclaim_swap`: remove the folio the swap cache holds for a slot when `flags`
    /// allow (ANYWAY, UNMAPPED and it is not mapped, FULL and swap is half used), it is not
    /// under writeback or I/O, and none of its slots has a reference.
    pub fn try_to_reclaim_swap(&mut self, ty: usize, off: u32, flags: u32) -> bool {
        let cluster = self.swap_cluster();
        let v = self.swap.si[ty].table(off, cluster);
        if v & TABLE_FOLIO == 0 {
            return false;
        }
        let head = Pfn((v & !TABLE_FOLIO) as u32);
        let ok = flags & TtrsFlags::ANYWAY != 0
            || (flags & TtrsFlags::UNMAPPED != 0 && self.folio_mapcount(head) == 0)
            || (flags & TtrsFlags::FULL != 0 && self.mem_cgroup_swap_full(head));
        if !ok {
            return false;
        }
        if !self.folio_swapcache_freeable(head) || self.folio_swapped(head) {
            return false;
        }
        self.swap_cache_del_folio(head);
        self.folio_mark_dirty_anon(head);
        true
    }

    /// `folio_swapcache_freeable`: in the swap cache, not under writeback nor being read.
    pub fn folio_swapcache_freeable(&self, head: Pfn) -> bool {
        let p = &self.mem.pages[head.idx()];
        p.test(pg::SWAPCACHE) && !p.test(pg::WRITEBACK) && !p.test(pg::LOCKED)
    }

    /// `folio_swapped`: some slot of the folio still has a reference (a swap pte).
    pub fn folio_swapped(&self, head: Pfn) -> bool {
        let e = SwpEntry(self.mem.pages[head.idx()].private);
        let nr = self.folio_nr_pages(head) as u32;
        (0..nr).any(|i| self.swap_count(e.add(i)) > 0)
    }

    /// `folio_free_swap`: a swap-cache folio no swap pte refers to leaves the swap cache and
    /// gives back its slots; it is now the only copy (dirty). False when it cannot.
    pub fn folio_free_swap(&mut self, head: Pfn) -> bool {
        if !self.folio_swapcache_freeable(head) || self.folio_swapped(head) {
            return false;
        }
        self.swap_cache_del_folio(head);
        self.folio_mark_dirty_anon(head);
        true
    }

    /// Set PG_dirty on an anonymous folio (its only copy is in RAM).
    pub fn folio_mark_dirty_anon(&mut self, head: Pfn) {
        self.mem.pages[head.idx()].set(pg::DIRTY);
    }

    /// Record what a swap write puts in slots [e, e + nr): each page's data, or the zeromap
    /// bit of a zero-filled one.
    pub fn swap_store_data(&mut self, e: SwpEntry, head: Pfn, nr: u32) {
        for i in 0..nr {
            let c = match &self.mem.data[head.idx() + i as usize] {
                FrameData::Data(c) if !c.is_zero() => Some(c.clone()),
                _ => None,
            };
            let si = &mut self.swap.si[e.ty()];
            let off = e.offset() + i;
            match c {
                Some(c) => {
                    si.zeromap_set(off, false);
                    si.data.insert(off, c);
                }
                None => {
                    si.zeromap_set(off, true);
                    si.data.remove(&off);
                }
            }
        }
    }

    /// The data of slot `e` into frame `dst` (a swap read).
    pub fn swap_load_data(&mut self, e: SwpEntry, dst: Pfn) {
        let d = match self.swap.si[e.ty()].data.get(&e.offset()) {
            Some(c) => FrameData::Data(c.clone()),
            None => FrameData::Zero,
        };
        self.mem.set_data(dst.idx(), d);
    }

    /// Whether every page of the folio is zero-filled (`is_folio_zero_filled`).
    pub fn folio_zero_filled(&self, head: Pfn) -> bool {
        let nr = self.folio_nr_pages(head) as usize;
        (0..nr).all(|i| self.mem.data[head.idx() + i].content().is_none_or(|c| c.is_zero()))
    }

    /// SwapTotal and SwapFree in pages (`si_swapinfo`).
    pub fn si_swapinfo(&self) -> (i64, i64) {
        (self.swap.total_swap_pages, self.swap.nr_swap_pages)
    }

    /// /proc/swaps: (name, type, size kB, used kB, priority) per area.
    pub fn proc_swaps(&self) -> Vec<(String, &'static str, u64, u64, i32)> {
        let kb = self.geo.page_size() / 1024;
        self.swap
            .si
            .iter()
            .map(|s| (s.name.clone(), s.kind.word(), s.pages as u64 * kb, s.inuse as u64 * kb, s.prio))
            .collect()
    }
}

/// `__try_to_reclaim_swap`'s flags.
#[allow(non_snake_case)]
pub mod TtrsFlags {
    /// Reclaim the swap entry anyway.
    pub const ANYWAY: u32 = 1 << 0;
    /// Reclaim it if the folio is unmapped.
    pub const UNMAPPED: u32 = 1 << 1;
    /// Reclaim it if swap is more than half used.
    pub const FULL: u32 = 1 << 2;
}
