//! Each CPU's clock, kept apart from `Cpu` and compactly (the scheduler reads every busy
//! CPU's each round), with a record of which clocks were written since the scheduler last
//! asked: its cached choice for a CPU is recomputed only when something of that CPU changed.

use std::ops::{Index, IndexMut};

use crate::hw::cpuset::CpuSet;

/// Cycles elapsed on each CPU. Writing one (`IndexMut`) marks it changed.
#[derive(Clone, Debug, Default)]
pub struct Clocks {
    v: Vec<f64>,
    /// The CPUs whose clock was written since `take_changed`.
    changed: CpuSet,
}

impl Clocks {
    /// `n` CPUs at cycle 0, every one marked changed.
    pub fn new(n: usize) -> Clocks {
        let mut changed = CpuSet::default();
        for c in 0..n {
            changed.insert(c);
        }
        Clocks { v: vec![0.0; n], changed }
    }

    /// Every clock, by CPU, to read.
    #[inline(always)]
    pub fn as_slice(&self) -> &[f64] {
        &self.v
    }

    /// Every clock, by CPU.
    pub fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        self.v.iter().copied()
    }

    /// Add the CPUs whose clocks were written since the last call to `into`; the record starts
    /// afresh.
    pub fn take_changed(&mut self, into: &mut CpuSet) {
        into.union_with(&self.changed);
        self.changed.clear();
    }
}

impl Index<usize> for Clocks {
    type Output = f64;
    #[inline(always)]
    fn index(&self, c: usize) -> &f64 {
        &self.v[c]
    }
}

impl IndexMut<usize> for Clocks {
    #[inline(always)]
    fn index_mut(&mut self, c: usize) -> &mut f64 {
        self.changed.insert(c);
        &mut self.v[c]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(c: &mut Clocks) -> Vec<usize> {
        let mut seen = CpuSet::default();
        c.take_changed(&mut seen);
        seen.iter().collect()
    }

    #[test]
    fn writes_are_recorded_once() {
        let mut c = Clocks::new(70);
        assert_eq!(taken(&mut c), (0..70).collect::<Vec<_>>(), "all CPUs start changed");
        let _ = c[3] + c[65];
        assert_eq!(taken(&mut c), Vec::<usize>::new(), "reads are not changes");
        c[3] += 1.0;
        c[65] = 2.0;
        assert_eq!(taken(&mut c), vec![3, 65]);
        assert_eq!((c[3], c[65]), (1.0, 2.0));
        assert_eq!(taken(&mut c), Vec::<usize>::new());
    }
}
