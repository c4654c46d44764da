//! The scheduler's sets, in forms cheap for what `round` does to them every quantum: a CPU's
//! runqueue as a sorted vector (a task that ran goes back at the end: its key is the newest)
//! and the busy CPUs as a bit set (`CpuSet`).

pub use crate::hw::cpuset::CpuSet;

/// A CPU's runnable tasks by (last_run, index), least recently run first: the ordered set
/// `BTreeSet<(u64, usize)>` was, as a sorted vector. A task requeued after its quantum has
/// the largest `last_run` yet, so it is appended; the task taken off is found by binary search.
#[derive(Clone, Debug, Default)]
pub struct RunQueue(Vec<(u64, usize)>);

impl RunQueue {
    /// Add `key`; false if it was there.
    #[inline]
    pub fn insert(&mut self, key: (u64, usize)) -> bool {
        if self.0.last().is_none_or(|&l| l < key) {
            self.0.push(key);
            return true;
        }
        match self.0.binary_search(&key) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, key);
                true
            }
        }
    }

    /// Remove `key`; false if it was not there. The task taken off to run is nearly always
    /// the last (the current task, requeued after its previous quantum) or the first (the one
    /// that waited longest): those are looked at before the search.
    #[inline]
    pub fn remove(&mut self, key: &(u64, usize)) -> bool {
        if self.0.last() == Some(key) {
            self.0.pop();
            return true;
        }
        if self.0.first() == Some(key) {
            self.0.remove(0);
            return true;
        }
        match self.0.binary_search(key) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    pub fn contains(&self, key: &(u64, usize)) -> bool {
        self.0.binary_search(key).is_ok()
    }

    /// The task that ran least recently.
    #[inline]
    pub fn first(&self) -> Option<&(u64, usize)> {
        self.0.first()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys in order.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, usize)> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// The run queue answers every operation as the ordered set it replaces.
        #[test]
        fn runqueue_is_the_ordered_set(ops in proptest::collection::vec((0u8..3, 0u64..12, 0usize..6), 0..200)) {
            let (mut q, mut b) = (RunQueue::default(), BTreeSet::new());
            for (op, lr, t) in ops {
                let key = (lr, t);
                match op {
                    0 => prop_assert_eq!(q.insert(key), b.insert(key)),
                    1 => prop_assert_eq!(q.remove(&key), b.remove(&key)),
                    _ => prop_assert_eq!(q.contains(&key), b.contains(&key)),
                }
                prop_assert_eq!(q.first(), b.first());
                prop_assert_eq!(q.len(), b.len());
                prop_assert!(q.iter().eq(b.iter()));
            }
        }
    }
}
