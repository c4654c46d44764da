//! Batches: one operation on each of a set of keys that lie in distinct sets, so that their
//! order changes nothing (a run of cache lines, `Machine::run_masks`). Narrow LRU arrays make
//! them with the array's shape held in registers, comparing tags with AVX2 where the host has
//! it.

use super::{group, SetAssoc, LANES};

impl SetAssoc {
    /// `access` of the key `first + o` for each bit `o` of `mask`: the bits of the hits. The
    /// keys must lie in distinct sets (`mask`'s highest bit below `sets`), so that the order
    /// of their accesses changes nothing and they are made as a batch.
    #[inline]
    pub fn access_mask(&mut self, first: u64, mask: u64) -> u64 {
        self.batch::<false>(first, mask)
    }

    /// `fill` of the key `first + o` for each bit `o` of `mask` (distinct sets, as for
    /// `access_mask`): the bits of the keys that were present.
    #[inline]
    pub fn fill_mask(&mut self, first: u64, mask: u64) -> u64 {
        self.batch::<true>(first, mask)
    }

    /// `access_mask`, or with `FILL` `fill_mask`.
    #[inline(always)]
    fn batch<const FILL: bool>(&mut self, first: u64, mask: u64) -> u64 {
        debug_assert!(mask == 0 || 64 - mask.leading_zeros() as u64 <= self.sets);
        if self.lru_narrow {
            if self.avx2 {
                // SAFETY: the host has AVX2 (`has_avx2`).
                return unsafe {
                    match self.set_groups {
                        1 => self.narrow_mask_avx2::<1, FILL>(first, mask),
                        _ => self.narrow_mask_avx2::<2, FILL>(first, mask),
                    }
                };
            }
            return match self.set_groups {
                1 => self.narrow_mask::<1, FILL, false>(first, mask),
                _ => self.narrow_mask::<2, FILL, false>(first, mask),
            };
        }
        let (mut found, mut m) = (0, mask);
        while m != 0 {
            let o = m.trailing_zeros();
            m &= m - 1;
            let key = first + o as u64;
            found |= (if FILL { self.fill(key) } else { self.access(key) } as u64) << o;
        }
        found
    }

    /// `narrow_mask` compiled with AVX2, comparing tags with it (off x86-64, where `has_avx2`
    /// is false, the portable compares).
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
    unsafe fn narrow_mask_avx2<const G: usize, const FILL: bool>(&mut self, first: u64, mask: u64) -> u64 {
        self.narrow_mask::<G, FILL, true>(first, mask)
    }

    /// `access_mask` (`FILL`: `fill_mask`) of an `lru_narrow` array of `G` tag groups per set,
    /// with the array's shape held in registers over the batch (`AVX2`: only inlined into
    /// `narrow_mask_avx2`).
    #[inline(always)]
    fn narrow_mask<const G: usize, const FILL: bool, const AVX2: bool>(&mut self, first: u64, mask: u64) -> u64 {
        debug_assert!(self.lru_narrow && self.set_groups == G);
        let (set_mask, full, last_shift) = (self.set_mask, self.full_mask, self.last_shift);
        let (groups, lists) = (self.groups.as_mut_ptr(), self.lists.as_mut_ptr());
        let (mut found, mut added, mut m) = (0u64, 0, mask);
        while m != 0 {
            let o = m.trailing_zeros();
            m &= m - 1;
            let key = first + o as u64;
            let set = (key & set_mask) as usize;
            // SAFETY: `set` is a set of this array (`set_mask`), which has G groups of tags and
            // one order per set.
            let (g, l) = unsafe { (groups.add(set * G), &mut *lists.add(set)) };
            // The ways whose tag is `key`: a bit each with AVX2, two bits each without.
            let hit = if AVX2 {
                // SAFETY: AVX2 is only set in `narrow_mask_avx2`, which the host can run.
                let mut m = unsafe { group::match_ways_avx2(&(*g).0, key) };
                if G == 2 {
                    m |= unsafe { group::match_ways_avx2(&(*g.add(1)).0, key) } << LANES;
                }
                m
            } else {
                let mut m = group::match_tags(unsafe { &(*g).0 }, key);
                if G == 2 {
                    m |= group::match_tags(unsafe { &(*g.add(1)).0 }, key) << 16;
                }
                m
            };
            if hit != 0 {
                found |= 1 << o;
                if !FILL {
                    // An LRU hit becomes the most recent.
                    l.promote((hit.trailing_zeros() >> (!AVX2) as u32) as u64);
                }
                continue;
            }
            // A miss takes the lowest empty way, or the least recent one.
            let w = l.take_way(full, last_shift, &mut added);
            // SAFETY: way `w` of the set's G * LANES tags.
            unsafe { *(g as *mut u64).add(w as usize) = key };
        }
        self.len += added;
        found
    }
}
