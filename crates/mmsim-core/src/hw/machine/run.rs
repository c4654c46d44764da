//! A page visit's lines through the caches as one run (`Machine::run_masks`): each cache
//! level's operations on them as a batch, exact because they fall in distinct sets (or, in
//! the L1, learn from their own evictions where they share one), answered as bit masks.
use super::*;

/// Where the lines of a run (`Machine::run_masks`) were, a bit per line (bit `o`: the run's
/// first line plus `o`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RunMasks {
    /// Not in the L1.
    pub(super) miss: u64,
    /// Missed in the L1, found in the L2.
    pub(super) l2_hit: u64,
    /// Missed in the L1 and the L2, found in the LLC (the rest came from memory).
    pub(super) llc_hit: u64,
    /// In the L1 before the run, evicted by an earlier line of it (asked with `want_before`).
    l1_before: u64,
    /// Filled by the streamer during the run.
    filled: u64,
    /// Of those, in the L2 (the LLC) before the run.
    l2_before: u64,
    llc_before: u64,
}

impl RunMasks {
    /// Where line `o` was found.
    #[inline(always)]
    pub(super) fn level(&self, o: u8) -> Level {
        if self.miss >> o & 1 == 0 {
            Level::L1
        } else {
            below_l1(self.l2_hit, self.llc_hit, o)
        }
    }

    /// The lines the run brought from memory, as a mask of offsets: its own accesses' misses
    /// and the streamer's fills of lines in neither the L2 nor the LLC (the channel's traffic).
    #[inline(always)]
    pub(super) fn fetched_from_memory(&self) -> u64 {
        (self.miss & !self.l2_hit & !self.llc_hit) | (self.filled & !self.l2_before & !self.llc_before)
    }

    /// Where the run's lines (`lines`) were before it, as masks of those in the L2, in the LLC
    /// and in memory (`[l2, llc, mem]`; the rest were in the L1). A line the L1 missed and
    /// had not lost to an earlier line of the run was below it; a line the streamer filled
    /// during the run was where the fill found it, any other where its access did.
    #[inline(always)]
    pub(super) fn before_masks(&self, lines: u64) -> [u64; 3] {
        let below = lines & self.miss & !self.l1_before;
        let (own, filled) = (below & !self.filled, below & self.filled);
        let l2 = (own & self.l2_hit) | (filled & self.l2_before);
        let llc = (own & !self.l2_hit & self.llc_hit) | (filled & !self.l2_before & self.llc_before);
        [l2, llc, below & !l2 & !llc]
    }
}

/// The lines the streamer fills for the misses at offsets `from ..= to` from `first`, each of
/// which continues a stream: each fills the lines after it in its prefetch page (the lines
/// whose `page_mask` bits are the page's), at most `degree` (at least one) of them, as a mask
/// of offsets (all below 64). For the misses within one prefetch page the lines filled are
/// one interval: each miss's starts a line after its predecessor's and ends no earlier.
#[inline(always)]
fn stream_fills(first: u64, from: u64, to: u64, page_mask: u64, degree: u64) -> u64 {
    debug_assert!(degree >= 1 && from <= to);
    let (mut filled, mut p) = (0u64, from);
    while p <= to {
        // The last offset of `p`'s prefetch page, and the last line its misses fill.
        let end = p + (page_mask - ((first + p) & page_mask));
        let top = (to.min(end) + degree).min(end);
        if top > p {
            filled |= (u64::MAX >> (63 - top)) & !(u64::MAX >> (63 - p));
        }
        p = end + 1;
    }
    filled
}

/// Where a line that missed the L1 was, from the bits (`o`) of the lines in the L2 and in the
/// LLC (at most one of the two): the L2, the LLC or memory.
#[inline(always)]
pub(super) fn below_l1(l2: u64, llc: u64, o: u8) -> Level {
    if l2 >> o & 1 != 0 {
        Level::L2
    } else if llc >> o & 1 != 0 {
        Level::Llc
    } else {
        Level::Mem
    }
}

impl Machine {
    /// `cache_access` (with `fetch`, `icache_access`) of each line of a run (`first` plus each of
    /// `offsets`, ascending, below 64), in order, computed cache by cache: where each line was
    /// found (`found`) and, with `want_before`, where it was before the run (`before`, else
    /// left as it was). The state left and every answer are those of the line-by-line
    /// accesses: the run's lines, and those the streamer fills up to the end of the last one's
    /// 4 KiB, fall in distinct sets of the L2 and the LLC, so each of their sets sees its own
    /// line's operations in the same order (the prefetches of a line first, then its access),
    /// and the order between sets changes nothing (but for random replacement, whose shared
    /// generator the order would change: such runs are refused). The L1 sees only the run's
    /// own accesses, in line order, so its sets may each hold several lines of the run (a
    /// 16 KiB L1d has 32 sets of 64-byte lines); a line an earlier line of the run evicts
    /// before its own access was in the L1 before the run (only the run inserts its lines),
    /// which the eviction itself tells. Returns false, doing nothing, when the run does not
    /// qualify. (The run proptest's view of `run_masks` and `RunMasks::before_masks`, a level
    /// per line; the engine reads the masks.)
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub(in crate::hw) fn access_run(
        &mut self,
        cpu: usize,
        first: u64,
        offsets: &[u8],
        found: &mut [Level; 64],
        before: &mut [Level; 64],
        want_before: bool,
        fetch: bool,
    ) -> bool {
        let lines = offsets.iter().fold(0u64, |m, &o| m | 1 << o);
        debug_assert_eq!(lines.count_ones() as usize, offsets.len(), "ascending distinct offsets");
        let Some(r) = self.run_masks(cpu, first, lines, want_before, fetch) else { return false };
        let [l2, llc, mem] = r.before_masks(lines);
        for (k, &o) in offsets.iter().enumerate() {
            found[k] = r.level(o);
            if want_before {
                before[k] = match (l2 | llc | mem) >> o & 1 {
                    0 => Level::L1,
                    _ => below_l1(l2, llc, o),
                };
            }
        }
        true
    }

    /// `access_run` of the lines `first + o` for each bit `o` of `lines`, answered as masks
    /// (`RunMasks`); None, doing nothing, when the run does not qualify.
    pub(super) fn run_masks(
        &mut self,
        cpu: usize,
        first: u64,
        lines: u64,
        want_before: bool,
        fetch: bool,
    ) -> Option<RunMasks> {
        if lines == 0 {
            return Some(RunMasks::default());
        }
        let last = 63 - lines.leading_zeros() as u8;
        let Machine { cpus, llc, prefetch_degree, prefetch_shift, .. } = self;
        let c = &mut cpus[cpu];
        // Instruction fetches go through the L1i, loads and stores through the L1d.
        let Cpu { l1d, l1i, .. } = c;
        let l1 = if fetch { l1i } else { l1d };
        // The lines the run's operations reach, from `first`.
        let fills = *prefetch_degree > 0 && prefetch_shift.is_some();
        let span = match *prefetch_shift {
            Some(shift) if fills => ((((first + last as u64) >> shift) + 1) << shift) - first,
            _ => last as u64 + 1,
        };
        if span > 64
            || [c.l2.sets(), llc.sets()].iter().any(|&sets| span > sets)
            || c.l2.policy() == Replacement::Random
            || llc.policy() == Replacement::Random
        {
            return None;
        }
        // The L1, one batch in line order (lines that share a set meet as one by one): which
        // lines miss, and with `want_before` which lines of the run it held before and lost to
        // an earlier line of the run in their set (only the run's own accesses insert a line
        // of it, so a line evicted before its access was there at the start). Lines in sets
        // of their own cannot evict one another.
        let (hits, l1_before) = if want_before && last as u64 >= l1.sets() {
            l1.access_mask_evicting(first, lines)
        } else {
            (l1.access_mask(first, lines), 0)
        };
        let miss = lines & !hits;
        // The streamer sees each miss in order; a miss that continues a stream fills the lines
        // after it (at most the degree, within its 4 KiB). It sees a block of consecutive
        // misses as one (`observe_run`): all but the first continue the stream.
        let mut filled = 0u64;
        let page_mask = prefetch_shift.map_or(0, |shift| (1u64 << shift) - 1);
        let mut m = miss;
        while m != 0 {
            let o = m.trailing_zeros() as u64;
            let n = (!(m >> o)).trailing_zeros() as u64;
            let hi = o + n - 1;
            m &= !(u64::MAX >> (63 - hi));
            let (head, rest) = c.streams.observe_run(first + o, n);
            // The misses that fill: the block's, or all but its first.
            let from = if head { o } else { o + 1 };
            if fills && rest && from <= hi {
                filled |= stream_fills(first, from, hi, page_mask, *prefetch_degree);
            }
        }
        // The L2: a filled line is filled once (later fills of it change nothing), then
        // accessed if the L1 missed it; a line the fill placed is its set's most recent
        // already, so the access changes nothing either. Every line of the span has a set of
        // its own in the L2 and in the LLC (checked above), so each level's work is a batch.
        let l2_before = c.l2.fill_mask(first, filled);
        c.l2.access_mask(first, filled & miss & l2_before);
        let l2_hit = (filled & miss) | c.l2.access_mask(first, miss & !filled);
        // The LLC: the fills, and the accesses of the lines the L2 missed (none was filled).
        let llc_before = llc.fill_mask(first, filled);
        let llc_hit = llc.access_mask(first, miss & !l2_hit);
        Some(RunMasks { miss, l2_hit, llc_hit, l1_before, filled, l2_before, llc_before })
    }

    /// The lines `count` accesses (with `fetch`, instruction fetches) at offsets `ps, ps + stride,
    /// ... < pe` of the page whose first line is `base` touch, through `cpu`'s caches, each
    /// line's level given to `found_at` in line order: as one run when they qualify
    /// (`access_run`), else one by one.
    #[inline]
    pub(super) fn page_lines(
        &mut self,
        cpu: usize,
        base: u64,
        span: (u64, u64, u64, u64),
        fetch: bool,
        found_at: &mut impl FnMut(&Machine, Level),
    ) {
        if let Some((r, mut lines)) = self.page_run(cpu, base, span, fetch) {
            while lines != 0 {
                let o = lines.trailing_zeros() as u8;
                lines &= lines - 1;
                found_at(self, r.level(o));
            }
        } else {
            self.lines_one_by_one(cpu, base, span, fetch, found_at);
        }
    }

    /// `page_lines` a line at a time (`cache_access`, `icache_access`).
    pub(super) fn lines_one_by_one(
        &mut self,
        cpu: usize,
        base: u64,
        (ps, pe, stride, count): (u64, u64, u64, u64),
        fetch: bool,
        found_at: &mut impl FnMut(&Machine, Level),
    ) {
        self.for_each_line(ps, pe, stride, count, &mut |m: &mut Machine, l: u64| {
            let lvl = if fetch { m.icache_access(cpu, base + l) } else { m.cache_access(cpu, base + l) };
            found_at(m, lvl)
        });
    }

    /// `page_lines`' lines as one run (`run_masks`), with the mask of the lines (from the
    /// first one's), bit `o` for line `(ps >> line_shift) + o`; None, doing nothing, when they
    /// do not qualify (fewer than two lines, or farther than 64 lines apart).
    #[inline]
    pub(super) fn page_run(
        &mut self,
        cpu: usize,
        base: u64,
        (ps, pe, stride, count): (u64, u64, u64, u64),
        fetch: bool,
    ) -> Option<(RunMasks, u64)> {
        let first = ps >> self.line_shift;
        if stride <= self.line_size() {
            // Every line from the first access's to the last's.
            let n = ((ps + (count - 1) * stride) >> self.line_shift) - first + 1;
            if !(2..=64).contains(&n) {
                return None;
            }
            let lines = u64::MAX >> (64 - n);
            return Some((self.run_masks(cpu, base + first, lines, false, fetch)?, lines));
        }
        let (mut lines, mut n, mut fits) = (0u64, 0, true);
        self.for_each_line_offset(ps, pe, stride, count, &mut |o: u64| {
            // A run holds lines within 64 lines of its first.
            if o < 64 {
                lines |= 1 << o;
            } else {
                fits = false;
            }
            n += 1;
        });
        if !fits || n < 2 {
            return None;
        }
        Some((self.run_masks(cpu, base + first, lines, false, fetch)?, lines))
    }
}
