//! The kernel's work the machine carries out (`Work`, the log a kernel operation leaves):
//! page clears and copies through the caches or by an offload engine, lock and atomic
//! cache-line traffic, and TLB flushes and shootdowns (flush_tlb_mm_range, seed 003's
//! flushes of shared tables), charged to the CPU that did them and to those they reach.

use super::*;

impl Machine {
    /// `gbps` (bytes per nanosecond) in bytes per cycle of this machine's clock.
    pub fn bytes_per_cycle(&self, gbps: f64) -> f64 {
        gbps / self.p.cpu.freq_ghz
    }

    /// Drop every line of `pages` base pages from `pfn` on from every cache (what
    /// non-temporal stores or a DMA engine's writes do to the copies CPUs hold).
    pub fn invalidate_lines(&mut self, pfn: Pfn, pages: u64) {
        let first = pfn.phys(self.geo) >> self.line_shift;
        let n = (pages * self.geo.page_size()) >> self.line_shift;
        let end = first + n;
        let inval = |c: &mut SetAssoc| {
            if (n as usize) > c.capacity() {
                c.invalidate_if(|l| (first..end).contains(&l));
            } else {
                for l in first..end {
                    c.invalidate(l);
                }
            }
        };
        for cpu in &mut self.cpus {
            inval(&mut cpu.l1d);
            inval(&mut cpu.l2);
        }
        inval(&mut self.llc);
        self.coherence.dropped(first >> 6, end.div_ceil(64));
    }

    /// Cycles a zeroing engine (`vm/scrub_engine=offload`) takes for `pages` base pages, or
    /// None when the machine has none or refuses a block this small (the CPU zeroes it).
    pub fn offload_cycles(&self, pages: u64) -> Option<f64> {
        let m = &self.p.memory;
        let bytes = pages * self.geo.page_size();
        (m.offload_bandwidth > 0.0 && bytes >= m.offload_min)
            .then(|| bytes as f64 / self.bytes_per_cycle(m.offload_bandwidth))
    }

    /// `cache_access` of the `n` lines from `first` on, in order: in runs of 64 lines
    /// (`run_masks`, the same accesses cache by cache), line by line where a run does not
    /// qualify.
    fn access_lines(&mut self, cpu: usize, first: u64, n: u64) {
        let mut l = first;
        while l < first + n {
            let run = (first + n - l).min(64);
            if self.run_masks(cpu, l, u64::MAX >> (64 - run), false, false).is_none() {
                for x in l..l + run {
                    self.cache_access(cpu, x);
                }
            }
            l += run;
        }
    }

    /// Charge a streaming loop to `func`: it runs at its instruction rate (`exec`) unless
    /// fetching its lines (`fetch`) takes longer; the difference is a back-end stall.
    fn charge_streaming(&self, cpu: usize, func: &'static str, exec: f64, fetch: f64, perf: &mut PerfCounters) {
        perf.charge(func, self.exec_cycles(cpu, exec.max(fetch)));
        perf.stalled_backend += (fetch - exec).max(0.0);
    }

    /// `mmsim:lock_wait` for the shared-line use just booked, if it waited a cycle or more.
    #[inline]
    fn raise_lock_wait(&self, k: &mut Kernel, line: u64, func: &'static str) {
        if self.last_wait >= 1.0 {
            crate::tracepoints::raise(&mut k.tp, crate::tracepoints::ev::LOCK_WAIT, || {
                self.lock_wait_fields(line, func)
            });
        }
    }

    /// The fields of `mmsim:lock_wait` for the last use of shared line `line` (by `func`).
    pub fn lock_wait_fields(&self, line: u64, func: &str) -> String {
        format!("lock=0x{line:x} func={func} ns={:.0}", self.last_wait / self.p.cpu.freq_ghz)
    }

    /// Charge one piece of the kernel's queued work to `cpu` (and remote CPUs for
    /// shootdowns) at `clock_base + perf.cycles`, its time now (shared lines are used in time
    /// order). The interpreter decides when (`Interp::charge_work`).
    pub fn do_work(&mut self, cpu: usize, k: &mut Kernel, w: Work, perf: &mut PerfCounters, clock_base: f64) {
        match w {
            Work::Cycles { cycles, func } => perf.charge(func, self.exec_cycles(cpu, cycles)),
            Work::Clear { pfn, pages, chunk, path, target } => {
                let bytes = pages * self.geo.page_size();
                let exec = bytes as f64 / self.p.cost.clear_bytes_per_cycle;
                let func = if path == ClearPath::Kscrubd { "kscrubd" } else { "clear_page_erms" };
                // One call of at least `clear_streaming_min` bytes streams (no RFO, no fill).
                let min = self.p.cost.clear_streaming_min;
                let streaming = min > 0 && chunk * self.geo.page_size() >= min;
                let nontemporal = streaming
                    || if path == ClearPath::Kscrubd {
                        k.knobs.scrub_engine != ScrubEngine::Cpu
                    } else {
                        self.p.cost.clear_nontemporal
                    };
                let now = clock_base + perf.cycles;
                if nontemporal {
                    // Non-temporal stores: no line is fetched or kept; cached copies are
                    // invalidated; the stores drain through the node's bandwidth.
                    self.invalidate_lines(pfn, pages);
                    let drain = self.book_bandwidth(cpu, now, bytes);
                    self.charge_streaming(cpu, func, exec, drain, perf);
                } else {
                    // Temporal stores: every zeroed line passes through this CPU's caches, and
                    // a line not in them is fetched first (a read for ownership) unless the
                    // CPU's string stores write whole lines without one (`cost.clear_rfo`).
                    // The memory traffic: those reads, and the lines' write-back (charged
                    // now, though it happens when they are evicted).
                    let first = pfn.phys(self.geo) >> self.line_shift;
                    let lines = first..first + (bytes >> self.line_shift);
                    let rfo = self.p.cost.clear_rfo;
                    // Other CPUs' copies of the lines are fetched or invalidated first (a page
                    // freed with lines modified in another CPU's caches).
                    let n_lines = lines.end - lines.start;
                    let line = self.line_size();
                    let coherence = self.snoop_span(cpu, first, (0, n_lines * line, line, n_lines), true, perf)
                        / self.p.memory.stream_mlp;
                    // A small clear (a 4 KiB page): its lines accessed as a run, which also
                    // tells where each was before (the fetch bound's levels).
                    let n = lines.end - lines.start;
                    let all = u64::MAX >> (64 - n.clamp(1, 64));
                    let run = if n <= 64 { self.run_masks(cpu, first, all, rfo, false) } else { None };
                    let one_pass = run.is_some();
                    let (fetch, mem) = match run {
                        Some(r) if rfo => self.masks_fetch_bound(r.before_masks(all)),
                        None if rfo => self.fetch_bound(cpu, lines.clone()),
                        _ => (0.0, 0),
                    };
                    let read = mem << self.line_shift;
                    if one_pass {
                        // Accessed above.
                    } else if pages > 1 && (target as u64) < pages {
                        // folio_zero_user: subpage by subpage, the faulting one last.
                        let per_page = self.geo.page_size() >> self.line_shift;
                        for k in 0..pages {
                            let sub = crate::kernel::process_huge_page_nth(pages, target as u64, k);
                            self.access_lines(cpu, lines.start + sub * per_page, per_page);
                        }
                    } else {
                        self.access_lines(cpu, lines.start, n);
                    }
                    let bus = self.book_bandwidth(cpu, now, read + bytes);
                    self.charge_streaming(cpu, func, exec, fetch.max(bus) + coherence, perf);
                }
            }
            Work::Copy { dst, src } => {
                let exec = self.geo.page_size() as f64 / self.p.cost.copy_bytes_per_cycle;
                let n = self.geo.page_size() >> self.line_shift;
                let (s0, d0) = (src.phys(self.geo) >> self.line_shift, dst.phys(self.geo) >> self.line_shift);
                let line = self.line_size();
                let span = (0, n * line, line, n);
                let coherence = (self.snoop_span(cpu, s0, span, false, perf)
                    + self.snoop_span(cpu, d0, span, true, perf))
                    / self.p.memory.stream_mlp;
                let ((fs, ms), (fd, md)) = (self.fetch_bound(cpu, s0..s0 + n), self.fetch_bound(cpu, d0..d0 + n));
                let (fetch, read) = (fs + fd, (ms + md) << self.line_shift);
                let bus = self.book_bandwidth(cpu, clock_base + perf.cycles, read + self.geo.page_size());
                let fetch = fetch.max(bus) + coherence;
                for i in 0..n {
                    self.cache_access(cpu, s0 + i);
                    self.cache_access(cpu, d0 + i);
                }
                self.charge_streaming(cpu, "copy_page", exec, fetch, perf);
            }
            Work::Flush { mm, start, end } => self.flush_range(cpu, k, mm, start, end, perf),
            Work::FlushMm { mm } => self.flush_range(cpu, k, mm, 0, u64::MAX, perf),
            Work::FlushShared { table, start, end } => {
                let mms = k.pt_reach.remove(&table.0);
                self.flush_shared(cpu, k, mms.as_deref(), start, end, perf);
                if let Some(m) = mms {
                    k.pt_reach.insert(table.0, m);
                }
            }
            Work::ZoneLock { pages, func } => {
                // spin_lock(&zone->lock), move the pages, unlock: held for their work.
                let now = clock_base + perf.cycles;
                let hold = pages as f64 * self.p.smp.zone_lock_page;
                let node = self.numa_node(cpu) as u64;
                self.atomic_rmw(cpu, ZONE_LOCK_LINE + node, now, hold, 1.0, func, perf);
                self.raise_lock_wait(k, ZONE_LOCK_LINE + node, func);
            }
            Work::FaultLock { line, hold, func } => {
                let now = clock_base + perf.cycles;
                let hold = if hold { self.p.smp.fault_lock_hold } else { 0.0 };
                self.fault_lock(cpu, line, now, hold, func, perf);
                self.raise_lock_wait(k, line, func);
            }
            Work::Atomic { line, func, kind } => {
                let now = clock_base + perf.cycles;
                let transfers = if kind == AtomicKind::CmpxchgLoop { 2.0 } else { 1.0 };
                self.atomic_rmw(cpu, line, now, 0.0, transfers, func, perf);
                self.raise_lock_wait(k, line, func);
            }
            Work::MmExit { mm } => {
                // The ASID is retired: its translations leave every CPU, without IPIs
                // (Linux retires ASIDs lazily on the next switch).
                for c in &mut self.cpus {
                    c.tlb.flush_asid(mm);
                    if c.cur_asid == Some(mm) {
                        c.cur_asid = None;
                    }
                }
                self.mm_cpus.remove(&mm);
            }
        }
    }

    /// One CPU's part of a flush: all of `mm`'s translations (`full`), or each page of
    /// [start, end) (invlpg).
    fn flush_cpu_tlb(&mut self, c: usize, mm: MmId, start: u64, end: u64, full: bool) {
        let t = &mut self.cpus[c].tlb;
        if full {
            t.flush_asid(mm);
        } else {
            let mut a = self.geo.page_align_down(start);
            while a < end {
                t.invlpg(mm, a);
                a += self.geo.page_size();
            }
        }
    }

    /// flush_tlb_mm_range: invalidate on every CPU in the mm's cpumask; remote CPUs cost an
    /// IPI each (native_flush_tlb_multi).
    fn flush_range(&mut self, cpu: usize, k: &mut Kernel, mm: MmId, start: u64, end: u64, perf: &mut PerfCounters) {
        let Some(mask) = self.mm_cpus.get(&mm).cloned() else { return };
        let pages = end.saturating_sub(start) >> self.geo.page_shift;
        let full = pages > TLB_SINGLE_PAGE_FLUSH_CEILING;
        for (c, &on) in mask.iter().enumerate() {
            if !on {
                continue;
            }
            self.flush_cpu_tlb(c, mm, start, end, full);
            self.charge_flush(cpu, c, k, full, pages, perf);
        }
    }

    /// The cost of CPU `c`'s flush of `pages` pages (or all, if `full`) for a flush started on
    /// `cpu`: counted and charged there when local, an IPI to `cpu` and the flush's time on
    /// `c`'s clock when remote.
    fn charge_flush(&mut self, cpu: usize, c: usize, k: &mut Kernel, full: bool, pages: u64, perf: &mut PerfCounters) {
        let local = if full { self.p.cost.tlb_flush_all } else { self.p.cost.tlb_flush_one * pages as f64 };
        if c == cpu {
            k.stat.count(if full { VmEvent::TlbFlushAll } else { VmEvent::TlbFlushOne });
            perf.charge("flush_tlb_mm_range", local);
        } else {
            perf.charge("native_flush_tlb_multi", self.p.smp.shootdown_ipi);
            self.clock[c] += local;
        }
    }

    /// Seed 003: an entry of a page table several mms share changed: each of `mms` loses its
    /// translations of [start, end) on every CPU its cpumask names, and each remote CPU takes
    /// one IPI for all of them. Without the list (the table is no longer shared), every CPU
    /// is flushed whole, as the seed's patch did for want of a record (flush_tlb_all).
    fn flush_shared(
        &mut self,
        cpu: usize,
        k: &mut Kernel,
        mms: Option<&[MmId]>,
        start: u64,
        end: u64,
        perf: &mut PerfCounters,
    ) {
        let pages = end.saturating_sub(start) >> self.geo.page_shift;
        let full = mms.is_none() || pages > TLB_SINGLE_PAGE_FLUSH_CEILING;
        for c in 0..self.cpus.len() {
            let mut hit = false;
            match mms {
                None => {
                    self.cpus[c].tlb.flush_all();
                    hit = true;
                }
                Some(list) => {
                    for &m in list {
                        if !self.mm_cpus.get(&m).is_some_and(|mask| mask.get(c).copied().unwrap_or(false)) {
                            continue;
                        }
                        hit = true;
                        self.flush_cpu_tlb(c, m, start, end, full);
                    }
                }
            }
            if hit {
                self.charge_flush(cpu, c, k, full, pages, perf);
            }
        }
    }
}
