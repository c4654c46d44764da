//! Seed 003's shared page tables: each rule of the thread, the share and unshare paths, the
//! accounting and the first posting's bugs, as workloads run with the reference model and an
//! invariant check (frames, refcounts, rss, VmPTE, share counts, pt_reach) after every system
//! call.

use serde_json::{json, Value};

use super::knobs::Knobs;
use super::mm::vm;
use super::mmap::MmapArgs;
use super::uapi::MremapFlags;
use super::Kernel;
use crate::report::{Report, Snapshot};
use crate::sim::{run_with, RunOptions};
use crate::units::Geometry;
use crate::workload::spec::parse_workload;

const BASE: &str = "0x40000000";

fn run(w: Value, sets: &[(&str, &str)]) -> Report {
    let w = parse_workload(&w.to_string()).expect("valid workload");
    let sets: Vec<(String, String)> = sets.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
    let opts = RunOptions { check: true, invariants_each_op: true, ..Default::default() };
    let r = run_with(&w, &sets, &opts).expect("runs");
    assert!(!r.events.iter().any(|e| e.kind == "invariant"), "{:?}", r.events);
    r
}

fn snap<'a>(r: &'a Report, label: &str) -> &'a Snapshot {
    r.snapshots.iter().find(|s| s.label == label).unwrap_or_else(|| panic!("snapshot {label}"))
}

fn vmstat(s: &Snapshot, name: &str) -> i64 {
    s.vmstat.get(name).unwrap_or(0)
}

/// Page-table pages system-wide at a snapshot (nr_page_table_pages).
fn tables(s: &Snapshot) -> i64 {
    vmstat(s, "nr_page_table_pages")
}

/// A shared 8 MiB region at a fixed, 1 GiB-aligned address written by the parent, then two
/// children each taking a snapshot, reading it all and taking another.
fn fork_readers(extra: Vec<Value>) -> Value {
    let mut child = vec![json!({"op": "snapshot", "label": "c0"}), json!({"op": "read", "region": "s"})];
    child.extend(extra);
    child.push(json!({"op": "snapshot", "label": "c1"}));
    child.push(json!({"op": "sleep", "ms": 20}));
    json!({"machine": {"cpus": 2}, "knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "s", "size": "8M", "addr": BASE, "fixed": true, "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 7},
        {"op": "snapshot", "label": "written"},
        {"op": "fork", "count": 2, "program": child},
        {"op": "sleep", "ms": 10},
        {"op": "snapshot", "label": "both"},
        {"op": "wait"},
        {"op": "read", "region": "s", "expect": 7},
        {"op": "snapshot", "label": "end"}]})
}

/// Fork shares the parent's four PTE tables: the children read 8 MiB without a fault, the
/// machine holds the four tables once, and each child's VmPTE and RssShmem count them and
/// their pages as if they were its own.
#[test]
fn fork_shares_pte_tables_and_children_do_not_fault() {
    let off = run(fork_readers(vec![]), &[]);
    let on = run(fork_readers(vec![]), &[("vm/ptshare", "pte")]);
    let child = |r: &Report, label: &str| {
        let s = r.snapshots.iter().find(|s| s.label == label && s.pid == 2).expect("child snapshot");
        s.processes.iter().find(|p| p.pid == 2).expect("child").clone()
    };
    let (c0, c1) = (child(&off, "c0"), child(&off, "c1"));
    assert_eq!((c1.minflt - c0.minflt, c1.rss_shmem - c0.rss_shmem), (2048, 8192), "Linux: every page refaults");
    let (s0, s1) = (child(&on, "c0"), child(&on, "c1"));
    assert_eq!(s1.minflt - s0.minflt, 0, "shared tables: nothing to fault");
    assert_eq!(s0.rss_shmem, 8192, "the attached tables' pages count in the child's rss at once");
    assert_eq!(s0.vm_pte - c0.vm_pte, 24, "and their four tables in its VmPTE, with its own PUD and PMD tables");
    // While both children run, each has 4 tables for its stack and pgd, and for the region a
    // PUD and a PMD table of its own and, without sharing, four PTE tables.
    let grown = |r: &Report| tables(snap(r, "both")) - tables(snap(r, "written"));
    assert_eq!(grown(&off), 2 * (4 + 2 + 4));
    assert_eq!(grown(&on), 2 * (4 + 2), "the four PTE tables are the parent's");
    assert_eq!(tables(snap(&on, "end")), tables(snap(&off, "end")), "both runs end with the parent's tables");
    assert_eq!(vmstat(snap(&on, "end"), "mmsim_pt_share"), 8);
    assert_eq!(vmstat(snap(&on, "end"), "mmsim_pt_unshare"), 8, "every child leaves them at exit");
}

/// Children forked before the region is touched find each other's tables at fault time
/// through the object's mappings: the second reader takes one fault per 2 MiB table.
#[test]
fn a_fault_attaches_a_siblings_table() {
    let reader = |label: &str| {
        json!({"op": "fork", "program": [
            {"op": "snapshot", "label": format!("{label}0")},
            {"op": "read", "region": "s", "expect": 0},
            {"op": "snapshot", "label": format!("{label}1")},
            {"op": "sleep", "ms": 50}]})
    };
    // The first reader is still there (asleep) when the second reads.
    let w = json!({"knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "s", "size": "8M", "addr": BASE, "fixed": true, "flags": ["shared", "anonymous"]},
        reader("a"), {"op": "sleep", "ms": 20}, reader("b"), {"op": "wait"}]});
    let r = run(w, &[("vm/ptshare", "pte")]);
    let flt = |pid: u32, label: &str| {
        let s = r.snapshots.iter().find(|s| s.label == label).expect(label);
        s.processes.iter().find(|p| p.pid == pid).expect("pid").minflt
    };
    assert_eq!(flt(2, "a1") - flt(2, "a0"), 2048, "the first reader builds the tables");
    assert_eq!(flt(3, "b1") - flt(3, "b0"), 4, "the second attaches one per 2 MiB");
}

/// The sharing rules, each broken in turn: no table is shared.
#[test]
fn each_rule_broken_shows_no_sharing() {
    let shares = |mmap: Value, child_first: Vec<Value>| {
        let mut child = child_first;
        child.push(json!({"op": "read", "region": "s"}));
        let w = json!({"knobs": {"fault_around_bytes": 4096}, "program": [
            mmap, {"op": "read", "region": "s"},
            {"op": "fork", "program": child}, {"op": "wait"}]});
        let r = run(w, &[("vm/ptshare", "pte,pmd")]);
        r.vmstat.get("mmsim_pt_share").unwrap_or(0)
    };
    let region = |size: &str, prot: &str, shared: bool| {
        let flags = if shared { json!(["shared", "anonymous"]) } else { json!(["private", "anonymous"]) };
        json!({"op": "mmap", "name": "s", "size": size, "addr": BASE, "fixed": true, "prot": prot, "flags": flags})
    };
    // Shared read-only and shared-writable mappings share; whole tables only.
    assert_eq!(shares(region("4M", "r", true), vec![]), 2, "read-only shared: both tables");
    assert_eq!(shares(region("4M", "rw", true), vec![]), 2, "shared writable: both tables");
    // The vma must cover the table's whole range: 4 MiB less one page leaves the second
    // table partly covered (vm_end - 1 < base + PMD_SIZE - 1), and it is not shared.
    assert_eq!(shares(region("4092K", "rw", true), vec![]), 1, "the off-by-one at vm_end");
    // A private mapping has no object to find a sibling by (and gets an anon_vma).
    assert_eq!(shares(region("4M", "rw", false), vec![]), 0, "private anonymous");
    // The same object at another address: the child's mremap moves it 2 MiB up.
    let elsewhere = vec![json!({"op": "mremap", "region": "s", "size": "4M", "addr": "0x80000000", "fixed": true})];
    assert_eq!(shares(region("4M", "rw", true), elsewhere), 2, "shared at fork, none after the move");
    // Different flags: the child's read-only view of a shared-writable mapping.
    let ro = vec![json!({"op": "mprotect", "region": "s", "prot": "r"})];
    assert_eq!(shares(region("4M", "rw", true), ro), 2, "shared at fork, not refound with other flags");
}

/// A sibling at the same address whose mapping has another offset of the object, or an
/// anon_vma, is never chosen (kernel-level: mmsim's shmem vmas never get an anon_vma, so that
/// rule is set up by hand).
#[test]
fn a_sibling_must_match_offset_flags_and_have_no_anon_vma() {
    let mut knobs = Knobs::default();
    knobs.ptshare = super::knobs::ptshare::PTE;
    knobs.fault_around_bytes = 4096;
    let mut k = Kernel::new(256 << 20, knobs, Geometry::X86_64);
    let a = k.exec_mm().unwrap();
    let base = 0x4000_0000;
    let args = MmapArgs {
        addr: base,
        len: 4 << 20,
        prot: vm::READ | vm::WRITE,
        shared: true,
        fixed: true,
        ..Default::default()
    };
    k.do_mmap(a, args).unwrap();
    assert_eq!(k.handle_mm_fault(a, base, false), 0);
    let b = k.dup_mm(a).unwrap();
    assert!(k.pt_is_shared(k.pte_slot(a, base).unwrap().table), "shared at fork");
    // b unshares (mprotect to the same flags still unshares: whenever in doubt).
    k.do_mprotect(b, base, 4 << 20, vm::READ | vm::WRITE).unwrap();
    assert!(k.pte_slot(b, base).is_none(), "b refaults");
    k.check_invariants().unwrap();
    // b's vma now has an anon_vma: no sharing at its next fault.
    k.mm_mut(b).vmas.get_mut(&base).unwrap().anon_vma = Some(99);
    assert_eq!(k.handle_mm_fault(b, base, false), 0);
    assert_ne!(k.pte_slot(a, base).unwrap().table, k.pte_slot(b, base).unwrap().table, "anon_vma: its own table");
    k.mm_mut(b).vmas.get_mut(&base).unwrap().anon_vma = None;
    k.check_invariants().unwrap();
    // c maps the object's second 2 MiB at `base` (munmap of the first half, then mremap of
    // the second onto it): the same address, another offset.
    let c = k.dup_mm(a).unwrap();
    k.do_munmap(c, base, 2 << 20).unwrap();
    k.mremap_vrm(c, base + (2 << 20), 2 << 20, 2 << 20, MremapFlags::MAYMOVE | MremapFlags::FIXED, base).unwrap();
    assert_eq!(k.handle_mm_fault(c, base, false), 0);
    assert_ne!(k.pte_slot(a, base).unwrap().table, k.pte_slot(c, base).unwrap().table, "another offset");
    k.check_invariants().unwrap();
}

/// Each operation that changes a shared range unshares it in the process that does it; the
/// other processes keep sharing; the reference model and the invariants hold.
#[test]
fn every_change_unshares() {
    // (op, shares, unshares): 4 tables x 2 children shared at fork, each left once, at the
    // op or at exit. A split at 2M + 4K leaves [2M, 4M) in no single vma, so the refault
    // there builds a table of its own; after MADV_DONTNEED (no split) and after mremap's
    // shrink to 6M the refault of [0, 4M) finds the parent's tables again.
    let ops = [
        (json!({"op": "munmap", "region": "s", "offset": "2M", "length": "4K"}), 8, 8),
        (json!({"op": "mprotect", "region": "s", "prot": "r", "offset": "2M", "length": "4K"}), 8, 8),
        (json!({"op": "madvise", "region": "s", "advice": "dontneed", "offset": "2M", "length": "4K"}), 10, 10),
        (json!({"op": "madvise", "region": "s", "advice": "hugepage", "offset": "2M", "length": "4K"}), 8, 8),
        (json!({"op": "mlock", "region": "s", "offset": "2M", "length": "4K"}), 8, 8),
        (json!({"op": "mremap", "region": "s", "size": "6M"}), 12, 12),
    ];
    for (op, shares, unshares) in ops {
        let read = json!({"op": "read", "region": "s", "length": "4M", "expect": 7});
        let r = run(fork_readers(vec![op.clone(), read]), &[("vm/ptshare", "pte")]);
        let end = snap(&r, "end");
        assert_eq!(vmstat(end, "mmsim_pt_share"), shares, "{op}");
        assert_eq!(vmstat(end, "mmsim_pt_unshare"), unshares, "{op}");
        assert_eq!((r.check.mismatches, r.check.expect_failures), (0, 0), "{op}: {:?}", r.events);
    }
}

/// PMD tables: a region covering a whole 1 GiB range shares its PMD table, and the PTE tables
/// under it come with it.
#[test]
fn pmd_tables_are_shared_with_what_hangs_below() {
    let w = json!({"knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "s", "size": "1G", "addr": BASE, "fixed": true, "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "stride": "2M"},
        {"op": "snapshot", "label": "written"},
        {"op": "fork", "program": [{"op": "read", "region": "s", "stride": "2M", "expect": 1},
                                    {"op": "snapshot", "label": "child"}]},
        {"op": "wait"}]});
    let pte = run(w.clone(), &[("vm/ptshare", "pte")]);
    let pmd = run(w.clone(), &[("vm/ptshare", "pmd")]);
    let both = run(w, &[("vm/ptshare", "pte,pmd")]);
    let child_tables = |r: &Report| tables(snap(r, "child")) - tables(snap(r, "written"));
    // The child's pgd and stack (4 tables) and the region's PUD table; with pte sharing only,
    // also its own PMD table for the region.
    assert_eq!(child_tables(&pte), 6);
    assert_eq!(child_tables(&pmd), 5, "the PMD table and its 512 PTE tables are the parent's");
    assert_eq!(child_tables(&both), 5, "the highest level is shared first");
    assert_eq!(vmstat(snap(&pte, "child"), "mmsim_pt_share"), 512);
    assert_eq!(vmstat(snap(&both, "child"), "mmsim_pt_share"), 1);
    let vm_pte = |r: &Report| snap(r, "child").processes.iter().find(|p| p.pid == 2).unwrap().vm_pte;
    assert_eq!(vm_pte(&pmd), vm_pte(&pte), "VmPTE counts what the child reaches either way");
}

/// PUD tables: a region covering a whole 512 GiB range shares its PUD table (and the 512 PMD
/// and 512 PTE tables under it).
#[test]
fn pud_tables_are_shared_too() {
    let w = json!({"knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "s", "size": "512G", "addr": "0x8000000000", "fixed": true, "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "stride": "1G"},
        {"op": "snapshot", "label": "written"},
        {"op": "fork", "program": [{"op": "read", "region": "s", "stride": "1G", "expect": 1},
                                    {"op": "snapshot", "label": "child"}]},
        {"op": "wait"}]});
    let r = run(w, &[("vm/ptshare", "pte,pmd,pud")]);
    assert_eq!(tables(snap(&r, "child")) - tables(snap(&r, "written")), 4, "the child's own: pgd and stack");
    assert_eq!(vmstat(snap(&r, "child"), "mmsim_pt_share"), 1);
    let c = snap(&r, "child").processes.iter().find(|p| p.pid == 2).unwrap().clone();
    assert_eq!(c.minflt, 0);
    assert_eq!(c.vm_pte, 12 + 4 * (1 + 512 + 512), "the stack's 3 tables and the shared subtree");
}

/// The munmap-in-the-middle report (Ray Bryant): four children each replace 2 MiB of a shared
/// 8 MiB region by private memory and write their own data there. With the thread's rules
/// every child keeps its data; the first posting (`rfc`) left the shared table attached, so
/// the children wrote into each other's pages, and the reference model sees it.
fn munmap_in_the_middle() -> Value {
    let child = |v: u64| {
        json!({"op": "fork", "program": [
            {"op": "munmap", "region": "s", "offset": "2M", "length": "2M"},
            {"op": "mmap", "name": "p", "size": "2M", "addr": "0x40200000", "fixed": true},
            {"op": "write", "region": "p", "value": v},
            {"op": "sleep", "ms": 1},
            {"op": "read", "region": "p", "expect": v}]})
    };
    json!({"machine": {"cpus": 4}, "knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "s", "size": "8M", "addr": BASE, "fixed": true, "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 1},
        child(11), child(12), child(13), child(14),
        {"op": "wait"},
        {"op": "read", "region": "s", "expect": 1}]})
}

#[test]
fn munmap_in_the_middle_keeps_each_childs_data_under_the_fixed_rules() {
    for levels in ["off", "pte", "pte,pmd"] {
        let r = run(munmap_in_the_middle(), &[("vm/ptshare", levels)]);
        assert_eq!((r.check.mismatches, r.check.expect_failures), (0, 0), "{levels}: {:?}", r.events);
        assert!(!r.failed);
    }
}

#[test]
fn munmap_in_the_middle_corrupts_data_under_the_first_posting() {
    let w = parse_workload(&munmap_in_the_middle().to_string()).unwrap();
    let sets = [("vm/ptshare", "pte"), ("vm/ptshare_compat", "rfc")].map(|(k, v)| (k.to_string(), v.to_string()));
    let r = run_with(&w, &sets, &RunOptions { check: true, ..Default::default() }).unwrap();
    assert!(r.failed);
    assert!(r.check.mismatches > 0, "the reference model catches it");
    // A child reads what another child wrote: "expects 1X, simulator returned 1Y".
    let crossed = |m: &str| {
        let nums: Vec<u64> = m.split(|c: char| !c.is_ascii_digit()).filter_map(|t| t.parse().ok()).collect();
        nums.iter().rev().take(2).all(|n| (11..=14).contains(n))
            && nums.iter().rev().take(2).collect::<std::collections::HashSet<_>>().len() == 2
    };
    let other = r.events.iter().find(|e| e.kind == "mismatch").expect("a mismatch");
    assert!(crossed(&other.message), "{}", other.message);
    // The first table of the aligned region was never shared: three of four per child.
    assert_eq!(r.vmstat.get("mmsim_pt_share"), Some(12));
}

/// Under `rfc` the first PTE table of an aligned region is never shared; under `fixed` it is.
#[test]
fn the_first_pte_table_of_an_aligned_region_is_shared_only_under_fixed() {
    let share = |compat: &str| {
        let r = run(fork_readers(vec![]), &[("vm/ptshare", "pte"), ("vm/ptshare_compat", compat)]);
        let flt = |l: &str| {
            let s = r.snapshots.iter().find(|s| s.label == l && s.pid == 2).unwrap();
            s.processes.iter().find(|p| p.pid == 2).unwrap().minflt
        };
        flt("c1") - flt("c0")
    };
    assert_eq!(share("fixed"), 0);
    assert_eq!(share("rfc"), 512, "the first 2 MiB refaults");
}

/// A zap of a shared table's entries (possible under `rfc`: the partial munmap of an aligned
/// 2 MiB leaves the table attached) flushes the other sharers' translations on their CPUs: a
/// child that read the range before faults again afterwards instead of reading through stale
/// TLB entries.
#[test]
fn a_change_to_a_shared_entry_flushes_every_sharer() {
    let w = json!({"machine": {"cpus": 2}, "knobs": {"fault_around_bytes": 4096}, "program": [
        {"op": "mmap", "name": "s", "size": "4M", "addr": BASE, "fixed": true, "flags": ["shared", "anonymous"]},
        {"op": "write", "region": "s", "value": 3},
        {"op": "fork", "cpu": 1, "program": [
            {"op": "read", "region": "s", "offset": "2M", "expect": 3},
            {"op": "sleep", "ms": 2},
            {"op": "snapshot", "label": "b0"},
            {"op": "read", "region": "s", "offset": "2M", "expect": 3},
            {"op": "snapshot", "label": "b1"}]},
        {"op": "sleep", "ms": 1},
        {"op": "munmap", "region": "s", "offset": "2M", "length": "2M"},
        {"op": "wait"}]});
    let r = run(w, &[("vm/ptshare", "pte"), ("vm/ptshare_compat", "rfc")]);
    assert_eq!((r.check.mismatches, r.check.expect_failures), (0, 0), "{:?}", r.events);
    let b = |l: &str| snap(&r, l).processes.iter().find(|p| p.pid == 2).unwrap().minflt;
    assert_eq!(b("b1") - b("b0"), 512, "the zapped table's range refaults in the child");
    assert!(r.profile.get("native_flush_tlb_multi").unwrap_or(0.0) > 0.0, "an IPI to the child's CPU");
}

/// The last user frees a shared table: after everyone exits, nothing is left allocated.
#[test]
fn the_last_user_frees_the_tables() {
    for levels in ["pte", "pmd", "pud", "pte,pmd,pud"] {
        let r = run(fork_readers(vec![]), &[("vm/ptshare", levels)]);
        let end = r.meminfo.get("PageTables").unwrap() - r.baseline.meminfo.get("PageTables").unwrap();
        assert_eq!(end, -16, "{levels}: only the first process's own start-up tables went");
    }
}
