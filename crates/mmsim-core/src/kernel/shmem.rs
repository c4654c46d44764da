//! Shared anonymous memory and tmpfs (mm/shmem.c): MAP_SHARED|MAP_ANONYMOUS maps a shmem
//! object whose page cache holds the pages; every process that inherits the mapping sees the
//! same pages. A tmpfs file is the same object with a name (kernel/filemap.rs). The object is
//! the `address_space` of every file mmsim has (`AddressSpace`): shmem's, tmpfs's and ext4's.
//! Differs from Linux: no swap; shmem allocates order-0 folios (shmem_enabled and huge= are
//! `never`: only MADV_COLLAPSE makes a PMD folio).

use std::collections::HashMap;

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
    pub pages: Vec<u32>,
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
    pub disk: HashMap<u64, PageContent>,
    /// `i_writecount`: open files that may write it (> 0), or executions denying writers (< 0).
    pub i_writecount: i32,
}

impl AddressSpace {
    /// An inode of `fs` with `i_size` bytes and nothing cached.
    pub fn new(fs: Fs, i_size: u64, page_size: u64) -> AddressSpace {
        AddressSpace {
            pages: vec![NIL; i_size.div_ceil(page_size) as usize],
            refs: 1,
            mms: Vec::new(),
            fs,
            i_size,
            disk: HashMap::new(),
            i_writecount: 0,
        }
    }

    /// `shmem_mapping`: pages are swap-backed (PG_swapbacked, NR_SHMEM, MM_SHMEMPAGES).
    pub fn is_shmem(&self) -> bool {
        self.fs != Fs::Ext4
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
        self.shmem[obj as usize].as_ref().map_or(0, |o| o.pages.len() as u64)
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
        match o.pages.get(index as usize) {
            Some(&p) if p != NIL => Some(Pfn(p)),
            _ => None,
        }
    }

    /// `shmem_get_folio_gfp(SGP_CACHE)`: the page at `index`, allocated and cleared on first
    /// use (shmem_alloc_and_add_folio; NR_SHMEM). None on allocation failure.
    pub fn shmem_get_folio(&mut self, obj: u32, index: u64) -> Option<Pfn> {
        if let Some(p) = self.shmem_find_folio(obj, index) {
            return Some(p);
        }
        // shmem_alloc_folio takes the mapping's gfp (no __GFP_ZERO) and shmem_get_folio_gfp
        // clears the new folio itself (so twice under init_on_alloc, as Linux does).
        let a = self.alloc_pages(0, gfp::USER | gfp::DIRECT_RECLAIM)?;
        self.clear_pages(a.pfn, 1, 1, ClearPath::User);
        self.filemap_add_folio(obj, index, a.pfn, 0);
        Some(a.pfn)
    }

    /// `__filemap_add_folio`: the folio of `1 << order` pages at `head` (just allocated, one
    /// reference) enters the page cache at `index`: the cache holds a reference per page
    /// (NR_FILE_PAGES, NR_SHMEM; NR_FILE_THPS / NR_SHMEM_THPS for a PMD-sized one).
    pub fn filemap_add_folio(&mut self, obj: u32, index: u64, head: Pfn, order: u32) {
        let nr = 1u64 << order;
        let o = self.shmem[obj as usize].as_mut().expect("object");
        let shmem = o.is_shmem();
        for i in 0..nr {
            o.pages[(index + i) as usize] = head.0 + i as u32;
        }
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            if shmem {
                p.set(pg::SHMEM);
            }
            p.mapping = obj;
            p.index = index as u32 + i;
        }
        self.mem.pages[head.idx()].refcount += nr as i32 - 1;
        self.stat.mod_item(VmItem::NrFilePages, nr as i64);
        if shmem {
            self.stat.mod_item(VmItem::NrShmem, nr as i64);
        }
        if order >= self.geo.hpage_pmd_order() {
            self.stat.mod_item(if shmem { VmItem::NrShmemThps } else { VmItem::NrFileThps }, 1);
        }
    }

    /// `filemap_remove_folio` (+ `folio_put` of the cache's references): the folio headed at
    /// `head` leaves the page cache of `obj`; it is freed unless something else holds it.
    pub fn filemap_remove_folio(&mut self, obj: u32, head: Pfn) {
        let nr = self.folio_nr_pages(head);
        let h = self.mem.pages[head.idx()];
        let index = h.index as u64;
        let o = self.shmem[obj as usize].as_mut().expect("object");
        let shmem = o.is_shmem();
        for i in 0..nr {
            o.pages[(index + i) as usize] = NIL;
        }
        if h.test(pg::DIRTY) {
            self.stat.mod_item(VmItem::NrDirty, -(nr as i64));
        }
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            p.clear(pg::SHMEM | pg::DIRTY | pg::READAHEAD);
            p.mapping = NIL;
        }
        self.stat.mod_item(VmItem::NrFilePages, -(nr as i64));
        if shmem {
            self.stat.mod_item(VmItem::NrShmem, -(nr as i64));
        }
        if nr >= self.geo.hpage_pmd_nr() {
            self.stat.mod_item(if shmem { VmItem::NrShmemThps } else { VmItem::NrFileThps }, -1);
        }
        self.mem.pages[head.idx()].refcount -= nr as i32 - 1;
        self.folio_put(head);
    }

    /// `truncate_inode_pages`: every folio leaves the page cache (the inode is evicted).
    pub fn truncate_inode_pages(&mut self, obj: u32) {
        let n = self.shmem_size(obj);
        let mut i = 0;
        while i < n {
            match self.shmem_find_folio(obj, i) {
                Some(p) => {
                    let head = self.head_of(p);
                    i = self.mem.pages[head.idx()].index as u64 + self.folio_nr_pages(head);
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
        self.shmem[obj as usize] = None;
    }
}
