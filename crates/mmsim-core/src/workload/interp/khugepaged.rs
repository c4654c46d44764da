//! The khugepaged kernel thread on the interpreter's scheduler (mm/khugepaged.c's `khugepaged`
//! -> `khugepaged_do_scan` / `khugepaged_wait_work`), for `transparent_hugepage/file_text=
//! khugepaged`; the scan itself is the kernel's (kernel/khugepaged_scan.rs).
//!
//! It sleeps until an mm is registered (`khugepaged_enter_vma` on an empty list wakes it), then
//! scans `khugepaged/pages_to_scan` pages a wake-up and sleeps
//! `khugepaged/scan_sleep_millisecs` of simulated time between wake-ups, and
//! `khugepaged/alloc_sleep_millisecs` after a failed PMD allocation. It runs on the most idle
//! CPU at each wake-up; its cycles (the copies, unmaps, flushes and allocations of its
//! collapses) count system-wide under the symbol `khugepaged`, as `perf stat -a` counts a
//! kernel thread's. Differs from Linux: the reads a collapse waits for delay it by the block
//! device's time without occupying its CPU (mmsim's tasks are charged theirs as cycles); the
//! scan's own walk of the page cache costs nothing; it does not run while no task of the
//! workload is alive (a run ends with its tasks).

use super::*;
use crate::kernel::khugepaged_scan::{ScanPass, ScanStep};

/// khugepaged's state on the scheduler.
#[derive(Clone, Debug, Default)]
pub struct Khugepaged {
    /// When it runs next (cycles on its CPU's clock), or None while it waits for work.
    pub ready_at: Option<f64>,
    /// `ready_at` is the end of an interruptible sleep (scan or allocation sleep), which a
    /// wake-up (a registration, a knob written) ends early.
    pub sleeping: bool,
    /// The CPU it runs on (the most idle at each wake-up).
    pub cpu: usize,
    /// Its hardware and software counts.
    pub perf: PerfCounters,
    /// Scheduling order among the tasks of its CPU.
    pub last_run: u64,
    /// Wake-ups that began a scan (`khugepaged_do_scan` calls).
    pub wakeups: u64,
    /// Cycles it ran on each CPU.
    pub cpu_cycles: Vec<f64>,
    /// The scan in progress.
    pass: ScanPass,
    /// A scan is in progress (`pass` holds its budget).
    scanning: bool,
}

/// The knobs whose store handlers wake khugepaged (`scan_sleep_millisecs_store`,
/// `alloc_sleep_millisecs_store`, `enabled_store` -> `start_stop_khugepaged`; mmsim's
/// `file_text` as the option's switch).
pub const KHUGEPAGED_WAKE_KNOBS: [&str; 4] = [
    "transparent_hugepage/enabled",
    "transparent_hugepage/file_text",
    "transparent_hugepage/khugepaged/scan_sleep_millisecs",
    "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
];

impl Interp {
    /// `wake_up_interruptible(&khugepaged_wait)` when the kernel asked for it: a thread waiting
    /// for work or in an interruptible sleep runs at `now` on the most idle CPU.
    pub(super) fn wakeup_khugepaged(&mut self, now: f64) {
        if !std::mem::take(&mut self.kernel.khugepaged.wake) || !self.kernel.khugepaged_has_work() {
            return;
        }
        let k = &self.khugepaged;
        if k.ready_at.is_some() && !k.sleeping {
            return; // running, or waiting for a read: it sees the new state when it runs
        }
        let cpu = self.most_idle_cpu();
        let k = &mut self.khugepaged;
        k.cpu = cpu;
        k.ready_at = Some(now);
        k.sleeping = false;
    }

    /// When khugepaged would run next and its scheduling key, as `kscrubd_candidate`: it is
    /// awake, a workload task is alive, and its time has come or its CPU has nothing else.
    pub(super) fn khugepaged_candidate(&self) -> Option<(f64, u64)> {
        let k = &self.khugepaged;
        self.kthread_ready(k.cpu, k.ready_at?, k.last_run)
    }

    /// One step of khugepaged: one `khugepaged_scan_mm_slot` call (a file range at most) and
    /// its work on the thread's CPU; then the next step at once (`cond_resched`), after the
    /// reads it waited for, after `alloc_sleep_millisecs`, or, at the end of the wake-up,
    /// after `scan_sleep_millisecs` (or when woken, if no mm is registered).
    pub(super) fn run_khugepaged(&mut self, at: f64) {
        self.run_seq += 1;
        self.khugepaged.last_run = self.run_seq;
        if !self.khugepaged.scanning {
            // A new wake-up: the most idle CPU now.
            self.khugepaged.cpu = self.most_idle_cpu();
            self.khugepaged.scanning = true;
            self.khugepaged.wakeups += 1;
            self.khugepaged.pass = ScanPass::default();
        }
        let cpu = self.khugepaged.cpu;
        self.kthread_switch_in(cpu, at);
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, super::events::Occupant::Kthread("khugepaged"), self.machine.clock[cpu]);
        }
        let mut pass = self.khugepaged.pass;
        let step = self.kernel.khugepaged_scan_step(&mut pass);
        self.khugepaged.pass = pass;
        // Its allocations' reclaim may have discarded lazyfree pages.
        self.apply_lazyfree_discards(None);
        let before = self.khugepaged.perf.cycles;
        // Its work happens at its CPU's time (`clock_base + perf.cycles`).
        let base = self.machine.clock[cpu] - before;
        if self.kernel.tp.is_some() {
            self.tp_drain_kthread("khugepaged", cpu, self.machine.clock[cpu]);
        }
        for w in std::mem::take(&mut self.kernel.work) {
            self.machine.do_work(cpu, &mut self.kernel, w, &mut self.khugepaged.perf, base);
        }
        let spent = self.khugepaged.perf.cycles - before;
        self.machine.clock[cpu] += spent;
        self.machine.cpus[cpu].busy += spent;
        let clock = self.machine.clock[cpu];
        if self.kernel.tp.is_some() {
            self.tp_run(cpu, super::events::Occupant::Idle, clock);
        }
        if self.khugepaged.cpu_cycles.len() <= cpu {
            self.khugepaged.cpu_cycles.resize(cpu + 1, 0.0);
        }
        self.khugepaged.cpu_cycles[cpu] += spent;
        // The reads a collapse waited for (`page_cache_sync_readahead` then the folio lock).
        let pages = self.kernel.take_kthread_io_wait();
        let freq = self.machine.p.cpu.freq_ghz;
        let io = if pages == 0 {
            0.0
        } else {
            let b = &self.machine.p.block;
            (b.read_latency_ns + (pages * self.kernel.geo.page_size()) as f64 / b.read_bandwidth) * freq
        };
        let ms = |m: u32| f64::from(m) * 1e6 * freq;
        let kn = &self.kernel.knobs.khugepaged;
        let k = &mut self.khugepaged;
        k.sleeping = false;
        match step {
            ScanStep::Continue => k.ready_at = Some(clock + io),
            ScanStep::AllocSleep => {
                k.ready_at = Some(clock + io + ms(kn.alloc_sleep_millisecs));
                k.sleeping = true;
            }
            ScanStep::Done => {
                k.scanning = false;
                if self.kernel.khugepaged_has_work() {
                    k.ready_at = Some(clock + io + ms(kn.scan_sleep_millisecs));
                    k.sleeping = true;
                } else {
                    k.ready_at = None;
                }
            }
        }
        self.kernel.sync_items();
    }
}
