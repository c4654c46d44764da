//! `struct page` and the per-frame data (include/linux/mm_types.h, page-flags.h). A frame's
//! metadata is kept small; its contents (user data or page-table entries) live beside it.

use super::content::PageContent;

/// Page flags (a subset of enum pageflags, plus mmsim's PG_zeroed from seed 002).
pub mod pg {
    /// Head of a free buddy block (PageBuddy).
    pub const BUDDY: u32 = 1 << 0;
    /// A free block known to be all zeroes (seed 002's ZEROED free list).
    pub const ZEROED: u32 = 1 << 1;
    /// Head of a compound page (PG_head).
    pub const HEAD: u32 = 1 << 2;
    /// Tail of a compound page.
    pub const TAIL: u32 = 1 << 3;
    /// Anonymous (folio_test_anon).
    pub const ANON: u32 = 1 << 4;
    /// Page cache page of a shmem object (PG_swapbacked, mapping = shmem inode).
    pub const SHMEM: u32 = 1 << 5;
    /// A page-table page (PG_table / PageTable).
    pub const TABLE: u32 = 1 << 6;
    /// Reserved: never freed (the 4 KiB zero page, kernel memory).
    pub const RESERVED: u32 = 1 << 7;
    /// PageAnonExclusive: the page is mapped by exactly one process and may be reused on COW.
    pub const ANON_EXCLUSIVE: u32 = 1 << 8;
    /// The huge zero folio (is_huge_zero_folio).
    pub const HUGE_ZERO: u32 = 1 << 9;
    /// On the deferred split queue (folio_test_partially_mapped).
    pub const DEFERRED: u32 = 1 << 10;
    /// PG_mlocked (head page): mlocked by a VM_LOCKED vma.
    pub const MLOCKED: u32 = 1 << 11;
    /// A hugetlb folio (folio_test_hugetlb, head page): the pool's, never the buddy's while
    /// the pool holds it.
    pub const HUGETLB: u32 = 1 << 12;
    /// HPageRestoreReserve (head page): freeing the folio gives its mapping's reservation back.
    pub const RESTORE_RESERVE: u32 = 1 << 13;
    /// PG_dirty (head page): a page-cache folio written since it was last written back; an
    /// anonymous folio whose dirty pte or pmd was folded into it (a pmd split, GUP's
    /// FOLL_TOUCH, reclaim finding a lazyfree folio written again).
    pub const DIRTY: u32 = 1 << 14;
    /// PG_readahead (head page): reaching this folio starts the next readahead window.
    pub const READAHEAD: u32 = 1 << 15;
    /// PG_writeback (head page): the folio's data is on its way to the device.
    pub const WRITEBACK: u32 = 1 << 16;
    /// Seed 004's text copy (every page): a PMD page read from a file for one mapping, not in
    /// the page cache; accounted as 2018's kernels accounted a swap-backed file THP (shmem).
    pub const TEXT_COPY: u32 = 1 << 17;
    /// A lazyfree anonymous folio (head page; Linux: PG_swapbacked cleared by MADV_FREE's
    /// `lru_lazyfree`): reclaim discards it while it is clean (`Kernel::lazyfree`).
    pub const LAZYFREE: u32 = 1 << 18;
    /// !PG_uptodate of a shmem folio fallocate(2) added (SGP_FALLOC): not cleared yet, so
    /// fault-around does not map it; the first fault or write clears it and marks it uptodate.
    pub const FALLOC: u32 = 1 << 19;
    /// PG_lru (head page): on one of its lruvec's lists (the unevictable one included); a
    /// folio isolated by reclaim, or waiting in a per-CPU batch, is not.
    pub const LRU: u32 = 1 << 20;
    /// PG_active (head page): on (or bound for) an active list.
    pub const ACTIVE: u32 = 1 << 21;
    /// PG_referenced (head page): the software second chance (`folio_mark_accessed`,
    /// `folio_check_references`).
    pub const REFERENCED: u32 = 1 << 22;
    /// PG_workingset (head page): deactivated after being active, or restored at refault.
    pub const WORKINGSET: u32 = 1 << 23;
    /// PG_unevictable (head page): on the unevictable list (mlocked).
    pub const UNEVICTABLE: u32 = 1 << 24;
    /// PG_swapcache (head page): in the swap cache; `Page::private` holds its first swap
    /// entry (folio->swap).
    pub const SWAPCACHE: u32 = 1 << 25;
    /// PG_reclaim (head page): free it as soon as its writeback ends (`folio_end_writeback`
    /// rotates it to the inactive list's tail).
    pub const RECLAIM: u32 = 1 << 26;
    /// PG_locked (head page) held across a read from swap: the folio is in the swap cache
    /// but its data is not there until the read completes (`Kernel::swapin_done`).
    pub const LOCKED: u32 = 1 << 27;
    /// PG_readahead of a swap-cache folio read ahead of its fault (`swap_ra_hit` when a fault
    /// finds it). mmsim keeps it apart from the page cache's `READAHEAD` mark and from
    /// `RECLAIM`, whose bit it is in Linux (`swap_update_readahead` takes both).
    pub const SWAP_READAHEAD: u32 = 1 << 28;
    /// PG_private of an ext4 folio: buffer heads are attached (`create_empty_buffers`), one
    /// per 4 KiB block, charged to the folio's memcg.
    pub const PRIVATE: u32 = 1 << 29;
}

/// No frame / end of a list.
pub const NIL: u32 = u32::MAX;

/// `struct page`, trimmed to what the model needs.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    pub flags: u32,
    /// `_refcount` (on the head page for compound pages).
    pub refcount: i32,
    /// PTE mappings of this page (`_mapcount + 1`).
    pub mapcount: i32,
    /// PMD mappings of the folio (`_entire_mapcount + 1`, head page only).
    pub entire_mapcount: i32,
    /// Compound order (head) or free block order (buddy head).
    pub order: u8,
    /// The memory cgroup the folio is charged to (`folio_memcg`, head page): an index of
    /// `Kernel::memcg` (0 is the root cgroup).
    pub memcg: u16,
    /// Head page frame of a compound page (tail pages), else self.
    pub head: u32,
    /// `mapping`/`index`: the owning inode (`Kernel::shmem`) and the page's index in it
    /// (page-cache pages of any file).
    pub mapping: u32,
    /// `folio->index`: the page-cache index, or an anonymous folio's linear page index
    /// (`linear_page_index` of the address it was first mapped at: the anon rmap's key).
    pub index: u64,
    /// List links: the buddy free lists (a free block's head), or its lruvec's list (a folio's
    /// head with PG_lru), as Linux's `lru` list_head serves both.
    pub next: u32,
    pub prev: u32,
    /// `folio->swap` (head page of a PG_swapcache folio): its first swap entry
    /// (`SwpEntry::val`).
    pub private: u32,
}

impl Default for Page {
    fn default() -> Self {
        Page {
            flags: 0,
            refcount: 0,
            mapcount: 0,
            entire_mapcount: 0,
            order: 0,
            memcg: 0,
            head: NIL,
            mapping: NIL,
            index: 0,
            next: NIL,
            prev: NIL,
            private: 0,
        }
    }
}

impl Page {
    #[inline]
    pub fn test(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    #[inline]
    pub fn set(&mut self, f: u32) {
        self.flags |= f;
    }
    #[inline]
    pub fn clear(&mut self, f: u32) {
        self.flags &= !f;
    }
}

/// What a frame holds: nothing written (reads as zero), user data, or page-table entries.
#[derive(Clone, Debug, Default)]
pub enum FrameData {
    #[default]
    Zero,
    Data(PageContent),
    /// A page table with entries: its slot in `PhysMem::table_pool` (one pool for every
    /// table, so that a frame's slot stays 16 bytes at any page size).
    Table(u32),
    /// A page table whose entries are all none (kept without its 4 KiB until written: a
    /// deposited table costs the simulator nothing until it is withdrawn).
    EmptyTable,
    /// A page table whose present entries all map consecutive pages of one shmem object with
    /// the same flags but for accessed, dirty and writable: its slot in
    /// `PhysMem::obj_tables` (a compact form, exact: the entries are the object's pages; any
    /// other entry written turns it into a `Table`). 280 bytes instead of 4 KiB, so that 5 GB
    /// of simulated page tables for a shared region do not take 5 GB of the host's memory.
    ObjTable(u32),
}

// `struct page` here is 48 bytes: the frames' metadata is most of a large run's host memory.
const _: () = assert!(std::mem::size_of::<Page>() == 48);

// A frame's slot stays 16 bytes: `PageContent`'s own tag leaves room for the others.
const _: () = assert!(std::mem::size_of::<FrameData>() == 16);

/// The compact form of a page table mapping an object's pages (`FrameData::ObjTable`): entry
/// `i` maps page `base + i` of shmem object `obj` when its `present` bit is set, with `flags`
/// and its accessed, dirty and writable bits. For tables of 512 entries (4 KiB pages).
#[derive(Clone, Debug, Default)]
pub struct ObjTable {
    pub obj: u32,
    pub base: u64,
    pub flags: u64,
    pub present: [u64; 8],
    pub accessed: [u64; 8],
    pub dirty: [u64; 8],
    pub write: [u64; 8],
}

impl ObjTable {
    /// Entries an `ObjTable` holds.
    pub const ENTRIES: usize = 512;
    /// Bits of an entry that vary within one: the frame, accessed, dirty, writable.
    pub const VARYING: u64 =
        super::pgtable::PFN_MASK | super::pgtable::ACCESSED | super::pgtable::DIRTY | super::pgtable::RW;
}

/// Host bytes of a page table's entries in the pool.
pub const fn table_host_bytes(entries: usize) -> u64 {
    entries as u64 * 8
}

impl FrameData {
    /// Host heap bytes of the frame's contents (mmsim's own, for `engine.max_host_memory`).
    pub fn heap_bytes(&self) -> u64 {
        match self {
            // A table's entries are counted by the pool (`PhysMem::table_bytes`).
            FrameData::Zero | FrameData::EmptyTable | FrameData::Table(_) | FrameData::ObjTable(_) => 0,
            FrameData::Data(c) => c.heap_bytes(),
        }
    }

    pub fn content(&self) -> Option<&PageContent> {
        match self {
            FrameData::Data(c) => Some(c),
            _ => None,
        }
    }
}

/// An object's mms (the `i_mmap` tree reduced to what mmsim walks: each mm that maps the
/// object, with how many of its vmas do): one more vma of `mm`.
pub fn i_mmap_insert(mms: &mut Vec<(super::MmId, u32)>, mm: super::MmId) {
    match mms.iter_mut().find(|e| e.0 == mm) {
        Some(e) => e.1 += 1,
        None => mms.push((mm, 1)),
    }
}

/// One vma of `mm` less in an object's mms; the mm leaves with its last.
pub fn i_mmap_remove(mms: &mut Vec<(super::MmId, u32)>, mm: super::MmId) {
    if let Some(i) = mms.iter().position(|e| e.0 == mm) {
        mms[i].1 -= 1;
        if mms[i].1 == 0 {
            mms.remove(i);
        }
    }
}
