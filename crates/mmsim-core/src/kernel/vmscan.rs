//! Page reclaim (mm/vmscan.c, classic LRU as Linux 6.18 without CONFIG_LRU_GEN): direct
//! reclaim (`try_to_free_pages`), memcg reclaim (`try_to_free_mem_cgroup_pages`), kswapd's
//! `balance_pgdat` (run a priority level at a time by its thread, workload/interp/kswapd.rs),
//! and MADV_PAGEOUT's `reclaim_pages`, over `shrink_node` -> `shrink_node_memcgs` ->
//! `shrink_lruvec` (`get_scan_count`) -> `shrink_active_list` / `shrink_inactive_list` ->
//! `shrink_folio_list` (`folio_check_references`, swap allocation, `try_to_unmap`,
//! `pageout`, `__remove_mapping`).
//!
//! Differs from Linux: one node with one zone; no compaction (`compaction_ready` is never
//! true); no slab shrinkers but the deferred split queue and the huge zero folio
//! (`shrink_slab`); regular files' dirty folios are never written by reclaim, as in Linux:
//! it wakes the flusher threads (kernel/fs_writeback.rs), whose writeback ends at once;
//! races that a concurrent kernel loses (trylocks, speculative references) never happen.

use super::lruvec::Lru;
use super::mm::vm;
use super::mm_types::pg;
use super::page_alloc::gfp;
use super::vmstat::{VmEvent, VmItem};
use super::{Kernel, Work};
use crate::units::Pfn;

/// `SWAP_CLUSTER_MAX`: the batch reclaim isolates and the least it aims to free.
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// `DEF_PRIORITY`: the first scan looks at 1/4096 of each list.
pub const DEF_PRIORITY: i32 = 12;
/// `MAX_RECLAIM_RETRIES`.
pub const MAX_RECLAIM_RETRIES: u32 = 16;
/// `PAGE_ALLOC_COSTLY_ORDER`.
pub const PAGE_ALLOC_COSTLY_ORDER: u32 = 3;

/// Who reclaims (`reclaimer_offset`): which pgscan_* / pgsteal_* count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reclaimer {
    Kswapd,
    #[default]
    Direct,
    Khugepaged,
    Proactive,
}

impl Reclaimer {
    pub(super) fn pgscan(self) -> VmEvent {
        match self {
            Reclaimer::Kswapd => VmEvent::PgscanKswapd,
            Reclaimer::Direct => VmEvent::PgscanDirect,
            Reclaimer::Khugepaged => VmEvent::PgscanKhugepaged,
            Reclaimer::Proactive => VmEvent::PgscanProactive,
        }
    }
    pub(super) fn pgsteal(self) -> VmEvent {
        match self {
            Reclaimer::Kswapd => VmEvent::PgstealKswapd,
            Reclaimer::Direct => VmEvent::PgstealDirect,
            Reclaimer::Khugepaged => VmEvent::PgstealKhugepaged,
            Reclaimer::Proactive => VmEvent::PgstealProactive,
        }
    }
}

/// `sc->may_deactivate` bits.
pub(super) const DEACTIVATE_ANON: u8 = 1;
pub(super) const DEACTIVATE_FILE: u8 = 2;

/// `struct scan_control`.
#[derive(Clone, Debug, Default)]
pub struct ScanControl {
    pub nr_to_reclaim: u64,
    pub nr_reclaimed: u64,
    pub nr_scanned: u64,
    pub priority: i32,
    pub order: u32,
    pub gfp: u32,
    /// The memcg whose limit is being enforced (None: global reclaim).
    pub target: Option<u16>,
    pub may_writepage: bool,
    pub may_unmap: bool,
    pub may_swap: bool,
    pub proactive: bool,
    /// memory.reclaim's `swappiness=` (201: anonymous memory only).
    pub swappiness: Option<u32>,
    pub reclaimer: Reclaimer,
    pub(super) may_deactivate: u8,
    pub(super) force_deactivate: bool,
    pub(super) skipped_deactivate: bool,
    pub memcg_low_reclaim: bool,
    pub memcg_low_skipped: bool,
    pub(super) memcg_full_walk: bool,
    pub(super) cache_trim_mode: bool,
    pub(super) cache_trim_mode_failed: bool,
    pub(super) no_cache_trim_mode: bool,
    pub(super) file_is_tiny: bool,
    pub(super) anon_cost: u64,
    pub(super) file_cost: u64,
    /// This `shrink_node` pass's totals (`sc->nr`).
    pub(super) nr: NodeStat,
}

/// `sc->nr`: what the inactive lists' folios were found in, this pass.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeStat {
    dirty: u64,
    unqueued_dirty: u64,
    congested: u64,
    writeback: u64,
    immediate: u64,
    file_taken: u64,
    taken: u64,
}

/// `struct reclaim_stat`: what `shrink_folio_list` did.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReclaimStat {
    pub nr_dirty: u64,
    pub nr_unqueued_dirty: u64,
    pub nr_congested: u64,
    pub nr_writeback: u64,
    pub nr_immediate: u64,
    pub nr_pageout: u64,
    pub nr_activate: [u64; 2],
    pub nr_ref_keep: u64,
    pub nr_unmap_fail: u64,
    pub nr_lazyfree_fail: u64,
}

impl ReclaimStat {
    /// The fields the vmscan tracepoints print after nr_scanned and nr_reclaimed.
    fn trace_fields(&self) -> String {
        format!(
            "nr_dirty={} nr_writeback={} nr_congested={} nr_immediate={} nr_activate_anon={} nr_activate_file={} \
             nr_ref_keep={} nr_unmap_fail={}",
            self.nr_dirty,
            self.nr_writeback,
            self.nr_congested,
            self.nr_immediate,
            self.nr_activate[0],
            self.nr_activate[1],
            self.nr_ref_keep,
            self.nr_unmap_fail
        )
    }
}

/// `enum folio_references`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FolioRef {
    Reclaim,
    ReclaimClean,
    Keep,
    Activate,
}

/// What becomes of a folio in `shrink_folio_list`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Free,
    Keep,
    Activate,
    /// Look at it again: it is back on the list (cgroup v1's memcg reclaim waited for its
    /// writeback).
    Retry,
}

pub use super::kswapd::{BalanceState, KswapdState, KswapdStep};
pub use super::vmscan_folio::PageoutResult;

impl Kernel {
    // ---- the lruvec's sizes as reclaim reads them -------------------------------------

    /// `lruvec_page_state` of an LRU list for the memcg's lruvec: the statistics as last
    /// flushed (rstat), hierarchical.
    pub(super) fn lruvec_lru_state(&self, memcg: u16, lru: Lru) -> u64 {
        self.memcg.groups[memcg as usize].flushed.items[lru.item()].max(0) as u64
    }

    /// `lruvec_lru_size`: the pages on one list of this memcg's own lruvec (exact).
    pub(super) fn lruvec_lru_size(&self, memcg: u16, lru: Lru) -> u64 {
        self.memcg.groups[memcg as usize].lruvec.size[lru as usize]
    }

    /// `inactive_is_low`: the inactive list of a type is smaller than the active one over
    /// `inactive_ratio` (sqrt(10 x GiB), 1 below 1 GiB).
    pub fn inactive_is_low(&self, memcg: u16, inactive: Lru) -> bool {
        let active = if inactive == Lru::InactiveAnon { Lru::ActiveAnon } else { Lru::ActiveFile };
        let i = self.lruvec_lru_state(memcg, inactive);
        let a = self.lruvec_lru_state(memcg, active);
        let gb = (i + a) >> (30 - self.geo.page_shift);
        let ratio = if gb > 0 { super::mmzone::int_sqrt(10 * gb) } else { 1 };
        i * ratio < a
    }

    /// `can_reclaim_anon_pages` / `can_age_anon_pages`: there is swap to put anonymous
    /// memory in (for a memcg: within its and its ancestors' memory.swap.max).
    pub(super) fn can_reclaim_anon_pages(&self, memcg: Option<u16>) -> bool {
        match memcg {
            None => self.swap.nr_swap_pages > 0,
            Some(m) => self.mem_cgroup_get_nr_swap_pages(m) > 0,
        }
    }

    /// The swappiness reclaim of `memcg` uses (`mem_cgroup_swappiness`, or memory.reclaim's).
    pub(super) fn sc_swappiness(&self, sc: &ScanControl, memcg: u16) -> u32 {
        if sc.proactive {
            if let Some(s) = sc.swappiness {
                return s;
            }
        }
        self.mem_cgroup_swappiness(memcg)
    }

    // ---- entry points -------------------------------------------------------------------

    /// `try_to_free_pages`: direct reclaim for an allocation of `order` (allocstall_* counts
    /// each pass by the allocation's zone). Returns the pages reclaimed.
    pub fn try_to_free_pages(&mut self, order: u32, gfp_flags: u32) -> u64 {
        let mut sc = ScanControl {
            nr_to_reclaim: SWAP_CLUSTER_MAX,
            priority: DEF_PRIORITY,
            order,
            gfp: gfp_flags,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            reclaimer: self.current_reclaimer(),
            ..Default::default()
        };
        self.trace(crate::tracepoints::ev::VMSCAN_DIRECT_RECLAIM_BEGIN, || {
            format!("order={order} gfp_flags={}", gfp::name(gfp_flags))
        });
        let r = self.do_try_to_free_pages(&mut sc);
        self.trace(crate::tracepoints::ev::VMSCAN_DIRECT_RECLAIM_END, || format!("nr_reclaimed={r}"));
        r
    }

    /// The reclaimer the current context is (kswapd and khugepaged set it).
    pub(super) fn current_reclaimer(&self) -> Reclaimer {
        self.reclaimer
    }

    /// `try_to_free_mem_cgroup_pages`: reclaim at least `nr_pages` (32 at least) from
    /// `memcg`'s subtree. Returns the pages reclaimed.
    pub fn try_to_free_mem_cgroup_pages(
        &mut self,
        memcg: u16,
        nr_pages: u64,
        gfp_flags: u32,
        may_swap: bool,
        proactive: bool,
        swappiness: Option<u32>,
    ) -> u64 {
        let mut sc = ScanControl {
            nr_to_reclaim: nr_pages.max(SWAP_CLUSTER_MAX),
            priority: DEF_PRIORITY,
            gfp: gfp_flags,
            target: Some(memcg),
            may_writepage: true,
            may_unmap: true,
            may_swap,
            proactive,
            swappiness,
            reclaimer: if proactive { Reclaimer::Proactive } else { self.current_reclaimer() },
            ..Default::default()
        };
        self.trace(crate::tracepoints::ev::VMSCAN_MEMCG_RECLAIM_BEGIN, || {
            format!("order=0 gfp_flags={}", gfp::name(gfp_flags))
        });
        let saved = std::mem::replace(&mut self.in_reclaim, true);
        let r = self.do_try_to_free_pages(&mut sc);
        self.in_reclaim = saved;
        self.trace(crate::tracepoints::ev::VMSCAN_MEMCG_RECLAIM_END, || format!("nr_reclaimed={r}"));
        r
    }

    /// `do_try_to_free_pages`: priority 12 down to 0 until enough is reclaimed; if nothing
    /// was, again with a full memcg walk, with forced deactivation, then below memory.low.
    pub(super) fn do_try_to_free_pages(&mut self, sc: &mut ScanControl) -> u64 {
        let initial = sc.priority;
        let saved = std::mem::replace(&mut self.in_reclaim, true);
        loop {
            if sc.target.is_none() {
                let e = if sc.gfp & gfp::MOVABLE != 0 { VmEvent::AllocStallMovable } else { VmEvent::AllocStallNormal };
                self.stat.count(e);
            }
            loop {
                sc.nr_scanned = 0;
                self.shrink_node(sc);
                if sc.nr_reclaimed >= sc.nr_to_reclaim {
                    break;
                }
                if sc.priority < DEF_PRIORITY - 2 {
                    sc.may_writepage = true;
                }
                sc.priority -= 1;
                if sc.priority < 0 {
                    break;
                }
            }
            self.snapshot_refaults(sc.target.unwrap_or(super::memcontrol::ROOT_MEMCG));
            if sc.nr_reclaimed > 0 {
                break;
            }
            if !sc.memcg_full_walk {
                sc.priority = initial;
                sc.memcg_full_walk = true;
                continue;
            }
            if sc.skipped_deactivate {
                sc.priority = initial;
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
                continue;
            }
            if sc.memcg_low_skipped {
                sc.priority = initial;
                sc.force_deactivate = false;
                sc.memcg_low_reclaim = true;
                sc.memcg_low_skipped = false;
                continue;
            }
            break;
        }
        self.in_reclaim = saved;
        sc.nr_reclaimed
    }

    /// `snapshot_refaults`: the refault counts reclaim's next run compares against.
    pub(super) fn snapshot_refaults(&mut self, target: u16) {
        let g = &self.memcg.groups[target as usize];
        let a = g.stat.items[VmItem::WorkingsetActivateAnon];
        let f = g.stat.items[VmItem::WorkingsetActivateFile];
        let lv = &mut self.memcg.groups[target as usize].lruvec;
        lv.refaults = [a, f];
    }

    // ---- shrink_node ---------------------------------------------------------------------

    /// `prepare_scan_control`: this pass's costs, whether the active lists may be
    /// deactivated (refaults since the last run, or an inactive list too small), the cache
    /// trim mode and whether the file cache is tiny.
    pub(super) fn prepare_scan_control(&mut self, sc: &mut ScanControl) {
        let target = sc.target.unwrap_or(super::memcontrol::ROOT_MEMCG);
        self.mem_cgroup_flush_stats_ratelimited();
        let lv = &self.memcg.groups[target as usize].lruvec;
        sc.anon_cost = lv.anon_cost;
        sc.file_cost = lv.file_cost;
        let refaults = lv.refaults;
        let st = &self.memcg.groups[target as usize].flushed.items;
        if sc.force_deactivate {
            sc.may_deactivate = DEACTIVATE_ANON | DEACTIVATE_FILE;
        } else {
            sc.may_deactivate = 0;
            if st[VmItem::WorkingsetActivateAnon] != refaults[0] || self.inactive_is_low(target, Lru::InactiveAnon) {
                sc.may_deactivate |= DEACTIVATE_ANON;
            }
            if st[VmItem::WorkingsetActivateFile] != refaults[1] || self.inactive_is_low(target, Lru::InactiveFile) {
                sc.may_deactivate |= DEACTIVATE_FILE;
            }
        }
        let inactive_file = self.lruvec_lru_state(target, Lru::InactiveFile);
        sc.cache_trim_mode =
            (inactive_file >> sc.priority) != 0 && sc.may_deactivate & DEACTIVATE_FILE == 0 && !sc.no_cache_trim_mode;
        sc.file_is_tiny = false;
        if sc.target.is_none() {
            let file = self.stat.items[VmItem::NrActiveFile] + self.stat.items[VmItem::NrInactiveFile];
            let free = self.mem.free_pages as i64;
            let high = self.wmark_pages(super::mmzone::Wmark::High) as i64;
            let anon = self.stat.items[VmItem::NrInactiveAnon].max(0) as u64;
            sc.file_is_tiny =
                file + free <= high && sc.may_deactivate & DEACTIVATE_ANON == 0 && (anon >> sc.priority) != 0;
        }
    }

    /// `shrink_node`: one pass over the node's memcgs.
    pub fn shrink_node(&mut self, sc: &mut ScanControl) {
        sc.nr = NodeStat::default();
        let before = sc.nr_reclaimed;
        self.prepare_scan_control(sc);
        self.blk_start_plug();
        self.shrink_node_memcgs(sc);
        self.blk_finish_plug();
        // The slab shrinkers mmsim has (global reclaim: every memcg's).
        if sc.target.is_none() {
            let freed = self.shrink_slab();
            sc.nr_reclaimed += freed;
        }
        if sc.reclaimer == Reclaimer::Kswapd {
            if sc.nr.writeback > 0 && sc.nr.writeback == sc.nr.taken {
                self.pgdat_writeback = true;
            }
            if sc.nr.unqueued_dirty > 0 && sc.nr.unqueued_dirty == sc.nr.file_taken {
                self.pgdat_dirty = true;
            }
        }
        let reclaimed = sc.nr_reclaimed - before;
        if reclaimed > 0 {
            self.kswapd.failures = 0;
        } else if sc.cache_trim_mode {
            sc.cache_trim_mode_failed = true;
        }
    }

    /// `shrink_node_memcgs`: the target's subtree in pre-order (a direct reclaimer's walk
    /// resumes where the last one stopped and ends once enough is reclaimed); memcgs under
    /// memory.min are skipped, under memory.low skipped unless nothing else was reclaimable.
    pub(super) fn shrink_node_memcgs(&mut self, sc: &mut ScanControl) {
        let target = sc.target.unwrap_or(super::memcontrol::ROOT_MEMCG);
        let order = self.memcg_subtree(target);
        let partial = sc.reclaimer != Reclaimer::Kswapd && !sc.memcg_full_walk;
        let start = if partial { self.memcg.iter_pos.get(&target).copied().unwrap_or(0) % order.len() } else { 0 };
        for k in 0..order.len() {
            let i = (start + k) % order.len();
            let memcg = order[i];
            self.mem_cgroup_calculate_protection(target, memcg);
            if memcg != target {
                let usage = self.memcg.groups[memcg as usize].memory.usage;
                let (emin, elow) =
                    (self.memcg.groups[memcg as usize].memory.emin, self.memcg.groups[memcg as usize].memory.elow);
                if emin >= usage && usage > 0 {
                    continue;
                }
                if elow >= usage && usage > 0 {
                    if !sc.memcg_low_reclaim {
                        sc.memcg_low_skipped = true;
                        continue;
                    }
                    self.memcg_memory_event(memcg, super::memcontrol::MemcgEvent::Low);
                }
            }
            self.shrink_lruvec(memcg, sc);
            if partial && sc.nr_reclaimed >= sc.nr_to_reclaim {
                self.memcg.iter_pos.insert(target, i + 1);
                return;
            }
        }
        if partial {
            self.memcg.iter_pos.insert(target, start);
        }
    }

    /// `get_scan_count`: how many pages of each evictable list to scan at this priority.
    pub(super) fn get_scan_count(&mut self, memcg: u16, sc: &mut ScanControl) -> [u64; 4] {
        #[derive(PartialEq)]
        enum Balance {
            Equal,
            Fract,
            Anon,
            File,
        }
        let swappiness = self.sc_swappiness(sc, memcg);
        let cgroup_reclaim = sc.target.is_some();
        let mut fraction = [0u64; 2];
        let mut denominator = 1u64;
        let no_anon = !sc.may_swap || !self.can_reclaim_anon_pages(sc.target.map(|_| memcg));
        let balance = if no_anon || (cgroup_reclaim && swappiness == 0) {
            Balance::File
        } else if swappiness == crate::workload::spec_memcg::SWAPPINESS_ANON_ONLY {
            Balance::Anon
        } else if sc.priority == 0 && swappiness != 0 {
            Balance::Equal
        } else if sc.file_is_tiny {
            Balance::Anon
        } else if sc.cache_trim_mode {
            Balance::File
        } else {
            let (a, f) = (sc.anon_cost, sc.file_cost);
            let total = 3 * (a + f);
            let ap = swappiness as u64 * (total + 1) / (2 * a + f + 1);
            let fp = (200 - swappiness.min(200)) as u64 * (total + 1) / (a + 2 * f + 1);
            fraction = [ap, fp];
            denominator = ap + fp;
            Balance::Fract
        };
        let mut nr = [0u64; 4];
        for lru in Lru::EVICTABLE {
            let size = self.lruvec_lru_size(memcg, lru);
            let mut scan = self.apply_proportional_protection(memcg, sc, size);
            scan >>= sc.priority;
            let file = lru.is_file() as usize;
            scan = match balance {
                Balance::Equal => scan,
                Balance::Fract => (scan * fraction[file]).checked_div(denominator).unwrap_or(0),
                Balance::File => {
                    if file == 1 {
                        scan
                    } else {
                        0
                    }
                }
                Balance::Anon => {
                    if file == 0 {
                        scan
                    } else {
                        0
                    }
                }
            };
            nr[lru as usize] = scan;
        }
        nr
    }

    /// `apply_proportional_protection`: a memcg protected by memory.min/low is scanned less,
    /// in proportion to how much of its usage is protected.
    pub(super) fn apply_proportional_protection(&mut self, memcg: u16, sc: &mut ScanControl, scan: u64) -> u64 {
        let target = sc.target.unwrap_or(super::memcontrol::ROOT_MEMCG);
        if memcg == target {
            return scan;
        }
        let c = &self.memcg.groups[memcg as usize].memory;
        let (min, low) = (c.emin, c.elow);
        if min == 0 && low == 0 {
            return scan;
        }
        let protection = if !sc.memcg_low_reclaim && low > min {
            sc.memcg_low_skipped = true;
            low
        } else {
            min
        };
        let size = c.usage.max(protection);
        let s = scan - (scan as u128 * protection as u128 / (size as u128 + 1)) as u64;
        s.max(SWAP_CLUSTER_MAX)
    }

    /// `shrink_lruvec`: scan the lists in batches of 32 until the counts are done, or (for
    /// kswapd and memcg reclaim, and below the first priority) enough was reclaimed; then
    /// age the active anonymous list if its inactive one is low.
    pub(super) fn shrink_lruvec(&mut self, memcg: u16, sc: &mut ScanControl) {
        let mut nr = self.get_scan_count(memcg, sc);
        let targets = nr;
        let proportional = sc.target.is_none() && sc.reclaimer != Reclaimer::Kswapd && sc.priority == DEF_PRIORITY;
        let mut reclaimed = 0;
        let (ia, aa, ifl, af) = (0, 1, 2, 3);
        while nr[ia] > 0 || nr[af] > 0 || nr[ifl] > 0 {
            for lru in Lru::EVICTABLE {
                let i = lru as usize;
                if nr[i] > 0 {
                    let k = nr[i].min(SWAP_CLUSTER_MAX);
                    nr[i] -= k;
                    reclaimed += self.shrink_list(lru, k, memcg, sc);
                }
            }
            if reclaimed < sc.nr_to_reclaim || proportional {
                continue;
            }
            let nf = nr[ifl] + nr[af];
            let na = nr[ia] + nr[aa];
            if nf == 0 || na == 0 {
                break;
            }
            let (small, big, pct) = if nf > na {
                ((ia, aa), (ifl, af), na * 100 / (targets[ia] + targets[aa] + 1))
            } else {
                ((ifl, af), (ia, aa), nf * 100 / (targets[ifl] + targets[af] + 1))
            };
            nr[small.0] = 0;
            nr[small.1] = 0;
            for l in [big.0, big.1] {
                let done = targets[l] - nr[l];
                let mut n = targets[l] * (100 - pct.min(100)) / 100;
                n -= n.min(done);
                nr[l] = n;
            }
        }
        sc.nr_reclaimed += reclaimed;
        if self.swap.total_swap_pages > 0 && self.inactive_is_low(memcg, Lru::InactiveAnon) {
            self.shrink_active_list(SWAP_CLUSTER_MAX, memcg, sc, Lru::ActiveAnon);
        }
    }

    /// `shrink_list`.
    pub(super) fn shrink_list(&mut self, lru: Lru, nr: u64, memcg: u16, sc: &mut ScanControl) -> u64 {
        if lru.is_active() {
            let bit = if lru.is_file() { DEACTIVATE_FILE } else { DEACTIVATE_ANON };
            if sc.may_deactivate & bit != 0 {
                self.shrink_active_list(nr, memcg, sc, lru);
            } else {
                sc.skipped_deactivate = true;
            }
            return 0;
        }
        self.shrink_inactive_list(nr, memcg, sc, lru)
    }

    /// `isolate_lru_folios`: up to `nr` pages off the tail of a list (each a reference, off
    /// the LRU); returns the folios, oldest first, and the pages scanned.
    pub(super) fn isolate_lru_folios(&mut self, nr: u64, memcg: u16, lru: Lru, sc: &ScanControl) -> (Vec<Pfn>, u64) {
        let mut out = Vec::new();
        let mut scan = 0;
        let mut total = 0;
        let mut skipped: Vec<Pfn> = Vec::new();
        while scan < nr {
            let Some(f) = self.lru_tail(memcg, lru) else { break };
            let n = self.folio_nr_pages(f);
            total += n;
            scan += n;
            let mapped = self.folio_mapcount(f) > 0;
            if !sc.may_unmap && mapped {
                // Back to the list's head.
                self.lruvec_del_folio(f);
                skipped.push(f);
                continue;
            }
            self.lruvec_del_folio(f);
            self.mem.pages[f.idx()].clear(pg::LRU);
            self.folio_get(f);
            out.push(f);
        }
        for f in skipped {
            self.lruvec_add_folio(f);
        }
        let taken: u64 = out.iter().map(|&f| self.folio_nr_pages(f)).sum();
        self.trace(crate::tracepoints::ev::VMSCAN_LRU_ISOLATE, || {
            format!(
                "classzone=2 order={} nr_requested={nr} nr_scanned={total} nr_skipped=0 nr_taken={taken} lru={}",
                sc.order,
                lru.name()
            )
        });
        (out, total)
    }

    /// The isolated pages of a type (NR_ISOLATED_ANON/FILE) change by `n`.
    pub(super) fn mod_isolated(&mut self, memcg: u16, file: bool, n: i64) {
        let item = if file { VmItem::NrIsolatedFile } else { VmItem::NrIsolatedAnon };
        self.stat.mod_item(item, n);
        self.mod_memcg_item(memcg, item, n);
    }

    /// Count a reclaim event: globally unless this is memcg reclaim, and in the memcg.
    pub(super) fn count_reclaim(&mut self, memcg: u16, sc: &ScanControl, e: VmEvent, n: u64) {
        if n == 0 {
            return;
        }
        if sc.target.is_none() {
            self.stat.count_n(e, n as i64);
        }
        self.count_memcg_events(memcg, e, n as i64);
    }

    /// `shrink_inactive_list`: isolate a batch, `shrink_folio_list` it, put back what
    /// stays; count pgscan/pgsteal and the costs.
    pub(super) fn shrink_inactive_list(&mut self, nr: u64, memcg: u16, sc: &mut ScanControl, lru: Lru) -> u64 {
        self.lru_add_drain();
        let file = lru.is_file();
        let (list, scanned) = self.isolate_lru_folios(nr, memcg, lru, sc);
        let taken: u64 = list.iter().map(|&f| self.folio_nr_pages(f)).sum();
        self.mod_isolated(memcg, file, taken as i64);
        self.count_reclaim(memcg, sc, sc.reclaimer.pgscan(), scanned);
        self.stat.count_n(if file { VmEvent::PgscanFile } else { VmEvent::PgscanAnon }, scanned as i64);
        self.kernel_cycles(self.cost.reclaim_scan * scanned as f64, "shrink_inactive_list");
        if taken == 0 {
            return 0;
        }
        let mut stat = ReclaimStat::default();
        let (reclaimed, rest) = self.shrink_folio_list(list, sc, &mut stat, false, memcg);
        self.move_folios_to_lru(rest);
        self.mod_isolated(memcg, file, -(taken as i64));
        self.count_reclaim(memcg, sc, sc.reclaimer.pgsteal(), reclaimed);
        if reclaimed > 0 {
            self.stat.count_n(if file { VmEvent::PgstealFile } else { VmEvent::PgstealAnon }, reclaimed as i64);
        }
        self.lru_note_cost(memcg, file, stat.nr_pageout, scanned - reclaimed.min(scanned));
        // Dirty folios not queued for I/O at the LRU's end: the flushers are asleep (or
        // behind); wake them. cgroup v1's reclaim then sleeps until writeback progresses, its
        // only dirty throttling.
        if stat.nr_unqueued_dirty == taken {
            let (_, wake_at) = self.wakeup_flusher_threads();
            if !self.writeback_throttling_sane(sc) {
                self.reclaim_throttle_writeback(wake_at);
            }
        }
        sc.nr.dirty += stat.nr_dirty;
        sc.nr.congested += stat.nr_congested;
        sc.nr.unqueued_dirty += stat.nr_unqueued_dirty;
        sc.nr.writeback += stat.nr_writeback;
        sc.nr.immediate += stat.nr_immediate;
        sc.nr.taken += taken;
        if file {
            sc.nr.file_taken += taken;
        }
        let prio = sc.priority;
        self.trace(crate::tracepoints::ev::VMSCAN_LRU_SHRINK_INACTIVE, || {
            format!(
                "nid=0 nr_scanned={scanned} nr_reclaimed={reclaimed} {} priority={prio} flags={}",
                stat.trace_fields(),
                if file { "RECLAIM_WB_FILE|RECLAIM_WB_ASYNC" } else { "RECLAIM_WB_ANON|RECLAIM_WB_ASYNC" }
            )
        });
        reclaimed
    }

    /// `shrink_active_list`: isolate a batch of an active list; executable file pages used
    /// since stay active, everything else goes to the inactive list (PG_workingset set).
    pub(super) fn shrink_active_list(&mut self, nr: u64, memcg: u16, sc: &mut ScanControl, lru: Lru) {
        self.lru_add_drain();
        let file = lru.is_file();
        let (list, scanned) = self.isolate_lru_folios(nr, memcg, lru, sc);
        let taken: u64 = list.iter().map(|&f| self.folio_nr_pages(f)).sum();
        self.mod_isolated(memcg, file, taken as i64);
        self.count_reclaim(memcg, sc, VmEvent::PgRefill, scanned);
        self.kernel_cycles(self.cost.reclaim_scan * scanned as f64, "shrink_active_list");
        let mut active = Vec::new();
        let mut inactive = Vec::new();
        let mut rotated = 0;
        for f in list {
            if !self.folio_evictable(f) {
                self.folio_putback_lru(f);
                continue;
            }
            let (refs, flags) = self.folio_referenced(f, sc.target);
            if refs > 0 && flags & vm::EXEC != 0 && self.folio_is_file_lru(f) {
                rotated += self.folio_nr_pages(f);
                active.push(f);
                continue;
            }
            self.mem.pages[f.idx()].clear(pg::ACTIVE);
            self.mem.pages[f.idx()].set(pg::WORKINGSET);
            inactive.push(f);
        }
        let nr_activate = self.move_folios_to_lru(active);
        let nr_deactivate = self.move_folios_to_lru(inactive);
        if nr_deactivate > 0 {
            self.stat.count_n(VmEvent::PgDeactivate, nr_deactivate as i64);
            self.count_memcg_events(memcg, VmEvent::PgDeactivate, nr_deactivate as i64);
        }
        self.mod_isolated(memcg, file, -(taken as i64));
        self.lru_note_cost(memcg, file, 0, rotated);
        let prio = sc.priority;
        self.trace(crate::tracepoints::ev::VMSCAN_LRU_SHRINK_ACTIVE, || {
            format!(
                "nid=0 nr_taken={taken} nr_active={nr_activate} nr_deactivated={nr_deactivate} nr_referenced={rotated} \
                 priority={prio} flags={}",
                if file { "RECLAIM_WB_FILE|RECLAIM_WB_ASYNC" } else { "RECLAIM_WB_ANON|RECLAIM_WB_ASYNC" }
            )
        });
    }

    /// `move_folios_to_lru`: isolated folios back onto their lists' heads (the isolation's
    /// reference dropped; the last reference frees the folio); an active one ages the
    /// workingset clock. Returns the pages moved.
    pub(super) fn move_folios_to_lru(&mut self, list: Vec<Pfn>) -> u64 {
        let mut moved = 0;
        for f in list {
            if !self.folio_evictable(f) {
                self.folio_putback_lru(f);
                continue;
            }
            let nr = self.folio_nr_pages(f);
            if self.mem.pages[f.idx()].refcount == 1 {
                // Ours was the last reference: the folio goes.
                self.folio_put(f);
                continue;
            }
            self.mem.pages[f.idx()].set(pg::LRU);
            self.lruvec_add_folio(f);
            self.mem.pages[f.idx()].refcount -= 1;
            if self.mem.pages[f.idx()].test(pg::ACTIVE) {
                let memcg = self.mem.pages[f.idx()].memcg;
                self.workingset_age_nonresident(memcg, nr);
            }
            moved += nr;
        }
        moved
    }

    /// `reclaim_pages` (MADV_PAGEOUT): reclaim these isolated folios now, whatever their
    /// references (no pgscan/pgsteal); what stays goes back to the LRU.
    pub fn reclaim_pages(&mut self, list: Vec<Pfn>) -> u64 {
        if list.is_empty() {
            return 0;
        }
        let mut sc = ScanControl {
            nr_to_reclaim: u64::MAX,
            gfp: gfp::KERNEL,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            reclaimer: Reclaimer::Direct,
            ..Default::default()
        };
        for &f in &list {
            self.mem.pages[f.idx()].clear(pg::ACTIVE);
        }
        let mut stat = ReclaimStat::default();
        let saved = std::mem::replace(&mut self.in_reclaim, true);
        let (reclaimed, rest) = self.shrink_folio_list(list, &mut sc, &mut stat, true, super::memcontrol::ROOT_MEMCG);
        self.in_reclaim = saved;
        for f in rest {
            self.folio_putback_lru(f);
        }
        self.trace(crate::tracepoints::ev::VMSCAN_RECLAIM_PAGES, || {
            format!("nid=0 nr_scanned={} nr_reclaimed={reclaimed} {}", sc.nr_scanned, stat.trace_fields())
        });
        reclaimed
    }

    /// One `shrink_inactive_list` of every folio on a list of the root memcg, as a direct
    /// reclaimer at the lowest priority would scan it (tests). Returns the pages reclaimed.
    #[cfg(test)]
    pub fn shrink_inactive_for_test(&mut self, lru: Lru) -> u64 {
        let mut sc = ScanControl {
            nr_to_reclaim: u64::MAX,
            gfp: gfp::HIGHUSER_MOVABLE,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            ..Default::default()
        };
        self.lru_add_drain();
        let nr = self.memcg.groups[0].lruvec.size[lru as usize];
        self.shrink_inactive_list(nr, super::memcontrol::ROOT_MEMCG, &mut sc, lru)
    }

    /// Charge `cycles` of kernel work to the current CPU under `func`.
    pub(super) fn kernel_cycles(&mut self, cycles: f64, func: &'static str) {
        if cycles > 0.0 {
            self.work.push(Work::Cycles { cycles, func });
            // The time the work takes passes: I/O it started meanwhile may complete.
            if self.cost.freq_ghz > 0.0 {
                let ns = self.now_ns + (cycles / self.cost.freq_ghz) as u64;
                self.advance_time(ns);
            }
        }
    }
}
