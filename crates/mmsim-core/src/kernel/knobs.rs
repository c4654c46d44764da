//! Kernel tunables under their Linux names (sysfs/procfs/debugfs paths relative to their
//! usual roots), one struct with Linux's defaults and validation, as mm/huge_memory.c's
//! `transparent_hugepage_flags` and the fault-injection attributes are.

use serde::Serialize;

/// `/sys/kernel/mm/transparent_hugepage/enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

/// `/sys/kernel/mm/transparent_hugepage/defrag`: whether a THP allocation may enter direct
/// reclaim (mirrors `vma_thp_gfp_mask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ThpDefrag {
    Always,
    Defer,
    DeferMadvise,
    Madvise,
    Never,
}

/// `transparent_hugepage/huge_zero_page_alloc` (mmsim's name for the allocation policies of
/// seed 000's series and today's kernel): when the huge zero page exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HzpAlloc {
    /// Allocated at boot, never freed (seed 000, patch 01).
    Boot,
    /// Allocated on first use, never freed (patch 09).
    Lazy,
    /// Allocated on first use, refcounted, freed by a shrinker when unused (patch 10; Linux
    /// without CONFIG_PERSISTENT_HUGE_ZERO_FOLIO).
    Shrinkable,
    /// CONFIG_PERSISTENT_HUGE_ZERO_FOLIO (Linux >= 6.18): allocated at boot, no refcounting.
    Persistent,
}

/// `transparent_hugepage/huge_zero_page`: which implementation serves THP read faults when
/// use_zero_page is 1 (mmsim's knob).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HzpKind {
    /// A real 2 MiB page of zeros mapped by a huge pmd.
    Hzp,
    /// The virtual huge zero page: a PTE table whose 512 entries map the 4 KiB zero page.
    Vhzp,
}

/// `transparent_hugepage/huge_zero_page_wp`: what a write to the huge zero page does when no
/// THP can be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HzpWp {
    /// Linux >= 6.13: try a THP; on failure split the pmd and take the 4 KiB COW path.
    Today,
    /// Seed 000: try a THP; on failure build a PTE table with one new page and 511 zero ptes.
    Seed,
}

/// `transparent_hugepage/file_text` (mmsim's name): how read-only executable private file
/// mappings get PMD pages (seed 004 and what Linux did instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileText {
    /// Linux 6.18 without CONFIG_READ_ONLY_THP_FOR_FS: 4 KiB pages, plus the large folios
    /// readahead builds (PMD order for a VM_HUGEPAGE mapping).
    Off,
    /// Seed 004's 2018 prototype: the first fault in a PMD-aligned range allocates a PMD page
    /// outside the page cache, reads the range into it and maps it by the pmd.
    Seed,
    /// CONFIG_READ_ONLY_THP_FOR_FS: khugepaged (and MADV_COLLAPSE) collapse the page cache of
    /// files nobody has open for write into PMD folios, which later faults map by the pmd.
    Khugepaged,
}

/// `transparent_hugepage/hzp_refcount`: how the huge zero page's refcount is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HzpRefcount {
    /// Every map and unmap takes and drops the global atomic (before seed 001).
    Global,
    /// Once per mm (MMF_HUGE_ZERO_FOLIO), dropped when the mm goes (seed 001).
    PerMm,
}

/// `page_alloc/pcp_batch`: pcp->batch of the order-0 per-CPU page lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcpBatch {
    /// zone_batchsize() of Linux >= 4.19: a quarter of managed/1024 pages capped at 1 MiB,
    /// rounded down to a power of two minus one (63 on any zone over 1 GiB).
    Auto,
    /// zone_batchsize() before Linux 4.19 (commit d8a759b5 doubled the cap from 512 KiB): 31.
    Legacy,
    /// A batch of this many pages.
    Pages(u32),
}

/// `vm/scrub_engine` (mmsim's name): what zeroes the blocks kscrubd takes (seed 002).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScrubEngine {
    /// The CPU kscrubd runs on, with temporal stores through its caches (the seed's fallback
    /// `clear_page(addr, order)`, which "will likely thrash the cpu caches").
    Cpu,
    /// The CPU with non-temporal stores: no cache fills, limited by memory bandwidth.
    CpuNt,
    /// A DMA engine like the SGI Altix BTE (the seed's patch 4/4): no CPU time and no cache
    /// pollution; its bandwidth and smallest block come from the profile
    /// (`memory.offload_bandwidth`, `memory.offload_min`). Blocks it refuses, and every block on
    /// a machine without one, are zeroed by the CPU as with `cpu`, as the seed's kscrubd does
    /// when no zero driver accepts a block.
    Offload,
}

/// `kernel/fault_locking` (mmsim's name): the locks an anonymous fault takes, by kernel era.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultLocking {
    /// Linux >= 6.4: the vma's read lock (`lock_vma_under_rcu`) and the split PTE-table lock.
    PerVma,
    /// Linux 2.6.15 .. 6.3: mmap_lock's read side (one line per mm) and split PTE-table locks.
    MmapLock,
    /// Linux before 2.6.15 (seed 002's 2.6.10): mmap_sem's read side and the mm-wide
    /// `mm->page_table_lock`.
    PageTableLock,
}

/// `vm/ptshare_compat` (mmsim's name): which posting of seed 003's shared page tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PtshareCompat {
    /// The rules the thread settled on (the default).
    Fixed,
    /// The first posting's behaviour: a munmap of part of a shared range does not unshare (its
    /// tables stay attached and a new mapping there reuses them), madvise, mlock and
    /// split_vma do not unshare, and the first PTE table of an aligned region is never shared.
    Rfc,
}

/// Bits of `vm/ptshare` (the seed's CONFIG_PTSHARE_PTE/PMD/PUD): which table levels may be
/// shared. Bit `l` stands for the tables whose entries are at level `l` (0: PTE tables, 1: PMD
/// tables, 2: PUD tables).
pub mod ptshare {
    pub const PTE: u8 = 1 << 0;
    pub const PMD: u8 = 1 << 1;
    pub const PUD: u8 = 1 << 2;
}

/// Every tunable the model honours. Defaults are Linux 6.18's with a distribution config
/// (Debian/Fedora build THP as `madvise`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    pub thp_enabled: ThpEnabled,
    pub thp_defrag: ThpDefrag,
    pub thp_use_zero_page: bool,
    /// `fail_page_alloc/min_order`: allocations of at least this order fail (None = off).
    pub fail_min_order: Option<u32>,
    /// `fail_page_alloc/every`: every Kth allocation fails (0 = off).
    pub fail_every: u64,
    /// debugfs `fault_around_bytes` (mm/memory.c), a power of two between self.geo.page_size() and 64 KiB.
    pub fault_around_bytes: u64,
    pub hzp_alloc: HzpAlloc,
    pub hzp_kind: HzpKind,
    pub hzp_wp: HzpWp,
    pub hzp_refcount: HzpRefcount,
    pub file_text: FileText,
    /// `transparent_hugepage/khugepaged/*`.
    pub khugepaged: super::knobs_khugepaged::KhugepagedKnobs,
    pub pcp_batch: PcpBatch,
    /// `/proc/sys/kernel/pid_max` (kernel/pid.c `pid_max`): fork and clone fail with EAGAIN
    /// once pids 1..pid_max-1 are all in use.
    pub pid_max: u32,
    /// CONFIG_PT_RECLAIM (Linux >= 6.14, default y on x86-64): MADV_DONTNEED frees the PTE
    /// tables it empties over their whole 2 MiB.
    pub pt_reclaim: bool,
    /// `init_on_alloc` boot parameter (CONFIG_INIT_ON_ALLOC_DEFAULT_ON): every allocation is
    /// cleared in post_alloc_hook.
    pub init_on_alloc: bool,
    /// `init_on_free` boot parameter: every freed block is cleared; allocations then skip it.
    pub init_on_free: bool,
    /// `vm/scrub_start` (seed 002): None = kscrubd disabled (the seed's default); else a free
    /// that coalesces a block of this order or higher wakes it.
    pub scrub_start: Option<u32>,
    /// `vm/scrub_stop`: kscrubd zeroes until no free block of this order or higher is dirty.
    pub scrub_stop: u32,
    /// `vm/scrub_load`: kscrubd is not woken while the 1-minute load average is at or above it.
    pub scrub_load: u32,
    /// `vm/scrub_engine` (mmsim's).
    pub scrub_engine: ScrubEngine,
    /// `vm/scrub_merge=separate` (mmsim's): zeroed and dirty free buddies never coalesce.
    pub scrub_merge_separate: bool,
    /// `kernel/fault_locking` (mmsim's).
    pub fault_locking: FaultLocking,
    /// `vm/ptshare` (seed 003, mmsim's name): the levels of page tables processes may share
    /// (`ptshare::PTE | PMD | PUD`); 0 is Linux (off).
    pub ptshare: u8,
    /// `vm/ptshare_compat` (mmsim's name).
    pub ptshare_compat: PtshareCompat,
    /// `/proc/sys/vm/nr_hugepages`: persistent 2 MiB hugetlb pages in the pool.
    pub nr_hugepages: u64,
    /// `/proc/sys/vm/nr_overcommit_hugepages`: surplus hugetlb pages the pool may allocate
    /// from the buddy allocator beyond nr_hugepages.
    pub nr_overcommit_hugepages: u64,
    /// CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING (Linux >= 2.6.20, y on x86-64): shared hugetlb
    /// mappings share PMD tables (`huge_pmd_share`) while `vm/ptshare` is off.
    pub hugetlb_pmd_share: bool,
    /// `kernel/pagecache_lock` (mmsim's): page-cache lookups take `mapping->tree_lock`'s read
    /// side (Linux 2.6.15 .. 2.6.26), not RCU (the lockless page cache of 2.6.27 on).
    pub pagecache_tree_lock: bool,
    /// debugfs `sched/base_slice_ns` (kernel/sched/fair.c `sysctl_sched_base_slice`): how long
    /// a task runs before the scheduler may switch to another runnable task of its CPU. None
    /// is Linux's default, 0.7 ms x (1 + ilog2(min(CPUs, 8))) (SCHED_TUNABLESCALING_LOG).
    pub sched_base_slice_ns: Option<u64>,
    /// CONFIG_HZ: the scheduler tick. A slice ends at the first tick after it is used up
    /// (update_deadline runs from the tick; no HRTICK).
    pub hz: u32,
    /// The block device's `queue/read_ahead_kb` (its bdi's ra_pages in KiB).
    pub read_ahead_kb: u64,
    /// The block device's `queue/max_sectors_kb`: the largest request (bdi io_pages), which
    /// a large read may read ahead up to.
    pub max_sectors_kb: u64,
    /// `vm/drop_caches`: the last value written (1: page cache, 2: slab, 3: both).
    pub drop_caches: u8,
}

/// `normalized_sysctl_sched_base_slice` (kernel/sched/fair.c, Linux >= 6.15): 0.7 ms.
pub const SCHED_BASE_SLICE_NS: u64 = 700_000;

impl Knobs {
    /// The slice `sched/base_slice_ns` gives on a machine of `cpus` CPUs: the knob's value, or
    /// Linux's default scaled as `get_update_sysctl_factor` scales it (1 + ilog2 of at most 8
    /// CPUs): 1.4 ms on 2 CPUs, 2.8 ms on 8.
    pub fn sched_slice_ns(&self, cpus: usize) -> u64 {
        self.sched_base_slice_ns.unwrap_or_else(|| {
            let factor = 1 + cpus.clamp(1, 8).ilog2() as u64;
            SCHED_BASE_SLICE_NS * factor
        })
    }
}

/// `PID_MAX_DEFAULT` (include/linux/threads.h): 0x8000. Linux's pid_idr_init raises it to
/// 1024 per possible CPU on machines of more than 32 CPUs; mmsim keeps 32768 on every machine.
pub const PID_MAX_DEFAULT: u32 = 0x8000;
/// `pid_max_min` (kernel/pid.c): RESERVED_PIDS + 1.
pub const PID_MAX_MIN: u32 = 301;
/// `pid_max_max` (kernel/pid.c): PID_MAX_LIMIT on 64-bit, 4 * 1024 * 1024.
pub const PID_MAX_LIMIT: u32 = 4 * 1024 * 1024;

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            thp_enabled: ThpEnabled::Madvise,
            thp_defrag: ThpDefrag::Madvise,
            thp_use_zero_page: true,
            fail_min_order: None,
            fail_every: 0,
            fault_around_bytes: 65536,
            hzp_alloc: HzpAlloc::Shrinkable,
            hzp_kind: HzpKind::Hzp,
            hzp_wp: HzpWp::Today,
            hzp_refcount: HzpRefcount::PerMm,
            file_text: FileText::Off,
            khugepaged: Default::default(),
            pcp_batch: PcpBatch::Auto,
            pid_max: PID_MAX_DEFAULT,
            pt_reclaim: true,
            init_on_alloc: false,
            init_on_free: false,
            scrub_start: None,
            scrub_stop: 2,
            scrub_load: 999,
            scrub_engine: ScrubEngine::Cpu,
            scrub_merge_separate: false,
            fault_locking: FaultLocking::PerVma,
            ptshare: 0,
            ptshare_compat: PtshareCompat::Fixed,
            nr_hugepages: 0,
            nr_overcommit_hugepages: 0,
            hugetlb_pmd_share: true,
            pagecache_tree_lock: false,
            sched_base_slice_ns: None,
            hz: 250,
            read_ahead_kb: 128,
            max_sectors_kb: 1280,
            drop_caches: 0,
        }
    }
}

/// A knob's public description: name, default value (as sysfs would print it) and meaning.
#[derive(Clone, Debug, Serialize)]
pub struct KnobInfo {
    pub name: &'static str,
    pub default: String,
    pub values: &'static str,
    pub help: &'static str,
}

const THP_ENABLED: &str = "transparent_hugepage/enabled";
const THP_DEFRAG: &str = "transparent_hugepage/defrag";
const THP_USE_ZERO_PAGE: &str = "transparent_hugepage/use_zero_page";
const FAIL_MIN_ORDER: &str = "fail_page_alloc/min_order";
const FAIL_EVERY: &str = "fail_page_alloc/every";
const FAULT_AROUND: &str = "fault_around_bytes";
const HZP_ALLOC: &str = "transparent_hugepage/huge_zero_page_alloc";
const HZP_KIND: &str = "transparent_hugepage/huge_zero_page";
const HZP_WP: &str = "transparent_hugepage/huge_zero_page_wp";
const HZP_REFCOUNT: &str = "transparent_hugepage/hzp_refcount";
const FILE_TEXT: &str = "transparent_hugepage/file_text";
const PCP_BATCH: &str = "page_alloc/pcp_batch";
const PID_MAX: &str = "kernel/pid_max";
const PT_RECLAIM: &str = "kernel/pt_reclaim";
const INIT_ON_ALLOC: &str = "init_on_alloc";
const INIT_ON_FREE: &str = "init_on_free";
const SCRUB_START: &str = "vm/scrub_start";
const SCRUB_STOP: &str = "vm/scrub_stop";
const SCRUB_LOAD: &str = "vm/scrub_load";
const SCRUB_ENGINE: &str = "vm/scrub_engine";
const SCRUB_MERGE: &str = "vm/scrub_merge";
const FAULT_LOCKING: &str = "kernel/fault_locking";
const PTSHARE: &str = "vm/ptshare";
const PTSHARE_COMPAT: &str = "vm/ptshare_compat";
const NR_HUGEPAGES: &str = "vm/nr_hugepages";
const NR_OVERCOMMIT_HUGEPAGES: &str = "vm/nr_overcommit_hugepages";
const HUGETLB_PMD_SHARE: &str = "kernel/hugetlb_pmd_share";
const PAGECACHE_LOCK: &str = "kernel/pagecache_lock";
const SCHED_BASE_SLICE: &str = "sched/base_slice_ns";
const HZ: &str = "kernel/hz";
const READ_AHEAD_KB: &str = "block/read_ahead_kb";
const MAX_SECTORS_KB: &str = "block/max_sectors_kb";
const DROP_CACHES: &str = "vm/drop_caches";

/// Knobs that stand for a kernel build, patch or boot parameter: they can be set before the
/// run only.
pub const BOOT_ONLY: &[&str] = &[
    HZP_ALLOC,
    HZP_REFCOUNT,
    FILE_TEXT,
    PCP_BATCH,
    PT_RECLAIM,
    INIT_ON_ALLOC,
    INIT_ON_FREE,
    SCRUB_MERGE,
    FAULT_LOCKING,
    HUGETLB_PMD_SHARE,
    PAGECACHE_LOCK,
    HZ,
];

/// (name, accepted values, meaning) of every knob, in the order `mmsim knobs` lists them.
const KNOB_TABLE: &[(&str, &str, &str)] = &[
    (
        THP_ENABLED,
        "always|madvise|never",
        "THP for anonymous memory: every suitable vma, only MADV_HUGEPAGE vmas, or none",
    ),
    (
        THP_DEFRAG,
        "always|defer|defer+madvise|madvise|never",
        "whether a THP fault allocation may reclaim (run shrinkers) before falling back",
    ),
    (THP_USE_ZERO_PAGE, "0|1", "map the huge zero page on a read fault of a THP-suitable range"),
    (FAIL_MIN_ORDER, "off|0..10", "fault injection: every page allocation of at least this order fails"),
    (FAIL_EVERY, "0|K", "fault injection: every Kth page allocation fails (0 = off)"),
    (
        FAULT_AROUND,
        "4096..65536 (power of two)",
        "read faults on file/shmem mappings also map up to this many bytes of pages already cached",
    ),
    (
        HZP_KIND,
        "hzp|vhzp",
        "mmsim: what a THP read fault maps when use_zero_page is 1: the huge zero page (a 2 MiB page \
         of zeros under a huge pmd) or the virtual one (a PTE table of 512 entries to the 4 KiB zero page)",
    ),
    (
        HZP_ALLOC,
        "boot|lazy|shrinkable|persistent",
        "mmsim, before the run only: when the huge zero page exists: from boot, from first use, from first \
         use and freed by a shrinker when unused (Linux 6.18 default), or always (CONFIG_PERSISTENT_HUGE_ZERO_FOLIO)",
    ),
    (
        HZP_REFCOUNT,
        "global|per_mm",
        "mmsim, before the run only: every huge zero pmd takes the global refcount (before seed 001), or each mm \
         takes it once and drops it at exit (MMF_HUGE_ZERO_FOLIO, Linux >= 4.9)",
    ),
    (
        FILE_TEXT,
        "off|seed|khugepaged",
        "mmsim, before the run only: PMD pages for read-only executable private file mappings: none beyond the page cache's \
         large folios (Linux 6.18), seed 004's prototype (a private PMD page per mapping, read from the \
         file on the first fault in an aligned 2 MiB range; counted in ShmemPmdMapped), or \
         CONFIG_READ_ONLY_THP_FOR_FS (khugepaged and MADV_COLLAPSE collapse the page cache of a file nobody \
         has open for write into PMD folios that later faults map)",
    ),
    (
        HZP_WP,
        "today|seed",
        "mmsim: a write to the huge zero page that cannot get a THP splits the pmd and copies 4 KiB (Linux >= \
         6.13), or builds seed 000's PTE table of one new page and 511 zero-page entries",
    ),
    (
        PCP_BATCH,
        "auto|legacy|1..4096",
        "mmsim, before the run only: pages the per-CPU lists move to and from the buddy allocator under \
         zone->lock at a time: zone_batchsize() of Linux >= 4.19 (63 on large zones), of older kernels (31), \
         or a number; pcp->high is 6 x batch",
    ),
    (
        PID_MAX,
        "301..4194304",
        "fork and clone fail with EAGAIN once this many pids less one are in use (pids 1..pid_max-1; every \
         task not yet reaped counts, zombies included: an exited child until its parent's wait or exit)",
    ),
    (
        PT_RECLAIM,
        "0|1",
        "mmsim, before the run only: CONFIG_PT_RECLAIM (Linux >= 6.14): MADV_DONTNEED frees a PTE table it \
         leaves empty over the table's whole 2 MiB (1), or keeps it until munmap or exit (0, older kernels)",
    ),
    (
        INIT_ON_ALLOC,
        "0|1",
        "boot parameter, before the run only: every page allocation is cleared (post_alloc_hook); the \
         anonymous fault then does not clear again (user_alloc_needs_zeroing)",
    ),
    (
        INIT_ON_FREE,
        "0|1",
        "boot parameter, before the run only: every freed page is cleared (free_pages_prepare) and a later \
         __GFP_ZERO allocation skips its clear; the anonymous fault still clears unless init_on_alloc is 1",
    ),
    (
        SCRUB_START,
        "off|0..10",
        "seed 002: kscrubd, off by default; a free that coalesces a block of this order or higher wakes it, \
         and the anonymous fault asks for __GFP_ZERO memory that prezeroed blocks serve without a clear",
    ),
    (SCRUB_STOP, "0..10", "seed 002: kscrubd zeroes until every free block of this order or higher is zeroed"),
    (
        SCRUB_LOAD,
        "0..999",
        "seed 002: kscrubd is not woken while the 1-minute load average is at or above this (999: never held off)",
    ),
    (
        SCRUB_ENGINE,
        "cpu|cpu_nt|offload",
        "mmsim: what zeroes kscrubd's blocks: its CPU with temporal stores (through the caches), with \
         non-temporal stores (no cache fills, memory-bandwidth bound), or a DMA engine like the Altix BTE \
         (no CPU time, no cache pollution; memory.offload_bandwidth from the profile)",
    ),
    (
        SCRUB_MERGE,
        "dirty|separate",
        "mmsim, before the run only: a zeroed free block and its not-zeroed buddy coalesce into a block that is \
         not zeroed (dirty), or never coalesce (separate: the seed's V3 code, one buddy bitmap per list)",
    ),
    (
        FAULT_LOCKING,
        "per_vma|mmap_lock|page_table_lock",
        "mmsim, before the run only: the locks a page fault takes, so that threads of one process faulting at \
         once contend as the kernel of that era made them: the vma's read lock and split PTE-table locks \
         (Linux >= 6.4), mmap_lock's read side and split PTE-table locks (2.6.15 .. 6.3), or mmap_sem's read \
         side and the mm-wide page_table_lock (before 2.6.15: seed 002's 2.6.10)",
    ),
    (
        PTSHARE,
        "off|a comma list of pte,pmd,pud",
        "seed 003 (mmsim's run-time form of CONFIG_PTSHARE_PTE/PMD/PUD): processes that map the same object at \
         the same address, read-only or shared-writable and without anonymous pages, share the page tables \
         of these levels whose whole range the mapping covers, found through the object's mappings at fault \
         time and taken over at fork; unshared (and refaulted) on munmap, mprotect, mremap, mlock, madvise \
         and vma splits. off is Linux (hugetlb then shares PMD tables as Linux does)",
    ),
    (
        PTSHARE_COMPAT,
        "fixed|rfc",
        "mmsim: the rules the thread settled on (fixed), or the first posting's bugs: a munmap of part of a \
         shared range leaves its tables attached, madvise, mlock and vma splits do not unshare, and the first \
         PTE table of an aligned region is never shared (rfc)",
    ),
    (
        NR_HUGEPAGES,
        "0..",
        "persistent 2 MiB hugetlb pages in the pool (/proc/sys/vm/nr_hugepages): MAP_HUGETLB mappings reserve \
         from it at mmap and fault from it; writing it grows the pool from free memory or shrinks it by its \
         free pages",
    ),
    (
        NR_OVERCOMMIT_HUGEPAGES,
        "0..",
        "surplus hugetlb pages the pool may take from the buddy allocator beyond nr_hugepages when a \
         reservation or fault needs one (/proc/sys/vm/nr_overcommit_hugepages); freed when no longer used",
    ),
    (
        HUGETLB_PMD_SHARE,
        "0|1",
        "mmsim, before the run only: CONFIG_HUGETLB_PMD_PAGE_TABLE_SHARING (Linux >= 2.6.20): a shared hugetlb \
         mapping holding a whole 1 GiB window shares a sibling's PMD table there (1), or never (0: older \
         kernels); with vm/ptshare set the seed's rules decide instead",
    ),
    (
        PAGECACHE_LOCK,
        "rcu|tree_lock",
        "mmsim, before the run only: how a page-cache lookup in a file or shmem fault is serialised: RCU, no \
         shared line written (the lockless page cache, Linux >= 2.6.27), or the read side of the mapping's \
         tree_lock, two atomics on one line that every process faulting on the object shares (2.6.15 .. 2.6.26)",
    ),
    (
        SCHED_BASE_SLICE,
        "auto|1..4294967295",
        "how long (ns) a task runs before its CPU may switch to another of its runnable tasks, ending at the \
         next tick (debugfs sched/base_slice_ns); auto is Linux's 700000 x (1 + ilog2(min(CPUs, 8))); \
         2.6's O(1) scheduler gave a nice-0 task 100 ms (DEF_TIMESLICE)",
    ),
    (HZ, "100|250|300|1000", "mmsim, before the run only: CONFIG_HZ, the scheduler tick at which a used-up slice ends"),
    (
        READ_AHEAD_KB,
        "0..1048576",
        "the block device's read_ahead_kb (/sys/block/DEV/queue): the readahead window's limit; a file \
         takes the value when it is opened (128 is VM_READAHEAD_PAGES' default)",
    ),
    (
        MAX_SECTORS_KB,
        "4..1048576",
        "the block device's max_sectors_kb: the largest request, up to which one large read(2) reads ahead",
    ),
    (DROP_CACHES, "0|1|2|3", "writing 1 evicts the clean unmapped page cache, 2 shrinks the slab caches, 3 both"),
];

impl Knobs {
    /// Every knob with its default and meaning.
    pub fn describe() -> Vec<KnobInfo> {
        let d = Knobs::default();
        Self::table()
            .map(|&(name, values, help)| KnobInfo {
                name,
                default: d.get(name).expect("table names are knobs"),
                values,
                help,
            })
            .collect()
    }

    /// Names of every knob.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::table().map(|k| k.0)
    }

    /// Every knob's (name, accepted values, meaning): the table, then khugepaged's.
    fn table() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
        KNOB_TABLE.iter().chain(super::knobs_khugepaged::TABLE)
    }

    /// The value of a knob as sysfs would print it.
    pub fn get(&self, name: &str) -> Option<String> {
        if let Some(v) = self.khugepaged.get(name) {
            return Some(v);
        }
        Some(match name {
            THP_ENABLED => match self.thp_enabled {
                ThpEnabled::Always => "always",
                ThpEnabled::Madvise => "madvise",
                ThpEnabled::Never => "never",
            }
            .to_string(),
            THP_DEFRAG => match self.thp_defrag {
                ThpDefrag::Always => "always",
                ThpDefrag::Defer => "defer",
                ThpDefrag::DeferMadvise => "defer+madvise",
                ThpDefrag::Madvise => "madvise",
                ThpDefrag::Never => "never",
            }
            .to_string(),
            THP_USE_ZERO_PAGE => (self.thp_use_zero_page as u8).to_string(),
            FAIL_MIN_ORDER => match self.fail_min_order {
                None => "off".to_string(),
                Some(o) => o.to_string(),
            },
            FAIL_EVERY => self.fail_every.to_string(),
            FAULT_AROUND => self.fault_around_bytes.to_string(),
            HZP_ALLOC => match self.hzp_alloc {
                HzpAlloc::Boot => "boot",
                HzpAlloc::Lazy => "lazy",
                HzpAlloc::Shrinkable => "shrinkable",
                HzpAlloc::Persistent => "persistent",
            }
            .to_string(),
            HZP_KIND => match self.hzp_kind {
                HzpKind::Hzp => "hzp",
                HzpKind::Vhzp => "vhzp",
            }
            .to_string(),
            HZP_WP => match self.hzp_wp {
                HzpWp::Today => "today",
                HzpWp::Seed => "seed",
            }
            .to_string(),
            FILE_TEXT => match self.file_text {
                FileText::Off => "off",
                FileText::Seed => "seed",
                FileText::Khugepaged => "khugepaged",
            }
            .to_string(),
            HZP_REFCOUNT => match self.hzp_refcount {
                HzpRefcount::Global => "global",
                HzpRefcount::PerMm => "per_mm",
            }
            .to_string(),
            PCP_BATCH => match self.pcp_batch {
                PcpBatch::Auto => "auto".to_string(),
                PcpBatch::Legacy => "legacy".to_string(),
                PcpBatch::Pages(n) => n.to_string(),
            },
            PID_MAX => self.pid_max.to_string(),
            PT_RECLAIM => (self.pt_reclaim as u8).to_string(),
            INIT_ON_ALLOC => (self.init_on_alloc as u8).to_string(),
            INIT_ON_FREE => (self.init_on_free as u8).to_string(),
            SCRUB_START => self.scrub_start.map_or("off".to_string(), |o| o.to_string()),
            SCRUB_STOP => self.scrub_stop.to_string(),
            SCRUB_LOAD => self.scrub_load.to_string(),
            SCRUB_ENGINE => match self.scrub_engine {
                ScrubEngine::Cpu => "cpu",
                ScrubEngine::CpuNt => "cpu_nt",
                ScrubEngine::Offload => "offload",
            }
            .to_string(),
            SCRUB_MERGE => if self.scrub_merge_separate { "separate" } else { "dirty" }.to_string(),
            FAULT_LOCKING => match self.fault_locking {
                FaultLocking::PerVma => "per_vma",
                FaultLocking::MmapLock => "mmap_lock",
                FaultLocking::PageTableLock => "page_table_lock",
            }
            .to_string(),
            PTSHARE => {
                let names: Vec<&str> = [(ptshare::PTE, "pte"), (ptshare::PMD, "pmd"), (ptshare::PUD, "pud")]
                    .into_iter()
                    .filter(|&(b, _)| self.ptshare & b != 0)
                    .map(|(_, n)| n)
                    .collect();
                if names.is_empty() {
                    "off".to_string()
                } else {
                    names.join(",")
                }
            }
            PTSHARE_COMPAT => match self.ptshare_compat {
                PtshareCompat::Fixed => "fixed",
                PtshareCompat::Rfc => "rfc",
            }
            .to_string(),
            NR_HUGEPAGES => self.nr_hugepages.to_string(),
            NR_OVERCOMMIT_HUGEPAGES => self.nr_overcommit_hugepages.to_string(),
            HUGETLB_PMD_SHARE => (self.hugetlb_pmd_share as u8).to_string(),
            PAGECACHE_LOCK => if self.pagecache_tree_lock { "tree_lock" } else { "rcu" }.to_string(),
            SCHED_BASE_SLICE => self.sched_base_slice_ns.map_or_else(|| "auto".to_string(), |v| v.to_string()),
            HZ => self.hz.to_string(),
            READ_AHEAD_KB => self.read_ahead_kb.to_string(),
            MAX_SECTORS_KB => self.max_sectors_kb.to_string(),
            DROP_CACHES => self.drop_caches.to_string(),
            _ => return None,
        })
    }

    /// Set a knob from its textual value (as `echo VALUE > /sys/...` would); the error names
    /// the knob and what it accepts.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let v = value.trim();
        let bad = |accepted: &str| format!("knob {name}: invalid value {v:?} (expected {accepted})");
        if let Some(r) = self.khugepaged.set(name, v) {
            return r;
        }
        match name {
            THP_ENABLED => {
                self.thp_enabled = match v {
                    "always" => ThpEnabled::Always,
                    "madvise" => ThpEnabled::Madvise,
                    "never" => ThpEnabled::Never,
                    _ => return Err(bad("always, madvise or never")),
                }
            }
            THP_DEFRAG => {
                self.thp_defrag = match v {
                    "always" => ThpDefrag::Always,
                    "defer" => ThpDefrag::Defer,
                    "defer+madvise" => ThpDefrag::DeferMadvise,
                    "madvise" => ThpDefrag::Madvise,
                    "never" => ThpDefrag::Never,
                    _ => return Err(bad("always, defer, defer+madvise, madvise or never")),
                }
            }
            THP_USE_ZERO_PAGE => self.thp_use_zero_page = parse_bool(v).ok_or_else(|| bad("0 or 1"))?,
            FAIL_MIN_ORDER => {
                self.fail_min_order = parse_order_or_off(v).ok_or_else(|| bad("off or an order 0..10"))?
            }
            FAIL_EVERY => {
                self.fail_every = v.parse().map_err(|_| bad("a non-negative integer"))?;
            }
            FAULT_AROUND => {
                let n = crate::units::parse_size(v).map_err(|_| bad("a size"))?;
                if !n.is_power_of_two() || !(4096..=65536).contains(&n) {
                    return Err(bad("a power of two between 4096 and 65536"));
                }
                self.fault_around_bytes = n;
            }
            HZP_ALLOC => {
                self.hzp_alloc = match v {
                    "boot" => HzpAlloc::Boot,
                    "lazy" => HzpAlloc::Lazy,
                    "shrinkable" => HzpAlloc::Shrinkable,
                    "persistent" => HzpAlloc::Persistent,
                    _ => return Err(bad("boot, lazy, shrinkable or persistent")),
                }
            }
            HZP_KIND => {
                self.hzp_kind = match v {
                    "hzp" => HzpKind::Hzp,
                    "vhzp" => HzpKind::Vhzp,
                    _ => return Err(bad("hzp or vhzp")),
                }
            }
            HZP_WP => {
                self.hzp_wp = match v {
                    "today" => HzpWp::Today,
                    "seed" => HzpWp::Seed,
                    _ => return Err(bad("today or seed")),
                }
            }
            FILE_TEXT => {
                self.file_text = match v {
                    "off" => FileText::Off,
                    "seed" => FileText::Seed,
                    "khugepaged" => FileText::Khugepaged,
                    _ => return Err(bad("off, seed or khugepaged")),
                }
            }
            HZP_REFCOUNT => {
                self.hzp_refcount = match v {
                    "global" => HzpRefcount::Global,
                    "per_mm" => HzpRefcount::PerMm,
                    _ => return Err(bad("global or per_mm")),
                }
            }
            PCP_BATCH => {
                self.pcp_batch = match v {
                    "auto" => PcpBatch::Auto,
                    "legacy" => PcpBatch::Legacy,
                    _ => match v.parse::<u32>() {
                        Ok(n) if (1..=4096).contains(&n) => PcpBatch::Pages(n),
                        _ => return Err(bad("auto, legacy or a number of pages 1..4096")),
                    },
                }
            }
            PID_MAX => {
                // proc_dointvec_minmax between pid_max_min and pid_max_max, as the sysctl.
                self.pid_max = match v.parse::<u32>() {
                    Ok(n) if (PID_MAX_MIN..=PID_MAX_LIMIT).contains(&n) => n,
                    _ => return Err(bad(&format!("an integer {PID_MAX_MIN}..{PID_MAX_LIMIT}"))),
                }
            }
            PT_RECLAIM => self.pt_reclaim = parse_bool(v).ok_or_else(|| bad("0 or 1"))?,
            INIT_ON_ALLOC => self.init_on_alloc = parse_bool(v).ok_or_else(|| bad("0 or 1"))?,
            INIT_ON_FREE => self.init_on_free = parse_bool(v).ok_or_else(|| bad("0 or 1"))?,
            SCRUB_START => self.scrub_start = parse_order_or_off(v).ok_or_else(|| bad("off or an order 0..10"))?,
            SCRUB_STOP => {
                self.scrub_stop = match v.parse::<u32>() {
                    Ok(o) if o <= 10 => o,
                    _ => return Err(bad("an order 0..10")),
                }
            }
            SCRUB_LOAD => {
                self.scrub_load = match v.parse::<u32>() {
                    Ok(l) if l <= 999 => l,
                    _ => return Err(bad("an integer 0..999")),
                }
            }
            SCRUB_ENGINE => {
                self.scrub_engine = match v {
                    "cpu" => ScrubEngine::Cpu,
                    "cpu_nt" => ScrubEngine::CpuNt,
                    "offload" => ScrubEngine::Offload,
                    _ => return Err(bad("cpu, cpu_nt or offload")),
                }
            }
            SCRUB_MERGE => {
                self.scrub_merge_separate = match v {
                    "dirty" => false,
                    "separate" => true,
                    _ => return Err(bad("dirty or separate")),
                }
            }
            FAULT_LOCKING => {
                self.fault_locking = match v {
                    "per_vma" => FaultLocking::PerVma,
                    "mmap_lock" => FaultLocking::MmapLock,
                    "page_table_lock" => FaultLocking::PageTableLock,
                    _ => return Err(bad("per_vma, mmap_lock or page_table_lock")),
                }
            }
            PTSHARE => {
                let mut bits = 0;
                if v != "off" && v != "0" {
                    for level in v.split(',').map(str::trim) {
                        bits |= match level {
                            "pte" => ptshare::PTE,
                            "pmd" => ptshare::PMD,
                            "pud" => ptshare::PUD,
                            _ => return Err(bad("off or a comma list of pte, pmd, pud")),
                        };
                    }
                }
                self.ptshare = bits;
            }
            PTSHARE_COMPAT => {
                self.ptshare_compat = match v {
                    "fixed" => PtshareCompat::Fixed,
                    "rfc" => PtshareCompat::Rfc,
                    _ => return Err(bad("fixed or rfc")),
                }
            }
            NR_HUGEPAGES => self.nr_hugepages = v.parse().map_err(|_| bad("a number of pages"))?,
            NR_OVERCOMMIT_HUGEPAGES => {
                self.nr_overcommit_hugepages = v.parse().map_err(|_| bad("a number of pages"))?
            }
            HUGETLB_PMD_SHARE => self.hugetlb_pmd_share = parse_bool(v).ok_or_else(|| bad("0 or 1"))?,
            PAGECACHE_LOCK => {
                self.pagecache_tree_lock = match v {
                    "rcu" => false,
                    "tree_lock" => true,
                    _ => return Err(bad("rcu or tree_lock")),
                }
            }
            SCHED_BASE_SLICE => {
                self.sched_base_slice_ns = match v {
                    "auto" => None,
                    _ => match v.parse::<u32>() {
                        Ok(n) if n > 0 => Some(u64::from(n)),
                        _ => return Err(bad("auto or a number of nanoseconds from 1 to 4294967295")),
                    },
                }
            }
            HZ => {
                self.hz = match v.parse() {
                    Ok(n @ (100 | 250 | 300 | 1000)) => n,
                    _ => return Err(bad("100, 250, 300 or 1000")),
                }
            }
            READ_AHEAD_KB => {
                self.read_ahead_kb = v.parse().ok().filter(|&n| n <= 1 << 20).ok_or_else(|| bad("0 to 1048576"))?
            }
            MAX_SECTORS_KB => {
                self.max_sectors_kb =
                    v.parse().ok().filter(|&n| (4..=1 << 20).contains(&n)).ok_or_else(|| bad("4 to 1048576"))?
            }
            DROP_CACHES => self.drop_caches = v.parse().ok().filter(|&n| n <= 3).ok_or_else(|| bad("0, 1, 2 or 3"))?,
            _ => {
                let known: Vec<&str> = Knobs::names().collect();
                return Err(format!("unknown knob {name:?} (known: {})", known.join(", ")));
            }
        }
        Ok(())
    }

    /// All knobs as name -> value, as a run reports its effective settings.
    pub fn effective(&self) -> Vec<(String, String)> {
        Knobs::names().map(|n| (n.to_string(), self.get(n).expect("known"))).collect()
    }
}

/// An order knob: `off` (also `-1` or `none`) or a buddy order 0..10.
fn parse_order_or_off(v: &str) -> Option<Option<u32>> {
    match v {
        "off" | "-1" | "none" => Some(None),
        _ => v.parse::<u32>().ok().filter(|&o| o <= 10).map(Some),
    }
}

/// A 0|1 knob value (sysfs also takes true/false here).
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "0" | "false" => Some(false),
        "1" | "true" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_get_round_trip() {
        let mut k = Knobs::default();
        for info in Knobs::describe() {
            k.set(info.name, &info.default).unwrap();
        }
        assert_eq!(k, Knobs::default());
        k.set("transparent_hugepage/enabled", "always").unwrap();
        assert_eq!(k.thp_enabled, ThpEnabled::Always);
        k.set("fail_page_alloc/min_order", "9").unwrap();
        assert_eq!(k.fail_min_order, Some(9));
    }

    #[test]
    fn errors_name_the_knob() {
        let mut k = Knobs::default();
        let e = k.set("transparent_hugepage/enabled", "sometimes").unwrap_err();
        assert!(e.contains("transparent_hugepage/enabled"), "{e}");
        let e = k.set("no/such", "1").unwrap_err();
        assert!(e.contains("unknown knob"), "{e}");
        assert!(k.set("fault_around_bytes", "12345").is_err());
        let e = k.set("page_alloc/pcp_batch", "0").unwrap_err();
        assert!(e.contains("page_alloc/pcp_batch") && e.contains("legacy"), "{e}");
        k.set("page_alloc/pcp_batch", "7").unwrap();
        assert_eq!((k.pcp_batch, k.get("page_alloc/pcp_batch").unwrap().as_str()), (PcpBatch::Pages(7), "7"));
        for bad in ["300", "4194305", "-1", "32768.5", "lots"] {
            let e = k.set("kernel/pid_max", bad).unwrap_err();
            assert!(e.contains("kernel/pid_max") && e.contains("301..4194304"), "{e}");
        }
        k.set("kernel/pid_max", "301").unwrap();
        k.set("kernel/pid_max", "4194304").unwrap();
        assert_eq!(k.get("kernel/pid_max").as_deref(), Some("4194304"));
        k.set("vm/ptshare", "pmd, pte").unwrap();
        assert_eq!((k.ptshare, k.get("vm/ptshare").unwrap().as_str()), (ptshare::PTE | ptshare::PMD, "pte,pmd"));
        let e = k.set("vm/ptshare", "pte,p4d").unwrap_err();
        assert!(e.contains("vm/ptshare") && e.contains("pte, pmd, pud"), "{e}");
        k.set("vm/ptshare", "off").unwrap();
        assert_eq!(k.ptshare, 0);
    }

    #[test]
    fn every_knob_is_listed_and_round_trips() {
        let all = [
            THP_ENABLED,
            THP_DEFRAG,
            THP_USE_ZERO_PAGE,
            FAIL_MIN_ORDER,
            FAIL_EVERY,
            FAULT_AROUND,
            HZP_ALLOC,
            HZP_KIND,
            HZP_WP,
            HZP_REFCOUNT,
            FILE_TEXT,
            PCP_BATCH,
            PID_MAX,
            PT_RECLAIM,
            INIT_ON_ALLOC,
            INIT_ON_FREE,
            SCRUB_START,
            SCRUB_STOP,
            SCRUB_LOAD,
            SCRUB_ENGINE,
            SCRUB_MERGE,
            FAULT_LOCKING,
            PTSHARE,
            PTSHARE_COMPAT,
            NR_HUGEPAGES,
            NR_OVERCOMMIT_HUGEPAGES,
            HUGETLB_PMD_SHARE,
            PAGECACHE_LOCK,
            SCHED_BASE_SLICE,
            HZ,
            READ_AHEAD_KB,
            MAX_SECTORS_KB,
            DROP_CACHES,
        ];
        let mut listed: Vec<_> = Knobs::names().collect();
        // khugepaged's own table (knobs_khugepaged.rs tests it).
        listed.retain(|n| !n.starts_with("transparent_hugepage/khugepaged/"));
        for name in all {
            assert!(listed.contains(&name), "{name} missing from `mmsim knobs`");
        }
        assert_eq!(listed.len(), all.len());
        for info in Knobs::describe() {
            let mut k = Knobs::default();
            k.set(info.name, &info.default).unwrap();
            assert_eq!(k, Knobs::default(), "{}: its default round-trips", info.name);
        }
    }
}
