//! mm/hugetlb.c for the default huge page size (x86-64: 2 MiB, mapped by a PMD leaf), as
//! Linux 6.18 has it for MAP_HUGETLB anonymous mappings (docs/research/003-hugetlb.md):
//!
//! - The pool (`struct hstate`): persistent pages sized by `vm/nr_hugepages`, surplus pages up
//!   to `vm/nr_overcommit_hugepages`, a LIFO free list, and reservations (HugePages_Rsvd).
//! - Each mapping is an unlinked hugetlbfs file (`hugetlb_file_setup`). A shared mapping
//!   reserves every page of the file at mmap and keeps its pages in the file's page cache; a
//!   private one reserves for its owner (HPAGE_RESV_OWNER) and maps anonymous pages that fork
//!   shares copy-on-write.
//! - Faults (`hugetlb_fault`, `hugetlb_no_page`, `hugetlb_wp`) allocate from the pool; an
//!   empty pool is SIGBUS. A COW the owner cannot allocate for takes the page back from the
//!   children (`unmap_ref_private`), whose next fault there is SIGBUS.
//! - PMD sharing (CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING): a shared mapping whose vma holds a
//!   whole 1 GiB window shares a sibling's PMD table (same file offset, same offset in the
//!   window, same flags), through the same table-sharing code as seed 003; unshared on
//!   munmap, mprotect, mremap and vma splits that cut the window. With `vm/ptshare` set, the
//!   seed's rules decide instead (its PTSHARE_HUGEPAGE).
//! - Not in RSS: `HugetlbPages` (mm->hugetlb_usage) counts a page in the mm that faulted or
//!   copied it and leaves it in the mm that unmaps it, so under PMD sharing it is skewed as
//!   Linux's is; `nr_hugetlb` counts pages in use.
//!
//! Deliberately left out: other huge page sizes (1 GiB), hugetlbfs files by name, subpools,
//! MAP_NORESERVE, NUMA node pools, cgroups, page migration and memory failure.

use super::memory::Slot;
use super::mm::{vm, Backing, Vma};
use super::mm_types::{i_mmap_insert, i_mmap_remove, pg, NIL};
use super::mmap::Errno;
use super::page_alloc::{gfp, ClearPath};
use super::pgtable::{self, Entry};
use super::vmstat::VmItem;
use super::{vm_fault, Kernel, MmId};
use crate::units::{align_down, Pfn};

/// The default hstate's pool and the hugetlbfs files of the mappings.
#[derive(Clone, Debug, Default)]
pub struct Hstate {
    /// nr_huge_pages: every huge page of the pool, surplus included (HugePages_Total).
    pub nr_huge_pages: u64,
    /// free_huge_pages (HugePages_Free).
    pub free_huge_pages: u64,
    /// resv_huge_pages: free pages promised to mappings (HugePages_Rsvd).
    pub resv_huge_pages: u64,
    /// surplus_huge_pages: pages above nr_hugepages, allocated for overcommit (HugePages_Surp).
    pub surplus_huge_pages: u64,
    /// hugepage_freelists: free folios (head frames), the last freed taken first.
    pub free_list: Vec<u32>,
    /// The hugetlbfs files: the unlinked ones of MAP_HUGETLB mappings, and memfd_create's
    /// (MFD_HUGETLB), which also have a name here (kernel/memfd.rs).
    pub files: Vec<Option<HugetlbFile>>,
    /// The hugetlbfs files a workload names (memfd_create with MFD_HUGETLB): name -> file.
    pub names: std::collections::BTreeMap<String, u32>,
}

/// An unlinked hugetlbfs file backing one MAP_HUGETLB mapping.
#[derive(Clone, Debug)]
pub struct HugetlbFile {
    /// MAP_SHARED: pages live in the page cache; else private (anonymous) pages.
    pub shared: bool,
    /// The page cache, one huge page per index (shared files).
    pub pages: Vec<u32>,
    /// The resv_map: for a shared file, the indices reserved (region_add at mmap); for a
    /// private one, the indices whose reservation the owner has consumed.
    pub resv: Vec<bool>,
    /// `i_size` in bytes (a multiple of the huge page size): a shared mapping's fault past it
    /// is SIGBUS.
    pub i_size: u64,
    /// vmas referencing the file, and its name (a memfd's open file) if it has one.
    pub refs: u32,
    /// The mms mapping it, with their vma counts (i_mmap at mm granularity).
    pub mms: Vec<(MmId, u32)>,
    /// HPAGE_RESV_OWNER: the mm whose private mapping holds the reservation.
    pub owner: Option<MmId>,
    /// HPAGE_RESV_UNMAPPED: mms whose pages the owner took back for a COW it could not
    /// allocate; their next fault in the mapping is SIGBUS.
    pub unmapped: Vec<MmId>,
}

impl Kernel {
    /// Base pages in a huge page (pages_per_huge_page).
    #[inline]
    pub(super) fn hpage_nr(&self) -> u64 {
        self.geo.hpage_pmd_nr()
    }

    /// The file of a hugetlb vma.
    fn hugetlb_file(&self, vma: &Vma) -> u32 {
        match vma.backing {
            Backing::Hugetlb(f) => f,
            _ => panic!("not a hugetlb vma"),
        }
    }

    pub(super) fn hfile(&self, f: u32) -> &HugetlbFile {
        self.hugetlb.files[f as usize].as_ref().expect("hugetlb file")
    }

    pub(super) fn hfile_mut(&mut self, f: u32) -> &mut HugetlbFile {
        self.hugetlb.files[f as usize].as_mut().expect("hugetlb file")
    }

    /// Huge-page index of `addr` in the vma's file (vma_hugecache_offset).
    fn vma_hugecache_offset(&self, vma: &Vma, addr: u64) -> u64 {
        vma.linear_page_index(addr, self.geo) / self.hpage_nr()
    }

    /// `persistent_huge_pages`.
    pub fn persistent_huge_pages(&self) -> u64 {
        self.hugetlb.nr_huge_pages - self.hugetlb.surplus_huge_pages
    }

    /// `alloc_buddy_hugetlb_folio` + `prep_new_hugetlb_folio`: a fresh huge page from the
    /// buddy allocator (with reclaim, never the OOM killer), not yet counted anywhere.
    fn alloc_fresh_hugetlb_folio(&mut self) -> Option<Pfn> {
        let a =
            self.alloc_pages(self.geo.hpage_pmd_order(), gfp::COMP | gfp::USER | gfp::KERNEL | gfp::RETRY_MAYFAIL)?;
        let head = &mut self.mem.pages[a.pfn.idx()];
        head.set(pg::HUGETLB);
        head.refcount = 0;
        Some(a.pfn)
    }

    /// `update_and_free_hugetlb_folio`: a huge page back to the buddy allocator.
    fn update_and_free_hugetlb_folio(&mut self, head: Pfn) {
        let p = &mut self.mem.pages[head.idx()];
        p.clear(pg::HUGETLB | pg::RESTORE_RESERVE);
        self.free_pages_ok(head, self.geo.hpage_pmd_order());
    }

    /// `enqueue_hugetlb_folio`.
    fn enqueue_hugetlb_folio(&mut self, head: Pfn) {
        self.hugetlb.free_list.push(head.0);
        self.hugetlb.free_huge_pages += 1;
    }

    /// `dequeue_hugetlb_folio_node_exact`.
    fn dequeue_hugetlb_folio(&mut self) -> Option<Pfn> {
        let h = self.hugetlb.free_list.pop()?;
        self.hugetlb.free_huge_pages -= 1;
        Some(Pfn(h))
    }

    /// `set_max_huge_pages` (a write of /proc/sys/vm/nr_hugepages): take surplus pages into
    /// the persistent pool, allocate fresh ones as far as memory allows, then free what is
    /// free and not reserved down to the target, and let in-use pages above it become surplus.
    pub fn set_max_huge_pages(&mut self, count: u64) {
        let h = &mut self.hugetlb;
        while h.surplus_huge_pages > 0 && count > h.nr_huge_pages - h.surplus_huge_pages {
            h.surplus_huge_pages -= 1;
        }
        while count > self.persistent_huge_pages() {
            let Some(p) = self.alloc_fresh_hugetlb_folio() else { break };
            self.hugetlb.nr_huge_pages += 1;
            self.enqueue_hugetlb_folio(p);
        }
        let h = &self.hugetlb;
        let min_count = (h.resv_huge_pages + h.nr_huge_pages - h.free_huge_pages).max(count);
        while min_count < self.persistent_huge_pages() {
            let Some(p) = self.dequeue_hugetlb_folio() else { break };
            self.hugetlb.nr_huge_pages -= 1;
            self.update_and_free_hugetlb_folio(p);
        }
        while count < self.persistent_huge_pages() {
            // adjust_pool_surplus(+1): an in-use page becomes surplus, freed when it is.
            self.hugetlb.surplus_huge_pages += 1;
        }
        self.knobs.nr_hugepages = self.persistent_huge_pages();
        self.sync_items();
    }

    /// `hugetlb_acct_memory` (`gather_surplus_pages` / `return_unused_surplus_pages`):
    /// reserve `delta` more pages (or release -delta). A reservation the free pages cannot
    /// cover takes surplus pages, if overcommit allows; else it fails (mmap ENOMEM).
    pub(super) fn hugetlb_acct_memory(&mut self, delta: i64) -> Result<(), Errno> {
        if delta >= 0 {
            let delta = delta as u64;
            let h = &self.hugetlb;
            let needed = (h.resv_huge_pages + delta) as i64 - h.free_huge_pages as i64;
            if needed > 0 {
                let needed = needed as u64;
                if h.surplus_huge_pages + needed > self.knobs.nr_overcommit_hugepages {
                    return Err(Errno::ENOMEM);
                }
                let mut got = Vec::new();
                for _ in 0..needed {
                    match self.alloc_fresh_hugetlb_folio() {
                        Some(p) => got.push(p),
                        None => {
                            for p in got {
                                self.update_and_free_hugetlb_folio(p);
                            }
                            return Err(Errno::ENOMEM);
                        }
                    }
                }
                for p in got {
                    self.hugetlb.nr_huge_pages += 1;
                    self.hugetlb.surplus_huge_pages += 1;
                    self.enqueue_hugetlb_folio(p);
                }
            }
            self.hugetlb.resv_huge_pages += delta;
        } else {
            let unused = (-delta) as u64;
            self.hugetlb.resv_huge_pages -= unused;
            // return_unused_surplus_pages: free surplus pages no longer needed.
            let mut n = unused.min(self.hugetlb.surplus_huge_pages);
            while n > 0 && self.hugetlb.free_huge_pages > self.hugetlb.resv_huge_pages {
                let Some(p) = self.dequeue_hugetlb_folio() else { break };
                self.hugetlb.nr_huge_pages -= 1;
                self.hugetlb.surplus_huge_pages -= 1;
                self.update_and_free_hugetlb_folio(p);
                n -= 1;
            }
        }
        self.sync_items();
        Ok(())
    }

    /// `alloc_hugetlb_folio`: a page from the pool for a fault, consuming a reservation when
    /// the mapping holds one for it; without one, only a free page no reservation promised,
    /// or a surplus page if overcommit allows (`alloc_surplus_hugetlb_folio`). None: -ENOSPC.
    pub(super) fn alloc_hugetlb_folio(&mut self, reserved: bool) -> Option<Pfn> {
        let h = &self.hugetlb;
        let p = if reserved {
            debug_assert!(h.free_huge_pages >= h.resv_huge_pages && h.resv_huge_pages > 0);
            self.hugetlb.resv_huge_pages -= 1;
            self.dequeue_hugetlb_folio()
        } else if h.free_huge_pages > h.resv_huge_pages {
            self.dequeue_hugetlb_folio()
        } else if h.surplus_huge_pages < self.knobs.nr_overcommit_hugepages {
            let p = self.alloc_fresh_hugetlb_folio()?;
            self.hugetlb.nr_huge_pages += 1;
            self.hugetlb.surplus_huge_pages += 1;
            Some(p)
        } else {
            None
        }?;
        let head = &mut self.mem.pages[p.idx()];
        head.refcount = 1;
        head.entire_mapcount = 0;
        head.mapping = NIL;
        head.clear(pg::ANON_EXCLUSIVE | pg::RESTORE_RESERVE);
        self.stat.mod_item(VmItem::NrHugetlb, self.hpage_nr() as i64);
        Some(p)
    }

    /// `free_huge_folio`: the last reference to a huge page went. A page whose reservation
    /// its unmap restored gives it back; a surplus page goes to the buddy allocator, any other
    /// to the free list.
    pub(super) fn free_huge_folio(&mut self, head: Pfn) {
        self.stat.mod_item(VmItem::NrHugetlb, -(self.hpage_nr() as i64));
        let p = &mut self.mem.pages[head.idx()];
        if p.test(pg::RESTORE_RESERVE) {
            p.clear(pg::RESTORE_RESERVE);
            self.hugetlb.resv_huge_pages += 1;
        }
        p.clear(pg::ANON_EXCLUSIVE);
        p.mapping = NIL;
        if self.hugetlb.surplus_huge_pages > 0 {
            self.hugetlb.nr_huge_pages -= 1;
            self.hugetlb.surplus_huge_pages -= 1;
            self.update_and_free_hugetlb_folio(head);
        } else {
            self.enqueue_hugetlb_folio(head);
        }
        self.sync_items();
    }

    /// `hugetlb_file_setup` + `hugetlb_reserve_pages`: the unlinked file of a new MAP_HUGETLB
    /// mapping of `len` bytes (a multiple of the huge page size) by `mm`, with its pages
    /// reserved: every page for a shared file, the owner's for a private one.
    pub(super) fn hugetlb_file_setup(&mut self, mm: MmId, len: u64, shared: bool) -> Result<u32, Errno> {
        let n = (len / self.geo.hpage_pmd_size()) as usize;
        self.hugetlb_acct_memory(n as i64)?;
        let file = HugetlbFile {
            shared,
            i_size: len,
            pages: if shared { vec![NIL; n] } else { Vec::new() },
            resv: vec![shared; n],
            refs: 1,
            mms: vec![(mm, 1)],
            owner: (!shared).then_some(mm),
            unmapped: Vec::new(),
        };
        Ok(self.hugetlb_file_insert(file))
    }

    /// A new hugetlbfs inode in the file table (reusing a free slot); returns its id.
    pub(super) fn hugetlb_file_insert(&mut self, file: HugetlbFile) -> u32 {
        if let Some(i) = self.hugetlb.files.iter().position(|f| f.is_none()) {
            self.hugetlb.files[i] = Some(file);
            return i as u32;
        }
        self.hugetlb.files.push(Some(file));
        (self.hugetlb.files.len() - 1) as u32
    }

    /// `get_file`: one more vma of `mm` maps the file.
    pub fn hugetlb_file_get(&mut self, f: u32, mm: MmId) {
        let o = self.hfile_mut(f);
        o.refs += 1;
        i_mmap_insert(&mut o.mms, mm);
    }

    /// `fput`: a vma of `mm` no longer maps the file; the last reference evicts it
    /// (`hugetlbfs_evict_inode`: `remove_inode_hugepages` frees the page cache and
    /// `hugetlb_unreserve_pages` gives back the reservations no fault used).
    pub fn hugetlb_file_put(&mut self, f: u32, mm: MmId) {
        i_mmap_remove(&mut self.hfile_mut(f).mms, mm);
        self.hugetlb_iput(f);
    }

    /// `iput` of a hugetlbfs inode: the last reference evicts it (see `hugetlb_file_put`).
    pub(super) fn hugetlb_iput(&mut self, f: u32) {
        let o = self.hfile_mut(f);
        o.refs -= 1;
        if o.refs > 0 {
            return;
        }
        let o = self.hugetlb.files[f as usize].take().expect("hugetlb file");
        if o.shared {
            let mut freed = 0i64;
            for &p in &o.pages {
                if p != NIL {
                    freed += 1;
                    self.folio_put(Pfn(p));
                }
            }
            let reserved = o.resv.iter().filter(|&&r| r).count() as i64;
            let _ = self.hugetlb_acct_memory(-(reserved - freed));
        }
    }

    /// `hugetlb_vm_op_close` of [start, end) of a private mapping's vma: its owner gives back
    /// the reservations of the pages it never faulted there.
    pub(super) fn hugetlb_vm_op_close(&mut self, mm: MmId, vma: &Vma, start: u64, end: u64) {
        let f = self.hugetlb_file(vma);
        let o = self.hfile(f);
        if o.shared || o.owner != Some(mm) {
            return;
        }
        let (a, b) = (self.vma_hugecache_offset(vma, start) as usize, self.vma_hugecache_offset(vma, end) as usize);
        let consumed = o.resv[a..b.min(o.resv.len())].iter().filter(|&&c| c).count();
        let reserve = (b - a - consumed) as i64;
        for c in &mut self.hfile_mut(f).resv[a..b] {
            *c = false;
        }
        if reserve > 0 {
            let _ = self.hugetlb_acct_memory(-reserve);
        }
    }

    /// `hugetlb_fault`: the PMD slot (`huge_pte_alloc`, sharing a sibling's PMD table where
    /// allowed), then `hugetlb_no_page` for an empty one, `hugetlb_wp` for a write to a
    /// read-only one; anything else was spurious.
    pub(super) fn hugetlb_fault(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool) -> u32 {
        if self.knobs.ptshare != 0 {
            if !self.pt_share_fault(mm, vma, addr) {
                return vm_fault::OOM;
            }
        } else if self.knobs.hugetlb_pmd_share && !self.huge_pmd_share(mm, vma, addr) {
            return vm_fault::OOM;
        }
        let Some(pmd) = self.pmd_alloc(mm, addr) else {
            return vm_fault::OOM;
        };
        let e = self.entry(pmd.table, pmd.idx);
        if e.none() {
            self.current.fault_path = "hugetlb_no_page";
            return self.hugetlb_no_page(mm, vma, addr, write, pmd);
        }
        if write && !e.write() {
            self.current.fault_path = "hugetlb_wp";
            return self.hugetlb_wp(mm, vma, addr, pmd);
        }
        self.current.fault_path = "hugetlb_fault";
        let mut ne = e.with(pgtable::ACCESSED);
        if write {
            ne = ne.with(pgtable::DIRTY);
        }
        self.set_entry(pmd.table, pmd.idx, ne);
        0
    }

    /// The leaf entry of a huge page in `vma`: writable for a shared writable mapping, or
    /// when `writable` (a private write fault or COW); read-only otherwise.
    fn make_huge_pte(&self, vma: &Vma, page: Pfn, writable: bool) -> Entry {
        let e = Entry::new(page, super::memory::vm_page_prot(vma) | pgtable::PSE | pgtable::ACCESSED);
        if writable && vma.flags & vm::WRITE != 0 {
            e.with(pgtable::RW | pgtable::DIRTY)
        } else {
            e
        }
    }

    /// `hugetlb_no_page`: a shared mapping maps the page cache's page, allocating it (from its
    /// reservation) on first use; a private one allocates a new page (the owner from its
    /// reservation), mapped read-only for a read. Cleared with `folio_zero_user`. No page:
    /// SIGBUS.
    fn hugetlb_no_page(&mut self, mm: MmId, vma: &Vma, addr: u64, write: bool, pmd: Slot) -> u32 {
        let f = self.hugetlb_file(vma);
        let idx = self.vma_hugecache_offset(vma, addr) as usize;
        let shared = self.hfile(f).shared;
        let page = if shared {
            // find_lock_page in the hugetlbfs file's page cache.
            self.pagecache_lookup_lock(f | 1 << 24);
            if idx as u64 >= self.hfile(f).i_size / self.geo.hpage_pmd_size() {
                return vm_fault::SIGBUS;
            }
            let page = match self.hfile(f).pages[idx] {
                NIL => {
                    let Some(p) = self.hugetlb_add_file_page(f, idx, addr) else {
                        return vm_fault::SIGBUS;
                    };
                    p
                }
                p => Pfn(p),
            };
            self.folio_get(page);
            page
        } else {
            if self.hfile(f).unmapped.contains(&mm) {
                // HPAGE_RESV_UNMAPPED: the owner took this mapping's pages back.
                return vm_fault::SIGBUS;
            }
            let owner = self.hfile(f).owner == Some(mm);
            let reserved = owner && idx < self.hfile(f).resv.len() && !self.hfile(f).resv[idx];
            let Some(p) = self.alloc_hugetlb_folio(reserved) else {
                return vm_fault::SIGBUS;
            };
            if owner && idx < self.hfile(f).resv.len() {
                self.hfile_mut(f).resv[idx] = true;
            }
            self.clear_huge_page(p, addr);
            // hugetlb_add_new_anon_rmap: an anonymous page of this mm alone; the allocation's
            // reference is the mapping's.
            self.anon_vma_prepare(mm, vma.start);
            self.mem.pages[p.idx()].set(pg::ANON_EXCLUSIVE);
            p
        };
        self.mem.pages[page.idx()].entire_mapcount += 1;
        self.track_mm(page, mm, 1);
        let writable = shared || write;
        let e = self.make_huge_pte(vma, page, writable);
        self.set_entry(pmd.table, pmd.idx, e);
        self.mm_mut(mm).hugetlb_usage += self.hpage_nr() as i64;
        0
    }

    /// A new page at index `idx` of a shared hugetlbfs file (`hugetlb_no_page`'s, and
    /// hugetlbfs_fallocate's): from the index's reservation if it has one, else from a free
    /// page no reservation promised (`alloc_hugetlb_folio`); cleared (`folio_zero_user`, the
    /// subpage of `addr` last) and added to the page cache, whose reference the allocation's
    /// is. None: no page (-ENOSPC).
    pub(super) fn hugetlb_add_file_page(&mut self, f: u32, idx: usize, addr: u64) -> Option<Pfn> {
        let reserved = self.hfile(f).resv[idx];
        let p = self.alloc_hugetlb_folio(reserved)?;
        // A page instantiated without a reservation is counted in the map too
        // (region_add), so eviction gives back only reservations never used.
        self.hfile_mut(f).resv[idx] = true;
        self.clear_huge_page(p, addr);
        // hugetlb_add_to_page_cache: the allocation's reference is the cache's.
        self.mem.pages[p.idx()].mapping = f;
        self.mem.pages[p.idx()].index = idx as u64;
        self.hfile_mut(f).pages[idx] = p.0;
        Some(p)
    }

    /// `folio_zero_user` of a new huge page, the faulting subpage last.
    pub(super) fn clear_huge_page(&mut self, head: Pfn, addr: u64) {
        let nr = self.hpage_nr();
        let target = ((addr >> self.geo.page_shift) & (nr - 1)) as u32;
        self.clear_pages_hint(head, nr, 1, ClearPath::User, target);
    }

    /// `hugetlb_wp`: a write to a read-only huge page of a private mapping. A page mapped only
    /// here and anonymous is reused; otherwise it is copied into a new page (the owner
    /// allocates without its reservation). If the owner finds none, `unmap_ref_private` takes
    /// the page from every other mm (their later faults there are SIGBUS) and the owner
    /// reuses it; anyone else gets SIGBUS.
    fn hugetlb_wp(&mut self, mm: MmId, vma: &Vma, addr: u64, pmd: Slot) -> u32 {
        let e = self.entry(pmd.table, pmd.idx);
        let old = e.pfn();
        if vma.is_shared() {
            self.set_entry(pmd.table, pmd.idx, e.with(pgtable::RW | pgtable::DIRTY));
            return 0;
        }
        let p = self.mem.pages[old.idx()];
        if p.entire_mapcount == 1 && p.mapping == NIL {
            self.mem.pages[old.idx()].set(pg::ANON_EXCLUSIVE);
            self.set_entry(pmd.table, pmd.idx, e.with(pgtable::RW | pgtable::DIRTY | pgtable::ACCESSED));
            self.stat.count(super::vmstat::VmEvent::ReuseFault);
            return 0;
        }
        let f = self.hugetlb_file(vma);
        let owner = self.hfile(f).owner == Some(mm);
        let new = match self.alloc_hugetlb_folio(false) {
            Some(n) => n,
            None if owner => {
                self.unmap_ref_private(mm, vma, addr, old);
                let e = self.entry(pmd.table, pmd.idx);
                if self.mem.pages[old.idx()].entire_mapcount == 1 {
                    self.mem.pages[old.idx()].set(pg::ANON_EXCLUSIVE);
                    self.set_entry(pmd.table, pmd.idx, e.with(pgtable::RW | pgtable::DIRTY | pgtable::ACCESSED));
                    return 0;
                }
                return vm_fault::SIGBUS;
            }
            None => return vm_fault::SIGBUS,
        };
        // copy_user_large_folio.
        for i in 0..self.hpage_nr() as u32 {
            self.copy_page(Pfn(new.0 + i), Pfn(old.0 + i));
        }
        self.stat.count(super::vmstat::VmEvent::CowFault);
        self.anon_vma_prepare(mm, vma.start);
        self.mem.pages[new.idx()].set(pg::ANON_EXCLUSIVE);
        self.mem.pages[new.idx()].entire_mapcount = 1;
        self.track_mm(new, mm, 1);
        let ne = self.make_huge_pte(vma, new, true);
        self.set_entry(pmd.table, pmd.idx, ne);
        let haddr = self.geo.hpage_pmd_align_down(addr);
        self.flush_tlb_range(mm, haddr, haddr + self.geo.hpage_pmd_size());
        // hugetlb_remove_rmap + folio_put of the old page.
        self.mem.pages[old.idx()].entire_mapcount -= 1;
        self.track_mm(old, mm, -1);
        self.folio_put(old);
        0
    }

    /// `unmap_ref_private`: the owner of a private mapping could not allocate for a COW, so
    /// every other mm mapping the file at this offset loses the page, and is marked
    /// HPAGE_RESV_UNMAPPED.
    fn unmap_ref_private(&mut self, mm: MmId, vma: &Vma, addr: u64, page: Pfn) {
        let f = self.hugetlb_file(vma);
        let idx = vma.linear_page_index(self.geo.hpage_pmd_align_down(addr), self.geo);
        let others: Vec<MmId> = self.hfile(f).mms.iter().map(|e| e.0).filter(|&m| m != mm).collect();
        for m in others {
            let Some(v) = self.mm(m).vmas.values().find(|v| {
                v.backing == vma.backing && v.pgoff <= idx && idx < v.pgoff + (v.len() >> self.geo.page_shift)
            }) else {
                continue;
            };
            let a = v.start + ((idx - v.pgoff) << self.geo.page_shift);
            let v = v.clone();
            if let Some(slot) = self.pmd_slot(m, a) {
                let e = self.entry(slot.table, slot.idx);
                if e.present() && e.pfn() == page {
                    self.unmap_hugepage_range(m, &v, a, a + self.geo.hpage_pmd_size());
                }
            }
            let o = self.hfile_mut(f);
            if !o.unmapped.contains(&m) {
                o.unmapped.push(m);
            }
        }
    }

    /// `__unmap_hugepage_range`: clear the huge pmds of [start, end) in `vma` (a PMD table
    /// shared with other mms is unshared instead, the whole 1 GiB of it), dropping the pages'
    /// mappings and the mm's hugetlb_usage. The owner's private pages get their reservation
    /// back when freed (HPageRestoreReserve) and the pages are no longer counted consumed.
    pub(super) fn unmap_hugepage_range(&mut self, mm: MmId, vma: &Vma, start: u64, end: u64) {
        let (pmd_size, pud_size) = (self.geo.hpage_pmd_size(), self.geo.level_size(2));
        let f = self.hugetlb_file(vma);
        self.flush_tlb_range(mm, start, end);
        let mut a = self.geo.hpage_pmd_align_down(start);
        while a < end {
            let Some((pud, pmd_table)) = self.pt_table_at(mm, a, 1) else {
                a = align_down(a, pud_size) + pud_size;
                continue;
            };
            let Some(pmd_table) = pmd_table else {
                a = align_down(a, pud_size) + pud_size;
                continue;
            };
            if self.pt_is_shared(pmd_table) {
                // huge_pmd_unshare: this mm leaves the whole window's table.
                self.pt_detach(mm, pud, pmd_table, 1, align_down(a, pud_size));
                a = align_down(a, pud_size) + pud_size;
                continue;
            }
            let idx = self.geo.table_index(a, 1);
            let e = self.entry(pmd_table, idx);
            if e.present() {
                self.set_entry(pmd_table, idx, Entry::NONE);
                let page = e.pfn();
                self.mm_mut(mm).hugetlb_usage -= self.hpage_nr() as i64;
                let o = self.hfile(f);
                if !o.shared && o.owner == Some(mm) && self.hugetlb.surplus_huge_pages == 0 {
                    self.mem.pages[page.idx()].set(pg::RESTORE_RESERVE);
                    let i = self.vma_hugecache_offset(vma, a) as usize;
                    if i < self.hfile(f).resv.len() {
                        self.hfile_mut(f).resv[i] = false;
                    }
                }
                self.mem.pages[page.idx()].entire_mapcount -= 1;
                self.track_mm(page, mm, -1);
                self.folio_put(page);
            }
            a += pmd_size;
        }
    }

    /// `huge_pmd_share` (Linux's PMD sharing, `vm/ptshare` off): where the vma may share the
    /// PMD table of `addr`'s 1 GiB window (`want_pmd_share`: VM_MAYSHARE and the window inside
    /// the vma) and this mm has none yet, take a sibling's: another mapping of the file whose
    /// vma holds the same file offset at the same offset in its window, with the same flags
    /// (VM_LOCKED aside) and the window inside it (`page_table_shareable`), with a PMD table
    /// there. Each sharer counts the table in its VmPTE (mm_inc_nr_pmds), the machine once.
    /// False when a table allocation failed.
    fn huge_pmd_share(&mut self, mm: MmId, vma: &Vma, addr: u64) -> bool {
        let pud_size = self.geo.level_size(2);
        let base = align_down(addr, pud_size);
        if vma.flags & vm::MAYSHARE == 0 || vma.start > base || vma.end < base + pud_size {
            return true;
        }
        // This mm's PUD slot for the window.
        let pgd = self.mm(mm).pgd;
        let Some(pud_table) = self.table_alloc(mm, pgd, self.geo.table_index(addr, 3)) else { return false };
        let pud_idx = self.geo.table_index(addr, 2);
        if !self.entry(pud_table, pud_idx).none() {
            return true;
        }
        let f = self.hugetlb_file(vma);
        let idx = vma.linear_page_index(addr, self.geo);
        let mms: Vec<MmId> = self.hfile(f).mms.iter().map(|e| e.0).collect();
        let flags = vma.flags & !vm::LOCKED_MASK;
        for m in mms {
            let svmas: Vec<Vma> = self.mm(m).vmas.values().filter(|v| v.backing == vma.backing).cloned().collect();
            for sv in svmas {
                if m == mm && sv.start == vma.start {
                    continue;
                }
                let pages = sv.len() >> self.geo.page_shift;
                if idx < sv.pgoff || idx >= sv.pgoff + pages {
                    continue;
                }
                let saddr = sv.start + ((idx - sv.pgoff) << self.geo.page_shift);
                let sbase = align_down(saddr, pud_size);
                if self.geo.table_index(addr, 1) != self.geo.table_index(saddr, 1)
                    || sv.flags & !vm::LOCKED_MASK != flags
                    || sv.start > sbase
                    || sv.end < sbase + pud_size
                    || sv.flags & vm::MAYSHARE == 0
                {
                    continue;
                }
                if let Some((_, Some(t))) = self.pt_table_at(m, saddr, 1) {
                    self.pt_attach(mm, Slot { table: pud_table, idx: pud_idx }, t, 1, m);
                    return true;
                }
            }
        }
        true
    }

    /// `copy_hugetlb_page_range` (fork, for a private mapping with pages): each huge pmd is
    /// write-protected in both and its page shared (mapcount and reference), counted in the
    /// child's hugetlb_usage.
    pub(super) fn copy_hugetlb_page_range(&mut self, dst: MmId, src: MmId, vma: &Vma) -> Result<(), Errno> {
        let pmd_size = self.geo.hpage_pmd_size();
        let cow = super::memory::is_cow_mapping(vma.flags);
        let mut a = vma.start;
        while a < vma.end {
            let Some(spmd) = self.pmd_slot(src, a) else {
                a += pmd_size;
                continue;
            };
            let e = self.entry(spmd.table, spmd.idx);
            if !e.present() {
                a += pmd_size;
                continue;
            }
            let dpmd = self.pmd_alloc(dst, a).ok_or(Errno::ENOMEM)?;
            let page = e.pfn();
            let mut ne = e;
            if cow && e.write() {
                ne = e.without(pgtable::RW);
                self.set_entry(spmd.table, spmd.idx, ne);
            }
            self.mem.pages[page.idx()].clear(pg::ANON_EXCLUSIVE);
            self.folio_get(page);
            self.mem.pages[page.idx()].entire_mapcount += 1;
            self.track_mm(page, dst, 1);
            self.set_entry(dpmd.table, dpmd.idx, ne.without(pgtable::ACCESSED));
            self.mm_mut(dst).hugetlb_usage += self.hpage_nr() as i64;
            a += pmd_size;
        }
        Ok(())
    }

    /// Whether a huge pmd maps a hugetlb page (not a THP or the huge zero folio).
    #[inline]
    pub fn is_hugetlb_pmd(&self, e: Entry) -> bool {
        e.huge() && self.mem.pages[e.pfn().idx()].test(pg::HUGETLB)
    }

    /// Frames the pool holds (free and in use): they are neither free nor a process's rss.
    pub fn hugetlb_pool_pages(&self) -> u64 {
        self.hugetlb.nr_huge_pages * self.hpage_nr()
    }
}
