//! Tests of the hardware model: exact TLB-miss counts, the walker against hand-built tables,
//! the huge-zero-page cache argument in miniature, and contention between CPUs.

use serde_json::json;

use super::machine::{Machine, Translation};
use super::perf::PerfCounters;
use super::profile;
use crate::kernel::fault::Access;
use crate::kernel::knobs::Knobs;
use crate::kernel::mm::vm;
use crate::kernel::mmap::MmapArgs;
use crate::kernel::Kernel;
use crate::report::Report;
use crate::sim::run;
use crate::workload::spec::parse_workload;

fn run_with_sets(w: serde_json::Value, sets: &[(&str, &str)]) -> Report {
    let w = parse_workload(&w.to_string()).unwrap();
    let sets: Vec<(String, String)> = sets.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    run(&w, &sets, true).unwrap()
}

fn perf(r: &Report, name: &str) -> f64 {
    r.perf.get(name).unwrap_or_else(|| panic!("no perf {name}"))
}

const TINY_TLB: &[(&str, &str)] = &[
    ("hw.tlb.dtlb_4k.entries", "4"),
    ("hw.tlb.dtlb_4k.ways", "4"),
    ("hw.tlb.stlb.entries", "0"),
    ("hw.tlb.stlb.ways", "0"),
];

#[test]
fn exact_dtlb_misses_with_a_4_entry_tlb() {
    for (pages, misses) in [(8u64, 16.0), (4, 4.0)] {
        let w = json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":[
            {"op":"mmap","name":"p","size":pages * 4096},
            {"op":"loop","count":2,"body":[{"op":"read","region":"p","stride":4096}]}
        ]});
        let r = run_with_sets(w, TINY_TLB);
        assert_eq!(perf(&r, "dTLB-load-misses"), misses, "{pages} pages");
        assert_eq!(perf(&r, "dTLB-loads"), 2.0 * pages as f64);
    }
}

#[test]
fn walker_reads_each_level_and_uses_the_paging_structure_caches() {
    let p = profile::builtin("default", &[]).unwrap();
    let mut k = Kernel::new(64 << 20, Knobs::default());
    let mm = k.exec_mm().unwrap();
    let a = k
        .do_mmap(mm, MmapArgs { len: 8 << 20, prot: vm::READ | vm::WRITE, align: 1 << 30, ..Default::default() })
        .unwrap();
    for off in [0u64, 4096, 2 << 20] {
        assert_eq!(k.handle_mm_fault(mm, a + off, true), 0);
    }
    let mut m = Machine::new(p, 1);
    m.trace_walks = true;
    let mut pc = PerfCounters::default();
    let pgd = k.mm(mm).pgd;
    // Cold: PML4E, PDPTE, PDE, PTE, each from its table at the index the address selects.
    assert!(matches!(m.translate(0, &mut k, mm, a, Access::Read, &mut pc, false), Translation::Frame(_)));
    let levels: Vec<u32> = m.walk_log.iter().map(|e| e.0).collect();
    assert_eq!(levels, vec![3, 2, 1, 0]);
    assert_eq!(m.walk_log[0].1, pgd.phys() + ((a >> 39) & 511) * 8);
    assert_eq!(m.walk_log[3].1 & 0xfff, ((a >> 12) & 511) * 8);
    // Same PTE table: the PDE cache skips three levels.
    m.walk_log.clear();
    m.translate(0, &mut k, mm, a + 4096, Access::Read, &mut pc, false);
    assert_eq!(m.walk_log.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0]);
    // Another 2 MiB range of the same 1 GiB: the PDPTE cache skips two.
    m.walk_log.clear();
    m.translate(0, &mut k, mm, a + (2 << 20), Access::Read, &mut pc, false);
    assert_eq!(m.walk_log.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 0]);
    // A TLB hit reads nothing.
    m.walk_log.clear();
    m.translate(0, &mut k, mm, a, Access::Read, &mut pc, false);
    assert!(m.walk_log.is_empty());
    assert_eq!(pc.page_walks, 3);
    // The walker set the accessed bit.
    let slot = k.pte_slot(mm, a).unwrap();
    assert!(k.entry(slot.table, slot.idx).has(crate::kernel::pgtable::ACCESSED));
}

/// Seed 000's argument in miniature: memcmp of two 2 MiB halves of a read-only region. With
/// the huge zero page both halves are the same 2 MiB of physical memory, which does not fit a
/// 256 KiB cache: every line misses, but two TLB entries map it all. With the 4 KiB zero page
/// (what the virtual huge zero page maps) every read hits the same 64 lines, but each 4 KiB
/// needs its own TLB entry.
#[test]
fn huge_zero_page_costs_cache_4k_zero_page_costs_tlb() {
    let small = &[
        ("hw.cache.l1d.size", "32K"),
        ("hw.cache.l2.size", "128K"),
        ("hw.cache.llc.size", "256K"),
        ("hw.cache.prefetch_degree", "0"),
        ("hw.tlb.stlb.entries", "512"),
    ];
    let w = |thp: &str| {
        json!({"knobs":{"transparent_hugepage/enabled":thp},"program":[
            {"op":"mmap","name":"p","size":"4M","align":"2M"},
            {"op":"read","region":"p"},
            {"op":"snapshot","label":"warm"},
            {"op":"loop","count":3,"body":[{"op":"compare","a":{"region":"p"},"b":{"region":"p","offset":"2M"},"length":"2M","expect":true}]},
            {"op":"snapshot","label":"done"}
        ]})
    };
    let delta = |r: &Report, name: &str| {
        let s = |l: &str| r.snapshots.iter().find(|s| s.label == l).unwrap().perf.get(name).unwrap();
        s("done") - s("warm")
    };
    let hzp = run_with_sets(w("always"), small);
    let zp4k = run_with_sets(w("never"), small);
    // Both halves are the same physical lines: each pass loads the 2 MiB once (the second
    // side's read of a line hits the L1 right after the first).
    let lines = 3.0 * (2 << 20) as f64 / 64.0;
    assert!(delta(&hzp, "LLC-load-misses") > 0.95 * lines, "hzp: every line misses the LLC");
    assert!(delta(&zp4k, "LLC-load-misses") < 0.01 * lines, "4K zero page: 64 lines stay cached");
    assert!(delta(&hzp, "L1-dcache-load-misses") > 10.0 * delta(&zp4k, "L1-dcache-load-misses"));
    assert!(delta(&hzp, "dTLB-load-misses") <= 4.0, "two 2 MiB translations");
    assert!(delta(&zp4k, "dTLB-load-misses") > 1000.0, "1024 4 KiB translations per pass");
}

#[test]
fn contended_atomics_serialise_across_cpus() {
    let elapsed = |n: u64| {
        let w = json!({"machine":{"cpus":n},"program":[
            {"op":"mmap","name":"s","size":"4K","flags":["shared","anonymous"]},
            {"op":"write","region":"s","length":8},
            {"op":"fork","count":n,"cpu":0,"program":[{"op":"atomic","region":"s","count":2000}]},
            {"op":"wait"}
        ]});
        let r = run_with_sets(w, &[]);
        let cycles: f64 = r.processes[1..].iter().map(|p| p.perf.get("cycles").unwrap()).fold(0.0, f64::max);
        cycles
    };
    // One CPU keeps the line: 2000 owned atomics (smp.atomic = 20 cycles each).
    let one = elapsed(1);
    assert!((one - 2000.0 * 20.0).abs() < 0.1 * one, "{one}");
    // N CPUs interleave in time order: every increment fetches the line from the previous
    // owner (line_transfer + atomic = 110 cycles) and they serialise, so the last CPU
    // finishes after ~N x 2000 x 110 cycles: time grows N-fold with N.
    let mut prev = 0.0;
    for n in [2u64, 4, 8] {
        let t = elapsed(n);
        let want = n as f64 * 2000.0 * 110.0;
        assert!((t - want).abs() < 0.05 * want, "{n} CPUs: {t} cycles, expected ~{want}");
        if prev > 0.0 {
            assert!((t / prev - 2.0).abs() < 0.1, "doubling the CPUs doubles the time");
        }
        prev = t;
    }
}

#[test]
fn a_held_lock_delays_the_other_cpus() {
    let w = |hold: u64| {
        json!({"machine":{"cpus":2},"program":[
            {"op":"mmap","name":"s","size":"4K","flags":["shared","anonymous"]},
            {"op":"write","region":"s","length":8},
            {"op":"fork","count":2,"cpu":0,"program":[{"op":"atomic","region":"s","count":100,"hold":hold}]},
            {"op":"wait"}
        ]})
    };
    let t = |r: &Report| r.processes[1..].iter().map(|p| p.perf.get("cycles").unwrap()).fold(0.0, f64::max);
    let (short, long) = (t(&run_with_sets(w(10), &[])), t(&run_with_sets(w(10_000), &[])));
    // Two CPUs each holding the lock 100 x 10000 cycles: ~2 x 1e6 cycles for the later one.
    assert!(long > 1.8e6 && long < 2.4e6, "{long}");
    assert!(short < 0.05 * long);
}

/// Fast-forwarded loop iterations give exactly the counts of running every iteration.
#[test]
fn fast_forward_is_exact() {
    let body =
        json!({"op":"compare","a":{"region":"p"},"b":{"region":"p","offset":"16M"},"length":"16M","expect":true});
    let prog = |unrolled: bool| {
        let mut p = vec![json!({"op":"mmap","name":"p","size":"32M","align":"2M"})];
        if unrolled {
            p.extend(std::iter::repeat_n(body.clone(), 6));
        } else {
            p.push(json!({"op":"loop","count":6,"body":[body.clone()]}));
        }
        json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":p})
    };
    let looped = run_with_sets(prog(false), &[]);
    let unrolled = run_with_sets(prog(true), &[]);
    assert!(looped.engine.fast_forwarded_iterations > 0, "the loop was fast-forwarded");
    assert_eq!(unrolled.engine.fast_forwarded_iterations, 0);
    for name in ["cycles", "instructions", "dTLB-load-misses", "L1-dcache-load-misses", "LLC-load-misses", "page-walks"]
    {
        let (a, b) = (perf(&looped, name), perf(&unrolled, name));
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{name}: fast-forward {a} vs step by step {b}");
    }
}

const TINY_ITLB: &[(&str, &str)] = &[
    ("hw.tlb.itlb_4k.entries", "4"),
    ("hw.tlb.itlb_4k.ways", "4"),
    ("hw.tlb.stlb.entries", "0"),
    ("hw.tlb.stlb.ways", "0"),
];

/// Instruction fetches go through the iTLB, not the dTLB: the same exact counts as the dTLB
/// test, on the instruction side.
#[test]
fn exact_itlb_misses_with_a_4_entry_itlb() {
    for (pages, misses) in [(8u64, 16.0), (4, 4.0)] {
        let w = json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":[
            {"op":"mmap","name":"text","size":pages * 4096,"prot":"rx"},
            {"op":"loop","count":2,"body":[{"op":"fetch","region":"text","stride":4096}]}
        ]});
        let r = run_with_sets(w, TINY_ITLB);
        assert_eq!(perf(&r, "iTLB-load-misses"), misses, "{pages} pages");
        assert_eq!(perf(&r, "iTLB-loads"), 2.0 * pages as f64);
        assert_eq!(perf(&r, "dTLB-load-misses"), 0.0, "no data access");
        assert_eq!(perf(&r, "page-faults"), pages as f64, "each page faulted in once");
    }
}

/// The L1i holds code like the L1d holds data: 16 KiB of code (written first, as a loader
/// would: unwritten code would all be the one zero page) run twice through a 32 KiB L1i misses
/// once per line; 64 KiB misses every time (LRU, sequential).
#[test]
fn instruction_cache_misses() {
    for (size, passes, misses) in [(16u64 << 10, 2, 256.0), (64 << 10, 2, 2048.0)] {
        let w = json!({"program":[
            {"op":"mmap","name":"text","size":size,"prot":"rwx"},
            {"op":"write","region":"text"},
            {"op":"loop","count":passes,"body":[{"op":"fetch","region":"text"}]}
        ]});
        let r = run_with_sets(w, &[("hw.cache.l1i.size", "32K")]);
        assert_eq!(perf(&r, "L1-icache-load-misses"), misses, "{size} bytes");
        assert_eq!(perf(&r, "iTLB-loads"), (passes * size / 64) as f64);
        assert_eq!(perf(&r, "L1-dcache-load-misses"), 0.0, "fetches are not data loads");
        assert!(perf(&r, "stalled-cycles-frontend") > 0.0);
    }
}

/// No-execute: fetching from a mapping without PROT_EXEC faults with SIGSEGV (the NX bit of
/// its ptes), also once mprotect has taken PROT_EXEC away from a page already in the iTLB.
#[test]
fn fetch_from_a_non_executable_mapping_is_a_segfault() {
    let r = run_with_sets(
        json!({"program":[
            {"op":"mmap","name":"d","size":"8K","prot":"rw"},
            {"op":"write","region":"d"},
            {"op":"fetch","region":"d"}
        ]}),
        &[],
    );
    assert_eq!(r.events.iter().filter(|e| e.kind == "segfault").count(), 1, "{:?}", r.events);
    assert_eq!(r.processes[0].state, "killed");
    let r = run_with_sets(
        json!({"program":[
            {"op":"mmap","name":"t","size":"8K","prot":"rx"},
            {"op":"fetch","region":"t"},
            {"op":"mprotect","region":"t","prot":"r"},
            {"op":"read","region":"t"},
            {"op":"fetch","region":"t"}
        ]}),
        &[],
    );
    assert_eq!(r.check.mismatches, 0, "{:?}", r.events);
    let segv: Vec<_> = r.events.iter().filter(|e| e.kind == "segfault").collect();
    assert_eq!(segv.len(), 1, "{:?}", r.events);
    assert!(segv[0].message.contains("instruction fetch"), "{:?}", segv);
}

/// Code in a THP-backed executable mapping takes one iTLB entry per 2 MiB (the itlb_2m
/// array); the same code in 4 KiB pages one per page.
#[test]
fn huge_text_takes_2m_itlb_entries() {
    let run_text = |thp: &str| {
        let w = json!({"knobs":{"transparent_hugepage/enabled":thp},"program":[
            {"op":"mmap","name":"text","size":"4M","align":"2M","prot":"rwx"},
            {"op":"write","region":"text"},
            {"op":"snapshot","label":"loaded"},
            {"op":"loop","count":2,"body":[{"op":"fetch","region":"text","stride":4096}]},
            {"op":"snapshot","label":"ran"}
        ]});
        let r = run_with_sets(w, TINY_ITLB);
        let s = |l: &str| r.snapshots.iter().find(|s| s.label == l).unwrap().perf.get("iTLB-load-misses").unwrap();
        s("ran") - s("loaded")
    };
    assert_eq!(run_text("never"), 2048.0, "1024 4 KiB pages, 4 entries: every fetch misses");
    assert_eq!(run_text("always"), 2.0, "two 2 MiB translations, then hits");
}
