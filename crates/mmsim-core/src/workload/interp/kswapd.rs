//! The kswapd kernel thread on the interpreter's scheduler (mm/vmscan.c's `kswapd` ->
//! `kswapd_try_to_sleep` / `balance_pgdat`); the reclaim itself is the kernel's
//! (kernel/vmscan.rs `balance_pgdat_begin` and `balance_pgdat_step`).
//!
//! An allocation that finds free memory below the low watermark wakes it
//! (`wakeup_kswapd`). It then runs `balance_pgdat` a priority level a step, on the most idle
//! CPU, until free memory is back above the high watermark, and sleeps again when
//! `prepare_kswapd_sleep` says so (balanced, or hopeless after MAX_RECLAIM_RETRIES runs that
//! reclaimed nothing); otherwise it begins another `balance_pgdat`. Its cycles count
//! system-wide under the symbol `kswapd` (`perf stat -a`) and in its CPU's busy time; its
//! swap writes go to the block device's queue and complete in simulated time. Differs from
//! Linux: no short sleep before the full one (`kswapd_try_to_sleep`'s HZ/10 nap), and it
//! does not run once no task of the workload is alive.

use super::*;
use crate::kernel::vmscan::KswapdStep;

/// kswapd's state on the scheduler.
#[derive(Clone, Debug, Default)]
pub struct Kswapd {
    /// When it runs next (cycles on its CPU's clock), or None while it sleeps.
    pub ready_at: Option<f64>,
    /// The CPU it runs on (the most idle at each wake-up).
    pub cpu: usize,
    /// Its hardware and software counts.
    pub perf: PerfCounters,
    /// Scheduling order among the tasks of its CPU.
    pub last_run: u64,
    /// Wake-ups (mm_vmscan_kswapd_wake).
    pub wakeups: u64,
    /// Cycles it ran on each CPU.
    pub cpu_cycles: Vec<f64>,
}

impl Interp {
    /// `wake_up_interruptible(&pgdat->kswapd_wait)` when an allocation asked for it: a
    /// sleeping kswapd runs at `now` on the most idle CPU.
    pub(super) fn wakeup_kswapd(&mut self, now: f64) {
        if !std::mem::take(&mut self.kernel.kswapd.wake) || self.kswapd.ready_at.is_some() {
            return;
        }
        self.kswapd.cpu = self.most_idle_cpu();
        self.kswapd.ready_at = Some(now);
        self.kswapd.wakeups += 1;
        let order = self.kernel.kswapd.wake_order;
        self.kernel.trace(crate::tracepoints::ev::VMSCAN_KSWAPD_WAKE, || format!("nid=0 order={order}"));
    }

    /// When kswapd would run next and its scheduling key, as `kscrubd_candidate`.
    pub(super) fn kswapd_candidate(&self) -> Option<(f64, u64)> {
        let k = &self.kswapd;
        self.kthread_ready(k.cpu, k.ready_at?, k.last_run)
    }

    /// One step of kswapd: a `balance_pgdat` begins if none is in progress, then one of its
    /// priority levels runs, its work charged to kswapd's CPU; at the end of the
    /// `balance_pgdat` it sleeps if `prepare_kswapd_sleep` allows, else goes on.
    pub(super) fn run_kswapd(&mut self, at: f64) {
        self.run_seq += 1;
        self.kswapd.last_run = self.run_seq;
        let cpu = self.kswapd.cpu;
        self.kthread_switch_in(cpu, at);
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, super::events::Occupant::Kthread("kswapd"), self.machine.clock[cpu]);
        }
        let ns = (self.machine.clock[cpu] / self.machine.p.cpu.freq_ghz).max(0.0) as u64;
        self.kernel.advance_time(ns);
        self.kernel.cur_mm = None;
        if self.kernel.kswapd.running.is_none() {
            let order = std::mem::take(&mut self.kernel.kswapd.wake_order);
            self.kernel.balance_pgdat_begin(order);
        }
        let order = self.kernel.kswapd.running.as_ref().map_or(0, |b| b.order);
        let step = self.kernel.balance_pgdat_step();
        self.apply_lazyfree_discards(None);
        let before = self.kswapd.perf.cycles;
        let base = self.machine.clock[cpu] - before;
        if self.kernel.tp.is_some() {
            self.tp_drain_kthread("kswapd", cpu, self.machine.clock[cpu]);
        }
        for w in std::mem::take(&mut self.kernel.work) {
            self.machine.do_work(cpu, &mut self.kernel, w, &mut self.kswapd.perf, base);
        }
        let spent = self.kswapd.perf.cycles - before;
        self.machine.clock[cpu] += spent;
        self.machine.cpus[cpu].busy += spent;
        let clock = self.machine.clock[cpu];
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, super::events::Occupant::Idle, clock);
        }
        if self.kswapd.cpu_cycles.len() <= cpu {
            self.kswapd.cpu_cycles.resize(cpu + 1, 0.0);
        }
        self.kswapd.cpu_cycles[cpu] += spent;
        // Its own waits (a v1 memcg's writeback) are not a task's.
        self.kernel.discard_kthread_effects();
        self.kswapd.ready_at = Some(clock);
        if step == KswapdStep::Done {
            let wanted = self.kernel.kswapd.wake_order.max(order);
            if self.kernel.prepare_kswapd_sleep(wanted) {
                self.kernel.trace(crate::tracepoints::ev::VMSCAN_KSWAPD_SLEEP, || "nid=0".to_string());
                self.kswapd.ready_at = None;
                self.kernel.kswapd.wake_order = 0;
            }
        }
        self.reap_oom_victims();
        self.kernel.sync_items();
    }
}
