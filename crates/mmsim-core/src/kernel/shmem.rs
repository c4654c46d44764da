//! Shared anonymous memory and tmpfs (mm/shmem.c): MAP_SHARED|MAP_ANONYMOUS maps a shmem
//! object whose page cache holds the pages; every process that inherits the mapping sees the
//! same pages. A tmpfs file is the same object with a name (kernel/filemap.rs). The object is
//! the `address_space` of every file mmsim has (`AddressSpace`): shmem's, tmpfs's and ext4's.
//! Reclaim swaps shmem out and faults, reads and writes swap it back in
//! (kernel/shmem_swap.rs). Differs from Linux: shmem allocates order-0 folios (shmem_enabled
//! and huge= are `never`: only MADV_COLLAPSE makes a PMD folio).

use crate::fasthash::FastMap;

use super::content::PageContent;
use super::mm_types::{i_mmap_insert, i_mmap_remove, pg, NIL};
use super::page_alloc::{gfp, ClearPath};
use super::vmstat::VmItem;
use super::{Kernel, MmId};

/// Kernel-variable lines of the objects' `mapping->tree_lock` (outside RAM).
const PAGECACHE_LOCK_LINE: u64 = 7 << 60;
use crate::units::Pfn;

/// The filesystem an inode lives on, which decides its page cache's behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fs {
    /// The kernel's internal shm_mnt (MAP_SHARED|MAP_ANONYMOUS): unnamed.
    Shmem,
    /// A tmpfs file: shmem with a name, read(2)/write(2) and private mappings.
    Tmpfs,
    /// An ext4 file (Linux >= 6.16 large folios, orders 0..9) on the block device.
    Ext4,
}

/// An inode and its page cache (`struct address_space`): index -> frame of that page (the
/// subpage of a large folio), the vmas that map it, its size, and for a file on a device the
/// data the device holds.
#[derive(Clone, Debug)]
pub struct AddressSpace {
    /// `mapping->i_pages`: index -> frame.
    pub pages: IPages,
    /// References: vmas of an unnamed shmem object; open files (`struct file`, each vma of a
    /// file mapping holds its file) and the directory entry of a named file.
    pub refs: u32,
    /// The mms whose vmas map the object, with how many vmas each, in the order they first
    /// mapped it (the file's i_mmap at mm granularity: seed 003 finds a sibling's page table
    /// through it).
    pub mms: Vec<(MmId, u32)>,
    pub fs: Fs,
    /// `i_size` in bytes.
    pub i_size: u64,
    /// The device's copy of each page written back that is not all zeroes (ext4; a page
    /// absent here reads as zeroes from the device).
    pub disk: FastMap<u64, PageContent>,
    /// `i_writecount`: open files that may write it (> 0), or executions denying writers (< 0).
    pub i_writecount: i32,
    /// Workingset shadows reclaim left at evicted indices (`i_pages`' value entries).
    pub shadows: FastMap<u64, u64>,
    /// shmem: the swap entry (`SwpEntry`'s value) of each page reclaim wrote to swap
    /// (`i_pages`' swap value entries; `info->swapped` is their number).
    pub swapped: FastMap<u64, u32>,
    /// The shape of `i_pages` (its entries' orders and its nodes: kernel/xarray.rs).
    pub xa: super::xarray::XArray,
}

impl AddressSpace {
    /// An inode of `fs` with `i_size` bytes and nothing cached.
    pub fn new(fs: Fs, i_size: u64, page_size: u64) -> AddressSpace {
        AddressSpace {
            pages: IPages::new(i_size.div_ceil(page_size)),
            refs: 1,
            mms: Vec::new(),
            fs,
            i_size,
            disk: FastMap::default(),
            i_writecount: 0,
            shadows: FastMap::default(),
            swapped: FastMap::default(),
            xa: super::xarray::XArray::new(fs == Fs::Ext4),
        }
    }

    /// `shmem_mapping`: pages are swap-backed (PG_swapbacked, NR_SHMEM, MM_SHMEMPAGES).
    pub fn is_shmem(&self) -> bool {
        self.fs != Fs::Ext4
    }
}

/// `mapping->i_pages`, the page cache's xarray: the frame of each cached page by index. Linux's
/// xarray is sparse; this is a dense array (4 bytes per page of the file) with a bitmap of the
/// cached slots and a bitmap of its non-zero words, so that a walk of what is cached (the
/// invariant checks, after every fault in fuzz mode) costs what is cached, not the file's size:
/// a sparsely touched 512 GiB shmem object is 2^27 slots but 2^15 summary words.
#[derive(Clone, Debug, Default)]
pub struct IPages {
    slots: Vec<u32>,
    /// Bit i: slot i holds a page.
    cached: Vec<u64>,
    /// Bit w: word w of `cached` is not zero.
    summary: Vec<u64>,
}

impl IPages {
    /// An index of `n` empty slots.
    pub fn new(n: u64) -> IPages {
        let mut x = IPages::default();
        x.extend_to(n);
        x
    }

    /// The number of slots (the file's size in pages, or more: a folio may reach past EOF).
    pub fn len(&self) -> u64 {
        self.slots.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Room for indices below `n` (never shrinks).
    pub fn extend_to(&mut self, n: u64) {
        let n = n as usize;
        if n > self.slots.len() {
            self.slots.resize(n, NIL);
            self.cached.resize(n.div_ceil(64), 0);
            self.summary.resize(n.div_ceil(64 * 64), 0);
        }
    }

    /// `xa_load`: the frame at `index`, or NIL (also beyond the end).
    #[inline]
    pub fn load(&self, index: u64) -> u32 {
        self.slots.get(index as usize).copied().unwrap_or(NIL)
    }

    /// `xa_store`: put `pfn` (NIL: erase) at `index`, below `len`.
    pub fn store(&mut self, index: u64, pfn: u32) {
        let i = index as usize;
        self.slots[i] = pfn;
        let (w, bit) = (i / 64, 1u64 << (i % 64));
        if pfn == NIL {
            self.cached[w] &= !bit;
        } else {
            self.cached[w] |= bit;
        }
        let sbit = 1u64 << (w % 64);
        if self.cached[w] == 0 {
            self.summary[w / 64] &= !sbit;
        } else {
            self.summary[w / 64] |= sbit;
        }
    }

    /// Every cached page, (index, frame) in index order.
    pub fn cached(&self) -> Cached<'_> {
        Cached { x: self, sw: 0, sbits: self.summary.first().copied().unwrap_or(0), w: 0, bits: 0 }
    }
}

/// The iterator of [`IPages::cached`].
pub struct Cached<'a> {
    x: &'a IPages,
    /// Summary word being visited and its bits not yet visited.
    sw: usize,
    sbits: u64,
    /// Word of `cached` being visited and its bits not yet visited.
    w: usize,
    bits: u64,
}

impl Iterator for Cached<'_> {
    type Item = (u64, u32);

    #[inline]
    fn next(&mut self) -> Option<(u64, u32)> {
        while self.bits == 0 {
            while self.sbits == 0 {
                self.sw += 1;
                self.sbits = *self.x.summary.get(self.sw)?;
            }
            self.w = self.sw * 64 + self.sbits.trailing_zeros() as usize;
            self.sbits &= self.sbits - 1;
            self.bits = self.x.cached[self.w];
        }
        let i = self.w * 64 + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Some((i as u64, self.x.slots[i]))
    }
}

impl Kernel {
    /// Insert an inode into the object table (reusing a free slot); returns its id.
    pub fn inode_insert(&mut self, obj: AddressSpace) -> u32 {
        if let Some(i) = self.shmem.iter().position(|s| s.is_none()) {
            self.shmem[i] = Some(obj);
            return i as u32;
        }
        self.shmem.push(Some(obj));
        (self.shmem.len() - 1) as u32
    }

    /// `shmem_zero_setup` / `shmem_kernel_file_setup`: a new object of `nr_pages` pages, mapped
    /// by one vma of `mm`.
    pub fn shmem_new(&mut self, nr_pages: u64, mm: MmId) -> u32 {
        let mut obj = AddressSpace::new(Fs::Shmem, nr_pages * self.geo.page_size(), self.geo.page_size());
        obj.mms.push((mm, 1));
        self.inode_insert(obj)
    }

    /// The object's size in pages (i_size rounded up).
    pub fn shmem_size(&self, obj: u32) -> u64 {
        self.shmem[obj as usize].as_ref().map_or(0, |o| o.pages.len())
    }

    /// `find_lock_page`'s `read_lock_irq(&mapping->tree_lock)` and `read_unlock_irq` (Linux
    /// 2.6.15 .. 2.6.26, `kernel/pagecache_lock=tree_lock`): two atomics on the object's lock
    /// line, which every process faulting on the object shares. Nothing with RCU lookups.
    pub fn pagecache_lookup_lock(&mut self, obj: u32) {
        if self.knobs.pagecache_tree_lock {
            let line = PAGECACHE_LOCK_LINE | obj as u64;
            for func in ["_read_lock_irq", "_read_unlock_irq"] {
                self.work.push(super::Work::Atomic { line, func, kind: super::AtomicKind::Rmw });
            }
        }
    }

    /// `filemap_get_folio`: the cached page at `index` (the subpage of its folio), if any.
    pub fn shmem_find_folio(&self, obj: u32, index: u64) -> Option<Pfn> {
        let o = self.shmem[obj as usize].as_ref()?;
        match o.pages.load(index) {
            NIL => None,
            p => Some(Pfn(p)),
        }
    }

    /// `shmem_get_folio_gfp(SGP_CACHE)`: the page at `index`, swapped in if it is in swap, or
    /// allocated and cleared on first use (shmem_alloc_and_add_folio; NR_SHMEM). None on
    /// allocation failure.
    pub fn shmem_get_folio(&mut self, obj: u32, index: u64) -> Option<Pfn> {
        self.shmem_get_folio_gfp(obj, index, None).map(|(p, _)| p)
    }

    /// `shmem_fault`'s `shmem_get_folio_gfp`: as `shmem_get_folio` for a fault of `mm`; a
    /// swap-in that reads from the device is a major fault (VM_FAULT_MAJOR in the bits).
    pub fn shmem_fault_folio(&mut self, obj: u32, index: u64, mm: MmId) -> Option<(Pfn, u32)> {
        self.shmem_get_folio_gfp(obj, index, Some(mm))
    }

    fn shmem_get_folio_gfp(&mut self, obj: u32, index: u64, fault_mm: Option<MmId>) -> Option<(Pfn, u32)> {
        if self.shmem_swap_entry(obj, index).is_some() {
            return self.shmem_swapin_folio(obj, index, fault_mm);
        }
        if let Some(p) = self.shmem_find_folio(obj, index) {
            if self.mem.pages[p.idx()].test(pg::FALLOC) {
                // A fallocated folio's first use clears it and marks it uptodate.
                self.mem.pages[p.idx()].clear(pg::FALLOC);
                self.clear_pages(p, 1, 1, ClearPath::User);
            }
            return Some((p, 0));
        }
        // shmem_alloc_folio takes the mapping's gfp (no __GFP_ZERO) and shmem_get_folio_gfp
        // clears the new folio itself (so twice under init_on_alloc, as Linux does).
        let a = self.alloc_pages(0, gfp::HIGHUSER_MOVABLE)?;
        self.clear_pages(a.pfn, 1, 1, ClearPath::User);
        if !self.filemap_add_folio(obj, index, a.pfn, 0, gfp::HIGHUSER_MOVABLE) {
            self.folio_put(a.pfn);
            return None;
        }
        Some((a.pfn, 0))
    }

    /// `shmem_get_folio_gfp(SGP_WRITE)` (`shmem_write_begin`): as `shmem_get_folio`, and a
    /// folio found in the cache (or in swap) is marked accessed, a new one referenced.
    pub fn shmem_get_folio_write(&mut self, obj: u32, index: u64) -> Option<Pfn> {
        let found = self.shmem_find_folio(obj, index).is_some() || self.shmem_swap_entry(obj, index).is_some();
        let page = self.shmem_get_folio(obj, index)?;
        let head = self.head_of(page);
        if found {
            self.folio_mark_accessed(head);
        } else {
            self.mem.pages[head.idx()].set(pg::REFERENCED);
        }
        Some(page)
    }

    /// `filemap_add_folio`: the folio of `1 << order` pages at `head` (just allocated, one
    /// reference) is charged to the current memcg (false, and nothing added, when that
    /// fails) and enters the page cache at `index`: the cache holds a reference per page
    /// (NR_FILE_PAGES, NR_SHMEM; NR_FILE_THPS / NR_SHMEM_THPS for a PMD-sized one). A shadow
    /// found there is a refault (`workingset_refault`, unless the folio is for a write:
    /// `__GFP_WRITE`, `gfp::WRITE`); then the folio joins the LRU (`folio_add_lru`).
    pub fn filemap_add_folio(&mut self, obj: u32, index: u64, head: Pfn, order: u32, gfp_flags: u32) -> bool {
        let memcg = self.cur_memcg();
        if self.mem_cgroup_charge(head, memcg, gfp_flags).is_err() {
            return false;
        }
        self.__filemap_add_folio(obj, index, head, order, gfp_flags);
        let shadow = self.inode_mut_shadow_take(obj, index, 1 << order);
        if self.inode(obj).is_shmem() {
            self.mem.pages[head.idx()].set(pg::SHMEM);
        }
        if let Some(s) = shadow {
            if gfp_flags & gfp::WRITE == 0 {
                self.workingset_refault(head, s);
            }
        }
        self.folio_add_lru(head);
        true
    }

    /// The shadows at [index, index + nr) go; the first one found.
    fn inode_mut_shadow_take(&mut self, obj: u32, index: u64, nr: u64) -> Option<u64> {
        let o = self.shmem[obj as usize].as_mut().expect("object");
        if o.shadows.is_empty() {
            return None;
        }
        let mut first = None;
        for i in index..index + nr {
            if let Some(s) = o.shadows.remove(&i) {
                first.get_or_insert(s);
            }
        }
        first
    }

    /// The current memcg: the current task's mm's (kernel threads: the root).
    pub fn cur_memcg(&self) -> u16 {
        match self.cur_mm {
            Some(m) if self.mms.get(m as usize).is_some_and(|x| x.is_some()) => self.mm(m).memcg,
            _ => super::memcontrol::ROOT_MEMCG,
        }
    }

    /// `__filemap_add_folio` proper: the page-cache slots (the xarray's nodes allocated with
    /// `gfp_flags`) and the statistics.
    pub fn __filemap_add_folio(&mut self, obj: u32, index: u64, head: Pfn, order: u32, gfp_flags: u32) {
        crate::tracepoints::raise(&mut self.tp, crate::tracepoints::ev::FILEMAP_ADD, || {
            format!("ino={obj} pfn={:#x} ofs={} order={order}", head.0, index << 12)
        });
        let nr = 1u64 << order;
        self.xa_store(obj, index, order, false, gfp_flags & !gfp::WRITE);
        let o = self.shmem[obj as usize].as_mut().expect("object");
        let shmem = o.is_shmem();
        for i in 0..nr {
            o.pages.store(index + i, head.0 + i as u32);
        }
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            if shmem {
                p.set(pg::SHMEM);
            }
            p.mapping = obj;
            p.index = index + i as u64;
        }
        self.mem.pages[head.idx()].refcount += nr as i32 - 1;
        self.mod_lruvec_item(head, VmItem::NrFilePages, nr as i64);
        if shmem {
            self.mod_lruvec_item(head, VmItem::NrShmem, nr as i64);
        }
        if order >= self.geo.hpage_pmd_order() {
            self.mod_lruvec_item(head, if shmem { VmItem::NrShmemThps } else { VmItem::NrFileThps }, 1);
        }
    }

    /// `__filemap_remove_folio` with a workingset shadow left at its indices (reclaim's
    /// eviction), then the cache's references dropped.
    pub fn filemap_remove_folio_shadow(&mut self, obj: u32, head: Pfn, shadow: Option<u64>) {
        let (index, nr) = (self.mem.pages[head.idx()].index, self.folio_nr_pages(head));
        self.page_cache_delete(obj, head, shadow.is_some());
        if let Some(s) = shadow {
            let o = self.shmem[obj as usize].as_mut().expect("object");
            for i in index..index + nr {
                o.shadows.insert(i, s);
            }
        }
    }

    /// `filemap_remove_folio` (+ `folio_put` of the cache's references): the folio headed at
    /// `head` leaves the page cache of `obj`; it is freed unless something else holds it.
    pub fn filemap_remove_folio(&mut self, obj: u32, head: Pfn) {
        self.page_cache_delete(obj, head, false);
    }

    /// `page_cache_delete` (and the rest of `filemap_remove_folio`): the folio's entry is
    /// erased, or with `value` replaced by a value entry of its order (a shadow, a swap
    /// entry), which the caller records.
    pub(super) fn page_cache_delete(&mut self, obj: u32, head: Pfn, value: bool) {
        self.folio_free_buffers(head);
        let nr = self.folio_nr_pages(head);
        let h = self.mem.pages[head.idx()];
        let index = h.index;
        if value {
            self.xa_store(obj, index, nr.trailing_zeros(), true, gfp::KERNEL);
        } else {
            self.xa_erase(obj, index);
        }
        let o = self.shmem[obj as usize].as_mut().expect("object");
        let shmem = o.is_shmem();
        for i in 0..nr {
            o.pages.store(index + i, NIL);
        }
        if h.test(pg::DIRTY) && !shmem {
            self.mod_lruvec_item(head, VmItem::NrDirty, -(nr as i64));
        }
        self.mod_lruvec_item(head, VmItem::NrFilePages, -(nr as i64));
        if shmem {
            self.mod_lruvec_item(head, VmItem::NrShmem, -(nr as i64));
        }
        if nr >= self.geo.hpage_pmd_nr() {
            self.mod_lruvec_item(head, if shmem { VmItem::NrShmemThps } else { VmItem::NrFileThps }, -1);
        }
        // A folio reclaim isolated keeps its flags for the putback (it is freed at once).
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            p.clear(pg::DIRTY | pg::READAHEAD | pg::FALLOC);
            p.mapping = NIL;
        }
        self.mem.pages[head.idx()].refcount -= nr as i32 - 1;
        self.folio_put(head);
    }

    /// `truncate_inode_pages` (with `shmem_undo_range`'s `shmem_free_swap`): every folio
    /// leaves the page cache and every swap entry its slot (the inode is evicted).
    pub fn truncate_inode_pages(&mut self, obj: u32) {
        let n = self.shmem_size(obj);
        self.shmem_free_swap_range(obj, 0, u64::MAX);
        let mut i = 0;
        while i < n {
            match self.shmem_find_folio(obj, i) {
                Some(p) => {
                    let head = self.head_of(p);
                    i = self.mem.pages[head.idx()].index + self.folio_nr_pages(head);
                    self.filemap_remove_folio(obj, head);
                }
                None => i += 1,
            }
        }
    }

    /// `get_file` (+ `vma_interval_tree_insert`): one more vma of `mm` maps the object.
    pub fn shmem_get(&mut self, obj: u32, mm: MmId) {
        let o = self.shmem[obj as usize].as_mut().expect("object");
        o.refs += 1;
        i_mmap_insert(&mut o.mms, mm);
    }

    /// `fput` (+ `vma_interval_tree_remove`): a vma of `mm` no longer maps the object.
    pub fn shmem_put(&mut self, obj: u32, mm: MmId) {
        let o = self.shmem[obj as usize].as_mut().expect("object");
        i_mmap_remove(&mut o.mms, mm);
        self.iput(obj);
    }

    /// `iput`: drop a reference to the inode; the last one's `evict` truncates the page cache
    /// (`shmem_evict_inode`, `ext4_evict_inode`) and frees it.
    pub fn iput(&mut self, obj: u32) {
        let o = self.shmem[obj as usize].as_mut().expect("object");
        o.refs -= 1;
        if o.refs > 0 {
            return;
        }
        self.truncate_inode_pages(obj);
        self.xa_destroy(obj);
        self.shmem[obj as usize] = None;
    }
}

#[cfg(test)]
mod tests {
    use super::{IPages, NIL};

    /// `cached` lists exactly the stored slots in index order, across words and summary words,
    /// and forgets erased ones; a sparse 2^27-slot index costs its pages, not its size.
    #[test]
    fn i_pages_lists_what_is_cached_in_index_order() {
        let mut x = IPages::new(1 << 27);
        let idx = [0u64, 1, 63, 64, 4095, 4096, 262_143, 262_144, (1 << 27) - 1];
        for (k, &i) in idx.iter().enumerate() {
            x.store(i, k as u32);
        }
        let got: Vec<(u64, u32)> = x.cached().collect();
        assert_eq!(got, idx.iter().enumerate().map(|(k, &i)| (i, k as u32)).collect::<Vec<_>>());
        x.store(64, NIL);
        x.store(4096, NIL);
        x.store(4096, 7);
        x.store(4096, 8);
        let got: Vec<u64> = x.cached().map(|(i, _)| i).collect();
        assert_eq!(got, [0, 1, 63, 4095, 4096, 262_143, 262_144, (1 << 27) - 1]);
        assert_eq!((x.load(4096), x.load(64), x.load(1 << 27)), (8, NIL, NIL));
        for i in got {
            x.store(i, NIL);
        }
        assert_eq!(x.cached().count(), 0);
        x.extend_to((1 << 27) + 5);
        x.store((1 << 27) + 4, 3);
        assert_eq!(x.cached().collect::<Vec<_>>(), [((1 << 27) + 4, 3)]);
    }
}
