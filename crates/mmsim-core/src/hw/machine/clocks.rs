//! Each CPU's clock, kept apart from `Cpu` and compactly (the scheduler reads every busy
//! CPU's each round), with a record of which clocks were written since the scheduler last
//! asked: its cached choice for a CPU is recomputed only when something of that CPU changed.

use std::ops::{Index, IndexMut};

/// Cycles elapsed on each CPU. Writing one (`IndexMut`) marks it changed.
#[derive(Clone, Debug, Default)]
pub struct Clocks {
    v: Vec<f64>,
    /// A bit per CPU whose clock was written since `take_changed`.
    changed: Vec<u64>,
}

impl Clocks {
    /// `n` CPUs at cycle 0, every one marked changed.
    pub fn new(n: usize) -> Clocks {
        let mut changed = vec![0u64; n.div_ceil(64)];
        for c in 0..n {
            changed[c / 64] |= 1 << (c % 64);
        }
        Clocks { v: vec![0.0; n], changed }
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// Every clock, by CPU.
    pub fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        self.v.iter().copied()
    }

    /// The CPUs whose clocks were written since the last call, as a bit set (word `i`, bit `b`:
    /// CPU `64 i + b`), ORed into `into`; the record starts afresh.
    pub fn take_changed(&mut self, into: &mut [u64]) {
        for (d, s) in into.iter_mut().zip(self.changed.iter_mut()) {
            *d |= std::mem::take(s);
        }
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
        self.changed[c / 64] |= 1 << (c % 64);
        &mut self.v[c]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_recorded_once() {
        let mut c = Clocks::new(70);
        let mut seen = vec![0u64; 2];
        c.take_changed(&mut seen);
        assert_eq!(seen, vec![u64::MAX, (1 << 6) - 1], "all CPUs start changed");
        let mut seen = vec![0u64; 2];
        let _ = c[3] + c[65];
        c.take_changed(&mut seen);
        assert_eq!(seen, vec![0, 0], "reads are not changes");
        c[3] += 1.0;
        c[65] = 2.0;
        c.take_changed(&mut seen);
        assert_eq!(seen, vec![1 << 3, 1 << 1]);
        assert_eq!((c[3], c[65]), (1.0, 2.0));
        let mut seen = vec![0u64; 2];
        c.take_changed(&mut seen);
        assert_eq!(seen, vec![0, 0]);
    }
}
