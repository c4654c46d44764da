//! kswapd's reclaim (mm/vmscan.c's `wakeup_kswapd`, `balance_pgdat` run a priority level at
//! a time, `prepare_kswapd_sleep`); its thread is the interpreter's (workload/interp/kswapd.rs).

use super::lruvec::Lru;
use super::page_alloc::gfp;
use super::vmscan::*;
use super::vmstat::VmEvent;
use super::Kernel;

/// kswapd's state between its steps (`pgdat->kswapd_*`, `balance_pgdat`'s locals).
#[derive(Clone, Debug, Default)]
pub struct KswapdState {
    /// `kswapd_order`: the largest order a waker asked for.
    pub wake_order: u32,
    /// A waker asked (`wakeup_kswapd` found it sleeping).
    pub wake: bool,
    /// `kswapd_failures`: balance_pgdat runs that reclaimed nothing.
    pub failures: u32,
    /// The balance_pgdat in progress: its order, priority, reclaimed total and scan control.
    pub running: Option<BalanceState>,
}

/// One `balance_pgdat` call, between its priority levels.
#[derive(Clone, Debug)]
pub struct BalanceState {
    pub order: u32,
    pub sc: ScanControl,
    pub restarted_no_trim: bool,
}

/// What a kswapd step asks of its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KswapdStep {
    /// Run the next priority level.
    Continue,
    /// balance_pgdat is done: try to sleep (`kswapd_try_to_sleep`).
    Done,
}

impl Kernel {
    // ---- kswapd ------------------------------------------------------------------------

    /// `pgdat_balanced`: free pages above the high watermark for `order`.
    pub fn pgdat_balanced(&self, order: u32) -> bool {
        self.zone_watermark_ok(order, super::mmzone::Wmark::High)
    }

    /// `wakeup_kswapd`: an allocation found free memory below the low watermark; kswapd
    /// (if asleep and not hopeless, and the node not balanced) is woken for `order`.
    pub fn wakeup_kswapd(&mut self, order: u32, gfp_flags: u32) {
        self.kswapd.wake_order = self.kswapd.wake_order.max(order);
        if self.kswapd.running.is_some() || self.kswapd.wake {
            return;
        }
        if self.kswapd.failures >= MAX_RECLAIM_RETRIES || self.pgdat_balanced(order) {
            return;
        }
        self.trace(crate::tracepoints::ev::VMSCAN_WAKEUP_KSWAPD, || {
            format!("nid=0 order={order} gfp_flags={}", gfp::name(gfp_flags))
        });
        self.kswapd.wake = true;
    }

    /// Start a `balance_pgdat` for `order` (pageoutrun).
    pub fn balance_pgdat_begin(&mut self, order: u32) {
        self.stat.count(VmEvent::PageOutRun);
        let sc = ScanControl {
            priority: DEF_PRIORITY,
            order,
            gfp: gfp::KERNEL,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            reclaimer: Reclaimer::Kswapd,
            ..Default::default()
        };
        self.kswapd.running = Some(BalanceState { order, sc, restarted_no_trim: false });
    }

    /// One priority level of `balance_pgdat` (`kswapd_shrink_node`): done when the node is
    /// balanced, or after priority 1 (kswapd never scans at 0).
    pub fn balance_pgdat_step(&mut self) -> KswapdStep {
        let Some(mut b) = self.kswapd.running.take() else { return KswapdStep::Done };
        let saved = std::mem::replace(&mut self.reclaimer, Reclaimer::Kswapd);
        let saved_in = std::mem::replace(&mut self.in_reclaim, true);
        let done = 'step: {
            if self.pgdat_balanced(b.sc.order) {
                break 'step true;
            }
            let sc = &mut b.sc;
            // kswapd_age_node: age the active anonymous lists if there is swap.
            if self.swap.total_swap_pages > 0 && self.inactive_is_low(super::memcontrol::ROOT_MEMCG, Lru::InactiveAnon)
            {
                for memcg in self.memcg_subtree(super::memcontrol::ROOT_MEMCG) {
                    self.shrink_active_list(SWAP_CLUSTER_MAX, memcg, sc, Lru::ActiveAnon);
                }
            }
            if sc.priority < DEF_PRIORITY - 2 {
                sc.may_writepage = true;
            }
            sc.nr_scanned = 0;
            let before = sc.nr_reclaimed;
            // kswapd_shrink_node: reclaim the whole high watermark.
            sc.nr_to_reclaim = self.wmark_pages(super::mmzone::Wmark::High).max(SWAP_CLUSTER_MAX);
            self.shrink_node(sc);
            let mut raise = true;
            if sc.order > 0 && sc.nr_reclaimed >= 2 << sc.order {
                sc.order = 0;
            }
            if sc.nr_scanned.max(sc.nr_reclaimed - before) >= sc.nr_to_reclaim {
                raise = false;
            }
            if raise || sc.nr_reclaimed == before {
                sc.priority -= 1;
            }
            if sc.priority >= 1 {
                break 'step false;
            }
            if sc.nr_reclaimed == 0 && sc.cache_trim_mode_failed && !sc.no_cache_trim_mode && !b.restarted_no_trim {
                sc.no_cache_trim_mode = true;
                sc.priority = DEF_PRIORITY;
                b.restarted_no_trim = true;
                break 'step false;
            }
            if sc.nr_reclaimed == 0 {
                self.kswapd.failures += 1;
            }
            true
        };
        self.reclaimer = saved;
        self.in_reclaim = saved_in;
        if done {
            self.snapshot_refaults(super::memcontrol::ROOT_MEMCG);
            KswapdStep::Done
        } else {
            self.kswapd.running = Some(b);
            KswapdStep::Continue
        }
    }

    /// `prepare_kswapd_sleep`: hopeless, or balanced for `order`.
    pub fn prepare_kswapd_sleep(&mut self, order: u32) -> bool {
        if self.kswapd.failures >= MAX_RECLAIM_RETRIES {
            return true;
        }
        if self.pgdat_balanced(order) {
            self.pgdat_writeback = false;
            self.pgdat_dirty = false;
            return true;
        }
        false
    }
}
