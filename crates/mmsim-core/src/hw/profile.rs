//! Hardware profiles: a machine's TLBs, page-walk caches, caches, memory and cycle costs, read
//! from a TOML file (`profiles/NAME.toml`). Every parameter can be overridden per run by its
//! path (`--set hw.cache.llc.size=8M`); `flatten` lists every path with its value.

use serde::Deserialize;

use crate::error::Error;
use crate::units::Size;

/// A set-associative array (TLB level or page-walk cache).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ArraySpec {
    pub entries: usize,
    pub ways: usize,
    pub replacement: String,
}

/// A cache level.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheLevel {
    pub size: Size,
    pub ways: usize,
    /// Load-to-use latency of a hit at this level, cycles.
    pub latency: f64,
    pub replacement: String,
}

/// The core.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    pub freq_ghz: f64,
    /// Cycles per instruction when every access hits the L1 and the L1 TLB.
    pub base_cpi: f64,
    /// Loads the core can issue per cycle (its load ports): a load-heavy loop runs no faster.
    pub loads_per_cycle: f64,
    /// Stores the core can issue per cycle.
    pub stores_per_cycle: f64,
    /// Reorder-buffer entries: how far past a load still waiting for its translation the
    /// core keeps executing independent work (0: an in-order core, no run-ahead).
    pub rob: u32,
    /// Hardware threads per core (SMT): the machine's CPUs are `cpus / smt` cores, CPU c
    /// and c + cores being siblings (Linux's numbering on x86).
    pub smt: u32,
    /// Instruction throughput of a core running all its threads, relative to one thread
    /// alone: while a sibling is busy, each thread executes at smt_throughput / smt speed.
    pub smt_throughput: f64,
    /// Instructions (fused uops) the front end issues to the back end per cycle, in groups of
    /// this many (the allocation width); 0: not given.
    #[serde(default)]
    pub issue_width: f64,
    /// What perf's generic `stalled-cycles-frontend` counts on this CPU: `fetch`, the cycles
    /// the front end waited for instructions (mmsim's own); `no-issue`, the cycles in which
    /// no uop was issued whatever the cause (Linux maps the event to UOPS_ISSUED.STALLED_CYCLES
    /// on Nehalem and Westmere, UOPS_ISSUED.ANY with cmask 1 and inv on Sandy and Ivy Bridge).
    #[serde(default)]
    pub frontend_event: FrontendEvent,
}

/// `cpu.frontend_event`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FrontendEvent {
    #[default]
    Fetch,
    NoIssue,
}

impl CpuSpec {
    /// perf's `stalled-cycles-frontend` of a run of `cycles` cycles, `instructions`
    /// instructions and `fetch` cycles of front-end waiting: `fetch`, or with `no-issue` the
    /// cycles the issue stage was idle: the instructions issue `issue_width` at a time, in
    /// full groups, and every other cycle issues nothing (a fetch stall, a full back end, or
    /// a throughput-bound loop's idle cycles between groups).
    pub fn stalled_frontend(&self, cycles: f64, instructions: f64, fetch: f64) -> f64 {
        match self.frontend_event {
            FrontendEvent::NoIssue if self.issue_width > 0.0 => (cycles - instructions / self.issue_width).max(fetch),
            _ => fetch,
        }
    }
}

/// TLBs and page-walk caches of one CPU.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlbSpec {
    /// Entries are tagged with the address space (PCID): no flush on a context switch.
    pub pcid: bool,
    pub itlb_4k: ArraySpec,
    pub itlb_2m: ArraySpec,
    pub dtlb_4k: ArraySpec,
    pub dtlb_2m: ArraySpec,
    pub dtlb_1g: ArraySpec,
    /// The unified second-level TLB.
    pub stlb: ArraySpec,
    /// Whether the STLB also holds 2 MiB translations.
    pub stlb_2m: bool,
    /// Extra cycles of an L1 TLB miss that hits the STLB.
    pub stlb_latency: f64,
    /// Paging-structure caches: PML4 entries, PDPT entries, PDE entries.
    pub pwc_pml4: ArraySpec,
    pub pwc_pdpt: ArraySpec,
    pub pwc_pde: ArraySpec,
    /// Fixed cycles of a page walk beyond its memory accesses.
    pub walk_overhead: f64,
    /// Page walks the page-miss handler(s) can have in flight at once.
    pub page_walkers: u32,
}

/// Caches.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    pub line: u64,
    pub l1d: CacheLevel,
    pub l1i: CacheLevel,
    pub l2: CacheLevel,
    /// Shared by all CPUs.
    pub llc: CacheLevel,
    /// Next-line stream prefetcher into the L2 (0 = off): lines fetched ahead of a detected
    /// ascending stream within a 4 KiB page.
    pub prefetch_degree: u32,
    /// Ascending streams the prefetcher tracks at once (0 = none).
    pub prefetch_streams: usize,
}

/// DRAM.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// The base page size (PAGE_SIZE: "4K" on x86-64 and i386, "16K" on seed 002's ia64): it
    /// sets the page-table geometry (`crate::units::Geometry`).
    pub page_size: Size,
    /// Load-to-use latency of a miss in every cache, cycles.
    pub latency: f64,
    /// Misses a core keeps in flight for an independent stream (line fill buffers).
    pub mlp: f64,
    /// Line fills a streaming kernel loop (clear_page, copy_page) keeps in flight on cold
    /// lines, the L2 streamer's included: it bounds their rate at `stream_mlp` lines per
    /// `latency`.
    pub stream_mlp: f64,
    /// Bytes per nanosecond (GB/s) one node's memory delivers: the bound of a non-temporal
    /// clear (`vm/scrub_engine=cpu_nt`).
    pub bandwidth: f64,
    /// GB/s of a block-zeroing DMA engine (`vm/scrub_engine=offload`, seed 002's SGI BTE);
    /// 0: the machine has none.
    pub offload_bandwidth: f64,
    /// Smallest block, in bytes, the zeroing engine takes (smaller ones are zeroed by the CPU).
    pub offload_min: u64,
}

/// The block device files live on (ext4's), and swap files and partitions: what a request
/// costs.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BlockSpec {
    /// Nanoseconds from submitting a read to its completion, before the data's transfer.
    pub read_latency_ns: f64,
    /// Bytes per nanosecond (GB/s) the device reads at.
    pub read_bandwidth: f64,
    /// Nanoseconds from submitting a write to its completion, before the data's transfer.
    pub write_latency_ns: f64,
    /// Bytes per nanosecond (GB/s) the device writes at.
    pub write_bandwidth: f64,
    /// The queue's `rotational` flag: a disk that seeks. Its requests are served one at a
    /// time, each paying its latency; a non-rotational device overlaps the latencies of the
    /// requests in flight and only their transfers take turns. Linux treats swap on a
    /// rotational device differently (no per-CPU swap clusters, readahead by swap slot).
    pub rotational: bool,
}

/// Software costs: instructions of the workload's loops and the kernel's paths.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Instructions per access of a `read`/`write` loop (load or store, add, compare, branch).
    pub access_instructions: f64,
    /// Instructions per operation of the `atomic` op (the locked instruction and its loop).
    pub atomic_instructions: f64,
    /// Average bytes per instruction of straight-line code (a `fetch` of `stride` bytes, at
    /// most a line, executes stride / instruction_bytes instructions).
    pub instruction_bytes: f64,
    /// Instructions per byte compared by memcmp.
    pub memcmp_instructions_per_byte: f64,
    /// Bytes each memcmp load reads from one side (32 for AVX2 code).
    pub memcmp_load_bytes: u64,
    /// Cycles of a page fault's entry and exit (exception, pt_regs, iret), excluding the
    /// handler's work.
    pub fault_entry_exit: f64,
    /// Cycles of handle_mm_fault's own logic (vma lookup, locking, table walk in software),
    /// charged to the handler that resolved the fault (do_anonymous_page, do_wp_page, ...).
    pub fault_handler: f64,
    /// Bytes per cycle that clear_page stores (temporal stores: lines go through the caches).
    pub clear_bytes_per_cycle: f64,
    /// clear_page uses non-temporal stores (the zeroed lines bypass the caches).
    pub clear_nontemporal: bool,
    /// clear_page's temporal stores read each line they do not hold first (a read for
    /// ownership); false where the CPU's string stores write whole lines without one.
    pub clear_rfo: bool,
    /// Bytes from which one clear call (`rep stos` of a whole block: seed 002's clear_page
    /// with an order) runs as streaming stores that neither read nor keep the lines (Zen's
    /// elision of cache-line allocation for extents larger than the L3); 0: never.
    pub clear_streaming_min: u64,
    /// Bytes per cycle copy_page moves.
    pub copy_bytes_per_cycle: f64,
    /// Cycles of a local TLB flush of one address (invlpg).
    pub tlb_flush_one: f64,
    /// Cycles of a full local TLB flush.
    pub tlb_flush_all: f64,
    /// Cycles of a system call's entry and exit.
    pub syscall: f64,
    /// Cycles reclaim spends per page it isolates from an LRU list and looks at
    /// (`isolate_lru_folios`, `folio_referenced`'s rmap walk, the list moves).
    pub reclaim_scan: f64,
    /// Cycles per page reclaim writes to swap (`folio_alloc_swap`, `try_to_unmap`, the bio),
    /// its TLB flush and the device's time apart.
    pub reclaim_pageout: f64,
}

/// Costs of sharing between CPUs.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SmpSpec {
    /// Cycles to move a modified cache line from another CPU: the value of each distance below
    /// that the profile does not give.
    pub line_transfer: f64,
    /// Cycles to move a modified line from the private caches of an SMT sibling (the same
    /// core's other hardware thread), of another core of the same socket (NUMA node), and of a
    /// core of another socket: core-to-core latencies (`Machine::c2c`).
    #[serde(default)]
    pub c2c_smt: Option<f64>,
    #[serde(default)]
    pub c2c_socket: Option<f64>,
    #[serde(default)]
    pub c2c_remote: Option<f64>,
    /// Cycles to send a TLB-shootdown IPI and wait for one acknowledgement.
    pub shootdown_ipi: f64,
    /// Cycles of an uncontended atomic read-modify-write on a line this CPU owns.
    pub atomic: f64,
    /// Cycles zone->lock is held per page that rmqueue_bulk / free_pcppages_bulk moves.
    pub zone_lock_page: f64,
    /// Cycles a page fault holds its page-table lock (the pte update, rmap and counters).
    pub fault_lock_hold: f64,
    /// NUMA nodes: each has its own zone and so its own zone->lock, which the CPUs of the
    /// node (CPUs split into equal consecutive blocks) take for their allocations.
    pub numa_nodes: u32,
}

/// The modelled kernel's accounted slab caches: each one's object size (`s->size`, as
/// /sys/kernel/slab/NAME/slab_size shows it), what a memory cgroup is charged per object
/// besides the 8-byte obj_ext pointer (kernel/slab.rs). A profile that leaves the table out
/// gets the default profile's sizes (Linux 6.18, x86-64).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SlabSpec {
    pub vm_area_struct: u32,
    pub buffer_head: u32,
    pub radix_tree_node: u32,
}

impl Default for SlabSpec {
    fn default() -> Self {
        let [vm_area_struct, buffer_head, radix_tree_node] = crate::kernel::slab::SlabSizes::default().0;
        SlabSpec { vm_area_struct, buffer_head, radix_tree_node }
    }
}

impl SlabSpec {
    /// The sizes by `KmemCache`.
    pub fn sizes(&self) -> crate::kernel::slab::SlabSizes {
        crate::kernel::slab::SlabSizes([self.vm_area_struct, self.buffer_head, self.radix_tree_node])
    }
}

/// A hardware profile.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub cpu: CpuSpec,
    pub tlb: TlbSpec,
    pub cache: CacheSpec,
    pub memory: MemorySpec,
    pub cost: CostSpec,
    pub smp: SmpSpec,
    pub block: BlockSpec,
    #[serde(default)]
    pub slab: SlabSpec,
}

impl Profile {
    /// The page geometry of `memory.page_size` (validated at load).
    pub fn geometry(&self) -> crate::units::Geometry {
        crate::units::Geometry::from_page_size(self.memory.page_size.0).expect("validated")
    }
}

/// The profiles shipped with mmsim (profiles/*.toml), embedded at build time.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../../../../profiles/default.toml")),
    ("westmere-ex", include_str!("../../../../profiles/westmere-ex.toml")),
    ("haswell-ep", include_str!("../../../../profiles/haswell-ep.toml")),
    ("piii-450", include_str!("../../../../profiles/piii-450.toml")),
    ("ia64-altix", include_str!("../../../../profiles/ia64-altix.toml")),
    ("opteron-2.2", include_str!("../../../../profiles/opteron-2.2.toml")),
    ("desktop-2018", include_str!("../../../../profiles/desktop-2018.toml")),
    ("zen4-epyc", include_str!("../../../../profiles/zen4-epyc.toml")),
    ("xeon-mp-2006", include_str!("../../../../profiles/xeon-mp-2006.toml")),
];

/// Replacement policy of an array or cache level whose file does not name one.
pub const DEFAULT_REPLACEMENT: &str = "lru";

/// Read profile text and fill in the parameters a file may leave out (`replacement` of every
/// TLB array and cache level), so that `profiles show` lists them and `--set` can change them.
fn read_toml(text: &str) -> Result<toml::Value, Error> {
    let mut v: toml::Value = toml::from_str(text).map_err(|e| Error::Profile(format!("profile: {}", e.message())))?;
    for section in ["tlb", "cache"] {
        if let Some(t) = v.get_mut(section).and_then(|s| s.as_table_mut()) {
            for (_, item) in t.iter_mut() {
                if let Some(arr) = item.as_table_mut() {
                    if arr.contains_key("ways") && !arr.contains_key("replacement") {
                        arr.insert("replacement".into(), toml::Value::String(DEFAULT_REPLACEMENT.into()));
                    }
                }
            }
        }
    }
    Ok(v)
}

/// Parse a profile from TOML text, applying `overrides` (PATH, VALUE) first.
pub fn parse(text: &str, overrides: &[(String, String)]) -> Result<Profile, Error> {
    let mut v = read_toml(text)?;
    for (path, value) in overrides {
        set_path(&mut v, path, value)?;
    }
    let p: Profile = serde_path_to_error::deserialize(v)
        .map_err(|e| Error::Profile(format!("profile: {}: {}", e.path(), e.inner())))?;
    validate(&p)?;
    Ok(p)
}

/// A built-in profile by name, with overrides.
pub fn builtin(name: &str, overrides: &[(String, String)]) -> Result<Profile, Error> {
    let text = BUILTIN
        .iter()
        .find(|b| b.0 == name)
        .map(|b| b.1)
        .ok_or_else(|| Error::Profile(format!("unknown profile {name:?} (known: {})", names().join(", "))))?;
    parse(text, overrides)
}

/// Names of the built-in profiles.
pub fn names() -> Vec<&'static str> {
    BUILTIN.iter().map(|b| b.0).collect()
}

/// Replace the value at a dotted `path` with `value` (parsed as the type already there).
fn set_path(root: &mut toml::Value, path: &str, value: &str) -> Result<(), Error> {
    let mut cur = root;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let table = cur
            .as_table_mut()
            .ok_or_else(|| Error::Profile(format!("hw.{path}: {} is not a table", parts[..i].join("."))))?;
        let known: Vec<String> = table.keys().cloned().collect();
        cur = table.get_mut(*part).ok_or_else(|| {
            Error::Profile(format!("hw.{path}: no parameter {part:?} here (known: {})", known.join(", ")))
        })?;
    }
    let new = match cur {
        toml::Value::Integer(_) => match crate::units::parse_size(value) {
            Ok(n) => toml::Value::Integer(n as i64),
            Err(_) => return Err(Error::Profile(format!("hw.{path}: expected an integer, got {value:?}"))),
        },
        toml::Value::Float(_) => toml::Value::Float(
            value.parse().map_err(|_| Error::Profile(format!("hw.{path}: expected a number, got {value:?}")))?,
        ),
        toml::Value::Boolean(_) => toml::Value::Boolean(match value {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => return Err(Error::Profile(format!("hw.{path}: expected true or false, got {value:?}"))),
        }),
        toml::Value::String(_) => toml::Value::String(value.to_string()),
        _ => return Err(Error::Profile(format!("hw.{path}: is a table, set one of its parameters"))),
    };
    *cur = new;
    Ok(())
}

/// Every (PATH, VALUE) of a profile, in file order.
pub fn flatten(text: &str) -> Result<Vec<(String, String)>, Error> {
    let v = read_toml(text)?;
    let mut out = Vec::new();
    fn walk(prefix: &str, v: &toml::Value, out: &mut Vec<(String, String)>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&p, v, out);
                }
            }
            toml::Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    walk("", &v, &mut out);
    Ok(out)
}

fn validate(p: &Profile) -> Result<(), Error> {
    let pos = |name: &str, v: f64| {
        if v > 0.0 && v.is_finite() {
            Ok(())
        } else {
            Err(Error::Profile(format!("profile: {name}: must be positive")))
        }
    };
    pos("cpu.freq_ghz", p.cpu.freq_ghz)?;
    if p.slab.radix_tree_node == 0 || p.slab.radix_tree_node > 1 << 20 {
        return Err(Error::Profile(
            "profile: slab.radix_tree_node: must be an object size from 1 byte to 1 MiB".into(),
        ));
    }
    pos("cpu.base_cpi", p.cpu.base_cpi)?;
    pos("cpu.loads_per_cycle", p.cpu.loads_per_cycle)?;
    pos("cpu.stores_per_cycle", p.cpu.stores_per_cycle)?;
    pos("memory.mlp", p.memory.mlp)?;
    pos("memory.stream_mlp", p.memory.stream_mlp)?;
    pos("memory.bandwidth", p.memory.bandwidth)?;
    if !(p.memory.offload_bandwidth >= 0.0 && p.memory.offload_bandwidth.is_finite()) {
        return Err(Error::Profile(
            "profile: memory.offload_bandwidth: must be 0 (no engine) or a positive number of GB/s".into(),
        ));
    }
    let at_least_one = |name: &str, v: u32| {
        if v >= 1 {
            Ok(())
        } else {
            Err(Error::Profile(format!("profile: {name}: must be at least 1")))
        }
    };
    for (name, v) in
        [("smp.c2c_smt", p.smp.c2c_smt), ("smp.c2c_socket", p.smp.c2c_socket), ("smp.c2c_remote", p.smp.c2c_remote)]
    {
        if let Some(v) = v {
            pos(name, v)?;
        }
    }
    if !(p.cpu.issue_width >= 0.0 && p.cpu.issue_width.is_finite()) {
        return Err(Error::Profile("profile: cpu.issue_width: must be 0 (not given) or a positive width".into()));
    }
    if p.cpu.frontend_event == FrontendEvent::NoIssue && p.cpu.issue_width == 0.0 {
        return Err(Error::Profile("profile: cpu.frontend_event: no-issue needs cpu.issue_width".into()));
    }
    at_least_one("cpu.smt", p.cpu.smt)?;
    at_least_one("smp.numa_nodes", p.smp.numa_nodes)?;
    at_least_one("tlb.page_walkers", p.tlb.page_walkers)?;
    if !(p.cpu.smt_throughput >= 1.0 && p.cpu.smt_throughput <= p.cpu.smt as f64) {
        return Err(Error::Profile("profile: cpu.smt_throughput: must be between 1 and cpu.smt".into()));
    }
    pos("cost.clear_bytes_per_cycle", p.cost.clear_bytes_per_cycle)?;
    pos("cost.copy_bytes_per_cycle", p.cost.copy_bytes_per_cycle)?;
    pos("cost.instruction_bytes", p.cost.instruction_bytes)?;
    let geo = crate::units::Geometry::from_page_size(p.memory.page_size.0)
        .map_err(|e| Error::Profile(format!("profile: memory.page_size: {e}")))?;
    if !p.cache.line.is_power_of_two() || p.cache.line < 16 || p.cache.line > geo.page_size() {
        return Err(Error::Profile("profile: cache.line: must be a power of two between 16 and the page size".into()));
    }
    let arrays = [
        ("tlb.itlb_4k", &p.tlb.itlb_4k),
        ("tlb.itlb_2m", &p.tlb.itlb_2m),
        ("tlb.dtlb_4k", &p.tlb.dtlb_4k),
        ("tlb.dtlb_2m", &p.tlb.dtlb_2m),
        ("tlb.dtlb_1g", &p.tlb.dtlb_1g),
        ("tlb.stlb", &p.tlb.stlb),
        ("tlb.pwc_pml4", &p.tlb.pwc_pml4),
        ("tlb.pwc_pdpt", &p.tlb.pwc_pdpt),
        ("tlb.pwc_pde", &p.tlb.pwc_pde),
    ];
    for (name, a) in arrays {
        super::assoc::SetAssoc::new(a.entries, a.ways, replacement(name, &a.replacement)?)
            .map_err(|e| Error::Profile(format!("profile: {name}: {e}")))?;
    }
    for (name, c) in [
        ("cache.l1d", &p.cache.l1d),
        ("cache.l1i", &p.cache.l1i),
        ("cache.l2", &p.cache.l2),
        ("cache.llc", &p.cache.llc),
    ] {
        let lines = c.size.0 / p.cache.line;
        if lines == 0 || c.size.0 % p.cache.line != 0 {
            return Err(Error::Profile(format!("profile: {name}.size: must be a positive multiple of the line size")));
        }
        super::assoc::SetAssoc::new(lines as usize, c.ways, replacement(name, &c.replacement)?)
            .map_err(|e| Error::Profile(format!("profile: {name}: {e}")))?;
    }
    Ok(())
}

/// Parse a replacement policy name for `field`.
pub fn replacement(field: &str, s: &str) -> Result<super::assoc::Replacement, Error> {
    super::assoc::Replacement::parse(s)
        .ok_or_else(|| Error::Profile(format!("profile: {field}.replacement: {s:?} is not one of lru, fifo, random")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_parse() {
        for name in names() {
            builtin(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn overrides_by_path() {
        let p = builtin(
            "default",
            &[
                ("cache.llc.size".into(), "8M".into()),
                ("tlb.dtlb_4k.entries".into(), "4".into()),
                ("tlb.dtlb_4k.ways".into(), "4".into()),
            ],
        )
        .unwrap();
        assert_eq!(p.cache.llc.size.0, 8 << 20);
        assert_eq!(p.tlb.dtlb_4k.entries, 4);
        let e = builtin("default", &[("cache.llc.bogus".into(), "1".into())]).unwrap_err().to_string();
        assert!(e.contains("hw.cache.llc.bogus") && e.contains("known"), "{e}");
        let e = builtin("default", &[("tlb.dtlb_4k.entries".into(), "x".into())]).unwrap_err().to_string();
        assert!(e.contains("expected an integer"), "{e}");
        let e = builtin("default", &[("tlb.dtlb_4k.entries".into(), "3".into())]).unwrap_err().to_string();
        assert!(e.contains("tlb.dtlb_4k"), "{e}");
        let e = builtin("default", &[("tlb.page_walkers".into(), "0".into())]).unwrap_err().to_string();
        assert!(e.contains("tlb.page_walkers"), "{e}");
        let e = builtin("default", &[("cpu.rob".into(), "-1".into())]).unwrap_err().to_string();
        assert!(e.contains("cpu.rob"), "{e}");
        assert_eq!(builtin("default", &[("cpu.rob".into(), "0".into())]).unwrap().cpu.rob, 0, "in order");
    }

    #[test]
    fn flatten_lists_every_path() {
        let f = flatten(BUILTIN[0].1).unwrap();
        assert!(f.iter().any(|(p, _)| p == "cache.llc.size"));
        assert!(f.iter().any(|(p, _)| p == "tlb.stlb.entries"));
        assert!(f.iter().any(|(p, v)| p == "cache.l1d.replacement" && v == "lru"), "defaults are listed");
    }

    #[test]
    fn replacement_policies_can_be_set_per_structure() {
        let p = builtin(
            "default",
            &[("cache.l1d.replacement".into(), "fifo".into()), ("tlb.stlb.replacement".into(), "random".into())],
        )
        .unwrap();
        assert_eq!((p.cache.l1d.replacement.as_str(), p.tlb.stlb.replacement.as_str()), ("fifo", "random"));
        let e = builtin("default", &[("cache.llc.replacement".into(), "plru".into())]).unwrap_err().to_string();
        assert!(e.contains("cache.llc.replacement") && e.contains("lru, fifo, random"), "{e}");
    }
}
