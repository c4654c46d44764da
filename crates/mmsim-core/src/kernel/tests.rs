//! Scenario tests of the kernel model through whole workloads: exact counts, as the model is
//! exact (the seed 000 program, fork + COW, splits, shared memory, out of memory).

use serde_json::json;

use crate::report::Snapshot;
use crate::sim::{run_with, RunOptions};
use crate::test_support::{run_checked as run, snap};
use crate::workload::spec::parse_workload;

fn vm(s: &Snapshot, name: &str) -> i64 {
    s.vmstat.get(name).unwrap_or_else(|| panic!("no vmstat {name}"))
}

fn mi(s: &Snapshot, name: &str) -> i64 {
    s.meminfo.get(name).unwrap_or_else(|| panic!("no meminfo {name}"))
}

fn p1(s: &Snapshot) -> &crate::report::ProcessStatus {
    &s.processes[0]
}

/// The seed 000 test program: 200 MiB, 2 MiB aligned, one read per 4 KiB.
fn hzp_rss(knobs: serde_json::Value, madvise: bool) -> serde_json::Value {
    let mut prog =
        vec![json!({"op":"mmap","name":"p","size":"200M","align":"2M"}), json!({"op":"snapshot","label":"before"})];
    if madvise {
        prog.insert(1, json!({"op":"madvise","region":"p","advice":"hugepage"}));
    }
    prog.push(json!({"op":"read","region":"p","stride":4096,"expect":0}));
    prog.push(json!({"op":"snapshot","label":"after-read"}));
    prog.push(json!({"op":"write","region":"p","length":1,"value":9}));
    prog.push(json!({"op":"snapshot","label":"after-write"}));
    json!({"name":"hzp-rss","knobs":knobs,"program":prog})
}

#[test]
fn seed000_thp_never_maps_the_4k_zero_page() {
    let r = run(hzp_rss(json!({"transparent_hugepage/enabled":"never"}), false));
    let (b, a) = (snap(&r, "before"), snap(&r, "after-read"));
    assert_eq!(p1(a).minflt - p1(b).minflt, 51200);
    assert_eq!(p1(a).rss_anon - p1(b).rss_anon, 0);
    assert_eq!(p1(a).vm_pte - p1(b).vm_pte, 400, "100 PTE tables");
    assert_eq!(vm(a, "pgfault") - vm(b, "pgfault"), 51200);
    let w = snap(&r, "after-write");
    assert_eq!(p1(w).rss_anon - p1(a).rss_anon, 4);
}

#[test]
fn seed000_thp_always_without_zero_page_allocates_100_thps() {
    for (knobs, madv) in [
        (json!({"transparent_hugepage/enabled":"always","transparent_hugepage/use_zero_page":0}), false),
        (json!({"transparent_hugepage/enabled":"madvise","transparent_hugepage/use_zero_page":0}), true),
    ] {
        let r = run(hzp_rss(knobs, madv));
        let (b, a) = (snap(&r, "before"), snap(&r, "after-read"));
        assert_eq!(p1(a).minflt - p1(b).minflt, 100);
        assert_eq!(p1(a).rss_anon - p1(b).rss_anon, 204800);
        assert_eq!(mi(a, "AnonHugePages"), 204800);
        assert_eq!(p1(a).anon_huge_pages, 204800);
        assert_eq!(vm(a, "thp_fault_alloc") - vm(b, "thp_fault_alloc"), 100);
        assert_eq!(p1(a).vm_pte - p1(b).vm_pte, 400, "100 deposited PTE tables");
        assert_eq!(vm(a, "nr_page_table_pages") - vm(b, "nr_page_table_pages"), 100);
    }
}

#[test]
fn seed000_huge_zero_page_read_then_write() {
    let r =
        run(hzp_rss(json!({"transparent_hugepage/enabled":"always","transparent_hugepage/use_zero_page":1}), false));
    let (b, a, w) = (snap(&r, "before"), snap(&r, "after-read"), snap(&r, "after-write"));
    assert_eq!(p1(a).minflt - p1(b).minflt, 100);
    assert_eq!(p1(a).rss_anon - p1(b).rss_anon, 0);
    assert_eq!(p1(a).vm_pte - p1(b).vm_pte, 400);
    assert_eq!(vm(a, "thp_zero_page_alloc"), 1);
    assert_eq!(mi(a, "AnonHugePages"), 0);
    // The write replaces the huge zero pmd by a THP (Linux >= 6.13 do_huge_zero_wp_pmd).
    assert_eq!(vm(w, "thp_fault_alloc") - vm(a, "thp_fault_alloc"), 1);
    assert_eq!(mi(w, "AnonHugePages"), 2048);
    assert_eq!(p1(w).rss_anon - p1(a).rss_anon, 2048);
    assert_eq!(p1(w).minflt - p1(a).minflt, 1);
    assert_eq!(vm(w, "thp_split_pmd"), 0);
}

#[test]
fn hzp_write_falls_back_to_split_and_4k_cow_when_thp_allocation_fails() {
    let mut w = hzp_rss(json!({"transparent_hugepage/enabled":"always"}), false);
    // Fail every order-9 allocation after the huge zero folio exists.
    let prog = w["program"].as_array_mut().unwrap();
    let idx = prog.iter().position(|o| o["label"] == "after-read").unwrap();
    prog.insert(idx + 1, json!({"op":"set","knob":"fail_page_alloc/min_order","value":9}));
    let r = run(w);
    let (a, w) = (snap(&r, "after-read"), snap(&r, "after-write"));
    assert_eq!(vm(w, "thp_fault_alloc") - vm(a, "thp_fault_alloc"), 0);
    assert_eq!(vm(w, "thp_fault_fallback") - vm(a, "thp_fault_fallback"), 1);
    assert_eq!(vm(w, "thp_split_pmd") - vm(a, "thp_split_pmd"), 1);
    assert_eq!(p1(w).rss_anon - p1(a).rss_anon, 4);
    assert_eq!(p1(w).vm_pte - p1(a).vm_pte, 0, "the deposited table became the PTE table");
}

#[test]
fn fork_cow_children_see_their_own_data_and_shared_is_shared() {
    let child = |v: u8| {
        json!([
            {"op":"write","region":"priv","value":v},
            {"op":"read","region":"priv","expect":v},
            {"op":"write","region":"shr","offset":(v as u64) * 4096,"length":1,"value":v},
            {"op":"exit"}
        ])
    };
    let mut prog = vec![
        json!({"op":"mmap","name":"priv","size":"64K"}),
        json!({"op":"mmap","name":"shr","size":"64K","flags":["shared","anonymous"]}),
        json!({"op":"write","region":"priv","value":1}),
        json!({"op":"read","region":"shr","expect":0}),
    ];
    for v in 2..6u8 {
        prog.push(json!({"op":"fork","program":child(v)}));
    }
    prog.push(json!({"op":"wait"}));
    prog.push(json!({"op":"read","region":"priv","expect":1}));
    for v in 2..6u64 {
        prog.push(json!({"op":"read","region":"shr","offset":v * 4096,"length":1,"expect":v}));
    }
    prog.push(json!({"op":"snapshot","label":"end"}));
    let r = run(json!({"program":prog}));
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
    let s = snap(&r, "end");
    // Each child copied the 16 pages it wrote (COW); the parent's pages were reused.
    for c in &s.processes[1..] {
        assert_eq!(c.state, "exited");
        assert_eq!(c.minflt, 16 + 1, "16 COW faults + 1 shmem fault");
    }
    assert_eq!(vm(s, "mmsim_cow_copy"), 64);
}

#[test]
fn munmap_in_the_middle_of_a_thp_splits_it() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"write","region":"p"},
        {"op":"snapshot","label":"written"},
        {"op":"munmap","region":"p","offset":"1M","length":"4K"},
        {"op":"snapshot","label":"unmapped"},
        {"op":"read","region":"p","offset":0,"length":"1M","expect":1},
        {"op":"read","region":"p","offset":"2M","expect":1},
    ]}));
    let (w, u) = (snap(&r, "written"), snap(&r, "unmapped"));
    assert_eq!(mi(w, "AnonHugePages"), 4096);
    assert_eq!(vm(u, "thp_split_pmd"), 1);
    assert_eq!(mi(u, "AnonHugePages"), 2048, "the second THP stays huge");
    assert_eq!(p1(u).rss_anon, p1(w).rss_anon - 4);
    assert_eq!(vm(u, "thp_deferred_split_page"), 1);
    assert_eq!(mi(u, "MemFree"), mi(w, "MemFree"), "the THP is freed by the deferred split, not at munmap");
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

#[test]
fn mprotect_in_the_middle_of_a_huge_zero_pmd() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"2M","align":"2M"},
        {"op":"read","region":"p","expect":0},
        {"op":"snapshot","label":"read"},
        {"op":"mprotect","region":"p","offset":"1M","length":"4K","prot":"r"},
        {"op":"snapshot","label":"protected"},
        {"op":"read","region":"p","expect":0},
        {"op":"snapshot","label":"reread"},
    ]}));
    let (a, b, c) = (snap(&r, "read"), snap(&r, "protected"), snap(&r, "reread"));
    assert_eq!(vm(b, "thp_split_pmd") - vm(a, "thp_split_pmd"), 1);
    assert_eq!(p1(b).vm_pte, p1(a).vm_pte, "the deposited table is reused");
    assert_eq!(p1(c).minflt, p1(b).minflt, "all 512 ptes map the zero page: no new faults");
}

#[test]
fn write_to_read_only_memory_is_a_segfault() {
    let r = run(json!({"program":[
        {"op":"mmap","name":"p","size":"8K","prot":"r"},
        {"op":"write","region":"p"},
        {"op":"read","region":"p"}
    ]}));
    assert_eq!(r.events.iter().filter(|e| e.kind == "segfault").count(), 1);
    assert_eq!(r.processes[0].state, "killed");
}

#[test]
fn out_of_memory_falls_back_to_4k() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always","fail_page_alloc/min_order":9},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"write","region":"p","value":3},
        {"op":"read","region":"p","expect":3},
        {"op":"snapshot","label":"s"},
    ]}));
    let s = snap(&r, "s");
    assert_eq!(vm(s, "thp_fault_fallback"), 2);
    assert_eq!(vm(s, "thp_fault_alloc"), 0);
    assert_eq!(p1(s).rss_anon, 4096 + 4);
    assert_eq!(r.check.expect_failures, 0);
}

#[test]
fn small_machine_falls_back_and_oom_kills() {
    let r = run(json!({"machine":{"memory":"16M"},"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"64M","align":"2M"},
        {"op":"write","region":"p"},
    ]}));
    assert!(r.vmstat.get("thp_fault_fallback").unwrap() > 0);
    assert!(r.events.iter().any(|e| e.kind == "oom-kill"), "{:?}", r.events);
}

#[test]
fn every_kth_allocation_failing_loses_nothing() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always","fail_page_alloc/every":7},"program":[
        {"op":"mmap","name":"p","size":"8M","align":"2M"},
        {"op":"write","region":"p","stride":"64K","value":5},
        {"op":"fork","program":[{"op":"write","region":"p","stride":"128K","value":6},{"op":"read","region":"p","stride":"64K"}]},
        {"op":"wait"},
        {"op":"read","region":"p","stride":"64K","expect":5},
    ]}));
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
    assert!(r.vmstat.get("mmsim_fail_page_alloc_injected").unwrap() > 0);
}

#[test]
fn mprotect_in_the_middle_of_a_thp_splits_only_that_pmd() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"write","region":"p","value":4},
        {"op":"snapshot","label":"written"},
        {"op":"mprotect","region":"p","offset":"1M","length":"4K","prot":"r"},
        {"op":"snapshot","label":"protected"},
        {"op":"write","region":"p","offset":"0","length":"1M","value":5},
        {"op":"write","region":"p","offset":"2M","value":5},
        {"op":"read","region":"p","offset":"1M","length":"4K","expect":4},
        {"op":"snapshot","label":"rewritten"},
    ]}));
    let (w, p, rw) = (snap(&r, "written"), snap(&r, "protected"), snap(&r, "rewritten"));
    assert_eq!(vm(p, "thp_split_pmd"), 1);
    assert_eq!(mi(p, "AnonHugePages"), 2048);
    assert_eq!(p1(p).rss_anon, p1(w).rss_anon, "the split keeps every page mapped");
    assert_eq!(p1(rw).minflt, p1(p).minflt, "exclusive pages stay writable across the split: no faults");
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

#[test]
fn dontneed_part_of_a_thp_zaps_4k_and_keeps_the_vma() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"2M","align":"2M"},
        {"op":"write","region":"p","value":4},
        {"op":"madvise","region":"p","offset":"8K","length":"8K","advice":"dontneed"},
        {"op":"snapshot","label":"s"},
        {"op":"read","region":"p","offset":"8K","length":"8K","expect":0},
        {"op":"read","region":"p","offset":"16K","length":"4K","expect":4},
    ]}));
    let s = snap(&r, "s");
    assert_eq!(vm(s, "thp_split_pmd"), 1);
    assert_eq!(p1(s).rss_anon, 4 + 2048 - 8);
    assert_eq!(vm(s, "thp_deferred_split_page"), 1);
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

#[test]
fn thp_cow_after_fork_splits_the_child_pmd_and_copies_4k() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"write","region":"p","value":1},
        {"op":"snapshot","label":"parent"},
        {"op":"fork","program":[
            {"op":"snapshot","label":"child-start"},
            {"op":"write","region":"p","length":1,"value":2},
            {"op":"snapshot","label":"child-wrote"},
            {"op":"read","region":"p","length":1,"expect":2},
            {"op":"read","region":"p","offset":"4K","expect":1}]},
        {"op":"wait"},
        {"op":"read","region":"p","expect":1},
    ]}));
    let (s, c) = (snap(&r, "child-start"), snap(&r, "child-wrote"));
    let child = |x: &Snapshot| x.processes[1].clone();
    assert_eq!(child(s).anon_huge_pages, 4096);
    assert_eq!(child(c).minflt - child(s).minflt, 1);
    assert_eq!(vm(c, "thp_split_pmd") - vm(s, "thp_split_pmd"), 1);
    assert_eq!(vm(c, "thp_fault_alloc") - vm(s, "thp_fault_alloc"), 0, "no new THP: the pte path copies 4 KiB");
    assert_eq!(child(c).anon_huge_pages, 2048);
    assert_eq!(child(c).rss_anon, child(s).rss_anon);
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

#[test]
fn shared_memory_fault_around_maps_cached_pages_in_the_child() {
    let r = run(json!({"program":[
        {"op":"mmap","name":"s","size":"16M","align":"64K","flags":["shared","anonymous"]},
        {"op":"read","region":"s"},
        {"op":"snapshot","label":"parent"},
        {"op":"fork","program":[{"op":"read","region":"s"},{"op":"snapshot","label":"child"}]},
        {"op":"wait"},
    ]}));
    let (p, c) = (snap(&r, "parent"), snap(&r, "child"));
    assert_eq!(p1(p).minflt, 4096, "every page is allocated by its own fault");
    assert_eq!(p1(p).rss_shmem, 16384);
    assert_eq!(mi(p, "Shmem"), 16384);
    // The child's page tables are not copied (no anon_vma); it refaults, and each fault maps
    // the 16 cached pages of its 64 KiB window.
    assert_eq!(c.processes[1].minflt, 4096 / 16);
    assert_eq!(c.processes[1].rss_shmem, 16384);
}

#[test]
fn fork_of_a_read_only_touched_region_does_not_copy_zero_ptes() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":[
        {"op":"mmap","name":"p","size":"16M"},
        {"op":"read","region":"p"},
        {"op":"fork","program":[{"op":"read","region":"p"},{"op":"snapshot","label":"no-anon-vma"}]},
        {"op":"wait"},
        {"op":"write","region":"p","length":1},
        {"op":"fork","program":[{"op":"read","region":"p"},{"op":"snapshot","label":"anon-vma"}]},
        {"op":"wait"},
    ]}));
    assert_eq!(snap(&r, "no-anon-vma").processes[1].minflt, 4096, "vma_needs_copy: refault everything");
    assert_eq!(snap(&r, "anon-vma").processes[2].minflt, 0, "page tables copied with the anon_vma");
}

/// Linux 6.18 on the build machine: one page in each of 64 regions 1 GiB apart costs a PTE
/// table and a PMD table each (VmPTE +512 kB); 64 adjacent 2 MiB slots share one PMD table
/// (+260 kB); 64 pages in one 2 MiB range one PTE table (+4 kB).
#[test]
fn page_table_accounting_sparse_and_dense() {
    let base: u64 = 0x7f80_0000_0000;
    let mut prog = vec![json!({"op":"snapshot","label":"start"})];
    for i in 0..64u64 {
        prog.push(json!({"op":"mmap","name":format!("s{i}"),"size":"2M","addr":base + (i << 30),"fixed":true}));
        prog.push(json!({"op":"write","region":format!("s{i}"),"length":1}));
    }
    prog.push(json!({"op":"snapshot","label":"sparse"}));
    let dense = base + (100u64 << 30);
    for i in 0..64u64 {
        prog.push(json!({"op":"mmap","name":format!("d{i}"),"size":"2M","addr":dense + (i << 21),"fixed":true}));
        prog.push(json!({"op":"write","region":format!("d{i}"),"length":1}));
    }
    prog.push(json!({"op":"snapshot","label":"dense"}));
    prog.push(json!({"op":"mmap","name":"one","size":"2M","addr":base + (200u64 << 30),"fixed":true}));
    prog.push(json!({"op":"write","region":"one","stride":4096,"length":"256K"}));
    prog.push(json!({"op":"snapshot","label":"one"}));
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"never"},"program":prog}));
    let (s0, s1, s2, s3) = (snap(&r, "start"), snap(&r, "sparse"), snap(&r, "dense"), snap(&r, "one"));
    assert_eq!(p1(s1).vm_pte - p1(s0).vm_pte, 512);
    assert_eq!(p1(s2).vm_pte - p1(s1).vm_pte, 260);
    assert_eq!(p1(s3).vm_pte - p1(s2).vm_pte, 8, "a new PMD table (new 1 GiB slot) and one PTE table");
}

/// Linux 6.18: a read fault that maps the huge zero page prepares the anon_vma, so fork copies
/// the huge zero pmds and the child takes no faults reading the region.
#[test]
fn fork_copies_huge_zero_pmds() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"16M"},
        {"op":"read","region":"p"},
        {"op":"snapshot","label":"parent"},
        {"op":"fork","program":[{"op":"read","region":"p","expect":0},{"op":"snapshot","label":"child"}]},
        {"op":"wait"},
    ]}));
    assert_eq!(p1(snap(&r, "parent")).minflt, 8);
    assert_eq!(snap(&r, "child").processes[1].minflt, 0);
    assert_eq!(snap(&r, "child").processes[1].vm_pte, p1(snap(&r, "parent")).vm_pte, "deposited tables copied");
}

fn with_knobs(mut w: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    for (k, v) in extra.as_object().unwrap() {
        w["knobs"][k] = v.clone();
    }
    w
}

/// Seed 000 with the seed's write fallback: the THP allocation fails, so the deposited table
/// becomes a PTE table with one new page and 511 zero-page entries; no pmd split is counted.
#[test]
fn hzp_write_with_the_seed_fallback() {
    let mut w = with_knobs(
        hzp_rss(json!({"transparent_hugepage/enabled":"always"}), false),
        json!({"transparent_hugepage/huge_zero_page_wp":"seed"}),
    );
    let prog = w["program"].as_array_mut().unwrap();
    let idx = prog.iter().position(|o| o["label"] == "after-read").unwrap();
    prog.insert(idx + 1, json!({"op":"set","knob":"fail_page_alloc/min_order","value":9}));
    prog.push(json!({"op":"read","region":"p","length":"2M","stride":4096}));
    prog.push(json!({"op":"snapshot","label":"reread"}));
    let r = run(w);
    let (a, w, rr) = (snap(&r, "after-read"), snap(&r, "after-write"), snap(&r, "reread"));
    assert_eq!(vm(w, "thp_fault_fallback") - vm(a, "thp_fault_fallback"), 1);
    assert_eq!(vm(w, "thp_split_pmd") - vm(a, "thp_split_pmd"), 0);
    assert_eq!(p1(w).rss_anon - p1(a).rss_anon, 4, "one 4 KiB page");
    assert_eq!(p1(w).vm_pte, p1(a).vm_pte, "the deposited table became the PTE table");
    assert_eq!(p1(rr).minflt, p1(w).minflt, "the other 511 entries map the zero page already");
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

/// The virtual huge zero page: the same faults and VmPTE as the huge zero page, no 2 MiB page
/// allocated, and a write replaces the 2 MiB range by a THP.
#[test]
fn virtual_huge_zero_page() {
    let w = with_knobs(
        hzp_rss(json!({"transparent_hugepage/enabled":"always"}), false),
        json!({"transparent_hugepage/huge_zero_page":"vhzp"}),
    );
    let r = run(w);
    let (b, a, w) = (snap(&r, "before"), snap(&r, "after-read"), snap(&r, "after-write"));
    assert_eq!(p1(a).minflt - p1(b).minflt, 100);
    assert_eq!(p1(a).rss_anon - p1(b).rss_anon, 0);
    assert_eq!(p1(a).vm_pte - p1(b).vm_pte, 400);
    assert_eq!(vm(a, "thp_zero_page_alloc"), 0, "no 2 MiB page of zeros");
    assert_eq!(vm(w, "thp_fault_alloc") - vm(a, "thp_fault_alloc"), 1);
    assert_eq!(mi(w, "AnonHugePages"), 2048);
    assert_eq!(p1(w).vm_pte, p1(a).vm_pte, "the table became the THP's deposited table");
    // The reads were 4 KiB translations: one TLB miss per page, not per 2 MiB.
    assert_eq!(a.perf.get("dTLB-load-misses").unwrap() - b.perf.get("dTLB-load-misses").unwrap(), 51200.0);
}

/// mprotect of one 4 KiB page inside a huge zero pmd splits it: 512 ptes to the 4 KiB zero
/// page, the protected one read-only; reads still zero.
#[test]
fn hzp_split_by_mprotect_maps_the_4k_zero_page() {
    let w = json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"mmap","name":"p","size":"2M","align":"2M"},
        {"op":"read","region":"p","expect":0},
        {"op":"mprotect","region":"p","offset":"1M","length":"4K","prot":"r"},
        {"op":"snapshot","label":"split"},
        {"op":"read","region":"p","stride":512,"expect":0},
    ]});
    let spec = parse_workload(&w.to_string()).unwrap();
    let opts = RunOptions { check: true, invariants_each_op: true, ..Default::default() };
    let r = run_with(&spec, &[], &opts).unwrap();
    assert_eq!(vm(snap(&r, "split"), "thp_split_pmd"), 1);
    assert_eq!(r.check.mismatches + r.check.expect_failures, 0, "{:?}", r.events);
    // Look at the table itself.
    let mut k = crate::kernel::Kernel::new(
        64 << 20,
        {
            let mut kn = crate::kernel::knobs::Knobs::default();
            kn.set("transparent_hugepage/enabled", "always").unwrap();
            kn
        },
        crate::units::Geometry::X86_64,
    );
    let mm = k.exec_mm().unwrap();
    let a = k
        .do_mmap(mm, crate::kernel::mmap::MmapArgs { len: 2 << 20, prot: 3, align: 2 << 20, ..Default::default() })
        .unwrap();
    assert_eq!(k.handle_mm_fault(mm, a, false), 0);
    k.do_mprotect(mm, a + (1 << 20), 4096, crate::kernel::mm::vm::READ).unwrap();
    let slot = k.pte_slot(mm, a).unwrap();
    let zero_ptes = (0..512).filter(|&i| k.entry(slot.table, i).pfn() == k.zero_pfn).count();
    assert_eq!(zero_ptes, 512);
    assert!(!k.entry(slot.table, 256).write());
    k.check_invariants().unwrap();
}

/// The refcount policies: `global` holds one reference per huge zero pmd, `per_mm` one per mm
/// that ever used it; both plus the shrinker's. Checked here by hand (and by the invariant
/// check after every operation in every test).
#[test]
fn huge_zero_refcount_policies() {
    for (rc, want_after_fork) in [("global", 8 + 8 + 1), ("per_mm", 2 + 1)] {
        let mut knobs = crate::kernel::knobs::Knobs::default();
        knobs.set("transparent_hugepage/enabled", "always").unwrap();
        knobs.set("transparent_hugepage/hzp_refcount", rc).unwrap();
        let mut k = crate::kernel::Kernel::new(256 << 20, knobs, crate::units::Geometry::X86_64);
        let mm = k.exec_mm().unwrap();
        let a = k
            .do_mmap(mm, crate::kernel::mmap::MmapArgs { len: 16 << 20, prot: 3, align: 2 << 20, ..Default::default() })
            .unwrap();
        for i in 0..8u64 {
            assert_eq!(k.handle_mm_fault(mm, a + (i << 21), false), 0);
        }
        let child = k.dup_mm(mm).unwrap();
        assert_eq!(k.huge_zero.refcount, want_after_fork, "{rc}");
        k.check_invariants().unwrap();
        // Unmapping half of the parent's: global drops 4 references, per_mm none.
        k.do_munmap(mm, a, 8 << 20).unwrap();
        let want = if rc == "global" { want_after_fork - 4 } else { want_after_fork };
        assert_eq!(k.huge_zero.refcount, want, "{rc}");
        k.check_invariants().unwrap();
        // The shrinker cannot free it while mapped.
        k.shrink_huge_zero_folio();
        assert!(k.huge_zero.pfn.is_some());
        k.exit_mmap(child);
        k.exit_mmap(mm);
        assert_eq!(k.huge_zero.refcount, 1, "{rc}: only the shrinker's reference");
        k.shrink_huge_zero_folio();
        assert!(k.huge_zero.pfn.is_none(), "freed once unused");
        k.check_invariants().unwrap();
        assert!(k.all_free());
    }
}

/// Under memory pressure the shrinker frees the unused huge zero page; the next read fault
/// allocates it again, and thp_zero_page_alloc counts both allocations.
#[test]
fn shrinker_frees_the_unused_huge_zero_page_and_it_comes_back() {
    let r = run(json!({"machine":{"memory":"24M"},"knobs":{"transparent_hugepage/enabled":"always"},"program":[
        {"op":"fork","program":[
            {"op":"mmap","name":"z","size":"2M","align":"2M"},
            {"op":"read","region":"z","expect":0}]},
        {"op":"wait"},
        {"op":"fork","program":[
            {"op":"mmap","name":"big","size":"32M"},
            {"op":"write","region":"big"}]},
        {"op":"wait"},
        {"op":"mmap","name":"z2","size":"2M","align":"2M"},
        {"op":"read","region":"z2","expect":0},
        {"op":"snapshot","label":"s"},
    ]}));
    assert_eq!(vm(snap(&r, "s"), "thp_zero_page_alloc"), 2, "{:?}", r.events);
    assert!(
        r.events.iter().any(|e| e.kind == "oom-kill" && e.pid == 3),
        "the writer ran out of memory: {:?}",
        r.events
    );
}

/// The boot and persistent policies allocate the huge zero page at boot and never free it.
#[test]
fn boot_allocated_huge_zero_page() {
    for alloc in ["boot", "persistent", "lazy"] {
        let w = with_knobs(
            hzp_rss(json!({"transparent_hugepage/enabled":"always"}), false),
            json!({"transparent_hugepage/huge_zero_page_alloc":alloc}),
        );
        let r = run(w);
        let before = r.baseline.vmstat.get("thp_zero_page_alloc").unwrap();
        assert_eq!(before, if alloc == "lazy" { 0 } else { 1 }, "{alloc}");
        assert_eq!(vm(snap(&r, "after-read"), "thp_zero_page_alloc"), 1, "{alloc}");
        assert_eq!(p1(snap(&r, "after-read")).minflt - p1(snap(&r, "before")).minflt, 100);
    }
}

/// Found by the property test: mprotect over a hole changes only the vmas before the hole
/// (the reference model once changed the vmas after it too).
#[test]
fn regression_mprotect_across_a_hole() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always","transparent_hugepage/use_zero_page":0,
        "fail_page_alloc/min_order":"9"},"machine":{"memory":"20M"},"program":[
        {"flags":["shared","anonymous"],"name":"r0","op":"mmap","size":4096},
        {"flags":["private","anonymous"],"name":"r1","op":"mmap","size":4096},
        {"align":"2M","flags":["shared","anonymous"],"name":"r2","op":"mmap","size":4096},
        {"length":2461696,"offset":0,"op":"mprotect","prot":"r","region":"r0"},
        {"length":2461696,"offset":0,"op":"mprotect","prot":"rw","region":"r2"},
        {"length":2461696,"offset":0,"op":"write","region":"r0","stride":4096,"value":1},
        {"op":"read","region":"r0","stride":1}]}));
    assert_eq!(r.events.iter().filter(|e| e.kind == "segfault").count(), 1, "r0 stays read-only");
}

/// `do_wp_page` reuses a page whose only reference is the writer's (`wp_can_reuse_anon_folio`)
/// and copies one still shared with another process.
#[test]
fn write_fault_after_fork_reuses_a_sole_page_and_copies_a_shared_one() {
    // The child writes first (its pages are shared: copy), exits; the parent's pages then have
    // one reference each: its write faults reuse them in place.
    let r = run(json!({"program":[
        {"op":"mmap","name":"p","size":"32K"},
        {"op":"write","region":"p","value":1},
        {"op":"snapshot","label":"before-fork"},
        {"op":"fork","program":[{"op":"write","region":"p","value":2},{"op":"read","region":"p","expect":2}]},
        {"op":"wait"},
        {"op":"snapshot","label":"child-done"},
        {"op":"write","region":"p","value":3},
        {"op":"read","region":"p","expect":3},
        {"op":"snapshot","label":"parent-wrote"},
    ]}));
    let (b, c, p) = (snap(&r, "before-fork"), snap(&r, "child-done"), snap(&r, "parent-wrote"));
    assert_eq!(vm(c, "mmsim_cow_copy") - vm(b, "mmsim_cow_copy"), 8, "the child copies its 8 shared pages");
    assert_eq!(vm(c, "mmsim_cow_reuse") - vm(b, "mmsim_cow_reuse"), 0);
    assert_eq!(vm(p, "mmsim_cow_reuse") - vm(c, "mmsim_cow_reuse"), 8, "the parent reuses its 8 pages");
    assert_eq!(vm(p, "mmsim_cow_copy") - vm(c, "mmsim_cow_copy"), 0);
    assert_eq!(p1(p).minflt - p1(c).minflt, 8, "one write-protect fault per page");
    assert_eq!(p1(p).rss_anon, p1(b).rss_anon, "reuse allocates nothing");
    assert_eq!(mi(p, "MemFree"), mi(c, "MemFree"));
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

/// THP eligibility: `always` except under MADV_NOHUGEPAGE; `madvise` only under
/// MADV_HUGEPAGE; `never` never (`thp_vma_allowable_order`).
#[test]
fn thp_enabled_modes_and_madvise_flags_gate_huge_faults() {
    let cases = [
        ("always", None, 2),
        ("always", Some("nohugepage"), 0),
        ("always", Some("hugepage"), 2),
        ("madvise", None, 0),
        ("madvise", Some("hugepage"), 2),
        ("madvise", Some("nohugepage"), 0),
        ("never", Some("hugepage"), 0),
    ];
    for (mode, advice, thps) in cases {
        let mut prog =
            vec![json!({"op":"mmap","name":"p","size":"4M","align":"2M"}), json!({"op":"snapshot","label":"start"})];
        if let Some(a) = advice {
            prog.push(json!({"op":"madvise","region":"p","advice":a}));
        }
        prog.push(json!({"op":"write","region":"p","stride":4096}));
        prog.push(json!({"op":"snapshot","label":"end"}));
        let r = run(json!({"knobs":{"transparent_hugepage/enabled":mode},"program":prog}));
        let (b, s) = (snap(&r, "start"), snap(&r, "end"));
        let what = format!("enabled={mode} advice={advice:?}");
        assert_eq!(vm(s, "thp_fault_alloc"), thps, "{what}");
        assert_eq!(mi(s, "AnonHugePages"), thps * 2048, "{what}");
        assert_eq!(p1(s).minflt - p1(b).minflt, if thps == 2 { 2 } else { 1024 }, "{what}");
        assert_eq!(p1(s).rss_anon - p1(b).rss_anon, 4096, "{what}: 4 MiB either way");
        assert_eq!(vm(s, "thp_fault_fallback"), 0, "{what}: not eligible is not a fallback");
    }
}

/// A read of unmapped memory kills only the reader (SIGSEGV); its parent and siblings go on,
/// and the shared region still carries what they wrote.
#[test]
fn a_segfault_kills_one_process_the_others_go_on() {
    let r = run(json!({"program":[
        {"op":"mmap","name":"s","size":"16K","flags":["shared","anonymous"]},
        {"op":"mmap","name":"gone","size":"4K"},
        {"op":"munmap","region":"gone"},
        {"op":"fork","program":[{"op":"write","region":"s","length":1,"value":7}]},
        {"op":"fork","program":[{"op":"read","region":"gone"},{"op":"write","region":"s","offset":"4K","value":8}]},
        {"op":"fork","program":[{"op":"write","region":"s","offset":"8K","length":1,"value":9}]},
        {"op":"wait"},
        {"op":"read","region":"s","length":1,"expect":7},
        {"op":"read","region":"s","offset":"4K","length":1,"expect":0},
        {"op":"read","region":"s","offset":"8K","length":1,"expect":9},
        {"op":"snapshot","label":"end"},
    ]}));
    let states: Vec<_> = snap(&r, "end").processes.iter().map(|p| p.state.as_str()).collect();
    assert_eq!(states, ["running", "exited", "killed", "exited"]);
    let segv: Vec<_> = r.events.iter().filter(|e| e.kind == "segfault").map(|e| e.pid).collect();
    assert_eq!(segv, [3]);
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

/// `compare` with `expect: false`: ranges that differ satisfy it; equal ranges fail it.
#[test]
fn compare_expects_difference_or_equality() {
    let prog = |v: u8, expect: bool| {
        json!({"program":[
            {"op":"mmap","name":"a","size":"64K"},
            {"op":"mmap","name":"b","size":"64K"},
            {"op":"write","region":"a","offset":"60K","length":1,"value":v},
            {"op":"compare","a":{"region":"a"},"b":{"region":"b"},"length":"64K","expect":expect},
        ]})
    };
    assert_eq!(run(prog(5, false)).check.expect_failures, 0, "a differs from b");
    assert_eq!(run(prog(0, true)).check.expect_failures, 0, "writing zero keeps them equal");
    assert_eq!(run(prog(5, true)).check.expect_failures, 1);
    assert_eq!(run(prog(0, false)).check.expect_failures, 1);
}

/// The huge zero folio cannot be allocated: thp_zero_page_alloc_failed and thp_fault_fallback
/// once per 2 MiB range, then the PTE path maps the 4 KiB zero page (do_huge_pmd_anonymous_page).
#[test]
fn huge_zero_page_allocation_failure_falls_back_to_the_4k_zero_page() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always","fail_page_alloc/min_order":9},"program":[
        {"op":"mmap","name":"p","size":"4M","align":"2M"},
        {"op":"snapshot","label":"start"},
        {"op":"read","region":"p","stride":4096,"expect":0},
        {"op":"snapshot","label":"read"},
    ]}));
    let (b, s) = (snap(&r, "start"), snap(&r, "read"));
    assert_eq!(vm(s, "thp_zero_page_alloc_failed"), 2);
    assert_eq!(vm(s, "thp_zero_page_alloc"), 0);
    assert_eq!(vm(s, "thp_fault_fallback"), 2);
    assert_eq!(p1(s).minflt - p1(b).minflt, 1024, "one fault per 4 KiB page");
    assert_eq!(p1(s).rss_anon - p1(b).rss_anon, 0, "the 4 KiB zero page is not counted");
    assert_eq!(vm(s, "nr_page_table_pages") - vm(b, "nr_page_table_pages"), 2, "2 PTE tables, nothing deposited");
}

/// munmap and MADV_DONTNEED of 4 KiB inside a huge zero pmd split it (thp_split_pmd) into
/// zero-page ptes, drop that one entry, and the rest reads zero without faulting.
#[test]
fn munmap_and_dontneed_inside_a_huge_zero_pmd_split_it() {
    for (op, refault) in [
        (json!({"op":"munmap","region":"p","offset":"1M","length":"4K"}), 0),
        (json!({"op":"madvise","region":"p","offset":"1M","length":"4K","advice":"dontneed"}), 1),
    ] {
        let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always"},"program":[
            {"op":"mmap","name":"p","size":"2M","align":"2M"},
            {"op":"read","region":"p","stride":4096,"expect":0},
            {"op":"snapshot","label":"read"},
            op,
            {"op":"snapshot","label":"split"},
            {"op":"read","region":"p","length":"1M","stride":4096,"expect":0},
            {"op":"read","region":"p","offset":"1028K","stride":4096,"expect":0},
            {"op":"snapshot","label":"reread"},
            {"op":"read","region":"p","offset":"1M","length":1},
            {"op":"snapshot","label":"hole"},
        ]}));
        let (a, s, rr) = (snap(&r, "read"), snap(&r, "split"), snap(&r, "reread"));
        assert_eq!(vm(s, "thp_split_pmd") - vm(a, "thp_split_pmd"), 1, "{op}");
        assert_eq!(p1(s).vm_pte, p1(a).vm_pte, "{op}: the deposited table is the PTE table now");
        assert_eq!(p1(rr).minflt, p1(s).minflt, "{op}: 511 zero-page ptes, no faults");
        assert_eq!(p1(s).rss_anon, p1(a).rss_anon);
        if refault == 1 {
            assert_eq!(p1(snap(&r, "hole")).minflt - p1(rr).minflt, 1, "the zapped entry faults again");
        } else {
            assert_eq!(r.events.iter().filter(|e| e.kind == "segfault").count(), 1, "the hole is unmapped");
        }
    }
}

/// A write to a virtual huge zero pmd when no THP can be had: the mark goes and the pte path
/// copies one 4 KiB page; the other 511 entries stay on the zero page.
#[test]
fn virtual_huge_zero_page_write_without_a_thp_copies_4k() {
    let r = run(json!({"knobs":{"transparent_hugepage/enabled":"always",
                                 "transparent_hugepage/huge_zero_page":"vhzp"},"program":[
        {"op":"mmap","name":"p","size":"2M","align":"2M"},
        {"op":"read","region":"p","stride":4096,"expect":0},
        {"op":"snapshot","label":"read"},
        {"op":"set","knob":"fail_page_alloc/min_order","value":9},
        {"op":"write","region":"p","offset":"8K","length":1,"value":4},
        {"op":"snapshot","label":"written"},
        {"op":"read","region":"p","stride":4096,"length":"8K","expect":0},
        {"op":"read","region":"p","offset":"12K","stride":4096,"expect":0},
        {"op":"read","region":"p","offset":"8K","length":1,"expect":4},
        {"op":"snapshot","label":"reread"},
    ]}));
    let (a, w, rr) = (snap(&r, "read"), snap(&r, "written"), snap(&r, "reread"));
    assert_eq!(p1(a).minflt, 1, "one fault installs the whole table");
    assert_eq!(vm(w, "thp_fault_alloc"), 0);
    assert_eq!(p1(w).rss_anon - p1(a).rss_anon, 4);
    assert_eq!(p1(w).vm_pte, p1(a).vm_pte);
    assert_eq!(p1(rr).minflt, p1(w).minflt);
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
}

/// Found by the differential fuzzer (the reference model's check that the simulator does not
/// allow an access POSIX forbids): a fork that fails for want of memory has already
/// write-protected some of the parent's ptes; without dup_mmap's flush_tlb_mm on the failure
/// path, the parent's TLB kept the writable translation, a later mprotect to read-only changed
/// no pte (already read-only) so flushed nothing, and a write went through.
#[test]
fn regression_failed_fork_flushes_the_parents_tlb() {
    let w = json!({"knobs":{"fail_page_alloc/every":5,"transparent_hugepage/enabled":"always"},
        "machine":{"cpus":4,"memory":"20M"},"program":[
        {"op":"mmap","name":"r0","size":4096},
        {"op":"mmap","name":"r1","size":4096,"align":"2M"},
        {"op":"mmap","name":"r2","size":2101248,"align":"2M","flags":["shared","anonymous"]},
        {"op":"write","region":"r0"},
        {"op":"fork","program":[]},
        {"op":"fork","program":[]},
        {"op":"mprotect","region":"r0","prot":"r"},
        {"op":"write","region":"r0","offset":2254,"length":1},
    ]});
    let spec = parse_workload(&w.to_string()).unwrap();
    let r = run_with(&spec, &[], &RunOptions { check: true, invariants_each_op: true, ..Default::default() }).unwrap();
    assert!(r.events.iter().any(|e| e.kind == "fork-failed"), "the scenario needs a failed fork: {:?}", r.events);
    assert_eq!(r.check.mismatches, 0, "{:?}", r.events);
    assert_eq!(r.events.iter().filter(|e| e.kind == "segfault").count(), 1, "the write to read-only r0 faults");
}

/// ia64-altix runs 16 KiB pages (memory.page_size): one fault per 16 KiB, RSS in 16 KiB
/// pages, 2048-entry tables (a PTE table maps 32 MiB), COW of 16 KiB; no THP (a PMD folio,
/// order 11, is above MAX_ORDER), whatever the knob says.
#[test]
fn sixteen_kib_pages_fault_count_and_map_in_their_own_unit() {
    let r = run(json!({"machine": {"profile": "ia64-altix", "memory": "256M", "cpus": 1},
        "knobs": {"transparent_hugepage/enabled": "always"},
        "program": [
        {"op":"snapshot","label":"before"},
        {"op":"mmap","name":"p","size":"64M","align":"32M"},
        {"op":"write","region":"p","stride":16384},
        {"op":"snapshot","label":"written"},
        {"op":"write","region":"p","stride":4096,"value":2},
        {"op":"fork","program":[
            {"op":"write","region":"p","length":"1M","value":3},
            {"op":"read","region":"p","offset":"1M","length":"1M","expect":2},
            {"op":"snapshot","label":"child"}]},
        {"op":"wait"},
        {"op":"read","region":"p","length":"1M","expect":2},
        {"op":"snapshot","label":"end"}]}));
    let (before, written, child, end) = (snap(&r, "before"), snap(&r, "written"), snap(&r, "child"), snap(&r, "end"));
    // The stack's one page; its PUD, PMD and PTE tables (VmPTE leaves out the PGD).
    assert_eq!((p1(before).rss_anon, p1(before).vm_pte, mi(before, "PageTables")), (16, 3 * 16, 4 * 16));
    assert_eq!(vm(written, "pgfault"), 64 * 1024 / 16, "one fault per 16 KiB page");
    assert_eq!(p1(written).rss_anon, 16 + 64 * 1024);
    assert_eq!(p1(written).vm_pte, 3 * 16 + 2 * 16, "two PTE tables map the 32 MiB-aligned 64 MiB");
    assert_eq!((vm(written, "thp_fault_alloc"), mi(written, "AnonHugePages")), (0, 0), "no THP on ia64");
    assert_eq!(vm(child, "pgfault") - vm(written, "pgfault"), 1024 / 16, "the child's COW of 1 MiB");
    assert_eq!(mi(child, "AnonPages") - mi(written, "AnonPages"), 1024);
    assert_eq!(r.check.expect_failures, 0);
    assert_eq!(mi(end, "PageTables"), mi(written, "PageTables"));
}

/// A write with a block (pft -c): per page step, `block` bytes every `block_stride`, clamped
/// to the page; the bytes between blocks stay as they were (checked by the reference model).
#[test]
fn a_blocked_write_touches_its_lines_of_each_page() {
    let r = run(json!({"program": [
        {"op":"mmap","name":"p","size":"64K"},
        {"op":"write","region":"p","stride":8192,"block":256,"block_stride":128,"value":7},
        {"op":"read","region":"p","offset":0,"length":"64K","stride":8192,"expect":7},
        {"op":"read","region":"p","offset":128,"length":"64K","stride":8192,"expect":7},
        {"op":"read","region":"p","offset":256,"length":"64K","stride":8192,"expect":0},
        {"op":"read","region":"p","offset":4096,"length":"60K","stride":8192,"expect":0},
        {"op":"write","region":"p","offset":"60K","stride":4096,"block":"8K","block_stride":2048,"value":9},
        {"op":"read","region":"p","offset":"62K","length":"2K","stride":2048,"expect":9},
        {"op":"snapshot","label":"end"}]}));
    let end = snap(&r, "end");
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
    // Every other page written (8 faults, 2 stores each); the reads of the others map the zero
    // page (8 faults); the last write's block stops at its page's end (2 stores, 1 COW fault).
    assert_eq!(p1(end).perf.get("dTLB-stores"), Some(8.0 * 2.0 + 2.0));
    assert_eq!(vm(end, "pgfault"), 8 + 8 + 1);
}

/// `pattern: "random"`: `count` accesses to slots drawn uniformly, the same ones every time
/// for a seed: a write faults once per distinct page it lands on, and a random read of the
/// same slots finds the bytes written (checked by `expect` and the reference model).
#[test]
fn random_accesses_fault_once_per_distinct_page() {
    let (count, seed, pages) = (3000u64, 42u64, 4096u64);
    let mut state = seed;
    let mut touched = std::collections::BTreeSet::new();
    for _ in 0..count {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        touched.insert(((((z ^ (z >> 31)) as u128) * pages as u128) >> 64) as u64);
    }
    let r = run(json!({"knobs": {"transparent_hugepage/enabled": "never"}, "program": [
        {"op":"mmap","name":"p","size":"16M"},
        {"op":"snapshot","label":"before"},
        {"op":"write","region":"p","pattern":"random","count":count,"seed":seed,"value":5},
        {"op":"snapshot","label":"written"},
        {"op":"read","region":"p","pattern":"random","count":count,"seed":seed,"expect":5},
        {"op":"read","region":"p","stride":4096},
        {"op":"snapshot","label":"end"}]}));
    let (before, written, end) = (snap(&r, "before"), snap(&r, "written"), snap(&r, "end"));
    assert_eq!(vm(written, "pgfault") - vm(before, "pgfault"), touched.len() as i64);
    assert_eq!(p1(written).rss_anon - p1(before).rss_anon, 4 * touched.len() as i64);
    assert_eq!(r.check.expect_failures, 0, "{:?}", r.events);
    assert_eq!(vm(end, "pgfault") - vm(written, "pgfault"), (pages - touched.len() as u64) as i64);
    assert_eq!(p1(end).perf.get("dTLB-loads"), Some((count + pages) as f64));
}

/// A replayed store (no bytes known) makes a zero page hold data, so that swap writes it
/// out; a page that holds data keeps it; the shared zero page is never written.
#[test]
fn a_replayed_store_makes_a_page_hold_data() {
    use super::fault::Access;
    use super::syscall::MmapReq;
    use super::uapi::{MapFlags, Prot};
    use super::Kernel;
    const P: u64 = crate::units::x86::PAGE_SIZE;
    let mut k = Kernel::new(64 << 20, super::knobs::Knobs::default(), crate::units::Geometry::X86_64);
    let mm = k.exec_mm().unwrap();
    let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let req = MmapReq { len: 2 * P, prot: Prot::READ | Prot::WRITE, flags, ..Default::default() };
    let a = k.vm_mmap_pgoff(mm, req).ret.unwrap();
    for i in 0..2 {
        k.handle_user_fault(mm, a + i * P, Access::Write);
    }
    let pfn = |k: &Kernel, va: u64| {
        let s = k.pte_slot(mm, va).expect("a pte table");
        k.entry(s.table, s.idx).pfn()
    };
    let (p0, p1) = (pfn(&k, a), pfn(&k, a + P));
    assert!(k.folio_zero_filled(p0), "written by a fault only: zero-filled");
    k.mark_page_written(p0);
    assert!(!k.folio_zero_filled(p0));
    assert_eq!(k.page_content(p0).and_then(|c| c.uniform()), Some(super::REPLAY_STORE_BYTE));
    k.write_page_content(p1, 0, 1, 1, 7);
    k.mark_page_written(p1);
    assert_eq!(k.page_content(p1).map(|c| c.get(0)), Some(7), "data kept");
    let zero = k.zero_pfn;
    k.mark_page_written(zero);
    assert!(k.page_content(zero).is_none(), "the zero page stays zero");
}
