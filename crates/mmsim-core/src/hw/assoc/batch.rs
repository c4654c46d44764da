//! Batches: one operation on each of the keys `first + o` for the bits `o` of a mask, made in
//! key order (a run of cache lines, `Machine::run_masks`), or a lookup of each of them
//! (`contains_mask`, which changes nothing). Narrow LRU arrays make them with the array's
//! shape held in registers, comparing tags with AVX2 where the host has it.

use super::{group, SetAssoc, TagGroup, INVALID, INVALID32, LANES};

/// What a batch does to each of its keys: `access`, `fill`, or `access_evicting` noting the
/// keys of the batch's window it evicts (`access_mask_evicting`).
const ACCESS: u8 = 0;
const FILL: u8 = 1;
const ACCESS_EVICTING: u8 = 2;

impl SetAssoc {
    /// `access` of the key `first + o` for each bit `o` of `mask`, in key order: the bits of
    /// the hits. (Keys that share a set each see what the earlier ones left, as one by one.)
    #[inline]
    pub fn access_mask(&mut self, first: u64, mask: u64) -> u64 {
        self.mru = INVALID;
        self.batch::<ACCESS>(first, mask, &mut 0)
    }

    /// `access_mask`, also telling which keys of the window `first .. first + 64` its misses
    /// evicted before their own turn in the batch came (a key evicted by the access of a
    /// smaller one): (hits, those keys' bits). Not inlined: only runs of lines that share L1
    /// sets need it, and the runs that do not stay lean.
    #[inline(never)]
    pub fn access_mask_evicting(&mut self, first: u64, mask: u64) -> (u64, u64) {
        self.mru = INVALID;
        let mut evicted = 0;
        let hits = self.batch::<ACCESS_EVICTING>(first, mask, &mut evicted);
        (hits, evicted)
    }

    /// `fill` of the key `first + o` for each bit `o` of `mask`, in key order: the bits of
    /// the keys that were present.
    #[inline]
    pub fn fill_mask(&mut self, first: u64, mask: u64) -> u64 {
        self.mru = INVALID;
        self.batch::<FILL>(first, mask, &mut 0)
    }

    /// `contains` of the key `first + o` for each bit `o` of `mask`: the bits of the keys
    /// present. Nothing changes, so the keys may share sets.
    #[inline]
    pub fn contains_mask(&self, first: u64, mask: u64) -> u64 {
        if self.len == 0 {
            return 0;
        }
        if self.lru_narrow {
            debug_assert!(mask == 0 || first + 64 - (mask.leading_zeros() as u64) <= self.key_bound);
            if self.avx2 {
                // SAFETY: the host has AVX2 (`has_avx2`).
                return unsafe {
                    match (self.set_groups, self.compact) {
                        (1, false) => self.narrow_contains_avx2::<1, false>(first, mask),
                        (_, false) => self.narrow_contains_avx2::<2, false>(first, mask),
                        (1, true) => self.narrow_contains_avx2::<1, true>(first, mask),
                        (_, true) => self.narrow_contains_avx2::<2, true>(first, mask),
                    }
                };
            }
            return match (self.set_groups, self.compact) {
                (1, false) => self.narrow_contains::<1, false, false>(first, mask),
                (_, false) => self.narrow_contains::<2, false, false>(first, mask),
                (1, true) => self.narrow_contains::<1, false, true>(first, mask),
                (_, true) => self.narrow_contains::<2, false, true>(first, mask),
            };
        }
        let (mut found, mut m) = (0, mask);
        while m != 0 {
            let o = m.trailing_zeros();
            m &= m - 1;
            found |= (self.contains(first + o as u64) as u64) << o;
        }
        found
    }

    /// `contains_mask` of an `lru_narrow` array (`G`, `AVX2`, `C` as for `narrow`).
    #[inline(always)]
    fn narrow_contains<const G: usize, const AVX2: bool, const C: bool>(&self, first: u64, mask: u64) -> u64 {
        debug_assert!(self.lru_narrow && self.set_groups == G && self.compact == C);
        let (set_mask, shift, groups) = (self.set_mask, self.set_shift, self.groups.as_ptr());
        let (mut found, mut m) = (0u64, mask);
        while m != 0 {
            let o = m.trailing_zeros();
            m &= m - 1;
            let key = first + o as u64;
            // SAFETY: the key's set is a set of this array; AVX2 only where the host has it.
            let hit = unsafe { match_set::<G, AVX2, C>(groups, (key & set_mask) as usize, key, shift) };
            found |= ((hit != 0) as u64) << o;
        }
        found
    }

    /// `narrow_contains` compiled with AVX2 (as `narrow_avx2`).
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
    unsafe fn narrow_contains_avx2<const G: usize, const C: bool>(&self, first: u64, mask: u64) -> u64 {
        self.narrow_contains::<G, true, C>(first, mask)
    }

    /// `access_mask`, `fill_mask` or `access_mask_evicting` (its evictions in `evicted`), by
    /// `OP`.
    #[inline(always)]
    fn batch<const OP: u8>(&mut self, first: u64, mask: u64, evicted: &mut u64) -> u64 {
        if self.lru_narrow {
            debug_assert!(mask == 0 || first + 64 - (mask.leading_zeros() as u64) <= self.key_bound);
            if self.avx2 {
                // SAFETY: the host has AVX2 (`has_avx2`).
                return unsafe {
                    match (self.set_groups, self.compact) {
                        (1, false) => self.narrow_avx2::<1, OP, false>(first, mask, evicted),
                        (_, false) => self.narrow_avx2::<2, OP, false>(first, mask, evicted),
                        (1, true) => self.narrow_avx2::<1, OP, true>(first, mask, evicted),
                        (_, true) => self.narrow_avx2::<2, OP, true>(first, mask, evicted),
                    }
                };
            }
            return match (self.set_groups, self.compact) {
                (1, false) => self.narrow::<1, OP, false, false>(first, mask, evicted),
                (_, false) => self.narrow::<2, OP, false, false>(first, mask, evicted),
                (1, true) => self.narrow::<1, OP, false, true>(first, mask, evicted),
                (_, true) => self.narrow::<2, OP, false, true>(first, mask, evicted),
            };
        }
        let (mut found, mut m) = (0, mask);
        while m != 0 {
            let o = m.trailing_zeros();
            m &= m - 1;
            let key = first + o as u64;
            let hit = match OP {
                FILL => self.fill(key),
                ACCESS => self.access(key),
                _ => match self.access_evicting(key) {
                    Ok(()) => true,
                    Err(e) => {
                        *evicted |= e.map_or(0, |e| window_bit(first, key, e));
                        false
                    }
                },
            };
            found |= (hit as u64) << o;
        }
        found
    }

    /// `narrow` compiled with AVX2, comparing tags with it (off x86-64, where `has_avx2` is
    /// false, the portable compares).
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
    unsafe fn narrow_avx2<const G: usize, const OP: u8, const C: bool>(
        &mut self,
        first: u64,
        mask: u64,
        evicted: &mut u64,
    ) -> u64 {
        self.narrow::<G, OP, true, C>(first, mask, evicted)
    }

    /// A batch (`OP`) on an `lru_narrow` array of `G` groups of LANES ways per set, with the
    /// array's shape held in registers over the batch (`AVX2`: only inlined into
    /// `narrow_avx2`; `C`: a compact array's 32-bit tags).
    #[inline(always)]
    fn narrow<const G: usize, const OP: u8, const AVX2: bool, const C: bool>(
        &mut self,
        first: u64,
        mask: u64,
        evicted: &mut u64,
    ) -> u64 {
        debug_assert!(self.lru_narrow && self.set_groups == G && self.compact == C);
        let (set_mask, shift, full, last_shift) = (self.set_mask, self.set_shift, self.full_mask, self.last_shift);
        let (groups, lists) = (self.groups.as_mut_ptr(), self.lists.as_mut_ptr());
        let (mut found, mut added, mut m) = (0u64, 0, mask);
        while m != 0 {
            let o = m.trailing_zeros();
            m &= m - 1;
            let key = first + o as u64;
            let set = (key & set_mask) as usize;
            // The ways whose tag is the key's (a bit each, or two each for 64-bit tags
            // compared without AVX2).
            // SAFETY: `set` is a set of this array (`set_mask`); AVX2 only where the host has it.
            let hit = unsafe { match_set::<G, AVX2, C>(groups, set, key, shift) };
            if hit != 0 {
                found |= 1 << o;
                if OP != FILL {
                    // An LRU hit becomes the most recent.
                    let w = hit.trailing_zeros() >> (!(AVX2 || C)) as u32;
                    // SAFETY: one order per set.
                    unsafe { &mut *lists.add(set) }.promote(w as u64);
                }
                continue;
            }
            // A miss takes the lowest empty way, or the least recent one.
            // SAFETY: one order per set.
            let w = unsafe { &mut *lists.add(set) }.take_way(full, last_shift, &mut added) as usize;
            // SAFETY: way `w` of the set's G * LANES tags, of 4 bytes (C) or 8.
            unsafe {
                if C {
                    let t = (groups as *mut u32).add(set * G * LANES + w);
                    if OP == ACCESS_EVICTING && *t != INVALID32 {
                        *evicted |= window_bit(first, key, ((*t as u64) << shift) | set as u64);
                    }
                    *t = (key >> shift) as u32;
                } else {
                    let t = (groups as *mut u64).add(set * G * LANES + w);
                    if OP == ACCESS_EVICTING && *t != INVALID {
                        *evicted |= window_bit(first, key, *t);
                    }
                    *t = key;
                }
            }
        }
        self.len += added;
        found
    }
}

/// The bit of `e`, a key the access of `key` evicted, in the window of 64 keys from `first`
/// if it lies there after `key` (0 if not).
#[inline(always)]
fn window_bit(first: u64, key: u64, e: u64) -> u64 {
    if e > key && e - first < 64 {
        1 << (e - first)
    } else {
        0
    }
}

/// The ways of set `set` (`G` groups of LANES ways) of the tags at `groups` whose tag is
/// `key`'s: a bit per way with `AVX2` or 32-bit tags (`C`: `key >> shift`), else two bits.
///
/// # Safety
/// `set` is a set of the array whose tags are at `groups`; `AVX2` only where the host has it.
#[inline(always)]
pub(super) unsafe fn match_set<const G: usize, const AVX2: bool, const C: bool>(
    groups: *const TagGroup,
    set: usize,
    key: u64,
    shift: u32,
) -> u32 {
    // SAFETY (all): the set's G groups lie within the tags (the caller's contract); the
    // AVX2 compares run only where the host has AVX2 (`AVX2`, the caller's contract).
    if C {
        let g = unsafe { (groups as *const u32).add(set * G * LANES) } as *const [u32; LANES];
        let t = (key >> shift) as u32;
        let mut m =
            if AVX2 { unsafe { group::match_ways32_avx2(&*g, t) } } else { group::match_tags32(unsafe { &*g }, t) };
        if G == 2 {
            let g = unsafe { g.add(1) };
            m |=
                if AVX2 { unsafe { group::match_ways32_avx2(&*g, t) } } else { group::match_tags32(unsafe { &*g }, t) }
                    << LANES;
        }
        return m;
    }
    let g = unsafe { groups.add(set * G) };
    if AVX2 {
        let mut m = unsafe { group::match_ways_avx2(&(*g).0, key) };
        if G == 2 {
            m |= unsafe { group::match_ways_avx2(&(*g.add(1)).0, key) } << LANES;
        }
        return m;
    }
    // Two bits per way: the second group's from bit 16.
    let mut m = group::match_tags(unsafe { &(*g).0 }, key);
    if G == 2 {
        m |= group::match_tags(unsafe { &(*g.add(1)).0 }, key) << (2 * LANES);
    }
    m
}
