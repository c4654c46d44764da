//! Where a set's tags are kept: groups of LANES 64-bit tags, one host cache line each, or in
//! a compact array (`with_key_bound`) 32-bit tags, the key without its set bits.

use super::{SetAssoc, INVALID, INVALID32, LANES};

/// LANES tags in one host cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(super) struct TagGroup(pub(super) [u64; LANES]);

impl SetAssoc {
    /// The same (empty) array, told that every key it will see is below `bound` (a cache's
    /// physical line numbers, below the machine's memory). A narrow LRU array whose tags then
    /// fit 32 bits (`key >> log2(sets)` below u32::MAX) keeps them so: a 16-way set's tags are
    /// one host cache line. Its behaviour is the same; other arrays are unchanged.
    pub fn with_key_bound(mut self, bound: u64) -> SetAssoc {
        debug_assert_eq!(self.len, 0, "only an empty array changes its tags' width");
        self.key_bound = bound;
        if !self.lru_narrow || self.len != 0 {
            return self;
        }
        let shift = self.sets.trailing_zeros();
        if bound.saturating_sub(1) >> shift >= INVALID32 as u64 {
            return self;
        }
        self.compact = true;
        self.set_shift = shift;
        // Every u32 of an all-ones group is INVALID32.
        self.groups = vec![TagGroup([INVALID; LANES]); (self.sets as usize * self.lanes).div_ceil(2 * LANES)];
        self
    }

    /// Whether tags are 32-bit (`with_key_bound`).
    pub fn is_compact(&self) -> bool {
        self.compact
    }

    /// Every tag, set by set.
    #[inline(always)]
    pub(super) fn tags(&self) -> &[u64] {
        // SAFETY: a TagGroup is LANES u64s without padding (repr(C)).
        unsafe { std::slice::from_raw_parts(self.groups.as_ptr() as *const u64, self.groups.len() * LANES) }
    }

    #[inline(always)]
    pub(super) fn tags_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `tags`.
        unsafe { std::slice::from_raw_parts_mut(self.groups.as_mut_ptr() as *mut u64, self.groups.len() * LANES) }
    }

    /// A compact array's 32-bit tags, set by set (`lanes` per set).
    #[inline(always)]
    pub(super) fn tags32(&self) -> &[u32] {
        // SAFETY: a TagGroup is 2 * LANES u32s without padding (repr(C)).
        unsafe { std::slice::from_raw_parts(self.groups.as_ptr() as *const u32, self.groups.len() * 2 * LANES) }
    }

    #[inline(always)]
    pub(super) fn tags32_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `tags32`.
        unsafe { std::slice::from_raw_parts_mut(self.groups.as_mut_ptr() as *mut u32, self.groups.len() * 2 * LANES) }
    }

    /// A compact array's tag of `key` (its set is implied by where the tag is).
    #[inline(always)]
    pub(super) fn tag32(&self, key: u64) -> u32 {
        debug_assert!(key < self.key_bound, "key {key:#x} beyond the array's bound {:#x}", self.key_bound);
        (key >> self.set_shift) as u32
    }

    /// The key in lane `i` of set `set` (INVALID when empty), whichever width its tag has.
    #[inline(always)]
    pub(super) fn key_at(&self, set: usize, i: usize) -> u64 {
        if self.compact {
            // SAFETY: `i` is a lane of a set.
            match unsafe { *self.tags32().get_unchecked(i) } {
                INVALID32 => INVALID,
                t => ((t as u64) << self.set_shift) | set as u64,
            }
        } else {
            // SAFETY: as above.
            unsafe { *self.tags().get_unchecked(i) }
        }
    }

    /// Put `key` (INVALID: empty it) in lane `i` of set `set`; returns the key it held.
    #[inline(always)]
    pub(super) fn store_key(&mut self, set: usize, i: usize, key: u64) -> u64 {
        if self.compact {
            let old = self.key_at(set, i);
            let t = if key == INVALID { INVALID32 } else { self.tag32(key) };
            // SAFETY: `i` is a lane of a set.
            unsafe { *self.tags32_mut().get_unchecked_mut(i) = t };
            old
        } else {
            // SAFETY: as above.
            std::mem::replace(unsafe { self.tags_mut().get_unchecked_mut(i) }, key)
        }
    }
}
