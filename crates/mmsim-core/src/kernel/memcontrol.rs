//! Memory cgroups (mm/memcontrol.c, mm/memcontrol-v1.c, mm/page_counter.c, Linux 6.18): the
//! hierarchy and its page counters (memory, swap for cgroup v2, memsw and kmem for v1),
//! charging (`try_charge_memcg` with the per-CPU charge stock, reclaim, retries and the memcg
//! OOM killer), uncharging, memory.high's throttle, memory.low/min protection, memory.reclaim,
//! the statistics (`memory.stat` through rstat's lazy flushing, `memory.events`) and the
//! swap accounting of both hierarchies.
//!
//! Which hierarchy is modelled is the boot knob `cgroup/memory` (v2 by default). Differs
//! from Linux: a cgroup's tasks are its processes (threads follow their process); cgroups
//! are never removed during a run; the charge stock's random slot eviction uses a fixed
//! sequence; v1's oom_kill_disable, soft limits and thresholds are not modelled.

use super::knobs::CgroupMemory;
use super::lruvec::Lruvec;
use super::page_alloc::gfp;
use super::vmstat::{VmEvent, VmItem, VmStat};
use super::{Kernel, MmId};
use crate::fasthash::FastMap;
use crate::tracepoints::ev;
use crate::units::Pfn;
use crate::workload::spec_memcg::{CgroupSpec, Limit};

/// The root memory cgroup's index.
pub const ROOT_MEMCG: u16 = 0;
/// `folio_memcg` of a folio no memcg is charged for (kernel pages, or a folio whose charge
/// moved to its swap entry on cgroup v1).
pub const NO_MEMCG: u16 = u16::MAX;
/// `MEMCG_CHARGE_BATCH`.
pub const MEMCG_CHARGE_BATCH: u64 = 64;
/// `NR_MEMCG_STOCK`: memcgs a CPU's charge stock caches.
pub(super) const NR_MEMCG_STOCK: usize = 7;
/// `PAGE_COUNTER_MAX`.
pub const PAGE_COUNTER_MAX: u64 = i64::MAX as u64 / 4096;
/// `FLUSH_TIME`: the periodic stats flush, 2 s.
pub(super) const FLUSH_TIME_NS: u64 = 2_000_000_000;
/// `MEMCG_MAX_HIGH_DELAY_JIFFIES`: memory.high's longest sleep, 2 s.
pub(super) const MEMCG_MAX_HIGH_DELAY_NS: u64 = 2_000_000_000;

/// `memory.events` (enum memcg_memory_event), in the file's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemcgEvent {
    Low = 0,
    High = 1,
    Max = 2,
    Oom = 3,
    OomKill = 4,
    OomGroupKill = 5,
}

/// The names of `memory.events`' keys.
pub const MEMCG_EVENT_NAMES: [&str; 6] = ["low", "high", "max", "oom", "oom_kill", "oom_group_kill"];

/// `memory.swap.events`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapEventKind {
    High = 0,
    Max = 1,
    Fail = 2,
}

/// `struct page_counter`, in pages.
#[derive(Clone, Debug)]
pub struct PageCounter {
    pub usage: u64,
    pub max: u64,
    pub high: u64,
    pub low: u64,
    pub min: u64,
    /// The peak (v1 max_usage_in_bytes, v2 memory.peak), and the peak since memory.peak's
    /// last write.
    pub watermark: u64,
    pub local_watermark: u64,
    pub failcnt: u64,
    /// Effective protection from the last reclaim walk (`emin`, `elow`).
    pub emin: u64,
    pub elow: u64,
    pub min_usage: u64,
    pub low_usage: u64,
    pub children_min_usage: u64,
    pub children_low_usage: u64,
}

impl Default for PageCounter {
    fn default() -> Self {
        PageCounter {
            usage: 0,
            max: PAGE_COUNTER_MAX,
            high: PAGE_COUNTER_MAX,
            low: 0,
            min: 0,
            watermark: 0,
            local_watermark: 0,
            failcnt: 0,
            emin: 0,
            elow: 0,
            min_usage: 0,
            low_usage: 0,
            children_min_usage: 0,
            children_low_usage: 0,
        }
    }
}

/// Which page counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    Memory,
    Swap,
    Memsw,
    Kmem,
}

/// `struct mem_cgroup`, trimmed to what the model needs.
#[derive(Clone, Debug, Default)]
pub struct MemCgroup {
    /// Its path below the root ("" for the root).
    pub name: String,
    /// Its parent (None for the root) and children.
    pub parent: Option<u16>,
    pub children: Vec<u16>,
    pub memory: PageCounter,
    pub swap: PageCounter,
    pub memsw: PageCounter,
    pub kmem: PageCounter,
    /// `memory.oom.group`.
    pub oom_group: bool,
    /// Its LRU lists on the one node.
    pub lruvec: Lruvec,
    /// The statistics as the kernel updates them, hierarchical (this cgroup and its
    /// descendants) and local: node items, vm events, and the memcg items below.
    pub stat: VmStat,
    pub stat_local: VmStat,
    /// The statistics as last flushed (what memory.stat and reclaim's heuristics read).
    pub flushed: VmStat,
    pub flushed_local: VmStat,
    /// The memcg-only items (MEMCG_SWAP, MEMCG_KMEM), v1's charge events (PGPGIN, PGPGOUT)
    /// and the memcg side of the slab items (NR_SLAB_RECLAIMABLE_B, NR_SLAB_UNRECLAIMABLE_B,
    /// in bytes), hierarchical and local, live and flushed (indices `EXTRA_*`).
    pub extra: [i64; NR_EXTRA],
    pub extra_local: [i64; NR_EXTRA],
    pub extra_flushed: [i64; NR_EXTRA],
    pub extra_flushed_local: [i64; NR_EXTRA],
    /// `objcg->nr_charged_bytes`: bytes charged ahead that a drained object stock left over
    /// (less than a page), for the next CPU that caches this memcg's objcg.
    pub nr_charged_bytes: u64,
    /// `vmstats->stats_updates` and each CPU's share not yet added (`memcg_rstat_updated`).
    stats_updates: u64,
    pcpu_updates: Vec<u64>,
    /// `memory.events` (hierarchical) and `memory.events.local`; `memory.swap.events`.
    pub events: [u64; 6],
    pub events_local: [u64; 6],
    pub swap_events: [u64; 3],
}

/// Indices of `MemCgroup::extra`.
pub const EXTRA_SWAP: usize = 0;
pub const EXTRA_KMEM: usize = 1;
pub const EXTRA_PGPGIN: usize = 2;
pub const EXTRA_PGPGOUT: usize = 3;
pub const EXTRA_SLAB_RECLAIMABLE_B: usize = 4;
pub const EXTRA_SLAB_UNRECLAIMABLE_B: usize = 5;
pub const NR_EXTRA: usize = 6;
/// THREAD_SIZE in pages: x86-64's kernel stack (16 KiB, without KASAN).
pub const THREAD_SIZE_PAGES: u64 = 4;
/// `MemCgroup::extra`'s items as memory.stat names them (the `memcg:` tracepoints' `item`).
const EXTRA_NAMES: [&str; NR_EXTRA] =
    ["swap", "kernel", "pgpgin", "pgpgout", "nr_slab_reclaimable_b", "nr_slab_unreclaimable_b"];

/// Every memory cgroup, by index (the root first; ids are never reused in a run).
#[derive(Clone, Debug)]
pub struct MemCgroups {
    pub groups: Vec<MemCgroup>,
    /// A partial reclaim walk's next position per target (`mem_cgroup_iter`'s cookie).
    pub iter_pos: FastMap<u16, usize>,
    /// Each CPU's charge stock: (memcg, pages) slots (`memcg_stock_pcp`).
    stock: Vec<[(u16, u64); NR_MEMCG_STOCK]>,
    /// The stock's slot-eviction sequence (Linux: get_random_u32_below).
    stock_rand: u64,
    /// Each CPU's object stock (`obj_stock_pcp`, kernel/memcontrol_kmem.rs).
    pub(super) obj_stock: Vec<super::memcontrol_kmem::ObjStock>,
    /// When rstat was last flushed (ns) and the next periodic flush is due.
    pub flush_last_ns: u64,
    pub flush_next_ns: u64,
    /// Pages charged over memory.high (or swap.high) by the current system call or fault
    /// (`current->memcg_nr_pages_over_high`), throttled on its way back to user space.
    pub over_high: u64,
    pub over_high_memcg: u16,
}

impl Default for MemCgroups {
    fn default() -> Self {
        MemCgroups {
            groups: vec![MemCgroup { pcpu_updates: vec![0; 1], ..Default::default() }],
            iter_pos: FastMap::default(),
            stock: Vec::new(),
            obj_stock: Vec::new(),
            stock_rand: 0x9e37_79b9_7f4a_7c15,
            flush_last_ns: 0,
            flush_next_ns: FLUSH_TIME_NS,
            over_high: 0,
            over_high_memcg: ROOT_MEMCG,
        }
    }
}

impl MemCgroups {
    /// The cgroup and its ancestors, itself first (`parent_mem_cgroup` up to the root).
    pub fn ancestors(&self, memcg: u16) -> impl Iterator<Item = u16> + '_ {
        let mut cur = Some(memcg);
        std::iter::from_fn(move || {
            let c = cur?;
            cur = self.groups[c as usize].parent;
            Some(c)
        })
    }

    /// The index of the cgroup at `name` (a path; "" the root).
    pub fn lookup(&self, name: &str) -> Option<u16> {
        self.groups.iter().position(|g| g.name == name).map(|i| i as u16)
    }

    pub(super) fn counter(&mut self, memcg: u16, c: Counter) -> &mut PageCounter {
        let g = &mut self.groups[memcg as usize];
        match c {
            Counter::Memory => &mut g.memory,
            Counter::Swap => &mut g.swap,
            Counter::Memsw => &mut g.memsw,
            Counter::Kmem => &mut g.kmem,
        }
    }
}

impl Kernel {
    /// Whether cgroup v1's semantics are modelled (`cgroup/memory=v1`).
    #[inline]
    pub fn memcg_v1(&self) -> bool {
        self.knobs.reclaim.cgroup_memory == CgroupMemory::V1
    }

    // ---- the hierarchy -------------------------------------------------------------------

    /// Make the workload's cgroups (parents first: names sort before their children).
    pub fn mem_cgroup_create_all(&mut self, specs: &std::collections::BTreeMap<String, CgroupSpec>) {
        for (name, s) in specs {
            let parent = match name.rsplit_once('/') {
                Some((p, _)) => self.memcg.lookup(p).expect("parents are declared and sort first"),
                None => ROOT_MEMCG,
            };
            let id = self.memcg.groups.len() as u16;
            let ncpu = self.nr_cpus.max(1);
            self.memcg.groups.push(MemCgroup {
                name: name.clone(),
                parent: Some(parent),
                pcpu_updates: vec![0; ncpu],
                ..Default::default()
            });
            self.memcg.groups[parent as usize].children.push(id);
            self.memcg_apply_spec(id, s);
        }
    }

    /// Set a new cgroup's files from its declaration.
    pub(super) fn memcg_apply_spec(&mut self, id: u16, s: &CgroupSpec) {
        let ps = self.geo.page_size();
        let pages = |l: Limit| l.pages(ps).min(PAGE_COUNTER_MAX);
        let g = &mut self.memcg.groups[id as usize];
        g.memory.max = pages(s.max);
        g.memory.high = pages(s.high);
        g.memory.low = pages(s.low);
        g.memory.min = pages(s.min);
        g.swap.max = pages(s.swap_max);
        g.swap.high = pages(s.swap_high);
        g.oom_group = s.oom_group;
        // cgroup v1: memory.memsw.limit_in_bytes = memory.max + memory.swap.max.
        g.memsw.max = g.memory.max.saturating_add(g.swap.max).min(PAGE_COUNTER_MAX);
        // memory.failcnt counts on v1's memory counter only (track_failcnt).
    }

    /// The cgroup and its descendants, in pre-order (`mem_cgroup_iter`'s walk).
    pub fn memcg_subtree(&self, root: u16) -> Vec<u16> {
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            // Pre-order: children right after their parent, in creation order.
            let kids = self.memcg.groups[out[i] as usize].children.clone();
            for (pos, k) in (i + 1..).zip(kids) {
                out.insert(pos, k);
            }
            i += 1;
        }
        out
    }

    /// `mem_cgroup_is_descendant`.
    pub fn memcg_is_descendant(&self, memcg: u16, root: u16) -> bool {
        memcg != NO_MEMCG && self.memcg.ancestors(memcg).any(|m| m == root)
    }

    /// A process moves to another cgroup (`cgroup.procs`): its mm's future charges go there;
    /// what it charged so far stays where it is (v2 moves no charges).
    pub fn mm_move_memcg(&mut self, mm: MmId, memcg: u16) {
        self.mm_mut(mm).memcg = memcg;
    }

    /// The memcg of an mm (its owner's cgroup).
    pub fn mm_memcg(&self, mm: MmId) -> u16 {
        self.mm(mm).memcg
    }

    // ---- statistics ----------------------------------------------------------------------

    /// `memcg_rstat_updated`: `val` pages of updates on this CPU; each level's share moves to
    /// its total every MEMCG_CHARGE_BATCH, up to the first level that already needs a flush.
    #[inline]
    pub(super) fn memcg_rstat_updated(&mut self, memcg: u16, val: u64) {
        // Already due a flush (the root between periodic flushes, mostly): nothing to add.
        // This test is the common case, kept inline; the walk is not.
        if val != 0 && self.memcg.groups[memcg as usize].stats_updates <= self.memcg_flush_threshold() {
            self.memcg_rstat_updated_walk(memcg, val);
        }
    }

    /// `memcg_vmstats_needs_flush`'s threshold: MEMCG_CHARGE_BATCH a CPU.
    #[inline]
    fn memcg_flush_threshold(&self) -> u64 {
        MEMCG_CHARGE_BATCH * self.nr_cpus.max(1) as u64
    }

    #[inline(never)]
    fn memcg_rstat_updated_walk(&mut self, memcg: u16, val: u64) {
        let cpu = self.cur_cpu;
        let limit = self.memcg_flush_threshold();
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            let g = &mut self.memcg.groups[c as usize];
            if g.stats_updates > limit {
                break;
            }
            if g.pcpu_updates.len() <= cpu {
                g.pcpu_updates.resize(cpu + 1, 0);
            }
            g.pcpu_updates[cpu] += val;
            if g.pcpu_updates[cpu] >= MEMCG_CHARGE_BATCH {
                g.stats_updates += std::mem::take(&mut g.pcpu_updates[cpu]);
            }
            cur = g.parent;
        }
    }

    /// `mod_memcg_state` / the memcg half of `mod_lruvec_state`.
    pub fn mod_memcg_item(&mut self, memcg: u16, item: VmItem, delta: i64) {
        if memcg == NO_MEMCG || delta == 0 {
            return;
        }
        let val = self.memcg_state_val_in_pages(item, delta);
        if self.tp.is_some() {
            // Linux traces the update as the flush threshold counts it.
            self.trace_memcg_update(ev::MEMCG_MOD_LRUVEC_STATE, memcg, item.name(), val as i64 * delta.signum());
        }
        self.memcg.groups[memcg as usize].stat_local.mod_item(item, delta);
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            let g = &mut self.memcg.groups[c as usize];
            g.stat.mod_item(item, delta);
            cur = g.parent;
        }
        self.memcg_rstat_updated(memcg, val);
    }

    /// One of the `memcg:` update tracepoints (out of the statistics' fast path).
    #[cold]
    #[inline(never)]
    fn trace_memcg_update(&mut self, id: u8, memcg: u16, item: &str, val: i64) {
        self.trace(id, || format!("memcg_id={memcg} item={item} val={val}"));
    }

    /// `memcg_state_val_in_pages`: an update's size for the flush threshold, in pages (at
    /// least 1) for an item kept in other units (NR_KERNEL_STACK_KB).
    #[inline]
    fn memcg_state_val_in_pages(&self, item: VmItem, delta: i64) -> u64 {
        let v = delta.unsigned_abs();
        if item == VmItem::NrKernelStack && v != 0 {
            (v * 1024 / self.geo.page_size()).max(1)
        } else {
            v
        }
    }

    /// A memcg-only item or v1 charge event (`MemCgroup::extra`).
    pub(super) fn mod_memcg_extra(&mut self, memcg: u16, which: usize, delta: i64) {
        if memcg == NO_MEMCG || delta == 0 {
            return;
        }
        // memcg_state_val_in_pages: a byte item's update counts max(bytes / PAGE_SIZE, 1)
        // pages, and a negative one, by C's unsigned division, the pages it spans rounded up.
        let val = if which >= EXTRA_SLAB_RECLAIMABLE_B {
            let ps = self.geo.page_size();
            let v = delta.unsigned_abs();
            if delta > 0 {
                (v / ps).max(1)
            } else {
                v.div_ceil(ps)
            }
        } else {
            delta.unsigned_abs()
        };
        if self.tp.is_some() {
            let id = match which {
                EXTRA_PGPGIN | EXTRA_PGPGOUT => ev::MEMCG_COUNT_EVENTS,
                EXTRA_SLAB_RECLAIMABLE_B | EXTRA_SLAB_UNRECLAIMABLE_B => ev::MEMCG_MOD_LRUVEC_STATE,
                _ => ev::MEMCG_MOD_STATE,
            };
            let traced = if which >= EXTRA_SLAB_RECLAIMABLE_B { val as i64 * delta.signum() } else { delta };
            self.trace_memcg_update(id, memcg, EXTRA_NAMES[which], traced);
        }
        self.memcg.groups[memcg as usize].extra_local[which] += delta;
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            let g = &mut self.memcg.groups[c as usize];
            g.extra[which] += delta;
            cur = g.parent;
        }
        self.memcg_rstat_updated(memcg, val);
    }

    /// `count_memcg_events`: `n` events of `memcg` and its ancestors.
    pub fn count_memcg_events(&mut self, memcg: u16, e: VmEvent, n: i64) {
        if memcg == NO_MEMCG || n == 0 {
            return;
        }
        if self.tp.is_some() {
            self.trace_memcg_update(ev::MEMCG_COUNT_EVENTS, memcg, e.name(), n);
        }
        self.memcg.groups[memcg as usize].stat_local.count_n(e, n);
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            let g = &mut self.memcg.groups[c as usize];
            g.stat.count_n(e, n);
            cur = g.parent;
        }
        self.memcg_rstat_updated(memcg, n.unsigned_abs());
    }

    /// `mod_lruvec_state` of a folio's memcg and the node.
    pub fn mod_lruvec_item(&mut self, head: Pfn, item: VmItem, delta: i64) {
        self.stat.mod_item(item, delta);
        let memcg = self.mem.pages[head.idx()].memcg;
        self.mod_memcg_item(memcg, item, delta);
    }

    /// `css_rstat_flush` of a subtree: the statistics reclaim and memory.stat read catch up.
    pub fn mem_cgroup_flush_subtree(&mut self, root: u16) {
        for m in self.memcg_subtree(root) {
            let g = &mut self.memcg.groups[m as usize];
            g.flushed = g.stat.clone();
            g.flushed_local = g.stat_local.clone();
            g.extra_flushed = g.extra;
            g.extra_flushed_local = g.extra_local;
            g.stats_updates = 0;
            g.pcpu_updates.iter_mut().for_each(|u| *u = 0);
        }
        if root == ROOT_MEMCG {
            self.memcg.flush_last_ns = self.now_ns;
        }
    }

    /// `mem_cgroup_flush_stats`: a reader's flush, only once enough updates are pending.
    pub fn mem_cgroup_flush_stats(&mut self, memcg: u16) {
        let updates = self.memcg.groups[memcg as usize].stats_updates;
        let needs_flush = updates > self.memcg_flush_threshold();
        self.trace(ev::MEMCG_FLUSH_STATS, || {
            format!("memcg_id={memcg} stats_updates={updates} force=0 needs_flush={}", needs_flush as u8)
        });
        if needs_flush {
            self.mem_cgroup_flush_subtree(memcg);
        }
    }

    /// `mem_cgroup_flush_stats_ratelimited`: only if the periodic flush is a whole period
    /// late.
    pub fn mem_cgroup_flush_stats_ratelimited(&mut self) {
        if self.now_ns > self.memcg.flush_last_ns + 2 * FLUSH_TIME_NS {
            self.mem_cgroup_flush_stats(ROOT_MEMCG);
        }
    }

    /// `flush_memcg_stats_dwork`: the periodic flush of everything, every FLUSH_TIME.
    pub(super) fn memcg_periodic_flush(&mut self) {
        while self.now_ns >= self.memcg.flush_next_ns {
            let t = self.memcg.flush_next_ns;
            let saved = self.now_ns;
            self.now_ns = t;
            let updates = self.memcg.groups[ROOT_MEMCG as usize].stats_updates;
            let needs_flush = (updates > self.memcg_flush_threshold()) as u8;
            self.trace(ev::MEMCG_FLUSH_STATS, || {
                format!("memcg_id={ROOT_MEMCG} stats_updates={updates} force=1 needs_flush={needs_flush}")
            });
            self.mem_cgroup_flush_subtree(ROOT_MEMCG);
            self.now_ns = saved;
            self.memcg.flush_next_ns = t + FLUSH_TIME_NS;
        }
    }

    /// `memcg_memory_event`: `memory.events` of the memcg and its ancestors below the root,
    /// and its `memory.events.local` (cgroup v1: the memcg only).
    pub fn memcg_memory_event(&mut self, memcg: u16, e: MemcgEvent) {
        if memcg == NO_MEMCG || memcg == ROOT_MEMCG {
            return;
        }
        self.memcg.groups[memcg as usize].events_local[e as usize] += 1;
        let v1 = self.memcg_v1();
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            if c == ROOT_MEMCG {
                break;
            }
            let g = &mut self.memcg.groups[c as usize];
            g.events[e as usize] += 1;
            if v1 {
                break;
            }
            cur = g.parent;
        }
    }

    /// `memory.swap.events` of a folio's memcg and its ancestors below the root.
    pub fn memcg_swap_event(&mut self, head: Pfn, e: SwapEventKind) {
        let memcg = self.mem.pages[head.idx()].memcg;
        self.memcg_swap_event_of(memcg, e);
    }

    pub(super) fn memcg_swap_event_of(&mut self, memcg: u16, e: SwapEventKind) {
        if memcg == NO_MEMCG || self.memcg_v1() {
            return;
        }
        let mut cur = Some(memcg);
        while let Some(c) = cur {
            if c == ROOT_MEMCG {
                break;
            }
            let g = &mut self.memcg.groups[c as usize];
            g.swap_events[e as usize] += 1;
            cur = g.parent;
        }
    }

    // ---- page counters -------------------------------------------------------------------

    /// `page_counter_try_charge` from `memcg` up: Err(the level that would pass its max),
    /// after undoing the levels below it. v1's memory counter counts the failure.
    pub(super) fn page_counter_try_charge(&mut self, memcg: u16, c: Counter, nr: u64) -> Result<(), u16> {
        let track = c == Counter::Memory && self.memcg_v1();
        let levels: Vec<u16> = self.memcg.ancestors(memcg).collect();
        for (i, &m) in levels.iter().enumerate() {
            let pc = self.memcg.counter(m, c);
            let new = pc.usage + nr;
            if new > pc.max {
                if track {
                    pc.failcnt += 1;
                }
                for &below in &levels[..i] {
                    self.memcg.counter(below, c).usage -= nr;
                }
                return Err(m);
            }
            pc.usage = new;
            pc.watermark = pc.watermark.max(new);
            pc.local_watermark = pc.local_watermark.max(new);
        }
        if c == Counter::Memory {
            self.propagate_protected_usage(memcg);
        }
        Ok(())
    }

    /// `page_counter_charge`: over the limit if need be.
    pub(super) fn page_counter_charge(&mut self, memcg: u16, c: Counter, nr: u64) {
        let levels: Vec<u16> = self.memcg.ancestors(memcg).collect();
        for m in levels {
            let pc = self.memcg.counter(m, c);
            pc.usage += nr;
            pc.watermark = pc.watermark.max(pc.usage);
            pc.local_watermark = pc.local_watermark.max(pc.usage);
        }
        if c == Counter::Memory {
            self.propagate_protected_usage(memcg);
        }
    }

    /// `page_counter_uncharge`.
    pub(super) fn page_counter_uncharge(&mut self, memcg: u16, c: Counter, nr: u64) {
        let levels: Vec<u16> = self.memcg.ancestors(memcg).collect();
        for m in levels {
            let pc = self.memcg.counter(m, c);
            if pc.usage < nr {
                let u = pc.usage;
                pc.usage = 0;
                self.report_bug(format!("memcg {m}: {c:?} uncharge of {nr} pages below zero ({u})"));
            } else {
                pc.usage -= nr;
            }
        }
        if c == Counter::Memory {
            self.propagate_protected_usage(memcg);
        }
    }

    /// `propagate_protected_usage` up from `memcg`: each level's protected usage and its
    /// parent's children sums.
    pub(super) fn propagate_protected_usage(&mut self, memcg: u16) {
        let levels: Vec<u16> = self.memcg.ancestors(memcg).collect();
        for &m in &levels {
            let Some(parent) = self.memcg.groups[m as usize].parent else { break };
            let c = &self.memcg.groups[m as usize].memory;
            let (min_u, low_u) = (c.usage.min(c.min), c.usage.min(c.low));
            let (old_min, old_low) = (c.min_usage, c.low_usage);
            let c = &mut self.memcg.groups[m as usize].memory;
            c.min_usage = min_u;
            c.low_usage = low_u;
            let p = &mut self.memcg.groups[parent as usize].memory;
            p.children_min_usage = p.children_min_usage + min_u - old_min;
            p.children_low_usage = p.children_low_usage + low_u - old_low;
        }
    }

    /// `mem_cgroup_margin`: pages the memcg may still charge (v1: within memsw too).
    pub(super) fn mem_cgroup_margin(&self, memcg: u16) -> u64 {
        let g = &self.memcg.groups[memcg as usize];
        let mut m = g.memory.max.saturating_sub(g.memory.usage);
        if self.memcg_v1() {
            m = m.min(g.memsw.max.saturating_sub(g.memsw.usage));
        }
        m
    }

    // ---- the charge stock ----------------------------------------------------------------

    pub(super) fn stock_cpu(&mut self) -> usize {
        let cpu = self.cur_cpu;
        if self.memcg.stock.len() <= cpu {
            self.memcg.stock.resize(cpu + 1, [(NO_MEMCG, 0); NR_MEMCG_STOCK]);
        }
        cpu
    }

    /// `consume_stock`: take `nr` pages from this CPU's stock of `memcg`.
    pub(super) fn consume_stock(&mut self, memcg: u16, nr: u64) -> bool {
        if nr > MEMCG_CHARGE_BATCH {
            return false;
        }
        let cpu = self.stock_cpu();
        for s in self.memcg.stock[cpu].iter_mut() {
            if s.0 == memcg && s.1 >= nr {
                s.1 -= nr;
                return true;
            }
        }
        false
    }

    /// Give a stock slot's pages back to its memcg's counters.
    pub(super) fn drain_stock_slot(&mut self, cpu: usize, i: usize) {
        let (m, n) = self.memcg.stock[cpu][i];
        self.memcg.stock[cpu][i] = (NO_MEMCG, 0);
        if m != NO_MEMCG && n > 0 {
            self.memcg_uncharge(m, n);
        }
    }

    /// `memcg_uncharge`: `nr` pages off the memory counter, and off memsw on cgroup v1.
    pub(super) fn memcg_uncharge(&mut self, memcg: u16, nr: u64) {
        self.page_counter_uncharge(memcg, Counter::Memory, nr);
        if self.memcg_v1() {
            self.page_counter_uncharge(memcg, Counter::Memsw, nr);
        }
    }

    /// `refill_stock`: `nr` pages charged ahead go to this CPU's stock (a slot over 64 pages,
    /// or an evicted one, is drained).
    pub(super) fn refill_stock(&mut self, memcg: u16, nr: u64) {
        if nr > MEMCG_CHARGE_BATCH {
            self.memcg_uncharge(memcg, nr);
            return;
        }
        let cpu = self.stock_cpu();
        if let Some(i) = self.memcg.stock[cpu].iter().position(|s| s.0 == memcg) {
            self.memcg.stock[cpu][i].1 += nr;
            if self.memcg.stock[cpu][i].1 > MEMCG_CHARGE_BATCH {
                self.drain_stock_slot(cpu, i);
            }
            return;
        }
        let i = match self.memcg.stock[cpu].iter().position(|s| s.0 == NO_MEMCG) {
            Some(i) => i,
            None => {
                // get_random_u32_below(NR_MEMCG_STOCK): a splitmix64 sequence.
                self.memcg.stock_rand = self.memcg.stock_rand.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = self.memcg.stock_rand;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                let i = ((z ^ (z >> 31)) % NR_MEMCG_STOCK as u64) as usize;
                self.drain_stock_slot(cpu, i);
                i
            }
        };
        self.memcg.stock[cpu][i] = (memcg, nr);
    }

    /// `drain_all_stock`: every CPU's stock of `root`'s subtree goes back.
    pub(super) fn drain_all_stock(&mut self, root: u16) {
        for cpu in 0..self.memcg.stock.len().max(self.memcg.obj_stock.len()) {
            for i in 0..NR_MEMCG_STOCK {
                let Some(&(m, _)) = self.memcg.stock.get(cpu).map(|s| &s[i]) else { break };
                if m != NO_MEMCG && self.memcg_is_descendant(m, root) {
                    self.drain_stock_slot(cpu, i);
                }
            }
            self.drain_obj_stock_of(cpu, root);
        }
    }

    /// Pages the charge stocks hold for `memcg`'s subtree.
    pub fn memcg_stock_pages(&self, memcg: u16) -> u64 {
        self.memcg
            .stock
            .iter()
            .flatten()
            .filter(|s| s.0 != NO_MEMCG && self.memcg_is_descendant(s.0, memcg))
            .map(|s| s.1)
            .sum()
    }

    // ---- charging ------------------------------------------------------------------------

    /// `try_charge_memcg`: charge `nr` pages to `memcg` (a batch of 64 when it can, the rest
    /// kept in this CPU's stock): over a limit, reclaim from the memcg over it and retry, 16
    /// times without progress (small charges as long as reclaim makes progress), then its
    /// OOM killer. Err (-ENOMEM) when the charge cannot be made.
    #[allow(clippy::result_unit_err)] // Linux's -ENOMEM, the one way a charge fails
    pub fn try_charge_memcg(&mut self, memcg: u16, gfp_flags: u32, nr: u64) -> Result<(), ()> {
        if memcg == ROOT_MEMCG || memcg == NO_MEMCG {
            return Ok(());
        }
        let v1 = self.memcg_v1();
        let mut batch = nr.max(MEMCG_CHARGE_BATCH);
        let mut retries = super::vmscan::MAX_RECLAIM_RETRIES;
        let mut may_swap = true;
        let mut drained = false;
        let mut raised_max = false;
        let force = 'retry: loop {
            if self.consume_stock(memcg, nr) {
                return Ok(());
            }
            let over;
            let memsw_ok = !v1 || self.page_counter_try_charge(memcg, Counter::Memsw, batch).is_ok();
            if memsw_ok {
                match self.page_counter_try_charge(memcg, Counter::Memory, batch) {
                    Ok(()) => break 'retry false,
                    Err(m) => {
                        if v1 {
                            self.page_counter_uncharge(memcg, Counter::Memsw, batch);
                        }
                        over = m;
                    }
                }
            } else {
                // Swapping cannot help the memory+swap limit.
                over = self.memsw_failing_level(memcg, batch);
                may_swap = false;
            }
            if batch > nr {
                batch = nr;
                continue;
            }
            if self.in_reclaim {
                break 'retry true;
            }
            if gfp_flags & gfp::DIRECT_RECLAIM == 0 {
                return self.charge_nomem(memcg, over, nr, gfp_flags, raised_max);
            }
            self.memcg_memory_event(over, MemcgEvent::Max);
            raised_max = true;
            let reclaimed = self.try_to_free_mem_cgroup_pages(over, nr, gfp_flags, may_swap, false, None);
            if self.mem_cgroup_margin(over) >= nr {
                continue;
            }
            if !drained {
                self.drain_all_stock(over);
                drained = true;
                continue;
            }
            if gfp_flags & gfp::NORETRY != 0 {
                return self.charge_nomem(memcg, over, nr, gfp_flags, raised_max);
            }
            if reclaimed > 0 && nr <= 1 << super::vmscan::PAGE_ALLOC_COSTLY_ORDER {
                continue;
            }
            if retries > 0 {
                retries -= 1;
                continue;
            }
            if gfp_flags & gfp::RETRY_MAYFAIL != 0 {
                return self.charge_nomem(memcg, over, nr, gfp_flags, raised_max);
            }
            // mem_cgroup_oom: a kill means the caller backs out (VM_FAULT_OOM) while its
            // victim exits, then tries again; a task that is itself the victim gets -ENOMEM.
            self.mem_cgroup_oom(over, nr);
            return self.charge_nomem(memcg, over, nr, gfp_flags, raised_max);
        };
        if force {
            if !raised_max {
                self.memcg_memory_event(memcg, MemcgEvent::Max);
            }
            self.page_counter_charge(memcg, Counter::Memory, nr);
            if v1 {
                self.page_counter_charge(memcg, Counter::Memsw, nr);
            }
            return Ok(());
        }
        // done_restock
        if batch > nr {
            self.refill_stock(memcg, batch - nr);
        }
        for m in self.memcg.ancestors(memcg).collect::<Vec<_>>() {
            let g = &self.memcg.groups[m as usize];
            if g.memory.usage > g.memory.high || (!v1 && g.swap.usage > g.swap.high) {
                self.memcg.over_high += batch;
                self.memcg.over_high_memcg = memcg;
                break;
            }
        }
        if self.memcg.over_high > MEMCG_CHARGE_BATCH && !self.in_reclaim && gfp_flags & gfp::DIRECT_RECLAIM != 0 {
            let delay = self.mem_cgroup_handle_over_high();
            self.current.effects.throttle_ns += delay;
        }
        Ok(())
    }

    /// The level whose memsw counter is over (v1), found again for the event.
    pub(super) fn memsw_failing_level(&self, memcg: u16, nr: u64) -> u16 {
        for m in self.memcg.ancestors(memcg) {
            let c = &self.memcg.groups[m as usize].memsw;
            if c.usage + nr > c.max {
                return m;
            }
        }
        memcg
    }

    /// try_charge_memcg's `nomem`: -ENOMEM unless the allocation may not fail (then forced).
    pub(super) fn charge_nomem(
        &mut self,
        memcg: u16,
        over: u16,
        nr: u64,
        gfp_flags: u32,
        raised_max: bool,
    ) -> Result<(), ()> {
        if gfp_flags & (gfp::NOFAIL | gfp::HIGH) == 0 {
            return Err(());
        }
        if !raised_max {
            self.memcg_memory_event(over, MemcgEvent::Max);
        }
        self.page_counter_charge(memcg, Counter::Memory, nr);
        if self.memcg_v1() {
            self.page_counter_charge(memcg, Counter::Memsw, nr);
        }
        Ok(())
    }

    /// `mem_cgroup_oom` -> `mem_cgroup_out_of_memory`: for a charge of up to 8 pages, the
    /// memcg's OOM killer picks the task of its subtree with the highest badness (rss, swap
    /// entries and page tables). Returns whether a victim was chosen (or one is exiting).
    pub(super) fn mem_cgroup_oom(&mut self, memcg: u16, nr: u64) -> bool {
        if nr > 1 << super::vmscan::PAGE_ALLOC_COSTLY_ORDER {
            return false;
        }
        self.memcg_memory_event(memcg, MemcgEvent::Oom);
        if self.oom_victim.is_some() {
            return true;
        }
        if self.mem_cgroup_margin(memcg) >= nr {
            return true;
        }
        let mut best: Option<(i64, MmId)> = None;
        for (i, m) in self.mms.iter().enumerate() {
            let Some(m) = m else { continue };
            if !self.memcg_is_descendant(m.memcg, memcg) {
                continue;
            }
            let points = m.rss_total() + m.swapents + m.pgtables_bytes / self.geo.page_size() as i64;
            if best.is_none_or(|(b, _)| points >= b) {
                best = Some((points, i as MmId));
            }
        }
        let Some((_, victim)) = best else { return false };
        self.stat.count(VmEvent::OomKill);
        let vm = self.mm(victim).memcg;
        self.memcg_memory_event(vm, MemcgEvent::OomKill);
        // memory.oom.group (v2): the highest such ancestor up to the OOMing memcg kills its
        // whole subtree.
        if !self.memcg_v1() {
            let mut group = None;
            for a in self.memcg.ancestors(vm).collect::<Vec<_>>() {
                if self.memcg.groups[a as usize].oom_group {
                    group = Some(a);
                }
                if a == memcg {
                    break;
                }
            }
            if let Some(g) = group {
                self.memcg_memory_event(g, MemcgEvent::OomGroupKill);
                self.oom_group_victims = self
                    .mms
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| {
                        *i as MmId != victim && m.as_ref().is_some_and(|m| self.memcg_is_descendant(m.memcg, g))
                    })
                    .map(|(i, _)| i as MmId)
                    .collect();
            }
        }
        self.oom_victim = Some(victim);
        true
    }

    /// `mem_cgroup_charge` (`charge_memcg` + `commit_charge`): a new folio charged to
    /// `memcg` (v1 counts a pgpgin charge event).
    #[allow(clippy::result_unit_err)] // -ENOMEM
    pub fn mem_cgroup_charge(&mut self, head: Pfn, memcg: u16, gfp_flags: u32) -> Result<(), ()> {
        let nr = self.folio_nr_pages(head);
        self.try_charge_memcg(memcg, gfp_flags, nr)?;
        self.mem.pages[head.idx()].memcg = memcg;
        self.mod_memcg_extra(memcg, EXTRA_PGPGIN, 1);
        Ok(())
    }

    /// `mem_cgroup_uncharge` of a freed folio: its pages leave its memcg's counters at once
    /// (not through the stock); v1 counts a pgpgout event.
    pub fn mem_cgroup_uncharge(&mut self, head: Pfn) {
        let memcg = self.mem.pages[head.idx()].memcg;
        self.mem.pages[head.idx()].memcg = NO_MEMCG;
        if memcg == NO_MEMCG {
            return;
        }
        let nr = self.folio_nr_pages(head);
        if memcg != ROOT_MEMCG {
            self.memcg_uncharge(memcg, nr);
        }
        self.mod_memcg_extra(memcg, EXTRA_PGPGOUT, 1);
    }
}
