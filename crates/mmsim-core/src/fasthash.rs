//! A fast, fixed hash for the simulator's integer-keyed maps (page-frame numbers, line
//! numbers, mm ids). The standard library's SipHash with a random key resists hash flooding,
//! which a simulator's own keys cannot mount, and costs on every lookup of a fault's hot path
//! (the shared-line calendars, the folio-to-mm map). Fixed, so the maps' iteration order is
//! the same from run to run too.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-and-rotate hasher: each word is added and the state multiplied by an odd
/// constant (the 64-bit golden ratio); `finish` rotates the well-mixed high bits down, where
/// hashbrown takes its bucket index.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl FastHasher {
    #[inline(always)]
    fn add(&mut self, x: u64) {
        self.0 = self.0.wrapping_add(x).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let (chunks, rest) = bytes.as_chunks::<8>();
        for c in chunks {
            self.add(u64::from_le_bytes(*c));
        }
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 59));
    }
    #[inline(always)]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline(always)]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A `HashSet` with [`FastHasher`].
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Consecutive keys (line and frame numbers) spread over hashbrown's bucket index (the
    /// low bits) and its control byte (the top seven).
    #[test]
    fn consecutive_keys_spread_over_low_and_high_bits() {
        let b = BuildHasherDefault::<FastHasher>::default();
        let lows: FastSet<u64> = (0..4096u64).map(|k| b.hash_one(k << 6) & 4095).collect();
        assert!(lows.len() > 2500, "{} distinct low 12-bit values", lows.len());
        let tops: FastSet<u64> = (0..4096u64).map(|k| b.hash_one(k) >> 57).collect();
        assert_eq!(tops.len(), 128);
    }

    #[test]
    fn byte_strings_of_different_lengths_differ() {
        let b = BuildHasherDefault::<FastHasher>::default();
        assert_ne!(b.hash_one("a"), b.hash_one("a\0"));
        assert_ne!(b.hash_one(""), b.hash_one("\0"));
    }
}
