//! Unit tests of SetAssoc: replacement orders, set independence, geometry errors.

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

#[test]
fn the_set_of_a_key_is_its_remainder() {
    let keys = [0u64, 1, 2, 63, 64, 20479, 20480, 1 << 40, (1 << 58) + 12345, u64::MAX - 1, u64::MAX];
    for sets in [1u64, 3, 7, 12, 20480, 36864, 1 << 20, 1_000_003, (1 << 40) + 1, u64::MAX] {
        let magic = (u128::MAX / sets as u128).wrapping_add(1);
        for &k in &keys {
            assert_eq!(fast_mod(k, magic, sets), k % sets, "{k} % {sets}");
        }
        let mut x = sets;
        for _ in 0..1000 {
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
            assert_eq!(fast_mod(x, magic, sets), x % sets, "{x} % {sets}");
            assert_eq!(fast_mod(x >> 20, magic, sets), (x >> 20) % sets);
        }
    }
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
