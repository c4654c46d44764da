//! The swap side of memory cgroups (mm/memcontrol.c's swap accounting, mm/memcontrol-v1.c's
//! memsw): a swap slot's charge to the cgroup of the folio written there (cgroup v2's
//! memory.swap, v1's memsw at swap-out), its uncharge when the slot is freed, and the limits
//! reclaim reads (`mem_cgroup_get_nr_swap_pages`, `mem_cgroup_swap_full`).

use super::memcontrol::*;
use super::pgtable::SwpEntry;
use super::Kernel;
use crate::units::Pfn;

impl Kernel {
    // ---- swap accounting -----------------------------------------------------------------

    /// `__mem_cgroup_try_charge_swap` (cgroup v2): the folio's slots charged to its memcg's
    /// swap counter and recorded (`swap_cgroup_record`); false (with the max and fail events)
    /// when that would pass memory.swap.max somewhere. On v1 the charge moves at
    /// `memcg1_swapout`.
    pub fn mem_cgroup_try_charge_swap(&mut self, head: Pfn, e: SwpEntry, nr: u32) -> bool {
        let memcg = self.mem.pages[head.idx()].memcg;
        if self.memcg_v1() || memcg == NO_MEMCG {
            return true;
        }
        if memcg != ROOT_MEMCG && self.page_counter_try_charge(memcg, Counter::Swap, nr as u64).is_err() {
            self.memcg_swap_event_of(memcg, SwapEventKind::Max);
            self.memcg_swap_event_of(memcg, SwapEventKind::Fail);
            return false;
        }
        self.mod_memcg_extra(memcg, EXTRA_SWAP, nr as i64);
        for i in 0..nr {
            self.swap.si[e.ty()].memcg[(e.offset() + i) as usize] = memcg;
        }
        true
    }

    /// `memcg1_swapout` (cgroup v1): a folio leaving the swap cache hands its memsw charge to
    /// its swap entries; its memory charge goes (pgpgout), the folio is no longer charged.
    pub fn memcg1_swapout(&mut self, head: Pfn, e: SwpEntry) {
        if !self.memcg_v1() {
            return;
        }
        let memcg = self.mem.pages[head.idx()].memcg;
        if memcg == NO_MEMCG {
            return;
        }
        let nr = self.folio_nr_pages(head);
        self.mod_memcg_extra(memcg, EXTRA_SWAP, nr as i64);
        for i in 0..nr as u32 {
            self.swap.si[e.ty()].memcg[(e.offset() + i) as usize] = memcg;
        }
        self.mem.pages[head.idx()].memcg = NO_MEMCG;
        if memcg != ROOT_MEMCG {
            self.page_counter_uncharge(memcg, Counter::Memory, nr);
        }
        self.mod_memcg_extra(memcg, EXTRA_PGPGOUT, 1);
    }

    /// `memcg1_swapin` (cgroup v1): a swapped-in folio is charged again, so its slots' memsw
    /// charge goes at once (their record cleared).
    pub fn memcg1_swapin(&mut self, e: SwpEntry, nr: u32) {
        if !self.memcg_v1() {
            return;
        }
        self.mem_cgroup_uncharge_swap(e, nr);
    }

    /// `__mem_cgroup_uncharge_swap`: slots freed (or swapped in, v1) leave the swap charge of
    /// the memcg recorded for them.
    pub fn mem_cgroup_uncharge_swap(&mut self, e: SwpEntry, nr: u32) {
        for i in 0..nr {
            let off = (e.offset() + i) as usize;
            let memcg = std::mem::replace(&mut self.swap.si[e.ty()].memcg[off], NO_MEMCG);
            if memcg == NO_MEMCG {
                continue;
            }
            if memcg != ROOT_MEMCG {
                let c = if self.memcg_v1() { Counter::Memsw } else { Counter::Swap };
                self.page_counter_uncharge(memcg, c, 1);
            }
            self.mod_memcg_extra(memcg, EXTRA_SWAP, -1);
        }
    }

    /// The memcg a swap-in of `e` charges (`mem_cgroup_swapin_charge_folio`): the one recorded
    /// for the slot, else `memcg` (the faulting mm's).
    pub fn swap_memcg_or(&self, e: SwpEntry, memcg: u16) -> u16 {
        match self.swap.si[e.ty()].memcg[e.offset() as usize] {
            NO_MEMCG => memcg,
            m => m,
        }
    }

    /// `mem_cgroup_get_nr_swap_pages`: free swap, within every ancestor's memory.swap.max
    /// (v2).
    pub fn mem_cgroup_get_nr_swap_pages(&self, memcg: u16) -> i64 {
        let mut n = self.swap.nr_swap_pages;
        if self.memcg_v1() {
            return n;
        }
        for m in self.memcg.ancestors(memcg) {
            if m == ROOT_MEMCG {
                break;
            }
            let c = &self.memcg.groups[m as usize].swap;
            n = n.min(c.max.saturating_sub(c.usage) as i64);
        }
        n
    }

    /// `mem_cgroup_swap_full`: swap half used, or (v2) some ancestor's swap half of its
    /// swap.high or swap.max.
    pub fn mem_cgroup_swap_full(&self, head: Pfn) -> bool {
        if self.vm_swap_full() {
            return true;
        }
        let memcg = self.mem.pages[head.idx()].memcg;
        if self.memcg_v1() || memcg == NO_MEMCG {
            return false;
        }
        for m in self.memcg.ancestors(memcg) {
            if m == ROOT_MEMCG {
                break;
            }
            let c = &self.memcg.groups[m as usize].swap;
            if c.usage * 2 >= c.high || c.usage * 2 >= c.max {
                return true;
            }
        }
        false
    }

    /// `mem_cgroup_swappiness`: vm/swappiness (cgroup v1's per-cgroup file is not modelled:
    /// it starts as vm/swappiness).
    pub fn mem_cgroup_swappiness(&self, _memcg: u16) -> u32 {
        self.knobs.reclaim.swappiness
    }
}
