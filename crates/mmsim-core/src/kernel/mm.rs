//! `struct mm_struct` and `struct vm_area_struct` (include/linux/mm_types.h): the address
//! space, its VMA tree (a BTreeMap keyed by vm_start stands in for the maple tree), rss
//! counters and mm flags.

use std::collections::BTreeMap;

use crate::units::Pfn;

/// vm_flags bits (include/linux/mm.h).
pub mod vm {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const EXEC: u32 = 1 << 2;
    pub const SHARED: u32 = 1 << 3;
    pub const MAYREAD: u32 = 1 << 4;
    pub const MAYWRITE: u32 = 1 << 5;
    pub const MAYEXEC: u32 = 1 << 6;
    pub const MAYSHARE: u32 = 1 << 7;
    pub const GROWSDOWN: u32 = 1 << 8;
    pub const HUGEPAGE: u32 = 1 << 9;
    pub const NOHUGEPAGE: u32 = 1 << 10;
    pub const ACCOUNT: u32 = 1 << 11;
    /// VM_DONTEXPAND: part of VM_SPECIAL, so the vma never merges with a neighbour. Linux sets
    /// it on special mappings (the vdso); mmsim's `dontexpand` mmap flag sets it, for stand-ins
    /// of mappings it does not model (validate's copy of the runner's file mappings).
    pub const DONTEXPAND: u32 = 1 << 12;
    /// VM_LOCKED: mlock()ed; new pages are mlocked, the range was populated.
    pub const LOCKED: u32 = 1 << 13;
    /// VM_HUGETLB: a hugetlbfs mapping (MAP_HUGETLB).
    pub const HUGETLB: u32 = 1 << 14;
    /// VM_SEQ_READ (MADV_SEQUENTIAL): fault readahead reads `ra_pages` ahead.
    pub const SEQ_READ: u32 = 1 << 15;
    /// VM_RAND_READ (MADV_RANDOM): no fault readahead.
    pub const RAND_READ: u32 = 1 << 16;
    /// VM_LOCKONFAULT (mlock2's MLOCK_ONFAULT, mlockall's MCL_ONFAULT): with VM_LOCKED, the
    /// range is not populated; pages are mlocked as they are faulted in.
    pub const LOCKONFAULT: u32 = 1 << 17;
    /// VM_LOCKED_MASK: the bits mlock, munlock and mlockall set and clear.
    pub const LOCKED_MASK: u32 = LOCKED | LOCKONFAULT;
    /// mmsim's own `nomerge` mmap flag: the vma never merges with a neighbour, and is
    /// otherwise an ordinary vma (mlock locks it). Validate's stand-ins of the runner's file
    /// mappings, which Linux never merges with anonymous memory.
    pub const NOMERGE: u32 = 1 << 18;
    /// VM_DONTCOPY (MADV_DONTFORK): fork leaves the vma out of the child.
    pub const DONTCOPY: u32 = 1 << 19;
    /// The access bits that mprotect changes.
    pub const ACCESS: u32 = READ | WRITE | EXEC;
}

/// mm flags (MMF_*).
pub mod mmf {
    /// The mm has taken its reference on the huge zero folio (MMF_HUGE_ZERO_FOLIO).
    pub const HUGE_ZERO_FOLIO: u32 = 1 << 0;
}

/// Index of an rss counter (enum mm counters of mm_types_task.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmCounter {
    FilePages = 0,
    AnonPages = 1,
    ShmemPages = 2,
}

/// What backs a vma.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Private anonymous memory (vma_is_anonymous).
    Anon,
    /// A shmem object (MAP_SHARED|MAP_ANONYMOUS maps /dev/zero's shmem file).
    Shmem(u32),
    /// An unlinked hugetlbfs file (MAP_HUGETLB), shared or private.
    Hugetlb(u32),
    /// A named file (ext4 or tmpfs), shared or private: the open file (`struct file`,
    /// `Kernel::filps`) the vma holds, whose inode is the page cache it maps.
    File(u32),
}

/// `struct vm_area_struct`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub flags: u32,
    /// vm_pgoff: offset into the backing object in pages (anon: vm_start >> self.geo.page_shift).
    pub pgoff: u64,
    pub backing: Backing,
    /// The vma's anon_vma, once an anonymous page or the huge zero page was mapped in it.
    pub anon_vma: Option<u32>,
    /// `vma_is_fork_child`: the anon_vma came through fork, so the anon_vma_chain also links
    /// the parent's (more than one entry). Such a vma does not merge with one that has no
    /// anon_vma (Linux >= 6.16 `is_mergeable_anon_vma`).
    pub fork_child: bool,
    /// The memcg its vm_area_struct is charged to (`NO_MEMCG`: none; `VMA_UNALLOCATED`: a
    /// new vma not yet allocated, which a merge may make unnecessary).
    pub objcg: u16,
}

/// `Vma::objcg` of a vma mmap or mremap is placing, allocated (`vm_area_alloc`) only if it
/// merges with no neighbour (`vma_merge_new_range` expands the neighbour instead).
pub const VMA_UNALLOCATED: u16 = u16::MAX - 1;

impl Vma {
    /// A vma mmap, brk or exec is placing: no anon_vma yet, its vm_area_struct allocated
    /// once it is known not to merge (`VMA_UNALLOCATED`).
    pub fn new_unallocated(start: u64, end: u64, flags: u32, pgoff: u64, backing: Backing) -> Vma {
        Vma { start, end, flags, pgoff, backing, anon_vma: None, fork_child: false, objcg: VMA_UNALLOCATED }
    }

    pub fn is_anonymous(&self) -> bool {
        self.backing == Backing::Anon
    }
    pub fn is_shared(&self) -> bool {
        self.flags & vm::SHARED != 0
    }
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
    /// `vma_has_recency`: young ptes count as accesses unless the vma has MADV_SEQUENTIAL or
    /// MADV_RANDOM advice.
    pub fn has_recency(&self) -> bool {
        self.flags & (vm::SEQ_READ | vm::RAND_READ) == 0
    }
    /// Page offset of `addr` in the backing object (linear_page_index).
    pub fn linear_page_index(&self, addr: u64, geo: crate::units::Geometry) -> u64 {
        ((addr - self.start) >> geo.page_shift) + self.pgoff
    }
}

/// `struct mm_struct`.
#[derive(Clone, Debug)]
pub struct MmStruct {
    pub pgd: Pfn,
    pub vmas: BTreeMap<u64, Vma>,
    /// rss_stat, in pages: [file, anon, shmem].
    pub rss: [i64; 3],
    /// `pgtables_bytes`: PTE, PMD and PUD tables (VmPTE), deposited tables included.
    pub pgtables_bytes: i64,
    /// locked_vm: pages of VM_LOCKED vmas (VmLck).
    pub locked_vm: i64,
    /// The pages of locked_vm no VM_LOCKED vma holds: MREMAP_DONTUNMAP of a locked range
    /// clears VM_LOCKED on the old vma and leaves its pages counted (until exit).
    pub locked_vm_stray: i64,
    /// `def_flags`: vm flags every new vma gets (mlockall's MCL_FUTURE: VM_LOCKED, with
    /// MCL_ONFAULT also VM_LOCKONFAULT).
    pub def_flags: u32,
    pub flags: u32,
    /// `mmap_base`: where top-down allocation starts.
    pub mmap_base: u64,
    /// `hiwater_rss`: peak rss in pages (VmHWM).
    pub hiwater_rss: i64,
    /// `mm_users`.
    pub users: u32,
    /// `hugetlb_usage`, in base pages (HugetlbPages).
    pub hugetlb_usage: i64,
    /// `start_brk` and `brk`: where the heap begins and its current break (`brk(2)`).
    pub start_brk: u64,
    pub brk: u64,
    /// The memory cgroup of the mm's owner (charges of its pages and page tables go there).
    pub memcg: u16,
    /// MM_SWAPENTS: swap ptes (VmSwap).
    pub swapents: i64,
    /// Some vma that may hold anonymous pages has a vm_pgoff other than its start's page
    /// number (moved by mremap, or a private file mapping with COW copies): the anon rmap
    /// walk looks at every such vma of the mm, not only the identity address's
    /// (kernel/rmap.rs). Never cleared.
    pub nonlinear_anon: bool,
}

impl MmStruct {
    pub fn new(pgd: Pfn, mmap_base: u64) -> MmStruct {
        MmStruct {
            pgd,
            vmas: BTreeMap::new(),
            rss: [0; 3],
            pgtables_bytes: 0,
            locked_vm: 0,
            locked_vm_stray: 0,
            def_flags: 0,
            flags: 0,
            mmap_base,
            hiwater_rss: 0,
            users: 1,
            hugetlb_usage: 0,
            start_brk: 0,
            brk: 0,
            memcg: 0,
            swapents: 0,
            nonlinear_anon: false,
        }
    }

    /// `find_vma`: the first vma with vm_end > addr.
    pub fn find_vma(&self, addr: u64) -> Option<&Vma> {
        if let Some((_, v)) = self.vmas.range(..=addr).next_back() {
            if v.end > addr {
                return Some(v);
            }
        }
        self.vmas.range(addr..).next().map(|(_, v)| v)
    }

    /// `vma_lookup`: the vma containing addr.
    pub fn vma_lookup(&self, addr: u64) -> Option<&Vma> {
        self.vmas.range(..=addr).next_back().map(|(_, v)| v).filter(|v| v.end > addr)
    }

    /// Vmas intersecting [start, end), by start address.
    pub fn vmas_in(&self, start: u64, end: u64) -> Vec<u64> {
        let mut v: Vec<u64> = Vec::new();
        if let Some((&s, vma)) = self.vmas.range(..start).next_back() {
            if vma.end > start {
                v.push(s);
            }
        }
        v.extend(self.vmas.range(start..end).map(|(&s, _)| s));
        v
    }

    pub fn rss_total(&self) -> i64 {
        self.rss.iter().sum()
    }

    /// `add_mm_counter`, keeping the high-water mark.
    pub fn add_rss(&mut self, c: MmCounter, n: i64) {
        self.rss[c as usize] += n;
        let t = self.rss_total();
        if t > self.hiwater_rss {
            self.hiwater_rss = t;
        }
    }

    /// A drawing of the address space (`AAA  BB`), one character per `unit` bytes over
    /// [lo, hi), for test failure messages (as tools/testing/vma does).
    pub fn draw(&self, lo: u64, hi: u64, unit: u64) -> String {
        let mut s = String::new();
        let mut a = lo;
        while a < hi {
            let c = match self.vma_lookup(a) {
                None => ' ',
                Some(v) => {
                    let i = self.vmas.range(..=v.start).count() - 1;
                    (b'A' + (i % 26) as u8) as char
                }
            };
            s.push(c);
            a += unit;
        }
        s
    }
}
