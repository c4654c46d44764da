//! Kernel threads of the interpreter's scheduler: seed 002's kscrubd (mm/scrubd.c of the V3
//! patch set), and the load average that holds it off (kernel/sched/loadavg.c).
//!
//! kscrubd is not a task of the workload: it has no mm, no pid of the workload's (whose pids
//! are the tasks' indices plus one), and it is scheduled beside the tasks on the CPU the seed
//! prefers, "the most idle cpu". Its cycles count in the system-wide perf counters (as
//! `perf stat -a` counts a kernel thread's) under the symbol `kscrubd`, and in its CPU's busy
//! time.

use super::*;
use crate::kernel::knobs::ScrubEngine;
use crate::kernel::page_alloc::ClearPath;
use crate::kernel::vmstat::VmEvent;

/// Bits of fixed-point precision of the load average (include/linux/sched/loadavg.h).
pub const FSHIFT: u32 = 11;
/// 1.0 in fixed point.
pub const FIXED_1: u64 = 1 << FSHIFT;
/// 1/exp(5 s / 1 min), 1/exp(5 s / 5 min), 1/exp(5 s / 15 min) in fixed point.
pub const EXP: [u64; 3] = [1884, 2014, 2037];
/// mmsim's kernel's CONFIG_HZ: 250, the x86-64 default of Debian's and Fedora's builds.
pub const HZ: f64 = 250.0;
/// `LOAD_FREQ` (5 * HZ + 1 ticks), in seconds.
pub const LOAD_FREQ_SECS: f64 = (5.0 * HZ + 1.0) / HZ;

/// `calc_load`: one LOAD_FREQ step of an exponentially decaying average of `active` (fixed
/// point), rounding up while it rises (Linux >= 4.14, commit 20878232c523, so that one busy
/// task reaches exactly 1.00 and an idle machine exactly 0).
pub fn calc_load(load: u64, exp: u64, active: u64) -> u64 {
    let mut newload = load * exp + active * (FIXED_1 - exp);
    if active >= load {
        newload += FIXED_1 - 1;
    }
    newload / FIXED_1
}

/// The global load average (`avenrun`), updated every LOAD_FREQ of simulated time from the
/// number of runnable tasks (`calc_global_load`). Differs from Linux: sampled when the
/// scheduler passes each update time, not folded per CPU at ticks (mmsim has no ticks), and
/// the first update is at LOAD_FREQ after boot, without Linux's 10-tick slack.
#[derive(Clone, Debug, Default)]
pub struct LoadAvg {
    /// 1, 5 and 15-minute averages, fixed point (`FIXED_1` = 1.0).
    pub avenrun: [u64; 3],
    /// Updates done so far.
    pub updates: u64,
}

impl LoadAvg {
    /// Apply every update due at or before `now_secs`, each with `active` runnable tasks.
    pub fn advance(&mut self, now_secs: f64, active: u64) {
        while (self.updates + 1) as f64 * LOAD_FREQ_SECS <= now_secs {
            for (a, e) in self.avenrun.iter_mut().zip(EXP) {
                *a = calc_load(*a, e, active * FIXED_1);
            }
            self.updates += 1;
        }
    }

    /// The averages as /proc/loadavg prints them (two decimals, truncated as LOAD_INT/LOAD_FRAC).
    pub fn text(&self) -> String {
        let f = |x: u64| {
            let x = x + FIXED_1 / 200;
            format!("{}.{:02}", x >> FSHIFT, ((x & (FIXED_1 - 1)) * 100) >> FSHIFT)
        };
        format!("{} {} {}", f(self.avenrun[0]), f(self.avenrun[1]), f(self.avenrun[2]))
    }
}

/// kscrubd's state (seed 002's per-node `pgdat->kscrubd` thread; mmsim has one node's).
#[derive(Clone, Debug, Default)]
pub struct Kscrubd {
    /// Woken and not yet back to sleep (runnable, or waiting for its engine).
    pub running: bool,
    /// The CPU it runs on (chosen at each wake-up and after each block: the most idle).
    pub cpu: usize,
    /// It may run again no earlier than this (cycles): when the block in flight is zeroed.
    pub ready_at: f64,
    /// Its hardware and software counts (cycles charged to `kscrubd`).
    pub perf: PerfCounters,
    /// Scheduling order among the tasks of its CPU.
    pub last_run: u64,
    /// Blocks it has zeroed, and their base pages.
    pub blocks: u64,
    pub pages: u64,
    /// Cycles it ran on each CPU.
    pub cpu_cycles: Vec<f64>,
}

impl Interp {
    /// `wakeup_kscrubd`: a free coalesced a block of at least `vm/scrub_start` (or the knob was
    /// written). Refused while the 1-minute load average is at or above `vm/scrub_load`; a
    /// sleeping kscrubd wakes at `now` on the most idle CPU.
    pub(super) fn wakeup_kscrubd(&mut self, now: f64) {
        if !std::mem::take(&mut self.kernel.mem.scrub_wake) || self.kernel.knobs.scrub_start.is_none() {
            return;
        }
        if self.kscrubd_load_high() {
            self.kernel.stat.count(VmEvent::KscrubdLoadSkip);
            return;
        }
        if self.kscrubd.running {
            return;
        }
        self.kernel.stat.count(VmEvent::KscrubdWake);
        self.kscrubd.running = true;
        self.kscrubd.cpu = self.most_idle_cpu();
        self.kscrubd.ready_at = now;
    }

    /// `avenrun[0] >= scrub_load << FSHIFT` (seed 002's test).
    fn kscrubd_load_high(&self) -> bool {
        self.loadavg.avenrun[0] >= (self.kernel.knobs.scrub_load as u64) << FSHIFT
    }

    /// "The most idle cpu" (seed 002), deterministically: the fewest runnable tasks, then the
    /// least time used (the lowest clock), then the lowest number.
    pub(super) fn most_idle_cpu(&self) -> usize {
        (0..self.machine.cpus.len())
            .min_by(|&a, &b| {
                let ka = (self.rq[a].len(), self.machine.clock[a]);
                let kb = (self.rq[b].len(), self.machine.clock[b]);
                ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(a.cmp(&b))
            })
            .unwrap_or(0)
    }

    /// When kscrubd would run next, and its scheduling key (time, last_run), if it may: it is
    /// awake, a workload task is still alive, and either its block is done or its CPU has no
    /// task to run meanwhile (the CPU idles until the engine is done).
    pub(super) fn kscrubd_candidate(&self) -> Option<(f64, u64)> {
        let k = &self.kscrubd;
        if !k.running {
            return None;
        }
        self.kthread_ready(k.cpu, k.ready_at, k.last_run)
    }

    /// One step of kscrubd (`scrub_pgdat`'s loop, one block a step, with its `cond_resched`):
    /// give back the block it zeroed (`end_zero_page`), then take the highest-order dirty free
    /// block at or above `vm/scrub_stop` (`zero_highest_order_page`) and zero it with the
    /// engine, or sleep when none is left (or the load has risen to `vm/scrub_load`).
    pub(super) fn run_kscrubd(&mut self, at: f64) {
        self.run_seq += 1;
        self.kscrubd.last_run = self.run_seq;
        let cpu = self.kscrubd.cpu;
        self.kthread_switch_in(cpu, at);
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, super::events::Occupant::Kthread("kscrubd"), self.machine.clock[cpu]);
        }
        self.kernel.mem.end_zero_page();
        let block = if self.kscrubd_load_high() {
            self.kernel.stat.count(VmEvent::KscrubdLoadSkip);
            None
        } else {
            self.kernel.mem.scrubd_rmpage(self.kernel.knobs.scrub_stop)
        };
        let Some((pfn, order)) = block else {
            if self.kernel.tp.is_some() {
                self.tp_run(cpu, super::events::Occupant::Idle, self.machine.clock[cpu]);
            }
            self.kscrubd.running = false;
            self.kernel.sync_items();
            return;
        };
        let pages = 1u64 << order;
        self.kscrubd.blocks += 1;
        self.kscrubd.pages += pages;
        self.kernel.clear_pages(pfn, pages, pages, ClearPath::Kscrubd);
        if self.kernel.tp.is_some() {
            let ev = crate::tracepoints::ev::KSCRUBD_ZERO;
            crate::tracepoints::raise(&mut self.kernel.tp, ev, || format!("pfn={:#x} order={order}", pfn.0));
            self.tp_drain_kthread("kscrubd", cpu, self.machine.clock[cpu]);
        }
        let engine = self.kernel.knobs.scrub_engine;
        let offload = if engine == ScrubEngine::Offload { self.machine.offload_cycles(pages) } else { None };
        let before = self.kscrubd.perf.cycles;
        let work = std::mem::take(&mut self.kernel.work);
        if let Some(d) = offload {
            // The engine zeroes it while kscrubd sleeps: no CPU time, no cache fill, and the
            // CPUs' copies of its lines are invalidated by the engine's writes.
            // Its writes share the node's memory bandwidth with the CPUs'.
            self.machine.invalidate_lines(pfn, pages);
            let now = self.machine.clock[cpu];
            let bus = self.machine.book_engine(cpu, now, pages * self.kernel.geo.page_size());
            self.kscrubd.ready_at = now + d.max(bus);
        } else {
            // Its work happens at its CPU's time (`clock_base + perf.cycles`), as khugepaged's.
            let base = self.machine.clock[cpu] - before;
            for w in work {
                self.machine.do_work(cpu, &mut self.kernel, w, &mut self.kscrubd.perf, base);
            }
            let spent = self.kscrubd.perf.cycles - before;
            self.machine.clock[cpu] += spent;
            self.machine.cpus[cpu].busy += spent;
            if self.kscrubd.cpu_cycles.len() <= cpu {
                self.kscrubd.cpu_cycles.resize(cpu + 1, 0.0);
            }
            self.kscrubd.cpu_cycles[cpu] += spent;
            self.kscrubd.ready_at = self.machine.clock[cpu];
        }
        self.kernel.sync_items();
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, super::events::Occupant::Idle, self.machine.clock[cpu]);
        }
        // After its cond_resched the scheduler may move it to a CPU that is idler now.
        let idle = self.most_idle_cpu();
        if idle != cpu && !self.rq[cpu].is_empty() {
            self.kscrubd.cpu = idle;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One busy task from an idle machine: today's formula reaches exactly 1.00 (research
    /// notes, section 2.4: 164, 315, 454, 582, 700, ... and 2048 after 68 updates).
    #[test]
    fn calc_load_matches_linux() {
        let mut l = 0;
        let mut v = Vec::new();
        for _ in 0..5 {
            l = calc_load(l, EXP[0], FIXED_1);
            v.push(l);
        }
        assert_eq!(v, vec![164, 315, 454, 582, 700]);
        let mut l = 0;
        let n = (1..).find(|_| {
            l = calc_load(l, EXP[0], FIXED_1);
            l == FIXED_1
        });
        assert_eq!(n, Some(68));
        // And back to exactly 0 when idle.
        let mut l = FIXED_1;
        for _ in 0..1000 {
            l = calc_load(l, EXP[0], 0);
        }
        assert_eq!(l, 0);
    }

    #[test]
    fn load_average_advances_in_simulated_time() {
        let mut a = LoadAvg::default();
        a.advance(LOAD_FREQ_SECS - 0.001, 3);
        assert_eq!(a.updates, 0);
        a.advance(60.0, 2);
        assert_eq!(a.updates, 11, "60 s holds 11 whole LOAD_FREQs of 5.004 s");
        assert!(a.avenrun[0] > FIXED_1 && a.avenrun[0] < 2 * FIXED_1, "{}", a.text());
        assert_eq!(LoadAvg { avenrun: [FIXED_1, 0, 2048 + 1024], updates: 0 }.text(), "1.00 0.00 1.50");
    }
}
