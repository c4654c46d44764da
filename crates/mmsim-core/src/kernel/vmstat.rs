//! `/proc/vmstat`: event counters and state items, each declared exactly once (mirrors
//! include/linux/vm_event_item.h and mmzone.h's node_stat_item; mm/vmstat.c prints them).

use serde::Serialize;

macro_rules! declare_counters {
    ($(#[$m:meta])* $enum:ident, $array:ident, $names:ident; $($variant:ident => $name:literal),* $(,)?) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum $enum { $($variant),* }
        /// The `/proc/vmstat` name of each counter, in declaration order.
        pub const $names: &[&str] = &[$($name),*];
        impl $enum {
            pub const COUNT: usize = $names.len();
            pub fn name(self) -> &'static str { $names[self as usize] }
        }
        /// One value per counter.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $array(pub [i64; $names.len()]);
        impl Default for $array { fn default() -> Self { Self([0; $names.len()]) } }
        impl std::ops::Index<$enum> for $array {
            type Output = i64;
            fn index(&self, i: $enum) -> &i64 { &self.0[i as usize] }
        }
        impl std::ops::IndexMut<$enum> for $array {
            fn index_mut(&mut self, i: $enum) -> &mut i64 { &mut self.0[i as usize] }
        }
    };
}

declare_counters! {
    /// Monotonic events (`count_vm_event`).
    VmEvent, VmEvents, VM_EVENT_NAMES;
    PgFault => "pgfault",
    PgMajFault => "pgmajfault",
    PgAlloc => "pgalloc_normal",
    PgFree => "pgfree",
    // MADV_FREE: pages made lazyfree (lru_lazyfree), and lazyfree pages reclaim discarded.
    PgLazyFree => "pglazyfree",
    PgLazyFreed => "pglazyfreed",
    ThpFaultAlloc => "thp_fault_alloc",
    ThpFaultFallback => "thp_fault_fallback",
    ThpFaultFallbackCharge => "thp_fault_fallback_charge",
    ThpSplitPmd => "thp_split_pmd",
    ThpSplitPage => "thp_split_page",
    ThpDeferredSplitPage => "thp_deferred_split_page",
    ThpZeroPageAlloc => "thp_zero_page_alloc",
    ThpZeroPageAllocFailed => "thp_zero_page_alloc_failed",
    ThpFileAlloc => "thp_file_alloc",
    ThpFileFallback => "thp_file_fallback",
    ThpFileMapped => "thp_file_mapped",
    ThpCollapseAlloc => "thp_collapse_alloc",
    ThpCollapseAllocFailed => "thp_collapse_alloc_failed",
    ThpScanExceedNonePte => "thp_scan_exceed_none_pte",
    ThpScanExceedSwapPte => "thp_scan_exceed_swap_pte",
    // KiB read from (written to) block devices (submit_bio's count_vm_events).
    PgpgIn => "pgpgin",
    PgpgOut => "pgpgout",
    UnevictablePgMlocked => "unevictable_pgs_mlocked",
    UnevictablePgMunlocked => "unevictable_pgs_munlocked",
    // Direct reclaim passes (do_try_to_free_pages' retry label), by the allocation's zone:
    // kernel allocations (page tables) are ZONE_NORMAL's, user memory ZONE_MOVABLE's.
    AllocStallNormal => "allocstall_normal",
    AllocStallMovable => "allocstall_movable",
    OomKill => "oom_kill",
    // The LRU (mm/swap.c, mm/vmscan.c).
    PgActivate => "pgactivate",
    PgDeactivate => "pgdeactivate",
    PgRotated => "pgrotated",
    PgRefill => "pgrefill",
    PgscanKswapd => "pgscan_kswapd",
    PgscanDirect => "pgscan_direct",
    PgscanKhugepaged => "pgscan_khugepaged",
    PgscanProactive => "pgscan_proactive",
    PgstealKswapd => "pgsteal_kswapd",
    PgstealDirect => "pgsteal_direct",
    PgstealKhugepaged => "pgsteal_khugepaged",
    PgstealProactive => "pgsteal_proactive",
    PgscanAnon => "pgscan_anon",
    PgscanFile => "pgscan_file",
    PgstealAnon => "pgsteal_anon",
    PgstealFile => "pgsteal_file",
    PgscanDirectThrottle => "pgscan_direct_throttle",
    PageOutRun => "pageoutrun",
    KswapdLowWmarkHitQuickly => "kswapd_low_wmark_hit_quickly",
    KswapdHighWmarkHitQuickly => "kswapd_high_wmark_hit_quickly",
    UnevictablePgsCulled => "unevictable_pgs_culled",
    UnevictablePgsRescued => "unevictable_pgs_rescued",
    UnevictablePgsCleared => "unevictable_pgs_cleared",
    // Swap (mm/page_io.c, mm/swap_state.c).
    Pswpin => "pswpin",
    Pswpout => "pswpout",
    SwapRa => "swap_ra",
    SwapRaHit => "swap_ra_hit",
    SwpinZero => "swpin_zero",
    SwpoutZero => "swpout_zero",
    ThpSwpout => "thp_swpout",
    ThpSwpoutFallback => "thp_swpout_fallback",
    TlbFlushAll => "nr_tlb_local_flush_all",
    TlbFlushOne => "nr_tlb_local_flush_one",
    // mmsim's own diagnostics (no /proc/vmstat counterpart), prefixed so they cannot be
    // mistaken for Linux's.
    PgZeroed => "mmsim_pgalloc_prezeroed",
    PgZeroMiss => "mmsim_pgalloc_zero_miss",
    PgZeroedWasted => "mmsim_pgalloc_zeroed_wasted",
    PgClear => "mmsim_pgclear",
    PgZeroAlloc => "mmsim_pgzero_alloc",
    PgZeroUser => "mmsim_pgzero_user",
    PgZeroInitOnAlloc => "mmsim_pgzero_init_on_alloc",
    PgZeroInitOnFree => "mmsim_pgzero_init_on_free",
    PgZeroKscrubd => "mmsim_pgzero_kscrubd",
    KscrubdWake => "mmsim_kscrubd_wake",
    KscrubdLoadSkip => "mmsim_kscrubd_load_skip",
    PgCopy => "mmsim_pgcopy",
    CowFault => "mmsim_cow_copy",
    ReuseFault => "mmsim_cow_reuse",
    FaultAroundPages => "mmsim_fault_around_pages",
    AllocFailInjected => "mmsim_fail_page_alloc_injected",
    PtShare => "mmsim_pt_share",
    PtUnshare => "mmsim_pt_unshare",
}

declare_counters! {
    /// State items (`mod_node_page_state`), in pages unless the name says otherwise; THP items
    /// (`*_transparent_hugepages`, `*_hugepages`, `*_pmdmapped`) count PMD folios, as
    /// /proc/vmstat prints them (vmstat_item_print_in_thp).
    VmItem, VmItems, VM_ITEM_NAMES;
    NrFreePages => "nr_free_pages",
    NrZeroedFreePages => "mmsim_nr_zeroed_free_pages",
    // The LRU lists (NR_LRU_BASE + lru) and the folios isolated from them.
    NrInactiveAnon => "nr_inactive_anon",
    NrActiveAnon => "nr_active_anon",
    NrInactiveFile => "nr_inactive_file",
    NrActiveFile => "nr_active_file",
    NrUnevictable => "nr_unevictable",
    NrIsolatedAnon => "nr_isolated_anon",
    NrIsolatedFile => "nr_isolated_file",
    // mm/workingset.c (node_stat_item: cumulative, but kept with the items as Linux does).
    WorkingsetNodes => "workingset_nodes",
    WorkingsetRefaultAnon => "workingset_refault_anon",
    WorkingsetRefaultFile => "workingset_refault_file",
    WorkingsetActivateAnon => "workingset_activate_anon",
    WorkingsetActivateFile => "workingset_activate_file",
    WorkingsetRestoreAnon => "workingset_restore_anon",
    WorkingsetRestoreFile => "workingset_restore_file",
    WorkingsetNodereclaim => "workingset_nodereclaim",
    NrAnonPages => "nr_anon_pages",
    NrAnonThps => "nr_anon_transparent_hugepages",
    NrShmem => "nr_shmem",
    NrFilePages => "nr_file_pages",
    NrMapped => "nr_mapped",
    NrDirty => "nr_dirty",
    NrWriteback => "nr_writeback",
    NrFileThps => "nr_file_hugepages",
    NrShmemThps => "nr_shmem_hugepages",
    NrFilePmdmapped => "nr_file_pmdmapped",
    NrShmemPmdmapped => "nr_shmem_pmdmapped",
    NrMlock => "nr_mlock",
    NrHugetlb => "nr_hugetlb",
    // Kernel stacks, in kB (NR_KERNEL_STACK_KB).
    NrKernelStack => "nr_kernel_stack",
    NrPageTablePages => "nr_page_table_pages",
    NrSwapcached => "nr_swapcached",
    NrVmscanWrite => "nr_vmscan_write",
    NrVmscanImmediateReclaim => "nr_vmscan_immediate_reclaim",
    NrDeferredSplit => "mmsim_nr_deferred_split",
}

/// Both halves of `/proc/vmstat`, as the kernel keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmStat {
    pub events: VmEvents,
    pub items: VmItems,
}

impl VmStat {
    /// `count_vm_event`.
    #[inline]
    pub fn count(&mut self, e: VmEvent) {
        self.events[e] += 1;
    }
    /// `count_vm_events`.
    #[inline]
    pub fn count_n(&mut self, e: VmEvent, n: i64) {
        self.events[e] += n;
    }
    /// `mod_node_page_state`.
    #[inline]
    pub fn mod_item(&mut self, i: VmItem, delta: i64) {
        self.items[i] += delta;
    }
    /// Name/value pairs in `/proc/vmstat` order (items first, as the kernel prints them).
    pub fn entries(&self) -> Vec<(&'static str, i64)> {
        let mut v: Vec<(&'static str, i64)> = VM_ITEM_NAMES.iter().copied().zip(self.items.0.iter().copied()).collect();
        v.extend(VM_EVENT_NAMES.iter().copied().zip(self.events.0.iter().copied()));
        v
    }
}

/// A name -> value map as the report prints it (ordered as declared).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Named(pub Vec<(String, i64)>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut all: Vec<&str> = VM_EVENT_NAMES.to_vec();
        all.extend(VM_ITEM_NAMES);
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        assert_eq!(VmEvent::ThpSplitPmd.name(), "thp_split_pmd");
    }
}
