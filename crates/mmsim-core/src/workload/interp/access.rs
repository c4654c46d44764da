//! The access side of the interpreter: a task's loads, stores, instruction fetches, compares
//! and atomics, a page at a time through the hardware model (TLB, walk, caches), taking page
//! faults through the kernel, and checking what is read against the reference model.

use super::*;
use crate::units::Geometry;

/// The part of a strided range `[next, end)` that lies in `next`'s page: offsets `ps, ps +
/// stride, ... < pe` within `page`, `count` of them, and where the range goes on after them.
struct PageSpan {
    page: u64,
    ps: u64,
    pe: u64,
    count: u64,
    after: u64,
}

fn page_span(next: u64, end: u64, stride: u64, geo: Geometry) -> PageSpan {
    let page = geo.page_align_down(next);
    let (ps, pe) = (next - page, (page + geo.page_size()).min(end) - page);
    let count = (pe - ps).div_ceil(stride);
    PageSpan { page, ps, pe, count, after: next.saturating_add(count * stride) }
}

/// Random accesses over at most this many bytes are not warmed ahead (`Machine::warm_access`):
/// the entries, tags and lines the simulation reads for them stay in the host's caches.
const WARM_MIN_SPAN: u64 = 1 << 20;

/// Faults one access may take that the kernel reports handled before the access is declared a
/// livelock (a COW of the zero page, then of a page, is two: far fewer happen).
const LIVELOCK_FAULTS: u32 = 64;

impl Interp {
    /// Make one page accessible: walk, fault as needed. Err when the task died.
    #[inline]
    pub(super) fn access_page(&mut self, t: usize, addr: u64, access: Access) -> Result<Pfn, Stop> {
        let mm = self.tasks[t].mm.ok_or(Stop::Dead)?;
        let cpu = self.tasks[t].cpu;
        let first = self.machine.translate(cpu, &mut self.kernel, mm, addr, access, &mut self.tasks[t].perf, false);
        match first {
            // A translation that needs no fault, and no reference model to consult: the
            // page's frame at once.
            Translation::Frame(pfn) if self.oracle.is_none() => Ok(pfn),
            _ => self.access_page_from(t, addr, access, first),
        }
    }

    /// `access_page` given what its first translation found (`first`).
    fn access_page_from(&mut self, t: usize, addr: u64, access: Access, first: Translation) -> Result<Pfn, Stop> {
        let mut oom_tries = 0;
        let mut handled = 0;
        let mut retry = false;
        let mut found = Some(first);
        loop {
            let mm = self.tasks[t].mm.ok_or(Stop::Dead)?;
            let cpu = self.tasks[t].cpu;
            let translation = match found.take() {
                Some(f) => f,
                None => self.machine.translate(cpu, &mut self.kernel, mm, addr, access, &mut self.tasks[t].perf, retry),
            };
            if let Translation::Frame(pfn) = translation {
                if let Some(o) = &self.oracle {
                    let pid = self.tasks[t].pid;
                    if !o.access_ok(self.tasks[t].tgid, self.kernel.geo.page_align_down(addr), access) {
                        let what = access_name(access);
                        self.mismatch(
                            pid,
                            format!("{what} at {addr:#x}: simulator allowed it, reference model raises SIGSEGV"),
                        );
                    }
                }
                return Ok(pfn);
            }
            self.tasks[t].page_faults += 1;
            if self.kernel.tp.is_some() {
                self.tp_page_fault(t, addr, access);
            }
            retry = true;
            self.enter_kernel(t);
            let fault = self.kernel.handle_user_fault(mm, addr, access);
            let outcome = fault.outcome;
            self.io_wait_pages += fault.io_wait_pages;
            {
                let entry = self.machine.exec_cycles(cpu, self.machine.p.cost.fault_entry_exit);
                let handler = self.machine.exec_cycles(cpu, self.machine.p.cost.fault_handler);
                let perf = &mut self.tasks[t].perf;
                perf.charge("asm_exc_page_fault", entry);
                perf.charge(fault.handler, handler);
            }
            self.charge_work(t);
            self.charge_wait_ns(t, fault.io_wait_ns, fault.throttle_ns);
            if outcome != FaultOutcome::Oom {
                self.reap_oom_victims();
                if self.tasks[t].mm.is_none() {
                    return Err(Stop::Dead);
                }
            }
            match outcome {
                FaultOutcome::Handled | FaultOutcome::Major => {
                    if outcome == FaultOutcome::Major {
                        self.tasks[t].majflt += 1;
                        self.charge_io(t);
                    } else {
                        self.tasks[t].minflt += 1;
                    }
                    handled += 1;
                    if handled > LIVELOCK_FAULTS {
                        // The kernel model said it handled the fault but the access faults
                        // again and again: a model bug (its BUG()), not a hang.
                        let what = access_name(access);
                        self.invariant_violation.get_or_insert(format!(
                            "{what} at {addr:#x}: the fault was handled {LIVELOCK_FAULTS} times and the access still \
                             faults (a livelock in the kernel model)"
                        ));
                        self.kill_group(t);
                        self.charge_work(t);
                        return Err(Stop::Dead);
                    }
                    // In fuzz mode the invariants are checked after faults too: with the
                    // system calls, after every step that changes the MM's state, until the
                    // run's faults make that quadratic (`fault_check_due`).
                    self.faults_handled += 1;
                    if fault_check_due(self.faults_handled) {
                        self.after_syscall();
                    }
                }
                FaultOutcome::Segv => {
                    let pid = self.tasks[t].pid;
                    let what = access_name(access);
                    self.event(
                        pid,
                        "segfault",
                        format!("segfault at {addr:#x}: {what} of unmapped or protected memory"),
                    );
                    if let Some(o) = &self.oracle {
                        if o.access_ok(self.tasks[t].tgid, self.kernel.geo.page_align_down(addr), access) {
                            self.mismatch(
                                pid,
                                format!("{what} at {addr:#x}: simulator raised SIGSEGV, reference model allows it"),
                            );
                        }
                    }
                    self.kill_group(t);
                    // The dying task runs do_exit() itself: the teardown is its cycles.
                    self.charge_work(t);
                    return Err(Stop::Dead);
                }
                FaultOutcome::Bus => {
                    let pid = self.tasks[t].pid;
                    self.event(pid, "segfault", format!("SIGBUS at {addr:#x}"));
                    self.kill_group(t);
                    // The dying task runs do_exit() itself: the teardown is its cycles.
                    self.charge_work(t);
                    return Err(Stop::Dead);
                }
                FaultOutcome::Oom => {
                    if let Some(victim) = fault.oom_victim {
                        self.kill_mm(victim);
                        for m in std::mem::take(&mut self.kernel.oom_group_victims) {
                            self.kill_mm(m);
                        }
                        if self.tasks[t].mm.is_none() {
                            return Err(Stop::Dead);
                        }
                    }
                    oom_tries += 1;
                    if oom_tries >= OOM_RETRIES {
                        let pid = self.tasks[t].pid;
                        self.event(
                            pid,
                            "oom-kill",
                            format!("fault at {addr:#x} failed {OOM_RETRIES} times for want of memory: killed"),
                        );
                        self.kill_group(t);
                        self.charge_work(t);
                        return Err(Stop::Dead);
                    }
                }
            }
        }
    }

    pub(super) fn mismatch(&mut self, pid: u32, msg: String) {
        self.check.mismatches += 1;
        self.event(pid, "mismatch", msg);
    }

    /// Advance a read/write/compare by up to `budget` pages; returns the pages used.
    pub(super) fn continue_cursor(&mut self, t: usize, budget: u64) -> u64 {
        match self.tasks[t].cursor {
            Cursor::Access { .. } => self.continue_access(t, budget),
            Cursor::Compare { .. } => self.continue_compare(t, budget),
            Cursor::Atomic { .. } => self.continue_atomic(t, budget),
            Cursor::Fetch { .. } => self.continue_fetch(t, budget),
            Cursor::Random { .. } => self.continue_random(t, budget),
            Cursor::Replay => self.continue_replay(t, budget),
            Cursor::Idle => 0,
        }
    }

    fn continue_access(&mut self, t: usize, budget: u64) -> u64 {
        let mut used = 0;
        while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit) {
            let Cursor::Access { write, next, end, stride, block, block_stride, value, expect, failed } =
                self.tasks[t].cursor
            else {
                return used;
            };
            if next >= end {
                self.tasks[t].cursor = Cursor::Idle;
                return used;
            }
            let PageSpan { page, ps, pe, count, after } = page_span(next, end, stride, self.kernel.geo);
            used += 1;
            self.steps += 1;
            let kind = if write { Access::Write } else { Access::Read };
            let Ok(pfn) = self.access_page(t, next, kind) else {
                return used;
            };
            let page_size = self.kernel.geo.page_size();
            let mut failed = failed;
            if block == 0 {
                failed = self.page_span_access(
                    t,
                    pfn,
                    page,
                    (ps, pe, stride.min(page_size), count),
                    write,
                    value,
                    expect,
                    failed,
                );
            } else {
                // Each step's block, within the page.
                let mut o = ps;
                while o < pe {
                    let be = (o + block).min(page_size);
                    let n = (be - o).div_ceil(block_stride);
                    failed = self.page_span_access(
                        t,
                        pfn,
                        page,
                        (o, be, block_stride.min(page_size), n),
                        write,
                        value,
                        expect,
                        failed,
                    );
                    o += stride;
                }
            }
            if let Cursor::Access { next: n, failed: f, .. } = &mut self.tasks[t].cursor {
                *n = after;
                *f = failed;
            }
        }
        used
    }

    /// The accesses of one page, offsets `ps, ps + st, ... < pe` (`count` of them): their
    /// cost through the caches, then the write of their bytes, or the check of what they read
    /// against `expect` and the reference model. Returns whether an expectation has failed.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn page_span_access(
        &mut self,
        t: usize,
        pfn: Pfn,
        page: u64,
        (ps, pe, st, count): (u64, u64, u64, u64),
        write: bool,
        value: u8,
        expect: Option<u8>,
        mut failed: bool,
    ) -> bool {
        let (pid, tgid) = (self.tasks[t].pid, self.tasks[t].tgid);
        let cpu = self.tasks[t].cpu;
        let ipa = self.machine.p.cost.access_instructions;
        self.machine.page_accesses(cpu, pfn, ps, pe, st, write, ipa, &mut self.tasks[t].perf);
        let (ps, pe, st) = (ps as usize, pe as usize, st as usize);
        if write {
            self.kernel.write_page_content(pfn, ps, pe, st, value);
            if let Some(o) = self.oracle.as_mut() {
                o.write(tgid, page, ps, pe, st, value);
            }
            return failed;
        }
        if expect.is_none() && self.oracle.is_none() {
            // Nothing looks at what was read.
            return failed;
        }
        let got = self.kernel.page_content(pfn);
        let mut expect_msg = None;
        let mut mismatch_msg = None;
        if let Some(x) = expect {
            let bad = match got {
                Some(c) => c.find_not(ps, pe, st, x),
                None => (x != 0).then_some(ps),
            };
            if let Some(off) = bad {
                if !failed {
                    let found = got.map_or(0, |c| c.get(off));
                    expect_msg = Some(format!("read at {:#x}: expected {x}, found {found}", page + off as u64));
                }
                failed = true;
            }
        }
        if let Some(o) = &self.oracle {
            let want = o.page(tgid, page);
            if let Some(off) = first_diff_strided(got, want, ps, pe, st) {
                let (g, w) = (got.map_or(0, |c| c.get(off)), want.map_or(0, |c| c.get(off)));
                mismatch_msg = Some(format!(
                    "read at {:#x}: reference model expects {w}, simulator returned {g}",
                    page + off as u64
                ));
            }
            self.check.reads_checked += count;
        }
        if let Some(m) = expect_msg {
            self.check.expect_failures += 1;
            self.event(pid, "expect", m);
        }
        if let Some(m) = mismatch_msg {
            self.mismatch(pid, m);
        }
        failed
    }

    /// Instruction fetches, a page at a time: the iTLB (walk, fault) once per page, then the
    /// page's lines through the L1i.
    fn continue_fetch(&mut self, t: usize, budget: u64) -> u64 {
        let mut used = 0;
        while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit) {
            let Cursor::Fetch { next, end, stride } = self.tasks[t].cursor else {
                return used;
            };
            if next >= end {
                self.tasks[t].cursor = Cursor::Idle;
                return used;
            }
            let PageSpan { ps, pe, after, .. } = page_span(next, end, stride, self.kernel.geo);
            used += 1;
            self.steps += 1;
            let Ok(pfn) = self.access_page(t, next, Access::Exec) else {
                return used;
            };
            let cpu = self.tasks[t].cpu;
            let ipf = stride.min(self.machine.line_size()) as f64 / self.machine.p.cost.instruction_bytes;
            self.machine.page_fetches(
                cpu,
                pfn,
                ps,
                pe,
                stride.min(self.kernel.geo.page_size()),
                ipf,
                &mut self.tasks[t].perf,
            );
            if let Cursor::Fetch { next: n, .. } = &mut self.tasks[t].cursor {
                *n = after;
            }
        }
        used
    }

    /// A `pattern: "random"` op: one access (a byte, a block, or one fetch of `stride` bytes)
    /// per step to a slot drawn uniformly (Lemire's multiply-shift of a splitmix64 output).
    fn continue_random(&mut self, t: usize, budget: u64) -> u64 {
        let mut used = 0;
        while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit) {
            let Cursor::Random { kind, base, slots, stride, left, rng, block, block_stride, value, expect, failed } =
                self.tasks[t].cursor
            else {
                return used;
            };
            if left == 0 || slots == 0 {
                self.tasks[t].cursor = Cursor::Idle;
                return used;
            }
            let mut next_rng = rng;
            let draw = |state: &mut u64| base + ((splitmix64(state) as u128 * slots as u128) >> 64) as u64 * stride;
            let addr = draw(&mut next_rng);
            // The next two accesses are known: their page-table entries and lines are brought
            // into the host's caches while this one is simulated (a hint only; over a small
            // span what the simulation reads of them stays in the host's caches anyway).
            if left > 1 && slots.saturating_mul(stride) > WARM_MIN_SPAN {
                if let Some(mm) = self.tasks[t].mm {
                    let mut ahead = next_rng;
                    let a1 = draw(&mut ahead);
                    self.machine.warm_access(&mut self.kernel, mm, a1, true);
                    if left > 2 {
                        self.machine.warm_access(&mut self.kernel, mm, draw(&mut ahead), false);
                    }
                }
            }
            used += 1;
            self.steps += 1;
            let Ok(pfn) = self.access_page(t, addr, kind) else {
                return used;
            };
            let page_size = self.kernel.geo.page_size();
            let page = self.kernel.geo.page_align_down(addr);
            let off = addr - page;
            let mut failed = failed;
            match kind {
                Access::Exec => {
                    let cpu = self.tasks[t].cpu;
                    let ipf = stride.min(self.machine.line_size()) as f64 / self.machine.p.cost.instruction_bytes;
                    self.machine.page_fetches(cpu, pfn, off, off + 1, 1, ipf, &mut self.tasks[t].perf);
                }
                _ if block == 0 => {
                    let write = kind == Access::Write;
                    failed = self.page_span_access(t, pfn, page, (off, off + 1, 1, 1), write, value, expect, failed);
                }
                _ => {
                    let write = kind == Access::Write;
                    let end = (off + block).min(page_size);
                    let n = (end - off).div_ceil(block_stride);
                    let span = (off, end, block_stride.min(page_size), n);
                    failed = self.page_span_access(t, pfn, page, span, write, value, expect, failed);
                }
            }
            if let Cursor::Random { left: l, rng: r, failed: f, .. } = &mut self.tasks[t].cursor {
                *l -= 1;
                *r = next_rng;
                *f = failed;
            }
        }
        used
    }

    fn continue_compare(&mut self, t: usize, budget: u64) -> u64 {
        let (pid, tgid) = (self.tasks[t].pid, self.tasks[t].tgid);
        let mut used = 0;
        while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit) {
            let Cursor::Compare { a, b, pos, len, expect, stride } = self.tasks[t].cursor else {
                return used;
            };
            if pos >= len {
                self.finish_compare(t, true, expect);
                return used;
            }
            let pa = a.saturating_add(pos);
            let pb = b.saturating_add(pos);
            let chunk = if stride > 0 {
                1
            } else {
                (self.kernel.geo.page_size() - self.kernel.geo.offset_in_page(pa))
                    .min(self.kernel.geo.page_size() - self.kernel.geo.offset_in_page(pb))
                    .min(len - pos)
            };
            used += 1;
            self.steps += 1;
            let Ok(fa) = self.access_page(t, pa, Access::Read) else {
                return used;
            };
            let Ok(fb) = self.access_page(t, pb, Access::Read) else {
                return used;
            };
            let oa = self.kernel.geo.offset_in_page(pa) as usize;
            let ob = self.kernel.geo.offset_in_page(pb) as usize;
            {
                let cpu = self.tasks[t].cpu;
                let perf = &mut self.tasks[t].perf;
                if stride > 0 {
                    // `*p == *q` in a loop: two loads and the loop's instructions.
                    let ipa = self.machine.p.cost.access_instructions / 2.0;
                    self.machine.page_accesses(cpu, fa, oa as u64, oa as u64 + 1, 1, false, ipa, perf);
                    self.machine.page_accesses(cpu, fb, ob as u64, ob as u64 + 1, 1, false, ipa, perf);
                } else {
                    // memcmp: vector loads of both ranges; its instructions split between them.
                    let lb = self.machine.p.cost.memcmp_load_bytes;
                    let ipa = self.machine.p.cost.memcmp_instructions_per_byte * lb as f64 / 2.0;
                    self.machine.page_accesses(cpu, fa, oa as u64, oa as u64 + chunk, lb, false, ipa, perf);
                    self.machine.page_accesses(cpu, fb, ob as u64, ob as u64 + chunk, lb, false, ipa, perf);
                }
            }
            let same = chunk_equal(self.kernel.page_content(fa), oa, self.kernel.page_content(fb), ob, chunk as usize);
            if let Some(o) = &self.oracle {
                let ra = o.page(tgid, self.kernel.geo.page_align_down(pa));
                let rb = o.page(tgid, self.kernel.geo.page_align_down(pb));
                self.check.reads_checked += 2 * chunk;
                if chunk_equal(ra, oa, rb, ob, chunk as usize) != same {
                    self.mismatch(
                        pid,
                        format!(
                            "compare at {pa:#x} vs {pb:#x}: simulator says equal={same}, reference model disagrees"
                        ),
                    );
                }
            }
            if !same {
                self.finish_compare(t, false, expect);
                return used;
            }
            if let Cursor::Compare { pos: p, .. } = &mut self.tasks[t].cursor {
                *p += if stride > 0 { stride } else { chunk };
            }
        }
        used
    }

    fn continue_atomic(&mut self, t: usize, budget: u64) -> u64 {
        let mut used = 0;
        // Atomics run in exact time order across CPUs: no slack.
        while used < budget && (used == 0 || self.tasks[t].perf.cycles <= self.time_limit - SLICE_SLACK) {
            let Cursor::Atomic { addr, remaining, hold } = self.tasks[t].cursor else { return used };
            if remaining == 0 {
                self.tasks[t].cursor = Cursor::Idle;
                return used;
            }
            used += 1;
            self.steps += 1;
            let Ok(pfn) = self.access_page(t, addr, Access::Write) else { return used };
            let cpu = self.tasks[t].cpu;
            // A locked instruction waits for everything before it, translations included.
            self.machine.drain_translations(cpu, &mut self.tasks[t].perf);
            let line = (pfn.phys(self.kernel.geo) + self.kernel.geo.offset_in_page(addr))
                >> self.machine.line_size().trailing_zeros();
            let now = self.machine.clock[cpu] + self.tasks[t].perf.cycles - self.quantum_base;
            let func = if hold > 0 { "spin_lock" } else { "atomic_add" };
            self.machine.atomic_rmw(cpu, line, now, hold as f64, 1.0, func, &mut self.tasks[t].perf);
            if self.machine.last_wait >= 1.0 && self.kernel.tp.is_some() {
                self.tp_emit(t, crate::tracepoints::ev::LOCK_WAIT, |s| s.machine.lock_wait_fields(line, func));
            }
            if let Cursor::Atomic { remaining: r, .. } = &mut self.tasks[t].cursor {
                *r -= 1;
            }
        }
        used
    }

    fn finish_compare(&mut self, t: usize, equal: bool, expect: Option<bool>) {
        self.tasks[t].cursor = Cursor::Idle;
        if let Some(e) = expect {
            if e != equal {
                let pid = self.tasks[t].pid;
                self.check.expect_failures += 1;
                self.event(pid, "expect", format!("compare: expected equal={e}, memcmp found equal={equal}"));
            }
        }
    }
}

/// First offset in [ps, pe) stepping `st` where two pages differ.
fn first_diff_strided(
    a: Option<&PageContent>,
    b: Option<&PageContent>,
    ps: usize,
    pe: usize,
    st: usize,
) -> Option<usize> {
    match (a, b) {
        (None, None) => None,
        (Some(x), Some(y)) if x == y => None,
        (Some(x), None) | (None, Some(x)) => x.find_not(ps, pe, st, 0),
        (Some(x), Some(y)) => {
            if let (Some(u), Some(v)) = (x.uniform(), y.uniform()) {
                return (u != v).then_some(ps);
            }
            (ps..pe).step_by(st).find(|&o| x.get(o) != y.get(o))
        }
    }
}

/// memcmp of `n` bytes at offset `oa` of one page and `ob` of another.
fn chunk_equal(a: Option<&PageContent>, oa: usize, b: Option<&PageContent>, ob: usize, n: usize) -> bool {
    let ua = a.map_or(Some(0), |c| c.uniform());
    let ub = b.map_or(Some(0), |c| c.uniform());
    if let (Some(x), Some(y)) = (ua, ub) {
        return x == y;
    }
    let get = |c: Option<&PageContent>, o: usize| c.map_or(0, |c| c.get(o));
    (0..n).all(|i| get(a, oa + i) == get(b, ob + i))
}

/// splitmix64 (Steele, Lea and Flood; Vigna's public-domain code): the next output of the
/// generator whose state is `state`. The native runner draws the same sequence.
pub(super) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fuzz mode checks the invariants after each of a run's first 2 * DENSE_FAULT_CHECKS faults,
/// then after every 2nd, 4th, ... fault: DENSE_FAULT_CHECKS checks per doubling of the count.
/// A check costs about what is in use, which grows with the faults, so checking after every
/// fault of a run of n faults costs n^2 and this about 2 * DENSE_FAULT_CHECKS * n. Every system
/// call is still followed by a check, and the run's end by one: a broken invariant is still
/// found, a few faults later.
pub(crate) const DENSE_FAULT_CHECKS: u64 = 1024;

/// Is the `n`-th fault of a run (from 1) one fuzz mode checks after?
pub(crate) fn fault_check_due(n: u64) -> bool {
    let q = n / DENSE_FAULT_CHECKS;
    q < 2 || n & ((1 << q.ilog2()) - 1) == 0
}

#[cfg(test)]
mod tests {
    /// The reference outputs of splitmix64 from state 0 (Vigna's splitmix64.c).
    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        let mut s = 0;
        let out: Vec<u64> = (0..3).map(|_| super::splitmix64(&mut s)).collect();
        assert_eq!(out, [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]);
    }

    /// Every fault up to 2 * DENSE_FAULT_CHECKS is checked, then about DENSE_FAULT_CHECKS per
    /// doubling of the count.
    #[test]
    fn fault_checks_thin_out_as_the_faults_grow() {
        use super::{fault_check_due, DENSE_FAULT_CHECKS as D};
        assert!((1..=2 * D).all(fault_check_due));
        let checks = |a: u64, b: u64| (a..b).filter(|&n| fault_check_due(n)).count() as u64;
        assert_eq!(checks(2 * D, 4 * D), D);
        assert_eq!(checks(4 * D, 8 * D), D);
        assert_eq!(checks(32 * D, 64 * D), D);
    }
}
