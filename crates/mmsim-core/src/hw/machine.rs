//! The machine: CPUs with their TLBs and private caches, a shared LLC, the hardware page
//! walker, and the cycle cost model. The workload interpreter sends every memory access
//! here; the kernel's work log (zeroing, copying, TLB flushes) is charged here.

use crate::fasthash::FastMap;

use super::assoc::{Replacement, SetAssoc};
use super::perf::PerfCounters;
use super::prefetch::StreamTrackers;
use super::profile::{replacement, CacheLevel, Profile};
use super::shared::{Channel, SharedLine};
use super::tlb::{PageSize, Tlb, TlbHit};
use crate::kernel::fault::Access;
use crate::kernel::knobs::ScrubEngine;
use crate::kernel::page_alloc::ClearPath;
use crate::kernel::pgtable::{self, Entry};
use crate::kernel::vmstat::VmEvent;
use crate::kernel::{AtomicKind, Kernel, MmId, Work};
use crate::units::{Geometry, Pfn};

mod clocks;
mod run;
mod work;

pub use clocks::Clocks;

/// Hardware prefetchers do not cross a 4 KiB physical boundary, whatever the OS page size
/// (the L2 streamer of Intel's optimization manual; a 4 KiB page is the unit they assume).
const PREFETCH_BOUNDARY: u64 = 4096;

/// Above this many pages a range flush becomes a full flush (tlb_single_page_flush_ceiling).
pub const TLB_SINGLE_PAGE_FLUSH_CEILING: u64 = 33;

/// The physical "line" of node 0's zone spinlock (outside RAM: a kernel variable); node N's
/// is the line N after it.
pub const ZONE_LOCK_LINE: u64 = (1 << 60) + 1;

/// The level an access was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    L1,
    L2,
    Llc,
    Mem,
}

/// One CPU.
#[derive(Clone, Debug)]
pub struct Cpu {
    pub tlb: Tlb,
    pub l1d: SetAssoc,
    pub l1i: SetAssoc,
    pub l2: SetAssoc,
    /// Cycles this CPU spent running tasks and kernel threads (its clock less idle time).
    pub busy: f64,
    /// The running task's time is `time_base + perf.cycles` (set by the scheduler at each
    /// slice), so work inside a slice knows when it happens (to book memory bandwidth).
    pub time_base: f64,
    /// The address space whose translations are live (CR3).
    pub cur_asid: Option<u32>,
    /// The L2 streamer's trackers (`cache.prefetch_streams` of them).
    streams: StreamTrackers,
    /// Cycles until every translation the core has run ahead of (STLB lookups and page
    /// walks of independent loads and stores still in the reorder window) is complete.
    walk_debt: f64,
    /// The task whose accesses `walk_debt` belongs to.
    pub walk_task: Option<usize>,
    /// How much longer this CPU's execution takes than on a core of its own: smt /
    /// smt_throughput while its SMT sibling is busy, else 1 (set by the scheduler).
    pub smt_slowdown: f64,
    /// The NUMA node it is on (`Machine::numa_node`, computed once).
    node: usize,
}

/// A cache of the profile's level `c`, whose keys (physical line numbers) are below `lines`.
fn cache(name: &str, c: &CacheLevel, line: u64, lines: u64) -> SetAssoc {
    SetAssoc::new((c.size.0 / line) as usize, c.ways, replacement(name, &c.replacement).expect("validated"))
        .expect("validated")
        .with_key_bound(lines)
}

/// The hardware.
pub struct Machine {
    /// The page geometry of the profile (`memory.page_size`).
    pub geo: Geometry,
    /// The hardware profile (fixed once the machine is built: `Machine::new` derives the
    /// constants of the access path from it).
    pub p: Profile,
    pub cpus: Vec<Cpu>,
    /// Each CPU's core and NUMA node (`cpu % cores`, `cpu_to_node`): `coherence::distance_in`
    /// by table, without a division on the paths that move lines.
    pub(super) topo: Vec<(u32, u32)>,
    /// Cycles elapsed on each CPU (`clocks.rs`).
    pub clock: Clocks,
    pub llc: SetAssoc,
    line_shift: u32,
    /// CPUs that may cache translations of each mm (mm_cpumask).
    mm_cpus: FastMap<MmId, Vec<bool>>,
    /// Record every page-walk read as (level, physical address) (tests, debugging).
    pub trace_walks: bool,
    pub walk_log: Vec<(u32, u64)>,
    /// Lines used for atomics and locks: which CPU owns each and when it is busy.
    pub(super) shared_lines: FastMap<u64, SharedLine>,
    /// No CPU that can still run is behind this time (set by the scheduler): shared-line
    /// uses that end before it are forgotten.
    pub horizon: f64,
    /// Each node's memory bandwidth (`memory.bandwidth`): what streaming work booked of it.
    pub(super) channels: Vec<Channel>,
    /// Where `warm_access` found the last-level entry of the access it warmed ahead.
    warmed: Option<Warmed>,
    /// Lines the L2 streamer brings in ahead of a stream (`cache.prefetch_degree`).
    prefetch_degree: u64,
    /// log2 of the lines in the streamer's 4 KiB boundary (None: a line is 4 KiB or more,
    /// so no line after it is inside).
    prefetch_shift: Option<u32>,
    /// Stall beyond an L1 hit of an access served at each level (`Level as usize`), alone
    /// (`serial`) and as one of an independent stream (`parallel`): see `stall`.
    pub(super) stall_serial: [f64; 4],
    stall_parallel: [f64; 4],
    /// The last run's stall (`page_accesses`): its lines' `RunMasks` (`miss`, `l2_hit`,
    /// `llc_hit`), which fix the sum, and the sum. A stream's pages repeat one pattern.
    run_stall: ([u64; 3], f64),
    /// The last clear's fetch-bound stall (`masks_fetch_bound`): its lines' levels before it
    /// (`[l2, llc, mem]`) and their serial stalls' sum.
    clear_stall: ([u64; 3], f64),
    /// The cycles the last use of a shared line waited before it began (for the run's
    /// `mmsim:lock_wait` events; read only when events are on).
    pub last_wait: f64,
    /// The directory that keeps the CPUs' private caches coherent (`coherence.rs`).
    pub(super) coherence: super::coherence::Coherence,
}

/// A page-table entry `Machine::warm_access` found ahead of its access: entry `idx` of the
/// table in frame `table`, for base page `page` of `mm`.
#[derive(Clone, Copy, Debug)]
struct Warmed {
    mm: MmId,
    page: u64,
    table: Pfn,
    idx: usize,
}

/// Result of translating one address.
#[derive(Clone, Copy, Debug)]
pub enum Translation {
    /// The physical frame of the 4 KiB piece that holds the address.
    Frame(Pfn),
    /// The access faults (not present, or a write to a read-only mapping).
    Fault,
}

impl Machine {
    /// A machine whose physical addresses may be any (its caches keep 64-bit tags).
    pub fn new(p: Profile, ncpus: usize) -> Machine {
        Machine::with_memory(p, ncpus, u64::MAX)
    }

    /// A machine of `memory` bytes of physical memory: every physical address the caches see
    /// is below it (the kernel's frames), so a cache whose tags then fit 32 bits keeps them so
    /// (`SetAssoc::with_key_bound`, the same behaviour in less host memory).
    pub fn with_memory(p: Profile, ncpus: usize, memory: u64) -> Machine {
        let line = p.cache.line;
        let lines = memory.div_ceil(line);
        let coherence = super::coherence::Coherence::new(ncpus, (memory != u64::MAX).then_some(lines));
        let geo = p.geometry();
        let nodes = p.smp.numa_nodes.max(1);
        let cpus: Vec<Cpu> = (0..ncpus)
            .map(|_| Cpu {
                tlb: Tlb::new(&p.tlb, geo),
                l1d: cache("cache.l1d", &p.cache.l1d, line, lines),
                l1i: cache("cache.l1i", &p.cache.l1i, line, lines),
                l2: cache("cache.l2", &p.cache.l2, line, lines),
                busy: 0.0,
                time_base: 0.0,
                cur_asid: None,
                streams: StreamTrackers::new(p.cache.prefetch_streams),
                walk_debt: 0.0,
                walk_task: None,
                smt_slowdown: 1.0,
                node: 0,
            })
            .collect();
        let line_shift = line.trailing_zeros();
        let base = p.cache.l1d.latency;
        let extra = [0.0, p.cache.l2.latency - base, p.cache.llc.latency - base, p.memory.latency - base];
        let mlp = p.memory.mlp;
        let mut m = Machine {
            geo,
            llc: cache("cache.llc", &p.cache.llc, line, lines),
            line_shift,
            warmed: None,
            prefetch_degree: p.cache.prefetch_degree as u64,
            prefetch_shift: PREFETCH_BOUNDARY.trailing_zeros().checked_sub(line_shift).filter(|&s| s > 0),
            stall_serial: extra,
            stall_parallel: [0.0, extra[1] / mlp, extra[2] / mlp, extra[3] / mlp],
            run_stall: ([0; 3], 0.0),
            clear_stall: ([0; 3], 0.0),
            p,
            clock: Clocks::new(cpus.len()),
            cpus,
            topo: Vec::new(),
            mm_cpus: FastMap::default(),
            shared_lines: FastMap::default(),
            last_wait: 0.0,
            coherence,
            horizon: 0.0,
            // Each node's channel with an agent per CPU from boot: booking bandwidth on the
            // access path allocates nothing.
            channels: (0..nodes).map(|_| Channel::new(ncpus)).collect(),
            trace_walks: false,
            walk_log: Vec::new(),
        };
        let cores = m.cores();
        for c in 0..m.cpus.len() {
            m.cpus[c].node = m.cpu_to_node(c);
            m.topo.push(((c % cores) as u32, m.cpus[c].node as u32));
        }
        m
    }

    /// Cores of the machine: its CPUs are `cpu.smt` hardware threads each.
    fn cores(&self) -> usize {
        self.cpus.len().div_ceil(self.p.cpu.smt as usize)
    }

    /// The NUMA node of `cpu` (cpu_to_node): the cores split into `smp.numa_nodes` equal
    /// blocks of consecutive cores, a CPU on its core's node; with fewer cores than nodes,
    /// core i is on node i.
    #[inline]
    pub fn numa_node(&self, cpu: usize) -> usize {
        self.cpus[cpu].node
    }

    /// `numa_node`, computed from the profile.
    fn cpu_to_node(&self, cpu: usize) -> usize {
        cpu_to_node(&self.p, self.cpus.len(), cpu)
    }

    /// Host bytes of the caches and TLBs (tags, stamps and payloads of every entry), for
    /// `engine.max_host_memory`.
    pub fn host_bytes(&self) -> u64 {
        let entries: usize = self
            .cpus
            .iter()
            .map(|c| {
                let t = &c.tlb;
                c.l1d.capacity()
                    + c.l1i.capacity()
                    + c.l2.capacity()
                    + t.itlb.iter().chain(&t.dtlb).chain(&t.pwc).map(|a| a.capacity()).sum::<usize>()
                    + t.stlb.capacity()
            })
            .sum::<usize>()
            + self.llc.capacity();
        entries as u64 * 3 * 8
            + self.cpus.len() as u64 * std::mem::size_of::<Cpu>() as u64
            + self.coherence.host_bytes()
    }

    /// Host bytes of the CPU masks of `mms` address spaces (mm_cpumask, one byte per CPU).
    pub fn mm_host_bytes(&self, mms: usize) -> u64 {
        mms as u64 * (self.cpus.len() as u64 + 48)
    }

    /// The other hardware threads of `cpu`'s core (x86 numbering: c, c + cores, ...).
    pub fn smt_siblings(&self, cpu: usize) -> impl Iterator<Item = usize> + '_ {
        let cores = self.cores();
        (0..self.p.cpu.smt as usize)
            .map(move |i| cpu % cores + i * cores)
            .filter(move |&c| c != cpu && c < self.cpus.len())
    }

    /// Set whether `cpu`'s SMT siblings are busy: while they are, its execution slows down.
    pub fn set_siblings_busy(&mut self, cpu: usize, busy: bool) {
        let p = &self.p.cpu;
        self.cpus[cpu].smt_slowdown = if busy { p.smt as f64 / p.smt_throughput } else { 1.0 };
    }

    /// Cycles that `cycles` of execution (instructions, kernel code) take on `cpu` now.
    #[inline]
    pub fn exec_cycles(&self, cpu: usize, cycles: f64) -> f64 {
        cycles * self.cpus[cpu].smt_slowdown
    }

    /// log2 of the cache line size.
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }

    pub fn line_size(&self) -> u64 {
        1 << self.line_shift
    }

    /// Switch `cpu` to `mm` (switch_mm): without PCID every translation is flushed.
    pub fn switch_mm(&mut self, cpu: usize, mm: MmId, perf: &mut PerfCounters) {
        let c = &mut self.cpus[cpu];
        if c.cur_asid == Some(mm) {
            return;
        }
        if !self.p.tlb.pcid {
            c.tlb.flush_all();
        }
        c.cur_asid = Some(mm);
        let v = self.mm_cpus.entry(mm).or_insert_with(|| vec![false; self.cpus.len()]);
        v[cpu] = true;
        perf.charge("switch_mm_irqs_off", if self.p.tlb.pcid { 0.0 } else { self.p.cost.tlb_flush_all });
    }

    /// A data access through the cache hierarchy of `cpu` (physical line number). Returns
    /// the level that served it. Every L1 miss is seen by the L2 streamer: when it continues
    /// an ascending stream (the line after one a tracker last saw), the next `prefetch_degree`
    /// lines of the same 4 KiB page are brought into the L2 and LLC, so a sequential stream
    /// stays ahead of its loads.
    #[inline]
    pub fn cache_access(&mut self, cpu: usize, line: u64) -> Level {
        if self.cpus[cpu].l1d.access(line) {
            return Level::L1;
        }
        self.l2_access(cpu, line)
    }

    /// An L1 miss (data or code) at the L2 and below, through the L2 streamer, which watches
    /// the L1D's and the L1I's requests alike (Intel's optimization manual: "monitored read
    /// requests include L1 DCache requests ... and L1 ICache requests for code fetch").
    fn l2_access(&mut self, cpu: usize, line: u64) -> Level {
        let Machine { cpus, llc, prefetch_degree, prefetch_shift, .. } = self;
        let c = &mut cpus[cpu];
        let stream = c.streams.observe(line);
        // A line that continues a stream was most likely just prefetched into the L2.
        let in_l2 = if stream { c.l2.access_likely_mru(line) } else { c.l2.access(line) };
        let level = if in_l2 {
            Level::L2
        } else if llc.access(line) {
            Level::Llc
        } else {
            Level::Mem
        };
        if stream && *prefetch_degree > 0 {
            // Within the line's 4 KiB: the lines before the boundary after it, at most degree.
            let Some(shift) = *prefetch_shift else { return level };
            let room = (((line >> shift) + 1) << shift) - line - 1;
            for l in line + 1..=line + room.min(*prefetch_degree) {
                c.l2.fill(l);
                llc.fill(l);
            }
        }
        level
    }

    /// Extra cycles of an access served at `level` beyond an L1 hit, divided by the
    /// memory-level parallelism when the access is one of an independent stream.
    #[inline]
    fn stall(&self, level: Level, parallel: bool) -> f64 {
        if parallel {
            self.stall_parallel[level as usize]
        } else {
            self.stall_serial[level as usize]
        }
    }

    /// Translate `vaddr` for `cpu` running `mm`: the TLBs (the iTLB for an instruction
    /// fetch), then a hardware page walk whose entry reads go through the data caches. Counts
    /// TLB misses (not again for the retry of an access after its fault), walks and their
    /// cycles; a fetch's walk stalls the front end, a load's or store's the back end.
    #[allow(clippy::too_many_arguments)]
    pub fn translate(
        &mut self,
        cpu: usize,
        k: &mut Kernel,
        mm: MmId,
        vaddr: u64,
        access: Access,
        perf: &mut PerfCounters,
        retry: bool,
    ) -> Translation {
        let asid = mm;
        let (write, fetch) = (access == Access::Write, access == Access::Exec);
        let found = self.cpus[cpu].tlb.lookup(asid, vaddr, fetch);
        if let Some((hit, size, e)) = found {
            let entry = Entry(e);
            if (write && !entry.write()) || (fetch && entry.has(pgtable::NX)) {
                // A write to a read-only translation (a fetch from a no-execute one) faults;
                // the fault drops the entry.
                self.cpus[cpu].tlb.invlpg(asid, vaddr);
                self.drain_translations(cpu, perf);
                return Translation::Fault;
            }
            if hit == TlbHit::Stlb {
                let lat = self.p.tlb.stlb_latency;
                if fetch {
                    perf.cycles += lat;
                    perf.stalled_frontend += lat;
                } else {
                    self.translation_latency(cpu, lat, false, perf);
                }
            }
            if !write || entry.has(pgtable::DIRTY) {
                return Translation::Frame(frame_of(entry, size, vaddr, self.geo));
            }
            // A write through a clean entry: the walker sets the dirty bit (below).
        }
        // An access retried after its page fault is the same access: count its miss once.
        if !retry {
            match access {
                Access::Write => perf.dtlb_store_misses += 1,
                Access::Read => perf.dtlb_load_misses += 1,
                Access::Exec => perf.itlb_load_misses += 1,
            }
        }
        self.page_walk(cpu, k, mm, vaddr, access, perf, found.is_none())
    }

    /// The hardware page walker (`tlb_absent`: the TLB lookup before it found nothing for
    /// the address): start from the deepest paging-structure cache hit, read each
    /// remaining entry through the data caches (a dependent chain: no parallelism), set the
    /// accessed (and dirty) bits, and fill the TLB (the iTLB for a fetch). A not-present
    /// entry, a write through a read-only leaf or a fetch through an NX one raises the fault.
    #[allow(clippy::too_many_arguments)]
    fn page_walk(
        &mut self,
        cpu: usize,
        k: &mut Kernel,
        mm: MmId,
        vaddr: u64,
        access: Access,
        perf: &mut PerfCounters,
        tlb_absent: bool,
    ) -> Translation {
        let asid = mm;
        let (write, fetch) = (access == Access::Write, access == Access::Exec);
        perf.page_walks += 1;
        let mut cycles = self.p.tlb.walk_overhead;
        // The walk starts once the STLB lookup has missed (a first-level miss that finds
        // nothing at all has still paid for the lookup).
        let lookup = if self.p.tlb.stlb.entries > 0 { self.p.tlb.stlb_latency } else { 0.0 };
        // Table to read at each level: 3 = PGD (PML4), 2 = PUD (PDPT), 1 = PMD (PD), 0 = PTE.
        let (mut level, mut table) = {
            let t = &mut self.cpus[cpu].tlb;
            if let Some(pt) = t.pwc_get(2, asid, vaddr) {
                (0u32, pt)
            } else if let Some(pd) = t.pwc_get(1, asid, vaddr) {
                (1, pd)
            } else if let Some(pdpt) = t.pwc_get(0, asid, vaddr) {
                (2, pdpt)
            } else {
                (3, k.mm(mm).pgd.0 as u64)
            }
        };
        let result = loop {
            let idx = self.geo.table_index(vaddr, level);
            let phys = (table << self.geo.page_shift) + idx as u64 * 8;
            if self.trace_walks {
                self.walk_log.push((level, phys));
            }
            let lvl = self.cache_access(cpu, phys >> self.line_shift);
            cycles += self.p.cache.l1d.latency + self.stall(lvl, false);
            perf.mem_refs += 1;
            let tpfn = Pfn(table as u32);
            let e = k.entry(tpfn, idx);
            let leaf = level == 0 || e.huge();
            if !e.hw_present() || (write && !e.write()) || (fetch && leaf && e.has(pgtable::NX)) {
                break Translation::Fault;
            }
            let mut ne = e.with(pgtable::ACCESSED);
            if leaf && write {
                ne = ne.with(pgtable::DIRTY);
            }
            if ne != e {
                k.set_entry(tpfn, idx, ne);
            }
            if leaf {
                let size = match level {
                    0 => PageSize::Base,
                    1 => PageSize::Pmd,
                    _ => PageSize::Pud,
                };
                self.cpus[cpu].tlb.fill(asid, vaddr, size, ne.0, fetch, tlb_absent);
                break Translation::Frame(frame_of(ne, size, vaddr, self.geo));
            }
            // Cache the upper-level entry in its paging-structure cache.
            let pwc_level = (3 - level) as usize;
            self.cpus[cpu].tlb.pwc_put(pwc_level, asid, vaddr, e.pfn().0 as u64);
            table = e.pfn().0 as u64;
            level -= 1;
        };
        perf.page_walk_cycles += cycles;
        let latency = lookup + cycles;
        if fetch {
            // The front end waits for the instruction's translation: nothing to overlap.
            perf.cycles += latency;
            perf.stalled_frontend += latency;
        } else if matches!(result, Translation::Fault) {
            // The fault is taken when the faulting access reaches retirement: everything the
            // core ran ahead of completes first, and the walk is not overlapped.
            self.drain_translations(cpu, perf);
            perf.cycles += latency;
            perf.stalled_backend += latency;
        } else {
            self.translation_latency(cpu, latency, true, perf);
        }
        result
    }

    /// The visible cost of a data access's translation latency `lat` (an STLB hit, or with
    /// `walk` a page walk, which occupies one of `tlb.page_walkers`) on an out-of-order
    /// core: independent work goes on while the translation completes, until the reorder
    /// buffer (`cpu.rob` instructions at the base CPI) is full behind the waiting access.
    /// Walks queue for the walkers, so a stream of them is walk-bound. An in-order core
    /// (`rob` 0) stalls for the whole latency. Like the hardware's own WALK_DURATION,
    /// `page_walk_cycles` counts the walker's busy cycles whether or not they were hidden.
    fn translation_latency(&mut self, cpu: usize, lat: f64, walk: bool, perf: &mut PerfCounters) {
        let window = self.p.cpu.rob as f64 * self.p.cpu.base_cpi;
        let c = &mut self.cpus[cpu];
        let done =
            if walk { (c.walk_debt + lat / self.p.tlb.page_walkers as f64).max(lat) } else { c.walk_debt.max(lat) };
        let stall = (done - window).max(0.0);
        c.walk_debt = done - stall;
        perf.cycles += stall;
        perf.stalled_backend += stall;
    }

    /// `cycles` of the core's own work (instructions and cache stalls) overlap the
    /// translations it ran ahead of.
    #[inline]
    fn overlap_work(&mut self, cpu: usize, cycles: f64) {
        let c = &mut self.cpus[cpu];
        c.walk_debt = (c.walk_debt - cycles).max(0.0);
    }

    /// A serialising event (a fault, a system call, a locked instruction, a context
    /// switch): wait for every outstanding translation of the running task.
    pub fn drain_translations(&mut self, cpu: usize, perf: &mut PerfCounters) -> f64 {
        let c = &mut self.cpus[cpu];
        let stall = c.walk_debt;
        c.walk_debt = 0.0;
        perf.cycles += stall;
        perf.stalled_backend += stall;
        stall
    }

    /// An instruction fetch of one line through `cpu`'s L1i, then the unified L2 (its streamer) and the LLC.
    #[inline]
    pub fn icache_access(&mut self, cpu: usize, line: u64) -> Level {
        if self.cpus[cpu].l1i.access(line) {
            return Level::L1;
        }
        self.l2_access(cpu, line)
    }

    /// Call `f` with each line (index within the page) that `count` accesses at offsets
    /// `ps, ps+stride, ...` below `pe` touch, once per line: with a stride of a line or more
    /// every access has a line of its own; with a smaller one every line from the first
    /// access to the last holds at least one (the others in a line hit it).
    #[inline]
    fn for_each_line(&mut self, ps: u64, pe: u64, stride: u64, count: u64, f: &mut impl FnMut(&mut Machine, u64)) {
        if stride >= self.line_size() {
            let mut off = ps;
            while off < pe {
                f(self, off >> self.line_shift);
                off += stride;
            }
        } else {
            let last = ps + (count - 1) * stride;
            for l in (ps >> self.line_shift)..=(last >> self.line_shift) {
                f(self, l);
            }
        }
    }

    /// `for_each_line`'s lines as offsets from the first one's.
    #[inline]
    pub(super) fn for_each_line_offset(&self, ps: u64, pe: u64, stride: u64, count: u64, f: &mut impl FnMut(u64)) {
        let first = ps >> self.line_shift;
        if stride >= self.line_size() {
            let mut off = ps;
            while off < pe {
                f((off >> self.line_shift) - first);
                off += stride;
            }
        } else {
            let last = ps + (count - 1) * stride;
            for l in first..=(last >> self.line_shift) {
                f(l - first);
            }
        }
    }

    /// `count` instruction fetches from one page at offsets `ps, ps+stride, ...` (straight-line
    /// code, each fetch `instr_per_fetch` instructions): the iTLB was consulted by
    /// `translate`; here the lines are fetched through the L1i and a miss stalls the front end
    /// for its whole latency (the next fetch depends on it). Fetches within one line count
    /// once at the cache.
    #[allow(clippy::too_many_arguments)]
    pub fn page_fetches(
        &mut self,
        cpu: usize,
        pfn: Pfn,
        ps: u64,
        pe: u64,
        stride: u64,
        instr_per_fetch: f64,
        perf: &mut PerfCounters,
    ) {
        let count = (pe - ps).div_ceil(stride);
        perf.itlb_loads += count;
        perf.mem_refs += count;
        let instr = count as f64 * instr_per_fetch;
        perf.instructions += instr;
        let base = pfn.phys(self.geo) >> self.line_shift;
        let mut stall = 0.0;
        let mut fetched = |m: &Machine, lvl: Level| {
            if lvl != Level::L1 {
                perf.l1i_load_misses += 1;
            }
            stall += m.stall(lvl, false);
        };
        self.page_lines(cpu, base, (ps, pe, stride, count), true, &mut fetched);
        perf.stalled_frontend += stall;
        let cycles = self.exec_cycles(cpu, instr * self.p.cpu.base_cpi) + stall;
        perf.cycles += cycles;
        self.overlap_work(cpu, cycles);
    }

    /// One line of instructions fetched by a replayed trace's run (`instr` of its
    /// instructions), at `off` of frame `pfn`: `page_fetches` of one line.
    #[inline]
    pub fn one_fetch(&mut self, cpu: usize, pfn: Pfn, off: u64, instr: f64, perf: &mut PerfCounters) {
        perf.itlb_loads += 1;
        perf.mem_refs += 1;
        perf.instructions += instr;
        let line = (pfn.phys(self.geo) >> self.line_shift) + (off >> self.line_shift);
        let lvl = self.icache_access(cpu, line);
        perf.l1i_load_misses += (lvl != Level::L1) as u64;
        let stall = self.stall(lvl, false);
        perf.stalled_frontend += stall;
        let cycles = self.exec_cycles(cpu, instr * self.p.cpu.base_cpi) + stall;
        perf.cycles += cycles;
        self.overlap_work(cpu, cycles);
    }

    /// One load or store of a replayed trace, at `off` of frame `pfn` (the TLB was consulted
    /// by `translate`): `page_accesses` of one access whose instruction the trace's runs count,
    /// without the machinery of a run of lines.
    #[inline]
    pub fn one_access(&mut self, cpu: usize, pfn: Pfn, off: u64, write: bool, perf: &mut PerfCounters) {
        if write {
            perf.dtlb_stores += 1;
        } else {
            perf.dtlb_loads += 1;
            perf.l1d_loads += 1;
        }
        perf.mem_refs += 1;
        let ports = if write { self.p.cpu.stores_per_cycle } else { self.p.cpu.loads_per_cycle };
        let mut cycles = self.exec_cycles(cpu, 1.0 / ports);
        let line = (pfn.phys(self.geo) >> self.line_shift) + (off >> self.line_shift);
        let coherence = self.snoop_span(cpu, line, (0, 1, 1, 1), write, perf);
        let lvl = self.cache_access(cpu, line);
        let mut stall = (self.stall(lvl, true) + coherence / self.p.memory.mlp).max(0.0);
        if !write {
            perf.l1d_load_misses += (lvl != Level::L1) as u64;
            perf.llc_loads += (lvl >= Level::Llc) as u64;
            perf.llc_load_misses += (lvl == Level::Mem) as u64;
        }
        if lvl == Level::Mem {
            // A store's line is written back when it leaves the caches: booked now, with its
            // fill (as a clear's are).
            let now = self.cpus[cpu].time_base + perf.cycles;
            let bus = self.book_bandwidth(cpu, now, (1 + write as u64) << self.line_shift);
            stall = stall.max(bus - cycles);
        }
        cycles += stall;
        perf.stalled_backend += stall;
        perf.cycles += cycles;
        self.overlap_work(cpu, cycles);
    }

    /// `count` accesses of a loop to one page at offsets `ps, ps+stride, ...`: the TLB was
    /// consulted by `translate`; here the lines are read through the caches and the loop's
    /// instructions (at the base CPI, bounded by the load or store ports) and stalls are
    /// charged. Accesses to the same line count once at the cache.
    #[allow(clippy::too_many_arguments)]
    pub fn page_accesses(
        &mut self,
        cpu: usize,
        pfn: Pfn,
        ps: u64,
        pe: u64,
        stride: u64,
        write: bool,
        instr_per_access: f64,
        perf: &mut PerfCounters,
    ) {
        let count = (pe - ps).div_ceil(stride);
        if write {
            perf.dtlb_stores += count;
        } else {
            perf.dtlb_loads += count;
            perf.l1d_loads += count;
        }
        perf.mem_refs += count;
        let instr = count as f64 * instr_per_access;
        perf.instructions += instr;
        // Issue: the instructions at the base CPI, but no faster than the load (store) ports.
        let ports = if write { self.p.cpu.stores_per_cycle } else { self.p.cpu.loads_per_cycle };
        let mut cycles = self.exec_cycles(cpu, (instr * self.p.cpu.base_cpi).max(count as f64 / ports));
        let base = pfn.phys(self.geo) >> self.line_shift;
        // Other CPUs' copies first (MESI): what that adds overlaps as the misses do.
        let coherence = self.snoop_span(cpu, base, (ps, pe, stride, count), write, perf) / self.p.memory.mlp;
        let mut stall = 0.0;
        let (mut from_memory, mut dirty) = (0u64, 0u64);
        let (mut l1_misses, mut llc_loads, mut llc_misses) = (0, 0, 0);
        let mut count_level = |m: &Machine, lvl: Level| {
            from_memory += (lvl == Level::Mem) as u64;
            dirty += (lvl == Level::Mem) as u64;
            l1_misses += (lvl != Level::L1) as u64;
            llc_loads += (lvl >= Level::Llc) as u64;
            llc_misses += (lvl == Level::Mem) as u64;
            stall += m.stall(lvl, true);
        };
        if count == 1 {
            // One access (a random load or store, one byte of a sparse touch): its line.
            let lvl = self.cache_access(cpu, base + (ps >> self.line_shift));
            count_level(self, lvl);
        } else if let Some((r, r_lines)) = self.page_run(cpu, base, (ps, pe, stride, count), false) {
            // The same tallies from the run's masks; the stalls added in line order (an L1
            // hit's is zero, which adds nothing), once for each pattern of masks in a row.
            let mem = r.miss & !r.l2_hit & !r.llc_hit;
            // The channel carries the streamer's fills from memory too; of what came, the
            // lines this run stores to are dirty.
            let fetched = r.fetched_from_memory();
            from_memory += fetched.count_ones() as u64;
            dirty += (fetched & r_lines).count_ones() as u64;
            l1_misses += r.miss.count_ones() as u64;
            llc_loads += (r.miss & !r.l2_hit).count_ones() as u64;
            llc_misses += mem.count_ones() as u64;
            let key = [r.miss, r.l2_hit, r.llc_hit];
            if self.run_stall.0 != key {
                let mut m = r.miss;
                while m != 0 {
                    let o = m.trailing_zeros();
                    m &= m - 1;
                    // Level::L2, Llc or Mem (found in at most one of the two).
                    let level = 3 - 2 * (r.l2_hit >> o & 1) - (r.llc_hit >> o & 1);
                    stall += self.stall_parallel[level as usize];
                }
                self.run_stall = (key, stall);
            }
            stall = self.run_stall.1;
        } else {
            self.lines_one_by_one(cpu, base, (ps, pe, stride, count), false, &mut count_level);
        }
        stall = (stall + coherence).max(0.0);
        if !write {
            perf.l1d_load_misses += l1_misses;
            perf.llc_loads += llc_loads;
            perf.llc_load_misses += llc_misses;
        }
        // The lines fetched from memory take their time on the node's channel: no faster than
        // its bandwidth allows once other CPUs' streams (or this one's) fill it. A store's
        // lines are dirty: their write-back when they leave the caches is booked now too (as
        // a clear's is), once per fetch.
        if from_memory > 0 {
            let now = self.cpus[cpu].time_base + perf.cycles;
            let lines = from_memory + if write { dirty } else { 0 };
            let bus = self.book_bandwidth(cpu, now, lines << self.line_shift);
            stall = stall.max(bus - cycles);
        }
        cycles += stall;
        perf.stalled_backend += stall;
        perf.cycles += cycles;
        self.overlap_work(cpu, cycles);
    }

    /// Ask the host to bring into its caches what simulating an access to physical `line`
    /// will read in the LLC (its set's tags and order). Changes nothing simulated. The L2's
    /// sets are not asked for: its arrays (40 KiB for 512 KiB of 8-way L2) stay in the host's
    /// caches.
    #[inline]
    fn prefetch_line(&self, line: u64) {
        self.llc.prefetch(line);
    }

    /// Host-cache hints for an access that the running CPU will make to `vaddr` of `mm` soon
    /// (a random access pattern knows its next addresses), so that the host's memory latency
    /// overlaps the accesses before it. `near`: the access is next, and its page-table entry was
    /// warmed by an earlier call (the entry is read now: the data's line is warmed);
    /// otherwise the walk's last entry and its line are warmed, and where that entry is is
    /// remembered for the `near` call that follows. Reads the page tables without setting any
    /// bit; changes nothing simulated.
    pub fn warm_access(&mut self, k: &mut Kernel, mm: MmId, vaddr: u64, near: bool) {
        let geo = self.geo;
        let page = vaddr >> geo.page_shift;
        if near {
            if let Some(w) = self.warmed.take().filter(|w| (w.mm, w.page) == (mm, page)) {
                // The entry the earlier call found (its table may have gone since: then no hint).
                if let crate::kernel::mm_types::FrameData::Table(slot) = k.mem.data[w.table.idx()] {
                    let e = Entry(k.mem.table_entry(slot, w.idx));
                    if e.hw_present() {
                        self.prefetch_line((e.pfn().phys(geo) + geo.offset_in_page(vaddr)) >> self.line_shift);
                    }
                }
                return;
            }
        }
        let mut table = k.mm(mm).pgd;
        for level in (1..=3).rev() {
            let e = k.entry(table, geo.table_index(vaddr, level));
            if !e.hw_present() {
                return;
            }
            if e.huge() {
                if near && level == 1 {
                    let sub = geo.table_index(vaddr, 0) as u64;
                    let phys = ((e.pfn().0 as u64 + sub) << geo.page_shift) + geo.offset_in_page(vaddr);
                    self.prefetch_line(phys >> self.line_shift);
                }
                return;
            }
            table = e.pfn();
        }
        let idx = geo.table_index(vaddr, 0);
        if near {
            let e = k.entry(table, idx);
            if e.hw_present() {
                let phys = (e.pfn().phys(geo)) + geo.offset_in_page(vaddr);
                self.prefetch_line(phys >> self.line_shift);
            }
            return;
        }
        // The walk's read of this entry: the kernel's copy of it, and its line in the caches.
        if let crate::kernel::mm_types::FrameData::Table(slot) = k.mem.data[table.idx()] {
            super::assoc::host_prefetch(k.mem.table_entry_mut(slot, idx));
        }
        self.prefetch_line((table.phys(geo) + idx as u64 * 8) >> self.line_shift);
        self.warmed = Some(Warmed { mm, page, table, idx });
    }

    /// Where `line` is for `cpu` now, without touching any cache's state (coherence's
    /// invalidation cost; tests).
    pub(super) fn probe_level(&self, cpu: usize, line: u64) -> Level {
        let c = &self.cpus[cpu];
        if c.l1d.contains(line) {
            Level::L1
        } else if c.l2.contains(line) {
            Level::L2
        } else if self.llc.contains(line) {
            Level::Llc
        } else {
            Level::Mem
        }
    }

    /// Cycles a streaming kernel loop (clear_page, copy_page) needs to bring `lines` to this
    /// CPU, `memory.stream_mlp` line fills in flight at a time (Little's law), judged by where each
    /// line is before the loop starts: the prefetcher cannot fetch faster than the fill
    /// buffers let it. A store to a line this CPU does not hold waits for ownership; mmsim
    /// charges that as a fill from where the line is (Intel's fast-string stores ask only for
    /// ownership, without the data, but still hold a fill buffer for the round trip: a
    /// deliberate simplification).
    /// Also returns how many of the lines come from memory (the loop's memory traffic).
    /// The lines are probed 64 at a time (`SetAssoc::contains_mask`, level by level); their
    /// stalls are still added one line at a time, in line order.
    fn fetch_bound(&self, cpu: usize, lines: std::ops::Range<u64>) -> (f64, u64) {
        let c = &self.cpus[cpu];
        let (mut serial, mut mem, mut first) = (0.0, 0, lines.start);
        while first < lines.end {
            let n = (lines.end - first).min(64);
            let all = u64::MAX >> (64 - n);
            let l1 = c.l1d.contains_mask(first, all);
            let l2 = c.l2.contains_mask(first, all & !l1);
            let llc = self.llc.contains_mask(first, all & !(l1 | l2));
            mem += n - u64::from((l1 | l2 | llc).count_ones());
            for o in 0..n as u8 {
                let level = if l1 >> o & 1 != 0 { Level::L1 } else { run::below_l1(l2, llc, o) };
                serial += self.stall(level, false);
            }
            first += n;
        }
        (serial / self.p.memory.stream_mlp, mem)
    }

    /// `fetch_bound` of a run's lines found in the L2, the LLC and memory (`[l2, llc, mem]`,
    /// disjoint masks of offsets; the run's other lines in the L1, which add no stall): the
    /// stalls added in line order, once for each pattern of masks in a row (a clear's lines
    /// are mostly all in one place).
    fn masks_fetch_bound(&mut self, levels: [u64; 3]) -> (f64, u64) {
        if self.clear_stall.0 != levels {
            let [l2, llc, mem] = levels;
            let (mut serial, mut m) = (0.0, l2 | llc | mem);
            while m != 0 {
                let o = m.trailing_zeros();
                m &= m - 1;
                // Level::L2, Llc or Mem (in one of the three).
                let level = 3 - 2 * (l2 >> o & 1) - (llc >> o & 1);
                serial += self.stall_serial[level as usize];
            }
            self.clear_stall = (levels, serial);
        }
        (self.clear_stall.1 / self.p.memory.stream_mlp, u64::from(levels[2].count_ones()))
    }

    /// A digest of every cache and TLB (for detecting loop iterations that repeat exactly).
    pub fn digest(&self) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for c in &self.cpus {
            c.tlb.digest(&mut h);
            c.l1d.digest(&mut h);
            c.l1i.digest(&mut h);
            c.l2.digest(&mut h);
            for &s in c.streams.lines() {
                h = (h ^ s).wrapping_mul(0x100_0000_01b3);
            }
            h = (h ^ c.walk_debt.to_bits()).wrapping_mul(0x100_0000_01b3);
        }
        self.llc.digest(&mut h);
        // The directory's size stands for its state (its entries follow the caches' contents).
        h = (h ^ self.coherence.directory_lines() as u64).wrapping_mul(0x100_0000_01b3);
        h
    }
}

/// `Machine::numa_node` of `cpu` on a machine of `ncpus` CPUs of profile `p`.
pub(super) fn cpu_to_node(p: &Profile, ncpus: usize, cpu: usize) -> usize {
    let nodes = p.smp.numa_nodes as usize;
    let cores = ncpus.div_ceil(p.cpu.smt as usize);
    (cpu % cores) * nodes / cores.max(nodes)
}

/// The 4 KiB frame holding `vaddr` under a leaf entry of `size`.
#[inline]
fn frame_of(e: Entry, size: PageSize, vaddr: u64, geo: Geometry) -> Pfn {
    let sub = match size {
        PageSize::Base => 0,
        PageSize::Pmd => (vaddr >> geo.page_shift) & (geo.hpage_pmd_nr() - 1),
        PageSize::Pud => (vaddr >> geo.page_shift) & (geo.pud_nr() - 1),
    };
    Pfn(e.pfn().0 + sub as u32)
}
