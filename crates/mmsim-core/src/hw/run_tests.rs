//! `Machine::access_run` (a page visit's lines simulated cache by cache) against the same
//! lines accessed one by one with `cache_access`, from random cache states, on small caches
//! with and without the streamer: same levels, same state (digest), and the levels the lines
//! had before the run.

use super::machine::{Level, Machine};
use super::profile;

/// `memory`: the machine's physical memory (u64::MAX: unbounded, 64-bit tags; a bound lets
/// the LRU caches keep 32-bit ones).
fn machine(degree: u32, streams: u32, l2_ways: &str, policy: &str, l1: (&str, &str), memory: u64) -> Machine {
    let p = profile::builtin(
        "default",
        &[
            ("cache.l1d.size".into(), l1.0.into()),
            ("cache.l1d.ways".into(), l1.1.into()),
            ("cache.l1i.size".into(), l1.0.into()),
            ("cache.l1i.ways".into(), l1.1.into()),
            ("cache.l2.size".into(), "8K".into()),
            ("cache.l2.ways".into(), l2_ways.into()),
            ("cache.l2.replacement".into(), policy.into()),
            ("cache.llc.size".into(), "16K".into()),
            ("cache.llc.ways".into(), "4".into()),
            ("cache.prefetch_degree".into(), degree.to_string()),
            ("cache.prefetch_streams".into(), streams.to_string()),
        ],
    )
    .unwrap();
    Machine::with_memory(p, 1, memory)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    #[test]
    fn a_run_of_lines_is_their_accesses_one_by_one(
        degree in 0u32..4,
        streams in 0u32..4,
        wide_l2 in proptest::bool::ANY,
        policy in 0usize..3,
        // 64 sets of one way, 32 of two (a run's lines share sets), 4 of two.
        l1 in 0usize..3,
        // Instruction fetches (the L1i) or loads (the L1d).
        fetch in proptest::bool::ANY,
        want_before in proptest::bool::ANY,
        // Physical memory of 36 KiB (every line drawn is below it; the caches' tags are 32-bit)
        // or unbounded (64-bit).
        bounded in proptest::bool::ANY,
        warm in proptest::collection::vec(0u64..512, 0..400),
        // Lines drawn at random, or a block of consecutive lines (a stream's page).
        runs in proptest::collection::vec(
            (0u64..448, proptest::collection::vec(proptest::bool::ANY, 64), proptest::option::of((0u8..64, 0u8..64))),
            1..6,
        ),
    ) {
        let policy = ["lru", "fifo", "random"][policy];
        let l2_ways = if wide_l2 { "2" } else { "4" };
        let l1 = [("4K", "1"), ("4K", "2"), ("512", "2")][l1];
        let memory = if bounded { 576 * 64 } else { u64::MAX };
        let (mut a, mut b) = (
            machine(degree, streams, l2_ways, policy, l1, memory),
            machine(degree, streams, l2_ways, policy, l1, memory),
        );
        if bounded {
            proptest::prop_assert_eq!(a.llc.is_compact(), true);
        }
        for &l in &warm {
            a.cache_access(0, l);
            b.cache_access(0, l);
        }
        for (first, pick, block) in &runs {
            let offsets: Vec<u8> = match *block {
                Some((a, b)) => (a.min(b)..=a.max(b)).collect(),
                None => (0..64u8).filter(|&o| pick[o as usize]).collect(),
            };
            let before_b: Vec<Level> = offsets.iter().map(|&o| b.probe_level(0, first + o as u64)).collect();
            let (mut found, mut before) = ([Level::L1; 64], [Level::L1; 64]);
            if a.access_run(0, *first, &offsets, &mut found, &mut before, want_before, fetch) {
                let one = |b: &mut Machine, l: u64| if fetch { b.icache_access(0, l) } else { b.cache_access(0, l) };
                let found_b: Vec<Level> = offsets.iter().map(|&o| one(&mut b, first + o as u64)).collect();
                proptest::prop_assert_eq!(&found[..offsets.len()], &found_b[..]);
                // Before: where the lines were before the run (an earlier line of the run that
                // evicted one from its L1 set does not count). Data side only: `probe_level`
                // looks in the L1d (what a clear's fetch bound asks).
                if want_before && !fetch {
                    proptest::prop_assert_eq!(&before[..offsets.len()], &before_b[..]);
                }
            } else {
                for &o in &offsets {
                    for m in [&mut a, &mut b] {
                        if fetch { m.icache_access(0, first + o as u64); } else { m.cache_access(0, first + o as u64); }
                    }
                }
            }
            proptest::prop_assert_eq!(a.digest(), b.digest());
        }
    }
}
