//! The set-associative structure against the implementation it replaced: random sequences of
//! every operation, on every policy and on geometries with and without power-of-two set
//! counts, must give the same answers, the same evictions, the same recency order in every set
//! and the same digest.

use super::assoc::{Replacement, SetAssoc};

const INVALID: u64 = u64::MAX;

/// The set-associative array as it was before the compact layout (commit 7999621): 64-bit
/// timestamps per way, a division for other set counts.
#[derive(Clone, Debug)]
pub struct ReferenceSetAssoc {
    ways: usize,
    /// sets - 1 when the number of sets is a power of two (mask), else 0 and `sets` is used.
    set_mask: u64,
    sets: u64,
    /// Tags, one per entry, set by set (INVALID when empty): scanned on every lookup, so kept
    /// apart from the stamps, which only a miss or a hit under LRU needs.
    tags: Vec<u64>,
    /// Recency (LRU) or insertion (FIFO, random) stamp of each entry.
    stamps: Vec<u64>,
    /// A payload per entry (a TLB's translation); unused by caches.
    vals: Vec<u64>,
    tick: u64,
    policy: Replacement,
    rng: u64,
    /// Valid entries (an empty array answers every lookup at once).
    len: usize,
}

impl ReferenceSetAssoc {
    /// `entries` in total, `ways` per set (ways == entries: fully associative). The number of
    /// sets need not be a power of two (then the set index is the key modulo the sets).
    pub fn new(entries: usize, ways: usize, policy: Replacement) -> Result<ReferenceSetAssoc, String> {
        if entries == 0 {
            return Ok(ReferenceSetAssoc {
                ways: 0,
                set_mask: 0,
                sets: 0,
                tags: Vec::new(),
                stamps: Vec::new(),
                vals: Vec::new(),
                tick: 0,
                policy,
                rng: 1,
                len: 0,
            });
        }
        if ways == 0 || !entries.is_multiple_of(ways) {
            return Err(format!("{entries} entries do not divide into sets of {ways} ways"));
        }
        let sets = entries / ways;
        Ok(ReferenceSetAssoc {
            ways,
            // Non-power-of-two set counts (a 30 MiB 24-way LLC) index by modulo, standing in
            // for the slice hash real LLCs use.
            set_mask: if sets.is_power_of_two() { (sets - 1) as u64 } else { 0 },
            sets: sets as u64,
            tags: vec![INVALID; entries],
            stamps: vec![0; entries],
            vals: vec![0; entries],
            tick: 0,
            policy,
            rng: 0x9e37_79b9_7f4a_7c15,
            len: 0,
        })
    }

    /// Total entries.
    pub fn capacity(&self) -> usize {
        self.tags.len()
    }

    #[inline]
    fn set_base(&self, key: u64) -> usize {
        let set = if self.set_mask != 0 || self.sets == 1 { key & self.set_mask } else { key % self.sets };
        (set as usize) * self.ways
    }

    #[inline]
    fn touch(&mut self, i: usize) {
        if self.policy == Replacement::Lru {
            self.tick += 1;
            self.stamps[i] = self.tick;
        }
    }

    /// Find `key` in its set, or the slot to evict for it (Err): an empty slot if there is
    /// one, else the oldest stamp (LRU, FIFO) or a pseudo-random way.
    #[inline]
    fn find(&mut self, key: u64) -> Result<usize, usize> {
        let b = self.set_base(key);
        if let Some(i) = position(&self.tags[b..b + self.ways], key) {
            return Ok(b + i);
        }
        Err(self.victim(b))
    }

    /// The slot of the set at `b` to fill: an empty one if any (empty slots have stamp 0,
    /// below every entry's), else the oldest stamp (LRU, FIFO) or a pseudo-random way.
    #[inline]
    fn victim(&mut self, b: usize) -> usize {
        let stamps = &self.stamps[b..b + self.ways];
        let (mut best, mut victim) = (u64::MAX, 0);
        for (i, &st) in stamps.iter().enumerate() {
            if st < best {
                best = st;
                victim = i;
            }
        }
        if best != 0 && self.policy == Replacement::Random {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            victim = (self.rng % self.ways as u64) as usize;
        }
        b + victim
    }

    #[inline]
    fn place(&mut self, i: usize, key: u64) -> Option<u64> {
        let old = self.tags[i];
        self.tick += 1;
        self.tags[i] = key;
        self.stamps[i] = self.tick;
        if old == INVALID {
            self.len += 1;
        }
        (old != INVALID).then_some(old)
    }

    /// Look `key` up; a hit refreshes its recency (LRU).
    #[inline]
    #[allow(dead_code)]
    pub fn lookup(&mut self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Look `key` up and return its payload; a hit refreshes its recency (LRU).
    #[inline]
    pub fn get(&mut self, key: u64) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let b = self.set_base(key);
        let i = b + position(&self.tags[b..b + self.ways], key)?;
        self.touch(i);
        Some(self.vals[i])
    }

    /// Insert or update `key` with payload `val`; returns the evicted key.
    #[inline]
    pub fn put(&mut self, key: u64, val: u64) -> Option<u64> {
        if self.ways == 0 {
            return None;
        }
        match self.find(key) {
            Ok(i) => {
                self.vals[i] = val;
                None
            }
            Err(v) => {
                self.vals[v] = val;
                self.place(v, key)
            }
        }
    }

    /// Whether `key` is present, without touching recency.
    pub fn contains(&self, key: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let b = self.set_base(key);
        position(&self.tags[b..b + self.ways], key).is_some()
    }

    /// Insert `key` (assumed absent), evicting by policy; returns the evicted key.
    #[inline]
    pub fn insert(&mut self, key: u64) -> Option<u64> {
        if self.ways == 0 {
            return None;
        }
        match self.find(key) {
            Ok(_) => None,
            Err(v) => self.place(v, key),
        }
    }

    /// Insert `key` with payload `val` when the caller has just looked it up and missed (a TLB
    /// fill after a walk): no second search for it.
    #[inline]
    pub fn put_absent(&mut self, key: u64, val: u64) -> Option<u64> {
        if self.ways == 0 {
            return None;
        }
        debug_assert!(!self.contains(key));
        let b = self.set_base(key);
        let v = self.victim(b);
        self.vals[v] = val;
        self.place(v, key)
    }

    /// Look up and fill on a miss, in one pass over the set; true on a hit.
    #[inline]
    pub fn access(&mut self, key: u64) -> bool {
        if self.ways == 0 {
            return false;
        }
        match self.find(key) {
            Ok(i) => {
                self.touch(i);
                true
            }
            Err(v) => {
                self.place(v, key);
                false
            }
        }
    }

    /// Insert `key` if absent without touching the recency of a present entry (a prefetch).
    #[inline]
    pub fn fill(&mut self, key: u64) {
        if self.ways == 0 {
            return;
        }
        if let Err(v) = self.find(key) {
            self.place(v, key);
        }
    }

    /// Drop `key` if present (invlpg, a cache line invalidation).
    pub fn invalidate(&mut self, key: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let b = self.set_base(key);
        match position(&self.tags[b..b + self.ways], key) {
            Some(i) => {
                self.tags[b + i] = INVALID;
                self.stamps[b + i] = 0;
                self.len -= 1;
                true
            }
            None => false,
        }
    }

    /// Drop every entry for which `pred(key)` holds (a flush by ASID, say).
    pub fn invalidate_if(&mut self, pred: impl Fn(u64) -> bool) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mut n = 0;
        for (tag, stamp) in self.tags.iter_mut().zip(self.stamps.iter_mut()) {
            if *tag != INVALID && pred(*tag) {
                *tag = INVALID;
                *stamp = 0;
                n += 1;
            }
        }
        self.len -= n as usize;
        n
    }

    /// Drop everything.
    pub fn flush(&mut self) {
        if self.len > 0 {
            self.tags.fill(INVALID);
            self.stamps.fill(0);
        }
        self.len = 0;
    }

    /// Keys of one set from most to least recently used (tests and debugging).
    pub fn set_order(&self, set: usize) -> Vec<u64> {
        let b = set * self.ways;
        let mut v: Vec<(u64, u64)> =
            (b..b + self.ways).filter(|&i| self.tags[i] != INVALID).map(|i| (self.stamps[i], self.tags[i])).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.0));
        v.into_iter().map(|e| e.1).collect()
    }

    /// A digest of the contents, payloads, recency order and random state (for exact
    /// fast-forward of loops). Independent of which slot of a set holds which entry (that
    /// changes nothing the set does later); allocates nothing.
    pub fn digest(&self, h: &mut u64) {
        const PRIME: u64 = 0x100_0000_01b3;
        for s in 0..self.sets as usize {
            let r = s * self.ways..(s + 1) * self.ways;
            let (tags, stamps, vals) = (&self.tags[r.clone()], &self.stamps[r.clone()], &self.vals[r]);
            let mut acc = 0u64;
            for i in 0..tags.len() {
                if tags[i] == INVALID {
                    continue;
                }
                // Its place in the recency order: how many valid entries are more recent.
                let rank = (0..tags.len()).filter(|&j| tags[j] != INVALID && stamps[j] > stamps[i]).count() as u64;
                acc = acc.wrapping_add(mix(tags[i] ^ mix(rank ^ mix(vals[i]))));
            }
            *h = (*h ^ acc).wrapping_mul(PRIME);
        }
        *h = (*h ^ self.rng).wrapping_mul(PRIME);
    }
}

/// Index of `key` in `tags`: eight tags compared per step without an early exit, which the
/// compiler turns into vector compares (a 64-way TLB scan is eight steps).
#[inline]
fn position(tags: &[u64], key: u64) -> Option<usize> {
    let mut chunks = tags.chunks_exact(8);
    let mut base = 0;
    for c in &mut chunks {
        if c.iter().fold(false, |any, &t| any | (t == key)) {
            return c.iter().position(|&t| t == key).map(|i| base + i);
        }
        base += 8;
    }
    chunks.remainder().iter().position(|&t| t == key).map(|i| base + i)
}

/// splitmix64's finaliser: a bijective, thoroughly mixing hash of one word.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[derive(Clone, Debug)]
enum Op {
    Access(u64),
    Fill(u64),
    Get(u64),
    Put(u64, u64),
    PutAbsent(u64, u64),
    Insert(u64),
    Contains(u64),
    Invalidate(u64),
    InvalidateIf(u64),
    Flush,
    /// `access_mask` / `fill_mask` (`bool`: fill) of the keys from a first one (the mask is
    /// cut to the array's sets).
    Mask(u64, u64, bool),
    /// `contains_mask` of the keys from a first one (all of the mask: they may share sets).
    ContainsMask(u64, u64),
}

/// Keys below this give an array of `sets` sets 32-bit tags (`with_key_bound`), the largest
/// tag one below INVALID32.
fn key_bound(sets: usize) -> u64 {
    (u32::MAX as u64) << sets.next_power_of_two().trailing_zeros()
}

/// A key at or above `bound` brought below it: to a key anywhere below, or to one of the
/// keys just below (the largest tags).
fn below(k: u64, bound: u64) -> u64 {
    match k {
        k if k < bound => k,
        k if k & 1 == 0 => k % bound,
        k => bound - 1 - (k >> 1) % 128,
    }
}

impl Op {
    /// The operation with its keys below `bound`.
    fn below(&self, bound: u64) -> Op {
        let b = |k| below(k, bound);
        match *self {
            Op::Access(k) => Op::Access(b(k)),
            Op::Fill(k) => Op::Fill(b(k)),
            Op::Get(k) => Op::Get(b(k)),
            Op::Put(k, v) => Op::Put(b(k), v),
            Op::PutAbsent(k, v) => Op::PutAbsent(b(k), v),
            Op::Insert(k) => Op::Insert(b(k)),
            Op::Contains(k) => Op::Contains(b(k)),
            Op::Invalidate(k) => Op::Invalidate(b(k)),
            Op::InvalidateIf(m) => Op::InvalidateIf(m),
            Op::Flush => Op::Flush,
            // Its keys are below 160.
            Op::Mask(first, m, fill) => Op::Mask(first, m, fill),
            Op::ContainsMask(first, m) => Op::ContainsMask(first, m),
        }
    }
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    // Keys from a small range (so that sets fill, hit and evict) and a few far ones.
    let key = prop_oneof![8 => 0u64..96, 1 => any::<u64>().prop_map(|k| k >> 6)];
    prop_oneof![
        20 => key.clone().prop_map(Op::Access),
        6 => key.clone().prop_map(Op::Fill),
        6 => key.clone().prop_map(Op::Get),
        4 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::Put(k, v)),
        4 => (key.clone(), any::<u64>()).prop_map(|(k, v)| Op::PutAbsent(k, v)),
        3 => key.clone().prop_map(Op::Insert),
        3 => key.clone().prop_map(Op::Contains),
        3 => key.prop_map(Op::Invalidate),
        1 => (2u64..5).prop_map(Op::InvalidateIf),
        1 => Just(Op::Flush),
        4 => (0u64..96, any::<u64>(), any::<bool>()).prop_map(|(k, m, f)| Op::Mask(k, m, f)),
        2 => (0u64..96, any::<u64>()).prop_map(|(k, m)| Op::ContainsMask(k, m)),
    ]
}

/// A batch (`fill_mask` with `fill`, else `access_mask`) of the keys from `first` in `mask`,
/// cut to the array's `sets` so that they lie in distinct sets, made by `a` and one key at a
/// time by the reference `b`: what each answered.
fn batch(a: &mut SetAssoc, b: &mut ReferenceSetAssoc, sets: usize, first: u64, mask: u64, fill: bool) -> (u64, u64) {
    let m = if sets >= 64 { mask } else { mask & ((1 << sets) - 1) };
    let mut want = 0;
    for o in (0..64).filter(|o| m >> o & 1 == 1) {
        let k = first + o;
        let found = if fill {
            let p = b.contains(k);
            b.fill(k);
            p
        } else {
            b.access(k)
        };
        want |= (found as u64) << o;
    }
    let got = if fill { a.fill_mask(first, m) } else { a.access_mask(first, m) };
    (got, want)
}

fn digest_new(c: &SetAssoc) -> u64 {
    let mut h = 1;
    c.digest(&mut h);
    h
}

fn digest_old(c: &ReferenceSetAssoc) -> u64 {
    let mut h = 1;
    c.digest(&mut h);
    h
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    #[test]
    fn the_compact_set_associative_array_behaves_as_the_timestamped_one(
        (sets, ways) in (1usize..6, 1usize..26),
        wide in proptest::bool::ANY,
        policy in 0u8..3,
        ops in proptest::collection::vec(op(), 1..400),
        // Batches compare tags with AVX2 where the host has it, or without.
        avx2 in proptest::bool::ANY,
        // Keys bounded so that a narrow LRU array's tags are 32-bit (`with_key_bound`).
        bounded in proptest::bool::ANY,
    ) {
        // Wide: a fully associative array of 64 or 72 ways (the TLBs of the default and Zen 4).
        let (sets, ways) = if wide { (1, if ways % 2 == 0 { 64 } else { 72 }) } else { (sets, ways) };
        let policy = [Replacement::Lru, Replacement::Fifo, Replacement::Random][policy as usize];
        let mut a = SetAssoc::new(sets * ways, ways, policy).unwrap();
        let bound = if bounded { key_bound(sets) } else { u64::MAX };
        if bounded {
            a = a.with_key_bound(bound);
            let narrow_lru = !wide && ways <= 16 && sets.is_power_of_two() && policy == Replacement::Lru;
            proptest::prop_assert_eq!(a.is_compact(), narrow_lru);
        }
        if !avx2 {
            a = a.without_avx2();
        }
        let mut b = ReferenceSetAssoc::new(sets * ways, ways, policy).unwrap();
        let ops: Vec<Op> = ops.iter().map(|op| op.below(bound)).collect();
        for (n, op) in ops.iter().enumerate() {
            match *op {
                Op::Access(k) => proptest::prop_assert_eq!(a.access(k), b.access(k), "{}: {:?}", n, op),
                Op::Fill(k) => { a.fill(k); b.fill(k); }
                Op::Get(k) => proptest::prop_assert_eq!(a.get(k), b.get(k), "{}: {:?}", n, op),
                Op::Put(k, v) => proptest::prop_assert_eq!(a.put(k, v), b.put(k, v), "{}: {:?}", n, op),
                Op::PutAbsent(k, v) => {
                    if !b.contains(k) {
                        proptest::prop_assert_eq!(a.put_absent(k, v), b.put_absent(k, v), "{}: {:?}", n, op);
                    }
                }
                Op::Insert(k) => proptest::prop_assert_eq!(a.insert(k), b.insert(k), "{}: {:?}", n, op),
                Op::Contains(k) => proptest::prop_assert_eq!(a.contains(k), b.contains(k)),
                Op::Invalidate(k) => proptest::prop_assert_eq!(a.invalidate(k), b.invalidate(k)),
                Op::InvalidateIf(m) => {
                    proptest::prop_assert_eq!(a.invalidate_if(|k| k % m == 1), b.invalidate_if(|k| k % m == 1))
                }
                Op::Flush => { a.flush(); b.flush(); }
                Op::Mask(first, m, fill) => {
                    let (got, want) = batch(&mut a, &mut b, sets, first, m, fill);
                    proptest::prop_assert_eq!(got, want, "{}: {:?}", n, op);
                }
                Op::ContainsMask(first, m) => {
                    let want = (0..64).filter(|&o| b.contains(first + o)).fold(0, |w, o| w | 1 << o);
                    proptest::prop_assert_eq!(a.contains_mask(first, m), want & m, "{}: {:?}", n, op);
                }
            }
            for s in 0..sets {
                proptest::prop_assert_eq!(a.set_order(s), b.set_order(s), "set {} after {}: {:?}", s, n, op);
            }
            proptest::prop_assert_eq!(digest_new(&a), digest_old(&b), "digest after {}: {:?}", n, op);
        }
        proptest::prop_assert_eq!(a.capacity(), b.capacity());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Batches (`access_mask`, `fill_mask`) of narrow LRU arrays, the shape with paths of its
    /// own (with AVX2 and without), mixed with single accesses: as the reference model's
    /// accesses and fills one by one.
    #[test]
    fn batches_of_narrow_lru_arrays_behave_as_single_operations(
        sets in proptest::sample::select(vec![1usize, 2, 4, 8]),
        ways in 1usize..=16,
        avx2 in proptest::bool::ANY,
        ops in proptest::collection::vec((0u64..48, proptest::num::u64::ANY, 0u8..6), 1..300),
        // Keys from a base just below a bound that makes the array compact (32-bit tags).
        bounded in proptest::bool::ANY,
    ) {
        let mut a = SetAssoc::new(sets * ways, ways, Replacement::Lru).unwrap();
        let base = if bounded {
            a = a.with_key_bound(key_bound(sets));
            proptest::prop_assert!(a.is_compact());
            key_bound(sets) - 48 - 64
        } else {
            0
        };
        if !avx2 {
            a = a.without_avx2();
        }
        let mut b = ReferenceSetAssoc::new(sets * ways, ways, Replacement::Lru).unwrap();
        for (n, &(first, m, kind)) in ops.iter().enumerate() {
            let first = base + first;
            if kind == 0 {
                proptest::prop_assert_eq!(a.access(first), b.access(first), "{}", n);
            } else if kind == 4 {
                // `access_mask_evicting` of keys that may share sets (all 64 of them): as one
                // by one, with the keys of the window evicted before their turn.
                let (mut want, mut evicted) = (0u64, 0u64);
                for o in (0..64).filter(|o| m >> o & 1 == 1) {
                    let k = first + o;
                    if b.contains(k) {
                        b.access(k);
                        want |= 1 << o;
                    } else if let Some(e) = b.insert(k) {
                        if e > k && e - first < 64 {
                            evicted |= 1 << (e - first);
                        }
                    }
                }
                proptest::prop_assert_eq!(a.access_mask_evicting(first, m), (want, evicted), "{}", n);
            } else if kind == 5 {
                // `access_mask` / `fill_mask` of keys that may share sets: as one by one.
                let fill = m & 1 == 1;
                let (got, want) = batch(&mut a, &mut b, 64, first, m, fill);
                proptest::prop_assert_eq!(got, want, "{}", n);
            } else if kind == 3 {
                // `contains_mask`, whose keys may share sets (all 64 of them).
                let want = (0..64).filter(|&o| b.contains(first + o)).fold(0, |w, o| w | 1 << o);
                proptest::prop_assert_eq!(a.contains_mask(first, m), want & m, "{}", n);
            } else {
                let fill = kind == 2;
                let (got, want) = batch(&mut a, &mut b, sets, first, m, fill);
                proptest::prop_assert_eq!(got, want, "{}", n);
            }
            for s in 0..sets {
                proptest::prop_assert_eq!(a.set_order(s), b.set_order(s), "set {} after {}", s, n);
            }
        }
    }
}
