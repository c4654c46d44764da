//! Property test: random multi-process workloads under every THP policy, with the reference
//! model checking every byte read and the kernel invariants checked after every system call.
//! proptest shrinks a failure to a minimal program, printed as workload JSON.

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{json, Value};

use super::proptest_support::{self, campaign, env_or, no_failures, run_checked};
use crate::kernel::Sabotage;
use crate::sim::{run_with, RunOptions};
use crate::workload::spec::parse_workload;

/// Region sizes in pages: one page, sub-THP, exactly one THP, THP + 1, several.
const SIZES: [u64; 6] = [1, 16, 512, 513, 1024, 1536];

/// A page range inside region `i` (rarely past its end, which must segfault).
fn range(sizes: &[u64]) -> impl Strategy<Value = (String, u64, u64)> {
    let sizes = sizes.to_vec();
    (0..sizes.len(), any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0u8..20).prop_map(
        move |(i, a, b, over)| {
            let size = sizes[i];
            let mut off = a.index(size as usize) as u64;
            // Bias offsets to THP boundaries.
            if size > 512 && a.index(4) == 0 {
                off = 511 + a.index(3) as u64;
            }
            let mut len = 1 + b.index((size - off.min(size - 1)) as usize) as u64;
            if over == 0 {
                len += 600;
            }
            (format!("r{i}"), off, len)
        },
    )
}

fn access_op(sizes: &[u64]) -> impl Strategy<Value = Value> {
    (
        range(sizes),
        0u64..4096,
        prop_oneof![Just(4096u64), Just(1536), Just(65536), Just(100), Just(1)],
        prop_oneof![4 => Just("read"), 4 => Just("write"), 1 => Just("fetch")],
        1u8..255,
        // The pattern: 0 sequential, 1 random (count, seed), 2 blocks of 2^k lines.
        (prop_oneof![6 => Just(0u8), 2 => Just(1), 1 => Just(2)], 1u64..300, any::<u64>(), 0u32..7),
    )
        .prop_map(|((r, off, len), b, stride, kind, value, (pattern, count, seed, k))| {
            // Stride-1 accesses stay short: they are byte by byte.
            let len = if stride == 1 { len.min(3) * 1500 } else { len * 4096 };
            let off = off * 4096 + if stride == 4096 { 0 } else { b };
            let mut op = match kind {
                "write" => json!({"op":"write","region":r,"offset":off,"length":len,"stride":stride,"value":value}),
                "read" => json!({"op":"read","region":r,"offset":off,"length":len,"stride":stride}),
                _ => json!({"op":"fetch","region":r,"offset":off,"length":len,"stride":stride}),
            };
            if pattern == 1 {
                op["pattern"] = json!("random");
                op["count"] = json!(count);
                op["seed"] = json!(seed);
            } else if pattern == 2 && kind != "fetch" {
                op["block"] = json!(64u64 << k);
                op["block_stride"] = json!(64);
            }
            op
        })
}

fn syscall_op(sizes: &[u64]) -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => range(sizes).prop_map(|(r, o, l)| json!({"op":"munmap","region":r,"offset":o*4096,"length":l*4096})),
        // mlock (populating, mlocking what is mapped and what faults in later) and munlock.
        2 => (range(sizes), prop::bool::ANY).prop_map(|((r, o, l), lock)| {
            json!({"op": if lock { "mlock" } else { "munlock" },"region":r,"offset":o*4096,"length":l*4096})
        }),
        // mremap: grow, shrink or move (MREMAP_MAYMOVE), sometimes to a fixed address that
        // may land on another region (MREMAP_FIXED unmaps what is there).
        2 => (range(sizes), 1u64..1200, prop_oneof![3 => Just(None), 1 => (0u64..64, 0u64..512).prop_map(Some)])
            .prop_map(|((r, _, _), pages, fixed)| match fixed {
                None => json!({"op":"mremap","region":r,"size":pages*4096}),
                Some((slot, page)) => json!({"op":"mremap","region":r,"size":pages*4096,
                    "addr":0x7e00_0000_0000u64 + slot * (4 << 20) + page * 4096,"fixed":true}),
            }),
        // mremap of part of a region: MREMAP_MAYMOVE, without it (in place or ENOMEM), or
        // MREMAP_DONTUNMAP (the same size; the old range stays mapped and empty).
        2 => (range(sizes), 1u64..600, 0u8..3).prop_map(|((r, o, l), pages, mode)| match mode {
            0 => json!({"op":"mremap","region":r,"offset":o*4096,"length":l*4096,"size":pages*4096}),
            1 => json!({"op":"mremap","region":r,"offset":o*4096,"length":l*4096,"size":pages*4096,"maymove":false}),
            _ => json!({"op":"mremap","region":r,"offset":o*4096,"length":l*4096,"size":l.max(1)*4096,"dontunmap":true}),
        }),
        3 => (range(sizes), prop_oneof![4 => Just("r"), 4 => Just("rw"), 2 => Just("rx"), 1 => Just("rwx"), 1 => Just("none")])
            .prop_map(|((r, o, l), p)| json!({"op":"mprotect","region":r,"offset":o*4096,"length":l*4096,"prot":p})),
        3 => (range(sizes), prop_oneof![4 => Just("hugepage"), 2 => Just("nohugepage"), 4 => Just("dontneed"),
                1 => Just("willneed"), 1 => Just("sequential"), 1 => Just("random"), 1 => Just("normal"),
                1 => Just("collapse"), 2 => Just("free"), 1 => Just("remove"), 1 => Just("dontfork"),
                1 => Just("dofork"), 1 => Just("pageout"), 1 => Just("cold")])
            .prop_map(|((r, o, l), a)| json!({"op":"madvise","region":r,"offset":o*4096,"length":l*4096,"advice":a})),
        2 => (range(sizes), range(sizes))
            .prop_map(|((a, o, l), (b, p, _))| json!({"op":"compare","a":{"region":a,"offset":o*4096},"b":{"region":b,"offset":p*4096},"length":l*4096})),
        1 => prop_oneof![Just("always"), Just("madvise"), Just("never")]
            .prop_map(|v| json!({"op":"set","knob":"transparent_hugepage/enabled","value":v})),
        // Proactive reclaim of the workload's cgroup (memory.reclaim).
        1 => prop_oneof![Just("256K"), Just("4M"), Just("64M")]
            .prop_map(|b| json!({"op":"memory_reclaim","cgroup":"box","bytes":b})),
    ]
}

/// The workload's files: an ext4 file, "fe", and a tmpfs file, "ft".
const FILES: [&str; 2] = ["fe", "ft"];

/// read() and write() calls, fadvise, fsync, fallocate (allocate, or punch a hole: on the
/// tmpfs file; EOPNOTSUPP on ext4) and drop_caches, on the workload's files: ranges in pages
/// of up to 1600 (past the end of a file too: a write there grows it).
fn file_op() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(FILES.to_vec()),
        prop_oneof![3 => 0u64..1, 3 => 0u64..600, 1 => Just(511u64), 1 => 1000u64..1600],
        1u64..700,
        0u64..4096,
        prop_oneof![Just(4096u64), Just(1 << 20), Just(65536), Just(100), Just(12288)],
        1u8..255,
        0u8..14,
    )
        .prop_map(|(f, page, pages, b, chunk, value, kind)| {
            // Unaligned offsets and lengths now and then.
            let off = page * 4096 + if b % 4 == 0 { b } else { 0 };
            let len = pages * 4096 - if b % 8 == 1 { b } else { 0 };
            match kind {
                0..=3 => json!({"op":"pwrite","file":f,"offset":off,"length":len,"chunk":chunk,"value":value}),
                4..=7 => json!({"op":"pread","file":f,"offset":off,"length":len,"chunk":chunk}),
                8 => json!({"op":"fadvise","file":f,"offset":off,"length":len,"advice":"dontneed"}),
                9 => json!({"op":"fadvise","file":f,"offset":off,"length":if b % 3 == 0 { 0 } else { len },
                            "advice":"willneed"}),
                10 => json!({"op":"fsync","file":f}),
                12 => json!({"op":"fallocate","file":f,"offset":off,"length":len,
                             "mode":if b % 2 == 0 { json!([]) } else { json!(["keep_size"]) }}),
                13 => json!({"op":"fallocate","file":f,"offset":off,"length":len,"mode":["punch_hole","keep_size"]}),
                _ => json!({"op":"set","knob":"vm/drop_caches","value":1 + b % 3}),
            }
        })
}

fn leaf_op(sizes: &[u64]) -> impl Strategy<Value = Value> {
    prop_oneof![3 => access_op(sizes), 2 => syscall_op(sizes), 1 => file_op()]
}

/// Byte-by-byte reads of every region: what a process can see, checked in full.
fn verify(n: usize) -> Vec<Value> {
    (0..n).map(|i| json!({"op":"read","region":format!("r{i}"),"stride":1})).collect()
}

fn op(sizes: &[u64]) -> impl Strategy<Value = Value> {
    let n = sizes.len();
    prop_oneof![
        8 => leaf_op(sizes),
        2 => (1u64..3, any::<bool>(), prop::collection::vec(leaf_op(sizes), 0..8)).prop_map(move |(count, check_first, p)| {
            let mut prog = if check_first { verify(n) } else { Vec::new() };
            prog.extend(p);
            json!({"op":"fork","count":count,"program":prog})
        }),
        1 => (1u64..3, prop::collection::vec(leaf_op(sizes), 0..6))
            .prop_map(|(count, p)| json!({"op":"thread","count":count,"program":p})),
        1 => Just(json!({"op":"wait"})),
        1 => Just(json!({"op":"sleep","ms":1})),
    ]
}

fn workload() -> impl Strategy<Value = Value> {
    let mmaps = prop::collection::vec((prop::sample::select(SIZES.to_vec()), any::<bool>(), any::<bool>()), 3);
    let knobs = (
        prop_oneof![Just("always"), Just("madvise"), Just("never")],
        0u8..2,
        prop_oneof![3 => Just("off"), 1 => Just("9")],
        prop_oneof![3 => Just(0u64), 1 => Just(5), 1 => Just(13)],
        prop_oneof![Just("20M"), Just("64M")],
        prop_oneof![Just(1u32), Just(2), Just(4)],
    );
    let hzp = (
        prop_oneof![Just("hzp"), Just("vhzp")],
        prop_oneof![Just("shrinkable"), Just("boot"), Just("lazy"), Just("persistent")],
        prop_oneof![Just("per_mm"), Just("global")],
        prop_oneof![Just("today"), Just("seed")],
    );
    // Seed 002's policies and their successors.
    let zero = (
        prop_oneof![3 => Just("off"), 1 => Just("0"), 1 => Just("4"), 1 => Just("9")],
        prop_oneof![Just(0u32), Just(2), Just(9)],
        prop_oneof![Just("dirty"), Just("separate")],
        prop_oneof![Just("cpu"), Just("cpu_nt"), Just("offload")],
        prop_oneof![3 => Just(0u8), 1 => Just(1)],
        prop_oneof![3 => Just(0u8), 1 => Just(1)],
        prop_oneof![Just("per_vma"), Just("page_table_lock")],
    );
    // Seed 003's shared page tables (the fixed rules: the reference model must see nothing).
    let share = prop_oneof![3 => Just("off"), 2 => Just("pte"), 1 => Just("pmd"), 1 => Just("pte,pmd,pud")];
    // The files and their mappings (regions r3 and r4): the mapping's pages, its first page
    // in the file, shared or private, 2 MiB-aligned or not, and the file's pages beyond the
    // mapping's end (a shortfall now and then: a page past the end of the file is SIGBUS),
    // its last page partial or not, and MADV_HUGEPAGE on the mapping or not; the readahead
    // and fault-around knobs.
    let fmaps = prop::collection::vec(
        (
            prop::sample::select(SIZES.to_vec()),
            prop_oneof![3 => Just(0u64), 1 => Just(1), 1 => Just(512)],
            any::<bool>(),
            any::<bool>(),
            prop_oneof![3 => Just(0i64), 1 => Just(3), 1 => Just(600), 1 => Just(-300)],
            0u64..2,
            prop_oneof![2 => Just(false), 1 => Just(true)],
        ),
        2,
    );
    let io =
        (prop_oneof![Just(128u64), Just(8192), Just(0), Just(16)], prop_oneof![3 => Just(65536u64), 1 => Just(4096)]);
    // Memory under pressure: a swap file or none, the workload's cgroup "box" with a limit or
    // none, swappiness and page-cluster.
    let pressure = (
        any::<bool>(),
        prop_oneof![2 => Just(None), 1 => Just(Some("8M")), 1 => Just(Some("24M"))],
        prop_oneof![3 => Just(60u32), 1 => Just(0), 1 => Just(200)],
        prop_oneof![Just(3u32), Just(0)],
    );
    (mmaps, knobs, hzp, zero, (share, fmaps, io), pressure).prop_flat_map(
        |(
            mm,
            (en, zp, fmo, every, mem, cpus),
            (kind, alloc, rc, wp),
            (start, stop, merge, engine, ioa, iof, locks),
            (share, fm, (ra, fab)),
            (swap, limit, swappiness, cluster),
        )| {
            let sizes: Vec<u64> = mm.iter().map(|m| m.0).chain(fm.iter().map(|m| m.0)).collect();
            prop::collection::vec(op(&sizes), 1..30).prop_map(move |body| {
                let mut prog: Vec<Value> = mm
                    .iter()
                    .enumerate()
                    .map(|(i, &(pages, shared, aligned))| {
                        let mut m = json!({"op":"mmap","name":format!("r{i}"),"size":pages*4096,
                        "flags":[if shared {"shared"} else {"private"},"anonymous"]});
                        if aligned {
                            m["align"] = json!("2M");
                        }
                        m
                    })
                    .collect();
                for (i, &(pages, first, shared, aligned, extra, partial, huge)) in fm.iter().enumerate() {
                    let file_pages = (first as i64 + pages as i64 + extra).max(1) as u64;
                    let size = file_pages * 4096 - partial * 1000;
                    let fs = ["ext4", "tmpfs"][i];
                    prog.push(json!({"op":"create","file":FILES[i],"size":size,"fs":fs}));
                    if i == 1 {
                        // A tmpfs file is created empty: give it content.
                        prog.push(json!({"op":"pwrite","file":FILES[i],"length":size,"chunk":65536,"value":7}));
                    }
                    let mut m = json!({"op":"mmap","name":format!("r{}", mm.len() + i),"size":pages*4096,
                        "file":FILES[i],"file_offset":first*4096,
                        "flags":[if shared {"shared"} else {"private"}]});
                    if aligned {
                        m["align"] = json!("2M");
                    }
                    prog.push(m);
                    if huge {
                        // Right after the mmap, as a program asking for PMD folios does:
                        // MADV_HUGEPAGE on ext4 (readahead at PMD order, file PMD mappings),
                        // MADV_COLLAPSE on tmpfs (collapse_file, ShmemPmdMapped).
                        let advice = ["hugepage", "collapse"][i];
                        prog.push(json!({"op":"madvise","region":format!("r{}", mm.len() + i),"advice":advice}));
                    }
                }
                prog.extend(body);
                prog.extend(verify(mm.len() + fm.len()));
                let mut machine = json!({"memory":mem,"cpus":cpus});
                if swap {
                    machine["swap"] = json!([{"size":"64M","kind":"file"}]);
                }
                let cgroup = limit.map_or(json!({}), |l| json!({"memory.max":l}));
                json!({"name":"random","machine":machine,"cgroups":{"box":cgroup},"cgroup":"box",
                   "knobs":{"transparent_hugepage/enabled":en,"transparent_hugepage/use_zero_page":zp,
                            "fail_page_alloc/min_order":fmo,"fail_page_alloc/every":every,
                            "transparent_hugepage/huge_zero_page":kind,
                            "transparent_hugepage/huge_zero_page_alloc":alloc,
                            "transparent_hugepage/hzp_refcount":rc,
                            "transparent_hugepage/huge_zero_page_wp":wp,
                            "vm/scrub_start":start,"vm/scrub_stop":stop,"vm/scrub_merge":merge,
                            "vm/scrub_engine":engine,"init_on_alloc":ioa,"init_on_free":iof,
                            "kernel/fault_locking":locks,"vm/ptshare":share,
                            "block/read_ahead_kb":ra,"fault_around_bytes":fab,
                            "vm/swappiness":swappiness,"vm/page-cluster":cluster},
                   "program":prog})
            })
        },
    )
}

/// The campaign's seed: fixed for `make test`, MMSIM_FUZZ_SEED for `make fuzz`.
fn fuzz_seed() -> u64 {
    proptest_support::fuzz_seed(0x6d6d_7369_6d00)
}

/// Workloads per campaign: 400 for `make test`, MMSIM_FUZZ_CASES for `make fuzz`.
fn fuzz_cases() -> u32 {
    env_or("MMSIM_FUZZ_CASES", 400)
}

/// The campaign's configuration: `fuzz_cases()` workloads from `fuzz_seed()`.
fn fuzz_config() -> ProptestConfig {
    proptest_support::config(fuzz_cases(), fuzz_seed(), 4000)
}

static READS: AtomicU64 = AtomicU64::new(0);
static FORKS: AtomicU64 = AtomicU64::new(0);
static STEPS: AtomicU64 = AtomicU64::new(0);
static INVARIANT_CHECKS: AtomicU64 = AtomicU64::new(0);
/// File-side events the campaign reached: major faults, pages read from the device, PMD
/// mappings of file folios (`do_set_pmd`), collapses.
static MAJOR: AtomicU64 = AtomicU64::new(0);
static PGPGIN: AtomicU64 = AtomicU64::new(0);
static FILE_THP: AtomicU64 = AtomicU64::new(0);
static COLLAPSES: AtomicU64 = AtomicU64::new(0);
/// MADV_FREE's pages made lazyfree and those reclaim discarded.
static LAZYFREE: AtomicU64 = AtomicU64::new(0);
static LAZYFREED: AtomicU64 = AtomicU64::new(0);
/// Swap: pages written and read back, and memcg OOM kills.
static PSWPOUT: AtomicU64 = AtomicU64::new(0);
static PSWPIN: AtomicU64 = AtomicU64::new(0);
static OOM_KILLS: AtomicU64 = AtomicU64::new(0);
static COMBOS: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Run one generated workload; Err describes a divergence or invariant violation.
pub fn check_workload(w: &Value, sabotage: Sabotage) -> Result<(), String> {
    let text = w.to_string();
    if let Ok(path) = std::env::var("MMSIM_FUZZ_TRACE") {
        // The workload about to run (a hang or a crash leaves it behind).
        let _ = std::fs::write(path, &text);
    }
    let r = run_checked(&text, 5_000_000, sabotage)?;
    READS.fetch_add(r.check.reads_checked, Ordering::Relaxed);
    FORKS.fetch_add(r.processes.len() as u64 - 1, Ordering::Relaxed);
    STEPS.fetch_add(r.engine.steps, Ordering::Relaxed);
    INVARIANT_CHECKS.fetch_add(r.check.invariant_checks, Ordering::Relaxed);
    for (counter, name) in [
        (&MAJOR, "pgmajfault"),
        (&PGPGIN, "pgpgin"),
        (&FILE_THP, "thp_file_mapped"),
        (&COLLAPSES, "thp_collapse_alloc"),
        (&LAZYFREE, "pglazyfree"),
        (&LAZYFREED, "pglazyfreed"),
        (&PSWPOUT, "pswpout"),
        (&PSWPIN, "pswpin"),
        (&OOM_KILLS, "oom_kill"),
    ] {
        counter.fetch_add(r.vmstat.get(name).unwrap_or(0).max(0) as u64, Ordering::Relaxed);
    }
    let combo: Vec<String> = w["knobs"].as_object().map_or(Vec::new(), |k| k.values().map(|v| v.to_string()).collect());
    COMBOS.lock().expect("combos").insert(combo.join(" "));
    no_failures(&r, &text)
}

proptest! {
    // A fixed seed keeps `make test` deterministic; `make fuzz` runs open-ended campaigns.
    #![proptest_config(fuzz_config())]

    #[test]
    fn random_workloads_match_the_reference_model(w in workload()) {
        check_workload(&w, Sabotage::default()).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn the_generator_exercises_reads_forks_and_swap() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = workload();
    for _ in 0..50 {
        let w = strat.new_tree(&mut runner).unwrap().current();
        check_workload(&w, Sabotage::default()).unwrap();
    }
    assert!(READS.load(Ordering::Relaxed) > 10_000, "reads checked: {}", READS.load(Ordering::Relaxed));
    assert!(FORKS.load(Ordering::Relaxed) > 20, "forks: {}", FORKS.load(Ordering::Relaxed));
    assert!(MAJOR.load(Ordering::Relaxed) > 20, "major faults: {}", MAJOR.load(Ordering::Relaxed));
    assert!(PSWPOUT.load(Ordering::Relaxed) > 100, "pages swapped out: {}", PSWPOUT.load(Ordering::Relaxed));
}

/// The checkers catch a broken kernel: each sabotage is found within a bounded number of
/// generated workloads.
#[test]
fn broken_kernels_are_caught() {
    for (name, sabotage) in [
        ("COW without copy", Sabotage { skip_cow_copy: true, ..Default::default() }),
        ("rss not dropped at unmap", Sabotage { skip_rss_dec: true, ..Default::default() }),
        ("fork without flushing the parent's TLB", Sabotage { skip_fork_flush: true, ..Default::default() }),
        ("mprotect that leaves the ptes alone", Sabotage { skip_change_protection: true, ..Default::default() }),
    ] {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strat = workload();
        let caught = (0..1000).position(|_| {
            let w = strat.new_tree(&mut runner).unwrap().current();
            check_workload(&w, sabotage).is_err()
        });
        eprintln!("{name}: caught after {caught:?} workloads");
        assert!(caught.is_some(), "{name}: not caught in 1000 workloads");
    }
}

/// `make fuzz`: an open-ended campaign (MMSIM_FUZZ_SEED, MMSIM_FUZZ_CASES), shrinking a
/// failure to a minimal workload; prints what it ran.
#[test]
#[ignore = "a campaign: run by `make fuzz`"]
fn fuzz_campaign() {
    let check = |w: &Value| check_workload(w, Sabotage::default());
    campaign(fuzz_config(), &workload(), check, |failures| {
        format!(
            "fuzz campaign (seed {}): {} workloads, {} operations, {} reads checked, {} invariant checks, {} \
             processes forked, {} major faults, {} kB read from the device, {} file PMD mappings, {} collapses, {} \
             pages lazyfreed and {} discarded, {} pages swapped out and {} in, {} OOM kills, {} policy \
             combinations, {} failures",
            fuzz_seed(),
            fuzz_cases(),
            STEPS.load(Ordering::Relaxed),
            READS.load(Ordering::Relaxed),
            INVARIANT_CHECKS.load(Ordering::Relaxed),
            FORKS.load(Ordering::Relaxed),
            MAJOR.load(Ordering::Relaxed),
            PGPGIN.load(Ordering::Relaxed),
            FILE_THP.load(Ordering::Relaxed),
            COLLAPSES.load(Ordering::Relaxed),
            LAZYFREE.load(Ordering::Relaxed),
            LAZYFREED.load(Ordering::Relaxed),
            PSWPOUT.load(Ordering::Relaxed),
            PSWPIN.load(Ordering::Relaxed),
            OOM_KILLS.load(Ordering::Relaxed),
            COMBOS.lock().expect("combos").len(),
            failures
        )
    });
}

/// Any JSON value, biased towards the workload format's shapes (op objects, sizes, names).
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        prop::sample::select(vec![
            "p",
            "q",
            "4K",
            "2M",
            "16T",
            "0x1000",
            "1e9",
            "-1",
            "",
            "rw",
            "rx",
            "shared",
            "private",
            "anonymous",
            "hugepage",
            "always",
            "never",
            "mmap",
            "read",
            "write",
            "fork",
            "loop",
            "thread",
            "fetch",
            "compare",
            "default",
            "westmere-ex",
            "18446744073709551615K",
            "99999999999999999999",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "op",
                    "name",
                    "size",
                    "align",
                    "prot",
                    "flags",
                    "addr",
                    "fixed",
                    "region",
                    "offset",
                    "length",
                    "stride",
                    "expect",
                    "value",
                    "count",
                    "body",
                    "pattern",
                    "seed",
                    "block",
                    "block_stride",
                    "program",
                    "cpu",
                    "label",
                    "knob",
                    "a",
                    "b",
                    "hold",
                    "machine",
                    "memory",
                    "cpus",
                    "profile",
                    "knobs",
                    "bogus",
                ])
                .prop_map(String::from),
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, rng_seed: proptest::test_runner::RngSeed::Fixed(7),
        failure_persistence: None, ..ProptestConfig::default() })]

    /// No input makes the workload parser panic: it parses or names what is wrong; and a
    /// workload it accepts runs (bounded) without a panic either.
    #[test]
    fn the_workload_parser_never_panics(program in prop::collection::vec(any_json(), 0..6), top in any_json()) {
        let mut w = match top { Value::Object(m) => Value::Object(m), _ => json!({}) };
        w["program"] = Value::from(program);
        let text = w.to_string();
        match parse_workload(&text) {
            Ok(spec) => {
                let opts = RunOptions { max_steps: Some(20_000), max_memory: Some(1 << 30), ..Default::default() };
                let _ = run_with(&spec, &[], &opts);
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        let _ = parse_workload(&text[..text.len() / 2]);
    }

    /// No override (of a real parameter, or of none) makes the profile parser or the machine
    /// built from it panic.
    #[test]
    fn the_profile_parser_never_panics(
        i in any::<prop::sample::Index>(),
        junk in "[a-z_.0-9]{0,24}",
        value in prop_oneof![Just("0".to_string()), Just("-1".to_string()), Just("1e308".to_string()),
                             Just("3".to_string()), Just("fifo".to_string()), "[-a-zA-Z0-9.]{0,12}"],
    ) {
        let paths: Vec<String> = crate::hw::profile::flatten(crate::hw::profile::BUILTIN[0].1)
            .unwrap().into_iter().map(|(p, _)| p).collect();
        let path = if i.index(10) == 0 { junk } else { paths[i.index(paths.len())].clone() };
        if let Ok(p) = crate::hw::profile::builtin("default", &[(path, value)]) {
            let _ = crate::hw::machine::Machine::new(p, 1);
        }
    }
}

/// Replay one workload (MMSIM_FUZZ_REPLAY=FILE: a failure `make fuzz` printed, or the
/// MMSIM_FUZZ_TRACE file a hang left) with the reference model and the invariants after every
/// step.
#[test]
#[ignore = "replays MMSIM_FUZZ_REPLAY"]
fn fuzz_replay() {
    let path = std::env::var("MMSIM_FUZZ_REPLAY").expect("MMSIM_FUZZ_REPLAY=FILE");
    let w: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("JSON");
    check_workload(&w, Sabotage::default()).unwrap();
}

/// Workloads the fuzz campaigns found a bug with, each fixed: they stay clean.
/// `fault_around_reclaim`: the PTE table that fault-around allocated ran reclaim, which
/// evicted the folio about to be mapped (a 20 MiB machine with file mappings).
/// `ptshare_mlocked_fork`: fork shared the PTE table of an mlocked shared vma with the child,
/// whose vma is not locked; the last user to unmap the pages was the child, which does not
/// munlock them (freed while mlocked). The sibling rule's "same flags" now holds at fork too.
#[test]
fn fuzz_regressions_stay_fixed() {
    for (name, text) in [
        ("fault_around_reclaim", include_str!("fuzz_regressions/fault_around_reclaim.json")),
        ("ptshare_mlocked_fork", include_str!("fuzz_regressions/ptshare_mlocked_fork.json")),
        ("mlock_breaks_file_cow", include_str!("fuzz_regressions/mlock_breaks_file_cow.json")),
        ("mlock_fault_around_large_folio", include_str!("fuzz_regressions/mlock_fault_around_large_folio.json")),
        ("tmpfs_read_swapped_again", include_str!("fuzz_regressions/tmpfs_read_swapped_again.json")),
    ] {
        let w: Value = serde_json::from_str(text).expect("JSON");
        check_workload(&w, Sabotage::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
