//! Property tests of MADV_FREE, MADV_REMOVE, MADV_DONTFORK and MADV_DOFORK: random
//! multi-process workloads on a machine small enough that reclaim discards lazyfree pages
//! (a `pressure` region written over the free memory), around private and shared anonymous
//! memory, a shared and a private mapping of an ext4 file and shared hugetlb memory, with
//! writes, reads, forks (whose children miss the MADV_DONTFORK ranges), mremap, mprotect,
//! mlock, munmap and MADV_DONTNEED between them. The reference model checks every byte read
//! (it learns of each page reclaim discards) and the invariants (among them the lazyfree list
//! and its rmap walk) are checked after every system call.

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::proptest_support::{self, campaign, env_or, fuzz_seed, no_failures, run_checked};
use crate::kernel::Sabotage;
use crate::sim::{run_with, RunOptions};
use crate::units::align_down;
use crate::workload::spec::parse_workload;

/// The regions: name, address, size, mmap flags (and a file).
const REGIONS: [(&str, u64, u64, &str); 6] = [
    ("p", 0x4000_0000, 4 << 20, "private"),
    ("q", 0x4060_0000, (1 << 20) + (12 << 12), "private"),
    ("s", 0x4100_0000, 2 << 20, "shared"),
    ("f", 0x4200_0000, 1 << 20, "file-shared"),
    ("v", 0x4240_0000, 1 << 20, "file-private"),
    ("h", 0x4400_0000, 4 << 20, "hugetlb"),
];

/// A page-aligned range of region `i`: a third of them whole 2 MiB spans (THPs), a third of
/// them a few pages.
fn range(i: usize) -> impl Strategy<Value = (u64, u64)> {
    let pages = REGIONS[i].2 / 4096;
    (0..pages, 1..=pages, 0u8..3).prop_map(move |(o, l, bias)| {
        let (o, l) = match bias {
            0 => (align_down(o, 512), 512),
            1 => (o, l % 8 + 1),
            _ => (o, l),
        };
        let o = o.min(pages - 1);
        (o * 4096, l.min(pages - o) * 4096)
    })
}

fn region() -> impl Strategy<Value = (&'static str, (u64, u64))> {
    (0usize..REGIONS.len()).prop_flat_map(|i| (Just(REGIONS[i].0), range(i)))
}

fn op() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (region(), prop::bool::ANY, 1u8..200, prop_oneof![Just(4096u64), Just(512)]).prop_map(
            |((r, (o, l)), write, v, stride)| {
                if write {
                    json!({"op": "write", "region": r, "offset": o, "length": l, "stride": stride, "value": v})
                } else {
                    json!({"op": "read", "region": r, "offset": o, "length": l, "stride": stride})
                }
            }
        ),
        6 => (region(), prop_oneof![4 => Just("free"), 2 => Just("remove"), 2 => Just("dontfork"),
                1 => Just("dofork"), 1 => Just("dontneed"), 1 => Just("hugepage"), 1 => Just("nohugepage")])
            .prop_map(|((r, (o, l)), a)| json!({"op": "madvise", "region": r, "offset": o, "length": l, "advice": a})),
        // Memory pressure: a region as large as most of the free memory, written, which the
        // allocations reclaim lazyfree pages for (or the OOM killer takes a process).
        3 => (4u64..24, prop::bool::ANY).prop_map(|(mb, keep)| {
            let mut ops = vec![
                json!({"op": "mmap", "name": "x", "size": mb << 20, "addr": 0x5000_0000u64, "fixed": true}),
                json!({"op": "write", "region": "x", "value": 9}),
            ];
            if !keep {
                ops.push(json!({"op": "munmap", "region": "x"}));
            }
            json!({"op": "loop", "count": 1, "body": ops})
        }),
        1 => (region(), prop_oneof![Just("r"), Just("rw"), Just("none")])
            .prop_map(|((r, (o, l)), p)| json!({"op": "mprotect", "region": r, "offset": o, "length": l, "prot": p})),
        1 => (region(), prop::bool::ANY).prop_map(|((r, (o, l)), lock)| {
            json!({"op": if lock { "mlock" } else { "munlock" }, "region": r, "offset": o, "length": l})
        }),
        1 => region().prop_map(|(r, (o, l))| json!({"op": "munmap", "region": r, "offset": o, "length": l})),
        1 => (0usize..2, 1u64..6, prop::option::of(0u64..3)).prop_map(|(i, mb, to)| {
            let r = ["p", "q"][i];
            match to {
                None => json!({"op": "mremap", "region": r, "size": mb << 20}),
                Some(k) => json!({"op": "mremap", "region": r, "size": mb << 20, "addr": 0x6000_0000u64 + (k << 23),
                    "fixed": true}),
            }
        }),
    ]
}

/// Reads of every region, checked against the reference model.
fn verify() -> Vec<Value> {
    REGIONS.iter().map(|&(r, _, _, _)| json!({"op": "read", "region": r, "stride": 1024})).collect()
}

fn workload() -> impl Strategy<Value = Value> {
    let knobs = (
        prop_oneof![Just("always"), Just("madvise"), Just("never")],
        0u8..2,
        prop_oneof![Just(4096u64), Just(65536)],
        prop_oneof![Just("24M"), Just("32M")],
    );
    knobs.prop_flat_map(|(thp, zp, around, mem)| {
        let body = prop::collection::vec(
            prop_oneof![
                6 => op(),
                2 => (1u64..3, prop::collection::vec(op(), 0..8), prop::bool::ANY).prop_map(|(count, mut p, check)| {
                    if check {
                        p.extend(verify());
                    }
                    json!({"op": "fork", "count": count, "program": p})
                }),
                1 => Just(json!({"op": "wait"})),
            ],
            1..20,
        );
        body.prop_map(move |body| {
            let mut prog = vec![json!({"op": "create", "file": "fe", "size": "2M"})];
            for &(name, addr, size, kind) in &REGIONS {
                let mut m = json!({"op": "mmap", "name": name, "size": size, "addr": addr, "fixed": true});
                m["flags"] = match kind {
                    "private" => json!(["private", "anonymous"]),
                    "shared" => json!(["shared", "anonymous"]),
                    "hugetlb" => json!(["shared", "anonymous", "hugetlb"]),
                    "file-shared" => json!(["shared"]),
                    _ => json!(["private"]),
                };
                if kind.starts_with("file") {
                    m["file"] = json!("fe");
                }
                prog.push(m);
            }
            for r in ["p", "q", "s", "f", "h"] {
                prog.push(json!({"op": "write", "region": r, "stride": 4096, "value": 3}));
            }
            prog.push(json!({"op": "read", "region": "v", "stride": 4096}));
            prog.extend(body);
            prog.push(json!({"op": "wait"}));
            prog.extend(verify());
            json!({"name": "madvise-random", "machine": {"memory": mem, "cpus": 2},
                   "knobs": {"transparent_hugepage/enabled": thp, "transparent_hugepage/use_zero_page": zp,
                             "fault_around_bytes": around, "vm/nr_hugepages": 3},
                   "program": prog})
        })
    })
}

static STEPS: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static LAZYFREE: AtomicU64 = AtomicU64::new(0);
static LAZYFREED: AtomicU64 = AtomicU64::new(0);
static SEGFAULTS: AtomicU64 = AtomicU64::new(0);

/// Run one workload with the reference model and invariants; Err describes what differed.
fn check(w: &Value) -> Result<(), String> {
    let text = w.to_string();
    let r = run_checked(&text, 2_000_000, Sabotage::default())?;
    STEPS.fetch_add(r.engine.steps, Ordering::Relaxed);
    READS.fetch_add(r.check.reads_checked, Ordering::Relaxed);
    LAZYFREE.fetch_add(r.vmstat.get("pglazyfree").unwrap_or(0) as u64, Ordering::Relaxed);
    LAZYFREED.fetch_add(r.vmstat.get("pglazyfreed").unwrap_or(0) as u64, Ordering::Relaxed);
    SEGFAULTS.fetch_add(r.events.iter().filter(|e| e.kind == "segfault").count() as u64, Ordering::Relaxed);
    no_failures(&r, &text)
}

fn cases() -> u32 {
    env_or("MMSIM_MADVISE_FUZZ_CASES", 16)
}

fn seed() -> u64 {
    fuzz_seed(0x6672_6565)
}

fn config(cases: u32) -> ProptestConfig {
    proptest_support::config(cases, seed(), 2000)
}

proptest! {
    #![proptest_config(config(cases()))]

    /// What a process reads after MADV_FREE (and reclaim), MADV_REMOVE and MADV_DONTFORK is
    /// what the reference model says, and the invariants hold.
    #[test]
    fn lazyfree_holes_and_dontfork_match_the_reference_model(w in workload()) {
        check(&w).map_err(TestCaseError::fail)?;
    }
}

/// The workloads do reach reclaim of lazyfree pages: some are discarded.
#[test]
fn the_generator_makes_reclaim_discard_lazyfree_pages() {
    let mut runner = proptest::test_runner::TestRunner::new(config(20));
    let strat = workload();
    let (mut lazy, mut freed) = (0, 0);
    for _ in 0..20 {
        let w = proptest::strategy::ValueTree::current(&strat.new_tree(&mut runner).unwrap());
        let spec = parse_workload(&w.to_string()).unwrap();
        let r = run_with(&spec, &[], &RunOptions::default()).unwrap();
        lazy += r.vmstat.get("pglazyfree").unwrap_or(0);
        freed += r.vmstat.get("pglazyfreed").unwrap_or(0);
    }
    assert!(lazy > 1000 && freed > 100, "pglazyfree {lazy}, pglazyfreed {freed}");
}

/// `make fuzz`'s campaign of the same workloads (MMSIM_MADVISE_FUZZ_CASES, MMSIM_FUZZ_SEED):
/// prints what it ran.
#[test]
#[ignore = "a campaign: run by `make fuzz`"]
fn madvise_fuzz_campaign() {
    campaign(config(cases()), &workload(), check, |failures| {
        format!(
            "madvise fuzz campaign (seed {}): {} workloads, {} operations, {} reads checked, {} pages lazyfreed, {} \
             discarded by reclaim, {} segfaults, {} failures",
            seed(),
            cases(),
            STEPS.load(Ordering::Relaxed),
            READS.load(Ordering::Relaxed),
            LAZYFREE.load(Ordering::Relaxed),
            LAZYFREED.load(Ordering::Relaxed),
            SEGFAULTS.load(Ordering::Relaxed),
            failures
        )
    });
}
