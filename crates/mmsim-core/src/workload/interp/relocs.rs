//! Where a replay put what the recorded program let the kernel place (`Placement::Kernel`):
//! recorded ranges and the simulated addresses they went to, looked up on every access.

use std::cell::Cell;

/// The recorded ranges the simulated kernel placed elsewhere (`Placement::Kernel`), of one mm:
/// sorted, disjoint, page-aligned (start, end, simulated start). An address outside them is
/// where it was recorded. Tasks sharing an mm share it; a fork copies it, an exec starts empty.
#[derive(Clone, Debug, Default)]
pub(super) struct Relocs {
    v: Vec<(u64, u64, u64)>,
    /// The last two ranges lookups fell in, an entry or a gap between entries, as (start, end,
    /// offset to add): accesses run in streaks, and alternate between the stack and the data.
    memo: Cell<[(u64, u64, u64); 2]>,
}

impl Relocs {
    /// The simulated address of recorded `addr`.
    #[inline]
    pub(super) fn get(&self, addr: u64) -> u64 {
        if self.v.is_empty() {
            return addr;
        }
        let memo = self.memo.get();
        for &(s, e, off) in &memo {
            if addr >= s && addr < e {
                return addr.wrapping_add(off);
            }
        }
        let hit = self.range_of(addr);
        self.memo.set([hit, memo[0]]);
        addr.wrapping_add(hit.2)
    }

    /// The entry or gap `addr` lies in, as (start, end, offset to add).
    fn range_of(&self, addr: u64) -> (u64, u64, u64) {
        let i = self.v.partition_point(|x| x.1 <= addr);
        let gap_start = if i == 0 { 0 } else { self.v[i - 1].1 };
        match self.v.get(i) {
            Some(&(s, e, to)) if addr >= s => (s, e, to.wrapping_sub(s)),
            Some(&(s, _, _)) => (gap_start, s, 0),
            None => (gap_start, u64::MAX, 0),
        }
    }

    /// [addr, addr + len) cut where the translation changes: (simulated start, length) each.
    pub(super) fn pieces(&self, addr: u64, len: u64) -> Vec<(u64, u64)> {
        let end = addr.saturating_add(len);
        let mut out = Vec::new();
        let mut at = addr;
        while at < end {
            let i = self.v.partition_point(|x| x.1 <= at);
            let stop = match self.v.get(i) {
                Some(&(s, e, _)) if at >= s => e.min(end),
                Some(&(s, _, _)) => s.min(end),
                None => end,
            };
            out.push((self.get(at), stop - at));
            at = stop;
        }
        if out.is_empty() {
            out.push((self.get(addr), 0));
        }
        out
    }

    /// Recorded [start, end) is where it was recorded again (unmapped, or mapped anew).
    pub(super) fn remove(&mut self, start: u64, end: u64) {
        let mut kept = Vec::with_capacity(self.v.len() + 1);
        for &(s, e, to) in &self.v {
            if e <= start || s >= end {
                kept.push((s, e, to));
                continue;
            }
            if s < start {
                kept.push((s, start, to));
            }
            if e > end {
                kept.push((end, e, to + (end - s)));
            }
        }
        self.v = kept;
        self.memo.set([(0, 0, 0); 2]);
    }

    /// Recorded [start, end) is at simulated `to`.
    pub(super) fn insert(&mut self, start: u64, end: u64, to: u64) {
        self.remove(start, end);
        if to != start && end > start {
            let i = self.v.partition_point(|x| x.1 <= start);
            self.v.insert(i, (start, end, to));
        }
    }
}
