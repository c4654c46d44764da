//! Hardware and software event counts in `perf stat`'s vocabulary, kept per task, plus the
//! per-kernel-function cycle profile (the analogue of `perf report`).

/// Counts of one task (or a whole run).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerfCounters {
    pub cycles: f64,
    pub instructions: f64,
    /// Cycles stalled waiting for memory (TLB walks and data beyond L1).
    pub stalled_backend: f64,
    /// Cycles the front end waited for instructions (iTLB walks, L1i misses).
    pub stalled_frontend: f64,
    pub dtlb_loads: u64,
    pub dtlb_load_misses: u64,
    pub dtlb_stores: u64,
    pub dtlb_store_misses: u64,
    pub itlb_loads: u64,
    pub itlb_load_misses: u64,
    pub l1d_loads: u64,
    pub l1d_load_misses: u64,
    pub l1i_load_misses: u64,
    pub llc_loads: u64,
    pub llc_load_misses: u64,
    pub page_walks: u64,
    pub page_walk_cycles: f64,
    /// Memory references simulated (loads and stores of the workload and of page walks).
    pub mem_refs: u64,
    /// Loads and stores (and atomics) that found their line modified in another CPU's private
    /// caches, on this socket (the same core's other thread included) or another: perf c2c's
    /// local and remote HITM.
    pub hitm_local: u64,
    pub hitm_remote: u64,
    /// Times the scheduler moved the task to another CPU (perf's cpu-migrations software
    /// event: `set_task_cpu`).
    pub cpu_migrations: u64,
    /// Cycles per kernel function, in first-charged order.
    pub profile: Vec<(&'static str, f64)>,
}

impl PerfCounters {
    /// Charge `cycles` to kernel function `func` (and to the total).
    #[inline]
    pub fn charge(&mut self, func: &'static str, cycles: f64) {
        self.cycles += cycles;
        // The same function is charged from the same call site, with the same `&'static str`:
        // the entries' addresses are compared first (names are unique in the profile, so the
        // entry found is the one a comparison of the text finds); the text covers the same
        // name from another site.
        if let Some(e) = self.profile.iter_mut().find(|e| std::ptr::eq(e.0, func)) {
            e.1 += cycles;
            return;
        }
        self.charge_by_name(func, cycles);
    }

    /// `charge`'s entry found by its function's name (or a new one).
    fn charge_by_name(&mut self, func: &'static str, cycles: f64) {
        match self.profile.iter_mut().find(|e| e.0 == func) {
            Some(e) => e.1 += cycles,
            None => self.profile.push((func, cycles)),
        }
    }

    /// Add another task's counts.
    pub fn add(&mut self, o: &PerfCounters) {
        self.cycles += o.cycles;
        self.instructions += o.instructions;
        self.stalled_backend += o.stalled_backend;
        self.stalled_frontend += o.stalled_frontend;
        self.dtlb_loads += o.dtlb_loads;
        self.dtlb_load_misses += o.dtlb_load_misses;
        self.dtlb_stores += o.dtlb_stores;
        self.dtlb_store_misses += o.dtlb_store_misses;
        self.itlb_loads += o.itlb_loads;
        self.itlb_load_misses += o.itlb_load_misses;
        self.l1d_loads += o.l1d_loads;
        self.l1d_load_misses += o.l1d_load_misses;
        self.l1i_load_misses += o.l1i_load_misses;
        self.llc_loads += o.llc_loads;
        self.llc_load_misses += o.llc_load_misses;
        self.page_walks += o.page_walks;
        self.page_walk_cycles += o.page_walk_cycles;
        self.mem_refs += o.mem_refs;
        self.hitm_local += o.hitm_local;
        self.hitm_remote += o.hitm_remote;
        self.cpu_migrations += o.cpu_migrations;
        for (f, c) in &o.profile {
            match self.profile.iter_mut().find(|e| e.0 == *f) {
                Some(e) => e.1 += c,
                None => self.profile.push((f, *c)),
            }
        }
    }

    /// Scale every count by `n` (exact fast-forward of `n` identical loop iterations).
    pub fn scaled(&self, n: u64) -> PerfCounters {
        let f = n as f64;
        PerfCounters {
            cycles: self.cycles * f,
            instructions: self.instructions * f,
            stalled_backend: self.stalled_backend * f,
            stalled_frontend: self.stalled_frontend * f,
            dtlb_loads: self.dtlb_loads * n,
            dtlb_load_misses: self.dtlb_load_misses * n,
            dtlb_stores: self.dtlb_stores * n,
            dtlb_store_misses: self.dtlb_store_misses * n,
            itlb_loads: self.itlb_loads * n,
            itlb_load_misses: self.itlb_load_misses * n,
            l1d_loads: self.l1d_loads * n,
            l1d_load_misses: self.l1d_load_misses * n,
            l1i_load_misses: self.l1i_load_misses * n,
            llc_loads: self.llc_loads * n,
            llc_load_misses: self.llc_load_misses * n,
            page_walks: self.page_walks * n,
            page_walk_cycles: self.page_walk_cycles * f,
            mem_refs: self.mem_refs * n,
            hitm_local: self.hitm_local * n,
            hitm_remote: self.hitm_remote * n,
            // The scheduler's doing, between quanta: never part of a repeated iteration.
            cpu_migrations: 0,
            profile: self.profile.iter().map(|(k, v)| (*k, v * f)).collect(),
        }
    }

    /// `self` (the counts of `iters` iterations) scaled to `n` iterations, integer counts
    /// rounded (a sampled loop's extrapolation).
    pub fn extrapolated(&self, iters: u64, n: u64) -> PerfCounters {
        let f = n as f64 / iters as f64;
        let u = |v: u64| (v as f64 * f).round() as u64;
        PerfCounters {
            cycles: self.cycles * f,
            instructions: self.instructions * f,
            stalled_backend: self.stalled_backend * f,
            stalled_frontend: self.stalled_frontend * f,
            dtlb_loads: u(self.dtlb_loads),
            dtlb_load_misses: u(self.dtlb_load_misses),
            dtlb_stores: u(self.dtlb_stores),
            dtlb_store_misses: u(self.dtlb_store_misses),
            itlb_loads: u(self.itlb_loads),
            itlb_load_misses: u(self.itlb_load_misses),
            l1d_loads: u(self.l1d_loads),
            l1d_load_misses: u(self.l1d_load_misses),
            l1i_load_misses: u(self.l1i_load_misses),
            llc_loads: u(self.llc_loads),
            llc_load_misses: u(self.llc_load_misses),
            page_walks: u(self.page_walks),
            page_walk_cycles: self.page_walk_cycles * f,
            mem_refs: u(self.mem_refs),
            hitm_local: u(self.hitm_local),
            hitm_remote: u(self.hitm_remote),
            // The scheduler's doing: the passes not run were not scheduled.
            cpu_migrations: 0,
            profile: self.profile.iter().map(|(k, v)| (*k, v * f)).collect(),
        }
    }

    /// The counts under their `perf stat` names, in the order `sim::perf_metrics` reports them.
    pub fn fields(&self) -> [(&'static str, f64); 21] {
        [
            ("cycles", self.cycles),
            ("instructions", self.instructions),
            ("dTLB-loads", self.dtlb_loads as f64),
            ("dTLB-load-misses", self.dtlb_load_misses as f64),
            ("dTLB-stores", self.dtlb_stores as f64),
            ("dTLB-store-misses", self.dtlb_store_misses as f64),
            ("iTLB-loads", self.itlb_loads as f64),
            ("iTLB-load-misses", self.itlb_load_misses as f64),
            ("L1-dcache-loads", self.l1d_loads as f64),
            ("L1-dcache-load-misses", self.l1d_load_misses as f64),
            ("L1-icache-load-misses", self.l1i_load_misses as f64),
            ("LLC-loads", self.llc_loads as f64),
            ("LLC-load-misses", self.llc_load_misses as f64),
            ("page-walks", self.page_walks as f64),
            ("page-walk-cycles", self.page_walk_cycles),
            ("stalled-cycles-frontend", self.stalled_frontend),
            ("stalled-cycles-backend", self.stalled_backend),
            ("memory-references", self.mem_refs as f64),
            ("hitm-local", self.hitm_local as f64),
            ("hitm-remote", self.hitm_remote as f64),
            ("cpu-migrations", self.cpu_migrations as f64),
        ]
    }

    /// self - o, field by field (a phase between two snapshots).
    pub fn minus(&self, o: &PerfCounters) -> PerfCounters {
        PerfCounters {
            cycles: self.cycles - o.cycles,
            instructions: self.instructions - o.instructions,
            stalled_backend: self.stalled_backend - o.stalled_backend,
            stalled_frontend: self.stalled_frontend - o.stalled_frontend,
            dtlb_loads: self.dtlb_loads - o.dtlb_loads,
            dtlb_load_misses: self.dtlb_load_misses - o.dtlb_load_misses,
            dtlb_stores: self.dtlb_stores - o.dtlb_stores,
            dtlb_store_misses: self.dtlb_store_misses - o.dtlb_store_misses,
            itlb_loads: self.itlb_loads - o.itlb_loads,
            itlb_load_misses: self.itlb_load_misses - o.itlb_load_misses,
            l1d_loads: self.l1d_loads - o.l1d_loads,
            l1d_load_misses: self.l1d_load_misses - o.l1d_load_misses,
            l1i_load_misses: self.l1i_load_misses - o.l1i_load_misses,
            llc_loads: self.llc_loads - o.llc_loads,
            llc_load_misses: self.llc_load_misses - o.llc_load_misses,
            page_walks: self.page_walks - o.page_walks,
            page_walk_cycles: self.page_walk_cycles - o.page_walk_cycles,
            mem_refs: self.mem_refs - o.mem_refs,
            hitm_local: self.hitm_local - o.hitm_local,
            hitm_remote: self.hitm_remote - o.hitm_remote,
            cpu_migrations: self.cpu_migrations - o.cpu_migrations,
            profile: self
                .profile
                .iter()
                .map(|(k, v)| (*k, v - o.profile.iter().find(|e| e.0 == *k).map_or(0.0, |e| e.1)))
                .collect(),
        }
    }
}
