//! Invariants of the memory manager, recounted from first principles (the page tables, the
//! shmem objects and the free lists) and compared with what the kernel keeps incrementally:
//! frame conservation, refcounts and mapcounts, rss, VmPTE, and the vmstat items. mmsim's
//! analogue of CONFIG_DEBUG_VM checks: a check costs about what is in use, so fuzz mode runs
//! one after every system call and every page fault.

use super::mm::{vm, MmCounter};
use super::mm_types::{pg, FrameData, NIL};
use super::vmstat::VmItem;
use super::{Kernel, MmId};
use crate::units::Pfn;

/// A broken invariant, in words: the first thing `check_invariants` found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

/// `Violation(format!(...))`.
macro_rules! violation {
    ($($t:tt)*) => {
        Violation(format!($($t)*))
    };
}

/// Who owns a run of frames, as found by the recount.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Owner {
    Free,
    Reserved,
    Table,
    HugeZero,
    /// A free page of the hugetlb pool.
    HugetlbFree,
}

/// What the recount of the page tables finds, kept between checks so that one check costs
/// about what is in use (tables, mapped pages, free blocks), not the size of memory: fuzz
/// mode checks after every fault. Mappings are listed as found and counted per frame in
/// dense arrays, which are zeroed again from the lists afterwards.
#[derive(Default)]
pub struct CheckScratch {
    /// One entry per PTE mapping of a base page.
    pte_maps: Vec<u32>,
    /// One entry per PMD mapping of a folio head.
    pmd_maps: Vec<u32>,
    /// Page-cache pages, and the folios the lru_lazyfree batch holds.
    cache_refs: Vec<u32>,
    /// Per-frame counts of the three lists (all zero between checks).
    pte_count: Vec<i32>,
    pmd_count: Vec<i32>,
    cache_count: Vec<i32>,
    /// Runs of frames claimed by something other than a folio: (first, length, owner).
    runs: Vec<(u32, u32, Owner)>,
    /// Page-table pages found in the mm being walked.
    tables: Vec<u32>,
    /// Seed 003: tables several mms reach (those `pt_reach` lists), recounted once: their
    /// subtree's tables, rss and huge zero pmds, the mms that reached them and the upper
    /// entries pointing at them.
    shared: std::collections::HashMap<u32, SharedRecount>,
    /// Every swap pte found (its entry), once per pte.
    pub(super) swap_refs: Vec<u32>,
    /// Per memcg: pages of folios charged to it (local), and page tables charged to it.
    pub(super) memcg_folio_pages: Vec<u64>,
    pub(super) memcg_tables: Vec<u64>,
    /// Per memcg: pages of its folios in the swap cache (its local NR_SWAPCACHE).
    pub(super) memcg_swapcache: Vec<u64>,
    /// Per memcg: blocks of its folios with buffer heads attached (PG_private).
    pub(super) memcg_bh_blocks: Vec<u64>,
    /// Folios flagged PG_lru, and of those, the pages flagged PG_unevictable.
    pub(super) lru_flagged: u64,
    pub(super) unevictable_pages: u64,
    pub(super) unevictable_folios: u64,
    /// The ptes and pmds mapping folios whose mappings the rmap walk tracks.
    pub(super) rmap_mapcount: i64,
}

/// What a recount of page tables adds up: the pages mapped per rss counter, the page-table
/// pages reached and the huge zero pmds.
#[derive(Default, Clone, Copy)]
struct Recount {
    rss: [i64; 3],
    tables: i64,
    hzp_pmds: u64,
    /// Swap ptes (MM_SWAPENTS).
    swapents: i64,
}

/// What the recount found below one shared table.
#[derive(Default, Clone)]
struct SharedRecount {
    sub: Recount,
    mms: Vec<MmId>,
    entries: i32,
}

impl CheckScratch {
    /// Count each listed frame; (re)size the arrays for `n` frames.
    fn count(&mut self, n: usize) {
        for (list, count) in [
            (&self.pte_maps, &mut self.pte_count),
            (&self.pmd_maps, &mut self.pmd_count),
            (&self.cache_refs, &mut self.cache_count),
        ] {
            count.resize(n, 0);
            for &p in list {
                count[p as usize] += 1;
            }
        }
    }

    /// Zero the counts and empty the lists, ready for the next check.
    fn reset(&mut self) {
        for (list, count) in [
            (&mut self.pte_maps, &mut self.pte_count),
            (&mut self.pmd_maps, &mut self.pmd_count),
            (&mut self.cache_refs, &mut self.cache_count),
        ] {
            for &p in list.iter() {
                if let Some(c) = count.get_mut(p as usize) {
                    *c = 0;
                }
            }
            list.clear();
        }
        self.runs.clear();
        self.tables.clear();
        self.shared.clear();
        self.swap_refs.clear();
        self.memcg_folio_pages.clear();
        self.memcg_tables.clear();
        self.memcg_swapcache.clear();
        self.memcg_bh_blocks.clear();
        self.lru_flagged = 0;
        self.unevictable_pages = 0;
        self.unevictable_folios = 0;
        self.rmap_mapcount = 0;
    }

    /// A listed frame whose count the folio scan did not consume is no folio page.
    fn unconsumed(&self) -> Result<(), Violation> {
        for (what, list, count) in [
            ("a pte maps", &self.pte_maps, &self.pte_count),
            ("a huge pmd maps", &self.pmd_maps, &self.pmd_count),
            ("a shmem page cache holds", &self.cache_refs, &self.cache_count),
        ] {
            if let Some(p) = list.iter().find(|&&p| count[p as usize] != 0) {
                return Err(violation!("{what} frame {p:#x}, which is not a page of an allocated folio"));
            }
        }
        Ok(())
    }
}

/// What the folio walk of `check_folios` counted.
struct FolioTotals {
    anon_mapped: i64,
    file_mapped: i64,
    anon_thps: i64,
    hugetlb_in_use: u64,
}

/// No frame may be claimed twice, nor lie past the end of memory.
fn check_runs_disjoint(runs: &mut [(u32, u32, Owner)], n: u64) -> Result<(), Violation> {
    runs.sort_unstable_by_key(|r| r.0);
    for (i, &(a, len, o)) in runs.iter().enumerate() {
        let end = a as u64 + len as u64;
        if end > n {
            return Err(violation!("frames {a:#x}..{end:#x} ({o:?}) run past the end of memory"));
        }
        if let Some(&(b, _, o2)) = runs.get(i + 1) {
            if (b as u64) < end {
                return Err(violation!("frame {b:#x} owned twice: {o:?} and {o2:?}"));
            }
        }
    }
    Ok(())
}

/// Take (and consume) frame `pfn`'s count.
#[inline]
fn take(count: &mut [i32], pfn: usize) -> i32 {
    std::mem::take(&mut count[pfn])
}

impl Kernel {
    /// Check every invariant; Err describes the first violation found.
    pub fn check_invariants(&self) -> Result<(), Violation> {
        let mut c = self.check_scratch.borrow_mut();
        let r = self.check_with(&mut c);
        c.reset();
        r
    }

    fn check_with(&self, c: &mut CheckScratch) -> Result<(), Violation> {
        let n = self.mem.nr_pages();
        let mut runs = std::mem::take(&mut c.runs);
        self.check_free_lists(&mut runs)?;
        self.check_hugetlb_pool(&mut runs)?;
        let (nr_tables, hzp_pmds) = self.check_mms(c, &mut runs)?;
        self.check_shared_tables(c)?;
        check_runs_disjoint(&mut runs, n)?;
        self.check_hzp_and_mlock(hzp_pmds, nr_tables)?;
        self.check_page_caches(c, n)?;
        c.count(n as usize);
        let totals = self.check_folios(c, &runs, n)?;
        c.runs = runs;
        c.unconsumed()?;
        self.check_totals(totals)?;
        self.check_reclaim_state(c)
    }

    /// The buddy lists: their counts, and no zeroed block holding data; their frames join
    /// the claimed runs with the other boot-time owners (reserved, the huge zero page).
    fn check_free_lists(&self, runs: &mut Vec<(u32, u32, Owner)>) -> Result<(), Violation> {
        let mut free_total = 0;
        let mut zeroed_total = 0;
        for (pfn, order, zeroed) in self.mem.free_blocks() {
            runs.push((pfn, 1 << order, Owner::Free));
            free_total += 1u64 << order;
            if zeroed {
                zeroed_total += 1u64 << order;
                // No path may hand out non-zero memory as zeroed (seed 002's __GFP_ZERO).
                if let Some(i) =
                    (pfn..pfn + (1 << order)).find(|&i| !matches!(self.mem.data[i as usize], FrameData::Zero))
                {
                    return Err(violation!(
                        "free block {pfn:#x} of order {order} is on the zeroed list but frame {i:#x} holds data"
                    ));
                }
            }
        }
        if free_total != self.mem.free_pages {
            return Err(violation!("free lists hold {free_total} pages, counter says {}", self.mem.free_pages));
        }
        if zeroed_total != self.mem.zeroed_free_pages {
            return Err(violation!(
                "zeroed free lists hold {zeroed_total} pages, counter says {}",
                self.mem.zeroed_free_pages
            ));
        }
        // The block kscrubd is zeroing is off the lists but still the allocator's.
        if let Some((pfn, order)) = self.mem.scrubbing {
            runs.push((pfn, 1 << order, Owner::Free));
        }
        if self.mem.reserved > 0 {
            runs.push((0, self.mem.reserved as u32, Owner::Reserved));
        }
        if let Some(z) = self.huge_zero.pfn {
            runs.push((z.0, self.geo.hpage_pmd_nr() as u32, Owner::HugeZero));
        }
        // The swap tables' pages (kernel memory).
        let mut kernel = 0;
        for si in &self.swap.si {
            for c in si.clusters.iter().filter(|c| c.table.is_some()) {
                runs.push((c.table_pfn, 1, Owner::Reserved));
                kernel += 1;
            }
        }
        if kernel != self.kernel_pages {
            return Err(violation!("{kernel} swap-table pages, kernel_pages {}", self.kernel_pages));
        }
        Ok(())
    }

    /// The hugetlb pool's free pages: hugetlb folios nobody references.
    fn check_hugetlb_pool(&self, runs: &mut Vec<(u32, u32, Owner)>) -> Result<(), Violation> {
        // The hugetlb pool's free pages: hugetlb folios nobody references.
        let h = &self.hugetlb;
        if h.free_list.len() as u64 != h.free_huge_pages || h.resv_huge_pages > h.free_huge_pages {
            return Err(violation!(
                "hugetlb: {} pages on the free list, free_huge_pages {}, resv_huge_pages {}",
                h.free_list.len(),
                h.free_huge_pages,
                h.resv_huge_pages
            ));
        }
        for &f in &h.free_list {
            let p = &self.mem.pages[f as usize];
            if !p.test(pg::HUGETLB) || p.refcount != 0 || p.entire_mapcount != 0 {
                return Err(violation!("free hugetlb page {f:#x}: flags {:#x}, refcount {}", p.flags, p.refcount));
            }
            runs.push((f, self.geo.hpage_pmd_nr() as u32, Owner::HugetlbFree));
        }
        Ok(())
    }

    /// Every mm's page tables recounted against VmPTE and rss; returns the tables found and
    /// the huge zero pmds.
    fn check_mms(&self, c: &mut CheckScratch, runs: &mut Vec<(u32, u32, Owner)>) -> Result<(i64, u64), Violation> {
        let mut nr_tables = 0i64;
        let mut hzp_pmds = 0u64;
        for (id, m) in self.mms.iter().enumerate() {
            let Some(m) = m else { continue };
            let id = id as MmId;
            let mut t = Recount::default();
            self.recount_table(id, m.pgd, 3, c, &mut t)?;
            let (rss, pgtables) = (t.rss, (t.tables - 1) * self.geo.page_size() as i64);
            if t.swapents != m.swapents {
                return Err(violation!("mm {id}: {} swap ptes, MM_SWAPENTS says {}", t.swapents, m.swapents));
            }
            if pgtables != m.pgtables_bytes {
                return Err(violation!("mm {id}: VmPTE recount {pgtables} bytes, kernel says {}", m.pgtables_bytes));
            }
            if rss != m.rss {
                return Err(violation!("mm {id}: rss recount {rss:?} (file, anon, shmem), kernel says {:?}", m.rss));
            }
            // locked_vm (VmLck): the pages of the VM_LOCKED vmas, and those MREMAP_DONTUNMAP
            // left counted; VM_LOCKONFAULT only with VM_LOCKED.
            let locked: i64 = m
                .vmas
                .values()
                .filter(|v| v.flags & vm::LOCKED != 0)
                .map(|v| (v.len() >> self.geo.page_shift) as i64)
                .sum();
            if locked + m.locked_vm_stray != m.locked_vm {
                return Err(violation!("mm {id}: locked_vm recount {locked} pages, kernel says {}", m.locked_vm));
            }
            if let Some(v) = m.vmas.values().find(|v| v.flags & vm::LOCKED_MASK == vm::LOCKONFAULT) {
                return Err(violation!("mm {id}: vma {:#x}-{:#x} is VM_LOCKONFAULT without VM_LOCKED", v.start, v.end));
            }
            nr_tables += c.tables.len() as i64;
            hzp_pmds += t.hzp_pmds;
            for &tb in &c.tables {
                let m = self.mem.pages[tb as usize].memcg;
                if m != super::memcontrol::NO_MEMCG {
                    if c.memcg_tables.len() <= m as usize {
                        c.memcg_tables.resize(m as usize + 1, 0);
                    }
                    c.memcg_tables[m as usize] += 1;
                }
            }
            runs.extend(c.tables.drain(..).map(|t| (t, 1, Owner::Table)));
        }
        Ok((nr_tables, hzp_pmds))
    }

    /// Seed 003: every shared table's users and sharers as the kernel keeps them.
    fn check_shared_tables(&self, c: &CheckScratch) -> Result<(), Violation> {
        for (&t, r) in &c.shared {
            let mut want = self.pt_reach.get(&t).cloned().unwrap_or_default();
            let mut got = r.mms.clone();
            want.sort_unstable();
            got.sort_unstable();
            if want != got {
                return Err(violation!("page table {t:#x} is reached by mms {got:?}, pt_reach says {want:?}"));
            }
            let share = self.mem.pages[t as usize].mapcount;
            if share != r.entries - 1 {
                return Err(violation!(
                    "page table {t:#x}: {} upper entries point at it, share count {share}",
                    r.entries
                ));
            }
        }
        if let Some(&t) = self.pt_reach.keys().find(|t| !c.shared.contains_key(t)) {
            return Err(violation!("pt_reach lists page table {t:#x}, which no mm reaches"));
        }
        Ok(())
    }

    /// The huge zero page's refcount, the mlocked folios (NR_MLOCK) and nr_page_table_pages.
    fn check_hzp_and_mlock(&self, hzp_pmds: u64, nr_tables: i64) -> Result<(), Violation> {
        if let Some(want) = self.huge_zero_expected_refcount(hzp_pmds) {
            if want != self.huge_zero.refcount {
                return Err(violation!(
                    "huge zero refcount {} but {want} expected ({hzp_pmds} huge zero pmds, policy {:?})",
                    self.huge_zero.refcount,
                    self.knobs.hzp_refcount
                ));
            }
        }
        if hzp_pmds > 0 && self.huge_zero.pfn.is_none() {
            return Err(violation!("{hzp_pmds} pmds map a huge zero page that is not allocated"));
        }
        // mlocked folios: allocated, flagged, and NR_MLOCK their pages.
        let mut mlocked = 0;
        for (&h, &n) in &self.mlock_count {
            let p = &self.mem.pages[h as usize];
            if n == 0 || !p.test(pg::MLOCKED) || p.refcount <= 0 {
                return Err(violation!(
                    "folio {h:#x}: mlock_count {n}, PG_mlocked {}, refcount {}",
                    p.test(pg::MLOCKED),
                    p.refcount
                ));
            }
            mlocked += self.folio_nr_pages(Pfn(h)) as i64;
        }
        if mlocked != self.stat.items[VmItem::NrMlock] {
            return Err(violation!("nr_mlock: recount {mlocked}, kernel says {}", self.stat.items[VmItem::NrMlock]));
        }
        if nr_tables != self.stat.items[VmItem::NrPageTablePages] {
            return Err(violation!(
                "nr_page_table_pages: recount {nr_tables}, kernel says {}",
                self.stat.items[VmItem::NrPageTablePages]
            ));
        }
        Ok(())
    }

    /// Page caches: shmem's (NR_SHMEM) and every file's (NR_FILE_PAGES), each slot a page of
    /// a folio of its inode at the folio's index.
    fn check_page_caches(&self, c: &mut CheckScratch, n: u64) -> Result<(), Violation> {
        // Page caches: shmem's (NR_SHMEM) and every file's (NR_FILE_PAGES).
        let mut shmem_refs = 0;
        for (obj, o) in self.shmem.iter().enumerate() {
            let Some(o) = o else { continue };
            // Each slot holds a page of a folio of this inode, at the folio's index.
            let before = c.cache_refs.len();
            for (i, p) in o.pages.cached() {
                c.cache_refs.push(p);
                if p as u64 >= n {
                    continue;
                }
                let head = self.mem.pages[p as usize].head;
                let h = &self.mem.pages[head as usize];
                if h.refcount <= 0 {
                    // A free frame: the reference counts below report it.
                    continue;
                }
                if h.flags & pg::FALLOC != 0 && (h.mapcount > 0 || h.entire_mapcount > 0 || !o.is_shmem()) {
                    // A fallocated folio is cleared and uptodate before anything maps it.
                    return Err(violation!("page cache of inode {obj}, index {i}: fallocated frame {p:#x} is mapped"));
                }
                if h.mapping != obj as u32 || h.index + (p - head) as u64 != i {
                    return Err(violation!(
                        "page cache of inode {obj}, index {i}: frame {p:#x} is of folio {head:#x} (mapping {}, \
                         index {})",
                        h.mapping,
                        h.index
                    ));
                }
            }
            if o.is_shmem() {
                shmem_refs += c.cache_refs.len() - before;
            }
            // A shmem page in swap: its index holds no page, its entry a slot's reference.
            for (&i, &e) in &o.swapped {
                if !o.is_shmem() || o.pages.load(i) != NIL {
                    return Err(violation!("page cache of inode {obj}, index {i}: a page and swap entry {e:#x}"));
                }
                let se = super::pgtable::SwpEntry(e);
                if se.ty() >= self.swap.si.len() || se.offset() == 0 || se.offset() >= self.swap.si[se.ty()].max {
                    return Err(violation!(
                        "page cache of inode {obj}, index {i}: swap entry {e:#x} refers to no slot"
                    ));
                }
                c.swap_refs.push(e);
            }
        }
        // The swap cache holds a reference per page too, and counts in NR_FILE_PAGES.
        let cluster = self.swap_cluster();
        let mut swapcached = 0i64;
        for si in &self.swap.si {
            for (ci, cl) in si.clusters.iter().enumerate() {
                let Some(t) = cl.table.as_ref() else { continue };
                for (k, &v) in t.iter().enumerate() {
                    if v & super::swapfile::TABLE_FOLIO == 0 {
                        continue;
                    }
                    let head = (v & !super::swapfile::TABLE_FOLIO) as u32;
                    let off = ci as u32 * cluster + k as u32;
                    let h = &self.mem.pages[head as usize];
                    let base = super::pgtable::SwpEntry(h.private);
                    if !h.test(pg::SWAPCACHE) || base.ty() != si.ty || off < base.offset() {
                        return Err(violation!(
                            "swap slot {}:{off:#x} holds folio {head:#x}, which is not its swap-cache folio",
                            si.ty
                        ));
                    }
                    c.cache_refs.push(head + (off - base.offset()));
                    swapcached += 1;
                }
            }
        }
        if swapcached != self.stat.items[VmItem::NrSwapcached] {
            return Err(violation!(
                "nr_swapcached: recount {swapcached}, kernel says {}",
                self.stat.items[VmItem::NrSwapcached]
            ));
        }
        let file_refs = c.cache_refs.len();
        if file_refs as i64 != self.stat.items[VmItem::NrFilePages] {
            return Err(violation!(
                "nr_file_pages: recount {file_refs}, kernel says {}",
                self.stat.items[VmItem::NrFilePages]
            ));
        }
        // Shared hugetlb files' page caches.
        for (f, o) in self.hugetlb.files.iter().enumerate() {
            let Some(o) = o else { continue };
            // A cached huge page is in the file's reservation map (region_add at its fault
            // or fallocate); a hugetlbfs memfd's name holds the file.
            if let Some(i) = (0..o.pages.len()).find(|&i| o.pages[i] != NIL && !o.resv.get(i).copied().unwrap_or(false))
            {
                return Err(violation!("hugetlb file {f}: page at index {i} is not in the reservation map"));
            }
            c.cache_refs.extend(o.pages.iter().copied().filter(|&p| p != NIL));
        }
        // The LRU batches hold a reference per folio they queued.
        c.cache_refs.extend(self.fbatch_folios().map(|h| h.0));
        for (name, &f) in &self.hugetlb.names {
            if self.hugetlb.files.get(f as usize).is_none_or(|o| o.is_none()) {
                return Err(violation!("hugetlbfs name {name:?}: file {f} is gone"));
            }
        }
        if shmem_refs as i64 != self.stat.items[VmItem::NrShmem] {
            return Err(violation!("nr_shmem: recount {shmem_refs}, kernel says {}", self.stat.items[VmItem::NrShmem]));
        }
        if let Some(&p) = c.cache_refs.iter().find(|&&p| p as u64 >= n) {
            return Err(violation!("a shmem page cache holds frame {p:#x}, past the end of memory"));
        }
        Ok(())
    }

    /// Every frame between the claimed runs is allocated and belongs to a folio; each folio's
    /// counts are checked against the mappings found. Returns the totals to check.
    fn check_folios(&self, c: &mut CheckScratch, runs: &[(u32, u32, Owner)], n: u64) -> Result<FolioTotals, Violation> {
        // Every frame between the claimed runs is allocated and belongs to a folio; check
        // each folio's counts against the mappings found.
        let mut anon_mapped = 0i64;
        let mut file_mapped = 0i64;
        let mut anon_thps = 0i64;
        let mut hugetlb_in_use = 0u64;
        // A swap write in flight holds its folio (the bio's reference).
        let mut io_refs: std::collections::HashMap<u32, i32> = std::collections::HashMap::new();
        for ev in self.blk.pending.values() {
            if let super::blkdev::IoEvent::SwapWriteDone(h) = ev {
                *io_refs.entry(h.0).or_default() += 1;
            }
        }
        let mut pfn = 0u64;
        let mut next_run = 0;
        loop {
            let gap_end = runs.get(next_run).map_or(n, |r| r.0 as u64);
            while pfn < gap_end {
                let head = pfn as usize;
                let p = &self.mem.pages[head];
                if p.test(pg::TAIL) || p.head != head as u32 {
                    return Err(violation!("frame {head:#x} is allocated but belongs to nothing (head {:#x})", p.head));
                }
                let nr = if p.test(pg::HEAD) { 1u64 << p.order } else { 1 };
                if pfn + nr > gap_end {
                    return Err(violation!("folio {head:#x} ({nr} pages) overlaps frames owned by something else"));
                }
                let pmd = take(&mut c.pmd_count, head);
                if p.entire_mapcount != pmd {
                    return Err(violation!(
                        "folio {head:#x}: entire_mapcount {} but {pmd} pmds map it",
                        p.entire_mapcount
                    ));
                }
                let mut refs = pmd;
                let mut mapped = pmd as i64;
                for i in 0..nr as usize {
                    let sp = &self.mem.pages[head + i];
                    let m = take(&mut c.pte_count, head + i);
                    if sp.mapcount != m {
                        return Err(violation!("page {:#x}: mapcount {} but {m} ptes map it", head + i, sp.mapcount));
                    }
                    // The page cache holds a reference per page of a folio.
                    refs += m + take(&mut c.cache_count, head + i);
                    mapped += m as i64;
                    if sp.test(pg::ANON) && (m > 0 || pmd > 0) {
                        anon_mapped += 1;
                    }
                    if p.mapping != NIL && !p.test(pg::HUGETLB) && (m > 0 || pmd > 0) {
                        file_mapped += 1;
                    }
                }
                if pmd > 0 && p.test(pg::ANON) {
                    anon_thps += 1;
                }
                if p.test(pg::HUGETLB) {
                    hugetlb_in_use += 1;
                }
                if super::check_reclaim::rmap_tracked(p) && Some(Pfn(head as u32)) != self.huge_zero.pfn {
                    c.rmap_mapcount += mapped;
                }
                if p.memcg != super::memcontrol::NO_MEMCG {
                    if c.memcg_folio_pages.len() <= p.memcg as usize {
                        c.memcg_folio_pages.resize(p.memcg as usize + 1, 0);
                    }
                    c.memcg_folio_pages[p.memcg as usize] += nr;
                    if p.test(pg::SWAPCACHE) {
                        if c.memcg_swapcache.len() <= p.memcg as usize {
                            c.memcg_swapcache.resize(p.memcg as usize + 1, 0);
                        }
                        c.memcg_swapcache[p.memcg as usize] += nr;
                    }
                    if p.test(pg::PRIVATE) {
                        if c.memcg_bh_blocks.len() <= p.memcg as usize {
                            c.memcg_bh_blocks.resize(p.memcg as usize + 1, 0);
                        }
                        c.memcg_bh_blocks[p.memcg as usize] += self.folio_blocks(Pfn(head as u32));
                    }
                }
                if p.test(pg::LRU) {
                    c.lru_flagged += 1;
                    if p.test(pg::UNEVICTABLE) {
                        c.unevictable_pages += nr;
                        c.unevictable_folios += 1;
                    }
                }
                if p.test(pg::SWAPCACHE) {
                    let base = super::pgtable::SwpEntry(p.private);
                    let cluster = self.swap_cluster();
                    for i in 0..nr as u32 {
                        let e = base.add(i);
                        let v = self.swap.si.get(e.ty()).map_or(0, |s| s.table(e.offset(), cluster));
                        if v != super::swapfile::TABLE_FOLIO | head as u64 {
                            return Err(violation!("swap-cache folio {head:#x}: slot {e:?} does not hold it"));
                        }
                    }
                }
                if !io_refs.is_empty() {
                    refs += io_refs.get(&(head as u32)).copied().unwrap_or(0);
                }
                if refs == 0 {
                    return Err(violation!("folio {head:#x} ({nr} pages) is allocated but unreferenced (leak)"));
                }
                if p.refcount != refs {
                    return Err(violation!(
                        "folio {head:#x}: refcount {} but {refs} references found (flags {:#x})",
                        p.refcount,
                        p.flags
                    ));
                }
                pfn += nr;
            }
            let Some(&(a, len, _)) = runs.get(next_run) else { break };
            pfn = a as u64 + len as u64;
            next_run += 1;
        }
        Ok(FolioTotals { anon_mapped, file_mapped, anon_thps, hugetlb_in_use })
    }

    /// The vmstat items the folio walk recounted.
    fn check_totals(&self, t: FolioTotals) -> Result<(), Violation> {
        let FolioTotals { anon_mapped, file_mapped, anon_thps, hugetlb_in_use } = t;
        if anon_mapped != self.stat.items[VmItem::NrAnonPages] {
            return Err(violation!(
                "nr_anon_pages: recount {anon_mapped}, kernel says {}",
                self.stat.items[VmItem::NrAnonPages]
            ));
        }
        if file_mapped != self.stat.items[VmItem::NrMapped] {
            return Err(violation!(
                "nr_mapped: recount {file_mapped}, kernel says {}",
                self.stat.items[VmItem::NrMapped]
            ));
        }
        let h = &self.hugetlb;
        if hugetlb_in_use + h.free_huge_pages != h.nr_huge_pages
            || (hugetlb_in_use * self.geo.hpage_pmd_nr()) as i64 != self.stat.items[VmItem::NrHugetlb]
            || h.surplus_huge_pages > h.nr_huge_pages
        {
            return Err(violation!(
                "hugetlb: {hugetlb_in_use} pages in use and {} free, nr_huge_pages {}, surplus {}, nr_hugetlb {}",
                h.free_huge_pages,
                h.nr_huge_pages,
                h.surplus_huge_pages,
                self.stat.items[VmItem::NrHugetlb]
            ));
        }
        if anon_thps != self.stat.items[VmItem::NrAnonThps] {
            return Err(violation!(
                "nr_anon_transparent_hugepages: recount {anon_thps}, kernel says {}",
                self.stat.items[VmItem::NrAnonThps]
            ));
        }
        Ok(())
    }

    /// Walk one table of `mm` recursively, recording mappings and tables (each frame once)
    /// and adding to the mm's totals `t` (rss, tables reached, huge zero pmds). A table
    /// several mms reach (seed 003) is walked once and its totals added to each.
    fn recount_table(
        &self,
        mm: MmId,
        table: Pfn,
        level: u32,
        c: &mut CheckScratch,
        t: &mut Recount,
    ) -> Result<(), Violation> {
        if !self.pt_reach.is_empty() && self.pt_reach.contains_key(&table.0) {
            if let Some(r) = c.shared.get_mut(&table.0) {
                r.entries += 1;
                let sub = r.sub;
                // The mm reaches the whole subtree, walked once already.
                self.mark_reached(mm, table, level, c);
                // Its huge zero pmds are entries of one table: counted once (below), not per mm.
                t.tables += sub.tables;
                for (x, y) in t.rss.iter_mut().zip(sub.rss) {
                    *x += y;
                }
                return Ok(());
            }
            let mut sub = Recount::default();
            self.recount_table_inner(mm, table, level, c, &mut sub)?;
            let r = c.shared.entry(table.0).or_default();
            r.entries += 1;
            r.mms.push(mm);
            r.sub = sub;
            t.tables += sub.tables;
            t.hzp_pmds += sub.hzp_pmds;
            for (x, y) in t.rss.iter_mut().zip(sub.rss) {
                *x += y;
            }
            t.swapents += sub.swapents;
            return Ok(());
        }
        if self.mem.pages[table.idx()].mapcount != 0 {
            return Err(violation!(
                "page table {:#x} has share count {} but pt_reach does not list it",
                table.0,
                self.mem.pages[table.idx()].mapcount
            ));
        }
        self.recount_table_inner(mm, table, level, c, t)
    }

    /// A second (third, ...) mm reaches the already recounted shared `table`: record it as
    /// reaching every shared table of the subtree.
    fn mark_reached(&self, mm: MmId, table: Pfn, level: u32, c: &mut CheckScratch) {
        if let Some(r) = c.shared.get_mut(&table.0) {
            if !r.mms.contains(&mm) {
                r.mms.push(mm);
            }
        }
        if level == 0 {
            return;
        }
        for (i, e) in self.present_entries(table) {
            if !e.huge() {
                self.mark_reached(mm, e.pfn(), level - 1, c);
            } else if level == 1 {
                if let Some(&d) = self.deposited.get(&(table.0, i as u16)) {
                    if let Some(r) = c.shared.get_mut(&d) {
                        if !r.mms.contains(&mm) {
                            r.mms.push(mm);
                        }
                    }
                }
            }
        }
    }

    fn recount_table_inner(
        &self,
        mm: MmId,
        table: Pfn,
        level: u32,
        c: &mut CheckScratch,
        t: &mut Recount,
    ) -> Result<(), Violation> {
        c.tables.push(table.0);
        t.tables += 1;
        if !self.mem.pages[table.idx()].test(pg::TABLE) {
            return Err(violation!("frame {:#x} used as a {} table lacks PG_table", table.0, level));
        }
        if level == 0 {
            for (i, e) in self.swap_entries(table) {
                let se = e.swp_entry();
                if se.ty() >= self.swap.si.len() || se.offset() == 0 || se.offset() >= self.swap.si[se.ty()].max {
                    return Err(violation!("swap pte {:#x}[{i}] refers to no swap slot: {e:?}", table.0));
                }
                c.swap_refs.push(se.0);
                t.swapents += 1;
            }
        }
        for (i, e) in self.present_entries(table) {
            if e.pfn().idx() >= self.mem.pages.len() {
                return Err(violation!("entry {:#x}[{i}] points past the end of memory ({:#x})", table.0, e.pfn().0));
            }
            if level == 0 {
                if e.special() {
                    if !self.is_zero_pfn(e.pfn()) {
                        return Err(violation!("special pte to {:#x}, not the zero page", e.pfn().0));
                    }
                    continue;
                }
                c.pte_maps.push(e.pfn().0);
                let ctr = self.mm_counter(e.pfn());
                t.rss[ctr as usize] += 1;
            } else if level == 1 && e.huge() && self.is_hugetlb_pmd(e) {
                // A hugetlb page: no deposited table, not in rss.
                c.pmd_maps.push(e.pfn().0);
            } else if level == 1 && e.huge() && self.is_file_pmd(e) {
                // A page-cache folio: no deposited table (x86), in the file or shmem rss.
                if self.deposited.contains_key(&(table.0, i as u16)) {
                    return Err(violation!("file pmd {:#x}[{i}] has a deposited table", table.0));
                }
                c.pmd_maps.push(e.pfn().0);
                t.rss[self.mm_counter(e.pfn()) as usize] += self.geo.hpage_pmd_nr() as i64;
            } else if level == 1 && e.huge() {
                let dep = self
                    .deposited
                    .get(&(table.0, i as u16))
                    .ok_or_else(|| violation!("huge pmd {:#x}[{i}] has no deposited table", table.0))?;
                c.tables.push(*dep);
                t.tables += 1;
                if self.pt_reach.contains_key(dep) {
                    // Deposited under a huge pmd of a shared PMD table (seed 003).
                    let sub = Recount { tables: 1, ..Default::default() };
                    c.shared.insert(*dep, SharedRecount { sub, mms: vec![mm], entries: 1 });
                }
                if self.is_huge_zero_pmd(e) {
                    t.hzp_pmds += 1;
                    continue;
                }
                c.pmd_maps.push(e.pfn().0);
                t.rss[MmCounter::AnonPages as usize] += self.geo.hpage_pmd_nr() as i64;
            } else if level > 0 {
                self.recount_table(mm, e.pfn(), level - 1, c, t)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::knobs::Knobs;
    use crate::kernel::mm::vm;
    use crate::kernel::mmap::MmapArgs;
    use crate::kernel::pgtable::Entry;
    use crate::kernel::Kernel;
    use crate::units::Pfn;

    /// A process with 4 written pages (4 KiB ptes).
    fn kernel() -> (Kernel, u32, u64) {
        let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
        let mm = k.exec_mm().unwrap();
        let a = k.do_mmap(mm, MmapArgs { len: 16 << 10, prot: vm::READ | vm::WRITE, ..Default::default() }).unwrap();
        for i in 0..4 {
            assert_eq!(k.handle_mm_fault(mm, a + i * 4096, true), 0);
        }
        k.check_invariants().unwrap();
        (k, mm, a)
    }

    /// Each kind of corruption is reported, and a failed check leaves nothing behind that
    /// would upset the next one.
    #[test]
    fn corruptions_are_reported_and_checks_stay_independent() {
        // A pte redirected to a free frame.
        let (mut k, mm, a) = kernel();
        let slot = k.pte_slot(mm, a).unwrap();
        let e = k.entry(slot.table, slot.idx);
        let free = k.mem.free_blocks()[0].0;
        k.set_entry(slot.table, slot.idx, Entry::new(Pfn(free), e.0 & 0xfff));
        assert!(k.check_invariants().is_err());
        k.set_entry(slot.table, slot.idx, e);
        k.check_invariants().unwrap();
        // A pte duplicated onto its neighbour: a mapcount is off.
        let e1 = k.entry(slot.table, slot.idx + 1);
        k.set_entry(slot.table, slot.idx + 1, e);
        let err = k.check_invariants().unwrap_err().0;
        assert!(err.contains("mapcount") || err.contains("refcount"), "{err}");
        k.set_entry(slot.table, slot.idx + 1, e1);
        k.check_invariants().unwrap();
        // A second process whose pmd points at the first one's PTE table: owned twice.
        let mm2 = k.exec_mm().unwrap();
        let b = k.do_mmap(mm2, MmapArgs { len: 4096, prot: vm::READ | vm::WRITE, ..Default::default() }).unwrap();
        assert_eq!(k.handle_mm_fault(mm2, b, true), 0);
        let pmd2 = k.pmd_slot(mm2, b).unwrap();
        let own = k.entry(pmd2.table, pmd2.idx);
        let theirs = k.entry(k.pmd_slot(mm, a).unwrap().table, k.pmd_slot(mm, a).unwrap().idx);
        k.set_entry(pmd2.table, pmd2.idx, theirs);
        assert!(k.check_invariants().is_err());
        k.set_entry(pmd2.table, pmd2.idx, own);
        k.check_invariants().unwrap();
        // A shmem page cache slot pointing at a free frame (the counts agree; the frame is
        // no folio's).
        let s = k.do_mmap(mm, MmapArgs { len: 4096, prot: vm::READ | vm::WRITE, shared: true, ..Default::default() });
        let s = s.unwrap();
        assert_eq!(k.handle_mm_fault(mm, s, true), 0);
        k.check_invariants().unwrap();
        let obj = k.shmem.iter().position(|o| o.is_some()).unwrap();
        let (slot, page) = k.shmem[obj].as_ref().unwrap().pages.cached().next().unwrap();
        let free = k.mem.free_blocks()[0].0;
        k.shmem[obj].as_mut().unwrap().pages.store(slot, free);
        let err = k.check_invariants().unwrap_err().0;
        assert!(err.contains("not a page of an allocated folio") || err.contains("refcount"), "{err}");
        k.shmem[obj].as_mut().unwrap().pages.store(slot, page);
        k.check_invariants().unwrap();
    }
}
