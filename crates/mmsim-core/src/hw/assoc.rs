//! One generic set-associative structure for caches, TLBs and page-walk caches (as ChampSim
//! does): `sets x ways` tags with a pluggable replacement policy. Keys are already reduced to
//! the unit the structure caches (line number, page number, ...); the low bits pick the set.
//!
//! Layout, for speed (every simulated load goes through several of these): a set's tags are
//! contiguous and padded to a multiple of [`LANES`] with a tag no key equals, so a lookup
//! compares whole groups of eight with vector compares and no remainder loop; the replacement
//! state is the set's recency order itself, kept compactly (a word of 4-bit way numbers for
//! sets of up to 16 ways, of 5-bit ones up to 25, a doubly linked list of ways for wider
//! ones) instead of a 64-bit timestamp per way, so that a refresh or an eviction is a few
//! shifts or link updates rather than a scan. The set index of a set count that is not a power of two is a multiply-based
//! remainder, not a division. A narrow LRU array whose keys are bounded (a cache's physical
//! line numbers, `with_key_bound`) keeps each tag as 32 bits, the key without its set bits, so
//! that a 16-way set's tags are one host cache line and an 8-way set's half of one.

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

/// The tag of an empty way and of the padding past a set's last way (no key is all ones).
const INVALID: u64 = u64::MAX;

/// A compact array's INVALID (no key's tag is all ones: `with_key_bound`).
const INVALID32: u32 = u32::MAX;

/// Ways are handled in groups of this many (a set's tags and ranks are padded to a multiple).
pub const LANES: usize = 8;

/// Sets of up to this many ways keep their recency order as a list of 4-bit way numbers.
const NIBBLE_WAYS: usize = 16;

/// No way (the end of a set's chain).
const NONE: u32 = u32::MAX;

/// A set-associative array of tags.
///
/// Each set keeps the recency order of its valid entries (LRU: looked up or inserted; FIFO
/// and random: inserted). An insertion takes the lowest-numbered empty way if there is one,
/// else the way the policy evicts: the least recent (LRU, FIFO) or a pseudo-random way.
///
/// The order is kept in one of three forms. Sets of at most 16 ways (caches, most TLBs) hold it
/// as one word: the way numbers from most to least recent, four bits each, beside a bit per
/// valid way; a refresh is a few shifts and the least recent way is the last nibble. Sets of
/// 17 to 25 ways (20- and 24-way LLCs) hold it the same way in a 128-bit word, five bits a
/// way. Wider sets (fully associative TLBs) chain their valid ways from most to least recent.
#[derive(Clone, Debug)]
pub struct SetAssoc {
    ways: usize,
    /// `ways` rounded up to a multiple of LANES: the stride between sets in `tags`.
    lanes: usize,
    sets: u64,
    /// sets - 1 when the number of sets is a power of two.
    set_mask: u64,
    /// The number of sets is a power of two (the set is the key's low bits).
    pow2: bool,
    /// For other set counts, `u128::MAX / sets + 1`: the key's remainder by `sets` is computed
    /// from it with multiplications (Lemire, Kaser and Kurz, "Faster remainder by direct
    /// computation", 2019), exactly, for every key.
    mod_magic: u128,
    /// Tags, set by set, `lanes` per set (INVALID when empty and in the padding), in groups of
    /// LANES aligned to a host cache line: a set of up to eight ways is one line (`tags`). A
    /// compact array keeps 32-bit tags in it instead (`tags32`): 16 a line.
    groups: Vec<TagGroup>,
    /// Tags are `key >> set_shift` in 32 bits (`with_key_bound`): only for `lru_narrow`.
    compact: bool,
    /// log2 of the sets, in a compact array.
    set_shift: u32,
    /// Keys are below this (`with_key_bound`; u64::MAX when unbounded).
    key_bound: u64,
    /// A payload per entry (a TLB's translation); unused by caches.
    vals: Vec<u64>,
    /// Sets of at most NIBBLE_WAYS ways: their order as nibble lists (`lists`).
    nibbles: bool,
    /// Sets of NIBBLE_WAYS + 1 to QUINT_WAYS ways: their order as 5-bit lists (`qlists`).
    quints: bool,
    /// Those sets' recency orders.
    qlists: Vec<QuintList>,
    /// A full set's `valid` in a `qlists` array.
    qfull: u32,
    /// The common shape, with a path of its own: at most 16 ways, a power-of-two number of
    /// sets, LRU (`access_evicting`'s and `fill_lru`).
    lru_narrow: bool,
    /// Narrow sets: each set's recency order.
    lists: Vec<NibbleList>,
    /// Wider sets: each set's chain of valid ways.
    chains: Vec<Chain>,
    /// Wider sets: each way's neighbours in its set's chain, laid out as `tags`.
    links: Vec<Link>,
    /// Wider sets: a byte of each valid way's key (`key_byte`), `byte_lanes` per set, so that
    /// a lookup compares sixteen ways at a time and only the tags of ways whose byte matches.
    key_bytes: Vec<u8>,
    /// `ways` rounded up to a multiple of 16.
    byte_lanes: usize,
    policy: Replacement,
    rng: u64,
    /// Valid entries (an empty array answers every lookup at once).
    len: usize,
    /// Narrow sets: the `valid` of a full set, and the shift of its least recent nibble in
    /// `order` (computed once: a miss asks for both).
    full_mask: u16,
    last_shift: u32,
    /// Groups of LANES tags per set (`lanes / LANES`).
    set_groups: usize,
    /// The host has AVX2: batches (`access_mask`, `fill_mask`) compare tags with it.
    avx2: bool,
    /// The key `access` last touched, while nothing else has changed the array (INVALID
    /// otherwise): it is in its set and the most recent there, so accessing it again is a hit
    /// that changes nothing under any policy (LRU: already the most recent; FIFO and random:
    /// hits change nothing) and is answered at once. Every other change clears it.
    mru: u64,
}

/// Ask the host to bring the cache line holding `p` into its caches (no effect on anything
/// simulated; a no-op where the architecture has no prefetch hint).
#[inline(always)]
pub fn host_prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The byte of `key` a wide set keeps per way (the top byte of a multiplicative hash).
#[inline(always)]
fn key_byte(key: u64) -> u8 {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
}

/// Bit 16c + i set where byte i of chunk c is `b` (up to four chunks).
#[inline(always)]
fn match_key_bytes(chunks: &[[u8; 16]], b: u8) -> u64 {
    debug_assert!(chunks.len() <= 4);
    chunks.iter().enumerate().fold(0, |m, (c, chunk)| m | u64::from(group::match_bytes(chunk, b)) << (16 * c))
}

/// The low `n` bits (all 64 from `n` = 64 on).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1 << n) - 1
    }
}

/// A set: its index and its first lane in `tags`.
#[derive(Clone, Copy)]
struct SetRef {
    set: usize,
    base: usize,
}

/// `a % d` from `magic = u128::MAX / d + 1` (`fastmod_u64` of Lemire et al.): exact for every
/// 64-bit `a` and `d > 0`.
#[inline(always)]
fn fast_mod(a: u64, magic: u128, d: u64) -> u64 {
    let low = magic.wrapping_mul(a as u128);
    let bottom = ((low as u64 as u128) * d as u128) >> 64;
    let top = (low >> 64) * d as u128;
    ((bottom + top) >> 64) as u64
}

mod batch;
mod group;
mod order;
mod tags;

use order::{Chain, Link, NibbleList, QuintList, EMPTY_CHAIN, QUINT_WAYS};
use tags::TagGroup;

/// Why an array's shape was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssocError {
    #[error("{entries} entries do not divide into sets of {ways} ways")]
    Sets { entries: usize, ways: usize },
    #[error("{0} ways: a set has fewer than {NONE}")]
    Ways(usize),
}

impl SetAssoc {
    /// `entries` in total, `ways` per set (ways == entries: fully associative). The number of
    /// sets need not be a power of two (then the set index is the key modulo the sets).
    pub fn new(entries: usize, ways: usize, policy: Replacement) -> Result<SetAssoc, AssocError> {
        if entries == 0 {
            return Ok(SetAssoc {
                ways: 0,
                lanes: 0,
                sets: 0,
                set_mask: 0,
                pow2: true,
                mod_magic: 0,
                groups: Vec::new(),
                compact: false,
                set_shift: 0,
                key_bound: u64::MAX,
                vals: Vec::new(),
                nibbles: true,
                quints: false,
                qlists: Vec::new(),
                qfull: 0,
                lru_narrow: false,
                lists: Vec::new(),
                chains: Vec::new(),
                links: Vec::new(),
                key_bytes: Vec::new(),
                byte_lanes: 0,
                policy,
                rng: 1,
                len: 0,
                full_mask: 0,
                last_shift: 0,
                set_groups: 0,
                avx2: false,
                mru: INVALID,
            });
        }
        if ways == 0 || !entries.is_multiple_of(ways) {
            return Err(AssocError::Sets { entries, ways });
        }
        if ways >= NONE as usize {
            return Err(AssocError::Ways(ways));
        }
        let sets = entries / ways;
        let lanes = ways.next_multiple_of(LANES);
        let nibbles = ways <= NIBBLE_WAYS;
        let quints = !nibbles && ways <= QUINT_WAYS;
        let chained = !nibbles && !quints;
        Ok(SetAssoc {
            ways,
            lanes,
            sets: sets as u64,
            set_mask: (sets as u64).wrapping_sub(1),
            pow2: sets.is_power_of_two(),
            // Non-power-of-two set counts (a 30 MiB 24-way LLC) index by modulo, standing in
            // for the slice hash real LLCs use.
            mod_magic: (u128::MAX / sets as u128).wrapping_add(1),
            groups: vec![TagGroup([INVALID; LANES]); sets * lanes / LANES],
            compact: false,
            set_shift: 0,
            key_bound: u64::MAX,
            vals: vec![0; sets * lanes],
            nibbles,
            quints,
            qlists: if quints { vec![QuintList::default(); sets] } else { Vec::new() },
            qfull: if quints { ((1u64 << ways) - 1) as u32 } else { 0 },
            lru_narrow: nibbles && sets.is_power_of_two() && policy == Replacement::Lru,
            lists: if nibbles { vec![NibbleList::default(); sets] } else { Vec::new() },
            chains: if chained { vec![EMPTY_CHAIN; sets] } else { Vec::new() },
            links: if chained { vec![Link { newer: NONE, older: NONE }; sets * lanes] } else { Vec::new() },
            key_bytes: if nibbles { Vec::new() } else { vec![0; sets * ways.next_multiple_of(16)] },
            byte_lanes: ways.next_multiple_of(16),
            policy,
            rng: 0x9e37_79b9_7f4a_7c15,
            len: 0,
            full_mask: if nibbles { ((1u32 << ways) - 1) as u16 } else { 0 },
            last_shift: if nibbles {
                4 * (ways as u32 - 1)
            } else if quints {
                5 * (ways as u32 - 1)
            } else {
                0
            },
            set_groups: lanes / LANES,
            avx2: group::has_avx2(),
            mru: INVALID,
        })
    }

    /// Total entries.
    pub fn capacity(&self) -> usize {
        self.ways * self.sets as usize
    }

    /// The set `key` belongs to.
    #[inline(always)]
    fn set_of(&self, key: u64) -> u64 {
        if self.pow2 {
            key & self.set_mask
        } else {
            fast_mod(key, self.mod_magic, self.sets)
        }
    }

    /// `key`'s set.
    #[inline(always)]
    fn set_ref(&self, key: u64) -> SetRef {
        let set = self.set_of(key) as usize;
        SetRef { set, base: set * self.lanes }
    }

    /// Set `s`'s recency order (a narrow set).
    #[inline(always)]
    fn list(&mut self, s: SetRef) -> &mut NibbleList {
        debug_assert!(s.set < self.lists.len());
        // SAFETY: `s` is a set of this array (`set_ref`).
        unsafe { self.lists.get_unchecked_mut(s.set) }
    }

    /// The lane of `key` in set `s`, if present.
    #[inline(always)]
    fn position(&self, s: SetRef, key: u64) -> Option<usize> {
        debug_assert!(s.base + self.lanes <= self.sets as usize * self.lanes);
        if self.compact {
            let m = self.match_narrow(s.set, key);
            (m != 0).then(|| s.base + self.first_way(m) as usize)
        } else if self.nibbles {
            self.scan(s.base, key)
        } else {
            self.scan_wide(s, key)
        }
    }

    /// The lane of `key` in wide set `s`: its key byte compared sixteen ways at a time, the tag
    /// of a way only where the bytes match.
    #[inline(always)]
    fn scan_wide(&self, s: SetRef, key: u64) -> Option<usize> {
        let b = s.set * self.byte_lanes;
        debug_assert!(b + self.byte_lanes <= self.key_bytes.len());
        // SAFETY: the set's bytes lie within `key_bytes`.
        let bytes = unsafe { self.key_bytes.get_unchecked(b..b + self.byte_lanes) };
        let kb = key_byte(key);
        // Sixty-four ways at a time: their chunks' matches in one mask, then the tag of each way
        // whose byte matched. Ways past the last (the padding of the last chunk) never match.
        let (full, tail) = bytes.as_chunks::<64>();
        for (blk, block) in full.iter().enumerate() {
            let m = match_key_bytes(block.as_chunks::<16>().0, kb) & low_bits(self.ways - blk * 64);
            if let Some(i) = self.way_with_key(s.base + blk * 64, m, key) {
                return Some(i);
            }
        }
        if !tail.is_empty() {
            let first = full.len() * 64;
            let m = match_key_bytes(tail.as_chunks::<16>().0, kb) & low_bits(self.ways - first);
            return self.way_with_key(s.base + first, m, key);
        }
        None
    }

    /// The first way from lane `base` whose bit is set in `m` and whose tag is `key`.
    #[inline(always)]
    fn way_with_key(&self, base: usize, mut m: u64, key: u64) -> Option<usize> {
        while m != 0 {
            let i = base + m.trailing_zeros() as usize;
            // SAFETY: a way of the set (`m` has bits for the set's ways only).
            if unsafe { *self.tags().get_unchecked(i) } == key {
                return Some(i);
            }
            m &= m - 1;
        }
        None
    }

    /// `position`, looking at the set's most recent way first: it answers a prefetch of a line
    /// just brought in with one compare (not worth its dependent load where lookups are
    /// random).
    #[inline(always)]
    fn position_mru_first(&self, s: SetRef, key: u64) -> Option<usize> {
        debug_assert!(s.base + self.lanes <= self.sets as usize * self.lanes && s.set < self.sets as usize);
        // SAFETY: `s` is a set of this array (`set_ref`): its per-set words exist, and its most
        // recent way is one of its lanes (lane 0 stands in for an empty set's, whose tags are
        // all INVALID).
        let mru = if self.nibbles {
            unsafe { self.lists.get_unchecked(s.set) }.at(0)
        } else if self.quints {
            unsafe { self.qlists.get_unchecked(s.set) }.at(0)
        } else {
            match unsafe { self.chains.get_unchecked(s.set).head } {
                NONE => 0,
                h => h as usize,
            }
        };
        if self.key_at(s.set, s.base + mru) == key {
            return Some(s.base + mru);
        }
        self.position(s, key)
    }

    /// The first lane of the set at `b` whose tag is `key`.
    #[inline(always)]
    fn scan(&self, b: usize, key: u64) -> Option<usize> {
        debug_assert!(!self.compact, "a compact array's sets are matched by `match_narrow`");
        // SAFETY: as in `position`.
        let tags = unsafe { self.tags().get_unchecked(b..b + self.lanes) };
        let (groups, _) = tags.as_chunks::<LANES>();
        for (g, group) in groups.iter().enumerate() {
            let m = group::match_tags(group, key);
            if m != 0 {
                return Some(b + g * LANES + (m.trailing_zeros() / 2) as usize);
            }
        }
        None
    }

    /// A pseudo-random way (xorshift64).
    #[inline(never)]
    fn random_way(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % self.ways as u64) as usize
    }

    /// The slot of set `s` to fill: its lowest-numbered empty way if any, else the least
    /// recent entry (LRU, FIFO) or a pseudo-random way. Also whether the slot was empty or the
    /// least recent (see `promote`).
    #[inline(always)]
    fn victim(&mut self, s: SetRef) -> (usize, bool) {
        let b = s.base;
        let full = if self.nibbles {
            let valid = self.list(s).valid;
            if valid != self.full_mask {
                return (b + (!valid).trailing_zeros() as usize, true);
            }
            true
        } else if self.quints {
            let valid = self.qlists[s.set].valid;
            if valid != self.qfull {
                return (b + (!valid).trailing_zeros() as usize, true);
            }
            true
        } else {
            self.chains[s.set].n as usize == self.ways
        };
        if !full {
            // The lowest-numbered empty way of a wide set (only the padding after its last way
            // is INVALID too).
            let i = self.scan(b, INVALID).expect("a set that is not full has an empty way");
            return (i, true);
        }
        if self.policy == Replacement::Random {
            return (b + self.random_way(), false);
        }
        let last = if self.nibbles {
            ((self.list(s).order >> self.last_shift) & NibbleList::MASK) as usize
        } else if self.quints {
            ((self.qlists[s.set].order >> self.last_shift) & QuintList::MASK) as usize
        } else {
            self.chains[s.set].tail as usize
        };
        (b + last, true)
    }

    /// Put `key` in lane `i` of set `s`, the victim `victim` chose (with its `last`), as its
    /// most recent entry; returns the key it evicted.
    #[inline(always)]
    fn place(&mut self, s: SetRef, (i, last): (usize, bool), key: u64) -> Option<u64> {
        self.promote(s, i, last);
        if !self.nibbles {
            let b = s.set * self.byte_lanes + (i - s.base);
            // SAFETY: a way of the set.
            unsafe { *self.key_bytes.get_unchecked_mut(b) = key_byte(key) };
        }
        let old = self.store_key(s.set, i, key);
        if old == INVALID {
            self.len += 1;
        }
        (old != INVALID).then_some(old)
    }

    #[inline(always)]
    fn set_val(&mut self, i: usize, val: u64) {
        // SAFETY: `i` is a lane of a set (the arrays have the same length).
        unsafe { *self.vals.get_unchecked_mut(i) = val };
    }

    /// Look `key` up; a hit refreshes its recency (LRU).
    #[inline]
    pub fn lookup(&mut self, key: u64) -> bool {
        self.mru = INVALID;
        self.get(key).is_some()
    }

    /// Look `key` up and return its payload; a hit refreshes its recency (LRU). An empty
    /// array (a TLB of a page size nothing maps) answers without a call.
    #[inline(always)]
    pub fn get(&mut self, key: u64) -> Option<u64> {
        self.mru = INVALID;
        if self.len == 0 {
            return None;
        }
        self.get_present(key)
    }

    /// `get` in an array with entries.
    #[inline(never)]
    fn get_present(&mut self, key: u64) -> Option<u64> {
        if self.lru_narrow {
            let set = (key & self.set_mask) as usize;
            let m = self.match_narrow(set, key);
            if m == 0 {
                return None;
            }
            let w = self.first_way(m) as usize;
            self.promote_narrow(set, w as u64);
            // SAFETY: a way of the set.
            return Some(unsafe { *self.vals.get_unchecked(set * self.lanes + w) });
        }
        let b = self.set_ref(key);
        let i = self.position(b, key)?;
        self.touch(b, i);
        // SAFETY: `i` is a lane of a set.
        Some(unsafe { *self.vals.get_unchecked(i) })
    }

    /// Insert or update `key` with payload `val`; returns the evicted key.
    #[inline]
    pub fn put(&mut self, key: u64, val: u64) -> Option<u64> {
        self.mru = INVALID;
        if self.lru_narrow {
            let set = (key & self.set_mask) as usize;
            let m = self.match_narrow(set, key);
            if m != 0 {
                self.set_val(set * self.lanes + self.first_way(m) as usize, val);
                return None;
            }
            let (i, old) = self.insert_narrow(set, key);
            self.set_val(i, val);
            return old;
        }
        if self.ways == 0 {
            return None;
        }
        let b = self.set_ref(key);
        if let Some(i) = self.position(b, key) {
            self.set_val(i, val);
            return None;
        }
        let v = self.victim(b);
        self.set_val(v.0, val);
        self.place(b, v, key)
    }

    /// Whether `key` is present, without touching recency.
    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        if self.lru_narrow {
            return self.match_narrow((key & self.set_mask) as usize, key) != 0;
        }
        self.position(self.set_ref(key), key).is_some()
    }

    /// Insert `key` (assumed absent), evicting by policy; returns the evicted key.
    #[inline]
    pub fn insert(&mut self, key: u64) -> Option<u64> {
        self.mru = INVALID;
        if self.ways == 0 {
            return None;
        }
        let b = self.set_ref(key);
        if self.position(b, key).is_some() {
            return None;
        }
        let v = self.victim(b);
        self.place(b, v, key)
    }

    /// Insert `key` with payload `val` when the caller has just looked it up and missed (a TLB
    /// fill after a walk): no second search for it.
    #[inline]
    pub fn put_absent(&mut self, key: u64, val: u64) -> Option<u64> {
        self.mru = INVALID;
        debug_assert!(!self.contains(key));
        if self.lru_narrow {
            let (i, old) = self.insert_narrow((key & self.set_mask) as usize, key);
            self.set_val(i, val);
            return old;
        }
        if self.ways == 0 {
            return None;
        }
        let b = self.set_ref(key);
        let v = self.victim(b);
        self.set_val(v.0, val);
        self.place(b, v, key)
    }

    /// Look up and fill on a miss, in one pass over the set; true on a hit.
    #[inline(always)]
    pub fn access(&mut self, key: u64) -> bool {
        self.access_evicting(key).is_ok()
    }

    /// `access`, telling on a miss which key the insertion evicted: Ok on a hit, Err(evicted)
    /// on a miss (None when the set had an empty way).
    #[inline(always)]
    pub fn access_evicting(&mut self, key: u64) -> Result<(), Option<u64>> {
        if key == self.mru {
            return Ok(());
        }
        let r = self.access_evicting_inner(key);
        self.mru = if self.ways == 0 { INVALID } else { key };
        r
    }

    #[inline(always)]
    fn access_evicting_inner(&mut self, key: u64) -> Result<(), Option<u64>> {
        if self.lru_narrow {
            let set = (key & self.set_mask) as usize;
            let m = self.match_narrow(set, key);
            if m != 0 {
                // A hit becomes the most recent.
                self.promote_narrow(set, self.first_way(m));
                return Ok(());
            }
            return Err(self.insert_narrow(set, key).1);
        }
        if self.ways == 0 {
            return Err(None);
        }
        let b = self.set_ref(key);
        if let Some(i) = self.position(b, key) {
            self.touch(b, i);
            return Ok(());
        }
        let v = self.victim(b);
        Err(self.place(b, v, key))
    }

    /// The ways of narrow set `set` (8 or 16 lanes) whose tag is `key`: two bits each (bits
    /// 2w and 2w + 1), one each in a compact array (`first_way`).
    #[inline(always)]
    fn match_narrow(&self, set: usize, key: u64) -> u32 {
        debug_assert!(set < self.sets as usize && (!self.compact || key < self.key_bound));
        let (g, shift) = (self.groups.as_ptr(), self.set_shift);
        // SAFETY: `set` is a set of this array, of `set_groups` groups; no AVX2 compares.
        unsafe {
            match (self.set_groups, self.compact) {
                (1, false) => batch::match_set::<1, false, false>(g, set, key, shift),
                (_, false) => batch::match_set::<2, false, false>(g, set, key, shift),
                (1, true) => batch::match_set::<1, false, true>(g, set, key, shift),
                (_, true) => batch::match_set::<2, false, true>(g, set, key, shift),
            }
        }
    }

    /// The first way of a `match_narrow` mask that is not 0.
    #[inline(always)]
    fn first_way(&self, m: u32) -> u64 {
        (m.trailing_zeros() >> (!self.compact) as u32) as u64
    }

    /// A miss in narrow set `set` under LRU or FIFO: `key` takes the lowest empty way, or the
    /// least recent one, as the set's most recent entry. Returns its lane and the key evicted.
    #[inline(always)]
    fn insert_narrow(&mut self, set: usize, key: u64) -> (usize, Option<u64>) {
        // SAFETY: `set` is a set of this array.
        let l = unsafe { self.lists.get_unchecked_mut(set) };
        let w = l.take_way(self.full_mask, self.last_shift, &mut self.len);
        let i = set * self.lanes + w as usize;
        let old = self.store_key(set, i, key);
        (i, (old != INVALID).then_some(old))
    }

    /// Make way `w` of narrow set `set` its most recent (an LRU hit).
    #[inline(always)]
    fn promote_narrow(&mut self, set: usize, w: u64) {
        // SAFETY: `set` is a set of this array.
        unsafe { self.lists.get_unchecked_mut(set) }.promote(w);
    }

    /// `fill` of a `lru_narrow` array: the set's most recent way looked at first.
    #[inline(always)]
    fn fill_lru(&mut self, key: u64) -> bool {
        let set = (key & self.set_mask) as usize;
        // SAFETY: `set` is a set of this array, its most recent way one of its lanes.
        let mru = unsafe { self.lists.get_unchecked(set) }.at(0);
        if self.key_at(set, set * self.lanes + mru) == key || self.match_narrow(set, key) != 0 {
            return true;
        }
        self.insert_narrow(set, key);
        false
    }

    /// `access` where `key` is likely its set's most recent entry (a line the streamer just
    /// brought in): that way is looked at first.
    #[inline(always)]
    pub fn access_likely_mru(&mut self, key: u64) -> bool {
        self.mru = INVALID;
        if self.ways == 0 {
            return false;
        }
        let b = self.set_ref(key);
        if let Some(i) = self.position_mru_first(b, key) {
            self.touch(b, i);
            return true;
        }
        let v = self.victim(b);
        self.place(b, v, key);
        false
    }

    /// Insert `key` if absent without touching the recency of a present entry (a prefetch);
    /// returns whether it was present.
    #[inline(always)]
    pub fn fill(&mut self, key: u64) -> bool {
        self.mru = INVALID;
        if self.lru_narrow {
            return self.fill_lru(key);
        }
        if self.ways == 0 {
            return false;
        }
        let b = self.set_ref(key);
        if self.position_mru_first(b, key).is_some() {
            return true;
        }
        let v = self.victim(b);
        self.place(b, v, key);
        false
    }

    /// Ask the host to bring `key`'s set into its caches (a hint for a lookup coming soon:
    /// the set's tags and its recency order; changes nothing).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        if self.ways == 0 {
            return;
        }
        let s = self.set_ref(key);
        if self.compact {
            // A set's tags are within one host line (LANES or 2 * LANES of 4 bytes, aligned).
            host_prefetch(self.tags32()[s.base..s.base + self.lanes].as_ptr());
        } else {
            let tags = self.tags()[s.base..s.base + self.lanes].as_ptr();
            host_prefetch(tags);
            if self.lanes > LANES {
                // SAFETY: within the set's tags.
                host_prefetch(unsafe { tags.add(LANES) });
            }
        }
        if self.nibbles {
            host_prefetch(&self.lists[s.set]);
        } else if self.quints {
            host_prefetch(&self.qlists[s.set]);
        } else {
            host_prefetch(&self.chains[s.set]);
        }
    }

    /// Compare the tags of batches without AVX2 even where the host has it (tests of both
    /// paths).
    #[cfg(test)]
    pub fn without_avx2(mut self) -> SetAssoc {
        self.avx2 = false;
        self
    }

    /// The replacement policy.
    pub fn policy(&self) -> Replacement {
        self.policy
    }

    /// Sets (consecutive keys fall in distinct sets up to this many).
    pub fn sets(&self) -> u64 {
        self.sets
    }

    /// Drop `key` if present (invlpg, a cache line invalidation).
    pub fn invalidate(&mut self, key: u64) -> bool {
        self.mru = INVALID;
        if self.len == 0 {
            return false;
        }
        let b = self.set_ref(key);
        match self.position(b, key) {
            Some(i) => {
                self.remove(b, i);
                true
            }
            None => false,
        }
    }

    /// Drop every entry for which `pred(key)` holds (a flush by ASID, say).
    pub fn invalidate_if(&mut self, pred: impl Fn(u64) -> bool) -> u64 {
        self.mru = INVALID;
        if self.len == 0 {
            return 0;
        }
        let mut n = 0;
        for set in 0..self.sets as usize {
            let s = SetRef { set, base: set * self.lanes };
            for i in s.base..s.base + self.ways {
                let t = self.key_at(set, i);
                if t != INVALID && pred(t) {
                    self.remove(s, i);
                    n += 1;
                }
            }
        }
        n
    }

    /// Drop everything.
    pub fn flush(&mut self) {
        self.mru = INVALID;
        if self.len > 0 {
            // Also every 32-bit tag of a compact array.
            self.tags_mut().fill(INVALID);
            self.lists.fill(NibbleList::default());
            self.qlists.fill(QuintList::default());
            self.chains.fill(EMPTY_CHAIN);
        }
        self.len = 0;
    }

    /// Keys of one set from most to least recently used (tests and debugging).
    pub fn set_order(&self, set: usize) -> Vec<u64> {
        let s = SetRef { set, base: set * self.lanes };
        self.recency_order(s).into_iter().map(|i| self.key_at(set, i)).collect()
    }

    /// A digest of the contents, payloads, recency order and random state (for exact
    /// fast-forward of loops). Independent of which slot of a set holds which entry (that
    /// changes nothing the set does later); allocates nothing.
    pub fn digest(&self, h: &mut u64) {
        const PRIME: u64 = 0x100_0000_01b3;
        for set in 0..self.sets as usize {
            let s = SetRef { set, base: set * self.lanes };
            let mut acc = 0u64;
            // Each entry with its place in the recency order (how many valid entries are more
            // recent), walked from the most recent.
            let mut add = |rank: u64, i: usize| {
                acc = acc.wrapping_add(mix(self.key_at(set, i) ^ mix(rank ^ mix(self.vals[i]))));
            };
            if self.nibbles {
                let l = self.lists[s.set];
                for p in 0..l.valid.count_ones() {
                    add(p as u64, s.base + l.at(p));
                }
            } else if self.quints {
                let l = self.qlists[s.set];
                for p in 0..l.valid.count_ones() {
                    add(p as u64, s.base + l.at(p));
                }
            } else {
                let (mut w, mut rank) = (self.chains[s.set].head, 0);
                while w != NONE {
                    add(rank, s.base + w as usize);
                    w = self.links[s.base + w as usize].older;
                    rank += 1;
                }
            }
            *h = (*h ^ acc).wrapping_mul(PRIME);
        }
        *h = (*h ^ self.rng).wrapping_mul(PRIME);
    }
}

/// splitmix64's finaliser: a bijective, thoroughly mixing hash of one word.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
