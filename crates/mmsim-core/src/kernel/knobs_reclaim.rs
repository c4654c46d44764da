//! Reclaim's and swap's tunables (mm/vmscan.c's `vm_swappiness`, mm/swap.c's `page_cluster`,
//! mm/page_alloc.c's watermark sysctls, mm/swap_state.c's `vma_ra_enabled`) and mmsim's choice
//! of cgroup hierarchy for the memory controller. `Knobs` holds them as its `reclaim` group.

use serde::Serialize;

use super::knobs::{declare_knobs, range, sysfs_enum, Codec, Knobs, BOOL};

declare_knobs! {
    /// The reclaim and swap tunables.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct ReclaimKnobs in Knobs.reclaim, table RECLAIM_TABLE;

    /// `vm/swappiness` (vm_swappiness): reclaim's balance of anonymous against file memory.
    swappiness: u32 = 60 => {
        name: "vm/swappiness",
        boot_only: false,
        codec: range!(0, 200, "an integer 0..200"),
        help: "how much reclaim prefers swapping anonymous memory to dropping page cache (0..200)",
    },
    /// `vm/page-cluster`: swap readahead reads up to 2^page-cluster pages.
    page_cluster: u32 = 3 => {
        name: "vm/page-cluster",
        boot_only: false,
        codec: range!(0, 31, "an integer 0..31"),
        help: "log2 of the most pages a swap fault reads ahead (0: none)",
    },
    /// `vm/min_free_kbytes`: None until written (the boot value is calculated, and THP raises
    /// it; `init_per_zone_wmark_min`).
    min_free_kbytes: Option<u64> = None => {
        name: "vm/min_free_kbytes",
        boot_only: false,
        codec: Codec {
            values: "auto|K",
            parse: |v| match v {
                "auto" => Ok(None),
                _ => v.parse::<u64>().ok().filter(|&k| k <= 1 << 40).map(Some).ok_or("auto or a number of kB"),
            },
            show: |v| v.map_or("auto".to_string(), |k| k.to_string()),
        },
        help: "the min watermark in kB (auto: 4 x sqrt(memory in kB), raised by THP as Linux does)",
    },
    /// `vm/watermark_scale_factor`: the gap between the watermarks, in 1/10000 of memory.
    watermark_scale_factor: u32 = 10 => {
        name: "vm/watermark_scale_factor",
        boot_only: false,
        codec: range!(1, 3000, "an integer 1..3000"),
        help: "the step from min to low to high watermark, in ten-thousandths of memory",
    },
    /// `/sys/kernel/mm/swap/vma_ra_enabled`: swap readahead by virtual address (else by slot).
    swap_vma_ra: bool = true => {
        name: "swap/vma_ra_enabled",
        boot_only: false,
        codec: BOOL,
        help: "swap readahead around the faulting address (1) or around the swap slot (0)",
    },
    /// mmsim's name for the cgroup hierarchy the memory controller is on: v2 (memory.swap.*,
    /// memory.high/low/min) or v1 (memory.memsw.*, failcnt, per-cgroup swappiness).
    cgroup_memory: CgroupMemory = CgroupMemory::V2 => {
        name: "cgroup/memory",
        boot_only: true,
        codec: CgroupMemory::CODEC,
        help: "the memory controller's hierarchy: v2 (the default), or v1 as older distributions mount it",
    },
}

sysfs_enum! {
    /// `cgroup/memory` (mmsim's name): which cgroup hierarchy the memory controller is on.
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum CgroupMemory {
        /// cgroup v2: swap is its own counter (memory.swap.max), charged when a slot is taken.
        V2 => "v2",
        /// cgroup v1: memory+swap is one counter (memory.memsw.limit_in_bytes = memory.max +
        /// memory.swap.max), swap charged when a folio leaves the swap cache; no
        /// memory.high/low/min.
        V1 => "v1",
    }
}
