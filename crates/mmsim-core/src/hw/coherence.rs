//! Coherence between the CPUs' private caches (each CPU's L1D and L2; the LLC is shared):
//! MESI kept by a directory, as a socket's snoop filter or home agent keeps it. A read of a
//! line another CPU holds modified is a cache-to-cache transfer (HITM), which leaves both
//! copies shared and the data written back to the LLC; a write invalidates every other copy,
//! fetching the line first if it was modified elsewhere. Each transfer costs the profile's
//! core-to-core latency for the distance between the two CPUs (`Machine::c2c`).
//!
//! The directory is kept lazily, at the granularity of 64-line granules (a 4 KiB page of
//! 64-byte lines): a granule only one CPU has touched since its lines were last dropped
//! everywhere is that CPU's (one entry: the CPU, and whether it wrote), so a CPU working on its
//! own memory pays one array read per page visited. The first access by another CPU turns the
//! granule shared: its one CPU's record stands for every line without an entry of its own
//! (held by that CPU if still in its caches, modified if it wrote to the granule: the
//! deliberate approximation of a dirty bit per line), and from then on every access to it
//! consults and updates its lines' entries. A write of a whole granule (a clear) makes it one
//! CPU's again. A shared granule's record (`GranuleDir`: its one CPU's former entry and its
//! first lines' entries, one host cache line) is found from an array indexed by granule, so
//! that a CPU sweeping a shared region reads its records in order (a hash table of lines
//! missed the host's caches at every access). Differs from hardware: instruction
//! fetches, page walks and the streamer's fills are not snooped (a copy they bring in is not
//! in the directory), the LLC is one for the machine (no forwarding between sockets' LLCs),
//! and more than 64 CPUs share a directory bit per CPU modulo 64 (the copies are probed).

use crate::fasthash::FastMap;

use super::machine::{Level, Machine};
use super::perf::PerfCounters;
use super::profile::Profile;

/// A granule no CPU's private caches are known to hold.
const NONE: u16 = u16::MAX;
/// A granule whose lines the directory tracks one by one.
const SHARED: u16 = u16::MAX - 1;
/// Granules tracked at most (beyond: no coherence for them; a machine of 2^40 bytes of
/// 64-byte lines has 2^28).
const MAX_GRANULES: u64 = 1 << 28;

/// One line's directory entry: the CPU holding it modified, if any, and the CPUs that may
/// hold a copy (bit `cpu % 64`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct LineDir {
    modified: u16,
    sharers: u64,
}

impl Default for LineDir {
    fn default() -> LineDir {
        LineDir { modified: NONE, sharers: 0 }
    }
}

/// What coherence did in a run (the report's `coherence` section).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CoherenceStats {
    /// Modified lines moved from another CPU's private caches, by distance: the same core's
    /// other hardware thread, another core of the socket, a core of another socket.
    pub transfers_smt: u64,
    pub transfers_socket: u64,
    pub transfers_remote: u64,
    /// Of those, the moves of lines used by atomics and locks (`Machine::atomic_rmw`).
    pub atomic_transfers: u64,
    /// Copies invalidated in other CPUs' caches by writes.
    pub invalidations: u64,
    /// Cycles of core-to-core latency paid (transfers and invalidation round trips).
    pub transfer_cycles: f64,
}

/// Lines of a shared granule whose entries its record holds (more go to `Coherence::overflow`).
const INLINE: usize = 4;

/// A shared granule's record: the state of its lines without an entry of their own, and the
/// entries of the first `INLINE` lines that got one.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct GranuleDir {
    /// Lines with an entry of their own (bit per offset in the granule).
    present: u64,
    /// The inline entries: their sharers, modified CPUs and offsets.
    sharers: [u64; INLINE],
    modified: [u16; INLINE],
    off: [u8; INLINE],
    /// Inline entries used.
    n: u8,
    /// Its one CPU's entry when it turned shared (`cpu << 1 | wrote`): that CPU may hold
    /// each line without an entry, modified if it wrote.
    from: u16,
}

impl GranuleDir {
    /// The inline entry of the line at offset `off`, if it has one.
    #[inline]
    fn inline_at(&self, off: u8) -> Option<usize> {
        self.off[..self.n as usize].iter().position(|&o| o == off)
    }
}

/// The directory.
#[derive(Debug, Default)]
pub(super) struct Coherence {
    /// More than one CPU.
    pub(super) on: bool,
    /// Per granule: NONE, SHARED, or `cpu << 1 | wrote` of the one CPU that touched it.
    owner: Vec<u16>,
    /// Per granule: 1 + its record's index in `granules` while it is SHARED, else 0.
    slot: Vec<u32>,
    granules: Vec<GranuleDir>,
    /// Indices of `granules` free for reuse.
    free: Vec<u32>,
    /// Entries of the lines of granules with more than `INLINE` of them, by line.
    overflow: FastMap<u64, LineDir>,
    /// Lines with an entry of their own.
    nlines: usize,
    pub(super) stats: CoherenceStats,
}

impl Coherence {
    /// The directory of a machine of `cpus` CPUs whose physical lines are below `lines` (None:
    /// any; its granule arrays then grow as they are used).
    pub(super) fn new(cpus: usize, lines: Option<u64>) -> Coherence {
        let on = cpus > 1 && cpus < SHARED as usize >> 1;
        let n = match lines {
            Some(l) if on => (l >> 6).min(MAX_GRANULES) as usize + 1,
            _ => 0,
        };
        Coherence { on, owner: vec![NONE; n], slot: vec![0; n], ..Coherence::default() }
    }

    /// Host bytes of the directory (its granule arrays, records and overflow entries, with
    /// the hash table's overhead).
    pub(super) fn host_bytes(&self) -> u64 {
        self.owner.capacity() as u64 * 2
            + self.slot.capacity() as u64 * 4
            + self.granules.capacity() as u64 * std::mem::size_of::<GranuleDir>() as u64
            + self.free.capacity() as u64 * 4
            + self.overflow.capacity() as u64 * 32
    }

    /// Lines with a directory entry (for host memory and the report).
    pub(super) fn directory_lines(&self) -> usize {
        self.nlines
    }

    /// Granule `g` turns shared; `st` is its one CPU's entry (`cpu << 1 | wrote`).
    fn share(&mut self, g: u64, st: u16) {
        let rec =
            GranuleDir { present: 0, sharers: [0; INLINE], modified: [NONE; INLINE], off: [0; INLINE], n: 0, from: st };
        let i = match self.free.pop() {
            Some(i) => {
                self.granules[i as usize] = rec;
                i
            }
            None => {
                self.granules.push(rec);
                self.granules.len() as u32 - 1
            }
        };
        self.owner[g as usize] = SHARED;
        self.slot[g as usize] = i + 1;
    }

    /// Drop shared granule `g`'s record and entries.
    fn forget(&mut self, g: u64) {
        let s = std::mem::take(&mut self.slot[g as usize]);
        if s == 0 {
            return;
        }
        let d = self.granules[s as usize - 1];
        self.nlines -= d.present.count_ones() as usize;
        let mut spilt = d.present;
        for &o in &d.off[..d.n as usize] {
            spilt &= !(1 << o);
        }
        while spilt != 0 {
            self.overflow.remove(&((g << 6) + spilt.trailing_zeros() as u64));
            spilt &= spilt - 1;
        }
        self.free.push(s - 1);
    }

    /// Line `line`'s entry (its granule is shared): its own, else what its granule's one CPU
    /// left (`GranuleDir::from`).
    #[inline]
    fn entry(&self, line: u64) -> LineDir {
        let d = &self.granules[self.slot[(line >> 6) as usize] as usize - 1];
        let off = (line & 63) as u8;
        if d.present >> off & 1 == 1 {
            return match d.inline_at(off) {
                Some(k) => LineDir { modified: d.modified[k], sharers: d.sharers[k] },
                None => self.overflow[&line],
            };
        }
        let o = d.from >> 1;
        LineDir { modified: if d.from & 1 == 1 { o } else { NONE }, sharers: 1 << (o % 64) }
    }

    /// Set line `line`'s own entry (its granule is shared).
    #[inline]
    fn set_entry(&mut self, line: u64, e: LineDir) {
        let d = &mut self.granules[self.slot[(line >> 6) as usize] as usize - 1];
        let off = (line & 63) as u8;
        if d.present >> off & 1 == 1 {
            match d.inline_at(off) {
                Some(k) => (d.modified[k], d.sharers[k]) = (e.modified, e.sharers),
                None => {
                    self.overflow.insert(line, e);
                }
            }
            return;
        }
        d.present |= 1 << off;
        self.nlines += 1;
        let k = d.n as usize;
        if k < INLINE {
            (d.off[k], d.modified[k], d.sharers[k]) = (off, e.modified, e.sharers);
            d.n += 1;
        } else {
            self.overflow.insert(line, e);
        }
    }

    /// Granules `g0..=g1` are `cpu`'s alone (no one's, or only its): mark them as touched
    /// (written, with `write`) and return true; false, at the first that is not.
    #[inline]
    fn claim(&mut self, cpu: usize, g0: u64, g1: u64, write: bool) -> bool {
        if g1 >= self.owner.len() as u64 {
            return false;
        }
        let mine = (cpu as u16) << 1;
        for st in &mut self.owner[g0 as usize..=g1 as usize] {
            if *st == NONE {
                *st = mine | write as u16;
            } else if *st & !1 == mine {
                *st |= write as u16;
            } else {
                return false;
            }
        }
        true
    }

    /// Every line of granules `g0..g1` left every cache (non-temporal stores, an engine's
    /// writes): no CPU holds them.
    pub(super) fn dropped(&mut self, g0: u64, g1: u64) {
        for g in g0..g1.min(self.owner.len() as u64) {
            if self.owner[g as usize] == SHARED {
                self.forget(g);
            }
            self.owner[g as usize] = NONE;
        }
    }
}

/// How far apart two CPUs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distance {
    /// Hardware threads of one core.
    Smt,
    /// Cores of one socket (NUMA node).
    Socket,
    /// Cores of different sockets.
    Remote,
}

/// The profile's core-to-core latency for distance `d` (`smp.line_transfer` where it gives none).
#[inline]
fn c2c_at(p: &Profile, d: Distance) -> f64 {
    let s = &p.smp;
    match d {
        Distance::Smt => s.c2c_smt,
        Distance::Socket => s.c2c_socket,
        Distance::Remote => s.c2c_remote,
    }
    .unwrap_or(s.line_transfer)
}

/// The distance between CPUs `a` and `b` of a machine, from its topology table
/// (`Machine::topo`: SMT siblings share a core, `cpu % cores`; nodes are blocks of
/// consecutive cores, `cpu_to_node`).
#[inline]
pub(super) fn distance_in(topo: &[(u32, u32)], a: usize, b: usize) -> Distance {
    let (x, y) = (topo[a], topo[b]);
    if x.0 == y.0 {
        Distance::Smt
    } else if x.1 == y.1 {
        Distance::Socket
    } else {
        Distance::Remote
    }
}

/// `Machine::c2c` from the profile and the machine's topology table.
#[inline]
pub(super) fn c2c_in(p: &Profile, topo: &[(u32, u32)], from: usize, to: usize) -> f64 {
    c2c_at(p, distance_in(topo, from, to))
}

impl Machine {
    /// Cycles to move a modified line from `from`'s private caches to `to`'s, by distance:
    /// `smp.c2c_smt`, `c2c_socket` or `c2c_remote` (`smp.line_transfer` where the profile
    /// gives none).
    #[inline]
    pub fn c2c(&self, from: usize, to: usize) -> f64 {
        c2c_in(&self.p, &self.topo, from, to)
    }

    /// Count one move of a modified line from `from` to `to` (`atomic`: of an atomic's line)
    /// in the run's statistics and `to`'s perf counters; returns its cycles.
    pub(super) fn count_transfer(&mut self, from: usize, to: usize, atomic: bool, perf: &mut PerfCounters) -> f64 {
        let d = distance_in(&self.topo, from, to);
        let cost = c2c_at(&self.p, d);
        let st = &mut self.coherence.stats;
        match d {
            Distance::Smt => {
                st.transfers_smt += 1;
                perf.hitm_local += 1;
            }
            Distance::Socket => {
                st.transfers_socket += 1;
                perf.hitm_local += 1;
            }
            Distance::Remote => {
                st.transfers_remote += 1;
                perf.hitm_remote += 1;
            }
        }
        st.atomic_transfers += atomic as u64;
        st.transfer_cycles += cost;
        cost
    }

    /// Whether `cpu`'s private caches hold `line`.
    #[inline]
    fn holds(&self, cpu: usize, line: u64) -> bool {
        let c = &self.cpus[cpu];
        c.l1d.contains(line) || c.l2.contains(line)
    }

    /// Coherence before `cpu` reads (with `write`, writes) the lines `count` accesses at
    /// offsets `ps, ps + stride, ... < pe` from line `base` touch (a page visit:
    /// `Machine::page_accesses`' span): other CPUs' copies are fetched or invalidated as MESI
    /// requires. Returns the cycles this adds to the accesses beyond what the caches' levels
    /// charge (the transfers' latency, less the LLC hit the requester's own lookup then
    /// makes). Nothing to do past one array read per granule while every granule the lines
    /// are in is this CPU's alone.
    #[inline]
    pub(super) fn snoop_span(
        &mut self,
        cpu: usize,
        base: u64,
        (ps, pe, stride, count): (u64, u64, u64, u64),
        write: bool,
        perf: &mut PerfCounters,
    ) -> f64 {
        if !self.coherence.on || count == 0 {
            return 0.0;
        }
        let first = base + (ps >> self.line_shift());
        let last = base + ((ps + (count - 1) * stride) >> self.line_shift());
        if self.coherence.claim(cpu, first >> 6, last >> 6, write) {
            return 0.0;
        }
        self.snoop_span_lines(cpu, first, last, (ps, pe, stride, count), write, perf)
    }

    /// `snoop_span` line by line, a granule at a time.
    #[cold]
    fn snoop_span_lines(
        &mut self,
        cpu: usize,
        first: u64,
        last: u64,
        span: (u64, u64, u64, u64),
        write: bool,
        perf: &mut PerfCounters,
    ) -> f64 {
        let (g0, g1) = (first >> 6, last >> 6);
        let mut extra = 0.0;
        let mut g = g0;
        while g <= g1 {
            // Up to 64 granules at a time (a 64 KiB page of 16-byte lines is 64 of them).
            let n = (g1 - g + 1).min(64) as usize;
            let mut masks = [0u64; 64];
            let (ps, pe, stride, count) = span;
            self.for_each_line_offset(ps, pe, stride, count, &mut |o| {
                let l = first + o;
                if (l >> 6) >= g && ((l >> 6) - g) < n as u64 {
                    masks[((l >> 6) - g) as usize] |= 1 << (l & 63);
                }
            });
            for (i, &m) in masks[..n].iter().enumerate() {
                if m != 0 {
                    extra += self.snoop_granule(cpu, g + i as u64, m, write, perf);
                }
            }
            g += n as u64;
        }
        extra
    }

    /// `snoop_span` of granule `g`'s lines `gm` (offsets in it).
    #[inline]
    fn snoop_granule(&mut self, cpu: usize, g: u64, gm: u64, write: bool, perf: &mut PerfCounters) -> f64 {
        let co = &mut self.coherence;
        if g >= co.owner.len() as u64 {
            if g >= MAX_GRANULES {
                return 0.0;
            }
            // A machine built without a memory size: the arrays grow to the granules used.
            co.owner.resize(g as usize + 1, NONE);
            co.slot.resize(g as usize + 1, 0);
        }
        let st = co.owner[g as usize];
        let mine = (cpu as u16) << 1;
        if st == NONE || st & !1 == mine {
            co.owner[g as usize] = mine | (st & 1 & (st != NONE) as u16) | write as u16;
            return 0.0;
        }
        self.snoop_shared(cpu, g, gm, write, st, perf)
    }

    /// The slow path of `snoop_granule`: another CPU has touched the granule.
    #[cold]
    fn snoop_shared(&mut self, cpu: usize, g: u64, gm: u64, write: bool, st: u16, perf: &mut PerfCounters) -> f64 {
        let base = g << 6;
        if st != SHARED {
            let o = (st >> 1) as usize;
            let c = &self.cpus[o];
            let held = c.l1d.contains_mask(base, u64::MAX) | c.l2.contains_mask(base, u64::MAX);
            if held == 0 {
                // The owner kept none of it: the granule is this CPU's now.
                self.coherence.owner[g as usize] = ((cpu as u16) << 1) | write as u16;
                return 0.0;
            }
            self.coherence.share(g, st);
        }
        let llc_stall = self.stall_serial[Level::Llc as usize];
        let mut extra = 0.0;
        let mut m = gm;
        while m != 0 {
            let line = base + m.trailing_zeros() as u64;
            m &= m - 1;
            extra += self.snoop_line(cpu, line, write, llc_stall, perf);
        }
        if write && gm == u64::MAX {
            // A write of the whole granule (a clear, a copy's destination) leaves every line
            // this CPU's alone: the granule is its own again, and the directory forgets it.
            self.coherence.forget(g);
            self.coherence.owner[g as usize] = ((cpu as u16) << 1) | 1;
        }
        extra
    }

    /// MESI for one line of a shared granule: returns the cycles it adds.
    fn snoop_line(&mut self, cpu: usize, line: u64, write: bool, llc_stall: f64, perf: &mut PerfCounters) -> f64 {
        let mut e = self.coherence.entry(line);
        let n = self.cpus.len();
        let mut extra = 0.0;
        let m = e.modified;
        if m != NONE && m as usize != cpu {
            let o = m as usize;
            if self.holds(o, line) {
                // HITM: the line comes from o's cache (written back to the LLC on the way, where
                // the requester's lookup finds it): it costs the transfer instead of that hit
                // (less, from an SMT sibling, whose caches are the same core's).
                let cost = self.count_transfer(o, cpu, false, perf);
                self.llc.fill(line);
                extra += cost - llc_stall;
                if write {
                    self.invalidate_private(o, line);
                    self.coherence.stats.invalidations += 1;
                }
            }
            e.modified = NONE;
            if write {
                e.sharers &= !(1 << (o % 64));
            }
        }
        if write {
            // Invalidate every other copy; the requester waits for the farthest one's
            // acknowledgement (beyond what fetching the line costs it anyway).
            let mut round_trip = 0.0f64;
            let mut bits = e.sharers & !(1u64 << (cpu % 64));
            if n > 64 {
                bits = e.sharers;
            }
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                for s in (b..n).step_by(64) {
                    if s != cpu && self.holds(s, line) {
                        self.invalidate_private(s, line);
                        self.coherence.stats.invalidations += 1;
                        round_trip = round_trip.max(self.c2c(s, cpu));
                    }
                }
            }
            if round_trip > 0.0 {
                // Beyond what the requester's lookup pays where it finds the line.
                self.coherence.stats.transfer_cycles += round_trip;
                let level = self.probe_level(cpu, line);
                extra += (round_trip - self.stall_serial[level as usize]).max(0.0);
            }
            e = LineDir { modified: cpu as u16, sharers: 1 << (cpu % 64) };
        } else {
            e.sharers |= 1 << (cpu % 64);
        }
        self.coherence.set_entry(line, e);
        extra
    }

    /// Drop `line` from `cpu`'s private caches.
    fn invalidate_private(&mut self, cpu: usize, line: u64) {
        let c = &mut self.cpus[cpu];
        c.l1d.invalidate(line);
        c.l2.invalidate(line);
    }

    /// What coherence did so far.
    pub fn coherence_stats(&self) -> (&CoherenceStats, usize) {
        (&self.coherence.stats, self.coherence.directory_lines())
    }
}

#[cfg(test)]
mod directory_props {
    //! The directory's records against a map of line entries: what `entry` returns and how
    //! many lines have entries, whatever the order of sharing, setting and forgetting.
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn records_keep_what_a_map_of_lines_keeps(
            ops in proptest::collection::vec((0u8..3, 0u64..4, 0u64..64, 0u16..8, any::<bool>(), any::<u64>()), 1..300),
        ) {
            let mut co = Coherence::new(8, Some(4 << 6));
            let mut from: HashMap<u64, u16> = HashMap::new();
            let mut lines: HashMap<u64, LineDir> = HashMap::new();
            for (op, g, off, cpu, w, sharers) in ops {
                let line = (g << 6) + off;
                match op {
                    0 if !from.contains_key(&g) => {
                        co.share(g, cpu << 1 | w as u16);
                        from.insert(g, cpu << 1 | w as u16);
                    }
                    1 if from.contains_key(&g) => {
                        let e = LineDir { modified: if w { cpu } else { NONE }, sharers };
                        co.set_entry(line, e);
                        lines.insert(line, e);
                    }
                    2 if from.contains_key(&g) => {
                        co.forget(g);
                        co.owner[g as usize] = NONE;
                        from.remove(&g);
                        lines.retain(|l, _| l >> 6 != g);
                    }
                    _ => {}
                }
                prop_assert_eq!(co.directory_lines(), lines.len());
                for (&g, &st) in &from {
                    for l in g << 6..(g + 1) << 6 {
                        let o = st >> 1;
                        let inherited = LineDir { modified: if st & 1 == 1 { o } else { NONE }, sharers: 1 << (o % 64) };
                        prop_assert_eq!(co.entry(l), lines.get(&l).copied().unwrap_or(inherited));
                    }
                }
            }
        }
    }
}
