//! Memory cgroups' limits and protection as a cgroup's tasks meet them (mm/memcontrol.c):
//! memory.low/min's effective protection, memory.high's throttle on the way back to user
//! space (`mem_cgroup_handle_over_high`), and writes to the interface files (memory.max's
//! reclaim and OOM, memory.reclaim's proactive reclaim).

use super::memcontrol::*;
use super::page_alloc::gfp;
use super::Kernel;
use crate::workload::spec_memcg::Limit;

impl Kernel {
    // ---- protection ----------------------------------------------------------------------

    /// `mem_cgroup_calculate_protection`: `memcg`'s effective memory.min and memory.low for a
    /// reclaim of `root`'s subtree (cgroup v2; v1 has none).
    pub fn mem_cgroup_calculate_protection(&mut self, root: u16, memcg: u16) {
        if self.memcg_v1() || memcg == root {
            return;
        }
        let usage = self.memcg.groups[memcg as usize].memory.usage;
        if usage == 0 {
            return;
        }
        let Some(parent) = self.memcg.groups[memcg as usize].parent else { return };
        let (min, low) = (self.memcg.groups[memcg as usize].memory.min, self.memcg.groups[memcg as usize].memory.low);
        if parent == root {
            let c = &mut self.memcg.groups[memcg as usize].memory;
            c.emin = min;
            c.elow = low;
            return;
        }
        let p = &self.memcg.groups[parent as usize].memory;
        let (pu, pemin, pelow, cmin, clow) = (p.usage, p.emin, p.elow, p.children_min_usage, p.children_low_usage);
        let emin = effective_protection(usage, pu, min, pemin, cmin);
        let elow = effective_protection(usage, pu, low, pelow, clow);
        let c = &mut self.memcg.groups[memcg as usize].memory;
        c.emin = emin;
        c.elow = elow;
    }

    // ---- memory.high ---------------------------------------------------------------------

    /// `__mem_cgroup_handle_over_high` (on the way back to user space): reclaim from each
    /// level over memory.high, and the throttle delay (ns) its overage calls for (none under
    /// two jiffies).
    #[inline]
    pub fn mem_cgroup_handle_over_high(&mut self) -> u64 {
        if self.memcg.over_high == 0 {
            return 0;
        }
        self.mem_cgroup_handle_over_high_slow()
    }

    #[inline(never)]
    fn mem_cgroup_handle_over_high_slow(&mut self) -> u64 {
        let nr = std::mem::take(&mut self.memcg.over_high);
        let memcg = self.memcg.over_high_memcg;
        let mut retries = super::vmscan::MAX_RECLAIM_RETRIES;
        let mut in_retry = false;
        let jiffy = 1_000_000_000 / self.knobs.hz as u64;
        loop {
            if self.oom_victim.is_some_and(|v| Some(v) == self.cur_mm) {
                return 0;
            }
            let reclaimed = self.reclaim_high(memcg, if in_retry { super::vmscan::SWAP_CLUSTER_MAX } else { nr });
            let mut pen = self.calculate_high_delay(memcg, nr, false) + self.calculate_high_delay(memcg, nr, true);
            pen = pen.min(MEMCG_MAX_HIGH_DELAY_NS / jiffy);
            if pen <= self.knobs.hz as u64 / 100 {
                return 0;
            }
            if reclaimed > 0 || retries > 0 {
                if reclaimed == 0 {
                    retries -= 1;
                }
                in_retry = true;
                continue;
            }
            return pen * jiffy;
        }
    }

    /// `reclaim_high`: reclaim `nr` pages from `memcg` and each ancestor over its
    /// memory.high (the high event on each).
    pub(super) fn reclaim_high(&mut self, memcg: u16, nr: u64) -> u64 {
        let mut total = 0;
        for m in self.memcg.ancestors(memcg).collect::<Vec<_>>() {
            if m == ROOT_MEMCG {
                break;
            }
            let c = &self.memcg.groups[m as usize].memory;
            if c.usage <= c.high {
                continue;
            }
            self.memcg_memory_event(m, MemcgEvent::High);
            total += self.try_to_free_mem_cgroup_pages(m, nr, gfp::KERNEL, true, false, None);
        }
        total
    }

    /// `calculate_high_delay` in jiffies: the largest overage of memory (or swap) over its
    /// high among `memcg` and its ancestors, squared and scaled, times `nr` / 64.
    pub(super) fn calculate_high_delay(&mut self, memcg: u16, nr: u64, swap: bool) -> u64 {
        let mut max_overage = 0u64;
        for m in self.memcg.ancestors(memcg).collect::<Vec<_>>() {
            if m == ROOT_MEMCG {
                break;
            }
            let g = &self.memcg.groups[m as usize];
            let c = if swap { &g.swap } else { &g.memory };
            if swap && self.memcg_v1() {
                break;
            }
            if c.usage > c.high {
                let o = ((c.usage - c.high) << 20) / c.high.max(1);
                max_overage = max_overage.max(o);
                if swap {
                    self.memcg_swap_event_of(m, SwapEventKind::High);
                }
            }
        }
        if max_overage == 0 {
            return 0;
        }
        let hz = self.knobs.hz as u128;
        let p = (max_overage as u128 * max_overage as u128 * hz) >> 20 >> 14;
        (p * nr as u128 / MEMCG_CHARGE_BATCH as u128) as u64
    }

    // ---- interface files -----------------------------------------------------------------

    /// A write to one of a cgroup's memory files mid-run (`cgroup_write`, `memory_reclaim`):
    /// Err is the errno's name.
    pub fn memcg_write(&mut self, memcg: u16, file: &str, value: &str) -> Result<(), &'static str> {
        let ps = self.geo.page_size();
        let limit = |v: &str| Limit::parse(v).map(|l| l.pages(ps).min(PAGE_COUNTER_MAX)).map_err(|_| "EINVAL");
        match file {
            "memory.max" => {
                let max = limit(value)?;
                self.memcg.groups[memcg as usize].memory.max = max;
                if self.memcg_v1() {
                    // v1 has memory.limit_in_bytes and memory.memsw.limit_in_bytes: a write of
                    // memory.max keeps memory.swap.max, as the native runner writes them.
                    let g = &mut self.memcg.groups[memcg as usize];
                    g.memsw.max = max.saturating_add(g.swap.max).min(PAGE_COUNTER_MAX);
                }
                // memory_max_write: reclaim down to the limit, then OOM-kill.
                self.drain_all_stock(memcg);
                let mut retries = super::vmscan::MAX_RECLAIM_RETRIES;
                loop {
                    let usage = self.memcg.groups[memcg as usize].memory.usage;
                    if usage <= max {
                        break;
                    }
                    if retries > 0 {
                        let r = self.try_to_free_mem_cgroup_pages(memcg, usage - max, gfp::KERNEL, true, false, None);
                        if r == 0 {
                            retries -= 1;
                        }
                        continue;
                    }
                    self.memcg_memory_event(memcg, MemcgEvent::Oom);
                    if self.oom_victim.is_some() || !self.mem_cgroup_oom_kill_any(memcg) {
                        break;
                    }
                    break;
                }
            }
            "memory.high" => {
                let high = limit(value)?;
                self.memcg.groups[memcg as usize].memory.high = high;
                self.drain_all_stock(memcg);
                let mut retries = super::vmscan::MAX_RECLAIM_RETRIES;
                loop {
                    let usage = self.memcg.groups[memcg as usize].memory.usage;
                    if usage <= high {
                        break;
                    }
                    let r = self.try_to_free_mem_cgroup_pages(memcg, usage - high, gfp::KERNEL, true, false, None);
                    if r == 0 {
                        if retries == 0 {
                            break;
                        }
                        retries -= 1;
                    }
                }
            }
            "memory.low" => {
                self.memcg.groups[memcg as usize].memory.low = limit(value)?;
                self.propagate_protected_usage(memcg);
            }
            "memory.min" => {
                self.memcg.groups[memcg as usize].memory.min = limit(value)?;
                self.propagate_protected_usage(memcg);
            }
            "memory.swap.max" => {
                let v = limit(value)?;
                let g = &mut self.memcg.groups[memcg as usize];
                g.swap.max = v;
                g.memsw.max = g.memory.max.saturating_add(v).min(PAGE_COUNTER_MAX);
            }
            "memory.swap.high" => self.memcg.groups[memcg as usize].swap.high = limit(value)?,
            "memory.oom.group" => self.memcg.groups[memcg as usize].oom_group = value.trim() == "1",
            "memory.peak" => {
                let g = &mut self.memcg.groups[memcg as usize];
                g.memory.local_watermark = g.memory.usage;
            }
            "memory.reclaim" => {
                let (bytes, swappiness) =
                    crate::workload::spec_memcg::parse_reclaim_request(value).map_err(|_| "EINVAL")?;
                return self.user_proactive_reclaim(memcg, bytes / ps, swappiness);
            }
            _ => return Err("EINVAL"),
        }
        Ok(())
    }

    /// A memory.max write's OOM kill of any task of the cgroup: whether one was chosen.
    pub(super) fn mem_cgroup_oom_kill_any(&mut self, memcg: u16) -> bool {
        self.mem_cgroup_oom(memcg, 1)
    }

    /// `user_proactive_reclaim` (memory.reclaim): reclaim in rounds of a quarter of what is
    /// left (at least 32 pages each), 16 rounds without progress at most (-EAGAIN), the last
    /// after draining every CPU's LRU batches.
    pub fn user_proactive_reclaim(
        &mut self,
        memcg: u16,
        pages: u64,
        swappiness: Option<u32>,
    ) -> Result<(), &'static str> {
        let mut retries = super::vmscan::MAX_RECLAIM_RETRIES;
        let mut done = 0;
        while done < pages {
            let batch = (pages - done) / 4;
            if retries == 0 {
                self.lru_add_drain_all();
            }
            let r = self.try_to_free_mem_cgroup_pages(memcg, batch, gfp::KERNEL, true, true, swappiness);
            if r == 0 {
                if retries == 0 {
                    return Err("EAGAIN");
                }
                retries -= 1;
            }
            done += r;
        }
        Ok(())
    }
}

/// `effective_protection` (without memory_recursiveprot): a child's protection, scaled down
/// when its siblings' protected usage overcommits the parent's effective protection.
fn effective_protection(usage: u64, _parent_usage: u64, setting: u64, parent_effective: u64, siblings: u64) -> u64 {
    let protected = usage.min(setting);
    if siblings > parent_effective && siblings > 0 {
        return (protected as u128 * parent_effective as u128 / siblings as u128) as u64;
    }
    protected
}
