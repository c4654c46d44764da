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

pub(super) fn run_with_sets(w: serde_json::Value, sets: &[(&str, &str)]) -> Report {
    let w = parse_workload(&w.to_string()).unwrap();
    let sets: Vec<(String, String)> = sets.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    run(&w, &sets, true).unwrap()
}

pub(super) fn perf(r: &Report, name: &str) -> f64 {
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
    let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
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
    assert_eq!(m.walk_log[0].1, pgd.phys(crate::units::Geometry::X86_64) + ((a >> 39) & 511) * 8);
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
            {"op":"fork","count":n,"cpu":0,"program":[
                {"op":"atomic","region":"s","count":20000},
                {"op":"snapshot","label":"done"}
            ]},
            {"op":"wait"}
        ]});
        let r = run_with_sets(w, &[]);
        // Each process's cycles when its atomics are done (its exit comes after).
        r.snapshots
            .iter()
            .filter(|s| s.label == "done")
            .map(|s| s.processes.iter().find(|p| p.pid == s.pid).unwrap().perf.get("cycles").unwrap())
            .fold(0.0, f64::max)
    };
    let p = profile::builtin("default", &[]).unwrap();
    // One CPU keeps the line: 20000 owned atomics (smp.atomic cycles each).
    let one = elapsed(1);
    assert!((one - 20000.0 * p.smp.atomic).abs() < 0.1 * one, "{one}");
    // N CPUs interleave in time order: every increment fetches the line from the previous
    // owner (line_transfer + atomic) and they serialise, so the last CPU finishes after
    // ~N x 20000 x (line_transfer + atomic) cycles: time grows N-fold with N.
    let mut prev = 0.0;
    for n in [2u64, 4, 8] {
        let t = elapsed(n);
        let want = n as f64 * 20000.0 * (p.smp.line_transfer + p.smp.atomic);
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

fn profile_cycles(r: &Report, func: &str) -> f64 {
    r.profile.get(func).unwrap_or(0.0)
}

/// Threads (clone with CLONE_VM) share one address space: a write by one is seen by the
/// others, with no copy; the mm goes only when its last thread exits.
#[test]
fn threads_share_the_address_space() {
    let r = run_with_sets(
        json!({"machine":{"cpus":2},"program":[
            {"op":"mmap","name":"p","size":"64K"},
            {"op":"thread","cpu":1,"program":[{"op":"write","region":"p","value":7},{"op":"snapshot","label":"written"}]},
            {"op":"wait"},
            {"op":"read","region":"p","expect":7},
            {"op":"snapshot","label":"end"}
        ]}),
        &[],
    );
    assert_eq!(r.check.mismatches + r.check.expect_failures, 0, "{:?}", r.events);
    let end = r.snapshots.iter().find(|s| s.label == "end").unwrap();
    let (main, thread) = (&end.processes[0], &end.processes[1]);
    assert_eq!((thread.pid, thread.tgid, thread.state.as_str()), (2, 1, "exited"));
    assert_eq!(main.rss_anon - 4, 64, "16 pages, written once, in the one mm (+ the stack page)");
    assert_eq!(end.vmstat.get("mmsim_cow_copy"), Some(0));
    assert_eq!(main.minflt, 0, "the thread's faults mapped the pages for the main thread too");
}

/// A TLB shootdown: mprotect by one thread must invalidate the translations another thread's
/// CPU holds; it sends an IPI per remote CPU (native_flush_tlb_multi, smp.shootdown_ipi
/// cycles) and the remote thread's next write faults and is killed (with its group).
#[test]
fn mprotect_shoots_down_the_other_cpus_tlb() {
    let w = |threads: bool| {
        let worker = json!([
            {"op":"write","region":"p","value":1},
            {"op":"loop","count":60000,"body":[{"op":"read","region":"p","stride":4096,"length":"4K"}]},
            {"op":"write","region":"p","value":2}
        ]);
        let mut prog = vec![json!({"op":"mmap","name":"p","size":"16K"}), json!({"op":"mmap","name":"q","size":"4K"})];
        if threads {
            prog.push(json!({"op":"thread","cpu":1,"program":worker}));
        }
        prog.push(json!({"op":"write","region":"p","value":1}));
        // Let the other thread run a while on its CPU first (the CPUs advance in step).
        prog.push(json!({"op":"loop","count":5000,"body":[{"op":"read","region":"q"}]}));
        prog.push(json!({"op":"mprotect","region":"p","prot":"r"}));
        prog.push(json!({"op":"snapshot","label":"protected"}));
        prog.push(json!({"op":"wait"}));
        json!({"machine":{"cpus":2},"program":prog})
    };
    let ipi = profile::builtin("default", &[]).unwrap().smp.shootdown_ipi;
    let alone = run_with_sets(w(false), &[]);
    assert_eq!(profile_cycles(&alone, "native_flush_tlb_multi"), 0.0, "no other CPU holds the mm");
    let r = run_with_sets(w(true), &[]);
    // By the mprotect's return (the exits' teardown comes later).
    let at = r.snapshots.iter().find(|s| s.label == "protected").unwrap();
    assert_eq!(at.profile.get("native_flush_tlb_multi"), Some(ipi), "one IPI to the one other CPU");
    let segv: Vec<_> = r.events.iter().filter(|e| e.kind == "segfault").collect();
    assert_eq!(segv.len(), 1, "the remote write after the shootdown faults: {:?}", r.events);
    assert_eq!(r.check.mismatches, 0, "{:?}", r.events);
}

/// Without PCID every switch to another address space flushes the TLB; with PCID each
/// address space keeps its translations: two processes alternating on one CPU, a slice
/// (1 ns, so one tick of 1 ms) each.
#[test]
fn pcid_keeps_translations_across_context_switches() {
    let knobs = json!({"transparent_hugepage/enabled":"never","sched/base_slice_ns":1,"kernel/hz":1000});
    let w = json!({"machine":{"cpus":1},"knobs":knobs,"program":[
        {"op":"mmap","name":"p","size":"64K"},
        {"op":"fork","cpu":0,"program":[{"op":"loop","count":30000,"body":[{"op":"read","region":"p","stride":64}]}]},
        {"op":"loop","count":30000,"body":[{"op":"read","region":"p","stride":64}]},
        {"op":"wait"}
    ]});
    let with = run_with_sets(w.clone(), &[("hw.tlb.pcid", "true")]);
    let without = run_with_sets(w, &[("hw.tlb.pcid", "false")]);
    assert_eq!(perf(&with, "dTLB-load-misses"), 32.0, "16 pages per process, once each");
    assert!(perf(&without, "dTLB-load-misses") >= 32.0 + 16.0 * 10.0, "refilled after every switch");
    assert_eq!(profile_cycles(&with, "switch_mm_irqs_off"), 0.0);
    assert!(profile_cycles(&without, "switch_mm_irqs_off") > 0.0);
}

/// The L2 streamer: a sequential read finds its L1 misses in the L2 (prefetched), so far
/// fewer of them reach the LLC than without the prefetcher.
#[test]
fn stream_prefetcher_brings_sequential_lines_into_the_l2() {
    let w = json!({"program":[
        {"op":"mmap","name":"p","size":"4M"},
        {"op":"write","region":"p"},
        {"op":"mmap","name":"flush","size":"64M"},
        {"op":"write","region":"flush","stride":64},
        {"op":"snapshot","label":"cold"},
        {"op":"read","region":"p","stride":64},
        {"op":"snapshot","label":"read"}
    ]});
    let llc = |degree: &str| {
        let r = run_with_sets(w.clone(), &[("hw.cache.prefetch_degree", degree)]);
        let s = |l: &str| r.snapshots.iter().find(|s| s.label == l).unwrap().perf.get("LLC-loads").unwrap();
        s("read") - s("cold")
    };
    let (off, on) = (llc("0"), llc("2"));
    assert_eq!(off, 65536.0, "every line of the 4 MiB misses L1 and L2");
    assert!(on < off / 2.0, "with the streamer most lines come from the L2: {on} of {off}");
}

/// clear_page with temporal stores leaves the zeroed page in the caches (a read right after
/// the fault hits); with non-temporal stores the lines bypass them (the read goes to memory;
/// the prefetcher is off so that it does not hide the difference).
#[test]
fn temporal_and_nontemporal_clearing() {
    let w = json!({"program":[
        {"op":"mmap","name":"p","size":"16K"},
        {"op":"write","region":"p","length":1},
        {"op":"snapshot","label":"faulted"},
        {"op":"read","region":"p","length":"4K","stride":64},
        {"op":"snapshot","label":"read"}
    ]});
    let misses = |nt: &str| {
        let r = run_with_sets(w.clone(), &[("hw.cost.clear_nontemporal", nt), ("hw.cache.prefetch_degree", "0")]);
        let s = |l: &str| r.snapshots.iter().find(|s| s.label == l).unwrap().perf.get("LLC-load-misses").unwrap();
        s("read") - s("faulted")
    };
    assert_eq!(misses("false"), 0.0, "the page was just zeroed through the caches");
    assert_eq!(misses("true"), 63.0, "every line but the one the faulting store wrote comes from memory");
}

/// The walker sets the dirty bit on a write through a clean translation (and only then).
#[test]
fn walker_sets_the_dirty_bit_on_the_first_write() {
    let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    let a =
        k.do_mmap(mm, MmapArgs { len: 8192, prot: vm::READ | vm::WRITE, shared: true, ..Default::default() }).unwrap();
    assert_eq!(k.handle_mm_fault(mm, a, false), 0, "a read fault maps the shmem page writable, clean");
    let mut m = Machine::new(profile::builtin("default", &[]).unwrap(), 1);
    let mut pc = PerfCounters::default();
    let slot = k.pte_slot(mm, a).unwrap();
    let dirty = |k: &Kernel| k.entry(slot.table, slot.idx).has(crate::kernel::pgtable::DIRTY);
    m.translate(0, &mut k, mm, a, Access::Read, &mut pc, false);
    assert!(!dirty(&k), "a read sets only the accessed bit");
    assert_eq!(pc.page_walks, 1);
    m.translate(0, &mut k, mm, a, Access::Write, &mut pc, false);
    assert!(dirty(&k), "the first write walks again to set the dirty bit");
    assert_eq!(pc.page_walks, 2);
    m.translate(0, &mut k, mm, a, Access::Write, &mut pc, false);
    assert_eq!(pc.page_walks, 2, "a dirty translation needs no walk");
}

/// Same workload, same profile -> identical report, counters and cycles, bit for bit, also
/// with many CPUs, contention and threads.
#[test]
fn runs_are_deterministic() {
    let w = json!({"machine":{"cpus":4},"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"8M"},
        {"op":"mmap","name":"s","size":"4K","flags":["shared","anonymous"]},
        {"op":"read","region":"p"},
        {"op":"fork","count":3,"program":[
            {"op":"write","region":"p","stride":65536},
            {"op":"atomic","region":"s","count":50},
            {"op":"thread","program":[{"op":"read","region":"p","stride":8192}]},
            {"op":"wait"}
        ]},
        {"op":"thread","count":2,"program":[{"op":"atomic","region":"s","count":30}]},
        {"op":"munmap","region":"p","offset":"1M","length":"4K"},
        {"op":"wait"}
    ]});
    let a = run_with_sets(w.clone(), &[]);
    let b = run_with_sets(w, &[]);
    assert_eq!(a, b);
    assert!(perf(&a, "cycles") > 0.0);
}

/// A locked RMW on a line another CPU owns moves the line once; a read + cmpxchg loop
/// (atomic_inc_not_zero) moves it twice; on an owned line both cost one atomic.
#[test]
fn cmpxchg_loops_move_a_contended_line_twice() {
    let p = profile::builtin("haswell-ep", &[]).unwrap();
    let atomic = p.smp.atomic;
    let mut m = Machine::new(p, 2);
    // Two CPUs of Haswell-EP are the two threads of one core: the line moves at that distance.
    let xfer = m.c2c(0, 1);
    let mut pc = PerfCounters::default();
    let line = 1 << 60;
    assert_eq!(m.atomic_rmw(0, line, 0.0, 0.0, 2.0, "t", &mut pc), atomic, "first use: this CPU owns it");
    assert_eq!(m.atomic_rmw(0, line, 1000.0, 0.0, 2.0, "t", &mut pc), atomic);
    assert_eq!(m.atomic_rmw(1, line, 2000.0, 0.0, 1.0, "t", &mut pc), xfer + atomic, "lock xadd: one transfer");
    assert_eq!(m.atomic_rmw(0, line, 3000.0, 0.0, 2.0, "t", &mut pc), 2.0 * xfer + atomic, "cmpxchg loop: two");
}

/// clear_page with temporal stores runs at its store rate on a page already in the caches,
/// and at the fill buffers' rate on a cold one: each of its 64 lines is read for ownership
/// from memory, `memory.stream_mlp` at a time (Little's law). copy_page is bounded the same
/// way.
#[test]
fn clearing_a_cold_page_waits_for_its_lines() {
    use crate::kernel::Work;
    use crate::units::Pfn;
    let p = profile::builtin("haswell-ep", &[]).unwrap();
    let lines = (4096 / p.cache.line) as f64;
    let cold = lines * (p.memory.latency - p.cache.l1d.latency) / p.memory.stream_mlp;
    let warm = 4096.0 / p.cost.clear_bytes_per_cycle;
    assert!(cold > 2.0 * warm, "the case this test is about: {cold} vs {warm}");
    let mut k = Kernel::new(64 << 20, Knobs::default(), crate::units::Geometry::X86_64);
    let mut m = Machine::new(p.clone(), 1);
    // Each piece of work starts long after the last (the node's bandwidth is free again).
    let clear = |m: &mut Machine, k: &mut Kernel, pfn: u32, at: f64| {
        let mut pc = PerfCounters::default();
        m.do_work(
            0,
            k,
            Work::Clear {
                pfn: Pfn(pfn),
                pages: 1,
                chunk: 1,
                path: crate::kernel::page_alloc::ClearPath::Alloc,
                target: crate::kernel::NO_TARGET,
            },
            &mut pc,
            at,
        );
        (pc.cycles, pc.stalled_backend)
    };
    assert_eq!(clear(&mut m, &mut k, 100, 0.0), (cold, cold - warm), "cold: a fill-buffer-bound stall");
    assert_eq!(clear(&mut m, &mut k, 100, 1e6), (warm, 0.0), "the same page again: in the L1");
    let mut pc = PerfCounters::default();
    m.do_work(0, &mut k, Work::Copy { dst: Pfn(200), src: Pfn(300) }, &mut pc, 2e6);
    assert_eq!(pc.cycles, 2.0 * cold, "copy_page: both pages' lines");
}

/// The simulator runs one CPU a slice at a time, so a CPU simulated later can reach a line
/// earlier in simulated time than a use already booked: it takes the idle gap before that use
/// if the gap is long enough, and otherwise waits until the use ends.
#[test]
fn a_contended_line_is_used_in_time_order() {
    let p = profile::builtin("haswell-ep", &[]).unwrap();
    let atomic = p.smp.atomic;
    let mut m = Machine::new(p, 4);
    // 4 CPUs of Haswell-EP: cores 0 and 1, one per socket, with threads 0, 2 and 1, 3.
    let xfer = |m: &Machine, from: usize, to: usize| m.c2c(from, to);
    let mut pc = PerfCounters::default();
    let line = 1 << 60;
    assert_eq!(m.atomic_rmw(3, line, 0.0, 0.0, 1.0, "t", &mut pc), atomic, "first use: CPU 3 owns it");
    let x30 = xfer(&m, 3, 0);
    assert_eq!(m.atomic_rmw(0, line, 10_000.0, 0.0, 1.0, "t", &mut pc), x30 + atomic, "booked at 10000");
    // Earlier: the gap before, after CPU 3's use.
    assert_eq!(m.atomic_rmw(1, line, 5_000.0, 0.0, 1.0, "t", &mut pc), xfer(&m, 3, 1) + atomic);
    // 9950 + a transfer overlaps the use at 10000: wait for its end, then take it from CPU 0.
    let spent = m.atomic_rmw(2, line, 9_950.0, 0.0, 1.0, "t", &mut pc);
    assert_eq!(spent, (10_000.0 + x30 + atomic - 9_950.0) + xfer(&m, 0, 2) + atomic);
    // Uses behind the horizon are forgotten, but who owned the line last is not.
    m.horizon = 50_000.0;
    assert_eq!(m.atomic_rmw(2, line, 50_000.0, 0.0, 1.0, "t", &mut pc), atomic, "CPU 2 still owns it");
    assert_eq!(m.atomic_rmw(3, line, 50_020.0, 1000.0, 1.0, "t", &mut pc), xfer(&m, 2, 3) + atomic + 1000.0);
}

/// 16 processes on 16 CPUs (no SMT) read-fault the huge zero page with the global refcount:
/// the refcount's line is the bottleneck (a fault's own work is shorter than 16 turns on it),
/// and it is never idle while a CPU waits for it, so the slowest process finishes soon after
/// the line has served every get_huge_zero_page (a read and a cmpxchg: two transfers each).
/// The parent allocates the huge zero page first (clearing 2 MiB of cold memory takes ~0.3
/// ms, which would hold one process back). The processes stay (a loop) until all are done,
/// so that no exit's put_huge_zero_page takes the line meanwhile.
#[test]
fn a_saturated_line_serves_the_cpus_back_to_back() {
    let n = 16u64;
    let faults = 256u64;
    let w = json!({"machine":{"profile":"haswell-ep","cpus":n},
    "knobs":{"transparent_hugepage/enabled":"always","transparent_hugepage/hzp_refcount":"global"},
    "program":[
        {"op":"mmap","name":"z","size":"4M"},
        {"op":"read","region":"z","stride":"2M"},
        {"op":"fork","count":n,"cpu":0,"program":[
            {"op":"mmap","name":"m","size":"512M"},
            {"op":"snapshot","label":"start"},
            {"op":"read","region":"m","stride":"2M"},
            {"op":"snapshot","label":"done"},
            {"op":"loop","count":20000,"body":[{"op":"read","region":"m","length":"4K","stride":64}]}
        ]},
        {"op":"wait"}
    ]});
    // One transfer cost for every pair of CPUs (the line's, whichever socket has it).
    let lt = profile::builtin("haswell-ep", &[]).unwrap().smp.line_transfer.to_string();
    let sets = [
        ("hw.cpu.smt", "1"),
        ("hw.cpu.smt_throughput", "1"),
        ("hw.smp.c2c_socket", lt.as_str()),
        ("hw.smp.c2c_remote", lt.as_str()),
    ];
    let r = run_with_sets(w, &sets);
    let p = profile::builtin("haswell-ep", &[]).unwrap();
    let hz = p.cpu.freq_ghz * 1e9;
    let at = |label: &str| -> Vec<f64> {
        r.snapshots.iter().filter(|s| s.label == label).map(|s| s.perf.get("seconds").unwrap() * hz).collect()
    };
    let (start, done) = (at("start"), at("done"));
    assert_eq!(done.len(), n as usize);
    let first = start.iter().cloned().fold(f64::INFINITY, f64::min);
    let last = done.iter().cloned().fold(0.0, f64::max);
    let line_busy = (n * faults) as f64 * (2.0 * p.smp.line_transfer + p.smp.atomic);
    let elapsed = last - first;
    // A CPU that takes the line again before another asks for it pays no transfer (the
    // forks are staggered): a little under the line's time is possible.
    assert!(elapsed > 0.9 * line_busy, "{elapsed} cycles: the line serialises {line_busy}");
    // Before uses were booked in time order, slices left the line idle: 22% more.
    assert!(elapsed < 1.1 * line_busy, "{elapsed} cycles against {line_busy} of line time");
    assert_eq!(perf(&r, "page-faults"), (n * faults + 2) as f64, "and the parent's 2");
}

/// A process's exit tears its address space down on its own CPU: another process's next
/// fault does not pay for it (it did when the end of a program queued the teardown's work for
/// whichever CPU charged work next).
#[test]
fn a_process_pays_for_its_own_exit() {
    let run = |size: &str| {
        let w = json!({"machine":{"cpus":3},"knobs":{"transparent_hugepage/enabled":"never"},"program":[
            {"op":"fork","cpu":1,"program":[
                {"op":"mmap","name":"big","size":size},
                {"op":"write","region":"big"}
            ]},
            {"op":"fork","cpu":2,"program":[
                {"op":"mmap","name":"s","size":"64K"},
                {"op":"write","region":"s","length":"4K"},
                // Long enough that the other process has exited before the faults that follow.
                {"op":"loop","count":1000000,"body":[{"op":"read","region":"s","length":"4K","stride":64}]},
                {"op":"write","region":"s"}
            ]},
            {"op":"wait"}
        ]});
        let r = run_with_sets(w, &[]);
        let cycles = |pid: u32| r.processes.iter().find(|p| p.pid == pid).unwrap().perf.get("cycles").unwrap();
        (cycles(2), cycles(3))
    };
    let (small_exit, other_small) = run("64K");
    let (big_exit, other_big) = run("32M");
    assert!(big_exit > small_exit + 1e6, "tearing down 8192 pages: {big_exit} vs {small_exit}");
    // Only contention for the zone lock may differ (the two CPUs are on one node).
    assert!((other_big - other_small).abs() < 0.01 * other_small, "{other_big} vs {other_small}");
}

/// Order-0 allocations come from per-CPU lists refilled `batch` pages at a time under
/// zone->lock: one CPU refills once per batch; many CPUs faulting at once queue for the lock.
#[test]
fn per_cpu_page_lists_contend_for_the_zone_lock() {
    use crate::kernel::knobs::PcpBatch;
    use crate::kernel::Pcp;
    let big = Pcp::new(4 << 20, PcpBatch::Auto, crate::units::Geometry::X86_64);
    assert_eq!((big.batch, big.high), (63, 378), "a 16 GiB zone, as Linux 6.x");
    assert_eq!(Pcp::new(4 << 20, PcpBatch::Legacy, crate::units::Geometry::X86_64).batch, 31, "as Linux before 4.19");
    assert_eq!(Pcp::new(5120, PcpBatch::Auto, crate::units::Geometry::X86_64).batch, 1, "a tiny zone");
    assert_eq!(Pcp::new(4 << 20, PcpBatch::Pages(7), crate::units::Geometry::X86_64).high, 42);
    let run = |n: u64| {
        let w = json!({"machine":{"cpus":n},"knobs":{"transparent_hugepage/enabled":"never"},"program":[
            {"op":"fork","count":n,"cpu":0,"program":[
                {"op":"mmap","name":"p","size":"16M"},
                {"op":"write","region":"p"}
            ]},
            {"op":"wait"}
        ]});
        // A slow lock (1000 cycles a page), so that 8 CPUs faulting at once queue for it.
        let r = run_with_sets(w, &[("hw.smp.zone_lock_page", "1000")]);
        (profile_cycles(&r, "rmqueue_bulk"), r)
    };
    let (one, r1) = run(1);
    let p = profile::builtin("default", &[("smp.zone_lock_page".into(), "1000".into())]).unwrap();
    let refills = (4096.0f64 + 8.0) / 63.0;
    assert!(one >= refills.floor() * 63.0 * p.smp.zone_lock_page, "{one}: a refill per 63 pages");
    assert!(one < (refills.ceil() + 2.0) * (63.0 * p.smp.zone_lock_page + p.smp.line_transfer + p.smp.atomic));
    let (eight, _) = run(8);
    assert!(eight / 8.0 > 1.2 * one, "contention: {} per process vs {one} alone", eight / 8.0);
    assert_eq!(r1.check.mismatches, 0);
}

/// A loop of L1-resident loads runs at the base CPI unless the load ports are the limit: with
/// one load port a load per 0.3 cycles of instructions takes a cycle.
#[test]
fn load_ports_bound_a_load_heavy_loop() {
    let w = json!({"program":[
        {"op":"mmap","name":"p","size":"16K"},
        {"op":"read","region":"p","stride":8},
        {"op":"snapshot","label":"warm"},
        {"op":"loop","count":100,"body":[{"op":"read","region":"p","stride":8}]},
        {"op":"snapshot","label":"end"}
    ]});
    let cycles = |ports: &str| {
        let sets = [("hw.cpu.base_cpi", "0.1"), ("hw.cpu.loads_per_cycle", ports)];
        let r = run_with_sets(w.clone(), &sets);
        let s = |l: &str| r.snapshots.iter().find(|s| s.label == l).unwrap().perf.get("cycles").unwrap();
        s("end") - s("warm")
    };
    let loads = 100.0 * 2048.0;
    assert_eq!(cycles("1"), loads, "one load a cycle");
    assert!((cycles("4") - loads * 3.0 * 0.1).abs() < 1.0, "3 instructions x 0.1 CPI per load");
}

/// Short iterations are fast-forwarded in spans: the counts (and every vmstat counter) equal
/// the step-by-step run's; a body with system calls is never fast-forwarded, since its vmstat
/// counters change every iteration.
#[test]
fn short_loops_fast_forward_in_spans_exactly() {
    let prog = |body: serde_json::Value, count: u64| {
        json!({"program":[
            {"op":"mmap","name":"p","size":"64K"},
            {"op":"write","region":"p"},
            {"op":"loop","count":count,"body":body}
        ]})
    };
    let reads = json!([{"op":"read","region":"p","stride":64}]);
    for count in [5000u64, 4999, 12345] {
        let ff = run_with_sets(prog(reads.clone(), count), &[]);
        let step = run_with_sets(prog(reads.clone(), count), &[("engine.fast_forward", "0")]);
        assert!(ff.engine.fast_forwarded_iterations > count / 2, "{count}: {:?}", ff.engine);
        for name in ["cycles", "instructions", "dTLB-loads", "L1-dcache-load-misses", "page-walks"] {
            let (a, b) = (perf(&ff, name), perf(&step, name));
            assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{count} {name}: {a} vs {b}");
        }
        assert_eq!(ff.vmstat, step.vmstat);
    }
    let syscalls =
        json!([{"op":"mmap","name":"q","size":"4K"},{"op":"write","region":"q"},{"op":"munmap","region":"q"}]);
    let r = run_with_sets(prog(syscalls, 3000), &[]);
    assert_eq!(r.engine.fast_forwarded_iterations, 0);
    assert_eq!(r.vmstat.get("pgfault").unwrap() - 16, 3000, "every iteration faulted");
}

/// An iteration that takes a snapshot or reports an event is never skipped: a loop of 4 reads
/// with a snapshot gives 4 snapshots, each with the step-by-step run's counts (found by
/// `validate --random`: 3 snapshots of 4 when the state repeated after iteration 2).
#[test]
fn iterations_with_a_snapshot_or_an_event_are_not_fast_forwarded() {
    let prog = |body: serde_json::Value| {
        json!({"program":[{"op":"mmap","name":"p","size":"6M"},{"op":"write","region":"p"},
            {"op":"loop","count":4,"body":body}]})
    };
    let reads = [json!({"op":"read","region":"p","length":"3M"}), json!({"op":"read","region":"p"})];
    let body = json!([{"op":"snapshot","label":"s"}, reads[0], reads[1]]);
    let (ff, step) =
        (run_with_sets(prog(body.clone()), &[]), run_with_sets(prog(body), &[("engine.fast_forward", "0")]));
    assert_eq!(ff.snapshots.len(), 4);
    for (a, b) in ff.snapshots.iter().zip(&step.snapshots) {
        assert_eq!(a.perf.get("cycles"), b.perf.get("cycles"));
        assert_eq!(a.processes[0].minflt, b.processes[0].minflt);
    }
    // An mprotect past the region's end fails (ENOMEM: a hole) in every iteration: 4 events.
    let failing = json!([{"op":"read","region":"p"},{"op":"mprotect","region":"p","prot":"r","length":"8M"}]);
    let r = run_with_sets(prog(failing), &[]);
    assert_eq!(r.events.iter().filter(|e| e.kind == "syscall").count(), 4, "{:?}", r.events);
    let r = run_with_sets(prog(json!(reads)), &[]);
    assert!(r.engine.fast_forwarded_iterations > 0, "the same loop without outputs is");
}

/// Cycles and walker-busy cycles between two snapshots of a run.
fn delta(r: &Report, from: &str, to: &str, name: &str) -> f64 {
    let s = |l: &str| r.snapshots.iter().find(|s| s.label == l).unwrap().perf.get(name).unwrap();
    s(to) - s(from)
}

/// Page walks of independent loads overlap the work around them: with 64 loads per page
/// (about 58 cycles of work on the default profile) every walk hides behind the next page's
/// loads on an out-of-order core, and costs its whole latency on an in-order one
/// (`cpu.rob` 0). The walker is as busy either way.
#[test]
fn walks_hide_behind_independent_work_in_the_reorder_window() {
    let w = json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":[
        {"op":"mmap","name":"p","size":"256K"},
        {"op":"read","region":"p","stride":4096},
        {"op":"snapshot","label":"warm"},
        {"op":"loop","count":4,"body":[{"op":"read","region":"p","stride":64}]},
        {"op":"snapshot","label":"end"}
    ]});
    let run = |rob: &str| {
        let mut sets = TINY_TLB.to_vec();
        sets.push(("hw.cpu.rob", rob));
        run_with_sets(w.clone(), &sets)
    };
    let (ooo, inorder) = (run("256"), run("0"));
    let walks = delta(&ooo, "warm", "end", "page-walks");
    assert_eq!(walks, 4.0 * 64.0, "every page misses the 4-entry TLB");
    let busy = delta(&ooo, "warm", "end", "page-walk-cycles");
    assert_eq!(busy, delta(&inorder, "warm", "end", "page-walk-cycles"));
    assert!(busy >= walks * 14.0, "each walk: 10 cycles overhead + an L1-hit pte read at least");
    let cycles = |r: &Report| delta(r, "warm", "end", "cycles");
    let d = cycles(&inorder) - cycles(&ooo);
    assert!((d - busy).abs() <= 2.0, "in order every walk cycle is a stall, out of order none: {d} vs {busy}");
}

/// A stream of walks with nothing to hide behind (one load per page) runs at the walkers'
/// pace: one walk's latency per load with one walker, half with two; once the reorder
/// window is full the core waits.
#[test]
fn back_to_back_walks_queue_for_the_page_walkers() {
    let w = json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":[
        {"op":"mmap","name":"p","size":"1M"},
        {"op":"read","region":"p","stride":4096},
        {"op":"snapshot","label":"warm"},
        {"op":"loop","count":8,"body":[{"op":"read","region":"p","stride":4096}]},
        {"op":"snapshot","label":"end"}
    ]});
    let run = |walkers: &str| {
        let mut sets = TINY_TLB.to_vec();
        sets.push(("hw.tlb.page_walkers", walkers));
        run_with_sets(w.clone(), &sets)
    };
    let (one, two) = (run("1"), run("2"));
    let loads = 8.0 * 256.0;
    let per_load = |r: &Report| delta(r, "warm", "end", "cycles") / loads;
    let walk = |r: &Report| delta(r, "warm", "end", "page-walk-cycles") / loads;
    // The loop's own work (3 instructions at CPI 0.3) is under a cycle per load; the window
    // (256 x 0.3 = 76.8 cycles) absorbs the queue only once.
    let window = 256.0 * 0.3 / loads;
    assert!((per_load(&one) - walk(&one)).abs() <= window + 1e-9, "{} vs {}", per_load(&one), walk(&one));
    assert!((per_load(&two) - walk(&two) / 2.0).abs() <= window + 1e-9, "{} vs {}", per_load(&two), walk(&two));
}

/// A serialising instruction (the atomic op's locked RMW) waits for the translations the
/// core ran ahead of, so nothing stays hidden past it: after a run of walks it costs more
/// than alone, by no more than the reorder window.
#[test]
fn a_locked_instruction_drains_outstanding_walks() {
    let atomic_cycles = |walks_before: bool| {
        let mut prog = vec![
            json!({"op":"mmap","name":"p","size":"64K"}),
            json!({"op":"mmap","name":"a","size":"4K"}),
            json!({"op":"write","region":"a"}),
            json!({"op":"read","region":"p","stride":4096}),
            json!({"op":"atomic","region":"a","count":1}),
        ];
        if walks_before {
            prog.push(json!({"op":"read","region":"p","stride":4096}));
        }
        prog.push(json!({"op":"snapshot","label":"before"}));
        prog.push(json!({"op":"atomic","region":"a","count":1}));
        prog.push(json!({"op":"snapshot","label":"after"}));
        let w = json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":prog});
        let mut sets = TINY_TLB.to_vec();
        sets.push(("hw.tlb.page_walkers", "1"));
        let r = run_with_sets(w, &sets);
        // Less the atomic's own walk (its page was pushed out of the TLB by the reads).
        delta(&r, "before", "after", "cycles") - delta(&r, "before", "after", "page-walk-cycles")
    };
    let (alone, after_walks) = (atomic_cycles(false), atomic_cycles(true));
    let window = 256.0 * 0.3;
    assert!(after_walks > alone, "the walks still outstanding are paid for: {after_walks} vs {alone}");
    assert!(after_walks - alone <= window + 1.0, "never more than the window: {after_walks} vs {alone}");
}

/// Each NUMA node's zone has its own lock: 8 CPUs faulting at once on two nodes wait less in
/// rmqueue_bulk than on one, and CPUs map to nodes in consecutive blocks.
#[test]
fn numa_nodes_split_the_zone_lock() {
    let m = Machine::new(profile::builtin("default", &[("smp.numa_nodes".into(), "2".into())]).unwrap(), 8);
    assert_eq!((0..8).map(|c| m.numa_node(c)).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 1, 1, 1]);
    let m = Machine::new(profile::builtin("default", &[("smp.numa_nodes".into(), "4".into())]).unwrap(), 2);
    assert_eq!((m.numa_node(0), m.numa_node(1)), (0, 1));
    let run = |nodes: &str| {
        let w = json!({"machine":{"cpus":8},"knobs":{"transparent_hugepage/enabled":"never"},"program":[
            {"op":"fork","count":8,"program":[
                {"op":"mmap","name":"p","size":"16M"},
                {"op":"write","region":"p"}
            ]},
            {"op":"wait"}
        ]});
        // A slow lock (1000 cycles a page) that 8 CPUs faulting at once keep busy.
        let r = run_with_sets(w, &[("hw.smp.numa_nodes", nodes), ("hw.smp.zone_lock_page", "1000")]);
        assert_eq!(r.check.mismatches, 0);
        profile_cycles(&r, "rmqueue_bulk")
    };
    let (one, two) = (run("1"), run("2"));
    assert!(two < 0.8 * one, "two locks, less waiting: {two} vs {one}");
}

/// SMT: two busy hardware threads of one core each execute at smt_throughput / smt speed (a
/// compute loop takes 2 / 1.25 = 1.6 times the cycles), while a thread whose sibling is idle
/// runs as on a core of its own.
#[test]
fn smt_siblings_share_their_core() {
    let m = Machine::new(profile::builtin("default", &[("cpu.smt".into(), "2".into())]).unwrap(), 4);
    assert_eq!(m.smt_siblings(1).collect::<Vec<_>>(), [3], "x86 numbering: c and c + cores");
    let loop_cycles = |tasks: u64, smt: &str| {
        let w = json!({"machine":{"cpus":2},"program":[
            {"op":"fork","count":tasks,"program":[
                {"op":"mmap","name":"p","size":"16K"},
                {"op":"read","region":"p","stride":64},
                {"op":"loop","count":1000,"body":[{"op":"read","region":"p","stride":64}]}
            ]},
            {"op":"wait"}
        ]});
        let throughput = if smt == "1" { "1.0" } else { "1.25" };
        let r = run_with_sets(w, &[("hw.cpu.smt", smt), ("hw.cpu.smt_throughput", throughput)]);
        r.processes.iter().filter(|p| p.pid != 1).map(|p| p.perf.get("cycles").unwrap()).sum::<f64>() / tasks as f64
    };
    let alone = loop_cycles(1, "1");
    assert_eq!(loop_cycles(1, "2"), alone, "an idle sibling costs nothing");
    let two_cores = loop_cycles(2, "1");
    assert!((two_cores / alone - 1.0).abs() < 0.03, "two cores: no sharing ({two_cores} vs {alone})");
    let shared = loop_cycles(2, "2") / two_cores;
    assert!((1.5..=1.6).contains(&shared), "two threads on one core: {shared}x the cycles");
}
