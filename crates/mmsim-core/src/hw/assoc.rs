//! One generic set-associative structure for caches, TLBs and page-walk caches (as ChampSim
//! does): `sets x ways` tags with a pluggable replacement policy. Keys are already reduced to
//! the unit the structure caches (line number, page number, ...); the low bits pick the set.

/// Replacement policies, by the names profiles use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// Least recently used.
    Lru,
    /// First in, first out (hits do not refresh).
    Fifo,
    /// Pseudo-random, from a fixed seed (deterministic).
    Random,
}

impl Replacement {
    pub fn parse(s: &str) -> Option<Replacement> {
        match s {
            "lru" => Some(Replacement::Lru),
            "fifo" => Some(Replacement::Fifo),
            "random" => Some(Replacement::Random),
            _ => None,
        }
    }
}

const INVALID: u64 = u64::MAX;

/// A set-associative array of tags.
#[derive(Clone, Debug)]
pub struct SetAssoc {
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

impl SetAssoc {
    /// `entries` in total, `ways` per set (ways == entries: fully associative). The number of
    /// sets need not be a power of two (then the set index is the key modulo the sets).
    pub fn new(entries: usize, ways: usize, policy: Replacement) -> Result<SetAssoc, String> {
        if entries == 0 {
            return Ok(SetAssoc {
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
        Ok(SetAssoc {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_order_and_eviction() {
        let mut c = SetAssoc::new(4, 4, Replacement::Lru).unwrap();
        for k in [1, 2, 3, 4] {
            assert!(!c.access(k));
        }
        assert!(c.access(1));
        assert_eq!(c.set_order(0), vec![1, 4, 3, 2]);
        assert!(!c.access(5), "miss evicts the LRU entry, 2");
        assert!(!c.contains(2));
        assert_eq!(c.set_order(0), vec![5, 1, 4, 3]);
    }

    #[test]
    fn sets_are_independent() {
        let mut c = SetAssoc::new(8, 2, Replacement::Lru).unwrap();
        // 4 sets; keys 0, 4, 8 map to set 0.
        c.access(0);
        c.access(4);
        c.access(1);
        c.access(8);
        assert!(!c.contains(0), "set 0 holds two ways");
        assert!(c.contains(4) && c.contains(8) && c.contains(1));
    }

    #[test]
    fn fifo_ignores_hits() {
        let mut c = SetAssoc::new(2, 2, Replacement::Fifo).unwrap();
        c.access(1);
        c.access(2);
        c.access(1);
        c.access(3);
        assert!(!c.contains(1), "FIFO evicts the oldest insertion even if it was hit");
    }

    #[test]
    fn random_is_deterministic() {
        let run = || {
            let mut c = SetAssoc::new(4, 4, Replacement::Random).unwrap();
            (0..100).map(|k| c.access(k % 7) as u8).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn bad_geometry() {
        assert!(SetAssoc::new(10, 4, Replacement::Lru).is_err());
        let mut c = SetAssoc::new(12, 4, Replacement::Lru).unwrap();
        // 3 sets, indexed by modulo: 0, 3, 6, 9, 12 share set 0.
        for k in [0, 3, 6, 9, 12] {
            c.access(k);
        }
        assert!(!c.contains(0) && c.contains(12));
        assert_eq!(SetAssoc::new(0, 0, Replacement::Lru).unwrap().capacity(), 0);
    }

    fn digest_of(c: &SetAssoc) -> u64 {
        let mut h = 0;
        c.digest(&mut h);
        h
    }

    #[test]
    fn digest_sees_order_and_payload_not_slot_positions() {
        let mut a = SetAssoc::new(4, 4, Replacement::Lru).unwrap();
        let mut b = SetAssoc::new(4, 4, Replacement::Lru).unwrap();
        // Same contents and recency order, reached through different slots.
        for k in [1, 2, 3] {
            a.access(k);
        }
        for k in [9, 1, 2, 3] {
            b.access(k);
        }
        b.invalidate(9);
        assert_eq!(digest_of(&a), digest_of(&b));
        a.access(1);
        assert_ne!(digest_of(&a), digest_of(&b), "1 is now the most recent in a only");
        let mut t = SetAssoc::new(4, 4, Replacement::Lru).unwrap();
        t.put(5, 100);
        let d = digest_of(&t);
        t.put(5, 101);
        assert_ne!(d, digest_of(&t), "a TLB's payload is part of its state");
        let mut r = SetAssoc::new(2, 2, Replacement::Random).unwrap();
        for k in [1, 2, 3] {
            r.access(k);
        }
        let d = digest_of(&r);
        r.access(4);
        r.access(3);
        r.access(4);
        let same_contents = r.contains(3) && r.contains(4);
        assert!(!same_contents || d != digest_of(&r), "the random state moved");
    }
}
