//! Invariants of reclaim's state (part of `check_invariants`): the LRU lists against the
//! folios' flags and the counters, every swap slot's count against the swap ptes and the
//! swap cache, the memory cgroups' page counters against what is charged to them, and the
//! rmap walk against each folio's mapcount.

use super::check::{CheckScratch, Violation};
use super::knobs::PtshareCompat;
use super::lruvec::Lru;
use super::memcontrol::{
    Counter, EXTRA_KMEM, EXTRA_SLAB_RECLAIMABLE_B, EXTRA_SLAB_UNRECLAIMABLE_B, EXTRA_SWAP, NO_MEMCG, ROOT_MEMCG,
};
use super::mm::{vm, Vma};
use super::mm_types::{pg, NIL};
use super::slab::KmemCache;
use super::swapfile::{SWAP_HAS_CACHE, SWAP_MAP_BAD, TABLE_FOLIO};
use super::vmstat::VmItem;
use super::{Kernel, MmId};
use crate::units::Pfn;

macro_rules! violation {
    ($($t:tt)*) => {
        Violation(format!($($t)*))
    };
}

impl Kernel {
    /// Reclaim's invariants, after the folio walk (`c` holds what it found).
    pub(super) fn check_reclaim_state(&self, c: &CheckScratch) -> Result<(), Violation> {
        self.check_lru(c)?;
        self.check_swap_map(c)?;
        self.check_memcg(c)?;
        self.check_rmap(c)
    }

    /// Each lruvec's lists: linked both ways, each folio a live head of the list's type and
    /// memcg, flagged PG_lru; their sizes the counters; every PG_lru folio on one of them.
    fn check_lru(&self, c: &CheckScratch) -> Result<(), Violation> {
        let mut on_lists = 0u64;
        let mut totals = [0i64; 5];
        for (m, g) in self.memcg.groups.iter().enumerate() {
            let lv = &g.lruvec;
            for lru in Lru::EVICTABLE {
                let mut pages = 0u64;
                let mut prev = NIL;
                let mut p = lv.lists[lru as usize].head;
                let mut n = 0u64;
                while p != NIL {
                    n += 1;
                    if n > self.mem.nr_pages() {
                        return Err(violation!("memcg {m} {}: the list loops", lru.name()));
                    }
                    let f = &self.mem.pages[p as usize];
                    if f.prev != prev {
                        return Err(violation!("memcg {m} {}: folio {p:#x}'s prev link is broken", lru.name()));
                    }
                    let head = Pfn(p);
                    if f.refcount <= 0 || f.head != p || !f.test(pg::LRU) {
                        return Err(violation!(
                            "memcg {m} {}: folio {p:#x} on the list is not a live PG_lru head (refcount {}, flags {:#x})",
                            lru.name(),
                            f.refcount,
                            f.flags
                        ));
                    }
                    if self.folio_lru_list(head) != lru || f.memcg as usize != m {
                        return Err(violation!(
                            "memcg {m} {}: folio {p:#x} belongs on {} of memcg {}",
                            lru.name(),
                            self.folio_lru_list(head).name(),
                            f.memcg
                        ));
                    }
                    pages += self.folio_nr_pages(head);
                    prev = p;
                    p = f.next;
                }
                if lv.lists[lru as usize].tail != prev {
                    return Err(violation!("memcg {m} {}: the tail is not the last folio", lru.name()));
                }
                if pages != lv.size[lru as usize] {
                    return Err(violation!(
                        "memcg {m} {}: {pages} pages on the list, its size says {}",
                        lru.name(),
                        lv.size[lru as usize]
                    ));
                }
                on_lists += n;
                totals[lru as usize] += pages as i64;
            }
            totals[Lru::Unevictable as usize] += lv.size[Lru::Unevictable as usize] as i64;
        }
        for lru in Lru::ALL {
            if totals[lru as usize] != self.stat.items[lru.item()] {
                return Err(violation!(
                    "{}: the lists hold {} pages, the counter says {}",
                    lru.item().name(),
                    totals[lru as usize],
                    self.stat.items[lru.item()]
                ));
            }
        }
        if c.unevictable_pages as i64 != totals[Lru::Unevictable as usize] {
            return Err(violation!(
                "{} pages flagged PG_lru|PG_unevictable, nr_unevictable says {}",
                c.unevictable_pages,
                totals[Lru::Unevictable as usize]
            ));
        }
        let unevictable_folios = c.unevictable_folios;
        if c.lru_flagged != on_lists + unevictable_folios {
            return Err(violation!(
                "{} folios flagged PG_lru, {} on the lists and {unevictable_folios} unevictable",
                c.lru_flagged,
                on_lists
            ));
        }
        Ok(())
    }

    /// Every swap slot's count is the swap ptes that refer to it; SWAP_HAS_CACHE exactly
    /// when the swap cache holds a folio there; the areas' and the global counts of slots in
    /// use.
    fn check_swap_map(&self, c: &CheckScratch) -> Result<(), Violation> {
        if self.swap.si.is_empty() {
            return Ok(());
        }
        let mut refs: Vec<Vec<u32>> = self.swap.si.iter().map(|s| vec![0; s.max as usize]).collect();
        for &v in &c.swap_refs {
            let e = super::pgtable::SwpEntry(v);
            refs[e.ty()][e.offset() as usize] += 1;
        }
        let cluster = self.swap_cluster();
        let mut free = 0i64;
        for si in &self.swap.si {
            let mut inuse = 0u32;
            for off in 1..si.max {
                let m = si.map[off as usize];
                if m == SWAP_MAP_BAD {
                    continue;
                }
                let count = m & !SWAP_HAS_CACHE;
                let want = refs[si.ty][off as usize];
                if count != want {
                    return Err(violation!(
                        "swap slot {}:{off:#x}: count {count}, {want} swap ptes refer to it",
                        si.ty
                    ));
                }
                let cached = si.table(off, cluster) & TABLE_FOLIO != 0;
                if cached != (m & SWAP_HAS_CACHE != 0) {
                    return Err(violation!(
                        "swap slot {}:{off:#x}: SWAP_HAS_CACHE {}, the swap cache holds {}",
                        si.ty,
                        m & SWAP_HAS_CACHE != 0,
                        if cached { "a folio" } else { "none" }
                    ));
                }
                if m != 0 {
                    inuse += 1;
                } else if si.zeromap_test(off) || si.data.contains_key(&off) {
                    return Err(violation!("free swap slot {}:{off:#x} still holds data", si.ty));
                }
            }
            if inuse != si.inuse {
                return Err(violation!("swap area {}: {inuse} slots in use, inuse says {}", si.ty, si.inuse));
            }
            free += (si.pages - si.inuse) as i64;
        }
        if free != self.swap.nr_swap_pages {
            return Err(violation!("{free} swap slots free, nr_swap_pages says {}", self.swap.nr_swap_pages));
        }
        Ok(())
    }

    /// Each memcg's page counters: memory the folios, page tables and kernel stacks charged to it and its
    /// descendants plus what the CPUs' charge stocks hold; swap (v2) or memsw (v1) its
    /// slots.
    fn check_memcg(&self, c: &CheckScratch) -> Result<(), Violation> {
        let n = self.memcg.groups.len();
        let mut local = vec![0u64; n];
        let mut swap = vec![0u64; n];
        // Kernel stacks: their pages are charged, not allocated (alloc_thread_stack), so the
        // memcg's own NR_KERNEL_STACK_KB counts them.
        let stack_kb_per_page = (self.geo.page_size() / 1024) as i64;
        // Slab objects: each memcg's live objects and the bytes charged ahead for them (its
        // object stocks, its nr_charged_bytes) fill whole pages, its MEMCG_KMEM with its
        // page tables and stacks; its slab statistics, with what the stocks hold back, are
        // the live objects' bytes.
        let ps = self.geo.page_size();
        let mut slab = vec![[0u64; 2]; n];
        for o in self.shmem.iter().flatten() {
            for (_, node) in o.xa.nodes() {
                if node.objcg != NO_MEMCG {
                    slab[node.objcg as usize][1] += self.slab_sizes.obj_full_size(KmemCache::RadixTreeNode);
                }
            }
        }
        let bh = self.slab_sizes.obj_full_size(KmemCache::BufferHead);
        for (m, blocks) in c.memcg_bh_blocks.iter().enumerate() {
            if m != ROOT_MEMCG as usize {
                slab[m][1] += blocks * bh;
            }
        }
        for m in self.mms.iter().flatten() {
            for v in m.vmas.values() {
                if v.objcg == super::mm::VMA_UNALLOCATED {
                    return Err(violation!("vma {:#x}-{:#x} was never allocated", v.start, v.end));
                }
                if v.objcg != NO_MEMCG {
                    slab[v.objcg as usize][0] += self.slab_sizes.obj_full_size(KmemCache::VmAreaStruct);
                }
            }
        }
        for (m, l) in local.iter_mut().enumerate() {
            let stacks = self.memcg.groups[m].stat_local.items[VmItem::NrKernelStack] / stack_kb_per_page;
            let g = &self.memcg.groups[m];
            let objects = slab[m][0] + slab[m][1];
            let bytes = objects + self.memcg_obj_stock_bytes(m as u16);
            if !bytes.is_multiple_of(ps) {
                return Err(violation!(
                    "memcg {:?}: {objects} bytes of slab objects and {} charged ahead are not whole pages",
                    g.name,
                    bytes - objects
                ));
            }
            let tables = c.memcg_tables.get(m).copied().unwrap_or(0);
            let kmem = tables + stacks as u64 + bytes / ps;
            if m != ROOT_MEMCG as usize && g.extra_local[EXTRA_KMEM] as u64 != kmem {
                return Err(violation!(
                    "memcg {:?}: MEMCG_KMEM {}, {kmem} pages of page tables, stacks and slab",
                    g.name,
                    g.extra_local[EXTRA_KMEM]
                ));
            }
            let held = self.memcg.obj_stock.iter().filter(|s| s.cached == m as u16);
            let (held_unrecl, held_recl) =
                held.fold((0, 0), |(u, r), s| (u + s.nr_slab_unreclaimable_b, r + s.nr_slab_reclaimable_b));
            for (idx, held, live) in [
                (EXTRA_SLAB_UNRECLAIMABLE_B, held_unrecl, slab[m][0]),
                (EXTRA_SLAB_RECLAIMABLE_B, held_recl, slab[m][1]),
            ] {
                if g.extra_local[idx] + held != live as i64 {
                    return Err(violation!(
                        "memcg {:?}: NR_SLAB_*_B {} and {held} held in stocks, {live} bytes of live objects",
                        g.name,
                        g.extra_local[idx]
                    ));
                }
            }
            *l = c.memcg_folio_pages.get(m).copied().unwrap_or(0) + kmem;
        }
        for si in &self.swap.si {
            for &m in &si.memcg {
                if m != NO_MEMCG {
                    swap[m as usize] += 1;
                }
            }
        }
        for m in 0..n as u16 {
            if m == ROOT_MEMCG {
                continue;
            }
            let sub = self.memcg_subtree(m);
            let charged: u64 = sub.iter().map(|&d| local[d as usize]).sum::<u64>() + self.memcg_stock_pages(m);
            let swapped: u64 = sub.iter().map(|&d| swap[d as usize]).sum();
            let g = &self.memcg.groups[m as usize];
            if g.memory.usage != charged {
                return Err(violation!(
                    "memcg {:?}: memory usage {} pages, {charged} charged (folios, page tables, kernel stacks, stock)",
                    g.name,
                    g.memory.usage
                ));
            }
            let (counter, want) =
                if self.memcg_v1() { (Counter::Memsw, charged + swapped) } else { (Counter::Swap, swapped) };
            let have = if counter == Counter::Memsw { g.memsw.usage } else { g.swap.usage };
            if have != want {
                return Err(violation!("memcg {:?}: {counter:?} usage {have} pages, {want} charged", g.name));
            }
            if g.extra[EXTRA_SWAP] as u64 != swapped {
                return Err(violation!("memcg {:?}: MEMCG_SWAP {}, {swapped} slots", g.name, g.extra[EXTRA_SWAP]));
            }
            let cached = c.memcg_swapcache.get(m as usize).copied().unwrap_or(0);
            let stat = g.stat_local.items[VmItem::NrSwapcached];
            if stat != cached as i64 {
                return Err(violation!("memcg {:?}: NR_SWAPCACHE {stat}, {cached} pages in the swap cache", g.name));
            }
        }
        Ok(())
    }

    /// The rmap walk finds every mapping of every mapped folio (what reclaim's unmap relies
    /// on). Checked forwards, at the cost of what is mapped rather than of a walk per folio:
    /// every mapping a walk of the vmas' page tables finds must be one the walk's choice of
    /// mms and vmas (see rmap.rs) reaches at the folio's index, and those mappings, each
    /// pte or pmd counted once however many mms share its table, must add up to the mapcounts
    /// (`c.rmap_mapcount`). Skipped under `vm/ptshare_compat=rfc`, whose partial munmap
    /// leaves mappings where no vma is (the first posting's bug).
    fn check_rmap(&self, c: &CheckScratch) -> Result<(), Violation> {
        if self.knobs.ptshare_compat == PtshareCompat::Rfc {
            return Ok(());
        }
        let page = self.geo.page_size();
        let mut found = 0i64;
        let mut shared: std::collections::HashSet<(u32, usize)> = std::collections::HashSet::new();
        for (mm, m) in self.mms.iter().enumerate() {
            let Some(m) = m else { continue };
            let mm = mm as MmId;
            for v in m.vmas.values() {
                if v.flags & vm::HUGETLB != 0 {
                    continue;
                }
                let mut addr = v.start;
                while let Some((next, pmd)) = self.pmd_walk_next(mm, &mut addr, v.end) {
                    let pe = self.entry(pmd.table, pmd.idx);
                    if pe.present() && pe.huge() {
                        let haddr = self.geo.hpage_pmd_align_down(addr);
                        if self.rmap_checked(mm, v, haddr, pe.pfn(), true)?
                            && (!self.pt_reach.contains_key(&pmd.table.0) || shared.insert((pmd.table.0, pmd.idx)))
                        {
                            found += 1;
                        }
                    } else if pe.present() {
                        let table = pe.pfn();
                        let is_shared = self.pt_reach.contains_key(&table.0);
                        let mut a = addr;
                        while a < next {
                            let idx = self.geo.table_index(a, 0);
                            let e = self.entry(table, idx);
                            if e.present()
                                && !e.special()
                                && self.rmap_checked(mm, v, a, e.pfn(), false)?
                                && (!is_shared || shared.insert((table.0, idx)))
                            {
                                found += 1;
                            }
                            a += page;
                        }
                    }
                    addr = next;
                }
            }
        }
        if found != c.rmap_mapcount {
            return Err(violation!(
                "{} mappings of reclaimable folios, {found} of them where a vma maps them (the rmap walk finds only those)",
                c.rmap_mapcount
            ));
        }
        Ok(())
    }

    /// Whether the page `pfn` mapped at `addr` in `mm`'s vma `v` (by a pmd when `pmd`) is a
    /// mapping the rmap walk must find; an error if it is one the walk would miss.
    fn rmap_checked(&self, mm: MmId, v: &Vma, addr: u64, pfn: Pfn, pmd: bool) -> Result<bool, Violation> {
        let head = Pfn(self.mem.pages[pfn.idx()].head);
        let p = &self.mem.pages[head.idx()];
        if !rmap_tracked(p) || Some(head) == self.huge_zero.pfn {
            return Ok(false);
        }
        let shift = self.geo.page_shift;
        let index = v.pgoff + ((addr - v.start) >> shift);
        let want = p.index + (pfn.0 - head.0) as u64;
        let miss = |why: &str| {
            violation!("folio {:#x} mapped at {addr:#x} of mm {mm}: {why}, the rmap walk misses it", head.0)
        };
        if index != want || (pmd && pfn != head) {
            return Err(miss(&format!("the vma's index there is {index:#x}, the page's {want:#x}")));
        }
        if p.test(pg::ANON) {
            if v.anon_vma.is_none() {
                return Err(miss("the vma has no anon_vma"));
            }
            if v.pgoff << shift != v.start && !self.mm(mm).nonlinear_anon {
                return Err(miss("the vma is not linear and the mm not flagged nonlinear_anon"));
            }
            if self.folio_nr_pages(head) > 1
                && !self.folio_mms.get(&head.0).is_some_and(|l| l.iter().any(|e| e.0 == mm))
            {
                return Err(miss("the large folio does not list the mm"));
            }
        } else if p.mapping != NIL {
            if self.vma_inode(v) != Some(p.mapping) {
                return Err(miss("the vma maps another file"));
            }
            if !self.inode(p.mapping).mms.iter().any(|e| e.0 == mm) {
                return Err(miss("the inode does not list the mm"));
            }
        } else {
            return Err(miss("the folio is neither anonymous nor in a page cache"));
        }
        Ok(true)
    }
}

/// Whether reclaim's rmap walk tracks the mappings of the folio `p` heads: not hugetlb pages,
/// text copies or the huge zero page (none of them is ever reclaimed).
pub(super) fn rmap_tracked(p: &super::mm_types::Page) -> bool {
    !p.test(pg::HUGETLB | pg::TEXT_COPY | pg::HUGE_ZERO)
}
