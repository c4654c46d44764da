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

    /// How many CPUs are in the set.
    pub fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
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

    /// The CPUs, lowest first.
    #[inline]
    pub fn iter(&self) -> Cpus<'_> {
        Cpus { words: &self.0, next_base: 0, base: 0, bits: 0 }
    }
}

/// `CpuSet::iter`: the set's words, one at a time, their bits lowest first (the scheduler
/// walks its busy CPUs every round).
pub struct Cpus<'a> {
    /// The words not yet begun, and the first CPU of the next of them.
    words: &'a [u64],
    next_base: usize,
    /// The first CPU of the current word, and its bits not yet given.
    base: usize,
    bits: u64,
}

impl Iterator for Cpus<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.bits == 0 {
            let (&w, rest) = self.words.split_first()?;
            self.base = self.next_base;
            self.next_base += 64;
            self.words = rest;
            self.bits = w;
        }
        let c = self.base + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        Some(c)
    }

    /// The rest of the CPUs a word at a time (`for_each` comes here): a loop over each word's
    /// bits, with no state kept between CPUs.
    #[inline(always)]
    fn fold<B, F: FnMut(B, usize) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = each_bit(self.base, self.bits, init, &mut f);
        for (i, &w) in self.words.iter().enumerate() {
            acc = each_bit(self.next_base + 64 * i, w, acc, &mut f);
        }
        acc
    }
}

/// `f` over CPU `base + b` for each bit `b` of `bits`, lowest first.
#[inline(always)]
fn each_bit<B>(base: usize, mut bits: u64, mut acc: B, f: &mut impl FnMut(B, usize) -> B) -> B {
    while bits != 0 {
        acc = f(acc, base + bits.trailing_zeros() as usize);
        bits &= bits - 1;
    }
    acc
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
                // `fold` (for_each's way) from the start and after some CPUs were taken one by
                // one, mid-word or at a word's end.
                let want: Vec<usize> = b.iter().copied().collect();
                for k in [0, 1, 2, 64.min(want.len())] {
                    let mut it = s.iter();
                    let head: Vec<usize> = it.by_ref().take(k).collect();
                    let got = it.fold(head, |mut v, c| {
                        v.push(c);
                        v
                    });
                    prop_assert_eq!(&got, &want);
                }
            }
        }
    }
}
