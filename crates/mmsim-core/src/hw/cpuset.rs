//! A set of CPU numbers as a bit set, iterated in ascending order: the scheduler's busy CPUs,
//! and the CPUs whose clock or scheduling state changed since the scheduler last looked.

/// A set of CPU numbers, iterated in ascending order (as a `BTreeSet<usize>` would be).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet(Vec<u64>);

impl CpuSet {
    #[inline]
    pub fn insert(&mut self, cpu: usize) {
        let w = cpu / 64;
        if w >= self.0.len() {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (cpu % 64);
    }

    #[inline]
    pub fn remove(&mut self, cpu: usize) {
        if let Some(w) = self.0.get_mut(cpu / 64) {
            *w &= !(1 << (cpu % 64));
        }
    }

    /// Empty the set (keeping its words: inserting again allocates nothing).
    #[inline]
    pub fn clear(&mut self) {
        self.0.fill(0);
    }

    /// Add every CPU of `other`.
    #[inline]
    pub fn union_with(&mut self, other: &CpuSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (d, s) in self.0.iter_mut().zip(&other.0) {
            *d |= s;
        }
    }

    /// The set's words: CPU `64 * i + b` is in the set when bit `b` of word `i` is set.
    #[inline(always)]
    pub fn words(&self) -> &[u64] {
        &self.0
    }

    /// The CPUs, lowest first.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    i * 64 + b
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// The CPU set iterates as the ordered set it replaces.
        #[test]
        fn cpuset_is_the_ordered_set(ops in proptest::collection::vec((0u8..4, 0usize..200), 0..200)) {
            let (mut s, mut b) = (CpuSet::default(), BTreeSet::new());
            for (op, c) in ops {
                match op {
                    0 | 1 => {
                        s.insert(c);
                        b.insert(c);
                    }
                    2 => {
                        s.remove(c);
                        b.remove(&c);
                    }
                    _ => {
                        // A union with a set of its own, then clearing that one.
                        let mut o = CpuSet::default();
                        o.insert(c);
                        o.insert(c / 2);
                        s.union_with(&o);
                        b.extend([c, c / 2]);
                        o.clear();
                        prop_assert_eq!(o.iter().count(), 0);
                    }
                }
                prop_assert!(s.iter().eq(b.iter().copied()));
            }
        }
    }
}
