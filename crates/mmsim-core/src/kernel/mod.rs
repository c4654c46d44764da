//! The kernel's memory manager: one `Kernel` owns physical memory, every mm, the shmem objects
//! and the counters. Each Linux file it mirrors is a module here adding `impl Kernel` methods
//! named after the Linux functions (memory.rs, huge_memory.rs, mmap.rs, ...).

mod alloc_slowpath;
pub mod blkdev;
pub mod brk;
pub mod check;
mod check_reclaim;
pub mod content;
pub mod fault;
pub mod filemap;
pub mod filemap_fault;
mod filemap_xa;
pub mod fork;
pub mod fs_writeback;
pub mod huge_memory;
pub mod huge_zero;
pub mod hugetlb;
pub mod khugepaged;
pub mod khugepaged_anon;
pub mod khugepaged_scan;
pub mod knobs;
pub mod knobs_khugepaged;
pub mod knobs_reclaim;
pub mod kswapd;
pub mod lazyfree;
pub mod lruvec;
pub mod madvise;
mod madvise_cold;
pub mod memcontrol;
pub mod memcontrol_kmem;
mod memcontrol_limits;
mod memcontrol_swap;
pub mod memfd;
pub mod memory;
pub mod memory_swap;
pub mod mlock;
pub mod mm;
pub mod mm_types;
pub mod mmap;
pub mod mmzone;
pub mod mprotect;
pub mod mremap;
pub mod page_alloc;
pub mod pgtable;
pub mod pgtable_pages;
pub mod ptshare;
pub mod readahead;
pub mod rmap;
pub mod shmem;
pub mod shmem_swap;
pub mod slab;
pub mod swap;
pub mod swap_state;
pub mod swapfile;
pub mod syscall;
pub mod text_thp;
pub mod truncate;
pub mod uapi;
pub mod vmscan;
mod vmscan_folio;
pub mod vmstat;
pub mod walk;
pub mod workingset;
pub mod xarray;

#[cfg(test)]
mod filemap_tests;
#[cfg(test)]
mod hugetlb_tests;
#[cfg(test)]
mod khugepaged_anon_tests;
#[cfg(test)]
mod khugepaged_tests;
#[cfg(test)]
mod madvise_tests;
#[cfg(test)]
mod memcontrol_kmem_tests;
#[cfg(test)]
mod memfd_tests;
#[cfg(test)]
mod mlock_tests;
#[cfg(test)]
mod mremap_tests;
#[cfg(test)]
mod ptshare_tests;
#[cfg(test)]
mod reclaim_tests;
#[cfg(test)]
mod shmem_swap_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod text_thp_tests;

use crate::fasthash::FastMap;
use crate::tracepoints::ev;

use knobs::Knobs;
use mm::{MmCounter, MmStruct};
use mm_types::{pg, FrameData, NIL};
use page_alloc::{gfp, ClearPath, PhysMem};
use shmem::AddressSpace;
use vmstat::{VmEvent, VmItem, VmStat};

use crate::units::{Geometry, Pfn};

/// Index of an mm in `Kernel::mms`.
pub type MmId = u32;

/// The byte a replayed store leaves in every byte of a page it is the first to write
/// (`Kernel::mark_page_written`): any value but 0.
pub const REPLAY_STORE_BYTE: u8 = 0x5a;

/// The kernel's memory-management state.
pub struct Kernel {
    /// The architecture's page geometry (PAGE_SHIFT and the table fan-out it implies).
    pub geo: Geometry,
    pub mem: PhysMem,
    pub knobs: Knobs,
    pub stat: VmStat,
    pub mms: Vec<Option<MmStruct>>,
    /// The empty slots of `mms`, the lowest reused first (mmsim's id allocator; Linux
    /// allocates mm_structs from a slab and has no ids).
    free_mm_ids: std::collections::BTreeSet<MmId>,
    /// Every inode (`AddressSpace`): shmem objects, tmpfs and ext4 files.
    pub shmem: Vec<Option<AddressSpace>>,
    /// Open files (`struct file`), held by file vmas and by system calls in progress.
    pub filps: Vec<Option<filemap::File>>,
    /// The directory: file name -> inode (one namespace for every process).
    pub dentries: std::collections::BTreeMap<String, u32>,
    /// Pages read from the block device so far (the machine charges the device's time).
    pub io_read_pages: u64,
    /// The fault being handled is a retry (FAULT_FLAG_TRIED): it counts as major.
    pub fault_tried: bool,
    /// The 4 KiB zero page (ZERO_PAGE(0)), a reserved frame.
    pub zero_pfn: Pfn,
    /// The huge zero folio and its refcount (huge_zero_folio, huge_zero_refcount).
    pub huge_zero: huge_zero::HugeZero,
    /// The hugetlb pool and the hugetlbfs files of MAP_HUGETLB mappings.
    pub hugetlb: hugetlb::Hstate,
    /// The per-CPU page lists' occupancy (struct per_cpu_pages), for their cost.
    pub pcp: Pcp,
    /// The CPU the kernel is running on (the current task's): its pcp list is used.
    pub cur_cpu: usize,
    /// Partially mapped anonymous THPs awaiting the deferred split shrinker (head pfns).
    pub deferred_split: Vec<u32>,
    /// Which mms map each large anonymous folio and how often (folio->_mm_id/_mm_id_mapcount;
    /// Linux tracks two ids and a "maybe shared" bit, mmsim keeps the exact list).
    pub folio_mms: FastMap<u32, Vec<(MmId, i32)>>,
    /// PTE tables deposited under huge pmds (pgtable_trans_huge_deposit), keyed by the pmd
    /// slot (PMD table frame, index). Linux chains them off the PMD table's struct page.
    pub deposited: FastMap<(u32, u16), u32>,
    /// folio->mlock_count of each PG_mlocked folio (head pfn): its outstanding mlocks.
    pub mlock_count: FastMap<u32, u32>,
    /// Seed 003: for every page table reached by more than one mm (a shared table and the
    /// tables under it), the mms that reach it (`kernel/ptshare.rs`). Empty unless tables are
    /// shared.
    pub pt_reach: FastMap<u32, Vec<MmId>>,
    /// Seed 004's text copies (`transparent_hugepage/file_text=seed`): (mm, inode, first
    /// index of the aligned range) -> the PMD page read for that mm (`kernel/text_thp.rs`).
    pub text_copies: FastMap<(MmId, u32, u64), Pfn>,
    /// khugepaged's registered mms, cursor and counts (`file_text=khugepaged`).
    pub khugepaged: khugepaged_scan::KhugepagedState,
    /// MADV_FREE's lazyfree folios, oldest first, and the discards reclaim made of them.
    pub lazyfree: lazyfree::Lazyfree,
    next_anon_vma: u32,
    /// The mm the OOM killer chose and has not yet seen killed (its pending SIGKILL): a
    /// fault that fails with VM_FAULT_OOM hands it to its task (`Fault::oom_victim`).
    pub(super) oom_victim: Option<MmId>,
    /// The calling task's accounting while it is in the kernel (`syscall::Current`).
    current: syscall::Current,
    /// Work done since the hardware model last looked (zeroing, copying, TLB flushes): the
    /// kernel stays hardware-agnostic and the machine charges each item to a CPU.
    pub work: Vec<Work>,
    /// The first inconsistency the kernel noticed itself (its BUG()/WARN() reports).
    pub bug: Option<String>,
    /// The zone's watermarks (kernel/mmzone.rs).
    pub zone: mmzone::Zone,
    /// Each CPU's LRU folio batches (kernel/swap.rs).
    pub fbatches: Vec<swap::CpuFbatches>,
    /// The memory cgroups (kernel/memcontrol.rs).
    pub memcg: memcontrol::MemCgroups,
    /// The swap areas (kernel/swapfile.rs).
    pub swap: swapfile::SwapState,
    /// Each vma's swap readahead state (`vma->swap_readahead_info`), by (mm, vm_start).
    pub swap_ra_info: FastMap<(MmId, u64), swap_state::SwapRaInfo>,
    /// The block device's request queue (swap I/O) and the current plug.
    pub blk: blkdev::BlockQueue,
    plug: blkdev::Plug,
    plug_depth: u32,
    /// The kernel's clock: the current task's time, in ns (set on each entry).
    pub now_ns: u64,
    /// CPUs of the machine (`num_online_cpus`).
    pub nr_cpus: usize,
    /// The mm of the task in the kernel now (None: a kernel thread).
    pub cur_mm: Option<MmId>,
    /// The kernel is running a kernel thread (kswapd, khugepaged, kscrubd): no task's memcg
    /// is charged for the slab objects it allocates (`current_obj_cgroup` of a PF_KTHREAD).
    pub in_kthread: bool,
    /// kswapd's state (kernel/vmscan.rs; its thread is the interpreter's).
    pub kswapd: vmscan::KswapdState,
    /// PF_MEMALLOC: the current context is reclaiming (its allocations and charges are
    /// forced, and it does not reclaim again).
    pub in_reclaim: bool,
    /// Who the current context reclaims as (kswapd, khugepaged, or a direct reclaimer).
    pub reclaimer: vmscan::Reclaimer,
    /// PGDAT_WRITEBACK and PGDAT_DIRTY: kswapd found folios under writeback (dirty).
    pub pgdat_writeback: bool,
    pub pgdat_dirty: bool,
    /// Kernel pages taken from the allocator for the kernel's own use (swap tables).
    pub kernel_pages: u64,
    /// Other tasks a memory.oom.group kill takes with its victim.
    pub oom_group_victims: Vec<MmId>,
    /// Reclaim's CPU costs (the profile's).
    pub cost: ReclaimCost,
    /// The accounted slab caches' object sizes (the profile's).
    pub slab_sizes: slab::SlabSizes,
    /// Deliberate bugs, for proving that the checkers catch them (tests only).
    pub sabotage: Sabotage,
    /// The events `engine.events` selects (`tracepoints`), raised here and stamped with their
    /// task and time by the interpreter; None when tracing is off.
    pub tp: Option<Box<crate::tracepoints::Tracepoints>>,
    /// Reused buffers of `check_invariants`.
    check_scratch: std::cell::RefCell<check::CheckScratch>,
}

/// The CPU cost of reclaim's work, per page (the profile's `cost.reclaim_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReclaimCost {
    /// Cycles per page isolated and looked at by a scan of an LRU list.
    pub reclaim_scan: f64,
    /// Cycles per page written out (swap allocation, unmap, the bio).
    pub reclaim_pageout: f64,
    /// The CPUs' clock (GHz): reclaim's own work moves the kernel's clock on by its time,
    /// so that the writes it started complete while it goes on (0: time stands still).
    pub freq_ghz: f64,
}

/// A piece of kernel work with a hardware cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Work {
    /// Clearing `pages` base pages from `pfn` on, `chunk` pages per `clear_page` call (seed
    /// 002's clear_page with an order clears a whole block in one call), by `path`; with
    /// `target` (a subpage index; `NO_TARGET`: in address order) the subpages are cleared in
    /// `process_huge_page`'s order, the faulting one last so that it stays hot.
    Clear { pfn: Pfn, pages: u64, chunk: u64, path: ClearPath, target: u32 },
    /// copy_user_highpage.
    Copy { dst: Pfn, src: Pfn },
    /// flush_tlb_mm_range over [start, end) of an mm on every CPU that may cache it.
    Flush { mm: MmId, start: u64, end: u64 },
    /// flush_tlb_mm: everything of an mm (fork's write-protect).
    FlushMm { mm: MmId },
    /// An entry of a shared page table changed: flush [start, end) of every mm that reaches
    /// `table` on every CPU that may cache one of them (seed 003; Linux has no such flush).
    FlushShared { table: Pfn, start: u64, end: u64 },
    /// The mm is destroyed (exit_mmap): its translations go and its id may be reused.
    MmExit { mm: MmId },
    /// `pages` pages moved between a CPU's pcp list and the buddy lists under zone->lock
    /// (rmqueue_bulk, free_pcppages_bulk): a spinlock on the zone's line held while they move.
    ZoneLock { pages: u32, func: &'static str },
    /// An atomic read-modify-write on a kernel variable's cache line (a global refcount).
    Atomic { line: u64, func: &'static str, kind: AtomicKind },
    /// A lock a page fault takes (mmap_lock's read side, a vma's read lock, a page-table
    /// lock) on a line other CPUs' faults may take too, held `smp.fault_lock_hold` cycles if
    /// `hold` (a spinlock around the pte update): its uncontended cost is part of
    /// `cost.fault_handler`, so only waiting and the line's transfer cost more.
    FaultLock { line: u64, hold: bool, func: &'static str },
    /// Kernel code that costs `cycles` of instructions (reclaim's scanning), charged to
    /// `func`.
    Cycles { cycles: f64, func: &'static str },
}

impl Work {
    /// Work on a line other CPUs use too (zone->lock, a shared atomic): its cost depends on
    /// when the others use it, so the interpreter charges it in time order.
    pub fn on_shared_line(&self) -> bool {
        matches!(self, Work::ZoneLock { .. } | Work::Atomic { .. } | Work::FaultLock { .. })
    }
}

/// The per-CPU page lists (mm/page_alloc.c, struct per_cpu_pages) of order-0 pages, modelled
/// for what they cost: a CPU allocates from and frees to its own list, and only when the list
/// runs empty (or above `high`) does it move `batch` pages from (to) the buddy allocator under
/// the zone's spinlock, the lock that many CPUs faulting at once contend for. Deliberately
/// different: which frames sit on a pcp list is not tracked (pages come from and go to the
/// buddy lists at once, so free-page counts stay exact), and only order 0 goes through it.
#[derive(Clone, Debug)]
pub struct Pcp {
    /// Pages on each CPU's list.
    pub count: Vec<u32>,
    /// `pcp->batch`: zone_batchsize() for the zone's size (`page_alloc/pcp_batch`).
    pub batch: u32,
    /// `pcp->high`: 6 x batch (pageset_set_batch of Linux 4.x; today's default is derived
    /// from the low watermark and is at least 4 x batch).
    pub high: u32,
}

impl Pcp {
    /// Lists for a zone of `managed` pages (zone_batchsize: managed/1024 pages, at most 1 MiB
    /// since Linux 4.19 and 512 KiB before, a quarter of it, rounded to a power of two minus
    /// one; at least 1), or a batch given by `page_alloc/pcp_batch`.
    pub fn new(managed: u64, knob: knobs::PcpBatch, geo: Geometry) -> Pcp {
        let cap = match knob {
            knobs::PcpBatch::Pages(n) => return Pcp { count: Vec::new(), batch: n, high: 6 * n },
            knobs::PcpBatch::Auto => 1 << 20,
            knobs::PcpBatch::Legacy => 512 << 10,
        };
        let b = ((managed >> 10).min(cap / geo.page_size()) / 4).max(1);
        let batch = ((1u64 << (63 - (b + b / 2).leading_zeros())) - 1).max(1) as u32;
        Pcp { count: Vec::new(), batch, high: 6 * batch }
    }
}

/// How an atomic on a shared kernel variable is done, which decides what it costs when
/// another CPU owns the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicKind {
    /// One locked read-modify-write (`lock xadd`, `lock dec`: atomic_inc, atomic_dec_and_test).
    Rmw,
    /// A read and then a `lock cmpxchg` (atomic_inc_not_zero, atomic_add_unless): the read
    /// brings the line in shared, the cmpxchg must take it exclusive again, so a contended
    /// line moves twice (retries after a failed cmpxchg are not modelled: a lower bound).
    CmpxchgLoop,
}

/// Deliberately broken behaviour a test can switch on to show the reference model and the
/// invariant checks catch it. Never set by the front ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sabotage {
    /// wp_page_copy maps a new page without copying the old one's data.
    pub skip_cow_copy: bool,
    /// zap_pte_range forgets to drop the rss counter.
    pub skip_rss_dec: bool,
    /// dup_mmap write-protects the parent's ptes without flushing its TLB.
    pub skip_fork_flush: bool,
    /// mprotect changes the vma but leaves the page tables as they were (change_protection skipped).
    pub skip_change_protection: bool,
}

/// Fault result bits (enum vm_fault_reason).
pub mod vm_fault {
    pub const OOM: u32 = 1 << 0;
    pub const SIGBUS: u32 = 1 << 1;
    pub const SIGSEGV: u32 = 1 << 2;
    pub const FALLBACK: u32 = 1 << 3;
    pub const NOPAGE: u32 = 1 << 4;
    /// The fault read the page from the device (filemap_fault found no folio).
    pub const MAJOR: u32 = 1 << 5;
    /// The fault dropped its lock to wait for I/O: the arch handler retries it.
    pub const RETRY: u32 = 1 << 6;
    pub const ERROR: u32 = OOM | SIGBUS | SIGSEGV;
}

/// Frames reserved at boot: frame 0 (the kernel's ZERO_PAGE).
const RESERVED_FRAMES: u64 = 1;

impl Kernel {
    /// Boot a machine with `memory` bytes of RAM in pages of `geo`.
    pub fn new(memory: u64, knobs: Knobs, geo: Geometry) -> Kernel {
        let nr_pages = memory / geo.page_size();
        let pcp_batch = knobs.pcp_batch;
        let mut mem = PhysMem::new(nr_pages, RESERVED_FRAMES);
        mem.table_entries = geo.ptrs_per_table();
        mem.fail_min_order = knobs.fail_min_order;
        mem.fail_every = knobs.fail_every;
        mem.init_on_alloc = knobs.init_on_alloc;
        mem.init_on_free = knobs.init_on_free;
        if knobs.init_on_free {
            mem.boot_init_on_free();
        }
        let zero_pfn = Pfn(0);
        mem.pages[0].set(pg::RESERVED);
        let mut k = Kernel {
            geo,
            mem,
            knobs,
            stat: VmStat::default(),
            mms: Vec::new(),
            shmem: Vec::new(),
            filps: Vec::new(),
            dentries: Default::default(),
            io_read_pages: 0,
            fault_tried: false,
            zero_pfn,
            huge_zero: huge_zero::HugeZero::default(),
            hugetlb: hugetlb::Hstate::default(),
            pcp: Pcp::new(nr_pages - RESERVED_FRAMES, pcp_batch, geo),
            cur_cpu: 0,
            deferred_split: Vec::new(),
            folio_mms: FastMap::default(),
            deposited: FastMap::default(),
            mlock_count: FastMap::default(),
            text_copies: FastMap::default(),
            khugepaged: Default::default(),
            lazyfree: Default::default(),
            pt_reach: FastMap::default(),
            free_mm_ids: Default::default(),
            next_anon_vma: 1,
            oom_victim: None,
            sabotage: Sabotage::default(),
            tp: None,
            current: Default::default(),
            bug: None,
            zone: Default::default(),
            fbatches: Vec::new(),
            memcg: Default::default(),
            swap: Default::default(),
            swap_ra_info: FastMap::default(),
            blk: Default::default(),
            plug: Default::default(),
            plug_depth: 0,
            now_ns: 0,
            nr_cpus: 1,
            cur_mm: None,
            in_kthread: false,
            kswapd: Default::default(),
            in_reclaim: false,
            reclaimer: vmscan::Reclaimer::Direct,
            pgdat_writeback: false,
            pgdat_dirty: false,
            kernel_pages: 0,
            oom_group_victims: Vec::new(),
            cost: ReclaimCost::default(),
            slab_sizes: slab::SlabSizes::default(),
            work: Vec::new(),
            check_scratch: Default::default(),
        };
        k.zone.managed = nr_pages - RESERVED_FRAMES;
        k.zone.user_min_free_kbytes = k.knobs.reclaim.min_free_kbytes;
        k.init_per_zone_wmark_min();
        k.sync_knobs();
        k.huge_zero_boot();
        if k.knobs.nr_hugepages > 0 {
            // hugepages= on the command line, or the sysctl written early: the pool at boot.
            k.set_max_huge_pages(k.knobs.nr_hugepages);
        }
        k.work.clear();
        k.sync_items();
        k
    }

    /// The OOM killer's pending victim, taken by the process layer to kill it.
    pub fn take_oom_victim(&mut self) -> Option<MmId> {
        self.oom_victim.take()
    }

    /// Raise tracepoint `id` (its fields made only when it is on).
    #[inline]
    pub fn trace(&mut self, id: u8, fields: impl FnOnce() -> String) {
        crate::tracepoints::raise(&mut self.tp, id, fields);
    }

    /// Record an inconsistency (the model's WARN_ON): the run reports it as an invariant
    /// violation instead of crashing.
    pub fn report_bug(&mut self, msg: String) {
        self.bug.get_or_insert(msg);
    }

    /// Apply a knob change at run time (as writing to sysfs would).
    pub fn set_knob(&mut self, name: &str, value: &str) -> Result<(), knobs::KnobError> {
        self.knobs.set(name, value)?;
        self.sync_knobs();
        if name == "vm/nr_hugepages" {
            self.set_max_huge_pages(self.knobs.nr_hugepages);
        }
        match name {
            // min_free_kbytes_sysctl_handler: user_min_free_kbytes, then the watermarks.
            "vm/min_free_kbytes" => {
                self.zone.user_min_free_kbytes = self.knobs.reclaim.min_free_kbytes;
                match self.knobs.reclaim.min_free_kbytes {
                    Some(k) => {
                        self.zone.min_free_kbytes = k;
                        self.setup_per_zone_wmarks();
                    }
                    None => self.init_per_zone_wmark_min(),
                }
            }
            "vm/watermark_scale_factor" => self.setup_per_zone_wmarks(),
            // start_stop_khugepaged: set_recommended_min_free_kbytes when THP is on.
            "transparent_hugepage/enabled" => self.init_per_zone_wmark_min(),
            _ => {}
        }
        if name == "vm/drop_caches" {
            // drop_caches_sysctl_handler: lru_add_drain_all, then 1 drops the page cache,
            // 2 the slab (drop_slab).
            if self.knobs.drop_caches & 1 != 0 {
                self.lru_add_drain_all();
                self.drop_caches();
            }
            if self.knobs.drop_caches & 2 != 0 {
                self.shrink_slab();
            }
        }
        Ok(())
    }

    /// Hand the allocator the knobs it acts on (kept in `PhysMem` so it needs no `Knobs`).
    fn sync_knobs(&mut self) {
        let k = &self.knobs;
        self.mem.fail_min_order = k.fail_min_order;
        self.mem.fail_every = k.fail_every;
        self.mem.merge_separate = k.scrub_merge_separate;
        self.mem.scrub_start = k.scrub_start;
    }

    /// The kernel-variable line of the lock a fault takes first (outside RAM, as
    /// ZONE_LOCK_LINE): the vma's read lock (Linux >= 6.4), else the mm's mmap_lock.
    pub fn fault_lock_line(&self, mm: MmId, vma_start: u64) -> u64 {
        match self.knobs.fault_locking {
            knobs::FaultLocking::PerVma => FAULT_VMA_LINE | (mm as u64) << 36 | (vma_start >> 12) & ((1 << 36) - 1),
            _ => FAULT_MM_LINE | (mm as u64) << 2,
        }
    }

    /// The line of the page-table lock a fault takes around its pte update: the mm-wide
    /// page_table_lock (before 2.6.15), else the split lock of the table holding `addr`'s entry.
    pub fn ptl_line(&self, mm: MmId, addr: u64) -> u64 {
        if self.knobs.fault_locking == knobs::FaultLocking::PageTableLock {
            return FAULT_MM_LINE | (mm as u64) << 2 | 1;
        }
        let table = self.pte_slot(mm, addr).or_else(|| self.pmd_slot(mm, addr)).map_or(0, |s| s.table.0 as u64);
        FAULT_PTL_LINE | table
    }

    /// Refresh the items the allocator owns (nr_free_pages).
    pub fn sync_items(&mut self) {
        self.stat.items[VmItem::NrFreePages] = self.mem.free_pages as i64;
        self.stat.items[VmItem::NrZeroedFreePages] = self.mem.zeroed_free_pages as i64;
        self.stat.items[VmItem::NrDeferredSplit] = self.deferred_split.len() as i64;
    }

    #[inline]
    pub fn mm(&self, id: MmId) -> &MmStruct {
        self.mms[id as usize].as_ref().expect("live mm")
    }

    #[inline]
    pub fn mm_mut(&mut self, id: MmId) -> &mut MmStruct {
        self.mms[id as usize].as_mut().expect("live mm")
    }

    /// A new anon_vma id (anon_vma_prepare).
    pub fn new_anon_vma(&mut self) -> u32 {
        self.next_anon_vma += 1;
        self.next_anon_vma
    }

    /// `rmqueue_pcplist`: an order-0 page from this CPU's list, refilled with `batch` pages
    /// under zone->lock when empty (`rmqueue_bulk`).
    fn rmqueue_pcplist(&mut self) {
        let (cpu, batch) = (self.cur_cpu, self.pcp.batch);
        if self.pcp.count.len() <= cpu {
            self.pcp.count.resize(cpu + 1, 0);
        }
        if self.pcp.count[cpu] == 0 {
            self.pcp.count[cpu] = batch;
            self.work.push(Work::ZoneLock { pages: batch, func: "rmqueue_bulk" });
        }
        self.pcp.count[cpu] -= 1;
    }

    /// `free_unref_page`: an order-0 page onto this CPU's list; above `high`, `batch` pages
    /// go back to the buddy lists under zone->lock (`free_pcppages_bulk`).
    fn free_unref_page(&mut self) {
        let (cpu, batch, high) = (self.cur_cpu, self.pcp.batch, self.pcp.high);
        if self.pcp.count.len() <= cpu {
            self.pcp.count.resize(cpu + 1, 0);
        }
        self.pcp.count[cpu] += 1;
        if self.pcp.count[cpu] > high {
            self.pcp.count[cpu] -= batch;
            self.work.push(Work::ZoneLock { pages: batch, func: "free_pcppages_bulk" });
        }
    }

    // ---- folios and rmap ---------------------------------------------------------------

    /// `compound_head`.
    #[inline]
    pub fn head_of(&self, pfn: Pfn) -> Pfn {
        Pfn(self.mem.pages[pfn.idx()].head)
    }

    /// Number of base pages of the folio headed at `head`.
    pub fn folio_nr_pages(&self, head: Pfn) -> u64 {
        let p = &self.mem.pages[head.idx()];
        if p.test(pg::HEAD) {
            1 << p.order
        } else {
            1
        }
    }

    pub fn folio_get(&mut self, head: Pfn) {
        self.mem.pages[head.idx()].refcount += 1;
    }

    /// `folio_put`: drop a reference; the last frees the folio (a THP whole).
    pub fn folio_put(&mut self, head: Pfn) {
        let p = &mut self.mem.pages[head.idx()];
        p.refcount -= 1;
        debug_assert!(p.refcount >= 0, "refcount underflow on {:#x}", head.0);
        if p.refcount > 0 {
            return;
        }
        let (is_head, order, deferred) = (p.test(pg::HEAD), p.order as u32, p.test(pg::DEFERRED));
        if p.test(pg::HUGETLB) {
            self.folio_mms.remove(&head.0);
            self.free_huge_folio(head);
            return;
        }
        if deferred {
            self.deferred_split.retain(|&h| h != head.0);
        }
        if is_head {
            self.folio_mms.remove(&head.0);
        }
        if self.mem.pages[head.idx()].test(pg::LAZYFREE) {
            self.lazyfree_forget(head);
        }
        if self.mem.pages[head.idx()].test(pg::TEXT_COPY) {
            self.text_copy_free(head);
        }
        // __page_cache_release: off the LRU; then the memcg charge goes.
        if self.mem.pages[head.idx()].test(pg::LRU) {
            self.lruvec_del_folio(head);
        }
        if self.mem.pages[head.idx()].test(pg::MLOCKED) {
            // __page_cache_release of a folio still mlocked: PG_mlocked cleared.
            self.mlock_count.remove(&head.0);
            self.mem.pages[head.idx()].clear(pg::MLOCKED);
            let nr = self.folio_nr_pages(head) as i64;
            self.stat.mod_item(VmItem::NrMlock, -nr);
            self.stat.count_n(VmEvent::UnevictablePgsCleared, nr);
        }
        self.mem_cgroup_uncharge(head);
        let p = &mut self.mem.pages[head.idx()];
        p.clear(pg::LRU | pg::ACTIVE | pg::REFERENCED | pg::WORKINGSET | pg::UNEVICTABLE | pg::RECLAIM | pg::DIRTY);
        p.memcg = memcontrol::NO_MEMCG;
        let order = if is_head { order } else { 0 };
        self.free_pages_ok(head, order);
        if order == 0 {
            self.free_unref_page();
        }
    }

    /// Whether page `p` counts in NR_ANON_MAPPED (mapped by a pte, or its folio by a pmd).
    fn page_mapped(&self, p: Pfn) -> bool {
        let h = self.head_of(p);
        self.mem.pages[p.idx()].mapcount > 0 || self.mem.pages[h.idx()].entire_mapcount > 0
    }

    pub(super) fn track_mm(&mut self, head: Pfn, mm: MmId, delta: i32) {
        if !self.mem.pages[head.idx()].test(pg::HEAD) {
            return;
        }
        let v = self.folio_mms.entry(head.0).or_default();
        match v.iter_mut().find(|e| e.0 == mm) {
            Some(e) => e.1 += delta,
            None => v.push((mm, delta)),
        }
        v.retain(|e| e.1 != 0);
    }

    /// `folio_add_new_anon_rmap` for a freshly allocated folio mapped once (by a pte for a
    /// small folio, by a pmd for a THP): PageAnonExclusive, mapcounts, NR_ANON_MAPPED/THPS.
    pub fn folio_add_new_anon_rmap(&mut self, head: Pfn, mm: MmId, pmd: bool, index: u64) {
        let nr = self.folio_nr_pages(head);
        self.mem.pages[head.idx()].index = index;
        for i in 0..nr as u32 {
            let p = &mut self.mem.pages[(head.0 + i) as usize];
            p.set(pg::ANON | pg::ANON_EXCLUSIVE);
        }
        if pmd {
            self.mem.pages[head.idx()].entire_mapcount = 1;
            self.mod_lruvec_item(head, VmItem::NrAnonThps, 1);
        } else {
            self.mem.pages[head.idx()].mapcount = 1;
        }
        self.mod_lruvec_item(head, VmItem::NrAnonPages, nr as i64);
        self.track_mm(head, mm, 1);
    }

    /// `folio_add_anon_rmap_pte` / `folio_add_file_rmap_pte`: one more pte maps `page`
    /// (NR_ANON_MAPPED or NR_FILE_MAPPED when the page was not mapped before).
    pub fn add_rmap_pte(&mut self, page: Pfn, mm: MmId) {
        let was = self.page_mapped(page);
        let h_of_page = self.head_of(page);
        self.mem.pages[page.idx()].mapcount += 1;
        let anon = self.mem.pages[page.idx()].test(pg::ANON);
        if !was {
            self.mod_lruvec_item(h_of_page, if anon { VmItem::NrAnonPages } else { VmItem::NrMapped }, 1);
        }
        let h = self.head_of(page);
        self.track_mm(h, mm, 1);
    }

    /// `folio_add_anon_rmap_pmd` (fork's copy_huge_pmd).
    pub fn add_rmap_pmd(&mut self, head: Pfn, mm: MmId) {
        let e = self.mem.pages[head.idx()].entire_mapcount;
        if e == 0 {
            self.mod_lruvec_item(head, VmItem::NrAnonThps, 1);
            let newly = (0..self.geo.hpage_pmd_nr() as u32)
                .filter(|i| self.mem.pages[(head.0 + i) as usize].mapcount == 0)
                .count();
            self.mod_lruvec_item(head, VmItem::NrAnonPages, newly as i64);
        }
        self.mem.pages[head.idx()].entire_mapcount = e + 1;
        self.track_mm(head, mm, 1);
    }

    /// `folio_remove_rmap_pte`: a pte mapping `page` went away; queues a partially mapped
    /// anonymous THP for deferred split.
    pub fn remove_rmap_pte(&mut self, page: Pfn, mm: MmId) {
        self.remove_rmap_pte_batched(page, mm);
        let h = self.head_of(page);
        if self.mem.pages[page.idx()].test(pg::ANON) && self.mem.pages[h.idx()].test(pg::HEAD) {
            self.maybe_deferred_split(h);
        }
    }

    /// `folio_remove_rmap_pte` of one pte of a batch (`folio_remove_rmap_ptes`): the deferred
    /// split check is the caller's, once the batch is gone.
    pub(super) fn remove_rmap_pte_batched(&mut self, page: Pfn, mm: MmId) {
        self.mem.pages[page.idx()].mapcount -= 1;
        debug_assert!(self.mem.pages[page.idx()].mapcount >= 0);
        let h_of_page = self.head_of(page);
        let anon = self.mem.pages[page.idx()].test(pg::ANON);
        if !self.page_mapped(page) {
            self.mod_lruvec_item(h_of_page, if anon { VmItem::NrAnonPages } else { VmItem::NrMapped }, -1);
        }
        let h = self.head_of(page);
        self.track_mm(h, mm, -1);
    }

    /// `folio_remove_rmap_pmd`.
    pub fn remove_rmap_pmd(&mut self, head: Pfn, mm: MmId) {
        let e = self.mem.pages[head.idx()].entire_mapcount - 1;
        self.mem.pages[head.idx()].entire_mapcount = e;
        if e == 0 {
            self.mod_lruvec_item(head, VmItem::NrAnonThps, -1);
            let gone = (0..self.geo.hpage_pmd_nr() as u32)
                .filter(|i| self.mem.pages[(head.0 + i) as usize].mapcount == 0)
                .count();
            self.mod_lruvec_item(head, VmItem::NrAnonPages, -(gone as i64));
        }
        self.track_mm(head, mm, -1);
        self.maybe_deferred_split(head);
    }

    /// `mem_cgroup_charge` of a new anonymous folio to `mm`'s memcg (`folio_prealloc`,
    /// GFP_KERNEL): false, and the folio freed, when the charge fails (VM_FAULT_OOM).
    pub(super) fn charge_new_anon(&mut self, head: Pfn, mm: MmId) -> bool {
        let memcg = self.mm(mm).memcg;
        if self.mem_cgroup_charge(head, memcg, gfp::KERNEL).is_ok() {
            return true;
        }
        self.mem.pages[head.idx()].refcount = 1;
        self.folio_put(head);
        false
    }

    /// Total mappings of a folio (folio_mapcount).
    pub fn folio_mapcount(&self, head: Pfn) -> i64 {
        let n = self.folio_nr_pages(head);
        let mut c = self.mem.pages[head.idx()].entire_mapcount as i64;
        for i in 0..n as u32 {
            c += self.mem.pages[(head.0 + i) as usize].mapcount as i64;
        }
        c
    }

    /// rss counter a page is accounted under (mm_counter).
    pub fn mm_counter(&self, page: Pfn) -> MmCounter {
        if self.mem.pages[page.idx()].test(pg::SHMEM | pg::TEXT_COPY) {
            MmCounter::ShmemPages
        } else if self.mem.pages[page.idx()].test(pg::ANON) {
            MmCounter::AnonPages
        } else {
            MmCounter::FilePages
        }
    }

    /// Queue a TLB flush of [start, end) of `mm` (flush_tlb_range).
    pub fn flush_tlb_range(&mut self, mm: MmId, start: u64, end: u64) {
        let pages = (end - start) >> self.geo.page_shift;
        crate::tracepoints::raise(&mut self.tp, ev::TLB_FLUSH, || format!("pages:{pages} reason:local mm shootdown"));
        self.work.push(Work::Flush { mm, start, end });
    }

    /// Whether `pfn` is the 4 KiB zero page (is_zero_pfn).
    #[inline]
    pub fn is_zero_pfn(&self, pfn: Pfn) -> bool {
        pfn == self.zero_pfn
    }

    /// Data of a base page (None = all zero).
    pub fn page_content(&self, pfn: Pfn) -> Option<&content::PageContent> {
        self.mem.data[pfn.idx()].content()
    }

    /// Store `value` at offsets `start, start+stride, ...` below `end` of a base page (a user
    /// write), materialising an all-zero page on first write.
    pub fn write_page_content(&mut self, pfn: Pfn, start: usize, end: usize, stride: usize, value: u8) {
        if !matches!(self.mem.data[pfn.idx()], FrameData::Data(_)) {
            self.mem.set_data(pfn.idx(), FrameData::Data(content::PageContent::default()));
        }
        let FrameData::Data(c) = &mut self.mem.data[pfn.idx()] else { unreachable!() };
        let before = c.heap_bytes();
        c.write(start, end, stride, value, self.geo.page_size() as usize);
        let after = c.heap_bytes();
        self.mem.content_bytes = self.mem.content_bytes + after - before;
    }

    /// A store whose bytes are unknown (a replayed program's: a trace has addresses, not
    /// values) to a page that holds none yet: from now on it holds data (REPLAY_STORE_BYTE in
    /// every byte), so that swap writes it out as the kernel writes a real program's page,
    /// where before it went as a zero-filled page (`swpout_zero`, no I/O). A program that
    /// stores zeroes is the exception this misses. One load of the frame's slot when the page
    /// has data already.
    #[inline]
    pub fn mark_page_written(&mut self, pfn: Pfn) {
        let zero = match &self.mem.data[pfn.idx()] {
            FrameData::Zero => true,
            FrameData::Data(c) => c.is_zero(),
            _ => false,
        };
        if zero && pfn != self.zero_pfn {
            let ps = self.geo.page_size() as usize;
            self.write_page_content(pfn, 0, ps, 1, REPLAY_STORE_BYTE);
        }
    }

    /// Copy the data of one base page to another (copy_user_highpage).
    pub fn copy_page(&mut self, dst: Pfn, src: Pfn) {
        if self.sabotage.skip_cow_copy {
            return;
        }
        self.stat.count(VmEvent::PgCopy);
        self.work.push(Work::Copy { dst, src });
        let d = match &self.mem.data[src.idx()] {
            FrameData::Data(c) if !c.is_zero() => FrameData::Data(c.clone()),
            _ => FrameData::Zero,
        };
        self.mem.set_data(dst.idx(), d);
    }

    /// True when no frame is referenced except the reserved ones (the end-of-run state).
    pub fn all_free(&self) -> bool {
        let scrubbing = self.mem.scrubbing.map_or(0, |(_, o)| 1u64 << o);
        // Files outlive their processes: their page cache stays.
        let cache = self.stat.items[VmItem::NrFilePages] as u64;
        self.mem.free_pages
            + scrubbing
            + self.mem.reserved
            + self.huge_zero_pages()
            + self.hugetlb_pool_pages()
            + cache
            + self.kernel_pages
            == self.mem.nr_pages()
    }

    /// Frames held by the huge zero folio (0 or 512).
    pub fn huge_zero_pages(&self) -> u64 {
        if self.huge_zero.pfn.is_some() {
            self.geo.hpage_pmd_nr()
        } else {
            0
        }
    }
}

/// Sentinel for "no frame" in u32 frame fields.
pub const NO_PFN: u32 = NIL;

/// Bases of the fault locks' lines (`Kernel::fault_lock_line`, `Kernel::ptl_line`).
const FAULT_MM_LINE: u64 = 1 << 61;
const FAULT_VMA_LINE: u64 = 1 << 62;
const FAULT_PTL_LINE: u64 = 3 << 61;

/// `Work::Clear` without a subpage to clear last: in address order.
pub const NO_TARGET: u32 = u32::MAX;

/// The `k`th subpage `process_huge_page` (mm/memory.c) clears of a folio of `nr` subpages
/// whose fault is in subpage `n`: the far side first, then pairs closing in on `n`, so that
/// `n` and its neighbours are cleared last and stay in the caches (nr = 8, n = 2: 7, 6, 5, 4,
/// 0, 3, 1, 2; n = 6: 0, 1, 2, 3, 4, 7, 5, 6).
pub fn process_huge_page_nth(nr: u64, n: u64, k: u64) -> u64 {
    if 2 * n <= nr {
        let far = nr - 2 * n;
        if k < far {
            return nr - 1 - k;
        }
        let j = k - far;
        let i = j / 2;
        if j.is_multiple_of(2) {
            i
        } else {
            2 * n - 1 - i
        }
    } else {
        let l = nr - n;
        let base = nr - 2 * l;
        if k < base {
            return k;
        }
        let j = k - base;
        let i = j / 2;
        if j.is_multiple_of(2) {
            base + i
        } else {
            base + 2 * l - 1 - i
        }
    }
}
