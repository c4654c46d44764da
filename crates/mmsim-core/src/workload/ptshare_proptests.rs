//! Property tests of seed 003's shared page tables: random multi-process workloads around
//! shared mappings at fixed addresses (where tables are shared at fork and found at fault
//! time), every operation that must unshare, and PMD- and PUD-sized regions touched sparsely,
//! run with the reference model checking every byte read and the invariants (share counts,
//! pt_reach, rss, VmPTE, frames) after every system call. Under the fixed rules nothing may
//! differ; under `rfc` the munmap-in-the-middle report corrupts data in every variant.

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::proptest_support::{self, campaign, env_or, fuzz_seed, no_failures, run_checked};
use crate::kernel::Sabotage;
use crate::sim::{run_with, RunOptions};
use crate::units::align_down;
use crate::workload::spec::parse_workload;

/// The regions: (name, address, sizes it may have, stride that keeps its accesses sparse).
const REGIONS: [(&str, u64, &[u64], u64); 3] = [
    ("s", 0x4000_0000, &[2 << 20, (4 << 20) + 4096, 6 << 20, (8 << 20) - 4096, 8 << 20], 4096),
    ("b", 0x80_0000_0000, &[1 << 30, (1 << 30) + (2 << 20)], 2 << 20),
    ("p", 0x7000_0000, &[2 << 20, 4 << 20], 4096),
];

/// A byte range of a region of `size` bytes: page-aligned offset and length; a third of them
/// whole 2 MiB tables (no vma split to unshare them: the operation itself must), a third
/// starting at a table.
fn range(size: u64) -> impl Strategy<Value = (u64, u64)> {
    let pages = size / 4096;
    (0..pages, 1..=pages.min(1024), 0u8..3, 1u64..4).prop_map(move |(o, l, bias, tables)| {
        let (o, l) = match bias {
            0 => (align_down(o, 512), tables * 512),
            1 => (align_down(o, 512), l),
            _ => (o, l),
        };
        let o = o.min(pages - 1);
        (o * 4096, l.min(pages - o) * 4096)
    })
}

fn op(sizes: [u64; 3]) -> impl Strategy<Value = Value> {
    let region = (0usize..3).prop_flat_map(move |i| {
        let (name, _, _, stride) = REGIONS[i];
        (Just(name), Just(stride), range(sizes[i]))
    });
    prop_oneof![
        6 => (region.clone(), prop::bool::ANY, 1u8..200).prop_map(|((r, stride, (o, l)), write, v)| {
            if write {
                json!({"op": "write", "region": r, "offset": o, "length": l, "stride": stride.max(4096), "value": v})
            } else {
                json!({"op": "read", "region": r, "offset": o, "length": l, "stride": stride.max(4096)})
            }
        }),
        1 => region.clone().prop_map(|(r, _, (o, l))| json!({"op": "munmap", "region": r, "offset": o, "length": l})),
        2 => (region.clone(), prop_oneof![Just("r"), Just("rw"), Just("none")])
            .prop_map(|((r, _, (o, l)), p)| json!({"op": "mprotect", "region": r, "offset": o, "length": l, "prot": p})),
        2 => (region.clone(), prop_oneof![Just("dontneed"), Just("hugepage"), Just("nohugepage")])
            .prop_map(|((r, _, (o, l)), a)| json!({"op": "madvise", "region": r, "offset": o, "length": l, "advice": a})),
        1 => (region.clone(), prop::bool::ANY).prop_map(|((r, _, (o, l)), lock)| {
            // mlock populates: never the big region.
            let r = if r == "b" { "s" } else { r };
            json!({"op": if lock { "mlock" } else { "munlock" }, "region": r, "offset": o, "length": l.min(4 << 20)})
        }),
        1 => (0usize..2, 1u64..5, prop::option::of(0u64..3)).prop_map(|(i, mb, to)| {
            let r = ["s", "p"][i];
            match to {
                None => json!({"op": "mremap", "region": r, "size": mb << 21}),
                Some(k) => json!({"op": "mremap", "region": r, "size": mb << 21, "addr": 0x9000_0000u64 + (k << 22), "fixed": true}),
            }
        }),
        1 => (0u64..4, prop::bool::ANY).prop_map(|(k, shared)| {
            // A new mapping over part of `s` (MAP_FIXED replaces what is there).
            let flags = if shared { json!(["shared", "anonymous"]) } else { json!(["private", "anonymous"]) };
            json!({"op": "mmap", "name": "q", "size": "2M", "addr": 0x4000_0000u64 + (k << 21), "fixed": true, "flags": flags})
        }),
        1 => Just(json!({"op": "sleep", "ms": 1})),
    ]
}

/// Sparse reads of every region (and `q`), checked against the reference model.
fn verify() -> Vec<Value> {
    REGIONS
        .iter()
        .map(|&(r, _, _, stride)| json!({"op": "read", "region": r, "stride": stride.max(64 << 10)}))
        .collect()
}

fn workload() -> impl Strategy<Value = Value> {
    let sizes =
        (0usize..5, 0usize..2, 0usize..2).prop_map(|(a, b, c)| [REGIONS[0].2[a], REGIONS[1].2[b], REGIONS[2].2[c]]);
    let knobs = (
        prop_oneof![Just("pte"), Just("pmd"), Just("pud"), Just("pte,pmd"), Just("pte,pmd,pud")],
        prop_oneof![Just(4096u64), Just(65536)],
        prop_oneof![Just("always"), Just("madvise"), Just("never")],
        1u32..5,
        prop_oneof![Just("r"), Just("rw")],
    );
    (sizes, knobs).prop_flat_map(|(sizes, (levels, around, thp, cpus, prot))| {
        let body = prop::collection::vec(
            prop_oneof![
                4 => op(sizes),
                2 => (1u64..4, prop::collection::vec(op(sizes), 0..8), prop::bool::ANY).prop_map(|(count, mut p, check)| {
                    if check {
                        p.extend(verify());
                    }
                    json!({"op": "fork", "count": count, "program": p})
                }),
                1 => Just(json!({"op": "wait"})),
            ],
            1..16,
        );
        body.prop_map(move |body| {
            let mut prog: Vec<Value> = REGIONS
                .iter()
                .zip(sizes)
                .map(|(&(name, addr, _, _), size)| {
                    let flags = if name == "p" { json!(["private", "anonymous"]) } else { json!(["shared", "anonymous"]) };
                    let prot = if name == "s" { prot } else { "rw" };
                    json!({"op": "mmap", "name": name, "size": size, "addr": addr, "fixed": true, "prot": prot, "flags": flags})
                })
                .collect();
            // Tables to share at fork: the parent touches first, sparsely.
            prog.push(json!({"op": "read", "region": "s", "stride": 65536}));
            prog.push(json!({"op": "write", "region": "b", "stride": 1 << 30, "value": 5}));
            prog.extend(body);
            prog.push(json!({"op": "wait"}));
            prog.extend(verify());
            json!({"name": "ptshare-random", "machine": {"memory": "2G", "cpus": cpus},
                   "knobs": {"vm/ptshare": levels, "fault_around_bytes": around, "transparent_hugepage/enabled": thp},
                   "program": prog})
        })
    })
}

static STEPS: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static SHARES: AtomicU64 = AtomicU64::new(0);
static UNSHARES: AtomicU64 = AtomicU64::new(0);

/// Run one workload with the reference model and invariants; Err describes what differed.
fn check(w: &Value) -> Result<(), String> {
    let text = w.to_string();
    let r = run_checked(&text, 2_000_000, Sabotage::default())?;
    STEPS.fetch_add(r.engine.steps, Ordering::Relaxed);
    READS.fetch_add(r.check.reads_checked, Ordering::Relaxed);
    SHARES.fetch_add(r.vmstat.get("mmsim_pt_share").unwrap_or(0) as u64, Ordering::Relaxed);
    UNSHARES.fetch_add(r.vmstat.get("mmsim_pt_unshare").unwrap_or(0) as u64, Ordering::Relaxed);
    no_failures(&r, &text)
}

fn cases() -> u32 {
    env_or("MMSIM_PTSHARE_FUZZ_CASES", 60)
}

fn seed() -> u64 {
    fuzz_seed(0x7074_7368)
}

fn config(cases: u32) -> ProptestConfig {
    proptest_support::config(cases, seed(), 2000)
}

proptest! {
    #![proptest_config(config(cases()))]

    /// Shared page tables under the fixed rules never change what a process reads.
    #[test]
    fn shared_page_tables_match_the_reference_model(w in workload()) {
        check(&w).map_err(TestCaseError::fail)?;
    }
}

/// `make fuzz`'s campaign of the same workloads (MMSIM_PTSHARE_FUZZ_CASES, MMSIM_FUZZ_SEED):
/// prints what it ran.
#[test]
#[ignore = "a campaign: run by `make fuzz`"]
fn ptshare_fuzz_campaign() {
    campaign(config(cases()), &workload(), check, |failures| {
        format!(
            "ptshare fuzz campaign (seed {}): {} workloads, {} operations, {} reads checked, {} tables shared, {} \
             unshared, {} failures",
            seed(),
            cases(),
            STEPS.load(Ordering::Relaxed),
            READS.load(Ordering::Relaxed),
            SHARES.load(Ordering::Relaxed),
            UNSHARES.load(Ordering::Relaxed),
            failures
        )
    });
}

/// The munmap-in-the-middle report in random variants (children, CPUs, which 2 MiB is
/// replaced, levels shared, fault-around): the first posting corrupts a child's data every
/// time and the reference model says so; the fixed rules never do.
fn munmap_variant() -> impl Strategy<Value = (Value, String)> {
    (2u64..6, 1u32..5, 1u64..4, prop_oneof![Just("pte"), Just("pte,pmd"), Just("pte,pmd,pud")], prop::bool::ANY)
        .prop_map(|(children, cpus, slot, levels, around)| {
            let child = |v: u64| {
                json!({"op": "fork", "program": [
                    {"op": "munmap", "region": "s", "offset": slot << 21, "length": "2M"},
                    {"op": "mmap", "name": "p", "size": "2M", "addr": 0x4000_0000u64 + (slot << 21), "fixed": true},
                    {"op": "write", "region": "p", "value": v},
                    {"op": "sleep", "ms": 1},
                    {"op": "read", "region": "p", "expect": v}]})
            };
            let mut prog = vec![
                json!({"op": "mmap", "name": "s", "size": "8M", "addr": "0x40000000", "fixed": true, "flags": ["shared", "anonymous"]}),
                json!({"op": "write", "region": "s", "value": 1}),
            ];
            prog.extend((0..children).map(|c| child(10 + c)));
            prog.push(json!({"op": "wait"}));
            let around = if around { 65536 } else { 4096 };
            let w = json!({"machine": {"cpus": cpus}, "knobs": {"fault_around_bytes": around}, "program": prog});
            (w, levels.to_string())
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, rng_seed: proptest::test_runner::RngSeed::Fixed(3),
        failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_first_postings_munmap_bug_corrupts_data_every_time((w, levels) in munmap_variant()) {
        let spec = parse_workload(&w.to_string()).unwrap();
        for compat in ["fixed", "rfc"] {
            let sets = vec![("vm/ptshare".to_string(), levels.clone()), ("vm/ptshare_compat".to_string(), compat.to_string())];
            let opts = RunOptions { check: true, sabotage: Sabotage::default(), ..Default::default() };
            let r = run_with(&spec, &sets, &opts).unwrap();
            if compat == "fixed" {
                prop_assert!(!r.failed && r.check.mismatches == 0, "fixed: {:?}", r.events);
            } else {
                prop_assert!(r.check.mismatches > 0, "rfc: no corruption: {}", w);
            }
        }
    }
}
